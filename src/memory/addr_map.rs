//! Hash maps keyed by target addresses, with a hasher made for them.
//!
//! std's default SipHash guards against chosen keys at about 20 ns a lookup; the decoders look
//! up pages, types and objects by address millions of times per stop (100,000 asyncio tasks).
//! Addresses are well spread but share their low bits (pages: 12 zero bits; objects: 4), so
//! the key is multiplied by a large odd constant and its high half folded onto its low half,
//! which is where hashbrown takes the bucket index from.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

#[derive(Clone, Copy, Default)]
pub struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        let p = self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        p ^ (p >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        // Not used for u64 keys; kept correct for any other key type.
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ *b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(23) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

pub type AddrMap<V> = HashMap<u64, V, BuildHasherDefault<AddrHasher>>;
pub type AddrSet = HashSet<u64, BuildHasherDefault<AddrHasher>>;

/// Slots of a [`OnceTable`] looked at for one key before it counts as full there.
const MAX_PROBES: usize = 16;

/// A cache of a few hundred entries keyed by address that threads read without writing
/// anything shared: each slot is set once and never changes. A lock, even a read lock, writes
/// its word at every look-up, and two threads looking up the same few types and classes for
/// each of 100,000 tasks then take turns owning that word's cache line. Where it is full
/// around a key, [`OnceTable::insert`] keeps nothing and says so: the caller keeps such
/// entries elsewhere (a map under a lock, as before).
pub struct OnceTable<V> {
    slots: Box<[OnceLock<(u64, V)>]>,
}

impl<V> OnceTable<V> {
    /// A table of `slots` slots (rounded up to a power of two).
    pub fn new(slots: usize) -> Self {
        OnceTable {
            slots: (0..slots.next_power_of_two())
                .map(|_| OnceLock::new())
                .collect(),
        }
    }

    /// The slots a key may be in, in the order they are tried.
    fn probe(&self, key: u64) -> impl Iterator<Item = &OnceLock<(u64, V)>> {
        let mut h = AddrHasher::default();
        h.write_u64(key);
        let mask = self.slots.len() - 1;
        let start = h.finish() as usize;
        (0..MAX_PROBES.min(self.slots.len())).map(move |i| &self.slots[(start + i) & mask])
    }

    pub fn get(&self, key: u64) -> Option<&V> {
        for slot in self.probe(key) {
            match slot.get() {
                Some((k, v)) if *k == key => return Some(v),
                Some(_) => continue,
                // Slots are never emptied: the key would be here or before.
                None => return None,
            }
        }
        None
    }

    /// Keeps `value` for `key` and returns what the table holds for it (a value another
    /// thread put first wins); None when the slots for `key` are all taken.
    pub fn insert(&self, key: u64, value: V) -> Option<&V> {
        let mut pending = (key, value);
        for slot in self.probe(key) {
            match slot.set(pending) {
                Ok(()) => return slot.get().map(|e| &e.1),
                Err(back) => pending = back,
            }
            if let Some((k, v)) = slot.get() {
                if *k == key {
                    return Some(v);
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_once_table_keeps_the_first_value_and_says_when_full() {
        let t: OnceTable<u32> = OnceTable::new(4);
        assert_eq!(t.get(0x1000), None);
        assert_eq!(t.insert(0x1000, 1), Some(&1));
        assert_eq!(t.insert(0x1000, 2), Some(&1));
        assert_eq!(t.get(0x1000), Some(&1));
        for k in 2..5u64 {
            assert_eq!(t.insert(k << 12, k as u32 + 10), Some(&(k as u32 + 10)));
        }
        assert_eq!(t.insert(0x9000, 9), None);
        assert_eq!(t.get(0x9000), None);
        for k in 2..5u64 {
            assert_eq!(t.get(k << 12), Some(&(k as u32 + 10)));
        }
    }

    #[test]
    fn pages_spread_over_buckets() {
        let mut low = HashSet::new();
        for page in 0..1024u64 {
            let mut h = AddrHasher::default();
            h.write_u64(0x7f00_0000_0000 + page * 4096);
            low.insert(h.finish() & 1023);
        }
        assert!(low.len() > 600, "{}", low.len());
    }
}
