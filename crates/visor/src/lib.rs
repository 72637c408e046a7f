//! SketchVisor (Huang et al., SIGCOMM 2017; `../shared/papers/sketchvisor.txt`): what a host
//! does when its normal path cannot keep up, and what the control plane does with it.
//!
//! - [`fifo`]: a deterministic model of the normal path's bounded FIFO (section 3.1), drained
//!   at a capacity in packets per second against capture time, or against an arrival rate for
//!   key traces; it says, per packet, [`Path::Normal`] or [`Path::Fast`].
//! - [`fast`]: the fast path, Algorithm 1 (section 4.2, COMPUTETHRESH of appendix A in
//!   [`thresh`]), and the Misra-Gries baseline (MGFastPath); a host's [`Summary`] (tracked flows
//!   with Lemma 4.1's bounds, `V`, `E`) and the merge of several hosts' summaries.
//! - [`plane`]: one worker's data plane, the FIFO model and one fast path per key kind, with
//!   its serde configuration ([`VisorConfig`]), as the runner drives it.
//! - [`recover`](mod@recover): NoRecovery, LowerRecovery, UpperRecovery and the compressive-sensing
//!   recovery (section 5; the solver of `../shared/RECOVERY.md`) of a [`Linear`] sketch
//!   ([`linear`]: Count-Min, MRAC, RevSketch, FlowRadar's PacketCount, Deltoid, UnivMon's signed
//!   levels), and [`recovered`], the state every task is answered from (written back for those
//!   sketches, refused for the others).
//! - [`bitmap`]: the distinct-count sketches' restoring (FM, kMin, Linear Counting, HyperLogLog, TwoLevel): the
//!   flows the normal path missed, counted under the uniform-overflow prior and fed back as
//!   synthetic distinct keys.
//!
//! Invariants: every packet offered to the FIFO model takes exactly one path and is counted on
//! it; the fast path never loses weight from `V`; Lemma 4.1's bounds hold for every tracked flow
//! and every flow above `E` is tracked (tests in `tests/`); the FIFO's decisions are integer
//! arithmetic on the packets' timestamps, so the same trace splits the same way on any machine,
//! and COMPUTETHRESH uses `libm`'s pure-Rust functions, so the fast path's state does too.

#![forbid(unsafe_code)]

pub mod bitmap;
pub mod fast;
pub mod fifo;
mod index;
pub mod linear;
pub mod plane;
pub mod recover;
mod restore;
mod sv;
pub mod thresh;

pub use fast::{
    build, capacity, FastKind, FastPath, FastStats, FastTable, MgFastPath, Summary, Tracked,
    DEFAULT_BYTES,
};
pub use fifo::{Fifo, FifoError, Path, PathCounts};
pub use linear::{columns, Linear};
pub use plane::{DataPlane, EpochPart, PlaneError, VisorConfig};
pub use recover::{
    inject, proportional_fit, recover, rel_error, Bound, Fit, Method, Options, RecoverError,
    Recovered,
};
pub use restore::recovered;
