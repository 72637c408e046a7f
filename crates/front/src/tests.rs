use std::collections::HashMap;

use aggevict::{AggConfig, Policy};
use key::FlowKey;

use super::*;

/// Records what reaches it: total weight per key, and the number of updates.
#[derive(Default)]
struct Tally {
    weight: HashMap<FlowKey, u64>,
    updates: u64,
}

impl Sink for Tally {
    fn feed(&mut self, keys: KeyBatch<'_>, weights: &[u64]) {
        for (i, &w) in weights.iter().enumerate().take(keys.len()) {
            *self.weight.entry(keys.get(i).unwrap()).or_default() += w;
            self.updates += 1;
        }
    }
}

fn stream() -> (Vec<u32>, Vec<u64>) {
    // A few heavy keys among many light ones, with trains, and some weights above 1.
    let keys: Vec<u32> = (0..20_000u32)
        .map(|i| (i * i) % 997 + (i % 7) * 10_000)
        .collect();
    let weights: Vec<u64> = (0..20_000u64).map(|i| 1 + i % 3).collect();
    (keys, weights)
}

fn exact(keys: &[u32], weights: &[u64]) -> HashMap<FlowKey, u64> {
    let mut m = HashMap::new();
    for (&k, &w) in keys.iter().zip(weights) {
        *m.entry(FlowKey::from_u32(k)).or_default() += w;
    }
    m
}

#[test]
fn every_front_hands_on_all_weight_by_the_flush() {
    let (keys, weights) = stream();
    let want = exact(&keys, &weights);
    let agg = AggConfig {
        arrays: 8,
        policy: Policy::Lru,
        ..AggConfig::default()
    };
    for accel in [Accel::None, Accel::AggEvict] {
        for as_u32 in [true, false] {
            let mut f = Front::new(accel, &agg, 4).unwrap();
            let mut t = Tally::default();
            let flow_keys: Vec<FlowKey> = keys.iter().map(|&k| FlowKey::from_u32(k)).collect();
            for (i, w) in weights.chunks(32).enumerate() {
                let kb = if as_u32 {
                    KeyBatch::U32(&keys[i * 32..i * 32 + w.len()])
                } else {
                    KeyBatch::Keys(&flow_keys[i * 32..i * 32 + w.len()])
                };
                f.update(kb, w, &mut t);
            }
            f.flush(&mut t);
            assert_eq!(t.weight, want, "{accel:?} u32={as_u32}");
            match accel {
                Accel::None => {
                    assert_eq!(t.updates, keys.len() as u64);
                    assert!(f.stats().is_none());
                }
                Accel::AggEvict => {
                    let st = f.stats().unwrap();
                    assert_eq!(st.packets, keys.len() as u64);
                    assert_eq!(st.passed, t.updates);
                    // The stream repeats keys: the aggregator must collapse some of them.
                    assert!(t.updates < keys.len() as u64, "{}", t.updates);
                }
            }
        }
    }
}

/// A sink that takes 20 ms per batch and says so.
#[derive(Default)]
struct Slow {
    nanos: u128,
    batches: u32,
}

impl Sink for Slow {
    fn feed(&mut self, _: KeyBatch<'_>, _: &[u64]) {
        let t = std::time::Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(20));
        self.nanos += t.elapsed().as_nanos();
        self.batches += 1;
    }

    fn nanos(&self) -> u128 {
        self.nanos
    }
}

#[test]
fn timed_charges_the_front_without_the_sinks_time() {
    // 64 distinct keys into one 16-slot array: evictions during the update, the rest at the
    // flush, so the sink runs inside both steps.
    let keys: Vec<u32> = (0..64).collect();
    let ones = [1u64; 64];
    let one_array = AggConfig {
        arrays: 1,
        evict_batch: 16,
        ..AggConfig::default()
    };
    let mut f = Front::new(Accel::AggEvict, &one_array, 4).unwrap();
    let mut slow = Slow::default();
    f.timed(&mut slow, |f, s| f.update(KeyBatch::U32(&keys), &ones, s));
    f.timed(&mut slow, |f, s| f.flush(s));
    assert!(slow.batches >= 2, "{}", slow.batches);
    // The sink's 40+ ms are not the front's; the aggregator's own work on 64 keys is
    // microseconds (a generous bound: one sink batch).
    let charged = f.stats().unwrap().nanos;
    assert!(charged < 20_000_000, "{charged} ns charged to the front");

    // A sink that does not time itself leaves the whole step to the front.
    struct Quiet;
    impl Sink for Quiet {
        fn feed(&mut self, _: KeyBatch<'_>, _: &[u64]) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    let mut g = Front::new(Accel::AggEvict, &AggConfig::default(), 4).unwrap();
    g.timed(&mut Quiet, |f, s| {
        f.update(KeyBatch::U32(&keys), &ones, s);
        f.flush(s);
    });
    assert!(g.stats().unwrap().nanos >= 1_000_000);
    // Without an accelerator nothing is timed.
    let mut h = Front::none();
    h.timed(&mut Quiet, |f, s| f.update(KeyBatch::U32(&keys), &ones, s));
    assert!(h.stats().is_none());
}

#[test]
fn a_bad_aggregator_config_is_an_error() {
    let bad = AggConfig {
        arrays: 0,
        ..AggConfig::default()
    };
    let e = Front::new(Accel::AggEvict, &bad, 4).err().unwrap();
    assert!(e.to_string().contains("arrays"), "{e}");
    // Without an accelerator the aggregator's settings are not used.
    assert!(Front::new(Accel::None, &bad, 4).is_ok());
}

/// `parts` parts, alternately bursty (`bursty` packets in trains of 16 packets of one of 64
/// keys: aggregation removes most updates) and shuffled (`shuffled` packets, a new pseudo-random
/// key per packet: it removes none).
fn alternating(parts: usize, bursty: usize, shuffled: usize) -> Vec<u32> {
    let mut keys = Vec::with_capacity(parts * bursty.max(shuffled));
    let mut x = 0x9e37_79b9_u32;
    for part in 0..parts {
        if part % 2 == 0 {
            keys.extend((0..bursty).map(|i| ((i / 16) % 64) as u32));
        } else {
            for _ in 0..shuffled {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                keys.push(x);
            }
        }
    }
    keys
}

/// Feed `keys` in batches of `batch` through `f` into a fresh tally, flushed.
fn feed_all(f: &mut Front, keys: &[u32], weights: &[u64], batch: usize) -> Tally {
    let mut t = Tally::default();
    for (k, w) in keys.chunks(batch).zip(weights.chunks(batch)) {
        f.update(KeyBatch::U32(k), w, &mut t);
    }
    f.flush(&mut t);
    t
}

fn auto_front(sink_ns: f64, window: u64) -> Front {
    Front::new(Accel::AggEvict, &AggConfig::default(), 4)
        .unwrap()
        .with_mode(AggMode::Auto, sink_ns, window)
}

#[test]
fn auto_steps_aside_where_aggregation_does_not_pay_and_loses_no_weight() {
    // Bursty phases four times as long as the shuffled ones between them: the back-off (gaps
    // of 1, 2, 4 ... windows) may run past a phase change by about the length of the bypass
    // so far, which is then a small part of the next bursty phase.
    let (bursty, shuffled) = (8192, 2048);
    let keys = alternating(6, bursty, shuffled);
    let weights: Vec<u64> = (0..keys.len() as u64).map(|i| 1 + i % 3).collect();
    let want = exact(&keys, &weights);
    // A cheap algorithm behind the front (3 ns an update): the shuffled parts do not pay.
    let mut f = auto_front(3.0, 256);
    let t = feed_all(&mut f, &keys, &weights, 100);
    assert_eq!(t.weight, want);
    let st = f.stats().unwrap();
    assert_eq!(st.mode, AggMode::Auto);
    assert_eq!(st.packets, keys.len() as u64);
    assert_eq!(st.passed, t.updates);
    // It aggregated the bursty parts and stood aside in the shuffled ones: it switched at
    // least twice per shuffled part (off, and on again in the next bursty part).
    assert!(st.through > 0 && st.through < st.packets, "{st:?}");
    assert!(st.switches >= 6, "{st:?}");
    // The shuffled packets cost about one update each; at least three quarters of the bursty
    // ones went through the aggregator and collapsed.
    let bursty_all = 3 * bursty as u64;
    assert!(st.through >= bursty_all * 3 / 4, "{st:?}");
    assert!(
        t.updates < 3 * shuffled as u64 + bursty_all / 4,
        "{} {st:?}",
        t.updates
    );

    // Deterministic: the same packets in the same batches give the same decisions. Other
    // batchings decide alike in substance (the run merge works within a batch's chunks, so
    // the lookups counted, and marginal windows, may differ) and lose no weight either.
    for batch in [7, 100, 5000] {
        let runs: Vec<_> = (0..2)
            .map(|_| {
                let mut g = auto_front(3.0, 256);
                let u = feed_all(&mut g, &keys, &weights, batch);
                assert_eq!(u.weight, want);
                let sg = g.stats().unwrap();
                assert!(sg.through > 0 && sg.through < sg.packets, "{sg:?}");
                assert!(sg.switches >= 6, "batch {batch}: {sg:?}");
                (sg.through, sg.switches, sg.passed)
            })
            .collect();
        assert_eq!(runs[0], runs[1], "batch {batch}");
    }

    // Where nearly every packet is a new key, nothing pays, however dear the algorithm; where
    // packets aggregate, every window pays and the front never steps aside.
    let mut dear = auto_front(1000.0, 256);
    feed_all(&mut dear, &keys[..bursty], &weights[..bursty], 100);
    let sd = dear.stats().unwrap();
    assert_eq!((sd.through, sd.switches), (sd.packets, 0));

    // `always` is the paper's aggregator: every packet through it, no decision.
    let mut always = Front::new(Accel::AggEvict, &AggConfig::default(), 4)
        .unwrap()
        .with_mode(AggMode::Always, 3.0, 256);
    let t = feed_all(&mut always, &keys, &weights, 100);
    assert_eq!(t.weight, want);
    let sa = always.stats().unwrap();
    assert_eq!(
        (sa.mode, sa.through, sa.switches),
        (AggMode::Always, sa.packets, 0)
    );
}

#[test]
fn probes_back_off_while_aggregation_does_not_pay() {
    // Shuffled only: after the first window every probe fails, and the gaps between probes
    // double up to MAX_GAP windows.
    let keys = alternating(2, 0, 300 * 256);
    let ones = vec![1u64; keys.len()];
    let mut f = auto_front(3.0, 256);
    feed_all(&mut f, &keys, &ones, 256);
    let st = f.stats().unwrap();
    // Probes of 256 / PROBE_DIV = 32 packets, each followed by 1, 2, 4, ... 64 windows of 256
    // packets of bypass: at packets 0, 288, 832, 1888, 3968, 8096, 16320, 32736, 49152, 65568
    // of 76800: ten probes.
    assert_eq!(PROBE_DIV, 8);
    assert_eq!(st.through, 10 * 32, "{st:?}");
    assert_eq!(st.switches, 19, "{st:?}");
}

#[test]
fn a_window_that_cannot_pay_is_cut_with_the_same_verdict() {
    // The stream of `probes_back_off_while_aggregation_does_not_pay` in batches of 4, smaller
    // than a probe (32 packets): a probe is cut at the batch where its lookups reach the
    // limit, 15 lookups at 3 ns an update ((0.95 * 3 - packet_ns) * 32 / run_ns with the u32
    // constants), i.e. after 16 packets. The verdicts are those of uncut probes (19 switches,
    // ten probes at the same schedule), each probe half as long, and no weight is lost.
    let keys = alternating(2, 0, 300 * 256);
    let weights: Vec<u64> = (0..keys.len() as u64).map(|i| 1 + i % 3).collect();
    let model = Model {
        agg: aggevict::COST_U32,
        sink_ns: 3.0,
        behind_ns: 3.0,
    };
    assert_eq!(model.lookup_limit(32), 15);
    let mut f = auto_front(3.0, 256);
    let t = feed_all(&mut f, &keys, &weights, 4);
    assert_eq!(t.weight, exact(&keys, &weights));
    let st = f.stats().unwrap();
    // Probes at packets 0, 272, 800, 1840, 3904, 8016, 16224, 32624, 49024, 65424 (16 packets
    // each, then 1, 2, ... 64 windows of 256): ten probes of 16.
    assert_eq!((st.through, st.switches), (10 * 16, 19), "{st:?}");
    assert_eq!(st.packets, keys.len() as u64);
    assert_eq!(st.passed, t.updates);
    // Deterministic.
    let mut g = auto_front(3.0, 256);
    feed_all(&mut g, &keys, &weights, 4);
    assert_eq!(g.stats().unwrap(), st);

    // A window that pays is never cut: bursty traffic, every packet through the aggregator.
    let bursty = alternating(1, 20 * 256, 0);
    let ones = vec![1u64; bursty.len()];
    let mut b = auto_front(3.0, 256);
    feed_all(&mut b, &bursty, &ones, 4);
    let sb = b.stats().unwrap();
    assert_eq!((sb.through, sb.switches), (sb.packets, 0), "{sb:?}");

    // Where even a window without lookups would not pay, a probe lasts one batch.
    let cheap = Model {
        sink_ns: 0.5,
        behind_ns: 0.5,
        ..model
    };
    assert_eq!(cheap.lookup_limit(32), 0);
    let mut c = auto_front(0.5, 256);
    feed_all(&mut c, &keys, &weights, 4);
    assert_eq!(c.stats().unwrap().through, 10 * 4);
}

#[test]
fn the_model_weighs_the_aggregator_against_the_updates_it_saves() {
    let m = Model {
        agg: aggevict::AggCost {
            packet_ns: 1.0,
            run_ns: 4.0,
        },
        sink_ns: 10.0,
        behind_ns: 10.0,
    };
    // Bursty: a lookup per 5 packets, an update per 10: 1 + 0.8 + 1 < 10.
    assert!(m.pays(1000, 200, 100));
    // Shuffled: a lookup per packet, 60% of packets an update: 1 + 4 + 6 > 10.
    assert!(!m.pays(1000, 1000, 600));
    // A lookup per packet, 30% of packets an update: 1 + 4 + 3 = 8 < 9.5 pays, unless the
    // evictions cost the algorithm 1.6x the packets' updates: 1 + 4 + 4.8 = 9.8.
    assert!(m.pays(1000, 1000, 300));
    let dear = Model {
        behind_ns: 16.0,
        ..m
    };
    assert!(!dear.pays(1000, 1000, 300));
    // The margin: aggregating must save more than MARGIN of the algorithms' cost. Saving 7%
    // (with = 9.3) pays, 3% (9.7) does not, nor a tie (10).
    assert_eq!(MARGIN, 0.05);
    for (updates, pays) in [(430, true), (470, false), (500, false)] {
        let with = 1.0 + 4.0 + 10.0 * updates as f64 / 1000.0;
        assert_eq!(m.pays(1000, 1000, updates), pays, "with {with}");
    }
}

#[test]
fn agg_modes_parse_and_an_unknown_one_lists_the_choices() {
    for name in AggMode::NAMES {
        assert_eq!(name.parse::<AggMode>().unwrap().name(), name);
    }
    let e = "sometimes".parse::<AggMode>().unwrap_err().to_string();
    assert!(
        e.contains("sometimes") && e.contains("auto") && e.contains("always"),
        "{e}"
    );
    assert_eq!(AggMode::default(), AggMode::Auto);
}
