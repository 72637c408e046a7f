//! Adaptive Agg-Evict ([`AggMode::Auto`]): the front steps aside when aggregation does not pay.
//!
//! Agg-Evict pays when the per-packet work it removes from the algorithms exceeds its own
//! (Agg-Evict paper, section 4.3: with shuffled packets and low skew most packets are evicted
//! and the aggregator is pure overhead). Per window of [`WINDOW`] packets the front counts what
//! the aggregator achieved and, with a cost model of the aggregator (`aggevict::AggCost`:
//! ns per packet and per table lookup) and of the algorithms behind it (`algo::UpdateCost`,
//! ns per update, summed over the sink's algorithms: `sink_ns` fed the packets, `behind_ns`
//! fed the aggregator's evictions), decides whether the next window goes
//! through the aggregator or straight to the sink (bypass):
//!
//! ```text
//! with    = packet_ns + run_ns * lookups/packets + behind_ns * updates/packets
//! without = sink_ns
//! ```
//!
//! and aggregates while `with < without * (1 - MARGIN)`.
//!
//! `updates` are the updates the window's packets cause: misses (a pair inserted, now or by
//! eviction of another) plus pass-throughs, counted as the growth of `evicted + held` (a flush
//! moves pairs from held to evicted and changes nothing), so a window that fills an empty table
//! is charged for the pairs it leaves there. While bypassing, nothing is measured: a probe goes
//! through the aggregator after 1, 2, 4, ... [`MAX_GAP`] windows of bypass (doubling while
//! probes fail, back to 1 when one succeeds). A probe is a short window, 1/[`PROBE_DIV`] of a
//! window (the first window of a run is one too): where aggregation does not pay, a probe is
//! pure loss (the aggregator's cost, and the pairs it leaves behind for the epoch-end flush),
//! so steady unaggregatable traffic sends 1 packet in `PROBE_DIV * MAX_GAP + 1` (0.2%) through
//! the aggregator instead of one window in `MAX_GAP + 1` (1.5%, 3-5% of the run time of the
//! cheapest algorithms, measured). A window through the aggregator ends early once its table
//! lookups alone make it a loss ([`Model::lookup_limit`]; lookups only grow, so its verdict is
//! the one its end would give): in front of the cheapest algorithms a failing probe stops after
//! a fraction of its packets (FM on shuffled traffic: a third) and leaves as few pairs for the
//! epoch-end flush. The held pairs survive bypass, so a probe after the first starts from a
//! table that holds the heavy keys of the previous one, as a window of steady
//! aggregation does, rather than an empty one that would charge the probe for filling it.
//!
//! Deterministic: windows are counted in packets offered (a batch is split at a window's end),
//! the costs are constants, so the decisions depend only on the packets and their batches (the
//! run merge works within a batch's chunks of 32, so batching moves the lookups counted a
//! little, and a cut falls at the end of a batch), both fixed by the trace and the
//! configuration: no clock. Bypass keeps what the
//! aggregator holds (it is flushed at the epoch's end as always, or evicted by a later probe):
//! every packet reaches the sink exactly once, aggregated or not, so the order-independent
//! algorithms end in the same state either way (ALGORITHMS.md section 0).

use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Packets per decision window (about 0.4 ms at 150 Mpps; 30 windows in an epoch of 2 M).
pub const WINDOW: u64 = 1 << 16;

/// Most windows of bypass between two probes.
pub const MAX_GAP: u32 = 64;

/// A probe is `window / PROBE_DIV` packets (at least 1): 8192 in runs, enough packets to see
/// the share of misses of a warm table, few enough that a failed probe costs the cheapest
/// algorithms (FM, MRAC: 2-3 ns an update against 5-7 ns through the aggregator on shuffled
/// traffic) about 0.2% at the widest gap.
pub const PROBE_DIV: u64 = 8;

/// Aggregation must save at least this share of the algorithms' cost: a tie by the model is
/// taken as a loss, since every window through the aggregator also pays for its table's
/// cache lines and for a probe's pairs held to the epoch's end. Small, because the model is
/// close: with the constants measured in one process and `behind` measured with the aggregator
/// running beside the algorithm (cache contention included), the model's with/without ratio
/// was within about 0.05 of thread-CPU-time runs on shuffled Zipf 0.6-1.1 (docs/agg-evict-results.md,
/// "Issue 14 point 1 (2026-11-25, h-adapt)"); at 0.1 the front stood aside where aggregating
/// measured 12-14% faster (UnivMon at 0.6, Space-Saving at 0.8).
pub const MARGIN: f64 = 0.05;

/// Whether Agg-Evict may step aside (`--agg-mode`, `agg_mode` in a run configuration).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AggMode {
    /// Aggregate while the cost model says it pays, bypass otherwise, probing periodically.
    #[default]
    Auto,
    /// Every packet goes through the aggregator (the paper's Agg-Evict).
    Always,
}

impl AggMode {
    /// Every mode's name, as `--agg-mode` and the configuration take them.
    pub const NAMES: [&'static str; 2] = ["auto", "always"];

    pub fn name(self) -> &'static str {
        match self {
            AggMode::Auto => "auto",
            AggMode::Always => "always",
        }
    }
}

/// An unknown `--agg-mode` value; the message lists the choices.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown agg mode `{0}` (expected one of: auto, always)")]
pub struct UnknownMode(pub String);

impl FromStr for AggMode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<AggMode, UnknownMode> {
        match s {
            "auto" => Ok(AggMode::Auto),
            "always" => Ok(AggMode::Always),
            _ => Err(UnknownMode(s.to_string())),
        }
    }
}

/// The cost model of one front: the aggregator's constants on its key path and the summed
/// per-update cost of the algorithms it feeds, on the packets themselves and on what the
/// aggregator hands on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Model {
    pub agg: aggevict::AggCost,
    /// ns per update of every algorithm behind the front together, fed the packets.
    pub sink_ns: f64,
    /// The same fed the aggregator's evictions (`algo::UpdateCost::behind` times `sink_ns`):
    /// the aggregator keeps the heavy keys' packets, so what it hands on is more the tail's
    /// (cold cells, new flows), which costs some algorithms more per update (measured:
    /// FlowRadar aggregated on shuffled Zipf 0.8 by the packets' figure and ran at 0.86x).
    pub behind_ns: f64,
}

impl Model {
    /// Whether a window of `packets` that made `lookups` table lookups and caused `updates`
    /// updates was cheaper through the aggregator than without it.
    pub fn pays(&self, packets: u64, lookups: u64, updates: u64) -> bool {
        let p = packets.max(1) as f64;
        let with = self.agg.packet_ns
            + self.agg.run_ns * lookups as f64 / p
            + self.behind_ns * updates as f64 / p;
        with < self.sink_ns * (1.0 - MARGIN)
    }

    /// Table lookups past which a window of `packets` cannot pay, whatever its updates: the
    /// aggregator's per-packet and per-lookup costs alone reach the algorithms' cost less the
    /// margin (0 where even a window without lookups would not pay). Lookups only grow, so
    /// the front ends a window there ([`Adapt::cut`]) with the verdict its end would give.
    pub fn lookup_limit(&self, packets: u64) -> u64 {
        let room = (self.sink_ns * (1.0 - MARGIN) - self.agg.packet_ns) * packets as f64;
        if room <= 0.0 {
            0
        } else if self.agg.run_ns <= 0.0 {
            u64::MAX
        } else {
            // At this many lookups `with >= sink_ns * (1 - MARGIN)`: `pays` says no.
            (room / self.agg.run_ns).ceil() as u64
        }
    }
}

/// Aggregator counters at a window's start.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Mark {
    pub(crate) runs: u64,
    /// `evicted + held`.
    pub(crate) updates: u64,
}

/// The decision state of one front.
#[derive(Clone, Debug)]
pub(crate) struct Adapt {
    model: Model,
    window: u64,
    /// Packets of a probe (`window / PROBE_DIV`, at least 1).
    probe: u64,
    /// Packets of the current window (`window`, or `probe` for a probe).
    len: u64,
    /// Packets left in the current window.
    pub(crate) left: u64,
    /// The current window goes through the aggregator.
    pub(crate) on: bool,
    /// Windows of bypass after the next failed probe.
    gap: u32,
    /// Windows of bypass left before the next probe.
    wait: u32,
    mark: Mark,
    /// The aggregator's lookup count at which the current window, if through the aggregator,
    /// cannot pay any more ([`Model::lookup_limit`]); `u64::MAX` while standing aside.
    pub(crate) cut_runs: u64,
    /// Decisions that changed the path.
    pub(crate) switches: u64,
    /// Packets of the windows ended since the start (or the last restart), and of those the
    /// bypassed ones: the front counts packets by window, not by batch.
    done: u64,
    done_off: u64,
}

impl Adapt {
    pub(crate) fn new(model: Model, window: u64) -> Adapt {
        let window = window.max(1);
        let probe = (window / PROBE_DIV).max(1);
        Adapt {
            model,
            window,
            probe,
            // The first window is a probe.
            len: probe,
            left: probe,
            on: true,
            gap: 1,
            wait: 0,
            mark: Mark::default(),
            cut_runs: model.lookup_limit(probe),
            switches: 0,
            done: 0,
            done_off: 0,
        }
    }

    /// The lookup count at which a window of `len` packets through the aggregator, started
    /// at `mark`, is cut.
    fn cut_at(&self) -> u64 {
        if self.on {
            self.mark
                .runs
                .saturating_add(self.model.lookup_limit(self.len))
        } else {
            u64::MAX
        }
    }

    /// The counters were cleared (after a lab's warm-up): a new window starts from `now` on
    /// the current path, and switches count from zero.
    pub(crate) fn restart(&mut self, now: Mark) {
        self.mark = now;
        self.left = self.len;
        self.cut_runs = self.cut_at();
        self.switches = 0;
        self.done = 0;
        self.done_off = 0;
    }

    /// Packets offered since the start (or the last restart), and of those the ones handed on
    /// while the aggregator stood aside.
    pub(crate) fn counted(&self) -> (u64, u64) {
        let now = self.len - self.left;
        (
            self.done + now,
            self.done_off + if self.on { 0 } else { now },
        )
    }

    /// The current window is over: decide the next one. `now` reads the aggregator's counters
    /// (only where a window through the aggregator ends or starts: `Aggregator::held` counts
    /// the table's 2000 occupancy words, about 1% of FM's time if read at every window).
    pub(crate) fn end_window(&mut self, now: impl FnOnce() -> Mark) {
        self.close(now, false);
    }

    /// The current window, through the aggregator, made `cut_runs` lookups before its end: it
    /// cannot pay ([`Model::lookup_limit`]), so it ends here with the verdict its end would
    /// give, and its remaining packets take the next window's path. Where aggregation never
    /// pays, this is what a probe costs: on shuffled traffic in front of FM (2.4 ns an update)
    /// a probe fails after about a third of its packets, and leaves a third of the pairs to
    /// the epoch-end flush.
    pub(crate) fn cut(&mut self, now: impl FnOnce() -> Mark) {
        self.close(now, true);
    }

    fn close(&mut self, now: impl FnOnce() -> Mark, cut: bool) {
        // Between two windows of bypass nothing is measured.
        let now = (self.on || self.wait <= 1).then(now);
        // The window that ended (early when cut); the next one is a full window unless it is a
        // probe.
        let ended = self.len - self.left;
        self.done += ended;
        if !self.on {
            self.done_off += ended;
        }
        self.len = self.window;
        if let (true, Some(now)) = (self.on, now) {
            let lookups = now.runs.saturating_sub(self.mark.runs);
            let updates = now.updates.saturating_sub(self.mark.updates);
            if !cut && self.model.pays(ended, lookups, updates) {
                self.gap = 1;
            } else {
                self.on = false;
                self.switches += 1;
                self.wait = self.gap;
                self.gap = (self.gap * 2).min(MAX_GAP);
            }
        } else {
            self.wait = self.wait.saturating_sub(1);
            if self.wait == 0 {
                self.on = true;
                self.switches += 1;
                self.len = self.probe;
            }
        }
        if let Some(now) = now {
            self.mark = now;
        }
        self.left = self.len;
        self.cut_runs = self.cut_at();
    }
}
