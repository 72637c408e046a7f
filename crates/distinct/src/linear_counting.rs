//! Linear counting (Whang, Vander-Zanden & Taylor 1990), ALGORITHMS.md section 9, with the
//! Agg-Evict layout (papers/agg-evict.txt section 4.1: "Linear Counting: 4 bit arrays of 65536 x
//! 32 bits", i.e. 4 rows of 2^21 bits, 1 MiB).
//!
//! Each row is a bit array of `m` bits; a key sets one bit per row. With `z` zero bits in a row,
//! `n̂ = −m·ln(z/m)` and RSE ≈ √(m(e^t − t − 1))/n, t = n/m. The rows use different hash
//! positions, so averaging their estimates divides the RSE by ≈ √rows.
//!
//! **Saturation.** A row with no zero bit cannot give an estimate (the formula is infinite).
//! [`LinearCounting::saturated`] reports it, and such a row contributes `m·ln m` (the estimate for
//! a single zero bit, the largest finite value it can express), so [`LinearCounting::estimate`]
//! is then a lower bound rather than an estimate: the truth is likely far above it. Size `bits`
//! above the expected number of distinct keys (RSE grows fast beyond t ≈ 5).
//!
//! Hashing: one xxh3-64 per key; row `i` uses Kirsch-Mitzenmacher double hashing
//! `g_i = h1 + i·h2 (mod 2^32)` with `h1`, `h2` the two 32-bit halves, reduced onto `0..m` by
//! multiply-shift. Each row's position is uniform (h1 is), and two keys that collide in one row
//! collide in another only if their `h2` also agree, so the rows' collision events are
//! (nearly) independent, which is what averaging needs; four rows of 21 bits do not fit in 64
//! bits, so plain bit-splitting is not an option at the default size.
//!
//! Idempotent (class B): weight ignored, merge = bitwise OR, equal to the sketch of the union.

use algo::{BuildCtx, ConfigError, Task};
use key::{HashFn, HashInput};
use serde::{Deserialize, Serialize};

pub const NAME: &str = "linear_counting";
/// The tasks it answers.
const TASKS: &[Task] = &[Task::Cardinality];
/// `key::sub_seed` index of this algorithm ("LC").
const SEED_TAG: u64 = 0x4c43_0000;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LinearCountingConfig {
    /// Number of independent bit arrays whose estimates are averaged (Agg-Evict: 4).
    pub rows: usize,
    /// Bits per array `m` (Agg-Evict: 65536 x 32 = 2^21). Any value; powers of two are not needed.
    pub bits: usize,
}

impl Default for LinearCountingConfig {
    fn default() -> Self {
        LinearCountingConfig {
            rows: 4,
            bits: 65536 * 32,
        }
    }
}

impl LinearCountingConfig {
    /// Largest `bits` accepted: positions are reduced from 32-bit double-hash values.
    pub const MAX_BITS: usize = 1 << 32;
    /// Largest `rows` accepted.
    pub const MAX_ROWS: usize = 64;

    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.rows == 0 || self.rows > Self::MAX_ROWS {
            return Err(ConfigError::Invalid {
                algo: NAME,
                field: "rows",
                reason: format!("must be in 1..={}, got {}", Self::MAX_ROWS, self.rows),
            });
        }
        if self.bits == 0 || self.bits > Self::MAX_BITS {
            return Err(ConfigError::Invalid {
                algo: NAME,
                field: "bits",
                reason: format!("must be in 1..={}, got {}", Self::MAX_BITS, self.bits),
            });
        }
        Ok(())
    }

    fn words_per_row(&self) -> usize {
        self.bits.div_ceil(64)
    }

    /// Whang et al.'s relative standard error for `n` distinct keys, divided by √rows for the
    /// average of independent rows.
    pub fn rse(&self, n: f64) -> f64 {
        let m = self.bits as f64;
        let t = n / m;
        (m * (t.exp() - t - 1.0)).sqrt() / n / (self.rows as f64).sqrt()
    }
}

/// Linear counting over `rows` bit arrays. See the module documentation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "LinearCountingState")]
pub struct LinearCounting {
    cfg: LinearCountingConfig,
    hash: HashFn,
    /// Row-major: row `i` is `words[i*wpr .. (i+1)*wpr]`; bits past `cfg.bits` stay zero.
    words: Vec<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LinearCountingState {
    cfg: LinearCountingConfig,
    hash: HashFn,
    words: Vec<u64>,
}

impl algo::CheckState for LinearCounting {
    /// Nothing left to check: the state's own conversion (`TryFrom<LinearCountingState>`, through
    /// `serde(try_from)`) checked every decoded size against its configuration.
    fn check_state(&self) -> Result<(), String> {
        Ok(())
    }
}

impl TryFrom<LinearCountingState> for LinearCounting {
    type Error = String;
    fn try_from(s: LinearCountingState) -> Result<Self, String> {
        s.cfg.validate().map_err(|e| e.to_string())?;
        let wpr = s.cfg.words_per_row();
        if Some(s.words.len()) != wpr.checked_mul(s.cfg.rows) {
            return Err(format!(
                "linear_counting: {} words stored, configuration needs {} x {wpr}",
                s.words.len(),
                s.cfg.rows
            ));
        }
        let tail = s.cfg.bits % 64;
        if tail != 0
            && s.words
                .chunks_exact(wpr)
                .any(|row| row.last().is_some_and(|w| w >> tail != 0))
        {
            return Err("linear_counting: bits set past the end of a row".into());
        }
        Ok(LinearCounting {
            cfg: s.cfg,
            hash: s.hash,
            words: s.words,
        })
    }
}

impl LinearCounting {
    pub fn new(cfg: LinearCountingConfig, ctx: &BuildCtx) -> Result<LinearCounting, ConfigError> {
        cfg.validate()?;
        let n = cfg
            .words_per_row()
            .checked_mul(cfg.rows)
            .ok_or(ConfigError::Invalid {
                algo: NAME,
                field: "bits",
                reason: "rows x bits overflows".into(),
            })?;
        Ok(LinearCounting {
            hash: HashFn::new(key::sub_seed(ctx.seed, SEED_TAG)),
            words: vec![0; n],
            cfg,
        })
    }

    pub fn config(&self) -> &LinearCountingConfig {
        &self.cfg
    }

    /// Bit position of row `row` for the hash `h` (Kirsch-Mitzenmacher, see module docs).
    #[inline(always)]
    fn position(&self, h: u64, row: usize) -> usize {
        let (h1, h2) = (h as u32, (h >> 32) as u32);
        crate::reduce32(
            h1.wrapping_add((row as u32).wrapping_mul(h2)),
            self.cfg.bits,
        )
    }

    /// Word index in `words` of bit `pos` of row `row`, and the bit's mask.
    #[inline(always)]
    fn slot(&self, row: usize, pos: usize) -> (usize, u64) {
        (
            row * self.cfg.words_per_row() + pos / 64,
            1u64 << (pos % 64),
        )
    }

    #[inline]
    fn insert_hash(&mut self, h: u64) {
        for row in 0..self.cfg.rows {
            let (w, mask) = self.slot(row, self.position(h, row));
            if let Some(word) = self.words.get_mut(w) {
                *word |= mask;
            }
        }
    }

    /// Hash a block, prefetch its words, then insert (either key representation).
    fn insert_batch<K: HashInput>(&mut self, keys: &[K]) {
        let mut hashes = [0u64; crate::BATCH_BLOCK];
        for block in keys.chunks(crate::BATCH_BLOCK) {
            for (h, k) in hashes.iter_mut().zip(block) {
                *h = k.hash_by(&self.hash);
            }
            let hs = &hashes[..block.len()];
            for &h in hs {
                for row in 0..self.cfg.rows {
                    let (w, _) = self.slot(row, self.position(h, row));
                    crate::prefetch(self.words.as_ptr().wrapping_add(w));
                }
            }
            for &h in hs {
                self.insert_hash(h);
            }
        }
    }

    fn rows(&self) -> impl Iterator<Item = &[u64]> {
        self.words.chunks_exact(self.cfg.words_per_row())
    }

    /// Zero bits of each row.
    pub fn zeros_per_row(&self) -> Vec<usize> {
        self.rows()
            .map(|r| self.cfg.bits - r.iter().map(|w| w.count_ones() as usize).sum::<usize>())
            .collect()
    }

    /// True if some row has every bit set: the estimate is then only a lower bound.
    pub fn saturated(&self) -> bool {
        self.zeros_per_row().contains(&0)
    }

    /// Mean over rows of `−m·ln(z/m)`; a saturated row counts as `m·ln m` (see module docs).
    pub fn estimate(&self) -> f64 {
        let m = self.cfg.bits as f64;
        let zeros = self.zeros_per_row();
        let sum: f64 = zeros
            .iter()
            .map(|&z| crate::linear_count(m, (z as f64).max(1.0)))
            .sum();
        sum / zeros.len().max(1) as f64
    }
}

crate::counter_algorithm!(LinearCounting, batched);

impl crate::Counter for LinearCounting {
    fn clear(&mut self) {
        self.words.fill(0);
    }

    fn state_bytes(&self) -> usize {
        self.words.len() * std::mem::size_of::<u64>()
    }

    fn union(&mut self, o: &Self) {
        for (a, b) in self.words.iter_mut().zip(&o.words) {
            *a |= b;
        }
    }

    /// Past about 1% zero bits a row's estimate m·ln(m/z) rests on a handful of bits (and with
    /// none left it is only a lower bound): say so, with a size that keeps the load below 1.
    fn caveats(&self) -> Vec<algo::Caveat> {
        let m = self.cfg.bits;
        let zeros = self.zeros_per_row();
        let full = zeros.iter().filter(|&&z| z * 100 < m).count();
        if full == 0 {
            return Vec::new();
        }
        let bits = ((2.0 * self.estimate()).ceil() as usize)
            .max(2 * m)
            .min(LinearCountingConfig::MAX_BITS);
        vec![algo::Caveat {
            parameter: "bits",
            message: format!(
                "{full} of {} rows of {m} bits have fewer than 1% zero bits left: the estimate \
                 is coarse, a lower bound once a row has none",
                zeros.len()
            ),
            suggestion: format!("bits = {bits} (twice the estimate)"),
        }]
    }
}

/// This algorithm's facts, listed in the `catalog` crate.
pub const ENTRY: algo::Entry = algo::Entry {
    name: NAME,
    tasks: TASKS,
    fit: algo::KeyFit::Any,
    build: |p, ctx| algo::build_with(NAME, p, |c| LinearCounting::new(c, ctx)),
    // Exact: `rows` bitmaps of `bits` bits in u64 words (at most 32 GiB), allocated at
    // construction.
    memory: |p, _ctx| {
        algo::Entry::memory_with(NAME, p, |c: LinearCountingConfig| {
            c.validate()?;
            Ok(c.rows as u64 * c.words_per_row() as u64 * 8)
        })
    },
    defaults: algo::defaults_of::<LinearCountingConfig>,
    flow_size_only: "",
    resets_to_empty: true,
    save: algo::save_state::<LinearCounting>,
    load: |b| algo::load_state::<LinearCounting>(NAME, b),
    // ns per update, u32 / FlowKey path: `cargo run --release -p catalog --example update_costs`.
    cost: algo::UpdateCost {
        u32_ns: 7.58,
        wide_ns: 11.21,
        behind: 1.08,
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;
    use algo::Algorithm;
    use key::FlowKey;
    use testkit::zipf_keys;

    fn lc(rows: usize, bits: usize, seed: u64) -> LinearCounting {
        let ctx = BuildCtx {
            seed,
            ..BuildCtx::default()
        };
        LinearCounting::new(LinearCountingConfig { rows, bits }, &ctx).unwrap()
    }

    fn run(mut s: LinearCounting, keys: &[FlowKey]) -> LinearCounting {
        for k in keys {
            s.update(k, 1);
        }
        s
    }

    #[test]
    fn laws() {
        // A non-multiple of 64 exercises the partial last word of each row.
        check_idempotent_laws(|seed| lc(4, 100_000, seed));
        check_idempotent_laws(|seed| lc(1, 4000, seed));
    }

    #[test]
    fn seeds_change_the_bits() {
        let keys = zipf_keys(20_000, 5000, 1.1, 3);
        assert_ne!(
            run(lc(2, 10_000, 1), &keys).words,
            run(lc(2, 10_000, 2), &keys).words
        );
    }

    #[test]
    fn default_is_agg_evict_size() {
        let s = LinearCounting::new(Default::default(), &BuildCtx::default()).unwrap();
        assert_eq!(s.memory_bytes(), 4 * 65536 * 4);
        assert_eq!(s.estimate(), 0.0);
        assert!(!s.saturated());
    }

    /// Within 4 standard errors (Whang et al.'s formula for the configured size, averaged
    /// rows) at 100, 10k and 1M distinct keys, on the Agg-Evict default 4 x 2^21 bits.
    #[test]
    fn accuracy_against_truth() {
        for (n, seed) in [(100usize, 1u64), (10_000, 2), (1_000_000, 3)] {
            let keys = distinct_stream(n, seed);
            let mut s = lc(4, 65536 * 32, seed);
            s.update_batch(&keys, &vec![1; keys.len()]);
            let rse = s.config().rse(n as f64);
            assert_within(&format!("lc n={n}"), s.estimate(), n, rse, 4.0);
            assert!(!s.saturated());
        }
        // A small array loaded to t = 3 still answers within its (larger) error.
        let keys = distinct_stream(30_000, 5);
        let s = run(lc(4, 10_000, 5), &keys);
        assert_within(
            "lc t=3",
            s.estimate(),
            30_000,
            s.config().rse(30_000.0),
            4.0,
        );
    }

    #[test]
    fn saturation_is_reported_with_a_lower_bound() {
        let keys = distinct_stream(20_000, 4);
        let s = run(lc(2, 256, 4), &keys);
        assert!(s.saturated());
        assert_eq!(s.zeros_per_row(), vec![0, 0]);
        let bound = 256.0 * 256f64.ln();
        assert!((s.estimate() - bound).abs() < 1e-9);
        assert!(s.estimate() < 20_000.0, "the bound is below the truth");
        // Not saturated before it fills up.
        let s = run(lc(2, 256, 4), &keys[..50]);
        assert!(!s.saturated());
    }

    /// No bias beyond Whang et al.'s over many seeds at loads t = n/m of 0.5, 1 and 3, and the spread of one run is
    /// Whang et al.'s RSE (averaged over the rows) within 15%: a wrong log, a dropped row or
    /// a miscounted zero bit shifts the mean by far more than its standard error.
    #[test]
    fn no_bias_over_many_seeds() {
        for (rows, bits, runs, n) in [
            (4usize, 4096usize, 400usize, 2048usize),
            (1, 4096, 400, 4096),
            (4, 1000, 400, 3000),
        ] {
            let s = seed_stats(runs, n, |seed| lc(rows, bits, seed));
            let rse = LinearCountingConfig { rows, bits }.rse(n as f64);
            // Whang et al.'s bias of the estimate, (e^t - t - 1) / 2n relative (0.27% at t = 3).
            let t = n as f64 / bits as f64;
            let bias = (t.exp() - t - 1.0) / (2.0 * n as f64);
            let name = format!("lc {rows}x{bits} n={n}");
            assert_unbiased(&name, s, bias, 4.0, rse, (0.85, 1.15));
        }
    }

    #[test]
    fn malformed_snapshot_is_rejected() {
        let s = lc(1, 100, 1);
        let mut v = serde_json::to_value(&s).unwrap();
        v["words"] = serde_json::json!([0]);
        assert!(serde_json::from_value::<LinearCounting>(v).is_err());
        let mut v = serde_json::to_value(&s).unwrap();
        v["words"] = serde_json::json!([0, u64::MAX]);
        assert!(serde_json::from_value::<LinearCounting>(v).is_err());
    }
}
