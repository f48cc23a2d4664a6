//! numpy scalars as numpy's own `repr` prints them, for a frame's locals: `np.int8(-3)`,
//! `np.float16(6.55e+04)`, `np.complex128(-0-1j)`, `np.longdouble('0.1')`, `np.str_('abc')`,
//! `np.bytes_(b'ab')`, `np.datetime64('2024-01-01T12:00:00')`, `np.timedelta64(5,'s')` on numpy
//! 2; `-3`, `65500.0`, `(-0-1j)`, `0.1`, `'abc'`, `b'ab'`, `numpy.datetime64('2024-01-01')` on
//! numpy 1. A value it cannot print exactly is None, which the caller shows as
//! `<numpy.X object at 0x…>`.
//!
//! The layouts are numpy's public `arrayscalars.h` (numpy/_core/include/numpy in 2.x,
//! numpy/core/include/numpy in 1.x; the same from 1.20 to 2.5): every scalar is `PyObject_HEAD`
//! then `obval` (`PyHalfScalarObject`'s `npy_half`, `PyCFloatScalarObject`'s two floats,
//! `PyLongDoubleScalarObject`'s `long double`, ...); `PyDatetimeScalarObject` and
//! `PyTimedeltaScalarObject` add `obmeta`, a `PyArray_DatetimeMetaData {NPY_DATETIMEUNIT base;
//! int num}` after the `npy_int64 obval`; `np.str_` and `np.bytes_` are `str` and `bytes`
//! subclasses whose instances start with those objects (`PyUnicodeScalarObject`'s `base`), so
//! they read as a `str` and a `bytes`.
//!
//! The texts are those of `scalartypes.c.src`'s `<type>type_repr` (numpy 1.26.4, 2.0 to 2.5)
//! under numpy's default print options; `np.set_printoptions(legacy=...)` in the target is not
//! followed.

use super::numpy_float::{either, Float, Trim};
use super::objects::{bytes_repr, str_repr};
use super::snapshot::Snapshot;
use crate::arch::Arch;

/// numpy's version as the target imported it: (major, minor).
pub type NumpyVersion = (u8, u16);

/// The most bytes of an `np.bytes_` read; a longer one is not printed.
const MAX_NUMPY_BYTES: u64 = 4096;
/// `NPY_DATETIME_NAT` (npy_common.h): the int64 minimum.
const NAT: i64 = i64::MIN;
/// `NPY_DATETIMEUNIT` (ndarraytypes.h, 1.x and 2.x) in order: `NPY_FR_Y` = 0 to `NPY_FR_as`
/// = 13, then `NPY_FR_GENERIC` = 14; 3 was `NPY_FR_B`, removed in 1.7.
const UNITS: [&str; 15] = [
    "Y", "M", "W", "", "D", "h", "m", "s", "ms", "us", "ns", "ps", "fs", "as", "generic",
];
const UNIT_D: i32 = 4;
const UNIT_H: i32 = 5;
const UNIT_S: i32 = 7;
const UNIT_GENERIC: i32 = 14;

/// A float type numpy has scalars of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FloatType {
    Half,
    Single,
    Double,
    Long,
}

impl FloatType {
    /// The bytes of one value in a scalar (`long double`: 16 on x86-64, 10 of them used).
    fn size(self) -> u64 {
        match self {
            FloatType::Half => 2,
            FloatType::Single => 4,
            FloatType::Double => 8,
            FloatType::Long => 16,
        }
    }

    /// The name numpy 2's repr of a real scalar of this type writes (scalartypes.c.src's
    /// `repr_format`).
    fn real_name(self) -> &'static str {
        match self {
            FloatType::Half => "float16",
            FloatType::Single => "float32",
            FloatType::Double => "float64",
            FloatType::Long => "longdouble",
        }
    }

    /// The same of a complex scalar (`crepr_format`; no complex float16).
    fn complex_name(self) -> &'static str {
        match self {
            FloatType::Half | FloatType::Single => "complex64",
            FloatType::Double => "complex128",
            FloatType::Long => "clongdouble",
        }
    }

    /// `max_positional` of `<type>type_repr_either` (scalartypes.c.src): 1e16 for every type
    /// until numpy 2.3 made it 1e3 for float16 and 1e6 for float32.
    fn max_positional(self, v: NumpyVersion) -> u64 {
        match self {
            _ if v < (2, 3) => 10u64.pow(16),
            FloatType::Half => 1_000,
            FloatType::Single => 1_000_000,
            _ => 10u64.pow(16),
        }
    }
}

/// What a numpy scalar type holds, by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Int { size: usize, signed: bool },
    Bool,
    Real(FloatType),
    Complex(FloatType),
    Str,
    Bytes,
    Datetime,
    Timedelta,
    Void,
}

fn kind_of(name: &str) -> Option<Kind> {
    let int = |size, signed| Some(Kind::Int { size, signed });
    match name {
        "int8" | "byte" => int(1, true),
        "int16" | "short" => int(2, true),
        "int32" | "intc" => int(4, true),
        "int64" | "longlong" | "long" | "int_" => int(8, true),
        "uint8" | "ubyte" => int(1, false),
        "uint16" | "ushort" => int(2, false),
        "uint32" | "uintc" => int(4, false),
        "uint64" | "ulonglong" | "ulong" | "uint" => int(8, false),
        "bool" | "bool_" => Some(Kind::Bool),
        "float16" | "half" => Some(Kind::Real(FloatType::Half)),
        "float32" | "single" => Some(Kind::Real(FloatType::Single)),
        "float64" | "double" => Some(Kind::Real(FloatType::Double)),
        "longdouble" | "float128" => Some(Kind::Real(FloatType::Long)),
        "complex64" | "csingle" => Some(Kind::Complex(FloatType::Single)),
        "complex128" | "cdouble" => Some(Kind::Complex(FloatType::Double)),
        "clongdouble" | "complex256" => Some(Kind::Complex(FloatType::Long)),
        "str_" => Some(Kind::Str),
        "bytes_" => Some(Kind::Bytes),
        "datetime64" => Some(Kind::Datetime),
        "timedelta64" => Some(Kind::Timedelta),
        "void" => Some(Kind::Void),
        _ => None,
    }
}

impl Snapshot {
    /// numpy's own `repr` of the scalar at `obj` of type `numpy.<name>`; None for a type it
    /// does not decode (`np.object_`, a structured `np.void`), a value it cannot print
    /// exactly, or where numpy's version is unknown.
    pub fn numpy_scalar_repr(&self, obj: u64, type_name: &str) -> Option<String> {
        let name = type_name.strip_prefix("numpy.")?;
        let kind = kind_of(name)?;
        let v = self.numpy_version().ok()??;
        let at = self.object_fields(obj).ok()?;
        let m = &self.mem;
        let np2 = v.0 >= 2;
        // numpy 2's repr names the type (NEP 51) by its canonical name, whatever alias it was
        // made by (`np.longlong(5)` is `np.int64(5)`); numpy 1's is the value's text alone.
        let wrap = |np_name: &str, text: String| {
            if np2 {
                format!("np.{np_name}({text})")
            } else {
                text
            }
        };
        Some(match kind {
            Kind::Int { size, signed } => {
                let mut b = [0u8; 8];
                m.read_into(at, &mut b[..size]).ok()?;
                let u = u64::from_le_bytes(b);
                let np_name = format!("{}int{}", if signed { "" } else { "u" }, size * 8);
                wrap(
                    &np_name,
                    if signed {
                        let shift = 64 - 8 * size as u32;
                        (((u << shift) as i64) >> shift).to_string()
                    } else {
                        u.to_string()
                    },
                )
            }
            Kind::Bool => {
                let t = m.read_u8(at).ok()? != 0;
                match (np2, t) {
                    (false, t) => (if t { "True" } else { "False" }).into(),
                    (true, t) => (if t { "np.True_" } else { "np.False_" }).into(),
                }
            }
            Kind::Real(ty) => {
                let x = self.numpy_float(obj, at, ty, 0)?;
                let text = either(x, ty.max_positional(v), Trim::LeaveOneZero, false);
                match ty {
                    FloatType::Long if np2 => format!("np.longdouble('{text}')"),
                    _ => wrap(ty.real_name(), text),
                }
            }
            Kind::Complex(ty) => {
                let re = self.numpy_float(obj, at, ty, 0)?;
                let im = self.numpy_float(obj, at, ty, 1)?;
                complex_repr(re, im, ty, v)
            }
            Kind::Str => wrap("str_", str_repr(&self.read_str(obj).ok()?)),
            Kind::Bytes => {
                let (b, len) = self.read_bytes(obj, MAX_NUMPY_BYTES).ok()?;
                if len > b.len() as u64 {
                    return None;
                }
                wrap("bytes_", bytes_repr(&b))
            }
            Kind::Datetime | Kind::Timedelta => {
                let value = m.read_i64(at).ok()?;
                let base = m.read_i32(at.checked_add(8)?).ok()?;
                let num = m.read_i32(at.checked_add(12)?).ok()?;
                time_repr(kind == Kind::Datetime, value, base, num, v)?
            }
            Kind::Void => {
                let hex = self.void_hex(at, v)?;
                format!("{}void(b'{hex}')", if np2 { "np." } else { "" })
            }
        })
    }

    /// The bytes of an unstructured `np.void` as `voidtype_repr`'s `_void_to_hex` writes them
    /// (`\x61\x62`, upper-case digits); None for a structured one (its descriptor has
    /// `names`), whose text numpy makes in Python. `PyVoidScalarObject` (arrayscalars.h) is
    /// `PyObject_VAR_HEAD`, `char *obval`, `PyArray_Descr *descr`; the descriptor's `names`
    /// is at 40 after its header in 1.x (`PyArray_Descr`), at 88 in 2.x
    /// (`_PyArray_LegacyDescr`, ndarraytypes.h), and the length is its `elsize`.
    fn void_hex(&self, at: u64, v: NumpyVersion) -> Option<String> {
        let m = &self.mem;
        let data = m.read_ptr(at.checked_add(8)?).ok()?;
        let descr = m.read_ptr(at.checked_add(16)?).ok()?;
        let names = if v.0 >= 2 { 88 } else { 40 };
        let h = self.layout.pyobject.header_size();
        if m.read_ptr(descr.checked_add(h + names)?).ok()? != 0 {
            return None;
        }
        let dtype = self.numpy_dtype(descr, v.0).ok()?;
        if dtype.kind != b'V' || dtype.elsize > MAX_NUMPY_BYTES {
            return None;
        }
        let b = m.read_vec(data, dtype.elsize, MAX_NUMPY_BYTES).ok()?;
        Some(b.iter().map(|c| format!("\\x{c:02X}")).collect())
    }

    /// Part `index` (0: the real, 1: the imaginary) of the float scalar at `obj` whose header
    /// ends at `at`. A `long double` is x87's 80 bits only on x86-64 (aarch64's is IEEE
    /// binary128, not decoded here: None), aligned to 16 bytes.
    fn numpy_float(&self, obj: u64, at: u64, ty: FloatType, index: u64) -> Option<Float> {
        let m = &self.mem;
        let off = ty.size() * index;
        Some(match ty {
            FloatType::Half => Float::ieee(m.read_u16(at.checked_add(off)?).ok()? as u128, 10, 5),
            FloatType::Single => Float::ieee(m.read_u32(at.checked_add(off)?).ok()? as u128, 23, 8),
            FloatType::Double => {
                Float::ieee(m.read_u64(at.checked_add(off)?).ok()? as u128, 52, 11)
            }
            FloatType::Long => {
                if self.arch != Arch::X86_64 {
                    return None;
                }
                let start = obj.checked_add((at - obj).next_multiple_of(16))?;
                let mut b = [0u8; 10];
                m.read_into(start.checked_add(off)?, &mut b).ok()?;
                Float::x87(&b)?
            }
        })
    }
}

/// `c<type>type_repr` (scalartypes.c.src): `1+2j`, `-0-1j`, `nan+infj`, and a real part that
/// is +0 left out (`1j`); numpy 2 wraps it as `np.complex128(1+2j)` (`np.clongdouble('1+2j')`),
/// numpy 1 puts the two parts in parentheses (`(1+2j)`).
fn complex_repr(re: Float, im: Float, ty: FloatType, v: NumpyVersion) -> String {
    let name = ty.complex_name();
    let max = ty.max_positional(v);
    let plus_zero = matches!(
        re,
        Float::Finite {
            neg: false,
            mant: 0,
            ..
        }
    );
    let body = if plus_zero {
        format!("{}j", either(im, max, Trim::DptZeros, false))
    } else {
        format!(
            "{}{}j",
            either(re, max, Trim::DptZeros, false),
            either(im, max, Trim::DptZeros, true)
        )
    };
    match (v.0 >= 2, ty) {
        (true, FloatType::Long) => format!("np.{name}('{body}')"),
        (true, _) => format!("np.{name}({body})"),
        (false, _) if plus_zero => body,
        (false, _) => format!("({body})"),
    }
}

/// `datetimetype_repr` and `timedeltatype_repr` (scalartypes.c.src); None for a unit that is
/// not numpy's or a value whose date does not fit numpy's own arithmetic.
fn time_repr(datetime: bool, value: i64, base: i32, num: i32, v: NumpyVersion) -> Option<String> {
    let unit = *UNITS.get(usize::try_from(base).ok()?)?;
    if unit.is_empty() || num < 1 {
        return None;
    }
    let meta = if base == UNIT_GENERIC || num == 1 {
        unit.to_string()
    } else {
        format!("{num}{unit}")
    };
    let p = if v.0 >= 2 { "np." } else { "numpy." };
    if !datetime {
        let val = if value == NAT {
            "'NaT'".to_string()
        } else {
            value.to_string()
        };
        return Some(if base == UNIT_GENERIC {
            format!("{p}timedelta64({val})")
        } else {
            format!("{p}timedelta64({val},'{meta}')")
        });
    }
    let iso = iso_datetime(value, base, num)?;
    // The unit is left out where the text implies it; numpy 2.4 keeps it for NaT.
    let implied = (num == 1 && base != UNIT_H) || base == UNIT_GENERIC;
    Some(if implied && !(value == NAT && v >= (2, 4)) {
        format!("{p}datetime64('{iso}')")
    } else {
        format!("{p}datetime64('{iso}','{meta}')")
    })
}

/// `NpyDatetime_MakeISO8601Datetime` of a datetime64 (datetime_strings.c, UTC, no time zone):
/// the date and time to the unit's precision (`2024`, `2024-03`, `2024-01-01T12`,
/// `1970-01-01T00:00:00.000000000001`); weeks print as days; NaT and the generic unit `NaT`.
fn iso_datetime(value: i64, base: i32, num: i32) -> Option<String> {
    if value == NAT || base == UNIT_GENERIC {
        return Some("NaT".into());
    }
    // numpy scales by `num` in int64 (convert_datetime_to_datetimestruct): an overflow there
    // has no defined text.
    let total = value.checked_mul(num as i64)? as i128;
    let year = |y: i128| Some(format!("{:04}", i64::try_from(y).ok()?));
    match base {
        0 => return year(1970 + total),
        1 => {
            let y = year(1970 + total.div_euclid(12))?;
            return Some(format!("{y}-{:02}", total.rem_euclid(12) + 1));
        }
        _ => {}
    }
    // Days and, below them, units of the day.
    let (days, rem, per_day) = match base {
        2 => (total * 7, 0, 1),
        UNIT_D => (total, 0, 1),
        _ => {
            let per_day: i128 = match base {
                UNIT_H => 24,
                6 => 1440,
                _ => 86_400 * 10i128.pow(3 * (base - UNIT_S) as u32),
            };
            (
                total.div_euclid(per_day),
                total.rem_euclid(per_day),
                per_day,
            )
        }
    };
    let (y, mo, d) = civil_from_days(days);
    let mut s = format!("{}-{mo:02}-{d:02}", year(y)?);
    match base {
        UNIT_H => s += &format!("T{rem:02}"),
        6 => s += &format!("T{:02}:{:02}", rem / 60, rem % 60),
        b if b >= UNIT_S => {
            let per_sec = per_day / 86_400;
            let (sec, frac) = (rem / per_sec, rem % per_sec);
            s += &format!("T{:02}:{:02}:{:02}", sec / 3600, sec / 60 % 60, sec % 60);
            if b > UNIT_S {
                let width = 3 * (b - UNIT_S) as usize;
                s += &format!(".{frac:0width$}");
            }
        }
        _ => {}
    }
    Some(s)
}

/// The proleptic Gregorian (year, month, day) of a count of days from 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(days: i128) -> (i128, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i128::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpython::layout::Layout;
    use crate::cpython::version::Version;
    use crate::memory::FakeMemory;

    const V2: NumpyVersion = (2, 5);
    const V1: NumpyVersion = (1, 26);

    fn snap(obval: &[u8], v: NumpyVersion) -> Snapshot {
        let l = Layout::builtin(Version::new(3, 12, 1)).unwrap();
        let mut m = FakeMemory::new();
        m.put(0x100, &[0u8; 64]).put(0x110, obval);
        let s = Snapshot::for_test(m, l);
        let _ = s.numpy.set(Ok(Some(v)));
        s
    }

    fn repr(obval: &[u8], name: &str, v: NumpyVersion) -> Option<String> {
        snap(obval, v).numpy_scalar_repr(0x100, &format!("numpy.{name}"))
    }

    fn c128(re: f64, im: f64) -> Vec<u8> {
        [re.to_le_bytes(), im.to_le_bytes()].concat()
    }

    #[test]
    fn integers_floats_and_bools() {
        for (v, int8, f64s, f32s, t) in [
            (
                V2,
                "np.int8(-3)",
                "np.float64(1.5)",
                "np.float32(0.1)",
                "np.True_",
            ),
            (V1, "-3", "1.5", "0.1", "True"),
        ] {
            assert_eq!(repr(&[0xfd], "int8", v).unwrap(), int8);
            assert_eq!(repr(&1.5f64.to_le_bytes(), "float64", v).unwrap(), f64s);
            assert_eq!(repr(&0.1f32.to_le_bytes(), "float32", v).unwrap(), f32s);
            assert_eq!(
                repr(&[1], if v == V1 { "bool_" } else { "bool" }, v).unwrap(),
                t
            );
        }
        assert_eq!(
            repr(&0x7bffu16.to_le_bytes(), "float16", V2).unwrap(),
            "np.float16(6.55e+04)"
        );
        assert_eq!(
            repr(&0x7bffu16.to_le_bytes(), "float16", (2, 2)).unwrap(),
            "np.float16(65500.0)"
        );
        assert_eq!(
            repr(&0x7bffu16.to_le_bytes(), "float16", V1).unwrap(),
            "65500.0"
        );
        assert_eq!(
            repr(&1e6f32.to_le_bytes(), "float32", V2).unwrap(),
            "np.float32(1e+06)"
        );
        assert_eq!(
            repr(&1e6f32.to_le_bytes(), "float32", V1).unwrap(),
            "1000000.0"
        );
        // Aliases print under the canonical name, as numpy's repr does.
        assert_eq!(
            repr(&[5, 0, 0, 0, 0, 0, 0, 0], "longlong", V2).unwrap(),
            "np.int64(5)"
        );
        assert_eq!(repr(&[5, 0, 0, 0], "uintc", V2).unwrap(), "np.uint32(5)");
        assert_eq!(
            repr(&1.5f64.to_le_bytes(), "double", V2).unwrap(),
            "np.float64(1.5)"
        );
        assert_eq!(
            repr(&c128(1.0, 2.0), "cdouble", V2).unwrap(),
            "np.complex128(1+2j)"
        );
    }

    #[test]
    fn complex_numbers_as_numpy_writes_them() {
        let nan = f64::NAN;
        let inf = f64::INFINITY;
        for (re, im, two, one) in [
            (1.0, 2.0, "np.complex128(1+2j)", "(1+2j)"),
            (-0.0, -1.0, "np.complex128(-0-1j)", "(-0-1j)"),
            (nan, inf, "np.complex128(nan+infj)", "(nan+infj)"),
            (0.0, 0.0, "np.complex128(0j)", "0j"),
            (0.0, -0.0, "np.complex128(-0j)", "-0j"),
            (-0.0, 0.0, "np.complex128(-0+0j)", "(-0+0j)"),
            (1.0, nan, "np.complex128(1+nanj)", "(1+nanj)"),
            (-inf, -inf, "np.complex128(-inf-infj)", "(-inf-infj)"),
            (1e20, 1e-5, "np.complex128(1e+20+1e-05j)", "(1e+20+1e-05j)"),
            (1.5, 0.0, "np.complex128(1.5+0j)", "(1.5+0j)"),
        ] {
            assert_eq!(repr(&c128(re, im), "complex128", V2).unwrap(), two);
            assert_eq!(repr(&c128(re, im), "complex128", V1).unwrap(), one);
        }
        let c64 = [1e7f32.to_le_bytes(), 1f32.to_le_bytes()].concat();
        assert_eq!(
            repr(&c64, "complex64", V2).unwrap(),
            "np.complex64(1e+07+1j)"
        );
        assert_eq!(repr(&c64, "complex64", V1).unwrap(), "(10000000+1j)");
    }

    #[test]
    fn long_doubles_only_as_x87() {
        let mut b = [0u8; 32];
        b[..8].copy_from_slice(&0xc000_0000_0000_0000u64.to_le_bytes());
        b[8..10].copy_from_slice(&0x3fffu16.to_le_bytes());
        b[16..24].copy_from_slice(&0x8000_0000_0000_0000u64.to_le_bytes());
        b[24..26].copy_from_slice(&0x4000u16.to_le_bytes());
        assert_eq!(repr(&b, "longdouble", V2).unwrap(), "np.longdouble('1.5')");
        assert_eq!(repr(&b, "longdouble", V1).unwrap(), "1.5");
        assert_eq!(
            repr(&b, "clongdouble", V2).unwrap(),
            "np.clongdouble('1.5+2j')"
        );
        let mut s = snap(&b, V2);
        s.arch = Arch::Aarch64;
        assert_eq!(s.numpy_scalar_repr(0x100, "numpy.longdouble"), None);
        // An unnormal (no integer bit) has no text.
        b[7] = 0x40;
        assert_eq!(repr(&b, "longdouble", V2), None);
    }

    #[test]
    fn unstructured_voids_as_hex() {
        // The scalar: obval (0x200) and descr (0x300) after ob_size; the descriptor's kind
        // and elsize for each major, names at 88 (2.x) or 40 (1.x) after its header.
        for (v, elsize_at, names_at, want) in [
            (V2, 24, 88, "np.void(b'\\x61\\xFF')"),
            (V1, 16, 40, "void(b'\\x61\\xFF')"),
        ] {
            let mut b = [0u8; 24];
            b[8..16].copy_from_slice(&0x200u64.to_le_bytes());
            b[16..24].copy_from_slice(&0x300u64.to_le_bytes());
            let l = Layout::builtin(Version::new(3, 12, 1)).unwrap();
            let mut m = FakeMemory::new();
            m.put(0x100, &[0u8; 64])
                .put(0x110, &b)
                .put(0x200, &[0x61, 0xff]);
            m.put(0x300, &[0u8; 128]).put(0x318, b"V");
            m.put(0x310 + elsize_at, &2u32.to_le_bytes());
            let s = Snapshot::for_test(m.clone(), l.clone());
            let _ = s.numpy.set(Ok(Some(v)));
            assert_eq!(s.numpy_scalar_repr(0x100, "numpy.void").unwrap(), want);
            // A structured one (names set) is left to the caller.
            m.put_u64(0x310 + names_at, 0x999);
            let s = Snapshot::for_test(m, l);
            let _ = s.numpy.set(Ok(Some(v)));
            assert_eq!(s.numpy_scalar_repr(0x100, "numpy.void"), None);
        }
    }

    #[test]
    fn any_bytes_give_text_or_none_never_a_panic() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let kinds = [
            "float16",
            "float32",
            "float64",
            "longdouble",
            "complex64",
            "complex128",
            "clongdouble",
            "datetime64",
            "timedelta64",
            "int16",
            "bool",
            "void",
            "bytes_",
        ];
        for i in 0..4000 {
            let mut b = [0u8; 32];
            for c in b.chunks_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                c.copy_from_slice(&x.to_le_bytes());
            }
            let v = if i % 2 == 0 { V2 } else { V1 };
            let _ = repr(&b, kinds[i % kinds.len()], v);
        }
    }

    fn time(value: i64, base: i32, num: i32) -> Vec<u8> {
        [
            value.to_le_bytes().as_slice(),
            &base.to_le_bytes(),
            &num.to_le_bytes(),
        ]
        .concat()
    }

    #[test]
    fn datetimes_and_timedeltas() {
        let day = 19_723; // 2024-01-01
        for (value, base, num, v, want) in [
            (day, 4, 1, V2, "np.datetime64('2024-01-01')"),
            (
                day * 86_400 + 43_200,
                7,
                1,
                V2,
                "np.datetime64('2024-01-01T12:00:00')",
            ),
            (NAT, 14, 1, V2, "np.datetime64('NaT','generic')"),
            (NAT, 7, 1, V2, "np.datetime64('NaT','s')"),
            (NAT, 7, 1, (2, 3), "np.datetime64('NaT')"),
            (NAT, 14, 1, V1, "numpy.datetime64('NaT')"),
            (54, 0, 1, V2, "np.datetime64('2024')"),
            (650, 1, 1, V2, "np.datetime64('2024-03')"),
            (10, 7, 3, V2, "np.datetime64('1970-01-01T00:00:30','3s')"),
            (5, 2, 1, V2, "np.datetime64('1970-02-05')"),
            (-756_052, 4, 1, V2, "np.datetime64('-100-01-01')"),
            (3_789_391, 4, 1, V2, "np.datetime64('12345-01-01')"),
            (
                1,
                11,
                1,
                V1,
                "numpy.datetime64('1970-01-01T00:00:00.000000000001')",
            ),
            (-1, 7, 1, V2, "np.datetime64('1969-12-31T23:59:59')"),
            (
                day * 24 + 12,
                5,
                1,
                V2,
                "np.datetime64('2024-01-01T12','h')",
            ),
        ] {
            assert_eq!(
                repr(&time(value, base, num), "datetime64", v).unwrap(),
                want
            );
        }
        for (value, base, num, v, want) in [
            (5, 7, 1, V2, "np.timedelta64(5,'s')"),
            (NAT, 14, 1, V2, "np.timedelta64('NaT')"),
            (NAT, 7, 1, V1, "numpy.timedelta64('NaT','s')"),
            (5, 14, 1, V2, "np.timedelta64(5)"),
            (3, 8, 10, V2, "np.timedelta64(3,'10ms')"),
            (-7, 4, 1, V1, "numpy.timedelta64(-7,'D')"),
        ] {
            assert_eq!(
                repr(&time(value, base, num), "timedelta64", v).unwrap(),
                want
            );
        }
        // numpy's retired business-day unit, units past generic, a zero multiplier, and a
        // scaling that overflows int64.
        for (value, base, num) in [
            (1, 3, 1),
            (1, 15, 1),
            (1, -1, 1),
            (1, 7, 0),
            (i64::MAX, 7, 2),
        ] {
            assert_eq!(repr(&time(value, base, num), "datetime64", V2), None);
        }
    }
}
