//! arm64 (aarch64): DWARF register numbers (DWARF for the Arm 64-bit Architecture, "DWARF
//! register names": x0..x30 are 0..30, sp 31, pc 32), the `NT_PRSTATUS` note, pointer
//! authentication and the signal-return trampoline; [`jit`]: CPython's JIT entry shim.

pub mod jit;

use super::{u32_at, u64_at, PrStatus, Regs};
use crate::arch::Arch;

/// x29, the frame pointer.
pub const FP: u16 = 29;
/// x30, the link register: the CFI's return-address column.
pub const LR: u16 = 30;
pub const SP: u16 = 31;
pub const PC: u16 = 32;

pub fn register_number(name: &str) -> Option<u16> {
    match name {
        "fp" => Some(FP),
        "lr" => Some(LR),
        "sp" => Some(SP),
        "pc" => Some(PC),
        _ => name
            .strip_prefix('x')
            .and_then(|n| n.parse::<u16>().ok())
            .filter(|&n| n <= 30),
    }
}

/// `struct elf_prstatus` of arm64 (Linux include/linux/elfcore.h): pr_pid at 32, `pr_reg` at
/// 112, which is `struct user_pt_regs` (arch/arm64/include/uapi/asm/ptrace.h): x0..x30, sp,
/// pc, pstate. 392 bytes in all, as the kernel and qemu-user write it.
pub fn parse_prstatus(d: &[u8]) -> Option<PrStatus> {
    let lwp = u32_at(d, 32)?;
    let mut regs = Regs::new(Arch::Aarch64);
    for n in 0..=PC {
        regs.set(n, u64_at(d, 112 + 8 * n as usize)?);
    }
    regs.set(PC, strip_code_pointer(regs.pc()));
    Some(PrStatus {
        lwp,
        regs,
        thread_pointer: 0,
        // arm64 keeps the system call number in NT_ARM_SYSTEM_CALL, which qemu-user does not
        // write (and which a restarted call leaves at -1): told from the code instead
        // (`syscall_from_code`).
        syscall: None,
    })
}

/// The bits of a user-space code address: pointer authentication puts a code in the bits
/// above the virtual address (Linux arch/arm64/include/asm/pointer_auth.h: the user mask is
/// bits 54..VA_BITS; with top-byte-ignore the top byte is not address either). Linux user
/// space has 48-bit addresses unless a process asks mmap for more, so bits 48..63 go.
pub fn strip_code_pointer(a: u64) -> u64 {
    a & ((1 << 48) - 1)
}

/// `mov x8, #139` (rt_sigreturn, include/uapi/asm-generic/unistd.h) and `svc #0`: the signal
/// return trampoline, the kernel's vDSO `__kernel_rt_sigreturn` and qemu-user's copy
/// (linux-user/aarch64/signal.c `setup_sigtramp`, which has no CFI).
const SIGRETURN: [u32; 2] = [0xd280_1168, 0xd400_0001];
/// Where the interrupted registers are, from the trampoline's stack pointer: `struct
/// rt_sigframe` is a `siginfo` (128 bytes), then a `ucontext` whose `uc_mcontext`
/// (`struct sigcontext`, arch/arm64/include/uapi/asm/sigcontext.h) starts at 176 into it:
/// fault_address, regs[31], sp, pc, pstate.
const SIGCONTEXT: u64 = 128 + 176;

/// The registers the signal interrupted, when `regs` is at the sigreturn trampoline.
pub fn signal_frame(read: &dyn Fn(u64) -> Option<u64>, regs: &Regs) -> Option<Regs> {
    let pc = regs.pc();
    let words = read(pc)?;
    if words as u32 != SIGRETURN[0] || (words >> 32) as u32 != SIGRETURN[1] {
        return None;
    }
    let base = regs.sp().checked_add(SIGCONTEXT + 8)?;
    let mut out = Regs::new(Arch::Aarch64);
    for n in 0..=PC {
        out.set(n, read(base.checked_add(8 * n as u64)?)?);
    }
    out.set(PC, strip_code_pointer(out.pc()));
    Some(out)
}

/// `svc #0`: arm64 Linux's system call instruction (Arm ARM C6.2.365; the immediate is 0).
const SVC_0: u32 = 0xd400_0001;
/// The system call number register (arch/arm64/kernel/syscall.c: `regs->regs[8]`).
pub const SYSCALL_NR: u16 = 8;

/// The system call a thread is in: x8 when the instruction before its pc is `svc #0` (the
/// thread is inside the call: qemu-user's cores, a live thread) or its pc is at one (a kernel
/// core: a call the dump interrupted is rewound to its `svc` to be restarted, with x0 given
/// back its argument, arch/arm64/kernel/signal.c `do_signal`); u64::MAX (in none) otherwise.
/// None when the code at the pc cannot be read.
pub fn syscall_from_code(read: &dyn Fn(u64) -> Option<u32>, regs: &Regs) -> Option<u64> {
    let pc = regs.pc();
    let at = read(pc)?;
    let before = pc.checked_sub(4).and_then(read);
    if at == SVC_0 || before == Some(SVC_0) {
        return regs.get(SYSCALL_NR);
    }
    Some(u64::MAX)
}

/// Whether the call that returns to `ret` was a direct `BL imm26` (Arm ARM C6.2.34: bits
/// 31..26 = 100101): its target then, else None (BLR, BLRAA and the other indirect calls,
/// or bytes we cannot read). A64 instructions are 4 bytes, little-endian.
pub fn direct_call_target(read: &dyn Fn(u64, &mut [u8]) -> bool, ret: u64) -> Option<u64> {
    let at = ret.checked_sub(4)?;
    let mut b = [0u8; 4];
    if !read(at, &mut b) {
        return None;
    }
    let w = u32::from_le_bytes(b);
    if w & 0xfc00_0000 != 0x9400_0000 {
        return None;
    }
    // imm26, sign-extended, in instructions.
    let imm = ((w << 6) as i32 >> 6) as i64 * 4;
    Some(at.wrapping_add(imm as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prstatus_registers() {
        let mut d = vec![0u8; 392];
        d[32..36].copy_from_slice(&4242u32.to_le_bytes());
        for n in 0..34u64 {
            let at = 112 + 8 * n as usize;
            d[at..at + 8].copy_from_slice(&(0x1000 + n).to_le_bytes());
        }
        // A signed PC: the PAC bits go.
        d[368..376].copy_from_slice(&0x0012_0055_009f_77bcu64.to_le_bytes());
        let p = parse_prstatus(&d).unwrap();
        assert_eq!(p.lwp, 4242);
        assert_eq!(p.regs.get(FP), Some(0x1000 + 29));
        assert_eq!(p.regs.sp(), 0x1000 + 31);
        assert_eq!(p.regs.pc(), 0x0055_009f_77bc);
        assert!(parse_prstatus(&d[..300]).is_none());
    }

    #[test]
    fn a_thread_at_or_after_svc_is_in_the_call_in_x8() {
        let mut regs = Regs::new(Arch::Aarch64);
        regs.set(8, 98);
        regs.set_pc(0x1004);
        let code = |svc_at: u64| move |a: u64| Some(if a == svc_at { SVC_0 } else { 0xd503_201f });
        // qemu: the pc is past the svc; a kernel core: at it.
        assert_eq!(syscall_from_code(&code(0x1000), &regs), Some(98));
        assert_eq!(syscall_from_code(&code(0x1004), &regs), Some(98));
        // Anywhere else (a nop around the pc): in no call.
        assert_eq!(syscall_from_code(&code(0x2000), &regs), Some(u64::MAX));
        assert_eq!(syscall_from_code(&|_| None, &regs), None);
    }

    #[test]
    fn bl_gives_its_target_and_blr_none() {
        let code = |w: u32| {
            move |a: u64, buf: &mut [u8]| {
                if a != 0x421614 || buf.len() != 4 {
                    return false;
                }
                buf.copy_from_slice(&w.to_le_bytes());
                true
            }
        };
        // Seen in Debian's python3.14 (llvm-objdump): bl 0x679908 at 0x421614.
        assert_eq!(
            direct_call_target(&code(0x940960bd), 0x421618),
            Some(0x679908)
        );
        // bl backwards by 8.
        assert_eq!(
            direct_call_target(&code(0x97fffffe), 0x421618),
            Some(0x42160c)
        );
        // blr x2.
        assert_eq!(direct_call_target(&code(0xd63f0040), 0x421618), None);
        assert_eq!(direct_call_target(&code(0x940960bd), 0x2000), None);
    }

    #[test]
    fn names() {
        assert_eq!(register_number("x0"), Some(0));
        assert_eq!(register_number("x29"), Some(29));
        assert_eq!(register_number("fp"), Some(29));
        assert_eq!(register_number("pc"), Some(32));
        assert_eq!(register_number("x31"), None);
        assert_eq!(register_number("rip"), None);
    }

    #[test]
    fn signal_frame_is_read_from_the_sigcontext() {
        let sp = 0x7000u64;
        let tramp = 0x5500_843000u64;
        let read = |a: u64| -> Option<u64> {
            if a == tramp {
                return Some(SIGRETURN[0] as u64 | (SIGRETURN[1] as u64) << 32);
            }
            let off = a.checked_sub(sp + SIGCONTEXT + 8)?;
            (off < 8 * 33).then(|| 0x9000 + off / 8)
        };
        let mut r = Regs::new(Arch::Aarch64);
        r.set_pc(tramp);
        r.set_sp(sp);
        let out = signal_frame(&read, &r).unwrap();
        assert_eq!(out.get(0), Some(0x9000));
        assert_eq!(out.sp(), 0x9000 + 31);
        assert_eq!(out.pc(), 0x9000 + 32);
        r.set_pc(tramp + 4);
        assert!(signal_frame(&read, &r).is_none());
    }
}
