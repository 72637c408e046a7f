//! Run configuration: what the command line or a TOML file asks for, validated before the trace
//! is touched. Serde structs with `deny_unknown_fields` (the error names the field), kept apart
//! from the running objects they build (`runner`).

use algo::Task;
use key::KeyKind;
use serde::{Deserialize, Serialize};
use truth::{EpochSpec, Weight, DEFAULT_EPOCH_PACKETS};

pub use front::Accel;

/// Alert rules are configuration (`[[alert]]` tables), parsed and checked with the rest of it.
pub mod rules;

/// One algorithm answering one task.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasureSpec {
    pub task: Task,
    #[serde(rename = "algo")]
    pub algorithm: String,
    /// Key kind for this measurement (default: the run's `key`; superspreaders and DDoS always
    /// use `pair` keys).
    #[serde(default)]
    pub key: Option<KeyKind>,
    /// Heavy hitters / changers: a value below 1 is a fraction of the epoch's total (changers:
    /// of the total change), 1 or more an absolute size. Superspreaders / DDoS: below 1 a
    /// fraction of the distinct addresses on the counted (peer) side, else an absolute count.
    #[serde(default)]
    pub threshold: Option<f64>,
    /// Top-k: k.
    #[serde(default)]
    pub k: Option<usize>,
    /// The algorithm's own parameters (see each algorithm's config; defaults from the papers).
    #[serde(default)]
    pub params: toml::Table,
    /// The algorithm was the task's default (no `--algo`, no config naming it): a run whose keys
    /// it cannot hold (`--ipv6` pairs for two_level) answers the task with the next algorithm
    /// that can, and says so in the report's notes.
    #[serde(skip)]
    pub by_default: bool,
    /// The task was not asked for by name (no `--task`: every task, or every task the listed
    /// algorithms answer): a run that cannot measure it (`flow_size_distribution` with
    /// `--weight bytes`) leaves it out with a note instead of refusing the run.
    #[serde(skip)]
    pub task_by_default: bool,
}

impl MeasureSpec {
    /// `algo` answering `task` with its default parameters, on the run's key and thresholds.
    pub fn new(task: Task, algo: &str) -> MeasureSpec {
        MeasureSpec {
            task,
            algorithm: algo.to_string(),
            key: None,
            threshold: None,
            k: None,
            params: toml::Table::new(),
            by_default: false,
            task_by_default: false,
        }
    }
}

/// A whole run, as a TOML file holds it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// Capture file; none = the built-in synthetic trace.
    #[serde(default)]
    pub trace: Option<String>,
    /// Format of `trace` (`pcap`, `pcapng`, `keys4`, `keys13`, `keys21`; `--format` overrides
    /// it); none = detected by magic number or extension. Checked by the CLI, which opens it.
    #[serde(default)]
    pub format: Option<String>,
    #[serde(default = "default_key")]
    pub key: KeyKind,
    #[serde(default)]
    pub weight: Weight,
    #[serde(default)]
    pub epoch_packets: Option<u64>,
    #[serde(default)]
    pub epoch_ms: Option<u64>,
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Size the algorithms that store or decode keys of a fixed width (tables, FlowRadar,
    /// RevSketch, Deltoid, TwoLevel, the Bloom spreader) for IPv6 keys. Tables then hold both
    /// families; the decoders hold only keys of the configured family. Keys an algorithm cannot
    /// hold are counted per algorithm (`skipped` in the report), never dropped silently.
    #[serde(default)]
    pub ipv6: bool,
    /// Which IP header of a tunnelled packet (GRE, VXLAN, GENEVE, GTP-U, IP-in-IP, 6in4, 4in6)
    /// makes its flow key: `outer` (the default, tshark's first `ip.src`) or `inner`. MPLS and
    /// PPPoE are below IP and always looked through.
    #[serde(default)]
    pub tunnel: wire::Tunnel,
    #[serde(default)]
    pub accel: Accel,
    /// The aggregator's parameters when `accel = "agg_evict"` (table `[agg_evict]`).
    #[serde(default)]
    pub agg_evict: aggevict::AggConfig,
    /// `auto` (default): the aggregator steps aside, per key kind and window of packets, when
    /// a cost model says it does not pay (`front::AggMode`); `always`: every packet goes
    /// through it. Only with `accel = "agg_evict"`.
    #[serde(default)]
    pub agg_mode: front::AggMode,
    /// Packets per decision window of `agg_mode = "auto"` (at least 1; default
    /// `front::WINDOW`, 65536).
    #[serde(default = "default_agg_window")]
    pub agg_window: u64,
    /// Packets handed to the algorithms at once (default 256).
    #[serde(default = "default_batch")]
    pub batch: usize,
    /// How many reported keys each task lists in the report (the count is always given).
    #[serde(default = "default_listed")]
    pub listed: usize,
    #[serde(default, rename = "measure")]
    pub measures: Vec<MeasureSpec>,
    /// Largest total memory, in bytes, the run's structures may take (algorithms, the previous
    /// epoch's copies for heavy changers, aggregators); a run needing more is refused before
    /// anything is allocated. None: no limit (the CLI sets a default from physical memory).
    #[serde(default)]
    pub max_memory: Option<u64>,
    /// A paper's configuration (`agg-evict`, `sketchvisor`, `reeval`: `catalog::presets`): the
    /// parameters it gives each algorithm, under each measure's own `params` (which win).
    #[serde(default)]
    pub preset: Option<String>,
    /// Worker threads measuring in parallel (1..=256; `crate::workers`): each owns its
    /// aggregators and algorithm instances, fed by the caller's thread by a seeded hash of each
    /// key, merged at every epoch's end. 1 (the default here): the caller's thread measures. The
    /// CLI takes the cores available unless `--workers` or the config file says.
    #[serde(default = "default_workers")]
    pub workers: usize,
    /// Keep exact ground truth and score every answer against it (default). Off: answers and
    /// costs only, no per-flow state on the packet path (the report says `truth: false`);
    /// fractional thresholds are then resolved against the epoch's weight (heavy hitters and
    /// changers) or a HyperLogLog estimate of its addresses (superspreaders, DDoS).
    #[serde(default = "default_truth")]
    pub truth: bool,
    /// SketchVisor's data plane (table `[sketchvisor]`, SketchVisor section 3): a fast path
    /// (`fast_path = "sketchvisor"` or `"misra_gries"`, `fast_path_bytes`) takes the packets the
    /// normal path cannot (`normal_capacity` in Mpps per worker, drained in capture time by a
    /// deterministic FIFO model of `fifo_depth` packets; key traces without timestamps arrive at
    /// `key_trace_mpps`), and every task is answered from the sketch recovered from both paths
    /// (`recover`: `sketchvisor`, `proportional`, `lower`, `upper` or `none`). Without the
    /// table: no fast path.
    /// A table given without `fast_path` takes SketchVisor's.
    #[serde(default = "no_fast_path")]
    pub sketchvisor: visor::VisorConfig,
    /// The NIC's capacity in Gbit/s (`--nic-gbps`, SketchVisor 7.1): a fractional heavy-hitter
    /// threshold is then a fraction of `nic_gbps x 1e9 / 8 x epoch length` bytes, the same every
    /// epoch, instead of the epoch's own bytes ([`RunConfig::nic_base`]; as `bench sketchvisor
    /// --nic-gbps`). Heavy changers keep the paper's base, the total change over two epochs.
    /// Needs time epochs (`epoch_ms`) and `weight = "bytes"`.
    #[serde(default)]
    pub nic_gbps: Option<f64>,
    /// Heavy hitters detected on the packet path as they cross the threshold, each reported
    /// with its capture time, and their delay against exact detection (`crate::instant`).
    #[serde(default)]
    pub instant: bool,
    /// Test only: this worker panics on its first batch, or with `ANSWERS` the answer thread
    /// on its first epoch (the failure paths' tests).
    #[doc(hidden)]
    #[serde(skip)]
    pub inject_failure: Option<usize>,
    /// Write each epoch's snapshot (`crates/snapshot`) into this directory (`--snapshots`).
    #[serde(default)]
    pub snapshots: Option<String>,
    /// This host's id in snapshot files (`--host`).
    #[serde(default)]
    pub host: Option<String>,
    /// What a failed snapshot write does: `None` (`run --snapshots`) ends the run with the
    /// error; `Some` (`netsift agent`, whose capture must not stop because its spool's disk is
    /// full) drops that epoch's snapshot, warns naming the epoch and the reason, counts it
    /// here, and goes on (`Unwritten`).
    #[serde(skip)]
    pub unwritten: Option<Unwritten>,
    /// Alert rules (`[[alert]]` tables, [`rules`]), watched by `crates/monitor`.
    #[serde(default, rename = "alert", skip_serializing_if = "Vec::is_empty")]
    pub alerts: Vec<rules::AlertRule>,
    /// What the caller chose for the user before the run (the key of a key trace, the epoch
    /// length of a capture): the report's first notes (`Runner::notes`).
    #[serde(skip)]
    pub notes: Vec<String>,
    /// How the epoch length was chosen when the user gave none (`netsift run` on a capture
    /// file: from its duration and rate), for the table's header.
    #[serde(skip)]
    pub epoch_choice: Option<String>,
    /// The flow key was asked for (`--key`, a config file's `key`), not the default: a keys4
    /// trace then refuses any key but `src` instead of choosing it (`engine`).
    #[serde(skip)]
    pub key_given: bool,
}

fn no_fast_path() -> visor::VisorConfig {
    visor::VisorConfig {
        fast_path: visor::FastKind::None,
        ..visor::VisorConfig::default()
    }
}

fn default_workers() -> usize {
    1
}

fn default_truth() -> bool {
    true
}

fn default_key() -> KeyKind {
    KeyKind::FiveTuple
}
fn default_seed() -> u64 {
    1
}
/// 256 rather than 32: a batch costs the runner a flush, the fronts' clock reads and a poll of
/// the answer thread whatever its size; at 32 that was about 3 ns of a 75 ns packet with
/// Agg-Evict and 5-14% of the CPU time without an accelerator (`run`, 20 M packets, issue 13),
/// answers unchanged (every path takes any batch length; the keys of two kinds, 2 x 38 bytes a
/// packet, still fit in L1).
fn default_batch() -> usize {
    256
}
fn default_listed() -> usize {
    20
}
fn default_agg_window() -> u64 {
    front::WINDOW
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            trace: None,
            format: None,
            key: default_key(),
            weight: Weight::Packets,
            epoch_packets: None,
            epoch_ms: None,
            seed: default_seed(),
            ipv6: false,
            tunnel: wire::Tunnel::Outer,
            accel: Accel::None,
            agg_evict: aggevict::AggConfig::default(),
            agg_mode: front::AggMode::Auto,
            agg_window: front::WINDOW,
            batch: default_batch(),
            listed: default_listed(),
            max_memory: None,
            preset: None,
            workers: 1,
            truth: true,
            instant: false,
            inject_failure: None,
            sketchvisor: no_fast_path(),
            nic_gbps: None,
            measures: vec![],
            snapshots: None,
            host: None,
            unwritten: None,
            alerts: vec![],
            notes: vec![],
            epoch_choice: None,
            key_given: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The TOML error's own text names the line, column and field.
    #[error("{0}")]
    Toml(#[from] toml::de::Error),
    #[error("config field `{field}`: {reason}")]
    Field { field: &'static str, reason: String },
    #[error(transparent)]
    Catalog(#[from] catalog::CatalogError),
    #[error("alert rule `{rule}`, field `{field}`: {reason}")]
    Alert {
        rule: String,
        field: &'static str,
        reason: String,
    },
}

/// Why `flow_size_distribution` is refused with `--weight bytes` (ARCHITECTURE.md, measure).
const FSD_IN_BYTES: &str = "flow_size_distribution cannot be measured with --weight bytes \
     (weight = \"bytes\"): it is the number of flows of each size in packets; in bytes every \
     byte count is its own size (a 1 MB flow is size 1000000), MRD averages over that many \
     mostly empty sizes and scores any answer near 0, and MRAC's EM over byte values is \
     intractable (ALGORITHMS.md 1). Measure it with --weight packets.";

fn field(field: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Field {
        field,
        reason: reason.into(),
    }
}

impl RunConfig {
    pub fn from_toml(text: &str) -> Result<RunConfig, ConfigError> {
        Ok(toml::from_str(text)?)
    }

    pub fn epoch(&self) -> Result<EpochSpec, ConfigError> {
        match (self.epoch_packets, self.epoch_ms) {
            (Some(_), Some(_)) => Err(field(
                "epoch_ms",
                "give either epoch_packets or epoch_ms, not both",
            )),
            (None, Some(ms)) => EpochSpec::Millis(ms)
                .validate()
                .map_err(|e| field("epoch_ms", e.to_string())),
            (p, None) => EpochSpec::Packets(p.unwrap_or(DEFAULT_EPOCH_PACKETS))
                .validate()
                .map_err(|e| field("epoch_packets", e.to_string())),
        }
    }

    /// Check every field that can be checked before reading the trace.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.epoch()?;
        if !(1..=256).contains(&self.workers) {
            return Err(field(
                "workers",
                format!("{} is not in 1..=256", self.workers),
            ));
        }
        if !(1..=8192).contains(&self.batch) {
            return Err(field("batch", format!("{} is not in 1..=8192", self.batch)));
        }
        if self.agg_window == 0 {
            return Err(field("agg_window", "0 is not at least 1 packet"));
        }
        if self.measures.is_empty() {
            return Err(field("measure", "no measurement asked for"));
        }
        if let Some(p) = &self.preset {
            catalog::presets::params(p, "")?;
        }
        self.check_nic()?;
        for m in &self.measures {
            let entry = catalog::check(&m.algorithm, m.task)?;
            // A recovery that cannot apply to the algorithm is refused here, never replaced.
            if self.sketchvisor.fast_path != visor::FastKind::None {
                if let Some(why) = self.sketchvisor.recover.refusal(entry.name) {
                    return Err(field("recover", why));
                }
            }
            if let Some(t) = m.threshold {
                if !(t > 0.0 && t.is_finite()) {
                    return Err(field("threshold", format!("{t} must be a positive number")));
                }
            }
            if m.k == Some(0) {
                return Err(field("k", "top-k needs k >= 1"));
            }
            if m.task == Task::FlowSizeDistribution && self.weight == Weight::Bytes {
                return Err(field("weight", FSD_IN_BYTES));
            }
        }
        rules::check_rules(&self.alerts)?;
        for r in &self.alerts {
            r.check_in(&self.measures)?;
        }
        Ok(())
    }

    /// The base of a fractional heavy-hitter threshold when it is the NIC's capacity over an
    /// epoch (SketchVisor 7.1: "0.05% of the NIC capacity multiplied by the epoch length"), in
    /// bytes: `nic_gbps x 1e9 / 8 x epoch_ms / 1000`. `None`: the epoch's own total is the base.
    pub fn nic_base(&self) -> Option<f64> {
        let (g, ms) = (self.nic_gbps?, self.epoch_ms?);
        Some(g * 1e9 / 8.0 * ms as f64 / 1000.0)
    }

    /// `nic_gbps` applies: a positive finite rate, time epochs, a run counting bytes, and
    /// heavy-hitter measures with fractional thresholds (an absolute one has no base).
    fn check_nic(&self) -> Result<(), ConfigError> {
        let Some(g) = self.nic_gbps else {
            return Ok(());
        };
        let bad = |why: String| field("nic_gbps", format!("--nic-gbps {g} (nic_gbps): {why}"));
        if !(g > 0.0 && g.is_finite()) {
            return Err(bad("must be a positive number of Gbit/s".into()));
        }
        if self.epoch_ms.is_none() {
            return Err(bad(
                "the threshold is the NIC's capacity over an epoch's length in time: give \
                 --epoch-ms (epoch_ms), not packet epochs"
                    .into(),
            ));
        }
        if self.weight != Weight::Bytes {
            return Err(bad(
                "the NIC's capacity x epoch is bytes and the run counts packets: give --weight \
                 bytes, or a threshold in packets (--threshold)"
                    .into(),
            ));
        }
        let hh: Vec<&MeasureSpec> = self.measures.iter().filter(|m| nic_task(m.task)).collect();
        if hh.is_empty() {
            return Err(bad(
                "it sets the base of heavy_hitters' thresholds (heavy changers keep the total \
                 change, section 7.1), and the run measures no heavy hitters"
                    .into(),
            ));
        }
        if let Some(m) = hh.iter().find(|m| m.threshold.is_some_and(|t| t >= 1.0)) {
            let (task, t) = (m.task.name(), m.threshold.unwrap_or(0.0));
            return Err(bad(format!(
                "{task}' threshold {t} is absolute, not a fraction of the NIC's capacity: \
                 give a fraction below 1, or leave --nic-gbps out"
            )));
        }
        Ok(())
    }

    /// A preset's run settings (`--preset sketchvisor`: SketchVisor section 7.1), each where
    /// `given` says the user did not choose it: the fast path on with 8 KB
    /// ([`SKETCHVISOR_FAST_PATH_BYTES`]), byte counts, one-second epochs, and heavy-hitter
    /// thresholds of the NIC's capacity x epoch at [`SKETCHVISOR_NIC_GBPS`] (the fractions stay
    /// the defaults, 0.05%). Returns the note saying what it set and what it left. Other presets
    /// set no run setting.
    pub fn preset_settings(&mut self, given: Given) -> Option<String> {
        if self.preset.as_deref() != Some("sketchvisor") {
            return None;
        }
        let mut set: Vec<String> = vec![];
        let mut left: Vec<String> = vec![];
        let sv = &mut self.sketchvisor;
        if !given.fast_path && sv.fast_path == visor::FastKind::None {
            sv.fast_path = visor::FastKind::Sketchvisor;
            set.push("--fast-path sketchvisor".into());
        }
        if !given.fast_path_bytes {
            sv.fast_path_bytes = SKETCHVISOR_FAST_PATH_BYTES;
            set.push(format!("--fast-path-bytes {SKETCHVISOR_FAST_PATH_BYTES}"));
        }
        // The paper's flow size distribution is of byte ranges; ours is in packets and refused
        // in bytes: a run that names it keeps packets.
        let fsd_named = self
            .measures
            .iter()
            .any(|m| m.task == Task::FlowSizeDistribution && !m.task_by_default);
        if given.weight {
            left.push(format!("weight {} (given)", self.weight.name()));
        } else if fsd_named {
            left.push(format!(
                "weight {} (flow_size_distribution is in packets)",
                self.weight.name()
            ));
        } else {
            self.weight = Weight::Bytes;
            set.push("--weight bytes".into());
        }
        if given.epoch {
            left.push("the epochs given".into());
        } else if given.timeless {
            left.push("packet epochs (a key trace without timestamps)".into());
        } else {
            (self.epoch_ms, self.epoch_packets) = (Some(SKETCHVISOR_EPOCH_MS), None);
            set.push(format!("--epoch-ms {SKETCHVISOR_EPOCH_MS}"));
        }
        if !given.nic_gbps && self.nic_gbps.is_none() {
            self.nic_gbps = Some(SKETCHVISOR_NIC_GBPS);
            match self.check_nic() {
                Ok(()) => set.push(format!("--nic-gbps {SKETCHVISOR_NIC_GBPS}")),
                Err(e) => {
                    self.nic_gbps = None;
                    let why = e.to_string();
                    let why = why.split_once("): ").map_or(why.as_str(), |w| w.1);
                    left.push(format!(
                        "heavy-hitter thresholds of each epoch (--nic-gbps not set: \
                         {why})"
                    ));
                }
            }
        }
        let mut note = format!(
            "preset sketchvisor (SketchVisor 7.1) sets {}",
            if set.is_empty() {
                "nothing the flags did not give".to_string()
            } else {
                set.join(", ")
            }
        );
        if !left.is_empty() {
            note.push_str(&format!("; keeps {}", left.join("; ")));
        }
        note.push_str("; any of these flags given overrides it");
        if self.sketchvisor.fast_path != visor::FastKind::None
            && self.sketchvisor.normal_capacity.is_none()
        {
            // A file is read as fast as the normal path takes it: nothing overflows unless its
            // rate is capped.
            note.push_str(
                " (the fast path takes packets only when --normal-capacity caps the normal path)",
            );
        }
        Some(note)
    }

    /// Leave out the measures a run in this weight cannot score and that were not asked for by
    /// name (`MeasureSpec::task_by_default`); returns a note for each task left out. Those
    /// asked for by name stay, and `validate` refuses them.
    pub fn drop_unmeasurable(&mut self) -> Vec<String> {
        if self.weight != Weight::Bytes {
            return vec![];
        }
        let before = self.measures.len();
        self.measures
            .retain(|m| !(m.task == Task::FlowSizeDistribution && m.task_by_default));
        if self.measures.len() == before {
            return vec![];
        }
        vec![format!(
            "{}: left out, it is measured in packets and the run counts bytes (--weight bytes)",
            Task::FlowSizeDistribution
        )]
    }

    /// `preset`'s measurements (`catalog::presets::measures`) in place of the defaults: when
    /// every measure is a default's (no `--algo`, no `[[measure]]` tables), each task the paper
    /// measured gets its algorithms, limited to the tasks named by `--task` when given (a named
    /// task the paper did not measure keeps its default). Returns the note saying what was set.
    pub fn select_preset_measures(&mut self, preset: &str) -> Option<String> {
        let paper = catalog::presets::measures(preset);
        if paper.is_empty()
            || self.measures.is_empty()
            || !self.measures.iter().all(|m| m.by_default)
        {
            return None;
        }
        let named = !self.measures.iter().any(|m| m.task_by_default);
        let mut out: Vec<MeasureSpec> = vec![];
        let mut said: Vec<String> = vec![];
        for m in &self.measures {
            match paper.iter().find(|(t, _)| *t == m.task) {
                Some((t, algos)) => {
                    said.push(format!("{} with {}", t.name(), algos.join(", ")));
                    out.extend(algos.iter().map(|a| MeasureSpec {
                        by_default: true,
                        ..MeasureSpec {
                            task_by_default: m.task_by_default,
                            threshold: m.threshold,
                            k: m.k,
                            key: m.key,
                            ..MeasureSpec::new(*t, a)
                        }
                    }));
                }
                // Every task (no `--task`): only the paper's. A named task it did not measure
                // keeps its default algorithm.
                None if named => out.push(m.clone()),
                None => {}
            }
        }
        if out.is_empty() {
            return None;
        }
        self.measures = out;
        Some(format!(
            "preset {preset}: measures {} (its paper's; --algo or --task to choose)",
            said.join("; ")
        ))
    }

    /// The measurements of `--task` / `--algo` lists: every listed task with every listed
    /// algorithm that answers it. A task none of the algorithms answers, or an algorithm that
    /// answers none of the tasks, is an error naming both.
    pub fn measures_from_lists(
        tasks: &[Task],
        algos: &[String],
    ) -> Result<Vec<MeasureSpec>, ConfigError> {
        let spec = MeasureSpec::new;
        for a in algos {
            catalog::lookup(a)?;
        }
        // A name listed twice means the same thing as once (each task runs on every listed
        // algorithm that answers it).
        let mut seen = vec![];
        let algos: Vec<String> = algos
            .iter()
            .filter(|a| {
                let new = !seen.contains(a);
                seen.push(*a);
                new
            })
            .cloned()
            .collect();
        let mut tasks = tasks.to_vec();
        let mut i = 0;
        while i < tasks.len() {
            if tasks[..i].contains(&tasks[i]) {
                tasks.remove(i);
            } else {
                i += 1;
            }
        }
        let implicit = tasks.is_empty();
        let tasks: Vec<Task> = if implicit {
            if algos.is_empty() {
                Task::ALL.to_vec()
            } else {
                Task::ALL
                    .into_iter()
                    .filter(|t| algos.iter().any(|a| catalog::check(a, *t).is_ok()))
                    .collect()
            }
        } else {
            tasks
        };
        if algos.is_empty() {
            return Ok(tasks
                .iter()
                .map(|&t| MeasureSpec {
                    by_default: true,
                    task_by_default: implicit,
                    ..spec(t, catalog::default_for(t).name)
                })
                .collect());
        }
        let mut out = vec![];
        for &t in &tasks {
            let able: Vec<&String> = algos
                .iter()
                .filter(|a| catalog::check(a, t).is_ok())
                .collect();
            if able.is_empty() {
                // Name the first algorithm in the error, with what can answer the task.
                catalog::check(&algos[0], t)?;
            }
            out.extend(able.into_iter().map(|a| MeasureSpec {
                task_by_default: implicit,
                ..spec(t, a)
            }));
        }
        for a in &algos {
            if !out.iter().any(|m| &m.algorithm == a) {
                catalog::check(a, tasks[0])?;
            }
        }
        Ok(out)
    }
}

/// The tasks whose fractional threshold `nic_gbps` makes one of the NIC's capacity x epoch:
/// heavy hitters only (SketchVisor 7.1 puts heavy changers at 0.05% of the total change over two
/// epochs, which they keep).
pub fn nic_task(t: Task) -> bool {
    matches!(t, Task::HeavyHitters)
}

/// What the user chose for a run (flags, the config file's own fields, the trace): a preset's
/// run settings ([`RunConfig::preset_settings`]) leave these as they are.
#[derive(Clone, Copy, Debug, Default)]
pub struct Given {
    pub weight: bool,
    /// `epoch_packets` or `epoch_ms`.
    pub epoch: bool,
    pub nic_gbps: bool,
    pub fast_path: bool,
    pub fast_path_bytes: bool,
    /// The trace is a key trace whose records carry no time (keys4, keys13): no time epochs.
    pub timeless: bool,
}

/// SketchVisor 7.1's run settings (`--preset sketchvisor`): the NIC capacity its heavy-hitter
/// threshold is a fraction of (40 Gbit/s, the rate of its in-memory tester, figure 6(b); its
/// testbed NICs are 10 Gbit/s: `--nic-gbps 10`), its one-second epochs and 8 KB fast path.
pub const SKETCHVISOR_NIC_GBPS: f64 = 40.0;
pub const SKETCHVISOR_EPOCH_MS: u64 = 1000;
pub const SKETCHVISOR_FAST_PATH_BYTES: usize = 8192;

/// Default thresholds (SketchVisor 7.1: heavy hitters and changers at 0.05%, DDoS and
/// superspreaders at 0.5% of the addresses) and top-k size.
pub const DEFAULT_HH: f64 = 0.0005;
pub const DEFAULT_HC: f64 = 0.0005;
pub const DEFAULT_SPREAD: f64 = 0.005;
pub const DEFAULT_K: usize = 100;

/// The snapshots a run could not write (`RunConfig::unwritten`): shared by the run's clones of
/// its configuration and whoever reports them (the agent's closing line).
#[derive(Clone, Debug, Default)]
pub struct Unwritten(std::sync::Arc<std::sync::Mutex<UnwrittenLog>>);

/// What [`Unwritten`] holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnwrittenLog {
    /// Snapshots not written.
    pub count: u64,
    /// Their epochs, the first 64.
    pub epochs: Vec<u64>,
    /// The last failure's reason.
    pub reason: Option<String>,
}

impl Unwritten {
    pub(crate) fn add(&self, epoch: u64, e: &std::io::Error) {
        let mut l = self.0.lock().unwrap_or_else(|p| p.into_inner());
        l.count += 1;
        if l.epochs.len() < 64 {
            l.epochs.push(epoch);
        }
        l.reason = Some(e.to_string());
    }

    /// What was not written so far.
    pub fn log(&self) -> UnwrittenLog {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Resolve a threshold (heavy hitters and changers, `evaluate`; the header's `resolved`, `report`)
/// that is a fraction (< 1) of `base` or an absolute value (>= 1).
pub(crate) fn resolve(t: f64, base: f64) -> u64 {
    if t < 1.0 {
        (t * base).ceil().max(1.0) as u64
    } else {
        t.ceil() as u64
    }
}

#[cfg(test)]
mod tests;
