//! The one-pass runner: keyed packets in, per-epoch answers with their accuracy out.
//!
//! Every (task, algorithm) pair of a run is a [`MeasureSpec`]; pairs that name the same algorithm
//! with the same key kind, side and parameters share one instance, so the update cost of
//! `count_min` answering both heavy hitters and flow sizes is paid once. Packets reach the
//! algorithms in batches (`RunConfig::batch`), and each instance's update time is measured per
//! batch, so the report can give every algorithm its own ns/packet from the same pass. The
//! clock's own cost is not the algorithm's: the runner measures what one timed region costs
//! with nothing in it ([`clock_overhead_ns`]) and subtracts it once per timed batch.
//!
//! Ground truth is exact per-flow counts per key kind (`truth`), kept for the current and the
//! previous epoch (heavy changers compare the two).
//!
//! The runner is split by concern, a file each: `build.rs` makes a run (`Runner::new`: the
//! memory check, the instances, the front ends, the workers), `packets.rs` is its packet path
//! (`push`, `push_keys4` and the batches), `epoch.rs` closes epochs and finishes the run; this
//! file holds the `Runner` itself and its accessors. It is the top layer of the crate: it uses
//! the plane, the workers and the answer thread, and none of them uses it (ARCHITECTURE.md,
//! measure).

mod build;
mod epoch;
mod packets;

use std::time::Instant;

use algo::{Algorithm, Task};
use key::{FlowKey, KeyKind};
use truth::{Clock, EpochTruth};

use crate::answer::Answers;
use crate::config::RunConfig;
use crate::instance::Peers;
use crate::plane::Plane;
use crate::report::{EpochReport, Totals};
use crate::workers::{Pool, WorkerFailure};

/// Most idle snapshots written for one gap in the traffic (a trace's timestamps jumping by
/// days at 1 ms epochs would write millions): the latest this many epochs of it.
pub const MAX_IDLE_GAP: u64 = 1024;

/// The running measurement: push packets, then `finish`.
pub struct Runner {
    cfg: RunConfig,
    /// Per instance, the tasks it answers (the cost table's `tasks`).
    instance_tasks: Vec<Vec<Task>>,
    clock: Clock,
    kinds: Vec<KeyKind>,
    truth: Vec<EpochTruth>,
    /// With one worker, what measures; with several, where their merged state is answered from
    /// (and the costs and counters summed at the end).
    plane: Plane,
    /// The workers, when there are several.
    pool: Option<Pool>,
    /// The failure of the earliest epoch (`fail`): the run stops measuring and `try_finish`
    /// reports it.
    failure: Option<WorkerFailure>,
    /// Without ground truth, when a spreader task asks: the spreader base's part of the packets
    /// the fast path measures alone (the planes keep the rest's, `Plane::peers`).
    peers: Option<Peers>,
    /// The open epoch is cut short (`interrupt`): the next epoch end marks it partial.
    interrupted: bool,
    /// The capture's start by the first [`Runner::advance_to`] (`netsift live`; a trace's run
    /// starts at its first packet): the first epoch of a time grid that began before it is
    /// partial ([`PartialReason::StartedMidEpoch`]).
    started_ns: Option<u64>,
    /// The latest [`Runner::advance_to`]: where an interrupted capture ended, if after its last
    /// packet.
    seen_ns: u64,
    /// With snapshots: the first epoch this run was in (its first packet's, or its first
    /// [`Runner::advance_to`]'s). Time epochs from it on that pass without a packet get an
    /// idle snapshot ([`crate::snap::write_idle`]); the ones before (the Unix-time grid's
    /// epochs since 1970, [`Runner::align_epochs`]) do not.
    idle_from: Option<u64>,
    /// The answer thread: epochs are answered there while the next one is measured.
    answers: Option<Answers>,
    /// With workers: per instance, reset states from the answer thread for the workers' next
    /// swap (no copy of a state per epoch).
    stash: Vec<Vec<Box<dyn Algorithm>>>,
    batch_keys: Vec<Vec<FlowKey>>,
    /// Per kind, the batch's keys as big-endian u32 while every one of them is 4 bytes long
    /// (IPv4 source or destination): such a batch goes to `update_batch_u32`, 4 bytes a key
    /// instead of a 38-byte `FlowKey` (same state, `algo::Algorithm::update_batch_u32`).
    batch_u32: Vec<Vec<u32>>,
    /// No ground truth, no fast path, no `--instant` watch, and either Agg-Evict with one plane
    /// on this thread or workers that take whole packets: IPv4 packets are batched as packed
    /// tuples (`batch_v4`), one 16-byte store each. One plane: every kind's batch is
    /// `KeyBatch::V4` of them, which the aggregators read as the packed keys they hold, no
    /// `FlowKey` built or read per packet and kind. Workers: the batch is dispatched to them in
    /// one loop (`dispatch_v4`).
    packed: bool,
    /// While every packet of the batch so far is IPv4 (`packed`): their tuples. The first IPv6
    /// packet of a batch moves them into `batch_keys` ([`Runner::spill_v4`]).
    batch_v4: Vec<key::V4>,
    batch_weights: Vec<u64>,
    /// Whether the run gathers each packet's capture time for the instances that want it
    /// (`Algorithm::wants_time`, InstaMeasure's first/last times): only with no accelerator
    /// (the front hands batches on unchanged) and when some instance wants them; then
    /// `batch_ts` holds the batch's times (with workers, each part carries its own).
    times: bool,
    batch_ts: Vec<u64>,
    /// Wire lengths of a packed batch for workers that keep the ground truth (`packed`).
    batch_lens: Vec<u32>,
    epochs: Vec<EpochReport>,
    totals: Totals,
    started: Instant,
    /// What one empty timed region measures ([`clock_overhead_ns`]).
    clock_ns: f64,
    trace: String,
    /// What the run changed from what was asked (a default swapped for one that holds the keys).
    notes: Vec<String>,
    /// SketchVisor's data plane (`visor::recovered` answers from both paths): with a fast path, each packet is routed
    /// before it is dispatched, and one the normal path cannot take is measured by the fast path.
    visor: Option<visor::DataPlane>,
    /// The trace carries no timestamps (4- and 13-byte key traces): the FIFO model takes their
    /// arrival rate (`key_trace_mpps`) instead of capture time.
    untimed: bool,
    /// The packet's key per kind, for the fast path.
    keys: Vec<FlowKey>,
    /// `netsift merge`: where each epoch's states come from instead of the packet path.
    replay: Option<Replay>,
    /// `--instant`: the detections and exact crossings the planes sent (`crate::instant`).
    instant: Option<crate::instant::Log>,
    /// New thresholds and k per measure ([`Runner::retune`]), for the next epoch handed over.
    retuned: Option<Vec<(Option<f64>, Option<usize>)>>,
    /// Per instance, the largest update and query seconds of any epoch answered so far.
    epoch_most: Vec<(f64, f64)>,
}

/// `netsift merge`'s source of states: the epoch the packets pushed closed (index, packets,
/// bytes and time span, as a snapshot records them: the merge checks the truth against the
/// hosts') to the merged states of that epoch, one per instance in the runner's order (the
/// snapshots'), with the hosts' fast-path part merged (the answer thread recovers from it as in
/// `run`), or why there are none.
pub type Replay = Box<dyn FnMut(&snapshot::EpochSpan) -> Result<Replayed, String> + Send>;

/// One epoch of [`Replay`]: the merged normal-path states and, if any host had a fast path, the
/// merged paths and summaries per key kind.
pub type Replayed = (Vec<Box<dyn Algorithm>>, Option<visor::EpochPart>);

/// Keep the failure of the earliest epoch (the first seen among equals): a failing answer
/// thread stops taking the workers' hand-overs, and the workers stop in turn, later; the report
/// names the cause, not the consequence.
fn fail(slot: &mut Option<WorkerFailure>, f: WorkerFailure) {
    if slot.as_ref().is_none_or(|s| f.epoch < s.epoch) {
        *slot = Some(f);
    }
}

impl Runner {
    /// The failure that stopped measuring (a worker's or the answer thread's), if one came:
    /// no epoch closes after it; [`Runner::try_finish`] returns it.
    pub fn failed(&self) -> bool {
        self.failure.is_some()
    }

    /// Answer each epoch on the calling thread as it closes, not on the answer thread: for a
    /// stream whose reads may block (a live pipe), so that an epoch's report is ready when it
    /// closes, not when the next packet arrives. Call before the first packet.
    pub fn answer_inline(&mut self) {
        if let Some(a) = &mut self.answers {
            a.inline();
        }
    }

    /// The trace carries no capture timestamps (4- and 13-byte key traces): the fast path's FIFO
    /// model then spaces its packets at `key_trace_mpps`. Call before the first packet.
    pub fn untimed(&mut self) {
        self.untimed = true;
    }

    /// The reading stops here (a signal): the open epoch will be closed as `partial` by
    /// `finish`, with the packets pushed so far.
    pub fn interrupt(&mut self) {
        self.interrupted = true;
    }

    /// `--instant`: whether detections wait to be taken ([`Runner::take_detections`]).
    pub fn has_detections(&self) -> bool {
        self.instant.as_ref().is_some_and(|l| l.has_pending())
    }

    /// `--instant`: the detections made since the last call, in the order they arrived.
    pub fn take_detections(&mut self) -> Vec<crate::instant::Detection> {
        self.instant
            .as_mut()
            .map(|l| l.take_pending())
            .unwrap_or_default()
    }

    /// The epochs completed and not yet taken (a live run reports each as it closes).
    pub fn completed_epochs(&self) -> &[EpochReport] {
        &self.epochs
    }

    /// Take the completed epochs out of the runner: a caller that prints each epoch as it
    /// closes takes them, so a run over an endless stream holds no past epoch (the final
    /// [`Report`] then lists only the epochs not taken). One that wants them all at the end
    /// (`--json`) leaves them.
    pub fn take_completed(&mut self) -> Vec<EpochReport> {
        std::mem::take(&mut self.epochs)
    }

    pub fn config(&self) -> &RunConfig {
        &self.cfg
    }

    /// What every host running this configuration agrees with in its snapshots (seed,
    /// parameters, key kinds), as an idle epoch's snapshot of host `host`: a controller checks
    /// arriving snapshots against it (`netsift controller --expect`).
    pub fn reference_snapshot(&self, host: &str) -> Result<snapshot::Snapshot, String> {
        crate::snap::reference(&self.cfg, &self.kinds, host)
    }

    /// Every packet read so far, per class (what the report's `totals` will say): a monitor
    /// reads it after each epoch (`crates/monitor`).
    pub fn totals(&self) -> &Totals {
        &self.totals
    }

    /// What the run changed from what was asked, one line each (also in the report).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Add a line in front of the report's notes (a choice the caller made before the run,
    /// which the notes the runner made follow from).
    pub fn add_note(&mut self, note: String) {
        self.notes.insert(0, note);
    }

    pub fn trace_name(&self) -> &str {
        &self.trace
    }

    /// The epoch length as the report prints it (`2000000 packets`, `1000 ms`).
    pub fn epoch_label(&self) -> String {
        match self.cfg.epoch() {
            Ok(truth::EpochSpec::Packets(n)) => crate::report::count(n, "packet", "packets"),
            Ok(truth::EpochSpec::Millis(ms)) => format!("{ms} ms"),
            Err(_) => String::new(),
        }
    }
}

/// What one timed region (`Instant::now()` then `elapsed()`) measures with nothing inside it:
/// the clock's own cost, which every timed batch pays once. The least of 16 means over 1024
/// empty regions each (the least disturbed by interrupts and migrations), after a warm-up.
pub fn clock_overhead_ns() -> f64 {
    let region = || {
        let t = Instant::now();
        std::hint::black_box(t.elapsed().as_nanos())
    };
    for _ in 0..256 {
        region();
    }
    (0..16)
        .map(|_| (0..1024).map(|_| region()).sum::<u128>() as f64 / 1024.0)
        .fold(f64::INFINITY, f64::min)
}
