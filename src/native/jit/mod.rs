//! JIT executor code and perf trampolines: where they are in a stopped target, which Python
//! code each runs, and how to unwind a frame whose PC is in them.
//!
//! Neither has symbols or unwind info on 3.14 (3.15 registers its JIT code with gdb, but the
//! registered CFI restores only rip/rsp/rbp). The map is rebuilt for every stop, from the
//! interpreter's own lists:
//!
//! | region | found from |
//! | --- | --- |
//! | executor `[jit_code, +jit_size)` | 3.14 `interp->executor_list_head` (through `vm_data.links.next`); 3.15 `interp->executor_ptrs[0..executor_count]`, `cold_executor`, `cold_dynamic_executor`; both `executor_deletion_list_head` |
//! | perf trampolines | `_PyRuntime.ceval.perf.code_arena`, then each arena's `prev` |
//!
//! Unwinding a JIT frame means finding the entry shim that called into it, then restoring what
//! the shim saved: the caller is the eval loop, with its callee-saved registers. Which shim
//! and which code is this module's part; the shapes of the shim and the trampoline, and how a
//! frame in their code finds its caller, are the architecture's ([`crate::arch::jit`]).
//!
//! The offsets of the interpreter's lists come from per-build tables (`tables.rs`: x86-64 and
//! arm64 builds of Debian sid's python3.14 and python3.15, release and pydebug), chosen by the
//! target's architecture and the struct sizes in its `_Py_DebugOffsets`.
//!
//! The map is built from the stop's [`Snapshot`] and the `_PyJIT_Entry` discovery found beside
//! `_PyRuntime`; a [`crate::session::Session`] builds it once per stop:
//!
//! ```no_run
//! # use pyunwind::native::jit::Regs;
//! # fn f(target: pyunwind::target::Target) -> pyunwind::Result<()> {
//! let session = pyunwind::session::Session::open(target)?;
//! let map = session.jit();
//! if let Some(u) = map.unwind(&*session.snap.mem, Regs { pc: 0x7f00_0000_1234, sp: 0x7ffd_0000, bp: 0 }) {
//!     println!("caller pc {:#x}", u.caller_pc());
//! }
//! # Ok(()) }
//! ```

use std::collections::HashSet;

use serde::Serialize;

pub use crate::arch::jit::Regs;
use crate::arch::jit::{Shim, ShimSite, Trampoline, MAX_SHIM_BYTES};
use crate::arch::Arch;
use crate::cpython::debug_offsets::DebugOffsets;
use crate::cpython::Snapshot;
use crate::error::ReadError;
use crate::memory::Memory;

mod tables;
pub use tables::{builtin_tables, tables_for, ExecutorRoots, Table};

/// Executors taken from one interpreter's lists; CPython keeps a few hundred at most.
pub const MAX_EXECUTORS: usize = 100_000;
/// Perf trampoline arenas (64 KiB each) followed through `prev`.
pub const MAX_ARENAS: usize = 16_384;
/// One executor's code mapping; real ones are a few pages.
pub const MAX_JIT_SIZE_BYTES: u64 = 16 << 20;
/// A trampoline copy; the real ones are 12 bytes.
pub const MAX_TRAMPOLINE_BYTES: u64 = 64;

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
struct Shims {
    frame: Option<Shim>,
    /// Length of the shim copy at the start of each executor (3.14; 0 when the shim is in the
    /// binary), so a PC inside the shim itself is not taken for JIT code.
    copy_len: u64,
    returns: HashSet<u64>,
}

/// The JIT and trampoline code of one stop, sorted by address.
#[derive(Clone, Debug, Default)]
pub struct JitMap {
    regions: Vec<Region>,
    shims: Shims,
    trampoline: Option<Trampoline>,
    /// Problems met while building (unreadable lists, unknown shim): the map is partial.
    pub errors: Vec<String>,
    /// Which table and strategy was used.
    pub source: String,
    arch: Arch,
}

impl JitMap {
    /// The map of the stop `snap`. Never fails: what cannot be read is recorded in `errors`
    /// and left out.
    pub fn build(snap: &Snapshot, jit_entry: Option<u64>) -> JitMap {
        let mut map = JitMap::default();
        let mem = &*snap.mem;
        let t = match choose_table(snap) {
            Ok(t) => t,
            Err(e) => {
                map.errors.push(e);
                return map;
            }
        };
        map.source = t.source.to_string();
        map.arch = snap.arch;
        map.collect_executors(snap, t);
        map.collect_trampolines(mem, snap.runtime.wrapping_add(t.perf_code_arena));
        map.regions.sort_by_key(|r| r.start);
        // Overlapping regions mean the lists are corrupt: keep the first of each overlap.
        let mut last_end = 0;
        map.regions.retain(|r| {
            let keep = r.start >= last_end;
            if keep {
                last_end = r.end;
            }
            keep
        });
        map.find_shims(mem, jit_entry);
        map
    }

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

    fn collect_executors(&mut self, snap: &Snapshot, t: &Table) {
        let mem = &*snap.mem;
        let interps = match snap.interpreters() {
            Ok(i) => i,
            Err(e) => return self.errors.push(format!("interpreters: {e}")),
        };
        let mut seen = HashSet::new();
        for interp in interps {
            let mut execs = Vec::new();
            match t.roots {
                ExecutorRoots::List { head } => {
                    self.follow_list(mem, t, interp.wrapping_add(head), &mut execs)
                }
                ExecutorRoots::Array { ptrs, count, cold } => {
                    self.read_array(mem, interp, ptrs, count, &mut execs);
                    for c in cold {
                        match mem.read_ptr(interp.wrapping_add(c)) {
                            Ok(0) => {}
                            Ok(e) => execs.push(e),
                            Err(e) => self.errors.push(format!("cold executor: {e}")),
                        }
                    }
                }
            }
            self.follow_list(mem, t, interp.wrapping_add(t.deletion_head), &mut execs);
            for e in execs {
                if seen.insert(e) {
                    self.add_executor(snap, t, e);
                }
            }
        }
    }

    fn follow_list(&mut self, mem: &dyn Memory, t: &Table, head_at: u64, out: &mut Vec<u64>) {
        let mut e = match mem.read_ptr(head_at) {
            Ok(p) => p,
            Err(err) => return self.errors.push(format!("executor list: {err}")),
        };
        let mut seen = HashSet::new();
        while e != 0 {
            if seen.len() >= MAX_EXECUTORS || !seen.insert(e) {
                self.errors.push(format!(
                    "executor list at {head_at:#x} loops or is too long"
                ));
                return;
            }
            out.push(e);
            e = match mem.read_ptr(e.wrapping_add(t.links_next)) {
                Ok(p) => p,
                Err(err) => return self.errors.push(format!("executor list: {err}")),
            };
        }
    }

    fn read_array(
        &mut self,
        mem: &dyn Memory,
        interp: u64,
        ptrs: u64,
        count: u64,
        out: &mut Vec<u64>,
    ) {
        let read = || -> Result<Vec<u64>, ReadError> {
            let base = mem.read_ptr(interp.wrapping_add(ptrs))?;
            let n = mem.read_u64(interp.wrapping_add(count))?;
            if n > MAX_EXECUTORS as u64 {
                return Err(ReadError::too_large(base, n));
            }
            if n == 0 {
                return Ok(Vec::new());
            }
            let bytes = mem.read_vec(base, n * 8, MAX_EXECUTORS as u64 * 8)?;
            Ok(bytes
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
                .filter(|&p| p != 0)
                .collect())
        };
        match read() {
            Ok(v) => out.extend(v),
            Err(e) => self.errors.push(format!("executor array: {e}")),
        }
    }

    fn add_executor(&mut self, snap: &Snapshot, t: &Table, e: u64) {
        let mem = &*snap.mem;
        // One read of the executor up to its last field we use.
        let span = t.jit_code.max(t.jit_size).max(t.vm_code) + 8;
        let fields = mem.read_vec(e, span, span).map(|b| {
            let word = |off: u64| {
                let o = off as usize;
                u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or_default())
            };
            (word(t.jit_code), word(t.jit_size), word(t.vm_code))
        });
        let (start, size, code) = match fields {
            Ok(f) => f,
            Err(err) => return self.errors.push(format!("executor {e:#x}: {err}")),
        };
        // Not compiled (tier-2 interpreter) or nonsense: no code to claim.
        if start == 0 || size == 0 || size > MAX_JIT_SIZE_BYTES || start.checked_add(size).is_none()
        {
            return;
        }
        let code = (code != 0).then_some(code);
        let label = match code {
            Some(c) => match snap.code(c) {
                Ok(co) => format!("[jit] {} ({}:{})", co.qualname, co.filename, co.firstlineno),
                Err(err) => format!("[jit] <code {c:#x}: {err}>"),
            },
            None => "[jit] side exit".to_string(),
        };
        self.regions.push(Region {
            start,
            end: start + size,
            kind: RegionKind::Executor { executor: e, code },
            label,
        });
    }

    fn collect_trampolines(&mut self, mem: &dyn Memory, arena_at: u64) {
        let mut arena = match mem.read_ptr(arena_at) {
            Ok(p) => p,
            Err(e) => return self.errors.push(format!("perf trampoline arenas: {e}")),
        };
        let mut seen = HashSet::new();
        // code_arena_st {start_addr, current_addr, size, size_left, code_size, prev}
        // (Python/perf_trampoline.c; DWARF of Debian python3.14/3.15, 48 bytes).
        while arena != 0 {
            if seen.len() >= MAX_ARENAS || !seen.insert(arena) {
                self.errors
                    .push(format!("perf trampoline arenas loop at {arena:#x}"));
                return;
            }
            let mut raw = [0u8; 48];
            if let Err(e) = mem.read_into(arena, &mut raw) {
                return self.errors.push(format!("perf trampoline arena: {e}"));
            }
            let f =
                |i: usize| u64::from_le_bytes(raw[i * 8..i * 8 + 8].try_into().unwrap_or_default());
            let (start, current, size, code_size, prev) = (f(0), f(1), f(2), f(4), f(5));
            let end = if current > start && current - start <= size {
                current
            } else {
                start.saturating_add(size.min(MAX_JIT_SIZE_BYTES))
            };
            if start != 0 && end > start {
                if self.trampoline.is_none() && code_size > 0 && code_size <= MAX_TRAMPOLINE_BYTES {
                    match mem.read_vec(start, code_size, MAX_TRAMPOLINE_BYTES) {
                        Ok(b) => {
                            self.trampoline = self.arch.decode_perf_trampoline(&b);
                            if self.trampoline.is_none() {
                                self.errors.push(format!(
                                    "perf trampoline at {start:#x}: unknown instructions"
                                ));
                            }
                        }
                        Err(e) => self.errors.push(format!("perf trampoline: {e}")),
                    }
                }
                self.regions.push(Region {
                    start,
                    end,
                    kind: RegionKind::Trampolines { arena },
                    label: "[trampoline]".to_string(),
                });
            }
            arena = prev;
        }
    }

    /// Decodes the entry shim (3.15: `_PyJIT_Entry` at `jit_entry`; 3.14: the copy at the
    /// start of every executor, read from the first) and lists its return addresses.
    fn find_shims(&mut self, mem: &dyn Memory, jit_entry: Option<u64>) {
        let executors: Vec<u64> = self
            .regions
            .iter()
            .filter(|r| matches!(r.kind, RegionKind::Executor { .. }))
            .map(|r| r.start)
            .collect();
        let (bytes_at, per_executor) = match jit_entry {
            Some(a) => (a, false),
            None => match executors.first() {
                Some(&a) => (a, true),
                None => return,
            },
        };
        let mut buf = [0u8; MAX_SHIM_BYTES];
        // The shim may sit at the end of a readable range; read what we can.
        let Some(len) = self
            .arch
            .jit_shim_read_lengths()
            .into_iter()
            .find(|&len| mem.read_into(bytes_at, &mut buf[..len]).is_ok())
        else {
            return self
                .errors
                .push(format!("JIT entry shim at {bytes_at:#x} is unreadable"));
        };
        let Some(shim) = self.arch.decode_jit_shim(&buf[..len]) else {
            return self.errors.push(format!(
                "JIT entry shim at {bytes_at:#x}: unknown instructions"
            ));
        };
        let return_offset = shim.return_offset();
        self.shims.returns = if per_executor {
            executors
                .iter()
                .filter_map(|s| s.checked_add(return_offset))
                .collect()
        } else {
            bytes_at.checked_add(return_offset).into_iter().collect()
        };
        if per_executor {
            match shim.end() {
                Some(end) => self.shims.copy_len = end,
                None => {
                    return self
                        .errors
                        .push(format!("JIT entry shim at {bytes_at:#x}: unknown epilogue"))
                }
            }
        }
        self.shims.frame = Some(shim);
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

/// Picks the table for the target's architecture, the layout's minor version and the struct
/// sizes the target's `_Py_DebugOffsets` give.
fn choose_table(snap: &Snapshot) -> Result<&'static Table, String> {
    let minor = snap.layout.version.minor;
    let (runtime_size, interp_size) =
        struct_sizes(&*snap.mem, snap.runtime).map_err(|e| format!("_Py_DebugOffsets: {e}"))?;
    let arch = snap.arch;
    tables_for(arch)
        .iter()
        .find(|t| {
            t.arch == arch
                && t.minor == minor
                && t.runtime_size == runtime_size
                && t.interp_size == interp_size
        })
        .ok_or_else(|| {
            format!("no JIT layout for 3.{minor} ({}) with _PyRuntimeState of {runtime_size} bytes and PyInterpreterState of {interp_size}", arch.name())
        })
}

/// `sizeof(_PyRuntimeState)` and `sizeof(PyInterpreterState)` from the target's
/// `_Py_DebugOffsets` (validated by the core's reader).
fn struct_sizes(mem: &dyn Memory, runtime: u64) -> Result<(u64, u64), ReadError> {
    let d = DebugOffsets::read(mem, runtime)?;
    let size = |group: &str| {
        d.size(group)
            .ok_or(ReadError::corrupt(runtime, "_Py_DebugOffsets shape"))
    };
    Ok((size("runtime_state")?, size("interpreter_state")?))
}

#[cfg(test)]
mod tests {
    use super::tables::{AARCH64_TABLES, X86_64_TABLES};
    use super::*;
    use crate::arch::aarch64::jit::tests::{words, A64_ENTRY_315, A64_SHIM_314};
    use crate::arch::aarch64::jit::CALLEE_SAVED as A64_CALLEE_SAVED;
    use crate::binary::Module;
    use crate::cpython::debug_offsets::{size_words, COOKIE};
    use crate::cpython::layout::{tpflags, Layout};
    use crate::cpython::{Found, Version};
    use crate::memory::FakeMemory;
    use std::sync::Arc;

    const RT: u64 = 0x10_0000;
    const INTERP: u64 = 0x20_0000;
    const STR_TYPE: u64 = 0x1000;
    const CODE_TYPE: u64 = 0x2000;

    /// A target of `t`'s build at PY_VERSION_HEX `version`: `_Py_DebugOffsets` with the
    /// build's struct sizes, one interpreter, no perf arenas, and the `str` and `code` types.
    /// Returns the built-in layout of that version.
    fn runtime(mem: &mut FakeMemory, t: &Table, version: u64) -> Layout {
        let v = Version::from_hex(version).unwrap();
        let l = Layout::builtin(v).unwrap();
        mem.put(RT, &[0; 0x1000])
            .put(RT, COOKIE)
            .put_u64(RT + 8, version);
        // The other groups need plausible sizes for the core's reader to take the table.
        for (group, at) in size_words(v.minor) {
            let size = match group {
                "runtime_state" => t.runtime_size,
                "interpreter_state" => t.interp_size,
                _ => 0x1000,
            };
            mem.put_u64(RT + at, size);
        }
        mem.put_u64(RT + l.runtime_state.interpreters_head, INTERP);
        mem.put_u64(INTERP + l.interpreter_state.next, 0);
        let to = &l.type_object;
        for (tp, name, flags) in [
            (STR_TYPE, 0x1800u64, tpflags::UNICODE_SUBCLASS),
            (CODE_TYPE, 0x2800, 0),
        ] {
            mem.put(tp, &[0; 0x400]);
            mem.put_u64(tp + to.tp_name, name);
            mem.put_u64(tp + to.tp_flags, flags);
        }
        mem.put(0x1800, &[0; 64]).put(0x1800, b"str");
        mem.put(0x2800, &[0; 64]).put(0x2800, b"code");
        l
    }

    /// A code object at `at`, its strs after it; no locals, an empty line table.
    fn code(mem: &mut FakeMemory, l: &Layout, at: u64, qualname: &str, file: &str, line: i32) {
        let u = &l.unicode_object;
        for (addr, text) in [(at + 0x1000, qualname), (at + 0x2000, file)] {
            mem.put(addr, &[0; 0x100]);
            mem.put_u64(addr + l.pyobject.ob_type, STR_TYPE);
            mem.put_u64(addr + u.length, text.len() as u64);
            let state = (1u32 << 2) | (1 << 5) | (1 << 6); // 1-byte kind, compact, ascii
            mem.put(addr + u.state, &state.to_le_bytes());
            mem.put(addr + u.asciiobject_size, text.as_bytes());
        }
        let empty = at + 0x3000;
        mem.put(empty, &[0; 0x40]);
        let co = &l.code_object;
        mem.put(at, &[0; 0x200]);
        mem.put_u64(at + l.pyobject.ob_type, CODE_TYPE);
        for off in [co.name, co.qualname.unwrap()] {
            mem.put_u64(at + off, at + 0x1000);
        }
        mem.put_u64(at + co.filename, at + 0x2000);
        mem.put(at + co.firstlineno, &line.to_le_bytes());
        mem.put_u64(at + co.linetable, empty);
        if let crate::cpython::layout::CodeLocals::LocalsPlus {
            localsplusnames,
            localspluskinds,
        } = co.locals
        {
            mem.put_u64(at + localsplusnames, empty);
            mem.put_u64(at + localspluskinds, empty);
        }
    }

    /// The map of `mem` as it is now, with `l` as the stop's layout and `_PyRuntime` in a
    /// mapped libpython.
    fn build(mem: &FakeMemory, l: Layout, jit_entry: Option<u64>) -> JitMap {
        build_for(Arch::X86_64, mem, l, jit_entry)
    }

    fn build_for(arch: Arch, mem: &FakeMemory, l: Layout, jit_entry: Option<u64>) -> JitMap {
        let found = Found {
            module: Module {
                path: "/usr/lib/libpython3.so".into(),
                start: RT,
                end: RT + 0x1000,
                base: RT,
            },
            runtime: RT,
            layout: l,
            found_by: "test".into(),
            arch,
            jit_entry,
        };
        JitMap::build(&Snapshot::new(Arc::new(mem.clone()), &found), jit_entry)
    }

    fn executor(mem: &mut FakeMemory, t: &Table, e: u64, next: u64, jit: u64, size: u64, co: u64) {
        // The whole object is mapped (the map reads it in one piece).
        mem.put(e, &[0; 0x80]);
        mem.put_u64(e + t.links_next, next);
        mem.put_u64(e + t.jit_code, jit);
        mem.put_u64(e + t.jit_size, size);
        mem.put_u64(e + t.vm_code, co);
    }

    fn regs(pc: u64, sp: u64, bp: u64) -> Regs {
        Regs { pc, sp, bp }
    }

    /// A 3.14 target (release build) and the offset of its executor list head.
    fn target_314(mem: &mut FakeMemory) -> (Table, Layout, u64) {
        let t = X86_64_TABLES[0];
        let l = runtime(mem, &t, 0x030e0af0);
        let ExecutorRoots::List { head } = t.roots else {
            unreachable!()
        };
        (t, l, head)
    }

    /// A 3.15 target of `t`'s build whose executor array (at 0x50_0000) holds `execs` and whose
    /// cold exits are `cold_execs` (0: none), with an empty deletion list.
    fn target_315(mem: &mut FakeMemory, t: &Table, execs: &[u64], cold_execs: [u64; 2]) -> Layout {
        let l = runtime(mem, t, 0x030f02f0);
        let ExecutorRoots::Array { ptrs, count, cold } = t.roots else {
            unreachable!()
        };
        mem.put_u64(INTERP + ptrs, 0x50_0000);
        mem.put_u64(INTERP + count, execs.len() as u64);
        for (i, e) in execs.iter().enumerate() {
            mem.put_u64(0x50_0000 + 8 * i as u64, *e);
        }
        for (c, e) in cold.into_iter().zip(cold_execs) {
            mem.put_u64(INTERP + c, e);
        }
        mem.put_u64(INTERP + t.deletion_head, 0);
        l
    }

    const SHIM_314: &[u8] = &[
        0x41, 0x57, 0x41, 0x56, 0x41, 0x55, 0x41, 0x54, 0x53, 0x49, 0x89, 0xfc, 0x49, 0x89, 0xf5,
        0x49, 0x89, 0xd6, 0xe8, 0x0a, 0x00, 0x00, 0x00, 0x5b, 0x41, 0x5c, 0x41, 0x5d, 0x41, 0x5e,
        0x41, 0x5f, 0xc3,
    ];

    /// 3.14: two executors on the list, one on the deletion list, one a side exit; a stack
    /// with the shim's frame found by scanning.
    #[test]
    fn map_and_unwind_314() {
        let mut mem = FakeMemory::new();
        let (t, l, head) = target_314(&mut mem);
        mem.put_u64(INTERP + head, 0x30_0000);
        executor(
            &mut mem,
            &t,
            0x30_0000,
            0x30_1000,
            0x7000_0000,
            0x1000,
            0x40_0000,
        );
        executor(&mut mem, &t, 0x30_1000, 0, 0x7000_2000, 0x2000, 0);
        mem.put_u64(INTERP + t.deletion_head, 0x30_2000);
        executor(&mut mem, &t, 0x30_2000, 0, 0x7000_8000, 0x1000, 0x40_0000);
        code(&mut mem, &l, 0x40_0000, "Outer.leaf", "/x/jit.py", 12);
        mem.put(0x7000_0000, SHIM_314);
        mem.put(0x7000_0000 + SHIM_314.len() as u64, &[0x90; 80]);
        let map = build(&mem, l, None);
        assert_eq!(map.errors, Vec::<String>::new());
        assert_eq!(map.regions().len(), 3);
        assert_eq!(
            map.lookup(0x7000_0fff).unwrap().label,
            "[jit] Outer.leaf (/x/jit.py:12)"
        );
        assert_eq!(map.lookup(0x7000_2010).unwrap().label, "[jit] side exit");
        assert!(map.lookup(0x7000_1000).is_none());
        assert!(map.lookup(0x6fff_ffff).is_none());
        assert!(map.lookup(0x7000_8000).is_some());

        // Stack: JIT frame at sp; junk; the shim's RA slot at sp+0x40 (returns into the
        // second executor's shim copy), its five saves above, then the eval loop's RA.
        let sp = 0x7ffd_0000u64;
        for i in 0..64 {
            mem.put_u64(sp + 8 * i, 0x1111);
        }
        let slot = sp + 0x40;
        mem.put_u64(slot, 0x7000_2017);
        for (i, v) in [0xb0b, 0xc12, 0xc13, 0xc14, 0xc15].iter().enumerate() {
            mem.put_u64(slot + 8 + 8 * i as u64, *v); // rbx, r12, r13, r14, r15
        }
        mem.put_u64(slot + 48, 0x44_c3cf);
        let u = map.unwind(&mem, regs(0x7000_2100, sp, 0xbbbb)).unwrap();
        assert_eq!(u.caller_pc(), 0x44_c3cf);
        assert_eq!(u.get("rsp"), Some(slot + 56));
        assert_eq!(u.get("rbx"), Some(0xb0b));
        assert_eq!(u.get("r12"), Some(0xc12));
        assert_eq!(u.get("r15"), Some(0xc15));
        assert_eq!(u.get("rbp"), Some(0xbbbb));
        assert_eq!((u.frame_sp, u.frame_pc), (slot + 8, 0x7000_2000));
        // A stencil that pushed the eval loop's %rbp below the shim's slot and uses %rbp for
        // itself: the saved one is given back.
        mem.put_u64(slot - 8, slot + 0x200);
        let u = map
            .unwind(&mem, regs(0x7000_2100, sp, 0x7f00_1234_5678))
            .unwrap();
        assert_eq!(u.get("rbp"), Some(slot + 0x200));
        // A PC inside the shim's prologue is not claimed; nor is a stack without a shim.
        assert!(map.unwind(&mem, regs(0x7000_0004, sp, 0)).is_none());
        assert!(map.unwind(&mem, regs(0x7000_0100, slot + 8, 0)).is_none());
        // Non-JIT PCs are never claimed.
        assert!(map.unwind(&mem, regs(0x44_c3cf, sp, 0)).is_none());
    }

    /// 3.15: executors from the pointer array and cold exits; the shim found through %rbp.
    #[test]
    fn map_and_unwind_315() {
        let t = X86_64_TABLES[2];
        let mut mem = FakeMemory::new();
        let l = target_315(&mut mem, &t, &[0x30_0000, 0x30_1000], [0x30_2000, 0]);
        executor(&mut mem, &t, 0x30_0000, 0, 0x7000_0000, 0x1000, 0x40_0000);
        executor(&mut mem, &t, 0x30_1000, 0, 0x7000_1000, 0x1000, 0x40_0000);
        executor(&mut mem, &t, 0x30_2000, 0, 0x7000_3000, 0x1000, 0);
        code(&mut mem, &l, 0x40_0000, "spin", "/x/s.py", 3);
        let entry = 0x87_f384u64;
        mem.put(
            entry,
            &[
                0x55, 0x48, 0x89, 0xe5, 0x41, 0x57, 0x41, 0x56, 0x41, 0x55, 0x41, 0x54, 0x53, 0x50,
                0x49, 0x89, 0xfc, 0x49, 0x89, 0xf5, 0x49, 0x89, 0xd6, 0x49, 0x89, 0xcf, 0x31, 0xff,
                0x31, 0xf6, 0x31, 0xd2, 0x41, 0xff, 0x54, 0x24, 0x58, 0x48, 0x83, 0xc4, 0x08, 0x5b,
                0x41, 0x5c, 0x41, 0x5d, 0x41, 0x5e, 0x41, 0x5f, 0x5d, 0xc3,
            ],
        );
        mem.put(entry + 54, &[0xcc; 64]);
        let map = build(&mem, l, Some(entry));
        assert_eq!(map.errors, Vec::<String>::new());
        assert_eq!(map.regions().len(), 3);
        let bp = 0x7ffd_1000u64;
        let sp = bp - 0x100;
        mem.put_u64(bp, 0x7ffd_2000); // caller's rbp
        mem.put_u64(bp + 8, 0x44_c3cf); // eval loop RA
        for (i, v) in [0xc15u64, 0xc14, 0xc13, 0xc12, 0xb0b, 0].iter().enumerate() {
            mem.put_u64(bp - 8 - 8 * i as u64, *v); // r15, r14, r13, r12, rbx, rax
        }
        mem.put_u64(bp - 56, entry + 37);
        let u = map.unwind(&mem, regs(0x7000_3010, sp, bp)).unwrap();
        assert_eq!(u.caller_pc(), 0x44_c3cf);
        assert_eq!(u.get("rsp"), Some(bp + 16));
        assert_eq!(u.get("rbp"), Some(0x7ffd_2000));
        assert_eq!(u.get("rbx"), Some(0xb0b));
        assert_eq!(u.get("r15"), Some(0xc15));
        assert_eq!(u.get("rax"), None);
        assert_eq!(u.label, "[jit] side exit");
        // A clobbered %rbp: no frame-pointer hit, and the scan finds the slot instead.
        for i in 0..(0x100 - 56) / 8 {
            mem.put_u64(sp + 8 * i, 0x2222);
        }
        let u2 = map.unwind(&mem, regs(0x7000_0010, sp, 0x1234)).unwrap();
        assert_eq!(u2.get("rsp"), Some(bp + 16));
    }

    #[test]
    fn trampolines_and_corrupt_lists() {
        let mut mem = FakeMemory::new();
        let (t, l, head) = target_314(&mut mem);
        // An executor list that loops, and a deletion list that is unreadable.
        mem.put_u64(INTERP + head, 0x30_0000);
        executor(&mut mem, &t, 0x30_0000, 0x30_0000, 0x7000_0000, 0x1000, 0);
        mem.put_u64(INTERP + t.deletion_head, 0x99_0000);
        // One arena, two trampoline copies at a 32-byte stride.
        let arena = 0x60_0000u64;
        mem.put_u64(RT + t.perf_code_arena, arena);
        for (i, v) in [0x7100_0000u64, 0x7100_0040, 0x1_0000, 0, 12, 0]
            .iter()
            .enumerate()
        {
            mem.put_u64(arena + 8 * i as u64, *v);
        }
        let tramp = [
            0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5, 0xff, 0xd1, 0x5d, 0xc3,
        ];
        mem.put(0x7100_0000, &tramp);
        mem.put(0x7100_000c, &[0; 20]);
        mem.put(0x7100_0020, &tramp);
        mem.put(0x7100_002c, &[0; 20]);
        let map = build(&mem, l, None);
        let errors = map.errors.join("\n");
        assert!(errors.contains("loops"), "{errors}");
        assert!(
            errors.contains("executor 0x990000: memory not available"),
            "{errors}"
        );
        assert!(
            errors.contains("shim at 0x70000000 is unreadable"),
            "{errors}"
        );
        assert_eq!(map.regions().len(), 2);
        let sp = 0x7ffd_0000u64;
        mem.put_u64(sp, 0x7ffd_0100); // saved rbp
        mem.put_u64(sp + 8, 0x5c_df4d); // RA into _PyEval_Vector
        let u = map.unwind(&mem, regs(0x7100_002a, sp, 0)).unwrap();
        assert_eq!(
            (u.caller_pc(), u.get("rsp"), u.get("rbp")),
            (0x5c_df4d, Some(sp + 16), Some(0x7ffd_0100))
        );
        assert_eq!(
            (u.frame_pc, u.frame_sp, u.kind),
            (0x7100_0020, sp + 16, "trampoline")
        );
        // At the first instruction nothing is pushed yet.
        mem.put_u64(sp, 0x5c_df4d);
        let u = map.unwind(&mem, regs(0x7100_0000, sp, 7)).unwrap();
        assert_eq!(
            (u.caller_pc(), u.get("rsp"), u.get("rbp")),
            (0x5c_df4d, Some(sp + 8), Some(7))
        );
        // Between copies (padding) is not code we know.
        assert!(map.unwind(&mem, regs(0x7100_0010, sp, 0)).is_none());
    }

    #[test]
    fn unknown_layouts_give_an_error_not_a_map() {
        let mut mem = FakeMemory::new();
        let mut t = X86_64_TABLES[0];
        t.interp_size += 8;
        let l = runtime(&mut mem, &t, 0x030e0af0);
        let map = build(&mem, l.clone(), None);
        assert!(map.regions().is_empty());
        assert!(map.errors[0].contains("no JIT layout"), "{:?}", map.errors);
        let map = build(&FakeMemory::new(), l, None);
        assert!(
            map.errors[0].contains("_Py_DebugOffsets"),
            "{:?}",
            map.errors
        );
        // The sizes of a 3.14 build, but the stop's layout is 3.15's.
        let mut mem = FakeMemory::new();
        runtime(&mut mem, &X86_64_TABLES[0], 0x030e0af0);
        let l = Layout::builtin(Version::new(3, 15, 2)).unwrap();
        let map = build(&mem, l, None);
        assert!(
            map.errors[0].contains("no JIT layout for 3.15"),
            "{:?}",
            map.errors
        );
    }

    /// Writes the arm64 shim's frame with its record at `fp`: the eval loop's x29 (0x7ffd_2000)
    /// and signed return address, and x19..x28 (0x1000 + n) where the 3.14/3.15 shims save
    /// them.
    fn a64_shim_frame(mem: &mut FakeMemory, fp: u64) {
        let cfa = fp + 96;
        mem.put(cfa - 160, &[0; 160]);
        mem.put_u64(fp, 0x7ffd_2000);
        mem.put_u64(fp + 8, 0x0024_0000_0044_c3cf);
        for r in 19..=28u64 {
            mem.put_u64(cfa - 8 * (r - 18), 0x1000 + r);
        }
    }

    fn check_a64_caller(u: &Unwound, fp: u64) {
        assert_eq!(u.caller_pc(), 0x44_c3cf);
        assert_eq!(u.get("sp"), Some(fp + 96));
        assert_eq!(u.get("x29"), Some(0x7ffd_2000));
        for (i, r) in A64_CALLEE_SAVED.iter().enumerate() {
            assert_eq!(u.get(r), Some(0x1000 + 19 + i as u64), "{r}");
        }
        assert_eq!((u.frame_sp, u.kind), (fp - 64, "jit"));
    }

    /// arm64 3.14: the table is chosen by architecture; a JIT frame is unwound through the
    /// shim's record at x29, or through a stencil's record whose x30 is the shim's return.
    #[test]
    fn map_and_unwind_arm64_314() {
        let t = AARCH64_TABLES[0];
        let mut mem = FakeMemory::new();
        let l = runtime(&mut mem, &t, 0x030e0af0);
        let ExecutorRoots::List { head } = t.roots else {
            unreachable!()
        };
        // The x86-64 sizes do not match an arm64 build, nor the arm64 ones an x86-64 one.
        let x86 = build(&mem, l.clone(), None);
        assert!(
            x86.errors[0].contains("no JIT layout for 3.14 (x86_64)"),
            "{:?}",
            x86.errors
        );
        mem.put_u64(INTERP + head, 0x30_0000);
        mem.put_u64(INTERP + t.deletion_head, 0);
        executor(
            &mut mem,
            &t,
            0x30_0000,
            0x30_1000,
            0x7000_0000,
            0x1000,
            0x40_0000,
        );
        executor(&mut mem, &t, 0x30_1000, 0, 0x7000_2000, 0x1000, 0x40_0000);
        code(&mut mem, &l, 0x40_0000, "spin", "/x/s.py", 7);
        for at in [0x7000_0000, 0x7000_2000] {
            mem.put(at, &words(&A64_SHIM_314));
            mem.put(at + 0x68, &[0; 0x100]);
        }
        let map = build_for(Arch::Aarch64, &mem, l, None);
        assert_eq!(map.errors, Vec::<String>::new());
        assert_eq!(map.source, "DWARF of Debian python3.14 3.14.10-1 arm64");
        assert_eq!(
            map.lookup(0x7000_0100).unwrap().label,
            "[jit] spin (/x/s.py:7)"
        );

        let fp = 0x7ffd_1000u64;
        a64_shim_frame(&mut mem, fp);
        let sp = fp - 0x200;
        // A stencil with no record of its own: x29 is the shim's.
        let u = map.unwind(&mem, regs(0x7000_0100, sp, fp)).unwrap();
        check_a64_caller(&u, fp);
        assert_eq!(u.frame_pc, 0x7000_0000);
        // A stencil that pushed a record (the shim's x29, x30 = the return into the other
        // executor's shim copy) and calls C.
        let rec = fp - 0x50;
        mem.put_u64(rec, fp);
        mem.put_u64(rec + 8, 0x7000_203c);
        let u = map.unwind(&mem, regs(0x7000_2104, rec, rec)).unwrap();
        check_a64_caller(&u, fp);
        assert_eq!(u.frame_pc, 0x7000_2000);
        // The shim's own return address (a caller that stopped there) is its frame too.
        check_a64_caller(
            &map.unwind(&mem, regs(0x7000_003c, fp - 64, fp)).unwrap(),
            fp,
        );
        // In the shim's prologue or epilogue, or with an x29 below sp: not claimed.
        assert!(map.unwind(&mem, regs(0x7000_0010, sp, fp)).is_none());
        assert!(map.unwind(&mem, regs(0x7000_0060, sp, fp)).is_none());
        assert!(map.unwind(&mem, regs(0x7000_0100, fp + 8, fp)).is_none());
        // Not JIT code.
        assert!(map.unwind(&mem, regs(0x44_c3cf, sp, fp)).is_none());
    }

    /// arm64 3.15: the shim is `_PyJIT_Entry`; JIT code keeps its x29.
    #[test]
    fn map_and_unwind_arm64_315() {
        let t = AARCH64_TABLES[2];
        let mut mem = FakeMemory::new();
        let l = target_315(&mut mem, &t, &[0x30_0000], [0, 0]);
        executor(&mut mem, &t, 0x30_0000, 0, 0x7000_0000, 0x1000, 0);
        let entry = 0x85_d69cu64;
        mem.put(entry, &words(&A64_ENTRY_315));
        mem.put(entry + 0x7c, &[0; 0x100]);
        let map = build_for(Arch::Aarch64, &mem, l, Some(entry));
        assert_eq!(map.errors, Vec::<String>::new());
        let fp = 0x7ffd_1000u64;
        a64_shim_frame(&mut mem, fp);
        let u = map.unwind(&mem, regs(0x7000_0058, fp - 0x70, fp)).unwrap();
        check_a64_caller(&u, fp);
        assert_eq!(u.label, "[jit] side exit");
    }
}
