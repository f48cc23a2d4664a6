//! One module's call-frame information (`.eh_frame`, `.debug_frame`) and symbols, from its
//! ELF file, and one unwind step through it with gimli.
//!
//! Nothing is copied or indexed when a file is loaded: its mapping stays open, an address's
//! FDE is found by binary search in `.eh_frame_hdr`'s table (what the runtime's own unwinder
//! uses; PyPI's libtorch_cpu.so has 350,000 FDEs in 17 MiB of `.eh_frame`), and symbols are
//! read as [`SymbolTable`] needs them. Only a file without that table has its `.eh_frame`
//! indexed, and `.debug_frame` (the file's, else its debug file's) is read and indexed on the
//! first address `.eh_frame` does not cover.

use std::ops::Range;
use std::sync::{Arc, OnceLock};

use gimli::{
    BaseAddresses, CfaRule, DebugFrame, EhFrame, EndianSlice, Evaluation, EvaluationResult,
    FrameDescriptionEntry, LittleEndian, Register, RegisterRule, UnwindContext, UnwindSection,
    UnwindTableRow,
};
use object::{Object, ObjectSection};

use crate::arch::{Arch, Regs};
use crate::error::{Error, Result};
use crate::memory::mapped::FileBytes;
use crate::memory::Memory;
use crate::symbols::{debugfile, SymbolTable};

type Slice<'a> = EndianSlice<'a, LittleEndian>;
/// The state [`ElfUnwind::step`] works in (gimli's), kept from step to step.
pub type Context = UnwindContext<usize>;

/// Cap on a compressed CFI section we inflate (an uncompressed one is read in place).
const MAX_CFI_BYTES: u64 = 64 << 20;
/// Cap on the FDEs indexed per section (a large C++ library has a few hundred thousand).
const MAX_FDES: usize = 4 << 20;
/// Steps one CFI expression may take (glibc's signal trampoline needs a handful).
const MAX_EXPRESSION_STEPS: u32 = 1000;
/// `.eh_frame_hdr`'s table encoding that linkers write (and the only one read here): each
/// entry two signed 4-byte values relative to the section's start (DW_EH_PE_datarel |
/// DW_EH_PE_sdata4).
const HDR_TABLE_DATAREL_SDATA4: u8 = 0x3b;
const DW_EH_PE_OMIT: u8 = 0xff;

#[derive(Clone, Copy, Debug)]
struct Fde {
    start: u64,
    end: u64,
    offset: usize,
}

/// A section's bytes: in the file's mapping, or inflated.
#[derive(Debug)]
enum SectionBytes {
    Mapped(Arc<FileBytes>, Range<usize>),
    Owned(Vec<u8>),
}

impl SectionBytes {
    fn bytes(&self) -> &[u8] {
        match self {
            SectionBytes::Mapped(f, r) => f.bytes().get(r.clone()).unwrap_or_default(),
            SectionBytes::Owned(v) => v,
        }
    }

    /// Section `name` of `obj` (whose bytes are `file`'s); None when it is absent, or
    /// compressed and larger than [`MAX_CFI_BYTES`] inflated, or does not inflate.
    fn of(file: &Arc<FileBytes>, obj: &object::File<'_>, name: &str) -> Option<SectionBytes> {
        let s = obj.section_by_name(name)?;
        let c = s.compressed_file_range().ok()?;
        if c.format == object::CompressionFormat::None {
            let start = usize::try_from(c.offset).ok()?;
            let end = start.checked_add(usize::try_from(c.uncompressed_size).ok()?)?;
            return (end <= file.bytes().len())
                .then(|| SectionBytes::Mapped(file.clone(), start..end));
        }
        if c.uncompressed_size > MAX_CFI_BYTES {
            return None;
        }
        Some(SectionBytes::Owned(
            s.uncompressed_data().ok()?.into_owned(),
        ))
    }
}

/// `.eh_frame_hdr`'s binary search table: `count` entries from `table` in the file, each
/// relative to `base`, the section's address.
#[derive(Clone, Debug)]
struct HdrTable {
    table: Range<usize>,
    base: u64,
}

impl HdrTable {
    /// The table of the `.eh_frame_hdr` whose bytes are `hdr` at `file[at]`, at address
    /// `base`; None when it has none in the encoding linkers write.
    fn parse(hdr: &[u8], at: usize, base: u64) -> Option<HdrTable> {
        let (&[version, ptr_enc, count_enc, table_enc], rest) = hdr.split_first_chunk::<4>()?;
        if version != 1 || table_enc != HDR_TABLE_DATAREL_SDATA4 || count_enc == DW_EH_PE_OMIT {
            return None;
        }
        let ptr_len = encoded_len(ptr_enc)?;
        let count_len = encoded_len(count_enc)?;
        let count = match count_len {
            4 => u64::from(u32::from_le_bytes(
                *rest.get(ptr_len..)?.first_chunk::<4>()?,
            )),
            _ => u64::from_le_bytes(*rest.get(ptr_len..)?.first_chunk::<8>()?),
        };
        let start = 4 + ptr_len + count_len;
        // The count is the file's: the table must fit in the section.
        let len = usize::try_from(count).ok()?.checked_mul(8)?;
        let end = start.checked_add(len)?;
        if end > hdr.len() {
            return None;
        }
        Some(HdrTable {
            table: at.checked_add(start)?..at.checked_add(end)?,
            base,
        })
    }

    /// The address of the FDE of the entry starting last at or before `addr` (its range must
    /// still be checked), None when every entry starts after it.
    fn lookup(&self, file: &[u8], addr: u64) -> Option<u64> {
        let table = file.get(self.table.clone())?;
        let entry = |i: usize| -> Option<(u64, u64)> {
            let e = table.get(i * 8..i * 8 + 8)?;
            let at = |k: usize| {
                let v = i32::from_le_bytes([e[k], e[k + 1], e[k + 2], e[k + 3]]);
                self.base.wrapping_add_signed(i64::from(v))
            };
            Some((at(0), at(4)))
        };
        let n = table.len() / 8;
        // The first entry starting after `addr` (the table is sorted by start).
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if entry(mid)?.0 <= addr {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Some(entry(lo.checked_sub(1)?)?.1)
    }
}

/// Bytes of a pointer in `.eh_frame_hdr` with encoding `enc` (its format's low bits).
fn encoded_len(enc: u8) -> Option<usize> {
    match enc & 0x0f {
        0x00 => Some(8), // DW_EH_PE_absptr
        0x03 | 0x0b => Some(4),
        0x04 | 0x0c => Some(8),
        _ => None,
    }
}

/// `.debug_frame` and its FDEs, sorted by start.
#[derive(Debug)]
struct DebugFrameCfi {
    data: SectionBytes,
    fdes: Vec<Fde>,
}

/// What unwinding and naming need from one ELF file.
#[derive(Debug)]
pub struct ElfUnwind {
    /// ELF address of the segment at file offset 0 (page-aligned): the load bias is the
    /// module's base minus this.
    pub first_vaddr: u64,
    file: Arc<FileBytes>,
    eh_frame: Option<SectionBytes>,
    eh_frame_addr: u64,
    hdr: Option<HdrTable>,
    /// `.eh_frame`'s FDEs sorted by start, where `hdr` has no table (indexed on first use).
    eh_index: OnceLock<Vec<Fde>>,
    text_addr: u64,
    /// Read on the first address `.eh_frame` does not cover.
    debug_frame: OnceLock<Option<DebugFrameCfi>>,
    pub symbols: SymbolTable,
    /// The file's architecture (x86-64 when `object` names another: such a file's CFI is not
    /// read as arm64's).
    pub arch: Arch,
    /// The separate debug file found for it.
    pub debug_file: Option<String>,
}

/// How a step found the caller. One is made per frame and consumed at once: boxing the
/// registers would cost an allocation per frame for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Caller(Regs),
    /// The CFI marks this frame outermost (return address undefined: `_start`, `clone3`).
    Outermost,
}

impl ElfUnwind {
    /// Opens `path`, and for what it lacks its MiniDebugInfo and its separate debug file
    /// (as `debug` says).
    pub fn load(path: &str, debug: &debugfile::DebugSearch) -> Result<ElfUnwind> {
        let file = Arc::new(FileBytes::open(path).map_err(|e| Error::io(path, e))?);
        ElfUnwind::of_image(file, path, debug)
    }

    /// An ELF image already in hand (`path` names it: the vDSO's, copied from the target's
    /// memory, has no file).
    pub fn of_image(
        file: Arc<FileBytes>,
        path: &str,
        debug: &debugfile::DebugSearch,
    ) -> Result<ElfUnwind> {
        let obj = object::File::parse(file.bytes())
            .map_err(|e| Error::bad_file(path, format!("not an ELF file ({e})")))?;
        let first_vaddr = crate::binary::first_vaddr(&obj);
        let arch = Arch::from_object_architecture(obj.architecture()).unwrap_or_default();
        let eh_frame = SectionBytes::of(&file, &obj, ".eh_frame");
        let eh_frame_addr = obj.section_by_name(".eh_frame").map_or(0, |s| s.address());
        let hdr = obj.section_by_name(".eh_frame_hdr").and_then(|s| {
            let (off, size) = s.file_range()?;
            let at = usize::try_from(off).ok()?;
            let bytes = file
                .bytes()
                .get(at..at.checked_add(usize::try_from(size).ok()?)?)?;
            HdrTable::parse(bytes, at, s.address())
        });
        let text_addr = obj.section_by_name(".text").map_or(0, |s| s.address());
        // Symbols: the file's own, then MiniDebugInfo's, then the debug file's.
        let mut symbols = SymbolTable::default();
        symbols.add_file(file.clone());
        if let Some(image) = debugfile::mini_debug_info(&obj) {
            symbols.add_file(Arc::new(FileBytes::Read(image)));
        }
        let debug_file = debugfile::find(&obj, path, debug);
        if let Some(df) = &debug_file {
            if let Ok(data) = FileBytes::open(df) {
                symbols.add_file(Arc::new(data));
            }
        }
        drop(obj);
        Ok(ElfUnwind {
            first_vaddr,
            file,
            eh_frame,
            eh_frame_addr,
            hdr,
            eh_index: OnceLock::new(),
            text_addr,
            debug_frame: OnceLock::new(),
            symbols,
            arch,
            debug_file,
        })
    }

    fn bases(&self) -> BaseAddresses {
        BaseAddresses::default()
            .set_eh_frame(self.eh_frame_addr)
            .set_text(self.text_addr)
    }

    fn eh_frame_section(&self) -> EhFrame<Slice<'_>> {
        let bytes = self.eh_frame.as_ref().map_or(&[][..], SectionBytes::bytes);
        let mut eh = EhFrame::new(bytes, LittleEndian);
        eh.set_vendor(self.arch.cfi_vendor());
        eh
    }

    /// `.eh_frame`'s FDE holding `addr`: by `.eh_frame_hdr`'s table, else by an index of
    /// every FDE.
    fn eh_fde<'a>(
        &'a self,
        eh: &EhFrame<Slice<'a>>,
        bases: &BaseAddresses,
        addr: u64,
    ) -> Option<FrameDescriptionEntry<Slice<'a>>> {
        let offset = match &self.hdr {
            Some(hdr) => {
                let fde = hdr.lookup(self.file.bytes(), addr)?;
                usize::try_from(fde.checked_sub(self.eh_frame_addr)?).ok()?
            }
            None => {
                let fdes = self.eh_index.get_or_init(|| index(eh, bases));
                fde_for(fdes, addr)?.offset
            }
        };
        let fde = eh
            .fde_from_offset(
                bases,
                gimli::EhFrameOffset(offset),
                EhFrame::cie_from_offset,
            )
            .ok()?;
        fde.contains(addr).then_some(fde)
    }

    /// `.debug_frame`: the file's own, else its debug file's; indexed.
    fn debug_frame(&self) -> Option<&DebugFrameCfi> {
        self.debug_frame
            .get_or_init(|| {
                let own = object::File::parse(self.file.bytes())
                    .ok()
                    .and_then(|obj| SectionBytes::of(&self.file, &obj, ".debug_frame"));
                let data = own.or_else(|| {
                    let df = Arc::new(FileBytes::open(self.debug_file.as_deref()?).ok()?);
                    let obj = object::File::parse(df.bytes()).ok()?;
                    SectionBytes::of(&df, &obj, ".debug_frame")
                })?;
                let fdes = index(&debug_frame_section(&data, self.arch), &self.bases());
                Some(DebugFrameCfi { data, fdes })
            })
            .as_ref()
    }

    /// One step from the frame whose registers are `regs`: `addr` is the ELF address to look
    /// up (the PC, or the PC minus one for a frame that made a call), `bias` turns ELF
    /// addresses into target ones. None when no FDE covers `addr`.
    pub fn step(
        &self,
        mem: &dyn Memory,
        ctx: &mut UnwindContext<usize>,
        regs: &Regs,
        addr: u64,
    ) -> Option<std::result::Result<(Step, bool), String>> {
        let bases = self.bases();
        let eh = self.eh_frame_section();
        // `.eh_frame` first: it is what the runtime itself uses.
        if let Some(fde) = self.eh_fde(&eh, &bases, addr) {
            return Some(step_in(&eh, &bases, &fde, mem, ctx, regs, addr));
        }
        let df = self.debug_frame()?;
        let f = fde_for(&df.fdes, addr)?;
        let section = debug_frame_section(&df.data, self.arch);
        Some(
            section
                .fde_from_offset(
                    &bases,
                    gimli::DebugFrameOffset(f.offset),
                    DebugFrame::cie_from_offset,
                )
                .map_err(|e| format!("bad FDE: {e}"))
                .and_then(|fde| step_in(&section, &bases, &fde, mem, ctx, regs, addr)),
        )
    }
}

fn debug_frame_section(data: &SectionBytes, arch: Arch) -> DebugFrame<Slice<'_>> {
    let mut df = DebugFrame::new(data.bytes(), LittleEndian);
    df.set_address_size(8);
    df.set_vendor(arch.cfi_vendor());
    df
}

/// Every FDE's address range in `section`, sorted by start, so that a lookup is a binary
/// search (`.debug_frame` has no search table).
fn index<'a, S: UnwindSection<Slice<'a>>>(section: &S, bases: &BaseAddresses) -> Vec<Fde> {
    let mut fdes = Vec::new();
    let mut entries = section.entries(bases);
    while let Ok(Some(e)) = entries.next() {
        if fdes.len() >= MAX_FDES {
            break;
        }
        if let gimli::CieOrFde::Fde(p) = e {
            if let Ok(fde) = p.parse(S::cie_from_offset) {
                if fde.len() != 0 {
                    fdes.push(Fde {
                        start: fde.initial_address(),
                        end: fde.initial_address().saturating_add(fde.len()),
                        offset: fde.offset(),
                    });
                }
            }
        }
    }
    fdes.sort_by_key(|f| f.start);
    fdes
}

fn fde_for(fdes: &[Fde], addr: u64) -> Option<Fde> {
    let i = fdes.partition_point(|f| f.start <= addr);
    fdes[..i]
        .iter()
        .rev()
        .take(4)
        .find(|f| addr < f.end)
        .copied()
}

/// The step through one FDE; also says whether the frame is a signal trampoline (its caller's
/// PC is where the signal came, not a return address).
fn step_in<'a, S: UnwindSection<Slice<'a>>>(
    section: &S,
    bases: &BaseAddresses,
    fde: &FrameDescriptionEntry<Slice<'a>>,
    mem: &dyn Memory,
    ctx: &mut UnwindContext<usize>,
    regs: &Regs,
    addr: u64,
) -> std::result::Result<(Step, bool), String> {
    let signal = fde.is_signal_trampoline();
    let row = fde
        .unwind_info_for_address(section, bases, ctx, addr)
        .map_err(|e| format!("bad CFI: {e}"))?;
    let ra_reg = fde.cie().return_address_register();
    apply_row(section, row, ra_reg, mem, regs).map(|s| (s, signal))
}

fn apply_row<'a, S: UnwindSection<Slice<'a>>>(
    section: &S,
    row: &UnwindTableRow<usize>,
    ra_reg: Register,
    mem: &dyn Memory,
    regs: &Regs,
) -> std::result::Result<Step, String> {
    let cfa = match row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } => {
            let base = regs
                .get(register.0)
                .ok_or_else(|| format!("CFA from unknown register {}", register.0))?;
            base.checked_add_signed(*offset)
                .ok_or("CFA out of range".to_string())?
        }
        CfaRule::Expression(e) => {
            let e = e.get(section).map_err(|e| e.to_string())?;
            evaluate(e, mem, regs, None)?
        }
    };
    let arch = regs.arch();
    let mut out = Regs::new(arch);
    out.set_sp(cfa);
    // The caller's PC is the return address (x86-64: column 16, which is rip; arm64: x30,
    // whose value the caller also sees, since the call wrote it), without the bits that are
    // not address (arm64 pointer authentication).
    let (pc, sp) = (arch.pc(), arch.sp());
    for r in 0..arch.register_count() {
        if r == sp || (r == pc && ra_reg.0 != pc) {
            continue;
        }
        let rule = if r == pc {
            row.register(ra_reg)
        } else {
            row.register(Register(r))
        };
        let value = match rule {
            // Unmentioned: the ABI's callee-saved registers keep their value, and so does a
            // return address still in its register (arm64's x30 in a leaf function, which
            // never saves it; x86-64's CIE always gives the column a rule).
            None if arch.callee_saved(r) || r == ra_reg.0 => regs.get(r),
            None | Some(RegisterRule::Undefined) => None,
            Some(RegisterRule::SameValue) => regs.get(r),
            Some(RegisterRule::Offset(n)) => {
                let a = cfa
                    .checked_add_signed(n)
                    .ok_or("saved register out of range")?;
                Some(read(mem, a)?)
            }
            Some(RegisterRule::ValOffset(n)) => cfa.checked_add_signed(n),
            Some(RegisterRule::Register(o)) => regs.get(o.0),
            Some(RegisterRule::Expression(e)) => {
                let e = e.get(section).map_err(|e| e.to_string())?;
                Some(read(mem, evaluate(e, mem, regs, Some(cfa))?)?)
            }
            Some(RegisterRule::ValExpression(e)) => {
                let e = e.get(section).map_err(|e| e.to_string())?;
                Some(evaluate(e, mem, regs, Some(cfa))?)
            }
            Some(RegisterRule::Constant(c)) => Some(c),
            Some(RegisterRule::Architectural) => None,
        };
        if r == ra_reg.0 {
            let Some(v) = value else {
                return Ok(Step::Outermost);
            };
            out.set_pc(arch.code_address(v));
        }
        if let Some(v) = value {
            out.set(r, v);
        }
    }
    if out.get(pc).is_none() {
        return Err(format!(
            "return address in register {}, not one of {}'s",
            ra_reg.0,
            arch.name()
        ));
    }
    Ok(Step::Caller(out))
}

fn read(mem: &dyn Memory, addr: u64) -> std::result::Result<u64, String> {
    mem.read_u64(addr).map_err(|e| e.to_string())
}

/// A CFI expression's value (`cfa` is pushed first for register rules, DWARF 5 6.4.2).
fn evaluate(
    e: gimli::Expression<Slice<'_>>,
    mem: &dyn Memory,
    regs: &Regs,
    cfa: Option<u64>,
) -> std::result::Result<u64, String> {
    let enc = gimli::Encoding {
        address_size: 8,
        format: gimli::Format::Dwarf32,
        version: 4,
    };
    let mut ev: Evaluation<Slice<'_>> = e.evaluation(enc);
    ev.set_max_iterations(MAX_EXPRESSION_STEPS);
    if let Some(c) = cfa {
        ev.set_initial_value(c);
    }
    let err = |e: gimli::Error| format!("CFI expression: {e}");
    let mut state = ev.evaluate().map_err(err)?;
    loop {
        state = match state {
            EvaluationResult::Complete => break,
            EvaluationResult::RequiresRegister { register, .. } => {
                let v = regs.get(register.0).ok_or_else(|| {
                    format!("CFI expression needs unknown register {}", register.0)
                })?;
                ev.resume_with_register(gimli::Value::Generic(v))
                    .map_err(err)?
            }
            EvaluationResult::RequiresMemory { address, size, .. } => {
                let mut b = [0u8; 8];
                let n = (size as usize).min(8);
                mem.read_into(address, &mut b[..n])
                    .map_err(|e| e.to_string())?;
                ev.resume_with_memory(gimli::Value::Generic(u64::from_le_bytes(b)))
                    .map_err(err)?
            }
            EvaluationResult::RequiresCallFrameCfa => match cfa {
                Some(c) => ev.resume_with_call_frame_cfa(c).map_err(err)?,
                None => return Err("CFI expression needs the CFA".into()),
            },
            _ => return Err("CFI expression: unsupported operation".into()),
        };
    }
    match ev.as_result().first().map(|p| &p.location) {
        Some(gimli::Location::Address { address }) => Ok(*address),
        Some(gimli::Location::Value { value }) => value.to_u64(!0).map_err(err),
        _ => Err("CFI expression: no value".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::FakeMemory;

    /// An `.eh_frame_hdr`: version 1, a pc-relative 4-byte `.eh_frame` pointer, a 4-byte
    /// count, then `entries` in `table_enc`.
    fn hdr(entries: &[(i32, i32)], count: u32, table_enc: u8) -> Vec<u8> {
        let mut h = vec![1, 0x1b, 0x03, table_enc];
        h.extend(0i32.to_le_bytes());
        h.extend(count.to_le_bytes());
        for (start, fde) in entries {
            h.extend(start.to_le_bytes());
            h.extend(fde.to_le_bytes());
        }
        h
    }

    #[test]
    fn the_hdr_table_gives_the_fde_starting_last_at_or_before_an_address() {
        let h = hdr(
            &[(0x100, 0x10), (0x200, 0x20), (0x300, -0x30)],
            3,
            HDR_TABLE_DATAREL_SDATA4,
        );
        let base = 0x1000;
        let t = HdrTable::parse(&h, 0, base).expect("a table");
        assert_eq!(t.lookup(&h, base + 0xff), None);
        assert_eq!(t.lookup(&h, base + 0x100), Some(base + 0x10));
        assert_eq!(t.lookup(&h, base + 0x2ff), Some(base + 0x20));
        assert_eq!(t.lookup(&h, u64::MAX), Some(base - 0x30));
        // The table inside a larger file, at its offset there.
        let mut file = vec![0xee; 40];
        file.extend(&h);
        let t = HdrTable::parse(&h, 40, base).expect("a table");
        assert_eq!(t.lookup(&file, base + 0x250), Some(base + 0x20));
        // The file shorter than the table said: nothing, not a panic.
        assert_eq!(t.lookup(&file[..50], base + 0x250), None);
    }

    #[test]
    fn an_hdr_without_a_table_we_read_is_none() {
        let base = 0x1000;
        let one = [(0x100, 0x10)];
        // A count past the section's end (and one that would overflow), another table
        // encoding, another version, no count, a cut header.
        assert!(HdrTable::parse(&hdr(&one, 2, HDR_TABLE_DATAREL_SDATA4), 0, base).is_none());
        assert!(HdrTable::parse(&hdr(&one, u32::MAX, 0x3b), 0, base).is_none());
        assert!(HdrTable::parse(&hdr(&one, 1, 0x1b), 0, base).is_none());
        let mut v2 = hdr(&one, 1, HDR_TABLE_DATAREL_SDATA4);
        v2[0] = 2;
        assert!(HdrTable::parse(&v2, 0, base).is_none());
        let mut omitted = hdr(&one, 1, HDR_TABLE_DATAREL_SDATA4);
        omitted[2] = DW_EH_PE_OMIT;
        assert!(HdrTable::parse(&omitted, 0, base).is_none());
        assert!(HdrTable::parse(&[1, 0x1b], 0, base).is_none());
        assert!(HdrTable::parse(&[], 0, base).is_none());
        // Absent entries: an empty table finds nothing.
        let empty = HdrTable::parse(&hdr(&[], 0, HDR_TABLE_DATAREL_SDATA4), 0, base).unwrap();
        assert_eq!(empty.lookup(&hdr(&[], 0, 0x3b), base), None);
    }

    /// The C library this test runs with: an ELF file with `.eh_frame_hdr` on every system
    /// (not a copy another test has mapped).
    fn libc_path() -> String {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let tmp = std::env::temp_dir();
        maps.lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .filter(|p| !std::path::Path::new(p).starts_with(&tmp))
            .find(|p| p.contains("libc.so") || p.contains("/libc-"))
            .expect("the C library among this process's mappings")
            .to_string()
    }

    #[test]
    fn the_c_library_unwinds_and_names_by_its_hdr_table() {
        let path = libc_path();
        let elf = ElfUnwind::load(&path, &Default::default()).unwrap();
        assert!(elf.hdr.is_some(), "{path}: no .eh_frame_hdr table read");
        let data = std::fs::read(&path).unwrap();
        let obj = object::File::parse(&data[..]).unwrap();
        use object::ObjectSymbol;
        let start = obj
            .symbols()
            .chain(obj.dynamic_symbols())
            .find(|s| s.name() == Ok("__libc_start_main"))
            .map(|s| s.address())
            .expect("__libc_start_main");
        // Its FDE is found by the table, and it has a name.
        let eh = elf.eh_frame_section();
        let fde = elf.eh_fde(&eh, &elf.bases(), start + 4).expect("an FDE");
        assert!(fde.contains(start + 4));
        elf.symbols.prepare(&[start + 4]);
        let (name, off) = elf.symbols.lookup(start + 4).expect("a name");
        assert!(name.contains("libc_start_main"), "{name}");
        assert_eq!(off, 4);
        assert!(
            elf.eh_index.get().is_none(),
            "the table was read, not an index built"
        );
    }

    /// A small deterministic generator (xorshift).
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn a_corrupt_library_gives_errors_not_panics() {
        let path = libc_path();
        let good = std::fs::read(&path).unwrap();
        let obj = object::File::parse(&good[..]).unwrap();
        // The bytes the unwinder and the symbol tables read.
        let targets: Vec<(usize, usize)> = [
            ".eh_frame_hdr",
            ".eh_frame",
            ".dynsym",
            ".dynstr",
            ".symtab",
            ".strtab",
        ]
        .iter()
        .filter_map(|n| obj.section_by_name(n)?.file_range())
        .map(|(o, s)| (o as usize, s as usize))
        .filter(|&(_, s)| s > 0)
        .collect();
        let text = obj.section_by_name(".text").unwrap();
        let (lo, size) = (text.address(), text.size());
        let dir = std::env::temp_dir().join(format!("pyunwind-cfi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("corrupt-copy");
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        let mut mem = FakeMemory::new();
        mem.put(0x7000_0000, &[0x5a; 4096]);
        for round in 0..24 {
            let mut bytes = good.clone();
            for _ in 0..64 {
                let (o, s) = targets[next(&mut rng) as usize % targets.len()];
                // Mostly the first bytes of a section (headers, the table's start), some anywhere.
                let at = if next(&mut rng) % 2 == 0 { 64 } else { s };
                bytes[o + next(&mut rng) as usize % at.min(s)] = next(&mut rng) as u8;
            }
            if round % 6 == 5 {
                bytes.truncate(next(&mut rng) as usize % bytes.len());
            }
            std::fs::write(&file, &bytes).unwrap();
            let Ok(elf) = ElfUnwind::load(file.to_str().unwrap(), &Default::default()) else {
                continue;
            };
            let addrs: Vec<u64> = (0..64).map(|_| lo + next(&mut rng) % size).collect();
            elf.symbols.prepare(&addrs);
            for &a in &addrs {
                let _ = elf.symbols.lookup(a);
                let mut regs = Regs::new(Arch::X86_64);
                regs.set_pc(a);
                regs.set_sp(0x7000_0800);
                regs.set_fp(0x7000_0900);
                let _ = elf.step(&mem, &mut UnwindContext::new(), &regs, a);
            }
            let _ = elf.symbols.ranges_where(|_| true);
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
