//! Cycle timing and the per-packet latency histogram.
//!
//! Method of the Re-evaluating paper (section 3.1), as the Agg-Evict harness uses it: read the
//! time-stamp counter around every batch, divide the batch's cycles evenly over its packets, and
//! add each packet's cycles to a histogram of 2,000 buckets of 2 cycles (plus one overflow
//! bucket). The TSC is converted to nanoseconds with one calibration against `Instant`.
//! Elsewhere than x86-64 the "cycles" are `Instant` nanoseconds and the rate is 1 per ns.

use std::time::{Duration, Instant};

/// Buckets of the latency histogram (Re-evaluating 3.1: "2k buckets of 2 cycles each").
pub const BUCKETS: usize = 2000;
/// Width of one bucket in cycles.
pub const BUCKET_CYCLES: u64 = 2;

/// A monotonic cycle counter with its rate in cycles per nanosecond.
#[derive(Clone, Debug)]
pub struct Clock {
    origin: Instant,
    cycles_per_ns: f64,
    tsc: bool,
}

impl Clock {
    /// Calibrate over about `window` of wall time (the TSC is invariant on every x86-64 CPU this
    /// runs on; one calibration serves the whole run).
    pub fn calibrate(window: Duration) -> Clock {
        let origin = Instant::now();
        let tsc = cfg!(target_arch = "x86_64");
        if !tsc {
            return Clock {
                origin,
                cycles_per_ns: 1.0,
                tsc,
            };
        }
        let mut clock = Clock {
            origin,
            cycles_per_ns: 1.0,
            tsc,
        };
        let (i0, c0) = (Instant::now(), clock.now());
        // Spin rather than sleep: a sleeping core may change frequency, and we want the rate of
        // a busy core, which is what the measured loops are.
        while i0.elapsed() < window {
            std::hint::spin_loop();
        }
        let (ns, c1) = (i0.elapsed().as_nanos() as f64, clock.now());
        let rate = c1.wrapping_sub(c0) as f64 / ns.max(1.0);
        // A nonsensical rate (a TSC that did not advance) falls back to a nominal 1 GHz rather
        // than dividing by zero later.
        clock.cycles_per_ns = if rate.is_finite() && rate > 0.01 {
            rate
        } else {
            1.0
        };
        clock
    }

    /// Current counter value.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            if self.tsc {
                // SAFETY: RDTSC is part of the x86-64 baseline ISA and has no memory effects.
                return unsafe { core::arch::x86_64::_rdtsc() };
            }
        }
        self.origin.elapsed().as_nanos() as u64
    }

    pub fn cycles_per_ns(&self) -> f64 {
        self.cycles_per_ns
    }

    /// Whether the counter is the TSC (otherwise `Instant` nanoseconds).
    pub fn is_tsc(&self) -> bool {
        self.tsc
    }

    pub fn to_ns(&self, cycles: f64) -> f64 {
        cycles / self.cycles_per_ns
    }

    /// A clock whose counter is `Instant` nanoseconds (for tests and non-x86 hosts).
    pub fn instant() -> Clock {
        Clock {
            origin: Instant::now(),
            cycles_per_ns: 1.0,
            tsc: false,
        }
    }
}

/// Per-packet latency histogram in cycles.
#[derive(Clone, Debug)]
pub struct LatencyHist {
    buckets: Vec<u64>,
    /// Values past the last bucket, kept exactly (value, packets): they are rare (epoch ends,
    /// interrupts), and the tail percentiles must not saturate at the histogram's edge.
    overflow: Vec<(u64, u64)>,
    packets: u64,
    sum_cycles: f64,
}

impl Default for LatencyHist {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHist {
    pub fn new() -> LatencyHist {
        LatencyHist {
            buckets: vec![0; BUCKETS],
            overflow: Vec::new(),
            packets: 0,
            sum_cycles: 0.0,
        }
    }

    /// Record a batch of `packets` packets that took `cycles` in all: each packet is charged
    /// `cycles / packets`.
    pub fn add_batch(&mut self, cycles: u64, packets: u64) {
        if packets == 0 {
            return;
        }
        self.sum_cycles += cycles as f64;
        // The exact average keeps the division's remainder; the buckets do not need it.
        self.add(cycles / packets, packets);
    }

    /// Record `count` packets of `per_packet` cycles each.
    pub fn add(&mut self, per_packet: u64, count: u64) {
        let b = (per_packet / BUCKET_CYCLES) as usize;
        match self.buckets.get_mut(b) {
            Some(slot) => *slot += count,
            None => self.overflow.push((per_packet, count)),
        }
        self.packets += count;
    }

    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Average cycles per packet, exact (from the batch totals, not the buckets).
    pub fn mean_cycles(&self) -> f64 {
        if self.packets == 0 {
            0.0
        } else {
            self.sum_cycles / self.packets as f64
        }
    }

    /// The `q`-quantile (0 < q <= 1) in cycles: the upper edge of the bucket holding the
    /// ceil(q * packets)-th smallest packet, or the exact value when that packet overflowed.
    /// 0 for an empty histogram.
    pub fn quantile_cycles(&self, q: f64) -> f64 {
        if self.packets == 0 {
            return 0.0;
        }
        let q = if q.is_finite() {
            q.clamp(0.0, 1.0)
        } else {
            1.0
        };
        let rank = ((q * self.packets as f64).ceil() as u64).clamp(1, self.packets);
        let mut seen = 0u64;
        for (i, &c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return ((i as u64 + 1) * BUCKET_CYCLES) as f64;
            }
        }
        let mut over = self.overflow.clone();
        over.sort_unstable();
        for (v, c) in over {
            seen += c;
            if seen >= rank {
                return v as f64;
            }
        }
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_of_uniform_distribution() {
        // One packet at each even cycle count 0, 2, ..., 1998 (bucket i holds value 2i): the
        // 99th percentile is the 990th packet, value 1978, bucket 989, upper edge 1980.
        let mut h = LatencyHist::new();
        for v in 0..1000u64 {
            h.add(2 * v, 1);
        }
        assert_eq!(h.packets(), 1000);
        assert_eq!(h.quantile_cycles(0.99), 1980.0);
        assert_eq!(h.quantile_cycles(0.5), 1000.0);
        assert_eq!(h.quantile_cycles(1.0), 2000.0);
    }

    #[test]
    fn percentile_reaches_into_overflow_exactly() {
        let mut h = LatencyHist::new();
        h.add(10, 98); // bucket 5
        h.add(50_000, 1);
        h.add(90_000, 1);
        assert_eq!(h.quantile_cycles(0.5), 12.0);
        assert_eq!(h.quantile_cycles(0.98), 12.0);
        assert_eq!(h.quantile_cycles(0.99), 50_000.0);
        assert_eq!(h.quantile_cycles(1.0), 90_000.0);
    }

    #[test]
    fn batch_charges_each_packet_its_share_and_mean_is_exact() {
        let mut h = LatencyHist::new();
        h.add_batch(3200, 32); // 100 cycles a packet
        h.add_batch(33, 32); // 1.03 a packet: bucket 0
        assert_eq!(h.packets(), 64);
        assert!((h.mean_cycles() - 3233.0 / 64.0).abs() < 1e-9);
        assert_eq!(h.quantile_cycles(0.5), 2.0);
        assert_eq!(h.quantile_cycles(0.99), 102.0);
        let empty = LatencyHist::new();
        assert_eq!(empty.quantile_cycles(0.99), 0.0);
        assert_eq!(empty.mean_cycles(), 0.0);
    }

    #[test]
    fn clock_is_monotonic_and_calibrated() {
        let c = Clock::calibrate(Duration::from_millis(20));
        assert!(c.cycles_per_ns() > 0.0);
        let a = c.now();
        let b = c.now();
        assert!(b >= a);
        assert!(Clock::instant().to_ns(5.0) == 5.0);
    }
}
