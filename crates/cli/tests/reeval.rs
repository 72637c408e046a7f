//! `netsift bench reeval --figure all --quick`: every figure's files are written and its JSON
//! holds the expected series. No timing is asserted (the machines are shared).

use std::collections::BTreeSet;
use std::process::Command;

/// (figure, the series its JSON must hold).
const EXPECTED: [(&str, &[&str]); 7] = [
    (
        "1",
        &["Linear", "Cuckoo-1", "Cuckoo-4", "Count array", "Count-Min"],
    ),
    (
        "2",
        &[
            "Count array",
            "Linear",
            "Cuckoo-1",
            "Cuckoo-4",
            "Count-Min",
            "Heap",
        ],
    ),
    ("3", &["Count array", "Count-Min", "Linear", "Heap"]),
    ("4", &["Count array", "Linear"]),
    ("5", &["Linear", "LinearPtr"]),
    ("8", &["One thread", "Shared", "Separate"]),
    ("9", &["Count array", "Linear", "Cuckoo-4"]),
];

#[test]
fn reeval_quick_writes_every_figure() {
    let dir = testkit::scratch("reeval").join("out");
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_netsift"))
        .args([
            "bench", "reeval", "--figure", "all", "--quick", "--json", "--out",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let all = all.as_array().unwrap();
    for (fig, series) in EXPECTED {
        for ext in ["csv", "json", "png", "svg"] {
            let f = dir.join(format!("fig{fig}.{ext}"));
            let len = std::fs::metadata(&f).map(|m| m.len()).unwrap_or(0);
            assert!(len > 0, "{} missing or empty", f.display());
        }
        let text = std::fs::read_to_string(dir.join(format!("fig{fig}.json"))).unwrap();
        let points: serde_json::Value = serde_json::from_str(&text).unwrap();
        let points = points.as_array().unwrap();
        assert!(!points.is_empty(), "figure {fig}");
        let found: BTreeSet<&str> = points
            .iter()
            .map(|p| p["series"].as_str().unwrap())
            .collect();
        for s in series {
            assert!(
                found.contains(s),
                "figure {fig}: no series {s} in {found:?}"
            );
        }
        for p in points {
            assert_eq!(p["figure"], fig);
            assert!(p["packets"].as_u64().unwrap() > 0, "figure {fig}: {p}");
            let (avg, p99) = (p["ns_avg"].as_f64().unwrap(), p["ns_p99"].as_f64().unwrap());
            assert!(avg.is_finite() && avg >= 0.0 && p99.is_finite() && p99 >= 0.0);
        }
        // The CSV has a header and one row per point.
        let csv = std::fs::read_to_string(dir.join(format!("fig{fig}.csv"))).unwrap();
        assert_eq!(csv.lines().count(), points.len() + 1, "figure {fig}");
        // Stdout's JSON holds the same points.
        assert_eq!(
            all.iter().filter(|p| p["figure"] == fig).count(),
            points.len()
        );
    }
    // Heavy-hitter precision is scored for the sketches of figures 1-2, in [0, 1].
    let fig2 = std::fs::read_to_string(dir.join("fig2.json")).unwrap();
    let fig2: serde_json::Value = serde_json::from_str(&fig2).unwrap();
    for p in fig2.as_array().unwrap() {
        let pr = p["precision"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&pr), "{p}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reeval_rejects_an_unknown_figure() {
    let out = Command::new(env!("CARGO_BIN_EXE_netsift"))
        .args(["bench", "reeval", "--figure", "6", "--quick"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("all"));
}
