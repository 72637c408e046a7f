//! A large capture (pre-faulted by a thread of its own) is unmapped once it is dropped, by that
//! thread (`Mapped::prefault`): the mapping must not outlive the capture, or a process that
//! opens captures one after another (`bench`, a directory of files) would keep each mapped.

use trace::write::{Endian, PcapWriter};
use trace::Capture;

/// Records of 64 KiB: 72 MiB in all, above the size from which a thread pre-faults the mapping.
const RECORDS: u32 = 1152;
const LEN: usize = 64 << 10;

/// Whether this process maps `path` (Linux's `/proc/self/maps` names mapped files).
fn mapped(path: &std::path::Path) -> bool {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("reading /proc/self/maps");
    let name = path.to_string_lossy();
    maps.lines().any(|l| l.ends_with(name.as_ref()))
}

#[test]
fn a_dropped_capture_is_unmapped() {
    if !cfg!(target_os = "linux") {
        eprintln!("skip: reads Linux's /proc/self/maps");
        return;
    }
    let dir = testkit::scratch("unmap");
    let path = dir.join("large.pcap");
    let file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut w = PcapWriter::new(file, 1, 1 << 20, Endian::Little, false).unwrap();
    let frame = vec![0x5au8; LEN];
    for i in 0..RECORDS {
        w.write_packet(u64::from(i), LEN as u32, &frame).unwrap();
    }
    drop(w);

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
        // The unmapping is the pre-faulting thread's, after the drop: give it up to 20 s.
        let t = std::time::Instant::now();
        while mapped(&path) && t.elapsed() < std::time::Duration::from_secs(20) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(
            !mapped(&path),
            "pass {pass}: still mapped 20 s after the capture was dropped"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
