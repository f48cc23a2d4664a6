//! The objects on the garbage collector's lists: every GC-tracked object of an interpreter
//! (default builds), for readers of objects nothing else points to (greenlets).

use super::layout::GcLists;
use super::snapshot::Snapshot;
use super::values::field;
use crate::error::ReadError;
use crate::memory::addr_map::AddrSet;

/// `sizeof(PyGC_Head)`: `_gc_next` and `_gc_prev` (Include/internal/pycore_gc.h, 3.10 to
/// 3.15), right before the object.
pub const GC_HEAD_SIZE: u64 = 16;
/// The low bits of both links carry flags (`_PyGC_PREV_MASK_FINALIZED`/`_COLLECTING` in
/// `_gc_prev`; 3.14's old-space and unreachable bits in `_gc_next`).
const LINK_FLAGS: u64 = 3;

/// The end of one GC list walk.
pub enum ListEnd {
    /// Back at the head: every object was seen.
    Complete,
    /// Stopped early; the error says where and why.
    Cut(ReadError),
    /// The caller ended the walk (its own budget is spent).
    Stopped,
}

impl Snapshot {
    /// Calls `each(object, ob_type)` for every object on `interp`'s GC lists. Each list is
    /// bounded by the stop's object budget and cycle-checked, and its links are checked both
    /// ways; a list that stops early returns its error, the others are still walked.
    pub fn gc_objects(
        &self,
        interp: u64,
        lists: &GcLists,
        mut each: impl FnMut(u64, u64),
    ) -> Vec<ReadError> {
        self.gc_lists_walk(interp, lists, true, &mut |o, t| {
            each(o, t);
            true
        })
    }

    /// As [`Snapshot::gc_objects`], for a caller that charges the object budget for each
    /// object itself (the heap census charges every object once, however it reaches it) and
    /// ends the walk by returning false (which it must once the budget is spent: the lists
    /// are then not charged).
    pub fn gc_objects_uncharged(
        &self,
        interp: u64,
        lists: &GcLists,
        mut each: impl FnMut(u64, u64) -> bool,
    ) -> Vec<ReadError> {
        self.gc_lists_walk(interp, lists, false, &mut each)
    }

    fn gc_lists_walk(
        &self,
        interp: u64,
        lists: &GcLists,
        charge: bool,
        each: &mut impl FnMut(u64, u64) -> bool,
    ) -> Vec<ReadError> {
        let mut errors = Vec::new();
        let ob_type = self.layout.pyobject.ob_type;
        for head_off in lists.heads {
            let head = match field(interp, lists.gc).and_then(|g| field(g, head_off)) {
                Ok(h) => h,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            match self.walk_gc_list(head, ob_type, charge, each) {
                ListEnd::Cut(e) => errors.push(e),
                ListEnd::Stopped => break,
                ListEnd::Complete => {}
            }
        }
        errors
    }

    fn walk_gc_list(
        &self,
        head: u64,
        ob_type: u64,
        charge: bool,
        each: &mut impl FnMut(u64, u64) -> bool,
    ) -> ListEnd {
        let mut seen = AddrSet::default();
        let first = match self.mem.read_ptr(head) {
            Ok(n) => n & !LINK_FLAGS,
            Err(e) => return ListEnd::Cut(e),
        };
        let (mut node, mut prev) = (first, head);
        // One read per object: the two links and the object's header up to `ob_type` (into
        // a buffer of our own: a heap has millions of objects).
        let span = (GC_HEAD_SIZE + ob_type + 8) as usize;
        let mut buf = [0u8; 64];
        let Some(raw) = buf.get_mut(..span) else {
            return ListEnd::Cut(ReadError::corrupt(head, "GC list: object header too large"));
        };
        while node != head {
            if node == 0 || !seen.insert(node) {
                return ListEnd::Cut(ReadError::corrupt(
                    head,
                    "GC list: broken (a NULL link or a cycle)",
                ));
            }
            if charge {
                if let Err(e) = self.budget.object(node) {
                    return ListEnd::Cut(e);
                }
            }
            if let Err(e) = self.mem.read_into(node, raw) {
                return ListEnd::Cut(e);
            }
            let word = |o: u64| {
                raw.get(o as usize..o as usize + 8)
                    .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
            };
            let (next, back) = (word(0) & !LINK_FLAGS, word(8) & !LINK_FLAGS);
            if back != prev {
                return ListEnd::Cut(ReadError::corrupt(
                    node,
                    "GC list: links disagree (stopped inside a collection?)",
                ));
            }
            if !each(
                node.wrapping_add(GC_HEAD_SIZE),
                word(GC_HEAD_SIZE + ob_type),
            ) {
                return ListEnd::Stopped;
            }
            prev = node;
            node = next;
        }
        ListEnd::Complete
    }
}
