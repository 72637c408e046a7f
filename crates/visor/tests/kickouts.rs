//! Kick-out operations of Algorithm 1 against Misra-Gries at equal memory (the paper's Figure
//! 16a: "MGFastPath performs an order of magnitude more kick-out operations than SketchVisor").
//! A kick-out operation is one pass over the table (COMPUTETHRESH and the decrement for
//! SketchVisor, the subtraction of `min(w, c_min)` for Misra-Gries); a count, not a time.

use gen::{Generator, Order, Size, Spec};
use key::KeyKind;
use visor::{FastKind, FastPath, FastStats, FastTable, MgFastPath, DEFAULT_BYTES};

/// Kick-out statistics of SketchVisor and Misra-Gries fed the same stream: at equal memory (the
/// default 8 KB: 221 and 282 five-tuples), and Misra-Gries at SketchVisor's k (equal k).
fn counts(skew: f64, order: Order) -> [FastStats; 3] {
    let spec = Spec {
        packets: 300_000,
        flows: 50_000,
        skew,
        seed: 5,
        size: Size::Mix,
        order,
        ..Spec::default()
    };
    let mut sv = FastPath::new(DEFAULT_BYTES, 13, 1).unwrap();
    let mut mg = MgFastPath::new(DEFAULT_BYTES, 13, 1).unwrap();
    let mut mg_k = MgFastPath::with_capacity(sv.capacity(), 1);
    Generator::new(&spec).unwrap().for_each(|p| {
        let k = p.tuple.key(KeyKind::FiveTuple);
        let w = u64::from(p.wire_len);
        sv.update(&k, w);
        mg.update(&k, w);
        mg_k.update(&k, w);
    });
    [sv.stats(), mg.stats(), mg_k.stats()]
}

/// The target of issue 15 (Figure 16a): at least 5x fewer kick-out operations than Misra-Gries
/// at equal memory. Both count the same unit, one pass over the table (one call of
/// COMPUTETHRESH for SketchVisor, whatever number of flows it removes), and both get 8 KB:
/// SketchVisor's entry is one u64 larger than Misra-Gries's (`(e, r, d)` held as two counters),
/// so 221 five-tuples against 282. It fails: on these Zipf streams of byte weights SketchVisor
/// makes 1.1-1.8x *more* passes (measured: Zipf 1.1 shuffled 128,963 vs 76,758; bursty 43,036
/// vs 39,431; Zipf 0.8 shuffled 214,896 vs 122,810), and more than Misra-Gries at its own k =
/// 221 too (93,699; 42,172; 146,777). A pass of SketchVisor removes 1.08-1.23 flows, one of
/// Misra-Gries 1.14-2.12: COMPUTETHRESH's threshold `a_(k+1) * b^0.074` (b the ratio of the two
/// largest residuals, 1-3 on Zipf) is 1.00-1.08 `a_(k+1)`, so it removes the smallest flow and
/// seldom another, the table stays full, and every packet of an untracked flow costs a pass.
/// Kept, ignored, as the open target (docs/sketchvisor-results.md, figure 16).
#[test]
#[ignore = "fails: at equal memory (8 KB) SketchVisor makes about as many kick-out passes as Misra-Gries (1.0-1.8x as many), not 5x fewer (see doc)"]
fn five_times_fewer_kickouts_than_misra_gries_at_equal_memory() {
    assert_eq!(
        visor::capacity(FastKind::Sketchvisor, DEFAULT_BYTES, 13),
        221
    );
    assert_eq!(
        visor::capacity(FastKind::MisraGries, DEFAULT_BYTES, 13),
        282
    );
    let mut ok = true;
    for (skew, order) in [
        (1.1, Order::Shuffled),
        (1.1, Order::Bursty),
        (0.8, Order::Shuffled),
    ] {
        let [sv, mg, mg_k] = counts(skew, order);
        let per = |s: FastStats| s.evicted as f64 / s.kickouts.max(1) as f64;
        eprintln!(
            "zipf {skew} {order:?}: kick-outs SketchVisor {} ({:.2} flows each), Misra-Gries {} \
             ({:.2}), ratio MG/SV {:.2}; Misra-Gries at k = 221: {}",
            sv.kickouts,
            per(sv),
            mg.kickouts,
            per(mg),
            mg.kickouts as f64 / sv.kickouts.max(1) as f64,
            mg_k.kickouts
        );
        ok &= mg.kickouts >= 5 * sv.kickouts;
    }
    assert!(ok, "fewer than 5x (figures above)");
}

/// With unit weights and the same k the two make exactly the same passes: every residual and
/// packet is a whole number of packets, and `floor(a_(k+1) * b^0.074)` equals `a_(k+1)` while
/// `b < 2^13.5`, so COMPUTETHRESH's threshold is Misra-Gries's `min(w, c_min)`.
#[test]
fn unit_weights_at_equal_k_kick_out_like_misra_gries() {
    let keys = testkit::zipf_keys(200_000, 50_000, 1.1, 9);
    for k in [64usize, 182, 1000] {
        let mut sv = FastPath::with_capacity(k, 1);
        let mut mg = MgFastPath::with_capacity(k, 1);
        for key in &keys {
            sv.update(key, 1);
            mg.update(key, 1);
        }
        let (a, b) = (sv.stats(), mg.stats());
        assert!(a.kickouts > 0, "k {k}: the table filled");
        assert_eq!((a.kickouts, a.evicted), (b.kickouts, b.evicted), "k {k}");
        assert_eq!(sv.decremented(), mg.decremented());
    }
}

/// Figure 16b: the relative error of the bounds of the top flows. SketchVisor's three counters
/// bound a flow by what was decremented before its own insertion (`e`), with the decrements
/// since counted in the lower bound (`d`); Misra-Gries's one counter by every decrement (`D`).
/// On the overflow of a Zipf trace (the FIFO model at 70%), at equal memory, for the 25 largest
/// fast-path flows (all tracked by both): mean `(hi - lo) / true` SketchVisor 0.0006 against
/// Misra-Gries 0.229 (221 flows against 282). Further down the order SketchVisor's smaller
/// table tracks fewer of them (measured with the former 182-flow table: 29 of the top 50
/// against 47; its `E`, 811 KB, above Misra-Gries's `D`, 483 KB, so over the top 100, an
/// untracked flow bounded by `[0, E]`, its mean gap was the larger, 1.70 against 1.09).
#[test]
fn bounds_of_the_top_flows_are_tighter_than_misra_gries() {
    let spec = Spec {
        packets: 1_000_000,
        flows: 100_000,
        skew: 1.1,
        seed: 6,
        size: Size::Mix,
        order: Order::Bursty,
        rate_pps: 1e6,
        ..Spec::default()
    };
    let mut fifo = visor::Fifo::new(0.7, 1024, 1.0).unwrap();
    let mut sv = FastPath::new(DEFAULT_BYTES, 13, 1).unwrap();
    let mut mg = MgFastPath::new(DEFAULT_BYTES, 13, 1).unwrap();
    let mut truth = key::KeyMap::default();
    Generator::new(&spec).unwrap().for_each(|p| {
        let w = u64::from(p.wire_len);
        if fifo.offer_at(p.ts_ns, w) == visor::Path::Fast {
            let k = p.tuple.key(KeyKind::FiveTuple);
            sv.update(&k, w);
            mg.update(&k, w);
            *truth.entry(k).or_insert(0u64) += w;
        }
    });
    let mut top: Vec<(key::FlowKey, u64)> = truth.into_iter().collect();
    top.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    top.truncate(25);
    let gap = |s: &visor::Summary| {
        let mut sum = 0.0;
        for (k, v) in &top {
            let t = s.get(k).expect("every top-25 flow is tracked");
            sum += (t.hi - t.lo) as f64 / *v as f64;
        }
        sum / top.len() as f64
    };
    let (a, b) = (gap(&sv.summary()), gap(&mg.summary()));
    eprintln!("mean (hi - lo) / true of the top 25: SketchVisor {a:.4}, Misra-Gries {b:.4}");
    assert!(a < b / 10.0, "{a} vs {b}");
}
