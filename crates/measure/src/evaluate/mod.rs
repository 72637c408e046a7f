//! Scoring one task's answer against exact ground truth (ALGORITHMS.md, the task and metric
//! definitions): thresholds resolved against the epoch, the algorithm queried, the exact
//! answer computed from the per-flow counts (`truth::answers`, code no algorithm uses), and
//! the accuracy metrics. Every answer is scored against the same question in the same unit:
//! sizes in the run's weight, heavy changers against the change the algorithm defines
//! ([`Algorithm::change_basis`]).

use std::cell::Cell;
use std::time::Instant;

use algo::{Algorithm, Change, Task};
use key::{FlowKey, KeyKind, KeyMap, KeySet};
use truth::{EpochTruth, Ewma, Host, Weight};

use crate::config::{resolve, MeasureSpec, RunConfig};
use crate::metrics::{are_of, mrd, rel_err, set_accuracy, Accuracy};
use crate::report::{Answer, Exact, Listed, TaskResult};

// The defaults are configuration (a measure's `threshold` and `k` when none is given): they
// live in `config`, below the report that lists them.
pub use crate::config::{DEFAULT_HC, DEFAULT_HH, DEFAULT_K, DEFAULT_SPREAD};

/// The warning of a task whose fractional threshold resolved so low on this epoch that every
/// flow qualifies (issue 34: the default 0.05% of a short epoch is one packet): the answer is then
/// the flow set, not its heavy part. The rule (README, "Tasks"): a flow is a heavy hitter iff its
/// size is `>=` the absolute threshold and a changer iff its change is; a fraction resolves to
/// `ceil(fraction x base)`, at least 1, and is never floored higher (that would answer another
/// question than the one asked and scored), but when the resolved threshold is at most every
/// flow's size (every change's), the task is degenerate on the epoch and the run says so once per
/// epoch and task (`answer::dedup_threshold_warnings`). `flows`: the flows (changed flows) of
/// the epoch, all of which reach `t` (the caller checked); `base` what the fraction was of.
pub(crate) fn degenerate_warning(
    task: Task,
    fraction: f64,
    t: u64,
    flows: usize,
    base: f64,
    w: Weight,
) -> algo::Caveat {
    let (what, its, every) = match task {
        Task::HeavyChangers => (
            "total change",
            "changed flows",
            "changed flow is a heavy changer",
        ),
        _ => ("weight", "flows", "flow is a heavy hitter"),
    };
    algo::Caveat {
        parameter: "threshold",
        message: format!(
            "{}% of this epoch's {what} ({base:.0} {}) resolves to {t}, which all {flows} of its \
             {its} reach: every {every}, the task is degenerate on this epoch",
            fraction * 100.0,
            w.name()
        ),
        suggestion: format!(
            "an absolute threshold above {t} (--threshold {}), or longer epochs",
            t + 1
        ),
    }
}

/// `f()`, a query of the algorithm, its wall time added to `spent` (the cost table's query
/// time: the algorithm's answers, not the scoring around them).
fn q<T>(spent: &Cell<u128>, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let v = f();
    spent.set(spent.get() + t.elapsed().as_nanos());
    v
}

/// The `n` largest of `v`, each with its exact value (`truth`: none without ground truth) and
/// the times `a` recorded for it (`Algorithm::flow_times`).
fn listed(
    v: &[(FlowKey, u64)],
    n: usize,
    a: &dyn Algorithm,
    truth: impl Fn(&FlowKey) -> Option<u64>,
) -> Vec<Listed> {
    let mut v = v.to_vec();
    v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.into_iter()
        .take(n)
        .map(|(k, e)| {
            let times = a.flow_times(&k);
            Listed {
                key: k.to_string(),
                estimate: e,
                truth: truth(&k),
                first_ns: times.map(|t| t.0),
                last_ns: times.map(|t| t.1),
            }
        })
        .collect()
}

/// A key's exact size this epoch (0 when it is not in the epoch).
fn size_of(truth: &EpochTruth, w: Weight) -> impl Fn(&FlowKey) -> Option<u64> + '_ {
    move |k| Some(truth.flows.get(k).map_or(0, |c| c.get(w)))
}

fn blank(spec: &MeasureSpec, kind: KeyKind) -> TaskResult {
    TaskResult {
        task: spec.task,
        algorithm: spec.algorithm.clone(),
        key: kind,
        threshold: None,
        answer: Answer::default(),
        truth: Exact::default(),
        accuracy: Accuracy::default(),
        note: None,
        warnings: Vec::new(),
        recovery: None,
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

/// One task's result this epoch: `spec` answered by `a` (with `prev`, the algorithm's state at
/// the end of the previous epoch, for heavy changers measured against the previous epoch) on
/// keys of `kind`, scored against `truth` (and `prev_truth`, or `ewma`, the exact EWMA model of
/// the past epochs for an algorithm whose changes are against an EWMA prediction).
#[allow(clippy::too_many_arguments)]
pub(crate) fn evaluate(
    spec: &MeasureSpec,
    kind: KeyKind,
    a: &dyn Algorithm,
    prev: Option<&dyn Algorithm>,
    truth: &EpochTruth,
    prev_truth: Option<&EpochTruth>,
    ewma: Option<&Ewma>,
    cfg: &RunConfig,
    spent: &Cell<u128>,
) -> TaskResult {
    let w = cfg.weight;
    let mut r = blank(spec, kind);
    // Algorithms with point queries also get the relative error over every true instance.
    let point_ref = a.tasks().contains(&Task::FlowSize).then_some(a);
    match spec.task {
        Task::HeavyHitters => {
            let frac = spec.threshold.unwrap_or(DEFAULT_HH);
            // A fraction of the NIC's capacity x epoch when `--nic-gbps` is given, the same
            // every epoch (SketchVisor 7.1), else of this epoch's weight.
            let nic = cfg.nic_base();
            let t = resolve(frac, nic.unwrap_or(truth.total(w) as f64));
            r.threshold = Some(t as f64);
            let rep = q(spent, || a.heavy_hitters(t)).unwrap_or_default();
            let tru: KeyMap<u64> = truth
                .sizes(w)
                .filter(|&(_, s)| s >= t)
                .map(|(k, s)| (*k, s))
                .collect();
            if frac < 1.0 && nic.is_none() && !tru.is_empty() && tru.len() == truth.flows.len() {
                r.warnings.push(degenerate_warning(
                    spec.task,
                    frac,
                    t,
                    tru.len(),
                    truth.total(w) as f64,
                    w,
                ));
            }
            set_result(&mut r, &rep, &tru, point_ref);
            r.answer.keys = listed(&rep, cfg.listed, a, size_of(truth, w));
        }
        Task::HeavyChangers => {
            // The exact change per flow, as the algorithm defines it.
            let (change, prev) = match a.change_basis() {
                Change::LastEpoch => {
                    let (Some(prev), Some(pt)) = (prev, prev_truth) else {
                        r.note = Some("first epoch: no previous epoch to compare with".into());
                        return r;
                    };
                    (truth::answers::change(truth, pt, w), prev)
                }
                Change::Ewma { .. } => {
                    let Some(change) = ewma.and_then(|m| m.change(truth, w)) else {
                        r.note = Some("first epoch: no prediction to compare with".into());
                        return r;
                    };
                    // The algorithm carries its own history; `prev` is not read.
                    (change, prev.unwrap_or(a))
                }
            };
            // 0.05% of the total change over the two epochs, with or without `--nic-gbps`
            // (SketchVisor 7.1 keeps the NIC's capacity for heavy hitters).
            let total: f64 = change.values().sum();
            let frac = spec.threshold.unwrap_or(DEFAULT_HC);
            let t = resolve(frac, total);
            r.threshold = Some(t as f64);
            let rep = q(spent, || a.heavy_changers(prev, t)).unwrap_or_default();
            r.warnings = a.change_caveats(prev, t);
            // Exact test on the exact change; the size compared with an estimate is rounded as
            // the estimates are (integers).
            let tru: KeyMap<u64> = change
                .iter()
                .filter(|&(_, &c)| c >= t as f64)
                .map(|(k, c)| (*k, c.round() as u64))
                .collect();
            let changed = change.values().filter(|&&c| c > 0.0).count();
            if frac < 1.0 && changed > 0 && tru.len() == changed {
                r.warnings
                    .push(degenerate_warning(spec.task, frac, t, changed, total, w));
            }
            set_result(&mut r, &rep, &tru, None);
            r.answer.keys = listed(&rep, cfg.listed, a, |k| {
                Some(change.get(k).map_or(0, |c| c.round() as u64))
            });
        }
        Task::Superspreaders | Task::Ddos => {
            let host = if spec.task == Task::Superspreaders {
                Host::Src
            } else {
                Host::Dst
            };
            let spread = truth.spread(host);
            let t = resolve(
                spec.threshold.unwrap_or(DEFAULT_SPREAD),
                spread.peer_addresses as f64,
            );
            r.threshold = Some(t as f64);
            let rep = q(spent, || a.spreaders(t)).unwrap_or_default();
            set_result(&mut r, &rep, &spread.above(t), None);
            r.answer.keys = listed(&rep, cfg.listed, a, |k| {
                Some(spread.peers.get(k).copied().unwrap_or(0))
            });
        }
        Task::Cardinality => {
            let est = q(spent, || a.cardinality()).unwrap_or(f64::NAN);
            let tv = truth.flows.len() as f64;
            r.answer.estimate = Some(est);
            r.truth.value = Some(tv);
            r.accuracy.relative_error = Some(rel_err(tv, est));
        }
        Task::Entropy => {
            let est = q(spent, || a.entropy()).unwrap_or(f64::NAN);
            let tv = truth.entropy(w);
            r.answer.estimate = Some(est);
            r.truth.value = Some(tv);
            r.accuracy.relative_error = Some(rel_err(tv, est));
        }
        Task::FlowSizeDistribution => {
            // In the run's weight, which is packets: a run counting bytes refuses this task
            // (`RunConfig::validate`).
            let est = q(spent, || a.flow_size_distribution()).unwrap_or_default();
            let tv = truth.size_histogram(w);
            r.answer.estimate = Some(est.iter().sum());
            r.truth.value = Some(tv.iter().sum());
            r.answer.fsd_head = (1..=10)
                .map(|i| est.get(i).copied().unwrap_or(0.0))
                .collect();
            r.accuracy.mrd = Some(mrd(&tv, &est));
        }
        Task::TopK => {
            let k = spec.k.unwrap_or(DEFAULT_K);
            r.threshold = Some(k as f64);
            let rep = q(spent, || a.top_k(k)).unwrap_or_default();
            let ranked = truth.ranked(w);
            // Ties at the k-th size: any flow as large as the k-th largest is a correct member.
            let kth = ranked
                .get(k.min(ranked.len()).saturating_sub(1))
                .map_or(0, |e| e.1);
            // The true members: every flow at least as large as the k-th (ties included).
            let members: KeyMap<u64> = ranked
                .iter()
                .copied()
                .filter(|&(_, s)| s >= kth && s > 0)
                .collect();
            let hits = rep
                .iter()
                .filter(|(key, _)| members.contains_key(key))
                .count() as f64;
            let want = k.min(ranked.len()) as f64;
            // As `set_accuracy`: nothing reported is precision 1 when nothing is true, else 0.
            let p = if rep.is_empty() {
                if want == 0.0 {
                    1.0
                } else {
                    0.0
                }
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
            // Over the reported true members only (`Accuracy::are`).
            r.accuracy.are = are_of(&rep, &members);
            r.answer.reported = Some(rep.len() as u64);
            r.truth.count = Some(want as u64);
            r.answer.keys = listed(&rep, cfg.listed, a, size_of(truth, w));
        }
        Task::FlowSize => {
            // One timed region for every point query (a clock read per flow would cost more
            // than most queries), then the scoring.
            let answered: Vec<(u64, u64)> = q(spent, || {
                truth
                    .sizes(w)
                    .map(|(k, s)| (s, a.flow_size(k).unwrap_or(0)))
                    .collect()
            });
            let n = answered.len() as u64;
            let acc: f64 = answered
                .iter()
                .map(|&(s, e)| rel_err(s as f64, e as f64))
                .sum();
            r.answer.reported = Some(n);
            if n > 0 {
                r.accuracy.relative_error = Some(acc / n as f64);
                r.accuracy.are = r.accuracy.relative_error;
            }
        }
    }
    r.warnings
        .extend(a.caveats(spec.task, caveat_scale(spec, &r, w), truth.total(w)));
    r
}

/// One task's answer this epoch without ground truth (`RunConfig::truth` off): the algorithm's
/// answer and warnings, no accuracy. Fractional thresholds resolve against what the reader
/// counts without per-flow state: the epoch's `total` weight (heavy hitters; heavy changers too,
/// whose exact base, the total change, needs the flows), and `peers`, a HyperLogLog estimate of
/// the distinct addresses on the peer side (superspreaders: destinations; DDoS: sources).
#[allow(clippy::too_many_arguments)]
pub(crate) fn answer_only(
    spec: &MeasureSpec,
    kind: KeyKind,
    a: &dyn Algorithm,
    prev: Option<&dyn Algorithm>,
    total: u64,
    peers: Option<f64>,
    first_epoch: bool,
    cfg: &RunConfig,
    spent: &Cell<u128>,
) -> TaskResult {
    let mut r = blank(spec, kind);
    let set = |r: &mut TaskResult, rep: Vec<(FlowKey, u64)>| {
        r.answer.reported = Some(rep.len() as u64);
        r.answer.keys = listed(&rep, cfg.listed, a, |_| None);
    };
    match spec.task {
        Task::HeavyHitters => {
            let base = cfg.nic_base().unwrap_or(total as f64);
            let t = resolve(spec.threshold.unwrap_or(DEFAULT_HH), base);
            r.threshold = Some(t as f64);
            set(&mut r, q(spent, || a.heavy_hitters(t)).unwrap_or_default());
        }
        Task::HeavyChangers => {
            let prev = match a.change_basis() {
                Change::LastEpoch => prev,
                // The algorithm carries its own history (no answer in its first epoch).
                Change::Ewma { .. } => (!first_epoch).then_some(prev.unwrap_or(a)),
            };
            let Some(prev) = prev else {
                r.note = Some("first epoch: no previous epoch to compare with".into());
                return r;
            };
            let t = resolve(spec.threshold.unwrap_or(DEFAULT_HC), total as f64);
            r.threshold = Some(t as f64);
            set(
                &mut r,
                q(spent, || a.heavy_changers(prev, t)).unwrap_or_default(),
            );
            r.warnings = a.change_caveats(prev, t);
        }
        Task::Superspreaders | Task::Ddos => {
            let t = resolve(
                spec.threshold.unwrap_or(DEFAULT_SPREAD),
                peers.unwrap_or(0.0),
            );
            r.threshold = Some(t as f64);
            set(&mut r, q(spent, || a.spreaders(t)).unwrap_or_default());
        }
        Task::Cardinality => r.answer.estimate = q(spent, || a.cardinality()),
        Task::Entropy => r.answer.estimate = q(spent, || a.entropy()),
        Task::FlowSizeDistribution => {
            let est = q(spent, || a.flow_size_distribution()).unwrap_or_default();
            r.answer.estimate = Some(est.iter().sum());
            r.answer.fsd_head = (1..=10)
                .map(|i| est.get(i).copied().unwrap_or(0.0))
                .collect();
        }
        Task::TopK => {
            let k = spec.k.unwrap_or(DEFAULT_K);
            r.threshold = Some(k as f64);
            set(&mut r, q(spent, || a.top_k(k)).unwrap_or_default());
        }
        // Point queries need keys to ask about: without ground truth there are none.
        Task::FlowSize => {
            r.note = Some("no ground truth: no flows to ask the size of".into());
        }
    }
    r.warnings
        .extend(a.caveats(spec.task, caveat_scale(spec, &r, cfg.weight), total));
    r
}

/// The scale of a task's caveats: its absolute threshold; for flow size, which has none, the
/// smallest flow's weight, one packet or a minimal Ethernet frame (60 bytes without its check
/// sequence).
fn caveat_scale(spec: &MeasureSpec, r: &TaskResult, w: Weight) -> Option<u64> {
    match (spec.task, w) {
        (Task::FlowSize, Weight::Packets) => Some(1),
        (Task::FlowSize, Weight::Bytes) => Some(60),
        _ => r.threshold.map(|t| t as u64),
    }
}

/// Every metric of every task on hand-computed cases: a fixed answer (`Fixed`) scored against a
/// small exact epoch. Each value is worked out in the comment above it.
#[cfg(test)]
mod tests;
