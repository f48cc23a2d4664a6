//! The loaded modules of a core that has no NT_FILE note (qemu-user writes none), found as gdb
//! finds them (gdb/solib-svr4.c): the auxiliary vector gives the executable's program headers
//! (`AT_PHDR`) and the dynamic linker's base (`AT_BASE`); the executable's `DT_DEBUG` entry,
//! in its dynamic section in memory, points to the dynamic linker's `r_debug`, whose `r_map`
//! is the chain of `link_map`s: one per loaded object, with its load bias and path. Each
//! object's `PT_LOAD` segments (from its file, found through the sysroot) then give the
//! mappings NT_FILE would have listed, so the bytes a core left out are read from the files.

use std::collections::HashSet;
use std::fs::File;

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader};
use object::{Endianness, ReadCache};

use super::files::FileLookup;
use super::{FileMapping, Memory};

/// `AT_*` types (include/uapi/linux/auxvec.h).
const AT_PHDR: u64 = 3;
const AT_PAGESZ: u64 = 6;
const AT_BASE: u64 = 7;
const AT_EXECFN: u64 = 31;
/// `DT_DEBUG` (elf.h): the dynamic linker stores `&_r_debug` there.
const DT_DEBUG: u64 = 21;
const DT_NULL: u64 = 0;
/// LP64 `struct r_debug` (link.h): `r_version` int at 0, `r_map` at 8.
const R_MAP: u64 = 8;
/// LP64 `struct link_map` (link.h): `l_addr` at 0, `l_name` at 8, `l_ld` at 16, `l_next` at 24.
const L_NAME: u64 = 8;
const L_NEXT: u64 = 24;
/// Caps: a process has a few hundred loaded objects at most; paths are short.
const MAX_OBJECTS: usize = 4096;
const MAX_DYNAMIC: u64 = 4096;
const MAX_PATH: usize = 4096;

/// What the walk found: the mappings, and what it could not do (one line each).
#[derive(Debug, Default)]
pub struct Found {
    pub mappings: Vec<FileMapping>,
    pub problems: Vec<String>,
}

/// The mappings of the executable (`exe`, else the core's `AT_EXECFN`) and of every object on
/// the dynamic linker's list. `Err` when not even the executable can be placed.
pub fn find(
    mem: &dyn Memory,
    auxv: &[(u64, u64)],
    lookup: &FileLookup,
    exe: Option<&str>,
) -> Result<Found, String> {
    let aux = |t: u64| auxv.iter().find(|(k, _)| *k == t).map(|&(_, v)| v);
    let page = aux(AT_PAGESZ)
        .filter(|p| p.is_power_of_two() && (4096..=1 << 16).contains(p))
        .unwrap_or(4096);
    let exe_path = match exe {
        Some(e) => e.to_string(),
        None => {
            let at = aux(AT_EXECFN)
                .ok_or("the core names no executable (no NT_FILE, no AT_EXECFN): give --exe")?;
            read_c_string(mem, at)
                .ok_or("the core's executable name (AT_EXECFN) is unreadable: give --exe")?
        }
    };
    let phdr = aux(AT_PHDR).ok_or("the core has no AT_PHDR: its executable cannot be placed")?;
    let local = lookup.resolve(&exe_path).map_err(|e| e.to_string())?;
    let image = Image::load(&local).map_err(|e| format!("{local}: {e}"))?;
    let bias = phdr.wrapping_sub(
        image
            .phdr_vaddr
            .ok_or_else(|| format!("{local}: no program header table in a loaded segment"))?,
    );
    let mut found = Found::default();
    image.push_mappings(&exe_path, bias, page, &mut found.mappings);
    let interp = image.interp.clone();

    let push_object = |found: &mut Found, path: &str, bias: u64| match lookup
        .resolve(path)
        .map_err(|e| e.to_string())
        .and_then(|l| Image::load(&l).map_err(|e| format!("{l}: {e}")))
    {
        Ok(img) => img.push_mappings(path, bias, page, &mut found.mappings),
        Err(e) => found.problems.push(e),
    };
    let base = aux(AT_BASE).filter(|&b| b != 0);
    let r_debug = image
        .dynamic
        .and_then(|(vaddr, size)| r_debug(mem, bias.wrapping_add(vaddr), size));
    let Some(r_debug) = r_debug else {
        // No list (a static executable, or a core written before the dynamic linker ran): the
        // dynamic linker alone is still known.
        if let (Some(b), Some(i)) = (base, &interp) {
            push_object(&mut found, i, b);
        }
        found
            .problems
            .push("no dynamic linker list (DT_DEBUG): only the executable and the dynamic linker are known".into());
        return Ok(found);
    };
    let mut node = mem.read_u64(r_debug.wrapping_add(R_MAP)).unwrap_or(0);
    let mut seen = HashSet::new();
    let mut first = true;
    while node != 0 {
        if !seen.insert(node) || seen.len() > MAX_OBJECTS {
            found.problems.push(format!(
                "the dynamic linker's list loops or is too long at {node:#x}: cut"
            ));
            break;
        }
        let (Ok(l_addr), Ok(l_name), Ok(next)) = (
            mem.read_u64(node),
            mem.read_u64(node.wrapping_add(L_NAME)),
            mem.read_u64(node.wrapping_add(L_NEXT)),
        ) else {
            found
                .problems
                .push(format!("unreadable link_map at {node:#x}: the list is cut"));
            break;
        };
        // The executable comes first, with an empty name. The dynamic linker's name points at
        // the executable's PT_INTERP string, in text a qemu core leaves out: known from the
        // file instead.
        let name = read_c_string(mem, l_name).filter(|n| !n.is_empty());
        let path = match name {
            Some(n) => Some(n),
            None if base == Some(l_addr) => interp.clone(),
            None if first => None,
            // The vDSO (no file) and nameless objects.
            None => None,
        };
        first = false;
        if let Some(p) = path {
            if !found.mappings.iter().any(|m| m.path == p) {
                push_object(&mut found, &p, l_addr);
            }
        }
        node = next;
    }
    Ok(found)
}

/// The address of `r_debug` from the dynamic section at `addr` (`size` bytes) in memory.
fn r_debug(mem: &dyn Memory, addr: u64, size: u64) -> Option<u64> {
    for i in 0..(size / 16).min(MAX_DYNAMIC) {
        let at = addr.checked_add(16 * i)?;
        let tag = mem.read_u64(at).ok()?;
        if tag == DT_NULL {
            return None;
        }
        if tag == DT_DEBUG {
            return Some(mem.read_u64(at + 8).ok()?).filter(|&v| v != 0);
        }
    }
    None
}

/// A NUL-terminated string of at most [`MAX_PATH`] bytes.
fn read_c_string(mem: &dyn Memory, addr: u64) -> Option<String> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 64];
    while out.len() < MAX_PATH {
        let at = addr.checked_add(out.len() as u64)?;
        // A string may end close to an unreadable page: fall back to byte reads there.
        if mem.read_into(at, &mut chunk).is_err() {
            let b = mem.read_u8(at).ok()?;
            if b == 0 {
                break;
            }
            out.push(b);
            continue;
        }
        if let Some(end) = chunk.iter().position(|&b| b == 0) {
            out.extend_from_slice(&chunk[..end]);
            return String::from_utf8(out).ok();
        }
        out.extend_from_slice(&chunk);
    }
    (out.len() < MAX_PATH)
        .then(|| String::from_utf8(out).ok())
        .flatten()
}

/// What one ELF file's program headers say.
struct Image {
    /// (p_vaddr, p_offset, p_filesz) of each PT_LOAD.
    loads: Vec<(u64, u64, u64)>,
    /// The address of the program header table: PT_PHDR's, else the PT_LOAD that holds it.
    phdr_vaddr: Option<u64>,
    /// PT_DYNAMIC: (vaddr, size).
    dynamic: Option<(u64, u64)>,
    /// PT_INTERP: the dynamic linker's path.
    interp: Option<String>,
}

impl Image {
    fn load(path: &str) -> Result<Image, String> {
        let f = File::open(path).map_err(|e| e.to_string())?;
        let data = ReadCache::new(f);
        let header = elf::FileHeader64::<Endianness>::parse(&data)
            .map_err(|_| "not a 64-bit ELF file".to_string())?;
        let endian = header
            .endian()
            .map_err(|_| "not a 64-bit ELF file".to_string())?;
        let phdrs = header
            .program_headers(endian, &data)
            .map_err(|_| "unreadable program headers".to_string())?;
        let mut img = Image {
            loads: Vec::new(),
            phdr_vaddr: None,
            dynamic: None,
            interp: None,
        };
        let phoff = header.e_phoff(endian);
        for ph in phdrs {
            let (vaddr, off, filesz) =
                (ph.p_vaddr(endian), ph.p_offset(endian), ph.p_filesz(endian));
            match ph.p_type(endian) {
                elf::PT_LOAD => {
                    img.loads.push((vaddr, off, filesz));
                    if img.phdr_vaddr.is_none()
                        && off <= phoff
                        && phoff < off.saturating_add(filesz)
                    {
                        img.phdr_vaddr = Some(vaddr.wrapping_add(phoff - off));
                    }
                }
                elf::PT_PHDR => img.phdr_vaddr = Some(vaddr),
                elf::PT_DYNAMIC => img.dynamic = Some((vaddr, ph.p_memsz(endian))),
                elf::PT_INTERP => {
                    img.interp = ph
                        .data(endian, &data)
                        .ok()
                        .and_then(|d| d.split(|&b| b == 0).next())
                        .and_then(|s| std::str::from_utf8(s).ok())
                        .map(str::to_string);
                }
                _ => {}
            }
        }
        Ok(img)
    }

    /// One mapping per PT_LOAD, page-aligned as the loader maps them; only the file-backed
    /// part (the rest, .bss, is anonymous memory the core holds).
    fn push_mappings(&self, path: &str, bias: u64, page: u64, out: &mut Vec<FileMapping>) {
        for &(vaddr, off, filesz) in &self.loads {
            if filesz == 0 {
                continue;
            }
            let start = bias.wrapping_add(vaddr);
            let delta = start % page;
            let Some(end) = start
                .checked_add(filesz)
                .and_then(|e| e.checked_next_multiple_of(page))
            else {
                continue;
            };
            out.push(FileMapping {
                start: start - delta,
                end,
                offset: off.saturating_sub(delta),
                path: path.to_string(),
            });
        }
    }
}
