//! `--native`: each Python thread's native stack, unwound by [`crate::unwind`], with its
//! Python frames in place of the eval-loop frames that run them (the rule gdb's frame filter
//! uses, [`crate::native::splice`]); `--native-all`: every frame, and every thread of the
//! process, those with no Python thread state too.

use std::collections::HashMap;

use super::jit;
use super::report::{report as threads_report, thread_frame_report, thread_label};
use super::{names, DecodedThread, Session, ThreadKey};
use crate::arch::Arch;
use crate::cpython::callables::NativeFrame;
use crate::cpython::{FrameItem, FrameWalk, ThreadInfo};
use crate::error::Result;
use crate::model::{ErrorReport, FrameKind, FrameReport, Report, StopReport, ThreadReport};
use crate::native::jit::{JitMap, RegionKind};
use crate::native::{self, is_plumbing, name_builtins, run_gaps, RunMark, Splice};
use crate::unwind::regs::Regs;
use crate::unwind::{self, ModuleSet};

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

/// Registers of each thread, by LWP, and the thread pointer it had.
#[derive(Clone, Debug, Default)]
pub struct ThreadRegs {
    pub by_lwp: HashMap<u64, (Regs, u64)>,
    /// Threads whose registers could not be read, and why.
    pub failed: HashMap<u64, String>,
    /// Live threads: the stack as copied while the thread was stopped (start, bytes).
    pub stacks: HashMap<u64, (u64, Vec<u8>)>,
    /// Live threads: how long each was stopped, in microseconds.
    pub stopped_us: Vec<(u64, u64)>,
    /// Live threads: `(lwp, values)`, the values of `Arch::syscall_register_names` as the
    /// stop's registers showed them ([`Session::set_stopped_syscalls`]).
    pub syscalls: Vec<(u64, Vec<u64>)>,
}

impl ThreadRegs {
    /// From a core's NT_PRSTATUS notes.
    pub fn of_core(session: &Session) -> ThreadRegs {
        ThreadRegs {
            by_lwp: session
                .target
                .core_threads
                .iter()
                .map(|t| (t.lwp as u64, (t.regs, t.thread_pointer)))
                .collect(),
            ..ThreadRegs::default()
        }
    }

    /// From a live process of architecture `arch`, each thread stopped in turn
    /// ([`crate::unwind::ptrace`]).
    pub fn of_live(pid: i32, arch: Arch) -> Result<ThreadRegs> {
        let (threads, failed) = crate::unwind::ptrace::read_threads(pid, arch)?;
        let mut r = ThreadRegs {
            failed: failed.into_iter().collect(),
            ..ThreadRegs::default()
        };
        for t in threads {
            if let Some(values) = arch.syscall_register_values(&t.regs, t.syscall) {
                r.syscalls.push((t.tid, values));
            }
            r.by_lwp.insert(t.tid, (t.regs, t.thread_pointer));
            r.stopped_us.push((
                t.tid,
                t.stopped_for.as_micros().min(u64::MAX as u128) as u64,
            ));
            r.stacks.insert(t.tid, t.stack);
        }
        Ok(r)
    }

    /// (LWP, thread pointer) of every thread: names the threads of 3.10, which records no LWP.
    pub fn thread_ids(&self) -> Vec<(u64, u64)> {
        self.by_lwp.iter().map(|(l, (_, tp))| (*l, *tp)).collect()
    }
}

/// The report with every Python thread's native frames and Python frames merged; `all`
/// keeps the interpreter's plumbing between Python frames and lists every other thread of
/// the process too (those with no Python thread state: their native frames).
pub fn native_report(
    s: &Session,
    regs: &ThreadRegs,
    all: bool,
    with_locals: bool,
) -> Result<Report> {
    // The session's modules: a later stop of the same process can take them over (`record
    // --native`, [`Session::take_modules`]).
    s.with_modules(|set| native_report_in(s, set, regs, all, with_locals))
}

fn native_report_in(
    s: &Session,
    set: &ModuleSet,
    regs: &ThreadRegs,
    all: bool,
    with_locals: bool,
) -> Result<Report> {
    let mut r = threads_report(s, None, with_locals)?;
    let interp_modules: Vec<usize> = s
        .interpreter_ranges()
        .iter()
        .filter_map(|&(start, _)| set.find(start))
        .collect();
    let jit: Option<&JitMap> = s.snap.layout.may_jit().then(|| jit::map(s));
    let unwind_lwp = |lwp: u64| {
        let (start, _) = regs.by_lwp.get(&lwp)?;
        Some(match regs.stacks.get(&lwp) {
            Some((at, bytes)) => {
                let mem = unwind::StackCopy {
                    base: &*s.snap.mem,
                    start: *at,
                    bytes,
                };
                unwind::unwind(&mem, set, jit, *start)
            }
            None => unwind::unwind(&*s.snap.mem, set, jit, *start),
        })
    };
    // Every thread unwound first, so that the DWARF of all their modules loads at once.
    let mut stacks: Vec<Option<unwind::Stack>> = Vec::new();
    for (t, tr) in s.threads().iter().zip(r.threads.iter_mut()) {
        stacks.push(None);
        let lwp = t.info.native_id.or_else(|| {
            regs.by_lwp
                .iter()
                .find(|(_, (_, tp))| *tp == t.info.thread_id)
                .map(|(l, _)| *l)
        });
        let Some(lwp) = lwp else {
            tr.frames.push(FrameReport::unreadable(
                0,
                "native frames: the thread's LWP is unknown".into(),
            ));
            continue;
        };
        if tr.native_id.is_none() {
            tr.native_id = Some(lwp);
            tr.native_name = names::native_name(s, lwp);
        }
        let Some(stack) = unwind_lwp(lwp) else {
            tr.frames
                .push(FrameReport::unreadable(0, no_registers(regs, lwp)));
            continue;
        };
        *stacks.last_mut().expect("pushed above") = Some(stack);
    }
    let others = if all {
        native_only_threads(s, regs, &r.threads)
    } else {
        Vec::new()
    };
    let other_stacks: Vec<Option<unwind::Stack>> =
        others.iter().map(|t| unwind_lwp(t.lwp)).collect();
    set.preload(
        stacks
            .iter()
            .chain(&other_stacks)
            .flatten()
            .flat_map(|s| s.frames.iter()),
    );
    for ((t, tr), stack) in s.threads().iter().zip(r.threads.iter_mut()).zip(&stacks) {
        if let Some(stack) = stack {
            tr.frames = merge(s, t, set, &interp_modules, stack, all, with_locals);
        }
    }
    let crashed = s.crash().map(|c| c.thread);
    for (o, stack) in others.iter().zip(&other_stacks) {
        let mut tr = o.report(s);
        match stack {
            Some(stack) => {
                let t = o.decoded();
                tr.frames = merge(s, &t, set, &interp_modules, stack, true, false);
            }
            None => tr
                .frames
                .push(FrameReport::unreadable(0, no_registers(regs, o.lwp))),
        }
        // The thread that crashed is the one to read first, with Python or not.
        if crashed == Some(o.lwp) {
            r.threads.insert(0, tr);
        } else {
            r.threads.push(tr);
        }
    }
    if !regs.stopped_us.is_empty() {
        let mut stops: Vec<StopReport> = regs
            .stopped_us
            .iter()
            .map(|&(native_id, stopped_us)| StopReport {
                native_id,
                stopped_us,
            })
            .collect();
        stops.sort_by_key(|s| s.native_id);
        r.native_stops = Some(stops);
    }
    for t in &r.threads {
        for f in t.frames.iter().filter(|f| f.kind == FrameKind::Unreadable) {
            let what = format!(
                "thread {}: {}",
                thread_label(t),
                f.reason().unwrap_or_default()
            );
            if !r.errors.iter().any(|e| e.what == what) {
                r.errors.push(ErrorReport {
                    address: f.address.unwrap_or(0),
                    what,
                });
            }
        }
    }
    // What debuginfod could not give the modules just unwound and named.
    for what in s.target.files.problems() {
        if !r.errors.iter().any(|e| e.what == what) {
            r.errors.push(ErrorReport { address: 0, what });
        }
    }
    Ok(r)
}

/// Why thread `lwp` has no native frames: its registers could not be read.
fn no_registers(regs: &ThreadRegs, lwp: u64) -> String {
    let why = regs
        .failed
        .get(&lwp)
        .cloned()
        .unwrap_or_else(|| format!("no registers for thread {lwp}"));
    format!("native frames: {why}")
}

/// A thread of the process with no Python thread state (`--native-all`).
struct NativeOnly {
    lwp: u64,
    /// Its thread pointer, 0 where the registers do not hold it.
    thread_pointer: u64,
}

impl NativeOnly {
    fn report(&self, s: &Session) -> ThreadReport {
        ThreadReport {
            native_id: Some(self.lwp),
            // x86-64's thread pointer is glibc's (and musl's) `pthread_self()`.
            thread_id: (self.thread_pointer != 0 && s.target.arch == Arch::X86_64)
                .then_some(self.thread_pointer),
            name: None,
            native_name: names::native_name(s, self.lwp),
            // The GIL is held by a thread state: a thread without one does not hold it.
            holds_gil: (!s.snap.layout.free_threaded).then_some(false),
            interpreter: None,
            interpreter_id: None,
            thread_state: None,
            frames: Vec::new(),
            truncated: false,
            why: None,
        }
    }

    /// A thread with no Python frames, for splicing (nothing is spliced into its stack).
    fn decoded(&self) -> DecodedThread {
        DecodedThread::alone(
            ThreadInfo {
                addr: 0,
                interp: 0,
                thread_id: self.thread_pointer,
                native_id: Some(self.lwp),
                holds_gil: None,
                name: None,
                frame: 0,
                frame_error: None,
            },
            FrameWalk::default(),
        )
    }
}

/// The threads of `regs` (every thread stopped, or every thread of a core, and those that
/// could not be stopped) that no Python thread of `listed` is, by LWP or by thread pointer
/// (the `pthread_t` CPython records: the same thread where the LWPs are counted in another
/// pid namespace), by LWP.
fn native_only_threads(s: &Session, regs: &ThreadRegs, listed: &[ThreadReport]) -> Vec<NativeOnly> {
    let x86 = s.target.arch == Arch::X86_64;
    let mut out: Vec<NativeOnly> = regs
        .by_lwp
        .iter()
        .map(|(&lwp, &(_, tp))| (lwp, tp))
        .chain(regs.failed.keys().map(|&lwp| (lwp, 0)))
        .filter(|&(lwp, tp)| {
            !listed
                .iter()
                .any(|t| t.native_id == Some(lwp) || (x86 && tp != 0 && t.thread_id == Some(tp)))
        })
        .map(|(lwp, thread_pointer)| NativeOnly {
            lwp,
            thread_pointer,
        })
        .collect();
    out.sort_by_key(|t| t.lwp);
    out.dedup_by_key(|t| t.lwp);
    out
}

/// One thread's frames: native frames with the Python runs spliced in; Python frames the
/// native walk did not reach follow its error entry, so none is lost.
fn merge(
    s: &Session,
    t: &DecodedThread,
    set: &ModuleSet,
    interp_modules: &[usize],
    stack: &unwind::Stack,
    all: bool,
    with_locals: bool,
) -> Vec<FrameReport> {
    let names: Vec<_> = stack.frames.iter().map(|f| set.name(f)).collect();
    let fnames: Vec<Option<String>> = names.iter().map(|n| n.function.clone()).collect();
    let sps: Vec<u64> = stack.frames.iter().map(|f| f.sp).collect();
    let inside: Vec<bool> = stack
        .frames
        .iter()
        .map(|f| f.jit_label.is_none() && f.module.is_some_and(|m| interp_modules.contains(&m)))
        .collect();
    let pcs: Vec<u64> = stack.frames.iter().map(|f| f.pc).collect();
    let actions = splice_thread(s, t, &fnames, Some(&sps), Some(&pcs), Some(&inside), !all);
    // Between two Python runs, the plumbing inlined into a frame that stays is hidden
    // too, as gdb and lldb hide it: they list inlined calls as frames of their own.
    let python_at = |k: usize| matches!(actions.get(k), Some(Splice::Python { .. }));
    let first_run = (0..actions.len()).find(|&k| python_at(k));
    let last_run = (0..actions.len()).rev().find(|&k| python_at(k));
    let mut out = Vec::new();
    let mut shown = vec![false; t.walk.items.len()];
    // Where in `out` the oldest Python frame of the nearest newer run is: a perf trampoline
    // calls the eval loop for one Python function, the one that run started, and is named
    // after it as the gdb and lldb frontends name it (`trampoline_names` in
    // pylib/pyunwind_frontend.py): `[trampoline] qualname (file)`. Taken by one trampoline.
    let mut started: Option<usize> = None;
    for (i, ((f, n), a)) in stack.frames.iter().zip(names).zip(&actions).enumerate() {
        let hide_inlined =
            !all && first_run.is_some_and(|r| r < i) && last_run.is_some_and(|r| r > i);
        match a {
            Splice::Python { frames } => {
                for &i in frames {
                    if let Some(item) = t.walk.items.get(i) {
                        shown[i] = true;
                        out.push(thread_frame_report(s, t, i, item, with_locals));
                    }
                }
                started = out
                    .len()
                    .checked_sub(1)
                    .filter(|&k| !frames.is_empty() && out[k].kind == FrameKind::Python);
            }
            Splice::Hide => {}
            Splice::Keep { builtin } => {
                if let Some(label) = &f.jit_label {
                    let trampoline = matches!(
                        jit::map(s).lookup(f.pc).map(|r| &r.kind),
                        Some(RegionKind::Trampolines { .. })
                    );
                    let python = started.take_if(|_| trampoline).map(|k| &out[k]);
                    let label = match python {
                        Some(FrameReport {
                            function: Some(func),
                            file,
                            ..
                        }) => format!("[trampoline] {func} ({})", file.as_deref().unwrap_or("???")),
                        _ => label.clone(),
                    };
                    let mut j = FrameReport::native(f.pc, Some(label), None, None);
                    j.kind = FrameKind::Jit;
                    out.push(j);
                } else {
                    // DWARF's inlined calls first (innermost first), each at the same PC;
                    // the function itself keeps its symbol name, with DWARF's file and line.
                    let (own, inlined) = match n.source.split_last() {
                        Some((own, inlined)) => (Some(own), inlined),
                        None => (None, &[][..]),
                    };
                    for s in inlined {
                        if hide_inlined && s.function.as_deref().is_some_and(is_plumbing) {
                            continue;
                        }
                        let mut r = FrameReport::native(
                            f.pc,
                            s.function.clone(),
                            n.module.clone(),
                            n.offset,
                        );
                        r.file = s.file.as_deref().map(Into::into);
                        r.line = s.line;
                        r.detail_mut().symbol = s.symbol.clone();
                        r.detail_mut().inlined = Some(true);
                        out.push(r);
                    }
                    // A stripped interpreter's frame running a builtin: named after it.
                    let (function, symbol) = match (n.function, own) {
                        (Some(function), _) => (Some(function), n.symbol),
                        (None, Some(o)) if o.function.is_some() => {
                            (o.function.clone(), o.symbol.clone())
                        }
                        _ => (builtin.as_ref().map(|b| format!("{b} (builtin)")), None),
                    };
                    let mut r = FrameReport::native(f.pc, function, n.module, n.offset);
                    r.detail_mut().symbol = symbol;
                    if let Some(o) = own {
                        r.file = o.file.as_deref().map(Into::into);
                        r.line = o.line;
                        r.detail_mut().inlined = Some(false);
                    }
                    out.push(r);
                }
            }
        }
    }
    if let Some(e) = &stack.error {
        let pc = stack.frames.last().map_or(0, |f| f.pc);
        out.push(FrameReport::unreadable(pc, format!("native frames: {e}")));
    }
    for (i, item) in t.walk.items.iter().enumerate() {
        if !shown[i] {
            out.push(thread_frame_report(s, t, i, item, with_locals));
        }
    }
    // A native or JIT frame is in the interpreter of the Python frame it belongs with.
    let ids = crate::model::frame_interpreters(&out);
    for (f, id) in out.iter_mut().zip(ids) {
        f.interpreter_id = id;
    }
    out
}

/// The thread's native frames as we unwind them from `start`, the registers of the
/// debugger's innermost native frame: for a frontend whose debugger shows other frames than
/// its own (lldb's frame provider), or that need no frame numbers (gdb's `py-bt`, which
/// would otherwise step gdb's frames: 25-60 ms each where gdb expands a unit's DWARF).
/// `inlined`: DWARF's inlined calls are frames of their own, as debuggers show and number
/// them; else each frame is named from the symbol tables alone.
pub fn own_natives(
    s: &Session,
    start: unwind::regs::Regs,
    inlined: bool,
) -> (Natives, Option<String>) {
    let jit = s.snap.layout.may_jit().then(|| jit::map(s));
    s.with_modules(|set| own_natives_in(s, set, start, jit, inlined))
}

fn own_natives_in(
    s: &Session,
    set: &ModuleSet,
    start: unwind::regs::Regs,
    jit: Option<&JitMap>,
    inlined: bool,
) -> (Natives, Option<String>) {
    let stack = unwind::unwind(&*s.snap.mem, set, jit, start);
    set.preload_symbols(&stack.frames);
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

/// How to show each native frame of a thread's stack (see [`crate::native::splice`]).
/// With the frames' `pcs`, the plumbing hidden between Python frames is known by address.
pub fn splice(
    s: &Session,
    key: ThreadKey,
    names: &[Option<String>],
    sps: Option<&[u64]>,
    pcs: Option<&[u64]>,
    hide_internal: bool,
) -> Vec<Splice> {
    let inside = pcs.map(|p| s.in_interpreter(p));
    match s.find_thread(key) {
        Some(t) => splice_thread(s, t, names, sps, pcs, inside.as_deref(), hide_internal),
        None => native::splice(names, sps, &[], hide_internal, inside.as_deref()),
    }
}

/// x86-64 `rdi` in DWARF numbering (see [`crate::unwind::regs`]).
const RDI: u16 = 5;

/// [`crate::native::splice`] for thread `t`, the rule every frontend shares; where it
/// hides frames without symbols (a stripped interpreter) and `pcs` are given, the frame
/// running the builtin a Python frame calls is shown again, named from its `PyMethodDef`.
pub fn splice_thread(
    session: &Session,
    t: &DecodedThread,
    names: &[Option<String>],
    sps: Option<&[u64]>,
    pcs: Option<&[u64]>,
    inside: Option<&[bool]>,
    hide_internal: bool,
) -> Vec<Splice> {
    let marks = RunMark::of_walk(&t.walk);
    let mut actions = native::splice(names, sps, &marks, hide_internal, inside);
    let Some(pcs) = pcs.filter(|p| p.len() == names.len()) else {
        return actions;
    };
    let mut running = Vec::new();
    for (level, frames, between) in run_gaps(&actions) {
        // Only a gap where a frame without a name was hidden: with symbols the builtin's
        // own frame is kept by name, and nothing is read.
        let unnamed_hidden = between
            .iter()
            .any(|&k| names[k].is_none() && actions[k] == Splice::Hide);
        if !unnamed_hidden {
            continue;
        }
        let Some(FrameItem::Python(p)) = frames.first().and_then(|&i| t.walk.items.get(i)) else {
            continue;
        };
        let natives: Vec<NativeFrame> = between
            .iter()
            .map(|&k| NativeFrame {
                name: names[k].clone(),
                pc: pcs[k],
            })
            .collect();
        let inner = frames
            .first()
            .and_then(|&i| i.checked_sub(1))
            .and_then(|i| t.walk.items.get(i))
            .map(|f| match f {
                FrameItem::Python(f) => f.addr,
                FrameItem::Unreadable { addr, .. } => *addr,
            });
        let called = session.snap.called_callable(p, &natives, pcs[level], inner);
        let Some(c) = called.filter(|c| c.is_cfunction) else {
            continue;
        };
        let (Some(k), Ok((name, _))) = (c.running, session.snap.cfunction_name_and_self(c.obj))
        else {
            continue;
        };
        if names[between[k]].is_none() {
            running.push((between[k], name));
        }
    }
    name_builtins(&mut actions, &running);
    actions
}
