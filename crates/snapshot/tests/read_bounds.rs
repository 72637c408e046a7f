//! `snapshot::read` checks the header before it reads the body (issue 33, point 12: `merge` of
//! a 1 GiB file that was not a snapshot took 1 GiB of memory).
//!
//! The memory is measured in a child process (this test binary run again on one file, the
//! `READ_CHILD` variable naming it), whose peak resident size `getrusage(RUSAGE_CHILDREN)` gives
//! after it is waited for.

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const GIB: u64 = 1 << 30;
const CHILD: &str = "READ_CHILD";

/// A sparse file of `size` bytes starting with `head` (no disk used beyond the head).
fn sparse(path: &Path, head: &[u8], size: u64) {
    let mut f = std::fs::File::create(path).expect("create");
    f.write_all(head).expect("write");
    f.seek(SeekFrom::Start(size - 1)).expect("seek");
    f.write_all(&[0]).expect("write");
}

/// A current header announcing `body` bytes (checksum irrelevant: it is checked last).
fn header(body: u64) -> Vec<u8> {
    let mut h = snapshot::MAGIC.to_vec();
    h.extend_from_slice(&snapshot::VERSION.to_le_bytes());
    h.extend_from_slice(&(snapshot::HEADER_LEN as u16).to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes());
    h.extend_from_slice(&body.to_le_bytes());
    h.extend_from_slice(&0u64.to_le_bytes());
    h
}

/// `snapshot::read` of `path` in a child process: its error, its wall time and the child's
/// peak resident size in bytes.
fn read_in_child(path: &Path) -> (String, Duration, u64) {
    let exe = std::env::current_exe().expect("test binary");
    let t = Instant::now();
    let mut child = Command::new(exe)
        .args(["child_reads", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn the child");
    let status = testkit::wait_or_kill(&mut child, Duration::from_secs(60))
        .expect("the child did not finish reading within 60 s");
    let took = t.elapsed();
    assert!(status.success(), "the child failed: {status}");
    let mut out = String::new();
    use std::io::Read;
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read");
    let line = out
        .lines()
        .find_map(|l| l.split_once("READ: ").map(|x| x.1))
        .unwrap_or_else(|| panic!("no READ line from the child: {out}"))
        .to_string();
    // SAFETY: getrusage writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) },
        0
    );
    (line, took, ru.ru_maxrss as u64 * 1024)
}

/// The child's side: read the file named by `READ_CHILD` and print the outcome.
#[test]
fn child_reads() {
    let Some(path) = std::env::var_os(CHILD) else {
        return;
    };
    match snapshot::read(Path::new(&path)) {
        Ok(_) => println!("READ: ok"),
        Err(e) => println!("READ: {e}"),
    }
}

fn scratch() -> PathBuf {
    testkit::scratch("read-bounds")
}

/// A 1 GiB sparse file with another magic, and one with a good header announcing fewer bytes
/// than it holds: both refused from the header, in well under a second, the child's peak
/// resident size far below the file's size (reading it whole: about 1 GiB).
#[test]
fn a_large_file_is_refused_from_its_header() {
    let dir = scratch();
    let cases = [
        (
            "bad-magic.nss",
            b"NOTASNAP\x03\x00\x20\x00".to_vec(),
            "not a netsift snapshot",
        ),
        ("trailing.nss", header(100), "bytes after the body"),
        (
            "old-version.nss",
            {
                let mut h = header(GIB - 32);
                h[8] = 2;
                h
            },
            "format version 2",
        ),
    ];
    for (name, head, want) in cases {
        let path = dir.join(name);
        sparse(&path, &head, GIB);
        let (line, took, rss) = read_in_child(&path);
        std::fs::remove_file(&path).ok();
        eprintln!(
            "{name}: {line:?} in {took:?}, child peak RSS {} MiB",
            rss >> 20
        );
        assert!(line.contains(want), "{name}: {line}");
        assert!(
            rss < 128 << 20,
            "{name}: the child's peak RSS is {} MiB",
            rss >> 20
        );
        assert!(took < Duration::from_secs(10), "{name}: {took:?}");
    }
}

/// A header announcing more than 1 GiB of body is refused even where the file's size is not
/// known (here: a file that does announce its size, larger than the bound, so the bound and not
/// the size refuses it; the body is never read).
#[test]
fn a_body_past_the_bound_is_refused() {
    let dir = scratch();
    let path = dir.join("huge.nss");
    let body = GIB + 1;
    sparse(&path, &header(body), body + snapshot::HEADER_LEN as u64);
    let (line, _, rss) = read_in_child(&path);
    std::fs::remove_file(&path).ok();
    assert!(line.contains("more than the 1073741824"), "{line}");
    assert!(rss < 128 << 20, "the child's peak RSS is {} MiB", rss >> 20);
}

/// A good snapshot still reads, and one cut short is named truncated from the header.
#[test]
fn good_and_truncated_files() {
    let dir = scratch();
    let good = snapshot::Snapshot {
        host: "a".into(),
        epoch: Default::default(),
        seed: 1,
        kinds: vec!["src".into()],
        truth: false,
        params_hash: snapshot::params_hash(""),
        params: String::new(),
        config: String::new(),
        instances: vec![],
        fast: vec![],
    };
    let path = snapshot::write(&dir, &good).expect("write");
    assert_eq!(snapshot::read(&path).expect("read"), good);
    let bytes = std::fs::read(&path).expect("read");
    let cut = dir.join("cut.nss");
    std::fs::write(&cut, &bytes[..bytes.len() - 1]).expect("write");
    let e = snapshot::read(&cut).unwrap_err().to_string();
    assert!(e.contains("truncated: the header announces"), "{e}");
    let long = dir.join("long.nss");
    let mut more = bytes.clone();
    more.push(0);
    std::fs::write(&long, &more).expect("write");
    let e = snapshot::read(&long).unwrap_err().to_string();
    assert!(e.contains("1 bytes after the body"), "{e}");
}
