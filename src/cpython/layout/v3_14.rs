//! CPython 3.14: the 3.13 table with what moved. Checked against the DWARF of Debian's
//! python3.14 3.14.10-1 (python3.14-dbg) by tests/layout_dwarf.rs; the target's own
//! `_Py_DebugOffsets` overrides the fields it has.
//! Sources: Include/internal/pycore_interpframe_structs.h (`_PyInterpreterFrame`: `f_executable`
//! and locals are `_PyStackRef`s), pycore_stackref.h (`Py_TAG_BITS`), Include/cpython/tupleobject.h
//! (3.14 caches the hash: `ob_hash` before `ob_item`), pycore_runtime_structs.h, pycore_interp_structs.h.

use super::*;

pub fn layout() -> Layout {
    let mut l = v3_13::layout();
    // PyThreadState.state (Include/cpython/pystate.h 3.14).
    l.thread_state.state = Some(44);
    l.version = Version::new(3, 14, 0);
    l.source = "built-in 3.14".into();
    l.runtime_state.interpreters_head = 808;
    l.interpreter_state = InterpreterState {
        next: 7272,
        id: 7280,
        whence: Some(7304),
        exec_borrows_first_thread_state: false,
        threads_head: 7344,
        imports_modules: Some(7688),
        gc_collecting: Some(7600),
        gc: Some(GcLists {
            gc: 7408,
            heads: GC_HEADS_3_14,
        }),
    };
    if let FrameModel::Interpreter(f) = &mut l.frame {
        f.localsplus = 80;
        f.owner = 74;
        // FRAME_OWNED_BY_INTERPRETER (the entry frame; FRAME_OWNED_BY_CSTACK moved to 4)
        f.entry = EntryMarker::ShimOwner(3);
        f.tag_bits = 3;
    }
    l.code_object.co_code_adaptive = Some(208);
    // Include/opcode_ids.h 3.14 has no BEFORE_WITH: Python/codegen.c `codegen_with` emits
    // LOAD_SPECIAL __exit__, LOAD_SPECIAL __enter__, CALL 0.
    l.with_entry = WithEntry::SpecialCall;
    // Include/opcode_ids.h 3.14: PUSH_EXC_INFO 32, WITH_EXCEPT_START 43; the body keeps the
    // `__exit__` function and its `self`.
    l.with_cleanup = Some(WithCleanup {
        push_exc_info: 32,
        with_except_start: 43,
        exit_depth: 2,
    });
    // Modules/_threadmodule.c 3.14: lockobject and rlockobject hold a PyMutex and a
    // _PyRecursiveMutex.
    l.thread_locks = ThreadLocks {
        lock: ThreadLockModel::PyMutex,
        rlock_count: RLockCount::LevelPlusOne,
    };
    l.type_object.ht_cached_keys = 880;
    l.tuple_object.ob_item = 32;
    l
}
