//! Native names as gdb prints them, from the linkage names of symbol tables and DWARF:
//!
//! - Itanium C++ (`_Z...`) by the `cpp_demangle` crate, with parameters, return types of
//!   templates and clone suffixes: `work::park_caller(int) [clone .localalias]`,
//!   `work::scaled(int) [clone .constprop.0] [clone .cold]` (gdb's minimal symbols, `info
//!   symbol`, and pystack's `__cxa_demangle`);
//! - Rust v0 (`_R...`) and legacy (`_ZN...17h<16 hex digits>E`) by the `rustc-demangle` crate,
//!   in the long form gdb 13 prints (libiberty's): v0 with its crates' disambiguators
//!   (`<pyunwind_names_rs[f4a5d005a5810336]::walk::Leaf as ...>::step`), legacy with its hash
//!   (`pyunwind_names_rs::run::h0d80329a484e7e47`); Rust's own backtraces print the short form
//!   (`{:#}`), pystack shows v0 names raw and reads legacy ones as C++.
//!
//! Anything else (a C name, a name that does not parse, one over the limits below) is shown as
//! it is. Symbol tables are the target's, so untrusted: the name's length is capped before
//! parsing, the parser's and the printer's recursion depths are capped (which bounds the
//! parser's backtracking too), and the printed name's length is capped while it is written, so
//! that a name whose back-references expand exponentially stops at the cap. libFuzzer runs
//! over it (`fuzz/fuzz_targets/demangle.rs`).
//!
//! ```
//! use pyunwind::symbols::demangle::demangle;
//! assert_eq!(demangle("_ZN4c10d7Reducer17finalize_backwardEv").as_deref(),
//!            Some("c10d::Reducer::finalize_backward()"));
//! assert_eq!(demangle("take_gil"), None);
//! ```

use std::fmt::{self, Write};

/// Longest linkage name demangled (bytes); a longer one is shown as it is. libtorch's longest
/// template instances are a few KiB.
const MAX_MANGLED_BYTES: usize = 16 << 10;

/// Longest demangled name (bytes); a name whose printing would pass it is shown mangled.
const MAX_DEMANGLED_BYTES: usize = 64 << 10;

/// cpp_demangle's parser recursion cap; a deeper name does not parse and is shown mangled.
/// Below the crate's default (96): its parser backtracks, so its time can grow exponentially
/// with the depth; a 150-byte name libFuzzer found (`hostile_names_are_bounded`) takes 150 ms
/// at 96 and 30 µs at 64. Of libtorch_cpu.so's 34,010 C++ function symbols, 64 parses all but 2
/// of those 96 parses.
const MAX_CXX_PARSE_DEPTH: u32 = 64;

/// cpp_demangle's printer recursion cap (its default, 128: "will not overflow the stack even
/// in a debug build").
const MAX_CXX_PRINT_DEPTH: u32 = 128;

/// What rustc-demangle writes in place of a part it cannot print; a name holding one is shown
/// mangled.
const RUST_PRINT_ERRORS: &[&str] = &[
    "{invalid syntax}",
    "{recursion limit reached}",
    "{size limit reached}",
];

/// `name` demangled, as gdb prints it; None where it is not a mangled name this reads (a C
/// name), does not parse, or passes a limit.
pub fn demangle(name: &str) -> Option<String> {
    if name.len() > MAX_MANGLED_BYTES {
        return None;
    }
    if name.starts_with("_R") || is_rust_legacy(name) {
        rust(name)
    } else if name.starts_with("_Z") {
        cxx(name)
    } else {
        None
    }
}

/// Whether `name` is a Rust legacy symbol: an Itanium nested name whose last element is
/// rustc's hash, `17h` and 16 hex digits (`_ZN3foo3bar17h0123456789abcdefE`), optionally
/// followed by a `.suffix`. The test libiberty makes before reading it as Rust.
fn is_rust_legacy(name: &str) -> bool {
    // The elements may hold dots themselves (`..` is rustc's `::` in a path element).
    let b = name.as_bytes();
    name.starts_with("_ZN")
        && name.match_indices("17h").any(|(i, _)| {
            let end = i + 19;
            // `_ZN`, one element at least (`1a`), then the hash.
            i >= 5
                && b.get(i + 3..end)
                    .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
                && b.get(end) == Some(&b'E')
                && matches!(b.get(end + 1), None | Some(b'.'))
        })
}

fn rust(name: &str) -> Option<String> {
    let d = rustc_demangle::try_demangle(name).ok()?;
    let mut out = Bounded::default();
    // The long form, gdb's (see the module's docs).
    write!(out, "{d}").ok()?;
    (!RUST_PRINT_ERRORS.iter().any(|e| out.0.contains(e))).then_some(out.0)
}

fn cxx(name: &str) -> Option<String> {
    let parse = cpp_demangle::ParseOptions::default().recursion_limit(MAX_CXX_PARSE_DEPTH);
    let sym = cpp_demangle::Symbol::new_with_options(name.as_bytes(), &parse).ok()?;
    let print = cpp_demangle::DemangleOptions::new().recursion_limit(MAX_CXX_PRINT_DEPTH);
    let mut out = Bounded::default();
    sym.structured_demangle(&mut out, &print).ok()?;
    Some(out.0)
}

/// Most pieces a demangler may write for one name: with [`MAX_DEMANGLED_BYTES`], a bound on
/// the printer's work that empty pieces cannot pass.
const MAX_PRINT_WRITES: usize = 1 << 18;

/// A `String` that refuses to grow past [`MAX_DEMANGLED_BYTES`], or to take more than
/// [`MAX_PRINT_WRITES`] pieces: the demangler's write fails there and it stops printing.
#[derive(Default)]
struct Bounded(String, usize);

impl Write for Bounded {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.1 += 1;
        if self.0.len() + s.len() > MAX_DEMANGLED_BYTES || self.1 > MAX_PRINT_WRITES {
            return Err(fmt::Error);
        }
        self.0.push_str(s);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(name: &str) -> String {
        demangle(name).unwrap_or_else(|| name.to_string())
    }

    #[test]
    fn cxx_names_read_as_gdb_prints_them() {
        // `nm -C` (libiberty, as gdb) of tests/scenarios/native_names.cpp built with g++ -O2.
        for (raw, shown) in [
            (
                "_ZN4c10d7Reducer17finalize_backwardEv",
                "c10d::Reducer::finalize_backward()",
            ),
            (
                "_ZN4work11park_callerEi.localalias",
                "work::park_caller(int) [clone .localalias]",
            ),
            (
                "_ZN4workL6scaledEPFiiEii.constprop.0.cold",
                "work::scaled(int (*)(int), int, int) [clone .constprop.0] [clone .cold]",
            ),
            (
                "_ZN4workL4diveERKNS_3BigEPFiiE.isra.0",
                "work::dive(work::Big const&, int (*)(int)) [clone .isra.0]",
            ),
            (
                "_ZNK4work3BoxIlE5applyEl.isra.0",
                "work::Box<long>::apply(long) const [clone .isra.0]",
            ),
            (
                "_ZZN4work6Runner3runEiENKUliE_clEi.isra.0",
                "work::Runner::run(int)::{lambda(int)#1}::operator()(int) const [clone .isra.0]",
            ),
            (
                "_ZN4work6invokeIZNS_6Runner3runEiEUliE_EEiT_i",
                "int work::invoke<work::Runner::run(int)::{lambda(int)#1}>\
                 (work::Runner::run(int)::{lambda(int)#1}, int)",
            ),
            (
                "_ZN4work3hopIlEET_PFiiES1_",
                "long work::hop<long>(int (*)(int), long)",
            ),
        ] {
            assert_eq!(d(raw), shown, "{raw}");
        }
    }

    #[test]
    fn rust_names_read_as_gdb_prints_them() {
        // gdb 13's `bt` of tests/scenarios/native_names_rs, built v0 and legacy.
        for (raw, shown) in [
            (
                "_RNvXNtCsl0fKmbkRKnO_17pyunwind_names_rs4walkNtB2_4LeafNtB2_4Step4step",
                "<pyunwind_names_rs[f4a5d005a5810336]::walk::Leaf as \
                 pyunwind_names_rs[f4a5d005a5810336]::walk::Step>::step",
            ),
            (
                "_RINvNtCsl0fKmbkRKnO_17pyunwind_names_rs4walk5applyNCNvB4_3run0EB4_",
                "pyunwind_names_rs[f4a5d005a5810336]::walk::apply::\
                 <pyunwind_names_rs[f4a5d005a5810336]::run::{closure#0}>",
            ),
            (
                "_ZN17pyunwind_names_rs3run17h0d80329a484e7e47E",
                "pyunwind_names_rs::run::h0d80329a484e7e47",
            ),
            (
                "_ZN17pyunwind_names_rs4walk16Wrapper$LT$S$GT$7descend17h4ff815612483d840E",
                "pyunwind_names_rs::walk::Wrapper<S>::descend::h4ff815612483d840",
            ),
            (
                "_ZN79_$LT$pyunwind_names_rs..walk..Leaf$u20$as$u20$pyunwind_names_rs..walk..\
                 Step$GT$4step17h76b049c7fc81479cE",
                "<pyunwind_names_rs::walk::Leaf as pyunwind_names_rs::walk::Step>::step\
                 ::h76b049c7fc81479c",
            ),
        ] {
            assert_eq!(d(raw), shown, "{raw}");
        }
        // A C++ nested name without rustc's hash stays C++.
        assert!(!is_rust_legacy("_ZN3foo3barE"));
        assert!(!is_rust_legacy("_ZN3foo17h0123456789abcdefEv"));
        assert!(is_rust_legacy("_ZN3foo17h0123456789abcdefE.llvm.123"));
    }

    #[test]
    fn other_names_stay_as_they_are() {
        for name in [
            "take_gil",
            "__new_sem_wait_slow64.constprop.0",
            "_Z",
            "_R",
            "_ZN",
            "_ZN3foo",
            "_RNv",
            "_Zé",
            "",
        ] {
            assert_eq!(demangle(name), None, "{name:?}");
        }
        let long = format!("_Z{}", "N".repeat(MAX_MANGLED_BYTES));
        assert_eq!(demangle(&long), None);
    }

    /// Names a symbol table could hold to make a demangler recurse without end, expand
    /// back-references exponentially or loop: each gives a bounded name or none, quickly.
    #[test]
    fn hostile_names_are_bounded() {
        let mut names = vec![
            // Nesting past the parser's depth.
            format!("_Z1f{}i{}", "PFv".repeat(4000), "E".repeat(4000)),
            format!("_Z1fI{}i{}Ev", "St6vectorI".repeat(1500), "E".repeat(1500)),
            format!("_RNv{}", "NvNv".repeat(3000)),
            format!("_RINv{}E", "B4_".repeat(3000)),
            // libFuzzer's: the parser backtracks through its nested template arguments.
            "_ZZ1fIStIiiEZ1fgStIStIStIiiES0_IStIiiES0_IStvvvS0_IaltIiiES0_IgStIStIiiES0_IStIiiES0_\
             IS0_IgStIStIiiES0_IStIiiES0_ISttvvvS0_IaledVEPlFc"
                .to_string(),
            // gimli-rs/cpp_demangle#282: valid, 40 levels of templates.
            "_ZN13QConcatenableI14QStringBuilderIS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_\
             IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_\
             IS0_IS0_IS0_IS0_IS0_IS0_I7QStringS1_ES1_ES1_ES1_ES1_ES1_ES1_ES1_ES1_ES1_ES1_ES1_ES1_\
             ES1_ES1_ES1_ES1_ES1_ES1_ES1_ES1_ES1_ES1_ES1_ES1_ES1_ES1_ES1_ES1_ES1_ES1_ES1_ES1_ES1_\
             ES1_ES1_ES1_ES1_ES1_EE8appendToI5QCharEEvRKS15_RPT_"
                .to_string(),
        ];
        // Each template argument repeats the one before it twice (`std::pair<S, S>`, S its
        // back-reference): the printed name doubles at every one, 2^60 bytes unbounded.
        let doubling = |levels: usize| {
            let mut name = String::from("_Z1fISt4pairIiiE");
            for i in 1..levels {
                // S_ is `f`, S0_ `std::pair`, then each argument in turn.
                name.push_str(&format!("S0_I{}{}E", sub(i + 1), sub(i + 1)));
            }
            name + "Evv"
        };
        // Well formed: a few levels print.
        let few = demangle(&doubling(4)).unwrap();
        assert_eq!(
            few,
            "void f<std::pair<int, int>, std::pair<std::pair<int, int>, std::pair<int, int> >, \
             std::pair<std::pair<std::pair<int, int>, std::pair<int, int> >, \
             std::pair<std::pair<int, int>, std::pair<int, int> > >, \
             std::pair<std::pair<std::pair<std::pair<int, int>, std::pair<int, int> >, \
             std::pair<std::pair<int, int>, std::pair<int, int> > >, \
             std::pair<std::pair<std::pair<int, int>, std::pair<int, int> >, \
             std::pair<std::pair<int, int>, std::pair<int, int> > > > >()"
        );
        names.push(doubling(60));
        // The work is bounded by counts, not timed (timings are `make bench`'s): the printer's
        // bytes and pieces here, the parser's depth by MAX_CXX_PARSE_DEPTH, whose time the
        // `demangle` fuzz target holds to its 1 s timeout.
        for name in &names {
            let out = std::thread::Builder::new()
                .stack_size(1 << 20)
                .spawn({
                    let name = name.clone();
                    move || demangle(&name)
                })
                .unwrap()
                .join()
                .expect("demangling panicked");
            assert!(out.is_none_or(|o| o.len() <= MAX_DEMANGLED_BYTES));
        }
        // The doubling name stops at the byte cap, within the pieces' cap.
        let mut out = Bounded::default();
        let parse = cpp_demangle::ParseOptions::default().recursion_limit(MAX_CXX_PARSE_DEPTH);
        let name = doubling(60);
        let sym = cpp_demangle::Symbol::new_with_options(name.as_bytes(), &parse).unwrap();
        let print = cpp_demangle::DemangleOptions::new().recursion_limit(MAX_CXX_PRINT_DEPTH);
        assert!(sym.structured_demangle(&mut out, &print).is_err());
        assert!(out.0.len() <= MAX_DEMANGLED_BYTES && out.0.len() > MAX_DEMANGLED_BYTES / 2);
        assert!(out.1 < MAX_PRINT_WRITES, "{} pieces", out.1);
    }

    /// A printer that writes empty pieces without end stops at the pieces' cap.
    #[test]
    fn empty_pieces_are_bounded() {
        let mut out = Bounded::default();
        let n = (0..).take_while(|_| out.write_str("").is_ok()).count();
        assert_eq!(n, MAX_PRINT_WRITES);
        assert!(out.0.is_empty());
    }

    /// The `i`th substitution's reference (`S_`, `S0_`, ... in base 36).
    fn sub(i: usize) -> String {
        const DIGITS: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
        if i == 0 {
            return "S_".into();
        }
        let mut n = i - 1;
        let mut s = Vec::new();
        loop {
            s.push(DIGITS[n % 36]);
            n /= 36;
            if n == 0 {
                break;
            }
        }
        s.reverse();
        format!("S{}_", String::from_utf8(s).unwrap())
    }
}
