//! kMin / KMV: the k minimum distinct hash values (Bar-Yossef, Jayram, Kumar, Sivakumar &
//! Trevisan 2002), ALGORITHMS.md section 9; a cardinality sketch of SketchVisor Table 1.
//!
//! Keeps the `k` smallest *distinct* 64-bit hash values, sorted ascending. Below `k` distinct
//! keys the sketch holds every key's hash and the answer is the exact count (barring 64-bit
//! hash collisions, probability ≈ n²/2^65). Once full, with `u_(k) = (h_(k) + 1)/2^64` the
//! k-th smallest value mapped into (0, 1], `n̂ = (k − 1)/u_(k)`, unbiased, RSE ≈ 1/√(k − 2)
//! (3.1% at the default k = 1024, 8 KiB).
//!
//! Repeated keys must not enter twice ("deduplicate, or repeated packets break it",
//! ALGORITHMS.md 9): insertion is a binary search that skips values already present.
//!
//! Hot path: once full, almost every key is rejected by one comparison against the cached k-th
//! value (expected k·ln(n/k) insertions over a stream of n distinct keys); an insertion is a
//! memmove of at most 8 KiB.
//!
//! Idempotent (class B): weight ignored; merge = union keeping the k smallest, equal to the
//! sketch of the union stream.

use algo::{BuildCtx, ConfigError, Task};
use key::HashFn;
use serde::{Deserialize, Serialize};

pub const NAME: &str = "kmin";
/// The tasks it answers.
const TASKS: &[Task] = &[Task::Cardinality];
/// `key::sub_seed` index of this algorithm ("KMV").
const SEED_TAG: u64 = 0x004b_4d56;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KMinConfig {
    /// Number of minimum hash values kept (default 4096: RSE ≈ 1/√(k−2) = 1.6%, so the
    /// cardinality bar of 5% holds at three standard errors; 1024's 3.1% missed it one run in
    /// ten, issue 12).
    pub k: usize,
}

impl Default for KMinConfig {
    fn default() -> Self {
        KMinConfig { k: 4096 }
    }
}

impl KMinConfig {
    /// Largest `k` accepted (128 MiB of hash values).
    pub const MAX_K: usize = 1 << 24;

    pub fn validate(&self) -> Result<(), ConfigError> {
        // k = 2 would make the RSE formula meaningless and k - 1 = 1 gives a useless estimate.
        if self.k < 3 || self.k > Self::MAX_K {
            return Err(ConfigError::Invalid {
                algo: NAME,
                field: "k",
                reason: format!("must be in 3..={}, got {}", Self::MAX_K, self.k),
            });
        }
        Ok(())
    }

    /// Relative standard error once the sketch is full, 1/√(k−2).
    pub fn rse(&self) -> f64 {
        1.0 / ((self.k - 2) as f64).sqrt()
    }
}

/// kMin distinct counter. See the module documentation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "KMinState")]
pub struct KMin {
    cfg: KMinConfig,
    hash: HashFn,
    /// Strictly increasing, at most `cfg.k` values.
    mins: Vec<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KMinState {
    cfg: KMinConfig,
    hash: HashFn,
    mins: Vec<u64>,
}

impl algo::CheckState for KMin {
    /// Nothing left to check: the state's own conversion (`TryFrom<KMinState>`, through
    /// `serde(try_from)`) checked every decoded size against its configuration.
    fn check_state(&self) -> Result<(), String> {
        Ok(())
    }
}

impl TryFrom<KMinState> for KMin {
    type Error = String;
    fn try_from(s: KMinState) -> Result<Self, String> {
        s.cfg.validate().map_err(|e| e.to_string())?;
        if s.mins.len() > s.cfg.k {
            return Err(format!(
                "kmin: {} values stored, k = {}",
                s.mins.len(),
                s.cfg.k
            ));
        }
        if s.mins.windows(2).any(|w| w[0] >= w[1]) {
            return Err("kmin: stored values are not strictly increasing".into());
        }
        Ok(KMin {
            cfg: s.cfg,
            hash: s.hash,
            mins: s.mins,
        })
    }
}

impl KMin {
    pub fn new(cfg: KMinConfig, ctx: &BuildCtx) -> Result<KMin, ConfigError> {
        cfg.validate()?;
        Ok(KMin {
            hash: HashFn::new(key::sub_seed(ctx.seed, SEED_TAG)),
            mins: Vec::with_capacity(cfg.k),
            cfg,
        })
    }

    pub fn config(&self) -> &KMinConfig {
        &self.cfg
    }

    /// The kept hash values, ascending.
    pub fn values(&self) -> &[u64] {
        &self.mins
    }

    /// True once `k` values are held (the estimate is then statistical, not exact).
    pub fn is_full(&self) -> bool {
        self.mins.len() >= self.cfg.k
    }

    #[inline]
    fn insert_hash(&mut self, h: u64) {
        let full = self.is_full();
        if full && self.mins.last().is_some_and(|&max| h >= max) {
            return;
        }
        if let Err(pos) = self.mins.binary_search(&h) {
            if full {
                self.mins.pop();
            }
            self.mins.insert(pos, h);
        }
    }

    /// Exact count below `k` distinct keys, else `(k−1)/u_(k)`.
    pub fn estimate(&self) -> f64 {
        match self.mins.last() {
            Some(&hk) if self.is_full() => {
                // u_(k) = (h_(k) + 1) / 2^64, computed without overflowing at h = u64::MAX.
                let u = (hk as f64 + 1.0) / 2f64.powi(64);
                (self.cfg.k as f64 - 1.0) / u
            }
            _ => self.mins.len() as f64,
        }
    }
}

crate::counter_algorithm!(KMin);

impl crate::Counter for KMin {
    fn clear(&mut self) {
        self.mins.clear();
    }

    fn state_bytes(&self) -> usize {
        // The vector is allocated at k values up front and never grows past it.
        self.cfg.k * std::mem::size_of::<u64>()
    }

    fn union(&mut self, o: &Self) {
        // Merge two sorted runs, dropping duplicates, stopping at k.
        let (a, b) = (&self.mins, &o.mins);
        let mut out = Vec::with_capacity(self.cfg.k);
        let (mut i, mut j) = (0, 0);
        while out.len() < self.cfg.k {
            let next = match (a.get(i), b.get(j)) {
                (Some(&x), Some(&y)) => {
                    if x <= y {
                        i += 1;
                        j += usize::from(x == y);
                        x
                    } else {
                        j += 1;
                        y
                    }
                }
                (Some(&x), None) => {
                    i += 1;
                    x
                }
                (None, Some(&y)) => {
                    j += 1;
                    y
                }
                (None, None) => break,
            };
            out.push(next);
        }
        self.mins = out;
    }
}

/// This algorithm's facts, listed in the `catalog` crate.
///
/// `memory`: at capacity, the `k` u64 minima (allocated at construction).
pub const ENTRY: algo::Entry = algo::Entry {
    name: NAME,
    tasks: TASKS,
    fit: algo::KeyFit::Any,
    build: |p, ctx| algo::build_with(NAME, p, |c| KMin::new(c, ctx)),
    memory: |p, _ctx| {
        algo::Entry::memory_with(NAME, p, |c: KMinConfig| {
            c.validate()?;
            Ok(c.k as u64 * 8)
        })
    },
    defaults: algo::defaults_of::<KMinConfig>,
    flow_size_only: "",
    resets_to_empty: true,
    save: algo::save_state::<KMin>,
    load: |b| algo::load_state::<KMin>(NAME, b),
    // ns per update, u32 / FlowKey path: `cargo run --release -p catalog --example update_costs`.
    cost: algo::UpdateCost {
        u32_ns: 4.87,
        wide_ns: 9.14,
        behind: 1.32,
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;
    use algo::Algorithm;
    use key::FlowKey;
    use testkit::zipf_keys;

    fn kmin(k: usize, seed: u64) -> KMin {
        let ctx = BuildCtx {
            seed,
            ..BuildCtx::default()
        };
        KMin::new(KMinConfig { k }, &ctx).unwrap()
    }

    fn run(mut s: KMin, keys: &[FlowKey]) -> KMin {
        for k in keys {
            s.update(k, 1);
        }
        s
    }

    #[test]
    fn laws() {
        check_idempotent_laws(|seed| kmin(1024, seed));
        check_idempotent_laws(|seed| kmin(3, seed));
    }

    #[test]
    fn seeds_change_the_values() {
        let keys = zipf_keys(20_000, 5000, 1.1, 3);
        assert_ne!(run(kmin(64, 1), &keys).mins, run(kmin(64, 2), &keys).mins);
    }

    /// Below k distinct keys the answer is the exact count, whatever the repeats.
    #[test]
    fn exact_below_k() {
        for n in [0usize, 1, 2, 100, 1023] {
            let keys = distinct_stream(n, n as u64);
            let s = run(kmin(1024, 1), &keys);
            assert!(!s.is_full());
            assert_eq!(s.estimate(), n as f64);
        }
        let keys = zipf_keys(1_500, 50_000, 1.1, 4);
        let s = run(kmin(1024, 1), &keys);
        let truth = exact_distinct(&keys);
        assert!(truth < 1024);
        assert_eq!(s.estimate(), truth as f64);
    }

    /// The kept values are exactly the k smallest distinct hashes of the stream.
    #[test]
    fn keeps_the_k_smallest_distinct_hashes() {
        let keys = zipf_keys(50_000, 20_000, 1.1, 5);
        let s = run(kmin(100, 5), &keys);
        let mut all: Vec<u64> = key_set(&keys).iter().map(|k| s.hash.hash(k)).collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(s.values(), &all[..100]);
    }

    /// Within 4 standard errors, 1/√(k−2) = 3.1% at k = 1024, at 10k and 1M distinct keys and
    /// on a Zipf stream.
    #[test]
    fn accuracy_against_truth() {
        for (n, seed) in [(10_000usize, 2u64), (1_000_000, 3)] {
            let keys = distinct_stream(n, seed);
            let s = run(kmin(1024, seed), &keys);
            assert!(s.is_full());
            assert_within(
                &format!("kmin n={n}"),
                s.estimate(),
                n,
                s.config().rse(),
                4.0,
            );
        }
        let keys = zipf_keys(300_000, 200_000, 1.1, 9);
        let truth = exact_distinct(&keys);
        let s = run(kmin(1024, 9), &keys);
        assert_within("kmin zipf", s.estimate(), truth, s.config().rse(), 4.0);
    }

    /// `(k − 1)/u_(k)` is unbiased: over many seeds the mean relative error is within 4 standard
    /// errors of the mean of zero, and the spread of one run is 1/√(k − 2) within 15%.
    #[test]
    fn no_bias_over_many_seeds() {
        for (k, runs, n) in [(16usize, 2000usize, 1000usize), (256, 400, 20_000)] {
            let s = seed_stats(runs, n, |seed| kmin(k, seed));
            let rse = KMinConfig { k }.rse();
            assert_unbiased(&format!("kmin k={k} n={n}"), s, 0.0, 4.0, rse, (0.85, 1.15));
        }
    }

    /// Merging sketches that are not full (one side runs out before k values are taken) keeps
    /// every value of both, once, in order: the sketch of the union.
    #[test]
    fn merge_of_partial_sketches_is_the_union() {
        let keys = distinct_stream(700, 8);
        let (a_keys, b_keys) = keys.split_at(200);
        for k in [1024usize, 500] {
            let whole = run(kmin(k, 8), &keys);
            for (x, y) in [(a_keys, b_keys), (b_keys, a_keys)] {
                let mut a = run(kmin(k, 8), x);
                a.merge(&run(kmin(k, 8), y)).unwrap();
                assert_eq!(a, whole, "k = {k}");
            }
            let mut e = kmin(k, 8);
            e.merge(&whole).unwrap();
            assert_eq!(e, whole);
            let mut w = whole.clone();
            w.merge(&kmin(k, 8)).unwrap();
            assert_eq!(w, whole);
        }
    }

    #[test]
    fn malformed_snapshot_is_rejected() {
        let s = kmin(3, 1);
        let mut v = serde_json::to_value(&s).unwrap();
        v["mins"] = serde_json::json!([5, 3]);
        assert!(serde_json::from_value::<KMin>(v).is_err());
        let mut v = serde_json::to_value(&s).unwrap();
        v["mins"] = serde_json::json!([1, 2, 3, 4]);
        assert!(serde_json::from_value::<KMin>(v).is_err());
    }
}
