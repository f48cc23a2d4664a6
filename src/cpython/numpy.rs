//! numpy's arrays and scalars, read from numpy's public struct layout
//! (`numpy/_core/include/numpy/ndarraytypes.h`, `numpy/core/include/numpy/ndarraytypes.h` in
//! 1.x) for numpy 1.x and 2.x: what `ndarray.__sizeof__` counts (the heap census), a summary
//! of an array (`<numpy.ndarray shape=(1000, 1000) dtype=float64 at 0x…>`) for locals, and
//! the version the scalars' text depends on (`numpy_scalars.rs`).
//!
//! The one field whose place differs between the two majors is `PyArray_Descr.elsize` (an
//! `int` at 16 bytes after the object header in 1.x, an `npy_intp` at 24 in 2.x, after 2.0's
//! new 64-bit `flags`); the major comes from the target's own `numpy.__version__`, never
//! guessed from the bytes. Every field is read after the object header, so a free-threaded
//! build's longer header moves them all alike.

use super::numpy_scalars::NumpyVersion;
use super::snapshot::Snapshot;
use super::values::field;
use crate::error::ReadError;

/// `NPY_MAXDIMS`: 32 in numpy 1.x, 64 from 2.0 (ndarraytypes.h): more dimensions is corrupt.
pub const MAX_NDIM: u64 = 64;
/// `NPY_ARRAY_OWNDATA` (ndarraytypes.h, 1.x and 2.x): the array frees its data.
const NPY_ARRAY_OWNDATA: u32 = 0x0004;

// `PyArrayObject_fields` after `PyObject_HEAD` (ndarraytypes.h, the same in numpy 1.20 to
// 2.5): `char *data`, `int nd`, `npy_intp *dimensions`, `npy_intp *strides`, `PyObject *base`,
// `PyArray_Descr *descr`, `int flags`, then `weakreflist`, `_buffer_info`, `mem_handler`.
const ARRAY_ND: usize = 8;
const ARRAY_DIMENSIONS: usize = 16;
const ARRAY_BASE: usize = 32;
const ARRAY_DESCR: usize = 40;
const ARRAY_FLAGS: usize = 48;
/// The bytes of those fields read, through `flags`.
const ARRAY_FIELDS: usize = 52;

// `PyArray_Descr` after `PyObject_HEAD`: `PyTypeObject *typeobj`, `char kind`, `char type`,
// `char byteorder`, `char flags` (2.x: `_former_flags`), `int type_num` in both majors; then
// 1.x (numpy/core/include/numpy/ndarraytypes.h, 1.26.4): `int elsize` at 16; 2.x
// (numpy/_core/include/numpy/ndarraytypes.h, 2.0 to 2.5): `npy_uint64 flags` at 16,
// `npy_intp elsize` at 24.
const DESCR_KIND: u64 = 8;
const DESCR_ELSIZE_V1: u64 = 16;
const DESCR_ELSIZE_V2: u64 = 24;

/// One array's fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NdArray {
    pub shape: Vec<u64>,
    /// `NPY_ARRAY_OWNDATA`: not a view; `ndarray.__sizeof__` counts its data.
    pub owns_data: bool,
    /// The object a view keeps alive (another array, a bytes, a buffer's owner); 0 for none.
    pub base: u64,
    pub descr: u64,
}

/// An array's element type, from its descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dtype {
    /// `dtype.kind`: b, i, u, f, c, O, S, U, V, M, m.
    pub kind: u8,
    /// `dtype.itemsize`.
    pub elsize: u64,
}

impl Dtype {
    /// `dtype.name` (without a datetime's unit): `float64`, `int8`, `bool`, `bytes40`.
    pub fn name(&self) -> String {
        let bits = self.elsize.saturating_mul(8);
        match self.kind {
            b'b' => "bool".into(),
            b'i' => format!("int{bits}"),
            b'u' => format!("uint{bits}"),
            b'f' => format!("float{bits}"),
            b'c' => format!("complex{bits}"),
            b'O' => "object".into(),
            b'S' => format!("bytes{bits}"),
            b'U' => format!("str{bits}"),
            b'V' => format!("void{bits}"),
            b'M' => "datetime64".into(),
            b'm' => "timedelta64".into(),
            k => format!("<dtype kind {:?}>", k as char),
        }
    }
}

impl NdArray {
    /// `ndarray.nbytes`: the element size times every dimension; an error when the product
    /// overflows (a lying shape).
    pub fn nbytes(&self, at: u64, elsize: u64) -> Result<u64, ReadError> {
        self.shape
            .iter()
            .try_fold(elsize, |n, &d| n.checked_mul(d))
            .ok_or(ReadError::corrupt(
                at,
                "numpy array shape (its size overflows)",
            ))
    }

    /// The shape as numpy prints it: `(1000, 1000)`, `(5,)`, `()`.
    pub fn shape_text(&self) -> String {
        let dims: Vec<String> = self.shape.iter().map(|d| d.to_string()).collect();
        match dims.len() {
            1 => format!("({},)", dims[0]),
            _ => format!("({})", dims.join(", ")),
        }
    }
}

impl Snapshot {
    /// The version (major, minor) of the numpy the target imported (`numpy.__version__` in
    /// the first interpreter's `sys.modules` that has numpy), read once a stop; None when no
    /// interpreter imported numpy.
    pub fn numpy_version(&self) -> Result<Option<NumpyVersion>, ReadError> {
        *self.numpy.get_or_init(|| {
            for interp in self.interpreters()? {
                let Some(modules) = self.sys_modules(interp)? else {
                    continue;
                };
                let Some(dict) = self.module_dict(modules, "numpy")? else {
                    continue;
                };
                let Some(v) = self.dict_get(dict, "__version__")? else {
                    return Err(ReadError::corrupt(dict, "numpy module without __version__"));
                };
                let text = self.read_name(v)?;
                return match version_of(&text) {
                    Some(v @ (1 | 2, _)) => Ok(Some(v)),
                    _ => Err(ReadError::corrupt(v, "numpy version (not 1.x or 2.x)")),
                };
            }
            Ok(None)
        })
    }

    /// The major version of the numpy the target imported ([`Snapshot::numpy_version`]).
    pub fn numpy_major(&self) -> Result<Option<u8>, ReadError> {
        Ok(self.numpy_version()?.map(|v| v.0))
    }

    /// The fields of the array at `obj`, its dimensions bounded by [`MAX_NDIM`].
    pub fn ndarray(&self, obj: u64) -> Result<NdArray, ReadError> {
        let mut f = [0u8; ARRAY_FIELDS];
        self.mem.read_into(self.object_fields(obj)?, &mut f)?;
        let word = |o: usize| u64::from_le_bytes(f[o..o + 8].try_into().unwrap_or_default());
        let int = |o: usize| u32::from_le_bytes(f[o..o + 4].try_into().unwrap_or_default());
        let nd = int(ARRAY_ND) as i32;
        if nd < 0 || nd as u64 > MAX_NDIM {
            return Err(ReadError::too_large(obj, nd as u64));
        }
        let raw = self
            .mem
            .read_vec(word(ARRAY_DIMENSIONS), nd as u64 * 8, MAX_NDIM * 8)?;
        let mut shape = Vec::with_capacity(nd as usize);
        for d in raw.chunks_exact(8) {
            let d = i64::from_le_bytes(d.try_into().unwrap_or_default());
            if d < 0 {
                return Err(ReadError::corrupt(
                    obj,
                    "numpy array shape (a negative dimension)",
                ));
            }
            shape.push(d as u64);
        }
        Ok(NdArray {
            shape,
            owns_data: int(ARRAY_FLAGS) & NPY_ARRAY_OWNDATA != 0,
            base: word(ARRAY_BASE),
            descr: word(ARRAY_DESCR),
        })
    }

    /// The element type of descriptor `descr` under numpy `major`.
    pub fn numpy_dtype(&self, descr: u64, major: u8) -> Result<Dtype, ReadError> {
        let h = self.layout.pyobject.header_size();
        let kind = self.mem.read_u8(field(descr, h + DESCR_KIND)?)?;
        let elsize = if major >= 2 {
            self.mem.read_i64(field(descr, h + DESCR_ELSIZE_V2)?)?
        } else {
            self.mem.read_i32(field(descr, h + DESCR_ELSIZE_V1)?)? as i64
        };
        if elsize < 0 {
            return Err(ReadError::corrupt(
                descr,
                "numpy dtype (a negative itemsize)",
            ));
        }
        Ok(Dtype {
            kind,
            elsize: elsize as u64,
        })
    }

    /// `ndarray.__sizeof__` beyond `tp_basicsize` (numpy's `array_sizeof`, methods.c): two
    /// words a dimension (its shape and strides) and, for an array that owns its data,
    /// `nbytes`. Also the array's fields, for its referents.
    pub fn ndarray_extra(&self, obj: u64, major: u8) -> Result<(u64, NdArray), ReadError> {
        let a = self.ndarray(obj)?;
        let dims = a.shape.len() as u64 * 16;
        if !a.owns_data {
            return Ok((dims, a));
        }
        let elsize = self.numpy_dtype(a.descr, major)?.elsize;
        Ok((dims.saturating_add(a.nbytes(obj, elsize)?), a))
    }

    /// `<numpy.ndarray shape=(1000, 1000) dtype=float64 at 0x…>` for an array (`type_name`
    /// is its type's, a subclass's own); None when it cannot be read, which the caller shows
    /// as any other object.
    pub fn ndarray_summary(&self, obj: u64, type_name: &str) -> Option<String> {
        let a = self.ndarray(obj).ok()?;
        let dtype = match self.numpy_major() {
            Ok(Some(m)) => self
                .numpy_dtype(a.descr, m)
                .map_or_else(|_| "?".into(), |d| d.name()),
            _ => "?".into(),
        };
        Some(format!(
            "<{type_name} shape={} dtype={dtype} at {obj:#x}>",
            a.shape_text()
        ))
    }
}

/// The leading two numbers of a version string: (2, 5) of `2.5.5`, (1, 26) of `1.26.4`,
/// (2, 5) of `2.5.0rc1`.
fn version_of(v: &str) -> Option<NumpyVersion> {
    let mut parts = v.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor: String = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some((major, minor.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpython::layout::Layout;
    use crate::cpython::version::Version;
    use crate::error::ReadErrorKind;
    use crate::memory::FakeMemory;

    const ARR: u64 = 0x1000;
    const DIMS: u64 = 0x2000;
    const DESCR: u64 = 0x3000;

    /// A 3.12 target with an array at ARR of `nd` dimensions `dims`, flags `flags`, and a
    /// float64 descriptor laid out for numpy `major`.
    fn array(nd: i32, dims: &[i64], flags: u32, major: u8) -> Snapshot {
        let l = Layout::builtin(Version::new(3, 12, 1)).unwrap();
        let mut m = FakeMemory::new();
        m.put(ARR, &[0u8; 128]);
        m.put(ARR + 16 + ARRAY_ND as u64, &nd.to_le_bytes());
        m.put_u64(ARR + 16 + ARRAY_DIMENSIONS as u64, DIMS);
        m.put_u64(ARR + 16 + ARRAY_DESCR as u64, DESCR);
        m.put(ARR + 16 + ARRAY_FLAGS as u64, &flags.to_le_bytes());
        for (i, d) in dims.iter().enumerate() {
            m.put(DIMS + 8 * i as u64, &d.to_le_bytes());
        }
        m.put(DESCR, &[0u8; 64]);
        m.put(DESCR + 16 + DESCR_KIND, b"f");
        if major >= 2 {
            m.put_u64(DESCR + 16 + DESCR_ELSIZE_V2, 8);
        } else {
            m.put(DESCR + 16 + DESCR_ELSIZE_V1, &8i32.to_le_bytes());
        }
        let snap = Snapshot::for_test(m, l);
        let _ = snap.numpy.set(Ok(Some((major, 0))));
        snap
    }

    #[test]
    fn an_owning_array_counts_its_data_and_a_view_does_not() {
        for major in [1, 2] {
            let s = array(2, &[1000, 1000], NPY_ARRAY_OWNDATA, major);
            let (extra, a) = s.ndarray_extra(ARR, major).unwrap();
            assert_eq!(extra, 2 * 16 + 8_000_000, "numpy {major}");
            assert_eq!(a.shape_text(), "(1000, 1000)");
            assert_eq!(
                s.ndarray_summary(ARR, "numpy.ndarray").unwrap(),
                "<numpy.ndarray shape=(1000, 1000) dtype=float64 at 0x1000>"
            );
            let v = array(1, &[5], 0, major);
            assert_eq!(v.ndarray_extra(ARR, major).unwrap().0, 16);
        }
    }

    #[test]
    fn a_lying_ndim_is_refused() {
        for nd in [65, -1, i32::MAX] {
            let s = array(nd, &[1], NPY_ARRAY_OWNDATA, 2);
            assert!(matches!(
                s.ndarray(ARR).unwrap_err().kind,
                ReadErrorKind::TooLarge(_)
            ));
        }
    }

    #[test]
    fn an_overflowing_shape_is_an_error_not_a_wrap() {
        let s = array(3, &[1 << 30, 1 << 30, 1 << 30], NPY_ARRAY_OWNDATA, 2);
        let e = s.ndarray_extra(ARR, 2).unwrap_err();
        assert_eq!(
            e.kind,
            ReadErrorKind::Corrupt("numpy array shape (its size overflows)")
        );
        let neg = array(1, &[-4], NPY_ARRAY_OWNDATA, 2);
        assert!(neg.ndarray(ARR).is_err());
    }

    #[test]
    fn wild_pointers_are_errors() {
        let mut s = array(2, &[3, 3], NPY_ARRAY_OWNDATA, 2);
        assert!(s.ndarray(0xdead_0000).is_err());
        assert!(s.ndarray(u64::MAX - 8).is_err());
        // Dimensions and descriptor pointers into nowhere.
        let l = s.layout.clone();
        let mut m = FakeMemory::new();
        m.put(ARR, &[0u8; 128]);
        m.put(ARR + 16 + ARRAY_ND as u64, &2i32.to_le_bytes());
        m.put_u64(ARR + 16 + ARRAY_DIMENSIONS as u64, 0xbad_0000);
        s = Snapshot::for_test(m, l.clone());
        assert!(s.ndarray(ARR).is_err());
        let mut m = FakeMemory::new();
        m.put(ARR, &[0u8; 128]);
        m.put(
            ARR + 16 + ARRAY_FLAGS as u64,
            &NPY_ARRAY_OWNDATA.to_le_bytes(),
        );
        m.put_u64(ARR + 16 + ARRAY_DESCR as u64, u64::MAX - 4);
        s = Snapshot::for_test(m, l);
        assert!(s.ndarray_extra(ARR, 2).is_err());
        assert_eq!(
            s.ndarray_summary(ARR, "numpy.ndarray").unwrap(),
            "<numpy.ndarray shape=() dtype=? at 0x1000>"
        );
    }

    #[test]
    fn dtype_names_are_numpys() {
        let d = |kind: u8, elsize| Dtype { kind, elsize }.name();
        assert_eq!(d(b'f', 8), "float64");
        assert_eq!(d(b'i', 1), "int8");
        assert_eq!(d(b'u', 2), "uint16");
        assert_eq!(d(b'b', 1), "bool");
        assert_eq!(d(b'c', 16), "complex128");
        assert_eq!(d(b'S', 5), "bytes40");
        assert_eq!(d(b'U', 20), "str160");
        assert_eq!(d(b'O', 8), "object");
    }

    #[test]
    fn versions() {
        assert_eq!(version_of("2.5.5"), Some((2, 5)));
        assert_eq!(version_of("1.26.4"), Some((1, 26)));
        assert_eq!(version_of("2.5.0rc1"), Some((2, 5)));
        assert_eq!(version_of("2.5rc1"), Some((2, 5)));
        assert_eq!(version_of("x"), None);
        assert_eq!(version_of("2"), None);
    }
}
