//! `netsift run`: measurement tasks over a trace in one pass, with accuracy against exact ground
//! truth and each algorithm's cost.

use std::io::IsTerminal;

use anyhow::{bail, Context, Result};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use key::KeyKind;
use measure::{EpochReport, Report};
use measure::{RunConfig, Runner};
use trace::{Capture, Format};
use truth::Weight;
use wire::Class;

use crate::flags;
use crate::out::{self, Out};
use crate::source::{each_packet, Packet};

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
    config: Option<String>,
    /// Tasks, comma-separated: heavy_hitters, heavy_changers, superspreaders, ddos, cardinality,
    /// flow_size_distribution, entropy, top_k, flow_size. Default: all (or all the algorithms
    /// answer).
    #[arg(long, value_delimiter = ',', value_parser = task_parser())]
    task: Vec<algo::Task>,
    /// Algorithms, comma-separated (see `netsift algorithms`). Default: one per task.
    #[arg(long, value_delimiter = ',')]
    algo: Vec<String>,
    /// Flow key of the tasks: src, dst, pair, four_tuple or five_tuple (default five_tuple;
    /// superspreaders and DDoS always key by address pair).
    #[arg(long)]
    key: Option<KeyKind>,
    /// Count packets or bytes.
    #[arg(long)]
    weight: Option<WeightArg>,
    /// Epoch length in packets (default 2,000,000; at least 1).
    #[arg(long, conflicts_with = "epoch_ms", allow_negative_numbers = true,
          value_parser = flags::whole::<u64>(1..=u64::MAX))]
    epoch_packets: Option<u64>,
    /// Epoch length in milliseconds of capture time (at least 1).
    #[arg(long, allow_negative_numbers = true, value_parser = flags::whole::<u64>(1..=u64::MAX))]
    epoch_ms: Option<u64>,
    /// Threshold of the heavy-hitter / changer / spreader tasks, a positive number: below 1 a
    /// fraction, else absolute.
    #[arg(long, allow_negative_numbers = true, value_parser = flags::threshold)]
    threshold: Option<f64>,
    /// k of top-k (at least 1).
    #[arg(long, allow_negative_numbers = true, value_parser = flags::whole::<usize>(1..=u64::MAX))]
    k: Option<usize>,
    /// Flows the table lists per task, largest first, with their exact size and error (0..=1000;
    /// default 5); JSON lists at least as many (`answer.keys`, default 10).
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = flags::whole::<usize>(0..=1000))]
    top: Option<usize>,
    /// Seed of every hash function (unsigned 64-bit).
    #[arg(long, allow_negative_numbers = true, value_parser = flags::seed)]
    seed: Option<u64>,
    /// Accelerator in front of the algorithms: `none` or `agg-evict` (one aggregator per key
    /// kind, shared by every algorithm on it).
    #[arg(long)]
    accel: Option<AccelArg>,
    /// Agg-Evict lookup kernel: auto, avx512, avx2, sse2, off (scalar linear search). Only with
    /// `--accel agg-evict` (else ignored, with a warning).
    #[arg(long)]
    simd: Option<aggevict::Simd>,
    /// Agg-Evict arrays (k, at least 1; 16 slots each). Only with `--accel agg-evict`.
    #[arg(long, allow_negative_numbers = true,
          value_parser = flags::whole::<usize>(1..=aggevict::MAX_ARRAYS as u64))]
    agg_arrays: Option<usize>,
    /// Agg-Evict eviction policy: grr or lru. Only with `--accel agg-evict`.
    #[arg(long)]
    agg_policy: Option<aggevict::Policy>,
    /// Agg-Evict mode: auto (default: per key kind and window of packets, the aggregator
    /// steps aside when a cost model of it and of the algorithms says it does not pay, and
    /// probes again periodically; answers are unchanged) or always. Only with `--accel
    /// agg-evict`.
    #[arg(long, value_parser = PossibleValuesParser::new(measure::AggMode::NAMES)
          .try_map(|s| s.parse::<measure::AggMode>()))]
    agg_mode: Option<measure::AggMode>,
    /// Largest memory the run's structures may take (`800M`, `8G`); a run needing more is
    /// refused before allocating, naming the largest parts. Default: 3/4 of physical memory.
    #[arg(long, value_parser = flags::bytes)]
    max_memory: Option<u64>,
    /// A paper's configuration: every algorithm it used gets the parameters it ran with
    /// (agg-evict: Agg-Evict 4.1; sketchvisor: SketchVisor 7.1; reeval: Re-evaluating 5). The
    /// defaults are sized to answer well instead. A `[[measure]]`'s own `params` in a --config
    /// file are applied after the preset, so they win.
    #[arg(long, value_parser = PossibleValuesParser::new(catalog::presets::names()))]
    preset: Option<String>,
    /// Size fixed-width structures (tables, FlowRadar, RevSketch, Deltoid, TwoLevel) for IPv6
    /// keys; without it they hold IPv4 keys and count the others as skipped.
    #[arg(long)]
    ipv6: bool,
    /// Which IP header of a tunnelled packet (GRE, ERSPAN, VXLAN, VXLAN-GPE, GENEVE, GTP-U, MPLS
    /// over UDP, IP-in-IP, 6in4, 4in6, 6in6) makes the flow key: outer (default, as tshark's
    /// first ip.src) or inner. MPLS, PPPoE and NSH are always looked through.
    #[arg(long)]
    tunnel: Option<TunnelArg>,
    /// Exact ground truth and accuracy scores: on (default for files and the built-in trace) or
    /// off (default for standard input, `-`): answers and costs only, no per-flow state; fractional
    /// thresholds then resolve against the epoch's weight or estimated addresses. A config
    /// file's `truth` applies unless this flag is given (standard input: give it).
    #[arg(long)]
    truth: Option<OnOff>,
    /// Worker threads (1..=256): each owns its aggregators and algorithm instances, fed by a
    /// seeded hash of each flow key (a flow lives in one worker), merged at every epoch's end.
    /// Linear and idempotent algorithms answer exactly as with one worker; the order-dependent
    /// summaries merge with their guarantees, and for a given N every answer is reproducible.
    /// Default: the cores available to the process (1 keeps everything on one thread).
    #[arg(long, allow_negative_numbers = true, value_parser = flags::whole::<usize>(1..=256))]
    workers: Option<usize>,
    /// Packets per batch handed to the algorithms (1..=8192).
    #[arg(long, allow_negative_numbers = true, value_parser = flags::whole::<usize>(1..=8192))]
    batch: Option<usize>,
    /// SketchVisor's fast path (SketchVisor 4): `sketchvisor` (Algorithm 1), `misra_gries`
    /// (MGFastPath) or `none`. It measures the packets the normal path (the algorithms, with
    /// or without Agg-Evict) cannot take, and every task is answered from the sketch recovered
    /// from both paths (`--recover`). Reading a file, the normal path is never overloaded unless
    /// `--normal-capacity` caps it. The report gives packets and bytes per path (`paths`).
    #[arg(long)]
    fast_path: Option<FastPathArg>,
    /// Bytes of each key kind's fast path (default 8192, SketchVisor 7.1).
    #[arg(long, value_parser = flags::size)]
    fast_path_bytes: Option<u64>,
    /// Cap the normal path at this many million packets per second per worker, in capture time
    /// (key traces without timestamps arrive at 14.88 Mpps), through a deterministic FIFO model:
    /// the same file gives the same fast-path share and answers on any machine. Implies
    /// `--fast-path sketchvisor` unless another is given.
    #[arg(long, allow_negative_numbers = true)]
    normal_capacity: Option<f64>,
    /// How a run with a fast path answers from both paths: sketchvisor (compressive sensing for
    /// Count-Min and MRAC, LowerRecovery for the others), lower, upper, or none (the normal path
    /// alone).
    #[arg(long)]
    recover: Option<RecoverArg>,
    /// Write the report as one JSON document at the end (it keeps every epoch until then).
    #[arg(long, conflicts_with = "json_lines")]
    json: bool,
    /// Write one JSON object per line: each epoch as it closes (`"type": "epoch"`), then the
    /// run's summary (`"type": "summary"`: totals and costs). Constant memory on endless input.
    #[arg(long)]
    json_lines: bool,
    /// Write each epoch's snapshot (docs/snapshot-format.md) into DIR as HOST-epochNNNNNN.nss:
    /// what `netsift merge` combines.
    #[arg(long, value_name = "DIR", requires = "host")]
    pub(crate) snapshots: Option<String>,
    /// This host's id in snapshot file names (letters, digits, '.', '_', '-'); with `run`, only
    /// with --snapshots (`agent` requires it: its snapshots go to --spool).
    #[arg(long, value_parser = crate::merge::host_id)]
    pub(crate) host: Option<String>,
    /// `agent`: a snapshot that cannot be written is counted here and the run goes on
    /// (`RunConfig::unwritten`); not a flag.
    #[arg(skip)]
    pub(crate) unwritten: Option<measure::snap::Unwritten>,
    /// Heavy hitters detected on the packet path (instameasure, rcc): each detection printed as
    /// it happens (a line, or `"type": "detection"` with --json-lines), and the report gives
    /// the detection delay against exact detection (capture time and packets).
    #[arg(long)]
    instant: bool,
    /// Serve Prometheus/OpenMetrics text at http://ADDR:PORT/metrics while the run lasts
    /// (port 0: a free one; the address is said on stderr): packets, classes, epochs, every
    /// task's latest answer (its top keys as labels), accuracy, alerts, and costs at the end.
    #[arg(long, value_name = "ADDR:PORT")]
    metrics: Option<String>,
    /// Keep serving metrics this many seconds after the run ends (a run over a file ends fast;
    /// SIGINT/SIGTERM end the wait).
    #[arg(long, value_name = "SECS", requires = "metrics", allow_negative_numbers = true,
          value_parser = flags::whole::<u64>(0..=86_400))]
    metrics_linger: Option<u64>,
    /// Keys of each task answer given as metric labels (the largest; 0..=1000).
    #[arg(long, default_value_t = 10, allow_negative_numbers = true,
          value_parser = flags::whole::<usize>(0..=1000))]
    metrics_top: usize,
    /// Append each alert event (a JSON line) to FILE, flushed per event. Alert rules are
    /// `[[alert]]` tables of the --config file. Without --alerts or --alert-exec, events go to
    /// standard output (standard error with --json).
    #[arg(long, value_name = "FILE")]
    alerts: Option<String>,
    /// Run CMD (with sh -c) per alert event, the JSON line on its standard input; killed after
    /// --alert-exec-timeout. Failures are counted and said, never block the run.
    #[arg(long, value_name = "CMD")]
    alert_exec: Option<String>,
    /// Seconds an --alert-exec command may run (0.001..=3600).
    #[arg(long, default_value_t = 5.0, value_name = "SECS", allow_negative_numbers = true,
          value_parser = exec_timeout)]
    alert_exec_timeout: f64,
    /// At most this many alert events per epoch (1..=100000); the rest are counted as
    /// suppressed (metric and summary line).
    #[arg(long, default_value_t = 100, allow_negative_numbers = true,
          value_parser = flags::whole::<usize>(1..=100_000))]
    alert_burst: usize,
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

/// The run's facts a monitor reads beside each epoch.
fn monitor_ctx<'a>(runner: &'a Runner) -> monitor::Ctx<'a> {
    monitor::Ctx {
        trace: runner.trace_name(),
        key: runner.config().key,
        weight: runner.config().weight,
        totals: Some(runner.totals()),
    }
}

impl RunArgs {
    /// `--truth` was given (`live` defaults it to off otherwise, as `run -` does).
    pub fn truth_given(&self) -> bool {
        self.truth.is_some()
    }

    /// `--config`'s path (`live` re-reads it at SIGHUP).
    pub fn config_path(&self) -> Option<&str> {
        self.config.as_deref()
    }
}

/// One packet into the runner: keyed (IPv4, IPv6) packets are measured, the others counted by
/// class. `run` and `live` feed the runner through it.
#[inline]
pub fn push(runner: &mut Runner, p: &Packet) {
    match p.class {
        Class::Ipv4 | Class::Ipv6 => runner.push(p.ts_ns, &p.tuple, p.wire_len),
        c => runner.push_unkeyed(c, p.wire_len),
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

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum RecoverArg {
    Sketchvisor,
    Lower,
    Upper,
    None,
}

impl From<RecoverArg> for visor::Method {
    fn from(r: RecoverArg) -> Self {
        match r {
            RecoverArg::Sketchvisor => visor::Method::Sketchvisor,
            RecoverArg::Lower => visor::Method::Lower,
            RecoverArg::Upper => visor::Method::Upper,
            RecoverArg::None => visor::Method::None,
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

/// Largest config file read (a run's config is a few KB; `--config /dev/zero` must not grow
/// until memory runs out).
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The config file's text, refused past [`MAX_CONFIG_BYTES`] or when it is not UTF-8.
fn read_config(path: &str) -> Result<String> {
    use std::io::Read;
    let f = std::fs::File::open(path).with_context(|| format!("cannot read config {path}"))?;
    let mut bytes = Vec::new();
    f.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read config {path}"))?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        bail!("config {path} is larger than {MAX_CONFIG_BYTES} bytes; is it a config file?");
    }
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "config {path}: not UTF-8 text (byte {})",
            e.utf8_error().valid_up_to()
        )
    })
}

/// The run's configuration: `--config`'s file, then the flags over it; `trace` and `format` are
/// `run`'s (`None` for `live`).
pub fn config(a: &RunArgs, trace: Option<&str>, format: Option<Format>) -> Result<RunConfig> {
    let mut config_sets_workers = false;
    let mut config_sets_key = false;
    let mut cfg = match &a.config {
        Some(path) => {
            let text = read_config(path)?;
            let top = text.parse::<toml::Table>();
            config_sets_workers = top.as_ref().is_ok_and(|t| t.contains_key("workers"));
            config_sets_key = top.as_ref().is_ok_and(|t| t.contains_key("key"));
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
            cfg.workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(256));
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
        cfg.max_memory = flags::default_memory_budget();
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
    for m in &mut cfg.measures {
        if a.threshold.is_some() {
            m.threshold = a.threshold;
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
    key_trace(&mut cfg, a.key.is_some() || config_sets_key)?;
    cfg.validate()?;
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

/// A key trace's format (`--format` or the config's, else the file's extension, as
/// `trace::Capture::open` tells them); `None` for packet captures, streams of them, and the
/// built-in trace.
fn key_trace_format(cfg: &RunConfig) -> Option<Format> {
    let given = cfg.format.as_deref().and_then(|f| f.parse::<Format>().ok());
    let by_ext = || {
        let path = std::path::Path::new(cfg.trace.as_deref()?);
        Format::from_extension(path.extension()?.to_str()?)
    };
    given
        .or_else(by_ext)
        .filter(|f| f.key_record_len().is_some())
}

/// What a key trace can answer (issue 34): keys4 and keys13 records carry no time, so time
/// epochs are refused; keys4 records are IPv4 source addresses alone (every other field 0), so
/// the run keys by source (refused when another key is asked for) and leaves out the tasks of
/// address pairs it was not asked for by name (refused when it was). `key_given`: `--key` or
/// the config's `key`. The choices made are the report's notes.
fn key_trace(cfg: &mut RunConfig, key_given: bool) -> Result<()> {
    let Some(f) = key_trace_format(cfg) else {
        return Ok(());
    };
    let trace = cfg.trace.clone().unwrap_or_default();
    let fmt = f.name();
    if matches!(f, Format::Keys4 | Format::Keys13) && cfg.epoch_ms.is_some() {
        bail!(
            "--epoch-ms (epoch_ms): {trace} is a {fmt} key trace, whose records carry no \
             timestamps; give --epoch-packets (keys21 and packet captures have time)"
        );
    }
    if f != Format::Keys4 {
        return Ok(());
    }
    if key_given && cfg.key != KeyKind::Src {
        bail!(
            "--key {} (key): {trace} is a keys4 trace, IPv4 source addresses alone (every other \
             field of its keys would be 0): give --key src",
            cfg.key
        );
    }
    if let Some(m) = cfg
        .measures
        .iter()
        .find(|m| m.key.is_some_and(|k| k != KeyKind::Src))
    {
        bail!(
            "[[measure]] {} by {}: key {}: {trace} is a keys4 trace, IPv4 source addresses alone",
            m.task.name(),
            m.algorithm,
            m.key.map_or("", |k| k.name())
        );
    }
    let pairs = |t: algo::Task| matches!(t, algo::Task::Superspreaders | algo::Task::Ddos);
    if let Some(m) = cfg
        .measures
        .iter()
        .find(|m| pairs(m.task) && !m.task_by_default)
    {
        bail!(
            "--task {}: {trace} is a keys4 trace of source addresses alone, without the \
             destinations the task counts",
            m.task.name()
        );
    }
    let before = cfg.measures.len();
    cfg.measures.retain(|m| !pairs(m.task));
    let mut said = vec![];
    if !key_given && cfg.key != KeyKind::Src {
        cfg.key = KeyKind::Src;
        said.push("keyed by source address");
    }
    if cfg.measures.len() < before {
        said.push("superspreaders and ddos left out (they count destinations)");
    }
    if !said.is_empty() {
        cfg.notes.push(format!(
            "{trace}: a keys4 trace holds IPv4 source addresses alone: {}",
            said.join("; ")
        ));
    }
    Ok(())
}

fn progress(len: Option<u64>) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = match len {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::new_spinner(),
    };
    pb.set_style(
        ProgressStyle::with_template(
            "{spinner} {pos:>11} packets {per_sec:>14} {elapsed} {wide_bar}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    pb
}

/// The built-in trace of `run`: the generator's default model, 4 M packets (two epochs).
pub fn default_spec() -> gen::Spec {
    gen::Spec {
        packets: 4_000_000,
        ..gen::Spec::default()
    }
}

/// Run `cfg` over its trace (or the built-in one). `on_epoch` sees the runner after every packet
/// that closed an epoch, so a live run (`netsift run -` on a capture pipe) can print each epoch as
/// it ends instead of at the end of the stream, and take it (`Runner::take_completed`) so that
/// an endless run holds no past epoch. The readers have no early exit, so an error of
/// `on_epoch` (standard output closed or full) ends the process there, by [`out::exit`]: quietly
/// for a broken pipe, else with the one-line error.
pub fn run(
    cfg: RunConfig,
    format: Option<Format>,
    on_epoch: &mut dyn FnMut(&mut Runner) -> Result<()>,
) -> Result<(Report, Option<String>)> {
    let mut read_error = None;
    let report = match cfg.trace.clone() {
        None => {
            let spec = default_spec();
            let name = format!(
                "<built-in: gen --packets {} --flows {} --skew {} --seed {}>",
                spec.packets, spec.flows, spec.skew, spec.seed
            );
            let mut runner = Runner::new(cfg, &name)?;
            print_notes(&runner);
            let mut tick = Ticker::new(progress(Some(spec.packets)));
            let gen_res = until_signal(|| {
                gen::generate(&spec, |p| {
                    stop_at_signal();
                    runner.push(p.ts_ns, &p.tuple, p.wire_len);
                    tick.after(&mut runner, on_epoch);
                })
            });
            if gen_res.is_none() {
                runner.interrupt();
            }
            tick.pb.finish_and_clear();
            gen_res.transpose()?;
            runner.try_finish()?
        }
        Some(path) => {
            let cap = Capture::open(&path, format)?;
            let mut cfg = cfg;
            default_epoch(&cap, &mut cfg);
            let auto = auto_ipv6(&cap, &cfg);
            let tunnel = cfg.tunnel;
            if auto.is_some() {
                cfg.ipv6 = true;
            }
            // A stream cannot be read twice: its address family is told from its first packets,
            // held and replayed (at most STREAM_SAMPLE IP packets or one second of capture time).
            let mut head = (cap.is_stream() && !cfg.ipv6).then(StreamHead::default);
            let ipv6_cfg = RunConfig {
                ipv6: true,
                ..cfg.clone()
            };
            // 4- and 13-byte key traces carry no timestamps (the fast path's FIFO model).
            let untimed = matches!(cap.format(), Format::Keys4 | Format::Keys13);
            let mut runner = Runner::new(cfg, cap.name())?;
            if untimed {
                runner.untimed();
            }
            // A stream's reads may block (a live pipe): its epochs are answered as they close,
            // on this thread, so each is printed then, not when the next packet arrives.
            if cap.is_stream() {
                runner.answer_inline();
            }
            if let Some(n) = auto {
                runner.add_note(n);
            }
            if head.is_none() {
                print_notes(&runner);
            }
            let mut tick = Ticker::new(progress(None));
            // A mapped keys4 trace into a run of source keys: blocks of u32 keys, no per-record
            // tuple (`Runner::push_keys4`); `None` when that path does not apply.
            let bulk = (head.is_none() && runner.takes_keys4()).then(|| {
                until_signal(|| {
                    cap.for_each_keys4(|blk| {
                        stop_at_signal();
                        runner.push_keys4(blk);
                        tick.after_n(&mut runner, on_epoch, blk.len() as u64);
                    })
                })
            });
            let res = match bulk {
                // Read as keys4 blocks: to the end, to an error, or to a signal (`None`).
                Some(Some(Some(r))) => Some(r.map(drop)),
                Some(None) => None,
                // Any other capture or run: record by record.
                Some(Some(None)) | None => {
                    let mut feed = |runner: &mut Runner, p: &Packet| {
                        push(runner, p);
                        tick.after(runner, on_epoch);
                    };
                    let name = cap.name().to_string();
                    let decide =
                        |head: StreamHead,
                         runner: &mut Runner,
                         feed: &mut dyn FnMut(&mut Runner, &Packet)| {
                            if let Some(note) = head.ipv6_note() {
                                match Runner::new(ipv6_cfg.clone(), &name) {
                                    Ok(r) => {
                                        *runner = r;
                                        runner.answer_inline();
                                        if untimed {
                                            runner.untimed();
                                        }
                                        runner.add_note(note);
                                    }
                                    Err(e) => runner.add_note(format!(
                                "{note}, but the IPv6 sizing cannot be built ({e}): sized for IPv4"
                            )),
                                }
                            }
                            print_notes(runner);
                            for p in &head.packets {
                                feed(runner, p);
                            }
                        };
                    let res = until_signal(|| {
                        each_packet(&cap, tunnel, |p| {
                            stop_at_signal();
                            match head.as_mut() {
                                Some(h) => {
                                    if h.hold(p) {
                                        let h = head.take().unwrap_or_default();
                                        decide(h, &mut runner, &mut feed);
                                    }
                                }
                                None => feed(&mut runner, p),
                            }
                        })
                    });
                    // Packets held to tell the address family are measured, signal or not.
                    if let Some(h) = head.take() {
                        decide(h, &mut runner, &mut feed);
                    }
                    res
                }
            };
            tick.pb.finish_and_clear();
            match res {
                None => runner.interrupt(),
                Some(Err(e)) => read_error = Some(e.to_string()),
                Some(Ok(_)) => {}
            }
            // Every packet is read: the capture goes now, not after the last epoch's answers
            // (a large file's unmapping then overlaps them, `trace::Mapped::prefault`).
            drop(cap);
            runner.try_finish()?
        }
    };
    Ok((report, read_error))
}

/// What follows each packet pushed: the epochs that closed go to `on_epoch` (an error there,
/// standard output closed or full, ends the process by [`out::exit`]), and the progress bar moves.
struct Ticker {
    pb: ProgressBar,
    packets: u64,
    epochs: usize,
}

impl Ticker {
    fn new(pb: ProgressBar) -> Ticker {
        Ticker {
            pb,
            packets: 0,
            epochs: 0,
        }
    }

    #[inline]
    fn after(&mut self, runner: &mut Runner, on_epoch: &mut dyn FnMut(&mut Runner) -> Result<()>) {
        if runner.completed_epochs().len() != self.epochs || runner.has_detections() {
            if let Err(e) = self.pb.suspend(|| on_epoch(runner)) {
                self.pb.finish_and_clear();
                out::exit(&e);
            }
            self.epochs = runner.completed_epochs().len();
        }
        self.packets += 1;
        if self.packets.is_multiple_of(65536) {
            self.pb.set_position(self.packets);
        }
    }

    /// [`Ticker::after`] a block of `n` packets (keys4 blocks: epochs close inside a block, and
    /// their reports wait for its end, at most `trace::KEYS4_BLOCK` packets later).
    fn after_n(
        &mut self,
        runner: &mut Runner,
        on_epoch: &mut dyn FnMut(&mut Runner) -> Result<()>,
        n: u64,
    ) {
        self.after(runner, on_epoch);
        self.packets += n - 1;
        if (self.packets & !0xffff) != ((self.packets - (n - 1)) & !0xffff) {
            self.pb.set_position(self.packets);
        }
    }
}

/// Leave the reading loop at a signal (checked once per packet: one relaxed load), by unwinding
/// to [`until_signal`]: the readers have no way to stop early, and their state is dropped.
#[inline]
fn stop_at_signal() {
    if crate::signals::caught().is_some() {
        std::panic::resume_unwind(Box::new(crate::signals::Interrupted));
    }
}

/// Run a reading loop; `None` when a signal cut it short ([`stop_at_signal`], between two
/// packets: the runner holds every packet pushed before). Any other panic goes on unwinding.
fn until_signal<T>(f: impl FnOnce() -> T) -> Option<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(v) => Some(v),
        Err(p) if p.is::<crate::signals::Interrupted>() => None,
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// Packets a file's first look reads to tell its address family.
const FAMILY_SAMPLE: usize = 100_000;
/// IP packets a stream's head holds to tell its address family.
const STREAM_SAMPLE: usize = 1_000;

/// The first packets of a stream, held until its address family is known: [`STREAM_SAMPLE`] IP
/// packets, one second of capture time, or the end of the stream, whichever comes first (so a
/// slow live feed is not held for long).
#[derive(Default)]
struct StreamHead {
    packets: Vec<Packet>,
    v4: usize,
    v6: usize,
    first_ts: Option<u64>,
}

impl StreamHead {
    /// Hold `p`; true when the head is complete.
    fn hold(&mut self, p: &Packet) -> bool {
        self.packets.push(*p);
        match p.class {
            Class::Ipv4 => self.v4 += 1,
            Class::Ipv6 => self.v6 += 1,
            _ => {}
        }
        let first = *self.first_ts.get_or_insert(p.ts_ns);
        self.v4 + self.v6 >= STREAM_SAMPLE || p.ts_ns.saturating_sub(first) >= 1_000_000_000
    }

    /// The note of a mostly-IPv6 head, which sizes the run for IPv6 keys.
    fn ipv6_note(&self) -> Option<String> {
        (self.v6 > self.v4).then(|| {
            format!(
                "{} of the stream's first {} IP packets are IPv6: fixed-width structures are \
                 sized for IPv6 keys, as with --ipv6",
                self.v6,
                self.v4 + self.v6
            )
        })
    }
}

/// Records read to choose a capture file's epochs ([`default_epoch`]): all of a file that
/// holds fewer, else the first ones, the rest extrapolated by the file's size.
const SPAN_SAMPLE: usize = 1_000_000;
/// About how many epochs a capture file is cut into by default, and the fewest packets an
/// epoch then holds on average (fewer and every fractional threshold is a packet or two).
const DEFAULT_EPOCHS: u64 = 10;
const MIN_EPOCH_PACKETS: u64 = 1_000;
/// A stream's epochs (standard input, a pipe), whose length cannot be known: one second of
/// capture time, as `live`'s.
const STREAM_EPOCH_MS: u64 = 1000;

/// A capture file's packets and the capture time they span (first to last timestamp),
/// from the records' headers alone (no frame is parsed).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Span {
    pub packets: u64,
    pub ns: u64,
    /// The capture time of the packets between the 1st and the 99th percentile of time.
    pub dense_ns: u64,
    /// Read to the end; else the first [`SPAN_SAMPLE`] records, extrapolated by size.
    pub exact: bool,
}

fn capture_span(cap: &Capture) -> Option<Span> {
    let bytes = cap.bytes();
    let base = bytes.as_ptr() as usize;
    let rec_len = cap.format().key_record_len().unwrap_or(0) as u64;
    let mut ts: Vec<u64> = vec![];
    let mut end = 0u64;
    let mut exact = true;
    for rec in cap.records() {
        // A read error ends the sample; the run reads to it and reports it.
        let Ok(rec) = rec else { break };
        if ts.len() == SPAN_SAMPLE {
            exact = false;
            break;
        }
        ts.push(rec.ts_ns);
        end = match rec.body {
            trace::Body::Frame { data, .. } => {
                (data.as_ptr() as usize).saturating_sub(base) as u64 + data.len() as u64
            }
            trace::Body::Tuple(_) => ts.len() as u64 * rec_len,
        };
    }
    ts.sort_unstable();
    let (&lo, &hi) = (ts.first()?, ts.last()?);
    if hi <= lo {
        return None;
    }
    // The span most packets lie in: a capture's stragglers (a synscan's last packets 20 s after
    // the scan) would stretch every epoch over the idle tail.
    let at = |q: usize| ts[(ts.len() - 1) * q / 100];
    let dense = at(99).saturating_sub(at(1)).max(1);
    let scale = if exact || end == 0 {
        1.0
    } else {
        bytes.len() as f64 / end as f64
    };
    Some(Span {
        packets: (ts.len() as f64 * scale) as u64,
        ns: ((hi - lo) as f64 * scale) as u64,
        dense_ns: (dense as f64 * scale) as u64,
        exact,
    })
}

/// The epoch length chosen for a capture of `span`: about [`DEFAULT_EPOCHS`] epochs of at least
/// [`MIN_EPOCH_PACKETS`] and at most `truth::DEFAULT_EPOCH_PACKETS` packets on average, rounded
/// to the nearest 1, 2 or 5 times a power of ten milliseconds (at least 1 ms); one epoch over the
/// whole capture when it holds fewer than two epochs' worth. With about how many epochs it makes.
pub(crate) fn epoch_for(span: Span) -> (u64, u64) {
    let span_ms = span.ns as f64 / 1e6;
    // The length fits the packets' dense part (98% of them), the count is over the whole span.
    let dense_ms = span.dense_ns.min(span.ns) as f64 / 1e6;
    // The 1-2-5 steps from 1 ms on.
    let steps = (0..20).flat_map(|e| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(e)));
    let ms = if span.packets < 2 * MIN_EPOCH_PACKETS {
        // The first step past the capture's span: one epoch.
        steps.into_iter().find(|&m| m > span_ms).unwrap_or(1e19)
    } else {
        let per =
            (span.packets / DEFAULT_EPOCHS).clamp(MIN_EPOCH_PACKETS, truth::DEFAULT_EPOCH_PACKETS);
        let want = (dense_ms * per as f64 / span.packets as f64).max(1.0);
        // No nearer step that would hold more than the largest epoch on average.
        let most = dense_ms * truth::DEFAULT_EPOCH_PACKETS as f64 / span.packets as f64;
        steps
            .into_iter()
            .filter(|&m| m == 1.0 || m <= most)
            .min_by(|a, b| (a / want).ln().abs().total_cmp(&(b / want).ln().abs()))
            .unwrap_or(1.0)
    };
    let ms = ms.min(u64::MAX as f64) as u64;
    (ms, (span.ns / 1_000_000) / ms.max(1) + 1)
}

/// `run` on a capture with timestamps and no epoch given (flag or config): time epochs, their
/// length chosen from the capture's duration and rate ([`epoch_for`]; a stream, whose length is
/// unknown, gets [`STREAM_EPOCH_MS`]); said in the header and the notes. Key traces without
/// time, captures whose records all carry one timestamp, and runs that write snapshots (every
/// host of a network-wide merge must cut the same epochs) keep packet epochs.
fn default_epoch(cap: &Capture, cfg: &mut RunConfig) {
    if cfg.epoch_packets.is_some() || cfg.epoch_ms.is_some() || cfg.snapshots.is_some() {
        return;
    }
    if matches!(cap.format(), Format::Keys4 | Format::Keys13) {
        return;
    }
    let why = if cap.is_stream() {
        cfg.epoch_ms = Some(STREAM_EPOCH_MS);
        format!("a stream, whose length is unknown: epochs of {STREAM_EPOCH_MS} ms of capture time, as live's")
    } else {
        let Some(span) = capture_span(cap) else {
            return;
        };
        let (ms, epochs) = epoch_for(span);
        cfg.epoch_ms = Some(ms);
        format!(
            "chosen from the capture: {}{} packets over {:.3} s{}, about {epochs} {} of {ms} ms",
            if span.exact { "" } else { "about " },
            span.packets,
            span.ns as f64 / 1e9,
            if span.dense_ns < span.ns / 2 {
                format!(" (98% of them within {:.3} s)", span.dense_ns as f64 / 1e9)
            } else {
                String::new()
            },
            if epochs == 1 { "epoch" } else { "epochs" },
        )
    };
    cfg.notes.push(format!(
        "epochs of {} ms ({why}); --epoch-ms or --epoch-packets to choose",
        cfg.epoch_ms.unwrap_or(0)
    ));
    cfg.epoch_choice = Some(why);
}

/// Size the fixed-width structures for IPv6 keys when a capture file's first packets are mostly
/// IPv6 and `--ipv6` was not given: without it, the structures that decode keys of one exact
/// length (deltoid, rev_sketch, two_level, bloom_spreader) would skip every IPv6 key. Returns the
/// note saying so. Streams (stdin, pipes) are looked at by their first packets instead
/// ([`StreamHead`]): they can be read only once.
fn auto_ipv6(cap: &Capture, cfg: &RunConfig) -> Option<String> {
    if cfg.ipv6 || cap.is_stream() {
        return None;
    }
    let (mut v4, mut v6) = (0usize, 0usize);
    for rec in cap.records().take(FAMILY_SAMPLE) {
        let Ok(rec) = rec else { break };
        match crate::source::packet(rec, cfg.tunnel).class {
            Class::Ipv4 => v4 += 1,
            Class::Ipv6 => v6 += 1,
            _ => {}
        }
    }
    (v6 > v4).then(|| {
        format!(
            "{v6} of the first {} IP packets are IPv6: fixed-width structures are sized for IPv6 \
             keys, as with --ipv6",
            v4 + v6
        )
    })
}

/// What the run changed from what was asked, on stderr before the first epoch.
fn print_notes(runner: &Runner) {
    for n in runner.notes() {
        crate::say!("netsift: note: {n}");
    }
}

/// Say on stderr, once per epoch and task, why an answer may be wrong (`TaskResult::warnings`),
/// for the epochs after `last` (the last epoch already warned about), and add them to `all`.
fn warn(epochs: &[EpochReport], last: &mut Option<u64>, all: &mut Vec<measure::Warning>) {
    let from = *last;
    for e in epochs.iter().filter(|e| from.is_none_or(|l| e.index > l)) {
        for w in measure::Warning::of(e) {
            crate::say!(
                "netsift: warning: epoch {}, {} by {}: {} ({}: {})",
                w.epoch,
                w.task.name(),
                w.algorithm,
                w.message,
                w.parameter,
                w.suggestion
            );
            all.push(w);
        }
        *last = Some(e.index);
    }
}

/// `--instant`: each detection as a line, or a JSON line (`"type": "detection"`); with `--json`
/// they are in the report only.
fn print_detections(
    out: &mut Out,
    ds: Vec<measure::instant::Detection>,
    lines: bool,
    json: bool,
) -> Result<()> {
    if ds.is_empty() || json {
        return Ok(());
    }
    for d in ds {
        if lines {
            let mut v = serde_json::to_value(&d)?;
            if let Some(o) = v.as_object_mut() {
                o.insert("type".into(), "detection".into());
            }
            writeln!(out, "{}", serde_json::to_string(&v)?)?;
        } else {
            writeln!(out, "{}", d.line())?;
        }
    }
    out.flush()?;
    Ok(())
}

/// `--json-lines`: one line per epoch.
fn print_epoch_line(out: &mut Out, e: &EpochReport) -> Result<()> {
    let mut v = serde_json::to_value(e)?;
    if let Some(o) = v.as_object_mut() {
        o.insert("type".into(), "epoch".into());
    }
    writeln!(out, "{}", serde_json::to_string(&v)?)?;
    Ok(())
}

/// How the epochs reach standard output as they close: the table, one JSON line each
/// (`--json-lines`), or kept for `--json`'s one document at the end. `run` and `live` print
/// through it, so both write the same documents.
pub struct Printer {
    json: bool,
    lines: bool,
    /// The table's header is printed.
    header: bool,
    /// The last epoch warned about.
    warned: Option<u64>,
    /// Every epoch's warnings so far, in order: the report's `warnings` at the end. The
    /// runner's report lists only the epochs it still holds, and most were taken and printed
    /// as they closed (which ones depends on when the answer thread finished them).
    warnings: Vec<measure::Warning>,
    /// `--json`: the epochs printed at the end.
    kept: Vec<EpochReport>,
    /// Flows listed per task in the table (`--top`).
    top: usize,
    /// Metrics and alerts (`--metrics`, `[[alert]]` rules, `--alerts`, `--alert-exec`): each
    /// epoch goes to it as it closes, before it is printed.
    mon: Option<monitor::Monitor>,
}

impl Printer {
    /// The printer of a run of `cfg` with options `a`; its monitor is started here, so a port
    /// in use or a bad alert rule is refused before anything is read.
    pub fn new(a: &RunArgs, cfg: &RunConfig) -> Result<Printer> {
        Ok(Printer {
            json: a.json,
            lines: a.json_lines,
            header: false,
            warned: None,
            warnings: vec![],
            kept: vec![],
            top: a.top.unwrap_or(crate::table::DEFAULT_TOP),
            mon: monitor(a, cfg)?,
        })
    }

    /// The run's monitor, if it has one.
    pub fn monitor(&self) -> Option<&monitor::Monitor> {
        self.mon.as_ref()
    }

    /// SIGHUP (`live`): the re-read configuration's alert rules replace the monitor's (checked
    /// first: an error keeps the old ones).
    pub fn reload(&mut self, cfg: &RunConfig) -> Result<()> {
        if let Some(m) = &mut self.mon {
            m.reload(cfg.alerts.clone())?;
        }
        Ok(())
    }

    /// `--instant`: the detections made since the last call.
    pub fn detections(&mut self, runner: &mut Runner, out: &mut Out) -> Result<()> {
        print_detections(out, runner.take_detections(), self.lines, self.json)
    }

    /// Epochs that closed, in order: their warnings on stderr, then printed and flushed (a
    /// pipe sees each as it closes), or kept for `--json`. `runner` is the run's (its header
    /// line and key kind).
    pub fn epochs(&mut self, runner: &Runner, es: Vec<EpochReport>, out: &mut Out) -> Result<()> {
        warn(&es, &mut self.warned, &mut self.warnings);
        if let Some(m) = &mut self.mon {
            let ctx = monitor_ctx(runner);
            for e in &es {
                m.epoch(e, &ctx);
            }
        }
        if self.json {
            self.kept.extend(es);
            return Ok(());
        }
        let key = runner.config().key;
        for e in &es {
            if self.lines {
                print_epoch_line(out, e)?;
            } else {
                if !self.header {
                    crate::table::Header::of_runner(runner).print(out)?;
                    self.header = true;
                }
                crate::table::print_epoch(out, e, key, self.top)?;
            }
        }
        out.flush()?;
        Ok(())
    }

    /// The end of the run: the epochs the report still holds, then the summary (`--json-lines`:
    /// a `"type": "summary"` line), the costs (table) or the whole report (`--json`).
    pub fn finish(&mut self, mut report: Report, out: &mut Out) -> Result<()> {
        let (json, lines) = (self.json, self.lines);
        warn(&report.epochs, &mut self.warned, &mut self.warnings);
        report.warnings = std::mem::take(&mut self.warnings);
        // The epochs the runner still held, then the run's end (its totals and costs).
        if let Some(m) = &mut self.mon {
            let ctx = monitor::Ctx {
                trace: &report.trace,
                key: report.key,
                weight: report.weight,
                totals: Some(&report.totals),
            };
            for e in &report.epochs {
                m.epoch(e, &ctx);
            }
            m.finish(Some(&report));
        }
        if let Some(i) = &mut report.instant {
            print_detections(out, std::mem::take(&mut i.unprinted), lines, json)?;
        }
        if json {
            let mut all = std::mem::take(&mut self.kept);
            all.append(&mut report.epochs);
            report.epochs = all;
            writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
        } else if lines {
            for e in std::mem::take(&mut report.epochs) {
                print_epoch_line(out, &e)?;
            }
            let mut v = serde_json::to_value(&report)?;
            if let Some(o) = v.as_object_mut() {
                o.remove("epochs");
                o.insert("type".into(), "summary".into());
            }
            writeln!(out, "{}", serde_json::to_string(&v)?)?;
        } else {
            crate::table::print_report(&report, self.header, self.top, out)?;
        }
        out.flush()?;
        Ok(())
    }
}

/// Returns Ok(false) when the trace could not be read to the end (the report covers what was read).
pub fn cmd_run(a: RunCmd, out: &mut Out) -> Result<bool> {
    run_trace(a, out, true)
}

/// [`cmd_run`]; at SIGINT/SIGTERM the process exits with 130/143 after the report when
/// `exit_at_signal`, else it returns (`agent` drains its spool first, then exits so).
pub(crate) fn run_trace(a: RunCmd, out: &mut Out, exit_at_signal: bool) -> Result<bool> {
    let cfg = config(&a.args, a.trace.as_deref(), a.format)?;
    // Before reading: a port in use or a bad alert rule is refused before any work.
    let mut p = Printer::new(&a.args, &cfg)?;
    // SIGINT/SIGTERM: stop reading, close the open epoch as partial, write the report, then
    // exit 130/143 (below).
    crate::signals::install();
    // `--format`, else the config's `format`, else detection by magic number or extension.
    let format = cfg
        .format
        .as_deref()
        .map(str::parse::<Format>)
        .transpose()
        .map_err(|e| anyhow::anyhow!("config field `format`: {e}"))?;
    // The table and JSON lines print each epoch as it closes and drop it; `--json` is one
    // document at the end, so it keeps them.
    let (report, err) = run(cfg, format, &mut |runner| {
        p.detections(runner, out)?;
        let es = runner.take_completed();
        p.epochs(runner, es, out)
    })?;
    p.finish(report, out)?;
    if let Some(e) = err {
        crate::say!("netsift: error: {e}");
        return Ok(false);
    }
    if let Some(code) = crate::signals::caught() {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn span(packets: u64, secs: f64) -> Span {
        Span {
            packets,
            ns: (secs * 1e9) as u64,
            dense_ns: (secs * 1e9) as u64,
            exact: true,
        }
    }

    /// About ten epochs of a long enough capture, at least 1,000 packets each on average, at most
    /// 2 M; one epoch for a capture of fewer than 2,000 packets; lengths on the 1-2-5 steps.
    #[test]
    fn epochs_fit_the_capture() {
        // 20,000 packets in 20 ms: 2,000 a 2 ms epoch.
        assert_eq!(epoch_for(span(20_000, 0.02)), (2, 11));
        // 3,074 packets in 60 s: 1,000 packets are 19.5 s, the nearest step 20 s.
        assert_eq!(epoch_for(span(3_074, 60.0)), (20_000, 4));
        // Fewer than two epochs' worth: one epoch past the span.
        assert_eq!(epoch_for(span(1_000, 3.3)), (5_000, 1));
        // 1e9 packets in an hour: 2 M packets are 7.2 s; 10 s is nearer on a log scale but
        // would hold 2.8 M.
        assert_eq!(epoch_for(span(1_000_000_000, 3600.0)).0, 5_000);
        // A dense microsecond capture: at least 1 ms.
        assert_eq!(epoch_for(span(10_000, 0.000_5)).0, 1);
        // 2,000 packets in the first 2 s of a 23 s capture: epochs of the dense part's tenth
        // (1,000 packets there are 1 s), over the whole span.
        let tail = Span {
            dense_ns: 2_000_000_000,
            ..span(2_011, 23.0)
        };
        assert_eq!(epoch_for(tail), (1_000, 24));
        for (p, s) in [(5_000u64, 1.0), (123_456, 77.0), (9_999_999, 12.5)] {
            let (ms, n) = epoch_for(span(p, s));
            let lead = ms / 10u64.pow(ms.ilog10());
            assert!([1, 2, 5].contains(&lead), "{ms}");
            assert!((4..=25).contains(&n), "{p} {s}: {n}");
        }
    }
}
