//! What a new user meets in the first hour with real captures (issue 34): the table names the
//! flows each task found, capture files default to time epochs that fit them, key traces get
//! the key and tasks they can answer, and presets select their papers' measurements.

mod common;
use common::{assert_ok, netsift, tmp};

use std::path::{Path, PathBuf};
use std::process::Output;

fn gen(name: &str, packets: u32, flows: u32, extra: &[&str]) -> PathBuf {
    let f = tmp(name);
    let out = netsift()
        .args(["gen", "--packets", &packets.to_string()])
        .args(["--flows", &flows.to_string(), "--seed", "5"])
        .args(extra)
        .arg("--out")
        .arg(&f)
        .output()
        .unwrap();
    assert_ok(&out);
    f
}

fn run(args: &[&str], trace: &Path) -> Output {
    netsift()
        .arg("run")
        .args(["--workers", "1"])
        .args(args)
        .arg(trace)
        .output()
        .unwrap()
}

fn json(args: &[&str], trace: &Path) -> serde_json::Value {
    let out = run(&[&["--json"], args].concat(), trace);
    assert_ok(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The (task, algorithm) pairs of a report's first epoch.
fn measured(v: &serde_json::Value) -> Vec<(String, String)> {
    let mut m: Vec<(String, String)> = v["epochs"][0]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["task"].as_str().unwrap().to_string(),
                t["algorithm"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    m.sort();
    m
}

fn notes(v: &serde_json::Value) -> String {
    v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The table lists the flows each set task found, largest first, with their exact size and
/// error (estimate minus truth), `--top N` of them; each row says its resolved threshold; the
/// header says the threshold rules; the cost rows say which task they serve.
#[test]
fn the_table_names_the_flows_it_found() {
    let f = gen("found.pcap", 20_000, 2_000, &[]);
    let args = [
        "--epoch-packets",
        "20000",
        "--task",
        "heavy_hitters,superspreaders,ddos,top_k",
        "--top",
        "3",
    ];
    let out = run(&args, &f);
    assert_ok(&out);
    let t = text(&out);
    let lines: Vec<&str> = t.lines().collect();
    assert!(
        t.contains("thresholds: heavy_hitters >= 0.05% of each epoch's packets"),
        "{t}"
    );
    // 0.05% of 20,000 packets.
    let row = lines
        .iter()
        .find(|l| l.trim_start().starts_with("heavy_hitters "))
        .unwrap_or_else(|| panic!("{t}"));
    assert!(row.contains(">= 10"), "{row}");
    let at = lines
        .iter()
        .position(|l| l.trim_start().starts_with("heavy_hitters by count_min"))
        .unwrap_or_else(|| panic!("no list of heavy hitters:\n{t}"));
    assert!(lines[at].contains("largest 3 of"), "{}", lines[at]);
    let head: Vec<&str> = lines[at + 1].split_whitespace().collect();
    assert_eq!(head, ["key", "estimate", "true", "error"], "{t}");
    let mut last = u64::MAX;
    for l in &lines[at + 2..at + 5] {
        let f: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(f.len(), 4, "{l}");
        let (est, tv): (u64, u64) = (f[1].parse().unwrap(), f[2].parse().unwrap());
        let err: i64 = f[3].trim_start_matches('+').parse().unwrap();
        assert_eq!(est as i64 - tv as i64, err, "{l}");
        assert!(est >= 10 && est <= last, "{l}");
        last = est;
    }
    assert!(
        !lines[at + 5].starts_with("    "),
        "more than --top 3 rows:\n{t}"
    );
    for task in ["superspreaders", "ddos", "top_k"] {
        assert!(
            lines
                .iter()
                .any(|l| l.trim_start().starts_with(&format!("{task} by "))),
            "{task}:\n{t}"
        );
    }
    // Two two_level instances, told apart by the task each serves.
    let costs: Vec<&&str> = lines
        .iter()
        .filter(|l| l.trim_start().starts_with("two_level "))
        .collect();
    assert_eq!(costs.len(), 2, "{t}");
    assert!(costs.iter().any(|l| l.contains(" superspreaders ")), "{t}");
    assert!(costs.iter().any(|l| l.contains(" ddos ")), "{t}");
    // `--top 0`: counts only.
    let out = run(&["--epoch-packets", "20000", "--top", "0"], &f);
    assert_ok(&out);
    assert!(!text(&out).contains(" by count_min"), "{}", text(&out));
}

/// Without ground truth the table has no accuracy columns (they would all be `-`), and the
/// flows are listed with their estimates alone.
#[test]
fn without_truth_the_table_drops_the_empty_columns() {
    let f = gen("notruth.pcap", 20_000, 2_000, &[]);
    let out = run(
        &[
            "--epoch-packets",
            "20000",
            "--truth",
            "off",
            "--task",
            "heavy_hitters",
        ],
        &f,
    );
    assert_ok(&out);
    let t = text(&out);
    assert!(!t.contains("precision"), "{t}");
    let lines: Vec<&str> = t.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.trim_start().starts_with("heavy_hitters by count_min"))
        .unwrap_or_else(|| panic!("{t}"));
    let head: Vec<&str> = lines[at + 1].split_whitespace().collect();
    assert_eq!(head, ["key", "estimate"], "{t}");
}

/// A capture with timestamps and no epoch given is cut into time epochs chosen from its
/// duration and rate (about ten), said in the header and the notes; an epoch given is kept.
#[test]
fn capture_files_default_to_time_epochs_that_fit_them() {
    // 20,000 packets at the generator's 1 Mpps: 20 ms, so epochs of 2 ms.
    let f = gen("timed.pcap", 20_000, 2_000, &[]);
    let v = json(&[], &f);
    assert_eq!(v["epoch"], "2 ms", "{}", notes(&v));
    let n = v["epochs"].as_array().unwrap().len();
    assert!((9..=11).contains(&n), "{n} epochs");
    assert!(
        notes(&v).contains("chosen from the capture"),
        "{}",
        notes(&v)
    );
    let out = run(&[], &f);
    assert_ok(&out);
    let header = text(&out).lines().next().unwrap_or("").to_string();
    assert!(
        header.contains("epoch 2 ms (chosen from the capture: 20000 packets over 0.020 s"),
        "{header}"
    );
    // Heavy changers now compare epochs.
    let changers = &v["epochs"][1]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["task"] == "heavy_changers")
        .unwrap()["note"];
    assert!(changers.is_null(), "{changers}");
    let v = json(&["--epoch-packets", "20000"], &f);
    assert_eq!(v["epochs"].as_array().unwrap().len(), 1);
    assert!(!notes(&v).contains("chosen from the capture"));
    // A real capture: several epochs, not one.
    if let Some(alexa) = testkit::trace("ndpi_alexa-app.pcapng") {
        let v = json(&[], &alexa);
        assert!(v["epochs"].as_array().unwrap().len() >= 2, "{}", notes(&v));
        assert!(v["epoch"].as_str().unwrap().ends_with(" ms"));
    }
}

/// Key traces: no time epochs without time; a keys4 trace (source addresses alone) keys by
/// source and leaves out the tasks of address pairs, each said in a note; asked for anyway,
/// refused naming the file.
#[test]
fn key_traces_answer_what_their_keys_can() {
    let k13 = gen("k.keys13", 20_000, 500, &["--format", "keys13"]);
    let out = run(&["--epoch-ms", "100"], &k13);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--epoch-ms") && err.contains("k.keys13") && err.contains("no timestamps"),
        "{err}"
    );
    let k4 = gen("k.keys4", 20_000, 500, &["--format", "keys4"]);
    let v = json(&[], &k4);
    assert_eq!(v["key"], "src");
    let tasks: Vec<String> = measured(&v).into_iter().map(|m| m.0).collect();
    assert!(tasks.contains(&"heavy_hitters".to_string()), "{tasks:?}");
    assert!(
        !tasks.iter().any(|t| t == "ddos" || t == "superspreaders"),
        "{tasks:?}"
    );
    assert!(
        notes(&v).contains("keyed by source address"),
        "{}",
        notes(&v)
    );
    for bad in [&["--key", "five_tuple"][..], &["--task", "ddos"][..]] {
        let out = run(bad, &k4);
        assert!(!out.status.success(), "{bad:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("k.keys4") && err.contains(bad[0]), "{err}");
    }
}

/// A preset selects its paper's algorithms and tasks unless the user names them, and says
/// what it set.
#[test]
fn presets_select_their_papers_measurements() {
    let f = gen("preset.pcap", 20_000, 2_000, &[]);
    let base = ["--epoch-packets", "20000"];
    let v = json(&[&base[..], &["--preset", "instameasure"]].concat(), &f);
    let m = measured(&v);
    assert!(
        m.iter().all(|(_, a)| a == "instameasure" || a == "rcc"),
        "{m:?}"
    );
    assert!(m.contains(&("heavy_hitters".into(), "rcc".into())), "{m:?}");
    assert!(
        notes(&v).contains("preset instameasure: measures heavy_hitters with instameasure, rcc"),
        "{}",
        notes(&v)
    );
    assert!(notes(&v).contains("words = 8192"), "{}", notes(&v));
    // Named tasks: the paper's algorithms for those it measured, the default for the others.
    let v = json(
        &[
            &base[..],
            &["--preset", "reeval", "--task", "heavy_hitters,cardinality"],
        ]
        .concat(),
        &f,
    );
    assert_eq!(
        measured(&v),
        [
            ("cardinality".into(), "hyperloglog".into()),
            ("heavy_hitters".into(), "count_array".into()),
            ("heavy_hitters".into(), "count_min".into()),
        ]
    );
    // Named algorithms win.
    let v = json(
        &[
            &base[..],
            &["--preset", "sketchvisor", "--algo", "count_min"],
        ]
        .concat(),
        &f,
    );
    assert!(measured(&v).iter().all(|(_, a)| a == "count_min"));
}

/// `--normal-capacity` is per worker: the header says so, with the run's total (issue 34: 0%
/// on the fast path at 0.7 Mpps with two workers surprised a user reading it as the run's).
#[test]
fn the_header_says_the_normal_capacity_is_per_worker() {
    let f = gen("capacity.pcap", 20_000, 2_000, &[]);
    let out = netsift()
        .args(["run", "--workers", "2", "--normal-capacity", "0.35"])
        .args(["--epoch-packets", "20000", "--task", "heavy_hitters"])
        .arg(&f)
        .output()
        .unwrap();
    assert_ok(&out);
    let t = text(&out);
    assert!(
        t.contains("normal path: at most 0.35 Mpps per worker (2 workers: 0.7 Mpps in all)"),
        "{t}"
    );
}
