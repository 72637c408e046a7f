//! Instant detection (InstaMeasure section II: a heavy hitter reported "the moment" its count
//! crosses the threshold, not at the epoch's end): what an algorithm that can detect on its
//! packet path logs, for the runner to stamp with capture time.
//!
//! An update carries no time, so an armed algorithm logs each crossing with the position of the
//! update that caused it among the updates it was given since the last drain
//! ([`crate::Algorithm::drain_crossings`]); the caller, which drains after every batch, knows
//! each position's packet and its timestamp.

use key::FlowKey;
use serde::{Deserialize, Serialize};

/// One flow whose detection estimate crossed the threshold.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Crossing {
    /// Position of the update that crossed, counted from 0 over every update given (batched or
    /// not, skipped or not) since the last drain.
    pub at: u64,
    pub key: FlowKey,
    /// The algorithm's estimate of the flow at that update (run's weight).
    pub estimate: f64,
    /// The detection estimate that crossed (the algorithm's own rule: for InstaMeasure a lower
    /// bound, below `estimate`).
    pub bound: f64,
}
