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
    #[arg(long)]
    format: Option<Format>,
    /// Timed passes over the file (1..=1000); the median is reported.
    #[arg(long, default_value_t = 5, allow_negative_numbers = true,
          value_parser = flags::whole::<usize>(1..=MAX_PASSES as u64))]
    passes: usize,
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
    };
    let points = lab::run_agg_evict(&args)?;
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&points)?)?;
    } else {
        writeln!(
            out,
            "{:<8} {:<16} {:<10} {:<11} {:<12} {:>6} {:>9} {:>9} {:>9} {:>8}  params",
            "figure",
            "algorithm",
            "accel",
            "key",
            "order",
            "batch",
            "Mpps",
            "ns_avg",
            "ns_p99",
            "evicted"
        )?;
        for p in &points {
            writeln!(
                out,
                "{:<8} {:<16} {:<10} {:<11} {:<12} {:>6} {:>9.1} {:>9.2} {:>9.2} {:>8}  {}",
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
                p.params
            )?;
        }
        crate::say!(
            "netsift bench agg-evict: {} points written under {}",
            points.len(),
            a.out.display()
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
