//! Interpreters and their threads.

use std::collections::{HashMap, HashSet};

use super::layout::{CurrentFrame, GilLocation};
use super::snapshot::Snapshot;
use super::values::field;
use crate::error::{ReadError, ReadErrorKind};

const MAX_INTERPRETERS: usize = 256;
const MAX_THREADS: usize = 4096;

#[derive(Clone, Debug)]
pub struct ThreadInfo {
    /// The `PyThreadState`.
    pub addr: u64,
    pub interp: u64,
    /// `PyThreadState.thread_id` (the pthread_t).
    pub thread_id: u64,
    /// The LWP (3.11+), or one a frontend or core matched through `thread_id`.
    pub native_id: Option<u64>,
    pub holds_gil: Option<bool>,
    pub name: Option<String>,
    /// The innermost frame (0 when the thread runs no Python code).
    pub frame: u64,
    /// Why the innermost frame could not be found (the thread is still listed).
    pub frame_error: Option<ReadError>,
}

/// Bytes of `struct _gil_runtime_state` from `locked` to its end: int locked (and padding),
/// unsigned long switch_number, two pthread_cond_t (48) and two pthread_mutex_t (40) on
/// x86-64 glibc (Include/internal/pycore_gil.h).
/// `sizeof(unsigned long)`: `interval`, the GIL's first field.
const GIL_INTERVAL_BYTES: u64 = 8;
const GIL_BYTES_FROM_LOCKED: u64 = 8 + 8 + 2 * 48 + 2 * 40;

fn limit(addr: u64, what: &'static str, max: usize) -> ReadError {
    ReadError::new(
        addr,
        0,
        ReadErrorKind::Limit {
            what,
            max: max as u64,
        },
    )
}

/// The most bytes of a thread state [`Snapshot::thread_words`] reads at once (3.10 to 3.15:
/// `next` at 8, `native_thread_id` at most a few hundred bytes in).
const THREAD_WORDS_SPAN: usize = 512;

/// Bytes of an object read together, from offset `lo` of it, `len` of them.
struct Words {
    lo: u64,
    len: usize,
    bytes: [u8; THREAD_WORDS_SPAN],
}

impl Words {
    /// The word at offset `off` of the object, where it was read.
    fn get(&self, off: u64) -> Option<u64> {
        let at = usize::try_from(off.checked_sub(self.lo)?).ok()?;
        let b = self.bytes[..self.len].get(at..at.checked_add(8)?)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }
}

impl Snapshot {
    /// The words of thread state `tstate` that list it (`thread_id`, `native_thread_id`,
    /// `next`), read together and alone: each thread's state is on a page of its own, and a
    /// sampler of 64 threads that walks two reads only these bytes of the others. None where
    /// they cannot be read so (each is then read by itself).
    fn thread_words(&self, tstate: u64) -> Option<Words> {
        let ts = &self.layout.thread_state;
        let offs = [Some(ts.thread_id), ts.native_thread_id, Some(ts.next)];
        let lo = offs.iter().flatten().copied().min()?;
        let hi = offs.iter().flatten().copied().max()? + 8;
        let mut words = Words {
            lo,
            len: usize::try_from(hi - lo).ok()?,
            bytes: [0u8; THREAD_WORDS_SPAN],
        };
        let buf = words.bytes.get_mut(..words.len)?;
        self.mem
            .read_alone_into(field(tstate, lo).ok()?, buf)
            .ok()?;
        Some(words)
    }

    /// The thread state `tstate`'s current frame (0 when it runs none). `fresh`: read past
    /// the cache (a live thread read again after its walk tore).
    pub fn current_frame(&self, tstate: u64, fresh: bool) -> Result<u64, ReadError> {
        let read_ptr = |addr: u64| {
            if fresh {
                self.mem.forget(addr, 8);
            }
            self.mem.read_ptr(addr)
        };
        match self.layout.thread_state.current_frame {
            CurrentFrame::Direct(off) => read_ptr(field(tstate, off)?),
            CurrentFrame::ViaCFrame {
                cframe,
                current_frame,
            } => match read_ptr(field(tstate, cframe)?)? {
                0 => Ok(0),
                cf => read_ptr(field(cf, current_frame)?),
            },
        }
    }

    /// Interpreter states, main interpreter last as CPython links them (newest first).
    pub fn interpreters(&self) -> Result<Vec<u64>, ReadError> {
        self.interpreters_noting_cap(&mut Vec::new())
    }

    /// As [`Self::interpreters`]; what cuts the list short is an error in `errors`, and the
    /// interpreters read before it are kept: a list longer than [`MAX_INTERPRETERS`] (at the
    /// first interpreter left out), a cycle, an unreadable link. Only an unreadable head is an
    /// `Err`.
    pub fn interpreters_noting_cap(
        &self,
        errors: &mut Vec<ReadError>,
    ) -> Result<Vec<u64>, ReadError> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut cur = self.mem.read_ptr(field(
            self.runtime,
            self.layout.runtime_state.interpreters_head,
        )?)?;
        while cur != 0 && out.len() < MAX_INTERPRETERS {
            if !seen.insert(cur) {
                errors.push(ReadError::new(cur, 0, ReadErrorKind::Cycle));
                return Ok(out);
            }
            out.push(cur);
            match field(cur, self.layout.interpreter_state.next).and_then(|a| self.mem.read_ptr(a))
            {
                Ok(next) => cur = next,
                Err(e) => {
                    errors.push(e);
                    return Ok(out);
                }
            }
        }
        if cur != 0 {
            errors.push(limit(cur, "interpreters", MAX_INTERPRETERS));
        }
        Ok(out)
    }

    /// Every thread state of `interp`, with whatever of each could be read; a thread whose
    /// state is unreadable is an error entry, and the others are still listed.
    pub fn threads(&self, interp: u64, errors: &mut Vec<ReadError>) -> Vec<ThreadInfo> {
        self.threads_walking(interp, errors, &|_| true)
    }

    /// [`Snapshot::threads`], with the way to its frames read only for a thread (by LWP, None
    /// when the state has none) that `walks` names; the others have `frame` 0. Before 3.13 that
    /// way goes through a `_PyCFrame` on the thread's own C stack: a page of each stack, which
    /// `record` need not read for the threads it does not sample.
    pub fn threads_walking(
        &self,
        interp: u64,
        errors: &mut Vec<ReadError>,
        walks: &dyn Fn(Option<u64>) -> bool,
    ) -> Vec<ThreadInfo> {
        let ts = &self.layout.thread_state;
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut cur = match field(interp, self.layout.interpreter_state.threads_head)
            .and_then(|a| self.mem.read_ptr(a))
        {
            Ok(c) => c,
            Err(e) => {
                errors.push(e);
                return out;
            }
        };
        let gil = self.gil_holder(interp);
        while cur != 0 && out.len() < MAX_THREADS {
            if !seen.insert(cur) {
                errors.push(ReadError::new(cur, 0, ReadErrorKind::Cycle));
                break;
            }
            let ids = self.thread_words(cur);
            let word = |off: u64| match ids.as_ref().and_then(|w| w.get(off)) {
                Some(v) => Ok(v),
                None => self.mem.read_u64(field(cur, off)?),
            };
            let read = || -> Result<ThreadInfo, ReadError> {
                let thread_id = word(ts.thread_id)?;
                let native_id = match ts.native_thread_id {
                    Some(off) => Some(word(off)?),
                    None => None,
                };
                let frame = if walks(native_id) {
                    self.current_frame(cur, false)
                } else {
                    Ok(0)
                };
                Ok(ThreadInfo {
                    addr: cur,
                    interp,
                    thread_id,
                    native_id,
                    holds_gil: gil.map(|g| g == Some(cur)),
                    name: None,
                    frame: *frame.as_ref().unwrap_or(&0),
                    frame_error: frame.err(),
                })
            };
            match read() {
                Ok(t) => out.push(t),
                Err(e) => errors.push(e),
            }
            match word(ts.next) {
                Ok(n) => cur = n,
                Err(e) => {
                    errors.push(e);
                    break;
                }
            }
        }
        if cur != 0 && out.len() >= MAX_THREADS {
            errors.push(limit(cur, "threads per interpreter", MAX_THREADS));
        }
        // Named where walked: reading a name is a dict lookup in each Thread's `__dict__`, and
        // `record` of 64 threads walks the two on a CPU.
        let named: HashSet<u64> = out
            .iter()
            .filter(|t| walks(t.native_id))
            .map(|t| t.thread_id)
            .collect();
        let mut names = self.thread_names(interp, &named);
        for t in &mut out {
            t.name = names.remove(&t.thread_id);
        }
        out
    }

    /// `Some(holder)` where holder is the thread state holding the GIL (None if unlocked);
    /// `None` when unknown.
    fn gil_holder(&self, interp: u64) -> Option<Option<u64>> {
        let (locked, holder) = self.gil_fields(interp)?;
        let is_locked = self.mem.read_i32(locked).ok()? != 0;
        let h = self.mem.read_ptr(holder).ok()?;
        Some(is_locked.then_some(h))
    }

    /// Whether `addr` (what a blocked thread waits on: its futex word) lies in the GIL's
    /// condition variables and mutexes, which follow `locked` in `struct _gil_runtime_state`
    /// (Include/internal/pycore_gil.h, 3.10 to 3.15: `locked`, `switch_number`, `cond`,
    /// `mutex`, `switch_cond`, `switch_mutex`).
    pub fn is_gil_address(&self, interp: u64, addr: u64) -> bool {
        self.gil_fields(interp)
            .is_some_and(|(locked, _)| addr >= locked && addr - locked < GIL_BYTES_FROM_LOCKED)
    }

    /// The address of the interpreter's `struct _gil_runtime_state`: `last_holder` is its
    /// second field, after `unsigned long interval` (Include/internal/pycore_gil.h 3.10 to
    /// 3.15).
    pub fn gil_address(&self, interp: u64) -> Option<u64> {
        let (_, holder) = self.gil_fields(interp)?;
        holder.checked_sub(GIL_INTERVAL_BYTES)
    }

    /// Whether the thread of `tstate` is attached (`_Py_THREAD_ATTACHED` = 1,
    /// Include/internal/pycore_pystate.h 3.13 to 3.15): it may run Python. None before 3.13
    /// or when unreadable.
    pub fn thread_attached(&self, tstate: u64) -> Option<bool> {
        let off = self.layout.thread_state.state?;
        Some(self.mem.read_i32(tstate.checked_add(off)?).ok()? == 1)
    }

    /// libpython's "Garbage-collecting" rule from memory: the interpreter's `gc.collecting`,
    /// and `tstate`'s thread the GIL's last holder (a finalizer the collector runs may have
    /// released it).
    pub fn is_collecting(&self, interp: u64, tstate: u64) -> bool {
        self.gc_collecting(interp) == Some(true) && self.gil_last_holder(interp) == Some(tstate)
    }

    /// libpython's "Waiting for the GIL" rule from memory: a thread that does not hold the GIL
    /// (`holds_gil`) blocked on a futex word inside the GIL (`futex`, its first argument).
    pub fn waits_for_gil(&self, interp: u64, holds_gil: Option<bool>, futex: u64) -> bool {
        holds_gil == Some(false) && self.is_gil_address(interp, futex)
    }

    /// The thread state that last held the GIL (`last_holder`, kept when it is released).
    pub fn gil_last_holder(&self, interp: u64) -> Option<u64> {
        let (_, holder) = self.gil_fields(interp)?;
        self.mem.read_ptr(holder).ok()
    }

    /// Whether the interpreter's garbage collector is running (`gc.collecting`); None when
    /// unknown.
    pub fn gc_collecting(&self, interp: u64) -> Option<bool> {
        let off = self.layout.interpreter_state.gc_collecting?;
        Some(self.mem.read_i32(interp.checked_add(off)?).ok()? != 0)
    }

    /// The addresses of the GIL's `locked` and `last_holder` fields.
    fn gil_fields(&self, interp: u64) -> Option<(u64, u64)> {
        Some(match self.layout.gil {
            GilLocation::Runtime {
                locked,
                last_holder,
            } => (
                field(self.runtime, locked).ok()?,
                field(self.runtime, last_holder).ok()?,
            ),
            GilLocation::Interpreter {
                gil_ptr,
                locked,
                last_holder,
            } => {
                let g = self.mem.read_ptr(field(interp, gil_ptr).ok()?).ok()?;
                if g == 0 {
                    return None;
                }
                (g.checked_add(locked)?, g.checked_add(last_holder)?)
            }
            GilLocation::None => return None,
        })
    }

    /// `threading._active`: thread ident -> `Thread._name`, where readable, for the idents in
    /// `wanted`.
    fn thread_names(&self, interp: u64, wanted: &HashSet<u64>) -> HashMap<u64, String> {
        let mut out = HashMap::new();
        if wanted.is_empty() {
            return out;
        }
        let _ = (|| -> Result<(), ReadError> {
            let Some(modules) = self.sys_modules(interp)? else {
                return Ok(());
            };
            let Some(md) = self.module_dict(modules, "threading")? else {
                return Ok(());
            };
            let Some(active) = self.dict_get(md, "_active")? else {
                return Ok(());
            };
            for (k, thread) in self.dict_items(active, MAX_THREADS as u64)? {
                let Ok(ident) = self.read_int(k) else {
                    continue;
                };
                let Ok(ident) = ident.parse::<u64>() else {
                    continue;
                };
                if !wanted.contains(&ident) {
                    continue;
                }
                if let Ok(Some(n)) = self.instance_attr(thread, "_name") {
                    if let Ok(name) = self.read_name(n) {
                        out.insert(ident, name);
                    }
                }
            }
            Ok(())
        })();
        out
    }
}
