//! `netsift run --snapshots` and `netsift merge` as a user runs them (issue 15, points 3-4): a
//! capture split by flow hash into host files, each host run with `--snapshots`, the snapshots
//! merged, equal bit for bit to one run on the whole capture for every linear and idempotent
//! algorithm (ALGORITHMS.md classes A and B); bad snapshots refused naming the file.

mod common;
use common::{fresh_dir, netsift, ok};

use std::path::{Path, PathBuf};
use std::process::Output;

use key::{HashFn, KeyKind};

/// The error of a command that must fail: one line (after any notes `merge` printed).
fn refused(out: &Output) -> String {
    assert!(!out.status.success(), "accepted");
    let e = String::from_utf8_lossy(&out.stderr).trim_end().to_string();
    let errors: Vec<&str> = e.lines().filter(|l| !l.starts_with("netsift: ")).collect();
    assert!(errors.is_empty(), "{e}");
    let last = e.lines().last().unwrap_or_default().to_string();
    assert!(last.starts_with("netsift: error: "), "{e}");
    assert_eq!(
        e.matches("error").count(),
        last.matches("error").count(),
        "{e}"
    );
    last
}

/// A generated pcap (Zipf 1.0 over 20 k flows, 200 k packets, mixed sizes) split by a seeded
/// xxh3 of each packet's 5-tuple (`key::HashFn`) into `hosts` pcaps with the same header:
/// every flow on one host, as RSS or ECMP would place it. Returns the whole file and the parts.
fn split(d: &Path, hosts: usize) -> (PathBuf, Vec<PathBuf>) {
    let whole = d.join("whole.pcap");
    let st = netsift()
        .args([
            "gen",
            "--packets",
            "200000",
            "--flows",
            "20000",
            "--skew",
            "1.0",
        ])
        .args(["--seed", "17", "--out"])
        .arg(&whole)
        .status()
        .unwrap();
    assert!(st.success());
    // Which host each record goes to: the same reader and keying as `run`.
    let h = HashFn::new(0x5eed);
    let mut to = vec![];
    let cap = trace::Capture::open(whole.to_str().unwrap(), None).unwrap();
    engine::packet::each_packet(&cap, wire::Tunnel::Outer, |p| {
        to.push((h.hash(&p.tuple.key(KeyKind::FiveTuple)) % hosts as u64) as usize);
    })
    .unwrap();
    // The raw records (the generator writes little-endian pcap: 24-byte header, 16-byte
    // record headers with the captured length at bytes 8..12).
    let bytes = std::fs::read(&whole).unwrap();
    let mut parts: Vec<Vec<u8>> = vec![bytes[..24].to_vec(); hosts];
    let mut at = 24;
    for &host in &to {
        let cap = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        parts[host].extend_from_slice(&bytes[at..at + 16 + cap]);
        at += 16 + cap;
    }
    assert_eq!(at, bytes.len());
    let files = parts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let f = d.join(format!("host{i}.pcap"));
            std::fs::write(&f, p).unwrap();
            f
        })
        .collect();
    (whole, files)
}

/// Classes A and B on their tasks and several key kinds (as `measure/tests/workers.rs`), one
/// epoch (the hosts' packet-count epochs would not line up), in `weight`.
fn config(d: &Path, weight: &str) -> PathBuf {
    let mut t = format!("weight = \"{weight}\"\nepoch_packets = 1000000\n");
    let m = [
        ("heavy_hitters", "rev_sketch", "src"),
        ("heavy_changers", "rev_sketch", "src"),
        ("heavy_hitters", "deltoid", "five_tuple"),
        ("superspreaders", "two_level", "pair"),
        ("ddos", "two_level", "pair"),
        ("cardinality", "mrac", "five_tuple"),
        ("cardinality", "fm", "src"),
        ("cardinality", "kmin", "five_tuple"),
        ("cardinality", "linear_counting", "five_tuple"),
        ("cardinality", "hyperloglog", "pair"),
        ("flow_size", "count_min", "five_tuple"),
        ("flow_size", "count_sketch", "src"),
        ("flow_size", "count_array", "dst"),
        ("flow_size", "linear_hash", "five_tuple"),
        ("entropy", "cuckoo4", "src"),
    ];
    for (task, algo, key) in m {
        t.push_str(&format!(
            "\n[[measure]]\ntask = \"{task}\"\nalgo = \"{algo}\"\nkey = \"{key}\"\n"
        ));
    }
    if weight == "packets" {
        t.push_str("\n[[measure]]\ntask = \"flow_size_distribution\"\nalgo = \"mrac\"\n");
    }
    let f = d.join(format!("{weight}.toml"));
    std::fs::write(&f, t).unwrap();
    f
}

/// The report's epochs: every answer, truth and score (costs, timing and notes left out).
fn epochs(json: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    common::answers(&v)
}

#[test]
fn merged_host_snapshots_equal_one_run_on_the_whole_capture() {
    let d = fresh_dir("split");
    let (whole, parts) = split(&d, 3);
    for weight in ["packets", "bytes"] {
        let cfg = config(&d, weight);
        let snaps = d.join(format!("snaps-{weight}"));
        for (i, h) in parts.iter().enumerate() {
            // One host measures with two workers: its own merge is part of the path.
            let workers = if i == 0 { "2" } else { "1" };
            ok(&netsift()
                .arg("run")
                .arg(h)
                .arg("--config")
                .arg(&cfg)
                .args(["--workers", workers, "--json", "--host"])
                .arg(format!("h{i}"))
                .arg("--snapshots")
                .arg(&snaps)
                .output()
                .unwrap());
        }
        let files: Vec<PathBuf> = (0..3)
            .map(|i| snaps.join(format!("h{i}-epoch000000.nss")))
            .collect();
        let one = ok(&netsift()
            .arg("run")
            .arg(&whole)
            .arg("--config")
            .arg(&cfg)
            .args(["--workers", "1", "--json"])
            .output()
            .unwrap());
        let merged = ok(&netsift()
            .arg("merge")
            .args(&files)
            .arg("--json")
            .arg("--truth")
            .arg(&whole)
            .output()
            .unwrap());
        let (a, mut b) = (epochs(&one), epochs(&merged));
        // A merge lists each host's part (whole here); the rest is the run's.
        let hosts = b[0].as_object_mut().unwrap().remove("hosts").unwrap();
        assert_eq!(hosts.as_array().unwrap().len(), 3, "{hosts}");
        assert!(hosts
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["partial"] == false));
        assert_eq!(a.as_array().unwrap().len(), 1);
        let tasks = a[0]["tasks"].as_array().unwrap();
        assert_eq!(tasks.len(), if weight == "packets" { 16 } else { 15 });
        for (x, y) in tasks.iter().zip(b[0]["tasks"].as_array().unwrap()) {
            assert_eq!(x, y, "{weight}: {} by {}", x["task"], x["algorithm"]);
        }
        assert_eq!(a, b, "{weight}");
        // The answers were not the whole run's own: a host's snapshot alone answers otherwise
        // (scored against its own capture: the whole one is refused, issue 34).
        let alone = ok(&netsift()
            .arg("merge")
            .arg(&files[1])
            .arg("--json")
            .arg("--truth")
            .arg(&parts[1])
            .output()
            .unwrap());
        assert_ne!(epochs(&alone), a, "{weight}");
        // Without traces: the same answers, no scores.
        let bare = ok(&netsift()
            .arg("merge")
            .args(&files)
            .arg("--json")
            .output()
            .unwrap());
        let bare = epochs(&bare);
        assert_eq!(bare[0]["packets"], a[0]["packets"]);
        for (x, y) in tasks.iter().zip(bare[0]["tasks"].as_array().unwrap()) {
            // Spreader thresholds are fractions of the epoch's distinct addresses, which only
            // the traces give (see the README's `merge`).
            if ["superspreaders", "ddos"].contains(&x["task"].as_str().unwrap()) {
                continue;
            }
            if x["task"] != "flow_size" {
                // With the traces each listed key also carries its exact value.
                let mut x = x["answer"].clone();
                for k in x["keys"].as_array_mut().into_iter().flatten() {
                    assert!(k.as_object_mut().unwrap().remove("truth").is_some());
                }
                assert_eq!(x, y["answer"], "{weight}: {}", y["algorithm"]);
            }
        }
    }
    // 75 MB of captures and snapshots: not left behind.
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_snapshots_are_refused_naming_the_file() {
    let d = fresh_dir("bad");
    let (_, hosts) = split(&d, 2);
    let run = |host: &Path, id: &str, out: &Path, extra: &[&str]| {
        ok(&netsift()
            .arg("run")
            .arg(host)
            .args([
                "--task",
                "flow_size,cardinality",
                "--algo",
                "count_min,hyperloglog",
            ])
            .args(["--workers", "1", "--host", id, "--snapshots"])
            .arg(out)
            .args(extra)
            .output()
            .unwrap());
        out.join(format!("{id}-epoch000000.nss"))
    };
    let a = run(&hosts[0], "a", &d.join("s"), &[]);
    let b = run(&hosts[1], "b", &d.join("s"), &[]);
    assert!(netsift()
        .arg("merge")
        .args([&a, &b])
        .output()
        .unwrap()
        .status
        .success());
    let merge = |files: &[&Path]| refused(&netsift().arg("merge").args(files).output().unwrap());

    // Other parameters: the field and both files named.
    // (The largest seed: TOML cannot hold it, the snapshot carries it beside.)
    let w = run(
        &hosts[1],
        "w",
        &d.join("w"),
        &["--seed", "18446744073709551615"],
    );
    let e = merge(&[&a, &w]);
    assert!(
        e.contains("seed 18446744073709551615") && e.contains("w-epoch000000.nss"),
        "{e}"
    );
    let cfg = d.join("wide.toml");
    std::fs::write(
        &cfg,
        "[[measure]]\ntask = \"flow_size\"\nalgo = \"count_min\"\nparams = { width = 4096 }\n\
         [[measure]]\ntask = \"cardinality\"\nalgo = \"hyperloglog\"\n",
    )
    .unwrap();
    let p = ok(&netsift()
        .arg("run")
        .arg(&hosts[1])
        .arg("--config")
        .arg(&cfg)
        .args(["--workers", "1", "--host", "p", "--snapshots"])
        .arg(d.join("p"))
        .output()
        .unwrap());
    drop(p);
    let p = d.join("p").join("p-epoch000000.nss");
    let e = merge(&[&a, &p]);
    assert!(
        e.contains("other parameters") && e.contains("p-epoch000000.nss"),
        "{e}"
    );
    assert!(
        e.contains("measure[0].params.width (absent vs 4096)"),
        "{e}"
    );

    // Corrupted (one byte of the body), truncated, another format version, not a snapshot.
    let bytes = std::fs::read(&b).unwrap();
    let write = |name: &str, b: &[u8]| {
        let f = d.join(name);
        std::fs::write(&f, b).unwrap();
        f
    };
    let mut c = bytes.clone();
    c[bytes.len() / 2] ^= 0x10;
    let c = write("corrupt.nss", &c);
    let e = merge(&[&a, &c]);
    assert!(e.contains("corrupt.nss") && e.contains("checksum"), "{e}");
    let t = write("cut.nss", &bytes[..bytes.len() - 7]);
    let e = merge(&[&a, &t]);
    assert!(e.contains("cut.nss") && e.contains("truncated"), "{e}");
    let mut v = bytes.clone();
    v[8] = 9;
    let v = write("v9.nss", &v);
    let e = merge(&[&a, &v]);
    assert!(
        e.contains("v9.nss") && e.contains("format version 9"),
        "{e}"
    );
    let n = write("none.nss", b"not a snapshot at all, just text....");
    let e = merge(&[&n]);
    assert!(
        e.contains("none.nss") && e.contains("not a netsift snapshot"),
        "{e}"
    );
    // 75 MB of captures and snapshots: not left behind.
    let _ = std::fs::remove_dir_all(&d);
}

/// Several epochs: each merged in order, heavy changers answered against the previous merged
/// epoch; a `--truth` trace whose epochs cannot be the hosts' (packet-count epochs: each host
/// cut its own) is refused naming both counts.
#[test]
fn epochs_merge_in_order() {
    let d = fresh_dir("epochs");
    let (whole, hosts) = split(&d, 2);
    let snaps = d.join("s");
    let mut files = vec![];
    for (i, h) in hosts.iter().enumerate() {
        ok(&netsift()
            .arg("run")
            .arg(h)
            .args([
                "--task",
                "heavy_changers,cardinality",
                "--algo",
                "count_sketch,hyperloglog",
            ])
            .args(["--epoch-packets", "40000", "--workers", "1", "--host"])
            .arg(format!("h{i}"))
            .arg("--snapshots")
            .arg(&snaps)
            .output()
            .unwrap());
        for e in 0..2 {
            files.push(snaps.join(format!("h{i}-epoch{e:06}.nss")));
        }
    }
    // Each host split about 100 k packets into epochs of 40 k: epochs 0, 1, 2 on both.
    for i in 0..2 {
        files.push(snaps.join(format!("h{i}-epoch000002.nss")));
    }
    let out = ok(&netsift()
        .arg("merge")
        .args(&files)
        .args(["--json", "--recover", "none"])
        .output()
        .unwrap());
    let e = epochs(&out);
    let e = e.as_array().unwrap();
    assert_eq!(e.len(), 3);
    let hc = |i: usize| e[i]["tasks"][0].clone();
    assert_eq!(hc(0)["task"], "heavy_changers");
    assert!(hc(0)["note"].is_string(), "{}", hc(0));
    assert!(hc(1)["note"].is_null(), "{}", hc(1));
    assert!(
        hc(1)["answer"]["reported"].as_u64().unwrap() > 0,
        "{}",
        hc(1)
    );
    // The whole trace in 40 k-packet epochs: epoch 0 holds 40 k packets, the hosts' epoch 0
    // twice that (each host cut its own 40 k).
    let out = netsift()
        .arg("merge")
        .args(&files)
        .arg("--truth")
        .arg(&whole)
        .output()
        .unwrap();
    let err = refused(&out);
    assert!(err.contains("in epoch 0"), "{err}");
    assert!(err.contains("the truth has 40000 packets"), "{err}");
    assert!(err.contains("the snapshots 80000 packets"), "{err}");
    assert!(err.contains("packet-count epochs"), "{err}");
    // A host missing an epoch.
    let err = refused(&netsift().arg("merge").args(&files[1..]).output().unwrap());
    assert!(err.contains("host h0 has [1, 2]"), "{err}");
    // 75 MB of captures and snapshots: not left behind.
    let _ = std::fs::remove_dir_all(&d);
}

/// A time epoch a host's capture skips (no packet in it) gets an idle snapshot: no state, zero
/// packets; `merge` takes that host as present and the epoch's answers are the other host's.
#[test]
fn a_skipped_time_epoch_gets_an_idle_snapshot_that_merges_as_nothing() {
    let d = fresh_dir("idle");
    let (whole, _) = split(&d, 1);
    // 200 k packets; keep the first and last thirds on host a (time epochs of a third each:
    // the generator's constant rate puts packet i at i us).
    let b = std::fs::read(&whole).unwrap();
    let mut gap = b[..24].to_vec();
    let (mut at, mut i) = (24, 0);
    while at + 16 <= b.len() {
        let len = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        if !(70_000..140_000).contains(&i) {
            gap.extend_from_slice(&b[at..at + 16 + len]);
        }
        (at, i) = (at + 16 + len, i + 1);
    }
    let a_trace = d.join("a.pcap");
    std::fs::write(&a_trace, gap).unwrap();
    let snaps = d.join("snaps");
    let run = |trace: &Path, host: &str| {
        ok(&netsift()
            .arg("run")
            .arg(trace)
            .args([
                "--epoch-ms",
                "70",
                "--task",
                "heavy_hitters",
                "--truth",
                "off",
            ])
            .args(["--seed", "3", "--host", host, "--json", "--snapshots"])
            .arg(&snaps)
            .output()
            .unwrap())
    };
    run(&a_trace, "a");
    let alone = epochs(&run(&whole, "b"));
    let idle = snapshot::read(&snaps.join(snapshot::file_name("a", 1))).unwrap();
    assert!(idle.is_idle(), "{:?}", idle.epoch);
    let snaps = &snaps;
    let files: Vec<PathBuf> = ["a", "b"]
        .iter()
        .flat_map(|h| (0..3).map(move |e| snaps.join(snapshot::file_name(h, e))))
        .collect();
    let merged = epochs(&ok(&netsift()
        .args(["merge", "--json"])
        .args(&files)
        .output()
        .unwrap()));
    assert_eq!(merged[1]["packets"], alone[1]["packets"]);
    assert_eq!(merged[1]["tasks"], alone[1]["tasks"]);
    assert_ne!(merged[0]["packets"], alone[0]["packets"]);
}

/// Issue 33, point 9: a host whose snapshot is partial (a restarted agent's first epoch on the
/// Unix-time grid: started mid-epoch, 406 packets where the others had about 1,400) makes the
/// merged epoch partial, in the JSON and in the table, with that host named and each host's
/// coverage listed; a merge of whole snapshots is whole.
#[test]
fn a_partial_host_makes_the_merged_epoch_partial_and_is_named() {
    let d = fresh_dir("partial");
    let (_, hosts) = split(&d, 2);
    let snaps = d.join("snaps");
    for (i, h) in hosts.iter().enumerate() {
        ok(&netsift()
            .arg("run")
            .arg(h)
            .args(["--task", "heavy_hitters,cardinality", "--truth", "off"])
            .args(["--epoch-packets", "1000000", "--seed", "5", "--json"])
            .arg("--host")
            .arg(format!("h{i}"))
            .arg("--snapshots")
            .arg(&snaps)
            .output()
            .unwrap());
    }
    let files: Vec<PathBuf> = (0..2)
        .map(|i| snaps.join(format!("h{i}-epoch000000.nss")))
        .collect();
    let merge = |json: bool| {
        let mut c = netsift();
        c.arg("merge").args(&files);
        if json {
            c.arg("--json");
        }
        ok(&c.output().unwrap())
    };
    // Whole snapshots: a whole epoch, both hosts listed whole with their packets' span.
    let whole: serde_json::Value = serde_json::from_str(&merge(true)).unwrap();
    let e = &whole["epochs"][0];
    assert_eq!(e["partial"], false, "{e}");
    assert!(e.get("partial_reasons").is_none(), "{e}");
    let listed = e["hosts"].as_array().unwrap();
    assert_eq!(listed.len(), 2);
    for (i, h) in listed.iter().enumerate() {
        let s = snapshot::read(&files[i]).unwrap();
        assert_eq!(h["host"], format!("h{i}"));
        assert_eq!(h["partial"], false);
        assert_eq!(h["packets"], s.epoch.packets);
        assert_eq!(h["coverage"]["start_ns"], s.epoch.first_ns);
        assert_eq!(h["coverage"]["end_ns"], s.epoch.last_ns);
    }
    // Host h1's snapshot as a restarted agent's: its capture began 60% into the epoch.
    let mut s = snapshot::read(&files[1]).unwrap();
    let span = s.epoch.last_ns - s.epoch.first_ns;
    let from = s.epoch.first_ns + span * 6 / 10;
    s.epoch.partial = true;
    s.epoch.started_mid = true;
    s.epoch.covered_from_ns = from;
    snapshot::write(&snaps, &s).unwrap();
    let v: serde_json::Value = serde_json::from_str(&merge(true)).unwrap();
    let e = &v["epochs"][0];
    assert_eq!(e["partial"], true, "{e}");
    assert_eq!(
        e["partial_reasons"],
        serde_json::json!(["started_mid_epoch"])
    );
    let listed = e["hosts"].as_array().unwrap();
    assert_eq!(listed[0]["partial"], false);
    assert_eq!(listed[1]["host"], "h1");
    assert_eq!(listed[1]["partial"], true);
    assert_eq!(
        listed[1]["partial_reasons"],
        serde_json::json!(["started_mid_epoch"])
    );
    assert_eq!(listed[1]["coverage"]["start_ns"], from);
    // The answers are the same: only the flags differ.
    assert_eq!(e["tasks"], whole["epochs"][0]["tasks"]);
    // The controller's report embeds the same (`merge --json`'s report of the epoch).
    let cur: Vec<(PathBuf, snapshot::Snapshot)> = files
        .iter()
        .map(|f| (f.clone(), snapshot::read(f).unwrap()))
        .collect();
    let c = engine::merge::epoch_report(0, &[], &cur, visor::Method::default()).unwrap();
    let ce = &c["epochs"][0];
    assert_eq!(ce["partial"], true, "{ce}");
    assert_eq!(ce["partial_reasons"], e["partial_reasons"]);
    assert_eq!(ce["hosts"], e["hosts"]);
    let table = merge(false);
    assert!(table.contains("(partial: started mid-epoch)"), "{table}");
    let h1 = table
        .lines()
        .find(|l| l.trim_start().starts_with("host h1:"))
        .unwrap_or_else(|| panic!("no host line: {table}"));
    assert!(h1.contains("(partial: started mid-epoch)"), "{h1}");
    let h0 = table
        .lines()
        .find(|l| l.trim_start().starts_with("host h0:"))
        .unwrap_or_else(|| panic!("no host line: {table}"));
    assert!(!h0.contains("partial"), "{h0}");
    let _ = std::fs::remove_dir_all(&d);
}

/// Issue 33, point 12: `merge` of a 1 GiB file that is not a snapshot is refused from its
/// 32-byte header: run under a 512 MiB address-space limit (`ulimit -v`; reading the file whole
/// needs 1 GiB and aborted there), it names the file and the magic at once.
#[test]
fn merge_refuses_a_large_non_snapshot_from_its_header() {
    use std::io::{Seek, SeekFrom, Write};
    use std::time::{Duration, Instant};
    let d = fresh_dir("large");
    let big = d.join("big.nss");
    let mut f = std::fs::File::create(&big).unwrap();
    f.write_all(b"NOTASNAP").unwrap();
    f.seek(SeekFrom::Start((1 << 30) - 1)).unwrap();
    f.write_all(&[0]).unwrap();
    drop(f);
    let t = Instant::now();
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 524288 && exec \"$0\" merge \"$1\"")
        .arg(env!("CARGO_BIN_EXE_netsift"))
        .arg(&big)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("merge did not end within 30 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let took = t.elapsed();
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let _ = std::fs::remove_dir_all(&d);
    assert_eq!(status.code(), Some(1), "{status}: {err}");
    assert!(
        err.contains("big.nss: not a netsift snapshot (magic"),
        "{err}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
}
