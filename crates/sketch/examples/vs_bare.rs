//! One process per measurement, for timing two configurations against each other from outside
//! (whole-process CPU time, e.g. alternating runs under `/usr/bin/time`, so that drift of a
//! shared machine hits both alike): Count-Min 4 x 65536 or the
//! count array 2^20 — counters only (`candidates = 0`), or with the default candidate set — or
//! the bare loop of the same memory accesses (one multiply-shift per row, or `bare_affine`: the
//! sketches' own multiply-add-shift, batches of 32 hashed and prefetched, then incremented), over
//! `ITERS` passes of the benches' Zipf(1.1) stream (2^20 keys over 500 k 4-byte keys), fed in
//! `update_batch_u32` calls of `PER_CALL` keys (default 32).
//!
//! `cargo run --release -p sketch --example vs_bare -- {cm|ca}
//! {bare|bare_affine|counters|default|candN} [ITERS] [PER_CALL] [EPOCH_PASSES]` (`candN`: a
//! candidate set of N; `EPOCH_PASSES`: reset every that many passes, 0 = never). Set-up (the stream) is the same for every variant (`ITERS = 0` times it); a checksum is
//! printed so no variant is optimised away.

const N: usize = 1 << 20;
const BATCH: usize = 32;

/// The bare loop: `rows` x 2^`bits` u32 counters, multiply-shift per row, batches of 32 hashed and
/// prefetched first, then incremented.
fn bare(counters: &mut [u32], rows: usize, bits: u32, keys: &[u32], affine: bool) {
    let hf = key::HashFn::new(7);
    let maps: [key::Affine; 4] = std::array::from_fn(|r| hf.affine(r as u64));
    const SEEDS: [u64; 4] = [
        0x9E37_79B9_7F4A_7C15,
        0xC2B2_AE3D_27D4_EB4F,
        0x1656_67B1_9E37_79F9,
        0x85EB_CA77_C2B2_AE63,
    ];
    let mut idx = [0usize; BATCH * 4];
    for chunk in keys.chunks(BATCH) {
        for (i, &k) in chunk.iter().enumerate() {
            for (r, seed) in SEEDS.iter().enumerate().take(rows) {
                let h = if affine {
                    maps[r].apply(u64::from(k))
                } else {
                    (u64::from(k) | 1).wrapping_mul(*seed)
                };
                let j = (r << bits) + (h >> (64 - bits)) as usize;
                idx[i * rows + r] = j;
                key::prefetch(counters.as_ptr().wrapping_add(j));
            }
        }
        for &j in &idx[..chunk.len() * rows] {
            counters[j] = counters[j].wrapping_add(1);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (what, how) = (
        args.get(1).map_or("cm", |s| s),
        args.get(2).map_or("bare", |s| s),
    );
    let iters: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(200);
    // Keys per `update_batch_u32` call (the sketch splits them into chunks of 32 itself).
    let per_call: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(BATCH);
    // Reset every this many passes (an epoch: 2 passes are 2^21 updates, the papers' 2 M
    // packets); 0 never resets.
    let epoch_passes: usize = args.get(5).and_then(|s| s.parse().ok()).unwrap_or(0);
    let (rows, bits, name) = match what {
        "ca" => (1, 20, "count_array"),
        _ => (4, 16, "count_min"),
    };
    let keys = testkit::zipf_u32(N, 500_000, 1.1, 11);
    let ones = vec![1u64; per_call.max(1)];
    let sum: u64 = if how.starts_with("bare") {
        let mut c = vec![0u32; rows << bits];
        for i in 0..iters {
            bare(&mut c, rows, bits, &keys, how == "bare_affine");
            if epoch_passes > 0 && (i + 1) % epoch_passes == 0 {
                c.iter_mut().for_each(|x| *x = 0);
            }
        }
        c.iter().map(|&x| u64::from(x)).sum()
    } else {
        // `counters` = `candidates = 0`; `candN` = `candidates = N`; else the defaults.
        let params: toml::Table = if how == "counters" {
            "candidates = 0".parse().expect("params")
        } else if let Some(n) = how.strip_prefix("cand") {
            format!("candidates = {n}").parse().expect("candN")
        } else {
            toml::Table::new()
        };
        let entry = [&sketch::count_min::ENTRY, &sketch::count_array::ENTRY]
            .into_iter()
            .find(|e| e.name == name)
            .expect("name");
        let mut a = entry
            .build(&params, &algo::BuildCtx::default())
            .expect("config");
        for i in 0..iters {
            for k in keys.chunks(per_call.max(1)) {
                a.update_batch_u32(k, &ones[..k.len()]);
            }
            if epoch_passes > 0 && (i + 1) % epoch_passes == 0 {
                a.reset();
            }
        }
        a.flow_size(&key::FlowKey::from_u32(keys[0])).unwrap_or(0)
    };
    println!("{what} {how} {iters} {sum}");
}
