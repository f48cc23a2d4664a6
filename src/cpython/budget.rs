//! The per-stop budget: however many threads, frames and objects a target claims (4096
//! threads of 250,000 frames each, a million tasks of deep chains), one stop decodes at most
//! [`MAX_FRAMES_PER_STOP`] frames, looks at most [`MAX_OBJECTS_PER_STOP`] objects up and reads
//! at most [`MAX_BYTES_READ_PER_STOP`] bytes of target memory. What is decoded is kept (names
//! are shared between frames of one code object), so these caps bound the memory a stop can
//! take; a walk that runs out stops with an error entry saying which cap it met, and where.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use super::super::error::{ReadError, ReadErrorKind};
use crate::memory::Memory;

/// Python frames decoded per stop, over every thread and task.
pub const MAX_FRAMES_PER_STOP: u64 = 1_000_000;
/// Objects looked up (their type read) per stop.
pub const MAX_OBJECTS_PER_STOP: u64 = 20_000_000;
/// Bytes of target memory read per stop (through the snapshot, before its page cache).
pub const MAX_BYTES_READ_PER_STOP: u64 = 512 << 20;
/// Bytes the heap census (`--heap`) reads per stop, apart from the other walks' budget: it
/// reads every object's header and every container's items, about 75 bytes an object (10M
/// objects of the bench: 0.75 GB), so 4 GiB lets the object budget (20M) be the cap a real
/// heap meets first, while a corrupt target that makes the walk read without end still stops.
/// Nothing read is kept (the census keeps a visited set and per-type totals), so this bounds
/// time, not memory.
pub const MAX_HEAP_BYTES_READ_PER_STOP: u64 = 4 << 30;

/// What a thread takes from a counter at a time, to spend without touching it (see
/// [`Budget`]): frames, objects, bytes.
const CHUNKS: [u64; 4] = [64, 64, 64 << 10, 64 << 10];
const FRAMES: usize = 0;
const OBJECTS: usize = 1;
const BYTES: usize = 2;
const HEAP_BYTES: usize = 3;

static NEXT_BUDGET_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// Per counter: the budget this thread's credit was taken from (its id; 0 for none), and
    /// what is left of it.
    static CREDIT: Cell<[(u64, u64); 4]> = const { Cell::new([(0, 0); 4]) };
}

/// What one stop has spent.
///
/// A deep walk charges a frame and a read per frame, and an atomic add (a full barrier on
/// x86-64) per charge was 11% of a 100,000-frame `pid --json`. So each thread takes a chunk
/// ([`CHUNKS`]) from a counter at a time and spends it as a per-thread credit. What a thread
/// leaves unspent when it goes on to another budget stays charged: a cap may be met up to a
/// chunk early per such switch, and every thread may spend up to a chunk of credit past a cap
/// (nothing like the caps' sizes). A chunk that does not fit is not taken: the request is then
/// charged exactly, as before.
pub struct Budget {
    id: u64,
    counters: [AtomicU64; 4],
    /// Reads are the heap census's (charged to its own allowance) while set.
    census: AtomicBool,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            // An id, not the address: a new budget may reuse a dropped one's address.
            id: NEXT_BUDGET_ID.fetch_add(1, Ordering::Relaxed),
            counters: Default::default(),
            census: AtomicBool::new(false),
        }
    }
}

/// Adds `n` to `spent` unless that passes `max`; the error names the cap.
fn take(
    spent: &AtomicU64,
    n: u64,
    max: u64,
    what: &'static str,
    addr: u64,
) -> Result<(), ReadError> {
    let before = spent.fetch_add(n, Ordering::Relaxed);
    if before.saturating_add(n) > max {
        // Stay spent: every later request fails the same way.
        spent.store(max.saturating_add(1), Ordering::Relaxed);
        return Err(ReadError::new(addr, n, ReadErrorKind::Limit { what, max }));
    }
    Ok(())
}

impl Budget {
    /// Charges `n` to counter `which` (capped at `max`), from this thread's credit when it has
    /// enough.
    fn charge(
        &self,
        which: usize,
        n: u64,
        max: u64,
        what: &'static str,
        addr: u64,
    ) -> Result<(), ReadError> {
        let id = self.id;
        let from_credit = CREDIT.with(|c| {
            let mut all = c.get();
            let (owner, left) = &mut all[which];
            if *owner != id || *left < n {
                return false;
            }
            *left -= n;
            c.set(all);
            true
        });
        if from_credit {
            return Ok(());
        }
        let spent = &self.counters[which];
        let chunk = n.max(CHUNKS[which]);
        let fits = |s: u64| s.checked_add(chunk).filter(|t| *t <= max);
        if spent
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, fits)
            .is_ok()
        {
            CREDIT.with(|c| {
                let mut all = c.get();
                all[which] = (id, chunk - n);
                c.set(all);
            });
            return Ok(());
        }
        take(spent, n, max, what, addr)
    }

    /// One more frame (at `addr`).
    pub fn frame(&self, addr: u64) -> Result<(), ReadError> {
        self.charge(FRAMES, 1, MAX_FRAMES_PER_STOP, "frames per stop", addr)
    }
    /// One more object (at `addr`).
    pub fn object(&self, addr: u64) -> Result<(), ReadError> {
        self.charge(OBJECTS, 1, MAX_OBJECTS_PER_STOP, "objects per stop", addr)
    }
    /// Until the guard is dropped, reads are charged to the heap census's own allowance
    /// ([`MAX_HEAP_BYTES_READ_PER_STOP`]), so a census neither spends the other walks' budget
    /// nor stops at it.
    pub fn census_reads(&self) -> CensusReads<'_> {
        self.census.store(true, Ordering::Relaxed);
        CensusReads(self)
    }
    fn bytes(&self, addr: u64, n: u64) -> Result<(), ReadError> {
        if self.census.load(Ordering::Relaxed) {
            return self.charge(
                HEAP_BYTES,
                n,
                MAX_HEAP_BYTES_READ_PER_STOP,
                "bytes read by the heap census per stop",
                addr,
            );
        }
        self.charge(
            BYTES,
            n,
            MAX_BYTES_READ_PER_STOP,
            "bytes read per stop",
            addr,
        )
    }
}

/// While it lives, reads are the heap census's ([`Budget::census_reads`]).
pub struct CensusReads<'a>(&'a Budget);

impl Drop for CensusReads<'_> {
    fn drop(&mut self) {
        self.0.census.store(false, Ordering::Relaxed);
    }
}

/// A memory source whose reads are charged to a [`Budget`].
pub struct Budgeted {
    pub inner: Arc<dyn Memory>,
    pub budget: Arc<Budget>,
}

impl Memory for Budgeted {
    fn read_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        self.budget.bytes(addr, buf.len() as u64)?;
        self.inner.read_into(addr, buf)
    }
    fn read_together_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        self.budget.bytes(addr, buf.len() as u64)?;
        self.inner.read_together_into(addr, buf)
    }
    fn forget(&self, addr: u64, len: u64) {
        self.inner.forget(addr, len)
    }
    fn read_alone_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        self.budget.bytes(addr, buf.len() as u64)?;
        self.inner.read_alone_into(addr, buf)
    }
    fn any_thread(&self) -> bool {
        self.inner.any_thread()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spent_budget_stays_spent_and_names_its_cap() {
        let b = Budget::default();
        b.counters[FRAMES].store(MAX_FRAMES_PER_STOP - 1, Ordering::Relaxed);
        assert!(b.frame(1).is_ok());
        let e = b.frame(2).unwrap_err();
        assert_eq!(
            e.to_string(),
            "stopped at the limit of 1000000 frames per stop at 0x2"
        );
        assert!(b.frame(3).is_err());
        assert!(b.object(4).is_ok());
    }

    #[test]
    fn credit_comes_a_chunk_at_a_time_from_its_own_budget() {
        let (a, b) = (Budget::default(), Budget::default());
        for i in 0..10 {
            a.frame(i).unwrap();
        }
        assert_eq!(a.counters[FRAMES].load(Ordering::Relaxed), CHUNKS[FRAMES]);
        // `a`'s credit is not `b`'s, and `a` is charged only once it is spent.
        b.frame(0).unwrap();
        assert_eq!(b.counters[FRAMES].load(Ordering::Relaxed), CHUNKS[FRAMES]);
        // Near the cap, where no chunk fits, each request is charged exactly, to the last.
        let c = Budget::default();
        c.counters[FRAMES].store(MAX_FRAMES_PER_STOP - 3, Ordering::Relaxed);
        for i in 0..3 {
            c.frame(i).unwrap();
        }
        assert!(c.frame(3).is_err());
        // A request bigger than a chunk is charged whole.
        let d = Budget::default();
        d.bytes(0, 1 << 20).unwrap();
        assert_eq!(d.counters[BYTES].load(Ordering::Relaxed), 1 << 20);
    }

    #[test]
    fn the_heap_census_reads_on_its_own_allowance() {
        let b = Budget::default();
        b.counters[BYTES].store(MAX_BYTES_READ_PER_STOP, Ordering::Relaxed);
        assert!(b.bytes(0, 1 << 20).is_err());
        {
            let _census = b.census_reads();
            // The stop's budget is spent; the census's is not, and it has a cap of its own.
            b.bytes(0, 1 << 20).unwrap();
            b.counters[HEAP_BYTES].store(MAX_HEAP_BYTES_READ_PER_STOP, Ordering::Relaxed);
            let e = b.bytes(8, 1 << 20).unwrap_err();
            assert!(e.to_string().contains("heap census"), "{e}");
        }
        // Once the census is over, reads are the stop's again.
        assert!(b.bytes(0, 1 << 20).is_err());
        assert_eq!(
            b.counters[BYTES].load(Ordering::Relaxed),
            MAX_BYTES_READ_PER_STOP + 1
        );
    }

    #[test]
    fn reads_are_charged() {
        let mut m = crate::memory::FakeMemory::new();
        m.put(0x1000, &[7; 64]);
        let b = Arc::new(Budget::default());
        b.counters[BYTES].store(MAX_BYTES_READ_PER_STOP - 16, Ordering::Relaxed);
        let mem = Budgeted {
            inner: Arc::new(m),
            budget: b,
        };
        assert_eq!(mem.read_vec(0x1000, 16, 16).unwrap(), vec![7; 16]);
        assert!(matches!(
            mem.read_u64(0x1000).unwrap_err().kind,
            ReadErrorKind::Limit { .. }
        ));
    }
}
