//! Accuracy metrics with the papers' definitions (SketchVisor 7.1, Re-evaluating 3.1;
//! `../shared/ALGORITHMS.md` section 1).

use key::{FlowKey, KeyMap, KeySet};
use serde::Serialize;

/// Accuracy of one task in one epoch. Fields a task does not define are `None` (JSON `null`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Accuracy {
    /// |reported ∩ true| / |reported| (1 when nothing is reported and nothing is true).
    pub precision: Option<f64>,
    /// |reported ∩ true| / |true| (1 when nothing is true).
    pub recall: Option<f64>,
    pub f1: Option<f64>,
    /// Set tasks: mean over all true instances of |v - v̂| / v with the algorithm's own point
    /// estimate (`null` when it cannot query arbitrary keys). Cardinality and entropy: the single
    /// ratio |v - v̂| / v. Flow size: the same mean over every flow of the epoch.
    pub relative_error: Option<f64>,
    /// Average relative error of the sizes reported for true positives.
    pub are: Option<f64>,
    /// Flow-size distribution: mean relative difference (ALGORITHMS.md 1).
    pub mrd: Option<f64>,
}

/// Precision, recall and F1 of a reported key set against the true set.
pub fn set_accuracy(reported: &KeySet, truth: &KeySet) -> (f64, f64, f64) {
    let tp = reported.iter().filter(|k| truth.contains(k)).count() as f64;
    let precision = if reported.is_empty() {
        if truth.is_empty() {
            1.0
        } else {
            0.0
        }
    } else {
        tp / reported.len() as f64
    };
    let recall = if truth.is_empty() {
        1.0
    } else {
        tp / truth.len() as f64
    };
    let f1 = if precision + recall == 0.0 {
        0.0
    } else {
        2.0 * precision * recall / (precision + recall)
    };
    (precision, recall, f1)
}

/// |v - v̂| / v, with 0/0 := 0 and x/0 := 1 for x > 0 (an estimate for nothing is all error).
pub fn rel_err(truth: f64, est: f64) -> f64 {
    if truth == 0.0 {
        if est == 0.0 {
            0.0
        } else {
            1.0
        }
    } else {
        (truth - est).abs() / truth
    }
}

/// Mean of |v - v̂| / v over the reported true positives.
pub fn are_of(reported: &[(FlowKey, u64)], truth: &KeyMap<u64>) -> Option<f64> {
    let errs: Vec<f64> = reported
        .iter()
        .filter_map(|(k, est)| truth.get(k).map(|&v| rel_err(v as f64, *est as f64)))
        .collect();
    if errs.is_empty() {
        None
    } else {
        Some(errs.iter().sum::<f64>() / errs.len() as f64)
    }
}

/// MRD = (1/z) Σ_{i=1..z} |n_i − n̂_i| / ((n_i + n̂_i)/2), z = the largest size in either
/// distribution, 0/0 := 0. `fsd[s]` is the number of flows of size s (index 0 unused).
pub fn mrd(truth: &[f64], est: &[f64]) -> f64 {
    let z = truth.len().max(est.len()).saturating_sub(1);
    if z == 0 {
        return 0.0;
    }
    let at = |v: &[f64], i: usize| v.get(i).copied().unwrap_or(0.0);
    let mut acc = 0.0;
    for i in 1..=z {
        let (n, e) = (at(truth, i), at(est, i));
        let d = (n + e) / 2.0;
        if d > 0.0 {
            acc += (n - e).abs() / d;
        }
    }
    acc / z as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[u32]) -> KeySet {
        v.iter().map(|&x| FlowKey::from_u32(x)).collect()
    }

    #[test]
    fn precision_recall_f1() {
        let (p, r, f) = set_accuracy(&set(&[1, 2, 3, 4]), &set(&[1, 2, 5]));
        assert_eq!(p, 0.5);
        assert!((r - 2.0 / 3.0).abs() < 1e-12);
        assert!((f - 2.0 * 0.5 * (2.0 / 3.0) / (0.5 + 2.0 / 3.0)).abs() < 1e-12);
        assert_eq!(set_accuracy(&set(&[]), &set(&[])), (1.0, 1.0, 1.0));
        assert_eq!(set_accuracy(&set(&[]), &set(&[1])).1, 0.0);
    }

    #[test]
    fn mrd_matches_definition() {
        // sizes 1..=2: |4-2|/3 + |1-1|/1 = 2/3, over z = 2.
        let t = [0.0, 4.0, 1.0];
        let e = [0.0, 2.0, 1.0];
        assert!((mrd(&t, &e) - (2.0 / 3.0) / 2.0).abs() < 1e-12);
        assert_eq!(mrd(&t, &t), 0.0);
        // A flow put at the wrong size costs 2 at each of the two sizes: (2 + 2) / z = 2.
        assert!((mrd(&[0.0, 1.0], &[0.0, 0.0, 1.0]) - 2.0).abs() < 1e-12);
    }

    #[test]
    fn are_over_true_positives_only() {
        let mut truth = KeyMap::default();
        truth.insert(FlowKey::from_u32(1), 100);
        let rep = vec![(FlowKey::from_u32(1), 110), (FlowKey::from_u32(9), 5)];
        assert!((are_of(&rep, &truth).unwrap() - 0.1).abs() < 1e-12);
        assert_eq!(are_of(&[], &truth), None);
    }

    #[test]
    fn rel_err_by_hand() {
        assert_eq!(rel_err(0.0, 0.0), 0.0);
        assert_eq!(rel_err(0.0, 3.0), 1.0);
        assert_eq!(rel_err(4.0, 5.0), 0.25);
        assert_eq!(rel_err(4.0, 3.0), 0.25);
        assert_eq!(rel_err(4.0, 0.0), 1.0);
    }
}
