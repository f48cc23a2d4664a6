//! x86-64 general registers in DWARF numbering (System V psABI, table "DWARF Register Number
//! Mapping"): rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp, r8..r15, and the return address (rip)
//! as column 16.

pub const RBP: u16 = 6;
pub const RSP: u16 = 7;
pub const RA: u16 = 16;

/// Register values with a mask of the ones known (after an unwind step, caller-saved
/// registers are usually not).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Regs {
    values: [u64; 17],
    known: u32,
}

impl Regs {
    /// All 17 registers known, in DWARF order.
    pub fn from_dwarf(values: [u64; 17]) -> Regs {
        Regs {
            values,
            known: (1 << 17) - 1,
        }
    }

    pub fn get(&self, r: u16) -> Option<u64> {
        let i = r as usize;
        (i < self.values.len() && self.known & (1 << i) != 0).then(|| self.values[i])
    }

    pub fn set(&mut self, r: u16, v: u64) {
        let i = r as usize;
        if i < self.values.len() {
            self.values[i] = v;
            self.known |= 1 << i;
        }
    }

    pub fn pc(&self) -> u64 {
        self.get(RA).unwrap_or(0)
    }

    pub fn sp(&self) -> u64 {
        self.get(RSP).unwrap_or(0)
    }

    /// rbx, rbp, r12..r15: a callee hands them back unchanged.
    pub fn callee_saved(r: u16) -> bool {
        matches!(r, 3 | 6 | 12..=15)
    }

    /// The DWARF number of a register by its name (as the JIT unwinder names them).
    pub fn number(name: &str) -> Option<u16> {
        const NAMES: [&str; 17] = [
            "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11",
            "r12", "r13", "r14", "r15", "rip",
        ];
        NAMES.iter().position(|n| *n == name).map(|i| i as u16)
    }
}
