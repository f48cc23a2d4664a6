//! Offsets and constants of asyncio's C objects and of generators, per CPython version.
//!
//! 3.11 to 3.13 have no debug offsets for any of these, so they are built in (x86-64, default
//! build). Sources: `FutureObj`/`TaskObj` in Modules/_asynciomodule.c, `PyGenObject` in
//! Include/internal/pycore_genobject.h (3.13) / Include/cpython/genobject.h (3.11, 3.12),
//! `PyFrameState` in Include/internal/pycore_frame.h, `_PyInterpreterFrame.stacktop` in the same
//! header; each offset was also read through ctypes from a live task of the pyenv builds.

use crate::cpython::Version;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AsyncioLayout {
    pub future: FutureFields,
    pub task: TaskFields,
    pub gen: GenFields,
    pub states: FrameStates,
    pub yield_from: YieldFrom,
    /// `_PyInterpreterFrame.stacktop` (an int: stack depth above `localsplus`).
    pub frame_stacktop: u64,
    /// `futureiterobject.future` (`_asyncio.FutureIter`).
    pub future_iter_future: u64,
    /// `PyAsyncGenASend.ags_gen` and `PyAsyncGenAThrow.agt_gen` (the same offset).
    pub asend_gen: u64,
    /// `PyWeakReference.wr_object`.
    pub weakref_object: u64,
    /// `PyCFunctionObject.m_self`.
    pub cfunction_self: u64,
    /// `PyMethodObject.im_self`.
    pub method_self: u64,
    /// `PyFunctionObject.func_closure`.
    pub function_closure: u64,
    /// `partialobject.args` (Modules/_functoolsmodule.c).
    pub partial_args: u64,
}

/// `FutureObj_HEAD`: shared by `_asyncio.Future` and `_asyncio.Task`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FutureFields {
    pub loop_: u64,
    pub callback0: u64,
    pub callbacks: u64,
    /// `fut_state` (an enum: 0 pending, 1 cancelled, 2 finished).
    pub state: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskFields {
    pub fut_waiter: u64,
    pub coro: u64,
    pub name: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenFields {
    /// `gi_frame_state` (int8).
    pub frame_state: u64,
    /// `gi_iframe`: the generator's own `_PyInterpreterFrame`, embedded.
    pub iframe: u64,
}

/// `PyFrameState` values. The same number means different states in different versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameStates {
    pub created: i8,
    pub suspended: i8,
    /// 3.13+: suspended in `yield from`/`await` (the awaited object is on the stack).
    pub suspended_yield_from: Option<i8>,
    pub executing: i8,
    /// Any state at or past this one has no valid frame (COMPLETED, CLEARED).
    pub first_done: i8,
}

/// How to find what a suspended coroutine awaits (`_PyGen_yf`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum YieldFrom {
    /// 3.11, 3.12: the next code unit after `prev_instr` is `RESUME` (or one of these
    /// variants) with oparg >= 2; then the awaited object is the top of the value stack.
    NextResume { opcodes: [u8; 2] },
    /// 3.13: the frame state is `suspended_yield_from`; then the top of the value stack.
    State,
}

impl AsyncioLayout {
    pub fn builtin(v: Version) -> Option<AsyncioLayout> {
        let common = AsyncioLayout {
            future: FutureFields {
                loop_: 16,
                callback0: 24,
                callbacks: 40,
                state: 88,
            },
            task: TaskFields {
                fut_waiter: 128,
                coro: 136,
                name: 144,
            },
            gen: GenFields {
                frame_state: 67,
                iframe: 72,
            },
            // Include/internal/pycore_frame.h, 3.11 and 3.12.
            states: FrameStates {
                created: -2,
                suspended: -1,
                suspended_yield_from: None,
                executing: 0,
                first_done: 1,
            },
            // RESUME is 151 in 3.11 and 3.12; RESUME_QUICK (3.11) is 150 and
            // INSTRUMENTED_RESUME (3.12) 240 (Lib/opcode.py, dis._all_opmap).
            yield_from: YieldFrom::NextResume {
                opcodes: [151, 150],
            },
            frame_stacktop: 64,
            future_iter_future: 16,
            asend_gen: 16,
            weakref_object: 16,
            cfunction_self: 24,
            method_self: 24,
            function_closure: 72,
            partial_args: 24,
        };
        match (v.major, v.minor) {
            (3, 11) => Some(AsyncioLayout {
                // 3.11's PyGenObject has gi_weakreflist, gi_name, gi_qualname, gi_exc_state
                // (3 words), gi_origin_or_finalizer, gi_hooks_inited... before gi_frame_state.
                gen: GenFields {
                    frame_state: 75,
                    iframe: 80,
                },
                ..common
            }),
            (3, 12) => Some(AsyncioLayout {
                yield_from: YieldFrom::NextResume {
                    opcodes: [151, 240],
                },
                ..common
            }),
            // 3.13 moved `fut_state` after a smaller header (no `dict` slot: managed dict).
            (3, 13) => Some(AsyncioLayout {
                future: FutureFields {
                    state: 96,
                    ..common.future
                },
                task: TaskFields {
                    fut_waiter: 112,
                    coro: 120,
                    name: 128,
                },
                states: FrameStates {
                    created: -3,
                    suspended: -2,
                    suspended_yield_from: Some(-1),
                    executing: 0,
                    first_done: 1,
                },
                yield_from: YieldFrom::State,
                ..common
            }),
            _ => None,
        }
    }
}
