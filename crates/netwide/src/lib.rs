//! Network-wide deployment over NATS JetStream (SketchVisor, `../shared/papers/sketchvisor.txt`
//! section 3.1: every host's data plane sends its local result to the control plane at each
//! epoch's end; section 5: the control plane merges and recovers). The broker is an existing,
//! durable one rather than a home-made protocol: NATS with JetStream (`nats-server`, the
//! `async-nats` client).
//!
//! - [`creds`]: the credentials file (user/password or NKEY seed) and the one way to connect.
//! - [`spool`]: an agent's bounded local spool of snapshot files waiting for an acknowledgement.
//! - [`publish`]: an agent's publisher: spool to `netsift.snapshots.<host>` with message id
//!   `<host>.<epoch>.<checksum>` (JetStream's de-duplication window), retried with backoff.
//! - [`lease`]: one agent per host id (a lease on `netsift.agents.<host>`, kept alive, released
//!   at exit).
//! - [`controller`]: the durable consumer that groups snapshots by epoch, waits for the expected
//!   hosts or a deadline, has them merged (by the caller: `netsift merge`'s code) and publishes
//!   and stores each network-wide report.
//! - [`server`]: a `nats-server` configuration with per-host permissions, and a child server
//!   for the demo and the tests.
//!
//! The snapshot bytes travel as written (`docs/snapshot-format.md`); the broker adds no format.

#![forbid(unsafe_code)]

pub mod controller;
pub mod creds;
pub mod lease;
pub mod publish;
pub mod server;
pub mod spool;

use std::time::Duration;

/// The JetStream stream that keeps every host's snapshots (file storage).
pub const STREAM: &str = "NETSIFT_SNAPSHOTS";
/// Subjects of the stream: `netsift.snapshots.<host>` (a host id may hold '.': the stream takes
/// `netsift.snapshots.>`).
pub const SUBJECT_PREFIX: &str = "netsift.snapshots";
/// The stream of agents' leases (`lease`): subject `netsift.agents.<host>`, one message per
/// subject, gone after [`LEASE_TTL`] unless renewed.
pub const AGENTS_STREAM: &str = "NETSIFT_AGENTS";
pub const AGENTS_PREFIX: &str = "netsift.agents";
/// How long a lease outlives its last renewal (an agent killed with -9 blocks a successor with
/// its host id this long at most); renewed every third of it.
pub const LEASE_TTL: Duration = Duration::from_secs(10);
/// The controller's inbox prefix: replies to it (JetStream's deliveries of every host's
/// snapshots) go to `_INBOX_controller.>`, which no agent may subscribe to.
pub const CONTROLLER_INBOX: &str = "_INBOX_controller";
/// Where the controller publishes each network-wide report (plain NATS, not stored there).
pub const REPORTS_SUBJECT: &str = "netsift.reports";
/// The key-value bucket of reports, keyed by epoch index.
pub const REPORTS_BUCKET: &str = "netsift-reports";
/// The controller's durable consumer: its position survives a restart of either side.
pub const CONSUMER: &str = "netsift-controller";
/// How long JetStream remembers a message id at most (the stream's max age when shorter): a
/// restarted agent that republishes epochs it had already sent within this window is not
/// counted twice.
pub const DEDUPE_WINDOW: Duration = Duration::from_secs(3600);
/// Largest message: the server's `max_payload` in [`server::config`] (a snapshot of the
/// default task set is a few MB; NATS's default is 1 MB).
pub const MAX_PAYLOAD: usize = 64 << 20;

/// The subject of `host`'s snapshots.
pub fn subject(host: &str) -> String {
    format!("{SUBJECT_PREFIX}.{host}")
}

/// The JetStream message id of `host`'s snapshot of `epoch` whose file is `bytes` (header
/// `Nats-Msg-Id`): `<host>.<epoch>.<checksum>`, the checksum being the snapshot header's
/// (bytes 24..32, xxh3-64 of header and body; docs/snapshot-format.md). JetStream de-duplicates
/// per stream, not per subject: with `<host>.<epoch>` alone, a host allowed to publish only on
/// its own subject could store junk under another host's next id and make that host's real
/// snapshot a "duplicate". The content's checksum cannot be guessed without the snapshot, while
/// the same file republished (a restart, a lost acknowledgement) keeps its id.
pub fn message_id(host: &str, epoch: u64, bytes: &[u8]) -> String {
    let sum = bytes
        .get(24..32)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
    format!("{host}.{epoch}.{sum:016x}")
}

/// An agent's inbox prefix: `_INBOX_<host>` ('.' of the host id as '~', so that host `h`'s
/// `_INBOX_h.>` does not cover host `h.1`'s inbox). The server lets each agent subscribe to its
/// own prefix only (`server::config`): no agent receives what is delivered to another or to
/// the controller.
pub fn agent_inbox(host: &str) -> String {
    format!("_INBOX_{}", host.replace('.', "~"))
}

/// The lease subject of `host`.
pub fn lease_subject(host: &str) -> String {
    format!("{AGENTS_PREFIX}.{host}")
}

/// Why the broker side failed (one line each).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Creds(String),
    #[error("cannot connect to {url}: {reason}")]
    Connect { url: String, reason: String },
    #[error("{url} refused the credentials of {creds} (authorization violation)")]
    Refused { url: String, creds: String },
    #[error("{url}: TLS failed ({reason}): the server's certificate must chain to --tls-ca")]
    Tls { url: String, reason: String },
    #[error("JetStream: {0}")]
    Broker(String),
    #[error("spool {dir}: {reason}")]
    Spool { dir: String, reason: String },
    /// Another agent holds this host id's lease (`lease`).
    #[error("{0}")]
    Lease(String),
    /// The server refused what the user did (a permissions violation): no retry can help.
    #[error("{0}")]
    Denied(String),
}

/// Every snapshot the stream holds, oldest first, each named `subject/sequence` (an ordered
/// consumer: nothing is acknowledged, the controller's position is untouched). Stops after
/// `timeout` without a message.
pub async fn stored_snapshots(
    js: &async_nats::jetstream::Context,
    timeout: Duration,
) -> Result<Vec<(String, Result<snapshot::Snapshot, String>)>, Error> {
    use futures_util::StreamExt;
    let stream = js
        .get_stream(STREAM)
        .await
        .map_err(|e| broker("stream", e))?;
    let pending = stream.cached_info().state.messages;
    let consumer = stream
        .create_consumer(async_nats::jetstream::consumer::pull::OrderedConfig::default())
        .await
        .map_err(|e| broker("reader", e))?;
    let mut msgs = consumer.messages().await.map_err(|e| broker("reader", e))?;
    let mut out = vec![];
    while (out.len() as u64) < pending {
        let m = match tokio::time::timeout(timeout, msgs.next()).await {
            Ok(Some(Ok(m))) => m,
            Ok(Some(Err(e))) => return Err(broker("reading the stream", e)),
            Ok(None) | Err(_) => break,
        };
        let seq = m.info().map(|i| i.stream_sequence).unwrap_or(0);
        let name = format!("{}/{seq}", m.subject);
        out.push((
            name,
            snapshot::decode(&m.payload).map_err(|e| e.to_string()),
        ));
    }
    Ok(out)
}

/// A broker error as [`Error::Broker`], with what was being done.
fn broker(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Broker(format!("{what}: {e}"))
}
