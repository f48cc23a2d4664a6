//! What gdb's real-frames mode (`set pyunwind-frames real`, one gdb frame per Python frame)
//! needs from a stop: where the eval loop's code is, which Python frames each eval-loop call
//! runs, and which pointer to watch for a Python frame's return (`py-finish`); and, for its
//! frame filter, whether a thread without Python frames is one or a thread list cut short.

use super::{Session, ThreadKey};
use crate::cpython::layout::{CurrentFrame, FrameModel};
use crate::cpython::values::field;
use crate::error::{Error, Result};
use crate::native::{self, classify, NativeRole, RunMark};
use crate::unwind::caller_sp;

/// `_PyCFrame.previous` follows `current_frame` (Include/cpython/pystate.h, 3.11 and 3.12).
const CFRAME_PREVIOUS_AFTER_CURRENT: u64 = 8;

/// Most eval-loop calls one thread nests (CPython's C recursion limit is far below).
const MAX_CFRAMES: usize = 100_000;

/// Where a Python frame's return shows: when the pointer at `addr` holds `value`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReturnWatch {
    pub addr: u64,
    pub value: u64,
}

/// Where the stack frame of the native frame at `pc`, `sp`, `bp` ends (its caller's SP),
/// by the module's CFI: an eval-loop frame runs the run whose entry shim lies in it.
pub fn frame_end(s: &Session, pc: u64, sp: u64, bp: u64, innermost: bool) -> Option<u64> {
    s.with_modules(|set| {
        caller_sp(
            s.snap.mem.as_ref(),
            set,
            s.target.arch,
            pc,
            sp,
            bp,
            innermost,
        )
    })
}

/// Target address ranges of the eval loop (with its `.cold` and LTO parts) in the
/// interpreter's own modules, by their ELF symbols (`.dynsym` in a stripped build).
pub fn eval_ranges(s: &Session) -> Vec<(u64, u64)> {
    let inside = s.interpreter_ranges();
    let mut out = Vec::new();
    s.with_modules(|set| {
        for (i, m) in set.modules.iter().enumerate() {
            if inside.iter().any(|&(s, e)| s <= m.start && m.start < e) {
                out.extend(set.function_ranges(i, |n| classify(n) == NativeRole::Eval));
            }
        }
    });
    out.sort_unstable();
    out
}

/// Target address ranges of the interpreter's own modules, sorted. Where the eval loop's
/// body has no symbol we read (Debian sid's 3.14 and 3.15 run it in
/// `_PyEval_EvalFrameDefault.cold`, a local symbol of the detached debug file's `.symtab`
/// only; `.dynsym` has the 1 KiB `_PyEval_EvalFrameDefault` that enters it), a frame in
/// these ranges whose stack frame holds a run's entry frame is that run's eval-loop frame.
pub fn own_code_ranges(s: &Session) -> Vec<(u64, u64)> {
    let mut out = s.interpreter_ranges();
    out.sort_unstable();
    out
}

/// Whether the thread runs Python. A thread missing from the thread list is one that C
/// code started (`false`, its native frames are all it has), unless the list could not be
/// read whole: then the error that cut it, for the frontend to say.
pub fn python_thread(s: &Session, key: ThreadKey) -> Result<bool> {
    if s.find_thread(key).is_some() {
        return Ok(true);
    }
    // Walked again only here, a thread with no Python frames: the walk keeps no errors.
    let snap = &s.snap;
    let mut errors = Vec::new();
    match snap.interpreters_noting_cap(&mut errors) {
        Ok(interps) => {
            for interp in interps {
                snap.threads(interp, &mut errors);
            }
        }
        Err(e) => errors.push(e),
    }
    match errors.first() {
        None => Ok(false),
        Some(e) => Err(Error::Read(*e)),
    }
}

/// The thread's runs of Python frames, innermost first (see [`crate::native::runs`]).
pub fn runs(s: &Session, key: ThreadKey) -> Result<Vec<(Vec<usize>, Option<u64>)>> {
    let t = s.thread(key)?;
    Ok(native::runs(&RunMark::of_walk(&t.walk)))
}

/// Where the thread's current Python frame is recorded: (address of a pointer, and for
/// 3.11 and 3.12 the offset of `current_frame` in the `_PyCFrame` it points to). Reading
/// it tells whether the thread's frames changed since this session was opened.
pub fn current_frame_slot(s: &Session, key: ThreadKey) -> Result<(u64, Option<u64>)> {
    let t = s.thread(key)?;
    Ok(match s.snap.layout.thread_state.current_frame {
        CurrentFrame::Direct(off) => (field(t.info.addr, off)?, None),
        CurrentFrame::ViaCFrame {
            cframe,
            current_frame,
        } => (field(t.info.addr, cframe)?, Some(current_frame)),
    })
}

/// The pointer that changes to a known value when Python frame `index` returns: the
/// thread's current frame (3.13+ in the thread state; 3.11 and 3.12 in the `_PyCFrame`
/// of the eval-loop call running the frame) becoming the frame's `previous`. A 3.11 entry
/// frame returns by leaving its eval-loop call, which puts the caller's `_PyCFrame` back
/// into `tstate->cframe` (Python/ceval.c 3.11, RETURN_VALUE).
pub fn return_watch(s: &Session, key: ThreadKey, index: usize) -> Result<ReturnWatch> {
    let t = s.thread(key)?;
    let f = s.frame_at(t, index)?;
    let layout = &s.snap.layout;
    let FrameModel::Interpreter(model) = layout.frame else {
        return Err(Error::Usage(
            "py-finish needs Python 3.11 or later (each older frame is its own eval-loop call: use finish)".into(),
        ));
    };
    let mem = &s.snap.mem;
    let previous = mem.read_ptr(field(f.addr, model.previous)?)?;
    // The thread state that runs the frame: for a thread that entered other interpreters,
    // the one of the frame's interpreter, whose eval-loop calls are counted from its first.
    let (start, state) = t.segment_of(index);
    let tstate = state.addr;
    match layout.thread_state.current_frame {
        CurrentFrame::Direct(off) => Ok(ReturnWatch {
            addr: field(tstate, off)?,
            value: previous,
        }),
        CurrentFrame::ViaCFrame {
            cframe,
            current_frame,
        } => {
            let runs = native::runs(&RunMark::of_walk(&t.walk));
            let first = runs
                .iter()
                .position(|r| r.0.iter().any(|&i| i >= start))
                .unwrap_or(0);
            let run = runs
                .iter()
                .position(|r| r.0.contains(&index))
                .unwrap_or(0)
                .saturating_sub(first);
            let slot = field(tstate, cframe)?;
            let mut cf = mem.read_ptr(slot)?;
            for _ in 0..run.min(MAX_CFRAMES) {
                cf = mem.read_ptr(field(cf, current_frame + CFRAME_PREVIOUS_AFTER_CURRENT)?)?;
            }
            if f.entry && layout.entry_frame_restores_cframe() {
                let outer =
                    mem.read_ptr(field(cf, current_frame + CFRAME_PREVIOUS_AFTER_CURRENT)?)?;
                return Ok(ReturnWatch {
                    addr: slot,
                    value: outer,
                });
            }
            Ok(ReturnWatch {
                addr: field(cf, current_frame)?,
                value: previous,
            })
        }
    }
}
