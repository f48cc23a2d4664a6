//! A target: one memory source (behind a page cache) and the files mapped into it.

use std::sync::Arc;

use crate::arch::Arch;
use crate::binary::{parse_proc_maps, read_proc_maps_text, ElfInfo, FileMapping, Module};
use crate::error::{Error, Result};
use crate::memory::{
    CoreMemory, CoreThread, FileLookup, LiveMemory, Memory, PageCache, SignalNotes,
};

pub use crate::memory::FileSearch;
/// The report's `python.source` is the target's kind, word for word.
pub use crate::model::SourceKind;

pub struct Target {
    pub mem: Arc<dyn Memory>,
    /// The target's architecture: the core's, else its executable's.
    pub arch: Arch,
    pub kind: SourceKind,
    pub mappings: Vec<FileMapping>,
    pub pid: Option<u32>,
    /// Threads of a core file (LWP and registers); empty for other sources.
    pub core_threads: Vec<CoreThread>,
    /// What a core's notes say about the signal it stopped with; None for other sources.
    pub signal_notes: Option<SignalNotes>,
    /// A core's name of its main thread (the LWP `pid`), where the core records it
    /// ([`crate::memory::CoreFile::process_name`]); None for other sources, which name each
    /// thread themselves.
    pub process_name: Option<String>,
    /// Which local file holds each file the target names.
    pub files: Arc<FileLookup>,
    /// What could not be found of the loaded modules when they came from the dynamic
    /// linker's list (a core without NT_FILE, a remote stub): one line each.
    pub module_problems: Vec<String>,
    /// Every mapping of the address space, file-backed or not, as `[start, end)` in ascending
    /// order (a core's segments, /proc/PID/maps); empty where the source does not say.
    pub regions: Vec<(u64, u64)>,
    /// Addresses known to lie on a thread's stack, as (LWP, address): a core's stack
    /// pointers, a live process's `[stack]` (its main thread's).
    pub stack_anchors: Vec<(u64, u64)>,
    /// A core's written anonymous bytes ([`crate::memory::CoreFile::anonymous_written_bytes`]);
    /// None for other sources.
    pub core_anonymous_bytes: Option<u64>,
    /// `[start, end)` of the vDSO, the kernel's image that the C library calls for the time
    /// of day and clocks: it is no file, yet its CFI is what lets a native walk leave a thread
    /// stopped in it. /proc/PID/maps's `[vdso]`; a core's region at `AT_SYSINFO_EHDR`; None
    /// where the source does not say (a debugger's target).
    pub vdso: Option<(u64, u64)>,
}

/// elf.h: the auxiliary vector's entry for the vDSO's ELF header.
const AT_SYSINFO_EHDR: u64 = 33;

impl Target {
    /// A live local process.
    pub fn live(pid: i32) -> Result<Target> {
        if pid <= 0 {
            return Err(Error::Usage(format!("invalid pid {pid}")));
        }
        // Read once: the kernel formats a large process's maps anew at each read.
        let maps = read_proc_maps_text(pid)?;
        let mappings = parse_proc_maps(&maps);
        let mem = LiveMemory::new(pid);
        // Probe once so that a permission problem is one clear error, not a stack of them.
        if let Some(m) = mappings.first() {
            if let Err(e) = mem.read_u8(m.start) {
                if let crate::error::ReadErrorKind::Os(errno) = e.kind {
                    return Err(Error::Usage(format!(
                        "cannot read the memory of process {pid}: {} (run as the same user or root, and check /proc/sys/kernel/yama/ptrace_scope)",
                        std::io::Error::from_raw_os_error(errno)
                    )));
                }
            }
        }
        let files = Arc::new(FileLookup::live(pid, &mappings));
        let (regions, stack) = crate::binary::parse_proc_regions(&maps);
        let vdso = crate::binary::proc_maps_named(&maps, "[vdso]");
        let arch = Arch::of_file(&format!("/proc/{pid}/exe")).unwrap_or_default();
        Ok(Target {
            mem: Arc::new(PageCache::sparse(mem)),
            arch,
            kind: SourceKind::Live,
            mappings,
            pid: Some(pid as u32),
            core_threads: Vec::new(),
            signal_notes: None,
            process_name: None,
            files,
            module_problems: Vec::new(),
            regions,
            stack_anchors: stack
                .map(|(start, _)| vec![(pid as u64, start)])
                .unwrap_or_default(),
            core_anonymous_bytes: None,
            vdso,
        })
    }

    /// This live process read anew: a fresh cache over its memory, and its mappings, files
    /// and architecture as read before (a sampler's next sample, which need not read and
    /// parse /proc/PID/maps again: [`crate::sample::window::Basis`]). None for other sources.
    pub fn again(&self) -> Option<Target> {
        let pid = self.pid.filter(|_| self.kind == SourceKind::Live)?;
        Some(Target {
            mem: Arc::new(PageCache::sparse(LiveMemory::new(pid as i32))),
            arch: self.arch,
            kind: self.kind,
            mappings: self.mappings.clone(),
            pid: self.pid,
            core_threads: Vec::new(),
            signal_notes: None,
            process_name: None,
            files: self.files.clone(),
            module_problems: self.module_problems.clone(),
            regions: self.regions.clone(),
            stack_anchors: self.stack_anchors.clone(),
            core_anonymous_bytes: None,
            vdso: self.vdso,
        })
    }

    /// A core file; `exe` replaces the executable the core names (checked to match).
    pub fn core(path: &str, exe: Option<&str>) -> Result<Target> {
        Target::core_with(path, exe, FileSearch::default())
    }

    /// A core file (plain or compressed) whose files are looked up as `search` says.
    pub fn core_with(path: &str, exe: Option<&str>, search: FileSearch) -> Result<Target> {
        let mut mem = CoreMemory::open_with_exe(path, search, exe)?;
        let info = mem.info().clone();
        if info.mappings.is_empty() {
            return Err(Error::bad_file(
                path,
                "core file has no NT_FILE note (mapped files unknown)",
            ));
        }
        if let Some(exe) = exe {
            let named = info.exe_path().unwrap_or_default().to_string();
            check_exe_matches(&mem, &info.mappings, &named, exe)?;
            mem.replace_file(&named, exe);
        }
        let files = mem.lookup();
        let regions = info.regions();
        let vdso = info
            .auxv
            .iter()
            .find(|(key, _)| *key == AT_SYSINFO_EHDR)
            .and_then(|(_, at)| regions.iter().copied().find(|(s, e)| s <= at && at < e));
        let core_anonymous_bytes = Some(info.anonymous_written_bytes());
        let stack_anchors = info
            .threads
            .iter()
            .map(|t| (t.lwp as u64, t.regs.sp()))
            .collect();
        // A mapped core is read by copying out of the mapping: a cache would copy twice.
        let mem: Arc<dyn Memory> = if mem.is_mapped() {
            Arc::new(mem)
        } else {
            Arc::new(PageCache::new(mem))
        };
        Ok(Target {
            arch: info.arch,
            mem,
            kind: SourceKind::Core,
            mappings: info.mappings,
            pid: info.pid,
            core_threads: info.threads,
            signal_notes: Some(info.signal),
            process_name: info.process_name,
            files,
            module_problems: info.module_problems,
            regions,
            stack_anchors,
            core_anonymous_bytes,
            vdso,
        })
    }

    /// Any other memory (a debugger's read function), with mappings the frontend found.
    /// `search` is the debugger's sysroot (gdb's `set sysroot`, lldb's platform sysroot).
    pub fn with_memory(
        mem: Arc<dyn Memory>,
        mappings: Vec<FileMapping>,
        pid: Option<u32>,
        search: FileSearch,
    ) -> Target {
        let files = Arc::new(FileLookup::new(search));
        // The executable's (the first mapping's) architecture: a debugger may read a target
        // of another architecture than its host's (gdb-multiarch).
        let arch = mappings
            .first()
            .and_then(|m| Arch::of_file(&files.resolve(&m.path).ok()?))
            .unwrap_or_default();
        Target {
            mem,
            arch,
            kind: SourceKind::Debugger,
            mappings,
            pid,
            core_threads: Vec::new(),
            signal_notes: None,
            process_name: None,
            files,
            module_problems: Vec::new(),
            regions: Vec::new(),
            stack_anchors: Vec::new(),
            core_anonymous_bytes: None,
            vdso: None,
        }
    }

    /// A debugger target that knows no mappings (gdb attached to a remote stub such as
    /// qemu-user's has no `info proc mappings`): places the modules from the auxiliary vector
    /// and the dynamic linker's list, as for a core without NT_FILE ([`crate::memory::link_map`]).
    /// `exe` is the executable the debugger loaded, `exe_base` where its ELF header is loaded
    /// (for a debugger that has no auxiliary vector to give). Returns what could not be found.
    pub fn place_modules(
        &mut self,
        auxv: &[(u64, u64)],
        exe: Option<&str>,
        exe_base: Option<u64>,
    ) -> Result<Vec<String>> {
        if !self.mappings.is_empty() {
            return Ok(Vec::new());
        }
        let found = crate::memory::link_map::find(&*self.mem, auxv, &self.files, exe, exe_base)
            .map_err(|e| Error::Usage(format!("the debugger shows no mappings, and {e}")))?;
        self.mappings = found.mappings;
        self.module_problems = found.problems.clone();
        if let Some(a) = self
            .mappings
            .first()
            .and_then(|m| Arch::of_file(&self.files.resolve(&m.path).ok()?))
        {
            self.arch = a;
        }
        Ok(found.problems)
    }

    pub fn modules(&self) -> Vec<Module> {
        Module::from_mappings(&self.mappings)
    }

    /// The file to open for a path named by the target, checked against the build-id the
    /// target records for it; the error names the file.
    pub fn real_path(&self, path: &str) -> Result<String> {
        self.files.resolve(path)
    }
}

/// The executable given with `--exe` must be the one the core mapped: an ELF file that is not a
/// core, with the same ELF header as the core's copy of its first page when the core has it.
fn check_exe_matches(mem: &CoreMemory, maps: &[FileMapping], named: &str, exe: &str) -> Result<()> {
    let info = ElfInfo::load(exe, &[])?;
    if info.is_core {
        return Err(Error::bad_file(exe, "is a core file, not an executable"));
    }
    // The build-id decides when the core holds it: two builds of the same source can share
    // their first 64 bytes (pyenv's 3.10 and 3.11 `python3` launchers do).
    if let (Some(recorded), Some(on_disk)) = (
        mem.lookup().recorded_build_id(named).map(<[u8]>::to_vec),
        crate::memory::file_build_id(exe),
    ) {
        if recorded != on_disk {
            return Err(Error::bad_file(
                exe,
                format!(
                    "does not match the executable of this core ({named}): build-id {} here, {} in the core",
                    crate::memory::hex(&on_disk),
                    crate::memory::hex(&recorded)
                ),
            ));
        }
        return Ok(());
    }
    let Some(first) = maps.iter().find(|m| m.path == named && m.offset == 0) else {
        return Ok(());
    };
    if mem.info().has_bytes(first.start, 64) {
        let mut in_core = [0u8; 64];
        if mem.read_into(first.start, &mut in_core).is_ok() {
            let mut on_disk = [0u8; 64];
            let read = std::fs::File::open(exe)
                .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut on_disk));
            read.map_err(|e| Error::io(exe, e))?;
            if on_disk != in_core {
                return Err(Error::bad_file(
                    exe,
                    format!("does not match the executable of this core ({named})"),
                ));
            }
        }
    }
    Ok(())
}
