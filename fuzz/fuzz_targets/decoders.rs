//! libFuzzer target: pyunwind's decoders over a mutated memory image (see `src/lib.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pyunwind_fuzz::run_decoders(data);
});
