//! `run --instant`'s part of the report (the detection logic is `crate::instant`): each
//! detection as printed, and the per-epoch summaries of detections against exact detection with
//! the run's totals. Data only, below the logic that fills it.

use key::FlowKey;
use serde::Serialize;

/// Epoch summaries the report keeps (the latest); older ones are in the totals only.
pub const KEEP_EPOCHS: usize = 256;
/// Detected flows listed per epoch and algorithm (in detection order); the rest are counted.
pub const FLOWS_PER_EPOCH: usize = 256;
/// Detections waiting to be taken for printing ([`crate::Runner::take_detections`]).
pub const MAX_PENDING: usize = 1 << 16;

/// One detection, stamped: what `--instant` prints as it happens.
#[derive(Clone, Debug, Serialize)]
pub struct Detection {
    /// The epoch's index (as the report's epochs).
    pub epoch: u64,
    /// Capture time of the packet after which the detection estimate reached the threshold.
    pub ts_ns: u64,
    pub algorithm: String,
    pub key: String,
    /// The algorithm's estimate of the flow then, and the detection estimate that crossed (run's
    /// weight).
    pub estimate: f64,
    pub bound: f64,
    pub threshold: u64,
    #[serde(skip)]
    pub(crate) flow: FlowKey,
    /// The flow's true packets at that packet (with ground truth).
    #[serde(skip)]
    pub(crate) packets: Option<u64>,
}

/// `--instant`'s part of the report.
#[derive(Clone, Debug, Serialize)]
pub struct InstantReport {
    /// The detection threshold (run's weight).
    pub threshold: u64,
    pub truth: bool,
    pub note: Option<String>,
    /// Per epoch and algorithm with detections: the last [`KEEP_EPOCHS`] of the run.
    pub epochs: Vec<InstantEpoch>,
    /// Every epoch's counts summed over the run.
    pub totals: InstantTotals,
    /// Detections that arrived after the last [`crate::Runner::take_detections`] (the workers'
    /// last batches): a caller printing them as they come prints these before the report.
    #[serde(skip)]
    pub unprinted: Vec<Detection>,
    /// Detections never taken for printing and dropped ([`MAX_PENDING`]).
    pub unprinted_dropped: u64,
}

/// The counts of every epoch summarized, summed (`None`s as 0).
#[derive(Clone, Debug, Default, Serialize)]
pub struct InstantTotals {
    /// Epoch summaries (per epoch and algorithm) made, and dropped from `epochs`.
    pub summaries: u64,
    pub summaries_dropped: u64,
    pub detected: u64,
    pub crossed: u64,
    pub early: u64,
    pub late: u64,
    pub never: u64,
    #[serde(rename = "false")]
    pub falsely: u64,
    /// The largest detection delay of the run (capture time, ns; packets).
    pub max_delay_ns: Option<f64>,
    pub max_delay_packets: Option<f64>,
}

impl InstantTotals {
    pub(crate) fn add(&mut self, e: &InstantEpoch) {
        let n = |v: Option<usize>| v.unwrap_or(0) as u64;
        self.summaries += 1;
        self.detected += e.detected as u64;
        self.crossed += n(e.crossed);
        self.early += n(e.early);
        self.late += n(e.late);
        self.never += n(e.never);
        self.falsely += n(e.falsely);
        let max = |a: Option<f64>, d: &Option<Dist>| match (a, d) {
            (Some(a), Some(d)) => Some(a.max(d.max)),
            (a, d) => a.or(d.as_ref().map(|d| d.max)),
        };
        self.max_delay_ns = max(self.max_delay_ns, &e.delay_ns);
        self.max_delay_packets = max(self.max_delay_packets, &e.delay_packets);
    }
}

/// One epoch's detections by one algorithm against exact detection.
#[derive(Clone, Debug, Serialize)]
pub struct InstantEpoch {
    pub epoch: u64,
    pub algorithm: String,
    pub detected: usize,
    /// Flows whose exact count reached the threshold (with ground truth).
    pub crossed: Option<usize>,
    /// Detected before / at or after the exact crossing; crossed and never detected; detected
    /// and never crossed in the epoch.
    pub early: Option<usize>,
    pub late: Option<usize>,
    pub never: Option<usize>,
    #[serde(rename = "false")]
    pub falsely: Option<usize>,
    /// Detection time minus exact crossing time (ns; negative: early), and the flow's packets
    /// between them.
    pub delay_ns: Option<Dist>,
    pub delay_packets: Option<Dist>,
    /// The first [`FLOWS_PER_EPOCH`] detected flows, and how many more there were.
    pub flows: Vec<FlowDelay>,
    pub flows_omitted: usize,
}

/// One detected flow.
#[derive(Clone, Debug, Serialize)]
pub struct FlowDelay {
    pub key: String,
    pub detected_ns: u64,
    pub crossed_ns: Option<u64>,
    pub delay_ns: Option<i64>,
    pub delay_packets: Option<i64>,
}

/// A distribution of signed delays (nearest-rank percentiles).
#[derive(Clone, Debug, Serialize)]
pub struct Dist {
    pub count: usize,
    pub mean: f64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Dist {
    pub(crate) fn of(mut v: Vec<f64>) -> Option<Dist> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let q = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Some(Dist {
            count: v.len(),
            mean: v.iter().sum::<f64>() / v.len() as f64,
            min: v[0],
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            max: v[v.len() - 1],
        })
    }
}

impl Detection {
    /// The line `run --instant` prints for it.
    pub fn line(&self) -> String {
        format!(
            "detected: epoch {} at {}.{:09} s: {} {} estimate {:.0} (detection estimate {:.0}) \
             >= threshold {}",
            self.epoch,
            self.ts_ns / 1_000_000_000,
            self.ts_ns % 1_000_000_000,
            self.algorithm,
            self.key,
            self.estimate,
            self.bound,
            self.threshold
        )
    }
}

impl InstantReport {
    /// The report's table section.
    pub fn table(&self) -> String {
        let mut s = format!(
            "\ninstant detection (threshold {}; delay = detection - exact crossing, capture time \
             and the flow's packets; negative = early):\n",
            self.threshold
        );
        if let Some(n) = &self.note {
            s += &format!("  {n}\n");
        }
        s += &format!(
            "  {:<6} {:<14} {:>8} {:>8} {:>6} {:>6} {:>6} {:>6}  {:<40} {}\n",
            "epoch",
            "algorithm",
            "detected",
            "crossed",
            "early",
            "late",
            "never",
            "false",
            "delay ms p50/p90/p99/max",
            "delay packets p50/p90/p99/max"
        );
        let o = |v: Option<usize>| v.map_or("-".into(), |v| v.to_string());
        for e in &self.epochs {
            let ms = e.delay_ns.as_ref().map_or("-".into(), |d| {
                format!(
                    "{:.3}/{:.3}/{:.3}/{:.3}",
                    d.p50 / 1e6,
                    d.p90 / 1e6,
                    d.p99 / 1e6,
                    d.max / 1e6
                )
            });
            let p = e.delay_packets.as_ref().map_or("-".into(), |d| {
                format!("{}/{}/{}/{}", d.p50, d.p90, d.p99, d.max)
            });
            s += &format!(
                "  {:<6} {:<14} {:>8} {:>8} {:>6} {:>6} {:>6} {:>6}  {:<40} {}\n",
                e.epoch,
                e.algorithm,
                e.detected,
                o(e.crossed),
                o(e.early),
                o(e.late),
                o(e.never),
                o(e.falsely),
                ms,
                p
            );
        }
        let t = &self.totals;
        if t.summaries_dropped > 0 || t.summaries > 1 {
            s += &format!(
                "  run: {} detected, {} crossed, {} early, {} late, {} never, {} false; largest \
                 delay {:.3} ms, {} packets{}\n",
                t.detected,
                t.crossed,
                t.early,
                t.late,
                t.never,
                t.falsely,
                t.max_delay_ns.unwrap_or(0.0) / 1e6,
                t.max_delay_packets.unwrap_or(0.0),
                if t.summaries_dropped > 0 {
                    format!(" (the first {} epoch rows not kept)", t.summaries_dropped)
                } else {
                    String::new()
                }
            );
        }
        s
    }
}
