//! Space-Saving's update cost in each of its two structures (the Stream-Summary and the flat
//! scanned table: `Structure::SCAN_MAX_CAP` is chosen from this), at the Agg-Evict paper's
//! k = 128 (the `agg-evict` preset) and the other k given, alone on 4-byte-key streams of 4 M
//! packets: the bursty source trace of `netsift bench
//! agg-evict` (unit updates, as without Agg-Evict) and the same trace run-merged into
//! (key, run length) updates (weighted updates), the (key, count) pairs Agg-Evict's aggregator
//! (the lab's: 2000 arrays, GRR) evicts from it (what Space-Saving gets behind it), plus a shuffled
//! Zipf(1.1) stream (misses nearly every update). Batches of 32 through `update_batch_u32`
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
    // The aggregator's evictions, flushed every 2 M packets (the lab's epoch).
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
    for epoch in bursty.chunks(2_000_000) {
        for (k, w) in epoch.chunks(BATCH).zip(ones.chunks(BATCH)) {
            agg.update_batch_u32(k, w, &mut sink);
        }
        agg.flush(&mut sink);
    }
    assert_eq!(ew.iter().sum::<u64>(), PACKETS, "every packet evicted once");
    let shuffled = testkit::zipf_u32(PACKETS as usize, 500_000, 1.1, 0x5eed);
    let cases: [(&str, &[u32], &[u64], bool); 5] = [
        ("bursty unit u32", &bursty, &ones, false),
        ("bursty unit FlowKey", &bursty, &ones, true),
        ("bursty runs u32", &rk, &rw, false),
        ("bursty evictions u32", &ek, &ew, false),
        ("shuffled unit u32", &shuffled, &ones, false),
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
