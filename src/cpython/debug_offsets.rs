//! `_Py_DebugOffsets` (Include/internal/pycore_debug_offsets.h, 3.13): CPython's own table of
//! offsets at the start of `_PyRuntime`. Read from the target, validated, and laid over the
//! built-in table of the same minor version (which supplies what it lacks).

use super::version::Version;
use crate::error::ReadError;
use crate::memory::Memory;

pub const COOKIE: &[u8; 8] = b"xdebugpy";
/// pystack's rule: no structure described by the offsets is over 1 MiB.
const MAX_STRUCT_SIZE: u64 = 1 << 20;
/// The largest shape we know (3.15: 888 bytes).
const READ_SIZE: usize = 888;

/// One group of the struct: its name, whether it starts with `size` (the size of the CPython
/// structure it describes), and its fields in declaration order.
pub type Group = (&'static str, bool, &'static [&'static str]);

const RUNTIME: Group = ("runtime_state", true, &["finalizing", "interpreters_head"]);
const INTERP_3_13: &[&str] = &[
    "id",
    "next",
    "threads_head",
    "gc",
    "imports_modules",
    "sysdict",
    "builtins",
    "ceval_gil",
    "gil_runtime_state",
    "gil_runtime_state_enabled",
    "gil_runtime_state_locked",
    "gil_runtime_state_holder",
];
const INTERP_3_14: &[&str] = &[
    "id",
    "next",
    "threads_head",
    "threads_main",
    "gc",
    "imports_modules",
    "sysdict",
    "builtins",
    "ceval_gil",
    "gil_runtime_state",
    "gil_runtime_state_enabled",
    "gil_runtime_state_locked",
    "gil_runtime_state_holder",
    "code_object_generation",
    "tlbc_generation",
];
const THREAD_3_13: &[&str] = &[
    "prev",
    "next",
    "interp",
    "current_frame",
    "thread_id",
    "native_thread_id",
    "datastack_chunk",
    "status",
];
const THREAD_3_15: &[&str] = &[
    "prev",
    "next",
    "interp",
    "current_frame",
    "base_frame",
    "last_profiled_frame",
    "last_profiled_frame_seq",
    "thread_id",
    "native_thread_id",
    "datastack_chunk",
    "status",
    "holds_gil",
    "gil_requested",
    "current_exception",
    "exc_state",
];
const FRAME_3_13: &[&str] = &["previous", "executable", "instr_ptr", "localsplus", "owner"];
const FRAME_3_14: &[&str] = &[
    "previous",
    "executable",
    "instr_ptr",
    "localsplus",
    "owner",
    "stackpointer",
    "tlbc_index",
];
const CODE_3_13: &[&str] = &[
    "filename",
    "name",
    "qualname",
    "linetable",
    "firstlineno",
    "argcount",
    "localsplusnames",
    "localspluskinds",
    "co_code_adaptive",
];
const CODE_3_14: &[&str] = &[
    "filename",
    "name",
    "qualname",
    "linetable",
    "firstlineno",
    "argcount",
    "localsplusnames",
    "localspluskinds",
    "co_code_adaptive",
    "co_tlbc",
];
const PYOBJECT: Group = ("pyobject", true, &["ob_type"]);
const TYPE_3_13: Group = ("type_object", true, &["tp_name", "tp_repr", "tp_flags"]);
const TUPLE: Group = ("tuple_object", true, &["ob_item", "ob_size"]);
const LIST: Group = ("list_object", true, &["ob_item", "ob_size"]);
const SET: Group = ("set_object", true, &["used", "table", "mask"]);
const DICT: Group = ("dict_object", true, &["ma_keys", "ma_values"]);
const FLOAT: Group = ("float_object", true, &["ob_fval"]);
const LONG: Group = ("long_object", true, &["lv_tag", "ob_digit"]);
const BYTES: Group = ("bytes_object", true, &["ob_size", "ob_sval"]);
const UNICODE_3_13: Group = (
    "unicode_object",
    true,
    &["state", "length", "asciiobject_size"],
);
const GEN: Group = (
    "gen_object",
    true,
    &["gi_name", "gi_iframe", "gi_frame_state"],
);
const LLIST: Group = ("llist_node", false, &["next", "prev"]);
const DEBUGGER: Group = (
    "debugger_support",
    false,
    &[
        "eval_breaker",
        "remote_debugger_support",
        "remote_debugging_enabled",
        "debugger_pending_call",
        "debugger_script_path",
        "debugger_script_path_size",
    ],
);

/// Include/internal/pycore_debug_offsets.h, 3.13.
const SHAPE_3_13: &[Group] = &[
    RUNTIME,
    ("interpreter_state", true, INTERP_3_13),
    ("thread_state", true, THREAD_3_13),
    ("interpreter_frame", true, FRAME_3_13),
    ("code_object", true, CODE_3_13),
    PYOBJECT,
    TYPE_3_13,
    TUPLE,
    LIST,
    DICT,
    FLOAT,
    LONG,
    BYTES,
    UNICODE_3_13,
    ("gc", true, &["collecting"]),
];

/// 3.14: a set group, generators, the remote-debugging groups (which have no `size`).
const SHAPE_3_14: &[Group] = &[
    RUNTIME,
    ("interpreter_state", true, INTERP_3_14),
    ("thread_state", true, THREAD_3_13),
    ("interpreter_frame", true, FRAME_3_14),
    ("code_object", true, CODE_3_14),
    PYOBJECT,
    TYPE_3_13,
    TUPLE,
    LIST,
    SET,
    DICT,
    FLOAT,
    LONG,
    BYTES,
    UNICODE_3_13,
    ("gc", true, &["collecting"]),
    GEN,
    LLIST,
    DEBUGGER,
];

/// 3.15: more thread-state fields, the exception stack item, type sizes and heap types.
const SHAPE_3_15: &[Group] = &[
    RUNTIME,
    ("interpreter_state", true, INTERP_3_14),
    ("thread_state", true, THREAD_3_15),
    ("err_stackitem", false, &["exc_value"]),
    ("interpreter_frame", true, FRAME_3_14),
    ("code_object", true, CODE_3_14),
    PYOBJECT,
    (
        "type_object",
        true,
        &[
            "tp_name",
            "tp_repr",
            "tp_flags",
            "tp_basicsize",
            "tp_dictoffset",
        ],
    ),
    ("heap_type_object", true, &["ht_cached_keys"]),
    TUPLE,
    LIST,
    SET,
    DICT,
    FLOAT,
    LONG,
    BYTES,
    (
        "unicode_object",
        true,
        &[
            "state",
            "length",
            "asciiobject_size",
            "compactunicodeobject_size",
        ],
    ),
    (
        "gc",
        true,
        &[
            "collecting",
            "frame",
            "generation_stats_size",
            "generation_stats",
        ],
    ),
    GEN,
    LLIST,
    DEBUGGER,
];

/// The shape of a minor version's struct.
fn shape(minor: u8) -> Option<&'static [Group]> {
    match minor {
        13 => Some(SHAPE_3_13),
        14 => Some(SHAPE_3_14),
        15 => Some(SHAPE_3_15),
        _ => None,
    }
}

/// Where each sized group's `size` word sits in a 3.`minor` struct (for building tables in
/// tests; readers use [`DebugOffsets::size`]).
pub fn size_words(minor: u8) -> Vec<(&'static str, u64)> {
    let mut out = Vec::new();
    let mut at = 24;
    for (group, sized, fields) in shape(minor).unwrap_or_default() {
        if *sized {
            out.push((*group, at));
            at += 8;
        }
        at += 8 * fields.len() as u64;
    }
    out
}

/// `sizeof(_Py_DebugOffsets)` for a shape.
pub fn struct_size(minor: u8) -> Option<usize> {
    let groups = shape(minor)?;
    Some(
        24 + groups
            .iter()
            .map(|(_, sized, f)| 8 * (f.len() + *sized as usize))
            .sum::<usize>(),
    )
}

/// The raw table: `(group, field) -> offset`, plus each group's size.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DebugOffsets {
    pub version: u64,
    pub free_threaded: bool,
    fields: Vec<(&'static str, &'static str, u64)>,
    /// `(group, size)`: the size of the CPython structure a sized group describes.
    sizes: Vec<(&'static str, u64)>,
}

impl DebugOffsets {
    /// The size of the CPython structure `group` describes (`sizeof(PyInterpreterState)` for
    /// "interpreter_state"), already checked to be non-zero and at most 1 MiB.
    pub fn size(&self, group: &str) -> Option<u64> {
        self.sizes.iter().find(|(g, _)| *g == group).map(|x| x.1)
    }

    pub fn get(&self, group: &str, field: &str) -> Option<u64> {
        self.fields
            .iter()
            .find(|(g, f, _)| *g == group && *f == field)
            .map(|x| x.2)
    }

    /// Reads and validates the table at `runtime` (the address of `_PyRuntime`).
    pub fn read(mem: &dyn Memory, runtime: u64) -> Result<DebugOffsets, ReadError> {
        let b = mem.read_vec(runtime, READ_SIZE as u64, READ_SIZE as u64)?;
        Self::parse(&b).map_err(|what| ReadError::corrupt(runtime, what))
    }

    pub fn parse(b: &[u8]) -> Result<DebugOffsets, &'static str> {
        if b.get(..8) != Some(COOKIE.as_slice()) {
            return Err("_Py_DebugOffsets cookie");
        }
        let word = |i: usize| {
            b.get(i..i + 8)
                .map(|s| u64::from_le_bytes(s.try_into().unwrap()))
        };
        let version = word(8).ok_or("_Py_DebugOffsets")?;
        let v = Version::from_hex(version).ok_or("_Py_DebugOffsets version")?;
        let groups = shape(v.minor).ok_or("_Py_DebugOffsets version (3.13 to 3.15 are known)")?;
        let free_threaded = word(16).ok_or("_Py_DebugOffsets")? != 0;
        let mut out = DebugOffsets {
            version,
            free_threaded,
            fields: Vec::new(),
            sizes: Vec::new(),
        };
        let mut at = 24;
        for (group, sized, fields) in groups {
            // A group without `size` describes no single structure: bound it by the cap.
            let size = if *sized {
                let size = word(at).ok_or("_Py_DebugOffsets")?;
                at += 8;
                size
            } else {
                MAX_STRUCT_SIZE
            };
            if size == 0 || size > MAX_STRUCT_SIZE {
                return Err("_Py_DebugOffsets group size");
            }
            if *sized {
                out.sizes.push((*group, size));
            }
            for f in fields.iter() {
                let off = word(at).ok_or("_Py_DebugOffsets")?;
                // Every field must lie inside its structure. (`*_size` fields are sizes, not
                // offsets, and may equal or pass the group's size.)
                let limit = if f.ends_with("_size") {
                    MAX_STRUCT_SIZE
                } else {
                    size
                };
                if off > limit {
                    return Err("_Py_DebugOffsets field outside its structure");
                }
                out.fields.push((*group, *f, off));
                at += 8;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `size` words are where CPython puts them: `runtime_state` first after the header
    /// (cookie, version, free_threaded), then `interpreter_state` after its two fields; and
    /// a table with sizes there reads them back.
    #[test]
    fn size_words_follow_the_shape() {
        for minor in [13, 14, 15] {
            let words = size_words(minor);
            assert_eq!(
                &words[..2],
                &[("runtime_state", 24), ("interpreter_state", 48)]
            );
            assert!(words.iter().all(|(g, _)| *g != "llist_node"));
            let mut b = vec![0u8; struct_size(minor).unwrap()];
            b[..8].copy_from_slice(COOKIE);
            b[8..16].copy_from_slice(&(0x030000f0u64 | (minor as u64) << 16).to_le_bytes());
            for (i, (_, at)) in words.iter().enumerate() {
                let at = *at as usize;
                b[at..at + 8].copy_from_slice(&(0x1000 + i as u64).to_le_bytes());
            }
            let d = DebugOffsets::parse(&b).unwrap();
            assert_eq!(d.size("runtime_state"), Some(0x1000));
            assert_eq!(d.size("interpreter_state"), Some(0x1001));
            assert_eq!(d.size("llist_node"), None);
        }
    }
}
