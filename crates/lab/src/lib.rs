//! `netsift bench agg-evict`: the harness that reproduces the Agg-Evict paper's figures
//! (papers/agg-evict.txt, sections 2 and 4) on this engine.
//!
//! Each figure is one call ([`run_agg_evict`] with `figure` = "2", "5", "6", "7", "8", "share",
//! "limit" or "all", the names of [`Figure`]) and writes `<out>/fig<N>.csv`, `.json`, `.png` and
//! `.svg`. The measurement method is the Re-evaluating paper's (section 3.1): the trace is
//! preloaded in memory, a warm-up epoch runs first, throughput is packets over the summed time of
//! the measured work, and every batch is timed with the TSC so that per-packet latency (batch
//! cycles / batch size) goes into a histogram of 2,000 buckets of 2 cycles, from which the
//! average and 99th percentile are read. What the measured work includes is stated in [`run`].
//! With a capture file (`trace`), figure 5 additionally reports an end-to-end mode that reads and
//! parses the file inside the timed loop.

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod accel;
pub mod clock;
mod figures;
pub mod instameasure;
pub use instameasure::{run_instameasure, InstaArgs, InstaFigure, InstaPoint};
pub mod limit;
pub mod output;
pub mod reeval;
pub use reeval::{run_reeval, ReevalArgs, ReevalFigure, ReevalPoint};
pub mod run;
pub mod sketchvisor;
pub use run::PRESET;
pub use sketchvisor::{run_sketchvisor, SvArgs, SvFigure, SvPoint, SvRegime};
pub mod workload;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Serialize;

/// What to run (the CLI's `bench agg-evict` flags).
#[derive(Clone, Debug)]
pub struct LabArgs {
    /// The figure to run, or all of them.
    pub figure: Figure,
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
    /// Skew and packet order of the synthetic trace (the paper's: Zipf 1.1, bursty; figure 7
    /// varies both itself).
    pub skew: f64,
    pub order: gen::Order,
    /// Agg-Evict's mode in figure 5 (`--agg-mode`; every other figure measures the paper's
    /// aggregator, `always`).
    pub agg_mode: front::AggMode,
}

impl LabArgs {
    /// Defaults for `figure` with output under `out`.
    pub fn new(figure: Figure, out: impl Into<PathBuf>) -> LabArgs {
        LabArgs {
            figure,
            trace: None,
            out: out.into(),
            packets: DEFAULT_PACKETS,
            quick: false,
            progress: false,
            skew: 1.1,
            order: gen::Order::Bursty,
            agg_mode: front::AggMode::Auto,
        }
    }
}

/// Default synthetic trace size (10 epochs of 2M packets; the paper's traces are 14 x 2M).
pub const DEFAULT_PACKETS: u64 = 20_000_000;
/// Packets per epoch (section 4.1: "the length of the measurement epoch to 2M packet").
pub const EPOCH: usize = 2_000_000;

/// A `--figure` enum of a paper's `bench` command: its figures with their names, and `All`
/// (named "all"); `EACH` (what `all` runs, in order), `NAMES` (`all` last, the CLI's values),
/// `name`, `expand`, `Display`, and `FromStr` (an unknown name is an error listing the names).
macro_rules! figure_enum {
    ($(#[$m:meta])* $vis:vis enum $name:ident { $($v:ident => $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $name {
            $($v,)+
            All,
        }

        impl $name {
            /// The figures `all` runs, in order.
            pub const EACH: [$name; [$($s),+].len()] = [$($name::$v),+];
            /// Every name, `all` last (the CLI's `--figure` values).
            pub const NAMES: [&'static str; [$($s),+].len() + 1] = [$($s,)+ "all"];

            pub const fn name(self) -> &'static str {
                match self {
                    $($name::$v => $s,)+
                    $name::All => "all",
                }
            }

            /// The figures this selects (`All`: every one, in order).
            pub fn expand(self) -> Vec<$name> {
                match self {
                    $name::All => $name::EACH.to_vec(),
                    f => vec![f],
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::LabError;

            fn from_str(s: &str) -> Result<$name, $crate::LabError> {
                $name::EACH
                    .into_iter()
                    .chain([$name::All])
                    .find(|f| f.name() == s)
                    .ok_or_else(|| {
                        $crate::LabError::Config(format!(
                            "unknown figure `{s}` (expected one of: {})",
                            $name::NAMES.join(", ")
                        ))
                    })
            }
        }
    };
}
pub(crate) use figure_enum;

/// The figures `all` runs, in order (the names of [`Figure::EACH`]).
pub const FIGURES: [&str; 7] = ["2", "5", "6", "7", "8", "share", "limit"];

/// A figure of the harness, or all of them. Parsed from and shown as its name: "2", "5", "6",
/// "7", "8", "share", "limit", "all" (the CLI's `--figure` values, [`Figure::NAMES`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Figure {
    /// Section 2, Figure 2: the batch-size dilemma.
    Fig2,
    /// Section 4.2, Figure 5: the nine algorithms with and without Agg-Evict.
    Fig5,
    /// Section 4.3, Figure 6: flow ID kinds and batch size.
    Fig6,
    /// Section 4.3, Figure 7: traffic skew and packet order, aggregator size.
    Fig7,
    /// Section 4.4, Figure 8: eviction policy and lookup kernel.
    Fig8,
    /// The share of packets evicted to the algorithm, by policy and packet order.
    Share,
    /// The memory limit loop per algorithm size.
    Limit,
    /// Every figure of [`Figure::EACH`], in order.
    All,
}

impl Figure {
    /// The figures `all` runs, in order.
    pub const EACH: [Figure; 7] = [
        Figure::Fig2,
        Figure::Fig5,
        Figure::Fig6,
        Figure::Fig7,
        Figure::Fig8,
        Figure::Share,
        Figure::Limit,
    ];

    /// Every name, in order, `all` last.
    pub const NAMES: [&'static str; 8] = ["2", "5", "6", "7", "8", "share", "limit", "all"];

    /// The name (the output files are `fig<name>.*`).
    pub const fn name(self) -> &'static str {
        match self {
            Figure::Fig2 => "2",
            Figure::Fig5 => "5",
            Figure::Fig6 => "6",
            Figure::Fig7 => "7",
            Figure::Fig8 => "8",
            Figure::Share => "share",
            Figure::Limit => "limit",
            Figure::All => "all",
        }
    }

    /// The figures this selects: `All` expands to [`Figure::EACH`], any other is itself.
    pub fn expand(self) -> &'static [Figure] {
        match self {
            Figure::Fig2 => &[Figure::Fig2],
            Figure::Fig5 => &[Figure::Fig5],
            Figure::Fig6 => &[Figure::Fig6],
            Figure::Fig7 => &[Figure::Fig7],
            Figure::Fig8 => &[Figure::Fig8],
            Figure::Share => &[Figure::Share],
            Figure::Limit => &[Figure::Limit],
            Figure::All => &Figure::EACH,
        }
    }
}

impl fmt::Display for Figure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Figure {
    type Err = LabError;

    /// A name of [`Figure::NAMES`]; anything else is [`LabError::UnknownFigure`], whose message
    /// lists the names.
    fn from_str(s: &str) -> Result<Figure, LabError> {
        Figure::EACH
            .into_iter()
            .chain([Figure::All])
            .find(|f| f.name() == s)
            .ok_or_else(|| LabError::UnknownFigure(s.to_string()))
    }
}

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
    /// Agg-Evict's mode: "always" (the paper's), "auto" (figure 5 with `--agg-mode auto`: it
    /// steps aside where it does not pay), "" without Agg-Evict.
    pub agg_mode: String,
    /// Share of packets that went through the aggregator (1 with "always").
    pub through_share: Option<f64>,
    /// Switches between aggregating and standing aside over the measured epochs.
    pub switches: Option<u64>,
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
    Catalog(#[from] catalog::CatalogError),
    #[error(transparent)]
    Front(#[from] front::FrontError),
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

/// Run the figure(s) of `args.figure`, write their files under `args.out`, and return every
/// point measured.
pub fn run_agg_evict(args: &LabArgs) -> Result<Vec<Point>, LabError> {
    let mut lab = figures::Lab::new(args)?;
    let points = lab.figure(args.figure)?;
    lab.finish();
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figure_names_parse_back_and_all_expands_to_every_figure() {
        let each: Vec<&str> = Figure::EACH.iter().map(|f| f.name()).collect();
        assert_eq!(each, FIGURES);
        assert_eq!(&Figure::NAMES[..7], &FIGURES[..]);
        for n in Figure::NAMES {
            let f: Figure = n.parse().unwrap();
            assert_eq!(f.to_string(), n);
        }
        assert_eq!(Figure::All.expand(), &Figure::EACH[..]);
        for f in Figure::EACH {
            assert_eq!(f.expand(), &[f][..]);
        }
        let e = "9".parse::<Figure>().unwrap_err();
        assert!(matches!(e, LabError::UnknownFigure(ref f) if f == "9"));
        assert!(e.to_string().contains("2, 5, 6, 7, 8, share, limit, all"));
    }
}
