//! The watchdog's rule (`pyunwind watch`, docs/report.md "Stalls: `watch`"): which threads of
//! one process are stalled, read from one sample to the next.
//!
//! A thread is quiet from one sample to the next when its Python stack (function, file and
//! line of every frame, [`stack_key`]) is the same and it did not run at all: its CPU time and
//! its time waiting for a CPU (/proc's `stat` and `schedstat`) and its context switches
//! (`status`) are the same. A thread that sleeps and wakes in a polling loop switches at each
//! wake, so it is never quiet, even when its CPU time (10 ms ticks) does not move. A thread is
//! stalled for S seconds when:
//!
//! - **blocked**: it has been quiet from sample to sample for S seconds, or
//! - **spinning**: its stack has not changed for S seconds and over them it was on CPU as
//!   `pid --why --for` calls a thread spinning ([`classify`]).
//!
//! Each stall is reported once: the thread is disarmed until its Python stack changes. Whether an idle thread counts is the caller's to say (the `--why` report knows it).

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use crate::model::{Progress, StateWord, ThreadReport};

use super::progress::{classify, cpu_share, stack_key, CpuReading, MAX_THREADS};

/// What /proc says of a thread at one sample.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Activity {
    pub cpu: Option<CpuReading>,
    /// Voluntary and involuntary context switches.
    pub switches: Option<u64>,
}

impl Activity {
    /// Whether the thread did nothing between `self` and `later`: both read, and equal.
    fn same_as(&self, later: &Activity) -> bool {
        self.cpu.is_some() && self.switches.is_some() && self == later
    }
}

/// How a thread is stalled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StallKind {
    /// It did not run at all.
    Blocked,
    /// It ran at one place.
    Spinning,
}

impl StallKind {
    pub fn word(self) -> &'static str {
        match self {
            StallKind::Blocked => "blocked",
            StallKind::Spinning => "spinning",
        }
    }
}

/// A stalled thread, by LWP, and for how long.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stall {
    pub lwp: u64,
    pub kind: StallKind,
    pub for_s: f64,
}

/// One thread's samples, as the rule needs them.
struct Track {
    /// Its stack at the last sample; None when that sample was torn (it ran under the read).
    stack: Option<u64>,
    /// The first sample with that stack: when, what /proc said then, and samples since.
    since: f64,
    since_cpu: Option<CpuReading>,
    same_samples: u64,
    /// The sample from which it has been quiet, if it is.
    quiet_since: Option<f64>,
    last: Activity,
    last_at: f64,
    /// Not reported since its stack last changed.
    armed: bool,
    /// The sample that last saw it.
    seen: u64,
}

impl Track {
    fn new(at: f64, stack: Option<u64>, now: Activity) -> Track {
        Track {
            stack,
            since: at,
            since_cpu: now.cpu,
            same_samples: 1,
            quiet_since: None,
            last: now,
            last_at: at,
            armed: true,
            seen: 0,
        }
    }

    /// The next sample, `at`: the thread's stack and what /proc says.
    fn step(&mut self, at: f64, stack: Option<u64>, now: Activity) {
        if stack.is_none() || stack != self.stack {
            *self = Track {
                seen: self.seen,
                ..Track::new(at, stack, now)
            };
            return;
        }
        self.same_samples += 1;
        if self.last.same_as(&now) {
            // It did not run since the previous sample: quiet from then.
            self.quiet_since.get_or_insert(self.last_at);
        } else {
            self.quiet_since = None;
        }
        self.last = now;
        self.last_at = at;
    }

    /// How the thread is stalled at `at`, and for how long; None when it is not.
    fn stall(&self, at: f64) -> Option<(StallKind, f64)> {
        if let Some(q) = self.quiet_since {
            return Some((StallKind::Blocked, at - q));
        }
        let window_s = at - self.since;
        let (a, b) = (self.since_cpu?, self.last.cpu?);
        let cpu_s = (b.cpu_s - a.cpu_s).max(0.0);
        let waited_s = a.waited_s.zip(b.waited_s).map(|(a, b)| (b - a).max(0.0));
        let p = Progress {
            window_s,
            samples: self.same_samples,
            torn: 0,
            cpu_s: Some(cpu_s),
            waited_s,
            cpu_share: cpu_share(cpu_s, window_s, waited_s),
            moved: false,
            stacks: 1,
        };
        (classify(&p) == Some(StateWord::Spinning)).then_some((StallKind::Spinning, window_s))
    }
}

/// The stall rule over one process's samples, thread by thread (by LWP).
pub struct StallWatch {
    stall_s: f64,
    tracks: HashMap<u64, Track>,
    samples: u64,
    /// Threads that began after the first sample, and that ended.
    pub came: u64,
    pub went: u64,
    /// Threads not followed, past [`MAX_THREADS`], at the last sample.
    pub untracked: u64,
}

impl StallWatch {
    /// A thread is reported once stalled for `stall_s` seconds.
    pub fn new(stall_s: f64) -> StallWatch {
        StallWatch {
            stall_s,
            tracks: HashMap::new(),
            samples: 0,
            came: 0,
            went: 0,
            untracked: 0,
        }
    }

    /// One sample, `at` seconds into the watch: every thread's stack, and what /proc says of
    /// each (by LWP, read as close to the stack as can be). Returns the threads whose stall
    /// reached `stall_s` at this sample, each then disarmed until it moves.
    pub fn observe(
        &mut self,
        at: f64,
        threads: &[ThreadReport],
        activity: &dyn Fn(u64) -> Activity,
    ) -> Vec<Stall> {
        self.samples += 1;
        self.untracked = 0;
        let first = self.samples == 1;
        let mut out = Vec::new();
        for t in threads {
            let Some(lwp) = t.native_id else { continue };
            let stack = stack_key(t);
            let now = activity(lwp);
            let full = self.tracks.len() >= MAX_THREADS;
            let track = match self.tracks.entry(lwp) {
                Entry::Occupied(e) => {
                    let track = e.into_mut();
                    track.step(at, stack, now);
                    track
                }
                Entry::Vacant(_) if full => {
                    self.untracked += 1;
                    continue;
                }
                Entry::Vacant(e) => {
                    self.came += u64::from(!first);
                    e.insert(Track::new(at, stack, now))
                }
            };
            track.seen = self.samples;
            if let Some((kind, for_s)) = track.stall(at).filter(|s| s.1 >= self.stall_s) {
                if track.armed {
                    track.armed = false;
                    out.push(Stall { lwp, kind, for_s });
                }
            }
        }
        let samples = self.samples;
        let before = self.tracks.len();
        self.tracks.retain(|_, t| t.seen == samples);
        self.went += (before - self.tracks.len()) as u64;
        out
    }

    /// The other threads stalled at the last sample (`at`), for any time: a report written
    /// for one stall names them too, and each is disarmed until it moves. In LWP order.
    pub fn companions(&mut self, at: f64, except: &[Stall]) -> Vec<Stall> {
        let mut out: Vec<Stall> = self
            .tracks
            .iter_mut()
            .filter(|(lwp, t)| t.armed && !except.iter().any(|s| s.lwp == **lwp))
            .filter_map(|(&lwp, t)| {
                let (kind, for_s) = t.stall(at).filter(|s| s.1 > 0.0)?;
                t.armed = false;
                Some(Stall { lwp, kind, for_s })
            })
            .collect();
        out.sort_by_key(|s| s.lwp);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_support::{python_frame, thread_of};

    fn thread(lwp: u64, function: &str, line: u32) -> ThreadReport {
        thread_of(lwp, vec![python_frame(function, "/app/w.py", line)])
    }

    /// Samples every 0.5 s, a stall at 2 s: thread 1 blocks at one place (it moves once, at
    /// 3 s, and blocks again); 2 sleeps and wakes at one place (a poller: its switches move);
    /// 3 spins at one place; 4 runs through two places at full CPU; 5 blocks from 1 s and
    /// ends at 4 s; 6 begins at 1 s.
    #[test]
    fn blocked_spinning_and_polling_threads() {
        let mut w = StallWatch::new(2.0);
        let mut fired = Vec::new();
        for i in 0..=14u32 {
            let at = f64::from(i) / 2.0;
            let mut threads = vec![
                thread(1, "wait", if at < 3.0 { 10 } else { 11 }),
                thread(2, "poll", 20),
                thread(3, "spin", 30),
                thread(4, "work", 40 + i % 2),
            ];
            if at < 4.0 {
                threads.push(thread(5, "later", 50));
            }
            if at >= 1.0 {
                threads.push(thread(6, "new", 60));
            }
            let activity = |lwp: u64| {
                let (cpu_s, switches) = match lwp {
                    2 => (0.0, u64::from(i)),
                    3 | 4 => (at, 0),
                    5 => (at.min(1.0), 0),
                    _ => (0.0, 0),
                };
                Activity {
                    cpu: Some(CpuReading {
                        cpu_s,
                        waited_s: Some(0.0),
                    }),
                    switches: Some(switches),
                }
            };
            for s in w.observe(at, &threads, &activity) {
                fired.push((at, s));
            }
        }
        let got: Vec<(f64, u64, StallKind, f64)> = fired
            .iter()
            .map(|(at, s)| (*at, s.lwp, s.kind, s.for_s))
            .collect();
        assert_eq!(
            got,
            [
                (2.0, 1, StallKind::Blocked, 2.0),
                (2.0, 3, StallKind::Spinning, 2.0),
                (3.0, 5, StallKind::Blocked, 2.0),
                (3.0, 6, StallKind::Blocked, 2.0),
                (5.0, 1, StallKind::Blocked, 2.0),
            ]
        );
        assert_eq!((w.came, w.went, w.untracked), (1, 1, 0));
    }

    #[test]
    fn companions_are_the_other_stalled_threads_once() {
        let mut w = StallWatch::new(1.0);
        let quiet = |_| Activity {
            cpu: Some(CpuReading {
                cpu_s: 0.0,
                waited_s: None,
            }),
            switches: Some(3),
        };
        let threads = [thread(1, "a", 1), thread(2, "b", 2)];
        assert!(w.observe(0.0, &threads, &quiet).is_empty());
        // Thread 2 blocks half a second after thread 1.
        let later = [thread(1, "a", 1), thread(2, "b", 3)];
        assert!(w.observe(0.5, &later, &quiet).is_empty());
        let fired = w.observe(1.0, &later, &quiet);
        assert_eq!(
            fired,
            [Stall {
                lwp: 1,
                kind: StallKind::Blocked,
                for_s: 1.0
            }]
        );
        assert_eq!(
            w.companions(1.0, &fired),
            [Stall {
                lwp: 2,
                kind: StallKind::Blocked,
                for_s: 0.5
            }]
        );
        // Both reported: neither again while they stay where they are.
        assert!(w.observe(1.5, &later, &quiet).is_empty());
        assert!(w.companions(1.5, &[]).is_empty());
        // Unreadable /proc: never quiet.
        let mut u = StallWatch::new(1.0);
        for at in [0.0, 1.0, 2.0] {
            assert!(u.observe(at, &threads, &|_| Activity::default()).is_empty());
        }
    }
}
