//! The hash table both fast paths keep their at most k flows in: a dense array of entries (the
//! kick-out pass of Algorithm 1 lines 13-16 walks it front to back) and an open-addressing index
//! over it (linear probing, at most half full), rebuilt after a pass removes entries.
//!
//! Each entry keeps its key's hash, so rebuilding is O(k) integer work, no hashing: the same
//! order as the pass itself, and it spares the hot path tombstones. The hot path is one xxh3 of
//! the key (`key::HashFn`), one probe on average, one hash compare and one key compare.

use key::{FlowKey, HashFn};

/// The slot value of an empty index slot (entries are numbered from 0, stored as `i + 1`).
const EMPTY: u32 = 0;

#[derive(Clone, Debug)]
pub(crate) struct Table<V> {
    pub(crate) keys: Vec<FlowKey>,
    pub(crate) vals: Vec<V>,
    hashes: Vec<u64>,
    slots: Vec<u32>,
    mask: usize,
    cap: usize,
    hash: HashFn,
}

/// Where a key is, or where it would go.
pub(crate) enum Probe {
    Hit(usize),
    /// Index slot to fill on insertion, and the key's hash.
    Miss(usize, u64),
}

impl<V: Copy> Table<V> {
    pub(crate) fn new(cap: usize, hash: HashFn) -> Table<V> {
        // At most half full: an unsuccessful probe then reads 2.5 slots on average (Knuth).
        let slots = (2 * cap.max(1)).next_power_of_two();
        Table {
            keys: Vec::with_capacity(cap),
            vals: Vec::with_capacity(cap),
            hashes: Vec::with_capacity(cap),
            slots: vec![EMPTY; slots],
            mask: slots - 1,
            cap,
            hash,
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    #[inline]
    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.keys.len() >= self.cap
    }

    #[inline]
    pub(crate) fn probe(&self, key: &FlowKey) -> Probe {
        let h = self.hash.hash(key);
        let mut i = (h as usize) & self.mask;
        loop {
            let s = self.slots[i];
            if s == EMPTY {
                return Probe::Miss(i, h);
            }
            let e = (s - 1) as usize;
            if self.hashes[e] == h && self.keys[e] == *key {
                return Probe::Hit(e);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Insert a key known to be absent at the slot its probe returned. The caller checked
    /// `!is_full()`.
    #[inline]
    pub(crate) fn insert_at(&mut self, slot: usize, h: u64, key: FlowKey, v: V) {
        debug_assert!(!self.is_full());
        self.keys.push(key);
        self.vals.push(v);
        self.hashes.push(h);
        self.slots[slot] = self.keys.len() as u32;
    }

    /// Insert a key known to be absent.
    pub(crate) fn insert(&mut self, key: FlowKey, v: V) {
        if let Probe::Miss(s, h) = self.probe(&key) {
            self.insert_at(s, h, key, v);
        }
    }

    /// Keep the entries `keep` says to keep (in order), then rebuild the index. Returns how
    /// many were removed.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&mut V) -> bool) -> usize {
        let n = self.keys.len();
        let mut w = 0;
        for i in 0..n {
            if keep(&mut self.vals[i]) {
                self.keys[w] = self.keys[i];
                self.vals[w] = self.vals[i];
                self.hashes[w] = self.hashes[i];
                w += 1;
            }
        }
        self.keys.truncate(w);
        self.vals.truncate(w);
        self.hashes.truncate(w);
        if w < n {
            self.reindex();
        }
        n - w
    }

    fn reindex(&mut self) {
        self.slots.iter_mut().for_each(|s| *s = EMPTY);
        for e in 0..self.keys.len() {
            let mut i = (self.hashes[e] as usize) & self.mask;
            while self.slots[i] != EMPTY {
                i = (i + 1) & self.mask;
            }
            self.slots[i] = e as u32 + 1;
        }
    }

    pub(crate) fn clear(&mut self) {
        self.keys.clear();
        self.vals.clear();
        self.hashes.clear();
        self.slots.iter_mut().for_each(|s| *s = EMPTY);
    }

    /// Bytes allocated (keys, values, hashes, index).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.cap * (std::mem::size_of::<FlowKey>() + std::mem::size_of::<V>() + 8)
            + self.slots.len() * 4
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&FlowKey, &V)> {
        self.keys.iter().zip(&self.vals)
    }
}
