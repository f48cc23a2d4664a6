//! What the heap holds (`--heap`): every object on an interpreter's GC lists, and every object
//! reached from those through the referents of containers whose layout is known, each once,
//! counted by type with the size `sys.getsizeof` gives it.
//!
//! ```text
//! GC lists (all generations, permanent) ──► object ──► referents (list, tuple, dict, set,
//!                                               ▲       deque, instance dict / values,
//!                                               └────── __slots__, module dict, cell, type)
//! ```
//!
//! Sizes are `type(o).__sizeof__(o)` plus the pre-header `sys.getsizeof` adds
//! (`_PySys_GetSizeOf`): the GC header for GC types, and from 3.11 the managed-dict words (3.12+:
//! managed dict or weakref). `__sizeof__` is modelled for str, int, list, dict, set, deque,
//! type, bytearray, code, frame and generator objects; every other type gets
//! `object.__sizeof__`: `tp_basicsize` plus `tp_itemsize × |ob_size|`, exact for types that do
//! not define their own.
//!
//! Untrusted memory: the walk is a loop over an explicit stack, every address is visited once
//! (a visited set), each object is charged to the stop's object budget, and every count read
//! from the target (entries, items, blocks, members) is capped by a named constant.
//!
//! The modules: this one runs the walk (roots, the visited set, budgets, totals); `visit`
//! sizes and counts one object by its kind; `sizes` models the `__sizeof__`s that are not
//! `object.__sizeof__`; `referents` reads what a container holds; `types` reads what the walk
//! needs of a type (its kind, sizes, `__slots__`, name); `graph` keeps every object reached
//! and its referents, handed over whole as an `object_graph` (what it keeps alive is the heap
//! layer's, `crate::heap::retainers`), whose hops `steps` names.

mod graph;
mod object_graph;
mod referents;
mod roots;
mod sizes;
mod steps;
#[cfg(test)]
mod tests;
mod types;
mod visit;

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::snapshot::Snapshot;
use crate::error::{ReadError, ReadErrorKind};
use crate::memory::addr_map::AddrMap;
pub use graph::{Graph, Node, ROOT};
pub use object_graph::ObjectGraph;
pub use referents::MAX_HEAP_ITEMS;
pub use roots::{LocalRoot, Roots};
pub use steps::{Hop, Step};
use types::TypeRec;

/// The referrer's name in `unreadable_by` of objects the walk began at (a GC list's, a
/// frame's locals).
pub const ROOTS: &str = "<roots>";
/// Read errors kept (every one is counted).
const MAX_ERRORS: usize = 16;

/// One type's total.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeTotal {
    pub name: String,
    pub count: u64,
    pub bytes: u64,
    /// For types whose objects keep memory `sys.getsizeof` leaves out (torch tensors): its
    /// bytes on the CPU and on CUDA devices, each shared storage once; the inner None where
    /// they could not be read.
    pub data: Option<(Option<u64>, Option<u64>)>,
}

/// One of the largest objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Largest {
    pub address: u64,
    pub type_name: String,
    pub bytes: u64,
    /// The container's or sequence's length (`len(o)`), for the kinds that have one.
    pub len: Option<u64>,
}

/// The census of one stop's heap.
#[derive(Debug, Default)]
pub struct Census {
    /// Sorted by bytes, largest first.
    pub types: Vec<TypeTotal>,
    pub largest: Vec<Largest>,
    pub objects: u64,
    pub bytes: u64,
    /// Objects whose referents the walk does not read, by type: what only they refer to is
    /// not counted.
    pub unwalked: Vec<(String, u64)>,
    /// Referents that could not be read (an address with no object there).
    pub unreadable: u64,
    /// The same by the type of the object that referred to them, most first; a root (on a
    /// GC list, in a frame's locals) is [`ROOTS`].
    pub unreadable_by: Vec<(String, u64)>,
    /// The walk stopped early (a budget, or a GC list cut): the totals are a lower bound.
    pub complete: bool,
    /// What the walk reached and read, for what keeps the most alive
    /// (`crate::heap::retainers`); None when the walk did not see the whole graph (an error
    /// says so).
    pub graph: Option<ObjectGraph>,
    pub errors: Vec<ReadError>,
}

impl Census {
    /// Keeps `e` among the first few errors, as the walk does.
    pub fn note(&mut self, e: ReadError) {
        if self.errors.len() < MAX_ERRORS {
            self.errors.push(e);
        }
    }
}

/// One of the largest objects while the walk runs: (bytes, address, type, len), ordered by
/// bytes.
type Ranked = (u64, u64, u64, Option<u64>);

struct Walk<'a> {
    snap: &'a Snapshot,
    types: AddrMap<Option<TypeRec>>,
    /// Every object reached (the visited set) and its referents.
    graph: Graph,
    /// Objects to visit, each with the type of the object that referred to it (0: a root).
    stack: Vec<(u64, u64)>,
    totals: AddrMap<(u64, u64)>,
    unwalked: AddrMap<u64>,
    top: BinaryHeap<Reverse<Ranked>>,
    top_n: usize,
    /// Split keys already walked: (entries, owned size, usable entries).
    split_keys: RefCell<AddrMap<(u64, Option<u64>, u64)>>,
    objects: u64,
    bytes: u64,
    unreadable: u64,
    /// Unreadable referents by the type of their referrer (0: a root).
    unreadable_by: AddrMap<u64>,
    errors: Vec<ReadError>,
    stopped: bool,
    /// The error that numpy's version is unknown is kept (once).
    numpy_noted: bool,
    /// The same of torch's.
    torch_noted: bool,
    /// Tensor storages met (each counted once).
    storages: AddrMap<()>,
    /// By type: the bytes of the storages its objects keep (CPU, CUDA), and whether some
    /// could not be read.
    data_totals: AddrMap<(u64, u64, bool)>,
}

impl Snapshot {
    /// The census of every interpreter's objects: the walk starts at their GC lists (default
    /// builds) and at `roots` (sys.modules, the objects the threads' frames hold); `top` of
    /// the largest objects are kept.
    pub fn heap_census(&self, interps: &[u64], roots: &Roots, top: usize) -> Census {
        let _reads = self.budget.census_reads();
        let mut w = Walk {
            snap: self,
            types: AddrMap::default(),
            graph: Graph::default(),
            stack: Vec::new(),
            totals: AddrMap::default(),
            unwalked: AddrMap::default(),
            top: BinaryHeap::new(),
            top_n: top,
            split_keys: RefCell::default(),
            objects: 0,
            bytes: 0,
            unreadable: 0,
            unreadable_by: AddrMap::default(),
            errors: Vec::new(),
            stopped: false,
            numpy_noted: false,
            torch_noted: false,
            storages: AddrMap::default(),
            data_totals: AddrMap::default(),
        };
        let mut complete = true;
        match self.layout.interpreter_state.gc {
            // Free-threaded: the GC's objects are the used blocks of its mimalloc heaps.
            None => {
                for &interp in interps {
                    let errs = self.mimalloc_gc_objects(interp, |obj| {
                        if !w.stopped && w.graph.reach(obj).1 {
                            w.stack.push((obj, 0));
                            w.drain();
                        }
                        !w.stopped
                    });
                    complete &= errs.is_empty();
                    errs.into_iter().for_each(|e| w.error(e));
                }
            }
            Some(lists) => {
                for &interp in interps {
                    if self.gc_collecting(interp) == Some(true) {
                        w.error(ReadError::corrupt(
                            interp,
                            "heap: stopped inside a collection (objects on its own lists are missed)",
                        ));
                        complete = false;
                    }
                    // Uncharged: the walk charges each object once, when it first reaches
                    // it (by a GC list or a referent); charged by both, the GC-tracked half of
                    // a heap spent the budget meant for the whole.
                    let errs = self.gc_objects_uncharged(interp, &lists, |obj, _| {
                        if !w.stopped && w.graph.reach(obj).1 {
                            w.stack.push((obj, 0));
                            w.drain();
                        }
                        !w.stopped
                    });
                    if !errs.is_empty() {
                        complete = false;
                    }
                    if !w.stopped {
                        // (Once the walk stopped at a budget, the lists stop at it too.)
                        for e in errs {
                            w.error(e);
                        }
                    }
                }
            }
        }
        let objs = roots.modules.iter().map(|m| m.0);
        for obj in objs.chain(roots.locals.iter().map(|l| l.obj)) {
            if w.stopped {
                break;
            }
            if obj != 0 && obj & 7 == 0 && w.graph.reach(obj).1 {
                w.stack.push((obj, 0));
                w.drain();
            }
        }
        if w.stopped {
            complete = false;
        }
        w.finish(complete)
    }
}

impl Walk<'_> {
    /// A container whose referents could not all be read: it is still counted.
    fn note(&mut self, r: Result<(), ReadError>) {
        if let Err(e) = r {
            self.error(e);
        }
    }

    /// Keeps `e` (the first few); a budget's limit stops the walk.
    fn error(&mut self, e: ReadError) {
        if self.stopped {
            return;
        }
        if matches!(e.kind, ReadErrorKind::Limit { .. }) {
            self.stopped = true;
        }
        if self.errors.len() < MAX_ERRORS {
            self.errors.push(e);
        }
    }

    /// Visits everything on the stack and what it reaches.
    /// Each object costs one of the stop's object budget, once.
    fn drain(&mut self) {
        let mut refs = Vec::new();
        let mut ids = Vec::new();
        while let Some((obj, referrer)) = self.stack.pop() {
            if let Err(e) = self.snap.budget.object(obj) {
                self.error(e);
                self.stopped = true;
            }
            if self.stopped {
                self.stack.clear();
                return;
            }
            refs.clear();
            let Some(id) = self.graph.id(obj) else {
                continue;
            };
            let seen = match self.visit(obj, &mut refs) {
                Ok(seen) => seen,
                Err(e) => {
                    if !matches!(e.kind, ReadErrorKind::Limit { .. }) {
                        self.unreadable += 1;
                        *self.unreadable_by.entry(referrer).or_insert(0) += 1;
                    }
                    self.error(e);
                    continue;
                }
            };
            self.graph.sized(id, seen.tp, seen.bytes, seen.len);
            ids.clear();
            if let Some((st, bytes)) = seen.storage {
                // A node of its own, never visited as an object (it has no type, so it is
                // never listed as a retainer): its bytes are retained by its dominator.
                let (sid, new) = self.graph.reach(st);
                if new {
                    self.graph.sized(sid, 0, bytes, None);
                }
                ids.push(sid);
            }
            for &r in &refs {
                // Objects are 8-byte aligned; the small ints and None are objects too.
                if r != 0 && r & 7 == 0 {
                    let (to, new) = self.graph.reach(r);
                    ids.push(to);
                    if new {
                        self.stack.push((r, seen.tp));
                    }
                }
            }
            self.graph.link(id, ids.drain(..));
        }
    }

    /// The totals in order, and the graph when the walk saw all of it: from a graph it did
    /// not, what an object keeps alive cannot be told.
    fn finish(mut self, complete: bool) -> Census {
        let name = |types: &AddrMap<Option<TypeRec>>, tp: u64| {
            types
                .get(&tp)
                .and_then(|t| t.as_ref())
                .map_or_else(|| format!("<type {tp:#x}>"), |t| t.name.clone())
        };
        let mut types: Vec<TypeTotal> = self
            .totals
            .iter()
            .map(|(&tp, &(count, bytes))| TypeTotal {
                name: name(&self.types, tp),
                count,
                bytes,
                data: self.data_totals.get(&tp).map(|&(cpu, cuda, unknown)| {
                    if unknown {
                        (None, None)
                    } else {
                        (Some(cpu), Some(cuda))
                    }
                }),
            })
            .collect();
        types.sort_by(|a, b| {
            b.bytes
                .cmp(&a.bytes)
                .then(b.count.cmp(&a.count))
                .then(a.name.cmp(&b.name))
        });
        let mut top: Vec<_> = std::mem::take(&mut self.top).into_vec();
        top.sort_by(|a, b| b.0 .0.cmp(&a.0 .0).then(a.0 .1.cmp(&b.0 .1)));
        let largest = top
            .into_iter()
            .map(|Reverse((bytes, address, tp, len))| Largest {
                address,
                type_name: name(&self.types, tp),
                bytes,
                len,
            })
            .collect();
        let mut unwalked: Vec<(String, u64)> = self
            .unwalked
            .iter()
            .map(|(&tp, &n)| (name(&self.types, tp), n))
            .collect();
        unwalked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut unreadable_by: Vec<(String, u64)> = self
            .unreadable_by
            .iter()
            .map(|(&tp, &n)| {
                let who = if tp == 0 {
                    ROOTS.to_string()
                } else {
                    name(&self.types, tp)
                };
                (who, n)
            })
            .collect();
        unreadable_by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let graph = if complete && !self.graph.cut {
            Some(ObjectGraph {
                graph: self.graph,
                types: self.types,
            })
        } else {
            let e = ReadError::corrupt(0, "retainers: the walk did not see the whole graph");
            if self.errors.len() < MAX_ERRORS {
                self.errors.push(e);
            }
            None
        };
        Census {
            types,
            largest,
            objects: self.objects,
            bytes: self.bytes,
            unwalked,
            unreadable: self.unreadable,
            unreadable_by,
            complete,
            graph,
            errors: self.errors,
        }
    }
}
