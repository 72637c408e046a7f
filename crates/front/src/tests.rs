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
