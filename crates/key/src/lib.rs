//! Flow keys and the hash family.
//!
//! One key type, [`FlowKey`], is used by every stage after parsing: ground truth, algorithms,
//! accelerators and reports. A key is the network-byte-order concatenation of the fields its
//! [`KeyKind`] selects; its length tells the kind and the address family apart, so an IPv4 key and
//! an IPv6 key can never be equal:
//!
//! | kind         | IPv4 bytes | IPv6 bytes | layout                                  |
//! |--------------|-----------:|-----------:|-----------------------------------------|
//! | `src`        | 4          | 16         | src                                     |
//! | `dst`        | 4          | 16         | dst                                     |
//! | `pair`       | 8          | 32         | src, dst                                |
//! | `four_tuple` | 12         | 36         | src, dst, sport, dport                  |
//! | `five_tuple` | 13         | 37         | src, dst, sport, dport, proto           |
//!
//! The IPv4 `five_tuple` layout is exactly the 13-byte record of the sketch-research key traces.
//!
//! Hashing: [`HashFn`] is xxh3-64 with a seed. xxh3 is defined on little-endian reads of the key
//! bytes, so the same key and seed hash to the same value on every host; snapshots taken on
//! different hosts therefore merge.

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod scan;

use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Longest key: an IPv6 five-tuple (16 + 16 + 2 + 2 + 1).
pub const MAX_KEY_LEN: usize = 37;

/// Which header fields make up a flow key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyKind {
    Src,
    Dst,
    Pair,
    FourTuple,
    FiveTuple,
}

impl KeyKind {
    pub const ALL: [KeyKind; 5] = [
        KeyKind::Src,
        KeyKind::Dst,
        KeyKind::Pair,
        KeyKind::FourTuple,
        KeyKind::FiveTuple,
    ];

    /// Stable snake_case name used on the command line, in configs and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            KeyKind::Src => "src",
            KeyKind::Dst => "dst",
            KeyKind::Pair => "pair",
            KeyKind::FourTuple => "four_tuple",
            KeyKind::FiveTuple => "five_tuple",
        }
    }

    /// Key length in bytes for this kind and address family.
    pub fn len(self, v6: bool) -> usize {
        let a = if v6 { 16 } else { 4 };
        match self {
            KeyKind::Src | KeyKind::Dst => a,
            KeyKind::Pair => 2 * a,
            KeyKind::FourTuple => 2 * a + 4,
            KeyKind::FiveTuple => 2 * a + 5,
        }
    }
}

impl fmt::Display for KeyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown key kind `{0}` (expected one of: src, dst, pair, four_tuple, five_tuple)")]
pub struct UnknownKeyKind(pub String);

impl FromStr for KeyKind {
    type Err = UnknownKeyKind;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KeyKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownKeyKind(s.to_string()))
    }
}

/// The parsed header fields a key is built from. Addresses are in network byte order; an IPv4
/// address occupies the first 4 bytes and the rest stay zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tuple {
    pub v6: bool,
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub sport: u16,
    pub dport: u16,
    pub proto: u8,
}

impl Tuple {
    pub fn v4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, proto: u8) -> Tuple {
        let mut t = Tuple {
            sport,
            dport,
            proto,
            ..Tuple::default()
        };
        t.src[..4].copy_from_slice(&src);
        t.dst[..4].copy_from_slice(&dst);
        t
    }

    /// The key of this tuple for `kind`.
    #[inline]
    pub fn key(&self, kind: KeyKind) -> FlowKey {
        // Two monomorphic paths so every copy has a constant length (a runtime length turns
        // the copies into memcpy calls, which cost more than the rest of the packet's parsing).
        // IPv4 through `FlowKey::v4`'s one wide store: the byte-wise copies stalled store
        // forwarding on the caller's wide read of the key (a profile of `run` showed a fifth of
        // `Runner::push` there).
        if self.v6 {
            self.key_with::<16>(kind)
        } else {
            let a = |b: &[u8; 16]| [b[0], b[1], b[2], b[3]];
            FlowKey::v4(
                kind,
                a(&self.src),
                a(&self.dst),
                self.sport,
                self.dport,
                self.proto,
            )
        }
    }

    #[inline(always)]
    fn key_with<const A: usize>(&self, kind: KeyKind) -> FlowKey {
        let mut k = FlowKey::EMPTY;
        let b = &mut k.bytes;
        let src: &[u8; A] = self.src.first_chunk().expect("A <= 16");
        let dst: &[u8; A] = self.dst.first_chunk().expect("A <= 16");
        let len = match kind {
            KeyKind::Src => {
                b[..A].copy_from_slice(src);
                A
            }
            KeyKind::Dst => {
                b[..A].copy_from_slice(dst);
                A
            }
            KeyKind::Pair => {
                b[..A].copy_from_slice(src);
                b[A..2 * A].copy_from_slice(dst);
                2 * A
            }
            KeyKind::FourTuple | KeyKind::FiveTuple => {
                b[..A].copy_from_slice(src);
                b[A..2 * A].copy_from_slice(dst);
                b[2 * A..2 * A + 2].copy_from_slice(&self.sport.to_be_bytes());
                b[2 * A + 2..2 * A + 4].copy_from_slice(&self.dport.to_be_bytes());
                if kind == KeyKind::FourTuple {
                    2 * A + 4
                } else {
                    b[2 * A + 4] = self.proto;
                    2 * A + 5
                }
            }
        };
        k.len = len as u8;
        k
    }
}

/// An IPv4 packet's five-tuple in one u128 whose little-endian bytes are its `five_tuple` key
/// (source, destination, the two ports in network order, the protocol; the top three bytes
/// zero). Every IPv4 key kind is a masked part of it ([`V4::bits`]), so a batch of packets
/// carries one 16-byte value each and every kind's key is derived from it where it is used:
/// the workers' dispatch, and the runner's batches into Agg-Evict (`algo::KeyBatch::V4`), which
/// packs keys as exactly these bits. Built with one store: byte-wise writes followed by a wide
/// read stall store forwarding (a profile of the parse loop showed it as half of its time).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct V4(pub u128);

impl V4 {
    #[inline(always)]
    pub fn new(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, proto: u8) -> V4 {
        let lanes = |b: [u8; 4]| u128::from(u32::from_le_bytes(b));
        let port = |p: u16| u128::from(u16::from_le_bytes(p.to_be_bytes()));
        V4(lanes(src)
            | lanes(dst) << 32
            | port(sport) << 64
            | port(dport) << 80
            | u128::from(proto) << 96)
    }

    /// The packed tuple of an IPv4 [`Tuple`] (its address's first 4 bytes; `t.v6` is not
    /// looked at).
    #[inline(always)]
    pub fn of(t: &Tuple) -> V4 {
        let a = |b: &[u8; 16]| [b[0], b[1], b[2], b[3]];
        V4::new(a(&t.src), a(&t.dst), t.sport, t.dport, t.proto)
    }

    /// `kind`'s key as the little-endian value of its bytes, and its length.
    #[inline(always)]
    pub fn bits(self, kind: KeyKind) -> (u128, u8) {
        let v = self.0;
        match kind {
            KeyKind::Src => (v & 0xffff_ffff, 4),
            KeyKind::Dst => ((v >> 32) & 0xffff_ffff, 4),
            KeyKind::Pair => (v & u128::from(u64::MAX), 8),
            KeyKind::FourTuple => (v & ((1u128 << 96) - 1), 12),
            KeyKind::FiveTuple => (v, 13),
        }
    }

    /// `kind`'s key.
    #[inline(always)]
    pub fn key(self, kind: KeyKind) -> FlowKey {
        let (v, len) = self.bits(kind);
        let mut k = FlowKey::EMPTY;
        k.bytes[..16].copy_from_slice(&v.to_le_bytes());
        k.len = len;
        k
    }

    /// A 4-byte kind's key as the big-endian u32 of the u32 batch path
    /// ([`FlowKey::prefix_u32`]); the first 4 bytes of a longer kind's.
    #[inline(always)]
    pub fn u32_key(self, kind: KeyKind) -> u32 {
        (self.bits(kind).0 as u32).swap_bytes()
    }
}

/// A flow key: up to [`MAX_KEY_LEN`] bytes. Bytes past `len` are always zero, so the derived
/// comparisons and the hash see exactly the key.
#[derive(Clone, Copy, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "KeyRepr")]
pub struct FlowKey {
    len: u8,
    #[serde(with = "key_bytes")]
    bytes: [u8; MAX_KEY_LEN],
}

/// What a [`FlowKey`] deserializes from, checked before use: a stored state (a snapshot) with a
/// length past [`MAX_KEY_LEN`] or bytes past it would break `as_bytes` and the comparisons.
#[derive(Deserialize)]
struct KeyRepr {
    len: u8,
    #[serde(with = "key_bytes")]
    bytes: [u8; MAX_KEY_LEN],
}

impl TryFrom<KeyRepr> for FlowKey {
    type Error = String;
    fn try_from(r: KeyRepr) -> Result<FlowKey, String> {
        let len = r.len as usize;
        if len > MAX_KEY_LEN {
            return Err(format!("key length {len}, at most {MAX_KEY_LEN}"));
        }
        if r.bytes[len..].iter().any(|&b| b != 0) {
            return Err(format!(
                "key of {len} bytes has non-zero bytes past its length"
            ));
        }
        Ok(FlowKey {
            len: r.len,
            bytes: r.bytes,
        })
    }
}

mod key_bytes {
    use super::MAX_KEY_LEN;
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(b: &[u8; MAX_KEY_LEN], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(b)
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; MAX_KEY_LEN], D::Error> {
        let v: Vec<u8> = Vec::deserialize(d)?;
        let mut out = [0u8; MAX_KEY_LEN];
        if v.len() != MAX_KEY_LEN {
            return Err(serde::de::Error::invalid_length(v.len(), &"37 key bytes"));
        }
        out.copy_from_slice(&v);
        Ok(out)
    }
}

impl FlowKey {
    pub const EMPTY: FlowKey = FlowKey {
        len: 0,
        bytes: [0; MAX_KEY_LEN],
    };

    /// A key from raw bytes (any algorithm key, e.g. a 32-bit key of a key trace).
    /// Returns `None` if longer than [`MAX_KEY_LEN`].
    pub fn from_bytes(b: &[u8]) -> Option<FlowKey> {
        if b.len() > MAX_KEY_LEN {
            return None;
        }
        let mut k = FlowKey::EMPTY;
        k.bytes[..b.len()].copy_from_slice(b);
        k.len = b.len() as u8;
        Some(k)
    }

    /// The key of an IPv4 packet's fields, built directly (no intermediate [`Tuple`]); equal to
    /// `Tuple::v4(src, dst, sport, dport, proto).key(kind)`.
    #[inline(always)]
    pub fn v4(
        kind: KeyKind,
        src: [u8; 4],
        dst: [u8; 4],
        sport: u16,
        dport: u16,
        proto: u8,
    ) -> FlowKey {
        V4::new(src, dst, sport, dport, proto).key(kind)
    }

    /// An 8-byte `pair` key of two IPv4 addresses given as u32 (source, then destination).
    #[inline]
    pub fn from_u32_pair(src: u32, dst: u32) -> FlowKey {
        let mut k = FlowKey::EMPTY;
        k.bytes[..4].copy_from_slice(&src.to_be_bytes());
        k.bytes[4..8].copy_from_slice(&dst.to_be_bytes());
        k.len = 8;
        k
    }

    /// A 4-byte key from a u32 (stored big-endian, as an IPv4 address would be).
    #[inline]
    pub fn from_u32(v: u32) -> FlowKey {
        let mut k = FlowKey::EMPTY;
        k.bytes[..4].copy_from_slice(&v.to_be_bytes());
        k.len = 4;
        k
    }

    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// The first 16 bytes as one little-endian value (bytes past `len` are zero): with the
    /// length, the whole of a key up to 16 bytes long, compared in one instruction.
    #[inline]
    pub fn head128(&self) -> u128 {
        let mut b = [0u8; 16];
        b.copy_from_slice(&self.bytes[..16]);
        u128::from_le_bytes(b)
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first four bytes as a big-endian u32 (the IPv4 source address for IPv4 keys).
    #[inline]
    pub fn prefix_u32(&self) -> u32 {
        u32::from_be_bytes([self.bytes[0], self.bytes[1], self.bytes[2], self.bytes[3]])
    }

    /// 32-bit XOR-fold of the key (Agg-Evict's fingerprint for keys wider than 4 bytes, 3.3).
    /// Equal keys fold equally; unequal keys may collide, so users compare full keys on a match.
    #[inline]
    pub fn fold32(&self) -> u32 {
        let mut w = [0u8; 40];
        w[..MAX_KEY_LEN].copy_from_slice(&self.bytes);
        let mut f = self.len as u32;
        for c in w.chunks_exact(4) {
            f ^= u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        f
    }

    /// For `pair`, `four_tuple` and `five_tuple` keys: the source-address part as a `src` key.
    pub fn src_part(&self) -> Option<FlowKey> {
        let a = self.addr_len()?;
        FlowKey::from_bytes(&self.bytes[..a])
    }

    /// For `pair`, `four_tuple` and `five_tuple` keys: the destination-address part as a `dst` key.
    pub fn dst_part(&self) -> Option<FlowKey> {
        let a = self.addr_len()?;
        FlowKey::from_bytes(&self.bytes[a..2 * a])
    }

    fn addr_len(&self) -> Option<usize> {
        match self.len {
            8 | 12 | 13 => Some(4),
            32 | 36 | 37 => Some(16),
            _ => None,
        }
    }
}

impl Default for FlowKey {
    fn default() -> Self {
        FlowKey::EMPTY
    }
}

/// Equality as the derived one (length, then bytes), in three word compares instead of a call to
/// `memcmp` over 37 bytes: keys are compared per packet (burst checks, map probes).
impl PartialEq for FlowKey {
    #[inline]
    fn eq(&self, o: &FlowKey) -> bool {
        fn words(b: &[u8; MAX_KEY_LEN]) -> (u128, u128, u64) {
            let mut t = [0u8; 8];
            t[..MAX_KEY_LEN - 32].copy_from_slice(&b[32..]);
            (
                u128::from_le_bytes(b[..16].try_into().expect("16 bytes")),
                u128::from_le_bytes(b[16..32].try_into().expect("16 bytes")),
                u64::from_le_bytes(t),
            )
        }
        self.len == o.len && words(&self.bytes) == words(&o.bytes)
    }
}

impl Hash for FlowKey {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write(self.as_bytes());
    }
}

fn fmt_addr(f: &mut fmt::Formatter<'_>, b: &[u8]) -> fmt::Result {
    if b.len() == 4 {
        write!(f, "{}", std::net::Ipv4Addr::new(b[0], b[1], b[2], b[3]))
    } else {
        let mut a = [0u8; 16];
        a.copy_from_slice(b);
        write!(f, "{}", std::net::Ipv6Addr::from(a))
    }
}

/// Human form: `10.0.0.1`, `10.0.0.1>10.0.0.2`, `10.0.0.1:80>10.0.0.2:443`,
/// `10.0.0.1:80>10.0.0.2:443/6`; keys of other lengths print as hex.
impl fmt::Display for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.as_bytes();
        let (a, rest) = match self.len {
            4 | 16 => return fmt_addr(f, b),
            8 | 12 | 13 => (4, self.len as usize - 8),
            32 | 36 | 37 => (16, self.len as usize - 32),
            _ => {
                for x in b {
                    write!(f, "{x:02x}")?;
                }
                return Ok(());
            }
        };
        let (src, dst) = (&b[..a], &b[a..2 * a]);
        let v6 = a == 16;
        let open = if v6 { "[" } else { "" };
        let close = if v6 { "]" } else { "" };
        if rest == 0 {
            fmt_addr(f, src)?;
            f.write_str(">")?;
            return fmt_addr(f, dst);
        }
        let sport = u16::from_be_bytes([b[2 * a], b[2 * a + 1]]);
        let dport = u16::from_be_bytes([b[2 * a + 2], b[2 * a + 3]]);
        f.write_str(open)?;
        fmt_addr(f, src)?;
        write!(f, "{close}:{sport}>{open}")?;
        fmt_addr(f, dst)?;
        write!(f, "{close}:{dport}")?;
        if rest == 5 {
            write!(f, "/{}", b[2 * a + 4])?;
        }
        Ok(())
    }
}

impl fmt::Debug for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FlowKey({self})")
    }
}

/// Hint the CPU to pull the cache line holding `p` into L1: the project's one prefetch, used by
/// every batched update path. Only a hint: `PREFETCHT0` never faults and is not a dereference,
/// so any address is allowed, and it changes no state (each batch path is tested equal to its
/// one-by-one loop). A no-op off x86_64.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` needs only SSE, part of the x86_64 baseline; a prefetch has no
    // architectural effect and never faults, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>())
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// [`prefetch`] of `slice[i]`; out-of-range indices are ignored.
#[inline(always)]
pub fn prefetch_at<T>(slice: &[T], i: usize) {
    if let Some(r) = slice.get(i) {
        prefetch(r as *const T);
    }
}

/// splitmix64: derives independent-looking seeds (rows, levels, hosts) from one master seed.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seed of sub-hash `i` (row, level, ...) of a structure seeded with `master`.
#[inline]
pub fn sub_seed(master: u64, i: u64) -> u64 {
    mix64(master ^ mix64(i.wrapping_add(1)))
}

/// Map a 64-bit hash uniformly onto `0..n` without division (Lemire's multiply-shift).
/// Works for any `n`, power of two or not (SketchVisor's widths are like 4000).
#[inline]
pub fn reduce(h: u64, n: usize) -> usize {
    ((h as u128 * n as u128) >> 64) as usize
}

/// The project's one hash family, seeded and portable (same value on every host), so structures
/// built on different hosts with the same seed merge. Two kinds of member per seed:
///
/// - [`HashFn::hash`]: xxh3-64 over the key bytes, a strong mixer for every structure whose
///   analysis assumes a (close to) fully random hash: tables probed linearly or by cuckoo moves,
///   leading-zero counters (FM, HyperLogLog), bitmaps, group testing.
/// - [`HashFn::affine`]: Dietzfelbinger's multiply-add-shift maps ([`Affine`]) for structures
///   whose analysis needs only pairwise independence per row (Count-Min, the count array), at one
///   multiplication per row on 32-bit keys: the hot path of the papers' default source-IP key.
/// - [`HashFn::hash_short`]: a cheaper mixer for keys of at most 16 bytes (xxh3 beyond), for
///   in-memory tables whose layout changes no answer and whose lookups wait on the hash (the
///   SketchVisor fast path's index, where a miss decides a branch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HashFn {
    seed: u64,
}

impl HashFn {
    pub fn new(seed: u64) -> HashFn {
        HashFn { seed }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Member `i` of the family seeded like `self` (for per-row hashes).
    pub fn sub(&self, i: u64) -> HashFn {
        HashFn::new(sub_seed(self.seed, i))
    }

    #[inline]
    pub fn hash(&self, key: &FlowKey) -> u64 {
        xxhash_rust::xxh3::xxh3_64_with_seed(key.as_bytes(), self.seed)
    }

    /// Keys of at most 16 bytes (every IPv4 key; the key's bytes past its length are zero):
    /// the two 8-byte halves, one seeded, multiplied 64x64 -> 128 and folded, then the fold
    /// multiplied by a constant and folded again (wyhash's mixing step, twice), in two
    /// multiplications where xxh3's short path takes about three times the latency. Longer
    /// keys: [`HashFn::hash`]. Not xxh3's values: only for tables no two hosts must agree on.
    #[inline]
    pub fn hash_short(&self, key: &FlowKey) -> u64 {
        if key.len() > 16 {
            return self.hash(key);
        }
        let x = key.head128();
        let a = (x as u64) ^ self.seed;
        let b = ((x >> 64) as u64) ^ 0x9E37_79B9_7F4A_7C15 ^ key.len() as u64;
        let m = a as u128 * b as u128;
        let c = (m as u64) ^ ((m >> 64) as u64) ^ self.seed.rotate_left(32);
        let m = c as u128 * 0xA076_1D64_78BD_642F_u128;
        (m as u64) ^ ((m >> 64) as u64)
    }

    #[inline]
    pub fn hash_bytes(&self, b: &[u8]) -> u64 {
        xxhash_rust::xxh3::xxh3_64_with_seed(b, self.seed)
    }

    /// Affine map `i` of this seed (independent uniform `a, b` per `i`).
    pub fn affine(&self, i: u64) -> Affine {
        let s = sub_seed(self.seed ^ 0x6166_6669_6e65_5f6d, i); // "affine_m"
        Affine {
            a: mix64(s),
            b: mix64(s ^ 0x5555_5555_5555_5555),
        }
    }
}

/// A key in either representation the algorithms receive: a [`FlowKey`], or a 4-byte key held
/// as its big-endian u32 value (`Algorithm::update_batch_u32`). Both hash to the same value, so
/// a batch loop written once over `K: HashInput` serves both paths with the same state.
pub trait HashInput: Copy {
    fn hash_by(&self, h: &HashFn) -> u64;
    /// The key's length in bytes.
    fn key_len(&self) -> usize;
    /// The key as a [`FlowKey`] (a copy, or built from the u32).
    fn to_key(&self) -> FlowKey;
}

impl HashInput for FlowKey {
    #[inline(always)]
    fn hash_by(&self, h: &HashFn) -> u64 {
        h.hash(self)
    }
    #[inline(always)]
    fn key_len(&self) -> usize {
        self.len()
    }
    #[inline(always)]
    fn to_key(&self) -> FlowKey {
        *self
    }
}

impl HashInput for u32 {
    /// `h.hash(&FlowKey::from_u32(*self))`, with a constant length (xxh3's length dispatch
    /// folds away).
    #[inline(always)]
    fn hash_by(&self, h: &HashFn) -> u64 {
        h.hash_bytes(&self.to_be_bytes())
    }
    #[inline(always)]
    fn key_len(&self) -> usize {
        4
    }
    #[inline(always)]
    fn to_key(&self) -> FlowKey {
        FlowKey::from_u32(*self)
    }
}

/// `x -> (a*x + b) mod 2^64` with `a, b` uniform in `[2^64]`: Dietzfelbinger's multiply-add-shift.
/// Its top `l` bits, `apply(x) >> (64 - l)`, are a *strongly universal* (pairwise independent)
/// hash of 32-bit `x` onto `[2^l]` for every `l <= 33`, because `64 >= 32 + l - 1` (Dietzfelbinger,
/// "Universal hashing and k-wise independent random variables via integer arithmetic without
/// primes", STACS 1996; Thorup, "High Speed Hashing for Integers and Strings", 2015, section
/// 3.3). [`reduce`] of it onto a width `w <= 2^32` that is not a power of two is uniform within a
/// rounding of `2^-33` per cell. For wider inputs (an xxh3 value) it is a plain remix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Affine {
    pub a: u64,
    pub b: u64,
}

impl Affine {
    #[inline(always)]
    pub fn apply(self, x: u64) -> u64 {
        self.a.wrapping_mul(x).wrapping_add(self.b)
    }
}

/// `BuildHasher` for `HashMap<FlowKey, _>`: one xxh3 call per key instead of SipHash.
#[derive(Clone, Copy, Debug, Default)]
pub struct KeyHasherBuilder;

/// Hasher produced by [`KeyHasherBuilder`]. Keys hash through one `write` call.
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.0 = xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.0);
    }
}

impl BuildHasher for KeyHasherBuilder {
    type Hasher = KeyHasher;
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher(0)
    }
}

/// A `HashMap` keyed by flow keys with the fast hasher.
pub type KeyMap<V> = std::collections::HashMap<FlowKey, V, KeyHasherBuilder>;
/// A `HashSet` of flow keys with the fast hasher.
pub type KeySet = std::collections::HashSet<FlowKey, KeyHasherBuilder>;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `hash_short` spreads what tables of flows hold: consecutive source addresses, five-tuples
    /// that differ in one port, and both lengths of keys with equal bytes; its low bits (what a
    /// power-of-two table uses) fill 2048 buckets with 64 keys each on average, no bucket past
    /// twice that; longer keys get `hash`.
    #[test]
    fn hash_short_spreads_short_keys() {
        let h = HashFn::new(42);
        let keys: Vec<FlowKey> = (0..65536u32)
            .map(FlowKey::from_u32)
            .chain((0..65536u32).map(|i| {
                Tuple::v4([10, 0, 0, 1], [192, 168, 1, 2], i as u16, 80, 6).key(KeyKind::FiveTuple)
            }))
            .collect();
        let mut buckets = vec![0u32; 2048];
        for k in &keys {
            buckets[(h.hash_short(k) & 2047) as usize] += 1;
        }
        let max = *buckets.iter().max().unwrap();
        assert!(max <= 2 * 64, "largest bucket {max}");
        assert_ne!(
            h.hash_short(&FlowKey::from_bytes(&[1, 2, 3, 0]).unwrap()),
            h.hash_short(&FlowKey::from_bytes(&[1, 2, 3]).unwrap())
        );
        assert_ne!(
            HashFn::new(1).hash_short(&keys[7]),
            HashFn::new(2).hash_short(&keys[7])
        );
        let long = t6_key();
        assert!(long.len() > 16);
        assert_eq!(h.hash_short(&long), h.hash(&long));
    }

    fn t6_key() -> FlowKey {
        let mut t = v4();
        t.v6 = true;
        t.key(KeyKind::FiveTuple)
    }

    fn v4() -> Tuple {
        Tuple::v4([10, 0, 0, 1], [192, 168, 1, 2], 1234, 80, 6)
    }

    #[test]
    fn key_layouts_and_lengths() {
        let t = v4();
        assert_eq!(t.key(KeyKind::Src).as_bytes(), &[10, 0, 0, 1]);
        assert_eq!(t.key(KeyKind::Dst).as_bytes(), &[192, 168, 1, 2]);
        assert_eq!(
            t.key(KeyKind::FiveTuple).as_bytes(),
            &[10, 0, 0, 1, 192, 168, 1, 2, 0x04, 0xd2, 0, 80, 6]
        );
        for k in KeyKind::ALL {
            assert_eq!(t.key(k).len(), k.len(false));
            let mut t6 = t;
            t6.v6 = true;
            assert_eq!(t6.key(k).len(), k.len(true));
        }
        assert_eq!(
            t.key(KeyKind::FiveTuple).to_string(),
            "10.0.0.1:1234>192.168.1.2:80/6"
        );
        assert_eq!(t.key(KeyKind::Pair).to_string(), "10.0.0.1>192.168.1.2");
        assert_eq!(
            t.key(KeyKind::Pair).src_part().unwrap(),
            t.key(KeyKind::Src)
        );
        assert_eq!(
            t.key(KeyKind::FiveTuple).dst_part().unwrap(),
            t.key(KeyKind::Dst)
        );
    }

    #[test]
    fn direct_v4_keys_equal_tuple_keys() {
        let t = v4();
        for k in KeyKind::ALL {
            assert_eq!(
                FlowKey::v4(k, [10, 0, 0, 1], [192, 168, 1, 2], 1234, 80, 6),
                t.key(k),
                "{k}"
            );
        }
    }

    proptest! {
        // `Tuple::key` of an IPv4 tuple (one wide store) against the byte-wise layout it
        // replaced, on every kind: same bytes, same length.
        #[test]
        fn v4_tuple_keys_equal_the_bytewise_layout(
            src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, proto: u8
        ) {
            let t = Tuple::v4(src, dst, sport, dport, proto);
            for k in KeyKind::ALL {
                let (fast, bytewise) = (t.key(k), t.key_with::<4>(k));
                prop_assert_eq!(fast, bytewise);
                prop_assert_eq!(fast.as_bytes(), bytewise.as_bytes());
                // The packed tuple's views of the key: its bits, its length, its u32 prefix.
                let p = V4::of(&t);
                prop_assert_eq!(p.key(k), bytewise);
                let (bits, len) = p.bits(k);
                prop_assert_eq!(usize::from(len), bytewise.len());
                prop_assert_eq!(&bits.to_le_bytes()[..bytewise.len()], bytewise.as_bytes());
                prop_assert_eq!(bits >> (8 * bytewise.len()), 0);
                prop_assert_eq!(p.u32_key(k), bytewise.prefix_u32());
            }
        }
    }

    #[test]
    fn kinds_parse_and_name() {
        for k in KeyKind::ALL {
            assert_eq!(k.name().parse::<KeyKind>().unwrap(), k);
        }
        assert!("5tuple".parse::<KeyKind>().is_err());
    }

    #[test]
    fn hash_is_portable() {
        // Fixed vectors: the family must give these values on every host and every build.
        let h = HashFn::new(42);
        let k = FlowKey::from_u32(0x0a00_0001);
        assert_eq!(
            h.hash(&k),
            xxhash_rust::xxh3::xxh3_64_with_seed(&[10, 0, 0, 1], 42)
        );
        assert_eq!(mix64(0), 0xe220_a839_7b1d_cdaf);
        assert_ne!(h.sub(0).seed(), h.sub(1).seed());
    }

    #[test]
    fn affine_top_bits_are_pairwise_uniform_over_seeds() {
        // Strong universality of `apply(x) >> (64 - l)` on 32-bit keys: for fixed x != y and a
        // random member, (h(x), h(y)) is uniform on pairs. Two consequences checked over 20,000
        // members for adjacent, far-apart and subnet-neighbour keys with l = 8: the values
        // collide with probability 1/256 (mean 78.1, sd 8.8; bounds at about 5 sd), and h(x) is
        // uniform (chi-square with 255 dof, well below the 0.1% tail at 330).
        let members = 20_000u64;
        for (x, y) in [(1u64, 2u64), (0, 0x8000_0000), (0x0a00_0001, 0x0a00_0101)] {
            let mut coll = 0;
            let mut hist = [0u32; 256];
            for s in 0..members {
                let f = HashFn::new(s).affine(3);
                let (a, b) = (f.apply(x) >> 56, f.apply(y) >> 56);
                coll += u32::from(a == b);
                hist[a as usize] += 1;
            }
            assert!((35..=125).contains(&coll), "{x:#x},{y:#x}: {coll}");
            let e = members as f64 / 256.0;
            let chi: f64 = hist.iter().map(|&o| (f64::from(o) - e).powi(2) / e).sum();
            assert!(chi < 330.0, "chi-square {chi}");
        }
        // Members differ by index and by seed.
        let h = HashFn::new(9);
        assert_ne!(h.affine(0), h.affine(1));
        assert_ne!(h.affine(0), HashFn::new(10).affine(0));
    }

    #[test]
    fn u32_keys_hash_like_their_flow_keys() {
        let h = HashFn::new(77);
        for x in [0u32, 1, 0x0a00_0001, u32::MAX] {
            assert_eq!(x.hash_by(&h), FlowKey::from_u32(x).hash_by(&h));
        }
    }

    #[test]
    fn reduce_stays_in_range() {
        for n in [1usize, 3, 4000, 65536, 1 << 20] {
            for h in [0u64, 1, u64::MAX, 0x8000_0000_0000_0000] {
                assert!(reduce(h, n) < n);
            }
        }
    }

    #[test]
    fn a_u32_pair_is_the_two_addresses_big_endian() {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&0x0a00_0001u32.to_be_bytes());
        b[4..].copy_from_slice(&0xc0a8_0002u32.to_be_bytes());
        assert_eq!(
            FlowKey::from_u32_pair(0x0a00_0001, 0xc0a8_0002),
            FlowKey::from_bytes(&b).unwrap()
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig { rng_seed: proptest::test_runner::RngSeed::Fixed(0x5eed), ..ProptestConfig::default() })]

        /// The hand-written equality is the bytes' (and the length's), for keys that differ in
        /// one byte anywhere (the last word included) or only in length.
        #[test]
        fn equality_is_byte_equality(
            b in proptest::collection::vec(any::<u8>(), 0..=MAX_KEY_LEN),
            flip in any::<proptest::sample::Index>(),
            shorter in any::<bool>(),
        ) {
            let k = FlowKey::from_bytes(&b).unwrap();
            prop_assert!(k == FlowKey::from_bytes(&b).unwrap());
            if !b.is_empty() {
                let mut c = b.clone();
                let i = flip.index(c.len());
                c[i] ^= 1;
                let other = if shorter { &b[..b.len() - 1] } else { &c[..] };
                let o = FlowKey::from_bytes(other).unwrap();
                prop_assert_eq!(k == o, k.as_bytes() == o.as_bytes());
                prop_assert!(k != o);
                prop_assert_eq!(k.cmp(&o) == std::cmp::Ordering::Equal, k == o);
            }
        }

        #[test]
        fn from_bytes_roundtrip(b in proptest::collection::vec(any::<u8>(), 0..=MAX_KEY_LEN)) {
            let k = FlowKey::from_bytes(&b).unwrap();
            prop_assert_eq!(k.as_bytes(), &b[..]);
            let _ = k.to_string();
            prop_assert_eq!(k.fold32(), FlowKey::from_bytes(&b).unwrap().fold32());
        }

        #[test]
        fn distinct_kinds_never_equal(a in any::<[u8; 4]>(), b in any::<[u8; 4]>()) {
            let t = Tuple::v4(a, b, 1, 2, 17);
            let keys: Vec<FlowKey> = KeyKind::ALL.iter().map(|&k| t.key(k)).collect();
            // Different lengths (except src vs dst) make keys of different kinds unequal.
            for i in 2..keys.len() {
                for j in 0..i {
                    prop_assert_ne!(keys[i], keys[j]);
                }
            }
        }
    }
}
