//! What an asyncio task waits on beyond asyncio's own primitives ([`super::tasks`]), from its
//! frames and what it awaits ([`crate::asyncio::Awaiting`]):
//!
//! | kind | shown by |
//! | --- | --- |
//! | `child` | a frame `BaseSubprocessTransport._wait` (Lib/asyncio/base_subprocess.py: `Process.wait()` and `communicate()` await it): its `self._pid`, and `self._proc.args` for the command |
//! | `executor` | the future it awaits is chained to a `concurrent.futures.Future` that a worker thread's `_WorkItem.run` runs (`run_in_executor`, `to_thread`) |
//! | `sleep` | `asyncio.sleep`'s frame (Lib/asyncio/tasks.py), whose local `h` is the `TimerHandle` of its deadline |
//! | `future` | any other future; `orphan` when its reference count is exactly the references of the task and its frames |
//!
//! A future a task awaits is referred to by the task (`_fut_waiter`), and, in its frames, by
//! locals (`fut = loop.create_future(); await fut`) and by the iterator `await` made of it
//! (`_asyncio.FutureIter`, whose `future` field holds it; the pure-Python Future's
//! `__await__` generator keeps it as its local `self`). Where the count is just that, nothing
//! else can ever set its result.

use crate::asyncio::layout::StackTop;
use crate::asyncio::{AsyncView, TaskView};
use crate::cpython::layout::FrameModel;
use crate::cpython::{FrameItem, PyFrame, Snapshot};
use crate::model::{AwaitingKind, Direction, Millis, WaitKind, Waiting, WaitsOn};

/// Frames of one task looked at.
const MAX_FRAMES: usize = 256;
/// Arguments of a child's command line joined.
const MAX_ARGS: u64 = 64;
/// Longest argument read.
const MAX_ARG_BYTES: usize = 4096;
/// Value-stack slots of one frame counted.
const MAX_SLOTS: u64 = 1 << 12;

const BASE_SUBPROCESS_PY: &str = "/asyncio/base_subprocess.py";
const TASKS_PY: &str = "/asyncio/tasks.py";
/// `futureiterobject` {PyObject_HEAD; FutureObj *future;} (Modules/_asynciomodule.c, 3.10 to
/// 3.15).
const FUTURE_ITER: &str = "_asyncio.FutureIter";

/// The wait of task `t` beyond asyncio's primitives, if one shows. `now` is CLOCK_MONOTONIC
/// where the target shares it (live); `worker_native_id` gives a session thread's native id.
pub fn task_outside_wait(
    snap: &Snapshot,
    view: &AsyncView,
    t: &TaskView,
    now: Option<f64>,
    worker_native_id: impl Fn(usize) -> Option<u64>,
) -> Option<Waiting> {
    if let Some(w) = child_wait(snap, t) {
        return Some(w);
    }
    let aw = t.awaiting.as_ref()?;
    let frame = innermost_own_frame(t);
    let object = Some(aw.id);
    let type_name = Some(aw.type_name.clone());
    let (kind, on) = match aw.kind {
        AwaitingKind::Future if aw.executor_thread.is_some() => (
            WaitKind::Executor,
            WaitsOn::Executor {
                thread: aw.executor_thread.and_then(&worker_native_id),
                job: aw.executor_job.clone(),
            },
        ),
        AwaitingKind::Sleep => (
            WaitKind::Sleep,
            WaitsOn::Sleep {
                remaining_s: now.and_then(|n| {
                    let when = sleep_deadline(snap, t)?;
                    Millis::from_secs(when - n)
                }),
            },
        ),
        AwaitingKind::Future => (
            WaitKind::Future,
            WaitsOn::Future {
                orphan: orphan(snap, view, t, aw.id),
            },
        ),
        _ => return None,
    };
    Some(Waiting {
        kind,
        object,
        type_name,
        owner: None,
        frame,
        on: Some(on),
    })
}

/// The task's Python frames, innermost first, with their index in its frames.
fn python_frames(t: &TaskView) -> impl Iterator<Item = (usize, &PyFrame)> {
    t.frames
        .iter()
        .take(MAX_FRAMES)
        .enumerate()
        .filter_map(|(i, f)| match f {
            FrameItem::Python(p) => Some((i, p)),
            FrameItem::Unreadable { .. } => None,
        })
}

/// The index of the innermost frame that is not the pure-Python Future's `__await__`.
fn innermost_own_frame(t: &TaskView) -> usize {
    python_frames(t)
        .find(|(_, p)| &*p.code.qualname != "Future.__await__")
        .map_or(0, |(i, _)| i)
}

/// Where a socket's object is, from a frame that waits on it.
#[derive(Clone, Copy)]
enum SocketAt {
    /// An attribute (instance or `__slots__`) of the frame's `self`: a transport, or a
    /// protocol and then its transport.
    SelfAttrs(&'static [&'static str]),
    /// A local: the socket itself.
    Local(&'static str),
}

/// Frames that wait on a socket: (file, qualified name, where its socket is, direction). Each
/// is the first frame outside asyncio/locks.py and futures.py, from the innermost outwards.
const SOCKET_FRAMES: &[(&str, &str, SocketAt, Direction)] = &[
    // asyncio streams (Lib/asyncio/streams.py): `read`, `readline`, `readexactly`... await
    // `_wait_for_data`; `drain` awaits the protocol's `_drain_helper`.
    (
        STREAMS_PY,
        "StreamReader._wait_for_data",
        SocketAt::SelfAttrs(&["_transport"]),
        Direction::Recv,
    ),
    (
        STREAMS_PY,
        "FlowControlMixin._drain_helper",
        SocketAt::SelfAttrs(&["_transport"]),
        Direction::Send,
    ),
    // The loop's socket methods (Lib/asyncio/selector_events.py).
    (
        SELECTOR_PY,
        "BaseSelectorEventLoop.sock_recv",
        SocketAt::Local("sock"),
        Direction::Recv,
    ),
    (
        SELECTOR_PY,
        "BaseSelectorEventLoop.sock_recv_into",
        SocketAt::Local("sock"),
        Direction::Recv,
    ),
    (
        SELECTOR_PY,
        "BaseSelectorEventLoop.sock_recvfrom",
        SocketAt::Local("sock"),
        Direction::Recv,
    ),
    (
        SELECTOR_PY,
        "BaseSelectorEventLoop.sock_recvfrom_into",
        SocketAt::Local("sock"),
        Direction::Recv,
    ),
    (
        SELECTOR_PY,
        "BaseSelectorEventLoop.sock_sendall",
        SocketAt::Local("sock"),
        Direction::Send,
    ),
    (
        SELECTOR_PY,
        "BaseSelectorEventLoop.sock_sendto",
        SocketAt::Local("sock"),
        Direction::Send,
    ),
    (
        SELECTOR_PY,
        "BaseSelectorEventLoop.sock_connect",
        SocketAt::Local("sock"),
        Direction::Connect,
    ),
    (
        SELECTOR_PY,
        "BaseSelectorEventLoop.sock_accept",
        SocketAt::Local("sock"),
        Direction::Accept,
    ),
    // anyio 4's asyncio backend (httpx, httpcore, Starlette): `SocketStream.receive` awaits
    // its protocol's `read_event` (an asyncio.Event), `send` its `write_event`.
    (
        ANYIO_PY,
        "SocketStream.receive",
        SocketAt::SelfAttrs(&["_transport"]),
        Direction::Recv,
    ),
    (
        ANYIO_PY,
        "SocketStream.send",
        SocketAt::SelfAttrs(&["_transport"]),
        Direction::Send,
    ),
    // aiohttp's StreamReader (aiohttp/streams.py) waits in `_wait` on its protocol's transport.
    (
        AIOHTTP_STREAMS_PY,
        "StreamReader._wait",
        SocketAt::SelfAttrs(&["_protocol", "transport"]),
        Direction::Recv,
    ),
    // aiohttp 3.14's client awaits a response's head in `DataQueue.read` (aiohttp/streams.py),
    // on `self._waiter`: there `self` is the connection's `ResponseHandler`, protocol and queue
    // at once, whose `transport` slot (`BaseProtocol.__slots__`) is the connection's. A
    // DataQueue that is no protocol has no `transport`: no socket wait.
    (
        AIOHTTP_STREAMS_PY,
        "DataQueue.read",
        SocketAt::SelfAttrs(&["transport"]),
        Direction::Recv,
    ),
    // asyncpg 0.32 (asyncpg/connection.py): a query awaits its C protocol's coroutine
    // (`bind_execute`, `prepare`, `query`, compiled by Cython: no Python frame of its own),
    // which waits on the protocol's `waiter` for the server's answer. Each of these frames,
    // when it is the task's innermost, awaits nothing else (its other awaits are Python
    // coroutines, whose frames would be inner). `Connection.__slots__` keeps `_transport`.
    (
        ASYNCPG_CONNECTION_PY,
        "Connection._do_execute",
        SocketAt::SelfAttrs(&["_transport"]),
        Direction::Recv,
    ),
    (
        ASYNCPG_CONNECTION_PY,
        "Connection._get_statement",
        SocketAt::SelfAttrs(&["_transport"]),
        Direction::Recv,
    ),
    (
        ASYNCPG_CONNECTION_PY,
        "Connection.execute",
        SocketAt::SelfAttrs(&["_transport"]),
        Direction::Recv,
    ),
];

const STREAMS_PY: &str = "/asyncio/streams.py";
const SELECTOR_PY: &str = "/asyncio/selector_events.py";
const ANYIO_PY: &str = "/anyio/_backends/_asyncio.py";
const AIOHTTP_STREAMS_PY: &str = "/aiohttp/streams.py";
const ASYNCPG_CONNECTION_PY: &str = "/asyncpg/connection.py";
const LOCKS_PY: &str = "/asyncio/locks.py";
const FUTURES_PY: &str = "/asyncio/futures.py";

/// A wait on a socket (see [`SOCKET_FRAMES`]): its fd and direction; `local` and `peer` are
/// for [`super::resources::socket_addresses`] to fill in, live. It comes before the asyncio
/// primitive a library waits on for the socket's readiness (anyio's `read_event`).
pub fn socket_wait(snap: &Snapshot, t: &TaskView) -> Option<Waiting> {
    let (i, p) = python_frames(t).find(|(_, p)| {
        !p.code.filename.ends_with(LOCKS_PY) && !p.code.filename.ends_with(FUTURES_PY)
    })?;
    let &(_, _, at, direction) = SOCKET_FRAMES
        .iter()
        .find(|(file, name, _, _)| p.code.filename.ends_with(file) && &*p.code.qualname == *name)?;
    let holder = match at {
        SocketAt::Local(name) => snap.local_object(p, name).ok()??,
        SocketAt::SelfAttrs(path) => {
            let mut obj = snap.local_object(p, "self").ok()??;
            for name in path {
                obj = match attr(snap, obj, name) {
                    Some(v) => v,
                    None => return c_transport_wait(snap, obj, i, direction),
                };
            }
            obj
        }
    };
    let Some(sock) = snap.real_socket(holder) else {
        return c_transport_wait(snap, holder, i, direction);
    };
    let fd = snap.socket_object(sock).ok()?.fd;
    Some(Waiting {
        kind: WaitKind::Socket,
        object: Some(sock),
        type_name: snap.type_of(sock).ok().map(|t| t.name.clone()),
        owner: None,
        frame: i,
        on: Some(WaitsOn::Socket {
            fd,
            direction: Some(direction),
            local: None,
            peer: None,
            peer_process: None,
        }),
    })
}

/// A socket wait through uvloop's transport (`uvloop.loop.TCPTransport`, a Cython type): its
/// socket is inside libuv's handle, whose layout is not read, so `fd` is null (and `local` and
/// `peer`); [`super::report`] says so in `errors`. None for any other object.
fn c_transport_wait(
    snap: &Snapshot,
    transport: u64,
    frame: usize,
    direction: Direction,
) -> Option<Waiting> {
    let ty = snap.type_of(transport).ok()?;
    if !ty.name.starts_with(UVLOOP_TYPES) {
        return None;
    }
    Some(Waiting {
        kind: WaitKind::Socket,
        object: Some(transport),
        type_name: Some(ty.name.clone()),
        owner: None,
        frame,
        on: Some(WaitsOn::Socket {
            fd: None,
            direction: Some(direction),
            local: None,
            peer: None,
            peer_process: None,
        }),
    })
}

/// The `errors` entry of task `task`'s socket wait `w` through a uvloop transport, whose
/// socket is not read.
pub fn unread_socket(task: u64, w: &Waiting) -> Option<crate::model::ErrorReport> {
    let ty = w
        .type_name
        .as_deref()
        .filter(|t| t.starts_with(UVLOOP_TYPES))?;
    if w.kind != WaitKind::Socket {
        return None;
    }
    Some(crate::model::ErrorReport {
        address: task,
        what: format!(
            "task {task:#x} waits on a socket through {ty} {:#x}, a transport written in C \
             (uvloop keeps the socket in libuv's handle, whose layout is not read): its fd, \
             local and peer are null",
            w.object.unwrap_or(0)
        ),
    })
}

/// The prefix of uvloop's type names (`tp_name`).
pub const UVLOOP_TYPES: &str = "uvloop.";

/// An instance attribute, else a `__slots__` member.
fn attr(snap: &Snapshot, obj: u64, name: &str) -> Option<u64> {
    match snap.instance_attr(obj, name) {
        Ok(Some(v)) => Some(v),
        _ => snap.slot_attr(obj, name).ok().flatten(),
    }
}

/// `Process.wait()` (or `communicate()`) in progress: the transport's child.
fn child_wait(snap: &Snapshot, t: &TaskView) -> Option<Waiting> {
    let (i, p) = python_frames(t).find(|(_, p)| {
        &*p.code.qualname == "BaseSubprocessTransport._wait"
            && p.code.filename.ends_with(BASE_SUBPROCESS_PY)
    })?;
    let transport = snap.local_object(p, "self").ok()??;
    let attrs = snap.instance_attrs(transport, &["_pid", "_proc"]).ok()?;
    let pid = attrs[0]
        .and_then(|v| snap.read_int(v).ok())
        .and_then(|s| s.parse::<i64>().ok())
        .filter(|&p| p > 0);
    let command = attrs[1].and_then(|proc_| command_line(snap, proc_));
    Some(Waiting {
        kind: WaitKind::Child,
        object: Some(transport),
        type_name: snap.type_of(transport).ok().map(|t| t.name.clone()),
        owner: None,
        frame: i,
        on: Some(WaitsOn::Child { pid, command }),
    })
}

/// A `subprocess.Popen`'s `args`, space-joined as /proc's command line is: a list or tuple
/// of str or bytes, or one str (a shell command).
fn command_line(snap: &Snapshot, popen: u64) -> Option<String> {
    let args = snap.instance_attr(popen, "args").ok()??;
    let arg = |a: u64| match snap.type_of(a).ok()?.name.as_str() {
        "str" => snap.read_str(a).ok(),
        "bytes" => snap
            .read_bytes(a, MAX_ARG_BYTES as u64)
            .ok()
            .map(|(b, _)| String::from_utf8_lossy(&b).into_owned()),
        _ => None,
    };
    match snap.type_of(args).ok()?.name.as_str() {
        "list" | "tuple" => {
            let list = snap.type_of(args).ok()?.name == "list";
            let (items, n) = snap.read_seq(args, list, MAX_ARGS).ok()?;
            if n > MAX_ARGS {
                return None;
            }
            let parts: Option<Vec<String>> = items.into_iter().map(arg).collect();
            Some(parts?.join(" "))
        }
        _ => arg(args),
    }
}

/// `asyncio.sleep`'s deadline: its frame's `h` (a `TimerHandle`), `h._when`.
fn sleep_deadline(snap: &Snapshot, t: &TaskView) -> Option<f64> {
    let (_, p) = python_frames(t)
        .find(|(_, p)| &*p.code.qualname == "sleep" && p.code.filename.ends_with(TASKS_PY))?;
    let h = snap.local_object(p, "h").ok()??;
    let when = snap.slot_attr(h, "_when").ok()??;
    (snap.type_of(when).ok()?.name == "float")
        .then(|| snap.read_float(when).ok())
        .flatten()
        .filter(|w| w.is_finite())
}

/// Whether nothing but task `t` and its frames refers to `fut` (see the module's notes); None
/// where a count cannot be read or a frame's live stack is unknown.
fn orphan(snap: &Snapshot, view: &AsyncView, t: &TaskView, fut: u64) -> Option<bool> {
    let count = snap.refcount(fut).ok()?;
    let mut known = u64::from(t.raw.fut_waiter == fut);
    for (_, p) in python_frames(t) {
        known += frame_refs(snap, view.stack_top?, p, fut)?;
    }
    match count.cmp(&known) {
        std::cmp::Ordering::Equal => Some(true),
        std::cmp::Ordering::Greater => Some(false),
        // Fewer than we found: a slot read as a reference is none (a borrowed one).
        std::cmp::Ordering::Less => None,
    }
}

/// The references to `fut` that the suspended frame `p` owns: locals and live value-stack
/// slots that are `fut`, or a `FutureIter` of it. A slot tagged as borrowed (3.14+'s
/// `_PyStackRef` with `Py_TAG_REFCNT` set) owns none.
fn frame_refs(snap: &Snapshot, top: StackTop, p: &PyFrame, fut: u64) -> Option<u64> {
    let FrameModel::Interpreter(f) = snap.layout.frame else {
        return None;
    };
    let nlocals = p.code.locals.len() as u64;
    let depth = top.live_slots(&*snap.mem, p.addr, f.localsplus, nlocals)?;
    let n = nlocals.checked_add(depth.min(MAX_SLOTS))?;
    let (base, tag_bits) = snap.localsplus(p).ok()?;
    let raw = snap
        .mem
        .read_vec(base, n * 8, (MAX_SLOTS + nlocals) * 8)
        .ok()?;
    let mut refs = 0;
    for word in raw.chunks_exact(8) {
        let v = u64::from_le_bytes(word.try_into().ok()?);
        if v & tag_bits != 0 || v == 0 {
            continue;
        }
        if v == fut || future_iter_of(snap, v) == Some(fut) {
            refs += 1;
        }
    }
    Some(refs)
}

/// The future a `_asyncio.FutureIter` iterates.
fn future_iter_of(snap: &Snapshot, obj: u64) -> Option<u64> {
    if snap.type_of(obj).ok()?.name != FUTURE_ITER {
        return None;
    }
    let at = snap.object_fields(obj).ok()?;
    snap.mem.read_ptr(at).ok()
}
