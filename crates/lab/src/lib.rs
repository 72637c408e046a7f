//! `netsift bench agg-evict`: the harness that reproduces the Agg-Evict paper's figures
//! (papers/agg-evict.txt, sections 2 and 4) on this engine.
//!
//! Each figure is one call ([`run_agg_evict`] with `figure` = "2", "5", "6", "7", "8", "share",
//! "limit" or "all") and writes `<out>/fig<N>.csv`, `.json`, `.png` and `.svg`. The measurement
//! method is the Re-evaluating paper's (section 3.1): the trace is preloaded in memory, a warm-up
//! epoch runs first, throughput is packets over the summed time of the measured work, and every
//! batch is timed with the TSC so that per-packet latency (batch cycles / batch size) goes into a
//! histogram of 2,000 buckets of 2 cycles, from which the average and 99th percentile are read.
//! What the measured work includes is stated in [`run`]. With a capture file (`trace`), figure 5
//! additionally reports an end-to-end mode that reads and parses the file inside the timed loop.

pub mod accel;
pub mod clock;
mod figures;
pub mod limit;
pub mod output;
pub mod run;
pub mod workload;

use std::path::{Path, PathBuf};

use serde::Serialize;

/// What to run (the CLI's `bench agg-evict` flags).
#[derive(Clone, Debug)]
pub struct LabArgs {
    /// "2", "5", "6", "7", "8", "share", "limit" or "all".
    pub figure: String,
    /// A capture to use instead of the synthetic trace (figures 2, 5, 6, 8, share, limit; figure
    /// 7 varies the synthetic trace's skew and order, so it always generates).
    pub trace: Option<PathBuf>,
    /// Output directory (the CLI's default is "out/agg-evict").
    pub out: PathBuf,
    /// Packets of the synthetic trace (0 = the default, 20M).
    pub packets: u64,
    /// Small sizes and fewer points, for tests and CI (at most 1M packets, 100k flows).
    pub quick: bool,
    /// Show a progress bar on standard error (never drawn when it is not a terminal).
    pub progress: bool,
}

impl LabArgs {
    /// Defaults for `figure` with output under `out`.
    pub fn new(figure: &str, out: impl Into<PathBuf>) -> LabArgs {
        LabArgs {
            figure: figure.to_string(),
            trace: None,
            out: out.into(),
            packets: DEFAULT_PACKETS,
            quick: false,
            progress: false,
        }
    }
}

/// Default synthetic trace size (10 epochs of 2M packets; the paper's traces are 14 x 2M).
pub const DEFAULT_PACKETS: u64 = 20_000_000;
/// Packets per epoch (section 4.1: "the length of the measurement epoch to 2M packet").
pub const EPOCH: usize = 2_000_000;

/// The figures `all` runs, in order.
pub const FIGURES: [&str; 7] = ["2", "5", "6", "7", "8", "share", "limit"];

/// One measured point. Fields that a figure does not vary hold the default setting; `None`
/// where a field does not apply (no aggregator, not measured). `mpps`, `ns_avg` and `ns_p99` are
/// 0 for points that were not timed (figure "share" runs the aggregator alone).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Point {
    pub figure: String,
    pub algorithm: String,
    /// "none" or "agg_evict".
    pub accel: String,
    /// Key kind: src, dst, pair, four_tuple, five_tuple.
    pub key: String,
    /// Packets per batch handed to the front end.
    pub batch: usize,
    /// Aggregator arrays k (0 without Agg-Evict).
    pub arrays: usize,
    /// Eviction policy: grr, lru ("" without Agg-Evict).
    pub policy: String,
    /// Aggregator lookup kernel actually used: avx512, avx2, sse2, off ("" without Agg-Evict).
    pub simd: String,
    /// Zipf skew of a synthetic trace (None for a capture).
    pub skew: Option<f64>,
    /// "bursty", "shuffled", "capture", or "capture_e2e" (end-to-end mode).
    pub order: String,
    /// Throughput in million packets per second over the measured work.
    pub mpps: f64,
    /// Average per-packet latency (ns).
    pub ns_avg: f64,
    /// 99th-percentile per-packet latency (ns).
    pub ns_p99: f64,
    /// Updates reaching the algorithm per packet (Agg-Evict only).
    pub evicted_share: Option<f64>,
    /// Throughput of the memory-limit loop over an array of the algorithm's size.
    pub limit_mpps: Option<f64>,
    /// Average share of distinct keys per batch (figure 2).
    pub unique_share: Option<f64>,
    /// The algorithm's parameters when not its defaults (TOML, e.g. `candidates = 0`), else "".
    pub params: String,
    /// Packets measured.
    pub packets: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("unknown figure `{0}` (expected one of: 2, 5, 6, 7, 8, share, limit, all)")]
    UnknownFigure(String),
    #[error("the trace holds no IP packet")]
    EmptyTrace,
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Trace(#[from] trace::TraceError),
    #[error("synthetic trace: {0}")]
    Spec(#[from] gen::SpecError),
    #[error(transparent)]
    Registry(#[from] measure::registry::RegistryError),
    #[error(transparent)]
    Agg(#[from] aggevict::AggError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("writing JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("drawing a chart: {0}")]
    Chart(String),
}

impl LabError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> LabError {
        LabError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Run the figure(s) named by `args.figure`, write their files under `args.out`, and return
/// every point measured.
pub fn run_agg_evict(args: &LabArgs) -> Result<Vec<Point>, LabError> {
    let figs: Vec<&str> = match args.figure.as_str() {
        "all" => FIGURES.to_vec(),
        f if FIGURES.contains(&f) => vec![f],
        f => return Err(LabError::UnknownFigure(f.to_string())),
    };
    let mut lab = figures::Lab::new(args)?;
    let mut points = Vec::new();
    for f in figs {
        points.extend(lab.figure(f)?);
    }
    lab.finish();
    Ok(points)
}
