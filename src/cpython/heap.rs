//! What the heap holds (`--heap`): every object on an interpreter's GC lists, and every object
//! reached from those through the referents of containers whose layout is known, each once,
//! counted by type with the size `sys.getsizeof` gives it.
//!
//! ```text
//! GC lists (all generations, permanent) ──► object ──► referents (list, tuple, dict, set,
//!                                               ▲       deque, instance dict / values,
//!                                               └────── __slots__, module dict, cell, type)
//! ```
//!
//! Sizes are `type(o).__sizeof__(o)` plus the pre-header `sys.getsizeof` adds
//! (`_PySys_GetSizeOf`): the GC header for GC types, and from 3.11 the managed-dict words (3.12+:
//! managed dict or weakref). `__sizeof__` is modelled for str, int, list, dict, set, deque and
//! type objects; every other type gets `object.__sizeof__`: `tp_basicsize` plus
//! `tp_itemsize × |ob_size|`, exact for types that do not define their own.
//!
//! Untrusted memory: the walk is a loop over an explicit stack, every address is visited once
//! (a visited set), each object is charged to the stop's object budget, and every count read
//! from the target (entries, items, blocks, members) is capped by a named constant.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::layout::{tpflags, DictKeys, InstanceDict, LongObject};
use super::mimalloc::gc_head_size;
use super::snapshot::Snapshot;
use super::values::field;
use crate::error::{ReadError, ReadErrorKind};
use crate::memory::addr_map::{AddrMap, AddrSet};

/// Items of one container followed (list, tuple, dict entries, set slots, deque items).
pub const MAX_HEAP_ITEMS: u64 = 1 << 28;
/// Bytes of a variable-size object's items believed (`tp_itemsize × |ob_size|`): more is a
/// corrupt size, counted as `tp_basicsize` with an error.
const MAX_VAR_BYTES: u64 = 1 << 40;
/// `__slots__` members read from one type's `tp_members`.
const MAX_MEMBERS: u64 = 1024;
/// Base classes followed from a type.
const MAX_BASES: usize = 64;
/// Shared keys objects remembered (a class's instances share one; a program has a few per
/// class).
const MAX_SPLIT_KEYS: usize = 1 << 16;
/// Read errors kept (every one is counted).
const MAX_ERRORS: usize = 16;
/// Items read at once from a container's item array.
const CHUNK_ITEMS: u64 = 4096;
/// Bytes of an object's header read (3.10's compact str header is 72 bytes; a free-threaded
/// build's header is 16 bytes longer) ...
const HEADER: usize = 96;
/// ... and first: every other kind's fields the walk reads are in it (a dict's `ma_values`,
/// a set's `table`, a deque's `leftindex` end at 48).
const HEAD_READ: usize = 48;

// Include/object.h (3.10 to 3.15).
const HAVE_GC: u64 = 1 << 14;
const MANAGED_WEAKREF: u64 = 1 << 3;
const TYPE_SUBCLASS: u64 = 1 << 31;
/// Include/structmember.h: `T_OBJECT`, `T_OBJECT_EX` (`Py_T_OBJECT_EX`).
const T_OBJECT: i32 = 6;
const T_OBJECT_EX: i32 = 16;
/// `sizeof(PyMemberDef)`: name, type, offset, flags, doc.
const MEMBER_DEF: u64 = 40;
/// Modules/_collectionsmodule.c: `BLOCKLEN` items between `leftlink` and `rightlink`.
const DEQUE_BLOCKLEN: u64 = 64;
const DEQUE_BLOCK: u64 = 8 + DEQUE_BLOCKLEN * 8 + 8;
/// `dequeobject`: `PyObject_VAR_HEAD`, `leftblock`, `rightblock`, `leftindex` (3.10 to 3.15).
const DEQUE_LEFTBLOCK: u64 = 24;
const DEQUE_LEFTINDEX: u64 = 40;
/// `PyListObject.allocated`, right after `ob_item`.
const LIST_ALLOCATED_AFTER_ITEM: u64 = 8;
/// `PySetObject.smalltable`, 24 bytes after `table` (`hash`, `finger` between).
const SET_SMALLTABLE_AFTER_TABLE: u64 = 24;
/// `PyHeapTypeObject` from `ht_cached_keys` back: `ht_qualname` is the word before it, and
/// `sizeof(PyTypeObject)` ends 464 bytes before it (as_async, as_number, as_mapping,
/// as_sequence, as_buffer, ht_name, ht_slots, ht_qualname).
const HT_QUALNAME_BEFORE_KEYS: u64 = 8;
const TYPE_OBJECT_BEFORE_KEYS: u64 = 464;
/// `PyTypeObject` fields after `tp_base`: `tp_dict` (+8), `tp_bases` (+80), `tp_mro` (+88);
/// `tp_members` 16 bytes before it.
const TP_DICT_AFTER_BASE: u64 = 8;
const TP_BASES_AFTER_BASE: u64 = 80;
const TP_MRO_AFTER_BASE: u64 = 88;
const TP_MEMBERS_BEFORE_BASE: u64 = 16;

/// How an object's size and referents are read: its type's built-in base.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Str,
    Int,
    Bytes,
    List,
    Tuple,
    Dict,
    Set,
    Deque,
    Type,
    Module,
    Cell,
    /// `object.__sizeof__`, no referents of its own (float, None, bool, object, ...).
    Plain,
    /// A GC type whose referents the walk does not read (function, code, frame, ...).
    Opaque,
    /// generator, coroutine, async_generator: from 3.11 `tp_itemsize` counts the frame's
    /// slots but there is no `ob_size`; their `__sizeof__` (the code's frame size) is not
    /// read, `tp_basicsize` is counted. Referents not read.
    Generator,
}

/// What the walk needs of a type, read once.
struct TypeRec {
    name: String,
    kind: Kind,
    basicsize: u64,
    itemsize: u64,
    /// The words `sys.getsizeof` adds before the object.
    preheader: u64,
    flags: u64,
    /// Offsets of `__slots__` members (object pointers) over the heap-type bases.
    slots: Vec<u64>,
    /// A heap type: instances may have a `__dict__` or values.
    heap: bool,
}

/// One type's total.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeTotal {
    pub name: String,
    pub count: u64,
    pub bytes: u64,
}

/// One of the largest objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Largest {
    pub address: u64,
    pub type_name: String,
    pub bytes: u64,
    /// The container's or sequence's length (`len(o)`), for the kinds that have one.
    pub len: Option<u64>,
}

/// The census of one stop's heap.
#[derive(Debug, Default)]
pub struct Census {
    /// Sorted by bytes, largest first.
    pub types: Vec<TypeTotal>,
    pub largest: Vec<Largest>,
    pub objects: u64,
    pub bytes: u64,
    /// Objects whose referents the walk does not read, by type: what only they refer to is
    /// not counted.
    pub unwalked: Vec<(String, u64)>,
    /// Referents that could not be read (an address with no object there).
    pub unreadable: u64,
    /// The walk stopped early (a budget, or a GC list cut): the totals are a lower bound.
    pub complete: bool,
    pub errors: Vec<ReadError>,
}

/// One of the largest objects while the walk runs: (bytes, address, type, len), ordered by
/// bytes.
type Ranked = (u64, u64, u64, Option<u64>);

struct Walk<'a> {
    snap: &'a Snapshot,
    types: AddrMap<Option<TypeRec>>,
    seen: AddrSet,
    stack: Vec<u64>,
    totals: AddrMap<(u64, u64)>,
    unwalked: AddrMap<u64>,
    top: BinaryHeap<Reverse<Ranked>>,
    top_n: usize,
    /// Split keys already walked: (entries, owned size, usable entries).
    split_keys: RefCell<AddrMap<(u64, Option<u64>, u64)>>,
    objects: u64,
    bytes: u64,
    unreadable: u64,
    errors: Vec<ReadError>,
    stopped: bool,
}

impl Snapshot {
    /// The census of every interpreter's objects: the roots are their GC lists (default
    /// builds) and `locals`, the objects the threads' frames hold; `top` of the largest
    /// objects are kept.
    pub fn heap_census(&self, interps: &[u64], locals: &[u64], top: usize) -> Census {
        let mut w = Walk {
            snap: self,
            types: AddrMap::default(),
            seen: AddrSet::default(),
            stack: Vec::new(),
            totals: AddrMap::default(),
            unwalked: AddrMap::default(),
            top: BinaryHeap::new(),
            top_n: top,
            split_keys: RefCell::default(),
            objects: 0,
            bytes: 0,
            unreadable: 0,
            errors: Vec::new(),
            stopped: false,
        };
        let mut complete = true;
        match self.layout.interpreter_state.gc {
            // Free-threaded: the GC's objects are the used blocks of its mimalloc heaps.
            None => {
                for &interp in interps {
                    let errs = self.mimalloc_gc_objects(interp, |obj| {
                        if !w.stopped && w.seen.insert(obj) {
                            w.stack.push(obj);
                            w.drain();
                        }
                        !w.stopped
                    });
                    complete &= errs.is_empty();
                    errs.into_iter().for_each(|e| w.error(e));
                }
            }
            Some(lists) => {
                for &interp in interps {
                    if self.gc_collecting(interp) == Some(true) {
                        w.error(ReadError::corrupt(
                            interp,
                            "heap: stopped inside a collection (objects on its own lists are missed)",
                        ));
                        complete = false;
                    }
                    let errs = self.gc_objects(interp, &lists, |obj, _| {
                        if !w.stopped && w.seen.insert(obj) {
                            w.stack.push(obj);
                            w.drain();
                        }
                    });
                    if !errs.is_empty() {
                        complete = false;
                    }
                    if !w.stopped {
                        // (Once the walk stopped at a budget, the lists stop at it too.)
                        for e in errs {
                            w.error(e);
                        }
                    }
                }
            }
        }
        for &obj in locals {
            if w.stopped {
                break;
            }
            if obj != 0 && obj & 7 == 0 && w.seen.insert(obj) {
                w.stack.push(obj);
                w.drain();
            }
        }
        if w.stopped {
            complete = false;
        }
        w.finish(complete)
    }
}

impl Walk<'_> {
    /// A container whose referents could not all be read: it is still counted.
    fn note(&mut self, r: Result<(), ReadError>) {
        if let Err(e) = r {
            self.error(e);
        }
    }

    /// Keeps `e` (the first few); a budget's limit stops the walk.
    fn error(&mut self, e: ReadError) {
        if self.stopped {
            return;
        }
        if matches!(e.kind, ReadErrorKind::Limit { .. }) {
            self.stopped = true;
        }
        if self.errors.len() < MAX_ERRORS {
            self.errors.push(e);
        }
    }

    /// Visits everything on the stack and what it reaches.
    fn drain(&mut self) {
        let mut refs = Vec::new();
        while let Some(obj) = self.stack.pop() {
            if let Err(e) = self.snap.budget.object(obj) {
                self.error(e);
                self.stopped = true;
            }
            if self.stopped {
                self.stack.clear();
                return;
            }
            refs.clear();
            if let Err(e) = self.visit(obj, &mut refs) {
                if !matches!(e.kind, ReadErrorKind::Limit { .. }) {
                    self.unreadable += 1;
                }
                self.error(e);
                continue;
            }
            for &r in &refs {
                // Objects are 8-byte aligned; the small ints and None are objects too.
                if r != 0 && r & 7 == 0 && self.seen.insert(r) {
                    self.stack.push(r);
                }
            }
        }
    }

    /// Sizes and counts `obj`, and puts its referents in `refs`.
    fn visit(&mut self, obj: u64, refs: &mut Vec<u64>) -> Result<(), ReadError> {
        let snap = self.snap;
        let mut h = [0u8; HEADER];
        // A free-threaded build's longer object header moves every field after it.
        let grow = snap.layout.pyobject.ob_type.saturating_sub(8).min(16) as usize;
        let head_read = HEAD_READ + grow;
        if snap.mem.read_into(obj, &mut h[..head_read]).is_err() {
            // An object near the end of its mapping: its first words only.
            snap.mem.read_into(obj, &mut h[..32])?;
        }
        let ob_type = snap.layout.pyobject.ob_type as usize;
        let tp = h
            .get(ob_type..ob_type + 8)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()));
        if tp == 0 || tp & 7 != 0 {
            return Err(ReadError::corrupt(obj, "heap: object without a type"));
        }
        if !self.types.contains_key(&tp) {
            let rec = self.type_rec(tp);
            self.types.insert(tp, rec);
        }
        let Some(t) = self.types.get(&tp).and_then(|t| t.as_ref()) else {
            return Err(ReadError::corrupt(obj, "heap: unreadable type"));
        };
        if t.kind == Kind::Str {
            // The rest of a str's header (utf8, 3.10/3.11's wstr_length); past the end of a
            // short ASCII str at the end of its mapping, zeros (fields it does not use).
            if let Some(rest) = h.get_mut(head_read..) {
                if let Ok(at) = field(obj, head_read as u64) {
                    let _ = snap.mem.read_into(at, rest);
                }
            }
        }
        let word = |o: u64| -> u64 {
            h.get(o as usize..o as usize + 8)
                .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
        };
        let (kind, basicsize, itemsize, preheader, heap, tflags) = (
            t.kind,
            t.basicsize,
            t.itemsize,
            t.preheader,
            t.heap,
            t.flags,
        );
        let lay = &snap.layout;
        let ob_size = word(lay.list_object.ob_size) as i64;
        let mut pre = preheader;
        let mut len = None;
        let size = match kind {
            Kind::Str => {
                let (s, n) = self.str_size(obj, &h)?;
                len = Some(n);
                s
            }
            Kind::Int => match lay.long_object {
                LongObject::SignedSize { ob_digit, .. } => {
                    ob_digit.saturating_add(ob_size.unsigned_abs().saturating_mul(4))
                }
                LongObject::Tagged { lv_tag, ob_digit } => {
                    ob_digit.saturating_add((word(lv_tag) >> 3).max(1).saturating_mul(4))
                }
            },
            Kind::List => {
                let n = ob_size.max(0) as u64;
                len = Some(n);
                let items = word(lay.list_object.ob_item);
                let allocated = word(lay.list_object.ob_item + LIST_ALLOCATED_AFTER_ITEM);
                let r = self.items(items, n, refs);
                self.note(r);
                basicsize.saturating_add(allocated.saturating_mul(8))
            }
            Kind::Tuple => {
                let n = ob_size.max(0) as u64;
                len = Some(n);
                let r = field(obj, lay.tuple_object.ob_item).and_then(|at| self.items(at, n, refs));
                self.note(r);
                basicsize.saturating_add(itemsize.saturating_mul(n))
            }
            Kind::Dict => {
                len = Some(word(lay.dict_object.ma_used));
                let keys = word(lay.dict_object.ma_keys);
                let values = match word(lay.dict_object.ma_values) {
                    0 => None,
                    v => Some(field(v, lay.dict_object.values_array)?),
                };
                let (owned, usable) = match self.dict_keys(keys, values, refs) {
                    Ok(k) => k,
                    Err(e) => {
                        self.error(e);
                        (None, 0)
                    }
                };
                let mut s = basicsize;
                if values.is_some() {
                    s = s.saturating_add(usable.saturating_mul(8));
                }
                if let Some(k) = owned {
                    s = s.saturating_add(k);
                }
                s
            }
            Kind::Set => {
                len = Some(word(lay.set_object.used));
                let mask = word(lay.set_object.mask);
                let table = word(lay.set_object.table);
                let slots = mask.saturating_add(1);
                // setentry: {key, hash}; dummy entries are one static object, counted once.
                let r = self.pairs(table, slots, 16, 0, refs);
                self.note(r);
                let small = field(obj, lay.set_object.table + SET_SMALLTABLE_AFTER_TABLE)?;
                if table != small {
                    basicsize.saturating_add(slots.saturating_mul(16))
                } else {
                    basicsize
                }
            }
            Kind::Deque => {
                let n = ob_size.max(0) as u64;
                len = Some(n);
                let left = word(DEQUE_LEFTINDEX + grow as u64);
                let r = self.deque_items(obj, word(DEQUE_LEFTBLOCK + grow as u64), left, n, refs);
                self.note(r);
                let blocks = left.saturating_add(n).saturating_add(DEQUE_BLOCKLEN) / DEQUE_BLOCKLEN;
                basicsize.saturating_add(blocks.saturating_mul(DEQUE_BLOCK))
            }
            Kind::Type => {
                let base = lay.type_object.tp_base;
                for off in [TP_DICT_AFTER_BASE, TP_BASES_AFTER_BASE, TP_MRO_AFTER_BASE] {
                    refs.push(snap.mem.read_ptr(field(obj, base + off)?)?);
                }
                let flags = snap.mem.read_u64(field(obj, lay.type_object.tp_flags)?)?;
                let keys_at = lay.type_object.ht_cached_keys;
                if flags & tpflags::HEAPTYPE != 0 {
                    // type.__sizeof__: sizeof(PyHeapTypeObject) (the metatype's basic size)
                    // and the shared keys of its instances' dicts.
                    let keys = snap.mem.read_ptr(field(obj, keys_at)?)?;
                    let ks = if keys != 0 {
                        self.keys_size(keys).unwrap_or(0)
                    } else {
                        0
                    };
                    basicsize.saturating_add(ks)
                } else {
                    // A static type: sizeof(PyTypeObject), and no pre-header.
                    pre = 0;
                    keys_at.saturating_sub(TYPE_OBJECT_BEFORE_KEYS)
                }
            }
            Kind::Module => {
                refs.push(word(lay.module_md_dict));
                basicsize
            }
            Kind::Cell => {
                refs.push(word(lay.cell_ob_ref));
                basicsize
            }
            Kind::Bytes => {
                len = Some(ob_size.max(0) as u64);
                basicsize.saturating_add(itemsize.saturating_mul(ob_size.unsigned_abs()))
            }
            Kind::Generator => {
                *self.unwalked.entry(tp).or_insert(0) += 1;
                basicsize
            }
            Kind::Plain | Kind::Opaque => {
                if kind == Kind::Opaque {
                    *self.unwalked.entry(tp).or_insert(0) += 1;
                }
                let items = itemsize.saturating_mul(ob_size.unsigned_abs());
                if items > MAX_VAR_BYTES {
                    self.error(ReadError::too_large(obj, ob_size.unsigned_abs()));
                    basicsize
                } else {
                    basicsize.saturating_add(items)
                }
            }
        };
        if heap {
            self.instance_refs(obj, tp, tflags, basicsize, refs);
        }
        let bytes = size.saturating_add(pre);
        let e = self.totals.entry(tp).or_insert((0, 0));
        e.0 += 1;
        e.1 = e.1.saturating_add(bytes);
        self.objects += 1;
        self.bytes = self.bytes.saturating_add(bytes);
        if self.top_n > 0 {
            let item = Reverse((bytes, obj, tp, len));
            if self.top.len() < self.top_n {
                self.top.push(item);
            } else if self.top.peek().is_some_and(|m| m.0 .0 < bytes) {
                self.top.pop();
                self.top.push(item);
            }
        }
        Ok(())
    }

    /// `str.__sizeof__` (Objects/unicodeobject.c) and the length.
    fn str_size(&self, obj: u64, h: &[u8; HEADER]) -> Result<(u64, u64), ReadError> {
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

    /// `n` object pointers at `at`, into `refs`.
    fn items(&self, at: u64, n: u64, refs: &mut Vec<u64>) -> Result<(), ReadError> {
        self.pairs(at, n, 8, 0, refs)
    }

    /// The word at `offset` of each of `n` records of `stride` bytes at `at`, into `refs`.
    fn pairs(
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
    fn fields(
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
    fn dict_keys(
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
        let (entries, nentries, entry, hash, usable, size) = match self.snap.layout.dict_object.keys
        {
            DictKeys::V310 {
                dk_size,
                dk_nentries,
                dk_indices,
            } => {
                let size = mem.read_i64(field(keys, dk_size)?)?;
                if !(1..=(1 << 40)).contains(&size) || size & (size - 1) != 0 {
                    return Err(ReadError::corrupt(keys, "dict size"));
                }
                let size = size as u64;
                let ix = match size {
                    0..=0xff => 1,
                    0x100..=0xffff => 2,
                    0x1_0000..=0xffff_ffff => 4,
                    _ => 8,
                };
                let n = mem.read_i64(field(keys, dk_nentries)?)?;
                let usable = (size << 1) / 3;
                let total = dk_indices + ix * size + 24 * usable;
                (
                    field(keys, dk_indices + ix * size)?,
                    n,
                    24,
                    true,
                    usable,
                    total,
                )
            }
            DictKeys::V311 {
                dk_log2_size,
                dk_log2_index_bytes,
                dk_kind,
                dk_nentries,
                dk_indices,
            } => {
                let log2 = mem.read_u8(field(keys, dk_log2_size)?)?;
                let log2ix = mem.read_u8(field(keys, dk_log2_index_bytes)?)?;
                let kind = mem.read_u8(field(keys, dk_kind)?)?;
                if log2 > 40 || log2ix > 43 || kind > 2 {
                    return Err(ReadError::corrupt(keys, "dict keys"));
                }
                let n = mem.read_i64(field(keys, dk_nentries)?)?;
                let general = kind == 0;
                let es = if general { 24 } else { 16 };
                let usable = ((1u64 << log2) << 1) / 3;
                let total = dk_indices + (1u64 << log2ix) + es * usable;
                // shared_keys_usable_size: dk_nentries + dk_usable (the word before).
                let split_usable = if values.is_some() {
                    let u = mem.read_i64(field(keys, dk_nentries - 8)?)?;
                    (u.max(0) as u64).saturating_add(n.max(0) as u64)
                } else {
                    usable
                };
                (
                    field(keys, dk_indices + (1u64 << log2ix))?,
                    n,
                    es,
                    general,
                    split_usable,
                    total,
                )
            }
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

    /// `_PyDict_KeysSize` of a keys object.
    fn keys_size(&self, keys: u64) -> Result<u64, ReadError> {
        let mem = &self.snap.mem;
        match self.snap.layout.dict_object.keys {
            DictKeys::V310 {
                dk_size,
                dk_indices,
                ..
            } => {
                let size = mem.read_i64(field(keys, dk_size)?)?.clamp(0, 1 << 40) as u64;
                let ix = match size {
                    0..=0xff => 1,
                    0x100..=0xffff => 2,
                    0x1_0000..=0xffff_ffff => 4,
                    _ => 8,
                };
                Ok(dk_indices + ix * size + 24 * ((size << 1) / 3))
            }
            DictKeys::V311 {
                dk_log2_size,
                dk_log2_index_bytes,
                dk_kind,
                dk_indices,
                ..
            } => {
                let log2 = mem.read_u8(field(keys, dk_log2_size)?)?.min(40);
                let log2ix = mem.read_u8(field(keys, dk_log2_index_bytes)?)?.min(43);
                let es = if mem.read_u8(field(keys, dk_kind)?)? == 0 {
                    24
                } else {
                    16
                };
                Ok(dk_indices + (1u64 << log2ix) + es * (((1u64 << log2) << 1) / 3))
            }
        }
    }

    /// The items of a deque's blocks.
    fn deque_items(
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

    /// An instance of a heap type: its `__slots__` and its `__dict__` or values. A part
    /// that cannot be read is an error entry; the object is still counted.
    fn instance_refs(
        &mut self,
        obj: u64,
        tp: u64,
        tflags: u64,
        basicsize: u64,
        refs: &mut Vec<u64>,
    ) {
        let snap = self.snap;
        if let Some(Some(t)) = self.types.get(&tp) {
            for &off in &t.slots {
                if let Ok(p) = field(obj, off).and_then(|a| snap.mem.read_ptr(a)) {
                    refs.push(p);
                }
            }
        }
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

    /// Reads what the walk needs of type `tp`; None when it cannot be read.
    fn type_rec(&mut self, tp: u64) -> Option<TypeRec> {
        let snap = self.snap;
        let t = snap.type_at(tp).ok()?;
        let to = &snap.layout.type_object;
        let itemsize = snap
            .mem
            .read_u64(field(tp, to.tp_basicsize + 8).ok()?)
            .ok()?;
        let heap = t.flags & tpflags::HEAPTYPE != 0;
        // The first base that is a built-in kind (a static type, or one of the heap types
        // 3.12+'s extension modules make, such as collections.deque) says how instances are
        // laid out and sized; the heap types before it add `__slots__`.
        let mut base = t.clone();
        let mut slots = Vec::new();
        let mut kind = Kind::Plain;
        for _ in 0..MAX_BASES {
            if let Some(k) = builtin_kind(&base.name, base.flags) {
                kind = k;
                break;
            }
            if base.flags & tpflags::HEAPTYPE == 0 {
                kind = if base.flags & HAVE_GC != 0 {
                    Kind::Opaque
                } else {
                    Kind::Plain
                };
                break;
            }
            self.slot_offsets(base.addr, &mut slots);
            if base.base == 0 {
                break;
            }
            base = snap.type_at(base.base).ok()?;
        }
        // _PyType_PreHeaderSize (3.11+), the GC header alone before.
        let minor = snap.layout.version.minor;
        let words = if minor >= 12 {
            tpflags::MANAGED_DICT | MANAGED_WEAKREF
        } else if minor == 11 {
            tpflags::MANAGED_DICT
        } else {
            0
        };
        let preheader = if t.flags & HAVE_GC != 0 {
            gc_head_size(&snap.layout)
        } else {
            0
        } + if t.flags & words != 0 { 16 } else { 0 };
        let name = if heap {
            self.heap_type_name(tp).unwrap_or_else(|| t.name.clone())
        } else {
            t.name.clone()
        };
        Some(TypeRec {
            name,
            kind,
            basicsize: t.basicsize,
            itemsize,
            preheader,
            flags: t.flags,
            slots,
            heap,
        })
    }

    /// The object members (`__slots__`) of heap type `tp`: `tp_members` entries of type
    /// `T_OBJECT` or `T_OBJECT_EX`.
    fn slot_offsets(&self, tp: u64, out: &mut Vec<u64>) {
        let snap = self.snap;
        let Ok(at) = field(tp, snap.layout.type_object.tp_base - TP_MEMBERS_BEFORE_BASE) else {
            return;
        };
        let Ok(mut m) = snap.mem.read_ptr(at) else {
            return;
        };
        for _ in 0..MAX_MEMBERS {
            let mut rec = [0u8; MEMBER_DEF as usize];
            if m == 0 || snap.mem.read_into(m, &mut rec).is_err() {
                return;
            }
            let name = u64::from_le_bytes(rec[0..8].try_into().unwrap_or_default());
            if name == 0 {
                return;
            }
            let ty = i32::from_le_bytes(rec[8..12].try_into().unwrap_or_default());
            let off = i64::from_le_bytes(rec[16..24].try_into().unwrap_or_default());
            if (ty == T_OBJECT || ty == T_OBJECT_EX) && off > 0 && !out.contains(&(off as u64)) {
                out.push(off as u64);
            }
            m = m.wrapping_add(MEMBER_DEF);
        }
    }

    /// `module.Qualname` of a heap type, as `repr(type)` shows it (no module for builtins).
    fn heap_type_name(&self, tp: u64) -> Option<String> {
        let snap = self.snap;
        let to = &snap.layout.type_object;
        let q = snap
            .mem
            .read_ptr(field(tp, to.ht_cached_keys - HT_QUALNAME_BEFORE_KEYS).ok()?)
            .ok()?;
        let qualname = snap.read_name(q).ok()?;
        let dict = snap
            .mem
            .read_ptr(field(tp, to.tp_base + TP_DICT_AFTER_BASE).ok()?)
            .ok()?;
        let module = if dict != 0 {
            snap.dict_get(dict, "__module__")
                .ok()
                .flatten()
                .and_then(|m| snap.read_name(m).ok())
        } else {
            None
        };
        Some(match module {
            Some(m) if m != "builtins" => format!("{m}.{qualname}"),
            _ => qualname,
        })
    }

    fn finish(mut self, complete: bool) -> Census {
        let name = |types: &AddrMap<Option<TypeRec>>, tp: u64| {
            types
                .get(&tp)
                .and_then(|t| t.as_ref())
                .map_or_else(|| format!("<type {tp:#x}>"), |t| t.name.clone())
        };
        let mut types: Vec<TypeTotal> = self
            .totals
            .iter()
            .map(|(&tp, &(count, bytes))| TypeTotal {
                name: name(&self.types, tp),
                count,
                bytes,
            })
            .collect();
        types.sort_by(|a, b| {
            b.bytes
                .cmp(&a.bytes)
                .then(b.count.cmp(&a.count))
                .then(a.name.cmp(&b.name))
        });
        let mut top: Vec<_> = std::mem::take(&mut self.top).into_vec();
        top.sort_by(|a, b| b.0 .0.cmp(&a.0 .0).then(a.0 .1.cmp(&b.0 .1)));
        let largest = top
            .into_iter()
            .map(|Reverse((bytes, address, tp, len))| Largest {
                address,
                type_name: name(&self.types, tp),
                bytes,
                len,
            })
            .collect();
        let mut unwalked: Vec<(String, u64)> = self
            .unwalked
            .iter()
            .map(|(&tp, &n)| (name(&self.types, tp), n))
            .collect();
        unwalked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        Census {
            types,
            largest,
            objects: self.objects,
            bytes: self.bytes,
            unwalked,
            unreadable: self.unreadable,
            complete,
            errors: self.errors,
        }
    }
}

/// The kind of a built-in type by its flags (`Py_TPFLAGS_*_SUBCLASS`) or `tp_name`.
fn builtin_kind(name: &str, f: u64) -> Option<Kind> {
    Some(if f & tpflags::UNICODE_SUBCLASS != 0 {
        Kind::Str
    } else if f & tpflags::LONG_SUBCLASS != 0 {
        Kind::Int
    } else if f & tpflags::BYTES_SUBCLASS != 0 {
        Kind::Bytes
    } else if f & tpflags::LIST_SUBCLASS != 0 {
        Kind::List
    } else if f & tpflags::TUPLE_SUBCLASS != 0 {
        Kind::Tuple
    } else if f & tpflags::DICT_SUBCLASS != 0 {
        Kind::Dict
    } else if f & TYPE_SUBCLASS != 0 {
        Kind::Type
    } else {
        match name {
            "set" | "frozenset" => Kind::Set,
            "collections.deque" => Kind::Deque,
            "module" => Kind::Module,
            "cell" => Kind::Cell,
            "object" => Kind::Plain,
            "generator" | "coroutine" | "async_generator" => Kind::Generator,
            _ => return None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpython::gc::GC_HEAD_SIZE;
    use crate::cpython::layout::Layout;
    use crate::cpython::version::Version;
    use crate::memory::FakeMemory;

    const LIST_TYPE: u64 = 0x1000;
    const BYTES_TYPE: u64 = 0x2000;
    const INTERP: u64 = 0x10_0000;

    /// A 3.12 target with `list` and `bytes` and an interpreter whose GC lists are empty.
    fn target() -> (FakeMemory, Layout) {
        let l = Layout::builtin(Version::new(3, 12, 1)).unwrap();
        let mut m = FakeMemory::new();
        for (tp, name, text, flags, size, item) in [
            (
                LIST_TYPE,
                0x1800u64,
                &b"list"[..],
                tpflags::LIST_SUBCLASS | HAVE_GC,
                40u64,
                0u64,
            ),
            (
                BYTES_TYPE,
                0x2800,
                &b"bytes"[..],
                tpflags::BYTES_SUBCLASS,
                33,
                1,
            ),
        ] {
            m.put(tp, &[0u8; 0x400]);
            m.put_u64(tp + l.type_object.tp_name, name);
            m.put_u64(tp + l.type_object.tp_flags, flags);
            m.put_u64(tp + l.type_object.tp_basicsize, size);
            m.put_u64(tp + l.type_object.tp_basicsize + 8, item);
            m.put(name, &[0u8; 64]).put(name, text);
        }
        let lists = l.interpreter_state.gc.unwrap();
        m.put(INTERP, &[0u8; 0x1000]);
        for h in lists.heads {
            let head = INTERP + lists.gc + h;
            m.put_u64(head, head).put_u64(head + 8, head);
        }
        (m, l)
    }

    /// Links the objects (addresses after their GC headers) on the first GC list.
    fn gc_list(m: &mut FakeMemory, l: &Layout, objs: &[u64]) {
        let lists = l.interpreter_state.gc.unwrap();
        let head = INTERP + lists.gc + lists.heads[0];
        let nodes: Vec<u64> = objs.iter().map(|o| o - GC_HEAD_SIZE).collect();
        let mut prev = head;
        for &n in &nodes {
            m.put_u64(prev, n).put_u64(n + 8, prev);
            prev = n;
        }
        m.put_u64(prev, head).put_u64(head + 8, prev);
    }

    /// A list at `at` (items at `at + 0x100`), allocated as long as it is.
    fn list(m: &mut FakeMemory, l: &Layout, at: u64, items: &[u64]) {
        m.put(at - GC_HEAD_SIZE, &[0u8; 0x100]);
        m.put_u64(at + l.pyobject.ob_type, LIST_TYPE);
        m.put_u64(at + l.list_object.ob_size, items.len() as u64);
        m.put_u64(at + l.list_object.ob_item, at + 0x100);
        m.put_u64(at + l.list_object.ob_item + 8, items.len() as u64);
        for (i, item) in items.iter().enumerate() {
            m.put_u64(at + 0x100 + 8 * i as u64, *item);
        }
    }

    fn bytes(m: &mut FakeMemory, l: &Layout, at: u64, len: u64) {
        m.put(at, &[0u8; 0x100]);
        m.put_u64(at + l.pyobject.ob_type, BYTES_TYPE);
        m.put_u64(at + l.bytes_object.ob_size, len);
    }

    #[test]
    fn counts_gc_objects_and_what_they_hold_once() {
        let (mut m, l) = target();
        // Two lists holding each other (a cycle) and the same bytes object twice; one that
        // only a list holds (not GC-tracked) is found through it.
        list(&mut m, &l, 0x20_0000, &[0x30_0000, 0x40_0000, 0x40_0000]);
        list(&mut m, &l, 0x30_0000, &[0x20_0000, 0x50_0000]);
        bytes(&mut m, &l, 0x40_0000, 100);
        bytes(&mut m, &l, 0x50_0000, 7);
        gc_list(&mut m, &l, &[0x20_0000, 0x30_0000]);
        let c = Snapshot::for_test(m, l).heap_census(&[INTERP], &[], 2);
        assert!(c.complete && c.errors.is_empty(), "{:?}", c.errors);
        assert_eq!(c.objects, 4);
        // list: 40 + 8 × allocated + the GC header; bytes: 33 + len.
        let want = [
            ("bytes".to_string(), 2, 133 + 40),
            ("list".to_string(), 2, 40 + 24 + 16 + 40 + 16 + 16),
        ];
        let got: Vec<_> = c
            .types
            .iter()
            .map(|t| (t.name.clone(), t.count, t.bytes))
            .collect();
        assert_eq!(got, want);
        assert_eq!(c.bytes, 173 + 152);
        assert_eq!(c.largest.len(), 2);
        assert_eq!(
            (c.largest[0].address, c.largest[0].bytes, c.largest[0].len),
            (0x40_0000, 133, Some(100))
        );
        assert_eq!(c.largest[1].address, 0x20_0000);
    }

    #[test]
    fn wild_pointers_and_lying_sizes_are_errors_not_hangs() {
        let (mut m, l) = target();
        // An item that points nowhere, a list that claims 2^40 items.
        list(&mut m, &l, 0x20_0000, &[0x7777_0000, 0x30_0000]);
        list(&mut m, &l, 0x30_0000, &[]);
        m.put_u64(0x30_0000 + l.list_object.ob_size, 1 << 40);
        gc_list(&mut m, &l, &[0x20_0000]);
        let c = Snapshot::for_test(m, l).heap_census(&[INTERP], &[], 20);
        assert_eq!(c.unreadable, 1, "{:?}", c.errors);
        assert_eq!(c.errors.len(), 2);
        assert_eq!(c.objects, 2);
    }

    #[test]
    fn a_cut_gc_list_is_a_lower_bound() {
        let (mut m, l) = target();
        list(&mut m, &l, 0x20_0000, &[]);
        gc_list(&mut m, &l, &[0x20_0000]);
        // Its back link disagrees.
        m.put_u64(0x20_0000 - GC_HEAD_SIZE + 8, 0x1234_5670);
        let c = Snapshot::for_test(m, l).heap_census(&[INTERP], &[], 20);
        assert!(!c.complete);
        assert_eq!(c.errors.len(), 1);
    }
}
