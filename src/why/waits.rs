//! Waits and holds: the Python-level wait a thread is blocked in (the object the program
//! waits on and, where memory shows it, the thread that holds it), and the locks it holds.

use crate::report::{Holding, ThreadReport, Waiting};
use crate::session::Session;

/// The wait `t` is blocked in; `threads` is every thread of the report (owners are found
/// among them).
pub fn waiting(
    _session: &Session,
    _t: &ThreadReport,
    _threads: &[ThreadReport],
) -> Option<Waiting> {
    None
}

/// The locks `t` holds that memory shows.
pub fn holding(_session: &Session, _t: &ThreadReport) -> Vec<Holding> {
    Vec::new()
}
