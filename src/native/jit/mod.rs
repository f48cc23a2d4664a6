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
//! `_PyRuntime`; [`crate::session::jit`] builds it once per stop:
//!
//! ```no_run
//! # use pyunwind::native::jit::Regs;
//! # fn f(target: pyunwind::target::Target) -> pyunwind::Result<()> {
//! let session = pyunwind::session::Session::open(target)?;
//! let map = pyunwind::session::jit::map(&session);
//! if let Some(u) = map.unwind(&*session.snap.mem, Regs { pc: 0x7f00_0000_1234, sp: 0x7ffd_0000, bp: 0 }) {
//!     println!("caller pc {:#x}", u.caller_pc());
//! }
//! # Ok(()) }
//! ```

use std::collections::HashSet;

pub use crate::arch::jit::Regs;
use crate::arch::jit::MAX_SHIM_BYTES;
use crate::cpython::debug_offsets::DebugOffsets;
use crate::cpython::Snapshot;
use crate::error::ReadError;
use crate::memory::Memory;
pub use crate::unwind::jit::{JitMap, Region, RegionKind, Unwound};

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
mod tests;
