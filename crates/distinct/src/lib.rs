//! Distinct counters and the per-source Bloom-filter superspreader.
//!
//! | name              | struct           | task                  | merge                 |
//! |-------------------|------------------|-----------------------|-----------------------|
//! | `fm`              | [`Fm`]           | cardinality           | OR (bit-exact)        |
//! | `linear_counting` | [`LinearCounting`] | cardinality         | OR (bit-exact)        |
//! | `hyperloglog`     | [`HyperLogLog`]  | cardinality           | max (bit-exact)       |
//! | `kmin`            | [`KMin`]         | cardinality           | union, keep k (exact) |
//! | `bloom_spreader`  | [`BloomSpreader`] | superspreaders / ddos | OR + re-estimate (approximate) |
//!
//! The four counters are *idempotent* (ALGORITHMS.md section 0, class B): the weight is ignored,
//! repeats are no-ops and any order gives the same state, so Agg-Evict in front of them changes
//! nothing and the merge of per-core or per-host states equals the state of the union stream.
//! The Bloom-filter superspreader is order-dependent (class C): which destination is a Bloom
//! false positive depends on arrival order.
//!
//! Every structure hashes a key once with the seeded, portable [`key::HashFn`] and derives
//! everything else from that one 64-bit value; the module docs say how and why.

use algo::{BuildCtx, ConfigError};

pub mod bloom_spreader;
pub mod fm;
pub mod hyperloglog;
pub mod kmin;
pub mod linear_counting;

pub use bloom_spreader::{BloomSpreader, BloomSpreaderConfig};
pub use fm::{Fm, FmConfig};
pub use hyperloglog::{HyperLogLog, HyperLogLogConfig};
pub use kmin::{KMin, KMinConfig};
pub use linear_counting::{LinearCounting, LinearCountingConfig};

/// The algorithm names this crate builds (stable, snake_case).
pub const NAMES: &[&str] = &[
    fm::NAME,
    linear_counting::NAME,
    hyperloglog::NAME,
    kmin::NAME,
    bloom_spreader::NAME,
];

/// Build the algorithm `name` from its parameter table, or `Ok(None)` if this crate does not
/// provide `name`.
pub fn build(
    name: &str,
    params: &toml::Table,
    ctx: &BuildCtx,
) -> Result<Option<Box<dyn algo::Algorithm>>, ConfigError> {
    let algo: Box<dyn algo::Algorithm> = match name {
        fm::NAME => Box::new(Fm::new(
            algo::parse_params::<FmConfig>(fm::NAME, params)?,
            ctx,
        )?),
        linear_counting::NAME => Box::new(LinearCounting::new(
            algo::parse_params::<LinearCountingConfig>(linear_counting::NAME, params)?,
            ctx,
        )?),
        hyperloglog::NAME => Box::new(HyperLogLog::new(
            algo::parse_params::<HyperLogLogConfig>(hyperloglog::NAME, params)?,
            ctx,
        )?),
        kmin::NAME => Box::new(KMin::new(
            algo::parse_params::<KMinConfig>(kmin::NAME, params)?,
            ctx,
        )?),
        bloom_spreader::NAME => Box::new(BloomSpreader::new(
            algo::parse_params::<BloomSpreaderConfig>(bloom_spreader::NAME, params)?,
            ctx,
        )?),
        _ => return Ok(None),
    };
    Ok(Some(algo))
}

/// Keys hashed per block in the batched update paths: enough to hide a DRAM miss behind the
/// prefetches of the following keys, small enough to stay on the stack.
pub(crate) const BATCH_BLOCK: usize = 16;

pub(crate) use key::prefetch;

/// `(x * n) >> 32`: maps a 32-bit hash uniformly onto `0..n` for `n <= 2^32` (Lemire), the
/// 32-bit twin of [`key::reduce`] used where two 32-bit halves of one hash are needed.
#[inline(always)]
pub(crate) fn reduce32(x: u32, n: usize) -> usize {
    ((x as u64 * n as u64) >> 32) as usize
}

/// Linear-counting estimate `-m ln(zeros/m)` of the number of distinct items thrown into `m`
/// cells (Whang et al. 1990); `zeros` must be > 0.
#[inline]
pub(crate) fn linear_count(m: f64, zeros: f64) -> f64 {
    m * (m / zeros).ln()
}

#[cfg(test)]
pub(crate) mod testutil;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_knows_its_names_and_only_those() {
        let ctx = BuildCtx::default();
        let empty = toml::Table::new();
        for &n in NAMES {
            let a = build(n, &empty, &ctx).unwrap().unwrap();
            assert_eq!(a.name(), n);
            assert!(!a.tasks().is_empty());
        }
        assert!(build("count_min", &empty, &ctx).unwrap().is_none());
    }

    #[test]
    fn build_rejects_unknown_and_invalid_fields() {
        let ctx = BuildCtx::default();
        let mut t = toml::Table::new();
        t.insert("bogus".into(), toml::Value::Integer(1));
        for &n in NAMES {
            let e = build(n, &t, &ctx).err().unwrap();
            assert!(e.to_string().contains("bogus"), "{e}");
        }
        let cases = [
            ("fm", "bitmaps", 0),
            ("linear_counting", "rows", 0),
            ("linear_counting", "bits", 0),
            ("hyperloglog", "precision", 3),
            ("hyperloglog", "precision", 19),
            ("kmin", "k", 2),
            ("bloom_spreader", "bits", 0),
            ("bloom_spreader", "hashes", 0),
        ];
        for (name, field, v) in cases {
            let mut t = toml::Table::new();
            t.insert(field.into(), toml::Value::Integer(v));
            match build(name, &t, &ctx) {
                Err(ConfigError::Invalid { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{name}.{field} = {v}: {:?}", other.map(|a| a.is_some())),
            }
        }
    }

    #[test]
    fn reduce32_stays_in_range() {
        for n in [1usize, 3, 1000, 1 << 21, 1 << 32] {
            for x in [0u32, 1, u32::MAX, 0x8000_0000] {
                assert!(reduce32(x, n) < n);
            }
        }
    }
}
