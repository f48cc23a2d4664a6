//! Identical Python stacks grouped across threads and processes (`pyunwind pid|core --group`,
//! `pyunwind merge`).
//!
//! ```
//! use pyunwind::report::group::{GroupBy, Grouper};
//! let mut g = Grouper::new(GroupBy::Line);
//! // For each report, in order (one report is one process):
//! // g.add_report(Some("b7"), Some(1234), report.threads.iter().map(From::from));
//! let grouped = g.finish(Vec::new());
//! assert!(grouped.groups.is_empty());
//! ```
//!
//! Only the groups are kept: each group holds its key stack once (the first member's frames)
//! and, per member thread, its host, pid, native id and names. A report is dropped once its
//! threads are added, so `merge` over a stream of reports holds one report at a time.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::Serialize;

pub use super::members::{MemberWait, Members};
use crate::model::{
    FrameKind, FrameReport, GreenletState, StateWord, ThreadReport, WaitKind, WaitsOn,
};

/// What makes two Python stacks identical.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum GroupBy {
    /// The same functions, files and lines, frame by frame.
    #[default]
    Line,
    /// The same functions and files; lines may differ.
    Function,
}

/// One thread as the grouping sees it: its Python frames are the key, any native frames
/// are shown for the first member only.
pub struct ThreadIn<'a> {
    /// An asyncio task's id (`--async`): its await chain is the stack, `native_id` the thread
    /// of its loop.
    pub task: Option<u64>,
    /// A greenlet's address (`--greenlets`): its suspended frames are the stack,
    /// `native_id` its thread.
    pub greenlet: Option<u64>,
    /// A greenlet's wait, where its frames show one.
    pub wait: Option<MemberWait>,
    pub native_id: Option<u64>,
    pub name: Option<&'a str>,
    /// The system's name of the thread (a report's `native_name`).
    pub native_name: Option<&'a str>,
    pub frames: &'a [FrameReport],
    pub truncated: bool,
    /// `--why`: what the thread is doing, part of the key (the same stack running and blocked
    /// are two groups).
    pub why: Option<GroupWhy>,
    /// `--why`: a `native` wait's C function (`waiting.on.function`), which the straggler
    /// verdict names; not part of the key.
    pub call: Option<&'a str>,
}

/// `--why`: the state shared by every thread of a group (docs/report.md, `state`, `syscall`,
/// `waiting.kind`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct GroupWhy {
    pub state: Option<StateWord>,
    pub syscall: Option<String>,
    /// The kind of Python-level wait (`lock`, `queue_get`, ...).
    pub waiting: Option<WaitKind>,
}

impl<'a> From<&'a ThreadReport> for ThreadIn<'a> {
    fn from(t: &'a ThreadReport) -> Self {
        ThreadIn {
            task: None,
            greenlet: None,
            wait: None,
            native_id: t.native_id,
            name: t.name.as_deref(),
            native_name: t.native_name.as_deref(),
            frames: &t.frames,
            truncated: t.truncated,
            why: t.why.as_ref().map(|w| GroupWhy {
                state: w.state,
                syscall: w.syscall.clone(),
                waiting: w.waiting.as_ref().map(|w| w.kind),
            }),
            call: t.why.as_ref().and_then(|w| match &w.waiting.as_ref()?.on {
                Some(WaitsOn::Native { function, .. }) => function.as_deref(),
                _ => None,
            }),
        }
    }
}

impl<'a> ThreadIn<'a> {
    /// An asyncio task (`id`, `name`) of the loop on thread `native_id`, its await chain as
    /// its stack.
    pub fn task(id: u64, native_id: Option<u64>, name: &'a str, frames: &'a [FrameReport]) -> Self {
        ThreadIn {
            task: Some(id),
            greenlet: None,
            wait: None,
            native_id,
            name: Some(name),
            native_name: None,
            frames,
            truncated: false,
            why: None,
            call: None,
        }
    }
}

impl<'a> From<&'a crate::model::TaskReport> for ThreadIn<'a> {
    fn from(t: &'a crate::model::TaskReport) -> Self {
        ThreadIn::task(t.id, t.native_id, &t.name, &t.frames)
    }
}

impl<'a> ThreadIn<'a> {
    /// A suspended greenlet as a member (others are not grouped: a running greenlet's stack
    /// is its thread's, one not started or dead has none).
    pub fn greenlet(g: &'a crate::model::GreenletReport) -> Option<Self> {
        (g.state == GreenletState::Suspended).then(|| ThreadIn {
            task: None,
            greenlet: Some(g.address),
            wait: g.waiting.as_ref().map(MemberWait::from),
            native_id: g.thread,
            name: g.name.as_deref(),
            native_name: None,
            frames: &g.frames,
            truncated: g.truncated,
            why: None,
            call: None,
        })
    }
}

/// One frame of a group's key. Unreadable frames match each other whatever their address
/// and reason (both differ from process to process).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct FrameKey {
    kind: FrameKind,
    function: Option<Arc<str>>,
    file: Option<Arc<str>>,
    line: Option<u32>,
    /// The interpreter that runs it: the same code in two interpreters is two stacks.
    interpreter_id: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    frames: Vec<FrameKey>,
    truncated: bool,
    why: Option<GroupWhy>,
}

/// A frame of a group's stack: what every member has there. `line` (with `--group-by
/// function`) and `reason` (an unreadable frame) are left out where members differ.
#[derive(Clone, Debug, Serialize)]
pub struct GroupFrame {
    pub kind: FrameKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<Arc<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<Arc<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The id of the interpreter that runs it (the same for every member: part of the key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interpreter_id: Option<u32>,
    /// Members differ in this frame's line or reason (then left out).
    #[serde(skip)]
    pub(super) mixed: bool,
}

impl GroupFrame {
    /// A frame that is not a group's (a frame of the tree, for the straggler verdict).
    pub(super) fn new(
        kind: FrameKind,
        function: Option<Arc<str>>,
        file: Option<Arc<str>>,
        line: Option<u32>,
        mixed: bool,
    ) -> Self {
        GroupFrame {
            kind,
            function,
            file,
            line,
            reason: None,
            interpreter_id: None,
            mixed,
        }
    }
}

/// A thread (or an asyncio task) of a group.
#[derive(Clone, Debug, Serialize)]
pub struct Member {
    pub host: Option<Arc<str>>,
    pub pid: Option<u32>,
    /// A task's id (task groups only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<u64>,
    /// A greenlet's address (greenlet groups only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<u64>,
    pub native_id: Option<u64>,
    pub name: Option<Arc<str>>,
    /// A greenlet's wait, null where its frames show none (greenlet groups only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<Option<Arc<MemberWait>>>,
    /// The system's name of the thread (`native_name`); null where the report has none (a
    /// task's, a greenlet's, a core's thread).
    pub native_name: Option<Arc<str>>,
}

impl Member {
    /// What to call it: its `threading` name (a task's name), else the system's.
    pub fn any_name(&self) -> Option<&str> {
        self.name.as_deref().or(self.native_name.as_deref())
    }

    /// A thread's (or task's) member: no greenlet fields, no system name.
    pub fn thread(
        host: Option<Arc<str>>,
        pid: Option<u32>,
        task: Option<u64>,
        native_id: Option<u64>,
        name: Option<Arc<str>>,
    ) -> Self {
        Member {
            host,
            pid,
            task,
            address: None,
            native_id,
            name,
            waiting: None,
            native_name: None,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Group {
    /// The Python stack, innermost first.
    pub frames: Vec<GroupFrame>,
    /// Its threads (tasks), in the order their reports came; empty in a greenlet group.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<Member>,
    /// A greenlet group's greenlets, in the order their reports came.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub greenlets: Vec<Member>,
    /// How many threads.
    pub count: usize,
    /// How many reports (processes) have a thread in the group.
    pub processes: usize,
    /// All its threads are in one process, and more than one process was grouped.
    pub outlier: bool,
    /// The stacks were cut short (the walk stopped before the thread's first frame).
    pub truncated: bool,
    /// `--why`: `state`, `syscall`, `waiting` (a kind), the same for every thread.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub why: Option<GroupWhy>,
    /// With `--native`: the first member's whole stack, native frames with its Python frames
    /// in place.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub native_frames: Option<Vec<FrameReport>>,
    /// The index of the last report that added a thread, to count processes.
    #[serde(skip)]
    last_report: usize,
}

/// A target (or a saved report) that could not be read: a line of its own in multi-target
/// `--json` output, and an entry of `failed` in grouped output.
#[derive(Clone, Debug, Serialize)]
pub struct TargetError {
    /// The pid, core file or saved report as given on the command line (`-` for stdin).
    pub target: String,
    pub host: Option<String>,
    pub pid: Option<u32>,
    pub error: String,
}

/// `--group --json` and `merge --json`: the groups, biggest first.
#[derive(Clone, Debug, Serialize)]
pub struct Grouped {
    pub groups: Vec<Group>,
    /// How many reports (processes) were grouped.
    pub reports: usize,
    /// How many threads.
    pub threads: usize,
    /// The targets or saved reports that could not be read.
    pub failed: Vec<TargetError>,
    /// `--async`/`--tasks`: asyncio tasks grouped by their await chains, as threads are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_groups: Option<Vec<Group>>,
    /// `--greenlets`: suspended greenlets grouped by their stacks, as threads are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub greenlet_groups: Option<Vec<Group>>,
}

impl Group {
    /// Its members: threads, tasks or greenlets.
    pub fn members(&self) -> &[Member] {
        if self.threads.is_empty() {
            &self.greenlets
        } else {
            &self.threads
        }
    }

    /// What its members are.
    pub fn kind(&self) -> Members {
        match self.members().first() {
            Some(m) if m.address.is_some() => Members::Greenlets,
            Some(m) if m.task.is_some() => Members::Tasks,
            _ => Members::Threads,
        }
    }
}

/// Groups threads report after report.
pub struct Grouper {
    by: GroupBy,
    members: Members,
    index: HashMap<Key, usize>,
    groups: Vec<Group>,
    reports: usize,
    threads: usize,
    /// Host and thread names, kept once each (thousands of `MainThread`s).
    strings: HashSet<Arc<str>>,
}

impl Grouper {
    pub fn new(by: GroupBy) -> Self {
        Self::of(by, Members::Threads)
    }

    /// A grouping of `members` (a greenlet group names its members `greenlets`).
    pub fn of(by: GroupBy, members: Members) -> Self {
        Grouper {
            by,
            members,
            index: HashMap::new(),
            groups: Vec::new(),
            reports: 0,
            threads: 0,
            strings: HashSet::new(),
        }
    }

    /// What makes two stacks identical here.
    pub fn by(&self) -> GroupBy {
        self.by
    }

    fn intern(&mut self, s: &str) -> Arc<str> {
        if let Some(k) = self.strings.get(s) {
            return k.clone();
        }
        let k: Arc<str> = s.into();
        self.strings.insert(k.clone());
        k
    }

    /// Adds one report's threads (one process: `host`, `pid`).
    pub fn add_report<'a>(
        &mut self,
        host: Option<&str>,
        pid: Option<u32>,
        threads: impl IntoIterator<Item = ThreadIn<'a>>,
    ) {
        self.add_report_each(host, pid, threads, |_, _| {});
    }

    /// [`Self::add_report`], calling `each` with every thread and its member once it is
    /// grouped (the call tree takes them too: [`super::gather`]).
    pub fn add_report_each<'a>(
        &mut self,
        host: Option<&str>,
        pid: Option<u32>,
        threads: impl IntoIterator<Item = ThreadIn<'a>>,
        mut each: impl FnMut(&ThreadIn<'a>, &Member),
    ) {
        self.reports += 1;
        let report = self.reports;
        let host = host.map(|h| self.intern(h));
        for t in threads {
            let member = self.add_thread(report, host.clone(), pid, &t);
            each(&t, member);
        }
    }

    fn add_thread(
        &mut self,
        report: usize,
        host: Option<Arc<str>>,
        pid: Option<u32>,
        t: &ThreadIn,
    ) -> &Member {
        self.threads += 1;
        let key = Key {
            frames: t
                .frames
                .iter()
                .filter(|f| in_key(f))
                .map(|f| self.frame_key(f))
                .collect(),
            truncated: t.truncated,
            why: t.why.clone(),
        };
        let member = Member {
            host,
            pid,
            task: t.task,
            address: t.greenlet,
            native_id: t.native_id,
            name: t.name.map(|n| self.intern(n)),
            waiting: t.greenlet.map(|_| t.wait.clone().map(Arc::new)),
            native_name: t.native_name.map(|n| self.intern(n)),
        };
        let i = match self.index.get(&key) {
            Some(&i) => {
                let g = &mut self.groups[i];
                let shown = t.frames.iter().filter(|f| in_key(f));
                for (gf, f) in g.frames.iter_mut().zip(shown) {
                    if !gf.mixed && (gf.line != f.line || gf.reason.as_deref() != f.reason()) {
                        gf.mixed = true;
                        gf.line = None;
                        gf.reason = None;
                    }
                }
                i
            }
            None => {
                let native = t
                    .frames
                    .iter()
                    .any(|f| matches!(f.kind, FrameKind::Native | FrameKind::Jit));
                self.groups.push(Group {
                    frames: t
                        .frames
                        .iter()
                        .filter(|f| in_key(f))
                        .map(|f| GroupFrame {
                            kind: f.kind,
                            function: f.function.clone(),
                            file: f.file.clone(),
                            line: f.line,
                            reason: f.reason().map(str::to_string),
                            interpreter_id: f.interpreter_id,
                            mixed: false,
                        })
                        .collect(),
                    threads: Vec::new(),
                    greenlets: Vec::new(),
                    count: 0,
                    processes: 0,
                    outlier: false,
                    truncated: t.truncated,
                    why: t.why.clone(),
                    native_frames: native.then(|| t.frames.to_vec()),
                    last_report: 0,
                });
                self.index.insert(key, self.groups.len() - 1);
                self.groups.len() - 1
            }
        };
        let g = &mut self.groups[i];
        g.threads.push(member);
        g.count += 1;
        if g.last_report != report {
            g.last_report = report;
            g.processes += 1;
        }
        &g.threads[g.threads.len() - 1]
    }

    fn frame_key(&self, f: &FrameReport) -> FrameKey {
        match f.kind {
            FrameKind::Unreadable => FrameKey {
                kind: f.kind,
                function: None,
                file: None,
                line: None,
                interpreter_id: f.interpreter_id,
            },
            _ => FrameKey {
                kind: f.kind,
                function: f.function.clone(),
                file: f.file.clone(),
                line: match self.by {
                    GroupBy::Line => f.line,
                    GroupBy::Function => None,
                },
                interpreter_id: f.interpreter_id,
            },
        }
    }

    /// The groups, biggest (most threads) first, then those spanning more processes; equal
    /// ones in the order they were first seen.
    pub fn finish(self, failed: Vec<TargetError>) -> Grouped {
        let mut groups = self.groups;
        let several = self.reports > 1;
        for g in &mut groups {
            g.outlier = several && g.processes == 1;
            if self.members == Members::Greenlets {
                g.greenlets = std::mem::take(&mut g.threads);
            }
        }
        // A stable sort keeps first-seen order among equals.
        groups.sort_by_key(|g| std::cmp::Reverse((g.count, g.processes)));
        Grouped {
            groups,
            reports: self.reports,
            threads: self.threads,
            failed,
            task_groups: None,
            greenlet_groups: None,
        }
    }
}

/// The Python part of a stack is the key: its Python frames, and where it could not be read.
fn in_key(f: &FrameReport) -> bool {
    matches!(f.kind, FrameKind::Python | FrameKind::Unreadable)
}

#[cfg(test)]
mod tests;
