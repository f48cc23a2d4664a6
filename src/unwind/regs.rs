//! Registers in DWARF numbering: [`Regs`] and each architecture's numbers live in
//! [`crate::arch`]; these are x86-64's, for the x86-64 JIT and trampoline code.

pub use crate::arch::x86_64::{RBP, RIP as RA, RSP};
pub use crate::arch::Regs;
