//! The metrics endpoint as Prometheus sees it: scraped over HTTP with a real client (ureq),
//! parsed with a real Prometheus text parser (prometheus-parse), values checked against the
//! synthetic epochs fed to the monitor.

use algo::Task;
use key::KeyKind;
use measure::report::{Answer, CaptureStats, EpochCost, Exact, Listed, TaskResult};
use measure::{EpochReport, Totals};
use monitor::{Ctx, Monitor, MonitorOpts};
use prometheus_parse::Value;
use truth::Weight;

mod scrape;
use scrape::{agent, one, scrape, values};

fn epoch(index: u64, capture: Option<CaptureStats>) -> EpochReport {
    let keys: Vec<Listed> = (0..25u64)
        .map(|i| Listed {
            key: format!("10.0.{index}.{i}"),
            estimate: 1000 - i,
            truth: Some(990 - i),
            first_ns: None,
            last_ns: None,
        })
        .collect();
    EpochReport {
        index,
        packets: 50_000,
        bytes: 5_000_000,
        flows: Some(1234),
        partial: false,
        partial_reasons: vec![],
        coverage: None,
        hosts: vec![],
        paths: None,
        capture,
        tasks: vec![
            TaskResult {
                task: Task::HeavyHitters,
                algorithm: "count_min".into(),
                key: KeyKind::Src,
                threshold: Some(500.0),
                answer: Answer {
                    reported: Some(40),
                    keys,
                    ..Answer::default()
                },
                truth: Exact {
                    value: None,
                    count: Some(41),
                },
                accuracy: measure::metrics::Accuracy {
                    f1: Some(0.9875),
                    ..Default::default()
                },
                note: None,
                warnings: vec![],
                recovery: None,
            },
            TaskResult {
                task: Task::Cardinality,
                algorithm: "hyperloglog".into(),
                key: KeyKind::Src,
                threshold: None,
                answer: Answer {
                    estimate: Some(1250.5),
                    ..Answer::default()
                },
                truth: Exact {
                    value: Some(1234.0),
                    count: None,
                },
                accuracy: Default::default(),
                note: None,
                warnings: vec![],
                recovery: None,
            },
        ],
        // Epoch i cost count_min (i + 1) ms of updates and 2 ms of queries.
        costs: vec![EpochCost {
            algorithm: "count_min".into(),
            key: KeyKind::Src,
            updates: 50_000,
            update_seconds: 1e-3 * (index + 1) as f64,
            query_seconds: 2e-3,
        }],
    }
}

#[test]
fn a_scrape_parses_and_says_what_the_epochs_said() {
    let opts = MonitorOpts {
        metrics: Some("127.0.0.1:0".into()),
        top: 3,
        ..MonitorOpts::default()
    };
    let mut m = Monitor::new(opts, vec![]).unwrap();
    let url = format!("http://{}/metrics", m.metrics_addr().unwrap());
    let mut totals = Totals {
        packets: 100_007,
        ..Totals::default()
    };
    totals.classes.ipv4 = 100_000;
    totals.classes.truncated = 7;
    let ctx = Ctx {
        trace: "synthetic",
        key: KeyKind::Src,
        weight: Weight::Packets,
        totals: Some(&totals),
    };
    // A file's epoch: no kernel counts, so no capture metric at all (not a zero).
    m.epoch(&epoch(0, None), &ctx);
    let s = scrape(&url);
    assert!(values(&s, "netsift_capture_dropped_total", &[]).is_empty());
    // A live epoch: the kernel's counts appear and add up.
    let cap = CaptureStats {
        received: 50_010,
        dropped: 10,
        if_dropped: 1,
    };
    m.epoch(&epoch(1, Some(cap)), &ctx);
    m.epoch(&epoch(2, Some(cap)), &ctx);
    let s = scrape(&url);
    assert_eq!(one(&s, "netsift_epochs_total", &[]), 3.0);
    assert_eq!(one(&s, "netsift_epoch_index", &[]), 2.0);
    assert_eq!(one(&s, "netsift_epoch_packets_total", &[]), 150_000.0);
    assert_eq!(one(&s, "netsift_epoch_bytes_total", &[]), 15_000_000.0);
    assert_eq!(one(&s, "netsift_epoch_flows", &[]), 1234.0);
    assert_eq!(one(&s, "netsift_capture_dropped_total", &[]), 20.0);
    assert_eq!(one(&s, "netsift_capture_received_total", &[]), 100_020.0);
    assert_eq!(one(&s, "netsift_capture_if_dropped_total", &[]), 2.0);
    // Totals are counters of what was read: the same totals thrice count once.
    assert_eq!(
        one(&s, "netsift_read_packets_total", &[("class", "ipv4")]),
        100_000.0
    );
    assert_eq!(
        one(&s, "netsift_read_packets_total", &[("class", "truncated")]),
        7.0
    );
    let hh = [
        ("task", "heavy_hitters"),
        ("algorithm", "count_min"),
        ("key", "src"),
    ];
    assert_eq!(one(&s, "netsift_task_reported", &hh), 40.0);
    assert_eq!(one(&s, "netsift_task_threshold", &hh), 500.0);
    let mut f1 = hh.to_vec();
    f1.push(("metric", "f1"));
    assert_eq!(one(&s, "netsift_task_accuracy", &f1), 0.9875);
    let card = [("task", "cardinality"), ("algorithm", "hyperloglog")];
    assert_eq!(one(&s, "netsift_task_estimate", &card), 1250.5);
    let mut truth = card.to_vec();
    truth.push(("of", "value"));
    assert_eq!(one(&s, "netsift_task_true", &truth), 1234.0);
    // Costs while the run goes on: the latest epoch's, and the sums so far (3 epochs; the
    // update time per keyed packet over the 100 000 read).
    let cm = [("algorithm", "count_min"), ("key", "src")];
    assert_eq!(one(&s, "netsift_epoch_update_seconds", &cm), 3e-3);
    assert_eq!(one(&s, "netsift_epoch_query_seconds", &cm), 2e-3);
    assert!((one(&s, "netsift_update_seconds", &cm) - 6e-3).abs() < 1e-12);
    assert_eq!(one(&s, "netsift_updates", &cm), 150_000.0);
    assert!((one(&s, "netsift_query_seconds", &cm) - 6e-3).abs() < 1e-12);
    assert!((one(&s, "netsift_query_ms_per_epoch", &cm) - 2.0).abs() < 1e-9);
    assert!((one(&s, "netsift_update_ns_per_packet", &cm) - 60.0).abs() < 1e-6);
    // Bounded labels: the top 3 keys of the latest epoch only, none of the earlier epochs'.
    let mut keys: Vec<(String, f64)> = s
        .samples
        .iter()
        .filter(|x| x.metric == "netsift_task_key_estimate")
        .map(|x| {
            let v = match x.value {
                Value::Gauge(v) | Value::Untyped(v) => v,
                _ => f64::NAN,
            };
            (x.labels.get("flow").unwrap().to_string(), v)
        })
        .collect();
    keys.sort_by(|a, b| b.1.total_cmp(&a.1));
    assert_eq!(
        keys,
        vec![
            ("10.0.2.0".to_string(), 1000.0),
            ("10.0.2.1".to_string(), 999.0),
            ("10.0.2.2".to_string(), 998.0)
        ]
    );
    // Anything but /metrics is a 404.
    let r = agent(false)
        .get(url.replace("/metrics", "/nothing"))
        .call()
        .unwrap();
    assert_eq!(r.status(), 404);
}

#[test]
fn a_port_in_use_or_a_bad_address_is_one_clear_error() {
    let opts = MonitorOpts {
        metrics: Some("127.0.0.1:0".into()),
        ..MonitorOpts::default()
    };
    let m = Monitor::new(opts, vec![]).unwrap();
    let taken = m.metrics_addr().unwrap().to_string();
    for (addr, word) in [(taken.as_str(), "cannot listen"), ("nowhere", "ADDR:PORT")] {
        let opts = MonitorOpts {
            metrics: Some(addr.into()),
            ..MonitorOpts::default()
        };
        let e = Monitor::new(opts, vec![]).err().unwrap().to_string();
        assert!(
            e.contains("--metrics") && e.contains(addr) && e.contains(word),
            "{e}"
        );
    }
}
