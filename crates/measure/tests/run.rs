//! The runner end to end on a generated trace: determinism, exact algorithms scoring perfectly,
//! and guarantees that hold whatever the data (Count-Min never misses a heavy hitter).

use algo::Task;
use measure::{MeasureSpec, RunConfig, Runner};

mod common;
use common::spec;

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
        serde_json::to_value(answers(&a)).unwrap(),
        serde_json::to_value(answers(&b)).unwrap()
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
                    // Exact: each listed key's truth (size, change) is its estimate.
                    assert!(!t.answer.keys.is_empty());
                    for l in &t.answer.keys {
                        assert_eq!(l.truth, Some(l.estimate), "{t:?}");
                    }
                }
                ("linear_hash", Task::FlowSize | Task::Cardinality | Task::Entropy) => {
                    assert!(a.relative_error.unwrap() < 1e-9, "{t:?}")
                }
                ("linear_hash", Task::FlowSizeDistribution) => assert_eq!(a.mrd, Some(0.0)),
                ("count_min", Task::HeavyHitters) => {
                    assert_eq!(a.recall, Some(1.0), "{t:?}");
                    assert!(a.precision.unwrap() > 0.5, "{t:?}");
                    // Count-Min never under-estimates: a listed key's true size is at most
                    // its estimate.
                    for l in &t.answer.keys {
                        assert!(l.truth.unwrap() <= l.estimate, "{l:?}");
                    }
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
        serde_json::to_value(answers(&a)).unwrap(),
        serde_json::to_value(answers(&b)).unwrap()
    );
}

/// A trace of four parts, bursty Zipf(1.1) and shuffled Zipf(0.6) in turn (each its own seed,
/// its capture time after the previous part's), 240,000 packets over 20,000 flows: where an
/// adaptive front aggregates the bursty parts and steps aside in the shuffled ones.
fn run_alternating(cfg: &RunConfig) -> measure::Report {
    let mut r = Runner::new(cfg.clone(), "test").unwrap();
    let parts = [(gen::Order::Bursty, 1.1), (gen::Order::Shuffled, 0.6)];
    for part in 0..4u64 {
        let (order, skew) = parts[part as usize % 2];
        let g = gen::Spec {
            packets: 60_000,
            flows: 20_000,
            // Every flow its own source: the source keys are as many as the flows.
            sources: Some(20_000),
            order,
            skew,
            seed: 10 + part,
            ..gen::Spec::default()
        };
        let base = part * 1_000_000_000_000;
        gen::generate(&g, |p| r.push(base + p.ts_ns, &p.tuple, p.wire_len)).unwrap();
    }
    r.finish()
}

/// `agg_mode = "auto"` switching window by window (a tiny aggregator, windows of 1024
/// packets, cheap algorithms: the shuffled parts do not pay) changes no answer of the
/// order-independent algorithms, epoch by epoch, against no aggregator and against `always`;
/// Space-Saving (order-dependent) keeps its guarantee: every heavy hitter found.
#[test]
fn adaptive_agg_evict_switching_changes_no_answer() {
    let measures = vec![
        spec(Task::FlowSize, "count_min"),
        spec(Task::Cardinality, "hyperloglog"),
        spec(Task::Cardinality, "linear_counting"),
        spec(Task::Cardinality, "fm"),
        spec(Task::Cardinality, "kmin"),
        spec(Task::FlowSizeDistribution, "mrac"),
    ];
    let plain = RunConfig {
        key: key::KeyKind::Src,
        ..cfg(measures.clone())
    };
    let with = |mode: measure::AggMode| {
        let mut c = cfg(measures.clone());
        // Source keys: the u32 path end to end.
        c.key = key::KeyKind::Src;
        c.accel = measure::Accel::AggEvict;
        c.agg_evict.arrays = 16;
        c.agg_mode = mode;
        c.agg_window = 1024;
        c
    };
    let a = run_alternating(&plain);
    let auto = run_alternating(&with(measure::AggMode::Auto));
    let always = run_alternating(&with(measure::AggMode::Always));
    let acc = &auto.accelerators[0];
    assert_eq!(acc.mode, "auto");
    assert!(
        acc.through_share > 0.1 && acc.through_share < 0.9,
        "{acc:?}"
    );
    assert!(acc.switches >= 4, "{acc:?}");
    assert_eq!(acc.switches_per_epoch, acc.switches as f64 / 3.0);
    let all = &always.accelerators[0];
    assert_eq!(
        (all.mode, all.through_share, all.switches),
        ("always", 1.0, 0)
    );
    let epochs = serde_json::to_value(answers(&a)).unwrap();
    assert_eq!(epochs, serde_json::to_value(answers(&auto)).unwrap());
    assert_eq!(epochs, serde_json::to_value(answers(&always)).unwrap());

    // Space-Saving behind the switching front: its answers differ (order), its guarantee
    // holds: every true heavy hitter reported.
    let mut ss = with(measure::AggMode::Auto);
    ss.measures = vec![spec(Task::HeavyHitters, "space_saving")];
    let r = run_alternating(&ss);
    assert!(r.accelerators[0].switches >= 4, "{:?}", r.accelerators[0]);
    for e in &r.epochs {
        for t in &e.tasks {
            assert_eq!(t.accuracy.recall, Some(1.0), "{t:?}");
        }
    }
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
            // Batches of 32, so that about one in two holds no IPv6 source (one in 40).
            batch: 32,
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

/// `--ipv6` with the default algorithms: two_level cannot hold 32-byte IPv6 pairs, so the
/// spreader tasks are answered by bloom_spreader, and the report says so; an algorithm the user
/// named is never swapped (its error stands).
#[test]
fn defaults_that_cannot_hold_the_keys_are_swapped_with_a_note() {
    let mut c = cfg(RunConfig::measures_from_lists(&[], &[]).unwrap());
    c.ipv6 = true;
    let rep = run(&c);
    assert_eq!(rep.notes.len(), 2, "{:?}", rep.notes);
    for t in [Task::Superspreaders, Task::Ddos] {
        assert!(
            rep.notes
                .iter()
                .any(|n| n.starts_with(&format!("{t}: two_level")) && n.ends_with("bloom_spreader")),
            "{:?}",
            rep.notes
        );
        for e in &rep.epochs {
            let r = e.tasks.iter().find(|r| r.task == t).unwrap();
            assert_eq!(r.algorithm, "bloom_spreader");
        }
    }
    // Without --ipv6 the defaults hold the keys: nothing swapped.
    let plain = run(&cfg(RunConfig::measures_from_lists(&[], &[]).unwrap()));
    assert!(plain.notes.is_empty(), "{:?}", plain.notes);
    // Named by the user: the error, not a swap.
    let mut named = cfg(vec![spec(Task::Superspreaders, "two_level")]);
    named.ipv6 = true;
    let e = Runner::new(named, "t").err().unwrap().to_string();
    assert!(e.contains("two_level") && e.contains("key_len"), "{e}");
}

/// Values the validators accept but no machine can hold are refused before allocating, naming
/// the budget and the largest parts (before, `capacity = 4294967296` aborted the process).
#[test]
fn a_run_over_its_memory_budget_is_refused_before_allocating() {
    let huge = |algo: &str, params: &str| {
        let mut c = cfg(vec![MeasureSpec {
            params: params.parse().unwrap(),
            ..spec(Task::FlowSize, algo)
        }]);
        c.max_memory = Some(8 << 30);
        Runner::new(c, "t").err().map(|e| e.to_string())
    };
    for (algo, params) in [
        ("linear_hash", "capacity = 4294967296"),
        ("cuckoo1", "capacity = 4294967296"),
        ("flow_radar", "bf_bits = 1099511627776"),
    ] {
        let e = huge(algo, params).unwrap_or_else(|| panic!("{algo} {params} accepted"));
        assert!(
            e.contains("max_memory") && e.contains(algo) && e.contains("GiB"),
            "{algo}: {e}"
        );
        // The parameter that makes it large is named, with its value.
        assert!(e.contains(&format!("mostly `{params}`")), "{algo}: {e}");
    }
    // The defaults fit a small budget; a tiny one names the largest structures.
    let mut c = cfg(RunConfig::measures_from_lists(&[], &[]).unwrap());
    c.max_memory = Some(1 << 30);
    assert!(Runner::new(c.clone(), "t").is_ok());
    c.max_memory = Some(1 << 20);
    let e = Runner::new(c, "t").err().unwrap().to_string();
    assert!(
        e.contains("deltoid") && e.contains("budget of 1.0 MiB"),
        "{e}"
    );
}

/// ewma_change answers |V - P| against its EWMA prediction (ALGORITHMS.md 11) and is scored
/// against the exact change of that definition: exact per-flow state, so a perfect score in
/// every epoch that has a prediction (before, it was scored against |s_t - s_(t-1)| and got
/// precision 0.80-0.87, recall 0.59-0.62 for the mismatch). The same run's linear_hash is still
/// scored against the previous epoch, and is perfect too.
#[test]
fn ewma_change_is_scored_against_its_own_change() {
    let mut alpha = spec(Task::HeavyChangers, "ewma_change");
    alpha
        .params
        .insert("alpha".into(), toml::Value::Float(0.25));
    let r = run(&cfg(vec![
        spec(Task::HeavyChangers, "ewma_change"),
        alpha,
        spec(Task::HeavyChangers, "linear_hash"),
    ]));
    assert_eq!(r.epochs.len(), 3);
    for e in &r.epochs {
        for t in &e.tasks {
            if e.index == 0 {
                assert!(t.note.is_some(), "{t:?}");
                continue;
            }
            let a = &t.accuracy;
            assert_eq!((a.precision, a.recall), (Some(1.0), Some(1.0)), "{t:?}");
            assert_eq!(a.are, Some(0.0), "{t:?}");
            assert!(t.truth.count.unwrap() > 10, "{t:?}");
        }
    }
}

/// The flow-size distribution is a histogram over packet counts: with `--weight bytes` it is
/// refused when asked for by name (the error names the task and the flag), and left out with a
/// note when it only came with "every task". Before, an exact table's byte histogram was scored
/// against the packet histogram with MRD 4e-5.
#[test]
fn flow_size_distribution_in_bytes_is_refused_or_left_out() {
    let mut c = cfg(vec![
        spec(Task::FlowSizeDistribution, "linear_hash"),
        spec(Task::FlowSize, "linear_hash"),
    ]);
    c.weight = truth::Weight::Bytes;
    let e = Runner::new(c, "t").err().expect("refused").to_string();
    assert!(
        e.contains("flow_size_distribution") && e.contains("--weight bytes"),
        "{e}"
    );
    let mut all = cfg(RunConfig::measures_from_lists(&[], &["linear_hash".into()]).unwrap());
    all.weight = truth::Weight::Bytes;
    let r = run(&all);
    assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
    assert!(
        r.notes[0].starts_with("flow_size_distribution"),
        "{:?}",
        r.notes
    );
    for e in &r.epochs {
        assert!(e.tasks.iter().all(|t| t.task != Task::FlowSizeDistribution));
        // The rest is scored in bytes, and the exact table is exact there.
        for t in &e.tasks {
            match t.task {
                Task::FlowSize | Task::Cardinality | Task::Entropy => {
                    assert!(t.accuracy.relative_error.unwrap() < 1e-9, "{t:?}")
                }
                Task::HeavyChangers if e.index == 0 => {}
                _ => assert_eq!(t.accuracy.f1, Some(1.0), "{t:?}"),
            }
        }
    }
    // In packets the same lists keep it.
    let all = cfg(RunConfig::measures_from_lists(&[], &["linear_hash".into()]).unwrap());
    assert!(all
        .measures
        .iter()
        .any(|m| m.task == Task::FlowSizeDistribution));
    assert!(Runner::new(all, "t").is_ok());
}

/// The cost table excludes the clock: every timed batch pays one `Instant` pair, measured at the
/// start of the run (`clock_ns`) and subtracted from the algorithm's time.
#[test]
fn the_cost_table_subtracts_the_clock_once_per_timed_batch() {
    let mut c = cfg(vec![spec(Task::Cardinality, "linear_hash")]);
    c.batch = 100;
    let r = run(&c);
    assert!(r.clock_ns > 0.0 && r.clock_ns < 10_000.0, "{}", r.clock_ns);
    let cost = &r.throughput[0];
    // 300,000 packets in batches of 100, one timed update each (no partial batch).
    assert_eq!(cost.timed_batches, 3_000);
    let clock = cost.timed_batches as f64 * r.clock_ns / 1e9;
    assert!((cost.clock_seconds - clock).abs() < 1e-12);
    assert!(cost.timed_seconds > 0.0);
    let net = (cost.timed_seconds - cost.clock_seconds).max(0.0);
    assert!((cost.seconds - net).abs() < 1e-12, "{cost:?}");
    let ns = cost.seconds * 1e9 / r.totals.packets as f64;
    assert!((cost.ns_per_packet - ns).abs() < 1e-9);
}

/// Pinned, non-trivial scores of a deterministic run (trace, configuration and seed fixed):
/// order-dependent counters that miss some flows, so a change to the scoring (which flows count
/// as true, what the ARE averages over, the tie rule at the k-th size), to the truth or to the
/// algorithms moves a figure. If an algorithm changes on purpose, re-derive the values.
#[test]
fn a_deterministic_run_pins_its_scores() {
    let mut ss = spec(Task::TopK, "space_saving");
    ss.params.insert("k".into(), toml::Value::Integer(128));
    ss.k = Some(100);
    let mut mg = spec(Task::HeavyHitters, "misra_gries");
    mg.params.insert("k".into(), toml::Value::Integer(64));
    let mut heap = spec(Task::TopK, "heap");
    heap.params.insert("k".into(), toml::Value::Integer(128));
    heap.k = Some(50);
    let r = run(&cfg(vec![ss, mg, heap]));
    let e = &r.epochs[0];
    let close = |x: Option<f64>, want: f64| {
        let x = x.unwrap();
        assert!((x - want).abs() < 1e-9 * want.max(1.0), "{x} != {want}");
    };
    let ss = &e.tasks[0].accuracy;
    // 54 of the 100 reported are among the true top 100; their mean relative error.
    close(ss.precision, 0.54);
    close(ss.recall, 0.54);
    close(ss.are, 0.808_381_263_784_427_3);
    let mg = &e.tasks[1];
    // 12 reported, all heavy; 203 true heavy hitters at 0.05% of 100,000 packets (T = 50).
    assert_eq!(mg.threshold, Some(50.0));
    assert_eq!((mg.answer.reported, mg.truth.count), (Some(12), Some(203)));
    close(mg.accuracy.precision, 1.0);
    close(mg.accuracy.recall, 12.0 / 203.0);
    close(mg.accuracy.are, 0.531_343_802_827_354_8);
    close(mg.accuracy.relative_error, 0.966_008_662_929_102_7);
    let heap = &e.tasks[2].accuracy;
    close(heap.precision, 0.66);
    close(heap.are, 0.106_730_959_066_776_24);
}

/// A structure that grows with the hosts it holds (bloom_spreader's per-host counters) is empty
/// after each epoch's reset: the cost table gives the largest size it reached, not the empty one.
#[test]
fn memory_of_a_growing_structure_is_its_largest() {
    let r = run(&cfg(vec![spec(Task::Superspreaders, "bloom_spreader")]));
    let c = &r.throughput[0];
    assert_eq!(c.algorithm, "bloom_spreader");
    // 20,000 flows over 5,000 sources: thousands of hosts of a few hundred bytes each.
    assert!(c.memory_bytes > 100_000, "{}", c.memory_bytes);
}

/// `netsift live`'s clock: `advance_to` closes a time epoch without a packet (answered inline,
/// it is reported at once; an epoch without packets is not), and `retune` gives the open epoch
/// its new threshold.
#[test]
fn advance_to_closes_due_time_epochs_and_retune_applies_to_the_open_one() {
    let ms = 1_000_000u64;
    let mut measures = vec![spec(Task::HeavyHitters, "count_min")];
    measures[0].threshold = Some(3.0);
    let c = RunConfig {
        epoch_ms: Some(100),
        workers: 1,
        measures: measures.clone(),
        ..RunConfig::default()
    };
    let mut r = Runner::new(c, "test").unwrap();
    r.answer_inline();
    let t0 = 1_000_000 * ms;
    assert_eq!(r.advance_to(t0), 0);
    let tuple = key::Tuple::v4([198, 18, 0, 1], [198, 19, 0, 1], 1000, 80, 6);
    for i in 0..10 {
        r.push(t0 + i * ms, &tuple, 64);
    }
    assert_eq!(r.advance_to(t0 + 99 * ms), 0);
    assert!(r.completed_epochs().is_empty());
    assert_eq!(r.advance_to(t0 + 250 * ms), 2);
    let e = r.take_completed();
    assert_eq!(e.len(), 1);
    assert_eq!((e[0].index, e[0].packets), (0, 10));
    assert_eq!(e[0].tasks[0].threshold, Some(3.0));
    // Epoch 1 had no packet: not reported. Epoch 2 gets the new threshold.
    measures[0].threshold = Some(5.0);
    assert_eq!(r.retune(&measures), 1);
    r.push(t0 + 260 * ms, &tuple, 64);
    assert_eq!(r.advance_to(t0 + 300 * ms), 3);
    let e = r.take_completed();
    assert_eq!((e.len(), e[0].index, e[0].packets), (1, 2, 1));
    assert_eq!(e[0].tasks[0].threshold, Some(5.0));
}

/// Every epoch without its costs (wall time): what must be equal between runs.
fn answers(r: &measure::Report) -> Vec<measure::EpochReport> {
    r.epochs.iter().map(measure::EpochReport::answers).collect()
}
