//! `netsift run --instant` (issue 16, point 5) on a generated trace: detections as JSON lines
//! while the run goes, the delay distribution in the summary, and the refusals naming the flag;
//! and the first and last capture times `run --json` lists for instameasure's flows.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

mod common;

fn netsift(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_netsift"))
        .args(args)
        .output()
        .unwrap()
}

/// 400 000 packets of Zipf(1.1) 5-tuples over 20 000 flows, at 1 Mpps of capture time.
fn trace(name: &str) -> PathBuf {
    let dir = testkit::scratch("instant").join(name);
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

/// `run --json` lists, for each of instameasure's top-k flows, the capture times (ns) of the
/// packets whose emissions inserted it into the table and last added to it (`first_ns`,
/// `last_ns`). With one worker they are exactly those an untimed twin of the run's instance
/// (same seed, same defaults) shows when fed the capture one packet at a time, read back by an
/// independent reader (pcap-parser + etherparse): the packet whose update made an emission
/// while the flow was in no slot is `first`, the last one that made an emission is `last`.
/// With two workers (another generator sequence per worker) they are times of packets of that
/// flow, `first <= last`, and after the flow's first packet for nearly every flow.
#[test]
fn top_k_lists_the_first_and_last_capture_times() {
    use algo::BuildCtx;
    use key::{FlowKey, KeyKind, KeyMap};

    let path = trace("times");
    let packets: Vec<(FlowKey, u64)> = common::peer_frames(&path)
        .iter()
        .filter_map(|f| {
            let t = common::peer_tuple(f.link, &f.data)?;
            Some((t.key(KeyKind::FiveTuple), f.ts_ns))
        })
        .collect();
    assert_eq!(packets.len(), 400_000);
    let ctx = BuildCtx {
        seed: 1,
        key_len: 13,
        ..BuildCtx::default()
    };
    let mut twin = insta::InstaMeasure::new(true, insta::InstaConfig::default(), &ctx).unwrap();
    let want = twin.emission_times(packets.iter().copied());
    let mut times_of: KeyMap<Vec<u64>> = KeyMap::default();
    for &(k, at) in &packets {
        times_of.entry(k).or_default().push(at);
    }
    for workers in ["1", "2"] {
        let out = netsift(&[
            "run",
            path.to_str().unwrap(),
            "--task",
            "top_k",
            "--k",
            "20",
            "--algo",
            "instameasure",
            "--workers",
            workers,
            "--json",
            // The whole capture as one epoch.
            "--epoch-packets",
            "400000",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let keys = v["epochs"][0]["tasks"][0]["answer"]["keys"]
            .as_array()
            .unwrap();
        assert_eq!(keys.len(), 20, "workers {workers}");
        let mut later = 0;
        for e in keys {
            let k: FlowKey = packets
                .iter()
                .map(|p| p.0)
                .find(|k| k.to_string() == e["key"].as_str().unwrap())
                .unwrap();
            let got = (
                e["first_ns"].as_u64().unwrap(),
                e["last_ns"].as_u64().unwrap(),
            );
            if workers == "1" {
                assert_eq!(Some(got), want.get(&k).copied(), "{e}");
            }
            let ts = &times_of[&k];
            assert!(ts.contains(&got.0) && ts.contains(&got.1), "{e}");
            assert!(got.0 <= got.1, "{e}");
            later += usize::from(got.0 > ts[0]);
        }
        assert!(later >= 18, "workers {workers}: {later} of 20");
    }
}
