//! What an asyncio event loop has queued at the stop: the handles ready to run in this
//! iteration and the earliest timer, from the loop object's own attributes.
//!
//! `BaseEventLoop` (Lib/asyncio/base_events.py, 3.10 to 3.15) keeps:
//!
//! - `_ready`: a `collections.deque` of `Handle`s that `_run_once` runs in this iteration;
//! - `_scheduled`: a `heapq` list of `TimerHandle`s, `[0]` the earliest. `TimerHandle` (Lib/
//!   asyncio/events.py) keeps its deadline in the `__slots__` member `_when`, a float in
//!   `loop.time()`'s units, which is `time.monotonic()`: CLOCK_MONOTONIC.
//!
//! A blocked iteration leaves `_scheduled[0]._when` further and further in the past: the time
//! the loop is late by. uvloop's `Loop` is a Cython object whose queues are C fields and whose
//! timers are in libuv's heap; nothing here reads them.

use crate::cpython::Snapshot;
use crate::error::ReadError;

/// Past this a deque's length is no queue of handles (a server's loop holds thousands).
const MAX_READY: i64 = 1 << 32;

/// A loop's queues, each None where the loop keeps none that memory shows.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LoopQueues {
    /// `len(loop._ready)`.
    pub ready: Option<u64>,
    /// `loop._scheduled[0]._when` (`loop.time()`, CLOCK_MONOTONIC seconds); None when no
    /// timer is scheduled.
    pub earliest_when: Option<f64>,
}

/// Why a loop's queues are not read, after its type's name.
pub const C_LOOP_QUEUES_UNREAD: &str = "keeps no _ready or _scheduled attribute: a loop \
     written in C (uvloop keeps its ready queue in its Cython Loop and its timers in libuv's \
     heap, whose layouts are not read): ready, overdue_s and its tasks' remaining_s are null";

/// The queues of the loop object at `loop_`. Err(reason) for a loop whose queues are not
/// Python attributes (uvloop's), or that cannot be read.
pub fn queues(snap: &Snapshot, loop_: u64) -> Result<LoopQueues, String> {
    let attrs = snap
        .instance_attrs(loop_, &["_ready", "_scheduled"])
        .map_err(|e| e.to_string())?;
    if attrs.iter().all(Option::is_none) {
        let t = snap.type_of(loop_).map_err(|e| e.to_string())?;
        return Err(format!("{} {C_LOOP_QUEUES_UNREAD}", t.name));
    }
    let ready = match attrs[0] {
        Some(d) => Some(deque_len(snap, d).map_err(|e| format!("its _ready: {e}"))?),
        None => None,
    };
    let earliest_when = match attrs[1] {
        Some(l) => earliest_when(snap, l).map_err(|e| format!("its _scheduled: {e}"))?,
        None => None,
    };
    Ok(LoopQueues {
        ready,
        earliest_when,
    })
}

/// `len(d)` of a `collections.deque`: its `ob_size` (Modules/_collectionsmodule.c: a
/// `PyVarObject`, 3.10 to 3.15).
fn deque_len(snap: &Snapshot, d: u64) -> Result<u64, ReadError> {
    let t = snap.type_of(d)?;
    if t.name != "collections.deque" {
        return Err(ReadError::corrupt(d, "not a collections.deque"));
    }
    let n = snap.mem.read_i64(crate::cpython::values::field(
        d,
        snap.layout.tuple_object.ob_size,
    )?)?;
    if !(0..MAX_READY).contains(&n) {
        return Err(ReadError::corrupt(d, "deque size"));
    }
    Ok(n as u64)
}

/// `_scheduled[0]._when`, None for an empty heap.
fn earliest_when(snap: &Snapshot, list: u64) -> Result<Option<f64>, ReadError> {
    if snap.type_of(list)?.name != "list" {
        return Err(ReadError::corrupt(list, "not a list"));
    }
    let (items, _) = snap.read_seq(list, true, 1)?;
    let Some(&handle) = items.first() else {
        return Ok(None);
    };
    let when = snap
        .slot_attr(handle, "_when")?
        .ok_or_else(|| ReadError::corrupt(handle, "a timer handle with no _when"))?;
    // `loop.call_at(when)` keeps the `when` it is given: a float from `loop.time()`, or an
    // int (aiohttp's timeouts call it with `math.ceil` of a deadline).
    let w = match snap.type_of(when)?.name.as_str() {
        "float" => snap.read_float(when)?,
        "int" => snap
            .read_int(when)?
            .parse::<f64>()
            .map_err(|_| ReadError::corrupt(when, "a timer's _when"))?,
        _ => {
            return Err(ReadError::corrupt(
                when,
                "a timer's _when is not a float nor an int",
            ))
        }
    };
    if !w.is_finite() || w < 0.0 {
        return Err(ReadError::corrupt(when, "a timer's _when"));
    }
    Ok(Some(w))
}
