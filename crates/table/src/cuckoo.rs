//! Exact Cuckoo hash tables of (key, count) with two hash functions and 1 or 4 entries per
//! bucket (Re-evaluating paper, section 2.2 and figure 1: "Cuckoo-1 entry" and "Cuckoo-4
//! entries", following DPDK's table without deletion bookkeeping).
//!
//! Layout: buckets of `b` slots in one `Vec<u64>`; a slot is `1 + kw` words, the count then the
//! packed key (`crate::packed`), co-located like [`crate::LinearHash`]. Count 0 marks an empty
//! slot (weights are >= 1).
//!
//! Hashing: one xxh3-64 per key. Bucket 1 is `reduce(h)`, bucket 2 is `reduce(h rotated by 32)`:
//! `reduce` keeps the high bits, so the two buckets come from the two independent halves of the
//! hash (32 bits each suffice for up to 2^32 buckets). If both land on the same bucket, bucket 2
//! is the next one, so every key has two distinct choices.
//!
//! Insertion: a key goes to the first empty slot of bucket 1, else of bucket 2. Slots are never
//! emptied (no deletions; evictions replace), so empty slots are always a suffix of a bucket, and
//! a key is in bucket 2 only if bucket 1 was full when it got there and still is: a lookup that
//! meets an empty slot in bucket 1 stops there. With both buckets full the key starts a random
//! walk (Pagh and Rodler's kick-out): it takes a random slot of one of its buckets, the evicted
//! victim goes to its other bucket, and so on for at most `max_kicks` evictions.
//!
//! Drop policy: if the walk finds no empty slot within `max_kicks` evictions, every eviction is
//! undone in reverse order, so the table is exactly as before and resident flows keep their
//! counts; the *new* key's update is counted in [`Cuckoo::dropped`]. Later updates of that key try
//! again (and may succeed). Measured load at the first drop (test `load_factor_at_first_drop`,
//! 8192 entries, 500 kicks): 0.53-0.55 for cuckoo1 (the asymptotic 2-choice threshold is 1/2;
//! asserted >= 0.45) and 0.96 for cuckoo4 (threshold about 0.976; asserted >= 0.95).

use algo::{Algorithm, BuildCtx, ConfigError, Estimate, MergeError, Task};
use key::{FlowKey, HashFn};
use serde::{Deserialize, Serialize};

use crate::filled::Filled;
use crate::{packed, Dropped, NotState};

/// Distinct sub-seed constant of this algorithm ("cuckoo").
const SEED_TAG: u64 = 0x6375_636b_6f6f_0000;

/// Entries per bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Slots {
    One,
    Four,
}

impl Slots {
    pub fn get(self) -> usize {
        match self {
            Slots::One => 1,
            Slots::Four => 4,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Slots::One => "cuckoo1",
            Slots::Four => "cuckoo4",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CuckooConfig {
    /// Number of entries (slots); the table has `capacity / entries_per_bucket` buckets.
    /// Default 2^17, like the linear table (`--preset reeval`: 2^20).
    pub capacity: usize,
    /// Longest eviction chain before an insertion is given up (default 500).
    pub max_kicks: usize,
}

impl Default for CuckooConfig {
    fn default() -> Self {
        CuckooConfig {
            capacity: 1 << 17,
            max_kicks: 500,
        }
    }
}

impl CuckooConfig {
    pub fn validate(&self, slots: Slots) -> Result<(), ConfigError> {
        let b = slots.get();
        if self.capacity < 2 * b || self.capacity > (1 << 32) {
            return Err(crate::invalid(
                slots.name(),
                "capacity",
                format!("must be in {}..=2^32 (two buckets at least)", 2 * b),
            ));
        }
        if self.max_kicks == 0 || self.max_kicks > 1 << 20 {
            return Err(crate::invalid(
                slots.name(),
                "max_kicks",
                "must be in 1..=2^20",
            ));
        }
        Ok(())
    }
}

enum Probe {
    Found(usize),
    Empty(usize),
    Full,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cuckoo {
    slots: Slots,
    /// Entries per bucket.
    b: usize,
    buckets: usize,
    hash: HashFn,
    kw: usize,
    stride: usize,
    table: Vec<u64>,
    len: usize,
    max_kicks: usize,
    dropped: Dropped,
    /// State of the random walk's generator (splitmix64), part of the state so a given seed and
    /// stream always give the same table.
    walk: u64,
    #[serde(skip)]
    path: NotState<Vec<usize>>,
    /// The slots filled this epoch (see `filled`).
    #[serde(skip)]
    used: Filled,
}

impl algo::CheckState for Cuckoo {
    /// The shape valid (capacity, `max_kicks`: the kick-out chain's bound), the bucket size its
    /// kind's, whole entries and the filled ones counted (a forged stride or bucket count made
    /// the probes slice past the table, a forged `max_kicks` walk for ever).
    fn check_state(&self) -> Result<(), String> {
        let cfg = CuckooConfig {
            capacity: self.buckets.saturating_mul(self.b),
            max_kicks: self.max_kicks,
        };
        if self.b != self.slots.get() {
            return Err(format!(
                "buckets of {} entries in {}",
                self.b,
                self.slots.name()
            ));
        }
        cfg.validate(self.slots).map_err(|e| e.to_string())?;
        if self.table.len() != cfg.capacity.saturating_mul(self.stride) || self.len > cfg.capacity {
            return Err(format!(
                "{} words for {} entries of {}",
                self.table.len(),
                cfg.capacity,
                self.stride
            ));
        }
        packed::check_entries(&self.table, self.stride, self.kw, self.len)
    }
}

impl Cuckoo {
    /// Validate `cfg` for `ctx` and return (buckets, u64 words per entry).
    fn shape(
        cfg: &CuckooConfig,
        slots: Slots,
        ctx: &BuildCtx,
    ) -> Result<(usize, usize), ConfigError> {
        cfg.validate(slots)?;
        if ctx.key_len > key::MAX_KEY_LEN {
            return Err(crate::invalid(
                slots.name(),
                "key_len",
                "longer than the longest key",
            ));
        }
        Ok((cfg.capacity / slots.get(), 1 + packed::words(ctx.key_len)))
    }

    /// Bytes of the table `new` allocates (exact; `capacity / b` buckets of `b` entries).
    fn memory(params: &toml::Table, slots: Slots, ctx: &BuildCtx) -> Result<u64, ConfigError> {
        algo::Entry::memory_with(slots.name(), params, |c: CuckooConfig| {
            let (buckets, stride) = Self::shape(&c, slots, ctx)?;
            // The slots, plus 4 bytes per slot for the list of filled ones.
            algo::Entry::product(
                slots.name(),
                "capacity",
                &[buckets as u64, slots.get() as u64, stride as u64 * 8 + 4],
            )
        })
    }

    pub fn new(cfg: CuckooConfig, slots: Slots, ctx: &BuildCtx) -> Result<Cuckoo, ConfigError> {
        let (buckets, stride) = Self::shape(&cfg, slots, ctx)?;
        let b = slots.get();
        let kw = stride - 1;
        let seed = key::sub_seed(ctx.seed, SEED_TAG);
        Ok(Cuckoo {
            slots,
            b,
            buckets,
            hash: HashFn::new(seed),
            kw,
            stride,
            table: vec![0; buckets * b * stride],
            len: 0,
            max_kicks: cfg.max_kicks,
            dropped: Dropped::default(),
            walk: key::mix64(seed),
            path: NotState(Vec::new()),
            used: Filled::with_capacity(buckets * b),
        })
    }

    /// Updates that could not be stored (no place after `max_kicks` evictions, or key too long).
    pub fn dropped(&self) -> Dropped {
        self.dropped
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of entries (buckets x entries per bucket).
    pub fn capacity(&self) -> usize {
        self.buckets * self.b
    }

    /// Fraction of entries in use.
    pub fn load_factor(&self) -> f64 {
        self.len as f64 / self.capacity() as f64
    }

    /// Stored (key, count) pairs in slot order.
    pub fn entries(&self) -> Box<dyn Iterator<Item = Estimate> + '_> {
        self.used.entries(&self.table, self.stride, self.len)
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
        let (b1, b2) = self.bucket_pair(self.hash.hash(key));
        for bucket in [b1, b2] {
            match self.probe(bucket, &p) {
                Probe::Found(s) => return Some(self.table[s * self.stride]),
                Probe::Empty(_) => return None,
                Probe::Full => {}
            }
        }
        None
    }

    #[inline]
    fn bucket_pair(&self, h: u64) -> (usize, usize) {
        let n = self.buckets;
        let b1 = key::reduce(h, n);
        let mut b2 = key::reduce(h.rotate_left(32), n);
        if b2 == b1 {
            b2 = if b1 + 1 == n { 0 } else { b1 + 1 };
        }
        (b1, b2)
    }

    #[inline]
    fn probe(&self, bucket: usize, p: &[u64]) -> Probe {
        let (kw, stride) = (self.kw, self.stride);
        for s in bucket * self.b..(bucket + 1) * self.b {
            let e = &self.table[s * stride..(s + 1) * stride];
            if e[0] == 0 {
                return Probe::Empty(s);
            }
            if e[1..] == p[..kw] {
                return Probe::Found(s);
            }
        }
        Probe::Full
    }

    fn first_empty(&self, bucket: usize) -> Option<usize> {
        (bucket * self.b..(bucket + 1) * self.b).find(|&s| self.table[s * self.stride] == 0)
    }

    #[inline]
    fn next_rand(&mut self) -> u64 {
        self.walk = self.walk.wrapping_add(0x9E37_79B9_7F4A_7C15);
        key::mix64(self.walk)
    }

    fn put(&mut self, s: usize, w: u64, p: &[u64]) {
        let e = &mut self.table[s * self.stride..(s + 1) * self.stride];
        e[0] = w;
        e[1..].copy_from_slice(&p[..self.kw]);
        self.len += 1;
        self.used.push(s);
    }

    fn swap_slot(&mut self, hand: &mut [u64], s: usize) {
        let e = &mut self.table[s * self.stride..(s + 1) * self.stride];
        e.swap_with_slice(&mut hand[..self.stride]);
    }

    #[inline]
    fn update_hashed(&mut self, key: &FlowKey, h: u64, w: u64) {
        let p = packed::pack(key);
        let (b1, b2) = self.bucket_pair(h);
        for bucket in [b1, b2] {
            match self.probe(bucket, &p) {
                Probe::Found(s) => {
                    let c = &mut self.table[s * self.stride];
                    *c = c.saturating_add(w);
                    return;
                }
                Probe::Empty(s) => {
                    self.put(s, w, &p);
                    return;
                }
                Probe::Full => {}
            }
        }
        self.kick_insert(&p, w, b1, b2);
    }

    /// Random-walk insertion of a new key whose two buckets are full; see the module doc for
    /// the policy when the walk fails.
    fn kick_insert(&mut self, p: &[u64], w: u64, b1: usize, b2: usize) {
        if self.len >= self.capacity() {
            self.dropped.add(w);
            return;
        }
        let mut hand = [0u64; 1 + packed::MAX_WORDS];
        hand[0] = w;
        hand[1..1 + self.kw].copy_from_slice(&p[..self.kw]);
        let mut path = std::mem::take(&mut self.path.0);
        path.clear();
        let mut bucket = if self.next_rand() & 1 == 0 { b1 } else { b2 };
        let mut placed = false;
        for _ in 0..self.max_kicks {
            let r = self.next_rand();
            let s = bucket * self.b + (r % self.b as u64) as usize;
            self.swap_slot(&mut hand, s);
            path.push(s);
            // The victim now in hand moves to its other bucket.
            let Some(vk) = packed::unpack(&hand[1..1 + self.kw]) else {
                break;
            };
            let (v1, v2) = self.bucket_pair(self.hash.hash(&vk));
            let alt = if bucket == v1 { v2 } else { v1 };
            if let Some(e) = self.first_empty(alt) {
                let (hw, hk) = (hand[0], hand);
                self.put(e, hw, &hk[1..]);
                placed = true;
                break;
            }
            bucket = alt;
        }
        if !placed {
            // Undo the evictions newest first: the hand ends up holding the new key again.
            while let Some(s) = path.pop() {
                self.swap_slot(&mut hand, s);
            }
            self.dropped.add(w);
        }
        self.path.0 = path;
    }
}

/// Everything a flow set answers.
const TASKS: &[Task] = crate::exact::TASKS;

impl crate::exact::FlowSet for Cuckoo {
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

impl Algorithm for Cuckoo {
    fn name(&self) -> &'static str {
        self.slots.name()
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
            // Hash the chunk and prefetch both buckets of every key before touching any.
            for (h, k) in hs.iter_mut().zip(ks) {
                *h = self.hash.hash(k);
                let (b1, b2) = self.bucket_pair(*h);
                crate::prefetch(&self.table, b1 * self.b * self.stride);
                crate::prefetch(&self.table, b2 * self.b * self.stride);
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
        self.used.clear(&mut self.table, self.stride, self.len);
        self.len = 0;
        self.dropped = Dropped::default();
        self.walk = key::mix64(self.hash.seed());
    }

    /// The slots, and the list of filled ones at its capacity (4 bytes per slot).
    fn memory_bytes(&self) -> usize {
        self.table.len() * 8 + Filled::bytes(self.capacity())
    }

    crate::exact::flow_set_queries!(Cuckoo);

    fn caveats(&self, _task: Task, _threshold: Option<u64>, _total: u64) -> Vec<algo::Caveat> {
        crate::full_table_caveat(self.dropped, self.len(), self.capacity())
    }

    /// Adds `other`'s counts (same shape and seed); counts equal those of one table fed both
    /// streams as long as nothing is dropped.
    fn merge(&mut self, other: &dyn Algorithm) -> Result<(), MergeError> {
        let o = algo::merge_peer(self, other, |o| {
            o.slots == self.slots
                && o.buckets == self.buckets
                && o.kw == self.kw
                && o.hash == self.hash
        })?;
        let entries: Vec<Estimate> = o.entries().collect();
        for (k, c) in entries {
            let h = self.hash.hash(&k);
            self.update_hashed(&k, h, c);
        }
        self.dropped.merge(&o.dropped);
        Ok(())
    }
}

/// Cuckoo hashing with one entry per bucket, listed in the `catalog` crate.
pub const ENTRY_1: algo::Entry = algo::Entry {
    name: "cuckoo1",
    tasks: TASKS,
    fit: algo::KeyFit::AtMost,
    build: |p, ctx| algo::build_with("cuckoo1", p, |c| Cuckoo::new(c, Slots::One, ctx)),
    // Exact: the table of `capacity` entries, allocated at construction.
    memory: |p, ctx| Cuckoo::memory(p, Slots::One, ctx),
    defaults: algo::defaults_of::<CuckooConfig>,
    flow_size_only: "",
    resets_to_empty: true,
    save: algo::save_state::<Cuckoo>,
    load: |b| algo::load_state::<Cuckoo>("cuckoo1", b),
    // ns per update, u32 / FlowKey path: `cargo run --release -p catalog --example update_costs`.
    cost: algo::UpdateCost {
        u32_ns: 254.70,
        wide_ns: 341.62,
        behind: 1.52,
    },
};

/// Cuckoo hashing with four entries per bucket (one cache line), listed in the `catalog` crate.
pub const ENTRY_4: algo::Entry = algo::Entry {
    name: "cuckoo4",
    tasks: TASKS,
    fit: algo::KeyFit::AtMost,
    build: |p, ctx| algo::build_with("cuckoo4", p, |c| Cuckoo::new(c, Slots::Four, ctx)),
    // Exact: the table of `capacity` entries (rounded down to whole buckets), allocated at
    // construction.
    memory: |p, ctx| Cuckoo::memory(p, Slots::Four, ctx),
    defaults: algo::defaults_of::<CuckooConfig>,
    flow_size_only: "",
    resets_to_empty: true,
    save: algo::save_state::<Cuckoo>,
    load: |b| algo::load_state::<Cuckoo>("cuckoo4", b),
    // ns per update, u32 / FlowKey path: `cargo run --release -p catalog --example update_costs`.
    cost: algo::UpdateCost {
        u32_ns: 27.91,
        wide_ns: 33.24,
        behind: 1.51,
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::{rank_key, truth, zipf_keys};

    /// The pairs of a full pass over the slots (the reference for the sparse path).
    fn scanned(t: &Cuckoo) -> Vec<Estimate> {
        packed::scan(&t.table, t.stride)
    }

    #[test]
    fn sparse_and_full_paths_agree_and_reset_clears_every_slot() {
        // 4096 slots: up to 255 flows take the list of filled slots, more take full passes
        // (3500 flows fill 85% of the table: kicks move entries between filled slots).
        for slots in [Slots::One, Slots::Four] {
            for flows in [0u32, 1, 200, 255, 256, 3500] {
                let mut t = table(slots, 4096, 3);
                for round in 0..2 {
                    for i in 0..flows {
                        let k = FlowKey::from_u32(i.wrapping_mul(2_654_435_761));
                        t.update(&k, 1 + u64::from(i % 3));
                    }
                    let all = scanned(&t);
                    assert_eq!(t.entries().collect::<Vec<_>>(), all, "{flows} {round}");
                    assert_eq!(all.len(), t.len);
                    t.reset();
                    assert!(
                        t.table.iter().all(|&w| w == 0),
                        "{flows}: a slot survived reset"
                    );
                    assert_eq!(t.entries().count(), 0);
                }
            }
        }
        let mut t = table(Slots::Four, 4096, 3);
        t.update(&FlowKey::from_u32(7), 2);
        t.used.lose();
        assert_eq!(
            t.entries().collect::<Vec<_>>(),
            vec![(FlowKey::from_u32(7), 2)]
        );
        t.reset();
        assert!(t.table.iter().all(|&w| w == 0));
    }

    fn table(slots: Slots, cap: usize, seed: u64) -> Cuckoo {
        let ctx = BuildCtx {
            seed,
            ..BuildCtx::default()
        };
        let cfg = CuckooConfig {
            capacity: cap,
            ..Default::default()
        };
        Cuckoo::new(cfg, slots, &ctx).unwrap()
    }

    #[test]
    fn equals_truth_under_capacity() {
        let keys = zipf_keys(100_000, 5_000, 1.1, 11);
        let t = truth(&keys);
        for slots in [Slots::One, Slots::Four] {
            let mut a = table(slots, 1 << 14, 5);
            a.update_batch(&keys, &vec![1; keys.len()]);
            assert!(a.dropped().is_zero());
            assert_eq!(a.len(), t.len());
            for (k, &c) in &t {
                assert_eq!(a.flow_size(k), Some(c));
            }
            assert_eq!(a.get(&FlowKey::from_u32(0xdead_beef)), 0);
            assert_eq!(a.cardinality(), Some(t.len() as f64));
            assert_eq!(
                a.flow_size_distribution(),
                Some(algo::size_histogram(t.values().copied()))
            );
            let h = algo::entropy_of(t.values().copied());
            assert!((a.entropy().unwrap() - h).abs() < 1e-9);
            let want = t.values().filter(|&&c| c >= 100).count();
            assert_eq!(a.heavy_hitters(100).unwrap().len(), want);
            assert_eq!(a.top_k(1).unwrap()[0].1, *t.values().max().unwrap());
        }
    }

    #[test]
    fn load_factor_at_first_drop() {
        // Insert distinct keys until the first one is refused; the table must have reached the
        // load its bucket size allows (2-choice thresholds: 0.5 for b = 1, ~0.976 for b = 4).
        for (slots, min_load, seed) in [
            (Slots::One, 0.45, 1),
            (Slots::One, 0.45, 2),
            (Slots::Four, 0.95, 1),
            (Slots::Four, 0.95, 2),
        ] {
            let mut a = table(slots, 1 << 13, seed);
            let mut i = 0;
            while a.dropped().is_zero() {
                a.update(&rank_key(i as u32), 1);
                i += 1;
            }
            let load = a.load_factor();
            assert!(
                load >= min_load,
                "{slots:?} seed {seed}: first drop at load {load}"
            );
            // The refused key left the table as it was: i - 1 stored keys, all with count 1.
            assert_eq!(a.len(), i - 1);
            assert!(a.entries().all(|(_, c)| c == 1));
            assert_eq!(
                a.dropped(),
                Dropped {
                    updates: 1,
                    weight: 1
                }
            );
            // Keep going past capacity: stored + dropped = everything, no panic.
            for j in i..2 * a.capacity() {
                a.update(&rank_key(j as u32), 2);
            }
            let stored: u64 = a.entries().map(|e| e.1).sum();
            let total = (i as u64) + 2 * (2 * a.capacity() - i) as u64;
            assert_eq!(stored + a.dropped().weight, total);
            for k in 0..i - 1 {
                assert_eq!(
                    a.get(&rank_key(k as u32)),
                    1,
                    "resident flow lost its count"
                );
            }
        }
    }

    #[test]
    fn weighted_equals_unit_updates_and_batch_equals_loop() {
        let keys = zipf_keys(20_000, 3_000, 1.1, 12);
        let w: Vec<u64> = (0..keys.len() as u64).map(|i| 1 + i % 4).collect();
        for slots in [Slots::One, Slots::Four] {
            // Loaded enough that random walks run (b = 1 at 0.37, b = 4 at 0.73) but nothing is
            // refused, so the unit and aggregated streams take the same walks.
            let cap = if slots == Slots::One { 8192 } else { 4096 };
            let (mut unit, mut agg, mut batch) = (
                table(slots, cap, 3),
                table(slots, cap, 3),
                table(slots, cap, 3),
            );
            for (k, &wi) in keys.iter().zip(&w) {
                for _ in 0..wi {
                    unit.update(k, 1);
                }
                agg.update(k, wi);
            }
            batch.update_batch(&keys, &w);
            assert!(agg.dropped().is_zero());
            assert_ne!(
                agg.walk,
                table(slots, cap, 3).walk,
                "no random walk was exercised"
            );
            assert_eq!(agg, batch);
            assert_eq!(unit, agg);
        }
    }

    #[test]
    fn seeds_merge_and_changes() {
        let keys = zipf_keys(20_000, 2_000, 1.1, 13);
        let (x, y) = keys.split_at(keys.len() / 2);
        for slots in [Slots::One, Slots::Four] {
            let (mut a, mut b, mut c) = (
                table(slots, 1 << 13, 1),
                table(slots, 1 << 13, 1),
                table(slots, 1 << 13, 2),
            );
            for k in &keys {
                a.update(k, 1);
                b.update(k, 1);
                c.update(k, 1);
            }
            assert_eq!(a, b);
            assert_ne!(a.table, c.table);
            let (mut h1, mut h2) = (table(slots, 1 << 13, 1), table(slots, 1 << 13, 1));
            x.iter().for_each(|k| h1.update(k, 1));
            y.iter().for_each(|k| h2.update(k, 1));
            let hc = h1.heavy_changers(&h2, 30).unwrap();
            let (t1, t2) = (truth(x), truth(y));
            let mut want: Vec<Estimate> = t1
                .keys()
                .chain(t2.keys())
                .map(|k| {
                    let d = t1.get(k).unwrap_or(&0).abs_diff(*t2.get(k).unwrap_or(&0));
                    (*k, d)
                })
                .filter(|e| e.1 >= 30)
                .collect();
            want.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            want.dedup();
            assert_eq!(hc, want);
            h1.merge(&h2).unwrap();
            let mut m: Vec<Estimate> = h1.entries().collect();
            let mut whole: Vec<Estimate> = a.entries().collect();
            m.sort();
            whole.sort();
            assert_eq!(m, whole);
            assert!(h1.merge(&c).is_err());
            a.reset();
            assert_eq!((a.len(), a.get(&keys[0])), (0, 0));
        }
    }
}
