//! Deterministic synthetic traces.
//!
//! A [`Spec`] fixes a trace completely: same spec, same packets, byte for byte, on every host.
//! All randomness comes from PCG-64 (MCG variant) streams seeded from `Spec::seed` through
//! `key::sub_seed`, turned into draws by this crate's own integer/`libm` code (see `sample`), and
//! no output ever depends on hash-map iteration order.
//!
//! # Model
//!
//! * **Flow sizes.** F flows, indexed by rank. Each packet's flow is drawn independently from
//!   Zipf(skew) over the F ranks, P(rank r) = r^-skew / Σ_i i^-skew, with Walker's alias method
//!   (exact, O(1) a draw). So the *expected* packet count of rank r is N·P(r); realised counts are
//!   multinomial around it, and low ranks with expected count < 1 may not appear at all.
//! * **Flow identities.** See the `flows` module: client hosts (default F/4, or `Spec::sources`)
//!   talk to F/8 servers with Zipf-like popularity on both sides, one service (port, TCP/UDP) per
//!   server, ephemeral source ports, every 5-tuple unique, public-looking addresses. Hence
//!   distinct(src) < distinct(pair) < distinct(5-tuple) = F in the flow table.
//! * **Sizes.** Fixed, or [`Size::Mix`]: one frame-size class per flow from a trimodal Internet
//!   mix (40% 64 B, 10% 590 B, 50% 1514 B of flows; see `flows::MIX` for the source).
//! * **Timestamps.** Packet i at `START_NS + floor(i · round(1e12/rate) / 1000)` ns: a constant
//!   rate from 2020-01-01T00:00:00Z, exact integer arithmetic, no jitter.
//! * **Order.** [`Order::Shuffled`]: the iid draws in draw order, so flows are fully interleaved.
//!   [`Order::Bursty`]: the *same* iid draws are first tallied into per-flow budgets (so per-flow
//!   counts are identical to the shuffled trace of the same seed, and the flow-size distribution
//!   is exactly the same multinomial Zipf), then emitted as trains: pick a flow with probability
//!   proportional to its remaining budget (a Fenwick tree over blocks of 64 flows), emit a train of
//!   Geometric(mean `burst_mean`, default 6) packets capped by that budget, repeat. Real traces
//!   show such trains, and the Agg-Evict paper (section 4.3, Figure 7) finds their synthetic,
//!   randomly ordered trace aggregates worse than CAIDA for exactly this reason.
//!
//! # Output formats
//!
//! See [`OutFormat`]. pcap frames are Ethernet/IPv4/TCP-or-UDP with valid IPv4, TCP and UDP
//! checksums (TCP sequence numbers advance by the payload length per flow), captured length
//! min(wire_len, snaplen), zero payload.

#![forbid(unsafe_code)]

mod flows;
mod frame;
mod sample;
mod spec;

use std::io::{self, Write};

use rand::RngCore;

pub use spec::{
    Order, OutFormat, ParseError, Size, Spec, SpecError, MAX_BURST_MEAN, MAX_DURATION_NS,
    MAX_FLOWS, MAX_FRAME, MAX_PACKETS, MAX_RATE_PPS, MAX_SKEW, MAX_SNAPLEN, MAX_SOURCES, MIN_FRAME,
    MIN_RATE_PPS, MIN_SNAPLEN, START_NS,
};

use flows::FlowRec;
use sample::{rng, Alias, Budgets, Geometric};

/// Random stream numbers under the master seed (stream 1 builds the flow table).
const STREAM_DRAWS: u64 = 0;
const STREAM_TRAINS: u64 = 2;

/// One generated packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenPacket {
    /// Nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    pub tuple: key::Tuple,
    /// Frame length on the wire (Ethernet header included, FCS excluded).
    pub wire_len: u32,
    /// Zipf rank of the packet's flow, 0-based (0 = largest expected flow).
    pub flow: u32,
}

/// Failure of [`write`].
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error("writing the trace: {0}")]
    Io(#[from] io::Error),
}

/// A built trace: the flow table and the Zipf sampler of a validated [`Spec`]. Building costs
/// O(F); each run over the packets re-draws them from the seed, identically.
pub struct Generator {
    spec: Spec,
    flows: Vec<FlowRec>,
    zipf: Alias,
}

impl Generator {
    pub fn new(spec: &Spec) -> Result<Generator, SpecError> {
        spec.validate()?;
        Ok(Generator {
            spec: spec.clone(),
            flows: flows::build(spec),
            zipf: Alias::zipf(spec.flows as usize, spec.skew),
        })
    }

    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// The flow table in rank order: (5-tuple, frame length). Includes flows the trace may never
    /// draw.
    pub fn flows(&self) -> impl ExactSizeIterator<Item = (key::Tuple, u32)> + '_ {
        self.flows.iter().map(|f| (f.tuple(), f.wire_len as u32))
    }

    /// Calls `f` for every packet in trace order.
    pub fn for_each(&self, mut f: impl FnMut(&GenPacket)) {
        self.run(&|| false, |_, flows, ts| {
            touch(&self.flows, flows, |r| r.src);
            for (&fi, &ts_ns) in flows.iter().zip(ts) {
                if let Some(r) = self.flows.get(fi as usize) {
                    f(&GenPacket {
                        ts_ns,
                        tuple: r.tuple(),
                        wire_len: r.wire_len as u32,
                        flow: fi,
                    });
                }
            }
            true
        });
    }

    /// Writes the trace in `format` to `w` (buffered here; pass an unbuffered file). Returns the
    /// number of packets written.
    pub fn write_to(&self, format: OutFormat, w: impl Write) -> io::Result<u64> {
        self.write_until(format, w, &|| false)
    }

    /// [`Generator::write_to`], asking `stop` between batches of [`BATCH`] packets (and every
    /// [`STOP_EVERY`] draws while the bursty order tallies its budgets, which precedes the first
    /// packet): once it returns true, what is buffered is written and the count of packets
    /// written so far returned, so a caller (a signal handler's flag) ends a trace of any length
    /// within milliseconds. The output is then a valid, truncated trace.
    pub fn write_until(
        &self,
        format: OutFormat,
        mut w: impl Write,
        stop: &dyn Fn() -> bool,
    ) -> io::Result<u64> {
        // Records go to a hand-managed buffer flushed in 1 MiB chunks: no per-packet allocation
        // and one write call per chunk.
        const CHUNK: usize = 1 << 20;
        // A batch adds at most BATCH records of at most 16 + 9000 bytes past the flush threshold.
        let max_rec = 16 + (self.spec.snaplen as usize).min(spec::MAX_FRAME as usize);
        let mut buf: Vec<u8> = Vec::with_capacity(CHUNK + BATCH * max_rec);
        let mut err: Option<io::Error> = None;
        let mut written = 0u64;
        let mut flush = |buf: &mut Vec<u8>, err: &mut Option<io::Error>| {
            if err.is_none() {
                if let Err(e) = w.write_all(buf) {
                    *err = Some(e);
                }
            }
            buf.clear();
        };
        match format {
            OutFormat::Pcap => {
                buf.extend_from_slice(&pcap_header(self.spec.snaplen));
                let snap = self.spec.snaplen as usize;
                let zeros = [0u8; spec::MAX_FRAME as usize];
                // Per-flow TCP sequence numbers: a seeded initial value advanced by each
                // segment's payload, so a TCP analyser sees in-order data, not retransmissions;
                // a seeded constant acknowledgment number.
                let seq_seed = key::sub_seed(self.spec.seed, 0x5E9);
                // Per-flow writer state next to the flow, so a packet touches one entry.
                let mut state: Vec<(FlowRec, u32, u32)> = self
                    .flows
                    .iter()
                    .enumerate()
                    .map(|(i, f)| {
                        let i = i as u64;
                        (
                            *f,
                            key::mix64(i ^ seq_seed) as u32,
                            key::mix64(i ^ !seq_seed) as u32,
                        )
                    })
                    .collect();
                let mut rec = [0u8; frame::MAX_REC];
                self.run(stop, |first, flows, ts| {
                    touch(&state, flows, |s| s.1);
                    for (j, (&fi, &ts_ns)) in flows.iter().zip(ts).enumerate() {
                        let Some((fl, seq, ack)) = state.get_mut(fi as usize) else {
                            continue;
                        };
                        let cap = (fl.wire_len as usize).min(snap);
                        let p = frame::PacketFields {
                            ts_ns,
                            caplen: cap as u32,
                            // IPv4 identification: the packet index, wrapping.
                            ip_id: (first + j as u64) as u16,
                            seq: *seq,
                            ack: *ack,
                        };
                        let h = frame::write_record(fl, &p, &mut rec);
                        *seq = seq.wrapping_add((fl.wire_len as usize).saturating_sub(h) as u32);
                        let hl = h.min(cap);
                        buf.extend_from_slice(&rec[..frame::REC_HDR + hl]);
                        buf.extend_from_slice(&zeros[..(cap - hl).min(zeros.len())]);
                        written += 1;
                    }
                    if buf.len() >= CHUNK {
                        flush(&mut buf, &mut err);
                    }
                    err.is_none()
                });
            }
            OutFormat::Keys4 | OutFormat::Keys13 | OutFormat::Keys21 => {
                let n = format.record_len().unwrap_or(13).min(13);
                let ts_too = format == OutFormat::Keys21;
                self.run(stop, |_, flows, ts| {
                    touch(&self.flows, flows, |r| r.src);
                    for (&fi, &ts_ns) in flows.iter().zip(ts) {
                        let Some(fl) = self.flows.get(fi as usize) else {
                            continue;
                        };
                        buf.extend_from_slice(&fl.key13()[..n]);
                        if ts_too {
                            buf.extend_from_slice(&ts_ns.to_le_bytes());
                        }
                        written += 1;
                    }
                    if buf.len() >= CHUNK {
                        flush(&mut buf, &mut err);
                    }
                    err.is_none()
                });
            }
        }
        flush(&mut buf, &mut err);
        if let Some(e) = err {
            return Err(e);
        }
        w.flush()?;
        Ok(written)
    }

    /// Drives the packet order: calls `emit(index of the batch's first packet, flows,
    /// timestamps)` for up to [`BATCH`] packets at a time, in trace order, until `emit` returns
    /// false or `stop` true. The single source of
    /// trace order for both `for_each` and `write_to`. Batches let the Zipf draws of a batch and
    /// the consumer's table reads each run in a tight loop whose cache misses overlap, instead of
    /// one dependent miss per packet behind a long per-packet body.
    fn run(&self, stop: &dyn Fn() -> bool, mut emit: impl FnMut(u64, &[u32], &[u64]) -> bool) {
        let n = self.spec.packets;
        let mut clock = Clock::new(self.spec.period_ps());
        let mut draws = rng(self.spec.seed, STREAM_DRAWS);
        let mut flows = [0u32; BATCH];
        let mut ts = [0u64; BATCH];
        let mut i = 0u64;
        match self.spec.order {
            Order::Shuffled => {
                while i < n && !stop() {
                    let k = (n - i).min(BATCH as u64) as usize;
                    for (f, t) in flows[..k].iter_mut().zip(&mut ts[..k]) {
                        // < flows <= MAX_FLOWS < 2^32
                        *f = self.zipf.sample(draws.next_u64()) as u32;
                        *t = clock.tick();
                    }
                    if !emit(i, &flows[..k], &ts[..k]) {
                        return;
                    }
                    i += k as u64;
                }
            }
            Order::Bursty => {
                let Some(mut trains) = Trains::new(&self.zipf, n, &mut draws, &self.spec, stop)
                else {
                    return;
                };
                while i < n && !stop() {
                    let k = (n - i).min(BATCH as u64) as usize;
                    let mut got = 0;
                    for (f, t) in flows[..k].iter_mut().zip(&mut ts[..k]) {
                        let Some(next) = trains.next_flow() else {
                            break; // unreachable: the budgets sum to n
                        };
                        *f = next;
                        *t = clock.tick();
                        got += 1;
                    }
                    if got == 0 {
                        break;
                    }
                    if !emit(i, &flows[..got], &ts[..got]) {
                        return;
                    }
                    i += got as u64;
                }
            }
        }
    }
}

/// Packets per batch of [`Generator::run`].
const BATCH: usize = 256;

/// Draws between two calls of the stop callback while [`Trains::new`] tallies: about 0.2 ms of
/// work, so a stop is seen within milliseconds and the call costs nothing measurable.
const STOP_EVERY: u64 = 1 << 16;

/// Loads `table[i]` for every index of a batch in a tight loop so the cache misses overlap; the
/// per-packet loop that follows then hits cache. `black_box` keeps the loads from being elided.
#[inline]
fn touch<T>(table: &[T], idx: &[u32], word: impl Fn(&T) -> u32) {
    let mut acc = 0u32;
    for &i in idx {
        if let Some(e) = table.get(i as usize) {
            acc ^= word(e);
        }
    }
    std::hint::black_box(acc);
}

/// The bursty order: per-flow budgets from the iid Zipf draws, emitted as geometric trains of
/// flows picked in proportion to their remaining budget.
struct Trains {
    budget: Budgets,
    geo: Geometric,
    rng: rand_pcg::Pcg64Mcg,
    remaining: u64,
    current: u32,
    left: u64,
}

impl Trains {
    /// `None` when `stop` said so before the tally was complete. The tally is O(`n`) before the
    /// first packet (the budgets must hold every draw for the per-flow counts to equal the
    /// shuffled trace's), so it asks `stop` as it goes.
    fn new(
        zipf: &Alias,
        n: u64,
        draws: &mut rand_pcg::Pcg64Mcg,
        spec: &Spec,
        stop: &dyn Fn() -> bool,
    ) -> Option<Trains> {
        // Same draws as Shuffled, tallied: identical per-flow counts.
        let mut budget = vec![0u64; zipf.len()];
        let mut done = 0u64;
        while done < n {
            if stop() {
                return None;
            }
            let k = (n - done).min(STOP_EVERY);
            for _ in 0..k {
                if let Some(b) = budget.get_mut(zipf.sample(draws.next_u64())) {
                    *b += 1;
                }
            }
            done += k;
        }
        Some(Trains {
            budget: Budgets::new(budget),
            geo: Geometric::new(spec.burst_mean),
            rng: rng(spec.seed, STREAM_TRAINS),
            remaining: n,
            current: 0,
            left: 0,
        })
    }

    /// The flow of the next packet; `None` once every budget is spent.
    #[inline]
    fn next_flow(&mut self) -> Option<u32> {
        if self.left == 0 {
            if self.remaining == 0 {
                return None;
            }
            // Lemire reduction onto 0..remaining (bias <= remaining / 2^64).
            let target = ((self.rng.next_u64() as u128 * self.remaining as u128) >> 64) as u64;
            let flow = self.budget.find(target)?;
            let len = self
                .geo
                .sample(self.rng.next_u64())
                .min(self.budget.get(flow));
            if len == 0 {
                return None; // unreachable: find() lands on a flow with budget left
            }
            self.budget.sub(flow, len);
            self.remaining -= len;
            self.current = flow as u32;
            self.left = len;
        }
        self.left -= 1;
        Some(self.current)
    }
}

/// Timestamps `START_NS + floor(i * period_ps / 1000)` by increments: exact, no 128-bit division
/// per packet.
struct Clock {
    ns: u64,
    frac_ps: u64,
    step_ns: u64,
    step_ps: u64,
}

impl Clock {
    fn new(period_ps: u64) -> Clock {
        Clock {
            ns: START_NS,
            frac_ps: 0,
            step_ns: period_ps / 1000,
            step_ps: period_ps % 1000,
        }
    }

    /// The current timestamp, then advance by one period.
    #[inline]
    fn tick(&mut self) -> u64 {
        let t = self.ns;
        self.ns = self.ns.wrapping_add(self.step_ns);
        self.frac_ps += self.step_ps;
        if self.frac_ps >= 1000 {
            self.frac_ps -= 1000;
            self.ns = self.ns.wrapping_add(1);
        }
        t
    }
}

/// The 24-byte pcap global header: nanosecond magic a1b23c4d written little-endian, version 2.4,
/// LINKTYPE_ETHERNET.
fn pcap_header(snaplen: u32) -> [u8; 24] {
    let mut h = [0u8; 24];
    h[0..4].copy_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    h[4..6].copy_from_slice(&2u16.to_le_bytes());
    h[6..8].copy_from_slice(&4u16.to_le_bytes());
    // thiszone and sigfigs stay 0.
    h[16..20].copy_from_slice(&snaplen.to_le_bytes());
    h[20..24].copy_from_slice(&1u32.to_le_bytes());
    h
}

/// Generates the trace of `spec` in memory, calling `f` per packet in trace order.
pub fn generate(spec: &Spec, f: impl FnMut(&GenPacket)) -> Result<(), SpecError> {
    Generator::new(spec)?.for_each(f);
    Ok(())
}

/// Writes the trace of `spec` in `format` to `w` (buffered here). Returns packets written.
pub fn write(spec: &Spec, format: OutFormat, w: impl Write) -> Result<u64, GenError> {
    Ok(Generator::new(spec)?.write_to(format, w)?)
}

/// The benchmarks' key stream: `n` draws from Zipf(`skew`) over `keys` ranks by inverse CDF
/// (Pcg64 seeded with `seed`), rank `r` scattered to the 4-byte key `r * 0x9E37_79B1 ^
/// 0x5bd1_e995`. One definition for every crate's benchmarks and timing examples, so their
/// figures describe the same stream (the Agg-Evict paper's setting: Zipf(1.1), 500 k keys).
pub fn zipf_u32(n: usize, keys: usize, skew: f64, seed: u64) -> Vec<u32> {
    use rand::{Rng, SeedableRng};
    let mut cdf = Vec::with_capacity(keys);
    let mut acc = 0.0;
    for r in 1..=keys {
        acc += 1.0 / libm::pow(r as f64, skew);
        cdf.push(acc);
    }
    let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let u = rng.gen::<f64>() * acc;
            let r = cdf.partition_point(|&c| c < u) as u32;
            r.wrapping_mul(0x9E37_79B1) ^ 0x5bd1_e995
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_u32_follows_its_law_and_is_deterministic() {
        let v = zipf_u32(200_000, 1000, 1.1, 7);
        assert_eq!(v, zipf_u32(200_000, 1000, 1.1, 7));
        let h: f64 = (1..=1000).map(|r| 1.0 / (r as f64).powf(1.1)).sum();
        // Rank 1 (key 0 ^ 0x5bd1_e995) and rank 2: expected shares 1/h and 2^-1.1/h; binomial
        // sd ~0.0008 at n = 200k, checked at about 5 sd.
        let share = |k: u32| v.iter().filter(|&&x| x == k).count() as f64 / v.len() as f64;
        assert!((share(0x5bd1_e995) - 1.0 / h).abs() < 0.004);
        assert!((share(0x9E37_79B1 ^ 0x5bd1_e995) - 2f64.powf(-1.1) / h).abs() < 0.004);
        let distinct: std::collections::HashSet<u32> = v.iter().copied().collect();
        assert!(distinct.len() <= 1000 && distinct.len() > 900);
    }

    #[test]
    fn clock_is_exact() {
        for period in [1u64, 999, 1000, 1001, 333_333, 1_000_000, 7_654_321_987] {
            let mut c = Clock::new(period);
            for i in 0..5000u64 {
                let want = START_NS + (i as u128 * period as u128 / 1000) as u64;
                assert_eq!(c.tick(), want, "period {period} packet {i}");
            }
        }
    }

    #[test]
    fn pcap_header_bytes() {
        let h = pcap_header(128);
        assert_eq!(&h[..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        assert_eq!(&h[16..], &[128, 0, 0, 0, 1, 0, 0, 0]);
    }
}
