//! A run's side of snapshots (`crates/snapshot`): what of a [`RunConfig`] must match for a merge,
//! and the snapshot of one answered epoch (`--snapshots DIR --host ID`), written by the answer
//! thread where it holds the epoch's merged states.

use algo::{Algorithm, Task};
use key::KeyKind;
use snapshot::{EpochSpan, FastPart, InstanceState, Snapshot};
use truth::EpochTruth;

use crate::config::RunConfig;
// The counter of unwritten snapshots is configuration data (`RunConfig::unwritten`): it lives
// in `config`, below every module that writes snapshots, and keeps its old path here.
pub use crate::config::{Unwritten, UnwrittenLog};
use crate::instance::Measure;
use crate::report::{EpochCover, PartialReason};

/// Fields of a run configuration that are this host's business and may differ between the
/// snapshots of one merge: input, batching, report size, memory budget, threads, truth,
/// the accelerator and its mode (the state of every order-independent algorithm is the same
/// behind it: ARCHITECTURE.md, aggevict), where snapshots go and the alert rules. Every other
/// field, present or added later, must match (a deny list, so a new parameter is checked unless
/// named here).
const HOST_LOCAL: &[&str] = &[
    "trace",
    "format",
    "batch",
    "listed",
    "max_memory",
    "workers",
    "truth",
    "accel",
    "agg_evict",
    "agg_mode",
    "agg_window",
    "snapshots",
    "host",
    "alert",
];

/// `cfg` as TOML can hold it: TOML integers are i64, and a seed (any u64) or a memory budget
/// may not fit. The seed travels as `Snapshot::seed` (and as a string in `params`), the budget
/// is the host's business, and an epoch past i64::MAX packets or ms is one that never ends
/// either way.
fn toml_safe(cfg: &RunConfig) -> RunConfig {
    let big = i64::MAX as u64;
    RunConfig {
        seed: 0,
        max_memory: None,
        epoch_packets: cfg.epoch_packets.map(|n| n.min(big)),
        epoch_ms: cfg.epoch_ms.map(|n| n.min(big)),
        ..cfg.clone()
    }
}

/// The parameters of `cfg` that must match for a merge, as canonical TOML (keys sorted:
/// `toml::Table` is ordered); the seed as a decimal string (TOML has no u64).
pub fn merge_params(cfg: &RunConfig) -> Result<String, String> {
    let mut t =
        toml::Table::try_from(toml_safe(cfg)).map_err(|e| format!("run configuration: {e}"))?;
    for k in HOST_LOCAL {
        t.remove(*k);
    }
    t.insert("seed".into(), toml::Value::String(cfg.seed.to_string()));
    toml::to_string(&t).map_err(|e| format!("run configuration: {e}"))
}

/// The whole configuration as TOML (what `netsift merge` rebuilds the run's tasks from), its
/// seed 0: the seed is `Snapshot::seed`.
pub fn config_text(cfg: &RunConfig) -> Result<String, String> {
    toml::to_string(&toml_safe(cfg)).map_err(|e| format!("run configuration: {e}"))
}

/// The snapshot of an answered epoch: `states` by instance, `truth` per key kind (its totals
/// and time span), the fast path's part per key kind (`fast`, empty without a fast path).
#[allow(clippy::too_many_arguments)]
pub(crate) fn snapshot_of(
    cfg: &RunConfig,
    host: &str,
    kinds: &[KeyKind],
    measures: &[Measure],
    states: &[Box<dyn Algorithm>],
    truth: &[EpochTruth],
    cover: &EpochCover,
    fast: Vec<FastPart>,
) -> Result<Snapshot, String> {
    let params = merge_params(cfg)?;
    let mut instances = Vec::with_capacity(states.len());
    for (i, a) in states.iter().enumerate() {
        let m = measures
            .iter()
            .find(|m| m.instance == i)
            .ok_or_else(|| format!("instance {i} serves no measure"))?;
        let side = if m.spec.task == Task::Ddos {
            "dst"
        } else {
            "src"
        };
        instances.push(InstanceState {
            algorithm: a.name().to_string(),
            kind: m.kind.name().to_string(),
            side: side.to_string(),
            params: toml::to_string(&m.spec.params).map_err(|e| e.to_string())?,
            state: snapshot::save_instance(a.as_ref())?,
        });
    }
    Ok(Snapshot {
        host: host.to_string(),
        epoch: EpochSpan {
            partial: cover.partial(),
            started_mid: cover.reasons.contains(&PartialReason::StartedMidEpoch),
            interrupted: cover.reasons.contains(&PartialReason::Interrupted),
            covered_from_ns: cover.span.start_ns,
            covered_to_ns: cover.span.end_ns,
            ..span_of(truth.first())
        },
        seed: cfg.seed,
        kinds: kinds.iter().map(|k| k.name().to_string()).collect(),
        truth: cfg.truth,
        params_hash: snapshot::params_hash(&params),
        params,
        config: config_text(cfg)?,
        instances,
        fast,
    })
}

/// An epoch's span from its first key kind's truth.
pub(crate) fn span_of(t: Option<&EpochTruth>) -> EpochSpan {
    t.map_or_else(EpochSpan::default, |t| EpochSpan {
        index: t.index,
        first_ns: t.first_ns,
        last_ns: t.last_ns,
        packets: t.packets,
        bytes: t.bytes,
        ..EpochSpan::default()
    })
}

/// Write the epoch's snapshot when the run asks for them (`cfg.snapshots`): the answer thread's
/// one call. Returns the file written.
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_epoch(
    cfg: &RunConfig,
    kinds: &[KeyKind],
    measures: &[Measure],
    states: &[Box<dyn Algorithm>],
    truth: &[EpochTruth],
    cover: &EpochCover,
    fast: Vec<FastPart>,
) -> Result<Option<std::path::PathBuf>, String> {
    let Some(dir) = &cfg.snapshots else {
        return Ok(None);
    };
    let host = cfg.host.as_deref().unwrap_or("local");
    let s = snapshot_of(cfg, host, kinds, measures, states, truth, cover, fast)?;
    store(cfg, dir, &s)
}

/// The snapshot every host running `cfg` agrees with, without traffic (an idle epoch's: seed,
/// parameters, configuration and key kinds, no instance): what a controller given the
/// deployment's configuration checks arriving snapshots against (`Runner::reference_snapshot`).
pub(crate) fn reference(
    cfg: &RunConfig,
    kinds: &[KeyKind],
    host: &str,
) -> Result<Snapshot, String> {
    snapshot_of(
        cfg,
        host,
        kinds,
        &[],
        &[],
        &[],
        &EpochCover::default(),
        vec![],
    )
}

/// Write an idle time epoch's snapshot (`Snapshot::is_idle`: no packet, no instance) when the
/// run asks for snapshots: a host whose link was quiet for epoch `index` says so, and a
/// controller merging by epoch counts it present instead of missing.
pub(crate) fn write_idle(
    cfg: &RunConfig,
    kinds: &[KeyKind],
    index: u64,
    cover: &EpochCover,
) -> Result<(), String> {
    let Some(dir) = &cfg.snapshots else {
        return Ok(());
    };
    let host = cfg.host.as_deref().unwrap_or("local");
    let mut s = snapshot_of(cfg, host, kinds, &[], &[], &[], cover, vec![])?;
    s.epoch.index = index;
    store(cfg, dir, &s).map(|_| ())
}

/// Write `s` into `dir`. A failure ends the run (`Err`) unless the run counts its unwritten
/// snapshots (`RunConfig::unwritten`, the agent): then the epoch's snapshot is dropped, counted,
/// a warning names the epoch and the reason, and the run goes on (`Ok(None)`). The policy on a
/// full disk: the NEW epoch is dropped, what the spool already holds is kept (it leaves only
/// when the broker acknowledges it, or by the spool's own bounds, oldest first); a later epoch
/// is written as soon as space has come back.
fn store(cfg: &RunConfig, dir: &str, s: &Snapshot) -> Result<Option<std::path::PathBuf>, String> {
    match snapshot::write(std::path::Path::new(dir), s) {
        Ok(p) => Ok(Some(p)),
        Err(e) => match &cfg.unwritten {
            None => Err(e.to_string()),
            Some(u) => {
                u.add(s.epoch.index, &e);
                let why = if e.kind() == std::io::ErrorKind::StorageFull {
                    " (disk full: this epoch is dropped, the spool keeps what it holds)"
                } else {
                    ""
                };
                tracing::warn!(
                    "epoch {}: snapshot not written, dropped{why}: {e}; the run goes on",
                    s.epoch.index
                );
                Ok(None)
            }
        },
    }
}
