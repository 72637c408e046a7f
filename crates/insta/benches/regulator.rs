//! FlowRegulator update rate on Zipf(1.1) keys (1 M packets drawn from 500 k 4-byte keys), with
//! a bare memory-access loop over an array of the same size as the reference, and the share of
//! packets that reach the table (printed once per configuration before the timings).
//!
//! - `reference/or_word`: per precomputed hash, one word index (`key::reduce`) and one OR into a
//!   128 KB array: the floor of any one-access counter of that size.
//! - `regulator/{two,one}_layers`: `Regulator::offer` on the same precomputed hashes (the
//!   paper's 128 KB: 8192 L1 words, plus the three L2 arrays for two layers); emissions are
//!   counted, not inserted.
//! - `algorithm/{instameasure,rcc}_{paper,default}`: the whole update (`update_batch_u32`: xxh3 of
//!   the key, the regulator, the table insertions) in bursts of 32.
//!
//! cargo bench -p insta --bench regulator -- --warm-up-time 1 --measurement-time 3

use algo::{Algorithm, BuildCtx};
use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use insta::rcc::Bits;
use insta::regulator::Regulator;
use insta::{InstaConfig, InstaMeasure};

const BURST: usize = 32;
const WORDS: usize = 8192;

fn bench(c: &mut Criterion) {
    let keys = testkit::zipf_u32(1_000_000, 500_000, 1.1, 0xbe4c);
    let weights = vec![1u64; keys.len()];
    let hash = key::HashFn::new(0x1234);
    let hashes: Vec<u64> = keys
        .iter()
        .map(|k| hash.hash_bytes(&k.to_be_bytes()))
        .collect();
    let n = keys.len() as u64;

    // Shares of packets reaching the table.
    for two in [true, false] {
        let mut r = Regulator::new(WORDS, two);
        let mut bits = Bits::new(1);
        let emits = hashes
            .iter()
            .filter(|&&h| r.offer(h, &mut bits).is_some())
            .count();
        eprintln!(
            "table insert share, {} layer(s), {} KiB: {:.4} ({emits} of {n})",
            if two { 2 } else { 1 },
            Regulator::bytes_for(WORDS, two) / 1024,
            emits as f64 / n as f64
        );
    }

    let mut g = c.benchmark_group("insta");
    g.throughput(Throughput::Elements(n));
    g.sample_size(10);
    g.bench_function("reference/or_word", |b| {
        let mut arr = vec![0u32; Regulator::bytes_for(WORDS, true) / 4];
        b.iter(|| {
            for &h in &hashes {
                let i = key::reduce(h, arr.len());
                arr[i] |= 1 << (h & 31);
            }
            black_box(&arr);
        })
    });
    for two in [true, false] {
        let name = if two {
            "regulator/two_layers"
        } else {
            "regulator/one_layer"
        };
        g.bench_function(name, |b| {
            b.iter_batched_ref(
                || (Regulator::new(WORDS, two), Bits::new(1)),
                |(r, bits)| {
                    let mut emits = 0u32;
                    for &h in &hashes {
                        emits += u32::from(r.offer(h, bits).is_some());
                    }
                    black_box(emits)
                },
                BatchSize::PerIteration,
            )
        });
    }
    let ctx = BuildCtx::default();
    for (two, label) in [(true, "instameasure"), (false, "rcc")] {
        for (cfg, size) in [
            (
                InstaConfig {
                    words: WORDS,
                    ..InstaConfig::default()
                },
                "paper",
            ),
            (InstaConfig::default(), "default"),
        ] {
            g.bench_function(format!("algorithm/{label}_{size}"), |b| {
                b.iter_batched_ref(
                    || InstaMeasure::new(two, cfg.clone(), &ctx).unwrap(),
                    |a| {
                        for (k, w) in keys.chunks(BURST).zip(weights.chunks(BURST)) {
                            a.update_batch_u32(k, w);
                        }
                    },
                    BatchSize::PerIteration,
                )
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
