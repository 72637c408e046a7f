//! The FIFO model: deterministic, every packet on exactly one path, and the share it forces.

use gen::{Generator, Order, Size, Spec};
use key::{KeyKind, KeyMap};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use visor::{FastPath, FastTable, Fifo, Path};

fn spec(order: Order) -> Spec {
    Spec {
        packets: 200_000,
        flows: 20_000,
        skew: 1.1,
        seed: 11,
        size: Size::Mix,
        order,
        rate_pps: 2e6,
        ..Spec::default()
    }
}

fn paths(g: &Generator, mpps: f64, depth: u32) -> (Vec<Path>, Fifo) {
    let mut f = Fifo::new(mpps, depth, 1.0).unwrap();
    let mut v = Vec::new();
    g.for_each(|p| v.push(f.offer_at(p.ts_ns, u64::from(p.wire_len))));
    (v, f)
}

#[test]
fn the_same_trace_splits_the_same_way() {
    for order in [Order::Shuffled, Order::Bursty] {
        let g = Generator::new(&spec(order)).unwrap();
        let (a, fa) = paths(&g, 1.4, 256);
        let (b, fb) = paths(&Generator::new(&spec(order)).unwrap(), 1.4, 256);
        assert_eq!(a, b);
        assert_eq!(fa.counts(), fb.counts());
        assert!(a.contains(&Path::Fast) && a.contains(&Path::Normal));
    }
}

/// Every packet is counted on exactly one path: per flow, the normal path's exact count plus the
/// fast path's `V` contribution equals the flow's packets and bytes, and the totals match.
#[test]
fn the_split_is_exact() {
    let g = Generator::new(&spec(Order::Bursty)).unwrap();
    let mut f = Fifo::new(1.4, 256, 1.0).unwrap();
    let mut fast = FastPath::new(visor::DEFAULT_BYTES, 13, 0).unwrap();
    let (mut normal, mut fastm, mut all) = (
        KeyMap::<u64>::default(),
        KeyMap::<u64>::default(),
        KeyMap::<u64>::default(),
    );
    let (mut packets, mut bytes) = (0u64, 0u64);
    g.for_each(|p| {
        let k = p.tuple.key(KeyKind::FiveTuple);
        let w = u64::from(p.wire_len);
        packets += 1;
        bytes += w;
        *all.entry(k).or_insert(0) += w;
        match f.offer_at(p.ts_ns, w) {
            Path::Normal => *normal.entry(k).or_insert(0) += w,
            Path::Fast => {
                fast.update(&k, w);
                *fastm.entry(k).or_insert(0) += w;
            }
        }
    });
    let c = f.counts();
    assert_eq!(c.packets(), packets);
    assert_eq!(c.bytes(), bytes);
    assert_eq!(c.fast_bytes, fast.total());
    assert_eq!(c.fast_packets, fast.stats().packets);
    assert_eq!(c.normal_bytes, normal.values().sum::<u64>());
    for (k, &v) in &all {
        let n = normal.get(k).copied().unwrap_or(0);
        let x = fastm.get(k).copied().unwrap_or(0);
        assert_eq!(n + x, v, "{k}");
    }
}

/// Capacity at 70% of a constant offered rate forces 30% of packets to the fast path (after
/// the FIFO fills).
#[test]
fn capacity_sets_the_fast_share() {
    let g = Generator::new(&spec(Order::Shuffled)).unwrap();
    for (cap, want) in [(1.4, 0.3), (1.0, 0.5), (2.0, 0.0)] {
        let (_, f) = paths(&g, cap, 64);
        let share = f.counts().fast_share();
        assert!((share - want).abs() < 0.005, "{cap} Mpps: {share}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        rng_seed: RngSeed::Fixed(0x5eed),
        cases: 256,
        ..ProptestConfig::default()
    })]

    /// Any timestamps (backward jumps included), rates and depths: a packet goes to the fast path
    /// only when the FIFO is full (it then holds `depth` packets), the FIFO never holds more,
    /// and the counts add up.
    #[test]
    fn fast_only_when_full(
        gaps in proptest::collection::vec((0u64..3000, any::<bool>()), 1..500),
        mpps in 0.1f64..20.0,
        depth in 1u32..32,
    ) {
        let mut f = Fifo::new(mpps, depth, 3.0).unwrap();
        let mut ts = 1_000_000u64;
        let (mut n, mut b) = (0u64, 0u64);
        for (i, &(gap, back)) in gaps.iter().enumerate() {
            ts = if back { ts.saturating_sub(gap) } else { ts + gap };
            let w = 1 + i as u64 % 7;
            let p = f.offer_at(ts, w);
            n += 1;
            b += w;
            prop_assert!(f.occupancy() <= u64::from(depth));
            if p == Path::Fast {
                prop_assert_eq!(f.occupancy(), u64::from(depth));
            }
        }
        let c = f.counts();
        prop_assert_eq!(c.packets(), n);
        prop_assert_eq!(c.bytes(), b);
    }
}
