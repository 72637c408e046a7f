//! Test and bench helper: a Zipf(s) stream of 4-byte keys with a fixed seed, and its exact
//! per-key counts. Shared with `benches/update.rs` through `#[path]`.

use std::collections::HashMap;

use key::FlowKey;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// The key of Zipf rank `r`: an odd-multiplier bijection on u32, so ranks map to distinct,
/// scattered keys (rank 0 is not key 0).
pub fn rank_key(r: usize) -> FlowKey {
    FlowKey::from_u32((r as u32).wrapping_mul(0x9E37_79B1) ^ 0x5bd1_e995)
}

/// `len` keys drawn from `n_keys` ranks with P(rank i) proportional to 1/(i+1)^s.
pub fn zipf_keys(n_keys: usize, len: usize, s: f64, seed: u64) -> Vec<FlowKey> {
    let mut cdf = Vec::with_capacity(n_keys);
    let mut acc = 0.0;
    for i in 0..n_keys {
        acc += 1.0 / ((i + 1) as f64).powf(s);
        cdf.push(acc);
    }
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    (0..len)
        .map(|_| {
            let u = rng.gen::<f64>() * acc;
            let r = cdf
                .partition_point(|&c| c < u)
                .min(n_keys.saturating_sub(1));
            rank_key(r)
        })
        .collect()
}

/// Exact count of every key.
#[allow(dead_code)]
pub fn truth(keys: &[FlowKey]) -> HashMap<FlowKey, u64> {
    let mut m = HashMap::new();
    for k in keys {
        *m.entry(*k).or_insert(0) += 1;
    }
    m
}
