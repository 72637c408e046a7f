//! Accurate by default (issue 12): every algorithm of the catalog, with its default parameters and
//! only `--task/--algo/--key` chosen, meets the bars on generated Zipf traces of several skews and
//! flow counts, for every task it lists:
//!
//! - heavy hitters, heavy changers, top-k, superspreaders, DDoS: F1 >= 0.9;
//! - cardinality: relative error <= 0.05 (FM <= 0.10);
//! - entropy: relative error <= 0.05;
//! - flow-size distribution: MRD <= 0.5;
//! - flow size: ARE <= 1.0 (the mean relative error over every flow).
//!
//! Thresholds are the runner's defaults (0.05% of the epoch for heavy hitters and changers, 0.5%
//! of the hosts for superspreaders and DDoS, k = 100). Each trace is two epochs (heavy changers
//! need a previous one); each bar holds in every epoch that has an answer, or the answer carries
//! a warning naming the parameter that would make it hold (issue 12: where no size within 4 MiB
//! meets a bar, the algorithm says so instead of printing a confident number).

use std::sync::OnceLock;

use algo::Task;
use key::KeyKind;
use measure::{RunConfig, Runner};

mod common;
use common::spec;

/// (skew, flows in the generator's table, packets of the trace = two epochs).
const TRACES: [(f64, u64, u64); 7] = [
    (0.6, 10_000, 200_000),
    (1.0, 10_000, 200_000),
    (1.4, 10_000, 200_000),
    (0.6, 100_000, 1_000_000),
    (1.0, 100_000, 1_000_000),
    (1.4, 100_000, 1_000_000),
    // About 380 k flows in each epoch of 1 M packets: past what the exact tables, FlowRadar and
    // the count array hold, which must say so.
    (1.0, 1_000_000, 2_000_000),
];

fn trace(i: usize) -> &'static [gen::GenPacket] {
    static T: [OnceLock<Vec<gen::GenPacket>>; 7] = [const { OnceLock::new() }; 7];
    T[i].get_or_init(|| {
        let (skew, flows, packets) = TRACES[i];
        let spec = gen::Spec {
            packets,
            flows,
            skew,
            seed: 11 + i as u64,
            ..gen::Spec::default()
        };
        let mut v = Vec::with_capacity(packets as usize);
        gen::generate(&spec, |p| v.push(*p)).unwrap();
        v
    })
}

/// The bar of `task` as (metric name, value of the result, passes?).
fn bar(
    task: Task,
    algo: &str,
    a: &measure::metrics::Accuracy,
) -> Option<(&'static str, f64, bool)> {
    let f1 = |v: Option<f64>| v.map(|x| ("f1", x, x >= 0.9));
    match task {
        Task::HeavyHitters
        | Task::HeavyChangers
        | Task::TopK
        | Task::Superspreaders
        | Task::Ddos => f1(a.f1),
        Task::Cardinality => {
            let limit = if algo == "fm" { 0.10 } else { 0.05 };
            a.relative_error.map(|x| ("rel.err", x, x <= limit))
        }
        Task::Entropy => a.relative_error.map(|x| ("rel.err", x, x <= 0.05)),
        Task::FlowSizeDistribution => a.mrd.map(|x| ("mrd", x, x <= 0.5)),
        Task::FlowSize => a.relative_error.map(|x| ("are", x, x <= 1.0)),
    }
}

/// Run `algo` over every trace with each of its tasks; the failures, one line each.
fn failures(algo: &str) -> Vec<String> {
    let entry = catalog::lookup(algo).unwrap();
    let mut out = Vec::new();
    for (i, &(skew, flows, packets)) in TRACES.iter().enumerate() {
        let measures = entry.tasks.iter().map(|&t| spec(t, algo)).collect();
        let mut cfg = RunConfig {
            epoch_packets: Some(packets / 2),
            measures,
            ..RunConfig::default()
        };
        // Algorithms that reverse 4-byte keys take source addresses (`--key src`).
        let mut runner = match Runner::new(cfg.clone(), "bars") {
            Ok(r) => r,
            Err(_) => {
                cfg.key = KeyKind::Src;
                Runner::new(cfg, "bars").unwrap()
            }
        };
        for p in trace(i) {
            runner.push(p.ts_ns, &p.tuple, p.wire_len);
        }
        let r = runner.finish();
        for e in &r.epochs {
            for t in &e.tasks {
                let Some((metric, v, ok)) = bar(t.task, algo, &t.accuracy) else {
                    continue;
                };
                let line = format!(
                    "{algo:<16} {:<22} skew {skew} flows {flows:>7} epoch {}: {metric} {v:.4}",
                    t.task.name(),
                    e.index
                );
                let warned = !t.warnings.is_empty();
                let verdict = match (ok, warned) {
                    (true, _) => "ok  ",
                    (false, true) => "WARN",
                    (false, false) => "FAIL",
                };
                eprintln!("{verdict} {line}");
                if !ok && !warned {
                    out.push(line);
                }
            }
        }
    }
    out
}

macro_rules! bars {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                let f = failures(stringify!($name));
                assert!(f.is_empty(), "{} below the bar:\n{}", stringify!($name), f.join("\n"));
            }
        )*
        /// Every algorithm of the catalog has its test above.
        #[test]
        fn every_algorithm_has_its_bars() {
            let mut tested = vec![$(stringify!($name)),*];
            let mut all: Vec<&str> = catalog::ALL.iter().map(|e| e.name).collect();
            tested.sort_unstable();
            all.sort_unstable();
            assert_eq!(tested, all);
        }
    };
}

bars!(
    count_min,
    count_sketch,
    count_array,
    linear_hash,
    cuckoo1,
    cuckoo4,
    heap,
    space_saving,
    misra_gries,
    flow_radar,
    rev_sketch,
    deltoid,
    univmon,
    two_level,
    mrac,
    fm,
    kmin,
    linear_counting,
    hyperloglog,
    bloom_spreader,
    ewma_change,
    instameasure,
    rcc,
);

/// A run of `algo` with `params` (TOML) answering `task` on trace `i`: its report.
fn run_with(algo: &str, params: &str, task: Task, i: usize) -> measure::Report {
    let mut m = spec(task, algo);
    m.params = params.parse().unwrap();
    let cfg = RunConfig {
        epoch_packets: Some(TRACES[i].2 / 2),
        measures: vec![m],
        ..RunConfig::default()
    };
    let mut runner = Runner::new(cfg, "warnings").unwrap();
    for p in trace(i) {
        runner.push(p.ts_ns, &p.tuple, p.wire_len);
    }
    runner.finish()
}

/// Configurations too small for what is asked are said to be, per epoch and task, naming the
/// parameter and a size that would do; the defaults on the same trace are not.
#[test]
fn too_small_configurations_warn_naming_the_parameter() {
    let cases = [
        ("space_saving", "k = 128", Task::HeavyHitters, "k"),
        ("heap", "k = 128", Task::HeavyHitters, "k"),
        ("misra_gries", "k = 512", Task::HeavyHitters, "k"),
        ("flow_radar", "cells = 4096", Task::Cardinality, "cells"),
        (
            "univmon",
            "widths = [65536, 32768]\nheap = 128",
            Task::Entropy,
            "widths",
        ),
        ("linear_counting", "bits = 4096", Task::Cardinality, "bits"),
        (
            "linear_hash",
            "capacity = 4096",
            Task::HeavyHitters,
            "capacity",
        ),
        ("cuckoo4", "capacity = 4096", Task::Entropy, "capacity"),
        ("bloom_spreader", "bits = 64", Task::Superspreaders, "bits"),
        ("count_min", "width = 4096", Task::FlowSize, "width"),
        ("count_sketch", "width = 4096", Task::FlowSize, "width"),
        ("univmon", "widths = [4096, 2048]", Task::FlowSize, "widths"),
        ("count_array", "width = 65536", Task::TopK, "width"),
        ("mrac", "width = 1024", Task::Cardinality, "width"),
    ];
    for (algo, params, task, parameter) in cases {
        // Zipf 0.6 over 100 k flows: the hardest of the traces.
        let r = run_with(algo, params, task, 3);
        assert_eq!(
            r.warnings.len(),
            r.epochs.len(),
            "{algo} {params}: {:?}",
            r.warnings
        );
        for (w, e) in r.warnings.iter().zip(&r.epochs) {
            assert_eq!(
                (w.epoch, w.task, w.algorithm.as_str()),
                (e.index, task, algo)
            );
            assert_eq!(w.parameter, parameter, "{algo}");
            assert!(
                w.suggestion.starts_with(parameter),
                "{algo}: {}",
                w.suggestion
            );
            assert!(!w.message.is_empty());
        }
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["warnings"][0]["parameter"], parameter);
        assert_eq!(
            json["epochs"][0]["tasks"][0]["warnings"][0]["parameter"],
            parameter
        );
        // The defaults hold what is asked at Zipf 1.0 over 100 k flows (at 0.6 Misra-Gries' do
        // not, and say so: the bars test above); the count array's one row only over 10 k (at
        // 100 k, 6% of its counters are in use and it says so, F1 0.93-0.97).
        let quiet = if algo == "count_array" { 1 } else { 4 };
        let d = run_with(algo, "", task, quiet);
        assert!(d.warnings.is_empty(), "{algo} defaults: {:?}", d.warnings);
    }
}

/// Heavy changers too close to a sketch's change error, or changes dominated by collisions, are
/// said to be in the second epoch (the first has nothing to compare with), naming the parameter
/// (`Algorithm::change_caveats`); the defaults on the same trace are quiet.
#[test]
fn heavy_changer_sketches_too_small_warn_in_the_second_epoch() {
    let cases = [
        ("count_min", "width = 256", "width"),
        ("count_sketch", "width = 256", "width"),
        ("univmon", "widths = [256, 1024]", "widths"),
    ];
    for (algo, params, parameter) in cases {
        let r = run_with(algo, params, Task::HeavyChangers, 3);
        // The width's warnings (a candidate set overflowed by the inflated estimates also says
        // so, naming `candidates`: issue 34).
        let ws: Vec<&measure::Warning> = r
            .warnings
            .iter()
            .filter(|w| w.parameter == parameter)
            .collect();
        let epochs: Vec<u64> = ws.iter().map(|w| w.epoch).collect();
        assert_eq!(epochs, [1], "{algo} {params}: {:?}", r.warnings);
        assert!(ws[0].suggestion.starts_with(parameter), "{algo}");
        let json = serde_json::to_value(&r).unwrap();
        let task_warnings = json["epochs"][1]["tasks"][0]["warnings"]
            .as_array()
            .unwrap();
        assert!(task_warnings.iter().any(|w| w["parameter"] == parameter));
        let d = run_with(algo, "", Task::HeavyChangers, 4);
        assert!(d.warnings.is_empty(), "{algo} defaults: {:?}", d.warnings);
    }
}
