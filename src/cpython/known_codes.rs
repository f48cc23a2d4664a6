//! Code objects decoded at earlier reads of a live process, kept for the next: decoding one
//! reads its type, names, file name, line table and local names, each on its own page, and a
//! sampler meets the same few code objects at every sample (a sixth of `record`'s time).
//!
//! A code object is immutable in every field the decode uses, but it may be freed and another
//! made at its address. A kept decode is used again only where the code object's own fields
//! that the decode used (its type, and the pointers and counts of `layout::CodeObject`; `Snapshot::fingerprint`) read the
//! same now: a new code object at that address would have to point at the same name, file
//! name and line table objects, which the old one held references to until it was freed.

use std::sync::{Arc, Mutex};

use super::values::Code;
use crate::memory::addr_map::AddrMap;

/// Code objects kept at most: a program's running code, not every one a heap walk meets.
const MAX_KNOWN: usize = 4096;

/// What a code object's own fields read: the decode is good while they read the same.
pub(super) type Fingerprint = Vec<u64>;

/// A decode and the fields it was made from.
type Known = (Fingerprint, Arc<Code>);

/// Decoded code objects by address.
#[derive(Clone, Default)]
pub struct KnownCodes(Arc<Mutex<AddrMap<Known>>>);

impl KnownCodes {
    pub(super) fn get(&self, addr: u64, now: &Fingerprint) -> Option<Arc<Code>> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&addr)
            .filter(|(was, _)| was == now)
            .map(|(_, code)| code.clone())
    }

    pub(super) fn put(&self, addr: u64, fingerprint: Fingerprint, code: Arc<Code>) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MAX_KNOWN && !map.contains_key(&addr) {
            // Full of code objects that may be long gone: start again.
            map.clear();
        }
        map.insert(addr, (fingerprint, code));
    }
}

/// Kept codes never tell two stops apart (as [`super::KeyHints`]).
impl PartialEq for KnownCodes {
    fn eq(&self, _: &KnownCodes) -> bool {
        true
    }
}

impl Eq for KnownCodes {}

impl std::fmt::Debug for KnownCodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map_or(0, |m| m.len());
        write!(f, "KnownCodes({n})")
    }
}
