//! Restoring the distinct-count sketches (`visor::bitmap`, issue 36 points 1, 3 and 5; the
//! paper's Figure 9) against NoRecovery, Lower, Upper and Ideal (the same sketch fed every
//! packet), on generated Zipf(1.0) traces of five-tuples through the real fast path
//! (SketchVisor's, 8 KB), fixed seeds. The error is the cardinality estimate's relative error
//! against the exact count of distinct flows.
//!
//! Measured (`cargo test -p visor --test bitmap -- --nocapture`), relative error
//! none / lower / restored / ideal (upper equals lower: a tracked flow is one key whatever its
//! weight):
//! - 2 M packets, 100 k flows (94 k drawn), share 0.3, 5.9 k flows missing, 8.2 k restored:
//!   FM 4.8 / 4.8 / 3.0 / 0.4%; kMin 7.5 / 7.5 / 2.1 / 0.9%; LC 6.3 / 6.3 / 2.5 / 0.0%;
//!   HyperLogLog (not in the paper) 5.7 / 5.7 / 2.8 / 0.5%.
//! - 400 k packets, 100 k flows (56 k drawn), share 0.5, 17.8 k missing, 11.0 k restored:
//!   FM 30 / 30 / 11 / 0.8%; kMin 31 / 31 / 13 / 0.7%; LC 32 / 32 / 12 / 0.0%; HLL 31 / 31 /
//!   10 / 2.3%.
//! - heavy-only overflow (70% of the 1000 largest flows' packets, 400 k packets): no flow is
//!   missing, yet 24.5 k are restored (of 65 k untracked packets, the cap): 41-47% over, the
//!   rule's known limit (`visor::bitmap` docs: a distinct counter cannot test the prior).
//! - TwoLevel, 20 spreaders among 5000 hosts, threshold 450, (peer error, F1): pairs of 1-3
//!   packets at 0.4: lower (0.197, 0.74), restored (0.117, 0.96), ideal (0.039, 1.0);
//!   one-packet pairs at 0.3: lower (0.280, 0.50), restored (0.046, 0.96), ideal (0.038, 1.0).

use algo::{Algorithm, BuildCtx};
use gen::{Generator, Order, Size, Spec};
use key::{FlowKey, KeyKind, KeyMap};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use visor::bitmap::{missing_flows, restore};
use visor::{FastPath, FastTable, Method, PathCounts, Summary, DEFAULT_BYTES};

/// The heavy-only overflow's flows: several times what the 8 KB table tracks (221), so part
/// of their fast-path volume is untracked.
const HEAVY: usize = 1000;

#[derive(Clone, Copy, PartialEq)]
enum Overflow {
    Uniform(f64),
    HeaviestOnly,
}

fn sketches() -> Vec<Box<dyn Algorithm>> {
    let ctx = BuildCtx {
        seed: 42,
        key_len: 13,
        ..BuildCtx::default()
    };
    vec![
        Box::new(distinct::Fm::new(distinct::FmConfig::default(), &ctx).unwrap()),
        Box::new(distinct::KMin::new(distinct::KMinConfig::default(), &ctx).unwrap()),
        Box::new(
            distinct::LinearCounting::new(distinct::LinearCountingConfig::default(), &ctx).unwrap(),
        ),
        Box::new(distinct::HyperLogLog::new(distinct::HyperLogLogConfig::default(), &ctx).unwrap()),
    ]
}

struct Split {
    normal: Vec<Box<dyn Algorithm>>,
    ideal: Vec<Box<dyn Algorithm>>,
    summary: Summary,
    /// Exact distinct flows of the trace.
    truth: f64,
    /// Flows whose every packet took the fast path, untracked (what the rule estimates).
    missing: usize,
}

fn split(packets: u64, seed: u64, overflow: Overflow) -> Split {
    let spec = Spec {
        packets,
        flows: 100_000,
        skew: 1.0,
        seed,
        size: Size::Mix,
        order: Order::Shuffled,
        ..Spec::default()
    };
    let g = Generator::new(&spec).unwrap();
    let mut pkts: Vec<FlowKey> = Vec::with_capacity(packets as usize);
    g.for_each(|p| pkts.push(p.tuple.key(KeyKind::FiveTuple)));
    let mut sizes: KeyMap<u64> = KeyMap::default();
    for k in &pkts {
        *sizes.entry(*k).or_insert(0) += 1;
    }
    let mut by_size: Vec<(u64, FlowKey)> = sizes.iter().map(|(k, &v)| (v, *k)).collect();
    by_size.sort_unstable_by(|a, b| b.cmp(a));
    let heaviest: KeyMap<()> = by_size.iter().take(HEAVY).map(|&(_, k)| (k, ())).collect();
    let mut rng = Pcg64::seed_from_u64(seed ^ 0x5eed);
    let (mut normal, mut ideal) = (sketches(), sketches());
    let mut fast = FastPath::new(DEFAULT_BYTES, 13, seed).unwrap();
    let mut paths = PathCounts::default();
    let mut seen_normal: KeyMap<()> = KeyMap::default();
    for k in &pkts {
        for s in &mut ideal {
            s.update(k, 1);
        }
        let to_fast = match overflow {
            Overflow::Uniform(p) => rng.gen::<f64>() < p,
            Overflow::HeaviestOnly => heaviest.contains_key(k) && rng.gen::<f64>() < 0.7,
        };
        if to_fast {
            fast.update(k, 1);
            paths.fast_packets += 1;
        } else {
            paths.normal_packets += 1;
            seen_normal.insert(*k, ());
            for s in &mut normal {
                s.update(k, 1);
            }
        }
    }
    let mut summary = fast.summary();
    summary.paths = paths;
    let missing = sizes
        .keys()
        .filter(|k| !seen_normal.contains_key(k) && summary.get(k).is_none())
        .count();
    Split {
        normal,
        ideal,
        summary,
        truth: sizes.len() as f64,
        missing,
    }
}

/// Relative cardinality error per method (`Method::ALL` order, the restored state for
/// `sketchvisor` and `proportional`), then Ideal's, for sketch `i`.
fn errors(s: &Split, i: usize) -> (Vec<f64>, f64) {
    let normal = s.normal[i].as_ref();
    let err = |a: &dyn Algorithm| (a.cardinality().unwrap() - s.truth).abs() / s.truth;
    let mut out = vec![];
    for m in Method::ALL {
        let state: Option<Box<dyn Algorithm>> = match m {
            Method::None => None,
            Method::Lower | Method::Upper => {
                let mut c = normal.clone_box();
                let b = if m == Method::Lower {
                    visor::Bound::Lower
                } else {
                    visor::Bound::Upper
                };
                visor::inject(c.as_mut(), &s.summary, b);
                Some(c)
            }
            Method::Sketchvisor | Method::Proportional => {
                let (st, used) = restore(normal, &s.summary, m).unwrap().unwrap();
                assert_eq!(used, m, "{} restored by another method", normal.name());
                st
            }
        };
        out.push(err(state.as_deref().unwrap_or(normal)));
    }
    let ideal = err(s.ideal[i].as_ref());
    eprintln!(
        "{:16} none {:.4} lower {:.4} upper {:.4} sketchvisor {:.4} proportional {:.4} ideal {:.4}",
        normal.name(),
        out[0],
        out[1],
        out[2],
        out[3],
        out[4],
        ideal
    );
    (out, ideal)
}

fn check_uniform(packets: u64, share: f64) {
    let s = split(packets, 7, Overflow::Uniform(share));
    let n = s.normal[2].cardinality().unwrap();
    let d = missing_flows(n, &s.summary).unwrap();
    eprintln!(
        "{packets} packets, share {share}: {} flows, {} missing, estimated {d:.0}",
        s.truth, s.missing
    );
    // The rule within a factor of two of the flows actually missing.
    assert!(
        d > 0.5 * s.missing as f64 && d < 2.0 * s.missing as f64,
        "estimate {d} against {} missing",
        s.missing
    );
    let all: Vec<(Vec<f64>, f64)> = (0..s.normal.len()).map(|i| errors(&s, i)).collect();
    for (i, (e, _ideal)) in all.into_iter().enumerate() {
        let (none, lower, restored) = (e[0], e[1], e[3]);
        let name = s.normal[i].name();
        // Figure 9's order: NoRecovery >= Lower > restored (SketchVisor's, and ours).
        assert!(none >= lower - 1e-9, "{name}: none {none} < lower {lower}");
        assert!(
            restored < 0.75 * lower,
            "{name}: restored {restored} not well below lower {lower}"
        );
        assert_eq!(e[3], e[4], "{name}: both methods restore the same state");
    }
}

/// The held-out style of trace (2 M packets, 100 k flows), 30% of the packets uniformly to the
/// fast path: few flows are missing (6%), and the restored sketches recover most of them.
#[test]
fn restored_beats_lower_on_a_uniform_overflow() {
    check_uniform(2_000_000, 0.3);
}

/// A trace of small flows (400 k packets over 100 k flows) with half of the packets to the fast
/// path: a third of the flows are missing, Lower errs by ~32%, the restored state by ~7%.
#[test]
fn restored_beats_lower_with_many_small_flows() {
    check_uniform(400_000, 0.5);
}

/// Only the heaviest flows overflow: no flow is missing, but the fast path's totals look like a
/// uniform overflow's and the rule restores flows anyway; what it restores stays below the
/// untracked packets, so the answer's error stays within their share of the flows (a loose
/// bound: 41-47% measured against Ideal's 1-2%; module docs).
#[test]
fn skewed_overflow_is_bounded_by_the_untracked_packets() {
    let s = split(400_000, 7, Overflow::HeaviestOnly);
    assert_eq!(s.missing, 0);
    let n = s.normal[2].cardinality().unwrap();
    let d = missing_flows(n, &s.summary).unwrap();
    let untracked = s.summary.v - s.summary.lows();
    eprintln!("heavy-only: estimated {d:.0}, untracked {untracked}");
    assert!(d <= untracked as f64);
    // The restored answer is off Ideal's by at most the untracked packets (each restored flow
    // stands for at least one of them), whatever the overflow's shape.
    let bound = untracked as f64 / s.truth;
    for i in 0..s.normal.len() {
        let (e, ideal) = errors(&s, i);
        assert!(
            e[3] <= ideal + bound,
            "restored {} ideal {ideal} bound {bound}",
            e[3]
        );
    }
}

/// No overflow: nothing to restore, the state is the normal one (the summary is empty and the
/// share zero, so the rule is not applied and LowerRecovery, a no-op, answers).
#[test]
fn empty_summary_leaves_the_state() {
    for normal in sketches() {
        let summary = Summary::default();
        let (st, used) = restore(normal.as_ref(), &summary, Method::Sketchvisor)
            .unwrap()
            .unwrap();
        assert_eq!(used, Method::Lower);
        let st = st.unwrap();
        assert_eq!(st.cardinality(), normal.cardinality());
    }
}

/// Other sketches and the other methods are not this module's.
#[test]
fn only_the_distinct_counters_and_the_restoring_methods() {
    let cm = sketch::CountMin::new(sketch::CountMinConfig::default(), 1).unwrap();
    assert!(restore(&cm, &Summary::default(), Method::Sketchvisor).is_none());
    let fm = &sketches()[0];
    assert!(restore(fm.as_ref(), &Summary::default(), Method::Lower).is_none());
}

// ---- TwoLevel (superspreaders): per-host restoring ----

fn two_level() -> reversible::TwoLevel {
    let ctx = BuildCtx {
        seed: 42,
        key_len: 8,
        side: algo::Side::Src,
    };
    reversible::TwoLevel::new(reversible::TwoLevelConfig::default(), &ctx).unwrap()
}

fn addr(x: u64) -> [u8; 4] {
    (key::mix64(x) as u32).to_be_bytes()
}

fn pair_key(host: [u8; 4], peer: [u8; 4]) -> FlowKey {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&host);
    b[4..].copy_from_slice(&peer);
    FlowKey::from_bytes(&b).unwrap()
}

/// 20 spreaders with 300 to 680 distinct peers, 5000 background hosts with 1 to 19 peers; each
/// (host, peer) pair sends 1 to `max_packets` packets; shuffled. The packets and the spreaders
/// with their true peer counts.
fn spreader_stream(seed: u64, max_packets: u64) -> (Vec<FlowKey>, Vec<(FlowKey, f64)>) {
    let mut rng = Pcg64::seed_from_u64(seed);
    let (mut out, mut planted) = (Vec::new(), Vec::new());
    for h in 0..20u64 {
        let host = addr(1_000_000 + h);
        let peers = 300 + 20 * h;
        planted.push((FlowKey::from_bytes(&host).unwrap(), peers as f64));
        for p in 0..peers {
            let k = pair_key(host, addr(h * 100_000 + p));
            for _ in 0..rng.gen_range(1..=max_packets) {
                out.push(k);
            }
        }
    }
    for h in 0..5000u64 {
        let host = addr(2_000_000 + h);
        for p in 0..rng.gen_range(1..20u64) {
            let k = pair_key(host, addr(50_000_000 + h * 100 + p));
            for _ in 0..rng.gen_range(1..=max_packets) {
                out.push(k);
            }
        }
    }
    for i in (1..out.len()).rev() {
        let j = rng.gen_range(0..=i);
        out.swap(i, j);
    }
    (out, planted)
}

/// Mean relative error of the spreaders' peer estimates, and the F1 of the spreaders reported
/// above `threshold` against those truly above it, for a state.
fn spreader_scores(
    s: &reversible::TwoLevel,
    planted: &[(FlowKey, f64)],
    threshold: u64,
) -> (f64, f64) {
    let err = planted
        .iter()
        .map(|(h, n)| (s.estimate(h) - n).abs() / n)
        .sum::<f64>()
        / planted.len() as f64;
    let want: Vec<&FlowKey> = planted
        .iter()
        .filter(|(_, n)| *n > threshold as f64)
        .map(|(h, _)| h)
        .collect();
    let got = s.spreaders(threshold).unwrap();
    let hit = got.iter().filter(|(h, _)| want.contains(&h)).count();
    let f1 = if want.is_empty() && got.is_empty() {
        1.0
    } else {
        2.0 * hit as f64 / (want.len() + got.len()) as f64
    };
    (err, f1)
}

/// Per method (none, lower, upper, restored) and Ideal: (peer error, F1).
fn spreader_run(max_packets: u64, share: f64) -> (Vec<(f64, f64)>, (f64, f64)) {
    let (pkts, planted) = spreader_stream(11, max_packets);
    let mut rng = Pcg64::seed_from_u64(12);
    let (mut normal, mut ideal) = (two_level(), two_level());
    let mut fast = FastPath::new(DEFAULT_BYTES, 8, 11).unwrap();
    let mut paths = PathCounts::default();
    for k in &pkts {
        ideal.update(k, 1);
        if rng.gen::<f64>() < share {
            fast.update(k, 1);
            paths.fast_packets += 1;
        } else {
            paths.normal_packets += 1;
            normal.update(k, 1);
        }
    }
    let mut summary = fast.summary();
    summary.paths = paths;
    let threshold = 450;
    let mut out = vec![spreader_scores(&normal, &planted, threshold)];
    for b in [visor::Bound::Lower, visor::Bound::Upper] {
        let mut c = normal.clone();
        visor::inject(&mut c, &summary, b);
        out.push(spreader_scores(&c, &planted, threshold));
    }
    let (st, used) = restore(&normal, &summary, Method::Sketchvisor)
        .unwrap()
        .unwrap();
    assert_eq!(used, Method::Sketchvisor);
    let st = st.unwrap();
    let st = algo::downcast::<reversible::TwoLevel>(st.as_ref()).unwrap();
    out.push(spreader_scores(st, &planted, threshold));
    let id = spreader_scores(&ideal, &planted, threshold);
    eprintln!(
        "two_level, pairs of 1..={max_packets} packets, share {share}: (peer error, F1) none {:.3?} lower {:.3?} upper {:.3?} restored {:.3?} ideal {id:.3?}",
        out[0], out[1], out[2], out[3]
    );
    (out, id)
}

/// Spreaders whose peers send like everyone's, uniformly to the fast path: 1 to 3 packets a
/// pair at a 40% share (Lower under-counts every spreader's peers by ~20% and finds few above
/// 450; the log-series rule over-restores by ~9%), and single-packet pairs at 30% (the rule's
/// law is exact there). The per-bucket restoring brings the counts and the detection nearer
/// Ideal.
#[test]
fn two_level_restored_beats_lower() {
    for (max_packets, share) in [(3, 0.4), (1, 0.3)] {
        let (m, _ideal) = spreader_run(max_packets, share);
        let (lower, restored) = (m[1], m[3]);
        assert!(m[0].0 >= lower.0 - 1e-9);
        assert!(
            restored.0 < 0.75 * lower.0,
            "peer error restored {} lower {}",
            restored.0,
            lower.0
        );
        assert!(
            restored.1 >= lower.1,
            "F1 restored {} lower {}",
            restored.1,
            lower.1
        );
    }
}
