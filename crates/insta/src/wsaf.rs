//! The working set of active flows (InstaMeasure section III-B, Fig. 2b): a table of
//! `2^n` slots of (flow hash, packets, bytes, first and last time, shard) plus the full key.
//!
//! Probing is quadratic, `h(k, i) = h(k) + (i + i^2) / 2 mod 2^n` (the paper's
//! `hash(k) + 0.5 i + 0.5 i^2`: triangular numbers visit every slot of a power-of-two table), for
//! at most `probe_limit` slots. Slots are never emptied (only replaced), so the first empty slot
//! on a key's path ends a lookup. When the `probe_limit` slots of a new key's path are all
//! taken, second-chance replacement picks the victim: every slot passed has its referenced bit
//! cleared, and the victim is the smallest (by packets) of those that were not referenced, or the
//! smallest of all when every one was. A slot is referenced when an existing flow is updated, so a
//! flow still growing survives a pass, and a mouse inserted once gives way first. An insertion
//! costs at most `probe_limit` probes, full or not (RFlow+'s insert looped when the table was
//! full). Counts saturate instead of wrapping.
//!
//! Time: an algorithm sees keys and weights, not packets, so `first` and `last` are the update
//! index (the instance's packet count, saturating at `u32::MAX`) at the flow's first and latest
//! emission, not capture time.

use key::FlowKey;
use serde::{Deserialize, Serialize};

/// One slot. `packets == 0` marks an empty slot (every emission carries at least one packet).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[repr(C)]
pub struct Slot {
    /// High 32 bits of the flow's hash: most mismatches are told without reading the key.
    pub hash: u32,
    pub packets: u32,
    /// In the run's weight (bytes, or packets when the run counts packets).
    pub bytes: u64,
    pub first: u32,
    pub last: u32,
    /// Which merged regulator holds the rest of this flow (0 unless merged).
    pub shard: u16,
    pub referenced: bool,
    /// Instant detection reported this flow in this epoch (`crate::instant`): it is reported
    /// once (a flow replaced and counted again from its next emission may be reported again).
    pub reported: bool,
    /// Instant detection's count of the flow, in 1/64 packets (`crate::instant`): the packets
    /// of the emission that inserted it, plus one L1 unit per L1 saturation since; 0 in an
    /// instance that is not armed.
    pub fine: u32,
}

/// Bytes of a slot (the key's bytes come on top).
pub const SLOT_BYTES: usize = std::mem::size_of::<Slot>();
const _: () = assert!(SLOT_BYTES == 32);

/// What an insertion did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Updated,
    Inserted,
    /// A new flow took the slot of one of this many packets.
    Replaced(u32),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Wsaf {
    mask: usize,
    probe_limit: usize,
    /// Bytes per stored key: a length byte and up to `key_len` bytes.
    key_stride: usize,
    slots: Vec<Slot>,
    keys: Vec<u8>,
    len: usize,
    evictions: u64,
    /// The largest flow (packets) replaced since the last reset.
    max_evicted: u32,
}

impl Wsaf {
    /// `entries` (a power of two) slots for keys of up to `key_len` bytes.
    pub fn new(entries: usize, probe_limit: usize, key_len: usize) -> Wsaf {
        debug_assert!(entries.is_power_of_two());
        let key_stride = key_len + 1;
        Wsaf {
            mask: entries - 1,
            probe_limit: probe_limit.min(entries),
            key_stride,
            slots: vec![Slot::default(); entries],
            keys: vec![0; entries * key_stride],
            len: 0,
            evictions: 0,
            max_evicted: 0,
        }
    }

    /// Bytes of a table of `entries` slots for keys of up to `key_len` bytes.
    pub fn bytes_for(entries: usize, key_len: usize) -> usize {
        entries * (SLOT_BYTES + key_len + 1)
    }

    pub fn memory_bytes(&self) -> usize {
        self.slots.len() * SLOT_BYTES + self.keys.len()
    }

    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    pub fn max_evicted(&self) -> u32 {
        self.max_evicted
    }

    #[inline]
    fn pos(&self, h: u64, i: usize) -> usize {
        // The low 9 bits pick the regulator's vector and the high bits its word: the table takes
        // the bits between.
        ((h >> 9) as usize).wrapping_add((i + i * i) / 2) & self.mask
    }

    fn key_at(&self, p: usize) -> &[u8] {
        let k = &self.keys[p * self.key_stride..(p + 1) * self.key_stride];
        &k[1..1 + k[0] as usize]
    }

    fn set_key(&mut self, p: usize, key: &FlowKey) {
        let b = key.as_bytes();
        let k = &mut self.keys[p * self.key_stride..(p + 1) * self.key_stride];
        k[0] = b.len() as u8;
        k[1..1 + b.len()].copy_from_slice(b);
    }

    /// Whether `key` fits the table's keys.
    pub fn fits(&self, key: &FlowKey) -> bool {
        key.len() < self.key_stride
    }

    /// The slot of `key` (hash `h`), if stored.
    pub fn get(&self, key: &FlowKey, h: u64) -> Option<&Slot> {
        self.find(key, h).map(|p| &self.slots[p])
    }

    /// The slot of `key` (hash `h`), if stored, to change its flags.
    pub fn get_mut(&mut self, key: &FlowKey, h: u64) -> Option<&mut Slot> {
        self.find(key, h).map(|p| &mut self.slots[p])
    }

    fn find(&self, key: &FlowKey, h: u64) -> Option<usize> {
        let tag = (h >> 32) as u32;
        for i in 0..self.probe_limit {
            let p = self.pos(h, i);
            let s = &self.slots[p];
            if s.packets == 0 {
                return None;
            }
            if s.hash == tag && self.key_at(p) == key.as_bytes() {
                return Some(p);
            }
        }
        None
    }

    /// Add `packets` and `bytes` to `key` (hash `h`) at time `now`, inserting it (possibly in
    /// place of a victim) when absent. `add.first`, `add.shard` are used for a new slot only.
    /// `packets` must be at least 1. A key that does not fit is not stored (the instance's
    /// `KeyFit` keeps such keys away).
    pub fn add(&mut self, key: &FlowKey, h: u64, add: Slot) -> Outcome {
        debug_assert!(add.packets >= 1);
        let tag = (h >> 32) as u32;
        for i in 0..self.probe_limit {
            let p = self.pos(h, i);
            let s = self.slots[p];
            if s.packets == 0 {
                self.slots[p] = Slot {
                    hash: tag,
                    referenced: false,
                    ..add
                };
                self.set_key(p, key);
                self.len += 1;
                return Outcome::Inserted;
            }
            if s.hash == tag && self.key_at(p) == key.as_bytes() {
                let s = &mut self.slots[p];
                s.packets = s.packets.saturating_add(add.packets);
                s.bytes = s.bytes.saturating_add(add.bytes);
                s.first = s.first.min(add.first);
                s.last = s.last.max(add.last);
                s.referenced = true;
                return Outcome::Updated;
            }
        }
        // Full path: second chance (module docs).
        let (mut victim, mut best_unref, mut best_any) = (usize::MAX, u32::MAX, (u32::MAX, 0));
        for i in 0..self.probe_limit {
            let p = self.pos(h, i);
            let s = &mut self.slots[p];
            if s.packets < best_any.0 {
                best_any = (s.packets, p);
            }
            if s.referenced {
                s.referenced = false;
            } else if s.packets < best_unref {
                best_unref = s.packets;
                victim = p;
            }
        }
        if victim == usize::MAX {
            victim = best_any.1;
        }
        let gone = self.slots[victim].packets;
        self.evictions += 1;
        self.max_evicted = self.max_evicted.max(gone);
        self.slots[victim] = Slot {
            hash: tag,
            referenced: false,
            ..add
        };
        self.set_key(victim, key);
        Outcome::Replaced(gone)
    }

    /// Every stored flow with its slot.
    pub fn iter(&self) -> impl Iterator<Item = (FlowKey, &Slot)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.packets != 0)
            .map(|(p, s)| {
                (
                    FlowKey::from_bytes(self.key_at(p)).expect("stored keys are valid"),
                    s,
                )
            })
    }

    pub fn reset(&mut self) {
        self.slots.fill(Slot::default());
        self.keys.fill(0);
        self.len = 0;
        self.evictions = 0;
        self.max_evicted = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(i: u32) -> FlowKey {
        FlowKey::from_u32(i)
    }

    fn h(i: u32) -> u64 {
        key::HashFn::new(9).hash(&k(i))
    }

    fn one(packets: u32) -> Slot {
        Slot {
            packets,
            bytes: u64::from(packets) * 100,
            ..Slot::default()
        }
    }

    #[test]
    fn quadratic_probing_visits_every_slot() {
        let t = Wsaf::new(1 << 10, 1 << 10, 4);
        let mut seen = vec![false; 1 << 10];
        for i in 0..1 << 10 {
            seen[t.pos(12345 << 9, i)] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn adds_and_finds() {
        let mut t = Wsaf::new(64, 8, 4);
        assert_eq!(t.add(&k(1), h(1), one(3)), Outcome::Inserted);
        assert_eq!(t.add(&k(1), h(1), one(4)), Outcome::Updated);
        let s = t.get(&k(1), h(1)).unwrap();
        assert_eq!((s.packets, s.bytes, s.referenced), (7, 700, true));
        assert!(t.get(&k(2), h(2)).is_none());
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn counts_saturate() {
        let mut t = Wsaf::new(16, 4, 4);
        t.add(
            &k(1),
            h(1),
            Slot {
                packets: u32::MAX - 1,
                bytes: u64::MAX - 1,
                ..Slot::default()
            },
        );
        t.add(&k(1), h(1), one(5));
        let s = t.get(&k(1), h(1)).unwrap();
        assert_eq!((s.packets, s.bytes), (u32::MAX, u64::MAX));
    }

    /// A full table keeps taking insertions in bounded time, never holds more than its slots,
    /// and keeps the flows that keep growing: 64 slots, 20 elephants updated every round, 100 k
    /// mice seen once each.
    #[test]
    fn a_full_table_keeps_working_and_keeps_the_largest() {
        let mut t = Wsaf::new(64, 16, 4);
        let elephants: Vec<u32> = (0..20).collect();
        for round in 0..5000u32 {
            for &e in &elephants {
                t.add(&k(e), h(e), one(70));
            }
            for m in 0..20 {
                let m = 1_000_000 + round * 20 + m;
                t.add(&k(m), h(m), one(70));
            }
        }
        assert_eq!(t.len(), 64);
        assert_eq!(t.iter().count(), 64);
        assert!(t.evictions() > 90_000);
        for &e in &elephants {
            let s = t
                .get(&k(e), h(e))
                .unwrap_or_else(|| panic!("elephant {e} evicted"));
            // Every update counted: 5000 rounds of 70.
            assert_eq!(s.packets, 5000 * 70, "elephant {e}");
        }
    }
}
