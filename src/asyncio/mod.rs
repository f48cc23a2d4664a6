//! asyncio: the tasks of a stopped process, their await chains, who awaits whom, and where
//! each task's frames are.
//!
//! - Tasks come from asyncio's own registries (`_all_tasks` / `_scheduled_tasks` WeakSet and
//!   `_eager_tasks`), read through `sys.modules`; from 3.14 also from the per-thread and
//!   per-interpreter lists of native tasks and `_asyncio`'s registry of foreign tasks, which the
//!   asyncio debug section locates (`debug_section.rs`).
//! - A task is on-CPU when its coroutine's frame (by address) is on a thread's frame chain; the
//!   chain is cut at every such frame, so each frame belongs to exactly one task.
//! - A loop belongs to the thread whose running-loop state holds it (any loop, uvloop too).
//! - Edges: a task's `fut_waiter` that is a Task; 3.14+ the awaiters the runtime records
//!   (`fut_awaited_by`); and the done callbacks of tasks and futures (task wakeups, gather,
//!   shield, `wait_for`, TaskGroup), which CPython up to 3.13 keeps nowhere else.

mod analyze;
pub mod chain;
pub mod debug_section;
mod discovery;
pub mod layout;
pub mod loops;
pub mod objects;

use std::collections::{BTreeSet, HashMap};

pub use analyze::analyze;
use chain::{top_frame, Leaf};
use debug_section::AsyncioDebug;
use discovery::{list_tasks, registries, running_loop};
use layout::AsyncioLayout;
use objects::{Class, KnownTypes, Objects, RawTask};

use crate::cpython::values::field;
use crate::cpython::{FrameItem, FrameWalk, Snapshot};
use crate::error::{Error, ReadError};
use crate::memory::addr_map::{AddrMap, AddrSet};
use crate::model::{AwaitingKind, ErrorReport};

/// Most tasks we list.
pub const MAX_TASKS: u64 = 1 << 20;
/// Tasks a thread takes at once when they are read in parallel.
const PARALLEL_BATCH: usize = 256;
/// Deepest chain of futures we follow through callbacks.
const MAX_CALLBACK_DEPTH: usize = 32;

/// A thread's decoded Python frames, as the session has them.
pub struct ThreadFrames<'a> {
    /// Its `PyThreadState`s (3.14+: also `_PyThreadStateImpl`s) with their interpreters: the
    /// one it runs in now first, then those of the interpreters it entered that one from and
    /// left (a thread that entered subinterpreters has one in each).
    pub tstates: Vec<(u64, u64)>,
    pub native_id: Option<u64>,
    pub walk: &'a FrameWalk,
}

#[derive(Clone, Debug)]
pub struct TaskView {
    pub raw: RawTask,
    /// False for objects in asyncio's registry that are not `asyncio.Task`s.
    pub supported: bool,
    /// The thread whose stack holds this task's coroutine frame right now.
    pub on_cpu: Option<usize>,
    /// The thread that runs the task's loop (or that it is on).
    pub thread: Option<usize>,
    /// Innermost first: the live frames if on-CPU, else the coroutine chain.
    pub frames: Vec<FrameItem>,
    pub awaiting: Option<Awaiting>,
    /// Tasks that await this one, and tasks that own it while they run (not awaiting).
    pub awaited_by: Vec<u64>,
    pub owned_by: Vec<u64>,
    /// The interpreter whose lists or registry hold it (its asyncio's); 0 when unknown.
    pub interp: u64,
}

#[derive(Clone, Debug)]
pub struct Awaiting {
    pub kind: AwaitingKind,
    pub id: u64,
    pub type_name: String,
    /// For a future an executor job completes: the worker thread running it.
    pub executor_thread: Option<usize>,
    /// And the job's function, by its qualified name.
    pub executor_job: Option<String>,
}

#[derive(Clone, Debug)]
pub struct LoopView {
    pub addr: u64,
    pub type_name: String,
    pub thread: Option<usize>,
    /// The thread's frames from the loop outwards (`_run_once`, `run_forever`, ... `<module>`),
    /// innermost first.
    pub upper: Vec<FrameItem>,
    /// The index in the thread's frames of `upper`'s first.
    pub upper_start: usize,
}

#[derive(Clone, Debug, Default)]
pub struct AsyncView {
    pub tasks: Vec<TaskView>,
    pub loops: Vec<LoopView>,
    /// Await cycles, each as task ids in await order, each once.
    pub cycles: Vec<Vec<u64>>,
    pub errors: Vec<ErrorReport>,
    /// Where a suspended frame keeps its value stack's live top (None: no tasks were read).
    pub stack_top: Option<layout::StackTop>,
}

impl AsyncView {
    pub fn task(&self, id: u64) -> Option<&TaskView> {
        self.tasks.iter().find(|t| t.raw.addr == id)
    }
}

fn view_err(errors: &mut Vec<ErrorReport>, addr: u64, what: String) {
    if errors.len() < 1000 {
        errors.push(ErrorReport::new(addr, what));
    }
}

impl TaskView {
    fn new(raw: RawTask, supported: bool) -> Self {
        TaskView {
            raw,
            supported,
            on_cpu: None,
            thread: None,
            frames: Vec::new(),
            awaiting: None,
            awaited_by: Vec::new(),
            owned_by: Vec::new(),
            interp: 0,
        }
    }
}

/// A name's sort key without its last digits, and those digits' value: "Task-2" sorts before
/// "Task-10" (ties: by the whole name).
fn natural_parts(s: &str) -> (&str, u64) {
    let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (head, tail) = s.split_at(s.len() - digits);
    (head, tail.parse().unwrap_or(0))
}

/// Finds which tasks wait on a future, through the future's done callbacks.
struct Resolver<'o, 'a> {
    o: &'o Objects<'a>,
    memo: AddrMap<Vec<u64>>,
    by_callback: AddrMap<Vec<u64>>,
    active: AddrSet,
    errors: Vec<ErrorReport>,
}

impl Resolver<'_, '_> {
    /// Tasks woken (directly or through intermediate futures) when `fut` completes.
    fn waiters(&mut self, fut: u64, c: bool, depth: usize) -> Vec<u64> {
        if let Some(w) = self.memo.get(&fut) {
            return w.clone();
        }
        if depth > MAX_CALLBACK_DEPTH || !self.active.insert(fut) {
            return Vec::new();
        }
        let mut out = Vec::new();
        match self.o.callbacks(fut, c) {
            Ok(cbs) => {
                for cb in cbs {
                    // One callback often serves many futures (gather's `_done_callback` is
                    // added to every child).
                    if let Some(w) = self.by_callback.get(&cb) {
                        out.extend_from_slice(w);
                        continue;
                    }
                    let mut found = Vec::new();
                    if let Err(e) = self.callback(cb, depth, &mut found) {
                        self.errors
                            .push(ErrorReport::new(cb, format!("done callback: {e}")));
                    }
                    out.extend_from_slice(&found);
                    self.by_callback.insert(cb, found);
                }
            }
            Err(e) => self
                .errors
                .push(ErrorReport::new(fut, format!("future callbacks: {e}"))),
        }
        out.sort_unstable();
        out.dedup();
        self.active.remove(&fut);
        // Depth 0 is a task, asked once (callbacks lead only to futures, which are not
        // tasks): nothing asks for it again.
        if depth > 0 {
            self.memo.insert(fut, out.clone());
        }
        out
    }

    fn callback(&mut self, cb: u64, depth: usize, out: &mut Vec<u64>) -> Result<(), ReadError> {
        let o = self.o;
        let follow = |this: &mut Self, v: u64, out: &mut Vec<u64>| -> Result<(), ReadError> {
            if let Class::Future { c, .. } = o.class(v)? {
                out.extend(this.waiters(v, c, depth + 1));
            }
            Ok(())
        };
        match o.class(cb)? {
            // `task_wakeup` / `task_step` bound to the waiting task (C tasks).
            Class::BuiltinMethod => {
                let s = o.ptr(field(cb, o.lay.cfunction_self)?)?;
                if o.class(s)?.is_task() {
                    out.push(s);
                }
            }
            // `Task.__wakeup` (pure-Python tasks), `TaskGroup._on_task_done`.
            Class::Method => {
                let s = o.ptr(field(cb, o.lay.method_self)?)?;
                if o.class(s)?.is_task() {
                    out.push(s);
                } else if s != 0 {
                    let parent = o.attr_or_zero(s, "_parent_task");
                    if parent != 0 && o.class(parent)?.is_task() {
                        out.push(parent);
                    }
                }
            }
            // gather's `_done_callback` and shield's `_inner_done_callback` (cell `outer`).
            Class::Function => {
                for v in o.closure_values(cb)? {
                    follow(self, v, out)?;
                }
            }
            // 3.11 `wait_for`: `partial(_release_waiter, waiter)`.
            Class::Partial => {
                for v in o.partial_args(cb)? {
                    follow(self, v, out)?;
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// Worker threads running an executor job: the `concurrent.futures.Future` of the job, from
/// `_WorkItem.run(self)`'s `self.future`, mapped to the thread index and the job's function.
fn executor_jobs(o: &Objects, threads: &[ThreadFrames]) -> AddrMap<(usize, Option<String>)> {
    let mut out = AddrMap::default();
    for (ti, t) in threads.iter().enumerate() {
        for item in &t.walk.items {
            if let FrameItem::Python(p) = item {
                if &*p.code.qualname == "_WorkItem.run" {
                    if let Ok(item_obj) = o.local0(p.addr) {
                        let fut = o.attr_or_zero(item_obj, "future");
                        if fut != 0 {
                            let job = o.callable_name(job_callable(o, item_obj));
                            out.insert(fut, (ti, job));
                        }
                    }
                }
            }
        }
    }
    out
}

/// The callable of a `_WorkItem`: its `fn` (3.10 to 3.13), else (3.14+, whose items hold a
/// `task` that `WorkerContext.run` unpacks) the first of its `task` tuple `(fn, args, kwargs)`
/// (Lib/concurrent/futures/thread.py).
fn job_callable(o: &Objects, item: u64) -> u64 {
    let f = o.attr_or_zero(item, "fn");
    if f != 0 {
        return f;
    }
    let task = o.attr_or_zero(item, "task");
    match o.snap.type_of(task) {
        Ok(t) if t.name == "tuple" => o
            .snap
            .read_seq(task, false, 1)
            .ok()
            .and_then(|(items, _)| items.first().copied())
            .unwrap_or(0),
        _ => 0,
    }
}

fn awaiting(
    o: &Objects,
    t: &TaskView,
    leaf: Leaf,
    workers: &AddrMap<(usize, Option<String>)>,
) -> Option<Awaiting> {
    // The pure-Python Future's `__await__` generator sits below the coroutine that awaits.
    let innermost = t.frames.iter().find_map(|f| match f {
        FrameItem::Python(p) if &*p.code.qualname != "Future.__await__" => Some(p),
        _ => None,
    });
    let in_sleep = innermost.is_some_and(|p| {
        &*p.code.qualname == "sleep" && p.code.filename.ends_with("asyncio/tasks.py")
    });
    Some(match leaf {
        Leaf::Awaits(f) => {
            let class = o.class(f).unwrap_or(Class::Other);
            let (kind, executor) = match class {
                Class::Task { .. } => (AwaitingKind::Task, None),
                Class::Future {
                    gathering: true, ..
                } => (AwaitingKind::Gather, None),
                Class::Future { c, .. } => {
                    if in_sleep {
                        (AwaitingKind::Sleep, None)
                    } else {
                        // `run_in_executor`: the asyncio future's callbacks hold a closure
                        // (`_chain_future._call_check_cancel`) whose cell `source` is the job.
                        let job = o
                            .callbacks(f, c)
                            .unwrap_or_default()
                            .into_iter()
                            .filter(|cb| o.class(*cb).ok() == Some(Class::Function))
                            .flat_map(|cb| o.closure_values(cb).unwrap_or_default())
                            .find(|v| o.class(*v).ok() == Some(Class::ConcurrentFuture));
                        (
                            AwaitingKind::Future,
                            job.and_then(|j| workers.get(&j).cloned()),
                        )
                    }
                }
                _ => (AwaitingKind::Other, None),
            };
            let (executor_thread, executor_job) = executor.unzip();
            Awaiting {
                kind,
                id: f,
                type_name: o.type_name(f),
                executor_thread,
                executor_job: executor_job.flatten(),
            }
        }
        Leaf::Yield { gen, function } => Awaiting {
            kind: if function == "__sleep0" {
                AwaitingKind::Sleep
            } else {
                AwaitingKind::Other
            },
            id: gen,
            type_name: "generator".into(),
            executor_thread: None,
            executor_job: None,
        },
        Leaf::Other { addr, type_name } => Awaiting {
            kind: AwaitingKind::Other,
            id: addr,
            type_name,
            executor_thread: None,
            executor_job: None,
        },
        Leaf::Running | Leaf::NotStarted | Leaf::Done | Leaf::Error(_) => return None,
    })
}

/// Every elementary cycle reachable by DFS (each reported once, rotated to start at its
/// smallest id). Iterative, so deep graphs do not recurse.
fn find_cycles(nodes: &[u64], awaits: &AddrMap<Vec<u64>>) -> Vec<Vec<u64>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Colour {
        White,
        Grey,
        Black,
    }
    let mut colour: AddrMap<Colour> = nodes.iter().map(|n| (*n, Colour::White)).collect();
    let mut found: BTreeSet<Vec<u64>> = BTreeSet::new();
    let empty = Vec::new();
    for &start in nodes {
        if colour[&start] != Colour::White {
            continue;
        }
        // (node, next child index); `path` mirrors the grey nodes.
        let mut stack = vec![(start, 0usize)];
        let mut path = vec![start];
        colour.insert(start, Colour::Grey);
        while let Some((node, i)) = stack.last().copied() {
            let children = awaits.get(&node).unwrap_or(&empty);
            if i < children.len() {
                stack.last_mut().unwrap().1 += 1;
                let child = children[i];
                match colour.get(&child).copied() {
                    Some(Colour::White) => {
                        colour.insert(child, Colour::Grey);
                        stack.push((child, 0));
                        path.push(child);
                    }
                    Some(Colour::Grey) => {
                        let at = path.iter().position(|n| *n == child).unwrap_or(0);
                        let mut cycle = path[at..].to_vec();
                        let min = cycle
                            .iter()
                            .enumerate()
                            .min_by_key(|(_, v)| **v)
                            .map_or(0, |(i, _)| i);
                        cycle.rotate_left(min);
                        found.insert(cycle);
                    }
                    _ => {}
                }
            } else {
                colour.insert(node, Colour::Black);
                stack.pop();
                path.pop();
            }
        }
    }
    found.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycles_found_once_and_rotated() {
        let mut g = AddrMap::default();
        g.insert(3, vec![1]);
        g.insert(1, vec![2]);
        g.insert(2, vec![3]);
        g.insert(5, vec![6]);
        g.insert(6, vec![5]);
        g.insert(7, vec![1]);
        let c = find_cycles(&[7, 3, 1, 2, 5, 6], &g);
        assert_eq!(c, vec![vec![1, 2, 3], vec![5, 6]]);
    }

    #[test]
    fn no_cycle_in_a_fan_in() {
        let mut g = AddrMap::default();
        g.insert(1, vec![3]);
        g.insert(2, vec![3]);
        assert!(find_cycles(&[1, 2, 3], &g).is_empty());
    }

    #[test]
    fn natural_order() {
        let mut v = vec!["Task-10", "Task-2", "main", "Task-1"];
        v.sort_by_key(|s| (natural_parts(s), *s));
        assert_eq!(v, vec!["Task-1", "Task-2", "Task-10", "main"]);
    }
}
