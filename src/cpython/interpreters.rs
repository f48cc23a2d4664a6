//! Interpreters (the main one and subinterpreters) and the threads that enter one from
//! another.
//!
//! An OS thread has one thread state per interpreter it has entered (`_interpreters.exec`,
//! `Interpreter.exec`, `_xxsubinterpreters.run_string`, `PyThreadState_Swap`): each lists the
//! thread under its own interpreter, with the frames it runs there. All of them carry the same
//! `thread_id` (`pthread_self()`) and, from 3.11, the same `native_thread_id`. [`nest`] joins
//! them into one stack, the thread state the thread runs in now first:
//!
//! ```
//! use pyunwind::cpython::interpreters::{nest, StateWalk, Threading};
//! # let states: Vec<StateWalk> = Vec::new();
//! // `states`: every thread state of every interpreter, main interpreter first.
//! let how = Threading { current: |_: &_| None, region_of: |_| None, borrowed: false };
//! for thread in nest(states, how) {
//!     let _now = &thread.stack[0]; // the interpreter it runs in now, its frames
//!     let _from = &thread.stack[1..]; // the ones it entered from, innermost first
//! }
//! ```

use std::collections::HashMap;

use super::frames::{FrameItem, FrameWalk};
use super::snapshot::Snapshot;
use super::threads::ThreadInfo;
use super::values::field;
use crate::error::ReadError;

/// `_PyInterpreterState_WHENCE_MAX` (Include/internal/pycore_interp.h 3.13,
/// pycore_interp_structs.h 3.14, 3.15): the largest `_whence` a version writes.
pub const MAX_WHENCE: i64 = 5;

/// One interpreter: its `PyInterpreterState`, its id and how it was made, where readable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InterpreterInfo {
    pub addr: u64,
    /// `interp->id`: 0 for the main interpreter, then one more for each interpreter made.
    pub id: Option<u32>,
    /// `interp->_whence` (3.13+): `_interpreters.whence()`'s value (1 the runtime's main
    /// interpreter, 2 the legacy C API, 3 the C API, 4 the cross-interpreter C API, 5 the
    /// `_interpreters` module).
    pub whence: Option<u8>,
}

impl Snapshot {
    /// The interpreter at `addr`. A value no CPython writes (an id past `u32`, a `_whence` out
    /// of its range) is an error entry, and left out.
    pub fn interpreter_info(&self, addr: u64, errors: &mut Vec<ReadError>) -> InterpreterInfo {
        let is = &self.layout.interpreter_state;
        let id = match field(addr, is.id).and_then(|a| self.mem.read_u64(a)) {
            Ok(v) => match u32::try_from(v) {
                Ok(v) => Some(v),
                Err(_) => {
                    errors.push(ReadError::corrupt(addr, "interpreter id"));
                    None
                }
            },
            Err(e) => {
                errors.push(e);
                None
            }
        };
        let whence = is.whence.and_then(|off| {
            match field(addr, off).and_then(|a| self.mem.read_u64(a)) {
                Ok(v) => match v as i64 {
                    // _PyInterpreterState_WHENCE_NOTSET: an interpreter being made.
                    -1 => None,
                    w @ 0..=MAX_WHENCE => Some(w as u8),
                    _ => {
                        errors.push(ReadError::corrupt(addr, "interpreter _whence"));
                        None
                    }
                },
                Err(e) => {
                    errors.push(e);
                    None
                }
            }
        });
        InterpreterInfo { addr, id, whence }
    }
}

/// One thread state and its frames.
#[derive(Clone, Debug)]
pub struct StateWalk {
    pub info: ThreadInfo,
    pub walk: FrameWalk,
}

/// One OS thread: its thread states that hold its stack, and those that hold none of it.
#[derive(Clone, Debug)]
pub struct Nested {
    /// The thread state it runs in now first, then each it entered that one from, outwards.
    /// Never empty.
    pub stack: Vec<StateWalk>,
    /// Its thread states with no frame that are not the current one: an interpreter it
    /// entered and left, whose thread state stays (kept for what lists hang off a thread
    /// state, such as 3.14's asyncio tasks).
    pub idle: Vec<ThreadInfo>,
}

/// The C-stack address of the eval loop the walk's innermost Python frame runs in (3.12+:
/// its entry frame, a local of `_PyEval_EvalFrameDefault`). The stack grows down: of two
/// thread states of one thread, the one whose eval loop lies lower was entered later.
fn innermost_entry(walk: &FrameWalk) -> Option<u64> {
    walk.items.iter().find_map(|i| match i {
        FrameItem::Python(p) => p.shim,
        FrameItem::Unreadable { .. } => None,
    })
}

/// How far apart, at most, the eval loop of a thread state that entered another
/// interpreter and the eval loop of that interpreter's code lie on the thread's C stack: the C
/// frames of the call that switches (`run_string`, `PyRun_StringFlags`, `PyEval_EvalCode`...),
/// a few KiB. Two threads' stacks are farther apart (a default thread stack is 8 MiB).
pub const MAX_ENTRY_GAP_BYTES: u64 = 256 << 10;

/// How [`nest`] tells which thread states are one thread's.
pub struct Threading<C, S> {
    /// Whether a thread state is the one its thread runs in now (attached to its interpreter,
    /// 3.13+; holding its interpreter's GIL); None when unknown.
    pub current: C,
    /// The start of the memory region that holds an address (a live process's maps, a core's
    /// segments), None where the source does not say: two addresses in different regions
    /// are not on one stack.
    pub region_of: S,
    /// The layout's `exec_borrows_first_thread_state` (3.10 to 3.12).
    pub borrowed: bool,
}

/// The C-stack address of the eval loop the walk's outermost Python frame runs in.
fn outermost_entry(walk: &FrameWalk) -> Option<u64> {
    walk.items.iter().rev().find_map(|i| match i {
        FrameItem::Python(p) => p.shim,
        FrameItem::Unreadable { .. } => None,
    })
}

/// Joins the thread states of each OS thread into one [`Nested`], in the order of `states`
/// (each thread where its first thread state is).
///
/// The thread states of one thread carry its `thread_id` and `native_id`. Where the
/// interpreter's code runs in a thread state bound to another thread (`borrowed`, 3.10 to
/// 3.12), a run of such thread states whose eval loops nest is moved to the thread it runs
/// on: the thread whose detached thread state has its innermost eval loop just above (at most
/// [`MAX_ENTRY_GAP_BYTES`]) the run's outermost one, in the same memory region; without entry
/// frames (3.10, 3.11) no such thread state with frames is joined to another. A thread
/// state with no `thread_id` (made, not yet bound to a thread) is a thread of its own.
///
/// The stack is ordered: the current thread state first, then by the depth of their eval
/// loops on the C stack (3.12+), then the interpreter listed last in `states` first (a
/// subinterpreter is entered from one made before it). A thread state is in the stack when
/// it has frames or is the current one; when none is, the one ordered last stands for the
/// thread.
pub fn nest<C, S>(states: Vec<StateWalk>, how: Threading<C, S>) -> Vec<Nested>
where
    C: Fn(&ThreadInfo) -> Option<bool>,
    S: Fn(u64) -> Option<u64>,
{
    let deep: Vec<Option<u64>> = states.iter().map(|s| innermost_entry(&s.walk)).collect();
    let now: Vec<bool> = states
        .iter()
        .map(|s| (how.current)(&s.info) == Some(true))
        .collect();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut by_key: HashMap<(u64, Option<u64>), usize> = HashMap::new();
    for (i, s) in states.iter().enumerate() {
        let key = (s.info.thread_id, s.info.native_id);
        match by_key.get(&key).filter(|_| s.info.thread_id != 0) {
            Some(&g) => groups[g].push(i),
            None => {
                if s.info.thread_id != 0 {
                    by_key.insert(key, groups.len());
                }
                groups.push(vec![i]);
            }
        }
    }
    if how.borrowed {
        // Without entry frames on the C stack (3.10, 3.11) a thread state bound to another
        // thread cannot be told from the thread's own: each with frames stays a thread of its
        // own, as each thread state was listed before.
        let mut alone = Vec::new();
        for g in groups.iter_mut() {
            let framed: Vec<usize> = g
                .iter()
                .copied()
                .filter(|&i| !states[i].walk.items.is_empty())
                .collect();
            if framed.len() > 1 && framed.iter().any(|&i| deep[i].is_none()) {
                g.retain(|i| !framed[1..].contains(i));
                alone.extend(framed[1..].iter().map(|&i| vec![i]));
            }
        }
        groups.extend(alone);
        rehome(&states, &deep, &now, &how.region_of, &mut groups);
    }
    // Each thread where its first thread state is listed.
    groups.retain(|g| !g.is_empty());
    for g in &mut groups {
        g.sort_unstable();
    }
    groups.sort_by_key(|g| g[0]);
    let mut slots: Vec<Option<StateWalk>> = states.into_iter().map(Some).collect();
    groups
        .into_iter()
        .map(|mut g| {
            g.sort_by_key(|&i| (!now[i], deep[i].unwrap_or(u64::MAX), std::cmp::Reverse(i)));
            let keep: Vec<bool> = g
                .iter()
                .map(|&i| now[i] || slots[i].as_ref().is_some_and(|s| !s.walk.items.is_empty()))
                .collect();
            let none_kept = !keep.iter().any(|k| *k);
            let last = *g.last().expect("a group has members");
            let (mut stack, mut idle) = (Vec::new(), Vec::new());
            for (&i, kept) in g.iter().zip(keep) {
                let s = slots[i].take().expect("each state once");
                if kept || (none_kept && i == last) {
                    stack.push(s);
                } else {
                    idle.push(s.info);
                }
            }
            Nested { stack, idle }
        })
        .collect()
}

/// [`nest`]'s move of borrowed thread states to the thread they run on. Each group's thread
/// states with frames, by depth, fall into runs whose eval loops nest (each one's innermost
/// just above the previous one's outermost); a run whose outermost eval loop lies just below
/// the innermost one of a detached thread state of another group moves to that group. Each
/// run moves at most once, to a group it is decided from before any moved: no loops.
fn rehome(
    states: &[StateWalk],
    deep: &[Option<u64>],
    now: &[bool],
    region_of: &impl Fn(u64) -> Option<u64>,
    groups: &mut [Vec<usize>],
) {
    let outer: Vec<Option<u64>> = states.iter().map(|s| outermost_entry(&s.walk)).collect();
    // `above` is on the same stack as `below`, just over it.
    let just_above = |above: u64, below: u64| {
        above > below
            && above - below <= MAX_ENTRY_GAP_BYTES
            && match (region_of(above), region_of(below)) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
    };
    let mut group_of = vec![0usize; states.len()];
    for (g, members) in groups.iter().enumerate() {
        for &i in members {
            group_of[i] = g;
        }
    }
    // Every eval loop by its depth: a run's host is found by a search, not a scan of every
    // thread state (thousands of threads).
    let mut by_depth: Vec<(u64, usize)> = (0..states.len())
        .filter_map(|j| deep[j].map(|d| (d, j)))
        .collect();
    by_depth.sort_unstable();
    let mut moves: Vec<(Vec<usize>, usize)> = Vec::new();
    for (g, members) in groups.iter().enumerate() {
        let mut framed: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&i| deep[i].is_some())
            .collect();
        framed.sort_by_key(|&i| deep[i]);
        let mut runs: Vec<Vec<usize>> = Vec::new();
        for i in framed {
            let joins = runs.last().and_then(|r| r.last()).is_some_and(
                |&prev| matches!((deep[i], outer[prev]), (Some(a), Some(b)) if just_above(a, b)),
            );
            match runs.last_mut() {
                Some(r) if joins => r.push(i),
                _ => runs.push(vec![i]),
            }
        }
        for run in runs {
            let Some(bottom) = run.last().and_then(|&i| outer[i]) else {
                continue;
            };
            // The enclosing thread state: detached, in another group, nearest above.
            let from = by_depth.partition_point(|&(d, _)| d <= bottom);
            let host = by_depth[from..]
                .iter()
                .take_while(|&&(d, _)| d - bottom <= MAX_ENTRY_GAP_BYTES)
                .find(|&&(d, j)| group_of[j] != g && !now[j] && just_above(d, bottom));
            if let Some(&(_, j)) = host {
                moves.push((run, group_of[j]));
            }
        }
    }
    for (run, to) in moves {
        for i in run {
            let from = group_of[i];
            groups[from].retain(|&m| m != i);
            groups[to].push(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::cpython::layout::{Layout, LineTable};
    use crate::cpython::values::{Code, PyFrame};

    fn code() -> Code {
        Code {
            addr: 0x1000,
            name: "f".into(),
            qualname: "f".into(),
            filename: "/f.py".into(),
            firstlineno: 1,
            linetable: Vec::new(),
            line_table: LineTable::Locations311,
            code_start: 0,
            bytecode: None,
            argcount: 0,
            flags: 0,
            stacksize: None,
            locals: Vec::new(),
            line_memo: Arc::default(),
        }
    }

    fn info(addr: u64, interp: u64, thread_id: u64) -> ThreadInfo {
        ThreadInfo {
            addr,
            interp,
            thread_id,
            native_id: Some(thread_id + 1),
            holds_gil: None,
            name: None,
            frame: 0,
            frame_error: None,
        }
    }

    fn frame(addr: u64, shim: Option<u64>) -> FrameItem {
        FrameItem::Python(PyFrame {
            addr,
            code: Arc::new(code()),
            line: Some(1),
            lasti: None,
            entry: shim.is_some(),
            shim,
        })
    }

    fn state(info: ThreadInfo, frames: Vec<FrameItem>) -> StateWalk {
        StateWalk {
            info,
            walk: FrameWalk {
                items: frames,
                ..FrameWalk::default()
            },
        }
    }

    /// Two stacks: [0x6000, 0x7000) and [0x7000, 0x8000).
    fn stack(addr: u64) -> Option<u64> {
        (0x6000..0x8000).contains(&addr).then_some(addr & !0xfff)
    }

    fn stack_of(n: &Nested) -> Vec<u64> {
        n.stack.iter().map(|s| s.info.addr).collect()
    }

    fn snapshot_with(
        minor: u8,
        build: impl FnOnce(&mut crate::memory::FakeMemory, &Layout),
    ) -> Snapshot {
        let l = Layout::builtin(crate::cpython::Version::new(3, minor, 0)).expect("a layout");
        let mut m = crate::memory::FakeMemory::new();
        build(&mut m, &l);
        Snapshot::for_test(m, l)
    }

    #[test]
    fn an_interpreter_list_that_loops_keeps_what_it_read_and_says_where() {
        // `_PyRuntime` at 0 (Snapshot::for_test): head -> A -> B -> A.
        let (a, b) = (0x10_000, 0x20_000);
        let snap = snapshot_with(12, |m, l| {
            m.put(0, &[0u8; 4096]);
            m.put_u64(l.runtime_state.interpreters_head, a);
            for (at, next) in [(a, b), (b, a)] {
                m.put(at, &[0u8; 1024]);
                m.put_u64(at + l.interpreter_state.next, next);
            }
        });
        let mut errors = Vec::new();
        assert_eq!(snap.interpreters_noting_cap(&mut errors), Ok(vec![a, b]));
        assert_eq!(
            errors,
            vec![ReadError::new(a, 0, crate::error::ReadErrorKind::Cycle)]
        );
        // An unreadable link ends the list there, with what it read.
        let snap = snapshot_with(12, |m, l| {
            m.put(0, &[0u8; 4096]);
            m.put_u64(l.runtime_state.interpreters_head, a);
            m.put(a, &[0u8; 1024]);
            m.put_u64(a + l.interpreter_state.next, 0xdead_0000);
        });
        let mut errors = Vec::new();
        assert_eq!(
            snap.interpreters_noting_cap(&mut errors),
            Ok(vec![a, 0xdead_0000])
        );
        assert_eq!(errors.len(), 1);
    }

    #[test]
    fn ids_and_whence_no_cpython_writes_are_left_out_with_an_error() {
        let (a, b, c) = (0x10_000, 0x20_000, 0x30_000);
        let snap = snapshot_with(13, |m, l| {
            let is = &l.interpreter_state;
            for (at, id, whence) in [(a, 3u64, 5u64), (b, 1 << 40, u64::MAX), (c, 2, 9)] {
                m.put(at, &[0u8; 8192]);
                m.put_u64(at + is.id, id);
                m.put_u64(at + is.whence.unwrap(), whence);
            }
        });
        let mut errors = Vec::new();
        let got: Vec<_> = [a, b, c]
            .iter()
            .map(|&i| {
                let i = snap.interpreter_info(i, &mut errors);
                (i.id, i.whence)
            })
            .collect();
        // -1 is `_PyInterpreterState_WHENCE_NOTSET`: an interpreter being made, no error.
        assert_eq!(got, vec![(Some(3), Some(5)), (None, None), (Some(2), None)]);
        assert_eq!(
            errors,
            vec![
                ReadError::corrupt(b, "interpreter id"),
                ReadError::corrupt(c, "interpreter _whence")
            ]
        );
        // 3.12 records no `_whence`; an unmapped interpreter is an error, not a value.
        let snap = snapshot_with(12, |_, _| {});
        let mut errors = Vec::new();
        let i = snap.interpreter_info(a, &mut errors);
        assert_eq!((i.id, i.whence, errors.len()), (None, None, 1));
    }

    #[test]
    fn a_thread_in_one_interpreter_is_alone() {
        let out = nest(
            vec![
                state(info(1, 100, 7), vec![frame(10, Some(0x7000))]),
                state(info(2, 100, 8), vec![]),
            ],
            Threading {
                current: |_: &ThreadInfo| None,
                region_of: |_| None,
                borrowed: false,
            },
        );
        assert_eq!(out.len(), 2);
        assert_eq!(stack_of(&out[0]), vec![1]);
        assert_eq!(stack_of(&out[1]), vec![2]);
    }

    #[test]
    fn nested_entries_order_by_the_eval_loops_on_the_c_stack() {
        // Main (100) entered 200, which entered 300: their eval loops lie ever lower.
        let out = nest(
            vec![
                state(info(1, 100, 7), vec![frame(10, Some(0x7f00))]),
                state(info(9, 100, 5), vec![frame(90, Some(0x6f00))]),
                state(info(3, 300, 7), vec![frame(30, Some(0x7d00))]),
                state(
                    info(2, 200, 7),
                    vec![frame(20, None), frame(21, Some(0x7e00))],
                ),
            ],
            Threading {
                current: |_: &ThreadInfo| Some(false),
                region_of: stack,
                borrowed: false,
            },
        );
        assert_eq!(out.len(), 2);
        assert_eq!(stack_of(&out[0]), vec![3, 2, 1]);
        assert_eq!(stack_of(&out[1]), vec![9]);
    }

    #[test]
    fn a_thread_state_bound_to_another_thread_joins_the_stack_it_runs_on() {
        // 3.12: `run_string` runs the subinterpreter's first thread state, bound to the thread
        // that made the interpreter (5), on thread 7's stack.
        let out = nest(
            vec![
                state(info(9, 100, 5), vec![frame(90, Some(0x6f00))]),
                state(info(1, 100, 7), vec![frame(10, Some(0x7f00))]),
                state(info(2, 200, 5), vec![frame(20, Some(0x7e00))]),
                state(info(3, 300, 5), vec![]),
            ],
            Threading {
                current: |_: &ThreadInfo| Some(false),
                region_of: stack,
                borrowed: true,
            },
        );
        assert_eq!(out.len(), 2);
        assert_eq!(stack_of(&out[0]), vec![9]);
        assert_eq!(
            out[0].idle.iter().map(|i| i.addr).collect::<Vec<_>>(),
            vec![3]
        );
        assert_eq!(stack_of(&out[1]), vec![2, 1]);
    }

    #[test]
    fn a_borrowed_thread_state_moves_only_below_a_detached_one_on_its_stack() {
        let states = || {
            vec![
                state(info(9, 100, 5), vec![frame(90, Some(0x20_0000))]),
                state(info(1, 100, 7), vec![frame(10, Some(0x80_0080))]),
                state(info(2, 200, 5), vec![frame(20, Some(0x7f_fff0))]),
            ]
        };
        // 0x80_0080 is just above 0x7f_fff0, but in another region (of 1 MiB each here).
        let out = nest(
            states(),
            Threading {
                current: |_: &ThreadInfo| Some(false),
                region_of: |a| Some(a >> 20),
                borrowed: true,
            },
        );
        assert_eq!(stack_of(&out[0]), vec![9, 2]);
        // Where the stacks are not known, nearness decides.
        let out = nest(
            states(),
            Threading {
                current: |_: &ThreadInfo| Some(false),
                region_of: |_| None,
                borrowed: true,
            },
        );
        assert_eq!(stack_of(&out[0]), vec![9]);
        assert_eq!(stack_of(&out[1]), vec![2, 1]);
        // A thread state that runs now entered no other interpreter.
        let out = nest(
            states(),
            Threading {
                current: |i: &ThreadInfo| Some(i.addr == 1),
                region_of: |_| None,
                borrowed: true,
            },
        );
        assert_eq!(stack_of(&out[0]), vec![9, 2]);
    }

    #[test]
    fn without_entry_frames_borrowed_thread_states_are_not_joined() {
        // 3.11's `run_string` borrows the interpreter's first thread state too, and no entry
        // frame tells where it runs: each thread state with frames stands alone.
        let out = nest(
            vec![
                state(info(1, 100, 7), vec![frame(10, None)]),
                state(info(2, 200, 7), vec![frame(20, None)]),
                state(info(3, 300, 7), vec![]),
            ],
            Threading {
                current: |_: &ThreadInfo| None,
                region_of: |_| None,
                borrowed: true,
            },
        );
        assert_eq!(out.len(), 2);
        assert_eq!(stack_of(&out[0]), vec![1]);
        assert_eq!(
            out[0].idle.iter().map(|i| i.addr).collect::<Vec<_>>(),
            vec![3]
        );
        assert_eq!(stack_of(&out[1]), vec![2]);
    }

    #[test]
    fn the_attached_thread_state_is_innermost_even_with_no_frame() {
        let out = nest(
            vec![
                state(info(1, 100, 7), vec![frame(10, Some(0x7f00))]),
                state(info(2, 200, 7), vec![]),
            ],
            Threading {
                current: |i: &ThreadInfo| Some(i.addr == 2),
                region_of: stack,
                borrowed: false,
            },
        );
        assert_eq!(stack_of(&out[0]), vec![2, 1]);
        assert!(out[0].idle.is_empty());
    }

    #[test]
    fn a_thread_state_left_with_no_frame_is_idle() {
        let out = nest(
            vec![
                state(info(1, 100, 7), vec![frame(10, Some(0x7f00))]),
                state(info(2, 200, 7), vec![]),
            ],
            Threading {
                current: |_: &ThreadInfo| Some(false),
                region_of: stack,
                borrowed: false,
            },
        );
        assert_eq!(stack_of(&out[0]), vec![1]);
        assert_eq!(
            out[0].idle.iter().map(|i| i.addr).collect::<Vec<_>>(),
            vec![2]
        );
    }

    #[test]
    fn with_no_frame_anywhere_the_oldest_interpreter_stands_for_the_thread() {
        let out = nest(
            vec![
                state(info(1, 100, 7), vec![]),
                state(info(2, 200, 7), vec![]),
            ],
            Threading {
                current: |_: &ThreadInfo| None,
                region_of: |_| None,
                borrowed: false,
            },
        );
        assert_eq!(stack_of(&out[0]), vec![1]);
        assert_eq!(out[0].idle.len(), 1);
    }

    #[test]
    fn without_entry_frames_the_newer_interpreter_is_inner() {
        // 3.11 and older: no entry frames on the C stack.
        let out = nest(
            vec![
                state(info(1, 100, 7), vec![frame(10, None)]),
                state(info(2, 200, 7), vec![frame(20, None)]),
            ],
            Threading {
                current: |_: &ThreadInfo| None,
                region_of: |_| None,
                borrowed: false,
            },
        );
        assert_eq!(stack_of(&out[0]), vec![2, 1]);
    }

    #[test]
    fn unbound_thread_states_and_other_native_ids_stay_apart() {
        let mut other = info(2, 200, 7);
        other.native_id = Some(99);
        let out = nest(
            vec![
                state(info(1, 100, 0), vec![]),
                state(info(3, 200, 0), vec![]),
                state(info(4, 100, 7), vec![frame(10, None)]),
                state(other, vec![frame(20, None)]),
            ],
            Threading {
                current: |_: &ThreadInfo| None,
                region_of: |_| None,
                borrowed: false,
            },
        );
        assert_eq!(out.len(), 4);
    }
}
