//! A deterministic model of the normal path's bounded FIFO (SketchVisor section 3.1): packets
//! enter the FIFO while it has room and go to the fast path when it is full. The normal path
//! drains the FIFO at a fixed capacity (`--normal-capacity`, packets per second), in simulated
//! time: the packets' capture timestamps, or for key traces (no timestamps) a fixed arrival rate.
//! The split therefore depends only on the trace and the two rates, never on the machine: the
//! same file gives the same fast-path share everywhere, and tests force a share by choosing the
//! capacity.
//!
//! The model is a single-server queue with deterministic service: each admitted packet costs
//! `1 / capacity` of normal-path time; `busy_until` is when the normal path will have drained
//! everything admitted. A packet arriving at `t` finds `ceil((busy_until - t) / cost)` packets in
//! the FIFO (the one in service included) and is admitted iff, with it, the FIFO holds at most
//! `depth` packets. Time is kept in integer picoseconds relative to the first packet (the only
//! float is the constructor's one division), so every machine takes the same decisions.

use serde::{Deserialize, Serialize};

/// Default FIFO depth in packets. The paper gives none (section 6: a lock-free ring between the
/// kernel module and the daemon); 1024 is a common ring size, large enough to absorb a burst of
/// the generator's trains and small enough that overload shows within a millisecond.
pub const DEFAULT_DEPTH: u32 = 1024;

/// Arrival rate assumed for key traces, which carry no timestamps: 10 GbE's line rate in
/// minimum-size frames (14.88 Mpps). The fast-path share is then `1 - capacity / 14.88` in the
/// steady state.
pub const DEFAULT_KEY_TRACE_MPPS: f64 = 14.88;

/// Which path a packet takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Path {
    Normal,
    Fast,
}

/// Packets and bytes per path (the paper's Figure 13; the report's `paths`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathCounts {
    pub normal_packets: u64,
    pub normal_bytes: u64,
    pub fast_packets: u64,
    pub fast_bytes: u64,
}

impl PathCounts {
    pub fn packets(&self) -> u64 {
        self.normal_packets + self.fast_packets
    }
    pub fn bytes(&self) -> u64 {
        self.normal_bytes + self.fast_bytes
    }
    /// Add `o`'s counts (hosts' or epochs' parts; saturating: the parts may come from snapshots
    /// not yet checked).
    pub fn add_counts(&mut self, o: &PathCounts) {
        self.normal_packets = self.normal_packets.saturating_add(o.normal_packets);
        self.normal_bytes = self.normal_bytes.saturating_add(o.normal_bytes);
        self.fast_packets = self.fast_packets.saturating_add(o.fast_packets);
        self.fast_bytes = self.fast_bytes.saturating_add(o.fast_bytes);
    }

    /// Share of packets that took the fast path (0 when none was offered).
    pub fn fast_share(&self) -> f64 {
        match self.packets() {
            0 => 0.0,
            n => self.fast_packets as f64 / n as f64,
        }
    }
    fn add(&mut self, p: Path, bytes: u64) {
        match p {
            Path::Normal => {
                self.normal_packets += 1;
                self.normal_bytes += bytes;
            }
            Path::Fast => {
                self.fast_packets += 1;
                self.fast_bytes += bytes;
            }
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FifoError {
    #[error("normal_capacity must be a rate in (0, 1e6] Mpps, got {0}")]
    Capacity(f64),
    #[error("fifo_depth must be at least 1 packet")]
    Depth,
    #[error("key-trace arrival rate must be in (0, 1e6] Mpps, got {0}")]
    Arrival(f64),
}

/// Picoseconds per packet at `mpps` (at least 1).
fn ps_per_packet(mpps: f64) -> Option<u64> {
    (mpps.is_finite() && mpps > 0.0 && mpps <= 1e6).then(|| ((1e6 / mpps).round() as u64).max(1))
}

/// The normal path's FIFO in simulated time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fifo {
    /// Service time of one packet (ps).
    cost: u64,
    /// FIFO depth in packets.
    depth: u64,
    /// Arrival spacing of key-trace packets (ps).
    spacing: u64,
    /// First timestamp seen (ns): times are kept relative to it.
    origin: Option<u64>,
    /// Latest arrival time (ps since origin); a timestamp going backwards counts as this.
    now: u64,
    /// When the normal path will have drained everything admitted (ps since origin).
    busy_until: u64,
    counts: PathCounts,
}

impl Fifo {
    /// A FIFO of `depth` packets drained at `capacity_mpps`; key traces arrive at
    /// `key_trace_mpps` ([`DEFAULT_KEY_TRACE_MPPS`] unless the run says otherwise).
    pub fn new(capacity_mpps: f64, depth: u32, key_trace_mpps: f64) -> Result<Fifo, FifoError> {
        let cost = ps_per_packet(capacity_mpps).ok_or(FifoError::Capacity(capacity_mpps))?;
        let spacing = ps_per_packet(key_trace_mpps).ok_or(FifoError::Arrival(key_trace_mpps))?;
        if depth == 0 {
            return Err(FifoError::Depth);
        }
        Ok(Fifo {
            cost,
            depth: u64::from(depth),
            spacing,
            origin: None,
            now: 0,
            busy_until: 0,
            counts: PathCounts::default(),
        })
    }

    /// A packet of `bytes` captured at `ts_ns` (nanoseconds, any origin).
    #[inline]
    pub fn offer_at(&mut self, ts_ns: u64, bytes: u64) -> Path {
        let origin = *self.origin.get_or_insert(ts_ns);
        let t = ts_ns
            .saturating_sub(origin)
            .saturating_mul(1000)
            .max(self.now);
        self.admit(t, bytes)
    }

    /// The next packet of a key trace (no timestamp): packets arrive `1 / key_trace_mpps`
    /// apart, the first at time 0.
    #[inline]
    pub fn offer_next(&mut self, bytes: u64) -> Path {
        // The first packet ever arrives at 0 (not the first of an epoch: `take_counts` empties
        // the counts, not the FIFO's backlog or clock).
        let t = if self.origin.is_none() {
            self.origin = Some(0);
            0
        } else {
            self.now.saturating_add(self.spacing)
        };
        self.admit(t, bytes)
    }

    #[inline]
    fn admit(&mut self, t: u64, bytes: u64) -> Path {
        self.now = t;
        let start = self.busy_until.max(t);
        // Work in the FIFO after admitting this packet, in ps: at most depth packets' worth.
        let p = if start - t + self.cost <= self.depth.saturating_mul(self.cost) {
            self.busy_until = start + self.cost;
            Path::Normal
        } else {
            Path::Fast
        };
        self.counts.add(p, bytes);
        p
    }

    /// Packets the FIFO holds at the latest arrival.
    pub fn occupancy(&self) -> u64 {
        self.busy_until.saturating_sub(self.now).div_ceil(self.cost)
    }

    pub fn counts(&self) -> PathCounts {
        self.counts
    }

    /// Epoch end: forget the counts. The queue itself carries over (packets admitted near the
    /// end are still being drained when the next epoch's first packets arrive).
    pub fn take_counts(&mut self) -> PathCounts {
        std::mem::take(&mut self.counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_trace_arrivals_go_on_across_epochs() {
        // 2 Mpps offered, 1 Mpps drained: half on the fast path, epoch after epoch.
        let mut f = Fifo::new(1.0, 8, 2.0).unwrap();
        for _ in 0..3 {
            for _ in 0..10_000 {
                f.offer_next(1);
            }
            let c = f.take_counts();
            assert!((c.fast_share() - 0.5).abs() < 0.01, "{c:?}");
        }
    }

    #[test]
    fn rejects_bad_rates() {
        assert_eq!(Fifo::new(0.0, 8, 1.0), Err(FifoError::Capacity(0.0)));
        assert!(Fifo::new(f64::NAN, 8, 1.0).is_err());
        assert_eq!(Fifo::new(1.0, 0, 1.0), Err(FifoError::Depth));
        assert!(Fifo::new(1.0, 1, -3.0).is_err());
    }

    #[test]
    fn a_burst_fills_the_fifo_then_overflows() {
        // 1 Mpps = 1 us per packet, depth 4: five packets at the same instant, the fifth is fast.
        let mut f = Fifo::new(1.0, 4, 1.0).unwrap();
        let paths: Vec<Path> = (0..5).map(|_| f.offer_at(1_000, 100)).collect();
        assert_eq!(&paths[..4], &[Path::Normal; 4]);
        assert_eq!(paths[4], Path::Fast);
        assert_eq!(f.occupancy(), 4);
        // 1.5 us later one packet has drained and the second is half done: room for one.
        assert_eq!(f.offer_at(2_500, 100), Path::Normal);
        assert_eq!(f.offer_at(2_500, 100), Path::Fast);
        // After 10 us everything has drained.
        assert_eq!(f.offer_at(20_000, 100), Path::Normal);
        assert_eq!(f.occupancy(), 1);
        let c = f.counts();
        assert_eq!((c.normal_packets, c.fast_packets), (6, 2));
        assert_eq!(c.bytes(), 800);
    }

    #[test]
    fn key_traces_get_the_capacity_share() {
        // Arrivals at 10 Mpps, capacity 7 Mpps: 30% to the fast path once the FIFO is full.
        let mut f = Fifo::new(7.0, 16, 10.0).unwrap();
        for _ in 0..100_000 {
            f.offer_next(1);
        }
        let share = f.counts().fast_share();
        assert!((share - 0.3).abs() < 0.001, "{share}");
    }

    #[test]
    fn timestamps_going_back_count_as_now() {
        let mut f = Fifo::new(1.0, 1, 1.0).unwrap();
        assert_eq!(f.offer_at(5_000, 1), Path::Normal);
        assert_eq!(f.offer_at(4_000, 1), Path::Fast, "still busy at 5 us");
        assert_eq!(f.offer_at(6_000, 1), Path::Normal);
    }
}
