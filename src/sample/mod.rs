//! One live target read again and again over a window, without stopping it (DESIGN.md, layer
//! `sample`):
//!
//! - [`window`]: the sampling loop of `pid --why --for`: every thread's Python stack at each
//!   tick, each thread's CPU time from /proc;
//! - [`progress`]: what the samples show of each thread (`threads[].progress`), and the rule
//!   that makes a thread `spinning` or `busy`;
//! - [`profile`]: `record`'s sampling profile, written as collapsed stacks or speedscope's
//!   file; [`pprof`]: the same as pprof's `profile.proto`, gzipped; [`stacks`]: which
//!   stacks one sample gives it (threads, tasks, greenlets); [`identity`]: which program a
//!   process runs, so that a recording stops at an `exec`;
//! - [`stall`]: `watch`'s rule: which threads stalled (did not run, or spun, at one place) from
//!   one sample to the next.
//!
//! Each sample is a stop of its own: a fresh snapshot, whose caches die with it (DESIGN.md
//! principle 5), started from what the first one found ([`crate::session::Session::reopen`]).

pub mod identity;
pub mod pprof;
pub mod profile;
pub mod progress;
pub mod stacks;
pub mod stall;
pub mod window;
