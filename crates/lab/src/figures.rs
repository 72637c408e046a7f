//! The figures: which configurations each one measures and how it is charted.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::time::Duration;

use aggevict::{Policy, Simd};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use key::KeyKind;

use crate::accel::share_only;
use crate::accel::AggSpec;
use crate::clock::{Clock, LatencyHist};
use crate::limit::{LimitLoop, LIMIT_BATCH};
use crate::output::{write_figure, Panel, Series};
use crate::run::{build_algorithm, measure, measure_e2e, Measured, RunCfg};
use crate::workload::Workload;
use crate::{LabArgs, LabError, Point, DEFAULT_PACKETS, EPOCH};

/// The nine algorithms of section 4 with their flow IDs (source IP; TwoLevel uses the
/// source-destination pair, section 4.2) and short names for chart axes.
/// Count-Min's parameters for the paper's configuration: counters only, no candidate set.
const COUNTERS_ONLY: &str = "candidates = 0";

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
const SKEWS: [f64; 6] = [0.6, 0.8, 1.0, 1.1, 1.3, 1.5];
const SKEWS_QUICK: [f64; 2] = [0.8, 1.5];
const ARRAYS: [usize; 7] = [250, 500, 1000, 2000, 4000, 8000, 16000];
const ARRAYS_QUICK: [usize; 3] = [250, 2000, 16000];

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
    /// limit_mpps by algorithm name (memory size depends only on the algorithm and key).
    limits: HashMap<&'static str, f64>,
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
            None => Workload::synthetic(&gen_spec(packets, flows, 1.1, gen::Order::Bursty))?,
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

    fn start(&self, fig: &str, runs: usize) {
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

    pub(crate) fn figure(&mut self, f: &str) -> Result<Vec<Point>, LabError> {
        let (points, title, panels) = match f {
            "2" => self.fig2()?,
            "5" => self.fig5()?,
            "6" => self.fig6()?,
            "7" => self.fig7()?,
            "8" => self.fig8()?,
            "share" => self.fig_share()?,
            "limit" => self.fig_limit()?,
            other => return Err(LabError::UnknownFigure(other.to_string())),
        };
        let stem = format!("fig{f}");
        write_figure(&self.args.out, &stem, &title, &points, &panels)?;
        Ok(points)
    }

    fn run(
        &self,
        fig: &str,
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
        fig: &str,
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

    // ---------------------------------------------------------------- figure 2

    /// Section 2, Figure 2: the batch-size dilemma. Throughput of an algorithm fed raw batches,
    /// and the share of distinct flows in a batch, against the batch size.
    fn fig2(&mut self) -> Result<(Vec<Point>, String, Vec<Panel>), LabError> {
        let batches = self.q(&BATCHES, &BATCHES_QUICK);
        // The brief asks for Count-Min; the paper's Figure 2a plots FlowRadar: run both at full
        // size.
        let algos: &[&'static str] = if self.args.quick {
            &["count_min"]
        } else {
            &["count_min", "flow_radar"]
        };
        self.start("2", batches.len() * algos.len());
        let mut points = Vec::new();
        for &b in batches {
            // Distinct flows per batch over (at most) the first 4M packets: enough batches for a
            // stable mean even at 8192.
            let share = self.base.unique_share(KeyKind::Src, b, 4_000_000);
            for &a in algos {
                let mut p = self.run("2", &self.base, a, KeyKind::Src, None, b)?;
                p.unique_share = Some(share);
                points.push(p);
            }
        }
        let cats: Vec<String> = batches.iter().map(|b| b.to_string()).collect();
        let thr = Panel {
            title: "(a) Throughput without Agg-Evict".into(),
            x_label: "batch size (packets)".into(),
            y_label: "Mpps".into(),
            cats: cats.clone(),
            series: algos
                .iter()
                .map(|a| {
                    series(
                        a,
                        &points,
                        batches.len(),
                        |p| p.algorithm == *a,
                        |p| p.mpps,
                        by_batch(batches),
                    )
                })
                .collect(),
        };
        let uniq = Panel {
            title: "(b) Avg. unique flow share per batch".into(),
            x_label: "batch size (packets)".into(),
            y_label: "unique flows / batch (%)".into(),
            cats,
            series: vec![series(
                "src",
                &points,
                batches.len(),
                |p| p.algorithm == algos[0],
                |p| p.unique_share.unwrap_or(0.0) * 100.0,
                by_batch(batches),
            )],
        };
        Ok((
            points,
            "Figure 2: impact of batch size".into(),
            vec![thr, uniq],
        ))
    }

    // ---------------------------------------------------------------- limit

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
            Err(LabError::Registry(e)) => {
                let why = e.to_string();
                self.bar.suspend(|| {
                    eprintln!(
                        "netsift bench agg-evict: {algorithm} left out (the trace has {}-byte {} keys): {why}",
                        self.base.key_len(key),
                        key.name()
                    )
                });
                self.unsupported.insert(algorithm, why);
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    fn limit_of(&mut self, algorithm: &'static str, key: KeyKind) -> Result<f64, LabError> {
        if let Some(&v) = self.limits.get(algorithm) {
            return Ok(v);
        }
        let mem =
            build_algorithm(algorithm, "", self.base.key_len(key), algo_seed())?.memory_bytes();
        let (mpps, _, _) = limit_run(&self.base, key, mem, &self.clock);
        self.limits.insert(algorithm, mpps);
        Ok(mpps)
    }

    /// The memory limit per algorithm size: one prefetched random counter increment per packet.
    fn fig_limit(&mut self) -> Result<(Vec<Point>, String, Vec<Panel>), LabError> {
        self.start("limit", NINE.len());
        let mut points = Vec::new();
        for (a, key, _) in NINE {
            if !self.supported(a, key)? {
                continue;
            }
            self.tick(&format!("limit: {a}"));
            let mem = build_algorithm(a, "", self.base.key_len(key), algo_seed())?.memory_bytes();
            let (mpps, avg, p99) = limit_run(&self.base, key, mem, &self.clock);
            self.limits.insert(a, mpps);
            points.push(Point {
                figure: "limit".into(),
                algorithm: a.into(),
                accel: "none".into(),
                key: key.name().into(),
                batch: LIMIT_BATCH,
                arrays: 0,
                policy: String::new(),
                simd: String::new(),
                skew: self.base.skew,
                order: self.base.order.clone(),
                mpps,
                ns_avg: avg,
                ns_p99: p99,
                evicted_share: None,
                limit_mpps: Some(mpps),
                unique_share: None,
                params: String::new(),
                packets: self.base.len() as u64,
            });
        }
        let cats: Vec<String> = NINE.iter().map(|n| n.2.to_string()).collect();
        let panel = Panel {
            title: "Memory limit: one random increment per packet".into(),
            x_label: "array of the algorithm's memory size".into(),
            y_label: "Mpps".into(),
            cats,
            series: vec![Series {
                name: "limit".into(),
                values: points.iter().map(|p| Some(p.mpps)).collect(),
            }],
        };
        Ok((points, "Limit loop".into(), vec![panel]))
    }

    // ---------------------------------------------------------------- figure 5

    /// Section 4.2, Figure 5: the nine algorithms with and without Agg-Evict (k = 2000, GRR,
    /// batch 32), with the memory limit of each algorithm's size.
    fn fig5(&mut self) -> Result<(Vec<Point>, String, Vec<Panel>), LabError> {
        let e2e = self.args.trace.clone();
        let per = if e2e.is_some() { 4 } else { 2 };
        let mut points = Vec::new();
        // Count-Min twice: with its defaults (the heavy-hitter candidate set, which the other
        // figures use too) and as the paper's artifact runs it, counters only (insert and point
        // query): the baseline a bare loop of the same memory accesses bounds (issue 3). The
        // charts show the defaults; CSV and JSON have both.
        let runs = NINE.iter().flat_map(|&(a, key, _)| {
            let variants: &[&'static str] = if a == "count_min" {
                &["", COUNTERS_ONLY]
            } else {
                &[""]
            };
            variants.iter().map(move |&params| (a, params, key))
        });
        self.start("5", (NINE.len() + 1) * per);
        for (a, params, key) in runs {
            if !self.supported(a, key)? {
                continue;
            }
            let limit = self.limit_of(a, key)?;
            for agg in [None, Some(AggSpec::default())] {
                let mut p = self.run_with("5", &self.base, a, params, key, agg.clone(), 32)?;
                p.limit_mpps = Some(limit);
                points.push(p);
                if let Some(path) = &e2e {
                    let cfg = RunCfg {
                        algorithm: a,
                        params,
                        agg: agg.clone(),
                        key,
                        batch: 32,
                        epoch: EPOCH,
                    };
                    self.tick(&format!("fig 5 end-to-end: {a}"));
                    let m = measure_e2e(
                        &path.to_string_lossy(),
                        self.base.key_len(key),
                        &cfg,
                        &self.clock,
                        algo_seed(),
                    )?;
                    let mut p = point("5", &cfg, &self.base, &m);
                    p.order = "capture_e2e".into();
                    p.limit_mpps = Some(limit);
                    points.push(p);
                }
            }
        }
        let cats: Vec<String> = NINE.iter().map(|n| n.2.to_string()).collect();
        let idx = |p: &Point| NINE.iter().position(|n| n.0 == p.algorithm);
        let pre = |accel: &'static str| {
            move |p: &Point| p.accel == accel && p.order != "capture_e2e" && p.params.is_empty()
        };
        let thr = Panel {
            title: "(a) Throughput".into(),
            x_label: "algorithm".into(),
            y_label: "Mpps".into(),
            cats: cats.clone(),
            series: vec![
                series("without", &points, 9, pre("none"), |p| p.mpps, idx),
                series("Agg-Evict", &points, 9, pre("agg_evict"), |p| p.mpps, idx),
                series(
                    "memory limit",
                    &points,
                    9,
                    pre("none"),
                    |p| p.limit_mpps.unwrap_or(0.0),
                    idx,
                ),
            ],
        };
        let lat = Panel {
            title: "(b) Latency per packet".into(),
            x_label: "algorithm".into(),
            y_label: "ns".into(),
            cats,
            series: vec![
                series("without avg", &points, 9, pre("none"), |p| p.ns_avg, idx),
                series("without p99", &points, 9, pre("none"), |p| p.ns_p99, idx),
                series(
                    "Agg-Evict avg",
                    &points,
                    9,
                    pre("agg_evict"),
                    |p| p.ns_avg,
                    idx,
                ),
                series(
                    "Agg-Evict p99",
                    &points,
                    9,
                    pre("agg_evict"),
                    |p| p.ns_p99,
                    idx,
                ),
            ],
        };
        Ok((
            points,
            "Figure 5: benefits of Agg-Evict on nine algorithms".into(),
            vec![thr, lat],
        ))
    }

    // ---------------------------------------------------------------- share

    /// Share of packets reaching the algorithm (updates per packet) for the nine, by policy and
    /// packet order. The aggregator alone, untimed.
    fn fig_share(&mut self) -> Result<(Vec<Point>, String, Vec<Panel>), LabError> {
        let shuffled = if self.args.trace.is_none() {
            Some(Workload::synthetic(&gen_spec(
                self.packets,
                self.flows,
                1.1,
                gen::Order::Shuffled,
            ))?)
        } else {
            None
        };
        let traces: Vec<&Workload> = std::iter::once(&self.base)
            .chain(shuffled.as_ref())
            .collect();
        self.start("share", NINE.len() * 2 * traces.len());
        let mut points = Vec::new();
        for w in &traces {
            for policy in [Policy::Grr, Policy::Lru] {
                for (a, key, _) in NINE {
                    self.tick(&format!("share: {a} {policy} {}", w.order));
                    let spec = AggSpec {
                        policy,
                        ..AggSpec::default()
                    };
                    let share = share_only(w, &spec, key, EPOCH)?;
                    points.push(Point {
                        figure: "share".into(),
                        algorithm: a.into(),
                        accel: "agg_evict".into(),
                        key: key.name().into(),
                        batch: 32,
                        arrays: spec.arrays,
                        policy: policy.name().into(),
                        simd: String::new(),
                        skew: w.skew,
                        order: w.order.clone(),
                        mpps: 0.0,
                        ns_avg: 0.0,
                        ns_p99: 0.0,
                        evicted_share: Some(share),
                        limit_mpps: None,
                        unique_share: None,
                        params: String::new(),
                        packets: w.len() as u64,
                    });
                }
            }
        }
        let cats: Vec<String> = NINE.iter().map(|n| n.2.to_string()).collect();
        let idx = |p: &Point| NINE.iter().position(|n| n.0 == p.algorithm);
        let mut ser = Vec::new();
        for w in &traces {
            for pol in ["grr", "lru"] {
                let order = w.order.clone();
                ser.push(series(
                    &format!("{pol} {order}"),
                    &points,
                    9,
                    move |p: &Point| p.policy == pol && p.order == order,
                    |p| p.evicted_share.unwrap_or(0.0) * 100.0,
                    idx,
                ));
            }
        }
        let panel = Panel {
            title: "Packets reaching the algorithm (k = 2000)".into(),
            x_label: "algorithm (its flow ID)".into(),
            y_label: "updates / packets (%)".into(),
            cats,
            series: ser,
        };
        Ok((
            points,
            "Share of packets evicted to the algorithm".into(),
            vec![panel],
        ))
    }

    // ---------------------------------------------------------------- figure 6

    /// Section 4.3, Figure 6: flow ID kinds (a, b) and batch size (c), Count-Min with and
    /// without Agg-Evict.
    fn fig6(&mut self) -> Result<(Vec<Point>, String, Vec<Panel>), LabError> {
        let kinds: &[KeyKind] = if self.args.quick {
            &[KeyKind::Src, KeyKind::FiveTuple]
        } else {
            &KeyKind::ALL
        };
        let batches = self.q(&BATCHES, &BATCHES_QUICK);
        self.start("6", 2 * (kinds.len() + batches.len()));
        let mut points = Vec::new();
        for &k in kinds {
            for agg in [None, Some(AggSpec::default())] {
                points.push(self.run("6", &self.base, "count_min", k, agg, 32)?);
            }
        }
        let mut bpoints = Vec::new();
        for &b in batches {
            for agg in [None, Some(AggSpec::default())] {
                bpoints.push(self.run("6", &self.base, "count_min", KeyKind::Src, agg, b)?);
            }
        }
        let kcats: Vec<String> = kinds.iter().map(|k| k.name().to_string()).collect();
        let kidx = move |p: &Point| kinds.iter().position(|k| k.name() == p.key);
        let acc = |a: &'static str| move |p: &Point| p.accel == a;
        let thr = Panel {
            title: "(a) Throughput: flow IDs (Count-Min)".into(),
            x_label: "flow ID".into(),
            y_label: "Mpps".into(),
            cats: kcats.clone(),
            series: vec![
                series(
                    "without",
                    &points,
                    kinds.len(),
                    acc("none"),
                    |p| p.mpps,
                    kidx,
                ),
                series(
                    "Agg-Evict",
                    &points,
                    kinds.len(),
                    acc("agg_evict"),
                    |p| p.mpps,
                    kidx,
                ),
            ],
        };
        let lat = Panel {
            title: "(b) Latency: flow IDs (Count-Min)".into(),
            x_label: "flow ID".into(),
            y_label: "ns per packet".into(),
            cats: kcats,
            series: vec![
                series(
                    "without avg",
                    &points,
                    kinds.len(),
                    acc("none"),
                    |p| p.ns_avg,
                    kidx,
                ),
                series(
                    "without p99",
                    &points,
                    kinds.len(),
                    acc("none"),
                    |p| p.ns_p99,
                    kidx,
                ),
                series(
                    "Agg-Evict avg",
                    &points,
                    kinds.len(),
                    acc("agg_evict"),
                    |p| p.ns_avg,
                    kidx,
                ),
                series(
                    "Agg-Evict p99",
                    &points,
                    kinds.len(),
                    acc("agg_evict"),
                    |p| p.ns_p99,
                    kidx,
                ),
            ],
        };
        let nb = batches.len();
        let bat = Panel {
            title: "(c) Latency: batch size (Count-Min)".into(),
            x_label: "batch size (packets)".into(),
            y_label: "ns per packet".into(),
            cats: batches.iter().map(|b| b.to_string()).collect(),
            series: vec![
                series(
                    "without avg",
                    &bpoints,
                    nb,
                    acc("none"),
                    |p| p.ns_avg,
                    by_batch(batches),
                ),
                series(
                    "without p99",
                    &bpoints,
                    nb,
                    acc("none"),
                    |p| p.ns_p99,
                    by_batch(batches),
                ),
                series(
                    "Agg-Evict avg",
                    &bpoints,
                    nb,
                    acc("agg_evict"),
                    |p| p.ns_avg,
                    by_batch(batches),
                ),
                series(
                    "Agg-Evict p99",
                    &bpoints,
                    nb,
                    acc("agg_evict"),
                    |p| p.ns_p99,
                    by_batch(batches),
                ),
            ],
        };
        points.extend(bpoints);
        Ok((
            points,
            "Figure 6: impact of flow ID and batch size".into(),
            vec![thr, lat, bat],
        ))
    }

    // ---------------------------------------------------------------- figure 7

    /// Section 4.3, Figure 7: traffic skew and packet order (a, b), aggregator size k (c).
    /// Count-Min, synthetic traces.
    fn fig7(&mut self) -> Result<(Vec<Point>, String, Vec<Panel>), LabError> {
        let skews = self.q(&SKEWS, &SKEWS_QUICK);
        let arrays = self.q(&ARRAYS, &ARRAYS_QUICK);
        let orders = [gen::Order::Bursty, gen::Order::Shuffled];
        self.start("7", skews.len() * orders.len() * 2 + arrays.len() + 1);
        let mut points = Vec::new();
        for &s in skews {
            for o in orders {
                self.bar
                    .set_message(format!("fig 7: generating skew {s} {o}"));
                let w = Workload::synthetic(&gen_spec(self.packets, self.flows, s, o))?;
                for agg in [None, Some(AggSpec::default())] {
                    points.push(self.run("7", &w, "count_min", KeyKind::Src, agg, 32)?);
                }
            }
        }
        // Aggregator size on the default trace, with the no-aggregator run as the reference.
        let mut kpoints = vec![self.run("7", &self.base, "count_min", KeyKind::Src, None, 32)?];
        for &k in arrays {
            let spec = AggSpec {
                arrays: k,
                ..AggSpec::default()
            };
            kpoints.push(self.run("7", &self.base, "count_min", KeyKind::Src, Some(spec), 32)?);
        }
        let scats: Vec<String> = skews.iter().map(|s| s.to_string()).collect();
        let sidx = move |p: &Point| skews.iter().position(|&s| Some(s) == p.skew);
        let ns = skews.len();
        let mut thr = Vec::new();
        let mut lat = Vec::new();
        for o in ["bursty", "shuffled"] {
            for (a, label) in [("none", "without"), ("agg_evict", "Agg-Evict")] {
                let sel = move |p: &Point| p.order == o && p.accel == a;
                thr.push(series(
                    &format!("{label} {o}"),
                    &points,
                    ns,
                    sel,
                    |p| p.mpps,
                    sidx,
                ));
                lat.push(series(
                    &format!("{label} {o}"),
                    &points,
                    ns,
                    sel,
                    |p| p.ns_avg,
                    sidx,
                ));
            }
        }
        let none = kpoints.first().cloned();
        let kidx = move |p: &Point| arrays.iter().position(|&k| k == p.arrays);
        let na = arrays.len();
        let agg_only = |p: &Point| p.accel == "agg_evict";
        let flat = |v: Option<f64>| Series {
            name: String::new(),
            values: vec![v; na],
        };
        let mut ks = vec![
            series("Agg-Evict avg", &kpoints, na, agg_only, |p| p.ns_avg, kidx),
            series("Agg-Evict p99", &kpoints, na, agg_only, |p| p.ns_p99, kidx),
        ];
        if let Some(n) = &none {
            let mut a = flat(Some(n.ns_avg));
            a.name = "without avg".into();
            let mut b = flat(Some(n.ns_p99));
            b.name = "without p99".into();
            ks.extend([a, b]);
        }
        let panels = vec![
            Panel {
                title: "(a) Throughput: skew (Count-Min)".into(),
                x_label: "Zipf skew".into(),
                y_label: "Mpps".into(),
                cats: scats.clone(),
                series: thr,
            },
            Panel {
                title: "(b) Avg. latency: skew (Count-Min)".into(),
                x_label: "Zipf skew".into(),
                y_label: "ns per packet".into(),
                cats: scats,
                series: lat,
            },
            Panel {
                title: "(c) Latency: aggregator size (Count-Min)".into(),
                x_label: "arrays k".into(),
                y_label: "ns per packet".into(),
                cats: arrays.iter().map(|k| k.to_string()).collect(),
                series: ks,
            },
        ];
        points.extend(kpoints);
        Ok((
            points,
            "Figure 7: impact of traffic skew and aggregator size".into(),
            panels,
        ))
    }

    // ---------------------------------------------------------------- figure 8

    /// Section 4.4, Figure 8: GRR vs LRU (a) and the SIMD lookup kernels vs linear search (b, c).
    fn fig8(&mut self) -> Result<(Vec<Point>, String, Vec<Panel>), LabError> {
        let pol_algos: [(&'static str, KeyKind); 2] =
            [("count_min", KeyKind::Src), ("space_saving", KeyKind::Src)];
        let simds: Vec<Simd> = [Simd::Off, Simd::Sse2, Simd::Avx2, Simd::Avx512]
            .into_iter()
            .filter(|&s| aggevict::simd::available(s))
            .collect();
        self.start("8", pol_algos.len() * 2 + simds.len());
        let mut points = Vec::new();
        for (a, k) in pol_algos {
            for policy in [Policy::Grr, Policy::Lru] {
                let spec = AggSpec {
                    policy,
                    ..AggSpec::default()
                };
                points.push(self.run("8", &self.base, a, k, Some(spec), 32)?);
            }
        }
        let mut spoints = Vec::new();
        for &s in &simds {
            let spec = AggSpec {
                simd: s,
                ..AggSpec::default()
            };
            spoints.push(self.run("8", &self.base, "count_min", KeyKind::Src, Some(spec), 32)?);
        }
        let pcats = vec!["Count-Min".to_string(), "Space-Saving".to_string()];
        let pidx = |p: &Point| match p.algorithm.as_str() {
            "count_min" => Some(0),
            "space_saving" => Some(1),
            _ => None,
        };
        let mut pser = Vec::new();
        for pol in ["grr", "lru"] {
            let sel = move |p: &Point| p.policy == pol;
            pser.push(series(
                &format!("{} avg", pol.to_uppercase()),
                &points,
                2,
                sel,
                |p| p.ns_avg,
                pidx,
            ));
            pser.push(series(
                &format!("{} p99", pol.to_uppercase()),
                &points,
                2,
                sel,
                |p| p.ns_p99,
                pidx,
            ));
        }
        let snames: Vec<String> = simds.iter().map(|s| s.name().to_string()).collect();
        let sn = snames.clone();
        let sidx = move |p: &Point| sn.iter().position(|s| *s == p.simd);
        let all = |_: &Point| true;
        let n = simds.len();
        let panels = vec![
            Panel {
                title: "(a) Latency: eviction policy".into(),
                x_label: "algorithm".into(),
                y_label: "ns per packet".into(),
                cats: pcats,
                series: pser,
            },
            Panel {
                title: "(b) Throughput: lookup kernel (Count-Min)".into(),
                x_label: "kernel (off = linear search)".into(),
                y_label: "Mpps".into(),
                cats: snames.clone(),
                series: vec![series(
                    "Agg-Evict",
                    &spoints,
                    n,
                    all,
                    |p| p.mpps,
                    sidx.clone(),
                )],
            },
            Panel {
                title: "(c) Latency: lookup kernel (Count-Min)".into(),
                x_label: "kernel (off = linear search)".into(),
                y_label: "ns per packet".into(),
                cats: snames,
                series: vec![
                    series("avg", &spoints, n, all, |p| p.ns_avg, sidx.clone()),
                    series("p99", &spoints, n, all, |p| p.ns_p99, sidx),
                ],
            },
        ];
        points.extend(spoints);
        Ok((points, "Figure 8: design choices".into(), panels))
    }
}

/// Time the limit loop over the whole trace (keys of `key` kind), batches of 32, each timed.
/// Returns (Mpps, ns_avg, ns_p99). The counters' total is checked against the packet count,
/// which both uses the result (so the loop cannot be optimised away) and validates it.
fn limit_run(w: &Workload, key: KeyKind, memory_bytes: usize, clock: &Clock) -> (f64, f64, f64) {
    let mut l = LimitLoop::new(memory_bytes, algo_seed());
    let mut keys = Vec::new();
    // Warm-up: the first epoch.
    w.keys_into(0, EPOCH, key, &mut keys);
    l.increment(&keys);
    l.reset();
    let mut hist = LatencyHist::new();
    let mut cycles = 0u64;
    let mut start = 0;
    while start < w.len() {
        w.keys_into(start, start + EPOCH, key, &mut keys);
        for b in keys.chunks(LIMIT_BATCH) {
            let t0 = clock.now();
            l.increment(b);
            let c = clock.now().wrapping_sub(t0);
            cycles += c;
            hist.add_batch(c, b.len() as u64);
        }
        start += EPOCH;
    }
    let total = std::hint::black_box(l.total());
    debug_assert_eq!(total, w.len() as u64);
    let ns = clock.to_ns(cycles as f64);
    let mpps = if ns > 0.0 && total > 0 {
        total as f64 / ns * 1e3
    } else {
        0.0
    };
    (
        mpps,
        clock.to_ns(hist.mean_cycles()),
        clock.to_ns(hist.quantile_cycles(0.99)),
    )
}

fn point(fig: &str, cfg: &RunCfg, w: &Workload, m: &Measured) -> Point {
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
    Series {
        name: name.to_string(),
        values,
    }
}
