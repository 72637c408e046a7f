//! Exact flow tables, top-k counters, FlowRadar and EWMA change detection.
//!
//! | name           | module            | structure                                              |
//! |----------------|-------------------|--------------------------------------------------------|
//! | `linear_hash`  | [`linear_hash`]   | exact linear-probing table, keys inline with counts    |
//! | `cuckoo1`      | [`cuckoo`]        | exact Cuckoo table, 2 hashes, 1 entry per bucket       |
//! | `cuckoo4`      | [`cuckoo`]        | exact Cuckoo table, 2 hashes, 4 entries per bucket     |
//! | `heap`         | [`heap`]          | Re-evaluating min-heap top-k (Space-Saving without ε)  |
//! | `space_saving` | [`space_saving`]  | Space-Saving with ε (ALGORITHMS.md 10)                 |
//! | `misra_gries`  | [`misra_gries`]   | Misra-Gries with O(log k) decrements, mergeable        |
//! | `flow_radar`   | [`flow_radar`]    | Bloom flow filter + invertible counting table (ALGORITHMS.md 3) |
//! | `ewma_change`  | [`ewma_change`]   | exact per-flow counts + EWMA prediction (ALGORITHMS.md 11) |
//!
//! Keys are stored packed (see `packed`): a length byte followed by the key bytes, in
//! `ceil((key_len + 1) / 8)` u64 words, so a 4-byte key and its count share 16 bytes and a table
//! slot never holds the 38-byte [`key::FlowKey`] padding. A key longer than the
//! [`algo::BuildCtx::key_len`] the structure was built for cannot be stored; it is counted in the
//! structure's [`Dropped`] counter, never lost silently.

use algo::{Algorithm, BuildCtx, ConfigError};
use serde::{Deserialize, Serialize};

pub mod cuckoo;
pub mod ewma_change;
pub mod flow_radar;
pub mod heap;
pub mod linear_hash;
pub mod misra_gries;
pub mod space_saving;

mod count_heap;
mod exact;
mod packed;

#[cfg(test)]
mod zipf_util;

pub use cuckoo::{Cuckoo, CuckooConfig};
pub use ewma_change::{EwmaChange, EwmaChangeConfig};
pub use flow_radar::{Decoded, FlowRadar, FlowRadarConfig};
pub use heap::{Heap, HeapConfig};
pub use linear_hash::{LinearHash, LinearHashConfig};
pub use misra_gries::{MisraGries, MisraGriesConfig};
pub use space_saving::{SpaceSaving, SpaceSavingConfig};

/// Names of the algorithms this crate builds.
pub const NAMES: &[&str] = &[
    "linear_hash",
    "cuckoo1",
    "cuckoo4",
    "heap",
    "space_saving",
    "misra_gries",
    "flow_radar",
    "ewma_change",
];

/// Build the algorithm `name` from its parameter table; `Ok(None)` if this crate has no such
/// algorithm.
pub fn build(
    name: &str,
    params: &toml::Table,
    ctx: &BuildCtx,
) -> Result<Option<Box<dyn Algorithm>>, ConfigError> {
    let a: Box<dyn Algorithm> = match name {
        "linear_hash" => Box::new(LinearHash::new(
            algo::parse_params("linear_hash", params)?,
            ctx,
        )?),
        "cuckoo1" => Box::new(Cuckoo::new(
            algo::parse_params("cuckoo1", params)?,
            cuckoo::Slots::One,
            ctx,
        )?),
        "cuckoo4" => Box::new(Cuckoo::new(
            algo::parse_params("cuckoo4", params)?,
            cuckoo::Slots::Four,
            ctx,
        )?),
        "heap" => Box::new(Heap::new(algo::parse_params("heap", params)?)?),
        "space_saving" => Box::new(SpaceSaving::new(algo::parse_params(
            "space_saving",
            params,
        )?)?),
        "misra_gries" => Box::new(MisraGries::new(algo::parse_params("misra_gries", params)?)?),
        "flow_radar" => Box::new(FlowRadar::new(
            algo::parse_params("flow_radar", params)?,
            ctx,
        )?),
        "ewma_change" => Box::new(EwmaChange::new(algo::parse_params("ewma_change", params)?)?),
        _ => return Ok(None),
    };
    Ok(Some(a))
}

/// Updates a structure could not store: a new key arriving at a full table, a Cuckoo victim
/// with no free place after the kick limit, or a key longer than the configured key length.
/// The answers of the structure cover only what it stored; they are exact iff this is zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dropped {
    /// Number of `update` calls (aggregated updates) that were not stored.
    pub updates: u64,
    /// Sum of their weights (packets or bytes lost to the answers).
    pub weight: u64,
}

impl Dropped {
    #[inline]
    pub(crate) fn add(&mut self, w: u64) {
        self.updates = self.updates.saturating_add(1);
        self.weight = self.weight.saturating_add(w);
    }

    pub(crate) fn merge(&mut self, o: &Dropped) {
        self.updates = self.updates.saturating_add(o.updates);
        self.weight = self.weight.saturating_add(o.weight);
    }

    /// True when nothing was dropped (the answers are exact).
    pub fn is_zero(&self) -> bool {
        self.updates == 0
    }
}

/// Number of keys hashed ahead in `update_batch` before their slots are touched: enough to
/// cover a DRAM miss with independent loads, small enough to live on the stack.
pub(crate) const BATCH: usize = 16;

pub(crate) use key::prefetch_at as prefetch;

/// Cache or scratch data that is not part of a structure's state: skipped by serde, equal to
/// every other value of its type, reset by `Default`.
#[derive(Clone, Debug, Default)]
pub(crate) struct NotState<T>(pub T);

impl<T> PartialEq for NotState<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

pub(crate) fn invalid(
    algo: &'static str,
    field: &'static str,
    reason: impl Into<String>,
) -> ConfigError {
    ConfigError::Invalid {
        algo,
        field,
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_knows_every_name_and_only_those() {
        let ctx = BuildCtx::default();
        let small: toml::Table = toml::from_str("").unwrap();
        for &n in NAMES {
            let mut p = small.clone();
            // Keep the default-sized tables out of the test's memory budget.
            match n {
                "linear_hash" | "cuckoo1" | "cuckoo4" => {
                    p.insert("capacity".into(), toml::Value::Integer(1024));
                }
                "flow_radar" => {
                    p.insert("cells".into(), toml::Value::Integer(1024));
                }
                _ => {}
            }
            let a = build(n, &p, &ctx).unwrap().unwrap();
            assert_eq!(a.name(), n);
            assert!(!a.tasks().is_empty());
        }
        assert!(build("count_min", &small, &ctx).unwrap().is_none());
    }

    #[test]
    fn build_rejects_unknown_fields_and_bad_values() {
        let ctx = BuildCtx::default();
        let p: toml::Table = toml::from_str("nope = 1").unwrap();
        for &n in NAMES {
            assert!(build(n, &p, &ctx).is_err(), "{n} accepted an unknown field");
        }
        let p: toml::Table = toml::from_str("k = 0").unwrap();
        let e = build("space_saving", &p, &ctx).err().unwrap();
        assert!(e.to_string().contains("`k`"), "{e}");
    }

    #[test]
    fn default_configs_build_with_paper_sizes() {
        let ctx = BuildCtx::default();
        let e: toml::Table = toml::Table::new();
        let fr = build("flow_radar", &e, &ctx).unwrap().unwrap();
        let fr = algo::downcast::<FlowRadar>(fr.as_ref()).unwrap();
        assert_eq!(fr.cells(), 262_144);
        let ss = build("space_saving", &e, &ctx).unwrap().unwrap();
        let ss = algo::downcast::<SpaceSaving>(ss.as_ref()).unwrap();
        assert_eq!(ss.k(), 128);
    }
}
