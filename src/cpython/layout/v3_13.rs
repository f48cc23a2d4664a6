//! CPython 3.13 (checked against the DWARF of pyenv 3.13.0 by tests/layout_dwarf.rs).
//! The target's own `_Py_DebugOffsets` (Include/internal/pycore_debug_offsets.h) overrides the
//! fields it has; this table is the fallback and supplies the rest.
//! Sources: Include/internal/pycore_runtime.h, pycore_interp.h, Include/cpython/pystate.h
//! (`_ts`, `_PyCFrame`), Include/internal/pycore_frame.h (`_PyInterpreterFrame`),
//! Include/cpython/code.h, Include/cpython/unicodeobject.h, Include/cpython/longintrepr.h (`_PyLongValue`),
//! Include/internal/pycore_dict.h, Objects/dictobject.c (`_PyObject_DictPointer`,
//! `_PyObject_ValuesPointer`), Include/internal/pycore_gil.h.

use super::*;

pub fn layout() -> Layout {
    Layout {
        version: Version::new(3, 13, 0),
        source: "built-in 3.13".into(),
        free_threaded: false,
        runtime_state: RuntimeState {
            interpreters_head: 632,
        },
        // `PyInterpreterState.next`, `.threads.head`, `.imports.modules`
        interpreter_state: InterpreterState {
            next: 7264,
            id: 7272,
            whence: Some(7304),
            exec_borrows_first_thread_state: false,
            threads_head: 7344,
            imports_modules: Some(7656),
            gc_collecting: Some(7600),
            gc: Some(GcLists {
                gc: 7400,
                heads: GC_HEADS_3_10,
            }),
        },
        thread_state: ThreadState {
            prev: 0,
            next: 8,
            interp: 16,
            // `PyThreadState.current_frame` (3.13 removed `_PyCFrame`)
            current_frame: CurrentFrame::Direct(72),
            thread_id: 152,
            native_thread_id: Some(160),
            state: Some(40),
        },
        // `interp->ceval.gil` -> `struct _gil_runtime_state` { .last_holder, .locked }
        gil: GilLocation::Interpreter {
            gil_ptr: 16,
            locked: 16,
            last_holder: 8,
        },
        frame: FrameModel::Interpreter(InterpreterFrame {
            previous: 8,
            executable: 0,
            instr_ptr: 56, // instr_ptr
            localsplus: 72,
            owner: 70,
            // FRAME_OWNED_BY_CSTACK
            entry: EntryMarker::ShimOwner(3),
            f_globals: 24,
            f_builtins: 32,
            tag_bits: 0,
        }),
        code_object: CodeObject {
            filename: 112,
            name: 120,
            qualname: Some(128),
            linetable: 136,
            line_table: LineTable::Locations311,
            firstlineno: 68,
            argcount: 52,
            kwonlyargcount: Some(60),
            flags: 48,
            stacksize: 64,
            co_code_adaptive: Some(200),
            co_code: None,
            // `co_exceptiontable`
            exceptiontable: Some(40),
            locals: CodeLocals::LocalsPlus {
                localsplusnames: 96,
                localspluskinds: 104,
            },
        },
        pyobject: PyObject { ob_type: 8 },
        type_object: TypeObject {
            tp_name: 24,
            tp_basicsize: 32,
            tp_flags: 168,
            tp_base: 256,
            tp_dictoffset: 288,
            ht_cached_keys: 880,
        },
        tuple_object: VarObject {
            ob_size: 16,
            ob_item: 24,
        },
        list_object: VarObject {
            ob_size: 16,
            ob_item: 24,
        },
        bytes_object: BytesObject {
            ob_size: 16,
            ob_sval: 32,
        },
        unicode_object: UnicodeObject {
            state: 32,
            length: 16,
            asciiobject_size: 40,
            compact_size: 56,
        },
        long_object: LongObject::Tagged {
            lv_tag: 16,
            ob_digit: 24,
        },
        float_object: FloatObject { ob_fval: 16 },
        dict_object: DictObject {
            ma_used: 16,
            ma_keys: 32,
            ma_values: 40,
            keys: DictKeys::V311 {
                dk_log2_size: 8,
                dk_log2_index_bytes: 9,
                dk_kind: 10,
                dk_nentries: 24,
                dk_indices: 32,
            },
            values_array: 8,
        },
        set_object: SetObject {
            used: 24,
            mask: 32,
            table: 40,
        },
        cell_ob_ref: 16,
        module_md_dict: 16,
        function_code: 48,
        instance_dict: InstanceDict::Managed313,
        // Include/opcode_ids.h 3.13: BEFORE_WITH 2; Python/bytecodes.c as in 3.12.
        thread_locks: ThreadLocks::OLD,
        with_entry: WithEntry::ExceptionTable {
            opcode: 2,
            top: WithTop::Manager,
        },
        // Include/opcode.h 3.13: PUSH_EXC_INFO, WITH_EXCEPT_START.
        with_cleanup: Some(WithCleanup {
            push_exc_info: 33,
            with_except_start: 44,
            exit_depth: 1,
        }),
        debug_offsets: None,
    }
}

/// The free-threaded build (`--disable-gil`, checked against the DWARF of our 3.13.15 build by
/// tests/layout_dwarf.rs): `PyObject` grows from 16 to 32 bytes (`ob_tid`, `ob_mutex`,
/// `ob_gc_bits`, `ob_ref_local`, `ob_ref_shared` before `ob_type`; Include/object.h), so every
/// field of an object moves by 16; no single GIL; `interp->imports` moves by 8.
pub fn free_threaded() -> Layout {
    let mut l = layout();
    l.source = "built-in 3.13 free-threaded".into();
    l.free_threaded = true;
    l.gil = GilLocation::None;
    l.interpreter_state.imports_modules = Some(7664);
    // Objects live in mimalloc's heaps, on no list.
    l.interpreter_state.gc = None;
    l.shift_object_fields(16);
    l
}
