//! The memory "limit" baseline: what a structure of a given size could reach if every packet cost
//! exactly one random counter increment in it.
//!
//! Per batch of 32 keys: compute every key's index, prefetch the counter each one maps to, then
//! increment them. This is the batching-plus-prefetching pattern the Agg-Evict testbed gets from
//! DPDK (section 4.1), with no algorithmic work at all, so an algorithm's throughput divided by
//! the limit of its own memory size says how much of what the memory system allows the
//! algorithm achieves.
//!
//! The index costs what the algorithms it is compared with pay at the least, so the limit is a
//! floor of their per-packet cost and never flatters them: 4-byte keys come as a `u32` slice
//! (4 bytes a packet, as the lab hands them to the algorithms' `update_batch_u32`) and take one
//! multiply-add and one shift (Count-Min's u32 row index, `key::Affine`); wider keys come as
//! `FlowKey`s and take one xxh3 (`key::HashFn`), which every algorithm pays for them.

use std::hint::black_box;

use key::prefetch_at as prefetch;
use key::{Affine, FlowKey, HashFn};

/// Keys per batch (the artifact's MAX_RX_BURST).
pub const LIMIT_BATCH: usize = 32;

/// A counter array of about `memory_bytes` bytes (at least one 32-bit counter).
pub struct LimitLoop {
    counters: Vec<u32>,
    hash: HashFn,
    /// The u32 keys' index map, and the shift that takes its top bits when the array's length
    /// is a power of two (else `key::reduce`, one more multiply).
    affine: Affine,
    shift: Option<u32>,
}

impl LimitLoop {
    pub fn new(memory_bytes: usize, seed: u64) -> LimitLoop {
        let len = (memory_bytes / 4).max(1);
        let hash = HashFn::new(seed);
        LimitLoop {
            counters: vec![0; len],
            affine: hash.affine(0),
            shift: (len.is_power_of_two() && len > 1).then(|| 64 - len.trailing_zeros()),
            hash,
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

    /// One increment per 4-byte key, indexed as Count-Min's u32 path indexes a row.
    pub fn increment_u32(&mut self, keys: &[u32]) {
        let n = self.counters.len();
        let mut idx = [0usize; LIMIT_BATCH];
        for b in keys.chunks(LIMIT_BATCH) {
            for (slot, &k) in idx.iter_mut().zip(b) {
                let v = self.affine.apply(u64::from(k));
                *slot = match self.shift {
                    Some(s) => (v >> s) as usize,
                    None => key::reduce(v, n),
                };
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

    #[test]
    fn u32_keys_increment_one_counter_each_in_range() {
        let keys: Vec<u32> = (0..5000u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        // A power-of-two array (shift) and another size (reduce).
        for bytes in [1 << 16, 3000 * 4] {
            let mut l = LimitLoop::new(bytes, 3);
            l.increment_u32(&keys);
            assert_eq!(l.total(), 5000);
            // Spread over the array as random indices would be (m (1 - e^(-n/m)) counters
            // used), not piled on a few.
            let used = l.counters.iter().filter(|&&c| c > 0).count() as f64;
            let m = l.len() as f64;
            let expected = m * (1.0 - (-5000.0 / m).exp());
            assert!(used > 0.95 * expected, "{used} of {m}, expected {expected}");
            l.increment_u32(&keys[..10]);
            l.increment_u32(&keys[..10]);
            assert_eq!(l.total(), 5020);
        }
    }
}
