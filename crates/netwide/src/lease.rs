//! One agent per host id. Two agents started with the same `--host` would publish the same
//! subject and message ids: the second's snapshots would count as duplicates of the first's,
//! silently halving the data. So an agent holds a lease on subject `netsift.agents.<host>` of
//! stream [`crate::AGENTS_STREAM`] (made by the controller; one message per subject, kept
//! [`crate::LEASE_TTL`] after it was written):
//!
//! - taking it: publish our holder record with `Nats-Expected-Last-Subject-Sequence` 0 (no
//!   lease), or the sequence of a released one; JetStream stores it only if that is still the
//!   subject's last message, so two agents racing cannot both win;
//! - holding it: the same publish against our own last sequence every third of the TTL; if it
//!   fails because another record is now last, the lease is lost (reported, the agent stops
//!   publishing);
//! - a holder that died stops renewing: its record expires after the TTL and the next agent
//!   takes the lease then; one that exits releases it (a record marked released) at once.
//!
//! An agent may publish only its own lease subject and read (direct get) only its own record
//! (`server::config`), so no host can take or release another's lease.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_nats::jetstream::{self, context::PublishErrorKind};
use async_nats::HeaderMap;
use serde::{Deserialize, Serialize};

use crate::Error;

/// The record a lease holder publishes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Holder {
    /// Who: `<machine>:<pid>` (for the message a refused agent prints).
    pub who: String,
    /// Unique per agent process (a restarted agent is another holder).
    pub nonce: u64,
    /// Unix seconds when it took the lease.
    pub since: u64,
    pub released: bool,
}

/// A lease held: renew it with [`Lease::renew`], release it with [`Lease::release`].
pub struct Lease {
    js: jetstream::Context,
    subject: String,
    host: String,
    me: Holder,
    /// The stream sequence of our last record.
    seq: u64,
}

/// What the last record of a lease subject says.
enum Last {
    None,
    Released(u64),
    Held(u64, Holder),
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// This process as a holder.
pub fn me() -> Holder {
    let machine = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    let pid = std::process::id();
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    Holder {
        who: format!("{machine}:{pid}"),
        nonce: t ^ ((pid as u64) << 40) ^ 0x9e37_79b9_7f4a_7c15,
        since: now_secs(),
        released: false,
    }
}

async fn last(js: &jetstream::Context, subject: &str) -> Result<Last, Error> {
    use async_nats::jetstream::stream::DirectGetErrorKind;
    let stream = js
        .get_stream_no_info(crate::AGENTS_STREAM)
        .await
        .map_err(|e| Error::Broker(format!("lease stream: {e}")))?;
    match stream.direct_get_last_for_subject(subject).await {
        Ok(m) => {
            // A record that does not parse is no one's (not ours to honour).
            let h: Option<Holder> = serde_json::from_slice(&m.payload).ok();
            Ok(match h {
                Some(h) if !h.released => Last::Held(m.sequence, h),
                _ => Last::Released(m.sequence),
            })
        }
        Err(e) if e.kind() == DirectGetErrorKind::NotFound => Ok(Last::None),
        Err(e) => Err(Error::Broker(format!("reading the lease {subject}: {e}"))),
    }
}

/// Publish `h` on `subject` if the subject's last sequence is still `expected`: `Ok(Some(seq))`
/// stored, `Ok(None)` another record came first.
async fn put(
    js: &jetstream::Context,
    subject: &str,
    h: &Holder,
    expected: u64,
) -> Result<Option<u64>, Error> {
    let mut headers = HeaderMap::new();
    headers.insert(
        async_nats::header::NATS_EXPECTED_LAST_SUBJECT_SEQUENCE,
        expected.to_string().as_str(),
    );
    let body = serde_json::to_vec(h).map_err(|e| Error::Broker(e.to_string()))?;
    let ack = js
        .publish_with_headers(subject.to_string(), headers, body.into())
        .await
        .map_err(|e| Error::Broker(format!("lease {subject}: {e}")))?;
    match ack.await {
        Ok(a) => Ok(Some(a.sequence)),
        // JetStream's "wrong last sequence" (error code 10071): someone wrote in between.
        Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => Ok(None),
        Err(e) => Err(Error::Broker(format!("lease {subject}: {e}"))),
    }
}

impl Lease {
    /// Take `host`'s lease, waiting at most `wait` for a holder that died to expire. Fails with
    /// [`Error::Lease`] naming the holder when another agent keeps it; with [`Error::Broker`]
    /// when the broker cannot be asked (away, or no lease stream yet: the caller retries).
    pub async fn acquire(
        js: &jetstream::Context,
        host: &str,
        wait: Duration,
    ) -> Result<Lease, Error> {
        let subject = crate::lease_subject(host);
        let me = me();
        let end = Instant::now() + wait;
        loop {
            let (expected, holder) = match last(js, &subject).await? {
                Last::None => (0, None),
                Last::Released(s) => (s, None),
                Last::Held(s, h) => (s, Some(h)),
            };
            if holder.is_none() {
                if let Some(seq) = put(js, &subject, &me, expected).await? {
                    return Ok(Lease {
                        js: js.clone(),
                        subject,
                        host: host.to_string(),
                        me,
                        seq,
                    });
                }
                continue;
            }
            if let (true, Some(h)) = (Instant::now() >= end, holder) {
                return Err(Error::Lease(format!(
                    "another agent with --host {host} is running ({}, since {} s ago): refusing \
                     to run a second one, whose snapshots would count as duplicates of its own; \
                     stop it or give this agent another --host",
                    h.who,
                    now_secs().saturating_sub(h.since)
                )));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Renew the lease: `Err(Error::Lease)` when it was lost (another agent holds the host id
    /// now), `Err(Error::Broker)` when the broker could not be reached (try again).
    pub async fn renew(&mut self) -> Result<(), Error> {
        if let Some(seq) = put(&self.js, &self.subject, &self.me, self.seq).await? {
            self.seq = seq;
            return Ok(());
        }
        // Our record is no longer the last: expired during an outage (then it is ours to take
        // again) or another agent's.
        match last(&self.js, &self.subject).await? {
            Last::Held(_, h) if h.nonce != self.me.nonce => Err(Error::Lease(format!(
                "the lease of --host {} was taken by another agent ({}): this agent stops \
                 publishing",
                self.host, h.who
            ))),
            Last::Held(s, _) | Last::Released(s) => self.retake(s).await,
            Last::None => self.retake(0).await,
        }
    }

    async fn retake(&mut self, expected: u64) -> Result<(), Error> {
        match put(&self.js, &self.subject, &self.me, expected).await? {
            Some(seq) => {
                self.seq = seq;
                Ok(())
            }
            None => Err(Error::Lease(format!(
                "the lease of --host {} was taken by another agent: this agent stops publishing",
                self.host
            ))),
        }
    }

    /// Release the lease (a successor takes it at once instead of after the TTL).
    pub async fn release(self) -> Result<(), Error> {
        let gone = Holder {
            released: true,
            ..self.me.clone()
        };
        put(&self.js, &self.subject, &gone, self.seq)
            .await
            .map(|_| ())
    }

    pub fn holder(&self) -> &Holder {
        &self.me
    }
}

/// [`Lease::acquire`], ended at once by a permissions violation from the server
/// (credentials of another host: the lease's subject is not theirs), `Error::Denied`.
pub async fn take(
    js: &async_nats::jetstream::Context,
    host: &str,
    wait: Duration,
    errors: tokio::sync::watch::Receiver<Option<String>>,
) -> Result<Lease, Error> {
    tokio::select! {
        r = Lease::acquire(js, host, wait) => r,
        d = crate::publish::denied(errors) => Err(Error::Denied(d)),
    }
}

/// An agent's lease: take `host`'s if it is not held yet (the broker was away at the start), then keep it
/// on a task of its own: renewed every third of `crate::LEASE_TTL`; lost to another agent, the
/// publisher is stopped (`drain` now) and `lost` says why. A lease refused is
/// `Error::Lease`; a broker away is waited for (until the run ends).
pub async fn hold(
    js: &async_nats::jetstream::Context,
    host: &str,
    lease: &std::sync::Arc<tokio::sync::Mutex<Option<Lease>>>,
    drain: &std::sync::Arc<tokio::sync::watch::Sender<Option<Instant>>>,
    lost: &std::sync::Arc<std::sync::Mutex<Option<String>>>,
    errors: &tokio::sync::watch::Receiver<Option<String>>,
) -> Result<(), Error> {
    let wait = crate::LEASE_TTL + Duration::from_secs(2);
    let mut backoff = Duration::from_millis(100);
    while lease.lock().await.is_none() {
        match take(js, host, wait, errors.clone()).await {
            Ok(l) => *lease.lock().await = Some(l),
            Err(e @ (Error::Lease(_) | Error::Denied(_))) => return Err(e),
            Err(e) => {
                if drain.borrow().is_some_and(|d| Instant::now() >= d) {
                    return Err(e);
                }
                tracing::warn!("taking the lease of --host {host}: {e}; retrying in {backoff:?}");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
    let (lease, drain, lost) = (lease.clone(), drain.clone(), lost.clone());
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(crate::LEASE_TTL / 3).await;
            let mut l = lease.lock().await;
            let Some(held) = l.as_mut() else { return };
            match held.renew().await {
                Ok(()) => {}
                Err(e @ Error::Lease(_)) => {
                    tracing::error!("{e}");
                    if let Ok(mut w) = lost.lock() {
                        *w = Some(e.to_string());
                    }
                    // Not ours any more: never released by us.
                    *l = None;
                    let _ = drain.send(Some(Instant::now()));
                    return;
                }
                // The broker away: the next renewal tries again (the record outlives three).
                Err(e) => tracing::warn!("renewing the lease: {e}"),
            }
        }
    });
    Ok(())
}
