//! `_Py_DebugOffsets` (Include/internal/pycore_debug_offsets.h, 3.13): CPython's own table of
//! offsets at the start of `_PyRuntime`. Read from the target, validated, and laid over the
//! built-in table of the same minor version (which supplies what it lacks).

use super::layout::{CurrentFrame, FrameModel, GilLocation, Layout, LongObject};
use super::version::Version;
use crate::error::{ReadError, ReadErrorKind};
use crate::memory::Memory;

pub const COOKIE: &[u8; 8] = b"xdebugpy";
/// pystack's rule: no structure described by the offsets is over 1 MiB.
const MAX_STRUCT_SIZE: u64 = 1 << 20;
/// The 3.13.0 struct is 584 bytes; read a little more so that later additions are visible.
const READ_SIZE: usize = 584;

/// The 3.13 shape: (group, [fields]) in declaration order; every group starts with `size`.
const GROUPS_3_13: &[(&str, &[&str])] = &[
    ("runtime_state", &["finalizing", "interpreters_head"]),
    (
        "interpreter_state",
        &[
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
        ],
    ),
    (
        "thread_state",
        &[
            "prev",
            "next",
            "interp",
            "current_frame",
            "thread_id",
            "native_thread_id",
            "datastack_chunk",
            "status",
        ],
    ),
    (
        "interpreter_frame",
        &["previous", "executable", "instr_ptr", "localsplus", "owner"],
    ),
    (
        "code_object",
        &[
            "filename",
            "name",
            "qualname",
            "linetable",
            "firstlineno",
            "argcount",
            "localsplusnames",
            "localspluskinds",
            "co_code_adaptive",
        ],
    ),
    ("pyobject", &["ob_type"]),
    ("type_object", &["tp_name", "tp_repr", "tp_flags"]),
    ("tuple_object", &["ob_item", "ob_size"]),
    ("list_object", &["ob_item", "ob_size"]),
    ("dict_object", &["ma_keys", "ma_values"]),
    ("float_object", &["ob_fval"]),
    ("long_object", &["lv_tag", "ob_digit"]),
    ("bytes_object", &["ob_size", "ob_sval"]),
    ("unicode_object", &["state", "length", "asciiobject_size"]),
    ("gc", &["collecting"]),
];

/// The raw table: `(group, field) -> offset`, plus each group's size.
#[derive(Clone, Debug, Default)]
pub struct DebugOffsets {
    pub version: u64,
    pub free_threaded: bool,
    fields: Vec<(&'static str, &'static str, u64)>,
}

impl DebugOffsets {
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
        if (v.major, v.minor) != (3, 13) {
            // Later versions reorder and extend the groups; only the 3.13 shape is known here.
            return Err("_Py_DebugOffsets version (only 3.13 is known)");
        }
        let free_threaded = word(16).ok_or("_Py_DebugOffsets")? != 0;
        let mut out = DebugOffsets {
            version,
            free_threaded,
            fields: Vec::new(),
        };
        let mut at = 24;
        for (group, fields) in GROUPS_3_13 {
            let size = word(at).ok_or("_Py_DebugOffsets")?;
            if size == 0 || size > MAX_STRUCT_SIZE {
                return Err("_Py_DebugOffsets group size");
            }
            at += 8;
            for f in fields.iter() {
                let off = word(at).ok_or("_Py_DebugOffsets")?;
                // Every field must lie inside its structure. (`asciiobject_size` is a size, not
                // an offset, and may equal the group's size.)
                if off > size {
                    return Err("_Py_DebugOffsets field outside its structure");
                }
                out.fields.push((group, f, off));
                at += 8;
            }
        }
        Ok(out)
    }

    /// `base` (the built-in table of this minor version) with every field the target gave.
    pub fn apply(&self, mut l: Layout) -> Result<Layout, ReadError> {
        let need = |g: &str, f: &str| {
            self.get(g, f).ok_or(ReadError::new(
                0,
                0,
                ReadErrorKind::Corrupt("_Py_DebugOffsets"),
            ))
        };
        l.version = Version::from_hex(self.version).unwrap_or(l.version);
        l.source = "_Py_DebugOffsets".into();
        l.free_threaded = self.free_threaded;
        l.runtime_state.interpreters_head = need("runtime_state", "interpreters_head")?;
        let is = &mut l.interpreter_state;
        is.next = need("interpreter_state", "next")?;
        is.threads_head = need("interpreter_state", "threads_head")?;
        is.imports_modules = Some(need("interpreter_state", "imports_modules")?);
        if let GilLocation::Interpreter { gil_ptr, .. } = &mut l.gil {
            *gil_ptr = need("interpreter_state", "ceval_gil")?;
        }
        if self.free_threaded {
            l.gil = GilLocation::None;
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
        Ok(l)
    }
}
