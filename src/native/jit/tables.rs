//! The per-build offsets the JIT map reads that the target's `_Py_DebugOffsets` do not carry:
//! where each interpreter keeps its executors, `_PyExecutorObject`'s fields and the perf
//! trampoline arenas. Data only; [`super::JitMap`] picks a table by the target's architecture
//! and the struct sizes in its `_Py_DebugOffsets`.

use crate::arch::Arch;

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
pub(crate) const X86_64_TABLES: &[Table] = &[
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
pub(crate) const AARCH64_TABLES: &[Table] = &[
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
