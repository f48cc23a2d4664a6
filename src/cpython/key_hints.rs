//! Where a dict's str key was found, kept from one read of a live process to the next:
//! `dict_get` otherwise reads every key's string until one matches, and a lookup in
//! `sys.modules` (a few hundred keys, each on its own page) was a sixth of `record`'s time.
//!
//! A hint is only a pointer to compare: a dict holds a reference to each of its keys, so a
//! key found again at the same address in the same dict is the same (immutable) str object,
//! unless that key was deleted, freed, and a new str made at its address was inserted into
//! the same dict meanwhile. A hint that no longer matches costs the full lookup, as before.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Hints kept at most: the few dicts looked up by name at every stop (`sys.modules`, a
/// module's dict), not every dict a heap walk meets.
const MAX_HINTS: usize = 1024;

/// (dict, key name): a lookup.
type Lookup = (u64, Box<str>);

/// Each lookup's key object, by its address.
#[derive(Clone, Default)]
pub struct KeyHints(Arc<Mutex<HashMap<Lookup, u64>>>);

impl KeyHints {
    pub fn get(&self, dict: u64, name: &str) -> Option<u64> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&(dict, Box::from(name))).copied()
    }

    pub fn put(&self, dict: u64, name: &str, key: u64) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() < MAX_HINTS || map.contains_key(&(dict, Box::from(name))) {
            map.insert((dict, Box::from(name)), key);
        }
    }
}

/// Hints never tell two stops apart: what is remembered of a target compares equal whatever
/// its hints.
impl PartialEq for KeyHints {
    fn eq(&self, _: &KeyHints) -> bool {
        true
    }
}

impl Eq for KeyHints {}

impl std::fmt::Debug for KeyHints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map_or(0, |m| m.len());
        write!(f, "KeyHints({n})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_are_shared_by_clones_and_bounded() {
        let h = KeyHints::default();
        let later = h.clone();
        h.put(0x1000, "threading", 0x2000);
        assert_eq!(later.get(0x1000, "threading"), Some(0x2000));
        assert_eq!(later.get(0x1000, "asyncio"), None);
        assert_eq!(later.get(0x1008, "threading"), None);
        for i in 0..2 * MAX_HINTS as u64 {
            h.put(i, "k", i);
        }
        assert_eq!(format!("{h:?}"), format!("KeyHints({MAX_HINTS})"));
        // A hint already kept is still updated.
        h.put(0x1000, "threading", 0x3000);
        assert_eq!(h.get(0x1000, "threading"), Some(0x3000));
    }
}
