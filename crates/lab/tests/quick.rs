//! `--quick` runs of figures 2 and 5 end to end: all four files per figure, with the documented
//! JSON fields, and values that make sense.

use std::path::{Path, PathBuf};

use lab::{run_agg_evict, LabArgs, LabError};

const FIELDS: [&str; 21] = [
    "figure",
    "algorithm",
    "accel",
    "key",
    "batch",
    "arrays",
    "policy",
    "simd",
    "skew",
    "order",
    "mpps",
    "ns_avg",
    "ns_p99",
    "evicted_share",
    "limit_mpps",
    "unique_share",
    "params",
    "packets",
    "agg_mode",
    "through_share",
    "switches",
];

fn out_dir(name: &str) -> PathBuf {
    let d = testkit::scratch("lab").join(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn quick(figure: &str, out: &Path) -> LabArgs {
    let mut a = LabArgs::new(figure.parse().expect("a figure name"), out);
    a.quick = true;
    a.packets = 150_000;
    a
}

fn check_files(out: &Path, stem: &str, n: usize) {
    for ext in ["csv", "json", "png", "svg"] {
        let p = out.join(format!("{stem}.{ext}"));
        let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
        assert!(len > 100, "{} missing or empty", p.display());
    }
    let png = std::fs::read(out.join(format!("{stem}.png"))).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let svg = std::fs::read_to_string(out.join(format!("{stem}.svg"))).unwrap();
    assert!(
        svg.contains("<svg") && svg.contains("Mpps"),
        "svg has no axis text"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join(format!("{stem}.json"))).unwrap())
            .unwrap();
    let arr = json.as_array().expect("a JSON array of points");
    assert_eq!(arr.len(), n);
    for p in arr {
        let obj = p.as_object().unwrap();
        for f in FIELDS {
            assert!(obj.contains_key(f), "field {f} missing in {p}");
        }
        assert_eq!(obj.len(), FIELDS.len());
    }
    let csv = std::fs::read_to_string(out.join(format!("{stem}.csv"))).unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next().unwrap(), FIELDS.join(","));
    assert_eq!(lines.count(), n);
}

#[test]
fn figure5_quick_writes_all_files_and_sane_points() {
    let out = out_dir("fig5");
    let pts = run_agg_evict(&quick("5", &out)).unwrap();
    assert_eq!(
        pts.len(),
        20,
        "nine algorithms and Count-Min counters only, with and without Agg-Evict"
    );
    check_files(&out, "fig5", 20);
    let counters: Vec<_> = pts.iter().filter(|p| !p.params.is_empty()).collect();
    assert_eq!(counters.len(), 2);
    assert!(counters
        .iter()
        .all(|p| p.algorithm == "count_min" && p.params == "candidates = 0"));
    for p in &pts {
        assert_eq!(p.figure, "5");
        assert_eq!(p.packets, 150_000);
        assert!(p.mpps > 0.0 && p.ns_avg > 0.0, "{p:?}");
        assert!(p.ns_p99 > 0.0, "{p:?}");
        assert!(p.limit_mpps.unwrap() > 0.0);
        assert_eq!(p.batch, 32);
        let want_key = if p.algorithm == "two_level" {
            "pair"
        } else {
            "src"
        };
        assert_eq!(p.key, want_key);
        match p.accel.as_str() {
            "none" => assert!(p.evicted_share.is_none() && p.arrays == 0),
            "agg_evict" => {
                let s = p.evicted_share.unwrap();
                // Zipf(1.1) bursty traffic aggregates: far fewer updates than the packets that
                // went through the aggregator (adaptive mode passes the others straight on, and
                // they count as passed: the share of those aggregated is what is left).
                let t = p.through_share.unwrap();
                assert!(t > 0.0 && t <= 1.0, "{p:?}");
                let of_through = (s - (1.0 - t)) / t;
                assert!(s > 0.0 && of_through < 0.7, "{p:?}");
                assert_eq!((p.arrays, p.policy.as_str()), (2000, "grr"));
                assert!(!p.simd.is_empty());
            }
            other => panic!("accel {other}"),
        }
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn figure2_quick_unique_share_falls_with_batch_size() {
    let out = out_dir("fig2");
    let pts = run_agg_evict(&quick("2", &out)).unwrap();
    assert_eq!(pts.len(), 3);
    check_files(&out, "fig2", 3);
    let shares: Vec<f64> = pts.iter().map(|p| p.unique_share.unwrap()).collect();
    assert_eq!(
        pts.iter().map(|p| p.batch).collect::<Vec<_>>(),
        [32, 512, 8192]
    );
    assert!(shares.windows(2).all(|w| w[0] > w[1]), "{shares:?}");
    assert!(shares.iter().all(|&s| s > 0.0 && s <= 1.0));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn unknown_figure_is_an_error() {
    let e = "9".parse::<lab::Figure>().unwrap_err();
    assert!(matches!(e, LabError::UnknownFigure(ref f) if f == "9"));
    assert!(e.to_string().contains("share"), "{e}");
}

#[test]
fn figure5_with_a_capture_adds_end_to_end_points() {
    let out = out_dir("e2e");
    std::fs::create_dir_all(&out).unwrap();
    let pcap = out.join("t.pcap");
    let spec = gen::Spec {
        packets: 20_000,
        flows: 5_000,
        ..gen::Spec::default()
    };
    let f = std::fs::File::create(&pcap).unwrap();
    assert_eq!(gen::write(&spec, gen::OutFormat::Pcap, f).unwrap(), 20_000);
    let mut args = quick("5", &out);
    args.trace = Some(pcap);
    let pts = run_agg_evict(&args).unwrap();
    assert_eq!(
        pts.len(),
        40,
        "(nine + Count-Min counters only) x (none, agg) x (preloaded, end-to-end)"
    );
    let e2e: Vec<_> = pts.iter().filter(|p| p.order == "capture_e2e").collect();
    assert_eq!(e2e.len(), 20);
    for p in pts {
        // Every generated frame is IPv4: all of them are measured, in both modes.
        assert_eq!(p.packets, 20_000, "{p:?}");
        assert!(p.mpps > 0.0 && p.skew.is_none());
        assert!(p.order == "capture" || p.order == "capture_e2e");
    }
    check_files(&out, "fig5", 40);
    let _ = std::fs::remove_dir_all(&out);
}

/// A real capture with IPv6 packets (16-byte source keys): the algorithms that cannot decode
/// such keys (RevSketch, TwoLevel's reverse hashing) are left out of the figure with a message,
/// and every other algorithm is measured.
#[test]
fn figure5_on_a_capture_with_ipv6_leaves_out_only_what_cannot_hold_its_keys() {
    let Some(trace) = testkit::trace("ndpi_alexa-app.pcapng") else {
        return;
    };
    let out = out_dir("v6");
    let mut args = quick("5", &out);
    args.trace = Some(trace);
    let pts = run_agg_evict(&args).unwrap();
    let algos: std::collections::BTreeSet<&str> =
        pts.iter().map(|p| p.algorithm.as_str()).collect();
    assert!(!algos.contains("rev_sketch") && !algos.contains("two_level"));
    for a in [
        "count_min",
        "flow_radar",
        "univmon",
        "space_saving",
        "mrac",
        "fm",
        "linear_counting",
    ] {
        assert!(algos.contains(a), "{a} missing: {algos:?}");
    }
    // Each measured algorithm: without and with Agg-Evict, preloaded and end to end (Count-Min
    // twice: defaults and counters only).
    assert_eq!(pts.len(), 8 * 4);
    let _ = std::fs::remove_dir_all(&out);
}
