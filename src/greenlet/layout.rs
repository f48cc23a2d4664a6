//! Where greenlet 3.x keeps what we read, calibrated from the target's own objects.
//!
//! `PyGreenlet` (src/greenlet/greenlet.h, 3.0 to 3.5) is `PyObject_HEAD; weakreflist; dict;
//! pimpl`, `pimpl` pointing at a C++ `Greenlet` (TGreenlet.hpp): a vtable pointer, `_self`
//! (3.1.1+ only), `ExceptionState` (a `_PyErr_StackItem *` and a `_PyErr_StackItem`: 3 + 1
//! words on CPython 3.10, 1 + 1 from 3.11), `SwitchingArgs` (2 words), `StackState`
//! (`_stack_start`, `stack_stop`, `stack_copy`, `_stack_saved`, `stack_prev`), then
//! `PythonState` (`_context`, `_top_frame`, then fields that vary with greenlet, CPython and
//! the free-threaded build). The subclasses' own members follow at `sizeof(Greenlet)`, which is
//! therefore not tabled but found: in a main greenlet the first word after `_top_frame` equal
//! to the object's own address is `MainGreenlet::_self`, and the word after it, the
//! `ThreadState *`, must point back at the main greenlet.

use crate::cpython::values::field;
use crate::cpython::Snapshot;
use crate::error::ReadError;

/// How far past `_top_frame` the rest of `PythonState` may reach: 11 words at most in greenlet
/// 3.5 on a free-threaded 3.14 (TGreenlet.hpp `PythonState`), with room to spare.
const MAX_PYTHON_STATE_TAIL: u64 = 160;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GreenletLayout {
    /// `PyGreenlet.pimpl`.
    pub pimpl: u64,
    /// `Greenlet::_self` exists (greenlet 3.1.1+, commit 9216e63), at +8.
    pub has_self: bool,
    /// `StackState::_stack_start` and `stack_stop`, in the `Greenlet`.
    pub stack_start: u64,
    pub stack_stop: u64,
    /// `PythonState::_top_frame`: the `PyFrameObject *` a suspended greenlet resumes in.
    pub top_frame: u64,
    /// `sizeof(Greenlet)`: where `MainGreenlet` and `UserGreenlet` members start.
    pub size: u64,
}

impl GreenletLayout {
    /// The fixed prefix for a `PyGreenlet` whose `pimpl` is at `pimpl`; `size` still unknown.
    pub fn prefix(pimpl: u64, has_self: bool, py310: bool) -> GreenletLayout {
        // vtable pointer, `_self`, `ExceptionState`, `SwitchingArgs`.
        let stack_state = 8 + if has_self { 8 } else { 0 } + if py310 { 40 } else { 24 } + 16;
        GreenletLayout {
            pimpl,
            has_self,
            stack_start: stack_state,
            stack_stop: stack_state + 8,
            // `StackState` is 5 words; `_top_frame` is `PythonState`'s second.
            top_frame: stack_state + 40 + 8,
            size: 0,
        }
    }

    /// `MainGreenlet::_thread_state`.
    pub fn thread_state(&self) -> u64 {
        self.size + 8
    }
    /// `UserGreenlet::_main_greenlet` (before 3.1.1 `UserGreenlet::_self` comes first).
    pub fn main_greenlet(&self) -> u64 {
        self.size + if self.has_self { 0 } else { 8 }
    }
    /// `UserGreenlet::_parent`, after `_main_greenlet` and `_run_callable`.
    pub fn parent(&self) -> u64 {
        self.main_greenlet() + 16
    }

    /// `sizeof(Greenlet)`, from the main greenlet `obj` whose `Greenlet` is at `imp`: None when
    /// the words do not make a main greenlet that its own thread state points back at.
    pub fn calibrate(&self, snap: &Snapshot, obj: u64, imp: u64) -> Result<Option<u64>, ReadError> {
        let from = self.top_frame + 8;
        let words = snap.mem.read_vec(
            field(imp, from)?,
            MAX_PYTHON_STATE_TAIL,
            MAX_PYTHON_STATE_TAIL,
        )?;
        for (i, w) in words.chunks_exact(8).enumerate() {
            if u64::from_le_bytes(w.try_into().unwrap_or_default()) != obj {
                continue;
            }
            let size = from + 8 * i as u64;
            let ts = snap.mem.read_ptr(field(imp, size + 8)?)?;
            // A thread that has ended leaves `_thread_state` NULL: no proof either way.
            if ts != 0 && snap.mem.read_ptr(ts)? == obj {
                return Ok(Some(size));
            }
            return Ok(None);
        }
        Ok(None)
    }
}

/// `ThreadState::current_greenlet` (TThreadState.hpp: `main_greenlet`, then
/// `current_greenlet`; the same order in 3.0.0).
pub const THREAD_STATE_CURRENT: u64 = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_matches_the_hand_computed_offsets() {
        // research notes: 56/64 and 104 (3.1.1+, 3.11+); 72/80 and 120 on 3.10; minus 8
        // without `_self`.
        let l = GreenletLayout::prefix(32, true, false);
        assert_eq!((l.stack_start, l.stack_stop, l.top_frame), (56, 64, 104));
        let l = GreenletLayout::prefix(32, true, true);
        assert_eq!((l.stack_start, l.stack_stop, l.top_frame), (72, 80, 120));
        let l = GreenletLayout::prefix(32, false, false);
        assert_eq!((l.stack_start, l.stack_stop, l.top_frame), (48, 56, 96));
    }
}
