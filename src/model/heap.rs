//! The `--heap` part of the report (docs/report.md, "The heap").

use serde::{Deserialize, Serialize};

use super::HeapRetainer;

/// `--heap` (docs/report.md, "The heap"): sizes are `sys.getsizeof`'s.
#[derive(Clone, Debug, Serialize)]
pub struct HeapReport {
    /// Every type seen, the most bytes first.
    pub types: Vec<HeapType>,
    /// The largest objects, the largest first (`--heap-top`, 20 by default).
    pub largest: Vec<HeapObject>,
    /// The objects that keep the most alive, the most first (`--heap-top`).
    pub retainers: Vec<HeapRetainer>,
    pub objects: u64,
    pub bytes: u64,
    pub unreached: HeapUnreached,
    /// False when the walk stopped early (a budget, a cut GC list): a lower bound.
    pub complete: bool,
    /// The process's own size, beside the census; null where the source cannot say (a
    /// debugger's memory).
    pub process: Option<HeapProcess>,
}

/// The process's own size (docs/report.md, "The process beside the census").
#[derive(Clone, Debug, Serialize)]
pub struct HeapProcess {
    /// Live: `Rss` of `/proc/PID/smaps_rollup`; from a core: the bytes of its written
    /// anonymous segments (writable, mapping no file).
    pub rss: Option<u64>,
    /// Live: `Pss` of `/proc/PID/smaps_rollup`; null from a core.
    pub pss: Option<u64>,
    /// `smaps_rollup` or `core`.
    pub source: SizeSource,
}

/// Where [`HeapProcess`]'s sizes come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SizeSource {
    /// A live process's `/proc/PID/smaps_rollup`: `rss` and `pss`.
    SmapsRollup,
    /// A core's written anonymous segments: `rss` only.
    Core,
}

#[derive(Clone, Debug, Serialize)]
pub struct HeapType {
    #[serde(rename = "type")]
    pub type_name: String,
    pub count: u64,
    pub bytes: u64,
    /// For types whose objects keep memory `sys.getsizeof` leaves out (torch tensors): the
    /// bytes they keep on the CPU, each shared storage once; null where they could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_bytes: Option<Option<u64>>,
    /// The same on CUDA devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_bytes: Option<Option<u64>>,
}

#[derive(Clone, Debug, Serialize)]
pub struct HeapObject {
    pub address: u64,
    #[serde(rename = "type")]
    pub type_name: String,
    pub bytes: u64,
    /// `len(o)` for str, bytes, list, tuple, dict, set and deque; null otherwise.
    pub len: Option<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct HeapCount {
    #[serde(rename = "type")]
    pub type_name: String,
    pub count: u64,
}

/// What the walk could not count.
#[derive(Clone, Debug, Serialize)]
pub struct HeapUnreached {
    /// Objects whose referents are not all read, by type (frames, generators...): objects
    /// that only they refer to are not counted.
    pub unwalked: Vec<HeapCount>,
    /// Referents that could not be read as objects.
    pub unreadable: u64,
    /// The same by the type of the object that referred to them (`<roots>`: a GC list or a
    /// frame's locals), most first.
    pub unreadable_by: Vec<HeapCount>,
}

#[cfg(test)]
mod tests {
    use super::SizeSource;
    use crate::model::test_words::round_trip;

    #[test]
    fn size_sources_are_their_words() {
        round_trip(&[
            (SizeSource::SmapsRollup, "smaps_rollup"),
            (SizeSource::Core, "core"),
        ]);
    }
}
