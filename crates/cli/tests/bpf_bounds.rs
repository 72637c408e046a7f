//! `--bpf` filters within bounds (issue 33, point 12: a 5,000-term filter gave no output in 10
//! s while libpcap compiled it). Compiling needs no privilege: a dead capture of the link type.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use netsift::live::{compile_bpf, BPF_COMPILE_LIMIT, MAX_BPF_TERMS};

const ETHERNET: pcap::Linktype = pcap::Linktype(1);

/// `host 10.a.b.c or host ...`, `n` terms.
fn hosts(n: usize) -> String {
    (0..n)
        .map(|i| format!("host 10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255))
        .collect::<Vec<_>>()
        .join(" or ")
}

#[test]
fn a_5000_term_filter_is_refused_at_once() {
    let t = Instant::now();
    let e = compile_bpf(&hosts(5000), ETHERNET, BPF_COMPILE_LIMIT)
        .unwrap_err()
        .to_string();
    let took = t.elapsed();
    assert!(e.contains("--bpf"), "{e}");
    assert!(e.contains("5000 terms"), "{e}");
    assert!(e.contains(&format!("at most {MAX_BPF_TERMS}")), "{e}");
    assert!(took < Duration::from_secs(1), "{took:?}");
}

/// The bound is one libpcap meets: a filter of as many terms as accepted compiles within the
/// time limit (so the refusal above is of what would not).
#[test]
fn a_filter_at_the_bound_compiles_in_time() {
    let t = Instant::now();
    compile_bpf(&hosts(MAX_BPF_TERMS), ETHERNET, BPF_COMPILE_LIMIT).expect("compiles");
    eprintln!("{MAX_BPF_TERMS} terms compiled in {:?}", t.elapsed());
    let e = compile_bpf(&hosts(MAX_BPF_TERMS + 1), ETHERNET, BPF_COMPILE_LIMIT)
        .unwrap_err()
        .to_string();
    assert!(e.contains(&format!("{} terms", MAX_BPF_TERMS + 1)), "{e}");
}

/// A filter within the size bounds whose compile outlasts the time limit is refused when the
/// limit passes, naming the flag (a limit of 1 ms against a compile of many ms).
#[test]
fn a_slow_compile_is_refused_at_the_time_limit() {
    let t = Instant::now();
    let e = compile_bpf(&hosts(MAX_BPF_TERMS), ETHERNET, Duration::from_millis(1))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--bpf: compiling the filter took more than 1 ms"),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(1));
    // A syntax error is named with the filter.
    let e = compile_bpf("host and", ETHERNET, BPF_COMPILE_LIMIT)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("--bpf 'host and': "), "{e}");
}

/// `netsift live` refuses such a filter before opening any interface: one line on stderr, in
/// well under the 10 s the compile took, without capturing (no privilege needed).
#[test]
fn live_refuses_a_5000_term_filter_with_one_line() {
    let t = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_netsift"))
        .args(["live", "--iface", "lo", "--bpf", &hosts(5000)])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn netsift");
    let status = testkit::wait_or_kill(&mut child, Duration::from_secs(10))
        .expect("netsift live did not refuse the filter within 10 s");
    let took = t.elapsed();
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("read");
    assert!(!status.success());
    assert!(err.contains("--bpf: the filter has 5000 terms"), "{err}");
    assert!(took < Duration::from_secs(2), "{took:?}");
}
