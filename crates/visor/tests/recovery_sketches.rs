//! Recovery beyond Count-Min (issue 15, "Tests that must exist": "for Count-Min heavy hitters
//! and for FlowRadar, RevSketch and UnivMon"), on a forced ~30% fast-path share: a Zipf(1.1)
//! trace counted in bytes, split by the FIFO model with the normal path capped at 70% of the
//! offered rate, SketchVisor's 8 KB fast path on the overflow.
//!
//! - RevSketch (its reversible rows) and FlowRadar (its PacketCount field) have a linear view
//!   ([`visor::Linear`]): the solver's counters are no further from Ideal's than Lower's and
//!   Upper's and far closer than NoRecovery's, and its point estimates of the heavy hitters
//!   beat NoRecovery's.
//! - UnivMon: Lower and Upper (the tracked flows injected with `visor::inject`) answer its
//!   heavy hitters with a higher recall and a lower error than NoRecovery. (Its solver recovery,
//!   signed columns and rebuilt heaps, is tested in tests/recovery_all.rs.)

use algo::{Algorithm, BuildCtx};
use gen::{Generator, Order, Size, Spec};
use key::{FlowKey, KeyKind, KeyMap};
use visor::{
    columns, inject, recover, Bound, FastPath, FastTable, Fifo, Linear, Method, Options, Path,
    Summary, DEFAULT_BYTES,
};

struct Split<A> {
    normal: A,
    ideal: A,
    summary: Summary,
    truth: KeyMap<u64>,
    total: u64,
    fast_share: f64,
}

fn split<A: Algorithm + Clone>(proto: &A, kind: KeyKind, seed: u64) -> Split<A> {
    let rate = 1e6;
    let g = Generator::new(&Spec {
        packets: 400_000,
        flows: 40_000,
        skew: 1.1,
        seed,
        size: Size::Mix,
        order: Order::Shuffled,
        rate_pps: rate,
        ..Spec::default()
    })
    .unwrap();
    let mut fifo = Fifo::new(0.7 * rate / 1e6, 64, 1.0).unwrap();
    let mut normal = proto.clone();
    let mut ideal = proto.clone();
    let mut fast = FastPath::new(DEFAULT_BYTES, kind.len(false), 1).unwrap();
    let mut truth = KeyMap::default();
    let mut total = 0;
    g.for_each(|p| {
        let k = p.tuple.key(kind);
        let w = u64::from(p.wire_len);
        *truth.entry(k).or_insert(0) += w;
        total += w;
        ideal.update(&k, w);
        match fifo.offer_at(p.ts_ns, w) {
            Path::Normal => normal.update(&k, w),
            Path::Fast => fast.update(&k, w),
        }
    });
    Split {
        normal,
        ideal,
        summary: fast.summary(),
        truth,
        total,
        fast_share: fifo.counts().fast_share(),
    }
}

/// The heavy hitters (0.1% of the bytes) with their true sizes.
fn heavy(s: &Split<impl Algorithm>) -> Vec<(FlowKey, u64)> {
    let t = s.total / 1000;
    let mut v: Vec<(FlowKey, u64)> = s
        .truth
        .iter()
        .filter(|(_, &v)| v >= t)
        .map(|(k, &v)| (*k, v))
        .collect();
    v.sort_unstable();
    v
}

/// Counter error against Ideal and heavy-hitter mean relative error, per method.
fn scores<S: Linear>(s: &Split<S>) -> [(f64, f64); 5] {
    let hh = heavy(s);
    let keys: Vec<FlowKey> = hh.iter().map(|h| h.0).collect();
    let cells = columns(&s.normal, &keys).unwrap();
    let ideal = s.ideal.counters();
    Method::ALL.map(|m| {
        let r = recover(&s.normal, &s.summary, m, &Options::default()).unwrap();
        let are = hh
            .iter()
            .zip(&cells)
            .map(|((_, v), c)| (s.normal.point(&r.t, c) - *v as f64).abs() / *v as f64)
            .sum::<f64>()
            / hh.len() as f64;
        let e = r.error_against(&ideal);
        eprintln!("{:12} counters {e:.4} heavy-hitter ARE {are:.4}", m.name());
        (e, are)
    })
}

fn check<S: Linear>(s: &Split<S>) {
    assert!(
        (0.25..0.35).contains(&s.fast_share),
        "fast share {}",
        s.fast_share
    );
    let [none, lower, upper, sv, _proportional] = scores(s);
    assert!(
        sv.0 <= lower.0 && sv.0 <= upper.0,
        "{sv:?} {lower:?} {upper:?}"
    );
    assert!(sv.0 < none.0 / 5.0, "{sv:?} {none:?}");
    assert!(sv.1 < none.1, "{sv:?} {none:?}");
}

/// RevSketch about as SketchVisor sized it (section 7.1: 4 x 4000; ours needs a power of two:
/// 4 x 4096), on source addresses (the
/// reversal needs 4- or 8-byte keys). Measured (counters / heavy-hitter ARE): None 0.299 /
/// 0.296, Lower 0.039 / 0.188, Upper 0.067 / 0.168, SketchVisor 0.035 / 0.173 (with the
/// nuclear-norm term: 0.040 / 0.188, worse than Lower: see `Linear::low_rank` for RevSketch).
#[test]
fn rev_sketch_one_host() {
    let rs = reversible::RevSketch::new(
        reversible::RevSketchConfig {
            rows: 4,
            width: 4096,
            ..reversible::RevSketchConfig::default()
        },
        &BuildCtx {
            key_len: 4,
            ..BuildCtx::default()
        },
    )
    .unwrap();
    check(&split(&rs, KeyKind::Src, 21));
}

/// FlowRadar as SketchVisor sized it (section 7.1: 4 hashes, 40,000 cells), on five-tuples.
/// Measured: None 0.299 / 0.299, Lower 0.0169 / 0.187, Upper 0.0367 / 0.165, SketchVisor
/// 0.0161 / 0.181.
#[test]
fn flow_radar_one_host() {
    let fr = table::FlowRadar::new(
        table::FlowRadarConfig {
            cells: 40_000,
            cell_hashes: 4,
            ..table::FlowRadarConfig::default()
        },
        &BuildCtx {
            key_len: 13,
            ..BuildCtx::default()
        },
    )
    .unwrap();
    check(&split(&fr, KeyKind::FiveTuple, 22));
}

/// UnivMon as SketchVisor sized it (section 7.1: 4000, 2000, 1000, 500 counters, heap of 500):
/// Lower and Upper (module docs).
#[test]
fn univmon_lower_and_upper_beat_no_recovery() {
    let um = sketch::UnivMon::new(
        sketch::UnivMonConfig {
            widths: vec![4000, 2000, 1000, 500],
            heap: 500,
            ..sketch::UnivMonConfig::default()
        },
        42,
    )
    .unwrap();
    let s = split(&um, KeyKind::FiveTuple, 23);
    assert!((0.25..0.35).contains(&s.fast_share));
    let hh = heavy(&s);
    let t = s.total / 1000;
    let score = |a: &dyn Algorithm| {
        let rep: KeyMap<u64> = a.heavy_hitters(t).unwrap().into_iter().collect();
        let recall = hh.iter().filter(|h| rep.contains_key(&h.0)).count() as f64 / hh.len() as f64;
        let are = hh
            .iter()
            .map(|(k, v)| (a.flow_size(k).unwrap() as f64 - *v as f64).abs() / *v as f64)
            .sum::<f64>()
            / hh.len() as f64;
        (recall, are)
    };
    let none = score(&s.normal);
    let mut lo = s.normal.clone();
    inject(&mut lo, &s.summary, Bound::Lower);
    let mut up = s.normal.clone();
    inject(&mut up, &s.summary, Bound::Upper);
    let (lower, upper, ideal) = (score(&lo), score(&up), score(&s.ideal));
    eprintln!("univmon recall/ARE: none {none:?} lower {lower:?} upper {upper:?} ideal {ideal:?}");
    assert!(lower.0 >= none.0 && upper.0 >= lower.0);
    assert!(lower.1 < none.1 && upper.1 < none.1);
    assert!(ideal.0 >= upper.0);
}
