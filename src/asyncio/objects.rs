//! asyncio's objects as the target holds them: which class an object is, and the fields of
//! tasks and futures, for both the C (`_asyncio`) and the pure-Python classes.

use std::sync::RwLock;

use super::layout::AsyncioLayout;
use crate::cpython::values::field;
use crate::cpython::Snapshot;
use crate::error::ReadError;
use crate::memory::addr_map::{AddrMap, OnceTable};

/// Deepest `tp_base` chain we follow.
const MAX_BASES: usize = 64;
/// Most callbacks of one future we look at.
pub const MAX_CALLBACKS: u64 = 1 << 16;
/// Most awaiters of one future we read (CPython's remote reader: `MAX_SET_TABLE_SIZE`).
const MAX_AWAITERS: u64 = 1 << 20;
/// Wrappers (bound methods, partials) followed to an executor job's function.
const MAX_CALLABLE_WRAPS: usize = 8;
/// Types whose class is kept where threads read it without a lock (the rest under one).
const CLASS_SLOTS: usize = 256;

/// What an object is, as far as the await graph cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// `asyncio.Task` or a subclass; `c` for `_asyncio.Task`.
    Task {
        c: bool,
    },
    /// `asyncio.Future` or a subclass; `gathering` for `tasks._GatheringFuture`.
    Future {
        c: bool,
        gathering: bool,
    },
    /// `concurrent.futures.Future` (what an executor job completes).
    ConcurrentFuture,
    Coroutine,
    AsyncGen,
    Generator,
    /// `async_generator_asend` / `async_generator_athrow`: they drive an async generator.
    AsyncGenAwait,
    FutureIter,
    BuiltinMethod,
    Method,
    Function,
    Partial,
    WeakRef,
    None,
    Other,
}

impl Class {
    pub fn is_task(self) -> bool {
        matches!(self, Class::Task { .. })
    }
    pub fn is_future(self) -> bool {
        matches!(self, Class::Future { .. })
    }
}

/// The asyncio classes of this process, found in `sys.modules` (0 when absent).
#[derive(Clone, Copy, Debug, Default)]
pub struct KnownTypes {
    pub c_task: u64,
    pub py_task: u64,
    pub c_future: u64,
    pub py_future: u64,
    pub gathering: u64,
    pub concurrent_future: u64,
}

/// A task's fields, read once.
#[derive(Clone, Debug)]
pub struct RawTask {
    pub addr: u64,
    pub c: bool,
    pub type_name: String,
    pub name: String,
    pub state: &'static str,
    pub loop_: u64,
    pub coro: u64,
    pub fut_waiter: u64,
    /// 3.14+: the awaiters the runtime records (`fut_awaited_by`), tasks or futures.
    pub awaited_by: Vec<u64>,
}

/// Reads asyncio objects of one snapshot, with a per-type class cache.
pub struct Objects<'a> {
    pub snap: &'a Snapshot,
    pub lay: AsyncioLayout,
    /// Each interpreter's asyncio types (a subinterpreter's `_asyncio` has types of its own).
    pub known: Vec<KnownTypes>,
    /// Read by every worker for every object, written once per type: without a lock, and
    /// under one for the types that do not fit.
    classes: OnceTable<Class>,
    more_classes: RwLock<AddrMap<Class>>,
}

impl<'a> Objects<'a> {
    pub fn new(snap: &'a Snapshot, lay: AsyncioLayout, known: Vec<KnownTypes>) -> Self {
        Objects {
            snap,
            lay,
            known,
            classes: OnceTable::new(CLASS_SLOTS),
            more_classes: RwLock::new(AddrMap::default()),
        }
    }

    pub fn class(&self, obj: u64) -> Result<Class, ReadError> {
        if obj == 0 {
            return Ok(Class::None);
        }
        // Classes are cached by type address: a hit costs one read of `ob_type`.
        let tp = self
            .snap
            .mem
            .read_ptr(field(obj, self.snap.layout.pyobject.ob_type)?)?;
        if let Some(c) = self.classes.get(tp) {
            return Ok(*c);
        }
        if let Some(c) = self
            .more_classes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&tp)
        {
            return Ok(*c);
        }
        let t = self.snap.type_of(obj)?;
        let c = self.classify_type(t.addr, &t.name)?;
        if self.classes.insert(t.addr, c).is_none() {
            self.more_classes
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(t.addr, c);
        }
        Ok(c)
    }

    fn classify_type(&self, tp: u64, name: &str) -> Result<Class, ReadError> {
        // Built-in types by name: they are static (or, in 3.12+, created from a spec whose
        // `tp_name` is fixed), and a Python class cannot subclass most of them.
        let by_name = match name {
            "coroutine" => Some(Class::Coroutine),
            "async_generator" => Some(Class::AsyncGen),
            "generator" => Some(Class::Generator),
            "async_generator_asend" | "async_generator_athrow" => Some(Class::AsyncGenAwait),
            "_asyncio.FutureIter" | "FutureIter" => Some(Class::FutureIter),
            "builtin_function_or_method" => Some(Class::BuiltinMethod),
            "method" => Some(Class::Method),
            "function" => Some(Class::Function),
            "functools.partial" => Some(Class::Partial),
            "weakref.ReferenceType" | "weakref" | "weakref.KeyedRef" | "KeyedRef" => {
                Some(Class::WeakRef)
            }
            "NoneType" => Some(Class::None),
            _ => None,
        };
        if let Some(c) = by_name {
            return Ok(c);
        }
        // Tasks and futures (and their subclasses) by identity along `tp_base`, in any
        // interpreter's asyncio.
        let mut gathering = false;
        let mut cur = tp;
        for _ in 0..MAX_BASES {
            if cur == 0 {
                break;
            }
            let is = |pick: fn(&KnownTypes) -> u64| self.known.iter().any(|k| pick(k) == cur);
            if is(|k| k.gathering) {
                gathering = true;
            }
            let c_task = is(|k| k.c_task);
            if c_task || is(|k| k.py_task) {
                return Ok(Class::Task { c: c_task });
            }
            let c_future = is(|k| k.c_future);
            if c_future || is(|k| k.py_future) {
                return Ok(Class::Future {
                    c: c_future,
                    gathering,
                });
            }
            if is(|k| k.concurrent_future) {
                return Ok(Class::ConcurrentFuture);
            }
            cur = self.snap.type_at(cur)?.base;
        }
        Ok(Class::Other)
    }

    pub fn type_name(&self, obj: u64) -> String {
        self.snap
            .with_type_of(obj, |t| t.name.clone())
            .unwrap_or_else(|_| "?".into())
    }

    fn attr(&self, obj: u64, name: &str) -> Result<u64, ReadError> {
        Ok(self.snap.instance_attr(obj, name)?.unwrap_or(0))
    }

    /// Reads a task of class `c`.
    pub fn task(&self, addr: u64, c: bool) -> Result<RawTask, ReadError> {
        let snap = self.snap;
        let (f, t) = (&self.lay.future, &self.lay.task);
        let (state, loop_, coro, fut_waiter, name_obj, awaited_by) = if c {
            if !self.lay.c_objects {
                return Err(ReadError::corrupt(
                    addr,
                    "C task layout (no asyncio debug section found)",
                ));
            }
            let mut end = t.name.max(t.coro).max(t.fut_waiter).max(f.state) + 8;
            if let Some(a) = f.awaited_by {
                end = end.max(a.field + 8).max(a.is_set + 1);
            }
            let raw = snap.mem.read_vec(addr, end, end)?;
            let bytes = |o: u64, n: usize| -> Result<&[u8], ReadError> {
                raw.get(o as usize..o as usize + n)
                    .ok_or(ReadError::corrupt(addr, "task field outside the task"))
            };
            let word = |o: u64| -> Result<u64, ReadError> {
                Ok(u64::from_le_bytes(
                    bytes(o, 8)?.try_into().unwrap_or_default(),
                ))
            };
            let st = i32::from_le_bytes(bytes(f.state, 4)?.try_into().unwrap_or_default());
            let state = match st {
                0 => "pending",
                1 => "cancelled",
                2 => "finished",
                _ => return Err(ReadError::corrupt(addr, "task state")),
            };
            let awaited_by = match f.awaited_by {
                Some(a) => {
                    let obj = word(a.field)?;
                    let is_set = bytes(a.is_set, 1)?[0] != 0;
                    self.awaiters(obj, is_set)?
                }
                None => Vec::new(),
            };
            (
                state,
                word(f.loop_)?,
                word(t.coro)?,
                word(t.fut_waiter)?,
                word(t.name)?,
                awaited_by,
            )
        } else {
            // One read of the instance dict for every field.
            let fields = self.snap.instance_attrs(
                addr,
                &[
                    "_state",
                    "_loop",
                    "_coro",
                    "_fut_waiter",
                    "_name",
                    // 3.14+: `futures.future_add_to_awaited_by` (name-mangled; a set).
                    "_Future__asyncio_awaited_by",
                ],
            )?;
            let field = |i: usize| fields[i].unwrap_or(0);
            let (st, loop_, coro, fut_waiter, name) =
                (field(0), field(1), field(2), field(3), field(4));
            // A pending future has no `_state` of its own: the class attribute
            // `_state = _PENDING` (Lib/asyncio/futures.py) stands until the first change.
            let text = if st == 0 {
                "PENDING".into()
            } else {
                snap.read_str(st)?
            };
            let state = match text.as_str() {
                "PENDING" => "pending",
                "CANCELLED" => "cancelled",
                "FINISHED" => "finished",
                _ => return Err(ReadError::corrupt(addr, "task state")),
            };
            let awaited_by = match field(5) {
                0 => Vec::new(),
                set => self.awaiters(set, self.class(set)? != Class::None)?,
            };
            (state, loop_, coro, fut_waiter, name, awaited_by)
        };
        let fut_waiter = match self.class(fut_waiter) {
            Ok(Class::None) => 0,
            _ => fut_waiter,
        };
        Ok(RawTask {
            addr,
            c,
            type_name: self.type_name(addr),
            name: self.task_name(name_obj),
            state,
            loop_,
            coro,
            fut_waiter,
            awaited_by,
        })
    }

    /// 3.14+ `fut_awaited_by`: one awaiter, or a set of them.
    fn awaiters(&self, obj: u64, is_set: bool) -> Result<Vec<u64>, ReadError> {
        if obj == 0 || self.class(obj)? == Class::None {
            return Ok(Vec::new());
        }
        if is_set {
            self.snap.set_keys(obj, MAX_AWAITERS)
        } else {
            Ok(vec![obj])
        }
    }

    /// A task's name: a str, or (3.12+ C tasks, until `get_name()`) the int N of "Task-N".
    fn task_name(&self, obj: u64) -> String {
        if obj == 0 {
            return "?".into();
        }
        match self.snap.with_type_of(obj, |t| t.name == "int") {
            Ok(true) => self
                .snap
                .read_int_after("Task-", obj)
                .unwrap_or_else(|_| "?".into()),
            Ok(false) => self
                .snap
                .read_str(obj)
                .unwrap_or_else(|_| self.snap.repr(obj)),
            Err(_) => "?".into(),
        }
    }

    /// A future's (or task's) done callbacks, in order.
    pub fn callbacks(&self, fut: u64, c: bool) -> Result<Vec<u64>, ReadError> {
        let mut out = Vec::new();
        let list = if c {
            let cb0 = self
                .snap
                .mem
                .read_ptr(field(fut, self.lay.future.callback0)?)?;
            if cb0 != 0 {
                out.push(cb0);
            }
            self.snap
                .mem
                .read_ptr(field(fut, self.lay.future.callbacks)?)?
        } else {
            self.attr(fut, "_callbacks")?
        };
        if list == 0 || self.class(list)? == Class::None {
            return Ok(out);
        }
        let (items, _) = self.snap.read_seq(list, true, MAX_CALLBACKS)?;
        for item in items {
            // Each entry is a (callback, context) tuple.
            let (pair, _) = self.snap.read_seq(item, false, 2)?;
            if let Some(&cb) = pair.first() {
                out.push(cb);
            }
        }
        Ok(out)
    }

    /// The contents of a function's closure cells.
    pub fn closure_values(&self, func: u64) -> Result<Vec<u64>, ReadError> {
        let closure = self
            .snap
            .mem
            .read_ptr(field(func, self.lay.function_closure)?)?;
        if closure == 0 || self.class(closure)? == Class::None {
            return Ok(Vec::new());
        }
        let (cells, _) = self.snap.read_seq(closure, false, 256)?;
        let mut out = Vec::new();
        for cell in cells {
            let v = self
                .snap
                .mem
                .read_ptr(field(cell, self.snap.layout.cell_ob_ref)?)?;
            if v != 0 {
                out.push(v);
            }
        }
        Ok(out)
    }

    /// The positional arguments bound by a `functools.partial`.
    pub fn partial_args(&self, p: u64) -> Result<Vec<u64>, ReadError> {
        let args = self.snap.mem.read_ptr(field(p, self.lay.partial_args)?)?;
        Ok(self.snap.read_seq(args, false, 256)?.0)
    }

    /// The callable a `functools.partial` calls: `fn`, the field before `args`
    /// (`partialobject`, Modules/_functoolsmodule.c, 3.10 to 3.15).
    fn partial_func(&self, p: u64) -> Result<u64, ReadError> {
        self.ptr(field(p, self.lay.partial_args - 8)?)
    }

    /// An executor job's name: a function's qualified name, a bound method's function's, a
    /// C callable's (`time.sleep`); through a `functools.partial` to what it calls, and
    /// through `to_thread`'s `partial(contextvars.Context.run, func, ...)` to `func`.
    pub fn callable_name(&self, obj: u64) -> Option<String> {
        let mut obj = obj;
        for _ in 0..MAX_CALLABLE_WRAPS {
            if obj == 0 {
                return None;
            }
            match self.snap.type_of(obj).ok()?.name.as_str() {
                "function" => return Some(self.snap.function_code(obj).ok()?.qualname.to_string()),
                "method" => obj = self.snap.method_func_and_self(obj).ok()?.0,
                "functools.partial" => {
                    let func = self.partial_func(obj).ok()?;
                    let runs_in_context = self
                        .snap
                        .c_callable_name(func)
                        .is_some_and(|n| n.ends_with("Context.run"));
                    obj = if runs_in_context {
                        *self.partial_args(obj).ok()?.first()?
                    } else {
                        func
                    };
                }
                _ => return self.snap.c_callable_name(obj),
            }
        }
        None
    }

    pub fn ptr(&self, addr: u64) -> Result<u64, ReadError> {
        self.snap.mem.read_ptr(addr)
    }

    pub fn attr_or_zero(&self, obj: u64, name: &str) -> u64 {
        self.attr(obj, name).unwrap_or(0)
    }
}
