//! Count Sketch (Charikar, Chen & Farach-Colton 2002; ALGORITHMS.md 2) with a candidate set,
//! and the signed counter matrix that UnivMon reuses per level.
//!
//! State: `rows x width` i32 counters and per-row sign hashes `s_i(x) in {-1, +1}`. Update
//! `C[i][h_i(x)] += s_i(x) * w`; estimate `median_i s_i(x) * C[i][h_i(x)]` (mean of the two
//! middle values for an even row count). Each row is unbiased with variance `<= F2/width`, so a
//! row errs by more than `sqrt(3 F2 / width)` with probability `<= 1/3` (Chebyshev) and the
//! median fails only if half the rows do.
//!
//! Hashing: one xxh3 value `h` gives the columns ([`crate::rows`]); the signs are bits of
//! `mix64(h ^ SIGN_SALT)`, a bijective remix of the same value, so keys with different 64-bit
//! hashes get decorrelated signs without a second pass over the key bytes.
//!
//! Counters are i32 and saturate at the i32 range instead of wrapping (a wrapped counter flips
//! the sign of the estimate); below saturation (2^31 units per counter per epoch) the sketch is
//! exactly linear, so merges, differences and aggregated updates are bit-exact.

use algo::{Algorithm, ConfigError, Estimate, MergeError, Task};
use key::{mix64, FlowKey, HashFn};
use serde::{Deserialize, Serialize};

use crate::candidates::Candidates;
use crate::count_min::validate_matrix;
use crate::rows::{median, prefetch, RowIndex, MAX_ROWS};
use crate::{sort_estimates, BATCH};

const COUNT_SKETCH_SALT: u64 = 0x636f_756e_745f_736b; // "count_sk"
const SIGN_SALT: u64 = 0x5349_474e_5f42_4954; // "SIGN_BIT"

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CountSketchConfig {
    pub rows: usize,
    pub width: usize,
    /// Candidate-set size for heavy hitters and top-k.
    pub candidates: usize,
}

impl Default for CountSketchConfig {
    fn default() -> Self {
        CountSketchConfig {
            rows: 4,
            width: 65536,
            candidates: 1024,
        }
    }
}

impl CountSketchConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        validate_matrix("count_sketch", self.rows, self.width, self.candidates)
    }
}

#[inline(always)]
fn weight_i32(w: u64) -> i32 {
    i32::try_from(w).unwrap_or(i32::MAX)
}

/// Signed counters and hashing of a Count Sketch (the linear state).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedMatrix {
    rows: usize,
    width: usize,
    index: RowIndex,
    hash: HashFn,
    counters: Vec<i32>,
}

impl SignedMatrix {
    pub(crate) fn new(rows: usize, width: usize, hash: HashFn) -> SignedMatrix {
        SignedMatrix {
            rows,
            width,
            index: RowIndex::new(rows, width),
            hash,
            counters: vec![0; rows * width],
        }
    }

    /// `Ok` when a loaded matrix has the shape `new(rows, width, _)` makes: `rows * width`
    /// counters, indexed as that shape is.
    pub(crate) fn check(&self, rows: usize, width: usize) -> Result<(), String> {
        if self.rows != rows || self.width != width || self.counters.len() != rows * width {
            return Err(format!(
                "{} x {} matrix of {} counters, the configuration has {rows} x {width}",
                self.rows,
                self.width,
                self.counters.len()
            ));
        }
        if self.index != RowIndex::new(rows, width) {
            return Err("row index other than the shape's".into());
        }
        Ok(())
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn width(&self) -> usize {
        self.width
    }

    pub fn counters(&self) -> &[i32] {
        &self.counters
    }

    /// About how many flows reach `t` in absolute value (`candidates::reaching`).
    pub(crate) fn reaching(&self, t: u64) -> u64 {
        crate::candidates::reaching(&self.counters, self.width, |c| {
            u64::from(c.unsigned_abs()) >= t
        })
    }

    #[inline(always)]
    pub(crate) fn hash(&self, k: &FlowKey) -> u64 {
        self.hash.hash(k)
    }

    #[inline(always)]
    fn signs(h: u64) -> u64 {
        mix64(h ^ SIGN_SALT)
    }

    #[inline(always)]
    fn cell(&self, h: u64, h2: u64, r: usize) -> usize {
        r * self.width + self.index.column(h, h2, r)
    }

    /// Median over rows of `sign * counter` for hash `h`.
    #[inline]
    pub(crate) fn estimate_h(&self, h: u64) -> i64 {
        let h2 = self.index.h2(h);
        let s = Self::signs(h);
        let mut v = [0i64; MAX_ROWS];
        for (r, slot) in v.iter_mut().enumerate().take(self.rows) {
            let c = i64::from(self.counters.get(self.cell(h, h2, r)).copied().unwrap_or(0));
            *slot = if (s >> r) & 1 == 1 { -c } else { c };
        }
        median(&mut v[..self.rows.min(MAX_ROWS)])
    }

    /// Median over rows of the signed difference `self - prev` for hash `h`.
    pub(crate) fn change_h(&self, prev: &SignedMatrix, h: u64) -> i64 {
        let h2 = self.index.h2(h);
        let s = Self::signs(h);
        let mut v = [0i64; MAX_ROWS];
        for (r, slot) in v.iter_mut().enumerate().take(self.rows) {
            let j = self.cell(h, h2, r);
            let a = i64::from(self.counters.get(j).copied().unwrap_or(0));
            let b = i64::from(prev.counters.get(j).copied().unwrap_or(0));
            *slot = if (s >> r) & 1 == 1 { b - a } else { a - b };
        }
        median(&mut v[..self.rows.min(MAX_ROWS)])
    }

    /// Add `s_i * w` in every row; returns the new estimate.
    #[inline]
    pub(crate) fn add_h(&mut self, h: u64, w: u64) -> i64 {
        let h2 = self.index.h2(h);
        let w = weight_i32(w);
        let s = Self::signs(h);
        let mut v = [0i64; MAX_ROWS];
        for (r, slot) in v.iter_mut().enumerate().take(self.rows) {
            let j = self.cell(h, h2, r);
            let neg = (s >> r) & 1 == 1;
            if let Some(c) = self.counters.get_mut(j) {
                *c = c.saturating_add(if neg { -w } else { w });
                let x = i64::from(*c);
                *slot = if neg { -x } else { x };
            }
        }
        median(&mut v[..self.rows.min(MAX_ROWS)])
    }

    /// Prefetch the counters of hash `h`.
    #[inline(always)]
    pub(crate) fn prefetch_h(&self, h: u64) {
        let h2 = self.index.h2(h);
        for r in 0..self.rows {
            prefetch(&self.counters, self.cell(h, h2, r));
        }
    }

    /// Replace the counters by `t` (row major, each rounded to the nearest integer in the i32
    /// range). Returns false (and changes nothing) when `t` is not `rows * width` long.
    pub(crate) fn set_counters(&mut self, t: &[f64]) -> bool {
        if t.len() != self.counters.len() {
            return false;
        }
        for (c, &v) in self.counters.iter_mut().zip(t) {
            *c = v.round().clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32;
        }
        true
    }

    pub(crate) fn same_shape(&self, o: &SignedMatrix) -> bool {
        self.rows == o.rows && self.width == o.width && self.hash == o.hash
    }

    pub(crate) fn add_all(&mut self, o: &SignedMatrix) {
        for (a, b) in self.counters.iter_mut().zip(&o.counters) {
            *a = a.saturating_add(*b);
        }
    }

    pub(crate) fn clear(&mut self) {
        self.counters.iter_mut().for_each(|c| *c = 0);
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.counters.len() * 4
    }
}

/// Count Sketch with a candidate set (best effort for heavy hitters: estimates can decrease,
/// so a candidate can be dropped at a compaction; see [`crate::candidates`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CountSketch {
    cfg: CountSketchConfig,
    m: SignedMatrix,
    cand: Candidates,
}

impl algo::CheckState for CountSketch {
    /// The configuration valid, `rows * width` counters indexed as `new` indexes them, and a
    /// consistent candidate set (values are the keys' hashes).
    fn check_state(&self) -> Result<(), String> {
        self.cfg.validate().map_err(|e| e.to_string())?;
        self.m.check(self.cfg.rows, self.cfg.width)?;
        self.cand.check(self.cfg.candidates, |k| self.m.hash(k))
    }
}

impl CountSketch {
    pub fn new(cfg: CountSketchConfig, seed: u64) -> Result<CountSketch, ConfigError> {
        cfg.validate()?;
        let hash = HashFn::new(key::sub_seed(seed, COUNT_SKETCH_SALT));
        Ok(CountSketch {
            m: SignedMatrix::new(cfg.rows, cfg.width, hash),
            cand: Candidates::new(cfg.candidates, 1),
            cfg,
        })
    }

    pub fn config(&self) -> &CountSketchConfig {
        &self.cfg
    }

    pub fn matrix(&self) -> &SignedMatrix {
        &self.m
    }

    /// Signed point estimate.
    pub fn estimate(&self, key: &FlowKey) -> i64 {
        self.m.estimate_h(self.m.hash(key))
    }

    #[inline(always)]
    fn after_update(&mut self, key: &FlowKey, h: u64, est: i64) {
        let est = est.max(0) as u64;
        if est >= self.cand.theta() {
            let m = &self.m;
            self.cand
                .offer(key, h, est, |h| m.estimate_h(h).max(0) as u64);
        }
    }

    fn candidate_estimates(&self) -> Vec<Estimate> {
        self.cand
            .iter()
            .map(|(k, h)| (*k, self.m.estimate_h(h).max(0) as u64))
            .collect()
    }
}

const TASKS: &[Task] = &[
    Task::HeavyHitters,
    Task::HeavyChangers,
    Task::TopK,
    Task::FlowSize,
];

impl Algorithm for CountSketch {
    fn name(&self) -> &'static str {
        "count_sketch"
    }
    fn tasks(&self) -> &'static [Task] {
        TASKS
    }
    #[inline]
    fn update(&mut self, key: &FlowKey, weight: u64) {
        let h = self.m.hash(key);
        let est = self.m.add_h(h, weight);
        self.after_update(key, h, est);
    }
    fn update_batch(&mut self, keys: &[FlowKey], weights: &[u64]) {
        let n = keys.len().min(weights.len());
        let mut hs = [0u64; BATCH];
        let mut start = 0;
        while start < n {
            let end = (start + BATCH).min(n);
            let ks = &keys[start..end];
            for (h, k) in hs.iter_mut().zip(ks) {
                *h = self.m.hash(k);
                self.m.prefetch_h(*h);
            }
            for (i, (k, &w)) in ks.iter().zip(&weights[start..end]).enumerate() {
                let est = self.m.add_h(hs[i], w);
                self.after_update(k, hs[i], est);
            }
            start = end;
        }
    }
    fn reset(&mut self) {
        self.m.clear();
        self.cand.clear();
    }
    fn memory_bytes(&self) -> usize {
        self.m.memory_bytes() + self.cand.memory_bytes()
    }
    fn heavy_hitters(&self, threshold: u64) -> Option<Vec<Estimate>> {
        let mut v: Vec<Estimate> = self
            .candidate_estimates()
            .into_iter()
            .filter(|&(_, e)| e >= threshold)
            .collect();
        sort_estimates(&mut v);
        Some(v)
    }
    fn heavy_changers(&self, prev: &dyn Algorithm, threshold: u64) -> Option<Vec<Estimate>> {
        let p = algo::downcast::<CountSketch>(prev)?;
        if !self.m.same_shape(&p.m) {
            return None;
        }
        Some(crate::candidates::changers(
            &self.cand,
            &p.cand,
            threshold,
            |h| self.m.change_h(&p.m, h),
        ))
    }
    fn top_k(&self, k: usize) -> Option<Vec<Estimate>> {
        let mut v = self.candidate_estimates();
        sort_estimates(&mut v);
        v.truncate(k);
        Some(v)
    }
    fn flow_size(&self, key: &FlowKey) -> Option<u64> {
        Some(self.estimate(key).max(0) as u64)
    }
    fn caveats(&self, task: Task, unit: Option<u64>, _total: u64) -> Vec<algo::Caveat> {
        let m = &self.m;
        let mut v =
            algo::collision_caveat(task, unit, "width", m.width(), |h| m.estimate_h(h) as f64);
        v.extend(self.cand.caveats(task, unit, |t| m.reaching(t)));
        v
    }
    /// The difference sketch's noise, the colliding flows' L2 change over sqrt(width)
    /// (Charikar et al. 2002 sec. 3), measured on both epochs' counters.
    fn change_caveats(&self, prev: &dyn Algorithm, threshold: u64) -> Vec<algo::Caveat> {
        let Some(p) = algo::downcast::<CountSketch>(prev) else {
            return Vec::new();
        };
        if !self.m.same_shape(&p.m) {
            return Vec::new();
        }
        let mut capped = self.cand.change_caveats(&p.cand, threshold, |t| {
            self.m.reaching(t).max(p.m.reaching(t))
        });
        capped.extend(algo::change_caveat(
            threshold,
            "width",
            self.m.width(),
            algo::NoiseScale::Sqrt,
            |h| self.m.change_h(&p.m, h) as f64,
            |t| self.heavy_changers(prev, t),
        ));
        capped
    }
    fn merge(&mut self, other: &dyn Algorithm) -> Result<(), MergeError> {
        let o = algo::merge_peer(self, other, |o| {
            self.m.same_shape(&o.m) && self.cand.cap() == o.cand.cap()
        })?;
        self.m.add_all(&o.m);
        let m = &self.m;
        self.cand.merge(&o.cand, &|h| m.estimate_h(h).max(0) as u64);
        Ok(())
    }
}

/// This algorithm's facts, listed in the `catalog` crate.
pub const ENTRY: algo::Entry = algo::Entry {
    name: "count_sketch",
    tasks: TASKS,
    fit: algo::KeyFit::Any,
    build: |p, ctx| algo::build_with("count_sketch", p, |c| CountSketch::new(c, ctx.seed)),
    // Exact: i32 counters (as Count-Min's u32) and the candidate set, allocated at construction.
    memory: |p, _| {
        algo::Entry::memory_with("count_sketch", p, |c: CountSketchConfig| {
            c.validate()?;
            Ok((c.rows as u64) * (c.width as u64) * 4 + Candidates::bytes_for(c.candidates))
        })
    },
    defaults: algo::defaults_of::<CountSketchConfig>,
    flow_size_only: "",
    resets_to_empty: true,
    save: algo::save_state::<CountSketch>,
    load: |b| algo::load_state::<CountSketch>("count_sketch", b),
    // ns per update, u32 / FlowKey path: `cargo run --release -p catalog --example update_costs`.
    cost: algo::UpdateCost {
        u32_ns: 32.80,
        wide_ns: 33.61,
        behind: 0.96,
    },
};
