//! The front end: what stands between the flow keys and the algorithms.
//!
//! A [`Front`] takes batches of keys with weights and hands a [`Sink`] (the algorithms) what
//! they must see: the same batch unchanged ([`Accel::None`]), or the aggregated (key, count)
//! updates Agg-Evict evicts ([`Accel::AggEvict`], Agg-Evict paper section 3). SketchVisor's
//! fast path and InstaMeasure's FlowRegulator are the next kinds. The runner (`measure`) and
//! the lab drive the same `Front`: the same update, the same epoch-end flush, and one way
//! ([`Front::timed`]) to charge a front its own time without the algorithms' time inside it.
//!
//! Invariant: a front never loses weight. Every packet offered reaches the sink, aggregated or
//! not, by the end of the epoch's [`Front::flush`].

#![forbid(unsafe_code)]

use std::time::Instant;

use aggevict::{AggConfig, AggError, Aggregator};
use algo::{Algorithm, KeyBatch};
use serde::{Deserialize, Serialize};

/// Which front end a run puts in front of its algorithms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Accel {
    /// Every packet is an update of every algorithm.
    #[default]
    None,
    /// Agg-Evict: the algorithms see aggregated (key, count) evictions (Agg-Evict section 3).
    AggEvict,
}

impl Accel {
    /// The name reports use (`none`, `agg_evict`).
    pub fn name(self) -> &'static str {
        match self {
            Accel::None => "none",
            Accel::AggEvict => "agg_evict",
        }
    }
}

/// Where a front hands its updates: the algorithms of one key kind.
pub trait Sink {
    /// Hand on one batch (keys and weights of the same length).
    fn feed(&mut self, keys: KeyBatch<'_>, weights: &[u64]);

    /// Nanoseconds spent in `feed` so far, if the sink times itself (the runner times each
    /// algorithm); [`Front::timed`] subtracts what it spent inside from the front's time.
    fn nanos(&self) -> u128 {
        0
    }
}

/// One algorithm as a sink, through the update that matches the batch's representation.
impl Sink for dyn Algorithm {
    #[inline]
    fn feed(&mut self, keys: KeyBatch<'_>, weights: &[u64]) {
        keys.feed(self, weights);
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FrontError {
    #[error(transparent)]
    AggEvict(#[from] AggError),
}

enum Kind {
    None,
    AggEvict(Box<Aggregator>),
}

/// A front end of one key kind.
pub struct Front {
    kind: Kind,
    /// Time charged by [`Front::timed`].
    nanos: u128,
}

/// What a front did over a run (none for [`Accel::None`]).
#[derive(Clone, Debug, PartialEq)]
pub struct FrontStats {
    pub accel: Accel,
    /// The SIMD kernel it uses.
    pub simd: String,
    pub memory_bytes: usize,
    /// Packets offered.
    pub packets: u64,
    /// Updates handed to the algorithms (evictions, epoch-end flushes, bypasses).
    pub passed: u64,
    /// `passed / packets`: the share of the per-packet work the algorithms still do.
    pub passed_share: f64,
    /// Time charged by [`Front::timed`].
    pub nanos: u128,
}

impl Front {
    pub fn none() -> Front {
        Front {
            kind: Kind::None,
            nanos: 0,
        }
    }

    /// The front `accel` for keys of `key_len` bytes (Agg-Evict configured by `agg`).
    pub fn new(accel: Accel, agg: &AggConfig, key_len: usize) -> Result<Front, FrontError> {
        let kind = match accel {
            Accel::None => Kind::None,
            Accel::AggEvict => Kind::AggEvict(Box::new(Aggregator::new(agg, key_len)?)),
        };
        Ok(Front { kind, nanos: 0 })
    }

    /// Offer one batch of packets, as full keys or (4-byte kinds) as u32 keys; the sink gets
    /// the batch itself or the aggregated updates, in the representation the front produces.
    #[inline]
    pub fn update(&mut self, keys: KeyBatch<'_>, weights: &[u64], sink: &mut (impl Sink + ?Sized)) {
        if keys.is_empty() {
            return;
        }
        match &mut self.kind {
            Kind::None => sink.feed(keys, weights),
            Kind::AggEvict(a) => a.update(keys, weights, &mut |k, w| sink.feed(k, w)),
        }
    }

    /// Epoch end: hand everything held to the sink. The front is then as new (statistics
    /// apart), ready for the next epoch.
    pub fn flush(&mut self, sink: &mut (impl Sink + ?Sized)) {
        if let Kind::AggEvict(a) = &mut self.kind {
            a.flush(&mut |k, w| sink.feed(k, w));
        }
    }

    /// Run `step` (an [`update`](Front::update) or a [`flush`](Front::flush) into `sink`) and
    /// charge its wall time, minus what `sink` reports spending inside, to this front. Without
    /// an accelerator the step runs untimed (there is no front time to measure).
    #[inline]
    pub fn timed<S: Sink + ?Sized>(&mut self, sink: &mut S, step: impl FnOnce(&mut Front, &mut S)) {
        if matches!(self.kind, Kind::None) {
            step(self, sink);
            return;
        }
        let inside = sink.nanos();
        let t = Instant::now();
        step(self, sink);
        let all = t.elapsed().as_nanos();
        self.nanos += all.saturating_sub(sink.nanos().saturating_sub(inside));
    }

    /// Forget the counters (after a warm-up pass).
    pub fn clear_stats(&mut self) {
        if let Kind::AggEvict(a) = &mut self.kind {
            a.reset_stats();
        }
        self.nanos = 0;
    }

    pub fn stats(&self) -> Option<FrontStats> {
        match &self.kind {
            Kind::None => None,
            Kind::AggEvict(a) => {
                let st = a.stats();
                Some(FrontStats {
                    accel: Accel::AggEvict,
                    simd: a.simd().to_string(),
                    memory_bytes: a.memory_bytes(),
                    packets: st.packets,
                    passed: st.evicted,
                    passed_share: st.evicted_share(),
                    nanos: self.nanos,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests;
