//! The report model (`../shared/REPORT.md`), shared by every frontend, and its text rendering.

pub mod text;

use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub python: PythonReport,
    pub threads: Vec<ThreadReport>,
    pub errors: Vec<ErrorReport>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PythonReport {
    pub version: String,
    pub free_threaded: bool,
    pub jit: bool,
    /// How the interpreter and its layout were found.
    pub found_by: String,
    /// "live", "core" or "debugger".
    pub source: &'static str,
    pub pid: Option<u32>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ThreadReport {
    pub native_id: Option<u64>,
    pub thread_id: u64,
    pub name: Option<String>,
    pub holds_gil: Option<bool>,
    /// Address of the thread's `PyInterpreterState`.
    pub interpreter: u64,
    /// Address of the `PyThreadState`.
    pub thread_state: u64,
    pub frames: Vec<FrameReport>,
    /// The stack was deeper than the walk's cap; `frames` holds the innermost part.
    pub truncated: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FrameKind {
    Python,
    Native,
    Jit,
    Unreadable,
}

#[derive(Clone, Debug, Serialize)]
pub struct FrameReport {
    pub kind: FrameKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<bool>,
    /// For Python frames: the interpreter frame's address; for native ones: the PC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locals: Option<Vec<LocalReport>>,
}

#[derive(Clone, Debug, Serialize)]
pub struct LocalReport {
    pub name: String,
    pub repr: String,
    pub is_arg: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct ErrorReport {
    pub address: u64,
    pub what: String,
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
            reason: Some(reason),
            locals: None,
        }
    }
}
