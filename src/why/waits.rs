//! Waits and holds: the Python-level wait a thread is blocked in (the object the program
//! waits on and, where memory shows it, the thread that holds it), and the locks it holds.
//!
//! Read from memory only, through the frames and value stacks (no DWARF, no native frames):
//!
//! - A wait in `threading`, `queue`, `concurrent.futures` or `multiprocessing.synchronize`
//!   (`Condition.wait`, `Event.wait`, `Semaphore.acquire`, `Barrier.wait`, `Thread.join`,
//!   `Queue.get`/`put`, `Future.result`): the library frames from the innermost one outwards; the outermost that
//!   names a wait gives the kind, and its `self` the object (the Queue, not its Condition;
//!   never the Condition's private waiter lock).
//! - A lock wait in the program's own frame: the innermost frame's value stack holds the call
//!   in progress, `lock.acquire()` (a `method_descriptor` of the lock's type and the lock;
//!   [`locks::lock_calls`]), and the lock is held now. An RLock's owner is in the RLock; a
//!   Lock's is the thread whose `with` block holds it, else unknown.
//! - A thread blocked entering a `with lock:` block (the classic lock-order deadlock): its
//!   frame's current instruction is the version's with entry (`Layout::with_entry`) and the
//!   lock is the manager being entered ([`entering`]).
//! - Holds: a `with lock:` block keeps the lock's `__exit__` on its frame's value stack for
//!   the whole block (but not the one a frame is still entering), and an RLock names its
//!   owner.

use crate::cpython::layout::{WithEntry, WithTop};
use crate::cpython::{FrameItem, PyFrame, Snapshot};
use crate::model::{FrameKind, Holding, ThreadReport, WaitKind, Waiting};
use crate::session::{DecodedThread, Session};

use super::locks::{self, LockCall, LockKind};

/// Library frames followed outwards from the innermost one to find the wait they make.
const MAX_WAIT_FRAMES: usize = 64;
/// Frames of one thread scanned for `with` blocks.
const MAX_HOLD_FRAMES: usize = 1024;

/// `EXTENDED_ARG`s that may precede 3.10's `SETUP_WITH` (its argument has at most 32 bits).
const MAX_EXTENDED_ARGS: u32 = 3;
/// `CO_MAXBLOCKS` (Include/cpython/code.h 3.10): the size of `f_blockstack`.
const MAX_BLOCKS: i32 = 20;

/// The files of the library whose frames make a wait.
const LIBRARY_FILES: &[&str] = &[
    "/threading.py",
    "/queue.py",
    "/concurrent/futures/_base.py",
    "/multiprocessing/synchronize.py",
];

/// (file, class, method, kind): the library methods a thread waits in. The outermost one of a
/// thread's library frames wins.
const LIBRARY_WAITS: &[(&str, &str, &str, WaitKind)] = &[
    ("/threading.py", "Condition", "wait", WaitKind::Condition),
    (
        "/threading.py",
        "Condition",
        "wait_for",
        WaitKind::Condition,
    ),
    (
        "/threading.py",
        "Condition",
        "__enter__",
        WaitKind::Condition,
    ),
    ("/threading.py", "Event", "wait", WaitKind::Event),
    ("/threading.py", "Semaphore", "acquire", WaitKind::Semaphore),
    (
        "/threading.py",
        "Semaphore",
        "__enter__",
        WaitKind::Semaphore,
    ),
    ("/threading.py", "Barrier", "wait", WaitKind::Barrier),
    ("/threading.py", "Thread", "join", WaitKind::Join),
    // multiprocessing's Barrier is threading's (`Barrier.wait`, `_wait`, threading.py) over a
    // multiprocessing Condition: `Condition.wait_for` and `Condition.wait` in
    // multiprocessing/synchronize.py, blocked in a C `SemLock.acquire` (no Python frame). The
    // outermost of those frames, `Barrier.wait`, names the wait; its Event the same way.
    (
        "/multiprocessing/synchronize.py",
        "Condition",
        "wait",
        WaitKind::Condition,
    ),
    (
        "/multiprocessing/synchronize.py",
        "Condition",
        "wait_for",
        WaitKind::Condition,
    ),
    (
        "/multiprocessing/synchronize.py",
        "Event",
        "wait",
        WaitKind::Event,
    ),
    ("/queue.py", "Queue", "get", WaitKind::QueueGet),
    ("/queue.py", "Queue", "put", WaitKind::QueuePut),
    (
        "/concurrent/futures/_base.py",
        "Future",
        "result",
        WaitKind::Future,
    ),
    (
        "/concurrent/futures/_base.py",
        "Future",
        "exception",
        WaitKind::Future,
    ),
];

/// Names of a lock's methods that wait for it.
const ACQUIRE_NAMES: &[&str] = &["acquire", "acquire_lock", "__enter__"];

/// `SimpleQueue`'s type names (C, and the pure-Python `_PySimpleQueue`).
const SIMPLE_QUEUE_TYPES: &[&str] = &["_queue.SimpleQueue", "SimpleQueue"];

/// Whether a report's thread came from the decoded thread `d`.
fn is_thread(d: &DecodedThread, t: &ThreadReport) -> bool {
    Some(d.info.addr) == t.thread_state && Some(d.info.thread_id) == t.thread_id
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

/// The library wait a frame makes: (kind, its `self`).
fn library_wait(snap: &Snapshot, p: &PyFrame) -> Option<(WaitKind, u64)> {
    let file = library_file(&p.code.filename)?;
    let this = snap.local_object(p, "self").ok()??;
    // 3.11+: `Class.method`; 3.10 has only the method's name: the class is found among
    // `self`'s type and its bases.
    let (class, method) = match p.code.qualname.rsplit_once('.') {
        Some((c, m)) => (Some(c.rsplit('.').next().unwrap_or(c)), m),
        None => (None, &*p.code.qualname),
    };
    let bases = if class.is_none() {
        snap.class_names(this)
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
        .find(|t| t.thread_id == Some(ident))
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

/// A frame entering a `with` block: its manager's `__enter__` is running.
#[derive(Debug)]
struct Entering {
    /// The lock being entered (as an `__enter__` call), when the manager is one.
    call: Option<LockCall>,
    /// The lowest slot of the with being entered, where known: the live top of the value
    /// stack is there, and the slots above it are stale (a freed object's address may have
    /// been reused by an `__exit__` bound since).
    top: Option<usize>,
}

/// Whether `p` is entering a `with` block (None: it is not, or memory cannot tell), and the
/// lock it enters. `slots` and `calls` are its value stack and the lock calls on it.
///
/// The manager's slot is the live top of the value stack. 3.10 to 3.13 keep no valid depth
/// while a C call runs (slots above the top are stale), so the top is found exactly:
/// - 3.11 to 3.13: the exception-table entry of the instruction after `BEFORE_WITH` is the
///   with block's own, and its depth counts the items up to and including the slot where
///   `BEFORE_WITH` leaves `__exit__`, the manager's slot (compile.c puts the handler of
///   SETUP_WITH at the depth of `[..., exit]`): the slot is `depth - 1`. 3.11 has put the
///   bound `__exit__` there already, 3.12 and 3.13 still hold the manager.
/// - 3.10: SETUP_WITH sets up its block only after `__enter__` returns, so the top block is
///   the enclosing one and its `b_level` the depth when it was set up. Between that level
///   and the top lie only items pushed by statements inside that block (for-loop
///   iterators, a handled exception, a return value kept across a `finally`), never a lock's
///   bound `__exit__`: the lowest lock `__exit__` at or above `b_level` is the entered one
///   when the manager is a lock. (When the manager is another C type whose `__enter__`
///   blocks, a stale lock `__exit__` above the top could be taken; its lock must still be
///   held for a wait to be reported.)
/// - 3.14+: the `__exit__` pair right below the `__enter__` pair of the same lock: a
///   finished `__enter__` leaves its result in the `__enter__` slot.
fn entering(
    snap: &Snapshot,
    p: &PyFrame,
    slots: &[Option<u64>],
    calls: &[LockCall],
) -> Option<Entering> {
    let as_enter = |c: &LockCall| LockCall {
        name: "__enter__".to_string(),
        ..c.clone()
    };
    match snap.layout.with_entry {
        WithEntry::BlockStack {
            opcode,
            extended_arg,
            f_iblock,
            f_blockstack,
            tryblock_size,
            b_level,
            ..
        } => {
            let mut at = p.lasti?;
            let mut op = snap.current_opcode(p)?;
            for _ in 0..MAX_EXTENDED_ARGS {
                if op != extended_arg {
                    break;
                }
                at = at.checked_add(1)?;
                op = snap.opcode_at(&p.code, at)?;
            }
            if op != opcode {
                return None;
            }
            let iblock = snap.mem.read_i32(p.addr.checked_add(f_iblock)?).ok()?;
            let level = match iblock {
                0 => 0,
                1..=MAX_BLOCKS => {
                    let block = (iblock as u64 - 1).checked_mul(tryblock_size)?;
                    let at = p
                        .addr
                        .checked_add(f_blockstack)?
                        .checked_add(block)?
                        .checked_add(b_level)?;
                    usize::try_from(snap.mem.read_i32(at).ok()?).ok()?
                }
                _ => return None,
            };
            let exit = calls
                .iter()
                .find(|c| c.name == "__exit__" && c.slot >= level);
            Some(Entering {
                call: exit.map(as_enter),
                top: Some(exit.map_or(level, |c| c.slot)),
            })
        }
        WithEntry::ExceptionTable { opcode, top } => {
            let lasti = p.lasti?;
            if snap.current_opcode(p)? != opcode {
                return None;
            }
            let depth = snap.handler_depth(&p.code, lasti.checked_add(1)?)?;
            let slot = usize::try_from(depth.checked_sub(1)?).ok()?;
            match top {
                WithTop::Exit => {
                    let exit = calls
                        .iter()
                        .find(|c| c.slot == slot && c.name == "__exit__");
                    Some(Entering {
                        call: exit.map(as_enter),
                        top: Some(slot),
                    })
                }
                WithTop::Manager => {
                    let lock = slots.get(slot).copied().flatten();
                    let call = lock.and_then(|l| {
                        locks::lock_kind(snap, l).map(|kind| LockCall {
                            slot,
                            name: "__enter__".to_string(),
                            lock: l,
                            kind,
                        })
                    });
                    Some(Entering {
                        call,
                        top: Some(slot),
                    })
                }
            }
        }
        WithEntry::SpecialCall => calls
            .iter()
            .filter(|c| c.name == "__enter__")
            .find_map(|c| {
                let exit = calls.iter().find(|e| {
                    e.name == "__exit__"
                        && e.lock == c.lock
                        && e.slot.checked_add(2) == Some(c.slot)
                })?;
                Some(Entering {
                    call: Some(c.clone()),
                    top: Some(exit.slot),
                })
            }),
    }
}

/// A lock a `with` block holds.
#[derive(Clone, Copy, Debug)]
struct WithHold {
    /// The manager: the lock, or the Condition.
    object: u64,
    kind: LockKind,
    /// The lock it acquired: the lock itself, or the Condition's `_lock`.
    acquired: u64,
    /// The address of the frame whose `with` holds it.
    frame: u64,
    /// The line of that `with` statement, where the code shows it.
    line: Option<u32>,
}

/// Locks a `with` block in `d` holds, innermost first. Only locks held now; an RLock (or a
/// Condition over one) only when `d`'s thread owns it.
fn with_holds(snap: &Snapshot, d: &DecodedThread) -> Vec<WithHold> {
    let mut out = Vec::new();
    for (i, (p, inner)) in frames_with_inner(snap, d).into_iter().enumerate() {
        let slots = snap.own_value_stack(p, inner);
        let calls = locks::lock_calls(snap, &slots);
        // The `__exit__` of a `with` the frame is still entering is no hold (yet), and the
        // live top is there.
        let mut top = entering(snap, p, &slots, &calls).and_then(|e| e.top);
        if i == 0 && top.is_none() {
            // The innermost frame blocked in `lock.acquire()`: the call is the live top.
            top = calls
                .iter()
                .find(|c| c.name != "__exit__" && ACQUIRE_NAMES.contains(&c.name.as_str()))
                .map(|c| c.slot);
        }
        for c in calls {
            if c.name != "__exit__" || top.is_some_and(|t| c.slot >= t) {
                continue;
            }
            let Ok((acquired, acquired_kind)) = locks::acquired_lock(snap, c.lock, c.kind) else {
                continue;
            };
            let Ok(state) = locks::lock_state(snap, acquired, acquired_kind) else {
                continue;
            };
            let mine = match acquired_kind {
                LockKind::Lock => state.held,
                _ => state.owner_ident == Some(d.info.thread_id),
            };
            // Only a `with` block open at the frame's current instruction keeps a `__exit__`
            // in that slot; anything else is a stale slot above the live top.
            let Some(line) = snap.with_line(p, c.slot) else {
                continue;
            };
            if mine {
                out.push(WithHold {
                    object: c.lock,
                    kind: c.kind,
                    acquired,
                    frame: p.addr,
                    line: Some(line),
                });
            }
        }
    }
    out
}

/// The lock call the innermost frame of `d` is blocked in, if its lock is held now (by
/// another thread, for an RLock): the lock of a `with` it is entering ([`entering`]), else the
/// lowest acquire on its value stack. The call in progress is the live stack's top and no
/// acquire can wait below another in one frame, so an acquire above the lowest is a stale
/// slot past the top (3.10 to 3.13 keep no valid depth while a C call runs).
fn lock_wait(snap: &Snapshot, d: &DecodedThread) -> Option<LockCall> {
    let p = innermost(d)?;
    let slots = snap.own_value_stack(p, None);
    let calls = locks::lock_calls(snap, &slots);
    let call = match entering(snap, p, &slots, &calls) {
        // The call in progress is the manager's `__enter__`: no acquire is.
        Some(e) => e.call?,
        None => calls
            .into_iter()
            .find(|c| ACQUIRE_NAMES.contains(&c.name.as_str()))?,
    };
    // A Condition's methods run in frames of their own: the library wait names them.
    if call.kind == LockKind::Condition {
        return None;
    }
    let state = locks::lock_state(snap, call.lock, call.kind).ok()?;
    let blocked = match call.kind {
        LockKind::Lock => state.held,
        _ => state.held && state.owner_ident != Some(d.info.thread_id),
    };
    blocked.then_some(call)
}

/// What one thread's value stacks show of locks, read once per stop: every thread's waits
/// and holds are needed to name each other thread's owners.
struct LockFacts<'a> {
    thread: &'a DecodedThread,
    /// [`with_holds`].
    holds: Vec<WithHold>,
    /// [`lock_wait`].
    wait: Option<LockCall>,
}

impl<'a> LockFacts<'a> {
    fn of(snap: &Snapshot, threads: &'a [DecodedThread]) -> Vec<LockFacts<'a>> {
        threads
            .iter()
            .map(|thread| LockFacts {
                thread,
                holds: with_holds(snap, thread),
                wait: lock_wait(snap, thread),
            })
            .collect()
    }
}

/// Each thread's wait and holds (see [`waiting`], [`holding`]), in `threads`' order: every
/// thread of the report, from `session`.
pub fn waits_and_holds(
    session: &Session,
    threads: &[ThreadReport],
) -> Vec<(Option<Waiting>, Vec<Holding>)> {
    let facts = LockFacts::of(&session.snap, session.threads());
    threads
        .iter()
        .map(
            |t| match facts.iter().position(|f| is_thread(f.thread, t)) {
                Some(i) => (
                    waiting(session, t, threads, &facts, i),
                    holding(session, t, &facts, i),
                ),
                None => (None, Vec::new()),
            },
        )
        .collect()
}

/// The wait `t` is blocked in; `threads` is every thread of the report (owners are found
/// among them), `facts[me]` `t`'s own.
fn waiting(
    session: &Session,
    t: &ThreadReport,
    threads: &[ThreadReport],
    facts: &[LockFacts],
    me: usize,
) -> Option<Waiting> {
    if t.holds_gil == Some(true) {
        return None;
    }
    let snap = &session.snap;
    let d = facts[me].thread;
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
                found = Some((w, p.addr, &*p.code.name == "__enter__"));
            }
        }
        let ((kind, object), addr, entering_condition) = found?;
        let owner = match kind {
            WaitKind::Join => thread_of(snap, object, threads),
            // Entering `with cond:` waits for the lock the Condition wraps; `cond.wait()`
            // waits for a notify, which no thread owes.
            WaitKind::Condition if entering_condition => {
                owner(snap, object, LockKind::Condition, threads, facts, me)
            }
            _ => None,
        };
        return Some(Waiting {
            kind,
            object: Some(object),
            type_name: snap.type_of(object).ok().map(|t| t.name.clone()),
            owner,
            frame: report_index(t, addr)?,
            on: None,
        });
    }
    let frame = report_index(t, first.addr)?;
    if let Some(call) = facts[me].wait.clone() {
        return Some(Waiting {
            kind: call.kind.wait_kind(),
            object: Some(call.lock),
            type_name: Some(call.kind.type_name().to_string()),
            owner: owner(snap, call.lock, call.kind, threads, facts, me),
            frame,
            on: None,
        });
    }
    // `SimpleQueue.get()`, a C method: the queue itself shows no waiter to confirm it by; the
    // lowest such call is the live one, as for locks.
    let slots = snap.own_value_stack(first, None);
    let (_, q) = locks::method_calls(snap, &slots, "get", SIMPLE_QUEUE_TYPES)
        .into_iter()
        .next()?;
    Some(Waiting {
        kind: WaitKind::SimpleQueueGet,
        object: Some(q),
        type_name: snap.type_of(q).ok().map(|t| t.name.clone()),
        owner: None,
        frame,
        on: None,
    })
}

/// The wait of `t`, a thread blocked taking the GIL (state `gil_wait`, in futex on `word`):
/// the GIL of its interpreter, or of the one it is entering ([`DecodedThread::gil_waited`]),
/// held by the thread of `threads` that holds it now, if one does (it may be between two
/// holders).
pub fn gil_wait(
    session: &Session,
    t: &ThreadReport,
    word: Option<u64>,
    threads: &[ThreadReport],
) -> Option<Waiting> {
    let frame = t.frames.iter().position(|f| f.kind == FrameKind::Python)?;
    let entering = word.and_then(|w| {
        let d = session.threads().iter().find(|d| is_thread(d, t))?;
        d.gil_waited(&session.snap, w)
    });
    let interpreter = entering.or(t.interpreter)?;
    let owner = threads
        .iter()
        .find(|o| o.interpreter == Some(interpreter) && o.holds_gil == Some(true))
        .and_then(|o| o.native_id);
    Some(Waiting {
        kind: WaitKind::Gil,
        object: session.snap.gil_address(interpreter),
        type_name: None,
        owner,
        frame,
        on: None,
    })
}

/// The native id of the thread that holds `lock` (of kind `kind`), where memory shows it: an
/// RLock's (or a Condition over one's) owner; for a Lock, the thread whose `with` block holds
/// it. A Lock names no owner of its own, so one taken by `.acquire()` has none. `me` (in
/// `facts`) is the waiting thread.
fn owner(
    snap: &Snapshot,
    lock: u64,
    kind: LockKind,
    threads: &[ThreadReport],
    facts: &[LockFacts],
    me: usize,
) -> Option<u64> {
    let (acquired, acquired_kind) = locks::acquired_lock(snap, lock, kind).ok()?;
    match acquired_kind {
        LockKind::Lock => facts
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != me)
            .find(|(_, o)| o.holds.iter().any(|h| h.acquired == acquired))
            .and_then(|(_, o)| o.thread.info.native_id),
        _ => locks::lock_state(snap, acquired, acquired_kind)
            .ok()
            .and_then(|s| s.owner_ident)
            .and_then(|i| native_of_ident(threads, i)),
    }
}

/// The locks `t` holds that memory shows: `with` blocks (with their frame), and the RLocks
/// other threads wait for (or that `t`'s own `with` blocks name) whose owner is `t`.
fn holding(session: &Session, t: &ThreadReport, facts: &[LockFacts], me: usize) -> Vec<Holding> {
    let snap = &session.snap;
    let d = facts[me].thread;
    let mut out: Vec<Holding> = Vec::new();
    // Innermost first: an outer `with` on the same RLock replaces an inner one, so the frame
    // that took it is the outermost.
    // The frame of each entry of `out`.
    let mut frames: Vec<u64> = Vec::new();
    for h in &facts[me].holds {
        let count = match h.kind {
            LockKind::Lock => None,
            _ => locks::lock_state(snap, h.object, h.kind)
                .ok()
                .and_then(|s| s.count),
        };
        let held = Holding {
            kind: h.kind.hold_kind(),
            object: h.object,
            type_name: Some(h.kind.type_name().to_string()),
            count,
            frame: report_index(t, h.frame),
            line: h.line,
        };
        // Within a frame the lowest slot is the outermost block; across frames the outer
        // frame (later here) took it.
        match out.iter().position(|o| o.object == h.object) {
            Some(i) if frames[i] != h.frame => {
                out[i] = held;
                frames[i] = h.frame;
            }
            Some(_) => {}
            None => {
                out.push(held);
                frames.push(h.frame);
            }
        }
    }
    // RLocks name their owner: those other threads wait for.
    for other in facts {
        let Some(call) = &other.wait else {
            continue;
        };
        let shown = |lock| {
            out.iter().any(|h| h.object == lock)
                || facts[me].holds.iter().any(|h| h.acquired == lock)
        };
        if call.kind != LockKind::RLock || shown(call.lock) {
            continue;
        }
        let Ok(state) = locks::lock_state(snap, call.lock, call.kind) else {
            continue;
        };
        if state.owner_ident == Some(d.info.thread_id) {
            out.push(Holding {
                kind: call.kind.hold_kind(),
                object: call.lock,
                type_name: Some(call.kind.type_name().to_string()),
                count: state.count,
                frame: None,
                line: None,
            });
        }
    }
    out
}
