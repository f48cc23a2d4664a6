//! The report model (`docs/report.md`, `docs/report.schema.json`): the plain serde structs
//! every layer fills and every frontend prints. It names no other layer of the crate: a
//! decoder fills the model, the model never asks a decoder. Their text, and the grouping of
//! many reports, are [`crate::report`]'s.

mod error_report;
mod heap;
mod held_by;
mod json_names;
pub mod number_text;
mod source_kind;
pub mod task_list_json;
#[cfg(test)]
mod test_words;
mod thread_state;
mod wait_kind;
mod why_kinds;

pub use error_report::ErrorReport;
pub use heap::{
    HeapCount, HeapObject, HeapProcess, HeapReport, HeapType, HeapUnreached, SizeSource,
};
pub use held_by::{HeapRetainer, HeldStep};
pub use source_kind::SourceKind;
pub use thread_state::{IdleKind, StateWord};
pub use wait_kind::WaitKind;
pub use why_kinds::{DeadlockKind, HoldKind, LoopState, TaskClass, TaskIdle};

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// A fatal signal, as the report's `crash` object (made by [`crate::memory::crash`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Crash {
    /// "SIGSEGV"; null for a number without a fixed name (a real-time signal).
    pub signal: Option<&'static str>,
    pub signo: u32,
    /// The `si_code` name ("SEGV_MAPERR", "SI_TKILL"), else its number as a string; null
    /// when the core has no usable NT_SIGINFO (kernels before 3.7 wrote none).
    pub code: Option<String>,
    /// The fault address (`si_addr`) of a SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGTRAP the
    /// kernel raised for a fault; null otherwise.
    pub address: Option<u64>,
    /// The LWP of the thread that took the signal.
    pub thread: u64,
    /// For a signal a process sent (kill, tgkill: `si_code` <= 0): `si_pid`, as the crashing
    /// process's pid namespace sees the sender (0 when the sender is outside it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender_pid: Option<i32>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub python: PythonReport,
    /// The fatal signal of a core written for one; left out when the stop is not a crash
    /// (a live process, a gcore snapshot, the debugger's memory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crash: Option<Crash>,
    /// Threads, the crashing one first.
    pub threads: Vec<ThreadReport>,
    /// Every interpreter of the process (the main one and subinterpreters), the main one
    /// first, then by age; one no thread runs in is listed here only.
    pub interpreters: Vec<InterpreterReport>,
    /// asyncio tasks (when asked for): every pending task, placed and linked.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "task_list_json::tasks"
    )]
    pub tasks: Option<Vec<TaskReport>>,
    /// Await cycles (deadlocks), each as task ids in await order, each once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cycles: Option<Vec<Vec<u64>>>,
    /// The event loops the tasks belong to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loops: Option<Vec<LoopReport>>,
    /// greenlets (when asked for): every greenlet, by thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub greenlets: Option<Vec<GreenletReport>>,
    /// `pid --native`: how long each thread was stopped to read its registers and stack.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub native_stops: Option<Vec<StopReport>>,
    /// `--why`: the cycles of the wait-for graph (threads waiting on each other's locks) and
    /// asyncio's await cycles, each once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadlocks: Option<Vec<Deadlock>>,
    /// `--why` where asyncio's tasks were read (3.11+): every waiting task, grouped by what
    /// it waits on and where ([`crate::why::task_groups`]), with or without `--tasks`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_waits: Option<Vec<TaskGroup>>,
    /// `--heap`: the objects by type, the largest ones, and what the walk did not reach.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heap: Option<HeapReport>,
    pub errors: Vec<ErrorReport>,
}

/// A report as the command line prints it: with the host name of the machine that read the
/// target (so that reports saved on many machines can be merged) and, when several targets
/// are read in one run, the process id (also for a target that could not be read).
#[derive(Serialize)]
pub struct Hosted<'a> {
    pub host: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(flatten)]
    pub report: &'a Report,
}

/// The name of the machine pyunwind runs on (its UTS namespace's, as `hostname` prints it).
/// Each frame's interpreter: its own `interpreter_id`, or for a frame without one (native,
/// JIT) that of the Python frame it belongs with, the next older one, which calls it (the C
/// code that crossed into a subinterpreter is its caller's); frames older than every frame
/// with one (the thread's start), the oldest one's. All None where no frame has one.
pub fn frame_interpreters(frames: &[FrameReport]) -> Vec<Option<u32>> {
    let mut out = vec![None; frames.len()];
    let mut next = frames.iter().rev().find_map(|f| f.interpreter_id);
    for (k, f) in frames.iter().enumerate().rev() {
        next = f.interpreter_id.or(next);
        out[k] = next;
    }
    out
}

pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into the buffer it is given.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        let name = String::from_utf8_lossy(&buf[..end]).into_owned();
        if !name.is_empty() {
            return name;
        }
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// `--why`, per thread: what it is doing and waiting on, and what it holds, as far as memory
/// (and a core's registers, or /proc live) shows it ([`crate::why`]).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ThreadWhy {
    /// One word, null when nothing shows it.
    pub state: Option<StateWord>,
    /// What kind of idle thread it is, for `idle` and `loop_idle`; null otherwise.
    pub idle: Option<IdleKind>,
    /// The system call the thread is blocked in (`futex`, `read`, `epoll_wait`, ...).
    pub syscall: Option<String>,
    /// The Python-level wait the thread is blocked in.
    pub waiting: Option<Waiting>,
    /// The locks the thread holds that memory shows.
    pub holding: Vec<Holding>,
    /// `pid --why --for`: what the thread did over the window ([`crate::sample`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
}

/// A thread watched over a window (`pid --why --for`, docs/report.md, "Progress over a
/// window"): how often it was read, how much CPU it had, whether its Python stack moved.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Progress {
    /// Seconds from the first sample that saw the thread to the last.
    pub window_s: f64,
    /// Samples that read the thread's stack whole (torn ones left out).
    pub samples: u64,
    /// Samples of the thread left out because the walk met a frame it could not read: the
    /// thread moved under the read.
    pub torn: u64,
    /// CPU time the thread had over `window_s` (user and system, /proc's clock ticks); null
    /// where /proc could not say.
    pub cpu_s: Option<f64>,
    /// Seconds of `window_s` it was runnable but waited for a CPU other threads had
    /// (/proc's `schedstat`); null where the kernel does not say.
    pub waited_s: Option<f64>,
    /// `cpu_s` over the time a CPU was free for it (`window_s` less `waited_s`), at most 1:
    /// the share the spinning and busy rules read; null without CPU times.
    pub cpu_share: Option<f64>,
    /// Whether its Python frames (function, file and line of each) ever changed.
    pub moved: bool,
    /// How many distinct Python stacks the samples saw (a lower bound past
    /// `sample::progress::MAX_STACKS`).
    pub stacks: u64,
}

/// A thread (an asyncio task, a gevent greenlet) blocked in a Python-level wait.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Waiting {
    /// A thread's `lock`, `rlock`, `condition`, `event`, `semaphore`, `barrier`,
    /// `queue_get`, `queue_put`, `simple_queue_get`, `join`, `future`, `gil`, `sleep`; a
    /// task's `asyncio_lock` ... `asyncio_queue_put`, `executor`, `sleep`, `future`; a
    /// greenlet's gevent waits (`async_result` among them); on the outside world (with
    /// [`WaitsOn`]'s fields): `socket`, `pipe`, `file`, `fd`, `child`, `native`
    /// ([`WaitKind`]).
    pub kind: WaitKind,
    /// The object the program waits on, the one it wrote (the Queue, not its Condition).
    pub object: Option<u64>,
    /// Its type's name (`Lock`, `RLock`, `Queue`, `Thread`, ...).
    #[serde(rename = "type")]
    pub type_name: Option<String>,
    /// The native id of the thread that holds it (a task's: the id of the task that holds
    /// it); null where memory cannot show it.
    pub owner: Option<u64>,
    /// The index in the thread's (task's) `frames` of the Python frame that waits.
    pub frame: usize,
    /// What of the outside world it waits on (kinds `socket`, `pipe`, `file`, `fd`, `child`,
    /// `native`): its fields, beside the others.
    #[serde(flatten)]
    pub on: Option<WaitsOn>,
}

/// Which way a wait on a socket or a descriptor goes: a socket's `recv`, `send`, `connect`,
/// `accept`; a pipe's, file's or other descriptor's `read`, `write`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Recv,
    Send,
    Connect,
    Accept,
    Read,
    Write,
}

impl Direction {
    /// Its name, in the JSON and in the text.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Recv => "recv",
            Direction::Send => "send",
            Direction::Connect => "connect",
            Direction::Accept => "accept",
            Direction::Read => "read",
            Direction::Write => "write",
        }
    }
}

/// The resource a wait on the outside world is on. Each field is null where the source
/// cannot show it (a core has no /proc: a socket's addresses, a child's command).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum WaitsOn {
    /// Kind `socket`.
    Socket {
        fd: Option<i64>,
        /// `recv`, `send`, `connect`, `accept`.
        direction: Option<Direction>,
        /// `"127.0.0.1:5432"`, `"[::1]:80"`; a unix socket's path (`"@name"` abstract).
        local: Option<String>,
        peer: Option<String>,
        /// Live, where the other end is a socket of a process of this machine (a loopback
        /// TCP connection, a unix socket): that process, the target itself included.
        peer_process: Option<PeerProcess>,
    },
    /// Kinds `pipe`, `file` and `fd` (a descriptor of a kind the source cannot show).
    Fd {
        fd: Option<i64>,
        /// `read`, `write`.
        direction: Option<Direction>,
        /// A file's path (live).
        path: Option<String>,
    },
    /// Kind `child`.
    Child {
        /// The child's pid; null for any child (`wait4(-1)`) or a process group.
        pid: Option<i64>,
        /// Its command line, space-joined (live, from /proc/PID/cmdline).
        command: Option<String>,
    },
    /// Kind `executor` (an asyncio task): the executor job that completes the future it awaits.
    Executor {
        /// The native id of the worker thread running the job.
        thread: Option<u64>,
        /// The job's function, by its qualified name.
        job: Option<String>,
    },
    /// Kind `sleep` of an asyncio task: `asyncio.sleep`'s timer.
    Sleep {
        /// Live: the timer's deadline minus this host's CLOCK_MONOTONIC; null from a core.
        remaining_s: Option<Millis>,
    },
    /// Kind `future` of an asyncio task.
    Future {
        /// Nothing but the task and its frames refers to the future, so nothing can complete
        /// it; false when something else holds it; null when memory cannot tell.
        orphan: Option<bool>,
    },
    /// Kind `native`: a system call under C code that no Python-level wait explains.
    Native {
        /// The C function the innermost Python frame is calling, as `py-bt` names it.
        function: Option<String>,
        /// With `--native`: the innermost native frame outside the C and C++ runtimes and
        /// the interpreter.
        native_function: Option<String>,
    },
}

/// The process at the other end of a socket (`ss -p`'s): the one whose fds hold the peer
/// socket's inode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PeerProcess {
    pub pid: u32,
    /// Its `/proc/PID/comm`: the executable's name (15 bytes at most) or what it set.
    pub command: String,
}

/// Seconds to the millisecond, kept in milliseconds so that reports compare exactly; a
/// number of seconds in the JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Millis(pub i64);

impl Millis {
    /// `s` seconds, rounded to the millisecond; None where it is no finite number.
    pub fn from_secs(s: f64) -> Option<Millis> {
        let ms = (s * 1000.0).round();
        (ms.is_finite() && ms.abs() < i64::MAX as f64).then_some(Millis(ms as i64))
    }

    pub fn secs(self) -> f64 {
        self.0 as f64 / 1000.0
    }
}

impl Serialize for Millis {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.secs())
    }
}

/// A lock a thread holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Holding {
    /// A thread's `lock`, `rlock`, `condition`; a task's `asyncio_lock`, `asyncio_condition`.
    pub kind: HoldKind,
    pub object: u64,
    #[serde(rename = "type")]
    pub type_name: Option<String>,
    /// An RLock's recursion count, where known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// The index in the thread's `frames` of the frame that took it (a `with` block's frame),
    /// null when memory shows the lock's owner but not where it was taken.
    pub frame: Option<usize>,
    /// The line of the `with` statement that took it (in that frame's file), where the
    /// code shows it.
    pub line: Option<u32>,
}

/// A cycle of waits: threads each waiting for a lock the next one holds (`kind` "locks";
/// `objects[i]` is what `threads[i]` waits for), asyncio tasks awaiting each other (`kind`
/// "await", `tasks`), or asyncio tasks waiting for each other's locks (`kind` "task_locks",
/// `tasks` and `objects`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Deadlock {
    pub kind: DeadlockKind,
    pub threads: Vec<u64>,
    pub objects: Vec<u64>,
    pub tasks: Vec<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct StopReport {
    pub native_id: u64,
    pub stopped_us: u64,
}

/// A greenlet's state: `running` (on its thread now), `suspended` (switched away from, its
/// frames saved), `not_started` (never switched to), `dead` (returned, or its thread ended).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GreenletState {
    Running,
    Suspended,
    NotStarted,
    Dead,
}

#[derive(Clone, Debug, Serialize)]
pub struct GreenletReport {
    /// The greenlet object's address.
    pub address: u64,
    /// The native id of the thread it belongs to; null once that thread has ended (or when
    /// it cannot be told: an error says so).
    pub thread: Option<u64>,
    pub state: GreenletState,
    /// The thread's main greenlet (it has no parent).
    pub main: bool,
    pub parent: Option<u64>,
    /// Its class (`greenlet.greenlet`, gevent's `Greenlet`, `Hub`, ...).
    #[serde(rename = "type")]
    pub type_name: String,
    /// gevent: `Greenlet.name`, when set.
    pub name: Option<String>,
    /// gevent: the qualified name of the function it was spawned with.
    pub function: Option<String>,
    /// Suspended: the stack it resumes in; running: its thread's. Innermost first.
    pub frames: Vec<FrameReport>,
    /// The frame walk stopped early (an error says where).
    pub truncated: bool,
    /// A suspended gevent greenlet: what it waits on, where its frames show it (`frame` is an
    /// index in `frames`).
    pub waiting: Option<Waiting>,
}

#[derive(Clone, Debug, Serialize)]
pub struct TaskReport {
    /// The task object's address.
    pub id: u64,
    pub name: String,
    /// "pending" (finished and cancelled tasks are not listed).
    pub state: &'static str,
    /// Its coroutine frame is on a thread's stack right now.
    pub on_cpu: bool,
    /// The thread of its loop (or the one it runs on).
    pub native_id: Option<u64>,
    /// The task's class (`_asyncio.Task`, `Task` for the pure-Python one, or a subclass).
    #[serde(rename = "type")]
    pub type_name: String,
    /// False for registered objects that are not `asyncio.Task`s: listed, not decoded.
    pub supported: bool,
    /// The event loop's address.
    #[serde(rename = "loop")]
    pub loop_: u64,
    /// On-CPU: its live frames; else its coroutine chain. Innermost first.
    pub frames: Vec<FrameReport>,
    pub awaiting: Option<AwaitingReport>,
    /// Tasks that await this one (fan-in keeps all).
    pub awaited_by: Vec<u64>,
    /// Tasks that own this one but are running, so do not await it (TaskGroup, gather).
    pub owned_by: Vec<u64>,
    /// `--why` only. Boxed: a report of 100,000 tasks without it takes half the memory (a
    /// `TaskWhy` is larger than the rest of the task).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub why: Option<Box<TaskWhy>>,
}

/// `--why`, per asyncio task: the asyncio primitive it waits on and the locks it holds
/// ([`crate::why::tasks`]). `waiting.owner` is a task's id here, `frame` an index in the
/// task's `frames`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TaskWhy {
    pub waiting: Option<Waiting>,
    pub holding: Vec<Holding>,
    /// What kind of idle task it is, by the task rows of the idle table
    /// ([`crate::why::task_groups`]); null for the others.
    pub idle: Option<TaskIdle>,
    /// The earliest `asyncio.timeout()` deadline its frames are inside; absent where none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<TaskTimeout>,
}

/// An `asyncio.timeout()` (`asyncio.wait_for`'s on 3.12+) around a task's wait
/// ([`crate::why::task_timeout`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TaskTimeout {
    /// The `asyncio.timeouts.Timeout`.
    pub object: u64,
    /// The index in the task's `frames` of the frame whose `async with` holds it.
    pub frame: usize,
    /// Live: its deadline minus this host's CLOCK_MONOTONIC (negative once passed); null
    /// from a core.
    pub remaining_s: Option<Millis>,
}

/// `--why`: tasks that wait alike, one line of the verdict (docs/report.md, "The verdict").
#[derive(Clone, Debug, Serialize)]
pub struct TaskGroup {
    /// The verdict's order.
    pub class: TaskClass,
    /// For `idle`: the idle kind (`TaskWhy.idle`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle: Option<TaskIdle>,
    /// The tasks' ids, in `tasks[]`' order.
    pub tasks: Vec<u64>,
    /// The first task's name.
    pub name: String,
    /// The first task's wait (its `frame` an index in that task's frames).
    pub waiting: Option<Waiting>,
    /// The first task's innermost application frame (outside the standard library and
    /// installed packages), else its innermost frame.
    pub function: Option<Arc<str>>,
    pub file: Option<Arc<str>>,
    pub line: Option<u32>,
    /// The first task's `asyncio.timeout()` (its frame an index in that task's frames);
    /// absent where it is inside none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<TaskTimeout>,
}

/// What a task awaits: another `task`, a `gather`, a `sleep`, a `future` (an executor
/// job's among them), or `other`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AwaitingKind {
    Future,
    Task,
    Gather,
    Sleep,
    Other,
}

impl AwaitingKind {
    /// Its name, in the JSON and in the text.
    pub fn as_str(self) -> &'static str {
        match self {
            AwaitingKind::Future => "future",
            AwaitingKind::Task => "task",
            AwaitingKind::Gather => "gather",
            AwaitingKind::Sleep => "sleep",
            AwaitingKind::Other => "other",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct AwaitingReport {
    pub kind: AwaitingKind,
    pub id: u64,
    #[serde(rename = "type")]
    pub type_name: String,
    /// For a future an executor job completes: the worker thread running the job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executor_native_id: Option<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct LoopReport {
    pub id: u64,
    #[serde(rename = "type")]
    pub type_name: String,
    /// The thread running it; null when no thread is inside it.
    pub native_id: Option<u64>,
    pub running: bool,
    /// The thread's frames from the loop outwards, innermost first.
    pub frames: Vec<FrameReport>,
    /// `--why` only.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub why: Option<LoopWhy>,
}

/// `--why`, per event loop ([`crate::why::loops`]): whether it is blocked, by what, and how
/// late its timers are.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LoopWhy {
    /// Null when the thread's state is unknown or no thread runs the loop.
    pub state: Option<LoopState>,
    /// For `blocked` and `busy`: what runs.
    pub blocked_by: Option<BlockedBy>,
    /// Live: CLOCK_MONOTONIC at the read minus the earliest timer's deadline (negative: not
    /// due yet); null from a core, with no timer, or where the timers are not read.
    pub overdue_s: Option<f64>,
    /// The handles in the ready queue; null where it is not read.
    pub ready: Option<u64>,
    /// The loop's pending tasks that are not running.
    pub tasks_waiting: u64,
}

/// What runs on a blocked or busy loop.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BlockedBy {
    /// The running task's id; null when a callback, not a task, runs.
    pub task: Option<u64>,
    /// The running task's name.
    pub task_name: Option<String>,
    /// The thread's innermost Python frame.
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// The C callable that blocks (`time.sleep`, `_socket.socket.recv`), named as native
    /// waits are; null when the loop runs Python code (`busy`) or no callable shows.
    pub call: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PythonReport {
    pub version: String,
    pub free_threaded: bool,
    pub jit: bool,
    /// How the interpreter and its layout were found.
    pub found_by: String,
    /// "live", "core" or "debugger".
    pub source: SourceKind,
    pub pid: Option<u32>,
}

/// One interpreter ([`crate::cpython::interpreters::InterpreterInfo`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InterpreterReport {
    /// Its id (`_interpreters.get_current()`'s): 0 for the main interpreter; null when
    /// unreadable.
    pub id: Option<u32>,
    /// Its `PyInterpreterState`.
    pub address: u64,
    /// How it was made, as `_interpreters.whence()` says (3.13+; null before, or unreadable).
    pub whence: Option<u8>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ThreadReport {
    pub native_id: Option<u64>,
    /// `PyThreadState.thread_id` (the `pthread_t`); a thread with no thread state
    /// (`--native-all`): its thread pointer where that is the `pthread_t` (x86-64), else null.
    pub thread_id: Option<u64>,
    /// The `threading` name.
    pub name: Option<String>,
    /// The operating system's name of the thread (live: /proc/PID/task/TID/comm; the
    /// debugger's thread name; a kernel's core: only its main thread's, NT_PRPSINFO's
    /// `pr_fname`).
    pub native_name: Option<String>,
    pub holds_gil: Option<bool>,
    /// Address of the thread's `PyInterpreterState`; null for a thread with no thread state.
    pub interpreter: Option<u64>,
    /// The id of the interpreter the thread runs in now (the one `interpreter` is); null for
    /// a thread with no thread state, or an id that is unreadable.
    pub interpreter_id: Option<u32>,
    /// Address of the `PyThreadState`; null for a thread with no thread state (listed by
    /// `--native-all`).
    pub thread_state: Option<u64>,
    pub frames: Vec<FrameReport>,
    /// The walk stopped before the thread's first frame (a cap, a cycle, an unreadable or
    /// impossible frame); `frames` holds the innermost part and its last entry says why.
    pub truncated: bool,
    /// `--why` only.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub why: Option<ThreadWhy>,
}

impl ThreadReport {
    /// What to call the thread: its `threading` name, else the system's.
    pub fn any_name(&self) -> Option<&str> {
        self.name.as_deref().or(self.native_name.as_deref())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FrameKind {
    Python,
    Native,
    Jit,
    Unreadable,
}

/// One frame of a report. What only some frames have sits in [`FrameDetail`], boxed: a
/// report of 100,000 Python frames then takes 72 bytes a frame instead of 152, which is most
/// of the time such a report takes (pages faulted in, copied, freed).
#[derive(Clone, Debug, Serialize)]
pub struct FrameReport {
    pub kind: FrameKind,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "json_names::name"
    )]
    pub function: Option<Arc<str>>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "json_names::name"
    )]
    pub file: Option<Arc<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<bool>,
    /// For Python frames: the interpreter frame's address; for native ones: the PC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<u64>,
    /// A thread's Python (and unreadable) frames: the id of the interpreter that runs it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interpreter_id: Option<u32>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Box<FrameDetail>>,
}

/// The fields of a [`FrameReport`] that most Python frames lack.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FrameDetail {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locals: Option<Vec<LocalReport>>,
    /// Native frames: the file name of the module holding the PC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// Native frames: the function's name as the symbol table or DWARF spells it (mangled),
    /// where `function` came from one (JSON only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// Native frames: the PC's address in the module's ELF image (PC minus load bias).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Native frames with DWARF: a function inlined at this PC into the next frame.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inlined: Option<bool>,
}

#[derive(Clone, Debug, Serialize)]
pub struct LocalReport {
    pub name: String,
    pub repr: String,
    pub is_arg: bool,
}

impl FrameReport {
    pub fn unreadable(addr: u64, reason: String) -> Self {
        FrameReport {
            kind: FrameKind::Unreadable,
            function: None,
            file: None,
            line: None,
            entry: None,
            address: Some(addr),
            interpreter_id: None,
            detail: Some(Box::new(FrameDetail {
                reason: Some(reason),
                ..FrameDetail::default()
            })),
        }
    }

    /// A native frame at `pc` (`function` None when no symbol names it).
    pub fn native(
        pc: u64,
        function: Option<String>,
        module: Option<String>,
        offset: Option<u64>,
    ) -> Self {
        FrameReport {
            kind: FrameKind::Native,
            function: function.map(Into::into),
            file: None,
            line: None,
            entry: None,
            address: Some(pc),
            interpreter_id: None,
            detail: Some(Box::new(FrameDetail {
                module,
                offset,
                ..FrameDetail::default()
            })),
        }
    }

    /// [`FrameReport::detail`], made when missing.
    pub fn detail_mut(&mut self) -> &mut FrameDetail {
        self.detail.get_or_insert_with(Box::default)
    }

    /// Why an unreadable frame could not be read.
    pub fn reason(&self) -> Option<&str> {
        self.detail.as_ref()?.reason.as_deref()
    }

    pub fn locals(&self) -> Option<&[LocalReport]> {
        self.detail.as_ref()?.locals.as_deref()
    }

    pub fn module(&self) -> Option<&str> {
        self.detail.as_ref()?.module.as_deref()
    }

    /// A native frame's function as its symbol table or DWARF spells it.
    pub fn symbol(&self) -> Option<&str> {
        self.detail.as_ref()?.symbol.as_deref()
    }

    pub fn offset(&self) -> Option<u64> {
        self.detail.as_ref()?.offset
    }

    pub fn inlined(&self) -> Option<bool> {
        self.detail.as_ref()?.inlined
    }
}

/// One line of a stack as libpython's `py-bt` and `py-up` see it: a Python frame, or a native
/// frame worth showing between them (the C function being called, waiting for the GIL,
/// collecting garbage).
#[derive(Clone, Debug, Serialize)]
pub struct StackEntry {
    /// `python` or `native`.
    pub kind: FrameKind,
    /// The Python frame's index in the thread's frame list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    /// The native frame (debugger level) it is shown at, when native frames were given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<usize>,
    /// What a native entry shows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}
