//! Portable sampling primitives. Everything here turns raw 64-bit PCG outputs into draws with
//! integer arithmetic, IEEE basic operations and `libm` (a pure-Rust libm), so the same seed gives
//! the same draws on every host and with every version of `rand` (its `gen_range` and
//! distributions do not promise value stability across releases).

use rand_pcg::Pcg64Mcg;

/// The generator's RNG for stream `stream` of master seed `seed`. The 128-bit state comes from two
/// splitmix64 outputs of `key::sub_seed`, so streams are independent-looking and portable.
pub(crate) fn rng(seed: u64, stream: u64) -> Pcg64Mcg {
    let a = key::sub_seed(seed, 2 * stream);
    let b = key::sub_seed(seed, 2 * stream + 1);
    Pcg64Mcg::new(((a as u128) << 64) | b as u128)
}

/// A uniform double in the open interval (0, 1) from the top 53 bits of `x`.
#[inline]
pub(crate) fn unit_open(x: u64) -> f64 {
    ((x >> 11) as f64 + 0.5) * (1.0 / (1u64 << 53) as f64)
}

/// Walker's alias method (Vose's construction, "A linear algorithm for generating random numbers
/// with a given distribution", IEEE TSE 1991): O(n) build, O(1) exact draw.
///
/// One 64-bit draw picks both the column and the coin: the column is the high word of
/// `x * n` (Lemire's multiply-shift, as `key::reduce`) and the coin is the top half of the low
/// word, which given the column is uniform at 32-bit resolution for n <= 2^32. Column bias is at
/// most n / 2^64 and each column's split is exact to 2^-32, far below sampling noise. Threshold and
/// alias share one 8-byte entry, so a draw touches one cache line of the table.
pub(crate) struct Alias {
    /// (accept the column itself when the coin is below this, otherwise take this index).
    table: Vec<(u32, u32)>,
}

impl Alias {
    /// Zipf over `n` ranks: rank r (1-based) has weight r^-s. Index 0 is rank 1.
    pub(crate) fn zipf(n: usize, s: f64) -> Alias {
        let w: Vec<f64> = (1..=n).map(|r| libm::pow(r as f64, -s)).collect();
        Alias::from_weights(&w)
    }

    /// From non-negative finite weights with a positive sum and `1 <= len <= u32::MAX`.
    pub(crate) fn from_weights(w: &[f64]) -> Alias {
        let n = w.len();
        let sum: f64 = w.iter().sum();
        let scale = n as f64 / sum;
        let mut p: Vec<f64> = w.iter().map(|x| x * scale).collect();
        // Default: keep the column always (threshold MAX; the coin MAX then lands on the alias,
        // which is the column itself).
        let mut table: Vec<(u32, u32)> = (0..n as u32).map(|i| (u32::MAX, i)).collect();
        let (mut small, mut large): (Vec<u32>, Vec<u32>) =
            (0..n as u32).partition(|&i| p[i as usize] < 1.0);
        while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
            small.pop();
            let (s, l) = (s as usize, l as usize);
            // `as` saturates, and p[s] < 1, so this is < 2^32.
            table[s] = ((p[s] * 4_294_967_296.0) as u32, l as u32);
            p[l] = (p[l] + p[s]) - 1.0;
            if p[l] < 1.0 {
                large.pop();
                small.push(l as u32);
            }
        }
        // Whatever is left in either list has probability 1 up to rounding and keeps the default.
        Alias { table }
    }

    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// The index drawn by the 64-bit random word `x`.
    #[inline]
    pub(crate) fn sample(&self, x: u64) -> usize {
        let m = x as u128 * self.table.len() as u128;
        let col = (m >> 64) as usize; // < len, since x < 2^64
        let coin = (m as u64 >> 32) as u32;
        match self.table.get(col) {
            Some(&(t, _)) if coin < t => col,
            Some(&(_, a)) => a as usize,
            None => 0,
        }
    }
}

/// Index in `0..n` with P(k) = ln((k+2)/(k+1)) / ln(n+1) ≈ 1 / ((k+1.5) ln(n+1)): a Zipf(1)-like
/// popularity without a table (the floor of a log-uniform variate on [1, n+1)). Used for host and
/// server popularity, where the shape matters but exactness does not.
pub(crate) struct LogUniform {
    n: u64,
    ln_n1: f64,
}

impl LogUniform {
    pub(crate) fn new(n: u64) -> LogUniform {
        let n = n.max(1);
        LogUniform {
            n,
            ln_n1: libm::log((n + 1) as f64),
        }
    }

    #[inline]
    pub(crate) fn sample(&self, x: u64) -> u64 {
        let v = libm::exp(unit_open(x) * self.ln_n1);
        // v in [1, n+1); `as` saturates, min() guards rounding at the top.
        ((v as u64).saturating_sub(1)).min(self.n - 1)
    }
}

/// Geometric train lengths on 1, 2, ... with the given mean: P(L = k) = (1-p)^(k-1) p, p = 1/mean,
/// by inversion L = 1 + floor(ln U / ln(1-p)).
pub(crate) struct Geometric {
    /// ln(1 - p); -inf when mean = 1, which makes every length 1.
    ln_q: f64,
}

impl Geometric {
    pub(crate) fn new(mean: f64) -> Geometric {
        let p = 1.0 / mean.max(1.0);
        Geometric {
            ln_q: libm::log(1.0 - p),
        }
    }

    #[inline]
    pub(crate) fn sample(&self, x: u64) -> u64 {
        // ln U is finite and negative; divided by ln_q < 0 it is >= 0 (+0 when ln_q = -inf).
        let extra = libm::log(unit_open(x)) / self.ln_q;
        1u64.saturating_add(extra as u64)
    }
}

/// Fenwick (binary indexed) tree of per-flow remaining packet counts: draws a flow with
/// probability proportional to its remaining count in O(log n), and decrements in O(log n).
pub(crate) struct Fenwick {
    /// 1-based; tree[i] sums counts (i - lowbit(i), i].
    tree: Vec<u64>,
    top: usize,
}

impl Fenwick {
    pub(crate) fn new(counts: &[u64]) -> Fenwick {
        let n = counts.len();
        let mut tree = vec![0u64; n + 1];
        tree[1..].copy_from_slice(counts);
        for i in 1..=n {
            let j = i + (i & i.wrapping_neg());
            if j <= n {
                tree[j] += tree[i];
            }
        }
        let top = if n == 0 {
            0
        } else {
            1 << (usize::BITS - 1 - n.leading_zeros())
        };
        Fenwick { tree, top }
    }

    /// The 0-based index holding the `target`-th unit (0-based) of the running total, i.e. the
    /// smallest i with prefix_sum(i) > target. Requires target < total.
    #[cfg(test)]
    pub(crate) fn find(&self, target: u64) -> usize {
        self.find_rem(target).0
    }

    /// [`Fenwick::find`] and the offset of `target` inside the found element.
    pub(crate) fn find_rem(&self, target: u64) -> (usize, u64) {
        let n = self.tree.len() - 1;
        let (mut pos, mut rem, mut step) = (0usize, target, self.top);
        while step > 0 {
            let nxt = pos + step;
            if nxt <= n {
                if let Some(&t) = self.tree.get(nxt) {
                    if t <= rem {
                        pos = nxt;
                        rem -= t;
                    }
                }
            }
            step >>= 1;
        }
        (pos, rem)
    }

    /// Subtract `v` from element `i` (0-based).
    pub(crate) fn sub(&mut self, i: usize, v: u64) {
        let mut j = i + 1;
        while let Some(t) = self.tree.get_mut(j) {
            *t = t.wrapping_sub(v);
            j += j & j.wrapping_neg();
        }
    }
}

/// Per-flow remaining budgets with proportional draws: a [`Fenwick`] tree over blocks of
/// [`BLOCK`] flows, then a linear scan inside the block. The block tree is F/64 entries (12 KB at
/// 100k flows) and stays in cache, and the scan reads 512 contiguous bytes the prefetcher
/// streams, where a Fenwick tree over all flows walks log2(F) dependent cache misses a draw.
/// Same answer as a flat tree: the smallest i with prefix_sum(i) > target.
pub(crate) struct Budgets {
    counts: Vec<u64>,
    blocks: Fenwick,
}

pub(crate) const BLOCK: usize = 64;

impl Budgets {
    pub(crate) fn new(counts: Vec<u64>) -> Budgets {
        let sums: Vec<u64> = counts.chunks(BLOCK).map(|c| c.iter().sum()).collect();
        Budgets {
            blocks: Fenwick::new(&sums),
            counts,
        }
    }

    pub(crate) fn get(&self, i: usize) -> u64 {
        self.counts.get(i).copied().unwrap_or(0)
    }

    /// The index holding unit `target` of the remaining total. Requires target < total; returns
    /// `None` otherwise.
    pub(crate) fn find(&self, target: u64) -> Option<usize> {
        let (block, mut rem) = self.blocks.find_rem(target);
        let start = block * BLOCK;
        for (j, &c) in self.counts.get(start..)?.iter().take(BLOCK).enumerate() {
            if rem < c {
                return Some(start + j);
            }
            rem -= c;
        }
        None
    }

    /// Take `v` (<= its budget) from element `i`.
    pub(crate) fn sub(&mut self, i: usize, v: u64) {
        if let Some(c) = self.counts.get_mut(i) {
            let v = v.min(*c);
            *c -= v;
            self.blocks.sub(i / BLOCK, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngCore;

    #[test]
    fn alias_matches_weights() {
        let w = [5.0, 0.0, 1.0, 2.0, 0.5, 1.5];
        let a = Alias::from_weights(&w);
        let mut r = rng(7, 0);
        let mut c = [0u64; 6];
        let n = 600_000;
        for _ in 0..n {
            c[a.sample(r.next_u64())] += 1;
        }
        let sum: f64 = w.iter().sum();
        for i in 0..6 {
            let exp = n as f64 * w[i] / sum;
            // 5 standard deviations of a binomial count.
            let sd = (exp * (1.0 - w[i] / sum)).sqrt();
            assert!(
                (c[i] as f64 - exp).abs() <= 5.0 * sd + 1e-9,
                "{i}: {} vs {exp}",
                c[i]
            );
        }
        assert_eq!(c[1], 0, "zero weight is never drawn");
    }

    #[test]
    fn alias_edges_stay_in_range() {
        for n in [1usize, 2, 3, 1000] {
            let a = Alias::zipf(n, 1.1);
            assert_eq!(a.len(), n);
            for x in [0, 1, u64::MAX, u64::MAX / 2, 0x8000_0000_0000_0001] {
                assert!(a.sample(x) < n);
            }
        }
        let a = Alias::zipf(1, 3.0);
        assert_eq!(a.sample(u64::MAX), 0);
    }

    #[test]
    fn geometric_mean_and_degenerate_case() {
        let g = Geometric::new(6.0);
        let mut r = rng(3, 1);
        let n = 200_000u64;
        let s: u64 = (0..n).map(|_| g.sample(r.next_u64())).sum();
        let mean = s as f64 / n as f64;
        assert!((mean - 6.0).abs() < 0.1, "{mean}");
        let one = Geometric::new(1.0);
        assert!((0..1000).all(|_| one.sample(r.next_u64()) == 1));
        assert!(g.sample(0) >= 1 && g.sample(u64::MAX) >= 1);
    }

    #[test]
    fn log_uniform_is_monotone_popularity() {
        let l = LogUniform::new(1000);
        let mut r = rng(5, 2);
        let mut c = vec![0u64; 1000];
        for _ in 0..200_000 {
            c[l.sample(r.next_u64()) as usize] += 1;
        }
        // P(0) = ln2/ln1001 ≈ 0.1003, P(1) = ln1.5/ln1001 ≈ 0.0587.
        assert!((c[0] as f64 / 200_000.0 - 0.1003).abs() < 0.005);
        assert!((c[1] as f64 / 200_000.0 - 0.0587).abs() < 0.004);
        assert!(c[0] > c[10] && c[10] > c[500]);
        assert_eq!(LogUniform::new(1).sample(u64::MAX), 0);
        assert!(l.sample(u64::MAX) < 1000 && l.sample(0) < 1000);
    }

    #[test]
    fn fenwick_finds_and_decrements() {
        let counts = [3u64, 0, 2, 5, 0, 1, 4];
        let mut f = Fenwick::new(&counts);
        let mut expect = Vec::new();
        for (i, &c) in counts.iter().enumerate() {
            expect.extend((0..c).map(|_| i));
        }
        for (t, &i) in expect.iter().enumerate() {
            assert_eq!(f.find(t as u64), i, "target {t}");
        }
        f.sub(3, 5);
        f.sub(0, 1);
        let counts = [2u64, 0, 2, 0, 0, 1, 4];
        let mut expect = Vec::new();
        for (i, &c) in counts.iter().enumerate() {
            expect.extend((0..c).map(|_| i));
        }
        for (t, &i) in expect.iter().enumerate() {
            assert_eq!(f.find(t as u64), i, "target {t}");
        }
        assert_eq!(Fenwick::new(&[9]).find(8), 0);
    }

    /// The blocked structure answers exactly like a flat Fenwick tree, through decrements.
    #[test]
    fn budgets_equal_flat_tree() {
        let mut x = 99u64;
        let counts: Vec<u64> = (0..1000)
            .map(|i| {
                x = key::mix64(x);
                if i % 7 == 0 {
                    0
                } else {
                    x % 50
                }
            })
            .collect();
        let mut flat = Fenwick::new(&counts);
        let mut b = Budgets::new(counts.clone());
        let mut total: u64 = counts.iter().sum();
        let mut r = rng(11, 0);
        while total > 0 {
            let t = ((r.next_u64() as u128 * total as u128) >> 64) as u64;
            let i = flat.find(t);
            assert_eq!(b.find(t), Some(i), "target {t}");
            let v = b.get(i).min(1 + r.next_u64() % 8);
            assert!(v > 0);
            flat.sub(i, v);
            b.sub(i, v);
            total -= v;
        }
        assert_eq!(b.find(0), None);
    }

    #[test]
    fn streams_are_fixed() {
        // Portability pin: these words must never change, on any host or build.
        let mut r = rng(1, 0);
        let a = r.next_u64();
        assert_eq!(a, 4_519_050_534_652_205_164);
        let mut r2 = rng(1, 0);
        assert_eq!(a, r2.next_u64());
        let z = Alias::zipf(1000, 1.1);
        let draws: Vec<usize> = (0..8).map(|_| z.sample(r.next_u64())).collect();
        assert_eq!(draws, vec![0, 9, 1, 1, 455, 0, 17, 267]);
        assert_ne!(a, rng(1, 1).next_u64());
        assert_ne!(a, rng(2, 0).next_u64());
    }
}
