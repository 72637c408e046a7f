//! Key-recovering sketches: structures that answer "which keys are heavy?" from their counters
//! alone, without keeping a list of keys (ALGORITHMS.md sections 4, 5 and 7).
//!
//! - [`RevSketch`] (`rev_sketch`): Reversible Sketch (Schweller et al., IMC'04 / ToN'07). Modular
//!   hashing over key words after a mangling bijection, so the heavy buckets can be inverted word
//!   by word (reverse hashing); candidates are confirmed by a separate non-modular Count-Min.
//!   Heavy hitters and heavy changers (k-ary adjusted difference of two epochs).
//! - [`Deltoid`] (`deltoid`): Cormode & Muthukrishnan (INFOCOM'04), groups of one total counter
//!   plus one counter per key bit; a group dominated by one key spells that key out.
//! - [`TwoLevel`] (`two_level`): the OpenSketch superspreader / DDoS structure, a Count-Min of
//!   bitmaps keyed by host plus a reversible sketch of bitmaps to find the candidate hosts.
//!
//! The shared machinery (mangling, word hash tables, reverse hashing with a bounded candidate
//! set) lives in [`modular`].

#![forbid(unsafe_code)]

pub mod deltoid;
mod memo;
pub mod modular;
pub mod rev_sketch;
pub mod two_level;

#[cfg(test)]
mod testutil;

pub use deltoid::{Deltoid, DeltoidConfig};
pub use modular::{ModularHash, Reversal};
pub use rev_sketch::{RevSketch, RevSketchConfig};
pub use two_level::{TwoLevel, TwoLevelConfig};

/// What a key-recovering query found: the flows (largest estimate first, ties by key) and
/// whether the bounded reverse-hashing search was cut short by its candidate cap (then some
/// qualifying flows may be missing; raise `max_candidates` or add rows).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Detection {
    pub flows: Vec<algo::Estimate>,
    pub truncated: bool,
}

impl Detection {
    pub(crate) fn sorted(mut flows: Vec<algo::Estimate>, truncated: bool) -> Detection {
        flows.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        Detection { flows, truncated }
    }
}

/// Row `i`'s index in `0..n` from one 64-bit hash `h`, by Kirsch-Mitzenmacher double hashing
/// `g_i = h1 + i*h2` ("Less hashing, same performance", ESA'06). It keeps the per-row collision
/// probability of independent hashes (1/n per pair) for Count-Min-style rows at the cost of one
/// xxh3 call per key instead of one per row. `h2` is a splitmix64 remix of `h`, forced odd so the
/// rows never coincide.
#[inline]
pub(crate) fn km_index(h: u64, i: usize, n: usize) -> usize {
    let h2 = key::mix64(h) | 1;
    key::reduce(h.wrapping_add((i as u64).wrapping_mul(h2)), n)
}

/// Clamp a weight to a u32 counter increment. Counters are u32 as in the papers (Agg-Evict 4.1)
/// and saturate instead of wrapping: a wrapped counter would silently turn a heavy key light,
/// while a saturated one stays an over-estimate. Linearity (and bit-equal merges) holds as long
/// as no counter reaches 2^32 - 1, i.e. fewer than 4.29e9 packets or bytes per bucket per epoch
/// (a 10 Gb/s link sends 1.25e9 bytes in SketchVisor's 1 s epoch).
#[inline]
pub(crate) fn w32(w: u64) -> u32 {
    u32::try_from(w).unwrap_or(u32::MAX)
}

pub(crate) use key::prefetch;

/// A key's bytes as a big-endian integer (keys of at most 8 bytes).
#[inline]
pub(crate) fn key_to_u64(b: &[u8]) -> u64 {
    let mut x = 0u64;
    for &byte in b.iter().take(8) {
        x = (x << 8) | u64::from(byte);
    }
    x
}

/// The `len`-byte big-endian key of the integer `x` (inverse of [`key_to_u64`]).
#[inline]
pub(crate) fn u64_to_key(x: u64, len: usize) -> key::FlowKey {
    let b = x.to_be_bytes();
    let len = len.min(8);
    key::FlowKey::from_bytes(&b[8 - len..]).unwrap_or(key::FlowKey::EMPTY)
}

/// Median of a small non-empty set of values (mean of the two middle ones for an even count,
/// rounded toward zero); 0 for an empty slice.
pub(crate) fn median_i64(v: &mut [i64]) -> i64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        // i128 so the sum of two large counters cannot overflow.
        ((i128::from(v[n / 2 - 1]) + i128::from(v[n / 2])) / 2) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_integer_roundtrip_and_median() {
        let k = u64_to_key(0x0a00_0001, 4);
        assert_eq!(k.as_bytes(), &[10, 0, 0, 1]);
        assert_eq!(key_to_u64(k.as_bytes()), 0x0a00_0001);
        assert_eq!(median_i64(&mut [3, -1, 2]), 2);
        assert_eq!(median_i64(&mut [4, 1, 3, 2]), 2);
        assert_eq!(median_i64(&mut []), 0);
        assert_eq!(w32(u64::MAX), u32::MAX);
        for i in 0..4 {
            assert!(km_index(u64::MAX, i, 4000) < 4000);
        }
    }
}
