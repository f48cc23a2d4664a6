//! Which stacks one sample gives `record`: each thread's, or with `--async` each asyncio
//! task's await chain in place of its loop thread's, and with `--greenlets` each suspended
//! greenlet's.
//!
//! - A thread counts when it is on a CPU or waiting for one (`running`), or always with
//!   `--idle`.
//! - `--async`: a thread running an event loop whose task is on the CPU gives that task's
//!   stack instead of its own, so the samples written are the same as without `--async`;
//!   with `--idle`, every other pending task of the loop gives its stack too (a suspended
//!   task never runs). A task's stack is its frames, then those of the task that awaits it
//!   (or owns it: a TaskGroup's, gather's), and so on up to a task no task awaits, then the
//!   loop's frames (its thread's, from the loop outwards): the stack `py-bt-async` prints for
//!   the task's first await path.
//! - `--greenlets`: a running greenlet is its thread (already counted); with `--idle` each
//!   suspended one gives its stack (where it resumes).

use std::collections::{HashMap, HashSet};

use super::profile::{Owner, OwnerKind, Profile};
use crate::model::{FrameReport, GreenletState, Report, TaskReport, ThreadReport};

/// Tasks of one await chain, past which the rest of it is left out (a chain of tasks awaiting
/// tasks is a program's recursion: thousands are rare, a cycle is cut by the visited set).
pub const MAX_CHAIN_TASKS: usize = 1_000;

/// What to take of each sample.
#[derive(Clone, Copy)]
pub struct Take {
    pub idle: bool,
    pub tasks: bool,
    pub greenlets: bool,
    /// `--children`: the process, whose stacks go under a `process PID` root frame.
    pub pid: Option<i32>,
}

/// Adds one sample's stacks (`report`, made with tasks or greenlets where `take` asks for
/// them) to `profile`; `running` says whether a thread (by LWP) is on a CPU.
pub fn add(profile: &mut Profile, report: &Report, take: Take, running: &dyn Fn(u64) -> bool) {
    let counted = |t: &ThreadReport| take.idle || t.native_id.is_some_and(running);
    let tasks: HashMap<u64, &TaskReport> = if take.tasks {
        report.tasks.iter().flatten().map(|t| (t.id, t)).collect()
    } else {
        HashMap::new()
    };
    let mut done: HashSet<u64> = HashSet::new();
    for t in &report.threads {
        let on_cpu = report.tasks.iter().flatten().find(|k| {
            take.tasks
                && k.on_cpu
                && k.supported
                && t.native_id.is_some()
                && k.native_id == t.native_id
        });
        if counted(t) {
            match on_cpu {
                Some(k) => {
                    done.insert(k.id);
                    profile.add_stack(&task_owner(k, take.pid), &task_stack(k, &tasks, report));
                }
                None => profile.add_stack(&Owner::thread(t, take.pid), &t.frames),
            }
        }
    }
    if take.idle {
        for k in report.tasks.iter().flatten() {
            if k.supported && !done.contains(&k.id) && take.tasks {
                profile.add_stack(&task_owner(k, take.pid), &task_stack(k, &tasks, report));
            }
        }
        for g in report.greenlets.iter().flatten() {
            if take.greenlets && g.state == GreenletState::Suspended {
                let owner = Owner {
                    kind: OwnerKind::Greenlet,
                    id: g.address,
                    name: g.name.clone().or_else(|| g.function.clone()),
                    pid: take.pid,
                };
                profile.add_stack(&owner, &g.frames);
            }
        }
    }
}

fn task_owner(k: &TaskReport, pid: Option<i32>) -> Owner {
    Owner {
        kind: OwnerKind::Task,
        id: k.id,
        name: Some(k.name.clone()),
        pid,
    }
}

/// Task `k`'s async stack, innermost first: its frames, its first awaiter's (or owner's), ...,
/// then its root task's loop's frames.
fn task_stack(k: &TaskReport, tasks: &HashMap<u64, &TaskReport>, r: &Report) -> Vec<FrameReport> {
    let mut frames = Vec::new();
    let mut seen = HashSet::new();
    let mut at = k;
    loop {
        frames.extend(at.frames.iter().cloned());
        seen.insert(at.id);
        let next = at
            .awaited_by
            .iter()
            .chain(&at.owned_by)
            .find_map(|id| tasks.get(id));
        match next {
            Some(n) if !seen.contains(&n.id) && seen.len() < MAX_CHAIN_TASKS => at = n,
            _ => break,
        }
    }
    if let Some(l) = r.loops.iter().flatten().find(|l| l.id == at.loop_) {
        frames.extend(l.frames.iter().cloned());
    }
    frames
}
