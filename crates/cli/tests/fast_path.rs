//! SketchVisor's fast path in `netsift run` (issue 15, points 1-2) as a user runs it: every
//! packet on exactly one path, a reproducible split from `--normal-capacity`, answers recovered
//! from both paths, clear errors for impossible settings.

mod common;
use common::{netsift, tmp};

use std::path::PathBuf;

use serde_json::Value;

/// 400 k packets over 20 k flows (Zipf 1.1, bursty, 1 Mpps of capture time), in `format`.
fn trace(format: &str) -> PathBuf {
    let f = tmp(&format!("t.{format}"));
    if !f.exists() {
        let out = netsift()
            .args([
                "gen",
                "--packets",
                "400000",
                "--flows",
                "20000",
                "--seed",
                "5",
            ])
            .args(["--format", format, "--out"])
            .arg(&f)
            .output()
            .unwrap();
        common::assert_ok(&out);
    }
    f
}

/// `netsift run TRACE ARGS --json`, which must succeed.
fn run(trace: &PathBuf, args: &[&str]) -> Value {
    let out = netsift()
        .arg("run")
        .arg(trace)
        .args(["--epoch-packets", "200000", "--json"])
        .args(args)
        .output()
        .unwrap();
    common::assert_ok(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

fn epochs(v: &Value) -> &Vec<Value> {
    v["epochs"].as_array().unwrap()
}

fn task<'a>(e: &'a Value, name: &str) -> &'a Value {
    e["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["task"] == name)
        .unwrap_or_else(|| panic!("no {name} in {e}"))
}

fn f64_at(v: &Value, path: &[&str]) -> f64 {
    let mut x = v;
    for p in path {
        x = &x[*p];
    }
    x.as_f64().unwrap_or_else(|| panic!("{path:?} in {v}"))
}

#[test]
fn every_packet_takes_one_path_and_the_split_is_reproducible() {
    let t = trace("pcap");
    for workers in ["1", "2"] {
        let args = [
            "--normal-capacity",
            "0.35",
            "--workers",
            workers,
            "--task",
            "heavy_hitters,cardinality",
        ];
        let a = run(&t, &args);
        let b = run(&t, &args);
        for (ea, eb) in epochs(&a).iter().zip(epochs(&b)) {
            let p = &ea["paths"];
            let n = p["normal_packets"].as_u64().unwrap();
            let f = p["fast_packets"].as_u64().unwrap();
            assert_eq!(n + f, ea["packets"].as_u64().unwrap(), "{p}");
            assert_eq!(
                p["normal_bytes"].as_u64().unwrap() + p["fast_bytes"].as_u64().unwrap(),
                ea["bytes"].as_u64().unwrap()
            );
            assert!(f > 0 && n > 0, "an overloaded split: {p}");
            // The model runs in capture time: the same split and answers every time.
            assert_eq!(ea["paths"], eb["paths"]);
            assert_eq!(ea["tasks"], eb["tasks"]);
            let fast = p["kinds"][0]["v"].as_u64().unwrap();
            assert_eq!(fast, f, "the fast path measured every packet it was given");
        }
        // Two workers drain twice the per-worker capacity: a smaller fast-path share.
        if workers == "2" {
            let one = run(&t, &[&args[..2], &["--workers", "1"]].concat());
            let s1 = f64_at(&epochs(&one)[0], &["paths", "fast_share"]);
            let s2 = f64_at(&epochs(&a)[0], &["paths", "fast_share"]);
            assert!(s2 < s1, "2 workers {s2} vs 1 worker {s1}");
        }
    }
}

#[test]
fn without_overload_the_answers_are_those_of_a_run_without_fast_path() {
    let t = trace("pcap");
    let tasks = [
        "--task",
        "heavy_hitters,heavy_changers,cardinality,flow_size",
    ];
    let plain = run(&t, &[&tasks[..], &["--workers", "1"]].concat());
    let fast = run(
        &t,
        &[&tasks[..], &["--workers", "1", "--normal-capacity", "100"]].concat(),
    );
    for (p, f) in epochs(&plain).iter().zip(epochs(&fast)) {
        assert_eq!(f["paths"]["fast_packets"], 0);
        assert!(p.get("paths").is_none());
        let strip = |e: &Value| {
            let mut ts = e["tasks"].clone();
            for t in ts.as_array_mut().unwrap() {
                t.as_object_mut().unwrap().remove("recovery");
            }
            ts
        };
        assert_eq!(strip(p), strip(f));
    }
}

#[test]
fn recovery_puts_the_fast_paths_packets_back_into_the_answers() {
    let t = trace("pcap");
    // About 30% of the packets on a 64 KB fast path.
    let base = [
        "--normal-capacity",
        "0.7",
        "--fast-path-bytes",
        "64K",
        "--workers",
        "1",
        "--task",
        "heavy_hitters",
        "--algo",
        "count_min",
    ];
    let are = |method: &str| {
        let v = run(&t, &[&base[..], &["--recover", method]].concat());
        let e = &epochs(&v)[0];
        let share = f64_at(e, &["paths", "fast_share"]);
        assert!((0.2..0.4).contains(&share), "fast share {share}");
        let hh = task(e, "heavy_hitters");
        if method != "none" {
            assert_eq!(hh["recovery"], method, "{hh}");
        }
        (
            f64_at(hh, &["accuracy", "are"]),
            f64_at(hh, &["accuracy", "f1"]),
        )
    };
    let (none, f1_none) = are("none");
    let (lower, _) = are("lower");
    let (sv, f1_sv) = are("sketchvisor");
    // The normal path alone misses ~30% of every heavy flow; the recoveries add it back.
    assert!(none > 0.2, "NoRecovery ARE {none}");
    assert!(
        sv < none / 10.0 && lower < none / 10.0,
        "sv {sv} lower {lower} none {none}"
    );
    assert!(f1_sv >= f1_none && f1_sv > 0.95, "F1 {f1_sv} vs {f1_none}");
}

#[test]
fn key_traces_without_timestamps_arrive_at_the_stated_rate() {
    let t = trace("keys13");
    // 14.88 Mpps offered, 10 Mpps drained: a third on the fast path in the steady state.
    let v = run(
        &t,
        &[
            "--normal-capacity",
            "10",
            "--workers",
            "1",
            "--task",
            "cardinality",
        ],
    );
    for e in epochs(&v) {
        let s = f64_at(e, &["paths", "fast_share"]);
        assert!((s - (1.0 - 10.0 / 14.88)).abs() < 0.01, "share {s}");
    }
}

#[test]
fn impossible_fast_path_settings_are_clear_errors() {
    let t = trace("pcap");
    for (args, needle) in [
        (
            &["--fast-path", "none", "--normal-capacity", "1"][..],
            "fast_path is none",
        ),
        (&["--normal-capacity", "0"][..], "normal_capacity"),
        (&["--normal-capacity", "-3"][..], "normal_capacity"),
        (&["--fast-path", "fifo"][..], "fifo"),
        (&["--recover", "best"][..], "best"),
    ] {
        let out = netsift().arg("run").arg(&t).args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn a_merge_of_a_hosts_snapshots_answers_as_its_run_did() {
    let t = trace("pcap");
    let dir = tmp("snaps");
    let _ = std::fs::remove_dir_all(&dir);
    let args = [
        "--normal-capacity",
        "0.7",
        "--fast-path-bytes",
        "64K",
        "--workers",
        "1",
        "--task",
        "heavy_hitters,heavy_changers,flow_size,cardinality",
        "--host",
        "h1",
        "--snapshots",
    ];
    let mut all = args.to_vec();
    let d = dir.to_string_lossy().to_string();
    all.push(&d);
    let ran = run(&t, &all);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), epochs(&ran).len());
    let out = netsift()
        .arg("merge")
        .args(&files)
        .arg("--truth")
        .arg(&t)
        .arg("--json")
        .output()
        .unwrap();
    common::assert_ok(&out);
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    for (r, m) in epochs(&ran).iter().zip(epochs(&merged)) {
        // The hosts' split and summaries travel in the snapshot; the merge recovers from them
        // with the same code: the same answers and scores.
        assert_eq!(r["paths"]["fast_packets"], m["paths"]["fast_packets"]);
        assert!(r["paths"]["fast_packets"].as_u64().unwrap() > 0);
        assert_eq!(r["tasks"], m["tasks"]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
