//! `netsift bench instameasure --figure all --quick`: every figure's four files are written, the
//! CSV and JSON agree, and the measured values are sane (the two-layer regulator lets fewer
//! packets through than one-layer RCC, retains more, errors are small fractions). No timing is
//! asserted (the machines are shared).

mod common;

use serde_json::Value;

fn measured<'a>(points: &'a [Value], panel: &str, series: &str) -> Vec<&'a Value> {
    points
        .iter()
        .filter(|p| p["source"] == "measured" && p["panel"] == panel && p["series"] == series)
        .collect()
}

fn value(p: &Value) -> f64 {
    p["value"].as_f64().unwrap()
}

#[test]
fn instameasure_quick_writes_every_figure_with_sane_values() {
    let (dir, stdout) = common::bench_json("instameasure", &["--figure", "all", "--quick"]);
    let stdout = stdout.as_array().unwrap();
    let mut all = Vec::new();
    for fig in ["7", "8", "9", "10", "11"] {
        for ext in ["csv", "json", "png", "svg"] {
            let f = dir.join(format!("fig{fig}.{ext}"));
            let len = std::fs::metadata(&f).map(|m| m.len()).unwrap_or(0);
            assert!(len > 0, "{} missing or empty", f.display());
        }
        let text = std::fs::read_to_string(dir.join(format!("fig{fig}.json"))).unwrap();
        let points: Value = serde_json::from_str(&text).unwrap();
        let points = points.as_array().unwrap().clone();
        let csv = std::fs::read_to_string(dir.join(format!("fig{fig}.csv"))).unwrap();
        assert_eq!(csv.lines().count(), points.len() + 1, "figure {fig}");
        assert_eq!(
            stdout.iter().filter(|p| p["figure"] == fig).count(),
            points.len(),
            "figure {fig}"
        );
        assert!(
            points.iter().any(|p| p["source"] == "measured"),
            "figure {fig}"
        );
        for p in &points {
            assert_eq!(p["figure"], fig);
            assert!(value(p).is_finite(), "figure {fig}: {p}");
            if p["source"] == "measured" && p["panel"] != "signed_ms" {
                assert!(value(p) >= 0.0, "figure {fig}: {p}");
            }
        }
        all.extend(points);
    }

    // Figure 7: at every L1 size the two layers let fewer packets reach the table than one
    // layer, by more than 5x, and RCC's rate is near its lone-flow rate (1/9.74 = 10%).
    let fr = measured(&all, "memory", "FlowRegulator");
    let rcc = measured(&all, "memory", "RCC");
    assert!(!fr.is_empty() && fr.len() == rcc.len());
    for (f, r) in fr.iter().zip(&rcc) {
        assert_eq!(f["x"], r["x"]);
        assert!(value(f) > 0.0 && value(f) * 5.0 < value(r), "{f} vs {r}");
        assert!((0.05..0.2).contains(&value(r)), "{r}");
    }
    let windows = measured(&all, "time", "FlowRegulator 128 KB");
    let rcc_windows = measured(&all, "time", "RCC 32 KB");
    assert!(windows.len() >= 5 && windows.len() == rcc_windows.len());
    for (f, r) in windows.iter().zip(&rcc_windows) {
        assert!(value(f) < value(r), "{f} vs {r}");
        assert_eq!(f["packets"], r["packets"]);
    }

    // Figure 8: retention grows with the vector, faster with two layers; the crate's lone
    // flow retains about 9.74 packets with one layer and 9.74^2 with two.
    for (series, panel) in [("FlowRegulator", "retention_fr"), ("RCC", "retention_rcc")] {
        let r = measured(&all, panel, series);
        assert_eq!(r.len(), 4, "{series}");
        assert!(r.windows(2).all(|w| value(w[0]) < value(w[1])), "{series}");
    }
    let at = |series: &str, x: &str| {
        let panel = if series == "RCC" {
            "retention_rcc"
        } else {
            "retention_fr"
        };
        value(
            measured(&all, panel, series)
                .into_iter()
                .find(|p| p["x"] == x)
                .unwrap(),
        )
    };
    assert!(at("FlowRegulator", "16 bits") > 3.0 * at("RCC", "16 bits"));
    let freq = |series: &str, x: &str| {
        value(
            measured(&all, "frequency", series)
                .into_iter()
                .find(|p| p["x"] == x)
                .unwrap(),
        )
    };
    let one = 1.0 / freq("insta crate, lone flow (1 layer)", "8 bits");
    let two = 1.0 / freq("insta crate, lone flow (2 layers)", "16 bits");
    assert!((one / 9.74 - 1.0).abs() < 0.1, "{one}");
    assert!((two / 94.9 - 1.0).abs() < 0.2, "{two}");

    // Figure 9: a throughput per worker count for both; delays finite and every rate there.
    for series in ["FlowRegulator", "RCC"] {
        let t = measured(&all, "throughput", series);
        assert!(
            !t.is_empty() && t.iter().all(|p| value(p) > 0.0),
            "{series}"
        );
    }
    let d = measured(&all, "delay_packets", "table (saturation-based)");
    assert!(d.len() >= 3);
    for p in &d {
        // Lateness in packets is at most a few retention cycles of the flow.
        assert!(value(p) < 1000.0, "{p}");
    }
    for p in measured(&all, "early", "instant, z = 0 (paper's rule)") {
        assert!((0.0..=1.0).contains(&value(p)), "{p}");
    }
    // `--instant`'s never-early rule (z = 4): no early trial, and later than the default's.
    let never = measured(&all, "early", "instant, z = 4 (never early)");
    assert!(never.len() >= 3);
    for p in &never {
        assert_eq!(value(p), 0.0, "{p}");
    }
    let (d2, d4) = (
        measured(&all, "delay_packets", "instant, z = 2 (default)"),
        measured(&all, "delay_packets", "instant, z = 4 (never early)"),
    );
    let sum = |v: &[&Value]| v.iter().map(|p| value(p)).sum::<f64>();
    assert!(sum(&d4) > sum(&d2), "{} vs {}", sum(&d4), sum(&d2));

    // Figure 8(c): saturation-based decoding of a lone flow at 10 000 packets is accurate
    // within a few percent, one layer more than two at each vector size.
    let (fr, rcc) = (
        measured(&all, "accuracy", "FlowRegulator"),
        measured(&all, "accuracy", "RCC"),
    );
    assert_eq!((fr.len(), rcc.len()), (4, 4));
    for (f, r) in fr.iter().zip(&rcc) {
        assert!(value(r) < value(f) && value(f) < 0.1, "{f} {r}");
    }

    // Figures 10(b) and 11(b): the top-100 lists are nearly exact, every recall within [0, 1].
    for fig in ["10", "11"] {
        let r: Vec<&Value> = measured(&all, "top-k recall", "InstaMeasure (ours)")
            .into_iter()
            .filter(|p| p["figure"] == fig)
            .collect();
        assert_eq!(r.len(), 2, "figure {fig}");
        assert!(value(r[0]) >= 0.9, "{}", r[0]);
        assert!(r.iter().all(|p| (0.0..=1.0).contains(&value(p))));
    }

    // Figures 10 and 11: a mean relative error per band below 20%, smaller for larger flows at
    // the same memory.
    for (fig, small, large) in [("10", "10K+", "100K+"), ("11", "10 MB+", "100 MB+")] {
        let s = measured(&all, small, "InstaMeasure (ours)");
        let l = measured(&all, large, "InstaMeasure (ours)");
        assert!(!s.is_empty() && !l.is_empty(), "figure {fig}");
        for p in s.iter().chain(&l) {
            assert_eq!(p["figure"], fig);
            assert!(value(p) < 0.2, "{p}");
            assert!(p["count"].as_u64().unwrap() > 0, "{p}");
        }
        let first = |v: &[&Value]| value(v[0]);
        assert!(first(&l) < first(&s), "figure {fig}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
