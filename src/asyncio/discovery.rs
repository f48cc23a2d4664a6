//! Where the tasks and loops are: asyncio's registries read through `sys.modules`, 3.14+'s
//! circular lists of native tasks, and the loop a thread is running.

use super::layout::{AsyncioLayout, RunningLoop, TaskLists};
use super::objects::KnownTypes;
use super::MAX_TASKS;
use crate::cpython::values::field;
use crate::cpython::Snapshot;
use crate::error::ReadError;
use crate::memory::addr_map::AddrSet;

/// The interpreter's asyncio classes and the objects in its task registries, or None when
/// asyncio is not imported.
pub(super) fn registries(
    snap: &Snapshot,
    lay: &AsyncioLayout,
    interp: u64,
) -> Result<Option<(KnownTypes, Vec<u64>)>, ReadError> {
    let Some(modules) = snap.sys_modules(interp)? else {
        return Ok(None);
    };
    let module_dict = |name: &str| snap.module_dict(modules, name);
    let Some(tasks) = module_dict("asyncio.tasks")? else {
        return Ok(None);
    };
    let get =
        |d: u64, name: &str| -> Result<u64, ReadError> { Ok(snap.dict_get(d, name)?.unwrap_or(0)) };
    let mut k = KnownTypes {
        c_task: get(tasks, "_CTask")?,
        py_task: get(tasks, "_PyTask")?,
        gathering: get(tasks, "_GatheringFuture")?,
        ..KnownTypes::default()
    };
    if let Some(f) = module_dict("asyncio.futures")? {
        k.c_future = get(f, "_CFuture")?;
        k.py_future = get(f, "_PyFuture")?;
    }
    if let Some(c) = module_dict("concurrent.futures._base")? {
        k.concurrent_future = get(c, "Future")?;
    }
    let mut out = Vec::new();
    // 3.12+: `_scheduled_tasks` (WeakSet) and `_eager_tasks` (set); 3.11: `_all_tasks`.
    for name in ["_scheduled_tasks", "_all_tasks"] {
        let ws = get(tasks, name)?;
        if ws == 0 {
            continue;
        }
        let Some(data) = snap.instance_attr(ws, "data")? else {
            continue;
        };
        for r in snap.set_keys(data, MAX_TASKS + 1)? {
            let obj = snap.mem.read_ptr(field(r, lay.weakref_object)?)?;
            if obj != 0 {
                out.push(obj);
            }
        }
    }
    let eager = get(tasks, "_eager_tasks")?;
    if eager != 0 {
        out.extend(snap.set_keys(eager, MAX_TASKS + 1)?);
    }
    // 3.14+: tasks that are not `asyncio.Task`s, registered through the C `_asyncio`, live in
    // its module state.
    if let (Some(ms), Some(m)) = (&lay.module_state, snap.dict_get(modules, "_asyncio")?) {
        if snap.type_of(m)?.name == "module" {
            let state = snap.mem.read_ptr(field(m, ms.md_state)?)?;
            if state != 0 {
                let ws = snap.mem.read_ptr(field(state, ms.non_asyncio_tasks)?)?;
                if ws != 0 && snap.type_of(ws)?.name == "WeakSet" {
                    if let Some(data) = snap.instance_attr(ws, "data")? {
                        for r in snap.set_keys(data, MAX_TASKS + 1)? {
                            let obj = snap.mem.read_ptr(field(r, lay.weakref_object)?)?;
                            if obj != 0 {
                                out.push(obj);
                            }
                        }
                    }
                }
                let eager = snap
                    .mem
                    .read_ptr(field(state, ms.non_asyncio_eager_tasks)?)?;
                if eager != 0 && snap.type_of(eager)?.name == "set" {
                    out.extend(snap.set_keys(eager, MAX_TASKS + 1)?);
                }
            }
        }
    }
    Ok(Some((k, out)))
}

/// 3.14+: the tasks on one circular list (`head` is the list's own `llist_node`), appended to
/// `out`. Bounded and cycle-checked; a broken or half-updated list is reported.
pub(super) fn list_tasks(
    snap: &Snapshot,
    head: u64,
    l: &TaskLists,
    out: &mut Vec<u64>,
    err: &mut impl FnMut(u64, String),
) {
    // One read per node: `next` and `prev` are the node's two words (in either order).
    let first = l.node_next.min(l.node_prev);
    let span = l.node_next.max(l.node_prev) - first + 8;
    let node_words = |node: u64| -> Result<(u64, u64), ReadError> {
        let raw = snap.mem.read_vec(node.wrapping_add(first), span, 64)?;
        let word = |off: u64| {
            let o = (off - first) as usize;
            raw.get(o..o + 8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
                .ok_or(ReadError::corrupt(node, "task list node"))
        };
        Ok((word(l.node_next)?, word(l.node_prev)?))
    };
    let mut seen = AddrSet::default();
    let (mut node, last) = match node_words(head) {
        Ok(w) => w,
        Err(e) => return err(head, format!("task list: {e}")),
    };
    // An empty list that was never used (a thread that made no task) is all zeros.
    if node == 0 {
        return;
    }
    let mut prev_node = head;
    let mut count = 0u64;
    while node != head {
        if node == 0 || !seen.insert(node) {
            return err(head, "task list: broken (a NULL link or a cycle)".into());
        }
        if count >= MAX_TASKS {
            return err(head, format!("task list: cut at {MAX_TASKS} tasks"));
        }
        let (next, prev) = match node_words(node) {
            Ok(w) => w,
            Err(e) => return err(node, format!("task list: {e}")),
        };
        if prev != prev_node {
            err(
                node,
                "task list: links disagree (stopped inside an update?)".into(),
            );
        }
        out.push(node.wrapping_sub(l.task_node));
        prev_node = node;
        node = next;
        count += 1;
    }
    // A link cut back to the head early (or a core taken mid-unlink) ends the walk too soon:
    // the head's own `prev` names the real last node.
    if last != prev_node {
        err(
            head,
            "task list: links disagree (stopped inside an update?)".into(),
        );
    }
}

/// The loop a thread is running, from its own state (what `asyncio.get_running_loop()`
/// returns there), or None.
pub(super) fn running_loop(
    snap: &Snapshot,
    lay: &AsyncioLayout,
    tstate: u64,
) -> Result<Option<u64>, ReadError> {
    let l = match lay.running_loop {
        RunningLoop::ThreadState { running_loop } => {
            snap.mem.read_ptr(field(tstate, running_loop)?)?
        }
        RunningLoop::ThreadDict { dict, holder_loop } => {
            let d = snap.mem.read_ptr(field(tstate, dict)?)?;
            if d == 0 {
                return Ok(None);
            }
            match snap.dict_get(d, "__asyncio_running_event_loop__")? {
                None => return Ok(None),
                Some(v) => match holder_loop {
                    Some(off) if snap.type_of(v)?.name != "NoneType" => {
                        snap.mem.read_ptr(field(v, off)?)?
                    }
                    _ => v,
                },
            }
        }
        RunningLoop::Unknown => return Ok(None),
    };
    if l == 0 || snap.type_of(l)?.name == "NoneType" {
        return Ok(None);
    }
    Ok(Some(l))
}
