//! Issue 34.9, as a user meets it: one error prefix, "did you mean", overflowing flags, plurals.

mod common;
use common::{netsift, tmp};

fn stderr_of(args: &[&str]) -> (Option<i32>, String) {
    let out = netsift().args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// clap's usage errors and ours start the same way: `netsift: error: `, no other error line.
#[test]
fn every_error_has_one_prefix() {
    for args in [
        &["run", "--nonsense"][..],
        &["run", "--k", "0"],
        &["gen"],
        &["stats", "/nonexistent/x.pcap"],
        &["run", "/nonexistent/x.pcap"],
    ] {
        let (code, e) = stderr_of(args);
        assert_ne!(code, Some(0), "{args:?}");
        assert!(e.starts_with("netsift: error: "), "{args:?}: {e}");
        for l in e.lines().filter(|l| l.contains("error")) {
            assert!(l.starts_with("netsift: error: "), "{args:?}: {l}");
        }
    }
    // --help is not an error.
    let out = netsift().args(["run", "--help"]).output().unwrap();
    assert!(out.status.success());
}

/// An overflowing number says it is too large and the range, not "must be >= 1".
#[test]
fn an_overflowing_flag_is_too_large() {
    let (code, e) = stderr_of(&["run", "--k", "99999999999999999999999"]);
    assert_eq!(code, Some(2));
    assert!(
        e.contains("--k") && e.contains("too large") && e.contains("18446744073709551615"),
        "{e}"
    );
    assert!(!e.contains(">= 1"), "{e}");
}

/// A misspelt algorithm gets the closest name.
#[test]
fn unknown_algorithm_suggests_the_closest() {
    let (code, e) = stderr_of(&["run", "--algo", "count_mn", "--task", "heavy_hitters"]);
    assert_eq!(code, Some(1));
    assert!(e.contains("did you mean `count_min`?"), "{e}");
}

/// A one-epoch run over a one-packet trace says `1 packet`, `1 epoch`.
#[test]
fn counts_of_one_are_singular() {
    let f = tmp("one.pcap");
    let gen = netsift()
        .args(["gen", "--packets", "1", "--flows", "1", "--out"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(gen.status.success());
    assert!(
        String::from_utf8_lossy(&gen.stderr).contains("gen: 1 packet to"),
        "{}",
        String::from_utf8_lossy(&gen.stderr)
    );
    let out = netsift()
        .arg("run")
        .arg(&f)
        .args(["--task", "cardinality"])
        .output()
        .unwrap();
    common::assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("epoch 0: 1 packet, "), "{text}");
    assert!(
        text.contains("1 packet (") && text.contains(", 1 epoch,"),
        "{text}"
    );
    assert!(
        !text.contains("1 packets") && !text.contains("1 epochs"),
        "{text}"
    );
}
