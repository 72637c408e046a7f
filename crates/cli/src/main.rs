//! `netsift`: the command-line front end. Subcommands are thin: they parse flags, call the
//! library crates, and print tables or JSON. Errors are reported with `anyhow` and name the file,
//! offset or flag.

#![forbid(unsafe_code)]

use netsift::out::{self, Out};
use netsift::{bench, flags, stats};

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
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
    Run(Box<netsift::run::RunCmd>),
    /// The tasks of `run` over packets captured from network interfaces (libpcap): epochs by
    /// capture time (default 1 s) printed as they close with the kernel's received and dropped
    /// counts; SIGTERM/SIGINT report the open epoch and stop, SIGHUP re-reads --config.
    // The epoch flags are `run`'s; their help states live's own default.
    #[command(
        mut_arg("epoch_ms", |a| a.help(format!(
            "Epoch length in milliseconds of capture time (at least 1; default for live: {} \
             unless --epoch-packets or the config gives an epoch)",
            netsift::live::DEFAULT_EPOCH_MS
        ))),
        mut_arg("epoch_packets", |a| a.help(format!(
            "Epoch length in packets (at least 1; default for live: none, epochs of {} ms of \
             capture time, since a packet count may never be reached on a quiet link)",
            netsift::live::DEFAULT_EPOCH_MS
        )))
    )]
    Live(Box<netsift::live::LiveArgs>),
    /// List the algorithms and the tasks each answers (`--json`: also the key lengths each
    /// holds and its default parameters).
    Algorithms {
        /// One JSON array of objects (name, tasks, key lengths, default parameters and
        /// memory) instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Write a synthetic trace (Zipf flow sizes, realistic 5-tuples).
    Gen(GenArgs),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCmd),
    /// Merge hosts' epoch snapshots (`run --snapshots DIR --host ID`) into the network-wide
    /// answers, scored against the exact truth of `--truth` traces.
    Merge(netsift::merge::MergeArgs),
    /// A `run` whose epoch snapshots are published to NATS JetStream (`netsift.snapshots.HOST`),
    /// spooled on disk until acknowledged.
    Agent(Box<netsift::agent::AgentArgs>),
    /// The control plane over NATS JetStream: merges each epoch's snapshots from every host
    /// (as `merge`), publishes and stores the network-wide report.
    Controller(netsift::controller::ControllerArgs),
    /// Demonstrations.
    #[command(subcommand)]
    Demo(netsift::demo::DemoCmd),
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
    #[arg(long, default_value_t = 10, allow_negative_numbers = true,
          value_parser = flags::whole::<usize>(0..=u64::MAX))]
    top: usize,
    /// Key kind for the top flows and the Zipf estimate.
    #[arg(long, default_value = "five_tuple")]
    key: KeyKind,
    /// Which IP header of a tunnelled packet (GRE, ERSPAN, VXLAN, VXLAN-GPE, GENEVE, GTP-U, MPLS
    /// over UDP, IP-in-IP, 6in4, 4in6, 6in6) the classes, flows and top flows count: outer (as
    /// tshark's first ip.src) or inner. MPLS, PPPoE and NSH are always looked through.
    #[arg(long, value_enum, default_value = "outer")]
    tunnel: netsift::run::TunnelArg,
}

/// The ranges of `gen`'s parameters are the generator's (`gen::Spec::validate`, which names the
/// parameter; its errors are reworded with the flag's name); the unsigned ones are also checked
/// by clap, so that a negative value says the range too.
#[derive(Args)]
struct GenArgs {
    /// Packets in the trace (0..=2^40; a file also needs the disk space, checked before
    /// writing).
    #[arg(long, default_value_t = 2_000_000, allow_negative_numbers = true,
          value_parser = flags::whole::<u64>(0..=gen::MAX_PACKETS))]
    packets: u64,
    /// Number of flows (1..=2^25).
    #[arg(long, default_value_t = 100_000, allow_negative_numbers = true,
          value_parser = flags::whole::<u64>(1..=gen::MAX_FLOWS))]
    flows: u64,
    /// Size of the source-address pool (default: flows / 4; 1..=2^28).
    #[arg(long, allow_negative_numbers = true,
          value_parser = flags::whole::<u64>(1..=gen::MAX_SOURCES))]
    sources: Option<u64>,
    /// Zipf skew of flow sizes (0..=10).
    #[arg(long, default_value_t = 1.1, allow_negative_numbers = true)]
    skew: f64,
    /// Seed (unsigned 64-bit).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = flags::seed)]
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
    #[arg(long, default_value_t = 1_000_000.0, allow_negative_numbers = true)]
    rate: f64,
    /// Bytes of each packet written to a pcap (the wire length is kept in the record; 54..=262144).
    #[arg(long, default_value_t = 128, allow_negative_numbers = true,
          value_parser = flags::whole::<u32>(gen::MIN_SNAPLEN as u64..=gen::MAX_SNAPLEN as u64))]
    snaplen: u32,
    /// Output file, `-` for standard output. A file is written under a temporary name beside it
    /// and renamed at the end: an existing file stays as it was until the new one is complete.
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
    /// What an epoch boundary costs each algorithm (reset, queries, exact truth, scoring): short
    /// epochs against one epoch over the same synthetic packets.
    Epochs(bench::EpochsArgs),
    /// The network-wide path's costs per epoch for N simulated agents: snapshot encoding,
    /// the controller's merge, publication through a local nats-server and the delay to the
    /// report.
    Netwide(netsift::demo::BenchNetwideArgs),
    /// Reproduce the Re-evaluating paper's figures (hashes, sketches and heaps by size, skew,
    /// value layout, shared vs separate, a co-runner), writing CSV, JSON, PNG and SVG.
    Reeval(bench::ReevalArgs),
    /// The whole path of `run` (read, parse, key, dispatch, aggregate, update, answer) for the
    /// nine default tasks, by workers, with and without Agg-Evict and ground truth.
    Pipeline(netsift::pipeline::PipelineArgs),
    /// Reproduce the InstaMeasure paper's figures 7-11 (regulation rate, retention, throughput
    /// by workers, heavy-hitter detection delay, counting error by flow size), writing CSV,
    /// JSON, PNG and SVG.
    Instameasure(bench::InstaArgs),
    /// Reproduce the SketchVisor paper's figures 6-14 and 16 (throughput with a fast path,
    /// accuracy of the recoveries under overload, hosts, fast-path share and size, kick-outs
    /// against Misra-Gries), writing CSV, JSON, PNG and SVG.
    Sketchvisor(bench::SketchvisorArgs),
}

/// Every command writes to `out`; its error, or a failure to flush what it wrote, goes to
/// [`out::report`]: a broken pipe exits quietly with status 0, any other error is one line on
/// stderr and status 1.
fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    let mut out = Out::new();
    let res = match cli.cmd {
        Cmd::Stats(a) => cmd_stats(a, &mut out),
        Cmd::Run(a) => netsift::run::cmd_run(*a, &mut out),
        Cmd::Live(a) => netsift::live::cmd_live(*a, &mut out),
        Cmd::Algorithms { json } => netsift::algorithms(json, &mut out).map(|_| true),
        Cmd::Gen(a) => cmd_gen(a, &mut out).map(|_| true),
        Cmd::Merge(a) => netsift::merge::cmd_merge(a, &mut out),
        Cmd::Agent(a) => netsift::agent::cmd_agent(*a, &mut out),
        Cmd::Controller(a) => netsift::controller::cmd_controller(a, &mut out),
        Cmd::Demo(netsift::demo::DemoCmd::Network(a)) => netsift::demo::cmd_network(a, &mut out),
        Cmd::Bench(BenchCmd::Parse(a)) => bench::cmd_parse(a, &mut out).map(|_| true),
        Cmd::Bench(BenchCmd::AggEvict(a)) => bench::cmd_agg_evict(a, &mut out).map(|_| true),
        Cmd::Bench(BenchCmd::Epochs(a)) => bench::cmd_epochs(a, &mut out).map(|_| true),
        Cmd::Bench(BenchCmd::Netwide(a)) => netsift::demo::cmd_bench_netwide(a, &mut out),
        Cmd::Bench(BenchCmd::Reeval(a)) => bench::cmd_reeval(a, &mut out).map(|_| true),
        Cmd::Bench(BenchCmd::Instameasure(a)) => bench::cmd_instameasure(a, &mut out).map(|_| true),
        Cmd::Bench(BenchCmd::Sketchvisor(a)) => bench::cmd_sketchvisor(a, &mut out).map(|_| true),
        Cmd::Bench(BenchCmd::Pipeline(a)) => {
            netsift::pipeline::cmd_pipeline(a, &mut out).map(|_| true)
        }
    };
    let res = res.and_then(|ok| {
        out.flush()?;
        Ok(ok)
    });
    match res {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => ExitCode::from(out::report(&e)),
    }
}

/// A command line clap refused: its message under the prefix of every error of the process
/// (`netsift: error: ...`, as [`out::report`] writes), with clap's status (2). `--help` and
/// `--version`, which clap also returns as errors, print and exit as clap does.
fn usage_error(e: &clap::Error) -> ExitCode {
    if !e.use_stderr() {
        e.exit();
    }
    // Plain text: the styled rendering is for clap's own printing to a terminal.
    let text = e.render().to_string();
    match text.strip_prefix("error: ") {
        Some(rest) => netsift::say!("netsift: error: {}", rest.trim_end()),
        None => netsift::say!("{}", text.trim_end()),
    }
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
}

/// Returns Ok(false) if any file could not be read completely (reported on stderr).
fn cmd_stats(a: StatsArgs, out: &mut Out) -> Result<bool> {
    let mut all = vec![];
    let mut ok = true;
    // No file: the built-in trace.
    let files: Vec<Option<&str>> = if a.files.is_empty() {
        vec![None]
    } else {
        a.files.iter().map(|f| Some(f.as_str())).collect()
    };
    for file in files {
        let (file, cap) = match file {
            None => ("<built-in>", engine::stats::builtin()),
            Some(f) => (f, Capture::open(f, a.format).map_err(anyhow::Error::from)),
        };
        match cap {
            Ok(cap) => {
                let st = stats::file_stats_with(&cap, a.top, a.key, a.tunnel.into());
                if let Some(e) = &st.error {
                    netsift::say!("netsift: error: {e}");
                    ok = false;
                }
                if !a.json {
                    stats::print_table(&st, out)?;
                    writeln!(out)?;
                }
                all.push(st);
            }
            Err(e) => {
                let msg = out::render(&e);
                netsift::say!("netsift: error: {msg}");
                ok = false;
                all.push(stats::FileStats::failed(file, msg));
            }
        }
    }
    if !a.json && !ok {
        netsift::say!("netsift: error: some files could not be read completely (see above)");
    }
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&all)?)?;
    }
    Ok(ok)
}

/// `gen`'s parameters as the command line names them: a [`gen::SpecError`] names the spec's
/// field (`` `rate_pps` ``), the user typed a flag (`--rate`).
fn gen_param_error(e: gen::SpecError) -> anyhow::Error {
    const FLAGS: [(&str, &str); 7] = [
        ("packets", "--packets"),
        ("flows", "--flows"),
        ("sources", "--sources"),
        ("skew", "--skew"),
        ("size", "--size"),
        ("rate_pps", "--rate"),
        ("snaplen", "--snaplen"),
    ];
    let mut msg = e.to_string();
    for (field, flag) in FLAGS {
        msg = msg.replace(&format!("`{field}`"), flag);
    }
    anyhow::anyhow!(msg)
}

/// `gen`: the spec is validated before the output is touched; a file is written to a temporary
/// file in the same directory (`.NAME.tmp-PID`) and renamed over the target at the end, so an
/// error or an interrupt leaves an existing file as it was and removes the temporary file. A
/// file whose largest possible size exceeds its file system's free space is refused before
/// anything is written. Anything but a regular file (a device such as `/dev/null`, a FIFO) is
/// written in place. SIGINT/SIGTERM stop the generator within a batch of packets (or a slice of
/// the bursty order's tally, which precedes the first packet): a file is then not written,
/// standard output keeps a valid truncated trace, and the process exits 130/143 as `run` does.
fn cmd_gen(a: GenArgs, out: &mut Out) -> Result<()> {
    let spec = a.spec();
    let g = gen::Generator::new(&spec).map_err(gen_param_error)?;
    netsift::signals::install();
    let stop = || netsift::signals::caught().is_some();
    let written = std::cell::Cell::new(0u64);
    let write = |w: &mut dyn std::io::Write| {
        let n = g.write_until(a.format, w, &stop)?;
        written.set(n);
        match netsift::signals::caught() {
            // An error, so that a file is not renamed into place.
            Some(_) => Err(std::io::Error::other("interrupted by a signal")),
            None => Ok(n),
        }
    };
    let to_stdout = a.out.as_os_str() == "-";
    let t = Instant::now();
    let res = if to_stdout {
        out.write_with(write).map_err(anyhow::Error::from)
    } else {
        engine::output::write_replacing(&a.out, spec.max_output_bytes(a.format), write)
    };
    if let Some(code) = netsift::signals::caught() {
        let _ = out.flush();
        let n = written.get();
        netsift::say!(
            "netsift: interrupted by {} after {} of {}: {}",
            netsift::signals::name(code),
            measure::report::count(n, "packet", "packets"),
            spec.packets,
            if to_stdout {
                "standard output holds a valid, truncated trace".to_string()
            } else if std::fs::metadata(&a.out).ok().is_none_or(|m| m.is_file()) {
                format!(
                    "{} not written (an existing file is unchanged)",
                    a.out.display()
                )
            } else {
                // A device or FIFO is written in place.
                format!("{} got a valid, truncated trace", a.out.display())
            }
        );
        std::process::exit(code);
    }
    let n = res?;
    let s = t.elapsed().as_secs_f64();
    netsift::say!(
        "netsift gen: {} to {} in {s:.2} s ({:.1} M packets/s)",
        measure::report::count(n, "packet", "packets"),
        a.out.display(),
        n as f64 / s / 1e6
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every subcommand and every argument of every subcommand has help text (issue 34.9: empty
    /// descriptions in `run --format`, `bench parse --json` and others).
    #[test]
    fn every_command_and_argument_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                let id = a.get_id().as_str();
                // clap's own --help and --version.
                if id == "help" || id == "version" {
                    continue;
                }
                let text = a.get_help().or(a.get_long_help()).map(|h| h.to_string());
                if text.is_none_or(|t| t.trim().is_empty()) {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                let path = format!("{path} {}", sub.get_name());
                if sub.get_name() == "help" {
                    continue;
                }
                let about = sub.get_about().or(sub.get_long_about());
                if about.is_none_or(|t| t.to_string().trim().is_empty()) {
                    missing.push(path.clone());
                }
                walk(sub, &path, missing);
            }
        }
        let cmd = Cli::command();
        cmd.clone().debug_assert();
        let mut missing = vec![];
        walk(&cmd, "netsift", &mut missing);
        assert!(missing.is_empty(), "no help text: {missing:#?}");
    }

    /// `live --help` states live's own epoch default (1 s of capture time), not `run`'s.
    #[test]
    fn live_help_states_lives_epoch_default() {
        let mut cmd = Cli::command();
        let live = cmd.find_subcommand_mut("live").expect("live");
        let help = live.render_long_help().to_string();
        let ms = netsift::live::DEFAULT_EPOCH_MS;
        assert!(
            help.contains(&format!("default for live: {ms}")),
            "live's default epoch of {ms} ms is not stated:\n{help}"
        );
        assert!(!help.contains("default 2,000,000"), "{help}");
    }

    /// The README's usage of `run` lists every preset (issue 34.9: `instameasure` was missing).
    #[test]
    fn readme_usage_lists_every_preset() {
        let readme = include_str!("../../../README.md");
        let line = readme
            .lines()
            .find(|l| l.contains("[--preset "))
            .expect("a usage line with --preset");
        let listed = line
            .split("[--preset ")
            .nth(1)
            .and_then(|r| r.split(']').next())
            .unwrap_or_default();
        let listed: Vec<&str> = listed.split('|').collect();
        for p in catalog::presets::names() {
            assert!(
                listed.contains(&p),
                "{p} missing from the README's `{line}`"
            );
        }
    }
}
