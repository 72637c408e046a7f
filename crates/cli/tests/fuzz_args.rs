//! The command line under random argument vectors: `run`, `stats`, `algorithms` and `bench
//! parse` with flags drawn from their real names (and some that are not), values of every
//! shape (negative, huge, fractional, empty, words), in any order, over a small capture. The
//! binary may accept or refuse, but never panics (status 101, "panicked at") and is never killed
//! by a signal (an abort); a refusal says something on stderr.

use std::process::Command;

use proptest::prelude::*;

const FLAGS: &[&str] = &[
    "--task",
    "--algo",
    "--key",
    "--weight",
    "--epoch-packets",
    "--epoch-ms",
    "--threshold",
    "--k",
    "--seed",
    "--batch",
    "--accel",
    "--simd",
    "--agg-arrays",
    "--agg-policy",
    "--ipv6",
    "--max-memory",
    "--json",
    "--json-lines",
    "--format",
    "--top",
    "--passes",
    "--bogus",
];

const VALUES: &[&str] = &[
    "0",
    "1",
    "-1",
    "7",
    "1000",
    "65536",
    "18446744073709551615",
    "99999999999999999999999",
    "0.5",
    "1e308",
    "nan",
    "",
    "abc",
    "2G",
    "1K",
    "pcap",
    "keys13",
    "src",
    "pair",
    "five_tuple",
    "bytes",
    "agg-evict",
    "none",
    "avx512",
    "off",
    "lru",
    "heavy_hitters",
    "superspreaders,ddos",
    "cardinality",
    "count_min",
    "hyperloglog,two_level",
    "linear_hash",
    "univmon",
];

fn argv() -> impl Strategy<Value = (usize, Vec<String>)> {
    (
        0usize..4,
        prop::collection::vec(
            prop_oneof![
                3 => prop::sample::select(FLAGS).prop_map(String::from),
                2 => prop::sample::select(VALUES).prop_map(String::from),
            ],
            0..8,
        ),
    )
}

fn capture() -> std::path::PathBuf {
    let d = testkit::scratch("fuzz");
    let f = d.join("small.pcap");
    if !f.exists() {
        let st = Command::new(env!("CARGO_BIN_EXE_netsift"))
            .args([
                "gen",
                "--packets",
                "3000",
                "--flows",
                "200",
                "--seed",
                "5",
                "--out",
            ])
            .arg(&f)
            .output()
            .unwrap();
        assert!(st.status.success());
    }
    f
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 120, rng_seed: proptest::test_runner::RngSeed::Fixed(0x5eed), ..ProptestConfig::default() })]

    #[test]
    fn random_argument_vectors_never_panic_or_abort((cmd, args) in argv()) {
        let f = capture();
        let mut c = Command::new(env!("CARGO_BIN_EXE_netsift"));
        match cmd {
            0 => c.arg("run").arg(&f),
            1 => c.arg("stats").arg(&f),
            2 => c.arg("algorithms"),
            _ => c.args(["bench", "parse"]).arg(&f),
        };
        let out = c.args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        prop_assert!(out.status.code().is_some(), "killed by a signal: {args:?}\n{err}");
        prop_assert_ne!(out.status.code(), Some(101), "{:?}\n{}", args, err);
        prop_assert!(!err.contains("panicked at"), "{args:?}\n{err}");
        if !out.status.success() {
            prop_assert!(!err.trim().is_empty(), "refused without a word: {args:?}");
        }
    }
}
