use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

use super::*;

const ALL_SIMD: [Simd; 4] = [Simd::Avx512, Simd::Avx2, Simd::Sse2, Simd::Off];

/// The kernels this CPU can run (always including the scalar one).
fn kernels() -> impl Iterator<Item = Simd> {
    ALL_SIMD.into_iter().filter(|&s| simd::available(s))
}

/// Every policy and index with every kernel this CPU runs (16 arrays).
fn grid() -> impl Iterator<Item = AggConfig> {
    [Policy::Grr, Policy::Lru].into_iter().flat_map(|policy| {
        [Index::Modulo, Index::Hash]
            .into_iter()
            .flat_map(move |index| {
                kernels().map(move |s| AggConfig {
                    index,
                    ..cfg(16, policy, s)
                })
            })
    })
}

fn cfg(arrays: usize, policy: Policy, simd: Simd) -> AggConfig {
    AggConfig {
        arrays,
        policy,
        simd,
        ..AggConfig::default()
    }
}

/// Everything handed on, in order.
#[derive(Default)]
struct Log {
    seq: Vec<(FlowKey, u64)>,
    calls: usize,
    /// Per call: whether the batch came as u32 keys.
    kinds: Vec<bool>,
}

impl Log {
    fn sink(&mut self) -> impl FnMut(KeyBatch<'_>, &[u64]) + '_ {
        move |k, w| {
            assert_eq!(k.len(), w.len());
            self.calls += 1;
            self.kinds.push(matches!(k, KeyBatch::U32(_)));
            self.seq
                .extend((0..k.len()).filter_map(|i| k.get(i)).zip(w.iter().copied()));
        }
    }
    fn totals(&self) -> BTreeMap<FlowKey, u64> {
        let mut m = BTreeMap::new();
        for (k, w) in &self.seq {
            *m.entry(*k).or_insert(0) += w;
        }
        m
    }
}

fn truth(keys: &[FlowKey], w: &[u64]) -> BTreeMap<FlowKey, u64> {
    let mut m = BTreeMap::new();
    for (k, w) in keys.iter().zip(w) {
        *m.entry(*k).or_insert(0) += w;
    }
    m
}

/// Skewed stream over `universe` keys made by `mk`, weights 1..=1500.
fn stream(
    seed: u64,
    n: usize,
    universe: u32,
    mk: impl Fn(u32) -> FlowKey,
) -> (Vec<FlowKey>, Vec<u64>) {
    let mut r = Pcg64::seed_from_u64(seed);
    let mut ks = Vec::with_capacity(n);
    let mut ws = Vec::with_capacity(n);
    for _ in 0..n {
        // Squaring a uniform skews towards small ranks: a cheap heavy-tailed mix.
        let u: f64 = r.gen();
        let rank = ((u * u * u) * f64::from(universe)) as u32;
        ks.push(mk(rank));
        ws.push(r.gen_range(1..=1500));
    }
    (ks, ws)
}

/// Feed in mixed batch sizes, then flush; `u32`: through `update_batch_u32` (4-byte keys).
fn run_as(agg: &mut Aggregator, ks: &[FlowKey], ws: &[u64], u32: bool) -> Log {
    let us: Vec<u32> = ks.iter().map(|k| k.prefix_u32()).collect();
    let mut log = Log::default();
    let sizes = [1usize, 7, 32, 100, 3, 8192, 64];
    let mut i = 0;
    let mut b = 0;
    while i < ks.len() {
        let e = (i + sizes[b % sizes.len()]).min(ks.len());
        if u32 {
            agg.update_batch_u32(&us[i..e], &ws[i..e], &mut log.sink());
        } else {
            agg.update_batch(&ks[i..e], &ws[i..e], &mut log.sink());
        }
        i = e;
        b += 1;
    }
    agg.flush(&mut log.sink());
    log
}

fn run(agg: &mut Aggregator, ks: &[FlowKey], ws: &[u64]) -> Log {
    run_as(agg, ks, ws, false)
}

#[test]
fn fastmod_is_exact() {
    let mut r = Pcg64::seed_from_u64(1);
    for d in [1u32, 2, 3, 7, 64, 1000, 2000, 65535, 1 << 24, u32::MAX] {
        let fm = FastMod::new(d);
        for a in [0u32, 1, d.wrapping_sub(1), d, d.wrapping_add(1), u32::MAX] {
            assert_eq!(fm.rem(a), a % d, "{a} % {d}");
        }
        for _ in 0..10_000 {
            let a: u32 = r.gen();
            assert_eq!(fm.rem(a), a % d, "{a} % {d}");
        }
    }
}

#[test]
fn every_kernel_matches_scalar() {
    let mut r = Pcg64::seed_from_u64(2);
    let avail: Vec<Simd> = kernels().collect();
    assert!(avail.contains(&Simd::Off));
    for round in 0..20_000 {
        // Distinct keys in the occupied slots (as the aggregator guarantees); empty slots hold
        // anything, including copies of the probe and 0.
        let occ: u16 = if round % 5 == 0 { u16::MAX } else { r.gen() };
        let small = round % 2 == 0; // small key space: many probes hit, 0 is common
        let mut line = Line::default();
        let mut used = Vec::new();
        for s in 0..SLOTS {
            loop {
                let v: u32 = if small { r.gen_range(0..24) } else { r.gen() };
                if occ & (1 << s) == 0 || !used.contains(&v) {
                    if occ & (1 << s) != 0 {
                        used.push(v);
                    }
                    line.0[s] = v;
                    break;
                }
            }
        }
        let probe: u32 = match round % 3 {
            0 => line.0[r.gen_range(0..SLOTS)], // every position, occupied or not
            1 => 0,
            _ => {
                if small {
                    r.gen_range(0..24)
                } else {
                    r.gen()
                }
            }
        };
        let want = simd::find_scalar(&line, probe, occ);
        assert!(want.count_ones() <= 1);
        for &s in &avail {
            assert_eq!(
                simd::find_with(s, &line, probe, occ),
                Some(want),
                "{s} line {line:?} occ {occ:#x} probe {probe}"
            );
        }
    }
    // All 16 positions explicitly, with key 0 everywhere else empty.
    for s in 0..SLOTS {
        let mut line = Line::default();
        line.0[s] = 0xdead_beef;
        for &b in &avail {
            assert_eq!(simd::find_with(b, &line, 0xdead_beef, 1 << s), Some(1 << s));
            // Key 0 in an empty slot, distinct non-zero keys in the occupied ones: no match.
            let mut l2 = Line::default();
            for (i, v) in l2.0.iter_mut().enumerate() {
                *v = if i == s { 0 } else { 100 + i as u32 };
            }
            assert_eq!(simd::find_with(b, &l2, 0, !(1u16 << s)), Some(0), "{b}");
            assert_eq!(simd::find_with(b, &l2, 0, u16::MAX), Some(1 << s), "{b}");
        }
    }
}

#[test]
fn every_run_start_kernel_matches_scalar() {
    let mut r = Pcg64::seed_from_u64(3);
    let avail: Vec<Simd> = kernels().collect();
    let check = |ks: &[u32; CHUNK]| {
        let want = simd::run_starts_scalar(ks);
        assert_eq!(want & 1, 1);
        for j in 1..CHUNK {
            assert_eq!(want >> j & 1 == 1, ks[j] != ks[j - 1]);
        }
        for &s in &avail {
            assert_eq!(simd::run_starts_with(s, ks), Some(want), "{s} {ks:?}");
        }
    };
    // Every single boundary position (including 15/16, where the two halves meet), and
    // neighbours that differ only in the sign bit or the lowest bit.
    for j in 0..CHUNK {
        for d in [1u32, 1 << 31, u32::MAX] {
            let mut ks = [7u32; CHUNK];
            for k in &mut ks[j..] {
                *k ^= d;
            }
            check(&ks);
        }
    }
    check(&[0; CHUNK]);
    check(&std::array::from_fn(|j| j as u32));
    for round in 0..20_000 {
        // Trains over a small key space (runs of random lengths, repeats of older keys).
        let universe = [2u32, 3, 5, 1000][round % 4];
        let mut ks = [0u32; CHUNK];
        let mut cur = r.gen_range(0..universe);
        for k in &mut ks {
            if r.gen_range(0..4) == 0 {
                cur = r.gen_range(0..universe);
            }
            *k = cur;
        }
        check(&ks);
    }
}

#[test]
fn unavailable_backend_is_an_error_naming_it() {
    for s in ALL_SIMD {
        let r = Aggregator::new(&cfg(8, Policy::Grr, s), 4);
        if simd::available(s) {
            assert_eq!(r.unwrap().simd(), s);
        } else {
            let e = r.unwrap_err().to_string();
            assert!(e.contains(s.name()), "{e}");
        }
    }
    let a = Aggregator::new(&AggConfig::default(), 4).unwrap();
    assert_eq!(a.simd(), simd::detect());
    assert_ne!(a.simd(), Simd::Auto);
}

#[test]
fn config_errors_and_names() {
    let bad = AggConfig {
        arrays: 0,
        ..AggConfig::default()
    };
    assert!(Aggregator::new(&bad, 4)
        .unwrap_err()
        .to_string()
        .contains("arrays"));
    let bad = AggConfig {
        evict_batch: 0,
        ..AggConfig::default()
    };
    assert!(Aggregator::new(&bad, 4)
        .unwrap_err()
        .to_string()
        .contains("evict_batch"));
    assert!(Aggregator::new(&AggConfig::default(), 38).is_err());
    for s in ALL_SIMD.into_iter().chain([Simd::Auto]) {
        assert_eq!(s.name().parse::<Simd>().unwrap(), s);
    }
    assert_eq!("lru".parse::<Policy>().unwrap(), Policy::Lru);
    assert_eq!("hash".parse::<Index>().unwrap(), Index::Hash);
    let e = "avx".parse::<Simd>().unwrap_err().to_string();
    assert!(e.contains("simd") && e.contains("avx2"), "{e}");
}

#[test]
fn exact_totals_for_every_policy_index_backend_and_width() {
    let wide = |x: u32| {
        FlowKey::from_bytes(&[&x.to_le_bytes()[..], &[1, 2, 3, 4, 5, 6, 7, 8, 9]].concat())
            .unwrap_or_default()
    };
    for (kl, mk) in [
        (4usize, &FlowKey::from_u32 as &dyn Fn(u32) -> FlowKey),
        (13, &wide),
    ] {
        let (ks, ws) = stream(3, 30_000, 3000, mk);
        let want = truth(&ks, &ws);
        for c in grid() {
            let (policy, index, s) = (c.policy, c.index, c.simd);
            let mut a = Aggregator::new(&c, kl).unwrap();
            assert_eq!(a.is_narrow(), kl == 4);
            let log = run(&mut a, &ks, &ws);
            assert_eq!(log.totals(), want, "{policy} {index} {s} len {kl}");
            assert!(a.is_empty());
            let st = a.stats();
            assert_eq!(st.packets, ks.len() as u64);
            assert_eq!(st.evicted, log.seq.len() as u64);
            assert!(st.evicted < st.packets, "{st:?}");
            assert!(st.flushed > 0 && st.flushed <= 16 * 16);
            assert!(log.seq.iter().all(|(_, w)| *w > 0));
        }
    }
}

#[test]
fn every_backend_evicts_in_the_same_sequence_as_scalar() {
    let (ks, ws) = stream(4, 50_000, 5000, FlowKey::from_u32);
    for policy in [Policy::Grr, Policy::Lru] {
        let mut base = Aggregator::new(&cfg(32, policy, Simd::Off), 4).unwrap();
        let want = run(&mut base, &ks, &ws).seq;
        for s in kernels() {
            let mut a = Aggregator::new(&cfg(32, policy, s), 4).unwrap();
            assert!(run(&mut a, &ks, &ws).seq == want, "{s} {policy}");
        }
    }
}

#[test]
fn key_zero_and_fingerprint_zero_are_keys() {
    for s in kernels() {
        // Narrow: key 0 must not match the empty slots (all stored keys are 0 initially).
        let mut a = Aggregator::new(&cfg(1, Policy::Grr, s), 4).unwrap();
        let k0 = FlowKey::from_u32(0);
        let k1 = FlowKey::from_u32(1);
        let mut log = Log::default();
        a.update_batch(&[k1, k0, k0, k1, k0], &[1, 2, 3, 4, 5], &mut log.sink());
        assert_eq!(a.len(), 2);
        a.flush(&mut log.sink());
        assert_eq!(log.seq, vec![(k1, 5), (k0, 10)], "{s}");

        // Wide: keys whose fingerprint is 0, in array 0 (whose empty slots hold fingerprint
        // 0), for the u64 and u128 representations, and the all-zero key.
        for (len, z, other) in [
            (8usize, pair_with_id(0), pair_with_id(1)),
            (13, five_with_id(0, 3), five_with_id(1, 3)),
            (
                16,
                FlowKey::from_bytes(&[0; 16]).unwrap(),
                FlowKey::from_bytes(&[1; 16]).unwrap(),
            ),
        ] {
            let mut a = Aggregator::new(&cfg(1, Policy::Grr, s), len).unwrap();
            if len < 16 {
                assert_eq!(a.flow_id(&z), Some((0, 0)));
            }
            let mut log = Log::default();
            a.update_batch(&[z, other, z], &[7, 1, 7], &mut log.sink());
            assert_eq!(a.len(), 2);
            a.flush(&mut log.sink());
            assert_eq!(log.totals(), truth(&[z, other, z], &[7, 1, 7]));
            assert_eq!(log.seq.len(), 2, "{s}: one aggregated update per key");
        }
    }
}

/// Inverse of `key::mix64` (splitmix64's finaliser is a bijection): lets the tests build keys
/// with a chosen flow ID, so fingerprint 0 and exact collisions need no search.
fn unmix64(h: u64) -> u64 {
    fn unshift(y: u64, s: u32) -> u64 {
        let mut x = y;
        for _ in 0..64 / s + 1 {
            x = y ^ (x >> s);
        }
        x
    }
    fn inv(c: u64) -> u64 {
        let mut x = c;
        for _ in 0..6 {
            x = x.wrapping_mul(2u64.wrapping_sub(c.wrapping_mul(x)));
        }
        x
    }
    let mut z = unshift(h, 31);
    z = z.wrapping_mul(inv(0x94D0_49BB_1331_11EB));
    z = unshift(z, 27);
    z = z.wrapping_mul(inv(0xBF58_476D_1CE4_E5B9));
    z = unshift(z, 30);
    z.wrapping_sub(0x9E37_79B9_7F4A_7C15)
}

/// An 8-byte key (IPv4 pair) whose flow ID is `h` (fingerprint = low half, array = high half).
fn pair_with_id(h: u64) -> FlowKey {
    FlowKey::from_bytes(&unmix64(h).to_le_bytes()).unwrap_or_default()
}

/// A 13-byte key (IPv4 five-tuple) with ports/protocol `tail` (40 bits) and flow ID `h`.
fn five_with_id(h: u64, tail: u64) -> FlowKey {
    let hi = (tail & 0xff_ffff_ffff) | 13 << 56;
    let lo = unmix64(h) ^ key::mix64(hi);
    FlowKey::from_bytes(&[&lo.to_le_bytes()[..], &hi.to_le_bytes()[..5]].concat())
        .unwrap_or_default()
}

#[test]
fn the_test_keys_have_the_flow_ids_they_claim() {
    let mut r = Pcg64::seed_from_u64(11);
    let a8 = Aggregator::new(&cfg(7, Policy::Grr, Simd::Auto), 8).unwrap();
    let a13 = Aggregator::new(&cfg(7, Policy::Grr, Simd::Auto), 13).unwrap();
    for _ in 0..1000 {
        let h: u64 = r.gen();
        assert_eq!(key::mix64(unmix64(h)), h);
        let want = Some((((h >> 32) % 7) as u32, h as u32));
        assert_eq!(a8.flow_id(&pair_with_id(h)), want);
        let k = five_with_id(h, r.gen());
        assert_eq!(k.len(), 13);
        assert_eq!(a13.flow_id(&k), want);
    }
}

#[test]
fn fingerprint_collisions_evict_and_stay_exact() {
    // Two keys of one array (flow IDs 1 and 5 mod 4 in the high half) with one fingerprint,
    // for the u64 (pair) and u128 (five-tuple) representations.
    let cases = [
        (
            8usize,
            pair_with_id(1 << 32 | 0xdead),
            pair_with_id(5 << 32 | 0xdead),
        ),
        (
            13,
            five_with_id(2 << 32 | 0xbeef, 7),
            five_with_id(6 << 32 | 0xbeef, 9),
        ),
    ];
    for (len, x, y) in cases {
        assert_ne!(x, y);
        for s in kernels() {
            let mut a = Aggregator::new(&cfg(4, Policy::Lru, s), len).unwrap();
            assert_eq!(a.flow_id(&x), a.flow_id(&y));
            let mut log = Log::default();
            let ks = [x, x, y, y, x, y, y];
            let ws = [1, 2, 3, 4, 5, 6, 7];
            a.update_batch(&ks, &ws, &mut log.sink());
            // x(3) evicted by y, y(7) by x, x(5) by y; y(13) still held.
            assert_eq!(a.len(), 4, "three buffered evictions and one held pair");
            a.flush(&mut log.sink());
            assert_eq!(log.seq, vec![(x, 3), (y, 7), (x, 5), (y, 13)], "{s} {len}");
            assert_eq!(log.totals(), truth(&ks, &ws));
        }
    }
    // The 16-byte (FlowKey, xxh3) representation: find a fingerprint collision by search.
    let a = Aggregator::new(&cfg(1, Policy::Grr, Simd::Auto), 16).unwrap();
    let mut seen = BTreeMap::new();
    let (x, y) = (0u64..)
        .find_map(|i| {
            let k = FlowKey::from_bytes(&[i.to_le_bytes(), [0xfe; 8]].concat())?;
            let f = a.flow_id(&k)?.1;
            seen.insert(f, k).map(|old| (old, k))
        })
        .unwrap();
    let mut a = Aggregator::new(&cfg(1, Policy::Grr, Simd::Auto), 16).unwrap();
    let mut log = Log::default();
    a.update_batch(&[x, y, x], &[1, 2, 3], &mut log.sink());
    a.flush(&mut log.sink());
    assert_eq!(log.seq, vec![(x, 1), (y, 2), (x, 3)]);
}

#[test]
fn structured_pairs_neither_share_fingerprints_nor_crowd_arrays() {
    // Intra-/16 pairs and their reverses: the paper's XOR fold gives (a, b) and (b, a) one
    // fingerprint, and `fold % 2000` reaches only 125 arrays (fold = x << 16).
    let mut r = Pcg64::seed_from_u64(12);
    let mut keys = Vec::new();
    let p = |a: u32, b: u32| {
        FlowKey::from_bytes(&[a.to_be_bytes(), b.to_be_bytes()].concat()).unwrap_or_default()
    };
    let mut set = std::collections::BTreeSet::new();
    while set.len() < 4000 {
        let (a, b) = (
            0x0a01_0000 | r.gen_range(0..65536u32),
            0x0a01_0000 | r.gen_range(0..65536u32),
        );
        if a != b && set.insert((a.min(b), a.max(b))) {
            keys.push(p(a, b));
            keys.push(p(b, a));
        }
    }
    let folds: std::collections::BTreeSet<u32> = keys.iter().map(|k| k.fold32() % 2000).collect();
    assert!(folds.len() <= 125, "{}", folds.len());
    let mut a = Aggregator::new(&AggConfig::default(), 8).unwrap();
    let ids: Vec<(u32, u32)> = keys.iter().map(|k| a.flow_id(k).unwrap()).collect();
    for (k, c) in keys.chunks(2).zip(ids.chunks(2)) {
        assert_eq!(k[0].fold32(), k[1].fold32());
        assert_ne!(c[0].1, c[1].1, "reversed pairs share a fingerprint");
    }
    let arrays: std::collections::BTreeSet<u32> = ids.iter().map(|x| x.0).collect();
    // 8000 keys thrown into 2000 arrays reach ~2000 (1 - e^-4) = 1963 of them.
    assert!(arrays.len() > 1900, "{}", arrays.len());
    // 8000 flows fit 32000 slots when spread: five rounds in shuffled order, no eviction
    // before the flush (the fold's 125 arrays hold only 2000 flows).
    let mut stream = Vec::new();
    for _ in 0..5 {
        stream.extend_from_slice(&keys);
    }
    for i in (1..stream.len()).rev() {
        stream.swap(i, r.gen_range(0..=i));
    }
    let ws = vec![1u64; stream.len()];
    let log = run(&mut a, &stream, &ws);
    assert_eq!(log.totals(), truth(&stream, &ws));
    let st = a.stats();
    assert_eq!(st.evicted, st.flushed, "{st:?}");
    assert_eq!(st.flushed, 8000);
}

#[test]
fn full_keys_are_held_compactly_and_exactly_for_every_length() {
    // Pairs: the flow-ID array is k x 16 u64 (256 KB for k = 2000), not 38-byte keys.
    let a = Aggregator::new(&AggConfig::default(), 8).unwrap();
    assert!(
        (2000 * 256..2000 * 256 + 8000).contains(&a.memory_bytes()),
        "{}",
        a.memory_bytes()
    );
    let a = Aggregator::new(&AggConfig::default(), 13).unwrap();
    assert!(a.memory_bytes() < 2000 * 384 + 8000, "{}", a.memory_bytes());
    // u128 keys: every length <= 15 round-trips, and keys differing only in length (zero
    // tails) stay apart.
    let mut r = Pcg64::seed_from_u64(13);
    for n in 0..=15usize {
        let b: Vec<u8> = (0..n).map(|_| r.gen()).collect();
        let k = FlowKey::from_bytes(&b).unwrap();
        let p = <u128 as wide::Packed>::pack(&k).unwrap();
        assert_eq!(wide::Packed::unpack(&p), k, "len {n}");
        assert_eq!(<u64 as wide::Packed>::pack(&k).is_some(), n == 8);
    }
    let long = FlowKey::from_bytes(&[1; 16]).unwrap();
    assert!(<u128 as wide::Packed>::pack(&long).is_none());
    let z = |n: usize| FlowKey::from_bytes(&vec![0u8; n]).unwrap();
    let one = |n: usize| {
        let mut b = vec![0u8; n];
        b[0] = 1;
        FlowKey::from_bytes(&b).unwrap()
    };
    let ks: Vec<FlowKey> = [0, 3, 4, 7, 8, 12, 13, 15]
        .iter()
        .flat_map(|&n| [z(n), one(n.max(1))])
        .chain([long])
        .collect();
    let mut stream = Vec::new();
    for i in 0..20 {
        stream.push(ks[(i * 7) % ks.len()]);
        stream.push(ks[(i * 7) % ks.len()]);
    }
    let ws: Vec<u64> = (1..=stream.len() as u64).collect();
    for (len, bypassed) in [(8usize, true), (13, true), (16, false), (37, false)] {
        for policy in [Policy::Grr, Policy::Lru] {
            let mut a = Aggregator::new(&cfg(2, policy, Simd::Auto), len).unwrap();
            let log = run(&mut a, &stream, &ws);
            assert_eq!(log.totals(), truth(&stream, &ws), "{len} {policy}");
            // Only the keys the representation cannot hold pass through: for u64, every
            // key not of 8 bytes; for u128, the 16-byte one.
            let held = |k: &FlowKey| match len {
                8 => k.len() == 8,
                13 => k.len() <= 15,
                _ => true,
            };
            let want = stream.iter().filter(|k| !held(k)).count() as u64;
            assert_eq!(a.stats().bypassed, want, "{len}");
            assert_eq!(want > 0, bypassed);
        }
    }
}

#[test]
fn wide_trains_merge_into_one_update_and_never_wrap_a_count() {
    for len in [8usize, 13, 16] {
        let k = FlowKey::from_bytes(&vec![9u8; len]).unwrap();
        for s in kernels() {
            let mut a = Aggregator::new(&cfg(4, Policy::Grr, s), len).unwrap();
            let mut log = Log::default();
            a.update_batch(&[k; 32], &[1; 32], &mut log.sink());
            assert_eq!(a.len(), 1);
            let half = u64::from(u32::MAX / 2 + 7);
            a.update_batch(&[k; 3], &[half, half, 5], &mut log.sink());
            assert_eq!(a.stats().bypassed, 1);
            // A chunk holding a weight >= 2^32 is not merged: that packet alone passes.
            a.update_batch(&[k; 3], &[2, 1 << 40, 3], &mut log.sink());
            assert_eq!(a.stats().bypassed, 2);
            a.flush(&mut log.sink());
            assert_eq!(
                log.seq,
                vec![(k, 2 * half + 5), (k, 1 << 40), (k, 37)],
                "{len} {s}"
            );
        }
    }
}

/// A wide key of `len` bytes from a rank (distinct ranks give distinct keys).
fn wide_key(len: usize) -> impl Fn(u32) -> FlowKey {
    move |x| {
        let b: Vec<u8> = (0..len as u64)
            .map(|i| (key::mix64(u64::from(x) ^ (i / 8) << 40) >> (8 * (i % 8))) as u8)
            .collect();
        let mut k = FlowKey::from_bytes(&b).unwrap_or_default();
        if len >= 4 {
            // Keep ranks distinct whatever the mixing: the rank in the first 4 bytes.
            let mut b = b;
            b[..4].copy_from_slice(&x.to_be_bytes());
            k = FlowKey::from_bytes(&b).unwrap_or_default();
        }
        k
    }
}

#[test]
fn every_backend_matches_scalar_on_wide_keys_with_trains() {
    for len in [8usize, 13, 16] {
        let (ks, ws) = bursty_stream(14, 40_000, 5000, true);
        let ks: Vec<FlowKey> = ks.iter().map(|k| wide_key(len)(k.prefix_u32())).collect();
        for policy in [Policy::Grr, Policy::Lru] {
            for index in [Index::Modulo, Index::Hash] {
                let c = |s| AggConfig {
                    index,
                    ..cfg(32, policy, s)
                };
                let mut base = Aggregator::new(&c(Simd::Off), len).unwrap();
                let want = run(&mut base, &ks, &ws);
                assert_eq!(want.totals(), truth(&ks, &ws));
                assert!(base.stats().evicted < ks.len() as u64 / 2);
                for s in kernels() {
                    let mut a = Aggregator::new(&c(s), len).unwrap();
                    assert!(run(&mut a, &ks, &ws).seq == want.seq, "{s} {policy} {len}");
                }
            }
        }
    }
}

#[test]
fn narrow_mode_bypasses_other_lengths() {
    let v6 =
        FlowKey::from_bytes(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]).unwrap();
    let v4 = FlowKey::from_u32(0x0a00_0001);
    let empty = FlowKey::EMPTY;
    let mut a = Aggregator::new(&cfg(4, Policy::Grr, Simd::Auto), 4).unwrap();
    let mut log = Log::default();
    let ks = [v4, v6, v4, v6, empty];
    let ws = [1, 10, 2, 20, 5];
    a.update_batch(&ks, &ws, &mut log.sink());
    a.flush(&mut log.sink());
    // Bypassed keys wait in their own buffer (as full keys); the flush hands on the arrays'
    // pairs (as u32 keys) first, then that buffer.
    assert_eq!(log.seq, vec![(v4, 3), (v6, 10), (v6, 20), (empty, 5)]);
    assert_eq!(log.kinds, vec![true, false]);
    let st = a.stats();
    assert_eq!(
        (st.packets, st.evicted, st.bypassed, st.flushed),
        (5, 4, 3, 1)
    );
    assert!((st.evicted_share() - 0.8).abs() < 1e-12);
}

#[test]
fn u32_overflow_evicts_first() {
    let k = FlowKey::from_u32(7);
    for s in kernels() {
        let mut a = Aggregator::new(&cfg(2, Policy::Grr, s), 4).unwrap();
        let mut log = Log::default();
        let big = u64::from(u32::MAX) - 1;
        let ws = [big, 1, 1, 5, u64::from(u32::MAX) + 9, 3];
        a.update_batch(&[k; 6], &ws, &mut log.sink());
        a.flush(&mut log.sink());
        assert_eq!(
            log.seq,
            vec![
                (k, u64::from(u32::MAX)),
                (k, u64::from(u32::MAX) + 9),
                (k, 9)
            ],
            "{s}"
        );
        assert_eq!(log.totals()[&k], ws.iter().sum::<u64>());
        assert_eq!(a.stats().bypassed, 1);
    }
}

#[test]
fn grr_and_lru_pick_their_victims() {
    // One array: 16 flows fill it; flow 16 evicts slot 0 (GRR starts at 0) in both policies,
    // but after touching flow 0 again LRU evicts flow 1 while GRR still evicts slot 0.
    let keys: Vec<FlowKey> = (0..18).map(FlowKey::from_u32).collect();
    let mut ks: Vec<FlowKey> = keys[..16].to_vec();
    ks.push(keys[0]);
    ks.push(keys[16]);
    ks.push(keys[17]);
    let ws = vec![1u64; ks.len()];
    let one = |p| AggConfig {
        evict_batch: 1,
        ..cfg(1, p, Simd::Auto)
    };
    let mut g = Aggregator::new(&one(Policy::Grr), 4).unwrap();
    let mut log = Log::default();
    g.update_batch(&ks, &ws, &mut log.sink());
    g.flush(&mut |_, _| {});
    assert_eq!(log.seq, vec![(keys[0], 2), (keys[1], 1)]);
    let mut l = Aggregator::new(&one(Policy::Lru), 4).unwrap();
    let mut log = Log::default();
    l.update_batch(&ks, &ws, &mut log.sink());
    assert_eq!(log.seq, vec![(keys[1], 1), (keys[2], 1)]);
}

#[test]
fn evictions_come_in_batches_and_flush_empties() {
    let (ks, ws) = stream(5, 20_000, 4000, FlowKey::from_u32);
    let c = AggConfig {
        evict_batch: 7,
        ..cfg(8, Policy::Grr, Simd::Auto)
    };
    // Both input paths hand evictions on during the updates, in whole batches, and keep fewer
    // than a batch plus a chunk pending.
    let us: Vec<u32> = ks.iter().map(|k| k.prefix_u32()).collect();
    for u32_path in [true, false] {
        let mut a = Aggregator::new(&c, 4).unwrap();
        let mut sizes = Vec::new();
        let mut sink = |k: KeyBatch<'_>, w: &[u64]| {
            assert_eq!(k.len(), w.len());
            assert!(matches!(k, KeyBatch::U32(_)));
            sizes.push(k.len());
        };
        for (i, (k, w)) in ks.chunks(100).zip(ws.chunks(100)).enumerate() {
            if u32_path {
                a.update_batch_u32(&us[i * 100..i * 100 + k.len()], w, &mut sink);
            } else {
                a.update_batch(k, w, &mut sink);
            }
            assert!(a.out_n < 7 + CHUNK, "{} pending", a.out_n);
        }
        assert!(sizes.len() > 100, "{} batches handed on", sizes.len());
        assert!(sizes.iter().all(|&s| s == 7));
    }
    let mut a = Aggregator::new(&c, 4).unwrap();
    a.update_batch(&ks, &ws, &mut |_, _| {});
    assert!(!a.is_empty());
    let mut n = 0;
    a.flush(&mut |k: KeyBatch<'_>, _: &[u64]| n += k.len());
    assert!(a.is_empty());
    assert_eq!(a.len(), 0);
    let mut again = 0;
    a.flush(&mut |_, _| again += 1);
    assert_eq!(again, 0, "an empty flush calls nobody");
    // After a flush the aggregator behaves exactly like a new one.
    let mut fresh = Aggregator::new(&c, 4).unwrap();
    let (l1, l2) = (run(&mut a, &ks, &ws), run(&mut fresh, &ks, &ws));
    assert!(l1.seq == l2.seq);
    assert!(a.memory_bytes() >= 8 * 128);
}

#[test]
fn memory_matches_the_papers_figure() {
    let a = Aggregator::new(&AggConfig::default(), 4).unwrap();
    // k = 2000: 2000 x (64 B keys + 64 B values) = 256 KB, plus occupancy and the buffer.
    assert!(
        (256_000..262_000).contains(&a.memory_bytes()),
        "{}",
        a.memory_bytes()
    );
}

/// `stream` with trains: each draw repeated 1..=12 times (back-to-back packets of one flow).
fn bursty_stream(seed: u64, n: usize, universe: u32, big: bool) -> (Vec<FlowKey>, Vec<u64>) {
    let (ks, ws) = stream(seed, n / 4, universe, FlowKey::from_u32);
    let mut r = Pcg64::seed_from_u64(seed ^ 0xb0);
    let (mut k2, mut w2) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for (k, w) in ks.iter().zip(&ws) {
        for _ in 0..r.gen_range(1..=12) {
            k2.push(*k);
            // Some weights near and past u32::MAX: runs whose sum overflows a count, and
            // chunks that hold a weight too large to merge.
            w2.push(match r.gen_range(0..1000) {
                0 if big => u64::from(u32::MAX) - r.gen_range(0..3),
                1 if big => u64::from(u32::MAX) + r.gen_range(1..1000),
                _ => *w,
            });
        }
    }
    (k2, w2)
}

/// `run` through the u32 path, in the same mixed batch sizes.
fn run_u32(agg: &mut Aggregator, ks: &[FlowKey], ws: &[u64]) -> Log {
    run_as(agg, ks, ws, true)
}

#[test]
fn u32_path_evicts_the_same_sequence_as_the_flowkey_path() {
    for (seed, big) in [(6u64, false), (7, true)] {
        let (iid, iw) = stream(seed, 40_000, 4000, FlowKey::from_u32);
        let (bk, bw) = bursty_stream(seed, 40_000, 4000, big);
        let ones = vec![1u64; bk.len()];
        for (ks, ws) in [(&iid, &iw), (&bk, &bw), (&bk, &ones)] {
            let want = truth(ks, ws);
            for c in grid() {
                let (policy, index, s) = (c.policy, c.index, c.simd);
                let mut a = Aggregator::new(&c, 4).unwrap();
                let mut b = Aggregator::new(&c, 4).unwrap();
                let (la, lb) = (run(&mut a, ks, ws), run_u32(&mut b, ks, ws));
                assert!(la.seq == lb.seq, "{policy} {index} {s} big {big}");
                assert_eq!(a.stats(), b.stats());
                assert_eq!(lb.totals(), want, "{policy} {index} {s}");
                // Narrow mode hands every batch on as u32 keys, `evict_batch` at a time
                // until the flush.
                assert!(lb.kinds.iter().all(|&u| u));
                assert!(lb.seq.iter().all(|(_, w)| *w > 0));
            }
        }
    }
}

#[test]
fn branch_free_grr_evicts_the_same_sequence_as_the_branchy_path() {
    // i.i.d. (mostly singleton chunks), bursty with weights near and above u32::MAX (merged
    // runs that overflow, runs that bypass), and unit weights; small k so arrays fill and
    // evict constantly, and a larger k where inserts into free slots are common.
    let (iid, iw) = stream(11, 30_000, 3000, FlowKey::from_u32);
    let (bk, bw) = bursty_stream(12, 30_000, 3000, true);
    let ones = vec![1u64; iid.len()];
    // i.i.d. with every 5th weight near u32::MAX: hits that overflow on the branch-free path.
    let near: Vec<u64> = iw
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            if i % 5 == 0 {
                u64::from(u32::MAX) - w
            } else {
                w
            }
        })
        .collect();
    for (ks, ws) in [(&iid, &iw), (&bk, &bw), (&iid, &ones), (&iid, &near)] {
        for arrays in [3, 64, 4096] {
            for index in [Index::Modulo, Index::Hash] {
                for s in kernels() {
                    let c = AggConfig {
                        index,
                        ..cfg(arrays, Policy::Grr, s)
                    };
                    let mut old = Aggregator::new(&c, 4).unwrap();
                    old.set_branchy_grr(true);
                    let mut new = Aggregator::new(&c, 4).unwrap();
                    let (lo, ln) = (run_u32(&mut old, ks, ws), run_u32(&mut new, ks, ws));
                    assert!(lo.seq == ln.seq, "{arrays} {index} {s}");
                    assert_eq!(lo.calls, ln.calls);
                    assert_eq!(old.stats(), new.stats());
                    assert_eq!(ln.totals(), truth(ks, ws));
                }
            }
        }
    }
}

#[test]
fn every_backend_matches_scalar_on_the_u32_path_with_trains() {
    let (ks, ws) = bursty_stream(8, 60_000, 5000, true);
    for policy in [Policy::Grr, Policy::Lru] {
        let mut base = Aggregator::new(&cfg(32, policy, Simd::Off), 4).unwrap();
        let want = run_u32(&mut base, &ks, &ws);
        assert_eq!(want.totals(), truth(&ks, &ws));
        for s in kernels() {
            let mut a = Aggregator::new(&cfg(32, policy, s), 4).unwrap();
            assert!(run_u32(&mut a, &ks, &ws).seq == want.seq, "{s} {policy}");
        }
    }
}

#[test]
fn trains_merge_into_one_update_and_never_wrap_a_count() {
    let k = 0x0a00_0001u32;
    let mut a = Aggregator::new(&cfg(4, Policy::Grr, Simd::Auto), 4).unwrap();
    let mut log = Log::default();
    // One train of 32 unit packets: held as one pair of count 32.
    a.update_batch_u32(&[k; 32], &[1; 32], &mut log.sink());
    assert_eq!(a.len(), 1);
    // A train whose sum passes u32::MAX: merged in u64, handed on whole, never wrapped.
    let half = u64::from(u32::MAX / 2 + 7);
    a.update_batch_u32(&[k; 3], &[half, half, 5], &mut log.sink());
    assert_eq!(a.stats().bypassed, 1);
    a.flush(&mut log.sink());
    let total: u64 = 32 + 2 * half + 5;
    assert_eq!(log.totals()[&FlowKey::from_u32(k)], total);
    assert_eq!(
        log.seq,
        vec![
            (FlowKey::from_u32(k), 2 * half + 5),
            (FlowKey::from_u32(k), 32)
        ]
    );
}

#[test]
fn u32_batches_reach_a_fingerprint_mode_aggregator_as_full_keys() {
    let (ks, ws) = bursty_stream(9, 20_000, 3000, false);
    for len in [8usize, 13, 16] {
        let mut a = Aggregator::new(&cfg(8, Policy::Grr, Simd::Auto), len).unwrap();
        let log = run_u32(&mut a, &ks, &ws);
        assert_eq!(log.totals(), truth(&ks, &ws));
        assert!(log.kinds.iter().all(|&u| !u));
        // A u64 (8-byte) aggregator cannot hold 4-byte keys exactly: they pass through.
        let st = a.stats();
        if len == 8 {
            assert_eq!(st.bypassed, st.packets);
        } else {
            assert!(st.evicted < st.packets / 2, "{st:?}");
        }
    }
}

#[test]
fn with_flow_keys_and_fan_out_convert_u32_batches() {
    let us: Vec<u32> = (0..100u32).map(|i| i.wrapping_mul(0x9e37_79b9)).collect();
    let ws: Vec<u64> = (1..=100).collect();
    let mut got = Vec::new();
    with_flow_keys(KeyBatch::U32(&us), &ws, &mut |k, w| {
        got.extend(k.iter().copied().zip(w.iter().copied()))
    });
    let want: Vec<(FlowKey, u64)> = us
        .iter()
        .map(|&u| FlowKey::from_u32(u))
        .zip(ws.clone())
        .collect();
    assert_eq!(got, want);
    // fan_out: u32 batches reach every algorithm through update_batch_u32, with the state
    // of update_batch over the same keys.
    let ctx = algo::BuildCtx::default();
    let mk = || {
        sketch::count_min::ENTRY
            .build(&toml::Table::new(), &ctx)
            .expect("count_min")
    };
    let mut algos = vec![mk(), mk()];
    let mut direct = mk();
    let keys: Vec<FlowKey> = want.iter().map(|x| x.0).collect();
    direct.update_batch(&keys, &ws);
    fan_out(&mut algos)(KeyBatch::U32(&us), &ws);
    for a in &algos {
        for k in &keys {
            assert_eq!(a.flow_size(k), direct.flow_size(k));
            assert!(a.flow_size(k).is_some());
        }
    }
}

#[test]
fn memory_for_is_the_built_aggregators_memory() {
    for policy in [Policy::Grr, Policy::Lru] {
        for arrays in [1usize, 3, 2000] {
            for len in [4usize, 8, 13, 16, 37] {
                let c = cfg(arrays, policy, Simd::Off);
                let a = Aggregator::new(&c, len).unwrap();
                assert_eq!(
                    Aggregator::memory_for(&c, len),
                    a.memory_bytes(),
                    "{policy} {arrays} {len}"
                );
            }
        }
    }
}

#[test]
fn narrow_keys_go_to_their_own_arrays() {
    // Modulo: keys 0..64 (in a scrambled order: i * 37 mod 64 is a permutation) fill the 4
    // arrays of 16 exactly (key % 4), with no eviction; the flush hands them on array by array,
    // slot by slot (insertion order), so grouped by key % 4.
    let us: Vec<u32> = (0..64u32).map(|i| i * 37 % 64).collect();
    let ks: Vec<FlowKey> = us.iter().map(|&u| FlowKey::from_u32(u)).collect();
    let ws = vec![1u64; us.len()];
    let want: Vec<(FlowKey, u64)> = (0..4)
        .flat_map(|a| us.iter().filter(move |&&u| u % 4 == a))
        .map(|&u| (FlowKey::from_u32(u), 1))
        .collect();
    // Hash: 2000 distinct keys over 1024 arrays (16384 slots) spread over ~879 arrays
    // (1024 (1 - e^-1.95)), none of them full, so again no eviction before the flush.
    let hs: Vec<u32> = (0..2000u32).map(|i| i.wrapping_mul(0x9e37_79b9)).collect();
    let hk: Vec<FlowKey> = hs.iter().map(|&u| FlowKey::from_u32(u)).collect();
    let hw = vec![1u64; hs.len()];
    for policy in [Policy::Grr, Policy::Lru] {
        for s in kernels() {
            for u32_path in [true, false] {
                let mut a = Aggregator::new(&cfg(4, policy, s), 4).unwrap();
                let mut log = Log::default();
                if u32_path {
                    a.update_batch_u32(&us, &ws, &mut log.sink());
                } else {
                    a.update_batch(&ks, &ws, &mut log.sink());
                }
                assert_eq!(a.stats().evicted, 0, "{policy} {s}");
                assert_eq!(a.occ, vec![u16::MAX; 4]);
                a.flush(&mut log.sink());
                assert_eq!(log.seq, want, "{policy} {s}");

                let c = AggConfig {
                    index: Index::Hash,
                    ..cfg(1024, policy, s)
                };
                let mut a = Aggregator::new(&c, 4).unwrap();
                let mut log = Log::default();
                if u32_path {
                    a.update_batch_u32(&hs, &hw, &mut log.sink());
                } else {
                    a.update_batch(&hk, &hw, &mut log.sink());
                }
                assert_eq!(a.stats().evicted, 0, "{policy} {s}");
                assert_eq!(a.len(), hs.len());
                let used = a.occ.iter().filter(|&&o| o != 0).count();
                assert!(used > 800, "{used} arrays used");
                a.flush(&mut log.sink());
                assert_eq!(log.totals(), truth(&hk, &hw));
            }
        }
    }
}

#[test]
fn narrow_eviction_buffer_keeps_its_size() {
    // The narrow eviction buffer is allocated once (`evict_batch + CHUNK`) and written by
    // index: running a stream (with evictions, overflowing runs and weights >= 2^32 that pass
    // through it) and flushing leaves the memory `memory_for` gives.
    let (ks, ws) = bursty_stream(15, 20_000, 3000, true);
    for policy in [Policy::Grr, Policy::Lru] {
        for s in kernels() {
            for u32_path in [true, false] {
                let c = AggConfig {
                    evict_batch: 7,
                    ..cfg(8, policy, s)
                };
                let mut a = Aggregator::new(&c, 4).unwrap();
                let want = Aggregator::memory_for(&c, 4);
                assert_eq!(a.memory_bytes(), want);
                let log = run_as(&mut a, &ks, &ws, u32_path);
                assert_eq!(log.totals(), truth(&ks, &ws));
                assert!(a.stats().evicted > 1000 && a.stats().bypassed > 0);
                assert_eq!((a.out_u32.len(), a.out_uw.len()), (7 + CHUNK, 7 + CHUNK));
                assert_eq!(a.memory_bytes(), want, "{policy} {s} u32 {u32_path}");
            }
        }
    }
}

#[test]
fn narrow_push_past_the_buffer_grows_it() {
    // `push_u32` past the buffer's end (the chunk loops drain after every chunk, so they never
    // get there) grows the buffer rather than drop or misplace an update.
    let c = AggConfig {
        evict_batch: 4,
        ..cfg(1, Policy::Grr, Simd::Off)
    };
    let mut a = Aggregator::new(&c, 4).unwrap();
    assert_eq!(a.out_u32.len(), 4 + CHUNK);
    let n = 3 * (4 + CHUNK) + 1;
    let want: Vec<(FlowKey, u64)> = (0..n)
        .map(|i| (FlowKey::from_u32(3 * i as u32), i as u64 + 1))
        .collect();
    for &(k, w) in &want {
        a.push_u32(k.prefix_u32(), w);
    }
    assert_eq!(a.out_n, n);
    assert_eq!(a.stats().evicted, n as u64);
    let mut log = Log::default();
    a.drain_u32(&mut log.sink());
    assert_eq!((log.calls, a.out_n), (n / 4, n % 4));
    a.flush(&mut log.sink());
    assert_eq!(log.seq, want);
    assert_eq!(a.out_n, 0);
}

#[test]
fn branchy_flag_and_scalar_kernel_take_the_branchy_lookup() {
    // Narrow GRR has two lookups that must evict the same sequence (tested above against each
    // other): the branch-free one for SIMD kernels, the branchy one for the scalar kernel and
    // under `set_branchy_grr`. Only the branch-free lookup stores a hit's key to `scratch`, so
    // `scratch` tells which one ran (if the flag were ignored, that equivalence test would
    // compare the branch-free lookup with itself).
    let (k, x) = (0x0a00_0001u32, 0x0a00_0002u32);
    for s in kernels() {
        for branchy in [false, true] {
            let mut a = Aggregator::new(&cfg(4, Policy::Grr, s), 4).unwrap();
            a.set_branchy_grr(branchy);
            // Three runs; the third is a hit on `k`.
            a.update_batch_u32(&[k, x, k], &[1, 1, 1], &mut |_, _| {});
            let branch_free = s != Simd::Off && !branchy;
            assert_eq!(a.scratch, if branch_free { k } else { 0 }, "{s} {branchy}");
            assert_eq!(a.len(), 2);
        }
    }
}

/// Packed IPv4 tuples (`KeyBatch::V4`) of every kind, into aggregators sized for IPv4 (narrow,
/// u64, u128) and for IPv6 (full keys): exactly the evictions, in order, and the counters of
/// the same packets given as `FlowKey`s, with trains and weights past u32 (bypasses).
#[test]
fn packed_tuples_evict_the_same_sequence_as_their_keys() {
    let mut r = Pcg64::seed_from_u64(11);
    // 3000 tuples, skewed ranks in trains; tuples share addresses (so kinds collapse them
    // differently): rank -> source rank / 7, destination rank % 13.
    let tuple = |rank: u32| {
        key::V4::new(
            (rank / 7).to_be_bytes(),
            (rank % 13 + 1000).to_be_bytes(),
            (rank % 5) as u16,
            443,
            if rank.is_multiple_of(2) { 6 } else { 17 },
        )
    };
    let (mut vs, mut ws) = (vec![], vec![]);
    while vs.len() < 30_000 {
        let u: f64 = r.gen();
        let v = tuple(((u * u * u) * 3000.0) as u32);
        for _ in 0..r.gen_range(1..4) {
            vs.push(v);
            ws.push(if r.gen_range(0..500) == 0 {
                u64::from(u32::MAX) + 5
            } else {
                r.gen_range(1..=1500)
            });
        }
    }
    for kind in KeyKind::ALL {
        let ks: Vec<FlowKey> = vs.iter().map(|v| v.key(kind)).collect();
        for key_len in [kind.len(false), kind.len(true)] {
            for c in grid() {
                let (policy, index, s) = (c.policy, c.index, c.simd);
                let mut a = Aggregator::new(&c, key_len).unwrap();
                let mut b = Aggregator::new(&c, key_len).unwrap();
                let (mut la, mut lb) = (Log::default(), Log::default());
                // Mixed batch sizes, the same pieces for both: each 77 in two.
                let mut at = 0;
                for (i, w) in ws.chunks(77).enumerate() {
                    for w in [&w[..i % 77], &w[i % 77..]] {
                        let e = at + w.len();
                        a.update(KeyBatch::Keys(&ks[at..e]), w, &mut la.sink());
                        b.update(KeyBatch::V4(&vs[at..e], kind), w, &mut lb.sink());
                        at = e;
                    }
                }
                a.flush(&mut la.sink());
                b.flush(&mut lb.sink());
                let what = format!("{kind} {key_len} {policy} {index} {s}");
                assert!(la.seq == lb.seq, "{what}");
                assert_eq!(a.stats(), b.stats(), "{what}");
                assert_eq!(lb.totals(), truth(&ks, &ws), "{what}");
            }
        }
    }
}

/// `Packed::from_v4` is `Packed::pack` of the kind's key, for every representation and kind.
#[test]
fn packed_tuple_bits_are_the_packed_keys() {
    use wide::Packed;
    let mut r = Pcg64::seed_from_u64(12);
    for _ in 0..2000 {
        let v = key::V4::new(r.gen(), r.gen(), r.gen(), r.gen(), r.gen());
        for kind in KeyKind::ALL {
            let k = v.key(kind);
            assert_eq!(u64::from_v4(v, kind), u64::pack(&k), "{kind}");
            assert_eq!(u128::from_v4(v, kind), u128::pack(&k), "{kind}");
            assert_eq!(FlowKey::from_v4(v, kind), FlowKey::pack(&k), "{kind}");
        }
    }
}
