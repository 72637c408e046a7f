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
//! with `n_s > 0`, which prunes the enumeration; weights are handled in log space.

use std::cell::OnceCell;
use std::collections::HashMap;

use algo::{Algorithm, ConfigError, MergeError, Task};
use key::{reduce, FlowKey, HashFn, HashInput};
use serde::{Deserialize, Serialize};

use crate::rows::prefetch;
use crate::BATCH;

const MRAC_SALT: u64 = 0x6d72_6163_0000_0000; // "mrac"

/// Flow sizes at or above this are reported at this index of the dense distribution (keeps
/// the output allocation bounded whatever the counters hold).
pub const MAX_FSD_SIZE: usize = 1 << 24;

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

    /// One E-step plus M-step.
    pub fn step(&mut self) {
        let sizes: Vec<u64> = self.n.iter().map(|&(s, _)| s).collect();
        let lw: Vec<f64> = self.n.iter().map(|&(_, c)| (c / self.m).ln()).collect();
        let mut acc = vec![0.0f64; sizes.len()];
        // Values whose every split has probability 0 (only after underflow): keep them as one
        // flow, so that the sum invariant still holds.
        let mut extra: HashMap<u64, f64> = HashMap::new();
        let mut stack: Vec<usize> = Vec::with_capacity(6);
        for &(v, y) in &self.hist {
            let k = max_parts(v);
            let (mut mx, mut sum) = (f64::NEG_INFINITY, 0.0f64);
            enumerate(
                &sizes,
                &lw,
                v,
                sizes.len(),
                k,
                &mut stack,
                0.0,
                0,
                &mut |_, l| {
                    if l > mx {
                        sum = sum * (mx - l).exp() + 1.0;
                        mx = l;
                    } else {
                        sum += (l - mx).exp();
                    }
                },
            );
            if !(sum > 0.0 && mx.is_finite()) {
                *extra.entry(v).or_insert(0.0) += y;
                continue;
            }
            enumerate(
                &sizes,
                &lw,
                v,
                sizes.len(),
                k,
                &mut stack,
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
        }
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
        self.n = n;
    }
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

    fn compute(&self) -> MracEstimate {
        let w = self.cfg.width as f64;
        let zeros: Vec<usize> = (0..self.cfg.arrays)
            .map(|a| self.array(a).iter().filter(|&&c| c == 0).count())
            .collect();
        let mut used: Vec<usize> = (0..self.cfg.arrays)
            .filter(|&a| zeros[a] as f64 / w >= self.cfg.min_empty_fraction)
            .collect();
        if used.is_empty() {
            // No array is light enough: use the least loaded one alone.
            let best = (0..self.cfg.arrays).max_by_key(|&a| (zeros[a], usize::MAX - a));
            used.extend(best);
        }
        let p: f64 = used.iter().map(|&a| self.sampling_probability(a)).sum();
        let scale = if p > 0.0 { 1.0 / p } else { 1.0 };
        let mut fsd: Vec<f64> = vec![0.0];
        let mut flows = 0.0;
        for &a in &used {
            let mut em = Em::new(self.array(a));
            for _ in 0..self.cfg.em_iterations {
                em.step();
            }
            for &(s, c) in em.estimates() {
                let s = (s as usize).min(MAX_FSD_SIZE);
                if fsd.len() <= s {
                    fsd.resize(s + 1, 0.0);
                }
                fsd[s] += c * scale;
                flows += c * scale;
            }
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
        let w = self.cfg.width;
        let least = (0..self.cfg.arrays)
            .map(|a| self.array(a).iter().filter(|&&c| c == 0).count())
            .max()
            .unwrap_or(w);
        if !matches!(task, Task::Cardinality | Task::FlowSizeDistribution)
            || least as f64 / w as f64 >= self.cfg.min_empty_fraction
        {
            return Vec::new();
        }
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
}
