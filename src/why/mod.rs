//! Verdicts on a stop, made only from what the lower layers decoded plus a core's notes
//! (DESIGN.md principle 8): each states what the target's memory or notes show and leaves a
//! field null where they cannot show it.
//!
//! - [`crash`]: the fatal signal of a kernel core (or of a debugger's core of a process stopped
//!   at one), its `si_code`, fault address or sender, and the thread that took it.
//!
//! ```no_run
//! # let core = pyunwind::memory::CoreFile::parse("core").unwrap();
//! let (crash, problems) = pyunwind::why::crash::crash(&core.signal);
//! if let Some(c) = crash {
//!     println!("{:?} in thread {}", c.signal, c.thread);
//! }
//! # let _ = problems;
//! ```

pub mod crash;
pub mod signals;
