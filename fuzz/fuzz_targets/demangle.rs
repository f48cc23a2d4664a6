//! libFuzzer over linkage names, as a target's symbol tables and DWARF hold them (untrusted):
//! `demangle` must return, quickly and without a panic, a name within its caps or none.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(name) = std::str::from_utf8(data) {
        let _ = pyunwind::symbols::demangle::demangle(name);
    }
});
