//! Where more symbols and DWARF for a stripped file are: a separate debug file, found by
//! build-id (`<root>/.build-id/ab/cdef….debug`) or by `.gnu_debuglink` (next to the file, in
//! its `.debug/`, or under `<root>` at the file's own directory), as gdb finds them, else
//! fetched by build-id from debuginfod ([`crate::memory::debuginfod`], the command line only); and
//! MiniDebugInfo (`.gnu_debugdata`: an xz-compressed ELF holding the `.symtab` of functions
//! a stripped file keeps for unwinders, Fedora and others).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object::{Object, ObjectSection};

use crate::memory::debuginfod::{self, Artifact, Client, Problems};
use crate::memory::FileLookup;

/// The largest MiniDebugInfo we decompress.
const MAX_MINI_DEBUG_BYTES: u64 = 64 << 20;

/// Where a target's separate debug files are looked for.
#[derive(Clone, Debug, Default)]
pub struct DebugSearch {
    /// Directories of debug files, in order (gdb's debug-file-directory).
    pub roots: Vec<PathBuf>,
    /// The run's debuginfod client (None: off), for a file without DWARF whose debug file is
    /// under none of the roots.
    pub debuginfod: Option<Arc<Client>>,
    /// Where what could not be fetched is said (the target's error entries).
    pub problems: Arc<Problems>,
}

impl DebugSearch {
    /// Where the debug files of `files`' target are: its debug roots, then the run's
    /// debuginfod, whose failures are reported with the target's errors.
    pub fn of(files: &FileLookup) -> DebugSearch {
        DebugSearch {
            roots: files.debug_roots(),
            debuginfod: files.debuginfod(),
            problems: files.problem_sink(),
        }
    }
}

/// The separate debug file of the ELF file at `path` (whose parsed form is `obj`), if one is
/// found under `debug.roots` with the same build-id, or fetched from debuginfod.
pub fn find<'d, O: Object<'d>>(obj: &O, path: &str, debug: &DebugSearch) -> Option<String> {
    let id = obj.build_id().ok().flatten();
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(id) = id.filter(|id| id.len() >= 2) {
        let hex = crate::memory::hex(id);
        for r in &debug.roots {
            candidates.push(
                r.join(".build-id")
                    .join(&hex[..2])
                    .join(format!("{}.debug", &hex[2..])),
            );
        }
    }
    if let Some((name, _crc)) = obj.gnu_debuglink().ok().flatten() {
        if let (Ok(name), Some(dir)) = (std::str::from_utf8(name), Path::new(path).parent()) {
            candidates.push(dir.join(name));
            candidates.push(dir.join(".debug").join(name));
            let rel = dir.strip_prefix("/").unwrap_or(dir);
            for r in &debug.roots {
                candidates.push(r.join(rel).join(name));
            }
        }
    }
    let local = candidates
        .into_iter()
        .filter(|c| c.is_file() && c.to_str() != Some(path))
        .find(|c| {
            // A debug file of another build names other addresses: the build-ids must agree.
            let Some(want) = id else { return true };
            crate::memory::file_build_id(&c.display().to_string()).as_deref() == Some(want)
        })
        .map(|c| c.display().to_string());
    if local.is_some() {
        return local;
    }
    // A file with DWARF of its own lacks nothing a debug file would bring.
    let client = debug.debuginfod.as_ref()?;
    let id = id.filter(|id| !id.is_empty())?;
    if obj.section_by_name(".debug_info").is_some() {
        return None;
    }
    let module = debuginfod::shown_name(path);
    let fetched = client
        .fetch(id, Artifact::Debuginfo, &module)
        .and_then(|p| {
            p.to_str()
                .map(str::to_string)
                .ok_or_else(|| format!("{}: the cache's path is not UTF-8", p.display()))
        });
    match fetched {
        Ok(p) => Some(p),
        Err(why) => {
            let line = debuginfod::problem(&module, id, Artifact::Debuginfo, &why);
            debug.problems.add(line);
            None
        }
    }
}

/// The decompressed MiniDebugInfo ELF image of `obj`, if it has one.
pub fn mini_debug_info<'d, O: Object<'d>>(obj: &O) -> Option<Vec<u8>> {
    let sec = obj.section_by_name(".gnu_debugdata")?;
    let data = sec.data().ok()?;
    let mut out = Vec::new();
    liblzma::read::XzDecoder::new(data)
        .take(MAX_MINI_DEBUG_BYTES)
        .read_to_end(&mut out)
        .ok()?;
    Some(out)
}
