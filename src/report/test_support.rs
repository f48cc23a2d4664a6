//! What the report model's unit tests build their reports from.

use crate::model::{
    FrameKind, FrameReport, PythonReport, Report, SourceKind, TaskReport, ThreadReport,
};

/// A Python frame of `function` in `file` at `line` (its address made up from the line).
pub(crate) fn python_frame(function: &str, file: &str, line: u32) -> FrameReport {
    FrameReport {
        kind: FrameKind::Python,
        function: Some(function.into()),
        file: Some(file.into()),
        line: Some(line),
        entry: Some(false),
        address: Some(0x1000 + line as u64),
        interpreter_id: None,
        detail: None,
    }
}

/// A live report of process `pid` (CPython `version`) holding `threads` and nothing else.
pub(crate) fn report_of(version: &str, pid: u32, threads: Vec<ThreadReport>) -> Report {
    Report {
        python: PythonReport {
            version: version.into(),
            free_threaded: false,
            jit: false,
            found_by: String::new(),
            source: SourceKind::Live,
            pid: Some(pid),
        },
        crash: None,
        threads,
        interpreters: Vec::new(),
        tasks: None,
        cycles: None,
        loops: None,
        greenlets: None,
        native_stops: None,
        deadlocks: None,
        task_waits: None,
        heap: None,
        errors: Vec::new(),
    }
}

/// A core's report (CPython 3.14) of `tasks`, with no await cycle and no loop.
pub(crate) fn tasks_report(tasks: Vec<TaskReport>) -> Report {
    let mut r = report_of("3.14.0", 0, Vec::new());
    r.python.found_by = "test".into();
    r.python.source = SourceKind::Core;
    r.python.pid = None;
    r.tasks = Some(tasks);
    r.cycles = Some(Vec::new());
    r.loops = Some(Vec::new());
    r
}

/// A Python thread `lwp` (its native id and thread id), named `t<lwp>`, with `frames`.
pub(crate) fn thread_of(lwp: u64, frames: Vec<FrameReport>) -> ThreadReport {
    ThreadReport {
        native_id: Some(lwp),
        thread_id: Some(lwp),
        name: Some(format!("t{lwp}")),
        native_name: None,
        holds_gil: Some(false),
        interpreter: Some(0),
        interpreter_id: None,
        thread_state: Some(0),
        frames,
        truncated: false,
        why: None,
    }
}
