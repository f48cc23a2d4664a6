//! `pyunwind watch PID... --stall S --out DIR`: a watchdog. It samples each process cheaply (a
//! fresh snapshot per tick, src/sample/window.rs; nothing is stopped) and, when a thread that
//! is not idle stays stalled for S seconds (src/sample/stall.rs), writes the process's `--why
//! --json` report to `DIR/PID-UNIXTIME.json` and prints one line. Over several processes it
//! also writes the straggler verdict of them all beside it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;

use super::args::Output;
use super::many::descendants;
use super::{open_target, with_report, CoreFiles, Spec};
use crate::cpython::Remembered;
use crate::error::{Error, Result};
use crate::memory::{proc_context_switches, process_alive};
use crate::model::{FrameKind, Hosted, Report, StateWord, WaitKind};
use crate::report::gather::Gatherer;
use crate::report::group::{GroupBy, TargetError};
use crate::sample::stall::{Activity, Stall, StallWatch};
use crate::sample::window::{cpu_reading, sample, Basis};
use crate::session::Session;

/// `--interval`'s bounds, in seconds: below the first a sample's cost (a millisecond or so per
/// thread) is the process's load; above the second a watchdog is not watching.
pub const MIN_INTERVAL_S: f64 = 0.01;
pub const MAX_INTERVAL_S: f64 = 3600.0;
/// Exit status when at least one stall was written (0: none; 1: bad input).
pub const STALL_EXIT_STATUS: i32 = 3;
/// Processes watched at once (with `--children`, the tree past it is left out, said once).
pub const MAX_PROCESSES: usize = 1_024;
/// Times a process of a `--children` tree in which no Python is found yet (just forked, or
/// exec'ing) is looked at again before it is left out.
const MAX_OPEN_TRIES: u32 = 5;
/// Samples are due every interval but taken a little late or early (the sleep, the last
/// sample's cost): a stall that spans the ticks of S seconds counts even when their times are
/// this share of an interval short of it.
const TICK_SLACK: f64 = 0.1;
/// How often the sleep between ticks looks for SIGINT and SIGTERM.
const STOP_POLL: Duration = Duration::from_millis(50);

/// Set by SIGINT and SIGTERM: the watch ends after the tick in progress. A signal handler can
/// only reach a static; nothing else of the crate holds state past a stop.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// What `watch` was asked.
pub(super) struct WatchArgs {
    pub pids: Vec<i32>,
    pub children: bool,
    pub stall_s: f64,
    pub out_dir: PathBuf,
    pub interval_s: f64,
    pub native: bool,
    pub core: bool,
    pub json: bool,
    pub files: CoreFiles,
}

/// One process watched.
struct Watched {
    pid: i32,
    remembered: Remembered,
    /// Its mappings and files, kept from one sample to the next.
    basis: Basis,
    stalls: StallWatch,
    /// Samples that could not be read while the process was there.
    failed: u64,
}

/// How the watch went, for its closing line.
#[derive(Default)]
struct Tally {
    stalls: u64,
    exited: u64,
    failed: u64,
    came: u64,
    went: u64,
}

/// Runs the watch until every process watched is gone, or SIGINT or SIGTERM. Exit status 0
/// when no stall was written, [`STALL_EXIT_STATUS`] when one was.
pub(super) fn watch(a: WatchArgs) -> Result<(String, i32)> {
    if !(a.stall_s.is_finite() && a.stall_s > 0.0) {
        return Err(Error::Usage(format!(
            "--stall {}: more than 0 seconds",
            a.stall_s
        )));
    }
    if !(a.interval_s.is_finite() && (MIN_INTERVAL_S..=MAX_INTERVAL_S).contains(&a.interval_s)) {
        return Err(Error::Usage(format!(
            "--interval {}: from {MIN_INTERVAL_S} to {MAX_INTERVAL_S} seconds",
            a.interval_s
        )));
    }
    std::fs::create_dir_all(&a.out_dir)
        .map_err(|e| Error::io(a.out_dir.display().to_string(), e))?;
    let mut watched = Vec::new();
    let mut failed = Vec::new();
    for &pid in &a.pids {
        match open(pid, &a) {
            Ok(w) => watched.push(w),
            // A launcher (a shell, torchrun's agent) need not run Python: its tree may.
            Err(Error::NoPython(_)) if a.children && process_alive(pid) => {}
            Err(e) => failed.push((pid, e)),
        }
    }
    let mut tries: Vec<(i32, u32)> = Vec::new();
    if a.children {
        adopt_children(&a, &mut watched, &mut tries);
    }
    // `--children` on a launcher with no Python in its tree yet (a shell that starts torchrun
    // later): its tree is looked at again every tick, for as long as the launcher lives.
    let waiting = a.children && a.pids.iter().any(|&p| process_alive(p));
    if watched.is_empty() && failed.len() == 1 && !waiting {
        return Err(failed.remove(0).1);
    }
    for (pid, e) in &failed {
        eprintln!("pyunwind: process {pid}: {e}");
    }
    if watched.is_empty() && !waiting {
        return Err(Error::NoPython(format!(
            "none of the {} process(es) given runs Python that can be read",
            a.pids.len()
        )));
    }
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { libc::signal(sig, on_stop_signal as *const () as libc::sighandler_t) };
    }
    let host = crate::model::host_name();
    let started = Instant::now();
    let period = Duration::from_secs_f64(a.interval_s);
    let mut due = started;
    let mut tally = Tally::default();
    while !STOP.load(Ordering::SeqCst) {
        if a.children {
            adopt_children(&a, &mut watched, &mut tries);
        }
        let at = started.elapsed().as_secs_f64();
        let mut stalled = Vec::new();
        watched.retain_mut(|w| match sample(&mut w.basis, &w.remembered, None) {
            Ok((session, report)) => {
                let pid = w.pid as u32;
                let fired = w.stalls.observe(at, &report.threads, &|lwp| Activity {
                    cpu: cpu_reading(pid, lwp),
                    switches: proc_context_switches(pid, lwp),
                });
                drop(session);
                if !fired.is_empty() {
                    stalled.push((w.pid, fired));
                }
                true
            }
            Err(_) if !process_alive(w.pid) => {
                eprintln!(
                    "pyunwind: process {} exited ({at:.1} s into the watch)",
                    w.pid
                );
                tally.exited += 1;
                tally.came += w.stalls.came;
                tally.went += w.stalls.went;
                tally.failed += w.failed;
                false
            }
            Err(_) => {
                w.failed += 1;
                true
            }
        });
        if watched.len() > 1 {
            // Over several processes a stall is the job's: one report for all of them.
            if !stalled.is_empty() && report_stall(&a, &mut watched, stalled, at, &host)? {
                tally.stalls += 1;
            }
        } else {
            for one in stalled {
                if report_stall(&a, &mut watched, vec![one], at, &host)? {
                    tally.stalls += 1;
                }
            }
        }
        if watched.is_empty() && !(a.children && a.pids.iter().any(|&p| process_alive(p))) {
            break;
        }
        due = (due + period).max(Instant::now());
        while !STOP.load(Ordering::SeqCst) {
            let now = Instant::now();
            if now >= due {
                break;
            }
            std::thread::sleep((due - now).min(STOP_POLL));
        }
    }
    for w in &watched {
        tally.came += w.stalls.came;
        tally.went += w.stalls.went;
        tally.failed += w.failed;
    }
    eprintln!(
        "pyunwind: watched for {:.1} s: {} stall(s) written, {} process(es) exited, {} \
         thread(s) began and {} ended, {} sample(s) unreadable",
        started.elapsed().as_secs_f64(),
        tally.stalls,
        tally.exited,
        tally.came,
        tally.went,
        tally.failed
    );
    let status = if tally.stalls > 0 {
        STALL_EXIT_STATUS
    } else {
        0
    };
    Ok((String::new(), status))
}

/// Finds CPython in process `pid`, for its samples.
fn open(pid: i32, a: &WatchArgs) -> Result<Watched> {
    let first = Session::open(open_target(&Spec::Live(pid), &a.files)?)?;
    Ok(Watched {
        pid,
        remembered: first.remembered(),
        basis: Basis::new(pid),
        stalls: StallWatch::new(a.stall_s - TICK_SLACK * a.interval_s),
        failed: 0,
    })
}

/// `--children`: the processes of the trees that are not watched yet, watched from now; one
/// in which no Python is found is tried again a few times (it may be exec'ing), then left
/// out with one line.
fn adopt_children(a: &WatchArgs, watched: &mut Vec<Watched>, tries: &mut Vec<(i32, u32)>) {
    for root in &a.pids {
        let Ok(tree) = descendants(*root) else {
            continue;
        };
        for pid in tree {
            if watched.iter().any(|w| w.pid == pid) {
                continue;
            }
            let n = match tries.iter_mut().find(|t| t.0 == pid) {
                Some(t) => &mut t.1,
                None => {
                    tries.push((pid, 0));
                    &mut tries.last_mut().expect("just pushed").1
                }
            };
            if *n >= MAX_OPEN_TRIES {
                continue;
            }
            if watched.len() >= MAX_PROCESSES {
                *n = MAX_OPEN_TRIES;
                eprintln!("pyunwind: process {pid} not watched: past {MAX_PROCESSES} processes");
                continue;
            }
            *n += 1;
            match open(pid, a) {
                Ok(w) => watched.push(w),
                Err(e) if *n == MAX_OPEN_TRIES => {
                    eprintln!("pyunwind: process {pid} left out: {e}");
                }
                Err(_) => {}
            }
        }
    }
}

/// The threads `fired` of each process listed reached the stall at sample `at`. Each of those
/// processes' `--why` report is made now; unless every thread that fired is idle there, one
/// report is written, naming its process's stalled threads (those that fired and the others
/// stalled at that sample), with a core (`--core`) and one line. Over several processes (a
/// job) the threads stalled at that sample in every process are this one stall; the report
/// written is the straggler's: the first outlier of the straggler verdict with a stalled
/// thread that is not idle, else the first process listed with one; the verdict, over every
/// process watched, is written beside it. Returns whether a report was written.
fn report_stall(
    a: &WatchArgs,
    watched: &mut [Watched],
    fired: Vec<(i32, Vec<Stall>)>,
    at: f64,
    host: &str,
) -> Result<bool> {
    let job = watched.len() > 1;
    // Each process's report, and its stalled threads that are not idle there.
    let mut reports: Vec<(i32, Report)> = Vec::new();
    let mut stalled: Vec<(i32, Vec<Stall>)> = Vec::new();
    for (pid, threads) in &fired {
        match why_report(*pid, a) {
            Ok(r) => {
                let busy = not_idle(&r, threads);
                if !busy.is_empty() {
                    stalled.push((*pid, busy));
                }
                reports.push((*pid, r));
            }
            Err(e) => eprintln!("pyunwind: process {pid}: a stall, but its report failed: {e}"),
        }
    }
    if stalled.is_empty() {
        return Ok(false);
    }
    // The other threads stalled at this sample are part of this stall: named with it, and each
    // not reported again until it moves. In a job, every process's.
    let mut failed = Vec::new();
    for w in watched.iter_mut() {
        let mine: &[Stall] = fired
            .iter()
            .find(|f| f.0 == w.pid)
            .map_or(&[], |f| f.1.as_slice());
        if !job && mine.is_empty() {
            continue;
        }
        let others = w.stalls.companions(at, mine);
        if !reports.iter().any(|r| r.0 == w.pid) {
            if !job {
                continue;
            }
            match why_report(w.pid, a) {
                Ok(r) => reports.push((w.pid, r)),
                Err(e) => {
                    failed.push(TargetError {
                        target: w.pid.to_string(),
                        host: Some(host.to_string()),
                        pid: Some(w.pid as u32),
                        error: e.to_string(),
                    });
                    continue;
                }
            }
        }
        let report = &reports.iter().find(|r| r.0 == w.pid).expect("just read").1;
        let more = not_idle(report, &others);
        match stalled.iter_mut().find(|s| s.0 == w.pid) {
            Some(s) => s.1.extend(more),
            None if !more.is_empty() => stalled.push((w.pid, more)),
            None => {}
        }
    }
    let verdict = job.then(|| job_verdict(watched, &reports, failed, host));
    let straggler = verdict
        .as_ref()
        .and_then(|g| g.verdict.as_ref())
        .and_then(|v| {
            v.outliers
                .iter()
                .filter_map(|o| o.pid)
                .find(|&p| stalled.iter().any(|s| s.0 as u32 == p))
        });
    let (pid, stalls) = match straggler {
        Some(p) => stalled
            .iter()
            .find(|s| s.0 as u32 == p)
            .expect("found among them"),
        None => fired
            .iter()
            .find_map(|f| stalled.iter().find(|s| s.0 == f.0))
            .expect("a process that fired has a stalled thread"),
    };
    let (pid, stalls) = (*pid, stalls.as_slice());
    let report = &reports.iter().find(|r| r.0 == pid).expect("read above").1;
    let unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let stem = free_stem(&a.out_dir, &format!("{pid}-{unix}"));
    let path = a.out_dir.join(format!("{stem}.json"));
    write_file(
        &path,
        &Hosted {
            host,
            pid: None,
            report,
        },
    )?;
    let job = match &verdict {
        Some(v) => {
            let path = a.out_dir.join(format!("{stem}-job.json"));
            write_file(&path, v)?;
            Some(path)
        }
        None => None,
    };
    let core = a.core.then(|| gcore(&a.out_dir.join(&stem), pid)).flatten();
    let line = if a.json {
        json!({"stall": {
            "pid": pid,
            "host": host,
            "at": unix,
            "threads": stall_threads(report, stalls),
            "report": path.display().to_string(),
            "job": job.as_ref().map(|p| p.display().to_string()),
            "core": core.as_ref().map(|p| p.display().to_string()),
        }})
        .to_string()
    } else {
        let who: Vec<String> = stalls.iter().map(|s| stall_words(report, s)).collect();
        let mut line = format!(
            "pyunwind: process {pid} stalled: {}: {}",
            who.join("; "),
            path.display()
        );
        for p in job.iter().chain(&core) {
            line += &format!(", {}", p.display());
        }
        line
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
    Ok(true)
}

/// The `threads` of a `{"stall": …}` line: each stalled thread, how long, and where.
fn stall_threads(report: &Report, stalls: &[Stall]) -> Vec<serde_json::Value> {
    stalls
        .iter()
        .map(|s| {
            let t = report.threads.iter().find(|t| t.native_id == Some(s.lwp));
            let f = t.and_then(|t| t.frames.iter().find(|f| f.kind == FrameKind::Python));
            json!({
                "native_id": s.lwp,
                "name": t.and_then(|t| t.any_name()),
                "stall": s.kind.word(),
                "stalled_s": (s.for_s * 10.0).round() / 10.0,
                "function": f.and_then(|f| f.function.as_deref()),
                "file": f.and_then(|f| f.file.as_deref()),
                "line": f.and_then(|f| f.line),
            })
        })
        .collect()
}

/// `thread 4243 "left" blocked for 2.0 s in left (deadlock.py:31)`.
fn stall_words(r: &Report, s: &Stall) -> String {
    let t = r.threads.iter().find(|t| t.native_id == Some(s.lwp));
    let name = t
        .and_then(|t| t.any_name())
        .map_or(String::new(), |n| format!(" \"{n}\""));
    let place = t
        .and_then(|t| t.frames.iter().find(|f| f.kind == FrameKind::Python))
        .and_then(|f| {
            let file = f.file.as_deref()?;
            let file = file.rsplit('/').next().unwrap_or(file);
            Some(format!(
                " in {} ({file}:{})",
                f.function.as_deref()?,
                f.line?
            ))
        })
        .unwrap_or_default();
    format!(
        "thread {}{name} {} for {:.1} s{place}",
        s.lwp,
        s.kind.word(),
        s.for_s
    )
}

/// Process `pid`'s report as `pid PID --why --json` (with `--native`: `--native --why`) makes
/// it now.
fn why_report(pid: i32, a: &WatchArgs) -> Result<Report> {
    let out = Output {
        locals: false,
        async_: false,
        tasks: false,
        native: a.native,
        native_all: false,
        greenlets: false,
        heap: false,
        heap_top: None,
        why: true,
        json: true,
    };
    let target = open_target(&Spec::Live(pid), &a.files)?;
    with_report(target, Some(pid), &out, false, |_, r| Ok(r.clone()))
}

/// The threads of `stalls` that count in `report`: a thread whose `--why` state is `idle` or
/// `loop_idle` never triggers a stall, nor is named in one, and neither is one in a sleep the
/// program asked for (`waiting.kind` `sleep`, `time.sleep`): its wait ends by itself, as a
/// poller's does, whatever its length (a sleep shorter than `--stall` is a poller's already).
fn not_idle(report: &Report, stalls: &[Stall]) -> Vec<Stall> {
    let idle = |s: &Stall| {
        report
            .threads
            .iter()
            .find(|t| t.native_id == Some(s.lwp))
            .and_then(|t| t.why.as_ref())
            .is_some_and(|w| {
                matches!(w.state, Some(StateWord::Idle | StateWord::LoopIdle))
                    || w.waiting
                        .as_ref()
                        .is_some_and(|w| w.kind == WaitKind::Sleep)
            })
    };
    stalls.iter().filter(|s| !idle(s)).copied().collect()
}

/// The straggler verdict over every process watched (`--group --why --json`'s document), from
/// their reports made at the stall; `failed`, those whose report could not be made.
fn job_verdict(
    watched: &[Watched],
    reports: &[(i32, Report)],
    failed: Vec<TargetError>,
    host: &str,
) -> crate::report::gather::Gathered {
    let mut g = Gatherer::new(GroupBy::Line, false, true);
    for w in watched {
        if let Some((_, r)) = reports.iter().find(|r| r.0 == w.pid) {
            g.add_report(
                Some(host),
                Some(w.pid as u32),
                r.threads.iter().map(From::from),
            );
        }
    }
    g.finish(failed)
}

/// `stem`, or `stem-2`, `stem-3`, ... when a report of that name is already in `dir` (two
/// stalls of one process in one second).
fn free_stem(dir: &Path, stem: &str) -> String {
    (1..)
        .map(|n| match n {
            1 => stem.to_string(),
            n => format!("{stem}-{n}"),
        })
        .find(|s| !dir.join(format!("{s}.json")).exists())
        .expect("an unbounded range")
}

/// Writes `v` as JSON to `path`, whole or not at all (a reader polling the directory never sees
/// half a report): to a temporary name beside it, then renamed.
fn write_file<T: serde::Serialize>(path: &Path, v: &T) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    let written = std::fs::File::create(&tmp).and_then(|f| {
        let mut w = std::io::BufWriter::new(f);
        serde_json::to_writer(&mut w, v).map_err(std::io::Error::from)?;
        w.write_all(b"\n")?;
        w.flush()
    });
    written
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| Error::io(path.display().to_string(), e))
}

/// `--core`: gdb's `gcore -o STEM PID`, which writes `STEM.PID` (it stops the process while it
/// copies its memory); None, with one line, when it fails or is not installed.
fn gcore(stem: &Path, pid: i32) -> Option<PathBuf> {
    let run = std::process::Command::new("gcore")
        .arg("-o")
        .arg(stem)
        .arg(pid.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output();
    let path = PathBuf::from(format!("{}.{pid}", stem.display()));
    match run {
        Ok(o) if o.status.success() && path.is_file() => Some(path),
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            let last = err.lines().last().unwrap_or("").trim();
            eprintln!(
                "pyunwind: gcore of process {pid} failed ({}): {last}",
                o.status
            );
            None
        }
        Err(e) => {
            eprintln!("pyunwind: gcore of process {pid}: {e} (gdb's gcore is needed for --core)");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ThreadReport, ThreadWhy, Waiting};
    use crate::report::test_support::{python_frame, report_of, thread_of};
    use crate::sample::stall::StallKind;

    /// A thread `lwp` in state `state`, waiting in a wait of kind `kind` (if any).
    fn waiting(lwp: u64, state: StateWord, kind: Option<WaitKind>) -> ThreadReport {
        let mut t = thread_of(lwp, vec![python_frame("f", "/app/w.py", 1)]);
        t.why = Some(ThreadWhy {
            state: Some(state),
            waiting: kind.map(|kind| Waiting {
                kind,
                object: None,
                type_name: None,
                owner: None,
                frame: 0,
                on: None,
            }),
            ..ThreadWhy::default()
        });
        t
    }

    #[test]
    fn idle_and_sleeping_threads_never_count() {
        let report = report_of(
            "3.12.1",
            1,
            vec![
                waiting(1, StateWord::Syscall, Some(WaitKind::Lock)),
                waiting(2, StateWord::Idle, None),
                waiting(3, StateWord::LoopIdle, None),
                waiting(4, StateWord::Syscall, Some(WaitKind::Sleep)),
                waiting(5, StateWord::Syscall, Some(WaitKind::Native)),
                thread_of(6, Vec::new()),
            ],
        );
        let stalls: Vec<Stall> = (1..=7)
            .map(|lwp| Stall {
                lwp,
                kind: StallKind::Blocked,
                for_s: 2.0,
            })
            .collect();
        // Thread 6 has no `--why` (none was made), 7 is not in the report: both count.
        let kept: Vec<u64> = not_idle(&report, &stalls).iter().map(|s| s.lwp).collect();
        assert_eq!(kept, [1, 5, 6, 7]);
    }
}
