//! `names_rs_entry(cb, n)` calls down through a module, a generic function called with a
//! closure, a generic struct's method and a trait method to `cb`, a C callback (Python's, by
//! ctypes): Rust's names between Python frames. Each call's result goes through `black_box`,
//! so that none is a tail call. Used by tests/scenarios/native_names.py.

use std::hint::black_box;

pub type Callback = extern "C" fn(i32) -> i32;

pub mod walk {
    use super::{black_box, Callback};

    pub trait Step {
        fn step(&self, n: i32) -> i32;
    }

    pub struct Leaf {
        pub cb: Callback,
    }

    impl Step for Leaf {
        #[inline(never)]
        fn step(&self, n: i32) -> i32 {
            black_box((self.cb)(black_box(n)))
        }
    }

    pub struct Wrapper<S> {
        pub inner: S,
        pub depth: i32,
    }

    impl<S: Step> Wrapper<S> {
        #[inline(never)]
        pub fn descend(&self, n: i32) -> i32 {
            black_box(self.inner.step(black_box(n + self.depth)))
        }
    }

    #[inline(never)]
    pub fn apply<F: Fn(i32) -> i32>(f: F, n: i32) -> i32 {
        black_box(f(black_box(n)))
    }
}

#[inline(never)]
fn run(cb: Callback, n: i32) -> i32 {
    let w = walk::Wrapper {
        inner: walk::Leaf { cb },
        depth: 1,
    };
    let r = walk::apply(
        #[inline(never)]
        |k| black_box(w.descend(k)),
        n,
    );
    black_box(r)
}

/// Calls `cb` from the innermost of the crate's functions and returns what it returns, plus
/// nothing: the frames are the point.
#[no_mangle]
pub extern "C" fn names_rs_entry(cb: Callback, n: i32) -> i32 {
    black_box(run(cb, black_box(n)))
}
