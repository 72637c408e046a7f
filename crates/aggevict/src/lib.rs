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
//! Not covered: conservative update (not in the catalog), `bloom_spreader` and `ewma_change`
//! (ALGORITHMS.md 11: per-source BF counters are order-dependent; EWMA is exact per flow).
//!
//! # Modules
//!
//! Here: the [`Aggregator`] core (construction, dispatch to the SIMD backend and key mode, flush,
//! the eviction buffers and policy helpers both key modes share). `config`: [`AggConfig`], its
//! enums and [`AggError`]; `fastmod`: the array index without a division; `runs`: the run merge
//! of a chunk, shared by both key modes; `narrow`: the u32 path (the hot path above); `wide`:
//! fingerprint mode; [`simd`]: the lookup and run-start kernels.

#![warn(clippy::undocumented_unsafe_blocks)]

use algo::Algorithm;
pub use algo::KeyBatch;
use key::{FlowKey, HashFn, KeyKind, MAX_KEY_LEN};
use serde::{Deserialize, Serialize};

mod config;
mod fastmod;
mod narrow;
mod runs;
pub mod simd;
mod wide;

pub use config::{AggConfig, AggError, Index, Policy, Simd, MAX_ARRAYS, MAX_EVICT_BATCH};
use fastmod::FastMod;
use simd::{Kernel, Scalar};
pub use simd::{Line, SLOTS};

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
    /// Table lookups: runs of equal back-to-back keys within a chunk, one lookup each (the run
    /// merge of the hot path). `runs / packets` is 1 on shuffled traffic, about 0.2 on the
    /// bursty trace; the aggregator's cost per packet follows it ([`COST`]).
    #[serde(default)]
    pub runs: u64,
}

/// What the aggregator costs, per packet offered and per table lookup (run), on the u32 path
/// (4-byte keys) and the fingerprint path (wider keys): the model the adaptive front
/// (`front::AggMode::Auto`) weighs against the algorithms' [`algo::UpdateCost`]. A packet
/// costs `packet_ns + run_ns * runs / packets`: the run merge touches every packet, the table
/// only once per run, so bursty traffic (few runs) is cheap and shuffled traffic (a run per
/// packet) dear. Constants from benchmarks, not timed at run time (decisions must be
/// deterministic).
///
/// Measured on the 2-core Zen 4 VM (release, AVX-512 kernel, GRR, k = 2000, batches of 32) by
/// `cargo run --release -p catalog --example update_costs`, in the same process and rounds as
/// the algorithms' `algo::UpdateCost` (so machine load weighs on both alike): the aggregator
/// alone over Zipf(1.1), 500 k flows, bursty (runs/packet about 0.2) and shuffled (about 1.0),
/// u32 and five-tuple keys, thread CPU time, least of 3 rounds; the two orders' ns/packet
/// solve for the two constants of each path. Refitted 2026-11-25 09:19-09:34 UTC with every
/// algorithm's (branch h-adapt: means of four runs, two of `update_costs` and two of
/// `update_costs agg-evict`, load average 4-6; the four agree within 5%).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AggCost {
    pub packet_ns: f64,
    pub run_ns: f64,
}

/// [`AggCost`] of the u32 path (narrow mode).
pub const COST_U32: AggCost = AggCost {
    packet_ns: 0.81,
    run_ns: 4.51,
};

/// [`AggCost`] of the fingerprint path (keys wider than 4 bytes).
pub const COST_WIDE: AggCost = AggCost {
    packet_ns: 5.25,
    run_ns: 8.75,
};

impl AggCost {
    /// The cost of the path a key of `key_len` bytes takes.
    pub fn for_key_len(key_len: usize) -> AggCost {
        if key_len == 4 {
            COST_U32
        } else {
            COST_WIDE
        }
    }
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

/// Seed of the array hash for [`Index::Hash`] (placement only; answers never depend on it).
const INDEX_SEED: u64 = 0x6167_6765_7669_6374; // "aggevict"

// Packets per chunk of the batch loop (defined with the run-start kernels, which take one
// chunk). Also the headroom of the narrow eviction buffer: at most one eviction per packet,
// drained to below `evict_batch` after every chunk.
use simd::CHUNK;

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
        let keys = keys.split_at(n).0;
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

    #[inline]
    pub fn stats(&self) -> AggStats {
        self.stats
    }

    /// Pairs in the table (not buffered evictions, which `stats().evicted` already counts).
    /// `evicted + held` grows by one per miss, whatever the table held before and across a
    /// flush: the updates the packets so far will have caused once flushed.
    pub fn held(&self) -> u64 {
        self.occ.iter().map(|o| u64::from(o.count_ones())).sum()
    }

    pub fn reset_stats(&mut self) {
        self.stats = AggStats::default();
    }

    /// Bytes of state: keys, values, occupancy, LRU stamps, flow-ID array, eviction buffers.
    /// The [`Aggregator::memory_bytes`] an aggregator built with `cfg` for `key_len`-byte keys
    /// has, computed without building it (for a run's memory budget; `arrays` is at most
    /// [`MAX_ARRAYS`], so this cannot overflow).
    pub fn memory_for(cfg: &AggConfig, key_len: usize) -> usize {
        use std::mem::size_of;
        let k = cfg.arrays.min(MAX_ARRAYS);
        let lines = if cfg.policy == Policy::Lru { 3 } else { 2 };
        let narrow = key_len == 4;
        let batch = cfg.evict_batch.min(MAX_EVICT_BATCH);
        lines * k * size_of::<Line>()
            + k * 2
            + wide::FullKeys::bytes_for(key_len, k)
            + if narrow { (batch + CHUNK) * 12 } else { 0 }
            + if narrow {
                0
            } else {
                batch * (size_of::<FlowKey>() + 8)
            }
    }

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
            (KeyBatch::Keys(k), false, _) => self.wide_any::<K, _>(k, KeyKind::Src, weights, sink),
            (KeyBatch::V4(k, kind), false, _) => self.wide_any::<K, _>(k, kind, weights, sink),
            // Narrow mode: the u32 keys of a 4-byte kind (or the keys of another, which pass
            // through), chunk by chunk.
            (KeyBatch::V4(..), true, pol) => {
                keys.materialized(weights, &mut |b, w, _| match (b, pol) {
                    (KeyBatch::U32(k), Policy::Grr) => self.narrow_u32::<K, false>(k, w, sink),
                    (KeyBatch::U32(k), Policy::Lru) => self.narrow_u32::<K, true>(k, w, sink),
                    (KeyBatch::Keys(k), Policy::Grr) => self.narrow_keys::<K, false>(k, w, sink),
                    (KeyBatch::Keys(k), Policy::Lru) => self.narrow_keys::<K, true>(k, w, sink),
                    (KeyBatch::V4(..), _) => unreachable!("materialized gives keys or u32"),
                })
            }
            (KeyBatch::U32(k), false, _) => {
                // 4-byte keys offered to a fingerprint-mode aggregator: convert, chunk by chunk.
                let mut buf = [FlowKey::EMPTY; CHUNK];
                for (ks, ws) in k.chunks(CHUNK).zip(weights.chunks(CHUNK)) {
                    for (b, &x) in buf.iter_mut().zip(ks) {
                        *b = FlowKey::from_u32(x);
                    }
                    self.wide_any::<K, _>(&buf[..ks.len()], KeyKind::Src, ws, sink);
                }
            }
        }
    }

    /// Fingerprint mode: the loop for this aggregator's key representation and policy.
    /// `kind`: the kind packed tuples stand for (`KeyBatch::V4`; unused for full keys).
    #[inline(always)]
    fn wide_any<K: Kernel, T: wide::Item>(
        &mut self,
        keys: &[T],
        kind: KeyKind,
        weights: &[u64],
        sink: &mut Sink<'_>,
    ) {
        use wide::FullKeys as F;
        match (&self.full, self.policy) {
            (F::U64(_), Policy::Grr) => self.wide::<K, u64, false, T>(keys, kind, weights, sink),
            (F::U64(_), Policy::Lru) => self.wide::<K, u64, true, T>(keys, kind, weights, sink),
            (F::U128(_), Policy::Grr) => self.wide::<K, u128, false, T>(keys, kind, weights, sink),
            (F::U128(_), Policy::Lru) => self.wide::<K, u128, true, T>(keys, kind, weights, sink),
            (F::Keys(_), Policy::Grr) => {
                self.wide::<K, FlowKey, false, T>(keys, kind, weights, sink)
            }
            (F::Keys(_), Policy::Lru) => {
                self.wide::<K, FlowKey, true, T>(keys, kind, weights, sink)
            }
            // Not built for fingerprint mode (cannot happen: `narrow` and `full` are set
            // together): pass through rather than drop.
            (F::None, _) => {
                for (k, &w) in keys.iter().zip(weights) {
                    self.bypass(k.key(kind), w, sink);
                }
            }
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
        KeyBatch::V4(k, kind) => {
            let mut buf = [FlowKey::EMPTY; CHUNK];
            for (ks, ws) in k.chunks(CHUNK).zip(weights.chunks(CHUNK)) {
                let n = ks.len().min(ws.len());
                for (b, v) in buf.iter_mut().zip(ks) {
                    *b = v.key(kind);
                }
                f(&buf[..n], &ws[..n]);
            }
        }
    }
}

#[cfg(test)]
mod tests;
