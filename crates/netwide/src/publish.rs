//! An agent's publisher: every spooled snapshot goes to JetStream subject
//! `netsift.snapshots.<host>` with message id [`crate::message_id`], so a snapshot published
//! twice (a restarted agent, an acknowledgement lost on the way back) is stored once
//! (`crate::DEDUPE_WINDOW`). A file leaves the spool only when its publication is acknowledged;
//! a failure (broker away, timeout) is retried with exponential backoff, bounded, while the run
//! goes on writing into the spool.
//!
//! Before a file is sent it is checked: it must decode (`snapshot::decode`) and hold the host
//! and epoch its name says, that host being the agent's. A file that does not is moved to
//! `<spool>/rejected/`, named and counted, never published, and never holds up the epochs after
//! it. A snapshot larger than the server's `max_payload` (learnt from the server's `INFO`:
//! nothing is judged too large before the broker has been reached, when the client only knows
//! NATS's 1 MB default) is renamed `<name>.too-large` in the spool (kept: no retry can send
//! it, and it must not block later epochs) and named. A permissions violation (the server's
//! asynchronous `-ERR`, [`crate::creds::ServerErrors`]) stops the publisher: no retry can help.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, context::PublishErrorKind, message::PublishMessage};
use tokio::sync::watch;

use crate::spool::{Entry, Spool};
use crate::Error;

/// Where rejected files go, inside the spool.
pub const REJECTED_DIR: &str = "rejected";
/// The suffix a snapshot too large for the server gets, in the spool.
pub const TOO_LARGE_EXT: &str = "too-large";
/// How many names [`Stats`] keeps per list.
const NAMES: usize = 64;

#[derive(Clone, Debug)]
pub struct Options {
    /// The agent's host: the only host whose snapshots it publishes.
    pub host: String,
    /// How long one publication may wait for its acknowledgement.
    pub ack_timeout: Duration,
    /// Backoff after a failure: doubles from `backoff_min` up to `backoff_max`.
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// How often an idle publisher looks into the spool.
    pub poll: Duration,
}

impl Options {
    /// The defaults for `host`: acknowledgement within 5 s, backoff 100 ms doubling to 5 s,
    /// the spool looked into every 50 ms.
    pub fn new(host: &str) -> Options {
        Options {
            host: host.to_string(),
            ack_timeout: Duration::from_secs(5),
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(5),
            poll: Duration::from_millis(50),
        }
    }
}

/// What the publisher did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Stored by JetStream.
    pub published: u64,
    /// Acknowledged as duplicates (this message id was already stored).
    pub duplicates: u64,
    /// Failed attempts, each followed by a backoff.
    pub failures: u64,
    /// Larger than the server's `max_payload`: kept in the spool as `<name>.too-large`
    /// (`too_large_files`, the first 64), never sent.
    pub too_large: u64,
    pub too_large_files: Vec<String>,
    /// Not a snapshot of this host (does not decode, holds another host or epoch than its name,
    /// or another host's name): moved to `<spool>/rejected/` (`rejected_files`, the first 64).
    pub rejected: u64,
    pub rejected_files: Vec<String>,
    /// The server refused what the agent does (a permissions violation): the publisher stopped.
    pub denied: Option<String>,
    /// Left in the spool when the publisher ended (sent first by the next start).
    pub left: usize,
}

/// Publish what the spool holds until `drain` carries a deadline (the run has ended) and the
/// spool is empty or the deadline has passed, or until the server denies a publication
/// (`Stats::denied`). `errors` are the connection's server errors
/// ([`crate::creds::ServerErrors::subscribe`]). Errors only when the spool cannot be read.
pub async fn run(
    js: &jetstream::Context,
    spool: &mut Spool,
    opts: &Options,
    errors: watch::Receiver<Option<String>>,
    mut drain: watch::Receiver<Option<Instant>>,
) -> Result<Stats, Error> {
    let client = js.client();
    let mut stats = Stats::default();
    let mut backoff = opts.backoff_min;
    // Files set aside that could not be moved: skipped, counted once.
    let mut skipped: HashSet<PathBuf> = HashSet::new();
    loop {
        let mut files = spool.pending()?;
        files.retain(|f| !skipped.contains(&f.path));
        let deadline = *drain.borrow();
        if let Some(d) = deadline {
            if files.is_empty() || Instant::now() >= d {
                stats.left = files.len();
                return Ok(stats);
            }
        }
        if files.is_empty() {
            // Until the next look, or at once when the run ends.
            let _ = tokio::time::timeout(opts.poll, drain.changed()).await;
            continue;
        }
        let mut sent = 0;
        for f in &files {
            // The server's limit, once it has said it (None: not reached yet).
            let limit = client.try_server_info().map(|i| i.max_payload);
            let outcome = match check(f, &opts.host) {
                Err(why) => Outcome::Reject(why),
                Ok(None) => continue, // gone meanwhile
                Ok(Some(bytes)) => match limit {
                    // The client would judge the size against NATS's 1 MB default.
                    None => Outcome::Retry("the broker has not been reached yet".into()),
                    Some(max) if bytes.len() > max => Outcome::TooLarge(format!(
                        "{} bytes, the server takes at most {max} (its max_payload)",
                        bytes.len()
                    )),
                    Some(_) => match publish_one(js, f, bytes, opts.ack_timeout, &errors).await {
                        Ok(duplicate) => Outcome::Sent { duplicate },
                        Err(Failure::TooLarge(e)) => Outcome::TooLarge(e),
                        Err(Failure::Retry(e)) => Outcome::Retry(e),
                        Err(Failure::Denied(e)) => Outcome::Denied(e),
                    },
                },
            };
            match outcome {
                Outcome::Sent { duplicate } => {
                    if duplicate {
                        stats.duplicates += 1;
                    } else {
                        stats.published += 1;
                    }
                    let _ = std::fs::remove_file(&f.path);
                    backoff = opts.backoff_min;
                    sent += 1;
                }
                Outcome::Reject(why) => {
                    let to = spool.dir().join(REJECTED_DIR).join(file_name(&f.path));
                    let moved = std::fs::create_dir_all(spool.dir().join(REJECTED_DIR))
                        .and_then(|_| std::fs::rename(&f.path, &to));
                    let shown = match moved {
                        Ok(()) => to.display().to_string(),
                        Err(e) => {
                            skipped.insert(f.path.clone());
                            format!("{} (not moved: {e})", f.path.display())
                        }
                    };
                    tracing::error!("{}: rejected, never published: {why}", f.path.display());
                    stats.rejected += 1;
                    if stats.rejected_files.len() < NAMES {
                        stats.rejected_files.push(shown);
                    }
                }
                Outcome::TooLarge(why) => {
                    let mut to = f.path.clone().into_os_string();
                    to.push(format!(".{TOO_LARGE_EXT}"));
                    let to = PathBuf::from(to);
                    let shown = match std::fs::rename(&f.path, &to) {
                        Ok(()) => to.display().to_string(),
                        Err(e) => {
                            skipped.insert(f.path.clone());
                            format!("{} (not renamed: {e})", f.path.display())
                        }
                    };
                    tracing::error!("{}: too large, kept as {shown}: {why}", f.path.display());
                    stats.too_large += 1;
                    if stats.too_large_files.len() < NAMES {
                        stats.too_large_files.push(shown);
                    }
                }
                Outcome::Denied(e) => {
                    tracing::error!("publishing {} refused: {e}", f.path.display());
                    stats.denied = Some(e);
                    stats.left = files.len() - sent;
                    return Ok(stats);
                }
                Outcome::Retry(e) => {
                    stats.failures += 1;
                    tracing::warn!(
                        "publishing {} failed ({e}); retrying in {backoff:?}",
                        f.path.display()
                    );
                    let wake = match *drain.borrow() {
                        Some(d) => d.min(Instant::now() + backoff),
                        None => Instant::now() + backoff,
                    };
                    tokio::time::sleep_until(wake.into()).await;
                    backoff = (backoff * 2).min(opts.backoff_max);
                    break;
                }
            }
            if drain.borrow().is_some_and(|d| Instant::now() >= d) {
                break;
            }
        }
    }
}

/// What became of one spooled file.
enum Outcome {
    Sent { duplicate: bool },
    Reject(String),
    TooLarge(String),
    Denied(String),
    Retry(String),
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The bytes of spooled file `f` when it is a whole snapshot of `host` holding the host and
/// epoch its name says; `Ok(None)` when it is gone; `Err(reason)` when it must not be
/// published.
pub fn check(f: &Entry, host: &str) -> Result<Option<Vec<u8>>, String> {
    if f.host != host {
        return Err(format!(
            "another host's snapshot (its name says host {}, this agent is {host})",
            f.host
        ));
    }
    let bytes = match std::fs::read(&f.path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot be read: {e}")),
    };
    let s = snapshot::decode(&bytes).map_err(|e| format!("not a snapshot: {e}"))?;
    if s.host != f.host || s.epoch.index != f.epoch {
        return Err(format!(
            "holds host {} epoch {}, its name says host {} epoch {}",
            s.host, s.epoch.index, f.host, f.epoch
        ));
    }
    Ok(Some(bytes))
}

enum Failure {
    TooLarge(String),
    Retry(String),
    Denied(String),
}

/// The first permissions violation among the server's errors, if any.
pub fn denial(errors: &watch::Receiver<Option<String>>) -> Option<String> {
    errors
        .borrow()
        .as_deref()
        .filter(|e| crate::creds::is_permission_violation(e))
        .map(str::to_string)
}

/// Publish one spooled file and wait for its acknowledgement: `Ok(true)` when JetStream had it
/// already. A permissions violation from the server ends the wait at once.
/// The first permissions violation the server reports, when it comes.
pub async fn denied(mut errors: watch::Receiver<Option<String>>) -> String {
    loop {
        if let Some(d) = denial(&errors) {
            return d;
        }
        if errors.changed().await.is_err() {
            // The connection's error channel is gone: no denial will come.
            std::future::pending::<()>().await;
        }
    }
}

async fn publish_one(
    js: &jetstream::Context,
    f: &Entry,
    bytes: Vec<u8>,
    timeout: Duration,
    errors: &watch::Receiver<Option<String>>,
) -> Result<bool, Failure> {
    if let Some(e) = denial(errors) {
        return Err(Failure::Denied(e));
    }
    let id = crate::message_id(&f.host, f.epoch, &bytes);
    let msg = PublishMessage::build().payload(bytes.into()).message_id(id);
    let attempt = async {
        let ack = js
            .send_publish(crate::subject(&f.host), msg)
            .await
            .map_err(|e| match e.kind() {
                PublishErrorKind::MaxPayloadExceeded => Failure::TooLarge(e.to_string()),
                _ => Failure::Retry(e.to_string()),
            })?;
        ack.await.map_err(|e| Failure::Retry(e.to_string()))
    };
    let mut errors = errors.clone();
    let denied = async move {
        loop {
            if errors.changed().await.is_err() {
                // No more errors can come.
                std::future::pending::<()>().await;
            }
            if let Some(e) = denial(&errors) {
                return e;
            }
        }
    };
    tokio::select! {
        r = tokio::time::timeout(timeout, attempt) => match r {
            Ok(Ok(ack)) => Ok(ack.duplicate),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Failure::Retry(format!(
                "no acknowledgement within {timeout:?}"
            ))),
        },
        e = denied => Err(Failure::Denied(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("netwide-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A snapshot file of `host`, epoch `epoch`, written as the runner writes one.
    fn snapshot_file(dir: &Path, host: &str, epoch: u64) -> PathBuf {
        let s = snapshot::Snapshot {
            host: host.into(),
            epoch: snapshot::EpochSpan {
                index: epoch,
                ..Default::default()
            },
            seed: 1,
            kinds: vec![],
            truth: false,
            params_hash: snapshot::params_hash(""),
            params: String::new(),
            config: String::new(),
            instances: vec![],
            fast: vec![],
        };
        snapshot::write(dir, &s).unwrap()
    }

    #[test]
    fn corrupt_foreign_and_misnamed_files_are_refused() {
        let dir = scratch("check");
        let mut spool = Spool::open(&dir, 100, 1 << 30).unwrap();
        snapshot_file(&dir, "a", 1);
        snapshot_file(&dir, "b", 2);
        std::fs::write(dir.join(snapshot::file_name("a", 3)), b"NSIFTSNP garbage").unwrap();
        // a's epoch 5 under epoch 4's name.
        let five = snapshot_file(&dir, "a", 5);
        std::fs::rename(&five, dir.join(snapshot::file_name("a", 4))).unwrap();
        let got: Vec<(u64, String, Result<bool, String>)> = spool
            .pending()
            .unwrap()
            .iter()
            .map(|f| (f.epoch, f.host.clone(), check(f, "a").map(|b| b.is_some())))
            .collect();
        assert_eq!(got.len(), 4);
        assert_eq!(got[0], (1, "a".into(), Ok(true)));
        let why = |i: usize| got[i].2.clone().unwrap_err();
        assert!(why(1).contains("another host"), "{}", why(1));
        assert!(why(2).contains("not a snapshot"), "{}", why(2));
        assert!(
            why(3).contains("epoch 5, its name says host a epoch 4"),
            "{}",
            why(3)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn permission_violations_are_told_from_other_server_errors() {
        let e = crate::creds::ServerErrors::default();
        let rx = e.subscribe();
        assert_eq!(denial(&rx), None);
        e.record("nats: Maximum Payload Violation".into());
        assert_eq!(denial(&rx), None);
        e.record("nats: Permissions Violation for Publish to \"netsift.snapshots.b\"".into());
        assert!(denial(&rx).unwrap().contains("netsift.snapshots.b"));
        // Not hidden by a later error of another kind.
        e.record("nats: Stale Connection".into());
        assert!(denial(&rx).unwrap().contains("netsift.snapshots.b"));
    }
}
