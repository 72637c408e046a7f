//! Exact linear-probing hash table of (key, count), the Re-evaluating paper's fastest exact
//! structure (section 2.2 "Hash tables": one item per bucket, linear search on collisions).
//!
//! Layout: one `Vec<u64>`; slot `i` is `stride = 1 + kw` words, word 0 the count and words
//! `1..=kw` the packed key (`crate::packed`). Key and value are co-located, so a hit costs one
//! cache line for short keys (the paper's "direct" storage, section 4, is the better choice for
//! small values). Count 0 marks an empty slot: updates have weight >= 1 and weight-0 updates are
//! ignored, so no stored flow ever has count 0 (key 0 is a valid IP, so the key cannot be the
//! marker; ALGORITHMS.md section 0).
//!
//! Capacity is fixed. The table accepts new keys while it holds fewer than
//! `floor(max_load * capacity)` flows (default 0.9: an absent key then costs about 50 probes,
//! Knuth's `(1 + 1/(1-a)^2)/2`, all in consecutive memory); past that, an update of a new key is
//! counted in [`LinearHash::dropped`] and every answer covers only the stored flows. Updates of
//! stored keys are always counted. Counts are u64 and saturate (never wrap).

use algo::{Algorithm, BuildCtx, ConfigError, Estimate, MergeError, Task};
use key::{FlowKey, HashFn};
use serde::{Deserialize, Serialize};

use crate::filled::Filled;
use crate::{packed, Dropped};

const NAME: &str = "linear_hash";
/// Distinct sub-seed constant of this algorithm ("linhash").
const SEED_TAG: u64 = 0x6c69_6e68_6173_6800;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LinearHashConfig {
    /// Number of slots. Default 2^17: about 3.5 MiB with 5-tuple keys (issue 12's 4 MiB per
    /// instance), 118 k flows at the 0.9 load; past that new flows are dropped, counted and
    /// warned about (`caveats`). The Re-evaluating paper's 2^20 is `--preset reeval`.
    pub capacity: usize,
    /// Largest fraction of slots filled before new keys are dropped, in (0, 1].
    pub max_load: f64,
}

impl Default for LinearHashConfig {
    fn default() -> Self {
        LinearHashConfig {
            capacity: 1 << 17,
            max_load: 0.9,
        }
    }
}

impl LinearHashConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.capacity == 0 || self.capacity > (1 << 32) {
            return Err(crate::invalid(NAME, "capacity", "must be in 1..=2^32"));
        }
        if !(self.max_load > 0.0 && self.max_load <= 1.0) {
            return Err(crate::invalid(NAME, "max_load", "must be in (0, 1]"));
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinearHash {
    capacity: usize,
    /// Flows accepted before new keys are dropped.
    limit: usize,
    hash: HashFn,
    /// Key words per slot.
    kw: usize,
    stride: usize,
    slots: Vec<u64>,
    len: usize,
    dropped: Dropped,
    /// The slots filled this epoch (see `filled`).
    #[serde(skip)]
    used: Filled,
}

impl algo::CheckState for LinearHash {
    /// The capacity valid, `capacity` whole entries, the fill limit within it and the filled
    /// entries counted, so that a probe (bounded by the capacity) and the scans stay in the
    /// table (a forged stride or capacity made them slice past it).
    fn check_state(&self) -> Result<(), String> {
        if self.capacity == 0 || self.capacity > 1 << 32 {
            return Err(format!("capacity {} outside 1..=2^32", self.capacity));
        }
        if self.limit == 0 || self.limit > self.capacity || self.len > self.limit {
            return Err(format!(
                "{} flows with a limit of {} in a capacity of {}",
                self.len, self.limit, self.capacity
            ));
        }
        if self.slots.len() != self.capacity.saturating_mul(self.stride) {
            return Err(format!(
                "{} words for {} entries of {}",
                self.slots.len(),
                self.capacity,
                self.stride
            ));
        }
        packed::check_entries(&self.slots, self.stride, self.kw, self.len)
    }
}

impl LinearHash {
    /// Validate `cfg` for `ctx` and return the u64 words per slot (count + packed key).
    fn stride(cfg: &LinearHashConfig, ctx: &BuildCtx) -> Result<usize, ConfigError> {
        cfg.validate()?;
        if ctx.key_len > key::MAX_KEY_LEN {
            return Err(crate::invalid(
                NAME,
                "key_len",
                "longer than the longest key",
            ));
        }
        Ok(1 + packed::words(ctx.key_len))
    }

    pub fn new(cfg: LinearHashConfig, ctx: &BuildCtx) -> Result<LinearHash, ConfigError> {
        let stride = Self::stride(&cfg, ctx)?;
        let kw = stride - 1;
        let limit = Self::limit(&cfg);
        Ok(LinearHash {
            capacity: cfg.capacity,
            limit,
            hash: HashFn::new(key::sub_seed(ctx.seed, SEED_TAG)),
            kw,
            stride,
            slots: vec![0; cfg.capacity * stride],
            len: 0,
            dropped: Dropped::default(),
            used: Filled::with_capacity(limit),
        })
    }

    /// Flows accepted before new keys are dropped (`max_load` of the capacity).
    fn limit(cfg: &LinearHashConfig) -> usize {
        ((cfg.max_load * cfg.capacity as f64).floor() as usize).clamp(1, cfg.capacity)
    }

    /// Updates that could not be stored (table at its load limit, or key too long).
    pub fn dropped(&self) -> Dropped {
        self.dropped
    }

    /// Number of stored flows.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Stored (key, count) pairs in slot order.
    pub fn entries(&self) -> Box<dyn Iterator<Item = Estimate> + '_> {
        self.used.entries(&self.slots, self.stride, self.len)
    }

    /// Exact count of `key` (0 if it was never stored).
    pub fn get(&self, key: &FlowKey) -> u64 {
        self.find(key).unwrap_or(0)
    }

    fn find(&self, key: &FlowKey) -> Option<u64> {
        if !packed::fits(key, self.kw) {
            return None;
        }
        let p = packed::pack(key);
        let mut i = key::reduce(self.hash.hash(key), self.capacity);
        for _ in 0..self.capacity {
            let s = &self.slots[i * self.stride..(i + 1) * self.stride];
            if s[0] == 0 {
                return None;
            }
            if s[1..] == p[..self.kw] {
                return Some(s[0]);
            }
            i += 1;
            if i == self.capacity {
                i = 0;
            }
        }
        None
    }

    #[inline]
    fn update_hashed(&mut self, key: &FlowKey, h: u64, w: u64) {
        let p = packed::pack(key);
        let (kw, stride, cap) = (self.kw, self.stride, self.capacity);
        let mut i = key::reduce(h, cap);
        // Bounded by the capacity so a completely full table (max_load = 1) cannot loop forever.
        for _ in 0..cap {
            let s = &mut self.slots[i * stride..(i + 1) * stride];
            if s[0] == 0 {
                if self.len >= self.limit {
                    break;
                }
                s[0] = w;
                s[1..].copy_from_slice(&p[..kw]);
                self.len += 1;
                self.used.push(i);
                return;
            }
            if s[1..] == p[..kw] {
                s[0] = s[0].saturating_add(w);
                return;
            }
            i += 1;
            if i == cap {
                i = 0;
            }
        }
        self.dropped.add(w);
    }

    /// Insert a stored (key, count) pair of another table (merge).
    fn add_entry(&mut self, key: &FlowKey, w: u64) {
        if w == 0 {
            return;
        }
        if !packed::fits(key, self.kw) {
            self.dropped.add(w);
            return;
        }
        let h = self.hash.hash(key);
        self.update_hashed(key, h, w);
    }
}

/// Everything a flow set answers.
const TASKS: &[Task] = crate::exact::TASKS;

impl crate::exact::FlowSet for LinearHash {
    fn flows(&self) -> impl Iterator<Item = Estimate> + '_ {
        self.entries()
    }

    fn count_of(&self, key: &FlowKey) -> Option<u64> {
        self.find(key)
    }

    fn flow_count(&self) -> f64 {
        self.len as f64
    }
}

impl Algorithm for LinearHash {
    fn name(&self) -> &'static str {
        NAME
    }

    fn tasks(&self) -> &'static [Task] {
        TASKS
    }

    #[inline]
    fn update(&mut self, key: &FlowKey, weight: u64) {
        if weight == 0 {
            return;
        }
        if !packed::fits(key, self.kw) {
            self.dropped.add(weight);
            return;
        }
        let h = self.hash.hash(key);
        self.update_hashed(key, h, weight);
    }

    fn update_batch(&mut self, keys: &[FlowKey], weights: &[u64]) {
        let mut hs = [0u64; crate::BATCH];
        for (ks, ws) in keys.chunks(crate::BATCH).zip(weights.chunks(crate::BATCH)) {
            // Hash the chunk and prefetch every home slot before touching any, so the misses
            // overlap instead of serialising (Re-evaluating section 2.2, batching).
            for (h, k) in hs.iter_mut().zip(ks) {
                *h = self.hash.hash(k);
                crate::prefetch(&self.slots, key::reduce(*h, self.capacity) * self.stride);
            }
            for ((k, &w), &h) in ks.iter().zip(ws).zip(&hs) {
                if w == 0 {
                    continue;
                }
                if packed::fits(k, self.kw) {
                    self.update_hashed(k, h, w);
                } else {
                    self.dropped.add(w);
                }
            }
        }
    }

    fn reset(&mut self) {
        self.used.clear(&mut self.slots, self.stride, self.len);
        self.len = 0;
        self.dropped = Dropped::default();
    }

    /// The slots, and the list of filled ones at its capacity (4 bytes per flow accepted).
    fn memory_bytes(&self) -> usize {
        self.slots.len() * 8 + Filled::bytes(self.limit)
    }

    crate::exact::flow_set_queries!(LinearHash);

    fn caveats(&self, _task: Task, _threshold: Option<u64>, _total: u64) -> Vec<algo::Caveat> {
        crate::full_table_caveat(self.dropped, self.len(), self.capacity())
    }

    /// Adds `other`'s counts (same capacity, key length and seed). The counts equal those of a
    /// table fed both streams; slot positions may differ (they depend on insertion order).
    fn merge(&mut self, other: &dyn Algorithm) -> Result<(), MergeError> {
        let o = algo::merge_peer(self, other, |o| {
            o.capacity == self.capacity && o.kw == self.kw && o.hash == self.hash
        })?;
        for (k, c) in o.entries() {
            self.add_entry(&k, c);
        }
        self.dropped.merge(&o.dropped);
        Ok(())
    }
}

/// This algorithm's facts, listed in the `catalog` crate.
pub const ENTRY: algo::Entry = algo::Entry {
    name: NAME,
    tasks: TASKS,
    fit: algo::KeyFit::AtMost,
    build: |p, ctx| algo::build_with(NAME, p, |c| LinearHash::new(c, ctx)),
    // Exact: `capacity` slots of `8 * (1 + key words)` bytes, allocated at construction.
    memory: |p, ctx| {
        algo::Entry::memory_with(NAME, p, |c: LinearHashConfig| {
            let stride = LinearHash::stride(&c, ctx)?;
            let slots =
                algo::Entry::product(NAME, "capacity", &[c.capacity as u64, stride as u64, 8])?;
            algo::Entry::sum(
                NAME,
                "capacity",
                &[slots, Filled::bytes(LinearHash::limit(&c)) as u64],
            )
        })
    },
    defaults: algo::defaults_of::<LinearHashConfig>,
    flow_size_only: "",
    resets_to_empty: true,
    save: algo::save_state::<LinearHash>,
    load: |b| algo::load_state::<LinearHash>(NAME, b),
    // ns per update, u32 / FlowKey path: `cargo run --release -p catalog --example update_costs`.
    cost: algo::UpdateCost {
        u32_ns: 23.05,
        wide_ns: 25.61,
        behind: 1.29,
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::{truth, zipf_keys};

    /// The pairs of a full pass over the slots (the reference for the sparse path).
    fn scanned(t: &LinearHash) -> Vec<Estimate> {
        packed::scan(&t.slots, t.stride)
    }

    #[test]
    fn sparse_and_full_paths_agree_and_reset_clears_every_slot() {
        // 4096 slots: up to 255 flows take the list of filled slots, more take full passes.
        for flows in [0u32, 1, 200, 255, 256, 3000] {
            let mut t = table(4096, 3);
            for round in 0..2 {
                for i in 0..flows {
                    t.update(
                        &FlowKey::from_u32(i.wrapping_mul(2_654_435_761)),
                        1 + u64::from(i % 3),
                    );
                }
                assert_eq!(t.len(), flows as usize);
                assert_eq!(
                    t.entries().collect::<Vec<_>>(),
                    scanned(&t),
                    "{flows} {round}"
                );
                assert_eq!(
                    t.entropy(),
                    Some(algo::entropy_of(scanned(&t).iter().map(|e| e.1)))
                );
                t.reset();
                assert!(
                    t.slots.iter().all(|&w| w == 0),
                    "{flows} flows: a slot survived reset"
                );
                assert_eq!(t.entries().count(), 0);
            }
        }
        // A table whose list of filled slots is lost (deserialized) falls back to full passes.
        let mut t = table(4096, 3);
        t.update(&FlowKey::from_u32(7), 2);
        t.used.lose();
        assert_eq!(
            t.entries().collect::<Vec<_>>(),
            vec![(FlowKey::from_u32(7), 2)]
        );
        t.reset();
        assert!(t.slots.iter().all(|&w| w == 0));
    }

    fn table(cap: usize, seed: u64) -> LinearHash {
        let ctx = BuildCtx {
            seed,
            ..BuildCtx::default()
        };
        LinearHash::new(
            LinearHashConfig {
                capacity: cap,
                ..Default::default()
            },
            &ctx,
        )
        .unwrap()
    }

    #[test]
    fn equals_truth_under_capacity() {
        let keys = zipf_keys(100_000, 5_000, 1.1, 1);
        let t = truth(&keys);
        let mut a = table(1 << 14, 7);
        for k in &keys {
            a.update(k, 1);
        }
        assert!(a.dropped().is_zero());
        assert_eq!(a.len(), t.len());
        for (k, &c) in &t {
            assert_eq!(a.flow_size(k), Some(c));
        }
        assert_eq!(a.flow_size(&FlowKey::from_u32(0xdead_beef)), Some(0));
        assert_eq!(a.cardinality(), Some(t.len() as f64));
        let exact_fsd = algo::size_histogram(t.values().copied());
        assert_eq!(a.flow_size_distribution(), Some(exact_fsd));
        let h = algo::entropy_of(t.values().copied());
        assert!((a.entropy().unwrap() - h).abs() < 1e-9);
        let hh = a.heavy_hitters(200).unwrap();
        assert_eq!(hh.len(), t.values().filter(|&&c| c >= 200).count());
        let top = a.top_k(10).unwrap();
        let mut sizes: Vec<u64> = t.values().copied().collect();
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        assert_eq!(top.iter().map(|e| e.1).collect::<Vec<_>>(), sizes[..10]);
    }

    #[test]
    fn reports_drops_over_capacity() {
        let keys = zipf_keys(50_000, 5_000, 1.1, 2);
        let t = truth(&keys);
        let mut a = table(1024, 3);
        for k in &keys {
            a.update(k, 1);
        }
        assert_eq!(a.len(), (0.9f64 * 1024.0) as usize);
        let stored: u64 = a.entries().map(|e| e.1).sum();
        let d = a.dropped();
        // Nothing lost silently: stored + dropped = every packet.
        assert_eq!(stored + d.weight, keys.len() as u64);
        assert!(d.updates > 0);
        // Whatever is stored is exact.
        for (k, c) in a.entries() {
            assert_eq!(t.get(&k), Some(&c));
        }
        // A key that does not fit is dropped, not truncated.
        let long = FlowKey::from_bytes(&[1; 13]).unwrap();
        a.update(&long, 5);
        assert_eq!(a.dropped().weight, d.weight + 5);
        // max_load = 1 fills every slot and still terminates on a full table.
        let mut full = LinearHash::new(
            LinearHashConfig {
                capacity: 64,
                max_load: 1.0,
            },
            &BuildCtx::default(),
        )
        .unwrap();
        for i in 0..100u32 {
            full.update(&FlowKey::from_u32(i), 1);
        }
        assert_eq!(full.len(), 64);
        assert_eq!(full.dropped().updates, 36);
    }

    #[test]
    fn weighted_equals_unit_updates_and_batch_equals_loop() {
        let keys = zipf_keys(20_000, 2_000, 1.1, 3);
        let mut unit = table(8192, 1);
        let mut agg = table(8192, 1);
        let mut batch = table(8192, 1);
        let w: Vec<u64> = (0..keys.len() as u64).map(|i| 1 + i % 5).collect();
        for (k, &wi) in keys.iter().zip(&w) {
            for _ in 0..wi {
                unit.update(k, 1);
            }
            agg.update(k, wi);
        }
        batch.update_batch(&keys, &w);
        assert_eq!(unit, agg);
        assert_eq!(agg, batch);
    }

    #[test]
    fn seeds_merge_changes_and_mixed_lengths() {
        let keys = zipf_keys(20_000, 2_000, 1.1, 4);
        let (mut a, mut b, mut c) = (table(8192, 1), table(8192, 1), table(8192, 2));
        for k in &keys {
            a.update(k, 1);
            b.update(k, 1);
            c.update(k, 1);
        }
        assert_eq!(a, b);
        assert_ne!(a.slots, c.slots);
        // Merge of two halves has the counts of the whole.
        let (mut h1, mut h2) = (table(8192, 1), table(8192, 1));
        let (x, y) = keys.split_at(keys.len() / 2);
        x.iter().for_each(|k| h1.update(k, 1));
        y.iter().for_each(|k| h2.update(k, 1));
        h1.merge(&h2).unwrap();
        let mut m: Vec<Estimate> = h1.entries().collect();
        let mut whole: Vec<Estimate> = a.entries().collect();
        m.sort();
        whole.sort();
        assert_eq!(m, whole);
        assert_eq!(h1.merge(&c), Err(MergeError::Mismatch(NAME)));
        // Heavy changers between the halves equal the exact differences.
        let t2 = truth(y);
        let hc = h1.heavy_changers(&h2, 50).unwrap();
        let got: std::collections::HashMap<FlowKey, u64> = hc.into_iter().collect();
        for (k, &all) in &truth(&keys) {
            let second = t2.get(k).copied().unwrap_or(0);
            let d = all.abs_diff(second);
            assert_eq!(got.get(k).copied(), (d >= 50).then_some(d), "{k}");
        }
        // IPv4 and (shorter) keys of another length live side by side in a 13-byte table.
        let ctx = BuildCtx {
            key_len: 13,
            ..BuildCtx::default()
        };
        let mut t = LinearHash::new(LinearHashConfig::default(), &ctx).unwrap();
        let k4 = FlowKey::from_u32(0);
        let k8 = FlowKey::from_bytes(&[0; 8]).unwrap();
        t.update(&k4, 2);
        t.update(&k8, 3);
        assert_eq!((t.get(&k4), t.get(&k8), t.len()), (2, 3, 2));
        t.reset();
        assert_eq!((t.get(&k4), t.len(), t.capacity()), (0, 0, 1 << 17));
    }
}
