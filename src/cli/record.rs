//! `pyunwind record PID`: a sampling profile of a running process, written as collapsed stacks
//! or speedscope's file (src/sample/profile.rs); the target is never stopped.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::ValueEnum;
use serde_json::json;

use crate::error::{Error, Result};
use crate::memory::proc_thread_running;
use crate::report::ThreadReport;
use crate::sample::pprof;
use crate::sample::profile::Profile;
use crate::sample::window::{self, Plan};
use crate::session::Session;

use super::{open_target, CoreFiles, Spec};

#[derive(Clone, Copy, ValueEnum)]
pub(super) enum ProfileFormat {
    /// `root;...;leaf COUNT` lines (Brendan Gregg's folded stacks, py-spy's `raw`).
    Collapsed,
    /// speedscope's JSON file (https://www.speedscope.app).
    Speedscope,
    /// pprof's `profile.proto`, gzipped (each thread a label).
    Pprof,
}

impl ProfileFormat {
    fn name(self) -> &'static str {
        match self {
            ProfileFormat::Collapsed => "collapsed",
            ProfileFormat::Speedscope => "speedscope",
            ProfileFormat::Pprof => "pprof",
        }
    }
}

/// Samples `pid` over `plan`, writes the profile to `output` and says how the run went: one
/// line, or with `json` the summary document (docs/report.md, "`record --json`").
pub(super) fn record(
    pid: i32,
    plan: &Plan,
    format: ProfileFormat,
    output: &Path,
    idle: bool,
    json: bool,
    files: &CoreFiles,
) -> Result<(String, i32)> {
    let first = Session::open(open_target(&Spec::Live(pid), files)?)?;
    let mut profile = Profile::new();
    // Without --idle, a thread counts only on a CPU or waiting for one (py-spy's rule).
    let counted = |t: &ThreadReport| {
        idle || t
            .native_id
            .and_then(|l| proc_thread_running(pid as u32, l))
            .unwrap_or(false)
    };
    let started = SystemTime::now();
    let run = window::run(pid, plan, &first, &mut |_, _, r| {
        profile.add(&r.threads, &counted, None)
    });
    let seconds = run.elapsed();
    let bytes = match format {
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
                period_nanos: nanos(Duration::from_secs_f64(1.0 / plan.rate_hz)),
                wall: idle,
            },
        ),
    };
    std::fs::write(output, bytes)
        .map_err(|e| Error::Usage(format!("writing {}: {e}", output.display())))?;
    let rate = run.taken as f64 / seconds.max(f64::MIN_POSITIVE);
    if json {
        let threads: Vec<_> = profile
            .owner_samples()
            .into_iter()
            .map(|(o, n)| json!({"native_id": o.id, "name": o.name, "samples": n}))
            .collect();
        let doc = json!({"record": {
            "pid": pid,
            "host": crate::report::host_name(),
            "file": output.display().to_string(),
            "format": format.name(),
            "seconds": (seconds * 1000.0).round() / 1000.0,
            "samples": run.taken,
            "rate_hz": (rate * 10.0).round() / 10.0,
            "written": profile.written,
            "torn": profile.torn,
            "dropped": profile.dropped,
            "unreadable": run.failed,
            "exited_s": run.exited.map(|at| (at * 10.0).round() / 10.0),
            "threads": threads,
        }});
        return Ok((doc.to_string() + "\n", 0));
    }
    let mut line = format!(
        "pyunwind: {} samples in {seconds:.1} s ({:.1} Hz), {} thread samples written, {} torn, \
         {} dropped at a cap, {} unreadable: {}",
        run.taken,
        rate,
        profile.written,
        profile.torn,
        profile.dropped,
        run.failed,
        output.display()
    );
    if let Some(at) = run.exited {
        line += &format!(" (process {pid} exited {at:.1} s in)");
    }
    Ok((line + "\n", 0))
}

/// A duration in whole nanoseconds (pprof's unit), saturating.
fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u128::from(u64::MAX)) as u64
}
