//! Stream-Summary (Metwally, Agrawal, El Abbadi, "Efficient computation of frequent and top-k
//! elements in data streams", ICDT'05, section 3.2): the structure under `space_saving`.
//!
//! Monitored keys (slots) hang in buckets, one bucket per distinct count, the buckets in a list
//! ordered by count (the smallest first). An increment detaches the slot and walks from its old
//! bucket to the first bucket whose count is at least the new one: a unit increment moves to the
//! next bucket, O(1), and the minimum (the slot Space-Saving replaces) is the first bucket's
//! first slot. Against the binary heap it replaces (`count_heap`), an update costs one key lookup
//! and a few list links instead of a sift of up to log2(k) levels that rewrote the key map at
//! every level (issue 14: the heap's update was most of Space-Saving's cost).
//!
//! Slots and buckets live in two arrays allocated at construction (`k` each: at most one bucket
//! per slot), linked by u32 indices; the key map holds a key's slot. A weighted update (what
//! Agg-Evict's evictions are) walks past the distinct counts between the old and the new count,
//! at most the buckets in use.
//!
//! State is saved as its contents, `(key, count, ε)` per slot, and rebuilt on load (so a
//! snapshot cannot carry broken links), and two summaries are equal when their contents are:
//! which slot and bucket a key occupies is layout, not state.

use std::cmp::Reverse;

use key::{FlowKey, HashFn, HashInput};
use serde::{Deserialize, Serialize};

/// No slot / no bucket.
const NIL: u32 = u32::MAX;

/// Largest `k` a summary takes (`SpaceSavingConfig::validate`'s bound; a loaded state is
/// checked against it too).
pub(crate) const MAX_CAP: usize = 1 << 24;

#[derive(Clone, Copy, Debug)]
struct Slot {
    /// The key's hash (`index_hash`): its place in the index, kept so that removing the key
    /// and moving it during a removal need no rehash.
    hash: u64,
    key: FlowKey,
    /// ε: the count the key inherited when it replaced the minimum.
    err: u64,
    bucket: u32,
    prev: u32,
    next: u32,
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    count: u64,
    /// First slot of the bucket's list (never `NIL` while the bucket is in use).
    first: u32,
    /// Neighbours in count order; `next` links the free list for a free bucket.
    prev: u32,
    next: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(into = "Saved", try_from = "Saved")]
pub(crate) struct StreamSummary {
    cap: usize,
    slots: Vec<Slot>,
    buckets: Vec<Bucket>,
    /// Head of the free buckets' list (linked through `next`).
    free: u32,
    /// The bucket of the smallest count (`NIL` when empty).
    min: u32,
    /// Bucket of the largest count (`NIL` when empty): a new slot with a count above every
    /// other (a merge's rebuild, in ascending order) is linked in O(1).
    max: u32,
    /// Open addressing over slot ids, linear probing from the top bits of a slot's `hash`, at
    /// most a quarter full (`4 * cap` rounded up to a power of two: at half full, the probes
    /// and a replacement's removal shifts ran about twice as long, and their unpredictable
    /// loop exits were a third of Space-Saving's time at k = 128; issue 14), deletion by
    /// backward shift (no tombstones, so no rehash ever): one xxh3 of the key per update, where
    /// a `KeyMap` took a second for the replaced key. An entry is [`entry`]`(hash, slot)` ([`EMPTY`] = empty):
    /// with the hash's top half beside the slot id, a probe and a removal's shifts read only
    /// the index, never a slot, until a hash matches (issue 14: the shifts' slot loads were a
    /// third of a miss's cost).
    index: Vec<u64>,
}

/// An empty index entry (its slot part is `NIL`; a used entry's is below `MAX_CAP`).
const EMPTY: u64 = u64::MAX;

/// The index entry of slot `id` whose key hashes to `h`: the hash's top 32 bits (which hold
/// its home, the index being at most 2^25 long) above the slot id.
#[inline(always)]
fn entry(h: u64, id: u32) -> u64 {
    (h & !0xffff_ffff) | u64::from(id)
}

/// The slot id of an index entry (`NIL` for [`EMPTY`]).
#[inline(always)]
fn slot_of(e: u64) -> u32 {
    e as u32
}

/// The index's hash of a key (any fixed seed: the index is layout, not state).
#[inline(always)]
fn index_hash(key: &impl HashInput) -> u64 {
    key.hash_by(&HashFn::new(0x7374_7265_616d_5f73)) // "stream_s"
}

/// The saved form: the contents, slot by slot.
#[derive(Serialize, Deserialize)]
struct Saved {
    cap: usize,
    entries: Vec<(FlowKey, u64, u64)>,
}

impl From<StreamSummary> for Saved {
    fn from(s: StreamSummary) -> Saved {
        Saved {
            cap: s.cap,
            entries: s.entries().collect(),
        }
    }
}

impl TryFrom<Saved> for StreamSummary {
    type Error = String;
    fn try_from(s: Saved) -> Result<StreamSummary, String> {
        if s.cap == 0 || s.cap > MAX_CAP {
            return Err(format!("capacity {} outside 1..={MAX_CAP}", s.cap));
        }
        if s.entries.len() > s.cap {
            return Err(format!(
                "{} entries for a capacity of {}",
                s.entries.len(),
                s.cap
            ));
        }
        let mut keys: Vec<FlowKey> = s.entries.iter().map(|e| e.0).collect();
        keys.sort_unstable();
        if keys.windows(2).any(|w| w[0] == w[1]) {
            return Err("a key is held twice".into());
        }
        if let Some(e) = s.entries.iter().find(|e| e.2 > e.1) {
            return Err(format!("{}: ε {} above its count {}", e.0, e.2, e.1));
        }
        Ok(StreamSummary::from_entries(s.cap, s.entries))
    }
}

impl PartialEq for StreamSummary {
    /// Same capacity and the same `(key, count, ε)` contents.
    fn eq(&self, o: &StreamSummary) -> bool {
        let sorted = |s: &StreamSummary| {
            let mut v: Vec<(FlowKey, u64, u64)> = s.entries().collect();
            v.sort_unstable();
            v
        };
        self.cap == o.cap && self.slots.len() == o.slots.len() && sorted(self) == sorted(o)
    }
}

impl StreamSummary {
    pub fn new(cap: usize) -> StreamSummary {
        StreamSummary {
            cap,
            slots: Vec::with_capacity(cap),
            buckets: Vec::with_capacity(cap),
            free: NIL,
            min: NIL,
            max: NIL,
            index: vec![EMPTY; Self::index_len(cap)],
        }
    }

    /// [`StreamSummary::memory_bytes`] of `StreamSummary::new(cap)` without allocating: `cap`
    /// slots and buckets and the index, all allocated at construction and never grown.
    pub fn bytes_for(cap: usize) -> u64 {
        cap as u64 * (std::mem::size_of::<Slot>() + std::mem::size_of::<Bucket>()) as u64
            + Self::index_len(cap) as u64 * 8
    }

    pub fn memory_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot>()
            + self.buckets.capacity() * std::mem::size_of::<Bucket>()
            + self.index.len() * 8
    }

    fn index_len(cap: usize) -> usize {
        (4 * cap.max(1)).next_power_of_two()
    }

    /// The home position of hash `h`, or of an index entry (which keeps the same top bits).
    #[inline(always)]
    fn home(&self, h: u64) -> usize {
        // The top bits (the length is a power of two >= 2).
        (h >> (64 - self.index.len().trailing_zeros())) as usize
    }

    /// `(slot of key, position)` if monitored, else `(None, the empty position ending its
    /// probe)`. The index is at most a quarter full, so an empty position exists.
    #[inline(always)]
    fn find(&self, key: &impl HashInput, h: u64) -> (Option<u32>, usize) {
        let mask = self.index.len() - 1;
        let mut i = self.home(h);
        let tag = h >> 32;
        loop {
            let e = self.index[i];
            let id = slot_of(e);
            if id == NIL {
                return (None, i);
            }
            if e >> 32 == tag {
                let s = &self.slots[id as usize];
                if s.hash == h && s.key == key.to_key() {
                    return (Some(id), i);
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Take slot `id` (hash `h`, in the index) out of the index: backward shift, moving each
    /// later entry of the probe run into the hole when its home is not after the hole.
    fn unindex(&mut self, id: u32, h: u64) {
        let mask = self.index.len() - 1;
        let mut hole = self.home(h);
        while slot_of(self.index[hole]) != id {
            hole = (hole + 1) & mask;
        }
        let mut j = (hole + 1) & mask;
        loop {
            let other = self.index[j];
            if other == EMPTY {
                break;
            }
            let home = self.home(other);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.index[hole] = other;
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.index[hole] = EMPTY;
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    pub fn is_full(&self) -> bool {
        self.slots.len() >= self.cap
    }

    /// The smallest count when full, else 0: the most an unmonitored key can weigh.
    pub fn floor(&self) -> u64 {
        match self.buckets.get(self.min as usize) {
            Some(b) if self.is_full() => b.count,
            _ => 0,
        }
    }

    /// `(count, ε)` of a monitored key.
    pub fn get(&self, key: &FlowKey) -> Option<(u64, u64)> {
        let id = self.find(key, index_hash(key)).0?;
        let s = self.slots.get(id as usize)?;
        Some((self.count_of(s), s.err))
    }

    pub fn contains(&self, key: &FlowKey) -> bool {
        self.find(key, index_hash(key)).0.is_some()
    }

    /// `(key, count, ε)` of every monitored key, in slot order.
    pub fn entries(&self) -> impl Iterator<Item = (FlowKey, u64, u64)> + '_ {
        self.slots.iter().map(|s| (s.key, self.count_of(s), s.err))
    }

    pub fn clear(&mut self) {
        self.slots.clear();
        self.buckets.clear();
        self.free = NIL;
        self.min = NIL;
        self.max = NIL;
        self.index.iter_mut().for_each(|x| *x = EMPTY);
    }

    #[inline]
    fn count_of(&self, s: &Slot) -> u64 {
        self.buckets.get(s.bucket as usize).map_or(0, |b| b.count)
    }

    /// The Space-Saving step (ALGORITHMS.md 10; `w > 0`): a monitored key adds `w`; a new key
    /// takes a free slot with `(c, ε) = (w, 0)`, or else replaces a key of the minimum count
    /// `c_min` with `(c_min + w, c_min)`.
    /// The key comes as a `FlowKey` or (4-byte keys, `update_batch_u32`) as its big-endian
    /// u32, which hashes and compares as `FlowKey::from_u32` of it: the same slot either way.
    #[inline]
    pub fn offer(&mut self, key: &impl HashInput, w: u64) {
        let h = index_hash(key);
        match self.find(key, h) {
            (Some(s), _) => self.add(s, w),
            (None, pos) if !self.is_full() => {
                let s = self.push_slot(key, h, 0, pos);
                self.place(s, w, NIL);
            }
            (None, _) => {
                // Full, so the minimum bucket exists and holds a slot.
                let Some(&Bucket { count, first, .. }) = self.buckets.get(self.min as usize) else {
                    return;
                };
                let Some(&Slot { hash: old, .. }) = self.slots.get(first as usize) else {
                    return;
                };
                // Out first: the removal's shifts may open a place earlier on the new key's
                // probe run.
                self.unindex(first, old);
                let pos = self.find(key, h).1;
                self.index[pos] = entry(h, first);
                let slot = &mut self.slots[first as usize];
                (slot.hash, slot.key, slot.err) = (h, key.to_key(), count);
                self.add(first, w);
            }
        }
    }

    /// A new slot for `key` (hash `h`, not monitored, a free slot left) at index position `pos`
    /// (the empty one ending its probe); its bucket is the caller's to [`Self::place`].
    fn push_slot(&mut self, key: &impl HashInput, h: u64, err: u64, pos: usize) -> u32 {
        let s = self.slots.len() as u32;
        self.index[pos] = entry(h, s);
        self.slots.push(Slot {
            hash: h,
            key: key.to_key(),
            err,
            bucket: NIL,
            prev: NIL,
            next: NIL,
        });
        s
    }

    /// Add `w` to slot `s`'s count: detach it, then link it into the bucket of its new count,
    /// searching forward from its old bucket (or that bucket's predecessor if it emptied).
    fn add(&mut self, s: u32, w: u64) {
        let Some(&Slot { bucket: b, .. }) = self.slots.get(s as usize) else {
            return;
        };
        let Some(&old) = self.buckets.get(b as usize) else {
            return;
        };
        let c = old.count.saturating_add(w);
        if c == old.count {
            return;
        }
        // Alone in its bucket, and the next bucket's count above the new one: the bucket takes
        // the new count where it is. Detaching would free the bucket and linking would take it
        // back at the same place, so the structure ends the same; this skips the relinking, and
        // it is the common case of the hits (a heavy key's count is usually its own, and every
        // packet of a train of it lands here).
        let Slot { prev, next, .. } = self.slots[s as usize];
        if prev == NIL
            && next == NIL
            && self
                .buckets
                .get(old.next as usize)
                .is_none_or(|n| n.count > c)
        {
            self.buckets[b as usize].count = c;
            return;
        }
        let after = if self.detach(s) { old.prev } else { b };
        self.place(s, c, after);
    }

    /// Unlink slot `s` from its bucket; when that empties the bucket, unlink and free the bucket
    /// too (returns true).
    fn detach(&mut self, s: u32) -> bool {
        let Slot {
            bucket: b,
            prev,
            next,
            ..
        } = self.slots[s as usize];
        if prev != NIL {
            self.slots[prev as usize].next = next;
        } else {
            self.buckets[b as usize].first = next;
        }
        if next != NIL {
            self.slots[next as usize].prev = prev;
        }
        if self.buckets[b as usize].first != NIL {
            return false;
        }
        let Bucket { prev, next, .. } = self.buckets[b as usize];
        self.link(prev, next, next, prev);
        self.buckets[b as usize].next = self.free;
        self.free = b;
        true
    }

    /// Point bucket `prev`'s `next` (or `min` when `prev` is `NIL`) at `after_prev`, and bucket
    /// `next`'s `prev` (or `max`) at `before_next`: a bucket's insertion between the two, or
    /// (`after_prev = next`, `before_next = prev`) the removal of the one between them.
    fn link(&mut self, prev: u32, next: u32, after_prev: u32, before_next: u32) {
        match self.buckets.get_mut(prev as usize) {
            Some(b) => b.next = after_prev,
            None => self.min = after_prev,
        }
        match self.buckets.get_mut(next as usize) {
            Some(b) => b.prev = before_next,
            None => self.max = before_next,
        }
    }

    /// Link the detached slot `s` with count `c` into its bucket. `after` is a bucket of a count
    /// at most `c` (or `NIL`: search from the minimum); the buckets between it and `c`'s place
    /// are walked.
    fn place(&mut self, s: u32, c: u64, after: u32) {
        let (mut prev, mut next) = match self.buckets.get(after as usize) {
            None => (NIL, self.min),
            Some(a) if a.count < c => (after, a.next),
            Some(a) => (a.prev, after),
        };
        // A count above the largest goes last without a walk (a merge's ascending rebuild).
        if let Some(m) = self.buckets.get(self.max as usize) {
            if m.count < c {
                (prev, next) = (self.max, NIL);
            }
        }
        while next != NIL && self.buckets[next as usize].count < c {
            prev = next;
            next = self.buckets[next as usize].next;
        }
        let b = if next != NIL && self.buckets[next as usize].count == c {
            next
        } else {
            let nb = Bucket {
                count: c,
                first: NIL,
                prev,
                next,
            };
            let nb_id = if self.free != NIL {
                let f = self.free;
                self.free = self.buckets[f as usize].next;
                self.buckets[f as usize] = nb;
                f
            } else {
                self.buckets.push(nb);
                (self.buckets.len() - 1) as u32
            };
            self.link(prev, next, nb_id, nb_id);
            nb_id
        };
        // Push front: the slot replaced next at this count is the one linked last.
        let first = self.buckets[b as usize].first;
        if first != NIL {
            self.slots[first as usize].prev = s;
        }
        let slot = &mut self.slots[s as usize];
        slot.bucket = b;
        slot.prev = NIL;
        slot.next = first;
        self.buckets[b as usize].first = s;
    }

    /// A summary of capacity `cap` holding `entries` (at most `cap`, distinct keys): linked in
    /// ascending count order, each after the largest bucket so far, so no walk.
    fn from_entries(cap: usize, mut entries: Vec<(FlowKey, u64, u64)>) -> StreamSummary {
        entries.sort_unstable_by_key(|e| (e.1, e.0));
        let mut out = StreamSummary::new(cap);
        for (key, count, err) in entries {
            let h = index_hash(&key);
            let pos = out.find(&key, h).1;
            let s = out.push_slot(&key, h, err, pos);
            out.place(s, count, out.max);
        }
        out
    }

    /// The mergeable-summaries merge of `count_heap` (proof there; Agarwal et al., PODS'12):
    /// count and ε added key by key, a key missing from a full side taking that side's
    /// [`StreamSummary::floor`] as both, the `cap` largest counts kept (ties to the smaller key).
    pub fn merge(&mut self, other: &StreamSummary) {
        let (ma, mb) = (self.floor(), other.floor());
        let mut all: Vec<(FlowKey, u64, u64)> =
            Vec::with_capacity(self.slots.len() + other.slots.len());
        for (k, c, e) in self.entries() {
            let (oc, oe) = other.get(&k).unwrap_or((mb, mb));
            all.push((k, c.saturating_add(oc), e.saturating_add(oe)));
        }
        for (k, c, e) in other.entries() {
            if !self.contains(&k) {
                all.push((k, c.saturating_add(ma), e.saturating_add(ma)));
            }
        }
        if all.len() > self.cap {
            all.select_nth_unstable_by_key(self.cap, |e| (Reverse(e.1), e.0));
            all.truncate(self.cap);
        }
        *self = StreamSummary::from_entries(self.cap, all);
    }

    /// Every link consistent, buckets in strictly ascending count order, each non-empty, the map
    /// pointing at each key's slot (tests).
    #[cfg(test)]
    pub fn check(&self) {
        let mut seen = 0;
        let mut b = self.min;
        let mut prev_b = NIL;
        let mut last = None;
        while b != NIL {
            let bk = self.buckets[b as usize];
            assert_eq!(bk.prev, prev_b, "bucket back link");
            assert!(last.is_none_or(|l| l < bk.count), "bucket order");
            last = Some(bk.count);
            let mut s = bk.first;
            let mut prev_s = NIL;
            assert_ne!(s, NIL, "empty bucket in use");
            while s != NIL {
                let sl = self.slots[s as usize];
                assert_eq!((sl.bucket, sl.prev), (b, prev_s), "slot links");
                assert_eq!(self.find(&sl.key, sl.hash).0, Some(s), "index");
                assert_eq!(sl.hash, index_hash(&sl.key));
                seen += 1;
                prev_s = s;
                s = sl.next;
            }
            prev_b = b;
            b = bk.next;
        }
        assert_eq!(self.max, prev_b, "max bucket");
        assert_eq!(seen, self.slots.len(), "every slot in a bucket");
        assert_eq!(
            self.index.iter().filter(|&&x| x != EMPTY).count(),
            self.slots.len()
        );
        assert!(self.slots.len() <= self.cap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::{truth, zipf_keys};

    /// Against a plain model of Space-Saving's counts (a vector scanned for its minimum; which
    /// of several tied keys is replaced changes keys, not the multiset of counts): the multiset
    /// of counts matches the model's and sums to N, and the links stay consistent under unit
    /// and weighted updates, from k = 1 up.
    #[test]
    fn counts_match_a_scanned_model_and_links_hold() {
        let keys = zipf_keys(30_000, 5_000, 1.0, 41);
        for cap in [1usize, 2, 16, 128] {
            let mut s = StreamSummary::new(cap);
            let mut model: Vec<u64> = Vec::new();
            let mut n = 0u64;
            for (i, k) in keys.iter().enumerate() {
                let w = 1 + (i as u64 % 5) * (i as u64 % 2);
                let held = s.get(k).map(|(c, _)| c);
                match held {
                    Some(c) => {
                        let j = model.iter().position(|&m| m == c).unwrap();
                        model[j] += w;
                    }
                    None if model.len() < cap => model.push(w),
                    None => {
                        let j = (0..model.len()).min_by_key(|&j| model[j]).unwrap();
                        model[j] += w;
                    }
                }
                s.offer(k, w);
                n += w;
                if i % 997 == 0 {
                    s.check();
                }
            }
            s.check();
            let mut got: Vec<u64> = s.entries().map(|e| e.1).collect();
            got.sort_unstable();
            model.sort_unstable();
            assert_eq!(got, model, "cap {cap}");
            assert_eq!(got.iter().sum::<u64>(), n);
        }
    }

    /// Save and load give the same contents and a working structure (links rebuilt); broken
    /// saved states are refused with a reason.
    #[test]
    fn round_trip_and_bad_states() {
        let keys = zipf_keys(20_000, 3_000, 1.1, 42);
        let t = truth(&keys);
        let mut s = StreamSummary::new(64);
        keys.iter().for_each(|k| s.offer(k, 1));
        let bytes = serde_json::to_vec(&s).unwrap();
        let mut back: StreamSummary = serde_json::from_slice(&bytes).unwrap();
        back.check();
        assert_eq!(back, s);
        assert_eq!(back.floor(), s.floor());
        for k in keys.iter().take(2_000) {
            s.offer(k, 3);
            back.offer(k, 3);
        }
        back.check();
        let mut a: Vec<u64> = s.entries().map(|e| e.1).collect();
        let mut b: Vec<u64> = back.entries().map(|e| e.1).collect();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b);
        assert!(t.len() > 64);
        let k = |i: u32| FlowKey::from_u32(i);
        let bad = [
            Saved {
                cap: 0,
                entries: vec![],
            },
            Saved {
                cap: 1,
                entries: vec![(k(1), 5, 0), (k(2), 5, 0)],
            },
            Saved {
                cap: 4,
                entries: vec![(k(1), 5, 0), (k(1), 6, 0)],
            },
            Saved {
                cap: 4,
                entries: vec![(k(1), 5, 6)],
            },
        ];
        for b in bad {
            let bytes = serde_json::to_vec(&b).unwrap();
            assert!(serde_json::from_slice::<StreamSummary>(&bytes).is_err());
        }
    }

    /// Memory is allocated at construction and equals `bytes_for`.
    #[test]
    fn memory_is_what_bytes_for_says() {
        for cap in [1usize, 7, 128, 8192] {
            let s = StreamSummary::new(cap);
            assert_eq!(
                s.memory_bytes() as u64,
                StreamSummary::bytes_for(cap),
                "cap {cap}"
            );
        }
    }
}
