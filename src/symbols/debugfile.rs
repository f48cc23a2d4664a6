//! Where more symbols and DWARF for a stripped file are: a separate debug file, found by
//! build-id (`<root>/.build-id/ab/cdef….debug`) or by `.gnu_debuglink` (next to the file, in
//! its `.debug/`, or under `<root>` at the file's own directory), as gdb finds them; and
//! MiniDebugInfo (`.gnu_debugdata`: an xz-compressed ELF holding the `.symtab` of functions
//! a stripped file keeps for unwinders, Fedora and others).

use std::io::Read;
use std::path::{Path, PathBuf};

use object::{Object, ObjectSection};

/// The largest MiniDebugInfo we decompress.
const MAX_MINI_DEBUG_BYTES: u64 = 64 << 20;

/// The separate debug file of the ELF file at `path` (whose parsed form is `obj`), if one is
/// found under `roots` with the same build-id.
pub fn find<'d, O: Object<'d>>(obj: &O, path: &str, roots: &[PathBuf]) -> Option<String> {
    let id = obj.build_id().ok().flatten();
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(id) = id.filter(|id| id.len() >= 2) {
        let hex = crate::memory::hex(id);
        for r in roots {
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
            for r in roots {
                candidates.push(r.join(rel).join(name));
            }
        }
    }
    candidates
        .into_iter()
        .filter(|c| c.is_file() && c.to_str() != Some(path))
        .find(|c| {
            // A debug file of another build names other addresses: the build-ids must agree.
            let Some(want) = id else { return true };
            crate::memory::file_build_id(&c.display().to_string()).as_deref() == Some(want)
        })
        .map(|c| c.display().to_string())
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
