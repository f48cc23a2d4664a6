//! One stop of one target, as the frontends use it: threads and their Python frames decoded
//! once, reports and renderings on top.

use std::sync::{Mutex, OnceLock};

use crate::asyncio::{self, AsyncView, ThreadFrames};
use crate::cpython::callables::NativeFrame;
use crate::cpython::{
    find_python, find_python_again, Found, FrameItem, FrameWalk, PyFrame, Remembered, Snapshot,
    ThreadInfo,
};
use crate::error::{Error, ReadError, Result};
use crate::greenlet::{self, GThread, GreenletView, Stacks};
use crate::native::jit::{JitMap, Region, Regs, Unwound};
use crate::native::{pthread, splice, Splice};
use crate::report::tasks;
use crate::report::text::{self, Sources};
use crate::report::{
    AwaitingReport, Crash, ErrorReport, FrameDetail, FrameKind, FrameReport, GreenletReport,
    LocalReport, LoopReport, PythonReport, Report, StackEntry, TaskReport, ThreadReport,
};
use crate::target::{SourceKind, Target};
use crate::unwind::{self, ModuleSet};
use crate::why::crash;

pub struct DecodedThread {
    pub info: ThreadInfo,
    pub walk: FrameWalk,
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
    decoded: OnceLock<(Vec<DecodedThread>, Vec<ReadError>)>,
    /// The asyncio report, built once per stop (`py-bt-async` then `py-tasks` reuse it).
    async_report: OnceLock<Report>,
    /// The asyncio tasks as decoded, under `async_report` and `--why`'s task waits.
    async_view: OnceLock<AsyncView>,
    /// The greenlets, decoded once per stop.
    greenlet_view: OnceLock<GreenletView>,
    /// (lwp, thread pointer) pairs the frontend or core knows, to name threads on 3.10.
    thread_ids: Vec<(u64, u64)>,
    /// JIT and trampoline code of this stop, built on first use.
    jit: OnceLock<JitMap>,
    /// What discovery found that later stops of the target can start from (see
    /// [`Session::reopen`]); its `_PyJIT_Entry` is the JIT map's entry shim.
    remembered: Remembered,
    /// The target's modules with their CFI and symbols, loaded on first use: for our own
    /// native unwinds and gdb's real frames (see [`Session::with_modules`]).
    modules: Mutex<Option<ModuleSet>>,
    /// The fatal signal a core records, and what was wrong with its notes.
    crash: (Option<Crash>, Vec<String>),
    /// Each thread's system call as the debugger's registers show it (memory read through
    /// the debugger has no notes or /proc to say): (lwp, orig_rax, argument registers).
    debugger_syscalls: OnceLock<Vec<(u64, Vec<u64>)>>,
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
            debugger_syscalls: OnceLock::new(),
        }
    }

    /// What a frontend keeps for the next stop of this target ([`Session::reopen`]).
    pub fn remembered(&self) -> Remembered {
        self.remembered
    }

    /// The debugger's registers of each thread's system call, `(lwp, values)` with the values
    /// of `Arch::syscall_register_names`; the first call of a stop sets them.
    pub fn set_debugger_syscalls(&self, calls: Vec<(u64, Vec<u64>)>) {
        let _ = self.debugger_syscalls.set(calls);
    }

    /// What the debugger's registers say of thread `lwp`'s system call (see
    /// `set_debugger_syscalls`).
    pub fn debugger_syscall(&self, lwp: u64) -> Option<&[u64]> {
        self.debugger_syscalls
            .get()?
            .iter()
            .find(|c| c.0 == lwp)
            .map(|c| &c.1[..])
    }

    /// Tell the session which LWP has which thread pointer (gdb knows; the core says).
    pub fn set_thread_ids(&mut self, ids: Vec<(u64, u64)>) {
        self.thread_ids = ids;
        self.decoded = OnceLock::new();
        self.async_report = OnceLock::new();
        self.async_view = OnceLock::new();
        self.greenlet_view = OnceLock::new();
    }

    fn decoded(&self) -> &(Vec<DecodedThread>, Vec<ReadError>) {
        once(&self.decoded, || {
            let mut errors = Vec::new();
            let mut out = Vec::new();
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
            for interp in interps.iter().rev() {
                // Threads are linked newest first too: main thread first, then by age.
                let mut threads = self.snap.threads(*interp, &mut errors);
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
                        None => self.snap.walk_frames(info.frame),
                    };
                    out.push(DecodedThread { info, walk });
                }
            }
            // The thread that crashed is the one to read first.
            let crashed = self.crash().map(|c| c.thread);
            if let Some(i) = out
                .iter()
                .position(|t| crashed.is_some() && t.info.native_id == crashed)
            {
                out[..=i].rotate_right(1);
            }
            (out, errors)
        })
    }

    /// The Python threads: the one that crashed first, then the main interpreter's, main
    /// thread first, then by age.
    pub fn threads(&self) -> &[DecodedThread] {
        &self.decoded().0
    }

    /// The fatal signal, when the target is a core written for one ([`crate::why::crash`]).
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

    pub fn python_report(&self) -> PythonReport {
        PythonReport {
            version: self.snap.layout.version.to_string(),
            free_threaded: self.snap.layout.free_threaded,
            jit: false,
            found_by: self.snap.found_by.clone(),
            source: match self.target.kind {
                SourceKind::Live => "live",
                SourceKind::Core => "core",
                SourceKind::Debugger => "debugger",
            },
            pid: self.target.pid,
        }
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

    pub(crate) fn frame_report(&self, item: &FrameItem, with_locals: bool) -> FrameReport {
        match item {
            FrameItem::Python(p) => FrameReport {
                kind: FrameKind::Python,
                function: Some(p.code.qualname.clone()),
                file: Some(p.code.filename.clone()),
                line: p.line,
                entry: Some(p.entry),
                address: Some(p.addr),
                detail: with_locals.then(|| {
                    let locals = self.locals(p).unwrap_or_else(|e| {
                        vec![LocalReport {
                            name: "<error>".into(),
                            repr: e.to_string(),
                            is_arg: false,
                        }]
                    });
                    Box::new(FrameDetail {
                        locals: Some(locals),
                        ..FrameDetail::default()
                    })
                }),
            },
            FrameItem::Unreadable { addr, error } => {
                FrameReport::unreadable(*addr, error.to_string())
            }
        }
    }

    pub fn thread_report(&self, t: &DecodedThread, with_locals: bool) -> ThreadReport {
        ThreadReport {
            native_id: t.info.native_id,
            thread_id: t.info.thread_id,
            name: t.info.name.clone(),
            holds_gil: t.info.holds_gil,
            interpreter: t.info.interp,
            thread_state: t.info.addr,
            frames: t
                .walk
                .items
                .iter()
                .map(|i| self.frame_report(i, with_locals))
                .collect(),
            truncated: t.walk.truncated,
            why: None,
        }
    }

    /// The report for every thread (`key` = None) or one.
    pub fn report(&self, key: Option<ThreadKey>, with_locals: bool) -> Result<Report> {
        let threads: Vec<&DecodedThread> = match key {
            None => self.threads().iter().collect(),
            Some(k) => vec![self.thread(k)?],
        };
        // A core's notes are not target memory: their problems have no address.
        let mut errors: Vec<ErrorReport> = self
            .crash
            .1
            .iter()
            .map(|what| ErrorReport {
                address: 0,
                what: what.clone(),
            })
            .collect();
        errors.extend(self.target.module_problems.iter().map(|p| ErrorReport {
            address: 0,
            what: format!("loaded modules: {p}"),
        }));
        errors.extend(self.decoded().1.iter().map(|e| ErrorReport {
            address: e.addr,
            what: e.to_string(),
        }));
        // A walk cut by a cap says which cap, and where (the first frame not walked).
        errors.extend(threads.iter().filter_map(|t| {
            let cut = t.walk.cut?;
            Some(ErrorReport {
                address: cut.addr,
                what: format!(
                    "thread {}: frame walk: {}",
                    t.info.native_id.unwrap_or(t.info.thread_id),
                    cut
                ),
            })
        }));
        let threads: Vec<ThreadReport> = threads
            .iter()
            .map(|t| self.thread_report(t, with_locals))
            .collect();
        for t in &threads {
            for f in t.frames.iter().filter(|f| f.kind == FrameKind::Unreadable) {
                errors.push(ErrorReport {
                    address: f.address.unwrap_or(0),
                    what: format!(
                        "thread {}: frame: {}",
                        t.native_id.unwrap_or(t.thread_id),
                        f.reason().unwrap_or_default()
                    ),
                });
            }
        }
        Ok(Report {
            python: self.python_report(),
            crash: self.crash().cloned(),
            threads,
            tasks: None,
            greenlets: None,
            cycles: None,
            loops: None,
            native_stops: None,
            deadlocks: None,
            errors,
        })
    }

    /// The report of every thread plus the asyncio tasks, loops and await cycles.
    pub fn async_report(&self) -> Result<&Report> {
        if let Some(r) = self.async_report.get() {
            return Ok(r);
        }
        let r = self.build_async_report()?;
        Ok(once(&self.async_report, || r))
    }

    /// Every pending asyncio task, decoded once per stop.
    pub fn async_view(&self) -> Result<&AsyncView> {
        if let Some(v) = self.async_view.get() {
            return Ok(v);
        }
        let frames: Vec<ThreadFrames> = self
            .threads()
            .iter()
            .map(|t| ThreadFrames {
                tstate: t.info.addr,
                native_id: t.info.native_id,
                walk: &t.walk,
            })
            .collect();
        let dbg = asyncio::debug_section::AsyncioDebug::find(&self.target);
        let view = asyncio::analyze(&self.snap, &frames, dbg)?;
        Ok(once(&self.async_view, || view))
    }

    /// Every greenlet, decoded once per stop.
    pub fn greenlet_view(&self) -> &GreenletView {
        once(&self.greenlet_view, || {
            let threads: Vec<GThread> = self
                .threads()
                .iter()
                .map(|t| GThread {
                    interp: t.info.interp,
                    native_id: t.info.native_id,
                    pthread: t.info.thread_id,
                    walk: &t.walk,
                })
                .collect();
            let files: Vec<(u64, u64)> = self
                .target
                .mappings
                .iter()
                .map(|m| (m.start, m.end))
                .collect();
            let stacks = Stacks {
                regions: &self.target.regions,
                anchors: &self.target.stack_anchors,
                heap: self.heap_ranges(&files),
                files,
                raw: Some(self.target.mem.clone()),
            };
            greenlet::analyze(&self.snap, &threads, &stacks)
        })
    }

    /// A live process's resident pages outside its files, where a heap scan looks (free-threaded
    /// builds keep no GC lists); None elsewhere (every mapping that is not a file's).
    fn heap_ranges(&self, files: &[(u64, u64)]) -> Option<Vec<(u64, u64)>> {
        if self.snap.layout.interpreter_state.gc.is_some() {
            return None;
        }
        let pid = match self.target.kind {
            SourceKind::Live => self.target.pid?,
            _ => return None,
        };
        let mut out = Vec::new();
        for &(start, end) in &self.target.regions {
            if files.iter().any(|f| f.0 < end && start < f.1) {
                continue;
            }
            out.extend(crate::memory::resident_ranges(pid, start, end)?);
        }
        Some(out)
    }

    /// `py-greenlets` text: every thread with its greenlets.
    pub fn render_greenlets(&self, with_locals: bool) -> Result<String> {
        let mut r = self.report(None, with_locals)?;
        self.add_greenlets(&mut r, with_locals);
        Ok(text::all_threads(&r, &mut Sources::default()))
    }

    /// `r` with every greenlet (`--greenlets`, `py-greenlets`), and what could not be read of
    /// them among its errors.
    pub fn add_greenlets(&self, r: &mut Report, with_locals: bool) {
        let view = self.greenlet_view();
        let threads = self.threads();
        r.greenlets = Some(
            view.greenlets
                .iter()
                .map(|g| GreenletReport {
                    address: g.addr,
                    thread: g.thread.and_then(|i| threads[i].info.native_id),
                    state: g.state.as_str(),
                    main: g.main,
                    parent: g.parent,
                    type_name: g.type_name.clone(),
                    name: g.name.clone(),
                    function: g.function.clone(),
                    frames: g
                        .frames
                        .iter()
                        .map(|i| self.frame_report(i, with_locals))
                        .collect(),
                    truncated: g.truncated,
                    waiting: g.waiting.clone(),
                })
                .collect(),
        );
        r.errors
            .extend(view.errors.iter().map(|(address, what)| ErrorReport {
                address: *address,
                what: what.clone(),
            }));
    }

    fn build_async_report(&self) -> Result<Report> {
        let mut r = self.report(None, false)?;
        let threads = self.threads();
        let view = self.async_view()?;
        let native_id = |ti: Option<usize>| ti.and_then(|i| threads[i].info.native_id);
        let frame_reports = |items: &[FrameItem]| -> Vec<FrameReport> {
            items.iter().map(|i| self.frame_report(i, false)).collect()
        };
        r.tasks = Some(
            view.tasks
                .iter()
                .map(|t| TaskReport {
                    id: t.raw.addr,
                    name: t.raw.name.clone(),
                    state: t.raw.state,
                    on_cpu: t.on_cpu.is_some(),
                    native_id: native_id(t.thread),
                    type_name: t.raw.type_name.clone(),
                    supported: t.supported,
                    loop_: t.raw.loop_,
                    frames: frame_reports(&t.frames),
                    awaiting: t.awaiting.as_ref().map(|a| AwaitingReport {
                        kind: a.kind,
                        id: a.id,
                        type_name: a.type_name.clone(),
                        executor_native_id: native_id(a.executor_thread),
                    }),
                    awaited_by: t.awaited_by.clone(),
                    owned_by: t.owned_by.clone(),
                    why: None,
                })
                .collect(),
        );
        r.loops = Some(
            view.loops
                .iter()
                .map(|l| LoopReport {
                    id: l.addr,
                    type_name: l.type_name.clone(),
                    native_id: native_id(l.thread),
                    running: l.thread.is_some(),
                    frames: frame_reports(&l.upper),
                })
                .collect(),
        );
        r.cycles = Some(view.cycles.clone());
        r.errors
            .extend(view.errors.iter().map(|(address, what)| ErrorReport {
                address: *address,
                what: what.clone(),
            }));
        Ok(r)
    }

    /// `py-bt` text: one thread's traceback, or every thread's with headers. With the
    /// selected thread's native frames, the native frames libpython shows are in it too.
    pub fn render_bt(
        &self,
        key: Option<ThreadKey>,
        full: bool,
        natives: Option<&Natives>,
    ) -> Result<String> {
        let r = self.report(key, full)?;
        let mut src = Sources::default();
        Ok(match key {
            None => {
                let mut parked: Vec<(u64, usize)> = Vec::new();
                let threads = self.threads();
                for g in &self.greenlet_view().greenlets {
                    let id = g.thread.and_then(|i| threads[i].info.native_id);
                    if let (Some(id), greenlet::State::Suspended) = (id, g.state) {
                        match parked.iter_mut().find(|p| p.0 == id) {
                            Some(p) => p.1 += 1,
                            None => parked.push((id, 1)),
                        }
                    }
                }
                text::all_threads_parked(&r, &parked, &mut src)
            }
            Some(k) => {
                let entries = self.stack_entries(k, natives)?;
                let mut out = String::new();
                text::entries(&r.threads[0], &entries, full, &mut src, &mut out);
                text::errors(&r, &mut out);
                out
            }
        })
    }

    /// The thread's stack as libpython's py-bt and py-up walk it, innermost first: its Python
    /// frames and, when its native frames are given, the native frames libpython shows
    /// between them (see [`StackEntry`]).
    pub fn stack_entries(
        &self,
        key: ThreadKey,
        natives: Option<&Natives>,
    ) -> Result<Vec<StackEntry>> {
        let t = self.thread(key)?;
        let python = |index: usize, level: Option<usize>| StackEntry {
            kind: "python",
            index: Some(index),
            level,
            text: None,
        };
        let Some(n) = natives else {
            return Ok((0..t.walk.items.len()).map(|i| python(i, None)).collect());
        };
        let actions = self.splice(key, &n.names, n.sps.as_deref(), None, false);
        // Without symbols, the GIL and GC markers come from memory: the thread blocked on the
        // GIL's own address; the interpreter's collector running and this thread the GIL's
        // last holder (a finalizer the collector runs may have released it, as in a sleep).
        let named: Vec<String> = markers(&n.names, &(0..n.names.len()).collect::<Vec<_>>())
            .into_iter()
            .map(|m| m.1)
            .collect();
        let mut from_memory = Vec::new();
        let (interp, holds) = (t.info.interp, t.info.holds_gil);
        if !named.iter().any(|m| m == WAITING_FOR_GIL)
            && n.wait_addr
                .is_some_and(|a| self.snap.waits_for_gil(interp, holds, a))
        {
            // At the interpreter's innermost frame, where libpython finds `take_gil` by name:
            // the frames inside it are the C library's wait.
            let inside = self.in_interpreter(&n.pcs);
            let first_run = actions
                .iter()
                .position(|a| matches!(a, Splice::Python { .. }))
                .unwrap_or(actions.len());
            let at = (0..first_run).find(|&k| inside.get(k) == Some(&true));
            from_memory.push((at.unwrap_or(0), WAITING_FOR_GIL.to_string()));
        }
        let collecting =
            !named.iter().any(|m| m == COLLECTING) && self.snap.is_collecting(interp, t.info.addr);
        // Each Python run with the native frames between it and the next inner one, and the C
        // callable its innermost frame is calling.
        let mut runs = Vec::new();
        let mut pending: Vec<usize> = Vec::new();
        for (level, a) in actions.iter().enumerate() {
            let Splice::Python { frames } = a else {
                pending.push(level);
                continue;
            };
            let mut called = None;
            if let Some(FrameItem::Python(p)) = frames.first().and_then(|&i| t.walk.items.get(i)) {
                let natives: Vec<NativeFrame> = pending
                    .iter()
                    .map(|&k| NativeFrame {
                        name: n.names[k].clone(),
                        pc: n.pcs.get(k).copied().unwrap_or(0),
                    })
                    .collect();
                let outer_pc = n.pcs.get(level).copied().unwrap_or(0);
                let inner = frames
                    .first()
                    .and_then(|&i| i.checked_sub(1))
                    .and_then(|i| t.walk.items.get(i))
                    .map(|f| match f {
                        FrameItem::Python(f) => f.addr,
                        FrameItem::Unreadable { addr, .. } => *addr,
                    });
                called = self.snap.called_callable(p, &natives, outer_pc, inner);
            }
            runs.push((level, frames, std::mem::take(&mut pending), called));
        }
        // The collector runs under `gc.collect` when Python code called it (libpython shows
        // the line just inside that call), else it is the innermost code.
        let gc_run = collecting
            .then(|| {
                runs.iter()
                    .position(|r| r.3.as_ref().is_some_and(|c| self.snap.is_gc_collect(c.obj)))
            })
            .flatten();
        if collecting && gc_run.is_none() {
            from_memory.push((0, COLLECTING.to_string()));
        }
        let mut from_memory = Some(from_memory);
        let native = |(level, text): (usize, String)| StackEntry {
            kind: "native",
            index: None,
            level: Some(level),
            text: Some(text),
        };
        let mut out = Vec::new();
        let mut shown = vec![false; t.walk.items.len()];
        for (r, (level, frames, natives, called)) in runs.into_iter().enumerate() {
            let mut lines = markers(&n.names, &natives);
            lines.extend(from_memory.take().unwrap_or_default());
            if let Some(c) = called {
                if collecting && gc_run == Some(r) {
                    lines.push((natives[c.at.saturating_sub(1)], COLLECTING.to_string()));
                }
                lines.push((natives[c.at], c.text));
            }
            lines.sort_by_key(|l| l.0);
            out.extend(lines.into_iter().map(native));
            for &i in frames {
                shown[i] = true;
                out.push(python(i, Some(level)));
            }
        }
        // A thread with no Python run in its native frames still gets the markers.
        let mut last = markers(&n.names, &pending);
        last.extend(from_memory.take().unwrap_or_default());
        last.sort_by_key(|l| l.0);
        out.extend(last.into_iter().map(native));
        out.extend(
            (0..shown.len())
                .filter(|&i| !shown[i])
                .map(|i| python(i, None)),
        );
        if let Some(levels) = &n.levels {
            shown_levels(&mut out, &actions, levels, n.python_levels.as_deref());
        }
        Ok(out)
    }

    /// The thread's native frames as we unwind them from `start`, the registers of the
    /// debugger's innermost native frame: for a frontend whose debugger shows other frames than
    /// its own (lldb's frame provider), or that need no frame numbers (gdb's `py-bt`, which
    /// would otherwise step gdb's frames: 25-60 ms each where gdb expands a unit's DWARF).
    /// `inlined`: DWARF's inlined calls are frames of their own, as debuggers show and number
    /// them; else each frame is named from the symbol tables alone.
    pub fn own_natives(
        &self,
        start: unwind::regs::Regs,
        inlined: bool,
    ) -> (Natives, Option<String>) {
        let jit = (self.snap.layout.version.minor >= 13).then(|| self.jit());
        self.with_modules(|set| self.own_natives_in(set, start, jit, inlined))
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

    fn own_natives_in(
        &self,
        set: &ModuleSet,
        start: unwind::regs::Regs,
        jit: Option<&JitMap>,
        inlined: bool,
    ) -> (Natives, Option<String>) {
        let stack = unwind::unwind(&*self.snap.mem, set, jit, start);
        let mut n = Natives {
            sps: Some(Vec::new()),
            wait_addr: start.get(RDI),
            ..Natives::default()
        };
        let mut push = |name: Option<String>, f: &unwind::Frame| {
            n.names.push(name);
            n.pcs.push(f.pc);
            n.sps.get_or_insert_with(Vec::new).push(f.sp);
        };
        for f in &stack.frames {
            if f.jit_label.is_some() {
                push(f.jit_label.clone(), f);
                continue;
            }
            let name = if inlined {
                set.name(f)
            } else {
                set.symbol_name(f)
            };
            if let Some((_, inlined)) = name.source.split_last() {
                for s in inlined {
                    push(s.function.clone(), f);
                }
            }
            push(name.function, f);
        }
        (n, stack.error)
    }

    /// `py-bt-async` text.
    pub fn render_async(&self) -> Result<String> {
        let r = self.async_report()?;
        Ok(tasks::async_bt(r, &mut Sources::default()))
    }

    /// The task tree and/or the task table.
    pub fn render_tasks(&self, tree: bool, table: bool) -> Result<String> {
        let r = self.async_report()?;
        let mut out = String::new();
        if tree {
            out.push_str(&tasks::tree(r));
        }
        if table {
            if tree {
                out.push('\n');
            }
            out.push_str(&tasks::table(r));
        }
        let mut errs = String::new();
        text::errors(r, &mut errs);
        out.push_str(&errs);
        Ok(out)
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

    /// How to show each native frame of a thread's stack (see [`crate::native::splice`]).
    /// With the frames' `pcs`, the plumbing hidden between Python frames is known by address.
    pub fn splice(
        &self,
        key: ThreadKey,
        names: &[Option<String>],
        sps: Option<&[u64]>,
        pcs: Option<&[u64]>,
        hide_internal: bool,
    ) -> Vec<Splice> {
        let inside = pcs.map(|p| self.in_interpreter(p));
        match self.find_thread(key) {
            Some(t) => crate::native_stacks::splice_thread(
                self,
                t,
                names,
                sps,
                pcs,
                inside.as_deref(),
                hide_internal,
            ),
            None => splice(names, sps, &[], hide_internal, inside.as_deref()),
        }
    }
}

/// The value of `cell`, made by `make` if it has none yet. `make` runs outside the cell's
/// lock: with the debugger's memory every read calls into Python, which can switch to another
/// Python thread that asks for the same value; blocking in `OnceLock::get_or_init` there would
/// hold the GIL while the thread that runs `make` waits for it. Two threads may then both
/// decode; the first value stored wins.
fn once<T>(cell: &OnceLock<T>, make: impl FnOnce() -> T) -> &T {
    if let Some(v) = cell.get() {
        return v;
    }
    let v = make();
    cell.get_or_init(|| v)
}

/// x86-64 `rdi` in DWARF numbering (see [`crate::unwind::regs`]).
const RDI: u16 = 5;

/// Gives the entries the levels the debugger shows (see [`Natives::levels`]). An entry whose
/// native frame is hidden takes the level of the next shown frame outward: the plumbing the
/// debugger folds away sits there.
fn shown_levels(
    entries: &mut [StackEntry],
    actions: &[Splice],
    levels: &[Option<usize>],
    python_levels: Option<&[Option<usize>]>,
) {
    // Without `python_levels` the debugger shows the eval-loop frames themselves.
    let level = |k: usize| levels.get(k).copied().flatten();
    let python_level = |i: usize| python_levels.and_then(|p| p.get(i).copied().flatten());
    let outward = |k: usize| {
        (k..actions.len()).find_map(|j| match &actions[j] {
            Splice::Python { frames } if python_levels.is_some() => {
                frames.first().and_then(|&i| python_level(i))
            }
            _ => level(j),
        })
    };
    for e in entries {
        e.level = match (e.kind, e.index) {
            ("python", Some(i)) if python_levels.is_some() => {
                python_level(i).or_else(|| e.level.and_then(outward))
            }
            ("python", _) => e.level.and_then(level),
            _ => e.level.and_then(outward),
        };
    }
}

/// A thread's native frames as the debugger unwound them, innermost first.
#[derive(Clone, Debug, Default)]
pub struct Natives {
    pub names: Vec<Option<String>>,
    pub pcs: Vec<u64>,
    pub sps: Option<Vec<u64>>,
    /// The innermost frame's first argument register (x86-64 `rdi`): in a blocked futex wait,
    /// the address the thread waits on.
    pub wait_addr: Option<u64>,
    /// When the debugger shows other frames than these (lldb's frame provider): the level
    /// it shows each of them at, None where it hides it...
    pub levels: Option<Vec<Option<usize>>>,
    /// ...and the level it shows each Python frame at, by index.
    pub python_levels: Option<Vec<Option<usize>>>,
}

const WAITING_FOR_GIL: &str = "Waiting for the GIL";
const COLLECTING: &str = "Garbage-collecting";

/// Native functions libpython.py marks in py-bt (Tools/gdb/libpython.py,
/// `is_waiting_for_gil`, `is_gc_collect`; 3.13 added the generational names).
const GIL_WAIT_FUNCTIONS: &[&str] = &["take_gil"];
const GC_FUNCTIONS: &[&str] = &[
    "collect",
    "gc_collect_main",
    "gc_collect_full",
    "gc_collect_young",
    "gc_collect_increment",
];

/// The "Waiting for the GIL" and "Garbage-collecting" lines for the native frames `levels`.
fn markers(names: &[Option<String>], levels: &[usize]) -> Vec<(usize, String)> {
    levels
        .iter()
        .filter_map(|&k| {
            let name = names.get(k)?.as_deref()?;
            let base = name.split('.').next().unwrap_or(name);
            if GIL_WAIT_FUNCTIONS.contains(&base) {
                Some((k, WAITING_FOR_GIL.to_string()))
            } else if GC_FUNCTIONS.contains(&base) {
                Some((k, COLLECTING.to_string()))
            } else {
                None
            }
        })
        .collect()
}

/// JIT and trampoline code (see [`crate::native::jit`]), built from this session's snapshot and
/// the `_PyJIT_Entry` discovery found: for `--native`, lldb, and gdb's `_pyunwind.Jit` (a session
/// that decodes no thread, so that the unwinder works where Python frames cannot be decoded).
impl Session {
    pub fn jit(&self) -> &JitMap {
        once(&self.jit, || {
            JitMap::build(&self.snap, self.remembered.jit_entry)
        })
    }

    /// The JIT map alone, for a frontend that keeps nothing else of the stop.
    pub fn into_jit(self) -> JitMap {
        self.jit();
        self.jit.into_inner().unwrap_or_default()
    }

    /// The JIT executor or trampoline arena holding `pc`.
    pub fn jit_lookup(&self, pc: u64) -> Option<&Region> {
        self.jit().lookup(pc)
    }

    /// The caller's registers of the JIT or trampoline frame at `regs`, None when `regs.pc`
    /// is not such code or the frame cannot be unwound.
    pub fn jit_caller_registers(&self, regs: Regs) -> Option<Unwound> {
        self.jit().unwind(&*self.snap.mem, regs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(kind: &'static str, index: Option<usize>, level: usize) -> StackEntry {
        StackEntry {
            kind,
            index,
            level: Some(level),
            text: (kind == "native").then(|| "line".to_string()),
        }
    }

    #[test]
    fn provided_levels_replace_ours_and_hidden_frames_take_the_next_shown_one() {
        // Ours: 0 libc, 1 the C function, 2 plumbing (hidden by the debugger), 3 eval loop
        // running Python frames 0 and 1, 4 main. The debugger shows: 0, 1, Python 0 at 2,
        // Python 1 at 3, main at 4.
        let actions = vec![
            Splice::KEEP,
            Splice::KEEP,
            Splice::Hide,
            Splice::Python { frames: vec![0, 1] },
            Splice::KEEP,
        ];
        let levels = vec![Some(0), Some(1), None, None, Some(4)];
        let python_levels = vec![Some(2), Some(3)];
        let mut entries = vec![
            entry("native", None, 1),
            entry("native", None, 2),
            entry("python", Some(0), 3),
            entry("python", Some(1), 3),
        ];
        let mut own = entries.clone();
        shown_levels(&mut entries, &actions, &levels, Some(&python_levels));
        let got: Vec<_> = entries.iter().map(|e| e.level).collect();
        assert_eq!(got, vec![Some(1), Some(2), Some(2), Some(3)]);
        // The debugger's own frames, fewer than ours (lldb 19 stops early): its levels where
        // it shows the frame, none past its last one.
        let levels = vec![Some(0), Some(1), Some(2)];
        shown_levels(&mut own, &actions, &levels, None);
        let got: Vec<_> = own.iter().map(|e| e.level).collect();
        assert_eq!(got, vec![Some(1), Some(2), None, None]);
    }
}
