//! Narrow mode: 4-byte keys as u32, end to end (the crate doc's "narrow hot path"). Per chunk:
//! the run merge, then one fused loop over the runs (locate by fastmod or hash, prefetch,
//! look up: branch-free for GRR with a SIMD kernel, branchy otherwise); evictions are buffered
//! as u32 and handed on as `KeyBatch::U32`.

use key::{FlowKey, HashFn};

use crate::runs::{weight_rules, Prefix, RunWeight, Runs, Unit};
use crate::simd::{self, Kernel, SLOTS};
use crate::{Aggregator, FastMod, Index, KeyBatch, Sink, CHUNK};

impl Aggregator {
    /// Narrow mode, u32 input: the hot loop.
    #[inline(always)]
    pub(crate) fn narrow_u32<K: Kernel, const LRU: bool>(
        &mut self,
        keys: &[u32],
        weights: &[u64],
        sink: &mut Sink<'_>,
    ) {
        for (ks, ws) in keys.chunks(CHUNK).zip(weights.chunks(CHUNK)) {
            self.narrow_chunk::<K, LRU>(ks, ws);
            if self.out_n >= self.evict_batch {
                self.drain_u32(sink);
            }
        }
    }

    /// Narrow mode, `FlowKey` input: each chunk is converted to u32 (keys of another length
    /// bypass) and runs through the same chunk loop as [`Aggregator::update_batch_u32`], so the
    /// two paths evict the same sequence.
    #[inline(always)]
    pub(crate) fn narrow_keys<K: Kernel, const LRU: bool>(
        &mut self,
        keys: &[FlowKey],
        weights: &[u64],
        sink: &mut Sink<'_>,
    ) {
        let mut u = [0u32; CHUNK];
        let mut uw = [0u64; CHUNK];
        for (c, (ks, ws)) in keys.chunks(CHUNK).zip(weights.chunks(CHUNK)).enumerate() {
            // The input keys of the next chunk (38 bytes each): a caller streaming a large
            // preloaded trace otherwise waits on their first load.
            let next = keys.as_ptr_range().start.wrapping_add((c + 1) * CHUNK);
            for l in 0..(CHUNK * std::mem::size_of::<FlowKey>()).div_ceil(64) {
                simd::prefetch_ptr(next.cast::<u8>().wrapping_add(l * 64));
            }
            let mut m = 0;
            for (k, &w) in ks.iter().zip(ws) {
                match (k.len() == 4, u.get_mut(m), uw.get_mut(m)) {
                    (true, Some(x), Some(y)) => {
                        *x = k.prefix_u32();
                        *y = w;
                        m += 1;
                    }
                    _ => self.bypass(*k, w, sink),
                }
            }
            self.narrow_chunk::<K, LRU>(&u[..m], &uw[..m]);
            if self.out_n >= self.evict_batch {
                self.drain_u32(sink);
            }
        }
    }

    /// One chunk (at most `CHUNK` packets). Runs of the same key (trains of back-to-back
    /// packets of one flow are the norm on real links; 83% of the packets of figure 5's trace
    /// repeat the previous key) are merged into one update each, found by comparing the chunk
    /// with itself shifted by one (two 16-wide compares, [`Kernel::run_starts`]). Merging
    /// consecutive packets is the aggregation itself, done in registers: without it every
    /// packet of a train waits on the store of the previous one to the same counter (a chain
    /// through memory of several cycles a packet). Then each run is located and looked up
    /// ([`Aggregator::chunk_runs`]).
    #[inline(always)]
    fn narrow_chunk<K: Kernel, const LRU: bool>(&mut self, ks: &[u32], ws: &[u64]) {
        let n = ks.len().min(ws.len()).min(CHUNK);
        let (ks, ws) = (&ks[..n], &ws[..n]);
        if n == 0 {
            return;
        }
        // The lookup indexes the chunk by run start `p < n`; a fixed-length view makes that
        // `p & (CHUNK - 1)`, free, and lets the run starts be two 16-wide compares. A short
        // chunk (the tail of a batch) is padded; no run starts in the padding.
        let pad: [u32; CHUNK];
        let ks: &[u32; CHUNK] = match <&[u32; CHUNK]>::try_from(ks) {
            Ok(k) => k,
            Err(_) => {
                let mut p = [0u32; CHUNK];
                p[..n].copy_from_slice(ks);
                pad = p;
                &pad
            }
        };
        // Run weights: unit weights (packet counting) need no sums, the weight of run [p, q)
        // is q - p; otherwise exclusive prefix sums, exact in u64 while every weight is < 2^32
        // (32 of them sum below 2^37). A chunk holding a larger weight is not merged at all, so
        // such a packet stays a run of its own and bypasses as before. A merged run whose sum
        // exceeds u32 bypasses in the lookup.
        let (unit, mergeable) = weight_rules(ws);
        let mut starts = if mergeable {
            // SAFETY: `K`'s feature is present: `run::<K>` is instantiated for a SIMD `K` only
            // inside the `run_*` entry point of that feature, which `update` calls only for the
            // backend `new` checked (the same argument as every `K::find` on this path).
            unsafe { K::run_starts(ks) }
        } else {
            u32::MAX
        };
        starts &= u32::MAX >> (CHUNK - n);
        // One table lookup per run: what the adaptive front's cost model charges (`COST`).
        self.stats.runs += u64::from(starts.count_ones());
        if unit {
            // Nothing of the weighted path runs here (no prefix sums, no table).
            self.chunk_runs::<K, LRU>(ks, n, starts, Unit);
        } else {
            self.chunk_runs::<K, LRU>(ks, n, starts, Prefix::new(ws));
        }
    }

    /// The array of a narrow key: `f % k` by fastmod, or the array hash for [`Index::Hash`].
    #[inline(always)]
    fn array_u32(index: Index, fastmod: FastMod, hash: &HashFn, k: usize, f: u32) -> usize {
        match index {
            Index::Modulo => fastmod.rem(f) as usize,
            Index::Hash => key::reduce(hash.hash_bytes(&f.to_be_bytes()), k),
        }
    }

    /// Locate and look up every run `[p, q)` of a chunk (the set bits of `starts` mark the
    /// first packets; `rw` gives the run's weight) in one pass: the run's array, then one
    /// 16-wide compare. One loop per chunk, not one to gather the runs, one to locate and
    /// prefetch and one to look up: the number of runs varies from chunk to chunk (the bursty
    /// trace averages ~6 per 32 packets), so each such loop's exit is a branch misprediction
    /// per chunk, and with no run buffers there is nothing to zero or copy. The separate
    /// prefetch pass is not needed on the branch-free lookup: nothing stops the out-of-order
    /// core from starting the next runs' loads while one run waits (the arrays, 258 KB for
    /// k = 2000, stay in L2). Measured: prefetching the next run's lines gained nothing, and a
    /// prefetch pass over chunks of 16 runs or more made shuffled traffic ~10% slower.
    ///
    /// With GRR and a SIMD kernel, hit, insert and eviction are one branch-free path
    /// ([`Aggregator::lookup_grr`]; about a quarter of the bursty trace's runs evict, at
    /// random, so a hit/miss branch mispredicts often); LRU and the scalar kernel take the
    /// branchy path ([`Aggregator::one_u32`]). Both evict the same sequence.
    #[inline(always)]
    fn chunk_runs<K: Kernel, const LRU: bool>(
        &mut self,
        ks: &[u32; CHUNK],
        n: usize,
        starts: u32,
        rw: impl RunWeight,
    ) {
        // Every index is `< k` by construction (fastmod and `reduce` return remainders); the
        // per-run check below is never taken (a predicted branch), and if it ever were, the
        // run would pass through unaggregated rather than index out of bounds.
        let cap = self.keys.len().min(self.vals.len()).min(self.occ.len());
        if LRU || K::SCALAR || self.branchy_grr {
            for (p, q) in Runs::new(starts, n) {
                let (f, w) = (ks[p & (CHUNK - 1)], rw.weight(p, q));
                let a = Self::array_u32(self.index, self.fastmod, &self.hash, self.k, f);
                if a >= cap {
                    debug_assert!(false, "array index {a} >= {cap}");
                    self.stats.bypassed += 1;
                    self.push_u32(f, w);
                    continue;
                }
                // SAFETY: a < cap, the length of `keys`, `vals` and `occ`.
                unsafe { self.one_u32::<K, LRU>(a, f, w) }
            }
        } else {
            // SAFETY: `K`'s feature is present (see `narrow_chunk`); `cap` is the least of the
            // three lengths.
            unsafe { self.lookup_grr::<K>(ks, n, starts, cap, rw) }
        }
    }

    /// GRR lookup of one chunk's runs, branch-free per run: hit, insert and eviction are one
    /// straight-line path. On a shuffled stream about one run in six misses, on the bursty
    /// trace about one in four, at random, so a branch on hit/miss (and the out-of-line miss
    /// call) cost a misprediction each; here the outcome only selects values
    /// (`select_unpredictable`, so they stay `cmov`s). The slot is the hit, else the first free
    /// slot (one `tzcnt` over both masks), else the GRR victim. The evicted (or overflowing)
    /// pair is always written to the eviction buffer and counted only when it is real; the GRR
    /// index advances only on an eviction, so the evicted sequence is exactly that of
    /// [`Aggregator::one_u32`] (tested against it). The GRR index and buffer fill live in
    /// registers for the chunk.
    ///
    /// # Safety
    /// `K`'s CPU feature is present; `cap <= self.keys.len(), self.vals.len(), self.occ.len()`.
    #[inline(always)]
    unsafe fn lookup_grr<K: Kernel>(
        &mut self,
        ks: &[u32; CHUNK],
        n: usize,
        starts: u32,
        cap: usize,
        rw: impl RunWeight,
    ) {
        // Room for one pushed pair per packet, so the buffer writes need no check per run.
        let need = self.out_n + n;
        if need > self.out_u32.len() || need > self.out_uw.len() {
            self.out_u32.resize(need, 0);
            self.out_uw.resize(need, 0);
        }
        let (index, fastmod, hash, k) = (self.index, self.fastmod, &self.hash, self.k);
        let (keys, vals, occs) = (&mut self.keys[..], &mut self.vals[..], &mut self.occ[..]);
        let (out_k, out_w) = (&mut self.out_u32[..], &mut self.out_uw[..]);
        let (mut grr, mut o) = (self.grr & (SLOTS - 1), self.out_n);
        let o0 = o;
        let mut bypassed = 0u64;
        let scratch = &mut self.scratch;
        for (p, q) in Runs::new(starts, n) {
            let (f, w) = (ks[p & (CHUNK - 1)], rw.weight(p, q));
            let a = Self::array_u32(index, fastmod, hash, k, f);
            // The value line's load waits for the key compare (its slot comes from it); start
            // fetching the line now so the two loads overlap (measured: ~1% on the bursty
            // trace, ~2% shuffled). A prefetch never faults, so it may precede the check of `a`.
            simd::prefetch_ptr(vals.as_ptr().wrapping_add(a));
            let w32 = match u32::try_from(w) {
                Ok(w32) if a < cap => w32,
                _ => {
                    // A run whose sum cannot be held (rare; a predictable branch), or an array
                    // index out of bounds (never: see `chunk_runs`): pass through, unaggregated.
                    debug_assert!(a < cap, "array index {a} >= {cap}");
                    // SAFETY: o < self.out_n + n <= the buffer lengths (resized above): at most
                    // one pair is written per run, and a chunk has at most n runs.
                    unsafe {
                        *out_k.get_unchecked_mut(o) = f;
                        *out_w.get_unchecked_mut(o) = w;
                    }
                    o += 1;
                    bypassed += 1;
                    continue;
                }
            };
            // SAFETY: a < cap <= the lengths of `occs`, `keys` and `vals`, and `K`'s feature
            // (both the caller's contract); `o` is in bounds of the
            // buffers as above.
            unsafe {
                let occ = occs.get_unchecked_mut(a);
                let oc = *occ;
                let m = K::find(keys.get_unchecked(a), f, oc);
                // Hit (bits 0-15) else first free slot (bits 16-31); 0 only for an eviction,
                // which takes the GRR slot. `evict` does not depend on `grr`, so the GRR
                // index's chain from packet to packet is one add.
                let cand = m | (u32::from(!oc) << SLOTS);
                let hit = m != 0;
                let evict = cand == 0;
                let s = std::hint::select_unpredictable(
                    evict,
                    grr,
                    cand.trailing_zeros() as usize & (SLOTS - 1),
                );
                let kl = &mut keys.get_unchecked_mut(a).0[s];
                let vl = &mut vals.get_unchecked_mut(a).0[s];
                let (old_k, old_v) = (*kl, *vl);
                let (sum, over) = old_v.overflowing_add(w32);
                let merge = hit & !over;
                // Never wrap a count: an overflowing hit hands the old sum on first.
                let push = evict | (hit & over);
                let nv = std::hint::select_unpredictable(merge, sum, w32);
                *vl = nv;
                // A hit stores its key to a scratch word, not the key line: a 4-byte store into
                // the line makes the next 64-byte compare of the same array (hot arrays come
                // back within a few packets) wait for the store to commit, as a store cannot be
                // forwarded into a wider load.
                let kp: *mut u32 =
                    std::hint::select_unpredictable(hit, &raw mut *scratch, kl as *mut u32);
                *kp = f;
                *occ = oc | (1 << s);
                *out_k.get_unchecked_mut(o) = old_k;
                *out_w.get_unchecked_mut(o) = u64::from(old_v);
                o += usize::from(push);
                grr = (grr + usize::from(evict)) & (SLOTS - 1);
            }
        }
        self.grr = grr;
        self.out_n = o;
        self.stats.evicted += (o - o0) as u64;
        self.stats.bypassed += bypassed;
    }

    /// One packet. Hits (the common case on skewed traffic) are the straight-line path: one
    /// 16-wide compare, one add.
    ///
    /// # Safety
    /// `a < self.keys.len(), self.vals.len(), self.occ.len()`, and `K`'s CPU feature is present.
    #[inline(always)]
    unsafe fn one_u32<K: Kernel, const LRU: bool>(&mut self, a: usize, f: u32, w: u64) {
        let Ok(w32) = u32::try_from(w) else {
            // A weight that cannot be held: pass through, unaggregated.
            self.stats.bypassed += 1;
            self.push_u32(f, w);
            return;
        };
        // SAFETY: the caller guarantees `a` is in bounds of `occ` and `keys`, and `K`'s feature.
        let (occ, m) = unsafe {
            let occ = *self.occ.get_unchecked(a);
            (occ, K::find(self.keys.get_unchecked(a), f, occ))
        };
        if m != 0 {
            let s = (m.trailing_zeros() as usize) & (SLOTS - 1);
            // SAFETY: the caller guarantees `a` is in bounds of `vals`.
            let v = unsafe { &mut self.vals.get_unchecked_mut(a).0[s] };
            match v.checked_add(w32) {
                Some(nv) => *v = nv,
                None => {
                    // Never wrap a count: hand the old sum on first.
                    let old = std::mem::replace(v, w32);
                    self.push_u32(f, u64::from(old));
                }
            }
            self.touch::<LRU>(a, s);
        } else {
            self.miss_u32::<LRU>(a, f, w32, occ);
        }
    }

    /// Miss: insert into a free slot, or evict the policy's victim and take its slot.
    #[inline(never)]
    fn miss_u32<const LRU: bool>(&mut self, a: usize, f: u32, w32: u32, occ: u16) {
        if occ != u16::MAX {
            let s = (!occ).trailing_zeros() as usize & (SLOTS - 1);
            if let (Some(kl), Some(vl), Some(o)) = (
                self.keys.get_mut(a),
                self.vals.get_mut(a),
                self.occ.get_mut(a),
            ) {
                kl.0[s] = f;
                vl.0[s] = w32;
                *o = occ | (1 << s);
            }
            self.touch::<LRU>(a, s);
        } else {
            let s = self.victim::<LRU>(a);
            if let (Some(kl), Some(vl)) = (self.keys.get_mut(a), self.vals.get_mut(a)) {
                let old = std::mem::replace(&mut kl.0[s], f);
                let v = std::mem::replace(&mut vl.0[s], w32);
                self.touch::<LRU>(a, s);
                self.push_u32(old, u64::from(v));
            }
        }
    }

    /// Append one update to the narrow buffer (drained by the chunk loop, so it never grows
    /// past `evict_batch + CHUNK`; if it somehow did, it grows rather than drop the update).
    #[inline(always)]
    pub(crate) fn push_u32(&mut self, key: u32, w: u64) {
        let n = self.out_n;
        match (self.out_u32.get_mut(n), self.out_uw.get_mut(n)) {
            (Some(k), Some(x)) => {
                *k = key;
                *x = w;
            }
            _ => {
                self.out_u32.resize(n + 1, 0);
                self.out_uw.resize(n + 1, 0);
                self.out_u32[n] = key;
                self.out_uw[n] = w;
            }
        }
        self.out_n = n + 1;
        self.stats.evicted += 1;
    }

    /// Hand on every whole batch of `evict_batch` narrow updates; keep the remainder.
    #[inline(never)]
    pub(crate) fn drain_u32(&mut self, sink: &mut Sink<'_>) {
        let (b, n) = (self.evict_batch, self.out_n);
        let mut start = 0;
        while n - start >= b {
            sink(
                KeyBatch::U32(&self.out_u32[start..start + b]),
                &self.out_uw[start..start + b],
            );
            start += b;
        }
        if start > 0 {
            self.out_u32.copy_within(start..n, 0);
            self.out_uw.copy_within(start..n, 0);
            self.out_n = n - start;
        }
    }
}
