//! `_thread.lock` (`threading.Lock`) and `_thread.RLock` (`threading.RLock`) as memory shows
//! them: whether a lock is held, an RLock's owner and count, and the lock a builtin method
//! call on a frame's value stack is bound to.
//!
//! Layouts (offsets past the object header; the header is 16 bytes, 32 on a free-threaded
//! build), from Modules/_threadmodule.c and checked by `__sizeof__` and reads through ctypes on
//! 3.10.13, 3.11.7, 3.12.1, 3.13.0, Debian 3.11.2, 3.14.10 and 3.15.2:
//!
//! | version | lock | RLock |
//! | --- | --- | --- |
//! | 3.10 to 3.13.0 | `lock_lock` (sem_t*) +0, `in_weakreflist` +8, `locked` (char) +16 | `rlock_lock` +0, `rlock_owner` (pthread ident) +8, `rlock_count` +16 |
//! | 3.13.1+ | `lock` (PyMutex, one byte, bit 0 = locked) +0 | as 3.13.0 |
//! | 3.14, 3.15 | as 3.13.1 | `_PyRecursiveMutex` {`mutex` +0, `thread` (ident) +8, `level` +16}; count = level + 1 |
//!
//! Which row a target has is `Layout::thread_locks` (the change inside 3.13 came with the
//! backport of gh-117721, PR #125116, merged the day after 3.13.0 was tagged).

use crate::cpython::layout::{RLockCount, ThreadLockModel};
use crate::cpython::values::field;
use crate::cpython::values::is_cfunction_type;
use crate::cpython::Snapshot;
use crate::error::ReadError;
use crate::model::{HoldKind, WaitKind};

/// An RLock count above this is not one (a corrupt or stale object).
const MAX_RLOCK_COUNT: u64 = 1 << 40;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    Lock,
    RLock,
    /// A `threading.Condition`: held when the Lock or RLock it wraps (its `_lock`) is.
    Condition,
}

impl LockKind {
    /// The report's `waiting.kind`: the same words as `holding`'s.
    pub fn wait_kind(self) -> WaitKind {
        match self {
            LockKind::Lock => WaitKind::Lock,
            LockKind::RLock => WaitKind::RLock,
            LockKind::Condition => WaitKind::Condition,
        }
    }

    /// The report's `holding.kind`.
    pub fn hold_kind(self) -> HoldKind {
        match self {
            LockKind::Lock => HoldKind::Lock,
            LockKind::RLock => HoldKind::RLock,
            LockKind::Condition => HoldKind::Condition,
        }
    }

    /// The report's `type`: the name Python code writes (`threading.Lock`, `threading.RLock`).
    pub fn type_name(self) -> &'static str {
        match self {
            LockKind::Lock => "Lock",
            LockKind::RLock => "RLock",
            LockKind::Condition => "Condition",
        }
    }
}

/// What memory shows of a lock now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LockState {
    pub held: bool,
    /// An RLock's owner: its `PyThreadState.thread_id` (pthread ident), when held.
    pub owner_ident: Option<u64>,
    /// An RLock's recursion count, when held.
    pub count: Option<u64>,
}

/// Whether `obj` is a `_thread.lock` or `_thread.RLock` (by its type's `tp_name`), or a
/// `threading.Condition` (a Python class of that name, or a subclass of one).
pub fn lock_kind(snap: &Snapshot, obj: u64) -> Option<LockKind> {
    let t = snap.type_of(obj).ok()?;
    match t.name.as_str() {
        "_thread.lock" | "lock" => Some(LockKind::Lock),
        "_thread.RLock" | "RLock" => Some(LockKind::RLock),
        _ => snap
            .class_names(obj)
            .iter()
            .any(|n| n == "Condition")
            .then_some(LockKind::Condition),
    }
}

/// The lock a lock of kind `kind` acquires: itself, or a Condition's `_lock` (a Lock or an
/// RLock; anything else is no lock we know).
pub fn acquired_lock(
    snap: &Snapshot,
    obj: u64,
    kind: LockKind,
) -> Result<(u64, LockKind), ReadError> {
    if kind != LockKind::Condition {
        return Ok((obj, kind));
    }
    let inner = snap
        .instance_attr(obj, "_lock")?
        .ok_or_else(|| ReadError::corrupt(obj, "Condition: no _lock"))?;
    match lock_kind(snap, inner) {
        Some(k @ (LockKind::Lock | LockKind::RLock)) => Ok((inner, k)),
        _ => Err(ReadError::corrupt(inner, "Condition: _lock is no lock")),
    }
}

/// The state of the lock `obj` of kind `kind`; an error when it cannot be read or makes no
/// sense (a held RLock with no owner or an impossible count).
/// A Condition's state is its `_lock`'s.
pub fn lock_state(snap: &Snapshot, obj: u64, kind: LockKind) -> Result<LockState, ReadError> {
    let (obj, kind) = acquired_lock(snap, obj, kind)?;
    let fields = snap.object_fields(obj)?;
    let model = snap.layout.thread_locks;
    let pymutex = model.lock == ThreadLockModel::PyMutex;
    match kind {
        LockKind::Lock => {
            let at = if pymutex {
                field(fields, 0)?
            } else {
                field(fields, 16)?
            };
            let mut b = [0u8; 1];
            snap.mem.read_into(at, &mut b)?;
            let held = if pymutex {
                // PyMutex `_bits`: _Py_LOCKED 1, _Py_HAS_PARKED 2 (Include/cpython/lock.h).
                b[0] & 1 != 0
            } else {
                match b[0] {
                    0 => false,
                    1 => true,
                    _ => return Err(ReadError::corrupt(at, "lock: locked flag")),
                }
            };
            Ok(LockState {
                held,
                owner_ident: None,
                count: None,
            })
        }
        LockKind::RLock | LockKind::Condition => {
            let owner = snap.mem.read_u64(field(fields, 8)?)?;
            let raw = snap.mem.read_u64(field(fields, 16)?)?;
            if owner == 0 {
                return Ok(LockState::default());
            }
            let count = match model.rlock_count {
                RLockCount::LevelPlusOne => raw.checked_add(1),
                RLockCount::Count => Some(raw),
            };
            match count {
                Some(c) if (1..=MAX_RLOCK_COUNT).contains(&c) => Ok(LockState {
                    held: true,
                    owner_ident: Some(owner),
                    count: Some(c),
                }),
                _ => Err(ReadError::corrupt(fields, "RLock: count")),
            }
        }
    }
}

/// A method call on a lock found on a value stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockCall {
    /// The slot of the callable.
    pub slot: usize,
    /// The method's name (`acquire`, `__enter__`, `__exit__`, ...).
    pub name: String,
    pub lock: u64,
    pub kind: LockKind,
}

/// Methods of a lock that one bound to it on a value stack shows: a builtin method bound to
/// the lock (3.10 to 3.13's `with` keeps its bound `__exit__` there; a call through a bound
/// method), or a `method_descriptor` of the lock's type right below the lock itself (a method
/// call, `obj.acquire()`, on 3.10 to 3.15; 3.14+'s `with` keeps `__exit__` and the lock).
/// A Condition's methods are Python functions of threading.py: a bound method (3.10 to
/// 3.13's `with`), or a function right below the Condition (3.14+'s `with`).
/// Bottom first. `slots` from [`Snapshot::value_stack_slots`].
pub fn lock_calls(snap: &Snapshot, slots: &[Option<u64>]) -> Vec<LockCall> {
    let mut out = Vec::new();
    for (i, v) in slots.iter().enumerate() {
        let Some(v) = *v else { continue };
        let Ok(t) = snap.type_of(v) else { continue };
        let (name, this) = if is_cfunction_type(&t.name) {
            let Ok((name, this)) = snap.cfunction_name_and_self(v) else {
                continue;
            };
            (name, this)
        } else if t.name == "method_descriptor" {
            // An unbound method and its `self` in the next slot (3.12+'s method calls, 3.14+'s
            // `with`): only when `self` has the descriptor's type.
            let Some(Some(this)) = slots.get(i + 1).copied() else {
                continue;
            };
            let Ok((name, d_type)) = snap.method_descriptor_name_and_type(v) else {
                continue;
            };
            if !snap.type_of(this).is_ok_and(|t| t.addr == d_type) {
                continue;
            }
            (name, this)
        } else if let Some((name, this)) = threading_method(snap, &t.name, v, slots.get(i + 1)) {
            if lock_kind(snap, this) != Some(LockKind::Condition) {
                continue;
            }
            (name, this)
        } else {
            continue;
        };
        if this == 0 {
            continue;
        }
        if let Some(kind) = lock_kind(snap, this) {
            out.push(LockCall {
                slot: i,
                name,
                lock: this,
                kind,
            });
        }
    }
    out
}

/// A method of threading.py found on a value stack, `v` of type `type_name`: its name and
/// `self`. A bound method; or a function and, in `next`, its `self`.
fn threading_method(
    snap: &Snapshot,
    type_name: &str,
    v: u64,
    next: Option<&Option<u64>>,
) -> Option<(String, u64)> {
    let (func, this) = match type_name {
        "method" => snap.method_func_and_self(v).ok()?,
        "function" => (v, (*next?)?),
        _ => return None,
    };
    let code = snap.function_code(func).ok()?;
    code.filename
        .ends_with("/threading.py")
        .then(|| (code.name.clone(), this))
}

/// A call of a C method named `method` on an object whose type is named one of `types`, as
/// [`lock_calls`] finds them: (slot, object). Bottom first.
pub fn method_calls(
    snap: &Snapshot,
    slots: &[Option<u64>],
    method: &str,
    types: &[&str],
) -> Vec<(usize, u64)> {
    let mut out = Vec::new();
    let typed = |o: u64| {
        snap.type_of(o)
            .is_ok_and(|t| types.contains(&t.name.as_str()))
    };
    for (i, v) in slots.iter().enumerate() {
        let Some(v) = *v else { continue };
        let Ok(t) = snap.type_of(v) else { continue };
        if is_cfunction_type(&t.name) {
            if let Ok((name, this)) = snap.cfunction_name_and_self(v) {
                if name == method && this != 0 && typed(this) {
                    out.push((i, this));
                }
            }
        } else if t.name == "method_descriptor" {
            let Some(Some(this)) = slots.get(i + 1).copied() else {
                continue;
            };
            if let Ok((name, d_type)) = snap.method_descriptor_name_and_type(v) {
                if name == method
                    && snap.type_of(this).is_ok_and(|t| t.addr == d_type)
                    && typed(this)
                {
                    out.push((i, this));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpython::{Layout, Version};
    use crate::memory::FakeMemory;

    fn snap(v: Version, obj: u64, fields: &[u64]) -> Snapshot {
        let mut m = FakeMemory::new();
        m.put(obj, &[0u8; 64]);
        for (i, f) in fields.iter().enumerate() {
            m.put_u64(obj + 16 + 8 * i as u64, *f);
        }
        Snapshot::for_test(m, Layout::builtin(v).unwrap())
    }

    #[test]
    fn an_rlock_names_its_owner_and_count() {
        let s = snap(Version::new(3, 12, 1), 0x1000, &[0x5000, 0x7f00, 2]);
        let st = lock_state(&s, 0x1000, LockKind::RLock).unwrap();
        assert_eq!(
            (st.held, st.owner_ident, st.count),
            (true, Some(0x7f00), Some(2))
        );
        let free = snap(Version::new(3, 12, 1), 0x1000, &[0x5000, 0, 0]);
        assert!(!lock_state(&free, 0x1000, LockKind::RLock).unwrap().held);
    }

    #[test]
    fn corrupt_or_unreadable_locks_are_errors() {
        // Held with a count of zero, or an absurd one.
        for count in [0, u64::MAX] {
            let s = snap(Version::new(3, 12, 1), 0x1000, &[0x5000, 0x7f00, count]);
            assert!(lock_state(&s, 0x1000, LockKind::RLock).is_err());
        }
        // 3.14+'s level + 1 must not overflow.
        let s = snap(Version::new(3, 14, 0), 0x1000, &[1, 0x7f00, u64::MAX]);
        assert!(lock_state(&s, 0x1000, LockKind::RLock).is_err());
        // A `locked` byte that is neither 0 nor 1.
        let s = snap(Version::new(3, 12, 1), 0x1000, &[0x5000, 0, 7]);
        assert!(lock_state(&s, 0x1000, LockKind::Lock).is_err());
        assert!(lock_state(&s, 0xdead_0000, LockKind::Lock).is_err());
        assert!(lock_state(&s, u64::MAX - 4, LockKind::RLock).is_err());
    }

    #[test]
    fn the_lock_became_a_pymutex_in_3_13_1() {
        let model = |major, minor, micro| {
            Layout::builtin(Version::new(major, minor, micro))
                .unwrap()
                .thread_locks
                .lock
        };
        assert_eq!(model(3, 10, 13), ThreadLockModel::LockedFlag);
        assert_eq!(model(3, 13, 0), ThreadLockModel::LockedFlag);
        assert_eq!(model(3, 13, 1), ThreadLockModel::PyMutex);
        assert_eq!(model(3, 14, 0), ThreadLockModel::PyMutex);
        assert_eq!(model(3, 15, 2), ThreadLockModel::PyMutex);
        let ft = Layout::builtin_free_threaded(Version::new(3, 13, 15)).unwrap();
        assert_eq!(ft.thread_locks.lock, ThreadLockModel::PyMutex);
    }
}
