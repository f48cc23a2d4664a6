//! pyunwind: CPython stacks from a process's memory or a core file, for gdb, lldb and the
//! command line. Layers (each imports only those before it; docs/architecture.md): the
//! foundation ([`error`], [`panic`], [`parallel`]), [`report`] (the model every layer fills),
//! [`arch`], [`memory`], [`binary`], [`symbols`], [`target`], [`cpython`], then [`asyncio`],
//! [`greenlet`] and [`native`], [`unwind`], [`session`] (one stop, with its features as
//! modules over it), [`why`], [`sample`] (a live target read over a window), and the
//! frontends (`python`, [`cli`]).

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
