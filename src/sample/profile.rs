//! A sampling profile (`record`): how many samples saw each thread's Python stack, written as
//! collapsed stacks (Brendan Gregg's "folded" lines, py-spy's `raw`) or as a speedscope file.
//!
//! A frame is `function (file:line)`, as py-spy writes it; stacks are root first. A sample of
//! a thread whose walk met a frame it could not read is torn: counted, never written.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::model::{FrameKind, FrameReport, ThreadReport};

/// Distinct frames (function, file, line) one profile names; past it, samples are dropped.
pub const MAX_FRAMES: usize = 100_000;
/// Distinct stacks, over every thread; past it, samples of new stacks are dropped.
pub const MAX_STACKS: usize = 100_000;

/// `speedscope`'s file format (speedscope's own `file-format-schema.json`).
const SPEEDSCOPE_SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

pub(super) type FrameKey = (Arc<str>, Arc<str>, u32);

/// What a stack belongs to: a thread, or with `record --async` an asyncio task, with
/// `--greenlets` a greenlet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnerKind {
    Thread,
    Task,
    Greenlet,
}

/// Whose samples: a thread (its LWP), a task or a greenlet (the object's address), with its
/// name; `pid` with `record --children`, where each process's stacks are under a
/// `process PID` root frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub kind: OwnerKind,
    pub id: u64,
    pub name: Option<String>,
    pub pid: Option<i32>,
}

impl Owner {
    /// A thread's, named as the report names it.
    pub fn thread(t: &ThreadReport, pid: Option<i32>) -> Owner {
        Owner {
            kind: OwnerKind::Thread,
            id: t.native_id.unwrap_or(0),
            name: t.any_name().map(str::to_string),
            pid,
        }
    }

    /// speedscope's profile name: `thread 4242 "worker"`, `task 0x7f.. "fetch"`, `greenlet
    /// 0x7f..`, after `process PID` with `--children`.
    fn title(&self) -> String {
        let mut t = match self.kind {
            OwnerKind::Thread => format!("thread {}", self.id),
            OwnerKind::Task => format!("task {:#x}", self.id),
            OwnerKind::Greenlet => format!("greenlet {:#x}", self.id),
        };
        if let Some(n) = &self.name {
            t += &format!(" \"{n}\"");
        }
        match self.pid {
            Some(pid) => format!("process {pid} {t}"),
            None => t,
        }
    }
}

/// One owner's samples.
struct Track {
    owner: Owner,
    /// Frame indexes, root first, and how many samples saw them; in the order first seen.
    stacks: Vec<(Vec<u32>, u64)>,
    index: HashMap<Vec<u32>, usize>,
}

/// The samples of one recording.
#[derive(Default)]
pub struct Profile {
    frames: Vec<FrameKey>,
    frame_index: HashMap<FrameKey, u32>,
    tracks: Vec<Track>,
    stacks: usize,
    /// Stack samples written, torn (left out), and dropped at a cap.
    pub written: u64,
    pub torn: u64,
    pub dropped: u64,
}

impl Profile {
    pub fn new() -> Profile {
        Profile::default()
    }

    /// One sample's threads; `counted` says which to count (those running, without `--idle`);
    /// `pid` with `--children`.
    pub fn add(
        &mut self,
        threads: &[ThreadReport],
        counted: &dyn Fn(&ThreadReport) -> bool,
        pid: Option<i32>,
    ) {
        for t in threads.iter().filter(|t| counted(t)) {
            self.add_stack(&Owner::thread(t, pid), &t.frames);
        }
    }

    /// One sample of one owner's stack (`frames` innermost first): written, or counted torn
    /// when a frame could not be read, or dropped at a cap. An empty stack is left out.
    pub fn add_stack(&mut self, owner: &Owner, frames: &[FrameReport]) {
        let Some(mut keys) = frame_keys(frames) else {
            self.torn += 1;
            return;
        };
        if keys.is_empty() {
            return;
        }
        if let Some(pid) = owner.pid {
            keys.push((format!("process {pid}").into(), "".into(), 0));
        }
        match self.stack_of(keys) {
            Some(stack) => {
                self.count(owner, stack);
                self.written += 1;
            }
            None => self.dropped += 1,
        }
    }

    /// The stack as frame indexes, root first; None past [`MAX_FRAMES`].
    fn stack_of(&mut self, keys: Vec<FrameKey>) -> Option<Vec<u32>> {
        keys.into_iter()
            .rev()
            .map(|k| match self.frame_index.get(&k) {
                Some(&i) => Some(i),
                None if self.frames.len() < MAX_FRAMES => {
                    let i = self.frames.len() as u32;
                    self.frames.push(k.clone());
                    self.frame_index.insert(k, i);
                    Some(i)
                }
                None => None,
            })
            .collect()
    }

    fn count(&mut self, owner: &Owner, stack: Vec<u32>) {
        let same = |o: &Owner| o.kind == owner.kind && o.id == owner.id && o.pid == owner.pid;
        let i = match self.tracks.iter().position(|p| same(&p.owner)) {
            Some(i) => i,
            None => {
                self.tracks.push(Track {
                    owner: owner.clone(),
                    stacks: Vec::new(),
                    index: HashMap::new(),
                });
                self.tracks.len() - 1
            }
        };
        let p = &mut self.tracks[i];
        match p.index.get(&stack) {
            Some(&j) => p.stacks[j].1 += 1,
            None if self.stacks < MAX_STACKS => {
                self.stacks += 1;
                p.index.insert(stack.clone(), p.stacks.len());
                p.stacks.push((stack, 1));
            }
            None => self.dropped += 1,
        }
    }

    /// Each owner's samples written, in the order first seen.
    pub fn owner_samples(&self) -> Vec<(&Owner, u64)> {
        self.tracks
            .iter()
            .map(|p| (&p.owner, p.stacks.iter().map(|s| s.1).sum()))
            .collect()
    }

    /// Every frame, by index: (function, file, line).
    pub(super) fn frames(&self) -> &[FrameKey] {
        &self.frames
    }

    /// Each owner with its stacks (frame indexes, root first) and their counts.
    pub(super) fn owners(&self) -> impl Iterator<Item = (&Owner, &[(Vec<u32>, u64)])> {
        self.tracks.iter().map(|p| (&p.owner, &p.stacks[..]))
    }

    /// `function (file:line)`; a frame with no line (a native one) `function (file)`, one
    /// with no file (the `process PID` root) its name alone.
    fn frame_name(&self, i: u32) -> String {
        match &self.frames[i as usize] {
            (function, file, _) if file.is_empty() => function.to_string(),
            (function, file, 0) => format!("{function} ({file})"),
            (function, file, line) => format!("{function} ({file}:{line})"),
        }
    }

    /// One line per distinct stack, `root;...;leaf COUNT`, over every thread (the same stack
    /// in two threads is one line), the most samples first, then by the stack.
    pub fn collapsed(&self) -> String {
        let mut counts: HashMap<&[u32], u64> = HashMap::new();
        for p in &self.tracks {
            for (stack, n) in &p.stacks {
                *counts.entry(stack).or_default() += n;
            }
        }
        let mut lines: Vec<(String, u64)> = counts
            .into_iter()
            .map(|(stack, n)| {
                let names: Vec<String> = stack.iter().map(|&i| self.frame_name(i)).collect();
                (names.join(";"), n)
            })
            .collect();
        lines.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let mut out = String::new();
        for (stack, n) in lines {
            writeln!(out, "{stack} {n}").unwrap();
        }
        out
    }

    /// speedscope's file: the frames shared, one `sampled` profile per thread (in the order
    /// first seen), each distinct stack once with its count as its weight (unit `none`:
    /// samples).
    pub fn speedscope(&self, name: &str) -> Value {
        let frames: Vec<Value> = self
            .frames
            .iter()
            .map(|(function, file, line)| json!({"name": &**function, "file": &**file, "line": line}))
            .collect();
        let profiles: Vec<Value> = self
            .tracks
            .iter()
            .map(|p| {
                let total: u64 = p.stacks.iter().map(|s| s.1).sum();
                let title = p.owner.title();
                json!({
                    "type": "sampled",
                    "name": title,
                    "unit": "none",
                    "startValue": 0,
                    "endValue": total,
                    "samples": p.stacks.iter().map(|s| &s.0).collect::<Vec<_>>(),
                    "weights": p.stacks.iter().map(|s| s.1).collect::<Vec<_>>(),
                })
            })
            .collect();
        json!({
            "$schema": SPEEDSCOPE_SCHEMA,
            "name": name,
            "exporter": concat!("pyunwind ", env!("CARGO_PKG_VERSION")),
            "activeProfileIndex": 0,
            "shared": {"frames": frames},
            "profiles": profiles,
        })
    }
}

/// A stack's frames as keys, innermost first; None when the walk met a frame it could not
/// read. Python frames are (function, file, line); a native one (`--native`) is its function
/// (else its module and offset, else its PC) in its source file where DWARF gave one, else in
/// its module, with no line (0) when none is known.
fn frame_keys(frames: &[FrameReport]) -> Option<Vec<FrameKey>> {
    let mut keys = Vec::with_capacity(frames.len());
    for f in frames {
        match f.kind {
            FrameKind::Unreadable => return None,
            FrameKind::Python => keys.push((f.function.clone()?, f.file.clone()?, f.line?)),
            FrameKind::Native | FrameKind::Jit => {
                let function = match (&f.function, f.module(), f.offset()) {
                    (Some(name), ..) => name.clone(),
                    (None, Some(m), Some(o)) => format!("{m}+{o:#x}").into(),
                    (None, ..) => format!("{:#x}", f.address.unwrap_or(0)).into(),
                };
                let file = match (&f.file, f.module()) {
                    (Some(file), _) => file.clone(),
                    (None, Some(m)) => m.into(),
                    (None, None) => "".into(),
                };
                keys.push((function, file, f.line.unwrap_or(0)));
            }
        }
    }
    Some(keys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_support::{self, python_frame};

    fn thread(lwp: u64, frames: Vec<FrameReport>) -> ThreadReport {
        test_support::thread_of(lwp, frames)
    }

    #[test]
    fn collapsed_and_speedscope_of_three_samples() {
        let f = || python_frame("f", "/a.py", 3);
        let g = || python_frame("g", "/a.py", 7);
        let main = || python_frame("main", "/a.py", 10);
        let mut p = Profile::new();
        let all = |_: &ThreadReport| true;
        p.add(
            &[thread(1, vec![f(), main()]), thread(2, vec![f(), main()])],
            &all,
            None,
        );
        let mut torn = thread(1, vec![g()]);
        torn.frames
            .push(FrameReport::unreadable(0x10, "unmapped".into()));
        p.add(&[thread(1, vec![g(), main()]), torn], &all, None);
        // Not counted (idle): left out altogether.
        p.add(&[thread(3, vec![g()])], &|t| t.native_id != Some(3), None);
        assert_eq!(
            p.collapsed(),
            "main (/a.py:10);f (/a.py:3) 2\nmain (/a.py:10);g (/a.py:7) 1\n"
        );
        assert_eq!((p.written, p.torn, p.dropped), (3, 1, 0));
        let s = p.speedscope("pid 1");
        assert_eq!(s["$schema"], SPEEDSCOPE_SCHEMA);
        assert_eq!(
            s["shared"]["frames"],
            json!([
                {"name": "main", "file": "/a.py", "line": 10},
                {"name": "f", "file": "/a.py", "line": 3},
                {"name": "g", "file": "/a.py", "line": 7},
            ])
        );
        assert_eq!(s["profiles"][0]["name"], "thread 1 \"t1\"");
        assert_eq!(s["profiles"][0]["samples"], json!([[0, 1], [0, 2]]));
        assert_eq!(s["profiles"][0]["weights"], json!([1, 1]));
        assert_eq!(s["profiles"][1]["samples"], json!([[0, 1]]));
        assert_eq!(s["profiles"][1]["endValue"], 1);
    }
}
