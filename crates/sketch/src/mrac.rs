//! MRAC, multi-resolution array of counters (Kumar, Sung, Xu & Wang, SIGMETRICS'04;
//! ALGORITHMS.md 8): flow-size distribution and cardinality from counters by EM.
//!
//! Layout. `arrays` arrays of `width` u32 counters, `C[h(x)] += w` (linear; count packets, since
//! EM over byte values is intractable). One hash per key picks the array by its trailing one
//! bits (array `a` with probability `2^-(a+1)`, the last array takes the remaining `2^-(A-1)`)
//! and the column by its high bits. The default is Agg-Evict's 4 x 65536 multi-resolution
//! setting (section 4.1 and its artifact); `arrays = 1` gives the original single array
//! (SketchVisor uses 1 x 4000).
//!
//! Estimation. EM runs on every array separately (its flows are a hash partition of all
//! flows). The arrays are a partition, not samples, so their estimates add up; an array too
//! loaded for EM (fewer than `min_empty_fraction` of its counters are zero: many counters hold
//! several flows and the split enumeration is truncated) is left out and the sum of the others
//! is scaled by the inverse of their total sampling probability, which is the multi-resolution
//! idea. If no array qualifies the least loaded one is used alone.
//!
//! EM (section 3 of the paper, with ElasticSketch's approximation limits): initialise
//! `n_s = y_s` (the number of counters of value `s`), so `n = m - y_0`; E-step: for each value
//! `v` with `y_v > 0`, enumerate the splits of `v` into at most 6 flows (`v <= 50`), 4
//! (`<= 300`), 3 (`<= 600`) or 2 (above), with weights
//! `prod_s (n_s/m)^{f_s} / f_s!` (the Poisson probability with `lambda = n/m`,
//! `phi_s = n_s/n`; `e^-lambda` cancels in the normalisation), and add
//! `y_v * P(split | v) * f_s` to `n_s`; M-step: `n = sum n_s`. Every split of `v` sums to `v`,
//! so `sum_s s * n_s = sum of counters` after every iteration (tested). Splits use only sizes
//! with `n_s > 0`. The E-step does not enumerate splits: it sums them by generating functions
//! (`Em::step`), the same sums term for term in `O(600 D)` per iteration for `D` distinct values
//! instead of `O(D^3)`, about 250x faster at 4 x 65536 (10-15 ms an epoch instead of 2-4 s); the
//! enumeration in log space stays as its tested reference twin and as the fallback for values
//! whose splits underflow.

use std::cell::OnceCell;
use std::collections::HashMap;

use algo::{Algorithm, ConfigError, MergeError, Task};
use key::{reduce, FlowKey, HashFn, HashInput};
use serde::{Deserialize, Serialize};

use crate::rows::prefetch;
use crate::BATCH;

const MRAC_SALT: u64 = 0x6d72_6163_0000_0000; // "mrac"

/// Flow sizes at or above this are reported at this index of the dense distribution (keeps
/// the output allocation bounded whatever the counters hold): `algo::MAX_FSD_SIZE`.
pub const MAX_FSD_SIZE: usize = algo::MAX_FSD_SIZE;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MracConfig {
    /// Number of resolution arrays (1 = plain MRAC).
    pub arrays: usize,
    /// Counters per array.
    pub width: usize,
    /// EM iterations (the paper and ElasticSketch use about 10-20).
    pub em_iterations: usize,
    /// Arrays with a smaller fraction of zero counters are left out of the estimate.
    pub min_empty_fraction: f64,
}

impl Default for MracConfig {
    fn default() -> Self {
        MracConfig {
            arrays: 4,
            width: 65536,
            em_iterations: 10,
            // 0.2 (load ln 5 = 1.6 flows a counter at most): at 0.05 an array of load 2.9 was
            // used, and 10 EM iterations there put cardinality 8-11% off at 380-410 k flows
            // (1.8% at 0.2; issue 12's bars at 1 M flows).
            min_empty_fraction: 0.2,
        }
    }
}

impl MracConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let inv = |field, reason: String| ConfigError::Invalid {
            algo: "mrac",
            field,
            reason,
        };
        if self.arrays == 0 || self.arrays > 16 {
            return Err(inv(
                "arrays",
                format!("must be in 1..=16, got {}", self.arrays),
            ));
        }
        if self.width == 0 || self.arrays.saturating_mul(self.width) > crate::count_min::MAX_CELLS {
            return Err(inv(
                "width",
                format!(
                    "must be >= 1 with arrays * width <= 2^30, got {}",
                    self.width
                ),
            ));
        }
        if self.em_iterations == 0 || self.em_iterations > 1000 {
            return Err(inv(
                "em_iterations",
                format!("must be in 1..=1000, got {}", self.em_iterations),
            ));
        }
        if !(0.0..1.0).contains(&self.min_empty_fraction) {
            return Err(inv(
                "min_empty_fraction",
                format!("must be in [0, 1), got {}", self.min_empty_fraction),
            ));
        }
        Ok(())
    }
}

/// Largest number of flows a counter of value `v` is split into. ElasticSketch's EMFSD allows 6
/// flows up to 50, 4 up to 300, 3 up to 600 and 2 above; we allow 4 flows only up to 100. The
/// splits of v into at most 4 parts grow as v^3/144 (~190k for v = 300), so its 51..=300 band
/// cost ~28 s per 2 M-packet epoch at 4 x 65536; with 3 parts the band costs ~25x less, and a
/// counter of more than 100 packets splitting into 4 flows is rare in the MRAC setting (one hash,
/// load well below 1). Measured on the built-in trace: MRD unchanged to 3 decimals.
fn max_parts(v: u64) -> usize {
    match v {
        0..=50 => 6,
        51..=100 => 4,
        101..=600 => 3,
        _ => 2,
    }
}

/// EM state for one array of counters.
#[derive(Clone, Debug)]
pub struct Em {
    m: f64,
    /// `(v, y_v)` for every non-zero counter value `v`, ascending.
    hist: Vec<(u64, f64)>,
    /// Current estimate `(s, n_s)` with `n_s > 0`, ascending by `s`.
    n: Vec<(u64, f64)>,
}

impl Em {
    pub fn new(counters: &[u32]) -> Em {
        let mut h: HashMap<u64, f64> = HashMap::new();
        for &c in counters {
            if c > 0 {
                *h.entry(u64::from(c)).or_insert(0.0) += 1.0;
            }
        }
        let mut hist: Vec<(u64, f64)> = h.into_iter().collect();
        hist.sort_unstable_by_key(|&(v, _)| v);
        Em {
            m: counters.len().max(1) as f64,
            n: hist.clone(),
            hist,
        }
    }

    /// `(s, n_s)` with `n_s > 0`, ascending by size.
    pub fn estimates(&self) -> &[(u64, f64)] {
        &self.n
    }

    /// Estimated number of flows, `sum n_s`.
    pub fn flows(&self) -> f64 {
        self.n.iter().map(|&(_, c)| c).sum()
    }

    /// `sum_s s * n_s` (equals [`Em::counter_sum`] after every step).
    pub fn weighted_sum(&self) -> f64 {
        self.n.iter().map(|&(s, c)| s as f64 * c).sum()
    }

    pub fn counter_sum(&self) -> f64 {
        self.hist.iter().map(|&(v, y)| v as f64 * y).sum()
    }

    /// One E-step plus M-step, by generating functions instead of enumerating splits.
    ///
    /// With `w_s = n_s / m`, the weight of a split with `f_s` flows of size `s` is
    /// `prod_s w_s^{f_s} / f_s!`, and the splits of `v` into exactly `j` flows weigh
    /// `e_j(v) = [x^v] W(x)^j / j!` together, `W(x) = sum_s w_s x^s`; so
    /// `e_j = (e_{j-1} * W) / j` (a convolution) and `Z_K(v) = sum_{j <= K} e_j(v)` is the total
    /// weight of the splits of `v` into at most `K` flows. A split counted `f_s` times for size
    /// `s` weighs `f_s w_s^{f_s} / f_s! = w_s w_s^{f_s - 1} / (f_s - 1)!`, so
    /// `sum_split P(split | v) f_s = w_s Z_{K-1}(v - s) / Z_K(v)`: the same E-step as the
    /// enumeration, term for term, in `O(V D)` for the `D` sizes up to `V = DENSE_LIMIT`
    /// instead of `O(D^{K-1})` per value. Values above `DENSE_LIMIT` split into at most 2
    /// flows: the pairs summing to `v` are found by two pointers. All terms are positive, so the
    /// sums are accurate to a few ulps; a value whose total weight is below [`MIN_WEIGHT`]
    /// (only after extreme underflow) is enumerated in log space as before.
    pub fn step(&mut self) {
        let sizes: Vec<u64> = self.n.iter().map(|&(s, _)| s).collect();
        let w: Vec<f64> = self.n.iter().map(|&(_, c)| c / self.m).collect();
        let mut acc = vec![0.0f64; sizes.len()];
        // Values left to the log-space enumeration (tiny or zero total weight).
        let mut slow: Vec<(u64, f64)> = Vec::new();
        let dense_end = self.hist.partition_point(|&(v, _)| v <= DENSE_LIMIT);
        let (dense, sparse) = self.hist.split_at(dense_end);
        if let Some(&(top, _)) = dense.last() {
            // cap[j]: the largest dense value whose splits may have j flows; e_j is needed up
            // to there (Z_K(v) and Z_{K-1}(v - s) for v <= cap[K] <= cap[K - 1]).
            let mut cap = [0usize; MAX_PARTS + 1];
            for &(v, _) in dense {
                for c in cap.iter_mut().take(max_parts(v) + 1) {
                    *c = (*c).max(v as usize);
                }
            }
            let nd = sizes.partition_point(|&s| s <= top);
            let mut zc: Vec<Vec<f64>> = Vec::with_capacity(MAX_PARTS + 1);
            let mut e = vec![0.0f64; cap[0] + 1];
            e[0] = 1.0;
            zc.push(e.clone());
            for j in 1..=MAX_PARTS {
                if cap[j] == 0 {
                    break;
                }
                let len = cap[j] + 1;
                let mut next = vec![0.0f64; len];
                for (&s, &ws) in sizes[..nd].iter().zip(&w[..nd]) {
                    let s = s as usize;
                    if s >= len {
                        break;
                    }
                    if j == 1 {
                        // e_0 is 1 at 0 and 0 elsewhere: e_1 = W, the same bits as the
                        // convolution (ws * 1.0, and + ws * 0.0 = + 0.0 elsewhere), without
                        // its third of the step's multiply-adds.
                        next[s] += ws;
                        continue;
                    }
                    for (o, &x) in next[s..].iter_mut().zip(&e[..len - s]) {
                        *o += ws * x;
                    }
                }
                let inv = 1.0 / j as f64;
                let prev = &zc[j - 1];
                let z: Vec<f64> = next
                    .iter_mut()
                    .zip(prev)
                    .map(|(x, &p)| {
                        *x *= inv;
                        p + *x
                    })
                    .collect();
                zc.push(z);
                e = next;
            }
            for &(v, y) in dense {
                let k = max_parts(v);
                let z = zc[k][v as usize];
                if z.is_nan() || z < MIN_WEIGHT {
                    slow.push((v, y));
                    continue;
                }
                let q = y / z;
                let below = &zc[k - 1];
                let hi = sizes[..nd].partition_point(|&s| s <= v);
                for ((a, &s), &ws) in acc.iter_mut().zip(&sizes[..hi]).zip(&w) {
                    *a += q * (ws * below[(v - s) as usize]);
                }
            }
        }
        let mut pairs: Vec<(usize, usize)> = Vec::new();
        for &(v, y) in sparse {
            if max_parts(v) > 2 {
                slow.push((v, y));
                continue;
            }
            // Splits of v into one or two flows: v itself, and a + b = v with a <= b.
            pairs.clear();
            let single = sizes.binary_search(&v).ok();
            let mut z = single.map_or(0.0, |i| w[i]);
            let (mut lo, mut hi) = (0usize, sizes.partition_point(|&s| s < v));
            while lo < hi {
                let t = sizes[lo] + sizes[hi - 1];
                if t < v {
                    lo += 1;
                } else if t > v {
                    hi -= 1;
                } else {
                    let (a, b) = (lo, hi - 1);
                    let p = w[a] * w[b];
                    z += if a == b { 0.5 * p } else { p };
                    pairs.push((a, b));
                    lo += 1;
                    hi -= 1;
                }
            }
            if z.is_nan() || z < MIN_WEIGHT {
                slow.push((v, y));
                continue;
            }
            let q = y / z;
            if let Some(i) = single {
                acc[i] += q * w[i];
            }
            for &(a, b) in &pairs {
                // Two flows of size a (weight w_a^2 / 2, counted twice) or one of each.
                let p = q * (w[a] * w[b]);
                acc[a] += p;
                if a != b {
                    acc[b] += p;
                }
            }
        }
        let mut extra: Vec<(u64, f64)> = Vec::new();
        if !slow.is_empty() {
            let lw: Vec<f64> = w.iter().map(|x| x.ln()).collect();
            let mut stack = Vec::with_capacity(MAX_PARTS);
            for (v, y) in slow {
                if !logspace_value(&sizes, &lw, v, y, &mut stack, &mut acc) {
                    extra.push((v, y));
                }
            }
        }
        self.n = collect_estimate(&sizes, acc, extra);
    }

    /// The enumeration E-step the paper describes, kept as the reference twin of
    /// [`Em::step`] (the two agree to rounding; tested).
    #[cfg(test)]
    fn step_reference(&mut self) {
        let sizes: Vec<u64> = self.n.iter().map(|&(s, _)| s).collect();
        let lw: Vec<f64> = self.n.iter().map(|&(_, c)| (c / self.m).ln()).collect();
        let mut acc = vec![0.0f64; sizes.len()];
        let mut extra: Vec<(u64, f64)> = Vec::new();
        let mut stack: Vec<usize> = Vec::with_capacity(MAX_PARTS);
        for &(v, y) in &self.hist {
            if !logspace_value(&sizes, &lw, v, y, &mut stack, &mut acc) {
                extra.push((v, y));
            }
        }
        self.n = collect_estimate(&sizes, acc, extra);
    }
}

/// Largest [`max_parts`] of any value.
const MAX_PARTS: usize = 6;

/// Values up to this split into more than 2 flows ([`max_parts`]) and go through the dense
/// generating functions of [`Em::step`]; above it, pairs.
const DENSE_LIMIT: u64 = 600;

/// A value whose splits weigh less than this in total is enumerated in log space instead
/// (products that underflow below 1e-308 then matter; above 1e-200 they are < 1e-100 of it).
const MIN_WEIGHT: f64 = 1e-200;

/// E-step of one value `v` (`y` counters) by enumerating its splits in log space: adds
/// `y * P(split | v) * f_s` to `acc[s]`. False if `v` has no split (only after underflow).
fn logspace_value(
    sizes: &[u64],
    lw: &[f64],
    v: u64,
    y: f64,
    stack: &mut Vec<usize>,
    acc: &mut [f64],
) -> bool {
    let k = max_parts(v);
    let (mut mx, mut sum) = (f64::NEG_INFINITY, 0.0f64);
    enumerate(sizes, lw, v, sizes.len(), k, stack, 0.0, 0, &mut |_, l| {
        if l > mx {
            sum = sum * (mx - l).exp() + 1.0;
            mx = l;
        } else {
            sum += (l - mx).exp();
        }
    });
    if !(sum > 0.0 && mx.is_finite()) {
        return false;
    }
    enumerate(
        sizes,
        lw,
        v,
        sizes.len(),
        k,
        stack,
        0.0,
        0,
        &mut |parts, l| {
            let p = y * (l - mx).exp() / sum;
            for &i in parts {
                if let Some(a) = acc.get_mut(i) {
                    *a += p;
                }
            }
        },
    );
    true
}

/// The new `(s, n_s)`: sizes with a positive count, plus values that had no split kept as one
/// flow each (so that the sum invariant still holds).
fn collect_estimate(sizes: &[u64], acc: Vec<f64>, extra: Vec<(u64, f64)>) -> Vec<(u64, f64)> {
    let mut n: Vec<(u64, f64)> = sizes
        .iter()
        .zip(acc)
        .filter(|&(_, c)| c > 0.0)
        .map(|(&s, c)| (s, c))
        .collect();
    for (s, c) in extra {
        match n.binary_search_by_key(&s, |&(x, _)| x) {
            Ok(i) => n[i].1 += c,
            Err(i) => n.insert(i, (s, c)),
        }
    }
    n
}

/// Visit every multiset of at most `slots` sizes from `sizes[..max_idx]` (non-increasing in
/// index, so each multiset once) summing to `rem`, with its log weight
/// `sum lw[s] - ln(f_s!)`, built incrementally: one more copy of the last size, its `r`-th,
/// multiplies the weight by `(n_s/m) / r`.
#[allow(clippy::too_many_arguments)]
fn enumerate(
    sizes: &[u64],
    lw: &[f64],
    rem: u64,
    max_idx: usize,
    slots: usize,
    stack: &mut Vec<usize>,
    logw: f64,
    run: u32,
    f: &mut dyn FnMut(&[usize], f64),
) {
    if rem == 0 {
        f(stack, logw);
        return;
    }
    if slots == 0 || max_idx == 0 {
        return;
    }
    // Every remaining part is <= the next one, so the next part is >= ceil(rem / slots).
    let lo = rem.div_ceil(slots as u64);
    let hi = sizes[..max_idx].partition_point(|&s| s <= rem);
    let mut i = hi;
    while i > 0 {
        i -= 1;
        let s = sizes[i];
        if s < lo {
            break;
        }
        let r = if stack.last() == Some(&i) { run + 1 } else { 1 };
        let l = logw + lw[i] - f64::from(r).ln();
        stack.push(i);
        enumerate(sizes, lw, rem - s, i + 1, slots - 1, stack, l, r, f);
        stack.pop();
    }
}

#[derive(Clone, Debug, Default)]
struct MracEstimate {
    fsd: Vec<f64>,
    flows: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Mrac {
    cfg: MracConfig,
    hash: HashFn,
    counters: Vec<u32>,
    /// EM result, computed on the first query after an update.
    #[serde(skip)]
    cache: OnceCell<MracEstimate>,
}

impl algo::CheckState for Mrac {
    /// The configuration valid (`em_iterations` bounds the EM: a forged count of 2^63 ran it for
    /// ever) and `arrays * width` counters.
    fn check_state(&self) -> Result<(), String> {
        self.cfg.validate().map_err(|e| e.to_string())?;
        if self.counters.len() != self.cfg.arrays * self.cfg.width {
            return Err(format!(
                "{} counters, the configuration has {} x {}",
                self.counters.len(),
                self.cfg.arrays,
                self.cfg.width
            ));
        }
        Ok(())
    }
}

impl Mrac {
    pub fn new(cfg: MracConfig, seed: u64) -> Result<Mrac, ConfigError> {
        cfg.validate()?;
        Ok(Mrac {
            hash: HashFn::new(key::sub_seed(seed, MRAC_SALT)),
            counters: vec![0; cfg.arrays * cfg.width],
            cache: OnceCell::new(),
            cfg,
        })
    }

    pub fn config(&self) -> &MracConfig {
        &self.cfg
    }

    /// All counters, array after array.
    pub fn counters(&self) -> &[u32] {
        &self.counters
    }

    /// Replace the counters by recovered ones (SketchVisor section 5), each rounded to the
    /// nearest integer in `0..=u32::MAX`. Returns false (and changes nothing) when `t` is not
    /// `arrays * width` long.
    pub fn set_counters(&mut self, t: &[f64]) -> bool {
        if t.len() != self.counters.len() {
            return false;
        }
        self.invalidate();
        for (c, &v) in self.counters.iter_mut().zip(t) {
            *c = v.round().clamp(0.0, f64::from(u32::MAX)) as u32;
        }
        true
    }

    /// Counters of array `a` (empty if out of range).
    pub fn array(&self, a: usize) -> &[u32] {
        let w = self.cfg.width;
        self.counters.get(a * w..(a + 1) * w).unwrap_or(&[])
    }

    /// Fraction of all flows hashed to array `a`.
    pub fn sampling_probability(&self, a: usize) -> f64 {
        let last = self.cfg.arrays - 1;
        0.5f64.powi((a.min(last) + usize::from(a < last)) as i32)
    }

    #[inline(always)]
    fn cell(&self, h: u64) -> usize {
        let a = (h.trailing_ones() as usize).min(self.cfg.arrays - 1);
        a * self.cfg.width + reduce(h, self.cfg.width)
    }

    /// Hash a batch, prefetch its counters, then add (either key representation).
    fn add_batch<K: HashInput>(&mut self, keys: &[K], weights: &[u64]) {
        self.invalidate();
        let n = keys.len().min(weights.len());
        let mut cells = [0usize; BATCH];
        let mut start = 0;
        while start < n {
            let end = (start + BATCH).min(n);
            for (c, k) in cells.iter_mut().zip(&keys[start..end]) {
                *c = self.cell(k.hash_by(&self.hash));
                prefetch(&self.counters, *c);
            }
            for (i, &w) in weights[start..end].iter().enumerate() {
                self.add(cells[i], w);
            }
            start = end;
        }
    }

    #[inline(always)]
    fn add(&mut self, cell: usize, w: u64) {
        if let Some(c) = self.counters.get_mut(cell) {
            // Saturate rather than wrap (see count_min).
            *c = c.saturating_add(u32::try_from(w).unwrap_or(u32::MAX));
        }
    }

    #[inline(always)]
    fn invalidate(&mut self) {
        if self.cache.get().is_some() {
            self.cache = OnceCell::new();
        }
    }

    fn estimate(&self) -> &MracEstimate {
        self.cache.get_or_init(|| self.compute())
    }

    /// The arrays the estimate uses: those with at least `min_empty_fraction` of their counters
    /// empty, or, when none is (`true`: overloaded), the least loaded one alone.
    fn arrays_used(&self) -> (Vec<usize>, bool) {
        let w = self.cfg.width as f64;
        let zeros: Vec<usize> = (0..self.cfg.arrays)
            .map(|a| self.array(a).iter().filter(|&&c| c == 0).count())
            .collect();
        let used: Vec<usize> = (0..self.cfg.arrays)
            .filter(|&a| zeros[a] as f64 / w >= self.cfg.min_empty_fraction)
            .collect();
        if !used.is_empty() {
            return (used, false);
        }
        let best = (0..self.cfg.arrays).max_by_key(|&a| (zeros[a], usize::MAX - a));
        (best.into_iter().collect(), true)
    }

    fn compute(&self) -> MracEstimate {
        let (used, _) = self.arrays_used();
        let p: f64 = used.iter().map(|&a| self.sampling_probability(a)).sum();
        let scale = if p > 0.0 { 1.0 / p } else { 1.0 };
        let mut ests: Vec<(usize, f64)> = vec![];
        for &a in &used {
            let mut em = Em::new(self.array(a));
            for _ in 0..self.cfg.em_iterations {
                em.step();
            }
            ests.extend(em.estimates().iter().map(|&(s, c)| {
                (
                    usize::try_from(s).unwrap_or(MAX_FSD_SIZE).min(MAX_FSD_SIZE),
                    c,
                )
            }));
        }
        // Allocated zeroed at its final length (the pages between sizes stay untouched), not
        // grown: one counter near 2^32 made every estimate write 128 MB.
        let mut fsd: Vec<f64> = vec![0.0; ests.iter().map(|e| e.0).max().map_or(1, |m| m + 1)];
        let mut flows = 0.0;
        for (s, c) in ests {
            fsd[s] += c * scale;
            flows += c * scale;
        }
        MracEstimate { fsd, flows }
    }
}

const TASKS: &[Task] = &[Task::FlowSizeDistribution, Task::Cardinality];

impl Algorithm for Mrac {
    fn name(&self) -> &'static str {
        "mrac"
    }
    fn tasks(&self) -> &'static [Task] {
        TASKS
    }
    fn update(&mut self, key: &FlowKey, weight: u64) {
        self.invalidate();
        let j = self.cell(self.hash.hash(key));
        self.add(j, weight);
    }
    fn update_batch(&mut self, keys: &[FlowKey], weights: &[u64]) {
        self.add_batch(keys, weights);
    }
    fn update_batch_u32(&mut self, keys: &[u32], weights: &[u64]) {
        self.add_batch(keys, weights);
    }
    fn reset(&mut self) {
        self.counters.iter_mut().for_each(|c| *c = 0);
        self.cache = OnceCell::new();
    }
    fn memory_bytes(&self) -> usize {
        self.counters.len() * 4
    }
    fn flow_size_distribution(&self) -> Option<Vec<f64>> {
        Some(self.estimate().fsd.clone())
    }
    fn cardinality(&self) -> Option<f64> {
        Some(self.estimate().flows)
    }
    /// When no array keeps `min_empty_fraction` of its counters empty, the estimate comes from
    /// an overloaded one (see `compute`): the EM's answers are then off by more than the bars.
    fn caveats(&self, task: Task, _threshold: Option<u64>, _total: u64) -> Vec<algo::Caveat> {
        if !matches!(task, Task::Cardinality | Task::FlowSizeDistribution) {
            return Vec::new();
        }
        let (used, overloaded) = self.arrays_used();
        if !overloaded {
            return Vec::new();
        }
        let w = self.cfg.width;
        let least = used
            .first()
            .map_or(w, |&a| self.array(a).iter().filter(|&&c| c == 0).count());
        vec![algo::Caveat {
            parameter: "width",
            message: format!(
                "every array is overloaded: the least loaded has {:.1}% of its {w} counters \
                 empty, below min_empty_fraction {}",
                100.0 * least as f64 / w as f64,
                self.cfg.min_empty_fraction
            ),
            suggestion: format!("width = {} (at least)", w.saturating_mul(4)),
        }]
    }
    fn merge(&mut self, other: &dyn Algorithm) -> Result<(), MergeError> {
        let o = algo::merge_peer(self, other, |o| {
            self.cfg.arrays == o.cfg.arrays && self.cfg.width == o.cfg.width && self.hash == o.hash
        })?;
        for (a, b) in self.counters.iter_mut().zip(&o.counters) {
            *a = a.saturating_add(*b);
        }
        self.cache = OnceCell::new();
        Ok(())
    }
}

/// This algorithm's facts, listed in the `catalog` crate.
pub const ENTRY: algo::Entry = algo::Entry {
    name: "mrac",
    tasks: TASKS,
    fit: algo::KeyFit::Any,
    build: |p, ctx| algo::build_with("mrac", p, |c| Mrac::new(c, ctx.seed)),
    // Exact: `arrays * width` u32 counters (validated <= 2^30), allocated at construction.
    memory: |p, _| {
        algo::Entry::memory_with("mrac", p, |c: MracConfig| {
            c.validate()?;
            Ok(c.arrays as u64 * c.width as u64 * 4)
        })
    },
    defaults: algo::defaults_of::<MracConfig>,
    flow_size_only: "",
    resets_to_empty: true,
    save: algo::save_state::<Mrac>,
    load: |b| algo::load_state::<Mrac>("mrac", b),
    // ns per update, u32 / FlowKey path: `cargo run --release -p catalog --example update_costs`.
    cost: algo::UpdateCost {
        u32_ns: 3.52,
        wide_ns: 9.80,
        behind: 0.90,
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The split limits the doc of `max_parts` states (6 flows up to 50, 4 up to 100, 3 up to
    /// 600, 2 above).
    #[test]
    fn split_limits_are_the_documented_ones() {
        let got: Vec<usize> = [1u64, 50, 51, 100, 101, 600, 601, 1 << 40]
            .iter()
            .map(|&v| max_parts(v))
            .collect();
        assert_eq!(got, vec![6, 6, 4, 4, 3, 3, 2, 2]);
    }

    /// Counters of a one-array MRAC of `width` fed `packets` Zipf(`skew`) packets over `flows`
    /// ranks (fixed seed).
    fn zipf_counters(width: usize, packets: usize, flows: usize, skew: f64, seed: u64) -> Vec<u32> {
        let cfg = MracConfig {
            arrays: 1,
            width,
            ..MracConfig::default()
        };
        let mut m = Mrac::new(cfg, seed).unwrap();
        let keys = testkit::zipf_u32(packets, flows, skew, seed);
        m.update_batch_u32(&keys, &vec![1; keys.len()]);
        m.counters().to_vec()
    }

    /// Largest relative difference between two estimates, size by size (a size missing on one
    /// side counts as 0 there), and between their flow counts.
    fn max_rel_diff(a: &Em, b: &Em) -> (f64, f64) {
        let get = |e: &Em, s: u64| {
            let n = e.estimates();
            n.binary_search_by_key(&s, |&(x, _)| x)
                .map_or(0.0, |i| n[i].1)
        };
        let mut worst = 0.0f64;
        for &(s, _) in a.estimates().iter().chain(b.estimates()) {
            let (x, y) = (get(a, s), get(b, s));
            worst = worst.max((x - y).abs() / x.abs().max(y.abs()));
        }
        let flows = (a.flows() - b.flows()).abs() / a.flows().max(b.flows());
        (worst, flows)
    }

    /// Tolerance of the fast E-step against the enumeration. Both compute the same sums of
    /// positive terms, in another order (and products instead of exp of summed logs), so each
    /// step differs by a few hundred ulps at most (~1e-13); EM is a contraction near its fixed
    /// point, so ten steps do not amplify that. 1e-9 is far below the EM's own convergence
    /// (successive iterations still move n_s by 1e-4 and more at 10 iterations).
    const EM_TOL: f64 = 1e-9;

    /// The fast E-step ([`Em::step`]) against its reference twin, the enumeration
    /// ([`Em::step_reference`]), on Zipf counters at loads from 0.2 to 3 flows a counter (values
    /// in every band of `max_parts`, including pairs above 600): the flow-size distributions
    /// and flow counts agree to `EM_TOL` after every one of 10 iterations, and the sum
    /// invariant holds.
    #[test]
    fn fast_em_matches_enumeration() {
        let cases: [(usize, usize, usize, f64, u64); 5] = [
            (4096, 200_000, 1_000, 1.1, 1),
            (4096, 200_000, 5_000, 0.9, 2),
            (4096, 100_000, 20_000, 0.6, 3),
            (2048, 300_000, 4_000, 1.3, 4),
            (1024, 60_000, 3_000, 0.8, 5),
        ];
        for (width, packets, flows, skew, seed) in cases {
            let c = zipf_counters(width, packets, flows, skew, seed);
            let (mut fast, mut slow) = (Em::new(&c), Em::new(&c));
            assert!(
                fast.hist.iter().any(|&(v, _)| v > DENSE_LIMIT),
                "case {seed} has no value above {DENSE_LIMIT}"
            );
            for it in 0..10 {
                fast.step();
                slow.step_reference();
                let (fsd, card) = max_rel_diff(&fast, &slow);
                assert!(
                    fsd <= EM_TOL && card <= EM_TOL,
                    "case {seed}, iteration {it}: fsd {fsd:e}, cardinality {card:e}"
                );
                let (ws, cs) = (fast.weighted_sum(), fast.counter_sum());
                assert!((ws - cs).abs() <= 1e-9 * cs, "case {seed}: {ws} vs {cs}");
            }
        }
    }

    /// Estimates so small that a value's splits weigh less than `MIN_WEIGHT` go through the
    /// log-space enumeration, and a value with no split is kept as one flow, as in the
    /// reference.
    #[test]
    fn fast_em_falls_back_on_underflow() {
        let em = Em {
            m: 1024.0,
            hist: vec![
                (1, 500.0),
                (2, 40.0),
                (3, 7.0),
                (7, 2.0),
                (700, 1.0),
                (1400, 1.0),
            ],
            n: vec![(1, 600.0), (2, 1e-290), (3, 1e-250), (700, 1e-300)],
        };
        let (mut fast, mut slow) = (em.clone(), em);
        for it in 0..5 {
            fast.step();
            slow.step_reference();
            let (fsd, card) = max_rel_diff(&fast, &slow);
            assert!(
                fsd <= EM_TOL && card <= EM_TOL,
                "iteration {it}: fsd {fsd:e}, cardinality {card:e}"
            );
            let (ws, cs) = (fast.weighted_sum(), fast.counter_sum());
            assert!((ws - cs).abs() <= 1e-9 * cs, "{ws} vs {cs}");
        }
    }

    /// Speed of the fast E-step against the enumeration at the default size (4 x 65536, 10
    /// iterations, the arrays `compute` uses) on 2 M-packet epochs; prints both and their ratio.
    /// `cargo test --release -p sketch --lib mrac_em_speed -- --ignored --nocapture` (README,
    /// "Benchmarks"). Ignored in the test suite: the enumeration takes seconds an epoch at this
    /// size, and a timing printout belongs in a benchmark run; `fast_em_matches_enumeration`
    /// checks the same agreement on small arrays in every run.
    #[test]
    #[ignore = "slow (seconds of enumeration) and a timing printout: see README, Benchmarks"]
    fn mrac_em_speed() {
        use std::time::Instant;
        for (flows, skew) in [(100_000, 1.1), (1_000_000, 0.6), (500_000, 0.9)] {
            let mut m = Mrac::new(MracConfig::default(), 1).unwrap();
            let keys = testkit::zipf_u32(2_000_000, flows, skew, 7);
            m.update_batch_u32(&keys, &vec![1; keys.len()]);
            let (used, _) = m.arrays_used();
            let (mut t_fast, mut t_slow) = (0.0, 0.0);
            for &a in &used {
                let t = Instant::now();
                let mut fast = Em::new(m.array(a));
                for _ in 0..m.cfg.em_iterations {
                    fast.step();
                }
                t_fast += t.elapsed().as_secs_f64();
                let t = Instant::now();
                let mut slow = Em::new(m.array(a));
                for _ in 0..m.cfg.em_iterations {
                    slow.step_reference();
                }
                t_slow += t.elapsed().as_secs_f64();
                let (fsd, card) = max_rel_diff(&fast, &slow);
                assert!(fsd <= EM_TOL && card <= EM_TOL, "{fsd:e} {card:e}");
            }
            let t = Instant::now();
            let est = m.compute();
            let t_compute = t.elapsed().as_secs_f64();
            println!(
                "{flows} flows skew {skew}: arrays {used:?}, EM enumeration {:.1} ms, fast {:.2} ms, \
                 ratio {:.0}x; compute() {:.2} ms, {:.0} flows",
                t_slow * 1e3,
                t_fast * 1e3,
                t_slow / t_fast,
                t_compute * 1e3,
                est.flows
            );
        }
    }
}
