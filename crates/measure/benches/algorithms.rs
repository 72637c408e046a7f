//! Every algorithm's update on one Zipf(1.1) stream of 1 M keys over 500 k IPv4 source keys
//! (batches of 32, the default configurations), fed as `FlowKey`s (`netsift/NAME`, the path of
//! every key kind) and as 4-byte u32 keys (`netsift_u32/NAME`, the path of source/destination
//! IPv4 keys; spreader algorithms take pair keys and have only the first), plus:
//! - bare loops doing the memory accesses of Count-Min 4 x 65536 and of a 1 M-counter count array
//!   (one multiply-shift hash per row, batches of 32 with prefetch) — the floor memory allows;
//! - the Count-Min and HyperLogLog of the `datasketches` crate and the Count-Min of
//!   `asap_sketchlib`, at the same sizes.
//!
//! All in one group and one run, so figures can be stated as ratios (to count_array, to the bare
//! loop, to the peers).
//!
//! What each side computes per key (read every peer ratio with this; the sides do not do the
//! same work):
//! - netsift `count_min` (and `count_array`), 4-byte keys, either path: **no hash of the key**.
//!   The key's value is its code; each row maps it with one multiply-add-shift
//!   (`HashFn::affine`, strongly universal on 32-bit keys, ALGORITHMS.md 2), then increments
//!   (batches of 32: all columns first, with prefetch). Wider keys: one xxh3-64 of the key bytes,
//!   then the same per-row map. With the default candidate set, a probe of that set too.
//! - netsift `hyperloglog` (and the other distinct counters): one xxh3-64 of the key bytes.
//! - `datasketches` Count-Min: per row, a **full MurmurHash3 x64-128** of the item with that row's
//!   seed (4 hashes of the key per update), then a reduction to the bucket. Of a `u32` the hash
//!   covers its 4 bytes; of `&[u8]` (`_keybytes`) Rust's `Hash` adds a length prefix.
//! - `datasketches` HyperLogLog: one MurmurHash3 x64-128 per key (its coupon), then the
//!   list/set/array mode the sketch is in (at 1 M updates over 500 k keys: the array).
//! - `asap_sketchlib` Count-Min (the default `RegularPath`): per row, a **full seeded xxHash64**
//!   of the `DataInput` (4 hashes per update), the column as its low 32 bits `% cols` (a
//!   division), `i32` counters.
//!
//! So the Count-Min peers hash every key once per row, where netsift's u32 path hashes nothing:
//! most of the gap between them is hashing, not memory layout. The `_keybytes` variants give
//! the peers netsift's `FlowKey` bytes, as `netsift/count_min` receives them.

use std::hint::black_box;

use algo::{Algorithm, BuildCtx, Task};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use key::prefetch;
use key::FlowKey;

const N: usize = 1 << 20;
const KEYS: usize = 500_000;
const BATCH: usize = 32;

/// Zipf(1.1) over KEYS ranks, scattered u32 keys (the benches' shared stream).
fn stream() -> Vec<u32> {
    gen::zipf_u32(N, KEYS, 1.1, 11)
}

/// `ones` is one batch of unit weights, reused for every batch (packet counting: what `netsift
/// run` passes; a stream-long weight array would add 8 bytes of memory traffic per key).
fn feed(a: &mut dyn Algorithm, keys: &[FlowKey], ones: &[u64]) {
    for k in keys.chunks(BATCH) {
        a.update_batch(k, &ones[..k.len()]);
    }
}

/// The 4-byte-key path (`update_batch_u32`): what `netsift run` and `bench` feed for IPv4
/// source or destination keys.
fn feed_u32(a: &mut dyn Algorithm, keys: &[u32], ones: &[u64]) {
    for k in keys.chunks(BATCH) {
        a.update_batch_u32(k, &ones[..k.len()]);
    }
}

/// The bare loops' per-row multipliers.
const SEEDS: [u64; 4] = [
    0x9E37_79B9_7F4A_7C15,
    0xC2B2_AE3D_27D4_EB4F,
    0x1656_67B1_9E37_79F9,
    0x85EB_CA77_C2B2_AE63,
];

/// The memory accesses of Count-Min d x w (w a power of two): multiply-shift hash per row,
/// batches of 32: hash and prefetch the batch, then increment.
fn bare_cm(counters: &mut [u32], rows: usize, w_bits: u32, keys: &[u32]) {
    let (w, seeds) = (1usize << w_bits, SEEDS);
    let mut idx = [0usize; BATCH * 4];
    for chunk in keys.chunks(BATCH) {
        for (i, &k) in chunk.iter().enumerate() {
            for r in 0..rows {
                let h = ((k as u64 | 1).wrapping_mul(seeds[r]) >> (64 - w_bits)) as usize;
                let j = r * w + h;
                idx[i * rows + r] = j;
                prefetch(&counters[j]);
            }
        }
        for &j in &idx[..chunk.len() * rows] {
            counters[j] += 1;
        }
    }
}

/// [`bare_cm`] without the batch: hash and increment key by key, no prefetch (what a counter
/// matrix that fits the caches needs; asap_sketchlib's FastPath has this shape).
fn bare_cm_fused(counters: &mut [u32], rows: usize, w_bits: u32, keys: &[u32]) {
    let w = 1usize << w_bits;
    for &k in keys {
        for (r, s) in SEEDS.iter().enumerate().take(rows) {
            let h = ((k as u64 | 1).wrapping_mul(*s) >> (64 - w_bits)) as usize;
            counters[r * w + h] += 1;
        }
    }
}

fn bench(c: &mut Criterion) {
    let raw = stream();
    let keys: Vec<FlowKey> = raw.iter().map(|&k| FlowKey::from_u32(k)).collect();
    // Pair keys for the spreader algorithms: each source talks to a few derived destinations.
    let pairs: Vec<FlowKey> = raw
        .iter()
        .enumerate()
        .map(|(i, &k)| {
            let mut b = [0u8; 8];
            b[..4].copy_from_slice(&k.to_be_bytes());
            b[4..].copy_from_slice(&((i as u32 % 97).wrapping_mul(0x0101_0101) ^ k).to_be_bytes());
            FlowKey::from_bytes(&b).unwrap()
        })
        .collect();
    let ones = [1u64; BATCH];

    let mut g = c.benchmark_group("update_zipf1.1_500k");
    g.throughput(Throughput::Elements(N as u64));
    g.sample_size(10);
    g.warm_up_time(std::time::Duration::from_secs(1));
    g.measurement_time(std::time::Duration::from_secs(3));

    let mut cm = vec![0u32; 4 << 16];
    g.bench_function("bare_loop_cm_4x65536", |b| {
        b.iter(|| bare_cm(&mut cm, 4, 16, &raw))
    });
    black_box(&cm);
    g.bench_function("bare_loop_cm_fused_4x65536", |b| {
        b.iter(|| bare_cm_fused(&mut cm, 4, 16, &raw))
    });
    black_box(&cm);
    let mut ca = vec![0u32; 1 << 20];
    g.bench_function("bare_loop_count_array_1M", |b| {
        b.iter(|| bare_cm(&mut ca, 1, 20, &raw))
    });
    black_box(&ca);

    for e in catalog::ALL {
        let name = e.name;
        let spreads = e.answers(Task::Superspreaders);
        let ctx = BuildCtx {
            key_len: if spreads { 8 } else { 4 },
            ..BuildCtx::default()
        };
        let mut a = e.build(&toml::Table::new(), &ctx).unwrap();
        let ks = if spreads { &pairs } else { &keys };
        g.bench_function(BenchmarkId::new("netsift", name), |b| {
            b.iter(|| feed(a.as_mut(), ks, &ones))
        });
        if !spreads {
            let mut a = e.build(&toml::Table::new(), &ctx).unwrap();
            g.bench_function(BenchmarkId::new("netsift_u32", name), |b| {
                b.iter(|| feed_u32(a.as_mut(), &raw, &ones))
            });
        }
    }

    // Counters only (no heavy-hitter candidate set, the catalog's flow-size-only build): the
    // same memory accesses as the bare loops.
    for e in catalog::ALL.iter().filter(|e| !e.flow_size_only.is_empty()) {
        let name = e.name;
        let mut a = e
            .build(&e.flow_size_only_params(), &BuildCtx::default())
            .unwrap();
        g.bench_function(
            BenchmarkId::new("netsift_u32", format!("{name}_counters_only")),
            |b| b.iter(|| feed_u32(a.as_mut(), &raw, &ones)),
        );
    }

    let mut ds_cm = datasketches::countmin::CountMinSketch::<u32>::new(4, 65536).unwrap();
    g.bench_function("datasketches_count_min_4x65536", |b| {
        b.iter(|| {
            for &k in &raw {
                ds_cm.update(k);
            }
        })
    });
    black_box(ds_cm.estimate(raw[0]));
    let mut ds_hll =
        datasketches::hll::HllSketch::new(14, datasketches::hll::HllType::Hll8).unwrap();
    g.bench_function("datasketches_hyperloglog_p14", |b| {
        b.iter(|| {
            for &k in &raw {
                ds_hll.update(k);
            }
        })
    });
    black_box(ds_hll.estimate());
    let mut asap: asap_sketchlib::CountMinSketch =
        asap_sketchlib::CountMinSketch::with_dimensions(4, 65536);
    g.bench_function("asap_sketchlib_count_min_4x65536", |b| {
        b.iter(|| {
            for &k in &raw {
                asap.update(&asap_sketchlib::DataInput::U32(k));
            }
        })
    });
    black_box(&asap);
    // asap's `FastPath`: one xxHash64 of the key per update, each row's column from 16 bits of
    // it (the peer's fastest Count-Min; issue 14's bar for counters-only `count_min`).
    let mut asap_fast = asap_sketchlib::CountMinSketch::<
        asap_sketchlib::Vector2D<i32>,
        asap_sketchlib::FastPath,
    >::with_dimensions(4, 65536);
    g.bench_function("asap_sketchlib_count_min_fastpath_4x65536", |b| {
        b.iter(|| {
            for &k in &raw {
                asap_fast.update(&asap_sketchlib::DataInput::U32(k));
            }
        })
    });
    black_box(&asap_fast);

    // The same peers fed the same input as netsift's algorithms: the flow key's bytes (netsift
    // never sees a bare u32; its keys are FlowKeys of any kind).
    let mut ds_cm = datasketches::countmin::CountMinSketch::<u32>::new(4, 65536).unwrap();
    g.bench_function("datasketches_count_min_4x65536_keybytes", |b| {
        b.iter(|| {
            for k in &keys {
                ds_cm.update(k.as_bytes());
            }
        })
    });
    black_box(ds_cm.estimate(keys[0].as_bytes()));
    let mut ds_hll =
        datasketches::hll::HllSketch::new(14, datasketches::hll::HllType::Hll8).unwrap();
    g.bench_function("datasketches_hyperloglog_p14_keybytes", |b| {
        b.iter(|| {
            for k in &keys {
                ds_hll.update(k.as_bytes());
            }
        })
    });
    black_box(ds_hll.estimate());
    let mut asap: asap_sketchlib::CountMinSketch =
        asap_sketchlib::CountMinSketch::with_dimensions(4, 65536);
    g.bench_function("asap_sketchlib_count_min_4x65536_keybytes", |b| {
        b.iter(|| {
            for k in &keys {
                asap.update(&asap_sketchlib::DataInput::Bytes(k.as_bytes()));
            }
        })
    });
    black_box(&asap);
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
