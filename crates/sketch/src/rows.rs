//! Row indices derived from the one 64-bit hash of a key, and the prefetch helper.
//!
//! Count Sketch, UnivMon and MRAC hash a key once (seeded xxh3-64, `key::HashFn`) and derive all
//! of their row indices from that value as below. (Count-Min and the count array instead map a
//! key code through one multiply-add-shift per row, `crate::count_min`.)
//!
//! - **Split bits** when the width is a power of two and `rows * log2(width) <= 64`: row `i`
//!   takes bits `[i*b, (i+1)*b)` of the hash. xxh3's output bits behave as independent uniform
//!   bits, so the rows are as independent as `rows` separately seeded hashes would be, and the
//!   Count-Min / Count Sketch analyses (pairwise independence within a row, independence across
//!   rows; Cormode & Muthukrishnan 2005, Charikar et al. 2002) apply unchanged. This covers the
//!   papers' defaults: 4 x 65536 (Agg-Evict 4.1), 3 x 65536 (Re-evaluating), 1 x 2^20.
//! - **Kirsch-Mitzenmacher** double hashing otherwise (widths like SketchVisor's 4000, or too
//!   many rows): `g_i = h1 + i*h2 (mod 2^64)` with `h1 = h` and `h2 = mix64(h) | 1`, reduced
//!   with Lemire's multiply-shift (`key::reduce`). Kirsch & Mitzenmacher ("Less hashing, same
//!   performance", ESA 2006) show two hash values suffice asymptotically for Bloom-type
//!   structures; for count sketches it is the standard practical substitute. `mix64` is a
//!   bijection, so `h2` is a deterministic function of `h`: two keys collide in every row only if
//!   their 64-bit hashes are equal (probability 2^-64 per pair).

use key::{mix64, reduce};
use serde::{Deserialize, Serialize};

/// Largest number of rows any sketch here accepts (keeps per-key scratch on the stack).
pub const MAX_ROWS: usize = 16;

/// How row indices are derived from one 64-bit hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RowIndex {
    /// Row `i` uses bits `[i*bits, (i+1)*bits)` of the hash.
    Split { bits: u32 },
    /// Kirsch-Mitzenmacher `reduce(h + i*h2, width)`.
    DoubleHash { width: usize },
}

impl RowIndex {
    pub fn new(rows: usize, width: usize) -> RowIndex {
        if width.is_power_of_two() {
            let bits = width.trailing_zeros();
            if (rows as u64) * u64::from(bits) <= 64 {
                return RowIndex::Split { bits };
            }
        }
        RowIndex::DoubleHash { width }
    }

    /// The second hash of the double-hashing scheme (unused by `Split`).
    #[inline(always)]
    pub fn h2(self, h: u64) -> u64 {
        match self {
            RowIndex::Split { .. } => 0,
            RowIndex::DoubleHash { .. } => mix64(h) | 1,
        }
    }

    /// Column of `row` (always `< width`). `h2` must be `self.h2(h)`.
    #[inline(always)]
    pub fn column(self, h: u64, h2: u64, row: usize) -> usize {
        match self {
            RowIndex::Split { bits } => {
                // rows * bits <= 64 was checked at construction, so the shift is < 64 whenever
                // bits > 0; with bits == 0 (width 1) the mask is 0.
                let shift = (row as u32).wrapping_mul(bits) & 63;
                let mask = if bits >= 64 {
                    u64::MAX
                } else {
                    (1u64 << bits) - 1
                };
                ((h >> shift) & mask) as usize
            }
            RowIndex::DoubleHash { width } => {
                reduce(h.wrapping_add((row as u64).wrapping_mul(h2)), width)
            }
        }
    }
}

pub use key::prefetch_at as prefetch;

/// Hint the CPU to fetch every cache line of `slice` (a batch's keys or weights: about 19 lines
/// for 32 keys). Issued all at once, these misses overlap; left to the hashing loop, only the
/// few keys its out-of-order window reaches are in flight at a time. Timing only.
#[inline(always)]
pub fn prefetch_all<T>(slice: &[T]) {
    let bytes = std::mem::size_of_val(slice);
    let p = slice.as_ptr().cast::<u8>();
    let mut off = 0;
    while off < bytes {
        prefetch_ptr(p.wrapping_add(off));
        off += 64;
    }
}

pub use key::prefetch as prefetch_ptr;

/// Median of a small slice of estimates (reordered in place). For an even count it is the mean
/// of the two middle values rounded toward negative infinity (Count Sketch, ALGORITHMS.md 2).
#[inline]
pub fn median(v: &mut [i64]) -> i64 {
    // Four rows (the Count Sketch and UnivMon defaults): the middle two of four values are the
    // larger of the pairs' minima and the smaller of their maxima, found branch-free instead of
    // by a sort call on every update. Same value as the sort below (`median_of_four_is_sorts`).
    if let [a, b, c, d] = *v {
        let mid = i128::from(a.min(b).max(c.min(d))) + i128::from(a.max(b).min(c.max(d)));
        return mid.div_euclid(2) as i64;
    }
    median_sorted(v)
}

/// [`median`] by sorting, for any count (the twin of its four-value path).
fn median_sorted(v: &mut [i64]) -> i64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        let (a, b) = (v[n / 2 - 1] as i128, v[n / 2] as i128);
        (a + b).div_euclid(2) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_uses_disjoint_bit_fields() {
        let r = RowIndex::new(4, 65536);
        assert_eq!(r, RowIndex::Split { bits: 16 });
        let h = 0x1111_2222_3333_4444u64;
        let cols: Vec<usize> = (0..4).map(|i| r.column(h, r.h2(h), i)).collect();
        assert_eq!(cols, vec![0x4444, 0x3333, 0x2222, 0x1111]);
        assert_eq!(RowIndex::new(1, 1), RowIndex::Split { bits: 0 });
        assert_eq!(RowIndex::new(1, 1).column(u64::MAX, 0, 0), 0);
    }

    #[test]
    fn double_hash_stays_in_range() {
        let r = RowIndex::new(5, 4000);
        assert_eq!(r, RowIndex::DoubleHash { width: 4000 });
        let r2 = RowIndex::new(5, 65536); // 5 * 16 > 64 bits
        assert!(matches!(r2, RowIndex::DoubleHash { .. }));
        for h in [0u64, 1, u64::MAX, 0xdead_beef_0000_0001] {
            // The step is odd (a full cycle mod 2^64) and derived from h alone.
            assert_eq!(r.h2(h), mix64(h) | 1);
            assert_eq!(RowIndex::Split { bits: 16 }.h2(h), 0);
            for i in 0..5 {
                assert!(r.column(h, r.h2(h), i) < 4000);
            }
        }
    }

    #[test]
    fn median_even_and_odd() {
        assert_eq!(median(&mut [3, 1, 2]), 2);
        assert_eq!(median(&mut [5, 1, 4, 2, 3]), 3);
        assert_eq!(median(&mut [4, 1, 3, 2]), 2);
        assert_eq!(median(&mut [-3, -2]), -3);
        assert_eq!(median(&mut []), 0);
    }

    #[test]
    fn median_of_four_is_sorts() {
        let vals = [
            i64::MIN,
            i64::MIN + 1,
            -7,
            -1,
            0,
            1,
            2,
            3,
            8,
            i64::MAX - 1,
            i64::MAX,
        ];
        let n = vals.len();
        for i in 0..n * n * n * n {
            let v = [
                vals[i % n],
                vals[i / n % n],
                vals[i / n / n % n],
                vals[i / n / n / n],
            ];
            assert_eq!(
                median(&mut v.clone()),
                median_sorted(&mut v.clone()),
                "{v:?}"
            );
        }
    }
}
