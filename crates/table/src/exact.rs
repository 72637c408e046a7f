//! Task answers shared by every structure that holds (key, count) pairs it can enumerate.
//! Reports are sorted by count (largest first), then by key, so they are deterministic.
//!
//! The exact tables (`linear_hash`, `cuckoo1`, `cuckoo4`) and FlowRadar's decoded flow set
//! answer every task from their pairs: they implement [`FlowSet`] and get all seven queries from
//! [`flow_set_queries!`], written once here.

use algo::{Estimate, Task};
use key::FlowKey;

/// The tasks a flow set answers: all but the spreader tasks.
pub(crate) const TASKS: &[Task] = &[
    Task::FlowSize,
    Task::HeavyHitters,
    Task::HeavyChangers,
    Task::TopK,
    Task::Cardinality,
    Task::FlowSizeDistribution,
    Task::Entropy,
];

/// A structure whose state is a set of (key, count) pairs it can enumerate and look up.
pub(crate) trait FlowSet {
    /// Every stored (or decoded) pair.
    fn flows(&self) -> impl Iterator<Item = Estimate> + '_;
    /// The count of `key`, if it is in the set.
    fn count_of(&self, key: &FlowKey) -> Option<u64>;
    /// The number of distinct keys (FlowRadar counts the flows it inserted, decoded or not).
    fn flow_count(&self) -> f64;
}

/// The task queries of an `impl Algorithm for $t` where `$t: FlowSet`: heavy hitters, heavy
/// changers (against the previous epoch's `$t`; any size or seed, the counts are compared),
/// cardinality, flow-size distribution, entropy, top-k and per-flow size.
macro_rules! flow_set_queries {
    ($t:ty) => {
        fn heavy_hitters(&self, threshold: u64) -> Option<Vec<algo::Estimate>> {
            use $crate::exact::FlowSet;
            Some($crate::exact::heavy_hitters(self.flows(), threshold))
        }

        /// `prev` must be of the same type; otherwise `None`.
        fn heavy_changers(
            &self,
            prev: &dyn algo::Algorithm,
            threshold: u64,
        ) -> Option<Vec<algo::Estimate>> {
            use $crate::exact::FlowSet;
            let p = algo::downcast::<$t>(prev)?;
            Some($crate::exact::changers(
                self.flows(),
                |k| self.count_of(k),
                p.flows(),
                |k| p.count_of(k),
                threshold,
            ))
        }

        fn cardinality(&self) -> Option<f64> {
            Some($crate::exact::FlowSet::flow_count(self))
        }

        fn flow_size_distribution(&self) -> Option<Vec<f64>> {
            use $crate::exact::FlowSet;
            Some(algo::size_histogram(self.flows().map(|e| e.1)))
        }

        fn entropy(&self) -> Option<f64> {
            use $crate::exact::FlowSet;
            Some(algo::entropy_of(self.flows().map(|e| e.1)))
        }

        fn top_k(&self, k: usize) -> Option<Vec<algo::Estimate>> {
            use $crate::exact::FlowSet;
            Some($crate::exact::top_k(self.flows(), k))
        }

        /// 0 for a key not in the set.
        fn flow_size(&self, key: &key::FlowKey) -> Option<u64> {
            Some($crate::exact::FlowSet::count_of(self, key).unwrap_or(0))
        }
    };
}
pub(crate) use flow_set_queries;

fn sort_desc(v: &mut [Estimate]) {
    v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
}

/// Entries with `count >= threshold`.
pub(crate) fn heavy_hitters(
    entries: impl Iterator<Item = Estimate>,
    threshold: u64,
) -> Vec<Estimate> {
    let mut v: Vec<Estimate> = entries.filter(|e| e.1 >= threshold).collect();
    sort_desc(&mut v);
    v
}

/// The `k` largest entries, largest first.
pub(crate) fn top_k(entries: impl Iterator<Item = Estimate>, k: usize) -> Vec<Estimate> {
    let mut v: Vec<Estimate> = entries.collect();
    if k < v.len() {
        // Partition first so the sort touches only k entries (tables hold up to 2^20 flows).
        v.select_nth_unstable_by(k, |a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.truncate(k);
    }
    sort_desc(&mut v);
    v
}

/// Keys of either epoch whose count changed by at least `threshold` (a key missing from an
/// epoch counts 0 there); the estimate is the absolute change.
pub(crate) fn changers(
    cur: impl Iterator<Item = Estimate>,
    cur_get: impl Fn(&FlowKey) -> Option<u64>,
    prev: impl Iterator<Item = Estimate>,
    prev_get: impl Fn(&FlowKey) -> Option<u64>,
    threshold: u64,
) -> Vec<Estimate> {
    let mut v = Vec::new();
    for (k, c) in cur {
        let d = c.abs_diff(prev_get(&k).unwrap_or(0));
        if d >= threshold {
            v.push((k, d));
        }
    }
    for (k, c) in prev {
        if cur_get(&k).is_none() && c >= threshold {
            v.push((k, c));
        }
    }
    sort_desc(&mut v);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(v: u32) -> FlowKey {
        FlowKey::from_u32(v)
    }

    #[test]
    fn answers_are_sorted_and_complete() {
        let e = vec![(k(1), 5), (k(2), 9), (k(3), 5), (k(4), 1)];
        assert_eq!(
            heavy_hitters(e.clone().into_iter(), 5),
            vec![(k(2), 9), (k(1), 5), (k(3), 5)]
        );
        assert_eq!(top_k(e.clone().into_iter(), 2), vec![(k(2), 9), (k(1), 5)]);
        assert_eq!(top_k(e.clone().into_iter(), 10).len(), 4);
        let prev = [(k(1), 1u64), (k(5), 7)];
        let get_prev = |x: &FlowKey| prev.iter().find(|p| p.0 == *x).map(|p| p.1);
        let get_cur = |x: &FlowKey| e.iter().find(|p| p.0 == *x).map(|p| p.1);
        let c = changers(
            e.clone().into_iter(),
            get_cur,
            prev.into_iter(),
            get_prev,
            4,
        );
        assert_eq!(c, vec![(k(2), 9), (k(5), 7), (k(3), 5), (k(1), 4)]);
    }
}
