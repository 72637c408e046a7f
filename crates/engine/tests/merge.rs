//! The network-wide merge through the engine (`engine::Run::merge`): two hosts' runs, each on
//! its own generated trace, write snapshots; merged, they answer as one run over both traces
//! for a linear algorithm (count-min: the merged sketch is the sketch of the union, ALGORITHMS.md
//! class A), scored against the same truth; a corrupt snapshot is rejected by name and the
//! others are answered.

use std::path::{Path, PathBuf};

use engine::merge::Snapshots;
use engine::{Event, Run, Source};
use measure::RunConfig;

/// One epoch of packets (both hosts' traces fit in it: the order within an epoch does not
/// change a linear sketch), heavy hitters by count-min and flow sizes by count-sketch.
fn config() -> RunConfig {
    RunConfig::from_toml(
        "epoch_packets = 1000000\nseed = 7\n\
         [[measure]]\ntask = \"heavy_hitters\"\nalgo = \"count_min\"\nkey = \"five_tuple\"\n\
         [[measure]]\ntask = \"flow_size\"\nalgo = \"count_sketch\"\nkey = \"src\"\n",
    )
    .unwrap()
}

fn spec(seed: u64) -> gen::Spec {
    gen::Spec {
        packets: 20_000,
        flows: 2_000,
        seed,
        ..gen::Spec::default()
    }
}

/// Host `host`'s run over `spec` through the engine, its snapshots written to `dir`.
fn host_run(dir: &Path, host: &str, spec: gen::Spec) {
    let mut cfg = config();
    cfg.snapshots = Some(dir.display().to_string());
    cfg.host = Some(host.into());
    Run::new(cfg, Source::Gen(spec)).unwrap().report().unwrap();
}

/// `spec`'s packets as a pcap file: the truth the merge is scored against.
fn pcap(dir: &Path, name: &str, spec: &gen::Spec) -> PathBuf {
    let f = dir.join(name);
    let w = std::io::BufWriter::new(std::fs::File::create(&f).unwrap());
    gen::write(spec, gen::OutFormat::Pcap, w).unwrap();
    f
}

/// An epoch's answers, truth and scores: its document without costs and the hosts' parts (a
/// merge lists them; the rest is the run's).
fn answers(e: &measure::EpochReport) -> serde_json::Value {
    let mut v = serde_json::to_value(e).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("costs");
    o.remove("hosts");
    v
}

#[test]
fn merged_snapshots_answer_as_one_run_and_a_corrupt_one_is_rejected_by_name() {
    let d = testkit::scratch("engine-merge");
    let snaps = d.join("snaps");
    let (a, b) = (spec(1), spec(2));
    host_run(&snaps, "a", a.clone());
    host_run(&snaps, "b", b.clone());
    let truth = [pcap(&d, "a.pcap", &a), pcap(&d, "b.pcap", &b)];
    // One run over both hosts' packets: the two pcaps' records one after the other.
    let whole = d.join("whole.pcap");
    let mut bytes = std::fs::read(&truth[0]).unwrap();
    bytes.extend_from_slice(&std::fs::read(&truth[1]).unwrap()[24..]);
    std::fs::write(&whole, bytes).unwrap();
    let file = Source::File {
        path: whole.display().to_string(),
        format: None,
    };
    let (one, _) = Run::new(config(), file).unwrap().report().unwrap();

    // A copy of host b's snapshot with one byte of its states flipped: its checksum fails.
    let good: Vec<PathBuf> = ["a", "b"]
        .iter()
        .map(|h| snaps.join(format!("{h}-epoch000000.nss")))
        .collect();
    let forged = d.join("forged-epoch000000.nss");
    let mut f = std::fs::read(&good[1]).unwrap();
    let mid = f.len() / 2;
    f[mid] ^= 0x40;
    std::fs::write(&forged, f).unwrap();

    let mut told = vec![];
    let paths = vec![good[0].clone(), forged.clone(), good[1].clone()];
    let read = Snapshots::read(paths, None, &mut |f, why| {
        told.push((f.to_path_buf(), why.to_string()))
    })
    .unwrap();
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0].0, forged);
    assert_eq!(read.files, good);
    assert_eq!(read.rejected.len(), 1);
    assert!(
        read.rejected[0].starts_with(&forged.display().to_string()),
        "{:?}",
        read.rejected
    );

    let run = Run::merge(Snapshots {
        truth: truth.iter().map(|t| t.display().to_string()).collect(),
        ..read
    })
    .unwrap();
    let (mut notes, mut epochs, mut finished) = (vec![], vec![], None);
    let outcome = run
        .run(&mut |e| {
            assert!(finished.is_none(), "an event after the end: {e:?}");
            match e {
                Event::Note(n) => notes.push(n),
                Event::Epoch { report, .. } => epochs.push(*report),
                Event::Finished(r) => finished = Some(r),
                _ => {}
            }
            Ok(())
        })
        .unwrap();
    assert!(outcome.read_error.is_none());
    let finished = finished.expect("a finished report");
    assert!(finished.epochs.is_empty());
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("merged 2 snapshots of 2 hosts (a, b)")),
        "{notes:?}"
    );
    let rejected = format!("rejected snapshot {}", forged.display());
    assert!(
        finished.notes.iter().any(|n| n.starts_with(&rejected)),
        "{:?}",
        finished.notes
    );

    assert_eq!(one.epochs.len(), 1);
    assert_eq!(epochs.len(), 1);
    let merged = &epochs[0];
    let hosts: Vec<(&str, u64)> = merged
        .hosts
        .iter()
        .map(|h| (h.host.as_str(), h.packets))
        .collect();
    assert_eq!(hosts, [("a", a.packets), ("b", b.packets)]);
    assert_eq!(merged.packets, a.packets + b.packets);
    // The heavy hitters' keys and estimates, and every other answer and score, are the run's.
    let hh = |e: &measure::EpochReport| serde_json::to_value(&e.tasks[0]).unwrap();
    assert_eq!(hh(merged)["task"], "heavy_hitters");
    assert_ne!(hh(merged)["answer"], serde_json::Value::Null);
    assert_eq!(hh(merged), hh(&one.epochs[0]));
    assert_eq!(answers(merged), answers(&one.epochs[0]));

    // Without truth: the same estimates through `Run::report`, no scores.
    let (bare, _) = Run::merge(Snapshots::read(good.clone(), None, &mut |_, _| {}).unwrap())
        .unwrap()
        .report()
        .unwrap();
    assert_eq!(bare.epochs.len(), 1);
    assert_eq!(bare.epochs[0].hosts.len(), 2);
    let keys = |v: serde_json::Value| -> Vec<(serde_json::Value, serde_json::Value)> {
        let ks = v["answer"]["keys"].as_array().cloned().unwrap_or_default();
        ks.iter()
            .map(|k| (k["key"].clone(), k["estimate"].clone()))
            .collect()
    };
    let expected = keys(hh(&one.epochs[0]));
    assert!(!expected.is_empty());
    assert_eq!(
        keys(serde_json::to_value(&bare.epochs[0].tasks[0]).unwrap()),
        expected
    );
}
