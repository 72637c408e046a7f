//! HyperLogLog (Flajolet, Fusy, Gandouet & Meunier 2007) with a 64-bit hash, ALGORITHMS.md
//! section 9.
//!
//! `m = 2^p` one-byte registers. A key's 64-bit hash `h`: the top `p` bits pick register `idx`;
//! `ρ` = leading zeros of the remaining `64 − p` bits + 1 (at most `64 − p + 1`);
//! `M[idx] = max(M[idx], ρ)`. Estimate `E = α_m·m² / Σ 2^−M[j]`; if `E ≤ 2.5m` and `V > 0`
//! registers are zero, the small-range correction `m·ln(m/V)` (linear counting over registers)
//! replaces it. With 64 hash bits no large-range correction is needed (collisions matter only
//! near 2^64 distinct keys). RSE ≈ 1.04/√m: 0.81% at the default p = 14 (16 KiB).
//!
//! Hashing: one xxh3-64 per key, split into disjoint bit ranges as the algorithm prescribes.
//!
//! Idempotent (class B): weight ignored; merge = register-wise max, equal to the sketch of the
//! union stream.

use algo::{BuildCtx, ConfigError, Task};
use key::{HashFn, HashInput};
use serde::{Deserialize, Serialize};

pub const NAME: &str = "hyperloglog";
/// The tasks it answers.
const TASKS: &[Task] = &[Task::Cardinality];
/// `key::sub_seed` index of this algorithm ("HLL").
const SEED_TAG: u64 = 0x0048_4c4c;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HyperLogLogConfig {
    /// `p`: the sketch has `2^p` registers (4..=18; default 14, RSE 0.81%).
    pub precision: u8,
}

impl Default for HyperLogLogConfig {
    fn default() -> Self {
        HyperLogLogConfig { precision: 14 }
    }
}

impl HyperLogLogConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(4..=18).contains(&self.precision) {
            return Err(ConfigError::Invalid {
                algo: NAME,
                field: "precision",
                reason: format!("must be in 4..=18, got {}", self.precision),
            });
        }
        Ok(())
    }

    pub fn registers(&self) -> usize {
        1 << self.precision
    }

    /// Relative standard error, 1.04/√m.
    pub fn rse(&self) -> f64 {
        1.04 / (self.registers() as f64).sqrt()
    }
}

/// HyperLogLog distinct counter. See the module documentation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "HyperLogLogState")]
pub struct HyperLogLog {
    cfg: HyperLogLogConfig,
    hash: HashFn,
    registers: Vec<u8>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HyperLogLogState {
    cfg: HyperLogLogConfig,
    hash: HashFn,
    registers: Vec<u8>,
}

impl algo::CheckState for HyperLogLog {
    /// Nothing left to check: the state's own conversion (`TryFrom<HyperLogLogState>`, through
    /// `serde(try_from)`) checked every decoded size against its configuration.
    fn check_state(&self) -> Result<(), String> {
        Ok(())
    }
}

impl TryFrom<HyperLogLogState> for HyperLogLog {
    type Error = String;
    fn try_from(s: HyperLogLogState) -> Result<Self, String> {
        s.cfg.validate().map_err(|e| e.to_string())?;
        if s.registers.len() != s.cfg.registers() {
            return Err(format!(
                "hyperloglog: {} registers stored, precision {} needs {}",
                s.registers.len(),
                s.cfg.precision,
                s.cfg.registers()
            ));
        }
        let max_rho = 64 - s.cfg.precision + 1;
        if s.registers.iter().any(|&r| r > max_rho) {
            return Err(format!("hyperloglog: a register exceeds {max_rho}"));
        }
        Ok(HyperLogLog {
            cfg: s.cfg,
            hash: s.hash,
            registers: s.registers,
        })
    }
}

/// Register index (top `p` bits) and ρ (position of the first 1 in the other `64 - p` bits,
/// `64 - p + 1` if there is none) of a hash, for precision `p` in 4..=18.
#[inline(always)]
fn split(h: u64, p: u32) -> (usize, u8) {
    let idx = (h >> (64 - p)) as usize;
    // The low p bits of `h << p` are zero, so `leading_zeros` counts within the payload; a
    // sentinel bit just below it caps the count at 64 - p without a branch.
    let w = (h << p) | (1 << (p - 1));
    (idx, (w.leading_zeros() + 1) as u8)
}

/// Registers (bytes) that stay in a 32 KiB L1 data cache beside the batch's other data.
const L1_REGISTERS: usize = 1 << 14;

impl HyperLogLog {
    pub fn new(cfg: HyperLogLogConfig, ctx: &BuildCtx) -> Result<HyperLogLog, ConfigError> {
        cfg.validate()?;
        Ok(HyperLogLog {
            hash: HashFn::new(key::sub_seed(ctx.seed, SEED_TAG)),
            registers: vec![0; cfg.registers()],
            cfg,
        })
    }

    pub fn config(&self) -> &HyperLogLogConfig {
        &self.cfg
    }

    pub fn registers(&self) -> &[u8] {
        &self.registers
    }

    /// Register index and ρ of a hash.
    #[inline(always)]
    fn split(&self, h: u64) -> (usize, u8) {
        split(h, u32::from(self.cfg.precision))
    }

    #[inline]
    fn insert_hash(&mut self, h: u64) {
        let (idx, rho) = self.split(h);
        if let Some(r) = self.registers.get_mut(idx) {
            if rho > *r {
                *r = rho;
            }
        }
    }

    /// Hash a block, prefetch its registers, then insert (either key representation). Registers
    /// that fit the L1 cache (up to p = 14, 16 KiB) need no prefetch: one pass, branch-free max.
    fn insert_batch<K: HashInput>(&mut self, keys: &[K]) {
        if self.registers.len() <= L1_REGISTERS {
            // Locals, not fields: the loop keeps them in registers.
            let (hash, p) = (self.hash, u32::from(self.cfg.precision));
            let regs = &mut self.registers[..];
            for k in keys {
                let (idx, rho) = split(k.hash_by(&hash), p);
                if let Some(r) = regs.get_mut(idx) {
                    if rho > *r {
                        *r = rho;
                    }
                }
            }
            return;
        }
        let mut hashes = [0u64; crate::BATCH_BLOCK];
        for block in keys.chunks(crate::BATCH_BLOCK) {
            for (h, k) in hashes.iter_mut().zip(block) {
                *h = k.hash_by(&self.hash);
                let (idx, _) = self.split(*h);
                crate::prefetch(self.registers.as_ptr().wrapping_add(idx));
            }
            for &h in &hashes[..block.len()] {
                self.insert_hash(h);
            }
        }
    }

    /// The HLL estimate with the small-range correction.
    pub fn estimate(&self) -> f64 {
        let m = self.registers.len() as f64;
        let alpha = match self.registers.len() {
            16 => 0.673,
            32 => 0.697,
            64 => 0.709,
            _ => 0.7213 / (1.0 + 1.079 / m),
        };
        let (mut sum, mut zeros) = (0f64, 0usize);
        for &r in &self.registers {
            sum += pow2_neg(r);
            zeros += usize::from(r == 0);
        }
        let e = alpha * m * m / sum;
        if e <= 2.5 * m && zeros > 0 {
            crate::linear_count(m, zeros as f64)
        } else {
            e
        }
    }
}

/// 2^-r, exactly, by building the double's exponent: a register holds at most 65 - p, far from
/// the subnormal range. The query sums this over every register (16,384 by default), and libm's
/// `exp2` made each query cost ~60 µs however few keys the epoch had (a per-epoch constant that
/// dominated short epochs); the bits are the same as `exp2(-r)`'s (tested).
#[inline]
fn pow2_neg(r: u8) -> f64 {
    f64::from_bits((1023 - u64::from(r)) << 52)
}

crate::counter_algorithm!(HyperLogLog, batched);

impl crate::Counter for HyperLogLog {
    fn clear(&mut self) {
        self.registers.fill(0);
    }

    fn state_bytes(&self) -> usize {
        self.registers.len()
    }

    fn union(&mut self, o: &Self) {
        for (a, &b) in self.registers.iter_mut().zip(&o.registers) {
            *a = (*a).max(b);
        }
    }
}

/// This algorithm's facts, listed in the `catalog` crate.
pub const ENTRY: algo::Entry = algo::Entry {
    name: NAME,
    tasks: TASKS,
    fit: algo::KeyFit::Any,
    build: |p, ctx| algo::build_with(NAME, p, |c| HyperLogLog::new(c, ctx)),
    // Exact: `2^precision` one-byte registers, allocated at construction.
    memory: |p, _ctx| {
        algo::Entry::memory_with(NAME, p, |c: HyperLogLogConfig| {
            c.validate()?;
            Ok(c.registers() as u64)
        })
    },
    defaults: algo::defaults_of::<HyperLogLogConfig>,
    flow_size_only: "",
    resets_to_empty: true,
    save: algo::save_state::<HyperLogLog>,
    load: |b| algo::load_state::<HyperLogLog>(NAME, b),
    // ns per update, u32 / FlowKey path: `cargo run --release -p catalog --example update_costs`.
    cost: algo::UpdateCost {
        u32_ns: 2.57,
        wide_ns: 6.77,
        behind: 1.12,
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;
    use algo::Algorithm;
    use key::FlowKey;

    #[test]
    fn pow2_neg_is_exp2_bit_for_bit() {
        for r in 0..=u8::MAX {
            assert_eq!(
                pow2_neg(r).to_bits(),
                (-f64::from(r)).exp2().to_bits(),
                "{r}"
            );
        }
    }
    use testkit::zipf_keys;

    fn hll(precision: u8, seed: u64) -> HyperLogLog {
        let ctx = BuildCtx {
            seed,
            ..BuildCtx::default()
        };
        HyperLogLog::new(HyperLogLogConfig { precision }, &ctx).unwrap()
    }

    fn run(mut s: HyperLogLog, keys: &[FlowKey]) -> HyperLogLog {
        for k in keys {
            s.update(k, 1);
        }
        s
    }

    #[test]
    fn split_takes_index_from_the_top_and_caps_rho() {
        // p = 14: index = top 14 bits; rho = 1 + leading zeros of the other 50, at most 51.
        assert_eq!(split(0, 14), (0, 51));
        assert_eq!(split(u64::MAX, 14), ((1 << 14) - 1, 1));
        assert_eq!(split(1, 14), (0, 50));
        assert_eq!(split((5 << 50) | (1 << 40), 14), (5, 10));
        assert_eq!(split(0, 4), (0, 61));
        // The u32 batch path and the FlowKey path leave the same registers.
        let keys: Vec<u32> = (0..5000u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let flow: Vec<FlowKey> = keys.iter().map(|&k| FlowKey::from_u32(k)).collect();
        let ones = vec![1u64; keys.len()];
        let (mut a, mut b) = (hll(14, 3), hll(14, 3));
        a.update_batch_u32(&keys, &ones);
        b.update_batch(&flow, &ones);
        assert_eq!(a.registers(), b.registers());
        assert_eq!(run(hll(14, 3), &flow).registers(), a.registers());
    }

    #[test]
    fn laws() {
        check_idempotent_laws(|seed| hll(14, seed));
        check_idempotent_laws(|seed| hll(4, seed));
        // Past L1 (p > 14) the batch path hashes a block and prefetches first.
        check_idempotent_laws(|seed| hll(16, seed));
    }

    #[test]
    fn seeds_change_the_registers() {
        let keys = zipf_keys(20_000, 5000, 1.1, 3);
        assert_ne!(
            run(hll(10, 1), &keys).registers,
            run(hll(10, 2), &keys).registers
        );
    }

    #[test]
    fn rho_is_the_leading_zero_run_of_the_payload() {
        let s = hll(14, 1);
        // Payload starts with a 1: rho = 1.
        assert_eq!(s.split(0x0002_0000_0000_0000), (0, 1));
        // Top 14 bits = idx 0x3fff, then 3 zeros and a 1.
        let h = (0x3fffu64 << 50) | (1u64 << 46);
        assert_eq!(s.split(h), (0x3fff, 4));
        // All-zero payload: the maximum 64 - 14 + 1.
        assert_eq!(s.split(5u64 << 50), (5, 51));
        assert_eq!(s.split(u64::MAX), ((1 << 14) - 1, 1));
    }

    /// Within 4 standard errors (1.04/√m for p = 14, 0.81%) at 100, 10k and 1M distinct keys
    /// and on a Zipf stream.
    #[test]
    fn accuracy_against_truth() {
        for (n, seed) in [(100usize, 1u64), (10_000, 2), (1_000_000, 3)] {
            let keys = distinct_stream(n, seed);
            let mut s = hll(14, seed);
            s.update_batch(&keys, &vec![1; keys.len()]);
            assert_within(
                &format!("hll n={n}"),
                s.estimate(),
                n,
                s.config().rse(),
                4.0,
            );
        }
        let keys = zipf_keys(300_000, 200_000, 1.1, 9);
        let truth = exact_distinct(&keys);
        let s = run(hll(12, 9), &keys);
        assert_within("hll zipf", s.estimate(), truth, s.config().rse(), 4.0);
    }

    /// The small-range correction: at n ≪ m the raw estimate is biased (≈ 0.72·m for an empty
    /// sketch), linear counting over registers is near exact.
    #[test]
    fn small_range_correction() {
        let s = hll(14, 1);
        assert_eq!(s.estimate(), 0.0);
        for (n, seed) in [(1usize, 4u64), (10, 5), (100, 6), (1000, 7)] {
            let s = run(hll(14, seed), &distinct_stream(n, seed));
            // Linear counting at t = n/m ≤ 0.06: RSE ≈ √(m(e^t - t - 1))/n ≤ 0.2%; allow 4 σ
            // plus one key of rounding.
            let m = 16384f64;
            let t = n as f64 / m;
            let rse = (m * (t.exp() - t - 1.0)).sqrt() / n as f64;
            let err = (s.estimate() - n as f64).abs();
            assert!(err <= 4.0 * rse * n as f64 + 1.0, "n={n}: {}", s.estimate());
        }
    }

    /// Bias, not just one run's error: the mean relative error of many seeds is within 4 of its
    /// standard errors of zero, for the general alpha (p = 10) and each tabulated one
    /// (m = 16, 32, 64), in the raw-estimate range (n about 25m, past the small-range switch at
    /// 2.5m), and in the small-range (linear counting) range. One run at 4 sigma cannot see a
    /// constant 2.6% off; 400 runs at m = 1024 see it at about 18 standard errors, and 4000 runs
    /// at m = 128 see the finite-m term of the general alpha (1.079/m = 0.84%) at about 6.
    #[test]
    fn no_bias_over_many_seeds() {
        for (p, runs, n) in [
            (10u8, 400usize, 25_000usize),
            (10, 400, 5120),
            (7, 4000, 2000),
            (4, 5000, 400),
            (5, 3000, 800),
            (6, 2000, 1600),
        ] {
            let s = seed_stats(runs, n, |seed| hll(p, seed));
            let rse = HyperLogLogConfig { precision: p }.rse();
            assert_unbiased(&format!("hll p={p} n={n}"), s, 0.0, 4.0, rse, (0.8, 1.2));
        }
        // Small range: n = m / 2, linear counting over the registers.
        let s = seed_stats(200, 512, |seed| hll(10, seed));
        let m = 1024f64;
        let t = 512.0 / m;
        let rse = (m * (t.exp() - t - 1.0)).sqrt() / 512.0;
        assert_unbiased("hll p=10 n=512 (small range)", s, 0.0, 4.0, rse, (0.8, 1.2));
    }

    /// A sketch with no zero register but a raw estimate below 2.5m (every register 1: E =
    /// 2·α·m) answers the raw estimate: linear counting needs a zero register.
    #[test]
    fn no_zero_register_means_the_raw_estimate() {
        let mut s = hll(4, 1);
        for idx in 0..16u64 {
            s.insert_hash((idx << 60) | (1 << 59));
        }
        assert_eq!(s.registers(), &[1u8; 16]);
        assert!(
            (s.estimate() - 0.673 * 256.0 / 8.0).abs() < 1e-9,
            "{}",
            s.estimate()
        );
    }

    #[test]
    fn malformed_snapshot_is_rejected() {
        let s = hll(4, 1);
        let mut v = serde_json::to_value(&s).unwrap();
        v["registers"] = serde_json::json!([0, 1]);
        assert!(serde_json::from_value::<HyperLogLog>(v).is_err());
        let mut v = serde_json::to_value(&s).unwrap();
        v["registers"][0] = serde_json::json!(200);
        assert!(serde_json::from_value::<HyperLogLog>(v).is_err());
    }
}
