//! `netsift bench pipeline` (issue 13): the whole path of `netsift run` from a capture in memory
//! (read, parse, key, dispatch, aggregate, update, answer), for the nine default tasks with their
//! default algorithms, for 1..N workers, with and without Agg-Evict and ground truth. Per
//! configuration: Mpps and ns per packet end to end, and the p99 of the reader's time per chunk
//! of 4096 packets (what a packet waits behind when the workers push back). The capture is a
//! pcap held in memory (as a page-cached file is mapped), so no disk is timed.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use trace::{Capture, Format};

use crate::flags;
use crate::out::Out;

/// Packets per timed chunk of the reader.
const CHUNK: u64 = 4096;

#[derive(Args)]
pub struct PipelineArgs {
    /// Capture to run (read into memory first); default: a generated Zipf(1.1) bursty pcap.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Packets of the generated capture.
    #[arg(long, default_value_t = 4_000_000, value_parser = flags::whole::<u64>(10_000..=200_000_000))]
    packets: u64,
    /// Largest worker count (default: the cores available; runs 1..=N).
    #[arg(long, value_parser = flags::whole::<usize>(1..=256))]
    workers: Option<usize>,
    /// Passes per configuration; the fastest is kept (shared machines).
    #[arg(long, default_value_t = 2, value_parser = flags::whole::<usize>(1..=50))]
    rounds: usize,
    /// 200 k packets and one pass: a smoke run.
    #[arg(long)]
    quick: bool,
    /// Write pipeline.csv, .json, .png and .svg here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// One JSON array, one object per configuration, instead of the table.
    #[arg(long)]
    json: bool,
}

/// One configuration's figures.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub workers: usize,
    pub accel: &'static str,
    pub truth: bool,
    pub packets: u64,
    pub seconds: f64,
    pub mpps: f64,
    pub ns_per_packet: f64,
    /// The reader's time per chunk of 4096 packets, 99th percentile, in microseconds.
    pub p99_chunk_us: f64,
    /// The same per packet, in nanoseconds.
    pub p99_ns_per_packet: f64,
}

fn capture(a: &PipelineArgs) -> Result<Capture> {
    if let Some(p) = &a.trace {
        let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
        return Ok(Capture::from_bytes(&p.display().to_string(), bytes, None)?);
    }
    let spec = gen::Spec {
        packets: if a.quick { 200_000 } else { a.packets },
        order: gen::Order::Bursty,
        snaplen: 64,
        ..gen::Spec::default()
    };
    let mut buf = Vec::new();
    gen::write(&spec, gen::OutFormat::Pcap, &mut buf).context("generating the capture")?;
    let name = format!("<gen --packets {} --order bursty>", spec.packets);
    Ok(Capture::from_bytes(&name, buf, Some(Format::Pcap))?)
}

/// One pass of the nine default tasks over `cap` (its bytes copied into a capture of its own
/// before the clock starts), through the engine as `run` makes it: timed from the run's start
/// (its structures built) to its report, and per chunk of [`CHUNK`] packets by the engine's
/// progress events.
fn pass(cap: &Capture, workers: usize, accel: measure::Accel, truth: bool) -> Result<Row> {
    let cfg = measure::RunConfig {
        measures: measure::RunConfig::measures_from_lists(&algo::Task::ALL, &[])?,
        workers,
        accel,
        truth,
        // The packet epochs of the configuration, not the ones `run` chooses for a capture.
        epoch_packets: Some(truth::DEFAULT_EPOCH_PACKETS),
        ..measure::RunConfig::default()
    };
    let own = Capture::from_bytes(cap.name(), cap.bytes().to_vec(), Some(cap.format()))?;
    let run = engine::Run::new(cfg, engine::Source::Capture(own))?.progress_every(CHUNK);
    let mut chunks: Vec<u64> = Vec::new();
    let mut n = 0u64;
    let mut start = Instant::now();
    let mut t = Instant::now();
    let mut seconds = 0.0;
    run.run(&mut |e| {
        match e {
            engine::Event::Started(_) => {
                start = Instant::now();
                t = start;
            }
            engine::Event::Progress { packets, .. } if packets > 0 => {
                chunks.push(t.elapsed().as_nanos() as u64);
                t = Instant::now();
            }
            engine::Event::Finished(r) => {
                seconds = start.elapsed().as_secs_f64();
                n = r.totals.packets;
                std::hint::black_box(r);
            }
            e => {
                std::hint::black_box(e);
            }
        }
        Ok(())
    })?;
    chunks.sort_unstable();
    let p99 = chunks
        .get((chunks.len() * 99 / 100).min(chunks.len().saturating_sub(1)))
        .copied()
        .unwrap_or(0) as f64;
    Ok(Row {
        workers,
        accel: accel.name(),
        truth,
        packets: n,
        seconds,
        mpps: n as f64 / seconds / 1e6,
        ns_per_packet: seconds * 1e9 / n.max(1) as f64,
        p99_chunk_us: p99 / 1e3,
        p99_ns_per_packet: p99 / CHUNK as f64,
    })
}

/// Every configuration, the fastest of `rounds` passes each.
pub fn run(cap: &Capture, max_workers: usize, rounds: usize) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for truth in [true, false] {
        for accel in [measure::Accel::None, measure::Accel::AggEvict] {
            for workers in 1..=max_workers {
                let mut best: Option<Row> = None;
                for _ in 0..rounds {
                    let r = pass(cap, workers, accel, truth)?;
                    if best.as_ref().is_none_or(|b| r.seconds < b.seconds) {
                        best = Some(r);
                    }
                }
                rows.extend(best);
            }
        }
    }
    Ok(rows)
}

pub fn cmd_pipeline(a: PipelineArgs, out: &mut Out) -> Result<()> {
    let cap = capture(&a)?;
    let max = a.workers.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let rounds = if a.quick { 1 } else { a.rounds };
    let rows = run(&cap, max, rounds)?;
    if let Some(dir) = &a.out {
        write(dir, &rows, a.quick)?;
    }
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "bench pipeline: {} ({} packets), nine default tasks, fastest of {rounds} pass(es)",
        cap.name(),
        rows.first().map_or(0, |r| r.packets)
    )?;
    writeln!(
        out,
        "  {:>7} {:<10} {:<5} {:>8} {:>10} {:>12} {:>14}",
        "workers", "accel", "truth", "Mpps", "ns/packet", "p99 us/4096", "x 1 worker"
    )?;
    for r in &rows {
        let one = rows
            .iter()
            .find(|o| o.workers == 1 && o.accel == r.accel && o.truth == r.truth)
            .map_or(1.0, |o| o.seconds / r.seconds);
        writeln!(
            out,
            "  {:>7} {:<10} {:<5} {:>8.2} {:>10.1} {:>12.1} {:>13.2}x",
            r.workers,
            r.accel,
            if r.truth { "on" } else { "off" },
            r.mpps,
            r.ns_per_packet,
            r.p99_chunk_us,
            one
        )?;
    }
    Ok(())
}

/// pipeline.csv, .json, and a chart of Mpps by workers, one line per (accel, truth).
fn write(dir: &std::path::Path, rows: &[Row], quick: bool) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut csv = String::from(
        "workers,accel,truth,packets,seconds,mpps,ns_per_packet,p99_chunk_us,p99_ns_per_packet\n",
    );
    for r in rows {
        csv.push_str(&format!(
            "{},{},{},{},{},{},{},{},{}\n",
            r.workers,
            r.accel,
            r.truth,
            r.packets,
            r.seconds,
            r.mpps,
            r.ns_per_packet,
            r.p99_chunk_us,
            r.p99_ns_per_packet
        ));
    }
    let p = dir.join("pipeline.csv");
    std::fs::write(&p, csv).with_context(|| format!("writing {}", p.display()))?;
    let p = dir.join("pipeline.json");
    std::fs::write(&p, serde_json::to_string_pretty(rows)?)
        .with_context(|| format!("writing {}", p.display()))?;
    let max = rows.iter().map(|r| r.workers).max().unwrap_or(1);
    let cats: Vec<String> = (1..=max).map(|w| w.to_string()).collect();
    let mut series = Vec::new();
    for truth in [true, false] {
        for accel in ["none", "agg_evict"] {
            series.push(lab::output::Series::new(
                format!("{accel}, truth {}", if truth { "on" } else { "off" }),
                (1..=max)
                    .map(|w| {
                        rows.iter()
                            .find(|r| r.workers == w && r.accel == accel && r.truth == truth)
                            .map(|r| r.mpps)
                    })
                    .collect(),
            ));
        }
    }
    let panel = lab::output::Panel {
        title: "end to end, nine default tasks".into(),
        x_label: "workers".into(),
        y_label: "Mpps".into(),
        x: lab::output::XAxis::Numeric((1..=max).map(|w| w as f64).collect()),
        cats,
        series,
    };
    lab::output::write_charts(dir, "pipeline", "netsift bench pipeline", &[panel], quick)?;
    Ok(())
}
