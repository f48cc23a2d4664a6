//! The sampling loop of `pid --why --for`: every thread's Python stack, read at a steady rate
//! while the target runs (process_vm_readv: nothing is stopped), and each thread's CPU time
//! from /proc, folded into a [`Tracker`].

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::cpython::Remembered;
use crate::error::{Error, Result};
use crate::memory::{proc_cpu_seconds, proc_run_queue_seconds, process_alive};
use crate::model::{ErrorReport, Report};
use crate::session::{self, Session};
use crate::target::Target;

use super::progress::{CpuReading, Tracker};

/// `--rate`'s default, as py-spy's.
pub const DEFAULT_RATE_HZ: f64 = 100.0;
/// Above this a sample (a fresh snapshot of every thread, about a millisecond) cannot keep up.
pub const MAX_RATE_HZ: f64 = 1_000.0;
/// Samples of one window: `--for` times `--rate` past it is refused before anything is read.
pub const MAX_SAMPLES: u64 = 100_000;

/// How long and how often to sample.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    pub seconds: f64,
    pub rate_hz: f64,
}

impl Plan {
    /// The plan of `--for SECONDS --rate HZ`, or a usage error saying what is wrong with it.
    pub fn new(seconds: f64, rate_hz: f64) -> Result<Plan> {
        if !(seconds.is_finite() && seconds > 0.0) {
            return Err(Error::Usage(format!(
                "--for {seconds}: a window of more than 0 seconds"
            )));
        }
        if !(rate_hz.is_finite() && rate_hz > 0.0 && rate_hz <= MAX_RATE_HZ) {
            return Err(Error::Usage(format!(
                "--rate {rate_hz}: more than 0 and at most {MAX_RATE_HZ} samples a second"
            )));
        }
        let plan = Plan { seconds, rate_hz };
        if plan.ticks() >= MAX_SAMPLES {
            return Err(Error::Usage(format!(
                "--for {seconds} at --rate {rate_hz} is over {MAX_SAMPLES} samples: lower \
                 --rate or --for"
            )));
        }
        Ok(plan)
    }

    /// Samples taken in the loop; the report made at the window's end is one more.
    fn ticks(&self) -> u64 {
        (self.seconds * self.rate_hz).floor() as u64
    }
}

/// How a run of samples went.
pub struct Run {
    started: Instant,
    /// Samples read.
    pub taken: u64,
    /// Seconds into the window at which the process was found gone.
    pub exited: Option<f64>,
    /// Samples that could not be read at all, and the last reason.
    pub failed: u64,
    pub last_failure: Option<String>,
    /// [`run_while`]: seconds into the window at which its check failed.
    pub stopped: Option<f64>,
}

impl Run {
    /// Seconds since the window began.
    pub fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}

/// A window sampled for `--why --for`.
pub struct Watched {
    pub pid: i32,
    pub tracker: Tracker,
    pub run: Run,
    /// The last sample read, with its session: the report when the process exits before the
    /// window's end.
    pub last: Option<(Session, Report)>,
}

impl Watched {
    /// `report`, made at the window's end (`at_end`: it is one more sample, else it is the
    /// last sample's), with each thread's progress and state, and what went wrong.
    pub fn conclude(&mut self, report: &mut Report, at_end: bool) {
        if at_end {
            let pid = self.pid as u32;
            let at = self.run.elapsed();
            self.tracker
                .observe(at, &report.threads, &|lwp| cpu_reading(pid, lwp));
        }
        self.tracker.finish(report);
        let note = |what| ErrorReport { address: 0, what };
        if self.run.failed > 0 {
            report.errors.push(note(format!(
                "{} of {} samples could not be read (the last: {})",
                self.run.failed,
                self.run.failed + self.tracker.samples(),
                self.run.last_failure.as_deref().unwrap_or("?")
            )));
        }
        if let Some(at) = self.run.exited {
            report.errors.push(note(format!(
                "process {} exited {at:.1} s into the window, after {} samples: this is its \
                 last sample",
                self.pid,
                self.tracker.samples()
            )));
        }
    }
}

/// Samples process `pid` (in which `first` found CPython) over the plan's window for
/// `--why --for`.
pub fn watch(pid: i32, plan: &Plan, first: &Session) -> Watched {
    let mut tracker = Tracker::new();
    let mut last = None;
    let run = run(pid, plan, first, &mut |at, s, r| {
        tracker.observe(at, &r.threads, &|lwp| cpu_reading(pid as u32, lwp));
        // A process being killed shows no thread at its end: not the one to report.
        if !r.threads.is_empty() {
            last = Some((s, r));
        }
    });
    Watched {
        pid,
        tracker,
        run,
        last,
    }
}

/// Samples process `pid` (in which `first` found CPython) at the plan's rate, handing each
/// sample to `on` with the seconds into the window it was taken at, until the window ends or
/// the process exits; returns at the window's end.
pub fn run(
    pid: i32,
    plan: &Plan,
    first: &Session,
    on: &mut dyn FnMut(f64, Session, Report),
) -> Run {
    run_while(pid, plan, first, &|| true, &mut || None, on)
}

/// [`run`], stopped at the first tick before which `same` is false, and with a sample after
/// which it is false left out: `record`'s check that the process is still the program it
/// began as (one that `exec`s mid-recording is another: its stacks never mix with the first
/// one's). [`Run::stopped`] says when. `only`, asked before each sample, names the threads
/// (by LWP) whose frames it walks ([`Session::walk_only`]); None: all.
pub fn run_while(
    pid: i32,
    plan: &Plan,
    first: &Session,
    same: &dyn Fn() -> bool,
    only: &mut dyn FnMut() -> Option<HashSet<u64>>,
    on: &mut dyn FnMut(f64, Session, Report),
) -> Run {
    let remembered = first.remembered();
    let mut w = Run {
        started: Instant::now(),
        taken: 0,
        exited: None,
        failed: 0,
        last_failure: None,
        stopped: None,
    };
    let period = Duration::from_secs_f64(1.0 / plan.rate_hz);
    let mut due = w.started;
    for _ in 0..plan.ticks() {
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        // Behind (a sample took longer than the period): the next is due now, not in a burst.
        due = (due + period).max(Instant::now());
        let at = w.elapsed();
        if !same() {
            w.stopped = Some(at);
            break;
        }
        match sample(pid, &remembered, only()) {
            Ok(_) if !same() => {
                w.stopped = Some(at);
                break;
            }
            Ok((s, r)) => {
                w.taken += 1;
                on(at, s, r);
            }
            Err(_) if !process_alive(pid) => {
                w.exited = Some(at);
                break;
            }
            Err(e) => {
                w.failed += 1;
                w.last_failure = Some(e.to_string());
            }
        }
    }
    if w.exited.is_none() && !process_alive(pid) {
        w.exited = Some(w.elapsed());
    }
    // The window's end: a caller's last report is made then.
    let end = w.started + Duration::from_secs_f64(plan.seconds);
    let now = Instant::now();
    if w.exited.is_none() && w.stopped.is_none() && end > now {
        std::thread::sleep(end - now);
    }
    w
}

/// One sample of process `pid`, in which CPython was found before (`earlier`): a fresh
/// snapshot of the process as it runs, and its threads' report (with only the frames of the
/// threads in `only`, when it names some: [`Session::walk_only`]).
pub fn sample(
    pid: i32,
    earlier: &Remembered,
    only: Option<HashSet<u64>>,
) -> Result<(Session, Report)> {
    let mut s = Session::reopen(Target::live(pid)?, earlier)?;
    if let Some(only) = only {
        s.walk_only(only);
    }
    let r = session::report::report(&s, None, false)?;
    Ok((s, r))
}

/// Thread `lwp`'s times now.
pub fn cpu_reading(pid: u32, lwp: u64) -> Option<CpuReading> {
    Some(CpuReading {
        cpu_s: proc_cpu_seconds(pid, lwp)?,
        waited_s: proc_run_queue_seconds(pid, lwp),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_out_of_bounds_are_refused() {
        assert_eq!(Plan::new(3.0, 100.0).unwrap().ticks(), 300);
        for (s, r) in [
            (0.0, 100.0),
            (-1.0, 100.0),
            (f64::NAN, 100.0),
            (3.0, 0.0),
            (3.0, 1_001.0),
            (1_000.0, 100.0),
        ] {
            assert!(matches!(Plan::new(s, r), Err(Error::Usage(_))), "{s} {r}");
        }
    }
}
