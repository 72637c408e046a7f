//! Space-Saving's counters for small k (issue 14): a flat table, the counts contiguous, where an
//! increment of any weight is one add and the minimum Space-Saving replaces is found by a SIMD
//! scan of the counts (`key::scan::min_ties`), instead of the Stream-Summary's walk over the
//! buckets between the old count and the new one (`stream_summary`: O(1) for a unit increment,
//! but up to k buckets for the weighted updates Agg-Evict hands on, about 60 ns each at k = 128).
//!
//! Which key of the minimum count a new key replaces: the one in the highest slot. A scan keeps
//! the slots at the minimum in `ties`, a bit set, and a replacement takes the highest; `ties` only
//! shrinks until the next scan, since counts only grow and a replaced or hit slot leaves the
//! minimum (such a stale entry is skipped when popped). So one scan serves every replacement at
//! that minimum: on unit updates (many keys tie at the minimum) one scan serves many, on
//! weighted ones (one key at the minimum) a replacement scans unless the minimum is found
//! among the last scan's few ties (`few`). The choice
//! depends only on the counts and slots, so `update(k, w)` still leaves the state of `w` unit
//! updates (after the first, the key is held). It is not the Stream-Summary's (the key whose
//! count changed last): keeping that order cost a sort of the ties by a per-slot time stamp,
//! which made this table slower than the Stream-Summary on unit updates at k = 128 (issue 14).
//! Either is Space-Saving, whose guarantees hold whichever key of the minimum goes (test
//! `summary::tests::counts_match_a_scanned_model`); the held keys, and so order-dependent
//! answers, can differ from the Stream-Summary's within them.
//!
//! Slots live in arrays allocated at construction and never grown; the key index is the
//! Stream-Summary's (`slot_index`).

use key::{FlowKey, HashInput};

use crate::slot_index::{index_hash, SlotIndex};

/// Most ties of a scan kept to look among first (`ScanSummary::few`): a look costs one read per
/// tie and serves every replacement at the minimum it finds, so it pays at any size; the bound
/// keeps the memory fixed.
const FEW: usize = 64;

#[derive(Clone, Copy, Debug)]
struct Slot {
    /// The key's hash (`index_hash`), kept so that removing the key from the index needs no
    /// rehash.
    hash: u64,
    key: FlowKey,
    /// ε: the count the key inherited when it replaced the minimum.
    err: u64,
}

#[derive(Clone, Debug)]
pub(crate) struct ScanSummary {
    cap: usize,
    slots: Vec<Slot>,
    /// Count of each slot, beside each other for the scan.
    counts: Vec<u64>,
    /// Bit set of the slots whose count was `low`, the minimum, at the last scan; a slot whose
    /// count is no longer `low` is stale. Words at `top` and above are empty.
    ties: Vec<u64>,
    top: usize,
    low: u64,
    /// The smallest count above `low` at the last scan: a lower bound, ever since, on every
    /// slot's count but those of that scan's ties.
    next: u64,
    /// That scan's ties when they are at most [`FEW`] (else empty): while the least of their
    /// counts stays below `next` it is the minimum, and the next ties are found among them.
    few: Vec<u32>,
    index: SlotIndex,
}

impl ScanSummary {
    pub fn new(cap: usize) -> ScanSummary {
        ScanSummary {
            cap,
            slots: Vec::with_capacity(cap),
            counts: Vec::with_capacity(cap),
            ties: vec![0; key::scan::tie_words(cap)],
            top: 0,
            low: 0,
            next: 0,
            few: Vec::with_capacity(FEW),
            index: SlotIndex::new(cap),
        }
    }

    /// Bytes of a slot: the key, its hash and ε, and its count.
    const SLOT_BYTES: usize = std::mem::size_of::<Slot>() + 8;

    /// [`ScanSummary::memory_bytes`] of `ScanSummary::new(cap)` without allocating: the slots,
    /// the bit set of ties, the few ties and the index.
    pub fn bytes_for(cap: usize) -> u64 {
        (cap * Self::SLOT_BYTES + key::scan::tie_words(cap) * 8 + FEW * 4) as u64
            + SlotIndex::bytes_for(cap)
    }

    pub fn memory_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot>()
            + self.counts.capacity() * 8
            + self.ties.capacity() * 8
            + self.few.capacity() * 4
            + self.index.memory_bytes()
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    pub fn is_full(&self) -> bool {
        self.slots.len() >= self.cap
    }

    /// The smallest count when full, else 0: the most an unmonitored key can weigh.
    pub fn floor(&self) -> u64 {
        match self.counts.iter().min() {
            Some(&m) if self.is_full() => m,
            _ => 0,
        }
    }

    #[inline(always)]
    fn find(&self, key: &impl HashInput, h: u64) -> (Option<u32>, usize) {
        self.index.find(h, |id| {
            let s = &self.slots[id as usize];
            s.hash == h && s.key == key.to_key()
        })
    }

    /// `(count, ε)` of a monitored key.
    pub fn get(&self, key: &FlowKey) -> Option<(u64, u64)> {
        let id = self.find(key, index_hash(key)).0? as usize;
        Some((self.counts[id], self.slots[id].err))
    }

    /// `(key, count, ε)` of every monitored key, in slot order.
    pub fn entries(&self) -> impl Iterator<Item = (FlowKey, u64, u64)> + '_ {
        self.slots
            .iter()
            .zip(&self.counts)
            .map(|(s, &c)| (s.key, c, s.err))
    }

    pub fn clear(&mut self) {
        self.slots.clear();
        self.counts.clear();
        self.top = 0;
        self.few.clear();
        self.low = 0;
        self.index.clear();
    }

    /// Add `w` to slot `id`'s count; false if the count saturated unchanged.
    #[inline(always)]
    fn add(&mut self, id: usize, w: u64) -> bool {
        let c = self.counts[id];
        self.counts[id] = c.saturating_add(w);
        self.counts[id] != c
    }

    /// The Space-Saving step (ALGORITHMS.md 10; `w > 0`): a monitored key adds `w`; a new key
    /// takes a free slot with `(c, ε) = (w, 0)`, or else replaces a key of the minimum count
    /// `c_min` with `(c_min + w, c_min)` (which key: module docs).
    /// The key comes as a `FlowKey` or (4-byte keys, `update_batch_u32`) as its big-endian
    /// u32, which hashes and compares as `FlowKey::from_u32` of it: the same slot either way.
    #[inline]
    pub fn offer(&mut self, key: &impl HashInput, w: u64) {
        let h = index_hash(key);
        match self.find(key, h) {
            (Some(id), _) => {
                self.add(id as usize, w);
            }
            (None, pos) if !self.is_full() => {
                let id = self.slots.len();
                self.index.set(pos, h, id as u32);
                self.push(h, key.to_key(), w, 0);
            }
            (None, pos) => {
                let id = self.take_min();
                let slot = &mut self.slots[id];
                self.index.rekey(id as u32, slot.hash, h, pos);
                (slot.hash, slot.key, slot.err) = (h, key.to_key(), self.counts[id]);
                if !self.add(id, w) {
                    // Saturated: still at the minimum, and still the highest slot there.
                    self.ties[id / 64] |= 1 << (id % 64);
                }
            }
        }
    }

    /// A slot for a key not held (the caller indexes it).
    fn push(&mut self, hash: u64, key: FlowKey, count: u64, err: u64) {
        self.slots.push(Slot { hash, key, err });
        self.counts.push(count);
    }

    /// The slot Space-Saving replaces (the table is full): the last of the slots at the
    /// minimum count. Scans when `ties` holds no current one.
    fn take_min(&mut self) -> usize {
        loop {
            while let Some(w) = self.top.checked_sub(1) {
                let bits = self.ties[w];
                if bits == 0 {
                    self.top = w;
                    continue;
                }
                let b = 63 - bits.leading_zeros() as usize;
                self.ties[w] = bits & !(1 << b);
                let id = w * 64 + b;
                if self.counts[id] == self.low {
                    return id;
                }
            }
            // The last scan's few ties, replaced or hit since, may still hold the minimum
            // (new keys of small weights replacing each other at the bottom): the
            // Stream-Summary's O(1) case, where a scan per new key cost up to 20 times its time
            // (k = 8192; issue 14).
            let counts = &self.counts;
            let least = self.few.iter().map(|&i| counts[i as usize]).min();
            match least {
                Some(m) if m < self.next => {
                    self.low = m;
                    self.top = 0;
                    for &i in &self.few {
                        if self.counts[i as usize] == m {
                            let i = i as usize;
                            self.ties[i / 64] |= 1 << (i % 64);
                            self.top = self.top.max(i / 64 + 1);
                        }
                    }
                }
                _ => self.scan(),
            }
        }
    }

    /// A scan of every count for the minimum, its ties and the next count.
    fn scan(&mut self) {
        (self.low, self.next) = key::scan::min_ties(&self.counts, &mut self.ties).unwrap_or((0, 0));
        self.top = key::scan::tie_words(self.counts.len());
        self.few.clear();
        let n: u32 = self.ties.iter().map(|w| w.count_ones()).sum();
        if n as usize <= FEW {
            for (w, &bits) in self.ties.iter().enumerate() {
                let mut b = bits;
                while b != 0 {
                    self.few.push((w * 64) as u32 + b.trailing_zeros());
                    b &= b - 1;
                }
            }
        }
    }

    /// A summary of capacity `cap` holding `entries` (at most `cap`, distinct keys), in slots
    /// in ascending (count, key) order (as the Stream-Summary's rebuild).
    pub fn from_entries(cap: usize, mut entries: Vec<(FlowKey, u64, u64)>) -> ScanSummary {
        entries.sort_unstable_by_key(|e| (e.1, e.0));
        let mut out = ScanSummary::new(cap);
        for (key, count, err) in entries {
            let h = index_hash(&key);
            let pos = out.find(&key, h).1;
            let id = out.slots.len();
            out.index.set(pos, h, id as u32);
            out.push(h, key, count, err);
        }
        out
    }

    /// The index pointing at each key's slot, the arrays in step (tests).
    #[cfg(test)]
    pub fn check(&self) {
        assert_eq!(self.counts.len(), self.slots.len());
        for (id, s) in self.slots.iter().enumerate() {
            assert_eq!(s.hash, index_hash(&s.key));
            assert_eq!(self.find(&s.key, s.hash).0, Some(id as u32), "index");
            assert!(s.err <= self.counts[id]);
        }
        assert_eq!(self.index.used(), self.slots.len());
        assert!(self.slots.len() <= self.cap);
    }
}
