//! What the CLI's test binaries share: the binary and a temporary directory, and an
//! independent implementation of "read a capture and key its packets", built only from
//! pcap-parser (reading) and etherparse (slicing), used to check netsift's own readers and parser.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `netsift` binary of this build.
pub fn netsift() -> Command {
    Command::new(env!("CARGO_BIN_EXE_netsift"))
}

/// `name` in a temporary directory of this test binary and process (created).
pub fn tmp(name: &str) -> PathBuf {
    let exe = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_default();
    testkit::scratch(&exe).join(name)
}

/// A command that must succeed: its standard error when it did not.
pub fn assert_ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The standard output of a command that must succeed.
pub fn ok(out: &std::process::Output) -> String {
    assert_ok(out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An empty directory `name` of this test binary and process (emptied if it was there).
pub fn fresh_dir(name: &str) -> PathBuf {
    let d = tmp(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A report's epochs without their costs (wall time, different in every run): what two runs
/// of the same trace, configuration and seed must give alike.
pub fn answers(report: &serde_json::Value) -> serde_json::Value {
    report["epochs"]
        .as_array()
        .expect("a report's epochs")
        .iter()
        .map(without_costs)
        .collect()
}

/// One epoch's document without its costs.
pub fn without_costs(epoch: &serde_json::Value) -> serde_json::Value {
    let mut e = epoch.clone();
    if let Some(o) = e.as_object_mut() {
        o.remove("costs");
    }
    e
}

use etherparse::{LaxNetSlice, LaxSlicedPacket, TransportSlice};
use key::Tuple;
use pcap_parser::{Block, PcapBlockOwned, PcapError};

/// The real captures (not the tcpdump regression set), or `None` (the test skips) without
/// `../shared/traces` (`testkit::traces_dir`).
pub fn real_traces() -> Option<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(testkit::traces_dir()?)
        .expect("readable traces directory")
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.to_string_lossy().contains(".pcap"))
        .collect();
    v.sort();
    Some(v)
}

/// One frame as pcap-parser reads it: (link type, original length, captured bytes).
pub struct PeerFrame {
    pub link: u32,
    pub ts_ns: u64,
    pub orig_len: u32,
    pub data: Vec<u8>,
}

/// Read every frame of a pcap or pcapng file with pcap-parser.
pub fn peer_frames(path: &Path) -> Vec<PeerFrame> {
    let file = std::fs::File::open(path).unwrap();
    let mut reader = pcap_parser::create_reader(1 << 20, file).unwrap();
    let mut out = vec![];
    let mut legacy_link = 0u32;
    let mut legacy_nsec = false;
    let mut if_links: Vec<u32> = vec![];
    let mut if_tsres: Vec<(u64, u64)> = vec![];
    loop {
        match reader.next() {
            Ok((offset, block)) => {
                match block {
                    PcapBlockOwned::LegacyHeader(h) => {
                        legacy_link = h.network.0 as u32;
                        legacy_nsec = h.is_nanosecond_precision();
                    }
                    PcapBlockOwned::Legacy(b) => {
                        let frac = if legacy_nsec { 1 } else { 1000 };
                        out.push(PeerFrame {
                            link: legacy_link,
                            ts_ns: b.ts_sec as u64 * 1_000_000_000 + b.ts_usec as u64 * frac,
                            orig_len: b.origlen,
                            data: b.data.to_vec(),
                        })
                    }
                    PcapBlockOwned::NG(Block::SectionHeader(_)) => {
                        if_links.clear();
                        if_tsres.clear();
                    }
                    PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                        if_links.push(idb.linktype.0 as u32);
                        if_tsres.push((
                            idb.ts_offset() as u64,
                            idb.ts_resolution().unwrap_or(1_000_000),
                        ));
                    }
                    PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                        let i = epb.if_id as usize;
                        let (off, res) = if_tsres[i];
                        let ts = ((epb.ts_high as u64) << 32) | epb.ts_low as u64;
                        let ns =
                            (ts as u128 * 1_000_000_000 / res as u128) as u64 + off * 1_000_000_000;
                        out.push(PeerFrame {
                            link: if_links[i],
                            ts_ns: ns,
                            orig_len: epb.origlen,
                            data: epb.data[..epb.caplen as usize].to_vec(),
                        })
                    }
                    PcapBlockOwned::NG(Block::SimplePacket(spb)) => out.push(PeerFrame {
                        link: if_links[0],
                        ts_ns: 0,
                        orig_len: spb.origlen,
                        data: spb.data.to_vec(),
                    }),
                    PcapBlockOwned::NG(_) => {}
                }
                reader.consume(offset);
            }
            Err(PcapError::Eof) => break,
            Err(PcapError::Incomplete(_)) => reader.refill().unwrap(),
            Err(e) => panic!("pcap-parser failed on {}: {e:?}", path.display()),
        }
    }
    out
}

/// etherparse has no MPLS: skip the label stack here (4-byte entries up to the bottom-of-stack
/// bit), then IPv4 or IPv6 by the first nibble, or an Ethernet pseudowire: after a 4-byte control
/// word when the nibble is 0 (RFC 4385), else from the first byte.
fn peer_mpls(d: &[u8]) -> Option<LaxSlicedPacket<'_>> {
    let mut at = 0;
    loop {
        let entry = d.get(at..at + 4)?;
        at += 4;
        if entry[2] & 1 == 1 {
            break;
        }
    }
    let rest = &d[at..];
    match rest.first()? >> 4 {
        4 | 6 => LaxSlicedPacket::from_ip(rest).ok(),
        0 => LaxSlicedPacket::from_ethernet(rest.get(4..)?).ok(),
        _ => LaxSlicedPacket::from_ethernet(rest).ok(),
    }
}

/// The 5-tuple etherparse finds in a frame, with netsift's documented rules for what etherparse
/// leaves open: ports of TCP/UDP/SCTP/DCCP/UDP-Lite come from the first 4 bytes of L4 when they
/// were captured (real CAIDA packets are cut inside the TCP header), and non-first fragments carry
/// no ports. `None` when etherparse finds no IP header.
pub fn peer_tuple(link: u32, data: &[u8]) -> Option<Tuple> {
    let p = match link {
        1 if data.get(12..14) == Some(&[0x88, 0x47]) => peer_mpls(&data[14..])?,
        1 => LaxSlicedPacket::from_ethernet(data).ok()?,
        101 | 12 | 14 => LaxSlicedPacket::from_ip(data).ok()?,
        _ => return None,
    };
    let mut t = Tuple::default();
    let (payload, first_fragment) = match p.net.as_ref()? {
        LaxNetSlice::Ipv4(ip) => {
            let h = ip.header();
            t.src[..4].copy_from_slice(&h.source());
            t.dst[..4].copy_from_slice(&h.destination());
            (ip.payload(), h.fragments_offset().value() == 0)
        }
        LaxNetSlice::Ipv6(ip) => {
            let h = ip.header();
            t.v6 = true;
            t.src.copy_from_slice(&h.source());
            t.dst.copy_from_slice(&h.destination());
            // etherparse does not expose the fragment offset of an IPv6 fragment header here;
            // a fragmented IPv6 packet gets no ports unless etherparse decoded its transport.
            (ip.payload(), !ip.payload().fragmented)
        }
    };
    t.proto = payload.ip_number.0;
    match &p.transport {
        Some(TransportSlice::Tcp(tcp)) => {
            t.sport = tcp.source_port();
            t.dport = tcp.destination_port();
        }
        Some(TransportSlice::Udp(udp)) => {
            t.sport = udp.source_port();
            t.dport = udp.destination_port();
        }
        _ => {
            let b = payload.payload;
            if first_fragment && matches!(t.proto, 6 | 17 | 132 | 33 | 136) && b.len() >= 4 {
                t.sport = u16::from_be_bytes([b[0], b[1]]);
                t.dport = u16::from_be_bytes([b[2], b[3]]);
            }
        }
    }
    Some(t)
}

/// `netsift bench NAME ARGS --json --out DIR` into a fresh temporary DIR: it must succeed; the
/// DIR and the JSON it printed.
pub fn bench_json(name: &str, args: &[&str]) -> (PathBuf, serde_json::Value) {
    let dir = testkit::scratch("bench").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_netsift"))
        .args(["bench", name])
        .args(args)
        .args(["--json", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "bench {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (dir, serde_json::from_slice(&out.stdout).unwrap())
}
