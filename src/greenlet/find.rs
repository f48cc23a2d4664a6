//! Where greenlets are found: among the interpreter's GC objects (its GC lists; a
//! free-threaded build's mimalloc GC heaps) and, for a default build stopped inside a
//! collection, by a scan of the heap for objects of the greenlet class tree (every subclass,
//! from `tp_subclasses`).

use std::collections::HashSet;

use super::{Module, Stacks, MAX_GREENLETS};
use crate::cpython::layout::GcLists;
use crate::cpython::Snapshot;
use crate::error::{ReadError, ReadErrorKind};
use crate::memory::addr_map::AddrMap;

/// Most types in one class tree.
const MAX_SUBCLASSES: usize = 4096;
/// Most bytes a heap scan reads.
const MAX_HEAP_SCAN_BYTES: u64 = 4 << 30;
/// What a heap scan reads at once.
const SCAN_CHUNK: u64 = 1 << 20;

/// Objects found so far whose type is the greenlet type or derives from it.
struct Found {
    root: u64,
    objs: Vec<(u64, u64)>,
    too_many: bool,
    kinds: AddrMap<bool>,
    /// Objects of one type often come in runs: the last answer first.
    last: (u64, bool),
}

impl Found {
    /// Keeps `obj` if its type `tp` is a greenlet's; false once there are too many.
    fn keep(&mut self, snap: &Snapshot, obj: u64, tp: u64) -> bool {
        let is = if tp == self.last.0 {
            self.last.1
        } else {
            let root = self.root;
            let is = *self
                .kinds
                .entry(tp)
                .or_insert_with(|| derives_from(snap, tp, root));
            self.last = (tp, is);
            is
        };
        if is {
            if self.objs.len() < MAX_GREENLETS {
                self.objs.push((obj, tp));
            } else {
                self.too_many = true;
            }
        }
        !self.too_many
    }
}

/// Every greenlet of `interp` as (object, type), and whether a heap scan found them (then
/// some are words that only look like one, which their round trip tells); None when they
/// cannot be looked for (`err` says why).
pub(super) fn objects(
    snap: &Snapshot,
    interp: u64,
    stacks: &Stacks,
    m: &Module,
    err: &mut impl FnMut(u64, String),
) -> Option<(Vec<(u64, u64)>, bool)> {
    let mut found = Found {
        root: m.ty,
        objs: Vec::new(),
        too_many: false,
        kinds: AddrMap::default(),
        last: (0, false),
    };
    let scanned = match snap.layout.interpreter_state.gc {
        Some(lists) if snap.gc_collecting(interp) != Some(true) => {
            from_gc_lists(snap, interp, &lists, &mut found, err);
            false
        }
        None => {
            from_gc_heaps(snap, interp, &mut found, err);
            false
        }
        // Inside a collection, which has them on its own lists: anywhere in the heap.
        Some(_) => {
            from_heap_scan(snap, interp, stacks, m, &mut found, err)?;
            true
        }
    };
    if found.too_many {
        err(interp, format!("cut at {MAX_GREENLETS} greenlets"));
    }
    Some((found.objs, scanned))
}

fn from_gc_lists(
    snap: &Snapshot,
    interp: u64,
    lists: &GcLists,
    found: &mut Found,
    err: &mut impl FnMut(u64, String),
) {
    for e in snap.gc_objects(interp, lists, |obj, tp| {
        found.keep(snap, obj, tp);
    }) {
        err(
            e.addr,
            format!("GC list: {e} (greenlets after it are not listed)"),
        );
    }
}

/// A free-threaded build's GC objects, from its mimalloc heaps.
fn from_gc_heaps(
    snap: &Snapshot,
    interp: u64,
    found: &mut Found,
    err: &mut impl FnMut(u64, String),
) {
    let ob_type = snap.layout.pyobject.ob_type;
    let mut cut = None;
    let mut heap_errors = snap.mimalloc_gc_objects(interp, |obj| {
        match snap.mem.read_ptr(obj.wrapping_add(ob_type)) {
            Ok(tp) => found.keep(snap, obj, tp),
            Err(e) => {
                cut = Some(e);
                false
            }
        }
    });
    heap_errors.extend(cut);
    // Once the stop's budget is spent every read fails alike: said once.
    let mut limit = false;
    for e in heap_errors {
        if matches!(e.kind, ReadErrorKind::Limit { .. }) && std::mem::replace(&mut limit, true) {
            continue;
        }
        err(
            e.addr,
            format!("GC heaps: {e} (greenlets past it are not listed)"),
        );
    }
}

fn from_heap_scan(
    snap: &Snapshot,
    interp: u64,
    stacks: &Stacks,
    m: &Module,
    found: &mut Found,
    err: &mut impl FnMut(u64, String),
) -> Option<()> {
    if !m.lay.has_self {
        err(
            m.ty,
            format!(
                "greenlet {}: a heap scan needs greenlet 3.1.1+ (its `_self` check)",
                m.version
            ),
        );
        return None;
    }
    if stacks.regions.is_empty() {
        err(
            interp,
            "stopped inside a collection: greenlets are found by a heap scan then, which needs the target's memory map (not known when memory is read through the debugger)".into(),
        );
        return None;
    }
    let types = subclasses(snap, m.ty, err);
    for e in scan_heap(snap, stacks, &types, &mut found.objs) {
        err(
            e.addr,
            format!("heap scan: {e} (greenlets past it are not listed)"),
        );
    }
    if found.objs.len() > MAX_GREENLETS {
        found.objs.truncate(MAX_GREENLETS);
        found.too_many = true;
    }
    Some(())
}

/// `root` and every class derived from it, from each type's `tp_subclasses` (a dict of weak
/// references, kept for every type that is not a static builtin one).
fn subclasses(snap: &Snapshot, root: u64, err: &mut impl FnMut(u64, String)) -> HashSet<u64> {
    let mut out = HashSet::from([root]);
    let mut todo = vec![root];
    let header = snap.layout.pyobject.header_size();
    let off = snap.layout.type_object.tp_subclasses();
    while let Some(t) = todo.pop() {
        let Ok(d) = snap.mem.read_ptr(t.wrapping_add(off)) else {
            continue;
        };
        if d == 0 {
            continue;
        }
        let items = match snap.dict_items(d, MAX_SUBCLASSES as u64) {
            Ok(i) => i,
            Err(e) => {
                err(t, format!("subclasses of type {t:#x}: {e}"));
                continue;
            }
        };
        for (_, weak) in items {
            // `PyWeakReference.wr_object`, right after the header.
            let Ok(sub) = snap.mem.read_ptr(weak.wrapping_add(header)) else {
                continue;
            };
            if sub != 0 && out.len() < MAX_SUBCLASSES && out.insert(sub) {
                todo.push(sub);
            }
        }
    }
    out
}

/// Every object in the target's anonymous mappings whose type is one of `types`, appended
/// to `out` as (object, type): candidates, each still to be checked by its round trip.
fn scan_heap(
    snap: &Snapshot,
    stacks: &Stacks,
    types: &HashSet<u64>,
    out: &mut Vec<(u64, u64)>,
) -> Vec<ReadError> {
    let ob_type = snap.layout.pyobject.ob_type;
    // Most words are not near any type: one range check before the set lookup.
    let (lo, hi) = (
        types.iter().min().copied().unwrap_or(0),
        types.iter().max().copied().unwrap_or(0),
    );
    let mut read = 0u64;
    let mut errors = Vec::new();
    let mem = stacks.raw.as_deref().unwrap_or(&*snap.mem);
    for &(start, end) in stacks.regions {
        if stacks.files.iter().any(|f| f.0 < end && start < f.1) {
            continue;
        }
        let mut at = start;
        while at < end {
            let len = (end - at).min(SCAN_CHUNK);
            if read + len > MAX_HEAP_SCAN_BYTES {
                errors.push(ReadError::new(
                    at,
                    0,
                    ReadErrorKind::Limit {
                        what: "bytes of heap scanned",
                        max: MAX_HEAP_SCAN_BYTES,
                    },
                ));
                return errors;
            }
            read += len;
            match mem.read_vec(at, len, SCAN_CHUNK) {
                Ok(bytes) => {
                    for (i, w) in bytes.chunks_exact(8).enumerate() {
                        let w = u64::from_le_bytes(w.try_into().unwrap_or_default());
                        if w >= lo && w <= hi && types.contains(&w) && out.len() <= MAX_GREENLETS {
                            out.push(((at + 8 * i as u64).wrapping_sub(ob_type), w));
                        }
                    }
                }
                // The stop's budget is spent: say so once, and stop.
                Err(e) if matches!(e.kind, ReadErrorKind::Limit { .. }) => {
                    errors.push(e);
                    return errors;
                }
                // Pages a core did not save, guard pages: nothing to find there.
                Err(_) => {}
            }
            at += len;
        }
    }
    errors
}

/// Whether type `tp` is `root` or derives from it (gevent's `Greenlet` and `Hub`, eventlet's
/// `GreenThread`): `tp_base` up to a bounded depth.
fn derives_from(snap: &Snapshot, mut tp: u64, root: u64) -> bool {
    for _ in 0..32 {
        if tp == root {
            return true;
        }
        match snap.type_at(tp) {
            Ok(t) if t.base != 0 => tp = t.base,
            _ => return false,
        }
    }
    false
}
