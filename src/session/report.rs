//! The report of a stop's threads (`py-bt`, `pid`/`core`, `--json`): each decoded thread with
//! its Python frames, the errors the decoding met, and the crash.

use super::{names, DecodedThread, Session, ThreadKey};
use crate::cpython::FrameItem;
use crate::error::Result;
use crate::model::{
    ErrorReport, FrameDetail, FrameKind, FrameReport, InterpreterReport, LocalReport, PythonReport,
    Report, ThreadReport,
};

pub fn python_report(s: &Session) -> PythonReport {
    PythonReport {
        version: s.snap.layout.version.to_string(),
        free_threaded: s.snap.layout.free_threaded,
        jit: false,
        found_by: s.snap.found_by.clone(),
        source: s.target.kind,
        pid: s.target.pid,
    }
}

pub fn frame_report(s: &Session, item: &FrameItem, with_locals: bool) -> FrameReport {
    match item {
        FrameItem::Python(p) => FrameReport {
            kind: FrameKind::Python,
            function: Some(p.code.qualname.clone()),
            file: Some(p.code.filename.clone()),
            line: p.line,
            entry: Some(p.entry),
            address: Some(p.addr),
            interpreter_id: None,
            detail: with_locals.then(|| {
                let locals = s.locals(p).unwrap_or_else(|e| {
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
        FrameItem::Unreadable { addr, error } => FrameReport::unreadable(*addr, error.to_string()),
    }
}

/// Frame `index` of thread `t`, with the id of the interpreter that runs it.
pub fn thread_frame_report(
    s: &Session,
    t: &DecodedThread,
    index: usize,
    item: &FrameItem,
    with_locals: bool,
) -> FrameReport {
    let mut f = frame_report(s, item, with_locals);
    f.interpreter_id = interpreter_id(s, t.state_of(index).interp);
    f
}

pub fn thread_report(s: &Session, t: &DecodedThread, with_locals: bool) -> ThreadReport {
    let frames: Vec<FrameReport> = t
        .walk
        .items
        .iter()
        .enumerate()
        .map(|(i, item)| thread_frame_report(s, t, i, item, with_locals))
        .collect();
    ThreadReport {
        native_id: t.info.native_id,
        thread_id: Some(t.info.thread_id),
        name: t.info.name.clone(),
        // A thread `record` does not walk needs no name: /proc's would cost it a file.
        native_name: t
            .info
            .native_id
            .filter(|lwp| s.walks(Some(*lwp)))
            .and_then(|lwp| names::native_name(s, lwp)),
        holds_gil: t.info.holds_gil,
        interpreter: Some(t.info.interp),
        interpreter_id: interpreter_id(s, t.info.interp),
        thread_state: Some(t.info.addr),
        frames,
        truncated: t.walk.truncated,
        why: None,
    }
}

/// The id of the interpreter at `interp`, where it was read.
pub fn interpreter_id(s: &Session, interp: u64) -> Option<u32> {
    s.interpreters().iter().find(|i| i.addr == interp)?.id
}

/// Every interpreter, as the report's `interpreters`.
pub fn interpreters_report(s: &Session) -> Vec<InterpreterReport> {
    s.interpreters()
        .iter()
        .map(|i| InterpreterReport {
            id: i.id,
            address: i.addr,
            whence: i.whence,
        })
        .collect()
}

/// How `errors` names a thread: its LWP, else its `pthread_t`.
pub fn thread_label(t: &ThreadReport) -> u64 {
    t.native_id.or(t.thread_id).unwrap_or(0)
}

/// The report for every thread (`key` = None) or one.
pub fn report(s: &Session, key: Option<ThreadKey>, with_locals: bool) -> Result<Report> {
    let threads: Vec<&DecodedThread> = match key {
        None => s.threads().iter().collect(),
        Some(k) => vec![s.thread(k)?],
    };
    let mut errors: Vec<ErrorReport> = s.crash.1.clone();
    errors.extend(s.target.module_problems.iter().map(|p| ErrorReport {
        address: 0,
        what: format!("loaded modules: {p}"),
    }));
    // A core's files fetched from debuginfod while it was opened and read.
    errors.extend(
        s.target
            .files
            .problems()
            .into_iter()
            .map(|what| ErrorReport { address: 0, what }),
    );
    errors.extend(s.decoded().errors.iter().map(ErrorReport::from));
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
        .map(|t| thread_report(s, t, with_locals))
        .collect();
    for t in &threads {
        for f in t.frames.iter().filter(|f| f.kind == FrameKind::Unreadable) {
            errors.push(ErrorReport {
                address: f.address.unwrap_or(0),
                what: format!(
                    "thread {}: frame: {}",
                    thread_label(t),
                    f.reason().unwrap_or_default()
                ),
            });
        }
    }
    Ok(Report {
        python: python_report(s),
        crash: s.crash().cloned(),
        threads,
        interpreters: interpreters_report(s),
        tasks: None,
        greenlets: None,
        cycles: None,
        loops: None,
        native_stops: None,
        deadlocks: None,
        task_waits: None,
        heap: None,
        errors,
    })
}
