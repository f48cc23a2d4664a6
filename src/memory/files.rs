//! Which file on this machine holds a file the target names (its executable, libpython...).
//!
//! | target | tried in order |
//! | --- | --- |
//! | live process | `/proc/PID/map_files/START-END` (the very file mapped, even deleted or replaced on disk), `/proc/PID/root/PATH` (its mount namespace: a container), PATH |
//! | core file | `--exe` for the executable, `SYSROOT/PATH`, `DIR/NAME` for each `--lib-search-path` DIR, PATH, then debuginfod by build-id |
//!
//! A core keeps the first page of each ELF file it maps, and with it the file's build-id note:
//! a candidate whose build-id differs is skipped; when none matches, the command line fetches
//! the file by that build-id from debuginfod ([`super::debuginfod`]), and failing that
//! the file is refused with both build-ids, since a different build at the same path decodes
//! garbage.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use object::Object;

use super::debuginfod::{self, Artifact, Client, Problems};
use super::FileMapping;
use crate::error::{Error, Result};

/// The distributions' directory of separate debug files (`-dbg`, `-dbgsym`, `-debuginfo`).
const DEBUG_ROOT: &str = "/usr/lib/debug";

/// Where to look for the files a core names, besides their own paths.
#[derive(Clone, Debug, Default)]
pub struct FileSearch {
    /// Files named `/a/b` are looked up as `SYSROOT/a/b` first (gdb's `set sysroot`).
    pub sysroot: Option<PathBuf>,
    /// Directories where files are looked up by their file name.
    pub search_path: Vec<PathBuf>,
    /// Where separate debug files are (gdb's `set debug-file-directory`); empty: the
    /// default, /usr/lib/debug.
    pub debug_dirs: Vec<PathBuf>,
    /// The run's debuginfod client (None: off): fetches the debug files that modules without
    /// DWARF lack and, for a core, its files that are missing here or of another build.
    pub debuginfod: Option<Arc<Client>>,
}

/// Resolves the paths a target names to files to open, checked, once per path.
#[derive(Debug, Default)]
pub struct FileLookup {
    search: FileSearch,
    /// A live process: read through its /proc entries.
    pid: Option<i32>,
    /// Path -> one of its mappings (`/proc/PID/map_files` names mappings by address range).
    ranges: HashMap<String, (u64, u64)>,
    /// Path named by the target -> file given instead (`--exe`).
    replace: HashMap<String, String>,
    /// Path -> build-id that the core records for it.
    build_ids: HashMap<String, Vec<u8>>,
    resolved: Mutex<HashMap<String, Result<String, String>>>,
    /// What debuginfod could not give, one line per module.
    problems: Arc<Problems>,
}

impl FileLookup {
    pub fn new(search: FileSearch) -> FileLookup {
        FileLookup {
            search,
            ..FileLookup::default()
        }
    }

    /// For a live process with these mappings.
    pub fn live(pid: i32, mappings: &[FileMapping]) -> FileLookup {
        let mut ranges = HashMap::new();
        for m in mappings {
            ranges.entry(m.path.clone()).or_insert((m.start, m.end));
        }
        FileLookup {
            pid: Some(pid),
            ranges,
            ..FileLookup::default()
        }
    }

    /// Where separate debug files are looked for, in order (gdb's debug-file-directory,
    /// under the sysroot or the live process's root first).
    pub fn debug_roots(&self) -> Vec<PathBuf> {
        let default = [PathBuf::from(DEBUG_ROOT)];
        let dirs = if self.search.debug_dirs.is_empty() {
            &default[..]
        } else {
            &self.search.debug_dirs[..]
        };
        let mut out = Vec::new();
        for dir in dirs {
            let d = dir.display().to_string();
            if let Some(root) = &self.search.sysroot {
                out.push(PathBuf::from(join_under(root, &d)));
            }
            if let Some(pid) = self.pid {
                out.push(PathBuf::from(format!("/proc/{pid}/root{d}")));
            }
            out.push(dir.clone());
        }
        out
    }

    /// The run's debuginfod client, if it has one.
    pub fn debuginfod(&self) -> Option<Arc<Client>> {
        self.search.debuginfod.clone()
    }

    /// Where what debuginfod could not give this target is said.
    pub fn problem_sink(&self) -> Arc<Problems> {
        self.problems.clone()
    }

    /// `--debug-file-directory` and debuginfod for a target made without a [`FileSearch`] (a
    /// live process).
    pub fn set_debug(&mut self, dirs: Vec<PathBuf>, debuginfod: Option<Arc<Client>>) {
        self.search.debug_dirs = dirs;
        self.search.debuginfod = debuginfod;
    }

    /// What debuginfod could not give so far (one line per module), for the report's errors.
    pub fn problems(&self) -> Vec<String> {
        self.problems.lines()
    }

    pub fn set_build_ids(&mut self, ids: HashMap<String, Vec<u8>>) {
        self.build_ids = ids;
        self.clear();
    }

    /// Read `file` for the path `named` (`--exe`).
    pub fn replace(&mut self, named: &str, file: &str) {
        self.replace.insert(named.to_string(), file.to_string());
        self.clear();
    }

    fn clear(&mut self) {
        self.resolved
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// The build-id the core records for `path`, if it kept that page.
    pub fn recorded_build_id(&self, path: &str) -> Option<&[u8]> {
        self.build_ids.get(path).map(|v| v.as_slice())
    }

    /// The file to open for `path`, or why there is none (one line naming the file).
    pub fn resolve(&self, path: &str) -> Result<String> {
        let mut cache = self.resolved.lock().unwrap_or_else(|e| e.into_inner());
        let r = cache
            .entry(path.to_string())
            .or_insert_with(|| self.find(path))
            .clone();
        r.map_err(|why| Error::bad_file(path, why))
    }

    fn candidates(&self, path: &str) -> Vec<String> {
        if let Some(f) = self.replace.get(path) {
            return vec![f.clone()];
        }
        let mut out = Vec::new();
        if let Some(pid) = self.pid {
            if let Some((start, end)) = self.ranges.get(path) {
                out.push(format!("/proc/{pid}/map_files/{start:x}-{end:x}"));
            }
            out.push(format!("/proc/{pid}/root{path}"));
        }
        if let Some(root) = &self.search.sysroot {
            out.push(join_under(root, path));
        }
        let name = Path::new(path).file_name();
        for dir in &self.search.search_path {
            if let Some(name) = name {
                out.push(dir.join(name).display().to_string());
            }
        }
        out.push(path.to_string());
        out.dedup();
        out
    }

    fn find(&self, path: &str) -> Result<String, String> {
        let want = self.build_ids.get(path);
        let mut mismatch = None;
        let candidates = self.candidates(path);
        for c in &candidates {
            if !Path::new(c).is_file() {
                continue;
            }
            let Some(want) = want else {
                return Ok(c.clone());
            };
            match file_build_id(c) {
                Some(got) if &got == want => return Ok(c.clone()),
                got => {
                    mismatch.get_or_insert((c.clone(), got));
                }
            }
        }
        // The file the core recorded, by its build-id.
        let mut fetch_failed = String::new();
        if let (Some(want), Some(client)) = (want, &self.search.debuginfod) {
            match client.fetch(want, Artifact::Executable, path) {
                Ok(p) => match p.to_str() {
                    Some(p) => return Ok(p.to_string()),
                    None => fetch_failed = "; debuginfod: the cache's path is not UTF-8".into(),
                },
                Err(why) => {
                    fetch_failed = format!("; debuginfod: {why}");
                    let line = debuginfod::problem(path, want, Artifact::Executable, &why);
                    self.problems.add(line);
                }
            }
        }
        match (mismatch, want) {
            (Some((file, got)), Some(want)) => Err(format!(
                "build-id {} in the core, {} in {}: a different build, refused{fetch_failed}",
                hex(want),
                got.map_or("none".to_string(), |g| hex(&g)),
                if file == path { "the file" } else { &file },
            )),
            _ => Err(format!(
                "file not found (looked for {}; see --sysroot, --lib-search-path, --exe){fetch_failed}",
                candidates.join(", ")
            )),
        }
    }
}

/// `root` + `path` with `path`'s leading `/`s dropped (Path::join would replace `root`).
fn join_under(root: &Path, path: &str) -> String {
    root.join(path.trim_start_matches('/'))
        .display()
        .to_string()
}

/// The GNU build-id of an ELF file.
pub fn file_build_id(path: &str) -> Option<Vec<u8>> {
    let data = super::mapped::FileBytes::open(path).ok()?;
    let obj = object::File::parse(data.bytes()).ok()?;
    obj.build_id().ok().flatten().map(|b| b.to_vec())
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The build-id note of an ELF image whose first page is `page` (as mapped or as on disk).
pub fn build_id_in_first_page(page: &[u8]) -> Option<Vec<u8>> {
    use object::elf;
    use object::read::elf::{FileHeader, ProgramHeader};
    let header = elf::FileHeader64::<object::Endianness>::parse(page).ok()?;
    let endian = header.endian().ok()?;
    for ph in header.program_headers(endian, page).ok()? {
        if ph.p_type(endian) != elf::PT_NOTE {
            continue;
        }
        // A note outside the first page is not in the core: no build-id to check against.
        let Ok(Some(mut notes)) = ph.notes(endian, page) else {
            continue;
        };
        while let Ok(Some(note)) = notes.next() {
            if note.name() == elf::ELF_NOTE_GNU && note.n_type(endian) == elf::NT_GNU_BUILD_ID {
                return Some(note.desc().to_vec());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysroot_and_search_path_come_before_the_path_itself() {
        let l = FileLookup::new(FileSearch {
            sysroot: Some("/srv/root".into()),
            search_path: vec!["/opt/libs".into()],
            ..FileSearch::default()
        });
        assert_eq!(
            l.candidates("/usr/lib/libpython3.12.so.1.0"),
            [
                "/srv/root/usr/lib/libpython3.12.so.1.0",
                "/opt/libs/libpython3.12.so.1.0",
                "/usr/lib/libpython3.12.so.1.0"
            ]
        );
    }

    #[test]
    fn debug_file_directories_replace_the_default_under_the_sysroot_too() {
        let l = FileLookup::new(FileSearch {
            sysroot: Some("/srv/root".into()),
            debug_dirs: vec!["/opt/debug".into()],
            ..FileSearch::default()
        });
        assert_eq!(
            l.debug_roots(),
            [
                PathBuf::from("/srv/root/opt/debug"),
                PathBuf::from("/opt/debug")
            ]
        );
        let l = FileLookup::new(FileSearch::default());
        assert_eq!(l.debug_roots(), [PathBuf::from("/usr/lib/debug")]);
    }

    #[test]
    fn a_missing_file_is_named_with_every_place_tried() {
        let l = FileLookup::new(FileSearch {
            sysroot: Some("/nonexistent-root".into()),
            search_path: vec![],
            ..FileSearch::default()
        });
        let e = l
            .resolve("/nonexistent/libpython3.12.so")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/nonexistent/libpython3.12.so: file not found (looked for /nonexistent-root/nonexistent/libpython3.12.so, /nonexistent/libpython3.12.so"), "{e}");
    }
}
