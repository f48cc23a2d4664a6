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
mod tests {
    use super::*;
    use crate::report::group_text::{headline, render};
    use crate::report::test_support::python_frame as py;
    use crate::report::text::Sources;

    fn thread<'a>(id: u64, name: &'a str, frames: &'a [FrameReport]) -> ThreadIn<'a> {
        ThreadIn {
            task: None,
            greenlet: None,
            wait: None,
            native_id: Some(id),
            name: Some(name),
            native_name: None,
            frames,
            truncated: false,
            why: None,
            call: None,
        }
    }

    fn pids(g: &Group) -> Vec<u32> {
        g.threads.iter().map(|m| m.pid.unwrap()).collect()
    }

    #[test]
    fn the_straggler_is_an_outlier_and_the_rest_one_group() {
        let wait = [py("allreduce", "r.py", 10), py("<module>", "r.py", 30)];
        let load = [py("load", "r.py", 20), py("<module>", "r.py", 31)];
        let mut g = Grouper::new(GroupBy::Line);
        for pid in 100..104 {
            let frames: &[FrameReport] = if pid == 102 { &load } else { &wait };
            g.add_report(
                Some("b7"),
                Some(pid),
                [thread(pid as u64, "MainThread", frames)],
            );
        }
        let out = g.finish(Vec::new());
        assert_eq!(out.groups.len(), 2);
        assert_eq!(out.reports, 4);
        assert_eq!(out.threads, 4);
        let (big, odd) = (&out.groups[0], &out.groups[1]);
        assert_eq!(pids(big), [100, 101, 103]);
        assert_eq!((big.count, big.processes, big.outlier), (3, 3, false));
        assert_eq!(pids(odd), [102]);
        assert_eq!((odd.count, odd.processes, odd.outlier), (1, 1, true));
        assert_eq!(odd.frames[0].function.as_deref(), Some("load"));
        assert_eq!(headline(big), "3 processes × MainThread");
        assert_eq!(
            headline(odd),
            "1 process (pid 102, host b7) × MainThread [outlier]"
        );
    }

    #[test]
    fn one_stack_in_two_interpreters_is_two_groups_and_the_text_marks_the_crossing() {
        let in_interp = |ids: [u32; 2]| {
            let mut f = [py("park", "c.py", 7), py("run", "m.py", 3)];
            f[0].interpreter_id = Some(ids[0]);
            f[1].interpreter_id = Some(ids[1]);
            f
        };
        let (a, b) = (in_interp([1, 0]), in_interp([2, 0]));
        let mut g = Grouper::new(GroupBy::Line);
        g.add_report(
            Some("h"),
            Some(1),
            [
                thread(1, "t1", &a),
                thread(2, "t2", &b),
                thread(3, "t3", &a),
            ],
        );
        let out = g.finish(Vec::new());
        assert_eq!(out.groups.len(), 2);
        assert_eq!(out.groups[0].count, 2);
        assert_eq!(out.groups[0].frames[0].interpreter_id, Some(1));
        assert_eq!(out.groups[1].frames[0].interpreter_id, Some(2));
        let text = render(
            &crate::report::gather::Gathered {
                grouped: out,
                verdict: None,
                tree: None,
                task_tree: None,
                greenlet_tree: None,
            },
            &mut Sources::default(),
        );
        assert!(text.contains(
            "  File \"c.py\", line 7, in park\n  --- interpreter 1 (entered from interpreter 0) ---\n  File \"m.py\", line 3, in run\n"
        ), "{text}");
    }

    #[test]
    fn lines_split_groups_unless_grouped_by_function() {
        let a = [py("work", "w.py", 5)];
        let b = [py("work", "w.py", 6)];
        let mut by_line = Grouper::new(GroupBy::Line);
        let mut by_function = Grouper::new(GroupBy::Function);
        for g in [&mut by_line, &mut by_function] {
            g.add_report(Some("h"), Some(1), [thread(1, "MainThread", &a)]);
            g.add_report(Some("h"), Some(2), [thread(2, "MainThread", &b)]);
        }
        assert_eq!(by_line.finish(Vec::new()).groups.len(), 2);
        let f = by_function.finish(Vec::new());
        assert_eq!(f.groups.len(), 1);
        // The lines differ: none is shown, and the text says so.
        assert_eq!(f.groups[0].frames[0].line, None);
        let text = render(
            &crate::report::gather::Gathered {
                grouped: f,
                verdict: None,
                tree: None,
                task_tree: None,
                greenlet_tree: None,
            },
            &mut Sources::default(),
        );
        assert!(
            text.contains("File \"w.py\", lines differ, in work"),
            "{text}"
        );
        assert!(
            text.starts_with("1 group of identical Python stacks over 2 processes, 2 threads\n")
        );
    }

    #[test]
    fn threads_of_one_process_count_once_and_biggest_group_comes_first() {
        let idle = [py("idle", "p.py", 1)];
        let busy = [py("busy", "p.py", 2)];
        let mut g = Grouper::new(GroupBy::Line);
        g.add_report(
            Some("h"),
            Some(7),
            [
                thread(1, "MainThread", &busy),
                thread(2, "worker-0", &idle),
                thread(3, "worker-1", &idle),
                thread(4, "worker-2", &idle),
            ],
        );
        g.add_report(Some("h"), Some(8), [thread(5, "MainThread", &busy)]);
        let out = g.finish(Vec::new());
        assert_eq!(out.groups[0].frames[0].function.as_deref(), Some("idle"));
        assert_eq!((out.groups[0].count, out.groups[0].processes), (3, 1));
        assert!(out.groups[0].outlier);
        assert_eq!(
            headline(&out.groups[0]),
            "1 process (pid 7, host h) × 3 threads (worker-0, worker-1, worker-2) [outlier]"
        );
        assert_eq!((out.groups[1].count, out.groups[1].processes), (2, 2));
        assert!(!out.groups[1].outlier);
    }

    #[test]
    fn one_process_alone_has_no_outliers() {
        let a = [py("a", "x.py", 1)];
        let b = [py("b", "x.py", 2)];
        let mut g = Grouper::new(GroupBy::Line);
        g.add_report(
            None,
            Some(1),
            [thread(1, "MainThread", &a), thread(2, "t", &b)],
        );
        let out = g.finish(Vec::new());
        assert!(out.groups.iter().all(|g| !g.outlier));
    }

    #[test]
    fn native_frames_are_not_the_key_and_unreadable_frames_match() {
        let mut n1 = FrameReport::native(0x10, Some("sem_wait".into()), None, None);
        n1.address = Some(0x10);
        let n2 = FrameReport::native(0x20, Some("futex_wait".into()), None, None);
        let s1 = [
            n1,
            py("get", "q.py", 3),
            FrameReport::unreadable(0x1, "page not in core at 0x1".into()),
        ];
        let s2 = [
            n2,
            py("get", "q.py", 3),
            FrameReport::unreadable(0x2, "page not in core at 0x2".into()),
        ];
        let mut g = Grouper::new(GroupBy::Line);
        g.add_report(Some("h"), Some(1), [thread(1, "MainThread", &s1)]);
        g.add_report(Some("h"), Some(2), [thread(2, "MainThread", &s2)]);
        let out = g.finish(Vec::new());
        assert_eq!(out.groups.len(), 1);
        let grp = &out.groups[0];
        assert_eq!(grp.frames.len(), 2);
        assert_eq!(grp.frames[1].kind, FrameKind::Unreadable);
        // The reasons differ (their addresses): none is shown.
        assert_eq!(grp.frames[1].reason, None);
        let native = grp.native_frames.as_ref().unwrap();
        assert_eq!(native[0].function.as_deref(), Some("sem_wait"));
    }

    #[test]
    fn tasks_are_counted_as_tasks() {
        let chain = [py("Event.wait", "locks.py", 212), py("fetch", "a.py", 3)];
        let mut g = Grouper::new(GroupBy::Line);
        for pid in [1, 2] {
            let tasks = (0..2).map(|i| ThreadIn {
                task: Some(0x7000 + i),
                greenlet: None,
                wait: None,
                native_id: Some(pid as u64),
                name: Some(["fetch-0", "fetch-1"][i as usize]),
                native_name: None,
                frames: &chain,
                truncated: false,
                why: None,
                call: None,
            });
            g.add_report(Some("h"), Some(pid), tasks);
        }
        let out = g.finish(Vec::new());
        assert_eq!(out.groups.len(), 1);
        assert_eq!(out.groups[0].threads[0].task, Some(0x7000));
        assert_eq!(
            headline(&out.groups[0]),
            "2 processes × 4 tasks (fetch-0, fetch-1)"
        );
    }

    #[test]
    fn with_why_the_same_stack_in_two_states_is_two_groups() {
        let a = [py("get", "q.py", 3)];
        let mut g = Grouper::new(GroupBy::Line);
        for (pid, state) in [
            (1, StateWord::Running),
            (2, StateWord::Syscall),
            (3, StateWord::Syscall),
        ] {
            let mut t = thread(pid as u64, "MainThread", &a);
            t.why = Some(GroupWhy {
                state: Some(state),
                syscall: (state == StateWord::Syscall).then(|| "futex".into()),
                waiting: None,
            });
            g.add_report(Some("h"), Some(pid), [t]);
        }
        let out = g.finish(Vec::new());
        assert_eq!(out.groups.len(), 2);
        assert_eq!(
            headline(&out.groups[0]),
            "2 processes × MainThread [syscall: futex]"
        );
        assert_eq!(
            headline(&out.groups[1]),
            "1 process (pid 1, host h) × MainThread [running] [outlier]"
        );
    }

    #[test]
    fn a_truncated_stack_is_not_the_same_as_a_short_one() {
        let a = [py("f", "x.py", 1)];
        let mut g = Grouper::new(GroupBy::Line);
        g.add_report(Some("h"), Some(1), [thread(1, "MainThread", &a)]);
        let mut t = thread(2, "MainThread", &a);
        t.truncated = true;
        g.add_report(Some("h"), Some(2), [t]);
        let out = g.finish(Vec::new());
        assert_eq!(out.groups.len(), 2);
        assert_eq!(out.groups.iter().filter(|g| g.truncated).count(), 1);
    }
}
