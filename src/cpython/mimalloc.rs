//! The objects a free-threaded build's garbage collector knows: it keeps no GC lists, so, as
//! `gc_visit_heaps` does (Python/gc_free_threading.c 3.13), the used blocks of two mimalloc
//! heaps are its objects.
//!
//! ```text
//! interp ─► threads.head ─► tstate ─► mimalloc.heaps[GC], heaps[GC_PRE]
//!                                       └► pages[0..=MI_BIN_FULL] queues ─► page ─► next ...
//!        ─► mimalloc.abandoned_pool ─► segments (dead threads' pages) ─► slices ─► page
//! page: blocks [start, start + capacity × block_size); free ones are on `free`, `local_free`,
//!       `xthread_free` (and the heap's `thread_delayed_free`); the others hold objects,
//!       GC-tracked when `ob_gc_bits & _PyGC_BITS_TRACKED`.
//! ```
//!
//! Only the target's memory is read (nothing runs in it, unlike `mi_heap_visit_blocks`, which
//! first collects the free lists into `free`: here the lists are read and joined instead).
//! Untrusted memory: every list is bounded (pages by [`MAX_PAGES`], blocks by the page's
//! capacity) and checked for cycles and for blocks outside their page; a page or list that
//! cannot be read whole is an error, and the enumeration is then a lower bound.

use super::gc::GC_HEAD_SIZE;
use super::layout::{Layout, MimallocLayout};
use super::snapshot::Snapshot;
use crate::error::{ReadError, ReadErrorKind};
use crate::memory::addr_map::AddrSet;
use crate::memory::Memory;

/// Pages followed over every heap and segment of one interpreter (256 GiB of small pages).
pub const MAX_PAGES: u64 = 1 << 22;
/// Thread states followed from `interp->threads.head`.
const MAX_THREADS: u64 = 1 << 16;
/// Abandoned segments followed per list.
const MAX_SEGMENTS: u64 = 1 << 20;
/// Blocks on a heap's `thread_delayed_free` list.
const MAX_DELAYED: u64 = 1 << 20;
/// Blocks of one page: a small page is 64 KiB of blocks of 8 bytes or more, a medium one
/// 512 KiB; large and huge pages hold one block (Include/internal/mimalloc/mimalloc/types.h).
const MAX_PAGE_BLOCKS: u64 = 1 << 16;

/// `_PyGC_BITS_TRACKED` in `ob_gc_bits` (Include/internal/pycore_gc.h 3.13).
const GC_BITS_TRACKED: u8 = 1;
/// `_Py_MIMALLOC_HEAP_GC` and `_Py_MIMALLOC_HEAP_GC_PRE` (Include/internal/pycore_mimalloc.h
/// 3.13), each with the distance from a block to its object: the GC_PRE heap's objects have
/// the managed dict and weakref words before them (`offset_pre`, gc_visit_heaps_lock_held).
const GC_HEAPS: [(u64, u64); 2] = [(2, 0), (3, 16)];
/// The debug allocator's words before each allocation (`PYTHONMALLOC=debug`: the size asked
/// for, then the API id and forbidden bytes; Objects/obmalloc.c, `offset_base`).
const DEBUG_ALLOC_WORDS: u64 = 16;

// Include/internal/mimalloc/mimalloc/types.h (3.13, 64-bit).
/// `MI_SEGMENT_SHIFT`: 32 MiB segments, aligned to their size.
const SEGMENT_SIZE: u64 = 1 << 25;
/// `MI_SEGMENT_SLICE_SIZE`.
const SLICE_SIZE: u64 = 1 << 16;
/// `MI_HUGE_BLOCK_SIZE`: an `xblock_size` this large means "the page's size".
const HUGE_BLOCK_SIZE: u64 = 2 << 30;
/// `MI_BIN_FULL + 1` page queues per heap (`mi_heap_t.pages[75]`).
const PAGE_QUEUES: u64 = 75;
/// `sizeof(mi_page_queue_t)`: first, last, block_size.
const PAGE_QUEUE_SIZE: u64 = 24;
/// `MI_SLICES_PER_SEGMENT + 1` slice entries in a segment at most (`slices[513]`).
const MAX_SLICE_ENTRIES: u64 = 513;

impl Snapshot {
    /// [`gc_objects`] of `interp` in this stop's memory; an error where the build's mimalloc
    /// layout is not known (free-threaded builds other than 3.13).
    pub fn mimalloc_gc_objects(
        &self,
        interp: u64,
        each: impl FnMut(u64) -> bool,
    ) -> Vec<ReadError> {
        match self.layout.mimalloc() {
            Some(mi) => gc_objects(&*self.mem, &self.layout, &mi, self.runtime, interp, each),
            None => vec![ReadError::corrupt(
                interp,
                "heap: this free-threaded build's mimalloc layout is not known (3.13 is read)",
            )],
        }
    }
}

/// The `PyGC_Head` before each GC object: default builds only. A free-threaded build keeps
/// the GC's state in the object header (`ob_gc_bits`), and `_PyType_PreHeaderSize`
/// (Include/internal/pycore_object.h 3.13) counts no GC header there.
pub fn gc_head_size(l: &Layout) -> u64 {
    if l.free_threaded {
        0
    } else {
        GC_HEAD_SIZE
    }
}

/// `mi_page_t` (the fields read; offsets of 3.13t's DWARF).
#[derive(Clone, Copy, Debug)]
struct Page {
    addr: u64,
    slice_count: u64,
    tag: u8,
    capacity: u64,
    free: u64,
    used: u64,
    xblock_size: u64,
    local_free: u64,
    xthread_free: u64,
    xheap: u64,
    next: u64,
}

impl Page {
    fn read(mem: &dyn Memory, addr: u64) -> Result<Page, ReadError> {
        let mut b = [0u8; 64];
        mem.read_into(addr, &mut b)?;
        let w = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or_default());
        let d = |o: usize| {
            u64::from(u32::from_le_bytes(
                b[o..o + 4].try_into().unwrap_or_default(),
            ))
        };
        let h = |o: usize| {
            u64::from(u16::from_le_bytes(
                b[o..o + 2].try_into().unwrap_or_default(),
            ))
        };
        Ok(Page {
            addr,
            slice_count: d(0),
            // `is_committed:1, is_zero_init:1, use_qsbr:1, tag:4` in the byte at 8.
            tag: (b[8] >> 3) & 0xf,
            capacity: h(10),
            free: w(16),
            used: d(24),
            xblock_size: d(28),
            local_free: w(32),
            // `mi_tf_block`: the low two bits are the delayed-free state.
            xthread_free: w(40) & !3,
            xheap: w(48),
            next: w(56),
        })
    }
}

/// One walk over an interpreter's GC heaps.
struct Walk<'a, F: FnMut(u64) -> bool> {
    mem: &'a dyn Memory,
    mi: MimallocLayout,
    each: F,
    pages_seen: AddrSet,
    pages: u64,
    errors: Vec<ReadError>,
    /// The caller asked to stop (its budget).
    stopped: bool,
    /// Bytes before each object's block: the debug allocator's words, or none.
    base: u64,
}

/// Calls `each(object)` for every GC-tracked object in `interp`'s mimalloc heaps (each
/// thread's GC and GC_PRE heaps, and the abandoned pool's pages of those heaps), until it
/// returns false; `runtime` is `_PyRuntime`. Returns the errors met: none means every page
/// was read whole and its counts agreed.
pub fn gc_objects(
    mem: &dyn Memory,
    lay: &Layout,
    mi: &MimallocLayout,
    runtime: u64,
    interp: u64,
    each: impl FnMut(u64) -> bool,
) -> Vec<ReadError> {
    let mut w = Walk {
        mem,
        mi: *mi,
        each,
        pages_seen: AddrSet::default(),
        pages: 0,
        errors: Vec::new(),
        stopped: false,
        base: 0,
    };
    match mem.read_u32(runtime.wrapping_add(mi.runtime_debug_enabled)) {
        Ok(0) => {}
        Ok(_) => w.base = DEBUG_ALLOC_WORDS,
        Err(e) => w.errors.push(e),
    }
    // Every thread state, as gc_visit_heaps_lock_held walks `interp->threads.head`.
    let mut seen = AddrSet::default();
    let mut t = match mem.read_ptr(interp.wrapping_add(lay.interpreter_state.threads_head)) {
        Ok(t) => t,
        Err(e) => {
            w.errors.push(e);
            0
        }
    };
    let mut n = 0u64;
    while t != 0 && !w.stopped {
        n += 1;
        if n > MAX_THREADS || !seen.insert(t) {
            w.errors.push(ReadError::corrupt(
                t,
                "heap: mimalloc: the thread list loops or is too long",
            ));
            break;
        }
        let m = t.wrapping_add(mi.tstate_mimalloc);
        match mem.read_u32(m.wrapping_add(mi.initialized)) {
            // The thread has not bound its heaps yet (tstate_mimalloc_bind).
            Ok(0) => {}
            Ok(_) => {
                for (index, offset) in GC_HEAPS {
                    let heap = m.wrapping_add(mi.heaps + index * mi.heap_size);
                    w.heap(heap, index as u8, offset);
                }
            }
            Err(e) => w.errors.push(e),
        }
        match mem.read_ptr(t.wrapping_add(lay.thread_state.next)) {
            Ok(next) => t = next,
            Err(e) => {
                w.errors.push(e);
                break;
            }
        }
    }
    // Dead threads' pages, which no heap owns (`_mi_abandoned_pool_visit_blocks`).
    let pool = interp.wrapping_add(mi.interp_pool);
    for (at, tagged) in [(mi.pool_abandoned, true), (mi.pool_visited, false)] {
        if w.stopped {
            break;
        }
        match mem.read_ptr(pool.wrapping_add(at)) {
            Ok(s) => {
                // `mi_tagged_segment_ptr`: an ABA counter in the bits below the alignment.
                let s = if tagged { s & !(SEGMENT_SIZE - 1) } else { s };
                w.segments(s);
            }
            Err(e) => w.errors.push(e),
        }
    }
    w.errors
}

impl<F: FnMut(u64) -> bool> Walk<'_, F> {
    fn count_page(&mut self, page: u64) -> bool {
        self.pages += 1;
        if self.pages > MAX_PAGES {
            self.errors.push(ReadError::new(
                page,
                0,
                ReadErrorKind::Limit {
                    what: "mimalloc pages",
                    max: MAX_PAGES,
                },
            ));
            self.stopped = true;
            return false;
        }
        if !self.pages_seen.insert(page) {
            self.errors.push(ReadError::corrupt(
                page,
                "heap: mimalloc: a page met twice (a loop in a page list)",
            ));
            return false;
        }
        true
    }

    /// A thread's heap: the pages of every queue (mi_heap_visit_pages).
    fn heap(&mut self, heap: u64, tag: u8, offset: u64) {
        let mem = self.mem;
        // Blocks freed by other threads into a full page wait on the heap's delayed list:
        // free, though the page still counts them as used.
        let mut delayed = AddrSet::default();
        match mem.read_ptr(heap.wrapping_add(self.mi.heap_thread_delayed_free)) {
            Ok(first) => {
                if let Err(e) = free_list(mem, first, MAX_DELAYED, |b| delayed.insert(b)) {
                    self.errors.push(e);
                }
            }
            Err(e) => self.errors.push(e),
        }
        let mut queues = [0u8; (PAGE_QUEUES * PAGE_QUEUE_SIZE) as usize];
        if let Err(e) = mem.read_into(heap.wrapping_add(self.mi.heap_pages), &mut queues) {
            self.errors.push(e);
            return;
        }
        for q in queues.chunks_exact(PAGE_QUEUE_SIZE as usize) {
            let mut p = u64::from_le_bytes(q[..8].try_into().unwrap_or_default());
            while p != 0 && !self.stopped {
                if !self.count_page(p) {
                    break;
                }
                let page = match Page::read(mem, p) {
                    Ok(page) => page,
                    Err(e) => {
                        self.errors.push(e);
                        break;
                    }
                };
                // A page of this heap says so (`mi_page_heap`, and the heap's tag).
                if page.xheap != heap || page.tag != tag {
                    self.errors.push(ReadError::corrupt(
                        p,
                        "heap: mimalloc: a page that is not its heap's",
                    ));
                    break;
                }
                self.page(&page, offset, &delayed);
                p = page.next;
            }
        }
    }

    /// A list of abandoned segments: each one's used slices of the GC heaps' tags
    /// (mi_segment_visit_pages).
    fn segments(&mut self, first: u64) {
        let mem = self.mem;
        let mut seen = AddrSet::default();
        let (mut s, mut n) = (first, 0u64);
        let none = AddrSet::default();
        while s != 0 && !self.stopped {
            n += 1;
            if n > MAX_SEGMENTS || s & (SEGMENT_SIZE - 1) != 0 || !seen.insert(s) {
                self.errors.push(ReadError::corrupt(
                    s,
                    "heap: mimalloc: an abandoned segment list loops or points off a segment",
                ));
                return;
            }
            let entries = match mem.read_u64(s.wrapping_add(self.mi.segment_slice_entries)) {
                Ok(e) if e <= MAX_SLICE_ENTRIES => e,
                Ok(_) => {
                    self.errors
                        .push(ReadError::corrupt(s, "heap: mimalloc: segment slice count"));
                    0
                }
                Err(e) => {
                    self.errors.push(e);
                    0
                }
            };
            let slices = s.wrapping_add(self.mi.segment_slices);
            // mi_slices_start_iterate: the first slice span is the segment's own header.
            let mut i = 0u64;
            let mut first_span = true;
            while i < entries && !self.stopped {
                let at = slices.wrapping_add(i * self.mi.page_size);
                let page = match Page::read(mem, at) {
                    Ok(p) => p,
                    Err(e) => {
                        self.errors.push(e);
                        break;
                    }
                };
                if page.slice_count == 0 {
                    self.errors.push(ReadError::corrupt(
                        at,
                        "heap: mimalloc: a slice of no length",
                    ));
                    break;
                }
                if !first_span && page.xblock_size > 0 {
                    if let Some(&(_, offset)) = GC_HEAPS.iter().find(|h| h.0 == page.tag as u64) {
                        if self.count_page(at) {
                            self.page(&page, offset, &none);
                        }
                    }
                }
                first_span = false;
                i = i.saturating_add(page.slice_count);
            }
            match mem.read_ptr(s.wrapping_add(self.mi.segment_abandoned_next)) {
                Ok(next) => s = next,
                Err(e) => {
                    self.errors.push(e);
                    return;
                }
            }
        }
    }

    /// The used blocks of one page (`_mi_heap_area_visit_blocks`), whose objects start
    /// `offset` bytes into their block.
    fn page(&mut self, page: &Page, offset: u64, delayed: &AddrSet) {
        if page.used == 0 {
            return;
        }
        let Some(span) = page_span(page, self.mi.segments_slices_at()) else {
            self.errors.push(ReadError::corrupt(
                page.addr,
                "heap: mimalloc: page geometry",
            ));
            return;
        };
        let (start, bsize, capacity) = span;
        let mem = self.mem;
        let mut free = vec![false; capacity as usize];
        let mut counts = [0u64; 3];
        for (i, first) in [page.free, page.local_free, page.xthread_free]
            .into_iter()
            .enumerate()
        {
            let r = free_list(mem, first, capacity, |b| {
                let Some(ix) = block_index(b, start, bsize, capacity) else {
                    return false;
                };
                let slot = &mut free[ix as usize];
                let new = !*slot;
                *slot = true;
                new
            });
            match r {
                Ok(n) => counts[i] = n,
                Err(e) => {
                    self.errors.push(e);
                    return;
                }
            }
        }
        // `used` counts the blocks on `xthread_free` (collected later), not those on `free`
        // and `local_free` (mimalloc's types.h and `_mi_page_thread_free_collect`).
        if counts[0] + counts[1] + page.used != capacity || counts[2] > page.used {
            self.errors.push(ReadError::corrupt(
                page.addr,
                "heap: mimalloc: a page's free lists and its used count disagree",
            ));
        }
        for (ix, &is_free) in free.iter().enumerate() {
            if self.stopped {
                return;
            }
            let block = start + ix as u64 * bsize;
            if is_free || delayed.contains(&block) {
                continue;
            }
            let obj = block + self.base + offset;
            match mem.read_u8(obj + self.mi.ob_gc_bits) {
                Ok(bits) if bits & GC_BITS_TRACKED != 0 => {
                    if !(self.each)(obj) {
                        self.stopped = true;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    self.errors.push(e);
                    return;
                }
            }
        }
    }
}

impl MimallocLayout {
    fn segments_slices_at(&self) -> (u64, u64) {
        (self.segment_slices, self.page_size)
    }
}

/// A page's blocks: (first block, block size, capacity), from its place among its segment's
/// slices (`_mi_segment_page_start_from_slice`, Objects/mimalloc/segment.c 3.13); None when
/// the page is not where a page can be or its counts do not fit it.
fn page_span(page: &Page, (slices, slice_size): (u64, u64)) -> Option<(u64, u64, u64)> {
    // `_mi_ptr_segment`: a page struct lives in its segment's slice table.
    let segment = page.addr.wrapping_sub(1) & !(SEGMENT_SIZE - 1);
    let rel = page.addr.checked_sub(segment + slices)?;
    if rel % slice_size != 0 {
        return None;
    }
    let idx = rel / slice_size;
    if idx >= MAX_SLICE_ENTRIES || page.slice_count == 0 || page.xblock_size == 0 {
        return None;
    }
    let psize = page.slice_count.checked_mul(SLICE_SIZE)?;
    let x = page.xblock_size;
    // Small blocks start a few blocks in, away from the page's alignment.
    let start_offset = match x {
        8..=64 => 3 * x,
        65..=512 => x,
        _ => 0,
    };
    let avail = psize.checked_sub(start_offset)?;
    let bsize = if x < HUGE_BLOCK_SIZE { x } else { avail };
    if page.capacity == 0 || page.capacity > MAX_PAGE_BLOCKS || page.capacity * bsize > avail {
        return None;
    }
    let start = segment + idx * SLICE_SIZE + start_offset;
    Some((start, bsize, page.capacity))
}

/// The index of block `b` in a page of `capacity` blocks of `bsize` bytes at `start`.
fn block_index(b: u64, start: u64, bsize: u64, capacity: u64) -> Option<u64> {
    let rel = b.checked_sub(start)?;
    (rel % bsize == 0 && rel / bsize < capacity).then_some(rel / bsize)
}

/// Follows a free list (`mi_block_t.next`, the block's first word; release builds do not
/// encode it) from `first`, calling `mark(block)`, which returns false for a block that is
/// not a free block of the page or was met already; at most `max` blocks. Returns the count.
fn free_list(
    mem: &dyn Memory,
    first: u64,
    max: u64,
    mut mark: impl FnMut(u64) -> bool,
) -> Result<u64, ReadError> {
    let (mut b, mut n) = (first, 0u64);
    while b != 0 {
        if n >= max || !mark(b) {
            return Err(ReadError::corrupt(
                b,
                "heap: mimalloc: a free list loops or leaves its page",
            ));
        }
        n += 1;
        b = mem.read_ptr(b)?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpython::Version;
    use crate::memory::FakeMemory;

    const INTERP: u64 = 0x10_0000;
    const RUNTIME: u64 = 0x8_0000;
    const TSTATE: u64 = 0x20_0000;
    /// A segment, and its first page after the header span (slice 1).
    const SEG: u64 = 0x4000_0000;

    fn layout() -> (Layout, MimallocLayout) {
        let l = Layout::builtin_free_threaded(Version::new(3, 13, 15)).unwrap();
        let mi = l.mimalloc().unwrap();
        (l, mi)
    }

    fn page_at(mi: &MimallocLayout, slice: u64) -> u64 {
        SEG + mi.segment_slices + slice * mi.page_size
    }

    /// One thread whose GC heap has one page of `capacity` blocks of 64 bytes (start offset
    /// 192), with `used` blocks used; objects tracked.
    fn target(capacity: u64, used: u64) -> (FakeMemory, Layout, MimallocLayout, u64) {
        let (l, mi) = layout();
        let mut m = FakeMemory::new();
        m.put(RUNTIME, &[0u8; 0x400]);
        m.put(INTERP, &vec![0u8; 0x4000]);
        m.put_u64(INTERP + l.interpreter_state.threads_head, TSTATE);
        m.put(TSTATE, &vec![0u8; 0x5000]);
        let mt = TSTATE + mi.tstate_mimalloc;
        m.put_u64(mt + mi.initialized, 1);
        let heap = mt + mi.heaps + 2 * mi.heap_size;
        let page = page_at(&mi, 1);
        m.put(SEG, &vec![0u8; 0x2000]);
        // Queue 5's first page.
        m.put_u64(heap + mi.heap_pages + 5 * PAGE_QUEUE_SIZE, page);
        m.put_u64(page, 1); // slice_count
        m.put(page + 8, &[2 << 3]);
        m.put(page + 10, &(capacity as u16).to_le_bytes());
        m.put(page + 24, &(used as u32).to_le_bytes());
        m.put(page + 28, &64u32.to_le_bytes());
        m.put_u64(page + 48, heap);
        let start = SEG + SLICE_SIZE + 192;
        m.put(start, &vec![0u8; (capacity * 64) as usize]);
        for i in 0..capacity {
            m.put(start + i * 64 + mi.ob_gc_bits, &[GC_BITS_TRACKED]);
        }
        (m, l, mi, start)
    }

    fn run(m: &FakeMemory, l: &Layout, mi: &MimallocLayout) -> (Vec<u64>, Vec<ReadError>) {
        let mut objs = Vec::new();
        let errs = gc_objects(m, l, mi, RUNTIME, INTERP, |o| {
            objs.push(o);
            true
        });
        (objs, errs)
    }

    #[test]
    fn used_blocks_are_the_objects_free_lists_joined() {
        let (mut m, l, mi, start) = target(8, 5);
        // Blocks 1 and 6 free, block 3 on local_free, block 4 freed by another thread
        // (still counted as used), block 7 used but not tracked.
        let b = |i: u64| start + i * 64;
        let page = page_at(&mi, 1);
        m.put_u64(page + 16, b(1))
            .put_u64(b(1), b(6))
            .put_u64(b(6), 0);
        m.put_u64(page + 32, b(3)).put_u64(b(3), 0);
        m.put_u64(page + 40, b(4) | 1).put_u64(b(4), 0);
        m.put(b(7) + mi.ob_gc_bits, &[0]);
        let (objs, errs) = run(&m, &l, &mi);
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(objs, vec![b(0), b(2), b(5)]);
    }

    #[test]
    fn the_debug_allocator_moves_every_object() {
        let (mut m, l, mi, start) = target(2, 2);
        m.put(RUNTIME + mi.runtime_debug_enabled, &1u32.to_le_bytes());
        m.put(start + mi.ob_gc_bits, &[0])
            .put(start + 64 + mi.ob_gc_bits, &[0]);
        m.put(start + 16 + mi.ob_gc_bits, &[GC_BITS_TRACKED]);
        let (objs, errs) = run(&m, &l, &mi);
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(objs, vec![start + 16]);
    }

    #[test]
    fn a_looping_free_list_is_an_error_not_a_hang() {
        let (mut m, l, mi, start) = target(8, 6);
        let page = page_at(&mi, 1);
        m.put_u64(page + 16, start).put_u64(start, start + 64);
        m.put_u64(start + 64, start);
        let (_, errs) = run(&m, &l, &mi);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(matches!(errs[0].kind, ReadErrorKind::Corrupt(w) if w.contains("free list")));
    }

    #[test]
    fn wild_pointers_in_page_lists_are_errors() {
        // A free block outside its page, a block off the block grid.
        for wild in [0x7777_0000u64, 8] {
            let (mut m, l, mi, start) = target(8, 7);
            let page = page_at(&mi, 1);
            let p = if wild == 8 { start + 8 } else { wild };
            m.put_u64(page + 16, p);
            let (objs, errs) = run(&m, &l, &mi);
            assert_eq!(errs.len(), 1, "{errs:?}");
            assert!(objs.is_empty());
        }
        // A page queue pointing at a page of another heap, and one that loops.
        let (mut m, l, mi, _) = target(8, 8);
        let page = page_at(&mi, 1);
        m.put_u64(page + 48, 0x1234_5678);
        let (objs, errs) = run(&m, &l, &mi);
        assert!(objs.is_empty() && errs.len() == 1, "{errs:?}");
        let (mut m, l, mi, _) = target(8, 8);
        m.put_u64(page + 56, page);
        let (objs, errs) = run(&m, &l, &mi);
        assert_eq!((objs.len(), errs.len()), (8, 1), "{errs:?}");
        // A lying capacity and a page that is not where a page can be.
        let (mut m, l, mi, _) = target(8, 8);
        m.put(page + 10, &u16::MAX.to_le_bytes());
        let (objs, errs) = run(&m, &l, &mi);
        assert!(objs.is_empty() && errs.len() == 1, "{errs:?}");
    }

    #[test]
    fn counts_that_disagree_are_reported() {
        let (m, l, mi, _) = target(8, 5);
        let (objs, errs) = run(&m, &l, &mi);
        assert_eq!(objs.len(), 8);
        assert_eq!(errs.len(), 1, "{errs:?}");
    }

    #[test]
    fn abandoned_segments_are_walked_and_loops_stop() {
        let (mut m, l, mi, start) = target(4, 4);
        // The thread's heap has no page; the segment is abandoned instead (tagged pointer).
        let mt = TSTATE + mi.tstate_mimalloc;
        let heap = mt + mi.heaps + 2 * mi.heap_size;
        m.put_u64(heap + mi.heap_pages + 5 * PAGE_QUEUE_SIZE, 0);
        m.put_u64(INTERP + mi.interp_pool + mi.pool_abandoned, SEG | 5);
        m.put_u64(SEG + mi.segment_slice_entries, 3);
        m.put_u64(page_at(&mi, 0), 1); // the header span
        m.put(page_at(&mi, 0) + 28, &1u32.to_le_bytes());
        m.put_u64(page_at(&mi, 2), 1); // an unused slice
        let (objs, errs) = run(&m, &l, &mi);
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(objs, (0..4).map(|i| start + i * 64).collect::<Vec<_>>());
        // A segment list that loops back on itself.
        m.put_u64(SEG + mi.segment_abandoned_next, SEG);
        let (objs, errs) = run(&m, &l, &mi);
        assert_eq!((objs.len(), errs.len()), (4, 1), "{errs:?}");
    }

    #[test]
    fn a_caller_that_stops_ends_the_walk() {
        let (m, l, mi, _) = target(8, 8);
        let mut n = 0;
        let errs = gc_objects(&m, &l, &mi, RUNTIME, INTERP, |_| {
            n += 1;
            n < 3
        });
        assert!(errs.is_empty());
        assert_eq!(n, 3);
    }

    /// The census through the hook in `heap_census`: a list in the GC heap, and a bytes
    /// object it holds, found through it; no GC header in either size.
    #[test]
    fn the_census_starts_from_the_gc_heaps() {
        use crate::cpython::layout::tpflags;
        const LIST_TYPE: u64 = 0x70_0000;
        const BYTES_TYPE: u64 = 0x71_0000;
        const BYTES: u64 = 0x72_0000;
        const ITEMS: u64 = 0x73_0000;
        let (mut m, l, mi, start) = target(4, 1);
        let page = page_at(&mi, 1);
        let b = |i: u64| start + i * 64;
        m.put_u64(page + 16, b(1)).put_u64(b(1), b(2));
        m.put_u64(b(2), b(3)).put_u64(b(3), 0);
        // Include/object.h: Py_TPFLAGS_HAVE_GC.
        let gc = 1 << 14;
        for (tp, name, flags, size, item) in [
            (
                LIST_TYPE,
                &b"list\0"[..],
                tpflags::LIST_SUBCLASS | gc,
                56u64,
                0u64,
            ),
            (BYTES_TYPE, &b"bytes\0"[..], tpflags::BYTES_SUBCLASS, 49, 1),
        ] {
            let to = &l.type_object;
            m.put(tp, &[0u8; 0x400]);
            m.put_u64(tp + to.tp_name, tp + 0x300).put(tp + 0x300, name);
            m.put_u64(tp + to.tp_flags, flags);
            m.put_u64(tp + to.tp_basicsize, size);
            m.put_u64(tp + to.tp_basicsize + 8, item);
        }
        let list = b(0);
        m.put_u64(list + l.pyobject.ob_type, LIST_TYPE);
        m.put_u64(list + l.list_object.ob_size, 1);
        m.put_u64(list + l.list_object.ob_item, ITEMS);
        m.put_u64(list + l.list_object.ob_item + 8, 1);
        m.put_u64(ITEMS, BYTES);
        m.put(BYTES, &[0u8; 0x100]);
        m.put_u64(BYTES + l.pyobject.ob_type, BYTES_TYPE);
        m.put_u64(BYTES + l.bytes_object.ob_size, 7);
        // Snapshot::for_test's `_PyRuntime` is at 0: the debug allocator is off.
        m.put(0, &[0u8; 0x400]);
        let snap = Snapshot::for_test(m, l);
        let c = snap.heap_census(&[INTERP], &crate::cpython::heap::Roots::default(), 5);
        assert!(c.complete && c.errors.is_empty(), "{:?}", c.errors);
        let got: Vec<_> = c
            .types
            .iter()
            .map(|t| (t.name.as_str(), t.count, t.bytes))
            .collect();
        assert_eq!(got, [("list", 1, 56 + 8), ("bytes", 1, 49 + 7)]);
    }
}
