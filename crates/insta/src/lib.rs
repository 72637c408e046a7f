//! InstaMeasure (Jang, Moon, Noh, Mohaisen, Nyang, ICDCS 2019; `papers/instameasure.txt`
//! sections II-V): a small FlowRegulator in cache in front of a large flow table, the WSAF, so
//! that only about 1% of packets touch the table while every flow is counted.
//!
//! - [`rcc`]: the RCC word counter (virtual vectors confined in 32-bit words, saturation,
//!   recycling, noise classes, units);
//! - [`regulator`]: one layer (RFlow+, the `rcc` algorithm) or two (`instameasure`);
//! - [`wsaf`]: the table, quadratic probing with a probe limit and second-chance replacement;
//! - [`instant`]: instant detection (`run --instant`): the estimate semantics, the detection
//!   rule and its guarantee.
//!
//! A flow's estimate is its table count plus what the regulator still holds for it (the
//! linear-counting estimate of its vectors). Heavy hitters and top-k are the table's flows by
//! that estimate; flow size answers any key (a flow that never reached the table is answered from
//! the regulator alone). The table records the capture times of the packets whose emissions
//! inserted a flow and last added to it (`wsaf` module docs; `Algorithm::update_timed`).
//!
//! Not answered: cardinality, the flow-size distribution and entropy, which need every flow.
//! The table holds only the flows that emitted (a lone flow first emits after about 95 packets
//! with two layers, 10 with one), so on Zipf traffic nearly every flow is only in the regulator,
//! which keeps neither keys nor a count of its flows. Linear counting over L1's occupancy counts
//! set bits, not flows: a flow of `n` packets held in L1 sets `8 (1 - (7/8)^n)` bits on average
//! (1 at `n` = 1, 2.6 at 3, up to 5 before it saturates), and recycling clears every saturated
//! flow's bits down to the noise level. How many flows stand behind the set bits thus depends on
//! the sizes of the small flows, the unknown itself: the same occupancy is `N` one-packet flows or
//! about `N / 2.6` three-packet ones, a factor of up to 5 that no stated bound covers without
//! assuming the distribution. The distribution fails the same way below the retention (about 100
//! packets): only its tail reaches the table, and the missing head would dominate its error. An
//! EM over vector occupancies (MRAC's method) might recover both; it is not built.
//!
//! Weights. An algorithm sees one weight per update: 1 in a packet run, the packet's wire length
//! in a byte run (`--weight bytes`). Every update is one packet for the regulator (one random
//! bit); a saturation that reaches the table adds `p` packets (the units' product, rounded
//! without bias) and `p x w` to the weight column, `w` the weight of the update that saturated:
//! the paper's byte estimate (section III-C, "the size of the last arrived packet" times the
//! packet estimate) in a byte run, exactly the packets in a packet run. Answers are in the run's
//! weight: the weight column plus the held packets times the flow's mean weight per packet
//! (weight column / packets), or the epoch's mean weight per update for a flow not in the table.
//! Behind an aggregator (Agg-Evict) an update of weight `w` is still one arrival: the packet
//! column then counts updates and the weight estimate samples aggregated weights, with a larger
//! variance; InstaMeasure is itself a front end and is meant to see packets.
//!
//! Workers. Each worker owns one regulator and one table. `merge` moves the other's table
//! entries into this table, each remembering which regulator (shard) holds the rest of its flow,
//! and keeps the other's regulator: a flow in a table is answered exactly as its worker answered
//! it (while the merged table has room for every entry; the runner's workers own disjoint flows,
//! so no key is in two tables); a flow in no table is answered by the largest of the regulators' estimates for it (its own
//! worker's, unless another's noise for its word is larger). Merging into an empty instance is
//! a copy.

#![forbid(unsafe_code)]

pub mod instant;
pub mod rcc;
pub mod regulator;
pub mod wsaf;

use algo::{
    Algorithm, BuildCtx, Caveat, ConfigError, Crossing, Estimate, KeyBatch, MergeError, Task,
};
use key::{FlowKey, HashFn};
use serde::{Deserialize, Serialize};

use instant::Detector;
use rcc::Bits;
use regulator::{Regulator, Step};
use wsaf::{Add, Slot, Wsaf};

/// The two-layer FlowRegulator with its table.
pub const NAME: &str = "instameasure";
/// The one-layer baseline (RFlow+).
pub const NAME_RCC: &str = "rcc";
/// Distinct sub-seed constant of this crate ("insta").
const SEED_TAG: u64 = 0x696e_7374_6100_0000;

/// The name of the algorithm with one or two layers.
fn name_of(two_layers: bool) -> &'static str {
    if two_layers {
        NAME
    } else {
        NAME_RCC
    }
}

/// Instant detection's per-slot count is in 1/64 packets (`wsaf::Slot::fine`).
const FINE: f64 = 64.0;

/// `packets` in 1/64 packets, saturating.
fn fine(packets: f64) -> u32 {
    (packets * FINE).round().min(f64::from(u32::MAX)) as u32
}

/// Keys hashed (and their words prefetched) ahead of encoding, per batch step.
const CHUNK: usize = 32;

const TASKS: &[Task] = &[Task::HeavyHitters, Task::TopK, Task::FlowSize];

/// Parameters of `instameasure` and `rcc`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InstaConfig {
    /// L1 words (32 bits each); `instameasure` has three L2 arrays of as many words. Default
    /// 65536 (256 KiB of L1, 1 MiB of L1 + L2): what a flow that never reached the table is
    /// answered with is the regulator's noise: among 10^5 Zipf(1.1) flows in 10^6 packets, the
    /// two layers answer flows of fewer than 10 packets 2.5 times their size on average with the
    /// paper's 8192 words (its 32 KB L1, 128 KB of L1 + L2, section IV-D; `--preset
    /// instameasure`), 1.2 times with 65536 (flows of 10^3 packets and more: the same error
    /// either way).
    pub words: usize,
    /// Table slots, a power of two. Default 2^16 (2.9 MiB with 5-tuple keys, 3.9 MiB with the
    /// regulator: within the 4 MiB per instance of issue 12); the paper's 2^20 slots (33 MB with its 33-byte entries,
    /// 46 MiB with ours for 5-tuples) is `--preset instameasure`.
    pub wsaf_entries: usize,
    /// Most slots probed per insertion before a victim is replaced.
    pub probe_limit: usize,
    /// Instant detection (`run --instant`): standard deviations of a count that a flow's
    /// estimate must be above the threshold to be detected (`instant` module docs). Default 4:
    /// a detection fires before the true count crossed with probability about 6e-5 per flow;
    /// 0 is the paper's rule (the estimate itself), which fires early for about half the flows.
    pub instant_sigmas: f64,
}

impl Default for InstaConfig {
    fn default() -> Self {
        InstaConfig {
            words: 65536,
            wsaf_entries: 1 << 16,
            probe_limit: 16,
            instant_sigmas: 2.0,
        }
    }
}

fn invalid(algo: &'static str, field: &'static str, reason: &str) -> ConfigError {
    ConfigError::Invalid {
        algo,
        field,
        reason: reason.to_string(),
    }
}

impl InstaConfig {
    pub fn validate(&self, algo: &'static str) -> Result<(), ConfigError> {
        if self.words == 0 || self.words > 1 << 28 {
            return Err(invalid(algo, "words", "must be in 1..=2^28"));
        }
        if !self.wsaf_entries.is_power_of_two() || self.wsaf_entries > 1 << 30 {
            return Err(invalid(
                algo,
                "wsaf_entries",
                "must be a power of two in 1..=2^30",
            ));
        }
        if self.probe_limit == 0 || self.probe_limit > 1024 {
            return Err(invalid(algo, "probe_limit", "must be in 1..=1024"));
        }
        if !(0.0..=100.0).contains(&self.instant_sigmas) {
            return Err(invalid(algo, "instant_sigmas", "must be in 0..=100"));
        }
        Ok(())
    }

    /// Bytes of the regulator and the table for keys of up to `key_len` bytes.
    pub fn bytes(
        &self,
        algo: &'static str,
        two_layers: bool,
        key_len: usize,
    ) -> Result<u64, ConfigError> {
        self.validate(algo)?;
        let lanes = Regulator::lanes(two_layers) as u64;
        let reg = algo::Entry::product(algo, "words", &[self.words as u64, lanes, 4])?;
        let table = algo::Entry::product(
            algo,
            "wsaf_entries",
            &[
                self.wsaf_entries as u64,
                (wsaf::SLOT_BYTES + key_len + 1) as u64,
            ],
        )?;
        algo::Entry::sum(algo, "wsaf_entries", &[reg, table])
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InstaMeasure {
    cfg: InstaConfig,
    key_len: usize,
    hash: HashFn,
    bits_seed: u64,
    bits: Bits,
    /// The regulators: 0 is the live one; merges append the others' (module docs).
    shards: Vec<Regulator>,
    wsaf: Wsaf,
    /// Updates (packets) and their summed weight since the last reset.
    updates: u64,
    weight: u64,
    /// Table insertions requested (saturations of the last layer).
    emits: u64,
    /// Instant detection, when armed (`Algorithm::arm_instant`).
    #[serde(default)]
    instant: Option<Detector>,
}

impl algo::CheckState for InstaMeasure {
    /// The configuration valid, a key length a key has, every regulator (one per merged
    /// worker, at most the shards a slot can name) of the configured shape and kind, and a
    /// table of the configured shape whose slots name existing shards.
    fn check_state(&self) -> Result<(), String> {
        let Some(first) = self.shards.first() else {
            return Err("no regulator".into());
        };
        let two = first.two_layers();
        self.cfg.validate(name_of(two)).map_err(|e| e.to_string())?;
        if self.key_len == 0 || self.key_len > key::MAX_KEY_LEN {
            return Err(format!("key length {}", self.key_len));
        }
        if self.shards.len() > wsaf::MAX_SHARDS {
            return Err(format!("{} regulators", self.shards.len()));
        }
        for (i, r) in self.shards.iter().enumerate() {
            r.check(self.cfg.words, two)
                .map_err(|e| format!("shard {i}: {e}"))?;
        }
        self.wsaf.check(
            self.cfg.wsaf_entries,
            self.cfg.probe_limit,
            self.key_len,
            self.shards.len(),
        )
    }
}

impl InstaMeasure {
    /// `instameasure` (`two_layers`) or `rcc`, for keys of up to `ctx.key_len` bytes.
    pub fn new(
        two_layers: bool,
        cfg: InstaConfig,
        ctx: &BuildCtx,
    ) -> Result<InstaMeasure, ConfigError> {
        cfg.validate(name_of(two_layers))?;
        let key_len = ctx.key_len.min(key::MAX_KEY_LEN);
        let bits_seed = key::sub_seed(ctx.seed, SEED_TAG + 1);
        Ok(InstaMeasure {
            key_len,
            hash: HashFn::new(key::sub_seed(ctx.seed, SEED_TAG)),
            bits_seed,
            bits: Bits::new(bits_seed),
            shards: vec![Regulator::new(cfg.words, two_layers)],
            wsaf: Wsaf::new(cfg.wsaf_entries, cfg.probe_limit, key_len),
            updates: 0,
            weight: 0,
            emits: 0,
            instant: None,
            cfg,
        })
    }

    pub fn config(&self) -> &InstaConfig {
        &self.cfg
    }

    pub fn two_layers(&self) -> bool {
        self.shards[0].two_layers()
    }

    /// Updates seen since the last reset (merged: summed over the workers).
    pub fn updates(&self) -> u64 {
        self.updates
    }

    /// Table insertions requested (one per saturation of the last layer).
    pub fn emits(&self) -> u64 {
        self.emits
    }

    /// The regulation rate: table insertions per packet (paper section V-B, Fig. 7).
    pub fn regulation_rate(&self) -> f64 {
        self.emits as f64 / self.updates.max(1) as f64
    }

    pub fn table(&self) -> &Wsaf {
        &self.wsaf
    }

    /// The packets the table holds for `key` (0 when it is in no table slot): what
    /// saturation-based decoding has reported of the flow so far, without what the regulator
    /// still holds (paper section II; `bench instameasure`'s detection delay).
    pub fn table_packets(&self, key: &FlowKey) -> u64 {
        let h = self.hash.hash(key);
        self.wsaf.get(key, h).map_or(0, |s| u64::from(s.packets))
    }

    /// The first and last capture times the table is to record for each flow (`wsaf` module
    /// docs), read off this instance fed `packets` (key, time) one `update` at a time, without
    /// times: a packet whose update made an emission while its flow was in no slot is the
    /// flow's `first` (and `last`), a later emitting packet its `last`. The reference the timed
    /// path is tested against (`tests/times.rs`, the CLI's `run --json` test).
    pub fn emission_times(
        &mut self,
        packets: impl IntoIterator<Item = (FlowKey, u64)>,
    ) -> key::KeyMap<(u64, u64)> {
        let mut want = key::KeyMap::default();
        for (k, at) in packets {
            let (was_in, emits) = (self.table_packets(&k) > 0, self.emits);
            self.update(&k, 1);
            if self.emits > emits {
                let e = want.entry(k).or_insert((at, at));
                if !was_in {
                    e.0 = at;
                }
                e.1 = at;
            }
        }
        want
    }

    /// The live regulator.
    pub fn regulator(&self) -> &Regulator {
        &self.shards[0]
    }

    /// One packet of the flow with hash `h` (the update path after hashing); `at` its position
    /// in the current update call (instant detection's log, and its time in `ts`, the call's
    /// capture times: empty when the instance is given none).
    #[inline(always)]
    fn offer(&mut self, key: impl FnOnce() -> FlowKey, h: u64, w: u64, at: usize, ts: &[u64]) {
        self.updates += 1;
        self.weight = self.weight.saturating_add(w);
        if self.instant.is_some() {
            return self.offer_watched(key, h, w, at, ts);
        }
        if let Some(est) = self.shards[0].offer(h, &mut self.bits) {
            self.emit(&key(), h, est, w, ts.get(at).copied(), false);
        }
    }

    /// [`InstaMeasure::offer`] of an armed instance: after an L1 saturation or an emission, the
    /// flow's detection estimate is checked (`instant` module docs).
    #[inline(never)]
    fn offer_watched(
        &mut self,
        key: impl FnOnce() -> FlowKey,
        h: u64,
        w: u64,
        at: usize,
        ts: &[u64],
    ) {
        let (c1, emitted) = match self.shards[0].step(h, &mut self.bits) {
            Step::Held => return,
            Step::L1(c1) => (c1, None),
            Step::Emit(c1, est) => (c1, Some(est)),
        };
        let k = key();
        // The emission that inserts the flow carries its packets so far; any other L1
        // saturation of a table flow adds its unit.
        let t = ts.get(at).copied();
        let inserted = emitted.is_some_and(|est| self.emit(&k, h, est, w, t, true));
        if !inserted {
            if let Some(s) = self.wsaf.get_mut(&k, h) {
                s.fine = s.fine.saturating_add(fine(rcc::UNIT[c1]));
            }
        }
        self.detect(&k, h, at);
    }

    /// Log `key` if its detection estimate reached the threshold (once per epoch).
    fn detect(&mut self, key: &FlowKey, h: u64, at: usize) {
        let two = self.two_layers();
        let Some(d) = &self.instant else { return };
        let Some(s) = self.wsaf.get(key, h) else {
            return;
        };
        if s.reported() {
            return;
        }
        let per = s.bytes as f64 / f64::from(s.packets);
        let count = f64::from(s.fine) / FINE + self.shards[0].held_l1(h);
        let bound = instant::lower(two, count, self.cfg.instant_sigmas) * per;
        if bound < d.threshold as f64 {
            return;
        }
        let c = Crossing {
            at: d.base + at as u64,
            key: *key,
            estimate: self.estimate_slot(key, s),
            bound,
        };
        if let Some(s) = self.wsaf.get_mut(key, h) {
            s.set_reported();
        }
        if let Some(d) = &mut self.instant {
            d.log.push(c);
        }
    }

    /// The next update call's positions start `n` later.
    #[inline(always)]
    fn advance(&mut self, n: usize) {
        if let Some(d) = &mut self.instant {
            d.base += n as u64;
        }
    }

    /// A saturation of the last layer: `est` packets to the table (Algorithm 1, lines 13-16),
    /// by the packet of capture time `t` (if the instance is given times). `armed`: a new slot
    /// starts instant detection's count with these packets. Whether the flow was new to the
    /// table.
    #[inline(never)]
    fn emit(
        &mut self,
        key: &FlowKey,
        h: u64,
        est: f64,
        w: u64,
        t: Option<u64>,
        armed: bool,
    ) -> bool {
        let packets = self.bits.round(est).clamp(1, u64::from(u32::MAX));
        let out = self.wsaf.add(
            key,
            h,
            Add {
                packets: packets as u32,
                bytes: packets.saturating_mul(w),
                times: t.map(|t| (t, t)),
                fine: if armed { fine(packets as f64) } else { 0 },
                ..Add::default()
            },
        );
        self.emits += 1;
        out != wsaf::Outcome::Updated
    }

    /// The epoch's mean weight per update (1 before any update).
    fn mean_weight(&self) -> f64 {
        if self.updates == 0 {
            1.0
        } else {
            self.weight as f64 / self.updates as f64
        }
    }

    /// Packets the regulators hold for hash `h`: shard `s`'s for a flow of the table, the
    /// largest of them otherwise.
    fn held(&self, h: u64, shard: Option<u16>) -> f64 {
        match shard {
            Some(s) => self.shards[usize::from(s)].held(h),
            None => self.shards.iter().map(|r| r.held(h)).fold(0.0, f64::max),
        }
    }

    /// The estimate of a flow of the table, in the run's weight.
    fn estimate_slot(&self, key: &FlowKey, s: &Slot) -> f64 {
        let per = s.bytes as f64 / f64::from(s.packets);
        s.bytes as f64 + self.held(self.hash.hash(key), Some(s.shard())) * per
    }

    /// The estimate of any flow, in the run's weight (module docs).
    pub fn estimate(&self, key: &FlowKey) -> f64 {
        let h = self.hash.hash(key);
        match self.wsaf.get(key, h) {
            Some(s) => self.estimate_slot(key, s),
            None => self.held(h, None) * self.mean_weight(),
        }
    }

    /// Hash a chunk of keys first and prefetch their regulator words, then encode: the default
    /// 1 MiB of L1 + L2 words is larger than a core's L2 cache. Same state as one by one. `ts`:
    /// the keys' capture times, or empty.
    fn batch(&mut self, keys: &[FlowKey], weights: &[u64], ts: &[u64]) {
        let mut hs = [0u64; CHUNK];
        for (c, (ks, ws)) in keys.chunks(CHUNK).zip(weights.chunks(CHUNK)).enumerate() {
            for (h, k) in hs.iter_mut().zip(ks) {
                *h = self.hash.hash(k);
                self.shards[0].prefetch(*h);
            }
            for (j, ((k, &w), &h)) in ks.iter().zip(ws).zip(&hs).enumerate() {
                if w != 0 && self.wsaf.fits(k) {
                    self.offer(|| *k, h, w, c * CHUNK + j, ts);
                }
            }
        }
        self.advance(keys.len());
    }

    /// The 4-byte keys hashed from their bytes directly (the `FlowKey` is built only for the
    /// ~1% of packets that reach the table), prefetching as [`InstaMeasure::batch`]; same hash,
    /// same state.
    fn batch_u32(&mut self, keys: &[u32], weights: &[u64], ts: &[u64]) {
        if !self.wsaf.fits(&FlowKey::from_u32(0)) {
            self.advance(keys.len());
            return;
        }
        let mut hs = [0u64; CHUNK];
        for (c, (ks, ws)) in keys.chunks(CHUNK).zip(weights.chunks(CHUNK)).enumerate() {
            for (h, k) in hs.iter_mut().zip(ks) {
                *h = self.hash.hash_bytes(&k.to_be_bytes());
                self.shards[0].prefetch(*h);
            }
            for (j, ((&k, &w), &h)) in ks.iter().zip(ws).zip(&hs).enumerate() {
                if w != 0 {
                    self.offer(|| FlowKey::from_u32(k), h, w, c * CHUNK + j, ts);
                }
            }
        }
        self.advance(keys.len());
    }

    /// The table's flows with their estimates, largest first (ties by key).
    fn ranked(&self) -> Vec<Estimate> {
        let mut v: Vec<Estimate> = self
            .wsaf
            .iter()
            .map(|(k, s)| (k, self.estimate_slot(&k, s).round() as u64))
            .collect();
        v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    }

    fn pristine(&self) -> bool {
        self.updates == 0 && self.shards.len() == 1 && self.wsaf.is_empty()
    }

    /// The caveat of an answer by table flows at `t` (in the run's weight; for top-k, the k-th
    /// answer): (1) below what the regulator holds of a flow before the flow reaches the table
    /// ([`retention`]), flows of `t` may be in no table and cannot be reported; (2) a count
    /// moves in saturation steps, with a relative spread of [`spread`] at `n` packets, and when
    /// the table's flows within one spread of `t` are more than a third of those at or above it,
    /// about a tenth of the answer or more is on the wrong side of `t`.
    fn threshold_caveat(&self, t: f64, k: Option<usize>) -> Vec<Caveat> {
        if self.updates == 0 {
            return Vec::new();
        }
        let two = self.two_layers();
        let per = self.mean_weight();
        let packets = t / per;
        let (held, ten) = (retention(two), spread_10(two));
        let what = match k {
            Some(k) => format!("the {k}-th answer ({t:.0}, about {packets:.0} packets)"),
            None => format!("the threshold ({t:.0}, about {packets:.0} packets)"),
        };
        let alternative = if two { ", or the one-layer rcc" } else { "" };
        let (parameter, value) = match k {
            Some(_) => ("k", "a k whose k-th flow is"),
            None => ("threshold", "a threshold of"),
        };
        let suggestion = format!(
            "{value} at least {:.0} (where a count spreads by 10%){alternative}",
            ten * per
        );
        if packets < held {
            return vec![Caveat {
                parameter,
                message: format!(
                    "{what} is below what the {} regulator holds of a flow before the flow \
                     reaches the table (up to about {held:.0} packets): flows of that size may \
                     be in no table, and only the table's flows can be reported",
                    if two { "two-layer" } else { "one-layer" }
                ),
                suggestion,
            }];
        }
        let band = spread(two, packets) * t;
        let (mut near, mut above) = (0usize, 0usize);
        for (key, s) in self.wsaf.iter() {
            let e = self.estimate_slot(&key, s);
            near += usize::from((e - t).abs() <= band);
            above += usize::from(e >= t);
        }
        if near * 3 <= above.max(1) {
            return Vec::new();
        }
        vec![Caveat {
            parameter,
            message: format!(
                "a count of {packets:.0} packets spreads by {:.0}% (the regulator's saturation \
                 steps), and {near} of the table's flows are that close to {what}, against \
                 {above} at or above it: about a tenth of the answer or more may be on the wrong \
                 side",
                100.0 * spread(two, packets)
            ),
            suggestion,
        }]
    }

    /// The caveat of an answer by table flows when the table replaced a flow at least `floor`
    /// large (in the run's weight): that flow lost its count.
    fn eviction_caveat(&self, floor: f64, what: &str) -> Vec<Caveat> {
        let gone = f64::from(self.wsaf.max_evicted()) * self.mean_weight();
        if self.wsaf.evictions() == 0 || gone < floor {
            return Vec::new();
        }
        vec![Caveat {
            parameter: "wsaf_entries",
            message: format!(
                "the table ({} slots) replaced {} flows, one of about {gone:.0} (in the run's \
                 weight), at least {what} ({floor:.0}): its count was lost",
                self.wsaf.capacity(),
                self.wsaf.evictions()
            ),
            suggestion: format!("wsaf_entries = {} (at least)", self.wsaf.capacity() * 2),
        }]
    }
}

impl Algorithm for InstaMeasure {
    fn name(&self) -> &'static str {
        name_of(self.two_layers())
    }

    fn tasks(&self) -> &'static [Task] {
        TASKS
    }

    #[inline]
    fn update(&mut self, key: &FlowKey, weight: u64) {
        if weight == 0 || !self.wsaf.fits(key) {
            self.advance(1);
            return;
        }
        let h = self.hash.hash(key);
        self.offer(|| *key, h, weight, 0, &[]);
        self.advance(1);
    }

    fn update_batch(&mut self, keys: &[FlowKey], weights: &[u64]) {
        self.batch(keys, weights, &[]);
    }

    fn update_batch_u32(&mut self, keys: &[u32], weights: &[u64]) {
        self.batch_u32(keys, weights, &[]);
    }

    /// The table records when each flow was inserted and last added to (`wsaf` module docs).
    fn wants_time(&self) -> bool {
        true
    }

    /// The batched updates, each emission stamped with its packet's time.
    fn update_timed(&mut self, keys: KeyBatch<'_>, weights: &[u64], ts_ns: &[u64]) {
        match keys {
            KeyBatch::Keys(k) => self.batch(k, weights, ts_ns),
            KeyBatch::U32(k) => self.batch_u32(k, weights, ts_ns),
            // Each piece with its own packets' times (none when none were given).
            KeyBatch::V4(..) => keys.materialized(weights, &mut |b, w, at| {
                let ts = ts_ns.get(at..at + w.len()).unwrap_or(&[]);
                self.update_timed(b, w, ts);
            }),
        }
    }

    fn flow_times(&self, key: &FlowKey) -> Option<(u64, u64)> {
        let s = self.wsaf.get(key, self.hash.hash(key))?;
        self.wsaf.times(s)
    }

    fn reset(&mut self) {
        self.shards.truncate(1);
        self.shards[0].reset();
        self.wsaf.reset();
        self.bits = Bits::new(self.bits_seed);
        self.updates = 0;
        self.weight = 0;
        self.emits = 0;
        if let Some(d) = &mut self.instant {
            d.reset();
        }
    }

    fn memory_bytes(&self) -> usize {
        self.shards.iter().map(|r| r.memory_bytes()).sum::<usize>() + self.wsaf.memory_bytes()
    }

    fn heavy_hitters(&self, threshold: u64) -> Option<Vec<Estimate>> {
        Some(
            self.ranked()
                .into_iter()
                .take_while(|e| e.1 >= threshold)
                .collect(),
        )
    }

    fn top_k(&self, k: usize) -> Option<Vec<Estimate>> {
        let mut v = self.ranked();
        v.truncate(k);
        Some(v)
    }

    fn flow_size(&self, key: &FlowKey) -> Option<u64> {
        Some(self.estimate(key).round() as u64)
    }

    fn caveats(&self, task: Task, threshold: Option<u64>, _total: u64) -> Vec<Caveat> {
        match task {
            // What the regulator answers for a flow it never saw, against the smallest flow.
            Task::FlowSize => {
                // The regulator's noise, in packets against the smallest flow in packets (what
                // `words` changes); then what converting held packets to bytes adds.
                let per = self.mean_weight();
                let unit = threshold.map(|t| ((t as f64 / per).round() as u64).max(1));
                let mut c = algo::collision_caveat(task, unit, "words", self.cfg.words, |code| {
                    self.held(code, None)
                });
                if per > 1.5 {
                    c.push(Caveat {
                        parameter: "weight",
                        message: format!(
                            "a flow that never reached the table is answered with the packets \
                             the regulator holds for it times the epoch's mean weight per packet \
                             ({per:.0}): the regulator keeps no lengths, so a flow of small \
                             packets is answered several times its size"
                        ),
                        suggestion: "weight = packets for the sizes of small flows (the \
                                     table's flows carry their own bytes)"
                            .to_string(),
                    });
                }
                c
            }
            Task::HeavyHitters => match threshold {
                Some(t) => {
                    let mut c = self.threshold_caveat(t as f64, None);
                    c.extend(self.eviction_caveat(t as f64, "the threshold"));
                    c
                }
                None => Vec::new(),
            },
            Task::TopK => {
                let k = threshold.unwrap_or(0) as usize;
                let ranked = self.ranked();
                match ranked.get(k.saturating_sub(1)) {
                    Some(e) if k > 0 => {
                        let mut c = self.threshold_caveat(e.1 as f64, Some(k));
                        c.extend(self.eviction_caveat(e.1 as f64, "the k-th answer"));
                        c
                    }
                    _ if k > 0 && self.updates > 0 => vec![Caveat {
                        parameter: "k",
                        message: format!(
                            "the table holds {} flows, fewer than k = {k}: the other flows are \
                             held in the regulator, which keeps no keys",
                            ranked.len()
                        ),
                        suggestion: format!("k <= {}", ranked.len()),
                    }],
                    _ => Vec::new(),
                }
            }
            _ => Vec::new(),
        }
    }

    /// Heavy hitters at `threshold` detected on the packet path (`instant` module docs).
    fn arm_instant(&mut self, threshold: u64) -> bool {
        self.instant = Some(Detector::new(threshold));
        true
    }

    fn drain_crossings(&mut self, out: &mut Vec<Crossing>) {
        if let Some(d) = &mut self.instant {
            d.drain(out);
        }
    }

    /// Module docs ("Workers"): the other's table entries move in, tagged with the shard that
    /// keeps the rest of their flows; its regulators are kept. Requires the same configuration,
    /// layers, key length and seeds.
    fn merge(&mut self, other: &dyn Algorithm) -> Result<(), MergeError> {
        let o = algo::merge_peer(self, other, |o: &InstaMeasure| {
            o.two_layers() == self.two_layers()
                && o.cfg == self.cfg
                && o.key_len == self.key_len
                && o.hash == self.hash
                && o.bits_seed == self.bits_seed
        })?;
        if o.pristine() {
            return Ok(());
        }
        if self.pristine() {
            *self = o.clone();
            return Ok(());
        }
        let offset = self.shards.len();
        if offset + o.shards.len() > wsaf::MAX_SHARDS {
            return Err(MergeError::Mismatch(self.name()));
        }
        self.shards.extend(o.shards.iter().cloned());
        for (k, s) in o.wsaf.iter() {
            let h = self.hash.hash(&k);
            self.wsaf.add(
                &k,
                h,
                Add {
                    packets: s.packets,
                    bytes: s.bytes,
                    times: o.wsaf.times(s),
                    fine: s.fine,
                    shard: s.shard() + offset as u16,
                    reported: s.reported(),
                },
            );
        }
        // Saturating, as the weight: a loaded peer's counts are not bounded by anything else.
        self.updates = self.updates.saturating_add(o.updates);
        self.weight = self.weight.saturating_add(o.weight);
        self.emits = self.emits.saturating_add(o.emits);
        Ok(())
    }
}

/// Mean and variance (packets) of the cycle between two emissions of a lone flow: one layer,
/// a coupon cycle from 0 to 6 of 8 bits (`UNIT[0]`; variance the sum of the geometric
/// variances `(1 - p) / p^2`, `p = (8 - j) / 8`); two layers, a coupon cycle of such cycles.
pub(crate) fn cycle(two_layers: bool) -> (f64, f64) {
    let u = rcc::UNIT[0];
    let v: f64 = (0..rcc::SAT_ONES)
        .map(|j| {
            let p = f64::from(rcc::VECTOR_BITS - j) / f64::from(rcc::VECTOR_BITS);
            (1.0 - p) / (p * p)
        })
        .sum();
    if two_layers {
        (u * u, u * v + v * u * u)
    } else {
        (u, v)
    }
}

/// The relative standard deviation of a flow's count after `n` packets: `sqrt(v / (m n))` for
/// cycles of mean `m` and variance `v` (renewal theory): 9.4% at 1000 packets with two layers,
/// 2.9% with one.
pub fn spread(two_layers: bool, n: f64) -> f64 {
    let (m, v) = cycle(two_layers);
    (v / (m * n.max(1.0))).sqrt()
}

/// Packets at which [`spread`] is 10%: about 880 with two layers, 84 with one.
fn spread_10(two_layers: bool) -> f64 {
    let (m, v) = cycle(two_layers);
    v / (m * 0.01)
}

/// About the most a regulator holds of one flow before the flow reaches the table: a vector
/// short of saturation in each layer, `UNIT[0]` packets in L1 and `UNIT[0]` L1 saturations in L2.
pub fn retention(two_layers: bool) -> f64 {
    let u = rcc::UNIT[0];
    if two_layers {
        u * u + u
    } else {
        u
    }
}

fn memory(
    name: &'static str,
    two_layers: bool,
    p: &toml::Table,
    ctx: &BuildCtx,
) -> Result<u64, ConfigError> {
    algo::Entry::memory_with(name, p, |c: InstaConfig| {
        c.bytes(name, two_layers, ctx.key_len.min(key::MAX_KEY_LEN))
    })
}

/// This algorithm's facts, listed in the `catalog` crate.
///
/// `memory`: exact at construction, `4 B x words x 4` of regulator and `wsaf_entries x (32 B +
/// key_len + 1)` of table; each merge adds the other worker's regulator.
pub const ENTRY: algo::Entry = algo::Entry {
    name: NAME,
    tasks: TASKS,
    fit: algo::KeyFit::AtMost,
    build: |p, ctx| algo::build_with(NAME, p, |c| InstaMeasure::new(true, c, ctx)),
    memory: |p, ctx| memory(NAME, true, p, ctx),
    defaults: algo::defaults_of::<InstaConfig>,
    flow_size_only: "",
    resets_to_empty: true,
    save: algo::save_state::<InstaMeasure>,
    load: |b| algo::load_state::<InstaMeasure>(NAME, b),
    // ns per update, u32 / FlowKey path: `cargo run --release -p catalog --example update_costs`.
    cost: algo::UpdateCost {
        u32_ns: 9.15,
        wide_ns: 13.48,
        behind: 0.86,
    },
};

/// The one-layer baseline's facts: as [`ENTRY`] with `4 B x words` of regulator.
pub const ENTRY_RCC: algo::Entry = algo::Entry {
    name: NAME_RCC,
    tasks: TASKS,
    fit: algo::KeyFit::AtMost,
    build: |p, ctx| algo::build_with(NAME_RCC, p, |c| InstaMeasure::new(false, c, ctx)),
    memory: |p, ctx| memory(NAME_RCC, false, p, ctx),
    defaults: algo::defaults_of::<InstaConfig>,
    flow_size_only: "",
    resets_to_empty: true,
    save: algo::save_state::<InstaMeasure>,
    load: |b| algo::load_state::<InstaMeasure>(NAME_RCC, b),
    // ns per update, u32 / FlowKey path: `cargo run --release -p catalog --example update_costs`.
    cost: algo::UpdateCost {
        u32_ns: 9.88,
        wide_ns: 13.12,
        behind: 0.79,
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> Vec<u32> {
        testkit::zipf_u32(200_000, 20_000, 1.1, 21)
    }

    /// The batched paths (u32 values and `FlowKey`s, hashed and prefetched ahead) leave the
    /// state of one `update` per key (the trait's contract).
    #[test]
    fn batch_paths_leave_the_state_of_single_updates() {
        for two in [true, false] {
            let ks = keys();
            let ws = vec![1u64; ks.len()];
            let flow: Vec<FlowKey> = ks.iter().map(|&k| FlowKey::from_u32(k)).collect();
            let ctx = BuildCtx::default();
            let mut a = InstaMeasure::new(two, InstaConfig::default(), &ctx).unwrap();
            let (mut b, mut c) = (a.clone(), a.clone());
            a.update_batch_u32(&ks, &ws);
            b.update_batch(&flow, &ws);
            for k in &flow {
                c.update(k, 1);
            }
            assert!(a.emits() > 0);
            assert_eq!(a, b);
            assert_eq!(a, c);
        }
    }

    /// Armed, the three paths log the same crossings at the same positions (counted over
    /// every update since the drain, batched or not), once per flow, and leave the same state.
    #[test]
    fn armed_paths_log_the_same_crossings() {
        for two in [true, false] {
            let ks = keys();
            let ws = vec![1u64; ks.len()];
            let flow: Vec<FlowKey> = ks.iter().map(|&k| FlowKey::from_u32(k)).collect();
            let mut a =
                InstaMeasure::new(two, InstaConfig::default(), &BuildCtx::default()).unwrap();
            assert!(a.arm_instant(1000));
            let (mut b, mut c) = (a.clone(), a.clone());
            a.update_batch_u32(&ks, &ws);
            b.update_batch(&flow, &ws);
            for k in &flow {
                c.update(k, 1);
            }
            let mut logs = [vec![], vec![], vec![]];
            for (x, log) in [&mut a, &mut b, &mut c].into_iter().zip(&mut logs) {
                x.drain_crossings(log);
            }
            assert!(logs[0].len() > 3, "{} crossings", logs[0].len());
            assert_eq!(logs[0], logs[1]);
            assert_eq!(logs[0], logs[2]);
            for x in &logs[0] {
                assert_eq!(flow[x.at as usize], x.key);
                assert!(x.bound >= 1000.0 && x.estimate > 0.0);
            }
            let mut seen: Vec<FlowKey> = logs[0].iter().map(|x| x.key).collect();
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), logs[0].len(), "each flow once");
            assert_eq!(a, b);
            assert_eq!(a, c);
        }
    }

    /// A snapshot (serde) restores the instance: equal state, and the same state after the same
    /// further updates (the generator's position is part of it).
    #[test]
    fn snapshots_restore_the_state_and_the_generator() {
        let ks = keys();
        let ws = vec![1u64; ks.len()];
        let (first, rest) = ks.split_at(ks.len() / 2);
        let mut a = InstaMeasure::new(true, InstaConfig::default(), &BuildCtx::default()).unwrap();
        a.update_batch_u32(first, &ws[..first.len()]);
        let json = serde_json::to_string(&a).unwrap();
        let mut b: InstaMeasure = serde_json::from_str(&json).unwrap();
        assert_eq!(a, b);
        a.update_batch_u32(rest, &ws[..rest.len()]);
        b.update_batch_u32(rest, &ws[..rest.len()]);
        assert_eq!(a, b);
    }

    /// The spread the caveats and the accuracy tests are built on: the relative standard
    /// deviation of a lone flow's estimate after n packets is `spread(n)` (within 15% of it over
    /// 600 flows: the deviation of a sample deviation of 600 is under 3%, the renewal formula is
    /// asymptotic and ignores the held part), and the estimate is unbiased (mean within 3
    /// standard errors).
    #[test]
    fn a_lone_flows_spread_is_the_renewal_spread() {
        for two in [true, false] {
            let n = 1000u32;
            let ests: Vec<f64> = (0..600u64)
                .map(|f| {
                    let mut r = Regulator::new(1, two);
                    let mut bits = Bits::new(f);
                    let emitted: f64 = (0..n).filter_map(|_| r.offer(f, &mut bits)).sum();
                    (emitted + r.held(f)) / f64::from(n)
                })
                .collect();
            let mean = ests.iter().sum::<f64>() / ests.len() as f64;
            let var =
                ests.iter().map(|e| (e - mean).powi(2)).sum::<f64>() / (ests.len() - 1) as f64;
            let (sd, want) = (var.sqrt(), spread(two, f64::from(n)));
            eprintln!("two {two}: sd {sd:.4}, spread {want:.4}, mean {mean:.4}");
            assert!((sd / want - 1.0).abs() < 0.15, "two {two}: {sd} vs {want}");
            assert!(
                (mean - 1.0).abs() < 3.0 * want / (ests.len() as f64).sqrt(),
                "two {two}: {mean}"
            );
        }
    }

    /// `reset` returns to the built state (the entry says `resets_to_empty`).
    #[test]
    fn reset_returns_to_the_built_state() {
        let ctx = BuildCtx::default();
        let built = InstaMeasure::new(true, InstaConfig::default(), &ctx).unwrap();
        let mut a = built.clone();
        let other = built.clone();
        a.update_batch_u32(&keys(), &vec![1; 200_000]);
        let mut o = other.clone();
        o.update_batch_u32(&keys()[..1000], &[1; 1000]);
        a.merge(&o).unwrap();
        assert!(a.memory_bytes() > built.memory_bytes());
        a.reset();
        assert_eq!(a, built);
    }
}
