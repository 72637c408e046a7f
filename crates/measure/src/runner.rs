//! The one-pass runner: keyed packets in, per-epoch answers with their accuracy out.
//!
//! Every (task, algorithm) pair of a run is a [`MeasureSpec`]; pairs that name the same algorithm
//! with the same key kind, side and parameters share one instance, so the update cost of
//! `count_min` answering both heavy hitters and flow sizes is paid once. Packets reach the
//! algorithms in batches (`RunConfig::batch`), and each instance's update time is measured per
//! batch, so the report can give every algorithm its own ns/packet from the same pass.
//!
//! Ground truth is exact per-flow counts per key kind (`truth`), kept for the current and the
//! previous epoch (heavy changers compare the two).

use std::time::Instant;

use algo::{Algorithm, BuildCtx, KeyBatch, Side, Task};
use key::{FlowKey, KeyKind, KeyMap, KeySet, Tuple};
use serde::Serialize;
use truth::{Clock, EpochTruth, Weight};

use crate::config::{Accel, ConfigError, MeasureSpec, RunConfig};
use crate::metrics::{are_of, mrd, rel_err, set_accuracy, Accuracy};
use crate::registry;

/// Default thresholds (SketchVisor 7.1: heavy hitters and changers at 0.05%, DDoS and
/// superspreaders at 0.5% of the addresses) and top-k size.
pub const DEFAULT_HH: f64 = 0.0005;
pub const DEFAULT_HC: f64 = 0.0005;
pub const DEFAULT_SPREAD: f64 = 0.005;
pub const DEFAULT_K: usize = 100;

struct Instance {
    name: String,
    kind: KeyKind,
    side: Side,
    params: toml::Table,
    key_len: usize,
    algo: Box<dyn Algorithm>,
    /// The previous epoch's state, kept only when a heavy-changers task uses this instance.
    prev: Option<Box<dyn Algorithm>>,
    wants_prev: bool,
    /// Which key lengths the algorithm can store (see [`Fit`]); keys it cannot are counted in
    /// `skipped`, never silently dropped.
    fit: Fit,
    skipped: u64,
    nanos: u128,
    updates: u64,
    /// Scratch buffers for a filtered batch.
    keys: Vec<FlowKey>,
    weights: Vec<u64>,
}

/// Key lengths an algorithm accepts, given the `ctx.key_len` it was built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fit {
    /// Any key (hashing sketches, counters, heaps).
    Any,
    /// Keys of exactly `key_len` bytes: the algorithms that decode keys from fixed bit layouts.
    Exact,
    /// Keys of at most `key_len` bytes: tables that store keys packed in `key_len` bytes.
    AtMost,
}

impl Fit {
    fn of(name: &str) -> Fit {
        match name {
            "rev_sketch" | "deltoid" | "two_level" | "bloom_spreader" => Fit::Exact,
            "linear_hash" | "cuckoo1" | "cuckoo4" | "flow_radar" => Fit::AtMost,
            _ => Fit::Any,
        }
    }

    #[inline]
    fn accepts(self, len: usize, key_len: usize) -> bool {
        match self {
            Fit::Any => true,
            Fit::Exact => len == key_len,
            Fit::AtMost => len <= key_len,
        }
    }
}

struct Measure {
    spec: MeasureSpec,
    kind: KeyKind,
    instance: usize,
}

/// One reported key with its estimate.
#[derive(Clone, Debug, Serialize)]
pub struct Listed {
    pub key: String,
    pub estimate: u64,
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
}

#[derive(Clone, Debug, Serialize)]
pub struct EpochReport {
    pub index: u64,
    pub packets: u64,
    pub bytes: u64,
    pub flows: u64,
    pub tasks: Vec<TaskResult>,
}

/// Cost of one algorithm instance over the whole run.
#[derive(Clone, Debug, Serialize)]
pub struct Cost {
    pub algorithm: String,
    pub key: KeyKind,
    pub memory_bytes: usize,
    pub updates: u64,
    pub seconds: f64,
    /// Update time per keyed packet of the trace.
    pub ns_per_packet: f64,
    /// Update time per update the algorithm received (differs behind an accelerator).
    pub ns_per_update: f64,
    pub mpps: f64,
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
}

/// Packet accounting: every packet read is in exactly one class.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Totals {
    pub packets: u64,
    pub bytes: u64,
    pub ipv4: u64,
    pub ipv6: u64,
    pub non_ip: u64,
    pub truncated: u64,
    pub malformed: u64,
    pub unsupported: u64,
    pub epochs: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub trace: String,
    pub key: KeyKind,
    pub weight: Weight,
    pub epoch: String,
    pub seed: u64,
    pub batch: usize,
    pub epochs: Vec<EpochReport>,
    pub totals: Totals,
    /// Wall time of the whole pass (reading, parsing, ground truth and all algorithms).
    pub seconds: f64,
    pub mpps: f64,
    pub throughput: Vec<Cost>,
    pub accel: &'static str,
    /// One entry per key kind when an accelerator is in front of the algorithms.
    pub accelerators: Vec<AccelCost>,
}

/// The running measurement: push packets, then `finish`.
pub struct Runner {
    cfg: RunConfig,
    clock: Clock,
    kinds: Vec<KeyKind>,
    truth: Vec<EpochTruth>,
    prev_truth: Vec<Option<EpochTruth>>,
    instances: Vec<Instance>,
    /// One aggregator per entry of `kinds` with `accel = agg_evict`, with its own time.
    aggs: Vec<(aggevict::Aggregator, u128)>,
    measures: Vec<Measure>,
    batch_keys: Vec<Vec<FlowKey>>,
    /// Per kind, the batch's keys as big-endian u32 while every one of them is 4 bytes long
    /// (IPv4 source or destination): such a batch goes to `update_batch_u32`, 4 bytes a key
    /// instead of a 38-byte `FlowKey` (same state, `algo::Algorithm::update_batch_u32`).
    batch_u32: Vec<Vec<u32>>,
    batch_weights: Vec<u64>,
    epochs: Vec<EpochReport>,
    totals: Totals,
    started: Instant,
    trace: String,
}

/// Algorithms whose `candidates` parameter sizes a heavy-hitter candidate set that flow-size
/// queries do not use.
const COUNTER_SETS: &[&str] = &["count_min", "count_array"];

fn kind_of(m: &MeasureSpec, run_key: KeyKind) -> KeyKind {
    match m.task {
        Task::Superspreaders | Task::Ddos => KeyKind::Pair,
        _ => m.key.unwrap_or(run_key),
    }
}

impl Runner {
    pub fn new(cfg: RunConfig, trace: &str) -> Result<Runner, ConfigError> {
        cfg.validate()?;
        let clock = Clock::new(cfg.epoch()?);
        let mut kinds: Vec<KeyKind> = vec![];
        let mut instances: Vec<Instance> = vec![];
        let mut measures = vec![];
        // Measures with the same algorithm, key kind, side and params share one instance; the
        // tasks each instance serves decide whether a Count-Min or count array needs its
        // heavy-hitter candidate set (a probe of the set per update: about 2x the counter
        // updates' cost, see README "Benchmarks"). Serving flow size alone, it is built
        // without one unless `candidates` is set explicitly.
        // (Side is left out: conservative, it can only merge more measures into the check.)
        fn signature(spec: &MeasureSpec, key: KeyKind) -> (&str, KeyKind) {
            (spec.algorithm.as_str(), kind_of(spec, key))
        }
        let flow_size_only = |spec: &MeasureSpec| {
            cfg.measures
                .iter()
                .filter(|o| {
                    signature(o, cfg.key) == signature(spec, cfg.key) && o.params == spec.params
                })
                .all(|o| o.task == Task::FlowSize)
        };
        for spec in &cfg.measures {
            let kind = kind_of(spec, cfg.key);
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
            let side = if spec.task == Task::Ddos {
                Side::Dst
            } else {
                Side::Src
            };
            let ctx = BuildCtx {
                seed: cfg.seed,
                key_len: kind.len(cfg.ipv6),
                side,
            };
            let spreads = matches!(spec.task, Task::Superspreaders | Task::Ddos);
            let name = spec.algorithm.clone();
            let found = instances.iter().position(|i| {
                i.name == name
                    && i.kind == kind
                    && (!spreads || i.side == side)
                    && i.params == spec.params
            });
            let instance = match found {
                Some(i) => i,
                None => {
                    let mut params = spec.params.clone();
                    if COUNTER_SETS.contains(&name.as_str())
                        && !params.contains_key("candidates")
                        && flow_size_only(spec)
                    {
                        params.insert("candidates".into(), toml::Value::Integer(0));
                    }
                    let algo = registry::build(&name, &params, &ctx)?;
                    instances.push(Instance {
                        fit: Fit::of(&name),
                        name,
                        kind,
                        side,
                        params: spec.params.clone(),
                        key_len: ctx.key_len,
                        algo,
                        prev: None,
                        wants_prev: false,
                        skipped: 0,
                        nanos: 0,
                        updates: 0,
                        keys: vec![],
                        weights: vec![],
                    });
                    instances.len() - 1
                }
            };
            // The registry knows what an algorithm answers by default; its configuration can
            // narrow that (Count-Min with `candidates = 0` answers flow size only).
            if !instances[instance].algo.tasks().contains(&spec.task) {
                return Err(ConfigError::Field {
                    field: "params",
                    reason: format!(
                        "{} as configured ({}) does not answer {}; it answers: {}",
                        spec.algorithm,
                        spec.params
                            .iter()
                            .map(|(k, v)| format!("{k} = {v}"))
                            .collect::<Vec<_>>()
                            .join(", "),
                        spec.task,
                        instances[instance]
                            .algo
                            .tasks()
                            .iter()
                            .map(|t| t.name())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
            if spec.task == Task::HeavyChangers {
                instances[instance].wants_prev = true;
            }
            measures.push(Measure {
                spec: spec.clone(),
                kind,
                instance,
            });
        }
        let n = kinds.len();
        let mut aggs = vec![];
        if cfg.accel == Accel::AggEvict {
            for &k in &kinds {
                let a =
                    aggevict::Aggregator::new(&cfg.agg_evict, k.len(cfg.ipv6)).map_err(|e| {
                        ConfigError::Field {
                            field: "agg_evict",
                            reason: e.to_string(),
                        }
                    })?;
                aggs.push((a, 0u128));
            }
        }
        Ok(Runner {
            aggs,
            batch_keys: vec![Vec::with_capacity(cfg.batch); n],
            batch_u32: vec![Vec::with_capacity(cfg.batch); n],
            batch_weights: Vec::with_capacity(cfg.batch),
            truth: (0..n).map(|_| EpochTruth::new(0)).collect(),
            prev_truth: (0..n).map(|_| None).collect(),
            clock,
            kinds,
            instances,
            measures,
            epochs: vec![],
            totals: Totals::default(),
            started: Instant::now(),
            trace: trace.to_string(),
            cfg,
        })
    }

    /// Account one packet that has no flow key (its class is counted, nothing else happens).
    pub fn push_unkeyed(&mut self, class: &str, wire_len: u32) {
        self.totals.packets += 1;
        self.totals.bytes += wire_len as u64;
        match class {
            "non_ip" => self.totals.non_ip += 1,
            "truncated" => self.totals.truncated += 1,
            "malformed" => self.totals.malformed += 1,
            _ => self.totals.unsupported += 1,
        }
    }

    /// One keyed (IPv4/IPv6) packet.
    #[inline]
    pub fn push(&mut self, ts_ns: u64, tuple: &Tuple, wire_len: u32) {
        self.totals.packets += 1;
        self.totals.bytes += wire_len as u64;
        if tuple.v6 {
            self.totals.ipv6 += 1;
        } else {
            self.totals.ipv4 += 1;
        }
        let (index, new) = self.clock.tick(ts_ns);
        if new {
            self.end_epoch();
            for t in &mut self.truth {
                t.index = index;
            }
        }
        for (i, &kind) in self.kinds.iter().enumerate() {
            let k = tuple.key(kind);
            self.truth[i].add(ts_ns, k, wire_len);
            self.batch_keys[i].push(k);
            if k.len() == 4 {
                self.batch_u32[i].push(k.prefix_u32());
            }
        }
        self.batch_weights.push(self.cfg.weight.of(wire_len));
        if self.batch_weights.len() == self.cfg.batch {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.batch_weights.is_empty() {
            return;
        }
        let weights = &self.batch_weights;
        for (ki, (keys, narrow)) in self.batch_keys.iter().zip(&self.batch_u32).enumerate() {
            // All 4-byte keys: the u32 path; otherwise (wider kinds, or an IPv6 key in an IPv4
            // source batch) the FlowKeys.
            let batch = if narrow.len() == keys.len() {
                KeyBatch::U32(narrow)
            } else {
                KeyBatch::Keys(keys)
            };
            match self.aggs.get_mut(ki) {
                None => feed(&mut self.instances, ki, &self.kinds, batch, weights),
                Some((agg, nanos)) => {
                    let instances = &mut self.instances;
                    let kinds = &self.kinds;
                    let inside: u128 = instances.iter().map(|i| i.nanos).sum();
                    let t = Instant::now();
                    agg.update(batch, weights, &mut |kb, ws| {
                        feed(instances, ki, kinds, kb, ws)
                    });
                    let all = t.elapsed().as_nanos();
                    let algos: u128 = instances.iter().map(|i| i.nanos).sum::<u128>() - inside;
                    *nanos += all.saturating_sub(algos);
                }
            }
        }
        for b in &mut self.batch_keys {
            b.clear();
        }
        for b in &mut self.batch_u32 {
            b.clear();
        }
        self.batch_weights.clear();
    }

    /// Epoch end with an accelerator: hand every aggregated update to the algorithms.
    fn flush_accel(&mut self) {
        for (ki, (agg, nanos)) in self.aggs.iter_mut().enumerate() {
            let instances = &mut self.instances;
            let kinds = &self.kinds;
            let inside: u128 = instances.iter().map(|i| i.nanos).sum();
            let t = Instant::now();
            agg.flush(&mut |kb, ws| feed(instances, ki, kinds, kb, ws));
            let all = t.elapsed().as_nanos();
            let algos: u128 = instances.iter().map(|i| i.nanos).sum::<u128>() - inside;
            *nanos += all.saturating_sub(algos);
        }
    }

    fn end_epoch(&mut self) {
        self.flush();
        self.flush_accel();
        if self.truth.first().map_or(0, |t| t.packets) == 0 {
            return;
        }
        let mut tasks = vec![];
        for m in &self.measures {
            let ki = self.kinds.iter().position(|&k| k == m.kind).unwrap_or(0);
            let inst = &self.instances[m.instance];
            tasks.push(evaluate(
                m,
                inst,
                &self.truth[ki],
                self.prev_truth[ki].as_ref(),
                &self.cfg,
            ));
        }
        let t0 = &self.truth[0];
        let kind0 = self.kinds.iter().position(|&k| k == self.cfg.key);
        self.epochs.push(EpochReport {
            index: t0.index,
            packets: t0.packets,
            bytes: t0.bytes,
            flows: kind0.map_or(t0.flows.len(), |i| self.truth[i].flows.len()) as u64,
            tasks,
        });
        self.totals.epochs += 1;
        for inst in &mut self.instances {
            if inst.wants_prev {
                inst.prev = Some(inst.algo.clone_box());
            }
            inst.algo.reset();
        }
        for (t, p) in self.truth.iter_mut().zip(&mut self.prev_truth) {
            let idx = t.index;
            *p = Some(std::mem::replace(t, EpochTruth::new(idx)));
        }
    }

    /// The epochs completed so far (a live run reports each as it closes).
    pub fn completed_epochs(&self) -> &[EpochReport] {
        &self.epochs
    }

    pub fn config(&self) -> &RunConfig {
        &self.cfg
    }

    pub fn trace_name(&self) -> &str {
        &self.trace
    }

    /// The epoch length as the report prints it (`2000000 packets`, `1000 ms`).
    pub fn epoch_label(&self) -> String {
        match self.cfg.epoch() {
            Ok(truth::EpochSpec::Packets(n)) => format!("{n} packets"),
            Ok(truth::EpochSpec::Millis(ms)) => format!("{ms} ms"),
            Err(_) => String::new(),
        }
    }

    pub fn finish(mut self) -> Report {
        self.end_epoch();
        let seconds = self.started.elapsed().as_secs_f64();
        let keyed = self.totals.ipv4 + self.totals.ipv6;
        let throughput = self
            .instances
            .iter()
            .map(|i| {
                // Per keyed packet, not per update: behind Agg-Evict an algorithm gets fewer
                // updates than packets, and the per-packet figure is the one to compare.
                let ns = i.nanos as f64 / keyed.max(1) as f64;
                Cost {
                    algorithm: i.name.clone(),
                    key: i.kind,
                    memory_bytes: i.algo.memory_bytes(),
                    updates: i.updates,
                    seconds: i.nanos as f64 / 1e9,
                    ns_per_packet: ns,
                    ns_per_update: i.nanos as f64 / i.updates.max(1) as f64,
                    mpps: if ns > 0.0 { 1e3 / ns } else { 0.0 },
                    skipped: i.skipped,
                }
            })
            .collect();
        let accelerators = self
            .aggs
            .iter()
            .zip(&self.kinds)
            .map(|((a, nanos), &kind)| {
                let st = a.stats();
                AccelCost {
                    accel: "agg_evict",
                    key: kind,
                    simd: a.simd().to_string(),
                    memory_bytes: a.memory_bytes(),
                    packets: st.packets,
                    evicted: st.evicted,
                    evicted_share: st.evicted_share(),
                    seconds: *nanos as f64 / 1e9,
                    ns_per_packet: *nanos as f64 / st.packets.max(1) as f64,
                }
            })
            .collect();
        let epoch = self.epoch_label();
        Report {
            trace: self.trace,
            key: self.cfg.key,
            weight: self.cfg.weight,
            epoch,
            seed: self.cfg.seed,
            batch: self.cfg.batch,
            epochs: self.epochs,
            mpps: self.totals.packets as f64 / seconds / 1e6,
            totals: self.totals,
            seconds,
            throughput,
            accel: self.cfg.accel.name(),
            accelerators,
        }
    }
}

/// Hand a batch of updates of key kind `kinds[ki]` to every instance on that kind, timing each.
fn feed(
    instances: &mut [Instance],
    ki: usize,
    kinds: &[KeyKind],
    batch: KeyBatch<'_>,
    weights: &[u64],
) {
    let kind = kinds[ki];
    let n = batch.len().min(weights.len());
    for inst in instances.iter_mut().filter(|i| i.kind == kind) {
        let (fit, key_len) = (inst.fit, inst.key_len);
        match batch {
            KeyBatch::U32(keys) if fit.accepts(4, key_len) => {
                let t = Instant::now();
                inst.algo.update_batch_u32(&keys[..n], &weights[..n]);
                inst.nanos += t.elapsed().as_nanos();
                inst.updates += n as u64;
            }
            KeyBatch::U32(_) => inst.skipped += n as u64,
            KeyBatch::Keys(keys)
                if fit != Fit::Any && keys.iter().any(|k| !fit.accepts(k.len(), key_len)) =>
            {
                inst.keys.clear();
                inst.weights.clear();
                for (k, &w) in keys.iter().zip(weights) {
                    if fit.accepts(k.len(), key_len) {
                        inst.keys.push(*k);
                        inst.weights.push(w);
                    } else {
                        inst.skipped += 1;
                    }
                }
                let t = Instant::now();
                inst.algo.update_batch(&inst.keys, &inst.weights);
                inst.nanos += t.elapsed().as_nanos();
                inst.updates += inst.keys.len() as u64;
            }
            KeyBatch::Keys(keys) => {
                let t = Instant::now();
                inst.algo.update_batch(&keys[..n], &weights[..n]);
                inst.nanos += t.elapsed().as_nanos();
                inst.updates += n as u64;
            }
        }
    }
}

/// Resolve a threshold that is a fraction (< 1) of `base` or an absolute value (>= 1).
fn resolve(t: f64, base: f64) -> u64 {
    if t < 1.0 {
        (t * base).ceil().max(1.0) as u64
    } else {
        t.ceil() as u64
    }
}

fn listed(v: &[(FlowKey, u64)], n: usize) -> Vec<Listed> {
    let mut v = v.to_vec();
    v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.into_iter()
        .take(n)
        .map(|(k, e)| Listed {
            key: k.to_string(),
            estimate: e,
        })
        .collect()
}

fn blank(m: &Measure) -> TaskResult {
    TaskResult {
        task: m.spec.task,
        algorithm: m.spec.algorithm.clone(),
        key: m.kind,
        threshold: None,
        answer: Answer::default(),
        truth: Exact::default(),
        accuracy: Accuracy::default(),
        note: None,
    }
}

/// Set-task accuracy: precision/recall/F1 of the keys, ARE of the reported true positives, and
/// the relative error over all true instances with the algorithm's point estimate when it has one.
fn set_result(
    r: &mut TaskResult,
    reported: &[(FlowKey, u64)],
    truth: &KeyMap<u64>,
    point: Option<&dyn Algorithm>,
) {
    let rep: KeySet = reported.iter().map(|e| e.0).collect();
    let tru: KeySet = truth.keys().copied().collect();
    let (p, rc, f1) = set_accuracy(&rep, &tru);
    r.accuracy.precision = Some(p);
    r.accuracy.recall = Some(rc);
    r.accuracy.f1 = Some(f1);
    r.accuracy.are = are_of(reported, truth);
    r.answer.reported = Some(reported.len() as u64);
    r.truth.count = Some(truth.len() as u64);
    if let Some(a) = point {
        let errs: Option<Vec<f64>> = truth
            .iter()
            .map(|(k, &v)| a.flow_size(k).map(|e| rel_err(v as f64, e as f64)))
            .collect();
        if let Some(errs) = errs {
            if !errs.is_empty() {
                r.accuracy.relative_error = Some(errs.iter().sum::<f64>() / errs.len() as f64);
            }
        }
    }
}

fn evaluate(
    m: &Measure,
    inst: &Instance,
    truth: &EpochTruth,
    prev_truth: Option<&EpochTruth>,
    cfg: &RunConfig,
) -> TaskResult {
    let a = inst.algo.as_ref();
    let w = cfg.weight;
    let mut r = blank(m);
    // Algorithms with point queries also get the relative error over every true instance.
    let point_ref = a.tasks().contains(&Task::FlowSize).then_some(a);
    match m.spec.task {
        Task::HeavyHitters => {
            let t = resolve(
                m.spec.threshold.unwrap_or(DEFAULT_HH),
                truth.total(w) as f64,
            );
            r.threshold = Some(t as f64);
            let rep = a.heavy_hitters(t).unwrap_or_default();
            let tru: KeyMap<u64> = truth
                .sizes(w)
                .filter(|&(_, s)| s >= t)
                .map(|(k, s)| (*k, s))
                .collect();
            set_result(&mut r, &rep, &tru, point_ref);
            r.answer.keys = listed(&rep, cfg.listed);
        }
        Task::HeavyChangers => {
            let (Some(prev), Some(pt)) = (inst.prev.as_deref(), prev_truth) else {
                r.note = Some("first epoch: no previous epoch to compare with".into());
                return r;
            };
            // |s_t - s_(t-1)| over the union of both epochs' flows (absent = 0).
            let mut change: KeyMap<u64> = KeyMap::default();
            for (k, s) in truth.sizes(w) {
                change.insert(*k, s);
            }
            for (k, s) in pt.sizes(w) {
                let e = change.entry(*k).or_insert(0);
                *e = e.abs_diff(s);
            }
            let total: u64 = change.values().sum();
            let t = resolve(m.spec.threshold.unwrap_or(DEFAULT_HC), total as f64);
            r.threshold = Some(t as f64);
            let rep = a.heavy_changers(prev, t).unwrap_or_default();
            let tru: KeyMap<u64> = change.into_iter().filter(|&(_, c)| c >= t).collect();
            set_result(&mut r, &rep, &tru, None);
            r.answer.keys = listed(&rep, cfg.listed);
        }
        Task::Superspreaders | Task::Ddos => {
            // Exact distinct peers per host from the pair table.
            let by_src = m.spec.task == Task::Superspreaders;
            let mut peers: KeyMap<u64> = KeyMap::default();
            let mut peer_side = KeySet::default();
            for k in truth.flows.keys() {
                let (h, p) = if by_src {
                    (k.src_part(), k.dst_part())
                } else {
                    (k.dst_part(), k.src_part())
                };
                if let (Some(h), Some(p)) = (h, p) {
                    *peers.entry(h).or_insert(0) += 1;
                    peer_side.insert(p);
                }
            }
            let t = resolve(
                m.spec.threshold.unwrap_or(DEFAULT_SPREAD),
                peer_side.len() as f64,
            );
            r.threshold = Some(t as f64);
            let rep = a.spreaders(t).unwrap_or_default();
            let tru: KeyMap<u64> = peers.into_iter().filter(|&(_, c)| c > t).collect();
            set_result(&mut r, &rep, &tru, None);
            r.answer.keys = listed(&rep, cfg.listed);
        }
        Task::Cardinality => {
            let est = a.cardinality().unwrap_or(f64::NAN);
            let tv = truth.flows.len() as f64;
            r.answer.estimate = Some(est);
            r.truth.value = Some(tv);
            r.accuracy.relative_error = Some(rel_err(tv, est));
        }
        Task::Entropy => {
            let est = a.entropy().unwrap_or(f64::NAN);
            let tv = algo::entropy_of(truth.sizes(w).map(|(_, s)| s));
            r.answer.estimate = Some(est);
            r.truth.value = Some(tv);
            r.accuracy.relative_error = Some(rel_err(tv, est));
        }
        Task::FlowSizeDistribution => {
            // In packets: EM over byte values is intractable (ALGORITHMS.md 1).
            let est = a.flow_size_distribution().unwrap_or_default();
            let tv = algo::size_histogram(truth.sizes(Weight::Packets).map(|(_, s)| s));
            r.answer.estimate = Some(est.iter().sum());
            r.truth.value = Some(tv.iter().sum());
            r.answer.fsd_head = (1..=10)
                .map(|i| est.get(i).copied().unwrap_or(0.0))
                .collect();
            r.accuracy.mrd = Some(mrd(&tv, &est));
        }
        Task::TopK => {
            let k = m.spec.k.unwrap_or(DEFAULT_K);
            r.threshold = Some(k as f64);
            let rep = a.top_k(k).unwrap_or_default();
            let ranked = truth.ranked(w);
            // Ties at the k-th size: any flow as large as the k-th largest is a correct member.
            let kth = ranked
                .get(k.min(ranked.len()).saturating_sub(1))
                .map_or(0, |e| e.1);
            let sizes: KeyMap<u64> = ranked.iter().copied().collect();
            let hits = rep
                .iter()
                .filter(|(key, _)| sizes.get(key).is_some_and(|&s| s >= kth && s > 0))
                .count() as f64;
            let want = k.min(ranked.len()) as f64;
            let p = if rep.is_empty() {
                0.0
            } else {
                hits / rep.len() as f64
            };
            let rc = if want == 0.0 {
                1.0
            } else {
                (hits / want).min(1.0)
            };
            r.accuracy.precision = Some(p);
            r.accuracy.recall = Some(rc);
            r.accuracy.f1 = Some(if p + rc > 0.0 {
                2.0 * p * rc / (p + rc)
            } else {
                0.0
            });
            r.accuracy.are = are_of(&rep, &sizes);
            r.answer.reported = Some(rep.len() as u64);
            r.truth.count = Some(want as u64);
            r.answer.keys = listed(&rep, cfg.listed);
        }
        Task::FlowSize => {
            let mut acc = 0.0;
            let mut n = 0u64;
            for (k, s) in truth.sizes(w) {
                let e = a.flow_size(k).unwrap_or(0);
                acc += rel_err(s as f64, e as f64);
                n += 1;
            }
            r.answer.reported = Some(n);
            if n > 0 {
                r.accuracy.relative_error = Some(acc / n as f64);
                r.accuracy.are = r.accuracy.relative_error;
            }
        }
    }
    r
}
