//! ELF core files: PT_LOAD segments, the NT_FILE note (which file is mapped where), the
//! NT_PRSTATUS notes (one per thread: LWP and registers), and what the notes say about the
//! signal the process stopped with ([`SignalNotes`], read by [`crate::memory::crash`]). Bytes that
//! the core left out but that a mapped file holds (`gcore` skips read-only file-backed pages
//! such as libpython's text and rodata) are read from that file, found and checked by
//! [`FileLookup`]. Compressed cores are unpacked first ([`super::unpack`]).

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader};
use object::{Endianness, ReadCache};

use super::files::{build_id_in_first_page, FileLookup, FileSearch};
use super::{unpack, Memory};
use crate::arch::{u64_at, Arch};
use crate::error::{Error, ReadError, ReadErrorKind, Result};

/// Caps on what a core's headers may claim, so a corrupt core cannot make us allocate.
const MAX_SEGMENTS: usize = 1 << 16;
const MAX_FILE_MAPPINGS: u64 = 1 << 16;
const MAX_NOTE_BYTES: usize = 64 << 20;
/// What the core keeps of each mapped ELF file (its first page: the ELF and program headers and,
/// in practice, the build-id note).
const ELF_FIRST_PAGE_BYTES: usize = 4096;

#[derive(Clone, Debug)]
struct Segment {
    vaddr: u64,
    memsz: u64,
    filesz: u64,
    offset: u64,
    /// `PF_W`: the mapping was writable.
    writable: bool,
}

/// One entry of NT_FILE: `[start, end)` maps `path` from byte `offset`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileMapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub path: String,
}

/// One NT_PRSTATUS note: a thread of the dumped process (its LWP, registers, thread pointer
/// and system call, as the core's architecture lays them out).
pub type CoreThread = crate::arch::PrStatus;

/// `siginfo_t` as an NT_SIGINFO note holds it. x86-64 and arm64 both use the generic layout
/// (Linux include/uapi/asm-generic/siginfo.h; only MIPS swaps `si_errno` and `si_code`): three
/// ints, then the union, which is pointer-aligned and so starts at 16.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Siginfo {
    pub signo: i32,
    pub errno: i32,
    pub code: i32,
    /// The union's first 8 bytes: `si_addr` for a fault (SIGSEGV, SIGBUS, ...); `si_pid` (low
    /// half) and `si_uid` (high half) for a signal sent by kill, tgkill or sigqueue.
    pub fields: u64,
}

/// The head of an NT_PRSTATUS note, common to every architecture (`struct
/// elf_prstatus_common`, Linux include/linux/elfcore.h).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrStatusHead {
    /// `pr_pid`: the thread's LWP.
    pub lwp: u32,
    /// `pr_cursig`: the signal the thread is stopped with (the kernel writes the fatal signal
    /// into every thread's note; gdb's gcore writes the signal it last saw, 0 for none).
    pub cursig: u16,
}

/// What a core's notes say about the signal the process stopped with. Both writers put the
/// thread that took the signal first: the kernel's `fill_note_info` (fs/binfmt_elf.c) starts
/// with the dumping thread, and gdb's `linux_make_corefile_notes` with its signalled thread.
/// `Err(len)`: the note is there but too short to hold the fields (a garbled core).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SignalNotes {
    /// The first NT_PRSTATUS note.
    pub first_thread: Option<std::result::Result<PrStatusHead, usize>>,
    /// The NT_SIGINFO note after the first NT_PRSTATUS and before the second: the kernel
    /// writes one, for the dumping thread, right after it (and NT_PRPSINFO); gcore writes one
    /// per thread after the thread's NT_PRSTATUS.
    pub siginfo: Option<std::result::Result<Siginfo, usize>>,
    /// A note of owner "GDB" is there (gcore writes NT_GDB_TDESC; kernels write none): a
    /// debugger wrote the core.
    pub by_gdb: bool,
}

/// What a core file says about the process, without its memory.
#[derive(Clone, Debug)]
pub struct CoreFile {
    pub path: String,
    pub mappings: Vec<FileMapping>,
    pub threads: Vec<CoreThread>,
    /// The process id: NT_PRPSINFO's `pr_pid`, else the first thread's LWP. Not the first
    /// thread's LWP when there is NT_PRPSINFO: a kernel core of a crash in a worker thread
    /// starts with the worker.
    pub pid: Option<u32>,
    /// The main thread's name (its `comm`; the thread whose LWP is `pid`) where the core
    /// records it: NT_PRPSINFO's `pr_fname` in a core the kernel wrote, which copies the
    /// thread group leader's `comm` (fs/binfmt_elf.c `fill_psinfo`). None in a core gdb wrote
    /// (a note of owner `GDB`), where `pr_fname` is the file name of argv[0] (linux-tdep.c
    /// `linux_fill_prpsinfo`), and in qemu-user's (no NT_FILE), where it is the executable's:
    /// names of the process, not of a thread. None without the note, or with an empty name.
    pub process_name: Option<String>,
    pub signal: SignalNotes,
    pub arch: Arch,
    /// NT_AUXV: (type, value) pairs (elf.h `AT_*`).
    pub auxv: Vec<(u64, u64)>,
    /// Where the modules of a core without NT_FILE could not all be found (one line each).
    pub module_problems: Vec<String>,
    segments: Vec<Segment>,
    file_len: u64,
}

/// The memory of a core file.
pub struct CoreMemory {
    info: CoreFile,
    core: File,
    /// The core mapped into memory, read without a system call; None: read with pread.
    map: Option<super::mapped::MappedFile>,
    /// Where the files NT_FILE names are read from.
    lookup: Arc<FileLookup>,
    files: Mutex<HashMap<String, Option<File>>>,
    /// The index of the segment the last read found: reads come in runs over one segment (a
    /// heap's), each a binary search otherwise. Only a hint, checked before use.
    last_segment: AtomicUsize,
}

impl CoreFile {
    pub fn parse(path: &str) -> Result<CoreFile> {
        let file = unpack::open_core(path)?;
        CoreFile::parse_file(path, file)
    }

    /// Parses the (unpacked) core `file`; `path` names it in errors.
    fn parse_file(path: &str, file: File) -> Result<CoreFile> {
        let file_len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        let data = ReadCache::new(file);
        let bad = |why: &str| Error::bad_file(path, why.to_string());
        let header = elf::FileHeader64::<Endianness>::parse(&data)
            .map_err(|_| bad("not a 64-bit ELF file"))?;
        let endian = header.endian().map_err(|_| bad("not a 64-bit ELF file"))?;
        if header.e_type(endian) != elf::ET_CORE {
            return Err(bad("not a core file (ELF type is not ET_CORE)"));
        }
        let Some(arch) = Arch::from_elf_machine(header.e_machine(endian).0) else {
            return Err(bad(&format!(
                "not an x86-64 or arm64 core file (ELF machine {})",
                header.e_machine(endian).0
            )));
        };
        let phdrs = header
            .program_headers(endian, &data)
            .map_err(|_| bad("unreadable program headers"))?;
        if phdrs.len() > MAX_SEGMENTS {
            return Err(bad("too many program headers"));
        }
        let mut segments = Vec::new();
        let mut mappings = Vec::new();
        let mut threads = Vec::new();
        let mut first_lwp = None;
        let mut process_pid = None;
        let mut process_name = None;
        let mut signal = SignalNotes::default();
        let mut prstatus_notes = 0usize;
        let mut auxv = Vec::new();
        for ph in phdrs {
            match ph.p_type(endian) {
                elf::PT_LOAD => segments.push(Segment {
                    vaddr: ph.p_vaddr(endian),
                    memsz: ph.p_memsz(endian),
                    filesz: ph.p_filesz(endian),
                    offset: ph.p_offset(endian),
                    writable: ph.p_flags(endian).contains(elf::PF_W),
                }),
                elf::PT_NOTE => {
                    if ph.p_filesz(endian) as usize > MAX_NOTE_BYTES {
                        continue;
                    }
                    // A truncated core may cut its notes short: keep what parsed.
                    let Ok(Some(mut notes)) = ph.notes(endian, &data) else {
                        continue;
                    };
                    while let Ok(Some(note)) = notes.next() {
                        if note.name() == b"GDB" {
                            signal.by_gdb = true;
                        }
                        if note.name() != b"CORE" {
                            continue;
                        }
                        let desc = note.desc();
                        match note.n_type(endian) {
                            elf::NT_PRSTATUS => {
                                if prstatus_notes == 0 {
                                    signal.first_thread =
                                        Some(parse_prstatus_head(desc).ok_or(desc.len()));
                                }
                                prstatus_notes += 1;
                                if let Some(t) = arch.parse_prstatus(desc) {
                                    first_lwp.get_or_insert(t.lwp);
                                    threads.push(t);
                                }
                            }
                            elf::NT_PRPSINFO => {
                                process_pid = process_pid.or_else(|| prpsinfo_pid(desc));
                                process_name = process_name.or_else(|| prpsinfo_fname(desc));
                            }
                            elf::NT_SIGINFO if prstatus_notes == 1 && signal.siginfo.is_none() => {
                                signal.siginfo = Some(parse_siginfo(desc).ok_or(desc.len()));
                            }
                            elf::NT_FILE => mappings = parse_nt_file(desc),
                            elf::NT_AUXV => auxv = parse_auxv(desc),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        segments.sort_by_key(|s| s.vaddr);
        // The name is the process's main thread's only with the pid it goes with, and only
        // where the kernel wrote it.
        let by_kernel = !signal.by_gdb && !mappings.is_empty();
        let process_name = process_pid.and(process_name).filter(|_| by_kernel);
        Ok(CoreFile {
            path: path.to_string(),
            mappings,
            threads,
            pid: process_pid.or(first_lwp),
            process_name,
            signal,
            arch,
            auxv,
            module_problems: Vec::new(),
            segments,
            file_len,
        })
    }

    /// The path of the main executable: the file of the lowest NT_FILE mapping with offset 0
    /// that is not a shared library.
    pub fn exe_path(&self) -> Option<&str> {
        self.mappings.first().map(|m| m.path.as_str())
    }

    /// Every mapping the core records (its PT_LOAD segments, one per mapping, saved or not),
    /// as `[start, end)` in ascending order.
    pub fn regions(&self) -> Vec<(u64, u64)> {
        self.segments
            .iter()
            .map(|s| (s.vaddr, s.vaddr.saturating_add(s.memsz)))
            .collect()
    }

    /// The bytes the core holds of the process's written anonymous memory: its writable
    /// PT_LOAD segments (`PF_W`) that map no file (no NT_FILE entry overlaps them), counted
    /// by what the core wrote of them (`p_filesz`). The heap, thread stacks and anonymous
    /// `mmap`s: what a live process's RSS is mostly made of, where its file pages are not.
    pub fn anonymous_written_bytes(&self) -> u64 {
        self.segments
            .iter()
            .filter(|s| s.writable && s.filesz > 0)
            .filter(|s| {
                let end = s.vaddr.saturating_add(s.memsz);
                !self
                    .mappings
                    .iter()
                    .any(|m| m.start < end && m.end > s.vaddr)
            })
            .fold(0u64, |n, s| n.saturating_add(s.filesz))
    }

    /// Whether the core holds the bytes of `[addr, addr+len)` itself.
    pub fn has_bytes(&self, addr: u64, len: u64) -> bool {
        self.segments.iter().any(|s| {
            addr >= s.vaddr
                && addr.saturating_add(len) <= s.vaddr.saturating_add(s.filesz)
                && s.offset.saturating_add(addr - s.vaddr).saturating_add(len) <= self.file_len
        })
    }
}

impl CoreMemory {
    /// Opens a core (plain or compressed); the files it names are looked up as `search` says.
    pub fn open(path: &str, search: FileSearch) -> Result<CoreMemory> {
        CoreMemory::open_with_exe(path, search, None)
    }

    /// As [`Self::open`]; `exe` is the executable the user named, which places the modules of a
    /// core that has no NT_FILE note ([`super::link_map`]).
    pub fn open_with_exe(path: &str, search: FileSearch, exe: Option<&str>) -> Result<CoreMemory> {
        let core = unpack::open_core(path)?;
        let dup = core.try_clone().map_err(|e| Error::io(path, e))?;
        let info = CoreFile::parse_file(path, dup)?;
        let mut mem = CoreMemory {
            info,
            map: super::mapped::MappedFile::map(&core),
            core,
            lookup: Arc::new(FileLookup::new(search)),
            files: Mutex::new(HashMap::new()),
            last_segment: AtomicUsize::new(0),
        };
        if mem.info.mappings.is_empty() && !mem.info.auxv.is_empty() {
            let found = super::link_map::find(&mem, &mem.info.auxv, &mem.lookup, exe, None)
                .map_err(|e| {
                    Error::bad_file(path, format!("core file has no NT_FILE note, and {e}"))
                })?;
            mem.info.mappings = found.mappings;
            mem.info.module_problems = found.problems;
        }
        let ids = mem.recorded_build_ids();
        if let Some(l) = Arc::get_mut(&mut mem.lookup) {
            l.set_build_ids(ids);
        }
        Ok(mem)
    }

    /// Whether the core is read from a memory map (no cache needed in front of it).
    pub fn is_mapped(&self) -> bool {
        self.map.is_some()
    }

    pub fn info(&self) -> &CoreFile {
        &self.info
    }

    /// The lookup of the files this core names (shared with the target).
    pub fn lookup(&self) -> Arc<FileLookup> {
        self.lookup.clone()
    }

    /// Read `from` (a path named by the core) from `to` instead. Call before [`Self::lookup`].
    pub fn replace_file(&mut self, from: &str, to: &str) {
        if let Some(l) = Arc::get_mut(&mut self.lookup) {
            l.replace(from, to);
        }
        self.files.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Path -> build-id, from the first page of each mapped ELF file that the core itself holds
    /// (never from the file on disk: that is what gets checked).
    fn recorded_build_ids(&self) -> HashMap<String, Vec<u8>> {
        let mut ids = HashMap::new();
        for m in self.info.mappings.iter().filter(|m| m.offset == 0) {
            if ids.contains_key(&m.path) {
                continue;
            }
            let len = ELF_FIRST_PAGE_BYTES.min(m.end.saturating_sub(m.start) as usize);
            let mut page = vec![0u8; len];
            if self.read_from_core(m.start, &mut page).is_some() {
                if let Some(id) = build_id_in_first_page(&page) {
                    ids.insert(m.path.clone(), id);
                }
            }
        }
        ids
    }

    /// Bytes the core file itself holds (a PT_LOAD segment's file part), else None.
    fn read_from_core(&self, addr: u64, buf: &mut [u8]) -> Option<()> {
        if !self.info.has_bytes(addr, buf.len() as u64) {
            return None;
        }
        let s = self.segment_for(addr)?;
        self.core
            .read_exact_at(buf, s.offset.checked_add(addr - s.vaddr)?)
            .ok()
    }

    fn segment_for(&self, addr: u64) -> Option<&Segment> {
        let segs = &self.info.segments;
        // The hint is the binary search's answer when its segment is the last that starts at
        // or below `addr` (overlapping program headers included).
        let hint = self.last_segment.load(Ordering::Relaxed);
        if let Some(s) = segs.get(hint) {
            let last_below = segs.get(hint + 1).is_none_or(|n| n.vaddr > addr);
            if s.vaddr <= addr && last_below {
                return (addr < s.vaddr.saturating_add(s.memsz)).then_some(s);
            }
        }
        let i = segs.partition_point(|s| s.vaddr <= addr);
        let at = i.checked_sub(1)?;
        let s = segs.get(at)?;
        self.last_segment.store(at, Ordering::Relaxed);
        (addr < s.vaddr.saturating_add(s.memsz)).then_some(s)
    }

    fn read_from_mapped_file(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        let unmapped = ReadError::new(addr, buf.len() as u64, ReadErrorKind::Unmapped);
        let m = self
            .info
            .mappings
            .iter()
            .find(|m| addr >= m.start && addr.saturating_add(buf.len() as u64) <= m.end)
            .ok_or(unmapped)?;
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let f = files
            .entry(m.path.clone())
            .or_insert_with(|| {
                let path = self.lookup.resolve(&m.path).ok()?;
                File::open(path).ok()
            })
            .as_ref()
            .ok_or(unmapped)?;
        // The offset comes from the core's NT_FILE note: overflow is a read error too.
        let at = m.offset.checked_add(addr - m.start).ok_or(unmapped)?;
        f.read_exact_at(buf, at)
            .map_err(|_| ReadError::new(addr, buf.len() as u64, ReadErrorKind::Truncated))
    }
}

impl Memory for CoreMemory {
    fn read_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        let mut done = 0usize;
        while done < buf.len() {
            let a = addr.checked_add(done as u64).ok_or(ReadError::new(
                addr,
                0,
                ReadErrorKind::Unmapped,
            ))?;
            let want = buf.len() - done;
            match self.segment_for(a) {
                // Program headers are untrusted too: ends saturate, offsets are checked.
                Some(s) if a < s.vaddr.saturating_add(s.filesz) => {
                    let n = want.min((s.vaddr.saturating_add(s.filesz) - a) as usize);
                    let off = s.offset.checked_add(a - s.vaddr).ok_or(ReadError::new(
                        a,
                        n as u64,
                        ReadErrorKind::Truncated,
                    ))?;
                    let part = &mut buf[done..done + n];
                    if self.map.as_ref().and_then(|m| m.read(off, part)).is_none() {
                        self.core
                            .read_exact_at(part, off)
                            .map_err(|_| ReadError::new(a, n as u64, ReadErrorKind::Truncated))?;
                    }
                    done += n;
                }
                Some(s) => {
                    let n = want.min((s.vaddr.saturating_add(s.memsz) - a) as usize);
                    self.read_from_mapped_file(a, &mut buf[done..done + n])?;
                    done += n;
                }
                None => {
                    // Not in any segment: only a mapped file can have it; read up to the next
                    // segment at most.
                    // Sorted by address: a core of many small mappings has 100,000s.
                    let segs = &self.info.segments;
                    let next = segs
                        .get(segs.partition_point(|s| s.vaddr <= a))
                        .map(|s| s.vaddr);
                    let n = next.map_or(want, |v| want.min((v - a) as usize));
                    self.read_from_mapped_file(a, &mut buf[done..done + n])?;
                    done += n;
                }
            }
        }
        Ok(())
    }
}

fn i32_at(b: &[u8], off: usize) -> Option<i32> {
    Some(i32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

/// `pr_cursig` (a short at 12) and `pr_pid` (at 32) of `struct elf_prstatus_common` (Linux
/// include/linux/elfcore.h), the same on x86-64 and arm64.
fn parse_prstatus_head(d: &[u8]) -> Option<PrStatusHead> {
    Some(PrStatusHead {
        cursig: u16::from_le_bytes(d.get(12..14)?.try_into().ok()?),
        lwp: u32::from_le_bytes(d.get(32..36)?.try_into().ok()?),
    })
}

/// `struct elf_prpsinfo` (Linux include/linux/elfcore.h): four chars, `pr_flag` (unsigned long)
/// at 8, `pr_uid` and `pr_gid` (32-bit on x86-64 and arm64), then `pr_pid` at 24.
fn prpsinfo_pid(d: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(d.get(24..28)?.try_into().ok()?))
}

/// `pr_fname` of `struct elf_prpsinfo`: 16 bytes at 40 (after `pr_pid`, `pr_ppid`, `pr_pgrp`,
/// `pr_sid`), NUL-padded (`TASK_COMM_LEN`); the kernel copies the group leader's `comm`
/// (fs/binfmt_elf.c `fill_psinfo`), gdb the comm of /proc/PID/stat (linux-tdep.c
/// `linux_fill_prpsinfo`). Bytes that are not UTF-8 are replaced, as /proc's text is read.
fn prpsinfo_fname(d: &[u8]) -> Option<String> {
    let raw = d.get(40..56)?;
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    (end > 0).then(|| String::from_utf8_lossy(&raw[..end]).into_owned())
}

/// The fields of `siginfo_t` that [`Siginfo`] keeps: 24 bytes at least (the kernel writes
/// 128, `SI_MAX_SIZE`).
fn parse_siginfo(d: &[u8]) -> Option<Siginfo> {
    Some(Siginfo {
        signo: i32_at(d, 0)?,
        errno: i32_at(d, 4)?,
        code: i32_at(d, 8)?,
        fields: u64_at(d, 16)?,
    })
}

/// Cap on the auxiliary vector's entries (Linux has fewer than 40 `AT_*` types).
const MAX_AUXV: usize = 256;

/// NT_AUXV: (type, value) pairs of u64, up to `AT_NULL`.
fn parse_auxv(d: &[u8]) -> Vec<(u64, u64)> {
    d.chunks_exact(16)
        .take(MAX_AUXV)
        .map_while(|c| {
            let (t, v) = (u64_at(c, 0)?, u64_at(c, 8)?);
            (t != 0).then_some((t, v))
        })
        .collect()
}

/// NT_FILE: count, page size, `count` (start, end, page offset) triples, then `count` names.
fn parse_nt_file(d: &[u8]) -> Vec<FileMapping> {
    let (Some(count), Some(page)) = (u64_at(d, 0), u64_at(d, 8)) else {
        return Vec::new();
    };
    if count > MAX_FILE_MAPPINGS {
        return Vec::new();
    }
    let count = count as usize;
    let names_at = 16 + 24 * count;
    let mut names = d.get(names_at..).unwrap_or(&[]).split(|&c| c == 0);
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let at = 16 + 24 * i;
        let (Some(start), Some(end), Some(pgoff)) =
            (u64_at(d, at), u64_at(d, at + 8), u64_at(d, at + 16))
        else {
            break;
        };
        let Some(name) = names.next() else { break };
        out.push(FileMapping {
            start,
            end,
            offset: pgoff.saturating_mul(page),
            path: String::from_utf8_lossy(name).into_owned(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// One ELF note: name, type, desc, each padded to 4 bytes.
    fn note(name: &[u8], n_type: elf::NoteType, desc: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&(name.len() as u32 + 1).to_le_bytes());
        out.extend_from_slice(&(desc.len() as u32).to_le_bytes());
        out.extend_from_slice(&n_type.0.to_le_bytes());
        out.extend_from_slice(name);
        out.push(0);
        out.resize(out.len().next_multiple_of(4), 0);
        out.extend_from_slice(desc);
        out.resize(out.len().next_multiple_of(4), 0);
        out
    }

    /// An x86-64 ELF core with one PT_NOTE segment holding `notes` and nothing else.
    fn core_with_notes(notes: &[u8]) -> CoreFile {
        let mut f = Vec::new();
        f.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
        f.extend_from_slice(&elf::ET_CORE.0.to_le_bytes());
        f.extend_from_slice(&elf::EM_X86_64.0.to_le_bytes());
        f.extend_from_slice(&1u32.to_le_bytes()); // e_version
        f.extend_from_slice(&0u64.to_le_bytes()); // e_entry
        f.extend_from_slice(&64u64.to_le_bytes()); // e_phoff
        f.extend_from_slice(&0u64.to_le_bytes()); // e_shoff
        f.extend_from_slice(&0u32.to_le_bytes()); // e_flags
        for half in [64u16, 56, 1, 64, 0, 0] {
            // e_ehsize, e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx
            f.extend_from_slice(&half.to_le_bytes());
        }
        let at = 64 + 56u64;
        f.extend_from_slice(&elf::PT_NOTE.0.to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes()); // p_flags
        f.extend_from_slice(&at.to_le_bytes()); // p_offset
        f.extend_from_slice(&[0u8; 16]); // p_vaddr, p_paddr
        f.extend_from_slice(&(notes.len() as u64).to_le_bytes()); // p_filesz
        f.extend_from_slice(&(notes.len() as u64).to_le_bytes()); // p_memsz
        f.extend_from_slice(&4u64.to_le_bytes()); // p_align
        f.extend_from_slice(notes);
        let path = std::env::temp_dir().join(format!(
            "pyunwind-core-notes-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::File::create(&path)
            .and_then(|mut o| o.write_all(&f))
            .unwrap();
        let file = File::open(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        CoreFile::parse_file("test-core", file).unwrap()
    }

    fn prstatus(lwp: u32, cursig: u16, len: usize) -> Vec<u8> {
        let mut d = vec![0u8; 336];
        d[12..14].copy_from_slice(&cursig.to_le_bytes());
        d[32..36].copy_from_slice(&lwp.to_le_bytes());
        d.truncate(len);
        d
    }

    fn siginfo(signo: i32, code: i32, fields: u64, len: usize) -> Vec<u8> {
        let mut d = vec![0u8; 128];
        d[0..4].copy_from_slice(&signo.to_le_bytes());
        d[8..12].copy_from_slice(&code.to_le_bytes());
        d[16..24].copy_from_slice(&fields.to_le_bytes());
        d.truncate(len);
        d
    }

    /// NT_FILE with one mapping of `/usr/bin/python3`.
    fn nt_file() -> Vec<u8> {
        let mut d = Vec::new();
        for v in [1u64, 4096, 0x40_0000, 0x40_1000, 0] {
            d.extend_from_slice(&v.to_le_bytes());
        }
        d.extend_from_slice(b"/usr/bin/python3\0");
        d
    }

    fn prpsinfo(pid: u32) -> Vec<u8> {
        let mut d = vec![0u8; 136];
        d[24..28].copy_from_slice(&pid.to_le_bytes());
        d[40..47].copy_from_slice(b"python3");
        d
    }

    #[test]
    fn kernel_note_order_gives_the_dumping_thread_and_its_siginfo() {
        // fs/binfmt_elf.c: PRSTATUS of the dumper, PRPSINFO, SIGINFO, ..., other threads.
        let notes = [
            note(b"CORE", elf::NT_PRSTATUS, &prstatus(102, 11, 336)),
            note(b"CORE", elf::NT_PRPSINFO, &prpsinfo(100)),
            note(b"CORE", elf::NT_SIGINFO, &siginfo(11, 1, 0x10, 128)),
            note(b"CORE", elf::NT_FILE, &nt_file()),
            note(b"LINUX", elf::NoteType(0x202), &[0u8; 64]),
            note(b"CORE", elf::NT_PRSTATUS, &prstatus(100, 11, 336)),
        ]
        .concat();
        let c = core_with_notes(&notes);
        assert_eq!(c.pid, Some(100));
        // The kernel's pr_fname: the main thread's comm.
        assert_eq!(c.process_name.as_deref(), Some("python3"));
        // Without NT_FILE (qemu-user's cores) it is the executable's file name: not kept.
        let qemu: Vec<u8> = [
            note(b"CORE", elf::NT_PRSTATUS, &prstatus(102, 11, 336)),
            note(b"CORE", elf::NT_PRPSINFO, &prpsinfo(100)),
        ]
        .concat();
        assert_eq!(core_with_notes(&qemu).process_name, None);
        assert_eq!(
            c.threads.iter().map(|t| t.lwp).collect::<Vec<_>>(),
            [102, 100]
        );
        assert_eq!(
            c.signal,
            SignalNotes {
                first_thread: Some(Ok(PrStatusHead {
                    lwp: 102,
                    cursig: 11
                })),
                siginfo: Some(Ok(Siginfo {
                    signo: 11,
                    errno: 0,
                    code: 1,
                    fields: 0x10
                })),
                by_gdb: false,
            }
        );
    }

    #[test]
    fn gcore_note_order_keeps_the_first_threads_siginfo_and_sees_gdb() {
        let notes = [
            note(b"CORE", elf::NT_PRPSINFO, &prpsinfo(7)),
            note(b"CORE", elf::NT_FILE, &nt_file()),
            note(b"CORE", elf::NT_PRSTATUS, &prstatus(7, 0, 336)),
            note(b"CORE", elf::NT_SIGINFO, &siginfo(19, 0x80, 0, 128)),
            note(b"CORE", elf::NT_PRSTATUS, &prstatus(8, 0, 336)),
            note(b"CORE", elf::NT_SIGINFO, &siginfo(11, 1, 0x10, 128)),
            note(b"GDB", elf::NoteType(0xff00_0000), b"<target/>"),
        ]
        .concat();
        let c = core_with_notes(&notes);
        assert!(c.signal.by_gdb);
        // gdb's pr_fname is argv[0]'s file name, not a thread's.
        assert_eq!((c.pid, c.process_name.as_deref()), (Some(7), None));
        assert_eq!(c.signal.siginfo.unwrap().unwrap().signo, 19);
        assert_eq!(c.signal.first_thread.unwrap().unwrap().cursig, 0);
    }

    #[test]
    fn short_and_garbled_notes_are_kept_as_lengths() {
        // A first NT_PRSTATUS too short for pr_pid, a siginfo cut before its union: both are
        // said to be there, with their lengths; nothing is made up.
        let notes = [
            note(b"CORE", elf::NT_PRSTATUS, &prstatus(5, 11, 20)),
            note(b"CORE", elf::NT_SIGINFO, &siginfo(11, 1, 0x10, 23)),
            note(b"CORE", elf::NT_PRPSINFO, &[1, 2, 3]),
            note(b"CORE", elf::NT_PRSTATUS, &prstatus(6, 11, 336)),
        ]
        .concat();
        let c = core_with_notes(&notes);
        assert_eq!(c.signal.first_thread, Some(Err(20)));
        assert_eq!(c.signal.siginfo, Some(Err(23)));
        assert_eq!(c.threads.iter().map(|t| t.lwp).collect::<Vec<_>>(), [6]);
        assert_eq!(c.pid, Some(6));
        // A PRPSINFO too short for its pid names nothing: the pid is the first thread's.
        assert_eq!(c.process_name, None);
        // Empty notes, and a NT_SIGINFO before any thread (ignored).
        let notes = [
            note(b"CORE", elf::NT_SIGINFO, &siginfo(11, 1, 0x10, 128)),
            note(b"CORE", elf::NT_PRSTATUS, &[]),
            note(b"CORE", elf::NT_SIGINFO, &[]),
        ]
        .concat();
        let c = core_with_notes(&notes);
        assert_eq!(c.signal.first_thread, Some(Err(0)));
        assert_eq!(c.signal.siginfo, Some(Err(0)));
        assert!(c.threads.is_empty());
    }

    #[test]
    fn orig_rax_is_read_and_a_note_without_the_registers_gives_no_thread() {
        // pr_reg at 112, orig_rax its 16th register (sys/user.h user_regs_struct).
        let mut d = prstatus(9, 0, 336);
        d[232..240].copy_from_slice(&202u64.to_le_bytes());
        let mut cut = prstatus(10, 0, 336);
        cut.truncate(240);
        let notes = [
            note(b"CORE", elf::NT_PRSTATUS, &d),
            note(b"CORE", elf::NT_PRSTATUS, &cut),
        ]
        .concat();
        let c = core_with_notes(&notes);
        assert_eq!(
            c.threads
                .iter()
                .map(|t| (t.lwp, t.syscall))
                .collect::<Vec<_>>(),
            [(9, Some(202))]
        );
    }

    #[test]
    fn garbage_notes_never_panic() {
        // Deterministic pseudo-random bytes as note descriptors of every type we read, and as
        // a whole PT_NOTE segment.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut bytes = |n: usize| -> Vec<u8> {
            (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect()
        };
        for len in [0, 1, 11, 12, 13, 35, 36, 111, 112, 200, 336, 500] {
            let notes = [
                note(b"CORE", elf::NT_PRSTATUS, &bytes(len)),
                note(b"CORE", elf::NT_PRPSINFO, &bytes(len)),
                note(b"CORE", elf::NT_SIGINFO, &bytes(len)),
                note(b"CORE", elf::NT_FILE, &bytes(len)),
            ]
            .concat();
            let c = core_with_notes(&notes);
            let _ = crate::memory::crash::crash(&c.signal);
            let _ = core_with_notes(&bytes(len));
        }
    }
}
