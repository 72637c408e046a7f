//! Recovery on a forced fast-path share (issue 15, "Tests that must exist"): a generated Zipf
//! trace of five-tuples counted in bytes, split by the FIFO model with the normal path capped at
//! 70% of the offered packet rate (about 30% of packets to the fast path), Count-Min on the
//! normal path, SketchVisor's fast path (8 KB) on the overflow. Every method's recovered
//! counters are compared with Ideal (the same Count-Min fed every packet), and its heavy
//! hitters' point estimates with the exact sizes.

use algo::Algorithm;
use gen::{Generator, Order, Size, Spec};
use key::{FlowKey, KeyKind, KeyMap};
use sketch::{CountMin, CountMinConfig};
use visor::{
    columns, recover, FastPath, FastTable, Fifo, Linear, Method, Options, Path, Summary,
    DEFAULT_BYTES,
};

struct Split {
    normal: Vec<CountMin>,
    ideal: CountMin,
    fast: Vec<Summary>,
    truth: KeyMap<u64>,
    total: u64,
    fast_share: f64,
}

fn cm(width: usize) -> CountMin {
    CountMin::new(
        CountMinConfig {
            rows: 4,
            width,
            candidates: 1024,
        },
        42,
    )
    .unwrap()
}

/// The trace of `seed`, partitioned over `hosts` by flow (a seeded hash of the key, as a
/// network would partition it), each host with its own FIFO at `share_normal` of the offered
/// rate per host and its own 8 KB fast path.
fn split(seed: u64, packets: u64, flows: u64, width: usize, hosts: usize) -> Split {
    let rate = 1e6;
    let spec = Spec {
        packets,
        flows,
        skew: 1.1,
        seed,
        size: Size::Mix,
        order: Order::Shuffled,
        rate_pps: rate,
        ..Spec::default()
    };
    let g = Generator::new(&spec).unwrap();
    let mut fifos: Vec<Fifo> = (0..hosts)
        .map(|_| Fifo::new(0.7 * rate / 1e6 / hosts as f64, 64, 1.0).unwrap())
        .collect();
    let mut normal: Vec<CountMin> = (0..hosts).map(|_| cm(width)).collect();
    let mut fast: Vec<FastPath> = (0..hosts)
        .map(|h| FastPath::new(DEFAULT_BYTES, 13, h as u64).unwrap())
        .collect();
    let mut ideal = cm(width);
    let mut truth = KeyMap::default();
    let mut total = 0;
    let part = key::HashFn::new(99);
    g.for_each(|p| {
        let k = p.tuple.key(KeyKind::FiveTuple);
        let w = u64::from(p.wire_len);
        let h = key::reduce(part.hash(&k), hosts);
        *truth.entry(k).or_insert(0) += w;
        total += w;
        ideal.update(&k, w);
        match fifos[h].offer_at(p.ts_ns, w) {
            Path::Normal => normal[h].update(&k, w),
            Path::Fast => fast[h].update(&k, w),
        }
    });
    let fast_pk: u64 = fifos.iter().map(|f| f.counts().fast_packets).sum();
    Split {
        normal,
        ideal,
        fast: fast.iter().map(|f| f.summary()).collect(),
        truth,
        total,
        fast_share: fast_pk as f64 / packets as f64,
    }
}

struct Scores {
    matrix: f64,
    hh_are: f64,
}

fn score(s: &Split, merged: &CountMin, summary: &Summary, method: Method) -> Scores {
    let r = recover(merged, summary, method, &Options::default()).unwrap();
    let ideal = s.ideal.counters();
    let threshold = s.total / 1000; // 0.1% of the epoch's bytes
    let mut hh: Vec<(FlowKey, u64)> = s
        .truth
        .iter()
        .filter(|(_, &v)| v >= threshold)
        .map(|(k, &v)| (*k, v))
        .collect();
    hh.sort_unstable();
    let keys: Vec<FlowKey> = hh.iter().map(|h| h.0).collect();
    let cells = columns(merged, &keys).unwrap();
    let are = hh
        .iter()
        .zip(&cells)
        .map(|((_, v), c)| (merged.point(&r.t, c) - *v as f64).abs() / *v as f64)
        .sum::<f64>()
        / hh.len() as f64;
    Scores {
        matrix: r.error_against(&ideal),
        hh_are: are,
    }
}

fn merged(s: &Split) -> (CountMin, Summary) {
    let mut n = s.normal[0].clone();
    for o in &s.normal[1..] {
        n.merge(o).unwrap();
    }
    (n, Summary::merge(&s.fast))
}

/// One host, 4 x 4096 counters (RECOVERY.md 7's prototype setting), about 30% of packets to the
/// fast path: SketchVisor's counters and heavy-hitter estimates are no worse than
/// LowerRecovery's and UpperRecovery's and far better than NoRecovery's.
fn all_methods(s: &Split) -> [Scores; 5] {
    let (n, sum) = merged(s);
    let sc = Method::ALL.map(|m| score(s, &n, &sum, m));
    for (m, x) in Method::ALL.iter().zip(&sc) {
        eprintln!(
            "{:12} counters {:.4} heavy-hitter ARE {:.4}",
            m.name(),
            x.matrix,
            x.hh_are
        );
    }
    sc
}

/// One host, 4 x 4096 counters (RECOVERY.md 7's prototype setting: 40 k Zipf(1.1) flows, 400 k
/// packets), about 30% of packets to the fast path. Measured (counters / heavy-hitter ARE): None
/// 0.300 / 0.292, Lower 0.0159 / 0.169, Upper 0.0303 / 0.135, SketchVisor 0.0142 / 0.157. Many
/// of the heavy hitters are not in the 221-flow table at the end, so every method misses
/// their fast-path bytes: the heavy-hitter error stays well above Ideal's (0.013), and Upper's
/// is a little below SketchVisor's (not asserted; see the crate's report).
#[test]
fn count_min_one_host() {
    let s = split(7, 400_000, 40_000, 4096, 1);
    assert!(
        (0.25..0.35).contains(&s.fast_share),
        "fast share {}",
        s.fast_share
    );
    let [none, lower, upper, sv, _proportional] = all_methods(&s);
    assert!(sv.matrix <= lower.matrix && sv.matrix <= upper.matrix);
    assert!(sv.matrix < none.matrix / 5.0);
    assert!(sv.hh_are <= lower.hh_are);
    assert!(sv.hh_are < none.hh_are);
}

/// Four hosts (the trace partitioned by flow), 4 x 65536 counters (Agg-Evict 4.1's Count-Min),
/// about 30% of each host's packets to its fast path. Every heavy hitter is tracked by its
/// host. Measured: None 0.248 / 0.295, Lower 0.0153 / 0.0003, Upper 0.0307 / 0.0004,
/// SketchVisor 0.0150 / 0.0008: the recovered `y` is spread over every counter (RECOVERY.md 7,
/// "Y is dense") and Count-Min's minimum picks up about 460 bytes of it per heavy hitter, where
/// the true `y` leaves a row of most heavy hitters' counters untouched.
#[test]
fn count_min_four_hosts() {
    let s = split(8, 400_000, 40_000, 65536, 4);
    assert!(
        (0.25..0.35).contains(&s.fast_share),
        "fast share {}",
        s.fast_share
    );
    let [none, lower, upper, sv, _proportional] = all_methods(&s);
    assert!(sv.matrix <= lower.matrix && sv.matrix <= upper.matrix);
    assert!(sv.matrix < none.matrix / 5.0);
    assert!(sv.hh_are < none.hh_are / 100.0);
}

/// MRAC as SketchVisor sized it (section 7.1: one array of 4000 counters), one host, about 30%
/// of packets to the fast path: the recovered counters against Ideal's.
#[test]
fn mrac_one_host() {
    use sketch::{Mrac, MracConfig};
    let mk = || {
        Mrac::new(
            MracConfig {
                arrays: 1,
                width: 4000,
                ..MracConfig::default()
            },
            42,
        )
        .unwrap()
    };
    let g = Generator::new(&Spec {
        packets: 400_000,
        flows: 40_000,
        skew: 1.1,
        seed: 7,
        size: Size::Mix,
        order: Order::Shuffled,
        rate_pps: 1e6,
        ..Spec::default()
    })
    .unwrap();
    let mut fifo = Fifo::new(0.7, 64, 1.0).unwrap();
    let (mut normal, mut ideal) = (mk(), mk());
    let mut fast = FastPath::new(DEFAULT_BYTES, 13, 0).unwrap();
    g.for_each(|p| {
        let k = p.tuple.key(KeyKind::FiveTuple);
        let w = u64::from(p.wire_len);
        ideal.update(&k, w);
        match fifo.offer_at(p.ts_ns, w) {
            Path::Normal => normal.update(&k, w),
            Path::Fast => fast.update(&k, w),
        }
    });
    let sum = fast.summary();
    let ideal = Linear::counters(&ideal);
    let err: Vec<f64> = Method::ALL
        .iter()
        .map(|&m| {
            recover(&normal, &sum, m, &Options::default())
                .unwrap()
                .error_against(&ideal)
        })
        .collect();
    eprintln!("mrac 1 x 4000 counters: none/lower/upper/sketchvisor {err:.4?}");
    let [none, lower, upper, sv] = [err[0], err[1], err[2], err[3]];
    assert!(sv <= lower && sv <= upper);
    assert!(sv < none / 5.0);
}
