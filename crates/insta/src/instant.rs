//! Instant detection (InstaMeasure section II, Figure 9): a heavy hitter reported on the packet
//! path, at the packet after which its count reaches the threshold, instead of at the epoch's
//! end.
//!
//! Estimate semantics. A flow's estimate is its table count plus what the regulator still holds
//! (`InstaMeasure::estimate`). It is unbiased, not a lower bound: an emission adds the expected
//! packets of a saturation cycle of cycles (`UNIT[c1] x UNIT[c2]`, about 95), and the packets
//! the flow actually sent in that cycle vary around it with the renewal variance of
//! [`crate::spread`] (a coupon collector's cycle: 36 packets at least with no noise, 1 when other
//! flows' bits fill the vector). Read as is, it crosses the threshold before the true count in
//! about half of the flows (measured: `bench instameasure --figure 9`, `early`).
//!
//! Detection rule. A flow is detected at the first L1 saturation (or emission) of its packets
//! after which the *detection estimate*, [`lower`], reaches the threshold:
//! `lower(n) = n - z sigma(n)`, `n` the flow's estimate in packets, `sigma(n) = n spread(n)` the
//! renewal standard deviation of a count of `n` packets and `z` the `instant_sigmas` parameter
//! (converted to the run's weight with the flow's mean weight per packet). Between two L1
//! saturations the estimate moves only by what one L1 vector holds (at most one unit, about
//! 10 packets), so looking at L1 saturations costs a table lookup for about one packet in 10 of
//! an armed instance, and at most one unit of delay. Only flows in the table can be detected
//! (only they have keys), as only they are answered.
//!
//! Guarantee (stated in packets, tested in `tests/instant.rs`). A flow alone in its words has
//! `estimate(n) - n` a sum of independent cycle errors; detection at true count `n < T` needs
//! `estimate(n) - n >= T - n + z sigma(n)`. The error's standard deviation at `T` is
//! `sigma(T)`, so by the reflection bound on its running maximum a detection fires before the
//! true count reaches `T - (TOLERANCE_SIGMAS - z) sigma(T)` with probability about
//! `2 (1 - Phi(TOLERANCE_SIGMAS))` = 6e-5 per flow; for `z >= TOLERANCE_SIGMAS` that bound is
//! `T` itself: detection never fires before the true count crossed, except with that
//! probability. What the rule costs is the delay of about `z sigma(T)` packets past the true
//! crossing (the report's detection delay).

use algo::Crossing;
use serde::{Deserialize, Serialize};

/// How many standard deviations of the count below its crossing a detection may fire, at worst
/// (module docs): 4, a first-passage probability of about 6e-5 per flow.
pub const TOLERANCE_SIGMAS: f64 = 4.0;

/// The detection estimate of a flow estimated at `packets` (module docs): `packets - z
/// sigma(packets)`, the one definition `--instant` and `bench instameasure --figure 9` use.
pub fn lower(two_layers: bool, packets: f64, z: f64) -> f64 {
    packets - z * sigma(two_layers, packets)
}

/// The standard deviation of instant detection's count of a flow of `packets` packets (module
/// docs): one two-layer cycle (the emission that inserted the flow) and one-layer cycles for the
/// rest (`cycle(one layer)` per L1 saturation); with one layer, one-layer cycles throughout.
pub fn sigma(two_layers: bool, packets: f64) -> f64 {
    let (m1, v1) = crate::cycle(false);
    if !two_layers {
        return (v1 / m1 * packets.max(1.0)).sqrt();
    }
    let (m2, v2) = crate::cycle(true);
    (v2 + v1 / m1 * (packets - m2).max(0.0)).sqrt()
}

/// The least true count (packets) at which a detection at threshold `t` packets may fire, with
/// `z` standard deviations in the rule: `t - (TOLERANCE_SIGMAS - z) sigma(t)`, at most `t`.
pub fn earliest(two_layers: bool, t: f64, z: f64) -> f64 {
    t - (TOLERANCE_SIGMAS - z).max(0.0) * sigma(two_layers, t)
}

/// An armed instance's detector: the threshold, and the crossings since the last drain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Detector {
    /// Run's weight.
    pub threshold: u64,
    /// Position of the next update call's first update since the last drain.
    pub base: u64,
    pub log: Vec<Crossing>,
}

impl Detector {
    pub fn new(threshold: u64) -> Detector {
        Detector {
            threshold,
            base: 0,
            log: Vec::new(),
        }
    }

    /// Move the log into `out`; positions restart at 0.
    pub fn drain(&mut self, out: &mut Vec<Crossing>) {
        out.append(&mut self.log);
        self.base = 0;
    }

    pub fn reset(&mut self) {
        self.log.clear();
        self.base = 0;
    }
}
