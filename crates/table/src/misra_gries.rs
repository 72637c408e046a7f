//! Misra-Gries frequent items (ALGORITHMS.md section 10) with k counters, weighted updates and
//! the mergeable-summaries merge of Agarwal et al. (PODS'12, section 3).
//!
//! Update: a monitored key adds `w`; a new key takes a free counter; otherwise
//! `δ = min(w, c_min)` is subtracted from every counter and from `w`, counters that reach 0 are
//! dropped, and the key is inserted with what is left of `w` (if anything).
//!
//! "Subtract from every counter" is O(1) here: counters live in a min-heap as
//! `stored = c + base`, and a global decrement is `base += δ`; zeros are the heap's minima and
//! are popped. So an update is O(log k) whatever the weight.
//!
//! Guarantee (tested, also after merges): `f - (N - sum c)/(k + 1) <= c <= f` for every key
//! (c = 0 for unmonitored keys). Each decrement step removes `δ` from k counters and from the
//! incoming weight, `(k+1)·δ` in all, which bounds the total decrement any key can suffer.
//! The estimate `c` is a lower bound: [`MisraGries::upper_bound`] adds [`MisraGries::slack`].
//! Default k = 16384: counts are under by at most N/(k+1) ~ T/8 for the default heavy-hitter
//! threshold T = N/2000, which gives F1 >= 0.9 down to Zipf 0.6 except where many flows sit just
//! above T (issue 12; 128, Space-Saving's Agg-Evict budget, is `--preset agg-evict`).

use algo::{Algorithm, ConfigError, Estimate, MergeError, Task};
use key::{FlowKey, KeyMap};
use serde::{Deserialize, Serialize};

use crate::count_heap::{CountHeap, Entry};
use crate::exact;

const NAME: &str = "misra_gries";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MisraGriesConfig {
    /// Number of counters (default 16384, module docs).
    pub k: usize,
}

impl Default for MisraGriesConfig {
    fn default() -> Self {
        MisraGriesConfig { k: 16384 }
    }
}

impl MisraGriesConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.k == 0 || self.k > 1 << 24 {
            return Err(crate::invalid(NAME, "k", "must be in 1..=2^24"));
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MisraGries {
    /// Counts stored as `c + base`.
    heap: CountHeap<()>,
    /// Sum of all global decrements so far.
    base: u64,
    /// N, the total weight summarised (including merged summaries).
    total: u64,
}

impl algo::CheckState for MisraGries {
    /// A whole heap, and every stored count (`c + base`) at least the base: the answers
    /// subtract it.
    fn check_state(&self) -> Result<(), String> {
        self.heap.check_loaded(MAX_K)?;
        if let Some(e) = self.heap.entries().iter().find(|e| e.count < self.base) {
            return Err(format!(
                "count {} of {} below the base {}",
                e.count, e.key, self.base
            ));
        }
        Ok(())
    }
}

/// Largest `k`.
const MAX_K: usize = 1 << 24;

impl MisraGries {
    pub fn new(cfg: MisraGriesConfig) -> Result<MisraGries, ConfigError> {
        cfg.validate()?;
        Ok(MisraGries {
            heap: CountHeap::new(cfg.k),
            base: 0,
            total: 0,
        })
    }

    pub fn k(&self) -> usize {
        self.heap.cap()
    }

    /// N, the total weight summarised.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Monitored (key, c) pairs, c the lower-bound estimate.
    pub fn entries(&self) -> impl Iterator<Item = Estimate> + '_ {
        let base = self.base;
        self.heap
            .entries()
            .iter()
            .map(move |e| (e.key, e.count.saturating_sub(base)))
    }

    /// `(N - sum c) / (k + 1)`: the most any key is under-estimated by.
    pub fn slack(&self) -> u64 {
        let sum: u64 = self.entries().map(|e| e.1).sum();
        self.total.saturating_sub(sum) / (self.k() as u64 + 1)
    }

    /// `c + slack()`: an upper bound on the key's size.
    pub fn upper_bound(&self, key: &FlowKey) -> u64 {
        self.count(key).saturating_add(self.slack())
    }

    fn count(&self, key: &FlowKey) -> u64 {
        self.heap
            .get(key)
            .map_or(0, |e| e.count.saturating_sub(self.base))
    }

    fn insert(&mut self, key: &FlowKey, c: u64) {
        self.heap.push(Entry {
            count: c.saturating_add(self.base),
            key: *key,
            extra: (),
        });
    }

    fn rebuild(&mut self, counts: impl Iterator<Item = Estimate>) {
        self.heap.clear();
        self.base = 0;
        for (k, c) in counts {
            if c > 0 {
                self.insert(&k, c);
            }
        }
    }
}

const TASKS: &[Task] = &[Task::HeavyHitters, Task::TopK, Task::FlowSize];

impl Algorithm for MisraGries {
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
        if let Some(p) = self.heap.position(key) {
            self.heap.add(p, weight);
            return;
        }
        let mut w = weight;
        if self.heap.is_full() {
            let min = self
                .heap
                .min()
                .map_or(0, |e| e.count.saturating_sub(self.base));
            let d = w.min(min);
            self.base = self.base.saturating_add(d);
            w -= d;
            while self.heap.min().is_some_and(|e| e.count <= self.base) {
                self.heap.pop_min();
            }
        }
        if w > 0 {
            self.insert(key, w);
        }
    }

    fn reset(&mut self) {
        self.heap.clear();
        self.base = 0;
        self.total = 0;
    }

    fn memory_bytes(&self) -> usize {
        self.heap.memory_bytes()
    }

    /// Monitored keys with `c >= threshold` (c is a lower bound: keys with
    /// `f >= threshold + slack()` are all reported, none with `f < threshold`).
    fn heavy_hitters(&self, threshold: u64) -> Option<Vec<Estimate>> {
        Some(exact::heavy_hitters(self.entries(), threshold))
    }

    fn top_k(&self, k: usize) -> Option<Vec<Estimate>> {
        Some(exact::top_k(self.entries(), k))
    }

    /// The lower-bound estimate c (0 for unmonitored keys).
    fn flow_size(&self, key: &FlowKey) -> Option<u64> {
        Some(self.count(key))
    }

    /// Counts are under by at most d = (N - sum c)/(k+1): a held flow whose count is below the
    /// threshold but within d of it may be a heavy hitter left unreported.
    /// An unheld flow weighs at most d: at a threshold of d or less, or top-k past k, flows may
    /// be missing (`capped_caveats`).
    fn caveats(&self, task: Task, threshold: Option<u64>, total: u64) -> Vec<algo::Caveat> {
        let d = self.slack();
        let (Task::HeavyHitters, Some(t)) = (task, threshold) else {
            return crate::capped_caveats(task, threshold, self.k(), d, total);
        };
        let reported = self.entries().filter(|e| e.1 >= t).count();
        let ambiguous = self
            .entries()
            .filter(|e| e.1 < t && e.1.saturating_add(d) >= t)
            .count();
        let v = crate::bound_caveat(task, t, ambiguous, reported, d, total);
        // One caveat naming `k` is enough: the bound one already asks for a larger k.
        if v.is_empty() {
            return crate::capped_caveats(task, threshold, self.k(), d, total);
        }
        v
    }

    /// Agarwal et al.'s merge: add the two summaries' counters, subtract the (k+1)-th largest
    /// from all of them and keep the positive ones. The guarantee holds for the union with
    /// N = N1 + N2. Requires the same k.
    fn merge(&mut self, other: &dyn Algorithm) -> Result<(), MergeError> {
        let o = algo::merge_peer(self, other, |o| o.k() == self.k())?;
        let mut sum: KeyMap<u64> = KeyMap::default();
        for (k, c) in self.entries().chain(o.entries()) {
            let e = sum.entry(k).or_insert(0);
            *e = e.saturating_add(c);
        }
        let mut v: Vec<Estimate> = sum.into_iter().collect();
        let k = self.k();
        if v.len() > k {
            v.select_nth_unstable_by(k, |a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let cut = v[k].1;
            v.truncate(k);
            for e in &mut v {
                e.1 -= cut;
            }
        }
        // Deterministic insertion order, so equal inputs give equal states.
        v.sort_unstable();
        self.rebuild(v.into_iter());
        self.total = self.total.saturating_add(o.total);
        Ok(())
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
    build: |p, _ctx| algo::build_with(NAME, p, MisraGries::new),
    memory: |p, _ctx| {
        algo::Entry::memory_with(NAME, p, |c: MisraGriesConfig| {
            c.validate()?;
            Ok(CountHeap::<()>::bytes_for(c.k))
        })
    },
    defaults: algo::defaults_of::<MisraGriesConfig>,
    flow_size_only: "",
    resets_to_empty: true,
    save: algo::save_state::<MisraGries>,
    load: |b| algo::load_state::<MisraGries>(NAME, b),
    // ns per update, u32 / FlowKey path: `cargo run --release -p catalog --example update_costs`.
    cost: algo::UpdateCost {
        u32_ns: 53.65,
        wide_ns: 76.49,
        behind: 1.57,
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::{truth, zipf_keys};

    fn check_bound(m: &MisraGries, t: &KeyMap<u64>, n: u64) {
        m.heap.check();
        assert_eq!(m.total(), n);
        let sum: u64 = m.entries().map(|e| e.1).sum();
        let k1 = m.k() as u64 + 1;
        assert!(m.entries().count() <= m.k());
        for (key, &f) in t {
            let c = m.flow_size(key).unwrap();
            assert!(c <= f, "{key}: c={c} > f={f}");
            // f - (N - sum c)/(k+1) <= c, multiplied out to stay in integers.
            assert!(f * k1 <= c * k1 + (n - sum), "{key}: f={f} c={c}");
            assert!(m.upper_bound(key) >= f);
        }
        for (key, c) in m.entries() {
            assert!(c > 0 && t.contains_key(&key));
        }
    }

    #[test]
    fn bound_on_zipf_unit_and_aggregated() {
        for (seed, skew, k) in [(41, 1.1, 128), (42, 0.9, 64), (43, 1.3, 16)] {
            let keys = zipf_keys(200_000, 50_000, skew, seed);
            let t = truth(&keys);
            let n = keys.len() as u64;
            let mut unit = MisraGries::new(MisraGriesConfig { k }).unwrap();
            for key in &keys {
                unit.update(key, 1);
            }
            check_bound(&unit, &t, n);
            let mut agg = MisraGries::new(MisraGriesConfig { k }).unwrap();
            let mut whole: Vec<(FlowKey, u64)> = t.iter().map(|(k, &c)| (*k, c)).collect();
            whole.sort_unstable_by_key(|e| key::mix64(e.0.prefix_u32() as u64));
            for (key, c) in &whole {
                agg.update(key, *c);
            }
            check_bound(&agg, &t, n);
            // The heaviest key survives with a tight estimate.
            let (top, f) = whole.iter().max_by_key(|e| e.1).copied().unwrap();
            assert!(agg
                .heavy_hitters(f - agg.slack())
                .unwrap()
                .iter()
                .any(|e| e.0 == top));
        }
    }

    #[test]
    fn merge_keeps_the_bound() {
        let keys = zipf_keys(200_000, 50_000, 1.1, 44);
        let (x, y) = keys.split_at(keys.len() / 3);
        let mut a = MisraGries::new(MisraGriesConfig { k: 32 }).unwrap();
        let mut b = MisraGries::new(MisraGriesConfig { k: 32 }).unwrap();
        x.iter().for_each(|k| a.update(k, 1));
        y.iter().for_each(|k| b.update(k, 2));
        a.merge(&b).unwrap();
        let mut t = truth(x);
        for (k, c) in truth(y) {
            *t.entry(k).or_insert(0) += 2 * c;
        }
        let n = x.len() as u64 + 2 * y.len() as u64;
        check_bound(&a, &t, n);
        let other_k = MisraGries::new(MisraGriesConfig { k: 8 }).unwrap();
        assert_eq!(a.merge(&other_k), Err(MergeError::Mismatch(NAME)));
        // Updates after a merge keep working on the rebuilt heap.
        x.iter().for_each(|k| a.update(k, 1));
        for k in x {
            *t.get_mut(k).unwrap() += 1;
        }
        check_bound(&a, &t, n + x.len() as u64);
    }
}
