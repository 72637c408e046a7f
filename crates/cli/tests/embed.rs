//! `examples/embed.rs` (the engine as a library, in under 40 lines) answers as `netsift run
//! --json` does: the same report but for the costs and timings, on the README's main job (the
//! built-in trace) and on a real capture. `cargo test` builds the example beside this binary.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{netsift, ok};

/// The example's binary, built by `cargo test` into the `examples` directory beside the
/// package's binaries.
fn embed() -> Command {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_netsift"));
    let dir = bin.parent().expect("the binaries' directory");
    let exe = dir
        .join("examples")
        .join(format!("embed{}", std::env::consts::EXE_SUFFIX));
    assert!(
        exe.exists(),
        "{} not built: `cargo test -p netsift` builds it (a run of one test target does not: \
         `cargo build -p netsift --example embed` first)",
        exe.display()
    );
    Command::new(exe)
}

/// The report without what differs between two runs of the same input: wall times, rates,
/// per-epoch costs.
fn answers(v: &serde_json::Value) -> serde_json::Value {
    let timing = |k: &str| {
        k == "costs"
            || ["seconds", "_ms", "ns_per", "clock", "mpps"]
                .iter()
                .any(|t| k.contains(t))
    };
    match v {
        serde_json::Value::Object(o) => o
            .iter()
            .filter(|(k, _)| !timing(k))
            .map(|(k, v)| (k.clone(), answers(v)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
        serde_json::Value::Array(a) => a.iter().map(answers).collect(),
        v => v.clone(),
    }
}

fn same_answers(args: &[&str]) {
    let lib: serde_json::Value =
        serde_json::from_str(&ok(&embed().args(args).output().unwrap())).unwrap();
    let cli: serde_json::Value = serde_json::from_str(&ok(&netsift()
        .arg("run")
        .args(args)
        .arg("--json")
        .output()
        .unwrap()))
    .unwrap();
    assert!(!lib["epochs"].as_array().unwrap().is_empty());
    assert!(lib["throughput"].as_array().is_some_and(|t| !t.is_empty()));
    let mut diffs = vec![];
    differ(&answers(&lib), &answers(&cli), "", &mut diffs);
    assert!(
        diffs.is_empty(),
        "{args:?}: the library's report differs at {diffs:#?}"
    );
}

/// Where `a` and `b` differ (JSON paths with both values), at most 10.
fn differ(a: &serde_json::Value, b: &serde_json::Value, at: &str, out: &mut Vec<String>) {
    use serde_json::Value::{Array, Object};
    if out.len() >= 10 || a == b {
        return;
    }
    match (a, b) {
        (Object(x), Object(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                let null = serde_json::Value::Null;
                let (p, q) = (x.get(k).unwrap_or(&null), y.get(k).unwrap_or(&null));
                differ(p, q, &format!("{at}.{k}"), out);
            }
        }
        (Array(x), Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                differ(p, q, &format!("{at}[{i}]"), out);
            }
        }
        _ => out.push(format!("{at}: library {a}, command {b}")),
    }
}

#[test]
fn the_library_answers_as_the_command_on_a_real_capture() {
    let Some(t) = testkit::trace("ndpi_gnutella.pcap") else {
        return;
    };
    same_answers(&[t.to_str().unwrap()]);
}

#[test]
fn the_library_answers_as_the_command_on_the_readme_main_job() {
    same_answers(&[]);
}
