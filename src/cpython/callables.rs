//! C callables: the reprs of builtin functions and method-wrappers (as libpython.py prints
//! them), and which of them a Python frame is calling right now, found on the frame's value
//! stack and confirmed by the native frames above its eval loop. Memory and native PCs only;
//! no DWARF.

use super::objects::str_repr;
use super::snapshot::Snapshot;
use super::values::{field, is_cfunction_type, Code, PyFrame};
use crate::error::ReadError;

/// Value-stack slots scanned above a frame's locals. A call's callable sits below its
/// arguments; calls with more arguments than this are not named.
const MAX_VALUE_STACK_SLOTS: u64 = 64;
/// Bases walked up from a type (`tp_base`), past which a chain is taken for a corrupt one.
const MAX_BASES: usize = 32;
/// How far past a C function's entry point a native frame's PC may lie and still count as
/// running that function.
const MAX_C_FUNCTION_BYTES: u64 = 1 << 16;
/// Longest C name (`ml_name`, a wrapper's slot name) we read.
const MAX_C_NAME_BYTES: usize = 200;

// Field offsets past the object header, the same in 3.10 to 3.15:
// `PyCFunctionObject` {m_ml, m_self, ...} (Include/cpython/methodobject.h);
const CFUNCTION_M_ML: u64 = 0;
const CFUNCTION_M_SELF: u64 = 8;
// `PyMethodDef` {ml_name, ml_meth, ...} (Include/methodobject.h), not an object;
const METHODDEF_ML_NAME: u64 = 0;
const METHODDEF_ML_METH: u64 = 8;
// `wrapperobject` {descr, self} (Objects/descrobject.c);
const WRAPPER_DESCR: u64 = 0;
const WRAPPER_SELF: u64 = 8;
// `PyCFunctionObject`'s m_module: the defining module's name (`__module__`), a str;
const CFUNCTION_M_MODULE: u64 = 16;
// `PyWrapperDescrObject`: PyDescr_COMMON {d_type, d_name, d_qualname}, then d_base and
// d_wrapped, the slot function (Include/cpython/descrobject.h); `struct wrapperbase`
// {name, offset (int, padded), function, wrapper, ...}: `wrapper` calls `d_wrapped`.
const WRAPPERDESCR_D_BASE: u64 = 24;
const WRAPPERDESCR_D_WRAPPED: u64 = 32;
const WRAPPERBASE_WRAPPER: u64 = 24;
// PyDescr_COMMON {d_type, d_name, d_qualname} (Include/cpython/descrobject.h).
const DESCR_D_TYPE: u64 = 0;
const DESCR_D_NAME: u64 = 8;
// `PyMethodDescrObject`'s d_method, after PyDescr_COMMON.
const DESCR_D_METHOD: u64 = 24;
// `CDataObject`'s b_objects (Modules/_ctypes/ctypes.h 3.10 to 3.15, after b_ptr,
// b_needsfree (an int, padded), b_base, b_size, b_length, b_index).
const CDATA_B_OBJECTS: u64 = 48;
const CDATA_B_PTR: u64 = 0;
// `PyMethodObject` {im_func, im_self, ...} (Include/cpython/classobject.h 3.10 to 3.15).
const METHOD_IM_FUNC: u64 = 0;
const METHOD_IM_SELF: u64 = 8;

/// The C callable a Python frame is calling (see [`Snapshot::called_callable`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Called {
    /// Where it belongs among the native frames given.
    pub at: usize,
    /// libpython's repr of it.
    pub text: String,
    /// The callable object.
    pub obj: u64,
    /// The index in the native frames given of the frame running its C function, when one
    /// was found by address (a stripped build's frame then gets the builtin's name).
    pub running: Option<usize>,
    /// Whether it is a builtin (`PyCFunctionObject`), not a method-wrapper.
    pub is_cfunction: bool,
}

/// A native frame as the debugger unwound it.
#[derive(Clone, Debug)]
pub struct NativeFrame {
    pub name: Option<String>,
    pub pc: u64,
}

/// CPython's functions that call a `PyCFunctionObject` (Objects/methodobject.c), which
/// libpython.py also looks for.
fn is_cfunction_dispatcher(name: &str) -> bool {
    name.starts_with("cfunction_vectorcall_") || name == "cfunction_call"
}

impl Snapshot {
    /// Where an object's own fields start: `ob_type` is the header's last field.
    pub(crate) fn object_fields(&self, obj: u64) -> Result<u64, ReadError> {
        field(obj, self.layout.pyobject.header_size())
    }

    fn c_name(&self, ptr: u64) -> Result<String, ReadError> {
        Ok(String::from_utf8_lossy(&self.mem.read_cstr(ptr, MAX_C_NAME_BYTES)?).into_owned())
    }

    /// libpython's repr of a `PyCFunctionObject`: `<built-in function len>` without a
    /// `self`, else `<built-in method id of module object at remote 0x7f..>`.
    pub fn cfunction_repr(&self, obj: u64) -> Result<String, ReadError> {
        let f = self.object_fields(obj)?;
        let ml = self.mem.read_ptr(field(f, CFUNCTION_M_ML)?)?;
        let name = self.c_name(self.mem.read_ptr(field(ml, METHODDEF_ML_NAME)?)?)?;
        let m_self = self.mem.read_ptr(field(f, CFUNCTION_M_SELF)?)?;
        if m_self == 0 {
            return Ok(format!("<built-in function {name}>"));
        }
        let t = self.type_of(m_self)?;
        Ok(format!(
            "<built-in method {name} of {} object at remote {m_self:#x}>",
            t.name
        ))
    }

    /// libpython's repr of a method-wrapper: `<method-wrapper '__init__' of C object at 0x..>`.
    pub fn method_wrapper_repr(&self, obj: u64) -> Result<String, ReadError> {
        let f = self.object_fields(obj)?;
        let descr = self.mem.read_ptr(field(f, WRAPPER_DESCR)?)?;
        let base = self
            .mem
            .read_ptr(field(self.object_fields(descr)?, WRAPPERDESCR_D_BASE)?)?;
        let name = self.c_name(self.mem.read_ptr(base)?)?;
        let this = self.mem.read_ptr(field(f, WRAPPER_SELF)?)?;
        let t = self.type_of(this)?;
        Ok(format!(
            "<method-wrapper {} of {} object at {this:#x}>",
            str_repr(&name),
            t.name
        ))
    }

    /// The objects on a frame's value stack (slots above its locals), bottom first. Slots above
    /// the live top hold stale pointers: callers confirm what they find.
    /// `inner`: the address of the frame it calls, where the frame's value stack ends at
    /// the latest (3.11+ push a callee's frame right after its caller's).
    pub fn value_stack(&self, frame: &PyFrame, inner: Option<u64>) -> Vec<u64> {
        self.value_stack_slots(frame, inner)
            .into_iter()
            .flatten()
            .collect()
    }

    /// [`Snapshot::value_stack`] slot by slot: None for a slot that holds no object pointer
    /// (NULL, a tagged int, a stale non-pointer), so neighbours stay neighbours.
    pub fn value_stack_slots(&self, frame: &PyFrame, inner: Option<u64>) -> Vec<Option<u64>> {
        self.value_stack_slots_at_most(frame, inner, MAX_VALUE_STACK_SLOTS)
    }

    /// [`Snapshot::value_stack_slots`] cut at the frame's `co_stacksize`: the slots past it
    /// belong to other frames (3.10's next frame object, 3.11+'s frames called before on the
    /// data stack), whose objects are not this frame's.
    pub fn own_value_stack(&self, frame: &PyFrame, inner: Option<u64>) -> Vec<Option<u64>> {
        let max = frame
            .code
            .stacksize
            .map_or(MAX_VALUE_STACK_SLOTS, u64::from);
        self.value_stack_slots_at_most(frame, inner, max)
    }

    /// [`Snapshot::value_stack_slots`], at most `max` of them: the first `max` of what it
    /// returns, without reading further (a suspended frame whose live depth is known).
    pub fn value_stack_slots_at_most(
        &self,
        frame: &PyFrame,
        inner: Option<u64>,
        max: u64,
    ) -> Vec<Option<u64>> {
        let Ok((base, tag_bits)) = self.localsplus(frame) else {
            return Vec::new();
        };
        let Some(start) = base.checked_add(frame.code.locals.len() as u64 * 8) else {
            return Vec::new();
        };
        // The slots below the frame it calls, at most MAX_VALUE_STACK_SLOTS of them.
        let mut n = MAX_VALUE_STACK_SLOTS.min(max);
        if let Some(f) = inner.filter(|&f| f > start) {
            n = n.min((f - start).div_ceil(8));
        }
        let object = |v: u64| {
            // Objects are 8-byte aligned user-space addresses; anything else is stale.
            (v & !tag_bits != 0 && v & 7 & !tag_bits == 0 && v < self.arch.user_space_end())
                .then_some(v & !tag_bits)
        };
        // One read for the whole stack; slot by slot, up to the first unreadable one, when
        // it crosses into memory that cannot be read.
        if let Ok(bytes) = self.mem.read_vec(start, n * 8, n * 8) {
            return bytes
                .chunks_exact(8)
                .map(|c| object(u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))))
                .collect();
        }
        let mut out = Vec::new();
        for i in 0..n {
            let Some(slot) = start.checked_add(i * 8) else {
                break;
            };
            match self.mem.read_u64(slot) {
                Ok(v) => out.push(object(v)),
                Err(_) => break,
            }
        }
        out
    }

    /// A builtin method's name and its `self` (`PyCFunctionObject` `m_ml->ml_name`, `m_self`).
    pub fn cfunction_name_and_self(&self, obj: u64) -> Result<(String, u64), ReadError> {
        let f = self.object_fields(obj)?;
        let ml = self.mem.read_ptr(field(f, CFUNCTION_M_ML)?)?;
        let name = self.c_name(self.mem.read_ptr(field(ml, METHODDEF_ML_NAME)?)?)?;
        Ok((name, self.mem.read_ptr(field(f, CFUNCTION_M_SELF)?)?))
    }

    /// A `method_descriptor`'s name and the type it belongs to: `PyMethodDescrObject` starts
    /// with PyDescr_COMMON {d_type, d_name, d_qualname} (Include/cpython/descrobject.h,
    /// 3.10 to 3.15).
    pub fn method_descriptor_name_and_type(&self, obj: u64) -> Result<(String, u64), ReadError> {
        let f = self.object_fields(obj)?;
        let d_type = self.mem.read_ptr(field(f, DESCR_D_TYPE)?)?;
        let name = self.read_name(self.mem.read_ptr(field(f, DESCR_D_NAME)?)?)?;
        Ok((name, d_type))
    }

    /// The object a C callable on a value stack is called on, and the type its name gives
    /// (`torch._C._EngineBase` for `torch._C._EngineBase.run_backward`): a builtin's bound
    /// `m_self` (not a module), or for a `method_descriptor` the object in the slot `after` it
    /// (the call's self: CPython 3.11 to 3.15 push the callable, then self or the first
    /// argument) where that is an instance of the descriptor's `d_type`. None otherwise.
    pub fn c_call_self(&self, callable: u64, after: Option<u64>) -> Option<(u64, String)> {
        let t = self.type_of(callable).ok()?;
        if t.name == "method_descriptor" {
            let (_, d_type) = self.method_descriptor_name_and_type(callable).ok()?;
            let this = after?;
            let mut tp = self.type_of(this).ok()?;
            for _ in 0..MAX_BASES {
                if tp.addr == d_type {
                    return Some((this, self.type_at(d_type).ok()?.name.clone()));
                }
                if tp.base == 0 {
                    return None;
                }
                tp = self.type_at(tp.base).ok()?;
            }
            return None;
        }
        if !is_cfunction_type(&t.name) {
            return None;
        }
        let (_, this) = self.cfunction_name_and_self(callable).ok()?;
        let of = self.type_of(this).ok().filter(|_| this != 0)?;
        (of.name != "module").then(|| (this, of.name.clone()))
    }

    /// A C callable's name as a verdict gives it: a method as its type's name, a dot and its
    /// name (`torch._C._EngineBase.run_backward`, from a `method_descriptor` or a builtin
    /// bound to an object), a module's builtin as the module's name (its `m_module`) and its
    /// own (`time.sleep`), else the name alone; a `ctypes` function pointer by its name and
    /// library, and Cython functions, `partial`s and other C types' instances as
    /// [`super::callable_kinds`] names them. None for an object that is no C callable, and
    /// for a cffi function pointer (see [`Snapshot::is_cffi_function_pointer`]).
    pub fn c_callable_name(&self, obj: u64) -> Option<String> {
        let t = self.type_of(obj).ok()?;
        if t.name == "method_descriptor" {
            let (name, d_type) = self.method_descriptor_name_and_type(obj).ok()?;
            return Some(format!("{}.{name}", self.type_at(d_type).ok()?.name));
        }
        if !is_cfunction_type(&t.name) {
            return self.ctypes_function_name(obj).or_else(|| {
                let kind = self.callable_kind(obj)?;
                self.kind_name(obj, &kind)
            });
        }
        let (name, this) = self.cfunction_name_and_self(obj).ok()?;
        if this != 0 {
            let of = self.type_of(this).ok()?;
            if of.name != "module" {
                return Some(format!("{}.{name}", of.name));
            }
        }
        let module = self
            .object_fields(obj)
            .and_then(|f| self.mem.read_ptr(field(f, CFUNCTION_M_MODULE)?))
            .ok()
            .filter(|&m| m != 0)
            .and_then(|m| self.read_str(m).ok());
        Some(match module {
            Some(m) => format!("{m}.{name}"),
            None => name,
        })
    }

    /// A `ctypes` function pointer's name and library: `work_block (libwork.so)`, or the name
    /// alone for a library without a name (`CDLL(None)`, the process's own symbols). Its type
    /// derives from `_ctypes.CFuncPtr`; `CDLL.__getitem__` sets its `__name__` in its
    /// `__dict__` (Lib/ctypes/__init__.py), and `PyCFuncPtr_FromDll` keeps the `CDLL` in the
    /// object's `b_objects` (`KeepRef(self, 0, dll)`, Modules/_ctypes/_ctypes.c; `CDataObject`
    /// {b_ptr, b_needsfree, b_base, b_size, b_length, b_index, b_objects, ...} past the
    /// header, Modules/_ctypes/ctypes.h, 3.10 to 3.15), whose `_name` is the path it loaded.
    fn ctypes_function_name(&self, obj: u64) -> Option<String> {
        let classes = self.class_names(obj);
        if !classes
            .iter()
            .any(|c| c == "_ctypes.CFuncPtr" || c == "CFuncPtr")
        {
            return None;
        }
        let name = self
            .read_str(self.instance_attr(obj, "__name__").ok()??)
            .ok()?;
        let library = self
            .object_fields(obj)
            .and_then(|f| self.mem.read_ptr(field(f, CDATA_B_OBJECTS)?))
            .ok()
            .filter(|&b| b != 0)
            // `KeepRef` stores into a dict under `unique_key(self, 0)`, "0", where the object
            // has one (`PyCData_GetContainer` makes one when `b_length` is not 0).
            .and_then(|b| {
                if self.type_of(b).ok()?.name == "dict" {
                    self.dict_get(b, "0").ok()?
                } else {
                    Some(b)
                }
            })
            .filter(|&dll| self.class_names(dll).iter().any(|c| c == "CDLL"))
            .and_then(|dll| self.instance_attr(dll, "_name").ok()?)
            // `CDLL(None)`'s `_name` is None (3.10 to 3.13): no library, not a name.
            .filter(|&n| self.type_of(n).is_ok_and(|t| t.name == "str"))
            .and_then(|n| self.read_str(n).ok())
            .filter(|n| !n.is_empty());
        Some(match library {
            Some(lib) => format!("{name} ({})", lib.rsplit('/').next().unwrap_or(&lib)),
            None => name,
        })
    }

    /// The callable a `callable_iterator` (`iter(f, sentinel)`) calls: `calliterobject`
    /// {PyObject_HEAD; it_callable; it_sentinel} (Objects/iterobject.c, 3.10 to 3.15).
    pub fn callable_iterator_callable(&self, obj: u64) -> Option<u64> {
        let f = self.object_fields(obj).ok()?;
        self.mem
            .read_ptr(field(f, 0).ok()?)
            .ok()
            .filter(|&c| c != 0)
    }

    /// A bound method's (`method`, `PyMethodObject`) function and `self`.
    pub fn method_func_and_self(&self, obj: u64) -> Result<(u64, u64), ReadError> {
        let f = self.object_fields(obj)?;
        Ok((
            self.mem.read_ptr(field(f, METHOD_IM_FUNC)?)?,
            self.mem.read_ptr(field(f, METHOD_IM_SELF)?)?,
        ))
    }

    /// The code a Python function (`function`, `PyFunctionObject`) runs.
    pub fn function_code(&self, func: u64) -> Result<std::sync::Arc<Code>, ReadError> {
        self.code(self.mem.read_ptr(field(func, self.layout.function_code)?)?)
    }

    /// Whether the builtin `obj` is `gc.collect`: libpython's "Garbage-collecting" frames run
    /// under it when Python code calls it.
    pub fn is_gc_collect(&self, obj: u64) -> bool {
        let named = || -> Result<bool, ReadError> {
            let f = self.object_fields(obj)?;
            let ml = self.mem.read_ptr(field(f, CFUNCTION_M_ML)?)?;
            let name = self.c_name(self.mem.read_ptr(field(ml, METHODDEF_ML_NAME)?)?)?;
            let module = self.mem.read_ptr(field(f, CFUNCTION_M_MODULE)?)?;
            Ok(name == "collect" && module != 0 && self.read_str(module)? == "gc")
        };
        named().unwrap_or(false)
    }

    /// The index in `natives` of the frame nearest past `entry` that is running the C function
    /// at `entry`, and how far past: CPython calls it through a pointer, so a frame entered by
    /// a direct call to another function is not running it, however near.
    fn running(&self, entry: u64, natives: &[NativeFrame], outer_pc: u64) -> Option<(u64, usize)> {
        let mut best: Option<(u64, usize)> = None;
        for (k, n) in natives.iter().enumerate() {
            let dist = n.pc.wrapping_sub(entry);
            if entry != 0 && dist < MAX_C_FUNCTION_BYTES && best.is_none_or(|b| dist < b.0) {
                // A stale value-stack slot naming a builtin defined beside the eval loop
                // (3.10's `exec`) matched the call plumbing before this check.
                let ret = natives.get(k + 1).map_or(outer_pc, |c| c.pc);
                if self
                    .arch
                    .direct_call_target(&|a, b| self.mem.read_into(a, b).is_ok(), ret)
                    .is_some_and(|t| t != entry)
                {
                    continue;
                }
                best = Some((dist, k));
            }
        }
        best
    }

    /// The C callable `frame` is calling, as libpython prints it, and the index in `natives`
    /// (the native frames between the frame's eval loop and the innermost frame, innermost
    /// first) where it belongs. A builtin function or a method-wrapper on the value stack whose
    /// C function one of those native frames is running (a builtin's `ml_meth`; a
    /// method-wrapper's `wrapper`, else its slot function), shown at that frame's caller,
    /// where libpython shows it. With symbols also: the builtin CPython's dispatcher is
    /// calling, a method-wrapper when a native frame is `wrapper_call`. `outer_pc` is where the
    /// eval loop's frame resumes (the return address of the outermost of `natives`);
    /// `inner` the address of the Python frame it calls, if any.
    pub fn called_callable(
        &self,
        frame: &PyFrame,
        natives: &[NativeFrame],
        outer_pc: u64,
        inner: Option<u64>,
    ) -> Option<Called> {
        if natives.is_empty() {
            return None;
        }
        // (distance, native index, object, is a method-wrapper)
        let mut best: Option<(u64, usize, u64, bool)> = None;
        let mut consider = |found: Option<(u64, usize)>, v: u64, wrapper: bool| {
            if let Some((dist, k)) = found {
                if best.is_none_or(|b| dist < b.0) {
                    best = Some((dist, k, v, wrapper));
                }
            }
        };
        let mut wrapper = None;
        let mut lowest_cfunction = None;
        for v in self.value_stack(frame, inner) {
            let Ok(t) = self.type_of(v) else { continue };
            if is_cfunction_type(&t.name) {
                lowest_cfunction.get_or_insert(v);
                let meth = self
                    .object_fields(v)
                    .and_then(|f| self.mem.read_ptr(field(f, CFUNCTION_M_ML)?))
                    .and_then(|ml| self.mem.read_ptr(field(ml, METHODDEF_ML_METH)?));
                let Ok(meth) = meth else { continue };
                consider(self.running(meth, natives, outer_pc), v, false);
            } else if t.name == "method-wrapper" {
                wrapper.get_or_insert(v);
                let Ok((call, wrapped)) = self.wrapper_functions(v) else {
                    continue;
                };
                // `wrapper` (wrap_init...) calls the slot; one that tail-calls leaves only
                // the slot's frame, whose caller is then wrapper_call too.
                let found = self
                    .running(call, natives, outer_pc)
                    .or_else(|| self.running(wrapped, natives, outer_pc));
                consider(found, v, true);
            }
        }
        let called = |at: usize, obj: u64, wrapper: bool, running: Option<usize>| {
            let text = if wrapper {
                self.method_wrapper_repr(obj)
            } else {
                self.cfunction_repr(obj)
            };
            text.ok().map(|text| Called {
                at,
                text,
                obj,
                running,
                is_cfunction: !wrapper,
            })
        };
        if let Some((_, k, v, w)) = best {
            return called((k + 1).min(natives.len() - 1), v, w, Some(k));
        }
        // A C function that tail-calls (PyObject_Vectorcall as its last act) leaves no native
        // frame of its own; CPython's dispatcher to it still names it.
        let named = |f: fn(&str) -> bool| {
            natives
                .iter()
                .position(|n| n.name.as_deref().is_some_and(f))
        };
        if let (Some(at), Some(v)) = (named(is_cfunction_dispatcher), lowest_cfunction) {
            return called(at, v, false, None);
        }
        let at = named(|n| n == "wrapper_call")?;
        called(at, wrapper?, true, None)
    }

    /// The C function a C callable runs when called: a builtin's `ml_meth`, a
    /// `method_descriptor`'s `d_method->ml_meth` (`PyMethodDescrObject` {PyDescr_COMMON;
    /// d_method; vectorcall}, Include/cpython/descrobject.h 3.10 to 3.15), a `ctypes`
    /// function pointer's target (the address its `b_ptr` holds: `*(void **)self->b_ptr`,
    /// Modules/_ctypes/_ctypes.c `PyCFuncPtr_FromDll`), and for the kinds of
    /// [`super::callable_kinds`] what they call. None for other objects.
    pub fn c_entry(&self, obj: u64) -> Option<u64> {
        let t = self.type_of(obj).ok()?;
        let f = self.object_fields(obj).ok()?;
        let ml = if is_cfunction_type(&t.name) {
            self.mem.read_ptr(field(f, CFUNCTION_M_ML).ok()?).ok()?
        } else if t.name == "method_descriptor" {
            self.mem.read_ptr(field(f, DESCR_D_METHOD).ok()?).ok()?
        } else if self
            .class_names(obj)
            .iter()
            .any(|c| c == "_ctypes.CFuncPtr" || c == "CFuncPtr")
        {
            let b_ptr = self.mem.read_ptr(field(f, CDATA_B_PTR).ok()?).ok()?;
            return self.mem.read_ptr(b_ptr).ok().filter(|&e| e != 0);
        } else {
            let kind = self.callable_kind(obj)?;
            return self.kind_entry(obj, &kind);
        };
        self.mem
            .read_ptr(field(ml, METHODDEF_ML_METH).ok()?)
            .ok()
            .filter(|&e| e != 0)
    }

    /// Of the C callables `candidates` (value-stack objects), the one whose C function
    /// ([`Snapshot::c_entry`]) a frame of `natives` (innermost first, the innermost Python
    /// frame's callees) is running, the nearest past its entry winning; with the index in
    /// `natives` of that frame.
    pub fn running_c_callable(
        &self,
        candidates: impl IntoIterator<Item = u64>,
        natives: &[NativeFrame],
    ) -> Option<(u64, usize)> {
        let mut best: Option<(u64, u64, usize)> = None;
        for v in candidates {
            let Some(entry) = self.c_entry(v) else {
                continue;
            };
            if let Some((dist, k)) = self.running(entry, natives, 0) {
                if best.is_none_or(|b| dist < b.0) {
                    best = Some((dist, v, k));
                }
            }
        }
        best.map(|b| (b.1, b.2))
    }

    /// A method-wrapper's C functions: its descriptor's `wrapper` and the slot it wraps.
    fn wrapper_functions(&self, obj: u64) -> Result<(u64, u64), ReadError> {
        let descr = self
            .mem
            .read_ptr(field(self.object_fields(obj)?, WRAPPER_DESCR)?)?;
        let d = self.object_fields(descr)?;
        let base = self.mem.read_ptr(field(d, WRAPPERDESCR_D_BASE)?)?;
        let wrapped = self.mem.read_ptr(field(d, WRAPPERDESCR_D_WRAPPED)?)?;
        let call = self.mem.read_ptr(field(base, WRAPPERBASE_WRAPPER)?)?;
        Ok((call, wrapped))
    }
}
