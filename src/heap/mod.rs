//! The heap layer (DESIGN.md's `heap`): what the memory is and what grows.
//!
//! - [`census`]: `--heap` over one stop: the interpreters' objects by type, the largest, and
//!   what keeps the most alive (the walk over the target's objects, their sizes and the
//!   dominator tree of the graph it walks are [`crate::cpython::heap`]'s: they read target
//!   memory with the type records the walk keeps), with the process's own size beside it;
//! - [`diff`]: `pyunwind diff`: what grew between two saved `--heap --json` reports.
//!
//! Their text is [`crate::report`]'s (`heap_text`, `heap_diff`).

pub mod census;
pub mod diff;
