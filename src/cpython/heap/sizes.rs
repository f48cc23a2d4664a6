//! The `__sizeof__`s the walk models that are not `object.__sizeof__`.

use super::visit::HEADER;
use super::Walk;
use crate::error::ReadError;

impl Walk<'_> {
    /// `str.__sizeof__` (Objects/unicodeobject.c) and the length.
    pub(super) fn str_size(&self, obj: u64, h: &[u8; HEADER]) -> Result<(u64, u64), ReadError> {
        let u = &self.snap.layout.unicode_object;
        let word = |o: u64| -> u64 {
            h.get(o as usize..o as usize + 8)
                .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
        };
        let len = word(u.length);
        if len > 1 << 40 {
            return Err(ReadError::too_large(obj, len));
        }
        let state = word(u.state) as u32;
        let kind = ((state >> 2) & 7) as u64;
        let compact = (state >> 5) & 1 == 1;
        let ascii = (state >> 6) & 1 == 1;
        let old = self.snap.layout.version.minor < 12;
        // 3.10 and 3.11: `wstr` is the last word of PyASCIIObject, `wstr_length` follows
        // `utf8` in PyCompactUnicodeObject.
        let mut size = if compact && ascii {
            u.asciiobject_size + len + 1
        } else if compact {
            u.compact_size + (len + 1) * kind
        } else {
            let data = word(u.compact_size);
            u.compact_size + 8 + if data != 0 { (len + 1) * kind } else { 0 }
        };
        if !(compact && ascii) {
            let (utf8_length, utf8) = (word(u.asciiobject_size), word(u.asciiobject_size + 8));
            let data = if compact {
                obj.wrapping_add(u.compact_size)
            } else {
                word(u.compact_size)
            };
            if utf8 != 0 && utf8 != data {
                size = size.saturating_add(utf8_length.saturating_add(1));
            }
        }
        if old {
            let wstr = word(u.asciiobject_size - 8);
            let data = if compact && ascii {
                obj.wrapping_add(u.asciiobject_size)
            } else if compact {
                obj.wrapping_add(u.compact_size)
            } else {
                word(u.compact_size)
            };
            if wstr != 0 && wstr != data {
                let wlen = if ascii {
                    len
                } else {
                    word(u.asciiobject_size + 16)
                };
                size = size.saturating_add(wlen.saturating_add(1).saturating_mul(4));
            }
        }
        Ok((size, len))
    }

    /// `_PyDict_KeysSize` of a keys object.
    pub(super) fn keys_size(&self, keys: u64) -> Result<u64, ReadError> {
        Ok(self.snap.keys_header(keys)?.size)
    }
}
