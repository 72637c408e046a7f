//! `update_batch` throughput of every algorithm of the crate over a Zipf(1.1) stream of 1M keys
//! drawn from 500k 4-byte keys, fed in bursts of 32 (the artifact's MAX_RX_BURST). Each
//! iteration starts from an empty structure (built outside the timed part).
//!
//! cargo bench -p table --bench update -- --warm-up-time 1 --measurement-time 2

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};

const BURST: usize = 32;

fn bench(c: &mut Criterion) {
    let keys = testkit::zipf_keys(1_000_000, 500_000, 1.1, 0xbe4c);
    let weights = vec![1u64; keys.len()];
    let ctx = algo::BuildCtx::default();
    let mut g = c.benchmark_group("update");
    g.throughput(Throughput::Elements(keys.len() as u64));
    g.sample_size(10);
    for e in [
        &table::linear_hash::ENTRY,
        &table::cuckoo::ENTRY_1,
        &table::cuckoo::ENTRY_4,
        &table::heap::ENTRY,
        &table::space_saving::ENTRY,
        &table::misra_gries::ENTRY,
        &table::flow_radar::ENTRY,
        &table::ewma_change::ENTRY,
    ] {
        let name = e.name;
        g.bench_function(name, |b| {
            b.iter_batched_ref(
                || {
                    // A fresh empty structure per iteration, built outside the timing.
                    e.build(&toml::Table::new(), &ctx).expect("default config")
                },
                |a| {
                    for (k, w) in keys.chunks(BURST).zip(weights.chunks(BURST)) {
                        a.update_batch(k, w);
                    }
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
