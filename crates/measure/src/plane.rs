//! The packet plane: per key kind a front end feeding the algorithm instances of that kind
//! ([`Plane`]), the sink that fans a front's batches out to them, timing each instance's updates
//! ([`Fan`]), and the fronts a run builds ([`fronts_for`]). One plane per worker
//! (`crate::workers`), or the runner's own with one worker.

use std::time::Instant;

use algo::{KeyBatch, KeyFit};
use front::{Front, Sink};
use key::KeyKind;

use crate::config::{ConfigError, RunConfig};
use crate::instance::{Instance, Peers};
use crate::instant::Watch;

/// What measures packets: per key kind a front end (no accelerator, or one aggregator per kind
/// whose evictions reach every instance of that kind), and the algorithm instances. One per
/// worker (`crate::workers`), or the runner's own with one worker.
pub(crate) struct Plane {
    pub(crate) kinds: Vec<KeyKind>,
    pub(crate) fronts: Vec<Front>,
    pub(crate) instances: Vec<Instance>,
    /// `--instant`: the armed instances' detections, stamped per batch (`crate::instant`).
    pub(crate) watch: Option<Watch>,
    /// Without ground truth, when a spreader task asks: the spreader base of the pair keys
    /// this plane's pair front hands on, and that front's kind index.
    pub(crate) peers: Option<(usize, Peers)>,
}

impl Plane {
    /// One batch of kind `ki` through its front to the instances of that kind; `ts`, the
    /// packets' capture times when an instance wants them (`Runner::timed`), else empty.
    pub(crate) fn feed(&mut self, ki: usize, batch: KeyBatch<'_>, weights: &[u64], ts: &[u64]) {
        let mut sink = Fan {
            instances: &mut self.instances,
            kind: self.kinds[ki],
            ts,
            peers: self.peers.as_mut().filter(|p| p.0 == ki).map(|p| &mut p.1),
        };
        self.fronts[ki].timed(&mut sink, |f, s| f.update(batch, weights, s));
        if let Some(w) = &mut self.watch {
            w.drain(ki, batch, &mut self.instances);
        }
    }

    /// Epoch end: every front hands what it holds to the algorithms.
    pub(crate) fn flush_fronts(&mut self) {
        for (ki, (front, &kind)) in self.fronts.iter_mut().zip(&self.kinds).enumerate() {
            // An aggregator's flush has no packet times.
            let mut sink = Fan {
                instances: &mut self.instances,
                kind,
                ts: &[],
                peers: self.peers.as_mut().filter(|p| p.0 == ki).map(|p| &mut p.1),
            };
            front.timed(&mut sink, |f, s| f.flush(s));
        }
    }

    /// A plane built alike (same algorithms, parameters and seeds), empty, for another worker.
    /// Called on a plane not yet fed: its clones are empty as they are (a reset would end an
    /// epoch of the algorithms whose reset is not back to empty, EwmaChange's first one).
    pub(crate) fn twin(&self, cfg: &RunConfig) -> Result<Plane, ConfigError> {
        Ok(Plane {
            kinds: self.kinds.clone(),
            fronts: fronts_for(&self.kinds, cfg, &self.instances)?,
            instances: self
                .instances
                .iter()
                .map(|i| {
                    let algo = i.algo.clone_box();
                    Instance::new(
                        i.name.clone(),
                        i.kind,
                        i.key_len,
                        algo,
                        i.fit,
                        i.reusable,
                        i.cost_ns,
                    )
                })
                .collect(),
            watch: self.watch.as_ref().map(Watch::twin),
            peers: self.peers.clone(),
        })
    }
}

/// One front per key kind, in `cfg`'s accelerator and Agg-Evict mode; an adaptive front weighs
/// its aggregator against the summed update cost of the instances of its kind, on the raw
/// stream and on its evictions.
pub(crate) fn fronts_for(
    kinds: &[KeyKind],
    cfg: &RunConfig,
    instances: &[Instance],
) -> Result<Vec<Front>, ConfigError> {
    kinds
        .iter()
        .map(|&k| {
            let (sink_ns, behind_ns) = instances
                .iter()
                .filter(|i| i.kind == k)
                .fold((0.0, 0.0), |(s, b), i| (s + i.cost_ns.0, b + i.cost_ns.1));
            Front::new(cfg.accel, &cfg.agg_evict, k.len(cfg.ipv6))
                .map(|f| f.with_costs(cfg.agg_mode, sink_ns, behind_ns, cfg.agg_window))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ConfigError::Field {
            field: "agg_evict",
            reason: e.to_string(),
        })
}

/// One batch to an instance, timed: with its capture times `ts` when given (the instance
/// records them), else the untimed update of the batch's representation.
fn give(inst: &mut Instance, batch: KeyBatch<'_>, weights: &[u64], ts: &[u64]) {
    let t = Instant::now();
    if ts.is_empty() {
        batch.feed(inst.algo.as_mut(), weights);
    } else {
        inst.algo.update_timed(batch, weights, ts);
    }
    inst.nanos += t.elapsed().as_nanos();
    inst.timed += 1;
    inst.updates += batch.len() as u64;
}

/// The instances of one key kind, as the sink of that kind's front: each batch goes to every
/// instance on the kind, timed per instance, with the keys an instance cannot hold counted in
/// its `skipped`.
struct Fan<'a> {
    instances: &'a mut [Instance],
    kind: KeyKind,
    /// The batch's capture times, one per key, when the run gathers them (`Runner::timed`: no
    /// accelerator, so the front hands the batch on unchanged); else empty.
    ts: &'a [u64],
    /// The plane's spreader base, on the pair kind's sink.
    peers: Option<&'a mut Peers>,
}

impl Sink for Fan<'_> {
    fn feed(&mut self, batch: KeyBatch<'_>, weights: &[u64]) {
        if let KeyBatch::V4(..) = batch {
            // Packed tuples handed on as they came (no aggregator, or one standing aside): as
            // keys or u32 keys, each piece with its packets' times.
            let ts = self.ts;
            batch.materialized(weights, &mut |b, w, at| {
                self.ts = ts.get(at..at + w.len()).unwrap_or(&[]);
                self.feed(b, w);
            });
            self.ts = ts;
            return;
        }
        let n = batch.len().min(weights.len());
        // Pair keys are wider than 4 bytes: never a u32 batch.
        if let (Some(p), KeyBatch::Keys(keys)) = (self.peers.as_deref_mut(), batch) {
            for k in keys {
                p.add(k);
            }
        }
        // Times go with the keys only when there is one per key (the batch as it came).
        let ts = if self.ts.len() == batch.len() {
            self.ts
        } else {
            &[]
        };
        for inst in self.instances.iter_mut().filter(|i| i.kind == self.kind) {
            let (fit, key_len) = (inst.fit, inst.key_len);
            // The times for an instance that records them, else none.
            let ts = if inst.wants_time {
                &ts[..n.min(ts.len())]
            } else {
                &[]
            };
            match batch {
                KeyBatch::U32(keys) if fit.accepts(4, key_len) => {
                    give(inst, KeyBatch::U32(&keys[..n]), &weights[..n], ts)
                }
                KeyBatch::U32(_) => inst.skipped += n as u64,
                KeyBatch::Keys(keys)
                    if fit != KeyFit::Any
                        && keys.iter().any(|k| !fit.accepts(k.len(), key_len)) =>
                {
                    let mut k = std::mem::take(&mut inst.keys);
                    let mut w = std::mem::take(&mut inst.weights);
                    let mut t = std::mem::take(&mut inst.ts);
                    k.clear();
                    w.clear();
                    t.clear();
                    for (j, (key, &weight)) in keys.iter().zip(weights).enumerate() {
                        if fit.accepts(key.len(), key_len) {
                            k.push(*key);
                            w.push(weight);
                            t.extend(ts.get(j));
                        } else {
                            inst.skipped += 1;
                        }
                    }
                    give(inst, KeyBatch::Keys(&k), &w, &t);
                    (inst.keys, inst.weights, inst.ts) = (k, w, t);
                }
                KeyBatch::Keys(keys) => give(inst, KeyBatch::Keys(&keys[..n]), &weights[..n], ts),
                KeyBatch::V4(..) => unreachable!("packed tuples are materialized above"),
            }
        }
    }

    /// Everything spent inside the timed regions, clock reads included: the front's own time is
    /// its wall time minus this.
    fn nanos(&self) -> u128 {
        self.instances
            .iter()
            .filter(|i| i.kind == self.kind)
            .map(|i| i.nanos)
            .sum()
    }
}
