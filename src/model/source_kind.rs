//! Where a report's bytes come from (`python.source`, docs/report.md).

use serde::{Deserialize, Serialize};

/// Where the bytes come from: reported as `python.source`, and used by frontends and the
/// `why` rules to tell what a source can show (/proc is there only live).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// A running process, read through `process_vm_readv` (and /proc).
    Live,
    /// An ELF core file.
    Core,
    /// A debugger's read callback (gdb's or lldb's inferior, which may be remote).
    Debugger,
}

impl SourceKind {
    /// Its name, in the JSON and in the text.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Live => "live",
            SourceKind::Core => "core",
            SourceKind::Debugger => "debugger",
        }
    }
}

impl std::fmt::Display for SourceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::SourceKind;
    use crate::model::test_words::round_trip;

    #[test]
    fn source_kinds_are_their_words() {
        let words = [
            (SourceKind::Live, "live"),
            (SourceKind::Core, "core"),
            (SourceKind::Debugger, "debugger"),
        ];
        round_trip(&words);
        for (k, word) in words {
            assert_eq!(k.to_string(), word);
        }
    }
}
