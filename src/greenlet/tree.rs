//! How one interpreter's greenlets hang together: each main greenlet's thread state and the
//! greenlet it runs, each other greenlet's main greenlet and parent, and the thread each main
//! greenlet belongs to.

use super::layout::{GreenletLayout, THREAD_STATE_CURRENT};
use super::{GThread, Raw, Stacks};
use crate::cpython::values::field;
use crate::cpython::Snapshot;
use crate::error::ReadError;
use crate::memory::addr_map::{AddrMap, AddrSet};
use crate::memory::region_holding;

/// Deepest chain of not-started parents followed to find a greenlet's thread.
const MAX_PARENT_DEPTH: usize = 64;
/// Furthest a glibc thread's stack lies below its `pthread_t` (the thread descriptor sits at
/// the top of the stack's own mapping), or the main thread's below `__libc_stack_end`, when
/// the target's mappings are unknown.
const MAX_STACK_BELOW_TOP: u64 = 1 << 30;

pub(super) struct Tree {
    /// Main greenlet -> (its `ThreadState`, 0 once the thread ended; the greenlet it runs).
    pub mains: AddrMap<(u64, u64)>,
    /// Other greenlet -> (its main greenlet, 0 before it starts; its parent).
    pub links: AddrMap<(u64, u64)>,
    /// Main greenlets left out as unreadable: their greenlets' thread and state are not known.
    pub lost: AddrSet,
}

impl Tree {
    /// The tree of `raws`. A greenlet whose words cannot be read is an error entry and leaves
    /// `raws`: one bad greenlet costs only itself (DESIGN.md principle 2). `lost`: main
    /// greenlets already left out.
    pub fn read(
        snap: &Snapshot,
        lay: &GreenletLayout,
        raws: &mut Vec<Raw>,
        mut lost: AddrSet,
        err: &mut impl FnMut(u64, String),
    ) -> Tree {
        let mut bad = AddrSet::default();
        let mut unreadable = |r: &Raw, e: ReadError| {
            err(r.obj, format!("greenlet {:#x}: {e}", r.obj));
            bad.insert(r.obj);
        };
        let mut mains = AddrMap::default();
        let mut links = AddrMap::default();
        let mut no_current = Vec::new();
        for r in raws.iter() {
            if r.is_main() {
                match field(r.imp, lay.thread_state()).and_then(|a| snap.mem.read_ptr(a)) {
                    Ok(ts) => {
                        let current = current_greenlet(snap, ts).unwrap_or_else(|e| {
                            no_current.push((ts, e));
                            0
                        });
                        mains.insert(r.obj, (ts, current));
                    }
                    Err(e) => unreadable(r, e),
                }
            } else {
                let read = |at: u64| field(r.imp, at).and_then(|a| snap.mem.read_ptr(a));
                match read(lay.main_greenlet()).and_then(|mg| Ok((mg, read(lay.parent())?))) {
                    Ok(link) => {
                        links.insert(r.obj, link);
                    }
                    Err(e) => unreadable(r, e),
                }
            }
        }
        for (ts, e) in no_current {
            err(ts, format!("greenlet thread state: {e}"));
        }
        lost.extend(
            raws.iter()
                .filter(|r| r.is_main() && bad.contains(&r.obj))
                .map(|r| r.obj),
        );
        raws.retain(|r| !bad.contains(&r.obj));
        Tree { mains, links, lost }
    }

    /// The main greenlet of `obj`, where it was read.
    pub fn main_of(&self, obj: u64) -> Option<u64> {
        self.named_main(obj).filter(|m| self.mains.contains_key(m))
    }

    /// The main greenlet of `obj`, where it was left out as unreadable.
    pub fn lost_main_of(&self, obj: u64) -> Option<u64> {
        self.named_main(obj).filter(|m| self.lost.contains(m))
    }

    /// The main greenlet `obj` names. A greenlet not started yet names none: its parents'
    /// lineage says which.
    fn named_main(&self, obj: u64) -> Option<u64> {
        let mut cur = obj;
        for _ in 0..MAX_PARENT_DEPTH {
            if self.mains.contains_key(&cur) || self.lost.contains(&cur) {
                return Some(cur);
            }
            let (mg, parent) = *self.links.get(&cur)?;
            if mg != 0 {
                return Some(mg);
            }
            cur = parent;
        }
        None
    }

    /// Which of `threads` (those in `interp`) each main greenlet belongs to, by the stack
    /// addresses its greenlets record; None for one whose thread has ended or is not found
    /// (an error entry).
    pub fn threads_of_mains(
        &self,
        raws: &[Raw],
        interp: u64,
        threads: &[GThread],
        stacks: &Stacks,
        err: &mut impl FnMut(u64, String),
    ) -> AddrMap<Option<usize>> {
        let stack_addrs = self.stack_addrs(raws);
        let ours: Vec<usize> = (0..threads.len())
            .filter(|i| threads[*i].interps.contains(&interp))
            .collect();
        let mut thread_of_main = AddrMap::default();
        for (m, (ts, _)) in &self.mains {
            let t = if *ts == 0 {
                None
            } else {
                let found = stack_addrs.get(m).and_then(|addrs| {
                    addrs
                        .iter()
                        .find_map(|a| thread_of(*a, threads, &ours, stacks))
                });
                if found.is_none() {
                    err(
                        *m,
                        format!("main greenlet {m:#x}: which thread it belongs to is not known"),
                    );
                }
                found
            };
            thread_of_main.insert(*m, t);
        }
        thread_of_main
    }

    /// Main greenlet -> the stack addresses its greenlets record.
    fn stack_addrs(&self, raws: &[Raw]) -> AddrMap<Vec<u64>> {
        let mut stack_addrs: AddrMap<Vec<u64>> = AddrMap::default();
        for r in raws {
            let Some(m) = self.main_of(r.obj) else {
                continue;
            };
            let a = stack_addrs.entry(m).or_default();
            if !r.is_main() && r.stack_stop != 0 {
                a.push(r.stack_stop);
            }
            // The main greenlet's `_stack_start` is 1 until it first switches away.
            if r.stack_start > 1 && self.mains.get(&m).is_some_and(|(_, cur)| *cur != r.obj) {
                a.push(r.stack_start);
            }
        }
        stack_addrs
    }
}

/// `ThreadState::current_greenlet` of the thread state `ts` (0 for none).
fn current_greenlet(snap: &Snapshot, ts: u64) -> Result<u64, ReadError> {
    if ts == 0 {
        return Ok(0);
    }
    snap.mem.read_ptr(field(ts, THREAD_STATE_CURRENT)?)
}

/// The thread (among `ours`) whose stack holds `addr`.
fn thread_of(addr: u64, threads: &[GThread], ours: &[usize], stacks: &Stacks) -> Option<usize> {
    if !stacks.regions.is_empty() {
        let (start, end) = region_holding(stacks.regions, addr)?;
        let inside = |a: u64| a >= start && a < end;
        return ours.iter().copied().find(|&t| {
            let th = &threads[t];
            inside(th.pthread)
                || stacks
                    .anchors
                    .iter()
                    .any(|(lwp, a)| Some(*lwp) == th.native_id && inside(*a))
        });
    }
    // No mappings: a glibc thread's stack lies right below its descriptor, the main thread's
    // below `__libc_stack_end` (its descriptor is elsewhere, in the dynamic linker's TLS).
    let below = |top: u64| top > addr && top - addr < MAX_STACK_BELOW_TOP;
    ours.iter()
        .copied()
        .filter(|&t| below(threads[t].pthread))
        .min_by_key(|&t| threads[t].pthread)
        .or_else(|| {
            let (lwp, _) = stacks.main_stack.filter(|m| below(m.1))?;
            ours.iter()
                .copied()
                .find(|&t| threads[t].native_id == Some(lwp))
        })
}
