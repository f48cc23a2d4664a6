//! CPython 3.11 (checked against the DWARF of pyenv 3.11.7 by tests/layout_dwarf.rs).
//! Sources: Include/internal/pycore_runtime.h, pycore_interp.h, Include/cpython/pystate.h
//! (`_ts`, `_PyCFrame`), Include/internal/pycore_frame.h (`_PyInterpreterFrame`),
//! Include/cpython/code.h, Include/cpython/unicodeobject.h, Include/cpython/longintrepr.h,
//! Include/internal/pycore_dict.h, Objects/dictobject.c (`_PyObject_DictPointer`,
//! `_PyObject_ValuesPointer`), Include/internal/pycore_gil.h.

use super::*;

pub fn layout() -> Layout {
    Layout {
        version: Version::new(3, 11, 0),
        source: "built-in 3.11".into(),
        free_threaded: false,
        runtime_state: RuntimeState {
            interpreters_head: 40,
        },
        // `PyInterpreterState.next`, `.threads.head`, `.modules`
        interpreter_state: InterpreterState {
            next: 0,
            id: 48,
            whence: None,
            exec_borrows_first_thread_state: true,
            threads_head: 16,
            imports_modules: Some(888),
            gc_collecting: Some(848),
            gc: Some(GcLists {
                gc: 648,
                heads: GC_HEADS_3_10,
            }),
        },
        thread_state: ThreadState {
            prev: 0,
            next: 8,
            interp: 16,
            // `tstate->cframe->current_frame`
            current_frame: CurrentFrame::ViaCFrame {
                cframe: 56,
                current_frame: 8,
            },
            thread_id: 152,
            native_thread_id: Some(160),
            state: None,
        },
        gil: GilLocation::Runtime {
            locked: 376,
            last_holder: 368,
        },
        frame: FrameModel::Interpreter(InterpreterFrame {
            previous: 48,
            executable: 32,
            instr_ptr: 56, // prev_instr
            localsplus: 72,
            owner: 69,
            entry: EntryMarker::IsEntry(68),
            f_globals: 8,
            f_builtins: 16,
            tag_bits: 0,
        }),
        code_object: CodeObject {
            filename: 112,
            name: 120,
            qualname: Some(128),
            linetable: 136,
            line_table: LineTable::Locations311,
            firstlineno: 72,
            argcount: 56,
            kwonlyargcount: Some(64),
            flags: 48,
            stacksize: 68,
            co_code_adaptive: Some(184),
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
            ht_cached_keys: 872,
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
            asciiobject_size: 48,
            compact_size: 72,
        },
        long_object: LongObject::SignedSize {
            ob_size: 16,
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
            values_array: 0,
        },
        set_object: SetObject {
            used: 24,
            mask: 32,
            table: 40,
        },
        cell_ob_ref: 16,
        module_md_dict: 16,
        function_code: 48,
        instance_dict: InstanceDict::Managed311,
        // Include/opcode.h 3.11: BEFORE_WITH 53; Python/ceval.c `TARGET(BEFORE_WITH)` sets `__exit__` on the stack before calling `__enter__`.
        thread_locks: ThreadLocks::OLD,
        with_entry: WithEntry::ExceptionTable {
            opcode: 53,
            top: WithTop::Exit,
        },
        // Include/opcode.h 3.11: PUSH_EXC_INFO, WITH_EXCEPT_START.
        with_cleanup: Some(WithCleanup {
            push_exc_info: 35,
            with_except_start: 49,
            exit_depth: 1,
        }),
        debug_offsets: None,
    }
}
