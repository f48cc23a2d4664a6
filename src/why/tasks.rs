//! asyncio tasks' waits and holds, from the tasks' coroutine frames (memory only):
//!
//! - A task suspended inside asyncio/locks.py or asyncio/queues.py (`Lock.acquire`,
//!   `Event.wait`, `Condition.wait`, `Semaphore.acquire`, `Barrier.wait`, `Queue.get`/`put`,
//!   and the `__aenter__` of `async with`) waits for that method's `self`: the outermost such
//!   frame from the innermost outwards, as for threads ([`super::waits`]).
//! - A task inside `async with lock:` holds the lock: `async with` keeps the lock's bound
//!   `__aexit__` (3.11 to 3.13's `BEFORE_ASYNC_WITH`), or the function then the lock (3.14+'s
//!   `LOAD_SPECIAL`), on the frame's value stack for the whole block. A suspended frame records
//!   its live depth, so stale slots above it are never read. The `__aexit__` of a block the
//!   task is still entering (its inner frame is that lock's `__aenter__`) is no hold.
//! - The owner of an `asyncio.Lock` (or of a `Condition`'s lock) a task waits for is the task
//!   whose `async with` holds it; a lock taken by `await lock.acquire()` leaves no trace.

use crate::asyncio::{AsyncView, TaskView};
use crate::cpython::layout::FrameModel;
use crate::cpython::{FrameItem, PyFrame, Snapshot};
use crate::model::{HoldKind, Holding, TaskWhy, WaitKind, Waiting};

/// Library frames followed outwards from a task's innermost frame.
const MAX_WAIT_FRAMES: usize = 64;
/// Frames of one task scanned for `async with` blocks.
const MAX_HOLD_FRAMES: usize = 1024;
/// Value-stack slots read per frame.
const MAX_SLOTS: usize = 256;

const LOCKS_PY: &str = "/asyncio/locks.py";
const QUEUES_PY: &str = "/asyncio/queues.py";
/// The pure-Python Future's `__await__`: the innermost frame of a task that awaits one.
const FUTURES_PY: &str = "/asyncio/futures.py";

/// (file, class of `self` or one of its bases, method, kind). The outermost one of a task's
/// library frames wins: `Condition.__aenter__` over the `Lock.acquire` it awaits.
const ASYNC_WAITS: &[(&str, &str, &str, WaitKind)] = &[
    (
        LOCKS_PY,
        "Condition",
        "__aenter__",
        WaitKind::AsyncioCondition,
    ),
    (LOCKS_PY, "Condition", "wait", WaitKind::AsyncioCondition),
    (
        LOCKS_PY,
        "Condition",
        "wait_for",
        WaitKind::AsyncioCondition,
    ),
    (LOCKS_PY, "Lock", "acquire", WaitKind::AsyncioLock),
    (LOCKS_PY, "Lock", "__aenter__", WaitKind::AsyncioLock),
    (LOCKS_PY, "Event", "wait", WaitKind::AsyncioEvent),
    (LOCKS_PY, "Semaphore", "acquire", WaitKind::AsyncioSemaphore),
    (
        LOCKS_PY,
        "Semaphore",
        "__aenter__",
        WaitKind::AsyncioSemaphore,
    ),
    (LOCKS_PY, "Barrier", "wait", WaitKind::AsyncioBarrier),
    (QUEUES_PY, "Queue", "get", WaitKind::AsyncioQueueGet),
    (QUEUES_PY, "Queue", "put", WaitKind::AsyncioQueuePut),
];

/// An `async with` block's lock: the manager (a Lock or a Condition) and the Lock it took.
#[derive(Clone, Copy, Debug)]
struct AsyncHold {
    object: u64,
    /// `asyncio_lock` or `asyncio_condition`: the `holding` entry's kind.
    kind: HoldKind,
    type_name: &'static str,
    acquired: u64,
    /// The index of the holding frame in the task's frames.
    frame: usize,
    /// The line of its `async with` statement (the same cleanup as a `with`'s).
    line: Option<u32>,
}

/// Each task's wait and holds, in `view.tasks`' order: a wait in asyncio's primitives, else
/// one beyond them ([`super::task_outside`]). `now` is CLOCK_MONOTONIC where the target shares
/// it; `native_ids[i]` the native id of the session's thread `i`.
pub fn task_whys(
    snap: &Snapshot,
    view: &AsyncView,
    now: Option<f64>,
    native_ids: &[Option<u64>],
) -> Vec<TaskWhy> {
    let holds: Vec<Vec<AsyncHold>> = view
        .tasks
        .iter()
        .map(|t| task_holds(snap, view, t))
        .collect();
    view.tasks
        .iter()
        .enumerate()
        .map(|(me, t)| TaskWhy {
            waiting: super::task_outside::socket_wait(snap, t)
                .or_else(|| task_waiting(snap, view, t, &holds, me))
                .or_else(|| {
                    super::task_outside::task_outside_wait(snap, view, t, now, |i| {
                        native_ids.get(i).copied().flatten()
                    })
                }),
            holding: holds[me]
                .iter()
                .map(|h| Holding {
                    kind: h.kind,
                    object: h.object,
                    type_name: Some(h.type_name.to_string()),
                    count: None,
                    frame: Some(h.frame),
                    line: h.line,
                })
                .collect(),
            idle: None,
            timeout: super::task_timeout::task_timeout(snap, view, t, now),
        })
        .collect()
}

fn is_instance(snap: &Snapshot, obj: u64, class: &str) -> bool {
    snap.class_names(obj).iter().any(|n| n == class)
}

/// The asyncio file of a frame, if it is one of the library's.
fn library_file(p: &PyFrame) -> Option<&'static str> {
    [LOCKS_PY, QUEUES_PY]
        .into_iter()
        .find(|f| p.code.filename.ends_with(f))
}

/// The wait a library frame makes: (kind, its `self`).
fn library_wait(snap: &Snapshot, p: &PyFrame) -> Option<(WaitKind, u64)> {
    let file = library_file(p)?;
    let this = snap.local_object(p, "self").ok()??;
    let names = snap.class_names(this);
    ASYNC_WAITS
        .iter()
        .find(|(f, c, m, _)| *f == file && *m == p.code.name && names.iter().any(|n| n == c))
        .map(|w| (w.3, this))
}

/// The lock an asyncio Lock or Condition `obj` takes: itself, or the Condition's `_lock`.
fn acquired_lock(snap: &Snapshot, obj: u64) -> Option<(u64, HoldKind, &'static str)> {
    if is_instance(snap, obj, "Condition") {
        let lock = snap.instance_attr(obj, "_lock").ok()??;
        return is_instance(snap, lock, "Lock").then_some((
            lock,
            HoldKind::AsyncioCondition,
            "Condition",
        ));
    }
    is_instance(snap, obj, "Lock").then_some((obj, HoldKind::AsyncioLock, "Lock"))
}

/// Whether the asyncio Lock `lock` is locked now (its `_locked`).
fn locked(snap: &Snapshot, lock: u64) -> bool {
    snap.instance_attr(lock, "_locked")
        .ok()
        .flatten()
        .and_then(|b| snap.read_int(b).ok())
        .is_some_and(|v| v == "1")
}

/// The frame's live value-stack slots: up to its recorded depth when suspended, else up to
/// its `co_stacksize` (a running frame records none).
fn live_slots(snap: &Snapshot, view: &AsyncView, p: &PyFrame) -> Vec<Option<u64>> {
    let depth = match (view.stack_top, snap.layout.frame) {
        (Some(top), FrameModel::Interpreter(f)) => {
            top.live_slots(&*snap.mem, p.addr, f.localsplus, p.code.locals.len() as u64)
        }
        _ => None,
    };
    let cut = depth
        .and_then(|d| usize::try_from(d).ok())
        .or_else(|| p.code.stacksize.map(|n| n as usize));
    // Only the live slots are read (100,000 tasks' frames: a read of 64 slots each).
    let max = cut.map_or(MAX_SLOTS, |n| n.min(MAX_SLOTS));
    let mut slots = snap.value_stack_slots_at_most(p, None, max as u64);
    slots.truncate(MAX_SLOTS);
    if let Some(n) = cut {
        slots.truncate(n);
    }
    slots
}

/// `__aexit__`s of asyncio/locks.py on a value stack: (slot, its `self`). A bound method, or
/// a function and, in the next slot, its `self`.
fn aexits(snap: &Snapshot, slots: &[Option<u64>]) -> Vec<(usize, u64)> {
    let mut out = Vec::new();
    for (i, v) in slots.iter().enumerate() {
        let Some(v) = *v else { continue };
        let Ok(t) = snap.type_of(v) else { continue };
        let (func, this) = match t.name.as_str() {
            "method" => match snap.method_func_and_self(v) {
                Ok(fs) => fs,
                Err(_) => continue,
            },
            "function" => match slots.get(i + 1).copied().flatten() {
                Some(this) => (v, this),
                None => continue,
            },
            _ => continue,
        };
        let Ok(code) = snap.function_code(func) else {
            continue;
        };
        if code.name == "__aexit__" && code.filename.ends_with(LOCKS_PY) && this != 0 {
            out.push((i, this));
        }
    }
    out
}

/// The Python frames of a task, innermost first, with their index in its frames.
fn python_frames(t: &TaskView) -> impl Iterator<Item = (usize, &PyFrame)> {
    t.frames
        .iter()
        .take(MAX_HOLD_FRAMES)
        .enumerate()
        .filter_map(|(i, f)| match f {
            FrameItem::Python(p) => Some((i, p)),
            FrameItem::Unreadable { .. } => None,
        })
}

/// The locks `t`'s `async with` blocks hold now.
fn task_holds(snap: &Snapshot, view: &AsyncView, t: &TaskView) -> Vec<AsyncHold> {
    let mut out: Vec<AsyncHold> = Vec::new();
    let mut inner: Option<&PyFrame> = None;
    for (i, p) in python_frames(t) {
        let slots = live_slots(snap, view, p);
        let mut exits = aexits(snap, &slots);
        // A block the frame is still entering: its inner frame is that manager's
        // `__aenter__`; the topmost `__aexit__` of that manager is its own.
        let entering = inner.and_then(|q| {
            (library_file(q) == Some(LOCKS_PY) && &*q.code.name == "__aenter__")
                .then(|| snap.local_object(q, "self").ok().flatten())
                .flatten()
        });
        if let Some(m) = entering {
            if let Some(k) = exits.iter().rposition(|&(_, this)| this == m) {
                exits.remove(k);
            }
        }
        for (slot, manager) in exits {
            let Some((lock, kind, type_name)) = acquired_lock(snap, manager) else {
                continue;
            };
            if !locked(snap, lock) {
                continue;
            }
            // Outermost wins: the frame that took it.
            let h = AsyncHold {
                object: manager,
                kind,
                type_name,
                acquired: lock,
                frame: i,
                line: snap.with_line(p, slot),
            };
            match out.iter_mut().find(|o| o.object == manager) {
                Some(o) => *o = h,
                None => out.push(h),
            }
        }
        inner = Some(p);
    }
    out
}

/// The wait of `t` (the `me`th task), if it is suspended in an asyncio primitive; its owner
/// the task whose `async with` holds the lock it waits for.
fn task_waiting(
    snap: &Snapshot,
    view: &AsyncView,
    t: &TaskView,
    holds: &[Vec<AsyncHold>],
    me: usize,
) -> Option<Waiting> {
    let mut found = None;
    for (i, item) in t.frames.iter().take(MAX_WAIT_FRAMES).enumerate() {
        let FrameItem::Python(p) = item else { break };
        if library_file(p).is_none() {
            if i == 0 && p.code.filename.ends_with(FUTURES_PY) {
                continue;
            }
            break;
        }
        if let Some(w) = library_wait(snap, p) {
            found = Some((w, p));
        }
    }
    let ((kind, object), p) = found?;
    let frame = t
        .frames
        .iter()
        .position(|f| matches!(f, FrameItem::Python(q) if q.addr == p.addr))?;
    let entering_lock = kind == WaitKind::AsyncioLock
        || (kind == WaitKind::AsyncioCondition && &*p.code.name == "__aenter__");
    let owner = entering_lock
        .then(|| acquired_lock(snap, object))
        .flatten()
        .filter(|&(lock, _, _)| locked(snap, lock))
        .and_then(|(lock, _, _)| {
            holds
                .iter()
                .enumerate()
                .find(|(i, h)| *i != me && h.iter().any(|h| h.acquired == lock))
                .map(|(i, _)| view.tasks[i].raw.addr)
        });
    Some(Waiting {
        kind,
        object: Some(object),
        type_name: snap.type_of(object).ok().map(|t| t.name.clone()),
        owner,
        frame,
        on: None,
    })
}
