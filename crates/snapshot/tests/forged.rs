//! Forged snapshot states (issue 33, point 2): a state with a valid checksum whose fields are
//! forged must be refused or answered, never abort the process (an allocation of a forged size),
//! hang (a loop bounded by a forged count) or panic.
//!
//! For every catalog entry (`snapshot::forge::samples`: small parameters, a few thousand keys)
//! the saved state is forged at its varint positions with boundary values
//! (`snapshot::forge::BOUNDARY`, and the original value plus and minus one), and so is a whole
//! snapshot body with a fast-path summary; each forged case is restored, merged with a good
//! state both ways, queried on every task and merged through `merge_epoch`
//! (`snapshot::forge::exercise`, `exercise_body`).
//!
//! An allocation failure aborts the process, so the cases run in child processes (this test
//! binary again, running the ignored `forge_child` test) under an address-space limit
//! (`ulimit -v`, 2 GiB: a forged allocation of many GiB fails there instead of swapping the
//! machine), each reporting every case it finished on stdout. The parent restarts a child past a
//! case that killed it (abort) or that did not finish within `FORGE_CASE_SECS` (hang, default
//! 10 s in a debug build; a case takes milliseconds), and fails listing them.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use snapshot::forge::{self, Outcome};

/// Positions forged per state at most (every position of the small states; the larger ones are
/// sampled: `forge::positions_to_forge`).
const MAX_POSITIONS: usize = 80;
const HEAD: usize = 32;
const TAIL: usize = 16;

/// Address-space limit of a child (KiB).
const LIMIT_KIB: u64 = 2 << 20;

/// The forged cases of sample `s` (`s == samples.len()` is the whole-body sample): state and
/// description.
fn cases(state: &[u8]) -> Vec<(usize, u64)> {
    forge::positions_to_forge(state, HEAD, TAIL, MAX_POSITIONS)
        .into_iter()
        .flat_map(|p| forge::values_at(state, p).into_iter().map(move |v| (p, v)))
        .collect()
}

/// Run in a child by `forged_states_are_refused_or_answered` (`FORGE_SAMPLE`, `FORGE_FROM`):
/// prints `FORGE <case> <outcome>` after each case.
#[test]
#[ignore = "a child of forged_states_are_refused_or_answered"]
fn forge_child() {
    let (Ok(s), Ok(from)) = (std::env::var("FORGE_SAMPLE"), std::env::var("FORGE_FROM")) else {
        return;
    };
    let (s, from): (usize, usize) = (s.parse().unwrap(), from.parse().unwrap());
    // FORGE_VERBOSE=1 keeps the panic messages and backtraces (to debug a failing case).
    if std::env::var_os("FORGE_VERBOSE").is_none() {
        std::panic::set_hook(Box::new(|_| {}));
    }
    let samples = forge::samples().unwrap();
    let body = forge::body_sample().unwrap();
    let state = samples.get(s).map_or(&body.body, |x| &x.state);
    for (i, (at, v)) in cases(state).into_iter().enumerate().skip(from) {
        let forged = forge::substitute(state, at, v).unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match samples.get(s) {
            Some(x) => forge::exercise(x, &forged),
            None => forge::exercise_body(&body, &forged),
        }));
        let what = match r {
            Ok(Outcome::Answered) => "answered".to_string(),
            Ok(Outcome::Refused(_)) => "refused".to_string(),
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                format!("panic {}", msg.replace('\n', " "))
            }
        };
        println!("FORGE {i} {what}");
    }
    println!("FORGE end");
}

#[derive(Default)]
struct Tally {
    cases: usize,
    refused: usize,
    answered: usize,
    /// (sample, position, value, what happened)
    failed: Vec<(String, usize, u64, String)>,
}

/// One sample's cases through children, restarted past every abort and hang.
fn run_sample(exe: &std::path::Path, s: usize, label: &str, state: &[u8], t: &mut Tally) {
    let cases = cases(state);
    let secs: u64 = std::env::var("FORGE_CASE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let mut from = 0;
    while from < cases.len() {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit -v {LIMIT_KIB} && exec \"$0\" \"$@\""))
            .arg(exe)
            .args([
                "forge_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("FORGE_SAMPLE", s.to_string())
            .env("FORGE_FROM", from.to_string())
            .env("RUST_BACKTRACE", "0")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the forging child");
        let (tx, rx) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                // libtest's "test forge_child ... " may lead the first line.
                if let Some((_, rest)) = line.split_once("FORGE ") {
                    if tx.send(rest.to_string()).is_err() {
                        break;
                    }
                }
            }
        });
        let mut err = child.stderr.take().unwrap();
        let errs = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let mut next = from;
        let mut last = Instant::now();
        let failure = loop {
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(line) if line == "end" => break None,
                Ok(line) => {
                    let (i, what) = line.split_once(' ').unwrap_or((&line, ""));
                    let i: usize = i.parse().unwrap();
                    assert_eq!(i, next, "{label}: cases out of order");
                    t.cases += 1;
                    match what {
                        "answered" => t.answered += 1,
                        "refused" => t.refused += 1,
                        _ => t
                            .failed
                            .push((label.into(), cases[i].0, cases[i].1, what.into())),
                    }
                    next = i + 1;
                    last = Instant::now();
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if last.elapsed() > Duration::from_secs(secs) {
                        let _ = child.kill();
                        break Some(format!("hang (no answer in {secs} s)"));
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    break Some(String::new());
                }
            }
        };
        let status = child.wait().expect("wait for the child");
        let stderr = errs.join().unwrap_or_default();
        match failure {
            None if status.success() => {
                if std::env::var_os("FORGE_VERBOSE").is_some() {
                    eprintln!("{label}: {} cases, {next} reached", cases.len());
                }
                return;
            }
            None => panic!("{label}: the child ended {status}: {stderr}"),
            Some(f) => {
                if next >= cases.len() {
                    panic!("{label}: the child ended {status} after its last case: {stderr}");
                }
                let why = if f.is_empty() {
                    let line = stderr
                        .lines()
                        .rev()
                        .find(|l| !l.trim().is_empty() && !l.contains("RUST_BACKTRACE"))
                        .unwrap_or("");
                    format!("abort ({status}): {line}")
                } else {
                    f
                };
                t.cases += 1;
                t.failed
                    .push((label.into(), cases[next].0, cases[next].1, why));
                from = next + 1;
            }
        }
    }
}

#[test]
fn forged_states_are_refused_or_answered() {
    let started = Instant::now();
    let exe = std::env::current_exe().unwrap();
    let samples = forge::samples().unwrap();
    let body = forge::body_sample().unwrap();
    let mut jobs: Vec<(usize, String, Vec<u8>)> = samples
        .iter()
        .enumerate()
        .map(|(i, s)| (i, s.label.clone(), s.state.clone()))
        .collect();
    jobs.push((samples.len(), "snapshot body".into(), body.body.clone()));
    // Two children at a time (the test machines have two cores), the largest states first.
    jobs.sort_by_key(|j| std::cmp::Reverse(cases(&j.2).len()));
    let queue = std::sync::Mutex::new(jobs);
    let tallies: Vec<Tally> = std::thread::scope(|sc| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                sc.spawn(|| {
                    let mut t = Tally::default();
                    loop {
                        let Some((i, label, state)) = queue.lock().unwrap().pop() else {
                            return t;
                        };
                        run_sample(&exe, i, &label, &state, &mut t);
                    }
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut t = Tally::default();
    for x in tallies {
        t.cases += x.cases;
        t.refused += x.refused;
        t.answered += x.answered;
        t.failed.extend(x.failed);
    }
    t.failed.sort();
    let kind = |w: &str| w.split_whitespace().next().unwrap_or("").to_string();
    let count = |k: &str| t.failed.iter().filter(|f| kind(&f.3) == k).count();
    eprintln!(
        "forged {} cases over {} states in {:.1} s: {} refused, {} answered, {} failed \
         ({} aborts, {} hangs, {} panics)",
        t.cases,
        samples.len() + 1,
        started.elapsed().as_secs_f64(),
        t.refused,
        t.answered,
        t.failed.len(),
        count("abort"),
        count("hang"),
        count("panic"),
    );
    let shown: Vec<String> = t
        .failed
        .iter()
        .map(|(s, at, v, w)| format!("  {s}: varint at byte {at} = {v}: {w:.200}"))
        .collect();
    assert!(
        t.failed.is_empty(),
        "{} forged states aborted, hung or panicked:\n{}",
        t.failed.len(),
        shown.join("\n")
    );
    // The forger reached the states: some forged values load and answer.
    assert!(t.answered > 0 && t.refused > 0);
}
