//! The front end between the trace and the algorithm: nothing, or an Agg-Evict aggregator.

use aggevict::{AggConfig, Aggregator, Policy, Simd};
use algo::{Algorithm, KeyBatch};
use key::{FlowKey, KeyKind};

use crate::workload::Workload;
use crate::LabError;

/// Aggregator settings a figure varies (the rest are the paper's defaults: modulo index,
/// eviction batches of 32).
#[derive(Clone, Debug)]
pub struct AggSpec {
    pub arrays: usize,
    pub policy: Policy,
    pub simd: Simd,
}

impl Default for AggSpec {
    /// Section 4.1: k = 2000 arrays (about 258 KB), GRR, the best SIMD kernel.
    fn default() -> Self {
        AggSpec {
            arrays: 2000,
            policy: Policy::Grr,
            simd: Simd::Auto,
        }
    }
}

impl AggSpec {
    fn config(&self) -> AggConfig {
        AggConfig {
            arrays: self.arrays,
            policy: self.policy,
            simd: self.simd,
            ..AggConfig::default()
        }
    }
}

/// What sits in front of the algorithm.
pub enum Front {
    None,
    Agg(Box<Aggregator>),
}

impl Front {
    pub fn none() -> Front {
        Front::None
    }

    pub fn agg(spec: &AggSpec, key_len: usize) -> Result<Front, LabError> {
        Ok(Front::Agg(Box::new(Aggregator::new(
            &spec.config(),
            key_len,
        )?)))
    }

    /// Offer one batch of packets, as full keys or (4-byte kinds) as u32 keys: the baseline
    /// feeds the algorithm the same representation the aggregator gets, and the aggregator's
    /// evictions reach it through the matching update (`KeyBatch::feed`).
    #[inline]
    pub fn update(&mut self, keys: KeyBatch<'_>, weights: &[u64], algo: &mut dyn Algorithm) {
        if keys.is_empty() {
            return;
        }
        match self {
            Front::None => keys.feed(algo, weights),
            Front::Agg(a) => a.update(keys, weights, &mut |k, w| k.feed(algo, w)),
        }
    }

    /// Epoch end: hand everything held to the algorithm. The aggregator is then as new.
    pub fn flush(&mut self, algo: &mut dyn Algorithm) {
        if let Front::Agg(a) = self {
            a.flush(&mut |k, w| k.feed(algo, w));
        }
    }

    /// Nothing to do beyond `flush` (which leaves the aggregator empty); kept so the epoch-end
    /// sequence reads the same for both front ends.
    pub fn reset(&mut self) {}

    pub fn clear_stats(&mut self) {
        if let Front::Agg(a) = self {
            a.reset_stats();
        }
    }

    /// Updates reaching the algorithm per packet (evictions + flushes over packets offered).
    pub fn evicted_share(&self) -> Option<f64> {
        match self {
            Front::None => None,
            Front::Agg(a) => Some(a.stats().evicted_share()),
        }
    }

    pub fn simd_name(&self) -> String {
        match self {
            Front::None => String::new(),
            Front::Agg(a) => a.simd().name().to_string(),
        }
    }
}

/// The aggregator alone over the whole trace (flushed every `epoch` packets), untimed: the share
/// of packets that reach the algorithm.
pub fn share_only(
    w: &Workload,
    spec: &AggSpec,
    kind: KeyKind,
    epoch: usize,
) -> Result<f64, LabError> {
    let epoch = epoch.max(1);
    let mut agg = Aggregator::new(&spec.config(), w.key_len(kind))?;
    let ones = vec![1u64; 32];
    let mut keys: Vec<FlowKey> = Vec::new();
    let mut u32s = Vec::new();
    let mut start = 0;
    let mut sink = |_: KeyBatch<'_>, _: &[u64]| {};
    while start < w.len() {
        if w.has_u32_keys(kind) {
            w.keys_u32_into(start, start + epoch, kind, &mut u32s);
            for b in u32s.chunks(32) {
                agg.update_batch_u32(b, &ones[..b.len()], &mut sink);
            }
        } else {
            w.keys_into(start, start + epoch, kind, &mut keys);
            for b in keys.chunks(32) {
                agg.update_batch(b, &ones[..b.len()], &mut sink);
            }
        }
        agg.flush(&mut sink);
        start += epoch;
    }
    Ok(agg.stats().evicted_share())
}
