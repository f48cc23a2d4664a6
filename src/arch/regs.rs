//! Register values of one frame, in the target architecture's DWARF numbering.

use super::Arch;

/// The most DWARF registers any [`Arch`] tracks (arm64: x0..x30, sp, pc).
const MAX: usize = 33;

/// Register values with a mask of the ones known (after an unwind step, caller-saved
/// registers are usually not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Regs {
    arch: Arch,
    values: [u64; MAX],
    known: u64,
}

impl Default for Regs {
    fn default() -> Regs {
        Regs::new(Arch::X86_64)
    }
}

impl Regs {
    /// No register known.
    pub fn new(arch: Arch) -> Regs {
        Regs {
            arch,
            values: [0; MAX],
            known: 0,
        }
    }

    /// x86-64: all 17 registers known, in DWARF order (rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp,
    /// r8..r15, rip).
    pub fn from_dwarf(values: [u64; 17]) -> Regs {
        let mut r = Regs::new(Arch::X86_64);
        for (i, v) in values.into_iter().enumerate() {
            r.set(i as u16, v);
        }
        r
    }

    pub fn arch(&self) -> Arch {
        self.arch
    }

    pub fn get(&self, r: u16) -> Option<u64> {
        let i = r as usize;
        (r < self.arch.register_count() && self.known & (1 << i) != 0).then(|| self.values[i])
    }

    /// Sets register `r`; a number the architecture does not track is ignored.
    pub fn set(&mut self, r: u16, v: u64) {
        let i = r as usize;
        if r < self.arch.register_count() {
            self.values[i] = v;
            self.known |= 1 << i;
        }
    }

    pub fn pc(&self) -> u64 {
        self.get(self.arch.pc()).unwrap_or(0)
    }

    pub fn sp(&self) -> u64 {
        self.get(self.arch.sp()).unwrap_or(0)
    }

    pub fn fp(&self) -> Option<u64> {
        self.get(self.arch.fp())
    }

    pub fn set_pc(&mut self, v: u64) {
        self.set(self.arch.pc(), v);
    }

    pub fn set_sp(&mut self, v: u64) {
        self.set(self.arch.sp(), v);
    }

    pub fn set_fp(&mut self, v: u64) {
        self.set(self.arch.fp(), v);
    }

    /// A frame's registers from the debugger's names for them (rip, rsp...; pc, sp, x29...).
    pub fn from_names<'a>(arch: Arch, named: impl IntoIterator<Item = (&'a str, u64)>) -> Regs {
        let mut r = Regs::new(arch);
        for (name, v) in named {
            if let Some(n) = arch.register_number(name) {
                r.set(n, v);
            }
        }
        r
    }
}
