//! What a container holds: the object pointers in its item array, dict entries and values,
//! deque blocks, and an instance's `__slots__` and `__dict__` or values.

use super::Walk;
use crate::cpython::layout::{tpflags, CodeLocals, DictKeys, InstanceDict};
use crate::cpython::mimalloc::gc_head_size;
use crate::cpython::objects::KeysHeader;
use crate::cpython::values::field;
use crate::error::ReadError;
use crate::memory::addr_map::AddrSet;

/// Items of one container followed (list, tuple, dict entries, set slots, deque items).
pub const MAX_HEAP_ITEMS: u64 = 1 << 28;
/// Shared keys objects remembered (a class's instances share one; a program has a few per
/// class).
const MAX_SPLIT_KEYS: usize = 1 << 16;
/// Items read at once from a container's item array.
const CHUNK_ITEMS: u64 = 4096;
/// Modules/_collectionsmodule.c: `BLOCKLEN` items between `leftlink` and `rightlink`.
pub(super) const DEQUE_BLOCKLEN: u64 = 64;
pub(super) const DEQUE_BLOCK: u64 = 8 + DEQUE_BLOCKLEN * 8 + 8;

impl Walk<'_> {
    /// `n` object pointers at `at`, into `refs`.
    pub(super) fn items(&self, at: u64, n: u64, refs: &mut Vec<u64>) -> Result<(), ReadError> {
        self.pairs(at, n, 8, 0, refs)
    }

    /// The word at `offset` of each of `n` records of `stride` bytes at `at`, into `refs`.
    pub(super) fn pairs(
        &self,
        at: u64,
        n: u64,
        stride: u64,
        offset: u64,
        refs: &mut Vec<u64>,
    ) -> Result<(), ReadError> {
        self.fields(at, n, stride, &[offset], refs)
    }

    /// The words at `offsets` of each of `n` records of `stride` bytes at `at`.
    pub(super) fn fields(
        &self,
        at: u64,
        n: u64,
        stride: u64,
        offsets: &[u64],
        refs: &mut Vec<u64>,
    ) -> Result<(), ReadError> {
        if n > MAX_HEAP_ITEMS {
            return Err(ReadError::too_large(at, n));
        }
        let mut i = 0;
        while i < n {
            let k = (n - i).min(CHUNK_ITEMS);
            let start = field(at, i * stride)?;
            let raw = self
                .snap
                .mem
                .read_vec(start, k * stride, CHUNK_ITEMS * stride)?;
            for rec in raw.chunks_exact(stride as usize) {
                for &o in offsets {
                    if let Some(b) = rec.get(o as usize..o as usize + 8) {
                        refs.push(u64::from_le_bytes(b.try_into().unwrap_or_default()));
                    }
                }
            }
            i += k;
        }
        Ok(())
    }

    /// A dict keys object's entries (keys, and values unless `values` holds them) into
    /// `refs`; returns the keys' size when the dict owns them (`dk_refcnt == 1`) and the
    /// number of usable entries (a split table's values).
    pub(super) fn dict_keys(
        &self,
        keys: u64,
        values: Option<u64>,
        refs: &mut Vec<u64>,
    ) -> Result<(Option<u64>, u64), ReadError> {
        if let Some(v) = values {
            // The shared keys of a class's instances: their keys were walked with the first
            // instance; the values are each instance's own.
            let known = self.split_keys.borrow().get(&keys).copied();
            if let Some((n, owned, usable)) = known {
                self.items(v, n, refs)?;
                return Ok((owned, usable));
            }
        }
        let mem = &self.snap.mem;
        let KeysHeader {
            entries,
            nentries,
            entry_size: entry,
            has_hash: hash,
            usable,
            size,
        } = self.snap.keys_header(keys)?;
        let usable = match self.snap.layout.dict_object.keys {
            // shared_keys_usable_size: dk_nentries + dk_usable (the word before).
            DictKeys::V311 { dk_nentries, .. } if values.is_some() => {
                let u = mem.read_i64(field(keys, dk_nentries - 8)?)?;
                (u.max(0) as u64).saturating_add(nentries.max(0) as u64)
            }
            _ => usable,
        };
        if nentries < 0 || nentries as u64 > MAX_HEAP_ITEMS {
            return Err(ReadError::corrupt(keys, "dict entry count"));
        }
        let n = nentries as u64;
        let base = if hash { 8 } else { 0 };
        match values {
            Some(v) => {
                self.pairs(entries, n, entry, base, refs)?;
                self.items(v, n, refs)?;
            }
            None => self.fields(entries, n, entry, &[base, base + 8], refs)?,
        }
        let refcnt = mem.read_i64(keys)?;
        let owned = (refcnt == 1).then_some(size);
        if values.is_some() && self.split_keys.borrow().len() < MAX_SPLIT_KEYS {
            self.split_keys
                .borrow_mut()
                .insert(keys, (n, owned, usable));
        }
        Ok((owned, usable))
    }
    /// The items of a deque's blocks.
    pub(super) fn deque_items(
        &self,
        obj: u64,
        mut block: u64,
        left: u64,
        n: u64,
        refs: &mut Vec<u64>,
    ) -> Result<(), ReadError> {
        if n > MAX_HEAP_ITEMS || left >= DEQUE_BLOCKLEN {
            return Err(ReadError::corrupt(obj, "deque size"));
        }
        let mut seen = AddrSet::default();
        let (mut i, mut skip) = (0u64, left);
        let mut buf = vec![0u8; DEQUE_BLOCK as usize];
        while i < n {
            if block == 0 || !seen.insert(block) {
                return Err(ReadError::corrupt(
                    obj,
                    "deque blocks: a NULL link or a cycle",
                ));
            }
            self.snap.mem.read_into(block, &mut buf)?;
            let take = (DEQUE_BLOCKLEN - skip).min(n - i);
            for j in skip..skip + take {
                let o = (8 + j * 8) as usize;
                refs.push(u64::from_le_bytes(
                    buf[o..o + 8].try_into().unwrap_or_default(),
                ));
            }
            i += take;
            skip = 0;
            let r = (DEQUE_BLOCK - 8) as usize;
            block = u64::from_le_bytes(buf[r..r + 8].try_into().unwrap_or_default());
        }
        Ok(())
    }

    /// The object members of `obj`'s type and its bases (`__slots__`, a static type's
    /// `T_OBJECT` members), each read alone: one that cannot be read is skipped.
    pub(super) fn member_refs(&self, obj: u64, tp: u64, refs: &mut Vec<u64>) {
        let snap = self.snap;
        if let Some(Some(t)) = self.types.get(&tp) {
            for &off in &t.slots {
                if let Ok(p) = field(obj, off).and_then(|a| snap.mem.read_ptr(a)) {
                    refs.push(p);
                }
            }
        }
    }

    /// A function's object fields, from the header to `end` (its `vectorcall`).
    pub(super) fn function_refs(
        &self,
        obj: u64,
        end: u64,
        refs: &mut Vec<u64>,
    ) -> Result<(), ReadError> {
        let head = self.snap.layout.pyobject.header_size();
        let n = end.saturating_sub(head) / 8;
        self.items(field(obj, head)?, n, refs)
    }

    /// A code object's names and kinds of its locals (3.11+'s `co_localsplusnames` and
    /// `co_localspluskinds`, which are not members: `co_varnames` is made from them).
    pub(super) fn code_refs(&self, obj: u64, refs: &mut Vec<u64>) -> Result<(), ReadError> {
        if let CodeLocals::LocalsPlus {
            localsplusnames,
            localspluskinds,
        } = self.snap.layout.code_object.locals
        {
            for off in [localsplusnames, localspluskinds] {
                refs.push(self.snap.mem.read_ptr(field(obj, off)?)?);
            }
        }
        Ok(())
    }

    /// An instance of a heap type: its `__dict__` or values. A part that cannot be read is
    /// an error entry; the object is still counted.
    pub(super) fn instance_refs(
        &mut self,
        obj: u64,
        tp: u64,
        tflags: u64,
        basicsize: u64,
        refs: &mut Vec<u64>,
    ) {
        let snap = self.snap;
        let r = (|| -> Result<(), ReadError> {
            let managed = tflags & tpflags::MANAGED_DICT != 0;
            let lay = &snap.layout;
            let values = |v: u64, refs: &mut Vec<u64>| -> Result<(), ReadError> {
                let keys = snap
                    .mem
                    .read_ptr(field(tp, lay.type_object.ht_cached_keys)?)?;
                if keys != 0 {
                    self.dict_keys(keys, Some(v), refs)?;
                }
                Ok(())
            };
            match lay.instance_dict {
                InstanceDict::Managed311 if managed => {
                    refs.push(snap.mem.read_ptr(obj.wrapping_sub(24))?);
                    let v = snap.mem.read_ptr(obj.wrapping_sub(32))?;
                    if v != 0 {
                        values(v, refs)?;
                    }
                }
                InstanceDict::Managed312 if managed => {
                    let v = snap.mem.read_ptr(obj.wrapping_sub(24))?;
                    if v & 1 == 1 {
                        values(field(v, 1)?, refs)?;
                    } else {
                        refs.push(v);
                    }
                }
                InstanceDict::Managed313 if managed => {
                    // MANAGED_DICT_OFFSET: the word before the GC header.
                    let d = snap.mem.read_ptr(obj.wrapping_sub(8 + gc_head_size(lay)))?;
                    if d != 0 {
                        refs.push(d);
                    } else if tflags & tpflags::INLINE_VALUES != 0 {
                        let at = field(obj, basicsize)?;
                        values(field(at, lay.dict_object.values_array)?, refs)?;
                    }
                }
                _ => {
                    let off = snap
                        .mem
                        .read_i64(field(tp, lay.type_object.tp_dictoffset)?)?;
                    if off > 0 {
                        refs.push(snap.mem.read_ptr(field(obj, off as u64)?)?);
                    }
                }
            }
            Ok(())
        })();
        if let Err(e) = r {
            self.error(e);
        }
    }
}
