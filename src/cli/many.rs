//! Many targets in one run: reading them in parallel, a process's descendants (`--children`),
//! their reports grouped, one JSON line or one text section each, and `merge` of saved
//! reports.

use std::io::Write;
use std::path::PathBuf;

use super::args::{GroupByArg, Grouping, Output};
use super::{broken_pipe_ok, write_json, Spec};
use crate::error::{Error, Result};
use crate::model::{Hosted, Report};
use crate::report::gather::Gatherer;
use crate::report::group::{GroupBy, TargetError, ThreadIn};
use crate::report::group_text;
use crate::report::text as render;

/// Targets read at once: enough to hide the waits on /proc and on core files' pages,
/// few enough that many cores do not all hold their mappings and caches at once.
const MAX_READER_THREADS: usize = 16;

/// `job` over every item, in parallel on up to [`MAX_READER_THREADS`] threads; results in the
/// items' order. A panic in one job is that item's error.
pub(super) fn read_all<I: Sync, T: Send>(
    items: &[I],
    job: &(dyn Fn(&I) -> Result<T> + Sync),
) -> Vec<Result<T>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let workers = std::thread::available_parallelism()
        .map_or(4, |n| n.get())
        .clamp(1, MAX_READER_THREADS)
        .min(items.len());
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Result<T>>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = crate::panic::catch_result("cli-target", || job(item));
                *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });
    slots
        .into_iter()
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .unwrap_or_else(|| Err(Error::Usage("not read".into())))
        })
        .collect()
}

/// Every process under `root` (children, theirs, ...), from the parent pids in
/// /proc/PID/stat; breadth first, each level by pid. `root` itself must exist.
pub(super) fn descendants(root: i32) -> Result<Vec<i32>> {
    let stat = format!("/proc/{root}/stat");
    std::fs::metadata(&stat).map_err(|e| Error::io(stat, e))?;
    let mut parent_of: Vec<(i32, i32)> = Vec::new();
    let dir = std::fs::read_dir("/proc").map_err(|e| Error::io("/proc", e))?;
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        // A process may end while the list is read: it is simply not in the tree.
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: comm may hold spaces and parentheses, so the fields
        // are counted from the last `)`.
        let ppid = text
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<i32>().ok());
        // Not pyunwind itself (run from a shell under the root).
        if let Some(ppid) = ppid.filter(|_| u32::try_from(pid).ok() != Some(std::process::id())) {
            parent_of.push((pid, ppid));
        }
    }
    parent_of.sort_unstable();
    let mut out = Vec::new();
    let mut level = vec![root];
    while !level.is_empty() {
        let next: Vec<i32> = parent_of
            .iter()
            .filter(|(pid, ppid)| level.contains(ppid) && *pid != root && !out.contains(pid))
            .map(|(pid, _)| *pid)
            .collect();
        out.extend(&next);
        level = next;
    }
    Ok(out)
}

/// One target read: how it was given, its pid, and its report and text or its error entry.
pub(super) type TargetRead = (
    Spec,
    Option<u32>,
    std::result::Result<(Report, String), TargetError>,
);

/// The targets to read, each with whether it came from a `--children` tree (where a process
/// without Python is left out rather than an error).
pub(super) fn with_descendants(specs: Vec<Spec>, children: bool) -> Vec<(Spec, bool)> {
    let mut targets: Vec<(Spec, bool)> = Vec::new();
    for spec in specs {
        match (&spec, children) {
            // With --children the root is part of the tree too: a launcher may be a shell.
            (Spec::Live(root), true) => {
                // A root that is gone is read as a target, which gives its error entry.
                let Ok(tree) = descendants(*root) else {
                    targets.push((spec, false));
                    continue;
                };
                targets.push((spec.clone(), true));
                for pid in tree {
                    if !targets
                        .iter()
                        .any(|(s, _)| matches!(s, Spec::Live(p) if *p == pid))
                    {
                        targets.push((Spec::Live(pid), true));
                    }
                }
            }
            _ => targets.push((spec, false)),
        }
    }
    targets
}

/// Each target's outcome, with the run's exit status; the processes of a tree in which no
/// Python runs (a shell, a compiler) are not targets, and are named on stderr.
pub(super) fn outcomes(
    targets: Vec<(Spec, bool)>,
    results: Vec<Result<(Report, String)>>,
    host: &str,
) -> Result<(Vec<TargetRead>, i32)> {
    let mut left_out = Vec::new();
    let mut status = 0;
    let mut read = Vec::new();
    for ((spec, from_tree), r) in targets.into_iter().zip(results) {
        match r {
            Err(Error::NoPython(_)) if from_tree => left_out.push(match &spec {
                // Named as ps names it, so that the note says what was left out.
                Spec::Live(pid) => match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
                    Ok(comm) => format!("{pid} ({})", comm.trim_end()),
                    Err(_) => pid.to_string(),
                },
                Spec::Core(_) => spec.label(),
            }),
            Err(e) => {
                status = status.max(e.exit_status());
                let pid = match spec {
                    Spec::Live(pid) => u32::try_from(pid).ok(),
                    Spec::Core(_) => None,
                };
                let error = TargetError {
                    target: spec.label(),
                    host: Some(host.to_string()),
                    pid,
                    error: e.to_string(),
                };
                read.push((spec, pid, Err(error)));
            }
            Ok((report, text)) => {
                let pid = match spec {
                    Spec::Live(pid) => u32::try_from(pid).ok(),
                    Spec::Core(_) => report.python.pid,
                };
                read.push((spec, pid, Ok((report, text))));
            }
        }
    }
    if read.is_empty() {
        return Err(Error::NoPython(format!(
            "no process of the tree runs Python ({} looked at)",
            left_out.len()
        )));
    }
    if !left_out.is_empty() {
        eprintln!(
            "pyunwind: no Python in {} process(es) of the tree, left out: {}",
            left_out.len(),
            left_out.join(", ")
        );
    }
    Ok((read, status))
}

/// `--group` and `--tree` over the targets read: their threads' stacks, and their tasks' and
/// greenlets' when asked for.
pub(super) fn group_reports(
    read: Vec<TargetRead>,
    by: GroupBy,
    grouping: &Grouping,
    out: &Output,
    host: &str,
    status: i32,
) -> Result<(String, i32)> {
    let mut grouper = Gatherer::new(by, grouping.tree, out.why);
    if out.async_ || out.tasks {
        grouper = grouper.with_tasks(true);
    }
    if out.greenlets {
        grouper = grouper.with_greenlets(true);
    }
    let mut failed = Vec::new();
    for (_, pid, r) in read {
        match r {
            // Every report's tasks and greenlets too (none: an empty list), so that
            // each grouping counts the same processes.
            Ok((report, _)) => {
                grouper.add_report(Some(host), pid, report.threads.iter().map(From::from));
                grouper.add_tasks(
                    Some(host),
                    pid,
                    Some(report.tasks.iter().flatten().map(From::from)),
                );
                grouper.add_greenlets(
                    Some(host),
                    pid,
                    Some(
                        report
                            .greenlets
                            .iter()
                            .flatten()
                            .filter_map(ThreadIn::greenlet),
                    ),
                );
            }
            Err(e) => failed.push(e),
        }
    }
    let gathered = grouper.finish(failed);
    if out.json {
        write_json(&gathered)?;
        return Ok((String::new(), status));
    }
    Ok((
        group_text::render(&gathered, &mut render::Sources::default()),
        status,
    ))
}

/// `--json` over several targets: one line per target, in the order given, each what
/// `pid PID --json` prints for it.
pub(super) fn json_lines(read: &[TargetRead], host: &str, status: i32) -> Result<(String, i32)> {
    let mut w = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    for (_, pid, r) in read {
        let written = match r {
            Ok((report, _)) => serde_json::to_writer(
                &mut w,
                &Hosted {
                    host,
                    pid: *pid,
                    report,
                },
            ),
            Err(e) => serde_json::to_writer(&mut w, e),
        }
        .map_err(std::io::Error::from)
        .and_then(|()| w.write_all(b"\n"));
        if let Err(e) = written {
            return broken_pipe_ok(Err(e)).map(|()| (String::new(), status));
        }
    }
    broken_pipe_ok(w.flush()).map(|()| (String::new(), status))
}

/// The text of several targets: each report (or error) under a header naming the target.
pub(super) fn text_sections(read: &[TargetRead], host: &str) -> String {
    let mut text = String::new();
    for (i, (spec, pid, r)) in read.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        // `==> pid 4101 on b7 <==`, `==> core /cores/core.4101 (pid 4101) on b7 <==`.
        let what = match (spec, pid) {
            (Spec::Live(p), _) => format!("pid {p}"),
            (Spec::Core(c), Some(p)) => format!("core {} (pid {p})", c.display()),
            (Spec::Core(c), None) => format!("core {}", c.display()),
        };
        match r {
            Ok((_, body)) => text += &format!("==> {what} on {host} <==\n{body}"),
            Err(e) => text += &format!("==> {what} on {host} <==\nerror: {}\n", e.error),
        }
    }
    text
}

/// `pyunwind merge`: every report of every input, grouped; `tree`: also merged into one call
/// tree; `why`: also the straggler verdict.
pub(super) fn merge(
    inputs: &[PathBuf],
    by: GroupByArg,
    tree: bool,
    why: bool,
    json: bool,
) -> Result<(String, i32)> {
    let by = match by {
        GroupByArg::Line => GroupBy::Line,
        GroupByArg::Function => GroupBy::Function,
    };
    // Reports made with --async or --tasks have their tasks grouped too, those made with
    // --greenlets their greenlets.
    let mut grouper = Gatherer::new(by, tree, why)
        .with_tasks(false)
        .with_greenlets(false);
    let mut failed = Vec::new();
    for path in inputs {
        let name = path.display().to_string();
        if name == "-" {
            let stdin = std::io::stdin();
            let input = std::io::BufReader::with_capacity(1 << 16, stdin.lock());
            crate::report::merge::merge_input(&name, input, &mut grouper, &mut failed);
            continue;
        }
        match std::fs::File::open(path) {
            Ok(f) => crate::report::merge::merge_input(
                &name,
                std::io::BufReader::with_capacity(1 << 16, f),
                &mut grouper,
                &mut failed,
            ),
            Err(e) => failed.push(TargetError {
                target: name,
                host: None,
                pid: None,
                error: e.to_string(),
            }),
        }
    }
    let status = if failed.is_empty() { 0 } else { 1 };
    let gathered = grouper.finish(failed);
    if json {
        write_json(&gathered)?;
        return Ok((String::new(), status));
    }
    Ok((
        group_text::render(&gathered, &mut render::Sources::default()),
        status,
    ))
}
