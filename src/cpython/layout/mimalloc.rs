//! A free-threaded build's mimalloc state (the heaps its GC walks), by build.

use super::Layout;

/// Where a free-threaded build keeps its mimalloc state. Offsets of 3.13t, read in the DWARF
/// of our 3.13.15 build (`ptype/o struct _PyThreadStateImpl`, `mi_heap_s`, `mi_page_s`,
/// `mi_segment_s`, `mi_abandoned_pool_s`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MimallocLayout {
    /// `_PyThreadStateImpl.mimalloc` (a `struct _mimalloc_thread_state`).
    pub tstate_mimalloc: u64,
    /// `_mimalloc_thread_state.heaps` and `.initialized`.
    pub heaps: u64,
    pub initialized: u64,
    /// `sizeof(mi_heap_t)`.
    pub heap_size: u64,
    /// `mi_heap_t.pages` and `.thread_delayed_free`.
    pub heap_pages: u64,
    pub heap_thread_delayed_free: u64,
    /// `PyInterpreterState.mimalloc.abandoned_pool`, and in the pool `abandoned_visited`
    /// (a segment) and `abandoned` (a segment tagged in its low bits).
    pub interp_pool: u64,
    pub pool_visited: u64,
    pub pool_abandoned: u64,
    /// `mi_segment_t.abandoned_next`, `.slice_entries`, `.slices`.
    pub segment_abandoned_next: u64,
    pub segment_slice_entries: u64,
    pub segment_slices: u64,
    /// `sizeof(mi_page_t)` (= `mi_slice_t`).
    pub page_size: u64,
    /// `PyObject.ob_gc_bits`.
    pub ob_gc_bits: u64,
    /// `_PyRuntimeState.allocators.is_debug_enabled` (an int: `_PyMem_DebugEnabled`).
    pub runtime_debug_enabled: u64,
}

impl Layout {
    /// Where this build keeps its mimalloc state, where that is known: the free-threaded 3.13
    /// (src/cpython/mimalloc.rs reads it).
    pub fn mimalloc(&self) -> Option<MimallocLayout> {
        if !self.free_threaded || (self.version.major, self.version.minor) != (3, 13) {
            return None;
        }
        Some(MimallocLayout {
            tstate_mimalloc: 352,
            heaps: 8,
            initialized: 13872,
            heap_size: 3064,
            heap_pages: 1040,
            heap_thread_delayed_free: 2840,
            interp_pool: 0x2a40,
            pool_visited: 0,
            pool_abandoned: 64,
            segment_abandoned_next: 176,
            segment_slice_entries: 248,
            segment_slices: 264,
            page_size: 96,
            ob_gc_bits: 11,
            runtime_debug_enabled: 968,
        })
    }
}
