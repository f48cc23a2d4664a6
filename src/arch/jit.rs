//! What unwinding JIT and perf-trampoline code needs from an architecture: the entry shim's
//! frame, decoded from its code, and the perf trampoline's, and how to get from a frame in that
//! code to its caller. The JIT map ([`crate::native::jit`]) finds the code and the shim and
//! asks the [`Arch`]; the shapes themselves are in [`super::x86_64::jit`] and
//! [`super::aarch64::jit`].
//!
//! Like the rest of the seam this reads the target through closures, not the `Memory` trait
//! (the memory layer parses core notes through [`Arch`], so the seam sits below it): `read`
//! fills a buffer, false when it cannot.

use super::{aarch64, x86_64, Arch};

pub use super::jit_step::{
    read_word, trampoline_copy_at, Caller, Read, Regs, ShimSite, MAX_SCAN_BYTES, MAX_SHIM_BYTES,
};

/// A decoded entry shim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shim {
    X86_64(x86_64::jit::ShimFrame),
    Aarch64(aarch64::jit::Shim),
}

impl Shim {
    /// Offset of the return address of its call into JIT code.
    pub fn return_offset(&self) -> u64 {
        match self {
            Shim::X86_64(s) => s.return_offset,
            Shim::Aarch64(s) => s.return_offset,
        }
    }

    /// Where its epilogue ends (just after its return), from its start; None when that is not
    /// in the bytes decoded.
    pub fn end(&self) -> Option<u64> {
        match self {
            Shim::X86_64(s) => s.end,
            Shim::Aarch64(s) => s.end,
        }
    }

    /// The caller of the JIT frame at `regs`, whose code starts at `code_start`: the eval loop
    /// that called the shim, with what the shim saved. None when the frame cannot be unwound.
    pub fn unwind(
        &self,
        site: &ShimSite,
        read: Read,
        code_start: u64,
        regs: Regs,
    ) -> Option<Caller> {
        match self {
            Shim::X86_64(s) => x86_64::jit::unwind_jit(s, site, read, code_start, regs),
            Shim::Aarch64(s) => aarch64::jit::unwind_jit(s, site, read, code_start, regs),
        }
    }
}

/// A decoded perf trampoline. arm64's is a frame record at the bottom of its frame, which the
/// CLI's frame-pointer step follows as well; decoded for debuggers, whose own fallback does not
/// strip its signed return address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trampoline {
    X86_64(x86_64::jit::TrampolineTemplate),
    Aarch64(aarch64::jit::TrampolineFrame),
}

impl Trampoline {
    /// The caller of the trampoline frame at `regs`, in the arena `[start, end)`.
    pub fn unwind(&self, read: Read, (start, end): (u64, u64), regs: Regs) -> Option<Caller> {
        match self {
            Trampoline::X86_64(t) => x86_64::jit::unwind_trampoline(t, read, (start, end), regs),
            Trampoline::Aarch64(t) => aarch64::jit::unwind_trampoline(t, read, (start, end), regs),
        }
    }
}

impl Arch {
    /// How many bytes of the entry shim to read, longest first: it may sit at the end of a
    /// readable range.
    pub fn jit_shim_read_lengths(self) -> [usize; 3] {
        match self {
            Arch::X86_64 => [x86_64::jit::MAX_SHIM_BYTES, 48, 32],
            Arch::Aarch64 => [aarch64::jit::MAX_SHIM_BYTES, 128, 64],
        }
    }

    /// The entry shim whose code is `code`; None for code of another shape.
    pub fn decode_jit_shim(self, code: &[u8]) -> Option<Shim> {
        match self {
            Arch::X86_64 => x86_64::jit::decode_shim(code).map(Shim::X86_64),
            Arch::Aarch64 => aarch64::jit::decode_shim(code).map(Shim::Aarch64),
        }
    }

    /// Whether JIT and perf-trampoline code keeps frame records, so that the frame-pointer step
    /// unwinds what the shim's or trampoline's decoded frame does not: arm64 JIT code keeps x29
    /// and its trampoline is a frame record (`stp x29, x30`). x86-64 code need not keep %rbp
    /// (3.14 JIT code is `preserve_none`; the 3.12/3.13 trampoline pushes none).
    pub fn jit_keeps_frame_records(self) -> bool {
        match self {
            Arch::X86_64 => false,
            Arch::Aarch64 => true,
        }
    }

    /// The perf trampoline whose code is `code`; None for code of another shape.
    pub fn decode_perf_trampoline(self, code: &[u8]) -> Option<Trampoline> {
        match self {
            Arch::X86_64 => x86_64::jit::decode_trampoline(code).map(Trampoline::X86_64),
            Arch::Aarch64 => aarch64::jit::decode_trampoline(code).map(Trampoline::Aarch64),
        }
    }
}

// One buffer reads either architecture's shim.
const _: () = assert!(
    MAX_SHIM_BYTES >= x86_64::jit::MAX_SHIM_BYTES && MAX_SHIM_BYTES >= aarch64::jit::MAX_SHIM_BYTES
);
