//! Restoring the bitmap / distinct-count sketches (FM, kMin, Linear Counting, TwoLevel's peer
//! bitmaps) after a fast path took part of the traffic: SketchVisor's answer for them (paper
//! section 7.3, Figure 9: "all the three sketches estimate cardinality based on non-zero
//! counters ... NR, LR, and UR end up with many zero counters in the sketch ... SketchVisor
//! restores non-zero counters with compressive sensing"), with the occupancy rule the paper
//! leaves open (`../shared/RECOVERY.md` 3, last bullet, and 7: "Y is dense ... the threshold
//! τ_occ must be calibrated against Ideal ... Open question").
//!
//! A distinct counter's state is a function of the *set* of keys it saw, so what the normal path
//! missed is a number of flows, not a volume: LowerRecovery injects the tracked flows, and the
//! flows that sent every packet to the fast path and were not tracked (`D` of them) are missing.
//! Spreading the untracked volume `V - sum lo` over the counters (the paper's `Y`) sets every
//! zero bit (RECOVERY.md 7), so the rule here counts flows instead.
//!
//! ## The rule (uniform-overflow prior, issue 36 point 3)
//!
//! Each packet takes the fast path with the epoch's packet share `p` (the FIFO drops whatever
//! arrives while it is full, section 3.1), read from [`Summary::paths`] (a distinct counter has
//! no mass of its own to measure it from): a flow of `s` packets is missed by the normal path
//! with probability `p^s`. The untracked flows' sizes are modelled by Fisher's log-series
//! `P(s) = -θ^s / (s ln(1-θ))` (the species-abundance law, which binomial sampling maps into
//! itself; mean `-θ / ((1-θ) ln(1-θ))`), so `g = E[p^s] = ln(1-θp) / ln(1-θ)`. Its one
//! parameter comes from the data: the untracked flows' mean size `s̄ = U / (p (n_N + D))`, with
//! `U` the untracked fast-path packets (`V - sum lo`, converted from the run's weight by the fast
//! path's packets per unit of weight) and `n_N` the sketch's own estimate less the tracked flows.
//! Then `D = n_N g / (1 - g)` (the `n_N` seen flows are the `1 - g` share of them), solved by the
//! increasing fixed-point iteration from `D = 0`, and capped by `U`: a missing flow sent at least
//! one untracked packet, so however the overflow is shaped the restored count cannot exceed the
//! untracked volume.
//!
//! Restoring:
//! - FM, kMin, Linear Counting (and HyperLogLog, not in the paper, the same way): `D` synthetic
//!   distinct keys (fixed seed, a key length no trace
//!   has) through the sketch's own update, after LowerRecovery: for these hash-based counters
//!   that is, in distribution, the state of `D` more distinct flows.
//! - TwoLevel: a host's missing peers cannot be named by synthetic keys without the host, so
//!   they are restored per bucket: every written bitmap (both parts, every row) with `z` zero
//!   bits of `b` estimates `n = b ln(b/z)`, and gets zero bits set until
//!   `z' = b (z/b)^(1 + D/n_N)` remain, i.e. `n' = n (1 + D/n_N)`, `n_N` the distinct pairs of
//!   the Count-Min part (its rows' bucket estimates summed, averaged over rows). This assumes
//!   each host's peers send like the whole trace's pairs (the same missing share); spreaders
//!   whose peers send fewer packets than the average pair are under-restored.
//!
//! ## Calibration against Ideal (the same sketch fed every packet; `tests/bitmap.rs`)
//!
//! Zipf(1.0) five-tuple traces through the real fast path (8 KB), uniform overflow: on 2 M
//! packets over 100 k flows at share 0.3, 5.9 k flows are missing and the rule says 8.2 k
//! (1.4x); on 400 k packets (many more small flows) at 0.5, 17.8 k and 11.0 k (0.6x). The
//! cardinality error (FM, kMin, LC) falls from Lower's 4.8 / 7.5 / 6.3% to 3.0 / 2.1 / 2.5%
//! (Ideal 0.4 / 0.9 / 0.0%), and from 30 / 31 / 32% to 11 / 13 / 12%. The geometric law with
//! the same mean gives about 0.5x (too few small flows for a heavy-tailed trace), the
//! "every flow one packet" bound `n_N p / (1 - p)` about 6x. TwoLevel (20 spreaders of 300-680
//! peers among 5000 hosts, threshold 450): the spreaders' peer error falls from 20% to 12% and
//! the F1 rises from 0.74 to 0.96 with pairs of 1-3 packets at 0.4 (Ideal 4%, 1.0); 28% to 5%,
//! F1 0.50 to 0.96 with one-packet pairs at 0.3.
//!
//! **Limits.** A distinct counter keeps no per-flow weight, so, unlike the proportional prior
//! (`recover.rs`, `proportional_fit`), the uniform assumption cannot be tested per epoch: when
//! only heavy flows overflow (the 1000 largest at 70%), no flow is missing but the rule still
//! restores 24.5 k of the 65 k untracked packets as flows (41-47% over where Ideal is within
//! 2%); the cap by `U` is all that holds. Where the share is unknown (a summary built without
//! its path counts) nothing is assumed: the caller gets LowerRecovery and is told so (the
//! method returned).

use algo::Algorithm;
use key::FlowKey;
use reversible::TwoLevel;

use crate::fast::Summary;
use crate::recover::{inject, Bound, Method, RecoverError};

/// The catalog names of the sketches restored here.
pub(crate) const RESTORES: [&str; 5] = [
    distinct::fm::ENTRY.name,
    distinct::kmin::ENTRY.name,
    distinct::linear_counting::ENTRY.name,
    distinct::hyperloglog::ENTRY.name,
    reversible::two_level::ENTRY.name,
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
    if let Some(tl) = algo::downcast::<TwoLevel>(normal) {
        return Some(Ok(two_level(tl, summary, method)));
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

/// TwoLevel restored per bucket (module docs): LowerRecovery, then every written bitmap's
/// linear-counting estimate `n = b ln(b/z)` raised to `n (1 + D / n_N)` by setting zero bits
/// until `z' = b (z/b)^(1 + D/n_N)` remain, `n_N` the distinct pairs the Count-Min part holds
/// (its rows' summed bucket estimates, averaged over the rows).
fn two_level(
    normal: &TwoLevel,
    summary: &Summary,
    method: Method,
) -> (Option<Box<dyn Algorithm>>, Method) {
    let mut out = normal.clone();
    inject(&mut out, summary, Bound::Lower);
    let (bits, rows) = (out.config().bitmap_bits, out.config().cm_rows);
    let per_bucket = out.config().bitmaps as f64;
    let b = bits as f64;
    let mut sums = vec![0.0f64; rows];
    out.grow_bitmaps(|part, row, bm| {
        let ones = ones_of(bm, bits);
        if part == 0 && ones > 0 {
            if let Some(s) = sums.get_mut(row) {
                let z = (b - ones as f64).max(1.0);
                *s += b * (b / z).ln() / per_bucket;
            }
        }
    });
    let n = sums.iter().sum::<f64>() / rows.max(1) as f64;
    let Some(d) = missing_flows(n, summary) else {
        return (Some(Box::new(out)), Method::Lower);
    };
    let r = if n > 0.0 { d / n } else { 0.0 };
    let mut id = 0u64;
    out.grow_bitmaps(|_, _, bm| {
        id += 1;
        let ones = ones_of(bm, bits);
        let z = bits - ones;
        if ones == 0 || z == 0 || r <= 0.0 {
            return;
        }
        let want = b * (z as f64 / b).powf(1.0 + r);
        let add = z as f64 - want;
        // Rounded up with probability its fraction (a fixed hash of the bitmap's place), so a
        // row of small buckets gains its share of bits on average, not none.
        let h = key::mix64(SYNTHETIC_SEED ^ id);
        let frac = (h >> 11) as f64 / (1u64 << 53) as f64;
        let add = (add.floor() + f64::from(u8::from(frac < add.fract()))) as usize;
        if add > 0 {
            set_zero_bits(bm, bits, add.min(z), h);
        }
    });
    (Some(Box::new(out)), method)
}

/// Set bits of a bitmap's `bits` positions (the words past them are masked, whatever they hold).
fn ones_of(bm: &[u64], bits: usize) -> usize {
    bm.iter()
        .enumerate()
        .map(|(i, w)| {
            let valid = bits.saturating_sub(i * 64).min(64);
            let mask = if valid == 64 {
                u64::MAX
            } else {
                (1u64 << valid) - 1
            };
            (w & mask).count_ones() as usize
        })
        .sum()
}

/// Set `k` of the bitmap's zero bits, chosen by a partial shuffle seeded with `h`.
fn set_zero_bits(bm: &mut [u64], bits: usize, k: usize, mut h: u64) {
    let mut zeros: Vec<usize> = (0..bits)
        .filter(|&i| bm.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 == 0))
        .collect();
    for i in 0..k.min(zeros.len()) {
        h = key::mix64(h);
        let j = i + (h % (zeros.len() - i) as u64) as usize;
        zeros.swap(i, j);
        if let Some(w) = bm.get_mut(zeros[i] / 64) {
            *w |= 1 << (zeros[i] % 64);
        }
    }
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
    if mean.is_nan() || mean <= 1.0 {
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

    /// The bit count ignores words past the bitmap's bits; the chosen zero bits are zero bits.
    #[test]
    fn bits_counted_and_set_within_the_bitmap() {
        let mut bm = [u64::MAX, 1 | 1 << 60];
        assert_eq!(ones_of(&bm, 70), 65);
        bm = [0, 0];
        set_zero_bits(&mut bm, 70, 70, 9);
        assert_eq!(ones_of(&bm, 70), 70);
        assert_eq!(bm[1] >> 6, 0);
        let mut bm = [0b1011u64];
        set_zero_bits(&mut bm, 4, 3, 1);
        assert_eq!(bm[0], 0b1111);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            rng_seed: proptest::test_runner::RngSeed::Fixed(0xb17),
            cases: 256,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Whatever the counts (forged snapshots included), the estimate is a number of flows
        /// between 0 and the untracked packets.
        #[test]
        fn estimate_within_the_untracked_packets(
            n in 0.0f64..1e9,
            v in 1u64..1u64 << 50,
            lo_share in 0.0f64..1.0,
            normal in 1u64..1u64 << 50,
            fast in 1u64..1u64 << 50,
            tracked in 0usize..300,
        ) {
            let lo = (v as f64 * lo_share) as u64;
            let flows = (0..tracked)
                .map(|i| crate::Tracked {
                    key: FlowKey::from_u32(i as u32),
                    lo: if i == 0 { lo } else { 0 },
                    hi: lo,
                })
                .collect();
            let s = Summary {
                flows,
                v,
                e: 0,
                paths: crate::PathCounts {
                    normal_packets: normal,
                    fast_packets: fast,
                    ..Default::default()
                },
            };
            let d = missing_flows(n, &s).unwrap();
            let u = (v - lo) as f64 * fast as f64 / v as f64;
            proptest::prop_assert!(d.is_finite() && d >= 0.0 && d <= u + 1e-6 * u.max(1.0), "{d} {u}");
        }
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
