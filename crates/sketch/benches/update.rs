//! `update_batch` throughput of every sketch on the stream of `measure`'s `algorithms` bench
//! (Zipf(1.1), 2^20 keys drawn from 500k 4-byte keys, Agg-Evict 4.1's setting), fed in batches of
//! 32, plus bare loops that do only the counter accesses of Count-Min 4 x 65536 and of a
//! 2^20-counter count array (hash, prefetch the batch, then increment), in three variants, to
//! split the gap between `measure`'s bare loop and the sketches into its causes:
//!
//! - `u32_mulshift`: `measure`'s bare loop (raw u32 keys, one multiply-shift hash per row);
//! - `u32_xxh3`: raw u32 keys, one seeded xxh3-64 (the project's hash) split into row fields;
//! - `flowkey_xxh3`: the same over `FlowKey`s (38 bytes each: the input every `Algorithm` gets).
//!
//! Short run: `cargo bench -p sketch --bench update -- --warm-up-time 1 --measurement-time 2`.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use key::{FlowKey, HashFn};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

const N: usize = 1 << 20;
const KEYS: usize = 500_000;
const CHUNK: usize = 32;

/// The key stream of `crates/measure/benches/algorithms.rs` (same CDF, seed and scattering).
fn zipf_stream(n: usize, keys: usize, s: f64, seed: u64) -> Vec<u32> {
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
            let r = cdf.partition_point(|&c| c < u) as u32;
            r.wrapping_mul(0x9E37_79B1) ^ 0x5bd1_e995
        })
        .collect()
}

#[inline(always)]
fn prefetch(p: *const u32) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is an SSE hint (x86_64 baseline) that never faults, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// `R` x 2^`bits` counters, batches of 32: `cells` gives the `R` cells of key `i` of a chunk.
#[inline(always)]
fn bare<const R: usize, K>(counters: &mut [u32], keys: &[K], cells: impl Fn(&K) -> [usize; R]) {
    let mut idx = [[0usize; R]; CHUNK];
    for chunk in keys.chunks(CHUNK) {
        for (k, ix) in chunk.iter().zip(idx.iter_mut()) {
            *ix = cells(k);
            for &j in ix.iter() {
                prefetch(&counters[j]);
            }
        }
        for ix in idx.iter().take(chunk.len()) {
            for &j in ix {
                counters[j] = counters[j].wrapping_add(1);
            }
        }
    }
}

const SEEDS: [u64; 4] = [
    0x9E37_79B9_7F4A_7C15,
    0xC2B2_AE3D_27D4_EB4F,
    0x1656_67B1_9E37_79F9,
    0x85EB_CA77_C2B2_AE63,
];

fn bare_variants<const R: usize>(
    c: &mut Criterion,
    name: &str,
    bits: u32,
    raw: &[u32],
    keys: &[FlowKey],
) {
    let hash = HashFn::new(0x1234);
    let w = 1usize << bits;
    let mask = (1u64 << bits) - 1;
    let split =
        move |h: u64| std::array::from_fn(|r| r * w + ((h >> (r as u32 * bits)) & mask) as usize);
    let mut counters = vec![0u32; R * w];
    let mut g = c.benchmark_group("update");
    g.throughput(Throughput::Elements(raw.len() as u64));
    g.bench_function(format!("{name}/u32_mulshift"), |b| {
        b.iter(|| {
            bare::<R, u32>(&mut counters, raw, |&k| {
                std::array::from_fn(|r| {
                    r * w + ((u64::from(k) | 1).wrapping_mul(SEEDS[r % 4]) >> (64 - bits)) as usize
                })
            })
        })
    });
    g.bench_function(format!("{name}/u32_xxh3"), |b| {
        b.iter(|| {
            bare::<R, u32>(&mut counters, raw, |k| {
                split(hash.hash_bytes(&k.to_be_bytes()))
            })
        })
    });
    g.bench_function(format!("{name}/flowkey_xxh3"), |b| {
        b.iter(|| bare::<R, FlowKey>(&mut counters, keys, |k| split(hash.hash(k))))
    });
    g.finish();
    black_box(&counters);
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

fn benches(c: &mut Criterion) {
    let raw = zipf_stream(N, KEYS, 1.1, 11);
    let keys: Vec<FlowKey> = raw.iter().map(|&k| FlowKey::from_u32(k)).collect();
    let ones = vec![1u64; keys.len()];
    bare_variants::<4>(c, "bare_cm_4x65536", 16, &raw, &keys);
    bare_variants::<1>(c, "bare_count_array_1M", 20, &raw, &keys);
    run(c, "count_min", "", &keys, &ones);
    run(c, "count_array", "", &keys, &ones);
    run(c, "count_sketch", "", &keys, &ones);
    run(c, "univmon", "", &keys, &ones);
    run(c, "mrac", "", &keys, &ones);
}

criterion_group!(update, benches);
criterion_main!(update);
