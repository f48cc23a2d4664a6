//! The sampling loop of `pid --why --for`: every thread's Python stack, read at a steady rate
//! while the target runs (process_vm_readv: nothing is stopped), and each thread's CPU time
//! from /proc, folded into a [`Tracker`].

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::cpython::Remembered;
use crate::error::{Error, ReadError, ReadErrorKind, Result};
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
    /// [`run_while`]: the run reached its `until` before its last tick (samples slower than
    /// the period).
    pub over: bool,
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
    run_while(pid, plan, first, &|| true, None, &mut || None, on)
}

/// [`run`], stopped where `same` is false, and before the first tick at `until` (then
/// [`Run::over`]). `same` is `record`'s check that the process is still the program it
/// began as (one that `exec`s mid-recording is another: its stacks never mix with the first
/// one's): it is asked before the first sample and after each, and a sample after which it
/// is false is left out; [`Run::stopped`] says when. `only`, asked before each sample, names
/// the threads (by LWP) whose frames it walks ([`Session::walk_only`]); None: all.
pub fn run_while(
    pid: i32,
    plan: &Plan,
    first: &Session,
    same: &dyn Fn() -> bool,
    until: Option<Instant>,
    only: &mut dyn FnMut() -> Option<HashSet<u64>>,
    on: &mut dyn FnMut(f64, Session, Report),
) -> Run {
    let remembered = first.remembered();
    let mut basis = Basis::new(pid);
    let mut w = Run {
        started: Instant::now(),
        taken: 0,
        exited: None,
        failed: 0,
        last_failure: None,
        stopped: None,
        over: false,
    };
    let period = Duration::from_secs_f64(1.0 / plan.rate_hz);
    let mut due = w.started;
    for tick in 0..plan.ticks() {
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        // Behind (a sample took longer than the period): the next is due now, not in a burst.
        due = (due + period).max(Instant::now());
        let at = w.elapsed();
        if until.is_some_and(|u| Instant::now() >= u) {
            w.over = true;
            break;
        }
        // Asked before the first sample, then after each: a change between two samples is
        // seen after the second, which is left out (asking twice a tick was a tenth of a
        // sample's cost).
        if tick == 0 && !same() {
            w.stopped = Some(at);
            break;
        }
        match sample(&mut basis, &remembered, only()) {
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
            Err(_) if !same() => {
                w.stopped = Some(at);
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

/// How long a sampler uses a live process's mappings before it reads /proc/PID/maps again.
/// Reading and parsing them was a seventh of a sample's time; what they serve (thread stacks'
/// regions, modules for `--native`) changes rarely, and a module loaded since is seen within
/// this time.
const MAPS_EVERY: Duration = Duration::from_secs(1);

/// A live process's mappings and files, read once and used again by the samples that follow,
/// each with a fresh cache over the process's memory ([`Target::again`]): read anew every
/// [`MAPS_EVERY`], and after a sample that failed.
pub struct Basis {
    pid: i32,
    read: Option<(Target, Instant)>,
}

impl Basis {
    pub fn new(pid: i32) -> Basis {
        Basis { pid, read: None }
    }

    /// A target for one sample.
    fn target(&mut self) -> Result<Target> {
        if let Some((t, at)) = &self.read {
            if at.elapsed() < MAPS_EVERY {
                if let Some(t) = t.again() {
                    return Ok(t);
                }
            }
        }
        self.read = None;
        let t = Target::live(self.pid)?;
        let out = t.again().ok_or(Error::Usage("not a live process".into()))?;
        self.read = Some((t, Instant::now()));
        Ok(out)
    }
}

/// One sample of the process of `basis`, in which CPython was found before (`earlier`): a
/// fresh snapshot of the process as it runs, and its threads' report (with only the frames of
/// the threads in `only`, when it names some: [`Session::walk_only`]).
pub fn sample(
    basis: &mut Basis,
    earlier: &Remembered,
    only: Option<HashSet<u64>>,
) -> Result<(Session, Report)> {
    let taken = basis.target().and_then(|t| {
        let mut s = Session::reopen(t, earlier)?;
        if let Some(only) = only {
            s.walk_only(only);
        }
        let r = session::report::report(&s, None, false)?;
        // The mappings kept do not show that the process is gone, as reading them again
        // would: a process that exited reads as one with no threads.
        if r.threads.is_empty() && !process_alive(basis.pid) {
            return Err(Error::Read(ReadError::new(
                0,
                0,
                ReadErrorKind::Os(libc::ESRCH),
            )));
        }
        Ok((s, r))
    });
    if taken.is_err() {
        basis.read = None;
    }
    taken
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
