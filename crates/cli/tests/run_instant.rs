//! `netsift run --instant` (issue 16, point 5) on a generated trace: detections as JSON lines
//! while the run goes, the delay distribution in the summary, and the refusals naming the flag.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn netsift(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_netsift"))
        .args(args)
        .output()
        .unwrap()
}

/// 400 000 packets of Zipf(1.1) 5-tuples over 20 000 flows, at 1 Mpps of capture time.
fn trace(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("netsift-instant-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.pcap");
    let out = netsift(&[
        "gen",
        "--packets",
        "400000",
        "--flows",
        "20000",
        "--seed",
        "3",
        "--order",
        "shuffled",
        "--out",
        path.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

fn lines(out: &Output) -> Vec<Value> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// With two workers (each detects the flows it owns): every detection is a line before the
/// summary, with its capture time, flow, estimates and threshold; the summary pairs each with
/// the exact crossing and gives the delay distributions, in nanoseconds and in packets; no
/// detection precedes its exact crossing by more than the rule's stated tolerance (default
/// `instant_sigmas` 2: 2 standard deviations of a count of 1000 packets, 80 packets).
#[test]
fn instant_json_lines_and_the_delay_report() {
    let path = trace("lines");
    let out = netsift(&[
        "run",
        path.to_str().unwrap(),
        "--task",
        "heavy_hitters",
        "--algo",
        "instameasure",
        "--instant",
        "--threshold",
        "1000",
        "--epoch-packets",
        "200000",
        "--workers",
        "2",
        "--json-lines",
    ]);
    let all = lines(&out);
    let dets: Vec<&Value> = all.iter().filter(|v| v["type"] == "detection").collect();
    let summary = all.iter().find(|v| v["type"] == "summary").unwrap();
    assert!(dets.len() >= 20, "{} detections", dets.len());
    // 2020-01-01 plus at most the trace's 0.4 s.
    let t0 = 1_577_836_800_000_000_000u64;
    for d in &dets {
        let ts = d["ts_ns"].as_u64().unwrap();
        assert!((t0..t0 + 400_000_000).contains(&ts), "{d}");
        assert_eq!(d["threshold"], 1000);
        assert_eq!(d["algorithm"], "instameasure");
        assert!(d["bound"].as_f64().unwrap() >= 1000.0, "{d}");
        assert!(d["estimate"].as_f64().unwrap() > 0.0, "{d}");
        assert!(d["key"].as_str().unwrap().contains('>'), "{d}");
        let e = d["epoch"].as_u64().unwrap();
        // The epoch of its capture time: 200 000 packets at 1 Mpps.
        assert_eq!(e, (ts - t0) / 200_000_000, "{d}");
    }
    let inst = &summary["instant"];
    assert_eq!(inst["threshold"], 1000);
    let epochs = inst["epochs"].as_array().unwrap();
    assert_eq!(epochs.len(), 2);
    let mut listed = 0;
    for e in epochs {
        let detected = e["detected"].as_u64().unwrap();
        listed += detected;
        let crossed = e["crossed"].as_u64().unwrap();
        assert!(detected * 10 >= crossed * 7, "{e}");
        let (early, late, falsely) = (
            e["early"].as_u64().unwrap(),
            e["late"].as_u64().unwrap(),
            e["false"].as_u64().unwrap(),
        );
        assert_eq!(early + late + falsely, detected, "{e}");
        assert_eq!(
            detected - falsely + e["never"].as_u64().unwrap(),
            crossed,
            "{e}"
        );
        for d in ["delay_ns", "delay_packets"] {
            let q = &e[d];
            let v = |k: &str| q[k].as_f64().unwrap();
            assert!(v("min") <= v("p50") && v("p50") <= v("p90"), "{q}");
            assert!(v("p90") <= v("p99") && v("p99") <= v("max"), "{q}");
        }
        assert!(e["delay_packets"]["min"].as_f64().unwrap() >= -80.0, "{e}");
        for f in e["flows"].as_array().unwrap() {
            let (det, cro) = (f["detected_ns"].as_i64(), f["crossed_ns"].as_i64());
            if let (Some(d), Some(c)) = (det, cro) {
                assert_eq!(f["delay_ns"].as_i64().unwrap(), d - c, "{f}");
            }
        }
    }
    assert_eq!(listed as usize, dets.len());
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

/// Without ground truth: detections, no delay, and the report says why. Refusals name the flag.
#[test]
fn instant_without_truth_and_refusals() {
    let path = trace("refusals");
    let p = path.to_str().unwrap();
    let base = ["run", p, "--instant", "--threshold", "1000"];
    let out = netsift(&[&base[..], &["--task", "heavy_hitters", "--algo", "rcc"]].concat());
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success());
    assert!(
        text.lines().any(|l| l.starts_with("detected: epoch 0 at ")),
        "{text}"
    );
    assert!(text.contains("instant detection (threshold 1000"), "{text}");
    let out = netsift(
        &[
            &base[..],
            &[
                "--task",
                "heavy_hitters",
                "--algo",
                "instameasure",
                "--truth",
                "off",
            ],
            &["--json"],
        ]
        .concat(),
    );
    assert!(out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let inst = &report["instant"];
    assert!(inst["note"].as_str().unwrap().contains("no ground truth"));
    let e = &inst["epochs"][0];
    assert!(e["detected"].as_u64().unwrap() > 0);
    assert!(e["delay_ns"].is_null() && e["crossed"].is_null(), "{e}");
    for (task, algo) in [("heavy_hitters", "count_min"), ("top_k", "instameasure")] {
        let out = netsift(&[&base[..], &["--task", task, "--algo", algo]].concat());
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--instant"), "{err}");
    }
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}
