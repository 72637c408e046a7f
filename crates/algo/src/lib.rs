//! The interface every measurement algorithm implements (DataSketches style: one set of verbs),
//! and the names of the measurement tasks.
//!
//! An algorithm sees keys as bytes plus a weight, never packets. The weight is a packet count
//! or a byte count; an aggregated update `(key, w)` must leave the same state as `w` unit updates
//! of `key` for the linear and idempotent algorithms (`../shared/ALGORITHMS.md` section 0), which
//! is what lets an aggregator (Agg-Evict) sit in front of any of them.
//!
//! Queries are optional: an algorithm answers the tasks it is meant for and returns `None` for
//! the others. [`Algorithm::tasks`] lists what it answers, so asking anything else is a clear
//! error before a run starts rather than a `None` at the end.

#![forbid(unsafe_code)]

mod dirty;
mod entry;
mod instant;

pub use dirty::Dirty;
pub use entry::{
    build_with, check_load_alloc, defaults_of, load_limit, load_state, save_state, with_load_limit,
    BuildFn, CheckState, Entry, KeyFit, LoadFn, SaveFn, StateError, UpdateCost,
};
pub use instant::Crossing;

use std::any::Any;
use std::fmt;
use std::str::FromStr;

use key::{FlowKey, KeyKind};
use serde::{Deserialize, Serialize};

/// A measurement task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    HeavyHitters,
    HeavyChangers,
    Superspreaders,
    Ddos,
    Cardinality,
    FlowSizeDistribution,
    Entropy,
    TopK,
    FlowSize,
}

impl Task {
    pub const ALL: [Task; 9] = [
        Task::HeavyHitters,
        Task::HeavyChangers,
        Task::Superspreaders,
        Task::Ddos,
        Task::Cardinality,
        Task::FlowSizeDistribution,
        Task::Entropy,
        Task::TopK,
        Task::FlowSize,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Task::HeavyHitters => "heavy_hitters",
            Task::HeavyChangers => "heavy_changers",
            Task::Superspreaders => "superspreaders",
            Task::Ddos => "ddos",
            Task::Cardinality => "cardinality",
            Task::FlowSizeDistribution => "flow_size_distribution",
            Task::Entropy => "entropy",
            Task::TopK => "top_k",
            Task::FlowSize => "flow_size",
        }
    }
}

impl fmt::Display for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown task `{0}`{hint} (tasks: {all})",
    hint = did_you_mean(.0, Task::ALL.map(|t| t.name())),
    all = Task::ALL.map(|t| t.name()).join(", "))]
pub struct UnknownTask(pub String);

/// `: did you mean `NAME`?` for the name of `names` closest to the unknown `input`, or nothing
/// when none is close. The one suggestion rule for every name the user types (tasks,
/// algorithms, presets): Jaro similarity above 0.7, as clap suggests flags and values, so a
/// misspelt config file gets the hint a misspelt flag gets.
pub fn did_you_mean<'a>(input: &str, names: impl IntoIterator<Item = &'a str>) -> String {
    names
        .into_iter()
        .map(|n| (strsim::jaro(input, n), n))
        .filter(|(score, _)| *score > 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map_or(String::new(), |(_, n)| format!(": did you mean `{n}`?"))
}

impl FromStr for Task {
    type Err = UnknownTask;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Task::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| UnknownTask(s.to_string()))
    }
}

/// A reported flow (or host) with its estimated size (or distinct-peer count, or change).
pub type Estimate = (FlowKey, u64);

/// Chunk size of the default [`Algorithm::update_batch_u32`] conversion (one stack buffer of
/// keys, the batch size the sketches prefetch for).
const U32_CHUNK: usize = 32;

/// Keys a piece of a materialized `KeyBatch::V4` ([`KeyBatch::materialized`]): the runner's
/// default batch, so an algorithm given the packets unaggregated gets batches of the size it
/// would get them in as keys (its prefetching works across a batch).
pub const V4_CHUNK: usize = 256;

/// A batch of keys in the representation its producer has: full [`FlowKey`]s of any kind, or
/// 4-byte keys as big-endian u32 values ([`Algorithm::update_batch_u32`]).
#[derive(Clone, Copy, Debug)]
pub enum KeyBatch<'a> {
    Keys(&'a [FlowKey]),
    U32(&'a [u32]),
    /// IPv4 packets as packed five-tuples, each standing for its key of this kind
    /// ([`key::V4::key`]): the runner's batch of one packet stream, shared by every kind, with
    /// no key built per packet. Agg-Evict takes it as it is (its packed keys are these bits);
    /// every other consumer gets it as `Keys` or `U32` ([`KeyBatch::materialized`]).
    V4(&'a [key::V4], KeyKind),
}

impl<'a> KeyBatch<'a> {
    pub fn len(&self) -> usize {
        match self {
            KeyBatch::Keys(k) => k.len(),
            KeyBatch::U32(k) => k.len(),
            KeyBatch::V4(k, _) => k.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Key `i` as a `FlowKey` (None past the end).
    pub fn get(&self, i: usize) -> Option<FlowKey> {
        match self {
            KeyBatch::Keys(k) => k.get(i).copied(),
            KeyBatch::U32(k) => k.get(i).map(|&v| FlowKey::from_u32(v)),
            KeyBatch::V4(k, kind) => k.get(i).map(|v| v.key(*kind)),
        }
    }

    /// The first `n` keys and the rest (`n` clamped to the length), in the same representation.
    #[inline]
    pub fn split_at(self, n: usize) -> (Self, Self) {
        match self {
            KeyBatch::Keys(k) => {
                let (a, b) = k.split_at(n.min(k.len()));
                (KeyBatch::Keys(a), KeyBatch::Keys(b))
            }
            KeyBatch::U32(k) => {
                let (a, b) = k.split_at(n.min(k.len()));
                (KeyBatch::U32(a), KeyBatch::U32(b))
            }
            KeyBatch::V4(k, kind) => {
                let (a, b) = k.split_at(n.min(k.len()));
                (KeyBatch::V4(a, kind), KeyBatch::V4(b, kind))
            }
        }
    }

    /// Feed the batch to `a` through the matching update.
    #[inline]
    pub fn feed(self, a: &mut dyn Algorithm, weights: &[u64]) {
        match self {
            KeyBatch::Keys(k) => a.update_batch(k, weights),
            KeyBatch::U32(k) => a.update_batch_u32(k, weights),
            KeyBatch::V4(..) => self.materialized(weights, &mut |b, w, _| b.feed(a, w)),
        }
    }

    /// Hand the batch to `f` as `Keys` or `U32` (with the offset of each piece in the batch):
    /// those as they are; `V4`, in pieces of up to [`V4_CHUNK`] on the stack, as u32 keys for a
    /// 4-byte kind (the u32 path) and as `FlowKey`s otherwise.
    pub fn materialized(self, weights: &[u64], f: &mut dyn FnMut(KeyBatch<'_>, &[u64], usize)) {
        let KeyBatch::V4(k, kind) = self else {
            return f(self, weights, 0);
        };
        let n = k.len().min(weights.len());
        let (k, weights) = (&k[..n], &weights[..n]);
        if kind.len(false) == 4 {
            let mut buf = [0u32; V4_CHUNK];
            for (c, (ks, ws)) in k.chunks(V4_CHUNK).zip(weights.chunks(V4_CHUNK)).enumerate() {
                for (b, v) in buf.iter_mut().zip(ks) {
                    *b = v.u32_key(kind);
                }
                f(KeyBatch::U32(&buf[..ks.len()]), ws, c * V4_CHUNK);
            }
        } else {
            let mut buf = [FlowKey::EMPTY; V4_CHUNK];
            for (c, (ks, ws)) in k.chunks(V4_CHUNK).zip(weights.chunks(V4_CHUNK)).enumerate() {
                for (b, v) in buf.iter_mut().zip(ks) {
                    *b = v.key(kind);
                }
                f(KeyBatch::Keys(&buf[..ks.len()]), ws, c * V4_CHUNK);
            }
        }
    }
}

/// The verbs of every measurement algorithm.
///
/// Update contract: `update(k, w)` is an aggregated update of weight `w >= 1`. For linear
/// algorithms it equals `w` unit updates in any order; for idempotent ones the weight is ignored;
/// order-dependent ones keep their guarantees for any order (ALGORITHMS.md section 0).
pub trait Algorithm: AlgorithmClone + Send + Any {
    /// Stable snake_case name (`count_min`, `flow_radar`, ...).
    fn name(&self) -> &'static str;

    /// The tasks this algorithm answers. Every query method below for a task listed here
    /// returns `Some`; the others return `None`.
    fn tasks(&self) -> &'static [Task];

    fn update(&mut self, key: &FlowKey, weight: u64);

    /// Update with a batch (`keys.len() == weights.len()`). Override to hash the whole batch
    /// first and prefetch counters; the result must equal the one-by-one loop.
    fn update_batch(&mut self, keys: &[FlowKey], weights: &[u64]) {
        for (k, &w) in keys.iter().zip(weights) {
            self.update(k, w);
        }
    }

    /// Update with a batch of 4-byte keys given as big-endian u32 values (IPv4 source or
    /// destination, `keys4` traces): the papers' default key, and the one hot path where the
    /// 38-byte `FlowKey` stream itself costs more than the algorithm (a 1 M-key batch stream is
    /// 4 MB instead of 38 MB). Must leave exactly the state of `update_batch` over
    /// `FlowKey::from_u32` of the same values; the default does that conversion, chunk by chunk.
    /// Algorithms whose update is cheap enough for the conversion to matter override it.
    fn update_batch_u32(&mut self, keys: &[u32], weights: &[u64]) {
        let mut buf = [FlowKey::EMPTY; U32_CHUNK];
        for (ks, ws) in keys.chunks(U32_CHUNK).zip(weights.chunks(U32_CHUNK)) {
            let n = ks.len().min(ws.len());
            for (b, &k) in buf.iter_mut().zip(ks) {
                *b = FlowKey::from_u32(k);
            }
            self.update_batch(&buf[..n], &ws[..n]);
        }
    }

    /// Whether the algorithm records when flows were seen and wants each update's capture time
    /// ([`Algorithm::update_timed`]). Only InstaMeasure's table does; every other algorithm
    /// keeps the default `false` and the runner gives it the untimed batch as always (no time
    /// is gathered for it, so the timed path costs it nothing).
    fn wants_time(&self) -> bool {
        false
    }

    /// [`KeyBatch::feed`] with each update's capture time in ns (`ts_ns.len() == weights.len()`),
    /// called instead of it on an algorithm that [`Algorithm::wants_time`], when every update
    /// is one packet (no aggregator in front: an aggregated update has no one time). Must leave
    /// the state of the untimed update apart from the times it records. The default ignores
    /// the times.
    fn update_timed(&mut self, keys: KeyBatch<'_>, weights: &[u64], ts_ns: &[u64]) {
        let _ = ts_ns;
        match keys {
            KeyBatch::Keys(k) => self.update_batch(k, weights),
            KeyBatch::U32(k) => self.update_batch_u32(k, weights),
            KeyBatch::V4(..) => keys.materialized(weights, &mut |b, w, _| {
                self.update_timed(b, w, &[]);
            }),
        }
    }

    /// The capture times (ns) the algorithm recorded for `key` this epoch, first and last
    /// ([`Algorithm::update_timed`]): `None` when it keeps no times, holds no entry for the key,
    /// or was given no times.
    fn flow_times(&self, _key: &FlowKey) -> Option<(u64, u64)> {
        None
    }

    /// Back to the empty state (same sizes and seeds).
    fn reset(&mut self);

    /// Bytes of state (counters, tables, heaps), the figure reported as the algorithm's memory.
    fn memory_bytes(&self) -> usize;

    /// Flows whose estimated size is at least `threshold` (absolute, in the weight's unit).
    fn heavy_hitters(&self, _threshold: u64) -> Option<Vec<Estimate>> {
        None
    }

    /// Flows whose size changed by at least `threshold` between `prev` (the previous epoch's
    /// state of an algorithm of the same type and configuration) and `self`. The estimate is the
    /// absolute change.
    fn heavy_changers(&self, _prev: &dyn Algorithm, _threshold: u64) -> Option<Vec<Estimate>> {
        None
    }

    /// Why this epoch's answer to `task` may be wrong although the algorithm did what it
    /// should: the configuration cannot hold what was asked (Space-Saving's smallest count near
    /// the threshold, FlowRadar past its decoding capacity, a saturated bitmap, too few UnivMon
    /// levels). `threshold` is the task's absolute threshold (k for top-k; for flow size the
    /// smallest flow's weight, 1 packet or 60 bytes), `total` the epoch's
    /// total weight. Each caveat names the parameter and the size that would do (issue 12).
    fn caveats(&self, _task: Task, _threshold: Option<u64>, _total: u64) -> Vec<Caveat> {
        Vec::new()
    }

    /// The heavy-changer caveats, which need the previous epoch's state `prev` (as given to
    /// [`Algorithm::heavy_changers`]) besides this one: changers whose estimated change lies
    /// within the structure's error bound of `threshold`, or change estimates dominated by
    /// collisions ([`change_caveat`]). Empty for algorithms whose changes are exact.
    fn change_caveats(&self, _prev: &dyn Algorithm, _threshold: u64) -> Vec<Caveat> {
        Vec::new()
    }

    /// What `heavy_changers` measures a flow's change against: the previous epoch (the
    /// default, ALGORITHMS.md 1) or the algorithm's own prediction ([`Change::Ewma`]). The
    /// runner scores the answer against the exact change of the same definition.
    fn change_basis(&self) -> Change {
        Change::LastEpoch
    }

    /// Hosts with more than `threshold` distinct peers. Fed with `pair` keys; whether the host is
    /// the source (superspreaders) or the destination (DDoS victims) is fixed at construction.
    /// The estimate is the distinct-peer count.
    fn spreaders(&self, _threshold: u64) -> Option<Vec<Estimate>> {
        None
    }

    /// Number of distinct keys.
    fn cardinality(&self) -> Option<f64> {
        None
    }

    /// `fsd[s]` = estimated number of flows of size `s` (index 0 unused).
    fn flow_size_distribution(&self) -> Option<Vec<f64>> {
        None
    }

    /// Traffic entropy over flows, H = -sum (s_x/N) log2 (s_x/N), in bits.
    fn entropy(&self) -> Option<f64> {
        None
    }

    /// The `k` largest flows, largest first.
    fn top_k(&self, _k: usize) -> Option<Vec<Estimate>> {
        None
    }

    /// Estimated size of one flow.
    fn flow_size(&self, _key: &FlowKey) -> Option<u64> {
        None
    }

    /// Add `other` (same type, configuration and seeds) into `self`. `Err` if the structure cannot
    /// be merged or the shapes differ.
    fn merge(&mut self, _other: &dyn Algorithm) -> Result<(), MergeError> {
        Err(MergeError::Unsupported(self.name()))
    }

    /// Instant detection ([`Crossing`]): from now on (resets and copies included) log each flow
    /// the first time its detection estimate reaches `threshold` (run's weight) in an epoch.
    /// `false`: the algorithm cannot detect on its packet path (the default).
    fn arm_instant(&mut self, _threshold: u64) -> bool {
        false
    }

    /// Move the crossings logged since the last drain into `out`, and restart the positions.
    fn drain_crossings(&mut self, _out: &mut Vec<Crossing>) {}
}

/// `a` as the concrete algorithm `T`, if it is one (trait upcasting to `Any`: `heavy_changers`
/// reads the previous epoch's state, tests read a built algorithm's fields).
pub fn downcast<T: Algorithm>(a: &dyn Algorithm) -> Option<&T> {
    (a as &dyn Any).downcast_ref()
}

/// The typed first step of every `merge`: `other` as a `T` that `compatible` accepts (same
/// configuration, sizes and seeds), else `MergeError::Mismatch` naming `me`.
pub fn merge_peer<'a, T: Algorithm>(
    me: &T,
    other: &'a dyn Algorithm,
    compatible: impl FnOnce(&T) -> bool,
) -> Result<&'a T, MergeError> {
    downcast::<T>(other)
        .filter(|o| compatible(o))
        .ok_or(MergeError::Mismatch(me.name()))
}

/// Snapshotting an algorithm behind `dyn` (the runner keeps the previous epoch's state for heavy
/// changers). Implemented for every `Algorithm + Clone`, so implementors only derive `Clone`.
pub trait AlgorithmClone {
    fn clone_box(&self) -> Box<dyn Algorithm>;
}

impl<T: Algorithm + Clone> AlgorithmClone for T {
    fn clone_box(&self) -> Box<dyn Algorithm> {
        Box::new(self.clone())
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MergeError {
    #[error("{0} cannot be merged")]
    Unsupported(&'static str),
    #[error("cannot merge {0}: the other structure has a different type, size or seed")]
    Mismatch(&'static str),
}

/// Flow sizes at or above this are counted at this index of a dense flow-size distribution
/// ([`size_histogram`], MRAC's): the vector is allocated up to the largest size, so a count of
/// 2^31 (a forged snapshot's, issue 33) would allocate 16 GiB; 2^24 packets in one epoch is
/// eight default epochs' worth.
pub const MAX_FSD_SIZE: usize = 1 << 24;

/// Exact number of flows in `sizes` whose size is `s`, as a distribution vector (index = size;
/// sizes from [`MAX_FSD_SIZE`] on at that index).
/// Shared by every algorithm that reports a flow-size distribution from per-flow counts.
pub fn size_histogram(sizes: impl IntoIterator<Item = u64>) -> Vec<f64> {
    let sizes: Vec<usize> = sizes
        .into_iter()
        .filter(|&s| s > 0)
        .map(|s| usize::try_from(s).unwrap_or(MAX_FSD_SIZE).min(MAX_FSD_SIZE))
        .collect();
    // Allocated zeroed at its final length (untouched pages stay unmapped) rather than grown.
    let mut fsd: Vec<f64> = vec![0.0; sizes.iter().max().map_or(1, |&m| m + 1)];
    for s in sizes {
        fsd[s] += 1.0;
    }
    fsd
}

/// Entropy (bits) of per-flow sizes: log2 N - (1/N) sum s log2 s.
pub fn entropy_of(sizes: impl IntoIterator<Item = u64>) -> f64 {
    let (mut n, mut acc) = (0f64, 0f64);
    for s in sizes {
        if s > 0 {
            let s = s as f64;
            n += s;
            acc += s * s.log2();
        }
    }
    if n == 0.0 {
        0.0
    } else {
        n.log2() - acc / n
    }
}

/// A configuration that cannot guarantee an answer ([`Algorithm::caveats`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Caveat {
    /// The parameter to change.
    pub parameter: &'static str,
    /// What went wrong this epoch, with the numbers.
    pub message: String,
    /// The value that would do, as `parameter = value` or a short instruction.
    pub suggestion: String,
}

/// The top-k caveat of a structure that lists at most `capacity` keys (a candidate set, a
/// k-counter summary, a heap) when a run asks for more (`k`, the task's scale) and the structure
/// had to let keys go this epoch (`lost`: it overflowed, evicted or is full; issue 34): it
/// reports at most `capacity` flows of more, so the run says so, naming `parameter`, instead of
/// scoring `capacity reported / k true` in silence. `None` for other tasks, a `k` it can hold,
/// or an epoch whose flows all fit.
pub fn top_k_cap_caveat(
    task: Task,
    k: Option<u64>,
    parameter: &'static str,
    capacity: usize,
    lost: bool,
) -> Option<Caveat> {
    let (Task::TopK, Some(k)) = (task, k) else {
        return None;
    };
    (lost && k > capacity as u64).then(|| Caveat {
        parameter,
        message: format!(
            "top_k asks for k = {k} flows, but {parameter} = {capacity} bounds the flows it \
             keeps and the epoch had more: fewer than k are reported"
        ),
        suggestion: format!("{parameter} = {k} (at least k)"),
    })
}

/// The definition of a flow's change in an epoch that an algorithm's `heavy_changers` answers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Change {
    /// `|s_t − s_(t−1)|`: against the flow's size in the previous epoch.
    LastEpoch,
    /// `|V − P|`: against an EWMA prediction, `P = V` after the first epoch, then
    /// `P ← alpha·V + (1 − alpha)·P` after each (ALGORITHMS.md 11); no answer in the first epoch.
    Ewma { alpha: f64 },
}

/// Which endpoint of a `pair` key is the host whose distinct peers are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// Superspreaders: sources with many distinct destinations.
    Src,
    /// DDoS victims: destinations with many distinct sources.
    Dst,
}

/// What a run tells every algorithm it builds, besides the algorithm's own parameters.
#[derive(Clone, Copy, Debug)]
pub struct BuildCtx {
    /// Master seed; every algorithm derives its hash seeds from it (key::sub_seed).
    pub seed: u64,
    /// Length in bytes of the keys the algorithm will see (4 for IPv4 `src`, 13 for an IPv4
    /// `five_tuple`, ...). Algorithms that decode keys from their state (RevSketch, Deltoid,
    /// FlowRadar) size themselves by it.
    pub key_len: usize,
    /// For spreader algorithms: which side of a `pair` key is the host.
    pub side: Side,
}

impl Default for BuildCtx {
    fn default() -> Self {
        BuildCtx {
            seed: 0x6e65_7473_6966_7400, // "netsift\0"
            key_len: 4,
            side: Side::Src,
        }
    }
}

/// A bad algorithm configuration. The message names the algorithm and the field.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("algorithm `{algo}`: {}", source.message().trim_end())]
    Params {
        algo: &'static str,
        #[source]
        source: toml::de::Error,
    },
    #[error("algorithm `{algo}`: field `{field}`: {reason}")]
    Invalid {
        algo: &'static str,
        field: &'static str,
        reason: String,
    },
}

/// Deserialize an algorithm's parameter table (unknown fields are rejected by the target's
/// `#[serde(deny_unknown_fields)]`, and the error names the field).
pub fn parse_params<T: serde::de::DeserializeOwned>(
    algo: &'static str,
    params: &toml::Table,
) -> Result<T, ConfigError> {
    toml::Value::Table(params.clone())
        .try_into()
        .map_err(|source| ConfigError::Params { algo, source })
}

/// Samples of [`collision_caveat`]'s Monte Carlo: the noise's mean to a few percent, in
/// microseconds per query.
const NOISE_SAMPLES: u64 = 4096;

/// The flow-size caveat of a counter sketch (Count-Min, count array, Count Sketch, UnivMon's
/// level 0): what collisions add to a flow's answer, measured as the mean answer for keys the
/// sketch never saw (`estimate` of [`NOISE_SAMPLES`] seeded random codes, each a random cell per
/// row combined as the sketch combines them, min or median; Count Sketch's has either sign).
/// When a flow of `unit`, the smallest flow's weight (one packet, or a minimal frame in bytes),
/// would be answered with a mean relative error of 1 or more, the mean relative error over
/// every flow (ALGORITHMS.md's ARE, mostly mice) is about at the bar of 1 or past it. Names `parameter` (the width, now `width`) and a width that would
/// bring the noise below a quarter of `unit` for a one-row sketch (the noise of one row is
/// proportional to 1/width; more rows only do better).
pub fn collision_caveat(
    task: Task,
    unit: Option<u64>,
    parameter: &'static str,
    width: usize,
    estimate: impl Fn(u64) -> f64,
) -> Vec<Caveat> {
    let (Task::FlowSize, Some(unit)) = (task, unit) else {
        return Vec::new();
    };
    // A flow of weight `unit` is answered `max(0, unit + noise)` (answers are clamped at 0):
    // its mean relative error, and the mean absolute noise for the message.
    let u = unit as f64;
    let (mut err, mut abs) = (0.0, 0.0);
    for i in 0..NOISE_SAMPLES {
        let n = estimate(key::mix64(i ^ 0x6e6f_6973_6500));
        err += ((u + n).max(0.0) - u).abs() / u;
        abs += n.abs();
    }
    let err = err / NOISE_SAMPLES as f64;
    let noise = abs / NOISE_SAMPLES as f64;
    if err < 1.0 {
        return Vec::new();
    }
    let grow = (4.0 * noise / unit as f64).ceil() as usize;
    vec![Caveat {
        parameter,
        message: format!(
            "collisions move a flow's answer by {noise:.1} on average (the answer for a flow \
             never seen), against the smallest flows' {unit}: a flow of that size is off by \
             {:.0}% on average",
            err * 100.0
        ),
        suggestion: format!(
            "{parameter} = {} (at least)",
            width.saturating_mul(grow).next_power_of_two()
        ),
    }]
}

/// Samples of [`change_caveat`]'s noise: its 95th percentile from the 7 largest of 128 (a rough
/// bound, enough to tell a sketch near or past its limit), at a cost an epoch's answer can pay
/// every epoch: a Deltoid's change query reads every key bit's counters of every row, ~3 us, so
/// 4096 samples took ~10 ms an epoch and made 1-ms epochs 8x slower than one epoch.
const CHANGE_SAMPLES: u64 = 128;

/// How a sketch's change error shrinks as its size grows, for [`change_caveat`]'s suggestion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoiseScale {
    /// Error proportional to 1/size: Count-Min and the k-ary sketch (the colliding flows' L1
    /// change per counter, Cormode & Muthukrishnan 2005 sec. 4.1), Deltoid's groups (INFOCOM'04
    /// sec. 3.2), the Reversible Sketch's k-ary buckets (Krishnamurthy et al. IMC'03 sec. 3).
    Linear,
    /// Error proportional to 1/sqrt(size): Count Sketch and UnivMon's rows (the L2 change,
    /// Charikar et al. 2002 sec. 3).
    Sqrt,
}

/// The heavy-changer caveat of a sketch that answers a flow's change with collision noise.
///
/// The noise is measured, not assumed: `noise(code)` is the signed change the sketch answers
/// for a key it never saw (a seeded random code, a random cell per row, combined as the sketch
/// combines them), over [`CHANGE_SAMPLES`] codes; its 95th percentile `b` is the error bound
/// (a flow's answer is its true change plus such noise, off by more than `b` in 1 of 20).
/// Two ways the answer cannot be trusted:
/// - `b >= threshold`: collisions alone make one key in twenty a changer; the change
///   estimates are dominated by collisions (the sketch is overloaded for this threshold);
/// - the flows answered within `b` of the threshold (`answer_above(threshold - b)`, the
///   algorithm's own heavy-changer answer at the lower threshold) are more than a fifth of
///   those reported: with each of them on the wrong side, F1 would fall below 0.9 (each error
///   costs about 1/(2 x reported)).
///
/// Names `parameter` and a size that brings `b` to a tenth of the threshold (`scale` says how
/// the noise shrinks with the size), at least twice `size`.
pub fn change_caveat(
    threshold: u64,
    parameter: &'static str,
    size: usize,
    scale: NoiseScale,
    mut noise: impl FnMut(u64) -> f64,
    mut answer_above: impl FnMut(u64) -> Option<Vec<Estimate>>,
) -> Vec<Caveat> {
    if threshold == 0 {
        return Vec::new();
    }
    let mut abs: Vec<f64> = (0..CHANGE_SAMPLES)
        .map(|i| noise(key::mix64(i ^ 0x6368_616e_6765)).abs())
        .collect();
    abs.sort_unstable_by(f64::total_cmp);
    let b = abs.get(abs.len() * 95 / 100).copied().unwrap_or(0.0).ceil();
    let t = threshold as f64;
    let grow = {
        let ratio = (10.0 * b / t).max(2.0);
        match scale {
            NoiseScale::Linear => ratio.ceil(),
            NoiseScale::Sqrt => (ratio * ratio).ceil(),
        }
    };
    let suggestion = format!(
        "{parameter} = {} (at least: change error at most a tenth of the threshold)",
        (size as f64 * grow).min((1u64 << 40) as f64) as u64
    );
    if b >= t {
        return vec![Caveat {
            parameter,
            message: format!(
                "the change estimates are dominated by collisions: 1 key in 20 that never \
                 appeared is answered a change of {b:.0} or more, against the threshold \
                 {threshold}"
            ),
            suggestion,
        }];
    }
    let below = threshold.saturating_sub(b as u64).max(1);
    let Some(near) = answer_above(below) else {
        return Vec::new();
    };
    // What the answer itself reports at the threshold: a decoding sketch's answer at a lower
    // threshold is no superset of it (Deltoid decodes other groups), and counting those of
    // `near` at or above the threshold said "50 reported" beside a table of 43 (issue 34).
    let reported = answer_above(threshold).map_or_else(
        || near.iter().filter(|e| e.1 >= threshold).count(),
        |v| v.len(),
    );
    let ambiguous = near.iter().filter(|e| (e.1 as f64 - t).abs() < b).count();
    if ambiguous * 5 <= reported.max(1) {
        return Vec::new();
    }
    vec![Caveat {
        parameter,
        message: format!(
            "{ambiguous} flows' estimated changes are within the sketch's error bound ({b:.0}, \
             95th percentile of its collision noise) of the threshold {threshold}, against \
             {reported} reported: which side of it they are on is unknown"
        ),
        suggestion,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_names_roundtrip() {
        for t in Task::ALL {
            assert_eq!(t.name().parse::<Task>().unwrap(), t);
        }
        assert!("hh".parse::<Task>().is_err());
    }

    #[test]
    fn entropy_of_uniform_is_log2_n() {
        assert!((entropy_of([5, 5, 5, 5]) - 2.0).abs() < 1e-12);
        assert_eq!(entropy_of([7]), 0.0);
        assert_eq!(entropy_of([]), 0.0);
    }

    #[test]
    fn histogram_counts_sizes() {
        assert_eq!(size_histogram([1, 1, 3, 0]), vec![0.0, 2.0, 0.0, 1.0]);
    }

    /// The flow-size caveat fires when a never-seen key's mean answer reaches the smallest
    /// flow's weight, and only for flow size.
    #[test]
    fn collision_caveat_measures_the_answer_of_absent_keys() {
        let c = collision_caveat(Task::FlowSize, Some(1), "width", 1000, |_| 1.5);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].parameter, "width");
        assert!(c[0].message.contains("1.5"), "{}", c[0].message);
        // Noise 1.5 against 1: four times the width, rounded up to a power of two.
        assert_eq!(c[0].suggestion, "width = 8192 (at least)");
        // Half the codes answer 3, half 0: mean 1.5 (the Monte Carlo averages, it does not
        // take the worst).
        let half = collision_caveat(Task::FlowSize, Some(1), "width", 1000, |h| {
            if h & 1 == 0 {
                3.0
            } else {
                0.0
            }
        });
        assert_eq!(half.len(), 1);
        assert!(
            half[0].message.contains("by 1.5 on average"),
            "{}",
            half[0].message
        );
        assert!(
            half[0].message.contains("off by 150%"),
            "{}",
            half[0].message
        );
        assert!(collision_caveat(Task::FlowSize, Some(1), "width", 1000, |_| 0.9).is_empty());
        assert!(collision_caveat(Task::FlowSize, Some(60), "width", 1000, |_| 59.0).is_empty());
        assert!(collision_caveat(Task::HeavyHitters, Some(1), "width", 1000, |_| 9.0).is_empty());
        assert!(collision_caveat(Task::FlowSize, None, "width", 1000, |_| 9.0).is_empty());
    }
}
