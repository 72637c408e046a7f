//! Linear counter sketches: Count-Min, Count Sketch, count array, UnivMon and MRAC
//! (ALGORITHMS.md sections 2, 6 and 8; defaults from Agg-Evict section 4.1).
//!
//! Every sketch hashes a key once with the seeded portable hash (`key::HashFn`) and derives its
//! row indices from that one value ([`rows`]). The counter arrays are linear (ALGORITHMS.md
//! section 0, class A): merging adds counters and an aggregated update `(k, w)` equals `w` unit
//! updates, bit for bit. The heavy-hitter candidate sets and UnivMon's heaps are order-dependent
//! (class C); their guarantees are stated where they are built.

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod candidates;
pub mod count_array;
pub mod count_min;
pub mod count_sketch;
pub mod mrac;
pub mod rows;
pub mod univmon;

#[cfg(test)]
mod tests;

pub use count_array::{CountArray, CountArrayConfig};
pub use count_min::{CountMin, CountMinConfig, CounterMatrix};
pub use count_sketch::{CountSketch, CountSketchConfig, SignedMatrix};
pub use mrac::{Em, Mrac, MracConfig};
pub use univmon::{UnivMon, UnivMonConfig};

use algo::Estimate;

/// Keys hashed (and counters prefetched) ahead of the updates in `update_batch`
/// (Agg-Evict artifact's MAX_RX_BURST).
pub(crate) const BATCH: usize = 32;

/// Largest estimate first, ties by key, so reports are deterministic.
pub(crate) fn sort_estimates(v: &mut [Estimate]) {
    v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
}
