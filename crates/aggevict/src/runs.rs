//! Runs of equal back-to-back keys in a chunk (the run merge, shared by both key modes): the
//! weight rules, the runs of a run-start mask, and the weight of a run.

use crate::CHUNK;

/// Indices into a `2 * CHUNK` table (`CHUNK` is a power of two, so `& (2 * CHUNK - 1)` keeps
/// every index `<= CHUNK` unchanged while proving it in bounds).
pub(crate) const CHUNK_MASK_1: usize = 2 * CHUNK - 1;

/// The run-merge weight rules of a chunk, shared by both key modes: `(unit, mergeable)`. Unit
/// weights (packet counting) need no sums; a chunk holding a weight `>= 2^32` is not merged at
/// all (32 smaller weights sum exactly in u64). `unit` is one OR of `w ^ 1` (a vector test),
/// and the unit path (every chunk of a packet-counting run) stops there.
#[inline(always)]
pub(crate) fn weight_rules(ws: &[u64]) -> (bool, bool) {
    let unit = ws.iter().fold(0u64, |o, &w| o | (w ^ 1)) == 0;
    (unit, unit || ws.iter().fold(0u64, |o, &w| o | w) >> 32 == 0)
}

/// The runs `[p, q)` of a chunk of `n` packets, in order, where the set bits of `starts` mark
/// the runs' first packets (shared by both key modes). `n <= CHUNK`, and `starts` has no bit at
/// or above `n`. An iterator rather than a closure-taking helper: a closure called from a
/// `#[target_feature]` loop is not always inlined, and out of line it loses the feature (each
/// SIMD intrinsic becomes a call).
#[derive(Clone, Copy)]
pub(crate) struct Runs {
    starts: u32,
    n: usize,
}

impl Runs {
    #[inline(always)]
    pub(crate) fn new(starts: u32, n: usize) -> Runs {
        Runs { starts, n }
    }
}

impl Iterator for Runs {
    type Item = (usize, usize);

    #[inline(always)]
    fn next(&mut self) -> Option<(usize, usize)> {
        if self.starts == 0 {
            return None;
        }
        let p = self.starts.trailing_zeros() as usize;
        self.starts &= self.starts - 1;
        // The next start, or `n` after the last run, with no branch (a branch here would
        // mispredict once per chunk, as the run count varies).
        let q = (u64::from(self.starts) | (1u64 << self.n)).trailing_zeros() as usize;
        Some((p, q))
    }
}

/// The weight of run `[p, q)`: `q - p` for unit weights, else a difference of prefix sums.
pub(crate) trait RunWeight {
    fn weight(&self, p: usize, q: usize) -> u64;
}

/// Unit weights (packet counting): a run weighs its length.
pub(crate) struct Unit;

impl RunWeight for Unit {
    #[inline(always)]
    fn weight(&self, p: usize, q: usize) -> u64 {
        (q - p) as u64
    }
}

/// Exclusive prefix sums of a chunk's weights, indexed through `CHUNK_MASK_1`.
pub(crate) struct Prefix([u64; 2 * CHUNK]);

impl Prefix {
    #[inline(always)]
    pub(crate) fn new(ws: &[u64]) -> Prefix {
        let mut pre = [0u64; 2 * CHUNK];
        let mut acc = 0u64;
        for (p, &w) in pre[1..].iter_mut().zip(ws) {
            acc = acc.wrapping_add(w);
            *p = acc;
        }
        Prefix(pre)
    }
}

impl RunWeight for Prefix {
    #[inline(always)]
    fn weight(&self, p: usize, q: usize) -> u64 {
        self.0[q & CHUNK_MASK_1].wrapping_sub(self.0[p & CHUNK_MASK_1])
    }
}
