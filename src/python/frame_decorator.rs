//! gdb's frame decorators for Python frames, built here: gdb's `bt` through our frame filter
//! asks a decorator per printed frame, and at 100,000 Python frames building them in Python
//! (one object, five attributes, a frame dict each) cost 0.25 s over a filter of constant
//! decorators. gdb's frame-decorator API is duck-typed (gdb/python/py-framefilter.c calls the
//! methods by name), so a Rust class with those methods is a decorator.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

use crate::model::{FrameKind, FrameReport};
use crate::report::text;

/// What the Python frames one eval-loop frame runs share: the eval-loop frame's own decorator
/// (`base`) and `gdb.Frame` (`inferior`), whether gdb's DAP server asked (`dap`), and the
/// script's function giving a frame's locals as gdb wants them, `locals(index, dap)`.
#[pyclass(module = "_pyunwind", frozen)]
pub(crate) struct DecoratorRun {
    base: Py<PyAny>,
    inferior: Py<PyAny>,
    dap: bool,
    locals: Py<PyAny>,
}

/// One Python frame shown in place of (part of) an eval-loop native frame.
#[pyclass(name = "PythonFrameDecorator", module = "_pyunwind", frozen)]
pub(crate) struct PythonFrameDecorator {
    run: Py<DecoratorRun>,
    index: usize,
    frame: FrameReport,
}

#[pymethods]
impl PythonFrameDecorator {
    fn inferior_frame(&self, py: Python<'_>) -> Py<PyAny> {
        self.run.get().inferior.clone_ref(py)
    }

    /// Frames elided below the eval-loop frame are its native frame's (shown with it when
    /// kept), not each of the Python frames it runs.
    fn elided(&self) -> Option<Py<PyAny>> {
        None
    }

    /// The function's name; a subinterpreter's frame says which
    /// ([`crate::report::text::interpreter_label`]).
    fn function<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        match (&self.frame.kind, &self.frame.function) {
            (FrameKind::Python, Some(f)) => match text::interpreter_label(&self.frame) {
                Some(label) => PyString::new(py, &format!("{f}{label}")),
                None => PyString::new(py, f),
            },
            (FrameKind::Python, None) => PyString::new(py, "??"),
            _ => PyString::new(
                py,
                &format!(
                    "<unreadable Python frame: {}>",
                    self.frame.reason().unwrap_or("None")
                ),
            ),
        }
    }

    fn filename<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyString>> {
        self.frame.file.as_ref().map(|f| PyString::new(py, f))
    }

    fn line(&self) -> Option<u32> {
        self.frame.line
    }

    /// gdb's DAP server (gdb 14+) needs every frame's pc (`instructionPointerReference`): the
    /// eval loop's. `bt` and MI print an address given here, so only DAP gets one.
    fn address(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let run = self.run.get();
        if !run.dap {
            return Ok(None);
        }
        Ok(Some(run.base.call_method0(py, intern!(py, "address"))?))
    }

    fn frame_args(&self) -> Option<Py<PyAny>> {
        None
    }

    fn frame_locals(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        if self.frame.kind != FrameKind::Python {
            return Ok(None);
        }
        let run = self.run.get();
        Ok(Some(run.locals.call1(py, (self.index, run.dap))?))
    }
}

/// The decorators of `groups`, one list per group: `(base, inferior, indices)` are an
/// eval-loop frame's decorator, its `gdb.Frame` and the indices (into `frames`) of the Python
/// frames it runs. An index past the thread's frames is an error: the splice and the frames
/// come from the same stop.
pub(crate) fn decorators<'py>(
    py: Python<'py>,
    frames: &[FrameReport],
    groups: Vec<(Py<PyAny>, Py<PyAny>, Vec<usize>)>,
    dap: bool,
    locals: Py<PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for (base, inferior, indices) in groups {
        let run = Py::new(
            py,
            DecoratorRun {
                base,
                inferior,
                dap,
                locals: locals.clone_ref(py),
            },
        )?;
        let mut shown = Vec::with_capacity(indices.len());
        for index in indices {
            let frame = frames.get(index).ok_or_else(|| {
                super::Error::new_err(format!(
                    "Python frame {index} of a splice is not among the thread's {} frames",
                    frames.len()
                ))
            })?;
            shown.push(Py::new(
                py,
                PythonFrameDecorator {
                    run: run.clone_ref(py),
                    index,
                    frame: frame.clone(),
                },
            )?);
        }
        out.append(PyList::new(py, shown)?)?;
    }
    Ok(out)
}
