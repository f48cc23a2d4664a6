//! One object: its size as `sys.getsizeof` gives it, by its type's kind, and its referents.

use super::referents::{DEQUE_BLOCK, DEQUE_BLOCKLEN};
use super::types::TypeRec;
use super::types::{Kind, DEFAULT_OBJECT_HEADER};
use super::Walk;
use crate::cpython::layout::{tpflags, LongObject};
use crate::cpython::torch::{TorchVersion, DEVICE_CPU, DEVICE_CUDA};
use crate::cpython::values::field;
use crate::error::ReadError;
use std::cmp::Reverse;

/// Bytes of a variable-size object's items believed (`tp_itemsize × |ob_size|`): more is a
/// corrupt size, counted as `tp_basicsize` with an error.
const MAX_VAR_BYTES: u64 = 1 << 40;
/// `_PyBytesObject_SIZE`: a bytes object's header and its terminating NUL.
const BYTES_HEADER: u64 = 33;
/// Bytes of an object's header read (3.10's compact str header is 72 bytes; a free-threaded
/// build's header is 16 bytes longer) ...
pub(super) const HEADER: usize = 96;
/// ... and first: every other kind's fields the walk reads are in it (a dict's `ma_values`,
/// a set's `table`, a deque's `leftindex` end at 48).
pub(super) const HEAD_READ: usize = 48;

/// What a visit found of one object.
pub(super) struct Visited {
    pub tp: u64,
    /// `sys.getsizeof`'s.
    pub bytes: u64,
    pub len: Option<u64>,
    /// A tensor's storage (its address and the bytes it keeps: CPU or CUDA), a node of the
    /// graph of its own so that its bytes are retained once, by its dominator.
    pub storage: Option<(u64, u64)>,
}

/// An object's first bytes, as read.
struct Head {
    h: [u8; HEADER],
}

impl Head {
    /// The word at `o`, 0 past what was read.
    fn word(&self, o: u64) -> u64 {
        self.h
            .get(o as usize..o as usize + 8)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
    }
}

/// What the visit of one object needs of its type's record.
#[derive(Clone, Copy)]
struct Shape {
    kind: Kind,
    basicsize: u64,
    itemsize: u64,
    preheader: u64,
    heap: bool,
    flags: u64,
    /// It has `__slots__` members.
    members: bool,
    words_end: u64,
}

impl Shape {
    fn of(t: &TypeRec) -> Shape {
        Shape {
            kind: t.kind,
            basicsize: t.basicsize,
            itemsize: t.itemsize,
            preheader: t.preheader,
            heap: t.heap,
            flags: t.flags,
            members: !t.slots.is_empty(),
            words_end: t.object_words_end,
        }
    }
}

impl Walk<'_> {
    /// Sizes and counts `obj`, and puts its referents in `refs`.
    pub(super) fn visit(&mut self, obj: u64, refs: &mut Vec<u64>) -> Result<Visited, ReadError> {
        let (head, tp) = self.head(obj)?;
        let Some(s) = self.types.get(&tp).and_then(|t| t.as_ref()).map(Shape::of) else {
            return Err(ReadError::corrupt(obj, "heap: unreadable type"));
        };
        let (size, len, pre) = match self.container_size(obj, &s, &head, refs)? {
            Some((size, len)) => (size, Some(len), s.preheader),
            None => self.other_size(obj, tp, &s, &head, refs)?,
        };
        if s.members {
            self.member_refs(obj, tp, refs);
        }
        if s.heap {
            self.instance_refs(obj, tp, s.flags, s.basicsize, refs);
        }
        let bytes = size.saturating_add(pre);
        self.count(obj, tp, bytes, len);
        let storage = if s.kind == Kind::Tensor {
            self.storage_of(obj, tp)
        } else {
            None
        };
        Ok(Visited {
            tp,
            bytes,
            len,
            storage,
        })
    }

    /// `obj`'s first bytes (a str's whole header) and its type, whose record is then known.
    fn head(&mut self, obj: u64) -> Result<(Head, u64), ReadError> {
        let snap = self.snap;
        let mut h = [0u8; HEADER];
        // A free-threaded build's longer object header moves every field after it: as much
        // more is read.
        let grow = (snap
            .layout
            .pyobject
            .header_size()
            .saturating_sub(DEFAULT_OBJECT_HEADER))
        .min(16) as usize;
        let head_read = HEAD_READ + grow;
        if snap.mem.read_into(obj, &mut h[..head_read]).is_err() {
            // An object near the end of its mapping: its first words only.
            snap.mem.read_into(obj, &mut h[..32])?;
        }
        let head = Head { h };
        let tp = head.word(snap.layout.pyobject.ob_type);
        if tp == 0 || tp & 7 != 0 {
            return Err(ReadError::corrupt(obj, "heap: object without a type"));
        }
        if !self.types.contains_key(&tp) {
            let rec = self.type_rec(tp);
            self.types.insert(tp, rec);
        }
        let mut head = head;
        let is_str = self
            .types
            .get(&tp)
            .and_then(|t| t.as_ref())
            .is_some_and(|t| t.kind == Kind::Str);
        if is_str {
            // The rest of a str's header (utf8, 3.10/3.11's wstr_length); past the end of a
            // short ASCII str at the end of its mapping, zeros (fields it does not use).
            if let Some(rest) = head.h.get_mut(head_read..) {
                if let Ok(at) = field(obj, head_read as u64) {
                    let _ = snap.mem.read_into(at, rest);
                }
            }
        }
        Ok((head, tp))
    }

    /// A list's, tuple's, dict's, set's or deque's size and length, its items into `refs`;
    /// None for another kind.
    fn container_size(
        &mut self,
        obj: u64,
        s: &Shape,
        head: &Head,
        refs: &mut Vec<u64>,
    ) -> Result<Option<(u64, u64)>, ReadError> {
        let lay = &self.snap.layout;
        let (basicsize, itemsize) = (s.basicsize, s.itemsize);
        let ob_size = head.word(lay.list_object.ob_size) as i64;
        let len: Option<u64>;
        let size = match s.kind {
            Kind::List => {
                let n = ob_size.max(0) as u64;
                len = Some(n);
                let items = head.word(lay.list_object.ob_item);
                let allocated = head.word(lay.list_allocated());
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
                len = Some(head.word(lay.dict_object.ma_used));
                let keys = head.word(lay.dict_object.ma_keys);
                let values = match head.word(lay.dict_object.ma_values) {
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
                len = Some(head.word(lay.set_object.used));
                let mask = head.word(lay.set_object.mask);
                let table = head.word(lay.set_object.table);
                let slots = mask.saturating_add(1);
                // setentry: {key, hash}; dummy entries are one static object, counted once.
                let r = self.pairs(table, slots, 16, 0, refs);
                self.note(r);
                let small = field(obj, lay.set_smalltable())?;
                if table != small {
                    basicsize.saturating_add(slots.saturating_mul(16))
                } else {
                    basicsize
                }
            }
            Kind::Deque => {
                let n = ob_size.max(0) as u64;
                len = Some(n);
                let left = head.word(lay.deque_leftindex());
                let r = self.deque_items(obj, head.word(lay.deque_leftblock()), left, n, refs);
                self.note(r);
                let blocks = left.saturating_add(n).saturating_add(DEQUE_BLOCKLEN) / DEQUE_BLOCKLEN;
                basicsize.saturating_add(blocks.saturating_mul(DEQUE_BLOCK))
            }
            _ => return Ok(None),
        };
        Ok(Some((size, len.unwrap_or(0))))
    }

    /// Any other kind's size and length (None where it has none), and the pre-header
    /// `sys.getsizeof` adds (none for a static type).
    fn other_size(
        &mut self,
        obj: u64,
        tp: u64,
        s: &Shape,
        head: &Head,
        refs: &mut Vec<u64>,
    ) -> Result<(u64, Option<u64>, u64), ReadError> {
        let snap = self.snap;
        let lay = &snap.layout;
        let (kind, basicsize, itemsize) = (s.kind, s.basicsize, s.itemsize);
        let ob_size = head.word(lay.list_object.ob_size) as i64;
        let mut pre = s.preheader;
        let mut len = None;
        let size = match kind {
            Kind::Str => {
                let (s, n) = self.str_size(obj, &head.h)?;
                len = Some(n);
                s
            }
            Kind::Int => match lay.long_object {
                LongObject::SignedSize { ob_digit, .. } => {
                    ob_digit.saturating_add(ob_size.unsigned_abs().saturating_mul(4))
                }
                LongObject::Tagged { lv_tag, ob_digit } => {
                    ob_digit.saturating_add((head.word(lv_tag) >> 3).max(1).saturating_mul(4))
                }
            },
            Kind::Type => {
                let to = &lay.type_object;
                for off in [to.tp_dict(), to.tp_bases(), to.tp_mro()] {
                    refs.push(snap.mem.read_ptr(field(obj, off)?)?);
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
                    lay.type_object.static_type_size()
                }
            }
            Kind::Module => {
                refs.push(head.word(lay.module_md_dict));
                basicsize
            }
            Kind::Cell => {
                refs.push(head.word(lay.cell_ob_ref));
                basicsize
            }
            Kind::Bytes => {
                len = Some(ob_size.max(0) as u64);
                basicsize.saturating_add(itemsize.saturating_mul(ob_size.unsigned_abs()))
            }
            Kind::ByteArray => {
                len = Some(ob_size.max(0) as u64);
                // bytearray.__sizeof__ (Objects/bytearrayobject.c): `_PyObject_SIZE(type) +
                // ob_alloc`; 3.15 keeps the bytes in a bytes object (`ob_bytes_object`,
                // `ob_alloc` its length) and counts that object's header too (measured: a
                // 150,010-byte bytearray grown by `+=` gives 64 + 168,767 + 33).
                let alloc = head.word(lay.bytearray_alloc()).min(MAX_VAR_BYTES);
                let backing = if lay.bytearray_bytes_backed() && alloc > 0 {
                    BYTES_HEADER
                } else {
                    0
                };
                basicsize.saturating_add(alloc).saturating_add(backing)
            }
            Kind::Code => {
                let r = self.code_refs(obj, refs);
                self.note(r);
                let var = self.var_size(obj, basicsize, itemsize, ob_size);
                let s = self.code_size(obj, var);
                self.or_basic(s, basicsize)
            }
            Kind::Frame => {
                *self.unwalked.entry(tp).or_insert(0) += 1;
                let s = self.frame_size(obj, basicsize, ob_size);
                self.or_basic(s, basicsize)
            }
            Kind::Generator => {
                *self.unwalked.entry(tp).or_insert(0) += 1;
                let s = self.generator_size(obj, basicsize);
                self.or_basic(s, basicsize)
            }
            Kind::Function => {
                let r = self.function_refs(obj, s.words_end, refs);
                self.note(r);
                basicsize
            }
            Kind::NdArray => self.ndarray_size(obj, basicsize, refs),
            // Containers are sized by `container_size`.
            Kind::Plain
            | Kind::Opaque
            | Kind::Tensor
            | Kind::List
            | Kind::Tuple
            | Kind::Dict
            | Kind::Set
            | Kind::Deque => {
                if kind == Kind::Opaque {
                    *self.unwalked.entry(tp).or_insert(0) += 1;
                }
                self.var_size(obj, basicsize, itemsize, ob_size)
            }
        };
        Ok((size, len, pre))
    }

    /// `ndarray.__sizeof__`: `tp_basicsize`, its dimensions and the data it owns; without
    /// numpy's version (or with the array unreadable) `tp_basicsize` alone, with an error
    /// (once) saying the data is not counted.
    fn ndarray_size(&mut self, obj: u64, basicsize: u64, refs: &mut Vec<u64>) -> u64 {
        let major = match self.snap.numpy_major() {
            Ok(Some(m)) => m,
            Ok(None) | Err(_) => {
                if !self.numpy_noted {
                    self.numpy_noted = true;
                    self.error(ReadError::corrupt(
                        obj,
                        "numpy.ndarray (numpy's version unknown: its data not counted)",
                    ));
                }
                return basicsize;
            }
        };
        match self.snap.ndarray_extra(obj, major) {
            Ok((extra, a)) => {
                refs.push(a.base);
                refs.push(a.descr);
                basicsize.saturating_add(extra)
            }
            Err(e) => {
                self.error(e);
                basicsize
            }
        }
    }

    /// The storage of tensor `obj` of type `tp`, its bytes added to the type's data or device
    /// bytes the first time the walk meets it; None where it has none or it cannot be read
    /// (then the type's are unknown, with an error, once).
    fn storage_of(&mut self, obj: u64, tp: u64) -> Option<(u64, u64)> {
        let unknown = match self.snap.torch_version() {
            Ok(TorchVersion::Checked) => None,
            Ok(TorchVersion::Other(_)) => Some(ReadError::corrupt(
                obj,
                "torch tensor storage (torch's version is not 2.15.0, whose layout is read): data_bytes unknown",
            )),
            Ok(TorchVersion::Absent) | Err(_) => Some(ReadError::corrupt(
                obj,
                "torch tensor storage (torch.__version__ unreadable): data_bytes unknown",
            )),
        };
        if let Some(e) = unknown {
            self.data_totals.entry(tp).or_default().2 = true;
            if !self.torch_noted {
                self.torch_noted = true;
                self.error(e);
            }
            return None;
        }
        match self.snap.tensor_storage(obj) {
            Ok(Some(st)) => {
                let bytes = match st.device_type {
                    DEVICE_CPU | DEVICE_CUDA => st.nbytes,
                    // Meta and other devices: no memory of the process's own or a GPU's.
                    _ => 0,
                };
                if self.storages.insert(st.addr, ()).is_none() {
                    let t = self.data_totals.entry(tp).or_default();
                    if st.device_type == DEVICE_CUDA {
                        t.1 = t.1.saturating_add(bytes);
                    } else {
                        t.0 = t.0.saturating_add(bytes);
                    }
                }
                Some((st.addr, bytes))
            }
            Ok(None) => {
                self.data_totals.entry(tp).or_default();
                None
            }
            Err(e) => {
                self.data_totals.entry(tp).or_default();
                self.error(e);
                None
            }
        }
    }

    /// Adds `obj` to its type's total and to the largest objects.
    fn count(&mut self, obj: u64, tp: u64, bytes: u64, len: Option<u64>) {
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
    }

    /// `object.__sizeof__`: `tp_basicsize + tp_itemsize × |ob_size|`, a corrupt size counted
    /// as `tp_basicsize` with an error.
    fn var_size(&mut self, obj: u64, basicsize: u64, itemsize: u64, ob_size: i64) -> u64 {
        let items = itemsize.saturating_mul(ob_size.unsigned_abs());
        if items > MAX_VAR_BYTES {
            self.error(ReadError::too_large(obj, ob_size.unsigned_abs()));
            basicsize
        } else {
            basicsize.saturating_add(items)
        }
    }

    /// A modelled size, or `tp_basicsize` (with an error) where its parts cannot be read.
    fn or_basic(&mut self, size: Result<u64, ReadError>, basicsize: u64) -> u64 {
        size.unwrap_or_else(|e| {
            self.error(e);
            basicsize
        })
    }
}
