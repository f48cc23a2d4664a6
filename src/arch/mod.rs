//! The target's architecture, as data: x86-64 or arm64 (aarch64), from the core's or the
//! executable's ELF header, never from the host (an arm64 core is read on an x86-64 laptop).
//! What differs between the two sits here: register numbers (DWARF), the `NT_PRSTATUS` layout,
//! callee-saved registers, code-pointer signing, the frame-record shape, signal frames, and
//! the shapes of CPython's JIT entry shim and perf trampoline ([`jit`]).
//! Decoders above ask an [`Arch`]; none tests `cfg(target_arch)`.

pub mod aarch64;
pub mod jit;
pub mod jit_step;
mod regs;
mod syscalls;
mod syscalls_aarch64;
mod syscalls_x86_64;
pub mod x86_64;

pub use self::regs::Regs;

/// A target architecture pyunwind reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Arch {
    #[default]
    X86_64,
    Aarch64,
}

/// What one `NT_PRSTATUS` note says about a thread.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrStatus {
    /// `pr_pid`: the thread's LWP.
    pub lwp: u32,
    pub regs: Regs,
    /// The thread pointer (x86-64 `fs_base`, which glibc makes `pthread_self()`); 0 where the
    /// note does not hold it (arm64 keeps TPIDR_EL0 in NT_ARM_TLS).
    pub thread_pointer: u64,
    /// The system call the thread is in (x86-64 `orig_rax`, -1 as u64 when in none); None
    /// where the note does not say (arm64 keeps it in NT_ARM_SYSTEM_CALL).
    pub syscall: Option<u64>,
}

impl Arch {
    /// From an ELF header's `e_machine` (elf.h: EM_X86_64 62, EM_AARCH64 183).
    pub fn from_elf_machine(machine: u16) -> Option<Arch> {
        match machine {
            m if m == object::elf::EM_X86_64.0 => Some(Arch::X86_64),
            m if m == object::elf::EM_AARCH64.0 => Some(Arch::Aarch64),
            _ => None,
        }
    }

    /// The architecture of the ELF file at `path`, from its header's `e_machine` (at 18, in the
    /// file's byte order, little-endian for both).
    pub fn of_file(path: &str) -> Option<Arch> {
        use std::io::Read;
        let mut h = [0u8; 20];
        std::fs::File::open(path).ok()?.read_exact(&mut h).ok()?;
        (h[..4] == *b"\x7fELF" && h[5] == 1)
            .then(|| Arch::from_elf_machine(u16::from_le_bytes([h[18], h[19]])))
            .flatten()
    }

    pub fn from_object_architecture(a: object::Architecture) -> Option<Arch> {
        match a {
            object::Architecture::X86_64 => Some(Arch::X86_64),
            object::Architecture::Aarch64 => Some(Arch::Aarch64),
            _ => None,
        }
    }

    /// The name users know it by (as `uname -m` prints it).
    pub fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
        }
    }

    /// DWARF number of the register that holds the PC in [`Regs`] (x86-64: the
    /// return-address column 16, rip; arm64: 32, PC).
    pub fn pc(self) -> u16 {
        match self {
            Arch::X86_64 => x86_64::RIP,
            Arch::Aarch64 => aarch64::PC,
        }
    }

    pub fn sp(self) -> u16 {
        match self {
            Arch::X86_64 => x86_64::RSP,
            Arch::Aarch64 => aarch64::SP,
        }
    }

    /// The frame-pointer register (rbp; x29).
    pub fn fp(self) -> u16 {
        match self {
            Arch::X86_64 => x86_64::RBP,
            Arch::Aarch64 => aarch64::FP,
        }
    }

    /// How many DWARF registers [`Regs`] tracks: 0..this.
    pub fn register_count(self) -> u16 {
        match self {
            Arch::X86_64 => 17,
            Arch::Aarch64 => 33,
        }
    }

    /// Whether a callee hands register `r` back unchanged (the psABI's callee-saved set).
    pub fn callee_saved(self, r: u16) -> bool {
        match self {
            // rbx, rbp, r12..r15.
            Arch::X86_64 => matches!(r, 3 | 6 | 12..=15),
            // x19..x29 (AAPCS64 6.1.1); sp is the CFA.
            Arch::Aarch64 => matches!(r, 19..=29),
        }
    }

    /// The DWARF number of a register by the name debuggers give it.
    pub fn register_number(self, name: &str) -> Option<u16> {
        match self {
            Arch::X86_64 => x86_64::register_number(name),
            Arch::Aarch64 => aarch64::register_number(name),
        }
    }

    /// A code address as read from the stack or a register, without the bits that are not
    /// address (arm64 pointer authentication codes, see [`aarch64::strip_code_pointer`]).
    pub fn code_address(self, a: u64) -> u64 {
        match self {
            Arch::X86_64 => a,
            Arch::Aarch64 => aarch64::strip_code_pointer(a),
        }
    }

    /// Where a call that returns to `ret` went, when it was a direct call (x86-64 `call rel32`,
    /// arm64 `BL`); None for an indirect call or unreadable code. `read` fills a buffer from
    /// the target's memory, false when it cannot.
    pub fn direct_call_target(
        self,
        read: &dyn Fn(u64, &mut [u8]) -> bool,
        ret: u64,
    ) -> Option<u64> {
        match self {
            Arch::X86_64 => x86_64::direct_call_target(read, ret),
            Arch::Aarch64 => aarch64::direct_call_target(read, ret),
        }
    }

    /// End of Linux user space (x86-64: 47-bit addresses with 4-level page tables; arm64:
    /// 48-bit): no object lies above it.
    pub fn user_space_end(self) -> u64 {
        match self {
            Arch::X86_64 => 1 << 47,
            Arch::Aarch64 => 1 << 48,
        }
    }

    /// The CFI vendor gimli must parse this architecture's call-frame information with (arm64
    /// has its own opcode, `DW_CFA_AARCH64_negate_ra_state`).
    pub fn cfi_vendor(self) -> gimli::Vendor {
        match self {
            Arch::X86_64 => gimli::Vendor::Default,
            Arch::Aarch64 => gimli::Vendor::AArch64,
        }
    }

    /// One `NT_PRSTATUS` note's thread, or None when the note is too short.
    pub fn parse_prstatus(self, desc: &[u8]) -> Option<PrStatus> {
        match self {
            Arch::X86_64 => x86_64::parse_prstatus(desc),
            Arch::Aarch64 => aarch64::parse_prstatus(desc),
        }
    }

    /// The name of system call `nr` in this architecture's Linux ABI; None for a number the
    /// table does not have.
    pub fn syscall_name(self, nr: u64) -> Option<&'static str> {
        match self {
            Arch::X86_64 => syscalls_x86_64::x86_64_syscall_name(nr),
            Arch::Aarch64 => syscalls_aarch64::aarch64_syscall_name(nr),
        }
    }

    /// The DWARF numbers of the system call argument registers, in order: x86-64 rdi, rsi,
    /// rdx, r10, r8, r9 (arch/x86/entry/entry_64.S); arm64 x0..x5
    /// (arch/arm64/kernel/syscall.c).
    pub fn syscall_arg_registers(self) -> [u16; 6] {
        match self {
            Arch::X86_64 => [5, 4, 1, 10, 8, 9],
            Arch::Aarch64 => [0, 1, 2, 3, 4, 5],
        }
    }

    /// The registers a frontend reads from its debugger, by the names gdb and lldb give them,
    /// to tell each thread's system call when memory is read through the debugger (no core
    /// notes, no /proc): x86-64 `orig_rax` (the number the kernel saved, -1 outside a call)
    /// then the arguments; arm64 the pc and x8 (see `syscall_from_code`) then x0..x5.
    pub fn syscall_register_names(self) -> &'static [&'static str] {
        match self {
            Arch::X86_64 => &["orig_rax", "rdi", "rsi", "rdx", "r10", "r8", "r9"],
            Arch::Aarch64 => &["pc", "x8", "x0", "x1", "x2", "x3", "x4", "x5"],
        }
    }

    /// The values of `syscall_register_names` in registers read while the thread was stopped
    /// (`syscall`: x86-64's `orig_rax`, which `Regs` does not hold). None where they lack one.
    pub fn syscall_register_values(self, regs: &Regs, syscall: Option<u64>) -> Option<Vec<u64>> {
        let first = match self {
            Arch::X86_64 => vec![syscall?],
            Arch::Aarch64 => vec![regs.pc(), regs.get(aarch64::SYSCALL_NR)?],
        };
        let args = self.syscall_arg_registers().map(|r| regs.get(r));
        first
            .into_iter()
            .map(Some)
            .chain(args)
            .collect::<Option<Vec<u64>>>()
    }

    /// The system call (number, arguments) that the values of `syscall_register_names` say:
    /// u64::MAX as the number outside a call; None when they cannot say (missing values, code
    /// that cannot be read). `read` reads one 32-bit word of the target.
    pub fn syscall_from_registers(
        self,
        values: &[u64],
        read: &dyn Fn(u64) -> Option<u32>,
    ) -> Option<(u64, [u64; 6])> {
        match (self, values) {
            (Arch::X86_64, [orig_rax, args @ ..]) => Some((*orig_rax, args.try_into().ok()?)),
            (Arch::Aarch64, [pc, x8, args @ ..]) => {
                let mut regs = Regs::new(self);
                regs.set_pc(*pc);
                regs.set(aarch64::SYSCALL_NR, *x8);
                let args = args.try_into().ok()?;
                Some((aarch64::syscall_from_code(read, &regs)?, args))
            }
            _ => None,
        }
    }

    /// The system call a thread is in, told from its registers and the code at its pc, for an
    /// architecture whose `NT_PRSTATUS` does not say (arm64; x86-64 has `orig_rax`: None).
    /// Some(u64::MAX) when it is in none; None when the code cannot be read. `read` reads one
    /// 32-bit word of the target.
    pub fn syscall_from_code(self, read: &dyn Fn(u64) -> Option<u32>, regs: &Regs) -> Option<u64> {
        match self {
            Arch::X86_64 => None,
            Arch::Aarch64 => aarch64::syscall_from_code(read, regs),
        }
    }

    /// The registers of the frame a signal interrupted, when `pc` (with `sp`) is the
    /// architecture's signal-return trampoline and its CFI does not say (qemu-user's arm64
    /// trampoline has no CFI); None otherwise.
    /// `read` reads one word of the target.
    pub fn signal_frame(self, read: &dyn Fn(u64) -> Option<u64>, regs: &Regs) -> Option<Regs> {
        match self {
            Arch::X86_64 => None,
            Arch::Aarch64 => aarch64::signal_frame(read, regs),
        }
    }
}

pub(crate) fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(off..off.checked_add(8)?)?.try_into().ok()?,
    ))
}

pub(crate) fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(off..off.checked_add(4)?)?.try_into().ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syscalls_from_a_debuggers_registers() {
        let args = [1, 2, 3, 4, 5, 6];
        let none = |_: u64| None;
        // x86-64: orig_rax says, -1 outside a call.
        let x86 = |nr: u64| [&[nr][..], &args[..]].concat();
        assert_eq!(
            Arch::X86_64.syscall_from_registers(&x86(202), &none),
            Some((202, args))
        );
        assert_eq!(
            Arch::X86_64.syscall_from_registers(&x86(u64::MAX), &none),
            Some((u64::MAX, args))
        );
        assert_eq!(Arch::X86_64.syscall_from_registers(&[202, 1], &none), None);
        // arm64: x8, when the code at the pc or before it is `svc #0` (0xd4000001).
        let svc_before_pc = |a: u64| Some(if a == 0x1000 - 4 { 0xd400_0001 } else { 0 });
        let arm = [&[0x1000, 98][..], &args[..]].concat();
        assert_eq!(
            Arch::Aarch64.syscall_from_registers(&arm, &svc_before_pc),
            Some((98, args))
        );
        let no_svc = |_: u64| Some(0xd503_201f); // nop
        assert_eq!(
            Arch::Aarch64.syscall_from_registers(&arm, &no_svc),
            Some((u64::MAX, args))
        );
        assert_eq!(Arch::Aarch64.syscall_from_registers(&arm, &none), None);
        assert_eq!(
            Arch::Aarch64.syscall_from_registers(&arm[..7], &no_svc),
            None
        );
    }

    /// A stop's registers (`pid --native`'s ptrace stop) give the values a debugger's give,
    /// which say the same call.
    #[test]
    fn syscalls_from_a_stops_registers() {
        let args = [1, 2, 3, 4, 5, 6];
        let none = |_: u64| None;
        for arch in [Arch::X86_64, Arch::Aarch64] {
            let mut regs = Regs::new(arch);
            for (r, v) in arch.syscall_arg_registers().into_iter().zip(args) {
                regs.set(r, v);
            }
            if arch == Arch::Aarch64 {
                regs.set_pc(0x1000);
                regs.set(aarch64::SYSCALL_NR, 98);
            }
            let values = arch.syscall_register_values(&regs, Some(202));
            let svc_before_pc = |a: u64| Some(if a == 0x1000 - 4 { 0xd400_0001 } else { 0 });
            let nr = if arch == Arch::X86_64 { 202 } else { 98 };
            assert_eq!(
                arch.syscall_from_registers(&values.unwrap(), &svc_before_pc),
                Some((nr, args)),
                "{arch:?}"
            );
        }
        // x86-64 without orig_rax: nothing to say.
        let regs = Regs::new(Arch::X86_64);
        assert_eq!(Arch::X86_64.syscall_register_values(&regs, None), None);
        assert_eq!(
            Arch::X86_64.syscall_from_registers(&[u64::MAX, 0, 0, 0, 0, 0, 0], &none),
            Some((u64::MAX, [0; 6]))
        );
    }
}
