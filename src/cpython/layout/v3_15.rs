//! CPython 3.15: the 3.14 table with what moved. Checked against the DWARF of Debian's
//! python3.15 3.15.2-1 (python3.15-dbg) by tests/layout_dwarf.rs; the target's own
//! `_Py_DebugOffsets` overrides the fields it has.
//! Sources: Include/internal/pycore_runtime_structs.h, pycore_interp_structs.h,
//! Include/cpython/pystate.h, Include/internal/pycore_interpframe_structs.h (3.15 drops
//! `FRAME_OWNED_BY_CSTACK`; the entry frame stays `FRAME_OWNED_BY_INTERPRETER` = 3).

use super::*;

pub fn layout() -> Layout {
    let mut l = v3_14::layout();
    l.version = Version::new(3, 15, 0);
    l.source = "built-in 3.15".into();
    l.runtime_state.interpreters_head = 936;
    l.interpreter_state = InterpreterState {
        next: 7264,
        id: 7272,
        whence: Some(7296),
        exec_borrows_first_thread_state: false,
        threads_head: 7336,
        imports_modules: Some(7592),
        gc_collecting: Some(7512),
        gc: Some(GcLists {
            gc: 7400,
            heads: GC_HEADS_3_15,
        }),
    };
    l.thread_state.thread_id = 176;
    l.thread_state.native_thread_id = Some(184);
    // PyThreadState.state (Include/cpython/pystate.h 3.15).
    l.thread_state.state = Some(48);
    l.type_object.ht_cached_keys = 888;
    // Include/opcode_ids.h 3.15: PUSH_EXC_INFO 30, WITH_EXCEPT_START 41.
    l.with_cleanup = Some(WithCleanup {
        push_exc_info: 30,
        with_except_start: 41,
        exit_depth: 2,
    });
    l
}
