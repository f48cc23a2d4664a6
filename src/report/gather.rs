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

use super::group::{GroupBy, Grouped, Grouper, TargetError, ThreadIn};
use super::straggler::{Ranks, Verdict};
use super::tree::{TreeBuilder, TreeNode};

/// Groups, and the tree and verdict where asked for.
pub struct Gatherer {
    groups: Grouper,
    /// The threads' stacks merged (for `--tree`, and for the verdict, which reads it).
    tree: Option<TreeBuilder>,
    /// Whether the tree is shown (`--tree`).
    show_tree: bool,
    /// The verdict's record of each process's threads.
    ranks: Option<Ranks>,
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
                    ranks.add(at, t.why.as_ref());
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
        Gathered {
            grouped: self.groups.finish(failed),
            verdict,
            tree: self.tree.filter(|_| show).map(TreeBuilder::finish),
        }
    }
}
