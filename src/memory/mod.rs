//! Reading the target's memory.
//!
//! Every source implements one primitive, [`Memory::read_into`]; typed reads are provided on top
//! of it. Sources:
//!
//! | source | where the bytes come from | used when |
//! | --- | --- | --- |
//! | [`LiveMemory`] | `process_vm_readv(2)` on a local process | `pyunwind pid`, gdb on a local live process |
//! | [`CoreMemory`] | PT_LOAD segments of an ELF core (unpacked first when compressed), then the files of its NT_FILE note (found by [`FileLookup`]) | `pyunwind core`, gdb on a core file |
//! | [`CallbackMemory`] | a function of the debugger's (`gdb.Inferior.read_memory`) | remote targets |
//!
//! [`PageCache`] sits in front of a source for the life of one stop.
//!
//! ```no_run
//! use pyunwind::memory::{Memory, LiveMemory, PageCache};
//! let mem = PageCache::new(LiveMemory::new(1234));
//! let word = mem.read_u64(0x7f00_0000_0000);
//! ```

pub mod addr_map;
mod cache;
mod callback;
mod clock;
mod core;
pub mod crash;
pub mod debuginfod;
mod files;
pub mod link_map;
mod live;
pub(crate) mod mapped;
pub mod proc_fds;
mod proc_tasks;
pub mod signals;
pub mod socket_holders;
pub mod unix_diag;
mod unpack;

pub use self::cache::PageCache;
pub use self::callback::CallbackMemory;
pub use self::clock::monotonic_now;
pub use self::core::{
    CoreFile, CoreMemory, CoreThread, FileMapping, PrStatusHead, Siginfo, SignalNotes,
};
pub use self::files::{file_build_id, hex, FileLookup, FileSearch};
pub use self::live::{
    parse_context_switches, parse_proc_syscall, parse_stat_cpu_ticks, proc_comm,
    proc_context_switches, proc_cpu_seconds, proc_run_queue_seconds, proc_syscall,
    proc_thread_running, process_alive, LiveMemory, ProcSyscall,
};
pub use self::proc_tasks::TaskStates;

use crate::error::{ReadError, ReadErrorKind};

/// The largest single object we will copy out of the target (a code object's line table, a
/// string's characters...). Anything larger is refused before allocation.
pub const MAX_READ_BYTES: u64 = 64 << 20;
/// Reads up to this size get a buffer from malloc (see [`Memory::read_vec`]).
const SMALL_READ_BYTES: u64 = 64 << 10;

/// The region of `regions` (ascending, `[start, end)`, as a core's segments or
/// /proc/PID/maps list them) that holds `addr`.
pub fn region_holding(regions: &[(u64, u64)], addr: u64) -> Option<(u64, u64)> {
    let i = regions.partition_point(|r| r.0 <= addr);
    let (start, end) = *regions.get(i.checked_sub(1)?)?;
    (addr < end).then_some((start, end))
}

/// A readable address space.
pub trait Memory: Send + Sync {
    /// Fill `buf` with the bytes at `addr`, all of them or fail.
    fn read_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError>;

    /// Whether any thread may read: false where reads call back into the debugger, whose API
    /// (and the GIL its caller holds) belong to the thread that called us. Wrappers pass on
    /// what they wrap.
    fn any_thread(&self) -> bool {
        true
    }

    /// [`Memory::read_into`] for bytes whose links lead to their neighbours (an interpreter
    /// frame, whose caller lies beside it on the thread's data stack): a cache fills the whole
    /// block, not the page alone ([`PageCache::sparse`]), so that a chain of them comes from
    /// one read of a running target, not from reads made at different times.
    fn read_together_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        self.read_into(addr, buf)
    }

    /// Drops what a cache keeps of `[addr, addr + len)`, so that the next read of it asks the
    /// source again: a live thread's stack read again after a walk of it tore. Sources
    /// without a cache keep nothing.
    fn forget(&self, _addr: u64, _len: u64) {}

    /// [`Memory::read_into`] for a few bytes of an object read once, alone on its page for
    /// all the reader knows (a thread state): a sparse cache reads just these bytes on a miss,
    /// not their page, and keeps nothing.
    fn read_alone_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        self.read_into(addr, buf)
    }

    fn read_u8(&self, addr: u64) -> Result<u8, ReadError> {
        let mut b = [0u8; 1];
        self.read_into(addr, &mut b)?;
        Ok(b[0])
    }
    fn read_u16(&self, addr: u64) -> Result<u16, ReadError> {
        let mut b = [0u8; 2];
        self.read_into(addr, &mut b)?;
        Ok(u16::from_le_bytes(b))
    }
    fn read_u32(&self, addr: u64) -> Result<u32, ReadError> {
        let mut b = [0u8; 4];
        self.read_into(addr, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    fn read_i32(&self, addr: u64) -> Result<i32, ReadError> {
        Ok(self.read_u32(addr)? as i32)
    }
    fn read_u64(&self, addr: u64) -> Result<u64, ReadError> {
        let mut b = [0u8; 8];
        self.read_into(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    fn read_i64(&self, addr: u64) -> Result<i64, ReadError> {
        Ok(self.read_u64(addr)? as i64)
    }
    /// A pointer-sized value (all supported targets are 64-bit little-endian).
    fn read_ptr(&self, addr: u64) -> Result<u64, ReadError> {
        self.read_u64(addr)
    }
    /// `len` bytes at `addr`, refused when `len` is over `max` (which is itself capped by
    /// [`MAX_READ_BYTES`]).
    fn read_vec(&self, addr: u64, len: u64, max: u64) -> Result<Vec<u8>, ReadError> {
        if len > max.min(MAX_READ_BYTES) {
            return Err(ReadError::too_large(addr, len));
        }
        if addr.checked_add(len).is_none() {
            return Err(ReadError::new(addr, len, ReadErrorKind::Unmapped));
        }
        // Small buffers from malloc, then zeroed: glibc's calloc skips the thread's cache and
        // takes the arena lock, which threads reading in parallel then wait on (futex: a tenth
        // of 100,000 tasks' time). A large one from calloc, whose fresh pages need no zeroing.
        #[allow(clippy::slow_vector_initialization)] // vec![0; n] is the calloc avoided here
        let mut v = if len <= SMALL_READ_BYTES {
            let mut v = Vec::with_capacity(len as usize);
            v.resize(len as usize, 0);
            v
        } else {
            vec![0u8; len as usize]
        };
        self.read_into(addr, &mut v)?;
        Ok(v)
    }
    /// A NUL-terminated C string of at most `max` bytes (read in small steps, since it may end
    /// just before an unmapped page).
    fn read_cstr(&self, addr: u64, max: usize) -> Result<Vec<u8>, ReadError> {
        let mut out = Vec::new();
        let mut a = addr;
        while out.len() < max {
            let step = (64 - (a % 64)) as usize;
            let mut b = vec![0u8; step];
            self.read_into(a, &mut b)?;
            if let Some(p) = b.iter().position(|&c| c == 0) {
                out.extend_from_slice(&b[..p]);
                return Ok(out);
            }
            out.extend_from_slice(&b);
            a += step as u64;
        }
        out.truncate(max);
        Ok(out)
    }
}

impl<M: Memory + ?Sized> Memory for &M {
    fn read_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        (**self).read_into(addr, buf)
    }
    fn read_alone_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        (**self).read_alone_into(addr, buf)
    }
    fn read_together_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        (**self).read_together_into(addr, buf)
    }
    fn forget(&self, addr: u64, len: u64) {
        (**self).forget(addr, len)
    }
    fn any_thread(&self) -> bool {
        (**self).any_thread()
    }
}

impl<M: Memory + ?Sized> Memory for Box<M> {
    fn read_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        (**self).read_into(addr, buf)
    }
    fn read_alone_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        (**self).read_alone_into(addr, buf)
    }
    fn read_together_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        (**self).read_together_into(addr, buf)
    }
    fn forget(&self, addr: u64, len: u64) {
        (**self).forget(addr, len)
    }
    fn any_thread(&self) -> bool {
        (**self).any_thread()
    }
}

impl<M: Memory + ?Sized> Memory for std::sync::Arc<M> {
    fn read_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        (**self).read_into(addr, buf)
    }
    fn read_alone_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        (**self).read_alone_into(addr, buf)
    }
    fn read_together_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        (**self).read_together_into(addr, buf)
    }
    fn forget(&self, addr: u64, len: u64) {
        (**self).forget(addr, len)
    }
    fn any_thread(&self) -> bool {
        (**self).any_thread()
    }
}

/// Memory made of byte blocks at fixed addresses: for unit tests of decoders.
#[derive(Default, Clone)]
pub struct FakeMemory {
    blocks: Vec<(u64, Vec<u8>)>,
}

impl FakeMemory {
    pub fn new() -> Self {
        Self::default()
    }
    /// Place `bytes` at `addr`.
    pub fn put(&mut self, addr: u64, bytes: &[u8]) -> &mut Self {
        self.blocks.push((addr, bytes.to_vec()));
        self
    }
    pub fn put_u64(&mut self, addr: u64, v: u64) -> &mut Self {
        self.put(addr, &v.to_le_bytes())
    }
}

impl Memory for FakeMemory {
    fn read_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        // Later blocks win, byte by byte, so a test can overwrite one field of a structure.
        for (i, out) in buf.iter_mut().enumerate() {
            let a = addr.checked_add(i as u64).ok_or(ReadError::new(
                addr,
                1,
                ReadErrorKind::Unmapped,
            ))?;
            let hit = self.blocks.iter().rev().find_map(|(start, bytes)| {
                let off = a.checked_sub(*start)?;
                bytes.get(off as usize).copied()
            });
            *out = hit.ok_or(ReadError::new(a, 1, ReadErrorKind::Unmapped))?;
        }
        Ok(())
    }
}
