//! The per-algorithm constants of `algo::Entry::cost` (`algo::UpdateCost`): every catalog
//! algorithm with its default parameters, alone, fed 1 M packets of a shuffled Zipf(1.1)
//! stream over 500 k flows in batches of 32 (random keys: no cache luck from trains), as u32
//! keys (`update_batch_u32`, 4-byte keys) and as five-tuple `FlowKey`s (`update_batch`; pair
//! keys for the algorithms that hold only those). Thread CPU time (`CLOCK_THREAD_CPUTIME_ID`,
//! so a loaded machine does not inflate it), best of 3 passes after a warm-up, each pass from
//! a reset state. Prints `name u32_ns wide_ns` ("-" where the algorithm cannot hold the keys;
//! an algorithm that holds only wider keys gets its wide figure for both).
//!
//! `cargo run --release -p catalog --example update_costs`

use algo::{Algorithm, BuildCtx};
use key::{FlowKey, KeyKind};

const BATCH: usize = 32;
const PACKETS: usize = 1_000_000;

fn cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec; the call writes only it.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    if r == 0 {
        t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
    } else {
        0
    }
}

/// Best of 3 timed passes after one warm-up, ns per packet; `a` reset before each pass.
fn time(a: &mut dyn Algorithm, pass: &mut dyn FnMut(&mut dyn Algorithm)) -> f64 {
    a.reset();
    pass(a);
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        a.reset();
        let t0 = cpu_ns();
        pass(a);
        best = best.min(cpu_ns().saturating_sub(t0) as f64 / PACKETS as f64);
    }
    best
}

fn build(name: &str, key_len: usize) -> Option<Box<dyn Algorithm>> {
    let e = catalog::get(name)?;
    let ctx = BuildCtx {
        key_len,
        ..BuildCtx::default()
    };
    e.build(&(e.defaults)(), &ctx).ok()
}

fn main() {
    let ranks = testkit::zipf_ranks(PACKETS, 500_000, 1.1, 0x5eed);
    let u32s: Vec<u32> = ranks
        .iter()
        .map(|&r| key::mix64(u64::from(r)) as u32)
        .collect();
    let dst = |x: u32| (key::mix64(u64::from(x) ^ 0xd5) as u32).to_be_bytes();
    let five: Vec<FlowKey> = u32s
        .iter()
        .map(|&x| FlowKey::v4(KeyKind::FiveTuple, x.to_be_bytes(), dst(x), 1234, 443, 6))
        .collect();
    let pair: Vec<FlowKey> = u32s
        .iter()
        .map(|&x| FlowKey::from_u32_pair(x, u32::from_be_bytes(dst(x))))
        .collect();
    let ones = vec![1u64; BATCH];
    let flow_keys = |keys: &[FlowKey]| {
        let ones = ones.clone();
        let keys = keys.to_vec();
        move |a: &mut dyn Algorithm| {
            for k in keys.chunks(BATCH) {
                a.update_batch(k, &ones[..k.len()]);
            }
        }
    };
    let mut by_u32 = |a: &mut dyn Algorithm| {
        for k in u32s.chunks(BATCH) {
            a.update_batch_u32(k, &ones[..k.len()]);
        }
    };
    let (mut by_five, mut by_pair) = (flow_keys(&five), flow_keys(&pair));
    for name in catalog::names() {
        let u = build(name, 4).map(|mut a| time(a.as_mut(), &mut by_u32));
        let wide = if let Some(mut a) = build(name, 13) {
            Some(time(a.as_mut(), &mut by_five))
        } else {
            build(name, 8).map(|mut a| time(a.as_mut(), &mut by_pair))
        };
        let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
        println!("{name} {} {}", show(u.or(wide)), show(wide));
    }
}
