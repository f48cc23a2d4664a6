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
const L_LD: u64 = 16;
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
/// the dynamic linker's list. The executable is placed by `AT_PHDR`, else by `exe_base`, the
/// address its ELF header is loaded at (what a debugger without the auxiliary vector knows:
/// lldb). `Err` when not even the executable can be placed.
pub fn find(
    mem: &dyn Memory,
    auxv: &[(u64, u64)],
    lookup: &FileLookup,
    exe: Option<&str>,
    exe_base: Option<u64>,
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
    let phdr = aux(AT_PHDR);
    if phdr.is_none() && exe_base.is_none() {
        return Err("the core has no AT_PHDR: its executable cannot be placed".into());
    }
    let local = lookup.resolve(&exe_path).map_err(|e| e.to_string())?;
    let image = Image::load(&local).map_err(|e| format!("{local}: {e}"))?;
    let bias = match (phdr, exe_base) {
        (Some(phdr), _) => phdr.wrapping_sub(
            image
                .phdr_vaddr
                .ok_or_else(|| format!("{local}: no program header table in a loaded segment"))?,
        ),
        (None, base) => base.unwrap_or(0).wrapping_sub(
            image
                .header_vaddr()
                .ok_or_else(|| format!("{local}: no loaded segment holds its ELF header"))?,
        ),
    };
    let mut found = Found::default();
    image.push_mappings(&exe_path, bias, page, &mut found.mappings);
    let interp = image.interp.clone();

    // `l_ld`, where the process has the object's dynamic section, checks the file found for
    // it: a file of another build has it elsewhere (a core without NT_FILE keeps no
    // build-ids to check).
    let push_object = |found: &mut Found, path: &str, bias: u64, l_ld: Option<u64>| match lookup
        .resolve(path)
        .map_err(|e| e.to_string())
        .and_then(|l| {
            Image::load(&l)
                .map_err(|e| format!("{l}: {e}"))
                .map(|i| (l, i))
        }) {
        Ok((local, img)) => {
            let at = img.dynamic.map(|(v, _)| bias.wrapping_add(v));
            match l_ld {
                Some(ld) if at != Some(ld) => found.problems.push(format!(
                    "{local} is not the {path} the process loaded (its dynamic section would be at {}, the process has it at {ld:#x}): left out",
                    at.map_or("nowhere".to_string(), |a| format!("{a:#x}"))
                )),
                _ => img.push_mappings(path, bias, page, &mut found.mappings),
            }
        }
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
            push_object(&mut found, i, b, None);
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
        let (Ok(l_addr), Ok(l_name), Ok(l_ld), Ok(next)) = (
            mem.read_u64(node),
            mem.read_u64(node.wrapping_add(L_NAME)),
            mem.read_u64(node.wrapping_add(L_LD)),
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
                push_object(&mut found, &p, l_addr, Some(l_ld));
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

    /// The address its ELF header (file offset 0) is linked at: in the PT_LOAD that maps
    /// offset 0.
    fn header_vaddr(&self) -> Option<u64> {
        self.loads
            .iter()
            .find(|&&(_, off, filesz)| off == 0 && filesz > 0)
            .map(|&(vaddr, _, _)| vaddr)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{FakeMemory, FileSearch};

    /// This test binary as the executable, loaded at `bias`, with a fake dynamic section,
    /// `r_debug` and `link_map` chain in memory.
    fn setup(chain: &[(u64, u64, u64)]) -> (FakeMemory, Vec<(u64, u64)>, Image, u64, String) {
        let exe = std::env::current_exe().unwrap().display().to_string();
        let img = Image::load(&exe).unwrap();
        let bias = 0x5555_0000_0000u64;
        let mut m = FakeMemory::new();
        let execfn = 0x7000_0000u64;
        m.put(execfn, format!("{exe}\0").as_bytes());
        let (dyn_vaddr, _) = img.dynamic.expect("the test binary is dynamic");
        let r_debug = 0x7100_0000u64;
        m.put_u64(bias + dyn_vaddr, DT_DEBUG)
            .put_u64(bias + dyn_vaddr + 8, r_debug);
        m.put_u64(bias + dyn_vaddr + 16, DT_NULL);
        m.put_u64(r_debug + R_MAP, chain.first().map_or(0, |c| c.0));
        for &(node, name, next) in chain {
            m.put_u64(node, 0)
                .put_u64(node + L_NAME, name)
                .put_u64(node + L_LD, 0)
                .put_u64(node + L_NEXT, next);
        }
        let auxv = vec![
            (AT_PHDR, bias + img.phdr_vaddr.unwrap()),
            (AT_PAGESZ, 4096),
            (AT_EXECFN, execfn),
        ];
        (m, auxv, img, bias, exe)
    }

    /// The modules `find` places from `auxv` alone, without a sysroot.
    fn find_by_auxv(m: &FakeMemory, auxv: &[(u64, u64)]) -> Found {
        find(m, auxv, &FileLookup::new(FileSearch::default()), None, None).unwrap()
    }

    #[test]
    fn the_executable_is_placed_and_a_looping_list_is_cut() {
        // exe (empty name) -> an object with an unreadable name -> back to the exe: a loop.
        let empty = 0x7200_0000u64;
        let chain = [
            (0x7300_0000, empty, 0x7300_1000),
            (0x7300_1000, 0xdead_0000, 0x7300_0000),
        ];
        let (mut m, auxv, img, bias, exe) = setup(&chain);
        m.put(empty, b"\0");
        let found = find_by_auxv(&m, &auxv);
        let first_load = img.loads.iter().find(|l| l.2 > 0).unwrap();
        assert_eq!(found.mappings[0].path, exe);
        assert_eq!(found.mappings[0].start, (bias + first_load.0) & !0xfff);
        assert!(found.mappings.iter().all(|m| m.path == exe));
        assert!(
            found.problems.iter().any(|p| p.contains("loops")),
            "{:?}",
            found.problems
        );
    }

    #[test]
    fn the_executable_is_placed_by_its_header_address_without_at_phdr() {
        // A debugger without the auxiliary vector (lldb) knows where the ELF header is loaded.
        let (m, auxv, img, bias, exe) = setup(&[(0x7300_0000, 0, 0)]);
        let lookup = FileLookup::new(FileSearch::default());
        let by_phdr = find_by_auxv(&m, &auxv);
        let header = bias + img.header_vaddr().unwrap();
        let no_phdr: Vec<_> = auxv.iter().copied().filter(|a| a.0 != AT_PHDR).collect();
        let by_base = find(&m, &no_phdr, &lookup, Some(&exe), Some(header)).unwrap();
        let spans = |f: &Found| {
            f.mappings
                .iter()
                .map(|m| (m.start, m.end, m.offset, m.path.clone()))
                .collect::<Vec<_>>()
        };
        assert!(!by_base.mappings.is_empty());
        assert_eq!(spans(&by_base), spans(&by_phdr));
    }

    #[test]
    fn a_missing_file_and_a_cut_list_are_problems_not_errors() {
        let name = 0x7200_0000u64;
        let chain = [
            (0x7300_0000, 0, 0x7300_1000),
            (0x7300_1000, name, 0x7400_0000),
        ];
        let (mut m, auxv, _, _, _) = setup(&chain);
        m.put(name, b"/nonexistent/libfoo.so\0");
        let found = find_by_auxv(&m, &auxv);
        assert!(
            found.problems.iter().any(|p| p.contains("libfoo")),
            "{:?}",
            found.problems
        );
        assert!(
            found
                .problems
                .iter()
                .any(|p| p.contains("unreadable link_map")),
            "{:?}",
            found.problems
        );
    }

    #[test]
    fn no_executable_is_an_error() {
        let m = FakeMemory::new();
        let lookup = FileLookup::new(FileSearch::default());
        assert!(find(&m, &[], &lookup, None, None)
            .unwrap_err()
            .contains("--exe"));
        assert!(find(&m, &[(AT_EXECFN, 0x10)], &lookup, None, None)
            .unwrap_err()
            .contains("unreadable"));
        assert!(find(
            &m,
            &[(AT_PHDR, 0x10)],
            &lookup,
            Some("/nonexistent/python"),
            None
        )
        .is_err());
        assert!(find(
            &m,
            &[],
            &lookup,
            Some("/nonexistent/python"),
            Some(0x40_0000)
        )
        .is_err());
        let exe = std::env::current_exe().unwrap().display().to_string();
        assert!(find(&m, &[], &lookup, Some(&exe), None)
            .unwrap_err()
            .contains("AT_PHDR"));
    }
}
