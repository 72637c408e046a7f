//! `update_batch` throughput of every sketch on the stream of `measure`'s `algorithms` bench
//! (Zipf(1.1), 2^20 keys drawn from 500k 4-byte keys, Agg-Evict 4.1's setting), fed in batches of
//! 32, plus bare loops that do only the counter accesses of Count-Min 4 x 65536 and of a
//! 2^20-counter count array (hash, prefetch the batch, then increment), in two variants, to
//! split the gap between `measure`'s bare loop and the sketches into its causes:
//!
//! - `u32_mulshift`: `measure`'s bare loop (raw u32 keys, one multiply-shift hash per row);
//! - `flowkey_affine`: the same accesses over `FlowKey`s (38 bytes each: `update_batch`'s
//!   input), hashed as Count-Min hashes (one multiply-add-shift per row).
//!
//! Each sketch runs through `update_batch` (FlowKeys) and, as `NAME/u32`, `update_batch_u32`.
//!
//! Short run: `cargo bench -p sketch --bench update -- --warm-up-time 1 --measurement-time 2`.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use key::prefetch;
use key::{FlowKey, HashFn};

const N: usize = 1 << 20;
const KEYS: usize = 500_000;
const CHUNK: usize = 32;

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
    // The same accesses with the input as `FlowKey`s (38 bytes each), hashed as Count-Min does
    // (a 4-byte key's code is its value; one multiply-add-shift per row).
    let maps: [key::Affine; R] = std::array::from_fn(|r| hash.affine(r as u64));
    g.bench_function(format!("{name}/flowkey_affine"), |b| {
        b.iter(|| {
            bare::<R, FlowKey>(&mut counters, keys, |k| {
                let code = u64::from(k.prefix_u32());
                std::array::from_fn(|r| r * w + (maps[r].apply(code) >> (64 - bits)) as usize)
            })
        })
    });
    g.finish();
    black_box(&counters);
}

fn run(c: &mut Criterion, name: &str, params: &str, input: (&[u32], &[FlowKey]), ones: &[u64]) {
    run_as(c, name, "", params, input, ones);
}

/// `name` built with `params`, reported as `name[_label]` and `name[_label]/u32`.
fn run_as(
    c: &mut Criterion,
    name: &str,
    label: &str,
    params: &str,
    (raw, keys): (&[u32], &[FlowKey]),
    ones: &[u64],
) {
    let id = if label.is_empty() {
        name.to_string()
    } else {
        format!("{name}_{label}")
    };
    let params: toml::Table = params.parse().expect("bench params");
    let ctx = algo::BuildCtx::default();
    let entry = [&sketch::count_min::ENTRY, &sketch::count_array::ENTRY]
        .into_iter()
        .find(|e| e.name == name)
        .expect("known name");
    let mut a = entry.build(&params, &ctx).expect("config");
    let mut g = c.benchmark_group("update");
    g.throughput(Throughput::Elements(keys.len() as u64));
    g.bench_function(&id, |b| {
        b.iter(|| {
            for k in keys.chunks(CHUNK) {
                let w = &ones[..k.len()];
                a.update_batch(k, w);
            }
        })
    });
    g.bench_function(format!("{id}/u32"), |b| {
        b.iter(|| {
            for k in raw.chunks(CHUNK) {
                let w = &ones[..k.len()];
                a.update_batch_u32(k, w);
            }
        })
    });
    g.finish();
    black_box(a.memory_bytes());
}

fn benches(c: &mut Criterion) {
    let raw = testkit::zipf_u32(N, KEYS, 1.1, 11);
    let keys: Vec<FlowKey> = raw.iter().map(|&k| FlowKey::from_u32(k)).collect();
    // Packet counts: every batch's weights are the same 32 ones (as `netsift run` passes them).
    let ones = [1u64; CHUNK];
    bare_variants::<4>(c, "bare_cm_4x65536", 16, &raw, &keys);
    bare_variants::<1>(c, "bare_count_array_1M", 20, &raw, &keys);
    run(c, "count_min", "", (&raw, &keys), &ones);
    run(c, "count_array", "", (&raw, &keys), &ones);
    // Counters only (no heavy-hitter candidate set): the same memory accesses as the bare loops.
    run_as(
        c,
        "count_min",
        "counters_only",
        "candidates = 0",
        (&raw, &keys),
        &ones,
    );
    run_as(
        c,
        "count_array",
        "counters_only",
        "candidates = 0",
        (&raw, &keys),
        &ones,
    );
    run(c, "count_sketch", "", (&raw, &keys), &ones);
    run(c, "univmon", "", (&raw, &keys), &ones);
    run(c, "mrac", "", (&raw, &keys), &ones);
}

criterion_group!(update, benches);
criterion_main!(update);
