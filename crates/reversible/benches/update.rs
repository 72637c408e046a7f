//! `update_batch` throughput over a Zipf(1.1) stream of 1M keys drawn from 500k keys.
//! rev_sketch and deltoid see 4-byte keys; two_level sees 8-byte pairs (host from the Zipf
//! draw, peer from a second draw), as it is fed in a run.

use algo::{Algorithm, BuildCtx, Side};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use key::FlowKey;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

const LEN: usize = 1_000_000;
const KEYS: usize = 500_000;
const BATCH: usize = 32;

fn zipf_ranks(seed: u64) -> Vec<u64> {
    let mut cdf = Vec::with_capacity(KEYS);
    let mut acc = 0.0;
    for r in 1..=KEYS {
        acc += (r as f64).powf(-1.1);
        cdf.push(acc);
    }
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..LEN)
        .map(|_| {
            let u = rng.gen::<f64>() * acc;
            cdf.partition_point(|&c| c < u).min(KEYS - 1) as u64
        })
        .collect()
}

fn run(c: &mut Criterion, name: &str, keys: &[FlowKey], ctx: BuildCtx) {
    let weights = vec![1u64; keys.len()];
    let mut g = c.benchmark_group("update_batch");
    g.throughput(Throughput::Elements(keys.len() as u64));
    g.sample_size(10);
    let make = || {
        reversible::build(name, &toml::Table::new(), &ctx)
            .ok()
            .flatten()
            .expect("default configuration builds")
    };
    g.bench_function(name, |b| {
        b.iter_batched_ref(
            make,
            |a: &mut Box<dyn Algorithm>| {
                for (k, w) in keys.chunks(BATCH).zip(weights.chunks(BATCH)) {
                    a.update_batch(k, w);
                }
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    let ranks = zipf_ranks(1);
    let keys4: Vec<FlowKey> = ranks
        .iter()
        .map(|&r| FlowKey::from_u32(key::mix64(r) as u32))
        .collect();
    let peers = zipf_ranks(2);
    let pairs: Vec<FlowKey> = ranks
        .iter()
        .zip(&peers)
        .map(|(&h, &p)| {
            let mut b = [0u8; 8];
            b[..4].copy_from_slice(&(key::mix64(h) as u32).to_be_bytes());
            b[4..].copy_from_slice(&(key::mix64(p ^ 0xdead) as u32).to_be_bytes());
            FlowKey::from_bytes(&b).unwrap_or(FlowKey::EMPTY)
        })
        .collect();
    let ctx4 = BuildCtx::default();
    run(c, "rev_sketch", &keys4, ctx4);
    run(c, "deltoid", &keys4, ctx4);
    let ctx8 = BuildCtx {
        key_len: 8,
        side: Side::Src,
        ..ctx4
    };
    run(c, "two_level", &pairs, ctx8);
}

criterion_group!(update, benches);
criterion_main!(update);
