//! C callables that are not CPython's own builtins: Cython functions, cffi function pointers,
//! `functools.partial` and instances of other C types with a `tp_call`. What each calls and
//! how it is named; [`super::callables`] asks here. Memory only.

use super::snapshot::Snapshot;
use super::values::{field, TypeInfo};

/// `partial`s of `partial`s followed to what they call, past which a chain is taken for a
/// corrupt one.
const MAX_PARTIALS: usize = 8;
/// Longest C name (`ml_name`) we read.
const MAX_C_NAME_BYTES: usize = 200;

// Cython 3.3.1's `__pyx_CyFunctionObject` (Cython/Utility/CythonFunction.c). Outside the
// Limited API it begins with a `PyCMethodObject`: `PyCFunctionObject` {m_ml, m_self (the
// function itself), m_module, m_weakreflist, vectorcall} then mm_class; then `func_dict`
// below 3.12 only, `func_name`, `func_qualname`. Under the Limited API (its type's module
// name `_cython_<ABI>` says `limited`): {func_methoddef, func_module, func_vectorcall (where
// the ABI name says `vectorcall`), func_weakreflist, func_dict, func_name, func_qualname}.
// With opaque objects (`opaque`) none of it is past the header: not read.
const CYFUNCTION_M_ML: u64 = 0;
const CYFUNCTION_M_MODULE: u64 = 16;
const CYFUNCTION_QUALNAME: u64 = 56;
const CYFUNCTION_LIMITED_MODULE: u64 = 8;
const CYFUNCTION_LIMITED_QUALNAME: u64 = 40;
// `PyMethodDef` {ml_name, ml_meth, ...} (Include/methodobject.h).
const METHODDEF_ML_NAME: u64 = 0;
const METHODDEF_ML_METH: u64 = 8;
// cffi 2.1.1's `CDataObject` {PyObject_HEAD; c_type; c_data; c_weakreflist} and
// `CTypeDescrObject` {PyObject_VAR_HEAD; ct_itemdescr, ct_stuff, ct_extra, ct_weakreflist,
// ct_unique_key, ct_size, ct_length, ct_flags (an int), ...}; `CT_FUNCTIONPTR` 0x100 in
// ct_flags (src/c/_cffi_backend.c). A function pointer's c_data is the function's address.
const CDATA_C_TYPE: u64 = 0;
const CDATA_C_DATA: u64 = 8;
const CTYPE_CT_FLAGS: u64 = 8 + 7 * 8;
const CT_FUNCTIONPTR: u32 = 0x100;
/// The base type of every cffi cdata (`CData_Type`'s `tp_name`, src/c/_cffi_backend.c).
const CFFI_CDATA: &str = "_cffi_backend._CDataBase";
// `partialobject` {PyObject_HEAD; fn; args; ...} (Modules/_functoolsmodule.c, 3.10 to 3.15).
const PARTIAL_FN: u64 = 0;
// `tp_flags` bits (Include/object.h, 3.10 to 3.15): a class statement makes a heap type that
// is never immutable; CPython's static types and C extensions' heap types from a spec are.
const TPFLAGS_IMMUTABLETYPE: u64 = 1 << 8;
const TPFLAGS_HEAPTYPE: u64 = 1 << 9;
const TPFLAGS_TYPE_SUBCLASS: u64 = 1 << 31;
/// C types whose `tp_call` runs Python code or is named elsewhere: never a `tp_call` wait.
const NOT_TP_CALLS: &[&str] = &[
    "function",
    "method",
    "builtin_function_or_method",
    "builtin_method",
    "method_descriptor",
    "classmethod_descriptor",
    "wrapper_descriptor",
    "method-wrapper",
    "staticmethod",
    "classmethod",
    "functools._lru_cache_wrapper",
];

/// What kind of C callable an object is, for naming it and finding its C function.
pub(super) enum Kind {
    /// A Cython function: (where its module's name is, where its `func_qualname` is).
    Cython(u64, u64),
    /// A cffi function pointer (a cdata whose type is one).
    Cffi,
    /// A `functools.partial`: what it calls is its `fn`.
    Partial,
    /// An instance of another C type with a `tp_call`.
    TpCall,
}

/// Whether a type is Cython's function type: `cython_function_or_method`, from 3.0 in a
/// module of its own, `_cython_<ABI>.cython_function_or_method`.
fn is_cython_function_type(name: &str) -> bool {
    name == "cython_function_or_method" || name.ends_with(".cython_function_or_method")
}

impl Snapshot {
    /// The kind of C callable `obj` is, among those here; None for others.
    pub(super) fn callable_kind(&self, obj: u64) -> Option<Kind> {
        let t = self.type_of(obj).ok()?;
        if is_cython_function_type(&t.name) {
            return cython_layout(&t.name, self.layout.version.minor);
        }
        let classes = self.class_names(obj);
        if classes.iter().any(|c| c == CFFI_CDATA) {
            return self.is_cffi_function(obj).then_some(Kind::Cffi);
        }
        if classes.iter().any(|c| c == "functools.partial") {
            return Some(Kind::Partial);
        }
        self.is_tp_call(&t).then_some(Kind::TpCall)
    }

    /// Whether `obj` is a cffi function pointer: a C callable whose name only the native frame
    /// running it gives.
    pub fn is_cffi_function_pointer(&self, obj: u64) -> bool {
        matches!(self.callable_kind(obj), Some(Kind::Cffi))
    }

    /// Whether a cdata is a function pointer: its type's `ct_flags` has `CT_FUNCTIONPTR`.
    fn is_cffi_function(&self, obj: u64) -> bool {
        let flags = || -> Option<u32> {
            let ct = self
                .mem
                .read_ptr(field(self.object_fields(obj).ok()?, CDATA_C_TYPE).ok()?)
                .ok()?;
            self.mem
                .read_u32(field(self.object_fields(ct).ok()?, CTYPE_CT_FLAGS).ok()?)
                .ok()
        };
        flags().is_some_and(|f| f & CT_FUNCTIONPTR != 0)
    }

    /// Whether an instance of type `t` is called through its C type's `tp_call`: a type no
    /// class statement made (static, or immutable), with a `tp_call`, that is no type itself
    /// (calling a class makes an instance) and none of [`NOT_TP_CALLS`].
    fn is_tp_call(&self, t: &TypeInfo) -> bool {
        t.flags & TPFLAGS_TYPE_SUBCLASS == 0
            && (t.flags & TPFLAGS_HEAPTYPE == 0 || t.flags & TPFLAGS_IMMUTABLETYPE != 0)
            && !NOT_TP_CALLS.contains(&t.name.as_str())
            && self.tp_call(t.addr).is_some()
    }

    fn tp_call(&self, tp: u64) -> Option<u64> {
        let at = field(tp, self.layout.type_object.tp_call()).ok()?;
        self.mem.read_ptr(at).ok().filter(|&f| f != 0)
    }

    /// The name of a C callable of these kinds: a Cython function as its module's name and its
    /// qualified name (`__module__`, `__qualname__`: `cyblock.Worker.block`), a `partial` as
    /// what it calls (`time.sleep`), another C type's instance as its type's `tp_name` and
    /// `.__call__` (`operator.methodcaller.__call__`). None for a cffi function (its name is
    /// the native frame's that runs it) and for a `partial` of no C callable.
    pub(super) fn kind_name(&self, obj: u64, kind: &Kind) -> Option<String> {
        match *kind {
            Kind::Cython(module_at, qualname_at) => self.cython_name(obj, module_at, qualname_at),
            Kind::Cffi => None,
            Kind::Partial => self.c_callable_name(self.partial_target(obj)?),
            Kind::TpCall => Some(format!("{}.__call__", self.type_of(obj).ok()?.name)),
        }
    }

    /// The C function a C callable of these kinds runs when called: a Cython function's
    /// `ml_meth`, a cffi pointer's target, what a `partial` calls, a type's `tp_call`.
    pub(super) fn kind_entry(&self, obj: u64, kind: &Kind) -> Option<u64> {
        let f = self.object_fields(obj).ok()?;
        let entry = match *kind {
            Kind::Cython(..) => {
                let ml = self.mem.read_ptr(field(f, CYFUNCTION_M_ML).ok()?).ok()?;
                self.mem.read_ptr(field(ml, METHODDEF_ML_METH).ok()?).ok()?
            }
            Kind::Cffi => self.mem.read_ptr(field(f, CDATA_C_DATA).ok()?).ok()?,
            Kind::Partial => return self.c_entry(self.partial_target(obj)?),
            Kind::TpCall => self.tp_call(self.type_of(obj).ok()?.addr)?,
        };
        (entry != 0).then_some(entry)
    }

    /// What a `partial` calls, through `partial`s of `partial`s: the first `fn` that is no
    /// `partial`.
    fn partial_target(&self, obj: u64) -> Option<u64> {
        let mut p = obj;
        for _ in 0..MAX_PARTIALS {
            p = self
                .mem
                .read_ptr(field(self.object_fields(p).ok()?, PARTIAL_FN).ok()?)
                .ok()
                .filter(|&f| f != 0)?;
            if !self.class_names(p).iter().any(|c| c == "functools.partial") {
                return Some(p);
            }
        }
        None
    }

    /// A Cython function's `module.qualname`; its `ml_name` stands for the qualified name
    /// where `func_qualname` is no str ending in it (another Cython's layout), and the module
    /// is left out where `m_module` is no str.
    fn cython_name(&self, obj: u64, module_at: u64, qualname_at: u64) -> Option<String> {
        let f = self.object_fields(obj).ok()?;
        let ml = self.mem.read_ptr(field(f, CYFUNCTION_M_ML).ok()?).ok()?;
        let name_ptr = self.mem.read_ptr(field(ml, METHODDEF_ML_NAME).ok()?).ok()?;
        let name = String::from_utf8_lossy(&self.mem.read_cstr(name_ptr, MAX_C_NAME_BYTES).ok()?)
            .into_owned();
        let str_at = |at: u64| {
            let p = self.mem.read_ptr(field(f, at).ok()?).ok()?;
            self.type_of(p).ok().filter(|t| t.name == "str")?;
            self.read_str(p).ok()
        };
        let qualname = str_at(qualname_at)
            .filter(|q| *q == name || q.ends_with(&format!(".{name}")))
            .unwrap_or(name);
        Some(match str_at(module_at) {
            Some(m) => format!("{m}.{qualname}"),
            None => qualname,
        })
    }
}

/// Where a Cython function's module name and qualified name are, by its type's name (which
/// says the Limited API and vectorcall) and the interpreter's minor version (which says
/// whether `func_dict` is there).
fn cython_layout(type_name: &str, minor: u8) -> Option<Kind> {
    let abi = type_name.split('.').next().unwrap_or("");
    if abi.contains("opaque") {
        return None;
    }
    if abi.contains("limited") {
        let vectorcall = if abi.contains("vectorcall") { 8 } else { 0 };
        return Some(Kind::Cython(
            CYFUNCTION_LIMITED_MODULE,
            CYFUNCTION_LIMITED_QUALNAME + vectorcall,
        ));
    }
    let dict = if minor < 12 { 8 } else { 0 };
    Some(Kind::Cython(
        CYFUNCTION_M_MODULE,
        CYFUNCTION_QUALNAME + dict,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cython_layouts_follow_the_abi_name_and_version() {
        let at = |name: &str, minor: u8| match cython_layout(name, minor) {
            Some(Kind::Cython(m, q)) => Some((m, q)),
            _ => None,
        };
        assert_eq!(
            at("_cython_3_3_1.cython_function_or_method", 12),
            Some((16, 56))
        );
        assert_eq!(
            at("_cython_3_3_1.cython_function_or_method", 11),
            Some((16, 64))
        );
        assert_eq!(
            at("_cython_3_3_1limited10_.cython_function_or_method", 14),
            Some((8, 40))
        );
        assert_eq!(
            at(
                "_cython_3_3_1limited12_vectorcall.cython_function_or_method",
                14
            ),
            Some((8, 48))
        );
        assert_eq!(
            at(
                "_cython_3_3_1limited10_opaque.cython_function_or_method",
                14
            ),
            None
        );
        assert!(is_cython_function_type("cython_function_or_method"));
        assert!(!is_cython_function_type("builtin_function_or_method"));
    }
}
