//! Building a run (`Runner::new`): the configuration's defaults fitted to the keys, the memory
//! budget checked before anything is allocated, the algorithm instances built and shared, the
//! front ends and the fast path chosen, the workers and the answer thread started.

use std::time::Instant;

use algo::{BuildCtx, Change, Side, Task};
use key::KeyKind;
use truth::{Clock, EpochTruth, Ewma};

use super::{clock_overhead_ns, Runner};
use crate::answer::{Answers, Shape};
use crate::config::{ConfigError, MeasureSpec, RunConfig};
use crate::instance::{Instance, Measure, Peers};
use crate::plane::{fronts_for, Plane};
use crate::report::Totals;
use crate::workers::Pool;

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
        // Not one the task is measured with already (a preset gives a task several).
        let other = catalog::answering(spec.task)
            .into_iter()
            .filter(|&a| a != spec.algorithm)
            .filter(|&a| {
                !cfg.measures
                    .iter()
                    .any(|m| m.task == spec.task && m.algorithm == a)
            })
            .find(|a| holds(a).is_ok());
        let Some(other) = other else {
            return Err(why.into());
        };
        notes.push(format!(
            "{}: {} cannot hold these keys ({why}); answered by {other}",
            spec.task, spec.algorithm
        ));
        let (t, was) = (spec.task, spec.algorithm.clone());
        // The replacement's own preset parameters, not those of the algorithm it replaces.
        let params = match &cfg.preset {
            Some(p) => catalog::presets::params(p, other)?,
            None => toml::Table::new(),
        };
        // Every measure of this task that took the same default moves with it (not the task's
        // other algorithms).
        for m in cfg
            .measures
            .iter_mut()
            .filter(|m| m.by_default && m.task == t && m.algorithm == was)
        {
            m.algorithm = other.to_string();
            m.params = params.clone();
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

pub(super) fn kind_of(m: &MeasureSpec, run_key: KeyKind) -> KeyKind {
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
}
