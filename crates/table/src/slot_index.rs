//! The key -> slot index of Space-Saving's two counter structures (`stream_summary`,
//! `scan_summary`): open addressing over slot ids, linear probing from the top bits of the key's
//! hash, at most a quarter full (`4 * cap` rounded up to a power of two: at half full, the probes
//! and a replacement's removal shifts ran about twice as long, and their unpredictable loop exits
//! were a third of Space-Saving's time at k = 128; issue 14), deletion by backward shift (no
//! tombstones, so no rehash ever): one xxh3 of the key per update. An entry is
//! [`entry`]`(hash, slot)` ([`EMPTY`] = empty): with the hash's top half beside the slot id, a
//! probe and a removal's shifts read only the index, never a slot, until a hash matches (issue
//! 14: the shifts' slot loads were a third of a miss's cost).

use key::{HashFn, HashInput};

/// No slot.
pub(crate) const NIL: u32 = u32::MAX;

/// An empty index entry (its slot part is `NIL`; a used entry's is below `MAX_CAP`).
const EMPTY: u64 = u64::MAX;

/// The index entry of slot `id` whose key hashes to `h`: the hash's top 32 bits (which hold
/// its home, the index being at most 2^26 long) above the slot id.
#[inline(always)]
fn entry(h: u64, id: u32) -> u64 {
    (h & !0xffff_ffff) | u64::from(id)
}

/// The slot id of an index entry (`NIL` for [`EMPTY`]).
#[inline(always)]
fn slot_of(e: u64) -> u32 {
    e as u32
}

/// The index's hash of a key (any fixed seed: the index is layout, not state).
#[inline(always)]
pub(crate) fn index_hash(key: &impl HashInput) -> u64 {
    key.hash_by(&HashFn::new(0x7374_7265_616d_5f73)) // "stream_s"
}

#[derive(Clone, Debug)]
pub(crate) struct SlotIndex {
    index: Vec<u64>,
}

impl SlotIndex {
    /// An empty index for up to `cap` slots.
    pub fn new(cap: usize) -> SlotIndex {
        SlotIndex {
            index: vec![EMPTY; Self::len_for(cap)],
        }
    }

    fn len_for(cap: usize) -> usize {
        (4 * cap.max(1)).next_power_of_two()
    }

    /// Bytes of the index for `cap` slots (allocated at construction, never grown).
    pub fn bytes_for(cap: usize) -> u64 {
        Self::len_for(cap) as u64 * 8
    }

    pub fn memory_bytes(&self) -> usize {
        self.index.len() * 8
    }

    pub fn clear(&mut self) {
        self.index.iter_mut().for_each(|x| *x = EMPTY);
    }

    /// Slots indexed (tests).
    #[cfg(test)]
    pub fn used(&self) -> usize {
        self.index.iter().filter(|&&x| x != EMPTY).count()
    }

    /// The home position of hash `h`, or of an index entry (which keeps the same top bits).
    #[inline(always)]
    fn home(&self, h: u64) -> usize {
        // The top bits (the length is a power of two >= 2).
        (h >> (64 - self.index.len().trailing_zeros())) as usize
    }

    /// `(slot, position)` of the key hashing to `h`, `is(slot)` telling whether a slot whose
    /// entry has the hash's top half holds it; else `(None, the empty position ending its
    /// probe)`. The index is at most a quarter full, so an empty position exists.
    #[inline(always)]
    pub fn find(&self, h: u64, is: impl Fn(u32) -> bool) -> (Option<u32>, usize) {
        let mask = self.index.len() - 1;
        let mut i = self.home(h);
        let tag = h >> 32;
        loop {
            let e = self.index[i];
            let id = slot_of(e);
            if id == NIL {
                return (None, i);
            }
            if e >> 32 == tag && is(id) {
                return (Some(id), i);
            }
            i = (i + 1) & mask;
        }
    }

    /// Index slot `id` (hash `h`) at `pos`, the empty position [`SlotIndex::find`] returned.
    #[inline(always)]
    pub fn set(&mut self, pos: usize, h: u64, id: u32) {
        self.index[pos] = entry(h, id);
    }

    /// Slot `id` changes key, from one hashing to `old` to one hashing to `new` (not indexed;
    /// `pos` is the empty position [`SlotIndex::find`] returned for it): a replacement's
    /// index update. The new entry goes in first, at `pos`, and the old one's removal then
    /// shifts it back if it opened a place earlier on the new key's probe run, which saves
    /// probing again after the removal (issue 14).
    #[inline]
    pub fn rekey(&mut self, id: u32, old: u64, new: u64, pos: usize) {
        self.set(pos, new, id);
        self.remove(id, old);
    }

    /// Take slot `id` (hash `h`, in the index) out of the index: backward shift, moving each
    /// later entry of the probe run into the hole when its home is not after the hole. The
    /// entry is found by its whole value, so a second entry of the same slot under another hash
    /// ([`SlotIndex::rekey`]) stays; two equal entries have the same home and either may go.
    pub fn remove(&mut self, id: u32, h: u64) {
        let mask = self.index.len() - 1;
        let mut hole = self.home(h);
        let e = entry(h, id);
        while self.index[hole] != e {
            hole = (hole + 1) & mask;
        }
        let mut j = (hole + 1) & mask;
        loop {
            let other = self.index[j];
            if other == EMPTY {
                break;
            }
            let home = self.home(other);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.index[hole] = other;
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.index[hole] = EMPTY;
    }
}
