//! Test helpers: a seeded Zipf key stream and exact ground truth.

use key::{FlowKey, KeyMap};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

/// A stream of `len` keys drawn from `n` distinct keys with Zipf(`s`) popularity (rank r has
/// probability ∝ r^-s). Keys are `key_len`-byte values spread over the key space (a splitmix of
/// the rank, so ranks are not numerically adjacent) and the same for every `seed`: two seeds give
/// two epochs of the same population. The draws are deterministic in `seed`.
pub fn zipf_stream(n: usize, s: f64, len: usize, key_len: usize, seed: u64) -> Vec<FlowKey> {
    let mut cdf = Vec::with_capacity(n);
    let mut acc = 0.0;
    for r in 1..=n {
        acc += (r as f64).powf(-s);
        cdf.push(acc);
    }
    let keys: Vec<FlowKey> = (0..n as u64)
        .map(|r| key_of(key::mix64(r + 0x5eed_0000_0000), key_len))
        .collect();
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..len)
        .map(|_| {
            let u: f64 = rng.gen::<f64>() * acc;
            let i = cdf.partition_point(|&c| c < u).min(n - 1);
            keys[i]
        })
        .collect()
}

/// A `key_len`-byte key from `x`: the low `key_len` bytes of `x` for keys of up to 8 bytes; longer
/// keys (up to 16) get a splitmix of `x` in front.
pub fn key_of(x: u64, key_len: usize) -> FlowKey {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&key::mix64(x).to_be_bytes());
    b[8..].copy_from_slice(&x.to_be_bytes());
    FlowKey::from_bytes(&b[16 - key_len.min(16)..]).unwrap_or(FlowKey::EMPTY)
}

/// Exact per-key totals.
pub fn truth(stream: &[(FlowKey, u64)]) -> KeyMap<u64> {
    let mut m = KeyMap::default();
    for &(k, w) in stream {
        *m.entry(k).or_insert(0) += w;
    }
    m
}

/// A Zipf background of unit updates plus `planted` keys of weight `each`, split into weighted
/// chunks and shuffled in (fixed seed).
pub fn planted_stream(
    background: &[FlowKey],
    planted: &[FlowKey],
    each: u64,
    seed: u64,
) -> Vec<(FlowKey, u64)> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut out: Vec<(FlowKey, u64)> = background.iter().map(|&k| (k, 1)).collect();
    for &k in planted {
        let mut left = each;
        while left > 0 {
            let w = rng.gen_range(1..=64).min(left);
            out.push((k, w));
            left -= w;
        }
    }
    // Fisher-Yates with the seeded generator.
    for i in (1..out.len()).rev() {
        let j = rng.gen_range(0..=i);
        out.swap(i, j);
    }
    out
}
