//! Epoch-end work off the packet path (issue 13, point 2): answering epoch e (merging the
//! workers' states, the queries, decoding, MRAC's EM, scoring against the truth) runs on its own
//! thread while the reader and the workers measure epoch e+1.
//!
//! Double buffering: at an epoch's end the packet path swaps each instance's state for an empty
//! one (a spare this thread reset and sent back, or a reset copy) and sends the finished state
//! here with the epoch's truth ([`Job`]); this thread answers, keeps what heavy changers compare
//! against (the previous epoch's state and truth), and sends reports and reset spares back.
//! Reports come back in epoch order (one thread, one queue). States rotate within a fixed budget
//! (`runner::Instance::budget`): per instance the state measuring, the one handed over (queued or
//! being answered) and the previous epoch's (with workers: one measuring and one handed over per
//! worker); with all made, the reader waits for a spare, so memory stays bounded.
//!
//! The answers are those the packet path would have computed itself: same states, same truth,
//! same code (`evaluate`, `answer_only`); only the thread differs.

use std::cell::Cell;
use std::thread::JoinHandle;

use algo::Algorithm;
use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use key::KeyKind;
use truth::EpochTruth;

use crate::config::RunConfig;
use crate::evaluate::{answer_only, evaluate};
use crate::instance::{Measure, Peers, UpdateSpent};
use crate::report::{EpochCost, EpochReport, TaskResult};
use crate::workers::{Handover, WorkerFailure, ANSWERS};

/// What an instance's finished state is, as the packet path hands it over.
pub(crate) enum States {
    /// The runner's own plane measured: its states, one per instance, with what their updates
    /// cost this epoch.
    Ready(Vec<(Box<dyn Algorithm>, UpdateSpent)>),
    /// Workers measured: their hand-overs arrive on these (one per worker, in worker order) and
    /// merge here into one state per instance.
    Workers(Vec<Receiver<Handover>>),
}

/// One finished epoch.
pub(crate) struct Job {
    pub(crate) states: States,
    /// Per key kind (with workers: totals only; the flows arrive with the hand-overs).
    pub(crate) truth: Vec<EpochTruth>,
    /// How much of the epoch the capture saw (partial: it started after the epoch's start,
    /// or a signal cut it short).
    pub(crate) cover: crate::report::EpochCover,
    /// Without ground truth, the spreader tasks' base: the distinct (source, destination)
    /// addresses the packet path saw (with workers, their parts come with their hand-overs).
    pub(crate) peers: Option<Peers>,
    /// With a fast path: the epoch's packets per path and each key kind's fast-path summary
    /// (`visor::recovered`).
    pub(crate) fast: Option<visor::EpochPart>,
    /// New thresholds and k per measure (`Runner::retune`), from this epoch on.
    pub(crate) retune: Option<Vec<(Option<f64>, Option<usize>)>>,
}

/// Per instance, what answering keeps between epochs.
struct Slot {
    /// The previous epoch's state (heavy changers against the last epoch).
    prev: Option<Box<dyn Algorithm>>,
    wants_prev: bool,
    /// Reset returns it to its built state (catalog `resets_to_empty`): a used state can be
    /// reset here and sent back as the next epoch's empty one.
    reusable: bool,
    query_nanos: Cell<u128>,
    peak_memory: usize,
    /// The instance's algorithm and key kind, as the report names them.
    name: String,
    kind: KeyKind,
}

/// What the answer thread measured, handed back when it ends.
pub(crate) struct Spent {
    /// Per instance: time spent in its queries, and its largest memory at an epoch's end.
    pub(crate) query_nanos: Vec<u128>,
    pub(crate) peak_memory: Vec<usize>,
}

/// Where epochs are answered.
enum Mode {
    /// On the answer thread (the default).
    Thread {
        jobs: Option<Sender<Job>>,
        /// The thread gives its answerer back when it ends (its senders are dropped then: a
        /// wait for a spare ends too).
        handle: Option<JoinHandle<Answerer>>,
    },
    /// On the caller's thread, as each epoch closes (`Runner::answer_inline`: a stream whose
    /// reads may block shows each epoch when it closes, not when the next read returns).
    Inline(Box<Answerer>, Outlets),
}

/// What the packet path holds of the answering.
pub(crate) struct Answers {
    mode: Mode,
    reports: Receiver<Result<EpochReport, WorkerFailure>>,
    /// Reset states, by instance, for the packet path's next swap.
    spares: Receiver<(usize, Box<dyn Algorithm>)>,
    /// Emptied truth tables (capacity kept: the next epoch's inserts do not grow a table again).
    truths: Receiver<Vec<EpochTruth>>,
    /// A failure of the thread itself (a panic outside an epoch's answer).
    failure: Option<WorkerFailure>,
}

/// Where the answerer sends what it produces.
#[derive(Clone)]
struct Outlets {
    reports: Sender<Result<EpochReport, WorkerFailure>>,
    spares: Sender<(usize, Box<dyn Algorithm>)>,
    truths: Sender<Vec<EpochTruth>>,
}

/// The receiving ends of [`Outlets`].
type Inlets = (
    Receiver<Result<EpochReport, WorkerFailure>>,
    Receiver<(usize, Box<dyn Algorithm>)>,
    Receiver<Vec<EpochTruth>>,
);

impl Outlets {
    fn new() -> (Outlets, Inlets) {
        let (reports, report_rx) = unbounded();
        let (spares, spare_rx) = unbounded();
        let (truths, truth_rx) = unbounded();
        (
            Outlets {
                reports,
                spares,
                truths,
            },
            (report_rx, spare_rx, truth_rx),
        )
    }

    /// Answer `job` on this thread; a panic in a query is the epoch's failure, named, not a
    /// hang or a lost report. Returns whether answering can go on.
    fn answer(&self, a: &mut Answerer, job: Job) -> bool {
        let epoch = job.truth.first().map_or(0, |t| t.index);
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            a.answer(job, &self.spares, &self.truths)
        }))
        .unwrap_or_else(|e| {
            Err(WorkerFailure {
                worker: ANSWERS,
                epoch,
                message: crate::workers::panic_message(e),
            })
        });
        let failed = out.is_err();
        self.reports.send(out).is_ok() && !failed
    }
}

/// What the answer thread knows of an instance.
pub(crate) struct Shape {
    /// Heavy changers keep its previous epoch's state.
    pub(crate) wants_prev: bool,
    /// A reset state is as good as a new one (catalog `resets_to_empty`).
    pub(crate) reusable: bool,
    pub(crate) name: String,
    pub(crate) kind: KeyKind,
}

impl Answers {
    /// Start answering a run of `cfg` whose instances are shaped `shape`, answering `measures`
    /// on key kinds `kinds`, on its own thread.
    pub(crate) fn start(
        cfg: RunConfig,
        kinds: Vec<KeyKind>,
        measures: Vec<Measure>,
        shape: Vec<Shape>,
        clock_ns: f64,
    ) -> Answers {
        let (out, (reports, spares, truths)) = Outlets::new();
        let slots = shape
            .into_iter()
            .map(|s| Slot {
                prev: None,
                wants_prev: s.wants_prev,
                reusable: s.reusable,
                query_nanos: Cell::new(0),
                peak_memory: 0,
                name: s.name,
                kind: s.kind,
            })
            .collect();
        let mut a = Answerer {
            cfg,
            kinds,
            measures,
            slots,
            prev_truth: vec![],
            epochs: 0,
            clock_ns,
        };
        // One job queued at most: a reader more than an epoch ahead of the answers waits.
        let (jobs, job_rx) = bounded::<Job>(1);
        // The thread holds the only senders: when it ends, a wait for a spare ends too.
        let handle = std::thread::Builder::new()
            .name("netsift-answers".into())
            .spawn(move || {
                while let Ok(job) = job_rx.recv() {
                    if !out.answer(&mut a, job) {
                        break;
                    }
                }
                a
            })
            .expect("spawning the answer thread");
        Answers {
            mode: Mode::Thread {
                jobs: Some(jobs),
                handle: Some(handle),
            },
            reports,
            spares,
            truths,
            failure: None,
        }
    }

    /// From now on answer on the caller's thread, as each epoch closes: the thread ends
    /// (after what it was given) and hands its answerer over. A panic there stays a failure.
    pub(crate) fn inline(&mut self) {
        let Mode::Thread { jobs, handle } = &mut self.mode else {
            return;
        };
        drop(jobs.take());
        match handle.take().map(|h| h.join()) {
            Some(Ok(a)) => {
                // The thread answered nothing: new channels, this thread's.
                let (out, (reports, spares, truths)) = Outlets::new();
                (self.reports, self.spares, self.truths) = (reports, spares, truths);
                self.mode = Mode::Inline(Box::new(a), out);
            }
            Some(Err(e)) => {
                self.failure = Some(WorkerFailure {
                    worker: ANSWERS,
                    epoch: 0,
                    message: crate::workers::panic_message(e),
                });
            }
            None => {}
        }
    }

    /// Hand a finished epoch over; on the answer thread, waits while the previous one is still
    /// queued. An error means answering has stopped (its failure is among the reports).
    pub(crate) fn send(&mut self, job: Job) -> Result<(), ()> {
        match &mut self.mode {
            Mode::Thread { jobs, .. } => jobs.as_ref().ok_or(())?.send(job).map_err(|_| ()),
            Mode::Inline(a, out) => {
                if out.answer(a, job) {
                    Ok(())
                } else {
                    Err(())
                }
            }
        }
    }

    /// The next report answered, in epoch order, without waiting.
    pub(crate) fn next_ready(&self) -> Option<Result<EpochReport, WorkerFailure>> {
        self.reports.try_recv().ok()
    }

    /// The reset states that came back, by instance, without waiting.
    pub(crate) fn spares(&self) -> impl Iterator<Item = (usize, Box<dyn Algorithm>)> + '_ {
        self.spares.try_iter()
    }

    /// The next reset state to come back (waiting for it); `None` once answering has stopped.
    pub(crate) fn next_spare(&self) -> Option<(usize, Box<dyn Algorithm>)> {
        match &self.mode {
            Mode::Thread { .. } => self.spares.recv().ok(),
            Mode::Inline(..) => self.spares.try_recv().ok(),
        }
    }

    /// An emptied set of truth tables, if one came back.
    pub(crate) fn truth_tables(&self) -> Option<Vec<EpochTruth>> {
        self.truths.try_iter().last()
    }

    /// Wait for every job handed over: the remaining reports in order, then what was spent. A
    /// panic of the answer thread comes back as a failure naming it.
    pub(crate) fn finish(
        self,
    ) -> (
        Vec<Result<EpochReport, WorkerFailure>>,
        Result<Spent, WorkerFailure>,
    ) {
        let Answers {
            mode,
            reports,
            failure,
            ..
        } = self;
        let spent = match mode {
            Mode::Inline(a, _) => Ok(a.spent()),
            Mode::Thread { jobs, handle } => {
                drop(jobs);
                match handle.map(|h| h.join()) {
                    Some(Ok(a)) => Ok(a.spent()),
                    Some(Err(e)) => Err(WorkerFailure {
                        worker: ANSWERS,
                        epoch: 0,
                        message: crate::workers::panic_message(e),
                    }),
                    None => Err(failure.unwrap_or(WorkerFailure {
                        worker: ANSWERS,
                        epoch: 0,
                        message: "stopped".into(),
                    })),
                }
            }
        };
        (reports.try_iter().collect(), spent)
    }
}

/// The answer thread's state.
struct Answerer {
    cfg: RunConfig,
    kinds: Vec<KeyKind>,
    measures: Vec<Measure>,
    slots: Vec<Slot>,
    /// Per key kind, the previous epoch's truth (empty before the first epoch is answered).
    prev_truth: Vec<EpochTruth>,
    /// Epochs answered.
    epochs: u64,
    /// What one timed region costs with nothing in it (`runner::clock_overhead_ns`), taken
    /// from each timed batch's time.
    clock_ns: f64,
}

impl Answerer {
    fn answer(
        &mut self,
        job: Job,
        spares: &Sender<(usize, Box<dyn Algorithm>)>,
        truths: &Sender<Vec<EpochTruth>>,
    ) -> Result<EpochReport, WorkerFailure> {
        let Job {
            states,
            mut truth,
            cover,
            mut peers,
            fast,
            retune,
        } = job;
        for (m, (threshold, k)) in self.measures.iter_mut().zip(retune.into_iter().flatten()) {
            (m.spec.threshold, m.spec.k) = (threshold, k);
        }
        let index = truth.first().map_or(0, |t| t.index);
        if self.cfg.inject_failure == Some(ANSWERS) {
            panic!("injected failure (test)");
        }
        let (states, updates): (Vec<_>, Vec<_>) = match states {
            States::Ready(s) => s.into_iter().unzip(),
            States::Workers(rx) => merge(rx, &mut truth, peers.as_mut(), &self.slots, spares)
                .map_err(|f| f.in_epoch(index))?,
        };
        // Query time is counted from here: recovery, answers (not the scoring).
        let queried: Vec<u128> = self.slots.iter().map(|s| s.query_nanos.get()).collect();
        // The packet path's tables into the maps the answers read.
        for t in &mut truth {
            t.settle();
        }
        // `--snapshots`: the epoch's merged states as this host's snapshot (crate::snap).
        crate::snap::write_epoch(
            &self.cfg,
            &self.kinds,
            &self.measures,
            &states,
            &truth,
            &cover,
            fast_parts(&self.kinds, fast.as_ref()),
        )
        .map_err(|message| WorkerFailure {
            worker: ANSWERS,
            epoch: index,
            message,
        })?;
        let cfg = &self.cfg;
        // With a fast path, each instance answers from its state recovered from both paths.
        let recovered = match &fast {
            Some(part) => self.recover(&states, part).map_err(|e| WorkerFailure {
                worker: ANSWERS,
                epoch: index,
                message: format!("recovering the fast path's flows: {e}"),
            })?,
            None => vec![],
        };
        let first = self.epochs == 0;
        let peers = peers.as_ref().map(Peers::estimate);
        let mut tasks = Vec::with_capacity(self.measures.len());
        for m in &self.measures {
            let ki = self.kinds.iter().position(|&k| k == m.kind).unwrap_or(0);
            let slot = &self.slots[m.instance];
            let (answering, method) = match recovered.get(m.instance) {
                Some((r, method)) => (r.as_deref(), Some(method.name())),
                None => (None, None),
            };
            let a = answering.unwrap_or(states[m.instance].as_ref());
            if !cfg.truth {
                let peers = peers.map(|(src, dst)| match m.spec.task {
                    algo::Task::Ddos => src,
                    _ => dst,
                });
                tasks.push(with_recovery(
                    method,
                    answer_only(
                        &m.spec,
                        m.kind,
                        a,
                        slot.prev.as_deref(),
                        truth[ki].total(cfg.weight),
                        peers,
                        first,
                        cfg,
                        &slot.query_nanos,
                    ),
                ));
                continue;
            }
            tasks.push(with_recovery(
                method,
                evaluate(
                    &m.spec,
                    m.kind,
                    a,
                    slot.prev.as_deref(),
                    &truth[ki],
                    self.prev_truth.get(ki),
                    m.ewma.as_ref(),
                    cfg,
                    &slot.query_nanos,
                ),
            ));
        }
        dedup_threshold_warnings(&mut tasks);
        // The epoch is over for the exact EWMA models too.
        if cfg.truth {
            for m in &mut self.measures {
                if let Some(model) = &mut m.ewma {
                    let ki = self.kinds.iter().position(|&k| k == m.kind).unwrap_or(0);
                    model.fold(&truth[ki], cfg.weight);
                }
            }
        }
        let costs = self
            .slots
            .iter()
            .zip(&updates)
            .zip(queried)
            .map(|((slot, u), q)| {
                // The clock's cost, once per timed batch, is not the algorithm's.
                let clock = u.timed as f64 * self.clock_ns;
                EpochCost {
                    algorithm: slot.name.clone(),
                    key: slot.kind,
                    updates: u.updates,
                    update_seconds: (u.nanos as f64 - clock).max(0.0) / 1e9,
                    query_seconds: (slot.query_nanos.get() - q) as f64 / 1e9,
                }
            })
            .collect();
        let t0 = &truth[0];
        let kind0 = self.kinds.iter().position(|&k| k == cfg.key);
        let report = EpochReport {
            index: t0.index,
            packets: t0.packets,
            bytes: t0.bytes,
            flows: cfg
                .truth
                .then(|| kind0.map_or(t0.flows.len(), |i| truth[i].flows.len()) as u64),
            partial: cover.partial(),
            coverage: cover.partial().then_some(cover.span),
            partial_reasons: cover.reasons,
            hosts: vec![],
            paths: fast.as_ref().map(|p| paths(cfg, &self.kinds, p)),
            capture: None,
            tasks,
            costs,
        };
        self.epochs += 1;
        // The finished states: kept as `prev` where heavy changers want it, else reset and sent
        // back; the state they replace goes back the same way.
        let mut recovered: Vec<Option<Box<dyn Algorithm>>> =
            recovered.into_iter().map(|(r, _)| r).collect();
        for (i, (slot, mut state)) in self.slots.iter_mut().zip(states).enumerate() {
            slot.peak_memory = slot.peak_memory.max(state.memory_bytes());
            // Heavy changers compare recovered states: the recovered copy is kept as the
            // previous epoch's, the normal state goes back as a spare.
            if let Some(r) = recovered.get_mut(i).and_then(Option::take) {
                if slot.wants_prev {
                    slot.prev = Some(r);
                }
            } else if slot.wants_prev {
                match slot.prev.replace(state) {
                    Some(old) => state = old,
                    None => continue,
                }
            }
            if slot.reusable {
                state.reset();
                let _ = spares.send((i, state));
            }
        }
        let old = std::mem::replace(&mut self.prev_truth, truth);
        if !old.is_empty() {
            let _ = truths.send(
                old.into_iter()
                    .map(|t| t.emptied(0))
                    .collect::<Vec<EpochTruth>>(),
            );
        }
        Ok(report)
    }

    /// Per instance, the state recovered from its normal-path state and its key kind's fast-path
    /// summary (`None`: answer from the normal state), and the method used. The time is the
    /// instance's query time.
    #[allow(clippy::type_complexity)]
    fn recover(
        &self,
        states: &[Box<dyn Algorithm>],
        part: &visor::EpochPart,
    ) -> Result<Vec<(Option<Box<dyn Algorithm>>, visor::Method)>, visor::RecoverError> {
        let method = self.cfg.sketchvisor.recover;
        let mut out = Vec::with_capacity(states.len());
        for (i, s) in states.iter().enumerate() {
            let kind = self
                .measures
                .iter()
                .find(|m| m.instance == i)
                .map(|m| m.kind);
            let ki = kind.and_then(|k| self.kinds.iter().position(|&x| x == k));
            let Some((summary, _)) = ki.and_then(|ki| part.fast.get(ki)) else {
                out.push((None, visor::Method::None));
                continue;
            };
            let t = std::time::Instant::now();
            out.push(visor::recovered(s.as_ref(), summary, method)?);
            let q = &self.slots[i].query_nanos;
            q.set(q.get() + t.elapsed().as_nanos());
        }
        Ok(out)
    }

    fn spent(self) -> Spent {
        Spent {
            query_nanos: self.slots.iter().map(|s| s.query_nanos.get()).collect(),
            peak_memory: self.slots.iter().map(|s| s.peak_memory).collect(),
        }
    }
}

/// The fast path's part of a snapshot, per key kind (empty without a fast path).
fn fast_parts(kinds: &[KeyKind], fast: Option<&visor::EpochPart>) -> Vec<snapshot::FastPart> {
    let Some(part) = fast else { return vec![] };
    kinds
        .iter()
        .zip(&part.fast)
        .map(|(k, (s, _))| snapshot::FastPart {
            kind: k.name().to_string(),
            summary: Some(s.clone()),
            paths: part.paths,
        })
        .collect()
}

/// `result` with the recovery its state came from (a run with a fast path).
fn with_recovery(
    method: Option<&'static str>,
    mut result: crate::report::TaskResult,
) -> crate::report::TaskResult {
    result.recovery = method;
    result
}

/// The report's split between the paths.
fn paths(cfg: &RunConfig, kinds: &[KeyKind], part: &visor::EpochPart) -> crate::report::Paths {
    let p = &part.paths;
    crate::report::Paths {
        fast_path: cfg.sketchvisor.fast_path.name(),
        normal_packets: p.normal_packets,
        normal_bytes: p.normal_bytes,
        fast_packets: p.fast_packets,
        fast_bytes: p.fast_bytes,
        fast_share: p.fast_share(),
        kinds: kinds
            .iter()
            .zip(&part.fast)
            .map(|(&key, (s, st))| crate::report::FastKindReport {
                key,
                tracked: s.flows.len() as u64,
                v: s.v,
                e: s.e,
                // A merged part (`netsift merge`) has a summary but no statistics.
                kickouts: (st.packets > 0 || s.v == 0).then_some(st.kickouts),
            })
            .collect(),
    }
}

/// The workers' hand-overs of one epoch merged: one state per instance (`Algorithm::merge`,
/// in worker order), and their flows (disjoint per kind: a flow lives in one worker) united into
/// the epoch's truth. A state merged into another is reset and sent back as a spare. With the
/// states, per instance, the update costs of every worker summed.
#[allow(clippy::type_complexity)]
fn merge(
    rx: Vec<Receiver<Handover>>,
    truth: &mut [EpochTruth],
    mut peers: Option<&mut Peers>,
    slots: &[Slot],
    spares: &Sender<(usize, Box<dyn Algorithm>)>,
) -> Result<(Vec<Box<dyn Algorithm>>, Vec<UpdateSpent>), WorkerFailure> {
    let mut merged: Vec<Box<dyn Algorithm>> = Vec::with_capacity(slots.len());
    let mut spent = vec![UpdateSpent::default(); slots.len()];
    // Every worker's hand-over of the epoch first: each worker's channel then holds none of
    // this epoch's when the next is answered, even if a state below does not merge.
    let handed = rx
        .iter()
        .enumerate()
        .map(|(w, r)| {
            r.recv().map_err(|_| WorkerFailure {
                worker: w,
                epoch: 0,
                message: "stopped before handing its epoch over".into(),
            })
        })
        .collect::<Result<Vec<Handover>, _>>()?;
    for (w, h) in handed.into_iter().enumerate() {
        for (t, flows) in truth.iter_mut().zip(h.flows) {
            t.flows.reserve(flows.len());
            t.flows.extend(flows.iter());
        }
        if let (Some(all), Some(part)) = (peers.as_deref_mut(), &h.peers) {
            all.merge(part);
        }
        let (states, costs): (Vec<_>, Vec<_>) = h.states.into_iter().unzip();
        for (total, c) in spent.iter_mut().zip(costs) {
            total.add(c);
        }
        if merged.is_empty() {
            merged = states;
            continue;
        }
        for (i, ((m, mut s), slot)) in merged.iter_mut().zip(states).zip(slots).enumerate() {
            m.merge(s.as_ref()).map_err(|e| WorkerFailure {
                worker: w,
                epoch: 0,
                message: format!("its {} state does not merge: {e}", m.name()),
            })?;
            if slot.reusable {
                s.reset();
                let _ = spares.send((i, s));
            }
        }
    }
    Ok((merged, spent))
}

/// A warning about the task's threshold itself (`evaluate::degenerate_warning`) is the same
/// for every algorithm answering the task on the same keys: said once per epoch, on the first.
fn dedup_threshold_warnings(tasks: &mut [TaskResult]) {
    let mut seen: Vec<(algo::Task, KeyKind, String)> = Vec::new();
    for t in tasks {
        t.warnings.retain(|w| {
            if w.parameter != "threshold" {
                return true;
            }
            let id = (t.task, t.key, w.message.clone());
            let first = !seen.contains(&id);
            if first {
                seen.push(id);
            }
            first
        });
    }
}
