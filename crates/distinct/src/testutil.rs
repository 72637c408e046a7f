//! Test helpers: streams of known distinct count, exact ground truth, the error check and the
//! laws of idempotent counters. Zipf streams come from `testkit::zipf_keys`.

use key::{FlowKey, KeySet};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

/// Exactly `n` distinct 4-byte keys, each repeated 1..=3 times, in a shuffled order.
pub fn distinct_stream(n: usize, seed: u64) -> Vec<FlowKey> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let base = rng.gen::<u32>();
    let mut v = Vec::with_capacity(2 * n);
    for i in 0..n as u32 {
        let k = FlowKey::from_u32(base.wrapping_add(i.wrapping_mul(0x0100_0193)));
        for _ in 0..rng.gen_range(1..=3) {
            v.push(k);
        }
    }
    // Fisher-Yates with the same generator keeps the stream reproducible.
    for i in (1..v.len()).rev() {
        let j = rng.gen_range(0..=i);
        v.swap(i, j);
    }
    v
}

/// Exact number of distinct keys.
pub fn exact_distinct(keys: &[FlowKey]) -> usize {
    keys.iter().collect::<std::collections::HashSet<_>>().len()
}

/// Distinct keys of a stream as a set (ground truth for membership questions).
pub fn key_set(keys: &[FlowKey]) -> KeySet {
    keys.iter().copied().collect()
}

/// Asserts `|est - truth| <= sigmas * rse * truth` and returns the relative error.
#[track_caller]
pub fn assert_within(name: &str, est: f64, truth: usize, rse: f64, sigmas: f64) -> f64 {
    let t = truth as f64;
    let rel = (est - t).abs() / t;
    // Shown with --nocapture: how far inside the bound each check lands.
    eprintln!(
        "{name}: est {est:.1} truth {truth} rel {rel:.5} ({:.2} RSE)",
        rel / rse
    );
    assert!(
        rel <= sigmas * rse,
        "{name}: estimate {est:.1} vs truth {truth}: relative error {rel:.4} > {sigmas} x RSE {rse:.4}"
    );
    rel
}

/// The laws every idempotent counter (class B) must obey, checked on a Zipf stream:
/// weight ignored, repeats are no-ops, any order gives the same state, merge of two halves equals
/// the sketch of the whole stream bit for bit, `update_batch` equals the `update` loop, reset
/// restores the empty state, serde round-trips, same seed gives the same state and a different
/// seed a different one. `make(seed)` builds an empty structure.
pub fn check_idempotent_laws<A>(make: impl Fn(u64) -> A)
where
    A: algo::Algorithm
        + Clone
        + PartialEq
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    let keys = testkit::zipf_keys(60_000, 20_000, 1.1, 11);
    let ones = vec![1u64; keys.len()];
    let mut whole = make(1);
    let empty = whole.clone();
    for k in &keys {
        whole.update(k, 1);
    }

    // Aggregated update (k, w) == w unit updates == one unit update.
    let mut weighted = make(1);
    for (i, k) in keys.iter().enumerate() {
        weighted.update(k, 1 + (i as u64 % 1000) * 1_000_003);
    }
    assert_eq!(weighted, whole, "weight must be ignored");

    // Any order: reversed stream.
    let mut rev = make(1);
    for k in keys.iter().rev() {
        rev.update(k, 1);
    }
    assert_eq!(rev, whole, "order must not matter");

    // Batch path (hash first, prefetch) equals the scalar loop.
    let mut batch = make(1);
    for (ks, ws) in keys.chunks(1000).zip(ones.chunks(1000)) {
        batch.update_batch(ks, ws);
    }
    assert_eq!(batch, whole, "update_batch must equal the update loop");
    let mut odd = make(1);
    odd.update_batch(&keys[..37], &ones[..37]);
    odd.update_batch(&keys[37..], &ones[37..]);
    assert_eq!(odd, whole, "update_batch with ragged blocks");

    // Merge of two halves == sketch of the whole stream, bit for bit.
    let (a_keys, b_keys) = keys.split_at(keys.len() / 3);
    let mut a = make(1);
    let mut b = make(1);
    for k in a_keys {
        a.update(k, 1);
    }
    for k in b_keys {
        b.update(k, 1);
    }
    a.merge(&b).expect("same shape and seed merge");
    assert_eq!(a, whole, "merge must equal the sketch of the union");
    // Merging with itself changes nothing (idempotent).
    let copy = whole.clone();
    let mut twice = whole.clone();
    twice.merge(&copy).unwrap();
    assert_eq!(twice, whole);

    // Different seed: different state, and merging it is refused.
    let mut other = make(2);
    for k in &keys {
        other.update(k, 1);
    }
    assert_ne!(other, whole, "different seeds must give different states");
    let mut w2 = whole.clone();
    assert_eq!(
        w2.merge(&other),
        Err(algo::MergeError::Mismatch(whole.name()))
    );
    assert_eq!(w2, whole, "a refused merge leaves the state alone");

    // Same seed, fresh build: same state.
    let mut again = make(1);
    for k in &keys {
        again.update(k, 1);
    }
    assert_eq!(again, whole);

    // Serde round-trip keeps the state and the answers.
    let json = serde_json::to_string(&whole).unwrap();
    let back: A = serde_json::from_str(&json).unwrap();
    assert_eq!(back, whole);
    assert_eq!(back.cardinality(), whole.cardinality());

    // Reset: back to the empty state, same sizes and seeds.
    let mut r = whole.clone();
    r.reset();
    assert_eq!(r, empty);
    assert_eq!(r.memory_bytes(), whole.memory_bytes());
    assert_eq!(r.cardinality(), Some(0.0));

    assert_eq!(whole.tasks(), &[algo::Task::Cardinality]);
    assert!(whole.memory_bytes() > 0);
    assert!(whole.heavy_hitters(1).is_none());
    assert!(whole.spreaders(1).is_none());
}

/// Mean and spread of the relative errors `(est - n) / n` of independent runs, one per seed.
///
/// A bias of a few percent (a wrong constant, a dropped correction) hides inside one run's
/// noise at any useful sigma; the mean of `runs` runs has standard error `sd / sqrt(runs)`, so a
/// bias of a few standard errors of the *mean* is seen (issue 11: HyperLogLog with alpha off by
/// 2.6% passed every one-run test).
#[derive(Clone, Copy, Debug)]
pub struct SeedStats {
    pub runs: usize,
    pub mean: f64,
    pub sd: f64,
}

impl SeedStats {
    /// Standard error of [`SeedStats::mean`].
    pub fn se(&self) -> f64 {
        self.sd / (self.runs as f64).sqrt()
    }
}

/// Relative errors of `runs` runs: run `i` (seed `1 + i`) counts the `n` distinct 4-byte keys
/// `salt + i * n .. salt + (i + 1) * n` (disjoint across runs) with a fresh structure from `make`.
pub fn seed_stats<A: algo::Algorithm>(runs: usize, n: usize, make: impl Fn(u64) -> A) -> SeedStats {
    let ones = vec![1u64; n];
    let rel: Vec<f64> = (0..runs)
        .map(|i| {
            let mut s = make(1 + i as u64);
            let start = (i * n) as u32;
            let keys: Vec<u32> = (0..n as u32)
                .map(|j| 0x5eed_0000u32.wrapping_add(start).wrapping_add(j))
                .collect();
            s.update_batch_u32(&keys, &ones);
            let est = s.cardinality().expect("a distinct counter");
            (est - n as f64) / n as f64
        })
        .collect();
    let mean = rel.iter().sum::<f64>() / runs as f64;
    let var = rel.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (runs as f64 - 1.0);
    SeedStats {
        runs,
        mean,
        sd: var.sqrt(),
    }
}

/// Asserts that the mean relative error is within `z` standard errors (of the mean) of the band
/// `[-bias, bias]` (`bias`: the estimator's known bias at this size, 0 for an unbiased one) and
/// that the spread of one run is within `[lo, hi]` times the theoretical relative standard error
/// `rse`. Prints the margins (with --nocapture) so a test's headroom can be checked.
#[track_caller]
pub fn assert_unbiased(
    name: &str,
    s: SeedStats,
    bias: f64,
    z: f64,
    rse: f64,
    (lo, hi): (f64, f64),
) {
    let dev = (s.mean.abs() - bias).max(0.0) / s.se();
    eprintln!(
        "{name}: {} runs, mean rel err {:+.5} (bias allowed {bias:.4}, {dev:.2} SE of {:.5} beyond; limit {z}), sd {:.5} = {:.3} x RSE {rse:.5} (limits {lo}..{hi})",
        s.runs,
        s.mean,
        s.se(),
        s.sd,
        s.sd / rse
    );
    assert!(
        dev <= z,
        "{name}: mean relative error {:+.5} is {dev:.2} standard errors ({:.5}) beyond +-{bias:.4}",
        s.mean,
        s.se()
    );
    assert!(
        (lo * rse..=hi * rse).contains(&s.sd),
        "{name}: spread {:.5} outside [{lo}, {hi}] x RSE {rse:.5}",
        s.sd
    );
}
