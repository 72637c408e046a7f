//! `netsift bench sketchvisor`: the SketchVisor paper's experiments (papers/sketchvisor.txt,
//! section 7, Figures 6-14 and 16) on the `visor` library, driven directly (no runner), on
//! generated Zipf(1.1) traces (there is no CAIDA trace here).
//!
//! Each figure writes `<out>/fig<N>.csv`, `.json`, `.png` and `.svg`; every point is either
//! `measured` or `paper` (a value the paper's text states, drawn beside ours; most of its bars
//! are only in the charts and are not reproduced).
//!
//! Overload in the accuracy figures ([`SvRegime`]): by default it is forced, never timed: the
//! trace's timestamps run at 1 Mpps and the normal path's FIFO ([`visor::Fifo`], 64 packets
//! deep) drains at [`NORMAL_SHARE`] of that, so the same packets take the fast path on every
//! machine. The paper's regime (`--offered-gbps`) offers the trace at a rate and drains each
//! sketch's FIFO at its own one-core rate measured in the run; `--overload K` offers K times
//! that rate. `--nic-gbps` puts the heavy-hitter threshold at 0.05% of the NIC's capacity x the
//! epoch (section 7.1; heavy changers stay at 0.05% of the total change). The paper's sketches are built from the catalog with the
//! `sketchvisor` preset (section 7.1) and the algorithms' defaults otherwise (TwoLevel at its
//! defaults: see figure 8); Count-Min 4 x 4096 is added as the reference.
//!
//! * 6: one-core throughput of NoFastPath / MGFastPath / SketchVisor per Table 1 sketch, measured
//!   in one run: NoFastPath times every packet's update; with a fast path the trace is offered at
//!   [`OFFERED_GBPS`] (the paper's in-memory tester's scale; `--offered-gbps`, or with
//!   `--overload K` K times the sketch's own rate), the FIFO drains at the sketch's own
//!   NoFastPath rate, and the time of everything (FIFO decision, normal-path updates, fast-path
//!   updates) is summed on one core, as the in-memory tester runs. Values are Mpps; the
//!   ratios to NoFastPath are the comparable part.
//! * 7-11: accuracy under overload of NoRecovery / LowerRecovery / UpperRecovery / SketchVisor /
//!   Proportional / Ideal: heavy hitters and changers (7; bytes, 0.05%), DDoS and
//!   superspreaders (8; 0.5% of the addresses), cardinality (9), flow-size distribution (10;
//!   packets, MRD), entropy (11; packets). Scores are the repo's (`measure::metrics`, `truth` and
//!   its `answers`). Every method answers with the algorithm's own queries on the state
//!   [`visor::recovered`] returns, the one interface `run --fast-path`, `merge` and the
//!   controller answer from; a method it refuses for a sketch is said on standard error and
//!   not drawn (never replaced by another). Where the sketch has a [`visor::Linear`] view, the
//!   state's counter error against Ideal is drawn too.
//! * 12: recovery against the number of hosts (1..128), the trace partitioned by flow, each host
//!   with its own FIFO at the same share and its own 8 KB fast path; counter error of the
//!   merged, recovered Count-Min against Ideal, and heavy-hitter recall / relative error.
//! * 13: fast-path share (packets, bytes, flows) of the figure-6 run, per sketch.
//! * 14: fast-path size 4-32 KB: throughput (Count-Min normal path, forced share) and
//!   accuracy (heavy-hitter recall and relative error after recovery, counter error).
//! * 16: kick-out passes of SketchVisor and MGFastPath at equal memory, and the relative error
//!   of the lower and upper bounds of the top flows at 8 KB (the whole trace through the fast
//!   path).

use std::path::{Path, PathBuf};
use std::time::Instant;

use algo::{Algorithm, BuildCtx, Change, Side};
use key::{FlowKey, KeyKind, KeyMap, KeySet};
use measure::metrics::{mrd, rel_err, set_accuracy};
use serde::Serialize;
use truth::{EpochTruth, Host, Weight};
use visor::{FastKind, FastTable, Fifo, Linear, Method, Path as VPath, RecoverError, Summary};

use crate::output::{Panel, Row};
use crate::LabError;

/// The normal path's capacity as a fraction of the offered packet rate in figures 7-12 and 14:
/// about half the packets overflow to the fast path (the paper's Figure 13b: the fast path
/// takes over 50% of the bytes for most sketches).
pub const NORMAL_SHARE: f64 = 0.5;
/// Offered load of figure 6, Gbps (the paper's in-memory tester reaches ~40 Gbps).
pub const OFFERED_GBPS: f64 = 40.0;
/// The trace's packet rate in the accuracy figures (timestamps only).
const RATE_PPS: f64 = 1e6;
/// FIFO depth (packets).
const DEPTH: u32 = 64;
/// Heavy hitters / changers: 0.05% (section 7.1); spreaders: 0.5% of the addresses.
const HH_FRACTION: f64 = 0.0005;
const SPREAD_FRACTION: f64 = 0.005;
/// The preset with the paper's section-7.1 sizes.
const PRESET: &str = "sketchvisor";
/// Table 1's sketches, in the paper's order, and the task of each figure they appear in.
const HH_SKETCHES: [&str; 5] = [
    "count_min",
    "flow_radar",
    "rev_sketch",
    "univmon",
    "deltoid",
];
const CARD_SKETCHES: [&str; 3] = ["fm", "kmin", "linear_counting"];
const FSD_SKETCHES: [&str; 2] = ["mrac", "flow_radar"];
const ENTROPY_SKETCHES: [&str; 2] = ["flow_radar", "univmon"];
/// Figure 6's sketches: Table 1's nine and Count-Min.
const THROUGHPUT_SKETCHES: [&str; 10] = [
    "count_min",
    "flow_radar",
    "rev_sketch",
    "univmon",
    "deltoid",
    "two_level",
    "fm",
    "kmin",
    "linear_counting",
    "mrac",
];

crate::figure_enum! {
    /// A figure of `bench sketchvisor`, or all of them.
    pub enum SvFigure {
        Fig6 => "6",
        Fig7 => "7",
        Fig8 => "8",
        Fig9 => "9",
        Fig10 => "10",
        Fig11 => "11",
        Fig12 => "12",
        Fig13 => "13",
        Fig14 => "14",
        Fig16 => "16",
    }
}

/// What to run (the CLI's `bench sketchvisor` flags).
#[derive(Clone, Debug)]
pub struct SvArgs {
    pub figure: SvFigure,
    /// Output directory (the CLI's default is "out/sketchvisor").
    pub out: PathBuf,
    /// Small traces and few points (seconds, for tests and CI).
    pub quick: bool,
    /// One line per figure on standard error.
    pub progress: bool,
    /// How the normal path is overloaded in the accuracy figures (7-12, 14).
    pub regime: SvRegime,
    /// Heavy-hitter thresholds as a fraction of this NIC capacity x the epoch's length (section
    /// 7.1: 0.05% of 40 Gbps x epoch), instead of the epoch's bytes (heavy changers keep the
    /// paper's 0.05% of the total change).
    pub nic_gbps: Option<f64>,
}

/// How the normal path is overloaded in figures 7-12 and 14 (issue 36, point 2).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SvRegime {
    /// The normal path drains at this share of the trace's packet rate, for every sketch alike,
    /// so that the same packets overflow on every machine (the default, [`NORMAL_SHARE`]).
    Share(f64),
    /// The paper's (section 7.1): the trace offered at this many Gbps and each sketch's normal
    /// path draining at its own one-core rate, measured on this machine in the same run: the
    /// overflow differs per sketch and follows the trace's order (bursts overflow together).
    /// Our sketches are fast: at the paper's 40 Gbps most take no fast path at all.
    OfferedGbps(f64),
    /// Offered at this multiple of each sketch's own one-core rate: the overloaded regime on
    /// any machine (2.0: about half the packets overflow).
    Overload(f64),
}

impl Default for SvRegime {
    fn default() -> Self {
        SvRegime::Share(NORMAL_SHARE)
    }
}

impl SvRegime {
    /// The regime as the CSV and the progress lines name it.
    pub fn describe(&self) -> String {
        match self {
            SvRegime::Share(f) => format!("normal path at {f} of the offered packets"),
            SvRegime::OfferedGbps(g) => format!("offered at {g} Gbps, each sketch at its own rate"),
            SvRegime::Overload(k) => format!("offered at {k}x each sketch's own rate"),
        }
    }
}

/// One value of a chart: ours (`source` = "measured") or the paper's (`source` = "paper").
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SvPoint {
    pub figure: String,
    /// Which chart: "throughput", "hh_recall", "hc_precision", "cardinality", "hosts_error", ...
    pub panel: String,
    /// The line: "NoFastPath", "SketchVisor", "LowerRecovery", ...
    pub series: String,
    /// "measured" or "paper".
    pub source: String,
    /// The x category as drawn (a sketch, "8 KB", "16 hosts", "top 10").
    pub x: String,
    /// The x value as a number (index of the sketch, KB, hosts, rank).
    pub x_value: f64,
    pub value: f64,
    /// "Mpps", "recall", "relative error", "share", "kick-outs", ...
    pub unit: String,
    /// Packets the value was measured over (0 for the paper's values).
    pub packets: u64,
    /// Packets that took the fast path (0 where it does not apply).
    pub fast_packets: u64,
}

impl SvPoint {
    fn new(
        figure: &str,
        panel: &str,
        series: &str,
        x: &str,
        x_value: f64,
        value: f64,
        unit: &str,
    ) -> SvPoint {
        SvPoint {
            figure: figure.to_string(),
            panel: panel.to_string(),
            series: series.to_string(),
            source: "measured".to_string(),
            x: x.to_string(),
            x_value,
            value,
            unit: unit.to_string(),
            packets: 0,
            fast_packets: 0,
        }
    }

    fn paper(mut self) -> SvPoint {
        self.source = "paper".to_string();
        self.series = format!("{} (paper)", self.series);
        self
    }

    fn over(mut self, packets: u64, fast: u64) -> SvPoint {
        self.packets = packets;
        self.fast_packets = fast;
        self
    }
}

/// One packet of the preloaded trace.
#[derive(Clone, Copy)]
struct Pkt {
    five: FlowKey,
    pair: FlowKey,
    src: FlowKey,
    len: u32,
    ts: u64,
}

/// A preloaded trace of two epochs (heavy changers compare them).
struct Trace {
    epochs: [Vec<Pkt>; 2],
}

impl Trace {
    /// Zipf(1.1) 5-tuples, `packets` per epoch over `flows`, shuffled at [`RATE_PPS`]; the second
    /// epoch is the same generator with another seed (flows change sizes between epochs).
    fn zipf(packets: u64, flows: u64, seed: u64) -> Result<Trace, LabError> {
        let one = |seed: u64| -> Result<Vec<Pkt>, LabError> {
            let spec = gen::Spec {
                packets,
                flows,
                seed,
                order: gen::Order::Shuffled,
                rate_pps: RATE_PPS,
                ..gen::Spec::default()
            };
            let g = gen::Generator::new(&spec)?;
            let mut v = Vec::with_capacity(packets as usize);
            g.for_each(|p| {
                v.push(Pkt {
                    five: p.tuple.key(KeyKind::FiveTuple),
                    pair: p.tuple.key(KeyKind::Pair),
                    src: p.tuple.key(KeyKind::Src),
                    len: p.wire_len,
                    ts: p.ts_ns,
                })
            });
            Ok(v)
        };
        Ok(Trace {
            epochs: [one(seed)?, one(seed + 1)?],
        })
    }
}

/// Which key and unit a figure measures.
#[derive(Clone, Copy, PartialEq)]
struct Measure {
    kind: KeyKind,
    weight: Weight,
    side: Side,
    /// Build with the `sketchvisor` preset (else the catalog's defaults).
    preset: bool,
}

impl Measure {
    const BYTES: Measure = Measure {
        kind: KeyKind::FiveTuple,
        weight: Weight::Bytes,
        side: Side::Src,
        preset: true,
    };
    /// Source addresses (figure 7): RevSketch and Deltoid reverse 4- or 8-byte keys only.
    const SRC_BYTES: Measure = Measure {
        kind: KeyKind::Src,
        weight: Weight::Bytes,
        side: Side::Src,
        preset: true,
    };
    const PACKETS: Measure = Measure {
        kind: KeyKind::FiveTuple,
        weight: Weight::Packets,
        side: Side::Src,
        preset: true,
    };

    fn key(&self, p: &Pkt) -> FlowKey {
        match self.kind {
            KeyKind::Pair => p.pair,
            KeyKind::Src => p.src,
            _ => p.five,
        }
    }

    fn w(&self, p: &Pkt) -> u64 {
        self.weight.of(p.len)
    }

    fn ctx(&self) -> BuildCtx {
        BuildCtx {
            seed: 42,
            key_len: self.kind.len(false),
            side: self.side,
        }
    }

    fn truth(&self, pkts: &[Pkt]) -> EpochTruth {
        let mut t = EpochTruth::new(0);
        for p in pkts {
            t.add(p.ts, self.key(p), p.len);
        }
        t.settle();
        t
    }
}

/// Build `name` with the paper's preset over the algorithm's defaults.
fn build(name: &str, m: &Measure) -> Result<Box<dyn Algorithm>, LabError> {
    let params = if m.preset {
        catalog::presets::params(PRESET, name).map_err(|e| LabError::Config(e.to_string()))?
    } else {
        toml::Table::new()
    };
    catalog::build(name, &params, &m.ctx()).map_err(|e| LabError::Config(e.to_string()))
}

fn fast_path(
    kind: FastKind,
    bytes: usize,
    m: &Measure,
    seed: u64,
) -> Result<Box<dyn FastTable>, LabError> {
    visor::build(kind, bytes, m.kind.len(false), seed)
        .map_err(|e| LabError::Config(e.to_string()))?
        .ok_or_else(|| LabError::Config("no fast path".into()))
}

/// One epoch of one sketch under forced overload, on `hosts` hosts partitioned by flow.
struct Overload {
    /// The merged normal-path sketch.
    normal: Box<dyn Algorithm>,
    /// The same sketch fed every packet.
    ideal: Box<dyn Algorithm>,
    summary: Summary,
    truth: EpochTruth,
    packets: u64,
    fast_packets: u64,
    /// The epoch's length at the offered rate (seconds).
    secs: f64,
}

/// How one sketch's normal path drains in an accuracy figure: its capacity (Mpps, all hosts
/// together) and the spacing the trace is offered at (`None`: the trace's own timestamps).
#[derive(Clone, Copy, Debug)]
struct Drain {
    cap_mpps: f64,
    period_ns: Option<f64>,
}

impl Drain {
    /// The packet's arrival time.
    fn at(&self, j: usize, p: &Pkt) -> u64 {
        self.period_ns.map_or(p.ts, |d| (j as f64 * d) as u64)
    }

    /// The epoch's length at this offered rate.
    fn secs(&self, pkts: &[Pkt]) -> f64 {
        match self.period_ns {
            Some(d) => pkts.len() as f64 * d / 1e9,
            None => pkts.len() as f64 / RATE_PPS,
        }
    }
}

fn overload(
    name: &str,
    m: &Measure,
    pkts: &[Pkt],
    hosts: usize,
    fast_bytes: usize,
    drain: Drain,
) -> Result<Overload, LabError> {
    let mut fifos: Vec<Fifo> = (0..hosts)
        .map(|_| Fifo::new(drain.cap_mpps / hosts as f64, DEPTH, 1.0))
        .collect::<Result<_, _>>()
        .map_err(|e| LabError::Config(e.to_string()))?;
    let proto = build(name, m)?;
    let mut normal: Vec<Box<dyn Algorithm>> = (0..hosts).map(|_| proto.clone_box()).collect();
    let mut fast: Vec<Box<dyn FastTable>> = (0..hosts)
        .map(|h| fast_path(FastKind::Sketchvisor, fast_bytes, m, h as u64))
        .collect::<Result<_, _>>()?;
    let mut ideal = proto.clone_box();
    let part = key::HashFn::new(99);
    for (j, p) in pkts.iter().enumerate() {
        let k = m.key(p);
        let w = m.w(p);
        ideal.update(&k, w);
        let h = key::reduce(part.hash(&k), hosts);
        match fifos[h].offer_at(drain.at(j, p), u64::from(p.len)) {
            VPath::Normal => normal[h].update(&k, w),
            VPath::Fast => fast[h].update(&k, w),
        }
    }
    let mut merged = normal.swap_remove(0);
    for n in &normal {
        merged
            .merge(n.as_ref())
            .map_err(|e| LabError::Config(format!("{name}: {e}")))?;
    }
    let parts: Vec<Summary> = fast.iter().map(|f| f.summary()).collect();
    let packets: u64 = fifos.iter().map(|f| f.counts().packets()).sum();
    let fast_packets: u64 = fifos.iter().map(|f| f.counts().fast_packets).sum();
    Ok(Overload {
        normal: merged,
        ideal,
        // The epoch's path counts beside the summary, as the data plane and the snapshot merge
        // give them (the distinct-count sketches' restoring reads the fast share from them).
        summary: {
            let mut s = Summary::merge(&parts);
            for f in &fifos {
                s.paths.add_counts(&f.counts());
            }
            s
        },
        truth: m.truth(pkts),
        packets,
        fast_packets,
        secs: drain.secs(pkts),
    })
}

const SERIES: [&str; 6] = [
    "NoRecovery",
    "LowerRecovery",
    "UpperRecovery",
    "SketchVisor",
    "Proportional",
    "Ideal",
];

fn series_of(method: Method) -> &'static str {
    match method {
        Method::None => SERIES[0],
        Method::Lower => SERIES[1],
        Method::Upper => SERIES[2],
        Method::Sketchvisor => SERIES[3],
        Method::Proportional => SERIES[4],
    }
}

/// The state `method` answers from, through [`visor::recovered`]: the one interface `run
/// --fast-path`, `merge` and the controller answer from (issue 36), so the figures score what a
/// user gets. `Ok(Err(reason))`: the method is refused for this sketch (its series is not drawn,
/// and the reason is said), never replaced by another.
fn state(o: &Overload, method: Method) -> Result<Result<Box<dyn Algorithm>, String>, LabError> {
    match visor::recovered(o.normal.as_ref(), &o.summary, method) {
        Ok((Some(s), _)) => Ok(Ok(s)),
        Ok((None, _)) => Ok(Ok(o.normal.clone_box())),
        Err(e @ RecoverError::Refused { .. }) => Ok(Err(e.to_string())),
        Err(e) => Err(LabError::Config(format!("{}: {e}", o.normal.name()))),
    }
}

/// `||T - T_ideal|| / ||T_ideal||` of a state's counters against Ideal's, for the sketches
/// with a [`Linear`] view (RECOVERY.md 7's counter error).
fn counter_error(a: &dyn Algorithm, ideal: &dyn Algorithm) -> Option<f64> {
    fn go<S: Linear>(a: &dyn Algorithm, ideal: &dyn Algorithm) -> Option<f64> {
        let (a, i) = (algo::downcast::<S>(a)?, algo::downcast::<S>(ideal)?);
        Some(visor::rel_error(&a.counters(), &i.counters()))
    }
    go::<sketch::CountMin>(a, ideal)
        .or_else(|| go::<sketch::Mrac>(a, ideal))
        .or_else(|| go::<reversible::RevSketch>(a, ideal))
        .or_else(|| go::<table::FlowRadar>(a, ideal))
}

/// Precision, recall and mean relative error over the true instances (estimate 0 for a
/// missed one without a point query).
fn set_scores(
    reported: &[(FlowKey, f64)],
    truth: &KeyMap<f64>,
    point: impl Fn(&FlowKey) -> Option<f64>,
) -> (f64, f64, f64) {
    let rep: KeySet = reported.iter().map(|r| r.0).collect();
    let tru: KeySet = truth.keys().copied().collect();
    let (p, r, _) = set_accuracy(&rep, &tru);
    let by: KeyMap<f64> = reported.iter().copied().collect();
    let errs: Vec<f64> = truth
        .iter()
        .map(|(k, &v)| {
            let e = point(k).or_else(|| by.get(k).copied()).unwrap_or(0.0);
            rel_err(v, e)
        })
        .collect();
    let re = if errs.is_empty() {
        0.0
    } else {
        errs.iter().sum::<f64>() / errs.len() as f64
    };
    (p, r, re)
}

fn as_f64(v: Vec<(FlowKey, u64)>) -> Vec<(FlowKey, f64)> {
    v.into_iter().map(|(k, e)| (k, e as f64)).collect()
}

fn threshold(total: f64, fraction: f64) -> u64 {
    (total * fraction).ceil().max(1.0) as u64
}

struct Bench<'a> {
    args: &'a SvArgs,
    /// Refusals said so far (each once).
    said: std::cell::RefCell<KeySetOfText>,
    /// One-core rates measured so far ([`Bench::own_mpps`]).
    rates: std::cell::RefCell<std::collections::HashMap<String, f64>>,
}

type KeySetOfText = std::collections::BTreeSet<String>;

impl Bench<'_> {
    /// Measure one sketch's one-core update rate (Mpps) on `pkts`: a warm-up pass, then the
    /// best of [`Bench::reps`] timed passes (the machine is shared). Cached per sketch and key.
    fn own_mpps(&self, name: &str, m: &Measure, pkts: &[Pkt]) -> Result<f64, LabError> {
        let id = format!("{name}/{:?}/{:?}", m.kind, m.side);
        if let Some(&v) = self.rates.borrow().get(&id) {
            return Ok(v);
        }
        let mut a = build(name, m)?;
        for p in pkts.iter().take(10_000) {
            a.update(&m.key(p), m.w(p));
        }
        let mut best = f64::INFINITY;
        for _ in 0..self.reps() {
            a.reset();
            let t = Instant::now();
            for p in pkts {
                a.update(&m.key(p), m.w(p));
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        let v = pkts.len() as f64 / best.max(1e-9) / 1e6;
        self.rates.borrow_mut().insert(id, v);
        Ok(v)
    }

    /// The drain of `name`'s normal path under the run's regime.
    fn drain(&self, name: &str, m: &Measure, pkts: &[Pkt]) -> Result<Drain, LabError> {
        let mean_len =
            pkts.iter().map(|p| f64::from(p.len)).sum::<f64>() / pkts.len().max(1) as f64;
        Ok(match self.args.regime {
            SvRegime::Share(f) => Drain {
                cap_mpps: f * RATE_PPS / 1e6,
                period_ns: None,
            },
            SvRegime::OfferedGbps(g) => Drain {
                cap_mpps: self.own_mpps(name, m, pkts)?,
                period_ns: Some(1e9 / (g * 1e9 / 8.0 / mean_len.max(1.0))),
            },
            SvRegime::Overload(k) => {
                let own = self.own_mpps(name, m, pkts)?;
                Drain {
                    cap_mpps: own,
                    period_ns: Some(1e3 / (own * k)),
                }
            }
        })
    }

    /// One epoch of `name` under the run's regime (see [`overload`]).
    fn overload(
        &self,
        name: &str,
        m: &Measure,
        pkts: &[Pkt],
        hosts: usize,
        fast_bytes: usize,
    ) -> Result<Overload, LabError> {
        let drain = self.drain(name, m, pkts)?;
        let o = overload(name, m, pkts, hosts, fast_bytes, drain)?;
        self.say(&format!(
            "{name}: {} of {} packets on the fast path ({})",
            o.fast_packets,
            o.packets,
            self.args.regime.describe()
        ));
        Ok(o)
    }

    /// A heavy-hitter threshold: 0.05% of the epoch's `total` weight, or with `--nic-gbps` of the
    /// NIC's capacity over the epoch (bytes; section 7.1).
    fn hh_threshold(&self, o: &Overload, m: &Measure, total: f64) -> u64 {
        match self.args.nic_gbps {
            Some(g) if m.weight == Weight::Bytes => threshold(g * 1e9 / 8.0 * o.secs, HH_FRACTION),
            _ => threshold(total, HH_FRACTION),
        }
    }

    /// A method refused for a sketch: its series is left out of the figure and the reason is
    /// said on standard error (always, once), never replaced by another method's answers.
    fn refused(&self, why: &str) {
        if self.said.borrow_mut().insert(why.to_string()) {
            eprintln!("bench sketchvisor: not drawn: {why}");
        }
    }

    fn say(&self, msg: &str) {
        if self.args.progress {
            eprintln!("bench sketchvisor: {msg}");
        }
    }

    /// Packets per epoch and flows of the accuracy trace (paper: 370K-480K packets and 30K-70K
    /// flows per host and epoch).
    fn size(&self) -> (u64, u64) {
        if self.args.quick {
            (60_000, 10_000)
        } else {
            (400_000, 50_000)
        }
    }

    /// Timed repetitions of figure 6 (the best is kept: the machine is shared).
    fn reps(&self) -> usize {
        if self.args.quick {
            1
        } else {
            3
        }
    }

    fn trace(&self) -> Result<Trace, LabError> {
        let (p, f) = self.size();
        Trace::zipf(p, f, 15)
    }

    fn figure(&self, f: SvFigure) -> Result<Vec<SvPoint>, LabError> {
        let trace = self.trace()?;
        let mut all = Vec::new();
        let mut fig6: Option<Vec<SvPoint>> = None;
        for f in f.expand() {
            let t0 = Instant::now();
            let (title, points) = match f {
                SvFigure::Fig6 | SvFigure::Fig13 => {
                    if fig6.is_none() {
                        fig6 = Some(self.fig6(&trace)?);
                    }
                    let pts = fig6.clone().unwrap_or_default();
                    let want = if f == SvFigure::Fig6 { "6" } else { "13" };
                    let title = if f == SvFigure::Fig6 {
                        "Fig. 6: one-core throughput (Mpps)"
                    } else {
                        "Fig. 13: share of traffic in the fast path"
                    };
                    (
                        title,
                        pts.into_iter().filter(|p| p.figure == want).collect(),
                    )
                }
                SvFigure::Fig7 => ("Fig. 7: heavy hitters and changers", self.fig7(&trace)?),
                SvFigure::Fig8 => ("Fig. 8: DDoS and superspreaders", self.fig8(&trace)?),
                SvFigure::Fig9 => ("Fig. 9: cardinality", self.fig_scalar(&trace, "9")?),
                SvFigure::Fig10 => (
                    "Fig. 10: flow size distribution",
                    self.fig_scalar(&trace, "10")?,
                ),
                SvFigure::Fig11 => ("Fig. 11: entropy", self.fig_scalar(&trace, "11")?),
                SvFigure::Fig12 => (
                    "Fig. 12: network-wide recovery by hosts",
                    self.fig12(&trace)?,
                ),
                SvFigure::Fig14 => ("Fig. 14: fast-path size", self.fig14(&trace)?),
                SvFigure::Fig16 => ("Fig. 16: against MGFastPath", self.fig16(&trace)?),
                SvFigure::All => unreachable!("expanded"),
            };
            write_figure(
                &self.args.out,
                &format!("fig{}", f.name()),
                title,
                &points,
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

    /// Figures 6 and 13 from one run (module docs).
    fn fig6(&self, trace: &Trace) -> Result<Vec<SvPoint>, LabError> {
        let m = Measure::SRC_BYTES;
        let pkts = &trace.epochs[0];
        let n = pkts.len() as u64;
        let mean_len = pkts.iter().map(|p| f64::from(p.len)).sum::<f64>() / n.max(1) as f64;
        let gbps_pps = |g: f64| g * 1e9 / 8.0 / mean_len.max(1.0);
        let mut out = Vec::new();
        for (i, name) in THROUGHPUT_SKETCHES.iter().enumerate() {
            let mm = if *name == THROUGHPUT_SKETCHES[5] {
                // TwoLevel counts distinct pairs (section 7.1), sized as in figure 8.
                Measure {
                    kind: KeyKind::Pair,
                    preset: false,
                    ..m
                }
            } else {
                m
            };
            let x = i as f64;
            // NoFastPath: every packet through the sketch.
            let base = self.own_mpps(name, &mm, pkts)?;
            out.push(
                SvPoint::new("6", "throughput", "NoFastPath", name, x, base, "Mpps").over(n, 0),
            );
            // The offered rate: the paper's 40 Gbps (or `--offered-gbps`), or with `--overload K`
            // K times this sketch's own rate (the overloaded regime on any machine). The trace
            // is the same packets at that rate.
            let offered_pps = match self.args.regime {
                SvRegime::Overload(k) => k * base * 1e6,
                SvRegime::OfferedGbps(g) => gbps_pps(g),
                SvRegime::Share(_) => gbps_pps(OFFERED_GBPS),
            };
            let period = 1e9 / offered_pps;
            let cap = base.min(offered_pps / 1e6);
            for kind in [FastKind::MisraGries, FastKind::Sketchvisor] {
                // The same warm-up (pages touched) as NoFastPath's.
                let mut a = build(name, &mm)?;
                for p in pkts.iter().take(10_000) {
                    a.update(&mm.key(p), mm.w(p));
                }
                let mut f = fast_path(kind, visor::DEFAULT_BYTES, &mm, 1)?;
                let mut fifo =
                    Fifo::new(cap, DEPTH, 1.0).map_err(|e| LabError::Config(e.to_string()))?;
                let mut fast_flows = KeySet::default();
                let mut secs = f64::INFINITY;
                for _ in 0..self.reps() {
                    a.reset();
                    f.reset();
                    fifo =
                        Fifo::new(cap, DEPTH, 1.0).map_err(|e| LabError::Config(e.to_string()))?;
                    let t = Instant::now();
                    for (j, p) in pkts.iter().enumerate() {
                        let k = mm.key(p);
                        let w = mm.w(p);
                        match fifo.offer_at((j as f64 * period) as u64, u64::from(p.len)) {
                            VPath::Normal => a.update(&k, w),
                            VPath::Fast => f.update(&k, w),
                        }
                    }
                    secs = secs.min(t.elapsed().as_secs_f64());
                }
                let secs = secs.max(1e-9);
                // Flows with a fast-path packet (outside the timed loop: a second pass).
                let mut fifo2 =
                    Fifo::new(cap, DEPTH, 1.0).map_err(|e| LabError::Config(e.to_string()))?;
                let mut all_flows = KeySet::default();
                for (j, p) in pkts.iter().enumerate() {
                    all_flows.insert(mm.key(p));
                    if fifo2.offer_at((j as f64 * period) as u64, u64::from(p.len)) == VPath::Fast {
                        fast_flows.insert(mm.key(p));
                    }
                }
                let c = fifo.counts();
                let series = if kind == FastKind::Sketchvisor {
                    "SketchVisor"
                } else {
                    "MGFastPath"
                };
                let mpps = n as f64 / secs / 1e6;
                out.push(
                    SvPoint::new("6", "throughput", series, name, x, mpps, "Mpps")
                        .over(n, c.fast_packets),
                );
                out.push(
                    SvPoint::new("6", "ratio", series, name, x, mpps / base, "x NoFastPath")
                        .over(n, c.fast_packets),
                );
                if kind == FastKind::Sketchvisor {
                    let share_b = c.fast_bytes as f64 / c.bytes().max(1) as f64;
                    let share_f = fast_flows.len() as f64 / all_flows.len().max(1) as f64;
                    for (panel, v) in [
                        ("packets", c.fast_share()),
                        ("bytes", share_b),
                        ("flows", share_f),
                    ] {
                        out.push(
                            SvPoint::new("13", panel, "SketchVisor", name, x, v, "fast-path share")
                                .over(n, c.fast_packets),
                        );
                    }
                }
            }
        }
        // Section 7.2, in-memory tester (Gbps in the text; at the paper's 769-byte mean packet):
        // SketchVisor over 17 Gbps for all sketches, ~40 Gbps for MRAC.
        let gbps = |g: f64| g * 1e9 / 8.0 / 769.0 / 1e6;
        out.push(
            SvPoint::new(
                "6",
                "throughput",
                "SketchVisor",
                "mrac",
                9.0,
                gbps(40.0),
                "Mpps",
            )
            .paper(),
        );
        // Section 7.5: the 8 KB fast path records ~0.7% of the flows.
        out.push(
            SvPoint::new(
                "13",
                "flows",
                "SketchVisor",
                "mrac",
                9.0,
                0.0,
                "fast-path share",
            )
            .paper(),
        );
        out.retain(|p| !(p.source == "paper" && p.figure == "13"));
        Ok(out)
    }

    /// Heavy hitters and changers (Figure 7).
    fn fig7(&self, trace: &Trace) -> Result<Vec<SvPoint>, LabError> {
        let m = Measure::SRC_BYTES;
        let mut out = Vec::new();
        for (i, name) in HH_SKETCHES.iter().enumerate() {
            let x = i as f64;
            let o1 = self.overload(name, &m, &trace.epochs[0], 1, visor::DEFAULT_BYTES)?;
            let o2 = self.overload(name, &m, &trace.epochs[1], 1, visor::DEFAULT_BYTES)?;
            let (n, fp) = (o2.packets, o2.fast_packets);
            // Heavy hitters of epoch 2.
            let t = self.hh_threshold(&o2, &m, o2.truth.total(m.weight) as f64);
            let tru: KeyMap<f64> = o2
                .truth
                .sizes(m.weight)
                .filter(|&(_, s)| s >= t)
                .map(|(k, s)| (*k, s as f64))
                .collect();
            // Heavy changers between the epochs: |s2 - s1|, 0.05% of the total change (section
            // 7.1, with or without `--nic-gbps`).
            let change = truth::answers::change(&o2.truth, &o1.truth, m.weight);
            let tc = threshold(change.values().sum(), HH_FRACTION);
            let tru_c: KeyMap<f64> = change
                .into_iter()
                .filter(|&(_, c)| c >= tc as f64)
                .collect();
            let mut push = |series: &str, hh: (f64, f64, f64), hc: Option<(f64, f64, f64)>| {
                for (panel, v) in [
                    ("hh_precision", hh.0),
                    ("hh_recall", hh.1),
                    ("hh_error", hh.2),
                ] {
                    out.push(SvPoint::new("7", panel, series, name, x, v, "score").over(n, fp));
                }
                if let Some(hc) = hc {
                    for (panel, v) in [
                        ("hc_precision", hc.0),
                        ("hc_recall", hc.1),
                        ("hc_error", hc.2),
                    ] {
                        out.push(SvPoint::new("7", panel, series, name, x, v, "score").over(n, fp));
                    }
                }
            };
            let lastepoch = matches!(o2.ideal.change_basis(), Change::LastEpoch);
            let score_algo = |a: &dyn Algorithm, prev: &dyn Algorithm| {
                let rep = as_f64(a.heavy_hitters(t).unwrap_or_default());
                let hh = set_scores(&rep, &tru, |k| a.flow_size(k).map(|v| v as f64));
                let hc = lastepoch.then(|| {
                    let rep = as_f64(a.heavy_changers(prev, tc).unwrap_or_default());
                    set_scores(&rep, &tru_c, |_| None)
                });
                (hh, hc)
            };
            // Every method answers with the algorithm's own queries on the state it recovers
            // (heavy changers: this epoch's recovered state against the last one's).
            for method in Method::ALL {
                let (a, p) = match (state(&o2, method)?, state(&o1, method)?) {
                    (Ok(a), Ok(p)) => (a, p),
                    (Err(why), _) | (_, Err(why)) => {
                        self.refused(&why);
                        continue;
                    }
                };
                let (hh, hc) = score_algo(a.as_ref(), p.as_ref());
                push(series_of(method), hh, hc);
            }
            let (hh, hc) = score_algo(o2.ideal.as_ref(), o1.ideal.as_ref());
            push("Ideal", hh, hc);
        }
        // Section 7.3: UnivMon under NoRecovery, recall 8.15% (HH) and 16.43% (HC), relative
        // error 98.63% and 102.58%.
        let u = 3.0; // HH_SKETCHES[3], UnivMon
        for (panel, v) in [
            ("hh_recall", 0.0815),
            ("hc_recall", 0.1643),
            ("hh_error", 0.9863),
            ("hc_error", 1.0258),
        ] {
            out.push(SvPoint::new("7", panel, "NoRecovery", HH_SKETCHES[3], u, v, "score").paper());
        }
        Ok(out)
    }

    /// DDoS and superspreaders with TwoLevel (Figure 8).
    fn fig8(&self, trace: &Trace) -> Result<Vec<SvPoint>, LabError> {
        let mut out = Vec::new();
        for (i, (label, side, host)) in [
            ("DDoS", Side::Dst, Host::Dst),
            ("superspreaders", Side::Src, Host::Src),
        ]
        .into_iter()
        .enumerate()
        {
            // The catalog's TwoLevel, not the preset's: section 7.1's 2 x 4000 buckets of two
            // 250-bit bitmaps saturate on this trace (12.5k sources; Ideal's superspreader
            // recall 0.02, DDoS 0.11), the defaults reach recall 1.0 with all traffic.
            let m = Measure {
                kind: KeyKind::Pair,
                weight: Weight::Packets,
                side,
                preset: false,
            };
            let o = self.overload(
                THROUGHPUT_SKETCHES[5],
                &m,
                &trace.epochs[0],
                1,
                visor::DEFAULT_BYTES,
            )?;
            let spread = o.truth.spread(host);
            let t = threshold(spread.peer_addresses as f64, SPREAD_FRACTION);
            let tru: KeyMap<f64> = spread
                .above(t)
                .into_iter()
                .map(|(k, v)| (k, v as f64))
                .collect();
            let mut score = |series: &str, a: &dyn Algorithm| {
                let rep = as_f64(a.spreaders(t).unwrap_or_default());
                let (p, r, e) = set_scores(&rep, &tru, |_| None);
                for (panel, v) in [("precision", p), ("recall", r), ("error", e)] {
                    out.push(
                        SvPoint::new("8", panel, series, label, i as f64, v, "score")
                            .over(o.packets, o.fast_packets),
                    );
                }
            };
            for method in Method::ALL {
                match state(&o, method)? {
                    Ok(a) => score(series_of(method), a.as_ref()),
                    Err(why) => self.refused(&why),
                }
            }
            score("Ideal", o.ideal.as_ref());
        }
        Ok(out)
    }

    /// Cardinality (9), flow-size distribution (10), entropy (11): one number per method.
    fn fig_scalar(&self, trace: &Trace, fig: &str) -> Result<Vec<SvPoint>, LabError> {
        let (sketches, m): (&[&str], Measure) = match fig {
            "9" => (&CARD_SKETCHES, Measure::PACKETS),
            "10" => (&FSD_SKETCHES, Measure::PACKETS),
            _ => (&ENTROPY_SKETCHES, Measure::PACKETS),
        };
        let mut out = Vec::new();
        for (i, name) in sketches.iter().enumerate() {
            let o = self.overload(name, &m, &trace.epochs[0], 1, visor::DEFAULT_BYTES)?;
            let score = |a: &dyn Algorithm| -> f64 {
                match fig {
                    "9" => rel_err(
                        o.truth.flows.len() as f64,
                        a.cardinality().unwrap_or(f64::NAN),
                    ),
                    "10" => mrd(
                        &o.truth.size_histogram(m.weight),
                        &a.flow_size_distribution().unwrap_or_default(),
                    ),
                    _ => rel_err(o.truth.entropy(m.weight), a.entropy().unwrap_or(f64::NAN)),
                }
            };
            let (panel, unit) = match fig {
                "10" => ("mrd", "MRD"),
                _ => ("error", "relative error"),
            };
            // Every method answers from its recovered state with the sketch's own query; the
            // counters' error against Ideal where the sketch has a linear view.
            for method in Method::ALL {
                let a = match state(&o, method)? {
                    Ok(a) => a,
                    Err(why) => {
                        self.refused(&why);
                        continue;
                    }
                };
                let v = score(a.as_ref());
                out.push(
                    SvPoint::new(fig, panel, series_of(method), name, i as f64, v, unit)
                        .over(o.packets, o.fast_packets),
                );
                if let Some(e) = counter_error(a.as_ref(), o.ideal.as_ref()) {
                    out.push(
                        SvPoint::new(
                            fig,
                            "counter_error",
                            series_of(method),
                            name,
                            i as f64,
                            e,
                            "relative error",
                        )
                        .over(o.packets, o.fast_packets),
                    );
                }
            }
            let v = score(o.ideal.as_ref());
            out.push(
                SvPoint::new(fig, panel, "Ideal", name, i as f64, v, unit)
                    .over(o.packets, o.fast_packets),
            );
        }
        if fig == "10" {
            // Section 7.3: FlowRadar MRD, Ideal 0.0126%, NR 0.1166%, LR 0.0844%, UR 0.0954%,
            // SketchVisor 0.0553%; MRAC ~0.2% for all.
            let fr = 1.0;
            for (s, v) in [
                ("Ideal", 0.000126),
                ("NoRecovery", 0.001166),
                ("LowerRecovery", 0.000844),
                ("UpperRecovery", 0.000954),
                ("SketchVisor", 0.000553),
            ] {
                out.push(SvPoint::new("10", "mrd", s, "flow_radar", fr, v, "MRD").paper());
                out.push(SvPoint::new("10", "mrd", s, "mrac", 0.0, 0.002, "MRD").paper());
            }
        }
        Ok(out)
    }

    /// Recovery against hosts (Figure 12): Count-Min 4 x 4096.
    fn fig12(&self, trace: &Trace) -> Result<Vec<SvPoint>, LabError> {
        let m = Measure::BYTES;
        let hosts: &[usize] = if self.args.quick {
            &[1, 4, 16]
        } else {
            &[1, 2, 4, 8, 16, 32, 64, 128]
        };
        let mut out = Vec::new();
        for &h in hosts {
            let o = self.overload(
                HH_SKETCHES[0],
                &m,
                &trace.epochs[0],
                h,
                visor::DEFAULT_BYTES,
            )?;
            let x = format!("{h} hosts");
            let t = self.hh_threshold(&o, &m, o.truth.total(m.weight) as f64);
            let tru: KeyMap<f64> = o
                .truth
                .sizes(m.weight)
                .filter(|&(_, s)| s >= t)
                .map(|(k, s)| (*k, s as f64))
                .collect();
            for method in Method::ALL {
                let a = match state(&o, method)? {
                    Ok(a) => a,
                    Err(why) => {
                        self.refused(&why);
                        continue;
                    }
                };
                // The relative error of the true heavy hitters' point queries on the state.
                let errs: f64 = tru
                    .iter()
                    .map(|(k, &v)| rel_err(v, a.flow_size(k).unwrap_or(0) as f64))
                    .sum::<f64>()
                    / tru.len().max(1) as f64;
                let s = series_of(method);
                if let Some(e) = counter_error(a.as_ref(), o.ideal.as_ref()) {
                    out.push(
                        SvPoint::new("12", "counter_error", s, &x, h as f64, e, "relative error")
                            .over(o.packets, o.fast_packets),
                    );
                }
                out.push(
                    SvPoint::new("12", "hh_error", s, &x, h as f64, errs, "relative error")
                        .over(o.packets, o.fast_packets),
                );
            }
        }
        Ok(out)
    }

    /// Fast-path size (Figure 14): 4-32 KB with Count-Min on the normal path.
    fn fig14(&self, trace: &Trace) -> Result<Vec<SvPoint>, LabError> {
        let m = Measure::BYTES;
        let pkts = &trace.epochs[0];
        let mut out = Vec::new();
        for kb in [4usize, 8, 16, 32] {
            let x = format!("{kb} KB");
            let bytes = kb * 1024;
            // Throughput of the data plane at the forced share (one core).
            let mut a = build(HH_SKETCHES[0], &m)?;
            let mut f = fast_path(FastKind::Sketchvisor, bytes, &m, 1)?;
            let mut fifo = Fifo::new(NORMAL_SHARE * RATE_PPS / 1e6, DEPTH, 1.0)
                .map_err(|e| LabError::Config(e.to_string()))?;
            let t0 = Instant::now();
            for p in pkts {
                match fifo.offer_at(p.ts, u64::from(p.len)) {
                    VPath::Normal => a.update(&p.five, m.w(p)),
                    VPath::Fast => f.update(&p.five, m.w(p)),
                }
            }
            let mpps = pkts.len() as f64 / t0.elapsed().as_secs_f64().max(1e-9) / 1e6;
            out.push(SvPoint::new(
                "14",
                "throughput",
                "SketchVisor",
                &x,
                kb as f64,
                mpps,
                "Mpps",
            ));
            let o = self.overload(HH_SKETCHES[0], &m, pkts, 1, bytes)?;
            let t = self.hh_threshold(&o, &m, o.truth.total(m.weight) as f64);
            let tru: KeyMap<f64> = o
                .truth
                .sizes(m.weight)
                .filter(|&(_, s)| s >= t)
                .map(|(k, s)| (*k, s as f64))
                .collect();
            for method in [Method::Sketchvisor, Method::Proportional] {
                let a = match state(&o, method)? {
                    Ok(a) => a,
                    Err(why) => {
                        self.refused(&why);
                        continue;
                    }
                };
                let rep = as_f64(a.heavy_hitters(t).unwrap_or_default());
                let (p, rc, e) = set_scores(&rep, &tru, |k| a.flow_size(k).map(|v| v as f64));
                let ce = counter_error(a.as_ref(), o.ideal.as_ref()).unwrap_or(f64::NAN);
                for (panel, v) in [
                    ("hh_precision", p),
                    ("hh_recall", rc),
                    ("hh_error", e),
                    ("counter_error", ce),
                ] {
                    out.push(
                        SvPoint::new("14", panel, series_of(method), &x, kb as f64, v, "score")
                            .over(o.packets, o.fast_packets),
                    );
                }
            }
        }
        Ok(out)
    }

    /// Kick-outs and bound tightness against MGFastPath (Figure 16), the whole trace through
    /// the fast path.
    fn fig16(&self, trace: &Trace) -> Result<Vec<SvPoint>, LabError> {
        let m = Measure::BYTES;
        let pkts = &trace.epochs[0];
        let mut out = Vec::new();
        let truth = m.truth(pkts);
        for kb in [4usize, 8, 16, 32] {
            let x = format!("{kb} KB");
            for kind in [FastKind::MisraGries, FastKind::Sketchvisor] {
                let mut f = fast_path(kind, kb * 1024, &m, 1)?;
                for p in pkts {
                    f.update(&p.five, m.w(p));
                }
                let series = if kind == FastKind::Sketchvisor {
                    "SketchVisor"
                } else {
                    "MGFastPath"
                };
                let st = f.stats();
                out.push(
                    SvPoint::new(
                        "16",
                        "kickouts",
                        series,
                        &x,
                        kb as f64,
                        st.kickouts as f64,
                        "kick-outs",
                    )
                    .over(st.packets, st.packets),
                );
                if kb == 8 {
                    // Section 7.5: "top-k flows in the fast path", ranked by the table's own
                    // estimate, each bound against the flow's true size.
                    let mut s = f.summary().flows;
                    s.sort_unstable_by(|a, b| {
                        b.estimate().cmp(&a.estimate()).then(a.key.cmp(&b.key))
                    });
                    for top in [1usize, 10, 25, 50, 100] {
                        let (mut lo_e, mut hi_e) = (0.0, 0.0);
                        let n = top.min(s.len());
                        for t in s.iter().take(n) {
                            let v = truth.flows.get(&t.key).map_or(0, |c| c.get(m.weight)) as f64;
                            lo_e += rel_err(v, t.lo as f64);
                            hi_e += rel_err(v, t.hi as f64);
                        }
                        let tx = format!("top {top}");
                        out.push(SvPoint::new(
                            "16",
                            "lower_error",
                            series,
                            &tx,
                            top as f64,
                            lo_e / n.max(1) as f64,
                            "relative error",
                        ));
                        out.push(SvPoint::new(
                            "16",
                            "upper_error",
                            series,
                            &tx,
                            top as f64,
                            hi_e / n.max(1) as f64,
                            "relative error",
                        ));
                    }
                }
            }
        }
        // Section 7.5: MGFastPath's 100th flow at 35% error, SketchVisor under 2%.
        out.push(
            SvPoint::new(
                "16",
                "upper_error",
                "MGFastPath",
                "top 100",
                100.0,
                0.35,
                "relative error",
            )
            .paper(),
        );
        out.push(
            SvPoint::new(
                "16",
                "upper_error",
                "SketchVisor",
                "top 100",
                100.0,
                0.02,
                "relative error",
            )
            .paper(),
        );
        Ok(out)
    }
}

/// Titles and axes of a panel.
fn panel_text(name: &str) -> (String, &'static str, &'static str) {
    let (t, x, y) = match name {
        "throughput" => ("throughput", "sketch", "Mpps"),
        "ratio" => ("throughput / NoFastPath", "sketch", "ratio"),
        "packets" | "bytes" | "flows" => ("fast-path share", "sketch", "share"),
        "counter_error" => (
            "counter error vs Ideal",
            "",
            "||T - T_ideal|| / ||T_ideal||",
        ),
        "kickouts" => ("(a) kick-out passes", "fast-path size", "kick-outs"),
        "lower_error" => (
            "(b) lower-bound error of the top flows",
            "flows",
            "relative error",
        ),
        "upper_error" => (
            "(b) upper-bound error of the top flows",
            "flows",
            "relative error",
        ),
        "mrd" => ("MRD", "sketch", "MRD"),
        "hh_error" | "hc_error" | "error" => ("", "", "relative error"),
        _ => ("", "", "score"),
    };
    let title = if t.is_empty() {
        name.replace('_', " ")
    } else if ["packets", "bytes", "flows"].contains(&name) {
        format!("{t} ({name})")
    } else {
        t.to_string()
    };
    (title, if x.is_empty() { "" } else { x }, y)
}

crate::output::labeled_point!(SvPoint);

/// One panel per `panel` value, categories by `x_value`, one line per series.
fn panels(points: &[SvPoint]) -> Vec<Panel> {
    crate::output::category_panels(
        points,
        |_| true,
        |name| {
            let (t, x, y) = panel_text(name);
            (t, x.to_string(), y.to_string())
        },
    )
}

/// The CSV header: [`SvPoint`]'s fields in order.
pub const CSV_HEADER: &str = "figure,panel,series,source,x,x_value,value,unit,packets,fast_packets";

impl Row for SvPoint {
    const HEADER: &'static str = CSV_HEADER;
    fn row(&self) -> Vec<String> {
        let mut r = self.labeled_row();
        r.extend([self.packets.to_string(), self.fast_packets.to_string()]);
        r
    }
}

fn write_figure(
    dir: &Path,
    stem: &str,
    title: &str,
    points: &[SvPoint],
    quick: bool,
) -> Result<(), LabError> {
    crate::output::write_figure(dir, stem, title, points, &panels(points), quick)
}

/// Run the figure(s) of `args.figure`, write their files under `args.out`, return every point.
pub fn run_sketchvisor(args: &SvArgs) -> Result<Vec<SvPoint>, LabError> {
    Bench {
        args,
        said: Default::default(),
        rates: Default::default(),
    }
    .figure(args.figure)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for n in SvFigure::NAMES {
            assert_eq!(n.parse::<SvFigure>().unwrap().to_string(), n);
        }
        assert!("15".parse::<SvFigure>().is_err());
    }
}
