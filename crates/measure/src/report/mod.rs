//! The per-epoch report: what each task answered, its accuracy against exact ground truth, and
//! what the run cost. Everything here is serialized as `netsift run --json` prints it.

use algo::Task;
use key::KeyKind;
use serde::Serialize;
use truth::Weight;

use crate::metrics::Accuracy;

pub mod instant;

/// One reported key with its estimate.
#[derive(Clone, Debug, Serialize)]
pub struct Listed {
    pub key: String,
    pub estimate: u64,
    /// With ground truth, the key's exact value in the task's terms: its size (heavy hitters,
    /// top-k), its change (heavy changers), its distinct peers (superspreaders, DDoS victims);
    /// 0 for a key that is not in the epoch at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truth: Option<u64>,
    /// Capture times (ns) the algorithm recorded for the flow (`Algorithm::flow_times`:
    /// instameasure and rcc, the packets whose emissions inserted the flow into the table and
    /// last added to it); absent for algorithms that keep no times.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_ns: Option<u64>,
}

/// What an algorithm answered.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Answer {
    /// Scalar answers: cardinality, entropy, number of flows of the distribution.
    pub estimate: Option<f64>,
    /// Number of keys reported (set tasks) or queried (flow size).
    pub reported: Option<u64>,
    /// The largest reported keys, at most `listed` of them.
    pub keys: Vec<Listed>,
    /// Flow-size distribution: estimated number of flows of size 1..=10.
    pub fsd_head: Vec<f64>,
}

/// The exact counterpart of an [`Answer`], from the ground truth.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Exact {
    /// The exact value of `answer.estimate`.
    pub value: Option<f64>,
    /// Number of true instances (set tasks).
    pub count: Option<u64>,
}

/// One task's answer in one epoch.
#[derive(Clone, Debug, Serialize)]
pub struct TaskResult {
    pub task: Task,
    pub algorithm: String,
    pub key: KeyKind,
    /// The absolute threshold used (heavy hitters / changers / spreaders) or k (top-k).
    pub threshold: Option<f64>,
    pub answer: Answer,
    pub truth: Exact,
    pub accuracy: Accuracy,
    /// Why the task has no answer this epoch (heavy changers in the first epoch).
    pub note: Option<String>,
    /// Why this answer may be wrong: the configuration cannot hold what was asked
    /// (`Algorithm::caveats`), each naming the parameter and the size that would do.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<algo::Caveat>,
    /// With a fast path: how the state this task was answered from was recovered from both
    /// paths (`sketchvisor`, `lower`, `upper`, or `none` when nothing took the fast path or
    /// NoRecovery was asked for).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery: Option<&'static str>,
}

#[derive(Clone, Debug, Serialize)]
pub struct EpochReport {
    pub index: u64,
    pub packets: u64,
    pub bytes: u64,
    /// Distinct flows of the run's key kind (ground truth; `None` without it).
    pub flows: Option<u64>,
    /// Holds less than its whole span: the capture started after its start (time epochs on a
    /// grid: a live agent's Unix-time epochs) or a signal ended it before its end
    /// (`Runner::interrupt`: its packets are those read until then). In a merge: any host's
    /// part was partial (`hosts` names which).
    pub partial: bool,
    /// Why it is partial (empty when it is not).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub partial_reasons: Vec<PartialReason>,
    /// A partial epoch of a run: the span of it the capture covered (absent when whole, and
    /// in a merge, where each host's is in `hosts`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Coverage>,
    /// A merge (`netsift merge`, the controller): each host's part of the epoch, in host order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostEpoch>,
    /// With a fast path (SketchVisor, `--fast-path`): packets and bytes per path, and per key
    /// kind what the fast path tracked (the paper's Figure 13).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paths: Option<Paths>,
    /// Live capture (`netsift live`): what the kernel received and dropped during this epoch
    /// (differences of pcap_stats, summed over interfaces); `None` for files and pipes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureStats>,
    pub tasks: Vec<TaskResult>,
    /// Per algorithm instance, what this epoch cost it: update time on the packet path and
    /// query time at the epoch's end, separately (the run's sums are in `Report::throughput`).
    /// Wall time, so it differs from run to run: compare answers without it
    /// ([`EpochReport::answers`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub costs: Vec<EpochCost>,
}

impl EpochReport {
    /// The epoch without its costs: what two runs of the same trace, configuration and seed
    /// give alike (any worker count, accelerator or read path).
    pub fn answers(&self) -> EpochReport {
        EpochReport {
            costs: vec![],
            ..self.clone()
        }
    }
}

/// Why an epoch holds less than its whole span.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PartialReason {
    /// The capture started after the epoch's start (its first epoch, when epochs lie on a time
    /// grid that does not start with the capture: a live agent's Unix-time epochs).
    StartedMidEpoch,
    /// A signal ended the capture before the epoch's end.
    Interrupted,
}

impl PartialReason {
    pub fn name(self) -> &'static str {
        match self {
            PartialReason::StartedMidEpoch => "started mid-epoch",
            PartialReason::Interrupted => "interrupted",
        }
    }
}

/// The span of an epoch a capture covered (capture time, ns): a time epoch's bounds `[start,
/// end)`, from the capture's start and to its end where they fall within; a packet epoch's
/// first and last packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Coverage {
    pub start_ns: u64,
    pub end_ns: u64,
}

/// How much of its epoch a capture saw: why it is partial (empty: all of it) and the span.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EpochCover {
    pub reasons: Vec<PartialReason>,
    pub span: Coverage,
}

impl EpochCover {
    pub fn partial(&self) -> bool {
        !self.reasons.is_empty()
    }
}

/// One host's part of a merged epoch, from its snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HostEpoch {
    pub host: String,
    pub packets: u64,
    /// Its snapshot was idle (the host was up, no packet: `Snapshot::is_idle`).
    pub idle: bool,
    pub partial: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub partial_reasons: Vec<PartialReason>,
    /// The span of the epoch its capture covered.
    pub coverage: Coverage,
}

/// One algorithm instance's cost in one epoch.
#[derive(Clone, Debug, Serialize)]
pub struct EpochCost {
    pub algorithm: String,
    pub key: KeyKind,
    /// Updates it received (fewer than packets behind an accelerator).
    pub updates: u64,
    /// Update time (timed batches less the clock's own cost, as `Cost::seconds`), summed over
    /// workers.
    pub update_seconds: f64,
    /// Query time: its recovery and answers at this epoch's end (not the scoring).
    pub query_seconds: f64,
}

/// The kernel's counts for one epoch of a live capture (pcap_stats(3pcap) differences).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CaptureStats {
    /// Packets the capture received (`ps_recv`).
    pub received: u64,
    /// Dropped because the capture buffer was full (`ps_drop`).
    pub dropped: u64,
    /// Dropped by the interface or its driver (`ps_ifdrop`).
    pub if_dropped: u64,
}

/// One epoch's split between SketchVisor's normal and fast paths.
#[derive(Clone, Debug, Serialize)]
pub struct Paths {
    /// `sketchvisor` or `misra_gries`.
    pub fast_path: &'static str,
    pub normal_packets: u64,
    pub normal_bytes: u64,
    pub fast_packets: u64,
    pub fast_bytes: u64,
    /// Share of the epoch's packets measured by the fast path.
    pub fast_share: f64,
    pub kinds: Vec<FastKindReport>,
}

/// What one key kind's fast path held at the epoch's end.
#[derive(Clone, Debug, Serialize)]
pub struct FastKindReport {
    pub key: KeyKind,
    /// Flows in its table, each with Lemma 4.1's bounds.
    pub tracked: u64,
    /// `V`: the weight it measured; `E`: its largest possible under-estimate of a flow.
    pub v: u64,
    pub e: u64,
    /// Its kick-out passes (`None` in a merge: snapshots do not carry them).
    pub kickouts: Option<u64>,
}

/// Cost of one algorithm instance over the whole run.
#[derive(Clone, Debug, Serialize)]
pub struct Cost {
    pub algorithm: String,
    pub key: KeyKind,
    /// The tasks this instance answers (two instances of one algorithm on one key kind differ
    /// by what they serve: `two_level` for superspreaders and for DDoS victims).
    pub tasks: Vec<Task>,
    /// The instance's memory, the largest seen at an epoch's end (a structure that grows with
    /// its flows is empty again after each reset).
    pub memory_bytes: usize,
    pub updates: u64,
    /// Update time: the timed batches' wall time minus the clock's own cost
    /// (`clock_seconds`).
    pub seconds: f64,
    /// Update time per keyed packet of the trace.
    pub ns_per_packet: f64,
    /// Update time per update the algorithm received (differs behind an accelerator).
    pub ns_per_update: f64,
    pub mpps: f64,
    /// Batches timed (one `Instant` pair each).
    pub timed_batches: u64,
    /// Wall time of the timed batches as measured, clock included: `seconds + clock_seconds`
    /// (`seconds` is 0 when the clock's measured cost exceeds it).
    pub timed_seconds: f64,
    /// The clock's cost subtracted from `seconds`: `timed_batches` x `Report::clock_ns`.
    pub clock_seconds: f64,
    /// Query time: the instance's answers at every epoch's end (decoding, EM, heap reads; the
    /// scoring against ground truth is not counted), over the run.
    pub query_seconds: f64,
    /// `query_seconds` per epoch, in milliseconds.
    pub query_ms_per_epoch: f64,
    /// `seconds` per epoch, in milliseconds.
    pub update_ms_per_epoch: f64,
    /// The largest update and query time of one epoch (`EpochReport::costs`), in milliseconds.
    pub update_ms_max_epoch: f64,
    pub query_ms_max_epoch: f64,
    /// Keys not fed because the algorithm cannot store their length (the other address family:
    /// see `RunConfig::ipv6`).
    pub skipped: u64,
}

/// The aggregator of one key kind (Agg-Evict), over the whole run.
#[derive(Clone, Debug, Serialize)]
pub struct AccelCost {
    pub accel: &'static str,
    pub key: KeyKind,
    pub simd: String,
    pub memory_bytes: usize,
    pub packets: u64,
    /// Updates handed to the algorithms (evictions, epoch-end flushes, bypasses).
    pub evicted: u64,
    /// `evicted / packets`: the share of the per-packet work the algorithms still do.
    pub evicted_share: f64,
    /// Time in the aggregator itself (its time minus the algorithms' time on its evictions).
    pub seconds: f64,
    pub ns_per_packet: f64,
    /// `auto` (the aggregator steps aside when it does not pay) or `always`.
    pub mode: &'static str,
    /// Packets that went through the aggregator (the rest went straight to the algorithms).
    pub through: u64,
    /// `through / packets`.
    pub through_share: f64,
    /// Decisions that switched between aggregating and standing aside (summed over workers).
    pub switches: u64,
    /// `switches` per epoch of the run.
    pub switches_per_epoch: f64,
}

/// Packet accounting: every packet read is in exactly one class.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Totals {
    pub packets: u64,
    pub bytes: u64,
    #[serde(flatten)]
    pub classes: wire::Classes,
    pub epochs: u64,
}

impl Totals {
    /// Count one packet read, in its class.
    #[inline]
    pub fn add(&mut self, class: wire::Class, wire_len: u32) {
        self.packets += 1;
        self.bytes += u64::from(wire_len);
        self.classes.add(class);
    }

    /// Count `n` IPv4 packets of `wire_len` bytes each.
    #[inline]
    pub fn add_ipv4(&mut self, n: u64, wire_len: u32) {
        self.packets += n;
        self.bytes += n * u64::from(wire_len);
        self.classes.ipv4 += n;
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub trace: String,
    pub key: KeyKind,
    pub weight: Weight,
    pub epoch: String,
    pub seed: u64,
    pub batch: usize,
    /// Whether answers were scored against exact ground truth (`RunConfig::truth`); without
    /// it, every accuracy field is empty.
    pub truth: bool,
    pub epochs: Vec<EpochReport>,
    pub totals: Totals,
    /// Wall time of the whole pass (reading, parsing, ground truth and all algorithms).
    pub seconds: f64,
    pub mpps: f64,
    /// What one timed region costs with nothing in it (`runner::clock_overhead_ns`), measured
    /// at the start of the run and subtracted once per timed batch from every algorithm's time.
    pub clock_ns: f64,
    pub throughput: Vec<Cost>,
    pub accel: &'static str,
    /// One entry per key kind when an accelerator is in front of the algorithms.
    pub accelerators: Vec<AccelCost>,
    /// What the run changed from what was asked (a default algorithm that cannot hold the keys,
    /// swapped for one that can), one line each.
    pub notes: Vec<String>,
    /// Every task answer's warnings (`TaskResult::warnings`) of the epochs kept in `epochs`, in
    /// order, each with its epoch, task and algorithm (`netsift run` and `live`, which take
    /// epochs out as they print them, put every epoch's here).
    pub warnings: Vec<Warning>,
    /// `--instant`: the detections against exact detection (`crate::instant`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instant: Option<instant::InstantReport>,
    /// Worker threads the run measured with.
    pub workers: usize,
    /// SketchVisor's `normal_capacity`, in Mpps per worker (the whole run's is `workers` times).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub normal_capacity: Option<f64>,
    /// How the epoch length was chosen when none was given (`RunConfig::epoch_choice`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch_choice: Option<String>,
    /// The threshold rule of each measurement with one (heavy hitters, changers, spreaders,
    /// top-k), as configured: what each epoch's `threshold` was resolved from.
    pub thresholds: Vec<ThresholdRule>,
}

/// A measurement's threshold as configured: a fraction of a per-epoch base or an absolute
/// value (`MeasureSpec::threshold`, or the task's default), or top-k's k.
#[derive(Clone, Debug, Serialize)]
pub struct ThresholdRule {
    pub task: Task,
    pub algorithm: String,
    /// The configured value: a fraction when `of` is given, else absolute (k for top-k).
    pub value: f64,
    /// What a fraction is of, in each epoch (`packets`, `bytes`, `total change`, `distinct
    /// destinations`, `distinct sources`, or `NIC capacity x epoch (40 Gbps x 1000 ms)`);
    /// `None` for an absolute value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub of: Option<String>,
    /// The threshold every epoch resolves to when the base is fixed (`--nic-gbps`: bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved: Option<u64>,
    /// The task's default, not given by the user.
    pub default: bool,
}

impl ThresholdRule {
    /// The rules of a run's measurements, one per task and value (two algorithms on one task
    /// with the same rule are one line).
    pub fn of_config(cfg: &crate::config::RunConfig) -> Vec<ThresholdRule> {
        use crate::config::{DEFAULT_HC, DEFAULT_HH, DEFAULT_K, DEFAULT_SPREAD};
        let weight = match cfg.weight {
            Weight::Packets => "packets",
            Weight::Bytes => "bytes",
        };
        let mut v: Vec<ThresholdRule> = vec![];
        for m in &cfg.measures {
            let (default, of) = match m.task {
                Task::HeavyHitters => (DEFAULT_HH, weight),
                Task::HeavyChangers => (DEFAULT_HC, "total change"),
                Task::Superspreaders => (DEFAULT_SPREAD, "distinct destinations"),
                Task::Ddos => (DEFAULT_SPREAD, "distinct sources"),
                Task::TopK => {
                    v.push(ThresholdRule {
                        task: m.task,
                        algorithm: m.algorithm.clone(),
                        value: m.k.unwrap_or(DEFAULT_K) as f64,
                        of: None,
                        resolved: None,
                        default: m.k.is_none(),
                    });
                    continue;
                }
                _ => continue,
            };
            let value = m.threshold.unwrap_or(default);
            let nic = cfg
                .nic_base()
                .filter(|_| crate::config::nic_task(m.task) && value < 1.0);
            let of = match (nic, cfg.nic_gbps, cfg.epoch_ms) {
                (Some(_), Some(g), Some(ms)) => {
                    format!("NIC capacity x epoch ({g} Gbps x {ms} ms)")
                }
                _ => of.to_string(),
            };
            v.push(ThresholdRule {
                task: m.task,
                algorithm: m.algorithm.clone(),
                value,
                of: (value < 1.0).then_some(of),
                resolved: nic.map(|b| crate::config::resolve(value, b)),
                default: m.threshold.is_none(),
            });
        }
        v
    }

    /// `heavy_hitters >= 0.05% of each epoch's packets`, `top_k k = 100`.
    pub fn describe(&self) -> String {
        let t = self.task.name();
        match (self.task, &self.of) {
            (Task::TopK, _) => format!("{t} k = {}", self.value),
            (_, Some(of)) if self.resolved.is_some() => format!(
                "{t} >= {}% of {of} = {} bytes",
                self.value * 100.0,
                self.resolved.unwrap_or(0)
            ),
            (_, Some(of)) => format!("{t} >= {}% of each epoch's {of}", self.value * 100.0),
            (_, None) => format!("{t} >= {}", self.value),
        }
    }
}

/// A task answer's warning with where it was given.
#[derive(Clone, Debug, Serialize)]
pub struct Warning {
    pub epoch: u64,
    pub task: Task,
    pub algorithm: String,
    pub parameter: &'static str,
    pub message: String,
    pub suggestion: String,
}

impl Warning {
    /// The warnings of one epoch's answers.
    pub fn of(e: &EpochReport) -> impl Iterator<Item = Warning> + '_ {
        e.tasks.iter().flat_map(move |t| {
            t.warnings.iter().map(move |c| Warning {
                epoch: e.index,
                task: t.task,
                algorithm: t.algorithm.clone(),
                parameter: c.parameter,
                message: c.message.clone(),
                suggestion: c.suggestion.clone(),
            })
        })
    }
}

/// The noun for `n` of it: `one` for 1, else `many` (`1 epoch`, `2 epochs`). The one plural
/// rule of the reports and messages (issue 34.9: "1 epochs", "1 packets").
pub fn plural(n: u64, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 {
        one
    } else {
        many
    }
}

/// `n` and its noun: `1 packet`, `0 packets`.
pub fn count(n: u64, one: &'static str, many: &'static str) -> String {
    format!("{n} {}", plural(n, one, many))
}

/// `1.5 GiB`, `12.0 MiB`, `640 B`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod count_tests {
    #[test]
    fn one_is_singular_every_other_count_plural() {
        assert_eq!(super::count(1, "packet", "packets"), "1 packet");
        assert_eq!(super::count(0, "packet", "packets"), "0 packets");
        assert_eq!(super::count(2, "epoch", "epochs"), "2 epochs");
        assert_eq!(super::plural(11, "entry", "entries"), "entries");
    }
}
