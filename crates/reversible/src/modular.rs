//! Modular hashing, key mangling and reverse hashing: the machinery that makes a sketch
//! reversible (Schweller et al., "Reversible Sketches", ToN'07 sections III-IV; ALGORITHMS.md 4).
//! Shared by [`crate::RevSketch`] and the host part of [`crate::TwoLevel`].
//!
//! Layout. A key of K = 32 or 64 bits (4- or 8-byte keys) is first *mangled* by a seeded
//! bijection, then cut into q = K/8 one-byte words, most significant first. Row i has one hash
//! per word, `h_{i,j}: byte -> s_j bits`, and the bucket index is the concatenation
//! `h_{i,0}(u_0) ‖ h_{i,1}(u_1) ‖ … ‖ h_{i,q-1}(u_{q-1})` (word 0 in the high bits), so the index
//! has b = Σ s_j = log2(width) bits. The b bits are spread as evenly as possible: s_j = b/q, the
//! first `b mod q` words get one more bit. 4-byte keys with 65536 buckets: 4 words x 4 bits
//! (Agg-Evict's setting); with 4096 buckets: 4 x 3 bits (OpenSketch / SketchVisor TwoLevel);
//! 8-byte keys with 65536 buckets: 8 words x 2 bits.
//!
//! Word hashes. `h_{i,j}(u) = π_{i,j}(u) >> (8 - s_j)` with π a seeded random permutation of the
//! 256 byte values (Fisher-Yates driven by `key::HashFn`). Like the reference
//! `((a·u) mod 256) >> (8-s)` it gives every sub-index exactly 2^(8-s) preimages, so the inverse table of a
//! sub-index is a slice of π^-1 and reverse hashing enumerates exactly the consistent words; unlike
//! the multiplicative form its low sub-index bits are not linear in the low word bits. The
//! tables are tiny (rows x q x 256 u32, 16 KB for 4 x 4) and sit in L1 on the update path, so
//! an update costs q table loads per row and no hash call.
//!
//! Mangling. Address words are strongly correlated (many keys share a /24), which would put
//! many heavy keys in buckets sharing sub-indices and multiply false candidates. The ToN paper
//! multiplies by a random element of GF(2^32); we use the cheaper bijection ALGORITHMS.md
//! suggests, multiplication by an odd constant mod 2^K, wrapped in xor-shifts by K/2 so the high
//! words also reach the low words (a multiply alone only carries low bits upward). Every step is
//! invertible: `x ^= x >> (K/2)` is an involution and an odd multiplier has an inverse mod 2^K.
//!
//! Reverse hashing (ToN IV). Given the heavy buckets of each row, grow key prefixes one word at a
//! time. A prefix carries, per row, the concatenated sub-indices of its words; it is kept while
//! at least H - r rows still have a heavy bucket starting with those bits (a bitset per row and
//! prefix length answers that in O(1)). A row that fails is *missed* for good, which is the
//! paper's "consistent in >= H - r rows" rule applied to the intersection B_i(P·u) = B_i(P) ∩
//! B_i(u). When no further miss is allowed the next word is drawn from the inverse table of one
//! remaining row instead of all 256 values. The number of live prefixes is capped, so a
//! pathological stream (every bucket heavy) costs at most `cap x 256 x H` table probes per word.

use key::{sub_seed, HashFn};
use serde::{Deserialize, Serialize};

/// Most rows a modular hash (and the sketches using it) may have; the row-miss mask is a u32 and
/// the batch paths keep per-row indices on the stack.
pub const MAX_ROWS: usize = 16;
/// Largest index width in bits (2^24 buckets per row, 64 MB of u32 counters per row).
pub const MAX_INDEX_BITS: u32 = 24;

/// The modular hash of one reversible structure: mangling bijection, per-row word tables and their
/// inverses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModularHash {
    key_bits: u32,
    index_bits: u32,
    rows: usize,
    words: usize,
    /// s_j: sub-index bits of word j.
    sub_bits: Vec<u8>,
    /// Where word j's sub-index sits in the index: b - (s_0 + … + s_j).
    shifts: Vec<u8>,
    /// Mangling multipliers (odd) and their inverses mod 2^64.
    mul: [u64; 2],
    inv: [u64; 2],
    /// `fwd[(i*q + j)*256 + u] = h_{i,j}(u) << shifts[j]`.
    fwd: Vec<u32>,
    /// `inv_perm[(i*q + j)*256 + v] = π_{i,j}^-1(v)`; the preimages of sub-index y are the slice
    /// `v in y << (8-s_j) .. (y+1) << (8-s_j)`.
    inv_perm: Vec<u8>,
}

/// Why a modular layout cannot be built (the callers turn this into `ConfigError::Invalid`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("keys of {0} bytes are not supported (reverse hashing supports 4- and 8-byte keys)")]
    KeyLen(usize),
    #[error("must be a power of two 2^b with {min} <= b <= {max} for {words} one-byte key words (got {got})")]
    Width {
        min: u32,
        max: u32,
        words: usize,
        got: usize,
    },
    #[error("must be between 1 and {MAX_ROWS} (got {0})")]
    Rows(usize),
}

/// Result of reverse hashing: the recovered (unmangled) keys as big-endian integers, and whether
/// the candidate cap cut the search short (then keys may be missing).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reversal {
    pub keys: Vec<u64>,
    pub truncated: bool,
}

fn odd_inverse(a: u64) -> u64 {
    // Newton's iteration for the inverse mod 2^64: a*a ≡ 1 (mod 8) for odd a, and each step
    // doubles the number of correct low bits (3, 6, 12, 24, 48, 96).
    let mut x = a;
    for _ in 0..5 {
        x = x.wrapping_mul(2u64.wrapping_sub(a.wrapping_mul(x)));
    }
    x
}

impl ModularHash {
    /// A layout for `key_len`-byte keys, `rows` rows of `width` buckets, seeded by `seed`.
    pub fn new(seed: u64, key_len: usize, rows: usize, width: usize) -> Result<Self, LayoutError> {
        if key_len != 4 && key_len != 8 {
            return Err(LayoutError::KeyLen(key_len));
        }
        if rows == 0 || rows > MAX_ROWS {
            return Err(LayoutError::Rows(rows));
        }
        let words = key_len;
        // Every word needs at least one sub-index bit (else it is not constrained at all) and at
        // most eight (a byte has only 256 values).
        let min = words as u32;
        let max = (8 * words as u32).min(MAX_INDEX_BITS);
        let b = width.trailing_zeros();
        if !width.is_power_of_two() || b < min || b > max {
            return Err(LayoutError::Width {
                min,
                max,
                words,
                got: width,
            });
        }
        let (base, rem) = (b / words as u32, b % words as u32);
        let sub_bits: Vec<u8> = (0..words as u32)
            .map(|j| (base + u32::from(j < rem)) as u8)
            .collect();
        let mut shifts = Vec::with_capacity(words);
        let mut used = 0u32;
        for &s in &sub_bits {
            used += u32::from(s);
            shifts.push((b - used) as u8);
        }
        let mut fwd = vec![0u32; rows * words * 256];
        let mut inv_perm = vec![0u8; rows * words * 256];
        for t in 0..rows * words {
            let j = t % words;
            let hf = HashFn::new(sub_seed(seed, 1 + t as u64));
            let mut perm: [u8; 256] = std::array::from_fn(|u| u as u8);
            for k in (1..256usize).rev() {
                let r = key::reduce(hf.hash_bytes(&(k as u64).to_le_bytes()), k + 1);
                perm.swap(k, r);
            }
            let s = u32::from(sub_bits[j]);
            for (u, &p) in perm.iter().enumerate() {
                fwd[t * 256 + u] = (u32::from(p) >> (8 - s)) << shifts[j];
                inv_perm[t * 256 + usize::from(p)] = u as u8;
            }
        }
        let mul = [
            sub_seed(seed, 0x4d41_4e47) | 1,
            sub_seed(seed, 0x4d41_4e48) | 1,
        ];
        Ok(ModularHash {
            key_bits: 8 * key_len as u32,
            index_bits: b,
            rows,
            words,
            sub_bits,
            shifts,
            mul,
            inv: [odd_inverse(mul[0]), odd_inverse(mul[1])],
            fwd,
            inv_perm,
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn width(&self) -> usize {
        1usize << self.index_bits
    }

    pub fn key_bits(&self) -> u32 {
        self.key_bits
    }

    /// Sub-index bits per word (the documented layout).
    pub fn sub_bits(&self) -> &[u8] {
        &self.sub_bits
    }

    #[inline]
    fn mask(&self) -> u64 {
        if self.key_bits >= 64 {
            u64::MAX
        } else {
            (1u64 << self.key_bits) - 1
        }
    }

    /// The mangling bijection on K-bit integers.
    #[inline]
    pub fn mangle(&self, x: u64) -> u64 {
        let (h, m) = (self.key_bits / 2, self.mask());
        let mut x = x & m;
        x ^= x >> h;
        x = x.wrapping_mul(self.mul[0]) & m;
        x ^= x >> h;
        x = x.wrapping_mul(self.mul[1]) & m;
        x ^ (x >> h)
    }

    /// Inverse of [`Self::mangle`].
    #[inline]
    pub fn unmangle(&self, y: u64) -> u64 {
        let (h, m) = (self.key_bits / 2, self.mask());
        let mut y = y & m;
        y ^= y >> h;
        y = y.wrapping_mul(self.inv[1]) & m;
        y ^= y >> h;
        y = y.wrapping_mul(self.inv[0]) & m;
        y ^ (y >> h)
    }

    /// Bucket index of an already mangled key in row `row` (`row < rows`).
    #[inline]
    pub fn index(&self, row: usize, mangled: u64) -> usize {
        let q = self.words;
        let base = row * q * 256;
        // 4-byte keys (the papers' source addresses): the row's four word tables as one array,
        // so the four lookups are unrolled with no bounds check (the general loop below was a
        // quarter of rev_sketch's update, issue 14). Same value as the loop.
        if q == 4 {
            if let Some(t) = self
                .fwd
                .get(base..base + 1024)
                .and_then(|t| <&[u32; 1024]>::try_from(t).ok())
            {
                let u = |j: u32| ((mangled >> (8 * (3 - j))) & 0xff) as usize;
                return (t[u(0)] | t[256 + u(1)] | t[512 + u(2)] | t[768 + u(3)]) as usize;
            }
        }
        self.index_words(row, mangled)
    }

    /// [`Self::index`] for any word count, one lookup per word.
    fn index_words(&self, row: usize, mangled: u64) -> usize {
        let q = self.words;
        let base = row * q * 256;
        let mut idx = 0u32;
        for j in 0..q {
            let u = ((mangled >> (8 * (q - 1 - j))) & 0xff) as usize;
            // `get` keeps a bad row number from panicking; the callers pass row < rows.
            idx |= self.fwd.get(base + j * 256 + u).copied().unwrap_or(0);
        }
        idx as usize
    }

    /// Reverse hashing: all keys (as unmangled integers) whose bucket is in `heavy[i]` (sorted or
    /// not, indices `< width`) for at least `rows - misses` rows, exploring at most `cap` live
    /// prefixes per word.
    pub fn reverse(&self, heavy: &[Vec<u32>], misses: usize, cap: usize) -> Reversal {
        let (rows, q) = (self.rows, self.words);
        if heavy.len() != rows || misses >= rows || cap == 0 {
            return Reversal::default();
        }
        // bits[i*q + j]: prefix values of words 0..=j (L_{j+1} = b - shifts[j] bits) that start
        // some heavy bucket of row i.
        let mut bits: Vec<Vec<u64>> = Vec::with_capacity(rows * q);
        for hv in heavy {
            for &sh in &self.shifts {
                let len = 1usize << (self.index_bits - u32::from(sh));
                let mut set = vec![0u64; len.div_ceil(64)];
                for &bk in hv {
                    let p = (bk as usize) >> sh;
                    if let Some(w) = set.get_mut(p >> 6) {
                        *w |= 1 << (p & 63);
                    }
                }
                bits.push(set);
            }
        }
        let has = |t: usize, p: usize| -> bool {
            bits.get(t)
                .and_then(|s| s.get(p >> 6))
                .is_some_and(|w| (w >> (p & 63)) & 1 == 1)
        };

        let mut start_miss = 0u32;
        for (i, hv) in heavy.iter().enumerate() {
            if hv.is_empty() {
                start_miss |= 1 << i;
            }
        }
        if start_miss.count_ones() as usize > misses {
            return Reversal::default();
        }
        let mut vals: Vec<u64> = vec![0];
        let mut cs: Vec<u32> = vec![0; rows];
        let mut miss: Vec<u32> = vec![start_miss];
        let mut truncated = false;
        let mut nc = [0u32; MAX_ROWS];

        for j in 0..q {
            let s = u32::from(self.sub_bits[j]);
            let sh = self.shifts[j];
            let (mut nvals, mut ncs, mut nmiss) = (Vec::new(), Vec::new(), Vec::new());
            // Try word value u after prefix p; push the extended prefix if it survives.
            let mut try_word = |p: usize, u: usize, nvals: &mut Vec<u64>| -> bool {
                let m0 = miss[p];
                let mut nm = m0;
                for i in 0..rows {
                    if (nm >> i) & 1 == 1 {
                        nc[i] = 0;
                        continue;
                    }
                    let t = i * q + j;
                    let sub = self.fwd.get(t * 256 + u).copied().unwrap_or(0) >> sh;
                    let v = (cs[p * rows + i] << s) | sub;
                    if has(t, v as usize) {
                        nc[i] = v;
                    } else {
                        nm |= 1 << i;
                        if nm.count_ones() as usize > misses {
                            return false;
                        }
                    }
                }
                nvals.push((vals[p] << 8) | u as u64);
                ncs.extend_from_slice(&nc[..rows]);
                nmiss.push(nm);
                true
            };
            'prefixes: for p in 0..vals.len() {
                let m0 = miss[p];
                if m0.count_ones() as usize == misses {
                    // No miss left: every surviving row must match, so draw u from the inverse
                    // table of the first surviving row.
                    let Some(i0) = (0..rows).find(|&i| (m0 >> i) & 1 == 0) else {
                        continue;
                    };
                    let t = i0 * q + j;
                    let span = 1usize << (8 - s);
                    for y in 0..1u32 << s {
                        if !has(t, ((cs[p * rows + i0] << s) | y) as usize) {
                            continue;
                        }
                        let from = t * 256 + y as usize * span;
                        for k in from..from + span {
                            let u = usize::from(self.inv_perm.get(k).copied().unwrap_or(0));
                            if nvals.len() >= cap {
                                truncated = true;
                                break 'prefixes;
                            }
                            try_word(p, u, &mut nvals);
                        }
                    }
                } else {
                    for u in 0..256 {
                        if nvals.len() >= cap {
                            truncated = true;
                            break 'prefixes;
                        }
                        try_word(p, u, &mut nvals);
                    }
                }
            }
            vals = nvals;
            cs = ncs;
            miss = nmiss;
            if vals.is_empty() {
                break;
            }
        }
        Reversal {
            keys: vals.into_iter().map(|v| self.unmangle(v)).collect(),
            truncated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mangle_is_a_bijection() {
        for key_len in [4usize, 8] {
            let m = ModularHash::new(7, key_len, 4, 65536).unwrap();
            let mut x = 0x0123_4567_89ab_cdefu64;
            for _ in 0..10_000 {
                x = key::mix64(x);
                let k = if key_len == 4 { x & 0xffff_ffff } else { x };
                assert_eq!(m.unmangle(m.mangle(k)), k);
                assert!(m.mangle(k) <= m.mask());
            }
        }
        // Exhaustive on a 2^16 slice of the 32-bit space: no two keys collide.
        let m = ModularHash::new(9, 4, 4, 65536).unwrap();
        let mut seen = std::collections::HashSet::new();
        for k in 0..65536u64 {
            assert!(seen.insert(m.mangle(k << 8)));
        }
    }

    #[test]
    fn unrolled_index_equals_the_word_loop() {
        for (key_len, width) in [(4usize, 65536usize), (4, 16), (4, 1 << 20), (8, 65536)] {
            let m = ModularHash::new(9, key_len, 4, width).unwrap();
            let mut x = 0x0123_4567_89ab_cdefu64;
            for _ in 0..5_000 {
                x = key::mix64(x);
                let k = if key_len == 4 { x & 0xffff_ffff } else { x };
                let mk = m.mangle(k);
                for row in 0..4 {
                    assert_eq!(m.index(row, mk), m.index_words(row, mk));
                    assert!(m.index(row, mk) < width);
                }
            }
        }
    }

    #[test]
    fn layout_and_balanced_preimages() {
        let m = ModularHash::new(1, 4, 4, 65536).unwrap();
        assert_eq!(m.sub_bits(), &[4, 4, 4, 4]);
        assert_eq!(
            ModularHash::new(1, 4, 2, 4096).unwrap().sub_bits(),
            &[3, 3, 3, 3]
        );
        assert_eq!(
            ModularHash::new(1, 8, 4, 65536).unwrap().sub_bits(),
            &[2; 8]
        );
        assert_eq!(
            ModularHash::new(1, 4, 2, 1 << 10).unwrap().sub_bits(),
            &[3, 3, 2, 2]
        );
        for t in 0..16 {
            let mut counts = [0u32; 16];
            for u in 0..256 {
                counts[(m.fwd[t * 256 + u] >> m.shifts[t % 4]) as usize] += 1;
            }
            assert!(counts.iter().all(|&c| c == 16));
        }
        assert!(ModularHash::new(1, 13, 4, 65536).is_err());
        assert!(ModularHash::new(1, 4, 4, 4000).is_err());
        assert!(ModularHash::new(1, 4, 0, 65536).is_err());
        assert!(ModularHash::new(1, 4, 4, 1 << 25).is_err());
    }

    #[test]
    fn reverse_finds_planted_buckets() {
        for (key_len, rows, misses) in [(4usize, 4usize, 1usize), (4, 2, 0), (8, 4, 0)] {
            let m = ModularHash::new(11, key_len, rows, 65536).unwrap();
            let keys: Vec<u64> = (0..8u64).map(|i| key::mix64(i + 100) & m.mask()).collect();
            let mut heavy = vec![Vec::new(); rows];
            for &k in &keys {
                let mk = m.mangle(k);
                for (i, h) in heavy.iter_mut().enumerate() {
                    h.push(m.index(i, mk) as u32);
                }
            }
            let r = m.reverse(&heavy, misses, 1 << 16);
            assert!(!r.truncated);
            for k in &keys {
                assert!(r.keys.contains(k), "key_len {key_len}: missing {k:x}");
            }
            // Every candidate really is consistent in >= rows - misses rows.
            for &c in &r.keys {
                let mc = m.mangle(c);
                let ok = (0..rows)
                    .filter(|&i| heavy[i].contains(&(m.index(i, mc) as u32)))
                    .count();
                assert!(ok + misses >= rows);
            }
        }
    }

    #[test]
    fn reverse_is_capped() {
        // Every bucket heavy: the search must stop at the cap, not enumerate 2^32 keys.
        let m = ModularHash::new(3, 4, 4, 65536).unwrap();
        let heavy = vec![(0..65536u32).collect::<Vec<_>>(); 4];
        let r = m.reverse(&heavy, 1, 1000);
        assert!(r.truncated);
        assert!(r.keys.len() <= 1000);
    }
}
