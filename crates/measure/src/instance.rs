//! One algorithm instance of a run and what travels with it between the measuring planes, the
//! answer thread and the snapshots: the instance with its costs and counters ([`Instance`],
//! [`UpdateSpent`]), a measurement's binding to an instance ([`Measure`]), and the spreader base
//! a run without ground truth estimates ([`Peers`]). Shared state of the layer above `config`
//! and `report`, below every module that measures, answers or snapshots (ARCHITECTURE.md).

use algo::{Algorithm, BuildCtx, KeyFit, Side};
use key::{FlowKey, KeyKind};
use truth::Ewma;

use crate::config::MeasureSpec;

pub(crate) struct Instance {
    pub(crate) name: String,
    pub(crate) kind: KeyKind,
    pub(crate) key_len: usize,
    pub(crate) algo: Box<dyn Algorithm>,
    /// Its catalog entry's `resets_to_empty`: a reset state is as good as a new one, so the
    /// answer thread's reset spares replace the finished state at an epoch's end.
    pub(crate) reusable: bool,
    /// A reset spare from the answer thread, for the next epoch's swap.
    pub(crate) spare: Option<Box<dyn Algorithm>>,
    /// States of it made so far, and how many the rotation needs: the one measuring, the one
    /// being answered, and the previous epoch's where heavy changers keep it. With all made, an
    /// epoch's end waits for the answer thread to give one back instead of copying another.
    pub(crate) made: u16,
    pub(crate) budget: u16,
    /// Which key lengths the algorithm can store (its catalog entry's); keys it cannot are
    /// counted in `skipped`, never silently dropped.
    pub(crate) fit: KeyFit,
    /// Its ns per update on its key path (`algo::UpdateCost`, the run's preset's figure where
    /// it has one: `catalog::presets::cost`) and that times its cost on an aggregator's
    /// evictions (`UpdateCost::behind`): what the adaptive front of its kind weighs against
    /// the aggregator's cost.
    pub(crate) cost_ns: (f64, f64),
    pub(crate) skipped: u64,
    /// Wall time of its timed batches, clock reads included.
    pub(crate) nanos: u128,
    /// Number of timed batches (each paid the clock's own cost once).
    pub(crate) timed: u64,
    pub(crate) updates: u64,
    /// `nanos`, `timed` and `updates` when the last epoch was handed over: the next epoch's
    /// costs are the differences ([`Instance::epoch_spent`]).
    pub(crate) mark: UpdateSpent,
    /// Its algorithm records capture times (`Algorithm::wants_time`): with no accelerator it
    /// is fed through `update_timed` with the batch's times.
    pub(crate) wants_time: bool,
    /// Scratch buffers for a filtered batch.
    pub(crate) keys: Vec<FlowKey>,
    pub(crate) weights: Vec<u64>,
    pub(crate) ts: Vec<u64>,
}

impl Instance {
    /// A built algorithm with nothing measured yet.
    pub(crate) fn new(
        name: String,
        kind: KeyKind,
        key_len: usize,
        algo: Box<dyn Algorithm>,
        fit: KeyFit,
        reusable: bool,
        cost_ns: (f64, f64),
    ) -> Instance {
        Instance {
            name,
            kind,
            key_len,
            wants_time: algo.wants_time(),
            algo,
            reusable,
            spare: None,
            made: 1,
            budget: 2,
            fit,
            cost_ns,
            skipped: 0,
            nanos: 0,
            timed: 0,
            updates: 0,
            mark: UpdateSpent::default(),
            keys: vec![],
            weights: vec![],
            ts: vec![],
        }
    }

    /// The next epoch's empty state in place of the finished one, which is returned: a spare
    /// the answer thread reset if there is one, else a reset copy (an algorithm whose reset
    /// keeps history, as ewma_change's model, always continues from its own state).
    pub(crate) fn swap_out(&mut self) -> Box<dyn Algorithm> {
        let next = match self.spare.take() {
            Some(s) if self.reusable => s,
            _ => {
                let mut c = self.algo.clone_box();
                c.reset();
                self.made = self.made.saturating_add(1);
                c
            }
        };
        std::mem::replace(&mut self.algo, next)
    }

    /// What its updates cost since the last call (the epoch being handed over).
    pub(crate) fn epoch_spent(&mut self) -> UpdateSpent {
        let now = UpdateSpent {
            nanos: self.nanos,
            timed: self.timed,
            updates: self.updates,
        };
        let spent = UpdateSpent {
            nanos: now.nanos - self.mark.nanos,
            timed: now.timed - self.mark.timed,
            updates: now.updates - self.mark.updates,
        };
        self.mark = now;
        spent
    }
}

/// An instance's update work over an epoch: the wall time of its timed batches (clock reads
/// included), how many batches were timed, and the updates it received. Per epoch it travels
/// with the state to the answer thread, which puts it in the epoch's report
/// (`EpochReport::costs`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct UpdateSpent {
    pub(crate) nanos: u128,
    pub(crate) timed: u64,
    pub(crate) updates: u64,
}

impl UpdateSpent {
    pub(crate) fn add(&mut self, o: UpdateSpent) {
        self.nanos += o.nanos;
        self.timed += o.timed;
        self.updates += o.updates;
    }
}

pub(crate) struct Measure {
    pub(crate) spec: MeasureSpec,
    pub(crate) kind: KeyKind,
    pub(crate) instance: usize,
    /// Heavy changers answered against an EWMA prediction ([`Change::Ewma`]): the exact model
    /// of the same alpha over the true sizes of every past epoch, the truth they are scored
    /// against.
    pub(crate) ewma: Option<Ewma>,
}

/// Distinct source and destination addresses of an epoch, estimated (HyperLogLog, 2^12
/// registers: 1.6% relative standard error) for a run without ground truth: the base of the
/// spreader tasks' fractional thresholds (ALGORITHMS.md 1: a fraction of the peer addresses).
///
/// Kept by each plane on what its pair front hands on, not by the reader on every packet: every
/// pair key of an epoch leaves the front by that epoch's end (an aggregator evicts or flushes
/// every key it took), and a HyperLogLog is idempotent and order-free, so the keys an
/// aggregator hands on give the registers every packet would, at the 2% of packets it evicts
/// (Agg-Evict section 3). The workers' parts merge exactly (register-wise max) on the answer
/// thread, which estimates.
#[derive(Clone)]
pub(crate) struct Peers {
    src: distinct::HyperLogLog,
    dst: distinct::HyperLogLog,
    /// The pair added last: a HyperLogLog is idempotent, so the packets of a burst after its
    /// first change nothing and are skipped (two hashes a packet saved, the same estimate).
    last: FlowKey,
}

impl Peers {
    pub(crate) fn new(seed: u64) -> Peers {
        let ctx = BuildCtx {
            seed,
            key_len: 4,
            side: Side::Src,
        };
        let hll = || {
            distinct::HyperLogLog::new(distinct::HyperLogLogConfig { precision: 12 }, &ctx)
                .expect("precision 12 is valid")
        };
        Peers {
            src: hll(),
            dst: hll(),
            last: FlowKey::EMPTY,
        }
    }

    #[inline]
    pub(crate) fn add(&mut self, pair: &FlowKey) {
        if *pair == self.last {
            return;
        }
        self.last = *pair;
        if let (Some(s), Some(d)) = (pair.src_part(), pair.dst_part()) {
            self.src.update(&s, 1);
            self.dst.update(&d, 1);
        }
    }

    /// This epoch's part, handed over; an empty one of the same seed goes on in its place.
    pub(crate) fn take(&mut self) -> Peers {
        let mut next = self.clone();
        next.src.reset();
        next.dst.reset();
        next.last = FlowKey::EMPTY;
        std::mem::replace(self, next)
    }

    /// Add another part of the same epoch (same seed): the union of the addresses.
    pub(crate) fn merge(&mut self, o: &Peers) {
        // Same configuration and seed by construction: a merge cannot fail.
        let _ = self.src.merge(&o.src);
        let _ = self.dst.merge(&o.dst);
    }

    /// The estimated distinct (source, destination) addresses.
    pub(crate) fn estimate(&self) -> (f64, f64) {
        (self.src.estimate(), self.dst.estimate())
    }
}
