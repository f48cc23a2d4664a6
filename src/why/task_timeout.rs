//! The `asyncio.timeout()` deadline around a task's wait (`tasks[].timeout`, with `--why`):
//! Lib/asyncio/timeouts.py's `Timeout` (3.11+), which `asyncio.wait_for` also uses from 3.12
//! on (3.11's `wait_for` schedules its own callback instead, and shows none).
//!
//! While an `async with` block runs, its manager stays on the frame's value stack, where a
//! suspended coroutine frame keeps it: 3.11 to 3.13's `BEFORE_ASYNC_WITH` pushes the bound
//! `__aexit__` (a method whose `im_self` is the manager), 3.14's `LOAD_SPECIAL` pushes
//! `__aexit__` and the manager itself (Python/bytecodes.c). `async with ... as cm` also has it
//! as a local, but the stack has it either way. Its deadline is `_when`, in the loop's time:
//! CLOCK_MONOTONIC, as `asyncio.sleep`'s timer. Of nested ones, the earliest fires first.

use crate::asyncio::{AsyncView, TaskView};
use crate::cpython::layout::FrameModel;
use crate::cpython::values::field;
use crate::cpython::{FrameItem, Snapshot};
use crate::model::{Millis, TaskTimeout};

/// Frames of one task looked at.
const MAX_FRAMES: usize = 256;
const TIMEOUT_CLASS: &str = "Timeout";
const TIMEOUT_MODULE: &str = "asyncio.timeouts";
/// `PyMethodObject` {im_func, im_self, ...} after the object's header
/// (Include/cpython/classobject.h 3.10 to 3.15).
const METHOD_IM_SELF: u64 = 8;

/// The earliest `asyncio.timeout()` deadline that task `t`'s frames are inside, if any has
/// one (`timeout(None)` has none). `now` is CLOCK_MONOTONIC where the target shares it.
pub fn task_timeout(
    snap: &Snapshot,
    view: &AsyncView,
    t: &TaskView,
    now: Option<f64>,
) -> Option<TaskTimeout> {
    let FrameModel::Interpreter(f) = snap.layout.frame else {
        return None;
    };
    let top = view.stack_top?;
    let mut best: Option<(f64, u64, usize)> = None;
    for (i, item) in t.frames.iter().take(MAX_FRAMES).enumerate() {
        let FrameItem::Python(p) = item else {
            continue;
        };
        let nlocals = p.code.locals.len() as u64;
        let Some(depth) = top.live_slots(&*snap.mem, p.addr, f.localsplus, nlocals) else {
            continue;
        };
        for obj in snap
            .value_stack_slots_at_most(p, None, depth)
            .into_iter()
            .flatten()
        {
            let Some(cm) = timeout_of(snap, obj) else {
                continue;
            };
            let Some(when) = deadline(snap, cm) else {
                continue;
            };
            if best.is_none_or(|(w, _, _)| when < w) {
                best = Some((when, cm, i));
            }
        }
    }
    let (when, object, frame) = best?;
    Some(TaskTimeout {
        object,
        frame,
        remaining_s: now.and_then(|n| Millis::from_secs(when - n)),
    })
}

/// The `Timeout` a value-stack slot holds: the manager itself, or its bound `__aexit__`.
fn timeout_of(snap: &Snapshot, obj: u64) -> Option<u64> {
    let t = snap.type_of(obj).ok()?;
    let cm = if t.name == "method" {
        let at = snap.object_fields(obj).ok()?;
        snap.mem.read_ptr(field(at, METHOD_IM_SELF).ok()?).ok()?
    } else if t.name == TIMEOUT_CLASS {
        obj
    } else {
        return None;
    };
    is_asyncio_timeout(snap, cm).then_some(cm)
}

/// Whether `obj` is an `asyncio.timeouts.Timeout` (not another library's class of that name).
fn is_asyncio_timeout(snap: &Snapshot, obj: u64) -> bool {
    let Ok(t) = snap.type_of(obj) else {
        return false;
    };
    if t.name != TIMEOUT_CLASS {
        return false;
    }
    let to = &snap.layout.type_object;
    let Some(dict) = field(t.addr, to.tp_dict())
        .ok()
        .and_then(|at| snap.mem.read_ptr(at).ok())
        .filter(|&d| d != 0)
    else {
        return false;
    };
    snap.dict_get(dict, "__module__")
        .ok()
        .flatten()
        .and_then(|m| snap.read_name(m).ok())
        .is_some_and(|m| m == TIMEOUT_MODULE)
}

/// A `Timeout`'s `_when`: a float of the loop's time, or None (`timeout(None)`).
fn deadline(snap: &Snapshot, cm: u64) -> Option<f64> {
    let when = snap.instance_attr(cm, "_when").ok()??;
    (snap.type_of(when).ok()?.name == "float")
        .then(|| snap.read_float(when).ok())
        .flatten()
        .filter(|w| w.is_finite())
}
