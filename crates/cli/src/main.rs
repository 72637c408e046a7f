//! `netsift`: the command-line front end. Subcommands are thin: they parse flags, call the
//! library crates, and print tables or JSON. Errors are reported with `anyhow` and name the file,
//! offset or flag.

#![forbid(unsafe_code)]

use netsift::{bench, stats};

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use key::KeyKind;
use trace::{Capture, Format};

#[derive(Parser)]
#[command(
    name = "netsift",
    version,
    about = "A software network-measurement engine: capture readers, exact ground truth, sketches.",
    long_about = None
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Per-file statistics of captures (pcap, pcapng, key traces). Without FILE: a built-in
    /// synthetic trace.
    Stats(StatsArgs),
    /// Measurement tasks over a trace (default: every task on a built-in synthetic trace), with
    /// accuracy against exact ground truth and each algorithm's cost.
    Run(netsift::run::RunArgs),
    /// List the algorithms and the tasks each answers (`--json`: also the key lengths each
    /// holds and its default parameters).
    Algorithms {
        #[arg(long)]
        json: bool,
    },
    /// Write a synthetic trace (Zipf flow sizes, realistic 5-tuples).
    Gen(GenArgs),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCmd),
}

#[derive(Args)]
struct StatsArgs {
    /// Capture files; `-` reads standard input.
    files: Vec<String>,
    /// Force the input format instead of detecting it (pcap, pcapng, keys4, keys13, keys21).
    #[arg(long)]
    format: Option<Format>,
    /// One JSON object per file (a JSON array) instead of the table.
    #[arg(long)]
    json: bool,
    /// How many of the largest flows to list.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Key kind for the top flows and the Zipf estimate.
    #[arg(long, default_value = "five_tuple")]
    key: KeyKind,
}

#[derive(Args)]
struct GenArgs {
    #[arg(long, default_value_t = 2_000_000)]
    packets: u64,
    #[arg(long, default_value_t = 100_000)]
    flows: u64,
    /// Size of the source-address pool (default: flows / 4).
    #[arg(long)]
    sources: Option<u64>,
    /// Zipf skew of flow sizes.
    #[arg(long, default_value_t = 1.1)]
    skew: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Packet size in bytes on the wire, or `mix` for a realistic mix.
    #[arg(long, default_value = "mix")]
    size: gen::Size,
    /// `shuffled` (independent interleaving) or `bursty` (flows arrive in trains).
    #[arg(long, default_value = "bursty")]
    order: gen::Order,
    /// Output format: pcap, keys4, keys13, keys21.
    #[arg(long, default_value = "pcap")]
    format: gen::OutFormat,
    /// Packets per second of capture time.
    #[arg(long, default_value_t = 1_000_000.0)]
    rate: f64,
    /// Bytes of each packet written to a pcap (the wire length is kept in the record).
    #[arg(long, default_value_t = 128)]
    snaplen: u32,
    /// Output file, `-` for standard output.
    #[arg(long, short)]
    out: PathBuf,
}

impl GenArgs {
    fn spec(&self) -> gen::Spec {
        gen::Spec {
            packets: self.packets,
            flows: self.flows,
            sources: self.sources,
            skew: self.skew,
            seed: self.seed,
            size: self.size,
            order: self.order,
            rate_pps: self.rate,
            snaplen: self.snaplen,
            ..gen::Spec::default()
        }
    }
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Parse-only throughput: read, classify and extract the key of every packet, no counting.
    Parse(bench::ParseArgs),
    /// Reproduce the Agg-Evict paper's figures (throughput and latency with and without the
    /// aggregator), writing CSV, JSON, PNG and SVG per figure.
    AggEvict(bench::AggEvictArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Stats(a) => cmd_stats(a),
        Cmd::Run(a) => netsift::run::cmd_run(a),
        Cmd::Algorithms { json } => netsift::algorithms(json).map(|_| true),
        Cmd::Gen(a) => cmd_gen(a).map(|_| true),
        Cmd::Bench(BenchCmd::Parse(a)) => bench::cmd_parse(a).map(|_| true),
        Cmd::Bench(BenchCmd::AggEvict(a)) => bench::cmd_agg_evict(a).map(|_| true),
    };
    match res {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("netsift: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Returns Ok(false) if any file could not be read completely (reported on stderr).
fn cmd_stats(a: StatsArgs) -> Result<bool> {
    let mut all = vec![];
    let mut ok = true;
    let mut run = |file: &str, cap: Result<Capture>| match cap {
        Ok(cap) => {
            let st = stats::file_stats(&cap, a.top, a.key);
            if let Some(e) = &st.error {
                eprintln!("netsift: {e}");
                ok = false;
            }
            if !a.json {
                stats::print_table(&st);
                println!();
            }
            all.push(st);
        }
        Err(e) => {
            let msg = format!("{e:#}");
            eprintln!("netsift: {msg}");
            ok = false;
            all.push(stats::FileStats::failed(file, msg));
        }
    };
    if a.files.is_empty() {
        run("<built-in>", netsift::default_capture());
    }
    for f in &a.files {
        run(f, Capture::open(f, a.format).map_err(anyhow::Error::from));
    }
    if !a.json && !ok {
        eprintln!("netsift: some files could not be read completely (see above)");
    }
    if a.json {
        let out = std::io::stdout();
        let mut out = out.lock();
        serde_json::to_writer_pretty(&mut out, &all)?;
        writeln!(out)?;
    }
    Ok(ok)
}

fn cmd_gen(a: GenArgs) -> Result<()> {
    let spec = a.spec();
    let t = Instant::now();
    let n = if a.out.as_os_str() == "-" {
        gen::write(&spec, a.format, std::io::stdout().lock())?
    } else {
        let f = std::fs::File::create(&a.out)
            .with_context(|| format!("cannot create {}", a.out.display()))?;
        gen::write(&spec, a.format, f).with_context(|| format!("writing {}", a.out.display()))?
    };
    let s = t.elapsed().as_secs_f64();
    eprintln!(
        "netsift gen: {n} packets to {} in {s:.2} s ({:.1} M packets/s)",
        a.out.display(),
        n as f64 / s / 1e6
    );
    Ok(())
}
