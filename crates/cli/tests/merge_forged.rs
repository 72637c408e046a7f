//! `netsift merge` given forged snapshots (issue 33, point 2): a well-framed snapshot (valid
//! checksum) whose RevSketch state claims 2^34 rows (the report's 64 GiB allocation that aborted
//! the controller) and one whose MRAC state asks for 2^62 EM iterations (the hang) are rejected
//! with a warning naming the file; the good host's snapshot is merged and answered, the
//! report's notes name the rejected files, and the command exits non-zero, quickly.

mod common;
use common::netsift;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use snapshot::forge::{substitute, varint_positions};

fn run_host(capture: &Path, host: &str, dir: &Path) -> PathBuf {
    let out = netsift()
        .arg("run")
        .arg(capture)
        .args([
            "--task",
            "heavy_hitters,flow_size_distribution",
            "--algo",
            "rev_sketch,mrac",
            "--key",
            "src",
            "--workers",
            "1",
            "--host",
            host,
            "--snapshots",
        ])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join(format!("{host}-epoch000000.nss"))
}

/// `file`'s snapshot with the `nth` varint of instance `algo`'s state set to `value`, written as
/// `name` with a valid header and checksum.
fn forge(file: &Path, algo: &str, nth: usize, value: u64, name: &Path) {
    let mut s = snapshot::read(file).unwrap();
    let i = s
        .instances
        .iter_mut()
        .find(|i| i.algorithm == algo)
        .unwrap();
    let at = varint_positions(&i.state)[nth];
    i.state = substitute(&i.state, at, value).unwrap();
    std::fs::write(name, snapshot::encode(&s)).unwrap();
}

#[test]
fn forged_states_are_rejected_and_the_rest_answered() {
    let d = common::tmp("forged");
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let capture = d.join("c.pcap");
    let st = netsift()
        .args([
            "gen",
            "--packets",
            "30000",
            "--flows",
            "3000",
            "--seed",
            "5",
            "--out",
        ])
        .arg(&capture)
        .status()
        .unwrap();
    assert!(st.success());
    let snaps = d.join("s");
    let good = run_host(&capture, "good", &snaps);
    let rev = run_host(&capture, "rev", &snaps);
    let mrac = run_host(&capture, "mrac", &snaps);
    // RevSketch's state starts with its configuration: rows first. MRAC's: arrays, width,
    // em_iterations.
    forge(&rev, "rev_sketch", 0, 1 << 34, &rev);
    forge(&mrac, "mrac", 2, 1 << 62, &mrac);
    let started = Instant::now();
    let out = netsift()
        .arg("merge")
        .args([&good, &rev, &mrac])
        .arg("--json")
        .output()
        .unwrap();
    let took = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "accepted: {err}");
    assert!(took < Duration::from_secs(60), "{took:?}");
    for name in ["rev-epoch000000.nss", "mrac-epoch000000.nss"] {
        assert!(
            err.lines()
                .any(|l| l.starts_with("netsift: warning: snapshot") && l.contains(name)),
            "{err}"
        );
    }
    assert!(err.contains("rows"), "{err}");
    assert!(err.contains("em_iterations"), "{err}");
    let last = err.trim_end().lines().last().unwrap_or_default();
    assert!(
        last.starts_with("netsift: error: 2 snapshot(s) rejected"),
        "{err}"
    );
    // The good host's epoch was answered, and the report says what was left out.
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let epochs = report["epochs"].as_array().unwrap();
    assert_eq!(epochs.len(), 1);
    let tasks = epochs[0]["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2, "{}", epochs[0]);
    assert!(
        tasks
            .iter()
            .any(|t| t["task"] == "heavy_hitters" && t["answer"]["reported"].as_u64() > Some(0)),
        "{}",
        epochs[0]
    );
    let notes = report["notes"].to_string();
    assert!(
        notes.contains("rejected snapshot") && notes.contains("rev-epoch000000.nss"),
        "{notes}"
    );
    assert!(notes.contains("mrac-epoch000000.nss"), "{notes}");
    // Without the forged ones, the same answers and success.
    let alone = netsift()
        .arg("merge")
        .arg(&good)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        alone.status.success(),
        "{}",
        String::from_utf8_lossy(&alone.stderr)
    );
    let alone: serde_json::Value = serde_json::from_slice(&alone.stdout).unwrap();
    assert_eq!(
        common::answers(&report),
        common::answers(&alone),
        "the good host's answers"
    );
    let _ = std::fs::remove_dir_all(&d);
}
