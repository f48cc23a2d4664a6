//! JIT and trampoline code of a stop (see [`crate::native::jit`]), built from the session's
//! snapshot and the `_PyJIT_Entry` discovery found: for `--native`, lldb, and gdb's
//! `_pyunwind.Jit` (a session that decodes no thread, so that the unwinder works where Python
//! frames cannot be decoded).

use super::{once, Session};
use crate::native::jit::{JitMap, Region, Regs, Unwound};

pub fn map(s: &Session) -> &JitMap {
    once(&s.jit, || JitMap::build(&s.snap, s.remembered.jit_entry))
}

/// The JIT map alone, for a frontend that keeps nothing else of the stop.
pub fn into_map(s: Session) -> JitMap {
    map(&s);
    s.jit.into_inner().unwrap_or_default()
}

/// The JIT executor or trampoline arena holding `pc`.
pub fn lookup(s: &Session, pc: u64) -> Option<&Region> {
    map(s).lookup(pc)
}

/// The caller's registers of the JIT or trampoline frame at `regs`, None when `regs.pc`
/// is not such code or the frame cannot be unwound.
pub fn caller_registers(s: &Session, regs: Regs) -> Option<Unwound> {
    map(s).unwind(&*s.snap.mem, regs)
}
