//! Exact ground truth: per-epoch, per-flow packet and byte counts for one key kind, the
//! epoch boundaries every other stage shares, and the exact answer of every task from those
//! counts ([`answers`]: code no algorithm uses).
//!
//! Every accuracy figure netsift reports is measured against these tables, so they are plain
//! hash maps with no approximation.
//!
//! Epochs: by packet count (default 2,000,000, the Agg-Evict and Re-evaluating epoch) or by
//! capture time (`--epoch-ms`). Only keyed packets (IPv4/IPv6) count towards an epoch's packets:
//! they are the packets the measurement algorithms see. Time epochs are aligned to the first
//! packet's timestamp; an epoch in which no packet arrived is not reported (a capture with a gap
//! of years would otherwise produce millions of empty epochs), and every reported epoch carries
//! its index on the time axis so gaps stay visible. A timestamp earlier than the current epoch's
//! start (captures are not always sorted) stays in the current epoch.

#![forbid(unsafe_code)]

pub mod answers;
mod table;

pub use answers::{Ewma, Host, Spread};
pub use table::FlowTable;

use key::{FlowKey, KeyKind, KeyMap};
use serde::{Deserialize, Serialize};

/// The Agg-Evict / Re-evaluating epoch length in packets.
pub const DEFAULT_EPOCH_PACKETS: u64 = 2_000_000;

/// How a trace is cut into epochs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EpochSpec {
    /// Every `n` keyed packets (`n >= 1`).
    Packets(u64),
    /// Every `ms` milliseconds of capture time (`ms >= 1`).
    Millis(u64),
}

impl Default for EpochSpec {
    fn default() -> Self {
        EpochSpec::Packets(DEFAULT_EPOCH_PACKETS)
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EpochError {
    #[error("epoch length must be at least 1 (got 0 for `{0}`)")]
    Zero(&'static str),
}

impl EpochSpec {
    pub fn validate(self) -> Result<Self, EpochError> {
        match self {
            EpochSpec::Packets(0) => Err(EpochError::Zero("epoch_packets")),
            EpochSpec::Millis(0) => Err(EpochError::Zero("epoch_ms")),
            s => Ok(s),
        }
    }
}

/// Decides where epochs end. One instance per pass over a trace; the ground truth, the
/// algorithms and the report all follow the same clock.
#[derive(Clone, Debug)]
pub struct Clock {
    spec: EpochSpec,
    /// Index of the current epoch (packet epochs: 0, 1, 2...; time epochs: slot on the time axis).
    index: u64,
    in_epoch: u64,
    origin_ns: Option<u64>,
}

impl Clock {
    pub fn new(spec: EpochSpec) -> Clock {
        Clock {
            spec,
            index: 0,
            in_epoch: 0,
            origin_ns: None,
        }
    }

    /// The index of the epoch the next packet (with timestamp `ts_ns`) belongs to, and whether a
    /// new epoch starts with it (the previous one, if it held packets, is then complete).
    #[inline]
    pub fn tick(&mut self, ts_ns: u64) -> (u64, bool) {
        let new = match self.spec {
            EpochSpec::Packets(n) => {
                if self.in_epoch == n {
                    self.index += 1;
                    self.in_epoch = 0;
                    true
                } else {
                    false
                }
            }
            EpochSpec::Millis(ms) => {
                let origin = *self.origin_ns.get_or_insert(ts_ns);
                let slot = ts_ns.saturating_sub(origin) / ms.saturating_mul(1_000_000);
                if slot > self.index {
                    self.index = slot;
                    self.in_epoch = 0;
                    true
                } else {
                    false
                }
            }
        };
        self.in_epoch += 1;
        (self.index, new && self.index > 0)
    }

    /// Time epochs: move to the epoch that `now_ns` falls in without a packet (a live capture's
    /// idle link must still close its epochs on time); the first call, before any packet, sets
    /// the origin. Returns the new index when the current epoch ended; `None` for packet epochs
    /// and while `now_ns` is still in the current one.
    pub fn advance(&mut self, now_ns: u64) -> Option<u64> {
        let EpochSpec::Millis(ms) = self.spec else {
            return None;
        };
        let origin = *self.origin_ns.get_or_insert(now_ns);
        let slot = now_ns.saturating_sub(origin) / ms.saturating_mul(1_000_000);
        (slot > self.index).then(|| {
            self.index = slot;
            self.in_epoch = 0;
            slot
        })
    }

    pub fn index(&self) -> u64 {
        self.index
    }

    /// Time epochs: epoch `index`'s span `[start, end)` in capture time (ns), once the origin is
    /// set (the first tick or advance); `None` for packet epochs and before.
    pub fn bounds(&self, index: u64) -> Option<(u64, u64)> {
        let EpochSpec::Millis(ms) = self.spec else {
            return None;
        };
        let len = ms.saturating_mul(1_000_000);
        let start = self.origin_ns?.saturating_add(index.saturating_mul(len));
        Some((start, start.saturating_add(len)))
    }

    /// After a [`Clock::tick`]: how many more packets of the same timestamp the epoch takes
    /// before the next one starts (packet epochs; a time epoch never ends without a later
    /// timestamp). What a block of timestampless records may take at once.
    #[inline]
    pub fn room(&self) -> u64 {
        match self.spec {
            EpochSpec::Packets(n) => n.saturating_sub(self.in_epoch),
            EpochSpec::Millis(_) => u64::MAX,
        }
    }

    /// `n` more packets of the timestamp of the last tick, within [`Clock::room`]: the state
    /// `n` ticks would leave (none of them starts an epoch).
    #[inline]
    pub fn tick_more(&mut self, n: u64) {
        debug_assert!(n <= self.room());
        self.in_epoch += n;
    }
}

/// Packets and bytes of one flow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub packets: u64,
    pub bytes: u64,
}

impl Counts {
    pub fn get(&self, w: Weight) -> u64 {
        match w {
            Weight::Packets => self.packets,
            Weight::Bytes => self.bytes,
        }
    }
}

/// What a flow's size is measured in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Weight {
    #[default]
    Packets,
    Bytes,
}

impl Weight {
    pub fn name(self) -> &'static str {
        match self {
            Weight::Packets => "packets",
            Weight::Bytes => "bytes",
        }
    }

    /// The update weight of one packet of `wire_len` bytes.
    #[inline]
    pub fn of(self, wire_len: u32) -> u64 {
        match self {
            Weight::Packets => 1,
            Weight::Bytes => wire_len as u64,
        }
    }
}

/// Exact per-flow counts of one epoch.
#[derive(Clone, Debug, Default)]
pub struct EpochTruth {
    /// Position on the epoch axis (see [`Clock`]).
    pub index: u64,
    pub packets: u64,
    pub bytes: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    /// The flows, once settled (`settle`): what every answer and score reads.
    pub flows: KeyMap<Counts>,
    /// The flows counted on the packet path (`add`), not yet in `flows`.
    pub pending: FlowTable,
}

impl EpochTruth {
    pub fn new(index: u64) -> EpochTruth {
        EpochTruth {
            index,
            ..EpochTruth::default()
        }
    }

    /// This table emptied for epoch `index`, its allocation kept: a table reused epoch after
    /// epoch does not grow (and rehash) again.
    pub fn emptied(mut self, index: u64) -> EpochTruth {
        self.flows.clear();
        self.pending.clear();
        EpochTruth {
            index,
            flows: self.flows,
            pending: self.pending,
            ..EpochTruth::default()
        }
    }

    /// Move the flows counted on the packet path into `flows` (at an epoch's end, off the packet
    /// path); the pending table is emptied, its allocation kept.
    pub fn settle(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        self.flows.reserve(self.pending.len());
        for (k, c) in self.pending.iter() {
            let e = self.flows.entry(k).or_default();
            e.packets += c.packets;
            e.bytes += c.bytes;
        }
        self.pending.clear();
    }

    /// Count one packet of `key`; the flow's counts in this epoch after it.
    #[inline]
    pub fn add(&mut self, ts_ns: u64, key: FlowKey, wire_len: u32) -> Counts {
        self.count(ts_ns, wire_len);
        self.pending.add(&key, 1, u64::from(wire_len))
    }

    /// Count a packet in the epoch's totals and times only, not in any flow (a run without
    /// ground truth).
    #[inline]
    pub fn count(&mut self, ts_ns: u64, wire_len: u32) {
        if self.packets == 0 {
            self.first_ns = ts_ns;
        }
        self.last_ns = self.last_ns.max(ts_ns);
        self.packets += 1;
        self.bytes += wire_len as u64;
    }

    /// [`EpochTruth::count`] of `n` packets of `wire_len` bytes each at `ts_ns`.
    #[inline]
    pub fn count_n(&mut self, ts_ns: u64, n: u64, wire_len: u32) {
        if n == 0 {
            return;
        }
        self.count(ts_ns, wire_len);
        self.packets += n - 1;
        self.bytes += (n - 1) * u64::from(wire_len);
    }

    /// Total of the epoch in the weight's unit.
    pub fn total(&self, w: Weight) -> u64 {
        match w {
            Weight::Packets => self.packets,
            Weight::Bytes => self.bytes,
        }
    }

    /// Per-flow sizes in the weight's unit.
    pub fn sizes(&self, w: Weight) -> impl Iterator<Item = (&FlowKey, u64)> + '_ {
        debug_assert!(self.pending.is_empty(), "read before `settle`");
        self.flows.iter().map(move |(k, c)| (k, c.get(w)))
    }

    /// Flows sorted by size, largest first; ties broken by key so the order is deterministic.
    pub fn ranked(&self, w: Weight) -> Vec<(FlowKey, u64)> {
        let mut v: Vec<(FlowKey, u64)> = self.sizes(w).map(|(k, s)| (*k, s)).collect();
        v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }
}

/// Builds [`EpochTruth`] tables for one key kind over a stream of keyed packets.
#[derive(Debug)]
pub struct Truth {
    kind: KeyKind,
    clock: Clock,
    current: EpochTruth,
}

impl Truth {
    pub fn new(kind: KeyKind, spec: EpochSpec) -> Truth {
        Truth {
            kind,
            clock: Clock::new(spec),
            current: EpochTruth::new(0),
        }
    }

    pub fn kind(&self) -> KeyKind {
        self.kind
    }

    /// Count one keyed packet. If it opens a new epoch, the finished one is returned first.
    pub fn push(&mut self, ts_ns: u64, key: FlowKey, wire_len: u32) -> Option<EpochTruth> {
        let (index, new) = self.clock.tick(ts_ns);
        let done = if new {
            let mut e = std::mem::replace(&mut self.current, EpochTruth::new(index));
            e.settle();
            Some(e)
        } else {
            None
        };
        self.current.add(ts_ns, key, wire_len);
        done.filter(|e| e.packets > 0)
    }

    /// The last epoch, if it holds packets.
    pub fn finish(mut self) -> Option<EpochTruth> {
        self.current.settle();
        Some(self.current).filter(|e| e.packets > 0)
    }
}

#[cfg(test)]
mod tests {

    /// `advance` closes time epochs without packets (the first call sets the origin); packets
    /// after it tick from the epoch it moved to; packet epochs are left alone.
    #[test]
    fn advance_closes_idle_time_epochs() {
        let ms = 1_000_000;
        let mut c = Clock::new(EpochSpec::Millis(100));
        assert_eq!(c.advance(5_000 * ms), None);
        assert_eq!(c.advance(5_099 * ms), None);
        assert_eq!(c.advance(5_100 * ms), Some(1));
        assert_eq!(c.advance(5_450 * ms), Some(4));
        assert_eq!(c.advance(5_460 * ms), None);
        // A packet stamped before the moment advanced to counts in the open epoch.
        assert_eq!(c.tick(5_300 * ms), (4, false));
        assert_eq!(c.tick(5_500 * ms), (5, true));
        let mut p = Clock::new(EpochSpec::Packets(2));
        assert_eq!(p.advance(u64::MAX), None);
        assert_eq!(p.index(), 0);
    }

    use super::*;

    fn k(v: u32) -> FlowKey {
        FlowKey::from_u32(v)
    }

    #[test]
    fn packet_epochs_split_exactly() {
        let mut t = Truth::new(KeyKind::Src, EpochSpec::Packets(3));
        let mut done = vec![];
        for i in 0..8u32 {
            if let Some(e) = t.push(i as u64, k(i % 2), 100 + i) {
                done.push(e);
            }
        }
        done.extend(t.finish());
        let sizes: Vec<u64> = done.iter().map(|e| e.packets).collect();
        assert_eq!(sizes, vec![3, 3, 2]);
        assert_eq!(
            done.iter().map(|e| e.index).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        assert_eq!(
            done[0].flows[&k(0)],
            Counts {
                packets: 2,
                bytes: 100 + 102
            }
        );
        assert_eq!(
            done[0].flows[&k(1)],
            Counts {
                packets: 1,
                bytes: 101
            }
        );
        assert_eq!(done[2].bytes, 106 + 107);
        let total: u64 = done.iter().map(|e| e.packets).sum();
        assert_eq!(total, 8);
    }

    #[test]
    fn time_epochs_skip_gaps_and_tolerate_reordering() {
        let ms = 1_000_000u64;
        let mut t = Truth::new(KeyKind::Src, EpochSpec::Millis(10));
        let ts = [0, 5 * ms, 3 * ms, 12 * ms, 5_000 * ms, 5_001 * ms];
        let mut done = vec![];
        for (i, &x) in ts.iter().enumerate() {
            done.extend(t.push(1_000_000_000 + x, k(i as u32), 1));
        }
        done.extend(t.finish());
        assert_eq!(
            done.iter().map(|e| e.index).collect::<Vec<_>>(),
            vec![0, 1, 500]
        );
        assert_eq!(
            done.iter().map(|e| e.packets).collect::<Vec<_>>(),
            vec![3, 1, 2]
        );
    }

    #[test]
    fn ranked_is_deterministic() {
        let mut e = EpochTruth::new(0);
        for (v, n) in [(5u32, 2), (1, 3), (9, 2)] {
            for _ in 0..n {
                e.add(0, k(v), 10);
            }
        }
        e.settle();
        let r = e.ranked(Weight::Packets);
        assert_eq!(r, vec![(k(1), 3), (k(5), 2), (k(9), 2)]);
        assert_eq!(e.total(Weight::Bytes), 70);
    }

    #[test]
    fn zero_epochs_are_rejected() {
        assert!(EpochSpec::Packets(0).validate().is_err());
        assert!(EpochSpec::Millis(0).validate().is_err());
        assert!(EpochSpec::Millis(5).validate().is_ok());
    }
}
