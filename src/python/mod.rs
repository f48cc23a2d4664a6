//! The `_pyunwind` extension module loaded by the gdb and lldb scripts. Thin: it builds a
//! [`Session`] from what the debugger knows and returns text or JSON; all decoding is in the
//! core. Errors become `_pyunwind.Error` with the core's one-line message.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

use crate::report::text::{self, Sources};
use crate::report::{heap_text, views};
use crate::session::native_stacks::Natives;
use crate::session::{self, Session, ThreadKey};
use crate::target::{SourceKind, Target};

mod frame_decorator;
mod frame_dicts;
mod jit;
mod modules;
mod targets;

use targets::{callback_target, search, Unmapped};

create_exception!(_pyunwind, Error, PyException);
// A target with no CPython in it: not a failure for what runs on every stop of any program
// (gdb's frame filter and unwinders), which then say nothing, unlike for an error.
create_exception!(_pyunwind, NoPythonError, Error);

/// The core's errors (and any other message) as `_pyunwind.Error`; [`crate::Error::NoPython`]
/// as its subclass `NoPythonError`.
fn err<E: std::fmt::Display + 'static>(e: E) -> PyErr {
    let any: &dyn std::any::Any = &e;
    match any.downcast_ref::<crate::Error>() {
        Some(crate::Error::NoPython(_)) => NoPythonError::new_err(e.to_string()),
        _ => Error::new_err(e.to_string()),
    }
}

/// The panic boundary of every entry point (see [`crate::panic`]): a panic in `f` becomes
/// `_pyunwind.Error` (an `Exception`), never pyo3's `PanicException` (a `BaseException`).
fn guard<T>(entry: &'static str, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    crate::panic::catch(entry, f).map_err(err)?
}

fn json<T: serde::Serialize>(v: &T) -> PyResult<String> {
    serde_json::to_string(v).map_err(err)
}

/// A report as JSON, with `host` as the command line's has it (docs/report.md).
fn report_json(r: &crate::model::Report) -> PyResult<String> {
    json(&crate::model::Hosted {
        host: &crate::model::host_name(),
        pid: None,
        report: r,
    })
}

/// One stop of one target. Drop it when the target resumes.
#[pyclass(name = "Session", module = "_pyunwind", frozen)]
struct PySession {
    inner: Session,
}

/// `thread_ids`: (LWP, thread pointer) pairs the debugger knows, so that threads of versions
/// that record no LWP (3.10) can still be matched.
fn open(target: Target, thread_ids: Option<Vec<(u64, u64)>>) -> PyResult<PySession> {
    let mut inner = Session::open(target).map_err(err)?;
    if let Some(ids) = thread_ids {
        inner.set_thread_ids(ids);
    }
    Ok(PySession { inner })
}

fn key(lwp: Option<u64>, tp: Option<u64>) -> ThreadKey {
    ThreadKey {
        lwp,
        thread_pointer: tp,
    }
}

impl PySession {
    /// Runs `f` with the GIL released, unless the memory source calls back into Python for
    /// every read (the debugger's memory): then the reads need the GIL anyway, and a thread
    /// holding it could otherwise wait for this one (DESIGN.md principle 5).
    fn off_gil<T: Send>(&self, py: Python<'_>, f: impl FnOnce() -> T + Send) -> T {
        if self.inner.target.kind == SourceKind::Debugger {
            f()
        } else {
            py.detach(f)
        }
    }

    /// One thread's report, without locals: its frames are [`frames_of`] it.
    fn thread_report(
        &self,
        py: Python<'_>,
        lwp: Option<u64>,
        tp: Option<u64>,
    ) -> PyResult<crate::model::Report> {
        self.off_gil(py, || {
            session::report::report(&self.inner, Some(key(lwp, tp)), false)
        })
        .map_err(err)
    }
}

/// The frames of a one-thread report.
fn frames_of(r: &crate::model::Report) -> &[crate::model::FrameReport] {
    r.threads.first().map_or(&[][..], |t| &t.frames[..])
}

#[pymethods]
impl PySession {
    /// A live local process, read with process_vm_readv.
    #[staticmethod]
    #[pyo3(signature = (pid, thread_ids=None))]
    fn live(pid: i32, thread_ids: Option<Vec<(u64, u64)>>) -> PyResult<Self> {
        guard("Session.live", || {
            open(Target::live(pid).map_err(err)?, thread_ids)
        })
    }

    /// A core file (plain or compressed); `exe` replaces the executable the core names;
    /// files the core names are looked up under `sysroot` first.
    #[staticmethod]
    #[pyo3(signature = (path, exe=None, thread_ids=None, sysroot=None))]
    fn core(
        path: &str,
        exe: Option<&str>,
        thread_ids: Option<Vec<(u64, u64)>>,
        sysroot: Option<String>,
    ) -> PyResult<Self> {
        guard("Session.core", || {
            open(
                Target::core_with(path, exe, search(sysroot)).map_err(err)?,
                thread_ids,
            )
        })
    }

    /// Memory through `read(addr, size) -> bytes` (raising on failure); `maps` is the text of
    /// /proc/PID/maps (or the debugger's equivalent). With no maps, the modules are found
    /// from the dynamic linker's list: the executable `exe` placed by `auxv`'s AT_PHDR, else
    /// by `exe_base` (where its ELF header is loaded).
    #[staticmethod]
    #[pyo3(signature = (read, maps, pid=None, thread_ids=None, sysroot=None, auxv=None, exe=None, exe_base=None))]
    #[allow(clippy::too_many_arguments)]
    fn debugger(
        read: Py<PyAny>,
        maps: &str,
        pid: Option<u32>,
        thread_ids: Option<Vec<(u64, u64)>>,
        sysroot: Option<String>,
        auxv: Option<Vec<(u64, u64)>>,
        exe: Option<&str>,
        exe_base: Option<u64>,
    ) -> PyResult<Self> {
        guard("Session.debugger", || {
            let unmapped = Unmapped {
                auxv,
                exe,
                exe_base,
            };
            open(
                callback_target(read, maps, pid, sysroot, unmapped).map_err(err)?,
                thread_ids,
            )
        })
    }

    /// Whether some thread has no LWP of its own (3.10 records none): the frontend then opens
    /// the session again with `thread_ids`.
    fn needs_thread_ids(&self) -> PyResult<bool> {
        guard("Session.needs_thread_ids", || {
            Ok(self
                .inner
                .threads()
                .iter()
                .any(|t| t.info.native_id.is_none()))
        })
    }

    /// The loaded ELF files with the local file of each, and what could not be placed, as
    /// JSON (see [`modules::modules`]): for a debugger that found fewer (lldb on a qemu core).
    fn modules(&self) -> PyResult<String> {
        guard("Session.modules", || json(&modules::modules(&self.inner)))
    }

    /// The `python` object of the report, as JSON.
    fn python(&self) -> PyResult<String> {
        guard("Session.python", || {
            json(&session::report::python_report(&self.inner))
        })
    }

    /// The JSON report of one thread (by LWP or thread pointer) or of all (`all_threads`).
    #[pyo3(signature = (lwp=None, tp=None, all_threads=false, locals=false))]
    fn report(
        &self,
        py: Python<'_>,
        lwp: Option<u64>,
        tp: Option<u64>,
        all_threads: bool,
        locals: bool,
    ) -> PyResult<String> {
        guard("Session.report", || {
            let k = (!all_threads).then(|| key(lwp, tp));
            let r = self.off_gil(py, || session::report::report(&self.inner, k, locals));
            report_json(&r.map_err(err)?)
        })
    }

    /// One thread's frames (by LWP or thread pointer), as `report`'s `threads[0].frames`
    /// would decode to, built as Python dicts (see `frame_dicts`).
    #[pyo3(signature = (lwp=None, tp=None))]
    fn frames<'py>(
        &self,
        py: Python<'py>,
        lwp: Option<u64>,
        tp: Option<u64>,
    ) -> PyResult<Bound<'py, pyo3::types::PyList>> {
        guard("Session.frames", || {
            frame_dicts::frame_dicts(py, frames_of(&self.thread_report(py, lwp, tp)?))
        })
    }

    /// gdb's decorators of the Python frames shown at eval-loop frames, one list per group
    /// `(base decorator, gdb.Frame, [frame index])` (see `frame_decorator`). `locals(index,
    /// dap)` gives a frame's locals as gdb wants them.
    #[pyo3(signature = (groups, dap, locals, lwp=None, tp=None))]
    fn decorators<'py>(
        &self,
        py: Python<'py>,
        groups: Vec<(Py<PyAny>, Py<PyAny>, Vec<usize>)>,
        dap: bool,
        locals: Py<PyAny>,
        lwp: Option<u64>,
        tp: Option<u64>,
    ) -> PyResult<Bound<'py, pyo3::types::PyList>> {
        guard("Session.decorators", || {
            let r = self.thread_report(py, lwp, tp)?;
            frame_decorator::decorators(py, frames_of(&r), groups, dap, locals)
        })
    }

    /// `py-why`: every thread's report with its state, wait and holds, and the deadlocks; as
    /// JSON, else as text (the verdict first). `syscalls`: `(lwp, [values])` with the values of
    /// the registers `syscall_registers` names, for a session reading memory through the
    /// debugger (see `wants_registers`).
    #[pyo3(signature = (as_json=false, syscalls=None))]
    fn why(
        &self,
        py: Python<'_>,
        as_json: bool,
        syscalls: Option<Vec<(u64, Vec<u64>)>>,
    ) -> PyResult<String> {
        guard("Session.why", || {
            if let Some(calls) = syscalls {
                self.inner.set_stopped_syscalls(calls);
            }
            let r = self.off_gil(py, || -> crate::Result<crate::model::Report> {
                Ok(crate::why::report(
                    &self.inner,
                    session::report::report(&self.inner, None, false)?,
                ))
            });
            let r = r.map_err(err)?;
            if as_json {
                report_json(&r)
            } else {
                Ok(text::why(&r, &mut Sources::default()))
            }
        })
    }

    /// `py-greenlets`: every greenlet under its thread (text), or the JSON report with
    /// `greenlets`.
    #[pyo3(signature = (as_json=false, locals=false))]
    fn greenlets(&self, py: Python<'_>, as_json: bool, locals: bool) -> PyResult<String> {
        guard("Session.greenlets", || {
            if as_json {
                let r = self.off_gil(py, || -> crate::Result<crate::model::Report> {
                    let mut r = session::report::report(&self.inner, None, locals)?;
                    crate::why::add_greenlets(&self.inner, &mut r, locals);
                    Ok(r)
                });
                report_json(&r.map_err(err)?)
            } else {
                self.off_gil(py, || views::render_greenlets(&self.inner, locals))
                    .map_err(err)
            }
        })
    }

    /// `py-heap`: the objects by type and the largest objects (text), or the JSON report
    /// with `heap`; `top` rows of each.
    #[pyo3(signature = (as_json=false, top=crate::heap::census::DEFAULT_TOP))]
    fn heap(&self, py: Python<'_>, as_json: bool, top: usize) -> PyResult<String> {
        guard("Session.heap", || {
            let r = self
                .off_gil(py, || -> crate::Result<crate::model::Report> {
                    let mut r = session::report::report(&self.inner, None, false)?;
                    crate::heap::census::add_to(&self.inner, &mut r, top);
                    Ok(r)
                })
                .map_err(err)?;
            if as_json {
                report_json(&r)
            } else {
                Ok(r.heap
                    .as_ref()
                    .map(|h| heap_text::render(h, top))
                    .unwrap_or_default())
            }
        })
    }

    /// The debugger's name of each thread, `(lwp, name)` (gdb's `InferiorThread.name`, lldb's
    /// `SBThread.GetName()`), shown as the threads' `native_name` by this stop's reports
    /// before the target's own source (/proc, a core's notes). The first call of a stop sets
    /// them (see `wants_thread_names`).
    fn set_thread_names(&self, names: Vec<(u64, String)>) -> PyResult<()> {
        guard("Session.set_thread_names", || {
            self.inner.set_debugger_thread_names(names);
            Ok(())
        })
    }

    /// Whether this stop's session has no thread names from the debugger yet.
    fn wants_thread_names(&self) -> bool {
        !self.inner.has_debugger_thread_names()
    }

    /// Whether `why` needs the debugger's registers for the threads' system calls: memory is
    /// read through the debugger, so no core notes or /proc give them.
    fn wants_registers(&self) -> bool {
        self.inner.target.kind == SourceKind::Debugger
    }

    /// The registers `why` wants of each thread, by the debugger's names, in the target's
    /// architecture (x86-64: orig_rax and the arguments; arm64: pc, x8 and the arguments).
    fn syscall_registers(&self) -> Vec<&'static str> {
        self.inner.target.arch.syscall_register_names().to_vec()
    }

    /// asyncio: the JSON report of every thread plus `tasks`, `loops` and `cycles`.
    fn async_report(&self, py: Python<'_>) -> PyResult<String> {
        guard("Session.async_report", || {
            report_json(
                self.off_gil(py, || session::asyncio::report(&self.inner))
                    .map_err(err)?,
            )
        })
    }

    /// `py-bt-async` text: each loop's tasks with their async stacks, other threads' stacks.
    fn render_async(&self, py: Python<'_>) -> PyResult<String> {
        guard("Session.render_async", || {
            self.off_gil(py, || views::render_async(&self.inner))
                .map_err(err)
        })
    }

    /// The task tree (like `python -m asyncio pstree`) and/or table (like `ps`).
    #[pyo3(signature = (tree=true, table=true))]
    fn render_tasks(&self, py: Python<'_>, tree: bool, table: bool) -> PyResult<String> {
        guard("Session.render_tasks", || {
            self.off_gil(py, || views::render_tasks(&self.inner, tree, table))
                .map_err(err)
        })
    }

    /// `py-bt` / `py-bt-full` text. `names`, `pcs`, `sps`: the selected thread's native
    /// frames, innermost first, when the debugger has them (the native frames libpython shows
    /// are then shown too).
    /// `levels`, `python_levels`: see `stack_entries`.
    #[pyo3(signature = (lwp=None, tp=None, all_threads=false, full=false, names=None, pcs=None, sps=None, wait_addr=None, levels=None, python_levels=None))]
    #[allow(clippy::too_many_arguments)]
    fn render_bt(
        &self,
        lwp: Option<u64>,
        tp: Option<u64>,
        all_threads: bool,
        full: bool,
        names: Option<Vec<Option<String>>>,
        pcs: Option<Vec<u64>>,
        sps: Option<Vec<u64>>,
        wait_addr: Option<u64>,
        levels: Option<Vec<Option<usize>>>,
        python_levels: Option<Vec<Option<usize>>>,
    ) -> PyResult<String> {
        guard("Session.render_bt", || {
            let k = (!all_threads).then(|| key(lwp, tp));
            let n = natives(names, pcs, sps, wait_addr, levels, python_levels);
            views::render_bt(&self.inner, k, full, n.as_ref()).map_err(err)
        })
    }

    /// libpython's repr of the object at `addr` (gdb's pretty-printer for `PyObject *`);
    /// `frame`: the object is a `PyFrameObject`.
    #[pyo3(signature = (addr, frame=false))]
    fn proxy_repr(&self, py: Python<'_>, addr: u64, frame: bool) -> PyResult<String> {
        let snap = &self.inner.snap;
        guard("Session.proxy_repr", || {
            Ok(self.off_gil(py, || {
                if frame && addr != 0 {
                    snap.frame_object_repr(addr)
                        .unwrap_or_else(|_| snap.proxy_repr(addr))
                } else {
                    snap.proxy_repr(addr)
                }
            }))
        })
    }

    /// The thread's stack as libpython's py-bt and py-up walk it (JSON list of
    /// {"kind": "python"|"native", "index", "level", "text"}), innermost first.
    /// `levels`: when the debugger shows other frames than these native frames (lldb's frame
    /// provider), the level it shows each of them at (None: hidden); `python_levels`: the
    /// level it shows each Python frame at, by index. Entries then carry those levels.
    #[pyo3(signature = (lwp=None, tp=None, names=None, pcs=None, sps=None, wait_addr=None, levels=None, python_levels=None))]
    #[allow(clippy::too_many_arguments)]
    fn stack_entries(
        &self,
        lwp: Option<u64>,
        tp: Option<u64>,
        names: Option<Vec<Option<String>>>,
        pcs: Option<Vec<u64>>,
        sps: Option<Vec<u64>>,
        wait_addr: Option<u64>,
        levels: Option<Vec<Option<usize>>>,
        python_levels: Option<Vec<Option<usize>>>,
    ) -> PyResult<String> {
        guard("Session.stack_entries", || {
            let n = natives(names, pcs, sps, wait_addr, levels, python_levels);
            json(
                &session::py_bt::stack_entries(&self.inner, key(lwp, tp), n.as_ref())
                    .map_err(err)?,
            )
        })
    }

    /// The thread's native frames as we unwind them from `regs` (register name -> value, the
    /// debugger's innermost native frame: rip, rsp, rbp, rdi...), for a debugger that shows
    /// other frames than its own: JSON {"names", "pcs", "sps", "wait_addr", "error"}.
    /// `inlined`: DWARF's inlined calls are frames of their own (as the debugger numbers
    /// them); else names come from the symbol tables alone, which is faster.
    #[pyo3(signature = (regs, inlined=true))]
    fn own_natives(
        &self,
        py: Python<'_>,
        regs: std::collections::HashMap<String, u64>,
        inlined: bool,
    ) -> PyResult<String> {
        guard("Session.own_natives", || {
            let start = crate::arch::Regs::from_names(
                self.inner.target.arch,
                regs.iter().map(|(n, v)| (n.as_str(), *v)),
            );
            let (n, error) = self.off_gil(py, || {
                session::native_stacks::own_natives(&self.inner, start, inlined)
            });
            natives_json(&n, error)
        })
    }

    /// [`Self::own_natives`] from the registers a core file recorded for thread `lwp`
    /// (NT_PRSTATUS), without asking the debugger for a frame (lldb's frame provider would
    /// plan every frame of the thread first); None when the session has no core registers
    /// for it (a live process).
    #[pyo3(signature = (lwp, inlined=true))]
    fn core_natives(&self, py: Python<'_>, lwp: u64, inlined: bool) -> PyResult<Option<String>> {
        guard("Session.core_natives", || {
            let Some(t) = self
                .inner
                .target
                .core_threads
                .iter()
                .find(|t| t.lwp as u64 == lwp)
            else {
                return Ok(None);
            };
            let start = t.regs;
            let (n, error) = self.off_gil(py, || {
                session::native_stacks::own_natives(&self.inner, start, inlined)
            });
            natives_json(&n, error).map(Some)
        })
    }

    /// How to show each native frame: JSON list of {"action": "python"|"hide"|"keep", ...}.
    /// `sps`: the native frames' stack pointers, which place Python runs without symbols;
    /// `pcs`: their PCs, which tell the interpreter's plumbing without symbols.
    #[pyo3(signature = (names, lwp=None, tp=None, hide_internal=true, sps=None, pcs=None))]
    fn splice(
        &self,
        names: Vec<Option<String>>,
        lwp: Option<u64>,
        tp: Option<u64>,
        hide_internal: bool,
        sps: Option<Vec<u64>>,
        pcs: Option<Vec<u64>>,
    ) -> PyResult<String> {
        guard("Session.splice", || {
            json(&session::native_stacks::splice(
                &self.inner,
                key(lwp, tp),
                &names,
                sps.as_deref(),
                pcs.as_deref(),
                hide_internal,
            ))
        })
    }

    /// The eval loop's code: sorted (start, end) target address ranges.
    fn eval_ranges(&self, py: Python<'_>) -> PyResult<Vec<(u64, u64)>> {
        guard("Session.eval_ranges", || {
            Ok(self.off_gil(py, || session::real_frames::eval_ranges(&self.inner)))
        })
    }

    /// The interpreter's own modules (its executable, libpython): sorted (start, end) target
    /// address ranges, where an eval-loop frame with no symbol may run.
    fn interpreter_ranges(&self, py: Python<'_>) -> PyResult<Vec<(u64, u64)>> {
        guard("Session.interpreter_ranges", || {
            Ok(self.off_gil(py, || session::real_frames::own_code_ranges(&self.inner)))
        })
    }

    /// The SP of the caller of the native frame at `pc`, `sp`, `bp` (one CFI step), or None.
    #[pyo3(signature = (pc, sp, bp, innermost=false))]
    fn frame_end(
        &self,
        py: Python<'_>,
        pc: u64,
        sp: u64,
        bp: u64,
        innermost: bool,
    ) -> PyResult<Option<u64>> {
        guard("Session.frame_end", || {
            Ok(self.off_gil(py, || {
                session::real_frames::frame_end(&self.inner, pc, sp, bp, innermost)
            }))
        })
    }

    /// Whether the thread runs Python (has a thread state): a thread that C code started and
    /// that never called into Python has none, and shows its native frames only. Raises when
    /// the thread list could not be read whole.
    #[pyo3(signature = (lwp=None, tp=None))]
    fn python_thread(&self, py: Python<'_>, lwp: Option<u64>, tp: Option<u64>) -> PyResult<bool> {
        guard("Session.python_thread", || {
            self.off_gil(py, || {
                session::real_frames::python_thread(&self.inner, key(lwp, tp))
            })
            .map_err(err)
        })
    }

    /// The thread's runs of Python frames, innermost first: (frame indices, entry shim
    /// address or None) for each eval-loop call.
    #[pyo3(signature = (lwp=None, tp=None))]
    fn runs(&self, lwp: Option<u64>, tp: Option<u64>) -> PyResult<Vec<(Vec<usize>, Option<u64>)>> {
        guard("Session.runs", || {
            session::real_frames::runs(&self.inner, key(lwp, tp)).map_err(err)
        })
    }

    /// (address, offset or None): where the thread's current Python frame is recorded (the
    /// pointer at address; with an offset, the pointer at that offset in what it points to).
    #[pyo3(signature = (lwp=None, tp=None))]
    fn current_frame_slot(
        &self,
        lwp: Option<u64>,
        tp: Option<u64>,
    ) -> PyResult<(u64, Option<u64>)> {
        guard("Session.current_frame_slot", || {
            session::real_frames::current_frame_slot(&self.inner, key(lwp, tp)).map_err(err)
        })
    }

    /// (address, value): the pointer that holds `value` once Python frame `index` returned.
    #[pyo3(signature = (index, lwp=None, tp=None))]
    fn return_watch(
        &self,
        index: usize,
        lwp: Option<u64>,
        tp: Option<u64>,
    ) -> PyResult<(u64, u64)> {
        guard("Session.return_watch", || {
            let w = session::real_frames::return_watch(&self.inner, key(lwp, tp), index)
                .map_err(err)?;
            Ok((w.addr, w.value))
        })
    }

    /// Locals of frame `index` (0 = innermost, counting every frame of the report) as JSON.
    #[pyo3(signature = (index, lwp=None, tp=None))]
    fn locals(&self, index: usize, lwp: Option<u64>, tp: Option<u64>) -> PyResult<String> {
        guard("Session.locals", || {
            let t = self.inner.thread(key(lwp, tp)).map_err(err)?;
            let f = self.inner.frame_at(t, index).map_err(err)?;
            json(&self.inner.locals(f).map_err(err)?)
        })
    }

    /// `py-locals` text for frame `index`.
    #[pyo3(signature = (index, lwp=None, tp=None))]
    fn render_locals(&self, index: usize, lwp: Option<u64>, tp: Option<u64>) -> PyResult<String> {
        guard("Session.render_locals", || {
            let t = self.inner.thread(key(lwp, tp)).map_err(err)?;
            let f = self.inner.frame_at(t, index).map_err(err)?;
            Ok(text::locals(&self.inner.locals(f).map_err(err)?))
        })
    }

    /// `py-print NAME` in frame `index`: (scope, repr) or None.
    #[pyo3(signature = (index, name, lwp=None, tp=None))]
    fn lookup(
        &self,
        index: usize,
        name: &str,
        lwp: Option<u64>,
        tp: Option<u64>,
    ) -> PyResult<Option<(String, String)>> {
        guard("Session.lookup", || {
            let t = self.inner.thread(key(lwp, tp)).map_err(err)?;
            let f = self.inner.frame_at(t, index).map_err(err)?;
            Ok(self
                .inner
                .snap
                .lookup_name(f, name)
                .map_err(err)?
                .map(|(s, r)| (s.to_string(), r)))
        })
    }

    // --- JIT and trampoline code, for frontends that unwind themselves (see `_pyunwind.Jit`).

    /// Sorted `(start, end, kind, label)` rows of JIT executors ("jit") and perf trampoline
    /// arenas ("trampoline").
    fn jit_regions(&self) -> PyResult<Vec<jit::RegionRow>> {
        guard("Session.jit_regions", || {
            Ok(jit::region_rows(session::jit::map(&self.inner)))
        })
    }

    /// `(start, end, kind, label)` of the region holding `pc`, or None.
    fn jit_lookup(&self, pc: u64) -> PyResult<Option<jit::RegionRow>> {
        guard("Session.jit_lookup", || {
            Ok(session::jit::lookup(&self.inner, pc).map(jit::region_row))
        })
    }

    /// The caller's registers of the JIT/trampoline frame at (pc, sp, bp): a dict as
    /// `Jit.unwind` returns, or None.
    fn jit_caller_registers<'py>(
        &self,
        py: Python<'py>,
        pc: u64,
        sp: u64,
        bp: u64,
    ) -> PyResult<Option<Bound<'py, pyo3::types::PyDict>>> {
        guard("Session.jit_caller_registers", || {
            let regs = crate::native::jit::Regs { pc, sp, bp };
            let u = self.off_gil(py, || session::jit::caller_registers(&self.inner, regs));
            u.map(|u| jit::unwound_dict(py, &u)).transpose()
        })
    }

    /// One libpython-style frame line (`#N Frame 0x…, for file …, line …, in f (a=1)`) and its
    /// source line, for `py-up` / `py-down`; `#N` is `level` when given.
    #[pyo3(signature = (index, lwp=None, tp=None, level=None))]
    fn render_frame(
        &self,
        index: usize,
        lwp: Option<u64>,
        tp: Option<u64>,
        level: Option<usize>,
    ) -> PyResult<String> {
        guard("Session.render_frame", || {
            let t = self.inner.thread(key(lwp, tp)).map_err(err)?;
            let r = session::report::thread_report(&self.inner, t, true);
            let f = r
                .frames
                .get(index)
                .ok_or_else(|| err(format!("no Python frame #{index}")))?;
            let mut out = text::frame_line(level.unwrap_or(index), f, f.locals()) + "\n";
            if let (Some(file), Some(line)) = (&f.file, f.line) {
                if let Some(code) = Sources::default().line(file, line) {
                    out.push_str(&format!("    {}\n", code.trim()));
                }
            }
            Ok(out)
        })
    }
}

/// `own_natives`' JSON.
fn natives_json(n: &Natives, error: Option<String>) -> PyResult<String> {
    json(&serde_json::json!({
        "names": n.names,
        "pcs": n.pcs,
        "sps": n.sps,
        "wait_addr": n.wait_addr,
        "error": error,
    }))
}

fn natives(
    names: Option<Vec<Option<String>>>,
    pcs: Option<Vec<u64>>,
    sps: Option<Vec<u64>>,
    wait_addr: Option<u64>,
    levels: Option<Vec<Option<usize>>>,
    python_levels: Option<Vec<Option<usize>>>,
) -> Option<Natives> {
    Some(Natives {
        names: names?,
        pcs: pcs.unwrap_or_default(),
        sps,
        wait_addr,
        levels,
        python_levels,
    })
}

/// `py-list` text: lines `start..=end` of `file`, `current` marked.
#[pyfunction]
fn render_list(file: &str, current: u32, start: u32, end: u32) -> PyResult<String> {
    guard("render_list", || {
        text::listing(&mut Sources::default(), file, current, start, end).map_err(err)
    })
}

/// The `pyunwind` command line (`argv[0]` first) of the pip package, which passes the paths of
/// its debugger scripts; returns the exit status.
#[pyfunction]
fn cli_main(py: Python<'_>, argv: Vec<String>, gdb_script: String, lldb_script: String) -> i32 {
    let scripts = crate::cli::Scripts {
        gdb: gdb_script.into(),
        lldb: lldb_script.into(),
    };
    py.detach(|| crate::cli::main(argv, Some(scripts)))
}

#[pymodule]
fn _pyunwind(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySession>()?;
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    m.add_class::<jit::PyJit>()?;
    m.add_class::<frame_decorator::PythonFrameDecorator>()?;
    m.add_function(wrap_pyfunction!(render_list, m)?)?;
    m.add("Error", m.py().get_type::<Error>())?;
    m.add("NoPythonError", m.py().get_type::<NoPythonError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("PANIC_MARKER", crate::panic::MARKER)?;
    m.add("PANIC_EXIT_STATUS", crate::panic::EXIT_STATUS)?;
    Ok(())
}
