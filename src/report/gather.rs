//! Many reports gathered: grouped ([`super::group`]), and as asked, merged into one call tree
//! ([`super::tree`], `--tree`) and judged for stragglers ([`super::straggler`], `--why` over
//! several processes). Every report is added as it comes and dropped after, so `merge` of a
//! stream holds one report at a time.
//!
//! ```
//! use pyunwind::report::gather::Gatherer;
//! use pyunwind::report::group::GroupBy;
//! let mut g = Gatherer::new(GroupBy::Line, true, true);
//! // For each report: g.add_report(Some("b7"), Some(1234), report.threads.iter().map(From::from));
//! let out = g.finish(Vec::new());
//! assert!(out.tree.unwrap().is_empty());
//! ```

use std::sync::Arc;

use serde::Serialize;

use super::group::{Group, GroupBy, Grouped, Grouper, Members, TargetError, ThreadIn};
use super::straggler::{Ranks, Verdict};
use super::tree::{TreeBuilder, TreeNode};
use crate::model::FrameKind;

/// Groups, and the tree and verdict where asked for.
pub struct Gatherer {
    groups: Grouper,
    /// The threads' stacks merged (for `--tree`, and for the verdict, which reads it).
    tree: Option<TreeBuilder>,
    /// Whether the tree is shown (`--tree`).
    show_tree: bool,
    /// The verdict's record of each process's threads.
    ranks: Option<Ranks>,
    /// asyncio tasks (`--async`, `--tasks`; `merge` of reports that have them).
    tasks: Option<Side>,
    /// Suspended greenlets (`--greenlets`; `merge` of reports that have them).
    greenlets: Option<Side>,
}

/// Tasks or greenlets, grouped and merged into a tree of their own as threads are.
struct Side {
    groups: Grouper,
    tree: Option<TreeBuilder>,
    /// Shown even when no report has the list (`--async` asked for it); `merge` shows it
    /// once a report has one.
    shown: bool,
}

impl Side {
    fn new(by: GroupBy, members: Members, tree: bool, shown: bool) -> Self {
        Side {
            groups: Grouper::of(by, members),
            tree: tree.then(|| TreeBuilder::of(by, members)),
            shown,
        }
    }

    fn add<'a>(
        &mut self,
        host: Option<&str>,
        pid: Option<u32>,
        items: Option<impl IntoIterator<Item = ThreadIn<'a>>>,
    ) {
        self.shown |= items.is_some();
        let items = items.into_iter().flatten();
        match &mut self.tree {
            Some(tree) => {
                tree.start_report();
                self.groups.add_report_each(host, pid, items, |t, member| {
                    tree.add(t.frames, t.truncated, member.clone());
                });
            }
            None => self.groups.add_report(host, pid, items),
        }
    }

    fn finish(self) -> Option<(Vec<Group>, Option<Vec<TreeNode>>)> {
        self.shown.then(|| {
            (
                self.groups.finish(Vec::new()).groups,
                self.tree.map(TreeBuilder::finish),
            )
        })
    }
}

/// `--group`, `--tree`, `merge`'s output: [`Grouped`], with `verdict` and `tree` beside
/// `groups`.
#[derive(Clone, Debug, Serialize)]
pub struct Gathered {
    #[serde(flatten)]
    pub grouped: Grouped,
    /// `--why` over several processes: where the majority of the ranks is, who is elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// `--tree`: every thread's stack merged into one call tree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tree: Option<Vec<TreeNode>>,
    /// `--tree` with `--async`/`--tasks`: every task's await chain merged into one tree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_tree: Option<Vec<TreeNode>>,
    /// `--tree` with `--greenlets`: every suspended greenlet's stack merged into one tree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub greenlet_tree: Option<Vec<TreeNode>>,
}

impl Gatherer {
    /// Groups by `by`; `tree`: also the call tree (`--tree`); `verdict`: also the straggler
    /// verdict (`--why`), given when more than one report is added.
    pub fn new(by: GroupBy, tree: bool, verdict: bool) -> Self {
        Gatherer {
            groups: Grouper::new(by),
            tree: (tree || verdict).then(|| TreeBuilder::new(by)),
            show_tree: tree,
            ranks: verdict.then(Ranks::default),
            tasks: None,
            greenlets: None,
        }
    }

    /// Also groups asyncio tasks (and with `--tree` merges them into `task_tree`): `shown`,
    /// even when no report has tasks; else once one has (`merge`).
    pub fn with_tasks(mut self, shown: bool) -> Self {
        self.tasks = Some(Side::new(
            self.groups_by(),
            Members::Tasks,
            self.show_tree,
            shown,
        ));
        self
    }

    /// Also groups suspended greenlets (and with `--tree` merges them into
    /// `greenlet_tree`), `shown` as [`Self::with_tasks`] says.
    pub fn with_greenlets(mut self, shown: bool) -> Self {
        self.greenlets = Some(Side::new(
            self.groups_by(),
            Members::Greenlets,
            self.show_tree,
            shown,
        ));
        self
    }

    fn groups_by(&self) -> GroupBy {
        self.groups.by()
    }

    /// One report's asyncio tasks (None: the report has no task list); call it for every
    /// report, as [`Self::add_report`], so that both count the same processes.
    pub fn add_tasks<'a>(
        &mut self,
        host: Option<&str>,
        pid: Option<u32>,
        tasks: Option<impl IntoIterator<Item = ThreadIn<'a>>>,
    ) {
        if let Some(side) = &mut self.tasks {
            side.add(host, pid, tasks);
        }
    }

    /// One report's greenlets, the suspended ones as [`ThreadIn::greenlet`] gives them
    /// (None: the report has no greenlet list); for every report, as [`Self::add_tasks`].
    pub fn add_greenlets<'a>(
        &mut self,
        host: Option<&str>,
        pid: Option<u32>,
        greenlets: Option<impl IntoIterator<Item = ThreadIn<'a>>>,
    ) {
        if let Some(side) = &mut self.greenlets {
            side.add(host, pid, greenlets);
        }
    }

    /// Adds one report's threads (one process: `host`, `pid`).
    pub fn add_report<'a>(
        &mut self,
        host: Option<&str>,
        pid: Option<u32>,
        threads: impl IntoIterator<Item = ThreadIn<'a>>,
    ) {
        let Some(tree) = &mut self.tree else {
            self.groups.add_report(host, pid, threads);
            return;
        };
        tree.start_report();
        if let Some(ranks) = &mut self.ranks {
            ranks.start_report(host.map(Arc::from), pid);
        }
        let ranks = &mut self.ranks;
        self.groups
            .add_report_each(host, pid, threads, |t, member| {
                let at = tree.add(t.frames, t.truncated, member.clone());
                if let Some(ranks) = ranks.as_mut() {
                    let innermost = t.frames.iter().find(|f| f.kind == FrameKind::Python);
                    ranks.add(at, t.why.as_ref(), innermost, t.call);
                }
            });
    }

    /// The groups (`failed`: the targets or reports that could not be read), the verdict
    /// and the tree.
    pub fn finish(self, failed: Vec<TargetError>) -> Gathered {
        let verdict = match (&self.ranks, &self.tree) {
            (Some(ranks), Some(tree)) => ranks.verdict(tree),
            _ => None,
        };
        let show = self.show_tree;
        let mut grouped = self.groups.finish(failed);
        let (task_groups, task_tree) = split(self.tasks.and_then(Side::finish));
        let (greenlet_groups, greenlet_tree) = split(self.greenlets.and_then(Side::finish));
        grouped.task_groups = task_groups;
        grouped.greenlet_groups = greenlet_groups;
        Gathered {
            grouped,
            verdict,
            tree: self.tree.filter(|_| show).map(TreeBuilder::finish),
            task_tree,
            greenlet_tree,
        }
    }
}

type SideOut = (Option<Vec<Group>>, Option<Vec<TreeNode>>);

fn split(side: Option<(Vec<Group>, Option<Vec<TreeNode>>)>) -> SideOut {
    match side {
        Some((groups, tree)) => (Some(groups), tree),
        None => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{FrameKind, FrameReport};
    use crate::report::group_text::render;
    use crate::report::text::Sources;

    fn py(function: &str, line: u32) -> FrameReport {
        FrameReport {
            kind: FrameKind::Python,
            function: Some(function.into()),
            file: Some("/job/t.py".into()),
            line: Some(line),
            entry: Some(false),
            address: Some(0x1000 + line as u64),
            interpreter_id: None,
            detail: None,
        }
    }

    fn gather(tree: bool, why: bool) -> Gathered {
        let wait = [py("all_reduce", 41), py("main", 9), py("<module>", 50)];
        let load = [py("load_shard", 17), py("main", 8), py("<module>", 50)];
        let mut g = Gatherer::new(GroupBy::Line, tree, why);
        for pid in 1..=3u32 {
            let frames: &[FrameReport] = if pid == 3 { &load } else { &wait };
            let t = ThreadIn {
                task: None,
                greenlet: None,
                wait: None,
                native_id: Some(pid as u64),
                name: Some("MainThread"),
                native_name: None,
                frames,
                truncated: false,
                why: None,
                call: None,
            };
            g.add_report(Some("h"), Some(pid), [t]);
        }
        g.finish(Vec::new())
    }

    #[test]
    fn the_verdict_comes_first_then_the_tree_or_the_groups() {
        let both = gather(true, true);
        assert_eq!(both.grouped.groups.len(), 2);
        let text = render(&both, &mut Sources::default());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[..4],
            [
                "2 of 3 processes are in all_reduce (t.py:41); pid 3 (host h) is elsewhere: \
                 load_shard (t.py:17)",
                "",
                "Call tree of 3 threads over 3 processes: outermost frames first, each with how \
                 many threads pass through it",
                "3 <module> (/job/t.py:50)",
            ]
        );
        let json = serde_json::to_value(&both).unwrap();
        assert_eq!(json["verdict"]["majority"]["count"], 2);
        assert_eq!(json["tree"][0]["children"][0]["count"], 2);
        assert_eq!(json["groups"][0]["count"], 2);

        // Without --tree the tree is only the verdict's: not shown; without --why, no verdict.
        let groups = gather(false, true);
        assert!(groups.tree.is_none() && groups.verdict.is_some());
        let text = render(&groups, &mut Sources::default());
        assert!(text
            .lines()
            .nth(2)
            .unwrap()
            .starts_with("2 groups of identical"));
        let tree = gather(true, false);
        assert!(tree.verdict.is_none() && tree.tree.is_some());
        let plain = serde_json::to_value(gather(false, false)).unwrap();
        assert!(plain.get("verdict").is_none() && plain.get("tree").is_none());
    }
}
