//! The operating system's name of each thread (the report's `native_name`), from the source
//! that shows it (DESIGN.md principle 9):
//!
//! | source | names |
//! | --- | --- |
//! | the debugger | gdb's `InferiorThread.name`, lldb's `SBThread.GetName()`, handed in by the frontend ([`Session::set_debugger_thread_names`]); first, where it names the thread |
//! | live | `/proc/PID/task/TID/comm` |
//! | core | only the main thread's (the LWP that is the process id), in a core the kernel wrote: NT_PRPSINFO's `pr_fname` ([`crate::memory::CoreFile::process_name`]); none in gdb's `gcore` cores, whose `pr_fname` is argv[0]'s file name |
//! | debugger memory | nothing but the debugger's names |
//!
//! ```no_run
//! # fn f(s: &pyunwind::session::Session) {
//! if let Some(name) = pyunwind::session::names::native_name(s, 4242) {
//!     println!("thread 4242 is {name}");
//! }
//! # }
//! ```

use super::Session;
use crate::memory::proc_comm;
use crate::target::SourceKind;

/// The system's name of thread `lwp`; None where no source shows it.
pub fn native_name(s: &Session, lwp: u64) -> Option<String> {
    if let Some(name) = s.debugger_thread_name(lwp) {
        return Some(name.to_string());
    }
    let pid = s.target.pid?;
    match s.target.kind {
        SourceKind::Live => proc_comm(pid, lwp),
        SourceKind::Core => s
            .target
            .process_name
            .clone()
            .filter(|_| lwp == u64::from(pid)),
        SourceKind::Debugger => None,
    }
}
