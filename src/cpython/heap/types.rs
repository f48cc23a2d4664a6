//! What the walk needs of a type, read once: its kind (the built-in base that says how its
//! instances are sized and walked), sizes, pre-header, `__slots__` and name.

use super::Walk;
use crate::cpython::layout::tpflags;
use crate::cpython::mimalloc::gc_head_size;
use crate::cpython::values::field;

/// `__slots__` members read from one type's `tp_members`.
const MAX_MEMBERS: u64 = 1024;
/// Base classes followed from a type.
const MAX_BASES: usize = 64;

/// Include/structmember.h: `T_OBJECT`, `T_OBJECT_EX` (`Py_T_OBJECT_EX`).
const T_OBJECT: i32 = 6;
const T_OBJECT_EX: i32 = 16;
/// `sizeof(PyMemberDef)`: name, type, offset, flags, doc.
const MEMBER_DEF: u64 = 40;
/// A default build's `PyObject_HEAD` (`ob_refcnt`, `ob_type`).
pub(super) const DEFAULT_OBJECT_HEADER: u64 = 16;

/// Bytes of a function's object fields believed (3.15's has 15 words).
const MAX_FUNCTION_BYTES: u64 = 512;

/// How an object's size and referents are read: its type's built-in base.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
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
    /// bytearray: `bytearray.__sizeof__` counts its allocation (`ob_alloc`).
    ByteArray,
    /// code: its own `__sizeof__`; referents its members and `co_localsplus*`.
    Code,
    /// frame: its own `__sizeof__`; referents its members only (not its locals).
    Frame,
    /// function: every word before its `vectorcall` is an object pointer.
    Function,
    /// `object.__sizeof__`, no referents of its own beyond its type's object members (float,
    /// None, bool, object, slice, ...).
    Plain,
    /// A GC type whose referents the walk does not read (function, code, frame, ...).
    Opaque,
    /// generator, coroutine, async_generator: from 3.11 `tp_itemsize` counts the frame's
    /// slots but there is no `ob_size`; their `__sizeof__` counts the code's frame slots.
    /// Referents: their type's members (3.10's `gi_frame`, `gi_code`), not the frame's locals.
    Generator,
    /// numpy.ndarray: `ndarray.__sizeof__` counts its dimensions and the data it owns
    /// (crate::cpython::numpy); referents its base (what a view keeps alive) and dtype.
    NdArray,
    /// torch.Tensor (`torch._C.TensorBase`): `object.__sizeof__`, and its storage's bytes
    /// beside it (crate::cpython::torch), each storage once.
    Tensor,
}

/// What the walk needs of a type, read once.
#[derive(Debug)]
pub(super) struct TypeRec {
    pub(super) name: String,
    pub(super) kind: Kind,
    pub(super) basicsize: u64,
    pub(super) itemsize: u64,
    /// The words `sys.getsizeof` adds before the object.
    pub(super) preheader: u64,
    pub(super) flags: u64,
    /// Offsets of `__slots__` members (object pointers) over the heap-type bases.
    pub(super) slots: Vec<u64>,
    /// A heap type: instances may have a `__dict__` or values.
    pub(super) heap: bool,
    /// Function: where its object pointers end (`tp_vectorcall_offset`, the first field that
    /// is not one).
    pub(super) object_words_end: u64,
}

impl Walk<'_> {
    /// Reads what the walk needs of type `tp`; None when it cannot be read.
    pub(super) fn type_rec(&mut self, tp: u64) -> Option<TypeRec> {
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
                if matches!(k, Kind::Code | Kind::Frame | Kind::Generator) {
                    // Their object members: a code's consts, names, filename, name,
                    // qualname, line and exception tables (3.10: its name tuples and
                    // bytecode too); 3.10's frame's back, code, globals, builtins.
                    self.slot_offsets(base.addr, &mut slots);
                }
                break;
            }
            if base.flags & tpflags::HEAPTYPE == 0 {
                kind = if base.flags & tpflags::HAVE_GC != 0 {
                    Kind::Opaque
                } else {
                    Kind::Plain
                };
                // A static type's object members (`T_OBJECT`, like `__slots__`) are object
                // pointers by their definition: a slice's bounds, a property's getters, a
                // method's function and self.
                self.slot_offsets(base.addr, &mut slots);
                break;
            }
            self.slot_offsets(base.addr, &mut slots);
            if base.base == 0 {
                break;
            }
            base = snap.type_at(base.base).ok()?;
        }
        // _PyType_PreHeaderSize (3.11+), the GC header alone before.
        let words = snap.layout.preheader_flags();
        let preheader = if t.flags & tpflags::HAVE_GC != 0 {
            gc_head_size(&self.snap.layout)
        } else {
            0
        } + if t.flags & words != 0 { 16 } else { 0 };
        let name = if heap {
            self.heap_type_name(tp).unwrap_or_else(|| t.name.clone())
        } else {
            t.name.clone()
        };
        // PyFunctionObject (Include/cpython/funcobject.h, 3.10 to 3.15): its object fields
        // (code, globals, builtins, name, qualname, defaults, kwdefaults, closure, doc, dict,
        // weakreflist, module, annotations, 3.12+'s typeparams, 3.14+'s annotate) run from
        // the header to `vectorcall`, which `tp_vectorcall_offset` locates.
        let object_words_end = if kind == Kind::Function {
            snap.mem
                .read_u64(field(tp, to.tp_vectorcall_offset()).ok()?)
                .ok()
                .filter(|&e| (snap.layout.pyobject.header_size()..=MAX_FUNCTION_BYTES).contains(&e))
                .unwrap_or(snap.layout.pyobject.header_size())
        } else {
            0
        };
        Some(TypeRec {
            object_words_end,
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
    pub(super) fn slot_offsets(&self, tp: u64, out: &mut Vec<u64>) {
        let snap = self.snap;
        let Ok(at) = field(tp, snap.layout.type_object.tp_members()) else {
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
    pub(super) fn heap_type_name(&self, tp: u64) -> Option<String> {
        let snap = self.snap;
        let to = &snap.layout.type_object;
        let q = snap.mem.read_ptr(field(tp, to.ht_qualname()).ok()?).ok()?;
        let qualname = snap.read_name(q).ok()?;
        let dict = snap.mem.read_ptr(field(tp, to.tp_dict()).ok()?).ok()?;
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
}

/// The kind of a built-in type by its flags (`Py_TPFLAGS_*_SUBCLASS`) or `tp_name`.
pub(super) fn builtin_kind(name: &str, f: u64) -> Option<Kind> {
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
    } else if f & tpflags::TYPE_SUBCLASS != 0 {
        Kind::Type
    } else {
        match name {
            "set" | "frozenset" => Kind::Set,
            "collections.deque" => Kind::Deque,
            "module" => Kind::Module,
            "cell" => Kind::Cell,
            "object" => Kind::Plain,
            "bytearray" => Kind::ByteArray,
            "code" => Kind::Code,
            "frame" => Kind::Frame,
            "function" => Kind::Function,
            "generator" | "coroutine" | "async_generator" => Kind::Generator,
            "numpy.ndarray" => Kind::NdArray,
            "torch._C.TensorBase" => Kind::Tensor,
            _ => return None,
        }
    })
}
