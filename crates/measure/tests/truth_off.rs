//! `truth = false` (issue 13): answers and costs without ground truth. The answers whose
//! thresholds do not depend on the truth are the same as with it; no accuracy is given; the
//! spreader thresholds come from an estimate of the addresses, close to the exact base.

use algo::Task;
use measure::{Report, RunConfig, Runner};

mod common;
use common::spec;

fn run(truth: bool) -> Report {
    run_with(truth, measure::Accel::None, false)
}

/// `v6`: every 50th packet (and a run of 300 from packet 150 000) as IPv6, so batches mix
/// address families (with Agg-Evict and no truth, a batch of packed IPv4 tuples meets IPv6
/// packets: `Runner::spill_v4`).
fn run_with(truth: bool, accel: measure::Accel, v6: bool) -> Report {
    let measures = vec![
        spec(Task::HeavyHitters, "count_min"),
        spec(Task::TopK, "space_saving"),
        spec(Task::Cardinality, "hyperloglog"),
        spec(Task::Entropy, "univmon"),
        spec(Task::FlowSizeDistribution, "mrac"),
        spec(Task::HeavyChangers, "deltoid"),
        spec(Task::Superspreaders, "two_level"),
        spec(Task::Ddos, "two_level"),
        spec(Task::FlowSize, "count_min"),
    ];
    let cfg = RunConfig {
        epoch_packets: Some(100_000),
        measures,
        truth,
        accel,
        ..RunConfig::default()
    };
    let mut r = Runner::new(cfg, "truth").unwrap();
    let spec = gen::Spec {
        packets: 200_000,
        flows: 20_000,
        skew: 1.0,
        seed: 5,
        ..gen::Spec::default()
    };
    let mut n = 0u64;
    gen::generate(&spec, |p| {
        let mut t = p.tuple;
        if v6 && (n % 50 == 7 || (150_000..150_300).contains(&n)) {
            t.v6 = true;
            t.src[15] = 1;
            t.dst[15] = 2;
        }
        n += 1;
        r.push(p.ts_ns, &t, p.wire_len)
    })
    .unwrap();
    r.finish()
}

/// With Agg-Evict and no truth, IPv4 packets reach the aggregators as packed tuples
/// (`KeyBatch::V4`), IPv6 ones as keys; with truth, every packet as keys. Same updates in the
/// same order, so every answer that does not take the truth's base is the same, order-dependent
/// ones (Space-Saving's top-k) included, with and without IPv6 packets in the batches.
#[test]
fn packed_tuples_answer_as_keys_do() {
    for v6 in [false, true] {
        let on = run_with(true, measure::Accel::AggEvict, v6);
        let off = run_with(false, measure::Accel::AggEvict, v6);
        let mut compared = 0;
        for (a, b) in on.epochs.iter().zip(&off.epochs) {
            assert_eq!((a.packets, a.bytes), (b.packets, b.bytes));
            for (x, y) in a.tasks.iter().zip(&b.tasks) {
                if matches!(
                    y.task,
                    Task::HeavyHitters
                        | Task::TopK
                        | Task::Cardinality
                        | Task::Entropy
                        | Task::FlowSizeDistribution
                ) {
                    let mut x = x.answer.clone();
                    for l in &mut x.keys {
                        l.truth = None;
                    }
                    let (x, y) = (serde_json::to_string(&x), serde_json::to_string(&y.answer));
                    assert_eq!(x.unwrap(), y.unwrap(), "{} v6 {v6}", b.tasks[0].task);
                    compared += 1;
                }
            }
        }
        assert_eq!(compared, 2 * 5);
        // The aggregators saw every packet either way.
        let through = |r: &Report| r.accelerators.iter().map(|a| a.packets).sum::<u64>();
        assert_eq!(through(&on), through(&off));
        assert!(through(&off) > 0);
    }
}

#[test]
fn without_truth_the_answers_stand_and_nothing_is_scored() {
    let on = run(true);
    let off = run(false);
    assert!(on.truth && !off.truth);
    // Every instance answered (query time is the answers' own, counted with or without truth).
    for c in on.throughput.iter().chain(&off.throughput) {
        assert!(c.query_seconds > 0.0, "{}", c.algorithm);
        assert!((c.query_ms_per_epoch - c.query_seconds * 1e3 / 2.0).abs() < 1e-9);
    }
    let json = serde_json::to_value(&off).unwrap();
    assert_eq!(json["truth"], false);
    assert_eq!(on.epochs.len(), off.epochs.len());
    for (a, b) in on.epochs.iter().zip(&off.epochs) {
        assert_eq!((a.packets, a.bytes), (b.packets, b.bytes));
        assert!(a.flows.is_some() && b.flows.is_none());
        for (x, y) in a.tasks.iter().zip(&b.tasks) {
            assert_eq!(y.accuracy, Default::default(), "{} scored", y.task);
            assert_eq!(y.truth.value, None);
            assert_eq!(y.truth.count, None);
            match y.task {
                // Thresholds from the epoch's weight, the same with or without truth.
                Task::HeavyHitters | Task::TopK | Task::Cardinality | Task::Entropy => {
                    assert_eq!(x.threshold, y.threshold, "{}", y.task);
                    // The same answer; with truth, each listed key also has its exact value.
                    assert!(y.answer.keys.iter().all(|l| l.truth.is_none()));
                    assert!(x.answer.keys.iter().all(|l| l.truth.is_some()));
                    let mut x = x.answer.clone();
                    for l in &mut x.keys {
                        l.truth = None;
                    }
                    assert_eq!(
                        serde_json::to_string(&x).unwrap(),
                        serde_json::to_string(&y.answer).unwrap(),
                        "{}",
                        y.task
                    );
                }
                Task::FlowSizeDistribution => {
                    assert_eq!(x.answer.fsd_head, y.answer.fsd_head);
                }
                // A fraction of the estimated peer addresses (HyperLogLog, RSE 1.6%): within
                // 5% of the exact base's threshold.
                Task::Superspreaders | Task::Ddos => {
                    let (t, u) = (x.threshold.unwrap(), y.threshold.unwrap());
                    assert!((t - u).abs() <= 0.05 * t + 1.0, "{}: {t} vs {u}", y.task);
                    assert!(y.answer.reported.is_some());
                }
                // The base is the epoch's weight instead of the total change: answered from
                // the second epoch on.
                Task::HeavyChangers => {
                    assert_eq!(x.note.is_some(), y.note.is_some());
                    if b.index > 0 {
                        assert!(y.answer.reported.unwrap() > 0);
                    }
                }
                // Point queries need keys to ask about.
                Task::FlowSize => assert!(y.note.as_deref().unwrap().contains("ground truth")),
            }
        }
    }
}

/// The spreader base without truth is kept on what each plane's pair front hands on (the
/// aggregator's evictions, merged across workers), not on every packet: its thresholds are
/// exactly those of a HyperLogLog fed every packet's addresses, with or without Agg-Evict and
/// for any number of workers.
#[test]
fn spreader_base_from_the_fronts_equals_one_fed_every_packet() {
    use algo::{Algorithm, BuildCtx, Side};
    use distinct::{HyperLogLog, HyperLogLogConfig};
    use key::KeyKind;
    let (seed, frac) = (9, 0.01);
    let spec_g = gen::Spec {
        packets: 120_000,
        flows: 6_000,
        seed: 3,
        ..gen::Spec::default()
    };
    // The reference: every packet's source and destination, per epoch of 40 000 packets.
    let ctx = BuildCtx {
        seed,
        key_len: 4,
        side: Side::Src,
    };
    let hll = || HyperLogLog::new(HyperLogLogConfig { precision: 12 }, &ctx).unwrap();
    let mut want = vec![];
    let (mut src, mut dst, mut n) = (hll(), hll(), 0);
    gen::generate(&spec_g, |p| {
        src.update(&p.tuple.key(KeyKind::Src), 1);
        dst.update(&p.tuple.key(KeyKind::Dst), 1);
        n += 1;
        if n % 40_000 == 0 {
            let t = |h: &HyperLogLog| (frac * h.estimate()).ceil().max(1.0);
            // Superspreaders against destinations, DDoS against sources.
            want.push((t(&dst), t(&src)));
            (src, dst) = (hll(), hll());
        }
    })
    .unwrap();
    for accel in [measure::Accel::None, measure::Accel::AggEvict] {
        for workers in [1, 2, 3] {
            let mut m = vec![
                spec(Task::Superspreaders, "two_level"),
                spec(Task::Ddos, "two_level"),
                spec(Task::HeavyHitters, "count_min"),
            ];
            m[0].threshold = Some(frac);
            m[1].threshold = Some(frac);
            let cfg = RunConfig {
                epoch_packets: Some(40_000),
                measures: m,
                truth: false,
                seed,
                accel,
                workers,
                ..RunConfig::default()
            };
            let mut r = Runner::new(cfg, "peers").unwrap();
            gen::generate(&spec_g, |p| r.push(p.ts_ns, &p.tuple, p.wire_len)).unwrap();
            let rep = r.finish();
            let got: Vec<_> = rep
                .epochs
                .iter()
                .map(|e| (e.tasks[0].threshold.unwrap(), e.tasks[1].threshold.unwrap()))
                .collect();
            assert_eq!(got, want, "{accel:?}, {workers} workers");
        }
    }
}
