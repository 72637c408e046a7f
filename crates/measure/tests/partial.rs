//! Partial epochs (issue 33, point 9): a run whose time epochs lie on a grid that began before
//! its capture (a live agent's Unix-time epochs, `Runner::align_epochs`) reports its first
//! epoch partial, started mid-epoch, with the span it covered; a signal's epoch is partial,
//! interrupted; the snapshots carry both. A run whose axis starts with its capture is whole.

use algo::Task;
use measure::report::{Coverage, PartialReason};
use measure::{RunConfig, Runner};

mod common;
use common::spec;

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000 * MS;

fn config(snapshots: Option<&std::path::Path>) -> RunConfig {
    RunConfig {
        epoch_ms: Some(1000),
        workers: 1,
        truth: false,
        measures: vec![spec(Task::HeavyHitters, "count_min")],
        snapshots: snapshots.map(|d| d.display().to_string()),
        host: snapshots.map(|_| "a".to_string()),
        ..RunConfig::default()
    }
}

fn scratch(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "netsift-test-partial-{name}-{}",
        std::process::id()
    ))
}

fn push_until(r: &mut Runner, from: u64, to: u64) {
    let tuple = key::Tuple::v4([198, 18, 0, 1], [198, 19, 0, 1], 1000, 80, 6);
    let mut t = from;
    while t < to {
        r.push(t, &tuple, 64);
        t += 10 * MS;
    }
}

/// Started 400 ms into epoch 1,764,331,200 of the Unix-time grid (as `live` with snapshots
/// does: aligned, then advanced to the wall clock), stopped by a signal 300 ms into the third.
#[test]
fn a_run_started_mid_epoch_on_a_grid_has_a_partial_first_epoch() {
    let dir = scratch("grid");
    let _ = std::fs::remove_dir_all(&dir);
    let mut r = Runner::new(config(Some(&dir)), "test").unwrap();
    r.answer_inline();
    r.align_epochs(0);
    let first = 1_764_331_200u64;
    let start = first * SEC + 400 * MS;
    assert_eq!(r.advance_to(start), first);
    push_until(&mut r, start, (first + 2) * SEC + 300 * MS);
    assert_eq!(r.advance_to((first + 2) * SEC + 300 * MS), first + 2);
    r.interrupt();
    r.close_epoch();
    let e = r.take_completed();
    assert_eq!(
        e.len(),
        3,
        "{:?}",
        e.iter().map(|e| e.index).collect::<Vec<_>>()
    );
    // The first: 60 packets of 100, from the start of the capture.
    assert_eq!((e[0].index, e[0].packets), (first, 60));
    assert!(e[0].partial);
    assert_eq!(e[0].partial_reasons, [PartialReason::StartedMidEpoch]);
    assert_eq!(
        e[0].coverage,
        Some(Coverage {
            start_ns: start,
            end_ns: (first + 1) * SEC
        })
    );
    // The second is whole.
    assert_eq!((e[1].index, e[1].packets), (first + 1, 100));
    assert!(!e[1].partial && e[1].partial_reasons.is_empty() && e[1].coverage.is_none());
    // The last, cut by the signal after its last packet (290 ms) and the last advance (300 ms).
    assert_eq!((e[2].index, e[2].packets), (first + 2, 30));
    assert!(e[2].partial);
    assert_eq!(e[2].partial_reasons, [PartialReason::Interrupted]);
    assert_eq!(
        e[2].coverage,
        Some(Coverage {
            start_ns: (first + 2) * SEC,
            end_ns: (first + 2) * SEC + 300 * MS
        })
    );
    let json = serde_json::to_value(&e[0]).unwrap();
    assert_eq!(
        json["partial_reasons"],
        serde_json::json!(["started_mid_epoch"])
    );
    assert_eq!(json["coverage"]["start_ns"], start);
    r.finish();
    // The snapshots say the same.
    let snap = |i: u64| snapshot::read(&dir.join(snapshot::file_name("a", i))).unwrap();
    let s = snap(first).epoch;
    assert!(s.partial && s.started_mid && !s.interrupted, "{s:?}");
    assert_eq!(
        (s.covered_from_ns, s.covered_to_ns),
        (start, (first + 1) * SEC)
    );
    let s = snap(first + 1).epoch;
    assert!(!s.partial && !s.started_mid && !s.interrupted, "{s:?}");
    assert_eq!(
        (s.covered_from_ns, s.covered_to_ns),
        ((first + 1) * SEC, (first + 2) * SEC)
    );
    let s = snap(first + 2).epoch;
    assert!(s.partial && !s.started_mid && s.interrupted, "{s:?}");
    assert_eq!(
        (s.covered_from_ns, s.covered_to_ns),
        ((first + 2) * SEC, (first + 2) * SEC + 300 * MS)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A first epoch without a packet on the grid (an agent started on a quiet link) is partial in
/// its idle snapshot too.
#[test]
fn an_idle_first_epoch_on_a_grid_is_partial_in_its_snapshot() {
    let dir = scratch("idle");
    let _ = std::fs::remove_dir_all(&dir);
    let mut r = Runner::new(config(Some(&dir)), "test").unwrap();
    r.answer_inline();
    r.align_epochs(0);
    let first = 1_764_331_200u64;
    let start = first * SEC + 700 * MS;
    r.advance_to(start);
    push_until(&mut r, (first + 1) * SEC, (first + 1) * SEC + 500 * MS);
    r.advance_to((first + 2) * SEC);
    let s = snapshot::read(&dir.join(snapshot::file_name("a", first))).unwrap();
    assert!(s.is_idle());
    assert!(s.epoch.partial && s.epoch.started_mid, "{:?}", s.epoch);
    assert_eq!(s.epoch.covered_from_ns, start);
    let s = snapshot::read(&dir.join(snapshot::file_name("a", first + 1))).unwrap();
    assert!(!s.epoch.partial, "{:?}", s.epoch);
    r.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Time epochs whose axis starts with the capture (a trace's first packet, or `live` without
/// snapshots: its first advance) are whole, the last one included when no signal came.
#[test]
fn epochs_from_the_capture_start_are_whole() {
    for advance in [false, true] {
        let mut r = Runner::new(config(None), "test").unwrap();
        r.answer_inline();
        let start = 1_764_331_200 * SEC + 400 * MS;
        if advance {
            r.advance_to(start);
        }
        push_until(&mut r, start, start + 2 * SEC + 300 * MS);
        let rep = r.finish();
        assert_eq!(rep.epochs.len(), 3);
        for e in &rep.epochs {
            assert!(
                !e.partial && e.partial_reasons.is_empty(),
                "epoch {}",
                e.index
            );
            assert!(e.coverage.is_none());
        }
    }
}
