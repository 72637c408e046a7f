//! The state a task is answered from when a fast path measured part of the traffic
//! (SketchVisor section 5): `netsift run` with `--fast-path` (its own host), `netsift merge`
//! (many hosts) and the controller all answer from [`recovered`].
//!
//! - `none`: the normal path's state alone (NoRecovery: the fast path's packets are missing);
//! - `lower` / `upper`: a copy of it with every tracked flow's lower / upper bound added through
//!   the algorithm's own update (any algorithm);
//! - `sketchvisor`: the compressive-sensing recovery of [`crate::recover`], for the counter
//!   sketches whose recovered counters are written back ([`WRITES_BACK`]: Count-Min, MRAC,
//!   RevSketch, FlowRadar, UnivMon, Deltoid): a copy with the tracked flows' recovered `x^`
//!   added first through the sketch's own update (so candidate sets, heaps and FlowRadar's flow
//!   set hold them), then every counter replaced by the recovered `T^ = N + A x^ + Y^`;
//! - `proportional`: the uniform-overflow prior of [`crate::recover`], written back the same way
//!   (the method returned is `sketchvisor` on an epoch whose test rejects the prior).
//!
//! For any other algorithm both are refused ([`RecoverError::Refused`], with the reason of
//! [`Method::refusal`], which a run or merge checks at start-up), never replaced by another
//! method. What each written-back sketch answers from:
//!
//! - Count-Min, RevSketch, Deltoid: point queries and their candidates (Count-Min's candidate
//!   set, RevSketch's reversal, Deltoid's bit tests) on the recovered counters, RevSketch's
//!   verification rows and Deltoid's bit counters included;
//! - UnivMon: the recovered Count Sketch of every level and its total `N + V`; the heaps, which
//!   are not linear, rebuilt from the recovered counters over the keys they held plus the
//!   tracked flows (`UnivMon::set_counters`), so heavy hitters, entropy and cardinality come from
//!   them;
//! - FlowRadar: the recovered PacketCount field; FlowXOR and FlowCount stay the normal path's
//!   plus the tracked flows', so the decode lists those flows with their recovered counts. A
//!   flow that only the fast path saw and did not track cannot be decoded: its volume is in the
//!   counts (and so in the other flows' shares of a cell), its key nowhere;
//! - MRAC: the recovered counters (its size distribution).
//!
//! Bitmap and distinct-count sketches (FM, kMin, Linear Counting, HyperLogLog, TwoLevel's
//! bitmaps) are restored by [`crate::bitmap`] (the paper's non-zero counters, section 4.2),
//! called before the refusal in [`recovered`].

use algo::Algorithm;
use key::FlowKey;

use crate::fast::Summary;
use crate::linear::Linear;
use crate::recover::{inject, recover, Bound, Method, Options, RecoverError, Recovered};

/// The catalog names of the algorithms whose recovered state [`recovered`] builds for
/// `sketchvisor` and `proportional` (every other algorithm is refused by both,
/// [`Method::refusal`]). One list: a sketch restored elsewhere joins it by its name.
pub(crate) const WRITES_BACK: [&str; 6] = [
    sketch::count_min::ENTRY.name,
    sketch::mrac::ENTRY.name,
    reversible::rev_sketch::ENTRY.name,
    table::flow_radar::ENTRY.name,
    sketch::univmon::ENTRY.name,
    reversible::deltoid::ENTRY.name,
];

/// The state an instance answers from, and the method that made it: `None` when the normal
/// state answers as it is (NoRecovery, or nothing took the fast path this epoch).
pub fn recovered(
    normal: &dyn Algorithm,
    summary: &Summary,
    method: Method,
) -> Result<(Option<Box<dyn Algorithm>>, Method), RecoverError> {
    if method == Method::None || (summary.flows.is_empty() && summary.v == 0) {
        return Ok((None, Method::None));
    }
    let inject = |bound| {
        let mut copy = normal.clone_box();
        inject(copy.as_mut(), summary, bound);
        Some(copy)
    };
    Ok(match method {
        Method::None => (None, Method::None),
        Method::Lower => (inject(Bound::Lower), Method::Lower),
        Method::Upper => (inject(Bound::Upper), Method::Upper),
        Method::Sketchvisor | Method::Proportional => {
            if let Some(s) = algo::downcast::<sketch::CountMin>(normal) {
                solve(s, summary, method)?
            } else if let Some(s) = algo::downcast::<sketch::Mrac>(normal) {
                solve(s, summary, method)?
            } else if let Some(s) = algo::downcast::<reversible::RevSketch>(normal) {
                solve(s, summary, method)?
            } else if let Some(s) = algo::downcast::<table::FlowRadar>(normal) {
                solve(s, summary, method)?
            } else if let Some(s) = algo::downcast::<sketch::UnivMon>(normal) {
                solve(s, summary, method)?
            } else if let Some(s) = algo::downcast::<reversible::Deltoid>(normal) {
                solve(s, summary, method)?
            } else if let Some(r) = crate::bitmap::restore(normal, summary, method) {
                // FM, kMin, Linear Counting, HyperLogLog, TwoLevel: non-zero counters restored.
                r?
            } else {
                return Err(RecoverError::Refused {
                    method: method.name(),
                    algo: normal.name(),
                    reason: refusal_reason(method, normal.name()),
                });
            }
        }
    })
}

/// Whether `sketchvisor` / `proportional` recover `algo`: its counters written back here, or its
/// bits restored by [`crate::bitmap`].
pub(crate) fn recovers(algo: &str) -> bool {
    WRITES_BACK.contains(&algo) || crate::bitmap::RESTORES.contains(&algo)
}

/// Why `sketchvisor` / `proportional` cannot recover `algo`, an algorithm outside
/// [`WRITES_BACK`] and [`crate::bitmap::RESTORES`].
pub(crate) fn refusal_reason(method: Method, algo: &str) -> String {
    format!(
        "recovery {} needs a sketch whose recovered counters are written back ({}) or whose \
         bits are restored ({}), and {algo} is none of them; `lower` or `upper` recover any \
         algorithm",
        method.name(),
        WRITES_BACK.join(", "),
        crate::bitmap::RESTORES.join(", ")
    )
}

/// A sketch whose counters the recovery can write back: set every counter of `out` (the normal
/// state with the tracked flows' `x^` added) to the recovered `T^`, in [`Linear`]'s layout.
trait WriteBack: Linear + 'static {
    fn write_back(&mut self, r: &Recovered, summary: &Summary, normal: &Self) -> bool;
}

impl WriteBack for sketch::CountMin {
    fn write_back(&mut self, r: &Recovered, _: &Summary, _: &Self) -> bool {
        self.set_counters(&r.t)
    }
}

impl WriteBack for sketch::Mrac {
    fn write_back(&mut self, r: &Recovered, _: &Summary, _: &Self) -> bool {
        self.set_counters(&r.t)
    }
}

/// Reversible rows then verification rows, as the view lists them.
impl WriteBack for reversible::RevSketch {
    fn write_back(&mut self, r: &Recovered, _: &Summary, _: &Self) -> bool {
        self.set_counters(&r.t)
    }
}

/// FlowRadar answers from its decode, which peels cells by subtracting a pure cell's count from
/// the flow's other cells: counts that are not a sum of whole flows' columns (the recovered `Y`
/// is spread over cells) leave negative, wrapped residues that decode as giant flows (measured:
/// heavy-hitter F1 0.01 with `set_packet_counts(T^)`, tests/recovery_all.rs). So `Y` is given to
/// the flows the decode can name: each cell's `Y` split among the decoded flows in it in
/// proportion to their decoded counts, a flow's share the mean over its `k` cells (the row mass
/// is `k`, so the shares sum to `V - sum x^`), added through the update. Under the
/// proportional prior (`Y = r N`) this gives each decoded flow exactly `r` times its count.
/// The `Y` of cells no decoded flow reaches is lost (the flows there are undecodable anyway).
impl WriteBack for table::FlowRadar {
    fn write_back(&mut self, r: &Recovered, _: &Summary, _: &Self) -> bool {
        if r.t.len() != self.cells() {
            return false;
        }
        let cur = self.counters();
        let flows: Vec<(FlowKey, u64)> = self
            .decode()
            .flows()
            .iter()
            .map(|(k, &v)| (*k, v))
            .collect();
        let keys: Vec<FlowKey> = flows.iter().map(|f| f.0).collect();
        let Ok(cols) = crate::linear::columns(self, &keys) else {
            return false;
        };
        let mut by_cell = vec![0.0; cur.len()];
        for ((_, n), col) in flows.iter().zip(&cols) {
            for &c in col {
                by_cell[c as usize] += *n as f64;
            }
        }
        let k = self.cell_hashes() as f64;
        // Whole packets per flow, the rounding error carried to the next flow (in the decode's
        // order): the shares sum to what the cells held, and flows of one size do not all round
        // the same way (which would empty every other bin of the size distribution).
        let mut carry = 0.0;
        for ((key, n), col) in flows.iter().zip(&cols) {
            let y: f64 = col
                .iter()
                .map(|&c| {
                    let c = c as usize;
                    (r.t[c] - cur[c]).max(0.0) * *n as f64 / by_cell[c]
                })
                .sum::<f64>()
                / k
                + carry;
            let w = y.round().max(0.0);
            carry = y - w;
            let w = w as u64;
            if w > 0 {
                self.update(key, w);
            }
        }
        true
    }
}

/// The view is transposed (one row per hash row and counter of a group): back to the sketch's
/// group-major order.
impl WriteBack for reversible::Deltoid {
    fn write_back(&mut self, r: &Recovered, _: &Summary, _: &Self) -> bool {
        let (g, s) = (self.config().groups, self.stride());
        if r.t.len() != self.config().rows * g * s {
            return false;
        }
        let mut store = vec![0.0; r.t.len()];
        for (q, v) in store.iter_mut().enumerate() {
            let (b, rg) = (q % s, q / s);
            let (row, grp) = (rg / g, rg % g);
            *v = r.t[(row * s + b) * g + grp];
        }
        self.set_counters(&store)
    }
}

/// The levels' counters, the total the normal path saw plus the fast path's `V` (every packet
/// once), and the heaps rebuilt over their keys and the tracked flows.
impl WriteBack for sketch::UnivMon {
    fn write_back(&mut self, r: &Recovered, summary: &Summary, normal: &Self) -> bool {
        let keys: Vec<FlowKey> = summary.flows.iter().map(|t| t.key).collect();
        let total = normal.total().saturating_add(summary.v);
        self.set_counters(&r.t, total, &keys)
    }
}

/// The recovery `method` of `normal` with the fast path's `summary`, as a state of the same
/// algorithm: each tracked flow's recovered `x^` (rounded) added through the update, then every
/// counter set to the recovered `T^ = N + A x^ + Y^`; and the method that made it.
fn solve<S: WriteBack>(
    normal: &S,
    summary: &Summary,
    method: Method,
) -> Result<(Option<Box<dyn Algorithm>>, Method), RecoverError> {
    let r = recover(normal, summary, method, &Options::default())?;
    let mut out = normal.clone();
    for (t, &x) in summary.flows.iter().zip(&r.x) {
        let w = x.round().max(0.0) as u64;
        if w > 0 {
            out.update(&t.key, w);
        }
    }
    // The shapes agree by construction (the recovery's matrix is this sketch's).
    let written = out.write_back(&r, summary, normal);
    debug_assert!(written, "recovered matrix of another shape");
    Ok((Some(Box::new(out)), r.method))
}
