//! A live local process, read with `process_vm_readv(2)`: no ptrace of our own, so it also works
//! while a debugger holds the process. Where that call does not exist (ENOSYS: qemu-user runs
//! pyunwind built for another architecture without it; some seccomp filters), the process's
//! `/proc/PID/mem` is read instead, as gdb does: the same permission check, and no ptrace
//! either.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::Memory;
use crate::error::{ReadError, ReadErrorKind};

#[repr(C)]
struct IoVec {
    base: *mut u8,
    len: usize,
}

extern "C" {
    // glibc, <sys/uio.h>; pid_t is i32 on Linux.
    fn process_vm_readv(
        pid: i32,
        local: *const IoVec,
        liovcnt: u64,
        remote: *const IoVec,
        riovcnt: u64,
        flags: u64,
    ) -> isize;
}

const ENOSYS: i32 = 38;
/// EFAULT from process_vm_readv, EIO from /proc/PID/mem: an address the target has not mapped.
const EFAULT: i32 = 14;
const EIO: i32 = 5;

pub struct LiveMemory {
    pid: i32,
    /// `/proc/PID/mem`, opened at the first read that found no process_vm_readv (its error
    /// then, when it cannot be opened).
    proc_mem: OnceLock<Option<Result<File, i32>>>,
}

impl LiveMemory {
    pub fn new(pid: i32) -> Self {
        LiveMemory {
            pid,
            proc_mem: OnceLock::new(),
        }
    }
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// `/proc/PID/mem` once process_vm_readv was found missing; None before that.
    fn proc_mem(&self) -> Option<&Result<File, i32>> {
        self.proc_mem.get()?.as_ref()
    }

    fn vm_readv(&self, addr: u64, buf: &mut [u8]) -> Result<usize, i32> {
        let local = IoVec {
            base: buf.as_mut_ptr(),
            len: buf.len(),
        };
        let remote = IoVec {
            base: addr as *mut u8,
            len: buf.len(),
        };
        // SAFETY: `local` describes exactly `buf`, which we borrow mutably for the call; the
        // remote iovec is only an address in another process and is never dereferenced here.
        let n = unsafe { process_vm_readv(self.pid, &local, 1, &remote, 1, 0) };
        if n < 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
        }
        Ok(n as usize)
    }
}

fn read_at(f: &File, addr: u64, buf: &mut [u8]) -> Result<usize, i32> {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], addr.wrapping_add(done as u64)) {
            Ok(0) => break,
            Ok(n) => done += n,
            // Bytes read before an unmapped page are a short read, as process_vm_readv's.
            Err(_) if done > 0 => break,
            Err(e) => return Err(e.raw_os_error().unwrap_or(0)),
        }
    }
    Ok(done)
}

impl Memory for LiveMemory {
    fn read_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        if buf.is_empty() {
            return Ok(());
        }
        let read = match self.proc_mem() {
            None => match self.vm_readv(addr, buf) {
                Err(ENOSYS) => {
                    let opened = std::fs::File::open(format!("/proc/{}/mem", self.pid))
                        .map_err(|e| e.raw_os_error().unwrap_or(0));
                    let _ = self.proc_mem.set(Some(opened));
                    return self.read_into(addr, buf);
                }
                r => r,
            },
            Some(Ok(f)) => read_at(f, addr, buf),
            Some(Err(errno)) => Err(*errno),
        };
        let n = match read {
            Ok(n) => n,
            Err(errno) => {
                let kind = if errno == EFAULT || errno == EIO {
                    ReadErrorKind::Unmapped
                } else {
                    ReadErrorKind::Os(errno)
                };
                return Err(ReadError::new(addr, buf.len() as u64, kind));
            }
        };
        if n < buf.len() {
            return Err(ReadError::new(
                addr.wrapping_add(n as u64),
                (buf.len() - n) as u64,
                ReadErrorKind::Unmapped,
            ));
        }
        Ok(())
    }
}

/// What `/proc/PID/task/TID/syscall` shows of a thread (Linux fs/proc/base.c
/// `proc_pid_syscall`): `NR ARG1 .. ARG6 SP PC` (NR in decimal, the rest in hex) while it is
/// blocked in system call NR, `-1 SP PC` while it is blocked outside one, `running` while it is
/// on a CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcSyscall {
    In { nr: u64, args: [u64; 6] },
    Outside,
    Running,
}

/// Threads of one process looked through to find a thread by its id in the process's own pid
/// namespace.
pub(super) const MAX_TASKS_SCANNED: usize = 1 << 16;

/// What `/proc/PID/task/TID/syscall` shows of the thread whose id is `tid` as the process
/// itself sees it (CPython's `native_thread_id`, `gettid()`: in a container, not /proc's id);
/// None when it cannot be read (no such thread, no ptrace access, not Linux's format).
pub fn proc_syscall(pid: u32, tid: u64) -> Option<ProcSyscall> {
    let text = std::fs::read_to_string(format!("{}/syscall", task_dir(pid, tid)?)).ok()?;
    parse_proc_syscall(&text)
}

/// The CPU time, in seconds, the thread whose id is `tid` (as the process sees it) has had:
/// `utime` plus `stime` of `/proc/PID/task/TID/stat` (fields 14 and 15, in clock ticks of
/// `sysconf(_SC_CLK_TCK)`: Linux fs/proc/array.c `do_task_stat`); None when it cannot be read
/// (no such thread: it ended).
pub fn proc_cpu_seconds(pid: u32, tid: u64) -> Option<f64> {
    let text = std::fs::read_to_string(format!("{}/stat", task_dir(pid, tid)?)).ok()?;
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    parse_stat_cpu_ticks(&text).map(|t| t as f64 / ticks.max(1) as f64)
}

/// `utime + stime` of a `stat` line. The command (field 2) is in parentheses and may itself
/// hold spaces and parentheses: the fields are counted from after its last `)`.
pub fn parse_stat_cpu_ticks(text: &str) -> Option<u64> {
    let rest = &text[text.rfind(')')? + 1..];
    // After the command: state is field 3, so utime (14) and stime (15) are the 12th and 13th.
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    utime.checked_add(stime)
}

/// The seconds the thread whose id is `tid` has spent runnable but waiting for a CPU (other
/// threads ran): the second field of `/proc/PID/task/TID/schedstat`, in nanoseconds (Linux
/// kernel/sched/stats.c `proc_schedstat`'s per-task line, `CONFIG_SCHED_INFO`); None where
/// the kernel has no such file.
pub fn proc_run_queue_seconds(pid: u32, tid: u64) -> Option<f64> {
    let text = std::fs::read_to_string(format!("{}/schedstat", task_dir(pid, tid)?)).ok()?;
    let ns: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

/// How many times the thread whose id is `tid` has been switched off a CPU: the
/// `voluntary_ctxt_switches` plus `nonvoluntary_ctxt_switches` of `/proc/PID/task/TID/status`
/// (Linux fs/proc/array.c `task_context_switch_counts`). A thread that sleeps and wakes moves
/// it even when its CPU time, counted in 10 ms ticks, does not. None when it cannot be read.
pub fn proc_context_switches(pid: u32, tid: u64) -> Option<u64> {
    let text = std::fs::read_to_string(format!("{}/status", task_dir(pid, tid)?)).ok()?;
    parse_context_switches(&text)
}

/// The sum of the two `*_ctxt_switches` lines of a `status` file.
pub fn parse_context_switches(status: &str) -> Option<u64> {
    let field = |name: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))?
            .trim()
            .parse()
            .ok()
    };
    field("voluntary_ctxt_switches:")?.checked_add(field("nonvoluntary_ctxt_switches:")?)
}

/// Whether the thread whose id is `tid` is on a CPU or waiting for one: the state letter of
/// `/proc/PID/task/TID/stat` (field 3) is `R`; None when it cannot be read (it ended).
pub fn proc_thread_running(pid: u32, tid: u64) -> Option<bool> {
    let text = std::fs::read_to_string(format!("{}/stat", task_dir(pid, tid)?)).ok()?;
    stat_running(&text)
}

/// Whether a `stat` line says its task is on a CPU or waiting for one (state `R`, the field
/// after the command, which may itself hold `)`).
pub(super) fn stat_running(text: &str) -> Option<bool> {
    let state = text[text.rfind(')')? + 1..].split_whitespace().next()?;
    Some(state == "R")
}

/// Whether process `pid` is still there and not a zombie: the state letter of
/// `/proc/PID/stat` (field 3) is neither `Z` nor `X` (Linux fs/proc/array.c `task_state_array`).
pub fn process_alive(pid: i32) -> bool {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = text
        .rfind(')')
        .and_then(|i| text[i + 1..].split_whitespace().next());
    !matches!(state, Some("Z" | "X") | None)
}

/// The name the system gives the thread whose id is `tid` as the process itself sees it:
/// `/proc/PID/task/TID/comm` (what `prctl(PR_SET_NAME)` or `pthread_setname_np` set, else the
/// name inherited from the thread that created it; at most 15 bytes), its newline removed;
/// None when it cannot be read (no such thread, an empty name). Bytes that are not UTF-8 are
/// replaced.
pub fn proc_comm(pid: u32, tid: u64) -> Option<String> {
    let raw = std::fs::read(format!("{}/comm", task_dir(pid, tid)?)).ok()?;
    let name = raw.strip_suffix(b"\n").unwrap_or(&raw);
    (!name.is_empty()).then(|| String::from_utf8_lossy(name).into_owned())
}

/// Whether process `pid` is in our own pid namespace (`/proc/PID/ns/pid` names ours): then a
/// thread's id is the same to it and to /proc. Ours is read once. The process's is asked
/// again after NAMESPACE_ANSWER_TTL (a pid may be another process's by the next stop), but
/// not for each thread of a sample: a sampler asked it four times per thread (two
/// `readlink`s for the thread's name, two for its state), a tenth of its time at 64 threads.
pub(super) fn in_our_pid_namespace(pid: u32) -> bool {
    static OURS: OnceLock<Option<PathBuf>> = OnceLock::new();
    static LAST: Mutex<Option<(u32, Instant, bool)>> = Mutex::new(None);
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/pid")).ok();
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((p, at, answer)) = *last {
        if p == pid && at.elapsed() < NAMESPACE_ANSWER_TTL {
            return answer;
        }
    }
    let ours = OURS.get_or_init(|| ns("self"));
    let answer = matches!((ours, ns(&pid.to_string())), (Some(a), Some(b)) if *a == b);
    *last = Some((pid, Instant::now(), answer));
    answer
}

/// How long an answer of [`in_our_pid_namespace`] holds: well within one sample, far less
/// than a pid takes to be reused.
const NAMESPACE_ANSWER_TTL: Duration = Duration::from_millis(50);

/// The /proc directory of `tid`: `/proc/PID/task/TID` when that thread's innermost id is
/// `tid` (the same pid namespace), else the task whose innermost id it is.
fn task_dir(pid: u32, tid: u64) -> Option<String> {
    let direct = format!("/proc/{pid}/task/{tid}");
    if in_our_pid_namespace(pid) || innermost_id(&direct) == Some(tid) {
        return Some(direct);
    }
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .take(MAX_TASKS_SCANNED)
        .filter_map(|e| Some(e.ok()?.path().to_str()?.to_string()))
        .find(|dir| innermost_id(dir) == Some(tid))
}

/// A task's id in its innermost pid namespace: the last field of `NSpid` in its `status`
/// (Linux 4.1+), else `Pid` (/proc's own namespace).
pub(super) fn innermost_id(dir: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("{dir}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().last()?.parse().ok())
    };
    field("NSpid:").or_else(|| field("Pid:"))
}

pub fn parse_proc_syscall(text: &str) -> Option<ProcSyscall> {
    let mut words = text.split_whitespace();
    let first = words.next()?;
    if first == "running" {
        return Some(ProcSyscall::Running);
    }
    let nr: i64 = first.parse().ok()?;
    if nr < 0 {
        return Some(ProcSyscall::Outside);
    }
    let mut args = [0u64; 6];
    for a in &mut args {
        *a = u64::from_str_radix(words.next()?.strip_prefix("0x")?, 16).ok()?;
    }
    Some(ProcSyscall::In {
        nr: nr as u64,
        args,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_syscall_lines() {
        assert_eq!(
            parse_proc_syscall(
                "202 0x561dad981600 0x189 0x0 0x0 0x0 0xffffffff 0x7ffd4a80 0x7f3f16\n"
            ),
            Some(ProcSyscall::In {
                nr: 202,
                args: [0x561dad981600, 0x189, 0, 0, 0, 0xffffffff]
            })
        );
        assert_eq!(
            parse_proc_syscall("-1 0x7ffd4a80 0x7f3f16\n"),
            Some(ProcSyscall::Outside)
        );
        assert_eq!(parse_proc_syscall("running\n"), Some(ProcSyscall::Running));
        for bad in ["", "x", "0 0x1", "7 1 2 3 4 5 6", "0 0xzz 0 0 0 0 0"] {
            assert_eq!(parse_proc_syscall(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn context_switches() {
        let status = "Name:\tpython3\nState:\tS (sleeping)\nvoluntary_ctxt_switches:\t120\n\
                      nonvoluntary_ctxt_switches:\t7\n";
        assert_eq!(parse_context_switches(status), Some(127));
        assert_eq!(
            parse_context_switches("voluntary_ctxt_switches:\t1\n"),
            None
        );
        assert_eq!(parse_context_switches(""), None);
    }

    #[test]
    fn stat_cpu_ticks() {
        // A real line (Linux 6.1), the command holding a space and a parenthesis.
        let line = "812 (spin (x) y) R 1 812 1 0 -1 4194304 120 0 0 0 297 3 0 0 20 0 3 0 \
                    4242 1 2 3\n";
        assert_eq!(parse_stat_cpu_ticks(line), Some(300));
        for bad in [
            "",
            "812 (x) R 1 2",
            "812 (x) R 1 812 1 0 -1 4194304 120 0 0 0 a 3",
        ] {
            assert_eq!(parse_stat_cpu_ticks(bad), None, "{bad:?}");
        }
        // SAFETY: gettid takes no arguments and cannot fail.
        let tid = unsafe { libc::gettid() } as u64;
        assert!(proc_cpu_seconds(std::process::id(), tid).is_some());
    }

    #[test]
    fn own_thread_is_found() {
        // This thread, reading its own file: blocked in nothing, or the read itself.
        // SAFETY: gettid takes no arguments and cannot fail.
        let tid = unsafe { libc::gettid() } as u64;
        assert!(proc_syscall(std::process::id(), tid).is_some());
    }

    #[test]
    fn own_thread_name_is_read() {
        // A thread of this test process, named by the kernel call the target's threads use.
        let name = std::thread::Builder::new()
            .name("pyu-names-test".into())
            .spawn(|| {
                // SAFETY: gettid takes no arguments and cannot fail.
                let tid = unsafe { libc::gettid() } as u64;
                proc_comm(std::process::id(), tid)
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(name.as_deref(), Some("pyu-names-test"));
        assert_eq!(proc_comm(std::process::id(), u64::MAX), None);
    }

    #[test]
    fn proc_mem_reads_like_process_vm_readv() {
        // This process's own memory: a buffer's bytes; page 0 is mapped nowhere (EIO).
        let f = File::open("/proc/self/mem").unwrap();
        let data = [7u8, 1, 2, 3];
        let mut got = [0u8; 4];
        assert_eq!(read_at(&f, data.as_ptr() as u64, &mut got), Ok(4));
        assert_eq!(got, data);
        assert_eq!(read_at(&f, 0, &mut got), Err(EIO));
    }
}
