//! The Agg-Evict settings a figure varies, and the front end they make (`front::Front`, the
//! same one the runner drives).

use aggevict::{AggConfig, Aggregator, Policy, Simd};
use algo::KeyBatch;
use front::{Accel, AggMode, Front};
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
    /// `Always` (the paper's Agg-Evict) in every figure but 5, which takes `--agg-mode`.
    pub mode: AggMode,
}

impl Default for AggSpec {
    /// Section 4.1: k = 2000 arrays (about 258 KB), GRR, the best SIMD kernel.
    fn default() -> Self {
        AggSpec {
            arrays: 2000,
            policy: Policy::Grr,
            simd: Simd::Auto,
            mode: AggMode::Always,
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

/// The front end of a run of `algorithm`: none, or an aggregator with these settings (in
/// `Auto` mode weighed against the algorithm's update cost in the lab's preset,
/// `catalog::presets::cost`, as a run weighs its entries' `algo::Entry::cost`).
pub(crate) fn front(
    spec: Option<&AggSpec>,
    key_len: usize,
    algorithm: &str,
) -> Result<Front, LabError> {
    Ok(match spec {
        Some(spec) => {
            let (sink_ns, behind_ns) = catalog::presets::cost(crate::PRESET, algorithm)
                .map_or((0.0, 0.0), |c| (c.ns(key_len), c.ns(key_len) * c.behind));
            Front::new(Accel::AggEvict, &spec.config(), key_len)?.with_costs(
                spec.mode,
                sink_ns,
                behind_ns,
                front::WINDOW,
            )
        }
        None => Front::none(),
    })
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
