//! Agg-Evict never changes an answer (DESIGN.md invariants; ALGORITHMS.md sections 0 and 12).
//!
//! Every test runs one stream (Zipf(1.1), mixed batch sizes) straight into an algorithm and
//! through an aggregator small enough (64 arrays = 1024 slots) that most updates are
//! evictions, plus the epoch-end flush, into a second copy built with the same config and seed,
//! and compares the two: bit for bit for the order-independent algorithms, against their own
//! guarantees (and exact truth) for the order-dependent ones.

use std::collections::BTreeMap;

use aggevict::{AggConfig, Aggregator, Index, KeyBatch, Policy, Simd};
use algo::{Algorithm, BuildCtx};
use key::FlowKey;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

const BATCHES: [usize; 7] = [32, 1, 7, 100, 3, 8192, 64];

struct Stream {
    keys: Vec<FlowKey>,
    weights: Vec<u64>,
    truth: BTreeMap<FlowKey, u64>,
    total: u64,
}

/// The key of Zipf rank `r` for key length `len`. Rank 0 (the heaviest flow) is key 0.
fn key_of(r: u64, len: usize) -> FlowKey {
    if r == 0 {
        return FlowKey::from_bytes(&vec![0u8; len]).unwrap_or_default();
    }
    let mut b = [0u8; 40];
    for (i, c) in b.chunks_exact_mut(8).enumerate() {
        c.copy_from_slice(&key::mix64(r ^ ((i as u64) << 56)).to_le_bytes());
    }
    FlowKey::from_bytes(&b[..len]).unwrap_or_default()
}

/// `n` packets of Zipf(1.1) over `universe` ranks (`testkit::Zipf`, drawn from the same RNG as
/// the key kind and the weight); `bytes`: weights 40..=1500, else 1.
/// `v6_share`: fraction of packets replaced by 16-byte keys (for the narrow-mode bypass).
fn zipf(
    seed: u64,
    n: usize,
    universe: usize,
    key_len: usize,
    bytes: bool,
    v6_share: f64,
) -> Stream {
    let zipf = testkit::Zipf::new(universe, 1.1);
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut keys = Vec::with_capacity(n);
    let mut weights = Vec::with_capacity(n);
    for _ in 0..n {
        let r = u64::from(zipf.sample(&mut rng));
        let k = if rng.gen::<f64>() < v6_share {
            key_of(r, 16)
        } else {
            key_of(r, key_len)
        };
        keys.push(k);
        weights.push(if bytes { rng.gen_range(40..=1500) } else { 1 });
    }
    let mut truth = BTreeMap::new();
    for (k, w) in keys.iter().zip(&weights) {
        *truth.entry(*k).or_insert(0) += w;
    }
    let total = weights.iter().sum();
    Stream {
        keys,
        weights,
        truth,
        total,
    }
}

fn build(name: &str, params: &str, key_len: usize) -> Box<dyn Algorithm> {
    let t: toml::Table = toml::from_str(params).expect("params");
    let ctx = BuildCtx {
        key_len,
        ..BuildCtx::default()
    };
    catalog::build(name, &t, &ctx).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn direct(a: &mut dyn Algorithm, s: &Stream) {
    let mut i = 0;
    for b in BATCHES.iter().cycle() {
        if i >= s.keys.len() {
            break;
        }
        let e = (i + b).min(s.keys.len());
        a.update_batch(&s.keys[i..e], &s.weights[i..e]);
        i = e;
    }
}

/// Through an aggregator into `a`. `via_u32`: 4-byte keys enter through `update_batch_u32` (the
/// stream must hold only 4-byte keys) and narrow-mode evictions reach `a` as u32 batches
/// (`Algorithm::update_batch_u32`).
fn aggregated(
    a: &mut dyn Algorithm,
    s: &Stream,
    cfg: &AggConfig,
    key_len: usize,
    via_u32: bool,
) -> Aggregator {
    let mut agg = Aggregator::new(cfg, key_len).expect("aggregator");
    let mut sink = |k: KeyBatch<'_>, w: &[u64]| k.feed(a, w);
    let us: Vec<u32> = if via_u32 {
        assert!(s.keys.iter().all(|k| k.len() == 4));
        s.keys.iter().map(|k| k.prefix_u32()).collect()
    } else {
        Vec::new()
    };
    let mut i = 0;
    for b in BATCHES.iter().cycle() {
        if i >= s.keys.len() {
            break;
        }
        let e = (i + b).min(s.keys.len());
        if via_u32 {
            agg.update_batch_u32(&us[i..e], &s.weights[i..e], &mut sink);
        } else {
            agg.update_batch(&s.keys[i..e], &s.weights[i..e], &mut sink);
        }
        i = e;
    }
    agg.flush(&mut sink);
    assert!(agg.is_empty());
    agg
}

fn small(policy: Policy) -> AggConfig {
    AggConfig {
        arrays: 64,
        policy,
        ..AggConfig::default()
    }
}

/// (direct, aggregated) copies of `name` fed with `s`.
fn pair(
    name: &str,
    params: &str,
    s: &Stream,
    cfg: &AggConfig,
    key_len: usize,
) -> (Box<dyn Algorithm>, Box<dyn Algorithm>) {
    pair_via(name, params, s, cfg, key_len, false)
}

/// The u32 paths for 4-byte keys (`update_batch_u32` in, u32 eviction batches out), else `pair`.
fn pairs(
    name: &str,
    params: &str,
    s: &Stream,
    cfg: &AggConfig,
    key_len: usize,
) -> Vec<(Box<dyn Algorithm>, Box<dyn Algorithm>)> {
    let mut v = vec![pair_via(name, params, s, cfg, key_len, false)];
    if key_len == 4 && s.keys.iter().all(|k| k.len() == 4) {
        v.push(pair_via(name, params, s, cfg, key_len, true));
    }
    v
}

fn pair_via(
    name: &str,
    params: &str,
    s: &Stream,
    cfg: &AggConfig,
    key_len: usize,
    via_u32: bool,
) -> (Box<dyn Algorithm>, Box<dyn Algorithm>) {
    let mut a = build(name, params, key_len);
    let mut b = build(name, params, key_len);
    direct(a.as_mut(), s);
    let agg = aggregated(b.as_mut(), s, cfg, key_len, via_u32);
    let st = agg.stats();
    assert_eq!(st.packets, s.keys.len() as u64);
    // The point of the exercise: far fewer updates reach the algorithm than packets.
    assert!(
        st.evicted_share() < 0.9,
        "{name}: aggregation did nothing: {st:?}"
    );
    assert!(
        st.evicted > st.flushed,
        "{name}: evictions must happen before the flush"
    );
    (a, b)
}

fn down<T: Algorithm>(a: &dyn Algorithm) -> &T {
    algo::downcast::<T>(a).expect("concrete type")
}

fn stream4() -> Stream {
    zipf(11, 120_000, 20_000, 4, false, 0.0)
}

// ---- class A and B: identical state ------------------------------------------------------

/// Concrete types with `PartialEq` over their whole state.
macro_rules! identical {
    ($test:ident, $name:literal, $params:literal, $ty:ty, $len:expr) => {
        #[test]
        fn $test() {
            let len: usize = $len;
            let s = zipf(21, 100_000, 20_000, len, false, 0.0);
            for policy in [Policy::Grr, Policy::Lru] {
                for (a, b) in pairs($name, $params, &s, &small(policy), len) {
                    let (a, b) = (down::<$ty>(a.as_ref()), down::<$ty>(b.as_ref()));
                    assert!(a == b, concat!($name, ": state differs under {:?}"), policy);
                    assert_eq!(
                        serde_json::to_value(a).unwrap(),
                        serde_json::to_value(b).unwrap()
                    );
                }
            }
        }
    };
}

identical!(
    rev_sketch_identical,
    "rev_sketch",
    "",
    reversible::RevSketch,
    4
);
identical!(deltoid_identical, "deltoid", "", reversible::Deltoid, 4);
identical!(
    deltoid_identical_wide,
    "deltoid",
    "",
    reversible::Deltoid,
    13
);
identical!(
    two_level_identical_pairs,
    "two_level",
    "",
    reversible::TwoLevel,
    8
);
identical!(fm_identical, "fm", "", distinct::Fm, 4);
identical!(kmin_identical, "kmin", "", distinct::KMin, 4);
identical!(kmin_identical_wide, "kmin", "", distinct::KMin, 13);
identical!(
    linear_counting_identical,
    "linear_counting",
    "",
    distinct::LinearCounting,
    4
);
identical!(
    hyperloglog_identical,
    "hyperloglog",
    "",
    distinct::HyperLogLog,
    4
);
identical!(
    hyperloglog_identical_wide,
    "hyperloglog",
    "",
    distinct::HyperLogLog,
    37
);

#[test]
fn mrac_identical() {
    let s = stream4();
    for (a, b) in pairs("mrac", "", &s, &small(Policy::Grr), 4) {
        let (a, b) = (
            down::<sketch::Mrac>(a.as_ref()),
            down::<sketch::Mrac>(b.as_ref()),
        );
        assert_eq!(a.counters(), b.counters());
        assert_eq!(
            serde_json::to_value(a).unwrap(),
            serde_json::to_value(b).unwrap()
        );
        assert_eq!(
            a.counters().iter().map(|&c| u64::from(c)).sum::<u64>(),
            s.total
        );
    }
}

/// Count-Min: counters bit-equal; the candidate set is order-dependent, but every true heavy
/// hitter at or above the candidate threshold is reported by both (ALGORITHMS.md 2).
fn count_min_like(len: usize, bytes: bool, v6: f64, cfg: &AggConfig) {
    let s = zipf(31, 120_000, 20_000, len, bytes, v6);
    for (a, b) in pairs("count_min", "candidates = 64", &s, cfg, len) {
        let (ca, cb) = (
            down::<sketch::CountMin>(a.as_ref()),
            down::<sketch::CountMin>(b.as_ref()),
        );
        assert!(
            ca.matrix().counters() == cb.matrix().counters(),
            "counters differ"
        );
        for x in [ca, cb] {
            let t = x.candidate_threshold().max(s.total / 500).max(1);
            let hh: Vec<FlowKey> = x
                .heavy_hitters(t)
                .unwrap()
                .into_iter()
                .map(|e| e.0)
                .collect();
            let mut true_hh = 0;
            for (k, &f) in &s.truth {
                assert!(x.estimate(k) >= f, "CM never under-estimates");
                if f >= t {
                    true_hh += 1;
                    assert!(hh.contains(k), "true HH {k} (f = {f}, T = {t}) missed");
                }
            }
            assert!(true_hh > 0);
        }
    }
}

#[test]
fn count_min_identical_counters_packets_grr() {
    count_min_like(4, false, 0.0, &small(Policy::Grr));
}

#[test]
fn count_min_identical_counters_bytes_lru_hash_index() {
    let cfg = AggConfig {
        index: Index::Hash,
        ..small(Policy::Lru)
    };
    count_min_like(4, true, 0.0, &cfg);
}

#[test]
fn count_min_identical_counters_five_tuples() {
    count_min_like(13, true, 0.0, &small(Policy::Grr));
}

#[test]
fn count_min_identical_with_ipv6_bypass() {
    // An IPv4-keyed run (narrow mode) meeting 5% IPv6 packets: they bypass, nothing is lost.
    count_min_like(4, false, 0.05, &small(Policy::Grr));
    let s = zipf(32, 50_000, 5_000, 4, false, 0.05);
    let mut b = build("count_min", "", 4);
    let agg = aggregated(b.as_mut(), &s, &small(Policy::Grr), 4, false);
    let v6 = s.keys.iter().filter(|k| k.len() == 16).count() as u64;
    assert!(v6 > 1000);
    assert_eq!(agg.stats().bypassed, v6);
}

#[test]
fn count_min_identical_every_backend() {
    for simd in [Simd::Avx512, Simd::Avx2, Simd::Sse2, Simd::Off] {
        if aggevict::simd::available(simd) {
            let cfg = AggConfig {
                simd,
                ..small(Policy::Grr)
            };
            count_min_like(4, false, 0.0, &cfg);
        }
    }
}

#[test]
fn count_array_identical_counters() {
    let s = stream4();
    for (a, b) in pairs("count_array", "width = 65536", &s, &small(Policy::Grr), 4) {
        let (ca, cb) = (
            down::<sketch::CountArray>(a.as_ref()),
            down::<sketch::CountArray>(b.as_ref()),
        );
        assert!(ca.matrix().counters() == cb.matrix().counters());
        for x in [ca, cb] {
            let t = x.candidate_threshold().max(s.total / 500);
            let hh: Vec<FlowKey> = x
                .heavy_hitters(t)
                .unwrap()
                .into_iter()
                .map(|e| e.0)
                .collect();
            for (k, &f) in &s.truth {
                if f >= t {
                    assert!(hh.contains(k), "true HH {k} missed");
                }
            }
        }
    }
}

#[test]
fn count_sketch_identical_counters() {
    let s = zipf(41, 100_000, 20_000, 4, true, 0.0);
    for (a, b) in pairs("count_sketch", "", &s, &small(Policy::Lru), 4) {
        let (ca, cb) = (
            down::<sketch::CountSketch>(a.as_ref()),
            down::<sketch::CountSketch>(b.as_ref()),
        );
        assert!(ca.matrix().counters() == cb.matrix().counters());
        for k in s.truth.keys().take(2000) {
            assert_eq!(ca.estimate(k), cb.estimate(k));
        }
    }
}

#[test]
fn univmon_identical_counters() {
    let s = stream4();
    for (a, b) in pairs("univmon", "", &s, &small(Policy::Grr), 4) {
        let (ua, ub) = (
            down::<sketch::UnivMon>(a.as_ref()),
            down::<sketch::UnivMon>(b.as_ref()),
        );
        // The Count Sketches of every level are linear: bit-equal. The per-level top-k heaps are
        // order-dependent (ALGORITHMS.md 6, 12) and UnivMon exposes no bound to test them against,
        // so they are not compared.
        assert_eq!(ua.total(), ub.total());
        assert_eq!(ua.total(), s.total);
        assert!(ua.level_counters() == ub.level_counters());
    }
}

#[test]
fn flow_radar_identical_without_false_positives() {
    for (len, policy) in [(4, Policy::Grr), (13, Policy::Lru)] {
        let s = zipf(51, 100_000, 20_000, len, false, 0.0);
        for (a, b) in pairs("flow_radar", "", &s, &small(policy), len) {
            let (fa, fb) = (
                down::<table::FlowRadar>(a.as_ref()),
                down::<table::FlowRadar>(b.as_ref()),
            );
            // With no Bloom-filter false positive each flow enters the flow set exactly once
            // whatever the order, and packet counts add: the state is order-independent
            // (ALGORITHMS.md 3). The default filter (16.7 M bits, 4 hashes) makes a false positive
            // among ~10^4 flows vanishingly unlikely; check that none happened in either run.
            let n = s.truth.len() as f64;
            assert_eq!(fa.flows_inserted(), n);
            assert_eq!(fb.flows_inserted(), n);
            assert!(fa == fb, "flow_radar state differs ({len}-byte keys)");
            let (da, db) = (fa.decode(), fb.decode());
            assert!(da.is_complete());
            assert!(da == db);
            assert_eq!(da.flows().len(), s.truth.len());
            for (k, f) in &s.truth {
                assert_eq!(da.flows().get(k), Some(f));
            }
        }
    }
}

/// ewma_change keeps exact per-flow counts and predictions (ALGORITHMS.md 12: "yes (exact
/// per-flow state)"): over several epochs, each fed directly or through the aggregator and ended
/// with `reset` (which folds the epoch into the predictions), the two models are equal, flow
/// by flow, and so are their heavy changers.
#[test]
fn ewma_change_identical_over_epochs() {
    for (len, bytes) in [(4, false), (13, true)] {
        let (mut a, mut b) = (
            build("ewma_change", "alpha = 0.25", len),
            build("ewma_change", "alpha = 0.25", len),
        );
        for epoch in 0..4u64 {
            // Another draw each epoch, so predictions and counts differ.
            let s = zipf(90 + epoch, 60_000, 10_000, len, bytes, 0.0);
            direct(a.as_mut(), &s);
            let agg = aggregated(b.as_mut(), &s, &small(Policy::Grr), len, false);
            assert!(agg.stats().evicted_share() < 0.9);
            let (ea, eb) = (
                down::<table::EwmaChange>(a.as_ref()),
                down::<table::EwmaChange>(b.as_ref()),
            );
            assert!(
                ea == eb,
                "ewma_change differs in epoch {epoch} ({len}-byte keys)"
            );
            for (k, &f) in &s.truth {
                assert_eq!(ea.flow_size(k), Some(f));
            }
            if epoch > 0 {
                let t = s.total / 1000;
                let (ha, hb) = (
                    a.heavy_changers(a.as_ref(), t).unwrap(),
                    b.heavy_changers(b.as_ref(), t).unwrap(),
                );
                assert!(!ha.is_empty());
                assert_eq!(ha, hb);
            }
            a.reset();
            b.reset();
        }
        assert!(down::<table::EwmaChange>(a.as_ref()) == down::<table::EwmaChange>(b.as_ref()));
    }
}

/// Pair keys whose source is one of `hosts` hosts (Zipf rank modulo `hosts`) and whose
/// destination is the rank's own address: hosts with tens to thousands of distinct peers.
fn spread_stream(seed: u64, n: usize, hosts: u64) -> Stream {
    let zipf = testkit::Zipf::new(20_000, 1.1);
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut keys = Vec::with_capacity(n);
    for _ in 0..n {
        let r = u64::from(zipf.sample(&mut rng));
        // Spread the ranks over the hosts unevenly: host h gets every rank with r % hosts == h.
        let src = (r % hosts) as u32 + 1;
        let dst = key::mix64(r) as u32;
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&src.to_be_bytes());
        b[4..].copy_from_slice(&dst.to_be_bytes());
        keys.push(FlowKey::from_bytes(&b).unwrap());
    }
    let weights = vec![1; n];
    let mut truth = BTreeMap::new();
    for k in &keys {
        *truth.entry(*k).or_insert(0) += 1;
    }
    Stream {
        keys,
        weights,
        truth,
        total: n as u64,
    }
}

/// Per host: (distinct-peer counter, filter words), from the serialized state (the slots of
/// the hosts follow their first arrival, which the aggregator reorders).
fn bloom_hosts(a: &dyn Algorithm) -> BTreeMap<String, (u64, Vec<u64>)> {
    let b = down::<distinct::BloomSpreader>(a);
    let v = serde_json::to_value(b).unwrap();
    let words = b.config().bits.div_ceil(64);
    let hosts = v["hosts"].as_array().unwrap();
    let counts = v["counts"].as_array().unwrap();
    let filters: Vec<u64> = v["filters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_u64().unwrap())
        .collect();
    assert_eq!(hosts.len(), b.hosts());
    hosts
        .iter()
        .enumerate()
        .map(|(i, h)| {
            (
                h.to_string(),
                (
                    counts[i].as_u64().unwrap(),
                    filters[i * words..(i + 1) * words].to_vec(),
                ),
            )
        })
        .collect()
}

/// bloom_spreader (ALGORITHMS.md 11): each host's Bloom filter is idempotent, so the filters
/// are identical behind the aggregator; its counter grows only on a peer new to the filter, so
/// which peers a false positive hides depends on order (class C). With a filter large enough
/// for no false positive, the counters are the exact distinct peers and the states are equal
/// host by host; with the paper's 1024 bits they differ, and both keep "never above the truth".
#[test]
fn bloom_spreader_identical_filters_and_bounded_counters() {
    let s = spread_stream(95, 100_000, 40);
    let mut peers: BTreeMap<FlowKey, u64> = BTreeMap::new();
    for k in s.truth.keys() {
        *peers.entry(k.src_part().unwrap()).or_insert(0) += 1;
    }
    assert!(peers.values().any(|&p| p > 128), "{peers:?}");
    for policy in [Policy::Grr, Policy::Lru] {
        // No false positive: equal state, exact counters.
        let (a, b) = pair("bloom_spreader", "bits = 65536", &s, &small(policy), 8);
        let (ha, hb) = (bloom_hosts(a.as_ref()), bloom_hosts(b.as_ref()));
        assert_eq!(ha, hb, "{policy:?}");
        for x in [a.as_ref(), b.as_ref()] {
            let bs = down::<distinct::BloomSpreader>(x);
            for (h, &p) in &peers {
                assert_eq!(bs.count(h), p, "{h}");
            }
            let mut sp = x.spreaders(128).unwrap();
            sp.sort();
            let mut want: Vec<(FlowKey, u64)> = peers
                .iter()
                .filter(|e| *e.1 > 128)
                .map(|(h, &p)| (*h, p))
                .collect();
            want.sort();
            assert_eq!(sp, want);
        }
        // The paper's filter: identical filters, counters at most the truth in both runs.
        let (a, b) = pair("bloom_spreader", "", &s, &small(policy), 8);
        let (ha, hb) = (bloom_hosts(a.as_ref()), bloom_hosts(b.as_ref()));
        assert_eq!(ha.len(), hb.len());
        let mut under = 0u64;
        for (h, (ca, fa)) in &ha {
            let (cb, fb) = &hb[h];
            assert_eq!(fa, fb, "{h}: filters differ under {policy:?}");
            under += u64::from(ca != cb);
        }
        for x in [a.as_ref(), b.as_ref()] {
            let bs = down::<distinct::BloomSpreader>(x);
            for (h, &p) in &peers {
                assert!(bs.count(h) <= p, "{h}: {} > {p}", bs.count(h));
            }
        }
        // The regime this case is about: false positives made some counters order-dependent.
        assert!(
            under > 0,
            "{policy:?}: no counter differs; the case tests nothing order-dependent"
        );
    }
}

// ---- exact tables ---------------------------------------------------------------------------

fn entries(a: &dyn Algorithm) -> BTreeMap<FlowKey, u64> {
    if let Some(t) = algo::downcast::<table::LinearHash>(a) {
        assert_eq!(t.dropped().updates, 0);
        return t.entries().collect();
    }
    let t = down::<table::Cuckoo>(a);
    assert_eq!(t.dropped().updates, 0);
    t.entries().collect()
}

#[test]
fn exact_tables_identical_counts() {
    for (name, len) in [
        ("linear_hash", 4),
        ("linear_hash", 13),
        ("cuckoo1", 4),
        ("cuckoo4", 8),
    ] {
        let s = zipf(61, 80_000, 20_000, len, true, 0.0);
        let (a, b) = pair(name, "", &s, &small(Policy::Grr), len);
        let (ea, eb) = (entries(a.as_ref()), entries(b.as_ref()));
        assert_eq!(ea, s.truth, "{name}");
        assert_eq!(eb, s.truth, "{name} behind the aggregator");
    }
}

// ---- class C: guarantees against exact truth ------------------------------------------------

#[test]
fn space_saving_and_heap_keep_their_guarantees() {
    for policy in [Policy::Grr, Policy::Lru] {
        let s = zipf(71, 120_000, 20_000, 4, false, 0.0);
        let n = s.total;
        let (a, b) = pair("space_saving", "k = 128", &s, &small(policy), 4);
        for x in [a.as_ref(), b.as_ref()] {
            let ss = down::<table::SpaceSaving>(x);
            assert_eq!(ss.total(), n);
            let e: Vec<(FlowKey, u64, u64)> = ss.entries().collect();
            assert_eq!(e.iter().map(|x| x.1).sum::<u64>(), n, "sum c = N");
            let min = ss.min_count();
            assert!(min <= n / 128, "c_min <= N/k");
            for (k, c, eps) in &e {
                let f = s.truth.get(k).copied().unwrap_or(0);
                assert!(c - eps <= f && f <= *c, "{k}: {c}-{eps} vs {f}");
            }
            for (k, &f) in &s.truth {
                if f > min {
                    assert!(
                        e.iter().any(|x| x.0 == *k),
                        "{k} (f = {f} > {min}) not monitored"
                    );
                }
            }
        }
        let (a, b) = pair("heap", "k = 128", &s, &small(policy), 4);
        for x in [a.as_ref(), b.as_ref()] {
            let h = down::<table::Heap>(x);
            let e: Vec<(FlowKey, u64)> = h.entries().collect();
            assert_eq!(e.iter().map(|x| x.1).sum::<u64>(), n);
            let min = h.min_count();
            assert!(min <= n / 128);
            for (k, c) in &e {
                assert!(s.truth.get(k).copied().unwrap_or(0) <= *c);
            }
            // Top-k guarantee: every key above c_min (so every key above N/k) is monitored.
            for (k, &f) in &s.truth {
                if f > min {
                    assert!(e.iter().any(|x| x.0 == *k), "{k} (f = {f}) not in heap");
                }
            }
        }
    }
}

#[test]
fn misra_gries_keeps_its_guarantee() {
    let s = zipf(81, 120_000, 20_000, 4, true, 0.0);
    let (a, b) = pair("misra_gries", "k = 128", &s, &small(Policy::Grr), 4);
    for x in [a.as_ref(), b.as_ref()] {
        let mg = down::<table::MisraGries>(x);
        assert_eq!(mg.total(), s.total);
        let slack = mg.slack();
        assert!(slack <= s.total / 129);
        let e: BTreeMap<FlowKey, u64> = mg.entries().collect();
        for (k, &f) in &s.truth {
            let c = e.get(k).copied().unwrap_or(0);
            // f - (N - sum c)/(k+1) <= c <= f (ALGORITHMS.md 10).
            assert!(c <= f && f <= c + slack, "{k}: c {c} f {f} slack {slack}");
        }
    }
}
