//! `update_batch` throughput of every algorithm of the crate over a Zipf(1.1) stream of 1M keys
//! drawn from 500k 4-byte keys (bloom_spreader: the same ranks as 8-byte pairs), fed in batches
//! of 32 (Agg-Evict's MAX_RX_BURST).

use algo::{Algorithm, BuildCtx};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use key::FlowKey;

const STREAM: usize = 1_000_000;
const UNIVERSE: usize = 500_000;
const BATCH: usize = 32;

fn bench(c: &mut Criterion) {
    let ranks = testkit::zipf_ranks(STREAM, UNIVERSE, 1.1, 42);
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
    for e in [
        &distinct::fm::ENTRY,
        &distinct::linear_counting::ENTRY,
        &distinct::hyperloglog::ENTRY,
        &distinct::kmin::ENTRY,
        &distinct::bloom_spreader::ENTRY,
    ] {
        let name = e.name;
        // The spreader structure is fed `pair` keys, as in a run.
        let input = if e.answers(algo::Task::Superspreaders) {
            &pairs
        } else {
            &keys
        };
        let mut a: Box<dyn Algorithm> = e
            .build(&toml::Table::new(), &ctx)
            .expect("every entry builds with defaults");
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
