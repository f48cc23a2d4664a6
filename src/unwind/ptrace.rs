//! Registers of a live process's threads, for `pid --native`: each thread in turn is seized,
//! interrupted, its registers and the used part of its stack copied, and detached again, so
//! no thread is stopped for longer than those copies take. Nothing else of the process is
//! stopped, and nothing runs in it.
//!
//! Detaching is unconditional once a thread is seized (also when a step fails), and a thread
//! that stopped for a signal gets the signal back on detach. If pyunwind itself dies while a
//! thread is seized, the kernel detaches it (`exit_ptrace`), and a seized thread is never left
//! in a group stop: PTRACE_INTERRUPT's stop ends with the detach.

use std::time::{Duration, Instant};

use super::regs::Regs;
use crate::arch::Arch;
use crate::error::{Error, Result};

/// The most of a thread's stack copied while it is stopped (from its stack pointer up).
const MAX_STACK_COPY: u64 = 8 << 20;
/// Giving up on a thread that does not stop.
const STOP_TIMEOUT: Duration = Duration::from_millis(500);
/// Where `pr_reg` sits in `struct elf_prstatus` (linux/elfcore.h, 64-bit), and room for the
/// largest general-purpose register set (arm64's `user_pt_regs`, 272 bytes; x86-64's
/// `user_regs_struct` is 216).
const PR_REG_OFFSET: usize = 112;
const MAX_REGSET: usize = 512;

/// One thread, read while it was stopped.
#[derive(Clone, Debug)]
pub struct StoppedThread {
    pub tid: u64,
    pub regs: Regs,
    /// The thread pointer, as a core's `NT_PRSTATUS` gives it ([`crate::arch::PrStatus`]).
    pub thread_pointer: u64,
    /// The system call it was stopped in, as a core's `NT_PRSTATUS` gives it (x86-64
    /// `orig_rax`; None on arm64, whose call is told from the code at its pc).
    pub syscall: Option<u64>,
    /// The bytes from the stack pointer up to the end of its mapping (capped), as they were.
    pub stack: (u64, Vec<u8>),
    /// How long the thread was stopped.
    pub stopped_for: Duration,
}

/// Every thread of `pid`, stopped one at a time. Err only when ptrace is refused for the
/// process as a whole; a thread that cannot be read is in the second list with the reason.
/// Threads that could not be read: (tid, why).
pub type Failures = Vec<(u64, String)>;

/// `arch` is the process's (its executable's): the kernel hands out that architecture's
/// register set.
pub fn read_threads(pid: i32, arch: Arch) -> Result<(Vec<StoppedThread>, Failures)> {
    let dir = format!("/proc/{pid}/task");
    let tids: Vec<i32> = std::fs::read_dir(&dir)
        .map_err(|e| Error::io(dir.clone(), e))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    let ranges = stack_ranges(pid);
    let mut out = Vec::new();
    let mut failed = Vec::new();
    for tid in tids {
        match read_thread(arch, tid, &ranges) {
            Ok(t) => out.push(t),
            Err(Refused(errno)) if errno == libc::EPERM => {
                return Err(Error::Usage(format!(
                    "cannot ptrace process {pid} for --native: {} (run as the same user with \
                     /proc/sys/kernel/yama/ptrace_scope at 0, or as root; a debugger already \
                     attached also prevents it)",
                    std::io::Error::from_raw_os_error(errno)
                )))
            }
            // The thread exited meanwhile.
            Err(Refused(errno)) if errno == libc::ESRCH => {}
            Err(Refused(errno)) => failed.push((
                tid as u64,
                format!("ptrace: {}", std::io::Error::from_raw_os_error(errno)),
            )),
            Err(Failed(why)) => failed.push((tid as u64, why)),
        }
    }
    Ok((out, failed))
}

enum ThreadError {
    /// PTRACE_SEIZE failed with this errno (nothing to undo).
    Refused(i32),
    Failed(String),
}
use ThreadError::{Failed, Refused};

fn read_thread(
    arch: Arch,
    tid: i32,
    ranges: &[(u64, u64)],
) -> std::result::Result<StoppedThread, ThreadError> {
    let started = Instant::now();
    // SAFETY: ptrace with integer arguments; no memory of ours is passed.
    let r = unsafe { libc::ptrace(libc::PTRACE_SEIZE, tid, 0usize, 0usize) };
    if r != 0 {
        return Err(Refused(errno()));
    }
    let result = stopped(arch, tid, ranges);
    let signal = match &result {
        Ok((_, sig)) => *sig,
        Err(_) => 0,
    };
    // SAFETY: as above; `signal` is re-delivered when the stop was a signal's.
    unsafe { libc::ptrace(libc::PTRACE_DETACH, tid, 0usize, signal as usize) };
    let stopped_for = started.elapsed();
    result.map(|(mut t, _)| {
        t.stopped_for = stopped_for;
        t
    })
}

/// Interrupts the seized thread, waits for its stop, copies registers and stack. Returns the
/// signal to hand back on detach (0 for our own interrupt's stop).
fn stopped(
    arch: Arch,
    tid: i32,
    ranges: &[(u64, u64)],
) -> std::result::Result<(StoppedThread, i32), ThreadError> {
    // SAFETY: integer arguments only.
    if unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0usize, 0usize) } != 0 {
        return Err(Failed(format!(
            "PTRACE_INTERRUPT: {}",
            std::io::Error::last_os_error()
        )));
    }
    let deadline = Instant::now() + STOP_TIMEOUT;
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: `status` is ours and outlives the call.
        let r = unsafe { libc::waitpid(tid, &mut status, libc::__WALL | libc::WNOHANG) };
        if r == tid {
            break;
        }
        if r < 0 {
            return Err(Failed(format!(
                "waitpid: {}",
                std::io::Error::last_os_error()
            )));
        }
        if Instant::now() > deadline {
            return Err(Failed("the thread did not stop".into()));
        }
        std::thread::yield_now();
    }
    if !libc::WIFSTOPPED(status) {
        return Err(Failed("the thread exited".into()));
    }
    let sig = libc::WSTOPSIG(status);
    // Our interrupt's stop is PTRACE_EVENT_STOP (status >> 16); any other stop is a signal
    // being delivered, which the detach passes on.
    let handback = if (status >> 16) == libc::PTRACE_EVENT_STOP || sig == libc::SIGTRAP {
        0
    } else {
        sig
    };
    // The general-purpose registers as PTRACE_GETREGSET's NT_PRSTATUS set gives them: the
    // `pr_reg` of a core's NT_PRSTATUS note, read by the same code (the architecture's
    // layout, [`Arch::parse_prstatus`]), behind a zeroed note header holding the thread id.
    let mut note = vec![0u8; PR_REG_OFFSET + MAX_REGSET];
    note[32..36].copy_from_slice(&(tid as u32).to_le_bytes());
    let mut iov = libc::iovec {
        iov_base: note[PR_REG_OFFSET..].as_mut_ptr().cast(),
        iov_len: MAX_REGSET,
    };
    // SAFETY: `iov` describes MAX_REGSET bytes of `note`, which outlives the call; the kernel
    // writes at most iov_len bytes and stores the length it wrote there.
    let r = unsafe {
        libc::ptrace(
            libc::PTRACE_GETREGSET,
            tid,
            libc::NT_PRSTATUS as usize,
            &mut iov as *mut libc::iovec,
        )
    };
    if r != 0 {
        return Err(Failed(format!(
            "PTRACE_GETREGSET: {}",
            std::io::Error::last_os_error()
        )));
    }
    note.truncate(PR_REG_OFFSET + iov.iov_len);
    let Some(status) = arch.parse_prstatus(&note) else {
        return Err(Failed(format!(
            "PTRACE_GETREGSET: {} bytes, too few for {} registers",
            iov.iov_len,
            arch.name()
        )));
    };
    let rsp = status.regs.sp();
    let stack = ranges
        .iter()
        .find(|(s, e)| *s <= rsp && rsp < *e)
        .map(|&(_, end)| {
            let len = (end - rsp).min(MAX_STACK_COPY);
            let mut buf = vec![0u8; len as usize];
            let mem = crate::memory::LiveMemory::new(tid);
            match crate::memory::Memory::read_into(&mem, rsp, &mut buf) {
                Ok(()) => (rsp, buf),
                Err(_) => (rsp, Vec::new()),
            }
        })
        .unwrap_or((rsp, Vec::new()));
    Ok((
        StoppedThread {
            tid: tid as u64,
            regs: status.regs,
            thread_pointer: status.thread_pointer,
            syscall: status.syscall,
            stack,
            stopped_for: Duration::ZERO,
        },
        handback,
    ))
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The writable anonymous mappings of `pid` (thread stacks among them).
fn stack_ranges(pid: i32) -> Vec<(u64, u64)> {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_ascii_whitespace();
            let range = f.next()?;
            let perms = f.next()?;
            if !perms.starts_with("rw") {
                return None;
            }
            let (s, e) = range.split_once('-')?;
            Some((
                u64::from_str_radix(s, 16).ok()?,
                u64::from_str_radix(e, 16).ok()?,
            ))
        })
        .collect()
}
