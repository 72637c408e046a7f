//! The memory "limit" baseline: what a structure of a given size could reach if every packet cost
//! exactly one random counter increment in it.
//!
//! Per batch of 32 keys: hash every key (one `key::HashFn` evaluation, the least any hashed
//! structure pays), prefetch the counter each one maps to, then increment them. This is the
//! batching-plus-prefetching pattern the Agg-Evict testbed gets from DPDK (section 4.1), with no
//! algorithmic work at all, so an algorithm's throughput divided by the limit of its own memory
//! size says how much of what the memory system allows the algorithm achieves.

use std::hint::black_box;

use key::prefetch_at as prefetch;
use key::{FlowKey, HashFn};

/// Keys per batch (the artifact's MAX_RX_BURST).
pub const LIMIT_BATCH: usize = 32;

/// A counter array of about `memory_bytes` bytes (at least one 32-bit counter).
pub struct LimitLoop {
    counters: Vec<u32>,
    hash: HashFn,
}

impl LimitLoop {
    pub fn new(memory_bytes: usize, seed: u64) -> LimitLoop {
        LimitLoop {
            counters: vec![0; (memory_bytes / 4).max(1)],
            hash: HashFn::new(seed),
        }
    }

    pub fn len(&self) -> usize {
        self.counters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.counters.is_empty()
    }

    /// One increment per key (the timed work).
    pub fn increment(&mut self, keys: &[FlowKey]) {
        let n = self.counters.len();
        let mut idx = [0usize; LIMIT_BATCH];
        for b in keys.chunks(LIMIT_BATCH) {
            for (slot, k) in idx.iter_mut().zip(b) {
                *slot = key::reduce(self.hash.hash(k), n);
                prefetch(&self.counters, *slot);
            }
            for &i in &idx[..b.len()] {
                if let Some(c) = self.counters.get_mut(i) {
                    *c = c.wrapping_add(1);
                }
            }
        }
        black_box(&self.counters);
    }

    /// Sum of all counters: the keys counted since the last reset. Computed from the counters
    /// themselves, so a caller that uses it keeps the increments from being optimised away.
    pub fn total(&self) -> u64 {
        self.counters.iter().map(|&c| c as u64).sum()
    }

    pub fn reset(&mut self) {
        self.counters.fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_increments_exactly_one_counter() {
        let keys: Vec<FlowKey> = (0..1000u32).map(|i| FlowKey::from_u32(i % 37)).collect();
        let mut l = LimitLoop::new(4096, 7);
        assert_eq!(l.len(), 1024);
        // The result is computed from the counters: if the increments were optimised away it
        // would be 0, and it accumulates across runs until reset.
        l.increment(&keys);
        assert_eq!(l.total(), 1000);
        l.increment(&keys[..33]);
        assert_eq!(l.total(), 1033);
        l.reset();
        l.increment(&[]);
        assert_eq!(l.total(), 0);
        // The same key always hits the same counter: 37 distinct keys touch at most 37 counters.
        l.increment(&keys);
        assert!(l.counters.iter().filter(|&&c| c > 0).count() <= 37);
        assert_eq!(LimitLoop::new(0, 1).len(), 1);
    }
}
