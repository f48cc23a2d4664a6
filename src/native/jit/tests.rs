//! Unit tests of the JIT map: executors, arenas and shims placed in fake memory.

use super::tables::{AARCH64_TABLES, X86_64_TABLES};
use super::*;
use crate::arch::aarch64::jit::tests::{words, A64_ENTRY_315, A64_SHIM_314};
use crate::arch::aarch64::jit::CALLEE_SAVED as A64_CALLEE_SAVED;
use crate::arch::Arch;
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
        keys: Default::default(),
        codes: Default::default(),
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
    0x41, 0x57, 0x41, 0x56, 0x41, 0x55, 0x41, 0x54, 0x53, 0x49, 0x89, 0xfc, 0x49, 0x89, 0xf5, 0x49,
    0x89, 0xd6, 0xe8, 0x0a, 0x00, 0x00, 0x00, 0x5b, 0x41, 0x5c, 0x41, 0x5d, 0x41, 0x5e, 0x41, 0x5f,
    0xc3,
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
