//! What a suspended gevent greenlet waits on, from its own frames: gevent's waits are compiled
//! (Cython) and leave no Python frame, so the program's innermost frame shows the call in
//! progress on its value stack (`SEM.acquire()`: the method, then the Semaphore), except for
//! the waits gevent writes in Python: `gevent.sleep` (gevent/hub.py) and the cooperative
//! socket's methods (gevent/_socket3.py, gevent/_socketcommon.py), whose frames say it. When
//! gevent's own Python code is innermost, its call in progress is the wait (a server's
//! `serve_forever` waiting on its stop event).
//!
//! A wait on a socket names its fd, from the real socket the cooperative one keeps
//! (`_sock`, a `__slots__` member of gevent's `SocketMixin`, gevent/_socketcommon.py; or the
//! object itself where it is a `_socket.socket`), and its direction, from the name of the
//! socket method the program called (`recv`, `sendall`, `connect`, `accept`, ...). Memory
//! only: the addresses of a live process's socket are added over the session
//! ([`crate::why::resources::socket_addresses`]).

use crate::cpython::sockets::method_direction;
use crate::cpython::{FrameItem, PyFrame, Snapshot};
use crate::model::{WaitKind, Waiting, WaitsOn};

/// Library frames followed outwards from the innermost one.
const MAX_WAIT_FRAMES: usize = 32;

/// gevent's compiled waitables (`tp_name`s of gevent 1.3 to 26) and the wait each makes.
const WAITABLES: &[(&str, WaitKind)] = &[
    ("gevent._gevent_c_semaphore.Semaphore", WaitKind::Semaphore),
    (
        "gevent._gevent_c_semaphore.BoundedSemaphore",
        WaitKind::Semaphore,
    ),
    ("gevent._gevent_cevent.Event", WaitKind::Event),
    ("gevent._gevent_cevent.AsyncResult", WaitKind::AsyncResult),
    ("gevent._gevent_cgreenlet.Greenlet", WaitKind::Join),
    ("gevent._gevent_cqueue.Queue", WaitKind::QueueGet),
    ("gevent._gevent_cqueue.UnboundQueue", WaitKind::QueueGet),
    ("gevent._gevent_cqueue.PriorityQueue", WaitKind::QueueGet),
    ("gevent._gevent_cqueue.LifoQueue", WaitKind::QueueGet),
    ("gevent._gevent_cqueue.JoinableQueue", WaitKind::QueueGet),
    ("gevent._gevent_cqueue.Channel", WaitKind::QueueGet),
];

/// The methods of those that wait (others on the value stack are not a wait).
const WAIT_METHODS: &[&str] = &["acquire", "wait", "get", "join", "peek", "put", "wait_for"];

/// The types a call's callable has on the value stack (their names after the last dot): a
/// Cython method, a builtin method's descriptor, a plain function.
const CALLABLES: &[&str] = &[
    "cython_function_or_method",
    "method_descriptor",
    "builtin_function_or_method",
    "function",
];

fn is_file(file: &str, name: &str) -> bool {
    file.ends_with(name)
}

/// The wait of a suspended greenlet whose frames (innermost first) are `frames`.
pub fn gevent_wait(snap: &Snapshot, frames: &[FrameItem]) -> Option<Waiting> {
    let mut socket: Option<(usize, &PyFrame)> = None;
    for (i, item) in frames.iter().enumerate().take(MAX_WAIT_FRAMES) {
        let FrameItem::Python(p) = item else {
            return None;
        };
        let file = &*p.code.filename;
        if is_file(file, "/gevent/hub.py") && p.code.name == "sleep" {
            return Some(Waiting {
                kind: WaitKind::Sleep,
                object: None,
                type_name: None,
                owner: None,
                frame: i,
                on: None,
            });
        }
        if is_file(file, "/gevent/_socket3.py") || is_file(file, "/gevent/_socketcommon.py") {
            // The outermost of the socket's own frames: the method the program called.
            socket = Some((i, p));
            continue;
        }
        if file.contains("/gevent/") {
            // gevent's own Python code waits on its compiled waitables too (`serve_forever`
            // in gevent/baseserver.py: `self._stop_event.wait()`; `Pool.spawn` on its
            // semaphore): only the innermost frame can be inside that C call.
            if i == 0 {
                if let Some(w) = call_in_progress(snap, p, i) {
                    return Some(w);
                }
            }
            continue;
        }
        if let Some((at, s)) = socket {
            let this = snap.local_object(s, "self").ok().flatten();
            let fd = this
                .and_then(|o| snap.real_socket(o))
                .and_then(|r| snap.socket_object(r).ok())
                .and_then(|r| r.fd);
            return Some(Waiting {
                kind: WaitKind::Socket,
                object: this,
                type_name: this.and_then(|t| Some(snap.type_of(t).ok()?.name.clone())),
                owner: None,
                frame: at,
                on: Some(WaitsOn::Socket {
                    fd,
                    direction: method_direction(&s.code.name),
                    local: None,
                    peer: None,
                    peer_process: None,
                }),
            });
        }
        return call_in_progress(snap, p, i);
    }
    None
}

/// A wait call on one of gevent's waitables in frame `p`: a callable right below an object
/// of a waitable type on the value stack (a method call pushes the method, then `self`).
fn call_in_progress(snap: &Snapshot, p: &PyFrame, index: usize) -> Option<Waiting> {
    let slots = snap.own_value_stack(p, None);
    for pair in slots.windows(2) {
        let (Some(callable), Some(this)) = (pair[0], pair[1]) else {
            continue;
        };
        let Ok(ct) = snap.type_of(callable) else {
            continue;
        };
        // Cython names its function type after its own version (`_cython_3_3_0.`).
        let short = ct.name.rsplit('.').next().unwrap_or_default();
        if !CALLABLES.contains(&short) {
            continue;
        }
        let Ok(t) = snap.type_of(this) else { continue };
        let Some(&(_, mut kind)) = WAITABLES.iter().find(|w| w.0 == t.name) else {
            continue;
        };
        // A Cython method is a `PyCFunctionObject` first: its name says which call it is.
        if let Ok((name, _)) = snap.cfunction_name_and_self(callable) {
            if !WAIT_METHODS.contains(&name.as_str()) {
                continue;
            }
            if name == "put" {
                kind = WaitKind::QueuePut;
            }
        }
        return Some(Waiting {
            kind,
            object: Some(this),
            type_name: Some(t.name.clone()),
            owner: None,
            frame: index,
            on: None,
        });
    }
    None
}
