//! Offsets and constants of asyncio's C objects and of generators, per CPython version.
//!
//! - 3.11 to 3.13 have no debug offsets for any of these, so they are built in (x86-64). Sources:
//!   `FutureObj`/`TaskObj` in Modules/_asynciomodule.c, `PyGenObject` in
//!   Include/internal/pycore_genobject.h (3.13) / Include/cpython/genobject.h (3.11, 3.12),
//!   `PyFrameState` in Include/internal/pycore_frame.h, `_PyInterpreterFrame.stacktop` in the
//!   same header; each offset was also read through ctypes from a live task of the pyenv builds,
//!   and tests/layout_dwarf.rs checks them against DWARF. The free-threaded 3.13t moves every
//!   object field by its larger object header.
//! - 3.14 and later describe their task lists, the task fields they read and each thread's
//!   running loop in the asyncio debug section (`debug_section.rs`), and generators in
//!   `_Py_DebugOffsets.gen_object`; the few task fields neither names are derived from the
//!   section's own fields (`FutureObj_HEAD` is contiguous).

use super::debug_section::AsyncioDebug;
use crate::cpython::debug_offsets::DebugOffsets;
use crate::cpython::layout::{FrameModel, Layout};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AsyncioLayout {
    /// Where the layout came from ("built-in 3.13", ".AsyncioDebug section ...").
    pub source: String,
    /// Whether the C `_asyncio` objects' offsets are known (3.14+ need the debug section).
    pub c_objects: bool,
    pub future: FutureFields,
    pub task: TaskFields,
    pub gen: GenFields,
    pub states: FrameStates,
    pub yield_from: YieldFrom,
    /// Where the awaited object sits on a suspended frame's value stack.
    pub stack_top: StackTop,
    /// How a thread's running loop (`asyncio.get_running_loop()`) is found.
    pub running_loop: RunningLoop,
    /// 3.14+: the per-thread and per-interpreter lists of native tasks.
    pub task_lists: Option<TaskLists>,
    /// 3.14+: `_asyncio`'s module state, where tasks that are not `asyncio.Task`s are kept.
    pub module_state: Option<ModuleState>,
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
    /// 3.14+: `fut_awaited_by` (one awaiter, or a set of them when `fut_awaited_by_is_set`).
    pub awaited_by: Option<AwaitedBy>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AwaitedBy {
    pub field: u64,
    /// A `char`: the field holds a set.
    pub is_set: u64,
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
    /// 3.13+: suspended in `yield from`/`await` (the awaited object is on the stack); 3.15's
    /// free-threaded builds add `FRAME_SUSPENDED_YIELD_FROM_LOCKED`.
    pub suspended_yield_from: [Option<i8>; 2],
    pub executing: i8,
    /// Any state at or past this one has no valid frame (COMPLETED, CLEARED).
    pub first_done: i8,
}

/// How to tell that a suspended generator delegates (`_PyGen_yf`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum YieldFrom {
    /// 3.11, 3.12: the next code unit after `prev_instr` is `RESUME` (or one of these
    /// variants) with oparg >= 2.
    NextResume { opcodes: [u8; 2] },
    /// 3.13+: the frame state is one of `suspended_yield_from`.
    State,
}

/// Where a suspended frame's awaited object is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StackTop {
    /// 3.11 to 3.13: `_PyInterpreterFrame.stacktop` (an int: slots above `localsplus`); the
    /// object is the top slot.
    Depth { stacktop: u64 },
    /// 3.14+: `_PyInterpreterFrame.stackpointer`; the object is `below` slots under it
    /// (3.14: the top; 3.15 keeps a NULL above it, Python/ceval_macros.h `SEND`).
    Pointer { stackpointer: u64, below: u64 },
}

/// Value-stack slots of a frame above which a recorded stack top is taken for garbage.
const MAX_LIVE_SLOTS: u64 = 1 << 16;

impl StackTop {
    /// How many value-stack slots (above the `nlocalsplus` locals) of the suspended frame at
    /// `faddr`, whose `localsplus` is at offset `localsplus`, are live; None when the frame
    /// records no sane top (a running frame keeps it elsewhere: 3.12 and 3.13 store -1).
    pub fn live_slots(
        &self,
        mem: &dyn crate::memory::Memory,
        faddr: u64,
        localsplus: u64,
        nlocalsplus: u64,
    ) -> Option<u64> {
        let base = faddr.checked_add(localsplus)?;
        let top = match *self {
            StackTop::Depth { stacktop } => {
                let top = mem.read_i32(faddr.checked_add(stacktop)?).ok()?;
                u64::try_from(top).ok()?
            }
            StackTop::Pointer { stackpointer, .. } => {
                let sp = mem.read_u64(faddr.checked_add(stackpointer)?).ok()?;
                if sp < base || sp % 8 != 0 {
                    return None;
                }
                (sp - base) / 8
            }
        };
        let live = top.checked_sub(nlocalsplus)?;
        (live <= MAX_LIVE_SLOTS).then_some(live)
    }
}

/// What `asyncio.get_running_loop()` returns for a thread, as the C `_asyncio` keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunningLoop {
    /// 3.11, 3.12: `tstate->dict["__asyncio_running_event_loop__"]`. 3.11 stores a
    /// `_RunningLoopHolder` whose `rl_loop` is at `holder_loop`; 3.12 the loop itself.
    ThreadDict { dict: u64, holder_loop: Option<u64> },
    /// 3.13+: `_PyThreadStateImpl.asyncio_running_loop`.
    ThreadState { running_loop: u64 },
    /// Not known (3.14+ without `_asyncio`: the pure-Python `events._running_loop`, a
    /// `threading.local`).
    Unknown,
}

/// 3.14+: native tasks sit on circular lists of `llist_node`s embedded in each task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskLists {
    /// `_PyThreadStateImpl.asyncio_tasks_head`: tasks created by this thread.
    pub thread_head: u64,
    /// `PyInterpreterState.asyncio_tasks_head`: tasks whose thread has ended.
    pub interp_head: u64,
    /// `TaskObj.task_node`.
    pub task_node: u64,
    pub node_next: u64,
    pub node_prev: u64,
}

/// 3.14+: `asyncio_state` of Modules/_asynciomodule.c, reached through the module object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModuleState {
    /// `PyModuleObject.md_state` (Include/internal/pycore_moduleobject.h).
    pub md_state: u64,
    /// `asyncio_state.non_asyncio_tasks` (a WeakSet) and `non_asyncio_eager_tasks` (a set).
    pub non_asyncio_tasks: u64,
    pub non_asyncio_eager_tasks: u64,
}

/// Most a structure described by the section may measure (as `_Py_DebugOffsets`' check).
impl AsyncioLayout {
    /// The layout for `l`'s version: built in up to 3.13 (the free-threaded 3.13 included);
    /// from the target's asyncio debug section (`dbg`) from 3.14 on.
    pub fn for_target(l: &Layout, dbg: Option<&AsyncioDebug>) -> Result<AsyncioLayout, String> {
        let v = l.version;
        if (v.major, v.minor) >= (3, 14) {
            return from_offsets(l, dbg).map_err(|e| format!("{v}: asyncio debug offsets: {e}"));
        }
        builtin(l).ok_or_else(|| {
            format!(
                "{v}{} for asyncio tasks (3.11 to 3.15 and the free-threaded 3.13 are supported)",
                if l.free_threaded {
                    " free-threaded"
                } else {
                    ""
                }
            )
        })
    }

    /// Moves every object field by `by` bytes (a free-threaded build's 32-byte header).
    fn shift_objects(mut self, by: u64) -> Self {
        for f in [
            &mut self.future.loop_,
            &mut self.future.callback0,
            &mut self.future.callbacks,
            &mut self.future.state,
            &mut self.task.fut_waiter,
            &mut self.task.coro,
            &mut self.task.name,
            &mut self.gen.frame_state,
            &mut self.gen.iframe,
            &mut self.future_iter_future,
            &mut self.asend_gen,
            &mut self.weakref_object,
            &mut self.cfunction_self,
            &mut self.method_self,
            &mut self.function_closure,
            &mut self.partial_args,
        ] {
            *f += by;
        }
        if let RunningLoop::ThreadDict {
            holder_loop: Some(h),
            ..
        } = &mut self.running_loop
        {
            *h += by;
        }
        self
    }
}

/// The fields of generic objects every version shares (default build).
fn common() -> AsyncioLayout {
    AsyncioLayout {
        source: String::new(),
        c_objects: true,
        future: FutureFields {
            loop_: 16,
            callback0: 24,
            callbacks: 40,
            state: 88,
            awaited_by: None,
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
            suspended_yield_from: [None, None],
            executing: 0,
            first_done: 1,
        },
        // RESUME is 151 in 3.11 and 3.12; RESUME_QUICK (3.11) is 150 and
        // INSTRUMENTED_RESUME (3.12) 240 (Lib/opcode.py, dis._all_opmap).
        yield_from: YieldFrom::NextResume {
            opcodes: [151, 150],
        },
        stack_top: StackTop::Depth { stacktop: 64 },
        // PyThreadState.dict (Include/cpython/pystate.h): 128 in 3.11; `_RunningLoopHolder`
        // (Modules/_asynciomodule.c 3.11): `rl_loop` after the object header.
        running_loop: RunningLoop::ThreadDict {
            dict: 128,
            holder_loop: Some(16),
        },
        task_lists: None,
        module_state: None,
        future_iter_future: 16,
        asend_gen: 16,
        weakref_object: 16,
        cfunction_self: 24,
        method_self: 24,
        function_closure: 72,
        partial_args: 24,
    }
}

fn builtin(l: &Layout) -> Option<AsyncioLayout> {
    let v = l.version;
    let common = common();
    let lay = match (v.major, v.minor, l.free_threaded) {
        (3, 11, false) => AsyncioLayout {
            source: "built-in 3.11".into(),
            // 3.11's PyGenObject has gi_weakreflist, gi_name, gi_qualname, gi_exc_state
            // (3 words), gi_origin_or_finalizer, gi_hooks_inited... before gi_frame_state.
            gen: GenFields {
                frame_state: 75,
                iframe: 80,
            },
            ..common
        },
        (3, 12, false) => AsyncioLayout {
            source: "built-in 3.12".into(),
            yield_from: YieldFrom::NextResume {
                opcodes: [151, 240],
            },
            // PyThreadState.dict moved to 112; the dict holds the loop itself.
            running_loop: RunningLoop::ThreadDict {
                dict: 112,
                holder_loop: None,
            },
            ..common
        },
        // 3.13 moved `fut_state` after a smaller header (no `dict` slot: managed dict).
        (3, 13, ft) => {
            let lay = AsyncioLayout {
                source: if ft {
                    "built-in 3.13 free-threaded".into()
                } else {
                    "built-in 3.13".into()
                },
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
                    suspended_yield_from: [Some(-1), None],
                    executing: 0,
                    first_done: 1,
                },
                yield_from: YieldFrom::State,
                // `_PyThreadStateImpl.asyncio_running_loop` (Include/internal/pycore_tstate.h):
                // after the 304-byte PyThreadState (free-threaded: after its `qsbr` pointer).
                running_loop: RunningLoop::ThreadState {
                    running_loop: if ft { 312 } else { 304 },
                },
                ..common
            };
            if ft {
                lay.shift_objects(16)
            } else {
                lay
            }
        }
        _ => return None,
    };
    Some(lay)
}

/// 3.14+: the section's offsets, `_Py_DebugOffsets`' generator and frame fields, and the few
/// task fields derived from them. Without the section (the C `_asyncio` never loaded, as when
/// `sys.modules['_asyncio'] = None`) only pure-Python tasks can be read.
fn from_offsets(l: &Layout, dbg: Option<&AsyncioDebug>) -> Result<AsyncioLayout, &'static str> {
    let offsets: &DebugOffsets = l
        .debug_offsets
        .as_ref()
        .ok_or("the interpreter's _Py_DebugOffsets are needed with it")?;
    let need = |g: &str, f: &str| offsets.get(g, f).ok_or("_Py_DebugOffsets field missing");
    // The object header ends after `ob_type`; a free-threaded header is 16 bytes longer. A
    // corrupt `_Py_DebugOffsets` may put `ob_type` anywhere: a header shorter than the default
    // build's is not one.
    let header = l.pyobject.ob_type.saturating_add(8);
    let shift = header
        .checked_sub(16)
        .ok_or("_Py_DebugOffsets pyobject.ob_type")?;
    let FrameModel::Interpreter(_) = l.frame else {
        return Err("frame model");
    };
    let gen_size = offsets
        .size("gen_object")
        .ok_or("_Py_DebugOffsets gen_object")?;
    let gen = GenFields {
        frame_state: need("gen_object", "gi_frame_state")?,
        iframe: need("gen_object", "gi_iframe")?,
    };
    if gen.frame_state >= gen_size || gen.iframe >= gen_size {
        return Err("_Py_DebugOffsets gen_object");
    }
    let stackpointer = need("interpreter_frame", "stackpointer")?;
    // Include/internal/pycore_frame.h (3.14) / pycore_genobject.h (3.15: renumbered, and
    // FRAME_SUSPENDED_YIELD_FROM_LOCKED in free-threaded builds).
    let (states, below) = if l.version.minor == 14 {
        (
            FrameStates {
                created: -3,
                suspended: -2,
                suspended_yield_from: [Some(-1), None],
                executing: 0,
                first_done: 1,
            },
            1,
        )
    } else {
        (
            FrameStates {
                created: 0,
                suspended: 1,
                suspended_yield_from: [Some(2), Some(3)],
                executing: 4,
                first_done: 5,
            },
            2,
        )
    };
    let node_next = offsets.get("llist_node", "next").unwrap_or(0);
    let node_prev = offsets.get("llist_node", "prev").unwrap_or(8);
    let base = AsyncioLayout {
        source: "_Py_DebugOffsets (no asyncio debug section: pure-Python tasks only)".into(),
        c_objects: false,
        gen,
        states,
        yield_from: YieldFrom::State,
        stack_top: StackTop::Pointer {
            stackpointer,
            below,
        },
        running_loop: RunningLoop::Unknown,
        ..common().shift_objects(shift)
    };
    let Some(d) = dbg else {
        return Ok(base);
    };
    let t = &d.task;
    // FutureObj_HEAD (Modules/_asynciomodule.c 3.14, 3.15): loop, callback0, context0,
    // callbacks, ... cancelled_exc, awaited_by, state, is_task, awaited_by_is_set; then
    // TaskObj: ..., fut_waiter, coro, name, context, task_node. The section names
    // awaited_by, is_task, coro and name; the others follow from them.
    let state = t.awaited_by + 8;
    let fut_waiter = t.coro.checked_sub(8).ok_or("task_coro")?;
    let fields = [header, state, fut_waiter, t.coro, t.name, t.node];
    if fields.iter().any(|f| *f + 8 > t.size)
        || !(state < t.is_task && t.is_task < fut_waiter && fut_waiter < t.name)
        || t.awaited_by < header + 24
    {
        return Err("task fields out of order or outside the task");
    }
    // PyModuleObject.md_state: 32 in 3.14, 24 in 3.15 (Include/internal/pycore_moduleobject.h);
    // asyncio_state.non_asyncio_tasks 48 in both (Modules/_asynciomodule.c).
    let md_state = if l.version.minor == 14 { 32 } else { 24 } + shift;
    Ok(AsyncioLayout {
        source: format!("asyncio debug section in {}", d.found_in),
        c_objects: true,
        future: FutureFields {
            loop_: header,
            callback0: header + 8,
            callbacks: header + 24,
            state,
            awaited_by: Some(AwaitedBy {
                field: t.awaited_by,
                is_set: t.awaited_by_is_set,
            }),
        },
        task: TaskFields {
            fut_waiter,
            coro: t.coro,
            name: t.name,
        },
        running_loop: RunningLoop::ThreadState {
            running_loop: d.thread.running_loop,
        },
        task_lists: Some(TaskLists {
            thread_head: d.thread.tasks_head,
            interp_head: d.interp.tasks_head,
            task_node: t.node,
            node_next,
            node_prev,
        }),
        module_state: Some(ModuleState {
            md_state,
            non_asyncio_tasks: 48,
            non_asyncio_eager_tasks: 56,
        }),
        ..base
    })
}
