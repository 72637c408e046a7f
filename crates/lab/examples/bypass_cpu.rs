//! Thread CPU time (`CLOCK_THREAD_CPUTIME_ID`: time-slicing on a loaded machine does not
//! inflate it, as it does `adapt_pairs`' TSC sums) of one algorithm over Zipf(SKEW), shuffled
//! or bursty, without Agg-Evict (`none`), behind an `auto` or `always` front, split into the batches and
//! the epoch ends (flush and reset), the modes alternated round by round; the same epochs of 2 M
//! and batches of 32, warm-up epoch and preset as `lab::run::measure`. Prints medians (ns per
//! packet) and none/mode (speed with over without).
//!
//! `cargo run --release -p lab --example bypass_cpu -- ALGO[:params] SKEW PACKETS ROUNDS
//! [MODES] [ORDER]` (defaults: `count_min:candidates=0 0.6 5000000 5 none,auto shuffled`).
//! Keys as `adapt_pairs`: source addresses as u32, pairs (`FlowKey`s) for two_level.

use algo::{BuildCtx, KeyBatch};
use front::{Accel, AggMode, Front};
use key::KeyKind;
use lab::workload::Workload;

fn cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(r, 0);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let item = args.first().map_or("count_min:candidates=0", |s| s);
    let skew: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(0.6);
    let packets: u64 = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5_000_000);
    let rounds: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(5);
    let modes = args.get(4).map_or("none,auto", |s| s);
    let order: gen::Order = args
        .get(5)
        .map_or("shuffled", |s| s)
        .parse()
        .expect("order: shuffled or bursty");
    let (name, params) = item.split_once(':').unwrap_or((item, ""));
    let params = params.replace(';', "\n");
    let kind = if name == "two_level" {
        KeyKind::Pair
    } else {
        KeyKind::Src
    };
    let w = Workload::zipf_500k(packets, skew, order).expect("trace");
    let epoch = 2_000_000usize;
    let batch = 32usize;
    let ones = vec![1u64; batch];
    let modes: Vec<&str> = modes.split(',').collect();
    let mut res: Vec<[Vec<f64>; 2]> = modes.iter().map(|_| [vec![], vec![]]).collect();
    let key_len = w.key_len(kind);
    let narrow = w.has_u32_keys(kind);
    let mut u32s = Vec::new();
    let mut keys = Vec::new();
    for round in 0..rounds {
        let mut idx: Vec<usize> = (0..modes.len()).collect();
        if round % 2 == 1 {
            idx.reverse();
        }
        for i in idx {
            let ctx = BuildCtx {
                seed: 7,
                key_len,
                ..BuildCtx::default()
            };
            let p: toml::Table = params.parse().unwrap();
            let p = catalog::presets::apply(lab::PRESET, name, &p).unwrap();
            let mut algo = catalog::build(name, &p, &ctx).unwrap();
            let mut front = match modes[i] {
                "none" => Front::none(),
                m => {
                    let c = catalog::presets::cost(lab::PRESET, name).unwrap();
                    let mode = if m == "auto" {
                        AggMode::Auto
                    } else {
                        AggMode::Always
                    };
                    Front::new(Accel::AggEvict, &aggevict::AggConfig::default(), key_len)
                        .unwrap()
                        .with_costs(mode, c.ns(key_len), c.ns(key_len) * c.behind, front::WINDOW)
                }
            };
            let (mut t_batches, mut t_ends) = (0u64, 0u64);
            let mut start = 0usize;
            let mut warm = true;
            loop {
                let t0 = if narrow {
                    w.keys_u32_into(start, start + epoch, kind, &mut u32s);
                    let t0 = cpu_ns();
                    for b in u32s.chunks(batch) {
                        front.update(KeyBatch::U32(b), &ones[..b.len()], algo.as_mut());
                    }
                    t0
                } else {
                    w.keys_into(start, start + epoch, kind, &mut keys);
                    let t0 = cpu_ns();
                    for b in keys.chunks(batch) {
                        front.update(KeyBatch::Keys(b), &ones[..b.len()], algo.as_mut());
                    }
                    t0
                };
                let t1 = cpu_ns();
                front.flush(algo.as_mut());
                std::hint::black_box(algo.memory_bytes());
                algo.reset();
                let t2 = cpu_ns();
                if warm {
                    front.clear_stats();
                    warm = false;
                    continue;
                }
                t_batches += t1 - t0;
                t_ends += t2 - t1;
                start += epoch;
                if start >= w.len() {
                    break;
                }
            }
            res[i][0].push(t_batches as f64 / packets as f64);
            res[i][1].push(t_ends as f64 / packets as f64);
        }
    }
    let base = median(
        &mut res[0][0]
            .iter()
            .zip(&res[0][1])
            .map(|(a, b)| a + b)
            .collect::<Vec<_>>(),
    );
    for (m, r) in modes.iter().zip(res.iter_mut()) {
        let mut tot: Vec<f64> = r[0].iter().zip(&r[1]).map(|(a, b)| a + b).collect();
        let t = median(&mut tot);
        println!(
            "{item} {m:6} batches {:6.3} ends {:6.3} total {:6.3} ns/pkt  none/this {:5.3}",
            median(&mut r[0]),
            median(&mut r[1]),
            t,
            base / t
        );
    }
}
