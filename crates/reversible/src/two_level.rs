//! TwoLevel: the OpenSketch superspreader / DDoS structure (Yu et al., NSDI'13; verified against
//! harvard-cns/opensketch `taskSuperSpreadersRev`; ALGORITHMS.md 7).
//!
//! Fed with `pair` keys (IPv4 src then dst; 4-tuples and 5-tuples work too, only the addresses
//! are used). The *host* is the source for superspreaders (`Side::Src`) and the destination for
//! DDoS victims (`Side::Dst`); the *peer* is the other address.
//!
//! State: a Count-Min keyed by host whose buckets are bitmaps of peers, and a reversible sketch
//! (modular hashing of the mangled host, [`crate::modular`]) whose buckets are bitmaps of the
//! same shape. A bucket is `bitmaps` bitmaps of `bitmap_bits` bits, each with its own peer hash
//! position; its distinct-peer estimate is the average of the bitmaps' linear-counting
//! estimates b·ln(b/z) (Whang et al.), with z = zero bits. A saturated bitmap (z = 0) reports
//! b·ln(b), the estimate at one zero bit, i.e. "at least this many".
//!
//! Update (idempotent, class B): set the peer's bit in the host's bucket of every row. The weight
//! is ignored and repeats are no-ops, so any order and any aggregation give the same state;
//! merging two hosts' (or cores') structures is a bitwise OR.
//!
//! Query (threshold T, report > T): Rev buckets with estimate > T are heavy; reverse hashing
//! gives candidate hosts; a candidate is reported when the min over the CM rows of its bucket
//! estimate is > T, and that min is the reported distinct-peer count. An epoch with at most
//! 4096 distinct hosts remembers them (`crate::memo`) and applies the same two tests to each
//! instead of reversing: short epochs with thresholds of a few peers would otherwise spend
//! ~100 ms per query on an exploding candidate set. A bucket's bitmap holds
//! the union of its hosts' peers, so a true spreader's buckets are all heavy up to bitmap noise.
//!
//! Default configuration: SketchVisor 7.1 — CM 2 x 4000 buckets, each "two rows with 250
//! counters" read as two 250-bit bitmaps averaged, and a RevSketch of 2 x 4096 buckets (four
//! 8-bit words hashed to 3 bits each). Chosen over the two Agg-Evict variants because their
//! bitmaps (12-bit in the text, 96-bit in the artifact) saturate at about 30 and 440 distinct
//! peers, below the 0.5%-of-hosts thresholds of real traces, while 250-bit bitmaps estimate up to
//! ~1000 peers within a few percent. The Agg-Evict artifact's shape is `cm_rows = 4, cm_width =
//! 65536, bitmaps = 1, bitmap_bits = 96, rev_rows = 4, rev_width = 4096` (3.3 MB: its bitmaps
//! take 12 bytes); `--preset agg-evict` keeps its memory with whole 64-bit words, 128-bit
//! bitmaps in `cm_width = 49152` (3.4 MB).
//! With 2 Rev rows and r = 0 the reversal leaves about 2^8·t^2 candidates for t heavy buckets per
//! row (32 key bits, 24 constrained) which the CM then filters; rev_rows = 4 (r = 1) leaves
//! about t^3/4.
//!
//! IPv6 pairs (32-byte keys) are refused: a 128-bit host cannot be recovered from 12-bit indices.

use algo::{Algorithm, BuildCtx, ConfigError, Dirty, Estimate, MergeError, Side, Task};
use key::{sub_seed, FlowKey, HashFn};
use serde::{Deserialize, Serialize};

use crate::memo::HostMemo;
use crate::modular::{LayoutError, ModularHash, MAX_ROWS};
use crate::{km_index, prefetch, u64_to_key, Detection};

const NAME: &str = "two_level";
/// Every task it can answer: superspreaders built with `Side::Src`, DDoS victims with `Side::Dst`.
const TASKS: &[Task] = &[Task::Superspreaders, Task::Ddos];
/// Distinct sub-seed constant of this algorithm ("TWOL").
const SEED_TAG: u64 = 0x5457_4f4c;
/// Most bitmaps per bucket.
const MAX_BITMAPS: usize = 8;

/// Configuration of [`TwoLevel`]; defaults are SketchVisor's (module docs say why).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TwoLevelConfig {
    /// Count-Min rows keyed by host.
    pub cm_rows: usize,
    /// Buckets per CM row (any value).
    pub cm_width: usize,
    /// Bitmaps per bucket (each with its own peer hash), estimates averaged.
    pub bitmaps: usize,
    /// Bits per bitmap.
    pub bitmap_bits: usize,
    /// Reversible rows keyed by host.
    pub rev_rows: usize,
    /// Buckets per reversible row: 2^b with 4 <= b <= 24 (b/4 bits per address byte).
    pub rev_width: usize,
    /// Reversible rows a candidate may miss. Unset: 1 if rev_rows > 2, else 0.
    pub row_misses: Option<usize>,
    /// Cap on live host prefixes during reverse hashing.
    pub max_candidates: usize,
}

impl Default for TwoLevelConfig {
    fn default() -> Self {
        TwoLevelConfig {
            cm_rows: 2,
            cm_width: 4000,
            bitmaps: 2,
            bitmap_bits: 250,
            // Four reversible rows with no allowed miss, not SketchVisor's two: with two rows,
            // or with a miss allowed, the intersection of heavy buckets admits so many
            // candidates that the cap truncates them once ~10 hosts are heavy (measured on the
            // built-in trace: superspreader recall 0.03 with 2 rows, 1.0 with 4 rows, 0 misses).
            rev_rows: 4,
            rev_width: 4096,
            row_misses: Some(0),
            max_candidates: 1 << 16,
        }
    }
}

fn invalid(field: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        algo: NAME,
        field,
        reason: reason.into(),
    }
}

impl TwoLevelConfig {
    /// Check the fields for `key_len`-byte pair keys; the error names the field.
    pub fn validate(&self, key_len: usize) -> Result<(), ConfigError> {
        if !matches!(key_len, 8 | 12 | 13) {
            return Err(invalid(
                "key_len",
                format!(
                    "{key_len}-byte keys are not supported: two_level needs IPv4 pair keys (8 \
                     bytes; 12/13-byte 4/5-tuples also work); IPv6 hosts cannot be reversed"
                ),
            ));
        }
        if self.cm_rows == 0 || self.cm_rows > MAX_ROWS {
            return Err(invalid("cm_rows", format!("must be 1..={MAX_ROWS}")));
        }
        if self.cm_width == 0 || self.cm_width > 1 << 24 {
            return Err(invalid("cm_width", "must be 1..=2^24"));
        }
        if self.bitmaps == 0 || self.bitmaps > MAX_BITMAPS {
            return Err(invalid("bitmaps", format!("must be 1..={MAX_BITMAPS}")));
        }
        if self.bitmap_bits < 8 || self.bitmap_bits > 1 << 16 {
            return Err(invalid("bitmap_bits", "must be 8..=65536"));
        }
        if let Err(e) = ModularHash::new(0, 4, self.rev_rows, self.rev_width) {
            let field = match e {
                LayoutError::Rows(_) => "rev_rows",
                _ => "rev_width",
            };
            return Err(invalid(field, e.to_string()));
        }
        if let Some(r) = self.row_misses {
            if r >= self.rev_rows {
                return Err(invalid("row_misses", "must be smaller than rev_rows"));
            }
        }
        if self.max_candidates == 0 || self.max_candidates > 1 << 22 {
            return Err(invalid("max_candidates", "must be 1..=2^22"));
        }
        Ok(())
    }

    /// The row-miss count r actually used.
    pub fn misses(&self) -> usize {
        self.row_misses
            .unwrap_or(if self.rev_rows > 2 { 1 } else { 0 })
    }
}

/// TwoLevel state (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TwoLevel {
    cfg: TwoLevelConfig,
    side: Side,
    key_len: usize,
    seed: u64,
    misses: usize,
    host_hash: ModularHash,
    cm_hash: HashFn,
    peer_hash: HashFn,
    /// u64 words per bitmap.
    words: usize,
    /// cm_rows x cm_width buckets of `bitmaps * words` u64.
    cm: Vec<u64>,
    /// rev_rows x rev_width buckets of `bitmaps * words` u64.
    rev: Vec<u64>,
    /// Blocks of `cm` and `rev` written since the last reset: reset and the query visit only
    /// those (a bucket never written estimates 0 peers, never above a threshold).
    cm_dirty: Dirty,
    rev_dirty: Dirty,
    /// The epoch's distinct hosts while they are few: a query then checks them instead of
    /// reversing (see `crate::memo`).
    memo: HostMemo,
    /// Updates ignored because the key length differed from `key_len`.
    skipped: u64,
}

const STEP: usize = 16;

/// Where one update lands: bucket offsets in both parts and the peer's bit per bitmap.
#[derive(Clone, Copy, Default)]
struct Slots {
    /// The host address as an integer.
    host: u32,
    cm: [u32; MAX_ROWS],
    rev: [u32; MAX_ROWS],
    bit: [u32; MAX_BITMAPS],
}

impl algo::CheckState for TwoLevel {
    /// The configuration valid for its key length, the host hash the one its seed makes
    /// (rebuilt and compared), the words per bitmap its bits make, both bucket arrays and
    /// their dirty maps of the configured sizes. (The host memo is rebuilt from its saved set,
    /// capped: `crate::memo`.)
    fn check_state(&self) -> Result<(), String> {
        let c = &self.cfg;
        c.validate(self.key_len).map_err(|e| e.to_string())?;
        let words = c.bitmap_bits.div_ceil(64);
        let bw = c.bitmaps * words;
        let (ncm, nrev) = (c.cm_rows * c.cm_width * bw, c.rev_rows * c.rev_width * bw);
        if self.words != words || self.cm.len() != ncm || self.rev.len() != nrev {
            return Err(format!(
                "{} and {} bucket words of {} a bitmap, the configuration has {ncm} and {nrev} of \
                 {words}",
                self.cm.len(),
                self.rev.len(),
                self.words
            ));
        }
        if self.misses != c.misses() {
            return Err(format!(
                "row misses {}, the configuration's are {}",
                self.misses,
                c.misses()
            ));
        }
        self.cm_dirty.check(ncm, 8)?;
        self.rev_dirty.check(nrev, 8)?;
        let host =
            ModularHash::new(self.seed, 4, c.rev_rows, c.rev_width).map_err(|e| e.to_string())?;
        if host != self.host_hash
            || self.cm_hash != HashFn::new(sub_seed(self.seed, 0x434d))
            || self.peer_hash != HashFn::new(sub_seed(self.seed, 0x5045_4552))
        {
            return Err("hashes other than its seed's".into());
        }
        Ok(())
    }
}

impl TwoLevel {
    pub fn new(cfg: TwoLevelConfig, ctx: &BuildCtx) -> Result<Self, ConfigError> {
        cfg.validate(ctx.key_len)?;
        let seed = sub_seed(ctx.seed, SEED_TAG);
        let host_hash = ModularHash::new(seed, 4, cfg.rev_rows, cfg.rev_width)
            .map_err(|e| invalid("rev_width", e.to_string()))?;
        let words = cfg.bitmap_bits.div_ceil(64);
        let bw = cfg.bitmaps * words;
        Ok(TwoLevel {
            side: ctx.side,
            key_len: ctx.key_len,
            misses: cfg.misses(),
            host_hash,
            cm_hash: HashFn::new(sub_seed(seed, 0x434d)),
            peer_hash: HashFn::new(sub_seed(seed, 0x5045_4552)),
            words,
            cm: vec![0; cfg.cm_rows * cfg.cm_width * bw],
            rev: vec![0; cfg.rev_rows * cfg.rev_width * bw],
            cm_dirty: Dirty::new(cfg.cm_rows * cfg.cm_width * bw, 8),
            rev_dirty: Dirty::new(cfg.rev_rows * cfg.rev_width * bw, 8),
            memo: HostMemo::new(),
            skipped: 0,
            seed,
            cfg,
        })
    }

    pub fn config(&self) -> &TwoLevelConfig {
        &self.cfg
    }

    pub fn side(&self) -> Side {
        self.side
    }

    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    #[inline]
    fn bucket_words(&self) -> usize {
        self.cfg.bitmaps * self.words
    }

    /// (host, peer) addresses of a key, or `None` for a key this structure does not take.
    /// The IPv4 pair, 4- and 5-tuple keys it takes all start with the source and destination
    /// addresses (`FlowKey::src_part`, `dst_part`), read here in place: building the two
    /// 4-byte `FlowKey`s cost more than the rest of the hashing.
    #[inline]
    fn split(&self, key: &FlowKey) -> Option<([u8; 4], [u8; 4])> {
        if key.len() != self.key_len {
            return None;
        }
        let b = key.as_bytes();
        let s: [u8; 4] = b.get(..4)?.try_into().ok()?;
        let d: [u8; 4] = b.get(4..8)?.try_into().ok()?;
        Some(match self.side {
            Side::Src => (s, d),
            Side::Dst => (d, s),
        })
    }

    /// CM and Rev bucket offsets (in u64 words) of a host. The CM hash is the host's
    /// `FlowKey` hash (xxh3 of its 4 bytes).
    #[inline]
    fn host_slots(&self, host: [u8; 4], s: &mut Slots) {
        let bw = self.bucket_words();
        let h = self.cm_hash.hash_bytes(&host);
        for (i, slot) in s.cm.iter_mut().enumerate().take(self.cfg.cm_rows) {
            *slot = ((i * self.cfg.cm_width + km_index(h, i, self.cfg.cm_width)) * bw) as u32;
        }
        let x = u64::from(u32::from_be_bytes(host));
        s.host = x as u32;
        let mk = self.host_hash.mangle(x);
        for (i, slot) in s.rev.iter_mut().enumerate().take(self.cfg.rev_rows) {
            *slot = ((i * self.cfg.rev_width + self.host_hash.index(i, mk)) * bw) as u32;
        }
    }

    #[inline]
    fn slots(&self, host: [u8; 4], peer: [u8; 4], s: &mut Slots) {
        self.host_slots(host, s);
        // One xxh3 of the peer; bitmap k > 0 takes a splitmix remix of it as its own position
        // hash (SketchVisor's "different hashes" per bitmap of a bucket).
        let hp = self.peer_hash.hash_bytes(&peer);
        let bits = self.cfg.bitmap_bits;
        for (k, b) in s.bit.iter_mut().enumerate().take(self.cfg.bitmaps) {
            let h = if k == 0 {
                hp
            } else {
                key::mix64(hp ^ k as u64)
            };
            *b = (k * self.words * 64 + key::reduce(h, bits)) as u32;
        }
    }

    #[inline]
    fn apply(&mut self, s: &Slots) {
        let bits = &s.bit[..self.cfg.bitmaps];
        for &base in &s.cm[..self.cfg.cm_rows] {
            set_bits(&mut self.cm, &mut self.cm_dirty, base as usize, bits);
        }
        for &base in &s.rev[..self.cfg.rev_rows] {
            set_bits(&mut self.rev, &mut self.rev_dirty, base as usize, bits);
        }
        self.memo.insert(s.host);
    }

    /// Distinct-peer estimate of the bucket at word offset `base` of `arr`.
    fn bucket_estimate(&self, arr: &[u64], base: usize) -> f64 {
        let b = self.cfg.bitmap_bits as f64;
        let mut sum = 0.0;
        for k in 0..self.cfg.bitmaps {
            let from = base + k * self.words;
            let ones: u32 = arr
                .get(from..from + self.words)
                .unwrap_or(&[])
                .iter()
                .map(|w| w.count_ones())
                .sum();
            let z = (b - f64::from(ones)).max(1.0);
            sum += b * (b / z).ln();
        }
        sum / self.cfg.bitmaps as f64
    }

    /// Estimated distinct peers of `host` (a 4-byte address): min over the CM rows.
    pub fn estimate(&self, host: &FlowKey) -> f64 {
        if host.len() != 4 {
            return 0.0;
        }
        let mut s = Slots::default();
        let Ok(host) = <[u8; 4]>::try_from(host.as_bytes()) else {
            return 0.0;
        };
        self.host_slots(host, &mut s);
        s.cm[..self.cfg.cm_rows]
            .iter()
            .map(|&b| self.bucket_estimate(&self.cm, b as usize))
            .fold(f64::INFINITY, f64::min)
    }

    /// Hosts with more than `threshold` estimated distinct peers, with the truncation flag: the
    /// epoch's hosts checked one by one while they are few, else reverse hashing.
    pub fn detect(&self, threshold: u64) -> Detection {
        match self.memo.hosts() {
            Some(hosts) => self.detect_among(&hosts, threshold),
            None => self.detect_by_reversal(threshold),
        }
    }

    /// Is row `i`'s Rev bucket at word offset `base` heavy (estimate > t)?
    fn heavy_bucket(&self, base: u32, t: f64) -> bool {
        self.bucket_estimate(&self.rev, base as usize) > t
    }

    /// The reversal's test applied to known hosts: heavy Rev buckets in at least `rev_rows -
    /// misses` rows, then the CM estimate > T. Every host this reports, reversal reports too
    /// (when not truncated); reversal can add hosts never seen (phantoms of the heavy-bucket
    /// intersection).
    fn detect_among(&self, hosts: &[u32], threshold: u64) -> Detection {
        let t = threshold as f64;
        let mut s = Slots::default();
        let flows = hosts
            .iter()
            .filter_map(|&h| {
                self.host_slots(h.to_be_bytes(), &mut s);
                let heavy = s.rev[..self.cfg.rev_rows]
                    .iter()
                    .filter(|&&b| self.heavy_bucket(b, t))
                    .count();
                if heavy + self.misses < self.cfg.rev_rows {
                    return None;
                }
                let host = u64_to_key(u64::from(h), 4);
                let e = self.estimate(&host);
                confirmed(e, t).then(|| (host, e.round() as u64))
            })
            .collect();
        Detection::sorted(flows, false)
    }

    /// Reverse hashing of the heavy Rev buckets, candidates confirmed by the CM estimate.
    fn detect_by_reversal(&self, threshold: u64) -> Detection {
        let t = threshold as f64;
        let (bw, w) = (self.bucket_words(), self.cfg.rev_width);
        // A bucket never written estimates 0 peers, never more than T, so only written buckets
        // are scanned; they come in ascending order, so each row's list is sorted as a full
        // scan would give it.
        let mut heavy: Vec<Vec<u32>> = vec![Vec::new(); self.cfg.rev_rows];
        for j in self.rev_dirty.items(bw) {
            if self.heavy_bucket((j * bw) as u32, t) {
                if let Some(row) = heavy.get_mut(j / w) {
                    row.push((j % w) as u32);
                }
            }
        }
        let rev = self
            .host_hash
            .reverse(&heavy, self.misses, self.cfg.max_candidates);
        let flows = rev
            .keys
            .iter()
            .filter_map(|&x| {
                let host = u64_to_key(x, 4);
                let e = self.estimate(&host);
                confirmed(e, t).then(|| (host, e.round() as u64))
            })
            .collect();
        Detection::sorted(flows, rev.truncated)
    }

    /// Every written bucket's bitmaps, the Count-Min part's then the reversible part's, in a
    /// fixed order, for restoring the peers a fast path took (`visor::bitmap`): `f(part, row,
    /// bitmap)` with `part` 0 for the Count-Min and 1 for the reversible sketch, `row` the
    /// bucket's row, `bitmap` one bitmap's words. `f` may set bits; bits it clears are set back
    /// and bits past `bitmap_bits` cleared, so the structure only gains peers within its shape
    /// (a bucket's host set, the memo, is unchanged: restoring adds peers, not hosts).
    pub fn grow_bitmaps(&mut self, mut f: impl FnMut(usize, usize, &mut [u64])) {
        let (bw, words) = (self.bucket_words(), self.words);
        let tail = self.cfg.bitmap_bits % 64;
        let last_mask = if tail == 0 {
            u64::MAX
        } else {
            (1u64 << tail) - 1
        };
        let parts = [
            (&mut self.cm, &self.cm_dirty, self.cfg.cm_width),
            (&mut self.rev, &self.rev_dirty, self.cfg.rev_width),
        ];
        let mut before: Vec<u64> = Vec::with_capacity(words);
        for (part, (arr, dirty, width)) in parts.into_iter().enumerate() {
            let written: Vec<usize> = dirty.items(bw).collect();
            for j in written {
                for k in 0..self.cfg.bitmaps {
                    let from = j * bw + k * words;
                    let Some(bitmap) = arr.get_mut(from..from + words) else {
                        continue;
                    };
                    before.clear();
                    before.extend_from_slice(bitmap);
                    f(part, j / width.max(1), bitmap);
                    for (w, b) in bitmap.iter_mut().zip(&before) {
                        *w |= b;
                    }
                    if let Some(w) = bitmap.last_mut() {
                        *w &= last_mask;
                    }
                }
            }
        }
    }

    fn compatible(&self, o: &TwoLevel) -> bool {
        self.cfg == o.cfg && self.side == o.side && self.key_len == o.key_len && self.seed == o.seed
    }
}

/// A host's CM estimate `e` confirms it as above `t` peers when its rounded value is: the
/// linear-counting estimate b·ln(b/z) is biased up by about n²/2b at small n (6.07 for 6 peers in a
/// 250-bit bitmap), so comparing the raw value made every host with exactly T peers a false
/// positive at the small thresholds of short epochs and small traces.
fn confirmed(e: f64, t: f64) -> bool {
    e.round() > t
}

#[inline]
fn set_bits(arr: &mut [u64], dirty: &mut Dirty, base: usize, bits: &[u32]) {
    // One mark per bucket, on its first word; reset zeroes whole buckets.
    dirty.mark(base);
    for &p in bits {
        if let Some(w) = arr.get_mut(base + p as usize / 64) {
            *w |= 1 << (p % 64);
        }
    }
}

impl Algorithm for TwoLevel {
    fn name(&self) -> &'static str {
        NAME
    }

    fn tasks(&self) -> &'static [Task] {
        match self.side {
            Side::Src => &[Task::Superspreaders],
            Side::Dst => &[Task::Ddos],
        }
    }

    /// The weight is ignored (distinct counting).
    fn update(&mut self, key: &FlowKey, _weight: u64) {
        let Some((host, peer)) = self.split(key) else {
            self.skipped += 1;
            return;
        };
        let mut s = Slots::default();
        self.slots(host, peer, &mut s);
        self.apply(&s);
    }

    /// Hash a step of 16 keys and prefetch their buckets' first words before setting bits.
    fn update_batch(&mut self, keys: &[FlowKey], weights: &[u64]) {
        let mut slots = [Slots::default(); STEP];
        let mut ok = [false; STEP];
        for (ks, _) in keys.chunks(STEP).zip(weights.chunks(STEP)) {
            for (j, k) in ks.iter().enumerate() {
                ok[j] = false;
                if let Some((host, peer)) = self.split(k) {
                    ok[j] = true;
                    self.slots(host, peer, &mut slots[j]);
                    // The words the bits land in: a bucket (64 B by default) need not sit in
                    // one cache line.
                    let bits = &slots[j].bit[..self.cfg.bitmaps];
                    for &b in &slots[j].cm[..self.cfg.cm_rows] {
                        for &p in bits {
                            prefetch(self.cm.as_ptr().wrapping_add((b + p / 64) as usize));
                        }
                    }
                    for &b in &slots[j].rev[..self.cfg.rev_rows] {
                        for &p in bits {
                            prefetch(self.rev.as_ptr().wrapping_add((b + p / 64) as usize));
                        }
                    }
                }
            }
            for (j, s) in slots.iter().enumerate().take(ks.len()) {
                if ok[j] {
                    self.apply(s);
                } else {
                    self.skipped += 1;
                }
            }
        }
    }

    fn reset(&mut self) {
        let bw = self.bucket_words();
        self.cm_dirty.clear_items_in(&mut self.cm, bw);
        self.rev_dirty.clear_items_in(&mut self.rev, bw);
        self.memo.clear();
        self.skipped = 0;
    }

    fn memory_bytes(&self) -> usize {
        8 * (self.cm.len() + self.rev.len())
            + self.cfg.rev_rows * 4 * 256 * (4 + 1)
            + self.cm_dirty.memory_bytes()
            + self.rev_dirty.memory_bytes()
            + HostMemo::memory_bytes()
    }

    fn spreaders(&self, threshold: u64) -> Option<Vec<Estimate>> {
        Some(self.detect(threshold).flows)
    }

    fn merge(&mut self, other: &dyn Algorithm) -> Result<(), MergeError> {
        let o = algo::merge_peer(self, other, |o| self.compatible(o))?;
        for (a, b) in self.cm.iter_mut().zip(&o.cm) {
            *a |= *b;
        }
        for (a, b) in self.rev.iter_mut().zip(&o.rev) {
            *a |= *b;
        }
        self.cm_dirty.merge(&o.cm_dirty);
        self.rev_dirty.merge(&o.rev_dirty);
        self.memo.merge(&o.memo);
        self.skipped += o.skipped;
        Ok(())
    }
}

/// This algorithm's facts, listed in the `catalog` crate.
pub const ENTRY: algo::Entry = algo::Entry {
    name: NAME,
    tasks: TASKS,
    fit: algo::KeyFit::Exact,
    build: |p, ctx| algo::build_with(NAME, p, |c| TwoLevel::new(c, ctx)),
    // Exact: both bitmap arrays, allocated at construction, and the host hash's inverse tables
    // (as `memory_bytes` counts them).
    memory: |p, ctx| {
        algo::Entry::memory_with(NAME, p, |c: TwoLevelConfig| {
            c.validate(ctx.key_len)?;
            let bw = (c.bitmaps * c.bitmap_bits.div_ceil(64)) as u64;
            let cells = (c.cm_rows * c.cm_width + c.rev_rows * c.rev_width) as u64;
            let dirty = algo::Dirty::bytes_for(c.cm_rows * c.cm_width * bw as usize, 8)
                + algo::Dirty::bytes_for(c.rev_rows * c.rev_width * bw as usize, 8);
            // u64 bitmap words per bucket, the host hash's inverse tables, the written-block
            // maps, the short-epoch host memo.
            Ok(8 * cells * bw
                + c.rev_rows as u64 * 4 * 256 * (4 + 1)
                + dirty
                + HostMemo::memory_bytes() as u64)
        })
    },
    defaults: algo::defaults_of::<TwoLevelConfig>,
    flow_size_only: "",
    resets_to_empty: true,
    save: algo::save_state::<TwoLevel>,
    load: |b| algo::load_state::<TwoLevel>(NAME, b),
    // ns per update, u32 / FlowKey path: `cargo run --release -p catalog --example update_costs`.
    cost: algo::UpdateCost {
        u32_ns: 40.05,
        wide_ns: 40.05,
        behind: 1.00,
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_pcg::Pcg64;

    fn ctx(seed: u64, side: Side) -> BuildCtx {
        BuildCtx {
            seed,
            key_len: 8,
            side,
        }
    }

    fn ip(x: u64) -> [u8; 4] {
        (key::mix64(x) as u32).to_be_bytes()
    }

    fn pair(host: [u8; 4], peer: [u8; 4], side: Side) -> FlowKey {
        let (s, d) = match side {
            Side::Src => (host, peer),
            Side::Dst => (peer, host),
        };
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&s);
        b[4..].copy_from_slice(&d);
        FlowKey::from_bytes(&b).unwrap_or(FlowKey::EMPTY)
    }

    /// 10 planted hosts with 500 distinct peers each, 5000 background hosts with 1..20 peers;
    /// every pair repeated 1..4 times, shuffled. Returns the stream and the planted hosts.
    fn stream(side: Side, seed: u64) -> (Vec<(FlowKey, u64)>, Vec<FlowKey>) {
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut out = Vec::new();
        let mut planted = Vec::new();
        for h in 0..10u64 {
            let host = ip(1_000_000 + h);
            planted.push(FlowKey::from_bytes(&host).unwrap_or(FlowKey::EMPTY));
            for p in 0..500u64 {
                let k = pair(host, ip(h * 100_000 + p), side);
                for _ in 0..rng.gen_range(1..4) {
                    out.push((k, rng.gen_range(40..1500)));
                }
            }
        }
        for h in 0..5000u64 {
            let host = ip(2_000_000 + h);
            for _ in 0..rng.gen_range(1..20) {
                let k = pair(host, ip(rng.gen_range(0..50_000)), side);
                out.push((k, 1));
            }
        }
        for i in (1..out.len()).rev() {
            let j = rng.gen_range(0..=i);
            out.swap(i, j);
        }
        (out, planted)
    }

    /// `grow_bitmaps` visits the written buckets only, and its closure can neither clear a bit
    /// nor set one past `bitmap_bits` (250 in a 4-word bitmap): the estimates only grow.
    #[test]
    fn grow_bitmaps_only_adds_peers_within_the_shape() {
        let mut s = TwoLevel::new(TwoLevelConfig::default(), &ctx(3, Side::Src)).unwrap();
        let (st, planted) = stream(Side::Src, 3);
        feed(&mut s, &st);
        let before: Vec<f64> = planted.iter().map(|h| s.estimate(h)).collect();
        let mut visited = 0usize;
        s.grow_bitmaps(|_, _, bm| {
            visited += 1;
            bm[0] = 0;
            bm[bm.len() - 1] = u64::MAX;
        });
        let (c, words) = (s.config().clone(), s.words);
        assert!(
            visited > 0
                && visited < (c.cm_rows * c.cm_width + c.rev_rows * c.rev_width) * c.bitmaps
        );
        for (h, b) in planted.iter().zip(&before) {
            assert!(s.estimate(h) >= *b, "{h}: {} < {b}", s.estimate(h));
        }
        let tail = c.bitmap_bits % 64;
        for bm in s.cm.chunks(words) {
            assert_eq!(bm[words - 1] >> tail, 0, "bits past bitmap_bits set");
        }
    }

    fn feed(s: &mut TwoLevel, st: &[(FlowKey, u64)]) {
        let (k, w): (Vec<FlowKey>, Vec<u64>) = st.iter().copied().unzip();
        s.update_batch(&k, &w);
    }

    /// The update reads the host and peer addresses in place and hashes their bytes: the same
    /// addresses, and the same hashes, as the 4-byte `FlowKey`s of `src_part` / `dst_part`.
    #[test]
    fn addresses_in_place_are_the_key_parts() {
        for key_len in [8usize, 12, 13] {
            for side in [Side::Src, Side::Dst] {
                let c = BuildCtx {
                    seed: 3,
                    key_len,
                    side,
                };
                let s = TwoLevel::new(TwoLevelConfig::default(), &c).unwrap();
                for i in 0..100u64 {
                    let b: Vec<u8> = (0..key_len as u64)
                        .map(|j| key::mix64(i ^ j) as u8)
                        .collect();
                    let k = FlowKey::from_bytes(&b).unwrap();
                    let (src, dst) = (k.src_part().unwrap(), k.dst_part().unwrap());
                    let (host, peer) = s.split(&k).unwrap();
                    let want = if side == Side::Src {
                        (src, dst)
                    } else {
                        (dst, src)
                    };
                    assert_eq!(
                        (&host[..], &peer[..]),
                        (want.0.as_bytes(), want.1.as_bytes())
                    );
                    assert_eq!(s.cm_hash.hash_bytes(&host), s.cm_hash.hash(&want.0));
                    assert_eq!(s.peer_hash.hash_bytes(&peer), s.peer_hash.hash(&want.1));
                }
            }
        }
    }

    #[test]
    fn finds_superspreaders_and_ddos_victims() {
        for side in [Side::Src, Side::Dst] {
            for cfg in [
                TwoLevelConfig::default(),
                TwoLevelConfig {
                    rev_rows: 4,
                    ..TwoLevelConfig::default()
                },
            ] {
                let (st, planted) = stream(side, 7);
                let mut s = TwoLevel::new(cfg, &ctx(3, side)).unwrap();
                feed(&mut s, &st);
                let d = s.detect(250);
                assert!(!d.truncated);
                for h in &planted {
                    let (_, e) = d
                        .flows
                        .iter()
                        .find(|(k, _)| k == h)
                        .unwrap_or_else(|| panic!("{side:?}: missed {h}"));
                    assert!((*e as f64 - 500.0).abs() <= 100.0, "{side:?}: estimate {e}");
                }
                assert!(d.flows.len() <= planted.len() + 2, "{:?}", d.flows);
                let task = if side == Side::Src {
                    Task::Superspreaders
                } else {
                    Task::Ddos
                };
                assert_eq!(s.tasks(), &[task]);
                assert_eq!(s.spreaders(250).unwrap(), d.flows);
            }
        }
    }

    /// The reversal visits only written blocks; with every block marked it visits all buckets,
    /// the plain full scan: both answer the same. A short epoch's memo answers what the reversal
    /// answers among the hosts that were seen (no phantoms), for tiny and full epochs.
    #[test]
    fn written_block_scan_and_memo_agree_with_the_full_reversal() {
        let (st, _) = stream(Side::Src, 13);
        let c = ctx(5, Side::Src);
        let mut memo_used = 0;
        for n in [10usize, 500, 3_000, st.len()] {
            let mut s = TwoLevel::new(TwoLevelConfig::default(), &c).unwrap();
            feed(&mut s, &st[..n]);
            let mut full = s.clone();
            full.cm_dirty.mark_all();
            full.rev_dirty.mark_all();
            let seen: Vec<FlowKey> = st[..n]
                .iter()
                .filter_map(|(k, _)| s.split(k).and_then(|(h, _)| FlowKey::from_bytes(&h)))
                .collect();
            for t in [0u64, 1, 5, 50, 200] {
                let rev = s.detect_by_reversal(t);
                assert_eq!(rev, full.detect_by_reversal(t), "n {n} t {t}");
                let got = s.detect(t);
                if let Some(hosts) = s.memo.hosts() {
                    memo_used += 1;
                    let mut distinct = seen.clone();
                    distinct.sort_unstable();
                    distinct.dedup();
                    assert_eq!(hosts.len(), distinct.len());
                    if !rev.truncated {
                        let want: Vec<_> = rev
                            .flows
                            .iter()
                            .filter(|(h, _)| seen.contains(h))
                            .copied()
                            .collect();
                        assert_eq!(got.flows, want, "n {n} t {t}");
                    }
                } else {
                    assert_eq!(got, rev);
                }
            }
            // Reset of either leaves a fresh structure, marks and memo included.
            s.reset();
            full.reset();
            let fresh = TwoLevel::new(TwoLevelConfig::default(), &c).unwrap();
            assert_eq!(s, fresh);
            assert_eq!(full, fresh);
        }
        assert!(memo_used >= 10, "{memo_used}");
    }

    #[test]
    fn idempotent_merge_batch_and_aggregation() {
        let (st, _) = stream(Side::Src, 9);
        let c = ctx(5, Side::Src);
        let cfg = TwoLevelConfig::default();
        let mut whole = TwoLevel::new(cfg.clone(), &c).unwrap();
        for &(k, w) in &st {
            whole.update(&k, w);
        }
        let mut batch = TwoLevel::new(cfg.clone(), &c).unwrap();
        feed(&mut batch, &st);
        assert_eq!(batch, whole);
        // OR of two halves equals the structure of the union.
        let (a, b) = st.split_at(st.len() / 2);
        let mut sa = TwoLevel::new(cfg.clone(), &c).unwrap();
        let mut sb = sa.clone();
        feed(&mut sa, a);
        feed(&mut sb, b);
        sa.merge(&sb).unwrap();
        assert_eq!(sa, whole);
        // One aggregated update per distinct pair (weight = its total) equals the unit stream.
        let mut agg: Vec<(FlowKey, u64)> = st.clone();
        agg.sort_unstable_by_key(|p| p.0);
        agg.dedup_by(|x, y| {
            if x.0 == y.0 {
                y.1 += x.1;
                true
            } else {
                false
            }
        });
        let mut sagg = TwoLevel::new(cfg.clone(), &c).unwrap();
        feed(&mut sagg, &agg);
        assert_eq!(sagg, whole);
        let units: Vec<(FlowKey, u64)> = st.iter().map(|&(k, _)| (k, 1)).collect();
        let mut su = TwoLevel::new(cfg.clone(), &c).unwrap();
        feed(&mut su, &units);
        assert_eq!(su, whole);
        // Seeds and sides must match.
        let mut other = TwoLevel::new(cfg.clone(), &ctx(6, Side::Src)).unwrap();
        feed(&mut other, &st);
        assert_ne!(other, whole);
        assert_eq!(whole.merge(&other), Err(MergeError::Mismatch(NAME)));
        let dst = TwoLevel::new(cfg.clone(), &ctx(5, Side::Dst)).unwrap();
        assert_eq!(whole.merge(&dst), Err(MergeError::Mismatch(NAME)));
        let mut r = whole.clone();
        r.reset();
        assert_eq!(r, TwoLevel::new(cfg, &c).unwrap());
    }

    #[test]
    fn bitmap_estimate_tracks_distinct_peers() {
        let mut s = TwoLevel::new(TwoLevelConfig::default(), &ctx(1, Side::Src)).unwrap();
        let host = ip(42);
        for p in 0..300 {
            for _ in 0..3 {
                s.update(&pair(host, ip(p + 7), Side::Src), 1);
            }
        }
        let e = s.estimate(&FlowKey::from_bytes(&host).unwrap());
        assert!((e - 300.0).abs() < 45.0, "{e}");
        // Saturation reports a finite "at least" value, never infinity or NaN.
        for p in 0..100_000 {
            s.update(&pair(host, ip(p + 1_000_000), Side::Src), 1);
        }
        let e = s.estimate(&FlowKey::from_bytes(&host).unwrap());
        assert!((e - 250.0 * 250f64.ln()).abs() < 1e-6, "{e}");
    }

    #[test]
    fn bad_input_and_config() {
        let mut s = TwoLevel::new(TwoLevelConfig::default(), &ctx(1, Side::Src)).unwrap();
        s.update(&FlowKey::from_u32(5), 1);
        s.update_batch(&[FlowKey::EMPTY], &[1]);
        assert_eq!(s.skipped(), 2);
        assert!(s.detect(0).flows.is_empty());
        let e = |cfg: TwoLevelConfig, key_len| {
            TwoLevel::new(
                cfg,
                &BuildCtx {
                    key_len,
                    ..ctx(1, Side::Src)
                },
            )
            .err()
            .unwrap()
            .to_string()
        };
        let d = TwoLevelConfig::default;
        assert!(e(d(), 32).contains("key_len"));
        assert!(e(d(), 4).contains("key_len"));
        let w = TwoLevelConfig {
            rev_width: 4000,
            ..d()
        };
        assert!(e(w, 8).contains("rev_width"));
        let b = TwoLevelConfig {
            bitmap_bits: 0,
            ..d()
        };
        assert!(e(b, 8).contains("bitmap_bits"));
        assert!(TwoLevel::new(
            d(),
            &BuildCtx {
                key_len: 13,
                ..ctx(1, Side::Dst)
            }
        )
        .is_ok());
    }
}
