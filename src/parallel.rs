//! Independent work over many items of one stop (100,000 tasks' coroutines, greenlets' saved
//! frames, compressed debug sections), spread over the machine's cores. Reading a core or a
//! process is mostly waiting for memory (pages faulted in, cache misses), which a second core
//! overlaps.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

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
    on_threads(threads, work, work, || {});
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_unstable_by_key(|d| d.0);
    Parts::new(done.into_iter().map(|(_, part)| part).collect())
}

/// `help` on `threads - 1` new threads and `mine` on the calling thread, each to its end;
/// then the first panic of any goes on in the caller as that panic (the [`crate::panic`]
/// boundary names where it happened). `stop` runs as soon as one of them panicked, for the
/// others that wait on it.
fn on_threads(threads: usize, help: impl Fn() + Sync, mine: impl FnOnce(), stop: impl Fn() + Sync) {
    let panicked = std::thread::scope(|s| {
        // A thread the system refuses only leaves more for the others.
        let helpers: Vec<_> = (1..threads)
            .filter_map(|_| {
                std::thread::Builder::new()
                    .spawn_scoped(s, || {
                        let r = crate::panic::in_worker(&help);
                        if r.is_err() {
                            stop();
                        }
                        r
                    })
                    .ok()
            })
            .collect();
        let mine = crate::panic::in_worker(mine);
        if mine.is_err() {
            stop();
        }
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
}

/// Batches made ahead of the one [`map_each`]'s sink takes next, per thread: enough that no
/// thread waits for the sink, few enough that the results held stay small.
const AHEAD_PER_THREAD: usize = 2;

/// `f` of each item, given to `sink` on the calling thread in the items' order as the
/// threads make them, for output written while it is made (the JSON of 100,000 tasks is
/// 60 MB): at most a few batches a thread wait for `sink` at any time. The calling thread
/// makes batches too while the next one to sink is not ready. `sink`'s first error stops the
/// work and is returned. Threads as [`map`] (always on the calling thread alone when not
/// `any_thread`); a panic in `f` goes on in the caller as that panic.
pub fn map_each<T: Sync, R: Send, E>(
    items: &[T],
    batch: usize,
    any_thread: bool,
    f: impl Fn(&T) -> R + Sync,
    mut sink: impl FnMut(R) -> Result<(), E>,
) -> Result<(), E> {
    let batch = batch.max(1);
    let batches = items.len().div_ceil(batch);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_THREADS)
        .min(batches);
    if !any_thread || threads <= 1 {
        return items.iter().try_for_each(|i| sink(f(i)));
    }
    let ahead = threads * AHEAD_PER_THREAD;
    let shared = Ordered {
        state: Mutex::new(OrderedState {
            ready: BTreeMap::new(),
            taken: 0,
            sunk: 0,
            stop: false,
        }),
        changed: Condvar::new(),
    };
    let make = |k: usize| -> Vec<R> {
        items[k * batch..((k + 1) * batch).min(items.len())]
            .iter()
            .map(&f)
            .collect()
    };
    // A helper takes the next batch while it is not too far ahead of the sink.
    let help = || loop {
        let k = {
            let mut st = shared.lock();
            loop {
                if st.stop || st.taken >= batches {
                    return;
                }
                if let Some(k) = st.take(batches, ahead) {
                    break k;
                }
                st = shared.wait(st);
            }
        };
        let out = make(k);
        shared.lock().ready.insert(k, out);
        shared.changed.notify_all();
    };
    let mut result = Ok(());
    let mine = || {
        for k in 0..batches {
            let out = loop {
                let mut st = shared.lock();
                if st.stop {
                    return;
                }
                if let Some(out) = st.ready.remove(&k) {
                    st.sunk = k + 1;
                    drop(st);
                    shared.changed.notify_all();
                    break out;
                }
                // Not made yet: make the next batch here, or wait for the one being made.
                if let Some(j) = st.take(batches, ahead) {
                    drop(st);
                    let out = make(j);
                    shared.lock().ready.insert(j, out);
                } else {
                    drop(shared.wait(st));
                }
            };
            if let Err(e) = out.into_iter().try_for_each(&mut sink) {
                result = Err(e);
                shared.stop();
                return;
            }
        }
    };
    on_threads(threads, help, mine, || shared.stop());
    result
}

/// What [`map_each`]'s threads share: the batches made and not yet sunk, by index.
struct Ordered<R> {
    state: Mutex<OrderedState<R>>,
    changed: Condvar,
}

struct OrderedState<R> {
    ready: BTreeMap<usize, Vec<R>>,
    /// Batches taken by a thread (made or being made), from the first.
    taken: usize,
    /// Batches given to the sink, from the first.
    sunk: usize,
    /// The sink failed or a thread panicked: nothing more is made.
    stop: bool,
}

impl<R> OrderedState<R> {
    /// The next of `batches` batches to make, unless it would be more than `ahead` batches
    /// ahead of the sink.
    fn take(&mut self, batches: usize, ahead: usize) -> Option<usize> {
        if self.taken >= batches || self.taken >= self.sunk + ahead {
            return None;
        }
        self.taken += 1;
        Some(self.taken - 1)
    }
}

impl<R> Ordered<R> {
    fn lock(&self) -> std::sync::MutexGuard<'_, OrderedState<R>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(
        &self,
        g: std::sync::MutexGuard<'a, OrderedState<R>>,
    ) -> std::sync::MutexGuard<'a, OrderedState<R>> {
        self.changed.wait(g).unwrap_or_else(|e| e.into_inner())
    }

    fn stop(&self) {
        self.lock().stop = true;
        self.changed.notify_all();
    }
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
    fn each_result_reaches_the_sink_in_order() {
        let items: Vec<u64> = (0..10_007).collect();
        for batch in [1, 7, 64, 20_000] {
            let mut got = Vec::new();
            let r: Result<(), ()> = map_each(
                &items,
                batch,
                true,
                |x| x * 2,
                |y| {
                    got.push(y);
                    Ok(())
                },
            );
            assert_eq!(r, Ok(()));
            assert_eq!(
                got,
                items.iter().map(|x| x * 2).collect::<Vec<_>>(),
                "{batch}"
            );
        }
        let mut none = 0;
        let r: Result<(), ()> = map_each(
            &items[..0],
            8,
            true,
            |x| *x,
            |_| {
                none += 1;
                Ok(())
            },
        );
        assert_eq!((r, none), (Ok(()), 0));
    }

    #[test]
    fn the_sinks_error_stops_the_work() {
        let items: Vec<u64> = (0..100_000).collect();
        let made = AtomicUsize::new(0);
        let mut sunk = 0;
        let r = map_each(
            &items,
            16,
            true,
            |x| {
                made.fetch_add(1, Ordering::Relaxed);
                *x
            },
            |x| {
                sunk += 1;
                if x == 100 {
                    Err(x)
                } else {
                    Ok(())
                }
            },
        );
        assert_eq!((r, sunk), (Err(100), 101));
        // Only the batches in flight when it failed were made, not the 100,000 items.
        assert!(made.load(Ordering::Relaxed) < 1_000, "{made:?}");
    }

    #[test]
    fn a_panic_while_sinking_in_order_reaches_the_boundary() {
        let items: Vec<u64> = (0..4096).collect();
        let e = crate::panic::catch("unit", || {
            map_each(
                &items,
                16,
                true,
                |x| assert!(*x != 4000, "item {x}"),
                |()| Ok::<(), ()>(()),
            )
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("item 4000"), "{e}");
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
