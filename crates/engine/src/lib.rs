//! netsift's one run, behind every front door: open a [`Source`] with a validated
//! `measure::RunConfig`, and get the run as a stream of [`Event`]s (notes, the start, each
//! closed epoch's report, detections, warnings, progress, the finished report). The CLI's
//! `run`, `live`, `agent`, `merge`, `controller` and `demo`, the benches that drive whole runs and
//! `examples/embed.rs` consume these events (the coming Python package and web view are to do the
//! same); none assembles a runner itself.
//!
//! What lives here and not in a front door: reading the source and classifying its packets
//! ([`packet`]), choosing the epochs and the address family ([`epochs`], `family`), what a key
//! trace can answer, cancellation ([`Control`], not process-global state), the order in which a
//! consumer sees things (`emit`), live capture ([`live`]) and the network-wide merge of
//! snapshots ([`merge`]).
//!
//! ```no_run
//! let cfg = engine::config::standard()?; // every task, as `netsift run` with no flag
//! let run = engine::Run::new(cfg, engine::Source::Builtin)?;
//! run.run(&mut |e| {
//!     if let engine::Event::Epoch { report, .. } = e {
//!         println!("epoch {}: {} packets", report.index, report.packets);
//!     }
//!     Ok(())
//! })?;
//! # anyhow::Ok(())
//! ```

#![forbid(unsafe_code)]

pub mod config;
mod control;
mod emit;
pub mod epochs;
mod family;
pub mod live;
pub mod merge;
mod offline;
pub mod output;
pub mod packet;
pub mod stats;

use anyhow::Result;
use key::KeyKind;
use measure::instant::Detection;
use measure::{EpochReport, Report, RunConfig, Runner, ThresholdRule, Totals, Warning};
use serde::Serialize;
use trace::Format;
use truth::Weight;

pub use control::Control;
pub use packet::Packet;

/// What a run reads.
pub enum Source {
    /// `run`'s built-in trace: the generator's default model, [`builtin_spec`].
    Builtin,
    /// Packets of the generator (`gen`'s model), never written to a file.
    Gen(gen::Spec),
    /// A capture (pcap, pcapng) or key trace (keys4, keys13, keys21); `-` is standard input,
    /// read as it arrives. `format`: instead of detecting it.
    File {
        path: String,
        format: Option<Format>,
    },
    /// A capture or key trace already open (in memory: `trace::Capture::from_bytes`; a bench
    /// reading the same bytes in every round).
    Capture(trace::Capture),
    /// Packets captured from network interfaces as they arrive ([`live`]).
    Live(live::Interfaces),
    /// Hosts' epoch snapshots, merged and answered for the whole network ([`merge`]); the
    /// run's configuration is the snapshots' ([`Run::merge`]).
    Snapshots(merge::Snapshots),
}

impl Source {
    /// The source a configuration names: its `trace` (with its `format`), else the built-in
    /// trace.
    pub fn of_config(cfg: &RunConfig) -> Result<Source> {
        let format = cfg
            .format
            .as_deref()
            .map(str::parse::<Format>)
            .transpose()
            .map_err(|e| anyhow::anyhow!("config field `format`: {e}"))?;
        Ok(match &cfg.trace {
            Some(path) => Source::File {
                path: path.clone(),
                format,
            },
            None => Source::Builtin,
        })
    }
}

/// The built-in trace of `run`: the generator's default model, 4 M packets (two epochs).
pub fn builtin_spec() -> gen::Spec {
    gen::Spec {
        packets: 4_000_000,
        ..gen::Spec::default()
    }
}

/// A run as its consumer sees it, in this order: [`Event::Note`]s, [`Event::Started`], then
/// [`Event::Progress`], [`Event::Detection`]s and, per closed epoch, its [`Event::Warning`]s
/// followed by the [`Event::Epoch`]; last [`Event::Finished`].
#[derive(Debug)]
pub enum Event {
    /// What the run changed from what was asked (an epoch length chosen, IPv6 sizing, a key
    /// trace's key), before the first epoch.
    Note(String),
    /// The run is assembled: what it measures.
    Started(RunInfo),
    /// Packets read so far; `total` when known in advance (the generator).
    Progress { packets: u64, total: Option<u64> },
    /// A heavy hitter detected on the packet path (`instant`).
    Detection(Detection),
    /// Why an answer of the next epoch may be wrong (a cap reached, a degenerate threshold).
    Warning(Warning),
    /// An epoch closed: its report, and every packet read so far by class.
    Epoch {
        report: Box<EpochReport>,
        totals: Totals,
    },
    /// A live run was asked to re-read its configuration ([`Control::hangup`]); answer with
    /// [`Control::retune`] before returning.
    Hangup,
    /// The run's end: totals, costs, notes, and every warning. Its `epochs` are empty: each
    /// was an [`Event::Epoch`] ([`Run::report`] puts them back).
    Finished(Box<Report>),
}

/// The consumer of a run's events. An error ends the run: it is [`Run::run`]'s error.
pub type Sink<'a> = dyn FnMut(Event) -> Result<()> + 'a;

/// What the table's header says about a run: its trace, key, weight, epochs, seed, threshold
/// rules and the fast path's capacity.
#[derive(Clone, Debug, Serialize)]
pub struct RunInfo {
    pub trace: String,
    pub key: KeyKind,
    pub weight: Weight,
    /// The epoch length, with why it was chosen when it was.
    pub epoch: String,
    pub seed: u64,
    pub thresholds: Vec<ThresholdRule>,
    /// `--normal-capacity` (Mpps per worker) and the workers.
    pub capacity: Option<(f64, usize)>,
}

impl RunInfo {
    pub(crate) fn of_runner(r: &Runner) -> RunInfo {
        let cfg = r.config();
        RunInfo {
            trace: r.trace_name().to_string(),
            key: cfg.key,
            weight: cfg.weight,
            epoch: match &cfg.epoch_choice {
                Some(why) => format!("{} ({why})", r.epoch_label()),
                None => r.epoch_label(),
            },
            seed: cfg.seed,
            thresholds: ThresholdRule::of_config(cfg),
            capacity: cfg
                .sketchvisor
                .normal_capacity
                .map(|c| (c, cfg.workers.max(1))),
        }
    }

    /// The header of a finished report (`merge`, a run that emitted no epoch).
    pub fn of_report(r: &Report) -> RunInfo {
        RunInfo {
            trace: r.trace.clone(),
            key: r.key,
            weight: r.weight,
            epoch: match &r.epoch_choice {
                Some(why) => format!("{} ({why})", r.epoch),
                None => r.epoch.clone(),
            },
            seed: r.seed,
            thresholds: r.thresholds.clone(),
            capacity: r.normal_capacity.map(|c| (c, r.workers.max(1))),
        }
    }
}

/// How a run ended besides its report.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    /// The error that stopped reading the source (it names the file and offset); the report
    /// covers what was read before it.
    pub read_error: Option<String>,
    /// The stop code asked through [`Control`] when the run was cut short (its last epoch is
    /// partial).
    pub stopped: Option<i32>,
}

/// One run: a source and its configuration, validated.
pub struct Run {
    cfg: RunConfig,
    source: Source,
    control: Control,
    /// Packets between two [`Event::Progress`].
    progress_every: u64,
}

impl Run {
    /// A run of `cfg` over `source`: the configuration is checked against the source (a key
    /// trace's key and epochs) and validated here, before anything is read.
    pub fn new(mut cfg: RunConfig, source: Source) -> Result<Run> {
        match &source {
            Source::Snapshots(_) => {
                anyhow::bail!(
                    "snapshots carry their run's configuration: merge them with Run::merge"
                )
            }
            Source::File { path, format } => {
                cfg.trace = Some(path.clone());
                if let Some(f) = format {
                    cfg.format = Some(f.name().to_string());
                }
            }
            Source::Capture(cap) => {
                cfg.trace = Some(cap.name().to_string());
                cfg.format = Some(cap.format().name().to_string());
            }
            _ => {}
        }
        if let Source::Live(ifs) = &source {
            if let Some(f) = &ifs.bpf {
                live::check_bpf_size(f)?;
            }
        }
        config::key_trace(&mut cfg)?;
        cfg.validate()?;
        Ok(Run {
            cfg,
            source,
            control: Control::new(),
            progress_every: emit::PROGRESS_EVERY,
        })
    }

    /// The network-wide run of hosts' snapshots ([`merge`]): its configuration is the first
    /// snapshot's, validated here, before anything is merged or a truth trace read.
    pub fn merge(snapshots: merge::Snapshots) -> Result<Run> {
        let cfg = merge::config(&snapshots)?;
        cfg.validate()?;
        Ok(Run {
            cfg,
            source: Source::Snapshots(snapshots),
            control: Control::new(),
            progress_every: emit::PROGRESS_EVERY,
        })
    }

    /// The run's configuration as validated.
    pub fn config(&self) -> &RunConfig {
        &self.cfg
    }

    /// The handle that stops the run (clone it before [`Run::run`]).
    pub fn control(&self) -> Control {
        self.control.clone()
    }

    /// Run under `control` instead of a handle of its own (the CLI's, which its signal
    /// handlers set).
    pub fn with_control(mut self, control: Control) -> Run {
        self.control = control;
        self
    }

    /// An [`Event::Progress`] every `packets` packets (default 65,536; at least 1): a bench
    /// timing chunks of the run (`bench pipeline`'s tail latency).
    pub fn progress_every(mut self, packets: u64) -> Run {
        self.progress_every = packets.max(1);
        self
    }

    /// Read the source to its end, an error, or a stop, giving each [`Event`] to `sink` as it
    /// happens. An error of `sink` ends the run and is returned.
    pub fn run(self, sink: &mut Sink<'_>) -> Result<Outcome> {
        match self.source {
            Source::Live(ifs) => live::run(self.cfg, &ifs, &self.control, sink),
            Source::Snapshots(s) => merge::run(self.cfg, s, &self.control, sink),
            source => offline::run(self.cfg, source, &self.control, self.progress_every, sink),
        }
    }

    /// [`Run::run`], its report whole: every epoch in it, as `run --json` prints it.
    pub fn report(self) -> Result<(Report, Outcome)> {
        self.report_with(&mut |_| Ok(()))
    }

    /// [`Run::report`], every event but the epochs and the end also given to `sink` (notes,
    /// warnings, progress) as it happens.
    pub fn report_with(self, sink: &mut Sink<'_>) -> Result<(Report, Outcome)> {
        let mut epochs = vec![];
        let mut finished = None;
        let outcome = self.run(&mut |e| match e {
            Event::Epoch { report, .. } => {
                epochs.push(*report);
                Ok(())
            }
            Event::Finished(r) => {
                finished = Some(r);
                Ok(())
            }
            e => sink(e),
        })?;
        let mut report = *finished.ok_or_else(|| anyhow::anyhow!("the run did not finish"))?;
        report.epochs = epochs;
        Ok((report, outcome))
    }
}

/// A run on a thread of its own, its events pulled one at a time (a front door that iterates:
/// Python, a web view's event stream). At most [`Events::BOUND`] events wait unread: a slow
/// reader holds the run back rather than letting them grow. Dropping it stops the run.
pub struct Events {
    rx: Option<std::sync::mpsc::Receiver<Event>>,
    thread: Option<std::thread::JoinHandle<Result<Outcome>>>,
    control: Control,
}

impl Events {
    /// Events that may wait unread.
    pub const BOUND: usize = 256;

    /// The run's control (stop it from here).
    pub fn control(&self) -> Control {
        self.control.clone()
    }

    /// Wait for the run's end (the events not read are dropped): how it ended, or its error.
    pub fn finish(mut self) -> Result<Outcome> {
        self.join()
    }

    fn join(&mut self) -> Result<Outcome> {
        // The receiver goes first: a run blocked on a full channel sees it closed and ends.
        drop(self.rx.take());
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| anyhow::anyhow!("the run's thread panicked"))?,
            None => Ok(Outcome::default()),
        }
    }
}

impl Iterator for Events {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        self.rx.as_ref()?.recv().ok()
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.control.stop();
            let _ = self.join();
        }
    }
}

/// The consumer went away ([`Events`] dropped): the run ends.
#[derive(Debug, thiserror::Error)]
#[error("the run's events are no longer read")]
pub struct Gone;

impl Run {
    /// The run on a thread of its own, its events an iterator ([`Events`]).
    pub fn events(self) -> Result<Events> {
        let control = self.control();
        let (tx, rx) = std::sync::mpsc::sync_channel(Events::BOUND);
        let thread = std::thread::Builder::new()
            .name("netsift run".into())
            .spawn(move || self.run(&mut |e| tx.send(e).map_err(|_| Gone.into())))?;
        Ok(Events {
            rx: Some(rx),
            thread: Some(thread),
            control,
        })
    }
}

/// Why a reading loop was left early: a stop asked through [`Control`], or the consumer's
/// error. Carried out of the readers (which have no early exit) by unwinding
/// (`std::panic::resume_unwind`, which runs no panic hook and prints nothing).
pub(crate) enum Stop {
    Asked,
    Sink(anyhow::Error),
}

/// Leave the reading loop when a stop was asked (checked once per packet: one relaxed load).
#[inline]
pub(crate) fn stop_if_asked(control: &Control) {
    if control.stopped().is_some() {
        std::panic::resume_unwind(Box::new(Stop::Asked));
    }
}

/// Run a reading loop: `Ok(None)` when a stop cut it short (between two packets: the runner
/// holds every packet pushed before), `Err` when the consumer failed. Any other panic goes on
/// unwinding.
pub(crate) fn until_stop<T>(f: impl FnOnce() -> T) -> Result<Option<T>> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(v) => Ok(Some(v)),
        Err(p) => match p.downcast::<Stop>() {
            Ok(s) => match *s {
                Stop::Asked => Ok(None),
                Stop::Sink(e) => Err(e),
            },
            Err(p) => std::panic::resume_unwind(p),
        },
    }
}
