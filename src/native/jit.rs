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
//! the shim saved: the caller is the eval loop, with its callee-saved registers. The shim's
//! return-address slot is at a fixed place below `%rbp` when the shim keeps a frame pointer and
//! JIT code leaves `%rbp` alone (3.15, `-mframe-pointer=reserved`); otherwise (3.14) the stack
//! is scanned upward from the JIT frame's `%rsp` for a value equal to a shim return address.
//! On arm64 the shim keeps a frame record (x29, x30) inside its frame and JIT code keeps x29:
//! x29 is the shim's record or a stencil's record just below it, and the shim's decoded
//! prologue gives its CFA and saved registers. arm64 perf trampolines are plain frame records
//! at the bottom of their frames, left to the native unwinder's frame-pointer step.
//!
//! The offsets of the interpreter's lists come from per-build tables (x86-64 and arm64 builds of
//! Debian sid's python3.14 and python3.15, release and pydebug), chosen by the target's
//! architecture and the struct sizes in its `_Py_DebugOffsets`.
//!
//! ```no_run
//! # use pyunwind::native::jit::{JitMap, Regs};
//! # fn f(target: &pyunwind::target::Target) -> pyunwind::Result<()> {
//! let map = JitMap::discover(target)?;
//! if let Some(u) = map.unwind(&*target.mem, Regs { pc: 0x7f00_0000_1234, sp: 0x7ffd_0000, bp: 0 }) {
//!     println!("caller pc {:#x}", u.caller_pc());
//! }
//! # Ok(()) }
//! ```

use std::collections::HashSet;

use serde::Serialize;

use super::x86::{
    decode_shim, decode_trampoline, Reg, ShimFrame, TrampolineTemplate, MAX_SHIM_BYTES,
};
use crate::arch::Arch;
use crate::binary::{ElfInfo, Module};
use crate::cpython::debug_offsets::DebugOffsets;
use crate::cpython::discovery::{choose_layout, find_python, Found};
use crate::cpython::objects::field;
use crate::cpython::{Snapshot, Version};
use crate::error::{Error, ReadError, Result};
use crate::memory::Memory;
use crate::target::Target;

/// Executors taken from one interpreter's lists; CPython keeps a few hundred at most.
pub const MAX_EXECUTORS: usize = 100_000;
/// Perf trampoline arenas (64 KiB each) followed through `prev`.
pub const MAX_ARENAS: usize = 16_384;
/// One executor's code mapping; real ones are a few pages.
pub const MAX_JIT_SIZE_BYTES: u64 = 16 << 20;
/// How far above a JIT frame's %rsp the shim's return address is searched for (3.14).
pub const MAX_SCAN_BYTES: u64 = 64 << 10;
/// A trampoline copy; the real ones are 12 bytes.
pub const MAX_TRAMPOLINE_BYTES: u64 = 64;

/// Where the executor lists are, per interpreter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecutorRoots {
    /// 3.14: a list through `vm_data.links.next`.
    List { head: u64 },
    /// 3.15: an array of pointers and its length, plus the two shared cold-exit executors.
    Array {
        ptrs: u64,
        count: u64,
        cold: [u64; 2],
    },
}

/// Per-build offsets the target's `_Py_DebugOffsets` do not carry. A table is chosen only when
/// the target's architecture, the layout's minor version and the sizes `_Py_DebugOffsets` gives
/// for `_PyRuntimeState` and `PyInterpreterState` all match, so a build with another layout gets
/// no JIT map rather than a wrong one.
/// Its fields are public for the DWARF check (tests/layout_dwarf.rs) only.
#[derive(Clone, Copy, Debug)]
pub struct Table {
    pub source: &'static str,
    /// The architecture the build is for: struct sizes alone do not tell an x86-64 build from
    /// an arm64 one.
    pub arch: Arch,
    pub minor: u8,
    pub runtime_size: u64,
    pub interp_size: u64,
    pub roots: ExecutorRoots,
    pub deletion_head: u64,
    /// `_PyRuntime.ceval.perf.code_arena`.
    pub perf_code_arena: u64,
    /// `_PyExecutorObject` fields.
    pub links_next: u64,
    pub vm_code: u64,
    pub jit_size: u64,
    pub jit_code: u64,
}

/// The x86-64 tables, which the DWARF check (tests/layout_dwarf.rs) compares with the DWARF of
/// the x86-64 Debian sid builds it unpacks. The arm64 ones ([`tables_for`]) were checked by
/// hand: their debug packages are not in the test roots.
pub fn builtin_tables() -> &'static [Table] {
    X86_64_TABLES
}

/// The built-in tables of the builds for `arch`.
pub fn tables_for(arch: Arch) -> &'static [Table] {
    match arch {
        Arch::X86_64 => X86_64_TABLES,
        Arch::Aarch64 => AARCH64_TABLES,
    }
}

/// `_PyExecutorObject` of 3.14: vm_data at 32 (links.next at +40, code at +56), jit_size 104,
/// jit_code 112 (DWARF of Debian python3.14 3.14.10-1 and python3.14-dbg, the same in both).
/// The same on arm64 (the arm64 python3.14-dbg 3.14.10-1: python3.14d and the detached debug
/// info of python3.14).
const EXEC_314: (u64, u64, u64, u64) = (0x48, 0x58, 0x68, 0x70);
/// `_PyExecutorObject` of 3.15: vm_data at 32 (links.next at +16, code at +32), jit_size 80,
/// jit_code 88 (DWARF of Debian python3.15 3.15.2-1 and python3.15-dbg, x86-64 and arm64).
const EXEC_315: (u64, u64, u64, u64) = (0x30, 0x40, 0x50, 0x58);

const fn table(
    source: &'static str,
    (arch, minor): (Arch, u8),
    sizes: (u64, u64),
    roots: ExecutorRoots,
    deletion_head: u64,
    perf_code_arena: u64,
    exec: (u64, u64, u64, u64),
) -> Table {
    Table {
        source,
        arch,
        minor,
        runtime_size: sizes.0,
        interp_size: sizes.1,
        roots,
        deletion_head,
        perf_code_arena,
        links_next: exec.0,
        vm_code: exec.1,
        jit_size: exec.2,
        jit_code: exec.3,
    }
}

/// Offsets read with `ptype /o` from the DWARF of each build (interpreter fields from
/// `struct _is`, `perf.code_arena` from `_PyRuntimeState`).
const X86_64_TABLES: &[Table] = &[
    table(
        "DWARF of Debian python3.14 3.14.10-1",
        (Arch::X86_64, 14),
        (316_616, 225_864),
        ExecutorRoots::List { head: 223_192 },
        223_200,
        0xac8,
        EXEC_314,
    ),
    table(
        "DWARF of Debian python3.14d 3.14.10-1 (pydebug)",
        (Arch::X86_64, 14),
        (332_632, 225_880),
        ExecutorRoots::List { head: 0x367e8 },
        0x367f0,
        0x4940,
        EXEC_314,
    ),
    table(
        "DWARF of Debian python3.15 3.15.2-1",
        (Arch::X86_64, 15),
        (346_568, 226_240),
        ExecutorRoots::Array {
            ptrs: 0x368d0,
            count: 0x368d8,
            cold: [0x368f0, 0x368f8],
        },
        0x368e8,
        0xb40,
        EXEC_315,
    ),
    table(
        "DWARF of Debian python3.15d 3.15.2-1 (pydebug)",
        (Arch::X86_64, 15),
        (362_592, 226_256),
        ExecutorRoots::Array {
            ptrs: 0x368e0,
            count: 0x368e8,
            cold: [0x36900, 0x36908],
        },
        0x368f8,
        0x49c0,
        EXEC_315,
    ),
];

/// The arm64 builds of the same Debian packages, read the same way from the arm64
/// python3.14-dbg and python3.15-dbg (the detached debug info of python3.14/python3.15 and the
/// pydebug executables python3.14d/python3.15d). Both structs are 16 bytes larger than on
/// x86-64 (glibc's arm64 `pthread_mutex_t` is 48 bytes, not 40: `struct _is`'s
/// `_gil_runtime_state` is 224 bytes, not 208), so every `struct _is` field the map reads sits
/// 16 bytes further; the `_PyExecutorObject` and `code_arena_st` fields and
/// `ceval.perf.code_arena` do not move.
const AARCH64_TABLES: &[Table] = &[
    table(
        "DWARF of Debian python3.14 3.14.10-1 arm64",
        (Arch::Aarch64, 14),
        (316_632, 225_880),
        ExecutorRoots::List { head: 0x367e8 },
        0x367f0,
        0xac8,
        EXEC_314,
    ),
    table(
        "DWARF of Debian python3.14d 3.14.10-1 arm64 (pydebug)",
        (Arch::Aarch64, 14),
        (332_648, 225_896),
        ExecutorRoots::List { head: 0x367f8 },
        0x36800,
        0x4940,
        EXEC_314,
    ),
    table(
        "DWARF of Debian python3.15 3.15.2-1 arm64",
        (Arch::Aarch64, 15),
        (346_584, 226_256),
        ExecutorRoots::Array {
            ptrs: 0x368e0,
            count: 0x368e8,
            cold: [0x36900, 0x36908],
        },
        0x368f8,
        0xb40,
        EXEC_315,
    ),
    table(
        "DWARF of Debian python3.15d 3.15.2-1 arm64 (pydebug)",
        (Arch::Aarch64, 15),
        (362_608, 226_272),
        ExecutorRoots::Array {
            ptrs: 0x368f0,
            count: 0x368f8,
            cold: [0x36910, 0x36918],
        },
        0x36908,
        0x49c0,
        EXEC_315,
    ),
];

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

/// The registers an unwind starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Regs {
    pub pc: u64,
    pub sp: u64,
    pub bp: u64,
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
    frame: Option<ShimFrame>,
    /// The arm64 shim's frame (then `frame` is None).
    a64: Option<A64Shim>,
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
    trampoline: Option<TrampolineTemplate>,
    /// Problems met while building (unreadable lists, unknown shim): the map is partial.
    pub errors: Vec<String>,
    /// Which table and strategy was used.
    pub source: String,
    arch: Arch,
}

/// What a frontend keeps between stops of one target, so that a stop reads no ELF symbols:
/// where `_PyRuntime` is, its minor version (the layout is chosen again from it and the
/// target's `_Py_DebugOffsets`, as discovery does) and `_PyJIT_Entry`.
#[derive(Clone, Copy, Debug)]
pub struct JitInputs {
    /// Address of `_PyRuntime`.
    pub runtime: u64,
    /// 3.<minor>.
    pub minor: u8,
    /// Address of `_PyJIT_Entry` (3.15 exports it), if the binary has it.
    pub jit_entry: Option<u64>,
}

impl JitInputs {
    /// CPython as every command finds it ([`find_python`]), plus `_PyJIT_Entry`.
    pub fn find(target: &Target) -> Result<(JitInputs, Snapshot)> {
        let found = find_python(target)?;
        let inputs = JitInputs {
            runtime: found.runtime,
            minor: found.layout.version.minor,
            jit_entry: jit_entry(target, found.runtime),
        };
        Ok((inputs, Snapshot::new(target.mem.clone(), &found)))
    }

    /// The snapshot of a later stop: the layout chosen again for `_PyRuntime` at `runtime`.
    pub fn snapshot(&self, target: &Target) -> Result<Snapshot> {
        let module = module_at(target, self.runtime).ok_or_else(|| {
            Error::NoPython(format!(
                "no mapped file holds _PyRuntime at {:#x}",
                self.runtime
            ))
        })?;
        let layout = choose_layout(target, self.runtime, Version::new(3, self.minor, 0))?;
        let found = Found {
            found_by: format!("_PyRuntime of an earlier stop; layout {}", layout.source),
            module,
            runtime: self.runtime,
            layout,
            arch: target.arch,
        };
        Ok(Snapshot::new(target.mem.clone(), &found))
    }
}

/// The loaded file whose mappings hold `addr`.
fn module_at(target: &Target, addr: u64) -> Option<Module> {
    target
        .modules()
        .into_iter()
        .find(|m| m.start <= addr && addr < m.end)
}

/// `_PyJIT_Entry` (3.15 exports it), from the ELF symbols of the file that holds `_PyRuntime`
/// at `runtime`.
pub fn jit_entry(target: &Target, runtime: u64) -> Option<u64> {
    let module = module_at(target, runtime)?;
    let info = ElfInfo::load(&target.real_path(&module.path).ok()?, &["_PyJIT_Entry"]).ok()?;
    let bias = module.base.wrapping_sub(info.first_vaddr);
    info.symbols
        .get("_PyJIT_Entry")
        .map(|a| bias.wrapping_add(*a))
}

impl JitMap {
    /// Finds CPython in the target as every command does and builds the map.
    pub fn discover(target: &Target) -> Result<JitMap> {
        let (inputs, snap) = JitInputs::find(target)?;
        Ok(JitMap::build(&snap, inputs.jit_entry))
    }

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
                if self.arch == Arch::X86_64
                    && self.trampoline.is_none()
                    && code_size > 0
                    && code_size <= MAX_TRAMPOLINE_BYTES
                {
                    match mem.read_vec(start, code_size, MAX_TRAMPOLINE_BYTES) {
                        Ok(b) => {
                            self.trampoline = decode_trampoline(&b);
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
        let mut buf = [0u8; MAX_A64_SHIM_BYTES];
        let lens: [usize; 3] = match self.arch {
            Arch::X86_64 => [MAX_SHIM_BYTES, 48, 32],
            Arch::Aarch64 => [MAX_A64_SHIM_BYTES, 128, 64],
        };
        // The shim may sit at the end of a readable range; read what we can.
        let Some(len) = lens
            .into_iter()
            .find(|&len| mem.read_into(bytes_at, &mut buf[..len]).is_ok())
        else {
            return self
                .errors
                .push(format!("JIT entry shim at {bytes_at:#x} is unreadable"));
        };
        let code = &buf[..len];
        // Its return offset and where a copy of it ends.
        let (x86, a64, return_offset, end) = match self.arch {
            Arch::X86_64 => match decode_shim(code) {
                Some(f) => {
                    let end = shim_tail_end(code, f.return_offset as usize);
                    let ret = f.return_offset;
                    (Some(f), None, ret, end)
                }
                None => (None, None, 0, None),
            },
            Arch::Aarch64 => match decode_a64_shim(code) {
                Some(s) => {
                    let (ret, end) = (s.return_offset, s.end);
                    (None, Some(s), ret, end)
                }
                None => (None, None, 0, None),
            },
        };
        if x86.is_none() && a64.is_none() {
            return self.errors.push(format!(
                "JIT entry shim at {bytes_at:#x}: unknown instructions"
            ));
        }
        self.shims.returns = if per_executor {
            executors
                .iter()
                .filter_map(|s| s.checked_add(return_offset))
                .collect()
        } else {
            bytes_at.checked_add(return_offset).into_iter().collect()
        };
        if per_executor {
            match end {
                Some(end) => self.shims.copy_len = end,
                None => {
                    return self
                        .errors
                        .push(format!("JIT entry shim at {bytes_at:#x}: unknown epilogue"))
                }
            }
        }
        self.shims.frame = x86;
        self.shims.a64 = a64;
    }

    /// The caller of the frame at `regs`, when its PC is JIT or trampoline code and the frame
    /// can be unwound; None otherwise (the debugger's own unwinder then has the frame).
    ///
    /// On arm64 `regs.bp` is x29 and the caller's registers are named `pc`, `sp`, `x29` and
    /// `x19`..`x28`; a trampoline frame (a frame record at the bottom of a 16-byte frame) is
    /// left to the frame-pointer step.
    pub fn unwind(&self, mem: &dyn Memory, regs: Regs) -> Option<Unwound> {
        let region = self.lookup(regs.pc)?;
        match (region.kind.clone(), self.arch) {
            (RegionKind::Executor { .. }, Arch::Aarch64) => self.unwind_jit_a64(mem, region, regs),
            (RegionKind::Trampolines { .. }, Arch::Aarch64) => None,
            (RegionKind::Executor { .. }, Arch::X86_64) => self.unwind_jit(mem, region, regs),
            (RegionKind::Trampolines { .. }, Arch::X86_64) => {
                self.unwind_trampoline(mem, region, regs)
            }
        }
    }

    /// arm64 JIT code runs on the shim's stack frame, and x29 is either the shim's frame
    /// record or (3.14, in a stencil that calls C) the stencil's own record, pushed just below
    /// the shim's frame with the shim's x29 and a stale x30: the shim's return address. Either
    /// way the shim's record gives the eval loop's pc and x29, and the shim's prologue the
    /// caller's stack pointer (its CFA) and callee-saved registers: the JIT frame's caller is
    /// the eval loop, the shim folded into it as on x86-64. Following the record alone would
    /// give the caller the stack pointer just above the record, 80 bytes short of its own.
    fn unwind_jit_a64(&self, mem: &dyn Memory, region: &Region, regs: Regs) -> Option<Unwound> {
        let shim = self.shims.a64.as_ref()?;
        let off = regs.pc.wrapping_sub(region.start);
        if off < self.shims.copy_len && off != shim.return_offset {
            // Inside the 3.14 shim copy's prologue or epilogue: its frame is half built.
            return None;
        }
        let plausible = |fp: u64| fp % 8 == 0 && fp >= regs.sp && fp - regs.sp < MAX_SCAN_BYTES;
        let code = |a: u64| Arch::Aarch64.code_address(a);
        let mut fp = regs.bp;
        if !plausible(fp) {
            return None;
        }
        let ra = code(mem.read_ptr(fp.checked_add(8)?).ok()?);
        if self.shims.returns.contains(&ra) {
            let shim_fp = mem.read_ptr(fp).ok()?;
            if shim_fp <= fp || !plausible(shim_fp) {
                return None;
            }
            fp = shim_fp;
        }
        let cfa = fp.checked_add_signed(-shim.fp_off)?;
        let pc = code(mem.read_ptr(fp.checked_add(8)?).ok()?);
        if pc == 0 || self.lookup(pc).is_some() {
            return None;
        }
        let mut caller = vec![("pc", pc), ("sp", cfa), ("x29", mem.read_ptr(fp).ok()?)];
        for &(r, at) in &shim.saved {
            if let Some(name) = A64_CALLEE_SAVED.get(usize::from(r).wrapping_sub(19)) {
                caller.push((name, mem.read_ptr(cfa.checked_add_signed(at)?).ok()?));
            }
        }
        Some(Unwound {
            caller,
            frame_sp: cfa.checked_add_signed(shim.sp_off)?,
            frame_pc: region.start,
            label: region.label.clone(),
            kind: "jit",
        })
    }

    fn unwind_jit(&self, mem: &dyn Memory, region: &Region, regs: Regs) -> Option<Unwound> {
        let shim = self.shims.frame.as_ref()?;
        if regs.pc.wrapping_sub(region.start) < self.shims.copy_len {
            // Inside the 3.14 shim copy itself (a stop in its prologue or epilogue): its frame
            // is half built or half torn down; leave it to the debugger.
            return None;
        }
        let slot = self
            .shim_slot_by_fp(mem, shim, regs)
            .or_else(|| self.shim_slot_by_scan(mem, regs.sp))?;
        let cfa = slot.checked_add(shim.ra_slot_to_cfa())?;
        let rip = mem.read_ptr(cfa.checked_sub(8)?).ok()?;
        if rip == 0 || cfa <= regs.sp {
            return None;
        }
        let mut caller = vec![("rip", rip), ("rsp", cfa)];
        for (r, below) in shim.saved_at() {
            if r.callee_saved() {
                caller.push((r.name(), mem.read_ptr(cfa.checked_sub(below)?).ok()?));
            }
        }
        if !shim.pushes.contains(&Reg::Rbp) {
            caller.push(("rbp", Self::caller_rbp(mem, regs, slot, cfa)));
        }
        Some(Unwound {
            caller,
            frame_sp: slot.checked_add(8)?,
            frame_pc: region.start,
            label: region.label.clone(),
            kind: "jit",
        })
    }

    /// The eval loop's %rbp when the shim does not save it (3.14). JIT code (`preserve_none`)
    /// must hand %rbp back unchanged, so a stencil that uses it pushes it first, just below the
    /// shim's return-address slot, and the caller's value is there while that stencil runs
    /// (typically while it calls into C); otherwise %rbp still holds it. The eval loop uses
    /// %rbp as its frame pointer (its CFA is %rbp+16 in Debian's 3.14), so the right value
    /// points into the stack above the shim: the candidate that does wins.
    fn caller_rbp(mem: &dyn Memory, regs: Regs, slot: u64, cfa: u64) -> u64 {
        let in_caller = |v: u64| v % 8 == 0 && v >= cfa && v - cfa < MAX_SCAN_BYTES;
        if in_caller(regs.bp) {
            return regs.bp;
        }
        for below in [8, 16] {
            if slot.checked_sub(below).is_some_and(|a| a >= regs.sp) {
                if let Ok(v) = mem.read_ptr(slot - below) {
                    if in_caller(v) {
                        return v;
                    }
                }
            }
        }
        regs.bp
    }

    /// 3.15: the shim keeps a frame pointer and JIT code leaves %rbp alone, so its
    /// return-address slot is at a fixed distance below %rbp; checked against the known
    /// return address.
    fn shim_slot_by_fp(&self, mem: &dyn Memory, shim: &ShimFrame, regs: Regs) -> Option<u64> {
        if !shim.frame_pointer {
            return None;
        }
        let slot = regs
            .bp
            .checked_add(16)?
            .checked_sub(shim.ra_slot_to_cfa())?;
        let ra = mem.read_ptr(slot).ok()?;
        (slot >= regs.sp && self.shims.returns.contains(&ra)).then_some(slot)
    }

    /// 3.14: the nearest slot above %rsp that holds a shim return address. JIT code pushes
    /// return addresses only for its calls into C, which return to stencils, never to a shim.
    fn shim_slot_by_scan(&self, mem: &dyn Memory, sp: u64) -> Option<u64> {
        if self.shims.returns.is_empty() || sp % 8 != 0 {
            return None;
        }
        let mut page = [0u8; 512];
        let mut at = sp;
        let end = sp.checked_add(MAX_SCAN_BYTES)?;
        while at < end {
            // Read up to the next 512-byte boundary, so a stack top that ends in a page
            // boundary is read to its last word.
            let len = (512 - (at % 512)) as usize;
            mem.read_into(at, &mut page[..len]).ok()?;
            for (i, w) in page[..len].chunks_exact(8).enumerate() {
                let v = u64::from_le_bytes(w.try_into().ok()?);
                if self.shims.returns.contains(&v) {
                    return Some(at + 8 * i as u64);
                }
            }
            at += len as u64;
        }
        None
    }

    fn unwind_trampoline(&self, mem: &dyn Memory, region: &Region, regs: Regs) -> Option<Unwound> {
        let t = self.trampoline.as_ref()?;
        let n = t.bytes.len() as u64;
        // Copies sit at a fixed stride from the arena start that we do not assume; find the
        // copy that holds the PC by matching the template's bytes around it.
        let mut found = None;
        for off in 0..n {
            let Some(start) = regs.pc.checked_sub(off) else {
                break;
            };
            if start < region.start || start.checked_add(n).is_none_or(|e| e > region.end) {
                continue;
            }
            let Ok(b) = mem.read_vec(start, n, MAX_TRAMPOLINE_BYTES) else {
                continue;
            };
            if b == t.bytes {
                found = Some((start, off));
                break;
            }
        }
        let (start, off) = found?;
        let (pushed, rbp_at) = t.row(off)?;
        let ra_at = regs.sp.checked_add(pushed)?;
        let rip = mem.read_ptr(ra_at).ok()?;
        let bp = match rbp_at {
            Some(o) => mem.read_ptr(field(regs.sp, o).ok()?).ok()?,
            None => regs.bp,
        };
        if rip == 0 {
            return None;
        }
        let rsp = ra_at.checked_add(8)?;
        Some(Unwound {
            caller: vec![("rip", rip), ("rsp", rsp), ("rbp", bp)],
            frame_sp: rsp,
            frame_pc: start,
            label: region.label.clone(),
            kind: "trampoline",
        })
    }
}

/// Bytes of the arm64 shim read for decoding: 3.14's copy is 104 bytes, `_PyJIT_Entry` 124.
pub const MAX_A64_SHIM_BYTES: usize = 192;
// One buffer reads either architecture's shim.
const _: () = assert!(MAX_A64_SHIM_BYTES >= MAX_SHIM_BYTES);

/// arm64 callee-saved registers the shim may save, by number from x19.
const A64_CALLEE_SAVED: [&str; 10] = [
    "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27", "x28",
];

/// The arm64 entry shim's frame (3.14: the copy at the start of each executor; 3.15:
/// `_PyJIT_Entry`), from its prologue. Offsets are from its CFA, the stack pointer it was
/// called with.
#[derive(Clone, Debug, PartialEq, Eq)]
struct A64Shim {
    /// Offset of the return address of its call into JIT code.
    return_offset: u64,
    /// x29 (its frame record) minus the CFA.
    fp_off: i64,
    /// The stack pointer at its call minus the CFA.
    sp_off: i64,
    /// Saved general registers: (number, offset from the CFA).
    saved: Vec<(u8, i64)>,
    /// Where its epilogue ends (just after `ret`), from its start; None if not in the bytes.
    end: Option<u64>,
}

/// Decodes the shim's prologue: `stp` of X or D registers to `[sp, #imm]` or `[sp, #imm]!`,
/// `sub sp, sp, #imm`, `add x29, sp, #imm`, hints (`paciasp`, `bti`), register moves, up to
/// its first `bl`/`blr`; then finds the `ret` that ends it. None unless x29 and x30 are saved
/// as a frame record at x29 and the stack pointer only went down.
fn decode_a64_shim(code: &[u8]) -> Option<A64Shim> {
    let words: Vec<u32> = code
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    let (mut sp, mut fp, mut saved) = (0i64, None, Vec::new());
    let mut return_offset = None;
    for (i, &w) in words.iter().enumerate() {
        let (rd, rn) = (w & 31, (w >> 5) & 31);
        let imm12 = || i64::from((w >> 10) & 0xfff) << if w & (1 << 22) != 0 { 12 } else { 0 };
        match w {
            // HINT (nop, paciasp, pacibsp, bti ...).
            _ if w & 0xffff_f01f == 0xd503_201f => {}
            // STP of two X (0xa9) or D (0x6d) registers, signed offset or pre-index, base sp.
            _ if matches!(w & 0xff40_0000, 0xa900_0000 | 0x6d00_0000) && rn == 31 => {
                let imm = (i64::from((w >> 15) & 0x7f) ^ 0x40) - 0x40;
                let at = if w & (1 << 23) != 0 {
                    sp += imm * 8;
                    sp
                } else {
                    sp + imm * 8
                };
                if w & (1 << 26) == 0 {
                    saved.push((rd as u8, at));
                    saved.push((((w >> 10) & 31) as u8, at + 8));
                }
            }
            // Any other store pair with write-back to sp (post-index): not a prologue.
            _ if w & 0x3a00_0000 == 0x2800_0000 && w & (1 << 23) != 0 && rn == 31 => return None,
            // ADD/SUB (immediate), 64-bit.
            _ if w & 0xff80_0000 == 0x9100_0000 && rd == 29 && rn == 31 => fp = Some(sp + imm12()),
            _ if w & 0xff80_0000 == 0xd100_0000 && rd == 31 && rn == 31 => sp -= imm12(),
            _ if w & 0x7f00_0000 == 0x1100_0000 && (rd == 29 || rd == 31) => return None,
            _ if w & 0x7f00_0000 == 0x5100_0000 && (rd == 29 || rd == 31) => return None,
            // BL, BLR (and BLRAA/BLRAB...): the call into JIT code.
            _ if w & 0xfc00_0000 == 0x9400_0000
                || w & 0xffff_fc1f == 0xd63f_0000
                || w & 0xffff_f800 == 0xd63f_0800 =>
            {
                return_offset = Some(4 * (i as u64 + 1));
                break;
            }
            // A branch or return before the call.
            _ if w & 0xfc00_0000 == 0x1400_0000 || w & 0xfffffc1f == 0xd65f_0000 => return None,
            // ORR (shifted register) is `mov`: to x29 it would break the frame record.
            _ if (rd == 29 || rd == 31) && w & 0xff20_0000 == 0xaa00_0000 => return None,
            // Moves and loads into other registers.
            _ => {}
        }
    }
    let return_offset = return_offset?;
    let fp = fp?;
    if sp >= 0 || fp < sp || !saved.contains(&(29, fp)) || !saved.contains(&(30, fp + 8)) {
        return None;
    }
    let end = words[(return_offset / 4) as usize..]
        .iter()
        .position(|&w| matches!(w, 0xd65f_03c0 | 0xd65f_0bff | 0xd65f_0fff))
        .map(|k| return_offset + 4 * (k as u64 + 1));
    Some(A64Shim {
        return_offset,
        fp_off: fp,
        sp_off: sp,
        saved,
        end,
    })
}

/// Where the shim's epilogue (pops, `add $imm8,%rsp`, `ret`) after its call ends.
fn shim_tail_end(code: &[u8], from: usize) -> Option<u64> {
    let mut i = from;
    while i < code.len() {
        match code[i..] {
            [0x58..=0x5f, ..] => i += 1,
            [0x41, 0x58..=0x5f, ..] => i += 2,
            [0x48, 0x83, 0xc4, _, ..] => i += 4,
            [0xc3, ..] => return Some(i as u64 + 1),
            _ => return None,
        }
    }
    None
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
    use super::*;
    use crate::cpython::debug_offsets::{size_words, COOKIE};
    use crate::cpython::layout::{tpflags, Layout};
    use crate::memory::{FakeMemory, FileMapping};
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
        let libpython = FileMapping {
            start: RT,
            end: RT + 0x1000,
            offset: 0,
            path: "/usr/lib/libpython3.so".into(),
        };
        let target = Target::with_memory(
            Arc::new(mem.clone()),
            vec![libpython],
            None,
            Default::default(),
        );
        let found = Found {
            module: module_at(&target, RT).unwrap(),
            runtime: RT,
            layout: l,
            found_by: "test".into(),
            arch,
        };
        JitMap::build(&Snapshot::new(target.mem.clone(), &found), jit_entry)
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
        let l = runtime(&mut mem, &t, 0x030f02f0);
        let ExecutorRoots::Array { ptrs, count, cold } = t.roots else {
            panic!()
        };
        mem.put_u64(INTERP + ptrs, 0x50_0000);
        mem.put_u64(INTERP + count, 2);
        mem.put_u64(0x50_0000, 0x30_0000);
        mem.put_u64(0x50_0008, 0x30_1000);
        mem.put_u64(INTERP + cold[0], 0x30_2000);
        mem.put_u64(INTERP + cold[1], 0);
        mem.put_u64(INTERP + t.deletion_head, 0);
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

    /// The 3.14 arm64 shim (Debian python3.14 3.14.10-1 arm64, the copy at an executor's
    /// start): d8-d15, x19-x28 and the frame record x29/x30 at sp+64 in a 160-byte frame, `bl`
    /// into the trace at 0x38, the epilogue's `ret` at 0x64.
    const A64_SHIM_314: [u32; 26] = [
        0x6db63bef, 0xa90857f6, 0xaa0103f5, 0xaa0203f6, 0xa9094ff4, 0xaa0003f4, 0x6d0133ed,
        0x6d022beb, 0x6d0323e9, 0xa9047bfd, 0x910103fd, 0xa9056ffc, 0xa90667fa, 0xa9075ff8,
        0x9400000c, 0xa9494ff4, 0xa94857f6, 0xa9475ff8, 0xa94667fa, 0xa9456ffc, 0xa9447bfd,
        0x6d4323e9, 0x6d422beb, 0x6d4133ed, 0x6cca3bef, 0xd65f03c0,
    ];
    /// `_PyJIT_Entry` of Debian python3.15 3.15.2-1 arm64: the same frame, `blr x8` at 0x4c.
    const A64_ENTRY_315: [u32; 31] = [
        0x6db63bef, 0x6d0133ed, 0x6d022beb, 0x6d0323e9, 0xa9047bfd, 0xa9056ffc, 0xa90667fa,
        0xa9075ff8, 0xa90857f6, 0xa9094ff4, 0x910103fd, 0xf9402c08, 0xaa0003f4, 0xaa0103f5,
        0xaa0203f6, 0xaa0303f7, 0xaa1f03f8, 0xaa1f03f9, 0xaa1f03fa, 0xd63f0100, 0xa9494ff4,
        0xa94857f6, 0xa9475ff8, 0xa94667fa, 0xa9456ffc, 0xa9447bfd, 0x6d4323e9, 0x6d422beb,
        0x6d4133ed, 0x6cca3bef, 0xd65f03c0,
    ];

    fn words(w: &[u32]) -> Vec<u8> {
        w.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn decodes_arm64_shims() {
        let s = decode_a64_shim(&words(&A64_SHIM_314)).unwrap();
        assert_eq!(
            (s.return_offset, s.fp_off, s.sp_off, s.end),
            (0x3c, -96, -160, Some(0x68))
        );
        for r in 19..=28u8 {
            assert!(
                s.saved.contains(&(r, -8 * (i64::from(r) - 18))),
                "{:?}",
                s.saved
            );
        }
        assert!(s.saved.contains(&(29, -96)) && s.saved.contains(&(30, -88)));
        let mut e = decode_a64_shim(&words(&A64_ENTRY_315)).unwrap();
        assert_eq!(
            (e.return_offset, e.fp_off, e.sp_off, e.end),
            (0x50, -96, -160, Some(0x7c))
        );
        let mut saved = s.saved.clone();
        saved.sort();
        e.saved.sort();
        assert_eq!(e.saved, saved);
        // A frame record at the bottom of a 16-byte frame (the perf trampoline's shape).
        let t = decode_a64_shim(&words(&[
            0xd503233f, 0xa9bf7bfd, 0x910003fd, 0xd63f0060, 0xd65f03c0,
        ]))
        .unwrap();
        assert_eq!(
            (t.return_offset, t.fp_off, t.sp_off, t.end),
            (16, -16, -16, Some(20))
        );
        // No frame record; a call before it; x29 overwritten; no call at all.
        for code in [
            &[0xd10043ff, 0x94000001][..],
            &[0x94000001, 0xa9bf7bfd, 0x910003fd][..],
            &[0xa9bf7bfd, 0x910003fd, 0xaa0003fd, 0x94000001][..],
            &[0xa9bf7bfd, 0x910003fd, 0xd65f03c0][..],
        ] {
            assert!(decode_a64_shim(&words(code)).is_none(), "{code:x?}");
        }
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
        let l = runtime(&mut mem, &t, 0x030f02f0);
        let ExecutorRoots::Array { ptrs, count, cold } = t.roots else {
            unreachable!()
        };
        mem.put_u64(INTERP + ptrs, 0x50_0000);
        mem.put_u64(INTERP + count, 1);
        mem.put_u64(0x50_0000, 0x30_0000);
        for c in cold {
            mem.put_u64(INTERP + c, 0);
        }
        mem.put_u64(INTERP + t.deletion_head, 0);
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
