//! What each thread is doing, in one word: running Python, waiting for the GIL, collecting
//! garbage, blocked in a system call (its name: from a core's NT_PRSTATUS registers, live from
//! /proc/PID/task/TID/syscall, or from the registers `pid --native`'s stop read), or an event
//! loop idle in its selector.
//!
//! Each word needs its evidence, else the state is null:
//!
//! | state | shown by |
//! | --- | --- |
//! | `gc` | the interpreter's `gc.collecting`, and the thread the GIL's last holder |
//! | `gil_wait` | not holding the GIL, blocked in `futex` on an address inside the GIL |
//! | `loop_idle` | blocked in a poll-like call, with the innermost Python frame a `selectors` module `select`, the frame that runs an event loop no task of which is running (uvloop: its loop is C code, with no Python frame of its own), or gevent's hub running its loop |
//! | `idle` | blocked in a system call, waiting for work by a row of [`idle`]'s table |
//! | `syscall` | blocked in a system call |
//! | `running` | holding the GIL (free-threaded: attached, 3.13+), in no system call |
//!
//! The first that holds wins, in that order, but for `idle`, checked before `loop_idle`: a row of
//! the idle table that waits in a selector (socketserver's `serve_forever`) is not an event
//! loop. The debugger's memory source has no notes: the
//! frontend gives the debugger's registers (`Session::set_stopped_syscalls`), else /proc
//! where the process is local, else only `gc` can show there.

use crate::cpython::FrameItem;
use crate::memory::{proc_syscall, ProcSyscall};
use crate::model::{FrameKind, IdleKind, StateWord, ThreadReport};
use crate::session::{self, Session};

use super::idle;
use crate::target::SourceKind;

/// A thread's system call at the stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Syscall {
    pub nr: u64,
    /// The argument registers (x86-64 rdi, rsi, rdx, r10, r8, r9; arm64 x0..x5).
    pub args: [u64; 6],
}

/// x86-64 `orig_rax` when a thread is in no system call (-1), and `Arch::syscall_from_code`'s.
const NO_SYSCALL: u64 = u64::MAX;
/// Past this an `orig_rax` is no system call number (the kernel reads it as an int, and x32's
/// numbers set bit 30): a garbled note, shown as unknown.
const MAX_SYSCALL_NR: u64 = i32::MAX as u64;

/// Calls a selector waits in, by name: those of `selectors`' epoll, poll and select selectors,
/// and the `p` variants a C library may make of them.
const SELECTOR_CALLS: &[&str] = &[
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "poll",
    "ppoll",
    "select",
    "pselect6",
];

/// What a thread is doing at the stop (see [`crate::report::ThreadWhy`]).
#[derive(Clone, Debug, Default)]
pub struct ThreadState {
    /// The one word; None where nothing shows it.
    pub word: Option<StateWord>,
    /// The system call's name (its number where the table has no name), whatever the state
    /// (`gil_wait` in `futex`, `loop_idle` in `epoll_wait`).
    pub syscall: Option<String>,
    /// For `idle` and `loop_idle`: the kind of idle thread ([`idle`]).
    pub idle: Option<IdleKind>,
    /// The system call with its arguments.
    pub call: Option<Syscall>,
}

/// The state of `t`, its system call and, for an idle thread, its kind.
pub fn thread_state(session: &Session, t: &ThreadReport) -> ThreadState {
    let call = syscall(session, t);
    let arch = session.target.arch;
    let name = call.flatten().map(|c| {
        arch.syscall_name(c.nr)
            .map_or_else(|| c.nr.to_string(), str::to_string)
    });
    let (word, idle) = state(session, t, call);
    ThreadState {
        word,
        syscall: name,
        idle,
        call: call.flatten(),
    }
}

/// The one word for `t` and its idle kind, given its system call: None when unknown,
/// Some(None) when it is in none.
fn state(
    session: &Session,
    t: &ThreadReport,
    call: Option<Option<Syscall>>,
) -> (Option<StateWord>, Option<IdleKind>) {
    let snap = &session.snap;
    let (Some(interpreter), Some(thread_state)) = (t.interpreter, t.thread_state) else {
        // A thread with no Python thread state (`--native-all`) runs no Python: its system
        // call is all that shows.
        return match call {
            Some(Some(_)) => (Some(StateWord::Syscall), None),
            _ => (None, None),
        };
    };
    if snap.is_collecting(interpreter, thread_state) {
        return (Some(StateWord::Gc), None);
    }
    let Some(in_call) = call else {
        return (None, None);
    };
    if let Some(c) = in_call {
        let name = session.target.arch.syscall_name(c.nr);
        let decoded = session
            .threads()
            .iter()
            .find(|d| d.info.addr == thread_state && Some(d.info.thread_id) == t.thread_id);
        if name == Some("futex")
            && (snap.waits_for_gil(interpreter, t.holds_gil, c.args[0])
                || decoded.is_some_and(|d| d.gil_waited(snap, c.args[0]).is_some()))
        {
            return (Some(StateWord::GilWait), None);
        }
        // The idle table first: a pool or server waiting in a `selectors` select (socketserver,
        // a process pool's manager) is that, not an event loop.
        if let (Some(d), Some(n)) = (decoded, name) {
            if let Some(kind) = idle::idle_kind(snap, d, n) {
                return (Some(StateWord::Idle), Some(kind));
            }
        }
        if name.is_some_and(|n| SELECTOR_CALLS.contains(&n))
            && (in_selector(t)
                || runs_idle_loop(session, t)
                || decoded.is_some_and(idle::runs_gevent_hub))
        {
            return (Some(StateWord::LoopIdle), Some(IdleKind::EventLoop));
        }
        return (Some(StateWord::Syscall), None);
    }
    let word = match t.holds_gil {
        Some(held) => held.then_some(StateWord::Running),
        // A free-threaded build has no GIL: a thread attached to its interpreter runs.
        None => snap
            .thread_attached(thread_state)
            .filter(|&a| a)
            .map(|_| StateWord::Running),
    };
    (word, None)
}

/// Whether the innermost Python frame is a `selectors` module's `select` (`EpollSelector`'s,
/// `_PollLikeSelector.select` from 3.11's qualnames, plain `select` on 3.10): asyncio's loop
/// between two rounds, or any program's selector.
fn in_selector(t: &ThreadReport) -> bool {
    let Some(f) = t
        .frames
        .iter()
        .find(|f| matches!(f.kind, FrameKind::Python | FrameKind::Unreadable))
        .filter(|f| f.kind == FrameKind::Python)
    else {
        return false;
    };
    let file = f.file.as_deref().unwrap_or("");
    let function = f.function.as_deref().unwrap_or("");
    file.ends_with("/selectors.py") && function.rsplit('.').next() == Some("select")
}

/// Whether `t` runs an event loop of which no task is running: its innermost Python frame is
/// the one the loop was started from (the loop's outer frames, as the asyncio reader places
/// them). uvloop's loop is C code (libuv), so its selector has no Python frame of its own.
fn runs_idle_loop(session: &Session, t: &ThreadReport) -> bool {
    let Some(innermost) = t
        .frames
        .iter()
        .find(|f| f.kind == FrameKind::Python)
        .and_then(|f| f.address)
    else {
        return false;
    };
    let Ok(view) = session::asyncio::view(session) else {
        return false;
    };
    let threads = session.threads();
    view.loops.iter().any(|l| {
        l.thread
            .and_then(|i| threads.get(i))
            .is_some_and(|d| Some(d.info.addr) == t.thread_state)
            && matches!(l.upper.first(), Some(FrameItem::Python(p)) if p.addr == innermost)
    })
}

/// `t`'s system call: None when the source cannot show it, Some(None) when it is in none.
pub(crate) fn syscall(session: &Session, t: &ThreadReport) -> Option<Option<Syscall>> {
    let lwp = t.native_id?;
    match session.target.kind {
        SourceKind::Core => {
            let ct = session
                .target
                .core_threads
                .iter()
                .find(|c| u64::from(c.lwp) == lwp)?;
            let arch = ct.regs.arch();
            let nr = match ct.syscall {
                Some(nr) => nr,
                None => {
                    let read = |a: u64| session.snap.mem.read_u32(a).ok();
                    arch.syscall_from_code(&read, &ct.regs)?
                }
            };
            if nr == NO_SYSCALL {
                return Some(None);
            }
            if nr > MAX_SYSCALL_NR {
                return None;
            }
            Some(Some(Syscall {
                nr,
                args: arch
                    .syscall_arg_registers()
                    .map(|r| ct.regs.get(r).unwrap_or(0)),
            }))
        }
        // Registers read while the thread was stopped, where a stop gave them: the debugger's
        // (the frontend's), or `pid --native`'s own, with which the thread's native stack was
        // read (after that stop /proc can show a thread still on its way back into its call);
        // else, for a process of this machine (the frontends give a pid only then), /proc
        // (lldb shows no orig_rax on x86-64).
        SourceKind::Live | SourceKind::Debugger => {
            let Some(values) = session.stopped_syscall(lwp) else {
                return kernel_syscall(session.target.pid?, lwp);
            };
            let read = |a: u64| session.snap.mem.read_u32(a).ok();
            match session.target.arch.syscall_from_registers(values, &read)? {
                (NO_SYSCALL, _) => Some(None),
                (nr, args) if nr <= MAX_SYSCALL_NR => Some(Some(Syscall { nr, args })),
                _ => None,
            }
        }
    }
}

/// What /proc/PID/task/TID/syscall shows of thread `lwp` of local process `pid`: the system
/// calls of the target's own architecture (the host's).
fn kernel_syscall(pid: u32, lwp: u64) -> Option<Option<Syscall>> {
    match proc_syscall(pid, lwp)? {
        ProcSyscall::In { nr, args } => Some(Some(Syscall { nr, args })),
        ProcSyscall::Outside | ProcSyscall::Running => Some(None),
    }
}
