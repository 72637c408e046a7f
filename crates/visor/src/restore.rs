//! The state a task is answered from when a fast path measured part of the traffic
//! (SketchVisor section 5): `netsift run` with `--fast-path` (its own host) and `netsift merge`
//! (many hosts) both answer from [`recovered`].
//!
//! - `none`: the normal path's state alone (NoRecovery: the fast path's packets are missing);
//! - `lower` / `upper`: a copy of it with every tracked flow's lower / upper bound added through
//!   the algorithm's own update (any algorithm);
//! - `sketchvisor`: the compressive-sensing recovery for the sketches whose counters can be
//!   written back (Count-Min, MRAC): a copy with the tracked flows' recovered `x^` added first
//!   (so Count-Min's candidate set holds them), then every counter replaced by the recovered
//!   `T^ = N + A x^ + Y^`; for every other algorithm LowerRecovery, and the caller is told so
//!   (the method returned);
//! - `proportional`: the uniform-overflow prior of [`crate::recover`], written back the same way
//!   (the method returned is `sketchvisor` on an epoch whose test rejects the prior); for an
//!   algorithm without a written-back view it is refused ([`RecoverError::Refused`]; a run
//!   refuses it at start-up through [`Method::refusal`]), never replaced.

use algo::Algorithm;

use crate::fast::Summary;
use crate::linear::Linear;
use crate::recover::{inject, recover, Bound, Method, Options, RecoverError};

/// The catalog names of the algorithms whose recovered counters are written back (the ones
/// [`recovered`] solves for; the rest get LowerRecovery, or are refused by `proportional`).
pub(crate) const WRITES_BACK: [&str; 2] = [sketch::count_min::ENTRY.name, sketch::mrac::ENTRY.name];

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
            if let Some(cm) = algo::downcast::<sketch::CountMin>(normal) {
                solve(cm, summary, method)?
            } else if let Some(m) = algo::downcast::<sketch::Mrac>(normal) {
                solve(m, summary, method)?
            } else if let Some(reason) = method.refusal(normal.name()) {
                return Err(RecoverError::Refused {
                    method: method.name(),
                    algo: normal.name(),
                    reason,
                });
            } else {
                (inject(Bound::Lower), Method::Lower)
            }
        }
    })
}

/// A sketch whose counters the recovery can write back.
trait WriteBack: Linear + 'static {
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
    let written = out.write_back(&r.t);
    debug_assert!(written, "recovered matrix of another shape");
    Ok((Some(Box::new(out)), r.method))
}
