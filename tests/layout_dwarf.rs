//! Checks every offset of the built-in CPython layouts (src/cpython/layout) against the DWARF of
//! the pyenv builds (`$PYENV_ROOT/versions/3.X.Y/lib/libpython3.X.so.1.0`). A missing library is a
//! failure, not a skip. Each library is parsed once (all four in parallel) and shared by the tests.
//! `MAP` says where each field of the layout comes from; `flatten` lists the layout's fields from
//! its `Debug` form, so a field added to `Layout` without a row in `MAP` fails the test.

#![allow(non_upper_case_globals)]

use gimli::{constants::*, AttributeValue, DwTag, EndianSlice, RunTimeEndian};
use object::{Object, ObjectSection, ObjectSymbol};
use pyunwind::asyncio::debug_section::{self, AsyncioDebug};
use pyunwind::asyncio::layout::AsyncioLayout;
use pyunwind::binary::ElfInfo;
use pyunwind::cpython::debug_offsets::{self, DebugOffsets};
use pyunwind::cpython::layout::*;
use pyunwind::cpython::{Layout, Version};
use std::collections::HashMap;
use std::sync::OnceLock;

/// pyenv's builds (`$PYENV_ROOT/versions/V/lib/libpython3.X.so.1.0`, built with -g), then
/// Debian sid's stripped python3.14 and python3.15 with the DWARF of their -dbg packages, as
/// `make pythons` provides them (`$PYUNWIND_CACHE/pythons/debian-sid`).
/// "3.13t" is the free-threaded 3.13 that `make pythons` builds with -g (`pythons/3.13t`).
const BUILDS: [&str; 7] = [
    "3.10.13", "3.11.7", "3.12.1", "3.13.0", "3.14", "3.15", "3.13t",
];

/// (file with the DWARF, file with `_PyRuntime`'s initializer) of a build.
fn build_files(full: &str, minor: u8) -> Result<(String, String), String> {
    if minor <= 13 && !full.ends_with('t') {
        let lib = format!(
            "{}/versions/{full}/lib/libpython3.{minor}.so.1.0",
            pyenv_root()
        );
        return Ok((lib.clone(), lib));
    }
    if full.ends_with('t') {
        let lib = format!("{}/pythons/{full}/lib/libpython{full}.so.1.0", cache());
        return Ok((lib.clone(), lib));
    }
    let exe = format!("{}/usr/bin/python3.{minor}", sid_root());
    Ok((separate_debug(&exe)?, exe))
}

fn pyenv_root() -> String {
    let home = std::env::var("HOME").unwrap_or_default();
    std::env::var("PYENV_ROOT").unwrap_or(format!("{home}/.pyenv"))
}

/// `make pythons`' cache (`$PYUNWIND_CACHE`, by default `~/.cache/pyunwind`).
fn cache() -> String {
    let home = std::env::var("HOME").unwrap_or_default();
    std::env::var("PYUNWIND_CACHE").unwrap_or(format!("{home}/.cache/pyunwind"))
}

fn sid_root() -> String {
    format!("{}/pythons/debian-sid", cache())
}

/// The file of Debian's -dbg packages that holds the DWARF of the stripped `elf`, by build id.
fn separate_debug(elf: &str) -> Result<String, String> {
    let bytes = std::fs::read(elf).map_err(|e| format!("cannot read {elf} (make pythons): {e}"))?;
    let file = object::File::parse(&*bytes).map_err(|e| format!("{elf}: {e}"))?;
    let id = file
        .build_id()
        .ok()
        .flatten()
        .ok_or(format!("{elf}: no build id"))?;
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!(
        "{}/usr/lib/debug/.build-id/{}/{}.debug",
        sid_root(),
        &hex[..2],
        &hex[2..]
    ))
}

/// Every numeric field of the built-in layout (as named by `flatten`) for the minors `lo..=hi`,
/// and where it comes from: `offsetof(root, path)`, dotted through nested members; `sizeof(root)`
/// when `path` is "sizeof"; the value of enumerator `path` when `root` is an "enum"; and when
/// `root` starts with "!", the table has `None` and DWARF must lack `root.path` too.
#[rustfmt::skip]
const MAP: &[(u8, u8, &str, &str, &str)] = &[
    (10, 15, "runtime_state.interpreters_head", "_PyRuntimeState", "interpreters.head"),
    (10, 15, "interpreter_state.next", "PyInterpreterState", "next"),
    (10, 15, "interpreter_state.id", "PyInterpreterState", "id"),
    (10, 12, "interpreter_state.whence", "!PyInterpreterState", "_whence"),
    (13, 15, "interpreter_state.whence", "PyInterpreterState", "_whence"),
    (10, 10, "interpreter_state.threads_head", "PyInterpreterState", "tstate_head"),
    (11, 15, "interpreter_state.threads_head", "PyInterpreterState", "threads.head"),
    (10, 11, "interpreter_state.imports_modules", "PyInterpreterState", "modules"),
    (12, 15, "interpreter_state.imports_modules", "PyInterpreterState", "imports.modules"),
    (10, 15, "interpreter_state.gc_collecting", "PyInterpreterState", "gc.collecting"),
    (10, 15, "interpreter_state.gc.gc", "PyInterpreterState", "gc"),
    (10, 15, "interpreter_state.gc.heads.0", "struct _gc_runtime_state", "generations"),
    // The next two generations, one `struct gc_generation` (24 bytes: a `PyGC_Head` and two
    // ints) apart; the permanent one after them is checked against DWARF again.
    (10, 14, "interpreter_state.gc.heads.1", "=", "48"),
    (10, 14, "interpreter_state.gc.heads.2", "=", "72"),
    (15, 15, "interpreter_state.gc.heads.1", "=", "32"),
    (15, 15, "interpreter_state.gc.heads.2", "=", "56"),
    (10, 15, "interpreter_state.gc.heads.3", "struct _gc_runtime_state", "permanent_generation"),
    (10, 15, "thread_state.prev", "PyThreadState", "prev"),
    (10, 15, "thread_state.next", "PyThreadState", "next"),
    (10, 15, "thread_state.interp", "PyThreadState", "interp"),
    (10, 15, "thread_state.thread_id", "PyThreadState", "thread_id"),
    (10, 10, "thread_state.native_thread_id", "!PyThreadState", "native_thread_id"),
    (11, 15, "thread_state.native_thread_id", "PyThreadState", "native_thread_id"),
    (10, 10, "thread_state.current_frame.Direct", "PyThreadState", "frame"),
    (11, 12, "thread_state.current_frame.cframe", "PyThreadState", "cframe"),
    (11, 12, "thread_state.current_frame.current_frame", "_PyCFrame", "current_frame"),
    (13, 15, "thread_state.current_frame.Direct", "PyThreadState", "current_frame"),
    (10, 11, "gil.locked", "_PyRuntimeState", "ceval.gil.locked"),
    (10, 11, "gil.last_holder", "_PyRuntimeState", "ceval.gil.last_holder"),
    (12, 15, "gil.gil_ptr", "PyInterpreterState", "ceval.gil"),
    (12, 15, "gil.locked", "struct _gil_runtime_state", "locked"),
    (12, 15, "gil.last_holder", "struct _gil_runtime_state", "last_holder"),
    (10, 10, "frame.f_back", "struct _frame", "f_back"),
    (10, 10, "frame.f_code", "struct _frame", "f_code"),
    (10, 10, "frame.f_lasti", "struct _frame", "f_lasti"),
    (10, 10, "frame.f_localsplus", "struct _frame", "f_localsplus"),
    (10, 10, "frame.f_globals", "struct _frame", "f_globals"),
    (10, 10, "frame.f_builtins", "struct _frame", "f_builtins"),
    (11, 15, "frame.Interpreter.previous", "struct _PyInterpreterFrame", "previous"),
    (11, 12, "frame.Interpreter.executable", "struct _PyInterpreterFrame", "f_code"),
    (13, 15, "frame.Interpreter.executable", "struct _PyInterpreterFrame", "f_executable"),
    (11, 12, "frame.Interpreter.instr_ptr", "struct _PyInterpreterFrame", "prev_instr"),
    (13, 15, "frame.Interpreter.instr_ptr", "struct _PyInterpreterFrame", "instr_ptr"),
    (11, 15, "frame.Interpreter.localsplus", "struct _PyInterpreterFrame", "localsplus"),
    (11, 15, "frame.Interpreter.owner", "struct _PyInterpreterFrame", "owner"),
    (11, 11, "frame.Interpreter.entry.IsEntry", "struct _PyInterpreterFrame", "is_entry"),
    (12, 13, "frame.Interpreter.entry.ShimOwner", "enum _frameowner", "FRAME_OWNED_BY_CSTACK"),
    (14, 15, "frame.Interpreter.entry.ShimOwner", "enum _frameowner", "FRAME_OWNED_BY_INTERPRETER"),
    // `Py_TAG_BITS` is a macro (Include/internal/pycore_stackref.h, 3.14+): not in DWARF.
    (11, 13, "frame.Interpreter.tag_bits", "=", "0"),
    (14, 15, "frame.Interpreter.tag_bits", "=", "3"),
    (11, 15, "frame.Interpreter.f_globals", "struct _PyInterpreterFrame", "f_globals"),
    (11, 15, "frame.Interpreter.f_builtins", "struct _PyInterpreterFrame", "f_builtins"),
    (10, 15, "code_object.filename", "PyCodeObject", "co_filename"),
    (10, 15, "code_object.name", "PyCodeObject", "co_name"),
    (10, 10, "code_object.qualname", "!PyCodeObject", "co_qualname"),
    (11, 15, "code_object.qualname", "PyCodeObject", "co_qualname"),
    (10, 15, "code_object.linetable", "PyCodeObject", "co_linetable"),
    (10, 15, "code_object.firstlineno", "PyCodeObject", "co_firstlineno"),
    (10, 15, "code_object.argcount", "PyCodeObject", "co_argcount"),
    (10, 15, "code_object.kwonlyargcount", "PyCodeObject", "co_kwonlyargcount"),
    (10, 15, "code_object.flags", "PyCodeObject", "co_flags"),
    (10, 15, "code_object.stacksize", "PyCodeObject", "co_stacksize"),
    (10, 10, "code_object.co_code_adaptive", "!PyCodeObject", "co_code_adaptive"),
    (11, 15, "code_object.co_code_adaptive", "PyCodeObject", "co_code_adaptive"),
    (10, 10, "code_object.co_code", "PyCodeObject", "co_code"),
    (11, 15, "code_object.co_code", "!PyCodeObject", "co_code"),
    (10, 10, "code_object.exceptiontable", "!PyCodeObject", "co_exceptiontable"),
    (11, 15, "code_object.exceptiontable", "PyCodeObject", "co_exceptiontable"),
    (10, 10, "code_object.locals.varnames", "PyCodeObject", "co_varnames"),
    (10, 10, "code_object.locals.cellvars", "PyCodeObject", "co_cellvars"),
    (10, 10, "code_object.locals.freevars", "PyCodeObject", "co_freevars"),
    (10, 10, "code_object.locals.nlocals", "PyCodeObject", "co_nlocals"),
    (11, 15, "code_object.locals.localsplusnames", "PyCodeObject", "co_localsplusnames"),
    (11, 15, "code_object.locals.localspluskinds", "PyCodeObject", "co_localspluskinds"),
    (10, 15, "pyobject.ob_type", "PyObject", "ob_type"),
    (10, 15, "type_object.tp_name", "PyTypeObject", "tp_name"),
    (10, 15, "type_object.tp_basicsize", "PyTypeObject", "tp_basicsize"),
    (10, 15, "type_object.tp_flags", "PyTypeObject", "tp_flags"),
    (10, 15, "type_object.tp_base", "PyTypeObject", "tp_base"),
    (10, 15, "type_object.tp_dictoffset", "PyTypeObject", "tp_dictoffset"),
    (10, 15, "type_object.ht_cached_keys", "PyHeapTypeObject", "ht_cached_keys"),
    (10, 15, "tuple_object.ob_size", "PyTupleObject", "ob_base.ob_size"),
    (10, 15, "tuple_object.ob_item", "PyTupleObject", "ob_item"),
    (10, 15, "list_object.ob_size", "PyListObject", "ob_base.ob_size"),
    (10, 15, "list_object.ob_item", "PyListObject", "ob_item"),
    (10, 15, "bytes_object.ob_size", "PyBytesObject", "ob_base.ob_size"),
    (10, 15, "bytes_object.ob_sval", "PyBytesObject", "ob_sval"),
    (10, 15, "unicode_object.state", "PyASCIIObject", "state"),
    (10, 15, "unicode_object.length", "PyASCIIObject", "length"),
    (10, 15, "unicode_object.asciiobject_size", "PyASCIIObject", "sizeof"),
    (10, 15, "unicode_object.compact_size", "PyCompactUnicodeObject", "sizeof"),
    (10, 11, "long_object.ob_size", "PyLongObject", "ob_base.ob_size"),
    (10, 11, "long_object.ob_digit", "PyLongObject", "ob_digit"),
    (12, 15, "long_object.lv_tag", "PyLongObject", "long_value.lv_tag"),
    (12, 15, "long_object.ob_digit", "PyLongObject", "long_value.ob_digit"),
    (10, 15, "float_object.ob_fval", "PyFloatObject", "ob_fval"),
    (10, 15, "dict_object.ma_used", "PyDictObject", "ma_used"),
    (10, 15, "dict_object.ma_keys", "PyDictObject", "ma_keys"),
    (10, 15, "dict_object.ma_values", "PyDictObject", "ma_values"),
    (10, 10, "dict_object.keys.dk_size", "struct _dictkeysobject", "dk_size"),
    (11, 15, "dict_object.keys.dk_log2_size", "struct _dictkeysobject", "dk_log2_size"),
    (11, 15, "dict_object.keys.dk_log2_index_bytes", "struct _dictkeysobject", "dk_log2_index_bytes"),
    (11, 15, "dict_object.keys.dk_kind", "struct _dictkeysobject", "dk_kind"),
    (10, 15, "dict_object.keys.dk_nentries", "struct _dictkeysobject", "dk_nentries"),
    (10, 15, "dict_object.keys.dk_indices", "struct _dictkeysobject", "dk_indices"),
    // 3.10's `ma_values` is a bare `PyObject **`: the value array starts at the pointer.
    (10, 10, "dict_object.values_array", "=", "0"),
    (11, 15, "dict_object.values_array", "struct _dictvalues", "values"),
    (10, 15, "set_object.used", "PySetObject", "used"),
    (10, 15, "set_object.mask", "PySetObject", "mask"),
    (10, 15, "set_object.table", "PySetObject", "table"),
    (10, 15, "cell_ob_ref", "PyCellObject", "ob_ref"),
    (10, 15, "module_md_dict", "PyModuleObject", "md_dict"),
    (10, 15, "function_code", "PyFunctionObject", "func_code"),
    (10, 12, "thread_state.state", "!PyThreadState", "state"),
    (13, 15, "thread_state.state", "PyThreadState", "state"),
    // Opcodes are macros (Include/opcode.h, opcode_ids.h): not in DWARF.
    (10, 10, "with_entry.opcode", "=", "143"),
    (10, 10, "with_entry.extended_arg", "=", "144"),
    (10, 10, "with_entry.f_iblock", "struct _frame", "f_iblock"),
    (10, 10, "with_entry.f_blockstack", "struct _frame", "f_blockstack"),
    (10, 10, "with_entry.tryblock_size", "PyTryBlock", "sizeof"),
    (10, 10, "with_entry.b_level", "PyTryBlock", "b_level"),
    (10, 10, "with_entry.b_handler", "PyTryBlock", "b_handler"),
    // 3.10's with blocks are found through the block stack: no with cleanup table (a "="
    // value that is no number is None).
    (10, 10, "with_cleanup", "=", "none"),
    (11, 12, "with_cleanup.push_exc_info", "=", "35"),
    (13, 13, "with_cleanup.push_exc_info", "=", "33"),
    (14, 14, "with_cleanup.push_exc_info", "=", "32"),
    (15, 15, "with_cleanup.push_exc_info", "=", "30"),
    (11, 12, "with_cleanup.with_except_start", "=", "49"),
    (13, 13, "with_cleanup.with_except_start", "=", "44"),
    (14, 14, "with_cleanup.with_except_start", "=", "43"),
    (15, 15, "with_cleanup.with_except_start", "=", "41"),
    // The `__exit__` a with block keeps: a bound method (one slot), or 3.14+'s function and
    // `self` (two).
    (11, 13, "with_cleanup.exit_depth", "=", "1"),
    (14, 15, "with_cleanup.exit_depth", "=", "2"),
    (11, 12, "with_entry.opcode", "=", "53"),
    (13, 13, "with_entry.opcode", "=", "2"),
];

/// Every numeric leaf of the layout (but its version), read from its `{:#?}` form so that no
/// field can be left unchecked, named by its field path ("gil.locked"). A tuple variant adds its
/// name ("thread_state.current_frame.Direct"); `Some` adds nothing and `None` is kept as `None`.
/// An array's elements are named by their index ("states.suspended_yield_from.0").
fn flatten(l: &impl std::fmt::Debug) -> Vec<(String, Option<u64>)> {
    // The full names of the enclosing values, and the next index of those that are arrays.
    let (mut path, mut out) = (Vec::<(String, Option<usize>)>::new(), Vec::new());
    for line in format!("{l:#?}").lines().skip(1) {
        let line = line.trim().trim_end_matches(',');
        let (key, val) = line.split_once(": ").map_or(("", line), |(k, v)| (k, v));
        let index = match path.last_mut() {
            Some((_, Some(i))) if key.is_empty() && !matches!(val, "]" | ")" | "}") => {
                *i += 1;
                (*i - 1).to_string()
            }
            _ => String::new(),
        };
        let name = |last: &str| {
            let parent = path.last().map_or("", |p| p.0.as_str());
            let parts = [parent, key, &index, last].into_iter();
            parts
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(".")
        };
        if let Some(variant) = val.strip_suffix('(') {
            path.push((name(if variant == "Some" { "" } else { variant }), None));
        } else if val.ends_with('{') {
            path.push((name(""), None));
        } else if val == "[" {
            path.push((name(""), Some(0)));
        } else if val == "}" || val == ")" || val == "]" {
            path.pop();
        } else if let Ok(n) = val.parse::<i128>() {
            out.push((name(""), Some(n as u64)));
        } else if val == "None" {
            out.push((name(""), None));
        }
    }
    // `debug_offsets` is the target's own table, checked field by field in
    // `check_debug_offsets`.
    out.retain(|f| !f.0.starts_with("version.") && f.0 != "debug_offsets");
    out
}

type Name = &'static [u8];

/// A type DIE: struct, union, enum, typedef, qualifier, pointer, array or base type.
struct Ty {
    tag: DwTag,
    name: Option<Name>,
    size: Option<u64>,
    ty: Option<u64>,
    decl: bool,
    /// (name, offset, type) of a struct's or union's members; (name, value, _) of enumerators.
    members: Vec<(Option<Name>, u64, Option<u64>)>,
}

/// The type DIEs of one library by .debug_info offset, and its named complete definitions.
#[derive(Default)]
struct Dw {
    types: HashMap<u64, Ty>,
    names: HashMap<(u16, Name), u64>,
    /// The start of `_PyRuntime`'s initializer (3.13: CPython's own `_Py_DebugOffsets`).
    runtime_init: Option<&'static [u8]>,
}

#[rustfmt::skip]
const TYPE_TAGS: [DwTag; 10] = [
    DW_TAG_structure_type, DW_TAG_union_type, DW_TAG_enumeration_type, DW_TAG_typedef,
    DW_TAG_pointer_type, DW_TAG_const_type, DW_TAG_volatile_type, DW_TAG_atomic_type,
    DW_TAG_base_type, DW_TAG_array_type,
];

fn leak(p: &str) -> Result<&'static [u8], String> {
    let bytes = std::fs::read(p).map_err(|e| format!("cannot read {p}: {e}"))?;
    Ok(Box::leak(bytes.into_boxed_slice()))
}

fn load(full: &str, minor: u8) -> Result<Dw, String> {
    let (path, data_path) = build_files(full, minor)?;
    let (mut dw, file) = load_dwarf(&path)?;
    // A separate debug file has no section contents: the initializer is in the binary.
    let file = if data_path == path {
        file
    } else {
        object::File::parse(leak(&data_path)?).map_err(|e| format!("{data_path}: {e}"))?
    };
    let size = debug_offsets::struct_size(minor).unwrap_or(0);
    let mut syms = file.dynamic_symbols().chain(file.symbols());
    let sym = syms.find(|s| s.name() == Ok("_PyRuntime"));
    let sec = sym
        .as_ref()
        .and_then(|s| file.section_by_index(s.section_index()?).ok());
    if let (Some(sym), Some(sec)) = (sym, sec) {
        let at = (sym.address() - sec.address()) as usize;
        dw.runtime_init = sec.data().ok().and_then(|d| d.get(at..at + size));
    }
    Ok(dw)
}

/// The type DIEs of the file at `path`, and the file.
fn load_dwarf(path: &str) -> Result<(Dw, object::File<'static>), String> {
    let data = leak(path)?;
    let file = object::File::parse(data).map_err(|e| format!("{path}: {e}"))?;
    let endian = [RunTimeEndian::Big, RunTimeEndian::Little][file.is_little_endian() as usize];
    let dwarf = gimli::Dwarf::load(|id| {
        let s = file
            .section_by_name(id.name())
            .and_then(|s| s.uncompressed_data().ok())
            .map(|d| &*Box::leak(d.into_owned().into_boxed_slice()));
        Ok::<_, gimli::Error>(EndianSlice::new(s.unwrap_or(&[]), endian))
    })
    .map_err(|e| format!("{path}: {e}"))?;
    let mut dw = Dw::default();
    index(&dwarf, &mut dw).map_err(|e| format!("{path}: DWARF: {e}"))?;
    if dw.types.is_empty() {
        return Err(format!("{path} has no DWARF types (stripped?)"));
    }
    Ok((dw, file))
}

type Dwarf = gimli::Dwarf<EndianSlice<'static, RunTimeEndian>>;

fn index(dwarf: &Dwarf, dw: &mut Dw) -> gimli::Result<()> {
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let unit = dwarf.unit(header)?;
        let base = unit.header.offset().0 as u64;
        // The enclosing struct/union/enum DIEs: (depth, offset).
        let mut stack: Vec<(isize, u64)> = Vec::new();
        let mut cursor = unit.entries();
        while let Some(e) = cursor.next_dfs()? {
            let (depth, tag) = (e.depth(), e.tag());
            while stack.last().is_some_and(|s| s.0 >= depth) {
                stack.pop();
            }
            let name = e
                .attr_value(DW_AT_name)
                .map(|v| dwarf.attr_string(&unit, v));
            let name = name.and_then(|s| Some(s.ok()?.slice()));
            let ty = match e.attr_value(DW_AT_type) {
                Some(AttributeValue::UnitRef(o)) => Some(base + o.0 as u64),
                Some(AttributeValue::DebugInfoRef(o)) => Some(o.0 as u64),
                _ => None,
            };
            let udata = |at| e.attr(at).and_then(|a| a.udata_value());
            if tag == DW_TAG_member || tag == DW_TAG_enumerator {
                let Some(&(_, parent)) = stack.last().filter(|s| s.0 == depth - 1) else {
                    continue;
                };
                let value = if tag == DW_TAG_enumerator {
                    let a = e.attr(DW_AT_const_value);
                    a.and_then(|a| a.sdata_value().map(|v| v as u64).or(a.udata_value()))
                } else {
                    let bits = udata(DW_AT_data_bit_offset).map(|b| b / 8);
                    udata(DW_AT_data_member_location).or(bits)
                };
                let t = dw.types.get_mut(&parent).unwrap();
                t.members.push((name, value.unwrap_or(0), ty));
            } else if TYPE_TAGS.contains(&tag) {
                let goff = base + e.offset().0 as u64;
                let decl = e.has_attr(DW_AT_declaration);
                if let (Some(n), false) = (name, decl) {
                    dw.names.entry((tag.0, n)).or_insert(goff);
                }
                if e.has_children() && tag != DW_TAG_array_type {
                    stack.push((depth, goff));
                }
                let size = udata(DW_AT_byte_size);
                #[rustfmt::skip]
                let t = Ty { tag, name, size, ty, decl, members: Vec::new() };
                dw.types.insert(goff, t);
            }
        }
    }
    Ok(())
}

impl Dw {
    /// "struct X", "union X", "enum X", or a typedef name.
    fn lookup(&self, name: &str) -> Result<u64, String> {
        let (tag, n) = match name.split_once(' ') {
            Some(("struct", n)) => (DW_TAG_structure_type, n),
            Some(("union", n)) => (DW_TAG_union_type, n),
            Some(("enum", n)) => (DW_TAG_enumeration_type, n),
            _ => (DW_TAG_typedef, name),
        };
        let names: &HashMap<(u16, &[u8]), u64> = &self.names; // covariant in the key
        let t = names.get(&(tag.0, n.as_bytes())).copied();
        t.ok_or_else(|| format!("no type `{name}` in DWARF"))
    }

    /// Follows typedefs and qualifiers (and declarations to definitions) to the real type.
    fn peel(&self, mut t: u64) -> Result<&Ty, String> {
        for _ in 0..64 {
            let ty = self.types.get(&t).ok_or(format!("no type DIE at {t:#x}"))?;
            match ty.tag {
                DW_TAG_typedef | DW_TAG_const_type | DW_TAG_volatile_type | DW_TAG_atomic_type => {
                    t = ty.ty.ok_or("typedef of void")?;
                }
                DW_TAG_structure_type | DW_TAG_union_type | DW_TAG_enumeration_type if ty.decl => {
                    let n = ty.name.ok_or("anonymous declaration")?;
                    let def = self.names.get(&(ty.tag.0, n));
                    t = *def.ok_or(format!("no definition of {}", text(Some(n))))?;
                }
                _ => return Ok(ty),
            }
        }
        Err("typedef loop".into())
    }

    /// A member of `t`, also inside anonymous struct/union members: (offset, type).
    fn member(&self, t: &Ty, name: &str) -> Option<(u64, Option<u64>)> {
        if let Some(&(_, off, ty)) = t.members.iter().find(|m| m.0 == Some(name.as_bytes())) {
            return Some((off, ty));
        }
        t.members
            .iter()
            .filter(|m| m.0.is_none())
            .find_map(|&(_, off, ty)| {
                let (o, ty) = self.member(self.peel(ty?).ok()?, name)?;
                Some((off + o, ty))
            })
    }

    /// offsetof(root, a.b.c) through nested members.
    fn offset(&self, root: &str, path: &str) -> Result<u64, String> {
        let (mut t, mut off) = (Some(self.lookup(root)?), 0);
        for seg in path.split('.') {
            let s = self.peel(t.ok_or_else(|| format!("`{root}.{path}`: untyped member"))?)?;
            let (o, ty) = self
                .member(s, seg)
                .ok_or_else(|| format!("`{root}` has no `{path}`"))?;
            (off, t) = (off + o, ty);
        }
        Ok(off)
    }

    /// The DWARF value of a MAP row.
    fn eval(&self, root: &str, path: &str) -> Result<Option<u64>, String> {
        match root.strip_prefix('!') {
            Some(root) => Ok(self.eval(root, path).ok().flatten()),
            None if root == "=" => Ok(path.parse().ok()),
            None if root.starts_with("enum ") => self.enumerator(root, path).map(Some),
            None if path == "sizeof" => self.sizeof(root).map(Some),
            None => self.offset(root, path).map(Some),
        }
    }

    fn sizeof(&self, root: &str) -> Result<u64, String> {
        let t = self.peel(self.lookup(root)?)?;
        t.size.ok_or_else(|| format!("`{root}` has no size"))
    }

    fn enumerator(&self, ty: &str, name: &str) -> Result<u64, String> {
        let e = self.peel(self.lookup(ty)?)?;
        let m = e.members.iter().find(|m| m.0 == Some(name.as_bytes()));
        m.map(|m| m.1)
            .ok_or_else(|| format!("`{ty}` has no `{name}`"))
    }
}

/// Each library, parsed once per test binary (in parallel) on first use.
/// (build, minor, its parsed DWARF).
type Lib = (&'static str, u8, Result<Dw, String>);

fn libs() -> &'static [Lib] {
    static LIBS: OnceLock<Vec<Lib>> = OnceLock::new();
    LIBS.get_or_init(|| {
        std::thread::scope(|s| {
            let threads: Vec<_> = BUILDS
                .map(|full| {
                    let minor = Version::parse(full.trim_end_matches('t')).unwrap().minor;
                    (full, minor, s.spawn(move || load(full, minor)))
                })
                .into();
            threads
                .into_iter()
                .map(|(f, m, h)| (f, m, h.join().unwrap()))
                .collect()
        })
    })
}

/// Runs `check(version, dwarf, layout, errors)` for every build; fails once, listing everything.
fn run(check: impl Fn(&str, &Dw, &Layout, &mut Vec<String>)) {
    let (t0, mut errs) = (std::time::Instant::now(), Vec::new());
    for (full, minor, dw) in libs() {
        let free_threaded = full.ends_with('t');
        let v = format!("3.{minor}{}", if free_threaded { "t" } else { "" });
        let version = Version::new(3, *minor, 0);
        let builtin = match free_threaded {
            true => Layout::builtin_free_threaded(version),
            false => Layout::builtin(version),
        };
        match (dw, builtin) {
            (Err(e), _) => errs.push(format!("{v}: {e}")),
            (_, None) => errs.push(format!("{v}: no built-in layout")),
            (Ok(dw), Some(l)) => check(&v, dw, &l, &mut errs),
        }
    }
    eprintln!("checked in {:?}", t0.elapsed());
    let all = errs.join("\n");
    assert!(errs.is_empty(), "{} DWARF mismatch(es):\n{all}", errs.len());
}

#[test]
fn builtin_layouts_match_dwarf() {
    run(|v, dw, l, errs| {
        let ours = flatten(l);
        let minor = l.version.minor;
        // A free-threaded build has no single GIL (`GilLocation::None`).
        let rows: Vec<_> = MAP
            .iter()
            .filter(|r| (r.0..=r.1).contains(&minor))
            // A free-threaded build keeps no GC lists (`interpreter_state.gc` is None).
            .filter(|r| {
                !(l.free_threaded
                    && (r.2.starts_with("gil.") || r.2.starts_with("interpreter_state.gc.")))
            })
            .collect();
        for (f, value) in ours
            .iter()
            .filter(|o| !(l.free_threaded && (o.0 == "gil" || o.0 == "interpreter_state.gc")))
            .filter(|o| rows.iter().filter(|r| r.2 == o.0).count() != 1)
        {
            errs.push(format!(
                "{v}: {f} = {value:?} has no single DWARF path in MAP"
            ));
        }
        for &&(_, _, field, root, path) in &rows {
            let Some(&(_, value)) = ours.iter().find(|o| o.0 == field) else {
                errs.push(format!(
                    "{v}: {field} (DWARF {root} {path}) is not in the layout"
                ));
                continue;
            };
            match dw.eval(root, path) {
                Ok(d) if d == value => {}
                Ok(d) => errs.push(format!(
                    "{v}: {field} = {value:?}, DWARF {root} {path} = {d:?}"
                )),
                Err(e) => errs.push(format!(
                    "{v}: {field} = {value:?}, DWARF {root} {path}: {e}"
                )),
            }
        }
        if minor >= 13 {
            check_debug_offsets(v, dw, l, errs);
        }
    });
}

/// 3.13+: the shape of `_Py_DebugOffsets` that `DebugOffsets::parse` assumes, and CPython's own
/// table in `_PyRuntime`'s initializer laid over the built-in layout.
fn check_debug_offsets(v: &str, dw: &Dw, l: &Layout, errs: &mut Vec<String>) {
    const DO: &str = "struct _Py_DebugOffsets";
    let minor = l.version.minor;
    let size = debug_offsets::struct_size(minor).unwrap_or(0);
    if dw.eval(DO, "sizeof") != Ok(Some(size as u64)) {
        errs.push(format!(
            "{v}: sizeof({DO}): we read {size}, DWARF {:?}",
            dw.eval(DO, "sizeof")
        ));
    }
    // A table in which every field holds its own offset in the DWARF struct: `parse` must read
    // each DWARF (group, field) from there.
    let Ok(root) = dw.lookup(DO).and_then(|t| dw.peel(t)) else {
        return;
    };
    let mut buf = vec![0u8; size];
    buf[..8].copy_from_slice(b"xdebugpy");
    let hex = 0x030000f0u64 | (minor as u64) << 16;
    buf[8..16].copy_from_slice(&hex.to_le_bytes());
    let mut fields = Vec::new();
    for (g, goff, gty) in &root.members {
        let Some(group) = gty.and_then(|t| dw.peel(t).ok()) else {
            continue;
        };
        for (f, foff, _) in group
            .members
            .iter()
            .filter(|_| group.tag == DW_TAG_structure_type)
        {
            let (g, f, at) = (text(*g), text(*f), goff + foff);
            let value: u64 = if f == "size" { 1 << 20 } else { at };
            buf[at as usize..at as usize + 8].copy_from_slice(&value.to_le_bytes());
            fields.extend((f != "size").then_some((g, f, at)));
        }
    }
    if fields.len() < 50 {
        errs.push(format!("{v}: only {} {DO} fields in DWARF", fields.len()));
    }
    match DebugOffsets::parse(&buf) {
        Ok(parsed) => {
            for (g, f, at) in fields {
                if parsed.get(&g, &f) != Some(at) {
                    let got = parsed.get(&g, &f);
                    errs.push(format!(
                        "{v}: DebugOffsets reads {g}.{f} at {got:?}, DWARF {at}"
                    ));
                }
            }
        }
        Err(e) => errs.push(format!(
            "{v}: DebugOffsets::parse of the DWARF-shaped table: {e}"
        )),
    }
    // CPython's own table, applied over the built-in layout, must change nothing.
    let Some(init) = dw.runtime_init else {
        return errs.push(format!("{v}: no `_PyRuntime` initializer in the library"));
    };
    let real = DebugOffsets::parse(init).map_err(String::from);
    match real.and_then(|d| {
        l.clone()
            .with_debug_offsets(&d)
            .map_err(|e| format!("{e:?}"))
    }) {
        Ok(real) => {
            let real = Layout {
                source: l.source.clone(),
                version: l.version,
                debug_offsets: l.debug_offsets.clone(),
                ..real
            };
            let (ours, real) = (format!("{l:#?}"), format!("{real:#?}"));
            for (o, r) in ours.lines().zip(real.lines()).filter(|(o, r)| o != r) {
                let (o, r) = (o.trim(), r.trim());
                errs.push(format!(
                    "{v}: built-in `{o}`, _PyRuntime's _Py_DebugOffsets `{r}`"
                ));
            }
        }
        Err(e) => errs.push(format!("{v}: _PyRuntime's _Py_DebugOffsets: {e}")),
    }
}

fn text(name: Option<Name>) -> String {
    String::from_utf8_lossy(name.unwrap_or(b"?")).into_owned()
}

#[test]
fn frame_owner_constants() {
    run(|v, dw, l, errs| {
        let FrameModel::Interpreter(f) = l.frame else {
            return;
        };
        // The eval loop's entry frame: owned by the C stack up to 3.13, by the interpreter
        // from 3.14.
        let owner = match l.version.minor {
            ..=13 => "FRAME_OWNED_BY_CSTACK",
            _ => "FRAME_OWNED_BY_INTERPRETER",
        };
        let cstack = dw.enumerator("enum _frameowner", owner);
        match (l.version.minor, f.entry, cstack) {
            (12.., EntryMarker::ShimOwner(o), Ok(d)) if o as u64 == d => {}
            (11, EntryMarker::IsEntry(_), Err(_)) => {} // 3.11 has no shim frames
            (_, e, d) => errs.push(format!("{v}: frame.entry = {e:?}, {owner} {d:?}")),
        }
    });
}

/// The `_asyncio` extension module of a build: (file with its DWARF, the module itself), or
/// `None` when the interpreter has it built in (Debian's 3.15).
fn asyncio_module_files(full: &str, minor: u8) -> Result<Option<(String, String)>, String> {
    const SO: &str = "x86_64-linux-gnu.so";
    let so = match (minor, full.ends_with('t')) {
        (15, _) => return Ok(None),
        (14, _) => format!(
            "{}/usr/lib/python3.14/lib-dynload/_asyncio.cpython-314-{SO}",
            sid_root()
        ),
        (_, true) => format!(
            "{}/pythons/{full}/lib/python{full}/lib-dynload/_asyncio.cpython-{}-{SO}",
            cache(),
            full.replace('.', "")
        ),
        _ => format!(
            "{}/versions/{full}/lib/python3.{minor}/lib-dynload/_asyncio.cpython-3{minor}-{SO}",
            pyenv_root()
        ),
    };
    let debug = if minor >= 14 {
        separate_debug(&so)?
    } else {
        so.clone()
    };
    Ok(Some((debug, so)))
}

/// Every numeric field of `AsyncioLayout` (as named by `flatten`) for the minors `lo..=hi`, as
/// `MAP`; a field may have several rows (the same member seen from `TaskObj` and `FutureObj`),
/// each must hold. Types are looked up in the interpreter's DWARF, then in `_asyncio`'s.
/// `_functools` (`partialobject`) is built into every build's interpreter.
#[rustfmt::skip]
const ASYNCIO_MAP: &[(u8, u8, &str, &str, &str)] = &[
    (11, 15, "future.loop_", "TaskObj", "task_loop"),
    (11, 15, "future.loop_", "FutureObj", "fut_loop"),
    (11, 15, "future.callback0", "TaskObj", "task_callback0"),
    (11, 15, "future.callback0", "FutureObj", "fut_callback0"),
    (11, 15, "future.callbacks", "TaskObj", "task_callbacks"),
    (11, 15, "future.callbacks", "FutureObj", "fut_callbacks"),
    (11, 15, "future.state", "TaskObj", "task_state"),
    (11, 15, "future.state", "FutureObj", "fut_state"),
    (11, 13, "future.awaited_by", "!TaskObj", "task_awaited_by"),
    (14, 15, "future.awaited_by.field", "TaskObj", "task_awaited_by"),
    (14, 15, "future.awaited_by.field", "FutureObj", "fut_awaited_by"),
    (14, 15, "future.awaited_by.is_set", "TaskObj", "task_awaited_by_is_set"),
    (14, 15, "future.awaited_by.is_set", "FutureObj", "fut_awaited_by_is_set"),
    (11, 15, "task.fut_waiter", "TaskObj", "task_fut_waiter"),
    (11, 15, "task.coro", "TaskObj", "task_coro"),
    (11, 15, "task.name", "TaskObj", "task_name"),
    (11, 15, "gen.frame_state", "PyGenObject", "gi_frame_state"),
    (11, 15, "gen.iframe", "PyGenObject", "gi_iframe"),
    (11, 15, "states.created", "enum _framestate", "FRAME_CREATED"),
    (11, 15, "states.suspended", "enum _framestate", "FRAME_SUSPENDED"),
    (11, 12, "states.suspended_yield_from.0", "!enum _framestate", "FRAME_SUSPENDED_YIELD_FROM"),
    (13, 15, "states.suspended_yield_from.0", "enum _framestate", "FRAME_SUSPENDED_YIELD_FROM"),
    (11, 14, "states.suspended_yield_from.1",
        "!enum _framestate", "FRAME_SUSPENDED_YIELD_FROM_LOCKED"),
    (15, 15, "states.suspended_yield_from.1",
        "enum _framestate", "FRAME_SUSPENDED_YIELD_FROM_LOCKED"),
    (11, 15, "states.executing", "enum _framestate", "FRAME_EXECUTING"),
    // 3.15 has no FRAME_COMPLETED: a finished generator is FRAME_CLEARED.
    (11, 14, "states.first_done", "enum _framestate", "FRAME_COMPLETED"),
    (15, 15, "states.first_done", "enum _framestate", "FRAME_CLEARED"),
    // RESUME 151, RESUME_QUICK 150 (3.11), INSTRUMENTED_RESUME 240 (3.12): macros of
    // Include/opcode.h, not in DWARF.
    (11, 12, "yield_from.opcodes.0", "=", "151"),
    (11, 11, "yield_from.opcodes.1", "=", "150"),
    (12, 12, "yield_from.opcodes.1", "=", "240"),
    (11, 13, "stack_top.stacktop", "struct _PyInterpreterFrame", "stacktop"),
    (14, 15, "stack_top.stackpointer", "struct _PyInterpreterFrame", "stackpointer"),
    // Python/ceval_macros.h / bytecodes.c `SEND`: 3.15 keeps a NULL above the awaited object.
    (14, 14, "stack_top.below", "=", "1"),
    (15, 15, "stack_top.below", "=", "2"),
    (11, 12, "running_loop.dict", "PyThreadState", "dict"),
    (11, 11, "running_loop.holder_loop", "PyRunningLoopHolder", "rl_loop"),
    (12, 12, "running_loop.holder_loop", "!PyRunningLoopHolder", "rl_loop"),
    (13, 15, "running_loop.running_loop", "_PyThreadStateImpl", "asyncio_running_loop"),
    (11, 13, "task_lists", "!_PyThreadStateImpl", "asyncio_tasks_head"),
    (14, 15, "task_lists.thread_head", "_PyThreadStateImpl", "asyncio_tasks_head"),
    (14, 15, "task_lists.interp_head", "PyInterpreterState", "asyncio_tasks_head"),
    (14, 15, "task_lists.task_node", "TaskObj", "task_node"),
    (14, 15, "task_lists.node_next", "struct llist_node", "next"),
    (14, 15, "task_lists.node_prev", "struct llist_node", "prev"),
    (11, 13, "module_state", "!asyncio_state", "non_asyncio_tasks"),
    (14, 15, "module_state.md_state", "PyModuleObject", "md_state"),
    (14, 15, "module_state.non_asyncio_tasks", "asyncio_state", "non_asyncio_tasks"),
    (14, 15, "module_state.non_asyncio_eager_tasks", "asyncio_state", "non_asyncio_eager_tasks"),
    (11, 15, "future_iter_future", "futureiterobject", "future"),
    (11, 15, "asend_gen", "PyAsyncGenASend", "ags_gen"),
    (11, 15, "asend_gen", "PyAsyncGenAThrow", "agt_gen"),
    (11, 15, "weakref_object", "PyWeakReference", "wr_object"),
    (11, 15, "cfunction_self", "PyCFunctionObject", "m_self"),
    (11, 15, "method_self", "PyMethodObject", "im_self"),
    (11, 15, "function_closure", "PyFunctionObject", "func_closure"),
    (11, 15, "partial_args", "partialobject", "args"),
];

/// A MAP row's value in the first of `dws` that has its type (for a "!" row: in none).
fn eval_in(dws: &[&Dw], root: &str, path: &str) -> Result<Option<u64>, String> {
    let mut errs = Vec::new();
    for dw in dws {
        match dw.eval(root, path) {
            Ok(None) => {}
            Ok(d) => return Ok(d),
            Err(e) => errs.push(e),
        }
    }
    match root.starts_with('!') {
        true => Ok(None),
        false => Err(errs.join("; ")),
    }
}

/// The asyncio layout the product builds for a build: built in up to 3.13; from 3.14 on from
/// the `.AsyncioDebug` section of the file that defines `_asyncio` and the interpreter's own
/// `_Py_DebugOffsets` (in `_PyRuntime`'s initializer, itself checked against DWARF above).
fn product_asyncio_layout(full: &str, dw: &Dw, l: &Layout) -> Result<AsyncioLayout, String> {
    let minor = l.version.minor;
    if minor <= 13 {
        return AsyncioLayout::for_target(l, None);
    }
    let init = dw.runtime_init.ok_or("no `_PyRuntime` initializer")?;
    let offsets = DebugOffsets::parse(init).map_err(|e| format!("_Py_DebugOffsets: {e}"))?;
    let l = l
        .clone()
        .with_debug_offsets(&offsets)
        .map_err(|e| format!("{e:?}"))?;
    let file = match asyncio_module_files(full, minor)? {
        Some((_, so)) => so,
        None => build_files(full, minor)?.1,
    };
    let section = ElfInfo::section_data(&file, debug_section::SECTION)
        .map_err(|e| format!("{e}"))?
        .ok_or(format!("{file} has no {}", debug_section::SECTION))?;
    let dbg = AsyncioDebug::parse(&section, &file).map_err(|e| format!("{file}: {e}"))?;
    let lay = AsyncioLayout::for_target(&l, Some(&dbg))?;
    match lay.c_objects {
        true => Ok(lay),
        false => Err(format!("layout without C objects: {}", lay.source)),
    }
}

#[test]
fn asyncio_layouts_match_dwarf() {
    let full_of = |minor: u8, ft: bool| {
        let b = BUILDS.iter().find(|b| {
            b.ends_with('t') == ft
                && Version::parse(b.trim_end_matches('t')).unwrap().minor == minor
        });
        b.copied().unwrap_or_default()
    };
    run(|v, dw, l, errs| {
        let minor = l.version.minor;
        if minor < 11 {
            return; // asyncio tasks are read from 3.11 on
        }
        let full = full_of(minor, l.free_threaded);
        let module = match asyncio_module_files(full, minor) {
            Ok(Some((debug, _))) => match load_dwarf(&debug) {
                Ok((m, _)) => Some(m),
                Err(e) => return errs.push(format!("{v}: _asyncio: {e}")),
            },
            Ok(None) => None,
            Err(e) => return errs.push(format!("{v}: _asyncio: {e}")),
        };
        let dws: Vec<&Dw> = [Some(dw), module.as_ref()].into_iter().flatten().collect();
        let lay = match product_asyncio_layout(full, dw, l) {
            Ok(lay) => lay,
            Err(e) => return errs.push(format!("{v}: asyncio layout: {e}")),
        };
        let ours = flatten(&lay);
        let rows: Vec<_> = ASYNCIO_MAP
            .iter()
            .filter(|r| (r.0..=r.1).contains(&minor))
            .collect();
        for (f, value) in ours.iter().filter(|o| !rows.iter().any(|r| r.2 == o.0)) {
            errs.push(format!(
                "{v}: asyncio {f} = {value:?} has no DWARF path in ASYNCIO_MAP"
            ));
        }
        for &&(_, _, field, root, path) in &rows {
            let Some(&(_, value)) = ours.iter().find(|o| o.0 == field) else {
                errs.push(format!(
                    "{v}: asyncio {field} (DWARF {root} {path}) is not in the layout"
                ));
                continue;
            };
            match eval_in(&dws, root, path) {
                Ok(d) if d == value => {}
                Ok(d) => errs.push(format!(
                    "{v}: asyncio {field} = {value:?}, DWARF {root} {path} = {d:?}"
                )),
                Err(e) => errs.push(format!(
                    "{v}: asyncio {field} = {value:?}, DWARF {root} {path}: {e}"
                )),
            }
        }
    });
}

/// The JIT map's built-in tables (src/native/jit/tables.rs), each against the DWARF of the
/// build it names: Debian sid's python3.14/3.15 and their pydebug builds (python3.14d/3.15d).
#[test]
fn jit_tables_match_dwarf() {
    use pyunwind::native::jit::{builtin_tables, ExecutorRoots};
    let tables = builtin_tables();
    let dwarfs: Vec<Result<Dw, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = tables
            .iter()
            .map(|t| {
                let debug = if t.source.contains("(pydebug)") {
                    "d"
                } else {
                    ""
                };
                let exe = format!("{}/usr/bin/python3.{}{debug}", sid_root(), t.minor);
                // The pydebug builds keep their DWARF; the others' is in the -dbg package.
                let file = if debug.is_empty() {
                    separate_debug(&exe)
                } else {
                    Ok(exe)
                };
                s.spawn(move || Ok(load_dwarf(&file?)?.0))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut errs = Vec::new();
    for (t, dw) in tables.iter().zip(&dwarfs) {
        let dw = match dw {
            Ok(dw) => dw,
            Err(e) => {
                errs.push(format!("{}: {e}", t.source));
                continue;
            }
        };
        let mut rows = vec![
            ("_PyRuntimeState", "sizeof", t.runtime_size),
            ("PyInterpreterState", "sizeof", t.interp_size),
            (
                "PyInterpreterState",
                "executor_deletion_list_head",
                t.deletion_head,
            ),
            (
                "_PyRuntimeState",
                "ceval.perf.code_arena",
                t.perf_code_arena,
            ),
            ("_PyExecutorObject", "vm_data.links.next", t.links_next),
            ("_PyExecutorObject", "vm_data.code", t.vm_code),
            ("_PyExecutorObject", "jit_size", t.jit_size),
            ("_PyExecutorObject", "jit_code", t.jit_code),
        ];
        match t.roots {
            ExecutorRoots::List { head } => {
                rows.push(("PyInterpreterState", "executor_list_head", head))
            }
            ExecutorRoots::Array { ptrs, count, cold } => rows.extend([
                ("PyInterpreterState", "executor_ptrs", ptrs),
                ("PyInterpreterState", "executor_count", count),
                ("PyInterpreterState", "cold_executor", cold[0]),
                ("PyInterpreterState", "cold_dynamic_executor", cold[1]),
            ]),
        }
        for (root, path, value) in rows {
            match dw.eval(root, path) {
                Ok(Some(d)) if d == value => {}
                other => errs.push(format!(
                    "{}: {root} {path} = {value:#x} in the table, DWARF {other:?}",
                    t.source
                )),
            }
        }
    }
    assert!(
        errs.is_empty(),
        "JIT table mismatch(es):\n{}",
        errs.join("\n")
    );
}

/// src/cpython/layout/mimalloc.rs's offsets (the free-threaded heaps `--heap` walks) against the
/// DWARF of the free-threaded build; a free-threaded build without them is a failure too.
#[test]
fn mimalloc_layout_matches_dwarf() {
    run(|v, dw, l, errs| {
        if !l.free_threaded {
            return;
        }
        let Some(mi) = l.mimalloc() else {
            errs.push(format!("{v}: no mimalloc layout"));
            return;
        };
        let rows = [
            ("_PyThreadStateImpl", "mimalloc", mi.tstate_mimalloc),
            ("struct _mimalloc_thread_state", "heaps", mi.heaps),
            (
                "struct _mimalloc_thread_state",
                "initialized",
                mi.initialized,
            ),
            ("mi_heap_t", "sizeof", mi.heap_size),
            ("mi_heap_t", "pages", mi.heap_pages),
            (
                "mi_heap_t",
                "thread_delayed_free",
                mi.heap_thread_delayed_free,
            ),
            (
                "PyInterpreterState",
                "mimalloc.abandoned_pool",
                mi.interp_pool,
            ),
            ("mi_abandoned_pool_t", "abandoned_visited", mi.pool_visited),
            ("mi_abandoned_pool_t", "abandoned", mi.pool_abandoned),
            ("mi_segment_t", "abandoned_next", mi.segment_abandoned_next),
            ("mi_segment_t", "slice_entries", mi.segment_slice_entries),
            ("mi_segment_t", "slices", mi.segment_slices),
            ("mi_page_t", "sizeof", mi.page_size),
            ("mi_slice_t", "sizeof", mi.page_size),
            ("PyObject", "ob_gc_bits", mi.ob_gc_bits),
            (
                "_PyRuntimeState",
                "allocators.is_debug_enabled",
                mi.runtime_debug_enabled,
            ),
            // The page fields mimalloc.rs reads at fixed offsets.
            ("mi_page_t", "slice_count", 0),
            ("mi_page_t", "capacity", 10),
            ("mi_page_t", "free", 16),
            ("mi_page_t", "used", 24),
            ("mi_page_t", "xblock_size", 28),
            ("mi_page_t", "local_free", 32),
            ("mi_page_t", "xthread_free", 40),
            ("mi_page_t", "xheap", 48),
            ("mi_page_t", "next", 56),
        ];
        for (root, path, ours) in rows {
            match dw.eval(root, path) {
                Ok(Some(d)) if d == ours => {}
                r => errs.push(format!(
                    "{v}: mimalloc `{root}.{path}` = {ours}, DWARF {r:?}"
                )),
            }
        }
    });
}

/// src/cpython/layout/objects.rs's offsets and version facts (the heap walk's and the greenlet
/// reader's) against the DWARF of each build. A `!` row's type or field may be missing: the
/// layout must then say None.
#[test]
fn object_offsets_match_dwarf() {
    run(|v, dw, l, errs| {
        let to = &l.type_object;
        let present = |b: bool| b.then_some(1);
        let rows: [(&str, &str, Option<u64>); 26] = [
            ("PyObject", "sizeof", Some(l.pyobject.header_size())),
            ("PyVarObject", "sizeof", Some(l.var_header_size())),
            ("PyTypeObject", "tp_dict", Some(to.tp_dict())),
            ("PyTypeObject", "tp_bases", Some(to.tp_bases())),
            ("PyTypeObject", "tp_mro", Some(to.tp_mro())),
            ("PyTypeObject", "tp_members", Some(to.tp_members())),
            ("PyTypeObject", "tp_subclasses", Some(to.tp_subclasses())),
            ("PyTypeObject", "tp_call", Some(to.tp_call())),
            (
                "PyTypeObject",
                "tp_vectorcall_offset",
                Some(to.tp_vectorcall_offset()),
            ),
            ("PyTypeObject", "sizeof", Some(to.static_type_size())),
            ("PyHeapTypeObject", "ht_qualname", Some(to.ht_qualname())),
            ("PyListObject", "allocated", Some(l.list_allocated())),
            ("PySetObject", "smalltable", Some(l.set_smalltable())),
            ("PyByteArrayObject", "ob_alloc", Some(l.bytearray_alloc())),
            ("dequeobject", "leftblock", Some(l.deque_leftblock())),
            ("dequeobject", "leftindex", Some(l.deque_leftindex())),
            (
                "PyFunctionObject",
                "func_defaults",
                Some(l.function_defaults()),
            ),
            (
                "PyFunctionObject",
                "func_kwdefaults",
                Some(l.function_kwdefaults()),
            ),
            (
                "PyFunctionObject",
                "func_closure",
                Some(l.function_closure()),
            ),
            ("!struct _frame", "f_frame", l.frame_object_f_frame()),
            (
                "!PyCodeObject",
                "co_cell2arg",
                l.opcache310().map(|o| o.cell2arg),
            ),
            (
                "!PyCodeObject",
                "co_opcache",
                l.opcache310().map(|o| o.opcache),
            ),
            (
                "!PyCodeObject",
                "co_opcache_size",
                l.opcache310().map(|o| o.opcache_size),
            ),
            (
                "!_PyOpcache",
                "sizeof",
                l.opcache310().map(|_| Opcache310::ENTRY),
            ),
            // Whether the field exists at all.
            ("!PyASCIIObject", "wstr", present(l.str_has_wstr())),
            (
                "!PyByteArrayObject",
                "ob_bytes_object",
                present(l.bytearray_bytes_backed()),
            ),
        ];
        for (root, path, ours) in rows {
            let d = dw.eval(root, path);
            let same = match (&d, path) {
                (Ok(d), "wstr" | "ob_bytes_object") => d.is_some() == ours.is_some(),
                (Ok(d), _) => *d == ours,
                (Err(_), _) => false,
            };
            if !same {
                errs.push(format!("{v}: {root} {path}: ours {ours:?}, DWARF {d:?}"));
            }
        }
    });
}
