//! Deadlocks: the cycles of the wait-for graph. Each waiting thread has at most one edge, to
//! the owner of what it waits for, so every cycle is found by following edges from each
//! thread once; the walk is bounded by the thread count.

use crate::memory::addr_map::AddrMap;
use crate::model::{Deadlock, DeadlockKind, ThreadReport};

/// The cycles among `threads` (each once, starting at its thread listed first), then one
/// `await` deadlock per asyncio await cycle in `await_cycles`.
pub fn deadlocks(threads: &[ThreadReport], await_cycles: &[Vec<u64>]) -> Vec<Deadlock> {
    // native id -> (what it waits for, its owner)
    let edges: AddrMap<(u64, u64)> = threads
        .iter()
        .filter_map(|t| {
            let w = t.why.as_ref()?.waiting.as_ref()?;
            Some((t.native_id?, (w.object?, w.owner?)))
        })
        .collect();
    let order: Vec<u64> = threads.iter().filter_map(|t| t.native_id).collect();
    let mut out: Vec<Deadlock> = cycles(&order, &edges)
        .into_iter()
        .map(|threads| Deadlock {
            kind: DeadlockKind::Locks,
            objects: threads.iter().map(|t| edges[t].0).collect(),
            threads,
            tasks: Vec::new(),
        })
        .collect();
    out.extend(await_cycles.iter().map(|c| Deadlock {
        kind: DeadlockKind::Await,
        threads: Vec::new(),
        objects: Vec::new(),
        tasks: c.clone(),
    }));
    out
}

/// The cycles among asyncio tasks waiting for each other's locks: `tasks` are (task id, what
/// it waits for and the task that holds it), in report order.
pub fn task_deadlocks(tasks: &[(u64, Option<(u64, u64)>)]) -> Vec<Deadlock> {
    let edges: AddrMap<(u64, u64)> = tasks.iter().filter_map(|&(id, e)| Some((id, e?))).collect();
    let order: Vec<u64> = tasks.iter().map(|t| t.0).collect();
    cycles(&order, &edges)
        .into_iter()
        .map(|tasks| Deadlock {
            kind: DeadlockKind::TaskLocks,
            objects: tasks.iter().map(|t| edges[t].0).collect(),
            threads: Vec::new(),
            tasks,
        })
        .collect()
}

/// The cycles of the graph whose nodes are `order` and whose edges are `edges` (node ->
/// (object, next node)): each once, listed from its node that comes first in `order`. Each
/// node has at most one edge, so following edges from each node once finds them all.
fn cycles(order: &[u64], edges: &AddrMap<(u64, u64)>) -> Vec<Vec<u64>> {
    // 0: not seen, 1: on the current path, 2: done.
    let mut mark: AddrMap<u8> = AddrMap::default();
    let mut out = Vec::new();
    for &start in order {
        // No cycle goes through a node without an edge (most of 100,000 tasks wait on none).
        if !edges.contains_key(&start) {
            continue;
        }
        let mut path = Vec::new();
        let mut at = start;
        loop {
            match mark.get(&at).copied().unwrap_or(0) {
                0 => {}
                1 => {
                    let from = path.iter().position(|&p| p == at).unwrap_or(0);
                    let cycle = &path[from..];
                    let first = order
                        .iter()
                        .find_map(|n| cycle.iter().position(|c| c == n))
                        .unwrap_or(0);
                    let mut nodes: Vec<u64> = cycle.to_vec();
                    nodes.rotate_left(first);
                    out.push(nodes);
                    break;
                }
                _ => break,
            }
            mark.insert(at, 1);
            path.push(at);
            match edges.get(&at) {
                Some(&(_, next)) => at = next,
                None => break,
            }
        }
        for p in path {
            mark.insert(p, 2);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ThreadWhy, WaitKind, Waiting};

    fn thread(id: u64, waits: Option<(u64, Option<u64>)>) -> ThreadReport {
        ThreadReport {
            native_id: Some(id),
            thread_id: Some(id),
            name: None,
            native_name: None,
            holds_gil: None,
            interpreter: Some(0),
            interpreter_id: None,
            thread_state: Some(0),
            frames: Vec::new(),
            truncated: false,
            why: Some(ThreadWhy {
                waiting: waits.map(|(object, owner)| Waiting {
                    kind: WaitKind::Lock,
                    object: Some(object),
                    type_name: None,
                    owner,
                    frame: 0,
                    on: None,
                }),
                ..ThreadWhy::default()
            }),
        }
    }

    #[test]
    fn a_cycle_is_found_once_from_its_first_listed_thread() {
        let t = [
            thread(1, Some((0x30, Some(3)))),
            thread(2, Some((0x10, Some(1)))),
            thread(3, Some((0x20, Some(2)))),
            thread(4, Some((0x10, Some(1)))),
            thread(5, Some((0x50, None))),
        ];
        let d = deadlocks(&t, &[]);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].threads, vec![1, 3, 2]);
        assert_eq!(d[0].objects, vec![0x30, 0x20, 0x10]);
    }

    #[test]
    fn a_thread_waiting_on_itself_is_a_cycle_and_chains_are_not() {
        let t = [
            thread(1, Some((0x10, Some(1)))),
            thread(2, Some((0x20, Some(1)))),
        ];
        let d = deadlocks(&t, &[vec![7, 8]]);
        assert_eq!(d.len(), 2);
        assert_eq!(
            (d[0].threads.clone(), d[0].kind),
            (vec![1], DeadlockKind::Locks)
        );
        assert_eq!(
            (d[1].tasks.clone(), d[1].kind),
            (vec![7, 8], DeadlockKind::Await)
        );
    }
}
