//! Alert rules driven by synthetic epoch reports: `for`, hysteresis, cool-down, fractions,
//! scalar rules, the per-epoch rate limit and its suppression count, the key cap, reload, the
//! sinks (file, a command, a command killed after its timeout) and bad rule files.

use std::time::Duration;

use algo::Task;
use key::KeyKind;
use measure::report::{Answer, Exact, Listed, TaskResult};
use measure::{AlertRule, EpochReport, RunConfig};
use monitor::{Ctx, Monitor, MonitorOpts, State};
use truth::Weight;

fn result(task: Task, algorithm: &str, keys: &[(&str, u64)]) -> TaskResult {
    TaskResult {
        task,
        algorithm: algorithm.into(),
        key: KeyKind::Src,
        threshold: None,
        answer: Answer {
            reported: Some(keys.len() as u64),
            keys: keys
                .iter()
                .map(|(k, e)| Listed {
                    key: k.to_string(),
                    estimate: *e,
                    truth: None,
                    first_ns: None,
                    last_ns: None,
                })
                .collect(),
            ..Answer::default()
        },
        truth: Exact::default(),
        accuracy: Default::default(),
        note: None,
        warnings: vec![],
        recovery: None,
    }
}

fn scalar(task: Task, algorithm: &str, v: f64, truth: f64) -> TaskResult {
    TaskResult {
        answer: Answer {
            estimate: Some(v),
            ..Answer::default()
        },
        truth: Exact {
            value: Some(truth),
            count: None,
        },
        ..result(task, algorithm, &[])
    }
}

fn epoch(index: u64, packets: u64, tasks: Vec<TaskResult>) -> EpochReport {
    EpochReport {
        index,
        packets,
        bytes: packets * 100,
        flows: None,
        partial: false,
        partial_reasons: vec![],
        coverage: None,
        hosts: vec![],
        paths: None,
        capture: None,
        tasks,
        costs: vec![],
    }
}

/// Heavy hitters by count_min listing these keys.
fn hh(index: u64, keys: &[(&str, u64)]) -> EpochReport {
    epoch(
        index,
        10_000,
        vec![result(Task::HeavyHitters, "count_min", keys)],
    )
}

fn rule(toml_text: &str) -> AlertRule {
    toml::from_str(toml_text).unwrap()
}

const CTX: Ctx = Ctx {
    trace: "synthetic",
    key: KeyKind::Src,
    weight: Weight::Packets,
    totals: None,
};

fn tmp(name: &str) -> std::path::PathBuf {
    testkit::scratch("monitor").join(name)
}

/// A monitor whose events go to a file of its own (the test reads them back from `epoch`).
fn monitor(name: &str, rules: Vec<AlertRule>, burst: usize) -> Monitor {
    let opts = MonitorOpts {
        alerts_file: Some(tmp(&format!("{name}.jsonl"))),
        max_events_per_epoch: burst,
        ..MonitorOpts::default()
    };
    Monitor::new(opts, rules).unwrap()
}

/// (epoch, key, state) of each event of `m` over `epochs`.
fn run(m: &mut Monitor, epochs: &[EpochReport]) -> Vec<(u64, Option<String>, State)> {
    epochs
        .iter()
        .flat_map(|e| m.epoch(e, &CTX))
        .map(|ev| (ev.epoch, ev.key, ev.state))
        .collect()
}

fn k(s: &str) -> Option<String> {
    Some(s.to_string())
}

/// The value of one sample line of the metrics text.
fn sample(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[test]
fn fires_after_for_consecutive_epochs_only() {
    let r = rule("name = \"big\"\ntask = \"heavy_hitters\"\nthreshold = 100\nfor = 3\n");
    let mut m = monitor("for", vec![r], 100);
    let ev = run(
        &mut m,
        &[
            hh(0, &[("a", 150)]),
            hh(1, &[("a", 150)]),
            hh(2, &[("a", 50)]), // streak broken
            hh(3, &[("a", 150)]),
            hh(4, &[("a", 150)]),
            hh(5, &[("a", 100)]), // the threshold itself counts
        ],
    );
    assert_eq!(ev, vec![(5, k("a"), State::Firing)]);
}

#[test]
fn hysteresis_holds_until_the_clear_level() {
    let r = rule("name = \"big\"\ntask = \"heavy_hitters\"\nthreshold = 100\nclear = 50\n");
    let mut m = monitor("hyst", vec![r], 100);
    let ev = run(
        &mut m,
        &[
            hh(0, &[("a", 150)]),
            hh(1, &[("a", 80)]), // below the threshold, above clear: still firing
            hh(2, &[("a", 120)]), // no second firing
            hh(3, &[("a", 50)]), // clear itself does not resolve
            hh(4, &[("a", 49)]),
        ],
    );
    assert_eq!(
        ev,
        vec![(0, k("a"), State::Firing), (4, k("a"), State::Resolved)]
    );
}

#[test]
fn cooldown_blocks_refiring_then_forgets_the_key() {
    let r = rule("name = \"big\"\ntask = \"heavy_hitters\"\nthreshold = 100\ncooldown = 2\n");
    let mut m = monitor("cool", vec![r], 100);
    let ev = run(
        &mut m,
        &[
            hh(0, &[("a", 150)]),
            hh(1, &[("a", 10)]),  // resolved
            hh(2, &[("a", 150)]), // cooling 1 of 2
            hh(3, &[("a", 150)]), // cooling 2 of 2
            hh(4, &[("a", 150)]), // fires again
        ],
    );
    assert_eq!(
        ev,
        vec![
            (0, k("a"), State::Firing),
            (1, k("a"), State::Resolved),
            (4, k("a"), State::Firing)
        ]
    );
    // After a resolution and its cool-down with the key gone, nothing is held for it.
    run(&mut m, &[hh(5, &[]), hh(6, &[]), hh(7, &[]), hh(8, &[])]);
    let text = m.metrics_text();
    assert_eq!(
        sample(&text, "netsift_alert_keys_tracked{rule=\"big\"}"),
        Some(0.0),
        "{text}"
    );
}

#[test]
fn a_fraction_is_of_the_epochs_weight() {
    let r = rule("name = \"share\"\ntask = \"heavy_hitters\"\nfraction = 0.01\n");
    let mut m = monitor("frac", vec![r], 100);
    // 1% of 10,000 packets: 100.
    let ev = m.epoch(&hh(0, &[("a", 100), ("b", 99)]), &CTX);
    assert_eq!(ev.len(), 1);
    assert_eq!((ev[0].key.as_deref(), ev[0].threshold), (Some("a"), 100.0));
    let bytes = Ctx {
        weight: Weight::Bytes,
        ..CTX
    };
    // In bytes the epoch weighs 1,000,000: the threshold is 10,000.
    let ev = m.epoch(&hh(1, &[("b", 9_999), ("c", 10_000)]), &bytes);
    let got: Vec<_> = ev
        .iter()
        .map(|e| (e.key.as_deref(), e.state, e.threshold))
        .collect();
    assert_eq!(
        got,
        vec![
            (Some("c"), State::Firing, 10_000.0),
            (Some("a"), State::Resolved, 10_000.0)
        ]
    );
}

#[test]
fn scalar_rules_carry_truth_and_fire_below() {
    let r =
        rule("name = \"flat\"\ntask = \"entropy\"\nthreshold = 2.0\nclear = 3.0\nbelow = true\n");
    let mut m = monitor("below", vec![r], 100);
    let e = |i, v| epoch(i, 1000, vec![scalar(Task::Entropy, "univmon", v, v + 0.5)]);
    let evs: Vec<_> = [e(0, 5.0), e(1, 1.5), e(2, 2.5), e(3, 3.5)]
        .iter()
        .flat_map(|x| m.epoch(x, &CTX))
        .collect();
    assert_eq!(evs.len(), 2, "{evs:?}");
    assert_eq!(
        (evs[0].epoch, evs[0].state, evs[0].key.clone()),
        (1, State::Firing, None)
    );
    assert_eq!(evs[0].truth, Some(2.0));
    assert_eq!((evs[1].epoch, evs[1].state), (3, State::Resolved));
}

#[test]
fn a_rule_watches_its_algorithm_or_the_tasks_first() {
    let named =
        rule("name = \"ss\"\ntask = \"heavy_hitters\"\nalgo = \"space_saving\"\nthreshold = 10\n");
    let first = rule("name = \"any\"\ntask = \"heavy_hitters\"\nthreshold = 10\n");
    let mut m = monitor("algo", vec![named, first], 100);
    let e = epoch(
        0,
        1000,
        vec![
            result(Task::HeavyHitters, "count_min", &[("a", 20)]),
            result(Task::HeavyHitters, "space_saving", &[("b", 20)]),
        ],
    );
    let ev: Vec<_> = m
        .epoch(&e, &CTX)
        .into_iter()
        .map(|e| (e.rule, e.algorithm, e.key))
        .collect();
    assert_eq!(
        ev,
        vec![
            ("ss".into(), "space_saving".into(), k("b")),
            ("any".into(), "count_min".into(), k("a"))
        ]
    );
}

#[test]
fn an_unlisted_key_resolves_only_when_it_must_be_clear() {
    let r = rule("name = \"big\"\ntask = \"heavy_hitters\"\nthreshold = 100\n");
    let mut m = monitor("cut", vec![r], 100);
    assert_eq!(m.epoch(&hh(0, &[("a", 150)]), &CTX).len(), 1);
    // The list was cut (5 reported, 1 listed) at 120: `a` may still be above 100.
    let mut e = hh(1, &[("b", 120)]);
    e.tasks[0].answer.reported = Some(5);
    let ev = m.epoch(&e, &CTX);
    assert!(ev.iter().all(|e| e.key != k("a")), "{ev:?}");
    // Cut at 90: `a` is at most 90, resolved with that bound.
    let mut e = hh(2, &[("b", 90)]);
    e.tasks[0].answer.reported = Some(5);
    let ev = m.epoch(&e, &CTX);
    let a: Vec<_> = ev.iter().filter(|e| e.key == k("a")).collect();
    assert_eq!(a.len(), 1);
    assert_eq!((a[0].state, a[0].estimate), (State::Resolved, 90.0));
}

#[test]
fn bursts_are_rate_limited_and_counted() {
    let r = rule("name = \"big\"\ntask = \"heavy_hitters\"\nthreshold = 10\n");
    let mut m = monitor("burst", vec![r], 10);
    let names: Vec<String> = (0..30).map(|i| format!("10.0.0.{i}")).collect();
    let keys: Vec<(&str, u64)> = names.iter().map(|n| (n.as_str(), 100)).collect();
    let ev = m.epoch(&hh(0, &keys), &CTX);
    assert_eq!(ev.len(), 10);
    assert_eq!(m.suppressed(), 20);
    let text = m.metrics_text();
    assert_eq!(
        sample(&text, "netsift_alerts_suppressed_total "),
        Some(20.0)
    );
    assert_eq!(
        sample(&text, "netsift_alerts_total{rule=\"big\",state=\"firing\"}"),
        Some(10.0),
        "{text}"
    );
    // The file holds exactly the events sent, one JSON line each.
    let lines = std::fs::read_to_string(tmp("burst.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 10);
    for l in lines.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["rule"], "big");
        assert_eq!(v["state"], "firing");
        assert_eq!(v["threshold"], 10.0);
        assert_eq!(v["type"], "alert");
    }
}

#[test]
fn keys_per_rule_are_capped() {
    let r = rule("name = \"big\"\ntask = \"heavy_hitters\"\nthreshold = 10\nfor = 2\n");
    let opts = MonitorOpts {
        alerts_file: Some(tmp("cap.jsonl")),
        max_keys: 5,
        ..MonitorOpts::default()
    };
    let mut m = Monitor::new(opts, vec![r]).unwrap();
    let names: Vec<String> = (0..12).map(|i| format!("k{i}")).collect();
    let keys: Vec<(&str, u64)> = names.iter().map(|n| (n.as_str(), 100)).collect();
    m.epoch(&hh(0, &keys), &CTX);
    let text = m.metrics_text();
    assert_eq!(
        sample(&text, "netsift_alert_keys_tracked{rule=\"big\"}"),
        Some(5.0)
    );
    assert_eq!(
        sample(&text, "netsift_alert_keys_dropped "),
        Some(7.0),
        "{text}"
    );
    // Only the five tracked keys can reach `for`.
    assert_eq!(m.epoch(&hh(1, &keys), &CTX).len(), 5);
}

#[test]
fn reload_keeps_unchanged_rules_state_and_refuses_bad_rules() {
    let big = rule("name = \"big\"\ntask = \"heavy_hitters\"\nthreshold = 100\n");
    let other = rule("name = \"other\"\ntask = \"heavy_hitters\"\nthreshold = 1000\n");
    let mut m = monitor("reload", vec![big.clone()], 100);
    assert_eq!(m.epoch(&hh(0, &[("a", 150)]), &CTX).len(), 1);
    let bad = rule("name = \"big\"\ntask = \"heavy_hitters\"\nthreshold = 100\nfor = 0\n");
    let e = m.reload(vec![bad]).unwrap_err().to_string();
    assert!(e.contains("`big`") && e.contains("`for`"), "{e}");
    m.reload(vec![big, other]).unwrap();
    // `a` was firing under the kept rule: it resolves, it does not fire again.
    let ev = run(&mut m, &[hh(1, &[("a", 10)])]);
    assert_eq!(ev, vec![(1, k("a"), State::Resolved)]);
    let dup = rule("name = \"other\"\ntask = \"heavy_hitters\"\nthreshold = 5\n");
    let e = m.reload(vec![dup.clone(), dup]).unwrap_err().to_string();
    assert!(e.contains("two rules"), "{e}");
}

#[test]
fn alert_exec_gets_each_line_and_a_hung_command_is_killed_and_counted() {
    let r = rule("name = \"big\"\ntask = \"heavy_hitters\"\nthreshold = 10\n");
    let got = tmp("exec.out");
    let _ = std::fs::remove_file(&got);
    let opts = MonitorOpts {
        alert_exec: Some(format!("cat >> {}", got.display())),
        exec_timeout: Duration::from_secs(10),
        ..MonitorOpts::default()
    };
    let mut m = Monitor::new(opts, vec![r.clone()]).unwrap();
    m.epoch(&hh(0, &[("a", 100), ("b", 50)]), &CTX);
    m.finish(None);
    let text = std::fs::read_to_string(&got).unwrap();
    let keys: Vec<String> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["key"].to_string())
        .collect();
    assert_eq!(keys, vec!["\"a\"", "\"b\""]);

    let opts = MonitorOpts {
        alert_exec: Some("sleep 37".into()),
        exec_timeout: Duration::from_millis(200),
        ..MonitorOpts::default()
    };
    let mut m = Monitor::new(opts, vec![r]).unwrap();
    m.epoch(&hh(0, &[("a", 100)]), &CTX);
    m.finish(None);
    let text = m.metrics_text();
    assert_eq!(
        sample(&text, "netsift_alert_exec_timeouts "),
        Some(1.0),
        "{text}"
    );
    assert_eq!(sample(&text, "netsift_alert_exec_failures "), Some(1.0));
}

const MEASURES: &str = "[[measure]]\ntask = \"heavy_hitters\"\nalgo = \"count_min\"\n\
                        [[measure]]\ntask = \"cardinality\"\nalgo = \"hyperloglog\"\n";

fn config_error(alert: &str) -> String {
    match RunConfig::from_toml(&format!("{MEASURES}[[alert]]\n{alert}")) {
        Err(e) => e.to_string(),
        Ok(c) => c.validate().unwrap_err().to_string(),
    }
}

#[test]
fn bad_rules_are_refused_naming_the_rule_and_field() {
    let ok = "name = \"x\"\ntask = \"heavy_hitters\"\nthreshold = 10\n";
    RunConfig::from_toml(&format!("{MEASURES}[[alert]]\n{ok}"))
        .unwrap()
        .validate()
        .unwrap();
    for (alert, words) in [
        (format!("{ok}treshold = 4\n"), &["treshold"][..]),
        (
            "name = \"x\"\ntask = \"heavy_hitters\"\n".into(),
            &["`x`", "threshold", "missing"],
        ),
        (
            "name = \"x\"\ntask = \"elephants\"\nthreshold = 1\n".into(),
            &["elephants"],
        ),
        (
            "name = \"x\"\ntask = \"entropy\"\nthreshold = 1\n".into(),
            &["`x`", "does not measure entropy"],
        ),
        (
            format!("{ok}algo = \"space_saving\"\n"),
            &["`x`", "`algo`", "count_min"],
        ),
        (
            "name = \"x\"\ntask = \"heavy_hitters\"\nthreshold = 10\nclear = 20\n".into(),
            &["`x`", "`clear`"],
        ),
        (
            "name = \"x\"\ntask = \"cardinality\"\nfraction = 0.5\n".into(),
            &["`x`", "`fraction`"],
        ),
        (
            "name = \"x\"\ntask = \"heavy_hitters\"\nfraction = 1.5\n".into(),
            &["`fraction`", "(0, 1)"],
        ),
        (
            "name = \"x\"\ntask = \"heavy_hitters\"\nthreshold = 10\nbelow = true\n".into(),
            &["`below`"],
        ),
        (
            "task = \"heavy_hitters\"\nthreshold = 10\n".into(),
            &["name"],
        ),
    ] {
        let e = config_error(&alert);
        for w in words {
            assert!(e.contains(w), "{alert:?}: {e:?} should name {w}");
        }
    }
}
