//! Demangled native names, as gdb and pystack print them: Itanium C++ (`_Z...`) by the
//! `cpp_demangle` crate, with parameters and clone suffixes
//! (`work::park_caller(int) [clone .localalias]`). Anything else is returned as it is.

/// Longest mangled name demangled: a symbol table is the target's (untrusted), and demangling
/// costs grow with the name; longer names are shown mangled.
const MAX_MANGLED_BYTES: usize = 4096;

/// `name` demangled where it is an Itanium C++ name that parses, else `name` itself.
pub fn demangle(name: &str) -> String {
    if !name.starts_with("_Z") || name.len() > MAX_MANGLED_BYTES {
        return name.to_string();
    }
    cpp_demangle::Symbol::new(name)
        .ok()
        .and_then(|s| s.demangle().ok())
        .unwrap_or_else(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn cxx_names_read_as_gdb_prints_them() {
        assert_eq!(
            demangle("_ZN4c10d7Reducer17finalize_backwardEv"),
            "c10d::Reducer::finalize_backward()"
        );
        assert_eq!(
            demangle("_ZN4work11park_callerEi.localalias"),
            "work::park_caller(int) [clone .localalias]"
        );
        assert_eq!(demangle("take_gil"), "take_gil");
        assert_eq!(demangle("_Z"), "_Z");
        assert_eq!(
            demangle(&format!("_Z{}", "N".repeat(10_000))),
            format!("_Z{}", "N".repeat(10_000))
        );
    }
}
