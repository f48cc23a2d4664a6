//! The JIT and trampoline code regions of one stop, and the step out of a frame in them:
//! what unwinding needs of the map [`crate::native::jit`] builds from the interpreter's
//! lists (the map is data here, so that the unwinder does not depend on the decoders that
//! find it).

use std::collections::HashSet;

use serde::Serialize;

use crate::arch::jit::{Regs, Shim, ShimSite, Trampoline};
use crate::arch::Arch;
use crate::memory::Memory;

/// What a region holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RegionKind {
    /// One executor's code (3.14: with the entry shim at its start).
    Executor {
        executor: u64,
        /// `vm_data.code`, None for side-exit and cold-exit executors.
        code: Option<u64>,
    },
    /// A perf trampoline arena: copies of `_Py_trampoline_func_start`, one per code object.
    Trampolines { arena: u64 },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Region {
    pub start: u64,
    pub end: u64,
    #[serde(flatten)]
    pub kind: RegionKind,
    /// How a debugger names a frame in it: `[jit] qualname (file:line)`, `[jit] side exit`,
    /// `[trampoline]` (the frontend names trampolines after the Python frame they start).
    pub label: String,
}

/// The caller of a JIT or trampoline frame.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Unwound {
    /// Caller registers: rip, rsp, and every register the frame saved (rbp always).
    pub caller: Vec<(&'static str, u64)>,
    /// The frame's id for the debugger: its CFA and the start of its region or trampoline.
    pub frame_sp: u64,
    pub frame_pc: u64,
    pub label: String,
    /// "jit" or "trampoline".
    pub kind: &'static str,
}

impl Unwound {
    pub fn caller_pc(&self) -> u64 {
        self.get("rip").or_else(|| self.get("pc")).unwrap_or(0)
    }
    pub fn get(&self, reg: &str) -> Option<u64> {
        self.caller.iter().find(|(n, _)| *n == reg).map(|(_, v)| *v)
    }
}

/// Where the entry shim is: its decoded frame and every return address of its call.
#[derive(Clone, Debug, Default)]
pub(crate) struct Shims {
    pub(crate) frame: Option<Shim>,
    /// Length of the shim copy at the start of each executor (3.14; 0 when the shim is in the
    /// binary), so a PC inside the shim itself is not taken for JIT code.
    pub(crate) copy_len: u64,
    pub(crate) returns: HashSet<u64>,
}

/// The JIT and trampoline code of one stop, sorted by address.
#[derive(Clone, Debug, Default)]
pub struct JitMap {
    pub(crate) regions: Vec<Region>,
    pub(crate) shims: Shims,
    pub(crate) trampoline: Option<Trampoline>,
    /// Problems met while building (unreadable lists, unknown shim): the map is partial.
    pub errors: Vec<String>,
    /// Which table and strategy was used.
    pub source: String,
    pub(crate) arch: Arch,
}

impl JitMap {
    /// The architecture of the code the map describes.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    pub fn regions(&self) -> &[Region] {
        &self.regions
    }

    /// The region holding `pc`.
    pub fn lookup(&self, pc: u64) -> Option<&Region> {
        let i = self.regions.partition_point(|r| r.start <= pc);
        let r = self.regions.get(i.checked_sub(1)?)?;
        (pc < r.end).then_some(r)
    }

    /// The caller of the frame at `regs`, when its PC is JIT or trampoline code and the frame
    /// can be unwound; None otherwise (the debugger's own unwinder then has the frame).
    ///
    /// On arm64 `regs.bp` is x29 and the caller's registers are named `pc`, `sp`, `x29` and
    /// `x19`..`x28`; a trampoline frame (a frame record at the bottom of a 16-byte frame) gives
    /// `pc`, `sp` and `x29` (the CLI's frame-pointer step would give the same).
    pub fn unwind(&self, mem: &dyn Memory, regs: Regs) -> Option<Unwound> {
        let region = self.lookup(regs.pc)?;
        let read = |a: u64, buf: &mut [u8]| mem.read_into(a, buf).is_ok();
        let (caller, kind) = match region.kind {
            RegionKind::Executor { .. } => {
                let site = ShimSite {
                    returns: &self.shims.returns,
                    copy_len: self.shims.copy_len,
                    in_code: &|pc| self.lookup(pc).is_some(),
                };
                let shim = self.shims.frame.as_ref()?;
                (shim.unwind(&site, &read, region.start, regs)?, "jit")
            }
            RegionKind::Trampolines { .. } => {
                let t = self.trampoline.as_ref()?;
                (
                    t.unwind(&read, (region.start, region.end), regs)?,
                    "trampoline",
                )
            }
        };
        Some(Unwound {
            caller: caller.regs,
            frame_sp: caller.frame_sp,
            frame_pc: caller.frame_pc,
            label: region.label.clone(),
            kind,
        })
    }
}
