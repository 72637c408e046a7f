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
//! (`FlowKey::prefix_u32`). Wider keys store their 32-bit XOR fold (`FlowKey::fold32`, section
//! 3.4 "Handling large flow IDs") plus the full key in a parallel flow-ID array; a fingerprint
//! hit compares full keys, and a collision evicts the old pair, so no count is ever merged into
//! the wrong key. In narrow mode a key of another length (an IPv6 source in an IPv4 run) cannot
//! be stored; it bypasses the aggregator as an unbatched update, counted in [`AggStats::bypassed`].
//!
//! Evictions are buffered and handed on in batches of [`AggConfig::evict_batch`] so the
//! algorithm can hash the whole batch and prefetch (`Algorithm::update_batch`).
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
use key::{FlowKey, HashFn, MAX_KEY_LEN};
use serde::{Deserialize, Serialize};

pub mod simd;

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
                        expected: concat!($($n, " "),+),
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

/// Marks a packet that bypasses the arrays (narrow mode, other key length).
const BYPASS: u32 = u32::MAX;

/// Packets whose arrays are located and prefetched before any of them is processed.
const CHUNK: usize = 32;

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
    /// Fingerprint mode only: the full key of each slot (k x 16).
    full: Vec<FlowKey>,
    /// GRR: the next slot to evict in whatever array is full.
    grr: usize,
    evict_batch: usize,
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
        let simd = match cfg.simd {
            Simd::Auto => simd::detect(),
            s if simd::available(s) => s,
            s => return Err(AggError::SimdUnavailable(s)),
        };
        let k = cfg.arrays;
        let narrow = key_len == 4;
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
            full: if narrow {
                Vec::new()
            } else {
                vec![FlowKey::EMPTY; k * SLOTS]
            },
            grr: 0,
            evict_batch: cfg.evict_batch,
            out_keys: Vec::with_capacity(cfg.evict_batch),
            out_w: Vec::with_capacity(cfg.evict_batch),
            stats: AggStats::default(),
        })
    }

    /// The backend actually in use.
    pub fn simd(&self) -> Simd {
        self.simd
    }

    /// Whether keys are stored directly (4-byte keys) rather than as fingerprints.
    pub fn is_narrow(&self) -> bool {
        self.narrow
    }

    /// Pairs currently held (not yet handed on).
    pub fn len(&self) -> usize {
        self.occ
            .iter()
            .map(|o| o.count_ones() as usize)
            .sum::<usize>()
            + self.out_keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Aggregate a batch; evicted (key, count) batches are passed to `sink`.
    /// `keys` and `weights` pair up; if their lengths differ, the surplus of the longer one is
    /// ignored (a caller bug, caught by a debug assertion).
    pub fn update_batch(
        &mut self,
        keys: &[FlowKey],
        weights: &[u64],
        sink: &mut dyn FnMut(&[FlowKey], &[u64]),
    ) {
        debug_assert_eq!(keys.len(), weights.len());
        let n = keys.len().min(weights.len());
        let (keys, weights) = (&keys[..n], &weights[..n]);
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
    /// hand on the buffer. Afterwards the aggregator is as new (GRR index and LRU clock reset),
    /// stats aside.
    pub fn flush(&mut self, sink: &mut dyn FnMut(&[FlowKey], &[u64])) {
        for a in 0..self.k {
            let mut occ = self.occ[a];
            while occ != 0 {
                let s = occ.trailing_zeros() as usize;
                occ &= occ - 1;
                let key = self.slot_key(a, s);
                let v = self.vals[a].0[s];
                self.stats.flushed += 1;
                self.emit(key, u64::from(v), sink);
            }
            self.occ[a] = 0;
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

    /// Bytes of state: keys, values, occupancy, LRU stamps, flow-ID array, eviction buffer.
    pub fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        (self.keys.len() + self.vals.len() + self.stamps.len()) * size_of::<Line>()
            + self.occ.len() * 2
            + self.full.len() * size_of::<FlowKey>()
            + self.evict_batch * (size_of::<FlowKey>() + 8)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn run_avx512(
        &mut self,
        keys: &[FlowKey],
        weights: &[u64],
        sink: &mut dyn FnMut(&[FlowKey], &[u64]),
    ) {
        self.run::<simd::x86::Avx512>(keys, weights, sink)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn run_avx2(
        &mut self,
        keys: &[FlowKey],
        weights: &[u64],
        sink: &mut dyn FnMut(&[FlowKey], &[u64]),
    ) {
        self.run::<simd::x86::Avx2>(keys, weights, sink)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "sse2")]
    unsafe fn run_sse2(
        &mut self,
        keys: &[FlowKey],
        weights: &[u64],
        sink: &mut dyn FnMut(&[FlowKey], &[u64]),
    ) {
        self.run::<simd::x86::Sse2>(keys, weights, sink)
    }

    /// Picks the loop specialised for the key mode and policy (branch-free per packet).
    #[inline(always)]
    fn run<K: Kernel>(
        &mut self,
        keys: &[FlowKey],
        weights: &[u64],
        sink: &mut dyn FnMut(&[FlowKey], &[u64]),
    ) {
        match (self.narrow, self.policy) {
            (true, Policy::Grr) => self.run_mode::<K, true, false>(keys, weights, sink),
            (true, Policy::Lru) => self.run_mode::<K, true, true>(keys, weights, sink),
            (false, Policy::Grr) => self.run_mode::<K, false, false>(keys, weights, sink),
            (false, Policy::Lru) => self.run_mode::<K, false, true>(keys, weights, sink),
        }
    }

    /// The batch loop, compiled once per kernel, key mode and policy (inlined into each
    /// `run_*` entry point, so the kernel inlines too).
    #[inline(always)]
    fn run_mode<K: Kernel, const NARROW: bool, const LRU: bool>(
        &mut self,
        keys: &[FlowKey],
        weights: &[u64],
        sink: &mut dyn FnMut(&[FlowKey], &[u64]),
    ) {
        let mut idx = [0u32; CHUNK];
        let mut fp = [0u32; CHUNK];
        for (c, (ks, ws)) in keys.chunks(CHUNK).zip(weights.chunks(CHUNK)).enumerate() {
            // The input keys of the next chunk (38 bytes each): a caller streaming a large
            // preloaded trace otherwise waits on their first load (the hottest instruction in a
            // profile of the loop).
            let next = keys.as_ptr_range().start.wrapping_add((c + 1) * CHUNK);
            for l in 0..(CHUNK * std::mem::size_of::<FlowKey>()).div_ceil(64) {
                simd::prefetch_ptr(next.cast::<u8>().wrapping_add(l * 64));
            }
            // Pass 1: locate every packet's array and prefetch its key and value lines, so
            // the misses of the chunk overlap instead of serialising in pass 2.
            for ((k, i), f) in ks.iter().zip(idx.iter_mut()).zip(fp.iter_mut()) {
                let (a, x) = self.locate::<NARROW>(k);
                *i = a;
                *f = x;
                if let (Some(kl), Some(vl)) = (self.keys.get(a as usize), self.vals.get(a as usize))
                {
                    simd::prefetch(kl);
                    simd::prefetch(vl);
                }
            }
            for (((k, &w), &a), &f) in ks.iter().zip(ws).zip(&idx).zip(&fp) {
                self.one::<K, NARROW, LRU>(a, f, k, w, sink);
            }
        }
    }

    /// (array, SIMD key) of `key`; array `BYPASS` if it cannot be stored.
    #[inline(always)]
    fn locate<const NARROW: bool>(&self, key: &FlowKey) -> (u32, u32) {
        let f = if NARROW {
            if key.len() != 4 {
                return (BYPASS, 0);
            }
            key.prefix_u32()
        } else {
            key.fold32()
        };
        let a = match self.index {
            Index::Modulo => self.fastmod.rem(f),
            Index::Hash => key::reduce(self.hash.hash(key), self.k) as u32,
        };
        (a, f)
    }

    #[inline(always)]
    fn one<K: Kernel, const NARROW: bool, const LRU: bool>(
        &mut self,
        a: u32,
        f: u32,
        key: &FlowKey,
        w: u64,
        sink: &mut dyn FnMut(&[FlowKey], &[u64]),
    ) {
        let a = a as usize;
        let w32 = match u32::try_from(w) {
            Ok(w32) if a < self.k => w32,
            // Other key length in narrow mode, or a weight that cannot be held: pass through.
            _ => {
                self.stats.bypassed += 1;
                self.emit(*key, w, sink);
                return;
            }
        };
        let occ = self.occ[a];
        // SAFETY: `new` accepted this kernel only after `simd::available` confirmed its CPU
        // feature.
        let m = unsafe { K::find(&self.keys[a], f, occ) };
        if m != 0 {
            let s = (m.trailing_zeros() as usize) & (SLOTS - 1);
            if !NARROW && self.full[a * SLOTS + s] != *key {
                // Fingerprint collision: evict the other flow, give its slot to this one.
                let old = std::mem::replace(&mut self.full[a * SLOTS + s], *key);
                let v = std::mem::replace(&mut self.vals[a].0[s], w32);
                self.touch::<LRU>(a, s);
                self.emit(old, u64::from(v), sink);
                return;
            }
            let v = self.vals[a].0[s];
            match v.checked_add(w32) {
                Some(nv) => self.vals[a].0[s] = nv,
                None => {
                    // Never wrap a count: hand the old sum on first.
                    self.vals[a].0[s] = w32;
                    self.emit(*key, u64::from(v), sink);
                }
            }
            self.touch::<LRU>(a, s);
        } else if occ != u16::MAX {
            let s = (!occ).trailing_zeros() as usize & (SLOTS - 1);
            self.keys[a].0[s] = f;
            self.vals[a].0[s] = w32;
            self.occ[a] = occ | (1 << s);
            if !NARROW {
                self.full[a * SLOTS + s] = *key;
            }
            self.touch::<LRU>(a, s);
        } else {
            let s = self.victim::<LRU>(a);
            let old = self.slot_key_m::<NARROW>(a, s);
            let v = std::mem::replace(&mut self.vals[a].0[s], w32);
            self.keys[a].0[s] = f;
            if !NARROW {
                self.full[a * SLOTS + s] = *key;
            }
            self.touch::<LRU>(a, s);
            self.emit(old, u64::from(v), sink);
        }
    }

    /// The full key held in slot `s` of array `a`.
    fn slot_key(&self, a: usize, s: usize) -> FlowKey {
        if self.narrow {
            self.slot_key_m::<true>(a, s)
        } else {
            self.slot_key_m::<false>(a, s)
        }
    }

    #[inline(always)]
    fn slot_key_m<const NARROW: bool>(&self, a: usize, s: usize) -> FlowKey {
        if NARROW {
            FlowKey::from_u32(self.keys[a].0[s])
        } else {
            self.full[a * SLOTS + s]
        }
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
                let st = &self.stamps[a].0;
                let mut best = 0;
                for s in 1..SLOTS {
                    if st[s] < st[best] {
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
            self.stamps[a].0[s] = self.clock;
        }
    }

    #[inline(always)]
    fn emit(&mut self, key: FlowKey, w: u64, sink: &mut dyn FnMut(&[FlowKey], &[u64])) {
        self.out_keys.push(key);
        self.out_w.push(w);
        self.stats.evicted += 1;
        if self.out_keys.len() >= self.evict_batch {
            self.drain(sink);
        }
    }

    #[inline(never)]
    fn drain(&mut self, sink: &mut dyn FnMut(&[FlowKey], &[u64])) {
        if !self.out_keys.is_empty() {
            sink(&self.out_keys, &self.out_w);
            self.out_keys.clear();
            self.out_w.clear();
        }
    }
}

/// Convenience: feed `algos` through an aggregator (fan-out: each eviction batch goes to every
/// algorithm).
pub fn fan_out<'a>(algos: &'a mut [Box<dyn Algorithm>]) -> impl FnMut(&[FlowKey], &[u64]) + 'a {
    move |keys, weights| {
        for a in algos.iter_mut() {
            a.update_batch(keys, weights);
        }
    }
}

#[cfg(test)]
mod tests;
