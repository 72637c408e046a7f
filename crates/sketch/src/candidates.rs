//! Heavy-hitter candidate set for sketches that cannot enumerate their keys (ALGORITHMS.md 2).
//!
//! The set holds at most `2 * cap` keys and keeps a running threshold `theta`. The sketch calls
//! [`Candidates::offer`] after an update only when the key's new estimate is `>= theta` (one
//! compare on the hot path). The set is touched only then: a probe of a small open-addressing
//! table of members, keyed by the 64-bit value the sketch already computed for the key (Count
//! Sketch: its hash; Count-Min: its code, which for a 4-byte key is the key itself; no second
//! hash), and an insert if the key is new. When the set reaches `2 * cap` keys it is compacted:
//! the estimates of all members are re-queried, `theta` rises to one more than the
//! `(cap + 1)`-th largest, and members below it are dropped, leaving at most `cap`. Compaction
//! happens at most once per `cap` insertions, so its `O(cap log cap)` cost is amortised.
//!
//! Guarantee (monotone estimates: Count-Min, count array). Invariant: every key whose estimate
//! right after its own last update was `>= theta` is a member. It holds on insertion, and a
//! compaction drops only keys whose *current* estimate, which is at least the estimate at their
//! last update, is below the new `theta`. A key with true size `f >= T` has estimate `>= f` after
//! its last update, so if `T >= theta` at query time every such key is reported: recall 1.0
//! whatever the arrival order. Keys below `theta` may be missing; [`Candidates::theta`] tells the
//! caller the floor. False positives depend on the order (a key pushed over `T` only by later
//! traffic of other keys may or may not be a member), and are filtered by re-querying.
//!
//! For Count Sketch (non-monotone estimates) the same mechanics give a best-effort set: a key's
//! estimate can fall below `theta` by the time of a compaction and be dropped.

use algo::{Caveat, Estimate, Task};
use key::{FlowKey, KeyMap};
use serde::{Deserialize, Serialize};

/// Probe slots a batch's member check looks at ([`Candidates::needs_offer`]): four u64, one
/// 32-byte compare. Members further from their home slot are found by the exact `offer`.
pub const PROBE_SLOTS: usize = 4;

/// The probe-table entry of a member with code `h`: `h + 1`, so that `0` can mark an empty slot.
/// Injective except that `u64::MAX` and `0` share a tag; Count-Min's key codes are never
/// `u64::MAX` (`CounterMatrix::code`), and for a hash the clash has probability 2^-64.
#[inline(always)]
pub(crate) fn tag(h: u64) -> u64 {
    h.wrapping_add(1).max(1)
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidates {
    cap: usize,
    init_theta: u64,
    theta: u64,
    keys: Vec<FlowKey>,
    hashes: Vec<u64>,
    /// Open addressing, linear probing over member tags ([`tag`]; `0` = empty).
    /// Length is a power of two `>= 4 * cap`, so the load stays `<= 1/2`.
    table: Vec<u64>,
    /// Times members may have left (compactions and clears): a caller's cache of members
    /// (Count-Min's member hint) is valid while this is unchanged. Not state: not saved.
    #[serde(skip)]
    generation: u64,
}

impl Candidates {
    /// `init_theta >= 1`. `cap == 0` makes a disabled set: `theta` is `u64::MAX`, so no key is
    /// ever offered (a sketch configured for point queries only).
    pub fn new(cap: usize, init_theta: u64) -> Candidates {
        let init_theta = if cap == 0 {
            u64::MAX
        } else {
            init_theta.max(1)
        };
        let slots = (4 * cap.max(1)).next_power_of_two();
        Candidates {
            cap,
            init_theta,
            theta: init_theta,
            keys: Vec::with_capacity(2 * cap),
            hashes: Vec::with_capacity(2 * cap),
            table: vec![0; slots],
            generation: 0,
        }
    }

    /// Changes whenever members may have left the set (a compaction or a clear); between two
    /// changes the set only grows.
    #[inline(always)]
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Current threshold: every key whose estimate after its own last update was at least this
    /// is a member (for monotone sketches).
    #[inline(always)]
    pub fn theta(&self) -> u64 {
        self.theta
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    /// A set made with `cap == 0`: it never holds a key.
    pub fn is_disabled(&self) -> bool {
        self.cap == 0
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Members with their 64-bit hashes.
    pub fn iter(&self) -> impl Iterator<Item = (&FlowKey, u64)> {
        self.keys.iter().zip(self.hashes.iter().copied())
    }

    /// [`Candidates::memory_bytes`] of `Candidates::new(cap, _)`, without allocating (its
    /// vectors are allocated at construction for the `2 * cap` members it can hold).
    pub fn bytes_for(cap: usize) -> u64 {
        let cap = cap as u64;
        let slots = (4 * cap.max(1)).next_power_of_two();
        2 * cap * (std::mem::size_of::<FlowKey>() as u64 + 8) + slots * 8
    }

    pub fn memory_bytes(&self) -> usize {
        self.keys.capacity() * std::mem::size_of::<FlowKey>()
            + self.hashes.capacity() * 8
            + self.table.len() * 8
    }

    pub fn clear(&mut self) {
        self.generation += 1;
        self.keys.clear();
        self.hashes.clear();
        self.table.iter_mut().for_each(|s| *s = 0);
        self.theta = self.init_theta;
    }

    #[inline(always)]
    fn slot0(&self, h: u64) -> usize {
        // Fibonacci hashing (the top bits of h * 2^64/phi): `h` is a sketch's key code, which
        // may be a raw IPv4 address (Count-Min on 4-byte keys) rather than a hash, and the
        // sketch's row indices may use any of its bits; the multiply spreads both cases.
        let shift = 64 - self.table.len().trailing_zeros();
        (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (shift & 63)) as usize & (self.table.len() - 1)
    }

    /// Prefetch the first probe slot of hash `h` (batch pre-pass; timing only).
    #[inline(always)]
    pub fn prefetch(&self, h: u64) {
        crate::rows::prefetch(&self.table, self.slot0(h));
    }

    /// Probe for hash `h`: `(true, slot)` if a member has it, else `(false, empty slot)`.
    ///
    /// Members are identified by their 64-bit value alone: two keys with equal values occupy
    /// identical counters in every row, so the sketch cannot tell them apart anyway (for a
    /// hash it happens with probability 2^-64 per pair; a Count-Min code of a 4-byte key is
    /// exact). This keeps the probe to one 8-byte load in a
    /// table of `>= 4 * cap` slots (32 KiB for the default 1024), without touching the keys.
    #[inline(always)]
    fn find(&self, h: u64) -> (bool, usize) {
        let mask = self.table.len() - 1;
        let tag = tag(h);
        let mut s = self.slot0(h);
        // The load factor is at most 1/2, so an empty slot always exists and the loop ends.
        loop {
            let e = self.table[s];
            if e == tag {
                return (true, s);
            }
            if e == 0 {
                return (false, s);
            }
            s = (s + 1) & mask;
        }
    }

    /// Whether a member has hash `h` (one probe of the table, the keys untouched).
    #[inline]
    pub fn contains(&self, h: u64) -> bool {
        self.find(h).0
    }

    /// Record `key` (hash `h`) whose estimate just reached `est >= theta`. `requery(h)`
    /// returns a member's current estimate, for compaction.
    #[inline(always)]
    pub fn offer(&mut self, key: &FlowKey, h: u64, est: u64, requery: impl Fn(u64) -> u64) {
        if est < self.theta {
            return;
        }
        let (found, slot) = self.find(h);
        if !found {
            self.insert_at(key, h, slot, &requery);
        }
    }

    /// Whether `n` more insertions leave the set below `2 * cap` members, so that no compaction
    /// (the only thing that changes `theta` or removes a member) can happen during them.
    #[inline(always)]
    pub fn room_for(&self, n: usize) -> bool {
        self.keys.len().saturating_add(n) < 2 * self.cap
    }

    /// [`Candidates::offer`] for a batch: `offer(ks[i], hs[i], ests[i])` for `i` in order, where
    /// `ests[i]` is key `i`'s estimate right after its own update. Same resulting state as the
    /// loop of `offer` calls whenever [`Candidates::room_for`]`(n)` holds, which lets a sketch
    /// apply a whole batch's counter updates first and run this afterwards.
    ///
    /// Why it is cheaper: most offers (about 70% of updates on Zipf traffic) are by keys that are
    /// already members, usually within [`PROBE_SLOTS`] of their home slot. A branch-free
    /// pre-pass ([`Candidates::needs_offer`]) marks the keys that need work in a bit mask; only
    /// those take the exact `offer` path, in key order ([`Candidates::offer_marked`]).
    ///
    /// If `room_for(n)` does not hold, every key takes the exact path (a compaction then re-queries
    /// counters that already include the whole batch; estimates are monotone, so the guarantee
    /// in the module docs still holds, only the exact state may differ from one-by-one).
    #[inline]
    pub fn offer_batch(
        &mut self,
        ks: &[FlowKey],
        hs: &[u64],
        ests: &[u64],
        requery: impl Fn(u64) -> u64,
    ) {
        let n = ks.len().min(hs.len()).min(ests.len());
        if n <= 64 && self.room_for(n) {
            let mut todo = 0u64;
            for (i, (&h, &e)) in hs.iter().zip(ests).enumerate().take(n) {
                todo |= u64::from(self.needs_offer(h, e)) << i;
            }
            self.offer_marked(todo, |i| ks.get(i).copied(), hs, ests, requery);
        } else {
            for ((k, &h), &e) in ks.iter().zip(hs).zip(ests) {
                self.offer(k, h, e, &requery);
            }
        }
    }

    /// Insertions that cannot trigger a compaction (the set stays below `2 * cap` members):
    /// [`Candidates::room_for`]`(n)` is `n <= room()`.
    #[inline(always)]
    pub fn room(&self) -> usize {
        (2 * self.cap).saturating_sub(self.keys.len() + 1)
    }

    /// Whether a key with hash `h` and new estimate `est` may need inserting: `est >= theta` and
    /// `h` is in none of its first [`PROBE_SLOTS`] probe slots. No data-dependent branches.
    /// `false` is final while no compaction happens (nothing leaves the table before one), so a
    /// batch may evaluate it for all keys up front ([`Candidates::room_for`]) and skip those keys.
    #[inline(always)]
    pub fn needs_offer(&self, h: u64, est: u64) -> bool {
        (est >= self.theta) & !self.in_probe_slots(h)
    }

    /// Whether `h` is in one of its first [`PROBE_SLOTS`] slots (then it is a member).
    #[inline(always)]
    fn in_probe_slots(&self, h: u64) -> bool {
        let mask = self.table.len() - 1;
        let s0 = self.slot0(h);
        let tag = tag(h);
        let mut hit = false;
        for k in 0..PROBE_SLOTS {
            // Masked with `table.len() - 1`: in bounds (the length is a power of two).
            hit |= self.table[(s0 + k) & mask] == tag;
        }
        hit
    }

    /// `offer(ks[i], hs[i], ests[i])` for every bit `i` set in `todo`, in increasing `i`: the
    /// second half of a batch whose other keys [`Candidates::needs_offer`] cleared. Exact for
    /// any `todo` that includes every key `needs_offer` flagged, provided the flags were
    /// computed after the previous compaction and `room_for(n)` held (so that no compaction
    /// happens here); `offer` itself re-checks everything.
    #[inline]
    pub fn offer_marked(
        &mut self,
        mut todo: u64,
        key: impl Fn(usize) -> Option<FlowKey>,
        hs: &[u64],
        ests: &[u64],
        requery: impl Fn(u64) -> u64,
    ) {
        while todo != 0 {
            let i = todo.trailing_zeros() as usize;
            todo &= todo - 1;
            if let (Some(k), Some(&h), Some(&e)) = (key(i), hs.get(i), ests.get(i)) {
                self.offer(&k, h, e, &requery);
            }
        }
    }

    /// `offer(key, h, est(i))` for every bit `i` set in `todo`, in increasing `i`, where
    /// `key(i)` gives the key and its hash `h`, and `member(i, h)` for every one of them that is
    /// a member afterwards (found, or inserted and not compacted away): what a caller may cache
    /// as members until [`Candidates::generation`] changes (Count-Min's member hint).
    #[inline]
    pub fn offer_marked_noting(
        &mut self,
        mut todo: u64,
        key: impl Fn(usize) -> Option<(FlowKey, u64)>,
        est: impl Fn(usize) -> u64,
        requery: impl Fn(u64) -> u64,
        mut member: impl FnMut(usize, u64),
    ) {
        while todo != 0 {
            let i = todo.trailing_zeros() as usize;
            todo &= todo - 1;
            if let Some((k, h)) = key(i) {
                if est(i) < self.theta {
                    continue;
                }
                let (found, slot) = self.find(h);
                if !found {
                    let g = self.generation;
                    self.insert_at(&k, h, slot, &requery);
                    if self.generation != g {
                        // Compacted: the key may have left again.
                        continue;
                    }
                }
                member(i, h);
            }
        }
    }

    #[inline(never)]
    fn insert_at(&mut self, key: &FlowKey, h: u64, slot: usize, requery: &dyn Fn(u64) -> u64) {
        self.keys.push(*key);
        self.hashes.push(h);
        self.table[slot] = tag(h);
        if self.keys.len() >= 2 * self.cap {
            self.compact(requery);
        }
    }

    /// Drop members below `theta`, raising `theta` first if more than `cap` remain, then rebuild
    /// the probe table.
    pub fn compact(&mut self, requery: &dyn Fn(u64) -> u64) {
        self.generation += 1;
        let mut ests: Vec<(u64, usize)> = self
            .hashes
            .iter()
            .enumerate()
            .map(|(i, &h)| (requery(h), i))
            .collect();
        if ests.len() > self.cap {
            // (cap + 1)-th largest estimate; keeping only strictly larger ones leaves <= cap.
            let nth = ests.len() - 1 - self.cap;
            ests.select_nth_unstable(nth);
            let raised = ests[nth].0.saturating_add(1);
            self.theta = self.theta.max(raised);
        }
        let theta = self.theta;
        let mut keep: Vec<usize> = ests
            .iter()
            .filter(|(e, _)| *e >= theta)
            .map(|&(_, i)| i)
            .collect();
        // Ties at the cut (issue 34): keys at `theta - 1` are below the guarantee, so any of them
        // may stay; keep the first inserted up to `cap` rather than none. Otherwise an epoch of
        // equal flows (a port scan's ~2000 one-packet flows) left a set of 3 for a top-100.
        if keep.len() < self.cap && theta > 1 {
            let mut ties: Vec<usize> = ests
                .iter()
                .filter(|(e, _)| *e == theta - 1)
                .map(|&(_, i)| i)
                .collect();
            ties.sort_unstable();
            ties.truncate(self.cap - keep.len());
            keep.extend(ties);
        }
        // Keep insertion order so the state does not depend on the selection algorithm.
        keep.sort_unstable();
        let keys: Vec<FlowKey> = keep
            .iter()
            .filter_map(|&i| self.keys.get(i).copied())
            .collect();
        let hashes: Vec<u64> = keep
            .iter()
            .filter_map(|&i| self.hashes.get(i).copied())
            .collect();
        self.keys.clear();
        self.hashes.clear();
        self.table.iter_mut().for_each(|s| *s = 0);
        for (k, h) in keys.into_iter().zip(hashes) {
            let (found, slot) = self.find(h);
            if !found {
                self.keys.push(k);
                self.hashes.push(h);
                self.table[slot] = tag(h);
            }
        }
    }

    /// `Ok` when a loaded set is one `new(cap, _)` and its verbs could have made
    /// (`algo::CheckState`): its probe table of the size `cap` makes, fewer than `2 * cap`
    /// members (a compaction follows the insertion that reaches it), each member's value
    /// `code(key)` and its tag found by probing, and no other slot taken. A forged table with no
    /// empty slot would make `find` probe forever.
    pub fn check(&self, cap: usize, code: impl Fn(&FlowKey) -> u64) -> Result<(), String> {
        let slots = (4 * cap.max(1)).next_power_of_two();
        if self.cap != cap || self.table.len() != slots {
            return Err(format!(
                "candidate set of capacity {} with {} slots, the configuration has {cap} ({slots} \
                 slots)",
                self.cap,
                self.table.len()
            ));
        }
        let members = self.keys.len();
        if self.hashes.len() != members || (members > 0 && members >= 2 * cap) {
            return Err(format!(
                "{members} candidate keys and {} values for a capacity of {cap}",
                self.hashes.len()
            ));
        }
        if cap == 0 && self.init_theta != u64::MAX || self.init_theta == 0 {
            return Err(format!(
                "candidate threshold {} for capacity {cap}",
                self.init_theta
            ));
        }
        if self.table.iter().filter(|&&t| t != 0).count() != members {
            return Err("the candidates' probe table holds other tags than its members".into());
        }
        let mask = slots - 1;
        for (k, &h) in self.keys.iter().zip(&self.hashes) {
            if code(k) != h {
                return Err(format!("candidate {k} is stored with another value"));
            }
            // Bounded: at most one pass over the table.
            let mut s = self.slot0(h);
            let mut found = false;
            for _ in 0..slots {
                match self.table[s] {
                    t if t == tag(h) => {
                        found = true;
                        break;
                    }
                    0 => break,
                    _ => s = (s + 1) & mask,
                }
            }
            if !found {
                return Err(format!("candidate {k} is not in the probe table"));
            }
        }
        Ok(())
    }

    /// Union with `other` (same sketch shape and seeds). The merged threshold is
    /// `theta_a + theta_b - 1`: sizes are integers, so a key with `f_a <= theta_a - 1` and
    /// `f_b <= theta_b - 1` has `f <= theta_a + theta_b - 2`; a key with merged size
    /// `f >= theta_a + theta_b - 1` therefore had `f_a >= theta_a` or `f_b >= theta_b`, was a
    /// member of one side and is kept. (`theta_a + theta_b`, the bound before issue 34, lost
    /// the flows exactly at the threshold: two workers' sets at theta 1 merged at 2, and every
    /// one-packet flow of a threshold-1 run was dropped.)
    pub fn merge(&mut self, other: &Candidates, requery: &dyn Fn(u64) -> u64) {
        // Both thetas are at least 1 (`new` takes `init_theta.max(1)`; compaction only raises).
        self.theta = self
            .theta
            .saturating_add(other.theta)
            .saturating_sub(1)
            .max(1);
        for (k, h) in other.iter() {
            let (found, slot) = self.find(h);
            if !found {
                self.insert_at(k, h, slot, requery);
            }
        }
        self.compact(requery);
    }
}

impl Candidates {
    /// What the set may have lost of a task's answer (issue 34), naming `candidates` and a size:
    /// top-k asking more than the set holds (`algo::top_k_cap_caveat`); heavy hitters below the
    /// set's running threshold (it rose past the task's `T` in a compaction, so flows of size
    /// `T..theta` may have been dropped: the module's guarantee needs `T >= theta`).
    /// `reaching(t)` is the sketch's count of flows whose counters reach `t` (the suggestion).
    pub(crate) fn caveats(
        &self,
        task: Task,
        scale: Option<u64>,
        reaching: impl Fn(u64) -> u64,
    ) -> Vec<Caveat> {
        if self.is_disabled() {
            return Vec::new();
        }
        if let Some(c) =
            algo::top_k_cap_caveat(task, scale, "candidates", self.cap, self.overflowed())
        {
            return vec![c];
        }
        match (task, scale) {
            (Task::HeavyHitters, Some(t)) => self.below_theta(t, self.theta, reaching),
            _ => Vec::new(),
        }
    }

    /// Whether a compaction raised the threshold this epoch: keys whose estimate stayed below it
    /// may have been dropped.
    pub fn overflowed(&self) -> bool {
        self.theta > self.init_theta
    }

    /// The caveat of a task at threshold `t` answered from sets whose threshold rose to `theta`
    /// (`theta > t`), with the size that keeps the flows reaching `t`.
    fn below_theta(&self, t: u64, theta: u64, reaching: impl Fn(u64) -> u64) -> Vec<Caveat> {
        if t >= theta {
            return Vec::new();
        }
        let n = reaching(t);
        let cap = self.cap;
        let sizes = if theta - 1 == t {
            format!("{t}")
        } else {
            format!("{t} to {}", theta - 1)
        };
        vec![Caveat {
            parameter: "candidates",
            message: format!(
                "the candidate set (candidates = {cap}) overflowed: its threshold rose to {theta}, \
                 above the task's {t}, so flows of size {sizes} may be missing (the counters \
                 show about {n} flows reaching {t})"
            ),
            suggestion: format!(
                "candidates = {} (at least)",
                (n as usize).max(2 * cap).next_power_of_two()
            ),
        }]
    }

    /// Heavy changers at threshold `t` from the union of this epoch's set and `prev`'s: a flow
    /// whose size changed by `t` or more was at least `t` in one of the epochs, so it is in one
    /// of the sets when `t` is at least both thresholds; else the caveat of
    /// [`Candidates::caveats`].
    pub(crate) fn change_caveats(
        &self,
        prev: &Candidates,
        t: u64,
        reaching: impl Fn(u64) -> u64,
    ) -> Vec<Caveat> {
        if self.is_disabled() {
            return Vec::new();
        }
        self.below_theta(t, self.theta.max(prev.theta), reaching)
    }
}

/// About how many flows of a counter sketch reach a size: the most counters of one row (rows of
/// `width` in `counters`) for which `reaches` holds (every such flow's counters reach it in every
/// row; light flows sharing a counter push others over). What [`Candidates::caveats`] suggests.
pub(crate) fn reaching<C: Copy>(counters: &[C], width: usize, reaches: impl Fn(C) -> bool) -> u64 {
    counters
        .chunks(width.max(1))
        .map(|row| row.iter().filter(|&&c| reaches(c)).count() as u64)
        .max()
        .unwrap_or(0)
}

/// Heavy changers of a sketch with candidate sets (Count-Min, the count array, Count Sketch):
/// every key in either epoch's set, with the absolute change its counters show (`change(code)`,
/// the current minus the previous epoch's estimate), kept when at least `threshold`.
pub(crate) fn changers(
    cur: &Candidates,
    prev: &Candidates,
    threshold: u64,
    change: impl Fn(u64) -> i64,
) -> Vec<Estimate> {
    let mut union: KeyMap<u64> = KeyMap::default();
    for (k, h) in cur.iter().chain(prev.iter()) {
        union.insert(*k, h);
    }
    let mut v: Vec<Estimate> = union
        .into_iter()
        .map(|(k, h)| (k, change(h).unsigned_abs()))
        .filter(|&(_, d)| d >= threshold)
        .collect();
    crate::sort_estimates(&mut v);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offers_dedup_and_compaction_raise_theta() {
        let mut est = std::collections::HashMap::new();
        let mut c = Candidates::new(4, 1);
        for i in 0..7u32 {
            est.insert(u64::from(i) * 7919, u64::from(i) + 1);
        }
        let q = |h: u64| *est.get(&h).unwrap_or(&0);
        for i in 0..7u32 {
            let k = FlowKey::from_u32(i);
            let h = u64::from(i) * 7919;
            c.offer(&k, h, u64::from(i) + 1, q);
            c.offer(&k, h, u64::from(i) + 1, q); // duplicate: no effect
        }
        // 8 would trigger compaction; 7 members, none dropped yet.
        assert_eq!(c.len(), 7);
        c.compact(&q);
        // Estimates 1..=7, cap 4: (cap+1)-th largest is 3, theta = 4, keeps 4,5,6,7.
        assert_eq!(c.theta(), 4);
        assert_eq!(c.len(), 4);
        assert!(c.iter().all(|(_, h)| q(h) >= 4));
        c.offer(&FlowKey::from_u32(99), 5, 3, q); // below theta: ignored
        assert_eq!(c.len(), 4);
    }

    /// The scalar twin of the batch path: `offer_batch` (branch-free pre-pass with unchecked
    /// table reads, then `offer` for flagged keys) leaves exactly the state of the `offer` loop,
    /// through many compactions, with repeats inside batches and batches that straddle the
    /// compaction point.
    #[test]
    fn offer_batch_equals_offer_loop() {
        // Estimates grow with the number of times a key was seen; a fixed pseudo-random stream
        // of 64 distinct keys with a skew, so members repeat and the threshold keeps rising.
        let mut seen: std::collections::HashMap<u64, u64> = Default::default();
        let mut stream = Vec::new();
        let mut x = 0x1234_5678_9abc_def1u64;
        for _ in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let id = (x % 64) * (x % 3 + 1) % 64;
            let h = key::mix64(id);
            let e = seen.entry(h).or_insert(0);
            *e += 1;
            stream.push((FlowKey::from_u32(id as u32), h, *e));
        }
        // Requery answers the final counts: monotone, at least every offered estimate.
        let q = |h: u64| *seen.get(&h).unwrap_or(&0);
        for (cap, batch) in [(4, 5), (8, 32), (16, 7), (3, 64)] {
            let mut one = Candidates::new(cap, 1);
            let mut bat = Candidates::new(cap, 1);
            for (i, chunk) in stream.chunks(batch).enumerate() {
                for (k, h, e) in chunk {
                    one.offer(k, *h, *e, q);
                }
                let ks: Vec<FlowKey> = chunk.iter().map(|c| c.0).collect();
                let hs: Vec<u64> = chunk.iter().map(|c| c.1).collect();
                let es: Vec<u64> = chunk.iter().map(|c| c.2).collect();
                bat.offer_batch(&ks, &hs, &es, q);
                assert_eq!(one, bat, "cap {cap} batch {batch} chunk {i}");
            }
            assert!(one.theta() > 1, "cap {cap}: no compaction exercised");
            // A member is flagged exactly when it sits two or more slots past its home slot; a
            // new key is flagged exactly when its estimate reaches theta.
            let mask = bat.table.len() - 1;
            for (_, h) in bat.iter() {
                let (found, slot) = bat.find(h);
                assert!(found);
                let displaced = (slot.wrapping_sub(bat.slot0(h)) & mask) >= PROBE_SLOTS;
                assert_eq!(bat.needs_offer(h, u64::MAX), displaced);
            }
            assert!(bat.needs_offer(0xdead_beef, bat.theta()));
            assert!(!bat.needs_offer(0xdead_beef, bat.theta() - 1));
        }
    }
}
