//! Deltoid (Cormode & Muthukrishnan, "What's new: finding significant differences in network
//! data streams", INFOCOM'04; ALGORITHMS.md 5).
//!
//! State: d rows x g groups; a group is one total counter T0 followed by one counter T1[b] per key
//! bit b (L = 8 x key_len bits, bit 0 = most significant bit of the first key byte), all u32
//! saturating (see `crate::w32`). Any key length up to `key::MAX_KEY_LEN` works.
//!
//! Update (linear, class A): group j = h_i(x) in each row; T0 += w and T1[b] += w for every set bit
//! of x. The row groups come from one xxh3 hash by Kirsch-Mitzenmacher (`crate::km_index`).
//!
//! Recovery for threshold θ: in a group where x (size ≥ θ) meets other traffic of total R < θ,
//! each bit test is decisive: if x has bit b set, T1[b] ≥ f_x ≥ θ and T0 - T1[b] ≤ R < θ, and
//! the opposite for a clear bit. So for each bit "hi" = T1[b] ≥ θ and "lo" = T0 - T1[b] ≥ θ;
//! exactly one must hold (both or neither: the group is not dominated by one key, reject it).
//! The spelled-out key must hash back to the group (h_i(x) = j), which rejects most garbage.
//! With g ≥ 2/φ groups a key above φN is alone with R < θ in a row w.p. ≥ 1/2 (Markov), so it is
//! missed w.p. ≤ 2^-d (1/16 for SketchVisor's 4 x 4000).
//!
//! Heavy hitters: skip groups with T0 < θ, estimate = min over rows of the smallest bit-matching
//! counter (an upper bound like Count-Min, tighter than T0). Heavy changers: run the same tests
//! on the signed difference of two epochs' counters with absolute values (no T0 skip: a group
//! whose total change cancels can still be dominated bit-wise), estimate = median over rows of
//! the median bit-matching difference.

use algo::{Algorithm, BuildCtx, ConfigError, Dirty, Estimate, MergeError, Task};
use key::{sub_seed, FlowKey, HashFn, KeySet, MAX_KEY_LEN};
use serde::{Deserialize, Serialize};

use crate::modular::MAX_ROWS;
use crate::{km_index, median_i64, prefetch, w32, Detection};

const NAME: &str = "deltoid";
/// The tasks it answers.
const TASKS: &[Task] = &[Task::HeavyHitters, Task::HeavyChangers];
/// Distinct sub-seed constant of this algorithm ("DELT").
const SEED_TAG: u64 = 0x4445_4c54;

/// Configuration of [`Deltoid`]. Defaults: 4096 groups (SketchVisor 7.1's 2/0.05% = 4000, rounded
/// up) in 2 rows, not the paper's 4 (`--preset sketchvisor`): 3.3 MiB with 5-tuple keys instead
/// of 6.4 (issue 12's 4 MiB). Heavy hitters lose nothing measurable; heavy changers' F1 on Zipf
/// 0.6-1.4 falls from 0.94-0.98 to 0.92-0.94 (`crates/measure/tests/bars.rs`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeltoidConfig {
    pub rows: usize,
    pub groups: usize,
}

impl Default for DeltoidConfig {
    fn default() -> Self {
        DeltoidConfig {
            rows: 2,
            groups: 4096,
        }
    }
}

fn invalid(field: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        algo: NAME,
        field,
        reason: reason.into(),
    }
}

impl DeltoidConfig {
    /// Check the fields for keys of `key_len` bytes; the error names the field.
    pub fn validate(&self, key_len: usize) -> Result<(), ConfigError> {
        if key_len == 0 || key_len > MAX_KEY_LEN {
            return Err(invalid("key_len", format!("must be 1..={MAX_KEY_LEN}")));
        }
        if self.rows == 0 || self.rows > MAX_ROWS {
            return Err(invalid("rows", format!("must be 1..={MAX_ROWS}")));
        }
        if self.groups == 0 || self.groups > 1 << 24 {
            return Err(invalid("groups", "must be 1..=2^24"));
        }
        Ok(())
    }
}

/// Deltoid state (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deltoid {
    cfg: DeltoidConfig,
    key_len: usize,
    seed: u64,
    hash: HashFn,
    /// Counters per group: 1 + 8 * key_len.
    stride: usize,
    /// rows x groups x stride, row-major.
    counters: Vec<u32>,
    /// Blocks of `counters` written since the last reset (whole groups): reset and the
    /// queries visit only those.
    dirty: Dirty,
    /// Updates ignored because the key length differed from `key_len`.
    skipped: u64,
}

const STEP: usize = 16;

/// What an update of `key` by `w` adds to T1: `w` for each set bit (bit 0 = the most
/// significant bit of the first byte), 0 for each clear one, in `out[..8 * key.len()]`.
/// Computed once per update for all its rows.
#[inline]
fn bit_adds<'a>(key: &FlowKey, w: u32, out: &'a mut [u32; 8 * MAX_KEY_LEN]) -> &'a [u32] {
    let n = 8 * key.len();
    for (lanes, &byte) in out.chunks_exact_mut(8).zip(key.as_bytes()) {
        let b = u32::from(byte);
        for (k, a) in lanes.iter_mut().enumerate() {
            *a = if b & (0x80 >> k) != 0 { w } else { 0 };
        }
    }
    &out[..n]
}

impl algo::CheckState for Deltoid {
    /// The configuration valid for its key length, the group stride that length makes, the hash
    /// its seed's, and `rows * groups * stride` counters with their dirty map.
    fn check_state(&self) -> Result<(), String> {
        self.cfg.validate(self.key_len).map_err(|e| e.to_string())?;
        let stride = 1 + 8 * self.key_len;
        let n = self.cfg.rows * self.cfg.groups * stride;
        if self.stride != stride || self.counters.len() != n {
            return Err(format!(
                "{} counters in groups of {}, the configuration has {n} in groups of {stride}",
                self.counters.len(),
                self.stride
            ));
        }
        if self.hash != HashFn::new(self.seed) {
            return Err("a hash other than its seed's".into());
        }
        self.dirty.check(n, 4)
    }
}

impl Deltoid {
    pub fn new(cfg: DeltoidConfig, ctx: &BuildCtx) -> Result<Self, ConfigError> {
        cfg.validate(ctx.key_len)?;
        let seed = sub_seed(ctx.seed, SEED_TAG);
        let stride = 1 + 8 * ctx.key_len;
        Ok(Deltoid {
            key_len: ctx.key_len,
            seed,
            hash: HashFn::new(seed),
            stride,
            counters: vec![0; cfg.rows * cfg.groups * stride],
            dirty: Dirty::new(cfg.rows * cfg.groups * stride, 4),
            skipped: 0,
            cfg,
        })
    }

    pub fn config(&self) -> &DeltoidConfig {
        &self.cfg
    }

    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Counters per group: the total, then one per key bit (`1 + 8 key_len`).
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// The counters, `rows x groups x stride`, row major (the linear state SketchVisor's
    /// recovery sees, RECOVERY.md 3).
    pub fn counters(&self) -> &[u32] {
        &self.counters
    }

    /// Replace the counters by recovered ones (SketchVisor section 5), in the order of
    /// [`Self::counters`], each rounded to the nearest integer in `0..=u32::MAX`. Returns false
    /// (and changes nothing) when `t` is not `rows * groups * stride` long.
    pub fn set_counters(&mut self, t: &[f64]) -> bool {
        if t.len() != self.counters.len() {
            return false;
        }
        for (i, (c, &v)) in self.counters.iter_mut().zip(t).enumerate() {
            *c = v.round().clamp(0.0, f64::from(u32::MAX)) as u32;
            // One mark per group, on its first counter (as `add` marks them).
            if *c != 0 {
                self.dirty.mark(i - i % self.stride);
            }
        }
        true
    }

    /// Offset of the group of `h` in row `i`.
    #[inline]
    fn base(&self, h: u64, i: usize) -> usize {
        (i * self.cfg.groups + km_index(h, i, self.cfg.groups)) * self.stride
    }

    #[inline]
    fn group(&self, base: usize) -> &[u32] {
        self.counters.get(base..base + self.stride).unwrap_or(&[])
    }

    /// Add one update to the group at `base`: `adds` is [`bit_adds`] of the key and weight.
    #[inline]
    fn add(&mut self, base: usize, w: u32, adds: &[u32]) {
        // A zero weight changes nothing, and leaves no mark.
        if w == 0 {
            return;
        }
        let Some(grp) = self.counters.get_mut(base..base + self.stride) else {
            return;
        };
        // One mark per group, on its first counter; reset zeroes whole groups.
        self.dirty.mark(base);
        let (t0, t1) = grp.split_at_mut(1);
        t0[0] = t0[0].saturating_add(w);
        // Branchless over all bits, one straight loop of lanes the compiler vectorizes; a loop
        // over only the set bits is data-dependent branching and measured slower.
        for (c, &a) in t1.iter_mut().zip(adds) {
            *c = c.saturating_add(a);
        }
    }

    /// Prefetch every cache line of the group at `base` (a five-tuple group is 105 u32, 420 B:
    /// seven or eight lines, all written by the update).
    #[inline(always)]
    fn prefetch_group(&self, base: usize) {
        let p = self.counters.as_ptr();
        let mut off = 0;
        while off < self.stride {
            prefetch(p.wrapping_add(base + off));
            off += 16;
        }
        prefetch(p.wrapping_add(base + self.stride - 1));
    }

    /// The counter matching bit `b` of `key` in a group: T1[b] if set, T0 - T1[b] if clear.
    #[inline]
    fn matching(grp: &[u32], key: &[u8], b: usize) -> i64 {
        let t0 = i64::from(grp.first().copied().unwrap_or(0));
        let t1 = i64::from(grp.get(1 + b).copied().unwrap_or(0));
        if key.get(b / 8).is_some_and(|&x| x & (0x80 >> (b % 8)) != 0) {
            t1
        } else {
            t0 - t1
        }
    }

    /// Decode the key spelled by a group of (signed) counters, if one key dominates it.
    fn decode(&self, t0: i64, t1: impl Fn(usize) -> i64, theta: i64) -> Option<FlowKey> {
        let mut bytes = [0u8; MAX_KEY_LEN];
        for b in 0..8 * self.key_len {
            let c1 = t1(b);
            let hi = c1.abs() >= theta;
            let lo = (t0 - c1).abs() >= theta;
            if hi == lo {
                return None;
            }
            if hi {
                bytes[b / 8] |= 0x80 >> (b % 8);
            }
        }
        FlowKey::from_bytes(&bytes[..self.key_len])
    }

    /// Heavy hitters (threshold ≥ 1). Never truncated: decoding costs O(rows x groups x bits).
    pub fn detect_heavy_hitters(&self, threshold: u64) -> Detection {
        let theta = i64::try_from(threshold.max(1)).unwrap_or(i64::MAX);
        let mut cands = KeySet::default();
        // A group with T0 >= θ >= 1 was written: only written groups are visited.
        for j in self.dirty.items(self.stride) {
            let (i, base) = (j / self.cfg.groups, j * self.stride);
            let grp = self.group(base);
            let t0 = i64::from(grp.first().copied().unwrap_or(0));
            if t0 < theta {
                continue;
            }
            let t1 = |b: usize| i64::from(grp.get(1 + b).copied().unwrap_or(0));
            if let Some(k) = self.decode(t0, t1, theta) {
                if self.base(self.hash.hash(&k), i) == base {
                    cands.insert(k);
                }
            }
        }
        let flows = cands
            .into_iter()
            .filter_map(|k| {
                let e = self.estimate(&k);
                (e >= theta as u64).then_some((k, e))
            })
            .collect();
        Detection::sorted(flows, false)
    }

    /// Upper-bound point estimate: min over rows of the smallest bit-matching counter.
    pub fn estimate(&self, key: &FlowKey) -> u64 {
        if key.len() != self.key_len {
            return 0;
        }
        let h = self.hash.hash(key);
        (0..self.cfg.rows)
            .map(|i| {
                let grp = self.group(self.base(h, i));
                (0..8 * self.key_len)
                    .map(|b| Self::matching(grp, key.as_bytes(), b))
                    .min()
                    .unwrap_or(0)
            })
            .min()
            .map_or(0, |v| v.max(0) as u64)
    }

    fn compatible(&self, o: &Deltoid) -> bool {
        self.cfg == o.cfg && self.key_len == o.key_len && self.seed == o.seed
    }

    /// Heavy changers between `prev` (previous epoch, same configuration and seed) and `self`;
    /// the estimate is |change|.
    pub fn detect_heavy_changers(
        &self,
        prev: &Deltoid,
        threshold: u64,
    ) -> Result<Detection, MergeError> {
        if !self.compatible(prev) {
            return Err(MergeError::Mismatch(NAME));
        }
        let theta = i64::try_from(threshold.max(1)).unwrap_or(i64::MAX);
        let mut cands = KeySet::default();
        // A group written in neither epoch has no change, so no bit test passes (|0| < θ):
        // only groups written in one of them are visited.
        let mut written = self.dirty.clone();
        written.merge(&prev.dirty);
        for j in written.items(self.stride) {
            let (i, base) = (j / self.cfg.groups, j * self.stride);
            let (c, p) = (self.group(base), prev.group(base));
            let d = |j: usize| {
                i64::from(c.get(j).copied().unwrap_or(0))
                    - i64::from(p.get(j).copied().unwrap_or(0))
            };
            if let Some(k) = self.decode(d(0), |b| d(1 + b), theta) {
                if self.base(self.hash.hash(&k), i) == base {
                    cands.insert(k);
                }
            }
        }
        let mut flows = Vec::new();
        let mut per_bit = Vec::with_capacity(8 * self.key_len);
        for k in cands {
            let h = self.hash.hash(&k);
            let mut rows: Vec<i64> = (0..self.cfg.rows)
                .map(|i| {
                    let base = self.base(h, i);
                    let (c, p) = (self.group(base), prev.group(base));
                    per_bit.clear();
                    per_bit.extend((0..8 * self.key_len).map(|b| {
                        Self::matching(c, k.as_bytes(), b) - Self::matching(p, k.as_bytes(), b)
                    }));
                    median_i64(&mut per_bit)
                })
                .collect();
            let e = median_i64(&mut rows).unsigned_abs();
            if e >= theta as u64 {
                flows.push((k, e));
            }
        }
        Ok(Detection::sorted(flows, false))
    }
}

impl Algorithm for Deltoid {
    fn name(&self) -> &'static str {
        NAME
    }

    fn tasks(&self) -> &'static [Task] {
        TASKS
    }

    fn update(&mut self, key: &FlowKey, weight: u64) {
        if key.len() != self.key_len {
            self.skipped += 1;
            return;
        }
        let h = self.hash.hash(key);
        let w = w32(weight);
        let mut buf = [0u32; 8 * MAX_KEY_LEN];
        let adds = bit_adds(key, w, &mut buf);
        for i in 0..self.cfg.rows {
            let base = self.base(h, i);
            self.add(base, w, adds);
        }
    }

    /// Hash a step of 16 keys, prefetch every cache line of each of their groups, then add.
    fn update_batch(&mut self, keys: &[FlowKey], weights: &[u64]) {
        let mut bases = [[0usize; MAX_ROWS]; STEP];
        let mut ok = [false; STEP];
        let mut buf = [0u32; 8 * MAX_KEY_LEN];
        for (ks, ws) in keys.chunks(STEP).zip(weights.chunks(STEP)) {
            for (j, k) in ks.iter().enumerate() {
                ok[j] = k.len() == self.key_len;
                if ok[j] {
                    let h = self.hash.hash(k);
                    for (i, slot) in bases[j].iter_mut().enumerate().take(self.cfg.rows) {
                        *slot = self.base(h, i);
                        self.prefetch_group(*slot);
                    }
                }
            }
            for (j, (k, &w)) in ks.iter().zip(ws).enumerate() {
                if ok[j] {
                    let w = w32(w);
                    let adds = bit_adds(k, w, &mut buf);
                    for &b in &bases[j][..self.cfg.rows] {
                        self.add(b, w, adds);
                    }
                } else {
                    self.skipped += 1;
                }
            }
        }
    }

    fn reset(&mut self) {
        self.dirty.clear_items_in(&mut self.counters, self.stride);
        self.skipped = 0;
    }

    fn memory_bytes(&self) -> usize {
        4 * self.counters.len() + self.dirty.memory_bytes()
    }

    fn heavy_hitters(&self, threshold: u64) -> Option<Vec<Estimate>> {
        Some(self.detect_heavy_hitters(threshold).flows)
    }

    /// `None` if `prev` is not a `Deltoid` of the same configuration and seed.
    fn heavy_changers(&self, prev: &dyn Algorithm, threshold: u64) -> Option<Vec<Estimate>> {
        let prev = algo::downcast::<Deltoid>(prev)?;
        self.detect_heavy_changers(prev, threshold)
            .ok()
            .map(|d| d.flows)
    }

    /// A changer's estimate is the median over rows of the median over its bits of the
    /// bit-matching counters' change (module docs, INFOCOM'04 sec. 3.2), off by what the rest of
    /// the group changed on those bits: the noise is that estimate for a key never seen (random
    /// groups and random key bits), measured on both epochs' counters (`algo::change_caveat`).
    fn change_caveats(&self, prev: &dyn Algorithm, threshold: u64) -> Vec<algo::Caveat> {
        let Some(p) = algo::downcast::<Deltoid>(prev).filter(|p| self.compatible(p)) else {
            return Vec::new();
        };
        let mut per_bit = Vec::with_capacity(8 * self.key_len);
        let mut key = [0u8; MAX_KEY_LEN];
        let noise = |h: u64| {
            for (i, b) in key.iter_mut().enumerate() {
                *b = key::mix64(h ^ i as u64) as u8;
            }
            let key = &key[..self.key_len];
            let mut rows: Vec<i64> = (0..self.cfg.rows)
                .map(|i| {
                    let base = self.base(h, i);
                    let (c, q) = (self.group(base), p.group(base));
                    per_bit.clear();
                    per_bit.extend(
                        (0..8 * self.key_len)
                            .map(|b| Self::matching(c, key, b) - Self::matching(q, key, b)),
                    );
                    median_i64(&mut per_bit)
                })
                .collect();
            median_i64(&mut rows) as f64
        };
        algo::change_caveat(
            threshold,
            "groups",
            self.cfg.groups,
            algo::NoiseScale::Linear,
            noise,
            |t| self.detect_heavy_changers(p, t).ok().map(|d| d.flows),
        )
    }

    fn merge(&mut self, other: &dyn Algorithm) -> Result<(), MergeError> {
        let o = algo::merge_peer(self, other, |o| self.compatible(o))?;
        for (a, b) in self.counters.iter_mut().zip(&o.counters) {
            *a = a.saturating_add(*b);
        }
        self.dirty.merge(&o.dirty);
        self.skipped += o.skipped;
        Ok(())
    }
}

/// This algorithm's facts, listed in the `catalog` crate.
pub const ENTRY: algo::Entry = algo::Entry {
    name: NAME,
    tasks: TASKS,
    fit: algo::KeyFit::Exact,
    build: |p, ctx| algo::build_with(NAME, p, |c| Deltoid::new(c, ctx)),
    // Exact: `rows x groups x (1 + 8 key_len)` u32 counters, allocated at construction.
    memory: |p, ctx| {
        algo::Entry::memory_with(NAME, p, |c: DeltoidConfig| {
            c.validate(ctx.key_len)?;
            let stride = 1 + 8 * ctx.key_len as u64;
            let counters = c.rows as u64 * c.groups as u64 * stride;
            Ok(4 * counters + algo::Dirty::bytes_for(counters as usize, 4))
        })
    },
    defaults: algo::defaults_of::<DeltoidConfig>,
    flow_size_only: "",
    resets_to_empty: true,
    save: algo::save_state::<Deltoid>,
    load: |b| algo::load_state::<Deltoid>(NAME, b),
    // ns per update, u32 / FlowKey path: `cargo run --release -p catalog --example update_costs`.
    cost: algo::UpdateCost {
        u32_ns: 25.87,
        wide_ns: 55.81,
        behind: 1.04,
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ctx, feed, key_of, planted, planted_stream, zipf_stream};
    use testkit::weighted_truth;

    /// `set_counters` (SketchVisor's write-back): a wrong length changes nothing; the right one
    /// is the new state (a group set to one key's counters decodes that key), and reset clears it.
    #[test]
    fn set_counters_validates_and_writes() {
        let mut s = Deltoid::new(DeltoidConfig::default(), &ctx(5, 4)).unwrap();
        let mut one = s.clone();
        let k = key_of(11, 4);
        one.update(&k, 1000);
        let before = s.clone();
        let t: Vec<f64> = one.counters().iter().map(|&c| f64::from(c)).collect();
        assert!(!s.set_counters(&t[1..]));
        assert_eq!(s, before);
        assert!(s.set_counters(&t));
        assert_eq!(s.counters(), one.counters());
        assert_eq!(s.detect_heavy_hitters(500).flows, vec![(k, 1000)]);
        s.reset();
        assert!(s.counters().iter().all(|&c| c == 0));
    }

    #[test]
    fn recovers_planted_heavy_hitters() {
        for key_len in [4usize, 13] {
            let bg = zipf_stream(100_000, 1.1, 300_000, key_len, 1);
            let plant = planted(10, key_len, 0xabc);
            let stream = planted_stream(&bg, &plant, 20_000, 2);
            let t = 10_000;
            let truth = weighted_truth(&stream);
            let true_hh: Vec<FlowKey> = truth
                .iter()
                .filter(|(_, &v)| v >= t)
                .map(|(k, _)| *k)
                .collect();
            assert!(true_hh.len() >= 10);
            let mut s = Deltoid::new(DeltoidConfig::default(), &ctx(5, key_len)).unwrap();
            feed(&mut s, &stream);
            let d = s.detect_heavy_hitters(t);
            for k in &true_hh {
                let (_, e) = d
                    .flows
                    .iter()
                    .find(|(f, _)| f == k)
                    .unwrap_or_else(|| panic!("key_len {key_len}: missed {k}"));
                assert!(*e >= truth[k], "an upper bound");
            }
            let fp = d
                .flows
                .iter()
                .filter(|(k, _)| truth.get(k).copied().unwrap_or(0) < t);
            assert!(fp.count() <= 2);
        }
    }

    #[test]
    fn recovers_heavy_changers() {
        let bg1 = zipf_stream(100_000, 1.1, 200_000, 4, 11);
        let bg2 = zipf_stream(100_000, 1.1, 200_000, 4, 12);
        let up = planted(5, 4, 0x100);
        let down = planted(5, 4, 0x200);
        let mut e1 = planted_stream(&bg1, &down, 16_000, 3);
        e1.extend(up.iter().map(|&k| (k, 1_000)));
        let mut e2 = planted_stream(&bg2, &up, 16_000, 4);
        e2.extend(down.iter().map(|&k| (k, 1_000)));
        let (t1, t2) = (weighted_truth(&e1), weighted_truth(&e2));
        let change = |k: &FlowKey| {
            (t2.get(k).copied().unwrap_or(0) as i64 - t1.get(k).copied().unwrap_or(0) as i64)
                .unsigned_abs()
        };
        let t = 8_000u64;
        let mut keys: Vec<FlowKey> = t1.keys().chain(t2.keys()).copied().collect();
        keys.sort_unstable();
        keys.dedup();
        let true_hc: Vec<FlowKey> = keys.iter().filter(|k| change(k) >= t).copied().collect();
        assert_eq!(true_hc.len(), 10);
        let c = ctx(9, 4);
        let mut s1 = Deltoid::new(DeltoidConfig::default(), &c).unwrap();
        let mut s2 = s1.clone();
        feed(&mut s1, &e1);
        feed(&mut s2, &e2);
        let d = s2.detect_heavy_changers(&s1, t).unwrap();
        for k in &true_hc {
            let (_, e) = d
                .flows
                .iter()
                .find(|(f, _)| f == k)
                .expect("missed a changer");
            let rel = (*e as f64 - change(k) as f64).abs() / change(k) as f64;
            assert!(rel < 0.1, "estimate {e} vs {}", change(k));
        }
        assert!(d.flows.iter().filter(|(k, _)| change(k) < t).count() <= 2);
        assert_eq!(s2.heavy_changers(&s1, t).unwrap(), d.flows);
        let other = Deltoid::new(DeltoidConfig::default(), &ctx(10, 4)).unwrap();
        assert!(s2.heavy_changers(&other, t).is_none());
    }

    /// The queries visit only written groups; with every block marked they visit all groups,
    /// the plain full scan. Both must answer the same, for tiny and full epochs.
    #[test]
    fn written_group_scans_equal_full_scans() {
        for key_len in [4usize, 13] {
            let c = ctx(8, key_len);
            for (n, len) in [(10usize, 30usize), (20_000, 100_000)] {
                let unit = |seed| -> Vec<(FlowKey, u64)> {
                    zipf_stream(n, 1.1, len, key_len, seed)
                        .into_iter()
                        .map(|k| (k, 1))
                        .collect()
                };
                let (mut s1, mut s2) = (
                    Deltoid::new(DeltoidConfig::default(), &c).unwrap(),
                    Deltoid::new(DeltoidConfig::default(), &c).unwrap(),
                );
                feed(&mut s1, &unit(1));
                feed(&mut s2, &unit(2)[..len / 2]);
                let full = |s: &Deltoid| {
                    let mut f = s.clone();
                    f.dirty.mark_all();
                    f
                };
                let (f1, f2) = (full(&s1), full(&s2));
                for t in [1u64, 3, 100, 1_000] {
                    let hh = s1.detect_heavy_hitters(t);
                    assert_eq!(hh, f1.detect_heavy_hitters(t), "{key_len} {n} {t}");
                    let hc = s2.detect_heavy_changers(&s1, t).unwrap();
                    assert_eq!(hc, f2.detect_heavy_changers(&f1, t).unwrap());
                }
                s1.reset();
                assert_eq!(s1, Deltoid::new(DeltoidConfig::default(), &c).unwrap());
            }
        }
    }

    #[test]
    fn linear_merge_batch_and_aggregation() {
        let bg = zipf_stream(5_000, 1.1, 30_000, 4, 21);
        let stream: Vec<(FlowKey, u64)> = bg.iter().map(|&k| (k, 1)).collect();
        let c = ctx(3, 4);
        let cfg = DeltoidConfig {
            rows: 3,
            groups: 500,
        };
        let mut whole = Deltoid::new(cfg.clone(), &c).unwrap();
        for &(k, w) in &stream {
            whole.update(&k, w);
        }
        let mut batch = Deltoid::new(cfg.clone(), &c).unwrap();
        feed(&mut batch, &stream);
        assert_eq!(batch, whole);
        let (a, b) = stream.split_at(stream.len() / 2);
        let mut sa = Deltoid::new(cfg.clone(), &c).unwrap();
        let mut sb = sa.clone();
        feed(&mut sa, a);
        feed(&mut sb, b);
        sa.merge(&sb).unwrap();
        assert_eq!(sa, whole);
        assert_eq!(
            serde_json::to_string(&sa).unwrap(),
            serde_json::to_string(&whole).unwrap()
        );
        let mut pairs: Vec<(FlowKey, u64)> = weighted_truth(&stream).into_iter().collect();
        pairs.sort_unstable();
        let mut agg = Deltoid::new(cfg.clone(), &c).unwrap();
        feed(&mut agg, &pairs);
        assert_eq!(agg, whole);
        let mut other = Deltoid::new(cfg.clone(), &ctx(4, 4)).unwrap();
        feed(&mut other, &stream);
        assert_ne!(other, whole);
        assert_eq!(whole.merge(&other), Err(MergeError::Mismatch(NAME)));
        let mut r = whole.clone();
        r.reset();
        assert_eq!(r, Deltoid::new(cfg, &c).unwrap());
        // The counters, and the written-block map: one bit per 16 counters.
        assert_eq!(
            r.memory_bytes(),
            4 * 3 * 500 * 33 + (3 * 500 * 33usize).div_ceil(16 * 64) * 8
        );
    }

    /// The vectorized update against the definition spelled out bit by bit (module docs):
    /// T0 += w and T1[b] += w for each set bit b, saturating, in each row's group; with weights
    /// that saturate counters, both key lengths, single and batch updates.
    #[test]
    fn update_is_the_bitwise_definition() {
        for key_len in [4usize, 13] {
            let cfg = DeltoidConfig { rows: 3, groups: 7 };
            let mut s = Deltoid::new(cfg.clone(), &ctx(2, key_len)).unwrap();
            let mut want = s.counters.clone();
            let stream: Vec<(FlowKey, u64)> = (0..400u64)
                .map(|i| {
                    let w = match i % 4 {
                        0 => 0,
                        1 => 1 << 31,
                        _ => key::mix64(i) % 1000,
                    };
                    (key_of(key::mix64(i % 50), key_len), w)
                })
                .collect();
            for (n, &(k, w)) in stream.iter().enumerate() {
                let h = s.hash.hash(&k);
                for i in 0..cfg.rows {
                    let base = s.base(h, i);
                    let w = w32(w);
                    want[base] = want[base].saturating_add(w);
                    for b in 0..8 * key_len {
                        if k.as_bytes()[b / 8] & (0x80 >> (b % 8)) != 0 {
                            want[base + 1 + b] = want[base + 1 + b].saturating_add(w);
                        }
                    }
                }
                if n % 2 == 0 {
                    s.update(&k, w);
                } else {
                    s.update_batch(&[k], &[w]);
                }
            }
            assert_eq!(s.counters, want, "key_len {key_len}");
            assert!(want.contains(&u32::MAX), "some counter saturated");
        }
    }

    #[test]
    fn bad_input_and_config() {
        let mut s = Deltoid::new(DeltoidConfig::default(), &ctx(1, 4)).unwrap();
        s.update(&key_of(1, 8), 3);
        s.update_batch(&[FlowKey::EMPTY], &[1]);
        assert_eq!(s.skipped(), 2);
        s.update(&key_of(0xffff_ffff, 4), u64::MAX);
        assert_eq!(s.estimate(&key_of(0xffff_ffff, 4)), u64::from(u32::MAX));
        assert_eq!(s.detect_heavy_hitters(0).flows.len(), 1);
        let e = |cfg: DeltoidConfig, kl| Deltoid::new(cfg, &ctx(1, kl)).err().unwrap().to_string();
        assert!(e(DeltoidConfig { rows: 0, groups: 9 }, 4).contains("rows"));
        assert!(e(DeltoidConfig { rows: 2, groups: 0 }, 4).contains("groups"));
        assert!(e(DeltoidConfig::default(), 0).contains("key_len"));
    }

    /// The heavy-changer caveat (issue 12, `algo::change_caveat`): quiet at the default size
    /// with nothing near the threshold; the flows answered within the noise of it named when
    /// 20 changers sit exactly at it; "dominated by collisions" at 16 (`groups`).
    #[test]
    fn change_caveat_names_groups() {
        let make =
            |groups| move || Deltoid::new(DeltoidConfig { rows: 2, groups }, &ctx(5, 13)).unwrap();
        let t = 1000;
        let (cur, prev) = crate::testutil::change_epochs(make(4096), 13, 0);
        assert_eq!(cur.heavy_changers(&prev, t).unwrap().len(), 10);
        assert_eq!(cur.change_caveats(&prev, t), vec![]);
        let (cur, prev) = crate::testutil::change_epochs(make(4096), 13, 20);
        let c = cur.change_caveats(&prev, t);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].parameter, "groups");
        assert!(
            c[0].message.contains("flows' estimated changes are within"),
            "{c:?}"
        );
        let (cur, prev) = crate::testutil::change_epochs(make(16), 13, 0);
        let c = cur.change_caveats(&prev, t);
        assert_eq!(c.len(), 1, "{c:?}");
        assert!(c[0].message.contains("dominated by collisions"), "{c:?}");
        // A previous state of another configuration: nothing to compare, nothing said.
        let (other, _) = crate::testutil::change_epochs(make(2048), 13, 0);
        assert_eq!(cur.change_caveats(&other, t), vec![]);
    }
}
