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

#[cfg(test)]
mod tests {
    use super::{DeadlockKind, HoldKind};
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
}
