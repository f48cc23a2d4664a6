//! What the readers of CPython's objects decode and share: code objects, frames and type
//! objects as the stop's caches keep them, and the one checked field address. Apart from the
//! readers (`code`, `frames`, `objects`, `callables`, all methods of [`super::Snapshot`]) so that
//! the snapshot, which caches them, and the readers import these downward.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use super::layout::LineTable;
use crate::error::ReadError;
use crate::memory::addr_map::AddrMap;

/// `base + offset` of a field of a target object, an error if it overflows.
pub fn field(base: u64, offset: u64) -> Result<u64, ReadError> {
    base.checked_add(offset)
        .ok_or_else(|| ReadError::corrupt(base, "address overflow"))
}

/// What we know of a type object.
#[derive(Clone, Debug)]
pub struct TypeInfo {
    pub addr: u64,
    pub name: String,
    pub flags: u64,
    pub basicsize: u64,
    pub dictoffset: i64,
    /// `tp_base` (0 for `object`).
    pub base: u64,
}

#[derive(Clone, Debug)]
pub struct Code {
    pub addr: u64,
    pub name: String,
    /// `co_qualname` (3.11+), else `co_name`.
    pub qualname: Arc<str>,
    pub filename: Arc<str>,
    pub firstlineno: u32,
    pub(super) linetable: Vec<u8>,
    pub(super) line_table: LineTable,
    /// Address of the first code unit (3.11+), for `_PyInterpreterFrame_LASTI`.
    pub code_start: u64,
    /// The bytecode as (address of the first code unit, number of code units): 3.11+'s
    /// inline `co_code_adaptive`, 3.10's `co_code` bytes. None when it cannot be read (the
    /// code's other fields are still good).
    pub bytecode: Option<(u64, u64)>,
    pub argcount: u32,
    pub flags: u32,
    /// `co_stacksize`: slots in a frame's value stack, when readable and sane.
    pub stacksize: Option<u32>,
    /// Local names in `localsplus` order, with their kind bits (3.11+) or a synthetic kind.
    pub locals: Vec<(String, u8)>,
    /// Instruction offset -> line, as already decoded.
    pub(super) line_memo: Arc<LineMemo>,
}

/// The lines of a code object's instructions as already decoded: the last one asked, read by
/// threads without a lock (100,000 suspended coroutines of one function ask about the same
/// instruction), and every one under a lock.
#[derive(Debug, Default)]
pub(super) struct LineMemo {
    /// (instruction + 1) << 32 | (line + 1, 0 for none); 0 before the first.
    pub last: AtomicU64,
    pub lines: Mutex<AddrMap<Option<u32>>>,
}

/// One decoded Python frame.
#[derive(Clone, Debug)]
pub struct PyFrame {
    /// The `_PyInterpreterFrame` (3.11+) or `PyFrameObject` (3.10).
    pub addr: u64,
    pub code: Arc<Code>,
    pub line: Option<u32>,
    /// The index of the frame's current instruction in code units (3.10 `f_lasti`; 3.11+
    /// `_PyInterpreterFrame_LASTI`), None when the frame has not started or points outside
    /// its code.
    pub lasti: Option<u32>,
    /// The outermost frame of its eval-loop call: the frame an eval-loop native frame was
    /// entered with.
    pub entry: bool,
    /// For an entry frame (3.12+): the address of the eval loop's own entry frame below it,
    /// which lives in that eval loop's C stack frame, so it tells which native frame runs it.
    pub shim: Option<u64>,
}

/// The type names of the callables we recognise.
pub fn is_cfunction_type(name: &str) -> bool {
    matches!(name, "builtin_function_or_method" | "builtin_method")
}
