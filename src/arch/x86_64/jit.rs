//! Just enough x86-64 decoding to read the two tiny pieces of code CPython puts between the eval
//! loop and code without unwind info: the JIT entry shim (3.14: copied to the start of every
//! executor's mapping; 3.15: `_PyJIT_Entry` in the binary) and the perf trampoline
//! (`Python/asm_trampoline.S`). Both are compiled or written once per build, so we decode them
//! from the target rather than hard-code their bytes: a rebuild with another compiler changes
//! the pushes, and the decoder either follows or refuses (then nothing is claimed).
//!
//! Then the unwinds through them. The shim's return-address slot is at a fixed place below
//! `%rbp` when the shim keeps a frame pointer and JIT code leaves `%rbp` alone (3.15,
//! `-mframe-pointer=reserved`); otherwise (3.14) the stack is scanned upward from the JIT
//! frame's `%rsp` for a value equal to a shim return address.

use crate::arch::jit_step::{
    read_word, trampoline_copy_at, Caller, Read, Regs, ShimSite, MAX_SCAN_BYTES,
};

/// The registers an unwind can restore, with gdb's names for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reg {
    Rax,
    Rcx,
    Rdx,
    Rbx,
    Rsp,
    Rbp,
    Rsi,
    Rdi,
    R8,
    R9,
    R10,
    R11,
    R12,
    R13,
    R14,
    R15,
    Rip,
}

impl Reg {
    /// Register number `n` (0..16) in the ModRM/opcode encoding, REX bit included.
    fn from_number(n: u8) -> Reg {
        use Reg::*;
        [
            Rax, Rcx, Rdx, Rbx, Rsp, Rbp, Rsi, Rdi, R8, R9, R10, R11, R12, R13, R14, R15,
        ][(n & 15) as usize]
    }

    pub fn name(self) -> &'static str {
        use Reg::*;
        match self {
            Rax => "rax",
            Rcx => "rcx",
            Rdx => "rdx",
            Rbx => "rbx",
            Rsp => "rsp",
            Rbp => "rbp",
            Rsi => "rsi",
            Rdi => "rdi",
            R8 => "r8",
            R9 => "r9",
            R10 => "r10",
            R11 => "r11",
            R12 => "r12",
            R13 => "r13",
            R14 => "r14",
            R15 => "r15",
            Rip => "rip",
        }
    }

    /// Callee-saved in the SysV x86-64 ABI: the ones a caller expects back.
    pub fn callee_saved(self) -> bool {
        matches!(
            self,
            Reg::Rbx | Reg::Rbp | Reg::R12 | Reg::R13 | Reg::R14 | Reg::R15
        )
    }
}

/// A decoded entry shim: what it pushed before its one call, and where that call returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShimFrame {
    /// Registers in push order; the i-th is saved at CFA - 16 - 8*i.
    pub pushes: Vec<Reg>,
    /// Bytes of `sub $imm, %rsp` after the pushes.
    pub sub: u64,
    /// Offset of the instruction after the call (the return address the callee sees).
    pub return_offset: u64,
    /// `push %rbp; mov %rsp,%rbp` first: the callee can find the frame through %rbp.
    pub frame_pointer: bool,
    /// Where its epilogue after the call ends (just after `ret`), from its start; None when
    /// that is not in the bytes decoded.
    pub end: Option<u64>,
}

impl ShimFrame {
    /// Bytes between the shim's return-address slot (the call it makes) and its CFA.
    pub fn ra_slot_to_cfa(&self) -> u64 {
        16 + self.sub + 8 * self.pushes.len() as u64
    }

    /// Where the i-th push is saved, as an offset below the CFA.
    pub fn saved_at(&self) -> impl Iterator<Item = (Reg, u64)> + '_ {
        self.pushes
            .iter()
            .enumerate()
            .map(|(i, r)| (*r, 16 + 8 * i as u64))
    }
}

/// Bytes of the shim we look at: its prologue and call fit in far less.
pub const MAX_SHIM_BYTES: usize = 96;

/// Length of a ModRM operand (ModRM byte, SIB and displacement), or None for forms we do not
/// expect in a shim.
fn modrm_len(code: &[u8]) -> Option<usize> {
    let modrm = *code.first()?;
    let md = modrm >> 6;
    let rm = modrm & 7;
    let mut len = 1;
    if md != 3 && rm == 4 {
        let sib = *code.get(1)?;
        len += 1;
        if md == 0 && sib & 7 == 5 {
            len += 4;
        }
    }
    len += match (md, rm) {
        (0, 5) => 4,
        (1, _) => 1,
        (2, _) => 4,
        _ => 0,
    };
    (code.len() >= len).then_some(len)
}

/// Decode a shim: pushes (and an optional frame-pointer set-up and `sub rsp`), then register
/// moves and zeroings, then one call. Anything else before the call and the shim is refused.
pub fn decode_shim(code: &[u8]) -> Option<ShimFrame> {
    let mut pushes = Vec::new();
    let mut sub = 0u64;
    let mut frame_pointer = false;
    let mut i = 0usize;
    let mut in_prologue = true;
    while i < code.len() {
        let b = code[i];
        let (rex, op_at) = if (0x40..=0x4f).contains(&b) {
            (b, i + 1)
        } else {
            (0, i)
        };
        let op = *code.get(op_at)?;
        let rest = &code[op_at + 1..];
        // endbr64
        if code[i..].starts_with(&[0xf3, 0x0f, 0x1e, 0xfa]) {
            i += 4;
            continue;
        }
        match op {
            // push r64
            0x50..=0x57 if in_prologue && (rex == 0 || rex == 0x41) => {
                let r = Reg::from_number((op - 0x50) | ((rex & 1) << 3));
                pushes.push(r);
                i = op_at + 1;
            }
            // mov %rsp,%rbp right after `push %rbp`
            0x89 if rex == 0x48 && rest.first() == Some(&0xe5) => {
                if pushes != [Reg::Rbp] {
                    return None;
                }
                frame_pointer = true;
                i = op_at + 2;
            }
            // sub $imm8/$imm32, %rsp
            0x83 if rex == 0x48 && rest.first() == Some(&0xec) && in_prologue => {
                sub += *rest.get(1)? as u64;
                i = op_at + 3;
            }
            0x81 if rex == 0x48 && rest.first() == Some(&0xec) && in_prologue => {
                let imm = u32::from_le_bytes(rest.get(1..5)?.try_into().ok()?);
                sub += imm as u64;
                i = op_at + 6;
            }
            // mov r, r (register to register only: memory forms could be anything)
            0x89 | 0x8b if rest.first().is_some_and(|m| m >> 6 == 3) => {
                in_prologue = false;
                i = op_at + 2;
            }
            // xor r32, r32
            0x31 | 0x33 if rest.first().is_some_and(|m| m >> 6 == 3) => {
                in_prologue = false;
                i = op_at + 2;
            }
            // call rel32
            0xe8 if rex == 0 => {
                rest.get(..4)?;
                return Some(ShimFrame {
                    pushes,
                    sub,
                    return_offset: (op_at + 5) as u64,
                    frame_pointer,
                    end: shim_tail_end(code, op_at + 5),
                });
            }
            // call *r/m64 (ff /2)
            0xff if rest.first().is_some_and(|m| (m >> 3) & 7 == 2) => {
                let len = modrm_len(rest)?;
                return Some(ShimFrame {
                    pushes,
                    sub,
                    return_offset: (op_at + 1 + len) as u64,
                    frame_pointer,
                    end: shim_tail_end(code, op_at + 1 + len),
                });
            }
            _ => return None,
        }
    }
    None
}

/// Where the shim's epilogue (pops, `add $imm8,%rsp`, `ret`) after its call ends.
fn shim_tail_end(code: &[u8], from: usize) -> Option<u64> {
    let mut i = from;
    while i < code.len() {
        match code[i..] {
            [0x58..=0x5f, ..] => i += 1,
            [0x41, 0x58..=0x5f, ..] => i += 2,
            [0x48, 0x83, 0xc4, _, ..] => i += 4,
            [0xc3, ..] => return Some(i as u64 + 1),
            _ => return None,
        }
    }
    None
}

/// The perf trampoline, instruction by instruction: for each byte offset that starts an
/// instruction, how many bytes it has pushed so far and where %rbp is saved (bytes below the
/// stack depth), if it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrampolineTemplate {
    pub bytes: Vec<u8>,
    /// (offset, bytes pushed since entry, where the caller's %rbp is saved as an offset from
    /// %rsp): one row per instruction. The return address is at `%rsp + pushed`.
    pub rows: Vec<(u64, u64, Option<u64>)>,
    /// Offset of the instruction after the call (the return address of the eval loop).
    pub return_offset: u64,
}

impl TrampolineTemplate {
    /// The row for a PC `offset` bytes into a trampoline copy, if an instruction starts there.
    pub fn row(&self, offset: u64) -> Option<(u64, Option<u64>)> {
        self.rows.iter().find(|r| r.0 == offset).map(|r| (r.1, r.2))
    }
}

/// Decode `asm_trampoline.S`'s body: endbr64, push %rbp, mov %rsp,%rbp, sub/add $imm8,%rsp,
/// call *%reg, pop %rbp, ret (the 3.12/3.13 body `sub $8; call; add $8; ret` too).
pub fn decode_trampoline(code: &[u8]) -> Option<TrampolineTemplate> {
    let mut rows = Vec::new();
    let mut depth = 0u64;
    let mut rbp_at: Option<u64> = None;
    let mut return_offset = None;
    let mut i = 0usize;
    while i < code.len() {
        // The bytes come from the target: an `add` past the saved %rbp is not a panic.
        rows.push((i as u64, depth, rbp_at.and_then(|d| depth.checked_sub(d))));
        let c = &code[i..];
        if c.starts_with(&[0xf3, 0x0f, 0x1e, 0xfa]) {
            i += 4;
        } else if c[0] == 0x55 {
            depth += 8;
            rbp_at = Some(depth);
            i += 1;
        } else if c.starts_with(&[0x48, 0x89, 0xe5]) {
            i += 3;
        } else if c.starts_with(&[0x48, 0x83, 0xec]) && c.len() > 3 {
            depth += c[3] as u64;
            i += 4;
        } else if c.starts_with(&[0x48, 0x83, 0xc4]) && c.len() > 3 {
            depth = depth.checked_sub(c[3] as u64)?;
            i += 4;
        } else if c[0] == 0xff && c.len() > 1 && c[1] & 0xf8 == 0xd0 {
            i += 2;
            return_offset = Some(i as u64);
        } else if c[0] == 0x5d {
            depth = depth.checked_sub(8)?;
            rbp_at = None;
            i += 1;
        } else if c[0] == 0xc3 {
            return Some(TrampolineTemplate {
                bytes: code[..=i].to_vec(),
                rows,
                return_offset: return_offset?,
            });
        } else {
            return None;
        }
    }
    None
}

/// The caller of the JIT frame at `regs` (its code starts at `code_start`): the eval loop,
/// with the callee-saved registers the shim pushed, and %rbp.
pub fn unwind_jit(
    shim: &ShimFrame,
    site: &ShimSite,
    read: Read,
    code_start: u64,
    regs: Regs,
) -> Option<Caller> {
    if regs.pc.wrapping_sub(code_start) < site.copy_len {
        // Inside the 3.14 shim copy itself (a stop in its prologue or epilogue): its frame
        // is half built or half torn down; leave it to the debugger.
        return None;
    }
    let slot = shim_slot_by_fp(shim, site, read, regs)
        .or_else(|| shim_slot_by_scan(site, read, regs.sp))?;
    let cfa = slot.checked_add(shim.ra_slot_to_cfa())?;
    let rip = read_word(read, cfa.checked_sub(8)?)?;
    if rip == 0 || cfa <= regs.sp {
        return None;
    }
    let mut caller = vec![("rip", rip), ("rsp", cfa)];
    for (r, below) in shim.saved_at() {
        if r.callee_saved() {
            caller.push((r.name(), read_word(read, cfa.checked_sub(below)?)?));
        }
    }
    if !shim.pushes.contains(&Reg::Rbp) {
        caller.push(("rbp", caller_rbp(read, regs, slot, cfa)));
    }
    Some(Caller {
        regs: caller,
        frame_sp: slot.checked_add(8)?,
        frame_pc: code_start,
    })
}

/// The eval loop's %rbp when the shim does not save it (3.14). JIT code (`preserve_none`)
/// must hand %rbp back unchanged, so a stencil that uses it pushes it first, just below the
/// shim's return-address slot, and the caller's value is there while that stencil runs
/// (typically while it calls into C); otherwise %rbp still holds it. The eval loop uses
/// %rbp as its frame pointer (its CFA is %rbp+16 in Debian's 3.14), so the right value
/// points into the stack above the shim: the candidate that does wins.
fn caller_rbp(read: Read, regs: Regs, slot: u64, cfa: u64) -> u64 {
    let in_caller = |v: u64| v % 8 == 0 && v >= cfa && v - cfa < MAX_SCAN_BYTES;
    if in_caller(regs.bp) {
        return regs.bp;
    }
    for below in [8, 16] {
        if slot.checked_sub(below).is_some_and(|a| a >= regs.sp) {
            if let Some(v) = read_word(read, slot - below) {
                if in_caller(v) {
                    return v;
                }
            }
        }
    }
    regs.bp
}

/// 3.15: the shim keeps a frame pointer and JIT code leaves %rbp alone, so its
/// return-address slot is at a fixed distance below %rbp; checked against the known
/// return address.
fn shim_slot_by_fp(shim: &ShimFrame, site: &ShimSite, read: Read, regs: Regs) -> Option<u64> {
    if !shim.frame_pointer {
        return None;
    }
    let slot = regs
        .bp
        .checked_add(16)?
        .checked_sub(shim.ra_slot_to_cfa())?;
    let ra = read_word(read, slot)?;
    (slot >= regs.sp && site.returns.contains(&ra)).then_some(slot)
}

/// 3.14: the nearest slot above %rsp that holds a shim return address. JIT code pushes
/// return addresses only for its calls into C, which return to stencils, never to a shim.
fn shim_slot_by_scan(site: &ShimSite, read: Read, sp: u64) -> Option<u64> {
    if site.returns.is_empty() || sp % 8 != 0 {
        return None;
    }
    let mut page = [0u8; 512];
    let mut at = sp;
    let end = sp.checked_add(MAX_SCAN_BYTES)?;
    while at < end {
        // Read up to the next 512-byte boundary, so a stack top that ends in a page
        // boundary is read to its last word.
        let len = (512 - (at % 512)) as usize;
        if !read(at, &mut page[..len]) {
            return None;
        }
        for (i, w) in page[..len].chunks_exact(8).enumerate() {
            let v = u64::from_le_bytes(w.try_into().ok()?);
            if site.returns.contains(&v) {
                return Some(at + 8 * i as u64);
            }
        }
        at += len as u64;
    }
    None
}

/// The caller of the trampoline frame at `regs`, in the arena `[start, end)`: the copy that
/// holds the PC is found by its bytes, and the template's row for the PC says what is pushed.
pub fn unwind_trampoline(
    t: &TrampolineTemplate,
    read: Read,
    arena: (u64, u64),
    regs: Regs,
) -> Option<Caller> {
    let n = t.bytes.len() as u64;
    let mut b = vec![0u8; t.bytes.len()];
    // Copies sit at a fixed stride from the arena start that we do not assume; find the
    // copy that holds the PC by matching the template's bytes around it.
    let mut found = None;
    for off in 0..n {
        let Some(start) = regs.pc.checked_sub(off) else {
            break;
        };
        if trampoline_copy_at(&t.bytes, read, arena, start, &mut b) {
            found = Some((start, off));
            break;
        }
    }
    let (start, off) = found?;
    let (pushed, rbp_at) = t.row(off)?;
    let ra_at = regs.sp.checked_add(pushed)?;
    let rip = read_word(read, ra_at)?;
    let bp = match rbp_at {
        Some(o) => read_word(read, regs.sp.checked_add(o)?)?,
        None => regs.bp,
    };
    if rip == 0 {
        return None;
    }
    let rsp = ra_at.checked_add(8)?;
    Some(Caller {
        regs: vec![("rip", rip), ("rsp", rsp), ("rbp", bp)],
        frame_sp: rsp,
        frame_pc: start,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 3.14 shim as copied into every executor (Debian python3.14 3.14.10-1, read from a
    /// live process): push r15..rbx, three moves, call the first stencil.
    const SHIM_314: &[u8] = &[
        0x41, 0x57, 0x41, 0x56, 0x41, 0x55, 0x41, 0x54, 0x53, 0x49, 0x89, 0xfc, 0x49, 0x89, 0xf5,
        0x49, 0x89, 0xd6, 0xe8, 0x0a, 0x00, 0x00, 0x00, 0x5b,
    ];
    /// `_PyJIT_Entry` of Debian python3.15 3.15.2-1: frame pointer, six pushes, `call
    /// *0x58(%r12)` (0x58 = `_PyExecutorObject.jit_code`).
    const ENTRY_315: &[u8] = &[
        0x55, 0x48, 0x89, 0xe5, 0x41, 0x57, 0x41, 0x56, 0x41, 0x55, 0x41, 0x54, 0x53, 0x50, 0x49,
        0x89, 0xfc, 0x49, 0x89, 0xf5, 0x49, 0x89, 0xd6, 0x4d, 0x89, 0xcf, 0x31, 0xff, 0x31, 0xf6,
        0x31, 0xd2, 0x41, 0xff, 0x54, 0x24, 0x58, 0x48, 0x83, 0xc4, 0x08,
    ];

    #[test]
    fn shim_314() {
        let s = decode_shim(SHIM_314).unwrap();
        use Reg::*;
        assert_eq!(s.pushes, vec![R15, R14, R13, R12, Rbx]);
        assert_eq!(s.return_offset, 0x17);
        assert!(!s.frame_pointer);
        assert_eq!(s.ra_slot_to_cfa(), 56);
        // The epilogue is cut short here; with the rest of it (pops of r12..r15, ret) the end
        // of the copy is known.
        assert_eq!(s.end, None);
        let mut whole = SHIM_314.to_vec();
        whole.extend([0x41, 0x5c, 0x41, 0x5d, 0x41, 0x5e, 0x41, 0x5f, 0xc3]);
        assert_eq!(decode_shim(&whole).unwrap().end, Some(33));
    }

    #[test]
    fn entry_315() {
        let s = decode_shim(ENTRY_315).unwrap();
        use Reg::*;
        assert_eq!(s.pushes, vec![Rbp, R15, R14, R13, R12, Rbx, Rax]);
        assert_eq!(s.return_offset, 37);
        assert!(s.frame_pointer);
        assert_eq!(s.ra_slot_to_cfa(), 72);
    }

    #[test]
    fn shim_refuses_other_code() {
        assert_eq!(
            decode_shim(&[0x41, 0x57, 0x48, 0x8b, 0x07, 0xe8, 0, 0, 0, 0]),
            None
        );
        assert_eq!(decode_shim(&[0x41, 0x57]), None);
        assert_eq!(decode_shim(&[]), None);
    }

    #[test]
    fn trampolines() {
        // 3.14/3.15 (gh-136541): endbr64; push %rbp; mov %rsp,%rbp; call *%rcx; pop %rbp; ret
        let t = decode_trampoline(&[
            0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5, 0xff, 0xd1, 0x5d, 0xc3,
        ])
        .unwrap();
        assert_eq!(t.return_offset, 10);
        assert_eq!(t.row(0), Some((0, None)));
        assert_eq!(t.row(4), Some((0, None)));
        assert_eq!(t.row(5), Some((8, Some(0))));
        assert_eq!(t.row(10), Some((8, Some(0))));
        assert_eq!(t.row(11), Some((0, None)));
        assert_eq!(t.row(3), None);
        // 3.12/3.13: sub $8,%rsp; call *%rcx; add $8,%rsp; ret
        let t = decode_trampoline(&[
            0x48, 0x83, 0xec, 0x08, 0xff, 0xd1, 0x48, 0x83, 0xc4, 0x08, 0xc3,
        ])
        .unwrap();
        assert_eq!(t.return_offset, 6);
        assert_eq!(t.row(6), Some((8, None)));
        assert!(decode_trampoline(&[0x90, 0xc3]).is_none());
    }

    #[test]
    fn trampoline_popping_past_its_saved_rbp_is_refused_not_a_panic() {
        // push %rbp; sub $8,%rsp; add $16,%rsp; ret
        let code = [0x55, 0x48, 0x83, 0xec, 8, 0x48, 0x83, 0xc4, 16, 0xc3];
        assert!(decode_trampoline(&code).is_none());
    }
}
