//! Errors. A [`ReadError`] is small, `Copy`, carries the address that failed and maps straight
//! onto the report's `errors[]`; [`Error`] is what a whole operation (open a core, find Python)
//! fails with, and is printed as one line by every frontend.

use std::fmt;

/// Why a read of target memory (or a decode of what was read) failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadErrorKind {
    /// No source has bytes for this address (not mapped, not in the core, file missing).
    Unmapped,
    /// A core segment or mapped file that should hold the bytes is shorter than its headers say.
    Truncated,
    /// The operating system refused the read (permission, process gone).
    Os(i32),
    /// A size read from the target is larger than the cap for that kind of object.
    TooLarge(u64),
    /// A value read from the target makes no sense (bad tag, bad kind, bad type).
    Corrupt(&'static str),
    /// A live process changed what was being read, in a way the reader can tell (a frame
    /// whose link was cleared between reading the pointer to it and reading it).
    Torn(&'static str),
    /// A walk met an object it had already visited.
    Cycle,
    /// The debugger's read callback raised.
    Callback,
    /// A walk met one of its caps (a named `MAX_*` constant): `max` of `what`.
    Limit { what: &'static str, max: u64 },
}

/// A failed read at `addr` of `len` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadError {
    pub addr: u64,
    pub len: u64,
    pub kind: ReadErrorKind,
}

impl ReadError {
    pub fn new(addr: u64, len: u64, kind: ReadErrorKind) -> Self {
        ReadError { addr, len, kind }
    }
    pub fn corrupt(addr: u64, what: &'static str) -> Self {
        ReadError::new(addr, 0, ReadErrorKind::Corrupt(what))
    }
    pub fn too_large(addr: u64, size: u64) -> Self {
        ReadError::new(addr, 0, ReadErrorKind::TooLarge(size))
    }
}

impl fmt::Display for ReadErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadErrorKind::Unmapped => write!(f, "memory not available"),
            ReadErrorKind::Truncated => write!(f, "page not in core (file truncated)"),
            ReadErrorKind::Os(e) => write!(f, "{}", std::io::Error::from_raw_os_error(*e)),
            ReadErrorKind::TooLarge(n) => write!(f, "size {n} is over the limit"),
            ReadErrorKind::Corrupt(what) => write!(f, "corrupt {what}"),
            ReadErrorKind::Torn(what) => write!(f, "torn read: {what}"),
            ReadErrorKind::Cycle => write!(f, "cycle"),
            ReadErrorKind::Callback => write!(f, "the debugger could not read it"),
            ReadErrorKind::Limit { what, max } => write!(f, "stopped at the limit of {max} {what}"),
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {:#x}", self.kind, self.addr)
    }
}

impl std::error::Error for ReadError {}

/// An operation that cannot give even a partial result.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be opened or read.
    Io { path: String, err: std::io::Error },
    /// A file is not what it should be (not an ELF core, not an executable).
    BadFile { path: String, why: String },
    /// No CPython was found in the target.
    NoPython(String),
    /// The CPython version is one this build does not know.
    UnsupportedVersion(String),
    /// Bad arguments from a frontend.
    Usage(String),
    /// Target memory needed for the whole operation could not be read.
    Read(ReadError),
    /// A bug: a panic caught at the entry point `entry` (see [`crate::panic`]).
    Panic {
        entry: &'static str,
        location: String,
        message: String,
    },
}

/// What every caught panic's message starts with, in every frontend (the CLI's stderr line,
/// `_pyunwind.Error`, the Python frontend's own bugs): the one marker checkers look for, so
/// that a panic is never taken for a clean one-line error. `_pyunwind.PANIC_MARKER` exports it.
pub const PANIC_MARKER: &str = "internal error";

/// The CLI's exit status for a caught panic: sysexits.h's `EX_SOFTWARE` ("internal software
/// error"), apart from 1 (a clean error) and 2 (bad arguments).
pub const PANIC_EXIT_STATUS: i32 = 70;

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, err } => write!(f, "{path}: {err}"),
            Error::BadFile { path, why } => write!(f, "{path}: {why}"),
            Error::NoPython(why) => write!(f, "no Python interpreter found: {why}"),
            Error::UnsupportedVersion(v) => write!(f, "unsupported Python version {v}"),
            Error::Usage(s) => write!(f, "{s}"),
            Error::Read(e) => write!(f, "cannot read target memory: {e}"),
            Error::Panic {
                entry,
                location,
                message,
            } => write!(f, "{} in {entry} at {location}: {message}", PANIC_MARKER),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// The CLI's exit status for this error: [`PANIC_EXIT_STATUS`] for a caught
    /// panic, 1 for every other.
    pub fn exit_status(&self) -> i32 {
        match self {
            Error::Panic { .. } => PANIC_EXIT_STATUS,
            _ => 1,
        }
    }
}

impl From<ReadError> for Error {
    fn from(e: ReadError) -> Self {
        Error::Read(e)
    }
}

impl Error {
    pub fn io(path: impl Into<String>, err: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            err,
        }
    }
    pub fn bad_file(path: impl Into<String>, why: impl Into<String>) -> Self {
        Error::BadFile {
            path: path.into(),
            why: why.into(),
        }
    }
}
