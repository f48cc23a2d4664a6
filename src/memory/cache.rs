//! A cache in front of any [`Memory`]. Lives as long as one stop of the target.
//!
//! Misses are filled a 64 KiB block at a time: heap objects that belong together (a task, its
//! coroutine, its future) sit close to each other, and one read of the source (a system call
//! for a live process or a core file, a callback into the debugger otherwise) then serves many
//! objects. A block the source cannot read whole (it crosses the end of a mapping) is filled
//! page by page instead.
//!
//! A live process sampled again and again (`record`) reads sparsely: a few bytes of each of
//! a few dozen objects scattered over its heap, and each thread's state. There a block costs
//! sixteen times the copying a page does for the same object, and a miss is first filled with
//! its page alone; a second miss in the same block fills the block ([`PageCache::sparse`]).

use std::sync::Mutex;

use super::addr_map::{AddrMap, AddrSet};
use super::Memory;
use crate::error::ReadError;

const PAGE: u64 = 4096;
const BLOCK: u64 = 16 * PAGE;
/// Bytes the cache may hold (64 MiB); past it, about half of it is dropped.
const MAX_CACHED_BYTES: u64 = 64 << 20;
/// Dropped blocks (and pages) kept for reuse, of all caches: 16 MiB (and 1 MiB) on top of the
/// caches' own.
const MAX_SPARE_BLOCKS: usize = 256;

#[derive(Default)]
struct Entries {
    // Plain buffers: the bytes a fill read stay where they were read (no copy into an `Arc`).
    blocks: AddrMap<Vec<u8>>,
    pages: AddrMap<Vec<u8>>,
    /// Which half to drop next time the cache is full.
    evict_odd: bool,
    /// [`PageCache::sparse`]: the blocks one of whose pages was filled alone.
    paged: AddrSet,
}

impl Entries {
    fn bytes(&self) -> u64 {
        self.blocks.len() as u64 * BLOCK + self.pages.len() as u64 * PAGE
    }

    /// The cached bytes holding `a` (at least one), from `a` on.
    fn get(&self, a: u64) -> Option<&[u8]> {
        let block = a & !(BLOCK - 1);
        if let Some(b) = self.blocks.get(&block) {
            return Some(&b[(a - block) as usize..]);
        }
        let page = a & !(PAGE - 1);
        self.pages.get(&page).map(|p| &p[(a - page) as usize..])
    }

    /// Empties the cache, its buffers kept for [`spare`].
    fn give_back_all(&mut self) {
        for (_, buf) in self.blocks.drain().chain(self.pages.drain()) {
            give_back(buf);
        }
    }

    fn make_room(&mut self, need: u64) {
        if self.bytes() + need <= MAX_CACHED_BYTES {
            return;
        }
        // Drop the blocks and pages of every other 64 KiB slot: no bookkeeping per hit, and a
        // scan through a large object keeps half of what it read.
        let odd = self.evict_odd;
        self.evict_odd = !odd;
        let keep = |k: &u64| ((k / BLOCK) & 1 == 1) != odd;
        self.blocks.retain(|k, v| {
            let kept = keep(k);
            if !kept {
                give_back(std::mem::take(v));
            }
            kept
        });
        self.pages.retain(|k, v| {
            let kept = keep(k);
            if !kept {
                give_back(std::mem::take(v));
            }
            kept
        });
        self.paged.retain(|k| keep(k));
    }
}

pub struct PageCache<M> {
    inner: M,
    entries: Mutex<Entries>,
    /// Fill a block's first miss with its page alone (see the module's doc).
    sparse: bool,
}

impl<M: Memory> PageCache<M> {
    pub fn new(inner: M) -> Self {
        PageCache {
            inner,
            entries: Mutex::new(Entries::default()),
            sparse: false,
        }
    }
    /// A cache whose first miss in a block reads its page alone (a live process: see the
    /// module's doc).
    pub fn sparse(inner: M) -> Self {
        let mut cache = PageCache::new(inner);
        cache.sparse = true;
        cache
    }
    pub fn inner(&self) -> &M {
        &self.inner
    }
    /// Forget everything (the target ran).
    pub fn clear(&self) {
        let mut e = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        e.give_back_all();
        e.paged.clear();
    }

    fn has_block(&self, a: u64) -> bool {
        let e = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        e.blocks.contains_key(&(a & !(BLOCK - 1)))
    }

    /// Reads the block (else the page) holding `a` into the cache; in a sparse cache, the page
    /// alone if it is the block's first miss and not `whole`. False when neither can be read
    /// whole.
    fn fill(&self, a: u64, whole: bool) -> bool {
        let first_in_block = self.sparse
            && !whole
            && self
                .entries
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .paged
                .insert(a & !(BLOCK - 1));
        let sizes: &[(u64, bool)] = if first_in_block {
            &[(PAGE, false)]
        } else {
            &[(BLOCK, true), (PAGE, false)]
        };
        for &(size, block) in sizes {
            let base = a & !(size - 1);
            let mut buf = spare(size as usize);
            if self.inner.read_into(base, &mut buf).is_err() {
                give_back(buf);
                continue;
            }
            let mut e = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            e.make_room(size);
            let map = if block { &mut e.blocks } else { &mut e.pages };
            if let Some(old) = map.insert(base, buf) {
                give_back(old);
            }
            return true;
        }
        false
    }
}

impl<M> Drop for PageCache<M> {
    fn drop(&mut self) {
        self.entries
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .give_back_all();
    }
}

/// [`Memory::forget`] of a longer range forgets everything rather than look up each page.
const FORGET_BY_PAGE: u64 = 16 << 20;

/// Buffers of caches dropped or shrunk, for the next fill of any cache: a new one would be
/// zeroed first, for nothing (a sparse walk through a large core fills a block per object it
/// reads; a sampler makes a cache per sample). By size: blocks, then pages.
static SPARE: Mutex<[Vec<Vec<u8>>; 2]> = Mutex::new([Vec::new(), Vec::new()]);

/// A buffer of `size` bytes (BLOCK or PAGE), reused where one is spare.
fn spare(size: usize) -> Vec<u8> {
    let reused =
        SPARE.lock().unwrap_or_else(|e| e.into_inner())[(size != BLOCK as usize) as usize].pop();
    reused.unwrap_or_else(|| vec![0u8; size])
}

/// Keeps `buf` for [`spare`], up to MAX_SPARE_BLOCKS of each size.
fn give_back(buf: Vec<u8>) {
    let which = match buf.len() as u64 {
        BLOCK => 0,
        PAGE => 1,
        _ => return,
    };
    let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
    if spare[which].len() < MAX_SPARE_BLOCKS {
        spare[which].push(buf);
    }
}

impl<M: Memory> Memory for PageCache<M> {
    fn read_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        self.read_filling(addr, buf, false)
    }

    fn read_together_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        self.read_filling(addr, buf, true)
    }

    fn read_alone_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        if !self.sparse {
            return self.read_into(addr, buf);
        }
        {
            let e = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(have) = e.get(addr).filter(|h| h.len() >= buf.len()) {
                buf.copy_from_slice(&have[..buf.len()]);
                return Ok(());
            }
        }
        // Not readable alone (the bytes cross into a mapping that is not there): as any read.
        self.inner
            .read_into(addr, buf)
            .or_else(|_| self.read_into(addr, buf))
    }

    fn forget(&self, addr: u64, len: u64) {
        if len > FORGET_BY_PAGE {
            self.clear();
            return;
        }
        let mut e = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let end = addr.saturating_add(len.max(1));
        for (size, block) in [(BLOCK, true), (PAGE, false)] {
            let mut base = addr & !(size - 1);
            while base < end {
                let map = if block { &mut e.blocks } else { &mut e.pages };
                if let Some(old) = map.remove(&base) {
                    give_back(old);
                }
                base = match base.checked_add(size) {
                    Some(b) => b,
                    None => break,
                };
            }
        }
    }

    fn any_thread(&self) -> bool {
        self.inner.any_thread()
    }
}

impl<M: Memory> PageCache<M> {
    /// Reads `buf` from the cache, filling it where it misses (`whole`: a block at once, even
    /// in a sparse cache).
    fn read_filling(&self, addr: u64, buf: &mut [u8], whole: bool) -> Result<(), ReadError> {
        let mut done = 0usize;
        while done < buf.len() {
            let a = addr.wrapping_add(done as u64);
            // Read together: from the block as read now, not from a page of it filled alone
            // before, which may be older than what led here (a frame whose generator has
            // since started, its link to its caller still empty in that page).
            if whole && self.sparse && !self.has_block(a) {
                self.fill(a, true);
            }
            let copy = |buf: &mut [u8]| -> Option<usize> {
                let e = self.entries.lock().unwrap_or_else(|e| e.into_inner());
                let have = e.get(a)?;
                let n = have.len().min(buf.len() - done);
                buf[done..done + n].copy_from_slice(&have[..n]);
                Some(n)
            };
            if let Some(n) = copy(buf) {
                done += n;
                continue;
            }
            if self.fill(a, whole) {
                if let Some(n) = copy(buf) {
                    done += n;
                    continue;
                }
            }
            // Not readable a page at a time (a mapping that ends mid-page in a core): ask the
            // source for just these bytes, uncached.
            let n = ((PAGE - (a & (PAGE - 1))) as usize).min(buf.len() - done);
            self.inner.read_into(a, &mut buf[done..done + n])?;
            done += n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ReadErrorKind;

    /// Bytes `addr & 0xff` over [start, end), nothing else.
    struct Ramp {
        start: u64,
        end: u64,
    }

    impl Memory for Ramp {
        fn read_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
            if addr < self.start || addr + buf.len() as u64 > self.end {
                return Err(ReadError::new(
                    addr,
                    buf.len() as u64,
                    ReadErrorKind::Unmapped,
                ));
            }
            for (i, b) in buf.iter_mut().enumerate() {
                *b = (addr + i as u64) as u8;
            }
            Ok(())
        }
    }

    #[test]
    fn reads_across_blocks_pages_and_mapping_ends() {
        // A mapping that starts and ends inside blocks, and ends mid-page.
        let mem = PageCache::new(Ramp {
            start: 0x1_3000,
            end: 0x4_0800,
        });
        for (addr, len) in [
            (0x1_3000, 8),
            (0x1_fff0, 64),
            (0x2_0000, 0x2_0000),
            (0x4_07f0, 16),
        ] {
            let mut buf = vec![0u8; len];
            mem.read_into(addr, &mut buf).unwrap();
            assert!(buf
                .iter()
                .enumerate()
                .all(|(i, b)| *b == (addr + i as u64) as u8));
        }
        let mut buf = [0u8; 32];
        assert!(mem.read_into(0x4_07f0, &mut buf).is_err());
        assert!(mem.read_into(0x1_2ff8, &mut buf).is_err());
    }

    #[test]
    fn stays_within_its_bytes() {
        let mem = PageCache::new(Ramp {
            start: 0,
            end: 1 << 30,
        });
        let mut b = [0u8; 8];
        for i in 0..(4 * MAX_CACHED_BYTES / BLOCK) {
            mem.read_into(i * BLOCK, &mut b).unwrap();
        }
        let e = mem.entries.lock().unwrap();
        assert!(e.bytes() <= MAX_CACHED_BYTES);
    }

    /// [`Ramp`] that records the size of each read it is asked for.
    struct Counted {
        ramp: Ramp,
        sizes: Mutex<Vec<usize>>,
    }

    impl Memory for Counted {
        fn read_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
            self.sizes.lock().unwrap().push(buf.len());
            self.ramp.read_into(addr, buf)
        }
    }

    #[test]
    fn a_sparse_cache_reads_a_page_then_its_block_and_frames_whole() {
        let mem = PageCache::sparse(Counted {
            ramp: Ramp {
                start: 0,
                end: 1 << 20,
            },
            sizes: Mutex::new(Vec::new()),
        });
        let mut b = [0u8; 16];
        let read = |addr: u64, together: bool, b: &mut [u8]| {
            if together {
                mem.read_together_into(addr, b).unwrap();
            } else {
                mem.read_into(addr, b).unwrap();
            }
            assert!(b
                .iter()
                .enumerate()
                .all(|(i, x)| *x == (addr + i as u64) as u8));
        };
        // A block's first miss: its page; the same page again: no read; another page of the
        // block: the block.
        read(0x1_0010, false, &mut b);
        read(0x1_0020, false, &mut b);
        read(0x1_2000, false, &mut b);
        read(0x1_f000, false, &mut b);
        // Bytes read together: their block at the first miss.
        read(0x3_0100, true, &mut b);
        read(0x3_8000, false, &mut b);
        let sizes = mem.inner().sizes.lock().unwrap().clone();
        assert_eq!(sizes, [PAGE, BLOCK, BLOCK].map(|n| n as usize));
        // A cache that is not sparse fills blocks only.
        let plain = PageCache::new(Counted {
            ramp: Ramp {
                start: 0,
                end: 1 << 20,
            },
            sizes: Mutex::new(Vec::new()),
        });
        plain.read_into(0x1_0010, &mut b).unwrap();
        assert_eq!(*plain.inner().sizes.lock().unwrap(), [BLOCK as usize]);
    }

    /// Every byte is the number of reads made before (a process that runs between reads).
    struct Ticking(Mutex<u8>);

    impl Memory for Ticking {
        fn read_into(&self, _: u64, buf: &mut [u8]) -> Result<(), ReadError> {
            let mut n = self.0.lock().unwrap();
            buf.fill(*n);
            *n += 1;
            Ok(())
        }
    }

    #[test]
    fn bytes_read_together_are_not_taken_from_a_page_read_before() {
        let mem = PageCache::sparse(Ticking(Mutex::new(0)));
        let mut b = [0u8; 8];
        // A page filled alone (an object next to a generator's frame), then the frame, read
        // together: from its block read now, and what is read after from that same copy.
        mem.read_into(0x1_0010, &mut b).unwrap();
        assert_eq!(b, [0; 8]);
        mem.read_together_into(0x1_0100, &mut b).unwrap();
        assert_eq!(b, [1; 8]);
        mem.read_together_into(0x1_8000, &mut b).unwrap();
        mem.read_into(0x1_0010, &mut b).unwrap();
        assert_eq!(b, [1; 8]);
    }

    #[test]
    fn forgotten_bytes_are_read_again_and_the_rest_kept() {
        let mem = PageCache::sparse(Ticking(Mutex::new(0)));
        let mut b = [0u8; 8];
        // A frame's block and a page elsewhere; the frame's block forgotten: read anew, the
        // page kept.
        mem.read_together_into(0x1_0100, &mut b).unwrap();
        mem.read_into(0x9_0010, &mut b).unwrap();
        assert_eq!(b, [1; 8]);
        mem.forget(0x1_0100, 8);
        mem.read_together_into(0x1_0100, &mut b).unwrap();
        assert_eq!(b, [2; 8]);
        mem.read_into(0x9_0010, &mut b).unwrap();
        assert_eq!(b, [1; 8]);
        // A page filled alone is forgotten too.
        mem.forget(0x9_0ff8, 16);
        mem.read_into(0x9_0010, &mut b).unwrap();
        assert_eq!(b, [3; 8]);
    }

    #[test]
    fn bytes_read_alone_are_read_as_asked_and_not_kept() {
        let mem = PageCache::sparse(Counted {
            ramp: Ramp {
                start: 0,
                end: 1 << 20,
            },
            sizes: Mutex::new(Vec::new()),
        });
        let mut b = [0u8; 24];
        // Alone: the 24 bytes, twice (nothing kept); from a page already read: no read.
        mem.read_alone_into(0x2_0010, &mut b).unwrap();
        mem.read_alone_into(0x2_0010, &mut b).unwrap();
        mem.read_into(0x5_0000, &mut b[..8]).unwrap();
        mem.read_alone_into(0x5_0100, &mut b).unwrap();
        assert!(b
            .iter()
            .enumerate()
            .all(|(i, x)| *x == (0x5_0100 + i as u64) as u8));
        let sizes = mem.inner().sizes.lock().unwrap().clone();
        assert_eq!(sizes, [24, 24, PAGE as usize]);
    }
}
