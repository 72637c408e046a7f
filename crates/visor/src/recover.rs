//! Network-wide recovery (SketchVisor section 5; the solver of `../shared/RECOVERY.md` 5).
//!
//! Given the merged normal-path sketch `N`, the merged fast-path [`Summary`] (per tracked flow
//! `lo <= x_f <= hi`, the total `V`), recover the sketch `T` that would have seen every packet:
//!
//! - [`Method::None`]: `T = N` (NoRecovery, section 7.3);
//! - [`Method::Lower`] / [`Method::Upper`]: `T = N + A lo` / `N + A hi`, i.e. each tracked
//!   flow's bound injected into the sketch with its own update ([`inject`]);
//! - [`Method::Sketchvisor`]: minimise `alpha ||T||_* + beta ||x||_1 + (1/2 gamma) ||Y||_F^2`
//!   subject to `T = N + A x + Y`, per mass row `c_i sum(x) + 1'Y_i = c_i V`, `lo <= x <= hi`,
//!   `Y >= 0`, with `y` modelled in counter space (`Y = sk(y)`), by the alternating direction
//!   method of RECOVERY.md 5 (LENS's update order, the mass constraints dualised);
//! - [`Method::Proportional`]: the uniform-overflow prior ([`proportional_fit`], below), when a
//!   per-epoch test says the data fits it, else the paper's method (and [`Recovered::method`]
//!   says `Sketchvisor`).
//!
//! ## The proportional prior (beyond the paper; issue 36 point 3)
//!
//! The paper's objective puts every tracked flow at its lower bound (RECOVERY.md 7: the
//! `beta ||x||_1` term outweighs the rest), so it answers like LowerRecovery: a heavy flow whose
//! fast-path part the table under-counts stays below a threshold it crosses in truth. When the
//! overflow is *uniform* (the FIFO drops to the fast path whatever packet arrives while it is
//! full, section 3.1), the fast path sampled every flow at the same rate `f`, the fast share:
//! each flow's fast-path weight is about its normal-path weight times `q = f / (1 - f)`, and the
//! normal path measured `f` for us (`q = V / W_N`, `W_N` the normal path's total: the sketch's
//! own count when it keeps one, UnivMon's, else read from the rows with a mass constant:
//! `sum_row(N) / c_i`). So:
//!
//! - (a) tracked flow `j`: `x_j = clamp(q n_j, lo_j, hi_j)`, `n_j` the sketch's point query of
//!   `N` (Count-Min's slight over-estimate), Lemma 4.1's bounds kept (scaled toward `lo` if
//!   `sum x > V`);
//! - (b) the untracked remainder `V - sum x` spread over the normal path's flows in proportion
//!   to their normal weight: as the sketch is linear, `y = r n` gives `Y = r (N - A n_tracked)`
//!   (cells floored at 0; a signed sketch keeps its signs, as `sk(r n) = r N` holds for it),
//!   with `r` per mass row so that `c_i sum(x) + 1'Y_i = c_i V` holds exactly (constraint (1) of
//!   RECOVERY.md 2, as the paper's method keeps it). A row without a mass constant (Count
//!   Sketch rows with signs and level sampling, Deltoid's bit counters, MRAC's sampled arrays)
//!   takes the one ratio the data gives, `r = (V - sum x) / (W_N - sum n_tracked)`: the
//!   untracked flows' fast weight per unit of their normal weight, the same `y = r n` as the
//!   mass rows, so every row of one sketch describes one flow vector.
//!
//! The output is a sketch state `T = N + A x + Y` as the other methods', so every task answers
//! from it. The test, per epoch: under a uniform overflow the prediction `q n_j` falls in (or
//! near: sampling noise, Count-Min's over-estimate) each tracked flow's `[lo_j, hi_j]`; when
//! only some flows overflow (the heaviest, or a burst), their fast parts are far above `q n_j`
//! and the intervals miss it. The prior is used when at least [`FIT_SHARE`] of the tracked
//! flows' intervals, widened by [`FIT_SLACK`] relative and [`FIT_FLOOR`] absolute, contain the
//! prediction (an epoch without tracked flows has nothing against it: the prior is used);
//! otherwise the paper's method answers. Assumptions: the fast-path weight of a
//! flow follows the same sampling as its packets (no per-flow bias in the overflow), one
//! sketch over the whole overflow (a merge of hosts with different shares is read as their
//! pooled share), and a total (a row with a mass constant or the sketch's own count; else the
//! prior cannot measure `f` and the paper's method answers).
//!
//! The output `T^ = N + A x^ + Y^` satisfies constraint (1) exactly. Parameters (RECOVERY.md 2,
//! 5): `alpha = (sqrt m + sqrt n) sqrt(eta)`, `eta = nnz(N) / (m n)`; `beta = sqrt(2 log2 of the
//! key space)` (`sqrt(208)` for 104-bit five-tuples); `gamma = 10 gamma_y`, `gamma_y = 1.4826 *
//! MAD` of the non-zero counters of `N`, at least 1. Everything is divided by the mean counter
//! of `T0` first: the objective is then 1-homogeneous, so the solution is unchanged and the
//! penalty and thresholds stay O(1).

use algo::Algorithm;
use key::FlowKey;
use nalgebra::{DMatrix, SymmetricEigen};
use serde::{Deserialize, Serialize};

use crate::fast::Summary;
use crate::linear::{cell_index, cell_sign, columns, row_starts, ColumnError, Linear};

/// Which recovery a control plane (or a run with a fast path) uses (`--recover`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// NoRecovery: the normal path's sketch alone.
    None,
    /// LowerRecovery: inject every tracked flow's lower bound.
    Lower,
    /// UpperRecovery: inject every tracked flow's upper bound.
    Upper,
    /// SketchVisor's compressive-sensing recovery (sketches whose recovered counters can be
    /// written back, [`Method::refusal`]).
    #[default]
    Sketchvisor,
    /// The uniform-overflow prior (module docs), when the epoch's data fits it; else
    /// SketchVisor's. As SketchVisor's, only for sketches whose recovered counters can be
    /// written back ([`Method::refusal`]).
    Proportional,
}

impl Method {
    pub const ALL: [Method; 5] = [
        Method::None,
        Method::Lower,
        Method::Upper,
        Method::Sketchvisor,
        Method::Proportional,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Method::None => "none",
            Method::Lower => "lower",
            Method::Upper => "upper",
            Method::Sketchvisor => "sketchvisor",
            Method::Proportional => "proportional",
        }
    }

    /// Why this method cannot recover the algorithm named `algo` (its catalog name), if it
    /// cannot: a run or merge refuses it at start-up with this reason, and
    /// [`crate::recovered`] returns it as [`RecoverError::Refused`]. `sketchvisor` and
    /// `proportional` need a sketch whose recovered counters are written back or whose bits are
    /// restored (`restore::WRITES_BACK`, `bitmap::RESTORES`); `none`, `lower` and `upper` apply
    /// to every algorithm.
    pub fn refusal(self, algo: &str) -> Option<String> {
        match self {
            Method::Sketchvisor | Method::Proportional if !crate::restore::recovers(algo) => {
                Some(crate::restore::refusal_reason(self, algo))
            }
            _ => None,
        }
    }
}

/// [`proportional_fit`]: the share of tracked flows whose widened interval must contain the
/// proportional prediction for the prior to be used.
pub const FIT_SHARE: f64 = 0.8;
/// Relative widening of `[lo, hi]` in the test: a 4-sigma band of binomial sampling for a flow
/// with 256 fast-path packets (smaller tracked flows have intervals wider than their noise, as
/// their `hi - lo` is the table's `E` at insertion).
pub const FIT_SLACK: f64 = 0.25;
/// Absolute widening, in weight units (one packet of 64 bytes, or 64 packets' worth of a
/// weight of one): tiny flows' predictions are within noise of anything.
pub const FIT_FLOOR: f64 = 64.0;

/// Which bound [`inject`] adds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    Lower,
    Upper,
}

/// Lower/UpperRecovery for any algorithm: add each tracked flow's bound to `normal` through
/// its own update (for a linear sketch, `N + A lo` or `N + A hi`). Works for every algorithm the
/// catalog has, linear or not (for the others it is "replay the fast path's flows", no more).
pub fn inject(normal: &mut dyn Algorithm, summary: &Summary, bound: Bound) {
    for t in &summary.flows {
        let w = match bound {
            Bound::Lower => t.lo,
            Bound::Upper => t.hi,
        };
        if w > 0 {
            normal.update(&t.key, w);
        }
    }
}

/// Solver settings (RECOVERY.md 5's values by default).
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Stop when the relative residual and the relative change of `x` are below this.
    pub tol: f64,
    pub max_iter: usize,
    /// Penalty growth per iteration.
    pub rho: f64,
    /// Bits of the flow-key space (`beta = sqrt(2 bits)`); `None`: 8 x the tracked keys' length.
    pub key_bits: Option<u32>,
    /// Keep the nuclear-norm term; `None`: as the sketch says ([`Linear::low_rank`]: dropped
    /// for Count-Min, section 5.3). Keeping it costs one small eigendecomposition and two
    /// m x m x n products per iteration. On Count-Min it measured worse (the thresholding
    /// moves `Y` off the heavy flows' counters; numbers in tests/recovery.rs).
    pub nuclear: Option<bool>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            tol: 1e-4,
            max_iter: 1000,
            rho: 1.05,
            key_bits: None,
            nuclear: None,
        }
    }
}

/// A recovered sketch.
#[derive(Clone, Debug)]
pub struct Recovered {
    pub method: Method,
    /// `T^`, row major, in the weight's unit.
    pub t: Vec<f64>,
    pub rows: usize,
    pub cols: usize,
    /// `x^` per tracked flow, in `summary.flows` order (the bound for Lower/Upper, 0 for None).
    pub x: Vec<f64>,
    /// Each tracked flow's cells (its column of `A`), in the same order.
    pub cells: Vec<Vec<u32>>,
    /// Solver iterations (0 for the baselines).
    pub iterations: usize,
    /// Whether the solver met its tolerance (baselines: true).
    pub converged: bool,
}

impl Recovered {
    /// Relative Frobenius error against another matrix of the same shape (RECOVERY.md 7:
    /// `||T - T_ideal||_F / ||T_ideal||_F`).
    pub fn error_against(&self, ideal: &[f64]) -> f64 {
        rel_error(&self.t, ideal)
    }
}

/// `||a - b||_F / ||b||_F` (0 when both are 0).
pub fn rel_error(a: &[f64], b: &[f64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    if den == 0.0 {
        if num == 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        (num / den).sqrt()
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecoverError {
    #[error(transparent)]
    Columns(#[from] ColumnError),
    #[error("the counter matrix is empty")]
    Empty,
    #[error("recovery {method} cannot recover {algo}: {reason}")]
    Refused {
        method: &'static str,
        algo: &'static str,
        reason: String,
    },
}

/// The per-epoch test of the proportional prior (module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct Fit {
    /// `q = f / (1 - f)`: the fast path's weight per unit of normal-path weight (`V / W_N`).
    pub ratio: f64,
    /// Tracked flows tested, and those whose widened interval holds the prediction.
    pub tested: usize,
    pub inside: usize,
    /// Whether the prior is used (`inside >= FIT_SHARE tested`, and a ratio could be measured).
    pub uniform: bool,
}

/// The per-epoch test (module docs) for `normal` and the flows' `cells` (their columns of `A`,
/// in `summary.flows` order), and the tracked flows' normal-path estimates `n_j`.
pub fn proportional_fit<S: Linear>(
    normal: &S,
    summary: &Summary,
    cells: &[Vec<u32>],
) -> (Fit, Vec<f64>) {
    let nc = normal.counters();
    let w_n = normal_total(normal, &nc);
    let v = summary.v as f64;
    let est: Vec<f64> = cells.iter().map(|c| normal.point(&nc, c)).collect();
    let Some(w_n) = w_n.filter(|&w| w > 0.0) else {
        return (
            Fit {
                ratio: f64::NAN,
                tested: summary.flows.len(),
                inside: 0,
                uniform: false,
            },
            est,
        );
    };
    let q = v / w_n;
    let inside = summary
        .flows
        .iter()
        .zip(&est)
        .filter(|(t, &nj)| {
            let p = q * nj;
            let (lo, hi) = (t.lo as f64, t.hi as f64);
            p >= lo / (1.0 + FIT_SLACK) - FIT_FLOOR && p <= hi * (1.0 + FIT_SLACK) + FIT_FLOOR
        })
        .count();
    let tested = summary.flows.len();
    let fit = Fit {
        ratio: q,
        tested,
        inside,
        uniform: inside as f64 >= FIT_SHARE * tested as f64,
    };
    (fit, est)
}

/// The normal path's total weight: the sketch's own count if it keeps one
/// ([`Linear::total_weight`]), else the mean of `sum_row / c_i` over the rows with a mass
/// constant, `None` without one.
fn normal_total<S: Linear>(normal: &S, nc: &[f64]) -> Option<f64> {
    if let Some(w) = normal.total_weight() {
        return Some(w);
    }
    let starts = row_starts(&normal.row_lens());
    let (mut sum, mut rows) = (0.0, 0usize);
    for (i, c) in normal.row_mass().iter().enumerate() {
        if let Some(c) = c.filter(|&c| c > 0.0) {
            sum += nc[starts[i]..starts[i + 1]].iter().sum::<f64>() / c;
            rows += 1;
        }
    }
    (rows > 0).then(|| sum / rows as f64)
}

/// The proportional prior's `(x, T)` (module docs (a), (b)), given the test's ratio `q` and the
/// tracked flows' normal-path estimates.
fn proportional<S: Linear>(
    normal: &S,
    summary: &Summary,
    cells: &[Vec<u32>],
    q: f64,
    est: &[f64],
) -> (Vec<f64>, Vec<f64>) {
    let starts = row_starts(&normal.row_lens());
    let nc = normal.counters();
    let mass = normal.row_mass();
    let signed = normal.signed();
    let lo: Vec<f64> = summary.flows.iter().map(|t| t.lo as f64).collect();
    let sum_lo: f64 = lo.iter().sum();
    let v = (summary.v as f64).max(sum_lo);
    let mut x: Vec<f64> = summary
        .flows
        .iter()
        .zip(est)
        // max then min, not clamp: a forged summary with lo > hi must not panic (hi wins).
        .map(|(t, &nj)| (q * nj).max(t.lo as f64).min(t.hi as f64))
        .collect();
    let sum_x: f64 = x.iter().sum();
    if sum_x > v && sum_x > sum_lo {
        // Keep sum(x) <= V: move every x toward its lower bound by the same fraction.
        let lam = (v - sum_lo) / (sum_x - sum_lo);
        x.iter_mut()
            .zip(&lo)
            .for_each(|(xj, l)| *xj = l + lam * (*xj - l));
    }
    let rest = (v - x.iter().sum::<f64>()).max(0.0);
    // The untracked flows' normal weight per cell: N less the tracked flows' estimates (a
    // signed sketch keeps the signs: sk(r n) = r sk(n) holds for its counters as they are).
    let mut base = nc.clone();
    for (col, &nj) in cells.iter().zip(est) {
        for &c in col {
            base[cell_index(c)] -= cell_sign(c) * nj;
        }
    }
    if !signed {
        base.iter_mut().for_each(|b| *b = b.max(0.0));
    }
    let w_n = normal_total(normal, &nc).unwrap_or(0.0);
    let untracked = (w_n - est.iter().sum::<f64>()).max(0.0);
    let mut t = nc;
    for (col, &xj) in cells.iter().zip(&x) {
        for &c in col {
            t[cell_index(c)] += cell_sign(c) * xj;
        }
    }
    for (i, c) in mass.iter().enumerate() {
        let row = starts[i]..starts[i + 1];
        let b: f64 = base[row.clone()].iter().sum();
        let r = match c {
            // Constraint (1) exactly: this row's Y sums to c_i (V - sum x).
            Some(c) if b > 0.0 => c * rest / b,
            // No normal weight left in the row: spread the remainder evenly.
            Some(c) => {
                base[row.clone()].iter_mut().for_each(|v| *v = 1.0);
                c * rest / row.len().max(1) as f64
            }
            None if untracked > 0.0 => rest / untracked,
            None => 0.0,
        };
        for (tc, bc) in t[row.clone()].iter_mut().zip(&base[row]) {
            *tc += r * bc;
        }
    }
    debug_assert_eq!(t.len(), starts[starts.len() - 1]);
    (x, t)
}

/// Recover `normal` (the merged normal-path sketch) with the fast-path `summary` by `method`.
pub fn recover<S: Linear>(
    normal: &S,
    summary: &Summary,
    method: Method,
    opts: &Options,
) -> Result<Recovered, RecoverError> {
    let (m, n) = normal.shape();
    if m == 0 || n == 0 {
        return Err(RecoverError::Empty);
    }
    let keys: Vec<FlowKey> = summary.flows.iter().map(|t| t.key).collect();
    let cells = columns(normal, &keys)?;
    let base = |x: Vec<f64>, t: Vec<f64>| Recovered {
        method,
        t,
        rows: m,
        cols: n,
        x,
        cells: cells.clone(),
        iterations: 0,
        converged: true,
    };
    match method {
        Method::None => Ok(base(vec![0.0; keys.len()], normal.counters())),
        Method::Lower | Method::Upper => {
            let mut s = normal.clone();
            let b = if method == Method::Lower {
                Bound::Lower
            } else {
                Bound::Upper
            };
            inject(&mut s, summary, b);
            let x = summary
                .flows
                .iter()
                .map(|t| if b == Bound::Lower { t.lo } else { t.hi } as f64)
                .collect();
            Ok(base(x, s.counters()))
        }
        Method::Proportional => {
            let (fit, est) = proportional_fit(normal, summary, &cells);
            if fit.uniform {
                let (x, t) = proportional(normal, summary, &cells, fit.ratio, &est);
                return Ok(base(x, t));
            }
            // The data does not look like a uniform overflow: the paper's method answers, and
            // says so through `Recovered::method`.
            recover(normal, summary, Method::Sketchvisor, opts)
        }
        Method::Sketchvisor => {
            let bits = opts
                .key_bits
                .unwrap_or_else(|| 8 * keys.first().map_or(13, |k| k.len()) as u32);
            let lens = normal.row_lens();
            let uniform = lens.iter().all(|&l| l == n);
            let p = Problem {
                m,
                n,
                starts: row_starts(&lens),
                n_counters: normal.counters(),
                mass: normal.row_mass(),
                signed: normal.signed(),
                cells: &cells,
                lo: summary.flows.iter().map(|t| t.lo as f64).collect(),
                hi: summary.flows.iter().map(|t| t.hi as f64).collect(),
                v: summary.v as f64,
                beta: (2.0 * f64::from(bits)).sqrt(),
            };
            // Rows of different lengths are no matrix: no nuclear norm for them.
            let nuclear = uniform && opts.nuclear.unwrap_or_else(|| normal.low_rank());
            let sol = p.solve(opts, nuclear);
            Ok(Recovered {
                method,
                t: sol.t,
                rows: m,
                cols: n,
                x: sol.x,
                cells,
                iterations: sol.iterations,
                converged: sol.converged,
            })
        }
    }
}

/// The optimisation problem of RECOVERY.md 5, in bytes (scaled inside [`Problem::solve`]).
struct Problem<'a> {
    m: usize,
    /// The longest row; every row has this length when the nuclear norm is kept.
    n: usize,
    /// Where each row starts in the counters (`m + 1` offsets, [`row_starts`]).
    starts: Vec<usize>,
    n_counters: Vec<f64>,
    mass: Vec<Option<f64>>,
    /// `A` has `-1` entries and `Y` is signed (Count Sketch rows); else `Y >= 0`.
    signed: bool,
    cells: &'a [Vec<u32>],
    lo: Vec<f64>,
    hi: Vec<f64>,
    v: f64,
    beta: f64,
}

struct Solution {
    t: Vec<f64>,
    x: Vec<f64>,
    iterations: usize,
    converged: bool,
}

fn norm2(a: &[f64]) -> f64 {
    a.iter().map(|v| v * v).sum::<f64>().sqrt()
}

/// Median of a non-empty slice (sorted in place).
fn median(v: &mut [f64]) -> f64 {
    v.sort_unstable_by(|a, b| a.total_cmp(b));
    let k = v.len();
    if k % 2 == 1 {
        v[k / 2]
    } else {
        0.5 * (v[k / 2 - 1] + v[k / 2])
    }
}

impl Problem<'_> {
    /// `A x` added into `out`.
    fn add_ax(&self, x: &[f64], out: &mut [f64]) {
        for (col, &xj) in self.cells.iter().zip(x) {
            if xj != 0.0 {
                if self.signed {
                    for &c in col {
                        out[cell_index(c)] += cell_sign(c) * xj;
                    }
                } else {
                    for &c in col {
                        out[c as usize] += xj;
                    }
                }
            }
        }
    }

    /// `A' r`.
    fn atr(&self, r: &[f64], out: &mut [f64]) {
        for (o, col) in out.iter_mut().zip(self.cells) {
            *o = if self.signed {
                col.iter().map(|&c| cell_sign(c) * r[cell_index(c)]).sum()
            } else {
                col.iter().map(|&c| r[c as usize]).sum()
            };
        }
    }

    /// `||A||_2^2` by 20 power iterations on `A'A` (RECOVERY.md 5), floored at 1 cell.
    fn a_norm_sq(&self) -> f64 {
        let k = self.cells.len();
        if k == 0 {
            return 1.0;
        }
        let mut x = vec![1.0 / (k as f64).sqrt(); k];
        let mut ax = vec![0.0; self.starts[self.m]];
        let mut y = vec![0.0; k];
        let mut lambda = 1.0;
        for _ in 0..20 {
            ax.iter_mut().for_each(|v| *v = 0.0);
            self.add_ax(&x, &mut ax);
            self.atr(&ax, &mut y);
            lambda = norm2(&y);
            if lambda == 0.0 {
                return 1.0;
            }
            x.iter_mut().zip(&y).for_each(|(a, b)| *a = b / lambda);
        }
        lambda.max(1.0)
    }

    fn solve(&self, o: &Options, nuclear: bool) -> Solution {
        let (m, n, k) = (self.m, self.n, self.cells.len());
        let st = &self.starts;
        let mn = st[m];
        // Lemma 4.1 gives sum(lo) <= V; a merged summary could only break it by a bug upstream,
        // and then no x is feasible: take V as sum(lo).
        let sum_lo: f64 = self.lo.iter().sum();
        let v_bytes = self.v.max(sum_lo);
        // Scale by the mean counter of T0 = N + A x0 + Y0: sum(N) + sum_i c_i V over m n (in
        // absolute value: a signed sketch's counters cancel in a plain sum; without a mass row,
        // V itself spread over the counters).
        let mass_sum: f64 = self.mass.iter().flatten().sum();
        let abs_n: f64 = self.n_counters.iter().map(|c| c.abs()).sum();
        let s = (abs_n + mass_sum.max(1.0) * v_bytes) / mn as f64;
        if s <= 0.0 {
            // Nothing anywhere (N = 0, V = 0, so lo = 0): T = N.
            return Solution {
                t: self.n_counters.clone(),
                x: self.lo.clone(),
                iterations: 0,
                converged: true,
            };
        }
        let nn: Vec<f64> = self.n_counters.iter().map(|c| c / s).collect();
        let lo: Vec<f64> = self.lo.iter().map(|c| c / s).collect();
        let hi: Vec<f64> = self
            .hi
            .iter()
            .zip(&self.lo)
            .map(|(h, l)| h.max(*l) / s)
            .collect();
        let v = v_bytes / s;

        // Parameters.
        let nnz = self.n_counters.iter().filter(|&&c| c != 0.0).count();
        let eta = nnz as f64 / mn as f64;
        let alpha = ((m as f64).sqrt() + (n as f64).sqrt()) * eta.sqrt();
        let beta = self.beta;
        let gamma_y = {
            let mut nz: Vec<f64> = self
                .n_counters
                .iter()
                .copied()
                .filter(|&c| c != 0.0)
                .collect();
            let mad = if nz.is_empty() {
                0.0
            } else {
                let med = median(&mut nz);
                let mut dev: Vec<f64> = nz.iter().map(|c| (c - med).abs()).collect();
                median(&mut dev)
            };
            (1.4826 * mad).max(1.0) / s
        };
        let gamma = 10.0 * gamma_y;

        // Initialisation: x at the midpoints, shrunk toward lo if they exceed V.
        let mut x: Vec<f64> = lo.iter().zip(&hi).map(|(l, h)| 0.5 * (l + h)).collect();
        let sum_mid: f64 = x.iter().sum();
        let sum_lo: f64 = lo.iter().sum();
        if sum_mid > v && sum_mid > sum_lo {
            let f = ((v - sum_lo) / (sum_mid - sum_lo)).clamp(0.0, 1.0);
            x.iter_mut()
                .zip(&lo)
                .for_each(|(xj, l)| *xj = l + (*xj - l) * f);
        }
        let sum_x: f64 = x.iter().sum();
        let mut y = vec![0.0; mn];
        for (i, c) in self.mass.iter().enumerate() {
            if let Some(c) = c {
                let len = (st[i + 1] - st[i]).max(1);
                let u = (c * (v - sum_x)).max(0.0) / len as f64;
                y[st[i]..st[i + 1]].iter_mut().for_each(|e| *e = u);
            }
        }
        let mut ax = vec![0.0; mn];
        self.add_ax(&x, &mut ax);
        let mut t: Vec<f64> = (0..mn).map(|i| nn[i] + ax[i] + y[i]).collect();
        let t0_norm = norm2(&t).max(f64::MIN_POSITIVE);
        let mut mm = vec![0.0; mn];
        let mut lambda = vec![0.0; m];
        let tau = 0.9 / self.a_norm_sq();
        // sigma_1(T0); a view with rows of different lengths takes ||T0||_F >= sigma_1 (a smaller
        // first penalty, a few more iterations).
        let sigma1 = if nuclear || mn == m * n {
            Svt::new(m, n).sigma_max(&t)
        } else {
            t0_norm
        }
        .max(f64::MIN_POSITIVE);
        let mu0 = 1.0 / sigma1;
        let mut mu = mu0;

        let mut svt = Svt::new(m, n);
        let mut j = vec![0.0; mn];
        let mut g = vec![0.0; k];
        let mut vx = vec![0.0; k];
        let mut x_new = vec![0.0; k];
        let mut iterations = 0;
        let mut converged = false;
        let mut row_sum_y: Vec<f64> = (0..m).map(|i| y[st[i]..st[i + 1]].iter().sum()).collect();
        while iterations < o.max_iter {
            iterations += 1;
            // 1. T = SVT_{alpha/mu}(N + A x + Y - M/mu).
            for i in 0..mn {
                j[i] = nn[i] + ax[i] + y[i] - mm[i] / mu;
            }
            if nuclear {
                svt.apply(&j, alpha / mu, &mut t);
            } else {
                t.copy_from_slice(&j);
            }
            // 2. x: one linearised step on the coupling term, then the exact prox of beta|x|,
            //    the box and the mass penalty, by bisection on S = sum(x).
            //    A x - J_x with J_x = T - N - Y + M/mu.
            for i in 0..mn {
                j[i] = ax[i] - (t[i] - nn[i] - y[i] + mm[i] / mu);
            }
            self.atr(&j, &mut g);
            for q in 0..k {
                vx[q] = x[q] - tau * g[q];
            }
            let g_of = |s_sum: f64| -> f64 {
                self.mass
                    .iter()
                    .enumerate()
                    .filter_map(|(i, c)| c.map(|c| (i, c)))
                    .map(|(i, c)| c * (lambda[i] + mu * (c * s_sum + row_sum_y[i] - c * v)))
                    .sum()
            };
            let x_of = |s_sum: f64, out: &mut [f64]| -> f64 {
                let shift = (tau / mu) * (beta + g_of(s_sum));
                let mut tot = 0.0;
                for q in 0..k {
                    let val = (vx[q] - shift).clamp(lo[q], hi[q]);
                    out[q] = val;
                    tot += val;
                }
                tot
            };
            let (mut a, mut b) = (sum_lo, hi.iter().sum::<f64>());
            if x_of(a, &mut x_new) - a <= 0.0 {
                b = a;
            } else if x_of(b, &mut x_new) - b >= 0.0 {
                a = b;
            } else {
                for _ in 0..100 {
                    let mid = 0.5 * (a + b);
                    if x_of(mid, &mut x_new) - mid > 0.0 {
                        a = mid;
                    } else {
                        b = mid;
                    }
                    if b - a <= 1e-12 * b.abs().max(1.0) {
                        break;
                    }
                }
            }
            let sum_x = x_of(0.5 * (a + b), &mut x_new);
            let dx = x_new
                .iter()
                .zip(&x)
                .map(|(p, q)| (p - q) * (p - q))
                .sum::<f64>()
                .sqrt();
            let xn = norm2(&x_new).max(f64::MIN_POSITIVE);
            std::mem::swap(&mut x, &mut x_new);
            ax.iter_mut().for_each(|e| *e = 0.0);
            self.add_ax(&x, &mut ax);
            // 3. Y row by row: J_y = T - N - A x + M/mu; for a mass row, Y_i = max(0, (mu J -
            //    t_i) / a) with t_i the root of t = lambda_i + mu (1'Y_i(t) + c_i sum(x) - c_i V).
            let a_coef = 1.0 / gamma + mu;
            for i in 0..m {
                let r = st[i]..st[i + 1];
                for q in r.clone() {
                    j[q] = mu * (t[q] - nn[q] - ax[q] + mm[q] / mu);
                }
                match self.mass[i] {
                    Some(c) => {
                        let base = lambda[i] + mu * (c * sum_x - c * v);
                        let tt = mass_root(&j[r.clone()], base, mu, a_coef);
                        let mut sum = 0.0;
                        for q in r {
                            let val = ((j[q] - tt) / a_coef).max(0.0);
                            y[q] = val;
                            sum += val;
                        }
                        row_sum_y[i] = sum;
                    }
                    None => {
                        let mut sum = 0.0;
                        for q in r {
                            let mut val = j[q] / a_coef;
                            if !self.signed {
                                val = val.max(0.0);
                            }
                            y[q] = val;
                            sum += val;
                        }
                        row_sum_y[i] = sum;
                    }
                }
            }
            // 4. Multipliers.
            let mut res_sq = 0.0;
            for q in 0..mn {
                let rq = t[q] - nn[q] - ax[q] - y[q];
                mm[q] += mu * rq;
                res_sq += rq * rq;
            }
            for (i, c) in self.mass.iter().enumerate() {
                if let Some(c) = c {
                    let ri = c * sum_x + row_sum_y[i] - c * v;
                    lambda[i] += mu * ri;
                    res_sq += ri * ri;
                }
            }
            mu = (o.rho * mu).min(1e10 * mu0);
            // 5. Stop.
            if res_sq.sqrt() / t0_norm < o.tol && dx / xn < o.tol {
                converged = true;
                break;
            }
        }
        // T^ = N + A x^ + Y^ (constraint (1) exactly), back in bytes.
        let t_hat: Vec<f64> = (0..mn).map(|q| (nn[q] + ax[q] + y[q]) * s).collect();
        Solution {
            t: t_hat,
            x: x.iter().map(|v| v * s).collect(),
            iterations,
            converged,
        }
    }
}

/// The root `t` of `t = base + mu * sum_j max(0, (u_j - t) / a)`: the left side grows, the
/// right side falls, so there is exactly one. The function `f(t) = t - base - (mu/a) sum max(0,
/// u_j - t)` is concave and increasing and `f(base) <= 0`, so Newton's method from `base`
/// climbs to the root without overshooting, and ends exactly once the set of `u_j > t` stops
/// changing (f is piecewise linear).
fn mass_root(u: &[f64], base: f64, mu: f64, a: f64) -> f64 {
    let w = mu / a;
    let mut t = base;
    let mut last = usize::MAX;
    for _ in 0..200 {
        let (mut cnt, mut sum) = (0usize, 0.0);
        for &uj in u {
            if uj > t {
                cnt += 1;
                sum += uj - t;
            }
        }
        let f = t - base - w * sum;
        if f >= 0.0 || cnt == last {
            // Same active set as the last step: t is that piece's root.
            return t;
        }
        last = cnt;
        t -= f / (1.0 + w * cnt as f64);
    }
    t
}

/// Singular-value thresholding of an m x n matrix through the Gram matrix of its shorter side
/// (RECOVERY.md 5): for `m <= n`, `G = J J'`, `G = U diag(s^2) U'` (nalgebra's symmetric
/// eigendecomposition), `T = U diag(max(s - tau, 0) / s) U' J`. Singular values below `1e-12
/// s_1` get factor 0 (the Gram matrix squares the condition number; those are far below any
/// threshold used).
struct Svt {
    m: usize,
    n: usize,
}

impl Svt {
    fn new(m: usize, n: usize) -> Svt {
        Svt { m, n }
    }

    /// Gram matrix of the shorter side and whether it is `J J'` (rows) or `J'J` (columns).
    fn gram(&self, j: &[f64]) -> (DMatrix<f64>, bool) {
        let (m, n) = (self.m, self.n);
        if m <= n {
            let mut g = DMatrix::<f64>::zeros(m, m);
            for a in 0..m {
                let ra = &j[a * n..(a + 1) * n];
                for b in 0..=a {
                    let rb = &j[b * n..(b + 1) * n];
                    let d: f64 = ra.iter().zip(rb).map(|(p, q)| p * q).sum();
                    g[(a, b)] = d;
                    g[(b, a)] = d;
                }
            }
            (g, true)
        } else {
            let mut g = DMatrix::<f64>::zeros(n, n);
            for r in 0..m {
                let row = &j[r * n..(r + 1) * n];
                for a in 0..n {
                    for b in 0..=a {
                        g[(a, b)] += row[a] * row[b];
                    }
                }
            }
            for a in 0..n {
                for b in 0..a {
                    g[(b, a)] = g[(a, b)];
                }
            }
            (g, false)
        }
    }

    fn sigma_max(&self, j: &[f64]) -> f64 {
        let (g, _) = self.gram(j);
        let e = SymmetricEigen::new(g);
        e.eigenvalues.iter().fold(0.0f64, |a, &b| a.max(b)).sqrt()
    }

    fn apply(&mut self, j: &[f64], tau: f64, out: &mut [f64]) {
        let (m, n) = (self.m, self.n);
        let (g, rows) = self.gram(j);
        let e = SymmetricEigen::new(g);
        let s1 = e.eigenvalues.iter().fold(0.0f64, |a, &b| a.max(b)).sqrt();
        let f: Vec<f64> = e
            .eigenvalues
            .iter()
            .map(|&l| {
                let s = l.max(0.0).sqrt();
                if s <= 1e-12 * s1 || s <= tau {
                    0.0
                } else {
                    (s - tau) / s
                }
            })
            .collect();
        let u = &e.eigenvectors;
        let d = u.nrows();
        // W = U diag(f) U' (d x d).
        let mut w = vec![0.0; d * d];
        for a in 0..d {
            for b in 0..d {
                w[a * d + b] = (0..d).map(|l| u[(a, l)] * f[l] * u[(b, l)]).sum();
            }
        }
        if rows {
            // T = W J, row by row.
            for a in 0..m {
                let o = &mut out[a * n..(a + 1) * n];
                o.iter_mut().for_each(|v| *v = 0.0);
                for b in 0..m {
                    let c = w[a * m + b];
                    if c != 0.0 {
                        for (ov, jv) in o.iter_mut().zip(&j[b * n..(b + 1) * n]) {
                            *ov += c * jv;
                        }
                    }
                }
            }
        } else {
            // T = J W.
            for r in 0..m {
                let row = &j[r * n..(r + 1) * n];
                for a in 0..n {
                    out[r * n + a] = (0..n).map(|b| row[b] * w[b * n + a]).sum();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mass_root_solves_the_row_equation() {
        let u = [5.0, 1.0, 3.0, -2.0, 0.5];
        for &(base, mu, a) in &[(0.0, 1.0, 2.0), (-4.0, 0.5, 1.0), (10.0, 1.0, 1.0)] {
            let t = mass_root(&u, base, mu, a);
            let rhs = base + mu * u.iter().map(|&x| ((x - t) / a).max(0.0)).sum::<f64>();
            assert!((t - rhs).abs() < 1e-9, "{t} vs {rhs}");
        }
    }

    #[test]
    fn svt_shrinks_singular_values() {
        // A rank-one 2 x 3 matrix with singular value 5: thresholding by 2 scales it by 3/5; by 6
        // it vanishes.
        let u = [0.6, 0.8];
        let v = [1.0, 0.0, 0.0];
        let j: Vec<f64> = (0..6).map(|q| 5.0 * u[q / 3] * v[q % 3]).collect();
        let mut s = Svt::new(2, 3);
        assert!((s.sigma_max(&j) - 5.0).abs() < 1e-9);
        let mut out = vec![0.0; 6];
        s.apply(&j, 2.0, &mut out);
        for q in 0..6 {
            assert!((out[q] - 0.6 * j[q]).abs() < 1e-9);
        }
        s.apply(&j, 6.0, &mut out);
        assert!(out.iter().all(|&x| x.abs() < 1e-12));
        // The transposed shape takes the other Gram matrix.
        let jt: Vec<f64> = (0..6).map(|q| j[(q % 2) * 3 + q / 2]).collect();
        let mut st = Svt::new(3, 2);
        let mut out_t = vec![0.0; 6];
        st.apply(&jt, 2.0, &mut out_t);
        for q in 0..6 {
            assert!((out_t[q] - 0.6 * jt[q]).abs() < 1e-9);
        }
    }

    fn small_cm() -> sketch::CountMin {
        sketch::CountMin::new(
            sketch::CountMinConfig {
                rows: 3,
                width: 16,
                candidates: 8,
            },
            1,
        )
        .unwrap()
    }

    /// With no tracked flow, all of `V` is untracked traffic: every row of `T^ - N` holds `V`
    /// (the mass constraint), non-negative, and constraint (1) holds by construction.
    #[test]
    fn untracked_mass_lands_in_every_row() {
        let mut n = small_cm();
        for i in 0..40u32 {
            n.update(&FlowKey::from_u32(i), 1 + u64::from(i % 5));
        }
        let sum = Summary {
            flows: vec![],
            v: 300,
            e: 10,
            paths: Default::default(),
        };
        let r = recover(&n, &sum, Method::Sketchvisor, &Options::default()).unwrap();
        assert!(r.converged);
        let nc = n.counters();
        for row in 0..3 {
            let add: f64 = (0..16).map(|c| r.t[row * 16 + c] - nc[row * 16 + c]).sum();
            assert!((add - 300.0).abs() < 0.5, "row {row}: {add}");
            assert!((0..16).all(|c| r.t[row * 16 + c] >= nc[row * 16 + c] - 1e-9));
        }
        // Nothing at all: T = N = 0.
        let empty = recover(
            &small_cm(),
            &Summary::default(),
            Method::Sketchvisor,
            &Options::default(),
        )
        .unwrap();
        assert!(empty.t.iter().all(|&x| x == 0.0));
    }

    /// Tracked flows get x within their bounds, and the rows' added mass is V.
    #[test]
    fn x_stays_within_the_bounds_and_rows_sum_to_v() {
        let n = small_cm();
        let flows: Vec<crate::Tracked> = (0..6u32)
            .map(|i| crate::Tracked {
                key: FlowKey::from_u32(100 + i),
                lo: 10 * u64::from(i + 1),
                hi: 10 * u64::from(i + 1) + 7,
            })
            .collect();
        let sum = Summary {
            flows,
            v: 400,
            e: 7,
            paths: Default::default(),
        };
        let r = recover(&n, &sum, Method::Sketchvisor, &Options::default()).unwrap();
        for (x, t) in r.x.iter().zip(&sum.flows) {
            assert!(
                *x >= t.lo as f64 - 1e-6 && *x <= t.hi as f64 + 1e-6,
                "{x} {t:?}"
            );
        }
        for row in 0..3 {
            let add: f64 = (0..16).map(|c| r.t[row * 16 + c]).sum();
            assert!((add - 400.0).abs() < 0.5, "row {row}: {add}");
        }
        let lower = recover(&n, &sum, Method::Lower, &Options::default()).unwrap();
        let upper = recover(&n, &sum, Method::Upper, &Options::default()).unwrap();
        assert_eq!(lower.t.iter().sum::<f64>(), 3.0 * 210.0);
        assert_eq!(upper.t.iter().sum::<f64>(), 3.0 * 252.0);
    }

    #[test]
    fn rel_error_of_equal_is_zero() {
        assert_eq!(rel_error(&[1.0, 2.0], &[1.0, 2.0]), 0.0);
        assert!((rel_error(&[0.0, 2.0], &[1.0, 2.0]) - (1.0f64 / 5.0).sqrt()).abs() < 1e-12);
    }
}
