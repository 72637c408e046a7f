//! UnivMon (Liu et al., SIGCOMM'16, sections 3-4; ALGORITHMS.md 6).
//!
//! `L` nested levels. A key is in level `j` iff its sampling bits `b_1(x) .. b_j(x)` are all 1
//! (the `j` low bits of one sampling value), so level `j` sees a `2^-j` sample of the keys and
//! every key is inserted into levels `0..=depth(x)`. (The Agg-Evict artifact sends a key to
//! level 0 plus one other level; that breaks the recursion below.) Each level holds a Count
//! Sketch and a top-`k` min-heap on the CS estimate.
//!
//! Queries use the G-sum recursion: with `Q_j` the heap keys of level `j` and `w_x` their
//! current CS estimates, `Y_{L-1} = sum_{Q_{L-1}} g(w_x)` and
//! `Y_j = 2 Y_{j+1} + sum_{x in Q_j} (1 - 2 b_{j+1}(x)) g(w_x)`; the answer is `Y_0`.
//! Cardinality uses `g = 1` (every heap member has appeared, so membership rather than the sign
//! of a noisy estimate decides), entropy uses `g(x) = x log2 x` and `H = log2 N - Y_0 / N`
//! with `N` tracked exactly.
//!
//! Hashing: one xxh3 value `h` per key. Level 0's columns come from `h`; level `j >= 1` uses
//! `mix64(h ^ salt_j)` and the sampling bits come from `mix64(h ^ salt_sample)`. splitmix64 is
//! a bijection, so these are deterministic expansions of `h`: keys with different 64-bit hashes
//! get decorrelated columns, signs and sampling bits, and only keys whose 64-bit hashes are equal
//! (probability 2^-64 per pair) collide everywhere.

use algo::{Algorithm, ConfigError, Estimate, MergeError, Task};
use key::{mix64, FlowKey, HashFn, KeySet};
use serde::{Deserialize, Serialize};

use crate::count_sketch::SignedMatrix;
use crate::rows::MAX_ROWS;
use crate::{sort_estimates, BATCH};

const UNIVMON_SALT: u64 = 0x756e_6976_6d6f_6e00; // "univmon\0"
const SAMPLE_SALT: u64 = 0x5341_4d50_4c45_0000; // "SAMPLE"

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UnivMonConfig {
    /// Count Sketch width per level; the number of levels is `widths.len()`.
    /// Agg-Evict 4.1: 65536, 32768, 16384, 8192. Four levels are the paper's throughput setting,
    /// not an accurate one for G-sums: the G-sum recursion (Liu et al. 2016, section 4) needs the
    /// last level's substream to fit its heap (about log2 of the flow count levels), otherwise
    /// the tail's mass is lost. On `netsift run`'s default trace (44-77 k flows an epoch) entropy
    /// is about 12% high with these four levels and 1-3% off with 16 (the same widths, then 1024).
    pub widths: Vec<usize>,
    /// Count Sketch rows per level (Agg-Evict: 4).
    pub rows: usize,
    /// Top-k heap size per level (Agg-Evict: 128).
    pub heap: usize,
}

impl Default for UnivMonConfig {
    fn default() -> Self {
        UnivMonConfig {
            // Ten levels (the last sees 1/2^9 of the flows: about 1950 at 1 M flows, which its
            // heap holds) and 2000-entry heaps, the most that fit 4 MiB with them (issue 12):
            // cardinality's standard error is about 0.85/sqrt(heap) = 1.9% (`caveats`), 1.6% to
            // 4.8% measured on Zipf 0.8 over 300 k flows and 1.3 over 50 k (1 M-packet epochs,
            // seeds 1-5); entropy within 1%. Sixteen levels of 1024 had 2.7% (7.4% measured).
            // Agg-Evict 4.1's four levels and 128-entry heaps are `--preset agg-evict`.
            widths: [65536, 32768, 16384, 8192, 4096, 2048]
                .into_iter()
                .chain([1024; 4])
                .collect(),
            rows: 4,
            heap: 2000,
        }
    }
}

impl UnivMonConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let inv = |field, reason: String| ConfigError::Invalid {
            algo: "univmon",
            field,
            reason,
        };
        if self.widths.is_empty() || self.widths.len() > 32 {
            return Err(inv(
                "widths",
                format!("need 1..=32 levels, got {}", self.widths.len()),
            ));
        }
        if self.rows == 0 || self.rows > MAX_ROWS {
            return Err(inv(
                "rows",
                format!("must be in 1..={MAX_ROWS}, got {}", self.rows),
            ));
        }
        let cells: usize = self.widths.iter().fold(0usize, |a, &w| {
            a.saturating_add(w.saturating_mul(self.rows))
        });
        if self.widths.contains(&0) || cells > crate::count_min::MAX_CELLS {
            return Err(inv(
                "widths",
                format!(
                    "every width must be >= 1 and the total cells <= {}",
                    crate::count_min::MAX_CELLS
                ),
            ));
        }
        if self.heap == 0 || self.heap > MAX_HEAP {
            return Err(inv(
                "heap",
                format!("must be in 1..=16777216, got {}", self.heap),
            ));
        }
        Ok(())
    }
}

/// Largest heap (`heap`).
const MAX_HEAP: usize = 1 << 24;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct HeapEntry {
    est: i64,
    key: FlowKey,
    /// The key's top-level 64-bit hash (level hashes and sampling bits derive from it).
    h: u64,
}

#[derive(Serialize, Deserialize)]
struct HeapRepr {
    cap: usize,
    entries: Vec<HeapEntry>,
}

/// Binary min-heap of the `cap` largest estimates with a key -> index map.
///
/// The map is an open-addressing table over the keys' 64-bit hashes (`HeapEntry::h`, already
/// computed for the sketch) with a back-pointer per entry, not a `HashMap<FlowKey, usize>`: an
/// offer (one per level an update reaches, most of them for keys not in the heap) then costs
/// no second hash of the key bytes, and a sift moves an entry with one write instead of a map
/// insert. Exact: a tag match is confirmed on the entry's key, so keys whose hashes collide
/// are told apart as before, and the heap moves are the same.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(try_from = "HeapRepr", into = "HeapRepr")]
struct TopHeap {
    cap: usize,
    entries: Vec<HeapEntry>,
    /// `slot_of[i]`: the index slot of `entries[i]`.
    slot_of: Vec<u32>,
    /// Linear probing, a power of two of at least `2 cap` slots (load at most 1/2).
    index: Vec<Slot>,
}

/// One slot of [`TopHeap::index`]: the entry's `tag` (the high half of its hash, whose low bits
/// pick its home slot) and its heap position, `EMPTY` for a free slot.
#[derive(Clone, Copy, Debug)]
struct Slot {
    tag: u32,
    idx: u32,
}

const EMPTY: u32 = u32::MAX;
const FREE: Slot = Slot { tag: 0, idx: EMPTY };

#[inline(always)]
fn tag_of(h: u64) -> u32 {
    (h >> 32) as u32
}

impl TryFrom<HeapRepr> for TopHeap {
    type Error = String;
    /// The heap rebuilt from its entries. Its index is allocated at the saved capacity, which
    /// the bytes do not hold: the capacity is checked against the configuration's range and the
    /// load limit before (`algo::check_load_alloc`; a forged capacity of 2^62 aborted the
    /// process), and the owner checks it against its configuration.
    fn try_from(r: HeapRepr) -> Result<TopHeap, String> {
        if r.cap == 0 || r.cap > MAX_HEAP {
            return Err(format!("heap capacity {} outside 1..={MAX_HEAP}", r.cap));
        }
        if r.entries.len() > r.cap {
            return Err(format!(
                "{} heap entries for a capacity of {}",
                r.entries.len(),
                r.cap
            ));
        }
        algo::check_load_alloc("the heap", TopHeap::bytes_for(r.cap))?;
        let mut t = TopHeap::new(r.cap);
        for e in r.entries {
            t.offer(e.key, e.h, e.est);
        }
        Ok(t)
    }
}

impl From<TopHeap> for HeapRepr {
    fn from(t: TopHeap) -> HeapRepr {
        HeapRepr {
            cap: t.cap,
            entries: t.entries,
        }
    }
}

impl TopHeap {
    fn new(cap: usize) -> TopHeap {
        TopHeap {
            cap,
            entries: Vec::with_capacity(cap),
            slot_of: Vec::with_capacity(cap),
            index: vec![FREE; (2 * cap.max(1)).next_power_of_two()],
        }
    }

    #[inline(always)]
    fn mask(&self) -> usize {
        self.index.len() - 1
    }

    fn clear(&mut self) {
        for &s in &self.slot_of {
            if let Some(slot) = self.index.get_mut(s as usize) {
                *slot = FREE;
            }
        }
        self.entries.clear();
        self.slot_of.clear();
    }

    /// The heap position of `key` (hash `h`), if present.
    #[inline]
    fn find(&self, key: &FlowKey, h: u64) -> Option<usize> {
        let (tag, mask) = (tag_of(h), self.mask());
        let mut s = tag as usize & mask;
        loop {
            let slot = self.index[s];
            if slot.idx == EMPTY {
                return None;
            }
            if slot.tag == tag {
                let i = slot.idx as usize;
                if self
                    .entries
                    .get(i)
                    .is_some_and(|e| e.h == h && e.key == *key)
                {
                    return Some(i);
                }
            }
            s = (s + 1) & mask;
        }
    }

    /// Prefetch the home slot of hash `h` (the batch path, ahead of its offers).
    #[inline(always)]
    fn prefetch(&self, h: u64) {
        crate::rows::prefetch(&self.index, tag_of(h) as usize & self.mask());
    }

    /// Index the entry at heap position `i` (hash `h`), not yet indexed.
    #[inline]
    fn index_new(&mut self, h: u64, i: usize) {
        let (tag, mask) = (tag_of(h), self.mask());
        let mut s = tag as usize & mask;
        while self.index[s].idx != EMPTY {
            s = (s + 1) & mask;
        }
        self.index[s] = Slot { tag, idx: i as u32 };
        if let Some(b) = self.slot_of.get_mut(i) {
            *b = s as u32;
        }
    }

    /// Free index slot `s`, shifting later slots of its probe run back (no tombstones).
    fn unindex(&mut self, s: usize) {
        let mask = self.mask();
        let mut hole = s;
        let mut t = (s + 1) & mask;
        loop {
            let slot = self.index[t];
            if slot.idx == EMPTY {
                break;
            }
            let home = slot.tag as usize & mask;
            // The slot may fill the hole when the hole lies on its probe path (home ..= t).
            if (t.wrapping_sub(home) & mask) >= (t.wrapping_sub(hole) & mask) {
                self.index[hole] = slot;
                if let Some(b) = self.slot_of.get_mut(slot.idx as usize) {
                    *b = hole as u32;
                }
                hole = t;
            }
            t = (t + 1) & mask;
        }
        self.index[hole] = FREE;
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.entries.swap(a, b);
        self.slot_of.swap(a, b);
        for i in [a, b] {
            if let Some(&s) = self.slot_of.get(i) {
                if let Some(slot) = self.index.get_mut(s as usize) {
                    slot.idx = i as u32;
                }
            }
        }
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let p = (i - 1) / 2;
            if self.entries[i].est < self.entries[p].est {
                self.swap(i, p);
                i = p;
            } else {
                break;
            }
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.entries.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < n && self.entries[l].est < self.entries[m].est {
                m = l;
            }
            if r < n && self.entries[r].est < self.entries[m].est {
                m = r;
            }
            if m == i {
                break;
            }
            self.swap(i, m);
            i = m;
        }
    }

    /// ALGORITHMS.md 6: present -> set the new estimate and restore the heap; absent -> insert if
    /// not full, else replace the minimum if larger.
    #[inline]
    fn offer(&mut self, key: FlowKey, h: u64, est: i64) {
        if let Some(i) = self.find(&key, h) {
            if let Some(e) = self.entries.get_mut(i) {
                let old = e.est;
                e.est = est;
                if est >= old {
                    self.sift_down(i);
                } else {
                    self.sift_up(i);
                }
            }
        } else if self.entries.len() < self.cap {
            self.entries.push(HeapEntry { est, key, h });
            self.slot_of.push(0);
            let i = self.entries.len() - 1;
            self.index_new(h, i);
            self.sift_up(i);
        } else if let Some(root) = self.entries.first() {
            if est > root.est {
                if let Some(&s) = self.slot_of.first() {
                    self.unindex(s as usize);
                }
                self.entries[0] = HeapEntry { est, key, h };
                self.index_new(h, 0);
                self.sift_down(0);
            }
        }
    }

    fn memory_bytes(&self) -> usize {
        Self::bytes_for(self.cap) as usize
    }

    /// The bytes a heap of `cap` entries reports (entries, key index and its hashes).
    fn bytes_for(cap: usize) -> u64 {
        cap as u64 * (std::mem::size_of::<HeapEntry>() + std::mem::size_of::<FlowKey>() + 8) as u64
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Level {
    cs: SignedMatrix,
    heap: TopHeap,
    /// Salt of this level's column hash (0 for level 0, which uses the key hash itself).
    salt: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct UnivMon {
    cfg: UnivMonConfig,
    hash: HashFn,
    sample_salt: u64,
    levels: Vec<Level>,
    total: u64,
}

impl algo::CheckState for UnivMon {
    /// The configuration valid, one level per width, each with the matrix and heap its width
    /// and `heap` make (a forged level count or width made the queries index past the levels).
    fn check_state(&self) -> Result<(), String> {
        self.cfg.validate().map_err(|e| e.to_string())?;
        if self.levels.len() != self.cfg.widths.len() {
            return Err(format!(
                "{} levels, the configuration has {}",
                self.levels.len(),
                self.cfg.widths.len()
            ));
        }
        for (j, (l, &w)) in self.levels.iter().zip(&self.cfg.widths).enumerate() {
            l.cs.check(self.cfg.rows, w)
                .map_err(|e| format!("level {j}: {e}"))?;
            if l.heap.cap != self.cfg.heap {
                return Err(format!(
                    "level {j}: heap of {} entries, the configuration has {}",
                    l.heap.cap, self.cfg.heap
                ));
            }
        }
        Ok(())
    }
}

impl UnivMon {
    pub fn new(cfg: UnivMonConfig, seed: u64) -> Result<UnivMon, ConfigError> {
        cfg.validate()?;
        let hash = HashFn::new(key::sub_seed(seed, UNIVMON_SALT));
        let levels = cfg
            .widths
            .iter()
            .enumerate()
            .map(|(j, &w)| {
                let salt = if j == 0 { 0 } else { hash.sub(j as u64).seed() };
                Level {
                    cs: SignedMatrix::new(cfg.rows, w, HashFn::new(salt)),
                    heap: TopHeap::new(cfg.heap),
                    salt,
                }
            })
            .collect();
        Ok(UnivMon {
            sample_salt: key::sub_seed(hash.seed(), SAMPLE_SALT),
            hash,
            levels,
            total: 0,
            cfg,
        })
    }

    pub fn config(&self) -> &UnivMonConfig {
        &self.cfg
    }

    /// Total weight seen (N).
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The signed counters of every level (the linear state), for bit-exact comparisons.
    pub fn level_counters(&self) -> Vec<&[i32]> {
        self.levels.iter().map(|l| l.cs.counters()).collect()
    }

    /// Replace the state by a recovered one (SketchVisor section 5; RECOVERY.md 3): `t` holds
    /// every level's counters one level after the other (the order of [`Self::level_counters`]),
    /// each rounded to the nearest i32; `total` becomes the weight seen. The heaps are not
    /// linear: each level's is rebuilt from the new counters, its candidates the keys any heap
    /// holds now plus `candidates` (the fast path's tracked flows), each offered to the levels
    /// its sampling bits reach. Returns false (and changes nothing) when `t` is not the
    /// levels' `rows x width` summed.
    pub fn set_counters(&mut self, t: &[f64], total: u64, candidates: &[FlowKey]) -> bool {
        let need: usize = self.levels.iter().map(|l| l.cs.counters().len()).sum();
        if t.len() != need {
            return false;
        }
        let mut at = 0;
        for l in &mut self.levels {
            let n = l.cs.counters().len();
            l.cs.set_counters(&t[at..at + n]);
            at += n;
        }
        self.total = total;
        let mut seen = KeySet::default();
        let mut keys: Vec<(FlowKey, u64)> = Vec::new();
        for l in &self.levels {
            for e in &l.heap.entries {
                if seen.insert(e.key) {
                    keys.push((e.key, e.h));
                }
            }
        }
        for k in candidates {
            if seen.insert(*k) {
                keys.push((*k, self.hash.hash(k)));
            }
        }
        for j in 0..self.levels.len() {
            self.levels[j].heap.clear();
            for &(k, h) in &keys {
                if j == 0 || self.in_level(h, j) {
                    let est = self.level_estimate(j, h);
                    self.levels[j].heap.offer(k, h, est);
                }
            }
        }
        true
    }

    #[inline(always)]
    fn level_hash(h: u64, salt: u64, j: usize) -> u64 {
        if j == 0 {
            h
        } else {
            mix64(h ^ salt)
        }
    }

    /// Number of levels below level 0 the key reaches: the trailing one bits of its sampling
    /// value (`b_j(x)` is bit `j - 1`), capped at `L - 1`.
    #[inline(always)]
    fn depth(&self, h: u64) -> usize {
        let t = mix64(h ^ self.sample_salt).trailing_ones() as usize;
        t.min(self.levels.len() - 1)
    }

    /// `b_j(x)` for `j >= 1`: is the key in level `j`?
    #[inline(always)]
    fn in_level(&self, h: u64, j: usize) -> bool {
        mix64(h ^ self.sample_salt).trailing_ones() as usize >= j
    }

    #[inline]
    fn update_h(&mut self, key: &FlowKey, h: u64, w: u64) {
        self.total = self.total.saturating_add(w);
        let d = self.depth(h);
        for (j, lev) in self.levels.iter_mut().enumerate().take(d + 1) {
            let est = lev.cs.add_h(Self::level_hash(h, lev.salt, j), w);
            lev.heap.offer(*key, h, est);
        }
    }

    fn level_estimate(&self, j: usize, h: u64) -> i64 {
        self.levels
            .get(j)
            .map_or(0, |l| l.cs.estimate_h(Self::level_hash(h, l.salt, j)))
    }

    /// The G-sum recursion (UnivMon section 4; ALGORITHMS.md 6) for `g` of the current CS
    /// estimate of each heap key.
    pub fn gsum(&self, g: impl Fn(i64) -> f64) -> f64 {
        let last = self.levels.len() - 1;
        let mut y = 0.0;
        for j in (0..=last).rev() {
            let lev = &self.levels[j];
            let mut s = 0.0;
            for e in &lev.heap.entries {
                let gv = g(lev.cs.estimate_h(Self::level_hash(e.h, lev.salt, j)));
                if j == last || !self.in_level(e.h, j + 1) {
                    s += gv;
                } else {
                    s -= gv;
                }
            }
            y = if j == last { s } else { 2.0 * y + s };
        }
        y
    }

    /// Cardinality's standard error from the G-sum recursion's sampling (Liu et al. 2016,
    /// section 4; Braverman and Ostrovsky's recursive sketch): at a level `j` whose heap is full,
    /// the flows of its substream beyond the heap (about `n/2^j - heap`) are counted as twice
    /// those of them that the next level samples, a binomial of variance their number, scaled
    /// by `2^j` to level 0: `var = sum_j 4^j (n/2^j - heap)`, about `0.85/sqrt(heap)` of `n`
    /// whatever `n`. Past half the bar (relative error 0.05: an answer off by more than the bar
    /// is a 2-sigma event or likelier), names `heap` and the size that brings it to half.
    fn sampling_caveat(&self) -> Vec<algo::Caveat> {
        const BAR: f64 = 0.05;
        let n = self.gsum(|_| 1.0).max(1.0);
        let var: f64 = self.levels[..self.levels.len() - 1]
            .iter()
            .enumerate()
            .filter(|(_, l)| l.heap.entries.len() >= l.heap.cap)
            .map(|(j, l)| {
                let f = 2f64.powi(j as i32);
                f * f * (n / f - l.heap.cap as f64).max(0.0)
            })
            .sum();
        let se = var.sqrt() / n;
        if 2.0 * se <= BAR {
            return Vec::new();
        }
        let heap = self.cfg.heap as f64 * (2.0 * se / BAR).powi(2);
        vec![algo::Caveat {
            parameter: "heap",
            message: format!(
                "the levels' sampling makes cardinality's standard error about {:.1}% of the \
                 {n:.0} flows estimated: the answer may be off by twice that",
                se * 100.0
            ),
            suggestion: format!(
                "heap = {} (at least: standard error at most half the 5% bar)",
                heap.ceil() as u64
            ),
        }]
    }

    /// Heavy hitters and top-k come from level 0's heap of `heap` keys (issue 34): top-k asking
    /// more (`algo::top_k_cap_caveat`), or a full heap whose smallest entry was offered at the
    /// threshold or more, so that flows reaching it may have been pushed out.
    fn level0_cap_caveats(&self, task: Task, unit: Option<u64>) -> Vec<algo::Caveat> {
        let heap = &self.levels[0].heap;
        if let Some(c) =
            algo::top_k_cap_caveat(task, unit, "heap", heap.cap, heap.entries.len() >= heap.cap)
        {
            return vec![c];
        }
        let (Task::HeavyHitters, Some(t)) = (task, unit) else {
            return Vec::new();
        };
        let least = heap.entries.iter().map(|e| e.est.max(0) as u64).min();
        match least {
            Some(m) if heap.entries.len() >= heap.cap && m >= t => vec![algo::Caveat {
                parameter: "heap",
                message: format!(
                    "level 0's heap of {} is full and its smallest entry ({m}) is at the \
                     threshold {t} or above: flows reaching the threshold may have been pushed \
                     out",
                    heap.cap
                ),
                // At most N/t flows reach t.
                suggestion: format!(
                    "heap = {} (at least)",
                    (self.total / t + 1).max(2 * heap.cap as u64)
                ),
            }],
            _ => Vec::new(),
        }
    }

    fn level0_estimates(&self) -> Vec<Estimate> {
        self.levels[0]
            .heap
            .entries
            .iter()
            .map(|e| (e.key, self.level_estimate(0, e.h).max(0) as u64))
            .collect()
    }
}

const TASKS: &[Task] = &[
    Task::HeavyHitters,
    Task::HeavyChangers,
    Task::Cardinality,
    Task::Entropy,
    Task::TopK,
    Task::FlowSize,
];

impl Algorithm for UnivMon {
    fn name(&self) -> &'static str {
        "univmon"
    }
    fn tasks(&self) -> &'static [Task] {
        TASKS
    }
    fn update(&mut self, key: &FlowKey, weight: u64) {
        let h = self.hash.hash(key);
        self.update_h(key, h, weight);
    }
    fn update_batch(&mut self, keys: &[FlowKey], weights: &[u64]) {
        let n = keys.len().min(weights.len());
        let mut hs = [0u64; BATCH];
        let mut start = 0;
        while start < n {
            let end = (start + BATCH).min(n);
            let ks = &keys[start..end];
            for (h, k) in hs.iter_mut().zip(ks) {
                *h = self.hash.hash(k);
                let d = self.depth(*h);
                for (j, lev) in self.levels.iter().enumerate().take(d + 1) {
                    lev.cs.prefetch_h(Self::level_hash(*h, lev.salt, j));
                    lev.heap.prefetch(*h);
                }
            }
            for (i, (k, &w)) in ks.iter().zip(&weights[start..end]).enumerate() {
                self.update_h(k, hs[i], w);
            }
            start = end;
        }
    }
    fn reset(&mut self) {
        for l in &mut self.levels {
            l.cs.clear();
            l.heap.clear();
        }
        self.total = 0;
    }
    fn memory_bytes(&self) -> usize {
        self.levels
            .iter()
            .map(|l| l.cs.memory_bytes() + l.heap.memory_bytes())
            .sum()
    }
    fn heavy_hitters(&self, threshold: u64) -> Option<Vec<Estimate>> {
        let mut v: Vec<Estimate> = self
            .level0_estimates()
            .into_iter()
            .filter(|&(_, e)| e >= threshold)
            .collect();
        sort_estimates(&mut v);
        Some(v)
    }
    /// Candidates from both epochs' level-0 heaps, scored by the difference of the two level-0
    /// Count Sketches (median of the signed row differences).
    fn heavy_changers(&self, prev: &dyn Algorithm, threshold: u64) -> Option<Vec<Estimate>> {
        let p = algo::downcast::<UnivMon>(prev)?;
        if self.cfg != p.cfg || self.hash != p.hash {
            return None;
        }
        let (a, b) = (&self.levels[0], &p.levels[0]);
        let mut seen = KeySet::default();
        let mut v = Vec::new();
        for e in a.heap.entries.iter().chain(&b.heap.entries) {
            if seen.insert(e.key) {
                let d = a.cs.change_h(&b.cs, e.h).unsigned_abs();
                if d >= threshold {
                    v.push((e.key, d));
                }
            }
        }
        sort_estimates(&mut v);
        Some(v)
    }
    /// Changes come from the difference of level 0's Count Sketches: its noise
    /// (`algo::change_caveat`), named as the first entry of `widths`.
    fn change_caveats(&self, prev: &dyn Algorithm, threshold: u64) -> Vec<algo::Caveat> {
        let Some(p) = algo::downcast::<UnivMon>(prev) else {
            return Vec::new();
        };
        let (Some(a), Some(b)) = (self.levels.first(), p.levels.first()) else {
            return Vec::new();
        };
        if self.cfg != p.cfg || self.hash != p.hash {
            return Vec::new();
        }
        let mut v = algo::change_caveat(
            threshold,
            "widths",
            a.cs.width(),
            algo::NoiseScale::Sqrt,
            |h| a.cs.change_h(&b.cs, h) as f64,
            |t| self.heavy_changers(prev, t),
        );
        for c in &mut v {
            c.suggestion = c.suggestion.replacen("widths =", "widths[0] =", 1);
        }
        v
    }
    /// Flow sizes come from level 0's Count Sketch: its collisions (`algo::collision_caveat`).
    /// The G-sums (cardinality, entropy) need the last level's substream to fit its heap: when
    /// that heap is full, the flows beyond it are lost to the recursion.
    fn caveats(&self, task: Task, unit: Option<u64>, _total: u64) -> Vec<algo::Caveat> {
        if task == Task::FlowSize {
            let w = self.levels.first().map_or(0, |l| l.cs.width());
            return algo::collision_caveat(task, unit, "widths", w, |h| {
                self.level_estimate(0, h) as f64
            });
        }
        let Some(last) = self.levels.last() else {
            return Vec::new();
        };
        if matches!(task, Task::HeavyHitters | Task::TopK) {
            return self.level0_cap_caveats(task, unit);
        }
        if !matches!(task, Task::Cardinality | Task::Entropy) {
            return Vec::new();
        }
        if last.heap.entries.len() < last.heap.cap {
            return if task == Task::Cardinality {
                self.sampling_caveat()
            } else {
                Vec::new()
            };
        }
        let n = self.levels.len();
        vec![algo::Caveat {
            parameter: "widths",
            message: format!(
                "the last of {n} levels has filled its heap of {}: the flows its substream \
                 holds beyond that are lost to the estimate",
                last.heap.cap
            ),
            suggestion: format!(
                "widths with {} entries (four more levels), or a larger heap",
                n + 4
            ),
        }]
    }
    fn cardinality(&self) -> Option<f64> {
        Some(self.gsum(|_| 1.0).max(0.0))
    }
    fn entropy(&self) -> Option<f64> {
        if self.total == 0 {
            return Some(0.0);
        }
        let n = self.total as f64;
        let y = self.gsum(|e| {
            if e >= 1 {
                let x = e as f64;
                x * x.log2()
            } else {
                0.0
            }
        });
        Some((n.log2() - y / n).clamp(0.0, n.log2()))
    }
    fn top_k(&self, k: usize) -> Option<Vec<Estimate>> {
        let mut v = self.level0_estimates();
        sort_estimates(&mut v);
        v.truncate(k);
        Some(v)
    }
    fn flow_size(&self, key: &FlowKey) -> Option<u64> {
        Some(self.level_estimate(0, self.hash.hash(key)).max(0) as u64)
    }
    /// Adds the Count Sketches level by level (exact), then rebuilds each heap from the union
    /// of both heaps re-estimated on the merged sketch (approximate: a key that was in neither
    /// heap cannot be recovered).
    fn merge(&mut self, other: &dyn Algorithm) -> Result<(), MergeError> {
        let o = algo::merge_peer(self, other, |o| self.cfg == o.cfg && self.hash == o.hash)?;
        self.total = self.total.saturating_add(o.total);
        for (j, (a, b)) in self.levels.iter_mut().zip(&o.levels).enumerate() {
            a.cs.add_all(&b.cs);
            let mut seen = KeySet::default();
            let mut all: Vec<(i64, FlowKey, u64)> = Vec::new();
            for e in a.heap.entries.iter().chain(&b.heap.entries) {
                if seen.insert(e.key) {
                    let est = a.cs.estimate_h(Self::level_hash(e.h, a.salt, j));
                    all.push((est, e.key, e.h));
                }
            }
            all.sort_unstable_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
            // The heap keeps the first `cap` of this order (offered largest first, a later
            // key is never larger than the full heap's minimum). Offered smallest first, each
            // is the largest so far and stays where it is pushed: largest first sifted every
            // one up to the root, swapping its index entries on the way (with two workers the
            // answer thread's CPU 0.95-0.98x, `perf` samples of `run`, issue 13). The set kept
            // is the same; the heap's order is not, so a sum over its entries (entropy) may
            // differ in its last bit from before.
            all.truncate(a.heap.cap);
            a.heap.clear();
            for (est, k, h) in all.into_iter().rev() {
                a.heap.offer(k, h, est);
            }
        }
        Ok(())
    }
}

/// This algorithm's facts, listed in the `catalog` crate.
///
/// `memory`: each level's Count Sketch counters (exact) plus its top-k heap counted at its
/// capacity `heap`, as `memory_bytes` counts it (the heap fills with keys up to that cap).
pub const ENTRY: algo::Entry = algo::Entry {
    name: "univmon",
    tasks: TASKS,
    fit: algo::KeyFit::Any,
    build: |p, ctx| algo::build_with("univmon", p, |c| UnivMon::new(c, ctx.seed)),
    memory: |p, _| {
        algo::Entry::memory_with("univmon", p, |c: UnivMonConfig| {
            c.validate()?;
            let cells: u64 = c.widths.iter().map(|&w| (w * c.rows) as u64).sum();
            Ok(cells * 4 + c.widths.len() as u64 * TopHeap::bytes_for(c.heap))
        })
    },
    defaults: algo::defaults_of::<UnivMonConfig>,
    flow_size_only: "",
    resets_to_empty: true,
    save: algo::save_state::<UnivMon>,
    load: |b| algo::load_state::<UnivMon>("univmon", b),
    // ns per update, u32 / FlowKey path: `cargo run --release -p catalog --example update_costs`.
    cost: algo::UpdateCost {
        u32_ns: 85.53,
        wide_ns: 90.83,
        behind: 1.08,
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use key::KeyMap;
    use rand::{Rng, SeedableRng};
    use rand_pcg::Pcg64;

    /// `set_counters` (SketchVisor's write-back): a wrong length changes nothing; otherwise the
    /// levels take the counters, the total is set, and the heaps are rebuilt from the new
    /// counters over the keys they held plus the candidates (a candidate absent from every heap
    /// is found when its counters say it is heavy).
    #[test]
    fn set_counters_rebuilds_the_heaps() {
        let cfg = UnivMonConfig {
            widths: vec![256, 128],
            rows: 3,
            heap: 4,
        };
        let mut u = UnivMon::new(cfg, 9).unwrap();
        for i in 0..50u32 {
            u.update(&FlowKey::from_u32(i), 10);
        }
        let big = FlowKey::from_u32(1000);
        let mut want = u.clone();
        want.update(&big, 5000);
        let t: Vec<f64> = want
            .level_counters()
            .iter()
            .flat_map(|l| l.iter().map(|&c| f64::from(c)))
            .collect();
        let before = u.level_counters().concat();
        assert!(!u.set_counters(&t[1..], 1, &[big]));
        assert_eq!(u.level_counters().concat(), before);
        assert!(u.set_counters(&t, want.total(), &[big]));
        assert_eq!(u.level_counters().concat(), want.level_counters().concat());
        assert_eq!(u.total(), 5500);
        let hh = u.heavy_hitters(1000).unwrap();
        assert_eq!(hh.len(), 1);
        assert_eq!(hh[0].0, big);
        // Without the candidate, nothing held it: not found.
        let mut v = UnivMon::new(
            UnivMonConfig {
                widths: vec![256, 128],
                rows: 3,
                heap: 4,
            },
            9,
        )
        .unwrap();
        assert!(v.set_counters(&t, want.total(), &[]));
        assert!(v.heavy_hitters(1000).unwrap().is_empty());
    }

    /// The heap as it was with a `HashMap<FlowKey, usize>` index: the twin [`TopHeap`] must
    /// match entry for entry.
    struct MapHeap {
        cap: usize,
        entries: Vec<HeapEntry>,
        pos: KeyMap<usize>,
    }

    impl MapHeap {
        fn swap(&mut self, a: usize, b: usize) {
            self.entries.swap(a, b);
            self.pos.insert(self.entries[a].key, a);
            self.pos.insert(self.entries[b].key, b);
        }
        fn sift_up(&mut self, mut i: usize) {
            while i > 0 && self.entries[i].est < self.entries[(i - 1) / 2].est {
                self.swap(i, (i - 1) / 2);
                i = (i - 1) / 2;
            }
        }
        fn sift_down(&mut self, mut i: usize) {
            let n = self.entries.len();
            loop {
                let mut m = i;
                for c in [2 * i + 1, 2 * i + 2] {
                    if c < n && self.entries[c].est < self.entries[m].est {
                        m = c;
                    }
                }
                if m == i {
                    return;
                }
                self.swap(i, m);
                i = m;
            }
        }
        fn offer(&mut self, key: FlowKey, h: u64, est: i64) {
            if let Some(&i) = self.pos.get(&key) {
                let old = self.entries[i].est;
                self.entries[i].est = est;
                if est >= old {
                    self.sift_down(i);
                } else {
                    self.sift_up(i);
                }
            } else if self.entries.len() < self.cap {
                self.entries.push(HeapEntry { est, key, h });
                self.pos.insert(key, self.entries.len() - 1);
                self.sift_up(self.entries.len() - 1);
            } else if est > self.entries[0].est {
                self.pos.remove(&self.entries[0].key);
                self.entries[0] = HeapEntry { est, key, h };
                self.pos.insert(key, 0);
                self.sift_down(0);
            }
        }
    }

    /// A merge keeps, per level, the `heap` keys of both heaps with the largest estimates on the
    /// merged counters (ties by key), each at its merged estimate, in a valid min-heap whose
    /// index finds every entry: the same entries as offering them largest first, which the
    /// merge did before it offered them smallest first.
    #[test]
    fn merge_keeps_the_top_keys_of_both_heaps() {
        let cfg = UnivMonConfig {
            widths: vec![1024, 512, 256],
            rows: 4,
            heap: 50,
        };
        let mut rng = Pcg64::seed_from_u64(11);
        let mut parts = [
            UnivMon::new(cfg.clone(), 5).unwrap(),
            UnivMon::new(cfg, 5).unwrap(),
        ];
        for (i, u) in parts.iter_mut().enumerate() {
            let keys: Vec<FlowKey> = (0..20_000)
                .map(|_| {
                    let r: f64 = rng.gen();
                    // Zipf-like: small keys often; the two parts share some keys.
                    FlowKey::from_u32((1.0 / (r * 0.999 + 0.001)) as u32 * 2 + i as u32 % 2)
                })
                .collect();
            u.update_batch(&keys, &vec![1; keys.len()]);
        }
        let mut merged = parts[0].clone();
        merged.merge(&parts[1]).unwrap();
        for (j, level) in merged.levels.iter().enumerate() {
            let mut want: Vec<(i64, FlowKey, u64)> = Vec::new();
            for e in parts.iter().flat_map(|p| &p.levels[j].heap.entries) {
                if want.iter().all(|w| w.1 != e.key) {
                    let est = level.cs.estimate_h(UnivMon::level_hash(e.h, level.salt, j));
                    want.push((est, e.key, e.h));
                }
            }
            want.sort_unstable_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
            let mut by_offer = TopHeap::new(level.heap.cap);
            for &(est, k, h) in &want {
                by_offer.offer(k, h, est);
            }
            want.truncate(level.heap.cap);
            let mut got: Vec<(i64, FlowKey, u64)> = level
                .heap
                .entries
                .iter()
                .map(|e| (e.est, e.key, e.h))
                .collect();
            got.sort_unstable_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
            assert_eq!(got, want, "level {j}");
            let mut old: Vec<_> = by_offer.entries.iter().map(|e| (e.est, e.key)).collect();
            old.sort_unstable_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
            assert_eq!(old, got.iter().map(|g| (g.0, g.1)).collect::<Vec<_>>());
            let h = &level.heap;
            assert!(h.entries.len() > 10, "level {j}: {}", h.entries.len());
            for (i, e) in h.entries.iter().enumerate() {
                assert!(
                    i == 0 || h.entries[(i - 1) / 2].est <= e.est,
                    "level {j} at {i}"
                );
                assert_eq!(h.find(&e.key, e.h), Some(i));
            }
        }
    }

    /// Random offers (rising and falling estimates, replacements of the minimum, clears) over
    /// keys whose hashes share tags, home slots and even whole values: the index must find
    /// exactly the keys the map found, so both heaps hold the same entries in the same order.
    #[test]
    fn hash_index_heap_equals_key_map_heap() {
        let mut rng = Pcg64::seed_from_u64(7);
        for cap in [1usize, 2, 7, 64, 100] {
            let mut a = TopHeap::new(cap);
            let mut b = MapHeap {
                cap,
                entries: Vec::new(),
                pos: KeyMap::default(),
            };
            let mut est: Vec<i64> = vec![0; 4 * cap + 8];
            for step in 0..20_000 {
                let k = rng.gen_range(0..est.len());
                // Few distinct hashes per tag and per home slot; keys 0 and 1 share a hash.
                let h = ((k as u64 % 5) << 32) | (k as u64 / 2);
                let h = h.wrapping_mul(if k % 3 == 0 { 1 } else { 0x1_0000_0001 });
                est[k] += rng.gen_range(-3i64..10);
                let key = FlowKey::from_u32(k as u32);
                a.offer(key, h, est[k]);
                b.offer(key, h, est[k]);
                assert_eq!(a.entries, b.entries, "cap {cap} step {step}");
                if step % 5_000 == 4_999 {
                    a.clear();
                    b.entries.clear();
                    b.pos.clear();
                    est.fill(0);
                }
            }
            // Every entry is indexed once, at the slot its back-pointer names.
            let used: Vec<usize> = (0..a.index.len())
                .filter(|&s| a.index[s].idx != EMPTY)
                .collect();
            assert_eq!(used.len(), a.entries.len());
            for (i, e) in a.entries.iter().enumerate() {
                assert_eq!(a.index[a.slot_of[i] as usize].idx as usize, i);
                assert_eq!(a.find(&e.key, e.h), Some(i));
            }
        }
    }
}
