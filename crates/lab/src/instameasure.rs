//! `netsift bench instameasure`: the InstaMeasure paper's experiments (papers/instameasure.txt,
//! section V, Figures 7-11) on the `insta` crate, driven directly (no runner).
//!
//! Each figure writes `<out>/fig<N>.csv`, `.json`, `.png` and `.svg`; every point is either
//! `measured` or `paper` (the paper's value, drawn beside ours):
//! * 7: regulation rate (table insertions per packet) per window of packets, and against L1
//!   memory, of the two-layer FlowRegulator against one-layer RCC (same L1 words, and RCC with the
//!   FlowRegulator's whole memory), on a synthetic Zipf(1.1) trace of 5-tuples.
//! * 8: retention capacity (mean packets a lone flow puts in before the regulator emits to the
//!   table) and saturation frequency (emissions per packet) by virtual vector size: a lone flow
//!   simulated with vectors of 8-64 bits (RCC: one layer of b bits; FlowRegulator: two layers of
//!   b/2), the `insta` crate's own regulator at its 8-bit vectors, and the saturation frequency
//!   in a loaded regulator (the trace of figure 7, 8192 words); (c) the accuracy those vector
//!   sizes give a lone flow at about 10 000 packets (saturation-based decoding, read at an
//!   emission).
//! * 9: throughput by worker count: the lab's timed loop, one thread per worker, each with its
//!   own instance over its share of a preloaded trace (flows split by hash, as the paper's
//!   manager core does), wall time from a common start to the last worker's end; no reader, no
//!   dispatch, no ground truth. Heavy-hitter detection delay against flow rate: one planted flow
//!   at 10-200 kpps inside 1 Mpps of Zipf background, threshold 744 packets (0.05% of a 1 Gbps
//!   link's 1.488 Mpps of minimum frames over one second); the delay is the capture time from
//!   the packet at which the true count reaches the threshold to the packet after which the
//!   table's count (saturation-based decoding, the paper's) first reaches it, or after which
//!   `run --instant`'s rule detects the flow (`insta::instant`, the same armed instance and
//!   crossing log) with `instant_sigmas` 0 (the paper's rule), 2 (the default) and 4 (never
//!   early).
//! * 10, 11: mean relative error of the packet and byte counts (estimate = table + held) by
//!   flow-size band ([10K, 100K), [100K, 1M), 1M+ packets; 10 MB, 100 MB, 1 GB for bytes) against
//!   total regulator memory (4 x L1); and the recall of the packet (byte) top-100/1K/10K lists
//!   with a 10 MB counter (the paper's top-k panels). Packet lengths vary within a flow (30% of a flow's packets
//!   are 64-byte frames, the rest its generated length), so the byte estimate (packets x the
//!   length of the packet that saturated) is a real sample.
//!
//! Every instance uses the paper's table (2^20 entries, probe limit 16); L1 words are the swept
//! parameter (8192 words = the paper's 32 KB L1, 128 KB with the three L2 arrays).

use std::path::PathBuf;
use std::time::Instant;

use algo::{Algorithm, BuildCtx};
use insta::{InstaConfig, InstaMeasure};
use key::{FlowKey, KeyKind};
use serde::Serialize;

use crate::output::{write_figure, Panel, Row};
use crate::LabError;

/// The paper's table: 2^20 entries (section IV-D), probe limit 16.
const WSAF_ENTRIES: usize = 1 << 20;
/// The paper's L1: 32 KB = 8192 words (128 KB with the L2 arrays).
const PAPER_WORDS: usize = 8192;
/// Packets per batch handed to an instance.
const BATCH: usize = 64;
/// Heavy-hitter threshold of figure 9b, packets (module docs).
pub const HH_THRESHOLD: u64 = 744;
/// Figure 9b's `--instant` rules: `instant_sigmas` of 0 (the paper's: the estimate itself), 2
/// (the default) and 4 (never before the true count crossed: `insta::instant`).
const SIGMAS: [f64; 3] = [0.0, 2.0, 4.0];

/// The series name of `--instant`'s rule at `z`.
fn rule_name(z: f64) -> String {
    if z == 0.0 {
        "instant, z = 0 (paper's rule)".into()
    } else if z >= insta::instant::TOLERANCE_SIGMAS {
        format!("instant, z = {z} (never early)")
    } else {
        format!("instant, z = {z} (default)")
    }
}

/// Background rate of figure 9b, packets per second.
const BACKGROUND_PPS: f64 = 1e6;

crate::figure_enum! {
    /// A figure of `bench instameasure`, or all of them.
    pub enum InstaFigure {
        Fig7 => "7",
        Fig8 => "8",
        Fig9 => "9",
        Fig10 => "10",
        Fig11 => "11",
    }
}

/// What to run (the CLI's `bench instameasure` flags).
#[derive(Clone, Debug)]
pub struct InstaArgs {
    pub figure: InstaFigure,
    /// Output directory (the CLI's default is "out/instameasure").
    pub out: PathBuf,
    /// Small traces and few points (seconds, for tests and CI).
    pub quick: bool,
    /// One line per measured configuration on standard error.
    pub progress: bool,
}

/// One value of a chart: ours (`source` = "measured") or the paper's (`source` = "paper").
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct InstaPoint {
    pub figure: String,
    /// Which chart of the figure: "time", "memory", "retention_rcc", "retention_fr", "frequency",
    /// "throughput",
    /// "delay_ms", "delay_packets" (figure 9's "signed_ms" and "early" are not drawn); figures
    /// 10 and 11: the size band ("10K+", "100K+", "1M+"; "10 MB+", ...).
    pub panel: String,
    /// The line: "FlowRegulator", "RCC", a band ("10K+"), ...
    pub series: String,
    /// "measured" or "paper".
    pub source: String,
    /// The x category as drawn ("32 KB", "window 3", "8 bits", "2 workers", "130 kpps").
    pub x: String,
    /// The x value as a number (KB, window index, bits, workers, pps).
    pub x_value: f64,
    /// The y value in `unit`.
    pub value: f64,
    /// "inserts/packet", "packets", "Mpps", "ms", "relative error", ...
    pub unit: String,
    /// Regulator bytes (L1, plus L2 for the FlowRegulator); 0 where it does not apply.
    pub memory_bytes: u64,
    /// Packets the value was measured over (0 for the paper's values).
    pub packets: u64,
    /// Flows averaged (error bands) or trials (delay); 0 where it does not apply.
    pub count: u64,
}

impl InstaPoint {
    #[allow(clippy::too_many_arguments)]
    fn new(
        figure: &str,
        panel: &str,
        series: &str,
        x: String,
        x_value: f64,
        value: f64,
        unit: &str,
    ) -> InstaPoint {
        InstaPoint {
            figure: figure.to_string(),
            panel: panel.to_string(),
            series: series.to_string(),
            source: "measured".to_string(),
            x,
            x_value,
            value,
            unit: unit.to_string(),
            memory_bytes: 0,
            packets: 0,
            count: 0,
        }
    }

    fn paper(mut self) -> InstaPoint {
        self.source = "paper".to_string();
        self
    }
}

/// A preloaded synthetic trace: the flows' keys by rank, and per packet its flow's rank and
/// frame length (and capture time).
struct Trace {
    keys: Vec<FlowKey>,
    ranks: Vec<u32>,
    lens: Vec<u16>,
    ts: Vec<u64>,
}

impl Trace {
    /// `packets` of Zipf(1.1) over `flows` 5-tuples, bursty order, 1 Mpps. With `vary`, 30% of
    /// a flow's packets are 64-byte frames (module docs).
    fn zipf(packets: u64, flows: u64, seed: u64, vary: bool) -> Result<Trace, LabError> {
        let spec = gen::Spec {
            packets,
            flows,
            seed,
            sources: Some(flows),
            rate_pps: BACKGROUND_PPS,
            ..gen::Spec::default()
        };
        let g = gen::Generator::new(&spec)?;
        let keys: Vec<FlowKey> = g.flows().map(|(t, _)| t.key(KeyKind::FiveTuple)).collect();
        let n = packets as usize;
        let (mut ranks, mut lens, mut ts) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        let mut x = seed ^ 0x9e37_79b9_7f4a_7c15;
        g.for_each(|p| {
            ranks.push(p.flow);
            x = key::mix64(x);
            let small = vary && x % 10 < 3;
            lens.push(if small { 64 } else { p.wire_len as u16 });
            ts.push(p.ts_ns);
        });
        Ok(Trace {
            keys,
            ranks,
            lens,
            ts,
        })
    }

    fn len(&self) -> usize {
        self.ranks.len()
    }
}

fn build(two: bool, words: usize, seed: u64) -> Result<InstaMeasure, LabError> {
    build_z(two, words, seed, InstaConfig::default().instant_sigmas)
}

/// [`build`] with `instant_sigmas = z` (figure 9's detection rules).
fn build_z(two: bool, words: usize, seed: u64, z: f64) -> Result<InstaMeasure, LabError> {
    let cfg = InstaConfig {
        words,
        wsaf_entries: WSAF_ENTRIES,
        probe_limit: 16,
        instant_sigmas: z,
    };
    let ctx = BuildCtx {
        seed,
        key_len: KeyKind::FiveTuple.len(false),
        ..BuildCtx::default()
    };
    InstaMeasure::new(two, cfg, &ctx).map_err(|e| LabError::Config(e.to_string()))
}

/// Feed packets `range` of `t` to `a` in batches, with weight 1 (`bytes` false) or the frame
/// length.
fn feed(a: &mut InstaMeasure, t: &Trace, range: std::ops::Range<usize>, bytes: bool) {
    let mut ks = [FlowKey::default(); BATCH];
    let mut ws = [1u64; BATCH];
    let mut i = range.start;
    while i < range.end {
        let n = BATCH.min(range.end - i);
        for j in 0..n {
            ks[j] = t.keys[t.ranks[i + j] as usize];
            ws[j] = if bytes { u64::from(t.lens[i + j]) } else { 1 };
        }
        a.update_batch(&ks[..n], &ws[..n]);
        i += n;
    }
}

fn kb(bytes: usize) -> String {
    format!("{} KB", bytes / 1024)
}

struct Bench<'a> {
    args: &'a InstaArgs,
}

impl Bench<'_> {
    fn say(&self, msg: &str) {
        if self.args.progress {
            eprintln!("bench instameasure: {msg}");
        }
    }

    fn figure(&self, f: InstaFigure) -> Result<Vec<InstaPoint>, LabError> {
        let mut all = Vec::new();
        for f in f.expand() {
            let t0 = Instant::now();
            let (title, points) = match f {
                InstaFigure::Fig7 => (
                    "Fig. 7: regulation rate (table inserts per packet)",
                    self.fig7()?,
                ),
                InstaFigure::Fig8 => (
                    "Fig. 8: retention capacity and saturation frequency",
                    self.fig8()?,
                ),
                InstaFigure::Fig9 => (
                    "Fig. 9: throughput by workers, heavy-hitter detection delay",
                    self.fig9()?,
                ),
                InstaFigure::Fig10 => (
                    "Fig. 10: packet counting error by flow size",
                    self.fig_error(false)?,
                ),
                InstaFigure::Fig11 => (
                    "Fig. 11: byte counting error by flow size",
                    self.fig_error(true)?,
                ),
                InstaFigure::All => unreachable!("expanded"),
            };
            let panels = panels(&points);
            write_figure(
                &self.args.out,
                &format!("fig{}", f.name()),
                title,
                &points,
                &panels,
                self.args.quick,
            )?;
            self.say(&format!(
                "figure {f}: {} points in {:.1} s",
                points.len(),
                t0.elapsed().as_secs_f64()
            ));
            all.extend(points);
        }
        Ok(all)
    }

    /// The trace of figures 7 and 8's loaded regulator.
    fn fig7_trace(&self) -> Result<Trace, LabError> {
        let (packets, flows) = if self.args.quick {
            (1_000_000, 50_000)
        } else {
            (20_000_000, 1_000_000)
        };
        Trace::zipf(packets, flows, 7, false)
    }

    fn fig7(&self) -> Result<Vec<InstaPoint>, LabError> {
        let t = self.fig7_trace()?;
        let n = t.len();
        let windows = if self.args.quick { 10 } else { 20 };
        let mut pts = Vec::new();
        // Regulation rate per window: FlowRegulator 8192 words (128 KB), RCC with the same L1
        // (32 KB) and with the FlowRegulator's memory (32768 words, 128 KB).
        let runs = [
            ("FlowRegulator 128 KB", true, PAPER_WORDS),
            ("RCC 32 KB", false, PAPER_WORDS),
            ("RCC 128 KB", false, 4 * PAPER_WORDS),
        ];
        for (name, two, words) in runs {
            let mut a = build(two, words, 1)?;
            let mut last = 0u64;
            for w in 0..windows {
                let r = w * n / windows..(w + 1) * n / windows;
                let len = r.len() as u64;
                feed(&mut a, &t, r, false);
                let mut p = InstaPoint::new(
                    "7",
                    "time",
                    name,
                    format!("{}", w + 1),
                    (w + 1) as f64,
                    (a.emits() - last) as f64 / len as f64,
                    "inserts/packet",
                );
                p.memory_bytes = a.regulator().memory_bytes() as u64;
                p.packets = len;
                pts.push(p);
                last = a.emits();
            }
            self.say(&format!("figure 7: {name}: {:.4}", a.regulation_rate()));
        }
        for (name, v) in [
            ("paper: FlowRegulator 128 KB", 0.0102),
            ("paper: RCC", 0.12),
        ] {
            for w in 0..windows {
                pts.push(
                    InstaPoint::new(
                        "7",
                        "time",
                        name,
                        format!("{}", w + 1),
                        (w + 1) as f64,
                        v,
                        "inserts/packet",
                    )
                    .paper(),
                );
            }
        }
        // Against L1 memory.
        let sizes: &[usize] = if self.args.quick {
            &[2048, 8192, 32768]
        } else {
            &[2048, 4096, 8192, 16384, 32768, 131072]
        };
        for &words in sizes {
            for (name, two) in [("FlowRegulator", true), ("RCC", false)] {
                let mut a = build(two, words, 1)?;
                feed(&mut a, &t, 0..n, false);
                let mut p = InstaPoint::new(
                    "7",
                    "memory",
                    name,
                    kb(words * 4),
                    (words * 4 / 1024) as f64,
                    a.regulation_rate(),
                    "inserts/packet",
                );
                p.memory_bytes = a.regulator().memory_bytes() as u64;
                p.packets = n as u64;
                pts.push(p);
            }
        }
        for (name, v) in [("paper: FlowRegulator", 0.0102), ("paper: RCC", 0.12)] {
            pts.push(
                InstaPoint::new(
                    "7",
                    "memory",
                    name,
                    kb(PAPER_WORDS * 4),
                    32.0,
                    v,
                    "inserts/packet",
                )
                .paper(),
            );
        }
        Ok(pts)
    }

    fn fig8(&self) -> Result<Vec<InstaPoint>, LabError> {
        let mut pts = Vec::new();
        let packets: u64 = if self.args.quick { 200_000 } else { 5_000_000 };
        let mut x = 0x5eed_u64;
        // Simulated lone flows, vectors of b bits (module docs).
        for b in [8u32, 16, 32, 64] {
            for (name, two) in [("FlowRegulator", true), ("RCC", false)] {
                let per = if two { b / 2 } else { b };
                let emits = lone_flow(per, two, packets, &mut x);
                let ret = packets as f64 / emits.max(1) as f64;
                let label = format!("{b} bits");
                let mut p = InstaPoint::new(
                    "8",
                    if two { "retention_fr" } else { "retention_rcc" },
                    name,
                    label.clone(),
                    f64::from(b),
                    ret,
                    "packets",
                );
                p.packets = packets;
                pts.push(p);
                let mut p = InstaPoint::new(
                    "8",
                    "frequency",
                    name,
                    label,
                    f64::from(b),
                    emits as f64 / packets as f64,
                    "emits/packet",
                );
                p.packets = packets;
                pts.push(p);
            }
        }
        // (c) Accuracy by vector size: saturation-based decoding (emissions x the expected
        // packets per emission, the coupon sum for b bits, squared with two layers) of a lone
        // flow, read at the emission that reaches `n` packets (the count the table holds then;
        // no partial cycle), mean relative error over `flows` flows.
        let (n, flows) = if self.args.quick {
            (10_000.0, 100)
        } else {
            (10_000.0, 400)
        };
        for b in [8u32, 16, 32, 64] {
            for (name, two) in [("FlowRegulator", true), ("RCC", false)] {
                let per = if two { b / 2 } else { b };
                let u = unit_of(per);
                let unit = if two { u * u } else { u };
                let k = (n / unit).ceil() as u64;
                let errs: Vec<f64> = (0..flows)
                    .map(|_| {
                        let sent = packets_to(per, two, k, &mut x) as f64;
                        (k as f64 * unit - sent).abs() / sent
                    })
                    .collect();
                let mut p = InstaPoint::new(
                    "8",
                    "accuracy",
                    name,
                    format!("{b} bits"),
                    f64::from(b),
                    mean(&errs),
                    "relative error",
                );
                p.packets = n as u64;
                p.count = flows;
                pts.push(p);
            }
        }
        // The crate's own regulator (8-bit vectors in 32-bit words), a lone flow.
        for (name, two, b) in [
            ("insta crate, lone flow", true, 16u32),
            ("insta crate, lone flow", false, 8),
        ] {
            let mut r = insta::regulator::Regulator::new(1, two);
            let mut bits = insta::rcc::Bits::new(3);
            let emits = (0..packets)
                .filter(|_| r.offer(0x1234_5678_9abc_def0, &mut bits).is_some())
                .count();
            let label = format!("{b} bits");
            let s = if two {
                format!("{name} (2 layers)")
            } else {
                format!("{name} (1 layer)")
            };
            // Only in the frequency panel (its inverse is the retention): a retention chart
            // with two more lines puts its legend over the 64-bit point.
            let mut p = InstaPoint::new(
                "8",
                "frequency",
                &s,
                label,
                f64::from(b),
                emits as f64 / packets as f64,
                "emits/packet",
            );
            p.packets = packets;
            pts.push(p);
        }
        // In a loaded regulator: the whole trace of figure 7, 8192 words.
        let t = self.fig7_trace()?;
        for (two, b) in [(true, 16u32), (false, 8)] {
            let mut a = build(two, PAPER_WORDS, 1)?;
            feed(&mut a, &t, 0..t.len(), false);
            let s = if two {
                "insta crate, Zipf trace (2 layers)"
            } else {
                "insta crate, Zipf trace (1 layer)"
            };
            let mut p = InstaPoint::new(
                "8",
                "frequency",
                s,
                format!("{b} bits"),
                f64::from(b),
                a.regulation_rate(),
                "emits/packet",
            );
            p.packets = t.len() as u64;
            p.memory_bytes = a.regulator().memory_bytes() as u64;
            pts.push(p);
        }
        // The paper's text: RCC with 64 bits 77 packets; FlowRegulator with 16 bits "around
        // 100" (its "up to 9 packets in the best case" for RCC's 8 bits is not a mean).
        for (s, panel, b, v) in [
            ("paper: RCC", "retention_rcc", 64u32, 77.0),
            ("paper: FlowRegulator", "retention_fr", 16, 100.0),
        ] {
            pts.push(
                InstaPoint::new(
                    "8",
                    panel,
                    s,
                    format!("{b} bits"),
                    f64::from(b),
                    v,
                    "packets",
                )
                .paper(),
            );
        }
        Ok(pts)
    }

    fn fig9(&self) -> Result<Vec<InstaPoint>, LabError> {
        let mut pts = self.fig9_throughput()?;
        pts.extend(self.fig9_delay()?);
        Ok(pts)
    }

    fn fig9_throughput(&self) -> Result<Vec<InstaPoint>, LabError> {
        let (packets, flows) = if self.args.quick {
            (1_000_000, 50_000)
        } else {
            (20_000_000, 1_000_000)
        };
        let t = Trace::zipf(packets, flows, 9, false)?;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut pts = Vec::new();
        for (name, two) in [("FlowRegulator", true), ("RCC", false)] {
            for w in 1..=cores {
                // Each worker's packets: the flows whose rank hashes to it, in trace order.
                let shares: Vec<Vec<u32>> = (0..w)
                    .map(|i| {
                        t.ranks
                            .iter()
                            .copied()
                            .filter(|&r| key::reduce(key::mix64(u64::from(r)), w) == i)
                            .collect()
                    })
                    .collect();
                let mut best = 0.0f64;
                // One untimed warm-up pass, then the best of two timed ones.
                for pass in 0..3 {
                    let start = std::sync::Barrier::new(w);
                    let secs: Vec<f64> = std::thread::scope(|s| {
                        let hs: Vec<_> = shares
                            .iter()
                            .map(|share| {
                                let (t, start) = (&t, &start);
                                s.spawn(move || -> Result<f64, LabError> {
                                    let mut a = build(two, PAPER_WORDS, 1)?;
                                    let mut ks = [FlowKey::default(); BATCH];
                                    let ws = [1u64; BATCH];
                                    start.wait();
                                    let t0 = Instant::now();
                                    for c in share.chunks(BATCH) {
                                        for (k, &r) in ks.iter_mut().zip(c) {
                                            *k = t.keys[r as usize];
                                        }
                                        a.update_batch(&ks[..c.len()], &ws[..c.len()]);
                                    }
                                    let e = t0.elapsed().as_secs_f64();
                                    std::hint::black_box(a.emits());
                                    Ok(e)
                                })
                            })
                            .collect();
                        hs.into_iter()
                            .map(|h| h.join().expect("worker panicked"))
                            .collect::<Result<Vec<f64>, LabError>>()
                    })?;
                    let wall = secs.iter().copied().fold(0.0, f64::max);
                    if pass > 0 {
                        best = best.max(packets as f64 / wall / 1e6);
                    }
                }
                let mut p = InstaPoint::new(
                    "9",
                    "throughput",
                    name,
                    format!("{w}"),
                    w as f64,
                    best,
                    "Mpps",
                );
                p.packets = packets;
                p.memory_bytes =
                    insta::regulator::Regulator::bytes_for(PAPER_WORDS, two) as u64 * w as u64;
                pts.push(p);
                self.say(&format!("figure 9: {name}, {w} workers: {best:.1} Mpps"));
            }
        }
        for (w, v) in [(1, 18.88), (2, 25.48), (3, 36.19), (4, 46.32)] {
            pts.push(
                InstaPoint::new(
                    "9",
                    "throughput",
                    "paper: FlowRegulator (Atom)",
                    format!("{w}"),
                    f64::from(w),
                    v,
                    "Mpps",
                )
                .paper(),
            );
        }
        Ok(pts)
    }

    fn fig9_delay(&self) -> Result<Vec<InstaPoint>, LabError> {
        let trials: u64 = if self.args.quick { 4 } else { 40 };
        // Background: 1 Mpps of Zipf traffic, long enough for the slowest flow to cross the
        // threshold and be reported (744 packets at 10 kpps: 74 ms, plus the delay).
        let rates: &[f64] = if self.args.quick {
            &[10e3, 50e3, 130e3, 200e3]
        } else {
            &[10e3, 20e3, 50e3, 100e3, 130e3, 200e3]
        };
        let bg_packets: u64 = if self.args.quick { 200_000 } else { 300_000 };
        let bg = Trace::zipf(bg_packets, 100_000, 99, false)?;
        // The planted flow starts after a warm-up of the background (the regulator loaded).
        let warm = bg.len() / 3;
        let t_start = bg.ts[warm];
        let mut pts = Vec::new();
        for &rate in rates {
            let gap = (1e9 / rate) as u64;
            // Per rule: signed delays in ms and in the flow's packets. Rule 0 is the table
            // count alone (the paper's saturation-based decoding); the others are `--instant`'s
            // rule (`insta::instant`) at each z of `SIGMAS`, on instances armed alike.
            let mut ms: Vec<Vec<f64>> = vec![vec![]; 1 + SIGMAS.len()];
            let mut pk: Vec<Vec<f64>> = vec![vec![]; 1 + SIGMAS.len()];
            for trial in 0..trials {
                let mut inst = SIGMAS
                    .iter()
                    .map(|&z| {
                        let mut a = build_z(true, PAPER_WORDS, 1000 + trial, z)?;
                        a.arm_instant(HH_THRESHOLD);
                        Ok(a)
                    })
                    .collect::<Result<Vec<_>, LabError>>()?;
                for a in &mut inst {
                    feed(a, &bg, 0..warm, false);
                }
                let planted = key::Tuple::v4(
                    [198, 18, 0, 1],
                    [198, 19, 0, 1],
                    40000 + trial as u16,
                    443,
                    6,
                )
                .key(KeyKind::FiveTuple);
                let (mut i, mut sent) = (warm, 0u64);
                let mut t_true = None;
                let mut found: Vec<Option<(u64, u64)>> = vec![None; 1 + SIGMAS.len()];
                let mut out = Vec::new();
                loop {
                    let next = t_start + sent * gap;
                    // Background packets before the planted one.
                    let j = i + bg.ts[i..].partition_point(|&ts| ts < next);
                    if j >= bg.len() {
                        break;
                    }
                    for a in &mut inst {
                        feed(a, &bg, i..j, false);
                        // Background flows crossing are not this trial's.
                        a.drain_crossings(&mut out);
                    }
                    out.clear();
                    i = j;
                    sent += 1;
                    if sent == HH_THRESHOLD {
                        t_true = Some(next);
                    }
                    for (r, a) in inst.iter_mut().enumerate() {
                        a.update(&planted, 1);
                        a.drain_crossings(&mut out);
                        if found[1 + r].is_none() && out.iter().any(|c| c.key == planted) {
                            found[1 + r] = Some((next, sent));
                        }
                        out.clear();
                    }
                    if found[0].is_none() && inst[0].table_packets(&planted) >= HH_THRESHOLD {
                        found[0] = Some((next, sent));
                    }
                    if t_true.is_some() && found.iter().all(Option::is_some) {
                        break;
                    }
                }
                let Some(tt) = t_true.filter(|_| found.iter().all(Option::is_some)) else {
                    return Err(LabError::Config(format!(
                        "figure 9: the background ran out before a {rate} pps flow was detected"
                    )));
                };
                // Signed: a rule can fire before the truth (the table count adds an emission's
                // expected cycle, which may be more than the flow has sent).
                for (r, f) in found.iter().enumerate() {
                    let (t, p) = f.expect("all found");
                    ms[r].push((t as f64 - tt as f64) / 1e6);
                    pk[r].push(p as f64 - HH_THRESHOLD as f64);
                }
            }
            // Drawn: the mean lateness (an early detection counts as no delay); the share of
            // early detections and the signed means are in the data only ("early", "signed_ms").
            let late = |v: &[f64]| mean(&v.iter().map(|d| d.max(0.0)).collect::<Vec<f64>>());
            let early = |v: &[f64]| v.iter().filter(|&&d| d < 0.0).count() as f64 / v.len() as f64;
            let x = format!("{}", (rate / 1e3) as u64);
            let names: Vec<String> = std::iter::once("table (saturation-based)".to_string())
                .chain(SIGMAS.iter().map(|z| rule_name(*z)))
                .collect();
            for (r, name) in names.iter().enumerate() {
                for (panel, v, unit) in [
                    ("delay_ms", late(&ms[r]), "ms"),
                    ("delay_packets", late(&pk[r]), "packets"),
                    ("signed_ms", mean(&ms[r]), "ms"),
                    ("early", early(&ms[r]), "share of trials"),
                ] {
                    let mut p = InstaPoint::new("9", panel, name, x.clone(), rate, v, unit);
                    p.count = trials;
                    pts.push(p);
                }
            }
            self.say(&format!(
                "figure 9: {rate} pps: mean signed delay ms: {}",
                names
                    .iter()
                    .zip(&ms)
                    .map(|(n, v)| format!("{n} {:.3}", mean(v)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        for (r, v) in [(10e3, 10.0), (130e3, 1.0)] {
            pts.push(
                InstaPoint::new(
                    "9",
                    "delay_ms",
                    "paper",
                    format!("{}", (r / 1e3) as u64),
                    r,
                    v,
                    "ms",
                )
                .paper(),
            );
        }
        Ok(pts)
    }

    fn fig_error(&self, bytes: bool) -> Result<Vec<InstaPoint>, LabError> {
        let fig = if bytes { "11" } else { "10" };
        let (packets, flows) = if self.args.quick {
            (2_000_000, 20_000)
        } else {
            (30_000_000, 100_000)
        };
        let t = Trace::zipf(packets, flows, 10, true)?;
        let mut truth = vec![0u64; t.keys.len()];
        for (i, &r) in t.ranks.iter().enumerate() {
            truth[r as usize] += if bytes { u64::from(t.lens[i]) } else { 1 };
        }
        let (unit, bands): (&str, [(&str, f64); 3]) = if bytes {
            ("bytes", [("10 MB+", 1e7), ("100 MB+", 1e8), ("1 GB+", 1e9)])
        } else {
            ("packets", [("10K+", 1e4), ("100K+", 1e5), ("1M+", 1e6)])
        };
        let sizes: &[usize] = if self.args.quick {
            &[8192, 32768]
        } else {
            &[8192, 16384, 32768, 65536, 131072]
        };
        let mut pts = Vec::new();
        for &words in sizes {
            let mut a = build(true, words, 1)?;
            feed(&mut a, &t, 0..t.len(), bytes);
            let mem = a.regulator().memory_bytes();
            for (bi, &(name, lo)) in bands.iter().enumerate() {
                let hi = bands.get(bi + 1).map_or(f64::INFINITY, |b| b.1);
                let errs: Vec<f64> = truth
                    .iter()
                    .enumerate()
                    .filter(|(_, &n)| (n as f64) >= lo && (n as f64) < hi)
                    .map(|(r, &n)| (a.estimate(&t.keys[r]) - n as f64).abs() / n as f64)
                    .collect();
                if errs.is_empty() {
                    continue;
                }
                let mut p = InstaPoint::new(
                    fig,
                    name,
                    "InstaMeasure (ours)",
                    kb(mem),
                    (mem / 1024) as f64,
                    mean(&errs),
                    "relative error",
                );
                p.memory_bytes = mem as u64;
                p.packets = packets;
                p.count = errs.len() as u64;
                pts.push(p);
            }
            self.say(&format!("figure {fig}: {} done ({unit})", kb(mem)));
        }
        pts.extend(self.top_k_recall(fig, &t, &truth, bytes)?);
        // The paper's text (section V-C; its byte paragraph says "128KB" twice, the second is
        // the 256 KB point by the packet paragraph's order).
        let paper: [(f64, [f64; 3]); 3] = if bytes {
            [
                (128.0, [3.47, 1.57, 0.54]),
                (256.0, [2.67, 1.00, 0.27]),
                (2048.0, [1.66, 0.61, 0.18]),
            ]
        } else {
            [
                (128.0, [3.48, 1.54, 0.56]),
                (256.0, [2.79, 0.99, 0.28]),
                (2048.0, [1.76, 0.58, 0.19]),
            ]
        };
        for (m, vals) in paper {
            for ((name, _), v) in bands.iter().zip(vals) {
                pts.push(
                    InstaPoint::new(
                        fig,
                        name,
                        "paper (CAIDA, 1 hour)",
                        format!("{m} KB"),
                        m,
                        v / 100.0,
                        "relative error",
                    )
                    .paper(),
                );
            }
        }
        Ok(pts)
    }
}

impl Bench<'_> {
    /// Figures 10(b) and 11(b): recall of the packet (byte) top-k lists with a 10 MB counter
    /// (section V-C, "Top-K identification": 10 MB, recall of top-100 to top-1M "mostly above
    /// 95%"): 10 MB of L1 + L2 words (655 360 L1 words) and the paper's table. A listed flow
    /// counts when its true size is at least the true k-th size (ties at the k-th size count
    /// for any of them). Top-1M needs more flows than the synthetic trace has.
    fn top_k_recall(
        &self,
        fig: &str,
        t: &Trace,
        truth: &[u64],
        bytes: bool,
    ) -> Result<Vec<InstaPoint>, LabError> {
        let mut a = build(true, TOPK_BYTES / 16, 1)?;
        feed(&mut a, t, 0..t.len(), bytes);
        let rank: std::collections::HashMap<FlowKey, usize> =
            t.keys.iter().enumerate().map(|(r, k)| (*k, r)).collect();
        let mut sorted = truth.to_vec();
        sorted.sort_unstable_by(|x, y| y.cmp(x));
        let ks: &[usize] = if self.args.quick {
            &[100, 1000]
        } else {
            &[100, 1000, 10_000]
        };
        let mut pts = Vec::new();
        for &k in ks {
            let kth = sorted[k.min(sorted.len()) - 1];
            let listed = a.top_k(k).unwrap_or_default();
            let hits = listed
                .iter()
                .filter(|(key, _)| rank.get(key).is_some_and(|&r| truth[r] >= kth))
                .count();
            let label = if k >= 1000 {
                format!("{}K", k / 1000)
            } else {
                k.to_string()
            };
            let mut p = InstaPoint::new(
                fig,
                "top-k recall",
                "InstaMeasure (ours)",
                label.clone(),
                k as f64,
                hits as f64 / k as f64,
                "recall",
            );
            p.memory_bytes = a.regulator().memory_bytes() as u64;
            p.packets = t.len() as u64;
            p.count = k as u64;
            pts.push(p);
            pts.push(
                InstaPoint::new(
                    fig,
                    "top-k recall",
                    "paper (text: mostly above 95%)",
                    label,
                    k as f64,
                    0.95,
                    "recall",
                )
                .paper(),
            );
        }
        self.say(&format!("figure {fig}: top-k recall done"));
        Ok(pts)
    }
}

/// The counter memory of the top-k panels of figures 10 and 11 (section V-C).
const TOPK_BYTES: usize = 10 << 20;

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.iter().sum::<f64>() / v.len() as f64
}

/// Table emissions of a lone flow of `packets` packets in a noise-free vector of `b` bits per
/// layer: a packet sets one random bit; a layer saturates when fewer than 30% of its bits are
/// zero and is cleared; with `two`, a first-layer saturation is one packet of the second layer.
/// Expected packets to saturate an empty `b`-bit vector of [`lone_flow`] (the coupon sum up to
/// the saturation's set bits, as `insta::rcc::UNIT` for 8 bits).
fn unit_of(b: u32) -> f64 {
    let sat_zeros = (f64::from(b) * 0.3).ceil() as u32 - 1;
    (0..b - sat_zeros)
        .map(|j| f64::from(b) / f64::from(b - j))
        .sum()
}

fn lone_flow(b: u32, two: bool, packets: u64, x: &mut u64) -> u64 {
    let mut f = LoneFlow::new(b, two);
    (0..packets).filter(|_| f.packet(x)).count() as u64
}

/// Packets a simulated lone flow sends until its `k`-th emission.
fn packets_to(b: u32, two: bool, k: u64, x: &mut u64) -> u64 {
    let mut f = LoneFlow::new(b, two);
    let (mut n, mut emits) = (0u64, 0u64);
    while emits < k {
        n += 1;
        emits += u64::from(f.packet(x));
    }
    n
}

/// A lone flow's vectors of `b` bits (one layer, or two), empty at the start.
struct LoneFlow {
    b: u32,
    two: bool,
    sat_zeros: u32,
    l1: u64,
    l2: u64,
}

impl LoneFlow {
    fn new(b: u32, two: bool) -> LoneFlow {
        LoneFlow {
            b,
            two,
            // Fewer than 30% zero: at most this many.
            sat_zeros: (f64::from(b) * 0.3).ceil() as u32 - 1,
            l1: 0,
            l2: 0,
        }
    }

    /// One packet (a random bit of L1 from the mixer state `x`): whether it emits.
    fn packet(&mut self, x: &mut u64) -> bool {
        let b = self.b;
        let full = |v: u64| b - v.count_ones() <= self.sat_zeros;
        let draw = |x: &mut u64| {
            *x = key::mix64(*x);
            1u64 << (*x % u64::from(b))
        };
        self.l1 |= draw(x);
        if !full(self.l1) {
            return false;
        }
        self.l1 = 0;
        if !self.two {
            return true;
        }
        self.l2 |= draw(x);
        if full(self.l2) {
            self.l2 = 0;
            return true;
        }
        false
    }
}

crate::output::labeled_point!(InstaPoint);

/// The charts of a figure: one panel per `panel` value, categories in order of first
/// appearance, one line per series. Figure 9's signed delays and early detections are data only
/// (see `fig9_delay`).
fn panels(points: &[InstaPoint]) -> Vec<Panel> {
    crate::output::category_panels(
        points,
        |p| p != "early" && !p.starts_with("signed_"),
        |name| {
            let (title, x, y) = match name {
                "time" => ("(a) per window of packets", "window", "inserts / packet"),
                "memory" => ("(b) against L1 memory", "L1 memory", "inserts / packet"),
                "retention_rcc" => (
                    "(c) retention capacity, RCC",
                    "virtual vector (all layers)",
                    "packets",
                ),
                "retention_fr" => (
                    "(a) retention capacity, FlowRegulator",
                    "virtual vector (all layers)",
                    "packets",
                ),
                "frequency" => (
                    "(b) saturation frequency",
                    "virtual vector (all layers)",
                    "emits / packet",
                ),
                "throughput" => ("(a) throughput", "workers", "Mpps"),
                "delay_ms" => (
                    "(b) detection delay (mean lateness)",
                    "flow rate (kpps)",
                    "ms",
                ),
                "delay_packets" => (
                    "(c) detection delay (mean lateness)",
                    "flow rate (kpps)",
                    "packets",
                ),
                "top-k recall" => ("(b) top-k recall, 10 MB counter", "k", "recall"),
                "accuracy" => (
                    "(c) accuracy, lone flows at 10 000 packets",
                    "virtual vector (all layers)",
                    "mean relative error",
                ),
                band => (band, "regulator memory (L1 + L2)", "mean relative error"),
            };
            let title = match name {
                "time" | "memory" | "retention_rcc" | "retention_fr" | "frequency"
                | "throughput" | "delay_ms" | "delay_packets" | "top-k recall" | "accuracy" => {
                    title.to_string()
                }
                band => format!("flows of {band}"),
            };
            (title, x.to_string(), y.to_string())
        },
    )
}

/// The CSV header: [`InstaPoint`]'s fields in order.
pub const CSV_HEADER: &str =
    "figure,panel,series,source,x,x_value,value,unit,memory_bytes,packets,count";

impl Row for InstaPoint {
    const HEADER: &'static str = CSV_HEADER;
    fn row(&self) -> Vec<String> {
        let mut r = self.labeled_row();
        r.extend([
            self.memory_bytes.to_string(),
            self.packets.to_string(),
            self.count.to_string(),
        ]);
        r
    }
}

/// Run the figure(s) of `args.figure`, write their files under `args.out`, return every point.
pub fn run_instameasure(args: &InstaArgs) -> Result<Vec<InstaPoint>, LabError> {
    Bench { args }.figure(args.figure)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for n in InstaFigure::NAMES {
            assert_eq!(n.parse::<InstaFigure>().unwrap().to_string(), n);
        }
        assert_eq!(InstaFigure::All.expand(), InstaFigure::EACH.to_vec());
        assert!("6".parse::<InstaFigure>().is_err());
    }

    /// The simulated lone flow's retention is the coupon partial sum: 9.74 packets for 8 bits
    /// (the crate's `UNIT[0]`), 76.6 for 64 bits (the paper's 77), 9.74^2 for two layers of 8.
    #[test]
    fn lone_flow_retention_is_the_coupon_sum() {
        let mut x = 1;
        let n = 2_000_000;
        for (b, two, want) in [
            (8, false, unit_of(8)),
            (64, false, unit_of(64)),
            (8, true, unit_of(8).powi(2)),
        ] {
            let got = n as f64 / lone_flow(b, two, n, &mut x) as f64;
            assert!(
                (got / want - 1.0).abs() < 0.02,
                "{b} bits, two {two}: {got} vs {want}"
            );
        }
        assert!((unit_of(8) - insta::rcc::UNIT[0]).abs() < 1e-9);
        assert!((unit_of(64) - 76.6).abs() < 0.05, "{}", unit_of(64));
    }
}
