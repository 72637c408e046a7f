//! The slots of a flat table (`stride` u64 words per slot, word 0 the count, 0 = empty) that
//! were filled this epoch, shared by linear_hash and cuckoo: a slot never empties within an
//! epoch (linear probing never moves entries; Cuckoo kicks swap filled slots), so this list
//! lets a reset and a scan of a sparse table cost its flows, not its capacity. Scans keep slot
//! order, so answers do not depend on which path ran.
//!
//! Derived data, not state: it is skipped by serde and ignored by equality; when it does not
//! account for every stored flow (a deserialized table), both operations take full passes.

use algo::Estimate;

use crate::{packed, NotState};

#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Filled(NotState<Vec<u32>>);

impl Filled {
    /// Room for `slots` filled slots (the most a table of that capacity can fill), allocated now
    /// so that [`Filled::bytes`] is what it holds.
    pub(crate) fn with_capacity(slots: usize) -> Filled {
        Filled(NotState(Vec::with_capacity(slots)))
    }

    /// Bytes of a list with room for `slots`.
    pub(crate) fn bytes(slots: usize) -> usize {
        slots * 4
    }

    /// Slot `i` went from empty to filled (tables hold at most 2^32 slots, validated).
    #[inline]
    pub(crate) fn push(&mut self, i: usize) {
        self.0 .0.push(i as u32);
    }

    /// Whether the list holds all `len` stored flows and walking it beats a pass over the
    /// `capacity` slots.
    fn sparse(&self, len: usize, capacity: usize) -> bool {
        self.0 .0.len() == len && len < capacity / 16
    }

    /// The (key, count) pairs in slot order.
    pub(crate) fn entries<'a>(
        &self,
        slots: &'a [u64],
        stride: usize,
        len: usize,
    ) -> Box<dyn Iterator<Item = Estimate> + 'a> {
        let pair = |s: &[u64]| {
            if s[0] == 0 {
                None
            } else {
                packed::unpack(&s[1..]).map(|k| (k, s[0]))
            }
        };
        if self.sparse(len, slots.len() / stride) {
            let mut idx = self.0 .0.clone();
            idx.sort_unstable();
            Box::new(
                idx.into_iter()
                    .filter_map(move |i| pair(&slots[i as usize * stride..][..stride])),
            )
        } else {
            Box::new(slots.chunks_exact(stride).filter_map(pair))
        }
    }

    /// Empty every slot (the filled ones only, when the list has them all) and the list.
    pub(crate) fn clear(&mut self, slots: &mut [u64], stride: usize, len: usize) {
        if self.sparse(len, slots.len() / stride) {
            for &i in &self.0 .0 {
                slots[i as usize * stride..][..stride].fill(0);
            }
        } else {
            slots.fill(0);
        }
        self.0 .0.clear();
    }

    /// Forget the list (what a deserialized table looks like), for tests of the fallback.
    #[cfg(test)]
    pub(crate) fn lose(&mut self) {
        self.0 .0.clear();
    }
}
