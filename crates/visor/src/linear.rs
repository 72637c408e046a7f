//! Linear sketches as the recovery sees them (RECOVERY.md 3): a counter matrix `T` (m x n, row
//! major) and the sketch function `sk(x) = A x`, one column of `A` per tracked flow.
//!
//! The columns are found through the sketch's own update, never by re-implementing its hashing
//! ([`columns`]): on an empty copy, 32 keys at a time are inserted with weights `2^0 .. 2^31`;
//! since the counters are exact sums below saturation (u32 counters hold `2^32 - 1`, the sum of
//! the 32 weights, exactly), bit `j` of a counter says whether key `j` touches it. One update
//! per key and one scan of the counters per 32 keys; the sketch crate needs only a read
//! accessor for its counters.
//! The check that every key touches exactly `c_i` cells of each mass row catches a sketch that
//! is not 0/1-linear (a key hitting one cell twice would read as another key's bit).

use algo::Algorithm;
use key::FlowKey;

/// What the recovery needs of a linear counter sketch.
pub trait Linear: Algorithm + Clone {
    /// Rows and columns of the counter matrix (`rows x width` for Count-Min).
    fn shape(&self) -> (usize, usize);

    /// The counters, row major, into `out` (cleared first). Exact in f64 (u32 counters).
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
    /// constant, so we can discard the term"; RevSketch, Deltoid and TwoLevel do.
    fn low_rank(&self) -> bool {
        true
    }

    fn counters(&self) -> Vec<f64> {
        let mut v = Vec::new();
        self.counters_into(&mut v);
        v
    }
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
            .and_then(|&c| t.get(c as usize))
            .copied()
            .unwrap_or(0.0)
    }
}

/// Count-Min's point query: the minimum of the flow's counters.
fn min_of(t: &[f64], cells: &[u32]) -> f64 {
    cells
        .iter()
        .filter_map(|&c| t.get(c as usize))
        .fold(f64::INFINITY, |a, &b| a.min(b))
        .min(f64::MAX)
}

/// RevSketch (ALGORITHMS.md; SketchVisor 7.1: 4 x 4000): its reversible rows are Count-Min rows
/// indexed by the modular hash (RECOVERY.md 3: +1 at `(i, h_i(f))` in every row, `c_i = 1`).
/// The verification rows are left out of the view (they are not written back either: a
/// recovered sketch answers by point queries on these rows).
impl Linear for reversible::RevSketch {
    fn shape(&self) -> (usize, usize) {
        let c = self.config();
        (c.rows, c.width)
    }

    fn counters_into(&self, out: &mut Vec<f64>) {
        out.clear();
        out.extend(self.counters().iter().map(|&c| f64::from(c)));
    }

    fn row_mass(&self) -> Vec<Option<f64>> {
        vec![Some(1.0); self.config().rows]
    }

    /// Section 5.3 finds RevSketch low-rank (Figure 5: half of the singular values hold 90%),
    /// but our 4 rows of 4096 counters are Count-Min's shape: keeping the term measured worse
    /// (counter error 0.040 against LowerRecovery's 0.039, 0.035 without it;
    /// tests/recovery_sketches.rs), so it is dropped as for Count-Min.
    fn low_rank(&self) -> bool {
        false
    }

    /// The minimum over the reversible rows.
    fn point(&self, t: &[f64], cells: &[u32]) -> f64 {
        min_of(t, cells)
    }
}

/// FlowRadar's counting table, PacketCount field only (RECOVERY.md 3: +1 on each of the flow's
/// `k` cells, one row with `c = k`). FlowXOR and FlowCount are not linear in the weight and stay
/// out of the view: the untracked flows' keys cannot be recovered, so a recovered FlowRadar
/// cannot be decoded; it answers point queries (the minimum over the flow's cells, as
/// Count-Min's).
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

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ColumnError {
    #[error("flow {key}: touches {got} cells of row {row}, the sketch's row mass says {want}")]
    NotZeroOne {
        key: FlowKey,
        row: usize,
        got: usize,
        want: usize,
    },
}

/// Keys probed per scan: one bit each of a u32 counter.
const PROBE: usize = 32;

/// The cells of every key (its column of `A`, cell indices into the row-major counters,
/// ascending), found by probing an empty copy of `sketch` with weighted updates (module docs).
pub fn columns<S: Linear>(sketch: &S, keys: &[FlowKey]) -> Result<Vec<Vec<u32>>, ColumnError> {
    let mut scratch = sketch.clone();
    let (m, n) = sketch.shape();
    let mass = sketch.row_mass();
    let mut cols: Vec<Vec<u32>> = vec![Vec::new(); keys.len()];
    let mut buf = Vec::with_capacity(m * n);
    for (c, chunk) in keys.chunks(PROBE).enumerate() {
        scratch.reset();
        for (j, k) in chunk.iter().enumerate() {
            scratch.update(k, 1u64 << j);
        }
        scratch.counters_into(&mut buf);
        for (cell, &v) in buf.iter().enumerate() {
            if v == 0.0 {
                continue;
            }
            let mut bits = v as u64;
            while bits != 0 {
                let j = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if let Some(col) = cols.get_mut(c * PROBE + j) {
                    col.push(cell as u32);
                }
            }
        }
    }
    for (k, col) in keys.iter().zip(&cols) {
        for (row, c) in mass.iter().enumerate() {
            if let Some(c) = c {
                let want = *c as usize;
                let got = col.iter().filter(|&&x| x as usize / n == row).count();
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
