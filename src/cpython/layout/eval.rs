//! What the eval loop does by version, beyond struct offsets: whether a JIT may run, and how a
//! 3.11 entry frame returns.

use super::Layout;

impl Layout {
    /// Whether the build may run JIT-compiled traces: the experimental JIT came in 3.13
    /// (`--enable-experimental-jit`, Python/jit.c 3.13); an older one has no JIT code to map.
    pub fn may_jit(&self) -> bool {
        self.version.minor >= 13
    }

    /// Whether an entry frame returns by leaving its eval-loop call, which puts the caller's
    /// `_PyCFrame` back into `tstate->cframe` (Python/ceval.c 3.11, RETURN_VALUE). From 3.12
    /// an entry frame's `previous` is the eval-loop call's own `entry_frame` (Python/ceval.c
    /// 3.12), so it returns through `current_frame` as any other frame does.
    pub fn entry_frame_restores_cframe(&self) -> bool {
        self.version.minor == 11
    }
}
