//! Readers for dicts: a dict's items, its keys object, a module's dict by name, and an
//! instance's attributes (its `__dict__`, or 3.11+'s inline values).

use super::layout::{tpflags, DictKeys, InstanceDict};
use super::objects::{KeysHeader, MAX_DICT_ENTRIES};
use super::snapshot::Snapshot;
use super::values::field;
use crate::error::ReadError;

impl Snapshot {
    /// (key, value) pairs of a dict, in entry order; `max` pairs at most.
    pub fn dict_items(&self, dict: u64, max: u64) -> Result<Vec<(u64, u64)>, ReadError> {
        let d = &self.layout.dict_object;
        let keys = self.mem.read_ptr(field(dict, d.ma_keys)?)?;
        let values = self.mem.read_ptr(field(dict, d.ma_values)?)?;
        let values = match values {
            0 => None,
            v => Some(field(v, d.values_array)?),
        };
        self.keys_items(keys, values, max)
    }

    /// The header of dict keys object `keys`: where its entries are and how they are laid out,
    /// and its size. One decoder for every reader of dicts (values, the heap census), so the
    /// per-version rules (Include/internal/pycore_dict.h; 3.10's Objects/dict-common.h) live
    /// once.
    pub(crate) fn keys_header(&self, keys: u64) -> Result<KeysHeader, ReadError> {
        match self.layout.dict_object.keys {
            DictKeys::V310 {
                dk_size,
                dk_nentries,
                dk_indices,
            } => {
                let size = self.mem.read_i64(field(keys, dk_size)?)?;
                if !(1..=(1 << 40)).contains(&size) || size & (size - 1) != 0 {
                    return Err(ReadError::corrupt(keys, "dict size"));
                }
                let size = size as u64;
                // DK_IXSIZE: the index table's width follows the table's size.
                let ix = match size {
                    0..=0xff => 1,
                    0x100..=0xffff => 2,
                    0x1_0000..=0xffff_ffff => 4,
                    _ => 8,
                };
                let usable = (size << 1) / 3;
                Ok(KeysHeader {
                    entries: field(keys, dk_indices + ix * size)?,
                    nentries: self.mem.read_i64(field(keys, dk_nentries)?)?,
                    entry_size: 24,
                    has_hash: true,
                    usable,
                    size: dk_indices + ix * size + 24 * usable,
                })
            }
            DictKeys::V311 {
                dk_log2_size,
                dk_log2_index_bytes,
                dk_kind,
                dk_nentries,
                dk_indices,
            } => {
                let log2 = self.mem.read_u8(field(keys, dk_log2_size)?)?;
                let log2ix = self.mem.read_u8(field(keys, dk_log2_index_bytes)?)?;
                let kind = self.mem.read_u8(field(keys, dk_kind)?)?;
                if log2 > 40 || log2ix > 43 || kind > 2 {
                    return Err(ReadError::corrupt(keys, "dict keys"));
                }
                // DICT_KEYS_GENERAL (0) entries are (hash, key, value); UNICODE and SPLIT are
                // (key, value).
                let general = kind == 0;
                let entry_size = if general { 24 } else { 16 };
                let usable = ((1u64 << log2) << 1) / 3;
                Ok(KeysHeader {
                    entries: field(keys, dk_indices + (1u64 << log2ix))?,
                    nentries: self.mem.read_i64(field(keys, dk_nentries)?)?,
                    entry_size,
                    has_hash: general,
                    usable,
                    size: dk_indices + (1u64 << log2ix) + entry_size * usable,
                })
            }
        }
    }

    /// Entries of a keys object; values from `values` (split tables) when given.
    fn keys_items(
        &self,
        keys: u64,
        values: Option<u64>,
        max: u64,
    ) -> Result<Vec<(u64, u64)>, ReadError> {
        let KeysHeader {
            entries,
            nentries,
            entry_size,
            has_hash,
            ..
        } = self.keys_header(keys)?;
        if nentries < 0 {
            return Err(ReadError::corrupt(keys, "dict entry count"));
        }
        let n = (nentries as u64).min(max).min(MAX_DICT_ENTRIES);
        let raw = self
            .mem
            .read_vec(entries, n * entry_size, MAX_DICT_ENTRIES * 24)?;
        let vals = match values {
            Some(v) => Some(self.mem.read_vec(v, n * 8, MAX_DICT_ENTRIES * 8)?),
            None => None,
        };
        let word = |b: &[u8], i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
        let mut out = Vec::new();
        for i in 0..n as usize {
            let e = &raw[i * entry_size as usize..(i + 1) * entry_size as usize];
            let base = if has_hash { 1 } else { 0 };
            let key = word(e, base);
            let value = match &vals {
                Some(v) => word(v, i),
                None => word(e, base + 1),
            };
            if key != 0 && value != 0 {
                out.push((key, value));
            }
        }
        Ok(out)
    }

    /// `sys.modules` of interpreter `interp`; None when the layout does not say where it is or
    /// it is not set up (yet, or any more).
    pub fn sys_modules(&self, interp: u64) -> Result<Option<u64>, ReadError> {
        let Some(off) = self.layout.interpreter_state.imports_modules else {
            return Ok(None);
        };
        let modules = self.mem.read_ptr(field(interp, off)?)?;
        Ok((modules != 0).then_some(modules))
    }

    /// `sys.modules[name].__dict__` (`modules` from [`Self::sys_modules`]); None when the
    /// module is not imported.
    pub fn module_dict(&self, modules: u64, name: &str) -> Result<Option<u64>, ReadError> {
        match self.dict_get(modules, name)? {
            Some(m) => Ok(Some(
                self.mem.read_ptr(field(m, self.layout.module_md_dict)?)?,
            )),
            None => Ok(None),
        }
    }

    /// `dict[name]` for a str key: the key found where an earlier lookup found it
    /// ([`super::KeyHints`]), else each key's string read until one matches.
    pub fn dict_get(&self, dict: u64, name: &str) -> Result<Option<u64>, ReadError> {
        let items = self.dict_items(dict, MAX_DICT_ENTRIES)?;
        if let Some(key) = self.keys.get(dict, name) {
            if let Some((_, v)) = items.iter().find(|(k, _)| *k == key) {
                return Ok(Some(*v));
            }
        }
        for (k, v) in items {
            if self.read_name(k).ok().as_deref() == Some(name) {
                self.keys.put(dict, name, k);
                return Ok(Some(v));
            }
        }
        Ok(None)
    }

    /// An attribute from an instance's `__dict__` (or its split/inline values).
    pub fn instance_attr(&self, obj: u64, name: &str) -> Result<Option<u64>, ReadError> {
        Ok(self.instance_attrs(obj, &[name])?[0])
    }

    /// Several attributes of one instance, with one read of its dict: `out[i]` is `names[i]`.
    pub fn instance_attrs(&self, obj: u64, names: &[&str]) -> Result<Vec<Option<u64>>, ReadError> {
        let mut out = vec![None; names.len()];
        for (k, v) in self.instance_items(obj)? {
            if let Ok(key) = self.read_name(k) {
                if let Some(i) = names.iter().position(|n| *n == key) {
                    out[i].get_or_insert(v);
                }
            }
        }
        Ok(out)
    }

    /// The (key, value) pairs of an instance's `__dict__`, or of its split or inline values;
    /// empty when it has none.
    pub(crate) fn instance_items(&self, obj: u64) -> Result<Vec<(u64, u64)>, ReadError> {
        Ok(self.instance_dict(obj)?.unwrap_or_default())
    }

    /// As [`Self::instance_items`], None when the instance has no `__dict__` (nor values).
    pub(crate) fn instance_dict(&self, obj: u64) -> Result<Option<Vec<(u64, u64)>>, ReadError> {
        let t = self.type_of(obj)?;
        let managed = t.flags & tpflags::MANAGED_DICT != 0;
        let values_items = |values: u64| -> Result<Vec<(u64, u64)>, ReadError> {
            let keys = self
                .mem
                .read_ptr(field(t.addr, self.layout.type_object.ht_cached_keys)?)?;
            self.keys_items(keys, Some(values), MAX_DICT_ENTRIES)
        };
        let dict = match self.layout.instance_dict {
            InstanceDict::Managed311 if managed => {
                let d = self.mem.read_ptr(obj.wrapping_sub(24))?;
                if d == 0 {
                    let values = self.mem.read_ptr(obj.wrapping_sub(32))?;
                    return if values == 0 {
                        Ok(None)
                    } else {
                        values_items(values).map(Some)
                    };
                }
                d
            }
            InstanceDict::Managed312 if managed => {
                let v = self.mem.read_ptr(obj.wrapping_sub(24))?;
                if v & 1 == 1 {
                    return values_items(field(v, 1)?).map(Some);
                }
                v
            }
            InstanceDict::Managed313 if managed => {
                // MANAGED_DICT_OFFSET: the word before the GC header, which free-threaded
                // builds do not have (-1 word there, -3 else: Include/internal/pycore_object.h
                // 3.13).
                let off = 8 + super::mimalloc::gc_head_size(&self.layout);
                let d = self.mem.read_ptr(obj.wrapping_sub(off))?;
                if d == 0 && t.flags & tpflags::INLINE_VALUES != 0 {
                    let at = field(obj, t.basicsize)?;
                    return values_items(field(at, self.layout.dict_object.values_array)?)
                        .map(Some);
                }
                d
            }
            // `tp_dictoffset` (3.10, and types without a managed dict).
            _ if t.dictoffset == 0 => return Ok(None),
            _ if t.dictoffset > 0 => self.mem.read_ptr(field(obj, t.dictoffset as u64)?)?,
            // Negative: counted from the end of a variable-size object (tuple and int
            // subclasses), as `_PyObject_GetDictPtr` does (Objects/object.c, 3.10).
            _ => {
                let n = self
                    .mem
                    .read_i64(field(obj, self.layout.tuple_object.ob_size)?)?;
                let itemsize = self
                    .mem
                    .read_u64(field(t.addr, self.layout.type_object.tp_basicsize + 8)?)?;
                let size = n
                    .unsigned_abs()
                    .checked_mul(itemsize)
                    .and_then(|s| s.checked_add(t.basicsize))
                    .and_then(|s| s.checked_add(7))
                    .ok_or_else(|| ReadError::corrupt(obj, "object size"))?
                    & !7;
                let at = size
                    .checked_add_signed(t.dictoffset)
                    .ok_or_else(|| ReadError::corrupt(obj, "dict offset"))?;
                self.mem.read_ptr(field(obj, at)?)?
            }
        };
        if dict == 0 {
            return Ok(None);
        }
        self.dict_items(dict, MAX_DICT_ENTRIES).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::super::layout::{tpflags, Layout};
    use super::super::{KeyHints, Version};
    use super::*;
    use crate::memory::FakeMemory;

    const STR_T: u64 = 0x1000;
    const DICT: u64 = 0x2000;
    const KEYS: u64 = 0x3000;

    fn layout() -> Layout {
        Layout::builtin(Version::new(3, 12, 0)).expect("3.12's layout")
    }

    /// A compact ASCII str of type STR_T at `at`.
    fn put_str(m: &mut FakeMemory, l: &Layout, at: u64, text: &str) {
        let u = &l.unicode_object;
        m.put(at, &[0u8; 64]);
        m.put_u64(at + l.pyobject.ob_type, STR_T);
        m.put_u64(at + u.length, text.len() as u64);
        // Include/cpython/unicodeobject.h: kind 1 (bits 2-4), compact, ascii.
        m.put(
            at + u.state,
            &((1u32 << 2) | (1 << 5) | (1 << 6)).to_le_bytes(),
        );
        m.put(at + u.asciiobject_size, text.as_bytes());
    }

    /// The str type, and a 3.12 dict at DICT of unicode keys: `entries` (key, value).
    fn memory(l: &Layout, entries: &[(u64, u64)]) -> FakeMemory {
        let mut m = FakeMemory::new();
        let t = &l.type_object;
        m.put(STR_T, &[0u8; 512]);
        m.put_u64(STR_T + t.tp_name, STR_T + 0x100);
        m.put(STR_T + 0x100, b"str\0");
        m.put_u64(STR_T + t.tp_flags, tpflags::UNICODE_SUBCLASS);
        m.put(DICT, &[0u8; 64]);
        m.put_u64(DICT + l.dict_object.ma_keys, KEYS);
        let DictKeys::V311 {
            dk_log2_size,
            dk_log2_index_bytes,
            dk_kind,
            dk_nentries,
            dk_indices,
        } = l.dict_object.keys
        else {
            panic!("3.12's keys are 3.11's");
        };
        m.put(KEYS, &[0u8; 256]);
        m.put(KEYS + dk_log2_size, &[3]);
        m.put(KEYS + dk_log2_index_bytes, &[3]);
        m.put(KEYS + dk_kind, &[1]);
        m.put(KEYS + dk_nentries, &(entries.len() as i64).to_le_bytes());
        for (i, (k, v)) in entries.iter().enumerate() {
            let at = KEYS + dk_indices + 8 + 16 * i as u64;
            m.put_u64(at, *k);
            m.put_u64(at + 8, *v);
        }
        m
    }

    fn snapshot(m: FakeMemory, l: Layout, keys: &KeyHints) -> Snapshot {
        let mut s = Snapshot::for_test(m, l);
        s.keys = keys.clone();
        s
    }

    #[test]
    fn a_lookup_starts_where_the_last_stop_found_its_key() {
        let l = layout();
        let hints = KeyHints::default();
        let (a, b) = (0x4000, 0x4100);
        let mut m = memory(&l, &[(a, 0xa0), (b, 0xb0)]);
        put_str(&mut m, &l, a, "threading");
        put_str(&mut m, &l, b, "asyncio");
        let first = snapshot(m, l.clone(), &hints);
        assert_eq!(first.dict_get(DICT, "asyncio"), Ok(Some(0xb0)));
        assert_eq!(first.dict_get(DICT, "gc"), Ok(None));
        assert_eq!(hints.get(DICT, "asyncio"), Some(b));

        // The next stop: the same key object, its value changed, and no key's text readable.
        // Found by the hint alone; a name never found is still not there.
        let next = snapshot(memory(&l, &[(a, 0xa0), (b, 0xb1)]), l.clone(), &hints);
        assert_eq!(next.dict_get(DICT, "asyncio"), Ok(Some(0xb1)));
        assert_eq!(next.dict_get(DICT, "threading"), Ok(None));

        // The key deleted and made again (another object): the hint no longer matches, the
        // keys are read, and the hint follows the new key.
        let c = 0x4200;
        let mut m = memory(&l, &[(a, 0xa0), (c, 0xc0)]);
        put_str(&mut m, &l, a, "threading");
        put_str(&mut m, &l, c, "asyncio");
        let later = snapshot(m, l, &hints);
        assert_eq!(later.dict_get(DICT, "asyncio"), Ok(Some(0xc0)));
        assert_eq!(hints.get(DICT, "asyncio"), Some(c));
    }
}
