//! Issue 34, points 2 and 3, on the real captures through the binary: a structure whose answer
//! is bounded by its capacity says so (a warning naming the parameter and a size) instead of
//! answering short in silence; every algorithm that guarantees no false negatives finds the
//! flows exactly at the threshold (`>=`, as the exact truth), with the run's workers merged; and
//! a fractional threshold that resolves so low that every flow qualifies is said to be
//! degenerate, once per epoch and task. Skipped without `../shared/traces`.

mod common;

use serde_json::Value;

/// `netsift run TRACE ARGS --json`, which must succeed: its report.
fn run(trace: &str, args: &[&str]) -> Value {
    let path = testkit::traces_dir()
        .expect("checked by the caller")
        .join(trace);
    // One epoch of the whole capture unless the test cuts its own (captures default to time
    // epochs chosen from their duration).
    let whole: &[&str] = if args.iter().any(|a| a.starts_with("--epoch")) {
        &[]
    } else {
        &["--epoch-packets", "2000000"]
    };
    let out = common::netsift()
        .arg("run")
        .arg(&path)
        .args(args)
        .args(whole)
        .arg("--json")
        .output()
        .expect("run netsift");
    assert!(
        out.status.success(),
        "{trace} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON report")
}

/// Every task result of the report, with its epoch index.
fn results(r: &Value) -> Vec<(u64, &Value)> {
    let mut v = vec![];
    for e in r["epochs"].as_array().expect("epochs") {
        for t in e["tasks"].as_array().expect("tasks") {
            v.push((e["index"].as_u64().expect("index"), t));
        }
    }
    v
}

/// The report's warnings for `algorithm` on `task` naming `parameter`.
fn warned<'a>(r: &'a Value, task: &str, algorithm: &str, parameter: &str) -> Vec<&'a Value> {
    r["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter(|w| w["task"] == task && w["algorithm"] == algorithm && w["parameter"] == parameter)
        .collect()
}

/// The port scan (~2000 one-packet flows) on two workers: a top-5000 and heavy hitters at 0.001%
/// ask more than the 1024 candidates (and UnivMon's heap of 2000) hold once the workers' sets
/// are merged (one worker's set holds up to 2047 between compactions, which the scan fits). Each algorithm either answers every
/// true flow or warns naming the parameter with a size; Count-Min and the count array must warn
/// (before issue 34 they reported 1016 of 5000 in silence; Count-Min reported 3 of them).
#[test]
fn capped_structures_warn_naming_the_parameter() {
    if testkit::traces_dir().is_none() {
        return;
    }
    let algos = [
        ("count_min", "candidates"),
        ("count_array", "candidates"),
        ("count_sketch", "candidates"),
        ("univmon", "heap"),
        ("space_saving", "k"),
        ("heap", "k"),
        ("misra_gries", "k"),
    ];
    let list: Vec<&str> = algos.iter().map(|a| a.0).collect();
    let list = list.join(",");
    for args in [
        ["--task", "top_k", "--k", "5000"],
        ["--task", "heavy_hitters", "--threshold", "0.00001"],
    ] {
        let task = args[1];
        let r = run(
            "ndpi_synscan.pcap",
            &[&args[..], &["--algo", &list, "--workers", "2"]].concat(),
        );
        for (_, t) in results(&r) {
            let algo = t["algorithm"].as_str().expect("algorithm");
            let param = algos.iter().find(|a| a.0 == algo).expect("asked").1;
            let reported = t["answer"]["reported"].as_u64().expect("reported");
            let want = t["truth"]["count"].as_u64().expect("true count");
            assert!(want > 1024, "{task}: the scan has {want} true flows");
            let w = warned(&r, task, algo, param);
            if algo.starts_with("count_") && algo != "count_sketch" {
                assert!(reported < want, "{task} {algo}: {reported} of {want}");
            }
            if reported < want {
                assert!(
                    !w.is_empty(),
                    "{task} {algo}: {reported} of {want} reported and no warning naming {param}"
                );
                let s = w[0]["suggestion"].as_str().expect("suggestion");
                assert!(s.starts_with(&format!("{param} = ")), "{s}");
                let size: u64 = s[param.len() + 3..]
                    .split(' ')
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| panic!("{task} {algo}: no size in {s}"));
                assert!(
                    size >= want.min(5000),
                    "{task} {algo}: suggests {size} for {want}"
                );
            }
        }
    }
    // Sized as suggested, Count-Min answers every flow and says nothing.
    let cfg = common::tmp("caps_and_ties.toml");
    std::fs::write(
        &cfg,
        "[[measure]]\ntask = \"top_k\"\nalgo = \"count_min\"\nk = 5000\n\
         params = { candidates = 5000 }\n",
    )
    .expect("write config");
    let r = run(
        "ndpi_synscan.pcap",
        &[
            "--config",
            cfg.to_str().expect("utf-8 path"),
            "--workers",
            "2",
        ],
    );
    for (_, t) in results(&r) {
        assert_eq!(t["answer"]["reported"], t["truth"]["count"], "{t}");
    }
    assert!(warned(&r, "top_k", "count_min", "candidates").is_empty());
}

/// Threshold 1 on the alexa and CAIDA captures, with two workers (whose states are merged at
/// every epoch's end): every algorithm that guarantees no false negatives reports every flow of
/// size exactly 1 (before issue 34 Count-Min's merged candidate threshold was 2: alexa 242 of
/// 309, CAIDA 135 of 444).
#[test]
fn flows_exactly_at_the_threshold_are_found_by_every_guaranteed_algorithm() {
    if testkit::traces_dir().is_none() {
        return;
    }
    let algos = "count_min,count_array,space_saving,heap,misra_gries,univmon,linear_hash";
    for trace in ["ndpi_alexa-app.pcapng", "netshare_caida-small_raw.pcap"] {
        for threshold in ["1", "2"] {
            let r = run(
                trace,
                &[
                    "--task",
                    "heavy_hitters",
                    "--threshold",
                    threshold,
                    "--algo",
                    algos,
                    "--workers",
                    "2",
                    "--ipv6",
                ],
            );
            for (_, t) in results(&r) {
                assert_eq!(
                    t["accuracy"]["recall"].as_f64(),
                    Some(1.0),
                    "{trace} threshold {threshold}: {}",
                    t
                );
                assert_eq!(
                    t["accuracy"]["precision"].as_f64(),
                    Some(1.0),
                    "{trace}: {t}"
                );
            }
        }
    }
}

/// The default heavy-hitter and heavy-changer thresholds (0.05%) on 500-packet epochs of the
/// CAIDA capture resolve to one packet: every flow qualifies. The run says the task is
/// degenerate, once per epoch and task (not once per algorithm), naming `threshold`; the exact
/// answers are still the flows at `>=` 1 and the algorithms agree with them.
#[test]
fn degenerate_thresholds_are_said_once_per_epoch_and_task() {
    if testkit::traces_dir().is_none() {
        return;
    }
    let r = run(
        "netshare_caida-small_raw.pcap",
        &[
            "--task",
            "heavy_hitters,heavy_changers",
            "--algo",
            "count_min,linear_hash",
            "--epoch-packets",
            "500",
            "--workers",
            "2",
        ],
    );
    let warnings: Vec<&Value> = r["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter(|w| w["parameter"] == "threshold")
        .collect();
    // Epochs 0 and 1 for heavy hitters, epoch 1 for heavy changers (epoch 0 has no change).
    let said: Vec<(u64, &str)> = warnings
        .iter()
        .map(|w| (w["epoch"].as_u64().unwrap(), w["task"].as_str().unwrap()))
        .collect();
    assert_eq!(
        said,
        vec![
            (0, "heavy_hitters"),
            (1, "heavy_hitters"),
            (1, "heavy_changers")
        ],
        "{warnings:?}"
    );
    assert!(warnings
        .iter()
        .all(|w| w["message"].as_str().unwrap().contains("degenerate")));
    for (e, t) in results(&r) {
        if t["note"].is_string() {
            continue;
        }
        assert_eq!(t["threshold"].as_f64(), Some(1.0), "epoch {e}: {t}");
        assert_eq!(
            t["accuracy"]["recall"].as_f64(),
            Some(1.0),
            "epoch {e}: {t}"
        );
        assert_eq!(
            t["answer"]["reported"], t["truth"]["count"],
            "epoch {e}: {t}"
        );
    }
    // An absolute threshold is what was asked: no such warning.
    let r = run(
        "netshare_caida-small_raw.pcap",
        &[
            "--task",
            "heavy_hitters",
            "--algo",
            "count_min",
            "--epoch-packets",
            "500",
            "--threshold",
            "1",
        ],
    );
    assert!(warned(&r, "heavy_hitters", "count_min", "threshold").is_empty());
}
