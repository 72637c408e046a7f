//! `--workers N` (issue 13): the linear and idempotent algorithms (ALGORITHMS.md classes A and B)
//! answer with N = 2, 3, 4 workers exactly what they answer with one, with and without Agg-Evict
//! and with several key kinds in one run; the order-dependent summaries keep their guarantees
//! against exact truth; a failing worker ends the run with the worker and epoch named; bad worker
//! counts are refused.

use std::sync::OnceLock;

use algo::Task;
use key::KeyKind;
use measure::{Accel, MeasureSpec, Report, RunConfig, Runner};

mod common;
use common::spec;

/// Zipf 1.0 over 20 k flows, 300 k packets: three epochs of 100 k.
fn trace() -> &'static [gen::GenPacket] {
    static T: OnceLock<Vec<gen::GenPacket>> = OnceLock::new();
    T.get_or_init(|| {
        let spec = gen::Spec {
            packets: 300_000,
            flows: 20_000,
            skew: 1.0,
            seed: 31,
            ..gen::Spec::default()
        };
        let mut v = vec![];
        gen::generate(&spec, |p| v.push(*p)).unwrap();
        v
    })
}

fn run(measures: Vec<MeasureSpec>, workers: usize, accel: Accel) -> Report {
    run_truth(measures, workers, accel, true)
}

fn run_truth(measures: Vec<MeasureSpec>, workers: usize, accel: Accel, truth: bool) -> Report {
    let cfg = RunConfig {
        epoch_packets: Some(100_000),
        measures,
        workers,
        accel,
        truth,
        ..RunConfig::default()
    };
    run_cfg(cfg)
}

/// The trace through a runner of `cfg`.
fn run_cfg(cfg: RunConfig) -> Report {
    let mut r = Runner::new(cfg, "workers").unwrap();
    for p in trace() {
        r.push(p.ts_ns, &p.tuple, p.wire_len);
    }
    r.finish()
}

/// Every task's answer of every epoch (keys, estimates, value), its exact true count and the
/// epoch's flow count, as JSON: what must not change.
fn answers(r: &Report) -> Vec<String> {
    r.epochs
        .iter()
        .flat_map(|e| e.tasks.iter().map(move |t| (e, t)))
        .map(|(e, t)| {
            format!(
                "{} {} ({:?} flows, {:?} true): {}",
                t.task.name(),
                t.algorithm,
                e.flows,
                t.truth.count,
                serde_json::to_string(&t.answer).unwrap()
            )
        })
        .collect()
}

/// The float figures of every task (true value, accuracy metrics): the workers keep the ground
/// truth of their flows, merged per epoch, so these are the same sums in another order (the
/// flows' map order): equal to 1e-9, relative, or 1e-12 (an entropy's relative error of 2e-14).
fn scores(r: &Report) -> Vec<Option<f64>> {
    r.epochs
        .iter()
        .flat_map(|e| &e.tasks)
        .flat_map(|t| {
            let a = &t.accuracy;
            [
                t.truth.value,
                a.precision,
                a.recall,
                a.f1,
                a.relative_error,
                a.are,
                a.mrd,
            ]
        })
        .collect()
}

fn close(a: &[Option<f64>], b: &[Option<f64>]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()) + 1e-12,
            (None, None) => true,
            _ => false,
        })
}

/// A measure of `task` by `algo` on key kind `key`.
fn on(task: Task, algo: &str, key: KeyKind) -> MeasureSpec {
    let mut m = spec(task, algo);
    m.key = Some(key);
    m
}

/// Classes A and B, each on its tasks, three key kinds in one run (source for the reversible
/// sketches, pairs for the spreaders, 5-tuples for the rest).
fn linear_and_idempotent() -> Vec<MeasureSpec> {
    vec![
        on(Task::HeavyHitters, "rev_sketch", KeyKind::Src),
        on(Task::HeavyChangers, "rev_sketch", KeyKind::Src),
        on(Task::HeavyHitters, "deltoid", KeyKind::FiveTuple),
        on(Task::HeavyChangers, "deltoid", KeyKind::FiveTuple),
        spec(Task::Superspreaders, "two_level"),
        spec(Task::Ddos, "two_level"),
        on(Task::FlowSizeDistribution, "mrac", KeyKind::FiveTuple),
        on(Task::Cardinality, "mrac", KeyKind::FiveTuple),
        on(Task::Cardinality, "fm", KeyKind::Src),
        on(Task::Cardinality, "kmin", KeyKind::FiveTuple),
        on(Task::Cardinality, "linear_counting", KeyKind::FiveTuple),
        on(Task::Cardinality, "hyperloglog", KeyKind::Pair),
        // Count-Min's and Count Sketch's counters are linear: flow sizes are theirs alone.
        on(Task::FlowSize, "count_min", KeyKind::FiveTuple),
        on(Task::FlowSize, "count_sketch", KeyKind::Src),
        // Exact tables below their capacity: every count exact whatever the order.
        on(Task::FlowSize, "linear_hash", KeyKind::FiveTuple),
        on(Task::Entropy, "cuckoo4", KeyKind::Src),
        // Exact counts and EWMA predictions, summed: a flow's history lives in its worker.
        on(Task::HeavyChangers, "ewma_change", KeyKind::FiveTuple),
    ]
}

#[test]
fn linear_and_idempotent_answers_do_not_depend_on_the_workers() {
    for accel in [Accel::None, Accel::AggEvict] {
        let one = run(linear_and_idempotent(), 1, accel);
        let want = answers(&one);
        assert_eq!(want.len(), 3 * linear_and_idempotent().len());
        for n in [2, 3, 4] {
            let r = run(linear_and_idempotent(), n, accel);
            let got = answers(&r);
            for (a, b) in want.iter().zip(&got) {
                assert_eq!(a, b, "{n} workers, {accel:?}");
            }
            assert_eq!(want.len(), got.len());
            let (s1, sn) = (scores(&one), scores(&r));
            assert!(close(&s1, &sn), "{n} workers, {accel:?}:\n{s1:?}\n{sn:?}");
        }
        // Without ground truth (with Agg-Evict the packed tuples go to the aggregators as they
        // are: the runner's batch with one worker, each worker's part with several).
        let want = answers(&run_truth(linear_and_idempotent(), 1, accel, false));
        for n in [2, 3] {
            let got = answers(&run_truth(linear_and_idempotent(), n, accel, false));
            assert_eq!(want, got, "{n} workers, {accel:?}, no truth");
        }
    }
}

/// Runs whose key kinds share no address (source and destination keys) go to the workers key
/// by key, each by its own hash, not whole packets by an address: the same answers as one
/// worker there too (the runs above, whose kinds all hold the source, go whole).
#[test]
fn kinds_without_a_common_address_go_key_by_key_alike() {
    let ms = || {
        vec![
            on(Task::HeavyHitters, "count_min", KeyKind::Src),
            on(Task::Cardinality, "hyperloglog", KeyKind::Dst),
            on(Task::FlowSize, "count_min", KeyKind::Dst),
        ]
    };
    for accel in [Accel::None, Accel::AggEvict] {
        let one = run(ms(), 1, accel);
        let two = run(ms(), 2, accel);
        assert_eq!(answers(&one), answers(&two), "{accel:?}");
        assert!(close(&scores(&one), &scores(&two)), "{accel:?}");
    }
}

/// Byte weights travel with the packets to the workers (packet counts travel as none, every
/// weight 1): the linear sketches answer alike with 1-3 workers, whole packets and key by key.
#[test]
fn byte_weights_answer_alike_with_workers() {
    for kinds in [
        [KeyKind::FiveTuple, KeyKind::Src],
        [KeyKind::Src, KeyKind::Dst],
    ] {
        let ms = || {
            vec![
                on(Task::FlowSize, "count_min", kinds[0]),
                on(Task::HeavyHitters, "count_min", kinds[1]),
            ]
        };
        for accel in [Accel::None, Accel::AggEvict] {
            let go = |workers, weight| {
                run_cfg(RunConfig {
                    epoch_packets: Some(100_000),
                    measures: ms(),
                    workers,
                    accel,
                    weight,
                    ..RunConfig::default()
                })
            };
            let one = go(1, truth::Weight::Bytes);
            for n in [2, 3] {
                let r = go(n, truth::Weight::Bytes);
                assert_eq!(
                    answers(&one),
                    answers(&r),
                    "{kinds:?} {accel:?} {n} workers"
                );
                // The weights reached the workers: packet counts answer otherwise.
                let packets = go(n, truth::Weight::Packets);
                assert_ne!(answers(&packets), answers(&r), "{kinds:?} {accel:?} {n}");
            }
        }
    }
}

/// `cfg` over the trace with every 50th packet (and a run of 300 from packet 150 000) as
/// IPv6: without ground truth, a reader's batch of packed IPv4 packets meets IPv6 ones, which go
/// to the workers after the batch so far (`Runner::spill_v4`).
fn run_mixed(cfg: RunConfig) -> Report {
    let mut r = Runner::new(cfg, "workers").unwrap();
    for (n, p) in trace().iter().enumerate() {
        let mut t = p.tuple;
        if n % 50 == 7 || (150_000..150_300).contains(&n) {
            t.v6 = true;
            t.src[15] = t.src[0];
            t.dst[15] = 2;
        }
        r.push(p.ts_ns, &t, p.wire_len);
    }
    r.finish()
}

/// Two answer lines alike: equal, or, for an entropy, estimates equal to 1e-12 relative (a sum
/// over the merged table's flows, whose order depends on where each worker's flows landed; with
/// byte weights the terms are not the few values of small packet counts).
fn same(a: &str, b: &str) -> bool {
    let estimate = |l: &str| {
        let (head, json) = l.split_once("): ")?;
        let v: serde_json::Value = serde_json::from_str(json).ok()?;
        Some((head.to_string(), v["estimate"].as_f64()?, v["keys"].clone()))
    };
    a == b
        || a.starts_with("entropy")
            && match (estimate(a), estimate(b)) {
                (Some((h, x, k)), Some((i, y, l))) => {
                    h == i && k == l && (x - y).abs() <= 1e-12 * x.abs()
                }
                _ => false,
            }
}

/// Without ground truth the reader hands its workers whole batches of packed IPv4 packets
/// (`Pool::put_v4s`): with IPv6 packets among them and with byte weights, every linear and
/// idempotent answer is the one worker's, and every packet reaches one aggregator.
#[test]
fn packed_batches_reach_the_workers_as_packets_do() {
    for accel in [Accel::None, Accel::AggEvict] {
        for weight in [truth::Weight::Packets, truth::Weight::Bytes] {
            // A flow size distribution is in packets (refused with byte weights).
            let measures: Vec<MeasureSpec> = linear_and_idempotent()
                .into_iter()
                .filter(|m| {
                    weight == truth::Weight::Packets || m.task != Task::FlowSizeDistribution
                })
                .collect();
            let go = |workers| {
                run_mixed(RunConfig {
                    epoch_packets: Some(100_000),
                    measures: measures.clone(),
                    workers,
                    accel,
                    weight,
                    truth: false,
                    ..RunConfig::default()
                })
            };
            let one = go(1);
            let want = answers(&one);
            assert_eq!(want.len(), 3 * measures.len());
            for n in [2, 3] {
                let r = go(n);
                for (a, b) in want.iter().zip(&answers(&r)) {
                    assert!(same(a, b), "{accel:?} {weight:?} {n} workers:\n{a}\n{b}");
                }
                for a in &r.accelerators {
                    assert_eq!(a.packets, 300_000, "{accel:?} {weight:?} {n} {:?}", a.key);
                }
                assert_eq!(r.epochs.iter().map(|e| e.packets).sum::<u64>(), 300_000);
            }
        }
    }
}

/// The capture times go with the packed batches too: InstaMeasure's recorded first and last
/// times of each listed flow, with two workers, are those of the same workers given the packets
/// one by one (with ground truth).
#[test]
fn packed_batches_carry_the_capture_times() {
    let go = |truth| {
        run_mixed(RunConfig {
            epoch_packets: Some(100_000),
            measures: vec![on(Task::HeavyHitters, "instameasure", KeyKind::FiveTuple)],
            workers: 2,
            accel: Accel::None,
            truth,
            ..RunConfig::default()
        })
    };
    let listed = |r: &Report| {
        r.epochs
            .iter()
            .flat_map(|e| &e.tasks)
            .flat_map(|t| &t.answer.keys)
            .map(|l| (l.key.clone(), l.estimate, l.first_ns, l.last_ns))
            .collect::<Vec<_>>()
    };
    let (by_packet, packed) = (listed(&go(true)), listed(&go(false)));
    assert!(packed.len() > 10, "{}", packed.len());
    assert!(packed.iter().all(|l| l.2.is_some_and(|f| f > 0)));
    assert_eq!(by_packet, packed);
}

/// Every packet is measured once whatever the workers: each instance's updates (without an
/// aggregator, one per packet) and every aggregator's packets sum to the run's.
#[test]
fn every_packet_reaches_one_worker() {
    let ms = vec![
        on(Task::Cardinality, "hyperloglog", KeyKind::Src),
        on(Task::FlowSize, "count_min", KeyKind::FiveTuple),
    ];
    let r = run(ms.clone(), 3, Accel::None);
    for c in &r.throughput {
        assert_eq!(c.updates, 300_000, "{}", c.algorithm);
    }
    let r = run(ms, 3, Accel::AggEvict);
    assert_eq!(r.accelerators.len(), 2);
    for a in &r.accelerators {
        assert_eq!(a.packets, 300_000, "{:?}", a.key);
        assert!(a.evicted < a.packets);
    }
}

/// The order-dependent summaries, merged from several workers, keep their guarantees: the
/// heavy hitters and top-k of Misra-Gries, Space-Saving and the heap, and the candidate sets of
/// Count-Min and UnivMon, found as well as the bars ask (F1 >= 0.9) in every epoch.
#[test]
fn merged_summaries_keep_their_guarantees() {
    for algo in [
        "misra_gries",
        "space_saving",
        "heap",
        "count_min",
        "univmon",
    ] {
        let ms = vec![spec(Task::HeavyHitters, algo), spec(Task::TopK, algo)];
        let r = run(ms, 3, Accel::AggEvict);
        for e in &r.epochs {
            for t in &e.tasks {
                let f1 = t.accuracy.f1.unwrap();
                assert!(f1 >= 0.9, "{algo} {} epoch {}: F1 {f1}", t.task, e.index);
            }
        }
    }
}

#[test]
fn a_failing_worker_is_named_with_its_epoch() {
    let cfg = RunConfig {
        epoch_packets: Some(100_000),
        measures: vec![spec(Task::Cardinality, "hyperloglog")],
        workers: 3,
        inject_failure: Some(1),
        ..RunConfig::default()
    };
    let mut r = Runner::new(cfg, "failing").unwrap();
    for p in trace() {
        r.push(p.ts_ns, &p.tuple, p.wire_len);
    }
    let f = r.try_finish().unwrap_err();
    assert_eq!((f.worker, f.epoch), (1, 0), "{f}");
    // In the epoch its failure was first seen, with what it said (its panic).
    assert_eq!(
        f.to_string(),
        "worker 1 failed in epoch 0: injected failure (test)"
    );
}

/// Epochs answered off the packet path (`answer.rs`: on their own thread, the states recycled
/// as reset spares, to the reader or to the workers) are answered exactly as on the packet path
/// (`Runner::answer_inline`): every task of the default set and heavy changers by every
/// algorithm that keeps the previous epoch or its own history, over ten epochs (the rotation of
/// states goes round several times), with one worker and with two.
#[test]
fn answers_off_the_packet_path_equal_answers_inline() {
    let mut measures = RunConfig::measures_from_lists(&Task::ALL, &[]).unwrap();
    for algo in ["count_min", "ewma_change", "univmon"] {
        measures.push(spec(Task::HeavyChangers, algo));
    }
    for workers in [1, 2] {
        let go = |inline: bool| {
            let cfg = RunConfig {
                epoch_packets: Some(30_000),
                measures: measures.clone(),
                workers,
                accel: Accel::AggEvict,
                ..RunConfig::default()
            };
            let mut r = Runner::new(cfg, "answers").unwrap();
            if inline {
                r.answer_inline();
            }
            for p in trace() {
                r.push(p.ts_ns, &p.tuple, p.wire_len);
            }
            r.finish()
        };
        let (thread, inline) = (go(false), go(true));
        assert_eq!(thread.epochs.len(), 10);
        assert_eq!(answers(&thread), answers(&inline), "{workers} workers");
        assert_eq!(scores(&thread), scores(&inline), "{workers} workers");
    }
}

/// A panic while answering an epoch (off the packet path, `answer.rs`) ends the run with the
/// answer thread and the epoch named, with one worker and with several: no hang, no lost report
/// passed off as complete.
#[test]
fn a_failing_answer_thread_is_named_with_its_epoch() {
    for workers in [1, 3] {
        let cfg = RunConfig {
            epoch_packets: Some(100_000),
            measures: vec![spec(Task::HeavyHitters, "count_min")],
            workers,
            inject_failure: Some(measure::ANSWERS),
            ..RunConfig::default()
        };
        let mut r = Runner::new(cfg, "failing").unwrap();
        for p in trace() {
            r.push(p.ts_ns, &p.tuple, p.wire_len);
        }
        let f = r.try_finish().unwrap_err();
        assert_eq!(f.epoch, 0, "{f}");
        assert!(
            f.to_string()
                .starts_with("the answer thread failed in epoch 0: injected failure"),
            "{f}"
        );
    }
}

#[test]
fn worker_counts_outside_1_to_256_are_refused() {
    for workers in [0, 257] {
        let cfg = RunConfig {
            measures: vec![spec(Task::Cardinality, "hyperloglog")],
            workers,
            ..RunConfig::default()
        };
        let e = Runner::new(cfg, "bad").err().unwrap().to_string();
        assert!(e.contains("workers") && e.contains("1..=256"), "{e}");
    }
}

/// Each epoch reports what it cost each instance (update time and updates from every worker,
/// query time at its end), and the epochs add up to the run's cost table: a live monitor can
/// show costs while it runs.
#[test]
fn epoch_costs_add_up_to_the_run_costs() {
    let measures = vec![
        on(Task::HeavyHitters, "count_min", KeyKind::Src),
        on(Task::FlowSizeDistribution, "mrac", KeyKind::Src),
        on(Task::Cardinality, "hyperloglog", KeyKind::Pair),
    ];
    for workers in [1, 3] {
        for accel in [Accel::None, Accel::AggEvict] {
            let r = run(measures.clone(), workers, accel);
            assert_eq!(r.epochs.len(), 3);
            for (n, c) in r.throughput.iter().enumerate() {
                let of = |e: &measure::EpochReport| e.costs[n].clone();
                assert!(r
                    .epochs
                    .iter()
                    .all(|e| of(e).algorithm == c.algorithm && of(e).key == c.key));
                let updates: u64 = r.epochs.iter().map(|e| of(e).updates).sum();
                assert_eq!(updates, c.updates, "{} {workers} workers", c.algorithm);
                assert!(r.epochs.iter().all(|e| of(e).updates > 0));
                let query: f64 = r.epochs.iter().map(|e| of(e).query_seconds).sum();
                assert!(
                    (query - c.query_seconds).abs() <= 1e-9 * (1.0 + c.query_seconds),
                    "{}: {query} vs {}",
                    c.algorithm,
                    c.query_seconds
                );
                // Each epoch takes the clock's cost from its own batches (at least 0), so the
                // epochs' sum is never below the run's figure.
                let update: f64 = r.epochs.iter().map(|e| of(e).update_seconds).sum();
                assert!(update + 1e-9 >= c.seconds, "{}", c.algorithm);
                assert!(update > 0.0, "{}", c.algorithm);
            }
        }
    }
}
