//! An agent's publisher: every spooled snapshot goes to JetStream subject
//! `netsift.snapshots.<host>` with message id `<host>.<epoch>`, so a snapshot published twice
//! (a restarted agent, an acknowledgement lost on the way back) is stored once
//! (`crate::DEDUPE_WINDOW`). A file leaves the spool only when its publication is acknowledged;
//! a failure (broker away, timeout) is retried with exponential backoff, bounded, while the run
//! goes on writing into the spool.

use std::time::{Duration, Instant};

use async_nats::jetstream::{self, context::PublishErrorKind, message::PublishMessage};
use tokio::sync::watch;

use crate::spool::{Entry, Spool};
use crate::Error;

#[derive(Clone, Debug)]
pub struct Options {
    /// How long one publication may wait for its acknowledgement.
    pub ack_timeout: Duration,
    /// Backoff after a failure: doubles from `backoff_min` up to `backoff_max`.
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// How often an idle publisher looks into the spool.
    pub poll: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
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
    /// Larger than the server takes: dropped from the spool (no retry can help).
    pub too_large: u64,
    /// Left in the spool when the drain ended (sent first by the next start).
    pub left: usize,
}

/// Publish what the spool holds until `drain` carries a deadline (the run has ended) and the
/// spool is empty or the deadline has passed. Errors only when the spool cannot be read.
pub async fn run(
    js: &jetstream::Context,
    spool: &mut Spool,
    opts: &Options,
    mut drain: watch::Receiver<Option<Instant>>,
) -> Result<Stats, Error> {
    let mut stats = Stats::default();
    let mut backoff = opts.backoff_min;
    loop {
        let files = spool.pending()?;
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
        for f in files {
            match publish_one(js, &f, opts.ack_timeout).await {
                Ok(duplicate) => {
                    if duplicate {
                        stats.duplicates += 1;
                    } else {
                        stats.published += 1;
                    }
                    let _ = std::fs::remove_file(&f.path);
                    backoff = opts.backoff_min;
                }
                Err(Failure::TooLarge(e)) => {
                    tracing::error!("{}: dropped, {e}", f.path.display());
                    stats.too_large += 1;
                    let _ = std::fs::remove_file(&f.path);
                }
                Err(Failure::Retry(e)) => {
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

enum Failure {
    TooLarge(String),
    Retry(String),
}

/// Publish one spooled file and wait for its acknowledgement: `Ok(true)` when JetStream had it
/// already.
async fn publish_one(
    js: &jetstream::Context,
    f: &Entry,
    timeout: Duration,
) -> Result<bool, Failure> {
    let bytes = std::fs::read(&f.path).map_err(|e| Failure::Retry(e.to_string()))?;
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
    match tokio::time::timeout(timeout, attempt).await {
        Ok(Ok(ack)) => Ok(ack.duplicate),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(Failure::Retry(format!(
            "no acknowledgement within {timeout:?}"
        ))),
    }
}
