//! Algorithm 1 with a kick-out in O(log k) per flow removed instead of a pass over the table
//! (the crate's `FastPath`).
//!
//! Two observations give the same state as the paper's pass (tested against the literal
//! version, `fast::reference`, after every update of random streams):
//!
//! - **One global offset.** A pass subtracts the same `e^` from every residual and adds it to
//!   every `d` and to `E`. So store per flow `s = r + E` and `e` (the `E` at insertion): a pass is
//!   then `E += e^` alone, `r = s - E`, `d = E - e` (the decrements since insertion are exactly
//!   the growth of `E` since then), and Lemma 4.1's bounds are `lo = r + d = s - e`, `hi = s`.
//!   Insertion with `(E, v, 0)` stores `s = v + E`; line 18's `(E, v - e^, e^)` stores `s = v +
//!   E_old` with `e = E_old`.
//! - **A min-heap on `s`.** COMPUTETHRESH needs the smallest residual (the heap's root) and the
//!   two largest (kept as two entry ids, updated on every increment; recomputed by a scan only
//!   when a kick-out removes one of them, which needs nearly equal residuals). A flow is kicked
//!   out when `r <= 0`, i.e. `s <= E`: pop the root while that holds.
//!
//! A hit is one probe and an addition: the grown entry's sift-down waits for the next kick-out
//! (the only reader of the minimum), which first sifts down every entry that grew since the last
//! one, once each, deepest first ([`FastPath::repair`]); large flows sit at the leaves and are
//! never queued. A kick-out is then O(1) plus O(log k) per removed flow and per grown entry. The index is
//! linear probing with backward-shift deletion (Knuth 6.4 Algorithm R), so removals leave no
//! tombstones, with each entry's hash kept so that no key is hashed twice.

use algo::ConfigError;
use key::{FlowKey, HashFn};

use crate::fast::{FastKind, FastStats, FastTable, Summary, Tracked};
use crate::thresh::{exponent, thresh_with, DELTA};

const EMPTY: u32 = 0;
const NONE: u32 = u32::MAX;

/// SketchVisor's fast path (Algorithm 1).
#[derive(Clone, Debug)]
pub struct FastPath {
    cap: usize,
    // Per entry id (0..cap): key, hash, s = r + E, e, heap position.
    keys: Vec<FlowKey>,
    hashes: Vec<u64>,
    s: Vec<u64>,
    e: Vec<u64>,
    pos: Vec<u32>,
    /// Entries whose `s` grew (or that arrived) since the last kick-out, whose place in the heap
    /// is repaired only when a kick-out needs the minimum (module docs).
    dirty: Vec<u32>,
    is_dirty: Vec<bool>,
    /// Unused entry ids.
    free: Vec<u32>,
    /// Min-heap of entry ids by `s`.
    heap: Vec<u32>,
    /// Index slots: entry id + 1, or EMPTY.
    slots: Vec<u32>,
    mask: usize,
    hash: HashFn,
    /// Entry ids of the largest and second largest residual (NONE when absent).
    top: [u32; 2],
    v: u64,
    big_e: u64,
    /// `log2(1 / (1 - delta))` (COMPUTETHRESH's exponent).
    c: f64,
    stats: FastStats,
}

impl FastPath {
    /// A fast path of `bytes` (k = [`crate::capacity`]) for keys of `key_len` bytes.
    pub fn new(bytes: usize, key_len: usize, seed: u64) -> Result<FastPath, ConfigError> {
        let k = crate::fast::check_capacity(FastKind::Sketchvisor, bytes, key_len)?;
        Ok(FastPath::with_capacity(k, seed))
    }

    /// A fast path of exactly `k >= 1` flows.
    pub fn with_capacity(k: usize, seed: u64) -> FastPath {
        let cap = k.max(1);
        let slots = (2 * cap).next_power_of_two();
        FastPath {
            cap,
            keys: vec![FlowKey::EMPTY; cap],
            hashes: vec![0; cap],
            s: vec![0; cap],
            e: vec![0; cap],
            pos: vec![NONE; cap],
            dirty: Vec::with_capacity(cap),
            is_dirty: vec![false; cap],
            free: (0..cap as u32).rev().collect(),
            heap: Vec::with_capacity(cap),
            slots: vec![EMPTY; slots],
            mask: slots - 1,
            hash: HashFn::new(key::sub_seed(seed, crate::fast::SALT)),
            top: [NONE; 2],
            v: 0,
            big_e: 0,
            c: exponent(DELTA),
            stats: FastStats::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Slot of `key` (`Ok`) or the empty slot where it would go (`Err`).
    #[inline]
    fn find(&self, key: &FlowKey, h: u64) -> Result<usize, usize> {
        let mut i = (h as usize) & self.mask;
        loop {
            let sl = self.slots[i];
            if sl == EMPTY {
                return Err(i);
            }
            let id = (sl - 1) as usize;
            if self.hashes[id] == h && self.keys[id] == *key {
                return Ok(i);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Algorithm 1's UPDATEBUCKET.
    #[inline]
    pub fn update(&mut self, key: &FlowKey, v: u64) {
        if v == 0 {
            return;
        }
        self.stats.packets += 1;
        self.v += v; // line 6
        let h = self.hash.hash(key);
        match self.find(key, h) {
            Ok(slot) => {
                // Lines 7-8: r += v.
                let id = (self.slots[slot] - 1) as usize;
                self.s[id] += v;
                self.mark(id);
                self.raise_top(id as u32);
            }
            Err(slot) if self.heap.len() < self.cap => {
                // Lines 9-10: insert (E, v, 0).
                self.insert(slot, key, h, v + self.big_e, self.big_e);
            }
            Err(_) => self.kick_out(key, h, v),
        }
    }

    /// Defer `id`'s sift-down to the next kick-out: a leaf never needs one.
    #[inline]
    fn mark(&mut self, id: usize) {
        if !self.is_dirty[id] && 2 * (self.pos[id] as usize) + 1 < self.heap.len() {
            self.is_dirty[id] = true;
            self.dirty.push(id as u32);
        }
    }

    /// Restore the heap order: sift the marked entries down, deepest first. Values only grow
    /// between kick-outs, so an unmarked entry is still at most everything below it (all of
    /// it was at least the entry's value before and has only grown), whatever moves under it;
    /// and when a marked entry is sifted, every marked entry below it has been, so its subtrees
    /// are heaps, which is all a sift-down needs (Floyd's heap construction, restricted to the
    /// entries that can violate the order).
    fn repair(&mut self) {
        if self.dirty.is_empty() {
            return;
        }
        let mut d = std::mem::take(&mut self.dirty);
        if d.len() > 1 {
            d.sort_unstable_by_key(|&id| std::cmp::Reverse(self.pos[id as usize]));
        }
        for &id in &d {
            self.is_dirty[id as usize] = false;
            // Positions of entries not yet sifted change only inside subtrees already done,
            // so the order of `d` stays deepest-first.
            let p = self.pos[id as usize] as usize;
            if p < self.heap.len() {
                self.sift_down(p);
            }
        }
        d.clear();
        self.dirty = d;
    }

    /// Lines 12-19.
    #[cold]
    #[inline(never)]
    fn kick_out(&mut self, key: &FlowKey, h: u64, v: u64) {
        self.repair();
        let ee = self.big_e;
        let r = |id: u32| self.s[id as usize] - ee;
        // The k + 1 values: the residuals and v. The table is full (k >= 1), so the root and
        // the largest exist.
        let rmin = r(self.heap[0]);
        let t1 = r(self.top[0]);
        let t2 = if self.top[1] == NONE {
            0
        } else {
            r(self.top[1])
        };
        let (a1, a2) = if v >= t1 { (v, t1) } else { (t1, v.max(t2)) };
        let amin = v.min(rmin);
        let eh = thresh_with(a1, a2, amin, self.c);
        self.stats.kickouts += 1;
        let new_e = ee + eh;
        // Lines 13-16: every residual falls by eh; those at or below 0 (s <= E) go.
        let mut top_gone = false;
        while let Some(&root) = self.heap.first() {
            if self.s[root as usize] > new_e {
                break;
            }
            top_gone |= self.top.contains(&root);
            self.remove_root();
            self.stats.evicted += 1;
        }
        self.big_e = new_e; // line 19
        if top_gone {
            self.rescan_top();
        }
        // Lines 17-18: (E_old, v - eh, eh), i.e. s = v - eh + E_new = v + E_old.
        if v > eh && self.heap.len() < self.cap {
            if let Err(slot) = self.find(key, h) {
                self.insert(slot, key, h, v + ee, ee);
            }
        }
    }

    fn insert(&mut self, slot: usize, key: &FlowKey, h: u64, s: u64, e: u64) {
        let Some(id) = self.free.pop() else {
            return;
        };
        let i = id as usize;
        self.keys[i] = *key;
        self.hashes[i] = h;
        self.s[i] = s;
        self.e[i] = e;
        self.slots[slot] = id + 1;
        self.pos[i] = self.heap.len() as u32;
        self.heap.push(id);
        self.sift_up(self.heap.len() - 1);
        // Sifting up past a marked (grown) ancestor can leave this entry above a smaller
        // one: mark it so the next repair sifts it down. With nothing marked the heap is in
        // order and the sift-up keeps it so (the insertion of a kick-out, right after its
        // repair).
        if !self.dirty.is_empty() {
            self.is_dirty[i] = true;
            self.dirty.push(id);
        }
        self.raise_top(id);
    }

    /// Keep `top` the two largest after `id`'s `s` grew (or `id` arrived).
    #[inline]
    fn raise_top(&mut self, id: u32) {
        let sv = self.s[id as usize];
        let [t1, t2] = self.top;
        if id == t1 {
            return;
        }
        if t1 == NONE || sv > self.s[t1 as usize] {
            self.top = [id, t1];
        } else if id != t2 && (t2 == NONE || sv > self.s[t2 as usize]) {
            self.top[1] = id;
        }
    }

    fn rescan_top(&mut self) {
        self.top = [NONE; 2];
        for k in 0..self.heap.len() {
            let id = self.heap[k];
            self.raise_top(id);
        }
    }

    fn remove_root(&mut self) {
        let id = self.heap[0] as usize;
        let last = self.heap.pop().unwrap_or(0);
        if !self.heap.is_empty() {
            self.heap[0] = last;
            self.pos[last as usize] = 0;
            self.sift_down(0);
        }
        self.pos[id] = NONE;
        // Index: find the slot holding id, then backward-shift delete.
        let mut i = (self.hashes[id] as usize) & self.mask;
        while self.slots[i] != id as u32 + 1 {
            i = (i + 1) & self.mask;
        }
        self.delete_slot(i);
        self.free.push(id as u32);
    }

    /// Knuth's Algorithm R: empty slot `i`, then move back every later entry of the cluster
    /// whose home slot is not cyclically in `(i, j]`.
    fn delete_slot(&mut self, mut i: usize) {
        self.slots[i] = EMPTY;
        let mut j = i;
        loop {
            j = (j + 1) & self.mask;
            let sl = self.slots[j];
            if sl == EMPTY {
                return;
            }
            let home = (self.hashes[(sl - 1) as usize] as usize) & self.mask;
            // Stays iff home lies cyclically in (i, j].
            let stays = if i <= j {
                i < home && home <= j
            } else {
                i < home || home <= j
            };
            if !stays {
                self.slots[i] = sl;
                self.slots[j] = EMPTY;
                i = j;
            }
        }
    }

    #[inline]
    fn sift_up(&mut self, mut k: usize) {
        let id = self.heap[k];
        let sv = self.s[id as usize];
        while k > 0 {
            let p = (k - 1) / 2;
            let pid = self.heap[p];
            if self.s[pid as usize] <= sv {
                break;
            }
            self.heap[k] = pid;
            self.pos[pid as usize] = k as u32;
            k = p;
        }
        self.heap[k] = id;
        self.pos[id as usize] = k as u32;
    }

    #[inline]
    fn sift_down(&mut self, mut k: usize) {
        let n = self.heap.len();
        let id = self.heap[k];
        let sv = self.s[id as usize];
        loop {
            let l = 2 * k + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let c = if r < n && self.s[self.heap[r] as usize] < self.s[self.heap[l] as usize] {
                r
            } else {
                l
            };
            let cid = self.heap[c];
            if self.s[cid as usize] >= sv {
                break;
            }
            self.heap[k] = cid;
            self.pos[cid as usize] = k as u32;
            k = c;
        }
        self.heap[k] = id;
        self.pos[id as usize] = k as u32;
    }

    /// The bounds of `key`, if tracked: `(r + d, r + d + e)`.
    pub fn bounds(&self, key: &FlowKey) -> Option<(u64, u64)> {
        let h = self.hash.hash(key);
        self.find(key, h).ok().map(|slot| {
            let id = (self.slots[slot] - 1) as usize;
            (self.s[id] - self.e[id], self.s[id])
        })
    }

    /// `(key, e, r, d)` of every tracked flow, in heap order.
    pub fn entries(&self) -> impl Iterator<Item = (FlowKey, u64, u64, u64)> + '_ {
        self.heap.iter().map(|&id| {
            let i = id as usize;
            (
                self.keys[i],
                self.e[i],
                self.s[i] - self.big_e,
                self.big_e - self.e[i],
            )
        })
    }
}

impl FastTable for FastPath {
    fn kind(&self) -> FastKind {
        FastKind::Sketchvisor
    }
    #[inline]
    fn update(&mut self, key: &FlowKey, w: u64) {
        FastPath::update(self, key, w);
    }
    fn summary(&self) -> Summary {
        let mut flows: Vec<Tracked> = self
            .heap
            .iter()
            .map(|&id| {
                let i = id as usize;
                Tracked {
                    key: self.keys[i],
                    lo: self.s[i] - self.e[i],
                    hi: self.s[i],
                }
            })
            .collect();
        flows.sort_unstable_by_key(|t| t.key);
        Summary {
            flows,
            v: self.v,
            e: self.big_e,
        }
    }
    fn total(&self) -> u64 {
        self.v
    }
    fn decremented(&self) -> u64 {
        self.big_e
    }
    fn stats(&self) -> FastStats {
        self.stats
    }
    fn capacity(&self) -> usize {
        self.cap
    }
    fn reset(&mut self) {
        *self = FastPath::with_capacity_hash(self.cap, self.hash);
    }
    fn memory_bytes(&self) -> usize {
        // Per entry: key, hash, s, e, and three u32 (heap position, heap, free list).
        self.cap * (std::mem::size_of::<FlowKey>() + 3 * 8 + 3 * 4) + self.slots.len() * 4
    }
}

impl FastPath {
    fn with_capacity_hash(cap: usize, hash: HashFn) -> FastPath {
        let mut f = FastPath::with_capacity(cap, 0);
        f.hash = hash;
        f
    }
}
