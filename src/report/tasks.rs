//! Text of the asyncio views: per-task async backtraces (`py-bt-async`), the task tree (like
//! `python -m asyncio pstree`) and the task table (like `python -m asyncio ps`).

use std::fmt::Write;

pub use super::task_tree::tree;
use super::task_tree::{by_id, cycles, tree_into};
use super::text::{errors, frames, thread_header, traceback, Sources};
use super::text_out::TextOut;
use crate::memory::addr_map::{AddrMap, AddrSet};
use crate::model::number_text::{push_decimal, push_hex};
use crate::model::{AwaitingKind, LoopReport, Report, TaskReport};

/// Most await paths shown for one task (fan-in multiplies them).
const MAX_PATHS: usize = 64;

/// `Task "name" (0x7f..)`.
pub fn task_label(t: &TaskReport) -> String {
    format!("Task {:?} ({:#x})", t.name, t.id)
}

fn awaiting_text(t: &TaskReport, tasks: &AddrMap<&TaskReport>) -> Option<String> {
    let a = t.awaiting.as_ref()?;
    let what = match tasks.get(&a.id) {
        Some(other) if a.kind == AwaitingKind::Task => task_label(other),
        _ => format!("{} {:#x}", a.type_name, a.id),
    };
    let mut s = format!("awaits {what} ({})", a.kind.as_str());
    if let Some(n) = a.executor_native_id {
        write!(s, ", run by executor thread {n}").unwrap();
    }
    Some(s)
}

/// Every chain of awaiters from `t` up to a root (or a cycle), `MAX_PATHS` at most.
fn await_paths(t: &TaskReport, tasks: &AddrMap<&TaskReport>) -> (Vec<Vec<u64>>, bool) {
    let mut paths = Vec::new();
    let mut truncated = false;
    // (path so far), depth-first with an explicit stack.
    let mut stack: Vec<Vec<u64>> = vec![vec![t.id]];
    while let Some(path) = stack.pop() {
        if paths.len() >= MAX_PATHS {
            truncated = true;
            break;
        }
        let last = *path.last().unwrap();
        let parents: Vec<u64> = tasks
            .get(&last)
            .map(|x| x.awaited_by.iter().chain(&x.owned_by).copied().collect())
            .unwrap_or_default();
        if parents.is_empty() || path[..path.len() - 1].contains(&last) {
            paths.push(path);
            continue;
        }
        for p in parents.into_iter().rev() {
            let mut next = path.clone();
            next.push(p);
            stack.push(next);
        }
    }
    (paths, truncated)
}

fn task_stack(
    t: &TaskReport,
    tasks: &AddrMap<&TaskReport>,
    loops: &AddrMap<&LoopReport>,
    src: &mut Sources,
    out: &mut String,
) {
    let mut head = format!("{} {}", task_label(t), t.state);
    if t.on_cpu {
        head.push_str(", running");
    }
    if !t.supported {
        write!(
            head,
            ", a {} (not an asyncio.Task: not decoded)",
            t.type_name
        )
        .unwrap();
    }
    writeln!(out, "{head}:").unwrap();
    let (paths, truncated) = await_paths(t, tasks);
    for (i, path) in paths.iter().enumerate() {
        if paths.len() > 1 {
            writeln!(out, " await path {} of {}:", i + 1, paths.len()).unwrap();
        }
        for (depth, id) in path.iter().enumerate() {
            let Some(task) = tasks.get(id) else { continue };
            if depth > 0 {
                let prev = tasks.get(&path[depth - 1]);
                let owned = prev.is_some_and(|p| p.owned_by.contains(id));
                let cycle = path[..depth].contains(id);
                writeln!(
                    out,
                    "  {} {}{}",
                    if owned {
                        "<- owned by"
                    } else {
                        "<- awaited by"
                    },
                    task_label(task),
                    if cycle {
                        " (await cycle: see above)"
                    } else {
                        ""
                    }
                )
                .unwrap();
                if cycle {
                    break;
                }
            }
            if let Some(a) = awaiting_text(task, tasks).filter(|_| depth == 0) {
                writeln!(out, "  {a}").unwrap();
            }
            frames(&task.frames, "  ", src, out);
        }
        let root = path.last().and_then(|id| tasks.get(id)).unwrap_or(&t);
        match loops.get(&root.loop_) {
            Some(l) if l.running => {
                writeln!(
                    out,
                    "  <- event loop {:#x} on thread {}:",
                    l.id,
                    l.native_id.map_or("?".to_string(), |n| n.to_string())
                )
                .unwrap();
                frames(&l.frames, "  ", src, out);
            }
            Some(l) => writeln!(out, "  <- event loop {:#x} (not running)", l.id).unwrap(),
            None => {}
        }
    }
    if truncated {
        writeln!(out, "  (more await paths not shown)").unwrap();
    }
}

/// `py-bt-async`: for each thread, its loop's tasks with their async stacks, or its plain stack.
pub fn async_bt(r: &Report, src: &mut Sources) -> String {
    let mut out = String::new();
    let tasks = by_id(r);
    let loops: AddrMap<&LoopReport> = r.loops.iter().flatten().map(|l| (l.id, l)).collect();
    let all: Vec<&TaskReport> = r.tasks.iter().flatten().collect();
    let mut shown: AddrSet = AddrSet::default();
    for (i, th) in r.threads.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let mine: Vec<&LoopReport> = r
            .loops
            .iter()
            .flatten()
            .filter(|l| l.running && l.native_id.is_some() && l.native_id == th.native_id)
            .collect();
        writeln!(out, "{}", thread_header(r, th)).unwrap();
        if mine.is_empty() {
            traceback(th, src, &mut out);
            continue;
        }
        for l in mine {
            let ts: Vec<&&TaskReport> = all.iter().filter(|t| t.loop_ == l.id).collect();
            writeln!(
                out,
                "Event loop {:#x} ({}), {} pending task{}:",
                l.id,
                l.type_name,
                ts.len(),
                if ts.len() == 1 { "" } else { "s" }
            )
            .unwrap();
            for t in ts {
                shown.insert(t.id);
                out.push('\n');
                task_stack(t, &tasks, &loops, src, &mut out);
            }
        }
    }
    let rest: Vec<&&TaskReport> = all.iter().filter(|t| !shown.contains(&t.id)).collect();
    if !rest.is_empty() {
        out.push('\n');
        writeln!(out, "Tasks of loops that no thread is running:").unwrap();
        for t in rest {
            out.push('\n');
            task_stack(t, &tasks, &loops, src, &mut out);
        }
    }
    cycles(r, &tasks, &mut out);
    errors(r, &mut out);
    out
}

/// The task table's columns.
const COLUMNS: usize = 7;
/// The widest a column is padded to (a longer cell is not cut).
const MAX_COLUMN: usize = 60;

/// The task table: one row per task, like `python -m asyncio ps`.
pub fn table(r: &Report) -> String {
    let mut out = TextOut::kept();
    table_into(r, &by_id(r), &mut out);
    out.into_kept()
}

/// The table written at the end of `out`: each row's cells are made twice, once to measure
/// the columns and once to write them, into one buffer, so no row keeps strings of its own.
/// Both passes go over the rows in parts, on every core (100,000 rows: 20 MB of text).
fn table_into(r: &Report, tasks: &AddrMap<&TaskReport>, out: &mut TextOut) {
    let all: Vec<&TaskReport> = r.tasks.iter().flatten().collect();
    let parts: Vec<&[&TaskReport]> = all.chunks(TABLE_PART).collect();
    let mut widths = [0usize; COLUMNS];
    let mut cell = String::new();
    let mut ends = [0usize; COLUMNS];
    // The heading, measured with the rows and written first.
    row_cells(None, tasks, &mut cell, &mut ends);
    measure(&cell, &ends, &mut widths);
    let measured = crate::parallel::map(&parts, 1, true, |part| {
        let mut widths = [0usize; COLUMNS];
        let (mut cell, mut ends) = (String::new(), [0usize; COLUMNS]);
        for t in *part {
            row_cells(Some(t), tasks, &mut cell, &mut ends);
            measure(&cell, &ends, &mut widths);
        }
        widths
    });
    for w in measured {
        for (c, w) in w.into_iter().enumerate() {
            widths[c] = widths[c].max(w);
        }
    }
    write_row(&cell, &ends, &widths, out.text());
    let written = crate::parallel::map(&parts, 1, true, |part| {
        let mut text = String::new();
        let (mut cell, mut ends) = (String::new(), [0usize; COLUMNS]);
        for t in *part {
            row_cells(Some(t), tasks, &mut cell, &mut ends);
            write_row(&cell, &ends, &widths, &mut text);
        }
        text
    });
    for text in written {
        out.push_part(&text);
    }
}

/// Rows a thread measures or writes at a time.
const TABLE_PART: usize = 4096;

/// Widens `widths` to this row's cells (up to [`MAX_COLUMN`]).
fn measure(cell: &str, ends: &[usize; COLUMNS], widths: &mut [usize; COLUMNS]) {
    for (c, text) in cells(cell, ends).enumerate() {
        widths[c] = widths[c].max(text.chars().count()).min(MAX_COLUMN);
    }
}

/// A row's cells, as [`row_cells`] wrote them one after another into `cell`.
fn cells<'a>(cell: &'a str, ends: &'a [usize; COLUMNS]) -> impl Iterator<Item = &'a str> {
    ends.iter()
        .enumerate()
        .map(move |(c, &end)| &cell[if c == 0 { 0 } else { ends[c - 1] }..end])
}

/// One row, its cells padded to `widths`, trailing spaces cut.
fn write_row(cell: &str, ends: &[usize; COLUMNS], widths: &[usize; COLUMNS], out: &mut String) {
    let start = out.len();
    for (c, text) in cells(cell, ends).enumerate() {
        out.push_str(text);
        if c + 1 < COLUMNS {
            // As `{text:<width$}`, then the two spaces between columns.
            let pad = widths[c].saturating_sub(text.chars().count());
            push_spaces(out, pad + 2);
        }
    }
    let kept = out[start..].trim_end().len();
    out.truncate(start + kept);
    out.push('\n');
}

/// Appends `n` spaces (a table's row pads a cell or two with dozens).
fn push_spaces(out: &mut String, mut n: usize) {
    const SPACES: &str = "                                                                ";
    while n > 0 {
        let k = n.min(SPACES.len());
        out.push_str(&SPACES[..k]);
        n -= k;
    }
}

/// One row's cells, written one after another into `cell` (cleared), each ending at its
/// `ends` entry; None: the heading.
fn row_cells(
    t: Option<&TaskReport>,
    tasks: &AddrMap<&TaskReport>,
    cell: &mut String,
    ends: &mut [usize; COLUMNS],
) {
    cell.clear();
    let Some(t) = t else {
        let heading = [
            "thread",
            "task id",
            "name",
            "state",
            "awaiting",
            "coroutine stack",
            "awaited by",
        ];
        for (c, h) in heading.iter().enumerate() {
            cell.push_str(h);
            ends[c] = cell.len();
        }
        return;
    };
    match t.native_id {
        Some(n) => push_decimal(cell, n),
        None => cell.push('-'),
    }
    ends[0] = cell.len();
    push_hex(cell, t.id);
    ends[1] = cell.len();
    cell.push_str(&t.name);
    ends[2] = cell.len();
    cell.push_str(t.state);
    if t.on_cpu {
        cell.push_str(" (running)");
    }
    ends[3] = cell.len();
    match &t.awaiting {
        Some(a) => {
            cell.push_str(a.kind.as_str());
            cell.push(' ');
            cell.push_str(&a.type_name);
        }
        None => cell.push('-'),
    }
    ends[4] = cell.len();
    // Counted, not measured: an empty name is still a name.
    let mut n = 0;
    for f in t.frames.iter().filter_map(|f| f.function.as_deref()) {
        if n > 0 {
            cell.push_str(" <- ");
        }
        cell.push_str(f);
        n += 1;
    }
    if n == 0 {
        cell.push('-');
    }
    ends[5] = cell.len();
    let name = |cell: &mut String, id: &u64| match tasks.get(id) {
        Some(x) => cell.push_str(&x.name),
        None => push_hex(cell, *id),
    };
    let by = t
        .awaited_by
        .iter()
        .map(|id| (id, ""))
        .chain(t.owned_by.iter().map(|id| (id, " (owner)")));
    let mut n = 0;
    for (id, owner) in by {
        if n > 0 {
            cell.push_str(", ");
        }
        name(cell, id);
        cell.push_str(owner);
        n += 1;
    }
    if n == 0 {
        cell.push('-');
    }
    ends[6] = cell.len();
}

/// The task tree and/or the task table (`py-tasks`), then the report's errors.
pub fn tree_and_table(r: &Report, tree: bool, table: bool) -> String {
    let mut out = TextOut::kept();
    tree_and_table_into(r, tree, table, &mut out);
    out.into_kept()
}

/// [`tree_and_table`] at the end of `out` (100,000 tasks: 41 MB written out as it is made
/// where `out` streams).
pub fn tree_and_table_into(r: &Report, tree: bool, table: bool, out: &mut TextOut) {
    let tasks = by_id(r);
    if tree {
        tree_into(r, &tasks, out);
    }
    if table {
        if tree {
            out.text().push('\n');
        }
        table_into(r, &tasks, out);
    }
    errors(r, out.text());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: u64, awaited_by: &[u64]) -> TaskReport {
        TaskReport {
            id,
            name: format!("t{id}"),
            state: "pending",
            on_cpu: false,
            native_id: None,
            type_name: "Task".into(),
            supported: true,
            loop_: 0,
            frames: Vec::new(),
            awaiting: None,
            awaited_by: awaited_by.to_vec(),
            owned_by: Vec::new(),
            why: None,
        }
    }

    fn report(tasks: Vec<TaskReport>) -> Report {
        crate::report::test_support::tasks_report(tasks)
    }

    #[test]
    fn tree_of_a_small_graph() {
        // 1 awaits 2 and 3; 3 awaits 1 again only through 4 (a cycle back to the root's branch).
        let r = report(vec![
            task(1, &[]),
            task(2, &[1]),
            task(3, &[1]),
            task(4, &[3]),
        ]);
        assert_eq!(
            tree(&r),
            "└── (T) t1 [0x1]\n    ├── (T) t2 [0x2]\n    └── (T) t3 [0x3]\n        └── (T) t4 [0x4]\n"
        );
    }

    #[test]
    fn a_cycle_below_a_root_is_one_line() {
        // 2 and 3 await each other; 1 awaits 2.
        let r = report(vec![task(1, &[]), task(2, &[1, 3]), task(3, &[2])]);
        assert_eq!(
            tree(&r),
            "└── (T) t1 [0x1]\n    └── (T) t2 [0x2]\n        └── (T) t3 [0x3]\n            └── (T) t2 (await cycle)\n"
        );
    }

    /// A chain of 200,000 awaits (deeper than any recursion on a thread's stack could go) is
    /// printed without recursion and cut at the byte cap, not after gigabytes of indentation.
    #[test]
    fn a_very_deep_chain_is_cut_not_a_stack_overflow() {
        const DEPTH: u64 = 200_000;
        let tasks = (1..=DEPTH)
            .map(|i| task(i, &[i - 1][..usize::from(i > 1)]))
            .collect();
        let out = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || tree(&report(tasks)))
            .unwrap()
            .join()
            .unwrap();
        assert!(
            out.ends_with("(tree cut: too many lines)\n"),
            "{}",
            &out[out.len() - 200..]
        );
        assert!(
            out.len() < super::super::task_tree::MAX_TREE_BYTES + (1 << 20),
            "{}",
            out.len()
        );
        assert!(out.starts_with("└── (T) t1 [0x1]\n    └── (T) t2 [0x2]\n"));
    }
}
