//! The packet path's ground-truth table (issue 13, point 3): exact per-flow packet and byte
//! counts, cheaper per packet than the `KeyMap` the answers read (`EpochTruth::flows`), which it
//! is drained into at an epoch's end, off the packet path (`EpochTruth::settle`).
//!
//! Why not the `KeyMap` itself: a `FlowKey` is 38 bytes and its map entry 56, compared with a
//! call to `memcmp`; the keys of the common kinds (an IPv4 source, pair or 5-tuple, an IPv6
//! address) are at most 16 bytes. Here such a key is one `u128` and its length, a slot is 32
//! bytes (two to a cache line) and a probe compares one control byte, then one `u128`. Longer
//! keys (IPv6 pairs and 5-tuples) go to a `KeyMap` beside it. Open addressing with linear probing
//! on the one hash family's xxh3 (`key::HashFn`), at most half full (a probe ends within a few
//! slots), grown by doubling; the allocation is kept across epochs (`clear`), so the steady state
//! allocates nothing. The last slot written is remembered: a packet of the same flow as the one
//! before it (a burst) costs one comparison.

use key::{FlowKey, HashFn, KeyMap};

use crate::Counts;

/// Longest key held in the open-addressing part.
const SHORT: usize = 16;
/// Seed of the table's hash ("TRUTH"): any; the table's answers do not depend on it.
const SEED: u64 = 0x0054_5255_5448;

#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    key: u128,
    packets: u64,
    bytes: u64,
}

/// Exact counts of the flows of one key kind, built packet by packet.
#[derive(Clone, Debug)]
pub struct FlowTable {
    /// Per slot: 0 when empty, else the key's length (1..=16).
    ctrl: Vec<u8>,
    slots: Vec<Slot>,
    /// Flows held in `slots`.
    short: usize,
    /// Keys longer than 16 bytes.
    long: KeyMap<Counts>,
    hash: HashFn,
    /// The slot written last and its key (`len` 0: none).
    last: (usize, u8, u128),
}

impl Default for FlowTable {
    fn default() -> Self {
        FlowTable::new()
    }
}

impl FlowTable {
    pub fn new() -> FlowTable {
        FlowTable {
            ctrl: vec![],
            slots: vec![],
            short: 0,
            long: KeyMap::default(),
            hash: HashFn::new(SEED),
            last: (0, 0, 0),
        }
    }

    /// Flows held.
    pub fn len(&self) -> usize {
        self.short + self.long.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Count `packets` packets of `bytes` bytes for `key`; its counts after.
    #[inline]
    pub fn add(&mut self, key: &FlowKey, packets: u64, bytes: u64) -> Counts {
        let len = key.len();
        if len == 0 || len > SHORT {
            let c = self.long.entry(*key).or_default();
            c.packets += packets;
            c.bytes += bytes;
            return *c;
        }
        let (len, head) = (len as u8, key.head128());
        let (i, l, h) = self.last;
        if l == len && h == head {
            let s = &mut self.slots[i];
            s.packets += packets;
            s.bytes += bytes;
            return Counts {
                packets: s.packets,
                bytes: s.bytes,
            };
        }
        if 2 * (self.short + 1) > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = self.hash.hash(key) as usize & mask;
        loop {
            match self.ctrl[i] {
                0 => {
                    self.ctrl[i] = len;
                    self.slots[i] = Slot {
                        key: head,
                        packets,
                        bytes,
                    };
                    self.short += 1;
                    break;
                }
                c if c == len && self.slots[i].key == head => {
                    let s = &mut self.slots[i];
                    s.packets += packets;
                    s.bytes += bytes;
                    break;
                }
                _ => i = (i + 1) & mask,
            }
        }
        self.last = (i, len, head);
        let s = &self.slots[i];
        Counts {
            packets: s.packets,
            bytes: s.bytes,
        }
    }

    /// Twice the slots (at least 1024), every flow re-placed.
    #[cold]
    fn grow(&mut self) {
        let n = (2 * self.slots.len()).max(1024);
        let ctrl = std::mem::replace(&mut self.ctrl, vec![0; n]);
        let slots = std::mem::replace(&mut self.slots, vec![Slot::default(); n]);
        let mask = n - 1;
        for (c, s) in ctrl.into_iter().zip(slots).filter(|(c, _)| *c != 0) {
            let key = key_of(c, s.key);
            let mut i = self.hash.hash(&key) as usize & mask;
            while self.ctrl[i] != 0 {
                i = (i + 1) & mask;
            }
            self.ctrl[i] = c;
            self.slots[i] = s;
        }
        self.last = (0, 0, 0);
    }

    /// Every flow and its counts (slot order, then the long keys).
    pub fn iter(&self) -> impl Iterator<Item = (FlowKey, Counts)> + '_ {
        self.ctrl
            .iter()
            .zip(&self.slots)
            .filter(|(c, _)| **c != 0)
            .map(|(&c, s)| {
                (
                    key_of(c, s.key),
                    Counts {
                        packets: s.packets,
                        bytes: s.bytes,
                    },
                )
            })
            .chain(self.long.iter().map(|(k, c)| (*k, *c)))
    }

    /// Empty, the allocation kept. Visits only the control bytes (one per slot).
    pub fn clear(&mut self) {
        if self.short > 0 {
            self.ctrl.fill(0);
        }
        self.short = 0;
        self.long.clear();
        self.last = (0, 0, 0);
    }
}

/// The key of `len` bytes whose first 16 are `head`.
fn key_of(len: u8, head: u128) -> FlowKey {
    let b = head.to_le_bytes();
    FlowKey::from_bytes(&b[..len as usize]).expect("at most 16 bytes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The table holds exactly what a `KeyMap` holds, for keys of every length (0 to 37 bytes,
    /// 4- and 16-byte keys that agree on their first bytes, bursts), through growth and clears.
    #[test]
    fn holds_what_a_map_holds() {
        let mut rng = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut t = FlowTable::new();
        for round in 0..3 {
            let mut m: KeyMap<Counts> = KeyMap::default();
            for _ in 0..50_000 {
                let r = next();
                let len = [0usize, 4, 8, 13, 16, 32, 37][(r % 7) as usize];
                // Few distinct values, so that keys of different lengths share their bytes.
                let v = (r >> 8) % 3000;
                let mut b = [0u8; 37];
                b[..8].copy_from_slice(&v.to_be_bytes());
                b.rotate_left(4);
                let k = FlowKey::from_bytes(&b[..len]).unwrap();
                let reps = 1 + (r >> 40) % 3;
                for _ in 0..reps {
                    t.add(&k, 1, r % 1500);
                    let c = m.entry(k).or_default();
                    c.packets += 1;
                    c.bytes += r % 1500;
                }
            }
            let got: KeyMap<Counts> = t.iter().collect();
            assert_eq!(got.len(), t.len(), "round {round}: no key twice");
            assert_eq!(got, m, "round {round}");
            t.clear();
            assert!(t.is_empty());
            assert_eq!(t.iter().count(), 0);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x5eed),
            ..ProptestConfig::default()
        })]
        /// Any stream of 4- and 16-byte keys (the lengths that share the open-addressing part),
        /// weights included, is counted as a map counts it.
        #[test]
        fn counts_as_a_map_counts(
            pkts in proptest::collection::vec((0u32..64, any::<bool>(), 0u64..1500), 0..2000),
        ) {
            let mut t = FlowTable::new();
            let mut want: KeyMap<Counts> = KeyMap::default();
            for &(v, wide, w) in &pkts {
                let mut b = [0u8; 16];
                b[..4].copy_from_slice(&v.to_be_bytes());
                let k = FlowKey::from_bytes(&b[..if wide { 16 } else { 4 }]).unwrap();
                t.add(&k, 1, w);
                let c = want.entry(k).or_default();
                c.packets += 1;
                c.bytes += w;
            }
            let got: KeyMap<Counts> = t.iter().collect();
            prop_assert_eq!(got, want);
        }
    }
}
