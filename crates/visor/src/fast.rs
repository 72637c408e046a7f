//! The fast path: SketchVisor's top-k algorithm (paper section 4.2, Algorithm 1) and the
//! Misra-Gries baseline the paper compares it with (MGFastPath, section 7.2 and Figure 16).
//!
//! Both keep at most k flows of one key kind with integer counters in the run's weight (packets
//! or bytes; the paper counts bytes), a global `V` (all weight the fast path saw) and a global
//! `E` (the sum of the decrements). What a host hands the control plane is a [`Summary`]: per
//! tracked flow a lower and an upper bound, plus `V` and `E`.
//!
//! Lemma 4.1 (tested in `tests/lemma.rs`): for a tracked flow `r + d <= true <= r + d + e`;
//! every flow whose fast-path weight exceeds `E` is tracked; `E <= V / (k + 1)`-ish (appendix B's
//! bound is the paper's, not tested). Misra-Gries gives the same shape of bounds with one
//! counter: `c <= true <= c + D`, `D` the sum of its decrements (ALGORITHMS.md 10).
//!
//! Sizing: both are sized by bytes ([`capacity`]), the paper's 8 KB by default, counting per
//! flow the key's bytes, its counters (u64: a 1 s epoch at 100 Gb/s exceeds 32 bits of bytes per
//! flow) and 8 bytes of index (two u32 slots, at most half full; SketchVisor's fast path spends
//! them on eight u8 slots up to 255 flows, four u16 below 2^16). SketchVisor's
//! three counters `(e, r, d)` are stored as two, `s = r + E` and `e`, which hold them exactly
//! given the global `E` (`r = s - E`, `d = E - e`: module `sv`), so an entry is one counter
//! larger than Misra-Gries's, not two: 221 five-tuples in 8 KB against 282.

use algo::ConfigError;
use key::{FlowKey, HashFn, KeyMap};
use serde::{Deserialize, Serialize};

use crate::index::{Probe, Table};

pub use crate::sv::FastPath;

/// The paper's fast-path size (section 7.1: "we allocate 8KB memory for the fast path").
pub const DEFAULT_BYTES: usize = 8 * 1024;

/// Per-flow index overhead in the byte budget: two u32 slots (the index is at most half full),
/// or eight u8 or four u16 (SketchVisor's fast path up to 255 and below 2^16 flows).
pub(crate) const INDEX_BYTES: usize = 8;

pub(crate) const SALT: u64 = 0x7669_736f_725f_6670; // "visor_fp"

/// Which fast path a run uses (`--fast-path none|sketchvisor|misra_gries`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FastKind {
    /// No fast path: every packet goes to the normal path (the paper's NoFastPath).
    None,
    /// Algorithm 1.
    #[default]
    Sketchvisor,
    /// Plain Misra-Gries (MGFastPath).
    MisraGries,
}

impl FastKind {
    pub fn name(self) -> &'static str {
        match self {
            FastKind::None => "none",
            FastKind::Sketchvisor => "sketchvisor",
            FastKind::MisraGries => "misra_gries",
        }
    }

    /// Bytes one tracked flow takes in the byte budget: key, counters, index.
    pub fn entry_bytes(self, key_len: usize) -> usize {
        let counters = match self {
            FastKind::None => 0,
            // `(e, r, d)` held exactly as `(e, s = r + E)` (module docs).
            FastKind::Sketchvisor => 2 * 8,
            FastKind::MisraGries => 8,
        };
        key_len + counters + INDEX_BYTES
    }
}

/// How many flows `bytes` of fast path hold for keys of `key_len` bytes. With the default 8 KB:
/// SketchVisor 292 flows of 4-byte keys (IPv4 source), 221 IPv4 5-tuples, 134 IPv6 5-tuples;
/// Misra-Gries 409, 282 and 154.
pub fn capacity(kind: FastKind, bytes: usize, key_len: usize) -> usize {
    match kind {
        FastKind::None => 0,
        _ => bytes / kind.entry_bytes(key_len),
    }
}

/// One tracked flow with its bounds on the weight it had in the fast path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tracked {
    pub key: FlowKey,
    /// `r + d` (SketchVisor) or `c` (Misra-Gries): weight counted since insertion.
    pub lo: u64,
    /// `r + d + e` or `c + D`.
    pub hi: u64,
}

impl Tracked {
    /// The midpoint of the bounds: the estimate whose worst-case error is smallest.
    pub fn estimate(&self) -> u64 {
        // lo <= hi in every summary a fast path makes (`Summary::check` refuses others; this
        // stays defined for them).
        self.lo + self.hi.saturating_sub(self.lo) / 2
    }
}

/// What the control plane gets from one or several hosts' fast paths (RECOVERY.md 1).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Tracked flows, sorted by key.
    pub flows: Vec<Tracked>,
    /// Total weight the fast path(s) saw.
    pub v: u64,
    /// Sum of the decrements: an upper bound on the fast-path weight of any untracked flow (on
    /// one host; for a merge, on the sum over the hosts that do not track it).
    pub e: u64,
    /// The epoch's packets (and bytes) per path, set beside the summary by whoever routed them
    /// ([`crate::DataPlane::end_epoch`]; a snapshot's merge from its parts' counts): the fast
    /// share that the distinct-count sketches' restoring needs ([`crate::bitmap`]), as they have
    /// no mass of their own to measure it. Not serialized (a snapshot stores the counts beside
    /// the summary, so its format is unchanged); all zero when unknown.
    #[serde(skip)]
    pub paths: crate::PathCounts,
}

impl Summary {
    /// Merge several hosts' summaries (RECOVERY.md 1): sum `V` and `E`; merge the tables by key,
    /// summing the bounds over the hosts that track the flow. The bounds then hold for the
    /// flow's weight on those hosts; its weight on the others is part of the untracked traffic
    /// (`y` in section 5.2). Hosts must see disjoint packets (section 3.1).
    pub fn merge<'a>(parts: impl IntoIterator<Item = &'a Summary>) -> Summary {
        let mut m: KeyMap<(u64, u64)> = KeyMap::default();
        let (mut v, mut e) = (0u64, 0u64);
        let mut paths = crate::PathCounts::default();
        // Saturating: the parts may come from snapshots not yet checked (`Summary::check`), and
        // a sum past u64 is no less wrong clamped than wrapped, but does not panic.
        for p in parts {
            v = v.saturating_add(p.v);
            e = e.saturating_add(p.e);
            paths.add_counts(&p.paths);
            for t in &p.flows {
                let s = m.entry(t.key).or_insert((0, 0));
                s.0 = s.0.saturating_add(t.lo);
                s.1 = s.1.saturating_add(t.hi);
            }
        }
        let mut flows: Vec<Tracked> = m
            .into_iter()
            .map(|(key, (lo, hi))| Tracked { key, lo, hi })
            .collect();
        flows.sort_unstable_by_key(|t| t.key);
        Summary { flows, v, e, paths }
    }

    /// The bounds of `key`, if tracked.
    pub fn get(&self, key: &FlowKey) -> Option<&Tracked> {
        self.flows
            .binary_search_by(|t| t.key.cmp(key))
            .ok()
            .map(|i| &self.flows[i])
    }

    /// Heavy-hitter candidates: tracked flows whose upper bound reaches `threshold`, largest
    /// estimate first. Complete for the fast path's traffic when `threshold > e` (Lemma 4.1(i):
    /// an untracked flow has at most `e`); [`Summary::complete_above`] says so.
    pub fn heavy_hitters(&self, threshold: u64) -> Vec<Tracked> {
        let mut v: Vec<Tracked> = self
            .flows
            .iter()
            .filter(|t| t.hi >= threshold)
            .copied()
            .collect();
        v.sort_unstable_by(|a, b| b.estimate().cmp(&a.estimate()).then(a.key.cmp(&b.key)));
        v
    }

    /// Whether every flow with at least `threshold` of fast-path weight is tracked.
    pub fn complete_above(&self, threshold: u64) -> bool {
        threshold > self.e
    }

    /// `sum lo <= V` always (what is counted was seen); a check for decoded snapshots.
    pub fn lows(&self) -> u64 {
        self.flows.iter().fold(0u64, |a, t| a.saturating_add(t.lo))
    }

    /// `Ok` when a decoded summary is one a fast path (or a merge of several) could have made:
    /// keys sorted without repeats (lookups search them), each flow's bounds ordered
    /// (`lo <= hi`: the estimate halves the gap) and what they counted within `V`
    /// (`sum lo <= V`). One line naming the field.
    pub fn check(&self) -> Result<(), String> {
        if let Some(w) = self.flows.windows(2).find(|w| w[0].key >= w[1].key) {
            return Err(format!("flows: key {} out of order or repeated", w[1].key));
        }
        if let Some(t) = self.flows.iter().find(|t| t.lo > t.hi) {
            return Err(format!(
                "flows: {} has lo {} above hi {}",
                t.key, t.lo, t.hi
            ));
        }
        let lows = self.flows.iter().try_fold(0u64, |a, t| a.checked_add(t.lo));
        if lows.is_none_or(|l| l > self.v) {
            return Err(format!("v: {} below the tracked flows' counts", self.v));
        }
        Ok(())
    }
}

/// What a fast path did over an epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FastStats {
    /// Updates (packets) offered.
    pub packets: u64,
    /// Kick-out operations: passes over the table (paper Figure 16a).
    pub kickouts: u64,
    /// Flows removed by those passes.
    pub evicted: u64,
}

/// A fast path of either kind, as the runner drives it.
pub trait FastTable: Send {
    fn kind(&self) -> FastKind;
    /// One packet (or aggregated update) of weight `w`. Weight 0 is ignored.
    fn update(&mut self, key: &FlowKey, w: u64);
    /// The tracked flows with their bounds, `V` and `E`.
    fn summary(&self) -> Summary;
    /// `V`.
    fn total(&self) -> u64;
    /// `E` (Misra-Gries: `D`).
    fn decremented(&self) -> u64;
    fn stats(&self) -> FastStats;
    /// k.
    fn capacity(&self) -> usize;
    /// Empty, statistics included (epoch end, after the summary is taken).
    fn reset(&mut self);
    /// Bytes allocated (larger than the byte budget: keys are held as 38-byte `FlowKey`s).
    fn memory_bytes(&self) -> usize;
}

/// Build the fast path `kind` of `bytes` for keys of `key_len` bytes (`None` for
/// [`FastKind::None`]). The index hash is seeded from `seed` (it changes no answer: the table's
/// order is insertion order).
pub fn build(
    kind: FastKind,
    bytes: usize,
    key_len: usize,
    seed: u64,
) -> Result<Option<Box<dyn FastTable>>, ConfigError> {
    Ok(match kind {
        FastKind::None => None,
        FastKind::Sketchvisor => Some(Box::new(FastPath::new(bytes, key_len, seed)?)),
        FastKind::MisraGries => Some(Box::new(MgFastPath::new(bytes, key_len, seed)?)),
    })
}

pub(crate) fn check_capacity(
    kind: FastKind,
    bytes: usize,
    key_len: usize,
) -> Result<usize, ConfigError> {
    let k = capacity(kind, bytes, key_len);
    // Algorithm 1 needs two values to fit the power law; one flow and the new one are enough.
    if k == 0 || k > u32::MAX as usize / 2 {
        return Err(ConfigError::Invalid {
            algo: "fast_path",
            field: "fast_path_bytes",
            reason: format!(
                "{bytes} bytes hold {k} flows of {key_len}-byte keys ({} bytes each); need 1 to 2^31",
                kind.entry_bytes(key_len)
            ),
        });
    }
    Ok(k)
}

/// Misra-Gries as a fast path (MGFastPath): one counter per flow; a new flow arriving at a
/// full table costs a pass that subtracts `min(w, c_min)` from every counter and from `w`,
/// removes the counters that reach 0, and inserts what is left of `w` (ALGORITHMS.md 10).
#[derive(Clone, Debug)]
pub struct MgFastPath {
    t: Table<u64>,
    v: u64,
    /// Sum of the decrements `D`.
    d: u64,
    stats: FastStats,
}

impl MgFastPath {
    pub fn new(bytes: usize, key_len: usize, seed: u64) -> Result<MgFastPath, ConfigError> {
        let k = check_capacity(FastKind::MisraGries, bytes, key_len)?;
        Ok(MgFastPath::with_capacity(k, seed))
    }

    pub fn with_capacity(k: usize, seed: u64) -> MgFastPath {
        MgFastPath {
            t: Table::new(k.max(1), HashFn::new(key::sub_seed(seed, SALT))),
            v: 0,
            d: 0,
            stats: FastStats::default(),
        }
    }

    #[inline]
    pub fn update(&mut self, key: &FlowKey, w: u64) {
        if w == 0 {
            return;
        }
        self.stats.packets += 1;
        self.v += w;
        match self.t.probe(key) {
            Probe::Hit(i) => self.t.vals[i] += w,
            Probe::Miss(slot, h) if !self.t.is_full() => self.t.insert_at(slot, h, *key, w),
            Probe::Miss(..) => self.kick_out(key, w),
        }
    }

    #[cold]
    #[inline(never)]
    fn kick_out(&mut self, key: &FlowKey, w: u64) {
        let cmin = self.t.vals.iter().copied().min().unwrap_or(0);
        let delta = w.min(cmin);
        self.stats.kickouts += 1;
        self.stats.evicted += self.t.retain(|c| {
            if *c <= delta {
                false
            } else {
                *c -= delta;
                true
            }
        }) as u64;
        self.d += delta;
        let rest = w - delta;
        if rest > 0 && !self.t.is_full() {
            self.t.insert(*key, rest);
        }
    }

    pub fn bounds(&self, key: &FlowKey) -> Option<(u64, u64)> {
        match self.t.probe(key) {
            Probe::Hit(i) => Some((self.t.vals[i], self.t.vals[i] + self.d)),
            Probe::Miss(..) => None,
        }
    }

    pub fn len(&self) -> usize {
        self.t.len()
    }

    pub fn is_empty(&self) -> bool {
        self.t.len() == 0
    }
}

impl FastTable for MgFastPath {
    fn kind(&self) -> FastKind {
        FastKind::MisraGries
    }
    #[inline]
    fn update(&mut self, key: &FlowKey, w: u64) {
        MgFastPath::update(self, key, w);
    }
    fn summary(&self) -> Summary {
        let mut flows: Vec<Tracked> = self
            .t
            .iter()
            .map(|(k, &c)| Tracked {
                key: *k,
                lo: c,
                hi: c + self.d,
            })
            .collect();
        flows.sort_unstable_by_key(|t| t.key);
        Summary {
            flows,
            v: self.v,
            e: self.d,
            paths: Default::default(),
        }
    }
    fn total(&self) -> u64 {
        self.v
    }
    fn decremented(&self) -> u64 {
        self.d
    }
    fn stats(&self) -> FastStats {
        self.stats
    }
    fn capacity(&self) -> usize {
        self.t.cap()
    }
    fn reset(&mut self) {
        self.t.clear();
        self.v = 0;
        self.d = 0;
        self.stats = FastStats::default();
    }
    fn memory_bytes(&self) -> usize {
        self.t.memory_bytes()
    }
}

/// Algorithm 1 written as the paper states it (a pass over the table decrements every residual),
/// the reference [`crate::sv::FastPath`] is tested against: same summaries, statistics and `E`
/// after every update.
#[cfg(test)]
#[allow(dead_code)]
pub(crate) mod reference {
    use super::*;
    use crate::thresh::{compute_thresh, DELTA};

    /// Counters of one flow of Algorithm 1.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct Erd {
        /// Weight possibly missed before insertion (`E` when inserted).
        e: u64,
        /// Residual.
        r: u64,
        /// Decremented since insertion.
        d: u64,
    }

    /// SketchVisor's fast path (Algorithm 1).
    #[derive(Clone, Debug)]
    pub(crate) struct RefFastPath {
        t: Table<Erd>,
        v: u64,
        e: u64,
        delta: f64,
        stats: FastStats,
    }

    impl RefFastPath {
        /// A fast path of `bytes` (k = [`capacity`]) for keys of `key_len` bytes.
        pub fn new(bytes: usize, key_len: usize, seed: u64) -> Result<RefFastPath, ConfigError> {
            let k = check_capacity(FastKind::Sketchvisor, bytes, key_len)?;
            Ok(RefFastPath::with_capacity(k, seed))
        }

        /// A fast path of exactly `k >= 1` flows.
        pub fn with_capacity(k: usize, seed: u64) -> RefFastPath {
            RefFastPath {
                t: Table::new(k.max(1), HashFn::new(key::sub_seed(seed, SALT))),
                v: 0,
                e: 0,
                delta: DELTA,
                stats: FastStats::default(),
            }
        }

        /// Algorithm 1's UPDATEBUCKET.
        #[inline]
        pub fn update(&mut self, key: &FlowKey, v: u64) {
            if v == 0 {
                return;
            }
            self.stats.packets += 1;
            self.v += v; // line 6
            match self.t.probe(key) {
                Probe::Hit(i) => self.t.vals[i].r += v, // lines 7-8
                Probe::Miss(slot, h) if !self.t.is_full() => {
                    // lines 9-10
                    self.t.insert_at(
                        slot,
                        h,
                        *key,
                        Erd {
                            e: self.e,
                            r: v,
                            d: 0,
                        },
                    );
                }
                Probe::Miss(..) => self.kick_out(key, v),
            }
        }

        /// Lines 12-19: one pass computes the threshold from the k residuals and `v`, decrements
        /// every residual by it, removes those at or below 0, and inserts the new flow if its
        /// packet outweighs the threshold.
        #[cold]
        #[inline(never)]
        fn kick_out(&mut self, key: &FlowKey, v: u64) {
            let (mut a1, mut a2, mut amin) = (v, 0u64, v);
            for x in &self.t.vals {
                let r = x.r;
                if r > a1 {
                    a2 = a1;
                    a1 = r;
                } else if r > a2 {
                    a2 = r;
                }
                amin = amin.min(r);
            }
            // k >= 1 residuals plus v: a2 is one of the k+1 values, and amin <= a2 <= a1.
            let eh = compute_thresh(a1, a2, amin, self.delta);
            self.stats.kickouts += 1;
            self.stats.evicted += self.t.retain(|x| {
                if x.r <= eh {
                    false
                } else {
                    x.r -= eh;
                    x.d += eh;
                    true
                }
            }) as u64;
            // eh >= amin: either v <= eh (dropped, its weight now counted in E), or the smallest
            // value was a residual, which the pass removed, so there is room.
            if v > eh && !self.t.is_full() {
                self.t.insert(
                    *key,
                    Erd {
                        e: self.e,
                        r: v - eh,
                        d: eh,
                    },
                );
            }
            self.e += eh;
        }

        /// The bounds of `key`, if tracked: `(r + d, r + d + e)`.
        pub fn bounds(&self, key: &FlowKey) -> Option<(u64, u64)> {
            match self.t.probe(key) {
                Probe::Hit(i) => {
                    let x = self.t.vals[i];
                    Some((x.r + x.d, x.r + x.d + x.e))
                }
                Probe::Miss(..) => None,
            }
        }

        /// `(key, e, r, d)` of every tracked flow, in table order.
        pub fn entries(&self) -> impl Iterator<Item = (FlowKey, u64, u64, u64)> + '_ {
            self.t.iter().map(|(k, x)| (*k, x.e, x.r, x.d))
        }

        pub fn len(&self) -> usize {
            self.t.len()
        }

        pub fn is_empty(&self) -> bool {
            self.t.len() == 0
        }
    }

    impl FastTable for RefFastPath {
        fn kind(&self) -> FastKind {
            FastKind::Sketchvisor
        }
        #[inline]
        fn update(&mut self, key: &FlowKey, w: u64) {
            RefFastPath::update(self, key, w);
        }
        fn summary(&self) -> Summary {
            let mut flows: Vec<Tracked> = self
                .t
                .iter()
                .map(|(k, x)| Tracked {
                    key: *k,
                    lo: x.r + x.d,
                    hi: x.r + x.d + x.e,
                })
                .collect();
            flows.sort_unstable_by_key(|t| t.key);
            Summary {
                flows,
                v: self.v,
                e: self.e,
                paths: Default::default(),
            }
        }
        fn total(&self) -> u64 {
            self.v
        }
        fn decremented(&self) -> u64 {
            self.e
        }
        fn stats(&self) -> FastStats {
            self.stats
        }
        fn capacity(&self) -> usize {
            self.t.cap()
        }
        fn reset(&mut self) {
            self.t.clear();
            self.v = 0;
            self.e = 0;
            self.stats = FastStats::default();
        }
        fn memory_bytes(&self) -> usize {
            self.t.memory_bytes()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig {
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x5eed),
            cases: 256,
            ..ProptestConfig::default()
        })]

        /// The tree-and-offset implementation is Algorithm 1: after every update its summary,
        /// `E` and statistics equal those of the literal one.
        #[test]
        fn fast_path_equals_the_literal_algorithm(
            k in 1usize..20,
            pkts in proptest::collection::vec((0u32..60, 1u64..1600, any::<bool>()), 0..400),
        ) {
            // Every index width (u8 slots up to 255 flows, u16 below 2^16, u32 above).
            let mut widths = [1, 2, 4].map(|bytes| FastPath::with_capacity_slots(k, 3, bytes));
            let mut b = reference::RefFastPath::with_capacity(k, 3);
            for &(f, w, unit) in &pkts {
                let key = FlowKey::from_u32(f % (1 + f / 3));
                let w = if unit { 1 } else { w };
                b.update(&key, w);
                for a in &mut widths {
                    a.update(&key, w);
                    prop_assert_eq!(a.summary(), FastTable::summary(&b));
                    prop_assert_eq!(a.stats(), FastTable::stats(&b));
                    prop_assert_eq!(a.decremented(), FastTable::decremented(&b));
                    prop_assert_eq!(a.bounds(&key), b.bounds(&key));
                }
            }
        }

        /// The same with deep trees (k up to 300) and long skewed streams, compared at the end
        /// and every 97 updates.
        #[test]
        fn fast_path_equals_the_literal_algorithm_deep(
            k in 20usize..300,
            seed in 0u64..1000,
            bytes in any::<bool>(),
        ) {
            let keys = testkit::zipf_keys(6000, 3000, 1.0, seed);
            let mut widths = [1, 2, 4].map(|b| FastPath::with_capacity_slots(k, seed, b));
            let mut b = reference::RefFastPath::with_capacity(k, seed);
            for (i, key) in keys.iter().enumerate() {
                let w = if bytes { 40 + (i as u64 * 7919) % 1460 } else { 1 };
                b.update(key, w);
                for a in &mut widths {
                    a.update(key, w);
                    if i % 97 == 0 {
                        prop_assert_eq!(a.summary(), FastTable::summary(&b));
                    }
                }
            }
            for a in &widths {
                prop_assert_eq!(a.summary(), FastTable::summary(&b));
                prop_assert_eq!(a.stats(), FastTable::stats(&b));
            }
        }

        /// The same with keys that share their first 16 bytes (the fast path's quick key
        /// compare looks at those and the length first): 37-byte keys differing only in their
        /// tail, and 13-byte keys equal to them in every byte they have.
        #[test]
        fn fast_path_equals_the_literal_algorithm_long_keys(
            k in 1usize..40,
            pkts in proptest::collection::vec((0u8..24, 1u64..1600), 0..400),
        ) {
            let key = |f: u8| {
                let mut b = [7u8; 37];
                b[13..16].fill(0);
                b[36] = f / 2;
                b[12] = if f % 2 == 0 { 7 } else { 7 + f % 3 };
                FlowKey::from_bytes(if f % 2 == 0 { &b } else { &b[..13] }).unwrap()
            };
            let mut a = FastPath::with_capacity(k, 5);
            let mut b = reference::RefFastPath::with_capacity(k, 5);
            for &(f, w) in &pkts {
                a.update(&key(f), w);
                b.update(&key(f), w);
                prop_assert_eq!(a.summary(), FastTable::summary(&b));
                prop_assert_eq!(a.bounds(&key(f)), b.bounds(&key(f)));
            }
            prop_assert_eq!(a.stats(), FastTable::stats(&b));
        }
    }

    fn k(i: u32) -> FlowKey {
        FlowKey::from_u32(i)
    }

    #[test]
    fn capacities_of_the_default_budget() {
        let sv = |l| capacity(FastKind::Sketchvisor, DEFAULT_BYTES, l);
        let mg = |l| capacity(FastKind::MisraGries, DEFAULT_BYTES, l);
        assert_eq!((sv(4), sv(13), sv(37)), (292, 221, 134));
        assert_eq!((mg(4), mg(13), mg(37)), (409, 282, 154));
        assert!(FastPath::new(10, 13, 0).is_err());
    }

    /// The paper's Figure 4, replayed with three buckets and unit weights: the numbers differ
    /// (the paper's decrement of 2 is for illustration), the mechanics do not.
    #[test]
    fn a_full_table_kicks_out_and_records_e() {
        let mut f = FastPath::with_capacity(3, 1);
        for (key, w) in [(0, 5), (1, 4), (2, 1)] {
            f.update(&k(key), w);
        }
        assert_eq!(f.len(), 3);
        assert_eq!(f.total(), 10);
        // f3 with 3: values {5, 4, 1, 3}: a1 5, a2 4, amin 1 -> e = floor(1 * (4/3)^0.074) = 1.
        f.update(&k(3), 3);
        assert_eq!(f.stats().kickouts, 1);
        assert_eq!(f.decremented(), 1);
        assert_eq!(f.bounds(&k(2)), None, "r = 1 - 1 = 0: kicked out");
        assert_eq!(f.bounds(&k(0)), Some((5, 5)));
        // Inserted with (E = 0, 3 - 1, 1).
        assert_eq!(f.bounds(&k(3)), Some((3, 3)));
        // f2 again with 5: values {4, 3, 2, 5} -> e = floor(2 * (4/3)^0.074) = 2; f3 (r = 2)
        // goes, f2 comes in with (E = 1, 5 - 2, 2): it may have had up to 1 before.
        f.update(&k(2), 5);
        assert_eq!(f.bounds(&k(3)), None);
        assert_eq!(f.bounds(&k(2)), Some((5, 6)));
        assert_eq!(f.decremented(), 3);
        assert_eq!(f.total(), 18);
        // A packet no larger than the threshold is dropped (counted in E only).
        let before = f.len();
        f.update(&k(7), 1);
        assert_eq!(f.bounds(&k(7)), None);
        assert!(f.len() <= before);
    }

    #[test]
    fn equal_values_empty_the_table_and_drop_the_packet() {
        let mut f = FastPath::with_capacity(4, 1);
        for i in 0..4 {
            f.update(&k(i), 7);
        }
        f.update(&k(9), 7);
        assert!(f.is_empty(), "k+1 equal values: e = a_(k+1) removes all");
        assert_eq!(f.decremented(), 7);
        assert_eq!(f.stats().evicted, 4);
        // Every flow had at most E = 7.
        f.update(&k(0), 1);
        assert_eq!(f.bounds(&k(0)), Some((1, 8)));
    }

    #[test]
    fn misra_gries_subtracts_the_smaller_of_w_and_the_minimum() {
        let mut m = MgFastPath::with_capacity(2, 1);
        m.update(&k(0), 10);
        m.update(&k(1), 4);
        m.update(&k(2), 3); // delta 3: counters 7, 1; packet consumed
        assert_eq!((m.len(), m.decremented()), (2, 3));
        assert_eq!(m.bounds(&k(1)), Some((1, 4)));
        m.update(&k(3), 5); // delta 1: counter of 1 removed, 4 inserted
        assert_eq!(m.bounds(&k(1)), None);
        assert_eq!(m.bounds(&k(3)), Some((4, 8)));
        assert_eq!(m.bounds(&k(0)), Some((6, 10)));
        assert_eq!(m.stats().kickouts, 2);
    }

    #[test]
    fn merge_sums_bounds_v_and_e() {
        let a = Summary {
            flows: vec![
                Tracked {
                    key: k(1),
                    lo: 5,
                    hi: 7,
                },
                Tracked {
                    key: k(2),
                    lo: 1,
                    hi: 2,
                },
            ],
            v: 10,
            e: 2,
            paths: Default::default(),
        };
        let b = Summary {
            flows: vec![Tracked {
                key: k(1),
                lo: 3,
                hi: 3,
            }],
            v: 4,
            e: 0,
            paths: Default::default(),
        };
        let m = Summary::merge([&a, &b]);
        assert_eq!((m.v, m.e), (14, 2));
        assert_eq!(
            m.get(&k(1)),
            Some(&Tracked {
                key: k(1),
                lo: 8,
                hi: 10
            })
        );
        assert_eq!(m.get(&k(2)).map(|t| (t.lo, t.hi)), Some((1, 2)));
        assert_eq!(m.heavy_hitters(3).len(), 1);
        assert!(m.complete_above(3) && !m.complete_above(2));
    }
}
