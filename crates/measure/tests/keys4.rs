//! `Runner::push_keys4` (issue 14: keys4 traces read at memory speed): a run fed the u32 blocks
//! of a keys4 trace reports exactly what it reports fed the same records one by one through
//! `Runner::push`: epochs, totals, truth, every task's answer and score, for order-dependent
//! algorithms too (same order, same batches), with and without workers, truth, Agg-Evict, and
//! for block sizes that cut batches and epochs anywhere.

use algo::Task;
use key::{KeyKind, Tuple};
use measure::{Accel, MeasureSpec, Report, RunConfig, Runner};

mod common;
use common::spec;

/// The source addresses of a Zipf 1.0 trace, 100 k packets over 20 k flows.
fn sources() -> Vec<[u8; 4]> {
    let spec = gen::Spec {
        packets: 100_000,
        flows: 20_000,
        skew: 1.0,
        seed: 5,
        ..gen::Spec::default()
    };
    let mut v = vec![];
    gen::generate(&spec, |p| {
        v.push([
            p.tuple.src[0],
            p.tuple.src[1],
            p.tuple.src[2],
            p.tuple.src[3],
        ])
    })
    .unwrap();
    v
}

/// Every task that source keys can answer, by linear, idempotent and order-dependent
/// algorithms alike.
fn measures() -> Vec<MeasureSpec> {
    let mut v = vec![];
    for a in [
        "count_min",
        "space_saving",
        "heap",
        "misra_gries",
        "univmon",
        "rev_sketch",
    ] {
        v.push(spec(Task::HeavyHitters, a));
    }
    for a in ["rev_sketch", "deltoid", "ewma_change", "count_min"] {
        v.push(spec(Task::HeavyChangers, a));
    }
    for a in ["fm", "linear_counting", "hyperloglog", "kmin"] {
        v.push(spec(Task::Cardinality, a));
    }
    v.push(spec(Task::FlowSize, "count_array"));
    v.push(spec(Task::FlowSize, "cuckoo1"));
    v.push(spec(Task::FlowSizeDistribution, "mrac"));
    v.push(spec(Task::Entropy, "linear_hash"));
    v.push(spec(Task::TopK, "space_saving"));
    v
}

/// What must not change: every epoch (tasks, answers, truth, scores) and the totals, as JSON.
fn what(r: &Report) -> String {
    let epochs: Vec<_> = r.epochs.iter().map(measure::EpochReport::answers).collect();
    serde_json::to_string(&(&epochs, &r.totals)).unwrap()
}

#[test]
fn keys4_blocks_report_what_records_report() {
    let src = sources();
    let words: Vec<u32> = src.iter().map(|b| u32::from_be_bytes(*b)).collect();
    for (workers, truth, accel) in [
        (1, true, Accel::None),
        (1, false, Accel::AggEvict),
        (2, true, Accel::AggEvict),
        (3, false, Accel::None),
    ] {
        let cfg = RunConfig {
            // 25 k packets an epoch and batches of 1000: block ends fall everywhere in both.
            key: KeyKind::Src,
            epoch_packets: Some(25_000),
            batch: 1000,
            measures: measures(),
            workers,
            truth,
            accel,
            ..RunConfig::default()
        };
        let mut one = Runner::new(cfg.clone(), "keys4").unwrap();
        for b in &src {
            one.push(0, &Tuple::v4(*b, [0; 4], 0, 0, 0), 0);
        }
        let want = what(&one.finish());
        for block in [4096, 999, 1] {
            let mut r = Runner::new(cfg.clone(), "keys4").unwrap();
            assert!(r.takes_keys4());
            for blk in words.chunks(block) {
                r.push_keys4(blk);
            }
            let got = r.finish();
            assert_eq!(got.totals.packets, src.len() as u64);
            assert_eq!(got.epochs.len(), 4);
            assert_eq!(
                what(&got),
                want,
                "{workers} workers, truth {truth}, {accel:?}, blocks of {block}"
            );
        }
    }
}

#[test]
fn keys4_blocks_only_for_source_keys_without_a_fast_path_or_watch() {
    let on = |key: KeyKind| RunConfig {
        key,
        measures: vec![spec(Task::Cardinality, "hyperloglog")],
        workers: 1,
        ..RunConfig::default()
    };
    assert!(Runner::new(on(KeyKind::Src), "k").unwrap().takes_keys4());
    assert!(!Runner::new(on(KeyKind::Dst), "k").unwrap().takes_keys4());
    assert!(!Runner::new(on(KeyKind::FiveTuple), "k")
        .unwrap()
        .takes_keys4());
    // A spreader task adds pair keys.
    let mut cfg = on(KeyKind::Src);
    cfg.measures.push(spec(Task::Superspreaders, "two_level"));
    assert!(!Runner::new(cfg, "k").unwrap().takes_keys4());
}
