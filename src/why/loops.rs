//! What blocks an event loop: each running loop's state, from its thread's (already decided
//! by [`super::state`] and [`super::annotate`]), what runs on it, and how late its timers are.
//!
//! | loop state | its thread |
//! | --- | --- |
//! | `idle` | `loop_idle`: in the loop's own selector wait |
//! | `blocked` | `syscall`, `gil_wait` or `idle` (a wait of the idle table, made from a task or callback, holds the loop too) |
//! | `busy` | `running` or `gc` |
//!
//! What runs is the loop's running task (the on-CPU task of that loop whose frames are the
//! thread's innermost), else a callback; its place is the thread's innermost Python frame,
//! and the call that blocks is the C function that frame calls ([`super::native`]'s rule).
//! `overdue_s` compares the earliest timer's deadline (CLOCK_MONOTONIC, `loop.time()`) with
//! this host's clock at the read: only live, where the target shares the clock.

use crate::asyncio::loops::{queues, LoopQueues};
use crate::asyncio::{AsyncView, LoopView};
use crate::cpython::FrameItem;
use crate::memory::monotonic_now;
use crate::model::{
    BlockedBy, ErrorReport, FrameKind, LoopReport, LoopState, LoopWhy, StateWord, ThreadReport,
};
use crate::session::{DecodedThread, Session};
use crate::target::SourceKind;

/// Each loop of `loops` (made from `view`) with its `why`, given the threads of `threads`
/// annotated with theirs; errors for queues that could not be read.
pub fn annotate_loops(
    session: &Session,
    view: &AsyncView,
    threads: &[ThreadReport],
    loops: &mut [LoopReport],
) -> Vec<ErrorReport> {
    let now = clock_at_read(session);
    let mut errors = Vec::new();
    for l in loops.iter_mut() {
        let Some(lv) = view.loops.iter().find(|v| v.addr == l.id) else {
            continue;
        };
        let q = match queues(&session.snap, l.id) {
            Ok(q) => q,
            Err(what) => {
                errors.push(ErrorReport {
                    address: l.id,
                    what: format!("event loop {:#x}: {what}", l.id),
                });
                LoopQueues::default()
            }
        };
        let thread = l
            .native_id
            .and_then(|n| threads.iter().find(|t| t.native_id == Some(n)));
        l.why = Some(loop_why(session, view, lv, thread, q, now));
    }
    errors
}

/// CLOCK_MONOTONIC now, where the target's timers can be compared with it: a live process,
/// or one a debugger holds on this host (the frontends give a pid only then).
pub(crate) fn clock_at_read(session: &Session) -> Option<f64> {
    match session.target.kind {
        SourceKind::Core => None,
        SourceKind::Live => monotonic_now(),
        SourceKind::Debugger => session.target.pid.and_then(|_| monotonic_now()),
    }
}

fn loop_why(
    session: &Session,
    view: &AsyncView,
    lv: &LoopView,
    thread: Option<&ThreadReport>,
    q: LoopQueues,
    now: Option<f64>,
) -> LoopWhy {
    let state = thread.and_then(|t| {
        loop_state(t).or_else(|| {
            // On CPU, in no system call, but neither holding the GIL nor attached (a
            // free-threaded thread caught between detaching and attaching again at an eval
            // breaker, a thread running C code that released the GIL): it runs code all the
            // same.
            (super::state::syscall(session, t) == Some(None)).then_some(LoopState::Busy)
        })
    });
    let blocked_by = match (state, thread) {
        (Some(s @ (LoopState::Blocked | LoopState::Busy)), Some(t)) => {
            Some(running(session, view, lv, t, s))
        }
        _ => None,
    };
    let tasks_waiting = view
        .tasks
        .iter()
        .filter(|t| t.supported && t.raw.loop_ == lv.addr && t.on_cpu.is_none())
        .count() as u64;
    LoopWhy {
        state,
        blocked_by,
        overdue_s: now
            .zip(q.earliest_when)
            .map(|(n, w)| ((n - w) * 1000.0).round() / 1000.0),
        ready: q.ready,
        tasks_waiting,
    }
}

/// The loop's state by its thread's (the table above).
fn loop_state(t: &ThreadReport) -> Option<LoopState> {
    Some(match t.why.as_ref()?.state? {
        StateWord::LoopIdle => LoopState::Idle,
        StateWord::Syscall | StateWord::GilWait | StateWord::Idle => LoopState::Blocked,
        StateWord::Running | StateWord::Gc | StateWord::Spinning | StateWord::Busy => {
            LoopState::Busy
        }
    })
}

/// What runs on the loop of `lv`, on thread `t`.
fn running(
    session: &Session,
    view: &AsyncView,
    lv: &LoopView,
    t: &ThreadReport,
    state: LoopState,
) -> BlockedBy {
    let decoded = session
        .threads()
        .iter()
        .find(|d| Some(d.info.addr) == t.thread_state && Some(d.info.thread_id) == t.thread_id);
    let task = decoded.and_then(|d| running_task(view, lv, d));
    let place = t.frames.iter().find(|f| f.kind == FrameKind::Python);
    let call = (state == LoopState::Blocked)
        .then(|| {
            let FrameItem::Python(p) = decoded?.walk.items.first()? else {
                return None;
            };
            super::native::called_c_function(&session.snap, p)
        })
        .flatten();
    BlockedBy {
        task: task.map(|(id, _)| id),
        task_name: task.map(|(_, name)| name.to_string()),
        function: place.and_then(|f| f.function.as_deref().map(str::to_string)),
        file: place.and_then(|f| f.file.as_deref().map(str::to_string)),
        line: place.and_then(|f| f.line),
        call,
    }
}

/// The running task of the loop: of its on-CPU tasks, the one whose top frame is innermost
/// on the thread (an eager task started from another's step runs above it).
fn running_task<'a>(
    view: &'a AsyncView,
    lv: &LoopView,
    d: &DecodedThread,
) -> Option<(u64, &'a str)> {
    view.tasks
        .iter()
        .filter(|t| t.raw.loop_ == lv.addr && t.on_cpu.is_some())
        .filter_map(|t| {
            let FrameItem::Python(top) = t.frames.first()? else {
                return None;
            };
            let at = d
                .walk
                .items
                .iter()
                .position(|i| matches!(i, FrameItem::Python(p) if p.addr == top.addr))?;
            Some((at, t.raw.addr, t.raw.name.as_str()))
        })
        .min_by_key(|&(at, _, _)| at)
        .map(|(_, id, name)| (id, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread_in(state: Option<StateWord>) -> ThreadReport {
        ThreadReport {
            native_id: Some(1),
            thread_id: Some(1),
            name: Some("MainThread".into()),
            native_name: None,
            holds_gil: None,
            interpreter: Some(0),
            interpreter_id: None,
            thread_state: Some(0),
            frames: Vec::new(),
            truncated: false,
            why: Some(crate::model::ThreadWhy {
                state,
                ..Default::default()
            }),
        }
    }

    #[test]
    fn a_loop_is_what_its_thread_does() {
        for (thread, want) in [
            (Some(StateWord::LoopIdle), Some(LoopState::Idle)),
            (Some(StateWord::Syscall), Some(LoopState::Blocked)),
            (Some(StateWord::GilWait), Some(LoopState::Blocked)),
            (Some(StateWord::Idle), Some(LoopState::Blocked)),
            (Some(StateWord::Running), Some(LoopState::Busy)),
            (Some(StateWord::Gc), Some(LoopState::Busy)),
            (Some(StateWord::Spinning), Some(LoopState::Busy)),
            (Some(StateWord::Busy), Some(LoopState::Busy)),
            (None, None),
        ] {
            assert_eq!(loop_state(&thread_in(thread)), want, "{thread:?}");
        }
    }
}
