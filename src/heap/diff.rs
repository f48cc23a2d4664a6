//! `pyunwind diff OLD.json NEW.json`: what grew between two saved `--heap --json` reports
//! (docs/report.md, "What grows"): each type's change, and the retainers whose length or
//! retained size grew, matched by address and type, else by their path from a root. Its text
//! is [`crate::report::heap_diff`]'s.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The part of a saved report the diff reads.
#[derive(Deserialize)]
pub struct Saved {
    pub heap: Option<SavedHeap>,
}

#[derive(Deserialize)]
pub struct SavedHeap {
    types: Vec<SavedType>,
    /// Reports saved before retainers existed have none.
    #[serde(default)]
    retainers: Vec<SavedRetainer>,
}

#[derive(Deserialize)]
struct SavedType {
    #[serde(rename = "type")]
    type_name: String,
    count: u64,
    bytes: u64,
    /// As `heap.types` has them: absent for a type that keeps no memory beside its objects,
    /// null where it could not be read.
    #[serde(default, deserialize_with = "present")]
    data_bytes: Option<Option<u64>>,
    #[serde(default, deserialize_with = "present")]
    device_bytes: Option<Option<u64>>,
}

/// A field that is there, null or not (`default` makes an absent one `None`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<u64>>, D::Error> {
    Option::<u64>::deserialize(d).map(Some)
}

#[derive(Deserialize)]
struct SavedRetainer {
    address: u64,
    #[serde(rename = "type")]
    type_name: String,
    len: Option<u64>,
    bytes: u64,
    retained: u64,
    held_by: Option<Value>,
}

#[derive(Serialize)]
pub struct HeapDiffReport {
    pub heap_diff: HeapDiff,
}

#[derive(Serialize)]
pub struct HeapDiff {
    /// Every type of either report, the most bytes gained first.
    pub types: Vec<TypeDelta>,
    /// The retainers of the new report that grew, the most retained bytes gained first.
    pub grown: Vec<Grown>,
}

#[derive(Serialize)]
pub struct TypeDelta {
    #[serde(rename = "type")]
    pub type_name: String,
    pub count: u64,
    pub bytes: u64,
    pub count_delta: i64,
    pub bytes_delta: i64,
    /// For types with `data_bytes` in either report (torch tensors): the new report's, and
    /// the change (null where either side could not be read; a side without it counts 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_bytes: Option<Option<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_bytes_delta: Option<Option<i64>>,
    /// The same for `device_bytes` (CUDA).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_bytes: Option<Option<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_bytes_delta: Option<Option<i64>>,
}

impl TypeDelta {
    /// What the type's memory grew by, all of it that is known: its objects' bytes and the
    /// bytes they keep beside them. Types are sorted by it, so that a leak of tensors, whose
    /// objects are small and whose storages are not, comes first.
    pub fn grew_by(&self) -> i64 {
        let known = |d: Option<Option<i64>>| d.flatten().unwrap_or(0);
        self.bytes_delta
            .saturating_add(known(self.data_bytes_delta))
            .saturating_add(known(self.device_bytes_delta))
    }
}

/// A kept-memory field's value in the new report and its change from the old one's; `None`
/// when neither report has the field for the type.
type Kept = (Option<Option<u64>>, Option<Option<i64>>);

fn kept_delta(new: Option<Option<u64>>, old: Option<Option<u64>>) -> Kept {
    if new.is_none() && old.is_none() {
        return (None, None);
    }
    let d = match (new, old) {
        (Some(None), _) | (_, Some(None)) => None,
        (n, o) => Some(delta(n.flatten().unwrap_or(0), o.flatten().unwrap_or(0))),
    };
    (Some(new.unwrap_or(Some(0))), Some(d))
}

#[derive(Serialize)]
pub struct Grown {
    pub address: u64,
    #[serde(rename = "type")]
    pub type_name: String,
    pub len_before: Option<u64>,
    pub len: Option<u64>,
    pub bytes_before: u64,
    pub bytes: u64,
    pub retained_before: u64,
    pub retained: u64,
    pub held_by: Option<Value>,
}

/// `new - old`, saturated.
pub fn delta(new: u64, old: u64) -> i64 {
    (new as i128 - old as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// The diff of `old` and `new`.
pub fn diff(old: &SavedHeap, new: &SavedHeap) -> HeapDiff {
    // By name: a report of a big program has thousands of types.
    let old_types: HashMap<&str, &SavedType> = old
        .types
        .iter()
        .map(|t| (t.type_name.as_str(), t))
        .collect();
    let new_types: HashSet<&str> = new.types.iter().map(|t| t.type_name.as_str()).collect();
    let mut types: Vec<TypeDelta> = new
        .types
        .iter()
        .map(|t| {
            let before = old_types.get(t.type_name.as_str());
            let (data_bytes, data_bytes_delta) =
                kept_delta(t.data_bytes, before.and_then(|o| o.data_bytes));
            let (device_bytes, device_bytes_delta) =
                kept_delta(t.device_bytes, before.and_then(|o| o.device_bytes));
            TypeDelta {
                type_name: t.type_name.clone(),
                count: t.count,
                bytes: t.bytes,
                count_delta: delta(t.count, before.map_or(0, |o| o.count)),
                bytes_delta: delta(t.bytes, before.map_or(0, |o| o.bytes)),
                data_bytes,
                data_bytes_delta,
                device_bytes,
                device_bytes_delta,
            }
        })
        .collect();
    types.extend(
        old.types
            .iter()
            .filter(|o| !new_types.contains(o.type_name.as_str()))
            .map(|o| {
                let (data_bytes, data_bytes_delta) = kept_delta(None, o.data_bytes);
                let (device_bytes, device_bytes_delta) = kept_delta(None, o.device_bytes);
                TypeDelta {
                    type_name: o.type_name.clone(),
                    count: 0,
                    bytes: 0,
                    count_delta: delta(0, o.count),
                    bytes_delta: delta(0, o.bytes),
                    data_bytes,
                    data_bytes_delta,
                    device_bytes,
                    device_bytes_delta,
                }
            }),
    );
    types.sort_by(|a, b| {
        b.grew_by()
            .cmp(&a.grew_by())
            .then(a.type_name.cmp(&b.type_name))
    });
    let by_address: HashMap<(u64, &str), &SavedRetainer> = old
        .retainers
        .iter()
        .map(|o| ((o.address, o.type_name.as_str()), o))
        .collect();
    let by_path: HashMap<(&str, String), &SavedRetainer> = old
        .retainers
        .iter()
        .filter_map(|o| Some(((o.type_name.as_str(), path_key(&o.held_by)?), o)))
        .collect();
    let mut grown: Vec<Grown> = new
        .retainers
        .iter()
        .filter_map(|r| {
            // The same address and type, else the same path (a restarted process).
            let o = by_address
                .get(&(r.address, r.type_name.as_str()))
                .or_else(|| by_path.get(&(r.type_name.as_str(), path_key(&r.held_by)?)))?;
            let longer = r.len.zip(o.len).is_some_and(|(n, b)| n > b);
            (longer || r.retained > o.retained).then(|| Grown {
                address: r.address,
                type_name: r.type_name.clone(),
                len_before: o.len,
                len: r.len,
                bytes_before: o.bytes,
                bytes: r.bytes,
                retained_before: o.retained,
                retained: r.retained,
                held_by: r.held_by.clone(),
            })
        })
        .collect();
    grown.sort_by(|a, b| {
        delta(b.retained, b.retained_before)
            .cmp(&delta(a.retained, a.retained_before))
            .then(a.address.cmp(&b.address))
    });
    HeapDiff { types, grown }
}

/// A path as a map key; None for no path.
fn path_key(held_by: &Option<Value>) -> Option<String> {
    held_by
        .as_ref()
        .filter(|p| !p.is_null())
        .map(|p| p.to_string())
}
