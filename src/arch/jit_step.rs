//! One unwind step through JIT or perf-trampoline code, as every architecture's decoder takes
//! and gives it: the registers in, the caller out, and how target memory is read. Apart from
//! [`super::jit`], which dispatches to the architectures, so that they import this and not
//! their dispatcher.

use std::collections::HashSet;

/// How far above a JIT frame's stack pointer the shim's frame is looked for.
pub const MAX_SCAN_BYTES: u64 = 64 << 10;
/// Bytes of an entry shim read for decoding: the most any architecture reads
/// ([`Arch::jit_shim_read_lengths`]).
pub const MAX_SHIM_BYTES: usize = 192;

/// Reads target memory into the buffer; false when it cannot.
pub type Read<'a> = &'a dyn Fn(u64, &mut [u8]) -> bool;

/// One pointer-sized word of the target.
pub fn read_word(read: Read, addr: u64) -> Option<u64> {
    let mut b = [0u8; 8];
    read(addr, &mut b).then(|| u64::from_le_bytes(b))
}

/// Whether a copy of a trampoline's `template` starts at `start`, wholly inside the arena
/// `[arena_start, arena_end)`; `buf` (the template's length) receives the bytes read there.
pub fn trampoline_copy_at(
    template: &[u8],
    read: Read,
    (arena_start, arena_end): (u64, u64),
    start: u64,
    buf: &mut [u8],
) -> bool {
    start >= arena_start
        && start
            .checked_add(template.len() as u64)
            .is_some_and(|e| e <= arena_end)
        && read(start, buf)
        && buf == template
}

/// The registers an unwind starts from (`bp` is x86-64 %rbp, arm64 x29).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Regs {
    pub pc: u64,
    pub sp: u64,
    pub bp: u64,
}

/// The caller of a JIT or trampoline frame, as an architecture's unwinder finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The caller's registers by the names debuggers give them: the pc, the stack pointer and
    /// every register the frame saved.
    pub regs: Vec<(&'static str, u64)>,
    /// The frame's id for the debugger: its CFA and the start of its code.
    pub frame_sp: u64,
    pub frame_pc: u64,
}

/// What the JIT map knows of the shims of one stop, for an architecture's unwinder.
pub struct ShimSite<'a> {
    /// Every return address of a shim's call into JIT code.
    pub returns: &'a HashSet<u64>,
    /// Length of the shim copy at the start of each executor (3.14; 0 when the shim is in the
    /// binary), so a PC inside the shim itself is not taken for JIT code.
    pub copy_len: u64,
    /// Whether a PC is JIT or trampoline code (a caller never is).
    pub in_code: &'a dyn Fn(u64) -> bool,
}
