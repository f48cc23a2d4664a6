//! arm64 JIT shapes: the entry shim's frame, decoded from its prologue, and the unwind of a
//! JIT frame through it. On arm64 the shim keeps a frame record (x29, x30) inside its frame
//! and JIT code keeps x29: x29 is the shim's record or a stencil's record just below it, and
//! the shim's decoded prologue gives its CFA and saved registers. Perf trampolines are plain
//! frame records at the bottom of their frames: the CLI's frame-pointer step follows them too,
//! but a debugger's own fallback for code without symbols or CFI does not strip the signed
//! return address sid's trampoline saves (gdb 13 shows `0x0020…` and stops), so the
//! trampoline is decoded and unwound here, for the gdb unwinder.

use crate::arch::jit_step::{
    read_word, trampoline_copy_at, Caller, Read, Regs, ShimSite, MAX_SCAN_BYTES,
};
use crate::arch::Arch;

/// Bytes of the shim read for decoding: 3.14's copy is 104 bytes, `_PyJIT_Entry` 124.
pub const MAX_SHIM_BYTES: usize = 192;

/// arm64 callee-saved registers the shim may save, by number from x19.
pub(crate) const CALLEE_SAVED: [&str; 10] = [
    "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27", "x28",
];

/// The arm64 entry shim's frame (3.14: the copy at the start of each executor; 3.15:
/// `_PyJIT_Entry`), from its prologue. Offsets are from its CFA, the stack pointer it was
/// called with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shim {
    /// Offset of the return address of its call into JIT code.
    pub return_offset: u64,
    /// x29 (its frame record) minus the CFA.
    pub fp_off: i64,
    /// The stack pointer at its call minus the CFA.
    pub sp_off: i64,
    /// Saved general registers: (number, offset from the CFA).
    pub saved: Vec<(u8, i64)>,
    /// Where its epilogue ends (just after `ret`), from its start; None if not in the bytes.
    pub end: Option<u64>,
}

/// Decodes the shim's prologue: `stp` of X or D registers to `[sp, #imm]` or `[sp, #imm]!`,
/// `sub sp, sp, #imm`, `add x29, sp, #imm`, hints (`paciasp`, `bti`), register moves, up to
/// its first `bl`/`blr`; then finds the `ret` that ends it. None unless x29 and x30 are saved
/// as a frame record at x29 and the stack pointer only went down.
pub fn decode_shim(code: &[u8]) -> Option<Shim> {
    let words: Vec<u32> = code
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    let (mut sp, mut fp, mut saved) = (0i64, None, Vec::new());
    let mut return_offset = None;
    for (i, &w) in words.iter().enumerate() {
        let (rd, rn) = (w & 31, (w >> 5) & 31);
        let imm12 = || i64::from((w >> 10) & 0xfff) << if w & (1 << 22) != 0 { 12 } else { 0 };
        match w {
            // HINT (nop, paciasp, pacibsp, bti ...).
            _ if w & 0xffff_f01f == 0xd503_201f => {}
            // STP of two X (0xa9) or D (0x6d) registers, signed offset or pre-index, base sp.
            _ if matches!(w & 0xff40_0000, 0xa900_0000 | 0x6d00_0000) && rn == 31 => {
                let imm = (i64::from((w >> 15) & 0x7f) ^ 0x40) - 0x40;
                let at = if w & (1 << 23) != 0 {
                    sp += imm * 8;
                    sp
                } else {
                    sp + imm * 8
                };
                if w & (1 << 26) == 0 {
                    saved.push((rd as u8, at));
                    saved.push((((w >> 10) & 31) as u8, at + 8));
                }
            }
            // Any other store pair with write-back to sp (post-index): not a prologue.
            _ if w & 0x3a00_0000 == 0x2800_0000 && w & (1 << 23) != 0 && rn == 31 => return None,
            // ADD/SUB (immediate), 64-bit.
            _ if w & 0xff80_0000 == 0x9100_0000 && rd == 29 && rn == 31 => fp = Some(sp + imm12()),
            _ if w & 0xff80_0000 == 0xd100_0000 && rd == 31 && rn == 31 => sp -= imm12(),
            _ if w & 0x7f00_0000 == 0x1100_0000 && (rd == 29 || rd == 31) => return None,
            _ if w & 0x7f00_0000 == 0x5100_0000 && (rd == 29 || rd == 31) => return None,
            // BL, BLR (and BLRAA/BLRAB...): the call into JIT code.
            _ if w & 0xfc00_0000 == 0x9400_0000
                || w & 0xffff_fc1f == 0xd63f_0000
                || w & 0xffff_f800 == 0xd63f_0800 =>
            {
                return_offset = Some(4 * (i as u64 + 1));
                break;
            }
            // A branch or return before the call.
            _ if w & 0xfc00_0000 == 0x1400_0000 || w & 0xfffffc1f == 0xd65f_0000 => return None,
            // ORR (shifted register) is `mov`: to x29 it would break the frame record.
            _ if (rd == 29 || rd == 31) && w & 0xff20_0000 == 0xaa00_0000 => return None,
            // Moves and loads into other registers.
            _ => {}
        }
    }
    let return_offset = return_offset?;
    let fp = fp?;
    if sp >= 0 || fp < sp || !saved.contains(&(29, fp)) || !saved.contains(&(30, fp + 8)) {
        return None;
    }
    let end = words[(return_offset / 4) as usize..]
        .iter()
        .position(|&w| matches!(w, 0xd65f_03c0 | 0xd65f_0bff | 0xd65f_0fff))
        .map(|k| return_offset + 4 * (k as u64 + 1));
    Some(Shim {
        return_offset,
        fp_off: fp,
        sp_off: sp,
        saved,
        end,
    })
}

/// arm64 JIT code runs on the shim's stack frame, and x29 is either the shim's frame
/// record or (3.14, in a stencil that calls C) the stencil's own record, pushed just below
/// the shim's frame with the shim's x29 and a stale x30: the shim's return address. Either
/// way the shim's record gives the eval loop's pc and x29, and the shim's prologue the
/// caller's stack pointer (its CFA) and callee-saved registers: the JIT frame's caller is
/// the eval loop, the shim folded into it as on x86-64. Following the record alone would
/// give the caller the stack pointer just above the record, 80 bytes short of its own.
/// The caller's registers are named `pc`, `sp`, `x29` and `x19`..`x28`.
pub fn unwind_jit(
    shim: &Shim,
    site: &ShimSite,
    read: Read,
    code_start: u64,
    regs: Regs,
) -> Option<Caller> {
    let off = regs.pc.wrapping_sub(code_start);
    if off < site.copy_len && off != shim.return_offset {
        // Inside the 3.14 shim copy's prologue or epilogue: its frame is half built.
        return None;
    }
    let plausible = |fp: u64| fp % 8 == 0 && fp >= regs.sp && fp - regs.sp < MAX_SCAN_BYTES;
    let code = |a: u64| Arch::Aarch64.code_address(a);
    let mut fp = regs.bp;
    if !plausible(fp) {
        return None;
    }
    let ra = code(read_word(read, fp.checked_add(8)?)?);
    if site.returns.contains(&ra) {
        let shim_fp = read_word(read, fp)?;
        if shim_fp <= fp || !plausible(shim_fp) {
            return None;
        }
        fp = shim_fp;
    }
    let cfa = fp.checked_add_signed(-shim.fp_off)?;
    let pc = code(read_word(read, fp.checked_add(8)?)?);
    if pc == 0 || (site.in_code)(pc) {
        return None;
    }
    let mut caller = vec![("pc", pc), ("sp", cfa), ("x29", read_word(read, fp)?)];
    for &(r, at) in &shim.saved {
        if let Some(name) = CALLEE_SAVED.get(usize::from(r).wrapping_sub(19)) {
            caller.push((name, read_word(read, cfa.checked_add_signed(at)?)?));
        }
    }
    Some(Caller {
        regs: caller,
        frame_sp: cfa.checked_add_signed(shim.sp_off)?,
        frame_pc: code_start,
    })
}

/// The perf trampoline (`Python/asm_trampoline.S`: `[paciasp]; stp x29, x30, [sp, #-16]!;
/// mov x29, sp; blr x3; ldp x29, x30, [sp], #16; [autiasp]; ret`), decoded as a shim is:
/// its frame record at the bottom of its 16-byte frame. `bytes`: a copy up to its `ret`, to
/// find the copy that holds a PC (copies sit at `code_size` strides, padded under -X perf_jit).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrampolineFrame {
    pub frame: Shim,
    pub bytes: Vec<u8>,
}

/// The trampoline whose code (one copy, from its start) is `code`; None for another shape.
pub fn decode_trampoline(code: &[u8]) -> Option<TrampolineFrame> {
    let frame = decode_shim(code)?;
    let end = usize::try_from(frame.end?).ok()?;
    Some(TrampolineFrame {
        bytes: code.get(..end)?.to_vec(),
        frame,
    })
}

/// The caller of the trampoline frame at `regs`, in the arena `[start, end)`: the eval-loop
/// call plumbing, from the frame record at x29. Only at the return of its call is the frame
/// whole (x29 its record, the return address signed and saved); a PC elsewhere in a copy is an
/// innermost frame in its prologue or epilogue, left to the debugger (None).
pub fn unwind_trampoline(
    t: &TrampolineFrame,
    read: Read,
    arena: (u64, u64),
    regs: Regs,
) -> Option<Caller> {
    let start = regs.pc.checked_sub(t.frame.return_offset)?;
    let mut b = vec![0u8; t.bytes.len()];
    if !trampoline_copy_at(&t.bytes, read, arena, start, &mut b) {
        return None;
    }
    let fp = regs.bp;
    if fp % 8 != 0 || fp < regs.sp || fp - regs.sp >= MAX_SCAN_BYTES {
        return None;
    }
    let cfa = fp.checked_add_signed(-t.frame.fp_off)?;
    let pc = Arch::Aarch64.code_address(read_word(read, fp.checked_add(8)?)?);
    if pc == 0 {
        return None;
    }
    Some(Caller {
        regs: vec![("pc", pc), ("sp", cfa), ("x29", read_word(read, fp)?)],
        frame_sp: cfa,
        frame_pc: start,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The 3.14 arm64 shim (Debian python3.14 3.14.10-1 arm64, the copy at an executor's
    /// start): d8-d15, x19-x28 and the frame record x29/x30 at sp+64 in a 160-byte frame, `bl`
    /// into the trace at 0x38, the epilogue's `ret` at 0x64.
    pub(crate) const A64_SHIM_314: [u32; 26] = [
        0x6db63bef, 0xa90857f6, 0xaa0103f5, 0xaa0203f6, 0xa9094ff4, 0xaa0003f4, 0x6d0133ed,
        0x6d022beb, 0x6d0323e9, 0xa9047bfd, 0x910103fd, 0xa9056ffc, 0xa90667fa, 0xa9075ff8,
        0x9400000c, 0xa9494ff4, 0xa94857f6, 0xa9475ff8, 0xa94667fa, 0xa9456ffc, 0xa9447bfd,
        0x6d4323e9, 0x6d422beb, 0x6d4133ed, 0x6cca3bef, 0xd65f03c0,
    ];
    /// `_PyJIT_Entry` of Debian python3.15 3.15.2-1 arm64: the same frame, `blr x8` at 0x4c.
    pub(crate) const A64_ENTRY_315: [u32; 31] = [
        0x6db63bef, 0x6d0133ed, 0x6d022beb, 0x6d0323e9, 0xa9047bfd, 0xa9056ffc, 0xa90667fa,
        0xa9075ff8, 0xa90857f6, 0xa9094ff4, 0x910103fd, 0xf9402c08, 0xaa0003f4, 0xaa0103f5,
        0xaa0203f6, 0xaa0303f7, 0xaa1f03f8, 0xaa1f03f9, 0xaa1f03fa, 0xd63f0100, 0xa9494ff4,
        0xa94857f6, 0xa9475ff8, 0xa94667fa, 0xa9456ffc, 0xa9447bfd, 0x6d4323e9, 0x6d422beb,
        0x6d4133ed, 0x6cca3bef, 0xd65f03c0,
    ];

    /// The perf trampoline of Debian python3.14 3.14.10-1 arm64 (`_Py_trampoline_func_start`):
    /// paciasp, stp x29, x30, [sp, #-16]!, mov x29, sp, blr x3, ldp x29, x30, [sp], #16,
    /// autiasp, ret; the return of its call at 0x10.
    pub(crate) const A64_TRAMPOLINE: [u32; 7] = [
        0xd503233f, 0xa9bf7bfd, 0x910003fd, 0xd63f0060, 0xa8c17bfd, 0xd50323bf, 0xd65f03c0,
    ];

    pub(crate) fn words(w: &[u32]) -> Vec<u8> {
        w.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn decodes_arm64_shims() {
        let s = decode_shim(&words(&A64_SHIM_314)).unwrap();
        assert_eq!(
            (s.return_offset, s.fp_off, s.sp_off, s.end),
            (0x3c, -96, -160, Some(0x68))
        );
        for r in 19..=28u8 {
            assert!(
                s.saved.contains(&(r, -8 * (i64::from(r) - 18))),
                "{:?}",
                s.saved
            );
        }
        assert!(s.saved.contains(&(29, -96)) && s.saved.contains(&(30, -88)));
        let mut e = decode_shim(&words(&A64_ENTRY_315)).unwrap();
        assert_eq!(
            (e.return_offset, e.fp_off, e.sp_off, e.end),
            (0x50, -96, -160, Some(0x7c))
        );
        let mut saved = s.saved.clone();
        saved.sort();
        e.saved.sort();
        assert_eq!(e.saved, saved);
        // A frame record at the bottom of a 16-byte frame (the perf trampoline's shape).
        let t = decode_shim(&words(&[
            0xd503233f, 0xa9bf7bfd, 0x910003fd, 0xd63f0060, 0xd65f03c0,
        ]))
        .unwrap();
        assert_eq!(
            (t.return_offset, t.fp_off, t.sp_off, t.end),
            (16, -16, -16, Some(20))
        );
        // The trampoline, decoded and unwound at the return of its call in the second copy
        // of an arena (a 32-byte stride), its signed return address stripped.
        let tr = decode_trampoline(&words(&A64_TRAMPOLINE)).unwrap();
        assert_eq!(tr.bytes.len(), 28);
        let mut mem = std::collections::HashMap::new();
        for (k, w) in A64_TRAMPOLINE.iter().enumerate() {
            mem.insert(0x7000_0020 + 4 * k as u64, *w);
        }
        let fp = 0x7ffd_1000u64;
        let put = |mem: &mut std::collections::HashMap<u64, u32>, at: u64, v: u64| {
            mem.insert(at, v as u32);
            mem.insert(at + 4, (v >> 32) as u32);
        };
        put(&mut mem, fp, 0x7ffd_1100);
        put(&mut mem, fp + 8, 0x0020_0000_0051_d7a4);
        let read = |a: u64, buf: &mut [u8]| {
            buf.chunks_mut(4).enumerate().all(|(k, c)| {
                mem.get(&(a + 4 * k as u64))
                    .map(|w| c.copy_from_slice(&w.to_le_bytes()[..c.len()]))
                    .is_some()
            })
        };
        let at_return = Regs {
            pc: 0x7000_0030,
            sp: fp,
            bp: fp,
        };
        let c = unwind_trampoline(&tr, &read, (0x7000_0000, 0x7001_0000), at_return).unwrap();
        assert_eq!(
            c.regs,
            vec![("pc", 0x51_d7a4), ("sp", fp + 16), ("x29", 0x7ffd_1100)]
        );
        assert_eq!((c.frame_sp, c.frame_pc), (fp + 16, 0x7000_0020));
        // In its prologue, outside the arena, or with x29 below sp: not unwound.
        for (pc, sp, range) in [
            (0x7000_0024, fp, (0x7000_0000, 0x7001_0000)),
            (0x7000_0030, fp, (0x7000_0028, 0x7001_0000)),
            (0x7000_0030, fp + 16, (0x7000_0000, 0x7001_0000)),
        ] {
            let r = Regs { pc, sp, bp: fp };
            assert!(unwind_trampoline(&tr, &read, range, r).is_none(), "{pc:#x}");
        }
        // No frame record; a call before it; x29 overwritten; no call at all.
        for code in [
            &[0xd10043ff, 0x94000001][..],
            &[0x94000001, 0xa9bf7bfd, 0x910003fd][..],
            &[0xa9bf7bfd, 0x910003fd, 0xaa0003fd, 0x94000001][..],
            &[0xa9bf7bfd, 0x910003fd, 0xd65f03c0][..],
        ] {
            assert!(decode_shim(&words(code)).is_none(), "{code:x?}");
        }
    }
}
