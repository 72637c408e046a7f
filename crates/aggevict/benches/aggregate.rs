//! ns/packet of the aggregator alone (a sink that only counts; u32 keys, and `FlowKey`s for the
//! SIMD default) and of Count-Min 4 x 65536 with and without it (u32 keys), per lookup backend, on Zipf(1.1) over 500k u32 keys (4M packets, batches of
//! 32, k = 2000, GRR: the target setting). Group `aggregator_only_wide`: the same ranks
//! as 8-byte (pair) and 13-byte (five-tuple) keys through fingerprint mode, detected backend,
//! given as `FlowKey`s (`len8`, `len13`) and as packed IPv4 tuples (`len8_packed`, ...).
//!
//! `cargo bench -p aggevict --bench aggregate -- --warm-up-time 1 --measurement-time 2`

use aggevict::{AggConfig, Aggregator, KeyBatch, Simd};
use algo::{Algorithm, BuildCtx};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use key::FlowKey;

const PACKETS: usize = 4_000_000;
const KEYS: usize = 500_000;
const BATCH: usize = 32;

fn zipf_keys() -> Vec<FlowKey> {
    // Rank -> a random-looking u32 (source IPs are not small consecutive integers).
    testkit::zipf_keys_with(PACKETS, KEYS, 1.1, 0x5eed, |r| {
        FlowKey::from_u32(key::mix64(u64::from(r)) as u32)
    })
}

fn count_min() -> Box<dyn Algorithm> {
    sketch::count_min::ENTRY
        .build(&toml::Table::new(), &BuildCtx::default())
        .expect("count_min")
}

fn backends() -> Vec<Simd> {
    [Simd::Avx512, Simd::Avx2, Simd::Sse2, Simd::Off]
        .into_iter()
        .filter(|&s| aggevict::simd::available(s))
        .collect()
}

fn bench(c: &mut Criterion) {
    let fkeys = zipf_keys();
    let keys: Vec<u32> = fkeys.iter().map(|k| k.prefix_u32()).collect();
    // One reused batch of weights, as the bench harness feeds them.
    let ones = vec![1u64; BATCH];

    let mut g = c.benchmark_group("aggregator_only");
    g.sample_size(10);
    g.throughput(Throughput::Elements(PACKETS as u64));
    for simd in backends() {
        let cfg = AggConfig {
            simd,
            ..AggConfig::default()
        };
        let mut agg = Aggregator::new(&cfg, 4).expect("aggregator");
        g.bench_function(simd.name(), |b| {
            b.iter(|| {
                let mut n = 0usize;
                let mut sink = |k: KeyBatch<'_>, _: &[u64]| n += k.len();
                for k in keys.chunks(BATCH) {
                    agg.update_batch_u32(k, &ones[..k.len()], &mut sink);
                }
                agg.flush(&mut sink);
                n
            })
        });
        if simd == Simd::Auto || simd == aggevict::simd::detect() {
            g.bench_function(format!("{simd}_flowkey"), |b| {
                b.iter(|| {
                    let mut n = 0usize;
                    let mut sink = |k: KeyBatch<'_>, _: &[u64]| n += k.len();
                    for k in fkeys.chunks(BATCH) {
                        agg.update_batch(k, &ones[..k.len()], &mut sink);
                    }
                    agg.flush(&mut sink);
                    n
                })
            });
        }
        agg.reset_stats();
        let mut sink = |_: KeyBatch<'_>, _: &[u64]| {};
        for k in keys.chunks(BATCH) {
            agg.update_batch_u32(k, &ones[..k.len()], &mut sink);
        }
        agg.flush(&mut sink);
        eprintln!("{simd}: evicted share {:.4}", agg.stats().evicted_share());
    }
    g.finish();

    let mut g = c.benchmark_group("aggregator_only_wide");
    g.sample_size(10);
    g.throughput(Throughput::Elements(PACKETS as u64));
    for kind in [key::KeyKind::Pair, key::KeyKind::FiveTuple] {
        // Rank -> a random-looking IPv4 tuple (the u32 key as the source, mixed bytes for the
        // rest), as the kind's `FlowKey`s and as packed tuples (`KeyBatch::V4`, the runner's
        // batch with Agg-Evict and no truth): the same keys either way.
        let tuples: Vec<key::V4> = keys
            .iter()
            .map(|&k| {
                let t = key::mix64(u64::from(k));
                let b = t.to_le_bytes();
                key::V4::new(k.to_be_bytes(), [b[0], b[1], b[2], b[3]], t as u16, 443, 6)
            })
            .collect();
        let wkeys: Vec<FlowKey> = tuples.iter().map(|v| v.key(kind)).collect();
        let len = kind.len(false);
        let mut agg = Aggregator::new(&AggConfig::default(), len).expect("aggregator");
        g.bench_function(format!("len{len}"), |b| {
            b.iter(|| {
                let mut n = 0usize;
                let mut sink = |k: KeyBatch<'_>, _: &[u64]| n += k.len();
                for k in wkeys.chunks(BATCH) {
                    agg.update_batch(k, &ones[..k.len()], &mut sink);
                }
                agg.flush(&mut sink);
                n
            })
        });
        g.bench_function(format!("len{len}_packed"), |b| {
            b.iter(|| {
                let mut n = 0usize;
                let mut sink = |k: KeyBatch<'_>, _: &[u64]| n += k.len();
                for k in tuples.chunks(BATCH) {
                    agg.update(KeyBatch::V4(k, kind), &ones[..k.len()], &mut sink);
                }
                agg.flush(&mut sink);
                n
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("count_min_4x65536");
    g.sample_size(10);
    g.throughput(Throughput::Elements(PACKETS as u64));
    let mut cm = count_min();
    g.bench_function("direct", |b| {
        b.iter(|| {
            for k in keys.chunks(BATCH) {
                cm.update_batch_u32(k, &ones[..k.len()]);
            }
        })
    });
    for simd in backends() {
        let cfg = AggConfig {
            simd,
            ..AggConfig::default()
        };
        let mut agg = Aggregator::new(&cfg, 4).expect("aggregator");
        let mut cm = count_min();
        g.bench_function(format!("agg_evict_{simd}"), |b| {
            b.iter(|| {
                let mut sink = |k: KeyBatch<'_>, w: &[u64]| k.feed(cm.as_mut(), w);
                for k in keys.chunks(BATCH) {
                    agg.update_batch_u32(k, &ones[..k.len()], &mut sink);
                }
                agg.flush(&mut sink);
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
