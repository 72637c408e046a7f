//! Record-loop speed: 1M 64-byte records of an in-memory pcap (and a keys13 trace), read through
//! the iterator and through `for_each`. Reports time per record (criterion "elements").

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use trace::write::{Endian, KeysWriter, PcapWriter, PcapngWriter};
use trace::{Body, Capture, Format, Tuple};

const N: u64 = 1_000_000;

fn pcap() -> Capture {
    let mut w = PcapWriter::new(
        Vec::with_capacity(80 << 20),
        1,
        65535,
        Endian::Little,
        false,
    )
    .unwrap();
    let mut pkt = [0u8; 64];
    for i in 0..N {
        pkt[..8].copy_from_slice(&i.to_le_bytes());
        w.write_packet(i * 1000, 64, &pkt).unwrap();
    }
    Capture::from_bytes("bench.pcap", w.into_inner(), None).unwrap()
}

fn pcapng() -> Capture {
    let mut w = PcapngWriter::new(Vec::with_capacity(100 << 20), Endian::Little).unwrap();
    w.interface(1, 0, None, None).unwrap();
    let pkt = [0u8; 64];
    for i in 0..N {
        w.enhanced_packet(0, i, 64, &pkt).unwrap();
    }
    Capture::from_bytes("bench.pcapng", w.into_inner(), None).unwrap()
}

fn keys13() -> Capture {
    let mut w = KeysWriter::new(Vec::with_capacity(13 << 20), Format::Keys13).unwrap();
    for i in 0..N as u32 {
        let t = Tuple::v4(i.to_be_bytes(), [10, 0, 0, 1], i as u16, 80, 6);
        w.write(&t, 0).unwrap();
    }
    Capture::from_bytes("bench.keys13", w.into_inner(), None).unwrap()
}

/// A consumer that touches what a real pipeline touches: length, timestamp, first data byte.
#[inline(always)]
fn sink(acc: &mut u64, r: trace::Record<'_>) {
    *acc = acc.wrapping_add(r.ts_ns ^ r.wire_len as u64);
    match r.body {
        Body::Frame { data, .. } => {
            *acc = acc.wrapping_add(data.first().copied().unwrap_or(0) as u64)
        }
        Body::Tuple(t) => *acc = acc.wrapping_add(t.src[0] as u64 + t.sport as u64),
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("read");
    g.throughput(Throughput::Elements(N));
    g.sample_size(10);
    for (name, cap) in [("pcap", pcap()), ("pcapng", pcapng()), ("keys13", keys13())] {
        g.bench_function(format!("{name}/iter"), |b| {
            b.iter(|| {
                let mut acc = 0u64;
                for r in cap.records() {
                    match r {
                        Ok(r) => sink(&mut acc, r),
                        Err(e) => panic!("{e}"),
                    }
                }
                black_box(acc)
            })
        });
        g.bench_function(format!("{name}/for_each"), |b| {
            b.iter(|| {
                let mut acc = 0u64;
                let n = cap.for_each(|r| sink(&mut acc, r)).unwrap();
                black_box((acc, n))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
