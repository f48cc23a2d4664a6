//! ELF core files: PT_LOAD segments, the NT_FILE note (which file is mapped where), the
//! NT_PRSTATUS notes (one per thread: LWP and registers). Bytes that the core left out but that
//! a mapped file holds (`gcore` skips read-only file-backed pages such as libpython's text and
//! rodata) are read from that file, found and checked by [`FileLookup`]. Compressed cores are
//! unpacked first ([`super::unpack`]).

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader};
use object::{Endianness, ReadCache};

use super::files::{build_id_in_first_page, FileLookup, FileSearch};
use super::{unpack, Memory};
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
}

/// One entry of NT_FILE: `[start, end)` maps `path` from byte `offset`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileMapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub path: String,
}

/// One NT_PRSTATUS note: a thread of the dumped process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CoreThread {
    pub lwp: u32,
    pub rip: u64,
    pub rsp: u64,
    pub rbp: u64,
    /// The thread pointer; on x86-64 glibc it equals `pthread_self()`, which CPython stores as
    /// `PyThreadState.thread_id`.
    pub fs_base: u64,
    /// The general registers in DWARF numbering (x86-64 psABI: rax, rdx, rcx, rbx, rsi, rdi,
    /// rbp, rsp, r8..r15, then rip as the return-address column 16), for native unwinding.
    pub dwarf_regs: [u64; 17],
}

/// What a core file says about the process, without its memory.
#[derive(Clone, Debug)]
pub struct CoreFile {
    pub path: String,
    pub mappings: Vec<FileMapping>,
    pub threads: Vec<CoreThread>,
    pub pid: Option<u32>,
    segments: Vec<Segment>,
    file_len: u64,
}

/// The memory of a core file.
pub struct CoreMemory {
    info: CoreFile,
    core: File,
    /// Where the files NT_FILE names are read from.
    lookup: Arc<FileLookup>,
    files: Mutex<HashMap<String, Option<File>>>,
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
        if header.e_machine(endian) != elf::EM_X86_64 {
            return Err(bad("not an x86-64 core file"));
        }
        let phdrs = header
            .program_headers(endian, &data)
            .map_err(|_| bad("unreadable program headers"))?;
        if phdrs.len() > MAX_SEGMENTS {
            return Err(bad("too many program headers"));
        }
        let mut segments = Vec::new();
        let mut mappings = Vec::new();
        let mut threads = Vec::new();
        let mut pid = None;
        for ph in phdrs {
            match ph.p_type(endian) {
                elf::PT_LOAD => segments.push(Segment {
                    vaddr: ph.p_vaddr(endian),
                    memsz: ph.p_memsz(endian),
                    filesz: ph.p_filesz(endian),
                    offset: ph.p_offset(endian),
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
                        if note.name() != b"CORE" {
                            continue;
                        }
                        match note.n_type(endian) {
                            elf::NT_PRSTATUS => {
                                if let Some(t) = parse_prstatus(note.desc()) {
                                    pid.get_or_insert(t.lwp);
                                    threads.push(t);
                                }
                            }
                            elf::NT_FILE => mappings = parse_nt_file(note.desc()),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        segments.sort_by_key(|s| s.vaddr);
        Ok(CoreFile {
            path: path.to_string(),
            mappings,
            threads,
            pid,
            segments,
            file_len,
        })
    }

    /// The path of the main executable: the file of the lowest NT_FILE mapping with offset 0
    /// that is not a shared library.
    pub fn exe_path(&self) -> Option<&str> {
        self.mappings.first().map(|m| m.path.as_str())
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
        let core = unpack::open_core(path)?;
        let dup = core.try_clone().map_err(|e| Error::io(path, e))?;
        let info = CoreFile::parse_file(path, dup)?;
        let mut mem = CoreMemory {
            info,
            core,
            lookup: Arc::new(FileLookup::new(search)),
            files: Mutex::new(HashMap::new()),
        };
        let ids = mem.recorded_build_ids();
        if let Some(l) = Arc::get_mut(&mut mem.lookup) {
            l.set_build_ids(ids);
        }
        Ok(mem)
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
        let i = segs.partition_point(|s| s.vaddr <= addr);
        let s = segs.get(i.checked_sub(1)?)?;
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
                    self.core
                        .read_exact_at(&mut buf[done..done + n], off)
                        .map_err(|_| ReadError::new(a, n as u64, ReadErrorKind::Truncated))?;
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
                    let next = self.info.segments.iter().map(|s| s.vaddr).find(|&v| v > a);
                    let n = next.map_or(want, |v| want.min((v - a) as usize));
                    self.read_from_mapped_file(a, &mut buf[done..done + n])?;
                    done += n;
                }
            }
        }
        Ok(())
    }
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

/// For DWARF register i (rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp, r8..r15, rip), its index in
/// `struct user_regs_struct` (sys/user.h: r15, r14, r13, r12, rbp, rbx, r11, r10, r9, r8, rax,
/// rcx, rdx, rsi, rdi, orig_rax, rip, cs, eflags, rsp, ...). PTRACE_GETREGS fills the same
/// struct.
pub const USER_REGS_OF_DWARF: [usize; 17] =
    [10, 12, 11, 5, 13, 14, 4, 19, 9, 8, 7, 6, 3, 2, 1, 0, 16];

/// `struct elf_prstatus` of x86-64 (linux/elfcore.h): pr_pid at 32, `pr_reg` (user_regs_struct,
/// sys/user.h) at 112.
fn parse_prstatus(d: &[u8]) -> Option<CoreThread> {
    let lwp = u32::from_le_bytes(d.get(32..36)?.try_into().ok()?);
    let reg = |i: usize| u64_at(d, 112 + 8 * i);
    let mut dwarf_regs = [0u64; 17];
    for (out, &i) in dwarf_regs.iter_mut().zip(USER_REGS_OF_DWARF.iter()) {
        *out = reg(i)?;
    }
    Some(CoreThread {
        lwp,
        rbp: reg(4)?,
        rip: reg(16)?,
        rsp: reg(19)?,
        fs_base: reg(21)?,
        dwarf_regs,
    })
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
