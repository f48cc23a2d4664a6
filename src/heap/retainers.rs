//! `heap.retainers`: what each object keeps alive, and the shortest way to it from a root, over
//! the object graph a finished census walk hands over ([`ObjectGraph`]).
//!
//! The roots are one node ([`ROOT`]) whose referents are every module of `sys.modules`
//! (first, so that where two shortest paths tie a module's wins) and every object a thread's
//! frame holds in its locals. An object's retained size is its own and that of everything
//! reachable only through it: its subtree in the dominator tree of that graph (petgraph's
//! `simple_fast`, Cooper, Harvey and Kennedy). Objects no root reaches (a garbage cycle, what
//! only C code holds) are in no subtree. `held_by` is the breadth-first path from the roots.

use std::collections::VecDeque;

use petgraph::algo::dominators::simple_fast;
use petgraph::csr::Csr;

use crate::cpython::heap::{Graph, Hop, ObjectGraph, Roots, Step, ROOT};
use crate::cpython::Snapshot;
use crate::error::ReadError;
use crate::model::HeapRetainer;

/// Steps of a path kept; a longer one is null.
const MAX_PATH: usize = 64;
/// The containers at most looked at per retainer listed before giving up (each may be a
/// module's or a class's namespace, which is not listed).
const CANDIDATES_PER_SLOT: usize = 64;
/// No node (the BFS parent of the root and of what no root reaches).
const NONE: u32 = u32::MAX;

/// The `top` objects that keep the most alive, the roots' namespaces left out, over `og` (its
/// root linked to `roots` here).
pub fn top(
    snap: &Snapshot,
    mut og: ObjectGraph,
    roots: &Roots,
    top: usize,
) -> Result<Vec<HeapRetainer>, ReadError> {
    og.link_roots(roots);
    let g = og.graph();
    if top == 0 || g.out(ROOT).is_empty() {
        return Ok(Vec::new());
    }
    let idom = dominators(g)?;
    let retained = retained_sizes(g, &idom);
    let parent = bfs_parents(g);
    let mut order: Vec<u32> = (1..g.nodes.len() as u32)
        .filter(|&v| idom[v as usize] != NONE && og.may_list(v))
        .collect();
    let mut out = Vec::new();
    let want = top.saturating_mul(CANDIDATES_PER_SLOT).min(order.len());
    if want == 0 {
        return Ok(out);
    }
    // The most retained first, then by address: the order a reader can check.
    let by_retained = |a: &u32, b: &u32| {
        retained[*b as usize]
            .cmp(&retained[*a as usize])
            .then(g.nodes[*a as usize].addr.cmp(&g.nodes[*b as usize].addr))
    };
    order.select_nth_unstable_by(want - 1, by_retained);
    order.truncate(want);
    order.sort_unstable_by(by_retained);
    for v in order {
        if out.len() >= top {
            break;
        }
        let path = path_to(&parent, v);
        let labelled = path.as_ref().map(|p| label(snap, &og, roots, p));
        if labelled.as_ref().is_some_and(|l| l.unlisted) {
            continue;
        }
        let n = g.nodes[v as usize];
        out.push(HeapRetainer {
            address: n.addr,
            type_name: og.type_name(n.tp),
            len: n.object_len(),
            bytes: n.bytes,
            retained: retained[v as usize],
            held_by: labelled.map(|l| l.steps),
        });
    }
    Ok(out)
}

/// Each node's immediate dominator (NONE: unreached, and the root's own).
///
/// Most objects of a big heap are leaves held once (a str, a bytes, a float in one container):
/// their dominator is that holder, so they are left out of the graph given to `simple_fast`
/// (a third of the nodes of a heap of instances with a str each) and put back after.
fn dominators(g: &Graph) -> Result<Vec<u32>, ReadError> {
    let n = g.nodes.len();
    // Referrers per node, counted up to 2 (a repeated edge counts twice: then it is no leaf
    // held once, which is only slower), and the last one.
    let mut held = vec![0u8; n];
    let mut holder = vec![NONE; n];
    for v in 0..n as u32 {
        for &t in g.out(v) {
            held[t as usize] = held[t as usize].saturating_add(1).min(2);
            holder[t as usize] = v;
        }
    }
    let leaf = |t: u32| t != ROOT && held[t as usize] == 1 && g.out(t).is_empty();
    let mut pairs: Vec<(u32, u32)> = Vec::with_capacity(g.edge_count());
    let mut row = Vec::new();
    for v in 0..n as u32 {
        row.clear();
        row.extend(g.out(v).iter().copied().filter(|&t| !leaf(t)));
        row.sort_unstable();
        row.dedup();
        pairs.extend(row.iter().map(|&t| (v, t)));
    }
    let mut idom = vec![NONE; n];
    if pairs.is_empty() {
        // The root holds leaves only.
        for t in g.out(ROOT) {
            idom[*t as usize] = ROOT;
        }
        return Ok(idom);
    }
    let csr: Csr<(), (), petgraph::Directed, u32> = Csr::from_sorted_edges(&pairs)
        .map_err(|_| ReadError::corrupt(0, "heap: object graph out of order"))?;
    drop(pairs);
    let doms = simple_fast(&csr, ROOT);
    let reached = csr.node_count();
    for (v, d) in idom.iter_mut().enumerate().take(reached).skip(1) {
        if let Some(i) = doms.immediate_dominator(v as u32) {
            *d = i;
        }
    }
    for v in 1..n as u32 {
        let h = holder[v as usize];
        if leaf(v) && (h == ROOT || idom[h as usize] != NONE) {
            idom[v as usize] = h;
        }
    }
    Ok(idom)
}

/// Each node's own bytes plus those of the nodes it dominates.
fn retained_sizes(g: &Graph, idom: &[u32]) -> Vec<u64> {
    let n = idom.len();
    // The dominator tree's children, counting-sorted by parent.
    let mut start = vec![0u32; n + 1];
    for &d in idom.iter().filter(|&&d| d != NONE) {
        start[d as usize + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut children = vec![0u32; start[n] as usize];
    for (v, &d) in idom.iter().enumerate() {
        if d != NONE {
            children[fill[d as usize] as usize] = v as u32;
            fill[d as usize] += 1;
        }
    }
    // Parents before children; summed in reverse.
    let mut order = Vec::with_capacity(n);
    order.push(ROOT);
    let mut i = 0;
    while let Some(&v) = order.get(i) {
        let (a, b) = (start[v as usize] as usize, start[v as usize + 1] as usize);
        order.extend_from_slice(&children[a..b]);
        i += 1;
    }
    let mut retained: Vec<u64> = g.nodes.iter().map(|n| n.bytes).collect();
    for &v in order.iter().rev().filter(|&&v| v != ROOT) {
        let d = idom[v as usize] as usize;
        retained[d] = retained[d].saturating_add(retained[v as usize]);
    }
    retained
}

/// Breadth-first parents from the root, referents in the order read.
fn bfs_parents(g: &Graph) -> Vec<u32> {
    let mut parent = vec![NONE; g.nodes.len()];
    parent[ROOT as usize] = ROOT;
    let mut queue = VecDeque::from([ROOT]);
    while let Some(v) = queue.pop_front() {
        for &t in g.out(v) {
            if parent[t as usize] == NONE {
                parent[t as usize] = v;
                queue.push_back(t);
            }
        }
    }
    parent
}

/// The nodes from the root's referent to `v`; None when longer than [`MAX_PATH`] steps.
fn path_to(parent: &[u32], v: u32) -> Option<Vec<u32>> {
    let mut path = vec![v];
    let mut at = v;
    while parent[at as usize] != ROOT {
        at = parent[at as usize];
        if at == NONE || path.len() > MAX_PATH {
            return None;
        }
        path.push(at);
    }
    path.reverse();
    Some(path)
}

/// A path put in words.
struct Labelled {
    steps: Vec<Step>,
    /// Its last hop is into a namespace (a module's, a class's or an instance's `__dict__`),
    /// a function's closure or defaults: its owner is the one to list.
    unlisted: bool,
}

fn label(snap: &Snapshot, og: &ObjectGraph, roots: &Roots, path: &[u32]) -> Labelled {
    let mut steps = Vec::new();
    let mut unlisted = false;
    let mut namespace = false;
    let mut i = 0;
    while i < path.len() {
        let hop = if i == 0 {
            root_step(roots, og.nodes()[path[0] as usize].addr)
        } else {
            og.hop(snap, path[i - 1], path[i], namespace, path.get(i + 1..))
        };
        namespace = matches!(hop, Hop::Namespace);
        unlisted = matches!(hop, Hop::Namespace | Hop::Owned);
        match hop {
            Hop::Step(s) => steps.push(s),
            Hop::Closure(s, skip) => {
                steps.push(s);
                i += skip;
                unlisted = false;
            }
            Hop::Namespace | Hop::Silent | Hop::Owned => {}
        }
        i += 1;
    }
    Labelled { steps, unlisted }
}

/// The root's hop to `obj`: the module first, else the first local holding it.
fn root_step(roots: &Roots, obj: u64) -> Hop {
    if let Some((_, name)) = roots.modules.iter().find(|m| m.0 == obj) {
        return Hop::Step(Step::Module(name.clone()));
    }
    match roots.locals.iter().find(|l| l.obj == obj) {
        Some(l) => Hop::Step(Step::Local {
            name: l.name.clone(),
            function: l.function.clone(),
            thread: l.thread,
            thread_name: l.thread_name.clone(),
        }),
        None => Hop::Step(Step::Via("roots".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A graph of `n` objects of 10 bytes each (node i at address i * 16) and these edges.
    fn graph(n: u32, edges: &[(u32, u32)]) -> Graph {
        let mut g = Graph::default();
        for i in 1..=n {
            let (id, _) = g.reach(u64::from(i) * 16);
            g.sized(id, 8, 10, None);
        }
        for v in 0..=n {
            g.link(v, edges.iter().filter(|e| e.0 == v).map(|e| e.1));
        }
        g
    }

    #[test]
    fn shared_objects_are_retained_by_their_dominator_and_garbage_by_none() {
        // root -> 1 -> {2, 3} -> 4 (a diamond: 4 is 1's, not 2's or 3's); root -> 5 -> 6;
        // 7 <-> 8 is a cycle nothing reaches; 6 -> 4 makes 4 the root's.
        let g = graph(
            8,
            &[
                (0, 1),
                (1, 2),
                (1, 3),
                (2, 4),
                (3, 4),
                (0, 5),
                (7, 8),
                (8, 7),
            ],
        );
        let idom = dominators(&g).unwrap();
        assert_eq!(idom[4], 1);
        assert_eq!((idom[7], idom[8]), (NONE, NONE));
        let r = retained_sizes(&g, &idom);
        assert_eq!((r[1], r[2], r[4], r[5]), (40, 10, 10, 10));
        let g = graph(
            6,
            &[
                (0, 1),
                (1, 2),
                (1, 3),
                (2, 4),
                (3, 4),
                (0, 5),
                (5, 6),
                (6, 4),
            ],
        );
        let idom = dominators(&g).unwrap();
        assert_eq!(idom[4], ROOT);
        assert_eq!(retained_sizes(&g, &idom)[1], 30);
        // Paths: breadth first, the root's referents in order.
        let parent = bfs_parents(&g);
        assert_eq!(path_to(&parent, 4), Some(vec![1, 2, 4]));
        assert_eq!(path_to(&parent, 6), Some(vec![5, 6]));
    }
}
