//! Agg-Evict (Zhou et al., "Generic and Robust Software Acceleration for Network Measurement",
//! sections 3.3-3.5): an aggregator of k arrays of l = 16 key/value pairs in front of the
//! measurement algorithms. Packets of the same flow are summed in the aggregator; a pair leaves
//! it (is *evicted*) as one aggregated update `(key, count)` when its array is full and a new
//! flow needs the slot, when its count would overflow u32, or at the epoch-end [`Aggregator::flush`].
//!
//! Layout (section 3.4): the 16 u32 keys of an array are one 64-byte-aligned cache line, the
//! values another, plus an explicit u16 occupancy mask per array (key 0 is a valid IPv4
//! address; the artifact lets it match empty slots). The array is `flow_id % k` ([`Index::Modulo`],
//! the paper's choice, with Lemire's fastmod instead of a division) or the project hash
//! ([`Index::Hash`]). Lookup compares the probe with all 16 keys at once ([`simd`]).
//!
//! Keys: for 4-byte keys (*narrow* mode) the SIMD key is the key itself as a big-endian u32
//! (`FlowKey::prefix_u32`). Wider keys (*fingerprint* mode, section 3.4 "Handling large flow
//! IDs") store a 32-bit fingerprint as the SIMD key plus the full key in a parallel flow-ID
//! array; a fingerprint hit compares full keys, and a collision evicts the old pair, so no
//! count is ever merged into the wrong key. Departing from the paper's XOR fold (`src ^ dst`
//! for a pair, which gives reversed and subnet-structured pairs one fingerprint and one array,
//! and sends intra-/16 pairs to 125 of 2000 arrays), the fingerprint and the array come from
//! a mixing hash of the key (`key::mix64`; xxh3 beyond 16 bytes), and the flow-ID array holds
//! the key as a u64 (8-byte keys: IPv4 pairs, 256 KB for k = 2000) or a u128 (up to 15 bytes:
//! IPv4 four/five-tuples) where it fits, compared by integer equality and prefetched with the
//! key and value lines; runs of equal keys are merged as in narrow mode. Details and reasons
//! in the `wide` module. A key the aggregator cannot store (another length in narrow mode, an
//! IPv6 source in an IPv4 run; a key of other than 8 bytes in a u64 aggregator; a key over 15
//! bytes in a u128 one) bypasses it unaggregated, counted in [`AggStats::bypassed`]. Callers
//! build the aggregator for the widest key of the run, so this happens only to odd keys.
//!
//! # The narrow hot path
//!
//! [`Aggregator::update_batch_u32`] takes 4-byte keys as u32 (4 bytes of input a packet instead
//! of a 38-byte `FlowKey`); [`Aggregator::update_batch`] in narrow mode converts each chunk and
//! runs the same loop, so both evict exactly the same sequence. Per chunk of 32 packets:
//!
//! 1. *Run merge*: two 16-wide vector compares of the chunk with itself shifted by one
//!    ([`simd`]'s `run_starts`) give the chunk's runs of equal keys (trains of back-to-back
//!    packets; 83% of the packets of figure 5's trace repeat the previous key, ~6 runs per 32
//!    packets), each one update. This is the paper's aggregation applied before the table: it
//!    removes the store-to-load chain on one counter that a train otherwise costs. Unit weights
//!    (one vector test) need no sums, a run weighs its length; otherwise prefix sums; a chunk
//!    holding a weight `>= 2^32` is not merged; a run whose sum passes u32 bypasses as one
//!    update.
//! 2. *Locate and look up*, one pass over the runs: each run's array (fastmod, or `HashFn` over
//!    the key's 4 bytes for [`Index::Hash`]), a prefetch of its value line, and one 16-wide
//!    compare. One loop, not three (gather, locate and prefetch, look up): the run count varies
//!    per chunk, so every loop over the runs costs a mispredicted exit, and with no run buffers
//!    nothing is zeroed or copied per chunk. An index is checked against the table per run (a
//!    never-taken branch) and the table is then indexed unchecked. With GRR and a SIMD kernel,
//!    hit, insert and eviction are one branch-free path (the outcome selects the slot, the
//!    stored value and whether the buffered pair counts), so misses (about one run in four on
//!    the bursty trace, one in six on shuffled traffic, at random) cost no branch
//!    mispredictions; LRU and the scalar kernel take the branchy path (a hit is the
//!    straight-line path, a miss an out-of-line call). Evictions are written by index into a
//!    fixed buffer (`evict_batch + 32` long) and the sink is called only between chunks.
//!
//! Evictions are handed on in batches of exactly [`AggConfig::evict_batch`] (the flush hands on
//! the remainder) through the sink `&mut dyn FnMut(KeyBatch, &[u64])`: `KeyBatch::U32` in narrow
//! mode (no `FlowKey` is built; `KeyBatch::feed` calls the algorithm's `update_batch_u32`),
//! `KeyBatch::Keys` in fingerprint mode and for bypassed keys of another length (which wait in
//! their own buffer). The algorithm hashes the whole batch and prefetches.
//!
//! # Why answers do not change
//!
//! Every packet's weight reaches the algorithms exactly once, summed with other packets of the
//! *same key* (the aggregator never sums different keys: full keys are compared and overflow
//! evicts first). What changes is the order of updates and the grouping of equal keys. By the
//! update classes of ALGORITHMS.md section 0 (and the paper's commutable/aggregatable argument,
//! section 3.2), that leaves these algorithms in exactly the same state, and only these bounds
//! for the others (ALGORITHMS.md section 12). `tests/answers.rs` checks every row:
//!
//! | algorithm | class (ALGORITHMS.md 0) | with Agg-Evict | tested as |
//! |---|---|---|---|
//! | `count_min`, `count_array`, `count_sketch` | A linear counters + C candidate set | counters identical; the candidate set is order-dependent but keeps every true HH | counters bit-equal; HH recall 1 above the candidate threshold |
//! | `mrac` | A linear | identical | whole state (serde) equal |
//! | `rev_sketch`, `deltoid` | A linear | identical | `PartialEq` |
//! | `two_level` | B idempotent bitmaps | identical | `PartialEq` (pair keys: fingerprint mode) |
//! | `fm`, `kmin`, `linear_counting`, `hyperloglog` | B idempotent | identical | `PartialEq` |
//! | `univmon` | A counters + C heaps | counters and total identical; heaps order-dependent | level counters + total equal; heaps not compared (no bound exposed) |
//! | `flow_radar` | A packet counts; flow set C once the Bloom filter has a false positive | identical while the filter has no false positive (each flow is inserted once, counts add) | no-FP run: `PartialEq` and decode equal |
//! | `linear_hash`, `cuckoo1`, `cuckoo4` | exact table (order only moves slots) | identical counts | entry maps equal |
//! | `space_saving`, `heap` | C | SS guarantees: `sum c = N`, `c - eps <= f <= c`, `f > c_min` monitored | bounds vs exact truth |
//! | `misra_gries` | C | `f - slack <= c <= f` | bounds vs exact truth |
//!
//! Not covered: conservative update (not in the registry), `bloom_spreader` and `ewma_change`
//! (ALGORITHMS.md 11: per-source BF counters are order-dependent; EWMA is exact per flow).

use std::fmt;
use std::str::FromStr;

use algo::Algorithm;
pub use algo::KeyBatch;
use key::{FlowKey, HashFn, MAX_KEY_LEN};
use serde::{Deserialize, Serialize};

pub mod simd;
mod wide;

use simd::{Kernel, Scalar};
pub use simd::{Line, SLOTS};

/// Eviction policy when a full array must take a new flow (section 3.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Global round robin: one slot index shared by all arrays, advanced per eviction.
    Grr,
    /// Least recently used: per-slot u32 timestamps, evict the oldest.
    Lru,
}

/// Lookup kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Simd {
    /// The widest kernel this CPU has (detected once, cached).
    Auto,
    /// One 512-bit compare into a mask register (AVX-512F).
    Avx512,
    /// Two 256-bit compares and two movemasks.
    Avx2,
    /// The paper's Algorithm 1: four compares, three packs, one movemask.
    Sse2,
    /// Scalar linear search (the paper's non-SIMD baseline).
    Off,
}

/// How the array of a key is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Index {
    /// `flow_id % k` (the paper's choice, section 3.3), flow_id = the key or its fingerprint.
    Modulo,
    /// `key::reduce(HashFn(key), k)`: even load on adversarial or structured key sets.
    Hash,
}

macro_rules! named_enum {
    ($t:ident, $what:literal, $($v:ident = $n:literal),+) => {
        impl $t {
            pub fn name(self) -> &'static str {
                match self { $($t::$v => $n),+ }
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
        impl FromStr for $t {
            type Err = AggError;
            fn from_str(s: &str) -> Result<Self, AggError> {
                match s {
                    $($n => Ok($t::$v),)+
                    _ => Err(AggError::Unknown {
                        field: $what,
                        value: s.to_string(),
                        expected: concat!($($n, ", "),+).trim_end_matches(", "),
                    }),
                }
            }
        }
    };
}

named_enum!(Policy, "policy", Grr = "grr", Lru = "lru");
named_enum!(
    Simd,
    "simd",
    Auto = "auto",
    Avx512 = "avx512",
    Avx2 = "avx2",
    Sse2 = "sse2",
    Off = "off"
);
named_enum!(Index, "index", Modulo = "modulo", Hash = "hash");

/// Largest `arrays` (fastmod needs k < 2^32; 2^24 arrays are already 2 GB).
pub const MAX_ARRAYS: usize = 1 << 24;
/// Largest `evict_batch`.
pub const MAX_EVICT_BATCH: usize = 1 << 16;

/// Aggregator configuration (defaults: the paper's section 4.1 settings).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AggConfig {
    /// k, the number of 16-slot arrays (default 2000, about 258 KB in narrow mode).
    pub arrays: usize,
    pub policy: Policy,
    pub index: Index,
    pub simd: Simd,
    /// Evicted updates handed to the algorithms per call (default 32, the artifact's
    /// MAX_RX_BURST).
    pub evict_batch: usize,
}

impl Default for AggConfig {
    fn default() -> Self {
        AggConfig {
            arrays: 2000,
            policy: Policy::Grr,
            index: Index::Modulo,
            simd: Simd::Auto,
            evict_batch: 32,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AggError {
    #[error("agg-evict: field `arrays`: must be in 1..={MAX_ARRAYS}, got {0}")]
    Arrays(usize),
    #[error("agg-evict: field `evict_batch`: must be in 1..={MAX_EVICT_BATCH}, got {0}")]
    EvictBatch(usize),
    #[error("agg-evict: field `simd`: `{0}` is not available on this CPU")]
    SimdUnavailable(Simd),
    #[error("agg-evict: key length {0} is longer than the longest key ({MAX_KEY_LEN})")]
    KeyLen(usize),
    #[error("agg-evict: field `{field}`: unknown value `{value}` (expected one of: {expected})")]
    Unknown {
        field: &'static str,
        value: String,
        expected: &'static str,
    },
}

/// Counters of one aggregator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AggStats {
    /// Packets (key, weight pairs) offered.
    pub packets: u64,
    /// Updates handed to the algorithms, including flushed and bypassed ones.
    pub evicted: u64,
    /// Of `evicted`: updates handed on by [`Aggregator::flush`].
    pub flushed: u64,
    /// Of `evicted`: packets passed through unaggregated (other key length in narrow mode, or a
    /// weight that does not fit u32).
    pub bypassed: u64,
}

impl AggStats {
    /// Updates reaching the algorithms per packet (the aggregator's cost share: 1.0 = no gain).
    pub fn evicted_share(&self) -> f64 {
        if self.packets == 0 {
            0.0
        } else {
            self.evicted as f64 / self.packets as f64
        }
    }
}

/// Lemire, Kaser, Kurz, "Faster remainder by direct computation" (2019): `a % d` for u32 `a`
/// and a run-time constant `d` with two multiplications and no division.
#[derive(Clone, Copy, Debug)]
struct FastMod {
    m: u64,
    d: u64,
}

impl FastMod {
    fn new(d: u32) -> FastMod {
        // For d = 1 this wraps to m = 0 and the remainder is 0, as it should be.
        FastMod {
            m: (u64::MAX / u64::from(d.max(1))).wrapping_add(1),
            d: u64::from(d.max(1)),
        }
    }

    #[inline(always)]
    fn rem(self, a: u32) -> u32 {
        let low = self.m.wrapping_mul(u64::from(a));
        ((u128::from(low) * u128::from(self.d)) >> 64) as u32
    }
}

/// Seed of the array hash for [`Index::Hash`] (placement only; answers never depend on it).
const INDEX_SEED: u64 = 0x6167_6765_7669_6374; // "aggevict"

// Packets per chunk of the batch loop (defined with the run-start kernels, which take one
// chunk). Also the headroom of the narrow eviction buffer: at most one eviction per packet,
// drained to below `evict_batch` after every chunk.
use simd::CHUNK;

/// Indices into a `2 * CHUNK` table (`CHUNK` is a power of two, so `& (2 * CHUNK - 1)` keeps
/// every index `<= CHUNK` unchanged while proving it in bounds).
const CHUNK_MASK_1: usize = 2 * CHUNK - 1;

/// The run-merge weight rules of a chunk, shared by both key modes: `(unit, mergeable)`. Unit
/// weights (packet counting) need no sums; a chunk holding a weight `>= 2^32` is not merged at
/// all (32 smaller weights sum exactly in u64). `unit` is one OR of `w ^ 1` (a vector test),
/// and the unit path (every chunk of a packet-counting run) stops there.
#[inline(always)]
pub(crate) fn weight_rules(ws: &[u64]) -> (bool, bool) {
    let unit = ws.iter().fold(0u64, |o, &w| o | (w ^ 1)) == 0;
    (unit, unit || ws.iter().fold(0u64, |o, &w| o | w) >> 32 == 0)
}

/// The runs `[p, q)` of a chunk of `n` packets, in order, where the set bits of `starts` mark
/// the runs' first packets (shared by both key modes). `n <= CHUNK`, and `starts` has no bit at
/// or above `n`. An iterator rather than a closure-taking helper: a closure called from a
/// `#[target_feature]` loop is not always inlined, and out of line it loses the feature (each
/// SIMD intrinsic becomes a call).
#[derive(Clone, Copy)]
pub(crate) struct Runs {
    starts: u32,
    n: usize,
}

impl Runs {
    #[inline(always)]
    pub(crate) fn new(starts: u32, n: usize) -> Runs {
        Runs { starts, n }
    }
}

impl Iterator for Runs {
    type Item = (usize, usize);

    #[inline(always)]
    fn next(&mut self) -> Option<(usize, usize)> {
        if self.starts == 0 {
            return None;
        }
        let p = self.starts.trailing_zeros() as usize;
        self.starts &= self.starts - 1;
        // The next start, or `n` after the last run, with no branch (a branch here would
        // mispredict once per chunk, as the run count varies).
        let q = (u64::from(self.starts) | (1u64 << self.n)).trailing_zeros() as usize;
        Some((p, q))
    }
}

/// The weight of run `[p, q)`: `q - p` for unit weights, else a difference of prefix sums.
trait RunWeight {
    fn weight(&self, p: usize, q: usize) -> u64;
}

/// Unit weights (packet counting): a run weighs its length.
struct Unit;

impl RunWeight for Unit {
    #[inline(always)]
    fn weight(&self, p: usize, q: usize) -> u64 {
        (q - p) as u64
    }
}

/// Exclusive prefix sums of a chunk's weights, indexed through `CHUNK_MASK_1`.
struct Prefix([u64; 2 * CHUNK]);

impl Prefix {
    #[inline(always)]
    fn new(ws: &[u64]) -> Prefix {
        let mut pre = [0u64; 2 * CHUNK];
        let mut acc = 0u64;
        for (p, &w) in pre[1..].iter_mut().zip(ws) {
            acc = acc.wrapping_add(w);
            *p = acc;
        }
        Prefix(pre)
    }
}

impl RunWeight for Prefix {
    #[inline(always)]
    fn weight(&self, p: usize, q: usize) -> u64 {
        self.0[q & CHUNK_MASK_1].wrapping_sub(self.0[p & CHUNK_MASK_1])
    }
}

/// The eviction sink: each batch of aggregated updates, as u32 keys (narrow mode) or full keys
/// (fingerprint mode, and bypassed keys of another length), with their summed weights.
pub type Sink<'s> = dyn FnMut(KeyBatch<'_>, &[u64]) + 's;

/// The aggregator. One per worker core; not shared.
#[derive(Clone, Debug)]
pub struct Aggregator {
    k: usize,
    fastmod: FastMod,
    index: Index,
    hash: HashFn,
    policy: Policy,
    simd: Simd,
    narrow: bool,
    keys: Vec<Line>,
    vals: Vec<Line>,
    occ: Vec<u16>,
    /// LRU only: last-touch stamp per slot.
    stamps: Vec<Line>,
    clock: u32,
    /// Fingerprint mode only: the full key of each slot (k x 16), in the compact
    /// representation chosen by the key length ([`wide`]).
    full: wide::FullKeys,
    /// GRR: the next slot to evict in whatever array is full.
    grr: usize,
    /// Narrow GRR: use the branchy per-packet lookup ([`Aggregator::one_u32`]) instead of the
    /// branch-free one (A/B measurement and the equivalence test only).
    branchy_grr: bool,
    /// Where the branch-free GRR lookup writes a hit's key (a field, so the store is not dead
    /// and stays a select rather than becoming a branch).
    scratch: u32,
    evict_batch: usize,
    /// Narrow mode: evicted u32 keys and weights, `out_n` of them live. Fixed length
    /// `evict_batch + CHUNK` (written by index, no `Vec::push` on the hot path).
    out_u32: Vec<u32>,
    out_uw: Vec<u64>,
    out_n: usize,
    /// Fingerprint mode: evicted full keys; narrow mode: bypassed keys of another length.
    out_keys: Vec<FlowKey>,
    out_w: Vec<u64>,
    stats: AggStats,
}

impl Aggregator {
    /// `key_len`: the key length the run uses (4 → narrow mode).
    pub fn new(cfg: &AggConfig, key_len: usize) -> Result<Aggregator, AggError> {
        if cfg.arrays == 0 || cfg.arrays > MAX_ARRAYS {
            return Err(AggError::Arrays(cfg.arrays));
        }
        if cfg.evict_batch == 0 || cfg.evict_batch > MAX_EVICT_BATCH {
            return Err(AggError::EvictBatch(cfg.evict_batch));
        }
        if key_len > MAX_KEY_LEN {
            return Err(AggError::KeyLen(key_len));
        }
        let simd = simd::resolve(cfg.simd).ok_or(AggError::SimdUnavailable(cfg.simd))?;
        let k = cfg.arrays;
        let narrow = key_len == 4;
        let nbuf = if narrow { cfg.evict_batch + CHUNK } else { 0 };
        Ok(Aggregator {
            k,
            fastmod: FastMod::new(k as u32),
            index: cfg.index,
            hash: HashFn::new(INDEX_SEED),
            policy: cfg.policy,
            simd,
            narrow,
            keys: vec![Line::default(); k],
            vals: vec![Line::default(); k],
            occ: vec![0; k],
            stamps: if cfg.policy == Policy::Lru {
                vec![Line::default(); k]
            } else {
                Vec::new()
            },
            clock: 0,
            full: wide::FullKeys::for_len(key_len, k),
            grr: 0,
            branchy_grr: false,
            scratch: 0,
            evict_batch: cfg.evict_batch,
            out_u32: vec![0; nbuf],
            out_uw: vec![0; nbuf],
            out_n: 0,
            // Narrow mode holds only bypassed keys here: allocated on first use.
            out_keys: Vec::with_capacity(if narrow { 0 } else { cfg.evict_batch }),
            out_w: Vec::with_capacity(if narrow { 0 } else { cfg.evict_batch }),
            stats: AggStats::default(),
        })
    }

    /// Narrow mode, GRR: look runs up with the branchy per-packet path (a hit/miss branch, the
    /// miss out of line) instead of the default branch-free one. Both evict exactly the same
    /// sequence; this exists for A/B measurement (`examples/throughput.rs`) and the test that
    /// pins the two together. No effect on LRU or fingerprint mode.
    #[doc(hidden)]
    pub fn set_branchy_grr(&mut self, on: bool) {
        self.branchy_grr = on;
    }

    /// The backend actually in use.
    pub fn simd(&self) -> Simd {
        self.simd
    }

    /// Whether keys are stored directly (4-byte keys) rather than as fingerprints.
    pub fn is_narrow(&self) -> bool {
        self.narrow
    }

    /// Pairs currently held (not yet handed on), including buffered evictions.
    pub fn len(&self) -> usize {
        self.occ
            .iter()
            .map(|o| o.count_ones() as usize)
            .sum::<usize>()
            + self.out_n
            + self.out_keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Aggregate a batch of keys of any kind; evicted (key, count) batches go to `sink`
    /// (`KeyBatch::U32` in narrow mode, `KeyBatch::Keys` otherwise and for bypassed keys).
    /// `keys` and `weights` pair up; if their lengths differ, the surplus of the longer one is
    /// ignored (a caller bug, caught by a debug assertion).
    pub fn update_batch(&mut self, keys: &[FlowKey], weights: &[u64], sink: &mut Sink<'_>) {
        self.update(KeyBatch::Keys(keys), weights, sink);
    }

    /// The hot path for 4-byte keys (IPv4 source or destination) given as big-endian u32
    /// (`FlowKey::prefix_u32`): 4 bytes of input per packet instead of a 38-byte `FlowKey`.
    /// Exactly the evictions of [`Aggregator::update_batch`] over `FlowKey::from_u32` of the same
    /// values. On a fingerprint-mode aggregator (built for wider keys) the keys are converted
    /// (a u64 aggregator, built for 8-byte keys, cannot hold them and passes them through).
    pub fn update_batch_u32(&mut self, keys: &[u32], weights: &[u64], sink: &mut Sink<'_>) {
        self.update(KeyBatch::U32(keys), weights, sink);
    }

    /// Either batch representation (dispatches once per call on the SIMD backend).
    pub fn update(&mut self, keys: KeyBatch<'_>, weights: &[u64], sink: &mut Sink<'_>) {
        debug_assert_eq!(keys.len(), weights.len());
        let n = keys.len().min(weights.len());
        let keys = match keys {
            KeyBatch::Keys(k) => KeyBatch::Keys(&k[..n]),
            KeyBatch::U32(k) => KeyBatch::U32(&k[..n]),
        };
        let weights = &weights[..n];
        self.stats.packets += n as u64;
        match self.simd {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `new` accepted this backend only after `simd::available` confirmed it.
            Simd::Avx512 => unsafe { self.run_avx512(keys, weights, sink) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Simd::Avx2 => unsafe { self.run_avx2(keys, weights, sink) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Simd::Sse2 => unsafe { self.run_sse2(keys, weights, sink) },
            _ => self.run::<Scalar>(keys, weights, sink),
        }
    }

    /// Epoch end: evict everything, array by array, slot by slot (a deterministic order), then
    /// hand on the buffers (in batches of `evict_batch`). Afterwards the aggregator is as new
    /// (GRR index and LRU clock reset), stats aside.
    pub fn flush(&mut self, sink: &mut Sink<'_>) {
        for a in 0..self.k {
            let mut occ = self.occ.get(a).copied().unwrap_or(0);
            while occ != 0 {
                let s = occ.trailing_zeros() as usize;
                occ &= occ - 1;
                let v = u64::from(self.vals[a].0[s]);
                self.stats.flushed += 1;
                if self.narrow {
                    self.push_u32(self.keys[a].0[s], v);
                    if self.out_n >= self.evict_batch {
                        self.drain_u32(sink);
                    }
                } else {
                    let key = self.full.key(a, s).unwrap_or_default();
                    self.emit(key, v, sink);
                }
            }
            if let Some(o) = self.occ.get_mut(a) {
                *o = 0;
            }
        }
        self.drain_u32(sink);
        if self.out_n > 0 {
            sink(
                KeyBatch::U32(&self.out_u32[..self.out_n]),
                &self.out_uw[..self.out_n],
            );
            self.out_n = 0;
        }
        self.drain(sink);
        self.grr = 0;
        self.clock = 0;
        for l in &mut self.stamps {
            *l = Line::default();
        }
    }

    pub fn stats(&self) -> AggStats {
        self.stats
    }

    pub fn reset_stats(&mut self) {
        self.stats = AggStats::default();
    }

    /// Bytes of state: keys, values, occupancy, LRU stamps, flow-ID array, eviction buffers.
    pub fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        (self.keys.len() + self.vals.len() + self.stamps.len()) * size_of::<Line>()
            + self.occ.len() * 2
            + self.full.bytes()
            + self.out_u32.len() * 12
            + self.out_keys.capacity() * (size_of::<FlowKey>() + 8)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn run_avx512(&mut self, keys: KeyBatch<'_>, weights: &[u64], sink: &mut Sink<'_>) {
        self.run::<simd::x86::Avx512>(keys, weights, sink)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn run_avx2(&mut self, keys: KeyBatch<'_>, weights: &[u64], sink: &mut Sink<'_>) {
        self.run::<simd::x86::Avx2>(keys, weights, sink)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "sse2")]
    unsafe fn run_sse2(&mut self, keys: KeyBatch<'_>, weights: &[u64], sink: &mut Sink<'_>) {
        self.run::<simd::x86::Sse2>(keys, weights, sink)
    }

    /// Picks the loop specialised for the input, key mode and policy (branch-free per packet).
    #[inline(always)]
    fn run<K: Kernel>(&mut self, keys: KeyBatch<'_>, weights: &[u64], sink: &mut Sink<'_>) {
        match (keys, self.narrow, self.policy) {
            (KeyBatch::U32(k), true, Policy::Grr) => self.narrow_u32::<K, false>(k, weights, sink),
            (KeyBatch::U32(k), true, Policy::Lru) => self.narrow_u32::<K, true>(k, weights, sink),
            (KeyBatch::Keys(k), true, Policy::Grr) => {
                self.narrow_keys::<K, false>(k, weights, sink)
            }
            (KeyBatch::Keys(k), true, Policy::Lru) => self.narrow_keys::<K, true>(k, weights, sink),
            (KeyBatch::Keys(k), false, _) => self.wide_any::<K>(k, weights, sink),
            (KeyBatch::U32(k), false, _) => {
                // 4-byte keys offered to a fingerprint-mode aggregator: convert, chunk by chunk.
                let mut buf = [FlowKey::EMPTY; CHUNK];
                for (ks, ws) in k.chunks(CHUNK).zip(weights.chunks(CHUNK)) {
                    for (b, &x) in buf.iter_mut().zip(ks) {
                        *b = FlowKey::from_u32(x);
                    }
                    self.wide_any::<K>(&buf[..ks.len()], ws, sink);
                }
            }
        }
    }

    /// Fingerprint mode: the loop for this aggregator's key representation and policy.
    #[inline(always)]
    fn wide_any<K: Kernel>(&mut self, keys: &[FlowKey], weights: &[u64], sink: &mut Sink<'_>) {
        use wide::FullKeys as F;
        match (&self.full, self.policy) {
            (F::U64(_), Policy::Grr) => self.wide::<K, u64, false>(keys, weights, sink),
            (F::U64(_), Policy::Lru) => self.wide::<K, u64, true>(keys, weights, sink),
            (F::U128(_), Policy::Grr) => self.wide::<K, u128, false>(keys, weights, sink),
            (F::U128(_), Policy::Lru) => self.wide::<K, u128, true>(keys, weights, sink),
            (F::Keys(_), Policy::Grr) => self.wide::<K, FlowKey, false>(keys, weights, sink),
            (F::Keys(_), Policy::Lru) => self.wide::<K, FlowKey, true>(keys, weights, sink),
            // Not built for fingerprint mode (cannot happen: `narrow` and `full` are set
            // together): pass through rather than drop.
            (F::None, _) => {
                for (k, &w) in keys.iter().zip(weights) {
                    self.bypass(*k, w, sink);
                }
            }
        }
    }

    // ------------------------------------------------------------------ narrow mode

    /// Narrow mode, u32 input: the hot loop.
    #[inline(always)]
    fn narrow_u32<K: Kernel, const LRU: bool>(
        &mut self,
        keys: &[u32],
        weights: &[u64],
        sink: &mut Sink<'_>,
    ) {
        for (ks, ws) in keys.chunks(CHUNK).zip(weights.chunks(CHUNK)) {
            self.narrow_chunk::<K, LRU>(ks, ws);
            if self.out_n >= self.evict_batch {
                self.drain_u32(sink);
            }
        }
    }

    /// Narrow mode, `FlowKey` input: each chunk is converted to u32 (keys of another length
    /// bypass) and runs through the same chunk loop as [`Aggregator::update_batch_u32`], so the
    /// two paths evict the same sequence.
    #[inline(always)]
    fn narrow_keys<K: Kernel, const LRU: bool>(
        &mut self,
        keys: &[FlowKey],
        weights: &[u64],
        sink: &mut Sink<'_>,
    ) {
        let mut u = [0u32; CHUNK];
        let mut uw = [0u64; CHUNK];
        for (c, (ks, ws)) in keys.chunks(CHUNK).zip(weights.chunks(CHUNK)).enumerate() {
            // The input keys of the next chunk (38 bytes each): a caller streaming a large
            // preloaded trace otherwise waits on their first load.
            let next = keys.as_ptr_range().start.wrapping_add((c + 1) * CHUNK);
            for l in 0..(CHUNK * std::mem::size_of::<FlowKey>()).div_ceil(64) {
                simd::prefetch_ptr(next.cast::<u8>().wrapping_add(l * 64));
            }
            let mut m = 0;
            for (k, &w) in ks.iter().zip(ws) {
                match (k.len() == 4, u.get_mut(m), uw.get_mut(m)) {
                    (true, Some(x), Some(y)) => {
                        *x = k.prefix_u32();
                        *y = w;
                        m += 1;
                    }
                    _ => self.bypass(*k, w, sink),
                }
            }
            self.narrow_chunk::<K, LRU>(&u[..m], &uw[..m]);
            if self.out_n >= self.evict_batch {
                self.drain_u32(sink);
            }
        }
    }

    /// One chunk (at most `CHUNK` packets). Runs of the same key (trains of back-to-back
    /// packets of one flow are the norm on real links; 83% of the packets of figure 5's trace
    /// repeat the previous key) are merged into one update each, found by comparing the chunk
    /// with itself shifted by one (two 16-wide compares, [`Kernel::run_starts`]). Merging
    /// consecutive packets is the aggregation itself, done in registers: without it every
    /// packet of a train waits on the store of the previous one to the same counter (a chain
    /// through memory of several cycles a packet). Then each run is located and looked up
    /// ([`Aggregator::chunk_runs`]).
    #[inline(always)]
    fn narrow_chunk<K: Kernel, const LRU: bool>(&mut self, ks: &[u32], ws: &[u64]) {
        let n = ks.len().min(ws.len()).min(CHUNK);
        let (ks, ws) = (&ks[..n], &ws[..n]);
        if n == 0 {
            return;
        }
        // The lookup indexes the chunk by run start `p < n`; a fixed-length view makes that
        // `p & (CHUNK - 1)`, free, and lets the run starts be two 16-wide compares. A short
        // chunk (the tail of a batch) is padded; no run starts in the padding.
        let pad: [u32; CHUNK];
        let ks: &[u32; CHUNK] = match <&[u32; CHUNK]>::try_from(ks) {
            Ok(k) => k,
            Err(_) => {
                let mut p = [0u32; CHUNK];
                p[..n].copy_from_slice(ks);
                pad = p;
                &pad
            }
        };
        // Run weights: unit weights (packet counting) need no sums, the weight of run [p, q)
        // is q - p; otherwise exclusive prefix sums, exact in u64 while every weight is < 2^32
        // (32 of them sum below 2^37). A chunk holding a larger weight is not merged at all, so
        // such a packet stays a run of its own and bypasses as before. A merged run whose sum
        // exceeds u32 bypasses in the lookup.
        let (unit, mergeable) = weight_rules(ws);
        // SAFETY: `K`'s feature is present: `run::<K>` is instantiated for a SIMD `K` only
        // inside the `run_*` entry point of that feature, which `update` calls only for the
        // backend `new` checked (the same argument as every `K::find` on this path).
        let mut starts = if mergeable {
            unsafe { K::run_starts(ks) }
        } else {
            u32::MAX
        };
        starts &= u32::MAX >> (CHUNK - n);
        if unit {
            // Nothing of the weighted path runs here (no prefix sums, no table).
            self.chunk_runs::<K, LRU>(ks, n, starts, Unit);
        } else {
            self.chunk_runs::<K, LRU>(ks, n, starts, Prefix::new(ws));
        }
    }

    /// The array of a narrow key: `f % k` by fastmod, or the array hash for [`Index::Hash`].
    #[inline(always)]
    fn array_u32(index: Index, fastmod: FastMod, hash: &HashFn, k: usize, f: u32) -> usize {
        match index {
            Index::Modulo => fastmod.rem(f) as usize,
            Index::Hash => key::reduce(hash.hash_bytes(&f.to_be_bytes()), k),
        }
    }

    /// Locate and look up every run `[p, q)` of a chunk (the set bits of `starts` mark the
    /// first packets; `rw` gives the run's weight) in one pass: the run's array, then one
    /// 16-wide compare. One loop per chunk, not one to gather the runs, one to locate and
    /// prefetch and one to look up: the number of runs varies from chunk to chunk (the bursty
    /// trace averages ~6 per 32 packets), so each such loop's exit is a branch misprediction
    /// per chunk, and with no run buffers there is nothing to zero or copy. The separate
    /// prefetch pass is not needed on the branch-free lookup: nothing stops the out-of-order
    /// core from starting the next runs' loads while one run waits (the arrays, 258 KB for
    /// k = 2000, stay in L2). Measured: prefetching the next run's lines gained nothing, and a
    /// prefetch pass over chunks of 16 runs or more made shuffled traffic ~10% slower.
    ///
    /// With GRR and a SIMD kernel, hit, insert and eviction are one branch-free path
    /// ([`Aggregator::lookup_grr`]; about a quarter of the bursty trace's runs evict, at
    /// random, so a hit/miss branch mispredicts often); LRU and the scalar kernel take the
    /// branchy path ([`Aggregator::one_u32`]). Both evict the same sequence.
    #[inline(always)]
    fn chunk_runs<K: Kernel, const LRU: bool>(
        &mut self,
        ks: &[u32; CHUNK],
        n: usize,
        starts: u32,
        rw: impl RunWeight,
    ) {
        // Every index is `< k` by construction (fastmod and `reduce` return remainders); the
        // per-run check below is never taken (a predicted branch), and if it ever were, the
        // run would pass through unaggregated rather than index out of bounds.
        let cap = self.keys.len().min(self.vals.len()).min(self.occ.len());
        if LRU || K::SCALAR || self.branchy_grr {
            for (p, q) in Runs::new(starts, n) {
                let (f, w) = (ks[p & (CHUNK - 1)], rw.weight(p, q));
                let a = Self::array_u32(self.index, self.fastmod, &self.hash, self.k, f);
                if a >= cap {
                    debug_assert!(false, "array index {a} >= {cap}");
                    self.stats.bypassed += 1;
                    self.push_u32(f, w);
                    continue;
                }
                // SAFETY: a < cap, the length of `keys`, `vals` and `occ`.
                unsafe { self.one_u32::<K, LRU>(a, f, w) }
            }
        } else {
            // SAFETY: `K`'s feature is present (see `narrow_chunk`); `cap` is the least of the
            // three lengths.
            unsafe { self.lookup_grr::<K>(ks, n, starts, cap, rw) }
        }
    }

    /// GRR lookup of one chunk's runs, branch-free per run: hit, insert and eviction are one
    /// straight-line path. On a shuffled stream about one run in six misses, on the bursty
    /// trace about one in four, at random, so a branch on hit/miss (and the out-of-line miss
    /// call) cost a misprediction each; here the outcome only selects values
    /// (`select_unpredictable`, so they stay `cmov`s). The slot is the hit, else the first free
    /// slot (one `tzcnt` over both masks), else the GRR victim. The evicted (or overflowing)
    /// pair is always written to the eviction buffer and counted only when it is real; the GRR
    /// index advances only on an eviction, so the evicted sequence is exactly that of
    /// [`Aggregator::one_u32`] (tested against it). The GRR index and buffer fill live in
    /// registers for the chunk.
    ///
    /// # Safety
    /// `K`'s CPU feature is present; `cap <= self.keys.len(), self.vals.len(), self.occ.len()`.
    #[inline(always)]
    unsafe fn lookup_grr<K: Kernel>(
        &mut self,
        ks: &[u32; CHUNK],
        n: usize,
        starts: u32,
        cap: usize,
        rw: impl RunWeight,
    ) {
        // Room for one pushed pair per packet, so the buffer writes need no check per run.
        let need = self.out_n + n;
        if need > self.out_u32.len() || need > self.out_uw.len() {
            self.out_u32.resize(need, 0);
            self.out_uw.resize(need, 0);
        }
        let (index, fastmod, hash, k) = (self.index, self.fastmod, &self.hash, self.k);
        let (keys, vals, occs) = (&mut self.keys[..], &mut self.vals[..], &mut self.occ[..]);
        let (out_k, out_w) = (&mut self.out_u32[..], &mut self.out_uw[..]);
        let (mut grr, mut o) = (self.grr & (SLOTS - 1), self.out_n);
        let o0 = o;
        let mut bypassed = 0u64;
        let scratch = &mut self.scratch;
        for (p, q) in Runs::new(starts, n) {
            let (f, w) = (ks[p & (CHUNK - 1)], rw.weight(p, q));
            let a = Self::array_u32(index, fastmod, hash, k, f);
            // The value line's load waits for the key compare (its slot comes from it); start
            // fetching the line now so the two loads overlap (measured: ~1% on the bursty
            // trace, ~2% shuffled). A prefetch never faults, so it may precede the check of `a`.
            simd::prefetch_ptr(vals.as_ptr().wrapping_add(a));
            let w32 = match u32::try_from(w) {
                Ok(w32) if a < cap => w32,
                _ => {
                    // A run whose sum cannot be held (rare; a predictable branch), or an array
                    // index out of bounds (never: see `chunk_runs`): pass through, unaggregated.
                    debug_assert!(a < cap, "array index {a} >= {cap}");
                    // SAFETY: o < self.out_n + n <= the buffer lengths (resized above): at most
                    // one pair is written per run, and a chunk has at most n runs.
                    unsafe {
                        *out_k.get_unchecked_mut(o) = f;
                        *out_w.get_unchecked_mut(o) = w;
                    }
                    o += 1;
                    bypassed += 1;
                    continue;
                }
            };
            // SAFETY: a < cap <= the lengths of `occs`, `keys` and `vals`, and `K`'s feature
            // (both the caller's contract); `o` is in bounds of the
            // buffers as above.
            unsafe {
                let occ = occs.get_unchecked_mut(a);
                let oc = *occ;
                let m = K::find(keys.get_unchecked(a), f, oc);
                // Hit (bits 0-15) else first free slot (bits 16-31); 0 only for an eviction,
                // which takes the GRR slot. `evict` does not depend on `grr`, so the GRR
                // index's chain from packet to packet is one add.
                let cand = m | (u32::from(!oc) << SLOTS);
                let hit = m != 0;
                let evict = cand == 0;
                let s = std::hint::select_unpredictable(
                    evict,
                    grr,
                    cand.trailing_zeros() as usize & (SLOTS - 1),
                );
                let kl = &mut keys.get_unchecked_mut(a).0[s];
                let vl = &mut vals.get_unchecked_mut(a).0[s];
                let (old_k, old_v) = (*kl, *vl);
                let (sum, over) = old_v.overflowing_add(w32);
                let merge = hit & !over;
                // Never wrap a count: an overflowing hit hands the old sum on first.
                let push = evict | (hit & over);
                let nv = std::hint::select_unpredictable(merge, sum, w32);
                *vl = nv;
                // A hit stores its key to a scratch word, not the key line: a 4-byte store into
                // the line makes the next 64-byte compare of the same array (hot arrays come
                // back within a few packets) wait for the store to commit, as a store cannot be
                // forwarded into a wider load.
                let kp: *mut u32 =
                    std::hint::select_unpredictable(hit, &raw mut *scratch, kl as *mut u32);
                *kp = f;
                *occ = oc | (1 << s);
                *out_k.get_unchecked_mut(o) = old_k;
                *out_w.get_unchecked_mut(o) = u64::from(old_v);
                o += usize::from(push);
                grr = (grr + usize::from(evict)) & (SLOTS - 1);
            }
        }
        self.grr = grr;
        self.out_n = o;
        self.stats.evicted += (o - o0) as u64;
        self.stats.bypassed += bypassed;
    }

    /// One packet. Hits (the common case on skewed traffic) are the straight-line path: one
    /// 16-wide compare, one add.
    ///
    /// # Safety
    /// `a < self.keys.len(), self.vals.len(), self.occ.len()`, and `K`'s CPU feature is present.
    #[inline(always)]
    unsafe fn one_u32<K: Kernel, const LRU: bool>(&mut self, a: usize, f: u32, w: u64) {
        let Ok(w32) = u32::try_from(w) else {
            // A weight that cannot be held: pass through, unaggregated.
            self.stats.bypassed += 1;
            self.push_u32(f, w);
            return;
        };
        // SAFETY: the caller guarantees `a` is in bounds of `occ` and `keys`, and `K`'s feature.
        let (occ, m) = unsafe {
            let occ = *self.occ.get_unchecked(a);
            (occ, K::find(self.keys.get_unchecked(a), f, occ))
        };
        if m != 0 {
            let s = (m.trailing_zeros() as usize) & (SLOTS - 1);
            // SAFETY: the caller guarantees `a` is in bounds of `vals`.
            let v = unsafe { &mut self.vals.get_unchecked_mut(a).0[s] };
            match v.checked_add(w32) {
                Some(nv) => *v = nv,
                None => {
                    // Never wrap a count: hand the old sum on first.
                    let old = std::mem::replace(v, w32);
                    self.push_u32(f, u64::from(old));
                }
            }
            self.touch::<LRU>(a, s);
        } else {
            self.miss_u32::<LRU>(a, f, w32, occ);
        }
    }

    /// Miss: insert into a free slot, or evict the policy's victim and take its slot.
    #[inline(never)]
    fn miss_u32<const LRU: bool>(&mut self, a: usize, f: u32, w32: u32, occ: u16) {
        if occ != u16::MAX {
            let s = (!occ).trailing_zeros() as usize & (SLOTS - 1);
            if let (Some(kl), Some(vl), Some(o)) = (
                self.keys.get_mut(a),
                self.vals.get_mut(a),
                self.occ.get_mut(a),
            ) {
                kl.0[s] = f;
                vl.0[s] = w32;
                *o = occ | (1 << s);
            }
            self.touch::<LRU>(a, s);
        } else {
            let s = self.victim::<LRU>(a);
            if let (Some(kl), Some(vl)) = (self.keys.get_mut(a), self.vals.get_mut(a)) {
                let old = std::mem::replace(&mut kl.0[s], f);
                let v = std::mem::replace(&mut vl.0[s], w32);
                self.touch::<LRU>(a, s);
                self.push_u32(old, u64::from(v));
            }
        }
    }

    /// Append one update to the narrow buffer (drained by the chunk loop, so it never grows
    /// past `evict_batch + CHUNK`; if it somehow did, it grows rather than drop the update).
    #[inline(always)]
    fn push_u32(&mut self, key: u32, w: u64) {
        let n = self.out_n;
        match (self.out_u32.get_mut(n), self.out_uw.get_mut(n)) {
            (Some(k), Some(x)) => {
                *k = key;
                *x = w;
            }
            _ => {
                self.out_u32.resize(n + 1, 0);
                self.out_uw.resize(n + 1, 0);
                self.out_u32[n] = key;
                self.out_uw[n] = w;
            }
        }
        self.out_n = n + 1;
        self.stats.evicted += 1;
    }

    /// Hand on every whole batch of `evict_batch` narrow updates; keep the remainder.
    #[inline(never)]
    fn drain_u32(&mut self, sink: &mut Sink<'_>) {
        let (b, n) = (self.evict_batch, self.out_n);
        let mut start = 0;
        while n - start >= b {
            sink(
                KeyBatch::U32(&self.out_u32[start..start + b]),
                &self.out_uw[start..start + b],
            );
            start += b;
        }
        if start > 0 {
            self.out_u32.copy_within(start..n, 0);
            self.out_uw.copy_within(start..n, 0);
            self.out_n = n - start;
        }
    }

    /// Narrow mode: a key of another length passes through (its own buffer, as full keys).
    #[inline(never)]
    fn bypass(&mut self, key: FlowKey, w: u64, sink: &mut Sink<'_>) {
        self.stats.bypassed += 1;
        self.emit(key, w, sink);
    }

    /// Slot to evict from the full array `a`.
    #[inline(always)]
    fn victim<const LRU: bool>(&mut self, a: usize) -> usize {
        match LRU {
            false => {
                let s = self.grr;
                self.grr = (s + 1) & (SLOTS - 1);
                s
            }
            true => {
                let Some(st) = self.stamps.get(a) else {
                    return 0;
                };
                let mut best = 0;
                for s in 1..SLOTS {
                    if st.0[s] < st.0[best] {
                        best = s;
                    }
                }
                best
            }
        }
    }

    #[inline(always)]
    fn touch<const LRU: bool>(&mut self, a: usize, s: usize) {
        if LRU {
            if self.clock == u32::MAX {
                // Once per 2^32 touches: restart the clock. Recency is forgotten once (the
                // next evictions are round-robin-like); counts are unaffected.
                self.clock = 0;
                for l in &mut self.stamps {
                    *l = Line::default();
                }
            }
            self.clock += 1;
            if let Some(l) = self.stamps.get_mut(a) {
                l.0[s & (SLOTS - 1)] = self.clock;
            }
        }
    }

    /// Append one full-key update (fingerprint-mode eviction, or a narrow-mode bypass).
    #[inline(always)]
    fn emit(&mut self, key: FlowKey, w: u64, sink: &mut Sink<'_>) {
        self.out_keys.push(key);
        self.out_w.push(w);
        self.stats.evicted += 1;
        if self.out_keys.len() >= self.evict_batch {
            self.drain(sink);
        }
    }

    #[inline(never)]
    fn drain(&mut self, sink: &mut Sink<'_>) {
        if !self.out_keys.is_empty() {
            sink(KeyBatch::Keys(&self.out_keys), &self.out_w);
            self.out_keys.clear();
            self.out_w.clear();
        }
    }
}

/// Convenience: feed `algos` through an aggregator (fan-out: each eviction batch goes to every
/// algorithm, through `update_batch_u32` for u32 batches).
pub fn fan_out<'a>(algos: &'a mut [Box<dyn Algorithm>]) -> impl FnMut(KeyBatch<'_>, &[u64]) + 'a {
    move |keys, weights| {
        for a in algos.iter_mut() {
            keys.feed(a.as_mut(), weights);
        }
    }
}

/// Hand `batch` to `f` as full keys: `Keys` as is, `U32` converted chunk by chunk on the stack
/// (for consumers that take only `FlowKey`s).
pub fn with_flow_keys(batch: KeyBatch<'_>, weights: &[u64], f: &mut dyn FnMut(&[FlowKey], &[u64])) {
    match batch {
        KeyBatch::Keys(k) => f(k, weights),
        KeyBatch::U32(k) => {
            let mut buf = [FlowKey::EMPTY; CHUNK];
            for (ks, ws) in k.chunks(CHUNK).zip(weights.chunks(CHUNK)) {
                let n = ks.len().min(ws.len());
                for (b, &x) in buf.iter_mut().zip(ks) {
                    *b = FlowKey::from_u32(x);
                }
                f(&buf[..n], &ws[..n]);
            }
        }
    }
}

#[cfg(test)]
mod tests;
