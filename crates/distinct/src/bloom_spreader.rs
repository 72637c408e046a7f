//! Per-host Bloom-filter superspreader / DDoS detector of "Re-evaluating measurement algorithms
//! in software" (papers/reevaluating-measurement-algorithms.txt, "Superspreader detection":
//! "for every source IP, we keep a distinct Bloom filter counter per entry with three hash
//! functions and 1024 bits"; report sources with more than 128 destinations), ALGORITHMS.md
//! section 11.
//!
//! Fed with `pair` keys (or 4-/5-tuples): the *host* is the source for superspreaders
//! (`BuildCtx::side == Src`) or the destination for DDoS victims (`Dst`); the *peer* is the other
//! address. Each host owns a `bits`-bit Bloom filter of its peers and a counter. On
//! `(host, peer)`: test and set the peer's `hashes` bits; if any was 0 the peer is new and the
//! counter goes up by one. When the counter crosses `threshold` (from `threshold` to
//! `threshold + 1`: "more than 128 destinations") the host is appended to an online report
//! ([`BloomSpreader::crossed`], the paper's per-packet alarm); [`Algorithm::spreaders`] answers
//! the epoch-end query for any threshold.
//!
//! **Guarantees.** The counter only grows when a peer is provably new to the filter, so it never
//! exceeds the true number of distinct peers: no host with at most `T` true peers is ever
//! reported (precision 1, before any merge). Bloom false positives make it an under-count:
//! the i-th new peer is missed with probability ≈ (1 − e^(−k·i/m))^k, ≈ 3% at i = 128 with the
//! defaults, so a host just above the threshold can be missed. Which peers are missed depends on
//! arrival order (class C, ALGORITHMS.md 0): state after Agg-Evict reordering differs, bounds
//! hold.
//!
//! **Memory** grows with the number of distinct hosts: `bits/8` bytes of filter, an 8-byte
//! counter, the host key and a hash-map entry per host (≈ 230 bytes per host at 1024 bits). The
//! hosts live in a `key::KeyMap` from host to a slot of flat arrays (one allocation for all
//! filters, no per-host heap object). `max_hosts` (0 = unlimited, the paper's behaviour) caps it:
//! updates for new hosts beyond the cap are refused and counted ([`BloomSpreader::dropped`]).
//!
//! Hashing: the peer is hashed once (xxh3-64); the `k` filter positions are Kirsch-Mitzenmacher
//! double hashes `h1 + i·h2` of the two 32-bit halves (the standard Bloom-filter construction,
//! same false-positive rate asymptotically; the paper's artifact slices one 32-bit hash into
//! three 10-bit parts). All hosts share the hash, which is fine because their peer sets differ.
//!
//! Keys without a source/destination part (4-byte `src` keys, odd lengths) are ignored and
//! counted ([`BloomSpreader::skipped`]). The weight is ignored.
//!
//! **Merge** (per-core or per-host states): filters are OR-ed; a host's counter becomes the
//! union estimate from the merged filter's set bits, `−(m/k)·ln(1 − X/m)`, clamped between the
//! larger and the sum of the two counters. This is an estimate, not the counter the merged stream
//! would have produced, so after a merge the "never above the truth" guarantee becomes
//! approximate.

use algo::{Algorithm, BuildCtx, ConfigError, Estimate, MergeError, Side, Task};
use key::{FlowKey, HashFn, KeyMap};
use serde::{Deserialize, Serialize};

pub const NAME: &str = "bloom_spreader";
/// Every task it can answer: superspreaders built with `Side::Src`, DDoS victims with `Side::Dst`.
const TASKS: &[Task] = &[Task::Superspreaders, Task::Ddos];
/// `key::sub_seed` index of this algorithm ("BSS").
const SEED_TAG: u64 = 0x0042_5353;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BloomSpreaderConfig {
    /// Bits per host Bloom filter (paper: 1024).
    pub bits: usize,
    /// Hash functions per filter (paper: 3).
    pub hashes: u32,
    /// Online report threshold: a host is appended to `crossed()` when its distinct-peer counter
    /// first exceeds it (paper: 128).
    pub threshold: u64,
    /// Most hosts tracked; 0 = unlimited (paper). New hosts beyond it are dropped and counted.
    pub max_hosts: usize,
}

impl Default for BloomSpreaderConfig {
    fn default() -> Self {
        BloomSpreaderConfig {
            bits: 1024,
            hashes: 3,
            threshold: 128,
            max_hosts: 0,
        }
    }
}

impl BloomSpreaderConfig {
    /// Largest `bits` accepted (positions come from 32-bit double hashes; 8 KiB per host).
    pub const MAX_BITS: usize = 1 << 16;
    /// Largest `hashes` accepted.
    pub const MAX_HASHES: u32 = 16;

    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.bits == 0 || self.bits > Self::MAX_BITS {
            return Err(ConfigError::Invalid {
                algo: NAME,
                field: "bits",
                reason: format!("must be in 1..={}, got {}", Self::MAX_BITS, self.bits),
            });
        }
        if self.hashes == 0 || self.hashes > Self::MAX_HASHES {
            return Err(ConfigError::Invalid {
                algo: NAME,
                field: "hashes",
                reason: format!("must be in 1..={}, got {}", Self::MAX_HASHES, self.hashes),
            });
        }
        if self.max_hosts > u32::MAX as usize {
            return Err(ConfigError::Invalid {
                algo: NAME,
                field: "max_hosts",
                reason: format!("must be at most {}, got {}", u32::MAX, self.max_hosts),
            });
        }
        Ok(())
    }

    /// Bytes `memory_bytes` counts per tracked host: its filter, counter, key, map entry with
    /// its control byte, and a `crossed` slot (at most one per host).
    pub fn bytes_per_host(&self) -> u64 {
        (self.words() * 8 + Self::HOST_OVERHEAD + std::mem::size_of::<u32>()) as u64
    }

    /// Per-host bytes besides the filter: counter, host key, map entry and control byte.
    const HOST_OVERHEAD: usize = std::mem::size_of::<u64>()
        + std::mem::size_of::<FlowKey>()
        + std::mem::size_of::<(FlowKey, u32)>()
        + 1; // hashbrown control byte

    fn words(&self) -> usize {
        self.bits.div_ceil(64)
    }

    /// Probability that the `(i+1)`-th distinct peer of a host is a Bloom false positive, given
    /// `i` peers already in its filter: `(1 − e^(−k·i/m))^k`.
    pub fn false_positive_rate(&self, i: u64) -> f64 {
        let k = f64::from(self.hashes);
        (1.0 - (-k * i as f64 / self.bits as f64).exp()).powf(k)
    }
}

/// Per-host Bloom-filter distinct-peer counter. See the module documentation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "BloomSpreaderState")]
pub struct BloomSpreader {
    cfg: BloomSpreaderConfig,
    side: Side,
    hash: HashFn,
    /// Host of slot `i`.
    hosts: Vec<FlowKey>,
    /// Distinct-peer counter of slot `i`.
    counts: Vec<u64>,
    /// Filter of slot `i`: `filters[i*words .. (i+1)*words]`.
    filters: Vec<u64>,
    /// Slots whose counter crossed `cfg.threshold`, in crossing order.
    crossed: Vec<u32>,
    skipped: u64,
    dropped: u64,
    /// host -> slot; rebuilt from `hosts` on deserialization.
    #[serde(skip)]
    index: KeyMap<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BloomSpreaderState {
    cfg: BloomSpreaderConfig,
    side: Side,
    hash: HashFn,
    hosts: Vec<FlowKey>,
    counts: Vec<u64>,
    filters: Vec<u64>,
    crossed: Vec<u32>,
    skipped: u64,
    dropped: u64,
}

impl algo::CheckState for BloomSpreader {
    /// Nothing left to check: the state's own conversion (`TryFrom<BloomSpreaderState>`, through
    /// `serde(try_from)`) checked every decoded size against its configuration.
    fn check_state(&self) -> Result<(), String> {
        Ok(())
    }
}

impl TryFrom<BloomSpreaderState> for BloomSpreader {
    type Error = String;
    fn try_from(s: BloomSpreaderState) -> Result<Self, String> {
        s.cfg.validate().map_err(|e| e.to_string())?;
        let n = s.hosts.len();
        if s.counts.len() != n || Some(s.filters.len()) != n.checked_mul(s.cfg.words()) {
            return Err(format!(
                "bloom_spreader: {n} hosts but {} counters and {} filter words",
                s.counts.len(),
                s.filters.len()
            ));
        }
        if n > u32::MAX as usize || (s.cfg.max_hosts > 0 && n > s.cfg.max_hosts) {
            return Err(format!("bloom_spreader: too many hosts ({n})"));
        }
        if s.crossed.iter().any(|&i| i as usize >= n) {
            return Err("bloom_spreader: crossed list names a missing host".into());
        }
        let mut index = KeyMap::default();
        index.reserve(n);
        for (i, h) in s.hosts.iter().enumerate() {
            if index.insert(*h, i as u32).is_some() {
                return Err(format!("bloom_spreader: host {h} stored twice"));
            }
        }
        Ok(BloomSpreader {
            cfg: s.cfg,
            side: s.side,
            hash: s.hash,
            hosts: s.hosts,
            counts: s.counts,
            filters: s.filters,
            crossed: s.crossed,
            skipped: s.skipped,
            dropped: s.dropped,
            index,
        })
    }
}

impl BloomSpreader {
    pub fn new(cfg: BloomSpreaderConfig, ctx: &BuildCtx) -> Result<BloomSpreader, ConfigError> {
        cfg.validate()?;
        Ok(BloomSpreader {
            cfg,
            side: ctx.side,
            hash: HashFn::new(key::sub_seed(ctx.seed, SEED_TAG)),
            hosts: Vec::new(),
            counts: Vec::new(),
            filters: Vec::new(),
            crossed: Vec::new(),
            skipped: 0,
            dropped: 0,
            index: KeyMap::default(),
        })
    }

    pub fn config(&self) -> &BloomSpreaderConfig {
        &self.cfg
    }

    pub fn side(&self) -> Side {
        self.side
    }

    /// Number of hosts tracked.
    pub fn hosts(&self) -> usize {
        self.hosts.len()
    }

    /// Distinct-peer counter of `host` (0 if never seen).
    pub fn count(&self, host: &FlowKey) -> u64 {
        self.index
            .get(host)
            .and_then(|&i| self.counts.get(i as usize))
            .copied()
            .unwrap_or(0)
    }

    /// Hosts whose counter crossed `threshold` during the epoch, in the order they crossed (the
    /// paper's online report).
    pub fn crossed(&self) -> Vec<FlowKey> {
        self.crossed
            .iter()
            .filter_map(|&i| self.hosts.get(i as usize).copied())
            .collect()
    }

    /// Keys ignored because they have no source/destination part.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Updates refused because `max_hosts` hosts were already tracked.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Slot of the key's host (created if needed) and the hash of its peer; `None` (and the
    /// matching counter bumped) for keys without two addresses or beyond `max_hosts`.
    #[inline]
    fn locate(&mut self, key: &FlowKey) -> Option<(usize, u64)> {
        let Some((host, peer)) = self.host_peer(key) else {
            self.skipped += 1;
            return None;
        };
        let Some(slot) = self.slot(host) else {
            self.dropped += 1;
            return None;
        };
        Some((slot, self.hash.hash(&peer)))
    }

    /// The filter bit positions of a peer hash (Kirsch-Mitzenmacher, see the module docs).
    #[inline]
    fn positions(&self, h: u64) -> impl Iterator<Item = usize> {
        let (h1, h2, bits) = (h as u32, (h >> 32) as u32, self.cfg.bits);
        (0..self.cfg.hashes)
            .map(move |i| crate::reduce32(h1.wrapping_add(i.wrapping_mul(h2)), bits))
    }

    /// Test and set the peer's bits in the host's filter; count the peer if any bit was new.
    #[inline]
    fn insert(&mut self, slot: usize, h: u64) {
        let words = self.cfg.words();
        // The iterator owns copies of the hash and sizes, so it does not borrow `self`.
        let positions = self.positions(h);
        let Some(filter) = self.filters.get_mut(slot * words..(slot + 1) * words) else {
            return;
        };
        let mut new = false;
        for pos in positions {
            if let Some(w) = filter.get_mut(pos / 64) {
                let mask = 1u64 << (pos % 64);
                new |= *w & mask == 0;
                *w |= mask;
            }
        }
        if new {
            if let Some(c) = self.counts.get_mut(slot) {
                let old = *c;
                *c = old.saturating_add(1);
                let now = *c;
                self.note_crossing(slot, old, now);
            }
        }
    }

    /// Split a key into (host, peer) by the configured side.
    #[inline]
    fn host_peer(&self, key: &FlowKey) -> Option<(FlowKey, FlowKey)> {
        let (src, dst) = (key.src_part()?, key.dst_part()?);
        Some(match self.side {
            Side::Src => (src, dst),
            Side::Dst => (dst, src),
        })
    }

    /// Slot of `host`, creating it if there is room.
    fn slot(&mut self, host: FlowKey) -> Option<usize> {
        if let Some(&i) = self.index.get(&host) {
            return Some(i as usize);
        }
        let n = self.hosts.len();
        if (self.cfg.max_hosts > 0 && n >= self.cfg.max_hosts) || n >= u32::MAX as usize {
            return None;
        }
        self.index.insert(host, n as u32);
        self.hosts.push(host);
        self.counts.push(0);
        self.filters
            .resize(self.filters.len() + self.cfg.words(), 0);
        Some(n)
    }

    fn filter(&self, slot: usize) -> &[u64] {
        let w = self.cfg.words();
        self.filters.get(slot * w..(slot + 1) * w).unwrap_or(&[])
    }

    /// Union estimate `−(m/k)·ln(1 − X/m)` from the set bits `X` of a filter; `None` when every
    /// bit is set.
    fn bits_estimate(&self, filter: &[u64]) -> Option<f64> {
        let m = self.cfg.bits as f64;
        let x = filter.iter().map(|w| w.count_ones()).sum::<u32>() as f64;
        (x < m).then(|| -(m / f64::from(self.cfg.hashes)) * (1.0 - x / m).ln())
    }

    fn note_crossing(&mut self, slot: usize, old: u64, new: u64) {
        let t = self.cfg.threshold;
        if old <= t && new > t {
            self.crossed.push(slot as u32);
        }
    }
}

impl Algorithm for BloomSpreader {
    fn name(&self) -> &'static str {
        NAME
    }

    fn tasks(&self) -> &'static [Task] {
        match self.side {
            Side::Src => &[Task::Superspreaders],
            Side::Dst => &[Task::Ddos],
        }
    }

    fn update(&mut self, key: &FlowKey, _weight: u64) {
        if let Some((slot, h)) = self.locate(key) {
            self.insert(slot, h);
        }
    }

    /// Locate (or create) every host of a block first, prefetching the filter words its peer
    /// will touch, then test-and-set the bits in key order. With many hosts the filters do not
    /// fit in cache and each update is a DRAM miss; this overlaps them. Hosts are created and
    /// bits set in the same order as the `update` loop, so the state is identical.
    fn update_batch(&mut self, keys: &[FlowKey], _weights: &[u64]) {
        let mut located = [None; crate::BATCH_BLOCK];
        for block in keys.chunks(crate::BATCH_BLOCK) {
            for (l, k) in located.iter_mut().zip(block) {
                *l = self.locate(k);
                if let Some((slot, h)) = *l {
                    let base = self.filters.as_ptr().wrapping_add(slot * self.cfg.words());
                    for pos in self.positions(h) {
                        crate::prefetch(base.wrapping_add(pos / 64));
                    }
                }
            }
            for &(slot, h) in located[..block.len()].iter().flatten() {
                self.insert(slot, h);
            }
        }
    }

    fn reset(&mut self) {
        self.hosts.clear();
        self.counts.clear();
        self.filters.clear();
        self.crossed.clear();
        self.index.clear();
        self.skipped = 0;
        self.dropped = 0;
    }

    /// Live state: per host the filter, the counter, the key and its map entry; plus the
    /// online report.
    fn memory_bytes(&self) -> usize {
        let per_host = self.cfg.words() * 8 + BloomSpreaderConfig::HOST_OVERHEAD;
        self.hosts.len() * per_host + self.crossed.len() * std::mem::size_of::<u32>()
    }

    /// Past the threshold's worth of peers a filter turns new peers away as false positives at
    /// `false_positive_rate(T)`: above 5% there, the counts of hosts near the threshold fall
    /// short of it. Hosts turned away past `max_hosts` are not counted at all.
    fn caveats(&self, _task: Task, threshold: Option<u64>, _total: u64) -> Vec<algo::Caveat> {
        let mut out = Vec::new();
        let t = threshold.unwrap_or(0);
        let fp = self.cfg.false_positive_rate(t);
        let near = self.counts.iter().filter(|&&c| c > t / 2).count();
        if fp > 0.05 && near > 0 {
            // k·T/m = 1/4 keeps the rate at T near (1 - e^-1/4)^k: 1% with 3 hashes.
            let bits = (4 * t * u64::from(self.cfg.hashes))
                .next_power_of_two()
                .max(2 * self.cfg.bits as u64);
            out.push(algo::Caveat {
                parameter: "bits",
                message: format!(
                    "a host's {}-bit filter takes its {t}th new peer for a known one with \
                     probability {:.0}%: the counts of the {near} hosts above half the \
                     threshold fall short",
                    self.cfg.bits,
                    100.0 * fp
                ),
                suggestion: format!("bits = {bits}"),
            });
        }
        if self.dropped > 0 {
            out.push(algo::Caveat {
                parameter: "max_hosts",
                message: format!(
                    "{} updates of hosts past max_hosts = {} were not counted",
                    self.dropped, self.cfg.max_hosts
                ),
                suggestion: format!("max_hosts = {} (or 0: no limit)", 2 * self.cfg.max_hosts),
            });
        }
        out
    }

    /// Hosts whose distinct-peer counter is above `threshold`, largest first (ties by key).
    fn spreaders(&self, threshold: u64) -> Option<Vec<Estimate>> {
        let mut out: Vec<Estimate> = self
            .hosts
            .iter()
            .zip(&self.counts)
            .filter(|(_, &c)| c > threshold)
            .map(|(h, &c)| (*h, c))
            .collect();
        out.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        Some(out)
    }

    fn merge(&mut self, other: &dyn Algorithm) -> Result<(), MergeError> {
        let o = algo::merge_peer(self, other, |o| {
            o.cfg == self.cfg && o.side == self.side && o.hash == self.hash
        })?;
        self.skipped = self.skipped.saturating_add(o.skipped);
        self.dropped = self.dropped.saturating_add(o.dropped);
        let words = self.cfg.words();
        for (j, host) in o.hosts.iter().enumerate() {
            let theirs = o.filter(j);
            let their_count = o.counts.get(j).copied().unwrap_or(0);
            let existed = self.index.contains_key(host);
            let Some(slot) = self.slot(*host) else {
                self.dropped = self.dropped.saturating_add(their_count);
                continue;
            };
            let Some(mine) = self.filters.get_mut(slot * words..(slot + 1) * words) else {
                continue;
            };
            for (a, b) in mine.iter_mut().zip(theirs) {
                *a |= b;
            }
            let my_count = self.counts.get(slot).copied().unwrap_or(0);
            let merged = if existed {
                let lo = my_count.max(their_count);
                let hi = my_count.saturating_add(their_count);
                match self.bits_estimate(self.filter(slot)) {
                    Some(e) => (e.round() as u64).clamp(lo, hi),
                    None => hi,
                }
            } else {
                their_count
            };
            if let Some(c) = self.counts.get_mut(slot) {
                *c = merged;
            }
            self.note_crossing(slot, my_count, merged);
        }
        Ok(())
    }
}

/// This algorithm's facts, listed in the `catalog` crate.
///
/// `memory`: with `max_hosts > 0`, the bytes at capacity, `max_hosts x bytes_per_host()`; with
/// `max_hosts = 0` (unlimited, the default), the bytes at construction, 0, plus at most
/// [`BloomSpreaderConfig::bytes_per_host`] per host tracked.
pub const ENTRY: algo::Entry = algo::Entry {
    name: NAME,
    tasks: TASKS,
    fit: algo::KeyFit::Exact,
    build: |p, ctx| algo::build_with(NAME, p, |c| BloomSpreader::new(c, ctx)),
    memory: |p, _ctx| {
        algo::Entry::memory_with(NAME, p, |c: BloomSpreaderConfig| {
            c.validate()?;
            Ok(c.max_hosts as u64 * c.bytes_per_host())
        })
    },
    defaults: algo::defaults_of::<BloomSpreaderConfig>,
    flow_size_only: "",
    resets_to_empty: true,
    save: algo::save_state::<BloomSpreader>,
    load: |b| algo::load_state::<BloomSpreader>(NAME, b),
    // ns per update, u32 / FlowKey path: `cargo run --release -p catalog --example update_costs`.
    cost: algo::UpdateCost {
        u32_ns: 4.22,
        wide_ns: 109.51,
        behind: 0.97,
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_pcg::Pcg64;
    use std::collections::{HashMap, HashSet};

    fn pair(src: u32, dst: u32) -> FlowKey {
        FlowKey::from_u32_pair(src, dst)
    }

    fn spreader(side: Side, seed: u64, max_hosts: usize) -> BloomSpreader {
        let ctx = BuildCtx {
            seed,
            key_len: 8,
            side,
        };
        let cfg = BloomSpreaderConfig {
            max_hosts,
            ..Default::default()
        };
        BloomSpreader::new(cfg, &ctx).unwrap()
    }

    struct Traffic {
        keys: Vec<FlowKey>,
        /// host -> true distinct peers, for sources (Src side) and destinations (Dst side).
        by_src: HashMap<FlowKey, usize>,
        by_dst: HashMap<FlowKey, usize>,
        big: Vec<u32>,
        medium: Vec<u32>,
    }

    /// 20 planted sources with 150..=400 distinct destinations, 20 with 50..=99, 3000
    /// background sources with 1..=10, each pair repeated 1..=3 times, shuffled; and one
    /// destination contacted by 300 of the background sources' pairs plus extra sources.
    fn traffic(seed: u64) -> Traffic {
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut keys = Vec::new();
        fn emit(rng: &mut Pcg64, keys: &mut Vec<FlowKey>, s: u32, d: u32) {
            for _ in 0..rng.gen_range(1..=3) {
                keys.push(pair(s, d));
            }
        }
        let (mut big, mut medium) = (Vec::new(), Vec::new());
        for i in 0..20u32 {
            let s = 0x0a00_0000 | i;
            big.push(s);
            for d in 0..rng.gen_range(150..=400u32) {
                emit(&mut rng, &mut keys, s, 0xc0a8_0000 + d * 7 + i);
            }
            let s = 0x0b00_0000 | i;
            medium.push(s);
            for d in 0..rng.gen_range(50..=99u32) {
                emit(&mut rng, &mut keys, s, 0xc0a8_0000 + d * 13 + i);
            }
        }
        for i in 0..3000u32 {
            let s = 0x0c00_0000 | i;
            for _ in 0..rng.gen_range(1..=10) {
                let d = rng.gen::<u32>();
                emit(&mut rng, &mut keys, s, d);
            }
        }
        // A DDoS victim: 500 distinct sources.
        for s in 0..500u32 {
            emit(&mut rng, &mut keys, 0x0d00_0000 | s, 0x0808_0808);
        }
        for i in (1..keys.len()).rev() {
            let j = rng.gen_range(0..=i);
            keys.swap(i, j);
        }
        let mut src_sets: HashMap<FlowKey, HashSet<FlowKey>> = HashMap::new();
        let mut dst_sets: HashMap<FlowKey, HashSet<FlowKey>> = HashMap::new();
        for k in &keys {
            let (s, d) = (k.src_part().unwrap(), k.dst_part().unwrap());
            src_sets.entry(s).or_default().insert(d);
            dst_sets.entry(d).or_default().insert(s);
        }
        let count = |m: HashMap<FlowKey, HashSet<FlowKey>>| {
            m.into_iter().map(|(k, v)| (k, v.len())).collect()
        };
        Traffic {
            keys,
            by_src: count(src_sets),
            by_dst: count(dst_sets),
            big,
            medium,
        }
    }

    fn run(mut s: BloomSpreader, keys: &[FlowKey]) -> BloomSpreader {
        for k in keys {
            s.update(k, 1);
        }
        s
    }

    /// Expected number of peers lost to Bloom false positives among the first `n`.
    fn expected_missed(cfg: &BloomSpreaderConfig, n: usize) -> f64 {
        (0..n as u64).map(|i| cfg.false_positive_rate(i)).sum()
    }

    #[test]
    fn finds_planted_superspreaders_and_never_over_counts() {
        let t = traffic(1);
        let s = run(spreader(Side::Src, 1, 0), &t.keys);
        assert_eq!(s.tasks(), &[Task::Superspreaders]);
        assert_eq!(s.hosts(), t.by_src.len());
        let reported: HashMap<FlowKey, u64> = s.spreaders(128).unwrap().into_iter().collect();
        for &b in &t.big {
            let h = FlowKey::from_u32(b);
            assert!(
                reported.contains_key(&h),
                "planted {h} ({} peers) missed",
                t.by_src[&h]
            );
        }
        for &m in &t.medium {
            assert!(!reported.contains_key(&FlowKey::from_u32(m)));
        }
        // Precision 1: every reported host truly has > 128 peers, and exactly the planted ones.
        assert_eq!(reported.len(), t.big.len());
        for (host, &truth) in &t.by_src {
            let c = s.count(host);
            assert!(c as usize <= truth, "{host}: counter {c} > truth {truth}");
            // The under-count is the Bloom false positives: allow 4x their expectation + 3.
            let slack = 4.0 * expected_missed(s.config(), truth) + 3.0;
            assert!(
                c as f64 >= truth as f64 - slack,
                "{host}: counter {c}, truth {truth}, slack {slack:.1}"
            );
        }
        // The online report holds exactly the hosts above the configured threshold.
        let crossed: HashSet<FlowKey> = s.crossed().into_iter().collect();
        assert_eq!(crossed.len(), s.crossed().len(), "each host reported once");
        assert_eq!(crossed, reported.keys().copied().collect());
        // Sorted largest first.
        let v = s.spreaders(0).unwrap();
        assert!(v.windows(2).all(|w| w[0].1 >= w[1].1));
    }

    #[test]
    fn finds_ddos_victims_on_the_destination_side() {
        let t = traffic(2);
        let s = run(spreader(Side::Dst, 2, 0), &t.keys);
        assert_eq!(s.tasks(), &[Task::Ddos]);
        let v = s.spreaders(128).unwrap();
        let victim = FlowKey::from_u32(0x0808_0808);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].0, victim);
        assert!(v[0].1 <= 500 && v[0].1 as f64 >= 500.0 - 4.0 * expected_missed(s.config(), 500));
        assert_eq!(t.by_dst[&victim], 500);
    }

    #[test]
    fn weight_is_ignored_and_seeds_matter() {
        let t = traffic(3);
        let a = run(spreader(Side::Src, 1, 0), &t.keys);
        let mut w = spreader(Side::Src, 1, 0);
        for (i, k) in t.keys.iter().enumerate() {
            w.update(k, 1 + i as u64 * 977);
        }
        assert_eq!(w, a);
        let mut batch = spreader(Side::Src, 1, 0);
        batch.update_batch(&t.keys, &vec![1; t.keys.len()]);
        assert_eq!(batch, a);
        assert_eq!(run(spreader(Side::Src, 1, 0), &t.keys), a);
        let b = run(spreader(Side::Src, 2, 0), &t.keys);
        assert_ne!(b.filters, a.filters);
    }

    #[test]
    fn merge_of_shards_finds_the_spreaders() {
        let t = traffic(4);
        // Two "cores": a pair goes to the core of its hash (RSS-like), so a source's
        // destinations are split across both.
        let (mut x, mut y) = (Vec::new(), Vec::new());
        for k in &t.keys {
            if HashFn::new(99).hash(k) & 1 == 0 {
                x.push(*k);
            } else {
                y.push(*k);
            }
        }
        let mut a = run(spreader(Side::Src, 1, 0), &x);
        let b = run(spreader(Side::Src, 1, 0), &y);
        a.merge(&b).unwrap();
        assert_eq!(a.hosts(), t.by_src.len());
        let reported: HashSet<FlowKey> =
            a.spreaders(128).unwrap().into_iter().map(|e| e.0).collect();
        let big: HashSet<FlowKey> = t.big.iter().map(|&b| FlowKey::from_u32(b)).collect();
        assert_eq!(reported, big);
        // The merged counters estimate the union: within 10% for the planted hosts.
        for h in &big {
            let (c, truth) = (a.count(h) as f64, t.by_src[h] as f64);
            assert!((c - truth).abs() <= 0.1 * truth, "{h}: {c} vs {truth}");
        }
        let crossed: HashSet<FlowKey> = a.crossed().into_iter().collect();
        assert_eq!(crossed, big);
        // Merging a state into an empty one copies it.
        let mut e = spreader(Side::Src, 1, 0);
        e.merge(&b).unwrap();
        assert_eq!(e.spreaders(0), b.spreaders(0));
    }

    #[test]
    fn merge_refuses_mismatches() {
        let mut a = spreader(Side::Src, 1, 0);
        for other in [spreader(Side::Dst, 1, 0), spreader(Side::Src, 2, 0)] {
            assert_eq!(a.merge(&other), Err(MergeError::Mismatch(NAME)));
        }
        let hll = crate::HyperLogLog::new(Default::default(), &BuildCtx::default()).unwrap();
        assert_eq!(a.merge(&hll), Err(MergeError::Mismatch(NAME)));
    }

    #[test]
    fn max_hosts_caps_memory_and_counts_drops() {
        let t = traffic(5);
        let s = run(spreader(Side::Src, 1, 10), &t.keys);
        assert_eq!(s.hosts(), 10);
        assert!(s.dropped() > 0);
        // The batched path agrees with the loop, refusals and skipped keys included.
        let mut mixed = t.keys.clone();
        for i in (0..mixed.len()).step_by(7) {
            mixed[i] = FlowKey::from_u32(i as u32);
        }
        let looped = run(spreader(Side::Src, 1, 10), &mixed);
        let mut batched = spreader(Side::Src, 1, 10);
        for c in mixed.chunks(29) {
            batched.update_batch(c, &vec![1; c.len()]);
        }
        assert_eq!(batched, looped);
        assert!(looped.skipped() > 0 && looped.dropped() > 0);
        let unlimited = run(spreader(Side::Src, 1, 0), &t.keys);
        assert!(s.memory_bytes() < unlimited.memory_bytes());
        assert_eq!(unlimited.dropped(), 0);
        // About 230 bytes per host at 1024 bits, as documented.
        let per_host = unlimited.memory_bytes() as f64 / unlimited.hosts() as f64;
        assert!((200.0..260.0).contains(&per_host), "{per_host}");
    }

    #[test]
    fn keys_without_two_addresses_are_skipped() {
        let mut s = spreader(Side::Src, 1, 0);
        s.update(&FlowKey::from_u32(1), 1);
        s.update(&FlowKey::EMPTY, 1);
        s.update(&FlowKey::from_bytes(&[1, 2, 3]).unwrap(), 1);
        assert_eq!(s.skipped(), 3);
        assert_eq!(s.hosts(), 0);
        // A 5-tuple works like its pair.
        let five =
            key::Tuple::v4([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 6).key(key::KeyKind::FiveTuple);
        s.update(&five, 1);
        assert_eq!(s.count(&FlowKey::from_u32(0x0a00_0001)), 1);
    }

    #[test]
    fn serde_roundtrip_rebuilds_the_index_and_reset_empties() {
        let t = traffic(6);
        let s = run(spreader(Side::Src, 1, 0), &t.keys);
        let json = serde_json::to_string(&s).unwrap();
        let back: BloomSpreader = serde_json::from_str(&json).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.spreaders(128), s.spreaders(128));
        let h = FlowKey::from_u32(t.big[0]);
        assert_eq!(back.count(&h), s.count(&h));

        let mut v = serde_json::to_value(&s).unwrap();
        v["counts"] = serde_json::json!([]);
        assert!(serde_json::from_value::<BloomSpreader>(v).is_err());
        let mut v = serde_json::to_value(&s).unwrap();
        v["crossed"] = serde_json::json!([u32::MAX]);
        assert!(serde_json::from_value::<BloomSpreader>(v).is_err());

        let mut r = s.clone();
        r.reset();
        assert_eq!(r, spreader(Side::Src, 1, 0));
        assert_eq!(r.memory_bytes(), 0);
        assert_eq!(r.spreaders(0), Some(vec![]));
    }
}
