//! Space-Saving (Metwally et al., ICDT'05; ALGORITHMS.md section 10) with k counters kept in a
//! binary min-heap plus a key -> index map (Agg-Evict's "Space-Saving top 128", section 4.1).
//!
//! Update: a monitored key adds `w` and sifts down. A new key takes a free slot with
//! `(c, ε) = (w, 0)`, or else replaces the minimum: `c = c_min + w`, `ε = c_min`.
//! Invariants (tested): `sum c = N`; `c_min <= N/k`; `c - ε <= f <= c` for every monitored key;
//! every key with `f > c_min` (so every `f > N/k`) is monitored. `update(k, w)` equals `w`
//! consecutive unit updates; the state depends on the interleaving of keys (class C), so the
//! invariants, not the state, survive Agg-Evict. Not mergeable here: a merged summary keeps the
//! bounds but loses `sum c = N`, which is what the other answers rely on.

use algo::{Algorithm, ConfigError, Estimate, Task};
use key::FlowKey;
use serde::{Deserialize, Serialize};

use crate::count_heap::CountHeap;
use crate::exact;

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
        if self.k == 0 || self.k > 1 << 24 {
            return Err(crate::invalid(NAME, "k", "must be in 1..=2^24"));
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpaceSaving {
    /// Entries carry ε (the over-estimation bound) as their extra field.
    heap: CountHeap<u64>,
    total: u64,
}

impl SpaceSaving {
    pub fn new(cfg: SpaceSavingConfig) -> Result<SpaceSaving, ConfigError> {
        cfg.validate()?;
        Ok(SpaceSaving {
            heap: CountHeap::new(cfg.k),
            total: 0,
        })
    }

    pub fn k(&self) -> usize {
        self.heap.cap()
    }

    /// N, the total weight seen.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Smallest count when all k counters are in use (else 0): an upper bound on the size of
    /// every unmonitored key, and at most N/k.
    pub fn min_count(&self) -> u64 {
        if self.heap.is_full() {
            self.heap.min().map_or(0, |e| e.count)
        } else {
            0
        }
    }

    /// `(c, ε)` of a monitored key: its size is in `[c - ε, c]`.
    pub fn bounds(&self, key: &FlowKey) -> Option<(u64, u64)> {
        self.heap.get(key).map(|e| (e.count, e.extra))
    }

    /// Monitored `(key, c, ε)` triples in heap order.
    pub fn entries(&self) -> impl Iterator<Item = (FlowKey, u64, u64)> + '_ {
        self.heap
            .entries()
            .iter()
            .map(|e| (e.key, e.count, e.extra))
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
        // ε of a new entry: the count it inherits from the evicted minimum.
        self.heap.offer(key, weight, |min| min);
    }

    fn reset(&mut self) {
        self.heap.clear();
        self.total = 0;
    }

    fn memory_bytes(&self) -> usize {
        self.heap.memory_bytes()
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
        crate::overcount_caveats(task, threshold, &counts, total)
    }
}

/// This algorithm's facts, listed in the `catalog` crate.
///
/// `memory`: at capacity, the `k` entries and the key index for `k` keys, allocated at
/// construction (see `CountHeap::bytes_for`; replacements can make hashbrown double the index).
pub const ENTRY: algo::Entry = algo::Entry {
    name: NAME,
    tasks: TASKS,
    fit: algo::KeyFit::Any,
    build: |p, _ctx| algo::build_with(NAME, p, SpaceSaving::new),
    memory: |p, _ctx| {
        algo::Entry::memory_with(NAME, p, |c: SpaceSavingConfig| {
            c.validate()?;
            Ok(CountHeap::<u64>::bytes_for(c.k))
        })
    },
    defaults: algo::defaults_of::<SpaceSavingConfig>,
    flow_size_only: "",
    resets_to_empty: true,
};

#[cfg(test)]
mod tests {
    use super::*;
    use key::KeyMap;
    use testkit::{truth, zipf_keys};

    fn check_invariants(s: &SpaceSaving, t: &KeyMap<u64>, n: u64) {
        s.heap.check();
        assert_eq!(s.total(), n);
        assert_eq!(s.entries().map(|e| e.1).sum::<u64>(), n, "sum c = N");
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
            check_invariants(&unit, &t, n);
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
            check_invariants(&agg, &t, n);
            check_invariants(&agg2, &t, n);
            let hh = unit.heavy_hitters(n / 100).unwrap();
            let want = t.values().filter(|&&f| f >= n / 100).count();
            assert!(hh.len() >= want);
        }
    }
}
