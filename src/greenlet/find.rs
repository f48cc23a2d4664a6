//! Where greenlets are found besides the GC lists: the greenlet class tree (every subclass,
//! from `tp_subclasses`) and, for a default build stopped inside a collection, a scan of the
//! heap for objects of those types.

use std::collections::HashSet;

use super::{Stacks, MAX_GREENLETS};
use crate::cpython::Snapshot;
use crate::error::{ReadError, ReadErrorKind};

/// `PyTypeObject.tp_subclasses`: 42 words after `tp_name` (Include/cpython/object.h, 3.10 to
/// 3.15; checked against the DWARF of pyenv's 3.10.13 to 3.13.0 and our 3.13t).
const TP_SUBCLASSES_FROM_NAME: u64 = 336;
/// Most types in one class tree.
const MAX_SUBCLASSES: usize = 4096;
/// Most bytes a heap scan reads.
const MAX_HEAP_SCAN_BYTES: u64 = 4 << 30;
/// What a heap scan reads at once.
const SCAN_CHUNK: u64 = 1 << 20;

/// `root` and every class derived from it, from each type's `tp_subclasses` (a dict of weak
/// references, kept for every type that is not a static builtin one).
pub(super) fn subclasses(
    snap: &Snapshot,
    root: u64,
    err: &mut impl FnMut(u64, String),
) -> HashSet<u64> {
    let mut out = HashSet::from([root]);
    let mut todo = vec![root];
    let header = snap.layout.pyobject.ob_type + 8;
    let off = snap.layout.type_object.tp_name + TP_SUBCLASSES_FROM_NAME;
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
pub(super) fn scan_heap(
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
pub(super) fn derives_from(snap: &Snapshot, mut tp: u64, root: u64) -> bool {
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
