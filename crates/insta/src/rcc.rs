//! RCC, the recyclable counter with confinement (Nyang and Shin, ToN 2016; InstaMeasure section
//! III-A uses it as its L1 and, unchanged, as each of its three L2 arrays).
//!
//! A counter array is a slice of 32-bit words. A flow hashes to one word and to a *virtual
//! vector*: [`VECTOR_BITS`] = 8 distinct bit positions confined in that word (here
//! `start + i * stride mod 32` for `i < 8`, `stride` odd, so the positions are distinct: 512
//! vectors from 9 bits of the flow's hash, their masks in one 2 KiB table). Each packet sets one
//! random bit of its vector. The vector is *saturated* when fewer than 30% of its bits are zero
//! (at most 2 of 8, [`SAT_ONES`] = 6 ones); then the flow's count is decoded, the vector is
//! *recycled* (random set bits cleared until only the noise level is left) and the caller gets
//! the noise class back.
//!
//! Noise: the other 24 bits of the word are set by other flows only, so their zero fraction `q`
//! estimates the chance that a vector bit is set by noise; the noise level of the vector is
//! `round(8 (1 - q))` set bits. InstaMeasure keeps three L2 arrays, one per noise level (section
//! III-A: "the estimation can be divided into three cases"), so levels above 2 are class 2:
//! recycling then clears the vector down to 2 bits, which removes some of the other flows' bits
//! in a word that crowded (the caveat of the algorithm says when L1 is that loaded).
//!
//! Decoding (the *unit* of a saturation, [`UNIT`]): a vector recycled to `c` set bits reaches
//! [`SAT_ONES`] after `sum_{j=c}^{5} 8 / (8 - j)` packets on average (the coupon collector's
//! partial sum: with `j` bits set, a packet sets a new one with probability `(8 - j) / 8`), so
//! `n` packets make `n / unit` saturations in the long run and `saturations x unit` is an
//! unbiased count (renewal-reward). The linear-counting estimate read at the saturation instant
//! (`ln(2 / (8 - c)) / ln(7 / 8)`: 10.4, 9.4, 8.2 for c = 0, 1, 2) is read at a stopping time and
//! over-counts by 6-8%; the linear-counting algebra is used for what a vector holds between
//! saturations ([`held`]), where it estimates a fixed number of packets.

use serde::{Deserialize, Serialize};

/// Bits of a virtual vector.
pub const VECTOR_BITS: u32 = 8;
/// Bits of a word outside a flow's vector: what its noise is estimated from.
pub const OUTSIDE_BITS: u32 = 32 - VECTOR_BITS;
/// Set bits of a saturated vector: fewer than 30% of 8 bits zero means at most 2 zeros.
pub const SAT_ONES: u32 = 6;
/// Noise classes, one L2 array each (InstaMeasure section III-A).
pub const CLASSES: usize = 3;

/// Packets per saturation of a vector recycled to `c` noise bits (module docs): 9.74, 8.74, 7.6.
pub const UNIT: [f64; CLASSES] = [unit(0), unit(1), unit(2)];

const fn unit(c: u32) -> f64 {
    let mut u = 0.0;
    let mut j = c;
    while j < SAT_ONES {
        u += VECTOR_BITS as f64 / (VECTOR_BITS - j) as f64;
        j += 1;
    }
    u
}

/// The 512 vector masks: selector `s` has `start = s & 31`, `stride = 2 (s >> 5) + 1`.
static MASKS: [u32; 512] = masks();

const fn masks() -> [u32; 512] {
    let mut m = [0u32; 512];
    let mut s = 0;
    while s < 512 {
        let (start, stride) = ((s & 31) as u32, 2 * (s >> 5) as u32 + 1);
        let mut i = 0;
        while i < VECTOR_BITS {
            m[s] |= 1 << ((start + i * stride) & 31);
            i += 1;
        }
        s += 1;
    }
    m
}

/// A flow's virtual vector within its word: 9 bits of its hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vector(u16);

impl Vector {
    /// The vector of hash `h` (its low 9 bits; the word index takes the high bits).
    #[inline(always)]
    pub fn of(h: u64) -> Vector {
        Vector((h & 511) as u16)
    }

    #[inline(always)]
    pub fn mask(self) -> u32 {
        MASKS[self.0 as usize]
    }

    /// Bit `i < 8` of the vector, as a word mask.
    #[inline(always)]
    pub fn bit(self, i: u32) -> u32 {
        let (start, stride) = (u32::from(self.0) & 31, 2 * (u32::from(self.0) >> 5) + 1);
        1 << (start.wrapping_add(i.wrapping_mul(stride)) & 31)
    }
}

/// Random bits for the hot path, drawn 64 at a time from a seeded PCG (rand_pcg's `Pcg64Mcg`:
/// one 128-bit multiply per draw); a packet takes 3 of them, so one draw serves 21 packets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bits {
    pcg: rand_pcg::Pcg64Mcg,
    buf: u64,
    left: u32,
}

impl Bits {
    pub fn new(seed: u64) -> Bits {
        use rand::SeedableRng;
        Bits {
            pcg: rand_pcg::Pcg64Mcg::seed_from_u64(seed),
            buf: 0,
            left: 0,
        }
    }

    /// Three random bits: a position in a vector.
    #[inline(always)]
    pub fn take3(&mut self) -> u32 {
        if self.left < 3 {
            self.buf = rand::RngCore::next_u64(&mut self.pcg);
            self.left = 63;
        }
        let r = (self.buf & 7) as u32;
        self.buf >>= 3;
        self.left -= 3;
        r
    }

    /// A uniform double in [0, 1).
    pub fn unit_f64(&mut self) -> f64 {
        (rand::RngCore::next_u64(&mut self.pcg) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// `x >= 0` rounded up with probability its fractional part (unbiased: E = x).
    pub fn round(&mut self, x: f64) -> u64 {
        let f = x.floor();
        f as u64 + u64::from(self.unit_f64() < x - f)
    }
}

/// The noise class of a word whose bits outside the vector have `ones` set: the noise level
/// `round(8 ones / 24)`, at most `CLASSES - 1`.
#[inline]
pub fn noise_class(ones_outside: u32) -> usize {
    let level = (ones_outside * VECTOR_BITS * 2 + OUTSIDE_BITS) / (2 * OUTSIDE_BITS);
    (level as usize).min(CLASSES - 1)
}

/// Encode one packet of the flow with vector `v` into `word`: set a random bit of the vector;
/// on saturation recycle the vector and return its noise class.
#[inline(always)]
pub fn encode(word: &mut u32, v: Vector, bits: &mut Bits) -> Option<usize> {
    let w = *word | v.bit(bits.take3());
    let mask = v.mask();
    if (w & mask).count_ones() < SAT_ONES {
        *word = w;
        return None;
    }
    let class = noise_class((w & !mask).count_ones());
    *word = recycle(w, v, class as u32, bits);
    Some(class)
}

/// `w` with random set bits of vector `v` cleared until `keep` are left (RCC's recycling).
/// Clearing `n - keep` uniformly chosen set bits leaves a uniformly chosen `keep`-subset, and
/// `keep` is at most 2 where `n` is at least 6: drawing the kept bits takes at most 2 picks
/// instead of at least 4 (recycling was a quarter of the update time when it cleared bits).
#[cold]
fn recycle(w: u32, v: Vector, keep: u32, bits: &mut Bits) -> u32 {
    let mask = v.mask();
    let mut pool = w & mask;
    let mut left = pool.count_ones();
    let mut kept = 0;
    for _ in 0..keep.min(left) {
        // A uniform index below `left` (at most 8): 3 random bits, redrawn while too large.
        let mut j = bits.take3();
        while j >= left {
            j = bits.take3();
        }
        let mut p = pool;
        for _ in 0..j {
            p &= p - 1;
        }
        let b = p & p.wrapping_neg();
        kept |= b;
        pool &= !b;
        left -= 1;
    }
    (w & !mask) | kept
}

/// What the vector `v` of `word` holds, in packets (or in saturations of the layer below, for
/// an L2 word): the linear-counting estimate with the noise estimated from the rest of the word,
/// `ln(z_v / (8 q)) / ln(7/8)`, `z_v` the vector's zero bits and `q` the zero fraction outside
/// it, less what that estimate reads on average for a vector of noise alone at that `q` (by
/// Jensen's inequality a noise-only vector reads above 0: about 0.3 at a quarter of the word set,
/// which an L2 unit multiplies by 8-10 for a flow that never saturated L1). An empty count (a
/// zero bit or an unset rest) counts as half a bit, so a crowded word gives a finite answer.
/// Not clamped: the caller clamps the sum over the layers once.
#[inline]
pub fn held_signed(word: u32, v: Vector) -> f64 {
    let mask = v.mask();
    let zv = VECTOR_BITS - (word & mask).count_ones();
    let zo = OUTSIDE_BITS - (word & !mask).count_ones();
    lc(zv, zo) - noise_reading()[zo as usize]
}

/// The linear-counting reading of a vector with `zv` zero bits in a word with `zo` zero bits
/// outside it.
fn lc(zv: u32, zo: u32) -> f64 {
    let (zv, zo) = (f64::from(zv).max(0.5), f64::from(zo).max(0.5));
    let q = zo / OUTSIDE_BITS as f64;
    (zv / (VECTOR_BITS as f64 * q)).ln() / (1.0 - 1.0 / VECTOR_BITS as f64).ln()
}

/// `noise_reading()[zo]`: the mean of [`lc`] over a vector whose 8 bits are each zero with
/// probability `q = zo / 24` (binomial zero count), i.e. what noise alone reads.
fn noise_reading() -> &'static [f64; OUTSIDE_BITS as usize + 1] {
    static T: std::sync::OnceLock<[f64; OUTSIDE_BITS as usize + 1]> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        let mut t = [0.0; OUTSIDE_BITS as usize + 1];
        for (zo, r) in t.iter_mut().enumerate() {
            let q = zo as f64 / OUTSIDE_BITS as f64;
            let mut choose = 1.0;
            for z in 0..=VECTOR_BITS {
                if z > 0 {
                    choose = choose * f64::from(VECTOR_BITS - z + 1) / f64::from(z);
                }
                let p = choose * q.powi(z as i32) * (1.0 - q).powi((VECTOR_BITS - z) as i32);
                *r += p * lc(z, zo as u32);
            }
        }
        t
    })
}

/// [`held_signed`] of one word, at least 0.
#[inline]
pub fn held(word: u32, v: Vector) -> f64 {
    held_signed(word, v).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_are_eight_distinct_bits() {
        for s in 0..512u64 {
            let v = Vector::of(s);
            assert_eq!(v.mask().count_ones(), VECTOR_BITS);
            let or = (0..VECTOR_BITS).fold(0, |m, i| m | v.bit(i));
            assert_eq!(or, v.mask());
        }
    }

    #[test]
    fn units_are_the_coupon_partial_sums() {
        assert!(
            (UNIT[0] - (1.0 + 8.0 / 7.0 + 8.0 / 6.0 + 8.0 / 5.0 + 2.0 + 8.0 / 3.0)).abs() < 1e-12
        );
        assert!((UNIT[1] - (UNIT[0] - 1.0)).abs() < 1e-12);
        assert!((UNIT[2] - 7.6).abs() < 1e-12);
    }

    #[test]
    fn noise_class_rounds_the_level() {
        // 8 x ones / 24: 0-1 ones -> 0, 2-4 -> 1, 5+ -> 2 (and above, clamped).
        let got: Vec<usize> = (0..=24).map(noise_class).collect();
        assert_eq!(&got[..6], &[0, 0, 1, 1, 1, 2]);
        assert!(got[6..].iter().all(|&c| c == 2));
    }

    /// A flow alone in its word saturates every `UNIT[0]` packets on average, and the vector
    /// holds nothing after a recycle (an empty rest: class 0, all vector bits cleared).
    #[test]
    fn a_lone_flow_saturates_every_unit_packets() {
        let mut bits = Bits::new(7);
        let v = Vector::of(0x1a5);
        let mut w = 0u32;
        let (mut sats, n) = (0u64, 200_000u64);
        for _ in 0..n {
            if let Some(c) = encode(&mut w, v, &mut bits) {
                assert_eq!(c, 0);
                assert_eq!(w, 0);
                sats += 1;
            }
        }
        let per = n as f64 / sats as f64;
        // 20 k cycles of variance about 10: the mean is within 1% of 9.74 with margin.
        assert!(
            (per / UNIT[0] - 1.0).abs() < 0.01,
            "{per} packets per saturation"
        );
    }

    #[test]
    fn held_reads_a_clean_vector() {
        let v = Vector::of(3);
        assert_eq!(held(0, v), 0.0);
        // One bit in an empty word: one packet (the noise reading of an empty rest is 0).
        assert!((held(v.bit(0), v) - 1.0).abs() < 1e-12);
        // Noise only outside the vector never makes the estimate negative.
        assert_eq!(held(!v.mask(), v), 0.0);
    }

    #[test]
    fn recycle_keeps_the_noise_level_and_the_rest() {
        let mut bits = Bits::new(1);
        let v = Vector::of(77);
        for keep in 0..3 {
            let w = recycle(u32::MAX, v, keep, &mut bits);
            assert_eq!((w & v.mask()).count_ones(), keep);
            assert_eq!(w & !v.mask(), !v.mask());
        }
    }

    #[test]
    fn rounding_is_unbiased() {
        let mut bits = Bits::new(3);
        let n = 100_000;
        let s: u64 = (0..n).map(|_| bits.round(2.25)).sum();
        assert!((s as f64 / n as f64 - 2.25).abs() < 0.01);
    }
}
