//! Unit tests of the run configuration (moved out of `mod.rs` to keep it under 800 lines).

use super::*;

#[test]
fn unknown_fields_are_named() {
    let e = RunConfig::from_toml("key = \"src\"\nepoch_pakets = 5\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("epoch_pakets"), "{e}");
    let e = RunConfig::from_toml(
        "[[measure]]\ntask = \"heavy_hitters\"\nalgo = \"count_min\"\nthreshhold = 1\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("threshhold"), "{e}");
    let e = RunConfig::from_toml("key = \"sixtuple\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("sixtuple"), "{e}");
}

#[test]
fn a_full_config_parses_and_validates() {
    let c = RunConfig::from_toml(
        r#"
        key = "src"
        weight = "bytes"
        epoch_ms = 1000
        seed = 9
        [[measure]]
        task = "heavy_hitters"
        algo = "count_min"
        threshold = 0.001
        params = { rows = 3 }
        [[measure]]
        task = "cardinality"
        algo = "hyperloglog"
        "#,
    )
    .unwrap();
    c.validate().unwrap();
    assert_eq!(c.epoch().unwrap(), EpochSpec::Millis(1000));
    assert_eq!(c.measures.len(), 2);
    let mut both = c.clone();
    both.epoch_packets = Some(10);
    assert!(both
        .validate()
        .unwrap_err()
        .to_string()
        .contains("epoch_ms"));
}

/// `recover = "sketchvisor"` and `"proportional"` need a written-back state (issue 36):
/// refused at validation for any other algorithm, naming both, never replaced; accepted for
/// Count-Min; `lower` applies to every algorithm.
#[test]
fn a_recovery_that_cannot_apply_is_refused_at_start_up() {
    let text = |algo: &str, recover: &str| {
        format!(
            "[sketchvisor]\nfast_path = \"sketchvisor\"\nrecover = \"{recover}\"\n\
             [[measure]]\ntask = \"heavy_hitters\"\nalgo = \"{algo}\"\n"
        )
    };
    for recover in ["proportional", "sketchvisor"] {
        let c = RunConfig::from_toml(&text("space_saving", recover)).unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains(recover) && e.contains("space_saving"), "{e}");
    }
    for (algo, recover) in [
        ("count_min", "proportional"),
        ("count_min", "sketchvisor"),
        ("space_saving", "lower"),
    ] {
        let c = RunConfig::from_toml(&text(algo, recover)).unwrap();
        c.validate().unwrap();
    }
}

/// `nic_gbps` (SketchVisor 7.1): heavy hitters' base is the NIC's capacity x epoch, in
/// bytes; refused naming the flag where it cannot apply.
#[test]
fn nic_capacity_is_the_heavy_hitter_base_where_it_applies() {
    let c = RunConfig::from_toml(
        "weight = \"bytes\"\nepoch_ms = 1000\nnic_gbps = 40\n\
         [[measure]]\ntask = \"heavy_hitters\"\nalgo = \"count_min\"\n",
    )
    .unwrap();
    c.validate().unwrap();
    assert_eq!(c.nic_base(), Some(5e9));
    let bad = |f: &dyn Fn(&mut RunConfig), says: &str| {
        let mut d = c.clone();
        f(&mut d);
        let e = d.validate().unwrap_err().to_string();
        assert!(e.contains("--nic-gbps") && e.contains(says), "{e}");
    };
    bad(&|d| d.weight = Weight::Packets, "--weight bytes");
    bad(&|d| d.epoch_ms = None, "--epoch-ms");
    bad(&|d| d.nic_gbps = Some(0.0), "positive");
    bad(&|d| d.measures[0].threshold = Some(5000.0), "absolute");
    bad(
        &|d| d.measures[0].task = Task::Cardinality,
        "no heavy hitters",
    );
    // Heavy changers keep the total change (section 7.1): alone, the flag has nothing to set.
    bad(
        &|d| d.measures[0].task = Task::HeavyChangers,
        "no heavy hitters",
    );
}

/// `preset = "sketchvisor"` sets the paper's run where nothing was given, and keeps what was.
#[test]
fn the_sketchvisor_preset_sets_what_was_not_given() {
    let base = RunConfig {
        preset: Some("sketchvisor".into()),
        measures: RunConfig::measures_from_lists(&[Task::HeavyHitters], &[]).unwrap(),
        ..RunConfig::default()
    };
    let mut c = base.clone();
    let note = c.preset_settings(Given::default()).unwrap();
    assert_eq!(c.weight, Weight::Bytes);
    assert_eq!(c.epoch_ms, Some(SKETCHVISOR_EPOCH_MS));
    assert_eq!(c.nic_gbps, Some(SKETCHVISOR_NIC_GBPS));
    assert_eq!(c.sketchvisor.fast_path, visor::FastKind::Sketchvisor);
    assert_eq!(c.sketchvisor.fast_path_bytes, SKETCHVISOR_FAST_PATH_BYTES);
    c.validate().unwrap();
    assert!(note.contains("--nic-gbps 40"), "{note}");
    // Packets given: no NIC base, said; a key trace without time keeps packet epochs.
    let mut c = base.clone();
    let note = c
        .preset_settings(Given {
            weight: true,
            timeless: true,
            ..Given::default()
        })
        .unwrap();
    assert_eq!(
        (c.weight, c.epoch_ms, c.nic_gbps),
        (Weight::Packets, None, None)
    );
    assert!(note.contains("--nic-gbps not set"), "{note}");
    c.validate().unwrap();
    // Other presets set no run setting.
    let mut c = RunConfig {
        preset: Some("agg-evict".into()),
        ..base
    };
    assert!(c.preset_settings(Given::default()).is_none());
    assert_eq!(c.weight, Weight::Packets);
}

#[test]
fn lists_cross_and_reject_impossible_pairs() {
    let m = RunConfig::measures_from_lists(
        &[Task::HeavyHitters, Task::Cardinality],
        &[
            "count_min".into(),
            "hyperloglog".into(),
            "flow_radar".into(),
        ],
    )
    .unwrap();
    let pairs: Vec<(Task, &str)> = m.iter().map(|m| (m.task, m.algorithm.as_str())).collect();
    assert_eq!(
        pairs,
        vec![
            (Task::HeavyHitters, "count_min"),
            (Task::HeavyHitters, "flow_radar"),
            (Task::Cardinality, "hyperloglog"),
            (Task::Cardinality, "flow_radar"),
        ]
    );
    let e = RunConfig::measures_from_lists(&[Task::Entropy], &["hyperloglog".into()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("hyperloglog") && e.contains("entropy"), "{e}");
    let e = RunConfig::measures_from_lists(
        &[Task::Cardinality],
        &["hyperloglog".into(), "space_saving".into()],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("space_saving") && e.contains("cardinality"),
        "{e}"
    );
    assert_eq!(RunConfig::measures_from_lists(&[], &[]).unwrap().len(), 9);
    // Names listed twice count once.
    let m = RunConfig::measures_from_lists(
        &[Task::HeavyHitters, Task::FlowSize, Task::HeavyHitters],
        &["count_min".into(), "count_min".into()],
    )
    .unwrap();
    let pairs: Vec<(Task, &str)> = m.iter().map(|m| (m.task, m.algorithm.as_str())).collect();
    assert_eq!(
        pairs,
        vec![
            (Task::HeavyHitters, "count_min"),
            (Task::FlowSize, "count_min")
        ]
    );
}
