//! Lemma 4.1 (SketchVisor section 4.2, appendix B) over random streams, for Algorithm 1 and,
//! with its own counter, for the Misra-Gries baseline:
//! - every tracked flow: `lo <= true <= hi` (`r + d <= true <= r + d + e`);
//! - every flow whose weight exceeds `E` is tracked;
//! - `V` is the weight offered, `sum lo <= V`, at most k flows tracked;
//! - merged over hosts with disjoint packets: `lo <= true` and `true <= hi + E`.

use key::{FlowKey, KeyMap};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use visor::{FastPath, FastTable, MgFastPath, Summary};

fn check(t: &dyn FastTable, truth: &KeyMap<u64>, offered: u64) -> Result<(), TestCaseError> {
    let s = t.summary();
    prop_assert_eq!(s.v, offered);
    prop_assert_eq!(t.total(), offered);
    prop_assert!(s.flows.len() <= t.capacity());
    prop_assert!(s.lows() <= s.v);
    for f in &s.flows {
        let v = truth.get(&f.key).copied().unwrap_or(0);
        prop_assert!(
            f.lo <= v && v <= f.hi,
            "{}: {} <= {} <= {}",
            f.key,
            f.lo,
            v,
            f.hi
        );
    }
    for (k, &v) in truth {
        if v > s.e {
            prop_assert!(s.get(k).is_some(), "{k}: {v} > E = {} but untracked", s.e);
        }
    }
    Ok(())
}

/// A stream over `flows` keys, skewed (key `i` drawn with weight ~ 1/(i+1)) by squaring a
/// uniform index, with packet sizes from `sizes`.
fn stream() -> impl Strategy<Value = (usize, Vec<(u32, u64)>)> {
    (1usize..24, 2u32..200).prop_flat_map(|(k, flows)| {
        let pkt = (0..flows, 0u32..4, 1u64..1500).prop_map(move |(a, shape, w)| {
            // Shapes: uniform keys, skewed keys; unit weights, byte weights.
            let key = if shape & 1 == 0 { a } else { (a * a) / flows };
            let w = if shape & 2 == 0 { 1 } else { w };
            (key, w)
        });
        (Just(k), proptest::collection::vec(pkt, 0..600))
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        rng_seed: RngSeed::Fixed(0x5eed),
        cases: 256,
        ..ProptestConfig::default()
    })]

    #[test]
    fn lemma_4_1_holds_after_every_update((k, pkts) in stream()) {
        let mut sv = FastPath::with_capacity(k, 1);
        let mut mg = MgFastPath::with_capacity(k, 1);
        let mut truth = KeyMap::default();
        let mut offered = 0;
        for &(f, w) in &pkts {
            let key = FlowKey::from_u32(f);
            sv.update(&key, w);
            mg.update(&key, w);
            *truth.entry(key).or_insert(0) += w;
            offered += w;
            check(&sv, &truth, offered)?;
            check(&mg, &truth, offered)?;
        }
        prop_assert!(sv.summary().e <= offered);
    }

    #[test]
    fn merged_bounds_hold_for_the_whole_network(
        (k, pkts) in stream(),
        hosts in 1usize..5,
    ) {
        // Hosts see disjoint packets (any split of the stream, here round-robin by packet).
        let mut fps: Vec<FastPath> = (0..hosts).map(|h| FastPath::with_capacity(k, h as u64)).collect();
        let mut truth = KeyMap::default();
        for (i, &(f, w)) in pkts.iter().enumerate() {
            let key = FlowKey::from_u32(f);
            fps[i % hosts].update(&key, w);
            *truth.entry(key).or_insert(0u64) += w;
        }
        let parts: Vec<Summary> = fps.iter().map(|f| f.summary()).collect();
        let m = Summary::merge(&parts);
        prop_assert_eq!(m.v, pkts.iter().map(|p| p.1).sum::<u64>());
        prop_assert_eq!(m.e, parts.iter().map(|p| p.e).sum::<u64>());
        for t in &m.flows {
            let v = truth[&t.key];
            // On hosts that do not track the flow it had at most their E.
            let missed: u64 = parts.iter().filter(|p| p.get(&t.key).is_none()).map(|p| p.e).sum();
            prop_assert!(t.lo <= v && v <= t.hi + missed, "{}: {} {} {} +{}", t.key, t.lo, v, t.hi, missed);
        }
    }
}

/// Lemma 4.1 on a long Zipf stream of byte weights with the default 8 KB table, checked at the
/// end (the property test covers every step of short streams).
#[test]
fn lemma_4_1_on_a_zipf_stream() {
    let keys = testkit::zipf_keys(300_000, 50_000, 1.1, 3);
    let mut sv = FastPath::new(visor::DEFAULT_BYTES, 4, 3).unwrap();
    let mut mg = MgFastPath::new(visor::DEFAULT_BYTES, 4, 3).unwrap();
    let mut truth = KeyMap::default();
    let mut offered = 0;
    for (i, k) in keys.iter().enumerate() {
        let w = 64 + (i as u64 * 7919) % 1437;
        sv.update(k, w);
        mg.update(k, w);
        *truth.entry(*k).or_insert(0) += w;
        offered += w;
    }
    check(&sv, &truth, offered).unwrap();
    check(&mg, &truth, offered).unwrap();
    assert_eq!(sv.capacity(), 292);
    assert_eq!(sv.len(), sv.summary().flows.len());
}
