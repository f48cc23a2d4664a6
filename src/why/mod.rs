//! Verdicts on a stop, made only from what the lower layers decoded plus a core's notes
//! (DESIGN.md principle 8): each states what the target's memory or notes show and leaves a
//! field null where they cannot show it.
//!
//! - the crash (the fatal signal of a kernel core, its `si_code`, fault address or sender, and
//!   the thread that took it) is a fact the core's notes record: [`crate::memory::crash`] reads
//!   it and the session holds it; the verdict leads with it.
//! - [`state`]: what each thread is doing, in one word; [`idle`]: the table of threads that
//!   wait for work.
//! - [`waits`]: the Python-level wait each thread is blocked in, its owner, and what each
//!   thread holds.
//! - [`native`]: a wait in C code that nothing else explains.
//! - [`deadlock`]: the cycles of the wait-for graph, and asyncio's await cycles.
//!
//! [`annotate`] adds all of it to a report (`--why`, `py-why`).
//!
//! ```no_run
//! # let core = pyunwind::memory::CoreFile::parse("core").unwrap();
//! let (crash, problems) = pyunwind::memory::crash::crash(&core.signal);
//! if let Some(c) = crash {
//!     println!("{:?} in thread {}", c.signal, c.thread);
//! }
//! # let _ = problems;
//! ```

pub mod deadlock;
pub mod idle;
pub mod library;
pub mod locks;
pub mod loops;
pub mod native;
pub mod resources;
pub mod state;
pub mod task_groups;
pub mod task_outside;
pub mod task_timeout;
pub mod tasks;
pub mod waits;

use crate::model::{Report, StateWord, ThreadWhy};
use crate::session::{self, Session};

/// `r` with every greenlet ([`session::greenlets::add_to`]) and, for a live process of
/// this machine, the addresses of the sockets gevent greenlets wait on, from /proc
/// ([`resources::socket_addresses`]); what could not be read of those sockets among its
/// errors, before the greenlets' own (`--greenlets`, `py-greenlets`).
pub fn add_greenlets(session: &Session, r: &mut Report, with_locals: bool) {
    let at = r.errors.len();
    session::greenlets::add_to(session, r, with_locals);
    let mut problems = Vec::new();
    for g in r.greenlets.iter_mut().flatten() {
        if let Some(w) = g.waiting.as_mut() {
            problems.extend(resources::socket_addresses(session, w));
        }
    }
    r.errors.splice(at..at, problems);
}

/// `r` (a report of every thread, from `session`) with each thread's state, wait and holds
/// and the deadlocks: the report of `--why` and `py-why`. asyncio's tasks (read once per stop,
/// none on 3.10) add their await cycles and their lock cycles; a report that lists the tasks
/// also gets each task's wait and holds. Taken by value: a copy of a report of 100,000 tasks
/// was a tenth of `--why --tasks`.
pub fn report(session: &Session, mut r: Report) -> Report {
    let view = session::asyncio::view(session).ok();
    let await_cycles = match (&r.cycles, view) {
        (Some(c), _) => c.clone(),
        (None, Some(v)) => v.cycles.clone(),
        (None, None) => Vec::new(),
    };
    annotate(session, &mut r, &await_cycles);
    if let Some(view) = view {
        // The loops lead the verdict, so `--why` reads them with or without the tasks.
        if r.loops.is_none() && !view.loops.is_empty() {
            r.loops = Some(session::asyncio::loop_reports(session, view));
        }
        if let Some(loops) = r.loops.as_mut() {
            let errors = loops::annotate_loops(session, view, &r.threads, loops);
            r.errors.extend(errors);
        }
        let native_ids: Vec<Option<u64>> =
            session.threads().iter().map(|d| d.info.native_id).collect();
        let now = loops::clock_at_read(session);
        let mut whys = tasks::task_whys(&session.snap, view, now, &native_ids);
        let mut errors = Vec::new();
        for (t, w) in view.tasks.iter().zip(whys.iter_mut()) {
            let Some(w) = w.waiting.as_mut() else {
                continue;
            };
            errors.extend(resources::socket_addresses(session, w));
            if let Some(e) = task_outside::unread_socket(t.raw.addr, w) {
                errors.push(e);
            }
        }
        r.errors.extend(errors);
        r.task_waits = Some(task_groups::task_groups(view, &mut whys));
        let edges: Vec<(u64, Option<(u64, u64)>)> = view
            .tasks
            .iter()
            .zip(&whys)
            .map(|(t, w)| {
                let e = w.waiting.as_ref().and_then(|w| Some((w.object?, w.owner?)));
                (t.raw.addr, e)
            })
            .collect();
        r.deadlocks
            .get_or_insert_with(Vec::new)
            .extend(deadlock::task_deadlocks(&edges));
        if let Some(listed) = r.tasks.as_mut() {
            // By id: a scan per listed task was quadratic (19 s for 100,000 tasks).
            let index: crate::memory::addr_map::AddrMap<usize> = view
                .tasks
                .iter()
                .enumerate()
                .map(|(i, v)| (v.raw.addr, i))
                .collect();
            // Moved, not copied: a task is listed once (its id is its address).
            for t in listed.iter_mut() {
                if let Some(&i) = index.get(&t.id) {
                    t.why = Some(Box::new(std::mem::take(&mut whys[i])));
                }
            }
        }
    }
    r
}

/// Adds to `report` (every thread's, from `session`) each thread's state, wait and holds, and
/// the deadlocks among them; `await_cycles` are asyncio's (from the task graph, when read).
///
/// A thread's wait is the first that shows: a Python-level wait ([`waits`]), the GIL, then
/// for a thread blocked in a system call (idle ones included: their `waiting` says on what)
/// the outside world it waits on ([`resources`]: a socket, pipe, file or child), else the C
/// function its innermost frame calls ([`native`]).
pub fn annotate(session: &Session, report: &mut Report, await_cycles: &[Vec<u64>]) {
    let waits = waits::waits_and_holds(session, &report.threads);
    let decoded = session.threads();
    let mut errors = Vec::new();
    let whys: Vec<ThreadWhy> = report
        .threads
        .iter()
        .zip(waits)
        .map(|(t, (waiting, holding))| {
            let st = state::thread_state(session, t);
            let blocked = matches!(st.word, Some(StateWord::Syscall | StateWord::Idle));
            let waiting = waiting
                .or_else(|| {
                    (st.word == Some(StateWord::GilWait))
                        .then(|| {
                            let word = st.call.map(|c| c.args[0]);
                            waits::gil_wait(session, t, word, &report.threads)
                        })
                        .flatten()
                })
                // Blocked in a system call with no Python-level wait: on what, in the outside
                // world, else in which C function.
                .or_else(|| {
                    let call = st.call.filter(|_| blocked)?;
                    let (w, e) = resources::outside_wait(session, t, call);
                    errors.extend(e);
                    w
                })
                .or_else(|| {
                    let d = decoded.iter().find(|d| {
                        Some(d.info.addr) == t.thread_state && Some(d.info.thread_id) == t.thread_id
                    })?;
                    blocked
                        .then(|| native::native_wait(&session.snap, t, d))
                        .flatten()
                });
            ThreadWhy {
                state: st.word,
                syscall: st.syscall,
                idle: st.idle,
                waiting,
                holding,
                progress: None,
            }
        })
        .collect();
    report.errors.extend(errors);
    for (t, why) in report.threads.iter_mut().zip(whys) {
        t.why = Some(why);
    }
    report.deadlocks = Some(deadlock::deadlocks(&report.threads, await_cycles));
}
