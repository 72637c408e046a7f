//! Scratch (not committed): per-update CPU time of deltoid / univmon / two_level behind the
//! aggregator on a bursty five-tuple / pair stream.
use aggevict::{AggConfig, Aggregator, KeyBatch};
use algo::{BuildCtx, Side};
use key::{FlowKey, KeyKind};

fn cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    if r == 0 {
        t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
    } else {
        0
    }
}
fn dst(x: u32) -> [u8; 4] {
    (key::mix64(u64::from(x) ^ 0xd5) as u32).to_be_bytes()
}
fn evictions(keys: &[FlowKey], len: usize) -> Vec<(Vec<FlowKey>, Vec<u64>)> {
    let mut agg = Aggregator::new(&AggConfig::default(), len).expect("aggregator");
    let ones = vec![1u64; 1024];
    let mut out = Vec::new();
    let mut keep = |k: KeyBatch<'_>, w: &[u64]| {
        if let KeyBatch::Keys(k) = k {
            out.push((k.to_vec(), w.to_vec()));
        }
    };
    for k in keys.chunks(1024) {
        agg.update_batch(k, &ones[..k.len()], &mut keep);
    }
    agg.flush(&mut keep);
    out
}
fn main() {
    let only = std::env::args().nth(1);
    let n = 8_000_000u64;
    let src = testkit::bursty_src_u32(n);
    let five: Vec<FlowKey> = src
        .iter()
        .map(|&x| FlowKey::v4(KeyKind::FiveTuple, x.to_be_bytes(), dst(x), 1234, 443, 6))
        .collect();
    let pair: Vec<FlowKey> = src
        .iter()
        .map(|&x| FlowKey::from_u32_pair(x, u32::from_be_bytes(dst(x))))
        .collect();
    let ev5 = evictions(&five, 13);
    let ev2 = evictions(&pair, 8);
    let c5: usize = ev5.iter().map(|e| e.0.len()).sum();
    let c2: usize = ev2.iter().map(|e| e.0.len()).sum();
    println!(
        "evictions: five {c5} ({:.3}/pkt) pair {c2}",
        c5 as f64 / n as f64
    );
    let cases: [(&str, usize, Side); 4] = [
        ("deltoid", 13, Side::Src),
        ("univmon", 13, Side::Src),
        ("two_level", 8, Side::Src),
        ("two_level", 8, Side::Dst),
    ];
    let mut best = [f64::INFINITY; 4];
    let mut digest = [0u64; 4];
    for _ in 0..5 {
        for (i, &(name, len, side)) in cases.iter().enumerate() {
            if only.as_deref().is_some_and(|o| o != name) {
                continue;
            }
            let e = catalog::get(name).unwrap();
            let ctx = BuildCtx {
                key_len: len,
                side,
                ..BuildCtx::default()
            };
            let mut a = e.build(&(e.defaults)(), &ctx).unwrap();
            let ev = if len == 13 { &ev5 } else { &ev2 };
            let cnt = if len == 13 { c5 } else { c2 };
            let t0 = cpu_ns();
            for (k, w) in ev {
                a.update_batch(k, w);
            }
            let ns = cpu_ns().saturating_sub(t0) as f64 / cnt as f64;
            best[i] = best[i].min(ns);
            let bytes = (e.save)(a.as_ref()).unwrap().unwrap();
            let d = bytes.chunks(8).fold(0u64, |acc, c| {
                key::mix64(acc ^ c.iter().fold(0u64, |x, &b| x << 8 | u64::from(b)))
            });
            digest[i] = d;
        }
    }
    for (i, c) in cases.iter().enumerate() {
        println!(
            "{} {:?}: {:.2} ns/update  state {:016x}",
            c.0, c.2, best[i], digest[i]
        );
    }
}
