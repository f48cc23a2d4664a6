//! Reprs as CPython's libpython.py prints a `PyObject *` in gdb (its pretty-printers and
//! `py-print`): Python's repr for the built-in types, `<Foo(attr=value) at remote 0x..>` for
//! instances of classes, `Name(args,)` for exceptions, `<type at remote 0x..>` otherwise;
//! recursion shown as `[...]`, `{...}`, `<...>`; cut at [`MAX_PROXY_REPR_CHARS`] characters
//! with `...(truncated)`. Built on the readers of `objects.rs`.

use std::collections::HashSet;

use super::layout::{tpflags, FrameModel};
use super::objects::{bytes_repr, float_repr, str_repr};
use super::snapshot::Snapshot;
use super::values::field;
use super::FrameItem;
use crate::error::ReadError;

/// libpython's `MAX_OUTPUT_LEN`: longer reprs are cut here and end with `...(truncated)`.
pub const MAX_PROXY_REPR_CHARS: usize = 1024;
/// Most items of one container read; the character cap ends the output long before.
const MAX_PROXY_ITEMS: u64 = 1024;
/// Deepest nesting followed (the visited set already stops cycles).
const MAX_PROXY_DEPTH: u32 = 64;
/// Most bytes of a bytes object read.
const MAX_PROXY_BYTES: u64 = 4096;
/// `Py_TPFLAGS_BASE_EXC_SUBCLASS` (Include/object.h, 3.10 to 3.15).
const BASE_EXC_SUBCLASS: u64 = 1 << 30;
/// `PyBaseExceptionObject.args`: after `dict` (Include/cpython/pyerrors.h, 3.10 to 3.15).
const EXCEPTION_ARGS: u64 = 8;
/// `PyFrameObject.f_frame` (3.11+): after `f_back` (Include/internal/pycore_frame.h).
const FRAMEOBJECT_F_FRAME: u64 = 8;

/// The output was cut at [`MAX_PROXY_REPR_CHARS`].
struct Full;

struct Out {
    text: String,
    chars: usize,
}

impl Out {
    fn write(&mut self, s: &str) -> Result<(), Full> {
        let n = s.chars().count();
        if self.chars + n > MAX_PROXY_REPR_CHARS {
            let room = MAX_PROXY_REPR_CHARS - self.chars;
            self.text.extend(s.chars().take(room));
            self.chars = MAX_PROXY_REPR_CHARS;
            return Err(Full);
        }
        self.text.push_str(s);
        self.chars += n;
        Ok(())
    }
}

impl Snapshot {
    /// libpython's repr of the object at `obj` (see the module docs).
    pub fn proxy_repr(&self, obj: u64) -> String {
        let mut out = Out {
            text: String::new(),
            chars: 0,
        };
        match self.write_proxy(obj, &mut HashSet::new(), 0, &mut out) {
            Ok(()) => out.text,
            Err(Full) => out.text + "...(truncated)",
        }
    }

    /// libpython's repr of a frame object (`PyFrameObject *`):
    /// `Frame 0x.., for file f.py, line 4, in foo (a=3, b=4)`, the address being the
    /// interpreter frame's (3.11+) or the frame object's (3.10).
    pub fn frame_object_repr(&self, obj: u64) -> Result<String, ReadError> {
        let frame = match self.layout.frame {
            FrameModel::FrameObject { .. } => {
                match self.walk_frames(obj).items.into_iter().next() {
                    Some(FrameItem::Python(p)) => p,
                    Some(FrameItem::Unreadable { error, .. }) => return Err(error),
                    None => return Err(ReadError::corrupt(obj, "frame object")),
                }
            }
            FrameModel::Interpreter(_) => {
                let fields = self.object_fields(obj)?;
                let f = self.mem.read_ptr(field(fields, FRAMEOBJECT_F_FRAME)?)?;
                self.interp_frame(f)?.0
            }
        };
        let locals: Vec<String> = self
            .frame_locals(&frame)?
            .into_iter()
            .map(|l| format!("{}={}", l.name, l.repr))
            .collect();
        Ok(format!(
            "Frame {:#x}, for file {}, line {}, in {} ({})",
            frame.addr,
            frame.code.filename,
            frame.line.map_or("?".to_string(), |l| l.to_string()),
            frame.code.name,
            locals.join(", ")
        ))
    }

    fn write_proxy(
        &self,
        obj: u64,
        visited: &mut HashSet<u64>,
        depth: u32,
        out: &mut Out,
    ) -> Result<(), Full> {
        if obj == 0 {
            return out.write("0x0");
        }
        let Ok(t) = self.type_of(obj) else {
            return out.write(&format!("<unknown at remote {obj:#x}>"));
        };
        let recursive = depth >= MAX_PROXY_DEPTH || visited.contains(&obj);
        // libpython checks for a class instance first: `class Foo(list)` prints as an instance.
        if t.flags & tpflags::HEAPTYPE != 0 {
            if recursive {
                return out.write("<...>");
            }
            visited.insert(obj);
            out.write(&format!("<{}", t.name))?;
            if let Ok(Some(items)) = self.instance_dict(obj) {
                out.write("(")?;
                for (i, (k, v)) in items.into_iter().enumerate() {
                    if i > 0 {
                        out.write(", ")?;
                    }
                    out.write(&self.read_str(k).unwrap_or_else(|_| "?".into()))?;
                    out.write("=")?;
                    self.write_proxy(v, visited, depth + 1, out)?;
                }
                out.write(")")?;
            }
            return out.write(&format!(" at remote {obj:#x}>"));
        }
        let simple = match t.name.as_str() {
            "NoneType" => Some(Ok("None".to_string())),
            "bool" => Some(
                self.read_int(obj)
                    .map(|v| if v == "0" { "False" } else { "True" }.into()),
            ),
            "int" => Some(self.read_int(obj)),
            "float" => Some(self.read_float(obj).map(float_repr)),
            "str" => Some(self.read_str(obj).map(|s| str_repr(&s))),
            "bytes" => Some(
                self.read_bytes(obj, MAX_PROXY_BYTES)
                    .map(|(b, _)| bytes_repr(&b)),
            ),
            "builtin_function_or_method" | "builtin_method" => Some(self.cfunction_repr(obj)),
            "method-wrapper" => Some(self.method_wrapper_repr(obj)),
            "frame" => Some(self.frame_object_repr(obj)),
            _ => None,
        };
        if let Some(s) = simple {
            return out.write(&s.unwrap_or_else(|_| format!("<{} at remote {obj:#x}>", t.name)));
        }
        let (open, close) = match t.name.as_str() {
            "tuple" => ("(", ")"),
            "list" => ("[", "]"),
            "dict" => ("{", "}"),
            "set" => ("{", "}"),
            "frozenset" => ("frozenset({", "})"),
            _ if t.flags & BASE_EXC_SUBCLASS != 0 => {
                out.write(&t.name)?;
                let args = field(obj, self.layout.pyobject.header_size() + EXCEPTION_ARGS)
                    .and_then(|a| self.mem.read_ptr(a));
                return match args {
                    Ok(a) => self.write_proxy(a, visited, depth + 1, out),
                    Err(_) => out.write("(...)"),
                };
            }
            _ => return out.write(&format!("<{} at remote {obj:#x}>", t.name)),
        };
        if recursive {
            return out.write(match t.name.as_str() {
                "tuple" => "(...)",
                "list" => "[...]",
                "dict" => "{...}",
                _ => "set(...)",
            });
        }
        visited.insert(obj);
        let items: Result<Vec<(u64, Option<u64>)>, ReadError> = match t.name.as_str() {
            "tuple" | "list" => self
                .read_seq(obj, t.name == "list", MAX_PROXY_ITEMS)
                .map(|(v, _)| v.into_iter().map(|i| (i, None)).collect()),
            "dict" => self
                .dict_items(obj, MAX_PROXY_ITEMS)
                .map(|v| v.into_iter().map(|(k, v)| (k, Some(v))).collect()),
            _ => self
                .set_keys(obj, MAX_PROXY_ITEMS)
                .map(|v| v.into_iter().map(|k| (k, None)).collect()),
        };
        let Ok(items) = items else {
            return out.write(&format!("<{} at remote {obj:#x}>", t.name));
        };
        if items.is_empty() {
            let empty = match t.name.as_str() {
                "set" => "set()",
                "frozenset" => "frozenset()",
                _ => "",
            };
            if !empty.is_empty() {
                return out.write(empty);
            }
        }
        out.write(open)?;
        for (i, (k, v)) in items.iter().enumerate() {
            if i > 0 {
                out.write(", ")?;
            }
            self.write_proxy(*k, visited, depth + 1, out)?;
            if let Some(v) = v {
                out.write(": ")?;
                self.write_proxy(*v, visited, depth + 1, out)?;
            }
        }
        if t.name == "tuple" && items.len() == 1 {
            out.write(",")?;
        }
        out.write(close)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpython::layout::Layout;
    use crate::cpython::version::Version;
    use crate::memory::FakeMemory;

    const LIST_TYPE: u64 = 0x1000;
    const CFUNCTION_TYPE: u64 = 0x2000;

    /// A 3.12 target with the `list` and `builtin_function_or_method` types.
    fn target() -> (FakeMemory, Layout) {
        let l = Layout::builtin(Version::new(3, 12, 1)).unwrap();
        let mut m = FakeMemory::new();
        for (tp, name, text, flags) in [
            (LIST_TYPE, 0x1800u64, &b"list"[..], tpflags::LIST_SUBCLASS),
            (
                CFUNCTION_TYPE,
                0x2800,
                &b"builtin_function_or_method"[..],
                0,
            ),
        ] {
            m.put(tp, &[0u8; 400]);
            m.put_u64(tp + l.type_object.tp_name, name);
            m.put_u64(tp + l.type_object.tp_flags, flags);
            m.put(name, &[0u8; 64]).put(name, text);
        }
        (m, l)
    }

    /// A list at `at` whose items array is at `at + 0x100`.
    fn list(m: &mut FakeMemory, l: &Layout, at: u64, items: &[u64]) {
        m.put(at, &[0u8; 64]);
        m.put_u64(at + l.pyobject.ob_type, LIST_TYPE);
        m.put_u64(at + l.list_object.ob_size, items.len() as u64);
        m.put_u64(at + l.list_object.ob_item, at + 0x100);
        for (i, item) in items.iter().enumerate() {
            m.put_u64(at + 0x100 + 8 * i as u64, *item);
        }
    }

    fn snapshot(m: FakeMemory, l: Layout) -> Snapshot {
        Snapshot::for_test(m, l)
    }

    #[test]
    fn a_list_holding_itself_prints_as_libpython_does() {
        let (mut m, l) = target();
        list(&mut m, &l, 0x10000, &[0x20000]);
        list(&mut m, &l, 0x20000, &[0x10000]);
        assert_eq!(snapshot(m, l).proxy_repr(0x10000), "[[[...]]]");
    }

    #[test]
    fn long_output_is_cut_at_libpythons_limit() {
        let (mut m, l) = target();
        let empties: Vec<u64> = (0..400).map(|i| 0x100000 + i * 0x1000).collect();
        for &e in &empties {
            list(&mut m, &l, e, &[]);
        }
        m.put(0x10000, &[0u8; 0x1000]);
        list(&mut m, &l, 0x10000, &empties);
        let r = snapshot(m, l).proxy_repr(0x10000);
        assert!(r.starts_with("[[], [], "));
        assert!(r.ends_with("...(truncated)"));
        assert_eq!(
            r.chars().count(),
            MAX_PROXY_REPR_CHARS + "...(truncated)".len()
        );
    }

    #[test]
    fn builtin_functions_and_corrupt_types() {
        let (mut m, l) = target();
        let fields = l.pyobject.header_size();
        // `len` (no self) and `append` bound to a list; their PyMethodDefs and names.
        for (obj, def, name, this) in [
            (0x30000u64, 0x31000u64, 0x32000u64, 0u64),
            (0x40000, 0x41000, 0x42000, 0x10000),
        ] {
            m.put(obj, &[0u8; 64]);
            m.put_u64(obj + l.pyobject.ob_type, CFUNCTION_TYPE);
            m.put_u64(obj + fields, def);
            m.put_u64(obj + fields + 8, this);
            m.put(def, &[0u8; 32]);
            m.put_u64(def, name);
        }
        for (at, name) in [(0x32000, &b"len"[..]), (0x42000, &b"append"[..])] {
            m.put(at, &[0u8; 256]).put(at, name);
        }
        list(&mut m, &l, 0x10000, &[]);
        // An object whose type pointer leads nowhere.
        m.put(0x50000, &[0u8; 32]);
        m.put_u64(0x50000 + l.pyobject.ob_type, 0xdead_beef);
        let s = snapshot(m, l);
        assert_eq!(s.proxy_repr(0x30000), "<built-in function len>");
        assert_eq!(
            s.proxy_repr(0x40000),
            "<built-in method append of list object at remote 0x10000>"
        );
        assert_eq!(s.proxy_repr(0x50000), "<unknown at remote 0x50000>");
        assert_eq!(s.proxy_repr(0), "0x0");
    }
}
