//! Linear counter sketches: Count-Min, Count Sketch, count array, UnivMon and MRAC
//! (ALGORITHMS.md sections 2, 6 and 8; defaults from Agg-Evict section 4.1).
//!
//! Every sketch hashes a key once with the seeded portable hash (`key::HashFn`) and derives its
//! row indices from that one value ([`rows`]). The counter arrays are linear (ALGORITHMS.md
//! section 0, class A): merging adds counters and an aggregated update `(k, w)` equals `w` unit
//! updates, bit for bit. The heavy-hitter candidate sets and UnivMon's heaps are order-dependent
//! (class C); their guarantees are stated where they are built.

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

use algo::{parse_params, Algorithm, BuildCtx, ConfigError, Estimate};

/// Keys hashed (and counters prefetched) ahead of the updates in `update_batch`
/// (Agg-Evict artifact's MAX_RX_BURST).
pub(crate) const BATCH: usize = 32;

/// The algorithm names this crate provides.
pub const NAMES: &[&str] = &[
    "count_min",
    "count_sketch",
    "count_array",
    "univmon",
    "mrac",
];

/// Build algorithm `name` from its parameter table; `Ok(None)` if this crate does not provide
/// `name`.
pub fn build(
    name: &str,
    params: &toml::Table,
    ctx: &BuildCtx,
) -> Result<Option<Box<dyn Algorithm>>, ConfigError> {
    let a: Box<dyn Algorithm> = match name {
        "count_min" => Box::new(CountMin::new(parse_params("count_min", params)?, ctx.seed)?),
        "count_sketch" => Box::new(CountSketch::new(
            parse_params("count_sketch", params)?,
            ctx.seed,
        )?),
        "count_array" => Box::new(CountArray::new(
            parse_params("count_array", params)?,
            ctx.seed,
        )?),
        "univmon" => Box::new(UnivMon::new(parse_params("univmon", params)?, ctx.seed)?),
        "mrac" => Box::new(Mrac::new(parse_params("mrac", params)?, ctx.seed)?),
        _ => return Ok(None),
    };
    Ok(Some(a))
}

/// Largest estimate first, ties by key, so reports are deterministic.
pub(crate) fn sort_estimates(v: &mut [Estimate]) {
    v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
}
