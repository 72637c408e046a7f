//! `netsift bench ...`: throughput measurements run from the CLI.

use std::hint::black_box;
use std::time::Instant;

use anyhow::Result;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::Args;
use key::{FlowKey, KeyKind};
use serde::Serialize;
use trace::{Body, Capture, Format};

use crate::flags;
use crate::out::Out;
use measure::report::count;

/// Most timed passes of `bench parse` (the median of more says nothing new).
pub const MAX_PASSES: usize = 1000;

#[derive(Args)]
pub struct ParseArgs {
    /// Capture file (`-` for standard input). It is read once before timing so that timed passes
    /// measure parsing from memory (page cache), not the disk.
    file: String,
    /// Key kind to extract.
    #[arg(long, default_value = "five_tuple")]
    key: KeyKind,
    /// Input format instead of detecting it (pcap, pcapng, keys4, keys13, keys21).
    #[arg(long)]
    format: Option<Format>,
    /// Timed passes over the file (1..=1000); the median is reported.
    #[arg(long, default_value_t = 5, allow_negative_numbers = true,
          value_parser = flags::whole::<usize>(1..=MAX_PASSES as u64))]
    passes: usize,
    /// One JSON object instead of the line of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct AggEvictArgs {
    /// Figure of the Agg-Evict paper (`all`: every figure, in order).
    #[arg(long, default_value = "all", value_parser = figure_parser())]
    figure: lab::Figure,
    /// Capture or key trace to use instead of the synthetic Zipf(1.1) trace.
    #[arg(long)]
    trace: Option<std::path::PathBuf>,
    /// Output directory for CSV, JSON, PNG and SVG per figure.
    #[arg(long, default_value = "out/agg-evict")]
    out: std::path::PathBuf,
    /// Packets of the synthetic trace.
    #[arg(long, default_value_t = lab::DEFAULT_PACKETS)]
    packets: u64,
    /// Packet order of the synthetic trace: `bursty` (the paper's) or `shuffled` (flows fully
    /// interleaved, where aggregation gains least). Figure 7 varies it itself.
    #[arg(long, default_value = "bursty")]
    order: gen::Order,
    /// Zipf skew of the synthetic trace (0..=10). Figure 7 varies it itself.
    #[arg(long, default_value_t = 1.1, allow_negative_numbers = true)]
    skew: f64,
    /// Agg-Evict's mode in figure 5: auto (it steps aside where it does not pay, as `run`
    /// does by default) or always (the paper's). Every other figure measures `always`.
    #[arg(long, default_value = "auto", value_parser = PossibleValuesParser::new(measure::AggMode::NAMES)
          .try_map(|s| s.parse::<measure::AggMode>()))]
    agg_mode: measure::AggMode,
    /// Small sizes and fewer points (seconds instead of minutes).
    #[arg(long)]
    quick: bool,
    /// Print every measured point as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// `--figure`: one of [`lab::Figure::NAMES`] (clap lists them in `--help` and in the error for
/// any other value), parsed into a [`lab::Figure`].
fn figure_parser() -> impl TypedValueParser<Value = lab::Figure> {
    PossibleValuesParser::new(lab::Figure::NAMES).try_map(|s| s.parse::<lab::Figure>())
}

pub fn cmd_agg_evict(a: AggEvictArgs, out: &mut Out) -> Result<()> {
    let args = lab::LabArgs {
        figure: a.figure,
        trace: a.trace,
        out: a.out.clone(),
        packets: a.packets,
        quick: a.quick,
        progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        skew: a.skew,
        order: a.order,
        agg_mode: a.agg_mode,
    };
    let points = lab::run_agg_evict(&args)?;
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&points)?)?;
    } else {
        writeln!(
            out,
            "{:<8} {:<16} {:<10} {:<11} {:<12} {:>6} {:>9} {:>9} {:>9} {:>8} {:>8}  params",
            "figure",
            "algorithm",
            "accel",
            "key",
            "order",
            "batch",
            "Mpps",
            "ns_avg",
            "ns_p99",
            "evicted",
            "through"
        )?;
        for p in &points {
            writeln!(
                out,
                "{:<8} {:<16} {:<10} {:<11} {:<12} {:>6} {:>9.1} {:>9.2} {:>9.2} {:>8} {:>8}  {}",
                p.figure,
                p.algorithm,
                p.accel,
                p.key,
                p.order,
                p.batch,
                p.mpps,
                p.ns_avg,
                p.ns_p99,
                p.evicted_share
                    .map_or("-".to_string(), |s| format!("{:.1}%", 100.0 * s)),
                p.through_share
                    .map_or("-".to_string(), |s| format!("{:.1}%", 100.0 * s)),
                p.params
            )?;
        }
        crate::say!(
            "netsift bench agg-evict: {} points written under {} (preset {}: the paper's \
             parameters for every algorithm)",
            points.len(),
            a.out.display(),
            lab::PRESET
        );
    }
    Ok(())
}

/// What `bench parse` prints. The timings are `None` (JSON `null`) for a capture without
/// packets: there is nothing to time.
#[derive(Serialize)]
struct ParseReport {
    file: String,
    key: KeyKind,
    packets: u64,
    keyed: u64,
    passes: usize,
    seconds: Option<f64>,
    mpps: Option<f64>,
    ns_per_packet: Option<f64>,
    best_mpps: Option<f64>,
}

/// One pass: read, classify and extract the key of every record. Returns (packets, keyed).
/// The key of every packet is passed through `black_box`, so the work cannot be optimised away.
fn pass(cap: &Capture, kind: KeyKind) -> Result<(u64, u64)> {
    // A keys4 trace keyed by source: `run`'s path, blocks of u32 keys (`Runner::push_keys4`).
    if kind == KeyKind::Src {
        if let Some(r) = cap.for_each_keys4(|blk| {
            black_box(blk);
        }) {
            let n = r?;
            return Ok((n, n));
        }
    }
    let (mut n, mut keyed) = (0u64, 0u64);
    cap.for_each(|rec| {
        n += 1;
        let k: FlowKey = match rec.body {
            Body::Frame { link, data } => {
                let (class, k) = wire::parse_key(link, data, kind);
                if matches!(class, wire::Class::Ipv4 | wire::Class::Ipv6) {
                    keyed += 1;
                }
                k
            }
            Body::Tuple(t) => {
                keyed += 1;
                t.key(kind)
            }
        };
        black_box(&k);
    })?;
    Ok((n, keyed))
}

pub fn cmd_parse(a: ParseArgs, out: &mut Out) -> Result<()> {
    let cap = Capture::open(&a.file, a.format)?;
    // Warm-up pass: faults every page of the mapping in.
    let (packets, keyed) = pass(&cap, a.key)?;
    let mut r = ParseReport {
        file: cap.name().to_string(),
        key: a.key,
        packets,
        keyed,
        passes: 0,
        seconds: None,
        mpps: None,
        ns_per_packet: None,
        best_mpps: None,
    };
    if packets > 0 {
        // `passes` is in 1..=MAX_PASSES (clap checks it), so this is a small allocation.
        let mut secs = Vec::with_capacity(a.passes);
        for _ in 0..a.passes {
            let t = Instant::now();
            let (n, _) = pass(&cap, a.key)?;
            secs.push(t.elapsed().as_secs_f64());
            debug_assert_eq!(n, packets);
        }
        secs.sort_by(f64::total_cmp);
        let med = secs[secs.len() / 2];
        r.passes = secs.len();
        r.seconds = Some(med);
        r.mpps = Some(packets as f64 / med / 1e6);
        r.ns_per_packet = Some(med * 1e9 / packets as f64);
        r.best_mpps = Some(packets as f64 / secs[0] / 1e6);
    }
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&r)?)?;
    } else if let (Some(seconds), Some(mpps), Some(ns), Some(best)) =
        (r.seconds, r.mpps, r.ns_per_packet, r.best_mpps)
    {
        writeln!(
            out,
            "{}: {} packets ({} keyed), key {}, median of {} passes: {seconds:.4} s, {mpps:.1} Mpps, {ns:.2} ns/packet (best {best:.1} Mpps)",
            r.file, r.packets, r.keyed, r.key, r.passes
        )?;
    } else {
        writeln!(out, "{}: no packets, nothing to time", r.file)?;
    }
    Ok(())
}

#[derive(Args)]
pub struct EpochsArgs {
    /// Algorithms to measure, comma-separated (default: every one `netsift algorithms` lists).
    #[arg(long, value_delimiter = ',')]
    algo: Vec<String>,
    /// Packets of the synthetic trace (the generator's default model, Zipf 1.1, one source
    /// per four flows), all keyed by source address so every algorithm takes them.
    #[arg(long, default_value_t = 100_000, value_parser = flags::whole::<u64>(1_000..=100_000_000))]
    packets: u64,
    /// Packets per short epoch.
    #[arg(long, default_value_t = 20, value_parser = flags::whole::<u64>(1..=1_000_000))]
    epoch_packets: u64,
    /// Timed rounds of each pair of runs; the fastest of each side is kept.
    #[arg(long, default_value_t = 3, value_parser = flags::whole::<usize>(1..=100))]
    rounds: usize,
    /// One JSON array, one object per algorithm, instead of the table.
    #[arg(long)]
    json: bool,
}

/// One algorithm's row of `bench epochs`.
#[derive(Serialize)]
struct EpochCost {
    algorithm: String,
    tasks: Vec<algo::Task>,
    /// Epochs of the short-epoch run.
    epochs: u64,
    /// End-to-end ns per packet with the whole trace as one epoch.
    ns_per_packet_one_epoch: f64,
    /// The same with short epochs.
    ns_per_packet_short_epochs: f64,
    /// What each extra epoch costs: (short - one) / (epochs - 1), in microseconds: the
    /// algorithm's reset and queries, the exact truth's and the scoring.
    us_per_epoch: f64,
    /// The same in packets' worth of one-epoch work.
    packets_per_epoch: f64,
}

/// Time one run over `trace` (a keys21 trace in memory, copied before the clock starts) with
/// `epoch` packets per epoch, through the engine: from the run's start (its structures built)
/// to its report; past epochs are consumed as they close, as a live run's, so memory stays flat.
fn time_run(cfg: &measure::RunConfig, trace: &[u8], epoch: u64) -> Result<std::time::Duration> {
    let mut cfg = cfg.clone();
    cfg.epoch_packets = Some(epoch);
    let cap = Capture::from_bytes("bench epochs", trace.to_vec(), Some(trace::Format::Keys21))?;
    let run = engine::Run::new(cfg, engine::Source::Capture(cap))?;
    let mut start = Instant::now();
    let mut took = std::time::Duration::ZERO;
    run.run(&mut |e| {
        match e {
            engine::Event::Started(_) => start = Instant::now(),
            engine::Event::Finished(r) => {
                took = start.elapsed();
                black_box(r);
            }
            e => {
                black_box(e);
            }
        }
        Ok(())
    })?;
    Ok(took)
}

/// `netsift bench epochs`: what an epoch boundary costs each algorithm, end to end through the
/// runner. A run with short epochs against one with a single epoch over the same packets, in
/// alternating rounds (the machines are shared: a ratio from one run, the fastest of each side).
pub fn cmd_epochs(a: EpochsArgs, out: &mut Out) -> Result<()> {
    let names: Vec<String> = if a.algo.is_empty() {
        catalog::ALL.iter().map(|e| e.name.to_string()).collect()
    } else {
        a.algo.clone()
    };
    let spec = gen::Spec {
        packets: a.packets,
        flows: (a.packets / 10).max(100),
        ..gen::Spec::default()
    };
    // A keys21 trace (tuple and time per record) in memory: the runs read it as `run` reads a
    // key trace, with next to no parsing.
    let mut trace = Vec::new();
    gen::write(&spec, gen::OutFormat::Keys21, &mut trace)?;
    let mut rows = Vec::new();
    for name in &names {
        let entry = catalog::lookup(name)?;
        let mut cfg = measure::RunConfig {
            key: KeyKind::Src,
            ..measure::RunConfig::default()
        };
        cfg.measures =
            measure::RunConfig::measures_from_lists(entry.tasks, std::slice::from_ref(name))?;
        cfg.validate()?;
        let (mut one, mut short) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..a.rounds {
            one = one.min(time_run(&cfg, &trace, a.packets)?.as_secs_f64());
            short = short.min(time_run(&cfg, &trace, a.epoch_packets)?.as_secs_f64());
        }
        let n = a.packets as f64;
        let epochs = a.packets.div_ceil(a.epoch_packets);
        let per_epoch = (short - one).max(0.0) / (epochs.max(2) - 1) as f64;
        rows.push(EpochCost {
            algorithm: name.clone(),
            tasks: entry.tasks.to_vec(),
            epochs,
            ns_per_packet_one_epoch: one * 1e9 / n,
            ns_per_packet_short_epochs: short * 1e9 / n,
            us_per_epoch: per_epoch * 1e6,
            packets_per_epoch: per_epoch / (one / n),
        });
    }
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "{} keyed by source, epochs of {} ({}) vs one epoch; fastest of {}",
        count(a.packets, "packet", "packets"),
        count(a.epoch_packets, "packet", "packets"),
        count(a.packets.div_ceil(a.epoch_packets), "epoch", "epochs"),
        count(a.rounds as u64, "round", "rounds")
    )?;
    writeln!(
        out,
        "{:<16} {:>12} {:>12} {:>12} {:>14}",
        "algorithm", "ns/pkt one", "ns/pkt short", "us/epoch", "pkts/epoch"
    )?;
    for r in &rows {
        writeln!(
            out,
            "{:<16} {:>12.1} {:>12.1} {:>12.2} {:>14.1}",
            r.algorithm,
            r.ns_per_packet_one_epoch,
            r.ns_per_packet_short_epochs,
            r.us_per_epoch,
            r.packets_per_epoch
        )?;
    }
    Ok(())
}

#[derive(Args)]
pub struct ReevalArgs {
    /// Figure of the Re-evaluating paper (`all`: every figure, in order).
    #[arg(long, default_value = "all", value_parser = reeval_figure_parser())]
    figure: lab::ReevalFigure,
    /// Output directory for CSV, JSON, PNG and SVG per figure.
    #[arg(long, default_value = "out/reeval")]
    out: std::path::PathBuf,
    /// Small epochs and fewer points (seconds instead of minutes).
    #[arg(long)]
    quick: bool,
    /// Print every measured point as JSON on stdout.
    #[arg(long)]
    json: bool,
}

fn reeval_figure_parser() -> impl TypedValueParser<Value = lab::ReevalFigure> {
    PossibleValuesParser::new(lab::ReevalFigure::NAMES).try_map(|s| s.parse::<lab::ReevalFigure>())
}

/// `netsift bench reeval`: the Re-evaluating paper's figures (lab::reeval).
pub fn cmd_reeval(a: ReevalArgs, out: &mut Out) -> Result<()> {
    let args = lab::ReevalArgs {
        figure: a.figure,
        out: a.out.clone(),
        quick: a.quick,
        progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
    };
    let points = lab::run_reeval(&args)?;
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&points)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "{:<6} {:<18} {:>11} {:>5} {:>6} {:>9} {:>9} {:>9}",
        "figure", "series", "memory", "skew", "value", "ns_avg", "ns_p99", "precision"
    )?;
    for p in &points {
        writeln!(
            out,
            "{:<6} {:<18} {:>11} {:>5} {:>6} {:>9.2} {:>9.2} {:>9}",
            p.figure,
            p.series,
            p.memory_bytes,
            p.skew,
            p.value_bytes.map_or("-".into(), |v| v.to_string()),
            p.ns_avg,
            p.ns_p99,
            p.precision.map_or("-".into(), |v| format!("{v:.3}"))
        )?;
    }
    crate::say!(
        "netsift bench reeval: {} points written under {} (preset {})",
        points.len(),
        a.out.display(),
        lab::reeval::REEVAL_PRESET
    );
    Ok(())
}

#[derive(Args)]
pub struct InstaArgs {
    /// Figure of the InstaMeasure paper (`all`: every figure, in order).
    #[arg(long, default_value = "all", value_parser = insta_figure_parser())]
    figure: lab::InstaFigure,
    /// Output directory for CSV, JSON, PNG and SVG per figure.
    #[arg(long, default_value = "out/instameasure")]
    out: std::path::PathBuf,
    /// Small traces and fewer points (seconds instead of minutes).
    #[arg(long)]
    quick: bool,
    /// Print every measured point as JSON on stdout.
    #[arg(long)]
    json: bool,
}

fn insta_figure_parser() -> impl TypedValueParser<Value = lab::InstaFigure> {
    PossibleValuesParser::new(lab::InstaFigure::NAMES).try_map(|s| s.parse::<lab::InstaFigure>())
}

/// `netsift bench instameasure`: the InstaMeasure paper's figures 7-11 (lab::instameasure).
pub fn cmd_instameasure(a: InstaArgs, out: &mut Out) -> Result<()> {
    let args = lab::InstaArgs {
        figure: a.figure,
        out: a.out.clone(),
        quick: a.quick,
        progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
    };
    let points = lab::run_instameasure(&args)?;
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&points)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "{:<6} {:<13} {:<36} {:<8} {:<10} {:>12} unit",
        "figure", "panel", "series", "source", "x", "value"
    )?;
    for p in &points {
        writeln!(
            out,
            "{:<6} {:<13} {:<36} {:<8} {:<10} {:>12.5} {}",
            p.figure, p.panel, p.series, p.source, p.x, p.value, p.unit
        )?;
    }
    crate::say!(
        "netsift bench instameasure: {} points written under {}",
        points.len(),
        a.out.display()
    );
    Ok(())
}

#[derive(Args)]
pub struct SketchvisorArgs {
    /// Figure of the SketchVisor paper (`all`: every figure, in order).
    #[arg(long, default_value = "all", value_parser = sv_figure_parser())]
    figure: lab::SvFigure,
    /// Output directory for CSV, JSON, PNG and SVG per figure.
    #[arg(long, default_value = "out/sketchvisor")]
    out: std::path::PathBuf,
    /// Small traces and fewer points (seconds instead of minutes).
    #[arg(long)]
    quick: bool,
    /// Print every measured point as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Accuracy figures: the normal path drains at this share of the offered packets, the same
    /// for every sketch (the default regime, 0.5).
    #[arg(long, value_name = "SHARE", group = "regime", value_parser = share_parser())]
    normal_share: Option<f64>,
    /// Accuracy figures, the paper's regime (section 7.1): the trace offered at this many Gbps,
    /// each sketch's normal path draining at its own one-core rate measured in the run.
    #[arg(long, value_name = "GBPS", group = "regime", value_parser = positive_parser())]
    offered_gbps: Option<f64>,
    /// Accuracy figures: offered at this multiple of each sketch's own one-core rate (2: about
    /// half the packets overflow on any machine).
    #[arg(long, value_name = "FACTOR", group = "regime", value_parser = positive_parser())]
    overload: Option<f64>,
    /// Heavy-hitter thresholds as 0.05% of this NIC capacity x the epoch's length (section 7.1;
    /// 40 for the paper's) instead of 0.05% of the epoch's bytes (changers: of the total change).
    #[arg(long, value_name = "GBPS", value_parser = positive_parser())]
    nic_gbps: Option<f64>,
}

/// A finite number above 0.
fn positive_parser() -> impl TypedValueParser<Value = f64> {
    clap::builder::StringValueParser::new().try_map(|s: String| match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{s:?}: expected a number above 0")),
    })
}

/// A share in (0, 1].
fn share_parser() -> impl TypedValueParser<Value = f64> {
    clap::builder::StringValueParser::new().try_map(|s: String| match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err(format!("{s:?}: expected a share above 0 and at most 1")),
    })
}

fn sv_figure_parser() -> impl TypedValueParser<Value = lab::SvFigure> {
    PossibleValuesParser::new(lab::SvFigure::NAMES).try_map(|s| s.parse::<lab::SvFigure>())
}

/// `netsift bench sketchvisor`: the SketchVisor paper's figures 6-14 and 16 (lab::sketchvisor).
pub fn cmd_sketchvisor(a: SketchvisorArgs, out: &mut Out) -> Result<()> {
    let args = lab::SvArgs {
        figure: a.figure,
        out: a.out.clone(),
        quick: a.quick,
        progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        regime: match (a.normal_share, a.offered_gbps, a.overload) {
            (_, Some(g), _) => lab::SvRegime::OfferedGbps(g),
            (_, _, Some(k)) => lab::SvRegime::Overload(k),
            (Some(f), _, _) => lab::SvRegime::Share(f),
            _ => lab::SvRegime::default(),
        },
        nic_gbps: a.nic_gbps,
    };
    crate::say!(
        "netsift bench sketchvisor: accuracy figures with the {}; heavy hitters at 0.05% of {}",
        args.regime.describe(),
        args.nic_gbps
            .map_or("the epoch's bytes".to_string(), |g| format!(
                "{g} Gbps x the epoch"
            ))
    );
    let points = lab::run_sketchvisor(&args)?;
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&points)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "{:<6} {:<14} {:<24} {:<8} {:<16} {:>12} unit",
        "figure", "panel", "series", "source", "x", "value"
    )?;
    for p in &points {
        writeln!(
            out,
            "{:<6} {:<14} {:<24} {:<8} {:<16} {:>12.5} {}",
            p.figure, p.panel, p.series, p.source, p.x, p.value, p.unit
        )?;
    }
    crate::say!(
        "netsift bench sketchvisor: {} points written under {}",
        points.len(),
        a.out.display()
    );
    Ok(())
}
