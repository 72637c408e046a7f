//! `netsift bench reeval`: the experiments of "Re-evaluating measurement algorithms in software"
//! (papers/reevaluating-measurement-algorithms.txt, sections 3-5) on this engine.
//!
//! Each figure writes `<out>/fig<N>.csv`, `.json`, `.png` and `.svg`:
//! * 1: one hash against several (section 3.2): the linear table against Cuckoo with 1 and 4
//!   entries a bucket, the count array against Count-Min (3 rows), by structure size, with the
//!   sketches' heavy-hitter precision.
//! * 2: the six structures (count array, linear, Cuckoo-1/4, Count-Min, heap) by structure size:
//!   average and p99 latency and heavy-hitter precision and recall (section 3.3).
//! * 3: skew (section 4.1): p99 of the count array against Count-Min, of heap, count array and
//!   linear, at one large size; the count array's latency by size for three skews.
//! * 4: entry size (the paper's Figure 6): a count array and a linear table whose entries hold a
//!   4-byte counter plus the first bytes of the latest packet, by value size.
//! * 5: key/value co-location (the paper's Figure 7a): the linear table with values inline
//!   against keys with an index into a separate value array, by value size and skew.
//! * 8: shared against separate structures on two threads (section 5.1): one array of
//!   `AtomicU32` updated with `fetch_add` by both, against one plain array per thread merged at the
//!   end, by array size.
//! * 9: a co-running memory-heavy thread (section 5.2) streaming over a buffer of growing size
//!   while the count array, the linear table and Cuckoo-4 (the `reeval` preset: 2^20 entries) are
//!   updated.
//!
//! (The issue numbers figures 4 and 5 after the tasks it names; the paper's Figures 4 and 5 are
//! superspreader and change detection, its entry-size and co-location figures are 6 and 7.)
//!
//! Method (section 3.1): keys are source/destination pairs (8 bytes) of a synthetic Zipf trace
//! (every flow its own pair, flows drawn independently: the paper samples its pool the same way);
//! epochs of 2M packets, one untimed warm-up epoch first; updates in batches of 64 packets, each
//! batch timed with `Instant`, the clock's own cost (`measure::runner::clock_overhead_ns`, one
//! empty timed region) subtracted once per batch; a batch's time is shared evenly by its packets.
//! The average is total time over packets, the p99 the 99th percentile of the batches' per-packet
//! times. Precision and recall are those of heavy hitters, pairs above 0.1% of the epoch's
//! packets, against exact counts (section 3.1), averaged over the measured epochs. Resets at
//! epoch ends are not timed. Figures 1-3 and 9 use the catalog's algorithms built with the
//! `reeval` preset (their size parameter swept where the figure sweeps size); figures 4, 5 and 8
//! are hand-written structures, because the experiment is the structure's layout or its sharing.

use std::collections::HashMap;
use std::hint::black_box;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Instant;

use algo::{Algorithm, BuildCtx};
use key::{FlowKey, HashFn};
use serde::Serialize;

use crate::output::{csv_field, write_figure, Panel, Row, Series, XAxis};
use crate::LabError;

/// The preset every catalog algorithm of these figures is built with.
pub const REEVAL_PRESET: &str = "reeval";

/// Packets per batch (section 3.1: "We process packets in batches of 64").
pub const BATCH: usize = 64;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

crate::figure_enum! {
    /// A figure of `bench reeval`, or all of them.
    pub enum ReevalFigure {
        Fig1 => "1",
        Fig2 => "2",
        Fig3 => "3",
        Fig4 => "4",
        Fig5 => "5",
        Fig8 => "8",
        Fig9 => "9",
    }
}

/// What to run (the CLI's `bench reeval` flags).
#[derive(Clone, Debug)]
pub struct ReevalArgs {
    pub figure: ReevalFigure,
    /// Output directory (the CLI's default is "out/reeval").
    pub out: PathBuf,
    /// Small epochs, few points: seconds instead of minutes (tests, CI).
    pub quick: bool,
    /// One line per measured configuration on standard error.
    pub progress: bool,
}

/// One measured configuration. `None` where a field does not apply.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ReevalPoint {
    pub figure: String,
    /// The chart line this point belongs to (the paper's labels: "Count array", "Linear",
    /// "Cuckoo-1", "Cuckoo-4", "Count-Min", "Heap", "LinearPtr", "Shared", "Separate", ...).
    pub series: String,
    /// The catalog algorithm, or `hand-written: ...` for the figures' own structures.
    pub algorithm: String,
    /// Parameters the algorithm was built with (TOML, the preset's included).
    pub params: String,
    /// Bytes of the structure (`memory_bytes` of a catalog algorithm).
    pub memory_bytes: u64,
    /// The size the point stands for on a size axis (the swept target; `memory_bytes` is what
    /// the built structure takes).
    pub size_target: Option<u64>,
    pub skew: f64,
    /// Bytes of a value beside its key (figures 4, 5).
    pub value_bytes: Option<usize>,
    /// Threads updating (figure 8).
    pub threads: usize,
    /// Bytes the co-running thread streams over (figure 9; 0 = no co-runner).
    pub corunner_bytes: Option<u64>,
    /// Packets timed.
    pub packets: u64,
    /// Average per-packet latency (ns): the best (lowest) of the repetitions.
    pub ns_avg: f64,
    /// The lowest and highest average of the repetitions (`None`: measured once), drawn as
    /// error bars.
    pub ns_avg_min: Option<f64>,
    pub ns_avg_max: Option<f64>,
    /// 99th percentile over batches of the per-packet latency (ns).
    pub ns_p99: f64,
    /// Packets per second over the timed work, in millions (1000 / ns_avg).
    pub mpps: f64,
    /// Heavy-hitter precision against exact counts (catalog algorithms of figures 1-3).
    pub precision: Option<f64>,
    pub recall: Option<f64>,
    /// Figure 8, separate arrays: merging them at the epoch's end, in ns per packet.
    pub merge_ns_per_packet: Option<f64>,
    /// Figure 9: what the co-runner streamed while the structure was measured, GB/s.
    pub corunner_gbps: Option<f64>,
}

impl ReevalPoint {
    fn new(figure: ReevalFigure, series: &str, algorithm: &str, skew: f64) -> ReevalPoint {
        ReevalPoint {
            figure: figure.to_string(),
            series: series.to_string(),
            algorithm: algorithm.to_string(),
            params: String::new(),
            memory_bytes: 0,
            size_target: None,
            skew,
            value_bytes: None,
            threads: 1,
            corunner_bytes: None,
            packets: 0,
            ns_avg: 0.0,
            ns_avg_min: None,
            ns_avg_max: None,
            ns_p99: 0.0,
            mpps: 0.0,
            precision: None,
            recall: None,
            merge_ns_per_packet: None,
            corunner_gbps: None,
        }
    }

    fn timed(mut self, t: &Timing) -> ReevalPoint {
        self.packets = t.packets;
        self.ns_avg = t.avg();
        self.ns_avg_min = t.avg_range.map(|r| r.0);
        self.ns_avg_max = t.avg_range.map(|r| r.1);
        self.ns_p99 = t.p99();
        self.mpps = if self.ns_avg > 0.0 {
            1e3 / self.ns_avg
        } else {
            0.0
        };
        self
    }
}

/// The catalog structures of figures 1-3: (algorithm, the parameter that sizes it, parameters
/// beside the preset's, the paper's label). Count-Min has 3 rows in the paper (section 3.1); the
/// `reeval` preset leaves it at the catalog's 4, so the row count is given here.
const STRUCTS: [(&str, &str, &str, &str); 6] = [
    ("count_array", "width", "", "Count array"),
    ("linear_hash", "capacity", "", "Linear"),
    ("cuckoo1", "capacity", "", "Cuckoo-1"),
    ("cuckoo4", "capacity", "", "Cuckoo-4"),
    ("count_min", "width", "rows = 3", "Count-Min"),
    ("heap", "k", "", "Heap"),
];

fn label_of(algo: &str) -> &'static str {
    STRUCTS
        .iter()
        .find(|s| s.0 == algo)
        .map(|s| s.3)
        .unwrap_or("?")
}

/// The run's sizes.
struct Scale {
    epoch: usize,
    /// Timed epochs (after one warm-up epoch).
    epochs: usize,
    /// Repetitions of every configuration; the one with the lowest average is kept (the machine
    /// is shared: the least disturbed repetition is the closest to the structure's own cost).
    /// A repetition longer than [`LONG_REP`] is not repeated.
    reps: usize,
    flows: u64,
    sizes: &'static [u64],
    skews: &'static [f64],
    /// The size of figure 3's skew panels (the paper's 32 MB: past the L3 cache).
    skew_size: u64,
    skews_c: &'static [f64],
    values: &'static [usize],
    skews_value: &'static [f64],
    /// Entries of the hand-written tables of figures 4-5 (the `reeval` preset's 2^20).
    value_entries: usize,
    shared_sizes: &'static [u64],
    corunner: &'static [u64],
}

const FULL: Scale = Scale {
    epoch: 2_000_000,
    epochs: 2,
    reps: 3,
    flows: 1_000_000,
    sizes: &[64 * KIB, 512 * KIB, 4 * MIB, 32 * MIB, 128 * MIB],
    skews: &[0.75, 0.9, 1.1, 1.3, 1.5],
    skew_size: 128 * MIB,
    skews_c: &[0.75, 1.1, 1.5],
    values: &[4, 12, 20, 28, 60],
    skews_value: &[0.75, 1.25, 1.75],
    value_entries: 1 << 20,
    shared_sizes: &[4 * KIB, 64 * KIB, MIB, 16 * MIB, 128 * MIB],
    corunner: &[0, MIB, 8 * MIB, 32 * MIB, 256 * MIB],
};

const QUICK: Scale = Scale {
    epoch: 100_000,
    epochs: 1,
    reps: 1,
    flows: 20_000,
    sizes: &[64 * KIB, 4 * MIB],
    skews: &[0.75, 1.5],
    skew_size: 4 * MIB,
    skews_c: &[0.75, 1.5],
    values: &[4, 60],
    skews_value: &[0.75, 1.75],
    value_entries: 1 << 16,
    shared_sizes: &[4 * KIB, MIB],
    corunner: &[0, 8 * MIB],
};

/// A repetition taking longer than this is not repeated (a full Cuckoo-1 table kicking 500
/// times an insertion: its ordering is not in doubt).
const LONG_REP: std::time::Duration = std::time::Duration::from_secs(3);

/// Run `f` up to `reps` times and keep the result whose timing has the lowest average; its
/// timing's `avg_range` is the repetitions' lowest and highest average (when more than one ran).
fn best_of<T>(
    reps: usize,
    mut f: impl FnMut() -> Result<T, LabError>,
    timing: impl Fn(&mut T) -> &mut Timing,
) -> Result<T, LabError> {
    let mut best: Option<T> = None;
    let (mut lo, mut hi, mut ran) = (f64::INFINITY, 0.0f64, 0);
    for _ in 0..reps.max(1) {
        let t0 = Instant::now();
        let mut r = f()?;
        let long = t0.elapsed() > LONG_REP;
        let avg = timing(&mut r).avg();
        (lo, hi, ran) = (lo.min(avg), hi.max(avg), ran + 1);
        if best.as_mut().is_none_or(|b| avg < timing(b).avg()) {
            best = Some(r);
        }
        if long {
            break;
        }
    }
    let mut best = best.ok_or_else(|| LabError::Config("no repetition ran".into()))?;
    if ran > 1 {
        timing(&mut best).avg_range = Some((lo, hi));
    }
    Ok(best)
}

/// Per-batch latencies of one configuration.
#[derive(Default)]
struct Timing {
    /// ns per packet of every batch.
    per_packet: Vec<f64>,
    total_ns: f64,
    packets: u64,
    /// Set by [`best_of`]: the lowest and highest average of the repetitions.
    avg_range: Option<(f64, f64)>,
}

impl Timing {
    fn add(&mut self, ns: f64, n: usize) {
        let ns = ns.max(0.0);
        self.per_packet.push(ns / n as f64);
        self.total_ns += ns;
        self.packets += n as u64;
    }

    fn merge(&mut self, o: Timing) {
        self.per_packet.extend(o.per_packet);
        self.total_ns += o.total_ns;
        self.packets += o.packets;
    }

    fn avg(&self) -> f64 {
        if self.packets == 0 {
            0.0
        } else {
            self.total_ns / self.packets as f64
        }
    }

    fn p99(&self) -> f64 {
        if self.per_packet.is_empty() {
            return 0.0;
        }
        let mut v = self.per_packet.clone();
        v.sort_by(f64::total_cmp);
        let rank = ((0.99 * v.len() as f64).ceil() as usize).clamp(1, v.len());
        v[rank - 1]
    }
}

fn pair_key(k: u64) -> FlowKey {
    FlowKey::from_u32_pair((k >> 32) as u32, k as u32)
}

fn key_of(k: &FlowKey) -> u64 {
    let b = k.as_bytes();
    let mut w = [0u8; 8];
    let n = b.len().min(8);
    w[..n].copy_from_slice(&b[..n]);
    u64::from_be_bytes(w)
}

fn algo_seed() -> u64 {
    BuildCtx::default().seed
}

/// Heavy hitters of one epoch (pairs above 0.1% of its packets) and the threshold.
fn truth(keys: &[u64]) -> (Vec<u64>, u64) {
    let mut counts: HashMap<u64, u64> = HashMap::with_capacity(keys.len() / 4);
    for &k in keys {
        *counts.entry(k).or_insert(0) += 1;
    }
    let threshold = (keys.len() as u64).div_ceil(1000).max(1);
    let hh = counts
        .into_iter()
        .filter(|&(_, c)| c >= threshold)
        .map(|(k, _)| k)
        .collect();
    (hh, threshold)
}

struct Bench<'a> {
    args: &'a ReevalArgs,
    s: &'static Scale,
    clock_ns: f64,
    /// Pair keys by skew (bits of the f64): warm-up epoch then the timed ones.
    traces: HashMap<u64, Vec<u64>>,
    /// Catalog measurements by (algorithm, size target, skew bits): figures 1-3 share them.
    cache: HashMap<(&'static str, u64, u64), ReevalPoint>,
}

impl<'a> Bench<'a> {
    fn new(args: &'a ReevalArgs) -> Bench<'a> {
        Bench {
            args,
            s: if args.quick { &QUICK } else { &FULL },
            clock_ns: measure::runner::clock_overhead_ns(),
            traces: HashMap::new(),
            cache: HashMap::new(),
        }
    }

    fn say(&self, what: &str) {
        if self.args.progress {
            let _ = writeln!(std::io::stderr(), "bench reeval: {what}");
        }
    }

    /// The pair keys of a Zipf(`skew`) trace: (1 + epochs) epochs.
    fn trace(&mut self, skew: f64) -> Result<&[u64], LabError> {
        let s = self.s;
        if !self.traces.contains_key(&skew.to_bits()) {
            self.say(&format!("generating Zipf {skew}"));
            let spec = gen::Spec {
                packets: (s.epoch * (1 + s.epochs)) as u64,
                flows: s.flows,
                // Every flow its own source: pairs are flows, sized Zipf(skew).
                sources: Some(s.flows),
                skew,
                order: gen::Order::Shuffled,
                seed: 1,
                ..gen::Spec::default()
            };
            let mut keys = Vec::with_capacity(spec.packets as usize);
            gen::generate(&spec, |p| {
                let src = u32::from_be_bytes([
                    p.tuple.src[0],
                    p.tuple.src[1],
                    p.tuple.src[2],
                    p.tuple.src[3],
                ]);
                let dst = u32::from_be_bytes([
                    p.tuple.dst[0],
                    p.tuple.dst[1],
                    p.tuple.dst[2],
                    p.tuple.dst[3],
                ]);
                keys.push((u64::from(src) << 32) | u64::from(dst));
            })?;
            self.traces.insert(skew.to_bits(), keys);
        }
        Ok(&self.traces[&skew.to_bits()])
    }

    /// Build `algo` with the `reeval` preset, `extra` and, when `target` is given, its size
    /// parameter set so that the structure takes about `target` bytes.
    fn build(
        &self,
        algo: &'static str,
        target: Option<u64>,
    ) -> Result<(Box<dyn Algorithm>, String), LabError> {
        let (_, size_param, extra, _) = STRUCTS
            .iter()
            .find(|s| s.0 == algo)
            .copied()
            .ok_or_else(|| LabError::Config(format!("{algo} is not a reeval structure")))?;
        let ctx = BuildCtx {
            seed: algo_seed(),
            key_len: 8,
            ..BuildCtx::default()
        };
        let toml_err = |e: toml::de::Error| LabError::Config(format!("{algo}: {e}"));
        let mut params: toml::Table = extra.parse().map_err(toml_err)?;
        params = catalog::presets::apply(REEVAL_PRESET, algo, &params)?;
        if let Some(target) = target {
            // Bytes per unit of the size parameter from two sizes (fixed parts, such as the
            // sketches' heavy-hitter candidate set, cancel out): the target sizes the main
            // array, the paper's "measurement data size"; `memory_bytes` reports the whole.
            let entry = catalog::lookup(algo)?;
            let at = |u: i64| -> Result<u64, LabError> {
                let mut p = params.clone();
                p.insert(size_param.into(), toml::Value::Integer(u));
                entry
                    .memory(&p, &ctx)
                    .map_err(|e| LabError::Config(format!("{algo}: {e}")))
            };
            let (u0, m0, m1) = (1i64 << 14, at(1 << 14)?, at(1 << 15)?);
            let per = (m1.saturating_sub(m0) as f64 / u0 as f64).max(1e-9);
            let units = (target as f64 / per).floor().max(64.0) as i64;
            params.insert(size_param.into(), toml::Value::Integer(units));
        }
        let text = toml::to_string(&params)
            .unwrap_or_default()
            .trim()
            .replace('\n', "; ");
        Ok((catalog::build(algo, &params, &ctx)?, text))
    }

    /// Warm-up epoch, then the timed epochs: per-batch latency, heavy-hitter precision/recall.
    fn time_algo(
        &mut self,
        a: &mut dyn Algorithm,
        skew: f64,
    ) -> Result<(Timing, Option<f64>, Option<f64>), LabError> {
        let (epoch, epochs, clock_ns) = (self.s.epoch, self.s.epochs, self.clock_ns);
        let keys = self.trace(skew)?;
        let ones = [1u64; BATCH];
        let mut buf = [FlowKey::EMPTY; BATCH];
        let mut t = Timing::default();
        let (mut prec, mut rec, mut scored) = (0.0, 0.0, 0usize);
        for e in 0..=epochs {
            let ep = &keys[e * epoch..((e + 1) * epoch).min(keys.len())];
            for chunk in ep.chunks(BATCH) {
                for (b, &k) in buf.iter_mut().zip(chunk) {
                    *b = pair_key(k);
                }
                let n = chunk.len();
                let t0 = Instant::now();
                a.update_batch(&buf[..n], &ones[..n]);
                let ns = t0.elapsed().as_nanos() as f64 - clock_ns;
                if e > 0 {
                    t.add(ns, n);
                }
            }
            if e > 0 {
                let (hh, threshold) = truth(ep);
                if let Some(found) = a.heavy_hitters(threshold) {
                    let want: std::collections::HashSet<u64> = hh.iter().copied().collect();
                    let hit = found
                        .iter()
                        .filter(|(k, _)| want.contains(&key_of(k)))
                        .count();
                    prec += if found.is_empty() {
                        1.0
                    } else {
                        hit as f64 / found.len() as f64
                    };
                    rec += if want.is_empty() {
                        1.0
                    } else {
                        hit as f64 / want.len() as f64
                    };
                    scored += 1;
                }
            }
            black_box(a.memory_bytes());
            a.reset();
        }
        let avg = |x: f64| (scored > 0).then(|| x / scored as f64);
        Ok((t, avg(prec), avg(rec)))
    }

    /// A catalog structure at a size target and skew (cached across figures 1-3).
    fn catalog_point(
        &mut self,
        fig: ReevalFigure,
        algo: &'static str,
        target: u64,
        skew: f64,
    ) -> Result<ReevalPoint, LabError> {
        let key = (algo, target, skew.to_bits());
        if let Some(p) = self.cache.get(&key) {
            let mut p = p.clone();
            p.figure = fig.to_string();
            return Ok(p);
        }
        self.say(&format!(
            "figure {fig}: {algo} {} KiB, skew {skew}",
            target / KIB
        ));
        let (mut a, params) = self.build(algo, Some(target))?;
        let reps = self.s.reps;
        let (t, precision, recall) =
            best_of(reps, || self.time_algo(a.as_mut(), skew), |r| &mut r.0)?;
        let mut p = ReevalPoint::new(fig, label_of(algo), algo, skew).timed(&t);
        p.params = params;
        p.memory_bytes = a.memory_bytes() as u64;
        p.size_target = Some(target);
        p.precision = precision;
        p.recall = recall;
        self.cache.insert(key, p.clone());
        Ok(p)
    }

    fn figure(&mut self, f: ReevalFigure) -> Result<Vec<ReevalPoint>, LabError> {
        let (points, title, panels) = match f {
            ReevalFigure::Fig1 => self.fig1()?,
            ReevalFigure::Fig2 => self.fig2()?,
            ReevalFigure::Fig3 => self.fig3()?,
            ReevalFigure::Fig4 => self.fig4()?,
            ReevalFigure::Fig5 => self.fig5()?,
            ReevalFigure::Fig8 => self.fig8()?,
            ReevalFigure::Fig9 => self.fig9()?,
            ReevalFigure::All => {
                let mut all = Vec::new();
                for g in f.expand() {
                    all.extend(self.figure(g)?);
                }
                return Ok(all);
            }
        };
        write_figure(
            &self.args.out,
            &format!("fig{f}"),
            &title,
            &points,
            &panels,
            self.args.quick,
        )?;
        Ok(points)
    }

    fn size_sweep(
        &mut self,
        fig: ReevalFigure,
        algos: &[&'static str],
    ) -> Result<Vec<ReevalPoint>, LabError> {
        let mut points = Vec::new();
        for &size in self.s.sizes {
            for &algo in algos {
                points.push(self.catalog_point(fig, algo, size, 1.1)?);
            }
        }
        Ok(points)
    }

    /// Figure 1 (section 3.2): one hash against several, by size.
    fn fig1(&mut self) -> Result<Figured, LabError> {
        let f = ReevalFigure::Fig1;
        let points = self.size_sweep(
            f,
            &[
                "linear_hash",
                "cuckoo1",
                "cuckoo4",
                "count_array",
                "count_min",
            ],
        )?;
        let cats = size_cats(self.s.sizes);
        let sizes = self.s.sizes;
        let at = move |p: &ReevalPoint| sizes.iter().position(|&s| Some(s) == p.size_target);
        let lat = |labels: &[&str]| -> Vec<Series> {
            let mut v = Vec::new();
            for l in labels {
                v.push(avg_series(&format!("{l} avg"), &points, cats.len(), l, at));
                v.push(series(
                    &format!("{l} p99"),
                    &points,
                    cats.len(),
                    l,
                    at,
                    |p| Some(p.ns_p99),
                ));
            }
            v
        };
        let prec: Vec<Series> = ["Count array", "Count-Min"]
            .iter()
            .map(|l| series(l, &points, cats.len(), l, at, |p| p.precision))
            .collect();
        let panels = vec![
            numeric_panel(
                "(a) Linear vs Cuckoo (Z=1.1)",
                "structure size",
                "ns per packet",
                &cats,
                sizes.iter().map(|&s| s as f64),
                lat(&["Linear", "Cuckoo-1", "Cuckoo-4"]),
            ),
            numeric_panel(
                "(b) Count array vs Count-Min (3 rows)",
                "structure size",
                "ns per packet",
                &cats,
                sizes.iter().map(|&s| s as f64),
                lat(&["Count array", "Count-Min"]),
            ),
            numeric_panel(
                "(c) Heavy-hitter precision",
                "structure size",
                "precision",
                &cats,
                sizes.iter().map(|&s| s as f64),
                prec,
            ),
        ];
        Ok((
            points,
            "Figure 1: a single hash function against several".into(),
            panels,
        ))
    }

    /// Figure 2 (section 3.3): the six structures by size, latency and precision.
    fn fig2(&mut self) -> Result<Figured, LabError> {
        let f = ReevalFigure::Fig2;
        let algos: Vec<&'static str> = STRUCTS.iter().map(|s| s.0).collect();
        let points = self.size_sweep(f, &algos)?;
        let cats = size_cats(self.s.sizes);
        let sizes = self.s.sizes;
        let at = move |p: &ReevalPoint| sizes.iter().position(|&s| Some(s) == p.size_target);
        let by = |val: fn(&ReevalPoint) -> Option<f64>| -> Vec<Series> {
            STRUCTS
                .iter()
                .map(|s| series(s.3, &points, cats.len(), s.3, at, val))
                .collect()
        };
        let panels = vec![
            numeric_panel(
                "(a) Average latency (Z=1.1)",
                "structure size",
                "ns per packet",
                &cats,
                sizes.iter().map(|&s| s as f64),
                STRUCTS
                    .iter()
                    .map(|s| avg_series(s.3, &points, cats.len(), s.3, at))
                    .collect(),
            ),
            numeric_panel(
                "(b) p99 latency",
                "structure size",
                "ns per packet",
                &cats,
                sizes.iter().map(|&s| s as f64),
                by(|p| Some(p.ns_p99)),
            ),
            numeric_panel(
                "(c) Heavy-hitter precision",
                "structure size",
                "precision",
                &cats,
                sizes.iter().map(|&s| s as f64),
                by(|p| p.precision),
            ),
            numeric_panel(
                "(d) Heavy-hitter recall",
                "structure size",
                "recall",
                &cats,
                sizes.iter().map(|&s| s as f64),
                by(|p| p.recall),
            ),
        ];
        Ok((
            points,
            "Figure 2: hashes, sketches and heaps by size".into(),
            panels,
        ))
    }

    /// Figure 3 (section 4.1): skew.
    fn fig3(&mut self) -> Result<Figured, LabError> {
        let f = ReevalFigure::Fig3;
        let (skews, size) = (self.s.skews, self.s.skew_size);
        let mut points = Vec::new();
        for &z in skews {
            for algo in ["count_array", "count_min", "linear_hash", "heap"] {
                points.push(self.catalog_point(f, algo, size, z)?);
            }
        }
        // (c): the count array by size at three skews.
        let mut cpoints = Vec::new();
        for &z in self.s.skews_c {
            for &s in self.s.sizes {
                let mut p = self.catalog_point(f, "count_array", s, z)?;
                p.series = format!("Count array Z={z}");
                cpoints.push(p);
            }
        }
        let scats: Vec<String> = skews.iter().map(|z| z.to_string()).collect();
        let at = move |p: &ReevalPoint| {
            (p.size_target == Some(size))
                .then(|| skews.iter().position(|&z| z == p.skew))
                .flatten()
        };
        let p99 = |labels: &[&str]| -> Vec<Series> {
            labels
                .iter()
                .map(|l| series(l, &points, scats.len(), l, at, |p| Some(p.ns_p99)))
                .collect()
        };
        let sizes = self.s.sizes;
        let ccats = size_cats(sizes);
        let cat = move |p: &ReevalPoint| sizes.iter().position(|&s| Some(s) == p.size_target);
        let mut cs = Vec::new();
        for &z in self.s.skews_c {
            let l = format!("Count array Z={z}");
            cs.push(avg_series(
                &format!("Z={z} avg"),
                &cpoints,
                ccats.len(),
                &l,
                cat,
            ));
            cs.push(series(
                &format!("Z={z} p99"),
                &cpoints,
                ccats.len(),
                &l,
                cat,
                |p| Some(p.ns_p99),
            ));
        }
        let sz = size_cats(&[size]).remove(0);
        let panels = vec![
            numeric_panel(
                &format!("(a) p99: count array vs Count-Min ({sz})"),
                "Zipf skew",
                "ns per packet",
                &scats,
                skews.iter().copied(),
                p99(&["Count array", "Count-Min"]),
            ),
            numeric_panel(
                &format!("(b) p99: heap, count array, linear ({sz})"),
                "Zipf skew",
                "ns per packet",
                &scats,
                skews.iter().copied(),
                p99(&["Heap", "Count array", "Linear"]),
            ),
            numeric_panel(
                "(c) Count array by size and skew",
                "structure size",
                "ns per packet",
                &ccats,
                sizes.iter().map(|&s| s as f64),
                cs,
            ),
        ];
        points.extend(cpoints);
        Ok((points, "Figure 3: impact of traffic skew".into(), panels))
    }

    /// Figure 4 (the paper's Figure 6): entry size. Hand-written count array and linear table
    /// with `value_entries` entries of a 4-byte counter plus the latest packet's first bytes.
    fn fig4(&mut self) -> Result<Figured, LabError> {
        let f = ReevalFigure::Fig4;
        let mut points = Vec::new();
        for &v in self.s.values {
            for layout in [Layout::CountArray, Layout::Inline] {
                points.push(self.value_point(f, layout, v, 1.1)?);
            }
        }
        let values = self.s.values;
        let cats: Vec<String> = values.iter().map(|v| format!("{v} B")).collect();
        let at = move |p: &ReevalPoint| values.iter().position(|&v| Some(v) == p.value_bytes);
        let mut avg = Vec::new();
        let mut p99 = Vec::new();
        for l in [Layout::CountArray.label(), Layout::Inline.label()] {
            avg.push(avg_series(l, &points, cats.len(), l, at));
            p99.push(series(l, &points, cats.len(), l, at, |p| Some(p.ns_p99)));
        }
        let n = self.s.value_entries;
        let panels = vec![
            numeric_panel(
                &format!("(a) Average latency ({n} entries, Z=1.1)"),
                "value size",
                "ns per packet",
                &cats,
                values.iter().map(|&v| v as f64),
                avg,
            ),
            numeric_panel(
                "(b) p99 latency",
                "value size",
                "ns per packet",
                &cats,
                values.iter().map(|&v| v as f64),
                p99,
            ),
        ];
        Ok((
            points,
            "Figure 4 (paper's Figure 6): entry size".into(),
            panels,
        ))
    }

    /// Figure 5 (the paper's Figure 7a): values inline against keys with an index into a
    /// separate value array, by value size, at three skews.
    fn fig5(&mut self) -> Result<Figured, LabError> {
        let f = ReevalFigure::Fig5;
        let mut points = Vec::new();
        for &z in self.s.skews_value {
            for &v in self.s.values {
                for layout in [Layout::Inline, Layout::Ptr] {
                    points.push(self.value_point(f, layout, v, z)?);
                }
            }
        }
        let values = self.s.values;
        let cats: Vec<String> = values.iter().map(|v| format!("{v} B")).collect();
        let mut panels = Vec::new();
        for &z in self.s.skews_value {
            let at = move |p: &ReevalPoint| {
                (p.skew == z)
                    .then(|| values.iter().position(|&v| Some(v) == p.value_bytes))
                    .flatten()
            };
            let mut s = Vec::new();
            for l in [Layout::Inline.label(), Layout::Ptr.label()] {
                s.push(avg_series(&format!("{l} avg"), &points, cats.len(), l, at));
                s.push(series(
                    &format!("{l} p99"),
                    &points,
                    cats.len(),
                    l,
                    at,
                    |p| Some(p.ns_p99),
                ));
            }
            panels.push(numeric_panel(
                &format!("Z={z}"),
                "value size",
                "ns per packet",
                &cats,
                values.iter().map(|&v| v as f64),
                s,
            ));
        }
        Ok((
            points,
            "Figure 5 (paper's Figure 7a): key/value co-location".into(),
            panels,
        ))
    }

    fn value_point(
        &mut self,
        fig: ReevalFigure,
        layout: Layout,
        value: usize,
        skew: f64,
    ) -> Result<ReevalPoint, LabError> {
        self.say(&format!(
            "figure {fig}: {} value {value} B, skew {skew}",
            layout.label()
        ));
        let (entries, epoch, epochs, clock_ns) = (
            self.s.value_entries,
            self.s.epoch,
            self.s.epochs,
            self.clock_ns,
        );
        let reps = self.s.reps;
        let keys = self.trace(skew)?;
        let (t, memory) = best_of(
            reps,
            || dispatch_value(value, layout, entries, keys, epoch, epochs, clock_ns),
            |r| &mut r.0,
        )?;
        let mut p = ReevalPoint::new(fig, layout.label(), layout.algorithm(), skew).timed(&t);
        p.value_bytes = Some(value);
        p.memory_bytes = memory;
        p.params = format!("entries = {entries}; value_bytes = {value}");
        Ok(p)
    }

    /// Figure 8 (section 5.1): two threads, one shared array of atomics against one plain array
    /// each, merged at the end.
    fn fig8(&mut self) -> Result<Figured, LabError> {
        let f = ReevalFigure::Fig8;
        let (epoch, epochs, clock_ns) = (self.s.epoch, self.s.epochs, self.clock_ns);
        let sizes = self.s.shared_sizes;
        let keys = self.trace(1.1)?.to_vec();
        let mut points = Vec::new();
        for &size in sizes {
            for mode in [Sharing::One, Sharing::Shared, Sharing::Separate] {
                self.say(&format!("figure 8: {} {} KiB", mode.label(), size / KIB));
                let r = best_of(
                    self.s.reps,
                    || Ok(shared_run(mode, size, &keys, epoch, epochs, clock_ns)),
                    |r| &mut r.t,
                )?;
                let mut p = ReevalPoint::new(f, mode.label(), mode.algorithm(), 1.1).timed(&r.t);
                p.threads = mode.threads();
                p.memory_bytes = size * mode.copies();
                p.size_target = Some(size);
                p.params = format!("counters = {}; hash = xxh3 of the pair", size / 4);
                p.merge_ns_per_packet = r.merge_ns_per_packet;
                points.push(p);
            }
        }
        let cats = size_cats(sizes);
        let at = move |p: &ReevalPoint| sizes.iter().position(|&s| Some(s) == p.size_target);
        let mut avg = Vec::new();
        let mut p99 = Vec::new();
        for m in [Sharing::Shared, Sharing::Separate, Sharing::One] {
            let l = m.label();
            avg.push(avg_series(l, &points, cats.len(), l, at));
            p99.push(series(l, &points, cats.len(), l, at, |p| Some(p.ns_p99)));
        }
        let panels = vec![
            numeric_panel(
                "(a) Average latency per packet (Z=1.1)",
                "count array size (per copy)",
                "ns per packet",
                &cats,
                sizes.iter().map(|&s| s as f64),
                avg,
            ),
            numeric_panel(
                "(b) p99 latency",
                "count array size (per copy)",
                "ns per packet",
                &cats,
                sizes.iter().map(|&s| s as f64),
                p99,
            ),
        ];
        Ok((
            points,
            "Figure 8: shared vs separate count arrays on two threads".into(),
            panels,
        ))
    }

    /// Figure 9 (section 5.2): the count array, linear table and Cuckoo-4 (the `reeval` preset's
    /// 2^20 entries) updated while another thread streams over a buffer.
    fn fig9(&mut self) -> Result<Figured, LabError> {
        let f = ReevalFigure::Fig9;
        let foot = self.s.corunner;
        let algos = ["count_array", "linear_hash", "cuckoo4"];
        let mut points = Vec::new();
        self.trace(1.1)?;
        for &bytes in foot {
            for algo in algos {
                self.say(&format!(
                    "figure 9: {algo} beside a co-runner over {} MiB",
                    bytes / MIB
                ));
                let (mut a, params) = self.build(algo, None)?;
                let reps = self.s.reps;
                let (t, precision, recall, gbps) = best_of(
                    reps,
                    || {
                        let co = CoRunner::start(bytes as usize);
                        let r = self.time_algo(a.as_mut(), 1.1);
                        let gbps = co.stop();
                        r.map(|(t, p, rc)| (t, p, rc, gbps))
                    },
                    |r| &mut r.0,
                )?;
                let mut p = ReevalPoint::new(f, label_of(algo), algo, 1.1).timed(&t);
                p.params = params;
                p.memory_bytes = a.memory_bytes() as u64;
                p.corunner_bytes = Some(bytes);
                p.corunner_gbps = gbps;
                p.precision = precision;
                p.recall = recall;
                points.push(p);
            }
        }
        let cats: Vec<String> = foot
            .iter()
            .map(|&b| {
                if b == 0 {
                    "none".to_string()
                } else {
                    size_cats(&[b]).remove(0)
                }
            })
            .collect();
        let at = move |p: &ReevalPoint| foot.iter().position(|&b| Some(b) == p.corunner_bytes);
        let mut avg = Vec::new();
        let mut p99 = Vec::new();
        for algo in algos {
            let l = label_of(algo);
            avg.push(avg_series(l, &points, cats.len(), l, at));
            p99.push(series(l, &points, cats.len(), l, at, |p| Some(p.ns_p99)));
        }
        let panels = vec![
            panel(
                "(a) Average latency (reeval preset, Z=1.1)",
                "co-runner's streamed buffer",
                "ns per packet",
                &cats,
                avg,
            ),
            panel(
                "(b) p99 latency",
                "co-runner's streamed buffer",
                "ns per packet",
                &cats,
                p99,
            ),
        ];
        Ok((
            points,
            "Figure 9: a co-running memory-heavy thread".into(),
            panels,
        ))
    }
}

type Figured = (Vec<ReevalPoint>, String, Vec<Panel>);

fn size_cats(sizes: &[u64]) -> Vec<String> {
    sizes
        .iter()
        .map(|&s| {
            if s >= MIB {
                format!("{} MiB", s / MIB)
            } else {
                format!("{} KiB", s / KIB)
            }
        })
        .collect()
}

fn panel(title: &str, x: &str, y: &str, cats: &[String], series: Vec<Series>) -> Panel {
    Panel {
        title: title.to_string(),
        x_label: x.to_string(),
        y_label: y.to_string(),
        cats: cats.to_vec(),
        x: XAxis::Categories,
        series,
    }
}

/// [`panel`] on a numeric x axis at `xs` (sizes in bytes, skews, value sizes).
fn numeric_panel(
    title: &str,
    x: &str,
    y: &str,
    cats: &[String],
    xs: impl IntoIterator<Item = f64>,
    series: Vec<Series>,
) -> Panel {
    Panel {
        x: XAxis::Numeric(xs.into_iter().collect()),
        ..panel(title, x, y, cats, series)
    }
}

/// [`series`] of the average latency, with the spread of its repetitions as error bars.
fn avg_series(
    name: &str,
    points: &[ReevalPoint],
    n: usize,
    label: &str,
    at: impl Fn(&ReevalPoint) -> Option<usize>,
) -> Series {
    let mut s = series(name, points, n, label, &at, |p| Some(p.ns_avg));
    s.spread = vec![None; n];
    for p in points.iter().filter(|p| p.series == label) {
        if let (Some(slot), Some(lo), Some(hi)) = (
            at(p).and_then(|i| s.spread.get_mut(i)),
            p.ns_avg_min,
            p.ns_avg_max,
        ) {
            *slot = Some((lo, hi));
        }
    }
    s
}

/// A chart line named `name` from the points of series `label`, at the category `at` gives.
fn series(
    name: &str,
    points: &[ReevalPoint],
    n: usize,
    label: &str,
    at: impl Fn(&ReevalPoint) -> Option<usize>,
    val: impl Fn(&ReevalPoint) -> Option<f64>,
) -> Series {
    let mut values = vec![None; n];
    for p in points.iter().filter(|p| p.series == label) {
        if let Some(slot) = at(p).and_then(|i| values.get_mut(i)) {
            *slot = val(p);
        }
    }
    Series::new(name, values)
}

// ---------------------------------------------------------------------------------------------
// Figures 4 and 5: hand-written tables whose values are `V` bytes (the experiment is the layout).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// A count array whose slots are V-byte values (no key).
    CountArray,
    /// Linear probing, key and value in one slot.
    Inline,
    /// Linear probing over (key, index) slots; values in a separate array (LinearPtr).
    Ptr,
}

impl Layout {
    fn label(self) -> &'static str {
        match self {
            Layout::CountArray => "Count array",
            Layout::Inline => "Linear",
            Layout::Ptr => "LinearPtr",
        }
    }

    fn algorithm(self) -> &'static str {
        match self {
            Layout::CountArray => "hand-written: count array of V-byte values",
            Layout::Inline => "hand-written: linear probing, values inline",
            Layout::Ptr => "hand-written: linear probing, values by index",
        }
    }
}

/// What a value holds past its counter: the first bytes of the latest packet (section 4.1).
static PACKET: [u8; 64] = {
    let mut p = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        p[i] = (i as u8).wrapping_mul(37).wrapping_add(11);
        i += 1;
    }
    p
};

#[inline(always)]
fn touch_value(v: &mut [u8]) {
    let c = u32::from_ne_bytes([v[0], v[1], v[2], v[3]]).wrapping_add(1);
    v[..4].copy_from_slice(&c.to_ne_bytes());
    let n = v.len();
    v[4..].copy_from_slice(&PACKET[..n - 4]);
}

#[derive(Clone, Copy)]
#[repr(C)]
struct InlineSlot<const V: usize> {
    key: u64,
    /// Counter in the first 4 bytes (0 = empty slot: a stored key has counted at least 1).
    val: [u8; V],
}

#[derive(Clone, Copy, Default)]
#[repr(C)]
struct PtrSlot {
    key: u64,
    /// 1 + the value's index (0 = empty slot).
    idx: u32,
}

struct ValueTable<const V: usize> {
    layout: Layout,
    mask: usize,
    limit: usize,
    len: usize,
    hash: HashFn,
    ca: Vec<[u8; V]>,
    inline: Vec<InlineSlot<V>>,
    ptr: Vec<PtrSlot>,
    vals: Vec<[u8; V]>,
}

impl<const V: usize> ValueTable<V> {
    fn new(layout: Layout, entries: usize) -> ValueTable<V> {
        let n = entries.next_power_of_two();
        let mut t = ValueTable {
            layout,
            mask: n - 1,
            limit: n / 10 * 9,
            len: 0,
            hash: HashFn::new(algo_seed()),
            ca: Vec::new(),
            inline: Vec::new(),
            ptr: Vec::new(),
            vals: Vec::new(),
        };
        match layout {
            Layout::CountArray => t.ca = vec![[0u8; V]; n],
            Layout::Inline => {
                t.inline = vec![
                    InlineSlot {
                        key: 0,
                        val: [0u8; V]
                    };
                    n
                ]
            }
            Layout::Ptr => {
                t.ptr = vec![PtrSlot::default(); n];
                t.vals = Vec::with_capacity(t.limit);
            }
        }
        t
    }

    fn memory(&self) -> u64 {
        (self.ca.len() * V
            + self.inline.len() * std::mem::size_of::<InlineSlot<V>>()
            + self.ptr.len() * std::mem::size_of::<PtrSlot>()
            + self.vals.capacity() * V) as u64
    }

    fn reset(&mut self) {
        self.len = 0;
        self.ca.iter_mut().for_each(|v| *v = [0u8; V]);
        self.inline.iter_mut().for_each(|s| s.val = [0u8; V]);
        self.ptr.iter_mut().for_each(|s| s.idx = 0);
        self.vals.clear();
    }

    #[inline]
    fn update(&mut self, k: u64) {
        let mut i = (self.hash.hash_bytes(&k.to_le_bytes()) as usize) & self.mask;
        match self.layout {
            Layout::CountArray => touch_value(&mut self.ca[i]),
            Layout::Inline => loop {
                let s = &mut self.inline[i];
                let used = s.val[..4] != [0u8; 4];
                if used && s.key == k {
                    touch_value(&mut s.val);
                    return;
                }
                if !used {
                    if self.len < self.limit {
                        s.key = k;
                        touch_value(&mut s.val);
                        self.len += 1;
                    }
                    return;
                }
                i = (i + 1) & self.mask;
            },
            Layout::Ptr => loop {
                let s = self.ptr[i];
                if s.idx != 0 && s.key == k {
                    touch_value(&mut self.vals[s.idx as usize - 1]);
                    return;
                }
                if s.idx == 0 {
                    if self.len < self.limit {
                        self.vals.push([0u8; V]);
                        let idx = self.vals.len();
                        touch_value(&mut self.vals[idx - 1]);
                        self.ptr[i] = PtrSlot {
                            key: k,
                            idx: idx as u32,
                        };
                        self.len += 1;
                    }
                    return;
                }
                i = (i + 1) & self.mask;
            },
        }
    }
}

fn value_run<const V: usize>(
    layout: Layout,
    entries: usize,
    keys: &[u64],
    epoch: usize,
    epochs: usize,
    clock_ns: f64,
) -> (Timing, u64) {
    let mut t = ValueTable::<V>::new(layout, entries);
    let mut timing = Timing::default();
    for e in 0..=epochs {
        let ep = &keys[(e * epoch).min(keys.len())..((e + 1) * epoch).min(keys.len())];
        for chunk in ep.chunks(BATCH) {
            let t0 = Instant::now();
            for &k in chunk {
                t.update(k);
            }
            let ns = t0.elapsed().as_nanos() as f64 - clock_ns;
            if e > 0 {
                timing.add(ns, chunk.len());
            }
        }
        black_box(t.len);
        t.reset();
    }
    (timing, t.memory())
}

fn dispatch_value(
    value: usize,
    layout: Layout,
    entries: usize,
    keys: &[u64],
    epoch: usize,
    epochs: usize,
    clock_ns: f64,
) -> Result<(Timing, u64), LabError> {
    let a = (layout, entries, keys, epoch, epochs, clock_ns);
    Ok(match value {
        4 => value_run::<4>(a.0, a.1, a.2, a.3, a.4, a.5),
        12 => value_run::<12>(a.0, a.1, a.2, a.3, a.4, a.5),
        20 => value_run::<20>(a.0, a.1, a.2, a.3, a.4, a.5),
        28 => value_run::<28>(a.0, a.1, a.2, a.3, a.4, a.5),
        60 => value_run::<60>(a.0, a.1, a.2, a.3, a.4, a.5),
        v => {
            return Err(LabError::Config(format!(
                "value size {v} not compiled in (4, 12, 20, 28, 60)"
            )))
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Figure 8: shared against separate count arrays. Hand-written on purpose: the experiment is
// how the threads share the array (atomic adds into one, or one plain array each), which the
// catalog's count array (single-threaded by design, merged per epoch by the runner) cannot show.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sharing {
    /// One thread, one plain array: the reference.
    One,
    /// Two threads, one array of `AtomicU32`, `fetch_add`.
    Shared,
    /// Two threads, one plain array each, summed at the epoch's end.
    Separate,
}

impl Sharing {
    fn label(self) -> &'static str {
        match self {
            Sharing::One => "One thread",
            Sharing::Shared => "Shared",
            Sharing::Separate => "Separate",
        }
    }

    fn algorithm(self) -> &'static str {
        match self {
            Sharing::One => "hand-written: count array, one thread",
            Sharing::Shared => "hand-written: one AtomicU32 count array, fetch_add from 2 threads",
            Sharing::Separate => "hand-written: a plain count array per thread (2), merged",
        }
    }

    fn threads(self) -> usize {
        match self {
            Sharing::One => 1,
            _ => 2,
        }
    }

    fn copies(self) -> u64 {
        match self {
            Sharing::Separate => 2,
            _ => 1,
        }
    }
}

struct SharedResult {
    t: Timing,
    merge_ns_per_packet: Option<f64>,
}

/// One thread's share of the epoch: the keys whose hash sends them to `worker` (the paper's
/// flow-hash load balancing across cores), in arrival order.
fn split(keys: &[u64], workers: usize, worker: usize) -> Vec<u64> {
    let h = HashFn::new(key::sub_seed(algo_seed(), 0x0072_7373));
    keys.iter()
        .copied()
        .filter(|k| (h.hash_bytes(&k.to_le_bytes()) as usize) % workers == worker)
        .collect()
}

fn shared_run(
    mode: Sharing,
    size: u64,
    keys: &[u64],
    epoch: usize,
    epochs: usize,
    clock_ns: f64,
) -> SharedResult {
    let n = ((size / 4) as usize).max(1);
    let hash = HashFn::new(algo_seed());
    let idx = move |k: u64| key::reduce(hash.hash_bytes(&k.to_le_bytes()), n);
    let threads = mode.threads();
    let shared: Vec<AtomicU32> = if mode == Sharing::Shared {
        (0..n).map(|_| AtomicU32::new(0)).collect()
    } else {
        Vec::new()
    };
    let mut own: Vec<Vec<u32>> = if mode == Sharing::Shared {
        Vec::new()
    } else {
        (0..threads).map(|_| vec![0u32; n]).collect()
    };
    let mut merged = if mode == Sharing::Separate {
        vec![0u32; n]
    } else {
        Vec::new()
    };
    let mut total = Timing::default();
    let mut merge_ns = 0.0;
    for e in 0..=epochs {
        let ep = &keys[(e * epoch).min(keys.len())..((e + 1) * epoch).min(keys.len())];
        let parts: Vec<Vec<u64>> = (0..threads).map(|w| split(ep, threads, w)).collect();
        let barrier = Barrier::new(threads);
        let timings: Vec<Timing> = std::thread::scope(|s| {
            let mut handles = Vec::new();
            let mut own_iter = own.iter_mut();
            for part in &parts {
                let mine = own_iter.next();
                let (shared, barrier) = (&shared, &barrier);
                handles.push(s.spawn(move || {
                    let mut mine = mine;
                    let mut t = Timing::default();
                    barrier.wait();
                    for chunk in part.chunks(BATCH) {
                        let t0 = Instant::now();
                        match mine.as_deref_mut() {
                            // Separate or one thread: plain adds into this thread's array.
                            Some(arr) => {
                                for &k in chunk {
                                    let i = idx(k);
                                    arr[i] = arr[i].wrapping_add(1);
                                }
                            }
                            None => {
                                for &k in chunk {
                                    shared[idx(k)].fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        }
                        let ns = t0.elapsed().as_nanos() as f64 - clock_ns;
                        t.add(ns, chunk.len());
                    }
                    t
                }));
            }
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect()
        });
        // The epoch's end: separate arrays are summed (timed, reported apart), all cleared.
        if mode == Sharing::Separate {
            let t0 = Instant::now();
            for (i, m) in merged.iter_mut().enumerate() {
                *m = own.iter().map(|a| a[i]).fold(0u32, u32::wrapping_add);
            }
            black_box(&merged);
            if e > 0 {
                merge_ns += t0.elapsed().as_nanos() as f64;
            }
        }
        if e > 0 {
            for t in timings {
                total.merge(t);
            }
        }
        black_box(shared.first().map(|a| a.load(Ordering::Relaxed)));
        shared.iter().for_each(|a| a.store(0, Ordering::Relaxed));
        own.iter_mut()
            .for_each(|a| a.iter_mut().for_each(|c| *c = 0));
    }
    let packets = total.packets.max(1) as f64;
    SharedResult {
        merge_ns_per_packet: (mode == Sharing::Separate).then_some(merge_ns / packets),
        t: total,
    }
}

// ---------------------------------------------------------------------------------------------
// Figure 9: the co-running memory-heavy application.

/// A thread that reads and writes one byte of every cache line of a buffer, over and over,
/// until stopped (a stand-in for the paper's memory-hungry application).
struct CoRunner {
    stop: std::sync::Arc<AtomicBool>,
    lines: std::sync::Arc<AtomicU64>,
    started: Instant,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl CoRunner {
    fn start(bytes: usize) -> CoRunner {
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let lines = std::sync::Arc::new(AtomicU64::new(0));
        let handle = (bytes > 0).then(|| {
            let (stop, lines) = (stop.clone(), lines.clone());
            let ready = std::sync::Arc::new(Barrier::new(2));
            let r = ready.clone();
            let h = std::thread::spawn(move || {
                let mut buf = vec![1u8; bytes];
                r.wait();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for i in (0..buf.len()).step_by(64) {
                        buf[i] = buf[i].wrapping_add(1);
                    }
                    black_box(&mut buf);
                    n += (buf.len() / 64) as u64;
                    lines.store(n, Ordering::Relaxed);
                }
            });
            ready.wait();
            h
        });
        CoRunner {
            stop,
            lines,
            started: Instant::now(),
            handle,
        }
    }

    /// Stop; GB/s streamed (lines of 64 bytes, read and written), `None` without a co-runner.
    fn stop(mut self) -> Option<f64> {
        self.stop.store(true, Ordering::Relaxed);
        let h = self.handle.take()?;
        let _ = h.join();
        let secs = self.started.elapsed().as_secs_f64();
        Some(self.lines.load(Ordering::Relaxed) as f64 * 64.0 / secs / 1e9)
    }
}

// ---------------------------------------------------------------------------------------------
// Output.

// Charts: `output::write_charts` (a log y axis when a panel spans more than 10x).

/// The CSV header: [`ReevalPoint`]'s fields in order.
pub const CSV_HEADER: &str = "figure,series,algorithm,params,memory_bytes,size_target,skew,value_bytes,threads,corunner_bytes,packets,ns_avg,ns_avg_min,ns_avg_max,ns_p99,mpps,precision,recall,merge_ns_per_packet,corunner_gbps";

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

impl Row for ReevalPoint {
    const HEADER: &'static str = CSV_HEADER;
    fn row(&self) -> Vec<String> {
        let p = self;
        vec![
            csv_field(&p.figure),
            csv_field(&p.series),
            csv_field(&p.algorithm),
            csv_field(&p.params),
            p.memory_bytes.to_string(),
            opt(p.size_target),
            p.skew.to_string(),
            opt(p.value_bytes),
            p.threads.to_string(),
            opt(p.corunner_bytes),
            p.packets.to_string(),
            p.ns_avg.to_string(),
            opt(p.ns_avg_min),
            opt(p.ns_avg_max),
            p.ns_p99.to_string(),
            p.mpps.to_string(),
            opt(p.precision),
            opt(p.recall),
            opt(p.merge_ns_per_packet),
            opt(p.corunner_gbps),
        ]
    }
}

/// Run the figure(s) of `args.figure`, write their files under `args.out`, return every point.
pub fn run_reeval(args: &ReevalArgs) -> Result<Vec<ReevalPoint>, LabError> {
    let mut b = Bench::new(args);
    b.figure(args.figure)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for n in ReevalFigure::NAMES {
            assert_eq!(n.parse::<ReevalFigure>().unwrap().to_string(), n);
        }
        assert_eq!(ReevalFigure::All.expand(), ReevalFigure::EACH.to_vec());
        assert!("6".parse::<ReevalFigure>().is_err());
    }

    #[test]
    fn p99_and_average_of_batches() {
        let mut t = Timing::default();
        for i in 1..=100 {
            t.add(64.0 * i as f64, 64);
        }
        assert_eq!(t.p99(), 99.0);
        assert!((t.avg() - 50.5).abs() < 1e-9);
        t.add(-5.0, 64); // a batch faster than the clock's own cost counts as 0
        assert_eq!(t.packets, 101 * 64);
    }

    #[test]
    fn value_tables_count_every_key() {
        let keys: Vec<u64> = (0..1000u64).map(|i| i % 37 + (7 << 32)).collect();
        for layout in [Layout::Inline, Layout::Ptr] {
            let mut t = ValueTable::<12>::new(layout, 256);
            for &k in &keys {
                t.update(k);
            }
            assert_eq!(t.len, 37, "{layout:?}");
            let total: u32 = match layout {
                Layout::Inline => t
                    .inline
                    .iter()
                    .map(|s| u32::from_ne_bytes([s.val[0], s.val[1], s.val[2], s.val[3]]))
                    .sum(),
                _ => t
                    .vals
                    .iter()
                    .map(|v| u32::from_ne_bytes([v[0], v[1], v[2], v[3]]))
                    .sum(),
            };
            assert_eq!(total, 1000);
        }
    }

    #[test]
    fn shared_and_separate_count_the_same_packets() {
        let keys: Vec<u64> = (0..3000u64).map(|i| i % 101).collect();
        for mode in [Sharing::One, Sharing::Shared, Sharing::Separate] {
            let r = shared_run(mode, 4096, &keys, 1000, 2, 0.0);
            assert_eq!(r.t.packets, 2000, "{mode:?}");
        }
    }

    #[test]
    fn sizing_hits_the_target() {
        let args = ReevalArgs {
            figure: ReevalFigure::Fig1,
            out: PathBuf::from("unused"),
            quick: true,
            progress: false,
        };
        let b = Bench::new(&args);
        for s in STRUCTS {
            let (a, _) = b.build(s.0, Some(4 * MIB)).unwrap();
            // The main array is the target; the sketches' candidate set comes on top.
            let m = a.memory_bytes() as f64;
            assert!(
                m >= 0.9 * (4 * MIB) as f64 && m < 1.1 * (4 * MIB) as f64 + 100_000.0,
                "{}: {m} bytes",
                s.0
            );
        }
    }
}
