//! This host's CLOCK_MONOTONIC: the clock of `time.monotonic()` and of asyncio's
//! `loop.time()` in every process of the host (Linux has no per-process monotonic clock; a
//! time namespace offsets it, and a process in another one is not read live here).

/// CLOCK_MONOTONIC now, in seconds; None where the call fails.
pub fn monotonic_now() -> Option<f64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the one we pass.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (rc == 0).then_some(ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9)
}
