//! Where alert events go: standard output or error (when nothing else is asked), a file
//! (appended, flushed per event), a command (`--alert-exec`: the JSON line on its standard
//! input, killed after a timeout). The command runs on a thread of its own behind a bounded
//! queue, so a slow or hung command never blocks the run: a full queue, a failed start, a
//! non-zero exit and a timeout are each counted and said on stderr.

use std::fs::File;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Events waiting for the command; past this, an event is counted as failed, not queued.
const EXEC_QUEUE: usize = 64;

/// One line on stderr; a closed or full stderr drops it instead of panicking.
pub(crate) fn say(msg: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "netsift: {msg}");
}

/// The console sink used when neither a file nor a command is given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Console {
    #[default]
    Stdout,
    /// Standard output holds one JSON document (`run --json`): events go to stderr.
    Stderr,
}

/// Counts of the command sink, shared with its thread.
#[derive(Default)]
pub struct ExecCounts {
    pub runs: AtomicU64,
    /// Failures of every kind (the three below, plus a start that failed).
    pub failed: AtomicU64,
    pub timed_out: AtomicU64,
    pub queue_full: AtomicU64,
}

struct Exec {
    tx: Option<SyncSender<String>>,
    thread: Option<JoinHandle<()>>,
    counts: Arc<ExecCounts>,
}

pub struct Sinks {
    console: Option<Console>,
    file: Option<(PathBuf, File)>,
    exec: Option<Exec>,
    /// Writes to the console or the file that failed (each said once on stderr).
    pub write_errors: u64,
}

impl Sinks {
    pub fn new(
        console: Console,
        file: Option<&Path>,
        exec: Option<(&str, Duration)>,
    ) -> std::io::Result<Sinks> {
        let file = match file {
            Some(p) => Some((
                p.to_path_buf(),
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)?,
            )),
            None => None,
        };
        let exec = exec.map(|(cmd, timeout)| Exec::start(cmd.to_string(), timeout));
        Ok(Sinks {
            console: (file.is_none() && exec.is_none()).then_some(console),
            file,
            exec,
            write_errors: 0,
        })
    }

    pub fn exec_counts(&self) -> Option<&ExecCounts> {
        self.exec.as_ref().map(|e| &*e.counts)
    }

    /// Hand one JSON line to every sink.
    pub fn send(&mut self, line: &str) {
        let mut failed = None;
        match self.console {
            Some(Console::Stdout) => {
                let mut o = std::io::stdout().lock();
                if let Err(e) = writeln!(o, "{line}").and_then(|_| o.flush()) {
                    failed = Some(format!("standard output: {e}"));
                }
            }
            Some(Console::Stderr) => {
                let _ = writeln!(std::io::stderr(), "{line}");
            }
            None => {}
        }
        if let Some((p, f)) = &mut self.file {
            if let Err(e) = writeln!(f, "{line}").and_then(|_| f.flush()) {
                failed = Some(format!("{}: {e}", p.display()));
            }
        }
        if let Some(why) = failed {
            if self.write_errors == 0 {
                say(format_args!("alerts: cannot write {why}"));
            }
            self.write_errors += 1;
        }
        if let Some(x) = &self.exec {
            x.send(line);
        }
    }

    /// Wait for the command's queue to drain (each run bounded by the timeout).
    pub fn finish(&mut self) {
        if let Some(x) = &mut self.exec {
            x.tx = None;
            if let Some(t) = x.thread.take() {
                let _ = t.join();
            }
        }
    }
}

impl Drop for Sinks {
    fn drop(&mut self) {
        self.finish();
    }
}

impl Exec {
    fn start(cmd: String, timeout: Duration) -> Exec {
        let (tx, rx) = sync_channel::<String>(EXEC_QUEUE);
        let counts = Arc::new(ExecCounts::default());
        let c = counts.clone();
        let thread = std::thread::Builder::new()
            .name("alert-exec".into())
            .spawn(move || {
                for line in rx {
                    c.runs.fetch_add(1, Ordering::Relaxed);
                    if let Err(why) = run_one(&cmd, &line, timeout, &c) {
                        c.failed.fetch_add(1, Ordering::Relaxed);
                        say(format_args!("alert-exec `{cmd}`: {why}"));
                    }
                }
            })
            .ok();
        Exec {
            tx: Some(tx),
            thread,
            counts,
        }
    }

    fn send(&self, line: &str) {
        let Some(tx) = &self.tx else { return };
        match tx.try_send(line.to_string()) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.counts.queue_full.fetch_add(1, Ordering::Relaxed);
                self.counts.failed.fetch_add(1, Ordering::Relaxed);
                say(format_args!(
                    "alert-exec: {EXEC_QUEUE} events already wait for the command: event dropped"
                ));
            }
        }
    }
}

/// Run the command once with `line` on its stdin; kill its process group after `timeout`.
fn run_one(cmd: &str, line: &str, timeout: Duration, c: &ExecCounts) -> Result<(), String> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        // Its own process group, so a timeout kills what the shell started too.
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A command that does not read its input may close it: not a failure in itself.
        let _ = stdin.write_all(line.as_bytes());
        let _ = stdin.write_all(b"\n");
    }
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(st)) if st.success() => return Ok(()),
            Ok(Some(st)) => return Err(format!("exited with {st}")),
            Ok(None) if Instant::now() >= deadline => {
                kill_group(&mut child);
                c.timed_out.fetch_add(1, Ordering::Relaxed);
                return Err(format!(
                    "still running after {:.1} s: killed",
                    timeout.as_secs_f64()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => {
                kill_group(&mut child);
                return Err(format!("cannot wait for it: {e}"));
            }
        }
    }
}

fn kill_group(child: &mut Child) {
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: kill(2) with the negated id of the group this child leads (process_group(0)
        // above) and a valid signal number; it touches no memory of ours.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}
