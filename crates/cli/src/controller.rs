//! `netsift controller`: the control plane over NATS JetStream (crate `netwide`). Consumes every
//! host's snapshots through a durable consumer, merges each epoch with `netsift merge`'s code
//! (`engine::merge::epoch_report`: the same run, recovery and report), prints each network-wide
//! report as one JSON line, publishes it on `netsift.reports` and stores it in the key-value
//! bucket `netsift-reports` by epoch.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use netwide::controller::{Hosts, NetReport, Options};
use snapshot::Snapshot;

use crate::agent::BrokerArgs;
use crate::flags;
use crate::flags::RecoverArg;
use crate::out::Out;

#[derive(Args)]
pub struct ControllerArgs {
    #[command(flatten)]
    pub broker: BrokerArgs,
    /// The hosts each epoch waits for, comma-separated; a snapshot of any other is rejected.
    #[arg(long, value_delimiter = ',', required_unless_present = "hosts_from_stream",
          conflicts_with = "hosts_from_stream", value_parser = flags::host_id)]
    pub hosts: Vec<String>,
    /// Wait for every host that has published to the stream (any host is accepted).
    #[arg(long)]
    pub hosts_from_stream: bool,
    /// How long an epoch waits for missing hosts after its first snapshot (ms); then it is
    /// reported without them, and corrected when they arrive.
    #[arg(long, default_value_t = 5_000, allow_negative_numbers = true,
          value_parser = flags::whole::<u64>(1..=86_400_000))]
    pub deadline_ms: u64,
    /// How the fast path's part is recovered (as `netsift merge --recover`).
    #[arg(long, value_enum, default_value_t = RecoverArg::Sketchvisor)]
    pub recover: RecoverArg,
    /// Stop once this many epochs have a report in the bucket (this controller's or an
    /// earlier one's); default: until SIGINT/SIGTERM.
    #[arg(long, allow_negative_numbers = true, value_parser = flags::whole::<u64>(0..=u64::MAX))]
    pub epochs: Option<u64>,
    /// Reported epochs kept in memory for late snapshots (1..=4096).
    #[arg(long, default_value_t = 16, allow_negative_numbers = true,
          value_parser = flags::whole::<usize>(1..=4096))]
    pub keep: usize,
    /// The deployment's configuration every snapshot must agree with (seed, parameters, key
    /// kinds): the TOML the agents run with (`--config`, its seed included), or a snapshot
    /// written with the agents' flags (`netsift run TRACE --snapshots DIR --host ref
    /// <flags>`). Never taken from the first host to arrive, which may be misconfigured.
    #[arg(long, value_name = "FILE")]
    pub expect: PathBuf,
    /// Most memory one snapshot's restored instances may take (`500M`, `2G`); a snapshot
    /// claiming more is rejected before anything is allocated for it. Default: 3/4 of physical
    /// memory, as `run`'s budget.
    #[arg(long, value_parser = flags::bytes)]
    pub max_memory: Option<u64>,
    /// How long the snapshot stream keeps a snapshot (s). Default: the last --keep epochs plus
    /// two and the deadline, at least 600 s (time epochs; 600 s for packet-count epochs).
    #[arg(long, value_name = "SECS", allow_negative_numbers = true,
          value_parser = flags::whole::<u64>(1..=31_536_000))]
    pub stream_max_age: Option<u64>,
    /// Most bytes the snapshot stream keeps, oldest dropped first (`4G`). Default: --keep + 2
    /// epochs of every host's snapshot at the largest size the server takes (64 MB), at least
    /// 1 GiB.
    #[arg(long, value_parser = flags::bytes)]
    pub stream_max_bytes: Option<u64>,
}

pub fn cmd_controller(a: ControllerArgs, out: &mut Out) -> Result<bool> {
    crate::live::init_logs(Some(
        &std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
    ))?;
    crate::signals::install();
    let hosts = if a.hosts_from_stream {
        Hosts::FromStream
    } else {
        Hosts::List(a.hosts.iter().cloned().collect::<BTreeSet<_>>())
    };
    let expected = engine::merge::expected(&a.expect)?;
    let epoch = measure::RunConfig::from_toml(&expected.config)
        .ok()
        .and_then(|c| c.epoch_ms)
        .map(Duration::from_millis);
    let deadline = Duration::from_millis(a.deadline_ms);
    let derived = netwide::controller::Limits::derive(a.keep, epoch, deadline, a.hosts.len());
    let limits = netwide::controller::Limits {
        max_age: a
            .stream_max_age
            .map_or(derived.max_age, Duration::from_secs),
        max_bytes: a
            .stream_max_bytes
            .map_or(derived.max_bytes, |b| b.min(i64::MAX as u64) as i64),
    };
    let opts = Options {
        expected: (a.expect.clone(), expected),
        max_memory: a.max_memory.or_else(flags::default_memory_budget),
        limits,
        hosts,
        deadline,
        epochs: a.epochs,
        keep: a.keep,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("controller: cannot start the async runtime")?;
    let broker = a
        .broker
        .broker("netsift-controller", netwide::CONTROLLER_INBOX);
    let client = rt.block_on(broker.connect(Duration::from_secs(5), false))?;
    // The JetStream context spawns its acknowledgement task on the runtime.
    let _enter = rt.enter();
    let js = async_nats::jetstream::new(client);
    let recover = visor::Method::from(a.recover);
    let mut merge = |e: u64, prev: &[(PathBuf, Snapshot)], cur: &[(PathBuf, Snapshot)]| {
        engine::merge::epoch_report(e, prev, cur, recover)
    };
    let mut write_error = None;
    let mut on_report = |r: &NetReport| {
        let line = serde_json::to_string(r).unwrap_or_default();
        if let Err(e) = writeln!(out, "{line}").and_then(|_| out.flush()) {
            write_error.get_or_insert(e.to_string());
        }
    };
    let stop = || crate::signals::caught().is_some();
    let stats = rt.block_on(netwide::controller::run(
        &js,
        &opts,
        &mut merge,
        &mut on_report,
        &stop,
    ))?;
    if let Some(e) = write_error {
        anyhow::bail!("{e}");
    }
    crate::say!(
        "netsift: controller: {}",
        serde_json::to_string(&stats).unwrap_or_default()
    );
    Ok(true)
}
