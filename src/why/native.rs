//! Waits in native code: a thread blocked in a system call under a C function called from
//! Python, which no Python-level wait and no descriptor or child explains (a C++ extension
//! on a `std::condition_variable`, torch's autograd engine in an all-reduce). The C function
//! is the call in progress of the innermost Python frame, found on its value stack; with
//! native frames (`--native`, the debuggers), also the innermost native frame outside the C
//! and C++ runtimes and the interpreter, where the code that blocks is.
//!
//! `time.sleep` is kind `sleep`, not native: the program asked for the wait.

use crate::cpython::{FrameItem, PyFrame, Snapshot};
use crate::report::{FrameKind, ThreadReport, Waiting, WaitsOn};
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
];

/// C functions that are a sleep the program asked for.
const SLEEPS: &[&str] = &["time.sleep"];

/// Whether a module (a file name) is the interpreter: the executable (`python3.12`) or
/// libpython.
fn is_interpreter(module: &str) -> bool {
    module.starts_with("libpython") || module.starts_with("python")
}

/// The C function frame `p` is calling, by its value stack: the lowest C callable on it (cut
/// at `co_stacksize`). A call in progress is the live stack's top and slots above it are
/// stale, so a callable below it is live; one of a call nested in another C call's arguments
/// (`len(os.read(fd, n))`) is named by the outer call.
pub(crate) fn called_c_function(snap: &Snapshot, p: &PyFrame) -> Option<String> {
    let slots = super::waits::stack_slots(snap, p, None);
    slots
        .into_iter()
        .flatten()
        .find_map(|v| snap.c_callable_name(v))
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
    let function = called_c_function(snap, p)?;
    if SLEEPS.contains(&function.as_str()) {
        return Some(Waiting {
            kind: "sleep",
            object: None,
            type_name: None,
            owner: None,
            frame,
            on: None,
        });
    }
    Some(Waiting {
        kind: "native",
        object: None,
        type_name: None,
        owner: None,
        frame,
        on: Some(WaitsOn::Native {
            function: Some(function),
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
