//! Independent work over many items of one stop (100,000 tasks' coroutines, greenlets' saved
//! frames, compressed debug sections), spread over the machine's cores. Reading a core or a
//! process is mostly waiting for memory (pages faulted in, cache misses), which a second core
//! overlaps.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Most threads one map uses: past a few, they only contend for the memory they all read.
const MAX_THREADS: usize = 8;

/// `f` of each item, in the items' order, on up to as many threads as the machine has cores
/// (the calling thread is one). Each thread takes `batch` items at a time; fewer than two
/// batches run on the calling thread alone, and so does everything when not `any_thread`
/// (memory read through the debugger: [`crate::memory::Memory::any_thread`]). A panic in `f` on another thread goes on in the
/// caller as that panic (the [`crate::panic`] boundary then names where it happened).
pub fn map<T: Sync, R: Send>(
    items: &[T],
    batch: usize,
    any_thread: bool,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    map_iter(items, batch, any_thread, f).collect()
}

/// [`map`]'s results, in the items' order, batch by batch as the threads made them: a caller
/// that goes through them once saves their copy into one vector (100,000 tasks' results are
/// megabytes, in memory touched for the first time).
pub fn map_iter<T: Sync, R: Send>(
    items: &[T],
    batch: usize,
    any_thread: bool,
    f: impl Fn(&T) -> R + Sync,
) -> Parts<R> {
    let batch = batch.max(1);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_THREADS)
        .min(items.len().div_ceil(batch));
    if !any_thread || threads <= 1 {
        return Parts::new(vec![items.iter().map(f).collect()]);
    }
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, Vec<R>)>> = Mutex::new(Vec::new());
    let work = || loop {
        let start = next.fetch_add(batch, Ordering::Relaxed);
        let Some(part) = items.get(start..(start + batch).min(items.len())) else {
            break;
        };
        if part.is_empty() {
            break;
        }
        let out: Vec<R> = part.iter().map(&f).collect();
        done.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((start, out));
    };
    let panicked = std::thread::scope(|s| {
        // A thread the system refuses only leaves more for the others.
        let helpers: Vec<_> = (1..threads)
            .filter_map(|_| {
                std::thread::Builder::new()
                    .spawn_scoped(s, || crate::panic::in_worker(work))
                    .ok()
            })
            .collect();
        let mine = crate::panic::in_worker(work);
        let mut first = mine.err();
        for h in helpers {
            if let Ok(Err(p)) = h.join() {
                first = first.or(Some(p));
            }
        }
        first
    });
    if let Some(p) = panicked {
        crate::panic::resume(p);
    }
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_unstable_by_key(|d| d.0);
    Parts::new(done.into_iter().map(|(_, part)| part).collect())
}

/// Batches of results in order, each given back to the allocator once gone through.
pub struct Parts<R> {
    parts: std::vec::IntoIter<Vec<R>>,
    current: std::vec::IntoIter<R>,
    left: usize,
}

impl<R> Parts<R> {
    fn new(parts: Vec<Vec<R>>) -> Self {
        Parts {
            left: parts.iter().map(Vec::len).sum(),
            parts: parts.into_iter(),
            current: Vec::new().into_iter(),
        }
    }
}

impl<R> Iterator for Parts<R> {
    type Item = R;

    fn next(&mut self) -> Option<R> {
        loop {
            if let Some(r) = self.current.next() {
                self.left -= 1;
                return Some(r);
            }
            self.current = self.parts.next()?.into_iter();
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<R> ExactSizeIterator for Parts<R> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_items_order() {
        let items: Vec<u64> = (0..10_007).collect();
        let it = map_iter(&items, 64, true, |x| x + 1);
        assert_eq!(it.len(), items.len());
        assert_eq!(
            it.collect::<Vec<_>>(),
            items.iter().map(|x| x + 1).collect::<Vec<_>>()
        );
        assert_eq!(
            map(&items, 64, true, |x| x * 3),
            items.iter().map(|x| x * 3).collect::<Vec<_>>()
        );
        assert_eq!(map(&items[..0], 64, true, |x| *x), Vec::<u64>::new());
        assert_eq!(map(&items[..5], 64, true, |x| *x), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_panic_on_any_thread_reaches_the_boundary() {
        let items: Vec<u64> = (0..4096).collect();
        let e = crate::panic::catch("unit", || {
            map(&items, 16, true, |x| assert!(*x != 4000, "item {x}"))
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("internal error in unit at src/parallel.rs:"),
            "{e}"
        );
        assert!(e.contains("item 4000"), "{e}");
    }
}
