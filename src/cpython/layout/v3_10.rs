//! CPython 3.10 (checked against the DWARF of pyenv 3.10.13 by tests/layout_dwarf.rs).
//! Sources: Include/internal/pycore_runtime.h (`_PyRuntimeState`), pycore_interp.h (`_is`),
//! Include/cpython/pystate.h (`_ts`), Include/cpython/frameobject.h (`_frame`),
//! Include/cpython/code.h (`PyCodeObject`), Include/cpython/unicodeobject.h,
//! Include/longintrepr.h, Objects/dict-common.h (`_dictkeysobject`), Include/setobject.h,
//! Include/cpython/object.h (`_typeobject`, `_heaptypeobject`), Include/internal/pycore_gil.h.

use super::*;

pub fn layout() -> Layout {
    Layout {
        version: Version::new(3, 10, 0),
        source: "built-in 3.10".into(),
        free_threaded: false,
        // `_PyRuntimeState.interpreters.head`
        runtime_state: RuntimeState {
            interpreters_head: 32,
        },
        // `PyInterpreterState.next`, `.tstate_head`, `.modules`
        interpreter_state: InterpreterState {
            next: 0,
            id: 24,
            whence: None,
            exec_borrows_first_thread_state: true,
            threads_head: 8,
            imports_modules: Some(856),
            gc_collecting: Some(816),
            gc: Some(GcLists {
                gc: 616,
                heads: GC_HEADS_3_10,
            }),
        },
        thread_state: ThreadState {
            prev: 0,
            next: 8,
            interp: 16,
            // `PyThreadState.frame` is the innermost `PyFrameObject *`
            current_frame: CurrentFrame::Direct(24),
            thread_id: 176,
            native_thread_id: None,
            state: None,
        },
        // `_PyRuntime.ceval.gil.locked` / `.last_holder`
        gil: GilLocation::Runtime {
            locked: 368,
            last_holder: 360,
        },
        // `PyFrameObject.f_back`, `.f_code`, `.f_lasti` (int, in code units), `.f_localsplus`,
        // `.f_globals`, `.f_builtins`
        frame: FrameModel::FrameObject {
            f_back: 24,
            f_code: 32,
            f_lasti: 96,
            f_localsplus: 352,
            f_globals: 48,
            f_builtins: 40,
        },
        code_object: CodeObject {
            filename: 104,
            name: 112,
            qualname: None,
            linetable: 120,
            line_table: LineTable::Pairs310,
            firstlineno: 40,
            argcount: 16,
            kwonlyargcount: Some(24),
            flags: 36,
            stacksize: 32,
            co_code_adaptive: None,
            co_code: Some(48),
            exceptiontable: None,
            locals: CodeLocals::Tuples310 {
                varnames: 72,
                cellvars: 88,
                freevars: 80,
                nlocals: 28,
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
        // sizeof(PyASCIIObject) = 48, sizeof(PyCompactUnicodeObject) = 72 (with wstr fields)
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
            keys: DictKeys::V310 {
                dk_size: 8,
                dk_nentries: 32,
                dk_indices: 40,
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
        instance_dict: InstanceDict::DictOffset,
        // Include/opcode.h: SETUP_WITH 143, EXTENDED_ARG 144; `PyFrameObject.f_iblock`,
        // `.f_blockstack` and `PyTryBlock` {b_type, b_handler, b_level} (ints):
        // Include/cpython/frameobject.h; Python/ceval.c `TARGET(SETUP_WITH)`.
        thread_locks: ThreadLocks::OLD,
        with_entry: WithEntry::BlockStack {
            opcode: 143,
            extended_arg: 144,
            f_iblock: 104,
            f_blockstack: 112,
            tryblock_size: 12,
            b_level: 8,
            b_handler: 4,
        },
        with_cleanup: None,
        debug_offsets: None,
    }
}
