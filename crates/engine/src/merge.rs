//! The network-wide merge (SketchVisor section 5), as a run: hosts' epoch snapshots
//! (`netsift run --snapshots DIR --host ID`) read and checked ([`Snapshots::read`]), each
//! epoch's states and fast-path summaries merged (`snapshot::merge_epoch`, recovery by
//! `recover`), and the run's tasks answered for the whole network through `run`'s own runner
//! (`measure::Runner::replay_from`: same answers, same scoring, same report), scored against the
//! exact truth of the `truth` traces read as `run` reads them: several merged by capture time
//! (`trace::merge_by_time`, as `mergecap`), cut on the hosts' time grid, each epoch checked
//! against the hosts' packet and byte counts (issue 34: a truth read file after file scored the
//! wrong epochs, silently). `netsift merge`, `netsift controller` ([`epoch_report`], against
//! [`expected`]) and `demo network` consume it as [`crate::Run::merge`]'s events.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use measure::report::{count, Coverage, HostEpoch, PartialReason};
use measure::{EpochReport, RunConfig, Runner};
use snapshot::{EpochSpan, Snapshot};
use trace::Capture;
use truth::EpochSpec;
use wire::Class;

use crate::emit::Emit;
use crate::packet::{each_packet, each_packet_by_time, Packet};
use crate::{stop_if_asked, until_stop, Control, Event, Outcome, Sink};

/// What a merge reads: hosts' snapshots (`files` name them in errors, one per snapshot), how
/// the fast path's part is recovered, and the traces whose exact truth the answers are scored
/// against (none: answers only).
pub struct Snapshots {
    pub files: Vec<PathBuf>,
    pub snaps: Vec<Snapshot>,
    pub recover: visor::Method,
    pub truth: Vec<String>,
    /// The files [`Snapshots::read`] left out, each `FILE: why`: the finished report's notes
    /// name them (`rejected snapshot FILE: why`).
    pub rejected: Vec<String>,
}

impl Snapshots {
    /// Hosts' snapshots as given, checked by the caller (the controller checks each against
    /// its expected configuration as it arrives): recovery by SketchVisor, no truth.
    pub fn of(files: Vec<PathBuf>, snaps: Vec<Snapshot>) -> Snapshots {
        Snapshots {
            files,
            snaps,
            recover: visor::Method::Sketchvisor,
            truth: vec![],
            rejected: vec![],
        }
    }

    /// Read snapshot files and check them (issue 33: a well-framed snapshot may carry forged
    /// states): each is decoded and validated within `max_memory` (`snapshot::validate`); a bad
    /// one is given to `rejected` (file, why) and left out, the others merged and answered (the
    /// caller then fails naming what was left out). Refused: no snapshot left, or snapshots that
    /// disagree (`snapshot::check_agree`; with one rejected, a host's epoch is missing, so only
    /// the pairwise `snapshot::check_compatible`).
    pub fn read(
        paths: Vec<PathBuf>,
        max_memory: Option<u64>,
        rejected: &mut dyn FnMut(&Path, &str),
    ) -> Result<Snapshots> {
        let mut s = Snapshots::of(vec![], vec![]);
        for f in paths {
            let checked = snapshot::read(&f)
                .map_err(|e| e.reason)
                .and_then(|s| snapshot::validate(&s, max_memory).map(|_| s));
            match checked {
                Ok(snap) => {
                    s.files.push(f);
                    s.snaps.push(snap);
                }
                Err(reason) => {
                    rejected(&f, &reason);
                    s.rejected.push(format!("{}: {reason}", f.display()));
                }
            }
        }
        if s.snaps.is_empty() {
            bail!("no snapshot to merge: {}", s.rejected.join("; "));
        }
        if s.rejected.is_empty() {
            snapshot::check_agree(&s.files, &s.snaps).map_err(anyhow::Error::msg)?;
        } else {
            for (f, snap) in s.files.iter().zip(&s.snaps).skip(1) {
                snapshot::check_compatible(&s.files[0], &s.snaps[0], f, snap)
                    .map_err(anyhow::Error::msg)?;
            }
        }
        Ok(s)
    }
}

/// The merge's run configuration: the first snapshot's, with what is this process's business
/// rather than the hosts' (one worker, no snapshots of its own, the truth when given).
pub(crate) fn config(s: &Snapshots) -> Result<RunConfig> {
    let (Some(first), Some(file)) = (s.snaps.first(), s.files.first()) else {
        bail!("no snapshot given");
    };
    if s.files.len() != s.snaps.len() {
        bail!(
            "{} snapshot files named for {} snapshots",
            s.files.len(),
            s.snaps.len()
        );
    }
    let mut cfg = RunConfig::from_toml(&first.config)
        .with_context(|| format!("snapshot {}: its run configuration", file.display()))?;
    // The seed travels beside the TOML, which cannot hold every u64.
    cfg.seed = first.seed;
    // One plane answers the merged states; this process's business, not the hosts'.
    cfg.workers = 1;
    cfg.snapshots = None;
    cfg.host = None;
    cfg.trace = None;
    cfg.max_memory = None;
    cfg.truth = !s.truth.is_empty();
    // The hosts' fast paths measured their overload; this process only answers (the merged
    // part is recovered by `recover` on its answer thread): no FIFO model of its own.
    cfg.sketchvisor.normal_capacity = None;
    cfg.sketchvisor.recover = s.recover;
    Ok(cfg)
}

/// The network-wide run of `s` (checked by `snapshot::check_agree`, or one by one by
/// `snapshot::check_compatible`: `netsift controller`): the runner built from the first
/// snapshot's configuration (`cfg`, [`config`]) answers each epoch's merged states (fast-path
/// parts recovered on its answer thread), scored against the exact truth of the `truth` traces
/// when given. Every epoch is answered and checked against the truth before the first is
/// emitted: a truth that is not the snapshots' is refused with no report.
pub(crate) fn run(
    cfg: RunConfig,
    s: Snapshots,
    control: &Control,
    sink: &mut Sink<'_>,
) -> Result<Outcome> {
    let Snapshots {
        files,
        snaps,
        recover,
        truth,
        rejected,
    } = s;
    let truth = &truth[..];
    // Epoch index to the snapshots of it, in the order given.
    let mut epochs: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for (i, s) in snaps.iter().enumerate() {
        epochs.entry(s.epoch.index).or_default().push(i);
    }
    let tunnel = cfg.tunnel;
    let hosts: Vec<&str> = {
        let mut h: Vec<&str> = snaps.iter().map(|s| s.host.as_str()).collect();
        h.sort();
        h.dedup();
        h
    };
    let name = if truth.is_empty() {
        format!(
            "merge of {} ({})",
            count(hosts.len() as u64, "host", "hosts"),
            hosts.join(", ")
        )
    } else {
        truth.join(" + ")
    };
    let spec = cfg.epoch()?;
    // Opened before any work: an unreadable or unmergeable truth is refused first.
    let (caps, concatenated) = open_truth(truth, spec)?;
    let grid = Grid::of(&snaps, spec);
    let mut runner = Runner::new(cfg, &name)?;
    if let Some(origin) = grid.origin().filter(|_| !truth.is_empty()) {
        // Time epochs on the hosts' grid (a live agent's Unix-time grid, or the hosts' common
        // first packet), so that the truth's epoch i is the hosts' epoch i.
        runner.align_epochs(origin);
    }
    if concatenated {
        runner.add_note(
            "the --truth key traces carry no capture times: read one after the other (each \
             packet-count epoch's truth is checked against the snapshots' packet counts)"
                .into(),
        );
    }
    runner.add_note(format!(
        "merged {} of {} ({}), epochs {:?}, recovery {}",
        count(files.len() as u64, "snapshot", "snapshots"),
        count(hosts.len() as u64, "host", "hosts"),
        hosts.join(", "),
        epochs.keys().collect::<Vec<_>>(),
        recover.name()
    ));
    for (index, list) in &epochs {
        let fast: u64 = list
            .iter()
            .flat_map(|&i| &snaps[i].fast)
            .map(|p| p.paths.fast_packets)
            .sum();
        if fast > 0 {
            runner.add_note(format!(
                "epoch {index}: {fast} packets took the fast path (all key kinds)"
            ));
        }
    }
    if truth.is_empty() {
        let spreads = runner.config().measures.iter().any(|m| {
            matches!(m.task, algo::Task::Superspreaders | algo::Task::Ddos)
                && m.threshold.unwrap_or(measure::DEFAULT_SPREAD) < 1.0
        });
        if spreads {
            runner.add_note(
                "superspreaders/ddos: a fractional threshold's base (the epoch's distinct \
                 addresses) is not in snapshots; give --truth or an absolute --threshold"
                    .into(),
            );
        }
    } else {
        runner.add_note(
            "the cost table is this process's own pass over the --truth traces, not the hosts'"
                .into(),
        );
    }
    let mut emit = Emit::new(sink, None, crate::emit::PROGRESS_EVERY);
    emit.start(&runner)?;
    let spans: Vec<(u64, snapshot::EpochSpan)> = epochs
        .iter()
        .map(|(&e, list)| {
            let mut s = snapshot::EpochSpan {
                index: e,
                first_ns: u64::MAX,
                ..Default::default()
            };
            // An idle host's snapshot (`Snapshot::is_idle`) has no time span.
            for &i in list.iter().filter(|&&i| !snaps[i].is_idle()) {
                let p = &snaps[i].epoch;
                s.packets += p.packets;
                s.bytes += p.bytes;
                s.first_ns = s.first_ns.min(p.first_ns);
                s.last_ns = s.last_ns.max(p.last_ns);
            }
            (e, s)
        })
        .collect();
    // Each host's part of each epoch, for the report (partial hosts named).
    let mut parts_of: BTreeMap<u64, Vec<HostEpoch>> = BTreeMap::new();
    for s in &snaps {
        parts_of
            .entry(s.epoch.index)
            .or_default()
            .push(host_epoch(s));
    }
    // Each epoch is merged when the runner closes it (one epoch's states in memory at a time).
    let answered = Arc::new(Mutex::new(Vec::<u64>::new()));
    let seen = Arc::clone(&answered);
    let by_epoch: BTreeMap<u64, (Vec<PathBuf>, Vec<Snapshot>)> = {
        let mut m: BTreeMap<u64, (Vec<PathBuf>, Vec<Snapshot>)> = BTreeMap::new();
        for (f, s) in files.into_iter().zip(snaps) {
            let e = m.entry(s.epoch.index).or_default();
            e.0.push(f);
            e.1.push(s);
        }
        m
    };
    // The first epoch where the truth is not the snapshots' (issue 34: scored silently against
    // the wrong truth before); the run then fails with it instead of reporting.
    let mismatch = Arc::new(Mutex::new(None::<String>));
    let found = Arc::clone(&mismatch);
    let check = (!truth.is_empty()).then(|| (name.clone(), spec, grid.clone()));
    let listed: BTreeMap<u64, String> = by_epoch
        .iter()
        .map(|(&e, (f, s))| (e, hosts_list(f.iter().zip(s))))
        .collect();
    runner.replay_from(Box::new(move |got| {
        let epoch = got.index;
        let refuse = |m: String| {
            if let Ok(mut f) = found.lock() {
                f.get_or_insert(m.clone());
            }
            Err(m)
        };
        let Some((files, parts)) = by_epoch.get(&epoch) else {
            return refuse(format!(
                "--truth {}: its epoch {epoch} ({} packets) is in no snapshot (snapshots of \
                 epochs {:?})",
                check.as_ref().map_or("", |c| c.0.as_str()),
                got.packets,
                by_epoch.keys().collect::<Vec<_>>()
            ));
        };
        if let Some((name, spec, grid)) = &check {
            if let Some(m) = truth_mismatch(name, got, files, parts, *spec, grid) {
                return refuse(m);
            }
        }
        let files: Vec<&PathBuf> = files.iter().collect();
        let parts: Vec<&Snapshot> = parts.iter().collect();
        // A state that decoded but breaks its type's invariants (a crafted file with a valid
        // checksum: most algorithms' serde derives do not check sizes) may panic in its merge;
        // that is this epoch's error, not a crash. (A panic while answering is the answer
        // thread's failure, named, as in `run`.)
        let m = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // Recovered on the answer thread, from the merged part, as `run` does.
            snapshot::merge_epoch(&files, &parts, visor::Method::None)
        }))
        .map_err(|_| {
            format!("epoch {epoch}: the snapshots' states are inconsistent (merge failed)")
        })??;
        if let Ok(mut s) = seen.lock() {
            s.push(epoch);
        }
        Ok((m.states, fast_part(&m.fast)))
    }));
    let mut read_error = None;
    if truth.is_empty() {
        for (e, s) in &spans {
            let first = if s.first_ns == u64::MAX {
                0
            } else {
                s.first_ns
            };
            runner.close_replayed(*e, s.packets, s.bytes, (first, s.last_ns));
        }
    } else {
        let edges = match &grid {
            Grid::Differ { edges, .. } => Some(edges),
            _ => None,
        };
        let mut push = |p: &Packet| {
            stop_if_asked(control);
            match p.class {
                Class::Ipv4 | Class::Ipv6 => {
                    if let Some(edges) = edges {
                        edges.note(p.ts_ns, p.wire_len);
                    }
                    runner.push(p.ts_ns, &p.tuple, p.wire_len)
                }
                c => runner.push_unkeyed(c, p.wire_len),
            }
        };
        let res = until_stop(|| match &caps[..] {
            [one] => each_packet(one, tunnel, push),
            several if !concatenated => each_packet_by_time(several, tunnel, push),
            several => several
                .iter()
                .try_for_each(|c| each_packet(c, tunnel, &mut push)),
        })?;
        match res {
            // Stopped between two packets: the last epoch is partial.
            None => runner.interrupt(),
            // The error names its file and offset.
            Some(r) => read_error = r.err().map(|e| e.to_string()),
        }
    }
    let finished = runner.try_finish();
    let refused = mismatch.lock().ok().and_then(|mut m| m.take());
    if let Some(m) = refused {
        bail!("{m}");
    }
    let mut report = finished?;
    for e in &mut report.epochs {
        if let Some(hosts) = parts_of.remove(&e.index) {
            with_hosts(e, hosts);
        }
    }
    let answered = answered.lock().map(|a| a.clone()).unwrap_or_default();
    let missed: Vec<u64> = spans
        .iter()
        .map(|s| s.0)
        .filter(|e| !answered.contains(e))
        .collect();
    // A snapshot epoch with traffic that the truth (read to its end) has no packet in: nothing
    // to score it against.
    let stopped = control.stopped();
    let unmatched = spans
        .iter()
        .filter(|_| read_error.is_none() && stopped.is_none() && !truth.is_empty())
        .find(|(e, s)| s.packets > 0 && missed.contains(e));
    if let Some((e, s)) = unmatched {
        bail!(
            "--truth {name}: it has no packet in epoch {e}; the snapshots' epoch {e} has {} \
             packets ({})",
            s.packets,
            listed.get(e).map_or("", String::as_str)
        );
    }
    if !missed.is_empty() {
        // Not a task's warning (`measure::Warning`): told as a note, before the epochs.
        emit.send(Event::Note(format!(
            "warning: the snapshots of epochs {missed:?} were not answered: the --truth \
             traces have no packets there"
        )))?;
    }
    report
        .notes
        .extend(rejected.iter().map(|r| format!("rejected snapshot {r}")));
    emit.finish(report)?;
    Ok(Outcome {
        read_error,
        stopped,
    })
}

/// The snapshot every host's must agree with (`netsift controller --expect FILE`): `path` holds
/// a snapshot (by its magic number) or a run configuration (TOML, as `run --config` reads it),
/// built into a runner to resolve its defaults and preset as an agent's run does.
pub fn expected(path: &Path) -> Result<Snapshot> {
    let bytes = std::fs::read(path).with_context(|| format!("--expect {}", path.display()))?;
    if bytes.starts_with(&snapshot::MAGIC) {
        return snapshot::decode(&bytes)
            .map_err(|e| anyhow::anyhow!("--expect {}: {e}", path.display()));
    }
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        anyhow::anyhow!(
            "--expect {}: neither a snapshot nor a TOML run configuration (byte {} is not \
             UTF-8)",
            path.display(),
            e.valid_up_to()
        )
    })?;
    let mut cfg =
        RunConfig::from_toml(text).with_context(|| format!("--expect {}", path.display()))?;
    if cfg.measures.is_empty() {
        cfg.measures = RunConfig::measures_from_lists(&[], &[])?;
    }
    // Host-local fields (they do not enter what must agree): the cheapest values.
    cfg.workers = 1;
    cfg.truth = false;
    cfg.max_memory = None;
    cfg.snapshots = None;
    let runner = Runner::new(cfg, &path.display().to_string())
        .with_context(|| format!("--expect {}", path.display()))?;
    runner
        .reference_snapshot("expected")
        .map_err(|e| anyhow::anyhow!("--expect {}: {e}", path.display()))
}

/// The network-wide report of `epoch` from its hosts' snapshots (`cur`) and, when held, the
/// previous epoch's (`prev`, merged only when a task is heavy changers: they answer against
/// it, as in `netsift merge`): the `Report` of `netsift merge --json` with this epoch alone in
/// `epochs` and `warnings` (`netsift controller`'s merge).
pub fn epoch_report(
    epoch: u64,
    prev: &[(PathBuf, Snapshot)],
    cur: &[(PathBuf, Snapshot)],
    recover: visor::Method,
) -> Result<serde_json::Value, String> {
    // The previous epoch costs a second merge: only heavy changers answer against it.
    let changers = cur.first().is_some_and(|(_, s)| {
        RunConfig::from_toml(&s.config).is_ok_and(|c| {
            c.measures
                .iter()
                .any(|m| m.task == algo::Task::HeavyChangers)
        })
    });
    let prev = if changers { prev } else { &[] };
    let (files, snaps): (Vec<PathBuf>, Vec<Snapshot>) = prev.iter().chain(cur).cloned().unzip();
    let s = Snapshots {
        recover,
        ..Snapshots::of(files, snaps)
    };
    let (mut report, _) = crate::Run::merge(s)
        .and_then(crate::Run::report)
        .map_err(|e| format!("{e:#}"))?;
    report.epochs.retain(|e| e.index == epoch);
    report.warnings.retain(|w| w.epoch == epoch);
    if !prev.is_empty() {
        report.notes.push(format!(
            "epoch {} merged too, as heavy changers' previous epoch: totals and costs cover both",
            epoch.saturating_sub(1)
        ));
    }
    serde_json::to_value(&report).map_err(|e| e.to_string())
}

/// A host's part of its epoch as the report lists it, from its snapshot.
fn host_epoch(s: &Snapshot) -> HostEpoch {
    let e = &s.epoch;
    let mut partial_reasons = vec![];
    if e.started_mid {
        partial_reasons.push(PartialReason::StartedMidEpoch);
    }
    if e.interrupted {
        partial_reasons.push(PartialReason::Interrupted);
    }
    HostEpoch {
        host: s.host.clone(),
        packets: e.packets,
        idle: s.is_idle(),
        partial: e.partial,
        partial_reasons,
        coverage: Coverage {
            start_ns: e.covered_from_ns,
            end_ns: e.covered_to_ns,
        },
    }
}

/// A merged epoch with its hosts' parts: partial when any host's was (the reasons of all of
/// them), each host's coverage in `hosts` (by host name), none of the epoch's own.
fn with_hosts(e: &mut EpochReport, mut hosts: Vec<HostEpoch>) {
    hosts.sort_by(|a, b| a.host.cmp(&b.host));
    for h in &hosts {
        e.partial |= h.partial;
        e.partial_reasons.extend(&h.partial_reasons);
    }
    e.partial_reasons.sort();
    e.partial_reasons.dedup();
    e.coverage = None;
    e.hosts = hosts;
}

/// The merged fast-path part of an epoch as the answer thread takes it (`None` when no host had a
/// fast path). The hosts' kick-out statistics are not in snapshots: unknown in the report.
fn fast_part(parts: &[snapshot::FastPart]) -> Option<visor::EpochPart> {
    if parts.iter().all(|p| p.summary.is_none()) {
        return None;
    }
    Some(visor::EpochPart {
        paths: parts.first().map(|p| p.paths).unwrap_or_default(),
        fast: parts
            .iter()
            .map(|p| {
                (
                    p.summary.clone().unwrap_or_default(),
                    visor::FastStats::default(),
                )
            })
            .collect(),
    })
}

/// Open the `--truth` traces and tell how several are read: merged by capture time, or (`true`)
/// one after the other when some carry no capture times (`keys4`, `keys13`) and the epochs are
/// packet counts, where an epoch's truth does not depend on the order within it and each is
/// checked against the snapshots' counts. Refused: several traces without times and time
/// epochs (no order can be made); several with one a stream (merging reads the others as it
/// goes, so a pipe would be read into memory: give a file).
fn open_truth(truth: &[String], spec: EpochSpec) -> Result<(Vec<Capture>, bool)> {
    let caps = truth
        .iter()
        .map(|t| Capture::open(t, None))
        .collect::<Result<Vec<_>, _>>()?;
    if caps.len() < 2 {
        return Ok((caps, false));
    }
    if let Some(c) = caps.iter().find(|c| c.is_stream()) {
        bail!(
            "--truth {}: several truth traces are merged by capture time, which reads them \
             side by side; a pipe or stdin cannot be: write it to a file first",
            c.name()
        );
    }
    let untimed: Vec<&str> = caps
        .iter()
        .filter(|c| !c.format().timed())
        .map(|c| c.name())
        .collect();
    if untimed.is_empty() {
        return Ok((caps, false));
    }
    if let EpochSpec::Millis(ms) = spec {
        bail!(
            "--truth {}: {} carry no capture times, so the {} traces cannot be merged by time \
             for the snapshots' {ms} ms epochs; give one trace of all hosts' packets",
            truth.join(" + "),
            untimed.join(", "),
            caps.len()
        );
    }
    Ok((caps, true))
}

/// The hosts' time-epoch grid, from their snapshots: epoch `i` spans `[origin + i * len, ...)`.
#[derive(Clone, Debug)]
enum Grid {
    /// Packet-count epochs (no grid), or no snapshot tells its grid.
    None,
    /// Every host's epochs on one grid from this origin (ns): the truth is cut on it, exactly
    /// the hosts' epochs.
    Shared(u64),
    /// Hosts on different grids (`run` starts time epochs at each host's first packet): host
    /// and origin of each. The truth is cut on the latest origin's grid (so no host packet
    /// falls past the hosts' last epoch), and a packet within the hosts' offsets of an epoch
    /// bound may be in either epoch on a host: `edges` counts those.
    Differ {
        origins: Vec<(String, u64)>,
        edges: Edges,
    },
}

impl Grid {
    /// A time epoch's snapshot records its bounds (`covered_from_ns`, the epoch's start unless
    /// the capture started later), so its origin is `start - index * len`.
    fn of(snaps: &[Snapshot], spec: EpochSpec) -> Grid {
        let EpochSpec::Millis(ms) = spec else {
            return Grid::None;
        };
        let len = ms.saturating_mul(1_000_000);
        let mut origins: Vec<(String, u64)> = snaps
            .iter()
            .filter(|s| !s.epoch.started_mid)
            .map(|s| {
                let start = s.epoch.covered_from_ns;
                let origin = start.saturating_sub(s.epoch.index.saturating_mul(len));
                (s.host.clone(), origin)
            })
            .collect();
        origins.sort();
        origins.dedup();
        let first = origins.iter().map(|o| o.1).min();
        let last = origins.iter().map(|o| o.1).max();
        match (first, last) {
            (Some(a), Some(b)) if a == b => Grid::Shared(a),
            (Some(a), Some(b)) => Grid::Differ {
                origins,
                edges: Edges {
                    from: a,
                    width: b - a,
                    len,
                    seen: Arc::default(),
                },
            },
            _ => Grid::None,
        }
    }

    /// Where the truth's time epochs start, when the hosts tell.
    fn origin(&self) -> Option<u64> {
        match self {
            Grid::None => None,
            Grid::Shared(o) => Some(*o),
            Grid::Differ { origins, .. } => origins.iter().map(|o| o.1).max(),
        }
    }
}

/// The truth's packets near the epoch bounds of hosts on different grids ([`Grid::Differ`]):
/// bound `b` (between epochs `b - 1` and `b`) lies at `from + b * len` on the earliest host's
/// grid and `width` later on the latest's; a packet in between is in epoch `b - 1` on some
/// hosts and `b` on others.
#[derive(Clone, Debug)]
struct Edges {
    from: u64,
    width: u64,
    len: u64,
    /// Per bound, the truth's packets and bytes within it.
    seen: Arc<Mutex<BTreeMap<u64, (u64, u64)>>>,
}

impl Edges {
    /// A keyed truth packet.
    fn note(&self, ts_ns: u64, wire_len: u32) {
        let Some(d) = ts_ns.checked_sub(self.from) else {
            return;
        };
        let bound = d / self.len.max(1);
        if bound > 0 && d % self.len.max(1) < self.width {
            if let Ok(mut m) = self.seen.lock() {
                let c = m.entry(bound).or_default();
                c.0 += 1;
                c.1 += u64::from(wire_len);
            }
        }
    }

    /// Packets and bytes of the truth that hosts may count in epoch `e`'s neighbours or the
    /// neighbours' in `e`: those at its two bounds.
    fn around(&self, e: u64) -> (u64, u64) {
        let m = self.seen.lock().map(|m| m.clone()).unwrap_or_default();
        let at = |b: u64| m.get(&b).copied().unwrap_or_default();
        let (a, b) = (at(e), at(e + 1));
        (a.0 + b.0, a.1 + b.1)
    }
}

/// Each host's part of an epoch with its file: `h0 1200 packets (DIR/h0-epoch000000.nss), ...`.
fn hosts_list<'a>(parts: impl Iterator<Item = (&'a PathBuf, &'a Snapshot)>) -> String {
    parts
        .map(|(f, s)| {
            format!(
                "{} {} packets, {} bytes ({})",
                s.host,
                s.epoch.packets,
                s.epoch.bytes,
                f.display()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Why the truth's epoch (`seen`, what the `--truth` traces named `name` put in it) cannot be
/// the snapshots' epoch of the same index (`parts`, read from `files`), or `None` when it can.
/// When the truth is every host's capture, and only theirs, cut on the hosts' epochs, each
/// epoch holds exactly the packets and bytes the hosts counted in theirs, within the time they
/// spanned; hosts on different time grids may count the packets at an epoch's bounds in a
/// neighbouring epoch, so there the counts may differ by those packets and no more.
fn truth_mismatch(
    name: &str,
    seen: &EpochSpan,
    files: &[PathBuf],
    parts: &[Snapshot],
    spec: EpochSpec,
    grid: &Grid,
) -> Option<String> {
    let busy = || parts.iter().filter(|s| !s.is_idle());
    let packets: u64 = busy().map(|s| s.epoch.packets).sum();
    let bytes: u64 = busy().map(|s| s.epoch.bytes).sum();
    let first = busy().map(|s| s.epoch.first_ns).min().unwrap_or(0);
    let last = busy().map(|s| s.epoch.last_ns).max().unwrap_or(0);
    let e = seen.index;
    let slack = match grid {
        Grid::Differ { edges, .. } => edges.around(e),
        _ => (0, 0),
    };
    // Traces without times (all 0) have no span to compare.
    let apart = seen.first_ns > last || first > seen.last_ns;
    if packets.abs_diff(seen.packets) <= slack.0 && bytes.abs_diff(seen.bytes) <= slack.1 && !apart
    {
        return None;
    }
    let why = match (spec, grid) {
        // A full epoch on either side: the hosts' captures span several epochs.
        (EpochSpec::Packets(n), _)
            if busy().count() > 1
                && (seen.packets == n || busy().any(|s| s.epoch.packets == n)) =>
        {
            format!(
                " (packet-count epochs: each host cut its own {n}-packet epochs, so the hosts' \
             epoch {e} is the truth's only when every host's capture is one epoch)"
            )
        }
        (_, Grid::Differ { origins, .. }) => format!(
            " (the hosts' time epochs start at different times: {}; `run` starts them at each \
             host's first packet, which moves at most the truth's {} packets at this epoch's \
             bounds to a neighbouring epoch)",
            origins
                .iter()
                .map(|(h, o)| format!("{h} at {o} ns"))
                .collect::<Vec<_>>()
                .join(", "),
            slack.0
        ),
        _ => " (is every host's capture given, and only theirs?)".to_string(),
    };
    Some(format!(
        "--truth {name} does not match the snapshots in epoch {e}: the truth has {} packets, {} \
         bytes (capture time {}..={} ns), the snapshots {packets} packets, {bytes} bytes \
         ({first}..={last} ns): {}{why}",
        seen.packets,
        seen.bytes,
        seen.first_ns,
        seen.last_ns,
        hosts_list(files.iter().zip(parts))
    ))
}
