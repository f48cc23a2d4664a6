//! `heap.retainers` (docs/report.md, "Who holds the memory"): the objects that keep the most
//! alive, and the path from a root that holds each, as JSON writes them.

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

#[derive(Clone, Debug, Serialize)]
pub struct HeapRetainer {
    pub address: u64,
    #[serde(rename = "type")]
    pub type_name: String,
    pub len: Option<u64>,
    /// Its own `sys.getsizeof`.
    pub bytes: u64,
    /// Its own and that of everything reachable only through it.
    pub retained: u64,
    /// The shortest path of steps from a root; null when longer than 64 steps.
    pub held_by: Option<Vec<HeldStep>>,
}

/// One step of `held_by`, a one-key object in JSON (`{"attr": "items"}`), but `local`, which
/// names its function and thread beside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeldStep {
    Module(String),
    Attr(String),
    Key(String),
    Index(u64),
    Closure(String),
    Local {
        name: String,
        function: String,
        thread: Option<u64>,
        /// For the text only: the JSON names the thread by its id.
        thread_name: Option<String>,
    },
    Via(String),
}

impl Serialize for HeldStep {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        match self {
            HeldStep::Module(v) => m.serialize_entry("module", v)?,
            HeldStep::Attr(v) => m.serialize_entry("attr", v)?,
            HeldStep::Key(v) => m.serialize_entry("key", v)?,
            HeldStep::Index(v) => m.serialize_entry("index", v)?,
            HeldStep::Closure(v) => m.serialize_entry("closure", v)?,
            HeldStep::Via(v) => m.serialize_entry("via", v)?,
            HeldStep::Local {
                name,
                function,
                thread,
                ..
            } => {
                m.serialize_entry("local", name)?;
                m.serialize_entry("function", function)?;
                m.serialize_entry("thread", thread)?;
            }
        }
        m.end()
    }
}
