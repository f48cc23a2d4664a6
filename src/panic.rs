//! The panic boundary. Every entry point of the Python module and of the CLI runs its body
//! through [`catch`], so that a bug (an overflow the decoders missed, an index out of range)
//! becomes the one-line [`Error::Panic`] naming the entry and the source location, not a Rust
//! panic message on stderr followed by pyo3's `PanicException` (a `BaseException`, which the
//! debuggers' `except Exception` lets through as a traceback) or exit status 101.
//!
//! ```
//! let r: pyunwind::Result<u32> = pyunwind::panic::catch("example", || panic!("boom"));
//! assert!(r.unwrap_err().to_string().starts_with("internal error in example at src/"));
//! ```

use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe, PanicHookInfo};
use std::sync::{Once, OnceLock};

use crate::error::{Error, Result};
/// Defined beside [`Error::Panic`], whose text and exit status they are; here for the
/// frontends that know them by this module.
pub use crate::error::{PANIC_EXIT_STATUS as EXIT_STATUS, PANIC_MARKER as MARKER};

/// `PYUNWIND_TEST_PANIC=ENTRY` makes the entry point named ENTRY (`cli`, `Session.render_bt`,
/// ...) panic on purpose, so that tests can check the boundary in every frontend.
pub const TEST_PANIC_ENV: &str = "PYUNWIND_TEST_PANIC";

thread_local! {
    /// How many [`catch`] calls are active on this thread (one entry can call back into
    /// Python, which can call another).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// Where the last panic under [`catch`] happened, set by the hook.
    static LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

/// Our hook records the location of panics under [`catch`] and prints nothing; any other panic
/// in the process (the debugger may load other Rust code) goes to the hook that was there.
fn install_hook() {
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info: &PanicHookInfo<'_>| {
            if DEPTH.with(Cell::get) > 0 {
                let at = info.location().map(|l| l.to_string());
                LOCATION.with(|l| *l.borrow_mut() = at);
            } else {
                previous(info);
            }
        }));
    });
}

/// The entry name of `PYUNWIND_TEST_PANIC`, read once per process.
fn injected() -> Option<&'static str> {
    static NAME: OnceLock<Option<String>> = OnceLock::new();
    NAME.get_or_init(|| std::env::var(TEST_PANIC_ENV).ok().filter(|s| !s.is_empty()))
        .as_deref()
}

/// Runs `f`; a panic in it becomes [`Error::Panic`] with `entry` and the panic's location.
pub fn catch<T>(entry: &'static str, f: impl FnOnce() -> T) -> Result<T> {
    install_hook();
    DEPTH.with(|d| d.set(d.get().saturating_add(1)));
    let r = panic::catch_unwind(AssertUnwindSafe(|| {
        if injected() == Some(entry) {
            panic!("injected by {TEST_PANIC_ENV}={entry}");
        }
        f()
    }));
    DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    r.map_err(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        let location = LOCATION
            .with(|l| l.borrow_mut().take())
            .unwrap_or_else(|| "an unknown place".into());
        Error::Panic {
            entry,
            location,
            // One line, whatever the message holds.
            message: message.split_whitespace().collect::<Vec<_>>().join(" "),
        }
    })
}

/// A panic on a worker thread, with where it happened, to go on in the thread that waits
/// for the worker ([`resume`]).
pub struct WorkerPanic {
    payload: Box<dyn std::any::Any + Send>,
    location: Option<String>,
}

/// Runs `f` on a worker thread of an entry: a panic is recorded as under [`catch`] (the hook
/// prints nothing) and returned.
pub fn in_worker<T>(f: impl FnOnce() -> T) -> std::result::Result<T, WorkerPanic> {
    install_hook();
    DEPTH.with(|d| d.set(d.get().saturating_add(1)));
    let r = panic::catch_unwind(AssertUnwindSafe(f));
    DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    r.map_err(|payload| WorkerPanic {
        payload,
        location: LOCATION.with(|l| l.borrow_mut().take()),
    })
}

/// Goes on with a worker's panic in this thread, where its entry's [`catch`] turns it into the
/// error that names the worker's location.
pub fn resume(p: WorkerPanic) -> ! {
    LOCATION.with(|l| *l.borrow_mut() = p.location);
    panic::resume_unwind(p.payload)
}

/// [`catch`] for an entry that returns a [`Result`] itself.
pub fn catch_result<T>(entry: &'static str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch(entry, f).and_then(|r| r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_one_line_naming_its_place() {
        let line = line!() + 3;
        let e = catch("unit", || -> u64 {
            let v: Vec<u64> = Vec::new();
            v[std::hint::black_box(3)]
        })
        .unwrap_err();
        let s = e.to_string();
        assert!(
            s.starts_with(&format!("internal error in unit at src/panic.rs:{line}:")),
            "{s}"
        );
        assert!(s.contains("index out of bounds"), "{s}");
        assert!(!s.contains('\n'), "{s}");
    }

    #[test]
    fn no_panic_passes_the_value_through() {
        assert_eq!(catch("unit", || 7).unwrap(), 7);
        assert!(matches!(
            catch_result::<u8>("unit", || Err(Error::Usage("x".into()))),
            Err(Error::Usage(_))
        ));
    }
}
