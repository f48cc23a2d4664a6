//! `Session.modules()`: the target's loaded ELF files as the session placed them, for a
//! debugger that knows fewer. lldb reading a core without NT_FILE (qemu-user's) finds the
//! shared libraries only through its platform sysroot, given before the core was loaded, and
//! never the dynamic linker (its `l_name` points into text such a core leaves out); the lldb
//! script adds what it lacks from this list (`SBTarget.AddModule`, `SetModuleLoadAddress`),
//! so that lldb symbolizes, unwinds and reads text there too.
//!
//! ```text
//! s = _pyunwind.Session.core(core, sysroot=root)
//! json.loads(s.modules())
//! # {"modules": [{"path": "/lib/aarch64-linux-gnu/libc.so.6",
//! #               "file": "/srv/root/lib/aarch64-linux-gnu/libc.so.6",
//! #               "base": 366218969088, "start": …, "end": …}, …],
//! #  "problems": ["/lib/…/libfoo.so: not found (looked in …)", …]}
//! ```

use serde::Serialize;

use crate::arch::Arch;
use crate::session::Session;

/// One loaded ELF file.
#[derive(Serialize)]
pub struct LoadedModule {
    /// The path the target names it by (the dynamic linker's, NT_FILE's).
    pub path: String,
    /// The local file that holds it (under the sysroot), checked as the session reads it.
    pub file: String,
    /// Where its file offset 0 is mapped: the load bias plus the page-aligned address of its
    /// first segment.
    pub base: u64,
    pub start: u64,
    pub end: u64,
}

/// What [`modules`] returns: the files found, and what the dynamic linker's list could not
/// place (one line each; none for a core with NT_FILE).
#[derive(Serialize, Default)]
pub struct Modules {
    pub modules: Vec<LoadedModule>,
    pub problems: Vec<String>,
}

/// The session's modules that are ELF files of the target's architecture (not the data files
/// a process maps: locale archives, caches), each with its local file; a file found nowhere
/// is left out.
pub fn modules(s: &Session) -> Modules {
    let t = &s.target;
    let mut out = Modules {
        problems: t.module_problems.clone(),
        ..Modules::default()
    };
    for m in t.modules() {
        if let Ok(file) = t.real_path(&m.path) {
            if Arch::of_file(&file) == Some(t.arch) {
                out.modules.push(LoadedModule {
                    path: m.path,
                    file,
                    base: m.base,
                    start: m.start,
                    end: m.end,
                });
            }
        }
    }
    out
}
