//! `netsift agent`: a `run` whose epoch snapshots are published to NATS JetStream (crate
//! `netwide`): the run writes each answered epoch's snapshot into the spool (`--spool`, as
//! `run --snapshots` does), and a publisher on its own thread sends every spooled file to
//! `netsift.snapshots.<host>`, removing it when JetStream acknowledges it. At the end of the
//! trace the agent waits (at most `--drain-timeout-ms`) for its spool to empty; what is left is
//! sent first by the next start. The input is a trace, as `run`'s (every `run` flag applies),
//! or live traffic with `--iface`, measured as `live` does (its capture options; time epochs
//! on the Unix-time grid so that every host's epoch i is the same span).
//!
//! What goes wrong (docs/netwide.md, "Agent"): a snapshot the run cannot write (a full disk)
//! is dropped and counted while capture goes on; a snapshot over the server's announced
//! `max_payload` is kept as `*.too-large`; a corrupt or foreign spool file is moved to
//! `<spool>/rejected/`; a permissions violation stops the run and is the agent's error. The
//! closing line counts each, and the exit status is 1 when a snapshot of the run was not
//! delivered.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use netwide::creds::Broker;

use crate::flags;
use crate::out::Out;
use crate::run::RunCmd;

/// Where a broker is and how to log in: shared by `agent` and `controller`.
#[derive(Args, Clone)]
pub struct BrokerArgs {
    /// NATS server URL (`nats://host:4222`; `tls://` or --tls-ca for TLS).
    #[arg(long, value_name = "URL")]
    pub nats: String,
    /// Credentials file (TOML: `user` and `password`, or `nkey_seed`; never on the command
    /// line). See docs/netwide.md.
    #[arg(long, value_name = "FILE")]
    pub creds: PathBuf,
    /// CA certificate (PEM) to check the server's TLS certificate: TLS is then required.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
}

impl BrokerArgs {
    /// The broker as user `name` with reply subjects under `inbox` (`netwide::agent_inbox`,
    /// `netwide::CONTROLLER_INBOX`: the server lets each user read its own only).
    pub fn broker(&self, name: &str, inbox: &str) -> Broker {
        Broker {
            url: self.nats.clone(),
            creds: self.creds.clone(),
            tls_ca: self.tls_ca.clone(),
            name: name.to_string(),
            inbox: inbox.to_string(),
        }
    }
}

#[derive(Args)]
pub struct AgentArgs {
    /// The input: a trace (as `run`), or live traffic with `--iface` (as `live`).
    #[command(flatten)]
    pub run: RunCmd,
    #[command(flatten)]
    pub capture: crate::live::CaptureArgs,
    #[command(flatten)]
    pub broker: BrokerArgs,
    /// Directory of the snapshots waiting for the broker's acknowledgement (created if
    /// missing; a restarted agent sends what it holds first).
    #[arg(long, value_name = "DIR")]
    pub spool: PathBuf,
    /// Most snapshots the spool holds; past it the oldest are dropped (counted, reported).
    #[arg(long, default_value_t = 1000, allow_negative_numbers = true,
          value_parser = flags::whole::<usize>(1..=u64::MAX))]
    pub spool_max_files: usize,
    /// Most bytes the spool holds (`500M`, `2G`); past it the oldest are dropped.
    #[arg(long, default_value = "1G", value_parser = flags::bytes)]
    pub spool_max_bytes: u64,
    /// At the end of the trace, how long to wait for the spool to empty (ms).
    #[arg(long, default_value_t = 30_000, allow_negative_numbers = true,
          value_parser = flags::whole::<u64>(0..=86_400_000))]
    pub drain_timeout_ms: u64,
    /// How long one publication waits for JetStream's acknowledgement before it is retried (ms).
    #[arg(long, default_value_t = 5_000, allow_negative_numbers = true,
          value_parser = flags::whole::<u64>(1..=600_000))]
    pub ack_timeout_ms: u64,
}

pub fn cmd_agent(a: AgentArgs, out: &mut Out) -> Result<bool> {
    // Rejections and retries are logged (RUST_LOG, default warn), as `live` logs.
    crate::live::init_logs(Some(
        &std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
    ))?;
    let mut run = a.run;
    let Some(host) = run.args.host.clone() else {
        bail!("agent: --host ID is required (the subject netsift.snapshots.ID)");
    };
    if run.args.snapshots.is_some() {
        bail!("agent: snapshots go to --spool DIR, not --snapshots");
    }
    let mut spool = netwide::spool::Spool::open(&a.spool, a.spool_max_files, a.spool_max_bytes)?;
    run.args.snapshots = Some(a.spool.display().to_string());
    // A snapshot the run cannot write (a full disk) is dropped and counted; capture goes on.
    let unwritten = measure::snap::Unwritten::default();
    run.args.unwritten = Some(unwritten.clone());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("agent: cannot start the async runtime")?;
    let broker = a.broker.broker(
        &format!("netsift-agent-{host}"),
        &netwide::agent_inbox(&host),
    );
    let timeout = Duration::from_millis(a.ack_timeout_ms);
    // The server's asynchronous errors: a permissions violation stops the publisher.
    let errors = netwide::creds::ServerErrors::default();
    // Refused credentials or a server whose TLS certificate does not chain to --tls-ca end
    // the agent at once; a broker that is away is waited for while the run spools.
    let mut reached = true;
    let client = match rt.block_on(broker.connect_watched(timeout, false, Some(&errors))) {
        Ok(c) => c,
        Err(
            e @ (netwide::Error::Refused { .. }
            | netwide::Error::Creds(_)
            | netwide::Error::Tls { .. }),
        ) => bail!("{e}"),
        Err(e) => {
            crate::say!("netsift: agent: {e}; spooling and retrying");
            reached = false;
            rt.block_on(broker.connect_watched(timeout, true, Some(&errors)))?
        }
    };
    // The JetStream context spawns its acknowledgement task on the runtime.
    let _enter = rt.enter();
    let js = async_nats::jetstream::new(client);
    // One agent per host id (`netwide::lease`). With the broker there, a second agent with this
    // --host is refused before it measures anything; with the broker away, the lease is taken
    // before the first publication (a refusal then keeps the spool and ends the agent non-zero).
    let lease = std::sync::Arc::new(tokio::sync::Mutex::new(None::<netwide::lease::Lease>));
    let wait = netwide::LEASE_TTL + Duration::from_secs(2);
    if reached {
        match rt.block_on(netwide::lease::take(&js, &host, wait, errors.subscribe())) {
            Ok(l) => *lease.blocking_lock() = Some(l),
            Err(e @ netwide::Error::Lease(_)) => bail!("agent: {e}"),
            Err(netwide::Error::Denied(e)) => bail!(
                "agent {host}: the server refused ({e}): check that --creds are host {host}'s"
            ),
            Err(e) => {
                crate::say!("netsift: agent {host}: {e}; the lease is taken before publishing")
            }
        }
    }
    let opts = netwide::publish::Options {
        ack_timeout: timeout,
        ..netwide::publish::Options::new(&host)
    };
    let (drain, drain_rx) = tokio::sync::watch::channel(None);
    let drain = std::sync::Arc::new(drain);
    let lost = std::sync::Arc::new(std::sync::Mutex::new(None::<String>));
    let errors_rx = errors.subscribe();
    let publisher = {
        let (lease, drain, lost, host) = (lease.clone(), drain.clone(), lost.clone(), host.clone());
        rt.spawn(async move {
            match netwide::lease::hold(&js, &host, &lease, &drain, &lost, &errors_rx).await {
                Ok(()) => {}
                Err(e @ netwide::Error::Lease(_)) => return (Err(e), spool),
                // Not this host's credentials: nothing can be sent; the run stops.
                Err(netwide::Error::Denied(d)) => {
                    crate::signals::stop();
                    let stats = netwide::publish::Stats {
                        left: spool.pending().map_or(0, |p| p.len()),
                        denied: Some(d),
                        ..Default::default()
                    };
                    return (Ok(stats), spool);
                }
                // The broker did not answer before the run ended: everything stays spooled.
                Err(e) => {
                    tracing::warn!("{e}");
                    let left = spool.pending().map_or(0, |p| p.len());
                    let stats = netwide::publish::Stats {
                        left,
                        ..Default::default()
                    };
                    return (Ok(stats), spool);
                }
            }
            let stats = netwide::publish::run(&js, &mut spool, &opts, errors_rx, drain_rx).await;
            // Denied: nothing this run spools can be sent; the run stops as at a signal.
            if matches!(&stats, Ok(s) if s.denied.is_some()) {
                crate::signals::stop();
            }
            (stats, spool)
        })
    };
    // A trace's run stopped by SIGINT/SIGTERM closes its open epoch as partial and returns
    // here (rather than exiting as `run` does): the spool is drained as at the end of the
    // trace, bounded by --drain-timeout-ms, then the agent exits with the signal's status.
    let traced = a.capture.ifaces.is_empty();
    let ok = if traced {
        crate::run::run_trace(run, out, false)?
    } else {
        if run.trace.is_some() || run.format.is_some() {
            bail!("agent: a TRACE (and --format) or --iface, not both");
        }
        let live = crate::live::LiveArgs {
            capture: a.capture,
            log: None,
            run: run.args,
        };
        crate::live::cmd_live(live, out)?
    };
    let _ = drain.send(Some(
        Instant::now() + Duration::from_millis(a.drain_timeout_ms),
    ));
    let (stats, spool) = rt
        .block_on(publisher)
        .context("agent: the publisher failed")?;
    if let Some(l) = rt.block_on(lease.lock()).take() {
        if let Err(e) = rt.block_on(l.release()) {
            crate::say!("netsift: agent {host}: releasing the lease: {e}");
        }
    }
    let stats = match stats {
        Err(e @ netwide::Error::Lease(_)) => {
            bail!("agent: {e}; the spool {} is kept", a.spool.display())
        }
        s => s?,
    };
    if let Some(e) = lost.lock().ok().and_then(|l| l.clone()) {
        bail!("agent: {e}; the spool {} is kept", a.spool.display());
    }
    let unwritten = unwritten.log();
    let names = |v: &[String]| {
        if v.is_empty() {
            String::new()
        } else {
            format!(": {}", v.join(", "))
        }
    };
    crate::say!(
        "netsift: agent {host}: {} snapshots published, {} duplicates, {} failed attempts, {} \
         dropped (spool full{}), {} not written{}, {} too large{}, {} rejected{}, {} left in {}",
        stats.published,
        stats.duplicates,
        stats.failures,
        spool.dropped,
        if spool.dropped_epochs.is_empty() {
            String::new()
        } else {
            format!(": epochs {:?}", spool.dropped_epochs)
        },
        unwritten.count,
        match &unwritten.reason {
            Some(r) => format!(" (epochs {:?}; last: {r})", unwritten.epochs),
            None => String::new(),
        },
        stats.too_large,
        names(&stats.too_large_files),
        stats.rejected,
        names(&stats.rejected_files),
        stats.left,
        spool.dir().display()
    );
    if let Some(e) = &stats.denied {
        bail!(
            "agent {host}: the server refused the publication ({e}): check that --creds are \
             host {host}'s; the spool keeps what was not sent"
        );
    }
    if stats.left > 0 {
        crate::say!(
            "netsift: error: agent {host}: the spool did not empty within --drain-timeout-ms {}: it is \
             sent first by the next start",
            a.drain_timeout_ms
        );
        return Ok(false);
    }
    let lost = spool.dropped + unwritten.count + stats.too_large;
    if lost > 0 {
        crate::say!(
            "netsift: error: agent {host}: {lost} snapshots not delivered (dropped, not written or too \
             large; see above)"
        );
        return Ok(false);
    }
    // As `run` (a trace cut short: 130/143); `live` ends 0 at a signal.
    if let (true, Some(code)) = (traced, crate::signals::caught()) {
        out.flush()?;
        std::process::exit(code);
    }
    Ok(ok)
}
