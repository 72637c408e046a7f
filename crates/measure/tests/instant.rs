//! `RunConfig::instant` through the runner, one worker and two: each detection is stamped with
//! the capture time of the packet of its flow that crossed, and the report's delays in time and
//! in packets agree with the exact crossing of the same flow.

use algo::Task;
use key::{KeyKind, Tuple};
use measure::{MeasureSpec, RunConfig, Runner};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

/// 40 planted flows, each every 50th packet of its own phase (each crosses 600 packets
/// after 30 000 packets), among 5-tuples drawn from 5000 background flows; packet `i` at
/// `i` microseconds.
fn run(workers: usize) -> (Vec<measure::instant::Detection>, measure::Report) {
    let mut spec = MeasureSpec::new(Task::HeavyHitters, "instameasure");
    spec.threshold = Some(600.0);
    let cfg = RunConfig {
        key: KeyKind::FiveTuple,
        epoch_packets: Some(100_000),
        measures: vec![spec],
        workers,
        instant: true,
        ..RunConfig::default()
    };
    let mut r = Runner::new(cfg, "instant").unwrap();
    let mut rng = Pcg64::seed_from_u64(9);
    let mut dets = vec![];
    for i in 0..200_000u64 {
        let t = if i % 50 < 40 {
            Tuple::v4([10, 0, 0, (i % 50) as u8], [10, 1, 0, 1], 1000, 80, 6)
        } else {
            let b: u32 = rng.gen_range(0..5000);
            Tuple::v4([11, 0, (b >> 8) as u8, b as u8], [10, 1, 0, 1], 2000, 80, 6)
        };
        r.push(i * 1000, &t, 100);
        dets.extend(r.take_detections());
    }
    let mut report = r.finish();
    if let Some(i) = &mut report.instant {
        dets.append(&mut i.unprinted);
    }
    (dets, report)
}

#[test]
fn detections_are_stamped_with_their_packets_time() {
    for workers in [1, 2] {
        let (dets, report) = run(workers);
        let planted: Vec<_> = dets
            .iter()
            .filter(|d| d.key.starts_with("10.0.0."))
            .collect();
        // Both epochs, each planted flow once per epoch.
        assert_eq!(planted.len(), 80, "workers {workers}");
        for d in &planted {
            let i = d.ts_ns / 1000;
            let phase: u64 = d.key["10.0.0.".len()..]
                .split(':')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(i % 50, phase, "the time of a packet of its flow: {d:?}");
            assert_eq!(d.epoch, i / 100_000);
        }
        let inst = report.instant.unwrap();
        for e in &inst.epochs {
            assert_eq!(e.crossed, Some(40), "workers {workers}");
            assert_eq!(e.falsely, Some(0));
            for f in &e.flows {
                let (Some(ns), Some(p)) = (f.delay_ns, f.delay_packets) else {
                    panic!("{f:?}");
                };
                // One packet of the flow every 50 µs.
                assert_eq!(ns, p * 50_000, "{f:?}");
                // The crossing: the 600th packet of the flow in its epoch.
                let c = f.crossed_ns.unwrap() / 1000 % 100_000;
                assert_eq!(c / 50, 599, "{f:?}");
            }
            let d = e.delay_packets.as_ref().unwrap();
            // The default rule's tolerance: 2 standard deviations of a count of 600 packets
            // (`insta::instant::sigma`: sqrt(838 + 0.822 x 505) = 35.4).
            assert!(d.min >= -71.0, "{d:?}");
            assert!(d.p50 > 0.0 && d.max < 400.0, "{d:?}");
        }
    }
}
