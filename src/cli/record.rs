//! `pyunwind record PID`: a sampling profile of a running process, written as collapsed
//! stacks, speedscope's file (src/sample/profile.rs) or pprof's (src/sample/pprof.rs); the
//! target is never stopped (`--native` stops each thread for the moment its registers and
//! stack are copied, as `pid --native` does).
//!
//! What each sample gives (threads, tasks, greenlets) is src/sample/stacks.rs. `--children`
//! re-reads the process tree at each tick: a process that appears is read from then on, each
//! one's stacks under a `process PID` root frame. A process that `exec`s is another program
//! (src/sample/identity.rs): its samples stop there, so the two never mix.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;

use super::args::ProfileFormat;
use super::many::descendants;
use super::{open_target, CoreFiles, Spec};
use crate::cpython::Remembered;
use crate::error::{Error, Result};
use crate::memory::{proc_thread_running, process_alive, TaskStates};
use crate::model::Report;
use crate::sample::identity::Identity;
use crate::sample::pprof;
use crate::sample::profile::{OwnerKind, Profile};
use crate::sample::stacks::{self, Take};
use crate::sample::window::{self, Basis, Plan};
use crate::session::native_stacks::ThreadRegs;
use crate::session::{self, Session};
use crate::unwind::ModuleSet;

/// Processes of a `--children` tree read at once; past it, the rest of the tree is left out
/// (said once).
pub const MAX_PROCESSES: usize = 1_024;
/// Ticks at which a process of a `--children` tree in which no Python is found (just forked,
/// exec'ing, not Python) is tried again before it is left out.
const MAX_OPEN_TRIES: u32 = 5;

/// What `record` was asked.
pub(super) struct RecordArgs {
    pub pid: i32,
    pub plan: Plan,
    pub format: ProfileFormat,
    pub output: PathBuf,
    pub idle: bool,
    pub native: bool,
    pub async_: bool,
    pub greenlets: bool,
    pub children: bool,
    pub json: bool,
    pub files: CoreFiles,
}

/// One process read at each tick.
struct Process {
    pid: i32,
    remembered: Remembered,
    /// Its mappings and files, kept from one sample to the next.
    basis: Basis,
    identity: Option<Identity>,
    /// Threads (LWPs) seen in its last sample, once it has had one.
    threads: RefCell<Option<HashSet<u64>>>,
    /// Its threads' states, read before each sample ([`on_cpu`]).
    states: RefCell<TaskStates>,
    /// `--native`: its modules (unwind tables, DWARF) as the last sample loaded them.
    modules: RefCell<Option<ModuleSet>>,
}

/// How the recording went, besides the profile's own counts.
#[derive(Default)]
struct Tally {
    /// Samples (of any process) that could not be read, or whose extra reading (`--native`,
    /// `--async`) failed.
    failed: u64,
    /// Why the last of them failed (the error's one line).
    last_failure: Option<String>,
    /// Threads that appeared after a process's first sample, and that were gone from one
    /// sample to the next.
    came: u64,
    went: u64,
    /// Processes that exec'd (their samples stopped there), and that exited, under the first.
    execd: Vec<(i32, f64)>,
    exited: Vec<(i32, f64)>,
    /// `--children`: processes read besides the first.
    children: u64,
}

impl Tally {
    fn fail(&mut self, why: String) {
        self.failed += 1;
        self.last_failure = Some(why);
    }
}

impl Process {
    fn open(pid: i32, files: &CoreFiles) -> Result<(Process, Session)> {
        let identity = Identity::of(pid);
        let first = Session::open(open_target(&Spec::Live(pid), files)?)?;
        Ok((
            Process {
                pid,
                remembered: first.remembered(),
                basis: Basis::new(pid),
                identity,
                threads: RefCell::new(None),
                states: RefCell::new(TaskStates::new(pid as u32)),
                modules: RefCell::new(None),
            },
            first,
        ))
    }

    /// Still the program it was when first read.
    fn same(&self) -> bool {
        Identity::of(self.pid) == self.identity
    }
}

/// Samples the process (and with `--children` its tree) over `a.plan`, writes the profile to
/// `a.output` and says how the run went: one line, or with `--json` the summary document
/// (docs/report.md, "`record --json`").
pub(super) fn record(a: RecordArgs) -> Result<(String, i32)> {
    if a.native && a.async_ {
        return Err(Error::Usage("--native does not go with --async".into()));
    }
    let (root, first) = Process::open(a.pid, &a.files)?;
    let mut profile = Profile::new();
    let mut tally = Tally::default();
    let mut kids: Vec<Process> = Vec::new();
    let mut tries: HashMap<i32, u32> = HashMap::new();
    let started = SystemTime::now();
    let identity = root.identity.clone();
    let pid = a.pid;
    // --duration is wall time: samples slower than the period (--native's unwinding, a loaded
    // machine) end the run at its end, not after --duration times --rate of them.
    let until = Instant::now() + Duration::from_secs_f64(a.plan.seconds);
    let run = window::run_while(
        pid,
        &a.plan,
        &first,
        // A process that is gone is an exit, which the run tells apart itself.
        &|| Identity::of(pid).is_none_or(|i| Some(i) == identity),
        Some(until),
        &mut || on_cpu(&root.states, a.idle),
        &mut |at, s, r| {
            take_sample(&a, &root, s, r, &mut profile, &mut tally);
            if a.children {
                sample_children(&a, at, &mut kids, &mut tries, &mut profile, &mut tally);
            }
        },
    );
    // Found gone as well: an exit, which may first look like an exec to the check.
    let execd = run.stopped.filter(|_| run.exited.is_none());
    if let Some(at) = execd {
        tally.execd.insert(0, (pid, at));
    }
    if let Some(at) = run.exited {
        tally.exited.insert(0, (pid, at));
    }
    let seconds = run.elapsed();
    let bytes = match a.format {
        ProfileFormat::Collapsed => profile.collapsed().into_bytes(),
        ProfileFormat::Speedscope => profile
            .speedscope(&format!("pid {pid}"))
            .to_string()
            .into_bytes(),
        ProfileFormat::Pprof => pprof::gzipped(
            &profile,
            &pprof::Meta {
                time_nanos: nanos(started.duration_since(UNIX_EPOCH).unwrap_or_default()),
                duration_nanos: nanos(Duration::from_secs_f64(seconds)),
                period_nanos: nanos(Duration::from_secs_f64(1.0 / a.plan.rate_hz)),
                wall: a.idle,
            },
        ),
    };
    std::fs::write(&a.output, bytes)
        .map_err(|e| Error::Usage(format!("writing {}: {e}", a.output.display())))?;
    let rate = run.taken as f64 / seconds.max(f64::MIN_POSITIVE);
    let unreadable = run.failed + tally.failed;
    // The run's own failures are the root process's whole samples; the tally's came after.
    let unreadable_why = tally.last_failure.clone().or_else(|| {
        run.last_failure
            .as_ref()
            .map(|e| format!("process {pid}: {e}"))
    });
    let exited_s = run.exited.map(|at| (at * 10.0).round() / 10.0);
    if a.json {
        let owners = profile.owner_samples();
        let of_kind = |kind: OwnerKind, id_key: &str| -> Vec<serde_json::Value> {
            owners
                .iter()
                .filter(|(o, _)| o.kind == kind)
                .map(|(o, n)| {
                    let mut v = json!({id_key: o.id, "name": o.name, "samples": n});
                    if let Some(p) = o.pid {
                        v["pid"] = json!(p);
                    }
                    v
                })
                .collect()
        };
        let mut doc = json!({
            "pid": pid,
            "host": crate::model::host_name(),
            "file": a.output.display().to_string(),
            "format": a.format.name(),
            "seconds": (seconds * 1000.0).round() / 1000.0,
            "samples": run.taken,
            "rate_hz": (rate * 10.0).round() / 10.0,
            "written": profile.written,
            "torn": profile.torn,
            "dropped": profile.dropped,
            "unreadable": unreadable,
            "unreadable_why": unreadable_why,
            "exited_s": exited_s,
            "execd_s": execd.map(|at| (at * 10.0).round() / 10.0),
            "threads_began": tally.came,
            "threads_ended": tally.went,
            "threads": of_kind(OwnerKind::Thread, "native_id"),
        });
        if a.async_ {
            doc["tasks"] = json!(of_kind(OwnerKind::Task, "id"));
        }
        if a.greenlets {
            doc["greenlets"] = json!(of_kind(OwnerKind::Greenlet, "id"));
        }
        if a.children {
            doc["children"] = json!(tally.children);
            let at = |v: &[(i32, f64)]| -> Vec<serde_json::Value> {
                v.iter()
                    .map(|(p, s)| json!({"pid": p, "at_s": (s * 10.0).round() / 10.0}))
                    .collect()
            };
            doc["children_execd"] = json!(at(&tally.execd[execd.is_some() as usize..]));
            doc["children_exited"] = json!(at(&tally.exited[run.exited.is_some() as usize..]));
        }
        return Ok((json!({ "record": doc }).to_string() + "\n", 0));
    }
    let mut line = format!(
        "pyunwind: {} samples in {seconds:.1} s ({:.1} Hz), {} stack samples written, {} torn, \
         {} dropped at a cap, {} unreadable",
        run.taken, rate, profile.written, profile.torn, profile.dropped, unreadable,
    );
    if let Some(why) = &unreadable_why {
        line += &format!(" (the last: {why})");
    }
    if tally.came + tally.went > 0 {
        line += &format!(", {} thread(s) began and {} ended", tally.came, tally.went);
    }
    if a.children {
        line += &format!(", {} child process(es)", tally.children);
    }
    line += &format!(": {}", a.output.display());
    for (p, at) in &tally.execd {
        line += &format!(" (process {p} exec'd {at:.1} s in: its samples stop there)");
    }
    for (p, at) in &tally.exited {
        line += &format!(" (process {p} exited {at:.1} s in)");
    }
    Ok((line + "\n", 0))
}

/// One sample of process `p`: the report `a` asks for (native frames, tasks, greenlets), its
/// stacks added to `profile`, its threads' comings and goings counted.
fn take_sample(
    a: &RecordArgs,
    p: &Process,
    mut s: Session,
    r: Report,
    profile: &mut Profile,
    tally: &mut Tally,
) {
    let on_cpu = s.walked_only().cloned();
    if let Some(m) = p.modules.borrow_mut().take() {
        s.adopt_modules(m);
    }
    let report = full_report(a, p.pid, &mut s, r);
    *p.modules.borrow_mut() = s.take_modules();
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            tally.fail(format!("process {}: {e}", p.pid));
            return;
        }
    };
    // The extra reading (registers, tasks) took time: a process that exec'd meanwhile gives
    // no sample.
    if !p.same() {
        tally.fail(format!("process {}: exec'd while read", p.pid));
        return;
    }
    let now: HashSet<u64> = report.threads.iter().filter_map(|t| t.native_id).collect();
    let mut threads = p.threads.borrow_mut();
    if let Some(before) = &*threads {
        tally.came += now.difference(before).count() as u64;
        tally.went += before.difference(&now).count() as u64;
    }
    *threads = Some(now);
    let take = Take {
        idle: a.idle,
        tasks: a.async_,
        greenlets: a.greenlets,
        pid: a.children.then_some(p.pid),
    };
    let pid = p.pid as u32;
    // The threads found on a CPU before the sample (whose frames it walked), else each one's
    // state now.
    stacks::add(profile, &report, take, &|lwp| match &on_cpu {
        Some(on) => on.contains(&lwp),
        None => proc_thread_running(pid, lwp).unwrap_or(false),
    });
}

/// The report of one sample as `a` asks: `r` (each thread's Python frames), or with
/// `--native` each thread's native and Python frames merged (`pid --native`'s), with
/// `--async` the tasks, with `--greenlets` the greenlets.
fn full_report(a: &RecordArgs, pid: i32, s: &mut Session, r: Report) -> Result<Report> {
    let mut report = if a.native {
        let regs = ThreadRegs::of_live(pid, s.target.arch)?;
        s.set_thread_ids(regs.thread_ids());
        session::native_stacks::native_report(s, &regs, false, false)?
    } else if a.async_ {
        session::asyncio::take_report(s)?
    } else {
        r
    };
    if a.greenlets {
        crate::why::add_greenlets(s, &mut report, false);
    }
    Ok(report)
}

/// `--children`: one sample of each process under the first, the tree read again now; a
/// process new to it is opened (tried again at later ticks while no Python is found in it),
/// one that exec'd or exited is no longer read.
fn sample_children(
    a: &RecordArgs,
    at: f64,
    kids: &mut Vec<Process>,
    tries: &mut HashMap<i32, u32>,
    profile: &mut Profile,
    tally: &mut Tally,
) {
    let tree = descendants(a.pid).unwrap_or_default();
    for pid in tree {
        if kids.iter().any(|k| k.pid == pid) {
            continue;
        }
        let n = tries.entry(pid).or_insert(0);
        if *n >= MAX_OPEN_TRIES {
            continue;
        }
        if kids.len() >= MAX_PROCESSES {
            *n = MAX_OPEN_TRIES;
            eprintln!("pyunwind: process {pid} not recorded: past {MAX_PROCESSES} processes");
            continue;
        }
        *n += 1;
        match Process::open(pid, &a.files) {
            Ok((k, _)) => {
                tally.children += 1;
                // Never opened again: one that exec'd or exited is done with.
                *n = MAX_OPEN_TRIES;
                kids.push(k);
            }
            Err(e) if *n == MAX_OPEN_TRIES => {
                eprintln!("pyunwind: process {pid} left out: {e}");
            }
            Err(_) => {}
        }
    }
    kids.retain_mut(|k| {
        if !k.same() {
            if process_alive(k.pid) {
                tally.execd.push((k.pid, at));
            } else {
                tally.exited.push((k.pid, at));
            }
            return false;
        }
        match window::sample(&mut k.basis, &k.remembered, on_cpu(&k.states, a.idle)) {
            Ok((s, r)) => {
                take_sample(a, k, s, r, profile, tally);
                true
            }
            Err(_) if !process_alive(k.pid) => {
                tally.exited.push((k.pid, at));
                false
            }
            Err(e) => {
                tally.fail(format!("process {}: {e}", k.pid));
                true
            }
        }
    });
}

/// Without `--idle`, the threads of a sample (by LWP) whose frames are walked: those on a CPU
/// now (a sample of 64 threads of which 2 run reads 2 stacks); None (all) with `--idle`, or
/// when the threads' states cannot be read.
fn on_cpu(states: &RefCell<TaskStates>, idle: bool) -> Option<HashSet<u64>> {
    (!idle).then(|| states.borrow_mut().running()).flatten()
}

/// A duration in whole nanoseconds (pprof's unit), saturating.
fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u128::from(u64::MAX)) as u64
}
