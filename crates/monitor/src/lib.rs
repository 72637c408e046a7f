//! What an operator watches while netsift runs: Prometheus metrics of every closed epoch
//! (`--metrics ADDR:PORT`) and alert rules (`[[alert]]` in the run's config) that fire and
//! resolve as JSON lines. Driven by whoever closes epochs (`netsift run`, `netsift live`): one
//! [`Monitor::epoch`] call per closed epoch, [`Monitor::reload`] on a new config,
//! [`Monitor::finish`] at the end. It reads only the report (`measure::report`).

mod alerts;
pub mod http;
mod metrics;
mod sinks;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use key::KeyKind;
use measure::rules::{check_rules, AlertRule};
use measure::{ConfigError, EpochReport, Report, Totals};
use truth::Weight;

pub use alerts::{Event, State};
pub use sinks::Console;

use alerts::Alerts;
use metrics::{Metrics, Server};
use sinks::{say, Sinks};

/// How the monitor serves metrics and where alerts go.
#[derive(Clone, Debug)]
pub struct MonitorOpts {
    /// `ADDR:PORT` of the metrics endpoint (port 0: any free port, see [`Monitor::metrics_addr`]).
    pub metrics: Option<String>,
    /// Keys of each task answer given as labels (the largest).
    pub top: usize,
    /// Append each event to this file, flushed per event.
    pub alerts_file: Option<PathBuf>,
    /// Run this shell command per event, the JSON line on its standard input.
    pub alert_exec: Option<String>,
    /// Kill the command after this long.
    pub exec_timeout: Duration,
    /// At most this many events per epoch; the rest are counted as suppressed.
    pub max_events_per_epoch: usize,
    /// At most this many keys with state per rule; new keys beyond are counted, not tracked.
    pub max_keys: usize,
    /// Where events go when neither a file nor a command is given.
    pub console: Console,
}

impl Default for MonitorOpts {
    fn default() -> Self {
        MonitorOpts {
            metrics: None,
            top: 10,
            alerts_file: None,
            alert_exec: None,
            exec_timeout: Duration::from_secs(5),
            max_events_per_epoch: 100,
            max_keys: 10_000,
            console: Console::Stdout,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    #[error("--metrics {addr}: {reason}")]
    Metrics { addr: String, reason: String },
    #[error("--alerts {}: {source}", path.display())]
    AlertsFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Rules(#[from] ConfigError),
}

/// What the monitor needs of the run beside the epoch: its header and what was read so far.
#[derive(Clone, Copy, Debug)]
pub struct Ctx<'a> {
    pub trace: &'a str,
    pub key: KeyKind,
    /// The run's weight: a rule's `fraction` is of the epoch's packets or bytes.
    pub weight: Weight,
    /// Every packet read so far, per class (`Runner::totals`); none when not known.
    pub totals: Option<&'a Totals>,
}

pub struct Monitor {
    metrics: Metrics,
    server: Option<Server>,
    alerts: Alerts,
    sinks: Sinks,
    max_events: usize,
    fired: u64,
    resolved: u64,
    suppressed: u64,
    /// When the previous epoch closed (or the monitor started): the epoch's wall time.
    last_close: Instant,
    epochs: u64,
    wall: Duration,
    spent: Duration,
}

impl Monitor {
    pub fn new(opts: MonitorOpts, rules: Vec<AlertRule>) -> Result<Monitor, MonitorError> {
        check_rules(&rules)?;
        let sinks = Sinks::new(
            opts.console,
            opts.alerts_file.as_deref(),
            opts.alert_exec.as_deref().map(|c| (c, opts.exec_timeout)),
        )
        .map_err(|source| MonitorError::AlertsFile {
            path: opts.alerts_file.clone().unwrap_or_default(),
            source,
        })?;
        let metrics = Metrics::new(opts.top);
        let server = match &opts.metrics {
            Some(a) => {
                let bad = |reason: String| MonitorError::Metrics {
                    addr: a.clone(),
                    reason,
                };
                let addr: SocketAddr = a
                    .to_socket_addrs()
                    .map_err(|e| bad(format!("not an ADDR:PORT ({e})")))?
                    .next()
                    .ok_or_else(|| bad("resolves to no address".into()))?;
                Some(
                    Server::start(addr, &metrics)
                        .map_err(|e| bad(format!("cannot listen: {e}")))?,
                )
            }
            None => None,
        };
        Ok(Monitor {
            metrics,
            server,
            alerts: Alerts::new(rules, opts.max_keys),
            sinks,
            max_events: opts.max_events_per_epoch,
            fired: 0,
            resolved: 0,
            suppressed: 0,
            last_close: Instant::now(),
            epochs: 0,
            wall: Duration::ZERO,
            spent: Duration::ZERO,
        })
    }

    /// The address the metrics endpoint listens on (the port chosen when 0 was asked).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.server.as_ref().map(|s| s.addr)
    }

    /// The metrics as a scrape would return them.
    pub fn metrics_text(&self) -> String {
        self.metrics.text()
    }

    /// One closed epoch: update the metrics, step the rules, send their events (at most
    /// `max_events_per_epoch`; the rest counted as suppressed). Returns the events sent.
    pub fn epoch(&mut self, e: &EpochReport, ctx: &Ctx) -> Vec<Event> {
        let start = Instant::now();
        let wall = start.duration_since(self.last_close);
        let mut events = self.alerts.epoch(e, ctx.weight);
        let suppressed = events.len().saturating_sub(self.max_events);
        events.truncate(self.max_events);
        {
            let shared = self.metrics.shared();
            let mut reg = metrics::lock(&shared);
            self.metrics
                .run_info(ctx.trace, ctx.key.name(), ctx.weight.name());
            if let Some(t) = ctx.totals {
                self.metrics.totals(t);
            }
            self.metrics.epoch(&mut reg, e, Some(wall.as_secs_f64()));
            for ev in &events {
                self.metrics
                    .alerts
                    .get_or_create(&vec![
                        ("rule".to_string(), ev.rule.clone()),
                        ("state".to_string(), ev.state.name().to_string()),
                    ])
                    .inc();
            }
            self.metrics.suppressed.inc_by(suppressed as u64);
            self.metrics.keys_tracked.clear();
            for (r, n) in self.alerts.rules() {
                self.metrics
                    .keys_tracked
                    .get_or_create(&vec![("rule".to_string(), r.name.clone())])
                    .set(n as f64);
            }
            self.metrics
                .keys_dropped
                .set(self.alerts.keys_dropped as f64);
            self.exec_gauges();
        }
        for ev in &events {
            match ev.state {
                State::Firing => self.fired += 1,
                State::Resolved => self.resolved += 1,
            }
            self.sinks.send(&event_line(ev));
        }
        if suppressed > 0 && self.suppressed == 0 {
            say(format_args!(
                "alerts: more than {} events in epoch {}: the rest are suppressed (counted)",
                self.max_events, e.index
            ));
        }
        self.suppressed += suppressed as u64;
        let spent = start.elapsed();
        self.metrics.set_monitor_epoch(spent.as_secs_f64());
        self.last_close = Instant::now();
        self.epochs += 1;
        self.wall += wall;
        self.spent += spent;
        events
    }

    /// New rules (SIGHUP): checked first; on an error the old rules stay. A rule that is
    /// unchanged keeps its keys' state.
    pub fn reload(&mut self, rules: Vec<AlertRule>) -> Result<(), MonitorError> {
        check_rules(&rules)?;
        self.alerts.reload(rules);
        Ok(())
    }

    /// Events suppressed by the rate limit so far.
    pub fn suppressed(&self) -> u64 {
        self.suppressed
    }

    /// The end of the run: the report's totals and costs into the metrics (which keep serving
    /// until the monitor is dropped), the command's queue drained, a summary on stderr.
    pub fn finish(&mut self, report: Option<&Report>) {
        if let Some(r) = report {
            let shared = self.metrics.shared();
            let mut reg = metrics::lock(&shared);
            self.metrics.totals(&r.totals);
            self.metrics.costs(&mut reg, &r.throughput);
        }
        self.sinks.finish();
        {
            let shared = self.metrics.shared();
            let _reg = metrics::lock(&shared);
            self.exec_gauges();
        }
        if self.epochs > 0 {
            say(format_args!(
                "monitor: {} epochs, {:.3} ms an epoch in metrics and alerts, {:.4}% of the \
                 {:.1} ms between epoch closes",
                self.epochs,
                1e3 * self.spent.as_secs_f64() / self.epochs as f64,
                100.0 * self.spent.as_secs_f64() / self.wall.as_secs_f64().max(1e-9),
                1e3 * self.wall.as_secs_f64() / self.epochs as f64
            ));
        }
        if self.alerts.rules().next().is_some() {
            let exec = self
                .sinks
                .exec_counts()
                .map(|c| {
                    use std::sync::atomic::Ordering::Relaxed;
                    format!(
                        "; alert-exec: {} runs, {} failed ({} timed out and killed, {} dropped \
                         on a full queue)",
                        c.runs.load(Relaxed),
                        c.failed.load(Relaxed),
                        c.timed_out.load(Relaxed),
                        c.queue_full.load(Relaxed)
                    )
                })
                .unwrap_or_default();
            say(format_args!(
                "alerts: {} fired, {} resolved, {} suppressed (at most {} an epoch){exec}",
                self.fired, self.resolved, self.suppressed, self.max_events
            ));
        }
    }

    fn exec_gauges(&self) {
        if let Some(c) = self.sinks.exec_counts() {
            use std::sync::atomic::Ordering::Relaxed;
            self.metrics.exec_failed.set(c.failed.load(Relaxed) as f64);
            self.metrics
                .exec_timed_out
                .set(c.timed_out.load(Relaxed) as f64);
        }
    }
}

/// An event as its one JSON line (`"type": "alert"`, so it can share a `--json-lines` stream).
pub fn event_line(ev: &Event) -> String {
    let mut v = serde_json::to_value(ev).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("type".into(), "alert".into());
    }
    v.to_string()
}
