//! The one-pass runner: keyed packets in, per-epoch answers with their accuracy out.
//!
//! Every (task, algorithm) pair of a run is a [`MeasureSpec`]; pairs that name the same algorithm
//! with the same key kind, side and parameters share one instance, so the update cost of
//! `count_min` answering both heavy hitters and flow sizes is paid once. Packets reach the
//! algorithms in batches (`RunConfig::batch`), and each instance's update time is measured per
//! batch, so the report can give every algorithm its own ns/packet from the same pass. The
//! clock's own cost is not the algorithm's: the runner measures what one timed region costs
//! with nothing in it ([`clock_overhead_ns`]) and subtracts it once per timed batch.
//!
//! Ground truth is exact per-flow counts per key kind (`truth`), kept for the current and the
//! previous epoch (heavy changers compare the two).

use std::time::Instant;

use algo::{Algorithm, BuildCtx, Change, KeyBatch, Side, Task};
use key::{FlowKey, KeyKind, Tuple};
use truth::{Clock, EpochTruth, Ewma};

use crate::answer::{Answers, Job, Shape, Spent, States};
use crate::config::{ConfigError, MeasureSpec, RunConfig};
use crate::instance::{Instance, Measure, Peers, UpdateSpent};
use crate::plane::{fronts_for, Plane};
use crate::report::{
    AccelCost, Cost, Coverage, EpochCover, EpochReport, PartialReason, Report, Totals, Warning,
};
use crate::workers::{Pool, WorkerFailure, ANSWERS};

/// Most idle snapshots written for one gap in the traffic (a trace's timestamps jumping by
/// days at 1 ms epochs would write millions): the latest this many epochs of it.
pub const MAX_IDLE_GAP: u64 = 1024;

/// The running measurement: push packets, then `finish`.
pub struct Runner {
    cfg: RunConfig,
    /// Per instance, the tasks it answers (the cost table's `tasks`).
    instance_tasks: Vec<Vec<Task>>,
    clock: Clock,
    kinds: Vec<KeyKind>,
    truth: Vec<EpochTruth>,
    /// With one worker, what measures; with several, where their merged state is answered from
    /// (and the costs and counters summed at the end).
    plane: Plane,
    /// The workers, when there are several.
    pool: Option<Pool>,
    /// The failure of the earliest epoch (`fail`): the run stops measuring and `try_finish`
    /// reports it.
    failure: Option<WorkerFailure>,
    /// Without ground truth, when a spreader task asks: the spreader base's part of the packets
    /// the fast path measures alone (the planes keep the rest's, `Plane::peers`).
    peers: Option<Peers>,
    /// The open epoch is cut short (`interrupt`): the next epoch end marks it partial.
    interrupted: bool,
    /// The capture's start by the first [`Runner::advance_to`] (`netsift live`; a trace's run
    /// starts at its first packet): the first epoch of a time grid that began before it is
    /// partial ([`PartialReason::StartedMidEpoch`]).
    started_ns: Option<u64>,
    /// The latest [`Runner::advance_to`]: where an interrupted capture ended, if after its last
    /// packet.
    seen_ns: u64,
    /// With snapshots: the first epoch this run was in (its first packet's, or its first
    /// [`Runner::advance_to`]'s). Time epochs from it on that pass without a packet get an
    /// idle snapshot ([`crate::snap::write_idle`]); the ones before (the Unix-time grid's
    /// epochs since 1970, [`Runner::align_epochs`]) do not.
    idle_from: Option<u64>,
    /// The answer thread: epochs are answered there while the next one is measured.
    answers: Option<Answers>,
    /// With workers: per instance, reset states from the answer thread for the workers' next
    /// swap (no copy of a state per epoch).
    stash: Vec<Vec<Box<dyn Algorithm>>>,
    batch_keys: Vec<Vec<FlowKey>>,
    /// Per kind, the batch's keys as big-endian u32 while every one of them is 4 bytes long
    /// (IPv4 source or destination): such a batch goes to `update_batch_u32`, 4 bytes a key
    /// instead of a 38-byte `FlowKey` (same state, `algo::Algorithm::update_batch_u32`).
    batch_u32: Vec<Vec<u32>>,
    /// No ground truth, no fast path, no `--instant` watch, and either Agg-Evict with one plane
    /// on this thread or workers that take whole packets: IPv4 packets are batched as packed
    /// tuples (`batch_v4`), one 16-byte store each. One plane: every kind's batch is
    /// `KeyBatch::V4` of them, which the aggregators read as the packed keys they hold, no
    /// `FlowKey` built or read per packet and kind. Workers: the batch is dispatched to them in
    /// one loop (`dispatch_v4`).
    packed: bool,
    /// While every packet of the batch so far is IPv4 (`packed`): their tuples. The first IPv6
    /// packet of a batch moves them into `batch_keys` ([`Runner::spill_v4`]).
    batch_v4: Vec<key::V4>,
    batch_weights: Vec<u64>,
    /// Whether the run gathers each packet's capture time for the instances that want it
    /// (`Algorithm::wants_time`, InstaMeasure's first/last times): only with no accelerator
    /// (the front hands batches on unchanged) and when some instance wants them; then
    /// `batch_ts` holds the batch's times (with workers, each part carries its own).
    times: bool,
    batch_ts: Vec<u64>,
    /// Wire lengths of a packed batch for workers that keep the ground truth (`packed`).
    batch_lens: Vec<u32>,
    epochs: Vec<EpochReport>,
    totals: Totals,
    started: Instant,
    /// What one empty timed region measures ([`clock_overhead_ns`]).
    clock_ns: f64,
    trace: String,
    /// What the run changed from what was asked (a default swapped for one that holds the keys).
    notes: Vec<String>,
    /// SketchVisor's data plane (`visor::recovered` answers from both paths): with a fast path, each packet is routed
    /// before it is dispatched, and one the normal path cannot take is measured by the fast path.
    visor: Option<visor::DataPlane>,
    /// The trace carries no timestamps (4- and 13-byte key traces): the FIFO model takes their
    /// arrival rate (`key_trace_mpps`) instead of capture time.
    untimed: bool,
    /// The packet's key per kind, for the fast path.
    keys: Vec<FlowKey>,
    /// `netsift merge`: where each epoch's states come from instead of the packet path.
    replay: Option<Replay>,
    /// `--instant`: the detections and exact crossings the planes sent (`crate::instant`).
    instant: Option<crate::instant::Log>,
    /// New thresholds and k per measure ([`Runner::retune`]), for the next epoch handed over.
    retuned: Option<Vec<(Option<f64>, Option<usize>)>>,
    /// Per instance, the largest update and query seconds of any epoch answered so far.
    epoch_most: Vec<(f64, f64)>,
}

/// `netsift merge`'s source of states: the epoch the packets pushed closed (index, packets,
/// bytes and time span, as a snapshot records them: the merge checks the truth against the
/// hosts') to the merged states of that epoch, one per instance in the runner's order (the
/// snapshots'), with the hosts' fast-path part merged (the answer thread recovers from it as in
/// `run`), or why there are none.
pub type Replay = Box<dyn FnMut(&snapshot::EpochSpan) -> Result<Replayed, String> + Send>;

/// One epoch of [`Replay`]: the merged normal-path states and, if any host had a fast path, the
/// merged paths and summaries per key kind.
pub type Replayed = (Vec<Box<dyn Algorithm>>, Option<visor::EpochPart>);

/// Keep the failure of the earliest epoch (the first seen among equals): a failing answer
/// thread stops taking the workers' hand-overs, and the workers stop in turn, later; the report
/// names the cause, not the consequence.
fn fail(slot: &mut Option<WorkerFailure>, f: WorkerFailure) {
    if slot.as_ref().is_none_or(|s| f.epoch < s.epoch) {
        *slot = Some(f);
    }
}

/// What an algorithm answering `spec` is built with in a run of `cfg`.
fn ctx_of(spec: &MeasureSpec, cfg: &RunConfig) -> BuildCtx {
    BuildCtx {
        seed: cfg.seed,
        key_len: kind_of(spec, cfg.key).len(cfg.ipv6),
        side: if spec.task == Task::Ddos {
            Side::Dst
        } else {
            Side::Src
        },
    }
}

/// Refuse a run whose structures would take more than `cfg.max_memory` bytes, before any is
/// allocated: each algorithm's memory from its catalog entry (computed from its parameters),
/// times the copies the rotation of states holds (measuring, being answered, the previous
/// epoch's for heavy changers; per worker), plus each key kind's aggregator.
/// The error names the largest parts and the budget.
fn check_memory<'a>(
    cfg: &RunConfig,
    // (entry, parameters, context, key kind, keeps the previous epoch for heavy changers)
    plans: impl Iterator<
        Item = (
            &'static algo::Entry,
            &'a toml::Table,
            &'a BuildCtx,
            KeyKind,
            bool,
        ),
    >,
    kinds: &[KeyKind],
) -> Result<(), ConfigError> {
    // (name and key kind, bytes, what names its largest parameter when the run is refused)
    type Part<'a> = (
        String,
        u64,
        Option<(&'static algo::Entry, &'a toml::Table, &'a BuildCtx)>,
    );
    let mut parts: Vec<Part<'a>> = vec![];
    for (entry, params, ctx, kind, keeps_prev) in plans {
        let bytes = entry
            .memory(params, ctx)
            .map_err(catalog::CatalogError::from)?;
        // The rotation of states (`answer.rs`): the one measuring and the one being answered
        // (with several workers: one measuring and one handed over per worker, and the reader's
        // own); a heavy-changers task keeps one more, the previous epoch's state.
        let workers = if cfg.workers > 1 {
            2 * cfg.workers as u64 + 1
        } else {
            2
        };
        // With a fast path, the answer thread answers from a recovered copy (`fastpath`).
        let recovers = cfg.sketchvisor.fast_path != visor::FastKind::None
            && cfg.sketchvisor.recover != visor::Method::None;
        let copies = workers + u64::from(keeps_prev) + u64::from(recovers);
        parts.push((
            format!("{} ({kind}", entry.name),
            bytes.saturating_mul(copies),
            Some((entry, params, ctx)),
        ));
    }
    if cfg.accel == front::Accel::AggEvict {
        for k in kinds {
            let b = aggevict::Aggregator::memory_for(&cfg.agg_evict, k.len(cfg.ipv6));
            // One per worker (and the reader's, unused, with several).
            let n = cfg.workers as u64 + u64::from(cfg.workers > 1);
            parts.push((format!("agg_evict ({k}"), b as u64 * n, None));
        }
    }
    if cfg.sketchvisor.fast_path != visor::FastKind::None {
        // One fast path per key kind, in the reader.
        let b = cfg.sketchvisor.fast_path_bytes as u64 * kinds.len() as u64;
        parts.push(("fast path (every kind".to_string(), b, None));
    }
    let total = parts.iter().fold(0u64, |a, p| a.saturating_add(p.1));
    let Some(budget) = cfg.max_memory else {
        return Ok(());
    };
    if total <= budget {
        return Ok(());
    }
    parts.sort_by_key(|p| std::cmp::Reverse(p.1));
    let largest: Vec<String> = parts
        .iter()
        .take(3)
        .map(|(n, b, plan)| {
            // Only for a refusal: which parameter makes the part large.
            let driver = plan
                .and_then(|(e, p, c)| memory_driver(e, p, c, e.memory(p, c).ok()?))
                .map(|(p, v)| format!(", mostly `{p} = {v}`"))
                .unwrap_or_default();
            format!("{n}{driver}) {}", crate::report::human_bytes(*b))
        })
        .collect();
    Err(ConfigError::Field {
        field: "max_memory",
        reason: format!(
            "the run's structures need {} ({}), more than the budget of {}; shrink their \
             parameters or raise --max-memory",
            crate::report::human_bytes(total),
            largest.join(", "),
            crate::report::human_bytes(budget)
        ),
    })
}

/// The parameter of `entry` (given in `params` or defaulted) whose halving saves the most of its
/// `bytes`, with its value: what a refusal for memory names. Computed with the entry's memory
/// function (nothing allocated); `None` when no integer parameter changes the size.
fn memory_driver(
    entry: &algo::Entry,
    params: &toml::Table,
    ctx: &BuildCtx,
    bytes: u64,
) -> Option<(String, i64)> {
    let mut all = (entry.defaults)();
    for (k, v) in params {
        all.insert(k.clone(), v.clone());
    }
    all.iter()
        .filter_map(|(k, v)| {
            let v = v.as_integer().filter(|&v| v > 1)?;
            let mut half = params.clone();
            half.insert(k.clone(), toml::Value::Integer(v / 2));
            let saved = bytes.saturating_sub(entry.memory(&half, ctx).ok()?);
            (saved > 0).then(|| (saved, k.clone(), v))
        })
        .max_by_key(|e| e.0)
        .map(|(_, k, v)| (k, v))
}

/// A task whose default algorithm cannot hold the run's keys (two_level and `--ipv6` pairs: 32
/// bytes) is answered by the next algorithm of the catalog that answers it and can; returns
/// what was swapped, for the report. Algorithms the user named are never swapped: their errors
/// stand.
fn fit_defaults(cfg: &mut RunConfig) -> Result<Vec<String>, ConfigError> {
    let mut notes = vec![];
    for i in 0..cfg.measures.len() {
        let spec = &cfg.measures[i];
        if !spec.by_default {
            continue;
        }
        let ctx = ctx_of(spec, cfg);
        // An entry's `memory` refuses exactly what its `build` refuses, without allocating.
        let holds = |name: &str| -> Result<(), catalog::CatalogError> {
            catalog::lookup(name)?.memory(&spec.params, &ctx)?;
            Ok(())
        };
        let Err(why) = holds(&spec.algorithm) else {
            continue;
        };
        let other = catalog::answering(spec.task)
            .into_iter()
            .filter(|&a| a != spec.algorithm)
            .find(|a| holds(a).is_ok());
        let Some(other) = other else {
            return Err(why.into());
        };
        notes.push(format!(
            "{}: {} cannot hold these keys ({why}); answered by {other}",
            spec.task, spec.algorithm
        ));
        let t = spec.task;
        // Every measure of this task that took the same default moves with it.
        for m in cfg
            .measures
            .iter_mut()
            .filter(|m| m.by_default && m.task == t)
        {
            m.algorithm = other.to_string();
        }
    }
    Ok(notes)
}

/// SketchVisor's data plane of a run, if it has a fast path (or a normal-path capacity, which
/// needs one: refused then). The FIFO model sits in the reader, before dispatch, for the whole
/// normal path: with N workers it drains at N times the per-worker `normal_capacity`.
fn visor_plane(
    cfg: &RunConfig,
    kinds: &[KeyKind],
) -> Result<Option<visor::DataPlane>, ConfigError> {
    let vc = &cfg.sketchvisor;
    if vc.fast_path == visor::FastKind::None && vc.normal_capacity.is_none() {
        return Ok(None);
    }
    let total = visor::VisorConfig {
        normal_capacity: vc.normal_capacity.map(|c| c * cfg.workers as f64),
        ..vc.clone()
    };
    let lens: Vec<usize> = kinds.iter().map(|k| k.len(cfg.ipv6)).collect();
    visor::DataPlane::new(&total, &lens, cfg.seed)
        .map(Some)
        .map_err(|e| ConfigError::Field {
            field: "sketchvisor",
            reason: e.to_string(),
        })
}

fn kind_of(m: &MeasureSpec, run_key: KeyKind) -> KeyKind {
    match m.task {
        Task::Superspreaders | Task::Ddos => KeyKind::Pair,
        _ => m.key.unwrap_or(run_key),
    }
}

impl Runner {
    pub fn new(mut cfg: RunConfig, trace: &str) -> Result<Runner, ConfigError> {
        let mut notes = cfg.notes.clone();
        notes.extend(cfg.drop_unmeasurable());
        cfg.validate()?;
        if let Some(p) = cfg.preset.take() {
            if let Some(n) = cfg.select_preset_measures(&p) {
                notes.push(n);
            }
            let mut set: Vec<String> = vec![];
            for m in &mut cfg.measures {
                let paper = catalog::presets::params(&p, &m.algorithm)?;
                if !paper.is_empty() {
                    let kv: Vec<String> = paper.iter().map(|(k, v)| format!("{k} = {v}")).collect();
                    let s = format!("{} ({})", m.algorithm, kv.join(", "));
                    if !set.contains(&s) {
                        set.push(s);
                    }
                }
                m.params = catalog::presets::apply(&p, &m.algorithm, &m.params)?;
            }
            notes.push(if set.is_empty() {
                format!("preset {p}: sets no parameter of the algorithms measured")
            } else {
                format!(
                    "preset {p}: its paper's parameters, under any given ones: {}",
                    set.join("; ")
                )
            });
            cfg.preset = Some(p);
        }
        notes.extend(fit_defaults(&mut cfg)?);
        let clock = Clock::new(cfg.epoch()?);
        let mut kinds: Vec<KeyKind> = vec![];
        let mut instances: Vec<Instance> = vec![];
        let mut measures = vec![];
        // Per instance: heavy changers compare with its previous epoch's state.
        let mut wants_prev: Vec<bool> = vec![];
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
        // First the plan: which instances, with which parameters and context; then the memory
        // they would take, checked against the budget before anything is allocated; then the
        // instances.
        struct Plan {
            entry: &'static algo::Entry,
            kind: KeyKind,
            params: toml::Table,
            built: toml::Table,
            ctx: BuildCtx,
        }
        let mut plans: Vec<Plan> = vec![];
        for spec in &cfg.measures {
            let kind = kind_of(spec, cfg.key);
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
            let ctx = ctx_of(spec, &cfg);
            let spreads = matches!(spec.task, Task::Superspreaders | Task::Ddos);
            let found = plans.iter().position(|p| {
                p.entry.name == spec.algorithm
                    && p.kind == kind
                    && (!spreads || p.ctx.side == ctx.side)
                    && p.params == spec.params
            });
            let instance = match found {
                Some(i) => i,
                None => {
                    let entry = catalog::lookup(&spec.algorithm)?;
                    let mut built = spec.params.clone();
                    if flow_size_only(spec) {
                        for (k, v) in entry.flow_size_only_params() {
                            built.entry(k).or_insert(v);
                        }
                    }
                    plans.push(Plan {
                        entry,
                        kind,
                        params: spec.params.clone(),
                        built,
                        ctx,
                    });
                    plans.len() - 1
                }
            };
            measures.push(Measure {
                spec: spec.clone(),
                kind,
                instance,
                ewma: None,
            });
        }
        check_memory(
            &cfg,
            plans.iter().enumerate().map(|(i, p)| {
                let keeps_prev = measures
                    .iter()
                    .any(|m| m.instance == i && m.spec.task == Task::HeavyChangers);
                (p.entry, &p.built, &p.ctx, p.kind, keeps_prev)
            }),
            &kinds,
        )?;
        for p in plans {
            let algo = p
                .entry
                .build(&p.built, &p.ctx)
                .map_err(catalog::CatalogError::from)?;
            instances.push(Instance::new(
                p.entry.name.to_string(),
                p.kind,
                p.ctx.key_len,
                algo,
                p.entry.fit,
                p.entry.resets_to_empty,
                {
                    let c = cfg
                        .preset
                        .as_deref()
                        .and_then(|n| catalog::presets::cost(n, p.entry.name))
                        .unwrap_or(p.entry.cost);
                    let ns = c.ns(p.ctx.key_len);
                    (ns, ns * c.behind)
                },
            ));
            wants_prev.push(false);
        }
        for m in &mut measures {
            let spec = &m.spec;
            let inst = &mut instances[m.instance];
            // The catalog knows what an algorithm answers by default; its configuration can
            // narrow that (Count-Min with `candidates = 0` answers flow size only).
            if !inst.algo.tasks().contains(&spec.task) {
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
                        inst.algo
                            .tasks()
                            .iter()
                            .map(|t| t.name())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
            if spec.task == Task::HeavyChangers {
                // Scored against the change the algorithm defines: the previous epoch (its
                // state then is kept) or its own EWMA prediction (an exact model is kept).
                match inst.algo.change_basis() {
                    Change::LastEpoch => wants_prev[m.instance] = true,
                    Change::Ewma { alpha } => m.ewma = Some(Ewma::new(alpha)),
                }
            }
        }
        let n = kinds.len();
        let (watch, instant) = crate::instant::plan(
            &cfg,
            &measures
                .iter()
                .map(|m| {
                    let ki = kinds.iter().position(|&k| k == m.kind).unwrap_or(0);
                    (m.spec.task, m.instance, m.spec.algorithm.clone(), ki)
                })
                .collect::<Vec<_>>(),
            &mut |i, t| instances[i].algo.arm_instant(t),
        )?
        .unzip();
        let times = cfg.accel == front::Accel::None && instances.iter().any(|i| i.wants_time);
        let spreads = cfg
            .measures
            .iter()
            .any(|m| matches!(m.task, Task::Superspreaders | Task::Ddos));
        let peers = (!cfg.truth && spreads).then(|| Peers::new(cfg.seed));
        let mut plane = Plane {
            kinds: kinds.clone(),
            fronts: fronts_for(&kinds, &cfg, &instances)?,
            instances,
            watch,
            // Spreader tasks (the only ones `peers` is kept for) are on pair keys.
            peers: peers.clone().and_then(|p| {
                let ki = kinds.iter().position(|&k| k == KeyKind::Pair)?;
                Some((ki, p))
            }),
        };
        let visor = visor_plane(&cfg, &kinds)?;
        let pool = if cfg.workers > 1 {
            // Every instance must merge the workers' states (an empty twin of itself, here:
            // the instance is still empty, so one copy does).
            for inst in &plane.instances {
                let mut probe = inst.algo.clone_box();
                if let Err(e) = probe.merge(inst.algo.as_ref()) {
                    return Err(ConfigError::Field {
                        field: "workers",
                        reason: format!(
                            "{} cannot merge the workers' states ({e}); run it with one worker",
                            inst.name
                        ),
                    });
                }
            }
            let planes = (0..cfg.workers)
                .map(|_| plane.twin(&cfg))
                .collect::<Result<Vec<_>, _>>()?;
            // A fast path routes each packet by its keys in the reader: key by key then.
            let whole = visor.is_none();
            Some(Pool::start(planes, &cfg, times, whole))
        } else {
            None
        };
        // States per instance in the rotation: those measuring (one, or one per worker), as
        // many handed over to be answered, and the previous epoch's for heavy changers.
        let measuring = cfg.workers as u16;
        for (i, &w) in plane.instances.iter_mut().zip(&wants_prev) {
            i.made = measuring;
            i.budget = 2 * measuring + u16::from(w);
        }
        let shape = plane
            .instances
            .iter()
            .zip(wants_prev)
            .map(|(i, wants_prev)| Shape {
                wants_prev,
                reusable: i.reusable,
                name: i.name.clone(),
                kind: i.kind,
            })
            .collect();
        let clock_ns = clock_overhead_ns();
        let mut instance_tasks: Vec<Vec<Task>> = vec![vec![]; plane.instances.len()];
        for m in &measures {
            if let Some(t) = instance_tasks.get_mut(m.instance) {
                t.push(m.spec.task);
            }
        }
        let answers = Answers::start(cfg.clone(), kinds.clone(), measures, shape, clock_ns);
        // With workers the reader keeps no truth of its own (they do, from the wire lengths
        // that go with the packets).
        let packed = visor.is_none()
            && plane.watch.is_none()
            && match &pool {
                Some(p) => p.takes_packets(),
                None => cfg.accel == front::Accel::AggEvict && !cfg.truth,
            };
        Ok(Runner {
            instance_tasks,
            visor,
            untimed: false,
            keys: Vec::with_capacity(n),
            answers: Some(answers),
            stash: (0..plane.instances.len()).map(|_| vec![]).collect(),
            plane,
            pool,
            failure: None,
            peers,
            interrupted: false,
            started_ns: None,
            seen_ns: 0,
            idle_from: None,
            batch_keys: vec![Vec::with_capacity(cfg.batch); n],
            batch_u32: vec![Vec::with_capacity(cfg.batch); n],
            packed,
            batch_v4: Vec::with_capacity(if packed { cfg.batch } else { 0 }),
            batch_weights: Vec::with_capacity(cfg.batch),
            times,
            batch_ts: Vec::with_capacity(if times { cfg.batch } else { 0 }),
            batch_lens: Vec::with_capacity(if packed && cfg.truth { cfg.batch } else { 0 }),
            truth: (0..n).map(|_| EpochTruth::new(0)).collect(),
            clock,
            kinds,
            epochs: vec![],
            totals: Totals::default(),
            started: Instant::now(),
            clock_ns,
            notes,
            trace: trace.to_string(),
            instant,
            cfg,
            replay: None,
            retuned: None,
            epoch_most: vec![],
        })
    }

    /// Account one packet that has no flow key (its class is counted, nothing else happens).
    pub fn push_unkeyed(&mut self, class: wire::Class, wire_len: u32) {
        self.totals.add(class, wire_len);
    }

    /// One keyed (IPv4/IPv6) packet.
    #[inline(always)]
    pub fn push(&mut self, ts_ns: u64, tuple: &Tuple, wire_len: u32) {
        // An IPv4 packet into a batch of packed tuples (`packed`): first, with nothing else to
        // ask (no fast path, no watch; workers only if they take whole packets, else no truth).
        // Inlined into the reading loop, the rest not: a call a packet saved and registers
        // spilled only where a packet needs more (issue 13, the reader-bound two workers).
        if self.packed && !tuple.v6 && self.batch_v4.len() == self.batch_weights.len() {
            self.totals.add(wire::Class::Ipv4, wire_len);
            self.tick(ts_ns);
            // Once for every kind, as with whole packets to workers (`end_epoch` copies it).
            self.truth[0].count(ts_ns, wire_len);
            self.batch_v4.push(key::V4::of(tuple));
            if self.cfg.truth {
                self.batch_lens.push(wire_len);
            }
            self.end_packet(ts_ns, self.cfg.weight.of(wire_len));
            return;
        }
        self.push_keyed(ts_ns, tuple, wire_len);
    }

    /// [`Runner::push`] of a packet that is not a packed IPv4 one.
    #[inline(never)]
    fn push_keyed(&mut self, ts_ns: u64, tuple: &Tuple, wire_len: u32) {
        let class = if tuple.v6 {
            wire::Class::Ipv6
        } else {
            wire::Class::Ipv4
        };
        self.totals.add(class, wire_len);
        self.tick(ts_ns);
        let w = self.cfg.weight.of(wire_len);
        if let Some(dp) = &mut self.visor {
            self.keys.clear();
            self.keys.extend(self.kinds.iter().map(|&k| tuple.key(k)));
            let ts = (!self.untimed).then_some(ts_ns);
            if dp.route(ts, u64::from(wire_len), &self.keys, w) == visor::Path::Fast {
                // Measured by the fast path alone; the truth and the spreaders' base count it
                // as any other packet (with workers, in the reader's table, added to the
                // workers' flows at the epoch's end: `EpochTruth::settle`).
                for (i, k) in self.keys.iter().enumerate() {
                    if let (KeyKind::Pair, Some(p)) = (self.kinds[i], &mut self.peers) {
                        p.add(k);
                    }
                    if self.cfg.truth {
                        self.truth[i].add(ts_ns, *k, wire_len);
                    } else {
                        self.truth[i].count(ts_ns, wire_len);
                    }
                }
                return;
            }
        }
        if !self.batch_v4.is_empty() {
            self.spill_v4();
        }
        if let Some(pool) = self.pool.as_mut().filter(|p| p.takes_packets()) {
            // The packet whole to its worker, which builds its keys (`Pool::put_packet`);
            // the reader counts the epoch's totals only, once: every kind counts the same
            // packets, and the first kind's totals are copied to the others at the epoch's end
            // (`end_epoch`).
            self.truth[0].count(ts_ns, wire_len);
            if self.failure.is_none() {
                let ts = (!self.untimed).then_some(ts_ns);
                if let Err(f) = pool.put_packet(tuple, w, wire_len, ts) {
                    fail(&mut self.failure, f.in_epoch(self.truth[0].index));
                }
            }
        }
        // Otherwise key by key: to its worker, or to the runner's own batch.
        let by_key = self.pool.as_ref().is_none_or(|p| !p.takes_packets());
        for (i, &kind) in self.kinds.iter().enumerate().filter(|_| by_key) {
            // With a fast path the keys are built already (`self.keys`).
            let k = match self.visor {
                Some(_) => self.keys[i],
                None => tuple.key(kind),
            };
            match &mut self.pool {
                // Each key straight to its worker's part (no batch in between). Each worker
                // keeps the exact counts of the flows it is given (merged at the epoch's end);
                // the reader counts the epoch's totals only.
                Some(pool) => {
                    self.truth[i].count(ts_ns, wire_len);
                    if self.failure.is_none() {
                        // A trace without times gives none (the instances record no times).
                        let ts = (!self.untimed).then_some(ts_ns);
                        if let Err(f) = pool.put(i, k, w, wire_len, ts) {
                            fail(&mut self.failure, f.in_epoch(self.truth[0].index));
                        }
                    }
                }
                None => {
                    let counts = if self.cfg.truth {
                        Some(self.truth[i].add(ts_ns, k, wire_len))
                    } else {
                        self.truth[i].count(ts_ns, wire_len);
                        None
                    };
                    if let Some(watch) = self.plane.watch.as_mut().filter(|x| x.ki == i) {
                        watch.packet(ts_ns, &k, counts.map(|c| (c, w)));
                    }
                    self.batch_keys[i].push(k);
                    // All 4-byte keys: the batch goes the u32 path.
                    if k.len() == 4 {
                        self.batch_u32[i].push(k.prefix_u32());
                    }
                }
            }
        }
        self.end_packet(ts_ns, w);
    }

    /// The clock's tick for a packet at `ts_ns`: the epoch it opens, if any, after the last.
    #[inline(always)]
    fn tick(&mut self, ts_ns: u64) {
        let (index, new) = self.clock.tick(ts_ns);
        if new {
            self.next_epoch(index);
        }
        self.idle_from.get_or_insert(index);
    }

    #[cold]
    #[inline(never)]
    fn next_epoch(&mut self, index: u64) {
        // Before `end_epoch`, which hands the epoch's truth (and its index) on.
        let closed = self.truth[0].index;
        self.end_epoch();
        self.idle_gap(closed, index);
        for t in &mut self.truth {
            t.index = index;
        }
    }

    /// The packet's weight and time into the batch; a full batch is flushed.
    #[inline(always)]
    fn end_packet(&mut self, ts_ns: u64, w: u64) {
        self.batch_weights.push(w);
        if self.times && !self.untimed {
            self.batch_ts.push(ts_ns);
        }
        if self.batch_weights.len() == self.cfg.batch {
            self.flush();
        }
    }

    /// An IPv6 packet in a batch of packed IPv4 tuples: the batch so far becomes each kind's
    /// keys, as `push` would have built them, and the rest of the batch is keyed as usual.
    #[cold]
    fn spill_v4(&mut self) {
        if self.pool.is_some() {
            // With workers: the batch so far goes to them, before this packet.
            self.dispatch_v4();
            self.batch_weights.clear();
            self.batch_ts.clear();
            self.batch_lens.clear();
            return;
        }
        for (i, &kind) in self.kinds.iter().enumerate() {
            let v4 = self.batch_v4.iter();
            self.batch_keys[i].extend(v4.clone().map(|v| v.key(kind)));
            if kind.len(false) == 4 {
                self.batch_u32[i].extend(v4.map(|v| v.u32_key(kind)));
            }
        }
        self.batch_v4.clear();
    }

    /// A packed batch (`packed` with workers) to the workers, packet by packet to the worker
    /// each belongs to (`Pool::put_v4s`); the batch of tuples is emptied.
    fn dispatch_v4(&mut self) {
        if let Some(pool) = self.pool.as_mut().filter(|_| !self.batch_v4.is_empty()) {
            if self.failure.is_none() {
                let n = self.batch_v4.len();
                let ts = self.batch_ts.get(..n).unwrap_or(&[]);
                let ws = &self.batch_weights[..n];
                if let Err(f) = pool.put_v4s(&self.batch_v4, ws, ts, &self.batch_lens) {
                    fail(&mut self.failure, f.in_epoch(self.truth[0].index));
                }
            }
            self.batch_v4.clear();
        }
    }

    /// Whether [`Runner::push_keys4`] may take this run's packets: one key kind, `src`, and
    /// nothing that wants more of a packet than its key (no fast path, no `--instant` watch).
    pub fn takes_keys4(&self) -> bool {
        self.kinds == [KeyKind::Src] && self.visor.is_none() && self.plane.watch.is_none()
    }

    /// A block of `keys4` records (`trace::Capture::for_each_keys4`: IPv4 source addresses as
    /// big-endian u32, no timestamp, wire length 0), each counted as [`Runner::push`] counts
    /// one such record: same epochs, totals, truth, dispatch and states, with the keys handed
    /// to the u32 batch path (and to workers) as they are, no `Tuple` or `FlowKey` per packet
    /// (issue 14). Only when [`Runner::takes_keys4`], and for every packet of the run (a batch
    /// holds keys of one form).
    pub fn push_keys4(&mut self, keys: &[u32]) {
        debug_assert!(self.takes_keys4());
        let w = self.cfg.weight.of(0);
        let mut rest = keys;
        while !rest.is_empty() {
            // The chunk's first packet may open an epoch; the chunk then runs to the epoch's
            // end, the batch's end or the block's, whichever comes first.
            let (index, new) = self.clock.tick(0);
            if new {
                self.end_epoch();
                for t in &mut self.truth {
                    t.index = index;
                }
            }
            let batch_room = self.cfg.batch - self.batch_weights.len() - 1;
            let room = self.clock.room().min(batch_room as u64);
            let m = 1 + (rest.len() - 1).min(usize::try_from(room).unwrap_or(usize::MAX));
            self.clock.tick_more((m - 1) as u64);
            self.batch_weights.resize(self.batch_weights.len() + m, w);
            let (chunk, later) = rest.split_at(m);
            rest = later;
            self.totals.add_ipv4(m as u64, 0);
            match &mut self.pool {
                Some(pool) => {
                    self.truth[0].count_n(0, m as u64, 0);
                    for &v in chunk {
                        if self.failure.is_some() {
                            break;
                        }
                        if let Err(f) = pool.put_u32(0, v, w, 0) {
                            fail(&mut self.failure, f.in_epoch(self.truth[0].index));
                        }
                    }
                }
                None => {
                    if self.cfg.truth {
                        for &v in chunk {
                            self.truth[0].add(0, FlowKey::from_u32(v), 0);
                        }
                    } else {
                        self.truth[0].count_n(0, m as u64, 0);
                    }
                    self.batch_u32[0].extend_from_slice(chunk);
                }
            }
            if self.batch_weights.len() >= self.cfg.batch {
                self.flush();
            }
        }
    }

    #[inline(never)]
    fn flush(&mut self) {
        if self.batch_weights.is_empty() {
            return;
        }
        if self.pool.is_some() {
            // With workers the keys went to their parts as they came (`push`), or go now,
            // packed (`dispatch_v4`): the batch is otherwise only a count of packets.
            self.dispatch_v4();
        }
        let weights = &self.batch_weights;
        if !self.batch_v4.is_empty() {
            // Packed tuples, every packet of the batch (`push`): each kind reads its keys in them.
            for (ki, &kind) in self.kinds.iter().enumerate() {
                let batch = KeyBatch::V4(&self.batch_v4, kind);
                self.plane.feed(ki, batch, weights, &self.batch_ts);
            }
        }
        let keyed = self.batch_v4.is_empty();
        for (ki, (keys, narrow)) in self.batch_keys.iter().zip(&self.batch_u32).enumerate() {
            // All 4-byte keys: the u32 path (from `push`, or `push_keys4`'s u32 keys alone);
            // otherwise (wider kinds, or an IPv6 key in an IPv4 source batch) the FlowKeys.
            let batch = if narrow.len() == weights.len() {
                KeyBatch::U32(narrow)
            } else {
                KeyBatch::Keys(keys)
            };
            // With workers the keys went to their parts as they came (`push`); the batch is
            // then only a count of packets.
            if self.pool.is_none() && keyed {
                self.plane.feed(ki, batch, weights, &self.batch_ts);
            }
        }
        for b in &mut self.batch_keys {
            b.clear();
        }
        for b in &mut self.batch_u32 {
            b.clear();
        }
        self.batch_v4.clear();
        self.batch_weights.clear();
        self.batch_ts.clear();
        self.batch_lens.clear();
        // Once a batch: the epochs answered meanwhile become visible (`completed_epochs`).
        self.collect_answers();
        if let Some(l) = &mut self.instant {
            l.poll(self.truth[0].index);
        }
    }

    /// Epoch end: the finished epoch goes to the answer thread (`crate::answer`) and the packet
    /// path goes on with empty states. With workers, each flushes and hands its state over to
    /// the answer thread, which merges them; the reader does not wait for them.
    fn end_epoch(&mut self) {
        self.flush();
        let epoch = self.truth[0].index;
        if self.truth[0].packets == 0 && self.idle_due().is_some_and(|f| epoch >= f) {
            // A time epoch without traffic (an idle link) this run was in: its idle snapshot.
            self.write_idle(epoch);
        }
        if self.truth[0].packets == 0 || self.failure.is_some() {
            return;
        }
        // Before the epoch's truth is handed on.
        let cover = self.cover(epoch);
        let states = match &mut self.pool {
            Some(pool) => match pool.end_epoch({
                // The answer thread's reset states, one per worker and instance, for the
                // workers' swap; a worker given none copies its own (counted in `made`). With
                // every state of the rotation made, wait for the answer thread instead.
                let (stash, w) = (&mut self.stash, pool.len());
                let insts = &mut self.plane.instances;
                let answers = self.answers.as_ref();
                for (i, s) in answers.iter().flat_map(|a| a.spares()) {
                    stash[i].push(s);
                }
                for i in 0..insts.len() {
                    if !insts[i].reusable {
                        continue;
                    }
                    while stash[i].len() < w && insts[i].made >= insts[i].budget {
                        let Some((j, s)) = answers.and_then(Answers::next_spare) else {
                            break;
                        };
                        stash[j].push(s);
                    }
                    let copies = w.saturating_sub(stash[i].len()) as u16;
                    insts[i].made = insts[i].made.saturating_add(copies);
                }
                stash
            }) {
                Ok(rx) => {
                    if let Some(l) = &mut self.instant {
                        l.end_epoch(epoch);
                    }
                    States::Workers(rx)
                }
                Err(f) => {
                    fail(&mut self.failure, f.in_epoch(epoch));
                    return;
                }
            },
            None => {
                self.plane.flush_fronts();
                if let (Some(w), Some(l)) = (&mut self.plane.watch, &mut self.instant) {
                    w.end_epoch();
                    l.end_epoch(epoch);
                }
                let answers = self.answers.as_ref();
                let insts = &mut self.plane.instances;
                for (i, s) in answers.iter().flat_map(|a| a.spares()) {
                    insts[i].spare = Some(s);
                }
                for i in 0..insts.len() {
                    let inst = &insts[i];
                    if !inst.reusable || inst.spare.is_some() || inst.made < inst.budget {
                        continue;
                    }
                    // Every state of this instance is in use: wait for the answer thread.
                    while let Some((j, s)) = answers.and_then(Answers::next_spare) {
                        insts[j].spare = Some(s);
                        if j == i {
                            break;
                        }
                    }
                }
                States::Ready(
                    self.plane
                        .instances
                        .iter_mut()
                        .map(|i| (i.swap_out(), i.epoch_spent()))
                        .collect(),
                )
            }
        };
        // `netsift merge`: the snapshots' merged states are answered, not the packet path's.
        let mut replayed_fast = None;
        let seen = crate::snap::span_of(self.truth.first());
        let states = match self.replay.as_mut().map(|f| f(&seen)) {
            None => states,
            Some(Ok((s, fast))) => {
                replayed_fast = Some(fast);
                // Merged snapshots answered; the costs stay those of the packet path's
                // epoch (its plane measured the same packets), as the run's cost table counts.
                let spent: Vec<UpdateSpent> = match &states {
                    States::Ready(v) => v.iter().map(|(_, u)| *u).collect(),
                    States::Workers(_) => vec![],
                };
                let spent = spent
                    .into_iter()
                    .chain(std::iter::repeat(UpdateSpent::default()));
                States::Ready(s.into_iter().zip(spent).collect())
            }
            Some(Err(message)) => {
                fail(
                    &mut self.failure,
                    WorkerFailure {
                        worker: crate::ANSWERS,
                        epoch,
                        message,
                    },
                );
                return;
            }
        };
        // The reader's part (fast path) and, with one plane, the plane's; the workers' parts
        // come with their hand-overs.
        let peers = self.peers.as_mut().map(|p| {
            let mut part = p.take();
            if let Some((_, mine)) = self.plane.peers.as_mut().filter(|_| self.pool.is_none()) {
                part.merge(&mine.take());
            }
            part
        });
        if self.packed || self.pool.as_ref().is_some_and(Pool::takes_packets) {
            // Counted once in `push` (every kind counts every packet: an IPv6 packet keyed
            // kind by kind in a packed run is counted in the first kind too).
            if let Some((first, rest)) = self.truth.split_first_mut() {
                for t in rest {
                    (t.packets, t.bytes) = (first.packets, first.bytes);
                    (t.first_ns, t.last_ns) = (first.first_ns, first.last_ns);
                }
            }
        }
        let mut fresh = self
            .answers
            .as_ref()
            .and_then(Answers::truth_tables)
            .unwrap_or_default()
            .into_iter();
        let truth = self
            .truth
            .iter_mut()
            .map(|t| {
                let next = fresh.next().unwrap_or_default();
                std::mem::replace(t, next)
            })
            .collect();
        let job = Job {
            states,
            truth,
            cover,
            peers,
            retune: self.retuned.take(),
            fast: match replayed_fast {
                Some(f) => f,
                None => self.visor.as_mut().map(visor::DataPlane::end_epoch),
            },
        };
        self.totals.epochs += 1;
        if self.answers.as_mut().is_none_or(|a| a.send(job).is_err()) {
            // The answer thread stopped: its failure is among its reports.
            self.stop_answers();
        }
    }

    /// Move the reports the answer thread has finished into `epochs` (a failure into `failure`).
    fn collect_answers(&mut self) {
        while let Some(r) = self.answers.as_ref().and_then(Answers::next_ready) {
            match r {
                Ok(e) => self.took(e),
                Err(f) => {
                    fail(&mut self.failure, f);
                }
            }
        }
    }

    /// Wait for every epoch handed over to be answered; what the answer thread spent.
    /// An answered epoch: kept for the report, its costs into the per-instance maxima (the
    /// epochs may be taken before the report is made).
    fn took(&mut self, e: EpochReport) {
        // `--instant`: the epoch's events have all come; summarize it.
        if let Some(l) = &mut self.instant {
            l.settle(e.index, self.truth[0].index);
        }
        self.epoch_most.resize(e.costs.len(), (0.0, 0.0));
        for (m, c) in self.epoch_most.iter_mut().zip(&e.costs) {
            m.0 = m.0.max(c.update_seconds);
            m.1 = m.1.max(c.query_seconds);
        }
        self.epochs.push(e);
    }

    fn stop_answers(&mut self) -> Option<Spent> {
        let (reports, spent) = self.answers.take()?.finish();
        for r in reports {
            match r {
                Ok(e) => self.took(e),
                Err(f) => {
                    fail(&mut self.failure, f);
                }
            }
        }
        match spent {
            Ok(s) => Some(s),
            Err(f) => {
                fail(&mut self.failure, f.in_epoch(self.truth[0].index));
                None
            }
        }
    }

    /// Answer every epoch from `replay`'s states instead of the packet path's (`netsift merge`):
    /// packets pushed then only give the epochs, their truth and totals, through the same
    /// reader, keying, answers and scoring as `run`. Needs one worker; call before the first
    /// packet.
    pub fn replay_from(&mut self, replay: Replay) {
        self.replay = Some(replay);
    }

    /// `netsift merge` without traces: close epoch `index` of `packets` packets and `bytes`
    /// bytes, spanning `first_ns..=last_ns`, with no flows (answers without scores), answered
    /// from [`Runner::replay_from`]'s states.
    pub fn close_replayed(&mut self, index: u64, packets: u64, bytes: u64, span: (u64, u64)) {
        for t in &mut self.truth {
            (t.index, t.packets, t.bytes) = (index, packets, bytes);
            (t.first_ns, t.last_ns) = span;
        }
        self.totals.packets += packets;
        self.totals.bytes += bytes;
        self.end_epoch();
    }

    /// Time epochs without a packet to close them (`netsift live` on an idle link): close the
    /// open epoch if `now_ns` (capture time, the clock packets are stamped with) is past its
    /// end, and collect the epochs answered meanwhile (with [`Runner::answer_inline`], every
    /// epoch before the returned index is then in [`Runner::completed_epochs`], if it held a
    /// packet: an empty epoch is not reported, the rule of `push`). The first call, before any
    /// packet, starts the epoch axis at `now_ns`. Returns the open epoch's index; packet epochs
    /// are left as they are.
    pub fn advance_to(&mut self, now_ns: u64) -> u64 {
        self.started_ns.get_or_insert(now_ns);
        self.seen_ns = self.seen_ns.max(now_ns);
        if let Some(index) = self.clock.advance(now_ns) {
            let closed = self.truth[0].index;
            self.end_epoch();
            self.idle_gap(closed, index);
            for t in &mut self.truth {
                t.index = index;
            }
        }
        self.idle_from.get_or_insert(self.clock.index());
        self.collect_answers();
        self.clock.index()
    }

    /// Time epochs on a grid from `origin_ns` (`netsift live` for snapshots: Unix time, 0):
    /// the first [`Runner::advance_to`] or packet then moves to its epoch on that grid. The
    /// epochs before it are not this run's (no idle snapshot for them). Call before any packet.
    pub fn align_epochs(&mut self, origin_ns: u64) {
        self.clock.advance(origin_ns);
    }

    /// Idle snapshots for the time epochs skipped between the one just closed (`closed`) and
    /// `next` (no packet, so no epoch end of their own), at most [`MAX_IDLE_GAP`] of the latest.
    fn idle_gap(&mut self, closed: u64, next: u64) {
        let Some(from) = self.idle_due() else {
            return;
        };
        let first = (closed + 1)
            .max(from)
            .max(next.saturating_sub(MAX_IDLE_GAP));
        for index in first..next {
            self.write_idle(index);
        }
    }

    /// [`Runner::idle_from`] when idle snapshots are due: time epochs, snapshots asked, no
    /// failure.
    fn idle_due(&self) -> Option<u64> {
        (self.cfg.epoch_ms.is_some() && self.cfg.snapshots.is_some() && self.failure.is_none())
            .then_some(self.idle_from)
            .flatten()
    }

    /// How much of epoch `index` (the open one, or an idle one before it) the capture saw: a
    /// time epoch's bounds, from the capture's start when this run's first epoch began before
    /// it (a time grid: [`Runner::align_epochs`]), to the capture's end when a signal cut it
    /// short ([`Runner::interrupt`]); a packet epoch's first and last packet.
    fn cover(&self, index: u64) -> EpochCover {
        let t = &self.truth[0];
        let open = t.index == index && t.packets > 0;
        let (first, last) = if open {
            (t.first_ns, t.last_ns)
        } else {
            (0, 0)
        };
        let mut reasons = vec![];
        let mut span = match self.clock.bounds(index) {
            Some((start, end)) => {
                let mut span = Coverage {
                    start_ns: start,
                    end_ns: end,
                };
                // This run's first epoch: it started at its first advance or packet.
                let packet = open.then_some(first);
                let began = match (self.started_ns, packet) {
                    (Some(a), Some(p)) => Some(a.min(p)),
                    (a, p) => a.or(p),
                };
                if let Some(began) = began.filter(|&b| self.idle_from == Some(index) && b > start) {
                    reasons.push(PartialReason::StartedMidEpoch);
                    span.start_ns = began.min(end);
                }
                span
            }
            None => Coverage {
                start_ns: first,
                end_ns: last,
            },
        };
        if self.interrupted {
            reasons.push(PartialReason::Interrupted);
            let ended = self.seen_ns.max(last).max(span.start_ns);
            span.end_ns = span.end_ns.min(ended);
        }
        EpochCover { reasons, span }
    }

    fn write_idle(&mut self, index: u64) {
        let cover = self.cover(index);
        if let Err(message) = crate::snap::write_idle(&self.cfg, &self.kinds, index, &cover) {
            fail(
                &mut self.failure,
                WorkerFailure {
                    worker: ANSWERS,
                    epoch: index,
                    message,
                },
            );
        }
    }

    /// Close the open epoch now (marked partial after [`Runner::interrupt`]) and collect it:
    /// `netsift live` stopping reports it before the summary. An epoch without packets is not
    /// reported, as in `push`.
    pub fn close_epoch(&mut self) {
        self.end_epoch();
        self.collect_answers();
    }

    /// Change the thresholds and k of the measures from the open epoch on (its answer uses
    /// them): `netsift live`'s reload (SIGHUP). `specs` is a run's measures as asked (before the
    /// runner's own changes: tasks it cannot measure dropped, defaults swapped); the n-th of
    /// them on a task and key kind gives its threshold and k to the n-th measure of this runner
    /// on the same. Returns how many measures changed.
    pub fn retune(&mut self, specs: &[MeasureSpec]) -> usize {
        let key = self.cfg.key;
        let mut changed = 0;
        let mut tuned = Vec::with_capacity(self.cfg.measures.len());
        for (i, m) in self.cfg.measures.iter_mut().enumerate() {
            let kind = kind_of(m, key);
            let nth = tuned
                .iter()
                .filter(|&&(t, k, _)| (t, k) == (m.task, kind))
                .count();
            let new = specs
                .iter()
                .filter(|s| (s.task, kind_of(s, key)) == (m.task, kind))
                .nth(nth);
            tuned.push((m.task, kind, i));
            if let Some(s) = new {
                if (s.threshold, s.k) != (m.threshold, m.k) {
                    (m.threshold, m.k) = (s.threshold, s.k);
                    changed += 1;
                }
            }
        }
        if changed > 0 {
            self.retuned = Some(
                self.cfg
                    .measures
                    .iter()
                    .map(|m| (m.threshold, m.k))
                    .collect(),
            );
        }
        changed
    }

    /// The failure that stopped measuring (a worker's or the answer thread's), if one came:
    /// no epoch closes after it; [`Runner::try_finish`] returns it.
    pub fn failed(&self) -> bool {
        self.failure.is_some()
    }

    /// Answer each epoch on the calling thread as it closes, not on the answer thread: for a
    /// stream whose reads may block (a live pipe), so that an epoch's report is ready when it
    /// closes, not when the next packet arrives. Call before the first packet.
    pub fn answer_inline(&mut self) {
        if let Some(a) = &mut self.answers {
            a.inline();
        }
    }

    /// The trace carries no capture timestamps (4- and 13-byte key traces): the fast path's FIFO
    /// model then spaces its packets at `key_trace_mpps`. Call before the first packet.
    pub fn untimed(&mut self) {
        self.untimed = true;
    }

    /// The reading stops here (a signal): the open epoch will be closed as `partial` by
    /// `finish`, with the packets pushed so far.
    pub fn interrupt(&mut self) {
        self.interrupted = true;
    }

    /// `--instant`: whether detections wait to be taken ([`Runner::take_detections`]).
    pub fn has_detections(&self) -> bool {
        self.instant.as_ref().is_some_and(|l| l.has_pending())
    }

    /// `--instant`: the detections made since the last call, in the order they arrived.
    pub fn take_detections(&mut self) -> Vec<crate::instant::Detection> {
        self.instant
            .as_mut()
            .map(|l| l.take_pending())
            .unwrap_or_default()
    }

    /// The epochs completed and not yet taken (a live run reports each as it closes).
    pub fn completed_epochs(&self) -> &[EpochReport] {
        &self.epochs
    }

    /// Take the completed epochs out of the runner: a caller that prints each epoch as it
    /// closes takes them, so a run over an endless stream holds no past epoch (the final
    /// [`Report`] then lists only the epochs not taken). One that wants them all at the end
    /// (`--json`) leaves them.
    pub fn take_completed(&mut self) -> Vec<EpochReport> {
        std::mem::take(&mut self.epochs)
    }

    pub fn config(&self) -> &RunConfig {
        &self.cfg
    }

    /// What every host running this configuration agrees with in its snapshots (seed,
    /// parameters, key kinds), as an idle epoch's snapshot of host `host`: a controller checks
    /// arriving snapshots against it (`netsift controller --expect`).
    pub fn reference_snapshot(&self, host: &str) -> Result<snapshot::Snapshot, String> {
        crate::snap::reference(&self.cfg, &self.kinds, host)
    }

    /// Every packet read so far, per class (what the report's `totals` will say): a monitor
    /// reads it after each epoch (`crates/monitor`).
    pub fn totals(&self) -> &Totals {
        &self.totals
    }

    /// What the run changed from what was asked, one line each (also in the report).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Add a line in front of the report's notes (a choice the caller made before the run,
    /// which the notes the runner made follow from).
    pub fn add_note(&mut self, note: String) {
        self.notes.insert(0, note);
    }

    pub fn trace_name(&self) -> &str {
        &self.trace
    }

    /// The epoch length as the report prints it (`2000000 packets`, `1000 ms`).
    pub fn epoch_label(&self) -> String {
        match self.cfg.epoch() {
            Ok(truth::EpochSpec::Packets(n)) => crate::report::count(n, "packet", "packets"),
            Ok(truth::EpochSpec::Millis(ms)) => format!("{ms} ms"),
            Err(_) => String::new(),
        }
    }

    /// The report; panics if a worker failed (`try_finish` returns the failure instead).
    pub fn finish(self) -> Report {
        self.try_finish().unwrap_or_else(|f| panic!("netsift: {f}"))
    }

    /// The report, or the first worker failure (which worker, in which epoch, what it said).
    pub fn try_finish(mut self) -> Result<Report, WorkerFailure> {
        self.end_epoch();
        let workers = self.pool.as_ref().map_or(1, |p| p.len());
        // The workers' planes: their costs and aggregator counters, summed into the report.
        let (planes, panicked) = match self.pool.take().map(Pool::finish) {
            None => (vec![], None),
            Some(Ok(p)) => (p, None),
            Some(Err(f)) => (vec![], Some(f)),
        };
        // Every epoch handed over answered; what the answers cost.
        let spent = self.stop_answers();
        if let Some(f) = panicked {
            match &mut self.failure {
                // The worker's failure was seen before (the reader could not send to it, or
                // its hand-over never came): in that epoch, with what the worker said.
                Some(seen) if seen.worker == f.worker => seen.message = f.message,
                _ => fail(&mut self.failure, f.in_epoch(self.truth[0].index)),
            }
        }
        if let Some(f) = self.failure.take() {
            return Err(f);
        }
        let spent = spent.unwrap_or(Spent {
            query_nanos: vec![],
            peak_memory: vec![],
        });
        for p in &planes {
            for (mine, theirs) in self.plane.instances.iter_mut().zip(&p.instances) {
                mine.nanos += theirs.nanos;
                mine.timed += theirs.timed;
                mine.updates += theirs.updates;
                mine.skipped += theirs.skipped;
            }
        }
        let seconds = self.started.elapsed().as_secs_f64();
        let keyed = self.totals.classes.keyed();
        let throughput = self
            .plane
            .instances
            .iter()
            .enumerate()
            .map(|(n, i)| {
                let query_nanos = spent.query_nanos.get(n).copied().unwrap_or(0);
                let (most_update, most_query) = self.epoch_most.get(n).copied().unwrap_or_default();
                let epochs = self.totals.epochs.max(1) as f64;
                let peak = spent.peak_memory.get(n).copied().unwrap_or(0);
                // The clock's cost, once per timed batch, is not the algorithm's.
                let clock = i.timed as f64 * self.clock_ns;
                let nanos = (i.nanos as f64 - clock).max(0.0);
                // Per keyed packet, not per update: behind Agg-Evict an algorithm gets fewer
                // updates than packets, and the per-packet figure is the one to compare.
                let ns = nanos / keyed.max(1) as f64;
                Cost {
                    algorithm: i.name.clone(),
                    key: i.kind,
                    tasks: self.instance_tasks.get(n).cloned().unwrap_or_default(),
                    // Each worker holds its own instance.
                    memory_bytes: peak.max(i.algo.memory_bytes()) * workers,
                    updates: i.updates,
                    seconds: nanos / 1e9,
                    ns_per_packet: ns,
                    ns_per_update: nanos / i.updates.max(1) as f64,
                    timed_batches: i.timed,
                    timed_seconds: i.nanos as f64 / 1e9,
                    clock_seconds: clock / 1e9,
                    query_seconds: query_nanos as f64 / 1e9,
                    query_ms_per_epoch: query_nanos as f64 / 1e6 / epochs,
                    update_ms_per_epoch: nanos / 1e6 / epochs,
                    update_ms_max_epoch: most_update * 1e3,
                    query_ms_max_epoch: most_query * 1e3,
                    mpps: if ns > 0.0 { 1e3 / ns } else { 0.0 },
                    skipped: i.skipped,
                }
            })
            .collect();
        // One aggregator per kind and worker: their counters summed per kind.
        let fronts: Vec<&Plane> = if planes.is_empty() {
            vec![&self.plane]
        } else {
            planes.iter().collect()
        };
        let accelerators = self
            .kinds
            .iter()
            .enumerate()
            .filter_map(|(ki, &kind)| {
                let all: Vec<_> = fronts.iter().filter_map(|p| p.fronts[ki].stats()).collect();
                let first = all.first()?;
                let sum = |f: fn(&front::FrontStats) -> u64| all.iter().map(f).sum::<u64>();
                let (packets, passed) = (sum(|s| s.packets), sum(|s| s.passed));
                let (through, switches) = (sum(|s| s.through), sum(|s| s.switches));
                let nanos = all.iter().map(|s| s.nanos).sum::<u128>();
                Some(AccelCost {
                    accel: first.accel.name(),
                    key: kind,
                    simd: first.simd.clone(),
                    memory_bytes: all.iter().map(|s| s.memory_bytes).sum(),
                    packets,
                    evicted: passed,
                    evicted_share: passed as f64 / packets.max(1) as f64,
                    seconds: nanos as f64 / 1e9,
                    ns_per_packet: nanos as f64 / packets.max(1) as f64,
                    mode: first.mode.name(),
                    through,
                    through_share: through as f64 / packets.max(1) as f64,
                    switches,
                    switches_per_epoch: switches as f64 / self.totals.epochs.max(1) as f64,
                })
            })
            .collect();
        let epoch = self.epoch_label();
        let warnings = self.epochs.iter().flat_map(Warning::of).collect();
        let instant = self.instant.as_mut().map(|l| l.report(self.truth[0].index));
        Ok(Report {
            trace: self.trace,
            key: self.cfg.key,
            weight: self.cfg.weight,
            epoch,
            seed: self.cfg.seed,
            batch: self.cfg.batch,
            truth: self.cfg.truth,
            epochs: self.epochs,
            mpps: self.totals.packets as f64 / seconds / 1e6,
            clock_ns: self.clock_ns,
            totals: self.totals,
            seconds,
            throughput,
            accel: self.cfg.accel.name(),
            accelerators,
            notes: self.notes,
            warnings,
            instant,
            thresholds: crate::report::ThresholdRule::of_config(&self.cfg),
            workers: self.cfg.workers,
            normal_capacity: self.cfg.sketchvisor.normal_capacity,
            epoch_choice: self.cfg.epoch_choice.clone(),
        })
    }
}

/// What one timed region (`Instant::now()` then `elapsed()`) measures with nothing inside it:
/// the clock's own cost, which every timed batch pays once. The least of 16 means over 1024
/// empty regions each (the least disturbed by interrupts and migrations), after a warm-up.
pub fn clock_overhead_ns() -> f64 {
    let region = || {
        let t = Instant::now();
        std::hint::black_box(t.elapsed().as_nanos())
    };
    for _ in 0..256 {
        region();
    }
    (0..16)
        .map(|_| (0..1024).map(|_| region()).sum::<u128>() as f64 / 1024.0)
        .fold(f64::INFINITY, f64::min)
}
