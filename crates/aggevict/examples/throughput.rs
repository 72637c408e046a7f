//! ns/packet in *thread CPU time* (from /proc/thread-self/schedstat, so a loaded machine does
//! not inflate the figure), for the aggregator alone and Count-Min 4 x 65536 with and without
//! it, on the bench's stream (Zipf(1.1), 500k u32 keys, 4M packets, batches of 32, k = 2000).
//!
//! `cargo run --release -p aggevict --example throughput`

use aggevict::{AggConfig, Aggregator, Policy, Simd};
use algo::BuildCtx;
use key::FlowKey;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

fn main() {
    let (packets, keys_n) = (4_000_000usize, 500_000usize);
    let mut cdf = Vec::with_capacity(keys_n);
    let mut acc = 0.0;
    for r in 1..=keys_n {
        acc += 1.0 / (r as f64).powf(1.1);
        cdf.push(acc);
    }
    let mut rng = Pcg64::seed_from_u64(0x5eed);
    let keys: Vec<FlowKey> = (0..packets)
        .map(|_| {
            let u = rng.gen::<f64>() * acc;
            FlowKey::from_u32(key::mix64(cdf.partition_point(|&c| c < u) as u64) as u32)
        })
        .collect();
    let ones = vec![1u64; packets];
    let reps = 5;
    let time = |f: &mut dyn FnMut()| -> f64 {
        f(); // warm-up
        let t0 = cpu_ns().unwrap_or(0);
        for _ in 0..reps {
            f();
        }
        (cpu_ns().unwrap_or(0) - t0) as f64 / (reps * packets) as f64
    };
    let cm = || {
        sketch::build("count_min", &toml::Table::new(), &BuildCtx::default())
            .ok()
            .flatten()
            .expect("count_min")
    };
    let mut sum = 0u64;
    let ns = time(&mut || {
        for k in keys.chunks(32) {
            for k in k {
                sum = sum.wrapping_add(u64::from(k.prefix_u32()) ^ k.len() as u64);
            }
        }
    });
    println!(
        "floor (read the 38-byte keys): {ns:.2} ns/packet [{}]",
        sum & 1
    );
    let mut c = cm();
    let ns = time(&mut || {
        for (k, w) in keys.chunks(32).zip(ones.chunks(32)) {
            c.update_batch(k, w);
        }
    });
    println!("count_min direct: {ns:.2} ns/packet ({:.0} Mpps)", 1e3 / ns);
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
            let ns = time(&mut || {
                let mut sink = |_: &[FlowKey], _: &[u64]| {};
                for (k, w) in keys.chunks(32).zip(ones.chunks(32)) {
                    agg.update_batch(k, w, &mut sink);
                }
                agg.flush(&mut sink);
            });
            let share = agg.stats().evicted_share();
            let mut c = cm();
            let ns_cm = time(&mut || {
                let mut sink = |k: &[FlowKey], w: &[u64]| c.update_batch(k, w);
                for (k, w) in keys.chunks(32).zip(ones.chunks(32)) {
                    agg.update_batch(k, w, &mut sink);
                }
                agg.flush(&mut sink);
            });
            println!(
                "{policy} {simd:>6}: aggregator {ns:.2} ns/packet ({:.0} Mpps), + count_min {ns_cm:.2} ns/packet ({:.0} Mpps), evicted share {share:.3}",
                1e3 / ns,
                1e3 / ns_cm
            );
        }
    }
}
