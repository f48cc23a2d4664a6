//! The straggler verdict of `--group --why` over several processes (`pid P…`, `--children`,
//! `core C…`, `merge --why`): where the majority of a job's ranks is, and which ranks are
//! elsewhere.
//!
//! The rule (docs/report.md, "The straggler verdict"):
//!
//! 1. **Which processes are ranks, and which thread of each.** A thread's *entry* is its
//!    outermost two Python frames, by function and file (`<module>` of train.py, then
//!    `main`). The job's entry is the one found in the most processes (ties: the one that is
//!    the first listed thread's, i.e. the main thread's, in the most processes; then the first
//!    seen). A process is a rank when one of its threads has that entry (a thread with a
//!    single frame matches on its one frame); its first such thread, in report order (the main
//!    thread first), is the one looked at. The others (a launcher, torchrun's agent,
//!    multiprocessing's resource tracker) are left out, and named.
//! 2. **Where the majority is.** The ranks' threads are laid over each other from their
//!    outermost frame in ([`super::tree`]); from the top, the branch that holds more than half
//!    of the ranks is followed as far as one does. The last frame of it is where the majority
//!    is: the innermost frame where the stacks part, not their whole stacks, which may differ
//!    a frame or two further in.
//! 3. **Who is elsewhere.** Every rank whose thread does not pass through that frame, named by
//!    host, pid and its frames from its innermost one out to where it leaves the majority's
//!    path.
//!
//! Built from the tree's nodes and, per process, each thread's leaf: the reports themselves
//! are long gone (`merge` holds one at a time).

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Arc;

use serde::Serialize;

use super::group::{GroupFrame, GroupWhy};
use super::tree::{NodeKind, TreeBuilder};
use super::FrameKind;

/// Outliers named in the text; the JSON lists all.
const MAX_OUTLIERS_NAMED: usize = 8;
/// Processes left out named in the text; the JSON lists all.
const MAX_LEFT_OUT_NAMED: usize = 8;

/// A thread as the verdict keeps it: where its path ends in the tree, which member of that
/// node it is, and its `--why` state (an index in [`Ranks::whys`]).
struct ThreadAt {
    leaf: u32,
    member: u32,
    why: Option<u32>,
}

struct Proc {
    host: Option<Arc<str>>,
    pid: Option<u32>,
    threads: Vec<ThreadAt>,
}

/// Every process's threads, as the tree placed them.
#[derive(Default)]
pub struct Ranks {
    procs: Vec<Proc>,
    whys: Vec<GroupWhy>,
    why_index: HashMap<GroupWhy, u32>,
}

/// `--group --why` over several processes: the majority and the outliers.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    /// How many processes were taken as the job's ranks.
    pub ranks: usize,
    /// Where more than half of the ranks are; null when no frame is shared by more than half.
    pub majority: Option<Majority>,
    /// The ranks that are not there, in report order.
    pub outliers: Vec<Outlier>,
    /// The processes that are no rank of the job (no thread starts as the ranks' do).
    pub left_out: Vec<LeftOut>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Majority {
    /// How many ranks pass through the majority's frame.
    pub count: usize,
    /// The majority's frame, then the frames out to the outermost, innermost first.
    pub frames: Vec<GroupFrame>,
    /// `--why`: the majority's threads' states, most common first.
    pub waits: Vec<Wait>,
}

/// A state the majority's threads are in, and how many.
#[derive(Clone, Debug, Serialize)]
pub struct Wait {
    #[serde(flatten)]
    pub why: GroupWhy,
    pub count: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct Outlier {
    pub host: Option<Arc<str>>,
    pub pid: Option<u32>,
    pub native_id: Option<u64>,
    pub name: Option<Arc<str>>,
    /// Its frames that are not the majority's, innermost first: from its innermost frame
    /// out to the one where it leaves the majority's path (its innermost frame alone when
    /// its whole stack is on that path, short of the majority's frame).
    pub frames: Vec<GroupFrame>,
    /// `--why`: its thread's `state`, `syscall` and `waiting` (a kind).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub why: Option<GroupWhy>,
}

#[derive(Clone, Debug, Serialize)]
pub struct LeftOut {
    pub host: Option<Arc<str>>,
    pub pid: Option<u32>,
}

/// (kind, function, file) of a frame of an entry.
type EntryFrame = (NodeKind, Option<Arc<str>>, Option<Arc<str>>);

/// A thread's outermost two frames (the second None for a one-frame stack).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Entry(EntryFrame, Option<EntryFrame>);

impl Entry {
    /// Whether a thread of entry `self` starts as the job's entry `job` does.
    fn matches(&self, job: &Entry) -> bool {
        self.0 == job.0 && (self.1.is_none() || self.1 == job.1)
    }
}

fn is_frame(kind: NodeKind) -> bool {
    matches!(kind, NodeKind::Python | NodeKind::Unreadable)
}

fn group_frame(tree: &TreeBuilder, i: u32) -> GroupFrame {
    let n = tree.node(i);
    let kind = match n.kind {
        NodeKind::Unreadable => FrameKind::Unreadable,
        _ => FrameKind::Python,
    };
    GroupFrame::new(kind, n.function.clone(), n.file.clone(), n.line, n.mixed)
}

impl Ranks {
    /// The next threads are one more process's.
    pub fn start_report(&mut self, host: Option<Arc<str>>, pid: Option<u32>) {
        self.procs.push(Proc {
            host,
            pid,
            threads: Vec::new(),
        });
    }

    /// A thread of the current process: where [`TreeBuilder::add`] put it.
    pub fn add(&mut self, (leaf, member): (u32, u32), why: Option<&GroupWhy>) {
        let why = why.map(|w| match self.why_index.get(w) {
            Some(&i) => i,
            None => {
                let i = self.whys.len() as u32;
                self.whys.push(w.clone());
                self.why_index.insert(w.clone(), i);
                i
            }
        });
        if let Some(p) = self.procs.last_mut() {
            p.threads.push(ThreadAt { leaf, member, why });
        }
    }

    fn entry(tree: &TreeBuilder, leaf: u32) -> Option<Entry> {
        let path: Vec<u32> = tree.path_up(leaf).collect();
        let frame = |i: u32| {
            let n = tree.node(i);
            is_frame(n.kind).then(|| (n.kind, n.function.clone(), n.file.clone()))
        };
        let first = frame(*path.last()?)?;
        let second = path.len().checked_sub(2).and_then(|i| frame(path[i]));
        Some(Entry(first, second))
    }

    /// The job's entry: found in the most processes, then the first thread's in the most,
    /// then the first seen; among two-frame entries, else one-frame ones.
    fn job_entry(entries: &[Vec<Option<Entry>>]) -> Option<Entry> {
        for two in [true, false] {
            // entry -> (processes, processes where it is the first thread's, first seen)
            let mut seen: HashMap<&Entry, (usize, usize, usize)> = HashMap::new();
            for threads in entries {
                let mut mine: Vec<&Entry> = Vec::new();
                for (k, e) in threads.iter().enumerate() {
                    let Some(e) = e.as_ref().filter(|e| e.1.is_some() == two) else {
                        continue;
                    };
                    let order = seen.len();
                    let s = seen.entry(e).or_insert((0, 0, order));
                    if !mine.contains(&e) {
                        mine.push(e);
                        s.0 += 1;
                    }
                    if k == 0 {
                        s.1 += 1;
                    }
                }
            }
            if let Some((e, _)) = seen
                .into_iter()
                .max_by_key(|(_, (n, first, order))| (*n, *first, std::cmp::Reverse(*order)))
            {
                return Some(e.clone());
            }
        }
        None
    }

    /// The verdict over the processes added; None with fewer than two.
    pub fn verdict(&self, tree: &TreeBuilder) -> Option<Verdict> {
        if self.procs.len() < 2 {
            return None;
        }
        let entries: Vec<Vec<Option<Entry>>> = self
            .procs
            .iter()
            .map(|p| {
                p.threads
                    .iter()
                    .map(|t| Self::entry(tree, t.leaf))
                    .collect()
            })
            .collect();
        let job = Self::job_entry(&entries);
        let mut ranks: Vec<(&Proc, &ThreadAt)> = Vec::new();
        let mut left_out = Vec::new();
        for (p, es) in self.procs.iter().zip(&entries) {
            let rank = job.as_ref().and_then(|job| {
                p.threads
                    .iter()
                    .zip(es)
                    .find(|&(_, e)| matches!(e, Some(e) if e.matches(job)))
            });
            match rank {
                Some((t, _)) => ranks.push((p, t)),
                None => left_out.push(LeftOut {
                    host: p.host.clone(),
                    pid: p.pid,
                }),
            }
        }
        // How many ranks pass through each node, and each counted node's children.
        let mut through = vec![0usize; tree.len()];
        for (_, t) in &ranks {
            for n in tree.path_up(t.leaf) {
                through[n as usize] += 1;
            }
        }
        let mut kids: HashMap<Option<u32>, Vec<u32>> = HashMap::new();
        for (i, &c) in through.iter().enumerate() {
            if c > 0 {
                let parent = tree.node(i as u32).parent;
                let parent = (parent != u32::MAX).then_some(parent);
                kids.entry(parent).or_default().push(i as u32);
            }
        }
        // Follow the branch of more than half of the ranks as far as one goes.
        let mut majority_at = None;
        let mut level = kids.get(&None);
        while let Some(best) = level.and_then(|l| {
            l.iter()
                .copied()
                .max_by_key(|&i| (through[i as usize], std::cmp::Reverse(i)))
        }) {
            if 2 * through[best as usize] <= ranks.len() {
                break;
            }
            majority_at = Some(best);
            level = kids.get(&Some(best));
        }
        let mut on_path = vec![false; tree.len()];
        if let Some(m) = majority_at {
            for n in tree.path_up(m) {
                on_path[n as usize] = true;
            }
        }
        let mut waits: Vec<Wait> = Vec::new();
        let mut outliers = Vec::new();
        for (p, t) in &ranks {
            let why = t.why.map(|w| &self.whys[w as usize]);
            let passes = majority_at.is_some_and(|m| tree.path_up(t.leaf).any(|n| n == m));
            if passes {
                if let Some(why) = why {
                    match waits.iter_mut().find(|w| w.why == *why) {
                        Some(w) => w.count += 1,
                        None => waits.push(Wait {
                            why: why.clone(),
                            count: 1,
                        }),
                    }
                }
                continue;
            }
            if majority_at.is_none() {
                continue;
            }
            let mut frames: Vec<GroupFrame> = tree
                .path_up(t.leaf)
                .take_while(|&n| !on_path[n as usize])
                .filter(|&n| is_frame(tree.node(n).kind))
                .map(|n| group_frame(tree, n))
                .collect();
            if frames.is_empty() && is_frame(tree.node(t.leaf).kind) {
                frames.push(group_frame(tree, t.leaf));
            }
            let member = &tree.node(t.leaf).members[t.member as usize];
            outliers.push(Outlier {
                host: p.host.clone(),
                pid: p.pid,
                native_id: member.native_id,
                name: member.name.clone(),
                frames,
                why: why.cloned(),
            });
        }
        // A stable sort keeps first-seen order among equals.
        waits.sort_by_key(|w| std::cmp::Reverse(w.count));
        let majority = majority_at.map(|m| Majority {
            count: through[m as usize],
            frames: tree
                .path_up(m)
                .filter(|&n| is_frame(tree.node(n).kind))
                .map(|n| group_frame(tree, n))
                .collect(),
            waits,
        });
        Some(Verdict {
            ranks: ranks.len(),
            majority,
            outliers,
            left_out,
        })
    }
}

/// A state in a few words: the kind of wait (`barrier`, `sleeping`, `in native code`), else
/// the thread state (`running`, `idle`, `in futex`); None when nothing is known.
pub fn why_words(w: &GroupWhy) -> Option<String> {
    if let Some(kind) = &w.waiting {
        return Some(
            match kind.as_str() {
                "sleep" => "sleeping",
                "native" => "in native code",
                "gil" => "waiting for the GIL",
                "child" => "waiting for a child",
                "socket" => "on a socket",
                "pipe" => "on a pipe",
                "file" => "on a file",
                "fd" => "on a file descriptor",
                other => other,
            }
            .to_string(),
        );
    }
    let words = match (w.state.as_deref()?, &w.syscall) {
        ("syscall", Some(call)) => format!("in {call}"),
        ("syscall", None) => "in a system call".to_string(),
        ("gil_wait", _) => "waiting for the GIL".to_string(),
        ("gc", _) => "collecting garbage".to_string(),
        ("loop_idle", _) => "idle in its event loop".to_string(),
        (state, _) => state.to_string(),
    };
    Some(words)
}

/// `all_reduce (train.py:41)`: the file by its base name.
pub(super) fn place(f: &GroupFrame) -> String {
    if f.kind == FrameKind::Unreadable {
        return "an unreadable frame".into();
    }
    let func = f.function.as_deref().unwrap_or("???");
    let file = f.file.as_deref().unwrap_or("???");
    let file = file.rsplit('/').next().unwrap_or(file);
    match f.line {
        Some(l) => format!("{func} ({file}:{l})"),
        None => format!("{func} ({file})"),
    }
}

/// `pid 4242 (host h3)`.
fn process(host: Option<&str>, pid: Option<u32>) -> String {
    let mut s = match pid {
        Some(p) => format!("pid {p}"),
        None => "pid ?".to_string(),
    };
    if let Some(h) = host {
        write!(s, " (host {h})").unwrap();
    }
    s
}

fn processes(n: usize) -> &'static str {
    if n == 1 {
        "process"
    } else {
        "processes"
    }
}

/// The verdict's lines: `7 of 8 processes wait in all_reduce (train.py:41): barrier; pid 4242
/// (host h3) is elsewhere: load_shard (data.py:17), sleeping`, then the processes left out.
pub fn render(v: &Verdict) -> String {
    let mut out = String::new();
    match &v.majority {
        None => writeln!(
            out,
            "No frame is shared by more than half of the {} {}",
            v.ranks,
            processes(v.ranks)
        )
        .unwrap(),
        Some(m) => {
            let words: Vec<(Option<String>, usize)> = m
                .waits
                .iter()
                .map(|w| (why_words(&w.why), w.count))
                .collect();
            let verb = match m.waits.first() {
                Some(w) if w.why.state.as_deref() == Some("running") && w.why.waiting.is_none() => {
                    "run in"
                }
                Some(w) if w.why.state.is_some() || w.why.waiting.is_some() => "wait in",
                _ => "are in",
            };
            write!(
                out,
                "{} of {} {} {verb} {}",
                m.count,
                v.ranks,
                processes(v.ranks),
                m.frames.first().map_or("?".to_string(), place)
            )
            .unwrap();
            let named: Vec<String> = words
                .iter()
                .filter_map(|(w, n)| w.as_ref().map(|w| (w, n)))
                .map(|(w, n)| {
                    if words.len() == 1 {
                        w.clone()
                    } else {
                        format!("{w} ({n})")
                    }
                })
                .collect();
            if !named.is_empty() {
                write!(out, ": {}", named.join(", ")).unwrap();
            }
            if v.outliers.is_empty() {
                out.push_str("; none is elsewhere");
            }
            for o in v.outliers.iter().take(MAX_OUTLIERS_NAMED) {
                write!(out, "; {} is elsewhere", process(o.host.as_deref(), o.pid)).unwrap();
                if let Some(f) = o.frames.first() {
                    write!(out, ": {}", place(f)).unwrap();
                }
                if let Some(w) = o.why.as_ref().and_then(why_words) {
                    write!(out, ", {w}").unwrap();
                }
            }
            if v.outliers.len() > MAX_OUTLIERS_NAMED {
                write!(
                    out,
                    "; {} more {} elsewhere",
                    v.outliers.len() - MAX_OUTLIERS_NAMED,
                    if v.outliers.len() - MAX_OUTLIERS_NAMED == 1 {
                        "is"
                    } else {
                        "are"
                    }
                )
                .unwrap();
            }
            out.push('\n');
        }
    }
    if !v.left_out.is_empty() {
        let mut named: Vec<String> = v
            .left_out
            .iter()
            .take(MAX_LEFT_OUT_NAMED)
            .map(|l| process(l.host.as_deref(), l.pid))
            .collect();
        if v.left_out.len() > MAX_LEFT_OUT_NAMED {
            named.push(format!("{} more", v.left_out.len() - MAX_LEFT_OUT_NAMED));
        }
        writeln!(
            out,
            "{} other {} not counted as {} (no thread starts as the ranks' do): {}",
            v.left_out.len(),
            processes(v.left_out.len()),
            if v.left_out.len() == 1 {
                "a rank"
            } else {
                "ranks"
            },
            named.join(", ")
        )
        .unwrap();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::group::{GroupBy, Member};
    use crate::report::test_support::python_frame as py;
    use crate::report::FrameReport;

    fn why(state: &str, waiting: Option<&str>) -> GroupWhy {
        GroupWhy {
            state: Some(state.into()),
            syscall: None,
            waiting: waiting.map(str::to_string),
        }
    }

    struct Job {
        tree: TreeBuilder,
        ranks: Ranks,
    }

    impl Job {
        fn new(by: GroupBy) -> Self {
            Job {
                tree: TreeBuilder::new(by),
                ranks: Ranks::default(),
            }
        }

        /// A process: its threads' (name, innermost-first frames, why).
        fn process(&mut self, pid: u32, threads: &[(&str, &[FrameReport], Option<GroupWhy>)]) {
            self.tree.start_report();
            self.ranks.start_report(Some("h".into()), Some(pid));
            for (k, (name, frames, why)) in threads.iter().enumerate() {
                let m = Member::thread(
                    Some("h".into()),
                    Some(pid),
                    None,
                    Some(pid as u64 * 10 + k as u64),
                    Some((*name).into()),
                );
                let at = self.tree.add(frames, false, m);
                self.ranks.add(at, why.as_ref());
            }
        }

        fn verdict(&self) -> Verdict {
            self.ranks.verdict(&self.tree).unwrap()
        }
    }

    fn funcs(frames: &[GroupFrame]) -> Vec<&str> {
        frames
            .iter()
            .map(|f| f.function.as_deref().unwrap())
            .collect()
    }

    fn rank(inner: &[FrameReport]) -> Vec<FrameReport> {
        let mut v = inner.to_vec();
        v.push(py("main", "t.py", 60));
        v.push(py("<module>", "t.py", 70));
        v
    }

    #[test]
    fn the_majority_is_where_the_stacks_part_and_the_straggler_is_named() {
        // Even ranks wait on one line of all_reduce's callee, odd ranks on another: below the
        // frame where the straggler leaves, they may differ.
        let even = rank(&[
            py("wait_even", "d.py", 5),
            py("all_reduce", "d.py", 12),
            py("step", "t.py", 41),
        ]);
        let odd = rank(&[
            py("wait_odd", "d.py", 8),
            py("all_reduce", "d.py", 12),
            py("step", "t.py", 41),
        ]);
        let load = rank(&[py("load_shard", "data.py", 17), py("step", "t.py", 38)]);
        let launcher = [
            py("wait_all", "launch.py", 9),
            py("<module>", "launch.py", 20),
        ];
        let mut job = Job::new(GroupBy::Line);
        job.process(
            100,
            &[(
                "MainThread",
                &launcher[..],
                Some(why("syscall", Some("child"))),
            )],
        );
        for pid in 1..=6u32 {
            let (frames, w) = match pid {
                4 => (&load, why("syscall", Some("sleep"))),
                p if p % 2 == 0 => (&even, why("syscall", Some("barrier"))),
                _ => (&odd, why("syscall", Some("barrier"))),
            };
            // A helper thread in each rank: not the rank's thread.
            let helper = [
                py("run", "threading.py", 5),
                py("_bootstrap", "threading.py", 9),
            ];
            job.process(
                pid,
                &[
                    ("MainThread", &frames[..], Some(w)),
                    ("helper", &helper[..], None),
                ],
            );
        }
        let v = job.verdict();
        assert_eq!(v.ranks, 6);
        let m = v.majority.as_ref().unwrap();
        assert_eq!(m.count, 5);
        assert_eq!(funcs(&m.frames), ["all_reduce", "step", "main", "<module>"]);
        assert_eq!(m.frames[1].line, Some(41));
        assert_eq!(m.waits.len(), 1);
        assert_eq!(m.waits[0].count, 5);
        assert_eq!(v.outliers.len(), 1);
        let o = &v.outliers[0];
        assert_eq!(
            (o.pid, o.native_id, o.name.as_deref()),
            (Some(4), Some(40), Some("MainThread"))
        );
        assert_eq!(funcs(&o.frames), ["load_shard", "step"]);
        assert_eq!(o.frames[1].line, Some(38));
        assert_eq!(v.left_out.len(), 1);
        assert_eq!(v.left_out[0].pid, Some(100));
        assert_eq!(
            render(&v),
            "5 of 6 processes wait in all_reduce (d.py:12): barrier; pid 4 (host h) is \
             elsewhere: load_shard (data.py:17), sleeping\n\
             1 other process not counted as a rank (no thread starts as the ranks' do): \
             pid 100 (host h)\n"
        );
    }

    #[test]
    fn a_rank_short_of_the_majority_frame_is_elsewhere_at_its_innermost_frame() {
        let at = rank(&[py("barrier", "d.py", 3), py("step", "t.py", 41)]);
        let short = rank(&[py("step", "t.py", 41)]);
        let mut job = Job::new(GroupBy::Line);
        for pid in 1..=3 {
            let frames = if pid == 3 { &short } else { &at };
            job.process(pid, &[("MainThread", &frames[..], None)]);
        }
        let v = job.verdict();
        assert_eq!(funcs(&v.majority.as_ref().unwrap().frames)[0], "barrier");
        assert_eq!(funcs(&v.outliers[0].frames), ["step"]);
        assert!(render(&v).starts_with(
            "2 of 3 processes are in barrier (d.py:3); pid 3 (host h) is elsewhere: step (t.py:41)\n"
        ));
    }

    #[test]
    fn no_majority_and_no_outliers() {
        let a = rank(&[py("a", "t.py", 1)]);
        let b = rank(&[py("b", "t.py", 2)]);
        let mut job = Job::new(GroupBy::Line);
        job.process(1, &[("MainThread", &a[..], None)]);
        job.process(2, &[("MainThread", &b[..], None)]);
        let v = job.verdict();
        // Both share main: the majority is there, and nobody is elsewhere.
        assert_eq!(funcs(&v.majority.as_ref().unwrap().frames)[0], "main");
        assert!(v.outliers.is_empty());
        assert_eq!(
            render(&v),
            "2 of 2 processes are in main (t.py:60); none is elsewhere\n"
        );
        let mut job = Job::new(GroupBy::Line);
        job.process(1, &[("MainThread", &[py("x", "a.py", 1)][..], None)]);
        job.process(2, &[("MainThread", &[py("x", "a.py", 2)][..], None)]);
        let v = job.verdict();
        assert!(v.majority.is_none());
        assert_eq!(
            render(&v),
            "No frame is shared by more than half of the 2 processes\n"
        );
    }

    #[test]
    fn one_process_has_no_verdict_and_mixed_states_are_counted() {
        let f = rank(&[py("f", "t.py", 1)]);
        let mut job = Job::new(GroupBy::Line);
        job.process(1, &[("MainThread", &f[..], Some(why("running", None)))]);
        assert!(job.ranks.verdict(&job.tree).is_none());
        job.process(
            2,
            &[("MainThread", &f[..], Some(why("syscall", Some("lock"))))],
        );
        job.process(
            3,
            &[("MainThread", &f[..], Some(why("syscall", Some("lock"))))],
        );
        let v = job.verdict();
        assert_eq!(
            render(&v),
            "3 of 3 processes wait in f (t.py:1): lock (2), running (1); none is elsewhere\n"
        );
    }
}
