//! Which 64-byte blocks of a structure's arrays an epoch wrote, so that reset and the epoch-end
//! scans cost what the epoch touched instead of the whole structure (issue 10: a 1 ms epoch of
//! 20 packets must not pay a memset and a scan of several MiB).
//!
//! One bit per block of [`BLOCK_BYTES`] bytes: marking is one unconditional OR into a bitmap
//! that is 1/512 of the array's size and stays in cache, with no branch on the hot path; walking
//! the bitmap costs one word read per 4 KiB of array. Either every written element is marked
//! (then [`Dirty::clear_in`] zeroes the marked blocks), or, for arrays of fixed-size items (a
//! FlowRadar cell, a Deltoid group, a TwoLevel bucket), the first element of every written item
//! (then [`Dirty::items`] yields every written item and [`Dirty::clear_items_in`] zeroes them
//! whole): one mark per item instead of one per block it spans. Either way every item outside
//! what the marks cover still holds its value from the last clear (zero). For arrays whose writes only ever make elements non-zero
//! (saturating counters, OR-ed bits, a flow set's counts) the marks are a function of the
//! contents, so two structures fed the same updates in any order, or merged, have equal marks.

use std::ops::Range;

use serde::{Deserialize, Serialize};

/// Bytes per tracked block: one cache line.
pub const BLOCK_BYTES: usize = 64;

/// Dirty-block bitmap over an array of `len` elements of `elem_bytes` bytes each.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dirty {
    /// log2 of elements per block.
    shift: u32,
    len: usize,
    bits: Vec<u64>,
}

impl Dirty {
    /// A clean map for `len` elements of `elem_bytes` bytes (a power of two at most 64).
    pub fn new(len: usize, elem_bytes: usize) -> Dirty {
        assert!(
            elem_bytes.is_power_of_two() && elem_bytes <= BLOCK_BYTES,
            "element size {elem_bytes} must be a power of two <= {BLOCK_BYTES}"
        );
        let shift = (BLOCK_BYTES / elem_bytes).trailing_zeros();
        let blocks = len.div_ceil(1 << shift);
        Dirty {
            shift,
            len,
            bits: vec![0; blocks.div_ceil(64)],
        }
    }

    /// `Ok` when this map is what [`Dirty::new`]`(len, elem_bytes)` makes, marks aside: a loaded
    /// state's map (`algo::CheckState`), whose shift, length and bitmap a forger could make
    /// disagree (a shift past 63 overflows, a short bitmap loses marks, a mark past the array
    /// yields items beyond it).
    pub fn check(&self, len: usize, elem_bytes: usize) -> Result<(), String> {
        let want = Dirty::new(0, elem_bytes);
        let blocks = len.div_ceil(1 << want.shift);
        if self.shift != want.shift || self.len != len || self.bits.len() != blocks.div_ceil(64) {
            return Err(format!(
                "dirty map of {} elements (shift {}, {} words), the array has {len} (shift {}, {} \
                 words)",
                self.len,
                self.shift,
                self.bits.len(),
                want.shift,
                blocks.div_ceil(64)
            ));
        }
        if !blocks.is_multiple_of(64) {
            if let Some(&last) = self.bits.last() {
                if last >> (blocks % 64) != 0 {
                    return Err("dirty map marks blocks past its array".into());
                }
            }
        }
        Ok(())
    }

    /// Bytes of the bitmap itself, for `memory_bytes`.
    pub fn memory_bytes(&self) -> usize {
        self.bits.len() * 8
    }

    /// Bitmap bytes for `len` elements of `elem_bytes` bytes (as [`Dirty::new`] allocates).
    pub fn bytes_for(len: usize, elem_bytes: usize) -> u64 {
        let per_block = (BLOCK_BYTES / elem_bytes.clamp(1, BLOCK_BYTES)) as u64;
        (len as u64).div_ceil(per_block).div_ceil(64) * 8
    }

    /// Note a write of element `i`.
    #[inline]
    pub fn mark(&mut self, i: usize) {
        let b = i >> self.shift;
        if let Some(w) = self.bits.get_mut(b >> 6) {
            *w |= 1 << (b & 63);
        }
    }

    /// Mark everything (after a bulk change such as a merge from a peer with unknown marks).
    pub fn mark_all(&mut self) {
        self.bits.fill(u64::MAX);
    }

    /// OR in another map of the same shape (after merging the arrays it tracks).
    pub fn merge(&mut self, other: &Dirty) {
        if self.shift != other.shift || self.len != other.len {
            self.mark_all();
            return;
        }
        for (a, b) in self.bits.iter_mut().zip(&other.bits) {
            *a |= b;
        }
    }

    /// True when no block is marked.
    pub fn is_clean(&self) -> bool {
        self.bits.iter().all(|&w| w == 0)
    }

    /// Element ranges of maximal runs of marked blocks, ascending, clipped to the array.
    pub fn ranges(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        let mut cursor = 0;
        std::iter::from_fn(move || {
            let start = self.next_block(cursor, true)?;
            let end = self
                .next_block(start, false)
                .unwrap_or(self.bits.len() * 64);
            cursor = end;
            Some(start << self.shift..(end << self.shift).min(self.len))
        })
        .filter(|r| r.start < r.end)
    }

    /// The first block at or after `from` whose mark is `set`.
    fn next_block(&self, from: usize, set: bool) -> Option<usize> {
        let mut wi = from / 64;
        let flip = if set { 0 } else { u64::MAX };
        // Bits below `from` in its word are masked off.
        let mut w = (*self.bits.get(wi)? ^ flip) & (u64::MAX << (from % 64));
        loop {
            if w != 0 {
                return Some(wi * 64 + w.trailing_zeros() as usize);
            }
            wi += 1;
            w = *self.bits.get(wi)? ^ flip;
        }
    }

    /// Indices of the items of `item_len` consecutive elements that overlap a marked block,
    /// ascending and without repeats: every item any write touched is among them.
    pub fn items(&self, item_len: usize) -> impl Iterator<Item = usize> + '_ {
        let item_len = item_len.max(1);
        let mut next = 0usize;
        self.ranges().flat_map(move |r| {
            let first = (r.start / item_len).max(next);
            let last = r.end.div_ceil(item_len);
            next = next.max(last);
            first..last
        })
    }

    /// Zero every item of `item_len` consecutive elements of `data` that overlaps a marked block,
    /// and clear the marks: for arrays of items where a write marks only the item's first
    /// element (one mark per item written instead of one per block it spans).
    pub fn clear_items_in<T: Copy + Default>(&mut self, data: &mut [T], item_len: usize) {
        let item_len = item_len.max(1);
        for j in self.items(item_len) {
            let end = ((j + 1) * item_len).min(data.len());
            if let Some(s) = data.get_mut(j * item_len..end) {
                s.fill(T::default());
            }
        }
        self.bits.fill(0);
    }

    /// Zero the marked blocks of `data` (the array this map tracks) and clear the marks.
    pub fn clear_in<T: Copy + Default>(&mut self, data: &mut [T]) {
        for r in self.ranges() {
            if let Some(s) = data.get_mut(r) {
                s.fill(T::default());
            }
        }
        self.bits.fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scalar twin of `ranges`: every marked block's range, one by one.
    fn blocks_naive(d: &Dirty) -> Vec<usize> {
        (0..d.bits.len() * 64)
            .filter(|&b| d.bits[b >> 6] >> (b & 63) & 1 == 1)
            .collect()
    }

    fn blocks_of_ranges(d: &Dirty) -> Vec<usize> {
        let per = 1usize << d.shift;
        let mut out = Vec::new();
        for r in d.ranges() {
            assert!(r.start < r.end && r.end <= d.len, "{r:?}");
            assert_eq!(r.start % per, 0);
            let mut b = r.start / per;
            while b * per < r.end {
                out.push(b);
                b += 1;
            }
        }
        out
    }

    #[test]
    fn ranges_match_the_marked_blocks_for_every_pattern() {
        // u32 elements: 16 per block; 3000 elements -> 188 blocks over 3 words.
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for density in [0u64, 1, 3, 8, 32, 60, 63, 64] {
            for _ in 0..50 {
                let mut d = Dirty::new(3000, 4);
                for i in 0..3000 {
                    rng = key::mix64(rng);
                    if rng % 64 < density {
                        d.mark(i);
                    }
                }
                let ranges: Vec<_> = d.ranges().collect();
                assert_eq!(blocks_of_ranges(&d), blocks_naive(&d), "{ranges:?}");
                // Runs are maximal: consecutive ranges never touch.
                for w in ranges.windows(2) {
                    assert!(w[0].end < w[1].start);
                }
            }
        }
        // Runs that cross word boundaries and end exactly at one.
        let mut d = Dirty::new(64 * 16 * 3, 4);
        for b in 60..130 {
            d.mark(b * 16);
        }
        assert_eq!(d.ranges().collect::<Vec<_>>(), vec![60 * 16..130 * 16]);
        let mut d = Dirty::new(64 * 16 * 3, 4);
        for b in 0..128 {
            d.mark(b * 16 + 3);
        }
        assert_eq!(d.ranges().collect::<Vec<_>>(), vec![0..128 * 16]);
        d.mark_all();
        assert_eq!(d.ranges().collect::<Vec<_>>(), vec![0..64 * 16 * 3]);
    }

    #[test]
    fn clear_in_zeroes_exactly_what_was_written() {
        let mut data = vec![0u64; 1000];
        let mut d = Dirty::new(data.len(), 8);
        for i in [0, 7, 8, 500, 999] {
            data[i] = 1 + i as u64;
            d.mark(i);
        }
        let items: Vec<usize> = d.items(3).collect();
        // Blocks 0..16 and 496..504 and 992..1000 in 3-element items.
        assert_eq!(items.first(), Some(&0));
        for i in [0, 7, 8, 500, 999] {
            assert!(items.contains(&(i / 3)), "item of {i}");
        }
        assert!(items.windows(2).all(|w| w[0] < w[1]));
        d.clear_in(&mut data);
        assert!(data.iter().all(|&x| x == 0));
        assert!(d.is_clean());
        assert_eq!(d.ranges().count(), 0);
        assert_eq!(Dirty::bytes_for(1000, 8), d.memory_bytes() as u64);
    }

    #[test]
    fn items_marked_by_their_first_element_are_cleared_whole() {
        // Items of 33 u32 (a Deltoid group): a write marks only the item's first element.
        let (len, item) = (33 * 100, 33);
        let mut data = vec![0u32; len];
        let mut d = Dirty::new(len, 4);
        for j in [0usize, 1, 50, 99] {
            data[j * item..(j + 1) * item].fill(j as u32 + 1);
            d.mark(j * item);
        }
        let items: Vec<usize> = d.items(item).collect();
        for j in [0usize, 1, 50, 99] {
            assert!(items.contains(&j));
        }
        d.clear_items_in(&mut data, item);
        assert!(data.iter().all(|&x| x == 0));
        assert!(d.is_clean());
    }

    #[test]
    fn spans_and_merges() {
        let mut a = Dirty::new(100, 8);
        a.mark(6);
        a.mark(8);
        assert_eq!(a.ranges().collect::<Vec<_>>(), vec![0..16]);
        let mut b = Dirty::new(100, 8);
        b.mark(99);
        a.merge(&b);
        assert_eq!(a.ranges().collect::<Vec<_>>(), vec![0..16, 96..100]);
        let c = Dirty::new(50, 8);
        a.merge(&c);
        assert_eq!(a.ranges().collect::<Vec<_>>(), vec![0..100]);
    }
}
