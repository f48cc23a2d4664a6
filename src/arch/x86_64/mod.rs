//! x86-64: DWARF register numbers (System V psABI, table "DWARF Register Number Mapping":
//! rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp, r8..r15, then the return address, rip, as column
//! 16) and the `NT_PRSTATUS` note; [`jit`]: CPython's JIT entry shim and perf trampoline.

pub mod jit;

use super::{u32_at, u64_at, PrStatus, Regs};
use crate::arch::Arch;

pub const RBP: u16 = 6;
pub const RSP: u16 = 7;
/// The return-address column, which holds rip.
pub const RIP: u16 = 16;
/// `rdi`, the first argument register.
pub const RDI: u16 = 5;

const NAMES: [&str; 17] = [
    "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13",
    "r14", "r15", "rip",
];

pub fn register_number(name: &str) -> Option<u16> {
    NAMES.iter().position(|n| *n == name).map(|i| i as u16)
}

/// For DWARF register i (rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp, r8..r15, rip), its index in
/// `struct user_regs_struct` (sys/user.h: r15, r14, r13, r12, rbp, rbx, r11, r10, r9, r8, rax,
/// rcx, rdx, rsi, rdi, orig_rax, rip, cs, eflags, rsp, ...). PTRACE_GETREGS fills the same
/// struct.
pub const USER_REGS_OF_DWARF: [usize; 17] =
    [10, 12, 11, 5, 13, 14, 4, 19, 9, 8, 7, 6, 3, 2, 1, 0, 16];
/// `orig_rax` and `fs_base` in `struct user_regs_struct`.
const USER_ORIG_RAX: usize = 15;
const USER_FS_BASE: usize = 21;

/// `struct elf_prstatus` of x86-64 (linux/elfcore.h): pr_pid at 32, `pr_reg`
/// (user_regs_struct, sys/user.h) at 112.
pub fn parse_prstatus(d: &[u8]) -> Option<PrStatus> {
    let lwp = u32_at(d, 32)?;
    let reg = |i: usize| u64_at(d, 112 + 8 * i);
    let mut regs = Regs::new(Arch::X86_64);
    for (dwarf, &i) in USER_REGS_OF_DWARF.iter().enumerate() {
        regs.set(dwarf as u16, reg(i)?);
    }
    Some(PrStatus {
        lwp,
        regs,
        thread_pointer: reg(USER_FS_BASE)?,
        syscall: Some(reg(USER_ORIG_RAX)?),
    })
}

/// Whether the call that returns to `ret` was a direct `call rel32` (x86-64 opcode E8): its
/// target then, else None (an indirect call, or bytes we cannot read or tell).
pub fn direct_call_target(read: &dyn Fn(u64, &mut [u8]) -> bool, ret: u64) -> Option<u64> {
    let mut b = [0u8; 7];
    if !read(ret.checked_sub(7)?, &mut b) {
        return None;
    }
    // The indirect forms `call *...` (FF /2) that end at `ret`, by length: a register
    // (FF D0+r), a register's memory (FF 10+r) with an optional REX prefix, disp8 (FF 50+r
    // d8), disp32 or rip-relative (FF 90+r d32, FF 15 d32), and their SIB forms (FF 14/54/94
    // 24 ...). Checked first: their displacement bytes may hold an E8.
    let modrm = |i: usize| b.get(i + 1).map(|m| (m >> 3) & 7 == 2 && b[i] == 0xff);
    let indirect = [
        (5, 0xc0u8, 0xc0u8), // FF /2 mod=11: call *%reg
        (5, 0xc0, 0x00),     // mod=00: call *(%reg)
        (4, 0xc0, 0x00),     // mod=00, SIB
        (4, 0xc0, 0x40),     // mod=01 with disp8
        (3, 0xc0, 0x40),     // mod=01, SIB, disp8
        (1, 0xc0, 0x80),     // mod=10 with disp32
        (0, 0xc0, 0x80),     // mod=10, SIB, disp32
        (1, 0xc7, 0x05),     // mod=00 r/m=101: rip-relative disp32
    ];
    for (i, mask, want) in indirect {
        if modrm(i) == Some(true) && b[i + 1] & mask == want {
            return None;
        }
    }
    if b[2] != 0xe8 {
        return None;
    }
    let rel = i32::from_le_bytes([b[3], b[4], b[5], b[6]]);
    Some(ret.wrapping_add(rel as i64 as u64))
}

#[cfg(test)]
mod tests {
    use super::direct_call_target;

    fn target_of(code: &[u8]) -> Option<u64> {
        let at = 0x1000u64;
        let end = at + code.len() as u64;
        let read = |a: u64, buf: &mut [u8]| {
            let Some(off) = a.checked_sub(at).map(|o| o as usize) else {
                return false;
            };
            match code.get(off..off + buf.len()) {
                Some(src) => {
                    buf.copy_from_slice(src);
                    true
                }
                None => false,
            }
        };
        direct_call_target(&read, end)
    }

    #[test]
    fn direct_calls_give_their_target() {
        // call rel32 = -0x100 from the end of the instruction.
        assert_eq!(
            target_of(&[0x90, 0x90, 0xe8, 0x00, 0xff, 0xff, 0xff]),
            Some(0x1007 - 0x100)
        );
    }

    #[test]
    fn indirect_calls_give_none() {
        for code in [
            &[0x90, 0x90, 0x90, 0x90, 0x90, 0xff, 0xd0][..], // call *%rax
            &[0x90, 0x90, 0x90, 0x90, 0x41, 0xff, 0xd3],     // call *%r11
            &[0x90, 0x90, 0x90, 0x90, 0xff, 0x50, 0x08],     // call *0x8(%rax)
            &[0x90, 0xff, 0x15, 0xe8, 0x00, 0x00, 0x00],     // call *0xe8(%rip): an E8 inside
            &[0x90, 0xff, 0x90, 0x00, 0xe8, 0x00, 0x00],     // call *disp32(%rax)
            &[0xff, 0x94, 0x24, 0x00, 0x01, 0x00, 0x00],     // call *disp32(%rsp)
        ] {
            assert_eq!(target_of(code), None, "{code:02x?}");
        }
    }

    #[test]
    fn unreadable_bytes_give_none() {
        assert_eq!(direct_call_target(&|_, _| false, 0x2000), None);
    }
}
