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
    // `as u64` truncates (the floor of a positive value: a conversion, where `floor` is a
    // call on the baseline x86-64 target) and saturates; the max guards the rounding of
    // b^c = 1.
    ((amin as f64 * pow) as u64).max(amin)
}

/// [`thresh_with`] without `libm` in the common case, bit for bit the same result (tested).
///
/// The residuals change at every kick-out (each pass lowers them all by `e`), so `b` is new
/// almost every time and the power was most of COMPUTETHRESH's cost. But only
/// `floor(amin * b^c)` is wanted, and `amin * b^c` is rarely within a part in 10^11 of an
/// integer: a polynomial evaluation of `b^c` with a relative error below 10^-12 brackets the
/// product that [`thresh_with`] floors, and when both ends of the bracket floor to the same
/// integer that is the answer; otherwise (or for values past 2^52) `libm` decides as before.
///
/// The evaluation is the textbook table-and-polynomial power, applied to the numerator and the
/// denominator of `b = num / den` apart, `b^c = num^c * den^-c`: the two run in parallel and
/// the division feeds only the `below_one` test (a predicted branch), not the power, which is
/// on the kick-out's critical path (every later decision of the kick-out waits on `e`). For
/// `y = 2^k * m`, `m` in `[1, 2)`: `y^(+-c) = 2^(+-kc) * r_j^(-+c) * (1 + t)^(+-c)` with `j`
/// the top [`TABLE_BITS`] bits of `m`, `t = m * r_j - 1`, `|t| <= 2^-(TABLE_BITS+1)`, the
/// powers of 2 and of `r_j` from tables built once with `libm`, and `(1 + t)^(+-c)` by its
/// binomial series to `t^3` (the next terms are below `0.022 |t|^4 < 4e-13`), summed in
/// Estrin's order (a shorter dependent chain than Horner's). Each table entry and each of the
/// two dozen roundings adds about 10^-16.
#[derive(Clone, Debug)]
pub(crate) struct Thresh {
    c: f64,
    /// `y^c` and `y^-c`.
    pos: Power,
    neg: Power,
}

/// Tables and series of `y^p` for one exponent `p`, `1 <= y <= 2^64`.
#[derive(Clone, Debug)]
struct Power {
    /// The binomial coefficients `C(p, 1..=3)` of `(1 + t)^p`.
    coef: [f64; 3],
    /// `2^(k p)` for the binary exponent `k` of `y`, 0..=64.
    pow2: [f64; 65],
    /// Per top bits `j` of the mantissa: `r_j ~ 1 / (1 + (j + 1/2) / 2^TABLE_BITS)` and
    /// `r_j^-p`.
    recip: [(f64, f64); 1 << TABLE_BITS],
}

/// Mantissa bits that pick the table entry: `|t| <= 1/512`.
const TABLE_BITS: u32 = 8;

/// Relative half-width of the bracket: 10x the evaluation's error bound (10^-12).
const MARGIN: f64 = 1e-11;

impl Power {
    fn new(p: f64) -> Power {
        let c2 = p * (p - 1.0) / 2.0;
        let c3 = c2 * (p - 2.0) / 3.0;
        let n = (1u32 << TABLE_BITS) as f64;
        Power {
            coef: [p, c2, c3],
            pow2: std::array::from_fn(|k| libm::pow(2.0, k as f64 * p)),
            recip: std::array::from_fn(|j| {
                let r = n / (n + j as f64 + 0.5);
                (r, libm::pow(r, -p))
            }),
        }
    }

    /// `y^p` within a relative 5 * 10^-13, for `1 <= y <= 2^64`.
    #[inline]
    fn get(&self, y: f64) -> f64 {
        let bits = y.to_bits();
        let k = ((bits >> 52) as usize).wrapping_sub(1023);
        let j = ((bits >> (52 - TABLE_BITS)) as usize) & ((1 << TABLE_BITS) - 1);
        let m = f64::from_bits((bits & ((1u64 << 52) - 1)) | (1023u64 << 52));
        let (r, q) = self.recip[j];
        let t = m * r - 1.0;
        let [c1, c2, c3] = self.coef;
        // Estrin: c1 t + t^2 (c2 + c3 t), then 1 + that.
        let series = 1.0 + (c1 * t + (t * t) * (c2 + c3 * t));
        self.pow2[k] * q * series
    }
}

impl Thresh {
    pub(crate) fn new(delta: f64) -> Thresh {
        let c = exponent(delta);
        Thresh {
            c,
            pos: Power::new(c),
            neg: Power::new(-c),
        }
    }

    /// `b^c = num^c * den^-c` within a relative 10^-12, for `1 <= den <= num <= 2^64`.
    #[inline]
    fn approx_pow(&self, num: f64, den: f64) -> f64 {
        self.pos.get(num) * self.neg.get(den)
    }

    /// The same result as [`thresh_with`]'s (which it is, past 2^52), but its first test,
    /// `below_one`, is a select, not a branch: on the bench's `overflow` stream it holds at a
    /// third of the kick-outs, with no pattern, so as a branch it was mispredicted often, each
    /// time after the division it waits on. The power is evaluated either way, `below_one`
    /// makes the bracket `[amin, amin]`, and the one branch left is taken only when the bracket
    /// straddles an integer (no kick-out of that stream); there `below_one` is asked again,
    /// then `libm`. Below 2^52 the integers convert through `i64`, one instruction each way
    /// (measured 0.97x the kick-outs' time of `u64` conversions, 2026-11-25).
    #[inline]
    pub(crate) fn get(&self, a1: u64, a2: u64, amin: u64) -> u64 {
        debug_assert!(a1 >= a2 && a2 >= amin);
        // Past 2^52 (residuals of petabytes) the definition itself.
        if a1 >= 1 << 52 {
            return thresh_with(a1, a2, amin, self.c);
        }
        // Below 2^52 every value here is an exact i64, which converts to and from f64 in one
        // instruction (a u64 takes a sequence of them on baseline x86-64) to the same value.
        // As in `ratio`: `num >= den` (a1 >= a2), so `b >= 1`, and `b < 2^52`.
        let f = |x: u64| x as i64 as f64;
        let (num, den) = (f(a1.max(2) - 1), f(a2.max(2) - 1));
        let b = (num / den).max(1.0);
        let small = f(amin) * self.c * (b - 1.0) < 1.0;
        // `amin * b^c < 2^52 * 2^(52 c) < 2^57`: exact truncation through i64.
        let x = f(amin) * self.approx_pow(num, den);
        let (lo, hi) = (
            (x * (1.0 - MARGIN)) as i64 as u64,
            (x * (1.0 + MARGIN)) as i64 as u64,
        );
        // `small` as a mask made opaque to the optimizer, which otherwise turns the select
        // back into a branch (it sees that `small` decides the result).
        let m = std::hint::black_box((small as u64).wrapping_neg());
        let (lo, hi) = ((lo & !m) | (amin & m), (hi & !m) | (amin & m));
        if lo == hi {
            return lo.max(amin);
        }
        if small {
            return amin;
        }
        scaled(amin, libm::exp(self.c * libm::log(b)))
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

    /// Each polynomial power is within its stated 5 * 10^-13 of `libm`'s over every table entry
    /// and binary exponent, and their product within 10^-12 of the `b^c` that [`thresh_with`]
    /// floors (this is what makes the bracket sound).
    #[test]
    fn the_polynomial_power_is_within_its_bound() {
        let t = Thresh::new(DELTA);
        let c = exponent(DELTA);
        let mut worst = 0f64;
        for k in 0..=64 {
            for i in 0..4096u64 {
                let y = libm::ldexp(1.0 + i as f64 / 4096.0 + 1.0 / 8192.0, k)
                    .min(libm::ldexp(1.0, 64));
                for (p, e) in [(&t.pos, c), (&t.neg, -c)] {
                    let want = libm::exp(e * libm::log(y));
                    worst = worst.max((p.get(y) / want - 1.0).abs());
                }
            }
        }
        assert!(worst < 5e-13, "worst relative error {worst:e}");
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut worst = 0f64;
        for i in 0..1_000_000u64 {
            let scale = 1u64 << (i % 64);
            let a1 = 1 + next() % scale.max(1).saturating_mul(2).max(2);
            let a2 = 1 + next() % a1;
            let (num, den) = (
                a1.saturating_sub(1).max(1) as f64,
                a2.saturating_sub(1).max(1) as f64,
            );
            let want = libm::exp(c * libm::log(ratio(a1, a2)));
            worst = worst.max((t.approx_pow(num, den) / want - 1.0).abs());
        }
        assert!(
            worst < 1e-12,
            "worst relative error of the product {worst:e}"
        );
    }

    /// Bit for bit [`thresh_with`], over the scales the fast path sees (packet counts to byte
    /// counts) and past them: large `a_min` makes the bracket straddle an integer often, so the
    /// `libm` fallback is exercised too. Four million random triples, then the edges.
    #[test]
    fn thresh_gives_thresh_with_bit_for_bit() {
        let t = Thresh::new(DELTA);
        let c = exponent(DELTA);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..4_000_000u64 {
            let scale = 1u64 << (i % 62 + 1);
            let a1 = 1 + next() % scale;
            let a2 = 1 + next() % a1;
            let amin = 1 + next() % a2;
            assert_eq!(
                t.get(a1, a2, amin),
                thresh_with(a1, a2, amin, c),
                "{a1} {a2} {amin}"
            );
        }
        let edges = [
            0u64,
            1,
            2,
            3,
            1 << 52,
            (1 << 53) + 1,
            u64::MAX / 2,
            u64::MAX - 1,
            u64::MAX,
        ];
        for &a1 in &edges {
            for &a2 in edges.iter().filter(|&&a2| a2 <= a1 && a2 >= 1) {
                for &amin in edges.iter().filter(|&&m| m <= a2 && m >= 1) {
                    assert_eq!(t.get(a1, a2, amin), thresh_with(a1, a2, amin, c));
                }
            }
        }
        for (a1, a2, amin) in [
            (u64::MAX, 1, 1),
            (u64::MAX, u64::MAX, u64::MAX),
            (u64::MAX, 2, 2),
            (u64::MAX, 3, 3),
            (1 << 53, 3, 3),
            (2, 1, 1),
        ] {
            assert_eq!(t.get(a1, a2, amin), thresh_with(a1, a2, amin, c));
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
