//! The text of grouped output (`--group`, `--tree`, `merge`): the straggler verdict, then the
//! call tree or each group's headline over its stack, then what could not be read.

use std::collections::HashSet;
use std::fmt::Write;

use super::gather::Gathered;
use super::group::{Group, GroupFrame, Member, MemberWait, Members};
use super::text::{self, Sources};
use super::{straggler, tree};
use crate::model::{FrameKind, WaitKind};

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `1 process (pid 1234, host b7)`: the one process of a group, named by its member.
fn one_process(m: &Member) -> String {
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
}

/// `15 processes × MainThread`, `1 process (pid 1234, host b7) × MainThread [outlier]`,
/// `3 processes on 2 hosts × 6 threads (worker-0, worker-1, ...)`.
pub fn headline(g: &Group) -> String {
    let mut s = if g.processes == 1 {
        one_process(&g.members()[0])
    } else {
        let hosts: HashSet<Option<&str>> = g.members().iter().map(|m| m.host.as_deref()).collect();
        let mut s = plural(g.processes, "process", "processes");
        if hosts.len() > 1 {
            write!(s, " on {} hosts", hosts.len()).unwrap();
        }
        s
    };
    s.push_str(" × ");
    // Distinct names, most common first (then first seen).
    let mut names: Vec<(Option<&str>, usize)> = Vec::new();
    for m in g.members() {
        let name = m.any_name();
        match names.iter_mut().find(|(n, _)| *n == name) {
            Some(e) => e.1 += 1,
            None => names.push((name, 1)),
        }
    }
    names.sort_by_key(|n| std::cmp::Reverse(n.1));
    let shown = |n: Option<&str>| n.unwrap_or("(unnamed)").to_string();
    let (one, many) = if g.members()[0].task.is_some() {
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

/// A greenlet group's headline: how many, in how many processes, where (the innermost frame
/// outside gevent's own files: the program's call into the wait) and on what:
/// `12 greenlets in 2 processes wait in slow_upstream (app.py:11): socket 10.0.0.5:5432`.
pub fn greenlet_headline(g: &Group) -> String {
    let members = g.members();
    let mut s = plural(g.count, "greenlet", "greenlets");
    if g.processes == 1 {
        write!(s, " in {}", one_process(&members[0])).unwrap();
    } else {
        write!(s, " in {}", plural(g.processes, "process", "processes")).unwrap();
    }
    let waits: Vec<Option<&MemberWait>> = members
        .iter()
        .map(|m| m.waiting.as_ref().and_then(|w| w.as_deref()))
        .collect();
    let all_wait = waits.iter().all(Option::is_some);
    let one = g.count == 1;
    let verb = match (all_wait, one) {
        (true, true) => "waits in",
        (true, false) => "wait in",
        (false, true) => "is in",
        (false, false) => "are in",
    };
    let at = g
        .frames
        .iter()
        .find(|f| {
            f.kind == FrameKind::Python && !f.file.as_deref().unwrap_or("").contains("/gevent/")
        })
        .or(g.frames.first());
    match at {
        Some(f) => write!(s, " {verb} {}", straggler::place(f)).unwrap(),
        None => write!(s, " {verb} (no Python frames)").unwrap(),
    }
    if let Some(words) = wait_words(&waits) {
        write!(s, ": {words}").unwrap();
    }
    if g.outlier {
        s.push_str(" [outlier]");
    }
    s
}

/// The waits of a group's greenlets in words: `socket 10.0.0.5:5432` (one kind, one peer),
/// `socket (3 peers)`, `sleep`; kinds that differ counted, most common first: `sleep (3),
/// event (1)`; None when no greenlet shows a wait.
fn wait_words(waits: &[Option<&MemberWait>]) -> Option<String> {
    let mut kinds: Vec<(WaitKind, usize)> = Vec::new();
    for w in waits.iter().flatten() {
        match kinds.iter_mut().find(|k| k.0 == w.kind) {
            Some(k) => k.1 += 1,
            None => kinds.push((w.kind, 1)),
        }
    }
    if kinds.is_empty() {
        return None;
    }
    if kinds.len() > 1 || kinds[0].1 < waits.len() {
        kinds.sort_by_key(|k| std::cmp::Reverse(k.1));
        let unknown = waits.iter().filter(|w| w.is_none()).count();
        let mut parts: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} ({n})")).collect();
        if unknown > 0 {
            parts.push(format!("none shown ({unknown})"));
        }
        return Some(parts.join(", "));
    }
    let mut peers: Vec<&str> = waits
        .iter()
        .flatten()
        .filter_map(|w| w.peer.as_deref())
        .collect();
    peers.sort_unstable();
    peers.dedup();
    Some(match peers.len() {
        0 => kinds[0].0.to_string(),
        1 => format!("{} {}", kinds[0].0, peers[0]),
        n => format!("{} ({n} peers)", kinds[0].0),
    })
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
        let section = Section {
            title: "asyncio",
            noun: ("task", "tasks"),
            in_tree: "",
            order: "outermost coroutines first",
            alike: "identical await chains",
        };
        section.render(
            tasks,
            gathered.task_tree.as_deref(),
            grouped.reports,
            src,
            &mut out,
        );
    }
    if let Some(greenlets) = &grouped.greenlet_groups {
        let section = Section {
            title: "greenlets",
            noun: ("greenlet", "greenlets"),
            in_tree: " suspended",
            order: "outermost frames first",
            alike: "identical suspended stacks",
        };
        let tree = gathered.greenlet_tree.as_deref();
        section.render(greenlets, tree, grouped.reports, src, &mut out);
    }
    for f in &grouped.failed {
        writeln!(out, "\nerror: {}: {}", f.target, f.error).unwrap();
    }
    out
}

/// Each group's headline over its stack.
/// The tasks' or greenlets' part of grouped output: their merged tree with `--tree`, else
/// their groups, under a heading that says how many over how many processes.
struct Section {
    title: &'static str,
    noun: (&'static str, &'static str),
    /// Words after the count in the tree's heading (` suspended`).
    in_tree: &'static str,
    /// Which end of the stacks the tree starts from.
    order: &'static str,
    /// What the members of one group share.
    alike: &'static str,
}

impl Section {
    fn render(
        &self,
        members: &[Group],
        tree: Option<&[tree::TreeNode]>,
        reports: usize,
        src: &mut Sources,
        out: &mut String,
    ) {
        let count: usize = members.iter().map(|g| g.count).sum();
        let (one, many) = self.noun;
        match tree {
            Some(nodes) => {
                write!(
                    out,
                    "\n{}: call tree of {}{} over {}: {}\n",
                    self.title,
                    plural(count, one, many),
                    self.in_tree,
                    plural(reports, "process", "processes"),
                    self.order,
                )
                .unwrap();
                tree::render(nodes, out);
            }
            None => {
                write!(
                    out,
                    "\n{}: {} of {}, {}\n",
                    self.title,
                    plural(members.len(), "group", "groups"),
                    self.alike,
                    plural(count, one, many)
                )
                .unwrap();
                groups(members, src, out);
            }
        }
    }
}

fn groups(groups: &[Group], src: &mut Sources, out: &mut String) {
    for g in groups {
        if out.len() >= text::MAX_TEXT_BYTES {
            if !out.ends_with(text::TEXT_CUT) {
                out.push_str(text::TEXT_CUT);
            }
            break;
        }
        let head = match g.kind() {
            Members::Greenlets => greenlet_headline(g),
            _ => headline(g),
        };
        writeln!(out, "\n{head}").unwrap();
        if let Some(native) = &g.native_frames {
            let first = &g.members()[0];
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
    let mut interp = None;
    for f in frames {
        if out.len() >= text::MAX_TEXT_BYTES {
            if !out.ends_with(text::TEXT_CUT) {
                out.push_str(text::TEXT_CUT);
            }
            return;
        }
        if let Some(id) = f.interpreter_id {
            if let Some(inner) = interp.filter(|i| *i != id) {
                writeln!(
                    out,
                    "  --- interpreter {inner} (entered from interpreter {id}) ---"
                )
                .unwrap();
            }
            interp = Some(id);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FrameReport;
    use crate::report::group::{GroupBy, Grouper, ThreadIn};
    use crate::report::test_support::python_frame as py;

    fn wait(kind: WaitKind, peer: Option<&str>) -> Option<MemberWait> {
        Some(MemberWait {
            peer: peer.map(Into::into),
            ..MemberWait::of(kind)
        })
    }

    /// One group of greenlets on `frames`, one per wait, the first two in pid 1, the rest in
    /// pid 2.
    fn group(frames: &[FrameReport], waits: Vec<Option<MemberWait>>) -> Group {
        let mut g = Grouper::of(GroupBy::Line, Members::Greenlets);
        let n = waits.len();
        let mut waits = waits.into_iter();
        for pid in [1u32, 2] {
            let items: Vec<ThreadIn> = (0..if pid == 1 {
                2.min(n)
            } else {
                n.saturating_sub(2)
            })
                .map(|i| ThreadIn {
                    task: None,
                    greenlet: Some(0x100 * pid as u64 + i as u64),
                    wait: waits.next().unwrap(),
                    native_id: Some(pid as u64),
                    name: None,
                    native_name: None,
                    frames,
                    truncated: false,
                    why: None,
                    call: None,
                })
                .collect();
            g.add_report(Some("h"), Some(pid), items);
        }
        let mut out = g.finish(Vec::new()).groups;
        assert_eq!(out.len(), 1);
        out.remove(0)
    }

    #[test]
    fn greenlet_headlines_name_the_program_frame_and_the_waits() {
        // gevent's own frames are passed over: the program's call into the wait is named.
        let frames = [
            py("recv", "/v/gevent/_socket3.py", 475),
            py("slow_upstream", "/srv/app.py", 11),
            py("handle", "/srv/app.py", 30),
        ];
        let peer = Some("10.0.0.5:5432");
        let g = group(&frames, vec![wait(WaitKind::Socket, peer); 3]);
        assert!(g.threads.is_empty() && g.greenlets.len() == 3);
        assert_eq!(
            greenlet_headline(&g),
            "3 greenlets in 2 processes wait in slow_upstream (app.py:11): socket 10.0.0.5:5432"
        );
        let g = group(
            &frames,
            vec![
                wait(WaitKind::Socket, peer),
                wait(WaitKind::Socket, Some("10.0.0.6:5432")),
            ],
        );
        assert_eq!(
            greenlet_headline(&g),
            "2 greenlets in 1 process (pid 1, host h) wait in slow_upstream (app.py:11): \
             socket (2 peers) [outlier]"
        );
        let g = group(
            &frames,
            vec![
                wait(WaitKind::Event, None),
                None,
                wait(WaitKind::Sleep, None),
                wait(WaitKind::Sleep, None),
            ],
        );
        assert_eq!(
            greenlet_headline(&g),
            "4 greenlets in 2 processes are in slow_upstream (app.py:11): sleep (2), event (1), \
             none shown (1)"
        );
        // No frame outside gevent's: its innermost frame.
        let g = group(&frames[..1], vec![None]);
        assert_eq!(
            greenlet_headline(&g),
            "1 greenlet in 1 process (pid 1, host h) is in recv (_socket3.py:475) [outlier]"
        );
    }
}
