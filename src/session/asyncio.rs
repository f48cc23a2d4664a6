//! asyncio over a stop: every pending task decoded once ([`view`]), and the report with the
//! tasks, loops and await cycles ([`report`]) that `py-bt-async` and `py-tasks` render
//! ([`crate::report::views`]).

use super::report::{frame_report, interpreter_id, report as threads_report, thread_frame_report};
use super::{once, Session};
use crate::asyncio::{self, AsyncView, TaskView, ThreadFrames};
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

/// [`take_report`] for a caller that reads nothing else of asyncio at this stop: the tasks of
/// the stop's view become the report's, their names and lists moved, not copied, in the
/// view's own memory (100,000 tasks: megabytes touched for the first time and 300,000
/// allocations saved). A later [`view`] or [`report`] decodes the tasks again.
pub fn take_report_once(s: &mut Session) -> Result<Report> {
    if let Some(r) = s.async_report.take() {
        return Ok(r);
    }
    let mut r = threads_report(s, None, false)?;
    view(s)?;
    let Some(mut view) = s.async_view.take() else {
        return build_report(s);
    };
    let s = &*s;
    let tasks = std::mem::take(&mut view.tasks);
    // In place: a `TaskReport` is smaller than a `TaskView`, so the tasks' vector holds them.
    r.tasks = Some(
        tasks
            .into_iter()
            .map(|mut t| {
                let parts = TaskParts {
                    name: std::mem::take(&mut t.raw.name),
                    type_name: std::mem::take(&mut t.raw.type_name),
                    awaiting_type: t
                        .awaiting
                        .as_mut()
                        .map(|a| std::mem::take(&mut a.type_name)),
                    awaited_by: std::mem::take(&mut t.awaited_by),
                    owned_by: std::mem::take(&mut t.owned_by),
                };
                task_report(s, &t, parts)
            })
            .collect(),
    );
    r.loops = Some(loop_reports(s, &view));
    r.cycles = Some(view.cycles);
    r.errors.extend(view.errors);
    Ok(r)
}

/// What a task's report owns of its task: its strings and lists.
struct TaskParts {
    name: String,
    type_name: String,
    awaiting_type: Option<String>,
    awaited_by: Vec<u64>,
    owned_by: Vec<u64>,
}

impl TaskParts {
    fn copied(t: &TaskView) -> Self {
        TaskParts {
            name: t.raw.name.clone(),
            type_name: t.raw.type_name.clone(),
            awaiting_type: t.awaiting.as_ref().map(|a| a.type_name.clone()),
            awaited_by: t.awaited_by.clone(),
            owned_by: t.owned_by.clone(),
        }
    }
}

/// The report of task `t`, with `parts` as its strings and lists. Its frames run in the
/// interpreter whose asyncio lists it.
fn task_report(s: &Session, t: &TaskView, parts: TaskParts) -> TaskReport {
    let threads = s.threads();
    let native_id = |ti: Option<usize>| ti.and_then(|i| threads[i].info.native_id);
    let id = interpreter_id(s, t.interp);
    TaskReport {
        id: t.raw.addr,
        name: parts.name,
        state: t.raw.state,
        on_cpu: t.on_cpu.is_some(),
        native_id: native_id(t.thread),
        type_name: parts.type_name,
        supported: t.supported,
        loop_: t.raw.loop_,
        frames: t
            .frames
            .iter()
            .map(|i| FrameReport {
                interpreter_id: id,
                ..frame_report(s, i, false)
            })
            .collect(),
        awaiting: t.awaiting.as_ref().map(|a| AwaitingReport {
            kind: a.kind,
            id: a.id,
            type_name: parts.awaiting_type.unwrap_or_default(),
            executor_native_id: native_id(a.executor_thread),
        }),
        awaited_by: parts.awaited_by,
        owned_by: parts.owned_by,
        why: None,
    }
}

fn build_report(s: &Session) -> Result<Report> {
    let mut r = threads_report(s, None, false)?;
    let view = view(s)?;
    r.tasks = Some(
        view.tasks
            .iter()
            .map(|t| task_report(s, t, TaskParts::copied(t)))
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
