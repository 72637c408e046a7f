//! `update_batch` throughput of every algorithm of the crate over a Zipf(1.1) stream of 1M keys
//! drawn from 500k 4-byte keys (bloom_spreader: the same ranks as 8-byte pairs), fed in batches
//! of 32 (Agg-Evict's MAX_RX_BURST).

use algo::{Algorithm, BuildCtx};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use key::FlowKey;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

const STREAM: usize = 1_000_000;
const UNIVERSE: usize = 500_000;
const BATCH: usize = 32;

fn zipf_ranks(universe: usize, skew: f64, len: usize, seed: u64) -> Vec<u32> {
    let mut cdf = Vec::with_capacity(universe);
    let mut acc = 0.0;
    for r in 1..=universe {
        acc += 1.0 / (r as f64).powf(skew);
        cdf.push(acc);
    }
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..len)
        .map(|_| {
            let u = rng.gen::<f64>() * acc;
            cdf.partition_point(|&c| c < u).min(universe - 1) as u32
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let ranks = zipf_ranks(UNIVERSE, 1.1, STREAM, 42);
    let keys: Vec<FlowKey> = ranks
        .iter()
        .map(|&r| FlowKey::from_u32(r.wrapping_mul(0x9E37_79B1)))
        .collect();
    // Pairs: a rank's source talks to one of 64 destinations, so a few sources are spreaders.
    let pairs: Vec<FlowKey> = ranks
        .iter()
        .enumerate()
        .map(|(i, &r)| {
            let mut b = [0u8; 8];
            b[..4].copy_from_slice(&(r % 50_000).to_be_bytes());
            b[4..].copy_from_slice(&((r ^ i as u32) % 64).to_be_bytes());
            FlowKey::from_bytes(&b).unwrap_or_default()
        })
        .collect();
    let weights = vec![1u64; STREAM];
    let ctx = BuildCtx::default();
    let mut g = c.benchmark_group("update");
    g.throughput(Throughput::Elements(STREAM as u64));
    g.sample_size(10);
    for &name in distinct::NAMES {
        let input = if name == "bloom_spreader" {
            &pairs
        } else {
            &keys
        };
        let mut a: Box<dyn Algorithm> = distinct::build(name, &toml::Table::new(), &ctx)
            .ok()
            .flatten()
            .expect("every NAMES entry builds with defaults");
        g.bench_function(name, |b| {
            b.iter(|| {
                a.reset();
                for (ks, ws) in input.chunks(BATCH).zip(weights.chunks(BATCH)) {
                    a.update_batch(ks, ws);
                }
                a.cardinality()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
