//! `netsift merge`: the control plane (SketchVisor section 5) from snapshot files. Flags to
//! the engine's merge (`engine::merge`: read and check the hosts' snapshots, merge each epoch,
//! answer and score it as `run` does) to the report, as a table or as `run --json`'s JSON.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use engine::merge::Snapshots;
use engine::{Event, Run};

use crate::flags::RecoverArg;
use crate::out::Out;

#[derive(Args)]
pub struct MergeArgs {
    /// Snapshot files, every host's, every epoch's (`netsift run --snapshots DIR --host ID`).
    #[arg(required = true, value_name = "SNAPSHOT")]
    snapshots: Vec<PathBuf>,
    /// How the fast path's part is recovered where one carried traffic: SketchVisor's
    /// compressive sensing, the uniform-overflow prior (`proportional`, when the epoch fits it;
    /// both for the sketches `run --help` lists under `--recover`), each tracked flow's lower or
    /// upper bound added, or none.
    /// Without a fast-path part every method is the plain merge.
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

pub fn cmd_merge(a: MergeArgs, out: &mut Out) -> Result<bool> {
    // A bad snapshot is rejected with a warning and the others are merged and answered, then
    // the command fails naming what it left out.
    let max_memory = a.max_memory.or_else(crate::flags::default_memory_budget);
    let snaps = Snapshots::read(a.snapshots, max_memory, &mut |f, reason| {
        crate::say!(
            "netsift: warning: snapshot {} rejected: {reason}",
            f.display()
        );
    })?;
    let rejected = snaps.rejected.clone();
    let run = Run::merge(Snapshots {
        recover: visor::Method::from(a.recover),
        truth: a.truth,
        ..snaps
    })?;
    // The merge's notes on stderr; its task warnings are in the report (not repeated there).
    let (report, outcome) = run.report_with(&mut |e| {
        if let Event::Note(n) = e {
            crate::say!("netsift: {n}");
        }
        Ok(())
    })?;
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        crate::table::print_report(&report, false, crate::table::DEFAULT_TOP, out)?;
    }
    if let Some(e) = outcome.read_error {
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
