//! One stop of one target: its facts (the target, the snapshot, the decoded threads, the
//! crash a core records) and the caches that die with the stop. What the frontends ask of a
//! stop is a module over it, each owning its view and its rendering:
//!
//! - [`report`]: the threads' report (`py-bt -a`, `pid`/`core`);
//! - [`asyncio`]: tasks, loops and await cycles (`--async`, `py-bt-async`, `py-tasks`);
//! - [`greenlets`]: `--greenlets`, `py-greenlets`;
//! - [`heap`]: the census of `--heap`;
//! - [`py_bt`]: libpython's `py-bt` text over the debugger's native frames;
//! - [`native_stacks`]: `--native` and the splicing of Python frames into native stacks;
//! - [`real_frames`]: gdb's real-frames mode;
//! - [`jit`]: the JIT and trampoline code map;
//! - [`names`]: the operating system's name of each thread;
//! - [`crate::why`]: the verdicts, over the same facts.

pub mod asyncio;
pub mod greenlets;
pub mod jit;
pub mod names;
pub mod native_stacks;
pub mod py_bt;
pub mod real_frames;
pub mod report;

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, OnceLock};

use crate::asyncio::AsyncView;
use crate::cpython::interpreters::{nest, InterpreterInfo, Nested, StateWalk, Threading};
use crate::cpython::{
    find_python, find_python_again, Found, FrameItem, FrameWalk, PyFrame, Remembered, Snapshot,
    ThreadInfo,
};
use crate::error::{Error, ReadError, Result};
use crate::greenlet::GreenletView;
use crate::memory::{crash, region_holding};
use crate::model::{Crash, ErrorReport, LocalReport, Report};
use crate::native::jit::JitMap;
use crate::native::pthread;
use crate::target::{SourceKind, Target};

/// Reads of a live thread's stack, the first included, when they tear: three make a torn
/// stack rare (a generator that yields while read tears 10% of single reads on 3.12, 70% on
/// 3.13t).
const LIVE_READ_TRIES: u32 = 3;

/// Set to 1: a live thread's stack is read once, torn or not (tests of a single read).
pub const READ_ONCE_ENV: &str = "PYUNWIND_TEST_READ_ONCE";
use crate::unwind::ModuleSet;

/// One OS thread with a Python thread state: its stack across the interpreters it entered
/// ([`crate::cpython::interpreters`]).
pub struct DecodedThread {
    /// The thread state the thread runs in now: its interpreter is the thread's.
    pub info: ThreadInfo,
    /// Its Python frames, innermost first: `info`'s, then those of each thread state of
    /// `entered_from`.
    pub walk: FrameWalk,
    /// The thread states of the interpreters it entered `info`'s from, innermost first, each
    /// with the index in `walk.items` of its first frame.
    pub entered_from: Vec<(usize, ThreadInfo)>,
    /// Its thread states that hold no frame of its stack (an interpreter it entered and
    /// left).
    pub idle_states: Vec<ThreadInfo>,
}

impl DecodedThread {
    /// A thread in one interpreter.
    pub fn alone(info: ThreadInfo, walk: FrameWalk) -> DecodedThread {
        DecodedThread {
            info,
            walk,
            entered_from: Vec::new(),
            idle_states: Vec::new(),
        }
    }

    /// The thread state that runs frame `index` of `walk`.
    pub fn state_of(&self, index: usize) -> &ThreadInfo {
        self.segment_of(index).1
    }

    /// The thread state that runs frame `index` of `walk`, and the index of its first frame.
    pub fn segment_of(&self, index: usize) -> (usize, &ThreadInfo) {
        self.entered_from
            .iter()
            .rev()
            .find(|(start, _)| *start <= index)
            .map_or((0, &self.info), |(start, i)| (*start, i))
    }

    /// The interpreter whose GIL the thread, blocked in `futex` on `word`, waits for: one of
    /// the interpreters it has a thread state in (the one it runs in, those it entered that
    /// one from, one it is entering: its thread state there has no frame yet), whose GIL that
    /// thread state does not hold and whose GIL's futex words hold `word`.
    pub fn gil_waited(&self, snap: &Snapshot, word: u64) -> Option<u64> {
        self.states()
            .find(|i| snap.waits_for_gil(i.interp, i.holds_gil, word))
            .map(|i| i.interp)
    }

    /// Every thread state of the thread: the stack's, innermost first, then the idle ones.
    pub fn states(&self) -> impl Iterator<Item = &ThreadInfo> {
        std::iter::once(&self.info)
            .chain(self.entered_from.iter().map(|(_, i)| i))
            .chain(self.idle_states.iter())
    }
}

/// What a stop's threads decode to: the threads, the interpreters, the errors met.
#[derive(Default)]
pub struct Decoded {
    pub threads: Vec<DecodedThread>,
    /// Every interpreter, the main one first, then by age.
    pub interpreters: Vec<InterpreterInfo>,
    pub errors: Vec<ReadError>,
}

/// Which threads a report covers.
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadKey {
    /// The LWP, as the debugger knows it.
    pub lwp: Option<u64>,
    /// The thread pointer (`$fs_base`), which equals `pthread_self()`.
    pub thread_pointer: Option<u64>,
}

pub struct Session {
    pub target: Target,
    pub snap: Snapshot,
    decoded: OnceLock<Decoded>,
    /// The asyncio report, built once per stop (`py-bt-async` then `py-tasks` reuse it).
    pub(crate) async_report: OnceLock<Report>,
    /// The asyncio tasks as decoded, under `async_report` and `--why`'s task waits.
    pub(crate) async_view: OnceLock<AsyncView>,
    /// The greenlets, decoded once per stop.
    pub(crate) greenlet_view: OnceLock<GreenletView>,
    /// (lwp, thread pointer) pairs the frontend or core knows, to name threads on 3.10.
    thread_ids: Vec<(u64, u64)>,
    /// JIT and trampoline code of this stop, built on first use.
    pub(crate) jit: OnceLock<JitMap>,
    /// What discovery found that later stops of the target can start from (see
    /// [`Session::reopen`]); its `_PyJIT_Entry` is the JIT map's entry shim.
    pub(crate) remembered: Remembered,
    /// The target's modules with their CFI and symbols, loaded on first use: for our own
    /// native unwinds and gdb's real frames (see [`Session::with_modules`]).
    modules: Mutex<Option<ModuleSet>>,
    /// The fatal signal a core records, and what was wrong with its notes.
    pub(crate) crash: (Option<Crash>, Vec<ErrorReport>),
    /// Each thread's system call as its registers showed it while it was stopped: the
    /// debugger's (memory read through the debugger has no notes or /proc to say), or the
    /// stop of `pid --native` (/proc, read after it, can find a thread that our interrupt
    /// woke from its call and that has not gone back into it yet, on a busy machine for
    /// milliseconds): (lwp, the values of `Arch::syscall_register_names`).
    stopped_syscalls: OnceLock<Vec<(u64, Vec<u64>)>>,
    /// Each thread's name as the debugger shows it, by LWP ([`names`]).
    debugger_names: OnceLock<HashMap<u64, String>>,
    /// A live local target's `/proc/PID/net/{tcp,tcp6,udp,udp6,unix}` (in
    /// [`crate::memory::proc_fds::TABLES`]' order), each read at most once per stop, when a
    /// wait on a socket first needs it ([`crate::why::resources`]): reading `tcp` walks the
    /// kernel's whole established-connections hash, milliseconds on a large machine.
    pub(crate) net_tables: [OnceLock<crate::memory::proc_fds::NetTables>; 5],
    /// Which processes of this machine hold each socket (`/proc/*/fd`), scanned at most once
    /// per stop, when a socket wait's peer is first found to be on this host
    /// ([`crate::why::resources`]).
    pub(crate) socket_holders: OnceLock<crate::memory::socket_holders::SocketHolders>,
    /// The listening unix sockets of this machine's network namespace and the connections in
    /// their queues, dumped at most once per stop, when a unix socket wait's other end is
    /// first found not accepted yet ([`crate::why::resources`]).
    pub(crate) unix_listeners: OnceLock<crate::memory::unix_diag::UnixListeners>,
    /// `record` without `--idle`: the threads (by LWP) whose frames are walked; the others
    /// are listed with none. None: every thread's.
    walk_only: Option<HashSet<u64>>,
}

impl Session {
    pub fn open(target: Target) -> Result<Session> {
        let found = find_python(&target)?;
        Ok(Session::with_found(target, &found))
    }

    /// The session of a later stop of a target an earlier session found CPython in
    /// ([`Session::remembered`]): no ELF symbols are read again.
    pub fn reopen(target: Target, earlier: &Remembered) -> Result<Session> {
        let found = find_python_again(&target, earlier)?;
        Ok(Session::with_found(target, &found))
    }

    fn with_found(target: Target, found: &Found) -> Session {
        let snap = Snapshot::new(target.mem.clone(), found);
        let thread_ids = target
            .core_threads
            .iter()
            .map(|t| (t.lwp as u64, t.thread_pointer))
            .collect();
        let crash = target
            .signal_notes
            .as_ref()
            .map(crash::crash)
            .unwrap_or_default();
        Session {
            target,
            snap,
            decoded: OnceLock::new(),
            async_report: OnceLock::new(),
            async_view: OnceLock::new(),
            greenlet_view: OnceLock::new(),
            thread_ids,
            jit: OnceLock::new(),
            remembered: found.remembered(),
            modules: Mutex::new(None),
            crash,
            stopped_syscalls: OnceLock::new(),
            debugger_names: OnceLock::new(),
            net_tables: Default::default(),
            socket_holders: OnceLock::new(),
            unix_listeners: OnceLock::new(),
            walk_only: None,
        }
    }

    /// Walks only the frames of the threads (by LWP) in `lwps`, listing the others with no
    /// frames (a thread whose LWP is unknown is walked): `record` without `--idle`, whose
    /// sample holds only the threads on a CPU. Before the first report of this stop.
    pub fn walk_only(&mut self, lwps: HashSet<u64>) {
        self.walk_only = Some(lwps);
    }

    /// The threads [`Session::walk_only`] named, if it was called.
    pub fn walked_only(&self) -> Option<&HashSet<u64>> {
        self.walk_only.as_ref()
    }

    /// Whether the frames of the thread whose LWP is `lwp` are walked ([`Session::walk_only`]).
    fn walks(&self, lwp: Option<u64>) -> bool {
        match (&self.walk_only, lwp) {
            (Some(only), Some(lwp)) => only.contains(&lwp),
            _ => true,
        }
    }

    /// How many times a thread's stack may be read when a read tears
    /// ([`crate::cpython::Snapshot::walk_thread`]): a live process runs on while it is read;
    /// a core, or a process the debugger stopped, is read once. `PYUNWIND_TEST_READ_ONCE=1`
    /// reads once everywhere: the tests' view of a single read.
    fn read_tries(&self) -> u32 {
        static ONCE: OnceLock<bool> = OnceLock::new();
        let once = *ONCE.get_or_init(|| std::env::var_os(READ_ONCE_ENV).is_some_and(|v| v == "1"));
        if self.target.kind == SourceKind::Live && !once {
            LIVE_READ_TRIES
        } else {
            1
        }
    }

    /// What a frontend keeps for the next stop of this target ([`Session::reopen`]).
    pub fn remembered(&self) -> Remembered {
        self.remembered.clone()
    }

    /// The registers of each thread's system call as a stop showed them (the debugger's, or
    /// `pid --native`'s), `(lwp, values)` with the values of `Arch::syscall_register_names`;
    /// the first call of a stop sets them.
    pub fn set_stopped_syscalls(&self, calls: Vec<(u64, Vec<u64>)>) {
        let _ = self.stopped_syscalls.set(calls);
    }

    /// What the stop's registers say of thread `lwp`'s system call (see
    /// `set_stopped_syscalls`).
    pub fn stopped_syscall(&self, lwp: u64) -> Option<&[u64]> {
        self.stopped_syscalls
            .get()?
            .iter()
            .find(|c| c.0 == lwp)
            .map(|c| &c.1[..])
    }

    /// The debugger's name of each thread, `(lwp, name)` (gdb's `InferiorThread.name`, lldb's
    /// `SBThread.GetName()`); the first call of a stop sets them, before the first report
    /// that shows them. Empty names are no names.
    pub fn set_debugger_thread_names(&self, names: Vec<(u64, String)>) {
        let _ = self
            .debugger_names
            .set(names.into_iter().filter(|(_, n)| !n.is_empty()).collect());
    }

    /// Whether the frontend has given the debugger's thread names for this stop.
    pub fn has_debugger_thread_names(&self) -> bool {
        self.debugger_names.get().is_some()
    }

    /// The debugger's name of thread `lwp` (see `set_debugger_thread_names`).
    pub fn debugger_thread_name(&self, lwp: u64) -> Option<&str> {
        self.debugger_names.get()?.get(&lwp).map(String::as_str)
    }

    /// Tell the session which LWP has which thread pointer (gdb knows; the core says).
    pub fn set_thread_ids(&mut self, ids: Vec<(u64, u64)>) {
        self.thread_ids = ids;
        self.decoded = OnceLock::new();
        self.async_report = OnceLock::new();
        self.async_view = OnceLock::new();
        self.greenlet_view = OnceLock::new();
    }

    pub(crate) fn decoded(&self) -> &Decoded {
        once(&self.decoded, || {
            let mut errors = Vec::new();
            let mut states = Vec::new();
            let interps = match self.snap.interpreters_noting_cap(&mut errors) {
                Ok(i) => i,
                Err(e) => {
                    errors.push(e);
                    Vec::new()
                }
            };
            // 3.10 records no LWP: glibc's pthread struct has it (when the frontend or the
            // core did not say).
            let tid_offset = OnceLock::new();
            // CPython links interpreters newest first; show the main one first.
            let interpreters: Vec<InterpreterInfo> = interps
                .iter()
                .rev()
                .map(|i| self.snap.interpreter_info(*i, &mut errors))
                .collect();
            for interp in interps.iter().rev() {
                // Threads are linked newest first too: main thread first, then by age.
                let mut threads = self
                    .snap
                    .threads_walking(*interp, &mut errors, &|lwp| self.walks(lwp));
                threads.reverse();
                for mut info in threads {
                    if info.native_id.is_none() {
                        info.native_id = self
                            .thread_ids
                            .iter()
                            .find(|(_, tp)| *tp == info.thread_id)
                            .map(|(l, _)| *l);
                    }
                    if info.native_id.is_none() {
                        info.native_id = tid_offset
                            .get_or_init(|| pthread::tid_offset(&self.target))
                            .and_then(|off| pthread::lwp(&*self.snap.mem, info.thread_id, off));
                    }
                    let walk = match info.frame_error {
                        // The thread state is readable but not the way to its frames (a
                        // `_PyCFrame` on a stack page the core lost): list it, unreadable.
                        Some(error) => {
                            let mut walk = FrameWalk::default();
                            walk.stop(error.addr, error);
                            walk
                        }
                        None if self.walks(info.native_id) => {
                            self.snap
                                .walk_thread(info.addr, info.frame, self.read_tries())
                        }
                        None => FrameWalk::default(),
                    };
                    states.push(StateWalk { info, walk });
                }
            }
            // A thread that entered other interpreters is one thread, with one stack.
            let snap = &self.snap;
            let regions = &self.target.regions;
            let how = Threading {
                current: |i: &ThreadInfo| {
                    (snap.thread_attached(i.addr) == Some(true) || i.holds_gil == Some(true))
                        .then_some(true)
                },
                region_of: |addr| region_holding(regions, addr).map(|r| r.0),
                borrowed: snap
                    .layout
                    .interpreter_state
                    .exec_borrows_first_thread_state,
            };
            let mut out: Vec<DecodedThread> = nest(states, how).into_iter().map(joined).collect();
            // The thread that crashed is the one to read first.
            let crashed = self.crash().map(|c| c.thread);
            if let Some(i) = out
                .iter()
                .position(|t| crashed.is_some() && t.info.native_id == crashed)
            {
                out[..=i].rotate_right(1);
            }
            Decoded {
                threads: out,
                interpreters,
                errors,
            }
        })
    }

    /// Every interpreter, the main one first, then by age.
    pub fn interpreters(&self) -> &[InterpreterInfo] {
        &self.decoded().interpreters
    }

    /// The Python threads: the one that crashed first, then the main interpreter's, main
    /// thread first, then by age.
    pub fn threads(&self) -> &[DecodedThread] {
        &self.decoded().threads
    }

    /// The fatal signal, when the target is a core written for one ([`crate::memory::crash`]).
    pub fn crash(&self) -> Option<&Crash> {
        self.crash.0.as_ref()
    }

    /// The thread with this LWP or thread pointer.
    pub fn find_thread(&self, key: ThreadKey) -> Option<&DecodedThread> {
        self.threads().iter().find(|t| {
            (key.lwp.is_some() && t.info.native_id == key.lwp)
                || (key.thread_pointer.is_some() && Some(t.info.thread_id) == key.thread_pointer)
        })
    }

    /// The thread for `key`, or a usage error that says which threads exist.
    pub fn thread(&self, key: ThreadKey) -> Result<&DecodedThread> {
        self.find_thread(key).ok_or_else(|| {
            Error::Usage(match key.lwp {
                Some(l) => format!("thread {l} has no Python thread state"),
                None => "no such Python thread".to_string(),
            })
        })
    }

    /// Frame `index` of the thread's walk (as in the report), if it is a readable Python frame.
    pub fn frame_at<'a>(&self, t: &'a DecodedThread, index: usize) -> Result<&'a PyFrame> {
        match t.walk.items.get(index) {
            Some(FrameItem::Python(p)) => Ok(p),
            Some(FrameItem::Unreadable { error, .. }) => Err(Error::Usage(format!(
                "frame #{index} is unreadable: {error}"
            ))),
            None => Err(Error::Usage(format!("no Python frame #{index}"))),
        }
    }

    pub fn locals(&self, frame: &PyFrame) -> Result<Vec<LocalReport>, ReadError> {
        Ok(self
            .snap
            .frame_locals(frame)?
            .into_iter()
            .map(|l| LocalReport {
                name: l.name,
                repr: l.repr,
                is_arg: l.is_arg,
            })
            .collect())
    }

    /// `f` with the target's modules. DWARF's line tables (addr2line) are not `Sync`, so one
    /// caller at a time has the cached set; the lock is never waited for, since a debugger's
    /// memory reads call into Python, which may run another thread asking for the same (see
    /// `once`): a second caller builds its own set.
    pub(crate) fn with_modules<T>(&self, f: impl FnOnce(&ModuleSet) -> T) -> T {
        let mut guard = self.modules.try_lock().ok();
        match guard.as_deref_mut() {
            Some(cached) => f(cached.get_or_insert_with(|| ModuleSet::new(&self.target))),
            None => f(&ModuleSet::new(&self.target)),
        }
    }

    /// The modules this stop loaded, for the next stop of the same process
    /// ([`Session::adopt_modules`]): `record --native` then reads each module's unwind
    /// tables and DWARF once, not at every sample (inflating compressed DWARF was two thirds
    /// of a sample's time).
    pub fn take_modules(&self) -> Option<ModuleSet> {
        self.modules.try_lock().ok()?.take()
    }

    /// Uses `earlier` (an earlier stop's [`Session::take_modules`]) as this stop's modules when
    /// the target maps the same files at the same addresses; else they are loaded again.
    pub fn adopt_modules(&self, earlier: ModuleSet) {
        if earlier.modules != ModuleSet::modules_of(&self.target) {
            return;
        }
        if let Ok(mut m) = self.modules.try_lock() {
            m.get_or_insert(earlier);
        }
    }

    /// The address ranges of the interpreter's own code: the module holding `_PyRuntime`
    /// (libpython, or the executable) and the executable.
    pub fn interpreter_ranges(&self) -> Vec<(u64, u64)> {
        let modules = self.target.modules();
        let exe = self.target.mappings.first().map(|m| m.start);
        modules
            .iter()
            .filter(|m| m.contains(self.snap.runtime) || exe.is_some_and(|a| m.contains(a)))
            .map(|m| (m.start, m.end))
            .collect()
    }

    /// For each PC, whether it is in the interpreter's own code.
    pub fn in_interpreter(&self, pcs: &[u64]) -> Vec<bool> {
        let ranges = self.interpreter_ranges();
        pcs.iter()
            .map(|&pc| ranges.iter().any(|&(s, e)| s <= pc && pc < e))
            .collect()
    }
}

/// One thread from its thread states: the current one's frames, then those of each it entered
/// that one from. Its `threading` name is the outermost one's that has one (the interpreter
/// that started the thread names it; one it entered may only know it as `Dummy-N`).
fn joined(n: Nested) -> DecodedThread {
    let name = n.stack.iter().rev().find_map(|s| s.info.name.clone());
    // The thread is the one its outermost thread state names (3.12's `run_string` borrows a
    // thread state bound to another thread).
    let home = n.stack.last().map(|s| (s.info.thread_id, s.info.native_id));
    let mut stack = n.stack.into_iter();
    let first = stack.next().expect("a nested thread has a thread state");
    let mut t = DecodedThread::alone(first.info, first.walk);
    for s in stack {
        t.entered_from.push((t.walk.items.len(), s.info));
        t.walk.items.extend(s.walk.items);
        t.walk.truncated |= s.walk.truncated;
        t.walk.cut = t.walk.cut.or(s.walk.cut);
    }
    t.info.name = name;
    if let Some((thread_id, native_id)) = home {
        t.info.thread_id = thread_id;
        t.info.native_id = native_id;
    }
    t.idle_states = n.idle;
    t
}

/// The value of `cell`, made by `make` if it has none yet. `make` runs outside the cell's
/// lock: with the debugger's memory every read calls into Python, which can switch to another
/// Python thread that asks for the same value; blocking in `OnceLock::get_or_init` there would
/// hold the GIL while the thread that runs `make` waits for it. Two threads may then both
/// decode; the first value stored wins.
pub(crate) fn once<T>(cell: &OnceLock<T>, make: impl FnOnce() -> T) -> &T {
    if let Some(v) = cell.get() {
        return v;
    }
    let v = make();
    cell.get_or_init(|| v)
}
