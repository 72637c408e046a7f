//! `netsift merge`: the control plane (SketchVisor section 5). Reads hosts' epoch snapshots
//! (`netsift run --snapshots DIR --host ID`), checks they agree, merges each epoch's states and
//! fast-path summaries (`snapshot::merge_epoch`, recovery by `--recover`), and answers the run's
//! tasks for the whole network through `run`'s own runner (`measure::Runner::replay_from`: same
//! answers, same scoring, same report), scored against the exact truth of the `--truth` traces
//! read as `run` reads them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use clap::Args;
use measure::report::{Coverage, HostEpoch, PartialReason};
use measure::{EpochReport, Report, RunConfig, Runner};
use snapshot::Snapshot;
use trace::Capture;
use wire::Class;

use crate::out::Out;
use crate::run::RecoverArg;
use crate::source::each_packet;

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
    /// with `run`'s reader and keying, in the order given); without them, answers only.
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
        format!("merge of {} hosts ({})", hosts.len(), hosts.join(", "))
    } else {
        truth.join(" + ")
    };
    let mut runner = Runner::new(cfg, &name)?;
    runner.add_note(format!(
        "merged {} snapshots of {} hosts ({}), epochs {:?}, recovery {}",
        files.len(),
        hosts.len(),
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
    runner.replay_from(Box::new(move |epoch| {
        let Some((files, parts)) = by_epoch.get(&epoch) else {
            return Err(format!(
                "the --truth traces have an epoch {epoch}, no snapshot has (snapshots of epochs \
                 {:?})",
                by_epoch.keys().collect::<Vec<_>>()
            ));
        };
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
        for path in truth {
            let cap = Capture::open(path, None)?;
            let res = each_packet(&cap, tunnel, |p| match p.class {
                Class::Ipv4 | Class::Ipv6 => runner.push(p.ts_ns, &p.tuple, p.wire_len),
                c => runner.push_unkeyed(c, p.wire_len),
            });
            if let Err(e) = res {
                read_error = Some(format!("{path}: {e}"));
                break;
            }
        }
    }
    let mut report = runner.try_finish()?;
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
