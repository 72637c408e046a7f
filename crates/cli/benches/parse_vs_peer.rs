//! netsift's read + classify + key loop against what a user would write instead: pcap-parser
//! (zero-copy slice reader) + etherparse (`SlicedPacket`), on the same in-memory pcap of 64-byte
//! Ethernet/IPv4/TCP-UDP packets. Both extract the five-tuple key of every packet and pass it
//! through `black_box`. The ratio of the two, from one run, is the figure we report.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use key::{KeyKind, Tuple};
use pcap_parser::{LegacyPcapSlice, PcapBlockOwned};
use trace::{Body, Capture, Format};

const PACKETS: u64 = 1_000_000;

fn trace_bytes() -> Vec<u8> {
    let spec = gen::Spec {
        packets: PACKETS,
        flows: 100_000,
        size: gen::Size::Fixed(64),
        snaplen: 64,
        ..gen::Spec::default()
    };
    let mut buf = Vec::new();
    gen::write(&spec, gen::OutFormat::Pcap, &mut buf).unwrap();
    buf
}

fn ours(cap: &Capture) -> u64 {
    let mut n = 0;
    cap.for_each(|rec| {
        if let Body::Frame { link, data } = rec.body {
            let (_, k) = wire::parse_key(link, data, KeyKind::FiveTuple);
            black_box(&k);
            n += 1;
        }
    })
    .unwrap();
    n
}

fn peer(buf: &[u8]) -> u64 {
    let mut n = 0;
    for block in LegacyPcapSlice::from_slice(buf).unwrap() {
        if let Ok(PcapBlockOwned::Legacy(b)) = block {
            let mut t = Tuple::default();
            if let Ok(p) = SlicedPacket::from_ethernet(b.data) {
                if let Some(NetSlice::Ipv4(ip)) = &p.net {
                    t.src[..4].copy_from_slice(&ip.header().source());
                    t.dst[..4].copy_from_slice(&ip.header().destination());
                    t.proto = ip.header().protocol().0;
                }
                match &p.transport {
                    Some(TransportSlice::Tcp(tcp)) => {
                        t.sport = tcp.source_port();
                        t.dport = tcp.destination_port();
                    }
                    Some(TransportSlice::Udp(udp)) => {
                        t.sport = udp.source_port();
                        t.dport = udp.destination_port();
                    }
                    _ => {}
                }
            }
            black_box(&t.key(KeyKind::FiveTuple));
            n += 1;
        }
    }
    n
}

fn bench(c: &mut Criterion) {
    let buf = trace_bytes();
    let cap = Capture::from_bytes("bench", buf.clone(), Some(Format::Pcap)).unwrap();
    assert_eq!(ours(&cap), PACKETS);
    assert_eq!(peer(&buf), PACKETS);
    let mut g = c.benchmark_group("parse_five_tuple_64B");
    g.throughput(Throughput::Elements(PACKETS));
    g.sample_size(10);
    g.bench_function("netsift", |b| b.iter(|| ours(&cap)));
    g.bench_function("pcap_parser+etherparse", |b| b.iter(|| peer(&buf)));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
