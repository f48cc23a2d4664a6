//! Waits in native code: a thread blocked in a system call under a C function called from
//! Python, which no Python-level wait and no descriptor or child explains (a C++ extension
//! on a `std::condition_variable`, torch's autograd engine in an all-reduce). The C function
//! is the call in progress of the innermost Python frame, found on its value stack above the
//! slots its enclosing blocks keep (a `with` block's `__exit__` only sits there): with native
//! frames (`--native`), the callable whose C function one of them runs, else the lowest C
//! callable there. With native frames also the innermost native frame outside the C and C++
//! runtimes, ctypes' plumbing and the interpreter, where the code that blocks is.
//!
//! `time.sleep` is kind `sleep`, not native: the program asked for the wait.

use crate::cpython::callables::NativeFrame;
use crate::cpython::{FrameItem, PyFrame, Snapshot};
use crate::model::{FrameKind, FrameReport, ThreadReport, WaitKind, Waiting, WaitsOn};
use crate::session::DecodedThread;

/// Modules of the C and C++ runtimes and the dynamic loader, by file name prefix: a wait's
/// own code is never in them.
const RUNTIME_MODULES: &[&str] = &[
    "libc.so",
    "libc-",
    "libstdc++.so",
    "libgcc_s.so",
    "libpthread.so",
    "libpthread-",
    "ld-linux",
    "ld-musl",
    "linux-vdso",
    "linux-gate",
    "[vdso]",
    // ctypes' call plumbing: `_ctypes` (a shared module where the build makes it one) and
    // libffi, which calls the C function a `ctypes` pointer names.
    "_ctypes.",
    "libffi.so",
    // cffi's, which calls a cffi function pointer's target through libffi.
    "_cffi_backend.",
];

/// C functions that are a sleep the program asked for.
const SLEEPS: &[&str] = &["time.sleep"];

/// Whether a module (a file name) is the interpreter: the executable (`python3.12`) or
/// libpython.
fn is_interpreter(module: &str) -> bool {
    module.starts_with("libpython") || module.starts_with("python")
}

/// The C function frame `p` is calling, by its value stack: the lowest C callable on it (cut
/// at `co_stacksize`) above the slots of the blocks its current instruction is inside
/// ([`Snapshot::block_depth`]: a `with` block's `__exit__` only sits there, and is called
/// when the block ends). A call in progress is the live stack's top and slots above it are
/// stale, so a callable below it is live; one of a call nested in another C call's arguments
/// (`len(os.read(fd, n))`) is named by the outer call. None where that callable has no name
/// without native frames (a cffi function pointer).
pub(crate) fn called_c_function(snap: &Snapshot, p: &PyFrame) -> Option<String> {
    lowest_c_callable(snap, &candidates(snap, p)).and_then(|(_, name)| name)
}

/// The lowest C callable of [`candidates`], with its name (None for a cffi function pointer).
fn lowest_c_callable(snap: &Snapshot, slots: &[u64]) -> Option<(u64, Option<String>)> {
    slots.iter().find_map(|&v| match snap.c_callable_name(v) {
        Some(name) => Some((v, Some(name))),
        None => snap.is_cffi_function_pointer(v).then_some((v, None)),
    })
}

/// The objects on `p`'s value stack, bottom first, that a call it makes now may be calling:
/// those above the blocks its current instruction is inside, cut at `co_stacksize`.
fn candidates(snap: &Snapshot, p: &PyFrame) -> Vec<u64> {
    let slots = snap.own_value_stack(p, None);
    let below = usize::try_from(snap.block_depth(p).unwrap_or(0)).unwrap_or(usize::MAX);
    slots.into_iter().skip(below).flatten().collect()
}

/// With native frames (`t`'s above its innermost Python frame): the C callable on the value
/// stack of `p` whose C function one of them runs (a builtin's `ml_meth`, a method
/// descriptor's, a `ctypes` or cffi pointer's target, a Cython function's `ml_meth`, a C
/// type's `tp_call`), with its name: a cffi pointer's is that frame's function and module
/// (`calls_wait (libcalls.so)`), as a `ctypes` pointer's is named. None without native frames
/// or when none runs one: the value-stack rule ([`called_c_function`]) then names the call.
fn matched_c_callable(
    snap: &Snapshot,
    t: &ThreadReport,
    slots: &[u64],
) -> Option<(u64, Option<String>)> {
    let (frames, natives): (Vec<&FrameReport>, Vec<NativeFrame>) = t
        .frames
        .iter()
        .take_while(|f| f.kind != FrameKind::Python)
        .filter(|f| f.kind == FrameKind::Native)
        .filter_map(|f| {
            let n = NativeFrame {
                name: f.function.as_deref().map(str::to_string),
                pc: f.address?,
            };
            Some((f, n))
        })
        .unzip();
    if natives.is_empty() {
        return None;
    }
    let (v, k) = snap.running_c_callable(slots.iter().copied(), &natives)?;
    if let Some(name) = snap.c_callable_name(v) {
        return Some((v, Some(name)));
    }
    let f = frames.get(k)?;
    let name = match (f.function.as_deref(), f.module()) {
        (Some(function), Some(module)) => Some(format!(
            "{function} ({})",
            module.rsplit('/').next().unwrap_or(module)
        )),
        _ => None,
    };
    Some((v, name))
}

/// The innermost native frame above `t`'s innermost Python frame that is neither the
/// runtimes' nor the interpreter's: its function (demangled where the frame was named), where
/// it has a name.
pub fn native_function(t: &ThreadReport) -> Option<String> {
    let frames = t.frames.iter().take_while(|f| f.kind != FrameKind::Python);
    frames
        .filter(|f| f.kind == FrameKind::Native)
        .find(|f| {
            f.module().is_some_and(|m| {
                !is_interpreter(m) && !RUNTIME_MODULES.iter().any(|r| m.starts_with(r))
            })
        })
        .and_then(|f| f.function.as_deref())
        .map(str::to_string)
}

/// The wait of thread `d` (`t` in the report), blocked in a system call with nothing else to
/// explain it: `sleep` in `time.sleep`, else `native` with the C function its innermost Python
/// frame calls. None when that frame calls no C function memory shows.
pub fn native_wait(snap: &Snapshot, t: &ThreadReport, d: &DecodedThread) -> Option<Waiting> {
    let FrameItem::Python(p) = d.walk.items.first()? else {
        return None;
    };
    let frame = t
        .frames
        .iter()
        .position(|f| f.kind == FrameKind::Python && f.address == Some(p.addr))?;
    // The value stack read once: the callable and, for a method, the self after it.
    let slots = candidates(snap, p);
    let (callable, function) =
        matched_c_callable(snap, t, &slots).or_else(|| lowest_c_callable(snap, &slots))?;
    if function.as_deref().is_some_and(|f| SLEEPS.contains(&f)) {
        return Some(Waiting {
            kind: WaitKind::Sleep,
            object: None,
            type_name: None,
            owner: None,
            frame,
            on: None,
        });
    }
    // The object the call is made on (the engine of `engine.run_backward(...)`).
    let after = slots.iter().skip_while(|&&v| v != callable).nth(1).copied();
    let this = snap.c_call_self(callable, after);
    Some(Waiting {
        kind: WaitKind::Native,
        object: this.as_ref().map(|t| t.0),
        type_name: this.map(|t| t.1),
        owner: None,
        frame,
        on: Some(WaitsOn::Native {
            function,
            native_function: native_function(t),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interpreter_and_runtimes_are_not_where_a_wait_blocks() {
        assert!(is_interpreter("python3.12"));
        assert!(is_interpreter("libpython3.14.so.1.0"));
        assert!(!is_interpreter("libtorch_cpu.so"));
        for m in [
            "libc.so.6",
            "libstdc++.so.6",
            "ld-linux-x86-64.so.2",
            "linux-vdso.so.1",
        ] {
            assert!(RUNTIME_MODULES.iter().any(|r| m.starts_with(r)), "{m}");
        }
    }
}
