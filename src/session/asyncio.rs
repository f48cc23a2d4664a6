//! asyncio over a stop: every pending task decoded once ([`view`]), and the report with the
//! tasks, loops and await cycles ([`report`]) that `py-bt-async` and `py-tasks` render
//! ([`crate::report::views`]).

use super::report::{frame_report, interpreter_id, report as threads_report, thread_frame_report};
use super::{once, Session};
use crate::asyncio::{self, AsyncView, ThreadFrames};
use crate::cpython::FrameItem;
use crate::error::Result;
use crate::model::{AwaitingReport, FrameReport, LoopReport, Report, TaskReport};

/// Every pending asyncio task, decoded once per stop.
pub fn view(s: &Session) -> Result<&AsyncView> {
    if let Some(v) = s.async_view.get() {
        return Ok(v);
    }
    let frames: Vec<ThreadFrames> = s
        .threads()
        .iter()
        .map(|t| ThreadFrames {
            tstates: t.states().map(|i| (i.addr, i.interp)).collect(),
            native_id: t.info.native_id,
            walk: &t.walk,
        })
        .collect();
    let dbg = asyncio::debug_section::AsyncioDebug::find(&s.target);
    let view = asyncio::analyze(&s.snap, &frames, dbg)?;
    Ok(once(&s.async_view, || view))
}

/// The report of every thread plus the asyncio tasks, loops and await cycles.
pub fn report(s: &Session) -> Result<&Report> {
    if let Some(r) = s.async_report.get() {
        return Ok(r);
    }
    let r = build_report(s)?;
    Ok(once(&s.async_report, || r))
}

/// [`report`] as the caller's own: the one built for this stop if there is one (a later
/// [`report`] builds it again), else a new one. The CLI, which reads it once, keeps the copy a
/// clone of 100,000 tasks would cost.
pub fn take_report(s: &mut Session) -> Result<Report> {
    match s.async_report.take() {
        Some(r) => Ok(r),
        None => build_report(s),
    }
}

fn build_report(s: &Session) -> Result<Report> {
    let mut r = threads_report(s, None, false)?;
    let threads = s.threads();
    let view = view(s)?;
    let native_id = |ti: Option<usize>| ti.and_then(|i| threads[i].info.native_id);
    // A task's frames run in the interpreter whose asyncio lists it; a loop's are its
    // thread's, from the loop outwards (into the interpreters the thread entered from).
    let frame_reports = |items: &[FrameItem], interp: u64| -> Vec<FrameReport> {
        let id = interpreter_id(s, interp);
        items
            .iter()
            .map(|i| FrameReport {
                interpreter_id: id,
                ..frame_report(s, i, false)
            })
            .collect()
    };
    r.tasks = Some(
        view.tasks
            .iter()
            .map(|t| TaskReport {
                id: t.raw.addr,
                name: t.raw.name.clone(),
                state: t.raw.state,
                on_cpu: t.on_cpu.is_some(),
                native_id: native_id(t.thread),
                type_name: t.raw.type_name.clone(),
                supported: t.supported,
                loop_: t.raw.loop_,
                frames: frame_reports(&t.frames, t.interp),
                awaiting: t.awaiting.as_ref().map(|a| AwaitingReport {
                    kind: a.kind,
                    id: a.id,
                    type_name: a.type_name.clone(),
                    executor_native_id: native_id(a.executor_thread),
                }),
                awaited_by: t.awaited_by.clone(),
                owned_by: t.owned_by.clone(),
                why: None,
            })
            .collect(),
    );
    r.loops = Some(loop_reports(s, view));
    r.cycles = Some(view.cycles.clone());
    r.errors.extend(view.errors.iter().cloned());
    Ok(r)
}

/// The event loops of `view`, each with its thread's frames from the loop outwards (into
/// the interpreters the thread entered from).
pub fn loop_reports(s: &Session, view: &AsyncView) -> Vec<LoopReport> {
    let threads = s.threads();
    let loop_frames = |l: &crate::asyncio::LoopView| -> Vec<FrameReport> {
        let Some(t) = l.thread.and_then(|ti| threads.get(ti)) else {
            let id = interpreter_id(s, 0);
            return l
                .upper
                .iter()
                .map(|i| FrameReport {
                    interpreter_id: id,
                    ..frame_report(s, i, false)
                })
                .collect();
        };
        l.upper
            .iter()
            .enumerate()
            .map(|(k, i)| thread_frame_report(s, t, l.upper_start + k, i, false))
            .collect()
    };
    view.loops
        .iter()
        .map(|l| LoopReport {
            id: l.addr,
            type_name: l.type_name.clone(),
            native_id: l.thread.and_then(|i| threads[i].info.native_id),
            running: l.thread.is_some(),
            frames: loop_frames(l),
            why: None,
        })
        .collect()
}
