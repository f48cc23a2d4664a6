//! The merged call tree of many threads (`--tree`, `merge --tree`), as LLNL's STAT draws it:
//! every thread's Python stack, from its outermost frame in, laid over the others', so that a
//! frame that many threads share is one node with their count and the place where their
//! stacks part is visible.
//!
//! ```
//! use pyunwind::report::group::GroupBy;
//! use pyunwind::report::tree::TreeBuilder;
//! let mut t = TreeBuilder::new(GroupBy::Line);
//! // For each report (one process): t.start_report(); then per thread
//! // t.add(&thread.frames, thread.truncated, member);
//! assert!(t.finish().is_empty());
//! ```
//!
//! Built as reports stream in (`merge` holds one report at a time): the tree keeps one node
//! per distinct path prefix, each with its counts, and each thread's [`Member`] at the node
//! where its stack ends. Both dimensions are capped: a stack deeper than [`MAX_TREE_DEPTH`]
//! frames keeps its outermost and innermost frames around one `elided` node, and past
//! [`MAX_TREE_NODES`] nodes a thread whose path needs a new node ends in its parent's `cut`
//! node. Either is said in the tree itself (a node of that kind) and in the text.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Arc;

use serde::Serialize;

use super::group::{GroupBy, Member, Members};
use super::text;
use crate::model::{FrameKind, FrameReport};

/// Frames kept of one stack: deeper ones keep their [`OUTER_FRAMES`] outermost and
/// `MAX_TREE_DEPTH - OUTER_FRAMES - 1` innermost frames, with an `elided` node between.
/// Each level is two levels of JSON nesting (the node and its `children`): 120 levels stay
/// under the nesting limits of common JSON readers (Python's `json`, 1,000; jq 1.6, 256).
pub const MAX_TREE_DEPTH: usize = 120;
/// The outermost frames a stack deeper than [`MAX_TREE_DEPTH`] keeps.
pub const OUTER_FRAMES: usize = MAX_TREE_DEPTH / 2;
/// Nodes of the tree, not counting `cut` nodes (at most one per node): about 150 bytes each.
pub const MAX_TREE_NODES: usize = 200_000;

/// No node: the parent of a top-level node.
const ROOT: u32 = u32::MAX;

/// What a node of the tree stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    /// A Python frame.
    Python,
    /// A frame that could not be read (any reason, any address).
    Unreadable,
    /// The middle of stacks deeper than [`MAX_TREE_DEPTH`] frames, not shown.
    Elided,
    /// Top level only: above the stacks whose walk stopped before their first frame
    /// (`truncated` threads), whose outermost frames are not known.
    Truncated,
    /// Top level only: the threads that have no Python frame.
    NoFrames,
    /// The tree reached [`MAX_TREE_NODES`]: the rest of these threads' stacks is not shown.
    Cut,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct NodeKey {
    parent: u32,
    kind: NodeKind,
    function: Option<Arc<str>>,
    file: Option<Arc<str>>,
    line: Option<u32>,
    /// The interpreter that runs the frame: the same code in two interpreters is two nodes.
    interpreter_id: Option<u32>,
}

/// A node while the tree is built.
#[derive(Debug)]
pub(super) struct Node {
    pub(super) kind: NodeKind,
    pub(super) function: Option<Arc<str>>,
    pub(super) file: Option<Arc<str>>,
    /// With `--group-by function`: the first thread's line, None once two differ.
    pub(super) line: Option<u32>,
    /// The threads through this node differ in its line (`--group-by function`).
    pub(super) mixed: bool,
    pub(super) parent: u32,
    pub(super) interpreter_id: Option<u32>,
    count: u32,
    processes: u32,
    /// The last report that added a thread through it, to count processes.
    last_report: u32,
    /// The threads whose stack ends here.
    pub(super) members: Vec<Member>,
}

/// Builds the tree report by report.
pub struct TreeBuilder {
    by: GroupBy,
    /// What the members are: where a node lists them (`threads`, `tasks`, `greenlets`).
    members: Members,
    nodes: Vec<Node>,
    index: HashMap<NodeKey, u32>,
    report: u32,
    threads: usize,
    /// Stacks shown without their middle ([`MAX_TREE_DEPTH`]).
    pub(super) elided: usize,
    /// Threads whose path met [`MAX_TREE_NODES`].
    pub(super) cut: usize,
}

/// One step of a thread's path, outermost first.
#[derive(Clone, Copy)]
enum Step<'a> {
    Frame(&'a FrameReport),
    Mark(NodeKind),
}

impl TreeBuilder {
    pub fn new(by: GroupBy) -> Self {
        Self::of(by, Members::Threads)
    }

    /// A tree of `members`: threads, asyncio tasks (`task_tree`) or greenlets
    /// (`greenlet_tree`).
    pub fn of(by: GroupBy, members: Members) -> Self {
        TreeBuilder {
            by,
            members,
            nodes: Vec::new(),
            index: HashMap::new(),
            report: 0,
            threads: 0,
            elided: 0,
            cut: 0,
        }
    }

    /// The next threads added are one more process's.
    pub fn start_report(&mut self) {
        self.report += 1;
    }

    /// Adds a thread: its frames (innermost first: only its Python and unreadable frames are
    /// the tree's), whether its walk stopped before its first frame, and who it is. Returns
    /// the node its path ends at, and its index among that node's members.
    pub fn add(&mut self, frames: &[FrameReport], truncated: bool, member: Member) -> (u32, u32) {
        self.threads += 1;
        let shown: Vec<&FrameReport> = frames
            .iter()
            .filter(|f| matches!(f.kind, FrameKind::Python | FrameKind::Unreadable))
            .collect();
        let mut steps: Vec<Step> = Vec::with_capacity(shown.len().min(MAX_TREE_DEPTH) + 1);
        if truncated {
            steps.push(Step::Mark(NodeKind::Truncated));
        } else if shown.is_empty() {
            steps.push(Step::Mark(NodeKind::NoFrames));
        }
        if shown.len() > MAX_TREE_DEPTH {
            self.elided += 1;
            let inner = MAX_TREE_DEPTH - OUTER_FRAMES - 1;
            steps.extend(
                shown[shown.len() - OUTER_FRAMES..]
                    .iter()
                    .rev()
                    .map(|&f| Step::Frame(f)),
            );
            steps.push(Step::Mark(NodeKind::Elided));
            steps.extend(shown[..inner].iter().rev().map(|&f| Step::Frame(f)));
        } else {
            steps.extend(shown.iter().rev().map(|&f| Step::Frame(f)));
        }
        let mut at = ROOT;
        for step in steps {
            let key = match step {
                Step::Mark(kind) => NodeKey {
                    parent: at,
                    kind,
                    function: None,
                    file: None,
                    line: None,
                    interpreter_id: None,
                },
                Step::Frame(f) if f.kind == FrameKind::Unreadable => NodeKey {
                    parent: at,
                    kind: NodeKind::Unreadable,
                    function: None,
                    file: None,
                    line: None,
                    interpreter_id: f.interpreter_id,
                },
                Step::Frame(f) => NodeKey {
                    parent: at,
                    kind: NodeKind::Python,
                    function: f.function.clone(),
                    file: f.file.clone(),
                    line: match self.by {
                        GroupBy::Line => f.line,
                        GroupBy::Function => None,
                    },
                    interpreter_id: f.interpreter_id,
                },
            };
            let line = match step {
                Step::Frame(f) if f.kind == FrameKind::Python => f.line,
                _ => None,
            };
            match self.index.get(&key) {
                Some(&i) => {
                    let n = &mut self.nodes[i as usize];
                    if !n.mixed && n.line != line {
                        n.mixed = true;
                        n.line = None;
                    }
                    at = i;
                }
                None if self.nodes.len() >= MAX_TREE_NODES => {
                    // One `cut` node per parent holds every thread whose path goes on
                    // from there: the nodes stay under twice the cap.
                    self.cut += 1;
                    at = self.node_for(NodeKey {
                        parent: at,
                        kind: NodeKind::Cut,
                        function: None,
                        file: None,
                        line: None,
                        interpreter_id: None,
                    });
                    self.pass(at);
                    break;
                }
                None => {
                    at = self.node_for(key);
                    self.nodes[at as usize].line = line;
                }
            }
            self.pass(at);
        }
        let node = &mut self.nodes[at as usize];
        node.members.push(member);
        (at, node.members.len() as u32 - 1)
    }

    /// The node of `key`, made if new.
    fn node_for(&mut self, key: NodeKey) -> u32 {
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        let i = self.nodes.len() as u32;
        self.nodes.push(Node {
            kind: key.kind,
            function: key.function.clone(),
            file: key.file.clone(),
            line: key.line,
            mixed: false,
            parent: key.parent,
            interpreter_id: key.interpreter_id,
            count: 0,
            processes: 0,
            last_report: u32::MAX,
            members: Vec::new(),
        });
        self.index.insert(key, i);
        i
    }

    /// A thread passes through node `i`.
    fn pass(&mut self, i: u32) {
        let n = &mut self.nodes[i as usize];
        n.count += 1;
        if n.last_report != self.report {
            n.last_report = self.report;
            n.processes += 1;
        }
    }

    pub(super) fn node(&self, i: u32) -> &Node {
        &self.nodes[i as usize]
    }

    pub(super) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// The nodes from `i` up to its top-level node, `i` first.
    pub(super) fn path_up(&self, i: u32) -> impl Iterator<Item = u32> + '_ {
        std::iter::successors(Some(i), move |&n| {
            let p = self.nodes[n as usize].parent;
            (p != ROOT).then_some(p)
        })
    }

    /// How many threads were added.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The tree: top-level nodes and every node's children biggest first (by threads, then
    /// processes, then first seen).
    pub fn finish(self) -> Vec<TreeNode> {
        // Children are made after their parent: from the last node back, each node's
        // children are all built when it is reached.
        let mut pending: Vec<Vec<TreeNode>> = Vec::new();
        pending.resize_with(self.nodes.len(), Vec::new);
        let mut top = Vec::new();
        let kind = self.members;
        for (i, n) in self.nodes.into_iter().enumerate().rev() {
            let mut children = std::mem::take(&mut pending[i]);
            children.reverse();
            sort(&mut children);
            let mut node = TreeNode {
                kind: n.kind,
                function: n.function,
                file: n.file,
                line: n.line,
                interpreter_id: n.interpreter_id,
                count: n.count as usize,
                processes: n.processes as usize,
                children,
                threads: Vec::new(),
                tasks: Vec::new(),
                greenlets: Vec::new(),
            };
            *match kind {
                Members::Threads => &mut node.threads,
                Members::Tasks => &mut node.tasks,
                Members::Greenlets => &mut node.greenlets,
            } = n.members;
            if n.parent == ROOT {
                top.push(node);
            } else {
                pending[n.parent as usize].push(node);
            }
        }
        top.reverse();
        sort(&mut top);
        top
    }
}

/// Biggest first; a stable sort keeps first-seen order among equals.
fn sort(nodes: &mut [TreeNode]) {
    nodes.sort_by_key(|n| std::cmp::Reverse((n.count, n.processes)));
}

/// A node of `--tree`'s JSON: a frame that `count` threads pass through.
#[derive(Clone, Debug, Serialize)]
pub struct TreeNode {
    pub kind: NodeKind,
    pub function: Option<Arc<str>>,
    pub file: Option<Arc<str>>,
    /// Null where unknown, and with `--group-by function` where the threads' lines differ.
    pub line: Option<u32>,
    /// The id of the interpreter that runs the frame (part of the node's key); absent where
    /// the report has none (before 3.12, and for the tree's own nodes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interpreter_id: Option<u32>,
    /// Threads whose stacks pass through this frame.
    pub count: usize,
    /// Reports (processes) those threads are in.
    pub processes: usize,
    /// The frames called from here, biggest first.
    pub children: Vec<TreeNode>,
    /// The threads whose stack ends here (at the leaves, and where a stack ends at a frame
    /// that others go on from).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<Member>,
    /// `task_tree`: the asyncio tasks whose await chain ends here.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<Member>,
    /// `greenlet_tree`: the suspended greenlets whose stack ends here.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub greenlets: Vec<Member>,
}

impl TreeNode {
    /// The members whose stack ends here: threads, tasks or greenlets.
    pub fn members(&self) -> &[Member] {
        if !self.threads.is_empty() {
            &self.threads
        } else if !self.tasks.is_empty() {
            &self.tasks
        } else {
            &self.greenlets
        }
    }
}

/// Threads named on a node's line; more are counted.
const MAX_THREADS_NAMED: usize = 3;

/// `pid 4242 (host b7) thread 4242 "MainThread"`, `pid 7 task 0x7f.. "fetch-0"`.
pub fn member_words(m: &Member) -> String {
    let mut s = match m.pid {
        Some(p) => format!("pid {p}"),
        None => "pid ?".to_string(),
    };
    if let Some(h) = &m.host {
        write!(s, " (host {h})").unwrap();
    }
    match (m.task, m.address, m.native_id) {
        (Some(task), _, _) => write!(s, " task {task:#x}").unwrap(),
        (None, Some(g), _) => write!(s, " greenlet {g:#x}").unwrap(),
        (None, None, Some(n)) => write!(s, " thread {n}").unwrap(),
        (None, None, None) => s.push_str(" thread ?"),
    }
    if let Some(name) = m.any_name() {
        write!(s, " \"{name}\"").unwrap();
    }
    s
}

/// A node's frame in words: `all_reduce (/job/train.py:41)`, and for a frame a
/// subinterpreter runs ` [interpreter 1]`, as the debuggers' backtraces say it.
fn label(n: &TreeNode) -> String {
    let mut s = frame_words(n);
    if let Some(i) = n.interpreter_id.filter(|i| *i != 0) {
        write!(s, " [interpreter {i}]").unwrap();
    }
    s
}

fn frame_words(n: &TreeNode) -> String {
    match n.kind {
        NodeKind::Python => {
            let func = n.function.as_deref().unwrap_or("???");
            let file = n.file.as_deref().unwrap_or("???");
            match n.line {
                Some(l) => format!("{func} ({file}:{l})"),
                None => format!("{func} ({file}, lines differ)"),
            }
        }
        NodeKind::Unreadable => "(unreadable frame)".into(),
        NodeKind::Elided => format!(
            "(frames not shown: stacks deeper than {MAX_TREE_DEPTH} frames keep their \
             {OUTER_FRAMES} outermost and {} innermost)",
            MAX_TREE_DEPTH - OUTER_FRAMES - 1
        ),
        NodeKind::Truncated => {
            "(older frames not read: the walk stopped before the first frame)".into()
        }
        NodeKind::NoFrames => "(no Python frames)".into(),
        NodeKind::Cut => {
            format!("(not shown: the tree is over its limit of {MAX_TREE_NODES} nodes)")
        }
    }
}

/// The threads that end at a node: named when few, else `12 threads in 3 processes`.
fn ending(threads: &[Member]) -> String {
    if threads.len() <= MAX_THREADS_NAMED {
        return threads
            .iter()
            .map(member_words)
            .collect::<Vec<_>>()
            .join("; ");
    }
    let mut procs: Vec<(Option<&str>, Option<u32>)> =
        threads.iter().map(|m| (m.host.as_deref(), m.pid)).collect();
    procs.sort_unstable();
    procs.dedup();
    // More than MAX_THREADS_NAMED: always plural.
    let many = if threads[0].task.is_some() {
        "tasks"
    } else if threads[0].address.is_some() {
        "greenlets"
    } else {
        "threads"
    };
    format!(
        "{} {many} in {} {}",
        threads.len(),
        procs.len(),
        if procs.len() == 1 {
            "process"
        } else {
            "processes"
        }
    )
}

/// The tree as text: one line per node, indented two spaces per level, `COUNT FRAME`, and
/// after a colon the threads whose stack ends there.
pub fn render(tree: &[TreeNode], out: &mut String) {
    let mut stack: Vec<(&TreeNode, usize)> = tree.iter().rev().map(|n| (n, 0)).collect();
    while let Some((n, depth)) = stack.pop() {
        if out.len() >= text::MAX_TEXT_BYTES {
            if !out.ends_with(text::TEXT_CUT) {
                out.push_str(text::TEXT_CUT);
            }
            return;
        }
        for _ in 0..depth {
            out.push_str("  ");
        }
        write!(out, "{} {}", n.count, label(n)).unwrap();
        if !n.members().is_empty() {
            write!(out, ": {}", ending(n.members())).unwrap();
        }
        out.push('\n');
        stack.extend(n.children.iter().rev().map(|c| (c, depth + 1)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_support::python_frame as py;

    fn member(pid: u32, name: &str) -> Member {
        Member::thread(
            Some("h".into()),
            Some(pid),
            None,
            Some(pid as u64),
            Some(name.into()),
        )
    }

    /// (depth, count, label, threads' pids) per line, in text order.
    fn flat(tree: &[TreeNode]) -> Vec<(usize, usize, String, Vec<u32>)> {
        let mut out = Vec::new();
        let mut stack: Vec<(&TreeNode, usize)> = tree.iter().rev().map(|n| (n, 0)).collect();
        while let Some((n, d)) = stack.pop() {
            let pids = n.threads.iter().map(|m| m.pid.unwrap()).collect();
            out.push((d, n.count, label(n), pids));
            stack.extend(n.children.iter().rev().map(|c| (c, d + 1)));
        }
        out
    }

    #[test]
    fn the_same_frame_in_two_interpreters_is_two_nodes_and_the_text_names_them() {
        let stack = |inner: u32| {
            let mut f = [py("park", "p.py", 3), py("<module>", "m.py", 9)];
            f[0].interpreter_id = Some(inner);
            f[1].interpreter_id = Some(0);
            f
        };
        let mut t = TreeBuilder::new(GroupBy::Line);
        t.start_report();
        for (pid, inner) in [(1, 1), (2, 2), (3, 1)] {
            t.add(&stack(inner), false, member(pid, "worker"));
        }
        let tree = t.finish();
        assert_eq!(
            flat(&tree),
            [
                (0, 3, "<module> (m.py:9)".to_string(), vec![]),
                (
                    1,
                    2,
                    "park (p.py:3) [interpreter 1]".to_string(),
                    vec![1, 3]
                ),
                (1, 1, "park (p.py:3) [interpreter 2]".to_string(), vec![2]),
            ]
        );
        assert_eq!(tree[0].interpreter_id, Some(0));
        assert_eq!(tree[0].children[1].interpreter_id, Some(2));
    }

    #[test]
    fn stacks_merge_from_the_outermost_frame_and_branches_sort_by_count() {
        // Innermost first, as reports list them.
        let wait = [
            py("all_reduce", "d.py", 9),
            py("step", "t.py", 41),
            py("<module>", "t.py", 50),
        ];
        let load = [
            py("load", "t.py", 17),
            py("step", "t.py", 38),
            py("<module>", "t.py", 50),
        ];
        let mut t = TreeBuilder::new(GroupBy::Line);
        for pid in 1..=4 {
            t.start_report();
            let frames: &[FrameReport] = if pid == 2 { &load } else { &wait };
            t.add(frames, false, member(pid, "MainThread"));
        }
        let tree = t.finish();
        assert_eq!(
            flat(&tree),
            [
                (0, 4, "<module> (t.py:50)".to_string(), vec![]),
                (1, 3, "step (t.py:41)".to_string(), vec![]),
                (2, 3, "all_reduce (d.py:9)".to_string(), vec![1, 3, 4]),
                (1, 1, "step (t.py:38)".to_string(), vec![]),
                (2, 1, "load (t.py:17)".to_string(), vec![2]),
            ]
        );
        assert_eq!(tree[0].processes, 4);
        let mut text = String::new();
        render(&tree, &mut text);
        assert_eq!(
            text,
            "4 <module> (t.py:50)\n\
             \x20 3 step (t.py:41)\n\
             \x20   3 all_reduce (d.py:9): pid 1 (host h) thread 1 \"MainThread\"; \
             pid 3 (host h) thread 3 \"MainThread\"; pid 4 (host h) thread 4 \"MainThread\"\n\
             \x20 1 step (t.py:38)\n\
             \x20   1 load (t.py:17): pid 2 (host h) thread 2 \"MainThread\"\n"
        );
    }

    #[test]
    fn many_threads_at_a_leaf_are_counted_and_a_stack_may_end_inside() {
        let outer = [py("main", "m.py", 3)];
        let inner = [py("work", "m.py", 9), py("main", "m.py", 3)];
        let mut t = TreeBuilder::new(GroupBy::Line);
        for pid in 1..=2 {
            t.start_report();
            for _ in 0..3 {
                t.add(&inner, false, member(pid, "w"));
            }
        }
        t.start_report();
        t.add(&outer, false, member(3, "MainThread"));
        let tree = t.finish();
        assert_eq!((tree[0].count, tree[0].processes), (7, 3));
        assert_eq!(tree[0].threads.len(), 1);
        let mut text = String::new();
        render(&tree, &mut text);
        assert_eq!(
            text,
            "7 main (m.py:3): pid 3 (host h) thread 3 \"MainThread\"\n\
             \x20 6 work (m.py:9): 6 threads in 2 processes\n"
        );
    }

    #[test]
    fn by_function_lines_merge_and_are_shown_only_where_equal() {
        let a = [py("f", "x.py", 2), py("main", "x.py", 1)];
        let b = [py("f", "x.py", 3), py("main", "x.py", 1)];
        let mut t = TreeBuilder::new(GroupBy::Function);
        for (pid, frames) in [(1, &a), (2, &b)] {
            t.start_report();
            t.add(frames, false, member(pid, "MainThread"));
        }
        let tree = t.finish();
        let lines: Vec<_> = flat(&tree).into_iter().map(|l| (l.1, l.2)).collect();
        assert_eq!(
            lines,
            [
                (2, "main (x.py:1)".to_string()),
                (2, "f (x.py, lines differ)".to_string())
            ]
        );
    }

    #[test]
    fn deep_stacks_keep_both_ends_and_truncated_or_empty_ones_have_their_own_top() {
        let deep: Vec<FrameReport> = (0..500).map(|i| py("r", "r.py", 1000 - i)).collect();
        let mut t = TreeBuilder::new(GroupBy::Line);
        t.start_report();
        t.add(&deep, false, member(1, "deep"));
        t.add(&deep[..2], true, member(1, "cut short"));
        t.add(&[], false, member(1, "empty"));
        assert_eq!(t.elided, 1);
        let tree = t.finish();
        let lines = flat(&tree);
        assert_eq!(lines.len(), MAX_TREE_DEPTH + 2 + 1 + 1);
        // The outermost frame first, the elided middle, the innermost frame last.
        assert_eq!(lines[0].2, "r (r.py:501)");
        assert_eq!(lines[OUTER_FRAMES].1, 1);
        assert!(lines[OUTER_FRAMES].2.starts_with("(frames not shown"));
        assert_eq!(lines[MAX_TREE_DEPTH - 1].2, "r (r.py:1000)");
        assert_eq!(lines[MAX_TREE_DEPTH - 1].0, MAX_TREE_DEPTH - 1);
        assert!(lines[MAX_TREE_DEPTH]
            .2
            .starts_with("(older frames not read"));
        assert_eq!(lines[MAX_TREE_DEPTH + 1].2, "r (r.py:999)");
        assert_eq!(lines[MAX_TREE_DEPTH + 2].2, "r (r.py:1000)");
        assert_eq!(lines[MAX_TREE_DEPTH + 3].2, "(no Python frames)");
    }

    #[test]
    fn past_the_node_cap_new_paths_end_in_one_cut_node_per_parent() {
        let mut t = TreeBuilder::new(GroupBy::Line);
        t.start_report();
        let main = py("main", "m.py", 1);
        let mut leaves = Vec::new();
        for i in 0..MAX_TREE_NODES as u32 + 10 {
            let frames = [py("leaf", "m.py", 10 + i), main.clone()];
            leaves.push(t.add(&frames, false, member(1, "t")).0);
        }
        assert_eq!(t.len(), MAX_TREE_NODES + 1);
        assert_eq!(t.cut, 11);
        let cut = *leaves.last().unwrap();
        assert_eq!(t.node(cut).kind, NodeKind::Cut);
        assert_eq!(t.node(cut).members.len(), 11);
        let tree = t.finish();
        assert_eq!(tree[0].children[0].kind, NodeKind::Cut);
        assert_eq!(tree[0].children[0].count, 11);
    }
}
