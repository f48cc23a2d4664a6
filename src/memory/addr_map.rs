//! Hash maps keyed by target addresses, with a hasher made for them.
//!
//! std's default SipHash guards against chosen keys at about 20 ns a lookup; the decoders look
//! up pages, types and objects by address millions of times per stop (100,000 asyncio tasks).
//! Addresses are well spread but share their low bits (pages: 12 zero bits; objects: 4), so
//! the key is multiplied by a large odd constant and its high half folded onto its low half,
//! which is where hashbrown takes the bucket index from.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

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

#[cfg(test)]
mod tests {
    use super::*;

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
