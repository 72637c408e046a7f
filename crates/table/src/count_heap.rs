//! Binary min-heap of (count, key, extra) with a key -> position map: the structure under the
//! Re-evaluating heap, Space-Saving and Misra-Gries (ALGORITHMS.md section 10).
//!
//! Pitfalls the digest lists, handled here: sift loops reach every index including the root,
//! swaps move whole entries and fix the map for both keys, and nothing is type-punned.
//!
//! [`CountHeap::merge`] is the mergeable-summaries merge of two Space-Saving summaries (Agarwal
//! et al., PODS'12 / TODS'13; Cafaro et al.'s parallel Space-Saving): counts added key by key, a
//! key missing from a full side inheriting that side's minimum, the k largest kept. Proof of the
//! bounds it keeps (`m_a`, `m_b` the sides' minima, 0 for a side that is not full):
//! - every candidate's count is at least `m_a + m_b`, so a key in neither side (`f <= m_a + m_b`)
//!   or dropped (`f <= c <=` the k-th largest) has `f <= c_min` of the result;
//! - the kept keys' share from side a is at most `sum c_a <= N_a`: the kept keys a does not hold
//!   are no more than the keys a holds that were not kept, each of which counts `>= m_a`; so
//!   `sum c <= N` and `c_min <= N/k` (equality `sum c = N` is lost: dropped candidates take
//!   their counts with them);
//! - a key's inherited `m` is also an upper bound of its size on that side, so `c - ε <= f <= c`
//!   holds with `ε` summed the same way (a held key's ε, or `m`); a side's ε are at most its `m`
//!   (ε is the minimum when the key came in, and minima only grow), so the result's ε are at
//!   most `m_a + m_b <= c_min`, and every count is over by at most `c_min` (the heap's bound).
//!
//! A side that is not full never evicted, so it holds its keys exactly; so does a merge of two
//! such sides, which is why a result that is not full needs no minimum.

use std::cmp::Reverse;

use key::{FlowKey, KeyMap};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry<X> {
    pub count: u64,
    pub key: FlowKey,
    pub extra: X,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct CountHeap<X> {
    cap: usize,
    heap: Vec<Entry<X>>,
    index: KeyMap<u32>,
}

impl<X: Copy> CountHeap<X> {
    pub fn new(cap: usize) -> CountHeap<X> {
        CountHeap {
            cap,
            heap: Vec::with_capacity(cap),
            index: KeyMap::with_capacity_and_hasher(cap, Default::default()),
        }
    }

    /// [`CountHeap::memory_bytes`] of `CountHeap::new(cap)`, without allocating: the entries at
    /// their capacity `cap` and the key index as allocated for `cap` keys. (Replacing keys
    /// leaves tombstones in the index; when they fill it, hashbrown may double it once.)
    pub fn bytes_for(cap: usize) -> u64 {
        cap as u64 * std::mem::size_of::<Entry<X>>() as u64
            + algo::Entry::map_capacity(cap as u64)
                * (std::mem::size_of::<(FlowKey, u32)>() as u64 + 1)
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    /// `Ok` when a loaded heap is one the verbs could have made: a capacity in `1..=max_cap`,
    /// at most that many entries in heap order (smallest count first), each key indexed at its
    /// position and nothing else indexed. A forged index sent `add` and `replace_min` past the
    /// entries; a forged capacity sized the entries' allocation on the next insert.
    pub fn check_loaded(&self, max_cap: usize) -> Result<(), String> {
        if self.cap == 0 || self.cap > max_cap || self.heap.len() > self.cap {
            return Err(format!(
                "{} entries for a capacity of {} (1..={max_cap})",
                self.heap.len(),
                self.cap
            ));
        }
        if self.index.len() != self.heap.len() {
            return Err(format!(
                "{} indexed keys for {} entries",
                self.index.len(),
                self.heap.len()
            ));
        }
        for (i, e) in self.heap.iter().enumerate() {
            if self.index.get(&e.key) != Some(&(i as u32)) {
                return Err(format!("key {} is indexed elsewhere", e.key));
            }
            if i > 0 && self.heap[(i - 1) / 2].count > e.count {
                return Err(format!("entry {i} is out of heap order"));
            }
        }
        Ok(())
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_full(&self) -> bool {
        self.heap.len() >= self.cap
    }

    pub fn entries(&self) -> &[Entry<X>] {
        &self.heap
    }

    pub fn min(&self) -> Option<&Entry<X>> {
        self.heap.first()
    }

    pub fn position(&self, key: &FlowKey) -> Option<usize> {
        self.index.get(key).map(|&i| i as usize)
    }

    pub fn get(&self, key: &FlowKey) -> Option<&Entry<X>> {
        self.position(key).and_then(|i| self.heap.get(i))
    }

    /// Add `w` to the count at `pos` (counts only grow, so sifting down suffices).
    pub fn add(&mut self, pos: usize, w: u64) {
        if let Some(e) = self.heap.get_mut(pos) {
            e.count = e.count.saturating_add(w);
            self.sift_down(pos);
        }
    }

    /// Insert a key that is not in the heap. Ignored when full.
    pub fn push(&mut self, e: Entry<X>) {
        if self.is_full() {
            return;
        }
        let i = self.heap.len();
        self.index.insert(e.key, i as u32);
        self.heap.push(e);
        self.sift_up(i);
    }

    /// Replace the minimum by `e` (a key not in the heap) whose count is at least the old
    /// minimum's. Returns the evicted entry.
    pub fn replace_min(&mut self, e: Entry<X>) -> Option<Entry<X>> {
        let root = self.heap.first_mut()?;
        let old = std::mem::replace(root, e);
        self.index.remove(&old.key);
        self.index.insert(e.key, 0);
        self.sift_down(0);
        Some(old)
    }

    pub fn pop_min(&mut self) -> Option<Entry<X>> {
        let last = self.heap.pop()?;
        let out = if let Some(root) = self.heap.first_mut() {
            let old = std::mem::replace(root, last);
            self.index.insert(last.key, 0);
            old
        } else {
            last
        };
        self.index.remove(&out.key);
        self.sift_down(0);
        Some(out)
    }

    /// The Space-Saving step (Metwally et al.; ALGORITHMS.md 10), shared by `space_saving` and
    /// the Re-evaluating paper's `heap` (which keeps no ε): a monitored key adds `w`; a new key
    /// takes a free slot with count `w`, or else replaces the minimum with count `min + w`.
    /// `extra(m)` is the new entry's extra field given the count `m` it inherits (0 for a free
    /// slot).
    pub fn offer(&mut self, key: &FlowKey, w: u64, extra: impl FnOnce(u64) -> X) {
        if let Some(p) = self.position(key) {
            self.add(p, w);
        } else if !self.is_full() {
            self.push(Entry {
                count: w,
                key: *key,
                extra: extra(0),
            });
        } else {
            let min = self.min().map_or(0, |e| e.count);
            self.replace_min(Entry {
                count: min.saturating_add(w),
                key: *key,
                extra: extra(min),
            });
        }
    }

    pub fn clear(&mut self) {
        self.heap.clear();
        self.index.clear();
    }

    /// The smallest count when full, else 0: the most an unmonitored key can weigh (module
    /// docs).
    pub fn floor(&self) -> u64 {
        if self.is_full() {
            self.min().map_or(0, |e| e.count)
        } else {
            0
        }
    }

    /// Merge `other` (same capacity) into `self` (module docs): each key's count is the sum of
    /// both sides' counts, a key missing from one side taking that side's [`CountHeap::floor`]
    /// `m`; its extra is `plus` of both sides' extras, a missing side's being `inherit(m)`. The
    /// `cap` largest counts are kept (ties to the smaller key), and heap and map are rebuilt:
    /// the result depends on the two summaries' contents, not their layouts.
    pub fn merge(
        &mut self,
        other: &CountHeap<X>,
        inherit: impl Fn(u64) -> X,
        plus: impl Fn(X, X) -> X,
    ) {
        let (ma, mb) = (self.floor(), other.floor());
        let mut all: Vec<Entry<X>> = Vec::with_capacity(self.heap.len() + other.heap.len());
        for e in &self.heap {
            let (c, x) = match other.get(&e.key) {
                Some(o) => (o.count, o.extra),
                None => (mb, inherit(mb)),
            };
            all.push(Entry {
                count: e.count.saturating_add(c),
                key: e.key,
                extra: plus(e.extra, x),
            });
        }
        for o in &other.heap {
            if self.index.contains_key(&o.key) {
                continue;
            }
            all.push(Entry {
                count: o.count.saturating_add(ma),
                key: o.key,
                extra: plus(inherit(ma), o.extra),
            });
        }
        if all.len() > self.cap {
            all.select_nth_unstable_by_key(self.cap, |e| (Reverse(e.count), e.key));
            all.truncate(self.cap);
        }
        // Ascending counts are a valid min-heap: no sifting, one map insert per entry.
        all.sort_unstable_by_key(|e| (e.count, e.key));
        self.clear();
        for (i, e) in all.into_iter().enumerate() {
            self.index.insert(e.key, i as u32);
            self.heap.push(e);
        }
    }

    pub fn memory_bytes(&self) -> usize {
        self.heap.capacity() * std::mem::size_of::<Entry<X>>()
            + self.index.capacity() * (std::mem::size_of::<(FlowKey, u32)>() + 1)
    }

    fn set_index(&mut self, key: &FlowKey, pos: usize) {
        if let Some(slot) = self.index.get_mut(key) {
            *slot = pos as u32;
        }
    }

    // Both sifts move a "hole" instead of swapping: each level moves one entry and rewrites one
    // map slot, the sifted entry is written once at the end (half the map updates of swaps).

    fn sift_up(&mut self, mut i: usize) {
        let Some(&e) = self.heap.get(i) else {
            return;
        };
        while i > 0 {
            let parent = (i - 1) / 2;
            let p = self.heap[parent];
            if p.count <= e.count {
                break;
            }
            self.heap[i] = p;
            self.set_index(&p.key, i);
            i = parent;
        }
        self.heap[i] = e;
        self.set_index(&e.key, i);
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        let Some(&e) = self.heap.get(i) else {
            return;
        };
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            if l >= n {
                break;
            }
            let m = if r < n && self.heap[r].count < self.heap[l].count {
                r
            } else {
                l
            };
            let c = self.heap[m];
            if c.count >= e.count {
                break;
            }
            self.heap[i] = c;
            self.set_index(&c.key, i);
            i = m;
        }
        self.heap[i] = e;
        self.set_index(&e.key, i);
    }

    /// Heap order and map consistency (tests).
    #[cfg(test)]
    pub fn check(&self) {
        for i in 1..self.heap.len() {
            assert!(
                self.heap[(i - 1) / 2].count <= self.heap[i].count,
                "heap order at {i}"
            );
        }
        assert_eq!(self.index.len(), self.heap.len());
        for (i, e) in self.heap.iter().enumerate() {
            assert_eq!(self.index.get(&e.key), Some(&(i as u32)));
        }
    }
}

/// Test support for the merges of `space_saving` and `heap`.
#[cfg(test)]
pub(crate) mod testing {
    use algo::Estimate;
    use key::{FlowKey, HashFn, KeyMap};

    /// `keys` split into `parts` streams: by a seeded hash of the key (a flow lives in one part,
    /// as `--workers` dispatches) or round-robin (every large flow in every part).
    pub fn split(keys: &[FlowKey], parts: usize, by_key: bool) -> Vec<Vec<FlowKey>> {
        let h = HashFn::new(0x5eed);
        let mut out = vec![Vec::new(); parts];
        for (i, k) in keys.iter().enumerate() {
            let p = if by_key {
                key::reduce(h.hash(k), parts)
            } else {
                i % parts
            };
            out[p].push(*k);
        }
        out
    }

    /// Merges `parts` into one: in order for 2 and 3 parts, as a tree for 4 (`(0 + 1) + (2 + 3)`,
    /// so a merged summary is merged again).
    pub fn merge_all<A: algo::Algorithm>(mut parts: Vec<A>) -> A {
        if parts.len() == 4 {
            let d = parts.pop().unwrap();
            let mut c = parts.pop().unwrap();
            c.merge(&d).unwrap();
            parts.push(c);
        }
        let mut it = parts.into_iter();
        let mut m = it.next().unwrap();
        for o in it {
            m.merge(&o).unwrap();
        }
        m
    }

    /// The F1 score of `reported` against the keys of `truth` with `f >= threshold`, after
    /// checking that every one of those is reported (recall 1).
    pub fn f1_all_found(reported: &[Estimate], truth: &KeyMap<u64>, threshold: u64) -> f64 {
        let want: Vec<&FlowKey> = truth
            .iter()
            .filter(|e| *e.1 >= threshold)
            .map(|e| e.0)
            .collect();
        let got: KeyMap<u64> = reported.iter().copied().collect();
        for k in &want {
            assert!(got.contains_key(k), "heavy hitter {k} not reported");
        }
        let hits = reported
            .iter()
            .filter(|e| truth.get(&e.0).is_some_and(|&f| f >= threshold))
            .count();
        2.0 * hits as f64 / (reported.len() + want.len()).max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_add_replace_pop_keep_order_and_map() {
        let mut h: CountHeap<()> = CountHeap::new(8);
        let e = |c: u64, k: u32| Entry {
            count: c,
            key: FlowKey::from_u32(k),
            extra: (),
        };
        for (i, c) in [5u64, 3, 9, 1, 7, 2, 8, 4].into_iter().enumerate() {
            h.push(e(c, i as u32));
            h.check();
        }
        h.push(e(100, 100)); // full: ignored
        assert_eq!(h.len(), 8);
        assert_eq!(h.min().unwrap().count, 1);
        let p = h.position(&FlowKey::from_u32(3)).unwrap();
        h.add(p, 10);
        h.check();
        assert_eq!(h.min().unwrap().count, 2);
        let old = h.replace_min(e(6, 50)).unwrap();
        assert_eq!(old.count, 2);
        assert!(h.get(&old.key).is_none());
        h.check();
        let mut popped = Vec::new();
        while let Some(x) = h.pop_min() {
            h.check();
            popped.push(x.count);
        }
        assert_eq!(popped, vec![3, 4, 5, 6, 7, 8, 9, 11]);
    }

    #[test]
    fn merge_by_hand() {
        let k = FlowKey::from_u32;
        let e = |c: u64, key: u32, eps: u64| Entry {
            count: c,
            key: k(key),
            extra: eps,
        };
        let heap = |cap: usize, es: &[Entry<u64>]| {
            let mut h: CountHeap<u64> = CountHeap::new(cap);
            es.iter().for_each(|&x| h.push(x));
            h
        };
        let merged = |a: &CountHeap<u64>, b: &CountHeap<u64>| {
            let mut m = a.clone();
            m.merge(b, |min| min, |x, y| x + y);
            m.check();
            let mut v: Vec<(u32, u64, u64)> = m
                .entries()
                .iter()
                .map(|e| (e.key.prefix_u32(), e.count, e.extra))
                .collect();
            v.sort_unstable();
            v
        };
        // Both full (minima 3 and 1): x = 5 + 1 (eps 0 + 0), y = 3 + 1 (1 + 1), z = 4 + 3
        // (2 + 3); the two largest, z and x, are kept.
        let a = heap(2, &[e(5, 1, 0), e(3, 2, 1)]);
        let b = heap(2, &[e(1, 1, 0), e(4, 3, 2)]);
        assert_eq!(merged(&a, &b), vec![(1, 6, 0), (3, 7, 5)]);
        assert_eq!(merged(&b, &a), vec![(1, 6, 0), (3, 7, 5)]);
        // A side that is not full is exact: its missing keys inherit 0.
        let c = heap(2, &[e(2, 1, 0)]);
        assert_eq!(merged(&c, &b), vec![(1, 3, 0), (3, 4, 2)]);
        // Ties at the cut keep the smaller key.
        let d = heap(2, &[e(2, 7, 0), e(2, 5, 0)]);
        let f = heap(2, &[e(2, 6, 0), e(2, 8, 0)]);
        assert_eq!(merged(&d, &f), vec![(5, 4, 2), (6, 4, 2)]);
    }
}
