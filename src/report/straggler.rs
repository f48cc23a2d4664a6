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
//! 4. **Whose code the text names.** The majority's place in the text is its innermost
//!    application frame: the innermost of its frames outside library code (the interpreter's
//!    own `lib/pythonX.Y`, `site-packages`, `dist-packages`, frozen modules). Where its
//!    threads' wait is in library code, the wait says which: a `native` wait its C function,
//!    another the library of the thread's innermost frame (`barrier (multiprocessing)`).
//!
//! Built from the tree's nodes and, per process, each thread's leaf: the reports themselves
//! are long gone (`merge` holds one at a time).

use crate::why::library::library_of;
use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Arc;

use serde::Serialize;

use super::group::{GroupFrame, GroupWhy};
use super::tree::{NodeKind, TreeBuilder};
use crate::model::{FrameKind, FrameReport, StateWord, WaitKind};

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
    /// A `native` wait's C function.
    call: Option<Arc<str>>,
    /// The library its innermost frame is in.
    library: Option<Arc<str>>,
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
    /// The index in `frames` of the innermost application frame, which the text names
    /// (0 when every frame is library code).
    pub frame: usize,
    /// `--why`: the majority's threads' states, most common first.
    pub waits: Vec<Wait>,
}

/// A state the majority's threads are in, and how many.
#[derive(Clone, Debug, Serialize)]
pub struct Wait {
    #[serde(flatten)]
    pub why: GroupWhy,
    /// A `native` wait's C function (`waiting.function`).
    pub call: Option<Arc<str>>,
    /// The library of the threads' innermost frame, when it is library code.
    pub library: Option<Arc<str>>,
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

    /// A thread of the current process: where [`TreeBuilder::add`] put it, its innermost
    /// frame and a `native` wait's C function.
    pub fn add(
        &mut self,
        (leaf, member): (u32, u32),
        why: Option<&GroupWhy>,
        innermost: Option<&FrameReport>,
        call: Option<&str>,
    ) {
        let call = call
            .filter(|_| why.is_some_and(|w| w.waiting == Some(WaitKind::Native)))
            .map(Arc::from);
        let library = innermost
            .filter(|f| f.kind == FrameKind::Python)
            .and_then(|f| library_of(f.file.as_deref()?))
            .map(Arc::from);
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
            p.threads.push(ThreadAt {
                leaf,
                member,
                why,
                call,
                library,
            });
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
                    match waits
                        .iter_mut()
                        .find(|w| w.why == *why && w.call == t.call && w.library == t.library)
                    {
                        Some(w) => w.count += 1,
                        None => waits.push(Wait {
                            why: why.clone(),
                            call: t.call.clone(),
                            library: t.library.clone(),
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
        let majority = majority_at.map(|m| {
            let frames: Vec<GroupFrame> = tree
                .path_up(m)
                .filter(|&n| is_frame(tree.node(n).kind))
                .map(|n| group_frame(tree, n))
                .collect();
            let frame = frames
                .iter()
                .position(|f| {
                    f.kind == FrameKind::Python
                        && f.file.as_deref().is_some_and(|p| library_of(p).is_none())
                })
                .unwrap_or(0);
            Majority {
                count: through[m as usize],
                frames,
                frame,
                waits,
            }
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
    if let Some(kind) = w.waiting {
        return Some(
            match kind {
                WaitKind::Sleep => "sleeping",
                WaitKind::Native => "in native code",
                WaitKind::Gil => "waiting for the GIL",
                WaitKind::Child => "waiting for a child",
                WaitKind::Socket => "on a socket",
                WaitKind::Pipe => "on a pipe",
                WaitKind::File => "on a file",
                WaitKind::Fd => "on a file descriptor",
                other => other.as_str(),
            }
            .to_string(),
        );
    }
    let words = match (w.state?, &w.syscall) {
        (StateWord::Syscall, Some(call)) => format!("in {call}"),
        (StateWord::Syscall, None) => "in a system call".to_string(),
        (StateWord::GilWait, _) => "waiting for the GIL".to_string(),
        (StateWord::Gc, _) => "collecting garbage".to_string(),
        (StateWord::LoopIdle, _) => "idle in its event loop".to_string(),
        (state, _) => state.as_str().to_string(),
    };
    Some(words)
}

/// A majority's state in a few words ([`why_words`]), then where in library code it is: a
/// `native` wait's C function (`in native code torch._C._EngineBase.run_backward`), else the
/// library of the threads' innermost frame (`barrier (multiprocessing)`).
fn wait_words(w: &Wait) -> Option<String> {
    let words = why_words(&w.why)?;
    Some(match (&w.call, &w.library) {
        (Some(call), _) => format!("{words} {call}"),
        (None, Some(lib)) => format!("{words} ({lib})"),
        (None, None) => words,
    })
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
            let words: Vec<(Option<String>, usize)> =
                m.waits.iter().map(|w| (wait_words(w), w.count)).collect();
            let verb = match m.waits.first() {
                Some(w) if w.why.state == Some(StateWord::Running) && w.why.waiting.is_none() => {
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
                m.frames
                    .get(m.frame)
                    .or(m.frames.first())
                    .map_or("?".to_string(), place)
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
mod tests;
