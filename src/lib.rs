//! pyunwind: CPython stacks from a process's memory or a core file, for gdb, lldb and the
//! command line.
//!
//! Layers, in DESIGN.md's order: each uses only its own and those listed before it
//! (`make lint` checks it with tools/layer_order.py; docs/architecture.md says what each
//! holds). Of two on one line, the second may use the first, never the reverse.
//!
//! 1. the foundation: [`error`], [`panic`], [`parallel`], [`allocator`]; and [`model`], the
//!    report's plain serde types every layer fills;
//! 2. [`arch`];
//! 3. [`memory`];
//! 4. [`binary`], [`symbols`];
//! 5. [`target`], [`unwind`];
//! 6. [`cpython`];
//! 7. [`asyncio`], [`greenlet`], [`native`];
//! 8. [`session`] (one stop, with its features as modules over it);
//! 9. [`why`];
//! 10. [`heap`]: the census of a stop, what keeps the most alive (the dominator tree of the
//!     graph the walk hands over, the paths from the roots) and what grew between two reports
//!     (the walk over the target's objects is [`cpython::heap`]'s; the text is [`report`]'s);
//! 11. [`report`]: the model's text, grouping and merging;
//! 12. [`sample`] (a live target read over a window);
//! 13. the frontends: [`cli`], `python` (pyo3, which runs the command line).

pub mod allocator;
pub mod arch;
pub mod asyncio;
pub mod binary;
pub mod cli;
pub mod cpython;
pub mod error;
pub mod greenlet;
pub mod heap;
pub mod memory;
pub mod model;
pub mod native;
pub mod panic;
pub mod parallel;
pub mod report;
pub mod sample;
pub mod session;
pub mod symbols;
pub mod target;
pub mod unwind;
pub mod why;

#[cfg(feature = "python")]
mod python;

pub use error::{Error, ReadError, Result};
