//! Native unwinding for the CLI: from a thread's registers (a core's NT_PRSTATUS note, or
//! ptrace on a live thread), through the CFI of the mapped modules (gimli), the JIT and
//! trampoline code CPython writes at run time ([`crate::native::jit`]), and frame pointers
//! where neither applies.
//!
//! Bounded: at most [`MAX_NATIVE_FRAMES`] frames, and every step must move the stack pointer
//! up (to older frames); a step that cannot be made ends the stack with an error, and the
//! frames found so far stay.

pub mod cfi;
pub mod jit;
pub mod ptrace;
pub mod regs;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

use gimli::UnwindContext;

use self::cfi::{ElfUnwind, Step};
use self::jit::JitMap;
use self::regs::Regs;
use crate::arch::Arch;
use crate::binary::Module;
use crate::memory::mapped::FileBytes;
use crate::memory::FileLookup;
use crate::memory::Memory;
use crate::symbols::debugfile::DebugSearch;
use crate::symbols::demangle;
use crate::symbols::lines::{self, Lines, SourceFrame};
use crate::target::Target;

/// The deepest native stack we walk (a 5000-deep Python recursion on 3.10 is about 25,000
/// native frames).
pub const MAX_NATIVE_FRAMES: usize = 100_000;
/// Distinct addresses a module's DWARF is cut down to at most when loaded for a stack's frames
/// (beyond, the others are named from its whole DWARF).
const MAX_PRELOAD_ADDRESSES: usize = 4096;
/// A frame-pointer step must stay within this distance of the stack pointer.
const MAX_FP_FRAME_BYTES: u64 = 1 << 24;

/// How a frame's caller was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    Cfi,
    FramePointer,
    Jit,
    /// A signal trampoline recognized by its code.
    Signal,
}

#[derive(Clone, Debug)]
pub struct Frame {
    pub pc: u64,
    pub sp: u64,
    /// The address to name the frame by: the PC of the innermost frame and of a frame a
    /// signal interrupted, else the PC minus one (inside the call instruction).
    pub lookup: u64,
    /// The index of the module holding `pc` in [`ModuleSet::modules`].
    pub module: Option<usize>,
    /// The JIT executor or trampoline holding `pc`.
    pub jit_label: Option<String>,
    /// A signal-return trampoline recognized by its code (it has no symbol or CFI: qemu-user's
    /// on arm64): named as gdb names such frames.
    pub sigreturn: bool,
}

/// gdb's name for a signal trampoline's frame.
pub const SIGNAL_FRAME_NAME: &str = "<signal handler called>";

#[derive(Clone, Debug, Default)]
pub struct Stack {
    pub frames: Vec<Frame>,
    /// Why the walk stopped before the outermost frame, if it did.
    pub error: Option<String>,
}

/// The target's modules, each with its CFI and symbols loaded on first use.
pub struct ModuleSet {
    pub modules: Vec<Module>,
    elves: Vec<OnceLock<Option<Arc<ElfUnwind>>>>,
    /// Each module's DWARF (its own or its debug file's), loaded when a frame needs a line.
    lines: Vec<OnceLock<Option<Lines>>>,
    /// Local paths of the modules' files (the target's lookup: sysroot, map_files...), each
    /// found on first use: a process maps a hundred files (PyTorch's CUDA build: 0.5 GB of
    /// libtorch_cuda.so, the nvidia-* libraries), and checking each one's build-id costs more
    /// than the few with frames.
    paths: Vec<OnceLock<Option<String>>>,
    files: Arc<FileLookup>,
    /// Where separate debug files are looked for.
    debug: DebugSearch,
}

/// A native frame's name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Name {
    /// The function, demangled as gdb prints it (see [`crate::symbols::demangle`]).
    pub function: Option<String>,
    /// The symbol table's name of the function, as the file spells it (mangled).
    pub symbol: Option<String>,
    /// The module's file name.
    pub module: Option<String>,
    /// From DWARF: the functions inlined at the PC (innermost first), then the function's
    /// own file and line as the last entry; empty without DWARF.
    pub source: Vec<SourceName>,
    /// The address's offset in the module's file image (target address minus load bias).
    pub offset: Option<u64>,
}

/// One function at a PC from DWARF (a [`SourceFrame`]), its name demangled.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceName {
    /// DWARF's name, demangled (a linkage name as pystack shows an inlined call:
    /// `long work::hop<long>(int (*)(int), long)`).
    pub function: Option<String>,
    /// DWARF's name as it is: the linkage name where DWARF has one.
    pub symbol: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
}

impl From<SourceFrame> for SourceName {
    fn from(f: SourceFrame) -> Self {
        SourceName {
            function: f.function.as_deref().map(shown),
            symbol: f.function,
            file: f.file,
            line: f.line,
        }
    }
}

/// A linkage name as it is shown: demangled, else as it is.
fn shown(raw: &str) -> String {
    demangle::demangle(raw).unwrap_or_else(|| raw.to_string())
}

/// The name of the vDSO's module, as /proc/PID/maps names its region.
pub const VDSO: &str = "[vdso]";

/// The most of the target's memory taken for the vDSO's image (two pages on x86-64 and arm64).
const MAX_VDSO_BYTES: u64 = 1 << 20;

impl ModuleSet {
    pub fn new(target: &Target) -> ModuleSet {
        let modules = ModuleSet::modules_of(target);
        let debug = DebugSearch::of(&target.files);
        let elves = modules
            .iter()
            .map(|m| {
                let slot = OnceLock::new();
                if m.path == VDSO {
                    // Read now: the module set outlives the target's memory it was made from.
                    let _ = slot.set(vdso_image(target, m, &debug).map(Arc::new));
                }
                slot
            })
            .collect();
        ModuleSet {
            elves,
            lines: modules.iter().map(|_| OnceLock::new()).collect(),
            paths: modules.iter().map(|_| OnceLock::new()).collect(),
            modules,
            files: target.files.clone(),
            debug,
        }
    }

    /// The target's modules ([`Target::modules`]) and its vDSO ([`VDSO`]), by address.
    pub fn modules_of(target: &Target) -> Vec<Module> {
        let mut modules = target.modules();
        if let Some((start, end)) = target.vdso {
            if !modules.iter().any(|m| m.start < end && start < m.end) {
                let at = modules.partition_point(|m| m.start < start);
                let path = VDSO.to_string();
                modules.insert(
                    at,
                    Module {
                        path,
                        start,
                        end,
                        base: start,
                    },
                );
            }
        }
        modules
    }

    /// The local file of module `i`.
    fn path(&self, i: usize) -> Option<&str> {
        self.paths
            .get(i)?
            .get_or_init(|| self.files.resolve(&self.modules.get(i)?.path).ok())
            .as_deref()
    }

    pub fn find(&self, pc: u64) -> Option<usize> {
        let i = self.modules.partition_point(|m| m.start <= pc);
        let k = i.checked_sub(1)?;
        self.modules[k].contains(pc).then_some(k)
    }

    fn elf(&self, i: usize) -> Option<&ElfUnwind> {
        self.elves
            .get(i)?
            .get_or_init(|| {
                let path = self.path(i)?;
                ElfUnwind::load(path, &self.debug).ok().map(Arc::new)
            })
            .as_deref()
    }

    fn elf_arc(&self, i: usize) -> Option<Arc<ElfUnwind>> {
        self.elf(i)?;
        self.elves.get(i)?.get()?.clone()
    }

    /// Target address minus this, is the ELF address.
    fn bias(&self, i: usize, elf: &ElfUnwind) -> u64 {
        self.modules[i].base.wrapping_sub(elf.first_vaddr)
    }

    /// The target address ranges of module `i`'s functions whose name `keep` accepts.
    pub fn function_ranges(&self, i: usize, keep: impl Fn(&str) -> bool) -> Vec<(u64, u64)> {
        let Some(elf) = self.elf(i) else {
            return Vec::new();
        };
        let bias = self.bias(i, elf);
        elf.symbols
            .ranges_where(keep)
            .into_iter()
            .map(|(s, e)| (s.wrapping_add(bias), e.wrapping_add(bias)))
            .collect()
    }

    /// The file holding module `i`'s DWARF: its own, else its separate debug file.
    fn dwarf_path<'a>(&'a self, i: usize, elf: &'a ElfUnwind) -> Option<&'a str> {
        let own = self.path(i)?;
        if lines::has_dwarf(own) {
            Some(own)
        } else {
            elf.debug_file.as_deref()
        }
    }

    /// Before `frames` are named: finds their symbols, one pass over each module's symbol
    /// tables for all of them (see [`crate::symbols::SymbolTable::prepare`]), on another thread
    /// while this one loads the DWARF of their modules (most of which is inflating a debug
    /// file's sections, itself on every core).
    pub fn preload<'f>(&self, frames: impl IntoIterator<Item = &'f Frame>) {
        let frames: Vec<&Frame> = frames.into_iter().collect();
        let work = self.symbol_work(frames.iter().copied());
        if work.is_empty() {
            return self.preload_lines(frames);
        }
        let panicked = std::thread::scope(|scope| {
            // A panic there goes on here, naming where it happened ([`crate::panic`]); a
            // thread the system refuses leaves the work to this one.
            let symbols = std::thread::Builder::new()
                .spawn_scoped(scope, || crate::panic::in_worker(|| prepare_symbols(&work)))
                .ok();
            self.preload_lines(frames);
            match symbols.map(|t| t.join()) {
                Some(Ok(r)) => r.err(),
                _ => crate::panic::in_worker(|| prepare_symbols(&work)).err(),
            }
        });
        if let Some(p) = panicked {
            crate::panic::resume(p);
        }
    }

    /// [`ModuleSet::preload`]'s symbols alone, on this thread.
    pub fn preload_symbols<'f>(&self, frames: impl IntoIterator<Item = &'f Frame>) {
        prepare_symbols(&self.symbol_work(frames));
    }

    /// Each module of `frames` with the ELF addresses of theirs in it.
    fn symbol_work<'f>(
        &self,
        frames: impl IntoIterator<Item = &'f Frame>,
    ) -> Vec<(Arc<ElfUnwind>, Vec<u64>)> {
        let mut addrs: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
        for f in frames {
            if let Some(i) = f.module {
                if let Some(elf) = self.elf(i) {
                    addrs
                        .entry(i)
                        .or_default()
                        .push(f.lookup.wrapping_sub(self.bias(i, elf)));
                }
            }
        }
        addrs
            .into_iter()
            .filter_map(|(i, a)| Some((self.elf_arc(i)?, a)))
            .collect()
    }

    /// Loads the DWARF of the modules `frames` are in that have none loaded yet, all at once on
    /// every core (see [`Lines::load_many`]), before those frames are named: each keeps the
    /// units that cover them where it can, and loads the rest only if asked for another address.
    fn preload_lines<'f>(&self, frames: impl IntoIterator<Item = &'f Frame>) {
        let mut addrs: BTreeMap<usize, BTreeSet<u64>> = BTreeMap::new();
        for f in frames {
            let Some(i) = f.module else { continue };
            if self.lines.get(i).is_some_and(|l| l.get().is_none()) {
                if let Some(elf) = self.elf(i) {
                    let a = addrs.entry(i).or_default();
                    if a.len() < MAX_PRELOAD_ADDRESSES {
                        a.insert(f.lookup.wrapping_sub(self.bias(i, elf)));
                    }
                }
            }
        }
        let found: Vec<(usize, &str, Vec<u64>)> = addrs
            .into_iter()
            .filter_map(|(i, a)| {
                let path = self.dwarf_path(i, self.elf(i)?)?;
                Some((i, path, a.into_iter().collect()))
            })
            .collect();
        if found.is_empty() {
            return;
        }
        let wanted: Vec<(&str, Option<&[u64]>)> =
            found.iter().map(|f| (f.1, Some(&f.2[..]))).collect();
        for ((i, _, _), l) in found.iter().zip(Lines::load_many(&wanted)) {
            let _ = self.lines[*i].set(l);
        }
    }

    /// The function, module and offset of a frame, and its file, line and inlined calls.
    pub fn name(&self, f: &Frame) -> Name {
        self.name_with(f, true)
    }

    /// [`ModuleSet::name`] without DWARF (`source` empty): from the symbol tables only, which
    /// costs no decompression of a debug file's `.debug_info` (python3.11-dbg's: 5 MiB
    /// compressed, 80 ms to inflate).
    pub fn symbol_name(&self, f: &Frame) -> Name {
        self.name_with(f, false)
    }

    fn name_with(&self, f: &Frame, lines: bool) -> Name {
        if f.sigreturn {
            return Name {
                function: Some(SIGNAL_FRAME_NAME.to_string()),
                ..Name::default()
            };
        }
        let Some(i) = f.module else {
            return Name::default();
        };
        let module = Some(self.modules[i].file_name().to_string());
        let Some(elf) = self.elf(i) else {
            return Name {
                module,
                offset: Some(f.pc.wrapping_sub(self.modules[i].base)),
                ..Name::default()
            };
        };
        let bias = self.bias(i, elf);
        let addr = f.lookup.wrapping_sub(bias);
        let symbol = elf.symbols.lookup(addr).map(|(n, _)| n);
        let function = symbol.map(shown);
        let symbol = symbol.map(str::to_string);
        if !lines {
            return Name {
                function,
                symbol,
                module,
                offset: Some(f.pc.wrapping_sub(bias)),
                source: Vec::new(),
            };
        }
        let source = self
            .lines
            .get(i)
            .and_then(|l| {
                l.get_or_init(|| Lines::load(self.dwarf_path(i, elf)?))
                    .as_ref()
            })
            .map(|l| l.frames(addr))
            .unwrap_or_default()
            .into_iter()
            .map(SourceName::from)
            .collect();
        Name {
            function,
            symbol,
            module,
            offset: Some(f.pc.wrapping_sub(bias)),
            source,
        }
    }
}

fn prepare_symbols(work: &[(Arc<ElfUnwind>, Vec<u64>)]) {
    for (elf, addrs) in work {
        elf.symbols.prepare(addrs);
    }
}

/// Unwinds one thread from `start`. `jit`: the stop's JIT and trampoline code, when the
/// interpreter may have some.
pub fn unwind(mem: &dyn Memory, set: &ModuleSet, jit: Option<&JitMap>, start: Regs) -> Stack {
    let mut ctx: UnwindContext<usize> = UnwindContext::new();
    let mut stack = Stack::default();
    let mut regs = start;
    let mut exact_pc = true;
    loop {
        let pc = regs.pc();
        let sp = regs.sp();
        let lookup = if exact_pc { pc } else { pc.saturating_sub(1) };
        let module = set.find(lookup);
        let region = jit.and_then(|j| j.lookup(pc));
        stack.frames.push(Frame {
            pc,
            sp,
            lookup,
            module,
            jit_label: region.map(|r| r.label.clone()),
            sigreturn: false,
        });
        if stack.frames.len() >= MAX_NATIVE_FRAMES {
            stack.error = Some(format!(
                "native stack deeper than {MAX_NATIVE_FRAMES} frames: cut"
            ));
            break;
        }
        let step = match (region, jit) {
            // arm64: what the entry shim saved (its decoded prologue), else the frame records
            // JIT code and trampolines keep.
            (Some(r), Some(j)) if regs.arch().jit_keeps_frame_records() => step_jit(mem, j, &regs)
                .or_else(|_| step_fp_out_of(mem, r, &regs))
                .map(|r| (Step::Caller(r), false, How::Jit)),
            (Some(_), Some(j)) => {
                step_jit(mem, j, &regs).map(|r| (Step::Caller(r), false, How::Jit))
            }
            _ => step_cfi(mem, set, &mut ctx, &regs, module, lookup),
        };
        let (next, signal) = match step {
            Ok((Step::Outermost, _, _)) => break,
            Ok((Step::Caller(next), signal, how)) => {
                if how == How::Signal {
                    if let Some(f) = stack.frames.last_mut() {
                        f.sigreturn = true;
                        f.module = None;
                    }
                }
                (next, signal)
            }
            Err(e) => {
                stack.error = Some(format!("unwinding from {pc:#x}: {e}"));
                break;
            }
        };
        if next.pc() == 0 {
            break;
        }
        // A leaf function (arm64 keeps its return address in x30 and may leave sp alone) can
        // only be the innermost frame or one a signal interrupted: only there may the caller
        // share its stack pointer, and then at another PC.
        let leaf = exact_pc && next.sp() == sp && next.pc() != pc;
        if next.sp() <= sp && !leaf {
            stack.error = Some(format!(
                "unwinding from {pc:#x}: the stack pointer did not move up ({:#x} after {sp:#x})",
                next.sp()
            ));
            break;
        }
        exact_pc = signal;
        regs = next;
    }
    stack
}

/// The stack pointer of the caller of the frame at `pc` with `sp` and `bp` (the frame's own
/// stack frame is `sp..` this): one CFI step. `exact_pc`: the innermost frame's PC; other
/// frames' PCs are return addresses, looked up one byte before.
#[allow(clippy::too_many_arguments)]
pub fn caller_sp(
    mem: &dyn Memory,
    set: &ModuleSet,
    arch: Arch,
    pc: u64,
    sp: u64,
    bp: u64,
    exact_pc: bool,
) -> Option<u64> {
    let mut regs = Regs::new(arch);
    regs.set_pc(pc);
    regs.set_sp(sp);
    regs.set_fp(bp);
    let lookup = if exact_pc { pc } else { pc.saturating_sub(1) };
    let mut ctx: UnwindContext<usize> = UnwindContext::new();
    match step_cfi(mem, set, &mut ctx, &regs, set.find(lookup), lookup) {
        Ok((Step::Caller(next), _, _)) if next.sp() > sp => Some(next.sp()),
        _ => None,
    }
}

/// One step with the module's CFI, else with the frame pointer. A signal trampoline that has
/// no CFI (qemu-user's on arm64) is recognized by its code.
fn step_cfi(
    mem: &dyn Memory,
    set: &ModuleSet,
    ctx: &mut UnwindContext<usize>,
    regs: &Regs,
    module: Option<usize>,
    lookup: u64,
) -> Result<(Step, bool, How), String> {
    let read = |a: u64| mem.read_u64(a).ok();
    if let Some(next) = regs.arch().signal_frame(&read, regs) {
        return Ok((Step::Caller(next), true, How::Signal));
    }
    if let Some(i) = module {
        if let Some(elf) = set.elf(i) {
            let addr = lookup.wrapping_sub(set.bias(i, elf));
            if let Some(r) = elf.step(mem, ctx, regs, addr) {
                return r.map(|(s, signal)| (s, signal, How::Cfi));
            }
        }
    }
    step_fp(mem, regs).map(|r| (Step::Caller(r), false, How::FramePointer))
}

/// The caller by the frame-pointer chain, the same shape on both architectures: `[fp]` is the
/// caller's frame pointer, `[fp+8]` the return address (x86-64 rbp; arm64's frame record at
/// x29, AAPCS64 6.2.3), and the caller's stack pointer is taken as `fp+16` (exact on x86-64; on
/// arm64 the record sits at the bottom of its frame, so the caller's CFI, which is usually
/// x29-based there, is what counts).
fn step_fp(mem: &dyn Memory, regs: &Regs) -> Result<Regs, String> {
    let no = || "no CFI, and no frame pointer to follow".to_string();
    let bp = regs.fp().ok_or_else(no)?;
    let sp = regs.sp();
    if bp < sp || bp - sp > MAX_FP_FRAME_BYTES || bp % 8 != 0 {
        return Err(no());
    }
    let ra_at = bp.checked_add(8).ok_or_else(no)?;
    let arch = regs.arch();
    let mut out = *regs;
    out.set_fp(mem.read_u64(bp).map_err(|e| e.to_string())?);
    let ra = mem.read_u64(ra_at).map_err(|e| e.to_string())?;
    out.set_pc(arch.code_address(ra));
    out.set_sp(bp.checked_add(16).ok_or_else(no)?);
    Ok(out)
}

/// Frame records a 3.14 executor's own entry shim may add: it sits at the start of the
/// executor's mapping, sets up a frame record and branches into the code.
const MAX_SHIM_RECORDS: usize = 4;

/// arm64: the caller of a frame in JIT or trampoline code, by frame records. A 3.14 executor
/// starts with its entry shim, which keeps a frame record of its own: a step that lands in the
/// same executor is the shim, stepped through (on x86-64 [`step_jit`] restores what the shim
/// saved), so the executor shows once, as the x86-64 unwind shows it.
fn step_fp_out_of(mem: &dyn Memory, region: &jit::Region, regs: &Regs) -> Result<Regs, String> {
    let mut next = step_fp(mem, regs)?;
    if matches!(region.kind, jit::RegionKind::Executor { .. }) {
        for _ in 0..MAX_SHIM_RECORDS {
            if !(region.start <= next.pc() && next.pc() < region.end) {
                return Ok(next);
            }
            let sp = next.sp();
            next = step_fp(mem, &next)?;
            if next.sp() <= sp {
                return Err("JIT entry shim: the frame records do not move up the stack".into());
            }
        }
        return Err("JIT entry shim: too many frame records in one executor".into());
    }
    Ok(next)
}

fn step_jit(mem: &dyn Memory, j: &JitMap, regs: &Regs) -> Result<Regs, String> {
    let u = j
        .unwind(
            mem,
            crate::arch::jit::Regs {
                pc: regs.pc(),
                sp: regs.sp(),
                bp: regs.fp().unwrap_or(0),
            },
        )
        .ok_or("JIT frame: no way to its caller")?;
    let arch = regs.arch();
    let mut out = Regs::new(arch);
    for r in 0..arch.register_count() {
        if arch.callee_saved(r) {
            if let Some(v) = regs.get(r) {
                out.set(r, v);
            }
        }
    }
    for (name, v) in &u.caller {
        if let Some(r) = arch.register_number(name) {
            out.set(r, *v);
        }
    }
    Ok(out)
}

/// A thread's stack as copied while it was stopped, over the rest of the target's memory.
pub struct StackCopy<'a> {
    pub base: &'a dyn Memory,
    pub start: u64,
    pub bytes: &'a [u8],
}

impl Memory for StackCopy<'_> {
    fn read_into(&self, addr: u64, buf: &mut [u8]) -> std::result::Result<(), crate::ReadError> {
        let off = addr
            .checked_sub(self.start)
            .and_then(|o| usize::try_from(o).ok());
        if let Some(src) = off.and_then(|o| self.bytes.get(o..o.checked_add(buf.len())?)) {
            buf.copy_from_slice(src);
            return Ok(());
        }
        self.base.read_into(addr, buf)
    }
    fn any_thread(&self) -> bool {
        self.base.any_thread()
    }
}

/// The vDSO's CFI and symbols, from its image in the target's memory; None where the image
/// cannot be read whole or is no ELF file (a core that left it out, a corrupt one).
fn vdso_image(target: &Target, m: &Module, debug: &DebugSearch) -> Option<ElfUnwind> {
    let len = m.end.checked_sub(m.start)?;
    let bytes = target.mem.read_vec(m.start, len, MAX_VDSO_BYTES).ok()?;
    if !bytes.starts_with(b"\x7fELF") {
        return None;
    }
    // Its debug file only where one is installed: the vDSO is read with every module set,
    // frames in it or not, and a debuginfod server is asked only for modules with frames.
    let local = DebugSearch {
        debuginfod: None,
        ..debug.clone()
    };
    ElfUnwind::of_image(Arc::new(FileBytes::Read(bytes)), VDSO, &local).ok()
}

#[cfg(test)]
mod tests {
    use super::regs::{RBP, RSP};
    use super::*;
    use crate::memory::FakeMemory;

    fn none() -> ModuleSet {
        ModuleSet {
            modules: Vec::new(),
            elves: Vec::new(),
            lines: Vec::new(),
            paths: Vec::new(),
            files: Arc::new(FileLookup::default()),
            debug: DebugSearch::default(),
        }
    }

    fn regs(pc: u64, sp: u64, bp: u64) -> Regs {
        let mut r = Regs::default();
        r.set(regs::RA, pc);
        r.set(RSP, sp);
        r.set(RBP, bp);
        r
    }

    #[test]
    fn frame_pointers_end_at_a_null_return_address() {
        let mut m = FakeMemory::new();
        // Frame 0 at sp 0x1000, its rbp 0x1010 -> caller pc 0x5001, rbp 0x1040.
        m.put_u64(0x1010, 0x1040).put_u64(0x1018, 0x5001);
        m.put_u64(0x1040, 0).put_u64(0x1048, 0);
        let s = unwind(&m, &none(), None, regs(0x4000, 0x1000, 0x1010));
        assert_eq!(s.error, None);
        assert_eq!(
            s.frames.iter().map(|f| f.pc).collect::<Vec<_>>(),
            [0x4000, 0x5001]
        );
        assert_eq!(s.frames[1].lookup, 0x5000);
    }

    #[test]
    fn a_frame_pointer_loop_is_cut_with_an_error() {
        let mut m = FakeMemory::new();
        // rbp points to a record whose saved rbp points back below: the walk must stop when
        // the stack pointer does not move up, not loop.
        m.put_u64(0x1010, 0x1010).put_u64(0x1018, 0x5001);
        let s = unwind(&m, &none(), None, regs(0x4000, 0x1000, 0x1010));
        assert!(s.frames.len() <= 3, "{:?}", s.frames);
        assert!(s.error.is_some());
    }

    #[test]
    fn an_unreadable_stack_is_an_error_not_a_panic() {
        let m = FakeMemory::new();
        let s = unwind(&m, &none(), None, regs(0x4000, 0x1000, 0x1010));
        assert_eq!(s.frames.len(), 1);
        assert!(s.error.unwrap().contains("0x4000"));
        let s = unwind(
            &m,
            &none(),
            None,
            regs(u64::MAX, u64::MAX - 8, u64::MAX - 7),
        );
        assert_eq!(s.frames.len(), 1);
        assert!(s.error.is_some());
    }
}
