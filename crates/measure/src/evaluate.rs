//! Scoring one task's answer against exact ground truth (ALGORITHMS.md, the task and metric
//! definitions): thresholds resolved against the epoch, the algorithm queried, the exact
//! answer computed from the per-flow counts, and the accuracy metrics.

use algo::{Algorithm, Task};
use key::{FlowKey, KeyKind, KeyMap, KeySet};
use truth::{EpochTruth, Weight};

use crate::config::{MeasureSpec, RunConfig};
use crate::metrics::{are_of, mrd, rel_err, set_accuracy, Accuracy};
use crate::report::{Answer, Exact, Listed, TaskResult};

/// Default thresholds (SketchVisor 7.1: heavy hitters and changers at 0.05%, DDoS and
/// superspreaders at 0.5% of the addresses) and top-k size.
pub const DEFAULT_HH: f64 = 0.0005;
pub const DEFAULT_HC: f64 = 0.0005;
pub const DEFAULT_SPREAD: f64 = 0.005;
pub const DEFAULT_K: usize = 100;

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
/// the end of the previous epoch, for heavy changers) on keys of `kind`, scored against `truth`
/// (and `prev_truth`).
pub(crate) fn evaluate(
    spec: &MeasureSpec,
    kind: KeyKind,
    a: &dyn Algorithm,
    prev: Option<&dyn Algorithm>,
    truth: &EpochTruth,
    prev_truth: Option<&EpochTruth>,
    cfg: &RunConfig,
) -> TaskResult {
    let w = cfg.weight;
    let mut r = blank(spec, kind);
    // Algorithms with point queries also get the relative error over every true instance.
    let point_ref = a.tasks().contains(&Task::FlowSize).then_some(a);
    match spec.task {
        Task::HeavyHitters => {
            let t = resolve(spec.threshold.unwrap_or(DEFAULT_HH), truth.total(w) as f64);
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
            let (Some(prev), Some(pt)) = (prev, prev_truth) else {
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
            let t = resolve(spec.threshold.unwrap_or(DEFAULT_HC), total as f64);
            r.threshold = Some(t as f64);
            let rep = a.heavy_changers(prev, t).unwrap_or_default();
            let tru: KeyMap<u64> = change.into_iter().filter(|&(_, c)| c >= t).collect();
            set_result(&mut r, &rep, &tru, None);
            r.answer.keys = listed(&rep, cfg.listed);
        }
        Task::Superspreaders | Task::Ddos => {
            // Exact distinct peers per host from the pair table.
            let by_src = spec.task == Task::Superspreaders;
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
                spec.threshold.unwrap_or(DEFAULT_SPREAD),
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
            let k = spec.k.unwrap_or(DEFAULT_K);
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
