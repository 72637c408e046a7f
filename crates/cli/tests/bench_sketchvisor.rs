//! `netsift bench sketchvisor --figure all --quick`: every figure's four files are written and
//! the measured values have the properties the paper's figures show and the recovery must have
//! (RECOVERY.md 6-7): SketchVisor's recovered counters no further from Ideal than Lower's and
//! Upper's and far closer than NoRecovery's, at every host count; Ideal's heavy-hitter recall
//! at least every recovery's; Lower and Upper give the same distinct counts (section 7.3); the
//! fast path's bounds of the top flows tighter than Misra-Gries's; every packet counted on
//! exactly one path. No timing is asserted (the machines are shared).

mod common;

use serde_json::Value;

fn pick(points: &[Value], fig: &str, panel: &str, series: &str, x: &str) -> Option<f64> {
    points
        .iter()
        .find(|p| {
            p["source"] == "measured"
                && p["figure"] == fig
                && p["panel"] == panel
                && p["series"] == series
                && p["x"] == x
        })
        .map(|p| p["value"].as_f64().unwrap())
}

fn get(points: &[Value], fig: &str, panel: &str, series: &str, x: &str) -> f64 {
    pick(points, fig, panel, series, x)
        .unwrap_or_else(|| panic!("no point figure {fig} {panel} {series} {x}"))
}

#[test]
fn sketchvisor_quick_writes_every_figure_with_the_papers_properties() {
    let (dir, points) = common::bench_json("sketchvisor", &["--figure", "all", "--quick"]);
    let points: Vec<Value> = serde_json::from_value(points).unwrap();
    for f in ["6", "7", "8", "9", "10", "11", "12", "13", "14", "16"] {
        for ext in ["csv", "json", "png", "svg"] {
            let p = dir.join(format!("fig{f}.{ext}"));
            assert!(p.metadata().map(|m| m.len() > 0).unwrap_or(false), "{p:?}");
        }
        assert!(points.iter().any(|p| p["figure"] == f), "figure {f}");
    }

    // Every packet on exactly one path: the FIFO counted each offered packet once (60k per
    // epoch in --quick), and the fast path's share is a fraction.
    for p in points.iter().filter(|p| {
        p["source"] == "measured"
            && ["6", "7", "9", "10", "11", "12", "13"].contains(&p["figure"].as_str().unwrap())
    }) {
        assert_eq!(p["packets"], 60_000, "{p}");
        assert!(p["fast_packets"].as_u64().unwrap() <= 60_000, "{p}");
    }
    for p in points.iter().filter(|p| p["figure"] == "13") {
        let v = p["value"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&v), "{p}");
    }
    // The forced overload sends a real share to the fast path in the accuracy figures.
    let p7 = points
        .iter()
        .find(|p| p["figure"] == "7" && p["source"] == "measured")
        .unwrap();
    let fast = p7["fast_packets"].as_u64().unwrap();
    assert!((20_000..40_000).contains(&fast), "fast packets {fast}");

    // Figure 12: recovery of the merged Count-Min at every host count.
    for h in ["1 hosts", "4 hosts", "16 hosts"] {
        let e = |s| get(&points, "12", "counter_error", s, h);
        let (nr, lr, ur, sv) = (
            e("NoRecovery"),
            e("LowerRecovery"),
            e("UpperRecovery"),
            e("SketchVisor"),
        );
        assert!(sv <= lr && sv <= ur, "{h}: sv {sv} lr {lr} ur {ur}");
        assert!(sv * 5.0 < nr, "{h}: sv {sv} nr {nr}");
    }
    // More hosts, more tracked flows: the error falls (section 7.4).
    assert!(
        get(&points, "12", "counter_error", "SketchVisor", "16 hosts")
            < get(&points, "12", "counter_error", "SketchVisor", "1 hosts")
    );

    // Figure 7: Ideal recalls at least what any recovery does; Upper at least what Lower does;
    // on Count-Min, SketchVisor's heavy-hitter error is below NoRecovery's.
    for sk in [
        "count_min",
        "flow_radar",
        "rev_sketch",
        "univmon",
        "deltoid",
    ] {
        let r = |s| get(&points, "7", "hh_recall", s, sk);
        for s in ["NoRecovery", "LowerRecovery", "UpperRecovery"] {
            assert!(r("Ideal") >= r(s), "{sk} {s}");
        }
        assert!(r("UpperRecovery") >= r("LowerRecovery"), "{sk}");
        assert!(r("LowerRecovery") >= r("NoRecovery"), "{sk}");
    }
    assert!(
        get(&points, "7", "hh_error", "SketchVisor", "count_min")
            < get(&points, "7", "hh_error", "NoRecovery", "count_min")
    );

    // Figure 9: a bound changes sizes, not which flows exist: Lower and Upper count the same.
    for sk in ["fm", "kmin", "linear_counting"] {
        assert_eq!(
            get(&points, "9", "error", "LowerRecovery", sk),
            get(&points, "9", "error", "UpperRecovery", sk),
            "{sk}"
        );
    }

    // Figure 16b: SketchVisor's lower bounds of the top 25 flows are tighter than MG's.
    assert!(
        get(&points, "16", "lower_error", "SketchVisor", "top 25")
            < get(&points, "16", "lower_error", "MGFastPath", "top 25")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--overload 2`: each sketch offered at twice its own measured one-core rate, so whatever the
/// machine's speed about half the packets overflow, a different number per sketch (its own
/// FIFO); the regime is named on standard error. Bad values and two regimes at once are
/// refused naming the flag.
#[test]
fn the_papers_regime_overloads_each_sketch_by_its_own_cost() {
    let dir = testkit::scratch("bench").join("sketchvisor-overload");
    let _ = std::fs::remove_dir_all(&dir);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_netsift"))
        .args(["bench", "sketchvisor", "--figure", "9", "--quick"])
        .args(["--overload", "2", "--nic-gbps", "40", "--json", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("offered at 2x each sketch's own rate"),
        "{err}"
    );
    assert!(
        err.contains("heavy hitters at 0.05% of 40 Gbps x the epoch"),
        "{err}"
    );
    let points: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let mut fast: Vec<(String, u64)> = Vec::new();
    for sk in ["fm", "kmin", "linear_counting"] {
        let p = points
            .iter()
            .find(|p| p["figure"] == "9" && p["source"] == "measured" && p["x"] == sk)
            .unwrap_or_else(|| panic!("no point for {sk}"));
        assert_eq!(p["packets"], 60_000, "{p}");
        let f = p["fast_packets"].as_u64().unwrap();
        // Offered at twice the drain rate: the FIFO passes about half (its 64-packet depth and
        // the timing noise of a shared machine move it a little).
        assert!((15_000..45_000).contains(&f), "{sk}: {f} fast packets");
        fast.push((sk.to_string(), f));
    }
    let _ = std::fs::remove_dir_all(&dir);

    for (args, flag) in [
        (vec!["--overload", "0"], "--overload"),
        (vec!["--normal-share", "1.5"], "--normal-share"),
        (vec!["--offered-gbps", "fast"], "--offered-gbps"),
        (vec!["--nic-gbps", "0"], "--nic-gbps"),
        (
            vec!["--overload", "2", "--offered-gbps", "40"],
            "--offered-gbps",
        ),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_netsift"))
            .args(["bench", "sketchvisor", "--figure", "9", "--quick"])
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(flag), "{args:?}: {err}");
    }
}
