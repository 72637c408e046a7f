//! `netsift merge`: the control plane (SketchVisor section 5). Reads hosts' epoch snapshots
//! (`netsift run --snapshots DIR --host ID`), checks they agree, merges each epoch's states and
//! fast-path summaries (`snapshot::merge_epoch`, recovery by `--recover`), and answers the run's
//! tasks for the whole network through `run`'s own runner (`measure::Runner::replay_from`: same
//! answers, same scoring, same report), scored against the exact truth of the `--truth` traces
//! read as `run` reads them: several merged by capture time (`trace::merge_by_time`, as
//! `mergecap`), cut on the hosts' time grid, each epoch checked against the hosts' packet and
//! byte counts (issue 34: a truth read file after file scored the wrong epochs, silently).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use clap::Args;
use measure::report::{count, Coverage, HostEpoch, PartialReason};
use measure::{EpochReport, Report, RunConfig, Runner};
use snapshot::EpochSpan;
use snapshot::Snapshot;
use trace::Capture;
use truth::EpochSpec;
use wire::Class;

use crate::out::Out;
use crate::run::RecoverArg;
use engine::packet::{each_packet, each_packet_by_time};

#[derive(Args)]
pub struct MergeArgs {
    /// Snapshot files, every host's, every epoch's (`netsift run --snapshots DIR --host ID`).
    #[arg(required = true, value_name = "SNAPSHOT")]
    snapshots: Vec<PathBuf>,
    /// How the fast path's part is recovered where one carried traffic: SketchVisor's
    /// compressive sensing, each tracked flow's lower or upper bound added, or none. Without a
    /// fast-path part every method is the plain merge.
    #[arg(long, value_enum, default_value_t = RecoverArg::Sketchvisor)]
    recover: RecoverArg,
    /// The report as one JSON document (as `run --json`).
    #[arg(long)]
    json: bool,
    /// Captures or key traces whose exact truth the merged answers are scored against (read
    /// with `run`'s reader and keying; several are merged by capture time, as `mergecap`
    /// does); without them, answers only. Each epoch of the truth must hold the packets and
    /// bytes of the snapshots' epoch (every host's capture, and only theirs): otherwise refused.
    #[arg(long, value_name = "TRACE", num_args = 1..)]
    truth: Vec<String>,
    /// Largest memory one snapshot's states may take (`800M`, `8G`): a snapshot whose
    /// parameters need more, or whose states claim more than its parameters build, is rejected
    /// before its states are allocated (`snapshot::validate`). Default: 3/4 of physical memory,
    /// as `run`'s.
    #[arg(long, value_parser = crate::flags::bytes)]
    max_memory: Option<u64>,
}

/// `--host`: an id that can go into a file name (`snapshot::check_host`).
pub fn host_id(s: &str) -> Result<String, String> {
    snapshot::check_host(s).map(|_| s.to_string())
}

pub fn cmd_merge(a: MergeArgs, out: &mut Out) -> Result<bool> {
    // Each snapshot is read and validated (issue 33: a well-framed snapshot may carry forged
    // states); a bad one is rejected with a warning and the others are merged and answered,
    // then the command fails naming what it left out.
    let max_memory = a.max_memory.or_else(crate::flags::default_memory_budget);
    let (mut files, mut snaps, mut rejected) = (vec![], vec![], vec![]);
    for f in a.snapshots {
        let checked = snapshot::read(&f)
            .map_err(|e| e.reason)
            .and_then(|s| snapshot::validate(&s, max_memory).map(|_| s));
        match checked {
            Ok(s) => {
                files.push(f);
                snaps.push(s);
            }
            Err(reason) => {
                crate::say!(
                    "netsift: warning: snapshot {} rejected: {reason}",
                    f.display()
                );
                rejected.push(format!("{}: {reason}", f.display()));
            }
        }
    }
    if snaps.is_empty() {
        bail!("no snapshot to merge: {}", rejected.join("; "));
    }
    if rejected.is_empty() {
        snapshot::check_agree(&files, &snaps).map_err(anyhow::Error::msg)?;
    } else {
        // A rejected host's epoch is missing, so the hosts' epoch sets may differ: the
        // pairwise agreement only.
        for (f, s) in files.iter().zip(&snaps).skip(1) {
            snapshot::check_compatible(&files[0], &snaps[0], f, s).map_err(anyhow::Error::msg)?;
        }
    }
    let (mut report, read_error) =
        merged_report(files, snaps, visor::Method::from(a.recover), &a.truth, true)?;
    report
        .notes
        .extend(rejected.iter().map(|r| format!("rejected snapshot {r}")));
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        crate::table::print_report(&report, false, crate::table::DEFAULT_TOP, out)?;
    }
    if let Some(e) = read_error {
        bail!("{e}");
    }
    if !rejected.is_empty() {
        bail!(
            "{} snapshot(s) rejected, the report answers the others: {}",
            rejected.len(),
            rejected.join("; ")
        );
    }
    Ok(true)
}

/// The network-wide report of hosts' snapshots (checked by `snapshot::check_agree`, or one by one
/// by `snapshot::check_compatible`: `netsift controller`): the runner built from the first
/// snapshot's configuration answers each epoch's merged states (fast-path parts recovered by
/// `recover` on its answer thread), scored against the exact truth of `truth` traces when given.
/// `files` name the snapshots in errors. `say_notes`: the notes and warnings on stderr. Returns
/// the report and the error that stopped reading a `truth` trace, if one did.
pub fn merged_report(
    files: Vec<PathBuf>,
    snaps: Vec<Snapshot>,
    recover: visor::Method,
    truth: &[String],
    say_notes: bool,
) -> Result<(Report, Option<String>)> {
    if snaps.is_empty() {
        bail!("no snapshot given");
    }
    // Epoch index to the snapshots of it, in the order given.
    let mut epochs: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for (i, s) in snaps.iter().enumerate() {
        epochs.entry(s.epoch.index).or_default().push(i);
    }
    let mut cfg = RunConfig::from_toml(&snaps[0].config)
        .with_context(|| format!("snapshot {}: its run configuration", files[0].display()))?;
    // The seed travels beside the TOML, which cannot hold every u64.
    cfg.seed = snaps[0].seed;
    // One plane answers the merged states; this process's business, not the hosts'.
    cfg.workers = 1;
    cfg.snapshots = None;
    cfg.host = None;
    cfg.trace = None;
    cfg.max_memory = None;
    cfg.truth = !truth.is_empty();
    // The hosts' fast paths measured their overload; this process only answers (the merged
    // part is recovered by `--recover` on its answer thread): no FIFO model of its own.
    cfg.sketchvisor.normal_capacity = None;
    cfg.sketchvisor.recover = recover;
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
    if say_notes {
        for n in runner.notes() {
            crate::say!("netsift: {n}");
        }
    }
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
    // the wrong truth before); the command then fails with it instead of reporting.
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
        let mut push = |p: &engine::packet::Packet| match p.class {
            Class::Ipv4 | Class::Ipv6 => {
                if let Some(edges) = edges {
                    edges.note(p.ts_ns, p.wire_len);
                }
                runner.push(p.ts_ns, &p.tuple, p.wire_len)
            }
            c => runner.push_unkeyed(c, p.wire_len),
        };
        let res = match &caps[..] {
            [one] => each_packet(one, tunnel, push),
            several if !concatenated => each_packet_by_time(several, tunnel, push),
            several => several
                .iter()
                .try_for_each(|c| each_packet(c, tunnel, &mut push)),
        };
        // The error names its file and offset.
        read_error = res.err().map(|e| e.to_string());
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
    let unmatched = spans
        .iter()
        .filter(|_| read_error.is_none() && !truth.is_empty())
        .find(|(e, s)| s.packets > 0 && missed.contains(e));
    if let Some((e, s)) = unmatched {
        bail!(
            "--truth {name}: it has no packet in epoch {e}; the snapshots' epoch {e} has {} \
             packets ({})",
            s.packets,
            listed.get(e).map_or("", String::as_str)
        );
    }
    if say_notes && !missed.is_empty() {
        crate::say!(
            "netsift: warning: the snapshots of epochs {missed:?} were not answered: the --truth \
             traces have no packets there"
        );
    }
    Ok((report, read_error))
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
