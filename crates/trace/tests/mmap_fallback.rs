//! A file that cannot be memory-mapped (here: a `ulimit -v` smaller than the file) is read as a
//! stream instead, with the same records, in constant memory; before, it failed with "Cannot
//! allocate memory".
//!
//! The limit must apply to the reading process only, so the test runs itself again as a child
//! under `sh -c 'ulimit -v ...'` (`CHILD` names the file) and checks what the child printed.

use std::process::Command;

use trace::write::{Endian, PcapWriter};
use trace::Capture;

const CHILD: &str = "TRACE_MMAP_FALLBACK_CHILD";
/// Records of 64 KiB: 96 MiB in all, more than the child's whole address space.
const RECORDS: u32 = 1536;
const LEN: usize = 64 << 10;
/// The child's address-space limit in KiB (`ulimit -v`): room for the test binary, not for a
/// mapping of the file.
const LIMIT_KB: u32 = 64 << 10;

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
    let path = testkit::scratch("mmap").join("large.pcap");
    let file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut w = PcapWriter::new(file, 1, 1 << 20, Endian::Little, false).unwrap();
    let frame = vec![0x5au8; LEN];
    for i in 0..RECORDS {
        w.write_packet(u64::from(i), LEN as u32, &frame).unwrap();
    }
    drop(w);
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
