//! The text of a stop's views, as the debuggers' `py-*` commands and the command line print
//! them: each asks the session for its part of the report, and renders it.

use super::tasks;
use super::text::{self, Sources};
use crate::error::Result;
use crate::greenlet;
use crate::session::native_stacks::Natives;
use crate::session::report::report as threads_report;
use crate::session::{asyncio, greenlets, py_bt, Session, ThreadKey};

/// `py-bt` text: one thread's traceback, or every thread's with headers. With the
/// selected thread's native frames, the native frames libpython shows are in it too.
pub fn render_bt(
    s: &Session,
    key: Option<ThreadKey>,
    full: bool,
    natives: Option<&Natives>,
) -> Result<String> {
    let r = threads_report(s, key, full)?;
    let mut src = Sources::default();
    Ok(match key {
        None => {
            let mut parked: Vec<(u64, usize)> = Vec::new();
            let threads = s.threads();
            for g in &greenlets::view(s).greenlets {
                let id = g.thread.and_then(|i| threads[i].info.native_id);
                if let (Some(id), greenlet::State::Suspended) = (id, g.state) {
                    match parked.iter_mut().find(|p| p.0 == id) {
                        Some(p) => p.1 += 1,
                        None => parked.push((id, 1)),
                    }
                }
            }
            text::all_threads_parked(&r, &parked, &mut src)
        }
        Some(k) => {
            let entries = py_bt::stack_entries(s, k, natives)?;
            let mut out = String::new();
            text::entries(&r.threads[0], &entries, full, &mut src, &mut out);
            text::errors(&r, &mut out);
            out
        }
    })
}

/// `py-bt-async` text.
pub fn render_async(s: &Session) -> Result<String> {
    let r = asyncio::report(s)?;
    Ok(tasks::async_bt(r, &mut Sources::default()))
}

/// `py-tasks`: the task tree and/or the task table.
pub fn render_tasks(s: &Session, tree: bool, table: bool) -> Result<String> {
    Ok(tasks::tree_and_table(asyncio::report(s)?, tree, table))
}

/// `py-greenlets` text: every thread with its greenlets.
pub fn render_greenlets(s: &Session, with_locals: bool) -> Result<String> {
    let mut r = threads_report(s, None, with_locals)?;
    crate::why::add_greenlets(s, &mut r, with_locals);
    Ok(text::all_threads(&r, &mut Sources::default()))
}
