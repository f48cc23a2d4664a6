//! Everything that differs between CPython versions, in one value.
//!
//! Group and field names follow `_Py_DebugOffsets` (Include/internal/pycore_debug_offsets.h,
//! 3.13) so that the built-in tables and the tables read from a target have one shape, and a
//! grep through CPython leads to our reader. Where an algorithm differs between versions (3.10
//! frame objects vs 3.11+ interpreter frames, the two line-table formats, the int header) the
//! layout names the strategy; decoders never test version numbers.

mod eval;
mod mimalloc;
mod objects;
mod v3_10;
mod v3_11;
mod v3_12;
mod v3_13;
mod v3_14;
mod v3_15;

pub use self::mimalloc::MimallocLayout;
pub use self::objects::Opcache310;
use crate::cpython::debug_offsets::DebugOffsets;
use crate::cpython::version::Version;
use crate::error::{ReadError, ReadErrorKind};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub version: Version,
    /// Where the layout came from: "built-in 3.12", "_Py_DebugOffsets".
    pub source: String,
    pub free_threaded: bool,
    pub runtime_state: RuntimeState,
    pub interpreter_state: InterpreterState,
    pub thread_state: ThreadState,
    pub gil: GilLocation,
    pub frame: FrameModel,
    pub code_object: CodeObject,
    pub pyobject: PyObject,
    pub type_object: TypeObject,
    pub tuple_object: VarObject,
    pub list_object: VarObject,
    pub bytes_object: BytesObject,
    pub unicode_object: UnicodeObject,
    pub long_object: LongObject,
    pub float_object: FloatObject,
    pub dict_object: DictObject,
    pub set_object: SetObject,
    /// `PyCellObject.ob_ref`.
    pub cell_ob_ref: u64,
    /// `PyModuleObject.md_dict`.
    pub module_md_dict: u64,
    /// `PyFunctionObject.func_code`: the fifth field, after `COMMON_FIELDS`' globals,
    /// builtins, name and qualname (Include/funcobject.h 3.10, `_Py_COMMON_FIELDS` in
    /// Include/cpython/funcobject.h 3.11 to 3.15).
    pub function_code: u64,
    pub instance_dict: InstanceDict,
    /// How a frame shows that it is entering a `with` block (running the manager's
    /// `__enter__`).
    pub with_entry: WithEntry,
    /// How a `with` block's cleanup handler starts (3.11+), to find the `with` statement that
    /// took a held lock (`Snapshot::with_line`).
    pub with_cleanup: Option<WithCleanup>,
    /// How `_thread.lock` and `_thread.RLock` keep their state (src/why/locks.rs reads them).
    pub thread_locks: ThreadLocks,
    /// The target's own `_Py_DebugOffsets` (3.13+), for readers of the groups the table above
    /// does not carry (`gen_object`, `llist_node`, `interpreter_frame.stackpointer`).
    pub debug_offsets: Option<DebugOffsets>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeState {
    pub interpreters_head: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterpreterState {
    pub next: u64,
    /// `id` (`int64_t`, 3.7+): the interpreter's id, 0 for the main one, as
    /// `_interpreters.get_current()` gives it.
    pub id: u64,
    /// `_whence` (`long`, 3.13+; Include/internal/pycore_interp.h 3.13,
    /// pycore_interp_structs.h 3.14+): how the interpreter was made, as
    /// `_interpreters.whence()` gives it (`_PyInterpreterState_WHENCE_*`).
    pub whence: Option<u64>,
    /// 3.10 to 3.12: `_xxsubinterpreters.run_string` runs code in the interpreter's first
    /// thread state (`PyInterpreterState_ThreadHead`, Modules/_xxsubinterpretersmodule.c),
    /// which stays bound to the thread that made the interpreter, whatever thread runs it
    /// (gh-109860; 3.13's `_interpreters.exec` makes a thread state of the running thread).
    pub exec_borrows_first_thread_state: bool,
    pub threads_head: u64,
    /// `sys.modules` (`interp->modules` up to 3.11, `interp->imports.modules` from 3.12).
    pub imports_modules: Option<u64>,
    /// `interp->gc.collecting` (an int, 1 while a collection runs; Include/internal/pycore_gc.h).
    pub gc_collecting: Option<u64>,
    /// The GC's object lists (default builds; a free-threaded build keeps none).
    pub gc: Option<GcLists>,
}

/// Where `struct _gc_runtime_state` (Include/internal/pycore_gc.h to 3.12,
/// pycore_interp_structs.h from 3.14) keeps the heads of its object lists: every GC-tracked
/// object of the interpreter is on exactly one of them, outside a collection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcLists {
    /// `interp->gc`, from the interpreter state.
    pub gc: u64,
    /// The `PyGC_Head` of each list, from `interp->gc`: the generations (3.14.0 to 3.14.4:
    /// `young` and `old[2]`, same bytes) and the permanent generation (`gc.freeze()`).
    pub heads: [u64; 4],
}

/// 3.10 to 3.13: `trash_delete_later`, `trash_delete_nesting`, `enabled`, `debug`, then
/// `generations[3]` (24 bytes each: `PyGC_Head` and two ints), `generation0`,
/// `permanent_generation` (checked against the DWARF of pyenv's 3.10.13 to 3.13.0).
pub const GC_HEADS_3_10: [u64; 4] = [24, 48, 72, 104];
/// 3.14: `generation0` moved to the end, so the permanent generation follows the three lists
/// (DWARF of Debian's 3.14.10).
pub const GC_HEADS_3_14: [u64; 4] = [24, 48, 72, 96];
/// 3.15: the trash fields left for the thread state; `enabled` and `debug` come first (DWARF
/// of Debian's 3.15.2).
pub const GC_HEADS_3_15: [u64; 4] = [8, 32, 56, 80];

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadState {
    pub prev: u64,
    pub next: u64,
    pub interp: u64,
    pub current_frame: CurrentFrame,
    pub thread_id: u64,
    pub native_thread_id: Option<u64>,
    /// `state` (3.13+, an int: `_Py_THREAD_ATTACHED` while the thread may run Python;
    /// Include/internal/pycore_pystate.h): on a free-threaded build, which threads run.
    pub state: Option<u64>,
}

/// How a thread state leads to its innermost frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CurrentFrame {
    /// A pointer in the thread state (3.10 `frame`, 3.13 `current_frame`).
    Direct(u64),
    /// Through `_PyCFrame` (3.11, 3.12): `tstate->cframe->current_frame`.
    ViaCFrame { cframe: u64, current_frame: u64 },
}

/// Who holds the GIL: `gil->locked` and `gil->last_holder` (a `PyThreadState *`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GilLocation {
    /// In `_PyRuntime` itself (3.10, 3.11: `_PyRuntime.ceval.gil`), offsets from `_PyRuntime`.
    Runtime { locked: u64, last_holder: u64 },
    /// A pointer in the interpreter state to its `struct _gil_runtime_state` (3.12+).
    Interpreter {
        gil_ptr: u64,
        locked: u64,
        last_holder: u64,
    },
    /// Free-threaded builds have no single holder.
    None,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameModel {
    /// 3.10: a chain of `PyFrameObject`s; every frame is run by its own eval-loop call.
    FrameObject {
        f_back: u64,
        f_code: u64,
        f_lasti: u64,
        f_localsplus: u64,
        f_globals: u64,
        f_builtins: u64,
    },
    /// 3.11+: `_PyInterpreterFrame`s on the thread's data stack.
    Interpreter(InterpreterFrame),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InterpreterFrame {
    pub previous: u64,
    /// `f_code` (3.11, 3.12) or `f_executable` (3.13+).
    pub executable: u64,
    /// `prev_instr` (3.11, 3.12) or `instr_ptr` (3.13+): either way CPython's
    /// `_PyInterpreterFrame_LASTI` is `(ptr - _PyCode_CODE(code))` in code units.
    pub instr_ptr: u64,
    pub localsplus: u64,
    pub owner: u64,
    pub entry: EntryMarker,
    pub f_globals: u64,
    pub f_builtins: u64,
    /// Low bits of a `_PyStackRef` that are tags, not address (0 before 3.14, where
    /// `f_executable` and the locals became stack refs; `Py_TAG_BITS`,
    /// Include/internal/pycore_stackref.h). A value whose tag bits are all set is a tagged
    /// int (`Py_INT_TAG`), not a pointer.
    pub tag_bits: u64,
}

/// How to tell where one C-level call of the eval loop begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryMarker {
    /// 3.11: `_PyInterpreterFrame.is_entry` (a `bool` at this offset).
    IsEntry(u64),
    /// 3.12+: the eval loop pushes an entry frame whose `owner` is this value
    /// (`FRAME_OWNED_BY_CSTACK` = 3 in 3.12 and 3.13; `FRAME_OWNED_BY_INTERPRETER` = 3 in 3.14
    /// and 3.15, Include/internal/pycore_frame.h and pycore_interpframe_structs.h). Owners above
    /// it (3.14's `FRAME_OWNED_BY_CSTACK` = 4) are not Python frames either.
    ShimOwner(u8),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineTable {
    /// 3.10 `co_linetable`: (byte delta, signed line delta) pairs, Objects/lnotab_notes.txt.
    Pairs310,
    /// 3.11+ location table, Objects/locations.md.
    Locations311,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeObject {
    pub filename: u64,
    pub name: u64,
    pub qualname: Option<u64>,
    pub linetable: u64,
    pub line_table: LineTable,
    pub firstlineno: u64,
    pub argcount: u64,
    pub kwonlyargcount: Option<u64>,
    pub flags: u64,
    /// `co_stacksize` (int): the value stack's size in slots.
    pub stacksize: u64,
    /// The bytecode: inline at this offset (3.11+ `co_code_adaptive`)...
    pub co_code_adaptive: Option<u64>,
    /// ...or in the bytes object this field points to (3.10 `co_code`).
    pub co_code: Option<u64>,
    /// `co_exceptiontable` (3.11+, a bytes object; Objects/exception_handling_notes.txt).
    pub exceptiontable: Option<u64>,
    pub locals: CodeLocals,
}

/// How a frame that is entering a `with` block (its manager's `__enter__` is running) shows
/// it, and where on its value stack the manager being entered is. The value stack of 3.10 to
/// 3.13 has no valid depth while a C call runs (slots above the live top are stale), so the
/// live top is found another way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WithEntry {
    /// 3.10: the frame's `f_lasti` is at `SETUP_WITH` (`opcode`), or at the `EXTENDED_ARG`s
    /// (`extended_arg`) before it (the eval loop's `EXTENDED_ARG` dispatches without updating
    /// `f_lasti`). SETUP_WITH replaces the manager with its bound `__exit__` before calling
    /// `__enter__` and sets up its block only after (Python/ceval.c 3.10), so the top block
    /// of `f_blockstack[f_iblock]` is the enclosing one: its `b_level` is the live depth below
    /// which the entered `__exit__` cannot be.
    BlockStack {
        opcode: u8,
        extended_arg: u8,
        f_iblock: u64,
        f_blockstack: u64,
        /// `sizeof(PyTryBlock)`, `PyTryBlock.b_level` and `b_handler`
        /// (Include/cpython/frameobject.h).
        tryblock_size: u64,
        b_level: u64,
        b_handler: u64,
    },
    /// 3.11 to 3.13: `prev_instr` (3.11, 3.12) / `instr_ptr` (3.13) is at `BEFORE_WITH`
    /// (`opcode`; it has no specialized or instrumented form). The exception-table entry
    /// that covers the next instruction is the with block's own; its depth counts the live
    /// items up to and including the manager's slot (`code_object.exceptiontable`).
    ExceptionTable { opcode: u8, top: WithTop },
    /// 3.14+: no with opcode: `LOAD_SPECIAL __exit__`, `LOAD_SPECIAL __enter__`, `CALL 0`
    /// (Python/codegen.c), so while `__enter__` runs the stack holds the `__exit__` pair
    /// (unbound method, manager) right below the `__enter__` pair (Python/bytecodes.c).
    SpecialCall,
}

/// How `threading.Lock` and `threading.RLock` objects keep their state (Modules/_threadmodule.c
/// of each version). Strategies only: the offsets each implies are in src/why/locks.rs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadLocks {
    pub lock: ThreadLockModel,
    pub rlock_count: RLockCount,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadLockModel {
    /// 3.10 to 3.13.0: `lock_lock` (a `sem_t*`), `in_weakreflist`, `char locked`.
    LockedFlag,
    /// 3.13.1+ (the backport of gh-117721, PR #125116) and 3.14+: one `PyMutex`.
    PyMutex,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RLockCount {
    /// 3.10 to 3.13: `rlock_count` is the count.
    Count,
    /// 3.14+: `_PyRecursiveMutex.level` is the count less one (`rlock_repr`).
    LevelPlusOne,
}

impl ThreadLocks {
    /// 3.10 to 3.13.0.
    pub const OLD: ThreadLocks = ThreadLocks {
        lock: ThreadLockModel::LockedFlag,
        rlock_count: RLockCount::Count,
    };
}

/// A `with` block's exception handler (Python/compile.c, codegen.c 3.11 to 3.15: the cleanup
/// is `PUSH_EXC_INFO`, `WITH_EXCEPT_START`), and the depth its body's entries keep above the
/// `__exit__` slot: the bound `__exit__` (3.11 to 3.13), the function and its `self` (3.14+).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WithCleanup {
    pub push_exc_info: u8,
    pub with_except_start: u8,
    pub exit_depth: u64,
}

/// What sits in the manager's slot while its `__enter__` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WithTop {
    /// Its bound `__exit__` (3.10 SETUP_WITH, 3.11 BEFORE_WITH push it first).
    Exit,
    /// The manager itself (3.12, 3.13 BEFORE_WITH store `__exit__` after `__enter__`
    /// returns, Python/bytecodes.c).
    Manager,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeLocals {
    /// 3.10: `co_varnames`, `co_cellvars`, `co_freevars` tuples, `co_nlocals`.
    Tuples310 {
        varnames: u64,
        cellvars: u64,
        freevars: u64,
        nlocals: u64,
    },
    /// 3.11+: `co_localsplusnames` (tuple) and `co_localspluskinds` (bytes).
    LocalsPlus {
        localsplusnames: u64,
        localspluskinds: u64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PyObject {
    pub ob_type: u64,
}

impl PyObject {
    /// `PyObject_HEAD`'s size, where an object's own fields begin: `ob_type` is its last field
    /// (Include/object.h: 16 bytes; a free-threaded build's header is 32, 3.13+).
    pub fn header_size(&self) -> u64 {
        self.ob_type + 8
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeObject {
    pub tp_name: u64,
    pub tp_basicsize: u64,
    pub tp_flags: u64,
    pub tp_base: u64,
    pub tp_dictoffset: u64,
    /// `PyHeapTypeObject.ht_cached_keys`.
    pub ht_cached_keys: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VarObject {
    pub ob_size: u64,
    pub ob_item: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BytesObject {
    pub ob_size: u64,
    pub ob_sval: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnicodeObject {
    pub state: u64,
    pub length: u64,
    /// `sizeof(PyASCIIObject)`: compact ASCII data follows it.
    pub asciiobject_size: u64,
    /// `sizeof(PyCompactUnicodeObject)`: other compact data follows it.
    pub compact_size: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LongObject {
    /// Up to 3.11: `ob_size` carries sign and digit count.
    SignedSize { ob_size: u64, ob_digit: u64 },
    /// 3.12+: `long_value.lv_tag` = ndigits << 3 | sign bits (0 positive, 1 zero, 2 negative).
    Tagged { lv_tag: u64, ob_digit: u64 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FloatObject {
    pub ob_fval: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DictObject {
    pub ma_used: u64,
    pub ma_keys: u64,
    pub ma_values: u64,
    pub keys: DictKeys,
    /// Offset of the value array inside `PyDictValues` (8 in 3.13, which added a header).
    pub values_array: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DictKeys {
    /// 3.10: `dk_size`, `dk_nentries`, `dk_indices`; entries are (hash, key, value).
    V310 {
        dk_size: u64,
        dk_nentries: u64,
        dk_indices: u64,
    },
    /// 3.11+: log2 sizes and a kind; unicode-keyed tables have (key, value) entries.
    V311 {
        dk_log2_size: u64,
        dk_log2_index_bytes: u64,
        dk_kind: u64,
        dk_nentries: u64,
        dk_indices: u64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetObject {
    pub used: u64,
    pub mask: u64,
    pub table: u64,
}

/// Where an instance's `__dict__` (or its split values) lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstanceDict {
    /// `tp_dictoffset` only (3.10).
    DictOffset,
    /// 3.11: `Py_TPFLAGS_MANAGED_DICT`; dict pointer at obj-24, values pointer at obj-32.
    Managed311,
    /// 3.12: a tagged `PyDictOrValues` at obj-24 (low bit set: values pointer + 1).
    Managed312,
    /// 3.13: dict pointer at obj-24, else inline values at `tp_basicsize`
    /// (`Py_TPFLAGS_INLINE_VALUES`).
    Managed313,
}

/// `PyTypeObject.tp_flags` bits (Include/object.h, 3.10 to 3.13).
pub mod tpflags {
    pub const INLINE_VALUES: u64 = 1 << 2;
    pub const MANAGED_DICT: u64 = 1 << 4;
    /// `Py_TPFLAGS_MANAGED_WEAKREF` (3.12+).
    pub const MANAGED_WEAKREF: u64 = 1 << 3;
    pub const HEAPTYPE: u64 = 1 << 9;
    pub const HAVE_GC: u64 = 1 << 14;
    pub const TYPE_SUBCLASS: u64 = 1 << 31;
    pub const LONG_SUBCLASS: u64 = 1 << 24;
    pub const LIST_SUBCLASS: u64 = 1 << 25;
    pub const TUPLE_SUBCLASS: u64 = 1 << 26;
    pub const BYTES_SUBCLASS: u64 = 1 << 27;
    pub const UNICODE_SUBCLASS: u64 = 1 << 28;
    pub const DICT_SUBCLASS: u64 = 1 << 29;
}

/// `co_localspluskinds` bits (Include/internal/pycore_code.h, 3.11+).
pub mod localkind {
    pub const HIDDEN: u8 = 0x10;
    pub const LOCAL: u8 = 0x20;
    pub const CELL: u8 = 0x40;
    pub const FREE: u8 = 0x80;
}

/// `co_flags` bits (Include/cpython/code.h).
pub mod coflags {
    pub const VARARGS: u32 = 0x4;
    pub const VARKEYWORDS: u32 = 0x8;
    /// `CO_GENERATOR` (0x20), `CO_COROUTINE` (0x80), `CO_ASYNC_GENERATOR` (0x200), 3.10 to
    /// 3.15: code run in a frame its generator object owns.
    pub const GENERATOR_LIKE: u32 = 0x20 | 0x80 | 0x200;
    /// `CO_NO_MONITORING_EVENTS` (Include/cpython/code.h 3.13+): set on the interpreter's
    /// shim code objects, such as 3.13's `_Py_InitCleanup`.
    pub const NO_MONITORING_EVENTS: u32 = 0x0200_0000;
}

impl Layout {
    /// The built-in table for `version`, if we have one for its minor version.
    pub fn builtin(version: Version) -> Option<Layout> {
        let mut l = match (version.major, version.minor) {
            (3, 10) => v3_10::layout(),
            (3, 11) => v3_11::layout(),
            (3, 12) => v3_12::layout(),
            (3, 13) => v3_13::layout(),
            (3, 14) => v3_14::layout(),
            (3, 15) => v3_15::layout(),
            _ => return None,
        };
        l.set_version(version);
        Some(l)
    }

    /// The built-in table of a free-threaded (`--disable-gil`) build of `version`.
    pub fn builtin_free_threaded(version: Version) -> Option<Layout> {
        let mut l = match (version.major, version.minor) {
            (3, 13) => v3_13::free_threaded(),
            _ => return None,
        };
        l.set_version(version);
        Some(l)
    }

    /// The exact version, and what changed inside a minor version: 3.13.1 took
    /// `_thread.lock`'s PyMutex from 3.14 (PR #125116, merged the day after 3.13.0).
    fn set_version(&mut self, version: Version) {
        self.version = version;
        if (version.major, version.minor) == (3, 13) && version.micro >= 1 {
            self.thread_locks.lock = ThreadLockModel::PyMutex;
        }
    }

    /// Moves every offset inside a Python object by `by` bytes: a free-threaded build's larger
    /// object header. Offsets inside non-objects (thread and interpreter states, frames, dict
    /// key tables, dict value arrays) stay.
    fn shift_object_fields(&mut self, by: u64) {
        let c = &mut self.code_object;
        for f in [
            &mut c.filename,
            &mut c.name,
            &mut c.linetable,
            &mut c.firstlineno,
            &mut c.argcount,
            &mut c.flags,
            &mut c.stacksize,
        ] {
            *f += by;
        }
        for v in [
            &mut c.qualname,
            &mut c.kwonlyargcount,
            &mut c.co_code_adaptive,
            &mut c.co_code,
            &mut c.exceptiontable,
        ]
        .into_iter()
        .flatten()
        {
            *v += by;
        }
        if let CodeLocals::LocalsPlus {
            localsplusnames,
            localspluskinds,
        } = &mut c.locals
        {
            *localsplusnames += by;
            *localspluskinds += by;
        }
        let t = &mut self.type_object;
        for f in [
            &mut t.tp_name,
            &mut t.tp_basicsize,
            &mut t.tp_flags,
            &mut t.tp_base,
            &mut t.tp_dictoffset,
            &mut t.ht_cached_keys,
        ] {
            *f += by;
        }
        self.pyobject.ob_type += by;
        for v in [&mut self.tuple_object, &mut self.list_object] {
            v.ob_size += by;
            v.ob_item += by;
        }
        self.bytes_object.ob_size += by;
        self.bytes_object.ob_sval += by;
        let u = &mut self.unicode_object;
        for f in [
            &mut u.state,
            &mut u.length,
            &mut u.asciiobject_size,
            &mut u.compact_size,
        ] {
            *f += by;
        }
        if let LongObject::Tagged { lv_tag, ob_digit } = &mut self.long_object {
            *lv_tag += by;
            *ob_digit += by;
        }
        self.float_object.ob_fval += by;
        let d = &mut self.dict_object;
        for f in [&mut d.ma_used, &mut d.ma_keys, &mut d.ma_values] {
            *f += by;
        }
        let s = &mut self.set_object;
        for f in [&mut s.used, &mut s.mask, &mut s.table] {
            *f += by;
        }
        self.cell_ob_ref += by;
        self.module_md_dict += by;
        self.function_code += by;
    }

    /// Minor versions with a built-in table.
    pub const BUILTIN_MINORS: [u8; 6] = [10, 11, 12, 13, 14, 15];
}

impl Layout {
    /// This layout (the built-in table of the target's minor version) with every field the
    /// target's `_Py_DebugOffsets` gave.
    pub fn with_debug_offsets(self, d: &DebugOffsets) -> Result<Layout, ReadError> {
        let mut l = self;
        let need = |g: &str, f: &str| {
            d.get(g, f).ok_or(ReadError::new(
                0,
                0,
                ReadErrorKind::Corrupt("_Py_DebugOffsets"),
            ))
        };
        l.version = Version::from_hex(d.version).unwrap_or(l.version);
        l.source = "_Py_DebugOffsets".into();
        l.debug_offsets = Some(d.clone());
        l.free_threaded = d.free_threaded;
        l.runtime_state.interpreters_head = need("runtime_state", "interpreters_head")?;
        let is = &mut l.interpreter_state;
        is.next = need("interpreter_state", "next")?;
        is.threads_head = need("interpreter_state", "threads_head")?;
        is.id = need("interpreter_state", "id")?;
        is.imports_modules = Some(need("interpreter_state", "imports_modules")?);
        if let GilLocation::Interpreter { gil_ptr, .. } = &mut l.gil {
            *gil_ptr = need("interpreter_state", "ceval_gil")?;
        }
        if d.free_threaded {
            l.gil = GilLocation::None;
            is.gc = None;
        } else if let Some(g) = &mut is.gc {
            g.gc = need("interpreter_state", "gc")?;
        }
        let ts = &mut l.thread_state;
        ts.prev = need("thread_state", "prev")?;
        ts.next = need("thread_state", "next")?;
        ts.interp = need("thread_state", "interp")?;
        ts.current_frame = CurrentFrame::Direct(need("thread_state", "current_frame")?);
        ts.thread_id = need("thread_state", "thread_id")?;
        ts.native_thread_id = Some(need("thread_state", "native_thread_id")?);
        if let FrameModel::Interpreter(f) = &mut l.frame {
            f.previous = need("interpreter_frame", "previous")?;
            f.executable = need("interpreter_frame", "executable")?;
            f.instr_ptr = need("interpreter_frame", "instr_ptr")?;
            f.localsplus = need("interpreter_frame", "localsplus")?;
            f.owner = need("interpreter_frame", "owner")?;
            // The frame walk reads everything before `localsplus` in one read and takes these
            // fields from it.
            let words = [f.previous, f.executable, f.instr_ptr].map(|o| o.saturating_add(8));
            if words
                .into_iter()
                .chain([f.owner.saturating_add(1)])
                .any(|end| end > f.localsplus)
            {
                return Err(ReadError::corrupt(
                    0,
                    "_Py_DebugOffsets frame field after localsplus",
                ));
            }
        }
        let co = &mut l.code_object;
        co.filename = need("code_object", "filename")?;
        co.name = need("code_object", "name")?;
        co.qualname = Some(need("code_object", "qualname")?);
        co.linetable = need("code_object", "linetable")?;
        co.firstlineno = need("code_object", "firstlineno")?;
        co.argcount = need("code_object", "argcount")?;
        co.co_code_adaptive = Some(need("code_object", "co_code_adaptive")?);
        l.pyobject.ob_type = need("pyobject", "ob_type")?;
        l.type_object.tp_name = need("type_object", "tp_name")?;
        l.type_object.tp_flags = need("type_object", "tp_flags")?;
        l.tuple_object.ob_item = need("tuple_object", "ob_item")?;
        l.tuple_object.ob_size = need("tuple_object", "ob_size")?;
        l.list_object.ob_item = need("list_object", "ob_item")?;
        l.list_object.ob_size = need("list_object", "ob_size")?;
        l.dict_object.ma_keys = need("dict_object", "ma_keys")?;
        l.dict_object.ma_values = need("dict_object", "ma_values")?;
        l.float_object.ob_fval = need("float_object", "ob_fval")?;
        l.long_object = LongObject::Tagged {
            lv_tag: need("long_object", "lv_tag")?,
            ob_digit: need("long_object", "ob_digit")?,
        };
        l.bytes_object.ob_size = need("bytes_object", "ob_size")?;
        l.bytes_object.ob_sval = need("bytes_object", "ob_sval")?;
        l.unicode_object.state = need("unicode_object", "state")?;
        l.unicode_object.length = need("unicode_object", "length")?;
        l.unicode_object.asciiobject_size = need("unicode_object", "asciiobject_size")?;
        // Fields that only later versions describe: taken when present, else the built-in
        // table's value stands.
        let optional: [(&str, &str, &mut u64); 7] = [
            (
                "type_object",
                "tp_basicsize",
                &mut l.type_object.tp_basicsize,
            ),
            (
                "type_object",
                "tp_dictoffset",
                &mut l.type_object.tp_dictoffset,
            ),
            (
                "heap_type_object",
                "ht_cached_keys",
                &mut l.type_object.ht_cached_keys,
            ),
            (
                "unicode_object",
                "compactunicodeobject_size",
                &mut l.unicode_object.compact_size,
            ),
            ("set_object", "used", &mut l.set_object.used),
            ("set_object", "mask", &mut l.set_object.mask),
            ("set_object", "table", &mut l.set_object.table),
        ];
        for (g, f, slot) in optional {
            if let Some(v) = d.get(g, f) {
                *slot = v;
            }
        }
        Ok(l)
    }
}
