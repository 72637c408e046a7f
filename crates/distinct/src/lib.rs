//! Distinct counters and the per-source Bloom-filter superspreader.
//!
//! | name              | struct           | task                  | merge                 |
//! |-------------------|------------------|-----------------------|-----------------------|
//! | `fm`              | [`Fm`]           | cardinality           | OR (bit-exact)        |
//! | `linear_counting` | [`LinearCounting`] | cardinality         | OR (bit-exact)        |
//! | `hyperloglog`     | [`HyperLogLog`]  | cardinality           | max (bit-exact)       |
//! | `kmin`            | [`KMin`]         | cardinality           | union, keep k (exact) |
//! | `bloom_spreader`  | [`BloomSpreader`] | superspreaders / ddos | OR + re-estimate (approximate) |
//!
//! The four counters are *idempotent* (ALGORITHMS.md section 0, class B): the weight is ignored,
//! repeats are no-ops and any order gives the same state, so Agg-Evict in front of them changes
//! nothing and the merge of per-core or per-host states equals the state of the union stream.
//! The Bloom-filter superspreader is order-dependent (class C): which destination is a Bloom
//! false positive depends on arrival order.
//!
//! Every structure hashes a key once with the seeded, portable [`key::HashFn`] and derives
//! everything else from that one 64-bit value; the module docs say how and why.

#![forbid(unsafe_code)]

pub mod bloom_spreader;
pub mod fm;
pub mod hyperloglog;
pub mod kmin;
pub mod linear_counting;

pub use bloom_spreader::{BloomSpreader, BloomSpreaderConfig};
pub use fm::{Fm, FmConfig};
pub use hyperloglog::{HyperLogLog, HyperLogLogConfig};
pub use kmin::{KMin, KMinConfig};
pub use linear_counting::{LinearCounting, LinearCountingConfig};

/// What differs between the cardinality-only counters (fm, linear_counting, hyperloglog, kmin)
/// beyond their inherent `insert_hash(h)`, `estimate()` and, where they prefetch,
/// `insert_batch(keys)`; [`counter_algorithm!`] writes their `Algorithm` verbs once from these.
/// All four are idempotent: the weight is ignored.
pub(crate) trait Counter {
    /// Back to the empty state.
    fn clear(&mut self);
    /// Bytes of state.
    fn state_bytes(&self) -> usize;
    /// Add `o`'s state (same configuration and hash, checked by the caller): the state of the
    /// union of both streams.
    fn union(&mut self, o: &Self);
    /// Why the estimate may be wrong (`Algorithm::caveats`): a saturated bitmap.
    fn caveats(&self) -> Vec<algo::Caveat> {
        Vec::new()
    }
}

/// `impl Algorithm` for a [`Counter`] with fields `cfg` and `hash`: it answers cardinality only;
/// `batched` routes batches through its prefetching `insert_batch`, else key by key.
#[macro_export]
#[doc(hidden)]
macro_rules! counter_algorithm {
    ($t:ty $(, $batched:ident)?) => {
        impl algo::Algorithm for $t {
            fn name(&self) -> &'static str {
                NAME
            }

            fn tasks(&self) -> &'static [algo::Task] {
                TASKS
            }

            #[inline]
            fn update(&mut self, key: &key::FlowKey, _weight: u64) {
                let h = self.hash.hash(key);
                self.insert_hash(h);
            }

            $crate::counter_algorithm!(@batch $($batched)?);

            fn update_batch_u32(&mut self, keys: &[u32], _weights: &[u64]) {
                $crate::counter_algorithm!(@u32 self keys $($batched)?);
            }

            fn reset(&mut self) {
                $crate::Counter::clear(self);
            }

            fn memory_bytes(&self) -> usize {
                $crate::Counter::state_bytes(self)
            }

            fn cardinality(&self) -> Option<f64> {
                Some(self.estimate())
            }

            fn caveats(
                &self,
                _task: algo::Task,
                _threshold: Option<u64>,
                _total: u64,
            ) -> Vec<algo::Caveat> {
                $crate::Counter::caveats(self)
            }

            fn merge(&mut self, other: &dyn algo::Algorithm) -> Result<(), algo::MergeError> {
                let o = algo::merge_peer(self, other, |o| o.cfg == self.cfg && o.hash == self.hash)?;
                $crate::Counter::union(self, o);
                Ok(())
            }
        }
    };
    (@batch batched) => {
        fn update_batch(&mut self, keys: &[key::FlowKey], _weights: &[u64]) {
            self.insert_batch(keys);
        }
    };
    (@batch) => {};
    (@u32 $s:ident $keys:ident batched) => {
        $s.insert_batch($keys)
    };
    (@u32 $s:ident $keys:ident) => {
        for k in $keys {
            $s.insert_hash(key::HashInput::hash_by(k, &$s.hash));
        }
    };
}

/// Keys hashed per block in the batched update paths: enough to hide a DRAM miss behind the
/// prefetches of the following keys, small enough to stay on the stack.
pub(crate) const BATCH_BLOCK: usize = 16;

pub(crate) use key::prefetch;

/// `(x * n) >> 32`: maps a 32-bit hash uniformly onto `0..n` for `n <= 2^32` (Lemire), the
/// 32-bit twin of [`key::reduce`] used where two 32-bit halves of one hash are needed.
#[inline(always)]
pub(crate) fn reduce32(x: u32, n: usize) -> usize {
    ((x as u64 * n as u64) >> 32) as usize
}

/// Linear-counting estimate `-m ln(zeros/m)` of the number of distinct items thrown into `m`
/// cells (Whang et al. 1990); `zeros` must be > 0.
#[inline]
pub(crate) fn linear_count(m: f64, zeros: f64) -> f64 {
    m * (m / zeros).ln()
}

#[cfg(test)]
pub(crate) mod testutil;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduce32_stays_in_range() {
        for n in [1usize, 3, 1000, 1 << 21, 1 << 32] {
            for x in [0u32, 1, u32::MAX, 0x8000_0000] {
                assert!(reduce32(x, n) < n);
            }
        }
    }
}
