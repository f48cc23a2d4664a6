//! `_pyunwind.Jit`: the JIT and trampoline map of one stop, for the gdb unwinder. Separate from
//! `_pyunwind.Session` on purpose: the unwinder runs for every frame gdb unwinds, and must work
//! (and stay cheap) even where the Python frames cannot be decoded. The map is built by a
//! [`Session`] that decodes no thread, then kept alone.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::{err, guard};
use crate::cpython::Remembered;
use crate::memory::Memory;
use crate::native::jit::{JitMap, Region, RegionKind, Regs, Unwound};
use crate::session::{self, Session};
use crate::target::{SourceKind, Target};

#[pyclass(name = "Jit", module = "_pyunwind", frozen)]
pub struct PyJit {
    mem: Arc<dyn Memory>,
    /// Every read calls back into the debugger's Python: keep the GIL (see `PySession::off_gil`).
    calls_python: bool,
    map: JitMap,
    inputs: Remembered,
}

/// (start, end, kind, label) rows, sorted by start: the frontend bisects them itself, so that
/// a PC outside every region costs no call into Rust.
pub type RegionRow = (u64, u64, &'static str, String);

pub fn region_rows(map: &JitMap) -> Vec<RegionRow> {
    map.regions().iter().map(region_row).collect()
}

pub fn region_row(r: &Region) -> RegionRow {
    let kind = match r.kind {
        RegionKind::Executor { .. } => "jit",
        RegionKind::Trampolines { .. } => "trampoline",
    };
    (r.start, r.end, kind, r.label.clone())
}

pub fn unwound_dict<'py>(py: Python<'py>, u: &Unwound) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let regs = PyDict::new(py);
    for (n, v) in &u.caller {
        regs.set_item(*n, *v)?;
    }
    d.set_item("caller", regs)?;
    d.set_item("frame_sp", u.frame_sp)?;
    d.set_item("frame_pc", u.frame_pc)?;
    d.set_item("label", &u.label)?;
    d.set_item("kind", u.kind)?;
    Ok(d)
}

fn make(target: Target, inputs: Inputs) -> PyResult<PyJit> {
    let calls_python = target.kind == SourceKind::Debugger;
    // Unwinding reads the target's own memory, not the session's budgeted view of it.
    let mem = target.mem.clone();
    let session = match inputs {
        Some((runtime, minor, jit_entry)) => Session::reopen(
            target,
            &Remembered {
                runtime,
                minor,
                jit_entry,
                keys: Default::default(),
                codes: Default::default(),
            },
        ),
        None => Session::open(target),
    }
    .map_err(err)?;
    let inputs = session.remembered();
    Ok(PyJit {
        calls_python,
        mem,
        map: session::jit::into_map(session),
        inputs,
    })
}

type Inputs = Option<(u64, u8, Option<u64>)>;

#[pymethods]
impl PyJit {
    /// A live local process. `inputs` = `(runtime, minor, jit_entry)` from an earlier stop's
    /// `inputs()` skips reading the ELF symbols again.
    #[staticmethod]
    #[pyo3(signature = (pid, inputs=None))]
    fn live(py: Python<'_>, pid: i32, inputs: Inputs) -> PyResult<Self> {
        guard("Jit.live", || {
            py.detach(|| make(Target::live(pid).map_err(err)?, inputs))
        })
    }

    #[staticmethod]
    #[pyo3(signature = (path, exe=None, inputs=None, sysroot=None))]
    fn core(
        py: Python<'_>,
        path: &str,
        exe: Option<&str>,
        inputs: Inputs,
        sysroot: Option<String>,
    ) -> PyResult<Self> {
        guard("Jit.core", || {
            let search = super::search(sysroot);
            py.detach(|| make(Target::core_with(path, exe, search).map_err(err)?, inputs))
        })
    }

    #[staticmethod]
    #[pyo3(signature = (read, maps, pid=None, inputs=None, sysroot=None, auxv=None, exe=None, exe_base=None))]
    #[allow(clippy::too_many_arguments)]
    fn debugger(
        read: Py<PyAny>,
        maps: &str,
        pid: Option<u32>,
        inputs: Inputs,
        sysroot: Option<String>,
        auxv: Option<Vec<(u64, u64)>>,
        exe: Option<&str>,
        exe_base: Option<u64>,
    ) -> PyResult<Self> {
        guard("Jit.debugger", || {
            let unmapped = super::Unmapped {
                auxv,
                exe,
                exe_base,
            };
            make(
                super::callback_target(read, maps, pid, sysroot, unmapped).map_err(err)?,
                inputs,
            )
        })
    }

    /// `(runtime, minor, jit_entry)`, to pass to the next stop's constructor.
    fn inputs(&self) -> (u64, u8, Option<u64>) {
        (
            self.inputs.runtime,
            self.inputs.minor,
            self.inputs.jit_entry,
        )
    }

    /// Sorted `(start, end, kind, label)` rows; kind is "jit" or "trampoline".
    fn regions(&self) -> PyResult<Vec<RegionRow>> {
        guard("Jit.regions", || Ok(region_rows(&self.map)))
    }

    /// The caller of the frame at (pc, sp, bp) when pc is JIT or trampoline code it can unwind:
    /// `{"caller": {reg: value}, "frame_sp", "frame_pc", "label", "kind"}`, else None.
    fn unwind<'py>(
        &self,
        py: Python<'py>,
        pc: u64,
        sp: u64,
        bp: u64,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        guard("Jit.unwind", || {
            let regs = Regs { pc, sp, bp };
            let u = if self.calls_python {
                self.map.unwind(&*self.mem, regs)
            } else {
                py.detach(|| self.map.unwind(&*self.mem, regs))
            };
            u.map(|u| unwound_dict(py, &u)).transpose()
        })
    }

    /// Problems met while building the map (it is partial when there are some).
    fn errors(&self) -> Vec<String> {
        self.map.errors.clone()
    }

    /// Which offset table was used.
    fn source(&self) -> String {
        self.map.source.clone()
    }
}
