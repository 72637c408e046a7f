//! Count-Min sketch (Cormode & Muthukrishnan 2005; ALGORITHMS.md 2) with a heavy-hitter
//! candidate set, and the shared counter-matrix engine that `count_array` reuses (a count array
//! is Count-Min with one row, Re-evaluating paper section 3).
//!
//! State: `rows x width` u32 counters (Agg-Evict 4.1 default 4 x 65536; the Re-evaluating
//! paper's variant is `rows = 3`). Update `C[i][h_i(x)] += w`; point query `min_i C[i][h_i(x)]`,
//! which never underestimates and exceeds the truth by more than `e*N/width` with probability
//! at most `e^-rows`.
//!
//! Counters are u32 like the papers' and **saturate** at `u32::MAX` instead of wrapping: a
//! wrapped counter would make the minimum an underestimate, which breaks the one-sided
//! guarantee. Saturation needs 4.29e9 units in one counter in one epoch (more than a 2M-packet
//! epoch or a 1 s, 10 Gb/s epoch of bytes can hold); below it the sketch is exactly linear, so
//! merge and aggregated updates are bit-exact.
//!
//! Hot path: one xxh3 hash per key, the row columns taken from disjoint bit fields of it
//! ([`crate::rows`]), batches of 32 hashed first and their counters prefetched, then the
//! increments. Because every row of a key grows by the same `w`, the new minimum is exactly
//! `old_min + w`, so the candidate check needs no re-query: a compare against the running
//! threshold and a branch-free look at two probe slots, with the exact candidate work done
//! after the counter pass for the few keys that need it ([`crate::candidates`],
//! `CmState::chunk_split`).

use std::any::Any;

use algo::{Algorithm, ConfigError, Estimate, MergeError, Task};
use key::{FlowKey, HashFn, KeyMap};
use serde::{Deserialize, Serialize};

use crate::candidates::Candidates;
use crate::rows::{hash_key, median, prefetch, prefetch_all, prefetch_ptr, RowIndex, MAX_ROWS};
use crate::{sort_estimates, BATCH};

// `chunk_split` flags a chunk's keys in one u64.
const _: () = assert!(BATCH <= 64);

/// Largest `rows * width` of a counter matrix (indices are kept as u32 in the batch scratch).
pub(crate) const MAX_CELLS: usize = 1 << 30;

pub(crate) const COUNT_MIN_SALT: u64 = 0x636f_756e_745f_6d69; // "count_mi"

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CountMinConfig {
    /// Number of rows `d` (failure probability `e^-d`). Agg-Evict: 4; Re-evaluating: 3.
    pub rows: usize,
    /// Counters per row `w` (error `e*N/w`). Agg-Evict: 65536.
    pub width: usize,
    /// Candidate-set size for heavy hitters and top-k (see [`crate::candidates`]).
    pub candidates: usize,
}

impl Default for CountMinConfig {
    fn default() -> Self {
        CountMinConfig {
            rows: 4,
            width: 65536,
            candidates: 1024,
        }
    }
}

impl CountMinConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        validate_matrix("count_min", self.rows, self.width, self.candidates)
    }
}

pub(crate) fn validate_matrix(
    algo: &'static str,
    rows: usize,
    width: usize,
    candidates: usize,
) -> Result<(), ConfigError> {
    let inv = |field, reason: String| ConfigError::Invalid {
        algo,
        field,
        reason,
    };
    if rows == 0 || rows > MAX_ROWS {
        return Err(inv(
            "rows",
            format!("must be in 1..={MAX_ROWS}, got {rows}"),
        ));
    }
    if width == 0 || rows.saturating_mul(width) > MAX_CELLS {
        return Err(inv(
            "width",
            format!("must be >= 1 with rows * width <= {MAX_CELLS}, got {width}"),
        ));
    }
    if candidates == 0 || candidates > (1 << 24) {
        return Err(inv(
            "candidates",
            format!("must be in 1..=16777216, got {candidates}"),
        ));
    }
    Ok(())
}

/// Cell of row `r` in the split-bit layout: row `r` uses bits `[r*bits, (r+1)*bits)` of `h`
/// ([`RowIndex::Split`]). Always `< (r + 1) << bits` for `bits < 64`.
#[inline(always)]
fn split_cell(h: u64, r: usize, bits: u32) -> usize {
    let mask = (1u64 << (bits & 63)) - 1;
    (r << bits) + ((h >> ((r as u32 * bits) & 63)) & mask) as usize
}

#[inline(always)]
fn weight32(w: u64) -> u32 {
    u32::try_from(w).unwrap_or(u32::MAX)
}

/// The linear part of Count-Min: counters and hashing. Compared bit for bit by the tests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterMatrix {
    rows: usize,
    width: usize,
    index: RowIndex,
    hash: HashFn,
    counters: Vec<u32>,
}

impl CounterMatrix {
    pub(crate) fn new(rows: usize, width: usize, hash: HashFn) -> CounterMatrix {
        CounterMatrix {
            rows,
            width,
            index: RowIndex::new(rows, width),
            hash,
            counters: vec![0; rows * width],
        }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn width(&self) -> usize {
        self.width
    }

    /// Row-major counters (`rows * width`).
    pub fn counters(&self) -> &[u32] {
        &self.counters
    }

    #[inline(always)]
    pub(crate) fn hash(&self, k: &FlowKey) -> u64 {
        hash_key(&self.hash, k)
    }

    #[inline(always)]
    fn cell(&self, h: u64, h2: u64, r: usize) -> usize {
        r * self.width + self.index.column(h, h2, r)
    }

    /// `min_i C[i][h_i]` for a key with hash `h`.
    #[inline]
    pub(crate) fn estimate_h(&self, h: u64) -> u64 {
        let h2 = self.index.h2(h);
        (0..self.rows)
            .filter_map(|r| self.counters.get(self.cell(h, h2, r)))
            .min()
            .map_or(0, |&c| u64::from(c))
    }

    /// Signed change `self - prev` for hash `h`: the median over rows of the counter
    /// differences (the difference sketch is a turnstile Count-Min, where the min is not an
    /// upper bound; the median is, as for Count Sketch).
    pub(crate) fn change_h(&self, prev: &CounterMatrix, h: u64) -> i64 {
        let h2 = self.index.h2(h);
        let mut d = [0i64; MAX_ROWS];
        for (r, slot) in d.iter_mut().enumerate().take(self.rows) {
            let j = self.cell(h, h2, r);
            let a = self.counters.get(j).copied().unwrap_or(0);
            let b = prev.counters.get(j).copied().unwrap_or(0);
            *slot = i64::from(a) - i64::from(b);
        }
        median(&mut d[..self.rows.min(MAX_ROWS)])
    }

    /// Add `w` to every row of hash `h`; returns the new estimate.
    #[inline(always)]
    fn add_h(&mut self, h: u64, w: u32) -> u64 {
        let h2 = self.index.h2(h);
        let mut old_min = u32::MAX;
        for r in 0..self.rows {
            let j = self.cell(h, h2, r);
            if let Some(c) = self.counters.get_mut(j) {
                old_min = old_min.min(*c);
                *c = c.saturating_add(w);
            }
        }
        // Saturating add is monotone, so min_i sat(c_i + w) = sat(min_i c_i + w).
        u64::from(old_min.saturating_add(w))
    }

    /// [`CounterMatrix::add_h`] for the split-bit layout, without bounds checks. The caller
    /// (`CmState::chunk_split`) has checked `R == rows`, `width == 1 << bits` and
    /// `counters.len() == R * width`.
    #[inline(always)]
    fn add_split<const R: usize>(&mut self, h: u64, w: u32, bits: u32) -> u64 {
        debug_assert!(R == self.rows && self.counters.len() == R << bits);
        let base = self.counters.as_mut_ptr();
        let mut old_min = u32::MAX;
        for r in 0..R {
            let j = split_cell(h, r, bits);
            debug_assert!(j < self.counters.len());
            // SAFETY: j = r * 2^bits + (bits-wide field of h) < R * 2^bits == counters.len()
            // (checked by the caller once per chunk; the matrix is never resized), so the
            // pointer is in bounds of the live allocation, and `&mut self` makes the access
            // exclusive. The safe twin is `add_h` (used by `update`); the tests check that batch
            // and one-by-one updates leave identical state.
            let c = unsafe { &mut *base.add(j) };
            old_min = old_min.min(*c);
            *c = c.saturating_add(w);
        }
        // Saturating add is monotone, so the new minimum is sat(old_min + w).
        u64::from(old_min.saturating_add(w))
    }

    pub(crate) fn same_shape(&self, o: &CounterMatrix) -> bool {
        self.rows == o.rows && self.width == o.width && self.hash == o.hash
    }

    fn add_all(&mut self, o: &CounterMatrix) {
        for (a, b) in self.counters.iter_mut().zip(&o.counters) {
            *a = a.saturating_add(*b);
        }
    }

    fn clear(&mut self) {
        self.counters.iter_mut().for_each(|c| *c = 0);
    }
}

/// Count-Min (or count array) counters plus the candidate set. Shared by [`CountMin`] and
/// [`crate::CountArray`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct CmState {
    pub(crate) m: CounterMatrix,
    pub(crate) cand: Candidates,
}

impl CmState {
    pub(crate) fn new(rows: usize, width: usize, candidates: usize, hash: HashFn) -> CmState {
        CmState {
            m: CounterMatrix::new(rows, width, hash),
            cand: Candidates::new(candidates, 1),
        }
    }

    #[inline(always)]
    fn after_update(&mut self, key: &FlowKey, h: u64, est: u64) {
        if est >= self.cand.theta() {
            let m = &self.m;
            self.cand.offer(key, h, est, |h| m.estimate_h(h));
        }
    }

    #[inline]
    pub(crate) fn update(&mut self, key: &FlowKey, w: u64) {
        let h = self.m.hash(key);
        let est = self.m.add_h(h, weight32(w));
        self.after_update(key, h, est);
    }

    /// Hash a batch of up to [`BATCH`] keys, prefetch all their counters, then apply the
    /// updates in order (same state as the one-by-one loop: prefetching only changes timing).
    /// The split-bit layouts with 1 to 4 rows (every paper default) get a monomorphised loop
    /// with the row count as a constant; other shapes take the general loop.
    pub(crate) fn update_batch(&mut self, keys: &[FlowKey], weights: &[u64]) {
        let n = keys.len().min(weights.len());
        let mut start = 0;
        while start < n {
            let end = (start + BATCH).min(n);
            let (ks, ws) = (&keys[start..end], &weights[start..end]);
            match (self.m.index, self.m.rows) {
                (RowIndex::Split { bits }, 4) => self.chunk_split::<4>(ks, ws, bits),
                (RowIndex::Split { bits }, 3) => self.chunk_split::<3>(ks, ws, bits),
                (RowIndex::Split { bits }, 2) => self.chunk_split::<2>(ks, ws, bits),
                (RowIndex::Split { bits }, 1) => self.chunk_split::<1>(ks, ws, bits),
                _ => self.chunk_general(ks, ws),
            }
            start = end;
        }
    }

    /// One chunk (`<= BATCH` keys) with `R` rows and split-bit columns:
    ///
    /// 1. prefetch the chunk's keys and weights, hash every key (a tight loop of independent
    ///    xxh3 evaluations with a constant key length for the common widths: [`hash_key`]) and
    ///    prefetch its `R` counters;
    /// 2. apply the counter updates in order, recording each key's new estimate and, without
    ///    branches, whether the candidate set may need it ([`Candidates::needs_offer`]: estimate
    ///    `>= theta` and hash not in its first two probe slots);
    /// 3. run the exact [`Candidates::offer`] only for the flagged keys, in order (about 1% of
    ///    updates on the Zipf(1.1) bench stream once `theta` has settled, against about 70% that
    ///    reach the probe).
    ///
    /// Passes 2-3 leave the state of the one-by-one loop: key `i`'s estimate is computed at its
    /// own update (`old_min + w`), and no compaction (the only thing that raises `theta` or
    /// removes a member) can happen inside the chunk ([`Candidates::room_for`]), so a key not
    /// flagged would have been a no-op offer. When a compaction might happen (the set is within
    /// `BATCH` insertions of `2 * cap`), the chunk takes the fused loop instead, so compaction
    /// re-queries see exactly the counters of the one-by-one order. Prefetching the candidate
    /// table slots as well measured slower (it evicts counter lines from L1), so it is not done.
    #[inline(always)]
    fn chunk_split<const R: usize>(&mut self, ks: &[FlowKey], ws: &[u64], bits: u32) {
        let n = ks.len().min(ws.len()).min(BATCH);
        let (ks, ws) = (&ks[..n], &ws[..n]);
        let width = self.m.width;
        // The caller matched `Split { bits }` with `rows == R`, so these hold by construction;
        // checking them once per chunk makes the unchecked indexing below locally sound.
        if R != self.m.rows
            || bits >= usize::BITS
            || (1usize << bits) != width
            || self.m.counters.len() != R * width
        {
            return self.chunk_general(ks, ws);
        }
        prefetch_all(ks);
        prefetch_all(ws);
        let base = self.m.counters.as_ptr();
        let mut hs = [0u64; BATCH];
        for (k, h) in ks.iter().zip(hs.iter_mut()) {
            *h = hash_key(&self.m.hash, k);
            for r in 0..R {
                // In bounds (checked above), but a prefetch needs no check anyway.
                prefetch_ptr(base.wrapping_add(split_cell(*h, r, bits)));
            }
        }
        let hs = &hs[..n];
        if self.cand.room_for(n) {
            let mut ests = [0u64; BATCH];
            let mut todo = 0u64;
            for (i, ((&w, &h), e)) in ws.iter().zip(hs).zip(ests.iter_mut()).enumerate() {
                *e = self.m.add_split::<R>(h, weight32(w), bits);
                todo |= u64::from(self.cand.needs_offer(h, *e)) << i;
            }
            let m = &self.m;
            self.cand
                .offer_marked(todo, ks, hs, &ests[..n], |h| m.estimate_h(h));
        } else {
            for ((k, &w), &h) in ks.iter().zip(ws).zip(hs) {
                let est = self.m.add_split::<R>(h, weight32(w), bits);
                self.after_update(k, h, est);
            }
        }
    }

    /// One chunk, any shape (double hashing or more than 4 rows), bounds-checked.
    fn chunk_general(&mut self, ks: &[FlowKey], ws: &[u64]) {
        let rows = self.m.rows;
        let mut hs = [0u64; BATCH];
        let mut cells = [0u32; BATCH * MAX_ROWS];
        for (i, (h, k)) in hs.iter_mut().zip(ks).enumerate() {
            *h = self.m.hash(k);
            let h2 = self.m.index.h2(*h);
            for r in 0..rows {
                let j = self.m.cell(*h, h2, r);
                cells[i * MAX_ROWS + r] = j as u32;
                prefetch(&self.m.counters, j);
            }
            self.cand.prefetch(*h);
        }
        for (i, (k, &w)) in ks.iter().zip(ws).enumerate() {
            let w = weight32(w);
            let mut old_min = u32::MAX;
            for &j in &cells[i * MAX_ROWS..i * MAX_ROWS + rows] {
                if let Some(c) = self.m.counters.get_mut(j as usize) {
                    old_min = old_min.min(*c);
                    *c = c.saturating_add(w);
                }
            }
            let est = u64::from(old_min.saturating_add(w));
            self.after_update(k, hs[i], est);
        }
    }

    pub(crate) fn flow_size(&self, key: &FlowKey) -> u64 {
        self.m.estimate_h(self.m.hash(key))
    }

    fn candidate_estimates(&self) -> Vec<Estimate> {
        self.cand
            .iter()
            .map(|(k, h)| (*k, self.m.estimate_h(h)))
            .collect()
    }

    pub(crate) fn heavy_hitters(&self, threshold: u64) -> Vec<Estimate> {
        let mut v: Vec<Estimate> = self
            .candidate_estimates()
            .into_iter()
            .filter(|&(_, e)| e >= threshold)
            .collect();
        sort_estimates(&mut v);
        v
    }

    pub(crate) fn top_k(&self, k: usize) -> Vec<Estimate> {
        let mut v = self.candidate_estimates();
        sort_estimates(&mut v);
        v.truncate(k);
        v
    }

    /// Heavy changers: the difference of the two epochs' counters (same seeds), evaluated on
    /// the union of both epochs' candidates.
    pub(crate) fn heavy_changers(&self, prev: &CmState, threshold: u64) -> Option<Vec<Estimate>> {
        if !self.m.same_shape(&prev.m) {
            return None;
        }
        let mut union: KeyMap<u64> = KeyMap::default();
        for (k, h) in self.cand.iter().chain(prev.cand.iter()) {
            union.insert(*k, h);
        }
        let mut v: Vec<Estimate> = union
            .into_iter()
            .map(|(k, h)| (k, self.m.change_h(&prev.m, h).unsigned_abs()))
            .filter(|&(_, d)| d >= threshold)
            .collect();
        sort_estimates(&mut v);
        Some(v)
    }

    pub(crate) fn merge(&mut self, o: &CmState) -> bool {
        if !self.m.same_shape(&o.m) || self.cand.cap() != o.cand.cap() {
            return false;
        }
        self.m.add_all(&o.m);
        let m = &self.m;
        self.cand.merge(&o.cand, &|h| m.estimate_h(h));
        true
    }

    pub(crate) fn reset(&mut self) {
        self.m.clear();
        self.cand.clear();
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.m.counters.len() * 4 + self.cand.memory_bytes()
    }
}

/// Count-Min sketch with a candidate set.
///
/// Heavy hitters / top-k guarantee: every key of true size `>= T` is reported whenever
/// `T >= self.candidate_threshold()` (see [`crate::candidates`]); the threshold stays near the
/// `candidates`-th largest estimate.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CountMin {
    cfg: CountMinConfig,
    st: CmState,
}

impl CountMin {
    pub fn new(cfg: CountMinConfig, seed: u64) -> Result<CountMin, ConfigError> {
        cfg.validate()?;
        let hash = HashFn::new(key::sub_seed(seed, COUNT_MIN_SALT));
        Ok(CountMin {
            st: CmState::new(cfg.rows, cfg.width, cfg.candidates, hash),
            cfg,
        })
    }

    pub fn config(&self) -> &CountMinConfig {
        &self.cfg
    }

    /// The counters (linear state), for bit-exact comparisons.
    pub fn matrix(&self) -> &CounterMatrix {
        &self.st.m
    }

    /// Every key whose estimate after its own last update was at least this is a candidate.
    pub fn candidate_threshold(&self) -> u64 {
        self.st.cand.theta()
    }

    pub fn estimate(&self, key: &FlowKey) -> u64 {
        self.st.flow_size(key)
    }
}

/// What Count-Min and the count array (Count-Min with one row) answer.
pub(crate) const CM_TASKS: &[Task] = &[
    Task::FlowSize,
    Task::HeavyHitters,
    Task::HeavyChangers,
    Task::TopK,
];

/// The `Algorithm` impl of a wrapper around [`CmState`] (a field `st`): Count-Min and the count
/// array differ only in their configuration, so they share every verb.
macro_rules! cm_algorithm {
    ($t:ty, $name:literal) => {
        impl Algorithm for $t {
            fn name(&self) -> &'static str {
                $name
            }
            fn tasks(&self) -> &'static [Task] {
                $crate::count_min::CM_TASKS
            }
            #[inline]
            fn update(&mut self, key: &FlowKey, weight: u64) {
                self.st.update(key, weight);
            }
            fn update_batch(&mut self, keys: &[FlowKey], weights: &[u64]) {
                self.st.update_batch(keys, weights);
            }
            fn reset(&mut self) {
                self.st.reset();
            }
            fn memory_bytes(&self) -> usize {
                self.st.memory_bytes()
            }
            fn as_any(&self) -> &dyn Any {
                self
            }
            fn heavy_hitters(&self, threshold: u64) -> Option<Vec<Estimate>> {
                Some(self.st.heavy_hitters(threshold))
            }
            fn heavy_changers(
                &self,
                prev: &dyn Algorithm,
                threshold: u64,
            ) -> Option<Vec<Estimate>> {
                let p = prev.as_any().downcast_ref::<$t>()?;
                self.st.heavy_changers(&p.st, threshold)
            }
            fn top_k(&self, k: usize) -> Option<Vec<Estimate>> {
                Some(self.st.top_k(k))
            }
            fn flow_size(&self, key: &FlowKey) -> Option<u64> {
                Some(self.st.flow_size(key))
            }
            fn merge(&mut self, other: &dyn Algorithm) -> Result<(), MergeError> {
                let o = other
                    .as_any()
                    .downcast_ref::<$t>()
                    .ok_or(MergeError::Mismatch($name))?;
                if self.st.merge(&o.st) {
                    Ok(())
                } else {
                    Err(MergeError::Mismatch($name))
                }
            }
        }
    };
}
pub(crate) use cm_algorithm;

cm_algorithm!(CountMin, "count_min");
