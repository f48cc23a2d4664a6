//! Waits and holds: the Python-level wait a thread is blocked in (the object the program
//! waits on and, where memory shows it, the thread that holds it), and the locks it holds.
//!
//! Read from memory only, through the frames and value stacks (no DWARF, no native frames):
//!
//! - A wait in `threading`, `queue` or `concurrent.futures` (`Condition.wait`, `Event.wait`,
//!   `Semaphore.acquire`, `Barrier.wait`, `Thread.join`, `Queue.get`/`put`,
//!   `Future.result`): the library frames from the innermost one outwards; the outermost that
//!   names a wait gives the kind, and its `self` the object (the Queue, not its Condition;
//!   never the Condition's private waiter lock).
//! - A lock wait in the program's own frame: the innermost frame's value stack holds the call
//!   in progress, `lock.acquire()` (a `method_descriptor` of the lock's type and the lock;
//!   [`locks::lock_calls`]), and the lock is held now. An RLock's owner is in the RLock; a
//!   Lock's is the thread whose `with` block holds it, else unknown.
//! - Holds: a `with lock:` block keeps the lock's `__exit__` on its frame's value stack for
//!   the whole block, and an RLock names its owner.

use crate::cpython::{FrameItem, PyFrame, Snapshot};
use crate::report::{FrameKind, Holding, ThreadReport, Waiting};
use crate::session::{DecodedThread, Session};

use super::locks::{self, LockCall, LockKind};

/// Library frames followed outwards from the innermost one to find the wait they make.
const MAX_WAIT_FRAMES: usize = 64;
/// Frames of one thread scanned for `with` blocks.
const MAX_HOLD_FRAMES: usize = 1024;
/// Base classes followed to find which library class a `self` is (3.10 has no qualnames).
const MAX_BASES: usize = 32;

/// The files of the library whose frames make a wait.
const LIBRARY_FILES: &[&str] = &["/threading.py", "/queue.py", "/concurrent/futures/_base.py"];

/// (file, class, method, kind): the library methods a thread waits in. The outermost one of a
/// thread's library frames wins.
const LIBRARY_WAITS: &[(&str, &str, &str, &str)] = &[
    ("/threading.py", "Condition", "wait", "condition"),
    ("/threading.py", "Condition", "wait_for", "condition"),
    ("/threading.py", "Condition", "__enter__", "condition"),
    ("/threading.py", "Event", "wait", "event"),
    ("/threading.py", "Semaphore", "acquire", "semaphore"),
    ("/threading.py", "Semaphore", "__enter__", "semaphore"),
    ("/threading.py", "Barrier", "wait", "barrier"),
    ("/threading.py", "Thread", "join", "join"),
    ("/queue.py", "Queue", "get", "queue_get"),
    ("/queue.py", "Queue", "put", "queue_put"),
    ("/concurrent/futures/_base.py", "Future", "result", "future"),
    (
        "/concurrent/futures/_base.py",
        "Future",
        "exception",
        "future",
    ),
];

/// Names of a lock's methods that wait for it.
const ACQUIRE_NAMES: &[&str] = &["acquire", "acquire_lock", "__enter__"];

/// `SimpleQueue`'s type names (C, and the pure-Python `_PySimpleQueue`).
const SIMPLE_QUEUE_TYPES: &[&str] = &["_queue.SimpleQueue", "SimpleQueue"];

/// The decoded thread a report's thread came from.
fn decoded<'a>(session: &'a Session, t: &ThreadReport) -> Option<&'a DecodedThread> {
    session
        .threads()
        .iter()
        .find(|d| d.info.addr == t.thread_state && d.info.thread_id == t.thread_id)
}

/// The index in the report's `frames` of the Python frame at `addr`.
fn report_index(t: &ThreadReport, addr: u64) -> Option<usize> {
    t.frames
        .iter()
        .position(|f| f.kind == FrameKind::Python && f.address == Some(addr))
}

/// The innermost Python frame of a thread, if its walk starts with one.
fn innermost(d: &DecodedThread) -> Option<&PyFrame> {
    match d.walk.items.first()? {
        FrameItem::Python(p) => Some(p),
        FrameItem::Unreadable { .. } => None,
    }
}

/// The Python frames of a thread with, for each, the frame it calls (its value stack ends
/// there at the latest on 3.11+), innermost first.
fn frames_with_inner<'a>(snap: &Snapshot, d: &'a DecodedThread) -> Vec<(&'a PyFrame, Option<u64>)> {
    let interpreter_frames = matches!(
        snap.layout.frame,
        crate::cpython::layout::FrameModel::Interpreter(_)
    );
    let mut out = Vec::new();
    let mut inner = None;
    for item in d.walk.items.iter().take(MAX_HOLD_FRAMES) {
        match item {
            FrameItem::Python(p) => {
                out.push((p, inner.filter(|_| interpreter_frames)));
                inner = Some(p.addr);
            }
            FrameItem::Unreadable { .. } => inner = None,
        }
    }
    out
}

/// `file`'s library suffix, if the frame's file is one of the library's.
fn library_file(file: &str) -> Option<&'static str> {
    LIBRARY_FILES.iter().copied().find(|f| file.ends_with(f))
}

/// The names of `obj`'s type and its bases, innermost first.
fn class_names(snap: &Snapshot, obj: u64) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(mut t) = snap.type_of(obj) else {
        return out;
    };
    for _ in 0..MAX_BASES {
        out.push(t.name.clone());
        if t.base == 0 {
            break;
        }
        match snap.type_at(t.base) {
            Ok(b) => t = b,
            Err(_) => break,
        }
    }
    out
}

/// The library wait a frame makes: (kind, its `self`).
fn library_wait(snap: &Snapshot, p: &PyFrame) -> Option<(&'static str, u64)> {
    let file = library_file(&p.code.filename)?;
    let this = snap.local_object(p, "self").ok()??;
    // 3.11+: `Class.method`; 3.10 has only the method's name: the class is found among
    // `self`'s type and its bases.
    let (class, method) = match p.code.qualname.rsplit_once('.') {
        Some((c, m)) => (Some(c.rsplit('.').next().unwrap_or(c)), m),
        None => (None, &*p.code.qualname),
    };
    let bases = if class.is_none() {
        class_names(snap, this)
    } else {
        Vec::new()
    };
    LIBRARY_WAITS
        .iter()
        .find(|(f, c, m, _)| {
            *f == file
                && *m == method
                && match class {
                    Some(class) => class == *c,
                    None => bases.iter().any(|b| b == c),
                }
        })
        .map(|w| (w.3, this))
}

/// The native id of the thread whose `PyThreadState.thread_id` is `ident`.
fn native_of_ident(threads: &[ThreadReport], ident: u64) -> Option<u64> {
    threads
        .iter()
        .find(|t| t.thread_id == ident)
        .and_then(|t| t.native_id)
}

/// An int object's value, if it is a non-negative int that fits.
fn int_value(snap: &Snapshot, obj: u64) -> Option<u64> {
    snap.read_int(obj).ok()?.parse().ok()
}

/// The thread a `threading.Thread` object runs: its `_ident` (a pthread ident) among
/// `threads`, else its `_native_id` when a thread has it.
fn thread_of(snap: &Snapshot, thread: u64, threads: &[ThreadReport]) -> Option<u64> {
    let attrs = snap
        .instance_attrs(thread, &["_ident", "_native_id"])
        .ok()?;
    if let Some(n) = attrs[0]
        .and_then(|o| int_value(snap, o))
        .and_then(|i| native_of_ident(threads, i))
    {
        return Some(n);
    }
    let native = attrs[1].and_then(|o| int_value(snap, o))?;
    threads
        .iter()
        .any(|t| t.native_id == Some(native))
        .then_some(native)
}

/// Locks a `with` block in `d` holds: (lock, kind, the frame's address), innermost first.
/// Only locks held now; an RLock only when `d`'s thread owns it.
fn with_holds(snap: &Snapshot, d: &DecodedThread) -> Vec<(u64, LockKind, u64)> {
    let mut out = Vec::new();
    for (p, inner) in frames_with_inner(snap, d) {
        let slots = snap.value_stack_slots(p, inner);
        for c in locks::lock_calls(snap, &slots) {
            if c.name != "__exit__" {
                continue;
            }
            let Ok(state) = locks::lock_state(snap, c.lock, c.kind) else {
                continue;
            };
            let mine = match c.kind {
                LockKind::Lock => state.held,
                LockKind::RLock => state.owner_ident == Some(d.info.thread_id),
            };
            if mine {
                out.push((c.lock, c.kind, p.addr));
            }
        }
    }
    out
}

/// The lock call the innermost frame of `d` is blocked in: the lowest acquire on its value
/// stack, if its lock is held now (by another thread, for an RLock). The call in progress is
/// the live stack's top and no acquire can wait below another in one frame, so an acquire
/// above the lowest is a stale slot past the top (3.10 to 3.13 keep no valid depth while a
/// C call runs).
fn lock_wait(snap: &Snapshot, d: &DecodedThread) -> Option<LockCall> {
    let p = innermost(d)?;
    let slots = snap.value_stack_slots(p, None);
    let call = locks::lock_calls(snap, &slots)
        .into_iter()
        .find(|c| ACQUIRE_NAMES.contains(&c.name.as_str()))?;
    let state = locks::lock_state(snap, call.lock, call.kind).ok()?;
    let blocked = match call.kind {
        LockKind::Lock => state.held,
        LockKind::RLock => state.held && state.owner_ident != Some(d.info.thread_id),
    };
    blocked.then_some(call)
}

/// The wait `t` is blocked in; `threads` is every thread of the report (owners are found
/// among them).
pub fn waiting(session: &Session, t: &ThreadReport, threads: &[ThreadReport]) -> Option<Waiting> {
    if t.holds_gil == Some(true) {
        return None;
    }
    let snap = &session.snap;
    let d = decoded(session, t)?;
    let first = innermost(d)?;
    if library_file(&first.code.filename).is_some() {
        // The library frames from the innermost outwards; the outermost wait wins.
        let mut found = None;
        for item in d.walk.items.iter().take(MAX_WAIT_FRAMES) {
            let FrameItem::Python(p) = item else { break };
            if library_file(&p.code.filename).is_none() {
                break;
            }
            if let Some(w) = library_wait(snap, p) {
                found = Some((w, p.addr));
            }
        }
        let ((kind, object), addr) = found?;
        let owner = match kind {
            "join" => thread_of(snap, object, threads),
            _ => None,
        };
        return Some(Waiting {
            kind,
            object: Some(object),
            type_name: snap.type_of(object).ok().map(|t| t.name.clone()),
            owner,
            frame: report_index(t, addr)?,
        });
    }
    let frame = report_index(t, first.addr)?;
    if let Some(call) = lock_wait(snap, d) {
        let owner = match call.kind {
            LockKind::RLock => locks::lock_state(snap, call.lock, call.kind)
                .ok()
                .and_then(|s| s.owner_ident)
                .and_then(|i| native_of_ident(threads, i)),
            // A Lock names no owner: only a `with` block that holds it shows one.
            LockKind::Lock => session
                .threads()
                .iter()
                .filter(|o| o.info.addr != d.info.addr)
                .find(|o| with_holds(snap, o).iter().any(|h| h.0 == call.lock))
                .and_then(|o| o.info.native_id),
        };
        return Some(Waiting {
            kind: call.kind.kind(),
            object: Some(call.lock),
            type_name: Some(call.kind.type_name().to_string()),
            owner,
            frame,
        });
    }
    // `SimpleQueue.get()`, a C method: the queue itself shows no waiter to confirm it by; the
    // lowest such call is the live one, as for locks.
    let slots = snap.value_stack_slots(first, None);
    let (_, q) = locks::method_calls(snap, &slots, "get", SIMPLE_QUEUE_TYPES)
        .into_iter()
        .next()?;
    Some(Waiting {
        kind: "simple_queue_get",
        object: Some(q),
        type_name: snap.type_of(q).ok().map(|t| t.name.clone()),
        owner: None,
        frame,
    })
}

/// The locks `t` holds that memory shows: `with` blocks (with their frame), and the RLocks
/// other threads wait for (or that `t`'s own `with` blocks name) whose owner is `t`.
pub fn holding(session: &Session, t: &ThreadReport) -> Vec<Holding> {
    let snap = &session.snap;
    let Some(d) = decoded(session, t) else {
        return Vec::new();
    };
    let mut out: Vec<Holding> = Vec::new();
    // Innermost first: an outer `with` on the same RLock replaces an inner one, so the frame
    // that took it is the outermost.
    for (lock, kind, addr) in with_holds(snap, d) {
        let count = match kind {
            LockKind::RLock => locks::lock_state(snap, lock, kind)
                .ok()
                .and_then(|s| s.count),
            LockKind::Lock => None,
        };
        let h = Holding {
            kind: kind.kind(),
            object: lock,
            type_name: Some(kind.type_name().to_string()),
            count,
            frame: report_index(t, addr),
        };
        match out.iter_mut().find(|o| o.object == lock) {
            Some(o) => *o = h,
            None => out.push(h),
        }
    }
    // RLocks name their owner: those other threads wait for.
    for other in session.threads() {
        let Some(call) = lock_wait(snap, other) else {
            continue;
        };
        if call.kind != LockKind::RLock || out.iter().any(|h| h.object == call.lock) {
            continue;
        }
        let Ok(state) = locks::lock_state(snap, call.lock, call.kind) else {
            continue;
        };
        if state.owner_ident == Some(d.info.thread_id) {
            out.push(Holding {
                kind: call.kind.kind(),
                object: call.lock,
                type_name: Some(call.kind.type_name().to_string()),
                count: state.count,
                frame: None,
            });
        }
    }
    out
}
