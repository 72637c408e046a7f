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
//! not, by the end of the epoch's [`Front::flush`]. With [`AggMode::Auto`] (the default) an
//! Agg-Evict front steps aside, window by window, when a cost model says aggregation does not
//! pay (module `adapt`); it never changes what the sink's order-independent algorithms end with.

#![forbid(unsafe_code)]

use std::time::Instant;

use aggevict::{AggConfig, AggError, Aggregator};
use algo::{Algorithm, KeyBatch};
use serde::{Deserialize, Serialize};

mod adapt;
use adapt::{Adapt, Mark};
pub use adapt::{AggMode, Model, UnknownMode, MARGIN, MAX_GAP, PROBE_DIV, WINDOW};

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
    /// [`AggMode::Auto`] on an Agg-Evict front: the per-window decision.
    adapt: Option<Adapt>,
    /// Packets offered to an Agg-Evict front without [`Adapt`] (the aggregator counts only
    /// those it was given; with [`Adapt`] its windows count them, [`Adapt::counted`]).
    packets: u64,
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
    /// Updates handed to the algorithms (evictions, epoch-end flushes, bypasses, and the
    /// packets handed on directly while the aggregator stood aside).
    pub passed: u64,
    /// `passed / packets`: the share of the per-packet work the algorithms still do.
    pub passed_share: f64,
    /// Time charged by [`Front::timed`].
    pub nanos: u128,
    pub mode: AggMode,
    /// Packets that went through the aggregator (all of them with [`AggMode::Always`]).
    pub through: u64,
    /// Decisions that switched between aggregating and standing aside ([`AggMode::Auto`]).
    pub switches: u64,
}

impl Front {
    pub fn none() -> Front {
        Front {
            kind: Kind::None,
            nanos: 0,
            adapt: None,
            packets: 0,
        }
    }

    /// The front `accel` for keys of `key_len` bytes (Agg-Evict configured by `agg`).
    pub fn new(accel: Accel, agg: &AggConfig, key_len: usize) -> Result<Front, FrontError> {
        let kind = match accel {
            Accel::None => Kind::None,
            Accel::AggEvict => Kind::AggEvict(Box::new(Aggregator::new(agg, key_len)?)),
        };
        Ok(Front {
            kind,
            nanos: 0,
            adapt: None,
            packets: 0,
        })
    }

    /// Set the Agg-Evict mode: with [`AggMode::Auto`] the front decides per window of `window`
    /// packets ([`WINDOW`] in runs) whether to aggregate, weighing the aggregator's cost on
    /// its key path against `sink_ns`, the summed ns per update of the algorithms it feeds
    /// (their `algo::Entry::cost`), taken to cost as much per update of its evictions. No
    /// effect on a front without an aggregator.
    pub fn with_mode(self, mode: AggMode, sink_ns: f64, window: u64) -> Front {
        self.with_costs(mode, sink_ns, sink_ns, window)
    }

    /// [`Front::with_mode`] with the algorithms' cost on the aggregator's evictions too,
    /// `behind_ns` (the sum of their `algo::UpdateCost::behind` times their ns per update):
    /// what aggregation leaves them costs that much per update ([`Model::behind_ns`]).
    pub fn with_costs(mut self, mode: AggMode, sink_ns: f64, behind_ns: f64, window: u64) -> Front {
        self.adapt = match (&self.kind, mode) {
            (Kind::AggEvict(a), AggMode::Auto) => {
                let agg = if a.is_narrow() {
                    aggevict::COST_U32
                } else {
                    aggevict::COST_WIDE
                };
                Some(Adapt::new(
                    Model {
                        agg,
                        sink_ns,
                        behind_ns,
                    },
                    window,
                ))
            }
            _ => None,
        };
        self
    }

    /// The aggregator's counters a window is judged by.
    fn mark(a: &Aggregator) -> Mark {
        let st = a.stats();
        Mark {
            runs: st.runs,
            updates: st.evicted + a.held(),
        }
    }

    /// Offer one batch of packets, as full keys or (4-byte kinds) as u32 keys; the sink gets
    /// the batch itself or the aggregated updates, in the representation the front produces.
    #[inline]
    pub fn update(&mut self, keys: KeyBatch<'_>, weights: &[u64], sink: &mut (impl Sink + ?Sized)) {
        // The common cases, small enough to inline into the caller's loop: no front, and a
        // batch inside a window of bypass (one compare and the algorithm's own call; the window
        // counts its packets, not each batch). For the cheapest algorithms (FM, 2.4 ns a
        // packet) a call with its register saves and a few compares a batch are a few percent
        // (cachegrind: 15-17 instructions a batch of 32 more than no front, about 1.4% of FM's).
        if keys.is_empty() {
            return;
        }
        match &mut self.adapt {
            None if matches!(self.kind, Kind::None) => return sink.feed(keys, weights),
            Some(ad) if !ad.on && ad.left > keys.len() as u64 && keys.len() == weights.len() => {
                ad.left -= keys.len() as u64;
                return sink.feed(keys, weights);
            }
            _ => {}
        }
        self.update_rest(keys, weights, sink);
    }

    /// [`Front::update`] past its inlined cases: aggregation, and batches that end a window.
    #[inline(never)]
    fn update_rest(
        &mut self,
        keys: KeyBatch<'_>,
        weights: &[u64],
        sink: &mut (impl Sink + ?Sized),
    ) {
        // A batch inside the current window through the aggregator.
        if let Some(ad) = &mut self.adapt {
            let len = keys.len() as u64;
            if ad.left > len && keys.len() == weights.len() {
                ad.left -= len;
                if !ad.on {
                    sink.feed(keys, weights);
                } else if let Kind::AggEvict(a) = &mut self.kind {
                    a.update(keys, weights, &mut |k, w| sink.feed(k, w));
                    if a.stats().runs >= ad.cut_runs {
                        ad.cut(|| Self::mark(a));
                    }
                }
                return;
            }
        }
        let Kind::AggEvict(a) = &mut self.kind else {
            sink.feed(keys, weights);
            return;
        };
        let Some(ad) = &mut self.adapt else {
            self.packets += keys.len() as u64;
            a.update(keys, weights, &mut |k, w| sink.feed(k, w));
            return;
        };
        // Split at window ends: a window is `window` packets whatever the batch sizes.
        let (mut keys, mut weights) = (keys, weights);
        while !keys.is_empty() {
            let n = (ad.left.min(keys.len() as u64) as usize).min(weights.len());
            if n == 0 {
                break;
            }
            let (k, rest) = keys.split_at(n);
            let (w, wrest) = weights.split_at(n);
            if ad.on {
                a.update(k, w, &mut |k, w| sink.feed(k, w));
            } else {
                sink.feed(k, w);
            }
            ad.left -= n as u64;
            if ad.left == 0 {
                ad.end_window(|| Self::mark(a));
            } else if ad.on && a.stats().runs >= ad.cut_runs {
                ad.cut(|| Self::mark(a));
            }
            (keys, weights) = (rest, wrest);
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
            if let Some(ad) = &mut self.adapt {
                ad.restart(Self::mark(a));
            }
        }
        self.nanos = 0;
        self.packets = 0;
    }

    pub fn stats(&self) -> Option<FrontStats> {
        match &self.kind {
            Kind::None => None,
            Kind::AggEvict(a) => {
                let st = a.stats();
                let (packets, stepped) = self
                    .adapt
                    .as_ref()
                    .map_or((self.packets, 0), Adapt::counted);
                let passed = st.evicted + stepped;
                Some(FrontStats {
                    accel: Accel::AggEvict,
                    simd: a.simd().to_string(),
                    memory_bytes: a.memory_bytes(),
                    packets,
                    passed,
                    passed_share: passed as f64 / packets.max(1) as f64,
                    nanos: self.nanos,
                    mode: if self.adapt.is_some() {
                        AggMode::Auto
                    } else {
                        AggMode::Always
                    },
                    through: st.packets,
                    switches: self.adapt.as_ref().map_or(0, |ad| ad.switches),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests;
