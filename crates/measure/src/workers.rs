//! Workers (issue 13): one reader thread (the caller of `Runner::push`) hands batches to N worker
//! threads over bounded channels (crossbeam, one per worker: single producer, single consumer),
//! each worker owning its own fronts (aggregators) and algorithm instances, a [`Plane`], as the
//! Re-evaluating paper (section 5), Agg-Evict (section 5) and InstaMeasure (one regulator per
//! worker) run one set of structures per core: no shared counters, no atomics on the hot path.
//!
//! Dispatch keeps every flow of every kind in exactly one worker. When every key kind of the
//! run holds the source address (src, pair, four- and five-tuple; else the destination), a
//! packet goes whole to the worker the seeded hash of that address picks, and the worker builds
//! its keys (`Pool::put_packet`): one hash and one tuple copied a packet on the reader, which
//! bounds the run. Otherwise (source and destination kinds together, or a fast path that routes
//! by the keys in the reader) dispatch is per key kind: each of a packet's keys goes to the
//! worker its own seeded hash picks (a packet's source key and its destination key may then
//! live in different ones). At epoch end every worker
//! flushes its fronts and hands a copy of its instances' state back; the reader merges them
//! (`Algorithm::merge`) into one state per instance and answers from it. For the linear and
//! idempotent algorithms (ALGORITHMS.md classes A and B) the merged state is the state one worker
//! would have built, bit for bit (tested); order-dependent summaries merge as mergeable summaries
//! and keep their guarantees.

use std::thread::JoinHandle;

use algo::{Algorithm, KeyBatch};
use crossbeam_channel::{bounded, Receiver, Sender};
use key::{FlowKey, HashFn, KeyKind, Tuple, V4};
use truth::{Counts, FlowTable};

use crate::config::RunConfig;
use crate::instance::{Peers, UpdateSpent};
use crate::plane::Plane;

/// Packets per key kind gathered for one worker before they are sent. The message itself is
/// cheap (about 100 ns); what a message can cost is a wake-up: with three threads on two cores
/// a worker often drains its channel and parks, and the next message unparks it (a futex call
/// and a context switch on each side). 4096 rather than 1024: 3-4.5 k context switches instead
/// of 5-22 k over 20 M packets with two workers, the run's CPU time (user and kernel) about
/// 0.92x (issue 13).
const PART: usize = 4096;
/// Messages a worker's channel holds.
const DEPTH: usize = 4;
/// Behind Agg-Evict without ground truth the workers outpace the reader (about 28 ns a packet
/// against 25): then a worker's channel holds as many messages as its share of these bytes
/// fits, up to 128, so the reader reads on while the workers are slowed for a moment (a burst of
/// one flow's packets, the answer thread on their core) instead of waiting and being woken.
/// Two workers on two cores, 20 M packets (64 KiB messages): 4 deep 0.83-0.86 s, 32 deep
/// 0.73-0.78 s, 128 deep 0.67-0.70 s. Elsewhere the workers bound the run, their channels are
/// full anyway, and a deeper one only delays each epoch's hand-over and moves the parts out of
/// the caches: the README's main job (no accelerator, ground truth) 100 deep 0.91-0.94 s against
/// 0.86-0.88 s 4 deep; Agg-Evict with ground truth 1.37-1.42 s against 1.32-1.39 s (issue 13).
/// Holding parts back only while another worker is idle did not do it (0.82-0.90 s).
const IN_FLIGHT: usize = 16 << 20;
/// The weights of a part whose weights are all 1 (`Pool::unit`): the reader stores none and
/// the worker feeds a slice of these.
static ONES: [u64; PART] = [1; PART];
/// Seed tag of the dispatch hash ("WORK"), distinct from every structure's own hashes.
const DISPATCH_TAG: u64 = 0x574f_524b;
/// A packed packet (`Part::packed`) that is IPv6: its tuple is the next of `Part::tuples`. Bit
/// 104, past the 13 bytes an IPv4 five-tuple packs into.
const V6: V4 = V4(1 << 104);

/// One key kind's packets for one worker; or, dispatched whole (`Pool::route`), the packets'
/// tuples in the first kind's part, each kind's keys built by the worker.
#[derive(Default)]
struct Part {
    /// Whole packets (`Pool::put_packet`), one per packet: an IPv4 packet's five-tuple packed
    /// (`key::V4::of`: its fields read one by one and written with one store; copying the whole
    /// 40-byte `Tuple` loaded it across the parser's narrower stores still in flight, a
    /// store-forwarding stall, 11% of the reader), or [`V6`] for the next of `tuples`. Every
    /// kind's keys come from them, on the worker.
    packed: Vec<V4>,
    /// The IPv6 packets of `packed`, in order.
    tuples: Vec<Tuple>,
    keys: Vec<FlowKey>,
    /// The same keys as big-endian u32 while every one is 4 bytes (the runner's u32 path).
    narrow: Vec<u32>,
    /// Packets (or keys) in the part.
    len: usize,
    /// Their weights; empty when every weight is 1 (`Pool::unit`).
    weights: Vec<u64>,
    /// Wire lengths, for the worker's ground truth (empty without truth).
    lens: Vec<u32>,
    /// Capture times, for `--instant` and the instances that record times (empty without
    /// them; `Pool::times`).
    ts: Vec<u64>,
    /// The trace has no times (`ts` then holds zeros for the watch): the instances get none.
    untimed: bool,
}

/// What a worker hands over at an epoch's end: its instances' state, and with ground truth its
/// flows' exact counts per key kind (the flows it was given: disjoint from the other workers').
pub(crate) struct Handover {
    /// Per instance: the finished state, and what its updates cost this epoch.
    pub(crate) states: Vec<(Box<dyn Algorithm>, UpdateSpent)>,
    pub(crate) flows: Vec<FlowTable>,
    /// Without ground truth: its part of the spreader base (`runner::Peers`).
    pub(crate) peers: Option<Peers>,
}

enum Msg {
    /// Per key kind, that kind's packets for this worker.
    Batch(Vec<Part>),
    /// Flush the fronts, hand every instance's state over (and the epoch's flows) on the
    /// worker's hand-over channel and go on with an empty one: the reset spare given for it
    /// (the answer thread recycles the states it has answered), else a reset copy.
    End(Vec<Option<Box<dyn Algorithm>>>),
}

struct Worker {
    tx: Sender<Msg>,
    /// The parts it has fed, emptied, for reuse: no allocation (and no fresh pages for the
    /// kernel to clear) per message.
    free: Receiver<Vec<Part>>,
    /// Its epochs' hand-overs, in order. The worker holds the only sender, so whoever waits
    /// for a hand-over learns of a worker that died (its thread ended) instead of waiting on:
    /// a reply sender sent inside `Msg::End` would stay alive in the channel's buffer (the
    /// reader still holds `tx`) after the worker's panic, and the wait would never end.
    handed: Receiver<Handover>,
    handle: JoinHandle<Plane>,
}

/// The workers of a run and the reader's half-filled parts for each.
pub(crate) struct Pool {
    workers: Vec<Worker>,
    hash: HashFn,
    /// Per worker, per key kind.
    parts: Vec<Vec<Part>>,
    /// Every weight is 1 (packet counts): the parts carry no weights (`ONES`), a store and a
    /// third of a part's bytes less a packet on the reader, and no copy per kind on the worker.
    unit: bool,
    /// Ground truth is kept by the workers.
    truth: bool,
    /// Capture times go with the keys: `--instant`, or an instance records times
    /// (`Runner::times`).
    times: bool,
    /// Whole packets go to the worker of their source (or destination) address, when every key
    /// kind of the run holds it (`Pool::put_packet`).
    route: Option<KeyKind>,
}

/// The `worker` of a failure of the answer thread (`crate::answer`), not of a worker (and, as
/// `RunConfig::inject_failure`, the answer thread's test failure).
pub const ANSWERS: usize = usize::MAX;

/// A panic's message (a `&str` or `String` payload), else "panicked".
pub(crate) fn panic_message(e: Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| e.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panicked".into())
}

/// A worker that failed: which one, in which epoch, and what it said.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerFailure {
    pub worker: usize,
    pub epoch: u64,
    pub message: String,
}

impl WorkerFailure {
    fn new(worker: usize, message: impl Into<String>) -> WorkerFailure {
        WorkerFailure {
            worker,
            epoch: 0,
            message: message.into(),
        }
    }

    pub(crate) fn in_epoch(self, epoch: u64) -> WorkerFailure {
        WorkerFailure { epoch, ..self }
    }
}

impl std::fmt::Display for WorkerFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.worker == ANSWERS {
            return write!(
                f,
                "the answer thread failed in epoch {}: {}",
                self.epoch, self.message
            );
        }
        write!(
            f,
            "worker {} failed in epoch {}: {}",
            self.worker, self.epoch, self.message
        )
    }
}

impl std::error::Error for WorkerFailure {}

impl Pool {
    /// Start `planes.len()` workers, each owning one plane (built alike: same seeds), feeding
    /// its algorithms in batches of `cfg.batch` packets, with `cfg`'s weights, ground truth and
    /// test failure. With `whole`, packets go whole to the worker of an address every kind
    /// holds, if there is one (`Pool::route`).
    pub(crate) fn start(planes: Vec<Plane>, cfg: &RunConfig, times: bool, whole: bool) -> Pool {
        let (batch, inject_failure) = (cfg.batch, cfg.inject_failure);
        // As the runner's own batch (`Runner::packed`): Agg-Evict reads packed tuples.
        let packed = cfg.accel == front::Accel::AggEvict;
        let kinds = planes.first().map_or(0, |p| p.kinds.len());
        let times = times || planes.first().is_some_and(|p| p.watch.is_some());
        let route = planes
            .first()
            .filter(|p| whole && p.watch.is_none())
            .and_then(|p| common_address(&p.kinds));
        // A message's bytes without ground truth: per kind (one for whole packets) its keys or
        // packed tuples, and what goes with each (`put_rest`).
        let (whole, n) = (route.is_some(), planes.len().max(1));
        let per_packet = match whole {
            true => std::mem::size_of::<V4>(),
            false => kinds * (std::mem::size_of::<FlowKey>() + 4),
        } + 8 * usize::from(cfg.weight != truth::Weight::Packets)
            + 8 * usize::from(times);
        let depth = match packed && !cfg.truth {
            true => (IN_FLIGHT / n / (PART * per_packet)).clamp(DEPTH, 128),
            false => DEPTH,
        };
        let workers = planes
            .into_iter()
            .enumerate()
            .map(|(i, plane)| {
                let (tx, rx) = bounded(depth);
                let (back, free) = bounded(depth + 1);
                // Unbounded: a worker never waits to hand over (the states in the rotation,
                // `Instance::budget`, bound how many epochs are outstanding).
                let (hand, handed) = crossbeam_channel::unbounded();
                let handle = std::thread::Builder::new()
                    .name(format!("netsift-worker-{i}"))
                    .spawn(move || {
                        let fail = inject_failure == Some(i);
                        work(plane, rx, back, hand, batch, packed, fail)
                    })
                    .expect("spawning a worker thread");
                Worker {
                    tx,
                    free,
                    handed,
                    handle,
                }
            })
            .collect::<Vec<_>>();
        let n = workers.len();
        Pool {
            workers,
            hash: HashFn::new(key::sub_seed(cfg.seed, DISPATCH_TAG)),
            parts: (0..n)
                .map(|_| (0..kinds).map(|_| Part::default()).collect())
                .collect(),
            unit: cfg.weight == truth::Weight::Packets,
            truth: cfg.truth,
            times,
            route,
        }
    }

    /// Whether packets go whole to the workers ([`Pool::put_packet`]) instead of key by key.
    pub(crate) fn takes_packets(&self) -> bool {
        self.route.is_some()
    }

    /// One packet, whole, to the worker the seeded hash of its routing address picks (the same
    /// hash as of that address's own key): every flow of every kind of the run holds that
    /// address, so it still lives in one worker. The reader hashes once and copies one tuple a
    /// packet, and the worker builds the kinds' keys (issue 13, the reader-bound scaling).
    #[inline]
    pub(crate) fn put_packet(
        &mut self,
        t: &Tuple,
        w: u64,
        len: u32,
        ts_ns: Option<u64>,
    ) -> Result<(), WorkerFailure> {
        let a = match self.route {
            Some(KeyKind::Dst) => &t.dst,
            _ => &t.src,
        };
        // Constant lengths: xxh3's length dispatch folds away.
        let i = match t.v6 {
            false => self.worker_of(&a[..4]),
            true => self.worker_of(&a[..]),
        };
        self.parts[i][0].push_packet(t);
        self.put_rest(i, 0, w, len, ts_ns)
    }

    /// A batch of whole IPv4 packets, packed (`Runner::packed` with workers: no watch), each to
    /// the worker [`Pool::put_packet`] would pick, with its weight (`ws`), capture time (`ts`,
    /// empty for a trace without times) and, with ground truth, wire length (`lens`). Dispatching a batch in one
    /// loop rather than packet by packet amid the parser's work lets the CPU overlap the
    /// packets' hash-index-store chains, about 40 instructions of latency each, that a
    /// packet-by-packet dispatch runs one at a time: the reader's push and dispatch went from
    /// 16 to 9 ns a packet, its whole thread from 0.63 to 0.53 s for 20 M packets (issue 13).
    pub(crate) fn put_v4s(
        &mut self,
        vs: &[V4],
        ws: &[u64],
        ts: &[u64],
        lens: &[u32],
    ) -> Result<(), WorkerFailure> {
        debug_assert!(self.route.is_some() && vs.len() == ws.len());
        debug_assert!(!self.truth || lens.len() == vs.len());
        let (dst, with) = (self.route == Some(KeyKind::Dst), self.with());
        for (j, &v) in vs.iter().enumerate() {
            // The address's 4 bytes (`key::V4`: source in bits 0-31, destination in 32-63).
            let a = if dst { (v.0 >> 32) as u32 } else { v.0 as u32 };
            let i = self.worker_of(&a.to_le_bytes());
            // One look-up of the part a packet (`put_rest` looked it up again: 2-3% of the
            // two-worker run's time here).
            let p = &mut self.parts[i][0];
            p.packed.push(v);
            let len = lens.get(j).copied().unwrap_or(0);
            if p.rest(with, ws[j], len, ts.get(j).copied()) {
                self.send(i)?;
            }
        }
        Ok(())
    }

    /// The worker the dispatch hash of a key's bytes (or a routing address's) picks: one
    /// function for every way a packet or key reaches the workers, so a flow lives in one.
    #[inline]
    fn worker_of(&self, bytes: &[u8]) -> usize {
        key::reduce(self.hash.hash_bytes(bytes), self.workers.len())
    }

    /// What goes with a key or packet put in part `ki` of worker `i` (`Part::rest`); the part
    /// is sent when full.
    #[inline]
    fn put_rest(
        &mut self,
        i: usize,
        ki: usize,
        w: u64,
        len: u32,
        ts_ns: Option<u64>,
    ) -> Result<(), WorkerFailure> {
        let with = self.with();
        if self.parts[i][ki].rest(with, w, len, ts_ns) {
            self.send(i)?;
        }
        Ok(())
    }

    /// What a part carries beside its keys in this run (`Part::rest`).
    #[inline(always)]
    fn with(&self) -> With {
        With {
            weights: !self.unit,
            lens: self.truth,
            times: self.times,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.workers.len()
    }

    /// Route one key of kind `ki` (its weight, its wire length for the ground truth, its
    /// capture time if the trace has times) to the worker its hash picks.
    #[inline]
    pub(crate) fn put(
        &mut self,
        ki: usize,
        k: FlowKey,
        w: u64,
        len: u32,
        ts_ns: Option<u64>,
    ) -> Result<(), WorkerFailure> {
        let i = self.worker_of(k.as_bytes());
        let p = &mut self.parts[i][ki];
        p.keys.push(k);
        if k.len() == 4 {
            p.narrow.push(k.prefix_u32());
        }
        self.put_rest(i, ki, w, len, ts_ns)
    }

    /// [`Pool::put`] of a 4-byte key given as its big-endian u32 (`Runner::push_keys4`): the
    /// worker the hash of the same 4 bytes picks, with no `FlowKey` built (the worker builds
    /// one for its ground truth only).
    #[inline]
    pub(crate) fn put_u32(
        &mut self,
        ki: usize,
        v: u32,
        w: u64,
        len: u32,
    ) -> Result<(), WorkerFailure> {
        let i = self.worker_of(&v.to_be_bytes());
        self.parts[i][ki].narrow.push(v);
        // A keys4 trace has no times.
        self.put_rest(i, ki, w, len, None)
    }

    /// Send worker `i` everything gathered for it.
    fn send(&mut self, i: usize) -> Result<(), WorkerFailure> {
        let kinds = self.parts[i].len();
        let whole = self.route.is_some();
        let empty = self.workers[i].free.try_recv().unwrap_or_else(|_| {
            (0..kinds)
                .map(|ki| Part {
                    // Room for what this run's parts hold: whole packets in the first kind's
                    // part, or every kind's keys.
                    packed: Vec::with_capacity(if whole && ki == 0 { PART } else { 0 }),
                    tuples: Vec::new(),
                    keys: Vec::with_capacity(if whole { 0 } else { PART }),
                    narrow: Vec::with_capacity(if whole { 0 } else { PART }),
                    len: 0,
                    weights: match self.unit {
                        true => Vec::new(),
                        false => Vec::with_capacity(PART),
                    },
                    lens: Vec::new(),
                    ts: Vec::new(),
                    untimed: false,
                })
                .collect()
        });
        let parts = std::mem::replace(&mut self.parts[i], empty);
        self.workers[i]
            .tx
            .send(Msg::Batch(parts))
            .map_err(|_| WorkerFailure::new(i, "stopped taking packets"))
    }

    /// Epoch end: every worker is told to flush and hand its instances over (the workers go on
    /// with empty ones); the hand-overs arrive on the returned receivers, in worker order, for
    /// whoever answers the epoch (the reader does not wait for them).
    /// `spares` (per instance, reset states) are handed out, one per instance and worker while
    /// they last.
    pub(crate) fn end_epoch(
        &mut self,
        spares: &mut [Vec<Box<dyn Algorithm>>],
    ) -> Result<Vec<Receiver<Handover>>, WorkerFailure> {
        for i in 0..self.workers.len() {
            if self.parts[i].iter().any(|p| p.len > 0) {
                self.send(i)?;
            }
        }
        let mut replies = Vec::with_capacity(self.workers.len());
        for (i, w) in self.workers.iter().enumerate() {
            let given = spares.iter_mut().map(Vec::pop).collect();
            w.tx.send(Msg::End(given))
                .map_err(|_| WorkerFailure::new(i, "stopped before the epoch's end"))?;
            replies.push(w.handed.clone());
        }
        Ok(replies)
    }

    /// Stop the workers; their planes (costs and aggregator counters), in worker order. A worker
    /// that panicked is reported with its panic message.
    pub(crate) fn finish(self) -> Result<Vec<Plane>, WorkerFailure> {
        let Pool { workers, .. } = self;
        let mut planes = Vec::with_capacity(workers.len());
        let mut failed = None;
        for (i, w) in workers.into_iter().enumerate() {
            drop(w.tx);
            match w.handle.join() {
                Ok(p) => planes.push(p),
                Err(e) => {
                    failed.get_or_insert(WorkerFailure::new(i, panic_message(e)));
                }
            }
        }
        match failed {
            Some(f) => Err(f),
            None => Ok(planes),
        }
    }
}

/// A worker's loop: feed each part to its kind's front in batches of `batch` packets; at an
/// epoch's end flush, copy and reset.
fn work(
    mut plane: Plane,
    rx: Receiver<Msg>,
    back: Sender<Vec<Part>>,
    hand: Sender<Handover>,
    batch: usize,
    packed: bool,
    fail: bool,
) -> Plane {
    // The exact counts of the flows this worker is given, per key kind (with ground truth).
    let mut flows: Vec<FlowTable> = (0..plane.kinds.len()).map(|_| FlowTable::new()).collect();
    // `--instant`: the watched kind's flow counts after each packet of a part.
    let mut counts = vec![];
    // One kind's keys of a part of whole packets.
    let mut keyed = Part::default();
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Batch(_) if fail => panic!("injected failure (test)"),
            Msg::Batch(mut parts) => {
                let whole = parts.first().filter(|p| !p.packed.is_empty());
                if let Some(p) = whole.filter(|p| {
                    // IPv4 only, no ground truth, no watch: every kind reads its keys in the
                    // packed tuples (`KeyBatch::V4`), no `FlowKey` built per packet and kind.
                    packed && p.tuples.is_empty() && p.lens.is_empty() && plane.watch.is_none()
                }) {
                    let weights = match p.weights.is_empty() {
                        true => &ONES[..p.len],
                        false => &p.weights[..],
                    };
                    for ki in 0..plane.kinds.len() {
                        let kind = plane.kinds[ki];
                        for (c, ws) in weights.chunks(batch).enumerate() {
                            let r = c * batch..c * batch + ws.len();
                            let ts = match p.untimed {
                                false => p.ts.get(r.clone()).unwrap_or(&[]),
                                true => &[],
                            };
                            plane.feed(ki, KeyBatch::V4(&p.packed[r], kind), ws, ts);
                        }
                    }
                } else if whole.is_some() {
                    // Whole packets: each kind's keys built here, then fed as a kind's part.
                    let (kinds, whole) = (plane.kinds.clone(), &parts[0]);
                    for (ki, kind) in kinds.into_iter().enumerate() {
                        keyed.fill(whole, kind);
                        feed_part(
                            &mut plane,
                            &mut flows,
                            &mut counts,
                            ki,
                            &keyed,
                            whole,
                            batch,
                        );
                    }
                } else {
                    for (ki, p) in parts.iter().enumerate() {
                        feed_part(&mut plane, &mut flows, &mut counts, ki, p, p, batch);
                    }
                }
                for p in &mut parts {
                    p.packed.clear();
                    p.tuples.clear();
                    p.keys.clear();
                    p.narrow.clear();
                    p.len = 0;
                    p.weights.clear();
                    p.lens.clear();
                    p.ts.clear();
                    p.untimed = false;
                }
                // The reader takes it back if it has room; else it is dropped.
                let _ = back.try_send(parts);
            }
            Msg::End(spares) => {
                plane.flush_fronts();
                if let Some(w) = &mut plane.watch {
                    w.end_epoch();
                }
                let states = plane
                    .instances
                    .iter_mut()
                    .zip(spares.into_iter().chain(std::iter::repeat_with(|| None)))
                    .map(|(i, spare)| {
                        let state = match spare {
                            Some(s) => std::mem::replace(&mut i.algo, s),
                            None => {
                                let c = i.algo.clone_box();
                                i.algo.reset();
                                c
                            }
                        };
                        (state, i.epoch_spent())
                    })
                    .collect();
                let fresh = (0..flows.len()).map(|_| FlowTable::new()).collect();
                let flows = std::mem::replace(&mut flows, fresh);
                let peers = plane.peers.as_mut().map(|(_, p)| p.take());
                if hand
                    .send(Handover {
                        states,
                        flows,
                        peers,
                    })
                    .is_err()
                {
                    break;
                }
            }
        }
    }
    plane
}

/// One kind's keys (`ki`, `keys`) through the worker's plane in batches of `batch` packets,
/// with what the part `p` they came with carries (weights, wire lengths, times: `keys` itself
/// when dispatched key by key, else the whole packets, whose keys `Part::fill` built), its
/// flows counted into the worker's ground truth when the part carries wire lengths, and the
/// watched kind's exact counts noted for `--instant`.
fn feed_part(
    plane: &mut Plane,
    flows: &mut [FlowTable],
    counts: &mut Vec<Counts>,
    ki: usize,
    keys: &Part,
    p: &Part,
    batch: usize,
) {
    let watched = plane.watch.as_ref().is_some_and(|w| w.ki == ki);
    let weights = match p.weights.is_empty() {
        true => &ONES[..p.len],
        false => &p.weights[..],
    };
    counts.clear();
    if keys.keys.len() == p.len {
        for (k, &len) in keys.keys.iter().zip(&p.lens) {
            let c = flows[ki].add(k, 1, u64::from(len));
            if watched {
                counts.push(c);
            }
        }
    } else {
        // Keys given as u32 only (`Pool::put_u32`; never watched).
        for (&v, &len) in keys.narrow.iter().zip(&p.lens) {
            flows[ki].add(&FlowKey::from_u32(v), 1, u64::from(len));
        }
    }
    let all_narrow = keys.narrow.len() == p.len;
    for (c, ws) in weights.chunks(batch).enumerate() {
        let r = c * batch..c * batch + ws.len();
        if let Some(w) = plane.watch.as_mut().filter(|_| watched) {
            for j in r.clone() {
                let after = counts.get(j).map(|&n| (n, weights[j]));
                w.packet(p.ts[j], &keys.keys[j], after);
            }
        }
        // Times of a trace that has them (`Pool::put`).
        let ts = match p.untimed {
            false => p.ts.get(r.clone()).unwrap_or(&[]),
            true => &[],
        };
        let b = if all_narrow {
            KeyBatch::U32(&keys.narrow[r])
        } else {
            KeyBatch::Keys(&keys.keys[r])
        };
        plane.feed(ki, b, ws, ts);
    }
}

/// What a part carries beside its keys in a run: weights (unless every one is 1), wire lengths
/// (ground truth), capture times (`Pool::times`).
#[derive(Clone, Copy)]
struct With {
    weights: bool,
    lens: bool,
    times: bool,
}

impl Part {
    /// What goes with a key or packet just put in this part: its weight, wire length and time,
    /// as far as the run carries them (`with`). Whether the part is now full.
    #[inline(always)]
    fn rest(&mut self, with: With, w: u64, len: u32, ts_ns: Option<u64>) -> bool {
        if with.weights {
            self.weights.push(w);
        }
        self.len += 1;
        if with.lens {
            self.lens.push(len);
        }
        if with.times {
            // `--instant`'s watch reads times of untimed traces as 0, as without workers.
            self.ts.push(ts_ns.unwrap_or(0));
            self.untimed |= ts_ns.is_none();
        }
        self.len >= PART
    }

    /// One whole packet: an IPv4 tuple packed, an IPv6 one as the mark and its tuple.
    #[inline(always)]
    fn push_packet(&mut self, t: &Tuple) {
        if t.v6 {
            self.packed.push(V6);
            self.tuples.push(*t);
        } else {
            self.packed.push(V4::of(t));
        }
    }

    /// This part's keys as `whole`'s packets' keys of `kind`: what `Pool::put` would have
    /// gathered for them, key by key (the 4-byte ones also as u32). Their weights, wire lengths
    /// and times stay in `whole`, where `feed_part` reads them (no copy per kind).
    fn fill(&mut self, whole: &Part, kind: KeyKind) {
        self.keys.clear();
        self.narrow.clear();
        let mut v6 = whole.tuples.iter();
        self.keys.extend(whole.packed.iter().map(|&v| match v {
            V6 => v6.next().expect("one tuple per IPv6 packet").key(kind),
            v => v.key(kind),
        }));
        if self.keys.iter().all(|k| k.len() == 4) {
            self.narrow
                .extend(self.keys.iter().map(FlowKey::prefix_u32));
        }
    }
}

/// The address every key of `kinds` holds (source, else destination), if one does: routing a
/// packet by it keeps every flow of every kind in one worker.
fn common_address(kinds: &[KeyKind]) -> Option<KeyKind> {
    [KeyKind::Src, KeyKind::Dst].into_iter().find(|&a| {
        kinds.iter().all(|&k| {
            k == a || matches!(k, KeyKind::Pair | KeyKind::FourTuple | KeyKind::FiveTuple)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A packed IPv4 tuple never reads as the IPv6 mark (its keys are `key::V4`'s, tested
    /// there against `Tuple::key`).
    #[test]
    fn packed_v4_is_never_the_v6_mark() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..10_000 {
            let (a, b) = (next(), next());
            let t = Tuple::v4(
                (a as u32).to_be_bytes(),
                ((a >> 32) as u32).to_be_bytes(),
                b as u16,
                (b >> 16) as u16,
                (b >> 32) as u8,
            );
            let v = V4::of(&t);
            assert_ne!(v, V6);
            assert_eq!(v.0 & V6.0, 0);
            assert_eq!(v.key(KeyKind::FiveTuple), t.key(KeyKind::FiveTuple));
        }
    }

    /// Whole packets, IPv4 and IPv6 mixed, give each kind their keys in packet order.
    #[test]
    fn fill_keeps_the_order_of_mixed_packets() {
        let v4 = Tuple::v4([10, 0, 0, 1], [10, 0, 0, 2], 1234, 80, 6);
        let mut v6 = Tuple {
            v6: true,
            sport: 53,
            dport: 5353,
            proto: 17,
            ..Tuple::default()
        };
        v6.src[0] = 0x20;
        v6.dst[15] = 1;
        let packets = [v4, v6, v4, v6, v6, v4];
        let mut whole = Part::default();
        for t in &packets {
            whole.push_packet(t);
            whole.len += 1;
        }
        let mut keyed = Part::default();
        for kind in [KeyKind::Src, KeyKind::Pair, KeyKind::FiveTuple] {
            keyed.fill(&whole, kind);
            let want: Vec<FlowKey> = packets.iter().map(|t| t.key(kind)).collect();
            assert_eq!(keyed.keys, want, "{kind:?}");
            assert!(keyed.narrow.is_empty());
        }
    }
}
