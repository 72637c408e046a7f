//! ns/packet in *thread CPU time* (`CLOCK_THREAD_CPUTIME_ID`, so a loaded machine does not
//! inflate the figure) of the aggregator alone and of Count-Min 4 x 65536 with and without
//! it (k = 2000, batches of 32), on two source-IP streams:
//!
//! * `bursty`: the trace of `netsift bench agg-evict --figure 5` (the `gen` crate, 20 M packets,
//!   500 k flows, Zipf(1.1), bursty order, seed 1), fed as u32 keys: the target setting;
//! * `shuffled`: Zipf(1.1) over 500 k random u32 keys, i.i.d. order, 4 M packets.
//!
//! Each is fed through the u32 hot path (`update_batch_u32`) and through `update_batch` with
//! 38-byte `FlowKey`s (first 4 M packets), which evicts the same sequence.
//!
//! `cargo run --release -p aggevict --example throughput [-- --quick]`
//!
//! `-- --profile [SIMD]`: only the bursty trace through the u32 GRR aggregator (default
//! `avx512`), timed repeatedly, for `perf record`; `-- --only-agg`: only the aggregator-alone
//! GRR u32 lines of both streams (the quick A/B of the hot path).

use aggevict::{AggConfig, Aggregator, KeyBatch, Policy, Simd};
use algo::{Algorithm, BuildCtx};
use key::FlowKey;

const BATCH: usize = 32;

/// Thread CPU time in ns (exact, unlike /proc's schedstat, which moves in scheduler ticks).
fn cpu_ns() -> Option<u64> {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec; the call writes only it.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    (r == 0).then(|| t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64)
}

/// Best of `reps` timed passes after one warm-up, ns per packet.
fn time(packets: usize, reps: usize, f: &mut dyn FnMut()) -> f64 {
    f();
    let mut best = f64::INFINITY;
    for _ in 0..reps {
        let t0 = cpu_ns().unwrap_or(0);
        f();
        let t = cpu_ns().unwrap_or(0).saturating_sub(t0) as f64 / packets as f64;
        best = best.min(t);
    }
    best
}

fn count_min() -> Box<dyn Algorithm> {
    sketch::count_min::ENTRY
        .build(&toml::Table::new(), &BuildCtx::default())
        .expect("count_min")
}

/// The bench's stream (`benches/aggregate.rs`): rank -> a random-looking u32.
fn shuffled(packets: usize) -> Vec<u32> {
    testkit::zipf_ranks(packets, 500_000, 1.1, 0x5eed)
        .into_iter()
        .map(|r| key::mix64(u64::from(r)) as u32)
        .collect()
}

fn bursty(packets: u64) -> Vec<u32> {
    testkit::bursty_src_u32(packets)
}

fn stream(name: &str, keys: &[u32], reps: usize) {
    let n = keys.len();
    // One reused batch of weights, as the bench harness feeds them (a 20 M-long weight
    // stream would cost more memory bandwidth than the aggregator itself).
    let ones = vec![1u64; BATCH];
    let fk: Vec<FlowKey> = keys
        .iter()
        .take(4_000_000)
        .map(|&k| FlowKey::from_u32(k))
        .collect();
    println!("== {name}: {n} packets ({} as FlowKeys)", fk.len());
    let mut sum = 0u64;
    let ns = time(n, reps, &mut || {
        for k in keys.chunks(BATCH) {
            for &k in k {
                sum = sum.wrapping_add(u64::from(k));
            }
        }
    });
    println!("floor (read the u32 keys): {ns:.2} ns/packet [{}]", sum & 1);
    let mut c = count_min();
    let ns = time(n, reps, &mut || {
        for (k, w) in keys.chunks(BATCH).map(|k| (k, &ones[..k.len()])) {
            c.update_batch_u32(k, w);
        }
        c.reset();
    });
    println!(
        "count_min direct, u32: {ns:.2} ns/packet ({:.0} Mpps)",
        1e3 / ns
    );
    let ns = time(fk.len(), reps, &mut || {
        for (k, w) in fk.chunks(BATCH).map(|k| (k, &ones[..k.len()])) {
            c.update_batch(k, w);
        }
        c.reset();
    });
    println!(
        "count_min direct, FlowKey: {ns:.2} ns/packet ({:.0} Mpps)",
        1e3 / ns
    );
    for policy in [Policy::Grr, Policy::Lru] {
        for simd in [Simd::Avx512, Simd::Avx2, Simd::Sse2, Simd::Off] {
            let cfg = AggConfig {
                simd,
                policy,
                ..AggConfig::default()
            };
            let Ok(mut agg) = Aggregator::new(&cfg, 4) else {
                continue;
            };
            let mut none = |_: KeyBatch<'_>, _: &[u64]| {};
            let ns = time(n, reps, &mut || {
                for (k, w) in keys.chunks(BATCH).map(|k| (k, &ones[..k.len()])) {
                    agg.update_batch_u32(k, w, &mut none);
                }
                agg.flush(&mut none);
            });
            let share = agg.stats().evicted_share();
            let ns_fk = time(fk.len(), reps, &mut || {
                for (k, w) in fk.chunks(BATCH).map(|k| (k, &ones[..k.len()])) {
                    agg.update_batch(k, w, &mut none);
                }
                agg.flush(&mut none);
            });
            let ns_cm = time(n, reps, &mut || {
                let mut sink = |k: KeyBatch<'_>, w: &[u64]| k.feed(c.as_mut(), w);
                for (k, w) in keys.chunks(BATCH).map(|k| (k, &ones[..k.len()])) {
                    agg.update_batch_u32(k, w, &mut sink);
                }
                agg.flush(&mut sink);
                c.reset();
            });
            println!(
                "{policy} {simd:>6}: aggregator u32 {ns:.2} ns/packet ({:.0} Mpps), FlowKey {ns_fk:.2}; + count_min {ns_cm:.2} ns/packet ({:.0} Mpps); evicted share {share:.3}",
                1e3 / ns,
                1e3 / ns_cm
            );
            if policy == Policy::Grr {
                // The branchy GRR lookup (hit/miss branch, miss out of line) on the same
                // stream, for a before/after in one run; it evicts the same sequence.
                agg.set_branchy_grr(true);
                let ns_b = time(n, reps, &mut || {
                    for (k, w) in keys.chunks(BATCH).map(|k| (k, &ones[..k.len()])) {
                        agg.update_batch_u32(k, w, &mut none);
                    }
                    agg.flush(&mut none);
                });
                agg.set_branchy_grr(false);
                println!("{policy} {simd:>6}: aggregator u32, branchy lookup: {ns_b:.2} ns/packet");
            }
        }
    }
}

/// The bursty u32 GRR aggregator alone, `reps` timed passes (for `perf record`).
fn profile(simd: Simd, reps: usize) {
    let keys = bursty(20_000_000);
    let ones = vec![1u64; BATCH];
    let cfg = AggConfig {
        simd,
        ..AggConfig::default()
    };
    let mut agg = Aggregator::new(&cfg, 4).expect("backend");
    let mut none = |_: KeyBatch<'_>, _: &[u64]| {};
    for _ in 0..reps {
        let ns = time(keys.len(), 1, &mut || {
            for (k, w) in keys.chunks(BATCH).map(|k| (k, &ones[..k.len()])) {
                agg.update_batch_u32(k, w, &mut none);
            }
            agg.flush(&mut none);
        });
        println!("bursty grr {simd}: aggregator u32 {ns:.2} ns/packet");
    }
}

/// Aggregator-alone GRR u32 lines (every available backend) of both streams.
fn only_agg(reps: usize) {
    let ones = vec![1u64; BATCH];
    for (name, keys) in [
        ("bursty", bursty(20_000_000)),
        ("shuffled", shuffled(4_000_000)),
    ] {
        for simd in [Simd::Avx512, Simd::Avx2, Simd::Sse2, Simd::Off] {
            let cfg = AggConfig {
                simd,
                ..AggConfig::default()
            };
            let Ok(mut agg) = Aggregator::new(&cfg, 4) else {
                continue;
            };
            let mut none = |_: KeyBatch<'_>, _: &[u64]| {};
            let ns = time(keys.len(), reps, &mut || {
                for (k, w) in keys.chunks(BATCH).map(|k| (k, &ones[..k.len()])) {
                    agg.update_batch_u32(k, w, &mut none);
                }
                agg.flush(&mut none);
            });
            println!("{name} grr {simd:>6}: aggregator u32 {ns:.2} ns/packet");
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--profile") {
        let simd = args
            .get(i + 1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(Simd::Avx512);
        profile(simd, 20);
        return;
    }
    if args.iter().any(|a| a == "--only-agg") {
        only_agg(5);
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let (reps, big) = if quick {
        (2, 4_000_000)
    } else {
        (3, 20_000_000)
    };
    stream("bursty (figure 5's trace)", &bursty(big), reps);
    stream("shuffled Zipf(1.1), 500k keys", &shuffled(4_000_000), reps);
}
