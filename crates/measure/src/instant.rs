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

use algo::{Crossing, KeyBatch, Task};
use crossbeam_channel::{unbounded, Receiver, Sender};
use key::FlowKey;
use serde::Serialize;
use truth::{Counts, EpochSpec, Weight};

use std::collections::{HashMap, HashSet};

use crate::config::{ConfigError, RunConfig};
use crate::runner::Instance;

fn refuse(reason: String) -> ConfigError {
    ConfigError::Field {
        field: "instant",
        reason,
    }
}

/// One detection, stamped: what `--instant` prints as it happens.
#[derive(Clone, Debug, Serialize)]
pub struct Detection {
    /// The epoch's index (as the report's epochs).
    pub epoch: u64,
    /// Capture time of the packet after which the detection estimate reached the threshold.
    pub ts_ns: u64,
    pub algorithm: String,
    pub key: String,
    /// The algorithm's estimate of the flow then, and the detection estimate that crossed (run's
    /// weight).
    pub estimate: f64,
    pub bound: f64,
    pub threshold: u64,
    #[serde(skip)]
    flow: FlowKey,
    /// The flow's true packets at that packet (with ground truth).
    #[serde(skip)]
    packets: Option<u64>,
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
        (false, Ok(EpochSpec::Packets(n)), Weight::Packets) => {
            crate::evaluate::resolve(t, n as f64)
        }
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
    let log = Log {
        rx,
        threshold,
        truth: cfg.truth,
        closed: vec![],
        detections: vec![],
        crossed: vec![],
        pending: vec![],
    };
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

/// The reader's side: every detection and exact crossing, by epoch.
pub(crate) struct Log {
    rx: Receiver<Event>,
    threshold: u64,
    truth: bool,
    /// The index of each epoch closed, in order (a plane's ordinal indexes it).
    closed: Vec<u64>,
    detections: Vec<Detection>,
    /// (epoch index, flow, time, its packets) of each exact crossing.
    crossed: Vec<(u64, FlowKey, u64, u64)>,
    /// Detections not yet taken for printing.
    pending: Vec<Detection>,
}

impl Log {
    /// Take what the planes sent; `open` is the index of the epoch being measured.
    pub(crate) fn poll(&mut self, open: u64) {
        let index = |closed: &[u64], o: u64| closed.get(o as usize).copied().unwrap_or(open);
        while let Ok(e) = self.rx.try_recv() {
            match e {
                Event::Detected(o, mut d) => {
                    d.epoch = index(&self.closed, o);
                    self.pending.push(d.clone());
                    self.detections.push(d);
                }
                Event::Crossed(o, k, ts, p) => {
                    self.crossed.push((index(&self.closed, o), k, ts, p));
                }
            }
        }
    }

    pub(crate) fn end_epoch(&mut self, index: u64) {
        self.closed.push(index);
    }

    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    pub(crate) fn take_pending(&mut self) -> Vec<Detection> {
        std::mem::take(&mut self.pending)
    }

    /// The report, once every plane is done (`poll` called after).
    pub(crate) fn report(&self) -> InstantReport {
        let mut epochs: Vec<(u64, String)> = self
            .detections
            .iter()
            .map(|d| (d.epoch, d.algorithm.clone()))
            .collect();
        epochs.sort();
        epochs.dedup();
        let out = epochs.into_iter().map(|(e, a)| self.epoch(e, &a)).collect();
        InstantReport {
            threshold: self.threshold,
            truth: self.truth,
            note: (!self.truth)
                .then(|| "no ground truth (--truth off): detections without delay".to_string()),
            epochs: out,
            unprinted: self.pending.clone(),
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
        }
    }
}

/// `--instant`'s part of the report.
#[derive(Clone, Debug, Serialize)]
pub struct InstantReport {
    /// The detection threshold (run's weight).
    pub threshold: u64,
    pub truth: bool,
    pub note: Option<String>,
    /// Per epoch and algorithm with detections.
    pub epochs: Vec<InstantEpoch>,
    /// Detections that arrived after the last [`crate::Runner::take_detections`] (the workers'
    /// last batches): a caller printing them as they come prints these before the report.
    #[serde(skip)]
    pub unprinted: Vec<Detection>,
}

/// One epoch's detections by one algorithm against exact detection.
#[derive(Clone, Debug, Serialize)]
pub struct InstantEpoch {
    pub epoch: u64,
    pub algorithm: String,
    pub detected: usize,
    /// Flows whose exact count reached the threshold (with ground truth).
    pub crossed: Option<usize>,
    /// Detected before / at or after the exact crossing; crossed and never detected; detected
    /// and never crossed in the epoch.
    pub early: Option<usize>,
    pub late: Option<usize>,
    pub never: Option<usize>,
    #[serde(rename = "false")]
    pub falsely: Option<usize>,
    /// Detection time minus exact crossing time (ns; negative: early), and the flow's packets
    /// between them.
    pub delay_ns: Option<Dist>,
    pub delay_packets: Option<Dist>,
    pub flows: Vec<FlowDelay>,
}

/// One detected flow.
#[derive(Clone, Debug, Serialize)]
pub struct FlowDelay {
    pub key: String,
    pub detected_ns: u64,
    pub crossed_ns: Option<u64>,
    pub delay_ns: Option<i64>,
    pub delay_packets: Option<i64>,
}

/// A distribution of signed delays (nearest-rank percentiles).
#[derive(Clone, Debug, Serialize)]
pub struct Dist {
    pub count: usize,
    pub mean: f64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Dist {
    fn of(mut v: Vec<f64>) -> Option<Dist> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let q = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Some(Dist {
            count: v.len(),
            mean: v.iter().sum::<f64>() / v.len() as f64,
            min: v[0],
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            max: v[v.len() - 1],
        })
    }
}

impl Detection {
    /// The line `run --instant` prints for it.
    pub fn line(&self) -> String {
        format!(
            "detected: epoch {} at {}.{:09} s: {} {} estimate {:.0} (detection estimate {:.0}) \
             >= threshold {}",
            self.epoch,
            self.ts_ns / 1_000_000_000,
            self.ts_ns % 1_000_000_000,
            self.algorithm,
            self.key,
            self.estimate,
            self.bound,
            self.threshold
        )
    }
}

impl InstantReport {
    /// The report's table section.
    pub fn table(&self) -> String {
        let mut s = format!(
            "\ninstant detection (threshold {}; delay = detection - exact crossing, capture time \
             and the flow's packets; negative = early):\n",
            self.threshold
        );
        if let Some(n) = &self.note {
            s += &format!("  {n}\n");
        }
        s += &format!(
            "  {:<6} {:<14} {:>8} {:>8} {:>6} {:>6} {:>6} {:>6}  {:<40} {}\n",
            "epoch",
            "algorithm",
            "detected",
            "crossed",
            "early",
            "late",
            "never",
            "false",
            "delay ms p50/p90/p99/max",
            "delay packets p50/p90/p99/max"
        );
        let o = |v: Option<usize>| v.map_or("-".into(), |v| v.to_string());
        for e in &self.epochs {
            let ms = e.delay_ns.as_ref().map_or("-".into(), |d| {
                format!(
                    "{:.3}/{:.3}/{:.3}/{:.3}",
                    d.p50 / 1e6,
                    d.p90 / 1e6,
                    d.p99 / 1e6,
                    d.max / 1e6
                )
            });
            let p = e.delay_packets.as_ref().map_or("-".into(), |d| {
                format!("{}/{}/{}/{}", d.p50, d.p90, d.p99, d.max)
            });
            s += &format!(
                "  {:<6} {:<14} {:>8} {:>8} {:>6} {:>6} {:>6} {:>6}  {:<40} {}\n",
                e.epoch,
                e.algorithm,
                e.detected,
                o(e.crossed),
                o(e.early),
                o(e.late),
                o(e.never),
                o(e.falsely),
                ms,
                p
            );
        }
        s
    }
}
