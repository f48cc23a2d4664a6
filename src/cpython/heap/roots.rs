//! Where retaining starts: the modules and the frame locals the session names.

/// A module of `sys.modules`, or a local of a thread's frame: where retaining starts.
#[derive(Clone, Debug, Default)]
pub struct Roots {
    /// Each interpreter's `sys.modules`: (module, its name there).
    pub modules: Vec<(u64, String)>,
    pub locals: Vec<LocalRoot>,
}

#[derive(Clone, Debug)]
pub struct LocalRoot {
    pub obj: u64,
    pub name: String,
    /// The frame's code's qualified name.
    pub function: String,
    /// The thread's native id and name.
    pub thread: Option<u64>,
    pub thread_name: Option<String>,
}
