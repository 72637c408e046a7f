//! Configuration: [`AggConfig`] (the paper's section 4.1 defaults), its enums ([`Policy`],
//! [`Simd`], [`Index`]) with their names and parsing, the limits, and [`AggError`].

use std::fmt;
use std::str::FromStr;

use key::MAX_KEY_LEN;
use serde::{Deserialize, Serialize};

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
                        expected: concat!($($n, ", "),+).trim_end_matches(", "),
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

/// Largest `arrays`: 2^20 arrays of 16 slots are 16.7 M pairs, about 136 MB with 4-byte keys and
/// up to about 420 MB with 16-byte flow IDs; the paper's largest aggregator is 16,000 arrays
/// (Figure 7c). (2^24, the limit before, took 6.3 GB with wide keys.)
pub const MAX_ARRAYS: usize = 1 << 20;
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
