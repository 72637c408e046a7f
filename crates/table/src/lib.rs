//! Exact flow tables, top-k counters, FlowRadar and EWMA change detection.
//!
//! | name           | module            | structure                                              |
//! |----------------|-------------------|--------------------------------------------------------|
//! | `linear_hash`  | [`linear_hash`]   | exact linear-probing table, keys inline with counts    |
//! | `cuckoo1`      | [`cuckoo`]        | exact Cuckoo table, 2 hashes, 1 entry per bucket       |
//! | `cuckoo4`      | [`cuckoo`]        | exact Cuckoo table, 2 hashes, 4 entries per bucket     |
//! | `heap`         | [`heap`]          | Re-evaluating min-heap top-k (Space-Saving without ε), mergeable |
//! | `space_saving` | [`space_saving`]  | Space-Saving with ε (ALGORITHMS.md 10), mergeable      |
//! | `misra_gries`  | [`misra_gries`]   | Misra-Gries with O(log k) decrements, mergeable        |
//! | `flow_radar`   | [`flow_radar`]    | Bloom flow filter + invertible counting table (ALGORITHMS.md 3) |
//! | `ewma_change`  | [`ewma_change`]   | exact per-flow counts + EWMA prediction (ALGORITHMS.md 11) |
//!
//! Keys are stored packed (see `packed`): a length byte followed by the key bytes, in
//! `ceil((key_len + 1) / 8)` u64 words, so a 4-byte key and its count share 16 bytes and a table
//! slot never holds the 38-byte [`key::FlowKey`] padding. A key longer than the
//! [`algo::BuildCtx::key_len`] the structure was built for cannot be stored; it is counted in the
//! structure's [`Dropped`] counter, never lost silently.

#![forbid(unsafe_code)]

use algo::{ConfigError, Task};
use serde::{Deserialize, Serialize};

pub mod cuckoo;
pub mod ewma_change;
pub mod flow_radar;
pub mod heap;
pub mod linear_hash;
pub mod misra_gries;
pub mod space_saving;

mod count_heap;
mod exact;
mod filled;
mod packed;
mod scan_summary;
mod slot_index;
mod stream_summary;
mod summary;

pub use cuckoo::{Cuckoo, CuckooConfig};
pub use ewma_change::{EwmaChange, EwmaChangeConfig};
pub use flow_radar::{Decoded, FlowRadar, FlowRadarConfig};
pub use heap::{Heap, HeapConfig};
pub use linear_hash::{LinearHash, LinearHashConfig};
pub use misra_gries::{MisraGries, MisraGriesConfig};
pub use space_saving::{SpaceSaving, SpaceSavingConfig};

/// Updates a structure could not store: a new key arriving at a full table, a Cuckoo victim
/// with no free place after the kick limit, or a key longer than the configured key length.
/// The answers of the structure cover only what it stored; they are exact iff this is zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dropped {
    /// Number of `update` calls (aggregated updates) that were not stored.
    pub updates: u64,
    /// Sum of their weights (packets or bytes lost to the answers).
    pub weight: u64,
}

impl Dropped {
    #[inline]
    pub(crate) fn add(&mut self, w: u64) {
        self.updates = self.updates.saturating_add(1);
        self.weight = self.weight.saturating_add(w);
    }

    pub(crate) fn merge(&mut self, o: &Dropped) {
        self.updates = self.updates.saturating_add(o.updates);
        self.weight = self.weight.saturating_add(o.weight);
    }

    /// True when nothing was dropped (the answers are exact).
    pub fn is_zero(&self) -> bool {
        self.updates == 0
    }
}

/// Number of keys hashed ahead in `update_batch` before their slots are touched: enough to
/// cover a DRAM miss with independent loads, small enough to live on the stack.
pub(crate) const BATCH: usize = 16;

pub(crate) use key::prefetch_at as prefetch;

/// Cache or scratch data that is not part of a structure's state: skipped by serde, equal to
/// every other value of its type, reset by `Default`.
#[derive(Clone, Debug, Default)]
pub(crate) struct NotState<T>(pub T);

impl<T> PartialEq for NotState<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

pub(crate) fn invalid(
    algo: &'static str,
    field: &'static str,
    reason: impl Into<String>,
) -> ConfigError {
    ConfigError::Invalid {
        algo,
        field,
        reason: reason.into(),
    }
}

/// The caveat of a k-counter summary whose held counts are off by up to `bound` (Space-Saving and
/// the heap: over by at most their smallest held count; Misra-Gries: under by at most
/// (N - sum c)/(k+1)), for heavy hitters above `threshold` (top-k: the k-th largest held count):
/// the flows whose true side of the threshold the bound leaves open (`ambiguous`) are more than a
/// tenth of those reported. Names `k` and the size that makes the bound a tenth of the threshold
/// (the bound is at most N/k for both).
pub(crate) fn bound_caveat(
    task: Task,
    threshold: u64,
    ambiguous: usize,
    reported: usize,
    bound: u64,
    total: u64,
) -> Vec<algo::Caveat> {
    if threshold == 0 || ambiguous * 10 <= reported.max(1) {
        return Vec::new();
    }
    let k = total.saturating_mul(10).div_ceil(threshold);
    let what = match task {
        Task::TopK => "k-th largest count",
        _ => "threshold",
    };
    vec![algo::Caveat {
        parameter: "k",
        message: format!(
            "{ambiguous} flows are within the counts' error bound ({bound}) of the {what} \
             {threshold}, against {reported} reported: which side of it they are on is unknown"
        ),
        suggestion: format!("k = {k} (error bound N/k at most a tenth of the threshold)"),
    }]
}

/// [`bound_caveat`] for a summary of `(count, over)` pairs, each count over by at most its
/// `over`: heavy hitters above `threshold`, or top-k (`threshold` = k) above the k-th largest
/// count.
pub(crate) fn overcount_caveats(
    task: Task,
    threshold: Option<u64>,
    counts: &[(u64, u64)],
    total: u64,
) -> Vec<algo::Caveat> {
    let Some(t) = threshold else {
        return Vec::new();
    };
    let t = match task {
        Task::HeavyHitters => t,
        Task::TopK => {
            let mut c: Vec<u64> = counts.iter().map(|e| e.0).collect();
            c.sort_unstable_by(|a, b| b.cmp(a));
            match c.get((t as usize).saturating_sub(1)) {
                Some(&kth) => kth,
                None => return Vec::new(),
            }
        }
        _ => return Vec::new(),
    };
    let reported = counts.iter().filter(|e| e.0 >= t).count();
    let ambiguous = counts
        .iter()
        .filter(|e| e.0 >= t && e.0.saturating_sub(e.1) < t)
        .count();
    let over = counts.iter().map(|e| e.1).max().unwrap_or(0);
    // Overcounts are worst cases (most held flows are far above the threshold, or were held
    // from early on): below half the threshold they do not move answers measurably (F1 >= 0.99
    // on Zipf 0.6-1.4 at the default sizes, where they reach a third of it).
    if over.saturating_mul(2) < t {
        return Vec::new();
    }
    bound_caveat(task, t, ambiguous, reported, over, total)
}

/// The caveats of a k-counter summary that is full (issue 34), naming `k`: top-k asking more
/// than its k counters once it let flows go (`floor > 0`; `algo::top_k_cap_caveat`); heavy hitters at a threshold `t` that an
/// unheld flow may reach: `floor` is the most an unheld flow can weigh (Space-Saving and the
/// heap: the smallest held count, Metwally et al. Lemma 3.4; Misra-Gries: its slack, (N - sum
/// c)/(k+1)), and flows of size `t..=floor` may have been evicted. Both bounds are at most
/// N/k (N/(k+1)), so `k = N/t + 1` makes `floor < t`.
pub(crate) fn capped_caveats(
    task: Task,
    threshold: Option<u64>,
    k: usize,
    floor: u64,
    total: u64,
) -> Vec<algo::Caveat> {
    if let Some(c) = algo::top_k_cap_caveat(task, threshold, "k", k, floor > 0) {
        return vec![c];
    }
    match (task, threshold) {
        (Task::HeavyHitters, Some(t)) if t > 0 && floor >= t => vec![algo::Caveat {
            parameter: "k",
            message: format!(
                "all k = {k} counters are taken and a flow of size up to {floor} may have been \
                 evicted: heavy hitters at the threshold {t} may be missing"
            ),
            suggestion: format!("k = {} (at least N/threshold)", total / t + 1),
        }],
        _ => Vec::new(),
    }
}

/// The caveat of an exact table that filled up: the new flows it turned away (`dropped`) are
/// missing from every answer. Suggests twice the capacity.
pub(crate) fn full_table_caveat(
    dropped: Dropped,
    flows: usize,
    capacity: usize,
) -> Vec<algo::Caveat> {
    if dropped.weight == 0 {
        return Vec::new();
    }
    vec![algo::Caveat {
        parameter: "capacity",
        message: format!(
            "the table is full ({flows} flows in {capacity} slots): {} updates of new flows \
             ({} in weight) were not stored and are missing from the answer",
            dropped.updates, dropped.weight
        ),
        suggestion: format!("capacity = {} (at least)", capacity.saturating_mul(2)),
    }]
}

#[cfg(test)]
mod cap_tests {
    use algo::{Algorithm, Task};
    use key::FlowKey;

    use crate::heap::{Heap, HeapConfig};
    use crate::misra_gries::{MisraGries, MisraGriesConfig};
    use crate::space_saving::{SpaceSaving, SpaceSavingConfig};

    /// The k-counter summaries say when their k bites (issue 34: a top-k past k, or heavy
    /// hitters at a threshold an evicted flow may reach, were answered short in silence), naming
    /// `k` and a size: 3000 one-packet flows and 50 of ten packets in k = 256 counters, every
    /// ten-packet flow interleaved so that it is held. Nothing when the flows fit.
    #[test]
    fn full_summaries_say_so() {
        let mut stream: Vec<FlowKey> = Vec::new();
        for i in 0..3000u32 {
            stream.push(FlowKey::from_u32(0x0C00_0000 + i));
        }
        for r in 0..10 {
            for i in 0..50u32 {
                stream.insert(r * 300 + i as usize, FlowKey::from_u32(0x0D00_0000 + i));
            }
        }
        let n = stream.len() as u64;
        let build = |k: usize| -> Vec<Box<dyn Algorithm>> {
            vec![
                Box::new(SpaceSaving::new(SpaceSavingConfig { k }).unwrap()),
                Box::new(Heap::new(HeapConfig { k }).unwrap()),
                Box::new(MisraGries::new(MisraGriesConfig { k }).unwrap()),
            ]
        };
        let k_caveat = |a: &dyn Algorithm, task: Task, scale: u64| {
            a.caveats(task, Some(scale), n)
                .into_iter()
                .find(|c| c.parameter == "k")
        };
        for mut a in build(256) {
            let name = a.name();
            for key in &stream {
                a.update(key, 1);
            }
            assert!(a.top_k(1000).unwrap().len() <= 256, "{name}");
            let c = k_caveat(a.as_ref(), Task::TopK, 1000)
                .unwrap_or_else(|| panic!("{name}: top-1000 from k = 256, no caveat"));
            assert!(c.suggestion.starts_with("k = 1000"), "{name}: {c:?}");
            // A top-100 fits k (its overcount caveat may speak, not the cap's).
            let c = a.caveats(Task::TopK, Some(100), n);
            assert!(
                c.iter().all(|c| !c.message.contains("top_k asks")),
                "{name}"
            );
            // Heavy hitters at 1: one caveat naming k, with a size that holds every flow
            // (N/threshold + 1 from the cap's, ten times N from the overcount's).
            let c = k_caveat(a.as_ref(), Task::HeavyHitters, 1)
                .unwrap_or_else(|| panic!("{name}: heavy hitters at 1 from a full summary"));
            let k: u64 = c.suggestion["k = ".len()..]
                .split(' ')
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name}: {c:?}"));
            assert!(k > n, "{name}: {c:?}");
        }
        for mut a in build(4096) {
            for key in &stream {
                a.update(key, 1);
            }
            assert!(
                k_caveat(a.as_ref(), Task::TopK, 5000).is_none(),
                "{}",
                a.name()
            );
            assert!(
                k_caveat(a.as_ref(), Task::HeavyHitters, 1).is_none(),
                "{}",
                a.name()
            );
            assert_eq!(a.heavy_hitters(1).unwrap().len(), 3050, "{}", a.name());
        }
    }
}
