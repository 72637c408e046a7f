//! Linear sketches as the recovery sees them (RECOVERY.md 3): a counter matrix `T` (row major)
//! and the sketch function `sk(x) = A x`, one column of `A` per tracked flow.
//!
//! Rows may differ in length ([`Linear::row_lens`]: UnivMon's levels, RevSketch's reversible
//! and verification rows); `shape` is then (rows, the longest row) and the counters are the rows
//! one after the other. A column's entries are `+1`, or `-1` for a signed sketch (Count Sketch
//! inside UnivMon, [`Linear::signed`]): a cell of a column is its counter index, with [`NEG`]
//! set for a `-1` ([`cell_index`], [`cell_sign`]).
//!
//! The columns are found through the sketch's own update, never by re-implementing its hashing
//! ([`columns`]). Unsigned sketches: on an empty copy, 32 keys at a time are inserted with
//! weights `2^0 .. 2^31`; since the counters are exact sums below saturation (u32 counters hold
//! `2^32 - 1`, the sum of the 32 weights, exactly), bit `j` of a counter says whether key `j`
//! touches it. Signed sketches: 20 keys at a time with weights `3^0 .. 3^19`; a counter is then
//! `sum_j s_j 3^j` with `s_j` in {-1, 0, +1}, which its balanced-ternary digits spell out
//! uniquely (the sum of the weights, `(3^20 - 1) / 2`, fits an i32 counter). One update per key
//! and one scan of the counters per probe; the sketch crate needs only a read accessor for its
//! counters.
//! The check that every key touches exactly `c_i` cells of each mass row catches a sketch that
//! is not 0/1-linear (a key hitting one cell twice would read as another key's bit).

use algo::Algorithm;
use key::FlowKey;

/// Set in a cell of a column whose coefficient is `-1` (signed sketches).
pub const NEG: u32 = 1 << 31;

/// The counter index of a column's cell.
#[inline(always)]
pub fn cell_index(c: u32) -> usize {
    (c & !NEG) as usize
}

/// The coefficient (`+1` or `-1`) of a column's cell.
#[inline(always)]
pub fn cell_sign(c: u32) -> f64 {
    if c & NEG == 0 {
        1.0
    } else {
        -1.0
    }
}

/// What the recovery needs of a linear counter sketch.
pub trait Linear: Algorithm + Clone {
    /// Rows and columns of the counter matrix (`rows x width` for Count-Min); for a view whose
    /// rows differ in length ([`Linear::row_lens`]), the rows and the longest row.
    fn shape(&self) -> (usize, usize);

    /// The length of every row, in order (their sum is the number of counters). Default: every
    /// row as long as `shape().1`.
    fn row_lens(&self) -> Vec<usize> {
        let (m, n) = self.shape();
        vec![n; m]
    }

    /// Whether `A` has `-1` entries (Count Sketch rows): the untracked part `Y` is then signed.
    fn signed(&self) -> bool {
        false
    }

    /// The normal path's total weight when the sketch keeps it (UnivMon counts it exactly);
    /// `None`: read it from the rows with a mass constant.
    fn total_weight(&self) -> Option<f64> {
        None
    }

    /// The counters, row major, into `out` (cleared first). Exact in f64 (32-bit counters).
    fn counters_into(&self, out: &mut Vec<f64>);

    /// `c_i` of every row: the weight a flow of weight 1 adds to row `i` (Count-Min: 1 in every
    /// row), `None` for rows with signs, sampling or key-dependent counters.
    fn row_mass(&self) -> Vec<Option<f64>>;

    /// The point query of a flow from any counter matrix of this shape, given the flow's
    /// cells (its column of `A`): how the sketch would answer from recovered counters.
    fn point(&self, t: &[f64], cells: &[u32]) -> f64;

    /// Whether the counter matrix has useful low-rank structure, i.e. whether the recovery keeps
    /// its nuclear-norm term by default. Section 5.3 and Figure 5: Count-Min (a few rows of
    /// thousands of counters) shows no low-rank approximation, its nuclear norm "is nearly a
    /// constant, so we can discard the term"; RevSketch, Deltoid and TwoLevel do. A view with
    /// rows of different lengths is no matrix: the term is always dropped for it.
    fn low_rank(&self) -> bool {
        true
    }

    fn counters(&self) -> Vec<f64> {
        let mut v = Vec::new();
        self.counters_into(&mut v);
        v
    }
}

/// Where each row starts in the row-major counters, and the end (`lens.len() + 1` offsets).
pub fn row_starts(lens: &[usize]) -> Vec<usize> {
    let mut s = Vec::with_capacity(lens.len() + 1);
    let mut at = 0;
    s.push(0);
    for l in lens {
        at += l;
        s.push(at);
    }
    s
}

impl Linear for sketch::CountMin {
    fn shape(&self) -> (usize, usize) {
        let m = self.matrix();
        (m.rows(), m.width())
    }

    fn counters_into(&self, out: &mut Vec<f64>) {
        out.clear();
        out.extend(self.matrix().counters().iter().map(|&c| f64::from(c)));
    }

    fn row_mass(&self) -> Vec<Option<f64>> {
        vec![Some(1.0); self.matrix().rows()]
    }

    fn low_rank(&self) -> bool {
        false
    }

    /// The minimum over the rows (Count-Min's point query).
    fn point(&self, t: &[f64], cells: &[u32]) -> f64 {
        min_of(t, cells)
    }
}

/// MRAC (ALGORITHMS.md 8; SketchVisor 7.1: one array of 4000 counters): one counter per flow.
/// With one array every flow adds its weight to the only row (`c = 1`); with several, a flow
/// goes to one array chosen by its hash (multi-resolution sampling), so the rows have no mass
/// constant and the recovery's `V` constraint does not apply to them.
impl Linear for sketch::Mrac {
    fn shape(&self) -> (usize, usize) {
        let c = self.config();
        (c.arrays, c.width)
    }

    fn counters_into(&self, out: &mut Vec<f64>) {
        out.clear();
        out.extend(self.counters().iter().map(|&c| f64::from(c)));
    }

    fn row_mass(&self) -> Vec<Option<f64>> {
        let a = self.config().arrays;
        vec![(a == 1).then_some(1.0); a]
    }

    /// MRAC's cells are not queried per flow (it answers the size distribution from all of
    /// them); the flow's counter is what it holds for the flow.
    fn point(&self, t: &[f64], cells: &[u32]) -> f64 {
        cells
            .first()
            .and_then(|&c| t.get(cell_index(c)))
            .copied()
            .unwrap_or(0.0)
    }
}

/// Count-Min's point query: the minimum of the flow's counters.
fn min_of(t: &[f64], cells: &[u32]) -> f64 {
    cells
        .iter()
        .filter_map(|&c| t.get(cell_index(c)))
        .fold(f64::INFINITY, |a, &b| a.min(b))
        .min(f64::MAX)
}

/// RevSketch (ALGORITHMS.md; SketchVisor 7.1: 4 x 4000): its reversible rows are Count-Min rows
/// indexed by the modular hash (RECOVERY.md 3: +1 at `(i, h_i(f))` in every row, `c_i = 1`),
/// followed by its verification rows, a Count-Min of their own width (`c_i = 1` too). Both are
/// recovered and written back together: the sketch answers a point query (and confirms a
/// reversed candidate) with the minimum over all of them, so rows left at the normal path's
/// counts would cap every recovered estimate at NoRecovery's.
impl Linear for reversible::RevSketch {
    fn shape(&self) -> (usize, usize) {
        let c = self.config();
        (c.rows + c.verify_rows, c.width.max(c.verify_width))
    }

    fn row_lens(&self) -> Vec<usize> {
        let c = self.config();
        let mut v = vec![c.width; c.rows];
        v.extend(std::iter::repeat_n(c.verify_width, c.verify_rows));
        v
    }

    fn counters_into(&self, out: &mut Vec<f64>) {
        out.clear();
        out.extend(self.counters().iter().map(|&c| f64::from(c)));
        out.extend(self.verify_counters().iter().map(|&c| f64::from(c)));
    }

    fn row_mass(&self) -> Vec<Option<f64>> {
        let c = self.config();
        vec![Some(1.0); c.rows + c.verify_rows]
    }

    /// Section 5.3 finds RevSketch low-rank (Figure 5: half of the singular values hold 90%),
    /// but our 4 rows of 4096 counters are Count-Min's shape: keeping the term measured worse
    /// (counter error 0.040 against LowerRecovery's 0.039, 0.035 without it, reversible rows
    /// alone), so it is dropped as for Count-Min (and the rows differ in length anyway).
    fn low_rank(&self) -> bool {
        false
    }

    /// The minimum over the reversible and the verification rows (`RevSketch::estimate`).
    fn point(&self, t: &[f64], cells: &[u32]) -> f64 {
        min_of(t, cells)
    }
}

/// FlowRadar's counting table, PacketCount field only (RECOVERY.md 3: +1 on each of the flow's
/// `k` cells, one row with `c = k`). FlowXOR and FlowCount are not linear in the weight and stay
/// out of the view: the untracked flows' keys cannot be recovered, so a recovered FlowRadar
/// decodes the flows its normal path and the fast path's table saw, with their recovered
/// counts; a flow only the fast path saw and did not track stays undecodable.
impl Linear for table::FlowRadar {
    fn shape(&self) -> (usize, usize) {
        (1, self.cells())
    }

    fn counters_into(&self, out: &mut Vec<f64>) {
        out.clear();
        out.extend(self.packet_counts().map(|c| c as f64));
    }

    fn row_mass(&self) -> Vec<Option<f64>> {
        vec![Some(self.cell_hashes() as f64)]
    }

    /// One row of thousands of cells: no low-rank structure to use (as Count-Min's, 5.3).
    fn low_rank(&self) -> bool {
        false
    }

    fn point(&self, t: &[f64], cells: &[u32]) -> f64 {
        min_of(t, cells)
    }
}

/// Deltoid (RECOVERY.md 3): at (row i, group h_i(f)), +1 on the total counter and +1 on bit
/// counter b for each 1-bit b of the key. The view is the layout RECOVERY.md 3 gives: one
/// matrix row per (hash row, counter of a group), `rows x (1 + 8 key_len)` rows of `groups`
/// columns (transposed from the sketch's group-major storage). The total rows have `c = 1`;
/// the bit rows are key-dependent and have no mass constant.
impl Linear for reversible::Deltoid {
    fn shape(&self) -> (usize, usize) {
        let c = self.config();
        (c.rows * self.stride(), c.groups)
    }

    fn counters_into(&self, out: &mut Vec<f64>) {
        let (g, s) = (self.config().groups, self.stride());
        let src = self.counters();
        out.clear();
        out.resize(src.len(), 0.0);
        for (q, &c) in src.iter().enumerate() {
            // Storage: ((row * groups) + group) * stride + b; view: (row * stride + b) * groups + group.
            let (b, rg) = (q % s, q / s);
            let (row, grp) = (rg / g, rg % g);
            out[(row * s + b) * g + grp] = f64::from(c);
        }
    }

    fn row_mass(&self) -> Vec<Option<f64>> {
        let s = self.stride();
        (0..self.config().rows * s)
            .map(|r| (r % s == 0).then_some(1.0))
            .collect()
    }

    /// Section 5.3 counts Deltoid among the low-rank sketches, but its view has `rows x 105`
    /// rows for five-tuples: the singular-value step would cost `3 m^2 n` (about 5e8 flops at
    /// 2 x 4096) per iteration, a hundred times Count-Min's whole iteration. Dropped.
    fn low_rank(&self) -> bool {
        false
    }

    /// The minimum over the flow's total and set-bit counters: an upper bound of its size, as
    /// Count-Min's (Deltoid's own estimate also uses `T0 - T1[b]` of the clear bits, which the
    /// column does not list).
    fn point(&self, t: &[f64], cells: &[u32]) -> f64 {
        min_of(t, cells)
    }
}

/// UnivMon (RECOVERY.md 3): one block per level, each a Count Sketch: a flow in level `l` (its
/// sampling bits all 1) has `s_i(f)` at `(i, h_i(f))` of the level's rows. The rows of all
/// levels follow one another (the levels differ in width). Signs and sampling: no row has a
/// mass constant; the normal path's total is UnivMon's own exact count.
impl Linear for sketch::UnivMon {
    fn shape(&self) -> (usize, usize) {
        let c = self.config();
        (
            c.rows * c.widths.len(),
            c.widths.iter().copied().max().unwrap_or(0),
        )
    }

    fn row_lens(&self) -> Vec<usize> {
        let c = self.config();
        c.widths
            .iter()
            .flat_map(|&w| std::iter::repeat_n(w, c.rows))
            .collect()
    }

    fn signed(&self) -> bool {
        true
    }

    fn total_weight(&self) -> Option<f64> {
        Some(self.total() as f64)
    }

    fn counters_into(&self, out: &mut Vec<f64>) {
        out.clear();
        for l in self.level_counters() {
            out.extend(l.iter().map(|&c| f64::from(c)));
        }
    }

    fn row_mass(&self) -> Vec<Option<f64>> {
        vec![None; self.config().rows * self.config().widths.len()]
    }

    /// Level 0's Count Sketch estimate: the median over its rows of `s_i(f) T[i][h_i(f)]`
    /// (the mean of the two middle values for an even row count).
    fn point(&self, t: &[f64], cells: &[u32]) -> f64 {
        let c = self.config();
        let level0 = c.rows * c.widths.first().copied().unwrap_or(0);
        let mut v: Vec<f64> = cells
            .iter()
            .filter(|&&x| cell_index(x) < level0)
            .filter_map(|&x| t.get(cell_index(x)).map(|&tv| cell_sign(x) * tv))
            .collect();
        if v.is_empty() {
            return 0.0;
        }
        v.sort_unstable_by(f64::total_cmp);
        let k = v.len();
        if k % 2 == 1 {
            v[k / 2]
        } else {
            0.5 * (v[k / 2 - 1] + v[k / 2])
        }
    }

    /// Levels of different widths are no matrix.
    fn low_rank(&self) -> bool {
        false
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ColumnError {
    #[error("flow {key}: touches {got} cells of row {row}, the sketch's row mass says {want}")]
    NotZeroOne {
        key: FlowKey,
        row: usize,
        got: usize,
        want: usize,
    },
    #[error("flow {key}: its probe read a counter that is no sum of +-1 times its weights")]
    NotSigned { key: FlowKey },
}

/// Keys probed per scan: one bit each of a u32 counter (unsigned sketches), one balanced
/// ternary digit each of an i32 counter (signed sketches).
const PROBE: usize = 32;
const PROBE_SIGNED: usize = 20;

/// The cells of every key (its column of `A`, cell indices into the row-major counters,
/// ascending, [`NEG`] set on a `-1`), found by probing an empty copy of `sketch` with weighted
/// updates (module docs).
pub fn columns<S: Linear>(sketch: &S, keys: &[FlowKey]) -> Result<Vec<Vec<u32>>, ColumnError> {
    let mut scratch = sketch.clone();
    let signed = sketch.signed();
    let probe = if signed { PROBE_SIGNED } else { PROBE };
    let starts = row_starts(&sketch.row_lens());
    let mass = sketch.row_mass();
    let mut cols: Vec<Vec<u32>> = vec![Vec::new(); keys.len()];
    let mut buf = Vec::new();
    for (c, chunk) in keys.chunks(probe).enumerate() {
        scratch.reset();
        for (j, k) in chunk.iter().enumerate() {
            let w = if signed {
                3u64.pow(j as u32)
            } else {
                1u64 << j
            };
            scratch.update(k, w);
        }
        scratch.counters_into(&mut buf);
        for (cell, &v) in buf.iter().enumerate() {
            if v == 0.0 {
                continue;
            }
            if signed {
                // Balanced ternary: digit j in {-1, 0, +1} is key j's coefficient.
                let mut r = v as i64;
                let mut j = 0;
                while r != 0 {
                    let d = match r.rem_euclid(3) {
                        0 => 0,
                        1 => 1,
                        _ => -1,
                    };
                    if d != 0 {
                        let Some(col) = cols.get_mut(c * probe + j) else {
                            let key = chunk.first().copied().unwrap_or_default();
                            return Err(ColumnError::NotSigned { key });
                        };
                        col.push(cell as u32 | if d < 0 { NEG } else { 0 });
                    }
                    r = (r - d) / 3;
                    j += 1;
                }
            } else {
                let mut bits = v as u64;
                while bits != 0 {
                    let j = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    if let Some(col) = cols.get_mut(c * probe + j) {
                        col.push(cell as u32);
                    }
                }
            }
        }
    }
    for (k, col) in keys.iter().zip(&cols) {
        for (row, c) in mass.iter().enumerate() {
            if let Some(c) = c {
                let want = *c as usize;
                let range = starts[row]..starts[row + 1];
                let got = col
                    .iter()
                    .filter(|&&x| range.contains(&cell_index(x)))
                    .count();
                if got != want {
                    return Err(ColumnError::NotZeroOne {
                        key: *k,
                        row,
                        got,
                        want,
                    });
                }
            }
        }
    }
    Ok(cols)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sketch::{CountMin, CountMinConfig};

    #[test]
    fn probed_columns_are_the_cells_an_update_touches() {
        let cm = CountMin::new(
            CountMinConfig {
                rows: 4,
                width: 64,
                candidates: 16,
            },
            7,
        )
        .unwrap();
        let keys: Vec<FlowKey> = (0..100u32).map(|i| FlowKey::from_u32(i * 77)).collect();
        let cols = columns(&cm, &keys).unwrap();
        for (k, col) in keys.iter().zip(&cols) {
            // One key alone on an empty sketch: its non-zero counters are its column.
            let mut one = cm.clone();
            one.update(k, 3);
            let want: Vec<u32> = one
                .counters()
                .iter()
                .enumerate()
                .filter(|(_, &v)| v != 0.0)
                .map(|(i, _)| i as u32)
                .collect();
            assert_eq!(col, &want, "{k}");
            assert_eq!(cm.point(&one.counters(), col), 3.0);
        }
    }
}
