//! Many targets in one run: reading them in parallel, a process's descendants (`--children`),
//! and `merge` of saved reports.

use std::path::PathBuf;

use super::{write_json, GroupByArg};
use crate::error::{Error, Result};
use crate::report::gather::Gatherer;
use crate::report::group::{GroupBy, TargetError};
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
