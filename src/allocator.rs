//! The allocator: the system's, with the CLI's heap backed by transparent huge pages.
//!
//! A report of 100,000 frames, tasks or greenlets allocates a few hundred MiB that it touches
//! once. With 4 KiB pages a fifth of such a run was page faults (perf: `do_anonymous_page`, 31,000
//! faults for 100,000 greenlets); with 2 MiB pages there are a few hundred. glibc does this
//! itself under `GLIBC_TUNABLES=glibc.malloc.hugetlb=1` (2.35+), a setting a user's
//! environment does not have, so the CLI asks for it here: [`huge_pages`] makes the heap grow
//! in large steps (`M_TOP_PAD`) and marks what it grew by, every large block, and the heap of
//! each worker thread's arena with `MADV_HUGEPAGE` (honoured where the system's THP mode is
//! `always` or `madvise`). Worker threads keep arenas of their own: with one arena for all
//! (`M_ARENA_MAX` 1, as before), the two threads decoding 100,000 tasks queued on its lock
//! (2,400 futex waits a run) and `core --tasks --json` took a quarter longer.
//!
//! Only the CLI turns it on: inside gdb or lldb the heap is the debugger's.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The allocator of every Rust allocation in this library and its users.
pub struct Allocator;

#[global_allocator]
static ALLOCATOR: Allocator = Allocator;

/// Set by [`huge_pages`].
static ON: AtomicBool = AtomicBool::new(false);
/// The end of the part of the main heap already marked.
static MARKED_TO: AtomicUsize = AtomicUsize::new(0);

const HUGE_PAGE: usize = 2 << 20;
/// How much the heap grows by at once: in 4 KiB pages, glibc's own first touch of a new part
/// (a chunk header) would otherwise take the 2 MiB region it falls in.
const TOP_PAD: i32 = 64 << 20;

/// From here on the heap and large blocks are marked for huge pages (for the CLI's process).
pub fn huge_pages() {
    if ON.swap(true, Ordering::Relaxed) {
        return;
    }
    // SAFETY: mallopt only changes glibc's tuning; sbrk(0) only reads the current break.
    unsafe {
        libc::mallopt(libc::M_TOP_PAD, TOP_PAD);
        MARKED_TO.store(libc::sbrk(0) as usize, Ordering::Relaxed);
    }
}

/// glibc's arenas of worker threads: each heap is an aligned mapping of this size, which the
/// arena grows into (malloc/arena.c `HEAP_MAX_SIZE`, `heap_for_ptr`: 2 *
/// `DEFAULT_MMAP_THRESHOLD_MAX`, 64 MiB on 64-bit).
const ARENA_HEAP: usize = 64 << 20;
/// Bits of a chunk's size word (malloc/malloc.c): the chunk is a mapping of its own; it
/// belongs to an arena other than the main one (a worker thread's).
const IS_MMAPPED: usize = 0x2;
const NON_MAIN_ARENA: usize = 0x4;

thread_local! {
    /// The worker arena heap this thread last marked.
    static MARKED_ARENA: Cell<usize> = const { Cell::new(0) };
}

/// Marks what the heap has grown by since last time, a large block itself (glibc maps those
/// on their own), and the heap of a worker thread's arena.
fn mark(block: *mut u8, size: usize) {
    if block.is_null() {
        return;
    }
    if size >= HUGE_PAGE {
        advise(block as usize, block as usize + size);
    }
    // SAFETY: glibc puts each block's chunk size word just before it (malloc/malloc.c
    // `chunk2mem`), memalign'd blocks too.
    let chunk = unsafe { *(block as *const usize).sub(1) };
    if chunk & (NON_MAIN_ARENA | IS_MMAPPED) == NON_MAIN_ARENA {
        let heap = block as usize & !(ARENA_HEAP - 1);
        if MARKED_ARENA.get() != heap {
            MARKED_ARENA.set(heap);
            advise(heap, heap + ARENA_HEAP);
        }
        return;
    }
    // Inside the part of the heap already marked (most blocks): the heap has not grown since,
    // for the block that makes it grow ends past the old break. Blocks glibc maps on their own
    // lie above the heap and are asked about as before.
    if (block as usize).saturating_add(size) <= MARKED_TO.load(Ordering::Relaxed) {
        return;
    }
    // SAFETY: sbrk(0) only reads the current break.
    let top = unsafe { libc::sbrk(0) } as usize;
    let from = MARKED_TO.load(Ordering::Relaxed);
    if top > from
        && MARKED_TO
            .compare_exchange(from, top, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        advise(from, top);
    }
}

/// `MADV_HUGEPAGE` over the whole pages within [start, end). A failure only costs speed.
fn advise(start: usize, end: usize) {
    let page = 4096;
    let start = start.next_multiple_of(page);
    let end = end & !(page - 1);
    if end > start {
        // SAFETY: madvise with MADV_HUGEPAGE changes no contents and only applies to
        // mappings that exist in the range.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

// SAFETY: every call goes to `System`; `mark` only advises the kernel about pages.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if ON.load(Ordering::Relaxed) {
            mark(p, layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if ON.load(Ordering::Relaxed) {
            mark(p, layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if ON.load(Ordering::Relaxed) && new_size > layout.size() {
            mark(p, new_size);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    /// The VmFlags of the mapping holding `addr`, from /proc/self/smaps.
    fn vm_flags(addr: usize) -> String {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((lo, hi)) = range.split_once('-') {
                    if let (Ok(lo), Ok(hi)) =
                        (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                    {
                        inside = lo <= addr && addr < hi;
                        continue;
                    }
                }
            }
            if inside {
                if let Some(flags) = line.strip_prefix("VmFlags:") {
                    return flags.trim().to_string();
                }
            }
        }
        panic!("no mapping holds {addr:#x}");
    }

    #[test]
    fn a_worker_threads_blocks_ask_for_huge_pages() {
        super::huge_pages();
        // A new thread's small blocks come from an arena of its own (or, when glibc has no
        // more, a shared one): either heap is marked.
        let at = std::thread::spawn(|| {
            let small = vec![1u8; 4096];
            let at = small.as_ptr() as usize;
            std::mem::forget(small);
            at
        })
        .join()
        .unwrap();
        assert!(
            vm_flags(at).split(' ').any(|f| f == "hg"),
            "{}",
            vm_flags(at)
        );
    }

    #[test]
    fn large_blocks_ask_for_huge_pages() {
        super::huge_pages();
        // A block glibc maps on its own.
        let big = vec![1u8; 8 << 20];
        let middle = big.as_ptr() as usize + (4 << 20);
        assert!(
            vm_flags(middle).split(' ').any(|f| f == "hg"),
            "{}",
            vm_flags(middle)
        );
    }
}
