//! `update_batch` throughput of every sketch on a Zipf(1.1) stream of 1M keys drawn from 500k
//! 4-byte keys (Agg-Evict 4.1's setting), fed in batches of 32, plus `bare_loop`: exactly the
//! Count-Min memory accesses (one xxh3 hash, 4 columns from its 16-bit fields, batches of 32
//! with prefetch, 4 increments) without the abstraction, to measure its overhead.
//!
//! Short run: `cargo bench -p sketch --bench update -- --warm-up-time 1 --measurement-time 2`.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use key::{FlowKey, HashFn};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

const N: usize = 1_000_000;
const KEYS: usize = 500_000;
const CHUNK: usize = 32;

fn zipf_stream(n: usize, keys: usize, s: f64, seed: u64) -> Vec<FlowKey> {
    let mut cdf = Vec::with_capacity(keys);
    let mut acc = 0.0;
    for r in 1..=keys {
        acc += 1.0 / (r as f64).powf(s);
        cdf.push(acc);
    }
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let u = rng.gen::<f64>() * acc;
            let r = cdf.partition_point(|&c| c < u).min(keys - 1) as u32;
            // Scatter ranks over the key space (odd multiplier: a bijection on u32).
            FlowKey::from_u32(r.wrapping_mul(0x9E37_79B1))
        })
        .collect()
}

fn run(c: &mut Criterion, name: &str, params: &str, keys: &[FlowKey], ones: &[u64]) {
    let params: toml::Table = params.parse().expect("bench params");
    let ctx = algo::BuildCtx::default();
    let mut a = sketch::build(name, &params, &ctx)
        .expect("config")
        .expect("known name");
    let mut g = c.benchmark_group("update");
    g.throughput(Throughput::Elements(keys.len() as u64));
    g.bench_function(name, |b| {
        b.iter(|| {
            for (k, w) in keys.chunks(CHUNK).zip(ones.chunks(CHUNK)) {
                a.update_batch(k, w);
            }
        })
    });
    g.finish();
    black_box(a.memory_bytes());
}

/// The Count-Min memory accesses with nothing else.
fn bare_loop(c: &mut Criterion, keys: &[FlowKey]) {
    let hash = HashFn::new(0x1234);
    let mut counters = vec![0u32; 4 * 65536];
    let mut g = c.benchmark_group("update");
    g.throughput(Throughput::Elements(keys.len() as u64));
    g.bench_function("bare_loop", |b| {
        b.iter(|| {
            for chunk in keys.chunks(CHUNK) {
                let mut idx = [[0usize; 4]; CHUNK];
                for (k, ix) in chunk.iter().zip(idx.iter_mut()) {
                    let h = hash.hash(k);
                    for (r, slot) in ix.iter_mut().enumerate() {
                        *slot = r * 65536 + ((h >> (16 * r)) & 0xffff) as usize;
                        #[cfg(target_arch = "x86_64")]
                        // SAFETY: prefetch is an SSE hint (x86_64 baseline) that never faults;
                        // the index is in bounds.
                        unsafe {
                            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                                counters.as_ptr().add(*slot).cast::<i8>(),
                            );
                        }
                    }
                }
                for ix in idx.iter().take(chunk.len()) {
                    for &j in ix {
                        counters[j] = counters[j].wrapping_add(1);
                    }
                }
            }
        })
    });
    g.finish();
    black_box(&counters);
}

fn benches(c: &mut Criterion) {
    let keys = zipf_stream(N, KEYS, 1.1, 42);
    let ones = vec![1u64; keys.len()];
    bare_loop(c, &keys);
    run(c, "count_min", "", &keys, &ones);
    run(c, "count_sketch", "", &keys, &ones);
    run(c, "count_array", "", &keys, &ones);
    run(c, "univmon", "", &keys, &ones);
    run(c, "mrac", "", &keys, &ones);
}

criterion_group!(update, benches);
criterion_main!(update);
