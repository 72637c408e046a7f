//! A warning's numbers agree with the table beside it (issue 34: the main job's heavy-changer
//! warning said "against 50 reported" while its table said 43: the caveat counted Deltoid's
//! answer at a lower threshold, whose decoding differs).

use algo::Task;
use measure::{RunConfig, Runner};

mod common;
use common::spec;

/// "against N reported" in a heavy-changer warning is the number the task reported.
#[test]
fn change_warnings_count_what_the_answer_reported() {
    let mut fired = 0;
    for (algo, params) in [
        ("deltoid", "groups = 512"),
        ("rev_sketch", "width = 1024"),
        ("count_min", "width = 2048"),
    ] {
        let mut m = spec(Task::HeavyChangers, algo);
        m.params = params.parse().unwrap();
        let cfg = RunConfig {
            epoch_packets: Some(200_000),
            measures: vec![m],
            ..RunConfig::default()
        };
        let mut r = Runner::new(cfg, "caveats").unwrap();
        let g = gen::Spec {
            packets: 600_000,
            flows: 40_000,
            skew: 1.0,
            seed: 11,
            ..gen::Spec::default()
        };
        gen::generate(&g, |p| r.push(p.ts_ns, &p.tuple, p.wire_len)).unwrap();
        let report = r.finish();
        for e in &report.epochs {
            let t = &e.tasks[0];
            for w in &t.warnings {
                let Some(n) = w
                    .message
                    .split("against ")
                    .nth(1)
                    .and_then(|s| s.split(" reported").next())
                    .and_then(|s| s.parse::<u64>().ok())
                else {
                    continue;
                };
                fired += 1;
                assert_eq!(
                    Some(n),
                    t.answer.reported,
                    "{algo} epoch {}: {}",
                    e.index,
                    w.message
                );
            }
        }
    }
    assert!(
        fired > 0,
        "no warning with a count fired: the test tests nothing"
    );
}
