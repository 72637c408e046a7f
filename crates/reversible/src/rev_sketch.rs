//! Reversible Sketch (Schweller et al., IMC'04 and ToN'07; ALGORITHMS.md 4).
//!
//! State: H rows of `width` u32 counters indexed by the modular hash of the mangled key (layout in
//! [`crate::modular`]), plus a separate *non-modular* verification Count-Min (ToN section V and
//! ElasticSketch use a k-ary / CM sketch for this): modular hashing makes keys that share words
//! share sub-indices, so the reversible rows alone confirm candidates poorly; the verification
//! rows use one xxh3 hash of the raw key.
//!
//! Update (linear, ALGORITHMS.md 0 class A): `C[i][h_i(x)] += w` in every row of both parts.
//! Counters are saturating u32 (see `crate::w32`).
//!
//! Heavy hitters(T): buckets with C >= T are heavy; reverse hashing returns every key consistent
//! with heavy buckets in >= H - r rows; a key is reported when min over the reversible rows *and*
//! the verification rows is >= T. Every true heavy hitter has all its buckets >= T (a CM
//! over-estimates), so it is recovered unless the candidate cap truncates the search.
//!
//! Heavy changers(T): Δ = S_t - S_{t-1} (same seeds), the k-ary adjustment
//! v = (Δ[i][b] - ΣΔ_i/m)/(1 - 1/m) (Krishnamurthy et al. IMC'03, used by the ToN paper) makes each
//! bucket an unbiased estimate of its key's change; buckets with |v| >= T are heavy, r rows may
//! miss (cancellation in a bucket), and candidates are confirmed by the median of the adjusted
//! verification buckets, |median| >= T.
//!
//! Row misses r: ToN uses r = 1; ALGORITHMS.md r = 0 when H <= 2. For 8-byte keys r = 1 lets the
//! candidate set grow like t^(H-1)·2^(64 - 16(H-1)) for t heavy buckets per row (4 x 65536: 2^16
//! t^3), so the automatic choice (`row_misses` unset) is r = 1 only for 4-byte keys with H > 2,
//! else r = 0. The default is r = 0 even for 4-byte keys: with r = 1 an epoch with hundreds of
//! heavy-change buckets per row overflows the candidate cap during reversal (heavy-changer recall
//! 0.38 at 10 k flows, Zipf 0.6), while r = 0 keeps F1 >= 0.94 from 10 k to 1 M flows (issue 12).

use algo::{Algorithm, BuildCtx, ConfigError, Dirty, Estimate, MergeError, Task};
use key::{sub_seed, FlowKey, HashFn};
use serde::{Deserialize, Serialize};

use crate::modular::{LayoutError, ModularHash, MAX_ROWS};
use crate::{key_to_u64, km_index, prefetch, u64_to_key, w32, Detection};

const NAME: &str = "rev_sketch";
/// The tasks it answers.
const TASKS: &[Task] = &[Task::HeavyHitters, Task::HeavyChangers];
/// Distinct sub-seed constant of this algorithm ("REVS").
const SEED_TAG: u64 = 0x5245_5653;

/// Configuration of [`RevSketch`]. Defaults: Agg-Evict 4.1, 4 x 65536 u32 counters (4-byte keys:
/// four 8-bit words hashed to 4 bits each); verification CM of the same size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RevSketchConfig {
    /// Reversible rows H.
    pub rows: usize,
    /// Buckets per reversible row: a power of two 2^b, one sub-index bit at least per key byte.
    pub width: usize,
    /// Rows a candidate may miss (r). Default 0 (module docs); unset: 1 for 4-byte keys with
    /// rows > 2 (ToN), else 0.
    pub row_misses: Option<usize>,
    /// Rows of the verification Count-Min; 0 disables it (candidates are then confirmed by the
    /// reversible rows alone).
    pub verify_rows: usize,
    /// Buckets per verification row (any value >= 2).
    pub verify_width: usize,
    /// Cap on live key prefixes during reverse hashing (bounds query time and memory).
    pub max_candidates: usize,
}

impl Default for RevSketchConfig {
    fn default() -> Self {
        RevSketchConfig {
            rows: 4,
            width: 65536,
            row_misses: Some(0),
            verify_rows: 4,
            verify_width: 65536,
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

impl RevSketchConfig {
    /// Check the fields for keys of `key_len` bytes; the error names the field.
    pub fn validate(&self, key_len: usize) -> Result<(), ConfigError> {
        if key_len != 4 && key_len != 8 {
            // The key kinds of this length, so the refusal names what the user asked for.
            let kinds: Vec<String> = key::KeyKind::ALL
                .into_iter()
                .filter(|k| k.len(false) == key_len || k.len(true) == key_len)
                .map(|k| format!("--key {k}"))
                .collect();
            let kinds = if kinds.is_empty() {
                String::new()
            } else {
                format!(" ({})", kinds.join(", "))
            };
            return Err(invalid(
                "key_len",
                format!(
                    "{key_len}-byte keys{kinds} are not supported: reverse hashing needs 4-byte \
                     (--key src or dst) or 8-byte (--key pair) IPv4 keys. A 13-byte 5-tuple \
                     under rows x 16-bit bucket indices is constrained by 64 of its 104 bits \
                     (4 rows), leaving ~2^40 consistent candidates per heavy-bucket \
                     combination; deltoid finds heavy hitters and changers on five-tuples"
                ),
            ));
        }
        if self.rows == 0 || self.rows > MAX_ROWS {
            return Err(invalid("rows", format!("must be 1..={MAX_ROWS}")));
        }
        if let Err(e) = ModularHash::new(0, key_len, self.rows, self.width) {
            let field = match e {
                LayoutError::KeyLen(_) => "key_len",
                LayoutError::Rows(_) => "rows",
                LayoutError::Width { .. } => "width",
            };
            return Err(invalid(field, e.to_string()));
        }
        if let Some(r) = self.row_misses {
            if r >= self.rows {
                return Err(invalid("row_misses", "must be smaller than rows"));
            }
        }
        if self.verify_rows > MAX_ROWS {
            return Err(invalid("verify_rows", format!("must be 0..={MAX_ROWS}")));
        }
        if self.verify_rows > 0 && (self.verify_width < 2 || self.verify_width > 1 << 26) {
            return Err(invalid("verify_width", "must be 2..=2^26"));
        }
        if self.max_candidates == 0 || self.max_candidates > 1 << 22 {
            return Err(invalid("max_candidates", "must be 1..=2^22"));
        }
        Ok(())
    }

    /// The row-miss count r actually used.
    pub fn misses(&self, key_len: usize) -> usize {
        self.row_misses
            .unwrap_or(if key_len == 4 && self.rows > 2 { 1 } else { 0 })
    }
}

/// Reversible Sketch state (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevSketch {
    cfg: RevSketchConfig,
    key_len: usize,
    seed: u64,
    misses: usize,
    hash: ModularHash,
    /// rows x width, row-major.
    counters: Vec<u32>,
    verify_hash: HashFn,
    /// verify_rows x verify_width, row-major.
    verify: Vec<u32>,
    /// Blocks of `counters` and `verify` written since the last reset: reset and the epoch-end
    /// scans visit only those (see `algo::Dirty`).
    dirty: Dirty,
    verify_dirty: Dirty,
    /// Updates ignored because the key length differed from `key_len`.
    skipped: u64,
}

/// Keys handled per step of the batch path (indices of a step stay on the stack).
const STEP: usize = 16;

impl algo::CheckState for RevSketch {
    /// The configuration valid for its key length, the modular hash the one its seed, key
    /// length and shape make (rebuilt and compared: a few hundred KB at most once the shape is
    /// valid), both counter arrays and their dirty maps of the configured sizes. A forged
    /// `rows` of 2^36 made the heavy-hitter query allocate 64 GiB and abort.
    fn check_state(&self) -> Result<(), String> {
        let c = &self.cfg;
        c.validate(self.key_len).map_err(|e| e.to_string())?;
        if self.misses != c.misses(self.key_len) {
            return Err(format!(
                "row misses {}, the configuration's are {}",
                self.misses,
                c.misses(self.key_len)
            ));
        }
        let (n, v) = (c.rows * c.width, c.verify_rows * c.verify_width);
        if self.counters.len() != n || self.verify.len() != v {
            return Err(format!(
                "{} counters and {} verification counters, the configuration has {n} and {v}",
                self.counters.len(),
                self.verify.len()
            ));
        }
        self.dirty.check(n, 4)?;
        self.verify_dirty.check(v, 4)?;
        let hash = ModularHash::new(self.seed, self.key_len, c.rows, c.width)
            .map_err(|e| e.to_string())?;
        if hash != self.hash || self.verify_hash != HashFn::new(sub_seed(self.seed, 0x5645_5249)) {
            return Err("hashes other than its seed's".into());
        }
        Ok(())
    }
}

impl RevSketch {
    pub fn new(cfg: RevSketchConfig, ctx: &BuildCtx) -> Result<Self, ConfigError> {
        cfg.validate(ctx.key_len)?;
        let seed = sub_seed(ctx.seed, SEED_TAG);
        let hash = ModularHash::new(seed, ctx.key_len, cfg.rows, cfg.width)
            .map_err(|e| invalid("width", e.to_string()))?;
        Ok(RevSketch {
            misses: cfg.misses(ctx.key_len),
            key_len: ctx.key_len,
            seed,
            counters: vec![0; cfg.rows * cfg.width],
            dirty: Dirty::new(cfg.rows * cfg.width, 4),
            verify_hash: HashFn::new(sub_seed(seed, 0x5645_5249)),
            verify: vec![0; cfg.verify_rows * cfg.verify_width],
            verify_dirty: Dirty::new(cfg.verify_rows * cfg.verify_width, 4),
            skipped: 0,
            hash,
            cfg,
        })
    }

    pub fn config(&self) -> &RevSketchConfig {
        &self.cfg
    }

    /// Updates ignored because their key had the wrong length.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    #[inline]
    fn row_slots(&self, key: &FlowKey, idx: &mut [u32; MAX_ROWS], vidx: &mut [u32; MAX_ROWS]) {
        self.row_slots_of(key, idx, vidx);
    }

    /// [`Self::row_slots`] of a key in either representation (a 4-byte key as a `FlowKey` or
    /// as its big-endian u32: same integer, same verification hash, so the same slots).
    #[inline(always)]
    fn row_slots_of<K: RevKey>(
        &self,
        key: &K,
        idx: &mut [u32; MAX_ROWS],
        vidx: &mut [u32; MAX_ROWS],
    ) {
        let mk = self.hash.mangle(key.int());
        for (i, slot) in idx.iter_mut().enumerate().take(self.cfg.rows) {
            *slot = (i * self.cfg.width + self.hash.index(i, mk)) as u32;
        }
        if self.cfg.verify_rows > 0 {
            let h = key.hash_by(&self.verify_hash);
            let vw = self.cfg.verify_width;
            for (i, slot) in vidx.iter_mut().enumerate().take(self.cfg.verify_rows) {
                *slot = (i * vw + km_index(h, i, vw)) as u32;
            }
        }
    }

    #[inline]
    fn apply(&mut self, idx: &[u32; MAX_ROWS], vidx: &[u32; MAX_ROWS], w: u32) {
        // A zero weight changes nothing, and leaves no mark (marks follow the contents).
        if w == 0 {
            return;
        }
        for &i in &idx[..self.cfg.rows] {
            if let Some(c) = self.counters.get_mut(i as usize) {
                *c = c.saturating_add(w);
                self.dirty.mark(i as usize);
            }
        }
        for &i in &vidx[..self.cfg.verify_rows] {
            if let Some(c) = self.verify.get_mut(i as usize) {
                *c = c.saturating_add(w);
                self.verify_dirty.mark(i as usize);
            }
        }
    }

    /// Hash a step of 16 keys first, prefetch all their counters, then add: the counter loads
    /// of different keys overlap instead of each stalling on DRAM (4 x 65536 x 4 B = 1 MB per
    /// part, beyond L2).
    #[inline(always)]
    fn add_batch<K: RevKey>(&mut self, keys: &[K], weights: &[u64]) {
        let mut idx = [[0u32; MAX_ROWS]; STEP];
        let mut vidx = [[0u32; MAX_ROWS]; STEP];
        let mut ok = [false; STEP];
        for (ks, ws) in keys.chunks(STEP).zip(weights.chunks(STEP)) {
            for (j, k) in ks.iter().enumerate() {
                ok[j] = k.key_len() == self.key_len;
                if ok[j] {
                    self.row_slots_of(k, &mut idx[j], &mut vidx[j]);
                    for &i in &idx[j][..self.cfg.rows] {
                        prefetch(self.counters.as_ptr().wrapping_add(i as usize));
                    }
                    for &i in &vidx[j][..self.cfg.verify_rows] {
                        prefetch(self.verify.as_ptr().wrapping_add(i as usize));
                    }
                }
            }
            for (j, &w) in ws.iter().enumerate().take(ks.len()) {
                if ok[j] {
                    self.apply(&idx[j], &vidx[j], w32(w));
                } else {
                    self.skipped += 1;
                }
            }
        }
    }

    /// The reversible rows' counters, row major (`rows x width`): with
    /// [`Self::verify_counters`], the linear part SketchVisor's recovery sees (RECOVERY.md 3).
    pub fn counters(&self) -> &[u32] {
        &self.counters
    }

    /// The verification rows' counters, row major (`verify_rows x verify_width`).
    pub fn verify_counters(&self) -> &[u32] {
        &self.verify
    }

    /// Replace every counter by recovered ones (SketchVisor section 5): `t` holds the reversible
    /// rows then the verification rows, row major, each value rounded to the nearest integer in
    /// `0..=u32::MAX`. Returns false (and changes nothing) when `t` is not
    /// `rows * width + verify_rows * verify_width` long.
    pub fn set_counters(&mut self, t: &[f64]) -> bool {
        let n = self.counters.len();
        if t.len() != n + self.verify.len() {
            return false;
        }
        let round = |v: f64| v.round().clamp(0.0, f64::from(u32::MAX)) as u32;
        for (i, (c, &v)) in self.counters.iter_mut().zip(&t[..n]).enumerate() {
            *c = round(v);
            if *c != 0 {
                self.dirty.mark(i);
            }
        }
        for (i, (c, &v)) in self.verify.iter_mut().zip(&t[n..]).enumerate() {
            *c = round(v);
            if *c != 0 {
                self.verify_dirty.mark(i);
            }
        }
        true
    }

    /// Point estimate of `key` (min over the reversible and the verification rows).
    pub fn estimate(&self, key: &FlowKey) -> u64 {
        if key.len() != self.key_len {
            return 0;
        }
        let (mut idx, mut vidx) = ([0u32; MAX_ROWS], [0u32; MAX_ROWS]);
        self.row_slots(key, &mut idx, &mut vidx);
        let main = idx[..self.cfg.rows]
            .iter()
            .map(|&i| self.counters.get(i as usize).copied().unwrap_or(0));
        let ver = vidx[..self.cfg.verify_rows]
            .iter()
            .map(|&i| self.verify.get(i as usize).copied().unwrap_or(0));
        main.chain(ver).min().map_or(0, u64::from)
    }

    /// Heavy hitters with the truncation flag.
    pub fn detect_heavy_hitters(&self, threshold: u64) -> Detection {
        let t = threshold.max(1);
        let w = self.cfg.width;
        // A heavy bucket (>= T >= 1) was written, so only the written blocks are scanned; they
        // come in ascending order, so each row's list is sorted as a full scan would give it.
        let mut heavy: Vec<Vec<u32>> = vec![Vec::new(); self.cfg.rows];
        for j in self.dirty.items(1) {
            if self.counters.get(j).is_some_and(|&c| u64::from(c) >= t) {
                if let Some(row) = heavy.get_mut(j / w) {
                    row.push((j % w) as u32);
                }
            }
        }
        let rev = self
            .hash
            .reverse(&heavy, self.misses, self.cfg.max_candidates);
        let flows = rev
            .keys
            .iter()
            .map(|&x| u64_to_key(x, self.key_len))
            .filter_map(|k| {
                let e = self.estimate(&k);
                (e >= t).then_some((k, e))
            })
            .collect();
        Detection::sorted(flows, rev.truncated)
    }

    fn compatible(&self, other: &RevSketch) -> bool {
        self.cfg == other.cfg && self.key_len == other.key_len && self.seed == other.seed
    }

    /// Heavy changers between `prev` (previous epoch, same configuration and seed) and `self`.
    /// The estimate is |change|.
    pub fn detect_heavy_changers(
        &self,
        prev: &RevSketch,
        threshold: u64,
    ) -> Result<Detection, MergeError> {
        if !self.compatible(prev) {
            return Err(MergeError::Mismatch(NAME));
        }
        let t = threshold.max(1) as f64;
        let w = self.cfg.width;
        let main = KaryDiff::new(
            (&self.counters, &self.dirty),
            (&prev.counters, &prev.dirty),
            w,
        );
        let ver = KaryDiff::new(
            (&self.verify, &self.verify_dirty),
            (&prev.verify, &prev.verify_dirty),
            self.cfg.verify_width,
        );
        let heavy: Vec<Vec<u32>> = if main.unwritten_heavy(t) {
            // Every bucket written in neither epoch is heavy (the mean change per bucket
            // alone reaches T): scan them all.
            (0..self.cfg.rows)
                .map(|i| {
                    (0..w as u32)
                        .filter(|&b| main.adjusted(i, b as usize).abs() >= t)
                        .collect()
                })
                .collect()
        } else {
            // Otherwise only buckets written in one of the two epochs can be heavy.
            let mut written = self.dirty.clone();
            written.merge(&prev.dirty);
            let mut heavy = vec![Vec::new(); self.cfg.rows];
            for j in written.items(1) {
                let (i, b) = (j / w, j % w);
                if main.adjusted(i, b).abs() >= t {
                    if let Some(row) = heavy.get_mut(i) {
                        row.push(b as u32);
                    }
                }
            }
            heavy
        };
        let rev = self
            .hash
            .reverse(&heavy, self.misses, self.cfg.max_candidates);
        let mut flows = Vec::new();
        let (mut idx, mut vidx) = ([0u32; MAX_ROWS], [0u32; MAX_ROWS]);
        for &x in &rev.keys {
            let k = u64_to_key(x, self.key_len);
            self.row_slots(&k, &mut idx, &mut vidx);
            let mut est: Vec<f64> = if self.cfg.verify_rows > 0 {
                let vw = self.cfg.verify_width;
                (0..self.cfg.verify_rows)
                    .map(|i| ver.adjusted(i, (vidx[i] as usize).saturating_sub(i * vw)))
                    .collect()
            } else {
                let w = self.cfg.width;
                (0..self.cfg.rows)
                    .map(|i| main.adjusted(i, (idx[i] as usize).saturating_sub(i * w)))
                    .collect()
            };
            let e = median_f64(&mut est).abs();
            if e >= t {
                flows.push((k, e.round() as u64));
            }
        }
        Ok(Detection::sorted(flows, rev.truncated))
    }
}

/// A key as the update paths receive it: a `FlowKey`, or a 4-byte key as its big-endian u32
/// (`Algorithm::update_batch_u32`); both give the same integer and verification hash.
trait RevKey: key::HashInput {
    /// The key's bytes as a big-endian integer ([`key_to_u64`]).
    fn int(&self) -> u64;
}

impl RevKey for FlowKey {
    #[inline(always)]
    fn int(&self) -> u64 {
        key_to_u64(self.as_bytes())
    }
}

impl RevKey for u32 {
    #[inline(always)]
    fn int(&self) -> u64 {
        u64::from(*self)
    }
}

/// The k-ary-adjusted difference of two sketches' counter arrays (rows x width).
struct KaryDiff<'a> {
    cur: &'a [u32],
    prev: &'a [u32],
    width: usize,
    /// Per row: ΣΔ / width.
    mean: Vec<f64>,
}

impl<'a> KaryDiff<'a> {
    /// From both epochs' counters and written blocks: a row's sum of changes is the sum of its
    /// written counters now minus the same then (unwritten counters are zero).
    fn new(cur: (&'a [u32], &Dirty), prev: (&'a [u32], &Dirty), width: usize) -> Self {
        let rows = cur.0.len().checked_div(width).unwrap_or(0);
        let mut sums = vec![0i64; rows];
        for (arr, dirty, sign) in [(cur.0, cur.1, 1), (prev.0, prev.1, -1)] {
            for j in dirty.items(1) {
                if let (Some(s), Some(&c)) = (sums.get_mut(j / width.max(1)), arr.get(j)) {
                    *s += sign * i64::from(c);
                }
            }
        }
        let mean = sums.iter().map(|&s| s as f64 / width as f64).collect();
        let (cur, prev) = (cur.0, prev.0);
        KaryDiff {
            cur,
            prev,
            width,
            mean,
        }
    }

    /// True when a bucket with no change (Δ = 0) in some row is heavy for threshold `t`.
    fn unwritten_heavy(&self, t: f64) -> bool {
        (0..self.mean.len()).any(|i| self.adjusted_of(i, 0.0).abs() >= t)
    }

    /// (Δ - ΣΔ/m) / (1 - 1/m) of bucket `b` of row `i`.
    fn adjusted(&self, i: usize, b: usize) -> f64 {
        self.adjusted_of(i, delta(self.cur, self.prev, i * self.width + b) as f64)
    }

    /// The adjusted value of a change `d` in row `i`.
    fn adjusted_of(&self, i: usize, d: f64) -> f64 {
        let m = self.width as f64;
        let mean = self.mean.get(i).copied().unwrap_or(0.0);
        if self.width < 2 {
            return d;
        }
        (d - mean) / (1.0 - 1.0 / m)
    }
}

#[inline]
fn delta(cur: &[u32], prev: &[u32], j: usize) -> i64 {
    i64::from(cur.get(j).copied().unwrap_or(0)) - i64::from(prev.get(j).copied().unwrap_or(0))
}

fn median_f64(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

impl Algorithm for RevSketch {
    fn name(&self) -> &'static str {
        NAME
    }

    fn tasks(&self) -> &'static [Task] {
        TASKS
    }

    fn update(&mut self, key: &FlowKey, weight: u64) {
        if key.len() != self.key_len {
            self.skipped += 1;
            return;
        }
        let (mut idx, mut vidx) = ([0u32; MAX_ROWS], [0u32; MAX_ROWS]);
        self.row_slots(key, &mut idx, &mut vidx);
        self.apply(&idx, &vidx, w32(weight));
    }

    fn update_batch(&mut self, keys: &[FlowKey], weights: &[u64]) {
        self.add_batch(keys, weights);
    }

    /// 4-byte keys as u32 (no `FlowKey` built): the same state as [`Self::update_batch`].
    fn update_batch_u32(&mut self, keys: &[u32], weights: &[u64]) {
        self.add_batch(keys, weights);
    }

    fn reset(&mut self) {
        self.dirty.clear_in(&mut self.counters);
        self.verify_dirty.clear_in(&mut self.verify);
        self.skipped = 0;
    }

    fn memory_bytes(&self) -> usize {
        let rows = self.cfg.rows * self.key_len * 256;
        4 * (self.counters.len() + self.verify.len())
            + rows * (4 + 1)
            + self.dirty.memory_bytes()
            + self.verify_dirty.memory_bytes()
    }

    fn heavy_hitters(&self, threshold: u64) -> Option<Vec<Estimate>> {
        Some(self.detect_heavy_hitters(threshold).flows)
    }

    /// `None` if `prev` is not a `RevSketch` of the same configuration and seed.
    fn heavy_changers(&self, prev: &dyn Algorithm, threshold: u64) -> Option<Vec<Estimate>> {
        let prev = algo::downcast::<RevSketch>(prev)?;
        self.detect_heavy_changers(prev, threshold)
            .ok()
            .map(|d| d.flows)
    }

    /// A changer's estimate is the median of its k-ary-adjusted buckets (the verification
    /// rows, or the reversible rows without them), each its true change plus the colliding
    /// flows' (Krishnamurthy et al. IMC'03 sec. 3): the noise is that median at random
    /// buckets, measured on both epochs' counters (`algo::change_caveat`).
    fn change_caveats(&self, prev: &dyn Algorithm, threshold: u64) -> Vec<algo::Caveat> {
        let Some(p) = algo::downcast::<RevSketch>(prev).filter(|p| self.compatible(p)) else {
            return Vec::new();
        };
        let (rows, width, parameter, diff) = if self.cfg.verify_rows > 0 {
            let vw = self.cfg.verify_width;
            let d = KaryDiff::new(
                (&self.verify, &self.verify_dirty),
                (&p.verify, &p.verify_dirty),
                vw,
            );
            (self.cfg.verify_rows, vw, "verify_width", d)
        } else {
            let w = self.cfg.width;
            let d = KaryDiff::new((&self.counters, &self.dirty), (&p.counters, &p.dirty), w);
            (self.cfg.rows, w, "width", d)
        };
        let noise = |h: u64| {
            let mut est: Vec<f64> = (0..rows)
                .map(|i| diff.adjusted(i, km_index(h, i, width)))
                .collect();
            median_f64(&mut est)
        };
        algo::change_caveat(
            threshold,
            parameter,
            width,
            algo::NoiseScale::Linear,
            noise,
            |t| self.detect_heavy_changers(p, t).ok().map(|d| d.flows),
        )
    }

    fn merge(&mut self, other: &dyn Algorithm) -> Result<(), MergeError> {
        let o = algo::merge_peer(self, other, |o| self.compatible(o))?;
        for (a, b) in self.counters.iter_mut().zip(&o.counters) {
            *a = a.saturating_add(*b);
        }
        for (a, b) in self.verify.iter_mut().zip(&o.verify) {
            *a = a.saturating_add(*b);
        }
        self.dirty.merge(&o.dirty);
        self.verify_dirty.merge(&o.verify_dirty);
        self.skipped += o.skipped;
        Ok(())
    }
}

/// This algorithm's facts, listed in the `catalog` crate.
pub const ENTRY: algo::Entry = algo::Entry {
    name: NAME,
    tasks: TASKS,
    fit: algo::KeyFit::Exact,
    build: |p, ctx| algo::build_with(NAME, p, |c| RevSketch::new(c, ctx)),
    // Exact: the u32 counters and verification counters, allocated at construction, and the
    // modular hash's inverse tables (as `memory_bytes` counts them).
    memory: |p, ctx| {
        algo::Entry::memory_with(NAME, p, |c: RevSketchConfig| {
            c.validate(ctx.key_len)?;
            let (rows, key_len) = (c.rows as u64, ctx.key_len as u64);
            let counters = rows * c.width as u64 + c.verify_rows as u64 * c.verify_width as u64;
            let dirty = algo::Dirty::bytes_for(c.rows * c.width, 4)
                + algo::Dirty::bytes_for(c.verify_rows * c.verify_width, 4);
            // The per-row inverse tables (`rows * key_len * 256` entries of 4 + 1 bytes).
            Ok(4 * counters + rows * key_len * 256 * (4 + 1) + dirty)
        })
    },
    defaults: algo::defaults_of::<RevSketchConfig>,
    flow_size_only: "",
    resets_to_empty: true,
    save: algo::save_state::<RevSketch>,
    load: |b| algo::load_state::<RevSketch>(NAME, b),
    // ns per update, u32 / FlowKey path: `cargo run --release -p catalog --example update_costs`.
    cost: algo::UpdateCost {
        u32_ns: 26.25,
        wide_ns: 46.00,
        behind: 1.13,
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ctx, feed, key_of, planted, planted_stream, zipf_stream};
    use testkit::weighted_truth;

    /// `set_counters` (SketchVisor's write-back): a wrong length changes nothing; the right one
    /// sets both parts, which the estimate then reads, and reset clears them again.
    #[test]
    fn set_counters_validates_and_writes_both_parts() {
        let mut s = RevSketch::new(RevSketchConfig::default(), &ctx(3, 4)).unwrap();
        let k = key_of(7, 4);
        s.update(&k, 5);
        let before = s.clone();
        let n = s.counters().len() + s.verify_counters().len();
        assert!(!s.set_counters(&vec![1.0; n - 1]));
        assert_eq!(s, before);
        assert!(s.set_counters(&vec![9.4; n]));
        assert!(s
            .counters()
            .iter()
            .chain(s.verify_counters())
            .all(|&c| c == 9));
        assert_eq!(s.estimate(&k), 9);
        s.reset();
        assert!(s
            .counters()
            .iter()
            .chain(s.verify_counters())
            .all(|&c| c == 0));
    }

    #[test]
    fn recovers_planted_heavy_hitters() {
        for key_len in [4usize, 8] {
            let bg = zipf_stream(100_000, 1.1, 300_000, key_len, 1);
            let plant = planted(10, key_len, 0xabc);
            let stream = planted_stream(&bg, &plant, 20_000, 2);
            let t = 10_000;
            let truth = weighted_truth(&stream);
            let true_hh: Vec<FlowKey> = truth
                .iter()
                .filter(|(_, &v)| v >= t)
                .map(|(k, _)| *k)
                .collect();
            assert!(true_hh.len() >= 10);
            let mut s = RevSketch::new(RevSketchConfig::default(), &ctx(5, key_len)).unwrap();
            feed(&mut s, &stream);
            let d = s.detect_heavy_hitters(t);
            assert!(!d.truncated);
            for k in &true_hh {
                let got = d.flows.iter().find(|(f, _)| f == k);
                let (_, e) = got.unwrap_or_else(|| panic!("key_len {key_len}: missed {k}"));
                // Count-Min never under-estimates.
                assert!(*e >= truth[k]);
            }
            let fp = d
                .flows
                .iter()
                .filter(|(k, _)| truth.get(k).copied().unwrap_or(0) < t);
            assert!(
                fp.count() <= 2,
                "key_len {key_len}: too many false positives"
            );
        }
    }

    #[test]
    fn recovers_heavy_changers() {
        let bg1 = zipf_stream(100_000, 1.1, 200_000, 4, 11);
        let bg2 = zipf_stream(100_000, 1.1, 200_000, 4, 11 ^ 0x55);
        // Five keys grow by 15k, five shrink by 15k, against the same Zipf popularity.
        let up = planted(5, 4, 0x100);
        let down = planted(5, 4, 0x200);
        let mut e1 = planted_stream(&bg1, &down, 16_000, 3);
        e1.extend(up.iter().map(|&k| (k, 1_000)));
        let mut e2 = planted_stream(&bg2, &up, 16_000, 4);
        e2.extend(down.iter().map(|&k| (k, 1_000)));
        let (t1, t2) = (weighted_truth(&e1), weighted_truth(&e2));
        let t = 8_000u64;
        let mut keys: Vec<FlowKey> = t1.keys().chain(t2.keys()).copied().collect();
        keys.sort_unstable();
        keys.dedup();
        let change = |k: &FlowKey| {
            (t2.get(k).copied().unwrap_or(0) as i64 - t1.get(k).copied().unwrap_or(0) as i64)
                .unsigned_abs()
        };
        let true_hc: Vec<FlowKey> = keys.iter().filter(|k| change(k) >= t).copied().collect();
        for k in up.iter().chain(&down) {
            assert!(true_hc.contains(k));
        }
        let c = ctx(9, 4);
        let (mut s1, mut s2) = (
            RevSketch::new(RevSketchConfig::default(), &c).unwrap(),
            RevSketch::new(RevSketchConfig::default(), &c).unwrap(),
        );
        feed(&mut s1, &e1);
        feed(&mut s2, &e2);
        let d = s2.detect_heavy_changers(&s1, t).unwrap();
        assert!(!d.truncated);
        for k in &true_hc {
            let (_, e) = d
                .flows
                .iter()
                .find(|(f, _)| f == k)
                .expect("missed a changer");
            let rel = (*e as f64 - change(k) as f64).abs() / change(k) as f64;
            assert!(rel < 0.1, "estimate {e} vs {}", change(k));
        }
        let fp = d.flows.iter().filter(|(k, _)| change(k) < t).count();
        assert!(fp <= 2);
        // The trait route gives the same answer; a different seed is refused.
        let via_trait = s2.heavy_changers(&s1, t).unwrap();
        assert_eq!(via_trait, d.flows);
        let other = RevSketch::new(RevSketchConfig::default(), &ctx(10, 4)).unwrap();
        assert!(s2.heavy_changers(&other, t).is_none());
    }

    /// The epoch-end scans visit only written blocks; with every block marked they visit all
    /// buckets, the plain full scan. Both must give the same answers, for small epochs (few
    /// blocks written), full ones, and a change so large that unwritten buckets are heavy.
    #[test]
    fn written_block_scans_equal_full_scans() {
        let c = ctx(4, 4);
        let full = |s: &RevSketch| {
            let mut f = s.clone();
            f.dirty.mark_all();
            f.verify_dirty.mark_all();
            f
        };
        for (n, len) in [(20usize, 40usize), (2_000, 5_000), (50_000, 300_000)] {
            let a: Vec<(FlowKey, u64)> = zipf_stream(n, 1.0, len, 4, 31)
                .into_iter()
                .map(|k| (k, 1))
                .collect();
            let b: Vec<(FlowKey, u64)> = zipf_stream(n, 1.0, len / 2, 4, 32)
                .into_iter()
                .map(|k| (k, 1))
                .collect();
            let (mut s1, mut s2) = (
                RevSketch::new(RevSketchConfig::default(), &c).unwrap(),
                RevSketch::new(RevSketchConfig::default(), &c).unwrap(),
            );
            feed(&mut s1, &a);
            feed(&mut s2, &b);
            let (f1, f2) = (full(&s1), full(&s2));
            for t in [1u64, 2, 5, 50, len as u64 / 100 + 1] {
                assert_eq!(
                    s1.detect_heavy_hitters(t),
                    f1.detect_heavy_hitters(t),
                    "n {n} t {t}"
                );
                assert_eq!(
                    s2.detect_heavy_changers(&s1, t).unwrap(),
                    f2.detect_heavy_changers(&f1, t).unwrap(),
                    "n {n} t {t}"
                );
            }
            // len / 2 fewer packets over the same buckets: with T = 1 the mean change alone
            // makes untouched buckets heavy, so the full-scan branch must be the one taken.
            let k = KaryDiff::new(
                (&s2.counters, &s2.dirty),
                (&s1.counters, &s1.dirty),
                s2.cfg.width,
            );
            assert_eq!(k.unwritten_heavy(1.0), len >= 300_000, "n {n}");
            // Reset leaves the state of a fresh sketch, marks included.
            s1.reset();
            assert_eq!(s1, RevSketch::new(RevSketchConfig::default(), &c).unwrap());
            let mut f1 = f1;
            f1.reset();
            assert_eq!(f1, RevSketch::new(RevSketchConfig::default(), &c).unwrap());
        }
    }

    #[test]
    fn linear_merge_batch_and_aggregation() {
        let bg = zipf_stream(5_000, 1.1, 40_000, 4, 21);
        let stream: Vec<(FlowKey, u64)> = bg.iter().map(|&k| (k, 1)).collect();
        let c = ctx(3, 4);
        let cfg = RevSketchConfig {
            width: 4096,
            verify_width: 1000,
            ..RevSketchConfig::default()
        };
        let mut whole = RevSketch::new(cfg.clone(), &c).unwrap();
        for &(k, w) in &stream {
            whole.update(&k, w);
        }
        // Batch path equals the one-by-one loop.
        let mut batch = RevSketch::new(cfg.clone(), &c).unwrap();
        feed(&mut batch, &stream);
        assert_eq!(batch, whole);
        // The u32 path (4-byte keys as big-endian u32) equals it too, in uneven batches, with
        // and without the verification rows.
        let us: Vec<u32> = bg
            .iter()
            .map(|k| u32::from_be_bytes(*k.as_bytes().first_chunk().unwrap()))
            .collect();
        for verify_rows in [4, 0] {
            let cfg = RevSketchConfig {
                verify_rows,
                ..cfg.clone()
            };
            let mut one = RevSketch::new(cfg.clone(), &c).unwrap();
            let mut u = RevSketch::new(cfg.clone(), &c).unwrap();
            for (i, (&k, &x)) in bg.iter().zip(&us).enumerate() {
                let w = 1 + i as u64 % 3;
                one.update(&k, w);
                u.update_batch_u32(&[x], &[w]);
            }
            let mut chunked = RevSketch::new(cfg, &c).unwrap();
            let ws: Vec<u64> = (0..us.len() as u64).map(|i| 1 + i % 3).collect();
            for r in testkit::uneven(us.len(), &[1, 7, 16, 33, 100]) {
                chunked.update_batch_u32(&us[r.clone()], &ws[r]);
            }
            assert_eq!(u, one, "verify_rows {verify_rows}");
            assert_eq!(chunked, one, "verify_rows {verify_rows}");
        }
        // A sketch of 8-byte keys skips u32 keys (wrong length), as it skips 4-byte FlowKeys.
        let mut wide = RevSketch::new(cfg.clone(), &ctx(3, 8)).unwrap();
        wide.update_batch_u32(&us[..5], &[1; 5]);
        assert_eq!(wide.skipped(), 5);
        // Merge of two halves equals the sketch of the whole stream, bit for bit.
        let (a, b) = stream.split_at(stream.len() / 3);
        let (mut sa, mut sb) = (
            RevSketch::new(cfg.clone(), &c).unwrap(),
            RevSketch::new(cfg.clone(), &c).unwrap(),
        );
        feed(&mut sa, a);
        feed(&mut sb, b);
        sa.merge(&sb).unwrap();
        assert_eq!(sa, whole);
        assert_eq!(
            serde_json::to_string(&sa).unwrap(),
            serde_json::to_string(&whole).unwrap()
        );
        // Aggregated (k, w) equals w unit updates.
        let t = weighted_truth(&stream);
        let mut agg = RevSketch::new(cfg.clone(), &c).unwrap();
        let mut pairs: Vec<(FlowKey, u64)> = t.into_iter().collect();
        pairs.sort_unstable();
        feed(&mut agg, &pairs);
        assert_eq!(agg, whole);
        // Same seed same state, other seed other state; merge refuses another seed.
        let mut other = RevSketch::new(cfg.clone(), &ctx(4, 4)).unwrap();
        feed(&mut other, &stream);
        assert_ne!(other, whole);
        assert_eq!(whole.merge(&other), Err(MergeError::Mismatch(NAME)));
        // Reset keeps shape and seeds.
        let mut r = whole.clone();
        r.reset();
        assert_eq!(r, RevSketch::new(cfg, &c).unwrap());
        assert!(r.memory_bytes() >= 4 * (4 * 4096 + 4 * 1000));
    }

    #[test]
    fn pathological_query_is_bounded() {
        // 60k distinct keys and threshold 1: almost every bucket is heavy, so an unbounded
        // reversal would enumerate billions of keys. The cap stops it and says so.
        let cfg = RevSketchConfig {
            max_candidates: 2048,
            ..RevSketchConfig::default()
        };
        let mut s = RevSketch::new(cfg, &ctx(2, 4)).unwrap();
        for i in 0..60_000u64 {
            s.update(&key_of(key::mix64(i), 4), 1);
        }
        let d = s.detect_heavy_hitters(1);
        assert!(d.truncated);
        assert!(d.flows.len() <= 2048);
        // Every reported key really is in the stream's support or a CM collision: estimate >= 1.
        assert!(d.flows.iter().all(|&(_, e)| e >= 1));
        let prev = RevSketch::new(s.config().clone(), &ctx(2, 4)).unwrap();
        assert!(s.detect_heavy_changers(&prev, 1).unwrap().truncated);
    }

    #[test]
    fn wrong_key_length_is_skipped_not_panicking() {
        let mut s = RevSketch::new(RevSketchConfig::default(), &ctx(1, 4)).unwrap();
        s.update(&key_of(7, 8), 5);
        s.update_batch(&[key_of(7, 2), FlowKey::EMPTY], &[1, 1]);
        assert_eq!(s.skipped(), 3);
        assert_eq!(s.estimate(&key_of(7, 8)), 0);
        assert!(s.detect_heavy_hitters(0).flows.is_empty());
        s.update(&key_of(7, 4), u64::MAX);
        assert_eq!(s.estimate(&key_of(7, 4)), u64::from(u32::MAX));
    }

    #[test]
    fn config_errors_name_the_field() {
        let e = |cfg: RevSketchConfig, kl: usize| {
            RevSketch::new(cfg, &ctx(1, kl)).err().unwrap().to_string()
        };
        let d = RevSketchConfig::default;
        assert!(e(d(), 13).contains("key_len"));
        assert!(e(RevSketchConfig { width: 4000, ..d() }, 4).contains("width"));
        assert!(e(RevSketchConfig { rows: 0, ..d() }, 4).contains("rows"));
        let r = RevSketchConfig {
            row_misses: Some(4),
            ..d()
        };
        assert!(e(r, 4).contains("row_misses"));
        let v = RevSketchConfig {
            verify_width: 1,
            ..d()
        };
        assert!(e(v, 4).contains("verify_width"));
        assert_eq!(d().misses(4), 0);
        // Unset: ToN's r = 1 for 4-byte keys over more than two rows, else 0.
        let unset = RevSketchConfig {
            row_misses: None,
            ..d()
        };
        assert_eq!(unset.misses(4), 1);
        assert_eq!(unset.misses(8), 0);
    }

    /// The heavy-changer caveat (issue 12, `algo::change_caveat`): quiet at the default size
    /// with nothing near the threshold; the flows answered within the noise of it named when
    /// 20 changers sit exactly at it; "dominated by collisions" at 16 (`verify_width`).
    #[test]
    fn change_caveat_names_verify_width() {
        let make = |verify_width| {
            move || {
                let c = RevSketchConfig {
                    verify_width,
                    ..RevSketchConfig::default()
                };
                RevSketch::new(c, &ctx(5, 4)).unwrap()
            }
        };
        let t = 1000;
        let (cur, prev) = crate::testutil::change_epochs(make(4096), 4, 0);
        assert_eq!(cur.heavy_changers(&prev, t).unwrap().len(), 10);
        assert_eq!(cur.change_caveats(&prev, t), vec![]);
        let (cur, prev) = crate::testutil::change_epochs(make(4096), 4, 20);
        let c = cur.change_caveats(&prev, t);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].parameter, "verify_width");
        assert!(
            c[0].message.contains("flows' estimated changes are within"),
            "{c:?}"
        );
        let (cur, prev) = crate::testutil::change_epochs(make(16), 4, 0);
        let c = cur.change_caveats(&prev, t);
        assert_eq!(c.len(), 1, "{c:?}");
        assert!(c[0].message.contains("dominated by collisions"), "{c:?}");
        // A previous state of another configuration: nothing to compare, nothing said.
        let (other, _) = crate::testutil::change_epochs(make(2048), 4, 0);
        assert_eq!(cur.change_caveats(&other, t), vec![]);
    }
}
