//! The targets the debuggers hand the core: a memory read through the debugger's callback,
//! with its mappings (or modules placed without them), and the debugger's sysroot as the file
//! search.

use std::sync::Arc;

use pyo3::prelude::*;

use crate::binary::parse_proc_maps;
use crate::memory::{CallbackMemory, PageCache};
use crate::target::{FileSearch, Target};

/// The debugger's sysroot (gdb's `set sysroot`, lldb's platform sysroot) as a file search;
/// empty means none. No debuginfod: in a debugger, the debugger fetches debug info itself (its
/// own client, settings and prompt), and a download must not stall its commands.
pub(super) fn search(sysroot: Option<String>) -> FileSearch {
    FileSearch {
        sysroot: sysroot.filter(|s| !s.is_empty()).map(Into::into),
        search_path: Vec::new(),
        debug_dirs: Vec::new(),
        debuginfod: None,
    }
}

/// Where a debugger that shows no mappings has the modules found from
/// ([`Target::place_modules`]): the auxiliary vector (gdb's `info auxv`), the executable it
/// loaded, and where that executable's ELF header is loaded (lldb, which has no auxv to give).
pub(super) struct Unmapped<'a> {
    pub(super) auxv: Option<Vec<(u64, u64)>>,
    pub(super) exe: Option<&'a str>,
    pub(super) exe_base: Option<u64>,
}

/// A target read through the debugger's `read(addr, size) -> bytes`; `unmapped` places the
/// modules when `maps` is empty.
pub(super) fn callback_target(
    read: Py<PyAny>,
    maps: &str,
    pid: Option<u32>,
    sysroot: Option<String>,
    unmapped: Unmapped<'_>,
) -> crate::Result<Target> {
    let mem = CallbackMemory::new(move |addr: u64, len: usize| {
        Python::attach(|py| {
            read.call1(py, (addr, len))
                .ok()?
                .extract::<Vec<u8>>(py)
                .ok()
        })
    });
    let mut t = Target::with_memory(
        Arc::new(PageCache::new(mem)),
        parse_proc_maps(maps),
        pid,
        search(sysroot),
    );
    if t.mappings.is_empty() && (unmapped.auxv.is_some() || unmapped.exe_base.is_some()) {
        let auxv = unmapped.auxv.unwrap_or_default();
        t.place_modules(&auxv, unmapped.exe, unmapped.exe_base)?;
    }
    Ok(t)
}
