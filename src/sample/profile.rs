//! A sampling profile (`record`): how many samples saw each thread's Python stack, written as
//! collapsed stacks (Brendan Gregg's "folded" lines, py-spy's `raw`) or as a speedscope file.
//!
//! A frame is `function (file:line)`, as py-spy writes it; stacks are root first. A sample of
//! a thread whose walk met a frame it could not read is torn: counted, never written.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::report::{FrameKind, ThreadReport};

/// Distinct frames (function, file, line) one profile names; past it, samples are dropped.
pub const MAX_FRAMES: usize = 100_000;
/// Distinct stacks, over every thread; past it, samples of new stacks are dropped.
pub const MAX_STACKS: usize = 100_000;

/// `speedscope`'s file format (speedscope's own `file-format-schema.json`).
const SPEEDSCOPE_SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

type FrameKey = (Arc<str>, Arc<str>, u32);

/// One thread's samples.
struct ThreadProfile {
    lwp: u64,
    name: Option<String>,
    /// Frame indexes, root first, and how many samples saw them; in the order first seen.
    stacks: Vec<(Vec<u32>, u64)>,
    index: HashMap<Vec<u32>, usize>,
}

/// The samples of one recording.
#[derive(Default)]
pub struct Profile {
    frames: Vec<FrameKey>,
    frame_index: HashMap<FrameKey, u32>,
    threads: Vec<ThreadProfile>,
    stacks: usize,
    /// Thread samples written, torn (left out), and dropped at a cap.
    pub written: u64,
    pub torn: u64,
    pub dropped: u64,
}

impl Profile {
    pub fn new() -> Profile {
        Profile::default()
    }

    /// One sample's threads; `counted` says which to count (those running, without `--idle`).
    pub fn add(&mut self, threads: &[ThreadReport], counted: &dyn Fn(&ThreadReport) -> bool) {
        for t in threads.iter().filter(|t| counted(t)) {
            let Some(keys) = frame_keys(t) else {
                self.torn += 1;
                continue;
            };
            if keys.is_empty() {
                continue;
            }
            match self.stack_of(keys) {
                Some(stack) => {
                    self.count(t, stack);
                    self.written += 1;
                }
                None => self.dropped += 1,
            }
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

    fn count(&mut self, t: &ThreadReport, stack: Vec<u32>) {
        let lwp = t.native_id.unwrap_or(0);
        let i = match self.threads.iter().position(|p| p.lwp == lwp) {
            Some(i) => i,
            None => {
                self.threads.push(ThreadProfile {
                    lwp,
                    name: t.any_name().map(str::to_string),
                    stacks: Vec::new(),
                    index: HashMap::new(),
                });
                self.threads.len() - 1
            }
        };
        let p = &mut self.threads[i];
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

    /// Each thread's samples written, in the order first seen: LWP, name, count.
    pub fn thread_samples(&self) -> Vec<(u64, Option<&str>, u64)> {
        self.threads
            .iter()
            .map(|p| (p.lwp, p.name.as_deref(), p.stacks.iter().map(|s| s.1).sum()))
            .collect()
    }

    /// `function (file:line)`.
    fn frame_name(&self, i: u32) -> String {
        let (function, file, line) = &self.frames[i as usize];
        format!("{function} ({file}:{line})")
    }

    /// One line per distinct stack, `root;...;leaf COUNT`, over every thread (the same stack
    /// in two threads is one line), the most samples first, then by the stack.
    pub fn collapsed(&self) -> String {
        let mut counts: HashMap<&[u32], u64> = HashMap::new();
        for p in &self.threads {
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
            .threads
            .iter()
            .map(|p| {
                let total: u64 = p.stacks.iter().map(|s| s.1).sum();
                let title = match &p.name {
                    Some(n) => format!("thread {} \"{n}\"", p.lwp),
                    None => format!("thread {}", p.lwp),
                };
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

/// The thread's Python frames, innermost first; None when the walk met one it could not read.
fn frame_keys(t: &ThreadReport) -> Option<Vec<FrameKey>> {
    let mut keys = Vec::new();
    for f in &t.frames {
        match f.kind {
            FrameKind::Unreadable => return None,
            FrameKind::Python => keys.push((f.function.clone()?, f.file.clone()?, f.line?)),
            FrameKind::Native | FrameKind::Jit => {}
        }
    }
    Some(keys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_support::{self, python_frame};
    use crate::report::FrameReport;

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
        );
        let mut torn = thread(1, vec![g()]);
        torn.frames
            .push(FrameReport::unreadable(0x10, "unmapped".into()));
        p.add(&[thread(1, vec![g(), main()]), torn], &all);
        // Not counted (idle): left out altogether.
        p.add(&[thread(3, vec![g()])], &|t| t.native_id != Some(3));
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
