//! `netsift run`: measurement tasks over a trace in one pass, with accuracy against exact ground
//! truth and each algorithm's cost.

use anyhow::{bail, Context, Result};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::Args;
use key::KeyKind;
use measure::RunConfig;
use trace::Format;
use truth::Weight;

use crate::flags::{self, RecoverArg};
use crate::out::Out;
use crate::print::{Notes, Printer};

/// `netsift run`: the trace and its format, then the measurement options `live` shares.
#[derive(Args)]
pub struct RunCmd {
    /// Capture or key trace (`-` for standard input). Without it: the built-in synthetic trace
    /// (4 M packets, two epochs of 2 M).
    pub(crate) trace: Option<String>,
    /// Input format instead of detecting it (pcap, pcapng, keys4, keys13, keys21).
    #[arg(long)]
    pub(crate) format: Option<Format>,
    #[command(flatten)]
    pub args: RunArgs,
}

/// What is measured and how it is reported: the options of `run` that `live` takes as well.
#[derive(Args)]
pub struct RunArgs {
    /// TOML run configuration (many algorithm/task pairs, their parameters); flags given on the
    /// command line override its top-level fields.
    #[arg(long)]
    pub(crate) config: Option<String>,
    /// Tasks, comma-separated: heavy_hitters, heavy_changers, superspreaders, ddos, cardinality,
    /// flow_size_distribution, entropy, top_k, flow_size. Default: all (or all the algorithms
    /// answer).
    #[arg(long, value_delimiter = ',', value_parser = task_parser())]
    pub(crate) task: Vec<algo::Task>,
    /// Algorithms, comma-separated (see `netsift algorithms`). Default: one per task.
    #[arg(long, value_delimiter = ',')]
    pub(crate) algo: Vec<String>,
    /// Flow key of the tasks: src, dst, pair, four_tuple or five_tuple (default five_tuple;
    /// superspreaders and DDoS always key by address pair).
    #[arg(long)]
    pub(crate) key: Option<KeyKind>,
    /// Count packets or bytes.
    #[arg(long)]
    pub(crate) weight: Option<WeightArg>,
    /// Epoch length in packets (default 2,000,000; at least 1).
    #[arg(long, conflicts_with = "epoch_ms", allow_negative_numbers = true,
          value_parser = flags::whole::<u64>(1..=u64::MAX))]
    pub(crate) epoch_packets: Option<u64>,
    /// Epoch length in milliseconds of capture time (at least 1).
    #[arg(long, allow_negative_numbers = true, value_parser = flags::whole::<u64>(1..=u64::MAX))]
    pub(crate) epoch_ms: Option<u64>,
    /// Threshold of the heavy-hitter / changer / spreader tasks, a positive number: below 1 a
    /// fraction, else absolute.
    #[arg(long, allow_negative_numbers = true, value_parser = flags::threshold)]
    pub(crate) threshold: Option<f64>,
    /// NIC capacity in Gbit/s (SketchVisor 7.1): heavy hitters' and changers' fractional
    /// thresholds are then fractions of G x 1e9 / 8 x the epoch's length in bytes, the same
    /// every epoch, instead of each epoch's own bytes or total change. Needs --epoch-ms and
    /// --weight bytes; the header gives the threshold in bytes.
    #[arg(long, value_name = "G", allow_negative_numbers = true, value_parser = flags::gbps)]
    pub(crate) nic_gbps: Option<f64>,
    /// Absolute threshold of heavy hitters and heavy changers in bytes (at least 1): over
    /// --threshold for those two tasks (which keeps the others'). Needs --weight bytes.
    #[arg(long, value_name = "N", conflicts_with = "nic_gbps", allow_negative_numbers = true,
          value_parser = flags::whole::<u64>(1..=u64::MAX))]
    pub(crate) threshold_bytes: Option<u64>,
    /// k of top-k (at least 1).
    #[arg(long, allow_negative_numbers = true, value_parser = flags::whole::<usize>(1..=u64::MAX))]
    pub(crate) k: Option<usize>,
    /// Flows the table lists per task, largest first, with their exact size and error (0..=1000;
    /// default 5); JSON lists at least as many (`answer.keys`, default 10).
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = flags::whole::<usize>(0..=1000))]
    pub(crate) top: Option<usize>,
    /// Seed of every hash function (unsigned 64-bit).
    #[arg(long, allow_negative_numbers = true, value_parser = flags::seed)]
    pub(crate) seed: Option<u64>,
    /// Accelerator in front of the algorithms: `none` or `agg-evict` (one aggregator per key
    /// kind, shared by every algorithm on it).
    #[arg(long)]
    pub(crate) accel: Option<AccelArg>,
    /// Agg-Evict lookup kernel: auto, avx512, avx2, sse2, off (scalar linear search). Only with
    /// `--accel agg-evict` (else ignored, with a warning).
    #[arg(long)]
    pub(crate) simd: Option<aggevict::Simd>,
    /// Agg-Evict arrays (k, at least 1; 16 slots each). Only with `--accel agg-evict`.
    #[arg(long, allow_negative_numbers = true,
          value_parser = flags::whole::<usize>(1..=aggevict::MAX_ARRAYS as u64))]
    pub(crate) agg_arrays: Option<usize>,
    /// Agg-Evict eviction policy: grr or lru. Only with `--accel agg-evict`.
    #[arg(long)]
    pub(crate) agg_policy: Option<aggevict::Policy>,
    /// Agg-Evict mode: auto (default: per key kind and window of packets, the aggregator
    /// steps aside when a cost model of it and of the algorithms says it does not pay, and
    /// probes again periodically; answers are unchanged) or always. Only with `--accel
    /// agg-evict`.
    #[arg(long, value_parser = PossibleValuesParser::new(measure::AggMode::NAMES)
          .try_map(|s| s.parse::<measure::AggMode>()))]
    pub(crate) agg_mode: Option<measure::AggMode>,
    /// Largest memory the run's structures may take (`800M`, `8G`); a run needing more is
    /// refused before allocating, naming the largest parts. Default: 3/4 of physical memory.
    #[arg(long, value_parser = flags::bytes)]
    pub(crate) max_memory: Option<u64>,
    /// A paper's configuration: every algorithm it used gets the parameters it ran with
    /// (agg-evict: Agg-Evict 4.1; sketchvisor: SketchVisor 7.1; reeval: Re-evaluating 5). The
    /// defaults are sized to answer well instead. A `[[measure]]`'s own `params` in a --config
    /// file are applied after the preset, so they win. sketchvisor also sets the paper's run:
    /// --fast-path sketchvisor --fast-path-bytes 8192 --weight bytes --epoch-ms 1000 --nic-gbps
    /// 40 (heavy hitters and changers at 0.05% of 40 Gbps x 1 s), each unless given (a note
    /// says what).
    #[arg(long, value_parser = PossibleValuesParser::new(catalog::presets::names()))]
    pub(crate) preset: Option<String>,
    /// Size fixed-width structures (tables, FlowRadar, RevSketch, Deltoid, TwoLevel) for IPv6
    /// keys; without it they hold IPv4 keys and count the others as skipped.
    #[arg(long)]
    ipv6: bool,
    /// Which IP header of a tunnelled packet (GRE, ERSPAN, VXLAN, VXLAN-GPE, GENEVE, GTP-U, MPLS
    /// over UDP, IP-in-IP, 6in4, 4in6, 6in6) makes the flow key: outer (default, as tshark's
    /// first ip.src) or inner. MPLS, PPPoE and NSH are always looked through.
    #[arg(long)]
    pub(crate) tunnel: Option<TunnelArg>,
    /// Exact ground truth and accuracy scores: on (default for files and the built-in trace) or
    /// off (default for standard input, `-`): answers and costs only, no per-flow state; fractional
    /// thresholds then resolve against the epoch's weight or estimated addresses. A config
    /// file's `truth` applies unless this flag is given (standard input: give it).
    #[arg(long)]
    pub(crate) truth: Option<OnOff>,
    /// Worker threads (1..=256): each owns its aggregators and algorithm instances, fed by a
    /// seeded hash of each flow key (a flow lives in one worker), merged at every epoch's end.
    /// Linear and idempotent algorithms answer exactly as with one worker; the order-dependent
    /// summaries merge with their guarantees, and for a given N every answer is reproducible.
    /// Default: the cores available to the process (1 keeps everything on one thread).
    #[arg(long, allow_negative_numbers = true, value_parser = flags::whole::<usize>(1..=256))]
    pub(crate) workers: Option<usize>,
    /// Packets per batch handed to the algorithms (1..=8192).
    #[arg(long, allow_negative_numbers = true, value_parser = flags::whole::<usize>(1..=8192))]
    pub(crate) batch: Option<usize>,
    /// SketchVisor's fast path (SketchVisor 4): `sketchvisor` (Algorithm 1), `misra_gries`
    /// (MGFastPath) or `none`. It measures the packets the normal path (the algorithms, with
    /// or without Agg-Evict) cannot take, and every task is answered from the sketch recovered
    /// from both paths (`--recover`). Reading a file, the normal path is never overloaded unless
    /// `--normal-capacity` caps it. The report gives packets and bytes per path (`paths`).
    #[arg(long)]
    pub(crate) fast_path: Option<FastPathArg>,
    /// Bytes of each key kind's fast path (default 8192, SketchVisor 7.1).
    #[arg(long, value_parser = flags::size)]
    pub(crate) fast_path_bytes: Option<u64>,
    /// Cap the normal path at this many million packets per second per worker, in capture time
    /// (key traces without timestamps arrive at 14.88 Mpps), through a deterministic FIFO model:
    /// the same file gives the same fast-path share and answers on any machine. Implies
    /// `--fast-path sketchvisor` unless another is given.
    #[arg(long, allow_negative_numbers = true)]
    pub(crate) normal_capacity: Option<f64>,
    /// How a run with a fast path answers from both paths: sketchvisor (compressive sensing,
    /// written back into Count-Min, MRAC, RevSketch, FlowRadar, UnivMon and Deltoid; FM, kMin,
    /// Linear Counting, HyperLogLog and TwoLevel restored), proportional (the uniform-overflow
    /// prior when the epoch's data fits it, else sketchvisor; the same sketches), lower, upper,
    /// or none (the normal path alone). Both sketchvisor and proportional are refused at
    /// start-up, with the reason, for any other algorithm.
    #[arg(long)]
    pub(crate) recover: Option<RecoverArg>,
    /// Write the report as one JSON document at the end (it keeps every epoch until then).
    #[arg(long, conflicts_with = "json_lines")]
    pub(crate) json: bool,
    /// Write one JSON object per line: each epoch as it closes (`"type": "epoch"`), then the
    /// run's summary (`"type": "summary"`: totals and costs). Constant memory on endless input.
    #[arg(long)]
    pub(crate) json_lines: bool,
    /// Write each epoch's snapshot (docs/snapshot-format.md) into DIR as HOST-epochNNNNNN.nss:
    /// what `netsift merge` combines.
    #[arg(long, value_name = "DIR", requires = "host")]
    pub(crate) snapshots: Option<String>,
    /// This host's id in snapshot file names (letters, digits, '.', '_', '-'); with `run`, only
    /// with --snapshots (`agent` requires it: its snapshots go to --spool).
    #[arg(long, value_parser = crate::flags::host_id)]
    pub(crate) host: Option<String>,
    /// `agent`: a snapshot that cannot be written is counted here and the run goes on
    /// (`RunConfig::unwritten`); not a flag.
    #[arg(skip)]
    pub(crate) unwritten: Option<measure::snap::Unwritten>,
    /// Heavy hitters detected on the packet path (instameasure, rcc): each detection printed as
    /// it happens (a line, or `"type": "detection"` with --json-lines), and the report gives
    /// the detection delay against exact detection (capture time and packets).
    #[arg(long)]
    pub(crate) instant: bool,
    /// Serve Prometheus/OpenMetrics text at http://ADDR:PORT/metrics while the run lasts
    /// (port 0: a free one; the address is said on stderr): packets, classes, epochs, every
    /// task's latest answer (its top keys as labels), accuracy, alerts, and costs at the end.
    #[arg(long, value_name = "ADDR:PORT")]
    pub(crate) metrics: Option<String>,
    /// Keep serving metrics this many seconds after the run ends (a run over a file ends fast;
    /// SIGINT/SIGTERM end the wait).
    #[arg(long, value_name = "SECS", requires = "metrics", allow_negative_numbers = true,
          value_parser = flags::whole::<u64>(0..=86_400))]
    pub(crate) metrics_linger: Option<u64>,
    /// Keys of each task answer given as metric labels (the largest; 0..=1000).
    #[arg(long, default_value_t = 10, allow_negative_numbers = true,
          value_parser = flags::whole::<usize>(0..=1000))]
    pub(crate) metrics_top: usize,
    /// Append each alert event (a JSON line) to FILE, flushed per event. Alert rules are
    /// `[[alert]]` tables of the --config file. Without --alerts or --alert-exec, events go to
    /// standard output (standard error with --json).
    #[arg(long, value_name = "FILE")]
    pub(crate) alerts: Option<String>,
    /// Run CMD (with sh -c) per alert event, the JSON line on its standard input; killed after
    /// --alert-exec-timeout. Failures are counted and said, never block the run.
    #[arg(long, value_name = "CMD")]
    pub(crate) alert_exec: Option<String>,
    /// Seconds an --alert-exec command may run (0.001..=3600).
    #[arg(long, default_value_t = 5.0, value_name = "SECS", allow_negative_numbers = true,
          value_parser = exec_timeout)]
    pub(crate) alert_exec_timeout: f64,
    /// At most this many alert events per epoch (1..=100000); the rest are counted as
    /// suppressed (metric and summary line).
    #[arg(long, default_value_t = 100, allow_negative_numbers = true,
          value_parser = flags::whole::<usize>(1..=100_000))]
    pub(crate) alert_burst: usize,
}

fn exec_timeout(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(t) if (0.001..=3600.0).contains(&t) => Ok(t),
        _ => Err(format!("must be seconds in 0.001..=3600, got {s}")),
    }
}

/// The monitor of a run (`crates/monitor`), when metrics, alert rules or an alert sink are
/// asked for.
fn monitor(a: &RunArgs, cfg: &RunConfig) -> Result<Option<monitor::Monitor>> {
    let alerting = !cfg.alerts.is_empty() || a.alerts.is_some() || a.alert_exec.is_some();
    if a.metrics.is_none() && !alerting {
        return Ok(None);
    }
    let opts = monitor::MonitorOpts {
        metrics: a.metrics.clone(),
        top: a.metrics_top,
        alerts_file: a.alerts.as_ref().map(Into::into),
        alert_exec: a.alert_exec.clone(),
        exec_timeout: std::time::Duration::from_secs_f64(a.alert_exec_timeout),
        max_events_per_epoch: a.alert_burst,
        console: if a.json {
            monitor::Console::Stderr
        } else {
            monitor::Console::Stdout
        },
        ..monitor::MonitorOpts::default()
    };
    let m = monitor::Monitor::new(opts, cfg.alerts.clone())?;
    if let Some(addr) = m.metrics_addr() {
        crate::say!("netsift: metrics: serving http://{addr}/metrics");
    }
    Ok(Some(m))
}

impl RunArgs {
    /// The printer of a run of `cfg` with these options; its monitor is started here, so a port
    /// in use or a bad alert rule is refused before anything is read.
    pub fn printer(&self, cfg: &RunConfig, notes: Notes) -> Result<Printer> {
        let format = match (self.json, self.json_lines) {
            (true, _) => crate::print::Format::Json,
            (_, true) => crate::print::Format::JsonLines,
            _ => crate::print::Format::Table,
        };
        let top = self.top.unwrap_or(crate::table::DEFAULT_TOP);
        Ok(Printer::new(format, top, notes, monitor(self, cfg)?))
    }

    /// `--truth` was given (`live` defaults it to off otherwise, as `run -` does).
    pub fn truth_given(&self) -> bool {
        self.truth.is_some()
    }

    /// `--config`'s path (`live` re-reads it at SIGHUP).
    pub fn config_path(&self) -> Option<&str> {
        self.config.as_deref()
    }
}

/// `--task`: one of the task names (clap lists them in `--help` and in the error for any other
/// value), parsed into an [`algo::Task`].
fn task_parser() -> impl TypedValueParser<Value = algo::Task> {
    PossibleValuesParser::new(algo::Task::ALL.map(|t| t.name()))
        .try_map(|s| s.parse::<algo::Task>())
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum AccelArg {
    None,
    #[value(alias = "agg_evict")]
    AggEvict,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum FastPathArg {
    None,
    Sketchvisor,
    #[value(name = "misra_gries", alias = "misra-gries")]
    MisraGries,
}

/// `--tunnel` (`run`, `stats`): the mode it names.
impl From<TunnelArg> for wire::Tunnel {
    fn from(t: TunnelArg) -> wire::Tunnel {
        match t {
            TunnelArg::Outer => wire::Tunnel::Outer,
            TunnelArg::Inner => wire::Tunnel::Inner,
        }
    }
}

#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum TunnelArg {
    Outer,
    Inner,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum WeightArg {
    Packets,
    Bytes,
}

/// The run's configuration: `--config`'s file, then the flags over it; `trace` and `format` are
/// `run`'s (`None` for `live`).
pub fn config(a: &RunArgs, trace: Option<&str>, format: Option<Format>) -> Result<RunConfig> {
    let mut config_sets_workers = false;
    let mut config_sets_key = false;
    // The config file's own top-level fields and `[sketchvisor]` keys (a preset leaves them).
    let mut file_sets: Vec<String> = vec![];
    let mut cfg = match &a.config {
        Some(path) => {
            let text = engine::config::read_config(path)?;
            let top = text.parse::<toml::Table>();
            config_sets_workers = top.as_ref().is_ok_and(|t| t.contains_key("workers"));
            config_sets_key = top.as_ref().is_ok_and(|t| t.contains_key("key"));
            if let Ok(t) = &top {
                file_sets.extend(t.keys().cloned());
                if let Some(sv) = t.get("sketchvisor").and_then(|v| v.as_table()) {
                    file_sets.extend(sv.keys().map(|k| format!("sketchvisor.{k}")));
                }
            }
            let c = RunConfig::from_toml(&text).with_context(|| format!("in config {path}"))?;
            let lists_given = !a.task.is_empty() || !a.algo.is_empty();
            if lists_given && !c.measures.is_empty() {
                bail!(
                    "--task/--algo cannot be combined with a config that has [[measure]] entries"
                );
            }
            c
        }
        None => RunConfig::default(),
    };
    if cfg.measures.is_empty() {
        cfg.measures = RunConfig::measures_from_lists(&a.task, &a.algo)?;
    }
    if let Some(t) = trace {
        cfg.trace = Some(t.to_string());
    }
    if let Some(k) = a.key {
        cfg.key = k;
    }
    if let Some(w) = a.weight {
        cfg.weight = match w {
            WeightArg::Packets => Weight::Packets,
            WeightArg::Bytes => Weight::Bytes,
        };
    }
    if a.epoch_packets.is_some() || a.epoch_ms.is_some() {
        cfg.epoch_packets = a.epoch_packets;
        cfg.epoch_ms = a.epoch_ms;
    }
    if let Some(s) = a.seed {
        cfg.seed = s;
    }
    if a.ipv6 {
        cfg.ipv6 = true;
    }
    if let Some(t) = a.tunnel {
        cfg.tunnel = t.into();
    }
    match a.workers {
        Some(w) => cfg.workers = w,
        // The cores this process may use (its affinity and cgroup quota), unless the config
        // file sets `workers`.
        None if !config_sets_workers => {
            cfg.workers = engine::config::default_workers();
        }
        None => {}
    }
    match a.truth {
        Some(t) => cfg.truth = t == OnOff::On,
        // Standard input is live traffic: no exact state growing with it unless asked for.
        None if cfg.trace.as_deref() == Some("-") => cfg.truth = false,
        None => {}
    }
    if a.preset.is_some() {
        cfg.preset = a.preset.clone();
    }
    if a.max_memory.is_some() {
        cfg.max_memory = a.max_memory;
    } else if cfg.max_memory.is_none() {
        cfg.max_memory = engine::config::default_memory_budget();
    }
    if let Some(acc) = a.accel {
        cfg.accel = match acc {
            AccelArg::None => measure::Accel::None,
            AccelArg::AggEvict => measure::Accel::AggEvict,
        };
    }
    if let Some(f) = format {
        cfg.format = Some(f.name().to_string());
    }
    if let Some(s) = a.simd {
        cfg.agg_evict.simd = s;
    }
    if let Some(k) = a.agg_arrays {
        cfg.agg_evict.arrays = k;
    }
    if let Some(p) = a.agg_policy {
        cfg.agg_evict.policy = p;
    }
    if let Some(m) = a.agg_mode {
        cfg.agg_mode = m;
    }
    if let Some(b) = a.batch {
        cfg.batch = b;
    }
    let sv = &mut cfg.sketchvisor;
    if let Some(f) = a.fast_path {
        sv.fast_path = match f {
            FastPathArg::None => visor::FastKind::None,
            FastPathArg::Sketchvisor => visor::FastKind::Sketchvisor,
            FastPathArg::MisraGries => visor::FastKind::MisraGries,
        };
    } else if a.normal_capacity.is_some() && sv.fast_path == visor::FastKind::None {
        sv.fast_path = visor::FastKind::Sketchvisor;
    }
    if let Some(b) = a.fast_path_bytes {
        sv.fast_path_bytes = usize::try_from(b).context("--fast-path-bytes is too large")?;
    }
    if a.normal_capacity.is_some() {
        sv.normal_capacity = a.normal_capacity;
    }
    if let Some(r) = a.recover {
        sv.recover = r.into();
    }
    if a.instant {
        cfg.instant = true;
    }
    if a.nic_gbps.is_some() {
        cfg.nic_gbps = a.nic_gbps;
    }
    let in_bytes =
        |t: algo::Task| matches!(t, algo::Task::HeavyHitters | algo::Task::HeavyChangers);
    for m in &mut cfg.measures {
        if a.threshold.is_some() {
            m.threshold = a.threshold;
        }
        if let (Some(b), true) = (a.threshold_bytes, in_bytes(m.task)) {
            m.threshold = Some(b as f64);
        }
        if a.k.is_some() {
            m.k = a.k;
        }
    }
    if let Some(n) = a.top {
        cfg.listed = cfg.listed.max(n);
    }
    if a.host.is_some() && a.snapshots.is_none() {
        bail!("--host names this host's snapshots: give --snapshots DIR too");
    }
    if a.snapshots.is_some() {
        (cfg.snapshots, cfg.host) = (a.snapshots.clone(), a.host.clone());
        cfg.unwritten = a.unwritten.clone();
    }
    cfg.key_given = a.key.is_some() || config_sets_key;
    let file = |k: &str| file_sets.iter().any(|f| f == k);
    let given = measure::Given {
        weight: a.weight.is_some() || file("weight"),
        epoch: a.epoch_packets.is_some()
            || a.epoch_ms.is_some()
            || file("epoch_packets")
            || file("epoch_ms"),
        // An absolute threshold in bytes has no base to take from the NIC.
        nic_gbps: a.nic_gbps.is_some() || a.threshold_bytes.is_some() || file("nic_gbps"),
        fast_path: a.fast_path.is_some() || file("sketchvisor.fast_path"),
        fast_path_bytes: a.fast_path_bytes.is_some() || file("sketchvisor.fast_path_bytes"),
        timeless: engine::config::timeless_key_trace(&cfg),
    };
    if let Some(note) = cfg.preset_settings(given) {
        cfg.notes.push(note);
    }
    if let Some(b) = a.threshold_bytes {
        if cfg.weight != Weight::Bytes {
            bail!(
                "--threshold-bytes {b}: the run counts packets: give --weight bytes, or \
                 --threshold {b} for a threshold in packets"
            );
        }
        if !cfg.measures.iter().any(|m| in_bytes(m.task)) {
            bail!(
                "--threshold-bytes {b}: it is the threshold of heavy_hitters and heavy_changers, \
                 and the run measures neither"
            );
        }
    }
    // The aggregator's flags configure nothing without the aggregator: say so once.
    if matches!(cfg.accel, measure::Accel::None) {
        let ignored: Vec<&str> = [
            (a.simd.is_some(), "--simd"),
            (a.agg_arrays.is_some(), "--agg-arrays"),
            (a.agg_policy.is_some(), "--agg-policy"),
            (a.agg_mode.is_some(), "--agg-mode"),
        ]
        .into_iter()
        .filter_map(|(given, flag)| given.then_some(flag))
        .collect();
        if !ignored.is_empty() {
            crate::say!(
                "netsift: warning: ignoring {}: Agg-Evict settings take effect only with \
                 --accel agg-evict",
                ignored.join(", ")
            );
        }
    }
    Ok(cfg)
}

/// Returns Ok(false) when the trace could not be read to the end (the report covers what was read).
pub fn cmd_run(a: RunCmd, out: &mut Out) -> Result<bool> {
    run_trace(a, out, true)
}

/// [`cmd_run`]; at SIGINT/SIGTERM the process exits with 130/143 after the report when
/// `exit_at_signal`, else it returns (`agent` drains its spool first, then exits so).
pub(crate) fn run_trace(a: RunCmd, out: &mut Out, exit_at_signal: bool) -> Result<bool> {
    let cfg = config(&a.args, a.trace.as_deref(), a.format)?;
    let source = engine::Source::of_config(&cfg)?;
    let run = engine::Run::new(cfg, source)?.with_control(crate::signals::control());
    // Before reading: a port in use or a bad alert rule is refused before any work.
    let mut p = a.args.printer(run.config(), Notes::Stderr)?;
    // SIGINT/SIGTERM: stop reading, close the open epoch as partial, write the report, then
    // exit 130/143 (below).
    crate::signals::install();
    // An error printing (standard output closed or full) ends the run there (`main`: quietly
    // for a broken pipe, else the one-line error).
    let outcome = run.run(&mut |e| p.event(e, out))?;
    if let Some(e) = outcome.read_error {
        crate::say!("netsift: error: {e}");
        return Ok(false);
    }
    if let Some(code) = outcome.stopped {
        out.flush()?;
        crate::say!(
            "netsift: interrupted by {}: the last epoch is partial",
            crate::signals::name(code)
        );
        if exit_at_signal {
            std::process::exit(code);
        }
        return Ok(true);
    }
    if let (Some(m), Some(secs)) = (p.monitor(), a.args.metrics_linger) {
        linger(out, m, secs)?;
    }
    Ok(true)
}

/// `--metrics-linger`: keep the endpoint up after the run (its final values, costs included),
/// until the time is up or a signal comes.
fn linger(out: &mut Out, m: &monitor::Monitor, secs: u64) -> Result<()> {
    out.flush()?;
    if let Some(addr) = m.metrics_addr() {
        crate::say!("netsift: metrics: run finished; serving http://{addr}/metrics for {secs} s");
    }
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < end && crate::signals::caught().is_none() {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Ok(())
}
