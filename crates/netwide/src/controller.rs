//! The controller: one durable JetStream pull consumer on every host's snapshots. Snapshots are
//! grouped by epoch; an epoch is reported when every expected host has sent it or when its
//! deadline (from its first snapshot's arrival) has passed, the missing hosts named. The merge
//! itself is the caller's ([`Merger`]: `netsift merge`'s code). Each report is published on
//! `netsift.reports` and stored in the key-value bucket `netsift-reports` under the epoch's
//! index; a snapshot that arrives after its epoch was reported gives a corrected report with
//! the next revision.
//!
//! A message is acknowledged once its epoch's report is stored (or once it is rejected), so a
//! controller that dies loses nothing: its successor is handed what was not acknowledged. An
//! epoch whose report the bucket already holds with the same hosts is not reported again (a
//! controller that died between storing and acknowledging).
//!
//! A report names each merged snapshot's stream sequence (`sequences`): a late snapshot for an
//! epoch this controller does not hold (restarted since, or the epoch left memory) brings the
//! epoch back from the stream (`restore`) and corrects it with the next revision, within the
//! last `keep` epochs reported.
//!
//! Rejected, acknowledged (never delivered again), counted, logged and named in the epoch's
//! report (`rejected`), the controller going on and the rest of the epoch answered: a snapshot
//! that does not decode, one whose message id or host is not its subject's or not allowed
//! (`--hosts`), one whose seed, parameters or key kinds differ from the expected
//! configuration's (`Options::expected`: the controller's own `--expect`, never the first host
//! to arrive, which could be the misconfigured one), one whose instance states do not restore
//! within their parameters and the memory budget (`snapshot::validate`: a forged state cannot
//! make the merge allocate or loop without bound), one arriving after its epoch has left memory
//! (`Options::keep`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer::pull, AckKind};
use futures_util::StreamExt;
use serde::Serialize;
use snapshot::Snapshot;

use crate::{broker, Error};

/// Which hosts an epoch waits for.
#[derive(Clone, Debug)]
pub enum Hosts {
    /// These, and only these are accepted.
    List(BTreeSet<String>),
    /// Every host that has a subject in the stream (any host is accepted).
    FromStream,
}

#[derive(Clone, Debug)]
pub struct Options {
    pub hosts: Hosts,
    /// What every host's snapshot must agree with (seed, parameters, key kinds; instances when
    /// it has any), and its name for messages: the deployment's configuration as the
    /// controller was given it.
    pub expected: (PathBuf, Snapshot),
    /// The memory one snapshot's instances may take once restored (`snapshot::validate`).
    pub max_memory: Option<u64>,
    /// The snapshot stream's retention.
    pub limits: Limits,
    /// How long an epoch waits for its missing hosts after its first snapshot arrived.
    pub deadline: Duration,
    /// Stop once this many epochs have a report in the bucket (this controller's or an
    /// earlier one's) and none is waiting; `None`: until stopped.
    pub epochs: Option<u64>,
    /// Reported epochs kept in memory for late snapshots (and as the previous epoch of the
    /// next, for heavy changers).
    pub keep: usize,
}

/// How long and how much the snapshot stream keeps (JetStream `max_age`, `max_bytes`, oldest
/// discarded first): without them it grows without end (~12 GB an hour at 3 hosts of 4 MB
/// snapshots and 1 s epochs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_age: Duration,
    pub max_bytes: i64,
}

impl Limits {
    /// Shortest retention: a controller down for less than this loses nothing.
    pub const MIN_AGE: Duration = Duration::from_secs(600);
    /// Least bytes kept.
    pub const MIN_BYTES: i64 = 1 << 30;

    /// Keep what a controller needs: the last `keep` reported epochs (late snapshots correct
    /// them from the stream), the one being filled and its deadline, at least [`Self::MIN_AGE`];
    /// and as many bytes as `keep` + 2 epochs of `hosts` snapshots of the largest size the
    /// server takes ([`crate::MAX_PAYLOAD`]), at least [`Self::MIN_BYTES`]. `epoch`: the
    /// epochs' length when they are time epochs (packet-count epochs have none: the minimum).
    pub fn derive(
        keep: usize,
        epoch: Option<Duration>,
        deadline: Duration,
        hosts: usize,
    ) -> Limits {
        let epochs = keep as u32 + 2;
        let age = epoch.map_or(Duration::ZERO, |e| e.saturating_mul(epochs) + deadline);
        let bytes = (epochs as i64)
            .saturating_mul(hosts.max(1) as i64)
            .saturating_mul(crate::MAX_PAYLOAD as i64);
        Limits {
            max_age: age.max(Self::MIN_AGE),
            max_bytes: bytes.max(Self::MIN_BYTES),
        }
    }
}

/// A snapshot refused, as a report names it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Rejected {
    /// The host of the subject it came on.
    pub host: String,
    pub reason: String,
}

/// One epoch's network-wide report as published and stored.
#[derive(Serialize)]
pub struct NetReport {
    pub epoch: u64,
    /// 1 for the first report of the epoch, then one more per correction.
    pub revision: u64,
    /// The hosts merged.
    pub hosts: Vec<String>,
    /// Expected hosts whose snapshot had not arrived.
    pub missing: Vec<String>,
    /// Snapshots refused for this epoch (and those whose epoch could not be read, since the
    /// last report), with the reason: forged, corrupt, misconfigured.
    pub rejected: Vec<Rejected>,
    /// Merged hosts whose snapshot covers only part of the epoch (cut short by a signal, or a
    /// capture that started or ended inside it): the epoch's answers are partial.
    pub partial: Vec<String>,
    /// Each merged host's snapshot as the stream's sequence number: a restarted controller
    /// fetches them back (`Stream::get_raw_message`) to correct the epoch when a late
    /// snapshot arrives.
    pub sequences: BTreeMap<String, u64>,
    /// The merged answers: `netsift merge --json`'s `Report` (the caller's [`Merger`]).
    pub report: serde_json::Value,
}

/// What the controller did.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Stats {
    pub accepted: u64,
    pub reports: u64,
    pub corrections: u64,
    /// Snapshots of (host, epoch) already held or reported: not counted again.
    pub duplicates: u64,
    pub rejected_malformed: u64,
    pub rejected_host: u64,
    pub rejected_incompatible: u64,
    pub rejected_late: u64,
    pub merge_failures: u64,
}

/// The merge of one epoch: `(name, snapshot)` of the previous epoch when held (heavy changers
/// answer against it) and of this one; returns the report as JSON.
pub type Merger<'a> = dyn FnMut(u64, &[(PathBuf, Snapshot)], &[(PathBuf, Snapshot)]) -> Result<serde_json::Value, String>
    + 'a;

struct Held {
    parts: BTreeMap<String, (PathBuf, Snapshot)>,
    /// Each part's stream sequence (0 when unknown).
    seqs: BTreeMap<String, u64>,
    /// Messages not yet acknowledged.
    unacked: Vec<jetstream::Message>,
    /// Snapshots refused for this epoch, by host.
    rejected: BTreeMap<String, String>,
    first: Instant,
    /// (revision, hosts) of the last report.
    reported: Option<(u64, Vec<String>)>,
}

/// The snapshot stream's configuration with `limits`.
fn stream_config(limits: Limits) -> jetstream::stream::Config {
    jetstream::stream::Config {
        name: crate::STREAM.into(),
        subjects: vec![format!("{}.>", crate::SUBJECT_PREFIX)],
        storage: jetstream::stream::StorageType::File,
        // JetStream refuses a de-duplication window longer than the stream's max age.
        duplicate_window: crate::DEDUPE_WINDOW.min(limits.max_age),
        max_message_size: crate::MAX_PAYLOAD as i32,
        max_age: limits.max_age,
        max_bytes: limits.max_bytes,
        discard: jetstream::stream::DiscardPolicy::Old,
        ..Default::default()
    }
}

/// Create (or find) the stream (its limits updated to `limits` when they differ), the durable
/// consumer, the reports bucket and the agents' lease stream.
pub async fn setup(
    js: &jetstream::Context,
    ack_wait: Duration,
    limits: Limits,
) -> Result<
    (
        jetstream::consumer::Consumer<pull::Config>,
        jetstream::kv::Store,
    ),
    Error,
> {
    let want = stream_config(limits);
    let mut stream = js
        .get_or_create_stream(want.clone())
        .await
        .map_err(|e| broker("stream", e))?;
    // A stream made by an earlier version (no limits, `netsift.snapshots.*`) or other flags.
    let have = &stream.cached_info().config;
    if (
        &have.subjects,
        have.max_age,
        have.max_bytes,
        have.duplicate_window,
        have.discard,
    ) != (
        &want.subjects,
        want.max_age,
        want.max_bytes,
        want.duplicate_window,
        want.discard,
    ) {
        let merged = jetstream::stream::Config {
            subjects: want.subjects.clone(),
            max_age: want.max_age,
            max_bytes: want.max_bytes,
            duplicate_window: want.duplicate_window,
            discard: want.discard,
            ..have.clone()
        };
        js.update_stream(merged)
            .await
            .map_err(|e| broker("updating the stream's limits", e))?;
        stream = js
            .get_stream(crate::STREAM)
            .await
            .map_err(|e| broker("stream", e))?;
    }
    // Agents' leases (`crate::lease`): one record per host, gone after LEASE_TTL unless renewed.
    js.get_or_create_stream(jetstream::stream::Config {
        name: crate::AGENTS_STREAM.into(),
        subjects: vec![format!("{}.>", crate::AGENTS_PREFIX)],
        storage: jetstream::stream::StorageType::File,
        max_messages_per_subject: 1,
        max_age: crate::LEASE_TTL,
        duplicate_window: crate::LEASE_TTL,
        allow_direct: true,
        ..Default::default()
    })
    .await
    .map_err(|e| broker("lease stream", e))?;
    let consumer = stream
        .get_or_create_consumer(
            crate::CONSUMER,
            pull::Config {
                durable_name: Some(crate::CONSUMER.into()),
                ack_policy: jetstream::consumer::AckPolicy::Explicit,
                ack_wait,
                max_ack_pending: 100_000,
                ..Default::default()
            },
        )
        .await
        .map_err(|e| broker("consumer", e))?;
    // The bucket's stream made directly with the key-value layout (async-nats's
    // `create_key_value` first asks `$JS.API.INFO` in a form nats-server 2.9 does not answer).
    js.get_or_create_stream(jetstream::stream::Config {
        name: format!("KV_{}", crate::REPORTS_BUCKET),
        subjects: vec![format!("$KV.{}.>", crate::REPORTS_BUCKET)],
        max_messages_per_subject: 8,
        storage: jetstream::stream::StorageType::File,
        max_message_size: crate::MAX_PAYLOAD as i32,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        discard: jetstream::stream::DiscardPolicy::New,
        ..Default::default()
    })
    .await
    .map_err(|e| broker("reports bucket", e))?;
    let kv = js
        .get_key_value(crate::REPORTS_BUCKET)
        .await
        .map_err(|e| broker("reports bucket", e))?;
    Ok((consumer, kv))
}

/// An epoch's last stored report, as far as the controller needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Done {
    revision: u64,
    hosts: Vec<String>,
    /// Host to stream sequence of the snapshot merged (reports of this version on).
    sequences: BTreeMap<String, u64>,
}

/// The reports the bucket holds, by epoch.
async fn stored(kv: &jetstream::kv::Store) -> Result<BTreeMap<u64, Done>, Error> {
    let mut out = BTreeMap::new();
    let mut keys = kv.keys().await.map_err(|e| broker("reports bucket", e))?;
    while let Some(k) = keys.next().await {
        let k = k.map_err(|e| broker("reports bucket", e))?;
        let Ok(epoch) = k.parse::<u64>() else {
            continue;
        };
        let Some(v) = kv.get(&k).await.map_err(|e| broker("reports bucket", e))? else {
            continue;
        };
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&v) else {
            continue;
        };
        let revision = v["revision"].as_u64().unwrap_or(1);
        let hosts = v["hosts"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|h| h.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let sequences = v["sequences"]
            .as_object()
            .map(|o| {
                o.iter()
                    .filter_map(|(h, s)| Some((h.clone(), s.as_u64()?)))
                    .collect()
            })
            .unwrap_or_default();
        out.insert(
            epoch,
            Done {
                revision,
                hosts,
                sequences,
            },
        );
    }
    Ok(out)
}

/// Consume, merge and report until `opts.epochs` are reported or `stop` is set. `on_report`
/// sees every report published.
pub async fn run(
    js: &jetstream::Context,
    opts: &Options,
    merge: &mut Merger<'_>,
    on_report: &mut dyn FnMut(&NetReport),
    stop: &dyn Fn() -> bool,
) -> Result<Stats, Error> {
    // A held message is kept alive with progress acknowledgements; ack_wait only matters when
    // this controller dies: then its successor gets the messages after ack_wait.
    let ack_wait = opts.deadline + Duration::from_secs(2);
    let (consumer, kv) = setup(js, ack_wait, opts.limits).await?;
    let stream = js
        .get_stream(crate::STREAM)
        .await
        .map_err(|e| broker("stream", e))?;
    let client = js.client();
    let mut done = stored(&kv).await?;
    let mut stats = Stats::default();
    let mut held: BTreeMap<u64, Held> = BTreeMap::new();
    // Instances' shape (algorithm, kind, side per instance) is pinned by the first snapshot
    // with instances that agrees with `opts.expected` and restores (an expected configuration
    // of an idle epoch has none to compare with).
    let mut reference: (PathBuf, Snapshot) = opts.expected.clone();
    // Refusals of epochs not held (or whose epoch could not be read: `None`): named in the
    // report of their epoch, or the next one.
    let mut unplaced: Vec<(Option<u64>, Rejected)> = vec![];
    let mut known: BTreeSet<String> = match &opts.hosts {
        Hosts::List(l) => l.clone(),
        Hosts::FromStream => BTreeSet::new(),
    };
    let mut last_progress = Instant::now();
    let mut msgs = None;
    let mut last_known = None::<Instant>;
    loop {
        if stop() {
            break;
        }
        if let Some(n) = opts.epochs {
            if done.len() as u64 >= n && held.values().all(|h| h.reported.is_some()) {
                break;
            }
        }
        if matches!(opts.hosts, Hosts::FromStream)
            && last_known.is_none_or(|t: Instant| t.elapsed() > Duration::from_secs(1))
        {
            known.extend(stream_hosts(js).await);
            last_known = Some(Instant::now());
        }
        // The next snapshot as soon as it is delivered (the stream keeps a pull request
        // outstanding), or nothing within TICK: then the deadlines and the stop flag are
        // looked at. An epoch is reported right after its last expected host's snapshot.
        if msgs.is_none() {
            match pull(&consumer).await {
                Ok(m) => msgs = Some(m),
                Err(e) => {
                    tracing::warn!("fetching snapshots: {e}");
                    tokio::time::sleep(TICK).await;
                }
            }
        }
        if let Some(stream_of) = msgs.as_mut() {
            match tokio::time::timeout(TICK, stream_of.next()).await {
                Ok(Some(Ok(m))) => {
                    let ctx = Ctx {
                        opts,
                        stream: &stream,
                        done: &done,
                    };
                    accept(
                        m,
                        &ctx,
                        &mut held,
                        &mut reference,
                        &mut unplaced,
                        &mut stats,
                    )
                    .await
                }
                Ok(Some(Err(e))) => {
                    // Missed heartbeats (a broker restart) and the like: pull anew.
                    tracing::warn!("fetching snapshots: {e}");
                    msgs = None;
                }
                Ok(None) => msgs = None,
                Err(_) => {}
            }
        }
        if matches!(opts.hosts, Hosts::FromStream) {
            for h in held.values() {
                known.extend(h.parts.keys().cloned());
            }
        }
        // Report what is complete, past its deadline, or corrected.
        let ready: Vec<u64> = held
            .iter()
            .filter(|(_, h)| match &h.reported {
                None => {
                    known.iter().all(|k| h.parts.contains_key(k))
                        || h.first.elapsed() >= opts.deadline
                }
                Some((_, hosts)) => hosts.len() != h.parts.len(),
            })
            .map(|(&e, _)| e)
            .collect();
        for e in ready {
            report(
                e,
                &mut held,
                &mut done,
                &known,
                &mut unplaced,
                merge,
                &kv,
                &client,
                &mut stats,
                on_report,
            )
            .await;
        }
        // Keep the unreported and the last `keep` reported epochs.
        let reported: Vec<u64> = held
            .iter()
            .filter(|(_, h)| h.reported.is_some())
            .map(|(&e, _)| e)
            .collect();
        for e in reported
            .iter()
            .take(reported.len().saturating_sub(opts.keep.max(1)))
        {
            held.remove(e);
        }
        if last_progress.elapsed() > ack_wait / 3 {
            for h in held.values() {
                for m in &h.unacked {
                    let _ = m.ack_with(AckKind::Progress).await;
                }
            }
            last_progress = Instant::now();
        }
    }
    Ok(stats)
}

/// How long the controller waits for a snapshot before it looks at deadlines and the stop
/// flag.
const TICK: Duration = Duration::from_millis(100);

/// The consumer's messages as they come: batches of at most 64 snapshots and 64 MB (the
/// server's `max_pending` of the connection holds two such), refilled as they are consumed.
async fn pull(
    consumer: &jetstream::consumer::Consumer<pull::Config>,
) -> Result<pull::Stream, Error> {
    consumer
        .stream()
        .max_messages_per_batch(64)
        .max_bytes_per_batch(crate::MAX_PAYLOAD)
        .heartbeat(Duration::from_secs(5))
        .expires(Duration::from_secs(30))
        .messages()
        .await
        .map_err(|e| broker("consumer", e))
}

/// The hosts with a subject in the stream.
async fn stream_hosts(js: &jetstream::Context) -> Vec<String> {
    let Ok(stream) = js.get_stream(crate::STREAM).await else {
        return vec![];
    };
    let Ok(mut subjects) = stream
        .info_with_subjects(format!("{}.>", crate::SUBJECT_PREFIX))
        .await
    else {
        return vec![];
    };
    let mut out = vec![];
    while let Some(Ok((s, _))) = subjects.next().await {
        if let Some(h) = s.strip_prefix(&format!("{}.", crate::SUBJECT_PREFIX)) {
            out.push(h.to_string());
        }
    }
    out
}

/// Refuse `m`: acknowledged as terminated (never delivered again, so a forged snapshot cannot
/// stop a restarted controller either), counted, logged, and named in the report of `epoch`
/// (when it could be read; otherwise in the next report).
#[allow(clippy::too_many_arguments)]
async fn reject(
    m: &jetstream::Message,
    host: &str,
    epoch: Option<u64>,
    held: &mut BTreeMap<u64, Held>,
    unplaced: &mut Vec<(Option<u64>, Rejected)>,
    counter: &mut u64,
    why: String,
) {
    tracing::warn!("rejected snapshot on {}: {why}", m.subject);
    *counter += 1;
    let _ = m.ack_with(AckKind::Term).await;
    match epoch.and_then(|e| held.get_mut(&e)) {
        Some(h) => {
            h.rejected.insert(host.to_string(), why);
        }
        // Bounded: a host that floods junk is named once per report, up to 64 refusals.
        None if unplaced.len() < 64 => unplaced.push((
            epoch,
            Rejected {
                host: host.to_string(),
                reason: why,
            },
        )),
        None => {}
    }
}

/// What [`accept`] reads besides the message.
struct Ctx<'a> {
    opts: &'a Options,
    stream: &'a jetstream::stream::Stream,
    done: &'a BTreeMap<u64, Done>,
}

/// The host named by `id` (`<host>.<epoch>.<checksum>`, [`crate::message_id`]) if it is well
/// formed.
fn id_host(id: &str) -> Option<&str> {
    let mut parts = id.rsplitn(3, '.');
    let (_sum, _epoch, host) = (parts.next()?, parts.next()?, parts.next()?);
    Some(host)
}

/// Why a snapshot is refused: which counter, and the reason.
enum Refusal {
    Malformed(String),
    Host(String),
    Incompatible(String),
}

/// The checks of an arriving snapshot `s` (or why it did not decode) on `subject_host`'s
/// subject with message id `id`, against the expected configuration (`reference`).
fn check(
    s: &Result<Snapshot, snapshot::FormatError>,
    payload: &[u8],
    subject_host: &str,
    id: &str,
    ctx: &Ctx<'_>,
    reference: &(PathBuf, Snapshot),
    name: &std::path::Path,
) -> Result<(), Refusal> {
    let s = s.as_ref().map_err(|e| Refusal::Malformed(e.to_string()))?;
    // The message id must be the one this snapshot's own agent gives it: its subject's host,
    // its epoch, its checksum. Another id is a forged one (or a foreign publisher's).
    let want = crate::message_id(subject_host, s.epoch.index, payload);
    if id != want {
        return Err(Refusal::Host(match id_host(id) {
            Some(h) if h != subject_host => {
                format!("message id {id:?} names host {h:?}, its subject {subject_host:?}")
            }
            _ => format!("message id {id:?}, its content's is {want:?}"),
        }));
    }
    if s.host != subject_host {
        return Err(Refusal::Host(format!(
            "it names host {:?}, its subject {subject_host:?}",
            s.host
        )));
    }
    if let Hosts::List(l) = &ctx.opts.hosts {
        if !l.contains(&s.host) {
            return Err(Refusal::Host(format!(
                "host {:?} is not in --hosts",
                s.host
            )));
        }
    }
    snapshot::check_compatible(&reference.0, &reference.1, name, s)
        .map_err(Refusal::Incompatible)?;
    snapshot::validate(s, ctx.opts.max_memory)
        .map_err(|e| Refusal::Malformed(format!("{}: {e}", name.display())))
}

async fn accept(
    m: jetstream::Message,
    ctx: &Ctx<'_>,
    held: &mut BTreeMap<u64, Held>,
    reference: &mut (PathBuf, Snapshot),
    unplaced: &mut Vec<(Option<u64>, Rejected)>,
    stats: &mut Stats,
) {
    let subject_host = m
        .subject
        .strip_prefix(&format!("{}.", crate::SUBJECT_PREFIX))
        .unwrap_or("")
        .to_string();
    let id = m
        .headers
        .as_ref()
        .and_then(|h| h.get(async_nats::header::NATS_MESSAGE_ID))
        .map(|v| v.as_str().to_string())
        .unwrap_or_default();
    let decoded = snapshot::decode(&m.payload);
    let index = decoded.as_ref().ok().map(|s| s.epoch.index);
    let name = PathBuf::from(format!("{}/{}", m.subject, index.unwrap_or(0)));
    if let Err(r) = check(
        &decoded,
        &m.payload,
        &subject_host,
        &id,
        ctx,
        reference,
        &name,
    ) {
        let (counter, why) = match r {
            Refusal::Malformed(w) => (&mut stats.rejected_malformed, w),
            Refusal::Host(w) => (&mut stats.rejected_host, w),
            Refusal::Incompatible(w) => (&mut stats.rejected_incompatible, w),
        };
        return reject(&m, &subject_host, index, held, unplaced, counter, why).await;
    }
    let Ok(s) = decoded else { return };
    if reference.1.is_idle() && !s.is_idle() {
        *reference = (name.clone(), s.clone());
    }
    let epoch = s.epoch.index;
    if !held.contains_key(&epoch) {
        if let Some(d) = ctx.done.get(&epoch) {
            if d.hosts.contains(&s.host) {
                stats.duplicates += 1;
                let _ = m.ack().await;
                return;
            }
            // Reported by an earlier run of the controller (or dropped from memory): its
            // parts are fetched back from the stream to be corrected, within the last `keep`.
            let newest = ctx.done.keys().next_back().copied().unwrap_or(epoch);
            let restored = if epoch + ctx.opts.keep as u64 > newest {
                restore(ctx, epoch.saturating_sub(1), held).await;
                restore(ctx, epoch, held).await
            } else {
                false
            };
            if !restored {
                let why = format!(
                    "epoch {epoch} was reported and its snapshots cannot be restored (late by \
                     more than the last {} epochs, or gone from the stream)",
                    ctx.opts.keep
                );
                reject(
                    &m,
                    &subject_host,
                    Some(epoch),
                    held,
                    unplaced,
                    &mut stats.rejected_late,
                    why,
                )
                .await;
                return;
            }
        }
    }
    let seq = m.info().map(|i| i.stream_sequence).unwrap_or(0);
    let h = held.entry(epoch).or_insert_with(|| Held {
        parts: BTreeMap::new(),
        seqs: BTreeMap::new(),
        unacked: vec![],
        rejected: BTreeMap::new(),
        first: Instant::now(),
        reported: None,
    });
    if h.parts.contains_key(&s.host) {
        stats.duplicates += 1;
        if h.reported.is_some() {
            let _ = m.ack().await;
        } else {
            // A redelivery of a held part: keep the newest handle to acknowledge.
            h.unacked.push(m);
        }
        return;
    }
    stats.accepted += 1;
    h.seqs.insert(s.host.clone(), seq);
    h.parts.insert(s.host.clone(), (name, s));
    h.unacked.push(m);
}

/// Bring a reported epoch back into memory from its stored report's stream sequences (a
/// controller restarted, or the epoch left memory): true when it is held afterwards.
async fn restore(ctx: &Ctx<'_>, epoch: u64, held: &mut BTreeMap<u64, Held>) -> bool {
    if held.contains_key(&epoch) {
        return true;
    }
    let Some(d) = ctx.done.get(&epoch) else {
        return false;
    };
    if d.sequences.len() != d.hosts.len() {
        return false;
    }
    let mut parts = BTreeMap::new();
    for (host, &seq) in &d.sequences {
        let got = ctx.stream.get_raw_message(seq).await;
        let s = match got.map(|m| snapshot::decode(&m.payload)) {
            Ok(Ok(s)) if &s.host == host && s.epoch.index == epoch => s,
            Ok(Ok(_)) => {
                tracing::warn!("epoch {epoch}: stream message {seq} is not {host}'s snapshot");
                return false;
            }
            Ok(Err(e)) => {
                tracing::warn!("epoch {epoch}: stream message {seq}: {e}");
                return false;
            }
            Err(e) => {
                tracing::warn!("epoch {epoch}: fetching stream message {seq}: {e}");
                return false;
            }
        };
        let name = PathBuf::from(format!("{}/{epoch}", crate::subject(host)));
        parts.insert(host.clone(), (name, s));
    }
    tracing::info!(
        "epoch {epoch}: restored from the stream (revision {})",
        d.revision
    );
    held.insert(
        epoch,
        Held {
            parts,
            seqs: d.sequences.clone(),
            unacked: vec![],
            rejected: BTreeMap::new(),
            first: Instant::now(),
            reported: Some((d.revision, d.hosts.clone())),
        },
    );
    true
}

#[allow(clippy::too_many_arguments)]
async fn report(
    epoch: u64,
    held: &mut BTreeMap<u64, Held>,
    done: &mut BTreeMap<u64, Done>,
    known: &BTreeSet<String>,
    unplaced: &mut Vec<(Option<u64>, Rejected)>,
    merge: &mut Merger<'_>,
    kv: &jetstream::kv::Store,
    client: &async_nats::Client,
    stats: &mut Stats,
    on_report: &mut dyn FnMut(&NetReport),
) {
    let prev: Vec<(PathBuf, Snapshot)> = epoch
        .checked_sub(1)
        .and_then(|p| held.get(&p))
        .map(|h| h.parts.values().cloned().collect())
        .unwrap_or_default();
    let Some(h) = held.get_mut(&epoch) else {
        return;
    };
    let hosts: Vec<String> = h.parts.keys().cloned().collect();
    let last = h
        .reported
        .clone()
        .or_else(|| done.get(&epoch).map(|d| (d.revision, d.hosts.clone())));
    let revision = match &last {
        // Stored already with these hosts by a controller that died before acknowledging.
        Some((r, stored)) if *stored == hosts => {
            h.reported = Some((*r, hosts));
            ack_all(h).await;
            return;
        }
        Some((r, _)) => r + 1,
        None => 1,
    };
    let cur: Vec<(PathBuf, Snapshot)> = h.parts.values().cloned().collect();
    let value = match merge(epoch, &prev, &cur) {
        Ok(v) => v,
        Err(e) => {
            tracing::error!("epoch {epoch}: {e}");
            stats.merge_failures += 1;
            h.reported = Some((revision, hosts));
            ack_all(h).await;
            return;
        }
    };
    // This epoch's refusals, and those of epochs never reported (or unknown) before it.
    let mut rejected: Vec<Rejected> = h
        .rejected
        .iter()
        .map(|(host, reason)| Rejected {
            host: host.clone(),
            reason: reason.clone(),
        })
        .collect();
    let (now, later): (Vec<_>, Vec<_>) = std::mem::take(unplaced)
        .into_iter()
        .partition(|(e, _)| e.is_none_or(|e| e <= epoch));
    *unplaced = later;
    rejected.extend(now.into_iter().map(|(_, r)| r));
    let partial = h
        .parts
        .iter()
        .filter(|(_, (_, s))| s.epoch.partial)
        .map(|(host, _)| host.clone())
        .collect();
    let r = NetReport {
        epoch,
        revision,
        rejected,
        partial,
        missing: known
            .iter()
            .filter(|k| !h.parts.contains_key(*k))
            .cloned()
            .collect(),
        hosts: hosts.clone(),
        sequences: h.seqs.clone(),
        report: value,
    };
    let bytes = match serde_json::to_vec(&r) {
        Ok(b) => b,
        Err(e) => {
            tracing::error!("epoch {epoch}: report: {e}");
            return;
        }
    };
    if let Err(e) = kv.put(epoch.to_string(), bytes.clone().into()).await {
        // Not acknowledged: reported again (to the bucket) on the next round.
        tracing::error!("epoch {epoch}: storing the report: {e}");
        return;
    }
    if let Err(e) = client.publish(crate::REPORTS_SUBJECT, bytes.into()).await {
        tracing::warn!("epoch {epoch}: publishing the report: {e}");
    }
    if revision == 1 {
        stats.reports += 1;
    } else {
        stats.corrections += 1;
    }
    on_report(&r);
    done.insert(
        epoch,
        Done {
            revision,
            hosts: hosts.clone(),
            sequences: h.seqs.clone(),
        },
    );
    h.reported = Some((revision, hosts));
    ack_all(h).await;
}

async fn ack_all(h: &mut Held) {
    for m in h.unacked.drain(..) {
        if let Err(e) = m.ack().await {
            tracing::warn!("acknowledging {}: {e}", m.subject);
        }
    }
}
