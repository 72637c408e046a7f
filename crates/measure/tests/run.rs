//! The runner end to end on a generated trace: determinism, exact algorithms scoring perfectly,
//! and guarantees that hold whatever the data (Count-Min never misses a heavy hitter).

use algo::Task;
use measure::{MeasureSpec, RunConfig, Runner};

fn spec(task: Task, algo: &str) -> MeasureSpec {
    MeasureSpec {
        task,
        algorithm: algo.into(),
        key: None,
        threshold: None,
        k: None,
        params: toml::Table::new(),
    }
}

fn run(cfg: &RunConfig) -> measure::Report {
    let g = gen::Spec {
        packets: 300_000,
        flows: 20_000,
        seed: 3,
        ..gen::Spec::default()
    };
    let mut r = Runner::new(cfg.clone(), "test").unwrap();
    gen::generate(&g, |p| r.push(p.ts_ns, &p.tuple, p.wire_len)).unwrap();
    r.finish()
}

fn cfg(measures: Vec<MeasureSpec>) -> RunConfig {
    RunConfig {
        epoch_packets: Some(100_000),
        measures,
        ..RunConfig::default()
    }
}

#[test]
fn same_trace_config_and_seed_give_the_same_report() {
    let c = cfg(RunConfig::measures_from_lists(&[], &[]).unwrap());
    let a = run(&c);
    let b = run(&c);
    assert_eq!(a.epochs.len(), 3);
    // Everything but the timings is identical.
    assert_eq!(
        serde_json::to_value(&a.epochs).unwrap(),
        serde_json::to_value(&b.epochs).unwrap()
    );
    assert_eq!(a.totals.packets, 300_000);
    assert_eq!(a.totals.classes.ipv4, 300_000);
}

#[test]
fn exact_table_scores_perfectly_and_count_min_misses_no_heavy_hitter() {
    let c = cfg(vec![
        spec(Task::FlowSize, "linear_hash"),
        spec(Task::Cardinality, "linear_hash"),
        spec(Task::HeavyHitters, "linear_hash"),
        spec(Task::HeavyChangers, "linear_hash"),
        spec(Task::Entropy, "linear_hash"),
        spec(Task::FlowSizeDistribution, "linear_hash"),
        spec(Task::HeavyHitters, "count_min"),
    ]);
    let r = run(&c);
    // linear_hash is shared by its five tasks: one instance.
    assert_eq!(r.throughput.len(), 2);
    for e in &r.epochs {
        for t in &e.tasks {
            let a = &t.accuracy;
            match (t.algorithm.as_str(), t.task) {
                ("linear_hash", Task::HeavyChangers) if e.index == 0 => {
                    assert!(t.note.is_some())
                }
                ("linear_hash", Task::HeavyHitters | Task::HeavyChangers) => {
                    assert_eq!((a.precision, a.recall), (Some(1.0), Some(1.0)), "{t:?}");
                    assert!(t.truth.count.unwrap() > 0);
                }
                ("linear_hash", Task::FlowSize | Task::Cardinality | Task::Entropy) => {
                    assert!(a.relative_error.unwrap() < 1e-9, "{t:?}")
                }
                ("linear_hash", Task::FlowSizeDistribution) => assert_eq!(a.mrd, Some(0.0)),
                ("count_min", Task::HeavyHitters) => {
                    assert_eq!(a.recall, Some(1.0), "{t:?}");
                    assert!(a.precision.unwrap() > 0.5, "{t:?}");
                }
                _ => unreachable!(),
            }
        }
    }
}

/// Agg-Evict in front of the algorithms changes no answer of the order-independent ones
/// (ALGORITHMS.md 0 and 12): same estimates, same accuracy, epoch by epoch.
#[test]
fn agg_evict_changes_no_answer_of_order_independent_algorithms() {
    let measures = vec![
        spec(Task::FlowSize, "count_min"),
        spec(Task::Cardinality, "hyperloglog"),
        spec(Task::Cardinality, "linear_counting"),
        spec(Task::FlowSizeDistribution, "mrac"),
        spec(Task::HeavyHitters, "linear_hash"),
        spec(Task::HeavyChangers, "deltoid"),
        spec(Task::Entropy, "linear_hash"),
    ];
    let plain = cfg(measures.clone());
    let mut accel = cfg(measures);
    accel.accel = measure::Accel::AggEvict;
    // Small aggregator: many evictions mid-epoch, plus the epoch-end flush.
    accel.agg_evict.arrays = 64;
    let a = run(&plain);
    let b = run(&accel);
    assert_eq!(a.accel, "none");
    assert_eq!(b.accel, "agg_evict");
    let share = b.accelerators[0].evicted_share;
    assert!(share > 0.0 && share < 1.0, "{share}");
    assert_eq!(
        serde_json::to_value(&a.epochs).unwrap(),
        serde_json::to_value(&b.epochs).unwrap()
    );
}

/// Source keys over a trace mixing IPv4 and IPv6: batches of only 4-byte keys take the u32 path
/// (`update_batch_u32`), batches holding an IPv6 source take the FlowKey path. Both feed every
/// key exactly once: the exact table still scores perfectly, with and without Agg-Evict.
#[test]
fn u32_and_flow_key_batches_both_count_every_source() {
    for accel in [
        measure::config::Accel::None,
        measure::config::Accel::AggEvict,
    ] {
        let c = RunConfig {
            key: key::KeyKind::Src,
            ipv6: true,
            accel,
            ..cfg(vec![
                spec(Task::FlowSize, "linear_hash"),
                spec(Task::Cardinality, "linear_hash"),
                spec(Task::HeavyHitters, "count_min"),
            ])
        };
        let g = gen::Spec {
            packets: 300_000,
            flows: 20_000,
            seed: 5,
            ..gen::Spec::default()
        };
        let mut r = Runner::new(c, "test").unwrap();
        let mut i = 0u64;
        gen::generate(&g, |p| {
            i += 1;
            // One IPv6 packet in 40 (about one batch of 32 in two holds one): its source
            // embeds the IPv4 source, so the families' flows stay distinct.
            if i.is_multiple_of(40) {
                let mut t = p.tuple;
                t.v6 = true;
                t.src[15] = 0x66;
                r.push(p.ts_ns, &t, p.wire_len)
            } else {
                r.push(p.ts_ns, &p.tuple, p.wire_len)
            }
        })
        .unwrap();
        let rep = r.finish();
        assert_eq!(rep.totals.classes.ipv6, 300_000 / 40);
        for e in &rep.epochs {
            for t in &e.tasks {
                match (t.algorithm.as_str(), t.task) {
                    ("linear_hash", _) => {
                        assert!(t.accuracy.relative_error.unwrap() < 1e-9, "{accel:?} {t:?}")
                    }
                    _ => assert_eq!(t.accuracy.recall, Some(1.0), "{accel:?} {t:?}"),
                }
            }
        }
        for cost in &rep.throughput {
            assert_eq!(cost.skipped, 0, "{cost:?}");
        }
    }
}

/// A configuration can narrow what an algorithm answers: Count-Min without a candidate set
/// answers flow size only, and asking it for heavy hitters is an error naming both.
#[test]
fn count_min_without_candidates_refuses_heavy_hitters() {
    let mut hh = spec(Task::HeavyHitters, "count_min");
    hh.params
        .insert("candidates".into(), toml::Value::Integer(0));
    let e = Runner::new(cfg(vec![hh]), "test")
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("candidates = 0") && e.contains("heavy_hitters"),
        "{e}"
    );
    let mut fs = spec(Task::FlowSize, "count_min");
    fs.params
        .insert("candidates".into(), toml::Value::Integer(0));
    assert!(Runner::new(cfg(vec![fs]), "test").is_ok());
}

/// A Count-Min or count array asked for flow size alone is built without its heavy-hitter
/// candidate set (smaller, and the update is the counter pass alone); asked for heavy hitters
/// too, it keeps the set. The counters, and so the flow-size answers, are the same either way.
#[test]
fn counter_sketches_serving_flow_size_alone_drop_the_candidate_set() {
    for algo in ["count_min", "count_array"] {
        let alone = run(&cfg(vec![spec(Task::FlowSize, algo)]));
        let both = run(&cfg(vec![
            spec(Task::FlowSize, algo),
            spec(Task::HeavyHitters, algo),
        ]));
        let mem = |r: &measure::Report| {
            let c: Vec<_> = r
                .throughput
                .iter()
                .filter(|c| c.algorithm == algo)
                .collect();
            assert_eq!(c.len(), 1, "{algo}: one shared instance");
            c[0].memory_bytes
        };
        assert!(
            mem(&alone) < mem(&both),
            "{algo}: {} vs {}",
            mem(&alone),
            mem(&both)
        );
        let flow_size = |r: &measure::Report| {
            r.epochs
                .iter()
                .map(|e| {
                    let v = serde_json::to_value(e).unwrap();
                    v["tasks"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|t| t["task"] == "flow_size")
                        .cloned()
                        .unwrap()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(flow_size(&alone), flow_size(&both), "{algo}");
    }
}

/// Resident set size of this process in bytes (Linux `/proc/self/statm`), `None` elsewhere.
fn rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = s.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// A run over an endless stream whose caller takes each epoch as it closes holds no past
/// epoch: over 60,000 one-packet epochs the process's resident memory stays flat (measured, not
/// guessed), while the same run keeping its epochs grows by their reports.
#[test]
fn taken_epochs_leave_memory_flat_on_an_endless_stream() {
    let Some(_) = rss_bytes() else {
        eprintln!("skip: no /proc/self/statm to measure memory");
        return;
    };
    let c = RunConfig {
        epoch_packets: Some(1),
        // Small structures: the test is about the report, not the epoch-end resets.
        measures: vec![
            spec(Task::Cardinality, "hyperloglog"),
            MeasureSpec {
                params: "rows = 2\nwidth = 1024".parse().unwrap(),
                ..spec(Task::HeavyHitters, "count_min")
            },
        ],
        ..RunConfig::default()
    };
    let g = gen::Spec {
        packets: 60_000,
        flows: 1_000,
        seed: 9,
        ..gen::Spec::default()
    };
    let mut r = Runner::new(c.clone(), "endless").unwrap();
    let (mut taken, mut n, mut at_10k) = (0usize, 0u64, 0u64);
    gen::generate(&g, |p| {
        r.push(p.ts_ns, &p.tuple, p.wire_len);
        taken += r.take_completed().len();
        n += 1;
        if n == 10_000 {
            at_10k = rss_bytes().unwrap_or(0);
        }
    })
    .unwrap();
    let grown = rss_bytes().unwrap_or(0).saturating_sub(at_10k);
    assert!(r.completed_epochs().is_empty());
    let rep = r.finish();
    // Every epoch was reported exactly once: taken during the run, the last one by `finish`.
    assert_eq!(taken + rep.epochs.len(), 60_000);
    assert_eq!(rep.totals.epochs, 60_000);
    assert!(
        grown < 2 << 20,
        "resident memory grew by {grown} bytes over 50,000 epochs"
    );

    // The same run keeping its epochs holds every report (what `--json` needs at the end).
    let mut k = Runner::new(c, "kept").unwrap();
    gen::generate(&g, |p| k.push(p.ts_ns, &p.tuple, p.wire_len)).unwrap();
    assert_eq!(k.finish().epochs.len(), 60_000);
}
