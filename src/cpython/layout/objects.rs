//! Offsets and version facts of objects that the heap walk and the greenlet reader need
//! beyond the table's own fields. Each is taken from a field the table has (so a free-threaded
//! build's longer header, and a table read from `_Py_DebugOffsets`, move it too) or from the
//! version, here and nowhere else: decoders ask the layout, never the version.

use super::{CodeLocals, FrameModel, Layout, TypeObject};

impl TypeObject {
    /// `tp_dict`, right after `tp_base` (Include/cpython/object.h, 3.10 to 3.15).
    pub fn tp_dict(&self) -> u64 {
        self.tp_base + 8
    }

    /// `tp_bases`: 80 bytes after `tp_base` (tp_dict, tp_descr_get, tp_descr_set,
    /// tp_dictoffset, tp_init, tp_alloc, tp_new, tp_free, tp_is_gc between).
    pub fn tp_bases(&self) -> u64 {
        self.tp_base + 80
    }

    /// `tp_mro`, right after `tp_bases`.
    pub fn tp_mro(&self) -> u64 {
        self.tp_base + 88
    }

    /// `tp_members`, 16 bytes before `tp_base` (`tp_getset` between).
    pub fn tp_members(&self) -> u64 {
        self.tp_base - 16
    }

    /// `tp_subclasses`: 42 words after `tp_name` (3.10 to 3.15; checked against the DWARF of
    /// pyenv's 3.10.13 to 3.13.0 and our 3.13t).
    pub fn tp_subclasses(&self) -> u64 {
        self.tp_name + 336
    }

    /// `tp_call`, 13 words after `tp_name` (tp_basicsize, tp_itemsize, tp_dealloc,
    /// tp_vectorcall_offset, tp_getattr, tp_setattr, tp_as_async, tp_repr, tp_as_number,
    /// tp_as_sequence, tp_as_mapping, tp_hash between; Include/cpython/object.h 3.10 to 3.15).
    pub fn tp_call(&self) -> u64 {
        self.tp_name + 13 * 8
    }

    /// `tp_vectorcall_offset`, 24 bytes after `tp_basicsize` (`tp_itemsize`, `tp_dealloc`
    /// between).
    pub fn tp_vectorcall_offset(&self) -> u64 {
        self.tp_basicsize + 24
    }

    /// `PyHeapTypeObject.ht_qualname`, the word before `ht_cached_keys`.
    pub fn ht_qualname(&self) -> u64 {
        self.ht_cached_keys - 8
    }

    /// Where `sizeof(PyTypeObject)` ends: 464 bytes before `ht_cached_keys` (as_async,
    /// as_number, as_mapping, as_sequence, as_buffer, ht_name, ht_slots, ht_qualname), so
    /// `type.__sizeof__` of a static type.
    pub fn static_type_size(&self) -> u64 {
        self.ht_cached_keys.saturating_sub(464)
    }
}

/// 3.10's `PyCodeObject` fields (Include/cpython/code.h 3.10) that its `__sizeof__` counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opcache310 {
    /// `co_cell2arg`: a word per cell variable when a cell is an argument.
    pub cell2arg: u64,
    /// `co_opcache`: NULL until the code ran 1024 times.
    pub opcache: u64,
    /// `co_opcache_size`: its entries, a byte.
    pub opcache_size: u64,
}

impl Opcache310 {
    /// `sizeof(_PyOpcache)` (Include/internal/pycore_code.h 3.10: a 24-byte union and a flag).
    pub const ENTRY: u64 = 32;
}

impl Layout {
    /// The end of `PyObject_VAR_HEAD` (`ob_size` last in it), where a variable-size object's
    /// own fields begin.
    pub fn var_header_size(&self) -> u64 {
        self.pyobject.header_size() + 8
    }

    /// `PyListObject.allocated`, right after `ob_item`.
    pub fn list_allocated(&self) -> u64 {
        self.list_object.ob_item + 8
    }

    /// `PySetObject.smalltable`, 24 bytes after `table` (`hash`, `finger` between).
    pub fn set_smalltable(&self) -> u64 {
        self.set_object.table + 24
    }

    /// `PyByteArrayObject.ob_alloc`, the first field after `PyObject_VAR_HEAD`
    /// (Include/cpython/bytearrayobject.h).
    pub fn bytearray_alloc(&self) -> u64 {
        self.var_header_size()
    }

    /// Whether a bytearray keeps its bytes in a bytes object (`ob_bytes_object`, 3.15+), whose
    /// header `bytearray.__sizeof__` counts too.
    pub fn bytearray_bytes_backed(&self) -> bool {
        self.version.minor >= 15
    }

    /// `dequeobject.leftblock` and `.leftindex` (Modules/_collectionsmodule.c 3.10 to 3.15:
    /// `PyObject_VAR_HEAD`, `leftblock`, `rightblock`, `leftindex`).
    pub fn deque_leftblock(&self) -> u64 {
        self.var_header_size()
    }
    pub fn deque_leftindex(&self) -> u64 {
        self.var_header_size() + 16
    }

    /// `PyFunctionObject.func_defaults`, `func_kwdefaults` and `func_closure`: the words after
    /// `func_code` in `_Py_COMMON_FIELDS` (Include/cpython/funcobject.h, 3.10 to 3.15).
    pub fn function_defaults(&self) -> u64 {
        self.function_code + 8
    }
    pub fn function_kwdefaults(&self) -> u64 {
        self.function_code + 16
    }
    pub fn function_closure(&self) -> u64 {
        self.function_code + 24
    }

    /// `PyFrameObject.f_frame` (3.11 to 3.15, Include/internal/pycore_frame.h): after the
    /// header and `f_back`. None for 3.10, whose frame object is the frame.
    pub fn frame_object_f_frame(&self) -> Option<u64> {
        match self.frame {
            FrameModel::Interpreter(_) => Some(self.pyobject.header_size() + 8),
            FrameModel::FrameObject { .. } => None,
        }
    }

    /// 3.10's code object fields its `__sizeof__` counts beyond the base size; None from 3.11,
    /// whose `__sizeof__` counts its variable part alone.
    pub fn opcache310(&self) -> Option<Opcache310> {
        matches!(self.code_object.locals, CodeLocals::Tuples310 { .. }).then_some(Opcache310 {
            cell2arg: 96,
            opcache: 160,
            opcache_size: 172,
        })
    }

    /// Whether a str's header has 3.10/3.11's `wstr` (the last word of `PyASCIIObject`, and
    /// `wstr_length` after `utf8` in `PyCompactUnicodeObject`), removed in 3.12.
    pub fn str_has_wstr(&self) -> bool {
        self.version.minor < 12
    }

    /// The `tp_flags` whose instances have two words before the GC header (the managed dict
    /// and weakref pointers, `_PyType_PreHeaderSize` in Include/internal/pycore_object.h):
    /// 3.11's `Py_TPFLAGS_MANAGED_DICT`, 3.12+'s `Py_TPFLAGS_MANAGED_WEAKREF` too; none in
    /// 3.10.
    pub fn preheader_flags(&self) -> u64 {
        match self.version.minor {
            ..=10 => 0,
            11 => super::tpflags::MANAGED_DICT,
            _ => super::tpflags::MANAGED_DICT | super::tpflags::MANAGED_WEAKREF,
        }
    }
}
