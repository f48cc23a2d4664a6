//! The verdict's asyncio task lines (docs/report.md, "The verdict"): one per group of tasks that
//! wait alike ([`crate::why::task_groups`]), and the line counting the idle tasks.

use std::fmt::Write;

use super::wait_text::{socket_target, waits_for, waits_on, who};
use crate::model::{Report, TaskClass, TaskGroup, Waiting, WaitsOn};
use crate::why::task_groups::TASK_ROWS;

/// Lines of task groups, at most (a server's tasks wait in many places).
const MAX_GROUP_LINES: usize = 20;

/// `task 0x7f.. "worker-1"`: its name from the listed tasks or the groups, else `task 0x7f..`.
pub(super) fn which_task(r: &Report, id: u64) -> String {
    let name = r
        .tasks
        .iter()
        .flatten()
        .find(|t| t.id == id)
        .map(|t| t.name.as_str())
        .or_else(|| {
            let groups = r.task_waits.iter().flatten();
            groups
                .filter(|g| g.tasks.first() == Some(&id))
                .map(|g| g.name.as_str())
                .next()
        });
    match name {
        Some(name) => format!("task {id:#x} \"{name}\""),
        None => format!("task {id:#x}"),
    }
}

/// ` in fetch_user (app.py:31)`: where the group's tasks wait in their own code.
fn place(g: &TaskGroup) -> String {
    match (&g.function, &g.file, g.line) {
        (Some(f), Some(file), Some(line)) => {
            let file = file.rsplit('/').next().unwrap_or(file);
            format!(" in {f} ({file}:{line})")
        }
        (Some(f), _, _) => format!(" in {f}"),
        _ => String::new(),
    }
}

/// The wait of one task, after its subject: `waits on socket fd 9 (recv from ...)`, and what
/// follows the place (an executor job's worker, an orphan's fate).
fn one_wait(r: &Report, w: &Waiting) -> (String, String) {
    let what = |w: &Waiting| {
        let mut s = w
            .type_name
            .as_deref()
            .unwrap_or(w.kind.as_str())
            .to_string();
        if let Some(o) = w.object {
            write!(s, " {o:#x}").unwrap();
        }
        s
    };
    if let Some(owner) = w.owner {
        let held = which_task(r, owner);
        return (
            format!("waits for asyncio {} held by {held}", what(w)),
            String::new(),
        );
    }
    match &w.on {
        Some(WaitsOn::Executor { thread, job }) => {
            let mut s = "waits for executor job".to_string();
            if let Some(job) = job {
                write!(s, " {job}").unwrap();
            }
            let mut then = String::new();
            if let Some(n) = *thread {
                write!(then, ", which runs on {}", who(r, n)).unwrap();
                let worker = r.threads.iter().find(|x| x.native_id == Some(n));
                if let Some(ww) = worker.and_then(|x| x.why.as_ref()?.waiting.as_ref()) {
                    write!(then, " and {}", waits_for(r, ww)).unwrap();
                }
            }
            (s, then)
        }
        Some(WaitsOn::Future { orphan: Some(true) }) => (
            format!("awaits {} that nothing else refers to", what(w)),
            ": it can never complete".to_string(),
        ),
        Some(WaitsOn::Future { .. }) => (format!("awaits {}", what(w)), String::new()),
        Some(WaitsOn::Sleep { remaining_s }) => match remaining_s {
            Some(m) => (
                format!("sleeps (asyncio.sleep, {:.1} s left)", m.0 as f64 / 1000.0),
                String::new(),
            ),
            None => ("sleeps (asyncio.sleep)".to_string(), String::new()),
        },
        Some(_) => (waits_on(w).unwrap_or_default(), String::new()),
        None => (format!("waits for asyncio {}", what(w)), String::new()),
    }
}

/// The wait of several tasks, after `N tasks`: what they have in common (the group's target).
fn many_wait(r: &Report, w: &Waiting) -> (String, String) {
    if let Some(owner) = w.owner {
        let ty = w.type_name.as_deref().unwrap_or(w.kind.as_str());
        let o = w.object.map_or(String::new(), |o| format!(" {o:#x}"));
        let held = which_task(r, owner);
        return (
            format!("wait for asyncio {ty}{o} held by {held}"),
            String::new(),
        );
    }
    let s = match &w.on {
        Some(WaitsOn::Socket {
            direction,
            peer,
            peer_process,
            ..
        }) => match socket_target(*direction, peer.as_deref(), peer_process.as_ref()) {
            Some(t) if peer.is_some() || peer_process.is_some() => format!("wait on socket {t}"),
            Some(t) => format!("wait on sockets ({t})"),
            None => "wait on sockets".to_string(),
        },
        Some(WaitsOn::Executor { job, .. }) => match job {
            Some(job) => format!("wait for executor jobs {job}"),
            None => "wait for executor jobs".to_string(),
        },
        Some(WaitsOn::Child { command, .. }) => match command {
            Some(c) => format!("wait for children ({c}) to exit"),
            None => "wait for children to exit".to_string(),
        },
        Some(WaitsOn::Future { orphan: Some(true) }) => {
            let then = ": they can never complete".to_string();
            return (
                "await futures that nothing else refers to".to_string(),
                then,
            );
        }
        Some(WaitsOn::Future { .. }) => "await futures".to_string(),
        Some(WaitsOn::Sleep { .. }) => "sleep (asyncio.sleep)".to_string(),
        _ => {
            let (one, _) = one_wait(r, w);
            one.replacen("waits ", "wait ", 1)
        }
    };
    (s, String::new())
}

/// `3 tasks wait on socket recv from 127.0.0.1:5432 in fetch_user (app.py:31)`, `task 0x..
/// "fetch" waits for executor job blocking_get in fetch (app.py:31), which runs on thread 1234
/// "asyncio_0" and waits on socket fd 16 (...)`; None for idle groups.
fn group_line(r: &Report, g: &TaskGroup) -> Option<String> {
    let w = g.waiting.as_ref().filter(|_| g.class != TaskClass::Idle)?;
    let (subject, (what, then), timeout) = match g.tasks.as_slice() {
        [id] => (which_task(r, *id), one_wait(r, w), timeout_text(g)),
        ids => (
            format!("{} tasks", ids.len()),
            many_wait(r, w),
            String::new(),
        ),
    };
    Some(format!("{subject} {what}{}{then}{timeout}", place(g)))
}

/// `; its asyncio.timeout expires in 12.3 s` (live), `; inside an asyncio.timeout` (a core).
fn timeout_text(g: &TaskGroup) -> String {
    match g.timeout.as_ref().map(|t| t.remaining_s) {
        Some(Some(m)) if m.0 < 0 => format!("; its asyncio.timeout expired {:.1} s ago", -m.secs()),
        Some(Some(m)) => format!("; its asyncio.timeout expires in {:.1} s", m.secs()),
        Some(None) => "; inside an asyncio.timeout".to_string(),
        None => String::new(),
    }
}

/// The executor workers whose waits the task lines tell (a single task's line names its job's
/// worker and that worker's wait): they get no line of their own.
pub(super) fn told_workers(r: &Report) -> Vec<u64> {
    let groups = r
        .task_waits
        .iter()
        .flatten()
        .filter(|g| g.class != TaskClass::Idle);
    groups
        .take(MAX_GROUP_LINES)
        .filter(|g| g.tasks.len() == 1)
        .filter_map(|g| match g.waiting.as_ref()?.on {
            Some(WaitsOn::Executor { thread, .. }) => thread,
            _ => None,
        })
        .collect()
}

/// The task lines of the verdict, in the groups' order (owned, outside, other), at most
/// [`MAX_GROUP_LINES`] and one line saying how many more.
pub(super) fn task_lines(r: &Report) -> Vec<String> {
    let groups: Vec<&TaskGroup> = r
        .task_waits
        .iter()
        .flatten()
        .filter(|g| g.class != TaskClass::Idle)
        .collect();
    let mut lines: Vec<String> = groups
        .iter()
        .take(MAX_GROUP_LINES)
        .filter_map(|g| group_line(r, g))
        .collect();
    if groups.len() > MAX_GROUP_LINES {
        let rest = &groups[MAX_GROUP_LINES..];
        let tasks: usize = rest.iter().map(|g| g.tasks.len()).sum();
        lines.push(format!(
            "... and {tasks} more tasks waiting in {} more places",
            rest.len()
        ));
    }
    lines
}

/// `3 idle tasks: 1 server waiting for connections, 2 server ticks`; None when none is idle.
pub(super) fn idle_tasks_line(r: &Report) -> Option<String> {
    let idle: Vec<&TaskGroup> = r
        .task_waits
        .iter()
        .flatten()
        .filter(|g| g.class == TaskClass::Idle)
        .collect();
    let total: usize = idle.iter().map(|g| g.tasks.len()).sum();
    if total == 0 {
        return None;
    }
    let parts: Vec<String> = TASK_ROWS
        .iter()
        .filter_map(|row| {
            let n: usize = idle
                .iter()
                .filter(|g| g.idle == Some(row.kind))
                .map(|g| g.tasks.len())
                .sum();
            (n > 0).then(|| format!("{n} {}", if n == 1 { row.one } else { row.many }))
        })
        .collect();
    let noun = if total == 1 {
        "idle task"
    } else {
        "idle tasks"
    };
    Some(format!("{total} {noun}: {}", parts.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Millis, TaskTimeout};

    fn group(remaining_s: Option<Option<Millis>>) -> TaskGroup {
        TaskGroup {
            class: TaskClass::Other,
            idle: None,
            tasks: vec![0x10],
            name: "timed".to_string(),
            waiting: None,
            function: None,
            file: None,
            line: None,
            timeout: remaining_s.map(|remaining_s| TaskTimeout {
                object: 0x20,
                frame: 1,
                remaining_s,
            }),
        }
    }

    #[test]
    fn a_deadline_ends_the_line_as_it_stands() {
        let ahead = group(Some(Some(Millis(12_345))));
        assert_eq!(
            timeout_text(&ahead),
            "; its asyncio.timeout expires in 12.3 s"
        );
        let passed = group(Some(Some(Millis(-1_260))));
        assert_eq!(
            timeout_text(&passed),
            "; its asyncio.timeout expired 1.3 s ago"
        );
        assert_eq!(
            timeout_text(&group(Some(None))),
            "; inside an asyncio.timeout"
        );
        assert_eq!(timeout_text(&group(None)), "");
    }
}
