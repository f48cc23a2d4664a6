//! CPython's data structures: version, layout, objects, code, frames, threads.

pub mod budget;
pub mod callable_kinds;
pub mod callables;
pub mod code;
pub mod debug_offsets;
mod dicts;
pub mod discovery;
pub mod frames;
pub mod gc;
pub mod heap;
pub mod interpreters;
mod key_hints;
mod known_codes;
pub mod layout;
pub mod mimalloc;
pub mod numpy;
pub mod numpy_float;
pub mod numpy_scalars;
pub mod objects;
pub mod proxy_repr;
pub mod refcount;
pub mod snapshot;
pub mod sockets;
pub mod threads;
pub mod torch;
pub mod values;
pub mod version;

pub use discovery::{find_python, find_python_again, Found, Remembered};
pub use frames::{FrameItem, FrameWalk, Local, StackRef};
pub use key_hints::KeyHints;
pub use known_codes::KnownCodes;
pub use layout::Layout;
pub use snapshot::Snapshot;
pub use threads::ThreadInfo;
pub use values::PyFrame;
pub use version::Version;
