//! `netsift merge --truth A B ...` as a user runs it (issue 34, point 1): each host ran
//! `netsift run capture_i --snapshots DIR --host hi`, then the snapshots are merged and scored
//! against the hosts' captures. The captures are merged by capture time (as `mergecap` does), so
//! the report equals the one scored against a single time-merged capture, built here
//! independently (a stable sort of all records by time); a truth that cannot be the snapshots'
//! epochs (one host's capture only, another capture) is refused naming both numbers.

mod common;
use common::{fresh_dir, netsift, ok};

use std::path::{Path, PathBuf};
use std::process::Output;

use key::{HashFn, KeyKind};

/// The error line of a command that must fail (after any notes `merge` printed).
fn refused(out: &Output) -> String {
    assert!(!out.status.success(), "accepted");
    let e = String::from_utf8_lossy(&out.stderr);
    let last = e.trim_end().lines().last().unwrap_or_default().to_string();
    assert!(last.starts_with("netsift: error: "), "{e}");
    last
}

/// A little-endian classic pcap's records: (capture time in ns, the record's bytes).
fn records(bytes: &[u8]) -> Vec<(u64, &[u8])> {
    let ns = match bytes[..4] {
        [0xd4, 0xc3, 0xb2, 0xa1] => false,
        [0x4d, 0x3c, 0xb2, 0xa1] => true,
        _ => panic!("a little-endian pcap"),
    };
    let u32_at = |b: &[u8], i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    let mut out = vec![];
    let mut at = 24;
    while at < bytes.len() {
        let len = u32_at(bytes, at + 8) as usize;
        let frac = u64::from(u32_at(bytes, at + 4)) * if ns { 1 } else { 1000 };
        let ts = u64::from(u32_at(bytes, at)) * 1_000_000_000 + frac;
        out.push((ts, &bytes[at..at + 16 + len]));
        at += 16 + len;
    }
    out
}

/// `whole` (a little-endian pcap) split by a seeded hash of each packet's 5-tuple into two host
/// captures (every flow on one host, as RSS or ECMP places it), and the two merged back by
/// capture time into a third file, independently of netsift's merge: a stable sort of host 0's
/// records then host 1's by time (equal times: host 0 first, then file order, as `mergecap`).
///
/// With `same_start`, both hosts' captures start at the same instant (the host without the
/// first packet gets the first packet's time on its own first one: two taps started together):
/// `run` starts time epochs at a host's first packet, so the hosts' epochs then line up
/// exactly. Otherwise they are a few microseconds apart.
fn split(d: &Path, whole: &Path, same_start: bool) -> (PathBuf, [PathBuf; 2]) {
    let h = HashFn::new(0x5eed);
    // (host, keyed) of each record; packets without a flow key go with the first keyed one
    // (they do not count towards epochs), so each host's first record is keyed.
    let mut to: Vec<(usize, bool)> = vec![];
    let cap = trace::Capture::open(whole.to_str().unwrap(), None).unwrap();
    engine::packet::each_packet(&cap, wire::Tunnel::Outer, |p| {
        let host = (h.hash(&p.tuple.key(KeyKind::FiveTuple)) % 2) as usize;
        to.push((host, engine::packet::keyed(p.class)));
    })
    .unwrap();
    let first = to.iter().position(|t| t.1).unwrap();
    let first_host = to[first].0;
    let to: Vec<usize> = to
        .iter()
        .map(|&(h, keyed)| if keyed { h } else { first_host })
        .collect();
    let bytes = std::fs::read(whole).unwrap();
    let recs = records(&bytes);
    assert_eq!(recs.len(), to.len());
    let mut parts: [Vec<(u64, Vec<u8>)>; 2] = [vec![], vec![]];
    for (&host, (ts, r)) in to.iter().zip(&recs) {
        parts[host].push((*ts, r.to_vec()));
    }
    if same_start {
        let other = 1 - first_host;
        let (t0, r0) = &recs[first];
        parts[other][0].0 = *t0;
        parts[other][0].1[..8].copy_from_slice(&r0[..8]);
    }
    let write = |name: &str, recs: &mut dyn Iterator<Item = &(u64, Vec<u8>)>| {
        let mut out = bytes[..24].to_vec();
        for (_, r) in recs {
            out.extend_from_slice(r);
        }
        let f = d.join(name);
        std::fs::write(&f, out).unwrap();
        f
    };
    let hosts = [
        write("host0.pcap", &mut parts[0].iter()),
        write("host1.pcap", &mut parts[1].iter()),
    ];
    let mut all: Vec<&(u64, Vec<u8>)> = parts[0].iter().chain(&parts[1]).collect();
    all.sort_by_key(|r| r.0);
    let merged = write("merged.pcap", &mut all.into_iter());
    (merged, hosts)
}

/// Each host's `run` with time epochs of `epoch_ms`, snapshots into `DIR/snaps`: the snapshot
/// files, sorted.
fn snapshots(d: &Path, hosts: &[PathBuf], epoch_ms: &str) -> Vec<PathBuf> {
    let snaps = d.join("snaps");
    for (i, h) in hosts.iter().enumerate() {
        ok(&netsift()
            .arg("run")
            .arg(h)
            .args(["--task", "heavy_hitters,cardinality"])
            .args(["--algo", "count_min,hyperloglog", "--epoch-ms", epoch_ms])
            .args(["--seed", "5", "--workers", "1", "--truth", "off", "--json"])
            // Heavy hitters above 0.5% of an epoch's packets: at the default fraction a
            // 2-minute epoch of the real capture (about 450 packets) has a threshold of 1, every
            // flow a heavy hitter, more than the hosts' Count-Min candidate sets keep.
            .args(["--threshold", "0.005"])
            .arg("--host")
            .arg(format!("h{i}"))
            .arg("--snapshots")
            .arg(&snaps)
            .output()
            .unwrap());
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&snaps)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

/// `merge --json` of `snaps` scored against `truth`: the report's epochs without costs.
fn merged(snaps: &[PathBuf], truth: &[&Path]) -> serde_json::Value {
    let out = ok(&netsift()
        .arg("merge")
        .args(snaps)
        .args(["--json", "--truth"])
        .args(truth)
        .output()
        .unwrap());
    common::answers(&serde_json::from_str(&out).unwrap())
}

/// Two hosts' captures given as `--truth a b` score the merge as the one time-merged capture
/// does (before: read one after the other, host 1's packets all fell in the last epoch and
/// every other epoch was scored against host 0's traffic alone); Count-Min's heavy hitters at
/// the default size score F1 1.0-ish in every epoch.
fn two_hosts_score_as_their_time_merged_capture(
    d: &Path,
    whole: &Path,
    epoch_ms: &str,
    same_start: bool,
) {
    let (merged_file, hosts) = split(d, whole, same_start);
    let snaps = snapshots(d, &hosts, epoch_ms);
    let one = merged(&snaps, &[&merged_file]);
    let two = merged(&snaps, &[&hosts[0], &hosts[1]]);
    let epochs = one.as_array().unwrap();
    assert!(epochs.len() >= 3, "{}", epochs.len());
    assert_eq!(one, two);
    for e in epochs {
        // The truth is all the traffic of the epoch: both hosts' packets (hosts on different
        // grids: give or take the packets at the epoch's bounds).
        let listed: u64 = e["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["packets"].as_u64().unwrap())
            .sum();
        if same_start {
            assert_eq!(e["packets"], listed, "{e}");
        }
        let hh = &e["tasks"][0];
        assert_eq!(hh["task"], "heavy_hitters");
        assert_eq!(hh["algorithm"], "count_min");
        let f1 = hh["accuracy"]["f1"].as_f64().unwrap();
        assert!(f1 >= 0.95, "epoch {}: F1 {f1}", e["index"]);
    }
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn truth_of_two_hosts_is_merged_by_capture_time() {
    let src = fresh_dir("gen-source");
    let whole = src.join("whole.pcap");
    // 100 k packets at the generator's 1 Mpps: 100 ms of capture, four 25 ms epochs.
    ok(&netsift()
        .args([
            "gen",
            "--packets",
            "100000",
            "--flows",
            "20000",
            "--skew",
            "1.1",
        ])
        .args(["--seed", "17", "--out"])
        .arg(&whole)
        .output()
        .unwrap());
    // The hosts' epochs on one grid: the truth's epochs are exactly theirs.
    two_hosts_score_as_their_time_merged_capture(&fresh_dir("gen"), &whole, "25", true);
    // Each host's epochs from its own first packet (microseconds apart): accepted, the packets
    // at the epochs' bounds allowed in either epoch.
    two_hosts_score_as_their_time_merged_capture(&fresh_dir("gen-apart"), &whole, "25", false);
    let _ = std::fs::remove_dir_all(&src);
}

/// The same on a real capture: 10 minutes of Ethernet (nDPI's gnutella), 2-minute epochs.
#[test]
fn truth_of_two_hosts_of_a_real_capture_is_merged_by_capture_time() {
    let Some(traces) = testkit::traces_dir() else {
        return;
    };
    let d = fresh_dir("real");
    two_hosts_score_as_their_time_merged_capture(
        &d,
        &traces.join("ndpi_gnutella.pcap"),
        "120000",
        true,
    );
}

/// A truth that is not the snapshots' traffic is refused, naming the truth, the epoch and both
/// numbers, and the snapshots: one host's capture only, a capture of other traffic; several
/// captures without times for time epochs cannot be merged.
#[test]
fn a_truth_that_cannot_be_the_snapshots_epochs_is_refused() {
    let d = fresh_dir("refused");
    let whole = d.join("whole.pcap");
    ok(&netsift()
        .args(["gen", "--packets", "40000", "--flows", "5000"])
        .args(["--seed", "3", "--out"])
        .arg(&whole)
        .output()
        .unwrap());
    let (_, hosts) = split(&d, &whole, true);
    let snaps = snapshots(&d, &hosts, "10");
    let epoch0: Vec<snapshot::Snapshot> = snaps
        .iter()
        .map(|f| snapshot::read(f).unwrap())
        .filter(|s| s.epoch.index == 0)
        .collect();
    assert_eq!(epoch0.len(), 2);
    let packets: u64 = epoch0.iter().map(|s| s.epoch.packets).sum();
    let merge = |truth: &[&Path]| {
        netsift()
            .arg("merge")
            .args(&snaps)
            .arg("--truth")
            .args(truth)
            .output()
            .unwrap()
    };

    // Host 0's capture alone: epoch 0 holds host 0's packets, not both hosts'.
    let err = refused(&merge(&[&hosts[0]]));
    let want = [
        format!("--truth {}", hosts[0].display()),
        "epoch 0".to_string(),
        format!("the truth has {} packets", epoch0[0].epoch.packets),
        format!("the snapshots {packets} packets"),
        format!("h1 {} packets", epoch0[1].epoch.packets),
        "h0-epoch000000.nss".to_string(),
    ];
    for w in &want {
        assert!(err.contains(w.as_str()), "{w:?} not in {err}");
    }

    // Other traffic over the same time (another seed: same rate, other packets and sizes).
    let other = d.join("other.pcap");
    ok(&netsift()
        .args(["gen", "--packets", "40000", "--flows", "5000"])
        .args(["--seed", "4", "--out"])
        .arg(&other)
        .output()
        .unwrap());
    let err = refused(&merge(&[&other]));
    assert!(
        err.contains("does not match the snapshots in epoch 0"),
        "{err}"
    );
    assert!(
        err.contains(&format!("the snapshots {packets} packets")),
        "{err}"
    );

    // Key traces without times cannot be merged by time for time epochs.
    let keys: Vec<PathBuf> = (0..2)
        .map(|i| {
            let f = d.join(format!("k{i}.keys13"));
            ok(&netsift()
                .args(["gen", "--packets", "100", "--format", "keys13", "--out"])
                .arg(&f)
                .output()
                .unwrap());
            f
        })
        .collect();
    let err = refused(&merge(&[&keys[0], &keys[1]]));
    assert!(err.contains("carry no capture times"), "{err}");
    assert!(err.contains("k0.keys13"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// Key traces without times, for packet-count epochs: read one after the other (an epoch's
/// truth does not depend on the order within it) and checked against the hosts' counts; a pipe
/// among several truths is refused (they are read side by side).
#[test]
fn untimed_truths_are_read_in_turn_for_packet_epochs_and_pipes_refused() {
    let d = fresh_dir("untimed");
    let snaps = d.join("snaps");
    let keys: Vec<PathBuf> = (0..2)
        .map(|i| {
            let f = d.join(format!("k{i}.keys13"));
            ok(&netsift()
                .args([
                    "gen",
                    "--packets",
                    "3000",
                    "--flows",
                    "300",
                    "--format",
                    "keys13",
                ])
                .args(["--seed", &(i + 1).to_string(), "--out"])
                .arg(&f)
                .output()
                .unwrap());
            ok(&netsift()
                .arg("run")
                .arg(&f)
                .args(["--task", "heavy_hitters", "--algo", "count_min"])
                .args(["--epoch-packets", "10000", "--truth", "off", "--json"])
                .args(["--threshold", "0.01"])
                .arg("--host")
                .arg(format!("h{i}"))
                .arg("--snapshots")
                .arg(&snaps)
                .output()
                .unwrap());
            f
        })
        .collect();
    let files: Vec<PathBuf> = (0..2)
        .map(|i| snaps.join(format!("h{i}-epoch000000.nss")))
        .collect();
    let out = ok(&netsift()
        .arg("merge")
        .args(&files)
        .args(["--json", "--truth"])
        .args(&keys)
        .output()
        .unwrap());
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["epochs"][0]["packets"], 6000);
    let hh = &v["epochs"][0]["tasks"][0];
    assert_eq!(hh["accuracy"]["f1"], 1.0, "{hh}");
    assert!(
        v["notes"].to_string().contains("read one after the other"),
        "{}",
        v["notes"]
    );
    // The second truth from a pipe (a pcap header).
    let mut child = netsift()
        .arg("merge")
        .args(&files)
        .arg("--truth")
        .arg(&keys[0])
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pcap = trace::write::PcapWriter::new(vec![], 1, 65535, trace::write::Endian::Little, false)
        .unwrap()
        .into_inner();
    // A pipe closed early by the refusal is no failure of this test.
    let _ = std::io::Write::write_all(&mut child.stdin.take().unwrap(), &pcap);
    let err = refused(&child.wait_with_output().unwrap());
    assert!(err.contains("--truth -: "), "{err}");
    assert!(err.contains("write it to a file"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}
