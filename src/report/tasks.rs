//! Text of the asyncio views: per-task async backtraces (`py-bt-async`), the task tree (like
//! `python -m asyncio pstree`) and the task table (like `python -m asyncio ps`).

use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use super::text::{errors, frames, thread_header, traceback, Sources};
use super::{FrameKind, FrameReport, LoopReport, Report, TaskReport};

/// Most await paths shown for one task (fan-in multiplies them).
const MAX_PATHS: usize = 64;
/// Most lines of the task tree.
const MAX_TREE_LINES: usize = 1_000_000;

fn by_id(r: &Report) -> HashMap<u64, &TaskReport> {
    r.tasks.iter().flatten().map(|t| (t.id, t)).collect()
}

/// `Task "name" (0x7f..)`.
pub fn task_label(t: &TaskReport) -> String {
    format!("Task {:?} ({:#x})", t.name, t.id)
}

fn awaiting_text(t: &TaskReport, tasks: &HashMap<u64, &TaskReport>) -> Option<String> {
    let a = t.awaiting.as_ref()?;
    let what = match tasks.get(&a.id) {
        Some(other) if a.kind == "task" => task_label(other),
        _ => format!("{} {:#x}", a.type_name, a.id),
    };
    let mut s = format!("awaits {what} ({})", a.kind);
    if let Some(n) = a.executor_native_id {
        write!(s, ", run by executor thread {n}").unwrap();
    }
    Some(s)
}

/// Every chain of awaiters from `t` up to a root (or a cycle), `MAX_PATHS` at most.
fn await_paths(t: &TaskReport, tasks: &HashMap<u64, &TaskReport>) -> (Vec<Vec<u64>>, bool) {
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
    tasks: &HashMap<u64, &TaskReport>,
    loops: &HashMap<u64, &LoopReport>,
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
    let loops: HashMap<u64, &LoopReport> = r.loops.iter().flatten().map(|l| (l.id, l)).collect();
    let all: Vec<&TaskReport> = r.tasks.iter().flatten().collect();
    let mut shown: HashSet<u64> = HashSet::new();
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
        writeln!(out, "{}", thread_header(th)).unwrap();
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

fn cycles(r: &Report, tasks: &HashMap<u64, &TaskReport>, out: &mut String) {
    let name = |id: &u64| tasks.get(id).map_or(format!("{id:#x}"), |t| t.name.clone());
    for c in r.cycles.iter().flatten() {
        let mut names: Vec<String> = c.iter().map(name).collect();
        if let Some(first) = c.first() {
            names.push(name(first));
        }
        writeln!(out, "cycle: {}", names.join(" -> ")).unwrap();
    }
}

fn frame_short(f: &FrameReport) -> String {
    match f.kind {
        FrameKind::Python | FrameKind::Jit => format!(
            "{} {}:{}",
            f.function.as_deref().unwrap_or("???"),
            f.file.as_deref().unwrap_or("???"),
            f.line.map_or("?".into(), |l| l.to_string())
        ),
        _ => format!("(unreadable frame at {:#x})", f.address.unwrap_or(0)),
    }
}

/// The task tree: each root task, its coroutine frames outermost first, and under its innermost
/// frame the tasks it awaits (or owns), like `python -m asyncio pstree`. Tasks in await
/// cycles have no root: the cycles are listed instead.
pub fn tree(r: &Report) -> String {
    let tasks = by_id(r);
    let all: Vec<&TaskReport> = r.tasks.iter().flatten().collect();
    // children[parent] = tasks the parent awaits or owns.
    let mut children: HashMap<u64, Vec<(u64, bool)>> = HashMap::new();
    for t in &all {
        for p in &t.awaited_by {
            children.entry(*p).or_default().push((t.id, false));
        }
        for p in &t.owned_by {
            children.entry(*p).or_default().push((t.id, true));
        }
    }
    let mut out = String::new();
    let mut lines = 0usize;
    let roots: Vec<&&TaskReport> = all
        .iter()
        .filter(|t| t.awaited_by.is_empty() && t.owned_by.is_empty())
        .collect();
    for (i, root) in roots.iter().enumerate() {
        let mut path = vec![root.id];
        node(
            root,
            false,
            "",
            i + 1 == roots.len(),
            &tasks,
            &children,
            &mut path,
            &mut lines,
            &mut out,
        );
    }
    if lines >= MAX_TREE_LINES {
        out.push_str("(tree cut: too many lines)\n");
    }
    cycles(r, &tasks, &mut out);
    out
}

#[allow(clippy::too_many_arguments)]
fn node(
    t: &TaskReport,
    owned: bool,
    prefix: &str,
    last: bool,
    tasks: &HashMap<u64, &TaskReport>,
    children: &HashMap<u64, Vec<(u64, bool)>>,
    path: &mut Vec<u64>,
    lines: &mut usize,
    out: &mut String,
) {
    if *lines >= MAX_TREE_LINES {
        return;
    }
    let branch = if last { "└── " } else { "├── " };
    let mut label = format!("(T) {} [{:#x}]", t.name, t.id);
    if owned {
        label.push_str(" (owned, not awaited)");
    }
    if t.on_cpu {
        label.push_str(" (running)");
    }
    writeln!(out, "{prefix}{branch}{label}").unwrap();
    *lines += 1;
    let mut prefix = format!("{prefix}{}", if last { "    " } else { "│   " });
    // Frames outermost first, each nested under the previous.
    let frames: Vec<&FrameReport> = t.frames.iter().rev().collect();
    for f in &frames {
        writeln!(out, "{prefix}└──  {}", frame_short(f)).unwrap();
        *lines += 1;
        prefix.push_str("    ");
    }
    if let Some(a) = &t.awaiting {
        if a.kind != "task" && a.kind != "gather" {
            writeln!(
                out,
                "{prefix}└──  awaits {} {:#x} ({})",
                a.type_name, a.id, a.kind
            )
            .unwrap();
            *lines += 1;
        }
    }
    let kids = children.get(&t.id).cloned().unwrap_or_default();
    for (i, (kid, owned)) in kids.iter().enumerate() {
        let Some(k) = tasks.get(kid) else { continue };
        let last = i + 1 == kids.len();
        if path.contains(kid) {
            writeln!(
                out,
                "{prefix}{}(T) {} (await cycle)",
                if last { "└── " } else { "├── " },
                k.name
            )
            .unwrap();
            *lines += 1;
            continue;
        }
        path.push(*kid);
        node(k, *owned, &prefix, last, tasks, children, path, lines, out);
        path.pop();
    }
}

/// The task table: one row per task, like `python -m asyncio ps`.
pub fn table(r: &Report) -> String {
    let tasks = by_id(r);
    let mut rows: Vec<[String; 7]> = vec![[
        "thread".into(),
        "task id".into(),
        "name".into(),
        "state".into(),
        "awaiting".into(),
        "coroutine stack".into(),
        "awaited by".into(),
    ]];
    for t in r.tasks.iter().flatten() {
        let stack: Vec<String> = t.frames.iter().filter_map(|f| f.function.clone()).collect();
        let by: Vec<String> = t
            .awaited_by
            .iter()
            .map(|id| tasks.get(id).map_or(format!("{id:#x}"), |x| x.name.clone()))
            .chain(t.owned_by.iter().map(|id| {
                format!(
                    "{} (owner)",
                    tasks.get(id).map_or(format!("{id:#x}"), |x| x.name.clone())
                )
            }))
            .collect();
        let state = if t.on_cpu {
            format!("{} (running)", t.state)
        } else {
            t.state.to_string()
        };
        rows.push([
            t.native_id.map_or("-".into(), |n| n.to_string()),
            format!("{:#x}", t.id),
            t.name.clone(),
            state,
            t.awaiting
                .as_ref()
                .map_or("-".into(), |a| format!("{} {}", a.kind, a.type_name)),
            if stack.is_empty() {
                "-".into()
            } else {
                stack.join(" <- ")
            },
            if by.is_empty() {
                "-".into()
            } else {
                by.join(", ")
            },
        ]);
    }
    let mut widths = [0usize; 7];
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count()).min(60);
        }
    }
    let mut out = String::new();
    for row in &rows {
        let mut line = String::new();
        for (i, (c, w)) in row.iter().zip(widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(c);
            } else {
                write!(line, "{c:<w$}  ").unwrap();
            }
        }
        writeln!(out, "{}", line.trim_end()).unwrap();
    }
    out
}
