//! Issue 34.7: `gen` of any length stops at SIGINT/SIGTERM within moments, with `run`'s status;
//! `--packets` is bounded and a file larger than the free space is refused before writing.

mod common;
use common::{netsift, tmp};

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Wait until `child` has installed its SIGINT and SIGTERM handlers (Linux: the `SigCgt` mask
/// of /proc/PID/status), so a signal sent next reaches the handler, not the default action.
/// Gives up after a minute (the signal is then sent anyway, and the status check fails).
fn wait_for_handlers(child: &Child) {
    let status = format!("/proc/{}/status", child.id());
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let caught = std::fs::read_to_string(&status)
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("SigCgt:"))
                    .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            })
            .unwrap_or(0);
        // Bits SIGINT - 1 = 1 and SIGTERM - 1 = 14.
        if caught & (1 << 1) != 0 && caught & (1 << 14) != 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn kill(child: &Child, signal: &str) {
    assert!(Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap()
        .success());
}

/// 10^12 packets to /dev/null (a device: no free-space check): the bursty order first tallies
/// every draw (hours at this size), the shuffled one writes from the start; either stops at
/// once at a signal and exits 130/143 saying how far it got.
#[test]
fn gen_of_any_length_stops_at_a_signal() {
    for (order, signal, code, name) in [
        ("bursty", "-INT", 130, "SIGINT"),
        ("shuffled", "-TERM", 143, "SIGTERM"),
    ] {
        let mut child = netsift()
            .args(["gen", "--packets", "1000000000000", "--order", order])
            .args(["--format", "keys13", "--out", "/dev/null"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_handlers(&child);
        std::thread::sleep(Duration::from_millis(300));
        kill(&child, signal);
        let status = testkit::wait_or_kill(&mut child, Duration::from_secs(20))
            .unwrap_or_else(|| panic!("{order}: gen did not stop within 20 s of {signal}"));
        assert_eq!(status.code(), Some(code), "{order}: {status}");
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(
            err.contains(&format!("interrupted by {name} after ")) && err.contains("1000000000000"),
            "{order}: {err}"
        );
    }
}

/// To standard output, an interrupted trace is a valid, truncated one: whole records.
#[test]
fn gen_to_stdout_stops_at_a_signal_with_whole_records() {
    let mut child = netsift()
        .args(["gen", "--packets", "1000000000000", "--order", "shuffled"])
        .args(["--format", "keys13", "--out", "-"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    // Output flowing: the handlers are installed before the first byte.
    let mut first = [0u8; 13];
    stdout.read_exact(&mut first).unwrap();
    kill(&child, "-TERM");
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    let status = testkit::wait_or_kill(&mut child, Duration::from_secs(20)).expect("stopped");
    assert_eq!(status.code(), Some(143));
    assert_eq!((first.len() + rest.len()) % 13, 0, "a partial record");
}

/// `--packets` past 2^40 is refused by name with the bound, before any file is made.
#[test]
fn gen_refuses_more_packets_than_the_bound() {
    let f = tmp("too-many.pcap");
    let out = netsift()
        .args(["gen", "--packets", "10000000000000", "--out"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.starts_with("netsift: error: ")
            && e.contains("--packets")
            && e.contains(&gen::MAX_PACKETS.to_string()),
        "{e}"
    );
    assert!(!f.exists());
}

/// A trace larger than the file system's free space is refused before anything is written,
/// naming both sizes (2^40 packets of pcap: at least 77 TB).
#[test]
fn gen_refuses_a_file_larger_than_the_free_space() {
    let dir = tmp("nospace");
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("big.pcap");
    let out = netsift()
        .args(["gen", "--packets", &gen::MAX_PACKETS.to_string(), "--out"])
        .arg(&f)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.starts_with("netsift: error: cannot write ")
            && e.contains("takes up to")
            && e.contains("free"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "a file was made"
    );
}
