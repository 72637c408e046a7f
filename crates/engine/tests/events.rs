//! The run as its consumers see it: the order of the events, a stop through `Control`, a
//! consumer's error, the pull iterator, and a key trace's configuration checked before
//! anything is read.

use engine::{Control, Event, Run, Source};
use measure::RunConfig;

/// A small run: every task by its default algorithm over 40,000 generated packets in epochs of
/// 10,000, one worker (reproducible answers).
fn small() -> (RunConfig, Source) {
    let cfg = RunConfig {
        measures: RunConfig::measures_from_lists(&[], &[]).unwrap(),
        epoch_packets: Some(10_000),
        workers: 1,
        ..RunConfig::default()
    };
    let spec = gen::Spec {
        packets: 40_000,
        flows: 2_000,
        ..gen::Spec::default()
    };
    (cfg, Source::Gen(spec))
}

/// What a consumer saw, as letters: N note, S started, P progress, D detection, W warning,
/// E epoch, F finished.
fn trail(events: &[Event]) -> String {
    events
        .iter()
        .map(|e| match e {
            Event::Note(_) => 'N',
            Event::Started(_) => 'S',
            Event::Progress { .. } => 'P',
            Event::Detection(_) => 'D',
            Event::Warning(_) => 'W',
            Event::Epoch { .. } => 'E',
            Event::Hangup => 'H',
            Event::Finished(_) => 'F',
        })
        .collect()
}

#[test]
fn events_come_in_the_documented_order() {
    let (cfg, src) = small();
    let mut seen = vec![];
    let outcome = Run::new(cfg, src)
        .unwrap()
        .run(&mut |e| {
            seen.push(e);
            Ok(())
        })
        .unwrap();
    assert!(outcome.read_error.is_none() && outcome.stopped.is_none());
    let t = trail(&seen);
    // Notes, then the start, then everything else; the report last and once.
    let started = t.find('S').expect("a start");
    assert!(t[..started].chars().all(|c| c == 'N'), "{t}");
    assert_eq!(t.matches('S').count(), 1, "{t}");
    assert!(t.ends_with('F') && t.matches('F').count() == 1, "{t}");
    // Four epochs of 10,000 packets, in order, each with its report.
    let epochs: Vec<u64> = seen
        .iter()
        .filter_map(|e| match e {
            Event::Epoch { report, .. } => Some(report.index),
            _ => None,
        })
        .collect();
    assert_eq!(epochs, [0, 1, 2, 3]);
    // A warning comes right before its epoch (or another warning of it).
    for (i, e) in seen.iter().enumerate() {
        if let Event::Warning(w) = e {
            let next = seen[i + 1..]
                .iter()
                .find_map(|e| match e {
                    Event::Epoch { report, .. } => Some(report.index),
                    _ => None,
                })
                .expect("an epoch after a warning");
            assert_eq!(next, w.epoch, "{t}");
        }
    }
    // Every epoch's totals count what was read up to it; the report's every packet.
    let Some(Event::Finished(r)) = seen.last() else {
        panic!("{t}")
    };
    assert!(r.epochs.is_empty(), "epochs were events");
    assert_eq!(r.totals.packets, 40_000);
    let warned = t.matches('W').count();
    assert_eq!(
        r.warnings.len(),
        warned,
        "the report keeps every warning emitted"
    );
}

#[test]
fn report_gathers_what_the_events_gave() {
    let (cfg, src) = small();
    let (report, _) = Run::new(cfg.clone(), src).unwrap().report().unwrap();
    assert_eq!(report.epochs.len(), 4);
    let (_, src) = small();
    let pulled: Vec<Event> = Run::new(cfg, src).unwrap().events().unwrap().collect();
    let epochs: Vec<serde_json::Value> = pulled
        .iter()
        .filter_map(|e| match e {
            Event::Epoch { report, .. } => {
                let mut v = serde_json::to_value(report).unwrap();
                v.as_object_mut().unwrap().remove("costs");
                Some(v)
            }
            _ => None,
        })
        .collect();
    let gathered: Vec<serde_json::Value> = report
        .epochs
        .iter()
        .map(|e| {
            let mut v = serde_json::to_value(e).unwrap();
            v.as_object_mut().unwrap().remove("costs");
            v
        })
        .collect();
    // The iterator on its thread and the callback answer alike.
    assert_eq!(epochs, gathered);
}

#[test]
fn a_stop_closes_the_open_epoch_as_partial_and_finishes_the_report() {
    let (cfg, src) = small();
    let run = Run::new(cfg, src).unwrap();
    let control: Control = run.control();
    let mut epochs = vec![];
    let mut finished = None;
    let outcome = run
        .run(&mut |e| {
            match e {
                // Asked after the first epoch: the reader stops at its next packet.
                Event::Epoch { report, .. } => {
                    control.stop();
                    epochs.push(*report);
                }
                Event::Finished(r) => finished = Some(r),
                _ => {}
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(outcome.stopped, Some(Control::STOPPED));
    let r = finished.expect("the report is finished after a stop");
    assert!(r.totals.packets < 40_000, "{}", r.totals.packets);
    assert_eq!(epochs.first().map(|e| e.partial), Some(false));
    let last = epochs.last().expect("the open epoch reported");
    assert!(epochs.len() >= 2 && last.partial, "{} epochs", epochs.len());
}

#[test]
fn a_consumers_error_ends_the_run_and_is_returned() {
    let (cfg, src) = small();
    let mut epochs = 0;
    let err = Run::new(cfg, src)
        .unwrap()
        .run(&mut |e| {
            if matches!(e, Event::Epoch { .. }) {
                epochs += 1;
                anyhow::bail!("standard output is full");
            }
            Ok(())
        })
        .unwrap_err();
    assert_eq!(err.to_string(), "standard output is full");
    assert_eq!(epochs, 1, "nothing is given after the error");
}

#[test]
fn dropping_the_iterator_stops_the_run() {
    let (mut cfg, _) = small();
    cfg.epoch_packets = Some(1_000);
    let spec = gen::Spec {
        packets: 50_000_000,
        flows: 2_000,
        ..gen::Spec::default()
    };
    let mut events = Run::new(cfg, Source::Gen(spec)).unwrap().events().unwrap();
    let first = events.find(|e| matches!(e, Event::Epoch { .. }));
    assert!(first.is_some());
    // 50 M packets would take long; the drop stops the run at its next packet.
    drop(events);
}

#[test]
fn a_keys4_trace_refuses_another_key_before_reading() {
    let dir = testkit::scratch("engine-events");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("k.keys4");
    std::fs::write(&path, [10u8, 0, 0, 1].repeat(100)).unwrap();
    let src = || Source::File {
        path: path.display().to_string(),
        format: None,
    };
    let mut cfg = engine::config::standard().unwrap();
    cfg.workers = 1;
    cfg.key_given = true;
    let e = Run::new(cfg.clone(), src()).err().expect("refused");
    assert!(e.to_string().contains("give --key src"), "{e}");
    // Not asked for: keyed by source, with a note saying so.
    cfg.key_given = false;
    let run = Run::new(cfg, src()).unwrap();
    assert_eq!(run.config().key, key::KeyKind::Src);
    assert!(run
        .config()
        .notes
        .iter()
        .any(|n| n.contains("keyed by source")));
}

#[test]
fn progress_comes_every_so_many_packets() {
    let (cfg, src) = small();
    let mut at = vec![];
    Run::new(cfg, src)
        .unwrap()
        .progress_every(3_000)
        .run(&mut |e| {
            if let Event::Progress { packets, total } = e {
                assert_eq!(total, Some(40_000), "the generator's count is known");
                at.push(packets);
            }
            Ok(())
        })
        .unwrap();
    let want: Vec<u64> = (0..=13).map(|i| i * 3_000).collect();
    assert_eq!(at, want);
}
