//! pyunwind: CPython stacks from a process's memory or a core file, for gdb, lldb and the
//! command line. Layers (each uses only those above it): [`memory`], [`binary`], [`target`],
//! [`cpython`], [`asyncio`], [`native`], [`report`], then [`session`] and the frontends (`python`, [`cli`]).

pub mod asyncio;
pub mod binary;
pub mod cli;
pub mod cpython;
pub mod error;
pub mod memory;
pub mod native;
pub mod panic;
pub mod report;
pub mod session;
pub mod target;

#[cfg(feature = "python")]
mod python;

pub use error::{Error, ReadError, Result};
