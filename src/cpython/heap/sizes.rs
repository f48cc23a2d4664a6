//! The `__sizeof__`s the walk models that are not `object.__sizeof__`.

use super::visit::HEADER;
use super::Walk;
use crate::cpython::layout::{CodeLocals, FrameModel, Opcache310};
use crate::cpython::values::field;
use crate::error::ReadError;

/// `sizeof(_Py_CODEUNIT)`: one byte of `co_opcache_map` per code unit.
const CODE_UNIT: u64 = 2;
/// Slots of a code's frame believed (locals, cells, free variables and its stack).
const MAX_FRAME_SLOTS: u64 = 1 << 24;

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
        let old = self.snap.layout.str_has_wstr();
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

    /// `code.__sizeof__` (Objects/codeobject.c `code_sizeof`), given `object.__sizeof__`'s
    /// `var`: 3.11+ it is `_PyObject_VAR_SIZE`, that rounded up to a word (`tp_basicsize` + 2
    /// bytes per code unit); 3.10's code object
    /// is not variable-sized and adds `co_cell2arg` and the opcache (`co_opcache_map` and its
    /// entries). Neither counts `co_extra` (a PEP 523 tool's data), nor does this.
    pub(super) fn code_size(&self, obj: u64, var: u64) -> Result<u64, ReadError> {
        let snap = self.snap;
        let lay = &snap.layout;
        let (CodeLocals::Tuples310 { cellvars, .. }, Some(oc)) =
            (lay.code_object.locals, lay.opcache310())
        else {
            return Ok(var.saturating_add(7) & !7);
        };
        let mut size = var;
        if snap.mem.read_ptr(field(obj, oc.cell2arg)?)? != 0 {
            let cells = snap.mem.read_ptr(field(obj, cellvars)?)?;
            if cells != 0 {
                size = size.saturating_add(self.seq_len(cells)?.saturating_mul(8));
            }
        }
        if snap.mem.read_ptr(field(obj, oc.opcache)?)? != 0 {
            let code = lay
                .code_object
                .co_code
                .map(|off| field(obj, off))
                .transpose()?
                .map(|at| snap.mem.read_ptr(at))
                .transpose()?
                .unwrap_or(0);
            let bytes = if code != 0 { self.seq_len(code)? } else { 0 };
            let entries = u64::from(snap.mem.read_u8(field(obj, oc.opcache_size)?)?);
            size = size
                .saturating_add(bytes / CODE_UNIT)
                .saturating_add(entries * Opcache310::ENTRY);
        }
        Ok(size)
    }

    /// `frame.__sizeof__` (Objects/frameobject.c `frame_sizeof`). 3.10: `sizeof(PyFrameObject)`
    /// and a word per extra slot past the first, and a frame has exactly its code's extras
    /// as `ob_size` (`frame_alloc`). 3.11+: `tp_basicsize` (up to the frame's `localsplus`)
    /// and a word per slot of its code, found through `f_frame`.
    pub(super) fn frame_size(
        &self,
        obj: u64,
        basicsize: u64,
        ob_size: i64,
    ) -> Result<u64, ReadError> {
        let lay = &self.snap.layout;
        match (lay.frame, lay.frame_object_f_frame()) {
            (FrameModel::Interpreter(f), Some(f_frame)) => {
                let iframe = self.snap.mem.read_ptr(field(obj, f_frame)?)?;
                let code = self.snap.mem.read_ptr(field(iframe, f.executable)?)? & !f.tag_bits;
                Ok(basicsize + 8 * self.frame_slots(code)?)
            }
            // 3.10: the frame object is the frame, its slots its items.
            _ => {
                let extras = ob_size.clamp(1, MAX_FRAME_SLOTS as i64) as u64;
                Ok(basicsize + 8 * (extras - 1))
            }
        }
    }

    /// `gen_sizeof` (Objects/genobject.c, 3.11+; generators, coroutines and async
    /// generators): `tp_basicsize` (up to the embedded frame's `localsplus`) and a word per
    /// slot of its code, read from the embedded frame, which begins `localsplus` before the
    /// end of `tp_basicsize`. 3.10's have no `__sizeof__`: `tp_basicsize`.
    pub(super) fn generator_size(&self, obj: u64, basicsize: u64) -> Result<u64, ReadError> {
        match self.snap.layout.frame {
            FrameModel::FrameObject { .. } => Ok(basicsize),
            FrameModel::Interpreter(f) => {
                let iframe = field(obj, basicsize.saturating_sub(f.localsplus))?;
                let code = self.snap.mem.read_ptr(field(iframe, f.executable)?)? & !f.tag_bits;
                Ok(basicsize + 8 * self.frame_slots(code)?)
            }
        }
    }

    /// A code's frame slots (`_PyFrame_NumSlotsForCodeObject`): `co_nlocalsplus` (the length
    /// of `co_localsplusnames`) plus `co_stacksize`.
    fn frame_slots(&self, code: u64) -> Result<u64, ReadError> {
        let snap = self.snap;
        let co = &snap.layout.code_object;
        let CodeLocals::LocalsPlus {
            localsplusnames, ..
        } = co.locals
        else {
            return Ok(0);
        };
        let names = snap.mem.read_ptr(field(code, localsplusnames)?)?;
        let n = self.seq_len(names)?;
        let stack = snap.mem.read_i32(field(code, co.stacksize)?)?.max(0) as u64;
        let slots = n.saturating_add(stack);
        if slots > MAX_FRAME_SLOTS {
            return Err(ReadError::too_large(code, slots));
        }
        Ok(slots)
    }

    /// `Py_SIZE` of a tuple or bytes object (`ob_size`, the same place in both).
    fn seq_len(&self, obj: u64) -> Result<u64, ReadError> {
        let n = self
            .snap
            .mem
            .read_i64(field(obj, self.snap.layout.tuple_object.ob_size)?)?;
        if !(0..=MAX_FRAME_SLOTS as i64 * 64).contains(&n) {
            return Err(ReadError::too_large(obj, n.unsigned_abs()));
        }
        Ok(n as u64)
    }
}
