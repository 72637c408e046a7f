//! Fingerprint mode: keys wider than 4 bytes (pairs, four/five-tuples, IPv6 addresses).
//!
//! The paper (section 3.4, "Handling large flow IDs") keeps a 32-bit fingerprint of the key as
//! the SIMD key, the full key in a parallel flow-ID array, compares full keys on a fingerprint
//! hit and evicts the older flow on a collision. Its artifact folds the key by XOR (for a pair
//! `src ^ dst`) and picks the array as `fp % k`. We keep the structure and change three things:
//!
//! 1. **Mixing fingerprint** ([`Packed::mix`]): `key::mix64` (splitmix64's finaliser, a
//!    bijection on u64) of the packed key, not an XOR fold. The fold maps a reversed pair
//!    (b, a) and every pair of two subnets whose host parts differ by the same XOR onto one
//!    fingerprint *and* one array, so concurrent flows evict each other back and forth; and an
//!    intra-/16 pair folds to `x << 16`, whose `% 2000` is a multiple of 16, so such traffic
//!    reaches only 125 of the 2000 arrays (the artifact's TwoLevel module, harvard-cns/Agg-Evict
//!    @ 29b6b79 `twolevelsimd.c`, does exactly this: `fp = key[0] ^ key[1]`, array
//!    `fp % SIMD_ROW_NUM`; the CAIDA sample trace has 2 fold collisions in 435 pairs, where a
//!    random 32-bit fingerprint expects 2e-5). The mixed 64-bit value is the flow ID: its low
//!    half is the SIMD fingerprint, its high half picks the array (`% k`, [`crate::Index::Modulo`]),
//!    so the two are independent and structured key sets spread like random ones. Aggregators
//!    built for keys of 16 bytes or more (any IPv6 key) take the project hash (`HashFn`,
//!    xxh3) of the `FlowKey` instead.
//!    Every fingerprint value, 0 included, is a key like any other: the occupancy mask decides
//!    which slots are live.
//! 2. **Compact full keys** ([`Packed`]): the flow-ID array holds the key in the smallest
//!    integer that represents it exactly, chosen once from the aggregator's key length: a u64
//!    for 8-byte keys (IPv4 pairs: 128 B an array, 256 KB for k = 2000, the artifact's
//!    `sdpair` size, instead of 1.2 MB of 38-byte `FlowKey`s), a u128 with the length in its
//!    top byte for keys of at most 15 bytes (IPv4 four/five-tuples), the `FlowKey` itself
//!    beyond. The full-key compare is then one or two integer compares, and pass 1 prefetches
//!    the array's flow-ID lines with its key and value lines. A u64 aggregator holds only
//!    8-byte keys (a shorter key could equal a longer one with zero tail bytes): a key of
//!    another length passes through unaggregated (counted in `bypassed`), as narrow mode does.
//! 3. **Run merge**: as in narrow mode, equal consecutive keys of a chunk (packet trains) are
//!    summed into one update before the table is touched, so a train costs one lookup and no
//!    store-to-load chain on its counter.

use key::{mix64, FlowKey, KeyKind, V4};

use crate::simd::{self, Kernel, SLOTS};
use crate::{Aggregator, Index, Sink, CHUNK};

/// The 16 full keys of one array, cache-line aligned (so a u64 array is exactly 2 lines).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(64))]
pub(crate) struct Block<P>(pub(crate) [P; SLOTS]);

/// The flow-ID array of fingerprint mode, one variant per key representation.
#[derive(Clone, Debug)]
pub(crate) enum FullKeys {
    /// Narrow mode: no flow-ID array.
    None,
    /// 8-byte keys as little-endian u64.
    U64(Vec<Block<u64>>),
    /// Keys of at most 15 bytes, length in the top byte.
    U128(Vec<Block<u128>>),
    /// Anything else (keys of 16 bytes and more, or an aggregator built for them).
    Keys(Vec<Block<FlowKey>>),
}

impl FullKeys {
    /// The representation for an aggregator whose widest key is `key_len` bytes.
    pub(crate) fn for_len(key_len: usize, k: usize) -> FullKeys {
        match key_len {
            4 => FullKeys::None,
            8 => FullKeys::U64(vec![Block::default(); k]),
            0..=15 => FullKeys::U128(vec![Block::default(); k]),
            _ => FullKeys::Keys(vec![Block::default(); k]),
        }
    }

    /// What [`FullKeys::for_len`] would allocate, without allocating it.
    pub(crate) fn bytes_for(key_len: usize, k: usize) -> usize {
        use std::mem::size_of;
        k * match key_len {
            4 => 0,
            8 => size_of::<Block<u64>>(),
            0..=15 => size_of::<Block<u128>>(),
            _ => size_of::<Block<FlowKey>>(),
        }
    }

    pub(crate) fn bytes(&self) -> usize {
        use std::mem::size_of;
        match self {
            FullKeys::None => 0,
            FullKeys::U64(v) => v.len() * size_of::<Block<u64>>(),
            FullKeys::U128(v) => v.len() * size_of::<Block<u128>>(),
            FullKeys::Keys(v) => v.len() * size_of::<Block<FlowKey>>(),
        }
    }

    /// The full key in array `a`, slot `s` (flush).
    pub(crate) fn key(&self, a: usize, s: usize) -> Option<FlowKey> {
        let s = s & (SLOTS - 1);
        match self {
            FullKeys::None => None,
            FullKeys::U64(v) => v.get(a).map(|b| b.0[s].unpack()),
            FullKeys::U128(v) => v.get(a).map(|b| b.0[s].unpack()),
            FullKeys::Keys(v) => v.get(a).map(|b| b.0[s]),
        }
    }
}

/// A key representation of the flow-ID array.
pub(crate) trait Packed: Copy + Eq + Default {
    /// Cache lines of one array's [`Block`] that pass 1 prefetches (all of it when small).
    const PREFETCH_LINES: usize;
    /// The exact representation of `k`, or `None` if this representation cannot hold it (the
    /// key then passes through unaggregated).
    fn pack(k: &FlowKey) -> Option<Self>;
    /// `Self::pack(&v.key(kind))`, from the packed tuple's bits (no `FlowKey` built).
    fn from_v4(v: V4, kind: KeyKind) -> Option<Self>;
    /// The key back (evictions, flush).
    fn unpack(&self) -> FlowKey;
    /// The 64-bit flow ID: low half = fingerprint, high half = array (module docs, point 1).
    fn mix(&self, agg: &Aggregator) -> u64;
    fn take(full: &mut FullKeys) -> Vec<Block<Self>>;
    fn put(full: &mut FullKeys, v: Vec<Block<Self>>);
}

impl Packed for u64 {
    const PREFETCH_LINES: usize = 2;
    #[inline(always)]
    fn pack(k: &FlowKey) -> Option<u64> {
        let b: [u8; 8] = k.as_bytes().try_into().ok()?;
        Some(u64::from_le_bytes(b))
    }
    #[inline(always)]
    fn from_v4(v: V4, kind: KeyKind) -> Option<u64> {
        let (bits, len) = v.bits(kind);
        (len == 8).then_some(bits as u64)
    }
    fn unpack(&self) -> FlowKey {
        FlowKey::from_bytes(&self.to_le_bytes()).unwrap_or_default()
    }
    #[inline(always)]
    fn mix(&self, _: &Aggregator) -> u64 {
        mix64(*self)
    }
    fn take(full: &mut FullKeys) -> Vec<Block<u64>> {
        match std::mem::replace(full, FullKeys::None) {
            FullKeys::U64(v) => v,
            other => {
                *full = other;
                Vec::new()
            }
        }
    }
    fn put(full: &mut FullKeys, v: Vec<Block<u64>>) {
        *full = FullKeys::U64(v);
    }
}

/// Bytes of a u128 key: at most 15, the 16th holds the length.
const U128_MAX_LEN: usize = 15;

impl Packed for u128 {
    const PREFETCH_LINES: usize = 4;
    #[inline(always)]
    fn pack(k: &FlowKey) -> Option<u128> {
        let b = k.as_bytes();
        let n = b.len();
        // Built with integer loads, not a byte copy into a buffer: a variable-length copy is a
        // `memcpy` call whose byte stores then stall the wide load of the buffer.
        let le8 = |x: &[u8]| x.first_chunk::<8>().map_or(0, |c| u64::from_le_bytes(*c));
        let le4 = |x: &[u8]| x.first_chunk::<4>().map_or(0, |c| u32::from_le_bytes(*c));
        let lo = le8(b);
        let hi = match n {
            // The common lengths (IPv4 five- and four-tuples) as fixed loads.
            13 => u64::from(le4(&b[8..])) | u64::from(b[12]) << 32,
            12 => u64::from(le4(&b[8..])),
            n if n <= U128_MAX_LEN => {
                if n < 8 {
                    let mut x = 0u64;
                    for (i, &c) in b.iter().enumerate() {
                        x |= u64::from(c) << (8 * i);
                    }
                    return Some(u128::from(x) | (n as u128) << 120);
                }
                let mut x = 0u64;
                for (i, &c) in b[8..].iter().enumerate() {
                    x |= u64::from(c) << (8 * i);
                }
                x
            }
            _ => return None,
        };
        Some(u128::from(lo) | u128::from(hi) << 64 | (n as u128) << 120)
    }
    #[inline(always)]
    fn from_v4(v: V4, kind: KeyKind) -> Option<u128> {
        // At most 13 bytes, the rest zero: the length goes in the top byte as `pack` puts it.
        let (bits, len) = v.bits(kind);
        Some(bits | u128::from(len) << 120)
    }
    fn unpack(&self) -> FlowKey {
        let b = self.to_le_bytes();
        let n = usize::from(b[15]).min(U128_MAX_LEN);
        FlowKey::from_bytes(&b[..n]).unwrap_or_default()
    }
    #[inline(always)]
    fn mix(&self, _: &Aggregator) -> u64 {
        // Two rounds: the tail word (ports, protocol, length) is mixed before it meets the
        // addresses, so structured differences in the two halves do not cancel.
        mix64(*self as u64 ^ mix64((*self >> 64) as u64))
    }
    fn take(full: &mut FullKeys) -> Vec<Block<u128>> {
        match std::mem::replace(full, FullKeys::None) {
            FullKeys::U128(v) => v,
            other => {
                *full = other;
                Vec::new()
            }
        }
    }
    fn put(full: &mut FullKeys, v: Vec<Block<u128>>) {
        *full = FullKeys::U128(v);
    }
}

impl Packed for FlowKey {
    const PREFETCH_LINES: usize = 0;
    #[inline(always)]
    fn pack(k: &FlowKey) -> Option<FlowKey> {
        Some(*k)
    }
    #[inline(always)]
    fn from_v4(v: V4, kind: KeyKind) -> Option<FlowKey> {
        Some(v.key(kind))
    }
    fn unpack(&self) -> FlowKey {
        *self
    }
    #[inline(always)]
    fn mix(&self, agg: &Aggregator) -> u64 {
        agg.hash.hash(self)
    }
    fn take(full: &mut FullKeys) -> Vec<Block<FlowKey>> {
        match std::mem::replace(full, FullKeys::None) {
            FullKeys::Keys(v) => v,
            other => {
                *full = other;
                Vec::new()
            }
        }
    }
    fn put(full: &mut FullKeys, v: Vec<Block<FlowKey>>) {
        *full = FullKeys::Keys(v);
    }
}

/// What a fingerprint-mode batch holds: full keys, or packed IPv4 tuples standing for their
/// keys of one kind (`KeyBatch::V4`: 16 bytes a packet in, no `FlowKey` built or read).
pub(crate) trait Item: Copy {
    /// Its packed key in representation `P` (`None`: `P` cannot hold it).
    fn packed<P: Packed>(&self, kind: KeyKind) -> Option<P>;
    /// Its key (a bypass, or the `Index::Hash` of the key).
    fn key(&self, kind: KeyKind) -> FlowKey;
}

impl Item for FlowKey {
    #[inline(always)]
    fn packed<P: Packed>(&self, _: KeyKind) -> Option<P> {
        P::pack(self)
    }
    #[inline(always)]
    fn key(&self, _: KeyKind) -> FlowKey {
        *self
    }
}

impl Item for V4 {
    #[inline(always)]
    fn packed<P: Packed>(&self, kind: KeyKind) -> Option<P> {
        P::from_v4(*self, kind)
    }
    #[inline(always)]
    fn key(&self, kind: KeyKind) -> FlowKey {
        V4::key(*self, kind)
    }
}

impl Aggregator {
    /// Array and SIMD fingerprint of the packed key `r` of `k()`.
    #[inline(always)]
    fn locate<P: Packed>(&self, r: &P, k: impl FnOnce() -> FlowKey) -> (u32, u32) {
        let h = r.mix(self);
        let a = match self.index {
            Index::Modulo => self.fastmod.rem((h >> 32) as u32),
            Index::Hash => key::reduce(self.hash.hash(&k()), self.k) as u32,
        };
        (a, h as u32)
    }

    /// Fingerprint mode: `(array, fingerprint)` of `k`, or `None` if this aggregator passes
    /// it through (narrow mode, or a length its representation cannot hold). For tests.
    #[cfg(test)]
    pub(crate) fn flow_id(&self, k: &FlowKey) -> Option<(u32, u32)> {
        match &self.full {
            FullKeys::None => None,
            FullKeys::U64(_) => u64::pack(k).map(|r| self.locate(&r, || *k)),
            FullKeys::U128(_) => u128::pack(k).map(|r| self.locate(&r, || *k)),
            FullKeys::Keys(_) => FlowKey::pack(k).map(|r| self.locate(&r, || *k)),
        }
    }

    /// The fingerprint-mode batch loop, compiled once per kernel, representation and policy.
    #[inline(always)]
    pub(crate) fn wide<K: Kernel, P: Packed, const LRU: bool, T: Item>(
        &mut self,
        keys: &[T],
        kind: KeyKind,
        weights: &[u64],
        sink: &mut Sink<'_>,
    ) {
        // Out of `self` for the loop, so the lookups borrow it apart from the eviction buffer.
        let mut full = P::take(&mut self.full);
        for (c, (ks, ws)) in keys.chunks(CHUNK).zip(weights.chunks(CHUNK)).enumerate() {
            // The input keys of the next chunk (38 or 16 bytes each).
            let next = keys.as_ptr_range().start.wrapping_add((c + 1) * CHUNK);
            for l in 0..(CHUNK * std::mem::size_of::<T>()).div_ceil(64) {
                simd::prefetch_ptr(next.cast::<u8>().wrapping_add(l * 64));
            }
            self.wide_chunk::<K, P, LRU, T>(&mut full, ks, kind, ws, sink);
        }
        P::put(&mut self.full, full);
    }

    /// One chunk: pack, merge runs, locate and prefetch (pass 1); look up (pass 2).
    #[inline(always)]
    fn wide_chunk<K: Kernel, P: Packed, const LRU: bool, T: Item>(
        &mut self,
        full: &mut [Block<P>],
        ks: &[T],
        kind: KeyKind,
        ws: &[u64],
        sink: &mut Sink<'_>,
    ) {
        let mut rep = [P::default(); CHUNK];
        let mut pw = [0u64; CHUNK];
        let mut org = [0u8; CHUNK];
        let mut n = 0usize;
        for (j, (k, &w)) in ks.iter().zip(ws).take(CHUNK).enumerate() {
            match (
                k.packed::<P>(kind),
                rep.get_mut(n),
                pw.get_mut(n),
                org.get_mut(n),
            ) {
                (Some(p), Some(r), Some(x), Some(o)) => {
                    *r = p;
                    *x = w;
                    *o = j as u8;
                    n += 1;
                }
                _ => self.bypass(k.key(kind), w, sink),
            }
        }
        if n == 0 {
            return;
        }
        // Runs of equal keys, with the weight rules of narrow mode: unit weights need no sums;
        // a chunk holding a weight >= 2^32 is not merged (each such packet bypasses alone).
        let (unit, mergeable) = crate::runs::weight_rules(&pw[..n]);
        let all = u32::MAX >> (CHUNK - n);
        let mut starts = 1u32;
        if mergeable {
            for j in 1..n {
                starts |= u32::from(rep[j] != rep[j - 1]) << j;
            }
        } else {
            starts = all;
        }
        // Run list: first packet and summed weight of each run.
        let mut first = [0u8; CHUNK];
        let mut rw = [0u64; CHUNK];
        let mut runs = 0usize;
        if starts == all {
            for (j, (f, w)) in first.iter_mut().zip(rw.iter_mut()).take(n).enumerate() {
                *f = j as u8;
                *w = pw[j];
            }
            runs = n;
        } else {
            for (p, q) in crate::runs::Runs::new(starts, n) {
                let w = if unit {
                    (q - p) as u64
                } else {
                    pw[p..q].iter().sum()
                };
                first[runs & (CHUNK - 1)] = p as u8;
                rw[runs & (CHUNK - 1)] = w;
                runs += 1;
            }
        }
        let runs = runs.min(CHUNK);
        self.stats.runs += runs as u64;
        // Pass 1: flow ID, fingerprint and array of every run; prefetch the array's key,
        // value and flow-ID lines, so the chunk's cache misses overlap.
        let mut idx = [0u32; CHUNK];
        let mut fp = [0u32; CHUNK];
        let (kp, vp, fpp) = (self.keys.as_ptr(), self.vals.as_ptr(), full.as_ptr());
        for ((i, f), &p) in idx.iter_mut().zip(fp.iter_mut()).zip(&first[..runs]) {
            let j = usize::from(p) & (CHUNK - 1);
            let o = usize::from(org[j]);
            let (a, fpv) = self.locate(&rep[j], || {
                ks.get(o).map_or(FlowKey::EMPTY, |k| k.key(kind))
            });
            *i = a;
            *f = fpv;
            simd::prefetch_ptr(kp.wrapping_add(a as usize));
            simd::prefetch_ptr(vp.wrapping_add(a as usize));
            let fb = fpp.wrapping_add(a as usize).cast::<u8>();
            for l in 0..P::PREFETCH_LINES {
                simd::prefetch_ptr(fb.wrapping_add(64 * l));
            }
        }
        // One bound check per chunk (every index is a remainder `< k`; were that ever false
        // the runs would pass through unaggregated rather than index out of bounds).
        let cap = self
            .keys
            .len()
            .min(self.vals.len())
            .min(self.occ.len())
            .min(full.len());
        let max = idx[..runs].iter().fold(0u32, |m, &a| m.max(a)) as usize;
        if max >= cap {
            debug_assert!(false, "array index {max} >= {cap}");
            for (&p, &w) in first[..runs].iter().zip(&rw[..runs]) {
                self.stats.bypassed += 1;
                let k = rep[usize::from(p) & (CHUNK - 1)].unpack();
                self.emit(k, w, sink);
            }
            return;
        }
        // Pass 2: look every run up.
        for (((&a, &f), &p), &w) in idx[..runs]
            .iter()
            .zip(&fp[..runs])
            .zip(&first[..runs])
            .zip(&rw[..runs])
        {
            let r = rep[usize::from(p) & (CHUNK - 1)];
            // SAFETY: a <= max < cap, the length of `keys`, `vals`, `occ` and `full`.
            unsafe { self.one_wide::<K, P, LRU>(full, a as usize, f, r, w, sink) }
        }
    }

    /// One run. A hit whose full key matches (the common case) is the straight-line path: one
    /// 16-wide compare, one integer compare of the full key, one add.
    ///
    /// # Safety
    /// `a < self.keys.len(), self.vals.len(), self.occ.len(), full.len()`, and `K`'s CPU
    /// feature is present.
    #[inline(always)]
    unsafe fn one_wide<K: Kernel, P: Packed, const LRU: bool>(
        &mut self,
        full: &mut [Block<P>],
        a: usize,
        f: u32,
        r: P,
        w: u64,
        sink: &mut Sink<'_>,
    ) {
        let Ok(w32) = u32::try_from(w) else {
            // A weight (or a run's sum) that cannot be held: pass through.
            self.stats.bypassed += 1;
            self.emit(r.unpack(), w, sink);
            return;
        };
        // SAFETY: the caller guarantees `a` is in bounds of `occ` and `keys`, and `K`'s feature.
        let (occ, m) = unsafe {
            let occ = *self.occ.get_unchecked(a);
            (occ, K::find(self.keys.get_unchecked(a), f, occ))
        };
        if m != 0 {
            let s = (m.trailing_zeros() as usize) & (SLOTS - 1);
            // SAFETY: the caller guarantees `a` is in bounds of `full` and `vals`.
            let (fk, v) = unsafe {
                (
                    &full.get_unchecked(a).0[s],
                    &mut self.vals.get_unchecked_mut(a).0[s],
                )
            };
            if *fk == r {
                match v.checked_add(w32) {
                    Some(nv) => *v = nv,
                    None => {
                        // Never wrap a count: hand the old sum on first.
                        let old = std::mem::replace(v, w32);
                        self.emit(r.unpack(), u64::from(old), sink);
                    }
                }
                self.touch::<LRU>(a, s);
                return;
            }
        }
        self.miss_wide::<P, LRU>(full, a, s_of(m), f, r, w32, occ, sink);
    }

    /// Miss, or a fingerprint hit on another key (`m != 0`): a collision takes the colliding
    /// slot (evicting its flow: fingerprints stay unique in an array); otherwise insert into a
    /// free slot, or evict the policy's victim.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn miss_wide<P: Packed, const LRU: bool>(
        &mut self,
        full: &mut [Block<P>],
        a: usize,
        hit: Option<usize>,
        f: u32,
        r: P,
        w32: u32,
        occ: u16,
        sink: &mut Sink<'_>,
    ) {
        let (s, evict) = match hit {
            Some(s) => (s, true),
            None if occ != u16::MAX => ((!occ).trailing_zeros() as usize & (SLOTS - 1), false),
            None => (self.victim::<LRU>(a), true),
        };
        let (Some(kl), Some(vl), Some(o), Some(fb)) = (
            self.keys.get_mut(a),
            self.vals.get_mut(a),
            self.occ.get_mut(a),
            full.get_mut(a),
        ) else {
            return;
        };
        kl.0[s] = f;
        let old_k = std::mem::replace(&mut fb.0[s], r);
        let old_v = std::mem::replace(&mut vl.0[s], w32);
        *o |= 1 << s;
        self.touch::<LRU>(a, s);
        if evict {
            self.emit(old_k.unpack(), u64::from(old_v), sink);
        }
    }
}

/// The slot of a fingerprint hit.
#[inline(always)]
fn s_of(m: u32) -> Option<usize> {
    (m != 0).then(|| m.trailing_zeros() as usize & (SLOTS - 1))
}
