//! Readers for the built-in object types, and bounded reprs of any object.

use std::sync::Arc;

use super::layout::{tpflags, LongObject};
use super::snapshot::Snapshot;
use super::values::{field, is_cfunction_type, TypeInfo};
use crate::error::ReadError;
use crate::model::number_text::push_decimal;

/// Longest string (in characters) we decode; names and reprs never need more.
pub const MAX_STR_CHARS: u64 = 1 << 20;
/// Longest name (qualname, file name, local or attribute name) decoded: every frame of a code
/// object repeats its names in text output. Longer than any path (PATH_MAX is 4096 bytes).
pub const MAX_NAME_CHARS: u64 = 4096;
/// Base classes followed from a type (a deeper chain is corrupt or cyclic).
const MAX_BASES: usize = 32;
/// Longest bytes object we read for a repr.
const MAX_BYTES_READ: u64 = 4096;
/// Most digits (30-bit) of an int we convert to decimal.
const MAX_INT_DIGITS: u64 = 1000;
/// Most entries of a dict we scan (lookups and reprs).
pub const MAX_DICT_ENTRIES: u64 = 1 << 18;
/// Most items shown by a container repr, its nesting, and the length of any one repr.
const MAX_REPR_ITEMS: u64 = 16;
const MAX_REPR_DEPTH: u32 = 3;
pub const MAX_REPR_CHARS: usize = 256;
/// Most slots of a set table we scan (CPython's remote debugger uses the same bound,
/// `MAX_SET_TABLE_SIZE` in Modules/_remote_debugging).
pub const MAX_SET_SLOTS: u64 = 1 << 20;

/// A dict keys object's header (`Snapshot::keys_header`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KeysHeader {
    /// Where the entries start, after the index table.
    pub entries: u64,
    /// `dk_nentries`: entries used so far (a deleted one has a NULL key or value).
    pub nentries: i64,
    /// Bytes of one entry: 24 for (hash, key, value), 16 for (key, value).
    pub entry_size: u64,
    /// Entries begin with the hash.
    pub has_hash: bool,
    /// `USABLE_FRACTION` of the table's size: the entries it has room for.
    pub usable: u64,
    /// `_PyDict_KeysSize`: the keys object's bytes.
    pub size: u64,
}

impl Snapshot {
    pub fn type_of(&self, obj: u64) -> Result<Arc<TypeInfo>, ReadError> {
        self.type_at(self.type_addr(obj)?)
    }

    /// `f` of the type of `obj`, as [`Snapshot::type_of`] gives it, without counting a
    /// reference to it: the per-object look-ups of 100,000 tasks, which threads make together,
    /// write nothing shared.
    pub fn with_type_of<R>(
        &self,
        obj: u64,
        f: impl FnOnce(&TypeInfo) -> R,
    ) -> Result<R, ReadError> {
        let tp = self.type_addr(obj)?;
        match self.type_table.get(tp) {
            Some(t) => Ok(f(t)),
            None => Ok(f(&*self.type_at(tp)?)),
        }
    }

    /// `ob_type` of `obj`, one object looked up.
    fn type_addr(&self, obj: u64) -> Result<u64, ReadError> {
        self.budget.object(obj)?;
        let tp = self
            .mem
            .read_ptr(field(obj, self.layout.pyobject.ob_type)?)?;
        if tp == 0 {
            return Err(ReadError::corrupt(obj, "object without a type"));
        }
        Ok(tp)
    }

    /// The type object at `tp`.
    pub fn type_at(&self, tp: u64) -> Result<Arc<TypeInfo>, ReadError> {
        if let Some(t) = self.type_table.get(tp) {
            return Ok(t.clone());
        }
        if let Some(t) = self
            .types
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&tp)
        {
            return Ok(t.clone());
        }
        let to = &self.layout.type_object;
        // A stale or corrupt pointer must not overflow the address arithmetic.
        field(tp, to.ht_cached_keys.max(to.tp_dictoffset).max(to.tp_flags))?;
        let name_ptr = self.mem.read_ptr(field(tp, to.tp_name)?)?;
        let name = String::from_utf8_lossy(&self.mem.read_cstr(name_ptr, 200)?).into_owned();
        let t = Arc::new(TypeInfo {
            addr: tp,
            name,
            flags: self.mem.read_u64(field(tp, to.tp_flags)?)?,
            basicsize: self.mem.read_u64(field(tp, to.tp_basicsize)?)?,
            dictoffset: self.mem.read_i64(field(tp, to.tp_dictoffset)?)?,
            base: self.mem.read_ptr(field(tp, to.tp_base)?)?,
        });
        if let Some(kept) = self.type_table.insert(tp, t.clone()) {
            return Ok(kept.clone());
        }
        self.types
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(tp, t.clone());
        Ok(t)
    }

    /// A `str` object's text.
    pub fn read_str(&self, obj: u64) -> Result<String, ReadError> {
        self.read_str_max(obj, MAX_STR_CHARS)
    }

    /// A `str` object's text, an error when longer than `max` characters.
    fn read_str_max(&self, obj: u64, max: u64) -> Result<String, ReadError> {
        let u = &self.layout.unicode_object;
        let len = self.mem.read_i64(field(obj, u.length)?)?;
        if len < 0 || len as u64 > max {
            return Err(ReadError::too_large(obj, len as u64));
        }
        let state = self.mem.read_u32(field(obj, u.state)?)?;
        // Include/cpython/unicodeobject.h: interned:2, kind:3, compact:1, ascii:1 (3.10-3.13).
        let kind = (state >> 2) & 7;
        let compact = (state >> 5) & 1 == 1;
        let ascii = (state >> 6) & 1 == 1;
        let data = if compact && ascii {
            field(obj, u.asciiobject_size)?
        } else if compact {
            field(obj, u.compact_size)?
        } else {
            // Legacy (non-compact) strings keep a pointer right after the compact header.
            self.mem.read_ptr(field(obj, u.compact_size)?)?
        };
        let n = len as u64;
        match kind {
            1 => {
                let b = self.mem.read_vec(data, n, MAX_STR_CHARS)?;
                Ok(if ascii {
                    String::from_utf8_lossy(&b).into_owned()
                } else {
                    b.iter().map(|&c| c as char).collect()
                })
            }
            2 => {
                let b = self.mem.read_vec(data, n * 2, MAX_STR_CHARS * 2)?;
                let units: Vec<u16> = b
                    .chunks_exact(2)
                    .map(|c| u16::from_le_bytes([c[0], c[1]]))
                    .collect();
                Ok(String::from_utf16_lossy(&units))
            }
            4 => {
                let b = self.mem.read_vec(data, n * 4, MAX_STR_CHARS * 4)?;
                Ok(b.chunks_exact(4)
                    .map(|c| {
                        char::from_u32(u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                            .unwrap_or('\u{FFFD}')
                    })
                    .collect())
            }
            _ => Err(ReadError::corrupt(obj, "str kind")),
        }
    }

    /// A str object's text if `obj` is a str, for names (qualname, filename, local names);
    /// at most [`MAX_NAME_CHARS`].
    pub fn read_name(&self, obj: u64) -> Result<String, ReadError> {
        if obj == 0 {
            return Err(ReadError::corrupt(obj, "NULL name"));
        }
        let t = self.type_of(obj)?;
        if t.flags & tpflags::UNICODE_SUBCLASS == 0 {
            return Err(ReadError::corrupt(obj, "name that is not a str"));
        }
        self.read_str_max(obj, MAX_NAME_CHARS)
    }

    pub fn read_bytes(&self, obj: u64, max: u64) -> Result<(Vec<u8>, u64), ReadError> {
        let b = &self.layout.bytes_object;
        let len = self.mem.read_i64(field(obj, b.ob_size)?)?;
        if len < 0 {
            return Err(ReadError::corrupt(obj, "bytes size"));
        }
        let n = (len as u64).min(max);
        Ok((
            self.mem.read_vec(field(obj, b.ob_sval)?, n, max)?,
            len as u64,
        ))
    }

    /// Items of a tuple or list (`max` at most) and the real length.
    pub fn read_seq(&self, obj: u64, list: bool, max: u64) -> Result<(Vec<u64>, u64), ReadError> {
        let v = if list {
            &self.layout.list_object
        } else {
            &self.layout.tuple_object
        };
        let len = self.mem.read_i64(field(obj, v.ob_size)?)?;
        if len < 0 {
            return Err(ReadError::corrupt(obj, "sequence size"));
        }
        let n = (len as u64).min(max);
        let items = if list {
            self.mem.read_ptr(field(obj, v.ob_item)?)?
        } else {
            field(obj, v.ob_item)?
        };
        let raw = self.mem.read_vec(items, n * 8, max * 8)?;
        Ok((
            raw.chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                .collect(),
            len as u64,
        ))
    }

    /// An int's decimal digits (with sign).
    pub fn read_int(&self, obj: u64) -> Result<String, ReadError> {
        self.read_int_after("", obj)
    }

    /// `prefix` and then the decimal text of the int `obj`, in one string (a task's name,
    /// "Task-" and its number, for each of 100,000 tasks).
    pub fn read_int_after(&self, prefix: &str, obj: u64) -> Result<String, ReadError> {
        let (negative, ndigits, digits_at) = match self.layout.long_object {
            LongObject::SignedSize { ob_size, ob_digit } => {
                let s = self.mem.read_i64(field(obj, ob_size)?)?;
                (s < 0, s.unsigned_abs(), field(obj, ob_digit)?)
            }
            LongObject::Tagged { lv_tag, ob_digit } => {
                let tag = self.mem.read_u64(field(obj, lv_tag)?)?;
                (tag & 3 == 2, tag >> 3, field(obj, ob_digit)?)
            }
        };
        if ndigits > MAX_INT_DIGITS {
            return Err(ReadError::too_large(obj, ndigits));
        }
        if ndigits <= 2 {
            // Most ints (task numbers, counters) fit two 30-bit digits: no buffers to allocate.
            let mut b = [0u8; 8];
            self.mem
                .read_into(digits_at, &mut b[..ndigits as usize * 4])?;
            let v = two_digits(b).ok_or(ReadError::corrupt(obj, "int digit"))?;
            let mut text = String::with_capacity(prefix.len() + 21);
            text.push_str(prefix);
            if negative && v != 0 {
                text.push('-');
            }
            push_decimal(&mut text, v);
            return Ok(text);
        }
        let raw = self
            .mem
            .read_vec(digits_at, ndigits * 4, MAX_INT_DIGITS * 4)?;
        let digits: Vec<u32> = raw
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        if digits.iter().any(|&d| d >= 1 << 30) {
            return Err(ReadError::corrupt(obj, "int digit"));
        }
        let s = digits_to_decimal(&digits);
        Ok(if negative && s != "0" {
            format!("{prefix}-{s}")
        } else {
            format!("{prefix}{s}")
        })
    }

    pub fn read_float(&self, obj: u64) -> Result<f64, ReadError> {
        Ok(f64::from_bits(
            self.mem
                .read_u64(field(obj, self.layout.float_object.ob_fval)?)?,
        ))
    }

    /// The names of `obj`'s type and its bases (`tp_base`), innermost first: which class,
    /// or subclass of one, an object is (3.10's code objects have no qualnames to say it).
    pub fn class_names(&self, obj: u64) -> Vec<String> {
        let mut out = Vec::new();
        let Ok(mut t) = self.type_of(obj) else {
            return out;
        };
        for _ in 0..MAX_BASES {
            out.push(t.name.clone());
            if t.base == 0 {
                break;
            }
            match self.type_at(t.base) {
                Ok(b) => t = b,
                Err(_) => break,
            }
        }
        out
    }

    /// A short, bounded repr of any object, in Python's style where we know the type.
    pub fn repr(&self, obj: u64) -> String {
        let mut s = self.repr_at(obj, 0);
        if s.chars().count() > MAX_REPR_CHARS {
            s = s.chars().take(MAX_REPR_CHARS).collect::<String>() + "...";
        }
        s
    }

    fn repr_at(&self, obj: u64, depth: u32) -> String {
        if obj == 0 {
            return "<NULL>".into();
        }
        match self.try_repr(obj, depth) {
            Ok(s) => s,
            Err(e) => format!("<unreadable object at {obj:#x}: {}>", e.kind),
        }
    }

    fn try_repr(&self, obj: u64, depth: u32) -> Result<String, ReadError> {
        let t = self.type_of(obj)?;
        let deep = depth >= MAX_REPR_DEPTH;
        let items = |s: &Self, list: bool| -> Result<(Vec<String>, bool), ReadError> {
            let (items, len) = s.read_seq(obj, list, MAX_REPR_ITEMS)?;
            Ok((
                items.iter().map(|&i| s.repr_at(i, depth + 1)).collect(),
                len > MAX_REPR_ITEMS,
            ))
        };
        Ok(match t.name.as_str() {
            "NoneType" => "None".into(),
            "bool" => (if self.read_int(obj)? == "0" {
                "False"
            } else {
                "True"
            })
            .into(),
            "int" => self.read_int(obj)?,
            "float" => float_repr(self.read_float(obj)?),
            "str" => str_repr(&self.read_str(obj)?),
            "bytes" => {
                let (b, len) = self.read_bytes(obj, MAX_BYTES_READ)?;
                let mut s = bytes_repr(&b);
                if len > b.len() as u64 {
                    s.push_str("...");
                }
                s
            }
            "tuple" if deep => "(...)".into(),
            "tuple" => {
                let (v, more) = items(self, false)?;
                let mut s = format!("({}", v.join(", "));
                if more {
                    s.push_str(", ...");
                }
                s + if v.len() == 1 && !more { ",)" } else { ")" }
            }
            "list" if deep => "[...]".into(),
            "list" => {
                let (v, more) = items(self, true)?;
                format!("[{}{}]", v.join(", "), if more { ", ..." } else { "" })
            }
            "dict" if deep => "{...}".into(),
            "dict" => {
                let all = self.dict_items(obj, MAX_REPR_ITEMS + 1)?;
                let mut parts: Vec<String> = all
                    .iter()
                    .take(MAX_REPR_ITEMS as usize)
                    .map(|&(k, v)| {
                        format!(
                            "{}: {}",
                            self.repr_at(k, depth + 1),
                            self.repr_at(v, depth + 1)
                        )
                    })
                    .collect();
                if all.len() as u64 > MAX_REPR_ITEMS {
                    parts.push("...".into());
                }
                format!("{{{}}}", parts.join(", "))
            }
            "set" | "frozenset" if deep => format!("{}(...)", t.name),
            "set" | "frozenset" => {
                let keys = self.set_items(obj)?;
                let mut parts: Vec<String> = keys
                    .iter()
                    .take(MAX_REPR_ITEMS as usize)
                    .map(|&k| self.repr_at(k, depth + 1))
                    .collect();
                if keys.len() as u64 > MAX_REPR_ITEMS {
                    parts.push("...".into());
                }
                match (t.name.as_str(), parts.is_empty()) {
                    ("set", true) => "set()".into(),
                    ("set", false) => format!("{{{}}}", parts.join(", ")),
                    (_, true) => "frozenset()".into(),
                    (_, false) => format!("frozenset({{{}}})", parts.join(", ")),
                }
            }
            n if is_cfunction_type(n) => self.cfunction_repr(obj)?,
            "method-wrapper" => self.method_wrapper_repr(obj)?,
            "numpy.ndarray" => self
                .ndarray_summary(obj, &t.name)
                .unwrap_or_else(|| format!("<{} object at {obj:#x}>", t.name)),
            _ if t.flags & tpflags::HEAPTYPE != 0 && self.is_tensor_type(t.addr) => {
                let name = if t.name == "Tensor" {
                    "torch.Tensor"
                } else {
                    &t.name
                };
                self.tensor_summary(obj, name)
                    .unwrap_or_else(|| format!("<{} object at {obj:#x}>", t.name))
            }
            n if n.starts_with("numpy.") => self
                .numpy_scalar_repr(obj, n)
                .unwrap_or_else(|| format!("<{n} object at {obj:#x}>")),
            _ => format!("<{} object at {obj:#x}>", t.name),
        })
    }

    /// Keys of a set (dummy and empty slots skipped), up to [`MAX_REPR_ITEMS`] + 1.
    fn set_items(&self, obj: u64) -> Result<Vec<u64>, ReadError> {
        self.set_keys(obj, MAX_REPR_ITEMS + 1)
    }

    /// Keys of a set (dummy and empty slots skipped), `max` at most. The table is read in
    /// chunks, so a few keys of a big set cost a few pages, not the whole table.
    pub fn set_keys(&self, obj: u64, max: u64) -> Result<Vec<u64>, ReadError> {
        const CHUNK_SLOTS: u64 = 4096;
        let s = &self.layout.set_object;
        let mask = self.mem.read_i64(field(obj, s.mask)?)?;
        if mask < 0 || mask as u64 >= MAX_SET_SLOTS {
            return Err(ReadError::too_large(obj, mask as u64));
        }
        let table = self.mem.read_ptr(field(obj, s.table)?)?;
        let slots = mask as u64 + 1;
        let mut out = Vec::new();
        let mut first = 0;
        while first < slots && (out.len() as u64) < max {
            let n = CHUNK_SLOTS.min(slots - first);
            let raw = self
                .mem
                .read_vec(field(table, first * 16)?, n * 16, CHUNK_SLOTS * 16)?;
            for e in raw.chunks_exact(16) {
                let key = u64::from_le_bytes(e[..8].try_into().unwrap());
                let hash = i64::from_le_bytes(e[8..].try_into().unwrap());
                // Objects/setobject.c: a deleted slot holds the dummy key with hash -1.
                if key != 0 && hash != -1 {
                    out.push(key);
                    if out.len() as u64 >= max {
                        break;
                    }
                }
            }
            first += n;
        }
        Ok(out)
    }
}

/// The value of an int's first two 30-bit digits as stored (little-endian u32s, low first);
/// None when a digit is out of range.
fn two_digits(b: [u8; 8]) -> Option<u64> {
    let lo = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let hi = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    (lo < 1 << 30 && hi < 1 << 30).then_some((u64::from(hi) << 30) | u64::from(lo))
}

/// Base-2^30 digits (least significant first) to decimal.
fn digits_to_decimal(digits: &[u32]) -> String {
    let mut n: Vec<u32> = digits.to_vec();
    while n.last() == Some(&0) {
        n.pop();
    }
    if n.is_empty() {
        return "0".into();
    }
    let mut chunks = Vec::new();
    while !n.is_empty() {
        let mut rem: u64 = 0;
        for d in n.iter_mut().rev() {
            let cur = (rem << 30) | *d as u64;
            *d = (cur / 1_000_000_000) as u32;
            rem = cur % 1_000_000_000;
        }
        chunks.push(rem as u32);
        while n.last() == Some(&0) {
            n.pop();
        }
    }
    let mut s = chunks.pop().unwrap().to_string();
    for c in chunks.iter().rev() {
        s.push_str(&format!("{c:09}"));
    }
    s
}

/// Python's `repr(float)`: shortest round-trip digits, fixed notation for 1e-4 <= |x| < 1e16.
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    shortest_repr(&format!("{x:e}"))
}

/// Rust's shortest `{:e}` digits in Python's notation: fixed for 1e-4 <= |x| < 1e16.
fn shortest_repr(e: &str) -> String {
    let (mant, exp) = e.split_once('e').unwrap_or((e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let neg = mant.starts_with('-');
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let sign = if neg { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let point = exp + 1;
        let s = if point <= 0 {
            format!("0.{}{}", "0".repeat((-point) as usize), digits)
        } else if point as usize >= digits.len() {
            format!("{}{}.0", digits, "0".repeat(point as usize - digits.len()))
        } else {
            format!(
                "{}.{}",
                &digits[..point as usize],
                &digits[point as usize..]
            )
        };
        format!("{sign}{s}")
    } else {
        let m = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits
        };
        format!(
            "{sign}{m}e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        )
    }
}

/// Python's `repr(str)`.
pub fn str_repr(s: &str) -> String {
    let q = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_control() => {
                let v = c as u32;
                if v <= 0xff {
                    out.push_str(&format!("\\x{v:02x}"))
                } else if v <= 0xffff {
                    out.push_str(&format!("\\u{v:04x}"))
                } else {
                    out.push_str(&format!("\\U{v:08x}"))
                }
            }
            c => out.push(c),
        }
    }
    out.push(q);
    out
}

/// Python's `repr(bytes)`.
pub fn bytes_repr(b: &[u8]) -> String {
    let q = if b.contains(&b'\'') && !b.contains(&b'"') {
        b'"'
    } else {
        b'\''
    };
    let mut out = String::from("b");
    out.push(q as char);
    for &c in b {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            c if c == q => {
                out.push('\\');
                out.push(c as char);
            }
            0x20..=0x7e => out.push(c as char),
            c => out.push_str(&format!("\\x{c:02x}")),
        }
    }
    out.push(q as char);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn python_reprs() {
        assert_eq!(float_repr(1.5), "1.5");
        assert_eq!(float_repr(1.0), "1.0");
        assert_eq!(float_repr(-0.0001), "-0.0001");
        assert_eq!(float_repr(1e16), "1e+16");
        assert_eq!(float_repr(1.25e-5), "1.25e-05");
        assert_eq!(float_repr(123456789.125), "123456789.125");
        assert_eq!(str_repr("it's"), "\"it's\"");
        assert_eq!(str_repr("a\nb'\""), "'a\\nb\\'\"'");
        assert_eq!(str_repr("café 日本 𝄞"), "'café 日本 𝄞'");
        assert_eq!(bytes_repr(b"ab\x00'"), "b\"ab\\x00'\"");
    }
    #[test]
    fn big_ints() {
        // 2**100 = digits (30-bit): 2**100 = 2**(30*3) * 2**10
        assert_eq!(
            digits_to_decimal(&[0, 0, 0, 1 << 10]),
            "1267650600228229401496703205376"
        );
        assert_eq!(digits_to_decimal(&[5]), "5");
        assert_eq!(digits_to_decimal(&[0]), "0");
        assert_eq!(digits_to_decimal(&[0, 1]), "1073741824");
        // 2**45 + 7: digits 7 and 2**15.
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&7u32.to_le_bytes());
        b[4..].copy_from_slice(&(1u32 << 15).to_le_bytes());
        assert_eq!(two_digits(b), Some((1 << 45) + 7));
        assert_eq!(two_digits([0; 8]), Some(0));
        b[4..].copy_from_slice(&(1u32 << 30).to_le_bytes());
        assert_eq!(two_digits(b), None);
        for v in [0, 7, 10, 1 << 45, u64::MAX] {
            let mut text = String::from("Task-");
            push_decimal(&mut text, v);
            assert_eq!(text, format!("Task-{v}"));
        }
    }
}
