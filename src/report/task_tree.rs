//! The task tree (like `python -m asyncio pstree`): each root task, its coroutine frames
//! outermost first, and under its innermost frame the tasks it awaits or owns. The children of
//! a task with many (a gather of 100,000) are drawn on every core, in batches, and written in
//! order.

use std::fmt::Write;
use std::rc::Rc;

use super::text_out::TextOut;
use crate::memory::addr_map::{AddrMap, AddrSet};
use crate::model::number_text::{push_decimal, push_hex};
use crate::model::{AwaitingKind, FrameKind, FrameReport, Report, TaskReport};

/// Most lines of the task tree.
const MAX_TREE_LINES: usize = 1_000_000;
/// Most bytes of the task tree: a deep chain indents every line further (4 characters a
/// level), so lines alone do not bound it.
pub(super) const MAX_TREE_BYTES: usize = 64 << 20;
/// Children of one task past which they are drawn in parallel.
const PARALLEL_CHILDREN: usize = 1024;
/// Children one thread draws at a time.
const CHILDREN_BATCH: usize = 256;

/// The tasks of `r` by id.
pub(super) fn by_id(r: &Report) -> AddrMap<&TaskReport> {
    r.tasks.iter().flatten().map(|t| (t.id, t)).collect()
}

/// Each await cycle, `cycle: a -> b -> a`.
pub(super) fn cycles(r: &Report, tasks: &AddrMap<&TaskReport>, out: &mut String) {
    let name = |id: &u64| tasks.get(id).map_or(format!("{id:#x}"), |t| t.name.clone());
    for c in r.cycles.iter().flatten() {
        let mut names: Vec<String> = c.iter().map(name).collect();
        if let Some(first) = c.first() {
            names.push(name(first));
        }
        writeln!(out, "cycle: {}", names.join(" -> ")).unwrap();
    }
}

/// A frame as the tree shows it, `function file:line`, written at the end of `out`.
pub(super) fn frame_short(f: &FrameReport, out: &mut String) {
    match f.kind {
        FrameKind::Python | FrameKind::Jit => {
            out.push_str(f.function.as_deref().unwrap_or("???"));
            out.push(' ');
            out.push_str(f.file.as_deref().unwrap_or("???"));
            out.push(':');
            match f.line {
                Some(l) => push_decimal(out, l.into()),
                None => out.push('?'),
            }
        }
        _ => write!(out, "(unreadable frame at {:#x})", f.address.unwrap_or(0)).unwrap(),
    }
}

/// The task tree: each root task, its coroutine frames outermost first, and under its innermost
/// frame the tasks it awaits (or owns), like `python -m asyncio pstree`. Tasks in await
/// cycles have no root: the cycles are listed instead.
pub fn tree(r: &Report) -> String {
    let mut out = TextOut::kept();
    tree_into(r, &by_id(r), &mut out);
    out.into_kept()
}

pub(super) fn tree_into(r: &Report, tasks: &AddrMap<&TaskReport>, out: &mut TextOut) {
    let limits = Limits {
        lines: MAX_TREE_LINES,
        bytes: MAX_TREE_BYTES,
    };
    draw(r, tasks, out, limits, true);
}

/// The most lines and bytes of a tree.
#[derive(Clone, Copy)]
struct Limits {
    lines: usize,
    bytes: usize,
}

/// [`tree_into`] within `limits`, a task's many children drawn in parallel or not.
fn draw(
    r: &Report,
    tasks: &AddrMap<&TaskReport>,
    out: &mut TextOut,
    limits: Limits,
    parallel: bool,
) {
    let all: Vec<&TaskReport> = r.tasks.iter().flatten().collect();
    // children[parent] = tasks the parent awaits or owns.
    let mut children: AddrMap<Vec<(u64, bool)>> = AddrMap::default();
    for t in &all {
        for p in &t.awaited_by {
            children.entry(*p).or_default().push((t.id, false));
        }
        for p in &t.owned_by {
            children.entry(*p).or_default().push((t.id, true));
        }
    }
    let roots: Vec<&TaskReport> = all
        .iter()
        .filter(|t| t.awaited_by.is_empty() && t.owned_by.is_empty())
        .copied()
        .collect();
    let start = out.len();
    let mut lines = Lines {
        out,
        start,
        count: 0,
        limits,
        starts: None,
    };
    let root_prefix: Rc<str> = Rc::from("");
    let steps = roots
        .iter()
        .enumerate()
        .rev()
        .map(|(i, t)| Step::Node {
            t,
            owned: false,
            prefix: root_prefix.clone(),
            last: i + 1 == roots.len(),
        })
        .collect();
    let walk = Walk {
        tasks,
        children: &children,
        parallel,
    };
    if !walk.run(steps, Vec::new(), &mut lines) {
        out_cut(lines.out);
    }
    cycles(r, tasks, lines.out.text());
}

fn out_cut(out: &mut TextOut) {
    out.text().push_str("(tree cut: too many lines)\n");
}

/// The tree's lines, counted and bounded.
struct Lines<'a, 'o> {
    out: &'a mut TextOut<'o>,
    /// Where the tree began in `out`.
    start: usize,
    count: usize,
    limits: Limits,
    /// Where each line starts, for text drawn apart ([`Lines::append`] cuts it at a line).
    starts: Option<Vec<usize>>,
}

impl Lines<'_, '_> {
    /// Room for one more line: false once the tree is at its limits ([`MAX_TREE_LINES`],
    /// [`MAX_TREE_BYTES`]). The lines so far are written out when the text streams.
    fn room(&mut self) -> bool {
        self.out.spill();
        if self.count >= self.limits.lines || self.out.len() - self.start >= self.limits.bytes {
            return false;
        }
        self.count += 1;
        if let Some(s) = &mut self.starts {
            s.push(self.out.len());
        }
        true
    }

    /// The lines of a part drawn apart (`text`, its lines starting at `starts`), as many as
    /// [`Lines::room`] lets in: false when it let in fewer than all.
    fn append(&mut self, text: &str, starts: &[usize]) -> bool {
        let bytes = self.out.len() - self.start;
        let last_start = starts.last().copied().unwrap_or(0);
        if self.count + starts.len() <= self.limits.lines && bytes + last_start < self.limits.bytes
        {
            self.count += starts.len();
            self.out.push_part(text);
            return true;
        }
        for (i, &from) in starts.iter().enumerate() {
            if !self.room() {
                return false;
            }
            let to = starts.get(i + 1).copied().unwrap_or(text.len());
            self.out.text().push_str(&text[from..to]);
        }
        true
    }
}

/// One step of the task tree's depth-first walk.
enum Step<'a> {
    /// Print a task and plan its children.
    Node {
        t: &'a TaskReport,
        owned: bool,
        /// The prefix of the parent's children, shared by all of them.
        prefix: Rc<str>,
        last: bool,
    },
    /// A child already on the branch: one line, no subtree.
    Cycle {
        name: &'a str,
        prefix: Rc<str>,
        last: bool,
    },
    /// The walk leaves the last task entered.
    Leave,
}

/// What every walk of one tree reads.
struct Walk<'a> {
    tasks: &'a AddrMap<&'a TaskReport>,
    children: &'a AddrMap<Vec<(u64, bool)>>,
    /// Whether a task's many children are drawn in parallel (not inside such a drawing).
    parallel: bool,
}

impl<'a> Walk<'a> {
    /// Prints the trees of `stack`'s steps, depth-first with an explicit stack: an await chain
    /// read from the target can be as deep as it likes, the debugger's own stack is not.
    /// `branch` holds the tasks above them. False when the tree was cut at [`MAX_TREE_LINES`]
    /// or [`MAX_TREE_BYTES`].
    fn run(&self, mut stack: Vec<Step<'a>>, mut branch: Vec<u64>, lines: &mut Lines) -> bool {
        // The tasks from the root down to the one being printed, for cycle checks.
        let mut on_branch: AddrSet = branch.iter().copied().collect();
        let branch_mark = |last: bool| if last { "└── " } else { "├── " };
        // The prefix of the lines under the task being printed, grown a level per frame.
        let mut prefix = String::new();
        while let Some(step) = stack.pop() {
            let (t, owned, parent_prefix, last) = match step {
                Step::Leave => {
                    if let Some(id) = branch.pop() {
                        on_branch.remove(&id);
                    }
                    continue;
                }
                Step::Cycle { name, prefix, last } => {
                    if !lines.room() {
                        return false;
                    }
                    let out = lines.out.text();
                    out.push_str(&prefix);
                    out.push_str(branch_mark(last));
                    out.push_str("(T) ");
                    out.push_str(name);
                    out.push_str(" (await cycle)\n");
                    continue;
                }
                Step::Node {
                    t,
                    owned,
                    prefix,
                    last,
                } => (t, owned, prefix, last),
            };
            if !lines.room() {
                return false;
            }
            let out = lines.out.text();
            out.push_str(&parent_prefix);
            out.push_str(branch_mark(last));
            out.push_str("(T) ");
            out.push_str(&t.name);
            out.push_str(" [");
            push_hex(out, t.id);
            out.push(']');
            if owned {
                out.push_str(" (owned, not awaited)");
            }
            if t.on_cpu {
                out.push_str(" (running)");
            }
            out.push('\n');
            prefix.clear();
            prefix.push_str(&parent_prefix);
            prefix.push_str(if last { "    " } else { "│   " });
            // Frames outermost first, each nested under the previous.
            for f in t.frames.iter().rev() {
                if !lines.room() {
                    return false;
                }
                let out = lines.out.text();
                out.push_str(&prefix);
                out.push_str("└──  ");
                frame_short(f, out);
                out.push('\n');
                prefix.push_str("    ");
            }
            if let Some(a) = &t.awaiting {
                if a.kind != AwaitingKind::Task && a.kind != AwaitingKind::Gather {
                    if !lines.room() {
                        return false;
                    }
                    let out = lines.out.text();
                    out.push_str(&prefix);
                    out.push_str("└──  awaits ");
                    out.push_str(&a.type_name);
                    out.push(' ');
                    push_hex(out, a.id);
                    out.push_str(" (");
                    out.push_str(a.kind.as_str());
                    out.push_str(")\n");
                }
            }
            branch.push(t.id);
            on_branch.insert(t.id);
            stack.push(Step::Leave);
            let kids = self
                .children
                .get(&t.id)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let kids: Vec<Kid> = kids
                .iter()
                .filter_map(|(kid, owned)| {
                    Some((*self.tasks.get(kid)?, *owned, on_branch.contains(kid)))
                })
                .collect();
            if self.parallel && kids.len() >= PARALLEL_CHILDREN {
                if !self.kids_in_parallel(&kids, &prefix, &branch, lines) {
                    return false;
                }
                continue;
            }
            // The children share one prefix: made once, for a task that has any.
            let shared: Option<Rc<str>> = (!kids.is_empty()).then(|| Rc::from(prefix.as_str()));
            if let Some(shared) = shared {
                stack.extend(kid_steps(&kids, 0, kids.len(), &shared));
            }
        }
        true
    }

    /// The subtrees of `kids` (whose lines start with `prefix`, below the tasks of `branch`),
    /// drawn in batches on every core, written in order: false when the tree was cut.
    fn kids_in_parallel(
        &self,
        kids: &[Kid],
        prefix: &str,
        branch: &[u64],
        lines: &mut Lines,
    ) -> bool {
        let batches: Vec<usize> = (0..kids.len()).step_by(CHILDREN_BATCH).collect();
        let apart = Walk {
            tasks: self.tasks,
            children: self.children,
            parallel: false,
        };
        let limits = lines.limits;
        let drawn = crate::parallel::map_each(
            &batches,
            1,
            true,
            |&from| {
                let to = (from + CHILDREN_BATCH).min(kids.len());
                let shared: Rc<str> = Rc::from(prefix);
                let steps = kid_steps(kids, from, to, &shared).collect();
                let mut text = TextOut::kept();
                let mut part = Lines {
                    out: &mut text,
                    start: 0,
                    count: 0,
                    limits,
                    starts: Some(Vec::new()),
                };
                let whole = apart.run(steps, branch.to_vec(), &mut part);
                let starts = part.starts.take().unwrap_or_default();
                (text.into_kept(), starts, whole)
            },
            |(text, starts, whole)| {
                if lines.append(&text, &starts) && whole {
                    Ok(())
                } else {
                    Err(())
                }
            },
        );
        drawn.is_ok()
    }
}

/// A child to draw: the task, whether it is owned (not awaited), whether it is on the branch
/// already (an await cycle).
type Kid<'a> = (&'a TaskReport, bool, bool);

/// The steps of `kids[from..to]`, the last pushed first (`kids.len()` the number of all the
/// children, for the last one's mark).
fn kid_steps<'a, 'k>(
    kids: &'k [Kid<'a>],
    from: usize,
    to: usize,
    prefix: &'k Rc<str>,
) -> impl Iterator<Item = Step<'a>> + 'k {
    let n = kids.len();
    kids[from..to]
        .iter()
        .enumerate()
        .rev()
        .map(move |(j, &(k, owned, cycle))| {
            let last = from + j + 1 == n;
            let prefix = prefix.clone();
            if cycle {
                Step::Cycle {
                    name: &k.name,
                    prefix,
                    last,
                }
            } else {
                Step::Node {
                    t: k,
                    owned,
                    prefix,
                    last,
                }
            }
        })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::{AwaitingReport, FrameKind, FrameReport, TaskReport};

    fn frame(function: &str, line: u32) -> FrameReport {
        FrameReport {
            kind: FrameKind::Python,
            function: Some(Arc::from(function)),
            file: Some(Arc::from("/app/x.py")),
            line: Some(line),
            entry: Some(false),
            address: Some(0x10),
            interpreter_id: Some(0),
            detail: None,
        }
    }

    fn task(id: u64, awaited_by: &[u64], owned_by: &[u64]) -> TaskReport {
        TaskReport {
            id,
            name: format!("t{id}\nsecond line"),
            state: "pending",
            on_cpu: id % 5 == 0,
            native_id: None,
            type_name: "Task".into(),
            supported: true,
            loop_: 0,
            frames: vec![frame("sleep", 716), frame("worker", id as u32)],
            awaiting: (id % 3 == 0).then(|| AwaitingReport {
                kind: AwaitingKind::Future,
                id: id + 1,
                type_name: "Future".into(),
                executor_native_id: None,
            }),
            awaited_by: awaited_by.to_vec(),
            owned_by: owned_by.to_vec(),
            why: None,
        }
    }

    /// Root 1 awaits 3,000 children (2..=3001); child 2 awaits 5000, which awaits 2 again (a
    /// cycle below the wide task); child 7 awaits 2,000 of its own (6000..8000), owned ones
    /// among them; another root has a few.
    fn wide() -> Report {
        let mut tasks = vec![task(1, &[], &[])];
        tasks.push(task(2, &[1, 5000], &[]));
        tasks.extend((3..=3001).map(|i| task(i, &[1], &[])));
        tasks.push(task(5000, &[2], &[]));
        tasks.extend((6000..8000).map(|i| {
            if i % 4 == 0 {
                task(i, &[], &[7])
            } else {
                task(i, &[7], &[])
            }
        }));
        tasks.push(task(9000, &[], &[]));
        tasks.extend((9001..9010).map(|i| task(i, &[9000], &[])));
        crate::report::test_support::tasks_report(tasks)
    }

    fn drawn(r: &Report, limits: Limits, parallel: bool, streamed: bool) -> String {
        let tasks = by_id(r);
        if streamed {
            let mut sink = Vec::new();
            let mut out = TextOut::streamed(&mut sink);
            draw(r, &tasks, &mut out, limits, parallel);
            out.finish().unwrap();
            return String::from_utf8(sink).unwrap();
        }
        let mut out = TextOut::kept();
        draw(r, &tasks, &mut out, limits, parallel);
        out.into_kept()
    }

    /// Drawn in parallel or on one thread, kept or streamed, whole or cut anywhere by either
    /// limit: the same text.
    #[test]
    fn children_drawn_in_parallel_are_the_same_tree() {
        let r = wide();
        let all = Limits {
            lines: usize::MAX,
            bytes: usize::MAX,
        };
        let whole = drawn(&r, all, false, false);
        assert!(whole.contains("(await cycle)") && whole.contains("(owned, not awaited)"));
        assert!(!whole.contains("(tree cut"));
        // Lines as the limits count them are fewer: a task's name has two.
        let count = whole.lines().count();
        let bytes = whole.len();
        let mut cuts = vec![all];
        for lines in [1, 2, 1023, 1024, 1025, 7_777, count / 2, count - 1] {
            cuts.push(Limits {
                lines,
                bytes: usize::MAX,
            });
        }
        for b in [1, 100, 65_536, bytes / 3, bytes - 10] {
            cuts.push(Limits {
                lines: usize::MAX,
                bytes: b,
            });
        }
        assert!(count > 20_000, "{count}");
        for limits in cuts {
            let one = drawn(&r, limits, false, false);
            for streamed in [false, true] {
                let par = drawn(&r, limits, true, streamed);
                assert!(
                    par == one,
                    "limits {}/{} streamed {streamed}: {} and {} bytes",
                    limits.lines,
                    limits.bytes,
                    par.len(),
                    one.len()
                );
            }
        }
    }
}
