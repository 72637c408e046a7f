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
//! Time: `first` and `last` are the capture times (ns) of the packets whose emissions inserted
//! the flow into its slot and last added to it (`Wsaf::times`), when the instance is given
//! times (`Algorithm::update_timed`; the runner gives them with no accelerator in front). The
//! packets a flow sends before its first emission stay in the regulator, which keeps no times,
//! so `first` is the time of the packet that saturated the last layer the first time (for a
//! lone flow about its 95th packet with two layers, its 10th with one), not of the flow's first
//! packet; a flow replaced and inserted again starts a new `first`. Times are stored in 48 bits
//! as offsets from the table's base (the first time it stored, less 2^46 ns, about 19.5 hours of
//! slack for a trace whose times go back): 78 hours of range, clamped at its ends, so the slot
//! stays 32 bytes (the paper's entry has one 64-bit timestamp).

use key::FlowKey;
use serde::{Deserialize, Serialize};

/// One slot. `packets == 0` marks an empty slot (every emission carries at least one packet).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[repr(C)]
pub struct Slot {
    /// High 16 bits of the flow's hash: most mismatches are told without reading the key.
    hash: u16,
    /// The shard (low 14 bits), `referenced` (bit 14) and `reported` (bit 15).
    flags: u16,
    pub packets: u32,
    /// In the run's weight (bytes, or packets when the run counts packets).
    pub bytes: u64,
    /// Instant detection's count of the flow, in 1/64 packets (`crate::instant`): the packets
    /// of the emission that inserted it, plus one L1 unit per L1 saturation since; 0 in an
    /// instance that is not armed.
    pub fine: u32,
    /// First and last time as 48-bit offsets from the table's base plus 1 (0: no time): the
    /// low 32 bits of each, then the high 16 bits of both (module docs).
    first_lo: u32,
    last_lo: u32,
    hi: u32,
}

/// Bytes of a slot (the key's bytes come on top).
pub const SLOT_BYTES: usize = std::mem::size_of::<Slot>();
const _: () = assert!(SLOT_BYTES == 32);

/// Merged shards a slot can name (14 bits of `Slot::flags`).
pub const MAX_SHARDS: usize = 1 << 14;
const SHARD_MASK: u16 = (MAX_SHARDS - 1) as u16;
const REFERENCED: u16 = 1 << 14;
const REPORTED: u16 = 1 << 15;
/// Largest stored time offset (48 bits).
const MAX_OFFSET: u64 = (1 << 48) - 1;
/// How far before its first time the table's base is put: times up to this much earlier than
/// the first one stored are kept exactly.
const SLACK_NS: u64 = 1 << 46;

impl Slot {
    /// Which merged regulator holds the rest of this flow (0 unless merged).
    pub fn shard(&self) -> u16 {
        self.flags & SHARD_MASK
    }

    /// Updated since second-chance replacement last passed it.
    pub fn referenced(&self) -> bool {
        self.flags & REFERENCED != 0
    }

    /// Instant detection reported this flow in this epoch (`crate::instant`): it is reported
    /// once (a flow replaced and counted again from its next emission may be reported again).
    pub fn reported(&self) -> bool {
        self.flags & REPORTED != 0
    }

    pub fn set_reported(&mut self) {
        self.flags |= REPORTED;
    }

    fn set_referenced(&mut self, on: bool) {
        self.flags = (self.flags & !REFERENCED) | if on { REFERENCED } else { 0 };
    }

    /// The stored offsets (0: none).
    fn offsets(&self) -> (u64, u64) {
        (
            u64::from(self.first_lo) | u64::from(self.hi & 0xffff) << 32,
            u64::from(self.last_lo) | u64::from(self.hi >> 16) << 32,
        )
    }

    fn set_offsets(&mut self, first: u64, last: u64) {
        self.first_lo = first as u32;
        self.last_lo = last as u32;
        self.hi = (first >> 32) as u32 & 0xffff | ((last >> 32) as u32) << 16;
    }
}

/// What an emission (or a merged slot) adds to a flow.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Add {
    /// At least 1.
    pub packets: u32,
    pub bytes: u64,
    /// First and last capture time (ns) of what is added, if the instance is given times.
    pub times: Option<(u64, u64)>,
    /// For a new slot only: instant detection's count, the shard, whether it was reported.
    pub fine: u32,
    pub shard: u16,
    pub reported: bool,
}

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
    /// What stored time offsets count from (module docs); `None` until a time is stored.
    base: Option<u64>,
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
            base: None,
        }
    }

    /// `Ok` when a loaded table is one `new(entries, probe_limit, key_len)` and its verbs could
    /// have made: its mask, probe limit and key stride those, whole slot and key arrays, `len`
    /// the occupied slots, each occupied slot's key length within the stride and its shard
    /// below `shards` (a forged stride or mask made the probes slice past the arrays).
    pub fn check(
        &self,
        entries: usize,
        probe_limit: usize,
        key_len: usize,
        shards: usize,
    ) -> Result<(), String> {
        let stride = key_len + 1;
        if self.mask != entries - 1
            || self.probe_limit != probe_limit.min(entries)
            || self.key_stride != stride
            || self.slots.len() != entries
            || self.keys.len() != entries * stride
        {
            return Err(format!(
                "table of {} slots and {} key bytes (mask {}, probe limit {}, key stride {}), the \
                 configuration has {entries} slots of {stride} key bytes",
                self.slots.len(),
                self.keys.len(),
                self.mask,
                self.probe_limit,
                self.key_stride
            ));
        }
        let mut used = 0;
        for (p, s) in self.slots.iter().enumerate() {
            if s.packets == 0 {
                continue;
            }
            used += 1;
            if usize::from(self.keys[p * stride]) > key_len || usize::from(s.shard()) >= shards {
                return Err(format!(
                    "slot {p} holds a key of {} bytes or shard {}",
                    self.keys[p * stride],
                    s.shard()
                ));
            }
        }
        if used != self.len {
            return Err(format!(
                "{used} occupied slots, the table counts {}",
                self.len
            ));
        }
        Ok(())
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

    /// The capture times (ns) of slot `s`, first and last (module docs), if it has any.
    pub fn times(&self, s: &Slot) -> Option<(u64, u64)> {
        let (f, l) = s.offsets();
        let base = self.base?;
        // Saturating: a loaded table's base may be anything (the offsets are 48 bits).
        (f != 0).then(|| {
            (
                base.saturating_add(f - 1),
                base.saturating_add(l.saturating_sub(1)),
            )
        })
    }

    /// The stored offset of time `t` (setting the base at the first).
    fn offset(&mut self, t: u64) -> u64 {
        let base = *self.base.get_or_insert(t.saturating_sub(SLACK_NS));
        (t.saturating_sub(base) + 1).min(MAX_OFFSET)
    }

    /// The slot of `key` (hash `h`), if stored, to change its flags.
    pub fn get_mut(&mut self, key: &FlowKey, h: u64) -> Option<&mut Slot> {
        self.find(key, h).map(|p| &mut self.slots[p])
    }

    fn find(&self, key: &FlowKey, h: u64) -> Option<usize> {
        let tag = (h >> 48) as u16;
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

    /// The slot `add` makes for a new flow of tag `tag`.
    fn fresh(&mut self, tag: u16, add: &Add) -> Slot {
        let mut s = Slot {
            hash: tag,
            flags: add.shard & SHARD_MASK | if add.reported { REPORTED } else { 0 },
            packets: add.packets,
            bytes: add.bytes,
            fine: add.fine,
            ..Slot::default()
        };
        if let Some((f, l)) = add.times {
            let (f, l) = (self.offset(f), self.offset(l));
            s.set_offsets(f, l);
        }
        s
    }

    /// Add `add`'s packets and bytes to `key` (hash `h`), inserting it (possibly in place of a
    /// victim) when absent; its times widen the slot's first and last. A key that does not fit
    /// is not stored (the instance's `KeyFit` keeps such keys away).
    pub fn add(&mut self, key: &FlowKey, h: u64, add: Add) -> Outcome {
        debug_assert!(add.packets >= 1);
        let tag = (h >> 48) as u16;
        for i in 0..self.probe_limit {
            let p = self.pos(h, i);
            let s = self.slots[p];
            if s.packets == 0 {
                self.slots[p] = self.fresh(tag, &add);
                self.set_key(p, key);
                self.len += 1;
                return Outcome::Inserted;
            }
            if s.hash == tag && self.key_at(p) == key.as_bytes() {
                let times = add.times.map(|(f, l)| (self.offset(f), self.offset(l)));
                let s = &mut self.slots[p];
                s.packets = s.packets.saturating_add(add.packets);
                s.bytes = s.bytes.saturating_add(add.bytes);
                if let Some((f, l)) = times {
                    let (f0, l0) = s.offsets();
                    let f = if f0 == 0 { f } else { f0.min(f) };
                    s.set_offsets(f, l0.max(l));
                }
                s.set_referenced(true);
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
            if s.referenced() {
                s.set_referenced(false);
            } else if s.packets < best_unref {
                best_unref = s.packets;
                victim = p;
            }
        }
        if victim == usize::MAX {
            victim = best_any.1;
        }
        let gone = self.slots[victim].packets;
        // Saturating: a loaded table's count may start anywhere.
        self.evictions = self.evictions.saturating_add(1);
        self.max_evicted = self.max_evicted.max(gone);
        self.slots[victim] = self.fresh(tag, &add);
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
        self.base = None;
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

    fn one(packets: u32) -> Add {
        Add {
            packets,
            bytes: u64::from(packets) * 100,
            ..Add::default()
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
        assert_eq!((s.packets, s.bytes, s.referenced()), (7, 700, true));
        assert!(t.get(&k(2), h(2)).is_none());
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn counts_saturate() {
        let mut t = Wsaf::new(16, 4, 4);
        t.add(
            &k(1),
            h(1),
            Add {
                packets: u32::MAX - 1,
                bytes: u64::MAX - 1,
                ..Add::default()
            },
        );
        t.add(&k(1), h(1), one(5));
        let s = t.get(&k(1), h(1)).unwrap();
        assert_eq!((s.packets, s.bytes), (u32::MAX, u64::MAX));
    }

    /// Times: Unix-time nanoseconds round-trip exactly through the 48-bit offsets; `first` is
    /// the least and `last` the largest time added (also a time before the first stored, within
    /// the slack); a time past the range is clamped; flags and times do not disturb each other;
    /// a slot added without times has none.
    #[test]
    fn times_round_trip_and_widen() {
        let mut t = Wsaf::new(64, 8, 4);
        let at = |f, l| Add {
            times: Some((f, l)),
            ..one(1)
        };
        let t0 = 1_764_000_000_123_456_789u64;
        t.add(&k(1), h(1), at(t0, t0));
        t.add(&k(1), h(1), at(t0 + 5_000_000_007, t0 + 5_000_000_007));
        t.add(&k(1), h(1), at(t0 - 3, t0 - 3));
        let s = *t.get(&k(1), h(1)).unwrap();
        assert_eq!(t.times(&s), Some((t0 - 3, t0 + 5_000_000_007)));
        t.get_mut(&k(1), h(1)).unwrap().set_reported();
        let s = *t.get(&k(1), h(1)).unwrap();
        assert!(s.reported() && s.referenced() && s.shard() == 0);
        assert_eq!(t.times(&s), Some((t0 - 3, t0 + 5_000_000_007)));
        // 100 hours later: past the 48-bit range, clamped to its end.
        let far = t0 + 100 * 3600 * 1_000_000_000;
        t.add(&k(2), h(2), at(far, far));
        let s = *t.get(&k(2), h(2)).unwrap();
        let end = t0 - SLACK_NS + MAX_OFFSET - 1;
        assert_eq!(t.times(&s), Some((end, end)));
        t.add(&k(3), h(3), Add { shard: 9, ..one(2) });
        let s = *t.get(&k(3), h(3)).unwrap();
        assert_eq!((t.times(&s), s.shard()), (None, 9));
        t.reset();
        t.add(&k(1), h(1), at(5, 7));
        let s = *t.get(&k(1), h(1)).unwrap();
        assert_eq!(t.times(&s), Some((5, 7)));
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
