//! The per-stop budget: however many threads, frames and objects a target claims (4096
//! threads of 250,000 frames each, a million tasks of deep chains), one stop decodes at most
//! [`MAX_FRAMES_PER_STOP`] frames, looks at most [`MAX_OBJECTS_PER_STOP`] objects up and reads
//! at most [`MAX_BYTES_READ_PER_STOP`] bytes of target memory. What is decoded is kept (names
//! are shared between frames of one code object), so these caps bound the memory a stop can
//! take; a walk that runs out stops with an error entry saying which cap it met, and where.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::super::error::{ReadError, ReadErrorKind};
use crate::memory::Memory;

/// Python frames decoded per stop, over every thread and task.
pub const MAX_FRAMES_PER_STOP: u64 = 1_000_000;
/// Objects looked up (their type read) per stop.
pub const MAX_OBJECTS_PER_STOP: u64 = 20_000_000;
/// Bytes of target memory read per stop (through the snapshot, before its page cache).
pub const MAX_BYTES_READ_PER_STOP: u64 = 512 << 20;

/// What one stop has spent.
#[derive(Default)]
pub struct Budget {
    frames: AtomicU64,
    objects: AtomicU64,
    bytes: AtomicU64,
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
    /// One more frame (at `addr`).
    pub fn frame(&self, addr: u64) -> Result<(), ReadError> {
        take(
            &self.frames,
            1,
            MAX_FRAMES_PER_STOP,
            "frames per stop",
            addr,
        )
    }
    /// One more object (at `addr`).
    pub fn object(&self, addr: u64) -> Result<(), ReadError> {
        take(
            &self.objects,
            1,
            MAX_OBJECTS_PER_STOP,
            "objects per stop",
            addr,
        )
    }
    fn bytes(&self, addr: u64, n: u64) -> Result<(), ReadError> {
        take(
            &self.bytes,
            n,
            MAX_BYTES_READ_PER_STOP,
            "bytes read per stop",
            addr,
        )
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spent_budget_stays_spent_and_names_its_cap() {
        let b = Budget::default();
        b.frames.store(MAX_FRAMES_PER_STOP - 1, Ordering::Relaxed);
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
    fn reads_are_charged() {
        let mut m = crate::memory::FakeMemory::new();
        m.put(0x1000, &[7; 64]);
        let b = Arc::new(Budget::default());
        b.bytes
            .store(MAX_BYTES_READ_PER_STOP - 16, Ordering::Relaxed);
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
