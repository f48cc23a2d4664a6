//! The one-word kinds of `--why`'s holds and deadlocks (docs/report.md): what a thread or an
//! asyncio task holds, and what waits on what in a cycle.

use serde::{Deserialize, Serialize};

/// What a thread or an asyncio task holds ([`super::Holding`]'s `kind`): the same words as
/// the waits on them ([`super::WaitKind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HoldKind {
    /// A `threading.Lock`, taken by a `with` block.
    Lock,
    /// A `threading.RLock`: by a `with` block, or by the owner its state names.
    #[serde(rename = "rlock")]
    RLock,
    /// A `threading.Condition`: held when the Lock or RLock it wraps is.
    Condition,
    /// An `asyncio.Lock`, taken by an `async with` block.
    AsyncioLock,
    /// An `asyncio.Condition`, taken by an `async with` block (its Lock is held).
    AsyncioCondition,
}

/// What a cycle of waits is made of ([`super::Deadlock`]'s `kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeadlockKind {
    /// Threads, each waiting for a lock the next one holds (`threads`, `objects`).
    Locks,
    /// asyncio tasks awaiting each other (`tasks`).
    Await,
    /// asyncio tasks, each waiting for an asyncio lock the next one holds (`tasks`,
    /// `objects`).
    TaskLocks,
}

/// An event loop's state ([`super::LoopWhy`]'s `state`), by its thread's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoopState {
    /// A task or callback runs, and its thread waits in a system call other than the loop's
    /// selector wait (the GIL's included).
    Blocked,
    /// A task or callback runs code.
    Busy,
    /// In its selector, waiting for events or timers.
    Idle,
}

/// The verdict's class of a group of task waits ([`super::TaskGroup`]'s `class`), in the
/// verdict's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskClass {
    /// A task holds what they wait for.
    Owned,
    /// The outside world: a socket, an executor job, a child, a future nothing can complete.
    Outside,
    /// Every other wait (a sleep, a future something may complete).
    Other,
    /// Idle tasks, by the idle table's task rows.
    Idle,
}

/// What kind of idle task it is ([`super::TaskWhy`]'s and [`super::TaskGroup`]'s `idle`),
/// by the task rows of the idle table (`why::task_groups`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskIdle {
    /// A server waiting for connections (its accept loop).
    Server,
    /// A server's periodic tick (uvicorn's `main_loop`).
    ServerTick,
    /// An ASGI lifespan queue, waiting for shutdown.
    Lifespan,
}

#[cfg(test)]
mod tests {
    use super::{DeadlockKind, HoldKind, LoopState, TaskClass, TaskIdle};
    use crate::model::test_words::round_trip;

    #[test]
    fn hold_kinds_are_their_words() {
        round_trip(&[
            (HoldKind::Lock, "lock"),
            (HoldKind::RLock, "rlock"),
            (HoldKind::Condition, "condition"),
            (HoldKind::AsyncioLock, "asyncio_lock"),
            (HoldKind::AsyncioCondition, "asyncio_condition"),
        ]);
    }

    #[test]
    fn deadlock_kinds_are_their_words() {
        round_trip(&[
            (DeadlockKind::Locks, "locks"),
            (DeadlockKind::Await, "await"),
            (DeadlockKind::TaskLocks, "task_locks"),
        ]);
    }

    #[test]
    fn loop_states_task_classes_and_idle_kinds_are_their_words() {
        round_trip(&[
            (LoopState::Blocked, "blocked"),
            (LoopState::Busy, "busy"),
            (LoopState::Idle, "idle"),
        ]);
        round_trip(&[
            (TaskClass::Owned, "owned"),
            (TaskClass::Outside, "outside"),
            (TaskClass::Other, "other"),
            (TaskClass::Idle, "idle"),
        ]);
        round_trip(&[
            (TaskIdle::Server, "server"),
            (TaskIdle::ServerTick, "server_tick"),
            (TaskIdle::Lifespan, "lifespan"),
        ]);
    }
}
