//! `netsift run --metrics --alerts` end to end on a generated trace: the endpoint scraped with a
//! real HTTP client and parsed with a real Prometheus text parser agrees with the `--json`
//! report of the same run, and the alert file holds exactly the events the report's answers
//! call for.

mod common;
use common::{netsift, tmp};

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value as Json;

#[path = "../../monitor/tests/scrape/mod.rs"]
mod scrape;
use scrape::{one, scrape, values};

// `listed` large enough that every reported heavy hitter is listed (none is cut).
const CONFIG: &str = r#"
listed = 1000
[[measure]]
task = "heavy_hitters"
algo = "count_min"
threshold = 0.005
[[measure]]
task = "cardinality"
algo = "hyperloglog"

[[alert]]
name = "elephant"
task = "heavy_hitters"
fraction = 0.01
"#;

#[test]
fn metrics_and_alerts_agree_with_the_json_report() {
    let trace = tmp("t.pcap");
    let out = netsift()
        .args([
            "gen",
            "--packets",
            "200000",
            "--flows",
            "5000",
            "--seed",
            "3",
            "--out",
        ])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config = tmp("c.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let (json, alerts) = (tmp("report.json"), tmp("alerts.jsonl"));
    let _ = std::fs::remove_file(&alerts);
    let mut child = netsift()
        .arg("run")
        .arg(&trace)
        .arg("--config")
        .arg(&config)
        .args(["--epoch-packets", "20000", "--workers", "1", "--json"])
        .args([
            "--metrics",
            "127.0.0.1:0",
            "--metrics-linger",
            "60",
            "--alerts",
        ])
        .arg(&alerts)
        .stdout(std::fs::File::create(&json).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait (bounded) for the line saying the run is over and the endpoint still serves.
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let mut said = vec![];
    let url = loop {
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(l) if l.contains("run finished; serving ") => {
                let u = l.split_whitespace().find(|w| w.starts_with("http://"));
                break u.unwrap().to_string();
            }
            Ok(l) => said.push(l),
            Err(e) => {
                let _ = child.kill();
                panic!("no end of run ({e}); stderr: {said:?}");
            }
        }
    };
    let s = scrape(&url);
    child.kill().unwrap();
    child.wait().unwrap();
    let r: Json = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let epochs = r["epochs"].as_array().unwrap();
    assert_eq!(epochs.len(), 10);

    // Packets per class, epochs, packets and bytes of the epochs.
    for class in [
        "ipv4",
        "ipv6",
        "non_ip",
        "truncated",
        "malformed",
        "unsupported",
    ] {
        assert_eq!(
            one(&s, "netsift_read_packets_total", &[("class", class)]),
            r["totals"][class].as_f64().unwrap(),
            "{class}"
        );
    }
    let sum = |f: &str| epochs.iter().map(|e| e[f].as_f64().unwrap()).sum::<f64>();
    assert_eq!(one(&s, "netsift_epochs_total", &[]), epochs.len() as f64);
    assert_eq!(one(&s, "netsift_epoch_packets_total", &[]), sum("packets"));
    assert_eq!(one(&s, "netsift_epoch_bytes_total", &[]), sum("bytes"));
    let last = epochs.last().unwrap();
    assert_eq!(
        one(&s, "netsift_epoch_index", &[]),
        last["index"].as_f64().unwrap()
    );

    // The latest epoch's answers.
    let task = |name: &str| {
        last["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["task"] == name)
            .unwrap()
    };
    let hh = task("heavy_hitters");
    let l = [("task", "heavy_hitters"), ("algorithm", "count_min")];
    assert_eq!(
        one(&s, "netsift_task_reported", &l),
        hh["answer"]["reported"].as_f64().unwrap()
    );
    assert_eq!(
        one(&s, "netsift_task_threshold", &l),
        hh["threshold"].as_f64().unwrap()
    );
    let mut f1 = l.to_vec();
    f1.push(("metric", "f1"));
    assert_eq!(
        one(&s, "netsift_task_accuracy", &f1),
        hh["accuracy"]["f1"].as_f64().unwrap()
    );
    for k in hh["answer"]["keys"].as_array().unwrap().iter().take(10) {
        let mut kl = l.to_vec();
        kl.push(("flow", k["key"].as_str().unwrap()));
        assert_eq!(
            one(&s, "netsift_task_key_estimate", &kl),
            k["estimate"].as_f64().unwrap()
        );
    }
    assert_eq!(values(&s, "netsift_task_key_estimate", &l).len(), 10);
    let card = task("cardinality");
    let c = [("task", "cardinality"), ("algorithm", "hyperloglog")];
    assert_eq!(
        one(&s, "netsift_task_estimate", &c),
        card["answer"]["estimate"].as_f64().unwrap()
    );
    let mut tv = c.to_vec();
    tv.push(("of", "value"));
    assert_eq!(
        one(&s, "netsift_task_true", &tv),
        card["truth"]["value"].as_f64().unwrap()
    );

    // Costs: the last epoch's as it closed, the run's from the report at its end.
    let last = epochs.last().unwrap();
    for cost in last["costs"].as_array().unwrap() {
        let l = [
            ("algorithm", cost["algorithm"].as_str().unwrap()),
            ("key", cost["key"].as_str().unwrap()),
        ];
        for (metric, field) in [
            ("netsift_epoch_update_seconds", "update_seconds"),
            ("netsift_epoch_query_seconds", "query_seconds"),
        ] {
            // Two float printers (prometheus text, serde_json) may differ in the last digit.
            let (m, j) = (one(&s, metric, &l), cost[field].as_f64().unwrap());
            assert!(
                (m - j).abs() <= 1e-12 * j.abs().max(1e-9),
                "{metric}: {m} against {j}"
            );
        }
    }
    for cost in r["throughput"].as_array().unwrap() {
        let l = [
            ("algorithm", cost["algorithm"].as_str().unwrap()),
            ("key", cost["key"].as_str().unwrap()),
        ];
        assert_eq!(
            one(&s, "netsift_updates", &l),
            cost["updates"].as_f64().unwrap()
        );
        assert_eq!(
            one(&s, "netsift_memory_bytes", &l),
            cost["memory_bytes"].as_f64().unwrap()
        );
    }

    // The alerts: `elephant` (1% of each epoch's packets, for 1, no hysteresis) fires for a key
    // listed at or above it and resolves when it is not, read from the report independently.
    // (epoch, key, state, estimate, truth)
    type Expected<'a> = (u64, String, &'a str, f64, Option<f64>);
    let mut expected: Vec<Expected> = vec![];
    let mut firing: Vec<String> = vec![];
    for e in epochs {
        let t = e["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["task"] == "heavy_hitters");
        let keys = t.unwrap()["answer"]["keys"].as_array().unwrap();
        let threshold = 0.01 * e["packets"].as_f64().unwrap();
        // Each listed key carries its exact size (ground truth on), which its events carry.
        let over: Vec<(String, f64, Option<f64>)> = keys
            .iter()
            .map(|k| {
                (
                    k["key"].as_str().unwrap().to_string(),
                    k["estimate"].as_f64().unwrap(),
                    Some(k["truth"].as_f64().expect("a listed key's truth")),
                )
            })
            .filter(|(_, v, _)| *v >= threshold)
            .collect();
        for (k, v, t) in &over {
            if !firing.contains(k) {
                expected.push((e["index"].as_u64().unwrap(), k.clone(), "firing", *v, *t));
            }
        }
        for k in &firing {
            if !over.iter().any(|(o, _, _)| o == k) {
                let listed = keys.iter().find(|x| x["key"] == k.as_str());
                let v = listed.map_or(0.0, |x| x["estimate"].as_f64().unwrap());
                let t = listed.and_then(|x| x["truth"].as_f64());
                expected.push((e["index"].as_u64().unwrap(), k.clone(), "resolved", v, t));
            }
        }
        firing = over.into_iter().map(|(k, _, _)| k).collect();
    }
    let mut got: Vec<Expected> = std::fs::read_to_string(&alerts)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Json = serde_json::from_str(l).unwrap();
            assert_eq!(v["rule"], "elephant");
            let state = if v["state"] == "firing" {
                "firing"
            } else {
                "resolved"
            };
            (
                v["epoch"].as_u64().unwrap(),
                v["key"].as_str().unwrap().to_string(),
                state,
                v["estimate"].as_f64().unwrap(),
                v["truth"].as_f64(),
            )
        })
        .collect();
    let order = |a: &Expected, b: &Expected| (a.0, &a.1, a.2).cmp(&(b.0, &b.1, b.2));
    got.sort_by(order);
    expected.sort_by(order);
    assert!(!expected.is_empty());
    assert_eq!(got, expected);
    let fired = expected.iter().filter(|e| e.2 == "firing").count();
    assert_eq!(
        one(
            &s,
            "netsift_alerts_total",
            &[("rule", "elephant"), ("state", "firing")]
        ),
        fired as f64
    );
}

#[test]
fn bad_alert_rules_and_addresses_stop_the_run_with_one_line() {
    let config = tmp("bad.toml");
    for (extra, words) in [
        (
            "[[alert]]\nname = \"x\"\ntask = \"heavy_hitters\"\n",
            &["`x`", "threshold"][..],
        ),
        (
            "[[alert]]\nname = \"x\"\ntask = \"heavy_hitters\"\nthreshold = 5\nfour = 2\n",
            &["four"],
        ),
        (
            "[[alert]]\nname = \"x\"\ntask = \"entropy\"\nthreshold = 5\n",
            &["`x`", "entropy"],
        ),
    ] {
        std::fs::write(&config, format!("{CONFIG}{extra}")).unwrap();
        let out = netsift()
            .args(["run", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        for w in words {
            assert!(err.contains(w), "{extra:?}: {err}");
        }
    }
    let out = netsift()
        .args(["run", "--task", "cardinality", "--metrics", "no-port-here"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--metrics no-port-here"), "{err}");
}
