//! `-` names the process's standard input, which can be read only once: a second `-` (as in
//! `netsift stats - -`) must say so instead of reading what is left of the stream (nothing, or
//! the middle of the first capture) and calling it an unknown format.
//!
//! Real stdin is needed, so the test runs itself again as a child process with a capture piped
//! into its stdin (`CHILD` set), and checks what the child printed.

use std::io::Write;
use std::process::{Command, Stdio};

use trace::write::{Endian, PcapWriter};
use trace::Capture;

const CHILD: &str = "TRACE_STDIN_TEST_CHILD";

#[test]
fn a_second_dash_is_refused() {
    if std::env::var_os(CHILD).is_some() {
        let first = Capture::open("-", None).expect("the first `-` opens");
        let n = first
            .for_each_streamed(|_| {})
            .expect("the first `-` reads");
        println!("first: {n} records");
        match Capture::open("-", None) {
            Ok(c) => println!("second: opened as {}", c.format()),
            Err(e) => println!("second: {e}"),
        }
        return;
    }
    let mut w = PcapWriter::new(Vec::new(), 1, 65535, Endian::Little, false).unwrap();
    w.write_packet(1, 10, &[7; 10]).unwrap();
    w.write_packet(2, 60, &[8; 60]).unwrap();
    let exe = std::env::current_exe().expect("test binary path");
    let mut child = Command::new(exe)
        .args(["--exact", "a_second_dash_is_refused", "--nocapture"])
        .env(CHILD, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the test binary");
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin.write_all(&w.into_inner()).expect("feed the child");
    drop(stdin);
    let out = child.wait_with_output().expect("child ends");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("first: 2 records\n"), "{stdout}");
    assert!(
        stdout.contains(
            "second: -: offset 0: stdin was already read by an earlier `-`; \
             it can be read only once\n"
        ),
        "{stdout}"
    );
}
