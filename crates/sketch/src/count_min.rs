//! Count-Min sketch (Cormode & Muthukrishnan 2005; ALGORITHMS.md 2) with a heavy-hitter
//! candidate set, and the shared counter-matrix engine that `count_array` reuses (a count array
//! is Count-Min with one row, Re-evaluating paper section 3).
//!
//! State: `rows x width` u32 counters (Agg-Evict 4.1 default 4 x 65536; the Re-evaluating
//! paper's variant is `rows = 3`). Update `C[i][h_i(x)] += w`; point query `min_i C[i][h_i(x)]`,
//! which never underestimates and exceeds the truth by more than `e*N/width` with probability
//! at most `e^-rows`.
//!
//! Counters are u32 like the papers' and **saturate** at `u32::MAX` instead of wrapping: a
//! wrapped counter would make the minimum an underestimate, which breaks the one-sided
//! guarantee. Saturation needs 4.29e9 units in one counter in one epoch (more than a 2M-packet
//! epoch or a 1 s, 10 Gb/s epoch of bytes can hold); below it the sketch is exactly linear, so
//! merge and aggregated updates are bit-exact.
//!
//! Hashing: every key gets a 64-bit *code* ([`CounterMatrix::code`]): a 4-byte key (IPv4 source
//! or destination) is its own code, a longer key's code is its xxh3 hash. Row `r`'s column is the
//! top bits of an independent multiply-add-shift map of the code (`key::Affine`, one
//! multiplication per row): for 4-byte keys that is a strongly universal hash per row with
//! independent rows, exactly the assumption of the Count-Min analysis, and it is the same work
//! as the bare multiply-shift loop the benchmarks compare against. The code also identifies the
//! key in the candidate set (exactly, for 4-byte keys).
//!
//! Hot path: batches of 32 hashed first and their counters prefetched (and the keys a small
//! direct-mapped cache of candidate-set members knows marked), then the increments with an
//! upper bound of each key's estimate (two rows' counters), then, only for the few keys whose
//! bound reaches the running threshold and that the cache does not know, the exact estimate at
//! their own update and the exact offer ([`crate::candidates`], `CmState::chunk_pow2`).

use algo::{Algorithm, ConfigError, Estimate, MergeError, Task};
use key::{Affine, FlowKey, HashFn};
use serde::{Deserialize, Serialize};

use crate::candidates::Candidates;
use crate::rows::{median, prefetch, prefetch_all, prefetch_ptr, MAX_ROWS};
use crate::{sort_estimates, BATCH};

// `chunk_split` flags a chunk's keys in one u64.
const _: () = assert!(BATCH <= 64);

/// Largest `rows * width` of a counter matrix (indices are kept as u32 in the batch scratch).
pub(crate) const MAX_CELLS: usize = 1 << 30;

pub(crate) const COUNT_MIN_SALT: u64 = 0x636f_756e_745f_6d69; // "count_mi"

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CountMinConfig {
    /// Number of rows `d` (failure probability `e^-d`). Agg-Evict: 4; Re-evaluating: 3.
    pub rows: usize,
    /// Counters per row `w` (error `e*N/w`). Agg-Evict: 65536.
    pub width: usize,
    /// Candidate-set size for heavy hitters, heavy changers and top-k (see
    /// [`crate::candidates`]). 0 turns the set off: the sketch then answers flow size only, and
    /// its update is the counter pass alone.
    pub candidates: usize,
}

impl Default for CountMinConfig {
    fn default() -> Self {
        CountMinConfig {
            rows: 4,
            width: 65536,
            candidates: 1024,
        }
    }
}

impl CountMinConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        validate_matrix("count_min", self.rows, self.width, self.candidates)
    }
}

pub(crate) fn validate_matrix(
    algo: &'static str,
    rows: usize,
    width: usize,
    candidates: usize,
) -> Result<(), ConfigError> {
    let inv = |field, reason: String| ConfigError::Invalid {
        algo,
        field,
        reason,
    };
    if rows == 0 || rows > MAX_ROWS {
        return Err(inv(
            "rows",
            format!("must be in 1..={MAX_ROWS}, got {rows}"),
        ));
    }
    if width == 0 || rows.saturating_mul(width) > MAX_CELLS {
        return Err(inv(
            "width",
            format!("must be >= 1 with rows * width <= {MAX_CELLS}, got {width}"),
        ));
    }
    if candidates > (1 << 24) {
        return Err(inv(
            "candidates",
            format!("must be in 0..=16777216 (0: flow size only), got {candidates}"),
        ));
    }
    Ok(())
}

/// Bytes of a Count-Min state of `rows * width` u32 counters and a candidate set of
/// `candidates` (a validated shape: at most 2^30 cells and 2^24 candidates, so no overflow).
pub(crate) fn cm_bytes(rows: usize, width: usize, candidates: usize) -> u64 {
    (rows as u64) * (width as u64) * 4
        + Candidates::bytes_for(candidates)
        + hint_slots(candidates) as u64 * 8
}

/// Add `w` to the `R` counters at `cells` of the matrix at `base`; returns the key's new
/// estimate `sat(min + w)` (saturating add is monotone, so that is the new minimum).
///
/// The caller (`CmState::chunk_split`) guarantees every cell is `< rows * width` of the live
/// matrix that `base` points to, and holds `&mut` to it.
///
/// `SAT = false` adds without the saturation check: exact whenever the matrix's total weight,
/// this update included, is at most `u32::MAX` (no counter can exceed the total), which the
/// caller checks once per chunk ([`CounterMatrix::total`]).
#[inline(always)]
fn add_cells<const R: usize, const SAT: bool>(base: *mut u32, cells: &[u32; R], w: u32) -> u32 {
    if !SAT {
        let mut old_min = u32::MAX;
        for &j in cells {
            // SAFETY: as below.
            let c = unsafe { &mut *base.add(j as usize) };
            old_min = old_min.min(*c);
            *c = c.wrapping_add(w);
        }
        return old_min.wrapping_add(w);
    }
    let mut old_min = u32::MAX;
    for &j in cells {
        // SAFETY: `j < rows * width == counters.len()` (the caller's cells, checked once per
        // chunk), `base` is the matrix's live allocation and the caller holds it
        // exclusively. The safe twin is `CounterMatrix::add_h` (the one-by-one `update`); the
        // tests check batch, u32 and one-by-one paths leave identical state.
        let c = unsafe { &mut *base.add(j as usize) };
        old_min = old_min.min(*c);
        *c = c.saturating_add(w);
    }
    old_min.saturating_add(w)
}

/// Add `w` to the `R` counters at `cells` (no saturation: the caller's chunk cannot saturate,
/// as for `add_cells::<R, false>`); returns the smaller of the first two rows' new values (the
/// first row's with one row), an upper bound of the key's new estimate.
#[inline(always)]
fn add_cells_bound<const R: usize>(base: *mut u32, cells: &[u32; R], w: u32) -> u32 {
    let mut bound = u32::MAX;
    for (r, &j) in cells.iter().enumerate() {
        // SAFETY: as in `add_cells`: `j < rows * width == counters.len()`, `base` is the
        // live matrix, held exclusively by the caller.
        let c = unsafe { &mut *base.add(j as usize) };
        *c = c.wrapping_add(w);
        if r < 2 {
            bound = bound.min(*c);
        }
    }
    bound
}

/// The estimate of key `i` of a piece right after its own update, from the counters after the
/// whole piece: per row, the counter less the weights the piece's later keys added to it, and
/// the minimum over rows. Exact while no counter saturated (the caller's `take_chunk` check:
/// the adds then neither wrap nor clamp). Test `own_estimate_is_the_estimate_at_the_own_update`.
fn own_estimate<const R: usize>(counters: &[u32], ws: &[u64], cells: &[[u32; R]], i: usize) -> u32 {
    let (Some(cs), Some(rest), Some(rest_w)) = (cells.get(i), cells.get(i + 1..), ws.get(i + 1..))
    else {
        return 0;
    };
    // Per row, the later keys' weights on this key's counter: branch-free, all rows at once
    // (the compiler vectorises the row loop).
    let mut later = [0u32; R];
    for (c, &w) in rest.iter().zip(rest_w) {
        let w = w as u32;
        for r in 0..R {
            later[r] = later[r].wrapping_add(if c[r] == cs[r] { w } else { 0 });
        }
    }
    let mut est = u32::MAX;
    for (&j, &l) in cs.iter().zip(&later) {
        let now = counters.get(j as usize).copied().unwrap_or(0);
        est = est.min(now.wrapping_sub(l));
    }
    est
}

/// Bit `i` set where byte `i` has its top bit set: with SSE2 (every x86-64), 16 bytes a
/// `pmovmskb`; [`byte_mask_scalar`] is the twin (test `byte_mask_agrees_with_its_scalar_twin`).
#[inline(always)]
fn byte_mask(b: &[u8; BATCH]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_movemask_epi8};
        let mut m = 0u64;
        for (k, q) in b.chunks_exact(16).enumerate() {
            // SAFETY: `q` is 16 readable bytes (an unaligned load); SSE2 is part of the
            // x86-64 baseline.
            let bits = unsafe { _mm_movemask_epi8(_mm_loadu_si128(q.as_ptr().cast::<__m128i>())) };
            m |= u64::from(bits as u32 & 0xffff) << (16 * k);
        }
        m
    }
    #[cfg(not(target_arch = "x86_64"))]
    byte_mask_scalar(b)
}

/// The scalar twin of [`byte_mask`].
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn byte_mask_scalar(b: &[u8; BATCH]) -> u64 {
    let mut m = 0u64;
    for (i, &x) in b.iter().enumerate() {
        m |= u64::from(x >> 7) << i;
    }
    m
}

#[inline(always)]
fn weight32(w: u64) -> u32 {
    u32::try_from(w).unwrap_or(u32::MAX)
}

/// The linear part of Count-Min: counters and hashing. Compared bit for bit by the tests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterMatrix {
    rows: usize,
    width: usize,
    /// `64 - log2(width)` for power-of-two widths (the column is then `map >> shift`); `None`
    /// for other widths (`key::reduce`).
    shift: Option<u32>,
    hash: HashFn,
    /// Row `r`'s map of the key code (`hash.affine(r)`).
    maps: Vec<Affine>,
    counters: Vec<u32>,
    /// Weight added since the last reset (saturating). Every counter is at most this, so while
    /// it stays `<= u32::MAX` no counter can saturate and the batch kernels skip the check.
    total: u64,
}

impl CounterMatrix {
    pub(crate) fn new(rows: usize, width: usize, hash: HashFn) -> CounterMatrix {
        let shift = (width.is_power_of_two() && width > 1).then(|| 64 - width.trailing_zeros());
        CounterMatrix {
            rows,
            width,
            shift,
            hash,
            maps: (0..rows as u64).map(|r| hash.affine(r)).collect(),
            counters: vec![0; rows * width],
            total: 0,
        }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn width(&self) -> usize {
        self.width
    }

    /// Row-major counters (`rows * width`).
    pub fn counters(&self) -> &[u32] {
        &self.counters
    }

    /// About how many flows reach `t` (`candidates::reaching`).
    pub(crate) fn reaching(&self, t: u64) -> u64 {
        crate::candidates::reaching(&self.counters, self.width, |c| u64::from(c) >= t)
    }

    /// [`CountMin::set_counters`]: `total` stays an upper bound of every counter, so the batch
    /// kernels' check of saturation stays sound.
    fn set_counters(&mut self, t: &[f64]) -> bool {
        if t.len() != self.counters.len() {
            return false;
        }
        for (c, &v) in self.counters.iter_mut().zip(t) {
            *c = v.round().clamp(0.0, f64::from(u32::MAX)) as u32;
        }
        let top = self.counters.iter().copied().max().unwrap_or(0);
        self.total = self.total.max(u64::from(top));
        true
    }

    /// The key's code: a 4-byte key's big-endian value (`< 2^32`), else its xxh3 hash with the
    /// top bit set and the bottom bit cleared (`>= 2^63`, never `u64::MAX`), so codes of
    /// different key lengths never meet and two longer keys share a code with probability
    /// 2^-62. Two keys with one code share every counter: the sketch cannot tell them apart.
    #[inline(always)]
    pub(crate) fn code(&self, k: &FlowKey) -> u64 {
        let b = k.as_bytes();
        match b.first_chunk::<4>().filter(|_| b.len() == 4) {
            Some(a) => u64::from(u32::from_be_bytes(*a)),
            None => Self::long_code(self.hash.hash(k)),
        }
    }

    #[inline(always)]
    fn long_code(h: u64) -> u64 {
        (h | (1 << 63)) & !1
    }

    /// Column of `code` in row `r < rows`.
    #[inline(always)]
    fn column(&self, code: u64, r: usize) -> usize {
        let v = self.maps.get(r).map_or(0, |m| m.apply(code));
        match self.shift {
            Some(s) => (v >> (s & 63)) as usize,
            None => key::reduce(v, self.width),
        }
    }

    #[inline(always)]
    fn cell(&self, code: u64, r: usize) -> usize {
        r * self.width + self.column(code, r)
    }

    /// `min_i C[i][h_i]` for a key with code `code`.
    #[inline]
    pub(crate) fn estimate_h(&self, code: u64) -> u64 {
        (0..self.rows)
            .filter_map(|r| self.counters.get(self.cell(code, r)))
            .min()
            .map_or(0, |&c| u64::from(c))
    }

    /// Signed change `self - prev` for `code`: the median over rows of the counter
    /// differences (the difference sketch is a turnstile Count-Min, where the min is not an
    /// upper bound; the median is, as for Count Sketch).
    pub(crate) fn change_h(&self, prev: &CounterMatrix, code: u64) -> i64 {
        let mut d = [0i64; MAX_ROWS];
        for (r, slot) in d.iter_mut().enumerate().take(self.rows) {
            let j = self.cell(code, r);
            let a = self.counters.get(j).copied().unwrap_or(0);
            let b = prev.counters.get(j).copied().unwrap_or(0);
            *slot = i64::from(a) - i64::from(b);
        }
        median(&mut d[..self.rows.min(MAX_ROWS)])
    }

    /// Add `w` to every row of `code`; returns the new estimate. The safe twin of the batch
    /// kernels.
    #[inline(always)]
    fn add_h(&mut self, code: u64, w: u32) -> u64 {
        self.total = self.total.saturating_add(u64::from(w));
        let mut old_min = u32::MAX;
        for r in 0..self.rows {
            let j = self.cell(code, r);
            if let Some(c) = self.counters.get_mut(j) {
                old_min = old_min.min(*c);
                *c = c.saturating_add(w);
            }
        }
        // Saturating add is monotone, so min_i sat(c_i + w) = sat(min_i c_i + w).
        u64::from(old_min.saturating_add(w))
    }

    pub(crate) fn same_shape(&self, o: &CounterMatrix) -> bool {
        self.rows == o.rows && self.width == o.width && self.hash == o.hash
    }

    fn add_all(&mut self, o: &CounterMatrix) {
        for (a, b) in self.counters.iter_mut().zip(&o.counters) {
            *a = a.saturating_add(*b);
        }
        self.total = self.total.saturating_add(o.total);
    }

    fn clear(&mut self) {
        self.counters.iter_mut().for_each(|c| *c = 0);
        self.total = 0;
    }

    /// Account a chunk's weights; `true` if no counter can saturate during it.
    #[inline(always)]
    fn take_chunk(&mut self, ws: &[u64]) -> bool {
        // The weights as the counters take them (clamped to u32, like `add_h`). The common case
        // (every weight below 2^32: plain sums, exact for a chunk of up to 2^32 weights) is a
        // vectorisable OR and add; the clamp only runs when a weight needs it.
        let (or, sum) = ws
            .iter()
            .fold((0u64, 0u64), |(o, s), &w| (o | w, s.wrapping_add(w)));
        let sum = if or >> 32 == 0 && ws.len() <= BATCH {
            sum
        } else {
            ws.iter()
                .fold(0u64, |s, &w| s.saturating_add(u64::from(weight32(w))))
        };
        self.total = self.total.saturating_add(sum);
        self.total <= u64::from(u32::MAX)
    }
}

/// A chunk of keys as the caller holds them: `FlowKey`s of any kind, or 4-byte keys as
/// big-endian u32 (`Algorithm::update_batch_u32`). A 4-byte key's code is its big-endian value
/// either way ([`CounterMatrix::code`]), so both paths leave the same state.
pub(crate) trait KeyChunk: Copy {
    fn len(self) -> usize;
    /// Prefetch the chunk's input (timing only).
    fn prefetch(self);
    /// The code of key `i` (`0` past the end; callers stay below `len`).
    fn code(self, m: &CounterMatrix, i: usize) -> u64;
    fn key(self, i: usize) -> Option<FlowKey>;
}

impl KeyChunk for &[FlowKey] {
    #[inline(always)]
    fn len(self) -> usize {
        <[FlowKey]>::len(self)
    }
    #[inline(always)]
    fn prefetch(self) {
        prefetch_all(self);
    }
    #[inline(always)]
    fn code(self, m: &CounterMatrix, i: usize) -> u64 {
        self.get(i).map_or(0, |k| m.code(k))
    }
    #[inline(always)]
    fn key(self, i: usize) -> Option<FlowKey> {
        self.get(i).copied()
    }
}

impl KeyChunk for &[u32] {
    #[inline(always)]
    fn len(self) -> usize {
        <[u32]>::len(self)
    }
    #[inline(always)]
    fn prefetch(self) {
        // 128 bytes for a full chunk: the hardware prefetcher follows a sequential stream.
    }
    #[inline(always)]
    fn code(self, _: &CounterMatrix, i: usize) -> u64 {
        self.get(i).map_or(0, |&k| u64::from(k))
    }
    #[inline(always)]
    fn key(self, i: usize) -> Option<FlowKey> {
        self.get(i).map(|&k| FlowKey::from_u32(k))
    }
}

/// Pass 1 of [`CmState::chunk_pow2`] with a candidate set: per key the code and its `R`
/// cells (one multiply-add-shift each), prefetched, and `known[i] = 0xff` where the member hint
/// (layout `WIDE`, `hmask` its slots less one) holds the key's code. Returns the OR of the
/// codes (a longer key's code has bits above 32).
///
/// `R`, `shift` and `width` as `chunk_pow2` checked them: every cell is `< R * width <=
/// MAX_CELLS = 2^30` (so it fits a u32) and in bounds of `m.counters`.
#[inline(always)]
fn pass1<const R: usize, C: KeyChunk, V: HintView>(
    m: &CounterMatrix,
    ks: C,
    n: usize,
    cells: &mut [[u32; R]; BATCH],
    known: &mut [u8; BATCH],
    hint: V,
) -> u64 {
    let hmask = hint.len().wrapping_sub(1);
    // Exactly `hmask + 1` slots, so that `x & hmask` is seen in bounds (no check per key).
    let hint = hint.head(hmask);
    // Likewise every key index below `ks.len()`.
    let n = n.min(ks.len()).min(BATCH);
    let (width, shift) = (m.width, m.shift.unwrap_or(63) & 63);
    let maps: [Affine; R] = std::array::from_fn(|r| m.maps[r]);
    let base = m.counters.as_ptr();
    let mut or = 0u64;
    for i in 0..n {
        let (cs, k) = (&mut cells[i], &mut known[i]);
        let h = ks.code(m, i);
        or |= h;
        for (r, (c, m)) in cs.iter_mut().zip(&maps).enumerate() {
            let j = r * width + (m.apply(h) >> shift) as usize;
            *c = j as u32;
            // In bounds (checked by the caller), but a prefetch needs no check anyway.
            prefetch_ptr(base.wrapping_add(j));
        }
        let known = hint.knows(cs[0] as usize & hmask, h);
        *k = 0u8.wrapping_sub(u8::from(known));
    }
    or
}

/// Count-Min (or count array) counters plus the candidate set. Shared by [`CountMin`] and
/// [`crate::CountArray`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct CmState {
    pub(crate) m: CounterMatrix,
    pub(crate) cand: Candidates,
    /// A cache of members for the batch kernel (not state: not saved).
    #[serde(skip)]
    hint: MemberHint,
}

/// Entries of [`MemberHint`] per candidate (a power of two at least this many): 8192 entries
/// (64 KiB allocated) for the default 1024, which are 8192 slots in the wide layout and 16384
/// in the narrow one. Fewer slots leave more members sharing one (each then costs a probe of the
/// set when the other took the slot): 4 entries a candidate measured about 3% slower, 16 no
/// faster (docs/agg-evict-results.md, "Point 2, third attempt").
const HINT_PER_CANDIDATE: usize = 8;

/// Slots of the member hint of a candidate set of `cap` (0 without one).
pub(crate) fn hint_slots(cap: usize) -> usize {
    if cap == 0 {
        0
    } else {
        (HINT_PER_CANDIDATE * cap).next_power_of_two()
    }
}

/// Known members of the candidate set, direct-mapped by the key's row-0 column (computed for
/// the counters anyway: no hash of its own): slot `col0 % slots` holds a member's code, or an
/// empty mark. Invariant: a slot holding a key's code means the key is a member. Kept by
/// writing only keys the exact set has just confirmed as members (found or inserted), and by
/// emptying every slot when members may have left ([`Candidates::generation`] changed: a
/// compaction or a clear). A key not found here may still be a member (another member took
/// its slot, or it was not offered since the last compaction): the kernel then takes the exact
/// path, which writes it here. Not state (not saved; a loaded sketch starts with it empty).
///
/// Two layouts of the same entries of two u32 words (8 bytes an entry, allocated at
/// construction):
/// - *narrow*, while every code seen is a 4-byte key's (`< 2^32`): slot `i` is word `i` of the
///   flattened entries, the code itself, so twice as many slots as entries (16 a candidate:
///   half as many members lose their slot to another as with 8, the default's update about
///   2.5% faster: docs/agg-evict-results.md, "Issue 14 point 2, third pass"; an earlier kernel
///   was 2-5% faster with the first half of the words alone, "second pass"). Every u32 is some
///   key's code, so the empty mark is [`NARROW_EMPTY`] except in the one slot that code itself
///   maps to, which holds another code that maps elsewhere (`MemberHint::alt`): no code can
///   then match an empty slot.
/// - *wide*, from the first longer code on (`>= 2^63`, which no u32 word can match): slot `i`
///   is entry `i` (low half, high half), empty `u64::MAX` (never a code).
#[derive(Clone, Debug, Default)]
struct MemberHint {
    /// One entry a wide slot (the narrow layout uses each of their words as a slot).
    words: Vec<[u32; 2]>,
    generation: u64,
    wide: bool,
    /// Narrow layout: the slot that code [`NARROW_EMPTY`] maps to, and the mark it holds when
    /// empty (a code of another slot); `None` until computed (then the layout is wide if no
    /// such code was found).
    alt: Option<(usize, u32)>,
}

/// The narrow layout's empty mark (in every slot but `MemberHint::alt`'s).
const NARROW_EMPTY: u32 = u32::MAX;

/// A layout of [`MemberHint`] as the kernel reads it: narrow (`&[u32]`, one word a slot) or wide
/// (`&[[u32; 2]]`, a code's low and high halves). A power-of-two number of slots; the kernel
/// masks with `len() - 1`, so the compiler sees every index in bounds.
trait HintView: Copy {
    fn len(self) -> usize;
    /// Whether slot `slot` holds `code` (false past the end).
    fn knows(self, slot: usize, code: u64) -> bool;
    /// Slots `0..=last` (`last < len()`).
    fn head(self, last: usize) -> Self;
}

impl HintView for &[u32] {
    #[inline(always)]
    fn len(self) -> usize {
        <[u32]>::len(self)
    }
    #[inline(always)]
    fn knows(self, slot: usize, code: u64) -> bool {
        // A longer code (`>= 2^32`) matches no word.
        self.get(slot).map(|&w| u64::from(w)) == Some(code)
    }
    #[inline(always)]
    fn head(self, last: usize) -> Self {
        &self[..=last]
    }
}

impl HintView for &[[u32; 2]] {
    #[inline(always)]
    fn len(self) -> usize {
        <[[u32; 2]]>::len(self)
    }
    #[inline(always)]
    fn knows(self, slot: usize, code: u64) -> bool {
        self.get(slot)
            .is_some_and(|&[lo, hi]| (u64::from(hi) << 32 | u64::from(lo)) == code)
    }
    #[inline(always)]
    fn head(self, last: usize) -> Self {
        &self[..=last]
    }
}

impl MemberHint {
    fn new(cap: usize) -> MemberHint {
        MemberHint {
            words: vec![[u32::MAX; 2]; hint_slots(cap)],
            generation: 0,
            wide: false,
            alt: None,
        }
    }

    /// The narrow layout's slots: every u32 word of the entries.
    fn narrow(&self) -> &[u32] {
        self.words.as_flattened()
    }

    /// Slots of the current layout.
    fn slots(&self) -> usize {
        if self.wide {
            self.words.len()
        } else {
            2 * self.words.len()
        }
    }

    /// Make the hint valid for a set of `cap` candidates of generation `generation` (empty it if
    /// it was not). `slot_of(code)` is the slot a code maps to (for the narrow empty marks).
    #[inline(always)]
    fn sync(&mut self, cap: usize, generation: u64, slot_of: impl Fn(u64) -> usize) {
        let len = hint_slots(cap);
        if self.alt.is_none() {
            let s = slot_of(u64::from(NARROW_EMPTY));
            // A code of another slot; almost always 0 or 1. Should the first few all share the
            // slot (a degenerate map), take the wide layout, which needs no such mark.
            match (0..64u32).find(|&c| slot_of(u64::from(c)) != s) {
                Some(c) => self.alt = Some((s, c)),
                None => {
                    self.alt = Some((usize::MAX, NARROW_EMPTY));
                    self.wide = true;
                }
            }
            self.generation = generation.wrapping_add(1);
        }
        if self.generation != generation || self.words.len() != len {
            self.empty(len);
            self.generation = generation;
        }
    }

    #[cold]
    fn empty(&mut self, len: usize) {
        self.words.clear();
        self.words.resize(len, [u32::MAX; 2]);
        if let (false, Some((s, c))) = (self.wide, self.alt) {
            if let Some(w) = self.words.as_flattened_mut().get_mut(s) {
                *w = c;
            }
        }
    }

    /// Switch to the wide layout (a code `>= 2^32` was seen), emptied.
    #[cold]
    fn widen(&mut self) {
        self.wide = true;
        self.empty(self.words.len());
    }

    /// Whether slot `slot` (already masked) holds `code`.
    #[inline]
    fn knows(&self, slot: usize, code: u64) -> bool {
        if self.wide {
            (&self.words[..]).knows(slot, code)
        } else {
            self.narrow().knows(slot, code)
        }
    }

    /// Write member `code` to slot `slot` (already masked). In the narrow layout a longer code
    /// is not written (the kernel widens the hint before it offers any).
    #[inline(always)]
    fn note(&mut self, slot: usize, code: u64) {
        if self.wide {
            if let Some(p) = self.words.get_mut(slot) {
                *p = [code as u32, (code >> 32) as u32];
            }
        } else if let (Ok(c), Some(w)) = (
            u32::try_from(code),
            self.words.as_flattened_mut().get_mut(slot),
        ) {
            *w = c;
        }
    }
}

impl CmState {
    /// `Ok` when a loaded state has the shape `new(rows, width, candidates, _)` makes, its hash
    /// aside (`algo::CheckState`): the row maps those of its hash, `rows * width` counters, a
    /// total at least every counter (the batch kernels skip the saturation check below it), and
    /// a consistent candidate set.
    pub(crate) fn check(&self, rows: usize, width: usize, candidates: usize) -> Result<(), String> {
        let m = &self.m;
        if m.rows != rows || m.width != width || m.counters.len() != rows * width {
            return Err(format!(
                "{} x {} matrix of {} counters, the configuration has {rows} x {width}",
                m.rows,
                m.width,
                m.counters.len()
            ));
        }
        let shift = (width.is_power_of_two() && width > 1).then(|| 64 - width.trailing_zeros());
        let maps_ok =
            m.maps.len() == rows && m.maps.iter().zip(0..).all(|(a, r)| *a == m.hash.affine(r));
        if m.shift != shift || !maps_ok {
            return Err("row maps or column shift other than the hash's".into());
        }
        let top = m.counters.iter().copied().max().unwrap_or(0);
        if m.total < u64::from(top) {
            return Err(format!("total {} below a counter of {top}", m.total));
        }
        self.cand.check(candidates, |k| m.code(k))
    }

    pub(crate) fn new(rows: usize, width: usize, candidates: usize, hash: HashFn) -> CmState {
        CmState {
            m: CounterMatrix::new(rows, width, hash),
            cand: Candidates::new(candidates, 1),
            // Allocated now, so that the memory is the instance's from the start.
            hint: MemberHint::new(candidates),
        }
    }

    #[inline(always)]
    fn after_update(&mut self, key: &FlowKey, h: u64, est: u64) {
        if est >= self.cand.theta() {
            let m = &self.m;
            self.cand.offer(key, h, est, |h| m.estimate_h(h));
        }
    }

    #[inline]
    pub(crate) fn update(&mut self, key: &FlowKey, w: u64) {
        let h = self.m.code(key);
        let est = self.m.add_h(h, weight32(w));
        self.after_update(key, h, est);
    }

    /// Hash a batch of up to [`BATCH`] keys, prefetch all their counters, then apply the
    /// updates in order (same state as the one-by-one loop: prefetching only changes timing).
    /// Power-of-two widths with 1 to 4 rows (every paper default) get a monomorphised loop with
    /// the row count as a constant; other shapes take the general loop.
    pub(crate) fn update_batch(&mut self, keys: &[FlowKey], weights: &[u64]) {
        self.update_chunks(keys, weights);
    }

    /// [`CmState::update_batch`] over 4-byte keys held as big-endian u32 (same state).
    pub(crate) fn update_batch_u32(&mut self, keys: &[u32], weights: &[u64]) {
        self.update_chunks(keys, weights);
    }

    #[inline(always)]
    fn update_chunks<'a, T: Copy + 'a>(&mut self, keys: &'a [T], weights: &[u64])
    where
        &'a [T]: KeyChunk,
    {
        let n = keys.len().min(weights.len());
        let mut start = 0;
        while start < n {
            let end = (start + BATCH).min(n);
            let (ks, ws) = (&keys[start..end], &weights[start..end]);
            match (self.m.shift, self.m.rows) {
                (Some(sh), 4) => self.chunk_pow2::<4, _>(ks, ws, sh),
                (Some(sh), 3) => self.chunk_pow2::<3, _>(ks, ws, sh),
                (Some(sh), 2) => self.chunk_pow2::<2, _>(ks, ws, sh),
                (Some(sh), 1) => self.chunk_pow2::<1, _>(ks, ws, sh),
                _ => self.chunk_general(ks, ws),
            }
            start = end;
        }
    }

    /// One chunk (`<= BATCH` keys) with `R` rows and a power-of-two width (`shift = 64 -
    /// log2(width)`):
    ///
    /// 1. prefetch the chunk's keys (FlowKeys); per key, the code and `R` columns (one
    ///    multiply-add-shift each, independent across keys), prefetch the `R` counters, and
    ///    whether the member hint ([`MemberHint`], indexed by the row-0 column already at hand:
    ///    one load and compare) knows the key as a member;
    /// 2. the counter increments in order (read-modify-write adds, as counters only) and, per
    ///    key, whether the smaller of its first two rows' counters right after its own add
    ///    reached theta, a bit in a register: the estimate (the minimum of all rows) is at most
    ///    that, so a key below it did not reach theta;
    /// 3. for the keys that passed that bound and that the hint does not know (about 1.7% of
    ///    the updates on the Zipf(1.1) bench stream): a member (the hint lost it to another in
    ///    its slot, or an earlier update of the piece made it one) is written to the hint and
    ///    skipped; for the others, the estimate at their own update, exactly
    ///    ([`own_estimate`], about 1% of the updates), and the exact [`Candidates::offer`] in
    ///    order if it reached theta, then written to the hint.
    ///
    /// This leaves the state of the one-by-one loop: a member's offer is a no-op whatever its
    /// estimate, a key below theta is not offered, and no compaction (the only thing that
    /// raises `theta` or removes a member) happens between the passes: the chunk is cut into
    /// pieces of at most [`Candidates::room`] keys (each inserts at most once), and when the
    /// next insertion would compact, that key is updated and offered alone, so the
    /// compaction's re-queries see the counters of the one-by-one order (then no key counts as
    /// known for the rest of the chunk, and the hint is emptied: [`Candidates::generation`]).
    /// While a counter may saturate (`take_chunk`), every key goes alone.
    ///
    /// History (docs/agg-evict-results.md, "Point 2"): until 2026-11-25 the member check
    /// probed four slots of the 32 KiB candidate table per key (a multiply, a 32-byte load
    /// and about 25 instructions) and the estimates of non-members were recovered after the
    /// counter pass (`own_estimate`, O(chunk) each); the default cost about 1.7-1.8x counters
    /// only, now about 1.4x. A 2-way hint (two loads a key) and a 4-slot hint a candidate
    /// measured slower; prefetching the probe slots in pass 1 too (evicts counter lines). Second
    /// pass (2026-11-25): u32 hint words for 4-byte keys kept; measured slower and dropped: the
    /// hint checked in pass 2 instead of pass 1, the hint loads in a loop of their own before
    /// the cells, a 2-way hint in one 8-byte entry (16 and 32 KiB), the bits in a register
    /// instead of bytes. Third pass (2026-11-25, "Issue 14 point 2, third pass"): the minimum
    /// and the estimate store per key left pass 2 (the bound above and `own_estimate` for the
    /// few, about 77 instructions a key against 95, counters only 60); pass 1's loop indexes
    /// keys and hint slots without bounds checks. Measured slower and dropped: one fused pass
    /// without prefetch (hash, add, hint check, offer inline), and the row-0 counter alone as
    /// the bound (twice the `own_estimate` calls, mispredicted).
    #[inline(always)]
    fn chunk_pow2<const R: usize, C: KeyChunk>(&mut self, ks: C, ws: &[u64], shift: u32) {
        let n = ks.len().min(ws.len()).min(BATCH);
        let ws = &ws[..n];
        let width = self.m.width;
        // The caller matched `shift == Some(64 - log2(width))` with `rows == R`, so these hold
        // by construction; checking them once per chunk makes the unchecked indexing below
        // locally sound: column `v >> shift < 2^(64 - shift) == width`.
        if R != self.m.rows
            || !(1..64).contains(&shift)
            || (1u64 << (64 - shift)) != width as u64
            || self.m.counters.len() != R * width
            || self.m.maps.len() != R
        {
            return self.chunk_general(ks, ws);
        }
        ks.prefetch();
        let maps: [Affine; R] = std::array::from_fn(|r| self.m.maps[r]);
        let base = self.m.counters.as_mut_ptr();
        if self.cand.is_disabled() {
            // No candidate set: cells and prefetch, then the counter pass is the whole update.
            let mut cells = [[0u32; R]; BATCH];
            for (i, cs) in cells.iter_mut().enumerate().take(n) {
                let code = ks.code(&self.m, i);
                for (r, (c, m)) in cs.iter_mut().zip(&maps).enumerate() {
                    let j = r * width + (m.apply(code) >> shift) as usize;
                    *c = j as u32;
                    prefetch_ptr(base.wrapping_add(j));
                }
            }
            // While the total fits u32, every weight does too and no counter can saturate.
            if self.m.take_chunk(ws) {
                for (&w, cs) in ws.iter().zip(&cells) {
                    add_cells::<R, false>(base, cs, w as u32);
                }
            } else {
                for (&w, cs) in ws.iter().zip(&cells) {
                    add_cells::<R, true>(base, cs, weight32(w));
                }
            }
            return;
        }
        // Pass 1: code, the R cells of every key, prefetch them; which keys the hint knows
        // as members.
        self.sync_hint(shift);
        // A power of two (the set is enabled: `cap >= 1`).
        let hmask = self.hint.slots().wrapping_sub(1);
        let mut cells = [[0u32; R]; BATCH];
        let mut known = [0u8; BATCH];
        let (m, hint) = (&self.m, &self.hint);
        let codes_or = if hint.wide {
            pass1::<R, C, _>(m, ks, n, &mut cells, &mut known, &hint.words[..])
        } else {
            pass1::<R, C, _>(m, ks, n, &mut cells, &mut known, hint.narrow())
        };
        if !self.hint.wide && codes_or >> 32 != 0 {
            // A longer key: from now on the wide layout (the bits taken stay true).
            self.hint.widen();
        }
        // The bits are taken after the first counter pass (then the bytes' stores have left
        // the store buffer: reading them at once would stall on forwarding).
        let mut members: Option<u64> = None;
        // While the total fits u32, every weight does too and no counter can saturate.
        let exact = self.m.take_chunk(ws);
        // Pieces of the chunk in which no compaction can happen: at most `room()` insertions.
        let mut start = 0;
        while start < n {
            let end = (start + self.cand.room()).min(n);
            if end == start || !exact {
                // The next insertion compacts (or a counter may saturate, so the subtraction
                // below would not be exact): this key alone, in the one-by-one order.
                let est = add_cells::<R, true>(base, &cells[start], weight32(ws[start]));
                let est = u64::from(est);
                let before = self.cand.len();
                if let Some(k) = ks.key(start) {
                    self.after_update(&k, ks.code(&self.m, start), est);
                }
                if self.cand.len() < before {
                    // Compacted: members may have left; the hint is emptied, and no key of
                    // the chunk counts as known from pass 1.
                    members = Some(0);
                    self.sync_hint(shift);
                }
                start += 1;
                continue;
            }
            let (pws, pcells) = (&ws[start..end], &cells[start..end]);
            let len = end - start;
            // Pass 2: the counter updates (read-modify-write adds, as counters only), and per
            // key whether its row-0 counter right after its own add reached theta: the
            // estimate (the rows' minimum) is at most that counter, so a key whose row-0
            // counter stayed below theta did not reach it. A bit a key, in a register (bit
            // `len - 1 - i` for key `i`); a theta past u32::MAX is clamped, which only lets
            // more keys through to the exact check below.
            let th32 = u32::try_from(self.cand.theta()).unwrap_or(u32::MAX);
            let mut below = 0u64;
            for (&w, cs) in pws.iter().zip(pcells) {
                let c0 = add_cells_bound::<R>(base, cs, w as u32);
                below = below.wrapping_add(below) + u64::from(c0 < th32);
            }
            let reach = !(below.reverse_bits() >> (64 - len));
            // Pass 3: the keys the hint does not know whose row-0 counter reached theta: their
            // estimate at their own update, exactly (`own_estimate`), and the exact offer.
            let members = *members.get_or_insert_with(|| byte_mask(&known));
            let todo = !(members >> start) & ((1u64 << len) - 1);
            let mut need = todo & reach;
            while need != 0 {
                let i = need.trailing_zeros() as usize;
                need &= need - 1;
                let code = ks.code(&self.m, start + i);
                let slot = pcells.get(i).map_or(0, |cs| cs[0] as usize & hmask);
                // An earlier update of the same key in this piece may have made it a member.
                if self.hint.knows(slot, code) {
                    continue;
                }
                // A member (that the hint lost to another in its slot): its offer is a no-op
                // whatever its estimate; one probe of the set is cheaper than the estimate.
                if self.cand.contains(code) {
                    self.hint.note(slot, code);
                    continue;
                }
                let est = own_estimate::<R>(&self.m.counters, pws, pcells, i);
                if u64::from(est) < self.cand.theta() {
                    continue;
                }
                let m = &self.m;
                let generation = self.cand.generation();
                let hint = &mut self.hint;
                self.cand.offer_marked_noting(
                    1,
                    |_| Some((ks.key(start + i)?, code)),
                    |_| u64::from(est),
                    |h| m.estimate_h(h),
                    |_, h| hint.note(slot, h),
                );
                // No compaction can happen in a piece; were one to, the hint is emptied at
                // the next use (its generation no longer matches).
                debug_assert_eq!(generation, self.cand.generation());
            }
            start = end;
        }
    }

    /// Make the member hint valid for the candidate set as it is now (emptied if the set's
    /// generation moved on). `shift` as in `chunk_pow2`.
    #[inline(always)]
    fn sync_hint(&mut self, shift: u32) {
        let map0 = self.m.maps.first().copied();
        // The narrow layout's slots (its empty marks are the only use of the slot map here).
        let mask = (2 * hint_slots(self.cand.cap())).wrapping_sub(1);
        self.hint
            .sync(self.cand.cap(), self.cand.generation(), |c| {
                map0.map_or(0, |m| (m.apply(c) >> (shift & 63)) as usize & mask)
            });
    }

    /// One chunk, any shape (a width that is not a power of two, or more than 4 rows),
    /// bounds-checked.
    fn chunk_general<C: KeyChunk>(&mut self, ks: C, ws: &[u64]) {
        let rows = self.m.rows;
        let n = ks.len().min(ws.len()).min(BATCH);
        self.m.take_chunk(&ws[..n]);
        let mut hs = [0u64; BATCH];
        let mut cells = [0u32; BATCH * MAX_ROWS];
        for (i, h) in hs.iter_mut().enumerate().take(n) {
            *h = ks.code(&self.m, i);
            for r in 0..rows {
                let j = self.m.cell(*h, r);
                cells[i * MAX_ROWS + r] = j as u32;
                prefetch(&self.m.counters, j);
            }
            self.cand.prefetch(*h);
        }
        for (i, &w) in ws.iter().enumerate().take(n) {
            let w = weight32(w);
            let mut old_min = u32::MAX;
            for &j in &cells[i * MAX_ROWS..i * MAX_ROWS + rows] {
                if let Some(c) = self.m.counters.get_mut(j as usize) {
                    old_min = old_min.min(*c);
                    *c = c.saturating_add(w);
                }
            }
            let est = u64::from(old_min.saturating_add(w));
            if let Some(k) = ks.key(i) {
                self.after_update(&k, hs[i], est);
            }
        }
    }

    pub(crate) fn flow_size(&self, key: &FlowKey) -> u64 {
        self.m.estimate_h(self.m.code(key))
    }

    fn candidate_estimates(&self) -> Vec<Estimate> {
        self.cand
            .iter()
            .map(|(k, h)| (*k, self.m.estimate_h(h)))
            .collect()
    }

    pub(crate) fn heavy_hitters(&self, threshold: u64) -> Vec<Estimate> {
        let mut v: Vec<Estimate> = self
            .candidate_estimates()
            .into_iter()
            .filter(|&(_, e)| e >= threshold)
            .collect();
        sort_estimates(&mut v);
        v
    }

    pub(crate) fn top_k(&self, k: usize) -> Vec<Estimate> {
        let mut v = self.candidate_estimates();
        sort_estimates(&mut v);
        v.truncate(k);
        v
    }

    /// Heavy changers: the difference of the two epochs' counters (same seeds), evaluated on
    /// the union of both epochs' candidates.
    pub(crate) fn heavy_changers(&self, prev: &CmState, threshold: u64) -> Option<Vec<Estimate>> {
        if !self.m.same_shape(&prev.m) {
            return None;
        }
        Some(crate::candidates::changers(
            &self.cand,
            &prev.cand,
            threshold,
            |h| self.m.change_h(&prev.m, h),
        ))
    }

    pub(crate) fn merge(&mut self, o: &CmState) -> bool {
        if !self.m.same_shape(&o.m) || self.cand.cap() != o.cand.cap() {
            return false;
        }
        self.m.add_all(&o.m);
        let m = &self.m;
        self.cand.merge(&o.cand, &|h| m.estimate_h(h));
        true
    }

    pub(crate) fn reset(&mut self) {
        self.m.clear();
        self.cand.clear();
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.m.counters.len() * 4 + self.cand.memory_bytes() + hint_slots(self.cand.cap()) * 8
    }
}

/// Count-Min sketch with a candidate set.
///
/// Heavy hitters / top-k guarantee: every key of true size `>= T` is reported whenever
/// `T >= self.candidate_threshold()` (see [`crate::candidates`]); the threshold stays near the
/// `candidates`-th largest estimate.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CountMin {
    cfg: CountMinConfig,
    st: CmState,
}

impl CountMin {
    pub fn new(cfg: CountMinConfig, seed: u64) -> Result<CountMin, ConfigError> {
        cfg.validate()?;
        let hash = HashFn::new(key::sub_seed(seed, COUNT_MIN_SALT));
        Ok(CountMin {
            st: CmState::new(cfg.rows, cfg.width, cfg.candidates, hash),
            cfg,
        })
    }

    pub fn config(&self) -> &CountMinConfig {
        &self.cfg
    }

    /// The counters (linear state), for bit-exact comparisons.
    pub fn matrix(&self) -> &CounterMatrix {
        &self.st.m
    }

    /// Every key whose estimate after its own last update was at least this is a candidate.
    pub fn candidate_threshold(&self) -> u64 {
        self.st.cand.theta()
    }

    pub fn estimate(&self, key: &FlowKey) -> u64 {
        self.st.flow_size(key)
    }

    /// Replace the counters by recovered ones (SketchVisor section 5: a run with a fast path
    /// answers from the sketch recovered from both paths), each rounded to the nearest integer in
    /// `0..=u32::MAX`; the candidate set is kept and its keys are answered from the new counters.
    /// Returns false (and changes nothing) when `t` is not `rows * width` long.
    pub fn set_counters(&mut self, t: &[f64]) -> bool {
        self.st.m.set_counters(t)
    }
}

impl algo::CheckState for CountMin {
    fn check_state(&self) -> Result<(), String> {
        self.cfg.validate().map_err(|e| e.to_string())?;
        self.st
            .check(self.cfg.rows, self.cfg.width, self.cfg.candidates)
    }
}

/// What Count-Min and the count array (Count-Min with one row) answer.
pub(crate) const CM_TASKS: &[Task] = &[
    Task::HeavyHitters,
    Task::HeavyChangers,
    Task::TopK,
    Task::FlowSize,
];

/// With one row (the count array), a flow that shares a heavy flow's counter is answered as
/// heavy as it, and nothing tells the two apart: the share of false heavy hitters, top-k keys and
/// changers is about the share of counters in use (a heavy flow's counter holds another flow
/// with that probability; F1 falls by about as much, 0.88 at 8% on Zipf 0.6). Past a
/// twentieth, say so, with the width that brings it back to a twentieth (twenty times the flows,
/// estimated by linear counting from the empty counters). With two rows
/// or more, a false one must share with heavy flows in every row: no caveat.
pub(crate) fn shared_counter_caveat(m: &CounterMatrix, task: Task) -> Option<algo::Caveat> {
    if m.rows() != 1 || !matches!(task, Task::HeavyHitters | Task::TopK | Task::HeavyChangers) {
        return None;
    }
    let w = m.width();
    let empty = m.counters().iter().filter(|&&c| c == 0).count();
    let used = 1.0 - empty as f64 / w as f64;
    if used <= 0.05 {
        return None;
    }
    let flows = w as f64 * (w as f64 / empty.max(1) as f64).ln();
    Some(algo::Caveat {
        parameter: "width",
        message: format!(
            "{:.0}% of the {w} counters are in use (about {flows:.0} flows): a heavy flow's \
             counter holds another flow about as often, and that flow is answered as heavy",
            used * 100.0
        ),
        suggestion: format!(
            "width = {} (at least), or count_min's several rows",
            ((20.0 * flows) as usize).next_power_of_two()
        ),
    })
}

/// The `Algorithm` impl of a wrapper around [`CmState`] (a field `st`): Count-Min and the count
/// array differ only in their configuration, so they share every verb.
macro_rules! cm_algorithm {
    ($t:ty, $name:literal) => {
        impl Algorithm for $t {
            fn name(&self) -> &'static str {
                $name
            }
            fn tasks(&self) -> &'static [Task] {
                if self.st.cand.is_disabled() {
                    &[Task::FlowSize]
                } else {
                    $crate::count_min::CM_TASKS
                }
            }
            #[inline]
            fn update(&mut self, key: &FlowKey, weight: u64) {
                self.st.update(key, weight);
            }
            fn update_batch(&mut self, keys: &[FlowKey], weights: &[u64]) {
                self.st.update_batch(keys, weights);
            }
            fn update_batch_u32(&mut self, keys: &[u32], weights: &[u64]) {
                self.st.update_batch_u32(keys, weights);
            }
            fn reset(&mut self) {
                self.st.reset();
            }
            fn memory_bytes(&self) -> usize {
                self.st.memory_bytes()
            }
            fn heavy_hitters(&self, threshold: u64) -> Option<Vec<Estimate>> {
                let on = !self.st.cand.is_disabled();
                on.then(|| self.st.heavy_hitters(threshold))
            }
            fn heavy_changers(
                &self,
                prev: &dyn Algorithm,
                threshold: u64,
            ) -> Option<Vec<Estimate>> {
                let p = algo::downcast::<$t>(prev)?;
                if self.st.cand.is_disabled() {
                    return None;
                }
                self.st.heavy_changers(&p.st, threshold)
            }
            fn top_k(&self, k: usize) -> Option<Vec<Estimate>> {
                let on = !self.st.cand.is_disabled();
                on.then(|| self.st.top_k(k))
            }
            fn flow_size(&self, key: &FlowKey) -> Option<u64> {
                Some(self.st.flow_size(key))
            }
            fn caveats(&self, task: Task, unit: Option<u64>, _total: u64) -> Vec<algo::Caveat> {
                let m = &self.st.m;
                let mut v = algo::collision_caveat(task, unit, "width", m.width(), |c| {
                    m.estimate_h(c) as f64
                });
                v.extend($crate::count_min::shared_counter_caveat(m, task));
                v.extend(self.st.cand.caveats(task, unit, |t| m.reaching(t)));
                v
            }
            /// The difference sketch's noise, per counter the colliding flows' L1 change
            /// (Cormode & Muthukrishnan, "What's new", sec. 3), measured on both epochs'
            /// counters (`algo::change_caveat`).
            fn change_caveats(&self, prev: &dyn Algorithm, threshold: u64) -> Vec<algo::Caveat> {
                let Some(p) = algo::downcast::<$t>(prev) else {
                    return Vec::new();
                };
                if self.st.cand.is_disabled() || !self.st.m.same_shape(&p.st.m) {
                    return Vec::new();
                }
                let (m, pm) = (&self.st.m, &p.st.m);
                let mut capped = self
                    .st
                    .cand
                    .change_caveats(&p.st.cand, threshold, |t| m.reaching(t).max(pm.reaching(t)));
                capped.extend(algo::change_caveat(
                    threshold,
                    "width",
                    m.width(),
                    algo::NoiseScale::Linear,
                    |c| m.change_h(pm, c) as f64,
                    |t| self.st.heavy_changers(&p.st, t),
                ));
                capped
            }
            fn merge(&mut self, other: &dyn Algorithm) -> Result<(), MergeError> {
                let o = algo::merge_peer(self, other, |_| true)?;
                if self.st.merge(&o.st) {
                    Ok(())
                } else {
                    Err(MergeError::Mismatch($name))
                }
            }
        }
    };
}
pub(crate) use cm_algorithm;

cm_algorithm!(CountMin, "count_min");

/// Count-Min: answers flow sizes from its counters and heavy hitters / top-k from its candidate
/// set; serving flow size alone it needs no candidate set (a probe per update costs about as much
/// as the counter updates, README "Benchmarks"), so a run builds it with `candidates = 0`.
pub const ENTRY: algo::Entry = algo::Entry {
    name: "count_min",
    tasks: CM_TASKS,
    fit: algo::KeyFit::Any,
    build: |p, ctx| algo::build_with("count_min", p, |c| CountMin::new(c, ctx.seed)),
    // Exact: the counters and the candidate set's vectors are allocated at construction.
    memory: |p, _| {
        algo::Entry::memory_with("count_min", p, |c: CountMinConfig| {
            c.validate()?;
            Ok(cm_bytes(c.rows, c.width, c.candidates))
        })
    },
    defaults: algo::defaults_of::<CountMinConfig>,
    flow_size_only: "candidates = 0",
    resets_to_empty: true,
    save: algo::save_state::<CountMin>,
    load: |b| algo::load_state::<CountMin>("count_min", b),
    // ns per update, u32 / FlowKey path: `cargo run --release -p catalog --example update_costs`.
    cost: algo::UpdateCost {
        u32_ns: 5.67,
        wide_ns: 9.73,
        behind: 1.20,
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    /// An exact small case: the point query is the minimum of the key's counters over the rows,
    /// each row's counter is the sum of the weights of the keys hashed to it, and the change is
    /// the median of the rows' differences. Computed here from the columns alone.
    #[test]
    fn estimate_is_the_min_of_the_rows_and_change_their_median() {
        for (rows, width) in [(3usize, 8usize), (4, 16), (2, 5)] {
            let hash = HashFn::new(11);
            let mut m = CounterMatrix::new(rows, width, hash);
            assert_eq!((m.rows(), m.width()), (rows, width));
            let keys: Vec<FlowKey> = (0..40u32).map(|i| FlowKey::from_u32(i * 7919)).collect();
            let w = |i: usize| 1 + (i as u32 * 5) % 9;
            for (i, k) in keys.iter().enumerate() {
                m.add_h(m.code(k), w(i));
            }
            let mut want = vec![0u32; rows * width];
            for (i, k) in keys.iter().enumerate() {
                for r in 0..rows {
                    let c = m.column(m.code(k), r);
                    assert!(c < width);
                    want[r * width + c] += w(i);
                }
            }
            assert_eq!(m.counters(), &want[..]);
            let mut prev = CounterMatrix::new(rows, width, hash);
            prev.add_h(m.code(&keys[0]), 100);
            let mut some_rows_differ = false;
            for k in &keys {
                let h = m.code(k);
                let cs: Vec<u32> = (0..rows)
                    .map(|r| want[r * width + m.column(h, r)])
                    .collect();
                assert_eq!(m.estimate_h(h), u64::from(*cs.iter().min().unwrap()));
                some_rows_differ |= cs.iter().any(|&c| c != cs[0]);
                let mut d: Vec<i64> = (0..rows)
                    .map(|r| {
                        let j = r * width + m.column(h, r);
                        i64::from(want[j]) - i64::from(prev.counters()[j])
                    })
                    .collect();
                d.sort_unstable();
                let med = if rows % 2 == 1 {
                    d[rows / 2]
                } else {
                    (d[rows / 2 - 1] + d[rows / 2]).div_euclid(2)
                };
                assert_eq!(m.change_h(&prev, h), med);
            }
            assert!(
                some_rows_differ,
                "{rows} x {width}: the case tells min from max"
            );
        }
    }

    /// A chunk's weight as the counters take it: each weight clamped to u32, so the running total
    /// bounds every counter exactly as the one-by-one path's does; plain sums only while every
    /// weight fits u32 (weights with equal high bits must not cancel, multiples of 2^32 must not
    /// look small).
    #[test]
    fn chunk_totals_clamp_each_weight() {
        let fresh = || CounterMatrix::new(1, 8, HashFn::new(1));
        let max = u64::from(u32::MAX);
        let mut m = fresh();
        assert!(m.take_chunk(&[3, 5, 0]));
        assert_eq!(m.total, 8);
        let mut m = fresh();
        assert!(!m.take_chunk(&[1 << 40, 1 << 40]));
        assert_eq!(m.total, 2 * max);
        let mut m = fresh();
        assert!(!m.take_chunk(&[1 << 40; BATCH]));
        assert_eq!(m.total, BATCH as u64 * max);
        let mut m = fresh();
        assert!(m.take_chunk(&[max]));
        assert!(!m.take_chunk(&[1]));
        assert_eq!(m.total, max + 1);
    }

    /// The member bits of a chunk: the SSE2 `pmovmskb` kernel and its scalar twin agree on
    /// the kernel's own bytes (0 or 0xff) and on any bytes (only the top bit counts).
    #[test]
    fn byte_mask_agrees_with_its_scalar_twin() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut cases: Vec<[u8; BATCH]> = vec![[0; BATCH], [0xff; BATCH]];
        for i in 0..BATCH {
            let mut one = [0u8; BATCH];
            one[i] = 0xff;
            cases.push(one);
        }
        for _ in 0..200 {
            let mut b = [0u8; BATCH];
            for v in b.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *v = x as u8;
            }
            cases.push(b);
            cases.push(b.map(|v| if v & 1 == 1 { 0xff } else { 0 }));
        }
        for b in &cases {
            let want = byte_mask_scalar(b);
            assert_eq!(byte_mask(b), want, "{b:?}");
            for (i, &v) in b.iter().enumerate() {
                assert_eq!(want >> i & 1, u64::from(v >> 7));
            }
        }
    }

    /// `own_estimate` recovers, from the counters after a whole piece, each key's estimate right
    /// after its own update (the rows' minimum then), on pieces with many shared counters and
    /// repeated keys, for 1 to 4 rows; and the row bound of `add_cells_bound` is at least it.
    #[test]
    fn own_estimate_is_the_estimate_at_the_own_update() {
        fn case<const R: usize>(seed: u64) {
            let width = 8u32;
            let mut x = seed | 1;
            let mut next = || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            let mut counters: Vec<u32> =
                (0..R as u32 * width).map(|_| next() as u32 % 50).collect();
            let len = 1 + next() as usize % BATCH;
            let mut cells = vec![[0u32; R]; len];
            let mut ws = vec![0u64; len];
            for i in 0..len {
                // Every third key repeats an earlier one (a run or a heavy key).
                cells[i] = if i > 0 && next() % 3 == 0 {
                    cells[next() as usize % i]
                } else {
                    std::array::from_fn(|r| r as u32 * width + next() as u32 % width)
                };
                ws[i] = 1 + next() % 1000;
            }
            let mut want = Vec::new();
            for (cs, &w) in cells.iter().zip(&ws) {
                let (est, bound) = (
                    add_cells::<R, false>(counters.as_mut_ptr(), cs, w as u32),
                    {
                        let c: Vec<u32> = cs.iter().map(|&j| counters[j as usize]).collect();
                        c[..R.min(2)].iter().copied().min().unwrap()
                    },
                );
                assert!(bound >= est, "bound {bound} < estimate {est}");
                want.push(est);
            }
            for (i, &e) in want.iter().enumerate() {
                assert_eq!(
                    own_estimate::<R>(&counters, &ws, &cells, i),
                    e,
                    "key {i} of {len}"
                );
            }
            // The bound kernel adds as the estimate kernel does.
            let mut a = counters.clone();
            let mut b = counters.clone();
            for (cs, &w) in cells.iter().zip(&ws) {
                let bound = add_cells_bound::<R>(a.as_mut_ptr(), cs, w as u32);
                let est = add_cells::<R, false>(b.as_mut_ptr(), cs, w as u32);
                assert!(bound >= est);
            }
            assert_eq!(a, b);
        }
        for seed in 1..200 {
            case::<1>(seed);
            case::<2>(seed);
            case::<3>(seed);
            case::<4>(seed);
        }
    }

    /// Long keys (not 4 bytes) get distinct codes with the top bit set and the bottom bit clear,
    /// so they never share a code with a 4-byte key or with each other.
    #[test]
    fn long_codes_are_tagged_and_distinct() {
        let m = CounterMatrix::new(2, 64, HashFn::new(3));
        let mut seen = std::collections::HashSet::new();
        for i in 0..1000u32 {
            let b = i.to_be_bytes();
            let k = FlowKey::v4(key::KeyKind::FiveTuple, b, [10, 0, 0, 1], 80, 443, 6);
            let c = m.code(&k);
            assert_eq!(c >> 63, 1, "{c:#x}");
            assert_eq!(c & 1, 0, "{c:#x}");
            assert!(seen.insert(c));
        }
        assert_eq!(m.code(&FlowKey::from_u32(0xdead_beef)), 0xdead_beef);
        assert_eq!(CounterMatrix::long_code(u64::MAX), u64::MAX - 1);
        assert_eq!(CounterMatrix::long_code(0), 1 << 63);
    }
}
