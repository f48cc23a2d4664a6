//! The text of grouped output (`--group`, `--tree`, `merge`): the straggler verdict, then the
//! call tree or each group's headline over its stack, then what could not be read.

use std::collections::HashSet;
use std::fmt::Write;

use super::gather::Gathered;
use super::group::{Group, GroupFrame};
use super::text::{self, Sources};
use super::{straggler, tree, FrameKind};

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `15 processes × MainThread`, `1 process (pid 1234, host b7) × MainThread [outlier]`,
/// `3 processes on 2 hosts × 6 threads (worker-0, worker-1, ...)`.
pub fn headline(g: &Group) -> String {
    let mut s = if g.processes == 1 {
        let m = &g.threads[0];
        let mut s = String::from("1 process (pid ");
        match m.pid {
            Some(p) => write!(s, "{p}").unwrap(),
            None => s.push('?'),
        }
        if let Some(h) = &m.host {
            write!(s, ", host {h}").unwrap();
        }
        s.push(')');
        s
    } else {
        let hosts: HashSet<Option<&str>> = g.threads.iter().map(|m| m.host.as_deref()).collect();
        let mut s = plural(g.processes, "process", "processes");
        if hosts.len() > 1 {
            write!(s, " on {} hosts", hosts.len()).unwrap();
        }
        s
    };
    s.push_str(" × ");
    // Distinct names, most common first (then first seen).
    let mut names: Vec<(Option<&str>, usize)> = Vec::new();
    for m in &g.threads {
        let name = m.any_name();
        match names.iter_mut().find(|(n, _)| *n == name) {
            Some(e) => e.1 += 1,
            None => names.push((name, 1)),
        }
    }
    names.sort_by_key(|n| std::cmp::Reverse(n.1));
    let shown = |n: Option<&str>| n.unwrap_or("(unnamed)").to_string();
    let (one, many) = if g.threads[0].task.is_some() {
        ("task", "tasks")
    } else {
        ("thread", "threads")
    };
    if names.len() == 1 && g.count == g.processes && one == "thread" {
        s.push_str(&shown(names[0].0));
    } else if names.len() == 1 {
        write!(
            s,
            "{} named {}",
            plural(g.count, one, many),
            shown(names[0].0)
        )
        .unwrap();
    } else {
        const MAX_NAMES_SHOWN: usize = 3;
        let mut list: Vec<String> = names
            .iter()
            .take(MAX_NAMES_SHOWN)
            .map(|(n, _)| shown(*n))
            .collect();
        if names.len() > MAX_NAMES_SHOWN {
            list.push("...".into());
        }
        write!(s, "{} ({})", plural(g.count, one, many), list.join(", ")).unwrap();
    }
    // As a thread's header says it: `[syscall: futex]`.
    if let Some(why) = &g.why {
        match (&why.state, &why.syscall) {
            (Some(state), Some(call)) => write!(s, " [{state}: {call}]").unwrap(),
            (Some(state), None) => write!(s, " [{state}]").unwrap(),
            (None, _) => {}
        }
        if let Some(kind) = &why.waiting {
            write!(s, " (waits: {kind})").unwrap();
        }
    }
    if g.outlier {
        s.push_str(" [outlier]");
    }
    s
}

/// The text of grouped output: the straggler verdict (`--why`, several processes); a summary
/// line, then the call tree (`--tree`) or each group's headline over its stack; the task
/// groups; then the targets that could not be read.
pub fn render(gathered: &Gathered, src: &mut Sources) -> String {
    let grouped = &gathered.grouped;
    // The verdict first: it is the answer; the tree or the groups are how it was found.
    let mut out = match &gathered.verdict {
        Some(v) => straggler::render(v) + "\n",
        None => String::new(),
    };
    match &gathered.tree {
        Some(nodes) => {
            writeln!(
                out,
                "Call tree of {} over {}: outermost frames first, each with how many threads \
                 pass through it",
                plural(grouped.threads, "thread", "threads"),
                plural(grouped.reports, "process", "processes"),
            )
            .unwrap();
            tree::render(nodes, &mut out);
        }
        None => {
            writeln!(
                out,
                "{} of identical Python stacks over {}, {}",
                plural(grouped.groups.len(), "group", "groups"),
                plural(grouped.reports, "process", "processes"),
                plural(grouped.threads, "thread", "threads"),
            )
            .unwrap();
            groups(&grouped.groups, src, &mut out);
        }
    }
    if let Some(tasks) = &grouped.task_groups {
        let count: usize = tasks.iter().map(|g| g.count).sum();
        write!(
            out,
            "\nasyncio: {} of identical await chains, {}\n",
            plural(tasks.len(), "group", "groups"),
            plural(count, "task", "tasks")
        )
        .unwrap();
        groups(tasks, src, &mut out);
    }
    for f in &grouped.failed {
        writeln!(out, "\nerror: {}: {}", f.target, f.error).unwrap();
    }
    out
}

/// Each group's headline over its stack.
fn groups(groups: &[Group], src: &mut Sources, out: &mut String) {
    for g in groups {
        if out.len() >= text::MAX_TEXT_BYTES {
            if !out.ends_with(text::TEXT_CUT) {
                out.push_str(text::TEXT_CUT);
            }
            break;
        }
        writeln!(out, "\n{}", headline(g)).unwrap();
        if let Some(native) = &g.native_frames {
            let first = &g.threads[0];
            writeln!(
                out,
                "  (native frames of thread {} in pid {})",
                first.native_id.map_or("?".into(), |n| n.to_string()),
                first.pid.map_or("?".into(), |p| p.to_string())
            )
            .unwrap();
            text::frames(native, "  ", src, out);
        } else if g.frames.is_empty() {
            out.push_str("  (no Python frames)\n");
        } else {
            group_frames(&g.frames, src, out);
        }
        if g.truncated {
            out.push_str("  (older frames not shown: the walk stopped before the first frame)\n");
        }
    }
}

fn group_frames(frames: &[GroupFrame], src: &mut Sources, out: &mut String) {
    for f in frames {
        if out.len() >= text::MAX_TEXT_BYTES {
            if !out.ends_with(text::TEXT_CUT) {
                out.push_str(text::TEXT_CUT);
            }
            return;
        }
        match f.kind {
            FrameKind::Unreadable => match &f.reason {
                Some(r) => writeln!(out, "  (unreadable frame: {r})").unwrap(),
                None => out.push_str("  (unreadable frame)\n"),
            },
            _ => {
                let file = f.file.as_deref().unwrap_or("???");
                let func = f.function.as_deref().unwrap_or("???");
                match (f.line, f.mixed) {
                    (Some(l), _) => {
                        writeln!(out, "  File \"{file}\", line {l}, in {func}").unwrap();
                        if let Some(code) = src.shown(file, l) {
                            writeln!(out, "    {code}").unwrap();
                        }
                    }
                    (None, true) => {
                        writeln!(out, "  File \"{file}\", lines differ, in {func}").unwrap()
                    }
                    (None, false) => writeln!(out, "  File \"{file}\", line ?, in {func}").unwrap(),
                }
            }
        }
    }
}
