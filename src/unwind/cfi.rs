//! One module's call-frame information (`.eh_frame`, `.debug_frame`) and symbols, read once
//! from its ELF file, and one unwind step through it with gimli.

use crate::memory::mapped::FileBytes;

use gimli::{
    BaseAddresses, CfaRule, DebugFrame, EhFrame, EndianSlice, Evaluation, EvaluationResult,
    LittleEndian, Register, RegisterRule, UnwindContext, UnwindSection, UnwindTableRow,
};
use object::{Object, ObjectSection};

use crate::arch::{Arch, Regs};
use crate::error::{Error, Result};
use crate::memory::Memory;
use crate::symbols::{debugfile, SymbolTable};

type Slice<'a> = EndianSlice<'a, LittleEndian>;

/// Cap on a CFI section we copy whole.
const MAX_CFI_BYTES: u64 = 64 << 20;
/// Cap on the FDEs indexed per file (a large C++ library has a few hundred thousand).
const MAX_FDES: usize = 4 << 20;
/// Steps one CFI expression may take (glibc's signal trampoline needs a handful).
const MAX_EXPRESSION_STEPS: u32 = 1000;

#[derive(Clone, Copy, Debug)]
struct Fde {
    start: u64,
    end: u64,
    offset: usize,
    debug_frame: bool,
}

/// What unwinding and naming need from one ELF file.
#[derive(Debug, Default)]
pub struct ElfUnwind {
    /// ELF address of the segment at file offset 0 (page-aligned): the load bias is the
    /// module's base minus this.
    pub first_vaddr: u64,
    eh_frame: Vec<u8>,
    eh_frame_addr: u64,
    text_addr: u64,
    debug_frame: Vec<u8>,
    /// Sorted by start.
    fdes: Vec<Fde>,
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
    /// Reads `path`, and for what it lacks its MiniDebugInfo and its separate debug file
    /// (as `debug` says).
    pub fn load(path: &str, debug: &debugfile::DebugSearch) -> Result<ElfUnwind> {
        let data = FileBytes::open(path).map_err(|e| Error::io(path, e))?;
        let obj = object::File::parse(data.bytes())
            .map_err(|e| Error::bad_file(path, format!("not an ELF file ({e})")))?;
        let first_vaddr = crate::binary::first_vaddr(&obj);
        let arch = Arch::from_object_architecture(obj.architecture()).unwrap_or_default();
        let section = |name: &str| -> Option<(u64, Vec<u8>)> {
            let s = obj.section_by_name(name)?;
            if s.size() > MAX_CFI_BYTES {
                return None;
            }
            Some((s.address(), s.uncompressed_data().ok()?.to_vec()))
        };
        let (eh_frame_addr, eh_frame) = section(".eh_frame").unwrap_or_default();
        let (_, debug_frame) = section(".debug_frame").unwrap_or_default();
        let text_addr = obj.section_by_name(".text").map_or(0, |s| s.address());
        // Symbols: the file's own, then MiniDebugInfo's, then the debug file's; a stripped
        // file's debug file also brings `.debug_frame` (and DWARF).
        let mut symbols = SymbolTable::default();
        symbols.add(&obj);
        if let Some(image) = debugfile::mini_debug_info(&obj) {
            if let Ok(mini) = object::File::parse(&image[..]) {
                symbols.add(&mini);
            }
        }
        let debug_file = debugfile::find(&obj, path, debug);
        let mut debug_frame = debug_frame;
        if let Some(df) = &debug_file {
            if let Ok(data) = FileBytes::open(df) {
                if let Ok(dobj) = object::File::parse(data.bytes()) {
                    symbols.add(&dobj);
                    if debug_frame.is_empty() {
                        if let Some(s) = dobj.section_by_name(".debug_frame") {
                            if s.size() <= MAX_CFI_BYTES {
                                debug_frame = s
                                    .uncompressed_data()
                                    .map(|d| d.to_vec())
                                    .unwrap_or_default();
                            }
                        }
                    }
                }
            }
        }
        symbols.finish();
        let mut u = ElfUnwind {
            first_vaddr,
            eh_frame,
            eh_frame_addr,
            text_addr,
            debug_frame,
            fdes: Vec::new(),
            symbols,
            arch,
            debug_file,
        };
        u.index();
        Ok(u)
    }

    fn bases(&self) -> BaseAddresses {
        BaseAddresses::default()
            .set_eh_frame(self.eh_frame_addr)
            .set_text(self.text_addr)
    }

    /// Every FDE's address range, so a lookup is a binary search (`.debug_frame` has no
    /// search table, and one index serves both sections).
    fn index(&mut self) {
        let bases = self.bases();
        let mut fdes = Vec::new();
        let eh = self.eh_frame_section();
        let mut entries = eh.entries(&bases);
        while let Ok(Some(e)) = entries.next() {
            if fdes.len() >= MAX_FDES {
                break;
            }
            if let gimli::CieOrFde::Fde(p) = e {
                if let Ok(fde) = p.parse(EhFrame::cie_from_offset) {
                    push_fde(&mut fdes, &fde, false);
                }
            }
        }
        let df = self.debug_frame_section();
        let mut entries = df.entries(&bases);
        while let Ok(Some(e)) = entries.next() {
            if fdes.len() >= MAX_FDES {
                break;
            }
            if let gimli::CieOrFde::Fde(p) = e {
                if let Ok(fde) = p.parse(DebugFrame::cie_from_offset) {
                    push_fde(&mut fdes, &fde, true);
                }
            }
        }
        // `.eh_frame` first for one address: it is what the runtime itself uses.
        fdes.sort_by_key(|f| (f.start, f.debug_frame));
        self.fdes = fdes;
    }

    fn eh_frame_section(&self) -> EhFrame<Slice<'_>> {
        let mut eh = EhFrame::new(&self.eh_frame, LittleEndian);
        eh.set_vendor(self.arch.cfi_vendor());
        eh
    }

    fn debug_frame_section(&self) -> DebugFrame<Slice<'_>> {
        let mut df = DebugFrame::new(&self.debug_frame, LittleEndian);
        df.set_address_size(8);
        df.set_vendor(self.arch.cfi_vendor());
        df
    }

    fn fde_for(&self, addr: u64) -> Option<Fde> {
        let i = self.fdes.partition_point(|f| f.start <= addr);
        self.fdes[..i]
            .iter()
            .rev()
            .take(4)
            .find(|f| addr < f.end)
            .copied()
    }

    pub fn fde_count(&self) -> usize {
        self.fdes.len()
    }

    pub fn has_cfi_for(&self, addr: u64) -> bool {
        self.fde_for(addr).is_some()
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
        let f = self.fde_for(addr)?;
        let bases = self.bases();
        Some(if f.debug_frame {
            step_in(
                &self.debug_frame_section(),
                &bases,
                f.offset,
                mem,
                ctx,
                regs,
                addr,
            )
        } else {
            step_in(
                &self.eh_frame_section(),
                &bases,
                f.offset,
                mem,
                ctx,
                regs,
                addr,
            )
        })
    }
}

fn push_fde<R: gimli::Reader<Offset = usize>>(
    fdes: &mut Vec<Fde>,
    fde: &gimli::FrameDescriptionEntry<R>,
    debug_frame: bool,
) {
    if fde.len() == 0 {
        return;
    }
    fdes.push(Fde {
        start: fde.initial_address(),
        end: fde.initial_address().saturating_add(fde.len()),
        offset: fde.offset(),
        debug_frame,
    });
}

/// The step through one FDE; also says whether the frame is a signal trampoline (its caller's
/// PC is where the signal came, not a return address).
fn step_in<'a, S: UnwindSection<Slice<'a>>>(
    section: &S,
    bases: &BaseAddresses,
    offset: usize,
    mem: &dyn Memory,
    ctx: &mut UnwindContext<usize>,
    regs: &Regs,
    addr: u64,
) -> std::result::Result<(Step, bool), String> {
    let fde = section
        .fde_from_offset(bases, S::Offset::from(offset), S::cie_from_offset)
        .map_err(|e| format!("bad FDE: {e}"))?;
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
