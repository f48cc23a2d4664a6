//! The one type every layer reports partial failures in.

use serde::Serialize;

use crate::error::ReadError;

/// A problem met on the way: what could not be read or decided, and where (the target address
/// it concerns; 0 where none does, as a core's notes or /proc). The one type every layer
/// reports partial failures in; a decoder's [`ReadError`] becomes one at its boundary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ErrorReport {
    pub address: u64,
    pub what: String,
}

impl ErrorReport {
    pub fn new(address: u64, what: impl Into<String>) -> Self {
        ErrorReport {
            address,
            what: what.into(),
        }
    }

    /// A problem at no target address.
    pub fn note(what: impl Into<String>) -> Self {
        ErrorReport::new(0, what)
    }

    /// A read error, `context` (what was being read) before it.
    pub fn read(e: &ReadError, context: &str) -> Self {
        ErrorReport::new(e.addr, format!("{context}: {e}"))
    }
}

impl From<&ReadError> for ErrorReport {
    fn from(e: &ReadError) -> Self {
        ErrorReport::new(e.addr, e.to_string())
    }
}
