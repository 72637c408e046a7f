//! COMPUTETHRESH (SketchVisor Algorithm 1 lines 1-4, appendix A), with the formula the PDF
//! extraction garbled resolved as in `../shared/DESIGN.md`.
//!
//! The k+1 values (the residuals of the k tracked flows and the new packet's size) are fitted to
//! a power law `Pr{Y > y} = eps * y^theta` from the two largest, `a1 >= a2`:
//! `theta = log_b(1/2)` with `b = (a1 - 1) / (a2 - 1)`, so `theta < 0`. The threshold `e` is
//! then chosen so that a flow larger than the smallest value `a_(k+1)` is kicked out with
//! probability `delta`: `Pr{Y <= e | Y > a_(k+1)} = delta`, i.e. `e^theta = (1 - delta) *
//! a_(k+1)^theta`, `e = a_(k+1) * (1 - delta)^(1/theta)`.
//!
//! Since `1/theta = -log2(b)`, `(1 - delta)^(1/theta) = b^c` with `c = log2(1 / (1 - delta))`
//! (0.074 for the paper's `delta = 0.05`), so `e = a_(k+1) * b^c`. This form handles the edge
//! cases without a special branch:
//! - `a1 = a2` (in particular k+1 equal values): `b = 1`, `e = a_(k+1)` (RECOVERY.md 7's rule);
//!   every value equal to the smallest is kicked out, so the pass always frees a slot.
//! - tiny values: `a2 <= 1` makes `a2 - 1 <= 0` and `b` infinite (the "-1" comes from integer
//!   sizes, `Pr{Y > a - 1}`); the denominator is floored at 1, which keeps `e` finite and, as
//!   shown at [`compute_thresh`], below `a1`: the largest flow is never kicked out.
//!
//! Counters are integers (packets or bytes) and `e` is taken as `floor(a_(k+1) * b^c)`, never
//! below `a_(k+1)`: any non-negative decrement keeps Lemma 4.1 (its proof, appendix B, uses only
//! that each pass subtracts the same `e` from every residual and adds it to `E`), and `e >=
//! a_(k+1)` is what guarantees that a pass frees a slot or drops the new packet.

/// The paper's `delta` (appendix A: "we can set delta = 0.05").
pub const DELTA: f64 = 0.05;

/// COMPUTETHRESH over `a1 >= a2` (the two largest of the k+1 values) and `amin` (the
/// smallest), with kick-out probability `delta` in `(0, 1)`.
///
/// Returns an integer `e` with `amin <= e <= max(amin, a1)`. The upper bound: with `u = a1 - 1 >=
/// w = max(a2 - 1, 1)` and `amin <= a2`, `e <= a2 * (u / w)^c`, which equals `a2 <= a1` at
/// `u = w` and grows in `u` with slope at most `c * (w + 1) / w <= 2c < 1` while `a1 = u + 1`
/// grows with slope 1 (and for `a2 < 2`, `e <= 2 * u^c <= u + 1`). So a pass never kicks the
/// largest flow out unless all k+1 values are equal.
pub fn compute_thresh(a1: u64, a2: u64, amin: u64, delta: f64) -> u64 {
    thresh_with(a1, a2, amin, exponent(delta))
}

/// `c = log2(1 / (1 - delta))`, the exponent of `b` (computed once per fast path).
pub fn exponent(delta: f64) -> f64 {
    -libm::log2(1.0 - delta)
}

/// [`compute_thresh`] with `c` = [`exponent`]`(delta)`.
///
/// `b^c` as `exp(c ln b)` with `libm`'s pure-Rust functions, not the platform's: the threshold
/// is floored to an integer, so a last-bit difference between two C libraries could change the
/// fast path's state, and the project's output must not depend on the machine (`exp` and `log`
/// measured about 3x cheaper than `libm::pow`, which spends extra precision this floor does
/// not need; any `e >= a_(k+1)` keeps Lemma 4.1). When `amin * c * (b - 1) < 1` the floor is
/// `amin` whatever the rounding (`b^c <= 1 + c (b - 1)` for `0 < c < 1`, Bernoulli), and the
/// `pow` is skipped: the common case of packet counts.
#[inline]
pub fn thresh_with(a1: u64, a2: u64, amin: u64, c: f64) -> u64 {
    debug_assert!(a1 >= a2 && a2 >= amin);
    let b = ratio(a1, a2);
    if below_one(amin, b, c) {
        return amin;
    }
    scaled(amin, libm::exp(c * libm::log(b)))
}

/// `b = (a1 - 1) / (a2 - 1)`, the denominator floored at 1, `b >= 1`.
#[inline]
fn ratio(a1: u64, a2: u64) -> f64 {
    let num = a1.saturating_sub(1).max(1) as f64;
    let den = a2.saturating_sub(1).max(1) as f64;
    (num / den).max(1.0)
}

/// Whether `floor(amin * b^c) = amin` without computing the power (Bernoulli, above).
#[inline]
fn below_one(amin: u64, b: f64, c: f64) -> bool {
    amin as f64 * c * (b - 1.0) < 1.0
}

/// `floor(amin * pow)`, never below `amin`.
#[inline]
fn scaled(amin: u64, pow: f64) -> u64 {
    let e = (amin as f64 * pow).floor();
    // `as u64` saturates; the max guards the rounding of b^c = 1.
    (e as u64).max(amin)
}

/// [`thresh_with`] that keeps `b^c` of the last `(a1, a2)`: the two largest residuals are
/// those of the heaviest flows, which often get no packet between two kick-outs, and the
/// power (a `log` and an `exp`) is most of COMPUTETHRESH's cost. The same operations on the
/// same values: the result is bit for bit [`thresh_with`]'s (tested).
#[derive(Clone, Debug)]
pub(crate) struct Cached {
    c: f64,
    a: (u64, u64),
    b: f64,
    /// `b^c`, NaN until needed.
    pow: f64,
}

impl Cached {
    pub(crate) fn new(delta: f64) -> Cached {
        Cached {
            c: exponent(delta),
            // a1 >= 1 always (a packet weighs at least 1): (0, 0) is never asked.
            a: (0, 0),
            b: 1.0,
            pow: f64::NAN,
        }
    }

    #[inline]
    pub(crate) fn get(&mut self, a1: u64, a2: u64, amin: u64) -> u64 {
        debug_assert!(a1 >= a2 && a2 >= amin);
        if (a1, a2) != self.a {
            self.a = (a1, a2);
            self.b = ratio(a1, a2);
            self.pow = f64::NAN;
        }
        if below_one(amin, self.b, self.c) {
            return amin;
        }
        if self.pow.is_nan() {
            self.pow = libm::exp(self.c * libm::log(self.b));
        }
        scaled(amin, self.pow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_give_the_smallest() {
        assert_eq!(compute_thresh(500, 500, 500, DELTA), 500);
        assert_eq!(compute_thresh(7, 7, 3, DELTA), 3);
        assert_eq!(compute_thresh(1, 1, 1, DELTA), 1);
    }

    #[test]
    fn matches_the_appendix_formula() {
        // e = a_min * (1 - delta)^(1/theta), theta = ln(1/2) / ln((a1-1)/(a2-1)), computed the
        // long way round.
        for &(a1, a2, amin) in &[(1001u64, 501u64, 100u64), (90_000, 3000, 1500), (100, 3, 3)] {
            let b = (a1 as f64 - 1.0) / (a2 as f64 - 1.0);
            let theta = 0.5f64.ln() / b.ln();
            assert!(theta < 0.0);
            let want = (amin as f64 * (1.0 - DELTA).powf(1.0 / theta)).floor() as u64;
            assert_eq!(thresh_with(a1, a2, amin, exponent(DELTA)), want);
            assert_eq!(
                compute_thresh(a1, a2, amin, DELTA),
                want,
                "{a1} {a2} {amin}"
            );
            assert!(
                want > amin,
                "b > 1 raises the threshold above the smallest value"
            );
        }
    }

    #[test]
    fn tiny_values_stay_finite_and_below_the_largest() {
        // a2 = 1 would divide by zero in the paper's form.
        assert_eq!(compute_thresh(1, 1, 1, DELTA), 1);
        let e = compute_thresh(1_000_000, 1, 1, DELTA);
        assert!((1..1_000_000).contains(&e), "{e}");
        assert_eq!(compute_thresh(2, 1, 1, DELTA), 1);
        assert!(compute_thresh(u64::MAX, 1, 1, DELTA) < u64::MAX);
    }

    #[test]
    fn the_cache_gives_thresh_with_bit_for_bit() {
        let mut c = Cached::new(DELTA);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..20_000u64 {
            // A few (a1, a2) pairs repeated, as between kick-outs, with varied a_min.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let a1 = 2 + (i / 7) % 50 * 997;
            let a2 = 1 + (x % a1);
            let amin = 1 + (x >> 20) % a2;
            assert_eq!(
                c.get(a1, a2, amin),
                thresh_with(a1, a2, amin, exponent(DELTA)),
                "{a1} {a2} {amin}"
            );
        }
    }

    #[test]
    fn never_reaches_the_largest_unless_all_equal() {
        for a1 in 1..200u64 {
            for a2 in 1..=a1 {
                for amin in [1, a2 / 2 + 1, a2] {
                    let e = compute_thresh(a1, a2, amin, DELTA);
                    assert!(e >= amin);
                    if a1 > amin {
                        assert!(e < a1, "a1 {a1} a2 {a2} amin {amin}: e {e}");
                    }
                }
            }
        }
    }
}
