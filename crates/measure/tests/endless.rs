//! Constant memory on an endless stream: a caller that takes each epoch as it closes leaves
//! the runner holding none. Alone in its test binary, because it measures the whole process's
//! resident memory (other tests running beside it in the same process would move it).

use algo::Task;
use measure::{MeasureSpec, RunConfig, Runner};

mod common;
use common::spec;

/// Resident set size of this process in bytes (Linux `/proc/self/statm`), `None` elsewhere.
fn rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = s.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// A run over an endless stream whose caller takes each epoch as it closes holds no past
/// epoch: over 1,000,000 one-packet epochs the process's resident memory stays flat (measured,
/// not guessed), while the same run keeping its epochs (60,000 of them) holds every report.
#[test]
fn taken_epochs_leave_memory_flat_on_an_endless_stream() {
    let Some(_) = rss_bytes() else {
        eprintln!("skip: no /proc/self/statm to measure memory");
        return;
    };
    let c = RunConfig {
        epoch_packets: Some(1),
        // Small structures: the test is about the report, not the epoch-end resets.
        measures: vec![
            spec(Task::Cardinality, "hyperloglog"),
            MeasureSpec {
                params: "rows = 2\nwidth = 1024".parse().unwrap(),
                ..spec(Task::HeavyHitters, "count_min")
            },
        ],
        ..RunConfig::default()
    };
    let g = gen::Spec {
        packets: 1_000_000,
        flows: 1_000,
        seed: 9,
        ..gen::Spec::default()
    };
    let mut r = Runner::new(c.clone(), "endless").unwrap();
    let (mut taken, mut n, mut at_10k) = (0usize, 0u64, 0u64);
    gen::generate(&g, |p| {
        r.push(p.ts_ns, &p.tuple, p.wire_len);
        taken += r.take_completed().len();
        n += 1;
        if n == 10_000 {
            at_10k = rss_bytes().unwrap_or(0);
        }
    })
    .unwrap();
    let grown = rss_bytes().unwrap_or(0).saturating_sub(at_10k);
    assert!(r.completed_epochs().is_empty());
    let rep = r.finish();
    // Every epoch was reported exactly once: taken during the run, the last one by `finish`.
    assert_eq!(taken + rep.epochs.len(), 1_000_000);
    assert_eq!(rep.totals.epochs, 1_000_000);
    assert!(
        grown < 2 << 20,
        "resident memory grew by {grown} bytes over 990,000 epochs"
    );

    // The same run keeping its epochs holds every report (what `--json` needs at the end).
    let mut k = Runner::new(c, "kept").unwrap();
    let g = gen::Spec {
        packets: 60_000,
        ..g
    };
    gen::generate(&g, |p| k.push(p.ts_ns, &p.tuple, p.wire_len)).unwrap();
    assert_eq!(k.finish().epochs.len(), 60_000);
}
