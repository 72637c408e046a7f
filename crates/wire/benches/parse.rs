//! ns per parse (+ five-tuple key) for the frames that dominate real traffic.
//!
//! Run: `cargo bench -p wire --bench parse -- --warm-up-time 1 --measurement-time 2`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use key::KeyKind;
use wire::{linktype, parse, parse_key};

/// A 64-byte Ethernet/IPv4/TCP frame (SYN with 10 bytes of options, as a real SYN carries).
fn eth_ipv4_tcp() -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[..12].copy_from_slice(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&50u16.to_be_bytes());
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[192, 168, 1, 2]);
    f[34..36].copy_from_slice(&51000u16.to_be_bytes());
    f[36..38].copy_from_slice(&443u16.to_be_bytes());
    f[46] = 0x50;
    f[47] = 0x02;
    f
}

/// Ethernet / 802.1Q / IPv6 / UDP (DNS-sized), 86 bytes.
fn eth_vlan_ipv6_udp() -> Vec<u8> {
    let mut f = vec![0u8; 18 + 40 + 8 + 20];
    f[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
    f[14..16].copy_from_slice(&100u16.to_be_bytes());
    f[16..18].copy_from_slice(&0x86ddu16.to_be_bytes());
    let ip = &mut f[18..];
    ip[0] = 0x60;
    ip[4..6].copy_from_slice(&28u16.to_be_bytes());
    ip[6] = 17;
    ip[7] = 64;
    ip[8] = 0x20;
    ip[9] = 0x01;
    ip[39] = 1;
    ip[24] = 0xfe;
    ip[25] = 0x80;
    ip[55] = 2;
    ip[40..42].copy_from_slice(&5353u16.to_be_bytes());
    ip[42..44].copy_from_slice(&53u16.to_be_bytes());
    f
}

fn benches(c: &mut Criterion) {
    let v4 = eth_ipv4_tcp();
    let v6 = eth_vlan_ipv6_udp();
    // CAIDA style: raw IPv4/TCP cut to 40 bytes of capture.
    let caida = v4[14..54].to_vec();
    assert!(parse(linktype::ETHERNET, &v4).tuple.sport == 51000);
    assert!(parse(linktype::ETHERNET, &v6).tuple.dport == 53);
    assert!(parse(linktype::RAW, &caida).tuple.dport == 443);

    let mut g = c.benchmark_group("parse");
    g.throughput(Throughput::Elements(1));
    for (name, link, frame) in [
        ("eth_ipv4_tcp", linktype::ETHERNET, &v4),
        ("eth_vlan_ipv6_udp", linktype::ETHERNET, &v6),
        ("raw_ipv4_tcp_caida40", linktype::RAW, &caida),
    ] {
        g.bench_function(format!("{name}/view"), |b| {
            b.iter(|| parse(black_box(link), black_box(frame.as_slice())))
        });
        g.bench_function(format!("{name}/five_tuple_key"), |b| {
            b.iter(|| {
                parse_key(
                    black_box(link),
                    black_box(frame.as_slice()),
                    KeyKind::FiveTuple,
                )
            })
        });
    }
    g.finish();
}

criterion_group!(parse_benches, benches);
criterion_main!(parse_benches);
