//! Large files (above the size from which a thread of its own pre-faults the mapping).
//!
//! A file that cannot be memory-mapped (here: a `ulimit -v` smaller than the file) is read as a
//! stream instead, with the same records, in constant memory; before, it failed with "Cannot
//! allocate memory". The limit must apply to the reading process only, so the test runs itself
//! again as a child under `sh -c 'ulimit -v ...'` (`CHILD` names the file) and checks what the
//! child printed.
//!
//! A mapped one is unmapped once its capture is dropped, by the pre-faulting thread
//! (`Mapped::prefault`): the mapping must not outlive the capture, or a process that opens
//! captures one after another (`bench`, a directory of files) would keep each mapped.

use std::process::Command;

use trace::write::{Endian, PcapWriter};
use trace::Capture;

const CHILD: &str = "TRACE_MMAP_FALLBACK_CHILD";
/// Records of 64 KiB: 96 MiB in all, more than the child's whole address space and than the
/// size from which the mapping is pre-faulted by a thread.
const RECORDS: u32 = 1536;
const LEN: usize = 64 << 10;
/// The child's address-space limit in KiB (`ulimit -v`): room for the test binary, not for a
/// mapping of the file.
const LIMIT_KB: u32 = 64 << 10;

/// A pcap file of [`RECORDS`] records of [`LEN`] bytes, `name` in this test's scratch directory.
fn large(name: &str) -> std::path::PathBuf {
    let path = testkit::scratch("large").join(name);
    let file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut w = PcapWriter::new(file, 1, 1 << 20, Endian::Little, false).unwrap();
    let frame = vec![0x5au8; LEN];
    for i in 0..RECORDS {
        w.write_packet(u64::from(i), LEN as u32, &frame).unwrap();
    }
    drop(w);
    path
}

#[test]
fn a_file_too_large_to_map_is_streamed() {
    if let Some(path) = std::env::var_os(CHILD) {
        // No panics in the child: unwinding under a tight address-space limit can itself fail
        // to allocate. Print the outcome and exit.
        let mut bytes = 0u64;
        let res = Capture::open(&path.to_string_lossy(), None).and_then(|cap| {
            cap.for_each_streamed(|r| {
                if let trace::Body::Frame { data, .. } = r.body {
                    bytes += data.len() as u64;
                }
            })
        });
        match res {
            Ok(n) => println!("records {n} bytes {bytes}"),
            Err(e) => println!("error: {e}"),
        }
        std::process::exit(0);
    }
    if !cfg!(target_os = "linux") {
        eprintln!("skip: needs Linux's `ulimit -v` to make the mapping fail");
        return;
    }
    let path = large("streamed.pcap");
    let exe = std::env::current_exe().expect("test binary path");
    let script = format!(
        "ulimit -v {LIMIT_KB} && exec \"$0\" --exact a_file_too_large_to_map_is_streamed \
         --nocapture --test-threads=1"
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .arg(exe)
        .env(CHILD, &path)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("spawn sh");
    let _ = std::fs::remove_file(&path);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = format!(
        "records {RECORDS} bytes {}",
        u64::from(RECORDS) * LEN as u64
    );
    assert!(stdout.contains(&want), "{stdout}");
}

/// Whether this process maps `path` (Linux's `/proc/self/maps` names mapped files).
fn mapped(path: &std::path::Path) -> bool {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("reading /proc/self/maps");
    let name = path.to_string_lossy();
    maps.lines().any(|l| l.ends_with(name.as_ref()))
}

/// Whether `path` is unmapped within 20 s: the unmapping is the pre-faulting thread's, after
/// the capture is dropped.
fn unmapped_soon(path: &std::path::Path) -> bool {
    let t = std::time::Instant::now();
    while mapped(path) && t.elapsed() < std::time::Duration::from_secs(20) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    !mapped(path)
}

#[test]
fn a_dropped_capture_is_unmapped() {
    if !cfg!(target_os = "linux") {
        eprintln!("skip: reads Linux's /proc/self/maps");
        return;
    }
    let path = large("mapped.pcap");

    for pass in 0..2 {
        let cap = Capture::open(&path.to_string_lossy(), None).unwrap();
        let mut bytes = 0u64;
        let n = cap
            .for_each_streamed(|r| {
                if let trace::Body::Frame { data, .. } = r.body {
                    bytes += data.len() as u64;
                }
            })
            .unwrap();
        assert_eq!(
            (n, bytes),
            (u64::from(RECORDS), u64::from(RECORDS) * LEN as u64)
        );
        assert!(
            mapped(&path),
            "pass {pass}: the capture is read from a mapping"
        );
        drop(cap);
        assert!(
            unmapped_soon(&path),
            "pass {pass}: still mapped 20 s after the capture was dropped"
        );
    }
    std::fs::remove_file(&path).unwrap();
}

/// Resident KiB of this process's mapping of `path` (Linux's `/proc/self/smaps`), if mapped.
fn resident_kb(path: &std::path::Path) -> Option<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("reading /proc/self/smaps");
    let name = path.to_string_lossy();
    let mut lines = smaps.lines().skip_while(|l| !l.ends_with(name.as_ref()));
    lines.next()?;
    lines
        .find_map(|l| l.strip_prefix("Rss:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The pre-faulting thread waits for the first pass over the records: populating the mapping
/// holds the memory-map lock, which slowed every allocation made between the opening and the
/// first packet (a two-worker `run` built its structures in 110-150 ms instead of 20).
#[test]
fn a_large_capture_is_pre_faulted_only_once_read() {
    if !cfg!(target_os = "linux") {
        eprintln!("skip: reads Linux's /proc/self/smaps");
        return;
    }
    let path = large("lazy.pcap");
    let whole_kb = u64::from(RECORDS) * LEN as u64 / 1024;
    let cap = Capture::open(&path.to_string_lossy(), None).unwrap();
    // A look at the first records (as `run` tells the address family) starts nothing.
    assert_eq!(cap.records().take(4).count(), 4);
    // Populating 96 MiB of page-cached file takes a few ms: give a thread that started at the
    // opening ample time to show.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let before = resident_kb(&path).expect("mapped");
    assert!(
        before < whole_kb / 8,
        "{before} KiB of {whole_kb} resident before any pass"
    );
    let n = cap.for_each_streamed(|_| {}).unwrap();
    assert_eq!(n, u64::from(RECORDS));
    drop(cap);
    // A capture dropped before any pass (a run refused after the opening) is unmapped too:
    // the waiting thread wakes for the drop as well.
    let cap = Capture::open(&path.to_string_lossy(), None).unwrap();
    assert!(mapped(&path));
    drop(cap);
    assert!(
        unmapped_soon(&path),
        "still mapped 20 s after a capture never read was dropped"
    );
    std::fs::remove_file(&path).unwrap();
}
