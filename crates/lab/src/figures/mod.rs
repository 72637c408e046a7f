//! The figures: which configurations each one measures and how it is charted. Here: the
//! shared plumbing (the [`Lab`], its progress bar and measured runs, points and chart series)
//! and the dispatcher ([`Lab::figure`]); one module per figure.

mod fig2;
mod fig5;
mod fig6;
mod fig7;
mod fig8;
mod fig_limit;
mod fig_share;

use std::collections::HashMap;
use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use key::KeyKind;

use crate::accel::AggSpec;
use crate::clock::Clock;
use crate::output::{write_figure, Series, XAxis};
use crate::run::{build_algorithm, measure, Measured, RunCfg};
use crate::workload::Workload;
use crate::{Figure, LabArgs, LabError, Point, DEFAULT_PACKETS, EPOCH};

/// The nine algorithms of section 4 with their flow IDs (source IP; TwoLevel uses the
/// source-destination pair, section 4.2) and short names for chart axes.
const NINE: [(&str, KeyKind, &str); 9] = [
    ("count_min", KeyKind::Src, "CM"),
    ("flow_radar", KeyKind::Src, "FR"),
    ("rev_sketch", KeyKind::Src, "Rev"),
    ("univmon", KeyKind::Src, "UM"),
    ("space_saving", KeyKind::Src, "SS"),
    ("two_level", KeyKind::Pair, "TL"),
    ("mrac", KeyKind::Src, "MRAC"),
    ("fm", KeyKind::Src, "FM"),
    ("linear_counting", KeyKind::Src, "LC"),
];

const BATCHES: [usize; 9] = [32, 64, 128, 256, 512, 1024, 2048, 4096, 8192];
const BATCHES_QUICK: [usize; 3] = [32, 512, 8192];

/// Master seed of the algorithms' hashes (the workspace default).
fn algo_seed() -> u64 {
    algo::BuildCtx::default().seed
}

pub(crate) struct Lab<'a> {
    args: &'a LabArgs,
    clock: Clock,
    packets: u64,
    flows: u64,
    base: Workload,
    bar: ProgressBar,
    /// The memory limit by algorithm name (memory size depends only on the algorithm and key).
    limits: HashMap<&'static str, fig_limit::Limit>,
    /// Algorithms that cannot be built for the trace's widest key (reported once each).
    unsupported: HashMap<&'static str, String>,
}

fn gen_spec(packets: u64, flows: u64, skew: f64, order: gen::Order) -> gen::Spec {
    gen::Spec {
        packets,
        flows,
        // sources = flows: every flow its own source, so per-source sizes are Zipf(skew) as in
        // the paper's CAIDA trace keyed by source IP (section 4.1).
        sources: Some(flows),
        skew,
        order,
        seed: 1,
        ..gen::Spec::default()
    }
}

impl<'a> Lab<'a> {
    pub(crate) fn new(args: &'a LabArgs) -> Result<Lab<'a>, LabError> {
        let mut packets = if args.packets == 0 {
            DEFAULT_PACKETS
        } else {
            args.packets
        };
        let mut flows = 500_000;
        if args.quick {
            packets = packets.min(1_000_000);
            flows = 100_000;
        }
        let bar = if args.progress && std::io::stderr().is_terminal() {
            let b = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            if let Ok(style) =
                ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            {
                b.set_style(style.progress_chars("=> "));
            }
            b
        } else {
            ProgressBar::hidden()
        };
        bar.set_message("preparing the trace");
        let base = match &args.trace {
            Some(p) => Workload::capture(&p.to_string_lossy())?,
            None => Workload::synthetic(&gen_spec(packets, flows, args.skew, args.order))?,
        };
        if base.is_empty() {
            return Err(LabError::EmptyTrace);
        }
        Ok(Lab {
            args,
            clock: Clock::calibrate(Duration::from_millis(if args.quick { 20 } else { 200 })),
            packets,
            flows,
            base,
            bar,
            limits: HashMap::new(),
            unsupported: HashMap::new(),
        })
    }

    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
    }

    fn start(&self, fig: Figure, runs: usize) {
        self.bar.set_length(runs as u64);
        self.bar.set_position(0);
        self.bar.set_message(format!("figure {fig}"));
    }

    fn tick(&self, what: &str) {
        self.bar.set_message(what.to_string());
        self.bar.inc(1);
    }

    fn q<T: Copy>(&self, full: &'static [T], quick: &'static [T]) -> &'static [T] {
        if self.args.quick {
            quick
        } else {
            full
        }
    }

    /// Measure, chart and write `f` (`All`: every figure in turn, in [`Figure::EACH`]'s order).
    pub(crate) fn figure(&mut self, f: Figure) -> Result<Vec<Point>, LabError> {
        let (points, title, panels) = match f {
            Figure::Fig2 => self.fig2()?,
            Figure::Fig5 => self.fig5()?,
            Figure::Fig6 => self.fig6()?,
            Figure::Fig7 => self.fig7()?,
            Figure::Fig8 => self.fig8()?,
            Figure::Share => self.fig_share()?,
            Figure::Limit => self.fig_limit()?,
            Figure::All => {
                let mut points = Vec::new();
                for &g in f.expand() {
                    points.extend(self.figure(g)?);
                }
                return Ok(points);
            }
        };
        let stem = format!("fig{f}");
        write_figure(
            &self.args.out,
            &stem,
            &title,
            &points,
            &panels,
            self.args.quick,
        )?;
        Ok(points)
    }

    fn run(
        &self,
        fig: Figure,
        w: &Workload,
        algorithm: &'static str,
        key: KeyKind,
        agg: Option<AggSpec>,
        batch: usize,
    ) -> Result<Point, LabError> {
        self.run_with(fig, w, algorithm, "", key, agg, batch)
    }

    /// [`Self::run`] with the algorithm's parameters (TOML; `""`: its defaults).
    #[allow(clippy::too_many_arguments)]
    fn run_with(
        &self,
        fig: Figure,
        w: &Workload,
        algorithm: &'static str,
        params: &'static str,
        key: KeyKind,
        agg: Option<AggSpec>,
        batch: usize,
    ) -> Result<Point, LabError> {
        let cfg = RunCfg {
            algorithm,
            params,
            agg,
            key,
            batch,
            epoch: EPOCH,
        };
        self.tick(&format!(
            "fig {fig}: {algorithm}{}{} {} key={} batch={batch}",
            if params.is_empty() { "" } else { " " },
            params,
            if cfg.agg.is_some() {
                "agg_evict"
            } else {
                "none"
            },
            key
        ));
        let m = measure(w, &cfg, &self.clock, algo_seed())?;
        Ok(point(fig, &cfg, w, &m))
    }

    /// Whether `algorithm` can be built for the trace's widest key of kind `key`. A capture with
    /// IPv6 packets needs 16-byte source keys, which reverse hashing cannot decode (RevSketch):
    /// such an algorithm's points are left out of the figure with a message on stderr naming it
    /// and the reason, rather than failing the whole run.
    fn supported(&mut self, algorithm: &'static str, key: KeyKind) -> Result<bool, LabError> {
        if self.unsupported.contains_key(algorithm) {
            return Ok(false);
        }
        match build_algorithm(algorithm, "", self.base.key_len(key), algo_seed()) {
            Ok(_) => Ok(true),
            Err(LabError::Catalog(e)) => {
                let why = e.to_string();
                self.bar.suspend(|| {
                    // Never panic on a closed stderr: the message is informational.
                    use std::io::Write as _;
                    let _ = writeln!(
                        std::io::stderr(),
                        "netsift bench agg-evict: {algorithm} left out (the trace has {}-byte {} keys): {why}",
                        self.base.key_len(key),
                        key.name()
                    );
                });
                self.unsupported.insert(algorithm, why);
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }
}

fn point(fig: Figure, cfg: &RunCfg, w: &Workload, m: &Measured) -> Point {
    let (accel, arrays, policy) = match &cfg.agg {
        Some(s) => ("agg_evict", s.arrays, s.policy.name().to_string()),
        None => ("none", 0, String::new()),
    };
    Point {
        figure: fig.to_string(),
        algorithm: cfg.algorithm.to_string(),
        accel: accel.to_string(),
        key: cfg.key.name().to_string(),
        batch: cfg.batch,
        arrays,
        policy,
        simd: m.simd.clone(),
        skew: w.skew,
        order: w.order.clone(),
        mpps: m.mpps,
        ns_avg: m.ns_avg,
        ns_p99: m.ns_p99,
        evicted_share: m.evicted_share,
        limit_mpps: None,
        unique_share: None,
        params: cfg.params.to_string(),
        packets: m.packets,
        agg_mode: cfg
            .agg
            .as_ref()
            .map_or(String::new(), |s| s.mode.name().to_string()),
        through_share: m.through_share,
        switches: m.switches,
    }
}

fn by_batch(batches: &'static [usize]) -> impl Fn(&Point) -> Option<usize> + Copy {
    move |p: &Point| batches.iter().position(|&b| b == p.batch)
}

/// A chart series: for the points `sel` keeps, `val` at the category `idx` gives.
fn series(
    name: &str,
    points: &[Point],
    n: usize,
    sel: impl Fn(&Point) -> bool,
    val: impl Fn(&Point) -> f64,
    idx: impl Fn(&Point) -> Option<usize>,
) -> Series {
    let mut values = vec![None; n];
    for p in points.iter().filter(|p| sel(p)) {
        if let Some(slot) = idx(p).and_then(|i| values.get_mut(i)) {
            *slot = Some(val(p));
        }
    }
    Series::new(name, values)
}

/// A numeric x axis at these values (batch sizes, skews, arrays).
fn numeric(xs: impl IntoIterator<Item = f64>) -> XAxis {
    XAxis::Numeric(xs.into_iter().collect())
}
