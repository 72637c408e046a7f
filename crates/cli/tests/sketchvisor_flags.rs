//! SketchVisor's experiment as `netsift run` selects it (issue 36 point 2), used as a user does:
//! heavy-hitter thresholds of the NIC's capacity x epoch (`--nic-gbps`, SketchVisor 7.1), an
//! absolute `--threshold-bytes`, `--preset sketchvisor`'s run settings, and five-tuple keys for
//! the key-recovering sketches.

mod common;
use common::{netsift, tmp};

use std::path::PathBuf;

use serde_json::Value;

/// 300 k packets over 20 k flows (Zipf 1.1, bursty, 1 Mpps of capture time: 0.3 s), in `format`.
fn trace(format: &str) -> PathBuf {
    let f = tmp(&format!("t.{format}"));
    if !f.exists() {
        let out = netsift()
            .args([
                "gen",
                "--packets",
                "300000",
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

/// `netsift run TRACE ARGS --json` on one worker, which must succeed.
fn run(trace: &PathBuf, args: &[&str]) -> Value {
    let out = netsift()
        .arg("run")
        .arg(trace)
        .args(["--workers", "1", "--json"])
        .args(args)
        .output()
        .unwrap();
    common::assert_ok(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `netsift run TRACE ARGS`, which must fail: its standard error.
fn refused(trace: &PathBuf, args: &[&str]) -> String {
    let out = netsift()
        .arg("run")
        .arg(trace)
        .args(["--workers", "1"])
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{args:?} ran: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

/// The tasks of every epoch named `name`.
fn tasks<'a>(v: &'a Value, name: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    v["epochs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| e["tasks"].as_array().unwrap().iter())
        .filter(move |t| t["task"] == name)
}

/// The epoch length the header gives, in ms (`"100 ms"`).
fn epoch_ms(v: &Value) -> f64 {
    let e = v["epoch"].as_str().unwrap();
    e.strip_suffix(" ms")
        .unwrap_or_else(|| panic!("not a time epoch: {e}"))
        .parse()
        .unwrap()
}

/// The header's threshold rule of `task`.
fn rule<'a>(v: &'a Value, task: &str) -> &'a Value {
    v["thresholds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["task"] == task)
        .unwrap_or_else(|| panic!("no rule of {task} in {}", v["thresholds"]))
}

/// `--nic-gbps G`: every epoch's heavy-hitter threshold is fraction x G x 1e9 / 8 x the epoch's
/// length (from the header), with ground truth and without, and the header gives it in bytes;
/// heavy changers keep the paper's base (section 7.1), the total change.
#[test]
fn nic_threshold_is_the_fraction_of_capacity_times_epoch() {
    let t = trace("pcap");
    let (g, frac) = (10.0, 0.0005);
    for truth in ["on", "off"] {
        let v = run(
            &t,
            &[
                "--task",
                "heavy_hitters,heavy_changers",
                "--algo",
                "count_min",
                "--weight",
                "bytes",
                "--epoch-ms",
                "100",
                "--nic-gbps",
                "10",
                "--threshold",
                "0.0005",
                "--truth",
                truth,
            ],
        );
        let want = (frac * g * 1e9 / 8.0 * epoch_ms(&v) / 1000.0).ceil();
        // Three epochs of 100 ms in 0.3 s.
        let mut n = 0;
        for task in tasks(&v, "heavy_hitters").filter(|t| t["note"].is_null()) {
            assert_eq!(task["threshold"].as_f64(), Some(want), "{task}");
            n += 1;
        }
        assert_eq!(n, 3);
        let r = rule(&v, "heavy_hitters");
        assert_eq!(r["resolved"].as_f64(), Some(want), "{r}");
        assert!(
            r["of"].as_str().unwrap().contains("10 Gbps x 100 ms"),
            "{r}"
        );
        // Heavy changers: the total change over two epochs, not the NIC (section 7.1).
        let r = rule(&v, "heavy_changers");
        assert!(!r.to_string().contains("Gbps"), "{r}");
        for task in tasks(&v, "heavy_changers").filter(|t| t["note"].is_null()) {
            assert_ne!(task["threshold"].as_f64(), Some(want), "{task}");
        }
    }
    // Without it, the same fraction is of each epoch's own bytes: another threshold.
    let v = run(
        &t,
        &[
            "--task",
            "heavy_hitters",
            "--algo",
            "count_min",
            "--weight",
            "bytes",
            "--epoch-ms",
            "100",
        ],
    );
    let first = tasks(&v, "heavy_hitters").next().unwrap();
    assert_ne!(first["threshold"].as_f64(), Some(62_500.0), "{first}");
}

/// `--threshold-bytes N` is heavy hitters' and changers' absolute threshold, over `--threshold`
/// for them (the others keep `--threshold`); it cannot be given with `--nic-gbps`.
#[test]
fn threshold_bytes_is_absolute_and_wins_over_threshold_for_its_tasks() {
    let t = trace("pcap");
    let v = run(
        &t,
        &[
            "--task",
            "heavy_hitters,heavy_changers,superspreaders",
            "--algo",
            "count_min,two_level",
            "--weight",
            "bytes",
            "--epoch-ms",
            "100",
            "--threshold",
            "0.01",
            "--threshold-bytes",
            "50000",
        ],
    );
    for name in ["heavy_hitters", "heavy_changers"] {
        let mut n = 0;
        for task in tasks(&v, name).filter(|t| t["note"].is_null()) {
            assert_eq!(task["threshold"].as_f64(), Some(50_000.0), "{task}");
            n += 1;
        }
        assert!(n >= 2, "{name}: {n} answers");
        assert_eq!(rule(&v, name)["value"].as_f64(), Some(50_000.0));
    }
    let ss = rule(&v, "superspreaders");
    assert_eq!(ss["value"].as_f64(), Some(0.01), "{ss}");
    let e = refused(
        &t,
        &[
            "--weight",
            "bytes",
            "--threshold-bytes",
            "50000",
            "--nic-gbps",
            "10",
        ],
    );
    assert!(
        e.contains("--threshold-bytes") && e.contains("--nic-gbps"),
        "{e}"
    );
}

/// Values and settings the two flags cannot take are refused before reading, naming the flag.
#[test]
fn bad_values_are_refused_naming_the_flag() {
    let t = trace("pcap");
    let hh = ["--task", "heavy_hitters", "--algo", "count_min"];
    let cases: &[(&[&str], &[&str])] = &[
        (&["--nic-gbps", "0"], &["--nic-gbps", "positive"]),
        (&["--nic-gbps", "-1"], &["--nic-gbps", "positive"]),
        (&["--nic-gbps", "fast"], &["--nic-gbps"]),
        // Packet-counted: the NIC's capacity is bytes.
        (
            &["--nic-gbps", "10", "--epoch-ms", "100"],
            &["--nic-gbps", "--weight bytes"],
        ),
        // Packet epochs have no length in time.
        (
            &[
                "--nic-gbps",
                "10",
                "--weight",
                "bytes",
                "--epoch-packets",
                "1000",
            ],
            &["--nic-gbps", "--epoch-ms"],
        ),
        // An absolute threshold has no base to take from the NIC.
        (
            &[
                "--nic-gbps",
                "10",
                "--weight",
                "bytes",
                "--epoch-ms",
                "100",
                "--threshold",
                "5000",
            ],
            &["--nic-gbps", "absolute"],
        ),
        (&["--threshold-bytes", "0"], &["--threshold-bytes"]),
        (
            &["--threshold-bytes", "1000"],
            &["--threshold-bytes", "--weight bytes"],
        ),
    ];
    for (args, says) in cases {
        let args: Vec<&str> = hh.iter().chain(args.iter()).copied().collect();
        let e = refused(&t, &args);
        for s in *says {
            assert!(e.contains(s), "{args:?}: {e}");
        }
    }
    // A run without heavy hitters has no threshold for --nic-gbps to set.
    let e = refused(
        &t,
        &[
            "--task",
            "cardinality",
            "--nic-gbps",
            "10",
            "--weight",
            "bytes",
            "--epoch-ms",
            "100",
        ],
    );
    assert!(
        e.contains("--nic-gbps") && e.contains("heavy_hitters"),
        "{e}"
    );
    // A key trace without timestamps has no epoch in time.
    let k = trace("keys13");
    let e = refused(&k, &["--nic-gbps", "10", "--weight", "bytes"]);
    assert!(e.contains("--nic-gbps") && e.contains("keys13"), "{e}");
}

/// `--preset sketchvisor` sets SketchVisor 7.1's run: bytes, one-second epochs, heavy hitters
/// at 0.05% of 40 Gbps x 1 s, the fast path on with 8 KB; each is overridden by its flag.
#[test]
fn preset_sketchvisor_sets_the_papers_run_and_flags_override_it() {
    let t = trace("pcap");
    let v = run(&t, &["--preset", "sketchvisor", "--task", "heavy_hitters"]);
    assert_eq!(v["weight"], "bytes");
    assert_eq!(epoch_ms(&v), 1000.0);
    let want = (0.0005 * 40e9 / 8.0 * epoch_ms(&v) / 1000.0).ceil();
    assert_eq!(rule(&v, "heavy_hitters")["resolved"].as_f64(), Some(want));
    for task in tasks(&v, "heavy_hitters") {
        assert_eq!(task["threshold"].as_f64(), Some(want), "{task}");
    }
    let e0 = &v["epochs"][0];
    assert_eq!(e0["paths"]["fast_path"], "sketchvisor", "{}", e0["paths"]);
    let notes = v["notes"].to_string();
    for set in [
        "--fast-path sketchvisor",
        "--fast-path-bytes 8192",
        "--weight bytes",
        "--epoch-ms 1000",
        "--nic-gbps 40",
    ] {
        assert!(notes.contains(set), "{set}: {notes}");
    }
    // The paper's four heavy-hitter sketches, each once: RevSketch cannot hold five-tuples
    // and is replaced by one that can, not by a copy of another.
    let mut algos: Vec<&str> = v["epochs"][0]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["algorithm"].as_str().unwrap())
        .collect();
    assert_eq!(algos.len(), 4, "{algos:?}");
    algos.sort_unstable();
    algos.dedup();
    assert_eq!(algos.len(), 4, "{algos:?}");
    assert!(
        algos.contains(&"deltoid") && algos.contains(&"univmon"),
        "{algos:?}"
    );

    // Explicit flags win.
    let v = run(
        &t,
        &[
            "--preset",
            "sketchvisor",
            "--task",
            "heavy_hitters",
            "--algo",
            "count_min",
            "--epoch-ms",
            "100",
            "--nic-gbps",
            "10",
        ],
    );
    assert_eq!(epoch_ms(&v), 100.0);
    let want = (0.0005_f64 * 10e9 / 8.0 * 100.0 / 1000.0).ceil();
    assert_eq!(rule(&v, "heavy_hitters")["resolved"].as_f64(), Some(want));
    // Counting packets, the NIC's bytes cannot apply: left out, and said.
    let v = run(
        &t,
        &[
            "--preset",
            "sketchvisor",
            "--task",
            "heavy_hitters",
            "--algo",
            "count_min",
            "--weight",
            "packets",
        ],
    );
    assert_eq!(v["weight"], "packets");
    let r = rule(&v, "heavy_hitters");
    assert!(r["resolved"].is_null(), "{r}");
    assert_eq!(r["of"], "packets");
    assert!(
        v["notes"].to_string().contains("--nic-gbps not set"),
        "{}",
        v["notes"]
    );

    // The fast path's 8 KB: with the normal path capped, it tracks fewer flows than 64 KB does.
    let tracked = |bytes: Option<&str>| {
        let mut args = vec![
            "--preset",
            "sketchvisor",
            "--task",
            "heavy_hitters",
            "--algo",
            "count_min",
            "--normal-capacity",
            "0.3",
        ];
        if let Some(b) = bytes {
            args.extend(["--fast-path-bytes", b]);
        }
        let v = run(&t, &args);
        v["epochs"][0]["paths"]["kinds"][0]["tracked"]
            .as_u64()
            .unwrap()
    };
    let (paper, big) = (tracked(None), tracked(Some("64K")));
    assert!(paper > 0 && paper < big, "8 KB {paper}, 64 KB {big}");
    assert_eq!(paper, tracked(Some("8192")));
}

/// Five-tuple keys for the key-recovering sketches: Deltoid finds heavy hitters by five-tuple
/// (F1 > 0.9 against ground truth); RevSketch, whose reverse hashing takes 4- and 8-byte keys,
/// refuses them naming the key and pointing to Deltoid.
#[test]
fn five_tuple_keys_for_the_key_recovering_sketches() {
    let t = trace("pcap");
    let v = run(
        &t,
        &[
            "--task",
            "heavy_hitters",
            "--algo",
            "deltoid",
            "--key",
            "five_tuple",
            "--epoch-packets",
            "150000",
            "--truth",
            "on",
        ],
    );
    let mut n = 0;
    for task in tasks(&v, "heavy_hitters") {
        assert_eq!(task["key"], "five_tuple");
        let f1 = task["accuracy"]["f1"].as_f64().unwrap();
        assert!(f1 > 0.9, "{task}");
        let key = task["answer"]["keys"][0]["key"].as_str().unwrap();
        assert!(key.contains('>') && key.contains('/'), "{key}");
        n += 1;
    }
    assert_eq!(n, 2);
    let e = refused(
        &t,
        &[
            "--task",
            "heavy_hitters",
            "--algo",
            "rev_sketch",
            "--key",
            "five_tuple",
        ],
    );
    assert!(
        e.contains("rev_sketch") && e.contains("--key five_tuple") && e.contains("deltoid"),
        "{e}"
    );
}
