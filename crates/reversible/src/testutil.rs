//! Test helpers: this crate's key layout over testkit's Zipf sampler, and planted streams.

use algo::{Algorithm, BuildCtx};
use key::FlowKey;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

/// A stream of `len` keys drawn from `n` distinct keys with Zipf(`s`) popularity (rank r has
/// probability ∝ r^-s): `testkit::zipf_ranks`, each rank laid out as a `key_len`-byte key spread
/// over the key space (a splitmix of the rank, so ranks are not numerically adjacent) and the
/// same for every `seed`: two seeds give two epochs of the same population. The draws are
/// deterministic in `seed`.
pub fn zipf_stream(n: usize, s: f64, len: usize, key_len: usize, seed: u64) -> Vec<FlowKey> {
    testkit::zipf_keys_with(len, n, s, seed, |r| {
        key_of(key::mix64(u64::from(r) + 0x5eed_0000_0000), key_len)
    })
}

/// A `key_len`-byte key from `x`: the low `key_len` bytes of `x` for keys of up to 8 bytes; longer
/// keys (up to 16) get a splitmix of `x` in front.
pub fn key_of(x: u64, key_len: usize) -> FlowKey {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&key::mix64(x).to_be_bytes());
    b[8..].copy_from_slice(&x.to_be_bytes());
    FlowKey::from_bytes(&b[16 - key_len.min(16)..]).unwrap_or(FlowKey::EMPTY)
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

/// A build context with this seed and key length (source side).
pub fn ctx(seed: u64, key_len: usize) -> BuildCtx {
    BuildCtx {
        seed,
        key_len,
        ..BuildCtx::default()
    }
}

/// Feed a weighted stream as one batch.
pub fn feed(s: &mut impl Algorithm, stream: &[(FlowKey, u64)]) {
    let (k, w): (Vec<FlowKey>, Vec<u64>) = stream.iter().copied().unzip();
    s.update_batch(&k, &w);
}

/// `n` distinct `key_len`-byte keys to plant, derived from `tag`.
pub fn planted(n: usize, key_len: usize, tag: u64) -> Vec<FlowKey> {
    (0..n as u64)
        .map(|i| key_of(key::mix64(tag + i), key_len))
        .collect()
}

/// Two epochs of the same Zipf traffic (different draws, 100 k packets over 20 k flows, skew
/// 1.0) through `make()`'s sketches, for the heavy-changer caveat: the previous epoch has no
/// planted flow, the current one `near` flows of exactly 1000 (a change of exactly that
/// threshold) and 10 of 3000 (far above it). Returns (current, previous).
pub fn change_epochs<A: Algorithm>(make: impl Fn() -> A, key_len: usize, near: usize) -> (A, A) {
    let (mut prev, mut cur) = (make(), make());
    let bg: Vec<(FlowKey, u64)> = zipf_stream(20_000, 1.0, 100_000, key_len, 31)
        .into_iter()
        .map(|k| (k, 1))
        .collect();
    feed(&mut prev, &bg);
    let mut e = planted_stream(
        &zipf_stream(20_000, 1.0, 100_000, key_len, 32),
        &planted(10, key_len, 0xfa5),
        3000,
        33,
    );
    e.extend(
        planted(near, key_len, 0x7ea7)
            .into_iter()
            .map(|k| (k, 1000)),
    );
    feed(&mut cur, &e);
    (cur, prev)
}
