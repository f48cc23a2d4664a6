//! Progress over a window: each thread's samples folded into `threads[].progress`, and the
//! rule that reads it (docs/report.md, "Progress over a window"):
//!
//! | state | rule |
//! | --- | --- |
//! | `spinning` | on CPU at least [`SPINNING_CPU`] of its window, and its Python stack never moved |
//! | `busy` | on CPU at least [`BUSY_CPU`] of its window, and its Python stack moved |
//!
//! Its window there leaves out the time it was runnable but waited for a CPU that other
//! threads had ([`cpu_share`]): on a loaded machine a spinning thread still spins.
//!
//! A thread neither of them keeps the state and wait of the last sample (the report's). A
//! stack is the function, file and line of each Python frame; a sample whose walk met a frame
//! it could not read (the thread moved under the read) is torn: counted, and not a stack.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

use crate::model::{ErrorReport, FrameKind, Progress, Report, StateWord, ThreadReport};

/// Share of its window a thread must be on CPU, its stack never moving, to be `spinning`.
pub const SPINNING_CPU: f64 = 0.6;
/// Share of its window a thread must be on CPU, its stack moving, to be `busy`.
pub const BUSY_CPU: f64 = 0.1;
/// Fewer whole samples than this say nothing of progress.
pub const MIN_SAMPLES: u64 = 2;
/// Threads followed over one window; those seen after are counted in an error entry.
pub const MAX_THREADS: usize = 4_096;
/// Distinct stacks remembered per thread (their hashes): past it `stacks` is a lower bound.
pub const MAX_STACKS: usize = 10_000;

/// One thread's samples.
struct Track {
    first_at: f64,
    last_at: f64,
    /// The first and last CPU readings.
    first_cpu: Option<CpuReading>,
    last_cpu: Option<CpuReading>,
    samples: u64,
    torn: u64,
    first_stack: Option<u64>,
    moved: bool,
    stacks: HashSet<u64>,
    /// More distinct stacks were seen than `stacks` holds.
    more: bool,
}

impl Track {
    fn new(at: f64) -> Track {
        Track {
            first_at: at,
            last_at: at,
            first_cpu: None,
            last_cpu: None,
            samples: 0,
            torn: 0,
            first_stack: None,
            moved: false,
            stacks: HashSet::new(),
            more: false,
        }
    }

    fn progress(&self) -> Progress {
        let (cpu_s, waited_s) = match (self.first_cpu, self.last_cpu) {
            (Some(a), Some(b)) => (
                Some((b.cpu_s - a.cpu_s).max(0.0)),
                a.waited_s.zip(b.waited_s).map(|(a, b)| (b - a).max(0.0)),
            ),
            _ => (None, None),
        };
        let window_s = self.last_at - self.first_at;
        Progress {
            window_s,
            samples: self.samples,
            torn: self.torn,
            cpu_s,
            waited_s,
            cpu_share: cpu_s.and_then(|c| cpu_share(c, window_s, waited_s)),
            moved: self.moved,
            stacks: self.stacks.len() as u64 + u64::from(self.more),
        }
    }
}

/// What /proc says of a thread's time at one sample, in seconds since it began.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuReading {
    /// On CPU (user and system).
    pub cpu_s: f64,
    /// Runnable, waiting for a CPU; None where the kernel does not say.
    pub waited_s: Option<f64>,
}

/// The samples of one window, thread by thread (by LWP).
#[derive(Default)]
pub struct Tracker {
    tracks: HashMap<u64, Track>,
    /// Samples taken (each reads every thread).
    samples: u64,
    /// Seconds into the window of the first sample.
    start: Option<f64>,
    /// Threads not followed, past [`MAX_THREADS`].
    untracked: HashSet<u64>,
}

impl Tracker {
    pub fn new() -> Tracker {
        Tracker::default()
    }

    /// Samples taken so far.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// One sample, `at` seconds into the window: every thread's stack, and `cpu` its CPU
    /// seconds by LWP (read as close to the stack as can be).
    pub fn observe(
        &mut self,
        at: f64,
        threads: &[ThreadReport],
        cpu: &dyn Fn(u64) -> Option<CpuReading>,
    ) {
        self.samples += 1;
        self.start.get_or_insert(at);
        for t in threads {
            let Some(lwp) = t.native_id else { continue };
            if !self.tracks.contains_key(&lwp) && self.tracks.len() >= MAX_THREADS {
                if self.untracked.len() < MAX_THREADS {
                    self.untracked.insert(lwp);
                }
                continue;
            }
            let track = self.tracks.entry(lwp).or_insert_with(|| Track::new(at));
            track.last_at = at;
            if let Some(c) = cpu(lwp) {
                track.first_cpu.get_or_insert(c);
                track.last_cpu = Some(c);
            }
            let Some(stack) = stack_key(t) else {
                track.torn += 1;
                continue;
            };
            track.samples += 1;
            match track.first_stack {
                None => track.first_stack = Some(stack),
                Some(first) => track.moved |= first != stack,
            }
            if track.stacks.len() < MAX_STACKS {
                track.stacks.insert(stack);
            } else if !track.stacks.contains(&stack) {
                track.more = true;
            }
        }
    }

    /// `report` (the last sample's) with each thread's progress, the state the rule gives it,
    /// and an error entry for each thread that came or went during the window.
    pub fn finish(&self, report: &mut Report) {
        let start = self.start.unwrap_or(0.0);
        for t in &mut report.threads {
            let Some(track) = t.native_id.and_then(|l| self.tracks.get(&l)) else {
                continue;
            };
            let progress = track.progress();
            if track.first_at > start {
                report.errors.push(note(format!(
                    "thread {}: began {:.1} s into the window; its progress covers {:.1} s",
                    t.native_id.unwrap_or(0),
                    track.first_at - start,
                    progress.window_s
                )));
            }
            let word = classify(&progress);
            let why = t.why.get_or_insert_with(Default::default);
            if let Some(word) = word {
                // The window shows it running: a wait or an idle place at the last sample is
                // a moment of that.
                why.state = Some(word);
                why.waiting = None;
                why.idle = None;
            }
            why.progress = Some(progress);
        }
        let mut gone: Vec<(&u64, &Track)> = self
            .tracks
            .iter()
            .filter(|(lwp, _)| !report.threads.iter().any(|t| t.native_id == Some(**lwp)))
            .collect();
        gone.sort_by_key(|(lwp, _)| **lwp);
        for (lwp, track) in gone {
            report.errors.push(note(format!(
                "thread {lwp}: ended during the window, after {} samples over {:.1} s",
                track.samples + track.torn,
                track.last_at - track.first_at
            )));
        }
        if !self.untracked.is_empty() {
            report.errors.push(note(format!(
                "{} threads not followed: past the cap of {MAX_THREADS}",
                self.untracked.len()
            )));
        }
    }
}

fn note(what: String) -> ErrorReport {
    ErrorReport { address: 0, what }
}

/// The share of its window the thread was on CPU, out of the time a CPU was free for it: the
/// window less the time it waited, runnable, for one. None without CPU times or a window.
pub fn cpu_share(cpu: f64, window_s: f64, waited_s: Option<f64>) -> Option<f64> {
    let could_run = window_s - waited_s.unwrap_or(0.0);
    // /proc counts CPU time in ticks (10 ms): past the window by up to a tick or two.
    (could_run > 0.0).then(|| (cpu / could_run).min(1.0))
}

/// `spinning`, `busy` or None, by the rule of this module's table.
pub fn classify(p: &Progress) -> Option<StateWord> {
    if p.samples < MIN_SAMPLES || p.window_s <= 0.0 {
        return None;
    }
    let share = p.cpu_share?;
    if !p.moved && share >= SPINNING_CPU {
        Some(StateWord::Spinning)
    } else if p.moved && share >= BUSY_CPU {
        Some(StateWord::Busy)
    } else {
        None
    }
}

/// The hash of the thread's Python stack (function, file and line of each frame, innermost
/// first); None when the walk met a frame it could not read, or a Python frame without its
/// function or line: the sample is torn.
pub fn stack_key(t: &ThreadReport) -> Option<u64> {
    let mut h = DefaultHasher::new();
    for f in &t.frames {
        match f.kind {
            FrameKind::Unreadable => return None,
            FrameKind::Python => {
                (f.function.as_deref()?, f.file.as_deref(), f.line?).hash(&mut h);
            }
            FrameKind::Native | FrameKind::Jit => {}
        }
    }
    Some(h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{FrameReport, ThreadWhy, WaitKind, Waiting};
    use crate::report::test_support;

    fn frame(function: &str, line: u32) -> FrameReport {
        test_support::python_frame(function, "/app/spin.py", line)
    }

    fn thread(lwp: u64, frames: Vec<FrameReport>) -> ThreadReport {
        test_support::thread_of(lwp, frames)
    }

    fn last_report(threads: Vec<ThreadReport>) -> Report {
        test_support::report_of("3.12.1", 1, threads)
    }

    /// Samples 10 ms apart over 3 s: thread 1 spins (one place, 100% CPU), 2 moves between
    /// two lines at 50%, 3 sits in one place at 5% (blocked), 4 moves at 5% (a poller), 5 sits
    /// at 59% of the window but waits for a CPU 10% of it (65.6% of the time it could run),
    /// 6 sits at 55% (under the spin bar).
    #[test]
    fn the_rule_on_synthetic_samples() {
        let mut tr = Tracker::new();
        let shares = [
            (1, 1.0),
            (2, 0.5),
            (3, 0.05),
            (4, 0.05),
            (5, 0.59),
            (6, 0.55),
        ];
        for i in 0..=300u32 {
            let at = f64::from(i) / 100.0;
            let line = 10 + i % 2;
            let threads = vec![
                thread(1, vec![frame("spinner", 11), frame("main", 40)]),
                thread(2, vec![frame("work", line), frame("main", 40)]),
                thread(3, vec![frame("acquire", 20)]),
                thread(4, vec![frame("poll", line)]),
                thread(5, vec![frame("almost", 7)]),
                thread(6, vec![frame("under", 7)]),
            ];
            let cpu = |lwp: u64| {
                let share = shares.iter().find(|s| s.0 == lwp)?.1;
                // Thread 5 waits for a CPU 10% of the time: 59% of the rest is 65.6%.
                let waited_s = Some(if lwp == 5 { 0.1 * at } else { 0.0 });
                Some(CpuReading {
                    cpu_s: share * at,
                    waited_s,
                })
            };
            tr.observe(at, &threads, &cpu);
        }
        let mut threads = vec![
            thread(1, vec![frame("spinner", 11)]),
            thread(2, vec![frame("work", 10)]),
            thread(3, vec![frame("acquire", 20)]),
            thread(4, vec![frame("poll", 10)]),
            thread(5, vec![frame("almost", 7)]),
            thread(6, vec![frame("under", 7)]),
        ];
        let gil = Waiting {
            kind: WaitKind::Gil,
            object: None,
            type_name: None,
            owner: Some(2),
            frame: 0,
            on: None,
        };
        threads[0].why = Some(ThreadWhy {
            state: Some(StateWord::GilWait),
            waiting: Some(gil),
            ..Default::default()
        });
        threads[2].why = Some(ThreadWhy {
            state: Some(StateWord::Syscall),
            ..Default::default()
        });
        let mut r = last_report(threads);
        tr.finish(&mut r);
        let states: Vec<Option<StateWord>> = r
            .threads
            .iter()
            .map(|t| t.why.as_ref().and_then(|w| w.state))
            .collect();
        assert_eq!(
            states,
            [
                Some(StateWord::Spinning),
                Some(StateWord::Busy),
                Some(StateWord::Syscall),
                None,
                Some(StateWord::Spinning),
                None
            ]
        );
        let p = |i: usize| r.threads[i].why.as_ref().unwrap().progress.clone().unwrap();
        assert_eq!(
            p(0),
            Progress {
                window_s: 3.0,
                samples: 301,
                torn: 0,
                cpu_s: Some(3.0),
                waited_s: Some(0.0),
                cpu_share: Some(1.0),
                moved: false,
                stacks: 1,
            }
        );
        assert!(r.threads[0].why.as_ref().unwrap().waiting.is_none());
        assert_eq!((p(1).moved, p(1).stacks), (true, 2));
        assert_eq!((p(2).moved, p(2).stacks), (false, 1));
        assert!(r.errors.is_empty(), "{:?}", r.errors);
    }

    #[test]
    fn torn_samples_threads_that_come_and_go_and_the_stack_cap() {
        let mut tr = Tracker::new();
        let mut torn = thread(1, vec![frame("f", 1)]);
        torn.frames
            .push(FrameReport::unreadable(0x10, "unmapped".into()));
        let zero = CpuReading {
            cpu_s: 0.0,
            waited_s: None,
        };
        tr.observe(0.0, &[torn, thread(9, vec![frame("g", 1)])], &|_| {
            Some(zero)
        });
        for i in 1..=(MAX_STACKS as u32 + 5) {
            let at = f64::from(i) / 1000.0;
            tr.observe(
                at,
                &[thread(1, vec![frame("f", i)]), thread(2, vec![])],
                &|_| None,
            );
        }
        let mut r = last_report(vec![thread(1, vec![]), thread(2, vec![])]);
        tr.finish(&mut r);
        let p = r.threads[0].why.as_ref().unwrap().progress.clone().unwrap();
        assert_eq!(
            (p.torn, p.samples, p.moved),
            (1, MAX_STACKS as u64 + 5, true)
        );
        assert_eq!(p.stacks, MAX_STACKS as u64 + 1);
        // No CPU reading: no state.
        assert_eq!(p.cpu_s, Some(0.0));
        assert_eq!(r.threads[1].why.as_ref().unwrap().state, None);
        let what: Vec<&str> = r.errors.iter().map(|e| e.what.as_str()).collect();
        assert_eq!(
            what,
            [
                "thread 2: began 0.0 s into the window; its progress covers 10.0 s",
                "thread 9: ended during the window, after 1 samples over 0.0 s",
            ]
        );
    }
}
