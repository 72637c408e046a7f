//! Space-Saving (Metwally et al., ICDT'05; ALGORITHMS.md section 10) with k counters kept in the
//! paper's Stream-Summary (`stream_summary`: buckets of equal counts in count order, O(1) unit
//! increments) or, for k up to [`Structure::SCAN_MAX_CAP`], a flat table whose minimum is found
//! by a SIMD scan (`scan_summary`: O(1) increments of any weight, as Agg-Evict's evictions are),
//! plus a key -> slot index (Agg-Evict's "Space-Saving top 128", section 4.1). Both hold the
//! same state update for update (`summary`).
//!
//! Update: a monitored key adds `w` (moving to the bucket of its new count). A new key takes a free slot with
//! `(c, ε) = (w, 0)`, or else replaces the minimum: `c = c_min + w`, `ε = c_min`.
//! Invariants (tested): `sum c = N` (`sum c <= N` once merged); `c_min <= N/k`; `c - ε <= f <= c`
//! and `ε <= c_min` for every monitored key; every key with `f > c_min` (so every `f > N/k`) is
//! monitored. `update(k, w)` equals `w` consecutive unit updates; the state depends on the
//! interleaving of keys (class C), so the invariants, not the state, survive Agg-Evict.
//!
//! Mergeable (Agarwal et al., "Mergeable Summaries", PODS'12 / TODS'13; the proof is in
//! `count_heap`): counts and ε are added key by key, a key missing from a full side taking that
//! side's `c_min` as both, and the k largest counts are kept. Every invariant above holds for the
//! union with `N = N1 + N2`, except that `sum c` may fall below `N` (the dropped candidates take
//! their counts with them). No answer relies on `sum c = N`: heavy hitters and top-k read held
//! counts, the caveats each count's own ε and the run's N, [`SpaceSaving::total`] is `N1 + N2`.

use algo::{Algorithm, ConfigError, Estimate, MergeError, Task};
use key::{FlowKey, HashInput};
use serde::{Deserialize, Serialize};

use crate::exact;
pub use crate::summary::Structure;
use crate::summary::{Summary, MAX_CAP};

const NAME: &str = "space_saving";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SpaceSavingConfig {
    /// Number of counters. Default 8192: a heavy hitter above 0.05% of the epoch (the default
    /// threshold T = N/2000) is always held, with an overcount of at most N/8192 = T/4 (F1 >= 0.9
    /// on Zipf 0.6-1.4; issue 12). Agg-Evict section 4.1 used 128 (`--preset agg-evict`).
    pub k: usize,
}

impl Default for SpaceSavingConfig {
    fn default() -> Self {
        SpaceSavingConfig { k: 8192 }
    }
}

impl SpaceSavingConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.k == 0 || self.k > MAX_CAP {
            return Err(crate::invalid(NAME, "k", "must be in 1..=2^24"));
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpaceSaving {
    /// Monitored keys with their count and ε (the over-estimation bound).
    summary: Summary,
    total: u64,
}

impl algo::CheckState for SpaceSaving {
    /// The summary checked itself as it was rebuilt from its saved slots (capacity, distinct
    /// keys, ε within each count: `summary.rs`; the Stream-Summary's links are never loaded,
    /// so a snapshot cannot carry broken ones); what is left is the capacity's range.
    fn check_state(&self) -> Result<(), String> {
        let k = self.summary.cap();
        if k == 0 || k > MAX_CAP {
            return Err(format!("capacity {k} outside 1..={MAX_CAP}"));
        }
        Ok(())
    }
}

impl SpaceSaving {
    pub fn new(cfg: SpaceSavingConfig) -> Result<SpaceSaving, ConfigError> {
        Self::with_structure(Structure::for_cap(cfg.k), cfg)
    }

    /// [`SpaceSaving::new`] in the given structure rather than the one k selects (the same
    /// answers either way: for measuring the two against each other).
    pub fn with_structure(
        structure: Structure,
        cfg: SpaceSavingConfig,
    ) -> Result<SpaceSaving, ConfigError> {
        cfg.validate()?;
        Ok(SpaceSaving {
            summary: Summary::new(structure, cfg.k),
            total: 0,
        })
    }

    /// The structure holding the counters.
    pub fn structure(&self) -> Structure {
        self.summary.structure()
    }

    pub fn k(&self) -> usize {
        self.summary.cap()
    }

    /// N, the total weight seen.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Smallest count when all k counters are in use (else 0): an upper bound on the size of
    /// every unmonitored key, and at most N/k.
    pub fn min_count(&self) -> u64 {
        self.summary.floor()
    }

    /// `(c, ε)` of a monitored key: its size is in `[c - ε, c]`.
    pub fn bounds(&self, key: &FlowKey) -> Option<(u64, u64)> {
        self.summary.get(key)
    }

    /// A batch in order, each run of equal consecutive keys as one update of the run's summed
    /// weight: the same state as one update per key, since `update(k, w)` equals `w` unit
    /// updates (module docs), and a train of packets of one flow (bursty traffic: about 4 in 5
    /// packets repeat the one before) costs one lookup instead of one each.
    fn offer_runs<K: HashInput + PartialEq>(&mut self, keys: &[K], weights: &[u64]) {
        let n = keys.len().min(weights.len());
        let mut i = 0;
        while i < n {
            let k = keys[i];
            let mut w = weights[i];
            i += 1;
            while i < n && keys[i] == k {
                w = w.saturating_add(weights[i]);
                i += 1;
            }
            if w != 0 {
                self.total = self.total.saturating_add(w);
                self.summary.offer(&k, w);
            }
        }
    }

    /// Monitored `(key, c, ε)` triples, in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = (FlowKey, u64, u64)> + '_ {
        self.summary.entries()
    }
}

/// Not flow size: the k held flows are overcounted by up to N/k and every other flow has no
/// count, a mean relative error of 2-6 over an epoch's flows (issue 12's bar is 1).
const TASKS: &[Task] = &[Task::HeavyHitters, Task::TopK];

impl Algorithm for SpaceSaving {
    fn name(&self) -> &'static str {
        NAME
    }

    fn tasks(&self) -> &'static [Task] {
        TASKS
    }

    fn update(&mut self, key: &FlowKey, weight: u64) {
        if weight == 0 {
            return;
        }
        self.total = self.total.saturating_add(weight);
        self.summary.offer(key, weight);
    }

    fn update_batch(&mut self, keys: &[FlowKey], weights: &[u64]) {
        self.offer_runs(keys, weights);
    }

    /// 4-byte keys without building `FlowKey`s (the same state as `update` of
    /// `FlowKey::from_u32`: the summary hashes and compares them alike).
    fn update_batch_u32(&mut self, keys: &[u32], weights: &[u64]) {
        self.offer_runs(keys, weights);
    }

    fn reset(&mut self) {
        self.summary.clear();
        self.total = 0;
    }

    fn memory_bytes(&self) -> usize {
        self.summary.memory_bytes()
    }

    /// Monitored keys with `c >= threshold`. Recall is 1 for `threshold > min_count()`; a key
    /// with `c - ε >= threshold` is a guaranteed heavy hitter.
    fn heavy_hitters(&self, threshold: u64) -> Option<Vec<Estimate>> {
        Some(exact::heavy_hitters(
            self.entries().map(|e| (e.0, e.1)),
            threshold,
        ))
    }

    fn top_k(&self, k: usize) -> Option<Vec<Estimate>> {
        Some(exact::top_k(self.entries().map(|e| (e.0, e.1)), k))
    }

    /// A held count c is over by at most its own ε: a reported flow with c - ε below the
    /// threshold may not be above it.
    fn caveats(&self, task: Task, threshold: Option<u64>, total: u64) -> Vec<algo::Caveat> {
        let counts: Vec<(u64, u64)> = self.entries().map(|e| (e.1, e.2)).collect();
        let mut v = crate::overcount_caveats(task, threshold, &counts, total);
        // One caveat naming `k` is enough: the overcount one already asks for a larger k.
        if v.is_empty() {
            v = crate::capped_caveats(task, threshold, self.k(), self.min_count(), total);
        }
        v
    }

    /// The mergeable-summaries merge (module docs): `c` and `ε` added key by key, a key missing
    /// from a full side getting that side's `c_min` for both, the k largest kept. The invariants
    /// hold for the union with `N = N1 + N2` (`sum c <= N`). Requires the same k.
    fn merge(&mut self, other: &dyn Algorithm) -> Result<(), MergeError> {
        let o = algo::merge_peer(self, other, |o| o.k() == self.k())?;
        self.summary.merge(&o.summary);
        self.total = self.total.saturating_add(o.total);
        Ok(())
    }
}

/// This algorithm's facts, listed in the `catalog` crate.
///
/// `memory`: exact, the `k` slots (and buckets) and the key index of the structure k selects,
/// allocated at construction and never grown (`Structure::bytes_for`).
pub const ENTRY: algo::Entry = algo::Entry {
    name: NAME,
    tasks: TASKS,
    fit: algo::KeyFit::Any,
    build: |p, _ctx| algo::build_with(NAME, p, SpaceSaving::new),
    memory: |p, _ctx| {
        algo::Entry::memory_with(NAME, p, |c: SpaceSavingConfig| {
            c.validate()?;
            Ok(Structure::for_cap(c.k).bytes_for(c.k))
        })
    },
    defaults: algo::defaults_of::<SpaceSavingConfig>,
    flow_size_only: "",
    resets_to_empty: true,
    save: algo::save_state::<SpaceSaving>,
    load: |b| algo::load_state::<SpaceSaving>(NAME, b),
    // ns per update, u32 / FlowKey path: `cargo run --release -p catalog --example update_costs`.
    cost: algo::UpdateCost {
        u32_ns: 20.73,
        wide_ns: 24.05,
        behind: 1.05,
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count_heap::testing::{f1_all_found, merge_all, split};
    use key::KeyMap;
    use testkit::{truth, zipf_keys};

    /// The module's invariants against exact counts `t` of total `n`: `sum c = n`, or `<= n` for
    /// a `merged` summary.
    fn check_invariants(s: &SpaceSaving, t: &KeyMap<u64>, n: u64, merged: bool) {
        s.summary.check();
        assert_eq!(s.total(), n);
        let sum = s.entries().map(|e| e.1).sum::<u64>();
        if merged {
            assert!(sum <= n, "sum c {sum} > N {n}");
        } else {
            assert_eq!(sum, n, "sum c = N");
        }
        let k = s.k() as u64;
        assert!(
            s.min_count() <= n / k,
            "c_min {} > N/k {}",
            s.min_count(),
            n / k
        );
        for (key, c, eps) in s.entries() {
            let f = t.get(&key).copied().unwrap_or(0);
            assert!(c - eps <= f && f <= c, "{key}: c={c} eps={eps} f={f}");
            assert!(eps <= s.min_count(), "{key}: eps={eps} > c_min");
        }
        for (key, &f) in t {
            if f > n / k {
                assert!(
                    s.bounds(key).is_some(),
                    "{key} with f={f} > N/k not monitored"
                );
            }
            if f > s.min_count() {
                assert!(s.bounds(key).is_some());
            }
        }
    }

    #[test]
    fn invariants_on_zipf_unit_and_aggregated() {
        for (seed, skew) in [(31, 1.1), (32, 0.8), (33, 1.5)] {
            let keys = zipf_keys(200_000, 50_000, skew, seed);
            let t = truth(&keys);
            let n = keys.len() as u64;
            let mut unit = SpaceSaving::new(SpaceSavingConfig::default()).unwrap();
            for k in &keys {
                unit.update(k, 1);
            }
            check_invariants(&unit, &t, n, false);
            // Aggregated in runs (what an Agg-Evict front end does): same bounds.
            let mut agg = SpaceSaving::new(SpaceSavingConfig { k: 100 }).unwrap();
            let mut i = 0;
            while i < keys.len() {
                let mut j = i + 1;
                while j < keys.len() && keys[j] == keys[i] {
                    j += 1;
                }
                agg.update(&keys[i], (j - i) as u64);
                i = j;
            }
            let mut whole: Vec<(FlowKey, u64)> = t.iter().map(|(k, &c)| (*k, c)).collect();
            whole.sort_unstable();
            let mut agg2 = SpaceSaving::new(SpaceSavingConfig { k: 100 }).unwrap();
            for (k, c) in &whole {
                agg2.update(k, *c);
            }
            check_invariants(&agg, &t, n, false);
            check_invariants(&agg2, &t, n, false);
            let hh = unit.heavy_hitters(n / 100).unwrap();
            let want = t.values().filter(|&&f| f >= n / 100).count();
            assert!(hh.len() >= want);
        }
    }

    /// The batch paths (runs of equal keys merged, 4-byte keys as u32) leave exactly the state
    /// of one `update` per key, in order: same keys, counts and ε, so the same answers. The
    /// stream repeats keys in trains (as bursty traffic does), with weights 0..=3, in batches
    /// of assorted sizes, at a k small enough for most updates to replace the minimum.
    #[test]
    fn batch_paths_leave_the_state_of_single_updates() {
        let mut keys = Vec::new();
        let mut weights = Vec::new();
        for (i, &r) in testkit::zipf_u32(20_000, 3_000, 1.1, 44).iter().enumerate() {
            for j in 0..(1 + i % 4) {
                keys.push(r);
                weights.push(((i + j) % 4) as u64);
            }
        }
        for k in [1usize, 16, 128] {
            let cfg = SpaceSavingConfig { k };
            let mut one = SpaceSaving::new(cfg.clone()).unwrap();
            for (&x, &w) in keys.iter().zip(&weights) {
                one.update(&FlowKey::from_u32(x), w);
            }
            let (mut by_u32, mut by_key) = (
                SpaceSaving::new(cfg.clone()).unwrap(),
                SpaceSaving::new(cfg).unwrap(),
            );
            let flow: Vec<FlowKey> = keys.iter().map(|&x| FlowKey::from_u32(x)).collect();
            let mut start = 0;
            for len in [1usize, 32, 7, 100, 3].iter().cycle() {
                if start >= keys.len() {
                    break;
                }
                let end = (start + len).min(keys.len());
                by_u32.update_batch_u32(&keys[start..end], &weights[start..end]);
                by_key.update_batch(&flow[start..end], &weights[start..end]);
                start = end;
            }
            by_u32.summary.check();
            assert_eq!(by_u32, one, "k {k}: u32 batches");
            assert_eq!(by_key, one, "k {k}: FlowKey batches");
            assert_eq!(by_u32.total(), one.total());
        }
    }

    fn summary(k: usize, keys: &[FlowKey]) -> SpaceSaving {
        let mut s = SpaceSaving::new(SpaceSavingConfig { k }).unwrap();
        keys.iter().for_each(|x| s.update(x, 1));
        s
    }

    /// A Zipf stream split over 2, 3 and 4 workers, by flow and round-robin: the merged summary
    /// keeps every invariant for the whole stream, finds every heavy hitter above N/2000 with the
    /// default k, and keeps them under updates after the merge.
    #[test]
    fn merged_parts_keep_the_invariants() {
        let keys = zipf_keys(240_000, 60_000, 1.0, 34);
        let more = zipf_keys(40_000, 60_000, 1.0, 35);
        let t = truth(&keys);
        let n = keys.len() as u64;
        let mut t2 = t.clone();
        for (key, c) in truth(&more) {
            *t2.entry(key).or_insert(0) += c;
        }
        for k in [256, 8192] {
            for parts in [2, 3, 4] {
                for by_key in [true, false] {
                    let split = split(&keys, parts, by_key);
                    let mut m = merge_all(split.iter().map(|p| summary(k, p)).collect());
                    check_invariants(&m, &t, n, true);
                    let over = m.entries().map(|e| e.1 - t[&e.0]).max().unwrap_or(0);
                    let sum: u64 = m.entries().map(|e| e.1).sum();
                    eprintln!(
                        "space_saving k {k}, {parts} parts by {}: worst overcount {over}, \
                         c_min {}, N/k {}, sum c {sum} of N {n}",
                        if by_key { "flow" } else { "round-robin" },
                        m.min_count(),
                        n / k as u64
                    );
                    if k == 8192 {
                        // T = N/2000 > N/k: every heavy hitter is held and reported.
                        let hh = m.heavy_hitters(n / 2000).unwrap();
                        let f1 = f1_all_found(&hh, &t, n / 2000);
                        eprintln!("  F1 {f1:.4} ({} reported)", hh.len());
                        assert!(f1 >= 0.95, "F1 {f1}");
                    }
                    more.iter().for_each(|x| m.update(x, 1));
                    check_invariants(&m, &t2, n + more.len() as u64, true);
                }
            }
        }
    }

    /// Merging an empty summary (either way round) changes no answer; a different k or another
    /// algorithm is refused and leaves the state as it was.
    #[test]
    fn merge_with_empty_and_mismatches() {
        let keys = zipf_keys(50_000, 20_000, 1.1, 36);
        let n = keys.len() as u64;
        let answers = |s: &SpaceSaving| {
            let mut e: Vec<(FlowKey, u64, u64)> = s.entries().collect();
            e.sort_unstable();
            (
                s.total(),
                s.min_count(),
                s.heavy_hitters(n / 2000).unwrap(),
                s.top_k(100).unwrap(),
                s.caveats(Task::HeavyHitters, Some(n / 2000), n),
                e,
            )
        };
        for k in [64, 8192] {
            let s = summary(k, &keys);
            let empty = summary(k, &[]);
            let mut a = s.clone();
            a.merge(&empty).unwrap();
            a.summary.check();
            assert_eq!(answers(&a), answers(&s));
            let mut b = empty.clone();
            b.merge(&s).unwrap();
            b.summary.check();
            assert_eq!(answers(&b), answers(&s));
            let before = a.clone();
            let other_k = summary(k / 2, &keys);
            assert_eq!(a.merge(&other_k), Err(MergeError::Mismatch(NAME)));
            let heap = crate::Heap::new(crate::HeapConfig { k }).unwrap();
            assert_eq!(a.merge(&heap), Err(MergeError::Mismatch(NAME)));
            assert_eq!(a, before);
        }
    }

    /// A snapshot (the entry's `save`/`load`, postcard of the serde form) restores a summary
    /// with the same contents and answers, which goes on updating as the original did (counts
    /// and the invariants); a merged summary round-trips too.
    #[test]
    fn snapshot_round_trip() {
        let keys = zipf_keys(60_000, 20_000, 1.1, 37);
        let more = zipf_keys(20_000, 20_000, 1.1, 38);
        let mut all = keys.clone();
        all.extend_from_slice(&more);
        let (t, n) = (truth(&all), all.len() as u64);
        let mut m = summary(128, &keys[..30_000]);
        m.merge(&summary(128, &keys[30_000..])).unwrap();
        for (s, merged) in [
            (summary(128, &keys), false),
            (summary(8192, &keys), false),
            (m, true),
        ] {
            let bytes = (ENTRY.save)(&s).unwrap().unwrap();
            let back = (ENTRY.load)(&bytes).unwrap();
            let mut back = algo::downcast::<SpaceSaving>(back.as_ref())
                .unwrap()
                .clone();
            back.summary.check();
            assert_eq!(back, s);
            assert_eq!(back.heavy_hitters(100), s.heavy_hitters(100));
            let mut s = s;
            more.iter().for_each(|x| {
                s.update(x, 1);
                back.update(x, 1);
            });
            let counts = |s: &SpaceSaving| {
                let mut v: Vec<u64> = s.entries().map(|e| e.1).collect();
                v.sort_unstable();
                v
            };
            assert_eq!(counts(&back), counts(&s));
            check_invariants(&back, &t, n, merged);
        }
        assert!((ENTRY.load)(&[1, 2, 3]).is_err());
    }
}
