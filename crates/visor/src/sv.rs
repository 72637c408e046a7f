//! Algorithm 1 with a kick-out in O(log k) per flow removed instead of a pass over the table
//! (the crate's `FastPath`).
//!
//! Two observations give the same state as the paper's pass (tested against the literal
//! version, `fast::reference`, after every update of random streams):
//!
//! - **One global offset.** A pass subtracts the same `e^` from every residual and adds it to
//!   every `d` and to `E`. So store per flow `s = r + E` and `e` (the `E` at insertion): a pass is
//!   then `E += e^` alone, `r = s - E`, `d = E - e` (the decrements since insertion are exactly
//!   the growth of `E` since then), and Lemma 4.1's bounds are `lo = r + d = s - e`, `hi = s`.
//!   Insertion with `(E, v, 0)` stores `s = v + E`; line 18's `(E, v - e^, e^)` stores `s = v +
//!   E_old` with `e = E_old`. Two counters hold the paper's three exactly, which is what the
//!   byte budget counts per flow ([`crate::FastKind::entry_bytes`]).
//! - **A lazy winner tree on `s`.** COMPUTETHRESH needs the smallest residual and the two
//!   largest (kept as two entry ids, updated on every increment without a branch; recomputed
//!   by a scan only when a kick-out removes one of them, which needs nearly equal residuals).
//!   A flow is kicked out when `r <= 0`, i.e. `s <= E`. A tournament (winner) tree over the
//!   entry ids holds at each leaf the entry's `s` when last set and at each inner node the
//!   smallest child: a hit only adds to the entry's `s`, so a leaf is a lower bound of its
//!   entry's `s` and the root is the smallest leaf whatever the hits do. A kick-out looks at
//!   the root only: a stale root (its entry grew) has its leaf set to the current `s`; a fresh
//!   one is the true minimum (every entry is at least its leaf, every leaf at least the
//!   root). Large flows' leaves are never refreshed. Setting a leaf replays the log4 k matches
//!   above it, always all of them and each three selects, where a binary heap's sift stopped
//!   at a data-dependent level (about one mispredicted branch per sift; the heap this replaced
//!   measured 4-5% slower, 2026-11-25). Fan-out 4, not 2: half the levels, and a level's
//!   first two matches run in parallel (measured 6% faster than the binary tree). The tree is
//!   stored as groups of four siblings (`[Node; 4]`, one bounds check a level) and a replay
//!   carries the winner in registers, the level's other three nodes loaded, in straight-line
//!   code out of line (`replay`): in a loop, LLVM's x86 cmov conversion turned a
//!   register-carried select into a mispredicted branch (25-30% slower, tried 2026-11-25); a
//!   level is now about 30 instructions where the loop over a flat array took 48, and the
//!   bench's `overflow` stream measured 0.96x.
//!
//! So a hit is one hash, one probe and an addition (plus the two-largest selects), and a
//! kick-out is O(1) plus O(log k) per removed flow and per stale root. The index is linear
//! probing with backward-shift deletion (Knuth 6.4 Algorithm R), so removals leave no
//! tombstones, in `u8` slots up to 255 flows and `u16` below 2^16 (an eighth and a quarter
//! full in the budget's 8 bytes a flow: `Slot`), with each entry's hash and slot kept so that no key is hashed twice and a
//! removal does not probe; the new flow of a kick-out is indexed at the slot its miss found,
//! before the removals (which may empty a slot ahead of it), so it is not probed for again.
//! Nothing allocates per packet: every array is sized to k at construction.
//!
//! Tried instead of the tree and dropped (slower, 2026-11-25): a ring of unit buckets on `s`
//! over the window `(E, E + 4096]` (the removal line `E` only rises and a new flow enters at
//! most a packet above it; entries further up in this tree), with a two-level bitmap to find
//! the first non-empty bucket. The radix heap's catch (an insertion below the last minimum,
//! after a kick-out that drops its packet) does not arise when the window is anchored at `E`
//! rather than at the last minimum. Equivalent on every test, 5% fewer instructions and 15%
//! fewer mispredicted branches per kick-out, but 2-4% slower on the bench's `overflow` stream
//! and no faster on `all`: the tree's replays were a small part of a kick-out
//! (`docs/sketchvisor-results.md`).

use algo::ConfigError;
use key::{FlowKey, HashFn};

use crate::fast::{FastKind, FastStats, FastTable, Summary, Tracked};
use crate::thresh::{Thresh, DELTA};

/// An index slot: entry id + 1, or `EMPTY` (0). The index gets the byte budget's 8 bytes of
/// index per flow ([`crate::FastKind::entry_bytes`]) in slots of the narrowest width that
/// holds k: `u8` up to 255 flows (eight slots a flow, the index at most an eighth full: the
/// default 8 KB of five-tuples, 221 flows), `u16` below 2^16 (four, a quarter full), `u32`
/// otherwise (two, half full). Narrow slots make the index sparser in the same bytes: a miss
/// then meets an empty slot sooner and a removal's backward shift has less to move (the
/// hit-or-miss and cluster-end branches are the data's, mispredicted in proportion to the
/// probes). Measured on the bench's `overflow` stream (2026-11-25): `u16` 0.81x the time of
/// `u32`, `u8` about 0.97x that of `u16`.
trait Slot: Copy + Eq + std::fmt::Debug + Send + 'static {
    const EMPTY: Self;
    /// The largest k whose ids (plus one) fit.
    const MAX_K: usize;
    /// The slot of entry `id`.
    fn of(id: u32) -> Self;
    /// The entry id of a non-empty slot.
    fn id(self) -> usize;
}

/// The three widths implement [`Slot`] alike: the id plus one, 0 for empty.
macro_rules! slot {
    ($($t:ty),*) => {$(
        impl Slot for $t {
            const EMPTY: $t = 0;
            const MAX_K: usize = <$t>::MAX as usize;
            #[inline]
            fn of(id: u32) -> $t {
                (id + 1) as $t
            }
            #[inline]
            fn id(self) -> usize {
                self as usize - 1
            }
        }
    )*};
}
slot!(u8, u16, u32);

/// A tree node: an entry id and its `s` when its leaf was last set (a lower bound of the
/// entry's `s`).
#[derive(Clone, Copy, Debug)]
struct Node {
    s: u64,
    id: u32,
}

/// The leaf of an unused entry id: never the smaller child (a real `s` is a sum of
/// weights, far below).
const FREE: Node = Node { s: u64::MAX, id: 0 };

/// [`replay_levels`] of `L` levels: straight-line code, out of line, so that no loop holds
/// its selects (LLVM's x86 cmov conversion turns the selects of a loop-carried winner into
/// branches).
#[inline(never)]
fn replay<const L: usize>(t: &mut [[Node; 4]], g: usize, l: usize, w: Node, _: usize) -> Node {
    replay_levels(t, g, l, w, L)
}

/// [`replay_levels`] of any number of levels (trees past 4^8 leaves).
fn replay_any(t: &mut [[Node; 4]], g: usize, l: usize, w: Node, levels: usize) -> Node {
    replay_levels(t, g, l, w, levels)
}

/// A replay of a tree's depth, chosen once: a call through it costs a predicted indirect
/// call, where a `match` on the depth took a bounds check and a jump table every time.
type Replay = fn(&mut [[Node; 4]], usize, usize, Node, usize) -> Node;

/// Set lane `l` of group `g` to `w` and replay `levels` matches up to the root, which is
/// returned. The winner stays in registers: each level stores it, loads its three siblings
/// (their addresses depend on the position only), matches the other pair off the chain, and
/// the chain from `w` to the parent is two compares and selects; the winner's id is loaded
/// from the lane that won.
#[inline(always)]
fn replay_levels(
    t: &mut [[Node; 4]],
    mut g: usize,
    mut l: usize,
    mut w: Node,
    levels: usize,
) -> Node {
    for _ in 0..levels {
        let grp = &mut t[g];
        grp[l] = w;
        let sl = l ^ 1;
        let pair = (l & 2) ^ 2;
        let (sib, o0, o1) = (grp[sl].s, grp[pair].s, grp[pair + 1].s);
        let (o, ol) = if o1 < o0 { (o1, pair + 1) } else { (o0, pair) };
        let (m, ml) = if sib < w.s { (sib, sl) } else { (w.s, l) };
        let (ws, wl) = if o < m { (o, ol) } else { (m, ml) };
        w = Node {
            s: ws,
            id: grp[wl & 3].id,
        };
        // The parent's place (past the top, unused).
        l = g.wrapping_sub(1) & 3;
        g = g.wrapping_sub(1) >> 2;
    }
    w
}

/// SketchVisor's fast path (Algorithm 1): the table with the index slots that fit its k.
#[derive(Clone, Debug)]
pub struct FastPath(Width);

#[derive(Clone, Debug)]
enum Width {
    Tiny(Core<u8>),
    Narrow(Core<u16>),
    Wide(Core<u32>),
}

/// `$e` with `$c` bound to the table, whatever its slot width.
macro_rules! each {
    ($w:expr, $c:ident => $e:expr) => {
        match $w {
            Width::Tiny($c) => $e,
            Width::Narrow($c) => $e,
            Width::Wide($c) => $e,
        }
    };
}

impl FastPath {
    /// A fast path of `bytes` (k = [`crate::capacity`]) for keys of `key_len` bytes.
    pub fn new(bytes: usize, key_len: usize, seed: u64) -> Result<FastPath, ConfigError> {
        let k = crate::fast::check_capacity(FastKind::Sketchvisor, bytes, key_len)?;
        Ok(FastPath::with_capacity(k, seed))
    }

    /// A fast path of exactly `k >= 1` flows.
    pub fn with_capacity(k: usize, seed: u64) -> FastPath {
        FastPath::with_capacity_hash(k, HashFn::new(key::sub_seed(seed, crate::fast::SALT)))
    }

    /// [`FastPath::with_capacity`] with index slots of `bytes` bytes (at least what k needs)
    /// whatever k: the tests' way to check the wider indexes on small tables.
    #[cfg(test)]
    pub(crate) fn with_capacity_slots(k: usize, seed: u64, bytes: usize) -> FastPath {
        let hash = HashFn::new(key::sub_seed(seed, crate::fast::SALT));
        let f = FastPath::with_capacity_hash(k, hash);
        FastPath(match bytes {
            1 => return f,
            2 if k <= u16::MAX_K => Width::Narrow(Core::new(k, hash)),
            _ => Width::Wide(Core::new(k, hash)),
        })
    }

    fn with_capacity_hash(k: usize, hash: HashFn) -> FastPath {
        FastPath(if k.max(1) <= u8::MAX_K {
            Width::Tiny(Core::new(k, hash))
        } else if k.max(1) <= u16::MAX_K {
            Width::Narrow(Core::new(k, hash))
        } else {
            Width::Wide(Core::new(k, hash))
        })
    }

    pub fn len(&self) -> usize {
        each!(&self.0, c => c.n)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Algorithm 1's UPDATEBUCKET.
    ///
    /// Always inlined: it is the per-packet loop's body, and out of line (as LLVM chose behind
    /// `FastTable::update`) it also kept the key's hash out of line, a call in a call on every
    /// hit (the bench's `no_kickout` measured 0.62-0.81x of that, 2026-11-25).
    ///
    /// The key is hashed before the dispatch on the index width, so that the caller's loop
    /// holds one copy of the hash, which LLVM then inlines (one a width it left out of line;
    /// 0.97-0.99x on the bench's streams, 2026-11-25). The hash is `hash_short`, two
    /// multiplications for keys of at most 16 bytes: a miss is a branch that waits on the
    /// hash, mispredicted at about every fourth packet of the `overflow` stream, so the
    /// hash's latency is paid again at each (0.96-0.98x of xxh3 on that stream, 2026-11-25).
    /// The index's layout changes no state (the equivalence tests).
    #[inline(always)]
    pub fn update(&mut self, key: &FlowKey, v: u64) {
        let h = each!(&self.0, c => &c.hash).hash_short(key);
        each!(&mut self.0, c => c.update(key, h, v))
    }

    /// The bounds of `key`, if tracked: `(r + d, r + d + e)`.
    pub fn bounds(&self, key: &FlowKey) -> Option<(u64, u64)> {
        each!(&self.0, c => c.bounds(key))
    }

    /// `(key, e, r, d)` of every tracked flow, by entry id.
    pub fn entries(&self) -> Box<dyn Iterator<Item = (FlowKey, u64, u64, u64)> + '_> {
        each!(&self.0, c => Box::new(c.entries()))
    }
}

/// The table over index slots of type `S`.
#[derive(Clone, Debug)]
struct Core<S> {
    cap: usize,
    // Per entry id (0..cap), struct of arrays: the hit path reads `hashes`, `keys` and `s`.
    keys: Vec<FlowKey>,
    hashes: Vec<u64>,
    /// `r + E`, and one more entry, `s[cap] = 0`: the id `none` that `top` holds while the
    /// table has fewer than two flows (any real `s` exceeds it: `r > 0`).
    s: Vec<u64>,
    /// `E` at insertion.
    e: Vec<u64>,
    /// Unused entry ids.
    free: Vec<u32>,
    /// Winner tree of fan-out 4 over the entry ids, in groups of four siblings: group `g`
    /// holds the children of inner node `g` (the root is node 0, node `g`'s place is lane
    /// `(g - 1) % 4` of group `(g - 1) / 4`), each inner node the smallest of its children;
    /// leaf `id` is lane `id % 4` of group `leaf0 + id / 4` and holds the entry's `s` when last
    /// set (`FREE` for an unused id).
    tree: Vec<[Node; 4]>,
    /// The root, node 0: the entry with the smallest key.
    root: Node,
    /// The first group of leaves: the inner nodes of a complete 4-ary tree of `depth - 1`
    /// levels.
    leaf0: usize,
    /// Levels of groups: `4^depth` leaves.
    depth: u32,
    /// [`replay`] of `depth` levels.
    replay: Replay,
    /// Flows tracked.
    n: usize,
    /// Index slots: entry id + 1, or EMPTY.
    slots: Vec<S>,
    /// Per entry id, its index slot: a kick-out unindexes without probing.
    slot_of: Vec<u32>,
    mask: usize,
    hash: HashFn,
    /// Entry ids of the largest and second largest residual (`none` when absent).
    top: [u32; 2],
    /// The sentinel id, `cap`.
    none: u32,
    v: u64,
    big_e: u64,
    /// COMPUTETHRESH, its power by a polynomial when that decides the floor.
    thresh: Thresh,
    stats: FastStats,
}

impl<S: Slot> Core<S> {
    fn new(k: usize, hash: HashFn) -> Core<S> {
        let cap = k.max(1);
        // The budget's index bytes in slots of `S` (the `Slot` docs).
        let slots =
            (2 * crate::fast::INDEX_BYTES / std::mem::size_of::<S>() * cap).next_power_of_two();
        // A complete 4-ary tree: `leaves` a power of 4, `inner` nodes above them.
        let leaves = cap.next_power_of_two().max(2);
        let leaves = if leaves.trailing_zeros() % 2 == 1 {
            2 * leaves
        } else {
            leaves
        };
        let inner = (leaves - 1) / 3;
        Core {
            cap,
            keys: vec![FlowKey::EMPTY; cap],
            hashes: vec![0; cap],
            s: vec![0; cap + 1],
            e: vec![0; cap],
            free: (0..cap as u32).rev().collect(),
            tree: vec![[FREE; 4]; inner],
            root: FREE,
            leaf0: (leaves / 4 - 1) / 3,
            depth: leaves.trailing_zeros() / 2,
            replay: match leaves.trailing_zeros() / 2 {
                1 => replay::<1>,
                2 => replay::<2>,
                3 => replay::<3>,
                4 => replay::<4>,
                5 => replay::<5>,
                6 => replay::<6>,
                7 => replay::<7>,
                8 => replay::<8>,
                _ => replay_any,
            },
            n: 0,
            slots: vec![S::EMPTY; slots],
            slot_of: vec![0; cap],
            mask: slots - 1,
            hash,
            top: [cap as u32; 2],
            none: cap as u32,
            v: 0,
            big_e: 0,
            thresh: Thresh::new(DELTA),
            stats: FastStats::default(),
        }
    }

    /// Slot of `key` (`Ok`) or the empty slot where it would go (`Err`).
    #[inline]
    fn find(&self, key: &FlowKey, h: u64) -> Result<usize, usize> {
        let mut i = (h as usize) & self.mask;
        loop {
            let sl = self.slots[i];
            if sl == S::EMPTY {
                return Err(i);
            }
            let id = sl.id();
            if self.hashes[id] == h && same_key(&self.keys[id], key) {
                return Ok(i);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// [`FastPath::update`], `h` the key's hash.
    #[inline(always)]
    fn update(&mut self, key: &FlowKey, h: u64, v: u64) {
        if v == 0 {
            return;
        }
        self.stats.packets += 1;
        self.v += v; // line 6
        match self.find(key, h) {
            Ok(slot) => {
                // Lines 7-8: r += v (the leaf goes stale: module docs).
                let id = self.slots[slot].id();
                self.s[id] += v;
                self.raise_top(id as u32);
            }
            Err(slot) if self.n < self.cap => {
                // Lines 9-10: insert (E, v, 0).
                self.insert(slot, key, h, v + self.big_e, self.big_e);
            }
            Err(slot) => self.kick_out(key, h, v, slot),
        }
    }

    /// Make the root fresh (its key its entry's `s`): then it is the entry with the smallest
    /// `s`.
    #[inline]
    fn settle_root(&mut self) {
        while self.n > 0 {
            let root = self.root;
            let s = self.s[root.id as usize];
            if s == root.s {
                return;
            }
            self.set_leaf(root.id, s);
        }
    }

    /// Lines 12-19.
    #[cold]
    #[inline(never)]
    fn kick_out(&mut self, key: &FlowKey, h: u64, v: u64, slot: usize) {
        self.settle_root();
        let ee = self.big_e;
        let r = |id: u32| self.s[id as usize] - ee;
        // The k + 1 values: the residuals and v. The table is full (k >= 1), so the root and
        // the largest exist.
        let rmin = self.root.s - ee;
        let t1 = r(self.top[0]);
        // The sentinel's s is 0: no second flow counts as 0, as in the literal pass.
        let t2 = self.s[self.top[1] as usize].saturating_sub(ee);
        let (a1, a2) = if v >= t1 { (v, t1) } else { (t1, v.max(t2)) };
        let amin = v.min(rmin);
        let eh = self.thresh.get(a1, a2, amin);
        self.stats.kickouts += 1;
        let new_e = ee + eh;
        // Lines 13-16: every residual falls by eh; those at or below 0 (s <= E) go. Lines
        // 17-18 insert the new flow with (E_old, v - eh, eh), i.e. s = v - eh + E_new = v +
        // E_old > E_new: when v > eh the fresh root is removed (eh >= amin = rmin, as v > eh),
        // so the new flow takes its entry and its leaf, and one replay of the leaf's path does
        // the work of a removal and an insertion. It goes first, while the miss's empty slot
        // is still the first empty one from its home (a removal may empty one before it).
        let mut top_gone = false;
        if v > eh {
            let id = self.root.id;
            debug_assert!(self.root.s <= new_e && self.s[id as usize] == self.root.s);
            top_gone |= self.top.contains(&id);
            self.stats.evicted += 1;
            self.reuse(id, slot, key, h, v + ee, ee);
        }
        // Then the other residuals at or under the line. A root under the line may be stale:
        // refresh it and look again.
        while self.n > 0 {
            let root = self.root;
            if root.s > new_e {
                break;
            }
            let s = self.s[root.id as usize];
            if s != root.s {
                self.set_leaf(root.id, s);
                continue;
            }
            top_gone |= self.top.contains(&root.id);
            self.unindex(root.id as usize);
            self.stats.evicted += 1;
            self.remove(root.id);
        }
        self.big_e = new_e; // line 19
        if top_gone {
            self.rescan_top();
        }
    }

    /// Entry `id` becomes the new flow's (lines 17-18), indexed at `slot`, the first empty one
    /// from its home: the new key is indexed first and the old one's slot then deleted, by
    /// backward shift, which keeps every key (the new one too) reachable from its home.
    fn reuse(&mut self, id: u32, slot: usize, key: &FlowKey, h: u64, s: u64, e: u64) {
        let i = id as usize;
        let old = self.slot_of[i] as usize;
        self.keys[i] = *key;
        self.hashes[i] = h;
        self.s[i] = s;
        self.e[i] = e;
        self.slots[slot] = S::of(id);
        self.slot_of[i] = slot as u32;
        self.delete_slot(old);
        self.set_leaf(id, s);
        self.raise_top(id);
    }

    fn insert(&mut self, slot: usize, key: &FlowKey, h: u64, s: u64, e: u64) {
        let Some(id) = self.free.pop() else {
            return;
        };
        let i = id as usize;
        self.keys[i] = *key;
        self.hashes[i] = h;
        self.s[i] = s;
        self.e[i] = e;
        self.slots[slot] = S::of(id);
        self.slot_of[i] = slot as u32;
        self.set_leaf(id, s);
        self.n += 1;
        self.raise_top(id);
    }

    /// Keep `top` the two largest after `id`'s `s` grew (or `id` arrived). Selects, not
    /// branches: whether a packet's flow overtakes one of the two is data, and a hit is most
    /// packets. If `id` is already first or second its `s` equals that one's, so the strict
    /// comparisons leave it in place; first cannot also become second.
    #[inline]
    fn raise_top(&mut self, id: u32) {
        let sv = self.s[id as usize];
        let [t1, t2] = self.top;
        let above1 = sv > self.s[t1 as usize];
        let above2 = sv > self.s[t2 as usize] && id != t1;
        let second = if above2 { id } else { t2 };
        self.top = if above1 { [id, t1] } else { [t1, second] };
    }

    fn rescan_top(&mut self) {
        self.top = [self.none; 2];
        for id in 0..self.cap as u32 {
            if self.leaf(id).s != FREE.s {
                self.raise_top(id);
            }
        }
    }

    /// Drop entry `id` (already unindexed) and free it.
    fn remove(&mut self, id: u32) {
        self.set_leaf(id, FREE.s);
        self.n -= 1;
        self.free.push(id);
    }

    /// Leaf `id`.
    #[inline]
    fn leaf(&self, id: u32) -> Node {
        self.tree[self.leaf0 + id as usize / 4][id as usize % 4]
    }

    /// Set leaf `id` to `s` and replay the matches on its path to the root: a fixed number of
    /// levels with selects, no data-dependent branch (a heap's sift stops at a place the data
    /// decides, one mispredicted branch per sift at least).
    #[inline]
    fn set_leaf(&mut self, id: u32, s: u64) {
        let (g, l) = (self.leaf0 + id as usize / 4, id as usize % 4);
        let w = Node { s, id };
        let t = &mut self.tree[..];
        self.root = (self.replay)(t, g, l, w, self.depth as usize);
    }

    /// The ids of the tracked entries.
    fn live(&self) -> impl Iterator<Item = u32> + '_ {
        self.tree[self.leaf0..]
            .iter()
            .flatten()
            .take(self.cap)
            .enumerate()
            .filter(|(_, n)| n.s != FREE.s)
            .map(|(id, _)| id as u32)
    }

    /// Remove entry `id` from the index (backward-shift delete at its slot).
    fn unindex(&mut self, id: usize) {
        self.delete_slot(self.slot_of[id] as usize);
    }

    /// Knuth's Algorithm R: empty slot `i`, then move back every later entry of the cluster
    /// whose home slot is not cyclically in `(i, j]`.
    fn delete_slot(&mut self, mut i: usize) {
        self.slots[i] = S::EMPTY;
        let mut j = i;
        loop {
            j = (j + 1) & self.mask;
            let sl = self.slots[j];
            if sl == S::EMPTY {
                return;
            }
            let home = (self.hashes[sl.id()] as usize) & self.mask;
            // Stays iff home lies cyclically in (i, j].
            let stays = if i <= j {
                i < home && home <= j
            } else {
                i < home || home <= j
            };
            if !stays {
                self.slots[i] = sl;
                self.slot_of[sl.id()] = i as u32;
                self.slots[j] = S::EMPTY;
                i = j;
            }
        }
    }

    fn bounds(&self, key: &FlowKey) -> Option<(u64, u64)> {
        let h = self.hash.hash_short(key);
        self.find(key, h).ok().map(|slot| {
            let id = self.slots[slot].id();
            (self.s[id] - self.e[id], self.s[id])
        })
    }

    fn entries(&self) -> impl Iterator<Item = (FlowKey, u64, u64, u64)> + '_ {
        self.live().map(|id| {
            let i = id as usize;
            (
                self.keys[i],
                self.e[i],
                self.s[i] - self.big_e,
                self.big_e - self.e[i],
            )
        })
    }
}

/// Key equality as `FlowKey`'s, cheaper for the keys of at most 16 bytes that are the common
/// case (IPv4 five-tuples: 13): one 128-bit compare and the lengths (bytes past a key's length
/// are zero, so equal heads and lengths are equal keys).
#[inline]
fn same_key(a: &FlowKey, b: &FlowKey) -> bool {
    a.head128() == b.head128() && ((a.len() <= 16 && a.len() == b.len()) || a == b)
}

impl FastTable for FastPath {
    fn kind(&self) -> FastKind {
        FastKind::Sketchvisor
    }
    #[inline]
    fn update(&mut self, key: &FlowKey, w: u64) {
        FastPath::update(self, key, w);
    }
    fn summary(&self) -> Summary {
        each!(&self.0, c => c.summary())
    }
    fn total(&self) -> u64 {
        each!(&self.0, c => c.v)
    }
    fn decremented(&self) -> u64 {
        each!(&self.0, c => c.big_e)
    }
    fn stats(&self) -> FastStats {
        each!(&self.0, c => c.stats)
    }
    fn capacity(&self) -> usize {
        each!(&self.0, c => c.cap)
    }
    fn reset(&mut self) {
        each!(&mut self.0, c => *c = Core::new(c.cap, c.hash))
    }
    fn memory_bytes(&self) -> usize {
        each!(&self.0, c => c.memory_bytes())
    }
}

impl<S: Slot> Core<S> {
    fn summary(&self) -> Summary {
        let mut flows: Vec<Tracked> = self
            .live()
            .map(|id| {
                let i = id as usize;
                Tracked {
                    key: self.keys[i],
                    lo: self.s[i] - self.e[i],
                    hi: self.s[i],
                }
            })
            .collect();
        flows.sort_unstable_by_key(|t| t.key);
        Summary {
            flows,
            v: self.v,
            e: self.big_e,
            paths: Default::default(),
        }
    }

    fn memory_bytes(&self) -> usize {
        // Per entry: key, hash, s, e, a free-list id and its slot (4 each); the sentinel's s;
        // the winner tree (16-byte nodes); the index.
        self.cap * (std::mem::size_of::<FlowKey>() + 3 * 8 + 8)
            + 8
            + (self.tree.len() * 4 + 1) * std::mem::size_of::<Node>()
            + self.slots.len() * std::mem::size_of::<S>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The largest k of each narrow width (`u8` 255 flows, `u16` 2^16 - 1: ids up to the
    /// width's maximum minus one, slot values up to its maximum) fills and kicks out as the
    /// literal Algorithm 1 does; one more flow takes the next width. The last table, `u32`
    /// slots and a tree of 4^9 leaves, takes the replay of any depth.
    #[test]
    fn the_widest_narrow_indexes_are_algorithm_1() {
        let (k8, k16) = (u8::MAX as usize, u16::MAX as usize);
        assert!(matches!(FastPath::with_capacity(k8, 1).0, Width::Tiny(_)));
        assert!(matches!(
            FastPath::with_capacity(k8 + 1, 1).0,
            Width::Narrow(_)
        ));
        assert!(matches!(
            FastPath::with_capacity(k16, 1).0,
            Width::Narrow(_)
        ));
        assert!(matches!(
            FastPath::with_capacity(k16 + 1, 1).0,
            Width::Wide(_)
        ));
        for k in [k8, k16, k16 + 2] {
            let mut a = FastPath::with_capacity(k, 1);
            let mut b = crate::fast::reference::RefFastPath::with_capacity(k, 1);
            for i in 0..k as u32 + 300 {
                let key = FlowKey::from_u32(i);
                let w = 1 + u64::from(i % 7);
                a.update(&key, w);
                b.update(&key, w);
            }
            assert!(a.stats().kickouts > 0);
            assert_eq!(a.summary(), FastTable::summary(&b));
            assert_eq!(a.stats(), FastTable::stats(&b));
        }
    }

    #[test]
    fn same_key_is_key_equality() {
        let mut long = [9u8; 37];
        long[13..16].fill(0);
        let a = FlowKey::from_bytes(&long).unwrap();
        let short = FlowKey::from_bytes(&long[..13]).unwrap();
        long[36] = 1;
        let b = FlowKey::from_bytes(&long).unwrap();
        let keys = [
            a,
            b,
            short,
            FlowKey::from_bytes(&long[..16]).unwrap(),
            FlowKey::from_bytes(&long[..17]).unwrap(),
            FlowKey::from_u32(3),
            FlowKey::EMPTY,
        ];
        for x in &keys {
            for y in &keys {
                assert_eq!(same_key(x, y), x == y, "{x:?} {y:?}");
            }
        }
        assert_eq!(short.head128(), a.head128(), "equal heads, lengths differ");
    }
}
