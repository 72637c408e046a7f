//! From a runner's state to the run's events: the one place that decides what a consumer sees
//! and in which order (notes, the start, each epoch's warnings then the epoch, detections,
//! progress, the end), so `run`, `live` and `merge` emit alike.

use measure::{EpochReport, Report, Runner, Warning};

use crate::{Event, RunInfo, Sink, Stop};

/// Packets between two [`Event::Progress`]: rare enough to cost nothing per packet.
pub(crate) const PROGRESS_EVERY: u64 = 1 << 16;

pub(crate) struct Emit<'s> {
    sink: &'s mut Sink<'s>,
    /// The last epoch warned about: an epoch's warnings are emitted once.
    warned: Option<u64>,
    /// Every warning emitted: the report's `warnings` at the end (the runner's report holds
    /// only the epochs not yet taken).
    warnings: Vec<Warning>,
    /// Completed epochs the runner held at the last look (they are taken at once, so 0 but
    /// between a close and its emission).
    seen: usize,
    packets: u64,
    total: Option<u64>,
    /// Packets between two [`Event::Progress`], and those left before the next: a countdown,
    /// so that the packet path pays a decrement, not a division.
    every: u64,
    left: u64,
}

impl<'s> Emit<'s> {
    pub(crate) fn new(sink: &'s mut Sink<'s>, total: Option<u64>, every: u64) -> Emit<'s> {
        Emit {
            sink,
            warned: None,
            warnings: vec![],
            seen: 0,
            packets: 0,
            total,
            every: every.max(1),
            left: every.max(1),
        }
    }

    /// One event to the consumer; its error ends the run.
    pub(crate) fn send(&mut self, e: Event) -> anyhow::Result<()> {
        (self.sink)(e)
    }

    /// [`Emit::send`] inside a reading loop, which has no early exit: an error unwinds to
    /// [`crate::until_stop`].
    pub(crate) fn send_or_unwind(&mut self, e: Event) {
        if let Err(err) = self.send(e) {
            std::panic::resume_unwind(Box::new(Stop::Sink(err)));
        }
    }

    /// The runner's notes, then the run's start (what the table's header says).
    pub(crate) fn start(&mut self, runner: &Runner) -> anyhow::Result<()> {
        for n in runner.notes() {
            self.send(Event::Note(n.clone()))?;
        }
        self.send(Event::Started(RunInfo::of_runner(runner)))?;
        self.send(Event::Progress {
            packets: 0,
            total: self.total,
        })
    }

    /// After each packet pushed: the epochs that closed and the detections made go out, and
    /// every so many packets ([`PROGRESS_EVERY`] by default) the progress.
    #[inline]
    pub(crate) fn after(&mut self, runner: &mut Runner) {
        self.after_n(runner, 1);
    }

    /// [`Emit::after`] a block of `n` packets (keys4 blocks: epochs close inside a block, and
    /// their reports wait for its end, at most `trace::KEYS4_BLOCK` packets later).
    #[inline]
    pub(crate) fn after_n(&mut self, runner: &mut Runner, n: u64) {
        if runner.completed_epochs().len() != self.seen || runner.has_detections() {
            if let Err(err) = self.closed(runner) {
                std::panic::resume_unwind(Box::new(Stop::Sink(err)));
            }
        }
        self.packets += n;
        if n >= self.left {
            self.left = self.every - (n - self.left) % self.every;
            self.send_or_unwind(Event::Progress {
                packets: self.packets,
                total: self.total,
            });
        } else {
            self.left -= n;
        }
    }

    /// The detections made since the last call.
    pub(crate) fn detections(&mut self, runner: &mut Runner) -> anyhow::Result<()> {
        for d in runner.take_detections() {
            self.send(Event::Detection(d))?;
        }
        Ok(())
    }

    /// The detections made and the epochs closed since the last call.
    pub(crate) fn closed(&mut self, runner: &mut Runner) -> anyhow::Result<()> {
        self.detections(runner)?;
        let es = runner.take_completed();
        self.seen = runner.completed_epochs().len();
        let totals = runner.totals().clone();
        self.epochs(es, &totals)
    }

    /// Epochs in order: each one's warnings, then the epoch.
    pub(crate) fn epochs(
        &mut self,
        es: Vec<EpochReport>,
        totals: &measure::Totals,
    ) -> anyhow::Result<()> {
        for e in es {
            if self.warned.is_none_or(|l| e.index > l) {
                for w in Warning::of(&e).collect::<Vec<_>>() {
                    self.warnings.push(w.clone());
                    self.send(Event::Warning(w))?;
                }
                self.warned = Some(e.index);
            }
            self.send(Event::Epoch {
                report: Box::new(e),
                totals: totals.clone(),
            })?;
        }
        Ok(())
    }

    /// The end: the detections not yet emitted, the epochs the report still holds, then the
    /// report (its epochs all emitted before it, so empty; its warnings every one emitted).
    pub(crate) fn finish(&mut self, mut report: Report) -> anyhow::Result<()> {
        if let Some(i) = &mut report.instant {
            for d in std::mem::take(&mut i.unprinted) {
                self.send(Event::Detection(d))?;
            }
        }
        let es = std::mem::take(&mut report.epochs);
        let totals = report.totals.clone();
        self.epochs(es, &totals)?;
        report.warnings = std::mem::take(&mut self.warnings);
        self.send(Event::Finished(Box::new(report)))
    }
}
