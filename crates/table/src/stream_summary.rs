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
//! Saving, loading, equality and the merge are `summary`'s, on the contents.

use key::{FlowKey, HashInput};

use crate::slot_index::{index_hash, SlotIndex, NIL};

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

#[derive(Clone, Debug)]
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
    /// Key -> slot.
    index: SlotIndex,
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
            index: SlotIndex::new(cap),
        }
    }

    /// [`StreamSummary::memory_bytes`] of `StreamSummary::new(cap)` without allocating: `cap`
    /// slots and buckets and the index, all allocated at construction and never grown.
    pub fn bytes_for(cap: usize) -> u64 {
        cap as u64 * (std::mem::size_of::<Slot>() + std::mem::size_of::<Bucket>()) as u64
            + SlotIndex::bytes_for(cap)
    }

    pub fn memory_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot>()
            + self.buckets.capacity() * std::mem::size_of::<Bucket>()
            + self.index.memory_bytes()
    }

    /// `(slot of key, position)` if monitored, else `(None, the empty position ending its
    /// probe)`.
    #[inline(always)]
    fn find(&self, key: &impl HashInput, h: u64) -> (Option<u32>, usize) {
        self.index.find(h, |id| {
            let s = &self.slots[id as usize];
            s.hash == h && s.key == key.to_key()
        })
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
        self.index.clear();
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
            (None, pos) => {
                // Full, so the minimum bucket exists and holds a slot.
                let Some(&Bucket { count, first, .. }) = self.buckets.get(self.min as usize) else {
                    return;
                };
                let Some(&Slot { hash: old, .. }) = self.slots.get(first as usize) else {
                    return;
                };
                self.index.rekey(first, old, h, pos);
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
        self.index.set(pos, h, s);
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
    pub fn from_entries(cap: usize, mut entries: Vec<(FlowKey, u64, u64)>) -> StreamSummary {
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
        assert_eq!(self.index.used(), self.slots.len());
        assert!(self.slots.len() <= self.cap);
    }
}
