//! The minimum of a counter array and where it is held: Space-Saving's replacement on its flat
//! table (`table::scan_summary`, issue 14), the one kernel there that reads every counter.
//!
//! [`min_ties`] runs the AVX2 kernel when the CPU has AVX2 (std caches the detection), else
//! [`min_ties_scalar`], its twin: both give the same answer (test `avx2_matches_scalar`). Unsafe code here is the two unaligned loads, in bounds by
//! construction; the crate allows it for [`crate::prefetch`] already, the table crate forbids it.

/// Words of a [`min_ties`] bit set over `n` values.
pub const fn tie_words(n: usize) -> usize {
    n.div_ceil(64)
}

/// The smallest value of `v` and the next larger one (`u64::MAX` if none), or `None` if `v` is
/// empty; and in `ties` (its first [`tie_words`]`(v.len())` words, which must exist,
/// overwritten) the bit set of the indices holding the smallest: bit `i % 64` of word `i / 64`.
/// A bit set rather than a list of indices: the second pass then has no branch on where the
/// ties fall (a list's pushes were most of the kernel's time, issue 14).
#[inline]
pub fn min_ties(v: &[u64], ties: &mut [u64]) -> Option<(u64, u64)> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked on the line above), the kernel's only requirement.
        return unsafe { avx2::min_ties(v, ties) };
    }
    min_ties_scalar(v, ties)
}

/// [`min_ties`] without SIMD (the fallback, and the reference of the equivalence test).
pub fn min_ties_scalar(v: &[u64], ties: &mut [u64]) -> Option<(u64, u64)> {
    let m = v.iter().copied().min()?;
    for (word, c) in ties.iter_mut().zip(v.chunks(64)) {
        *word = tie_bits(c, m, 0);
    }
    Some((m, above(v, m)))
}

/// The smallest value of `v` above `m` (`u64::MAX` if none).
#[inline]
fn above(v: &[u64], m: u64) -> u64 {
    v.iter()
        .copied()
        .filter(|&x| x > m)
        .min()
        .unwrap_or(u64::MAX)
}

/// Bit `at + i` set where `c[i] == m` (`at + c.len()` at most 64).
#[inline]
fn tie_bits(c: &[u64], m: u64, at: usize) -> u64 {
    c.iter()
        .enumerate()
        .fold(0, |b, (i, &x)| b | u64::from(x == m) << (at + i))
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// Four counters from `c[at..at + 4]`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn load4(c: &[u64], at: usize) -> __m256i {
        let c = &c[at..at + 4];
        // SAFETY: `c` holds 4 u64 = 32 readable bytes (the slice above is bounds-checked);
        // `loadu` takes any alignment.
        unsafe { _mm256_loadu_si256(c.as_ptr().cast()) }
    }

    /// The 4 lanes of `a` (flipped back), stored.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn lanes(a: __m256i, flip: __m256i) -> [u64; 4] {
        let mut l = [0u64; 4];
        // SAFETY: `l` is 32 writable bytes; `storeu` takes any alignment.
        unsafe { _mm256_storeu_si256(l.as_mut_ptr().cast(), _mm256_xor_si256(a, flip)) };
        l
    }

    /// [`super::min_ties`] with AVX2: a first pass keeps four running minima of 4 lanes each
    /// (AVX2 has no unsigned 64-bit minimum: the counters are compared as signed after flipping
    /// their top bit), a second compares every group of 4 with the minimum, puts the 4 lanes'
    /// match bits in place and keeps a running minimum of the lanes that do not match.
    #[target_feature(enable = "avx2")]
    pub(super) fn min_ties(v: &[u64], ties: &mut [u64]) -> Option<(u64, u64)> {
        if v.is_empty() {
            return None;
        }
        let flip = _mm256_set1_epi64x(i64::MIN);
        let mut acc = [_mm256_set1_epi64x(i64::MAX); 4]; // u64::MAX, flipped
        let wide = v.len() / 16 * 16;
        for at in (0..wide).step_by(16) {
            for (j, a) in acc.iter_mut().enumerate() {
                let x = _mm256_xor_si256(load4(v, at + 4 * j), flip);
                *a = _mm256_blendv_epi8(*a, x, _mm256_cmpgt_epi64(*a, x));
            }
        }
        let m = acc
            .iter()
            .flat_map(|&a| lanes(a, flip))
            .chain(v[wide..].iter().copied())
            .min()
            .unwrap_or(u64::MAX);
        let target = _mm256_set1_epi64x(m as i64);
        let top = _mm256_set1_epi64x(i64::MAX);
        let mut next = top;
        let mut tail_next = u64::MAX;
        for (word, c) in ties.iter_mut().zip(v.chunks(64)) {
            let quads = c.len() / 4 * 4;
            let mut bits = super::tie_bits(&c[quads..], m, quads);
            tail_next = tail_next.min(super::above(&c[quads..], m));
            for at in (0..quads).step_by(4) {
                let x = load4(c, at);
                let eq = _mm256_cmpeq_epi64(x, target);
                bits |= (_mm256_movemask_pd(_mm256_castsi256_pd(eq)) as u64) << at;
                // The lanes above the minimum, flipped; the minimum's lanes as u64::MAX.
                let x = _mm256_blendv_epi8(_mm256_xor_si256(x, flip), top, eq);
                next = _mm256_blendv_epi8(next, x, _mm256_cmpgt_epi64(next, x));
            }
            *word = bits;
        }
        let next = lanes(next, flip).into_iter().fold(tail_next, u64::min);
        Some((m, next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scalar kernel finds the minimum and the next value and marks exactly the minimum's
    /// indices, and the AVX2 kernel (when the CPU has it) gives the same, for lengths around the 4- and 16-lane steps, with the minimum at the ends, in
    /// the tails, tied many times, and with counters past 2^63 (the signed-compare trick).
    #[test]
    fn avx2_matches_scalar() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        assert_eq!(min_ties(&[], &mut []), None);
        assert_eq!(min_ties_scalar(&[], &mut []), None);
        for len in (1..70).chain([127, 128, 129, 8192]) {
            for case in 0..7 {
                let v: Vec<u64> = (0..len)
                    .map(|i| match case {
                        0 => next() % 5,                                // many ties
                        1 => next(),                                    // any u64, past 2^63
                        2 => u64::MAX - next() % 3,                     // all near the top
                        3 => (len - i) as u64,                          // minimum last (a tail)
                        4 => i as u64,                                  // minimum first
                        5 => 7,                                         // all equal: no next
                        _ if next() % 2 == 0 => (1 << 63) + next() % 3, // around the flipped bit
                        _ => (1 << 63) - 1 - next() % 3,
                    })
                    .collect();
                // Stale words (all ones) are overwritten.
                let (mut a, mut b) = (vec![!0; tie_words(len)], vec![!0; tie_words(len)]);
                let want = min_ties_scalar(&v, &mut b);
                let m = v.iter().copied().min().unwrap();
                let next = v.iter().copied().filter(|&x| x > m).min();
                assert_eq!(want, Some((m, next.unwrap_or(u64::MAX))));
                for (i, &x) in v.iter().enumerate() {
                    assert_eq!(b[i / 64] >> (i % 64) & 1 == 1, x == m, "scalar: len {len}");
                }
                if len % 64 != 0 {
                    assert_eq!(b[len / 64] >> (len % 64), 0, "bits past the end");
                }
                assert_eq!(min_ties(&v, &mut a), want, "len {len} case {case}");
                assert_eq!(a, b, "len {len} case {case}");
                #[cfg(target_arch = "x86_64")]
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: AVX2 checked above.
                    let got = unsafe { avx2::min_ties(&v, &mut a) };
                    assert_eq!((got, &a), (want, &b), "avx2: len {len} case {case}");
                }
            }
        }
    }
}
