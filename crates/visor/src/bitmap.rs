//! Restoring the distinct-count sketches (FM, kMin, Linear Counting) after a fast path took part
//! of the traffic: SketchVisor's answer for them (paper section 7.3, Figure 9: "all the three
//! sketches estimate cardinality based on non-zero counters ... NR, LR, and UR end up with many
//! zero counters in the sketch ... SketchVisor restores non-zero counters with compressive
//! sensing"), with the occupancy rule the paper leaves open (`../shared/RECOVERY.md` 3, last
//! bullet, and 7: "Y is dense ... the threshold τ_occ must be calibrated against Ideal ... Open
//! question").
//!
//! A distinct counter's state is a function of the *set* of keys it saw, so what the normal path
//! missed is a number of flows, not a volume: LowerRecovery injects the tracked flows, and the
//! flows that sent every packet to the fast path and were not tracked (`D` of them) are missing.
//! Spreading the untracked volume `V - sum lo` over the counters (the paper's `Y`) sets every
//! zero bit (RECOVERY.md 7), so the rule here counts flows instead, and restores them as `D`
//! synthetic distinct keys (fixed seed) fed through the sketch's own update: for FM, kMin and
//! Linear Counting that is, bit for bit in distribution, the state of `D` more distinct flows.
//!
//! ## The rule (uniform-overflow prior, issue 36 point 3)
//!
//! Each packet takes the fast path with the epoch's packet share `p` (the FIFO drops whatever
//! arrives while it is full, section 3.1), read from [`Summary::paths`]: a flow of `s` packets is
//! missed by the normal path with probability `p^s`. The untracked flows' sizes are modelled by
//! Fisher's log-series `P(s) = -θ^s / (s ln(1-θ))` (the species-abundance law that binomial
//! sampling maps into itself; mean `-θ / ((1-θ) ln(1-θ))`), so `g = E[p^s] = ln(1-θp) / ln(1-θ)`.
//! Its one parameter comes from the data: the untracked flows' mean size
//! `s̄ = U / (p (n_N + D))`, with `U` the untracked fast-path packets (`V - sum lo`, converted
//! from the run's weight by the fast path's packets per unit of weight) and `n_N` the sketch's
//! own estimate minus the tracked flows. Then `D = n_N g / (1 - g)` (the `n_N` seen flows are the
//! `1 - g` share of them), solved by the increasing fixed-point iteration from `D = 0`, and
//! capped by `U`: a missing flow sent at least one untracked packet, so however the overflow
//! was skewed the restored count cannot exceed the untracked volume.
//!
//! Calibration against Ideal (the same sketch fed every packet; `tests/bitmap.rs`, Zipf(1.0)
//! traces through the real fast path, 8 KB): on 2 M packets over 100 k flows the true `D` is
//! 5.7 k (share 0.3) and 13.2 k (0.5) and the rule gives about 1.4x and 1.2x of it; on 400 k
//! packets (many more small flows) 9.5 k at 0.3 and the rule about 0.75x. The geometric law with
//! the same mean gave about 0.5x everywhere (too few small flows for a heavy-tailed trace); the
//! "every flow a singleton" bound `n_N p / (1 - p)` 6x. Within a factor of two either way, the
//! restored estimate is nearer Ideal than LowerRecovery's (which misses all `D`).
//!
//! Where the share is unknown (a summary built without its path counts), nothing is assumed:
//! the caller gets LowerRecovery and is told so (the method returned).

use algo::Algorithm;
use key::FlowKey;

use crate::fast::Summary;
use crate::recover::{inject, Bound, Method, RecoverError};

/// The catalog names of the sketches restored here.
pub(crate) const RESTORES: [&str; 3] = [
    distinct::fm::ENTRY.name,
    distinct::kmin::ENTRY.name,
    distinct::linear_counting::ENTRY.name,
];

/// Seed of the synthetic keys' bytes (any fixed value: only their distinctness matters).
const SYNTHETIC_SEED: u64 = 0x6269_746d_6170_5253;

/// The restored state of a bitmap / distinct-count sketch for `Method::Sketchvisor` and
/// `Method::Proportional` (module docs), and the method that made it; `None` when `normal` is
/// not one of [`RESTORES`] or the method is another (the caller's general path applies).
#[allow(clippy::type_complexity)]
pub fn restore(
    normal: &dyn Algorithm,
    summary: &Summary,
    method: Method,
) -> Option<Result<(Option<Box<dyn Algorithm>>, Method), RecoverError>> {
    if !matches!(method, Method::Sketchvisor | Method::Proportional)
        || !RESTORES.contains(&normal.name())
    {
        return None;
    }
    let mut out = normal.clone_box();
    inject(out.as_mut(), summary, Bound::Lower);
    let Some(n) = normal.cardinality() else {
        return Some(Ok((Some(out), Method::Lower)));
    };
    let Some(d) = missing_flows(n, summary) else {
        return Some(Ok((Some(out), Method::Lower)));
    };
    for i in 0..d.round() as u64 {
        out.update(&synthetic(i), 1);
    }
    Some(Ok((Some(out), method)))
}

/// The `i`-th synthetic key: 16 bytes no trace key has (no key kind is 16 bytes long), distinct
/// for distinct `i`.
fn synthetic(i: u64) -> FlowKey {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&SYNTHETIC_SEED.to_le_bytes());
    b[8..].copy_from_slice(&i.to_le_bytes());
    FlowKey::from_bytes(&b).unwrap_or_default()
}

/// `D`, the distinct flows that sent every packet to the fast path untracked, by the rule of the
/// module docs, from the normal path's distinct estimate `n_seen` and the fast path's `summary`;
/// `None` when the summary does not carry the epoch's packet share.
pub fn missing_flows(n_seen: f64, summary: &Summary) -> Option<f64> {
    let paths = &summary.paths;
    if paths.fast_packets == 0 || paths.normal_packets == 0 || summary.v == 0 {
        return None;
    }
    let p = paths.fast_share();
    let untracked_weight = summary.v.saturating_sub(summary.lows()) as f64;
    let u = untracked_weight * paths.fast_packets as f64 / summary.v as f64;
    let seen = (n_seen - summary.flows.len() as f64).max(0.0);
    if u < 1.0 || seen <= 0.0 || !seen.is_finite() {
        return Some(0.0);
    }
    let mut d = 0.0f64;
    for _ in 0..200 {
        let mean = u / (p * (seen + d));
        let g = missed_share(p, mean);
        let next = if g >= 1.0 {
            u
        } else {
            (seen * g / (1.0 - g)).min(u)
        };
        if (next - d).abs() < 0.5 {
            return Some(next);
        }
        d = next;
    }
    Some(d)
}

/// `E[p^s]` under the log-series law of mean `mean` (module docs): the share of the flows that
/// sent every packet to the fast path. Mean at most 1 = all single packets: `p`.
pub fn missed_share(p: f64, mean: f64) -> f64 {
    if !(mean > 1.0) {
        return p;
    }
    // The mean -θ/((1-θ) ln(1-θ)) increases from 1 (θ → 0) to infinity (θ → 1): bisect θ.
    let mean_of = |t: f64| -t / ((1.0 - t) * (-t).ln_1p());
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if mid <= 0.0 || mid >= 1.0 {
            break;
        }
        if mean_of(mid) < mean {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let t = 0.5 * (lo + hi);
    if t <= 0.0 {
        return p;
    }
    if t >= 1.0 {
        return 0.0;
    }
    ((-t * p).ln_1p() / (-t).ln_1p()).clamp(0.0, p)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The log-series share: single packets are missed with probability `p`, larger means less,
    /// and the law's mean is met (θ = 0.9: mean 3.909, E[0.5^s] = ln(0.55)/ln(0.1) = 0.2596).
    #[test]
    fn missed_share_follows_the_log_series() {
        assert_eq!(missed_share(0.3, 1.0), 0.3);
        assert_eq!(missed_share(0.3, f64::NAN), 0.3);
        let mean = -0.9 / (0.1 * 0.1f64.ln());
        let g = missed_share(0.5, mean);
        assert!((g - 0.55f64.ln() / 0.1f64.ln()).abs() < 1e-9, "{g}");
        assert!(missed_share(0.3, 100.0) < missed_share(0.3, 10.0));
        assert!(missed_share(0.3, 1e12) >= 0.0);
    }

    /// Without the epoch's packet counts the share is unknown: no estimate.
    #[test]
    fn no_share_no_estimate() {
        let s = Summary {
            flows: vec![],
            v: 100,
            e: 3,
            paths: Default::default(),
        };
        assert_eq!(missing_flows(1000.0, &s), None);
    }
}
