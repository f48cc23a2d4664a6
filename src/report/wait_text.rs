//! A thread's or task's wait in words, and who holds what it waits for: the pieces the
//! verdict's lines ([`super::verdict_text`], [`super::task_text`]) are made of.

use std::fmt::Write;

use crate::model::{
    Direction, FrameReport, PeerProcess, Report, ThreadReport, WaitKind, Waiting, WaitsOn,
};

/// `"poster"` (a thread's name), else its native id.
pub(super) fn who(r: &Report, native_id: u64) -> String {
    match r
        .threads
        .iter()
        .find(|t| t.native_id == Some(native_id))
        .and_then(ThreadReport::any_name)
    {
        Some(name) => format!("thread {native_id} \"{name}\""),
        None => format!("thread {native_id}"),
    }
}

/// Where the owner took `object` by a `with` block: ` (taken at app.py:19, in poster)`, the
/// `with` statement's line; else the line its frame is at now, where the code does not show
/// the statement: ` (its with block in poster, now at app.py:21)`.
fn held_in(r: &Report, owner: u64, object: u64) -> String {
    let Some(t) = r.threads.iter().find(|t| t.native_id == Some(owner)) else {
        return String::new();
    };
    let Some(h) = t
        .why
        .iter()
        .flat_map(|w| &w.holding)
        .find(|h| h.object == object)
    else {
        return String::new();
    };
    match h.frame.and_then(|i| t.frames.get(i)) {
        Some(FrameReport {
            function: Some(function),
            file: Some(file),
            line: Some(line),
            ..
        }) => {
            let file = file.rsplit('/').next().unwrap_or(file);
            match h.line {
                Some(taken) => format!(" (taken at {file}:{taken}, in {function})"),
                None => format!(" (its with block in {function}, now at {file}:{line})"),
            }
        }
        _ => String::new(),
    }
}

/// A wait on the outside world, in words: `waits on socket fd 7 (recv from 10.0.0.5:5432,
/// local 10.0.0.2:40122)`, `waits on pipe fd 5 (read)`, `waits for child 4300 (sleep 1000) to
/// exit`, `is blocked in native code: torch._C._EngineBase.run_backward, in
/// c10d::Reducer::finalize_backward()`. None for the other waits.
pub(super) fn waits_on(w: &Waiting) -> Option<String> {
    let s = match (w.kind, w.on.as_ref()?) {
        (
            _,
            WaitsOn::Socket {
                fd,
                direction,
                local,
                peer,
                peer_process,
            },
        ) => {
            let mut s = "waits on socket".to_string();
            if let Some(fd) = fd {
                write!(s, " fd {fd}").unwrap();
            }
            let mut parts: Vec<String> =
                socket_target(*direction, peer.as_deref(), peer_process.as_ref())
                    .into_iter()
                    .collect();
            if let Some(l) = local {
                parts.push(format!("local {l}"));
            }
            if !parts.is_empty() {
                write!(s, " ({})", parts.join(", ")).unwrap();
            }
            s
        }
        (
            kind,
            WaitsOn::Fd {
                fd,
                direction,
                path,
            },
        ) => {
            let mut s = match kind {
                WaitKind::Fd => "waits on".to_string(),
                k => format!("waits on {k}"),
            };
            if let Some(fd) = fd {
                write!(s, " fd {fd}").unwrap();
            }
            if let Some(p) = path {
                write!(s, " {p}").unwrap();
            }
            if let Some(d) = direction {
                write!(s, " ({})", d.as_str()).unwrap();
            }
            s
        }
        (_, WaitsOn::Child { pid, command }) => match (pid, command) {
            (Some(p), Some(c)) => format!("waits for child {p} ({c}) to exit"),
            (Some(p), None) => format!("waits for child {p} to exit"),
            (None, _) => "waits for any child to exit".to_string(),
        },
        // An asyncio task's waits, said by `task_outside_line`.
        (_, WaitsOn::Executor { .. } | WaitsOn::Sleep { .. } | WaitsOn::Future { .. }) => {
            return None
        }
        (
            _,
            WaitsOn::Native {
                function,
                native_function,
            },
        ) => {
            let mut s = "is blocked in native code".to_string();
            if let Some(f) = function {
                write!(s, ": {f}").unwrap();
            }
            if let Some(n) = native_function {
                write!(s, ", in {n}").unwrap();
            }
            s
        }
    };
    Some(s)
}

/// A socket wait's direction and the other end: `recv from 127.0.0.1:5432 (postgres, pid
/// 4242)` (the process behind the peer, as `ss -p` names it), `recv from pid 4242 (python3)`
/// (an unnamed unix socket's peer, a `socketpair`, has only its process), `recv`; None when
/// neither is known.
pub(super) fn socket_target(
    direction: Option<Direction>,
    peer: Option<&str>,
    peer_process: Option<&PeerProcess>,
) -> Option<String> {
    let by = peer_process
        .map(|pp| format!(" ({}, pid {})", pp.command, pp.pid))
        .unwrap_or_default();
    Some(match (direction, peer) {
        (Some(d), Some(p)) => {
            let to = match d {
                Direction::Recv => "from",
                Direction::Accept => "on",
                _ => "to",
            };
            format!("{} {to} {p}{by}", d.as_str())
        }
        (Some(d), None) => match peer_process {
            Some(pp) => {
                let to = if d == Direction::Recv { "from" } else { "to" };
                format!("{} {to} pid {} ({})", d.as_str(), pp.pid, pp.command)
            }
            None => d.as_str().to_string(),
        },
        (None, Some(p)) => format!("peer {p}{by}"),
        (None, None) => return None,
    })
}

/// `waits for RLock 0x7f.. held by thread 12 "rotator"`; the owner unknown says so.
pub(super) fn waits_for(r: &Report, w: &Waiting) -> String {
    if let Some(s) = waits_on(w) {
        return s;
    }
    if w.kind == WaitKind::Sleep {
        return "sleeps (time.sleep)".to_string();
    }
    let mut s = match w.kind {
        WaitKind::Gil => "waits for the GIL".to_string(),
        k => format!("waits for {}", w.type_name.as_deref().unwrap_or(k.as_str())),
    };
    if let Some(o) = w.object {
        write!(s, " {o:#x}").unwrap();
    }
    match (w.owner, w.object) {
        (Some(owner), _) if w.kind == WaitKind::Join => {
            write!(s, " to end: it is {}", who(r, owner)).unwrap()
        }
        (Some(owner), Some(object)) => {
            write!(s, " held by {}{}", who(r, owner), held_in(r, owner, object)).unwrap()
        }
        (Some(owner), None) => write!(s, " held by {}", who(r, owner)).unwrap(),
        (None, _) if w.kind == WaitKind::Lock => {
            s.push_str(" (its holder is unknown: a Lock taken by acquire() leaves no trace)")
        }
        (None, _) => {}
    }
    s
}
