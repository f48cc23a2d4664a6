//! The heap layer (DESIGN.md's `heap`): what the memory is and what grows.
//!
//! - [`census`]: `--heap` over one stop: the interpreters' objects by type, the largest, and
//!   what keeps the most alive, with the process's own size beside it (the walk over the
//!   target's objects and their sizes are [`crate::cpython::heap`]'s);
//! - [`retainers`]: what keeps the most alive: retained sizes from the dominator tree of the
//!   graph the walk hands over, and the shortest path from a root to each (each hop named by
//!   the cpython layer, which reads the target's containers again);
//! - [`diff`]: `pyunwind diff`: what grew between two saved `--heap --json` reports.
//!
//! Their text is [`crate::report`]'s (`heap_text`, `heap_diff`).

pub mod census;
pub mod diff;
pub mod retainers;
