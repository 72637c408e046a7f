//! `run --instant` (issue 16, point 5): heavy hitters reported as they are detected on the packet
//! path, and their detection delay against exact detection.
//!
//! The algorithm detects (`algo::Algorithm::arm_instant`; InstaMeasure's rule and its estimate
//! semantics are `insta::instant`'s): an armed instance logs each crossing with the position of
//! the update among those given since its last drain. The plane that measures (the runner's
//! own, or each worker's: a flow lives in one worker) drains its armed instances after every
//! batch of the watched key kind and stamps each crossing with the capture time of that packet
//! ([`Watch`]). With ground truth, the same plane notes when each flow's exact count reached the
//! threshold (the packet at which it did, its time) and the flow's true packets at every packet
//! of the batch, so a detection's delay is measured in capture time and in the flow's own packets.
//! Both go to the reader over one channel ([`Log`]), which prints detections as they come and
//! pairs them with the exact crossings of the same epoch for the report ([`InstantReport`]).
//!
//! Memory is bounded over an endless run: an epoch's detections and crossings are kept only
//! until its report is collected (every plane sent its events before handing its state over, so
//! they have all arrived by then); the epoch is then summarized ([`InstantEpoch`], at most
//! [`FLOWS_PER_EPOCH`] flows listed) into the run's totals, and the report keeps the summaries
//! of the last [`KEEP_EPOCHS`] epochs. Detections not yet taken for printing are capped at
//! [`MAX_PENDING`] (the CLI takes them after every batch; past the cap the oldest are counted
//! and dropped).

use algo::{Crossing, KeyBatch, Task};
use crossbeam_channel::{unbounded, Receiver, Sender};
use key::FlowKey;
use truth::{Counts, EpochSpec, Weight};

use std::collections::{HashMap, HashSet, VecDeque};

use crate::config::{ConfigError, RunConfig};
use crate::instance::Instance;

// The report's part and its bounds are report data (`report::instant`), kept at their old paths.
pub use crate::report::instant::{
    Detection, Dist, FlowDelay, InstantEpoch, InstantReport, InstantTotals, FLOWS_PER_EPOCH,
    KEEP_EPOCHS, MAX_PENDING,
};

fn refuse(reason: String) -> ConfigError {
    ConfigError::Field {
        field: "instant",
        reason,
    }
}

/// What a plane tells the reader. `ordinal`: epochs the plane has closed before it.
pub(crate) enum Event {
    Detected(u64, Detection),
    /// A flow's exact count reached the threshold at this packet (time, its packets then).
    Crossed(u64, FlowKey, u64, u64),
}

/// The armed instances of one plane and the batch being measured (module docs).
pub(crate) struct Watch {
    /// The key kind (its index in the plane) of the armed instances.
    pub(crate) ki: usize,
    threshold: u64,
    weight: Weight,
    /// Instance index and algorithm name.
    armed: Vec<(usize, String)>,
    /// Per packet of the pending batch: capture time, and the flow's true packets after it (with
    /// ground truth).
    ts: Vec<u64>,
    packets: Vec<u64>,
    out: Vec<Crossing>,
    ordinal: u64,
    tx: Sender<Event>,
}

/// A run's instant detection: the watch of the planes and the reader's log.
pub(crate) fn plan(
    cfg: &RunConfig,
    // Per measure: its task, its instance index, its algorithm and key kind index.
    measures: &[(Task, usize, String, usize)],
    arm: &mut dyn FnMut(usize, u64) -> bool,
) -> Result<Option<(Watch, Log)>, ConfigError> {
    if !cfg.instant {
        return Ok(None);
    }
    let hh: Vec<_> = measures
        .iter()
        .filter(|m| m.0 == Task::HeavyHitters)
        .collect();
    if hh.is_empty() {
        return Err(refuse(
            "--instant detects heavy hitters: add --task heavy_hitters".into(),
        ));
    }
    if cfg.accel != front::Accel::None {
        return Err(refuse(
            "--instant needs the algorithms to see every packet as it comes: no --accel".into(),
        ));
    }
    let mut ts = cfg
        .measures
        .iter()
        .filter(|m| m.task == Task::HeavyHitters)
        .map(|m| m.threshold.unwrap_or(crate::DEFAULT_HH));
    let t = ts.next().expect("a heavy-hitters measure");
    if ts.any(|o| o != t) {
        return Err(refuse(
            "--instant detects at one threshold: give every heavy_hitters measure the same".into(),
        ));
    }
    let threshold = match (t >= 1.0, cfg.epoch(), cfg.weight) {
        (true, _, _) => t.ceil() as u64,
        (false, Ok(EpochSpec::Packets(n)), Weight::Packets) => crate::config::resolve(t, n as f64),
        _ => {
            return Err(refuse(format!(
                "--instant needs the threshold before the epoch ends: a fraction ({t}) of the \
                 epoch's total is known then only for packet epochs counted in packets; give \
                 an absolute --threshold (in the run's weight)"
            )))
        }
    };
    let ki = hh[0].3;
    let mut armed = vec![];
    for m in &hh {
        if m.3 != ki {
            return Err(refuse(
                "--instant watches one key kind: every heavy_hitters measure on the same key"
                    .into(),
            ));
        }
        if armed.iter().any(|a: &(usize, String)| a.0 == m.1) {
            continue;
        }
        if !arm(m.1, threshold) {
            return Err(refuse(format!(
                "--instant: {} cannot detect heavy hitters on its packet path (instameasure and \
                 rcc can)",
                m.2
            )));
        }
        armed.push((m.1, m.2.clone()));
    }
    let (tx, rx) = unbounded();
    let watch = Watch {
        ki,
        threshold,
        weight: cfg.weight,
        armed,
        ts: vec![],
        packets: vec![],
        out: vec![],
        ordinal: 0,
        tx,
    };
    let log = Log::new(rx, threshold, cfg.truth);
    Ok(Some((watch, log)))
}

impl Watch {
    /// The same watch for another plane (a worker): same channel, nothing pending.
    pub(crate) fn twin(&self) -> Watch {
        Watch {
            ki: self.ki,
            threshold: self.threshold,
            weight: self.weight,
            armed: self.armed.clone(),
            ts: vec![],
            packets: vec![],
            out: vec![],
            ordinal: 0,
            tx: self.tx.clone(),
        }
    }

    /// One packet of the watched kind, in batch order: its time and, with ground truth, its
    /// flow's counts after it (`after`, of a packet of weight `w`).
    #[inline]
    pub(crate) fn packet(&mut self, ts_ns: u64, key: &FlowKey, after: Option<(Counts, u64)>) {
        self.ts.push(ts_ns);
        if let Some((c, w)) = after {
            self.packets.push(c.packets);
            let now = c.get(self.weight);
            if now >= self.threshold && now - w < self.threshold {
                let _ = self
                    .tx
                    .send(Event::Crossed(self.ordinal, *key, ts_ns, c.packets));
            }
        }
    }

    /// After a batch of kind `ki` was fed: stamp the armed instances' crossings with the times of
    /// the batch `keys` (noted by [`Watch::packet`]) and send them; the batch is done.
    pub(crate) fn drain(&mut self, ki: usize, keys: KeyBatch<'_>, instances: &mut [Instance]) {
        if ki != self.ki {
            return;
        }
        for (i, name) in &self.armed {
            instances[*i].algo.drain_crossings(&mut self.out);
            for c in self.out.drain(..) {
                // Positions count the updates the instance was given: the batch's, unless keys
                // it cannot hold were left out (the runner's key filter); then the first packet
                // of the flow from that position on, at most the left-out keys early.
                let at = c.at as usize;
                let j = (at..keys.len())
                    .find(|&j| keys.get(j) == Some(c.key))
                    .unwrap_or(at);
                let d = Detection {
                    epoch: 0,
                    ts_ns: self.ts.get(j).copied().unwrap_or(0),
                    algorithm: name.clone(),
                    key: c.key.to_string(),
                    estimate: c.estimate,
                    bound: c.bound,
                    threshold: self.threshold,
                    flow: c.key,
                    packets: self.packets.get(j).copied(),
                };
                let _ = self.tx.send(Event::Detected(self.ordinal, d));
            }
        }
        self.ts.clear();
        self.packets.clear();
    }

    /// The plane's epoch ended (after its last drain).
    pub(crate) fn end_epoch(&mut self) {
        self.ordinal += 1;
    }
}

/// The reader's side: the detections and exact crossings of the epochs not yet summarized, the
/// summaries kept and the run's totals (module docs: bounded).
pub(crate) struct Log {
    rx: Receiver<Event>,
    threshold: u64,
    truth: bool,
    /// The index of each epoch closed and not yet summarized, in order: a plane's ordinal `o`
    /// is `closed[o - settled]`.
    closed: VecDeque<u64>,
    /// Ordinals summarized (dropped from the front of `closed`).
    settled: u64,
    detections: Vec<Detection>,
    /// (epoch index, flow, time, its packets) of each exact crossing.
    crossed: Vec<(u64, FlowKey, u64, u64)>,
    /// Detections not yet taken for printing, at most [`MAX_PENDING`].
    pending: VecDeque<Detection>,
    /// Detections dropped from `pending` untaken.
    unprinted_dropped: u64,
    /// The latest epochs' summaries, at most [`KEEP_EPOCHS`].
    summaries: VecDeque<InstantEpoch>,
    totals: InstantTotals,
}

impl Log {
    fn new(rx: Receiver<Event>, threshold: u64, truth: bool) -> Log {
        Log {
            rx,
            threshold,
            truth,
            closed: VecDeque::new(),
            settled: 0,
            detections: vec![],
            crossed: vec![],
            pending: VecDeque::new(),
            unprinted_dropped: 0,
            summaries: VecDeque::new(),
            totals: InstantTotals::default(),
        }
    }

    /// Take what the planes sent; `open` is the index of the epoch being measured.
    pub(crate) fn poll(&mut self, open: u64) {
        let (closed, settled) = (&self.closed, self.settled);
        // An ordinal already summarized cannot come (module docs); it would be dropped.
        let index = |o: u64| {
            o.checked_sub(settled)
                .map(|i| closed.get(i as usize).copied().unwrap_or(open))
        };
        while let Ok(e) = self.rx.try_recv() {
            match e {
                Event::Detected(o, mut d) => {
                    let Some(e) = index(o) else { continue };
                    d.epoch = e;
                    if self.pending.len() == MAX_PENDING {
                        self.pending.pop_front();
                        self.unprinted_dropped += 1;
                    }
                    self.pending.push_back(d.clone());
                    self.detections.push(d);
                }
                Event::Crossed(o, k, ts, p) => {
                    let Some(e) = index(o) else { continue };
                    self.crossed.push((e, k, ts, p));
                }
            }
        }
    }

    pub(crate) fn end_epoch(&mut self, index: u64) {
        self.closed.push_back(index);
    }

    /// Epoch `index`'s report was collected: every plane's events for it have been sent
    /// (module docs). Summarize it and every earlier epoch, and drop their events.
    pub(crate) fn settle(&mut self, index: u64, open: u64) {
        self.poll(open);
        let mut epochs: Vec<(u64, String)> = self
            .detections
            .iter()
            .filter(|d| d.epoch <= index)
            .map(|d| (d.epoch, d.algorithm.clone()))
            .collect();
        epochs.sort();
        epochs.dedup();
        for (e, a) in epochs {
            let s = self.epoch(e, &a);
            self.totals.add(&s);
            if self.summaries.len() == KEEP_EPOCHS {
                self.summaries.pop_front();
                self.totals.summaries_dropped += 1;
            }
            self.summaries.push_back(s);
        }
        self.detections.retain(|d| d.epoch > index);
        self.crossed.retain(|c| c.0 > index);
        while self.closed.front().is_some_and(|&c| c <= index) {
            self.closed.pop_front();
            self.settled += 1;
        }
    }

    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    pub(crate) fn take_pending(&mut self) -> Vec<Detection> {
        self.pending.drain(..).collect()
    }

    /// What the log holds: events of unsummarized epochs, untaken detections, summaries
    /// (the bound's test).
    #[cfg(test)]
    fn held(&self) -> (usize, usize, usize, usize) {
        (
            self.detections.len() + self.crossed.len(),
            self.closed.len(),
            self.pending.len(),
            self.summaries.len(),
        )
    }

    /// The report, once every plane is done and every epoch collected: the epochs left are
    /// summarized first.
    pub(crate) fn report(&mut self, open: u64) -> InstantReport {
        self.settle(u64::MAX, open);
        InstantReport {
            threshold: self.threshold,
            truth: self.truth,
            note: (!self.truth)
                .then(|| "no ground truth (--truth off): detections without delay".to_string()),
            epochs: self.summaries.iter().cloned().collect(),
            totals: self.totals.clone(),
            unprinted: self.pending.iter().cloned().collect(),
            unprinted_dropped: self.unprinted_dropped,
        }
    }

    fn epoch(&self, e: u64, algorithm: &str) -> InstantEpoch {
        let dets: Vec<&Detection> = self
            .detections
            .iter()
            .filter(|d| d.epoch == e && d.algorithm == algorithm)
            .collect();
        let crossed: HashMap<&FlowKey, (u64, u64)> = self
            .crossed
            .iter()
            .filter(|c| c.0 == e)
            .map(|c| (&c.1, (c.2, c.3)))
            .collect();
        let mut flows = vec![];
        let (mut early, mut late, mut falsely) = (0, 0, 0);
        let (mut ns, mut pk) = (vec![], vec![]);
        for d in &dets {
            let x = crossed.get(&d.flow).copied();
            let (delay_ns, delay_packets) = match (x, d.packets) {
                (Some((ts, p)), Some(q)) => {
                    let dn = d.ts_ns as i64 - ts as i64;
                    let dp = q as i64 - p as i64;
                    ns.push(dn as f64);
                    pk.push(dp as f64);
                    if dn < 0 || dp < 0 {
                        early += 1;
                    } else {
                        late += 1;
                    }
                    (Some(dn), Some(dp))
                }
                _ => {
                    if self.truth {
                        falsely += 1;
                    }
                    (None, None)
                }
            };
            flows.push(FlowDelay {
                key: d.key.clone(),
                detected_ns: d.ts_ns,
                crossed_ns: x.map(|c| c.0),
                delay_ns,
                delay_packets,
            });
        }
        let flows_omitted = flows.len().saturating_sub(FLOWS_PER_EPOCH);
        flows.truncate(FLOWS_PER_EPOCH);
        let seen: HashSet<&FlowKey> = dets.iter().map(|d| &d.flow).collect();
        let never = crossed.keys().filter(|k| !seen.contains(*k)).count();
        let t = self.truth;
        InstantEpoch {
            epoch: e,
            algorithm: algorithm.to_string(),
            detected: dets.len(),
            crossed: t.then_some(crossed.len()),
            early: t.then_some(early),
            late: t.then_some(late),
            never: t.then_some(never),
            falsely: t.then_some(falsely),
            delay_ns: Dist::of(ns),
            delay_packets: Dist::of(pk),
            flows,
            flows_omitted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detection(flow: FlowKey, ts_ns: u64, packets: u64) -> Detection {
        Detection {
            epoch: 0,
            ts_ns,
            algorithm: "instameasure".into(),
            key: flow.to_string(),
            estimate: 1000.0,
            bound: 900.0,
            threshold: 1000,
            flow,
            packets: Some(packets),
        }
    }

    /// An endless run (5000 epochs of 400 detected flows each, 144 more every epoch than the
    /// per-epoch list keeps; detections taken for printing in the first 1000 epochs only): what the log holds stays bounded (each epoch's events dropped once
    /// it is collected, the summaries capped, the untaken detections capped), and the run's
    /// totals still count every epoch.
    #[test]
    fn the_log_stays_bounded_over_an_endless_run() {
        let (tx, rx) = unbounded();
        let mut log = Log::new(rx, 1000, true);
        let flows = FLOWS_PER_EPOCH + 144;
        let epochs = 5000u64;
        for e in 0..epochs {
            for f in 0..flows {
                let k = FlowKey::from_u32(f as u32);
                let t = e * 1_000_000 + f as u64;
                tx.send(Event::Crossed(e, k, t, 1000)).unwrap();
                tx.send(Event::Detected(e, detection(k, t + 10, 1003)))
                    .unwrap();
            }
            log.poll(e);
            if e < 1000 {
                // Printed as they come for a while; then never taken.
                assert!(log.has_pending());
                log.take_pending();
            }
            log.end_epoch(e);
            // The answer thread's report of epoch e arrives (the CLI takes it).
            log.settle(e, e + 1);
            let (events, closed, pending, kept) = log.held();
            assert_eq!((events, closed), (0, 0), "epoch {e}");
            assert!(pending <= MAX_PENDING && kept <= KEEP_EPOCHS);
        }
        let r = log.report(epochs);
        assert_eq!(r.epochs.len(), KEEP_EPOCHS);
        assert_eq!(r.epochs.last().unwrap().epoch, epochs - 1);
        let last = r.epochs.last().unwrap();
        assert_eq!(last.detected, flows);
        assert_eq!(
            (last.flows.len(), last.flows_omitted),
            (FLOWS_PER_EPOCH, 144)
        );
        assert_eq!(last.late, Some(flows));
        let t = &r.totals;
        assert_eq!(t.summaries, epochs);
        assert_eq!(t.summaries_dropped, epochs - KEEP_EPOCHS as u64);
        assert_eq!(t.detected, epochs * flows as u64);
        assert_eq!((t.crossed, t.late, t.early), (t.detected, t.detected, 0));
        assert_eq!(t.max_delay_ns, Some(10.0));
        assert_eq!(t.max_delay_packets, Some(3.0));
        assert_eq!(r.unprinted.len(), MAX_PENDING);
        assert_eq!(
            r.unprinted_dropped,
            (epochs - 1000) * flows as u64 - MAX_PENDING as u64
        );
        // The newest are kept.
        assert_eq!(r.unprinted.last().unwrap().epoch, epochs - 1);
    }
}
