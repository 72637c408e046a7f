//! A run with SketchVisor's fast path (issue 15; SketchVisor sections 3-5): the reader's data
//! plane (`visor::DataPlane`: the normal path's FIFO model and one fast path per key kind) sends
//! the packets the normal path cannot take to the fast path, and every task is answered from the
//! sketch recovered from both paths, with the control plane's code (`visor::recover`,
//! `visor::inject`), so the answers count every packet.
//!
//! Which recovery answers an instance ([`recovered`]):
//! - `none`: the normal path's state alone (NoRecovery: the fast path's packets are missing);
//! - `lower` / `upper`: a copy of it with every tracked flow's lower / upper bound added through
//!   the algorithm's own update (any algorithm);
//! - `sketchvisor` (the default): the compressive-sensing recovery for the sketches it models as
//!   linear (Count-Min, MRAC: `visor::Linear`), written back into a copy (counters replaced by the
//!   recovered `T^`, the tracked flows added first so that Count-Min's candidate set holds them);
//!   for every other algorithm LowerRecovery, which the report names per task (`recovery`).

use algo::Algorithm;
use visor::{Bound, Method, Options, Summary};

/// The state an instance answers from, and the method that made it: `None` when the normal
/// state answers as it is (NoRecovery, or nothing took the fast path this epoch).
pub(crate) fn recovered(
    normal: &dyn Algorithm,
    summary: &Summary,
    method: Method,
) -> Result<(Option<Box<dyn Algorithm>>, Method), visor::RecoverError> {
    if method == Method::None || (summary.flows.is_empty() && summary.v == 0) {
        return Ok((None, Method::None));
    }
    let inject = |bound| {
        let mut copy = normal.clone_box();
        visor::inject(copy.as_mut(), summary, bound);
        Some(copy)
    };
    Ok(match method {
        Method::None => (None, Method::None),
        Method::Lower => (inject(Bound::Lower), Method::Lower),
        Method::Upper => (inject(Bound::Upper), Method::Upper),
        Method::Sketchvisor => {
            if let Some(cm) = algo::downcast::<sketch::CountMin>(normal) {
                (Some(solve(cm, summary)?), Method::Sketchvisor)
            } else if let Some(m) = algo::downcast::<sketch::Mrac>(normal) {
                (Some(solve(m, summary)?), Method::Sketchvisor)
            } else {
                (inject(Bound::Lower), Method::Lower)
            }
        }
    })
}

/// A sketch whose counters the recovery can write back.
trait WriteBack: visor::Linear + 'static {
    fn write_back(&mut self, t: &[f64]) -> bool;
}

impl WriteBack for sketch::CountMin {
    fn write_back(&mut self, t: &[f64]) -> bool {
        self.set_counters(t)
    }
}

impl WriteBack for sketch::Mrac {
    fn write_back(&mut self, t: &[f64]) -> bool {
        self.set_counters(t)
    }
}

/// SketchVisor's recovery of `normal` with the fast path's `summary`, as a state of the same
/// algorithm: each tracked flow's recovered `x^` (rounded) added through the update, then every
/// counter set to the recovered `T^ = N + A x^ + Y^`.
fn solve<S: WriteBack>(
    normal: &S,
    summary: &Summary,
) -> Result<Box<dyn Algorithm>, visor::RecoverError> {
    let r = visor::recover(normal, summary, Method::Sketchvisor, &Options::default())?;
    let mut out = normal.clone();
    for (t, &x) in summary.flows.iter().zip(&r.x) {
        let w = x.round().max(0.0) as u64;
        if w > 0 {
            out.update(&t.key, w);
        }
    }
    // The shapes agree by construction (the recovery's matrix is this sketch's).
    let written = out.write_back(&r.t);
    debug_assert!(written, "recovered matrix of another shape");
    Ok(Box::new(out))
}
