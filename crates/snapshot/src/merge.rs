//! The control plane's merge of one epoch (SketchVisor section 5, RECOVERY.md 1): the
//! normal-path states summed instance by instance (`Algorithm::merge`), the fast-path summaries
//! merged per key kind (`visor::Summary::merge`: tables by key, V and E summed), then, where a
//! fast path carried part of the traffic, the recovery `--recover` names.

use std::path::PathBuf;

use algo::Algorithm;
use visor::{Method, Summary};

use crate::{restore_instance, EpochSpan, FastPart, Snapshot};

/// One epoch, merged over its hosts.
pub struct Merged {
    /// Index, packets and bytes summed, first/last capture time over the hosts; partial (and
    /// started mid-epoch, interrupted) if any host's was; covered: the span every host with
    /// packets covered (the latest start, the earliest end).
    pub span: EpochSpan,
    /// One state per instance, in the snapshots' order.
    pub states: Vec<Box<dyn Algorithm>>,
    /// Per key kind: the merged summary (`None` when no host had a fast path) and the paths'
    /// packets and bytes summed.
    pub fast: Vec<FastPart>,
    /// The hosts merged, in the order given.
    pub hosts: Vec<String>,
}

/// Merge one epoch's snapshots (already checked by [`crate::check_agree`]; `files` name them in
/// errors) and recover the fast path's part by `method`. Without any fast-path part the result
/// is the plain merge whatever the method.
pub fn merge_epoch(
    files: &[&PathBuf],
    parts: &[&Snapshot],
    method: Method,
) -> Result<Merged, String> {
    // Idle hosts' snapshots (no packet, no state: `Snapshot::is_idle`) add nothing but their
    // names; the states come from the others.
    let hosts = parts.iter().map(|s| s.host.clone()).collect();
    let (files, parts): (Vec<&PathBuf>, Vec<&Snapshot>) = files
        .iter()
        .zip(parts)
        .filter(|(_, s)| !s.is_idle())
        .map(|(f, s)| (*f, *s))
        .unzip();
    let Some(first) = parts.first() else {
        return Err("no snapshot with packets for this epoch".into());
    };
    let mut states: Vec<Box<dyn Algorithm>> = Vec::with_capacity(first.instances.len());
    let mut span = EpochSpan {
        index: first.epoch.index,
        first_ns: u64::MAX,
        covered_to_ns: u64::MAX,
        ..EpochSpan::default()
    };
    for (f, s) in files.iter().zip(&parts) {
        let name = f.display();
        for (i, inst) in s.instances.iter().enumerate() {
            let a = restore_instance(inst).map_err(|e| format!("snapshot {name}: {e}"))?;
            match states.get_mut(i) {
                None => states.push(a),
                Some(m) => m.merge(a.as_ref()).map_err(|e| {
                    format!(
                        "snapshot {name}: instance {i} ({}) does not merge: {e}",
                        inst.algorithm
                    )
                })?,
            }
        }
        span.first_ns = span.first_ns.min(s.epoch.first_ns);
        span.last_ns = span.last_ns.max(s.epoch.last_ns);
        span.packets = span.packets.saturating_add(s.epoch.packets);
        span.bytes = span.bytes.saturating_add(s.epoch.bytes);
        span.partial |= s.epoch.partial;
        span.started_mid |= s.epoch.started_mid;
        span.interrupted |= s.epoch.interrupted;
        span.covered_from_ns = span.covered_from_ns.max(s.epoch.covered_from_ns);
        span.covered_to_ns = span.covered_to_ns.min(s.epoch.covered_to_ns);
    }
    if span.first_ns == u64::MAX {
        span.first_ns = 0;
    }
    if span.covered_to_ns == u64::MAX {
        span.covered_to_ns = 0;
    }
    // Per kind: the summaries of the hosts that had a fast path, merged; path counts summed.
    let mut fast: Vec<FastPart> = vec![];
    for (k, kind) in first.kinds.iter().enumerate() {
        let mut paths = visor::PathCounts::default();
        let mut sums: Vec<&Summary> = vec![];
        for s in &parts {
            if let Some(p) = s.fast.get(k) {
                // Saturating: a forged count must not panic a controller (issue 33).
                paths.normal_packets = paths.normal_packets.saturating_add(p.paths.normal_packets);
                paths.normal_bytes = paths.normal_bytes.saturating_add(p.paths.normal_bytes);
                paths.fast_packets = paths.fast_packets.saturating_add(p.paths.fast_packets);
                paths.fast_bytes = paths.fast_bytes.saturating_add(p.paths.fast_bytes);
                sums.extend(p.summary.as_ref());
            }
        }
        // The merged counts ride with the summary (a snapshot stores them beside it): the
        // bitmap sketches' restoring reads the pooled fast share from them.
        let summary = (!sums.is_empty()).then(|| Summary {
            paths,
            ..Summary::merge(sums)
        });
        fast.push(FastPart {
            kind: kind.clone(),
            summary,
            paths,
        });
    }
    for (inst, state) in first.instances.iter().zip(&mut states) {
        let Some(part) = fast.iter().find(|p| p.kind == inst.kind) else {
            continue;
        };
        let Some(summary) = part.summary.as_ref().filter(|s| s.v > 0) else {
            continue;
        };
        let (r, _) = visor::recovered(state.as_ref(), summary, method).map_err(|e| {
            format!(
                "epoch {}: recovering the {} kind: {e}",
                span.index, inst.kind
            )
        })?;
        if let Some(r) = r {
            *state = r;
        }
    }
    Ok(Merged {
        span,
        states,
        fast,
        hosts,
    })
}
