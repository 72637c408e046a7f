//! `update_batch` throughput over a Zipf(1.1) stream of 1M keys drawn from 500k keys.
//! rev_sketch and deltoid see 4-byte keys; two_level sees 8-byte pairs (host from the Zipf
//! draw, peer from a second draw), as it is fed in a run.

use algo::{Algorithm, BuildCtx, Side};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use key::FlowKey;

const LEN: usize = 1_000_000;
const KEYS: usize = 500_000;
const BATCH: usize = 32;

fn run(c: &mut Criterion, entry: &algo::Entry, keys: &[FlowKey], ctx: BuildCtx) {
    let name = entry.name;
    let weights = vec![1u64; keys.len()];
    let mut g = c.benchmark_group("update_batch");
    g.throughput(Throughput::Elements(keys.len() as u64));
    g.sample_size(10);
    let make = || {
        entry
            .build(&toml::Table::new(), &ctx)
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
    let ranks = testkit::zipf_ranks(LEN, KEYS, 1.1, 1);
    let keys4: Vec<FlowKey> = ranks
        .iter()
        .map(|&r| FlowKey::from_u32(key::mix64(u64::from(r)) as u32))
        .collect();
    let peers = testkit::zipf_ranks(LEN, KEYS, 1.1, 2);
    let pairs: Vec<FlowKey> = ranks
        .iter()
        .zip(&peers)
        .map(|(&h, &p)| {
            let mut b = [0u8; 8];
            b[..4].copy_from_slice(&(key::mix64(u64::from(h)) as u32).to_be_bytes());
            b[4..].copy_from_slice(&(key::mix64(u64::from(p) ^ 0xdead) as u32).to_be_bytes());
            FlowKey::from_bytes(&b).unwrap_or(FlowKey::EMPTY)
        })
        .collect();
    let ctx4 = BuildCtx::default();
    run(c, &reversible::rev_sketch::ENTRY, &keys4, ctx4);
    run(c, &reversible::deltoid::ENTRY, &keys4, ctx4);
    let ctx8 = BuildCtx {
        key_len: 8,
        side: Side::Src,
        ..ctx4
    };
    run(c, &reversible::two_level::ENTRY, &pairs, ctx8);
}

criterion_group!(update, benches);
criterion_main!(update);
