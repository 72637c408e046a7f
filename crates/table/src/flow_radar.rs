//! FlowRadar (Li et al., NSDI'16), exactly as ALGORITHMS.md section 3: a Bloom "flow filter"
//! of `bf_bits` bits and `bf_hashes` hashes, and an invertible counting table of `cells` cells
//! {FlowXOR, FlowCount, PacketCount} split into `cell_hashes` sub-tables, one per hash, so a key
//! never hits the same cell twice (which would cancel its XOR; the artifacts share one array).
//!
//! Update(x, w): test-and-set x's filter bits; if any was 0 (x is new), XOR x into FlowXOR and
//! add 1 to FlowCount of x's cells. Always add `w` to PacketCount of x's cells. A weighted update
//! therefore equals `w` unit updates (the flow is inserted once): linear, as long as the filter
//! has no false positive. A false positive (a new flow whose bits were all set) never enters the
//! flow set: it is lost to the decode, its packets inflate the flows sharing its cells, and which
//! flows it hits depends on arrival order (class C).
//!
//! Cells are co-located words: `kw` words of FlowXOR (the packed key, `crate::packed`, so keys
//! of every length up to `ctx.key_len` decode with their length), FlowCount, PacketCount. The
//! counters use wrapping arithmetic: the table is a linear map over Z/2^64, so peeling stays
//! exact even if a byte counter wrapped.
//!
//! Hashing: one xxh3-64 `h` per key. Filter bits use Kirsch-Mitzenmacher double hashing
//! `g_i = h + i·(mix64(h) | 1)` (ESA'06: the false-positive rate is unchanged). The cells do
//! NOT: with double hashing two keys whose two base values nearly agree share *all* their
//! cells, a 2-key stopping set with probability ~n²/m² instead of ~n²/m^k, which we measured
//! (4 cells left undecoded at n = 0.7 x 4096 cells). Cell `j` is `reduce(mix64(h ^ salt_j))`
//! instead: a splitmix remix of the one hash per sub-table, so keys with different `h` get
//! independent-looking cells at the price of one `mix64` (a few multiplies) per sub-table.
//!
//! Decoding is SingleDecode (peeling): [`FlowRadar::decode`] returns the decoded flows and the
//! number of cells it could not peel ([`Decoded::undecoded_cells`], 0 iff the decode is
//! complete), cached until the next update. Tasks are answered from the decode; cardinality is
//! `sum FlowCount / cell_hashes`, exact up to filter false positives, without decoding.
//!
//! Epoch costs follow the epoch's work: `algo::Dirty` maps record the 64-byte blocks of the
//! filter and the table that updates wrote, so reset zeroes only those, the count sum reads only
//! the written cells, and a decode of a sparsely written table peels a compact copy of the
//! written cells instead of cloning the whole table (1 ms epochs of a few packets must not pay
//! for 8 MiB).

use std::cell::OnceCell;

use algo::{Algorithm, BuildCtx, ConfigError, Dirty, Estimate, MergeError, Task};
use key::{FlowKey, HashFn, HashInput, KeyMap};
use serde::{Deserialize, Serialize};

use crate::{packed, Dropped, NotState};

const NAME: &str = "flow_radar";
/// Distinct sub-seed constant of this algorithm ("flowrad").
const SEED_TAG: u64 = 0x666c_6f77_7261_6400;
/// Most sub-tables (cell hashes) per key.
const MAX_CELL_HASHES: usize = 8;
/// Per-sub-table salts of the cell remix: j x the golden-ratio constant (mod 2^64), j = 1..=8;
/// any distinct constants would do.
const CELL_SALTS: [u64; MAX_CELL_HASHES] = [
    0x9E37_79B9_7F4A_7C15,
    0x3C6E_F372_FE94_F82A,
    0xDAA6_6D2C_7DDF_743F,
    0x78DD_E6E5_FD29_F054,
    0x1715_609F_7C74_6C69,
    0xB54C_DA58_FBBE_E87E,
    0x5384_5412_7B09_6493,
    0xF1BB_CDCB_FA53_E0A8,
];

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FlowRadarConfig {
    /// Cells of the counting table, all sub-tables together. Must be a multiple of
    /// `cell_hashes`. Default 90,112: 3.7 MiB with 5-tuple keys and the filter (issue 12's 4 MiB
    /// per instance), decoding up to about 69 k flows, past which it warns (`caveats`);
    /// Agg-Evict 4.1's artifact has 262,144 cells of 12 bytes (4 MiB with its filter); `--preset
    /// agg-evict` gives the same 4 MiB as 131,072 of our 24-byte cells (4-byte keys).
    pub cells: usize,
    /// Hashes (= sub-tables) of the counting table (default 4).
    pub cell_hashes: usize,
    /// Bits of the flow filter. Default: one third of the counting table's memory (Agg-Evict
    /// 4.1), i.e. `cells x cell bytes x 8 / 3` bits, rounded up to a multiple of 64.
    pub bf_bits: Option<usize>,
    /// Hashes of the flow filter (default 4).
    pub bf_hashes: usize,
}

impl Default for FlowRadarConfig {
    fn default() -> Self {
        FlowRadarConfig {
            cells: 90_112,
            cell_hashes: 4,
            bf_bits: None,
            bf_hashes: 4,
        }
    }
}

impl FlowRadarConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_CELL_HASHES).contains(&self.cell_hashes) {
            return Err(crate::invalid(NAME, "cell_hashes", "must be in 1..=8"));
        }
        if self.cells == 0 || self.cells > 1 << 32 || self.cells % self.cell_hashes != 0 {
            return Err(crate::invalid(
                NAME,
                "cells",
                "must be a positive multiple of cell_hashes, at most 2^32",
            ));
        }
        if !(1..=32).contains(&self.bf_hashes) {
            return Err(crate::invalid(NAME, "bf_hashes", "must be in 1..=32"));
        }
        if let Some(b) = self.bf_bits {
            if b == 0 || b > 1 << 40 {
                return Err(crate::invalid(NAME, "bf_bits", "must be in 1..=2^40"));
            }
        }
        Ok(())
    }
}

/// The result of peeling a FlowRadar table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decoded {
    flows: KeyMap<u64>,
    undecoded_cells: usize,
    stray_cells: usize,
}

impl Decoded {
    /// Decoded flows and their packet (or byte) counts. Exact when the filter had no false
    /// positive; otherwise a flow sharing a cell with a false-positive flow may be inflated.
    pub fn flows(&self) -> &KeyMap<u64> {
        &self.flows
    }

    /// Cells still holding flows after peeling (FlowCount != 0). Zero iff every flow of the
    /// flow set was decoded; positive once the table is past its peeling threshold
    /// (n > ~0.77 x cells with 4 hashes).
    pub fn undecoded_cells(&self) -> usize {
        self.undecoded_cells
    }

    /// Cells with FlowCount 0 but PacketCount != 0 after peeling: packets of flows the filter
    /// mistook for known ones (false positives), or of undecodable cells' neighbours.
    pub fn stray_packet_cells(&self) -> usize {
        self.stray_cells
    }

    /// True when every cell was peeled.
    pub fn is_complete(&self) -> bool {
        self.undecoded_cells == 0
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowRadar {
    hash: HashFn,
    bf_hashes: usize,
    cell_hashes: usize,
    sub_len: usize,
    /// Key words per cell.
    kw: usize,
    /// Words per cell: FlowXOR (kw), FlowCount, PacketCount.
    stride: usize,
    bf_bits: usize,
    bf: Vec<u64>,
    table: Vec<u64>,
    /// Blocks of `bf` and `table` written since the last reset.
    bf_dirty: Dirty,
    table_dirty: Dirty,
    /// Keys longer than the table's key length (cannot be XOR-ed in; counted, not stored).
    rejected: Dropped,
    #[serde(skip)]
    cache: NotState<OnceCell<Decoded>>,
}

impl algo::CheckState for FlowRadar {
    /// The shape valid (the configuration it implies, a filter of whole words, a key's words
    /// and the cell stride they make), both arrays and their dirty maps of that shape. The peel
    /// itself is bounded whatever the cells hold (a cell's count only falls, so it becomes pure
    /// once at most).
    fn check_state(&self) -> Result<(), String> {
        let cfg = FlowRadarConfig {
            cells: self.sub_len.saturating_mul(self.cell_hashes),
            cell_hashes: self.cell_hashes,
            bf_bits: Some(self.bf_bits),
            bf_hashes: self.bf_hashes,
        };
        cfg.validate().map_err(|e| e.to_string())?;
        if self.kw == 0 || self.kw > packed::MAX_WORDS || self.stride != self.kw + 2 {
            return Err(format!(
                "cells of {} words with keys of {}",
                self.stride, self.kw
            ));
        }
        let (words, cells) = (self.bf_bits / 64, cfg.cells * self.stride);
        if self.bf_bits % 64 != 0 || self.bf.len() != words || self.table.len() != cells {
            return Err(format!(
                "a filter of {} words and {} cell words, the shape has {words} and {cells}",
                self.bf.len(),
                self.table.len()
            ));
        }
        self.bf_dirty.check(words, 8)?;
        self.table_dirty.check(cells, 8)
    }
}

impl FlowRadar {
    /// Validate `cfg` for `ctx` and return (u64 words per cell, filter bits).
    fn shape(cfg: &FlowRadarConfig, ctx: &BuildCtx) -> Result<(usize, usize), ConfigError> {
        cfg.validate()?;
        if ctx.key_len > key::MAX_KEY_LEN {
            return Err(crate::invalid(
                NAME,
                "key_len",
                "longer than the longest key",
            ));
        }
        let stride = packed::words(ctx.key_len) + 2;
        // cells <= 2^32, stride <= 7 and bf_bits <= 2^40 (validated): no overflow.
        let bf_bits = cfg
            .bf_bits
            .unwrap_or((cfg.cells * stride * 64).div_ceil(3))
            .next_multiple_of(64);
        Ok((stride, bf_bits))
    }

    pub fn new(cfg: FlowRadarConfig, ctx: &BuildCtx) -> Result<FlowRadar, ConfigError> {
        let (stride, bf_bits) = Self::shape(&cfg, ctx)?;
        let kw = stride - 2;
        Ok(FlowRadar {
            hash: HashFn::new(key::sub_seed(ctx.seed, SEED_TAG)),
            bf_hashes: cfg.bf_hashes,
            cell_hashes: cfg.cell_hashes,
            sub_len: cfg.cells / cfg.cell_hashes,
            kw,
            stride,
            bf_bits,
            bf: vec![0; bf_bits / 64],
            table: vec![0; cfg.cells * stride],
            bf_dirty: Dirty::new(bf_bits / 64, 8),
            table_dirty: Dirty::new(cfg.cells * stride, 8),
            rejected: Dropped::default(),
            cache: NotState(OnceCell::new()),
        })
    }

    /// Cells of the counting table.
    pub fn cells(&self) -> usize {
        self.sub_len * self.cell_hashes
    }

    /// Cells each flow updates (`k` of the counting table).
    pub fn cell_hashes(&self) -> usize {
        self.cell_hashes
    }

    /// The PacketCount field of every cell, in cell order: the linear part of the counting
    /// table (each update adds its weight to `cell_hashes` cells), which SketchVisor's recovery
    /// sees (RECOVERY.md 3).
    pub fn packet_counts(&self) -> impl ExactSizeIterator<Item = u64> + '_ {
        self.table
            .chunks_exact(self.stride)
            .map(move |c| c[self.kw + 1])
    }

    /// Bits of the flow filter.
    pub fn bf_bits(&self) -> usize {
        self.bf_bits
    }

    /// Updates of keys longer than the configured key length (not stored).
    pub fn rejected(&self) -> Dropped {
        self.rejected
    }

    /// Flows in the flow set, `sum FlowCount / cell_hashes` (true flows minus filter false
    /// positives).
    pub fn flows_inserted(&self) -> f64 {
        let s: f64 = self
            .written_cells()
            .map(|i| self.table[i * self.stride + self.kw] as i64 as f64)
            .sum();
        s / self.cell_hashes as f64
    }

    /// Cells an update or merge wrote since the last reset, ascending (every other cell is
    /// zero).
    fn written_cells(&self) -> impl Iterator<Item = usize> + '_ {
        let cells = self.cells();
        self.table_dirty
            .items(self.stride)
            .take_while(move |&i| i < cells)
    }

    /// Peel the table (SingleDecode); cached until the next change.
    pub fn decode(&self) -> &Decoded {
        self.cache.0.get_or_init(|| self.decode_now())
    }

    #[inline]
    fn probes(h: u64) -> (u64, u64) {
        (h, key::mix64(h) | 1)
    }

    #[inline]
    fn bf_bit(&self, a: u64, b: u64, i: usize) -> usize {
        key::reduce(a.wrapping_add((i as u64).wrapping_mul(b)), self.bf_bits)
    }

    #[inline]
    fn cell(&self, h: u64, j: usize) -> usize {
        let g = key::mix64(h ^ CELL_SALTS[j % MAX_CELL_HASHES]);
        j * self.sub_len + key::reduce(g, self.sub_len)
    }

    fn cells_of(&self, key: &FlowKey) -> [usize; MAX_CELL_HASHES] {
        let h = self.hash.hash(key);
        let mut out = [usize::MAX; MAX_CELL_HASHES];
        for (j, o) in out.iter_mut().enumerate().take(self.cell_hashes) {
            *o = self.cell(h, j);
        }
        out
    }

    fn invalidate(&mut self) {
        if self.cache.0.get().is_some() {
            self.cache.0 = OnceCell::new();
        }
    }

    #[inline]
    fn update_hashed(&mut self, key: &FlowKey, h: u64, w: u64) {
        let (mut bits, mut cells) = ([0usize; 32], [0usize; MAX_CELL_HASHES]);
        self.locate(h, &mut bits, &mut cells);
        self.update_at(key, &bits, &cells, w);
        self.invalidate();
    }

    /// Filter bit and table cell indices of hash `h` (`bf_hashes` and `cell_hashes` of them).
    #[inline(always)]
    fn locate(&self, h: u64, bits: &mut [usize; 32], cells: &mut [usize; MAX_CELL_HASHES]) {
        let (a, b) = Self::probes(h);
        for (i, bit) in bits.iter_mut().enumerate().take(self.bf_hashes) {
            *bit = self.bf_bit(a, b, i);
        }
        for (j, c) in cells.iter_mut().enumerate().take(self.cell_hashes) {
            *c = self.cell(h, j);
        }
    }

    /// The update of `key` whose filter bits and cells [`Self::locate`] found (the cache is the
    /// caller's to invalidate).
    #[inline(always)]
    fn update_at<K: HashInput>(
        &mut self,
        key: &K,
        bits: &[usize; 32],
        cells: &[usize; MAX_CELL_HASHES],
        w: u64,
    ) {
        let mut new = false;
        for &bit in &bits[..self.bf_hashes] {
            let (word, mask) = (bit >> 6, 1u64 << (bit & 63));
            let x = &mut self.bf[word];
            if *x & mask == 0 {
                new = true;
                *x |= mask;
                self.bf_dirty.mark(word);
            }
        }
        // Only a new flow touches FlowXOR, so only then is the key packed.
        let p = if new {
            packed::pack(&key.to_key())
        } else {
            [0; packed::MAX_WORDS]
        };
        let (kw, stride) = (self.kw, self.stride);
        for &i in &cells[..self.cell_hashes] {
            let c = &mut self.table[i * stride..(i + 1) * stride];
            // One mark per cell, on its first word; reset zeroes whole cells.
            self.table_dirty.mark(i * stride);
            if new {
                for (x, y) in c.iter_mut().zip(&p[..kw]) {
                    *x ^= y;
                }
                c[kw] = c[kw].wrapping_add(1);
            }
            c[kw + 1] = c[kw + 1].wrapping_add(w);
        }
    }

    /// Hash a chunk, prefetch every filter word and cell it will touch, then update: the loads
    /// of different keys overlap (4 MiB of filter and table are beyond L2). Indices are computed
    /// once, in the first pass.
    #[inline(always)]
    fn add_batch<K: HashInput>(&mut self, keys: &[K], weights: &[u64]) {
        const B: usize = crate::BATCH;
        let mut bits = [[0usize; 32]; B];
        let mut cells = [[0usize; MAX_CELL_HASHES]; B];
        for (ks, ws) in keys.chunks(B).zip(weights.chunks(B)) {
            for ((k, b), c) in ks.iter().zip(bits.iter_mut()).zip(cells.iter_mut()) {
                let h = k.hash_by(&self.hash);
                self.locate(h, b, c);
                for &bit in &b[..self.bf_hashes] {
                    crate::prefetch(&self.bf, bit >> 6);
                }
                for &i in &c[..self.cell_hashes] {
                    crate::prefetch(&self.table, i * self.stride);
                }
            }
            for (((k, &w), b), c) in ks.iter().zip(ws).zip(&bits).zip(&cells) {
                if w == 0 {
                    continue;
                }
                if packed::fits_len(k.key_len(), self.kw) {
                    self.update_at(k, b, c, w);
                } else {
                    self.rejected.add(w);
                }
            }
        }
        self.invalidate();
    }

    fn decode_now(&self) -> Decoded {
        let written: Vec<usize> = self.written_cells().collect();
        // Peel a compact copy of the written cells when they are few (a short epoch); if the
        // peel reaches a cell outside it (possible only with inconsistent state, e.g. merged
        // overlapping flow sets), peel the whole table instead, which gives the same answer.
        if written.len() < self.cells() / 4 {
            if let Some(d) = self.peel(&written, true) {
                return d;
            }
        }
        self.peel(&written, false)
            .expect("a whole-table peel reaches every cell")
    }

    /// SingleDecode over a working copy: of the `written` cells only (`compact`, cells located
    /// by binary search; `None` if the peel leaves them) or of the whole table. Pure cells are
    /// taken in the same order either way, so both give the same answer.
    fn peel(&self, written: &[usize], compact: bool) -> Option<Decoded> {
        let (kw, stride) = (self.kw, self.stride);
        let mut t: Vec<u64> = if compact {
            written
                .iter()
                .flat_map(|&i| &self.table[i * stride..(i + 1) * stride])
                .copied()
                .collect()
        } else {
            self.table.clone()
        };
        let at = |cell: usize| -> Option<usize> {
            if compact {
                written.binary_search(&cell).ok()
            } else {
                Some(cell)
            }
        };
        let mut pure: Vec<usize> = written
            .iter()
            .copied()
            .filter(|&i| at(i).is_some_and(|p| t[p * stride + kw] == 1))
            .collect();
        let mut flows: KeyMap<u64> = KeyMap::default();
        while let Some(i) = pure.pop() {
            let pi = at(i)?;
            let c = &t[pi * stride..(pi + 1) * stride];
            if c[kw] != 1 {
                continue;
            }
            // A pure cell holds exactly one key; one that does not unpack, or does not hash
            // back to this cell, comes from inconsistent state (e.g. merging overlapping flow
            // sets) and is left undecoded.
            let Some(key) = packed::unpack(&c[..kw]) else {
                continue;
            };
            let idx = self.cells_of(&key);
            let idx = &idx[..self.cell_hashes];
            if !idx.contains(&i) {
                continue;
            }
            let count = c[kw + 1];
            let e = flows.entry(key).or_insert(0);
            *e = e.wrapping_add(count);
            let p = packed::pack(&key);
            for &j in idx {
                let pj = at(j)?;
                let d = &mut t[pj * stride..(pj + 1) * stride];
                for (x, y) in d.iter_mut().zip(&p[..kw]) {
                    *x ^= y;
                }
                d[kw] = d[kw].wrapping_sub(1);
                d[kw + 1] = d[kw + 1].wrapping_sub(count);
                if d[kw] == 1 {
                    pure.push(j);
                }
            }
        }
        // Only written cells can be non-zero after peeling (the peel touches cells of keys
        // found in written cells, and those keys' cells were written with them).
        let mut undecoded_cells = 0;
        let mut stray_cells = 0;
        for c in t.chunks_exact(stride) {
            if c[kw] != 0 {
                undecoded_cells += 1;
            } else if c[kw + 1] != 0 {
                stray_cells += 1;
            }
        }
        Some(Decoded {
            flows,
            undecoded_cells,
            stray_cells,
        })
    }

    fn same_shape(&self, o: &FlowRadar) -> bool {
        self.hash == o.hash
            && self.bf_hashes == o.bf_hashes
            && self.cell_hashes == o.cell_hashes
            && self.sub_len == o.sub_len
            && self.kw == o.kw
            && self.bf_bits == o.bf_bits
    }

    fn decoded_entries(&self) -> impl Iterator<Item = Estimate> + '_ {
        self.decode().flows.iter().map(|(k, &c)| (*k, c))
    }
}

/// Everything a flow set answers.
const TASKS: &[Task] = crate::exact::TASKS;

impl crate::exact::FlowSet for FlowRadar {
    fn flows(&self) -> impl Iterator<Item = Estimate> + '_ {
        self.decoded_entries()
    }

    fn count_of(&self, key: &FlowKey) -> Option<u64> {
        self.decode().flows.get(key).copied()
    }

    fn flow_count(&self) -> f64 {
        self.flows_inserted()
    }
}

impl Algorithm for FlowRadar {
    fn name(&self) -> &'static str {
        NAME
    }

    fn tasks(&self) -> &'static [Task] {
        TASKS
    }

    #[inline]
    fn update(&mut self, key: &FlowKey, weight: u64) {
        if weight == 0 {
            return;
        }
        if !packed::fits(key, self.kw) {
            self.rejected.add(weight);
            return;
        }
        let h = self.hash.hash(key);
        self.update_hashed(key, h, weight);
    }

    fn update_batch(&mut self, keys: &[FlowKey], weights: &[u64]) {
        self.add_batch(keys, weights);
    }

    /// 4-byte keys as u32: the same state as [`Self::update_batch`] of their `FlowKey`s (same
    /// hash, `key::HashInput`), without building a `FlowKey` for the hash.
    fn update_batch_u32(&mut self, keys: &[u32], weights: &[u64]) {
        self.add_batch(keys, weights);
    }

    fn reset(&mut self) {
        self.bf_dirty.clear_in(&mut self.bf);
        self.table_dirty
            .clear_items_in(&mut self.table, self.stride);
        self.rejected = Dropped::default();
        self.invalidate();
    }

    fn memory_bytes(&self) -> usize {
        (self.bf.len() + self.table.len()) * 8
            + self.bf_dirty.memory_bytes()
            + self.table_dirty.memory_bytes()
    }

    crate::exact::flow_set_queries!(FlowRadar);

    /// Past its capacity (about 0.77 flows a cell with 4 hashes) the peel stops: the flows left
    /// in undecoded cells are missing from every answer.
    fn caveats(&self, _task: Task, _threshold: Option<u64>, _total: u64) -> Vec<algo::Caveat> {
        let d = self.decode();
        if d.is_complete() {
            return Vec::new();
        }
        let flows = self.flows_inserted();
        let per = self.cell_hashes as u64;
        let cells = ((flows * 1.3).ceil() as u64).div_ceil(per) * per;
        vec![algo::Caveat {
            parameter: "cells",
            message: format!(
                "decoded {} of about {flows:.0} flows; {} of {} cells could not be peeled and \
                 their flows are missing from the answer",
                d.flows().len(),
                d.undecoded_cells(),
                self.cells()
            ),
            suggestion: format!("cells = {cells} (1.3 x the flows)"),
        }]
    }

    /// OR the filters, add the counts and XOR the keys. Exact only for disjoint flow sets (e.g.
    /// per-core sharding by flow hash): a flow present in both is XOR-ed out of its cells and
    /// its FlowCount doubled, leaving those cells undecodable. Same shape and seed required.
    fn merge(&mut self, other: &dyn Algorithm) -> Result<(), MergeError> {
        let o = algo::merge_peer(self, other, |o| self.same_shape(o))?;
        for (x, y) in self.bf.iter_mut().zip(&o.bf) {
            *x |= y;
        }
        let kw = self.kw;
        for (c, d) in self
            .table
            .chunks_exact_mut(self.stride)
            .zip(o.table.chunks_exact(o.stride))
        {
            for (x, y) in c[..kw].iter_mut().zip(&d[..kw]) {
                *x ^= y;
            }
            c[kw] = c[kw].wrapping_add(d[kw]);
            c[kw + 1] = c[kw + 1].wrapping_add(d[kw + 1]);
        }
        self.bf_dirty.merge(&o.bf_dirty);
        self.table_dirty.merge(&o.table_dirty);
        self.rejected.merge(&o.rejected);
        self.invalidate();
        Ok(())
    }
}

/// This algorithm's facts, listed in the `catalog` crate.
pub const ENTRY: algo::Entry = algo::Entry {
    name: NAME,
    tasks: TASKS,
    fit: algo::KeyFit::AtMost,
    build: |p, ctx| algo::build_with(NAME, p, |c| FlowRadar::new(c, ctx)),
    // Exact: the flow filter (`bf_bits / 8`), `cells` cells of `8 * (2 + key words)` bytes and
    // their written-block maps, allocated at construction.
    memory: |p, ctx| {
        algo::Entry::memory_with(NAME, p, |c: FlowRadarConfig| {
            let (stride, bf_bits) = FlowRadar::shape(&c, ctx)?;
            let cells = algo::Entry::product(NAME, "cells", &[c.cells as u64, stride as u64, 8])?;
            let dirty = algo::Dirty::bytes_for(bf_bits / 64, 8)
                + algo::Dirty::bytes_for(c.cells * stride, 8);
            algo::Entry::sum(NAME, "bf_bits", &[bf_bits as u64 / 8, cells, dirty])
        })
    },
    defaults: algo::defaults_of::<FlowRadarConfig>,
    flow_size_only: "",
    resets_to_empty: true,
    save: algo::save_state::<FlowRadar>,
    load: |b| algo::load_state::<FlowRadar>(NAME, b),
    // ns per update, u32 / FlowKey path: `cargo run --release -p catalog --example update_costs`.
    cost: algo::UpdateCost {
        u32_ns: 25.81,
        wide_ns: 34.45,
        behind: 1.25,
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::{rank_key, truth, zipf_keys};

    fn radar(cells: usize, bf_bits: Option<usize>, seed: u64, key_len: usize) -> FlowRadar {
        let ctx = BuildCtx {
            seed,
            key_len,
            ..BuildCtx::default()
        };
        let cfg = FlowRadarConfig {
            cells,
            bf_bits,
            ..Default::default()
        };
        FlowRadar::new(cfg, &ctx).unwrap()
    }

    /// A Zipf stream over exactly `n` distinct keys (every rank appears at least once).
    fn stream(n: usize, len: usize, seed: u64) -> Vec<FlowKey> {
        let mut keys: Vec<FlowKey> = (0..n as u32).map(rank_key).collect();
        keys.extend(zipf_keys(len, n, 1.1, seed));
        keys
    }

    fn as_map(d: &Decoded) -> KeyMap<u64> {
        d.flows().iter().map(|(k, &c)| (*k, c)).collect()
    }

    #[test]
    fn decodes_every_flow_below_threshold() {
        // n < 0.7 x cells with k = 4.
        for seed in [1, 2, 3] {
            let keys = stream(2_850, 60_000, seed);
            let t = truth(&keys);
            let mut fr = radar(4_096, None, seed, 4);
            fr.update_batch(&keys, &vec![1; keys.len()]);
            assert_eq!(
                fr.cardinality(),
                Some(t.len() as f64),
                "filter false positive"
            );
            let d = fr.decode();
            assert!(
                d.is_complete(),
                "seed {seed}: {} cells left",
                d.undecoded_cells()
            );
            assert_eq!(d.stray_packet_cells(), 0);
            assert_eq!(as_map(d), t);
            // The tasks, from the exact decode.
            let hh = fr.heavy_hitters(100).unwrap();
            assert_eq!(hh.len(), t.values().filter(|&&c| c >= 100).count());
            // Distribution and entropy written out here, not with `algo`'s helpers that
            // FlowRadar's own answers use.
            let largest = *t.values().max().unwrap() as usize;
            let mut fsd = vec![0.0; largest + 1];
            for &c in t.values() {
                fsd[c as usize] += 1.0;
            }
            assert_eq!(fr.flow_size_distribution(), Some(fsd));
            let n: u64 = t.values().sum();
            let h: f64 = -t
                .values()
                .map(|&c| {
                    let p = c as f64 / n as f64;
                    p * p.log2()
                })
                .sum::<f64>();
            assert!((fr.entropy().unwrap() - h).abs() < 1e-9);
            assert_eq!(fr.top_k(1).unwrap()[0].1, *t.values().max().unwrap());
            assert_eq!(fr.flow_size(&keys[0]), t.get(&keys[0]).copied());
        }
    }

    #[test]
    fn five_tuples_and_shorter_keys_decode_with_their_length() {
        let mut fr = radar(1_024, None, 9, 13);
        let mut t = KeyMap::default();
        for i in 0..500u32 {
            let mut b = [0u8; 13];
            b[..4].copy_from_slice(&i.to_be_bytes());
            b[12] = 6;
            let k = if i % 5 == 0 {
                FlowKey::from_u32(i)
            } else {
                FlowKey::from_bytes(&b).unwrap()
            };
            fr.update(&k, u64::from(i) + 1);
            t.insert(k, u64::from(i) + 1);
        }
        let long = FlowKey::from_bytes(&[7; 16]).unwrap();
        fr.update(&long, 3);
        assert_eq!(
            fr.rejected(),
            Dropped {
                updates: 1,
                weight: 3
            }
        );
        assert!(fr.decode().is_complete());
        assert_eq!(as_map(fr.decode()), t);
    }

    #[test]
    fn degrades_gracefully_past_threshold() {
        // 1.2 x cells flows with a filter large enough to have no false positive: peeling
        // stalls, the decode says so, and whatever it recovers is exact.
        let keys = stream(4_900, 50_000, 4);
        let t = truth(&keys);
        let mut fr = radar(4_096, Some(1 << 22), 4, 4);
        fr.update_batch(&keys, &vec![1; keys.len()]);
        assert_eq!(fr.cardinality(), Some(t.len() as f64));
        let d = fr.decode();
        assert!(d.undecoded_cells() > 0);
        assert!(d.flows().len() < t.len());
        for (k, c) in d.flows() {
            assert_eq!(t.get(k), Some(c), "{k}");
        }
        // A tiny filter: many false positives. No panic; decoded keys are real keys (a pure
        // cell's FlowXOR is exact), and the flow set undercounts.
        let mut small = radar(4_096, Some(2_048), 5, 4);
        small.update_batch(&keys[..20_000], &vec![1; 20_000]);
        let t2 = truth(&keys[..20_000]);
        let card = small.cardinality().unwrap();
        assert!(card < t2.len() as f64);
        for k in small.decode().flows().keys() {
            assert!(t2.contains_key(k));
        }
    }

    #[test]
    fn weighted_batch_and_seed_equalities() {
        let keys = stream(1_500, 20_000, 6);
        let w: Vec<u64> = (0..keys.len() as u64).map(|i| 1 + i % 7).collect();
        let (mut unit, mut agg, mut batch) = (
            radar(4_096, None, 6, 4),
            radar(4_096, None, 6, 4),
            radar(4_096, None, 6, 4),
        );
        for (k, &wi) in keys.iter().zip(&w) {
            for _ in 0..wi {
                unit.update(k, 1);
            }
            agg.update(k, wi);
        }
        batch.update_batch(&keys, &w);
        assert_eq!(unit, agg);
        assert_eq!(agg, batch);
        // The u32 path (4-byte keys as big-endian u32), in uneven chunks, leaves the same state.
        let us: Vec<u32> = keys
            .iter()
            .map(|k| u32::from_be_bytes(*k.as_bytes().first_chunk().unwrap()))
            .collect();
        let mut u = radar(4_096, None, 6, 4);
        for r in testkit::uneven(us.len(), &[1, 31, 32, 33, 100]) {
            u.update_batch_u32(&us[r.clone()], &w[r]);
        }
        assert_eq!(u, agg);
        // Serialized state is equal too (the decode cache is not state).
        let _ = agg.decode();
        assert_eq!(
            serde_json::to_string(&agg).unwrap(),
            serde_json::to_string(&unit).unwrap()
        );
        let mut other = radar(4_096, None, 7, 4);
        other.update_batch(&keys, &w);
        assert_ne!(other.table, agg.table);
        agg.reset();
        assert_eq!(agg, radar(4_096, None, 6, 4));
        assert!(agg.decode().flows().is_empty());
    }

    /// The compact peel (written cells only) and the whole-table peel give the same decode, in
    /// a short epoch, a full one, past the peeling threshold, and on inconsistent state
    /// (overlapping flow sets merged); reset leaves a fresh table, written-block maps included.
    #[test]
    fn compact_peel_equals_whole_table_peel() {
        let fresh = radar(65_536, None, 6, 13);
        for n in [1usize, 30, 3_000, 20_000] {
            let keys = stream(n, 4 * n, 13);
            let mut fr = fresh.clone();
            fr.update_batch(&keys, &vec![1; keys.len()]);
            let written: Vec<usize> = fr.written_cells().collect();
            // Each of the 4 cells of a flow marks at most 2 blocks of at most 3 cells each.
            assert!(written.len() <= 4 * 2 * 3 * n, "{n}");
            let whole = fr.peel(&written, false).unwrap();
            assert!(whole.flows() == &truth(&keys).into_iter().collect(), "{n}");
            match fr.peel(&written, true) {
                Some(compact) => assert!(compact == whole, "{n}"),
                None => panic!("consistent state must peel within the written cells"),
            }
            assert!(fr.decode() == &whole);
            assert_eq!(fr.flows_inserted(), n as f64);
            fr.reset();
            assert_eq!(fr, fresh);
        }
        let over = stream(20_000, 60_000, 13);
        let mut fr = radar(4_096, Some(1 << 22), 6, 13);
        fr.update_batch(&over, &vec![1; over.len()]);
        let written: Vec<usize> = fr.written_cells().collect();
        assert!(!fr.decode().is_complete());
        assert!(fr.peel(&written, true) == fr.peel(&written, false));
        // Overlapping sets merged: shared flows cancel out of their cells.
        let keys = stream(50, 200, 13);
        let (mut a, mut b) = (fresh.clone(), fresh.clone());
        a.update_batch(&keys, &vec![1; keys.len()]);
        b.update_batch(&keys[..100], &vec![1; 100]);
        a.merge(&b).unwrap();
        let written: Vec<usize> = a.written_cells().collect();
        let whole = a.peel(&written, false).unwrap();
        if let Some(compact) = a.peel(&written, true) {
            assert_eq!(compact, whole);
        }
        assert_eq!(a.decode(), &whole);
    }

    #[test]
    fn merge_of_disjoint_sets_decodes_the_union() {
        let keys = stream(2_000, 40_000, 8);
        // Shard by key, as per-core RSS would: disjoint flow sets.
        let (mut a, mut b, mut whole) = (
            radar(4_096, None, 8, 4),
            radar(4_096, None, 8, 4),
            radar(4_096, None, 8, 4),
        );
        for k in &keys {
            if k.prefix_u32() % 2 == 0 {
                a.update(k, 1);
            } else {
                b.update(k, 1);
            }
            whole.update(k, 1);
        }
        let _ = a.decode();
        a.merge(&b).unwrap();
        assert_eq!(as_map(a.decode()), truth(&keys));
        // Without filter false positives the merge is the whole-stream table, bit for bit.
        assert_eq!(a, whole);
        let c = radar(2_048, None, 8, 4);
        assert_eq!(a.merge(&c), Err(MergeError::Mismatch(NAME)));
        // Heavy changers: union of two decodes. The epoch before holds the same keys with
        // half the traffic (another draw), so changes go both ways and reach thousands. Sizes
        // before and after come from exact counts, not from the FlowRadars under test.
        let earlier = stream(2_000, 20_000, 9);
        let mut before_radar = radar(4_096, None, 8, 4);
        before_radar.update_batch(&earlier, &vec![1; earlier.len()]);
        let hc = whole.heavy_changers(&before_radar, 200).unwrap();
        let (now, before) = (truth(&keys), truth(&earlier));
        let change = |k: &FlowKey| {
            now.get(k)
                .copied()
                .unwrap_or(0)
                .abs_diff(before.get(k).copied().unwrap_or(0))
        };
        for (k, d) in &hc {
            assert_eq!(*d, change(k), "{k}");
            assert!(*d >= 200);
        }
        let want = now.keys().chain(before.keys()).filter(|k| change(k) >= 200);
        let want: std::collections::BTreeSet<&FlowKey> = want.collect();
        assert!(want.len() > 5, "{}", want.len());
        assert_eq!(hc.len(), want.len());
    }

    /// Exact cell counts on hand-made states. A false positive by construction (the filter
    /// filled with ones before flow y arrives): y's packets land in its 4 cells without a
    /// FlowCount, 4 stray cells, and x decodes alone. A flow in both halves of a merge: its key
    /// XOR-ed out of its 4 cells, FlowCount 2 in each, 4 undecoded cells and no flow.
    #[test]
    fn stray_and_undecoded_cells_by_hand() {
        let (x, y) = (FlowKey::from_u32(1), FlowKey::from_u32(2));
        let mut fr = radar(1_024, None, 3, 4);
        let (cx, cy) = (fr.cells_of(&x), fr.cells_of(&y));
        assert!(
            cx[..4].iter().all(|c| !cy[..4].contains(c)),
            "pick keys with disjoint cells"
        );
        fr.update(&x, 3);
        fr.bf.iter_mut().for_each(|w| *w = u64::MAX);
        fr.update(&y, 5);
        let d = fr.decode();
        assert_eq!(d.stray_packet_cells(), 4);
        assert_eq!(d.undecoded_cells(), 0);
        assert!(d.is_complete());
        assert_eq!(as_map(d), [(x, 3)].into_iter().collect());
        assert_eq!(fr.flows_inserted(), 1.0);
        assert!(fr.caveats(Task::FlowSize, None, 8).is_empty());

        let mut a = radar(1_024, None, 3, 4);
        a.update(&x, 3);
        let b = a.clone();
        a.merge(&b).unwrap();
        let d = a.decode();
        assert_eq!(d.undecoded_cells(), 4);
        assert_eq!(d.stray_packet_cells(), 0);
        assert!(!d.is_complete());
        assert!(d.flows().is_empty());
        assert_eq!(a.flows_inserted(), 2.0);
    }

    /// Past the peeling threshold the caveat names the cells: 1.3 x the flows in the flow set,
    /// rounded up to a multiple of the cell hashes (4,900 flows: 6,370, so 6,372).
    #[test]
    fn caveat_names_the_cells_that_would_decode() {
        let keys = stream(4_900, 20_000, 4);
        let mut fr = radar(4_096, Some(1 << 22), 4, 4);
        fr.update_batch(&keys, &vec![1; keys.len()]);
        assert_eq!(fr.flows_inserted(), 4_900.0);
        let d = fr.decode();
        assert!(!d.is_complete());
        let c = fr.caveats(Task::HeavyHitters, Some(100), keys.len() as u64);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].parameter, "cells");
        assert_eq!(c[0].suggestion, "cells = 6372 (1.3 x the flows)");
        let want = format!(
            "decoded {} of about 4900 flows; {} of 4096 cells could not be peeled",
            d.flows().len(),
            d.undecoded_cells()
        );
        assert!(c[0].message.starts_with(&want), "{}", c[0].message);
    }
}
