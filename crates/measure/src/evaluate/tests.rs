//! The scoring's checks by hand: each task's answer and accuracy on a few flows worked out on
//! paper (ALGORITHMS.md's definitions).

use super::*;
use algo::Estimate;
use truth::Weight;

/// An algorithm whose answers are given.
#[derive(Clone, Default)]
struct Fixed {
    hh: Vec<Estimate>,
    hc: Vec<Estimate>,
    spread: Vec<Estimate>,
    card: f64,
    entropy: f64,
    fsd: Vec<f64>,
    top: Vec<Estimate>,
    sizes: Option<KeyMap<u64>>,
    ewma: Option<f64>,
}

impl Algorithm for Fixed {
    fn name(&self) -> &'static str {
        "fixed"
    }
    fn tasks(&self) -> &'static [Task] {
        &Task::ALL
    }
    fn update(&mut self, _: &FlowKey, _: u64) {}
    fn reset(&mut self) {}
    fn memory_bytes(&self) -> usize {
        0
    }
    fn heavy_hitters(&self, _: u64) -> Option<Vec<Estimate>> {
        Some(self.hh.clone())
    }
    fn heavy_changers(&self, _: &dyn Algorithm, _: u64) -> Option<Vec<Estimate>> {
        Some(self.hc.clone())
    }
    fn change_basis(&self) -> Change {
        self.ewma
            .map_or(Change::LastEpoch, |alpha| Change::Ewma { alpha })
    }
    fn spreaders(&self, _: u64) -> Option<Vec<Estimate>> {
        Some(self.spread.clone())
    }
    fn cardinality(&self) -> Option<f64> {
        Some(self.card)
    }
    fn entropy(&self) -> Option<f64> {
        Some(self.entropy)
    }
    fn flow_size_distribution(&self) -> Option<Vec<f64>> {
        Some(self.fsd.clone())
    }
    fn top_k(&self, _: usize) -> Option<Vec<Estimate>> {
        Some(self.top.clone())
    }
    fn flow_size(&self, k: &FlowKey) -> Option<u64> {
        self.sizes.as_ref().map(|m| m.get(k).copied().unwrap_or(0))
    }
}

fn k(v: u32) -> FlowKey {
    FlowKey::from_u32(v)
}

fn pair(s: u32, d: u32) -> FlowKey {
    FlowKey::from_u32_pair(s, d)
}

/// An epoch of `flows[i] = (key, packets)`, packets of 100 bytes.
fn epoch(flows: &[(FlowKey, u64)]) -> EpochTruth {
    let mut e = EpochTruth::new(0);
    for &(key, n) in flows {
        for _ in 0..n {
            e.add(0, key, 100);
        }
    }
    e.settle();
    e
}

fn spec(task: Task, threshold: Option<f64>, k: Option<usize>) -> MeasureSpec {
    MeasureSpec {
        threshold,
        k,
        ..MeasureSpec::new(task, "fixed")
    }
}

fn score(s: &MeasureSpec, a: &Fixed, cur: &EpochTruth, prev: Option<&EpochTruth>) -> TaskResult {
    score_with(s, a, cur, prev, None, &RunConfig::default())
}

fn score_with(
    s: &MeasureSpec,
    a: &Fixed,
    cur: &EpochTruth,
    prev: Option<&EpochTruth>,
    ewma: Option<&Ewma>,
    cfg: &RunConfig,
) -> TaskResult {
    let p = a.clone();
    let prev_state = prev.map(|_| &p as &dyn Algorithm);
    evaluate(
        s,
        KeyKind::Src,
        a,
        prev_state,
        cur,
        prev,
        ewma,
        cfg,
        &Cell::new(0),
    )
}

fn close(x: Option<f64>, want: f64) {
    let x = x.expect("a value");
    assert!((x - want).abs() < 1e-12, "{x} != {want}");
}

/// Sizes 50, 30, 20, 5 packets.
fn four() -> EpochTruth {
    epoch(&[(k(1), 50), (k(2), 30), (k(3), 20), (k(4), 5)])
}

#[test]
fn heavy_hitters_by_hand() {
    // T = 20: true {1, 2, 3} (3 is exactly at T: "at least"). Reported {1, 2, 4, 5}:
    // 2 true positives, precision 2/4, recall 2/3, ARE over them (5/50 + 0) / 2 = 0.05.
    let a = Fixed {
        hh: vec![(k(1), 55), (k(2), 30), (k(4), 5), (k(5), 1)],
        ..Fixed::default()
    };
    let r = score(
        &spec(Task::HeavyHitters, Some(20.0), None),
        &a,
        &four(),
        None,
    );
    assert_eq!(r.threshold, Some(20.0));
    close(r.accuracy.precision, 0.5);
    close(r.accuracy.recall, 2.0 / 3.0);
    close(r.accuracy.f1, 2.0 * 0.5 * (2.0 / 3.0) / (0.5 + 2.0 / 3.0));
    close(r.accuracy.are, 0.05);
    assert_eq!(r.truth.count, Some(3));
    assert_eq!(r.answer.reported, Some(4));
    // A fraction of the epoch's total (105 packets): 0.19 x 105 = 19.95, rounded up to 20.
    let r = score(
        &spec(Task::HeavyHitters, Some(0.19), None),
        &a,
        &four(),
        None,
    );
    assert_eq!(r.threshold, Some(20.0));
    // With point queries: the relative error over every true instance, missed ones too:
    // estimates 55, 30, 0 for 50, 30, 20: (0.1 + 0 + 1) / 3.
    let mut sizes = KeyMap::default();
    sizes.insert(k(1), 55);
    sizes.insert(k(2), 30);
    let a = Fixed {
        sizes: Some(sizes),
        ..a
    };
    let r = score(
        &spec(Task::HeavyHitters, Some(20.0), None),
        &a,
        &four(),
        None,
    );
    close(r.accuracy.relative_error, 1.1 / 3.0);
    // In bytes (100 per packet) the threshold and sizes are bytes: T = 2000 holds 1, 2, 3
    // (in packets nothing would be that large). Reported {1, 4}: precision 1/2, recall 1/3.
    let cfg = RunConfig {
        weight: Weight::Bytes,
        ..RunConfig::default()
    };
    let a = Fixed {
        hh: vec![(k(1), 5_000), (k(4), 500)],
        ..Fixed::default()
    };
    let s = spec(Task::HeavyHitters, Some(2_000.0), None);
    let r = score_with(&s, &a, &four(), None, None, &cfg);
    close(r.accuracy.precision, 0.5);
    close(r.accuracy.recall, 1.0 / 3.0);
    close(r.accuracy.are, 0.0);
}

#[test]
fn heavy_changers_against_the_previous_epoch_by_hand() {
    // Before 10, 40, 5 (flows 1-3); now 50, 30, 20, 5 (flows 1-4): changes 40, 10, 15, 5,
    // total 70. T = 15: true {1, 3} (3 exactly at T). Reported {1: 38, 2: 10}: precision
    // 1/2, recall 1/2, ARE 2/40.
    let before = epoch(&[(k(1), 10), (k(2), 40), (k(3), 5)]);
    let a = Fixed {
        hc: vec![(k(1), 38), (k(2), 10)],
        ..Fixed::default()
    };
    let s = spec(Task::HeavyChangers, Some(15.0), None);
    let r = score(&s, &a, &four(), Some(&before));
    close(r.accuracy.precision, 0.5);
    close(r.accuracy.recall, 0.5);
    close(r.accuracy.are, 0.05);
    assert_eq!(r.truth.count, Some(2));
    // A fraction of the total change: 0.2 x 70 = 14.
    let r = score(
        &spec(Task::HeavyChangers, Some(0.2), None),
        &a,
        &four(),
        Some(&before),
    );
    assert_eq!(r.threshold, Some(14.0));
    // No previous epoch: no score.
    let r = score(&s, &a, &four(), None);
    assert!(r.note.is_some() && r.accuracy.precision.is_none());
}

#[test]
fn heavy_changers_against_an_ewma_prediction_by_hand() {
    // alpha 0.5. Epoch A: 10, 40, 5 (flows 1-3) sets P = V. Epoch B: 30, 20, 0 gives
    // P = 20, 30, 2.5. Now 50, 30, 20, 5: EWMA changes 30, 0, 17.5, 5 (total 52.5);
    // against epoch B they would be 20, 10, 20, 5.
    let (ea, eb) = (
        epoch(&[(k(1), 10), (k(2), 40), (k(3), 5)]),
        epoch(&[(k(1), 30), (k(2), 20)]),
    );
    let mut m = Ewma::new(0.5);
    let a = Fixed {
        hc: vec![(k(1), 30)],
        ewma: Some(0.5),
        ..Fixed::default()
    };
    let s = spec(Task::HeavyChangers, Some(18.0), None);
    // Before any epoch is folded in there is no prediction: no score.
    let r = score_with(&s, &a, &ea, None, Some(&m), &RunConfig::default());
    assert!(r.note.is_some() && r.accuracy.precision.is_none());
    m.fold(&ea, Weight::Packets);
    m.fold(&eb, Weight::Packets);
    // T = 18: the EWMA change holds flow 1 only (17.5 < 18): the answer {1: 30} is
    // exact. Scored against epoch B it would have recall 1/2.
    let r = score_with(&s, &a, &four(), Some(&eb), Some(&m), &RunConfig::default());
    close(r.accuracy.precision, 1.0);
    close(r.accuracy.recall, 1.0);
    close(r.accuracy.are, 0.0);
    assert_eq!(r.truth.count, Some(1));
    // The fraction is of the total EWMA change: 0.4 x 52.5 = 21.
    let s = spec(Task::HeavyChangers, Some(0.4), None);
    let r = score_with(&s, &a, &four(), None, Some(&m), &RunConfig::default());
    assert_eq!(r.threshold, Some(21.0));
    // T = 17: flow 3 (17.5, reported rounded as 18) joins the truth; missing it costs recall.
    let s = spec(Task::HeavyChangers, Some(17.0), None);
    let r = score_with(&s, &a, &four(), None, Some(&m), &RunConfig::default());
    close(r.accuracy.recall, 0.5);
}

#[test]
fn spreaders_by_hand() {
    // Sources: 1 -> {10, 11, 12}, 2 -> {10, 11}, 3 -> {10}. Destinations: 10 <- {1, 2, 3},
    // 11 <- {1, 2}, 12 <- {1}.
    let e = epoch(&[
        (pair(1, 10), 5),
        (pair(1, 11), 1),
        (pair(1, 12), 1),
        (pair(2, 10), 2),
        (pair(2, 11), 1),
        (pair(3, 10), 1),
    ]);
    // Superspreaders, T = 2: "more than 2" is source 1 only (source 2 has exactly 2).
    // Reported {1, 2}: precision 1/2, recall 1, ARE 0.
    let a = Fixed {
        spread: vec![(k(1), 3), (k(2), 2)],
        ..Fixed::default()
    };
    let r = score(&spec(Task::Superspreaders, Some(2.0), None), &a, &e, None);
    close(r.accuracy.precision, 0.5);
    close(r.accuracy.recall, 1.0);
    close(r.accuracy.are, 0.0);
    assert_eq!(r.truth.count, Some(1));
    // DDoS, T = 0.5 of the 3 sources = 1.5, rounded up to 2: destination 10 only.
    // Reported {10: 4, 12: 1}: precision 1/2, recall 1, ARE 1/3.
    let a = Fixed {
        spread: vec![(k(10), 4), (k(12), 1)],
        ..Fixed::default()
    };
    let r = score(&spec(Task::Ddos, Some(0.5), None), &a, &e, None);
    assert_eq!(r.threshold, Some(2.0));
    close(r.accuracy.precision, 0.5);
    close(r.accuracy.recall, 1.0);
    close(r.accuracy.are, 1.0 / 3.0);
    assert_eq!(r.truth.count, Some(1));
}

#[test]
fn scalars_by_hand() {
    // Cardinality: 4 flows, estimate 5: |4 - 5| / 4.
    let a = Fixed {
        card: 5.0,
        entropy: 1.2,
        ..Fixed::default()
    };
    let r = score(&spec(Task::Cardinality, None, None), &a, &four(), None);
    close(r.accuracy.relative_error, 0.25);
    assert_eq!(r.truth.value, Some(4.0));
    // Entropy of sizes 4, 2, 2: p = 1/2, 1/4, 1/4, H = 1.5 bits; estimate 1.2: 0.3 / 1.5.
    let e = epoch(&[(k(1), 4), (k(2), 2), (k(3), 2)]);
    let r = score(&spec(Task::Entropy, None, None), &a, &e, None);
    close(r.truth.value, 1.5);
    close(r.accuracy.relative_error, 0.2);
    // Flow size: estimates 55, 30, 0, 0 for 50, 30, 20, 5: (0.1 + 0 + 1 + 1) / 4.
    let mut sizes = KeyMap::default();
    sizes.insert(k(1), 55);
    sizes.insert(k(2), 30);
    let a = Fixed {
        sizes: Some(sizes),
        ..Fixed::default()
    };
    let r = score(&spec(Task::FlowSize, None, None), &a, &four(), None);
    close(r.accuracy.relative_error, 2.1 / 4.0);
}

#[test]
fn flow_size_distribution_by_hand() {
    // Sizes 1, 1, 1, 1, 2, 4: n = (4, 1, 0, 1) for sizes 1..4. Estimate (2, 1, 0, 0, 1):
    // z = 5, MRD = (|4-2|/3 + 0 + 0 + |1-0|/0.5 + |0-1|/0.5) / 5 = (2/3 + 4) / 5.
    let e = epoch(&[
        (k(1), 1),
        (k(2), 1),
        (k(3), 1),
        (k(4), 1),
        (k(5), 2),
        (k(6), 4),
    ]);
    let a = Fixed {
        fsd: vec![0.0, 2.0, 1.0, 0.0, 0.0, 1.0],
        ..Fixed::default()
    };
    let r = score(&spec(Task::FlowSizeDistribution, None, None), &a, &e, None);
    close(r.accuracy.mrd, (2.0 / 3.0 + 4.0) / 5.0);
    close(r.truth.value, 6.0);
    close(r.answer.estimate, 4.0);
}

#[test]
fn top_k_by_hand() {
    // Sizes 10, 8, 8, 5 (flows 1-4), k = 2: the k-th size is 8, flows 2 and 3 tie at it,
    // so the true members are {1, 2, 3} (any flow as large as the k-th).
    let e = epoch(&[(k(1), 10), (k(2), 8), (k(3), 8), (k(4), 5)]);
    // Reported {1: 12, 3: 8}: both members (3 ties the k-th): precision 1, recall 1, ARE
    // over the members (2/10 + 0) / 2.
    let a = Fixed {
        top: vec![(k(1), 12), (k(3), 8)],
        ..Fixed::default()
    };
    let s = spec(Task::TopK, None, Some(2));
    let r = score(&s, &a, &e, None);
    close(r.accuracy.precision, 1.0);
    close(r.accuracy.recall, 1.0);
    close(r.accuracy.are, 0.1);
    // Reported {1: 12, 3: 8, 4: 5}: 4 is no member: precision 2/3, and the ARE is still
    // over the members only (4's exact size is no credit).
    let a = Fixed {
        top: vec![(k(1), 12), (k(3), 8), (k(4), 5)],
        ..Fixed::default()
    };
    let r = score(&s, &a, &e, None);
    close(r.accuracy.precision, 2.0 / 3.0);
    close(r.accuracy.recall, 1.0);
    close(r.accuracy.are, 0.1);
    // Reported {4}: nothing right.
    let a = Fixed {
        top: vec![(k(4), 5)],
        ..Fixed::default()
    };
    let r = score(&s, &a, &e, None);
    close(r.accuracy.precision, 0.0);
    close(r.accuracy.recall, 0.0);
    assert_eq!(r.accuracy.are, None);
    // Nothing reported: precision 0 when flows exist, 1 when none do (as `set_accuracy`).
    let none = Fixed::default();
    let r = score(&s, &none, &e, None);
    close(r.accuracy.precision, 0.0);
    close(r.accuracy.recall, 0.0);
    let r = score(&s, &none, &EpochTruth::new(0), None);
    close(r.accuracy.precision, 1.0);
    close(r.accuracy.recall, 1.0);
    close(r.accuracy.f1, 1.0);
}

/// Thresholds: below 1 a fraction of the base, rounded up and at least 1; from 1 up an
/// absolute value (1.0 itself is 1, not all of the base).
#[test]
fn thresholds_resolve_by_hand() {
    assert_eq!(resolve(1.0, 1_000.0), 1);
    assert_eq!(resolve(2.5, 1_000.0), 3);
    assert_eq!(resolve(0.5, 3.0), 2);
    assert_eq!(resolve(0.0001, 10.0), 1);
}

/// The listed keys: largest estimate first, ties by key, at most `cfg.listed` of them; the
/// count reported is all of them.
#[test]
fn listed_keys_by_hand() {
    let a = Fixed {
        hh: vec![(k(4), 5), (k(2), 30), (k(1), 55), (k(3), 30)],
        ..Fixed::default()
    };
    let cfg = RunConfig {
        listed: 3,
        ..RunConfig::default()
    };
    let s = spec(Task::HeavyHitters, Some(20.0), None);
    let r = score_with(&s, &a, &four(), None, None, &cfg);
    let got: Vec<(String, u64)> = r
        .answer
        .keys
        .iter()
        .map(|l| (l.key.clone(), l.estimate))
        .collect();
    let want = vec![
        (k(1).to_string(), 55),
        (k(2).to_string(), 30),
        (k(3).to_string(), 30),
    ];
    assert_eq!(got, want);
    assert_eq!(r.answer.reported, Some(4));
}

/// Point queries with nothing true: no relative error (not 0/0); a flow-size task on an
/// empty epoch likewise.
#[test]
fn empty_truth_has_no_relative_error() {
    let mut sizes = KeyMap::default();
    sizes.insert(k(1), 55);
    let a = Fixed {
        hh: vec![(k(1), 55)],
        sizes: Some(sizes),
        ..Fixed::default()
    };
    // T = 1000 packets: no flow of `four()` is that large.
    let r = score(
        &spec(Task::HeavyHitters, Some(1_000.0), None),
        &a,
        &four(),
        None,
    );
    assert_eq!(r.truth.count, Some(0));
    assert_eq!(r.accuracy.relative_error, None);
    close(r.accuracy.precision, 0.0);
    let r = score(
        &spec(Task::FlowSize, None, None),
        &a,
        &EpochTruth::new(0),
        None,
    );
    assert_eq!(r.answer.reported, Some(0));
    assert_eq!(r.accuracy.relative_error, None);
    assert_eq!(r.accuracy.are, None);
}

/// Top-k F1 and recall away from 0 and 1, and an F1 of 0 (not 0/0) when nothing is right.
#[test]
fn top_k_f1_and_partial_recall_by_hand() {
    // Sizes 10, 8, 8, 5, k = 2: members {1, 2, 3}, want = 2.
    let e = epoch(&[(k(1), 10), (k(2), 8), (k(3), 8), (k(4), 5)]);
    let s = spec(Task::TopK, None, Some(2));
    // Reported {1}: precision 1, recall 1/2, F1 2 x 1 x 1/2 / (3/2) = 2/3.
    let a = Fixed {
        top: vec![(k(1), 12)],
        ..Fixed::default()
    };
    let r = score(&s, &a, &e, None);
    close(r.accuracy.precision, 1.0);
    close(r.accuracy.recall, 0.5);
    close(r.accuracy.f1, 2.0 / 3.0);
    // Reported {1, 3, 4}: precision 2/3, recall 1, F1 2 x 2/3 / (5/3) = 0.8.
    let a = Fixed {
        top: vec![(k(1), 12), (k(3), 8), (k(4), 5)],
        ..Fixed::default()
    };
    let r = score(&s, &a, &e, None);
    close(r.accuracy.f1, 0.8);
    // Reported {4}: precision 0, recall 0, F1 0.
    let a = Fixed {
        top: vec![(k(4), 5)],
        ..Fixed::default()
    };
    let r = score(&s, &a, &e, None);
    close(r.accuracy.f1, 0.0);
}

/// A flow of size 0 in the run's weight (bytes, packets of length 0) is never a top-k
/// member, even when it is the k-th largest.
#[test]
fn top_k_zero_size_flows_are_no_members() {
    let mut e = EpochTruth::new(0);
    e.add(0, k(1), 100);
    e.add(0, k(2), 0);
    e.settle();
    let cfg = RunConfig {
        weight: Weight::Bytes,
        ..RunConfig::default()
    };
    // k = 5: the k-th is the last, flow 2 of 0 bytes; members {1}.
    let a = Fixed {
        top: vec![(k(1), 100), (k(2), 0)],
        ..Fixed::default()
    };
    let r = score_with(&spec(Task::TopK, None, Some(5)), &a, &e, None, None, &cfg);
    close(r.accuracy.precision, 0.5);
}
