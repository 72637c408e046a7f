//! Space-Saving's k counters: the Stream-Summary (`stream_summary`) or, for small k, the flat
//! table scanned for its minimum (`scan_summary`), chosen by k alone ([`Structure::for_cap`],
//! from measurements). Both are Space-Saving (test `counts_match_a_scanned_model`); they differ
//! only in which key of the minimum count a new key replaces (`scan_summary`). Saving, loading,
//! equality and the merge are on the contents and written once, here.
//!
//! State is saved as its contents, `(key, count, ε)` per slot, and rebuilt on load (so a
//! snapshot cannot carry broken links), and two summaries are equal when their contents are:
//! which slot and bucket a key occupies is layout, not state.

use std::cmp::Reverse;

use key::{FlowKey, HashInput};
use serde::{Deserialize, Serialize};

use crate::scan_summary::ScanSummary;
use crate::stream_summary::StreamSummary;

/// Largest `k` a summary takes (`SpaceSavingConfig::validate`'s bound; a loaded state is
/// checked against it too).
pub(crate) const MAX_CAP: usize = 1 << 24;

/// Which structure holds the counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Structure {
    /// Buckets of equal counts in count order: O(1) unit increments and replacements, a walk
    /// over the counts in between for a weighted increment.
    StreamSummary,
    /// Counts in one array: O(1) increments of any weight, a scan of the k counts when the
    /// keys at the minimum are used up. Not the Stream-Summary's choice among tied minima.
    Scan,
}

impl Structure {
    /// Largest k held in the flat table: above it, the scans cost more than the walks they
    /// save (`cargo run --release -p table --example space_saving_cost`; issue 14).
    pub const SCAN_MAX_CAP: usize = 1024;

    /// The structure of a summary of `cap` counters.
    pub fn for_cap(cap: usize) -> Structure {
        if cap <= Self::SCAN_MAX_CAP {
            Structure::Scan
        } else {
            Structure::StreamSummary
        }
    }

    /// Bytes of a summary of `cap` counters in this structure (allocated at construction,
    /// never grown).
    pub fn bytes_for(self, cap: usize) -> u64 {
        match self {
            Structure::StreamSummary => StreamSummary::bytes_for(cap),
            Structure::Scan => ScanSummary::bytes_for(cap),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(into = "Saved", try_from = "Saved")]
pub(crate) enum Summary {
    Stream(StreamSummary),
    Scan(ScanSummary),
}

/// `$body` with `$s` bound to the summary's structure.
macro_rules! each {
    ($self:expr, $s:ident => $body:expr) => {
        match $self {
            Summary::Stream($s) => $body,
            Summary::Scan($s) => $body,
        }
    };
}

/// The saved form: the contents, slot by slot.
#[derive(Serialize, Deserialize)]
struct Saved {
    cap: usize,
    entries: Vec<(FlowKey, u64, u64)>,
}

impl From<Summary> for Saved {
    fn from(s: Summary) -> Saved {
        Saved {
            cap: s.cap(),
            entries: s.entries().collect(),
        }
    }
}

impl TryFrom<Saved> for Summary {
    type Error = String;
    fn try_from(s: Saved) -> Result<Summary, String> {
        if s.cap == 0 || s.cap > MAX_CAP {
            return Err(format!("capacity {} outside 1..={MAX_CAP}", s.cap));
        }
        if s.entries.len() > s.cap {
            return Err(format!(
                "{} entries for a capacity of {}",
                s.entries.len(),
                s.cap
            ));
        }
        let mut keys: Vec<FlowKey> = s.entries.iter().map(|e| e.0).collect();
        keys.sort_unstable();
        if keys.windows(2).any(|w| w[0] == w[1]) {
            return Err("a key is held twice".into());
        }
        if let Some(e) = s.entries.iter().find(|e| e.2 > e.1) {
            return Err(format!("{}: ε {} above its count {}", e.0, e.2, e.1));
        }
        // The structure is allocated at its capacity, which the bytes do not hold: checked
        // against the load's limit first (a capacity of 2^24 slots is about a GiB).
        let structure = Structure::for_cap(s.cap);
        algo::check_load_alloc("the summary", structure.bytes_for(s.cap))?;
        Ok(Summary::from_entries(structure, s.cap, s.entries))
    }
}

impl PartialEq for Summary {
    /// Same capacity and the same `(key, count, ε)` contents.
    fn eq(&self, o: &Summary) -> bool {
        let sorted = |s: &Summary| {
            let mut v: Vec<(FlowKey, u64, u64)> = s.entries().collect();
            v.sort_unstable();
            v
        };
        self.cap() == o.cap() && sorted(self) == sorted(o)
    }
}

impl Summary {
    /// An empty summary of `cap` counters in `structure`.
    pub fn new(structure: Structure, cap: usize) -> Summary {
        match structure {
            Structure::StreamSummary => Summary::Stream(StreamSummary::new(cap)),
            Structure::Scan => Summary::Scan(ScanSummary::new(cap)),
        }
    }

    pub fn structure(&self) -> Structure {
        match self {
            Summary::Stream(_) => Structure::StreamSummary,
            Summary::Scan(_) => Structure::Scan,
        }
    }

    fn from_entries(structure: Structure, cap: usize, e: Vec<(FlowKey, u64, u64)>) -> Summary {
        match structure {
            Structure::StreamSummary => Summary::Stream(StreamSummary::from_entries(cap, e)),
            Structure::Scan => Summary::Scan(ScanSummary::from_entries(cap, e)),
        }
    }

    pub fn cap(&self) -> usize {
        each!(self, s => s.cap())
    }

    pub fn memory_bytes(&self) -> usize {
        each!(self, s => s.memory_bytes())
    }

    /// The smallest count when full, else 0: the most an unmonitored key can weigh.
    pub fn floor(&self) -> u64 {
        each!(self, s => s.floor())
    }

    /// `(count, ε)` of a monitored key.
    pub fn get(&self, key: &FlowKey) -> Option<(u64, u64)> {
        each!(self, s => s.get(key))
    }

    /// `(key, count, ε)` of every monitored key, in slot order.
    pub fn entries(&self) -> impl Iterator<Item = (FlowKey, u64, u64)> + '_ {
        let (a, b) = match self {
            Summary::Stream(s) => (Some(s.entries()), None),
            Summary::Scan(s) => (None, Some(s.entries())),
        };
        a.into_iter().flatten().chain(b.into_iter().flatten())
    }

    pub fn clear(&mut self) {
        each!(self, s => s.clear())
    }

    /// The Space-Saving step (`w > 0`; ALGORITHMS.md 10, the structures' `offer`).
    #[inline]
    pub fn offer(&mut self, key: &impl HashInput, w: u64) {
        each!(self, s => s.offer(key, w))
    }

    /// The mergeable-summaries merge of `count_heap` (proof there; Agarwal et al., PODS'12):
    /// count and ε added key by key, a key missing from a full side taking that side's
    /// [`Summary::floor`] as both, the `cap` largest counts kept (ties to the smaller key).
    pub fn merge(&mut self, other: &Summary) {
        let (ma, mb) = (self.floor(), other.floor());
        let mut all: Vec<(FlowKey, u64, u64)> = Vec::new();
        for (k, c, e) in self.entries() {
            let (oc, oe) = other.get(&k).unwrap_or((mb, mb));
            all.push((k, c.saturating_add(oc), e.saturating_add(oe)));
        }
        for (k, c, e) in other.entries() {
            if self.get(&k).is_none() {
                all.push((k, c.saturating_add(ma), e.saturating_add(ma)));
            }
        }
        let cap = self.cap();
        if all.len() > cap {
            all.select_nth_unstable_by_key(cap, |e| (Reverse(e.1), e.0));
            all.truncate(cap);
        }
        *self = Summary::from_entries(self.structure(), cap, all);
    }

    /// The structure's own consistency checks (tests).
    #[cfg(test)]
    pub fn check(&self) {
        each!(self, s => s.check())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::{truth, zipf_keys};

    /// Each structure against a plain model of Space-Saving's counts (a vector scanned for its
    /// minimum; which of several tied keys is replaced changes keys, not the multiset of
    /// counts): the multiset of counts matches the model's and sums to N, and the structure
    /// stays consistent, under unit updates, then weighted ones (up to 40: one key at the
    /// minimum, as Agg-Evict's evictions leave it), then new keys of weight 1, u32 and
    /// `FlowKey` keys, from k = 1 up.
    #[test]
    fn counts_match_a_scanned_model() {
        let keys = testkit::zipf_u32(30_000, 5_000, 1.0, 41);
        for structure in [Structure::StreamSummary, Structure::Scan] {
            for cap in [1usize, 2, 3, 16, 128, 1000] {
                let mut s = Summary::new(structure, cap);
                let mut model: Vec<u64> = Vec::new();
                let mut n = 0u64;
                // Then new keys of weight 1, replacing each other at the bottom (the flat
                // table's `few` path).
                let churn = (0..3_000u32).map(|i| 1 << 31 | i);
                for (i, x) in keys.iter().copied().chain(churn).enumerate() {
                    let w = if i < keys.len() / 2 || i >= keys.len() {
                        1
                    } else {
                        1 + (x as u64 * 7 + i as u64) % 40
                    };
                    let k = FlowKey::from_u32(x);
                    match s.get(&k).map(|(c, _)| c) {
                        Some(c) => {
                            let j = model.iter().position(|&m| m == c).unwrap();
                            model[j] += w;
                        }
                        None if model.len() < cap => model.push(w),
                        None => {
                            let j = (0..model.len()).min_by_key(|&j| model[j]).unwrap();
                            model[j] += w;
                        }
                    }
                    if i % 2 == 0 {
                        s.offer(&x, w);
                    } else {
                        s.offer(&k, w);
                    }
                    n += w;
                    if i % 997 == 0 {
                        s.check();
                        let m = model.iter().min().copied().unwrap_or(0);
                        let full = model.len() == cap;
                        assert_eq!(s.floor(), if full { m } else { 0 }, "{structure:?} {cap}");
                    }
                }
                s.check();
                let mut got: Vec<u64> = s.entries().map(|e| e.1).collect();
                got.sort_unstable();
                model.sort_unstable();
                assert_eq!(got, model, "{structure:?} cap {cap}");
                assert_eq!(got.iter().sum::<u64>(), n);
            }
        }
    }

    /// Save and load give the same contents and a working structure (links rebuilt); broken
    /// saved states are refused with a reason.
    #[test]
    fn round_trip_and_bad_states() {
        let keys = zipf_keys(20_000, 3_000, 1.1, 42);
        let t = truth(&keys);
        for structure in [Structure::StreamSummary, Structure::Scan] {
            let mut s = Summary::new(structure, 64);
            keys.iter().for_each(|k| s.offer(k, 1));
            let bytes = serde_json::to_vec(&s).unwrap();
            let mut back: Summary = serde_json::from_slice(&bytes).unwrap();
            back.check();
            assert_eq!(back, s);
            assert_eq!(back.floor(), s.floor());
            for k in keys.iter().take(2_000) {
                s.offer(k, 3);
                back.offer(k, 3);
            }
            back.check();
            let mut a: Vec<u64> = s.entries().map(|e| e.1).collect();
            let mut b: Vec<u64> = back.entries().map(|e| e.1).collect();
            a.sort_unstable();
            b.sort_unstable();
            assert_eq!(a, b);
        }
        assert!(t.len() > 64);
        let k = |i: u32| FlowKey::from_u32(i);
        let bad = [
            Saved {
                cap: 0,
                entries: vec![],
            },
            Saved {
                cap: 1,
                entries: vec![(k(1), 5, 0), (k(2), 5, 0)],
            },
            Saved {
                cap: 4,
                entries: vec![(k(1), 5, 0), (k(1), 6, 0)],
            },
            Saved {
                cap: 4,
                entries: vec![(k(1), 5, 6)],
            },
        ];
        for b in bad {
            let bytes = serde_json::to_vec(&b).unwrap();
            assert!(serde_json::from_slice::<Summary>(&bytes).is_err());
        }
    }

    /// Memory is allocated at construction and equals `bytes_for`, in either structure; the
    /// flat table's is `docs/parameters.md`'s formula (the Stream-Summary's is checked there).
    #[test]
    fn memory_is_what_bytes_for_says() {
        for k in [1u64, 100, 128, 1024] {
            let index = 8 * (4 * k).next_power_of_two();
            let want = 64 * k + 8 * k.div_ceil(64) + 256 + index;
            assert_eq!(Structure::Scan.bytes_for(k as usize), want, "k {k}");
        }
        for cap in [1usize, 7, 128, 1024, 8192] {
            for structure in [Structure::StreamSummary, Structure::Scan] {
                let s = Summary::new(structure, cap);
                assert_eq!(
                    s.memory_bytes() as u64,
                    structure.bytes_for(cap),
                    "{structure:?} cap {cap}"
                );
            }
        }
    }
}
