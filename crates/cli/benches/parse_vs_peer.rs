//! netsift's read + classify + key loop against what a user would write instead with
//! pcap-parser and etherparse (`SlicedPacket`), on the same pcap of 64-byte Ethernet/IPv4/TCP-UDP
//! packets. All extract the five-tuple key of every packet and pass it through `black_box`. The
//! ratios from one run are the figures we report. Two peers:
//! - `pcap_parser_reader`: pcap-parser's documented file API (`create_reader` over the file, with
//!   `consume`/`refill`), what its README shows — compared with netsift opening the same file;
//! - `pcap_parser_slice`: pcap-parser's zero-copy `LegacyPcapSlice` over bytes already in memory,
//!   the fastest way to use it — compared with netsift over the same bytes.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use key::{KeyKind, Tuple};
use pcap_parser::{LegacyPcapSlice, PcapBlockOwned, PcapError};
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

/// The five-tuple key of one Ethernet frame, the etherparse way.
#[inline]
fn peer_key(frame: &[u8]) -> key::FlowKey {
    let mut t = Tuple::default();
    if let Ok(p) = SlicedPacket::from_ethernet(frame) {
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
    t.key(KeyKind::FiveTuple)
}

fn peer_slice(buf: &[u8]) -> u64 {
    let mut n = 0;
    for block in LegacyPcapSlice::from_slice(buf).unwrap() {
        if let Ok(PcapBlockOwned::Legacy(b)) = block {
            black_box(&peer_key(b.data));
            n += 1;
        }
    }
    n
}

fn peer_reader(path: &std::path::Path) -> u64 {
    let file = std::fs::File::open(path).unwrap();
    let mut reader = pcap_parser::create_reader(1 << 20, file).unwrap();
    let mut n = 0;
    loop {
        match reader.next() {
            Ok((offset, block)) => {
                if let PcapBlockOwned::Legacy(b) = block {
                    black_box(&peer_key(b.data));
                    n += 1;
                }
                reader.consume(offset);
            }
            Err(PcapError::Eof) => break,
            Err(PcapError::Incomplete(_)) => reader.refill().unwrap(),
            Err(e) => panic!("{e:?}"),
        }
    }
    n
}

fn bench(c: &mut Criterion) {
    let buf = trace_bytes();
    let path = std::env::temp_dir().join(format!("netsift-bench-{}.pcap", std::process::id()));
    std::fs::write(&path, &buf).unwrap();
    let mem = Capture::from_bytes("bench", buf.clone(), Some(Format::Pcap)).unwrap();
    assert_eq!(ours(&mem), PACKETS);
    assert_eq!(peer_slice(&buf), PACKETS);
    assert_eq!(peer_reader(&path), PACKETS);
    let mut g = c.benchmark_group("parse_five_tuple_64B");
    g.throughput(Throughput::Elements(PACKETS));
    g.sample_size(10);
    g.bench_function("netsift_file", |b| {
        b.iter(|| ours(&Capture::open(path.to_str().unwrap(), None).unwrap()))
    });
    g.bench_function("pcap_parser_reader+etherparse_file", |b| {
        b.iter(|| peer_reader(&path))
    });
    g.bench_function("netsift_memory", |b| b.iter(|| ours(&mem)));
    g.bench_function("pcap_parser_slice+etherparse_memory", |b| {
        b.iter(|| peer_slice(&buf))
    });
    g.finish();
    let _ = std::fs::remove_file(&path);
}

criterion_group!(benches, bench);
criterion_main!(benches);
