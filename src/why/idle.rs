//! Idle threads: threads that wait for work, told apart from threads blocked on the way to
//! finishing some (issue 37). One table, each row a library's own waiting place, cited from
//! its source; a wait that matches no row is not idle (no guessing).
//!
//! A row matches a thread blocked in a system call whose Python frames, from the innermost
//! outwards, are only the wait libraries' ([`WAIT_LIBRARIES`]: the machinery a wait goes
//! through) up to the row's frame, and whose call from that frame is the row's: the next
//! inner Python frame's function, or, with no frame between, the C function the row's frame
//! calls (on its value stack). So a pool worker blocked in `put()` of its result, or in the
//! job it runs, is not idle: only its `get()` of the next job is.
//!
//! A thread in `accept()` (or `accept4`) is a server waiting for a connection whatever its
//! frames: the kernel blocks there only on a listening socket.
//!
//! Threads in an event loop's selector keep their state `loop_idle`
//! ([`super::state`]); their idle kind is `event_loop`.

use crate::cpython::{FrameItem, PyFrame, Snapshot};
use crate::model::IdleKind;
use crate::session::DecodedThread;

/// Python frames followed outwards from the innermost one.
const MAX_IDLE_FRAMES: usize = 24;

/// Files a wait runs through on its way to the system call: a thread's innermost frames in
/// them say nothing of what it waits for; the frame that called into them does.
pub const WAIT_LIBRARIES: &[&str] = &[
    "/threading.py",
    "/queue.py",
    "/selectors.py",
    "/socket.py",
    "/multiprocessing/connection.py",
    "/multiprocessing/queues.py",
    "/multiprocessing/synchronize.py",
    "/gevent/_threading.py",
];

/// What a row's frame calls when it waits.
#[derive(Clone, Copy, Debug)]
pub enum Via {
    /// A Python function: (file suffix, its `co_name`), the next inner frame.
    Python(&'static str, &'static str),
    /// A C function of this name (a builtin's `ml_name`, a method descriptor's name), the
    /// call in progress of the row's frame, itself the innermost.
    C(&'static str),
}

/// A row of the idle table (docs/report.md, "Idle threads").
#[derive(Clone, Copy, Debug)]
pub struct Row {
    /// The kind of idle thread (`ThreadWhy.idle`).
    pub kind: IdleKind,
    /// The file the waiting function is in (a path suffix).
    pub file: &'static str,
    /// Its qualified name (3.11+ `co_qualname`; 3.10, which has only `co_name`, is matched by
    /// the part after the last dot).
    pub function: &'static str,
    /// The call it waits in.
    pub via: Via,
    /// The statement, as the library writes it (all of 3.10 to 3.15 where it is CPython's).
    pub source: &'static str,
}

/// The idle table. Each `source` was read in the library named by `file`: CPython 3.10.13 and
/// 3.14 (Debian sid), gunicorn 27.0.1, gevent 26.9.0, torch 2.15.0.
pub const ROWS: &[Row] = &[
    Row {
        kind: IdleKind::PoolWorker,
        file: "/concurrent/futures/thread.py",
        function: "_worker",
        via: Via::C("get"),
        source: "work_item = work_queue.get(block=True)",
    },
    Row {
        kind: IdleKind::PoolWorker,
        file: "/concurrent/futures/process.py",
        function: "_process_worker",
        via: Via::Python("/multiprocessing/queues.py", "get"),
        source: "call_item = call_queue.get(block=True)",
    },
    Row {
        kind: IdleKind::PoolThread,
        file: "/concurrent/futures/process.py",
        function: "_ExecutorManagerThread.wait_result_broken_or_wakeup",
        via: Via::Python("/multiprocessing/connection.py", "wait"),
        source: "ready = mp.connection.wait(readers + worker_sentinels)",
    },
    Row {
        kind: IdleKind::PoolWorker,
        file: "/multiprocessing/pool.py",
        function: "worker",
        via: Via::Python("/multiprocessing/queues.py", "get"),
        source: "task = get()",
    },
    Row {
        kind: IdleKind::PoolThread,
        file: "/multiprocessing/pool.py",
        function: "Pool._wait_for_updates",
        via: Via::Python("/multiprocessing/connection.py", "wait"),
        source: "wait(sentinels + [change_notifier], timeout)",
    },
    Row {
        kind: IdleKind::PoolThread,
        file: "/multiprocessing/pool.py",
        function: "ThreadPool._wait_for_updates",
        via: Via::C("sleep"),
        source: "time.sleep(timeout)",
    },
    Row {
        kind: IdleKind::PoolThread,
        file: "/multiprocessing/pool.py",
        function: "Pool._handle_tasks",
        via: Via::C("get"),
        source: "for taskseq, set_length in iter(taskqueue.get, None):",
    },
    Row {
        kind: IdleKind::PoolThread,
        file: "/multiprocessing/pool.py",
        function: "Pool._handle_results",
        via: Via::Python("/multiprocessing/connection.py", "recv"),
        source: "task = get()",
    },
    Row {
        kind: IdleKind::QueueFeeder,
        file: "/multiprocessing/queues.py",
        function: "Queue._feed",
        via: Via::Python("/threading.py", "wait"),
        source: "nwait()",
    },
    Row {
        kind: IdleKind::PoolWorker,
        file: "/gevent/threadpool.py",
        function: "_WorkerGreenlet.run",
        via: Via::Python("/gevent/_threading.py", "get"),
        source: "task = task_queue_get(task_queue_cookie, idle_task_timeout)",
    },
    Row {
        kind: IdleKind::PoolWorker,
        file: "/torch/utils/data/_utils/worker.py",
        function: "_worker_loop",
        via: Via::Python("/multiprocessing/queues.py", "get"),
        source: "r = index_queue.get(timeout=MP_STATUS_CHECK_INTERVAL)",
    },
    Row {
        kind: IdleKind::Timer,
        file: "/torch/distributed/elastic/rendezvous/utils.py",
        function: "_PeriodicTimer._run",
        via: Via::Python("/threading.py", "wait"),
        source: "while not ctx.stop_event.wait(ctx.interval):",
    },
    Row {
        kind: IdleKind::Server,
        file: "/socketserver.py",
        function: "BaseServer.serve_forever",
        via: Via::Python("/selectors.py", "select"),
        source: "ready = selector.select(poll_interval)",
    },
    Row {
        kind: IdleKind::Server,
        file: "/gunicorn/workers/sync.py",
        function: "SyncWorker.wait",
        via: Via::C("select"),
        source: "ret = select.select(self.wait_fds, [], [], timeout)",
    },
    Row {
        kind: IdleKind::Master,
        file: "/gunicorn/arbiter.py",
        function: "Arbiter.wait_for_signals",
        via: Via::C("get"),
        source: "sig = self.SIG_QUEUE.get(block=True, timeout=timeout)",
    },
];

/// System calls a server waits for a connection in.
pub const ACCEPT_CALLS: &[&str] = &["accept", "accept4"];

/// Whether frame `p` is `function` of `file`: by qualified name where the version has one,
/// by the name after its last dot on 3.10.
fn is(p: &PyFrame, file: &str, function: &str) -> bool {
    if !p.code.filename.ends_with(file) {
        return false;
    }
    let qualname = &*p.code.qualname;
    if qualname.contains('.') || qualname != &*p.code.name {
        return qualname == function;
    }
    // 3.10 (co_qualname is co_name there): a method shows no class.
    function.rsplit('.').next() == Some(qualname)
}

fn in_wait_library(p: &PyFrame) -> bool {
    WAIT_LIBRARIES.iter().any(|f| p.code.filename.ends_with(f))
}

/// Whether frame `p`'s call in progress is a C function named `name`: a builtin or a method
/// descriptor of that name on its value stack (cut at its `co_stacksize`), or a
/// `callable_iterator` over one (`for x in iter(q.get, None)`: the loop's `FOR_ITER` calls it).
fn calls_c(snap: &Snapshot, p: &PyFrame, name: &str) -> bool {
    let slots = snap.own_value_stack(p, None);
    let named = |v: u64| {
        snap.c_callable_name(v)
            .is_some_and(|n| n.rsplit('.').next() == Some(name))
    };
    slots.into_iter().flatten().any(|v| {
        named(v)
            || snap.type_of(v).is_ok_and(|t| t.name == "callable_iterator")
                && snap.callable_iterator_callable(v).is_some_and(named)
    })
}

/// The idle kind of thread `d`, blocked in system call `syscall` (its name), by the table:
/// None when no row matches.
pub fn idle_kind(snap: &Snapshot, d: &DecodedThread, syscall: &str) -> Option<IdleKind> {
    if ACCEPT_CALLS.contains(&syscall) {
        return Some(IdleKind::Server);
    }
    let mut inner: Option<&PyFrame> = None;
    for (i, item) in d.walk.items.iter().take(MAX_IDLE_FRAMES).enumerate() {
        let FrameItem::Python(p) = item else {
            return None;
        };
        for row in ROWS.iter().filter(|r| is(p, r.file, r.function)) {
            let called = match row.via {
                Via::Python(file, name) => {
                    inner.is_some_and(|q| q.code.filename.ends_with(file) && &*q.code.name == name)
                }
                Via::C(name) => i == 0 && calls_c(snap, p, name),
            };
            if called {
                return Some(row.kind);
            }
        }
        if !in_wait_library(p) {
            return None;
        }
        inner = Some(p);
    }
    None
}

/// Whether the innermost Python frame of `d` is gevent's hub running its loop (gevent/hub.py
/// `Hub.run`: `loop.run()`, libev's or libuv's C loop): with the thread in a poll-like call,
/// nothing is ready.
pub fn runs_gevent_hub(d: &DecodedThread) -> bool {
    match d.walk.items.first() {
        Some(FrameItem::Python(p)) => is(p, "/gevent/hub.py", "Hub.run"),
        _ => false,
    }
}
