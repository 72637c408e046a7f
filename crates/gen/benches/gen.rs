//! Trace-writing throughput: 1 M packets to `io::sink()`, flow table built once outside the loop.
//!
//! `cargo bench -p gen --bench gen -- --warm-up-time 1 --measurement-time 2`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use gen::{Generator, Order, OutFormat, Size, Spec};

const PACKETS: u64 = 1_000_000;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("gen_1M");
    g.sample_size(10);
    g.throughput(Throughput::Elements(PACKETS));
    let cases = [
        (
            "pcap_64B_shuffled",
            Size::Fixed(64),
            Order::Shuffled,
            OutFormat::Pcap,
        ),
        (
            "pcap_64B_bursty",
            Size::Fixed(64),
            Order::Bursty,
            OutFormat::Pcap,
        ),
        (
            "pcap_mix_snap128_bursty",
            Size::Mix,
            Order::Bursty,
            OutFormat::Pcap,
        ),
        ("keys13_bursty", Size::Mix, Order::Bursty, OutFormat::Keys13),
    ];
    for (name, size, order, format) in cases {
        let spec = Spec {
            packets: PACKETS,
            size,
            order,
            ..Spec::default()
        };
        let gen = Generator::new(&spec).expect("valid spec");
        g.bench_function(name, |b| {
            b.iter(|| {
                gen.write_to(format, std::io::sink())
                    .expect("sink never fails")
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
