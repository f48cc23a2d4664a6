//! libFuzzer target: the native unwinder's reading of a module's ELF file (CFI through
//! `.eh_frame_hdr`, `.debug_frame`, symbol tables) over a mutated file (see `src/lib.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pyunwind_fuzz::run_elf(data);
});
