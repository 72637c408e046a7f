//! Space-Saving's update cost in each of its two structures (the Stream-Summary and the flat
//! scanned table: `Structure::SCAN_MAX_CAP` is chosen from this), at the Agg-Evict paper's
//! k = 128 (the `agg-evict` preset) and the other k given, alone on 4-byte-key streams of 4 M
//! packets: the bursty source trace of `netsift bench
//! agg-evict` (unit updates, as without Agg-Evict) and the same trace run-merged into
//! (key, run length) updates (weighted updates), the (key, count) pairs Agg-Evict's aggregator
//! (the lab's: 2000 arrays, GRR) evicts from it (what Space-Saving gets behind it), and a shuffled
//! Zipf(1.1) stream (misses nearly every update), alone, through the aggregator and with
//! weights spread over 1..=1000, and new keys replacing a minimum that stays one key (the flat
//! table's worst case). Batches of 32 through `update_batch_u32`
//! and, for comparison, `update_batch` with `FlowKey`s. Thread CPU time, least of `ROUNDS`
//! rounds.
//!
//! `cargo run --release -p table --example space_saving_cost [ROUNDS] [K,...] [STREAM]`
//! (default k: 128; STREAM: only the streams whose name contains it, e.g. under `perf`)

use algo::Algorithm;
use key::FlowKey;
use table::space_saving::{SpaceSaving, SpaceSavingConfig, Structure};

const BATCH: usize = 32;
const PACKETS: u64 = 4_000_000;

/// This thread's CPU time in ns: time slices given to other processes do not count.
fn cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec; the call writes only it.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(r, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// ns per packet of one pass of `keys` (weights `ws`) into a fresh summary.
fn pass(keys: &[u32], ws: &[u64], flow: bool, k: usize, structure: Structure) -> f64 {
    let mut s = SpaceSaving::with_structure(structure, SpaceSavingConfig { k }).expect("k");
    let fk: Vec<FlowKey> = if flow {
        keys.iter().map(|&k| FlowKey::from_u32(k)).collect()
    } else {
        Vec::new()
    };
    let t0 = cpu_ns();
    if flow {
        for (k, w) in fk.chunks(BATCH).zip(ws.chunks(BATCH)) {
            s.update_batch(k, w);
        }
    } else {
        for (k, w) in keys.chunks(BATCH).zip(ws.chunks(BATCH)) {
            s.update_batch_u32(k, w);
        }
    }
    let ns = cpu_ns() - t0;
    std::hint::black_box(s.min_count());
    ns as f64 / PACKETS as f64
}

/// The (key, count) pairs Agg-Evict's aggregator (the lab's: 2000 arrays, GRR) hands on from
/// `keys`, flushed every 2 M packets (the lab's epoch).
fn evictions(keys: &[u32]) -> (Vec<u32>, Vec<u64>) {
    let (mut ek, mut ew) = (Vec::new(), Vec::new());
    let cfg = aggevict::AggConfig {
        arrays: 2000,
        policy: aggevict::Policy::Grr,
        ..aggevict::AggConfig::default()
    };
    let mut agg = aggevict::Aggregator::new(&cfg, 4).expect("aggregator");
    let mut sink = |k: algo::KeyBatch<'_>, w: &[u64]| {
        if let algo::KeyBatch::U32(k) = k {
            ek.extend_from_slice(k);
            ew.extend_from_slice(w);
        }
    };
    let ones = [1u64; BATCH];
    for epoch in keys.chunks(2_000_000) {
        for k in epoch.chunks(BATCH) {
            agg.update_batch_u32(k, &ones[..k.len()], &mut sink);
        }
        agg.flush(&mut sink);
    }
    assert_eq!(
        ew.iter().sum::<u64>(),
        keys.len() as u64,
        "every packet once"
    );
    (ek, ew)
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let ks: Vec<usize> = std::env::args().nth(2).map_or(vec![128], |s| {
        s.split(',').map(|k| k.parse().expect("k")).collect()
    });
    let bursty = testkit::bursty_src_u32(PACKETS);
    let ones = vec![1u64; bursty.len()];
    // Runs of equal keys merged: what an aggregator hands on at the least.
    let (mut rk, mut rw) = (Vec::new(), Vec::new());
    for &k in &bursty {
        match rk.last() {
            Some(&l) if l == k => *rw.last_mut().expect("same length") += 1,
            _ => {
                rk.push(k);
                rw.push(1u64);
            }
        }
    }
    let (ek, ew) = evictions(&bursty);
    let shuffled = testkit::zipf_u32(PACKETS as usize, 500_000, 1.1, 0x5eed);
    let (sk, sw) = evictions(&shuffled);
    // Weights 1..=1000 in no order: the minimum is nearly always one key, so the flat table
    // scans for nearly every new key (its worst case; the Stream-Summary walks instead).
    let spread: Vec<u64> = (0..PACKETS).map(|i| 1 + key::mix64(i) % 1000).collect();
    // Churn at a lone minimum: 200 k keys of counts 1000 apart fill the table, then 3.8 M new
    // keys of weight 1 each replace the minimum, which stays one key (m + 1 is below the next
    // count): the Stream-Summary's O(1) case, the flat table's worst (a scan per new key).
    let churn: Vec<u32> = (0..PACKETS as u32).collect();
    let churn_w: Vec<u64> = (0..PACKETS)
        .map(|i| if i < 200_000 { 1_000 * (i + 1) } else { 1 })
        .collect();
    let cases: [(&str, &[u32], &[u64], bool); 8] = [
        ("bursty unit u32", &bursty, &ones, false),
        ("bursty unit FlowKey", &bursty, &ones, true),
        ("bursty runs u32", &rk, &rw, false),
        ("bursty evictions u32", &ek, &ew, false),
        ("shuffled unit u32", &shuffled, &ones, false),
        ("shuffled evictions u32", &sk, &sw, false),
        ("shuffled 1..1000 u32", &shuffled, &spread, false),
        ("churn at a lone min u32", &churn, &churn_w, false),
    ];
    let only = std::env::args().nth(3).unwrap_or_default();
    println!("# ns/packet, least of {rounds}: k, stream, Stream-Summary, scanned table");
    for k in ks {
        for (name, keys, ws, flow) in cases {
            if !name.contains(only.as_str()) {
                continue;
            }
            let [a, b] = [Structure::StreamSummary, Structure::Scan].map(|st| {
                (0..rounds)
                    .map(|_| pass(keys, ws, flow, k, st))
                    .fold(f64::INFINITY, f64::min)
            });
            println!(
                "k {k:5} {name:22} {a:6.2} {b:6.2} ns/packet ({} updates)",
                keys.len()
            );
        }
    }
}
