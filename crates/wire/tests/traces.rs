//! Cross-check against an independent implementation on real captures.
//!
//! Every frame of `../shared/traces/*.pcap*` (found by `testkit::traces_dir`; the tests skip
//! without it) is read with `pcap-parser` and decoded by both `wire::parse` and `etherparse` (its
//! lax parser, which like ours accepts frames cut by a snaplen). Wherever etherparse finds an IP
//! header we must agree on the class and addresses; wherever it finds a TCP/UDP header we must
//! agree on the ports and the protocol. The tcpdump regression captures (many link types, many
//! deliberately broken packets) are only checked for panics and for every frame getting a class.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use etherparse::{LaxNetSlice, LaxSlicedPacket, SlicedPacket, TransportSlice};
use pcap_parser::traits::PcapNGPacketBlock;
use pcap_parser::{create_reader, Block, PcapBlockOwned, PcapError};
use wire::{linktype as lt, parse, Class, View};

/// Call `f(linktype, captured bytes)` for every packet of a pcap or pcapng file. Stops quietly at
/// the first unreadable block (some tcpdump test files are deliberately broken).
fn for_each_packet(path: &Path, mut f: impl FnMut(u32, &[u8])) -> usize {
    let Ok(bytes) = std::fs::read(path) else {
        return 0;
    };
    let Ok(mut reader) = create_reader(bytes.len().max(1 << 16) + 1, &bytes[..]) else {
        return 0;
    };
    let mut legacy_link = None;
    let mut if_links: Vec<u32> = Vec::new();
    let mut n = 0;
    loop {
        match reader.next() {
            Ok((off, block)) => {
                match block {
                    PcapBlockOwned::LegacyHeader(h) => legacy_link = Some(h.network.0 as u32),
                    PcapBlockOwned::Legacy(b) => {
                        if let Some(l) = legacy_link {
                            let len = (b.caplen as usize).min(b.data.len());
                            f(l, &b.data[..len]);
                            n += 1;
                        }
                    }
                    PcapBlockOwned::NG(Block::SectionHeader(_)) => if_links.clear(),
                    PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                        if_links.push(idb.linktype.0 as u32)
                    }
                    PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                        if let Some(&l) = if_links.get(epb.if_id as usize) {
                            f(l, epb.packet_data());
                            n += 1;
                        }
                    }
                    PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                        if let Some(&l) = if_links.first() {
                            f(l, spb.packet_data());
                            n += 1;
                        }
                    }
                    PcapBlockOwned::NG(_) => {}
                }
                reader.consume(off);
            }
            Err(PcapError::Incomplete(_)) => {
                // The whole file is in the buffer: incomplete means a cut last block.
                if reader.refill().is_err() {
                    break;
                }
                match reader.next() {
                    Err(PcapError::Incomplete(_)) => break,
                    _ => continue,
                }
            }
            Err(_) => break,
        }
    }
    n
}

/// What etherparse sees: addresses, final IP protocol, and ports if it decoded TCP/UDP.
#[derive(Debug)]
struct Theirs {
    v6: bool,
    src: [u8; 16],
    dst: [u8; 16],
    proto: u8,
    fragmented: bool,
    ports: Option<(u16, u16)>,
    /// Bytes of IP payload etherparse saw (after its extension headers).
    payload_len: usize,
    /// The TCP header length announced by the data-offset field, if that byte was captured.
    tcp_header_len: Option<usize>,
}

fn tcp_header_len(proto: u8, payload: &[u8]) -> Option<usize> {
    (proto == 6).then(|| payload.get(12).map(|b| usize::from(b >> 4) * 4))?
}

fn theirs_lax(p: &LaxSlicedPacket) -> Option<Theirs> {
    let net = p.net.as_ref()?;
    let mut t = match net {
        LaxNetSlice::Ipv4(s) => {
            let mut t = Theirs {
                v6: false,
                src: [0; 16],
                dst: [0; 16],
                proto: s.payload().ip_number.0,
                fragmented: s.payload().fragmented,
                ports: None,
                payload_len: s.payload().payload.len(),
                tcp_header_len: tcp_header_len(s.payload().ip_number.0, s.payload().payload),
            };
            t.src[..4].copy_from_slice(&s.header().source());
            t.dst[..4].copy_from_slice(&s.header().destination());
            t
        }
        LaxNetSlice::Ipv6(s) => Theirs {
            v6: true,
            src: s.header().source(),
            dst: s.header().destination(),
            proto: s.payload().ip_number.0,
            fragmented: s.payload().fragmented,
            ports: None,
            payload_len: s.payload().payload.len(),
            tcp_header_len: tcp_header_len(s.payload().ip_number.0, s.payload().payload),
        },
    };
    t.ports = ports_of(p.transport.as_ref());
    Some(t)
}

fn theirs_strict(p: &SlicedPacket) -> Option<Theirs> {
    let net = p.net.as_ref()?;
    let (v6, src, dst, proto, fragmented, payload) = match net {
        etherparse::NetSlice::Ipv4(s) => {
            let mut src = [0; 16];
            let mut dst = [0; 16];
            src[..4].copy_from_slice(&s.header().source());
            dst[..4].copy_from_slice(&s.header().destination());
            let pl = s.payload();
            (false, src, dst, pl.ip_number.0, pl.fragmented, pl.payload)
        }
        etherparse::NetSlice::Ipv6(s) => {
            let pl = s.payload();
            let h = s.header();
            (
                true,
                h.source(),
                h.destination(),
                pl.ip_number.0,
                pl.fragmented,
                pl.payload,
            )
        }
    };
    Some(Theirs {
        v6,
        src,
        dst,
        proto,
        fragmented,
        ports: ports_of(p.transport.as_ref()),
        payload_len: payload.len(),
        tcp_header_len: tcp_header_len(proto, payload),
    })
}

fn ports_of(t: Option<&TransportSlice>) -> Option<(u16, u16)> {
    match t? {
        TransportSlice::Tcp(t) => Some((t.source_port(), t.destination_port())),
        TransportSlice::Udp(u) => Some((u.source_port(), u.destination_port())),
        _ => None,
    }
}

/// etherparse's decoding of a frame, by link type. It has no BSD null/loop parser: for those
/// we strip the 4-byte family and let it decode the IP header.
fn etherparse_view(link: u32, d: &[u8]) -> Option<Theirs> {
    match link {
        lt::ETHERNET => theirs_lax(&LaxSlicedPacket::from_ethernet(d).ok()?),
        lt::RAW | lt::RAW_12 | lt::RAW_14 | lt::IPV4 | lt::IPV6 => {
            theirs_lax(&LaxSlicedPacket::from_ip(d).ok()?)
        }
        lt::NULL | lt::LOOP => theirs_lax(&LaxSlicedPacket::from_ip(d.get(4..)?).ok()?),
        lt::LINUX_SLL => theirs_strict(&SlicedPacket::from_linux_sll(d).ok()?),
        _ => None,
    }
}

#[derive(Default, Debug)]
struct Tally {
    frames: usize,
    /// etherparse found IP and we agree on class, addresses and protocol.
    ip_agree: usize,
    /// ... and it found TCP/UDP and we agree on the ports.
    ports_agree: usize,
    /// We read ports where etherparse decoded no TCP/UDP header (allowed, see below).
    ports_only_ours: usize,
    /// Frames etherparse could not decode to IP (non-IP, cut before the addresses, ...).
    no_ip_theirs: usize,
    disagreements: Vec<String>,
}

fn compare(link: u32, d: &[u8], ours: &View, tally: &mut Tally) {
    tally.frames += 1;
    let Some(t) = etherparse_view(link, d) else {
        tally.no_ip_theirs += 1;
        return;
    };
    let want_class = if t.v6 { Class::Ipv6 } else { Class::Ipv4 };
    let mut bad = Vec::new();
    if ours.class != want_class || ours.tuple.src != t.src || ours.tuple.dst != t.dst {
        bad.push("class/addresses");
    } else {
        if ours.tuple.proto != t.proto {
            bad.push("proto");
        }
        match t.ports {
            Some(p) => {
                if (ours.tuple.sport, ours.tuple.dport) != p || ours.l4_cut {
                    bad.push("ports");
                }
            }
            None => {
                if ours.tuple.sport != 0 || ours.tuple.dport != 0 {
                    // Allowed difference: etherparse decodes no transport header for any
                    // fragment (including the first, which does carry the ports) or when the
                    // TCP/UDP header is cut short (it needs the whole TCP header with options,
                    // or 8 bytes of UDP; we need only the 4 port bytes), and it has no
                    // SCTP/DCCP/UDP-Lite decoder. Check it is one of those.
                    let tcp_cut = t.proto == 6
                        && t.payload_len < t.tcp_header_len.unwrap_or(usize::MAX).max(20);
                    let tcp_udp_cut = tcp_cut || (t.proto == 17 && t.payload_len < 8);
                    let other_l4 = !matches!(t.proto, 6 | 17);
                    if t.fragmented || tcp_udp_cut || other_l4 {
                        tally.ports_only_ours += 1;
                    } else {
                        bad.push("ports only ours");
                    }
                }
            }
        }
    }
    if bad.is_empty() {
        tally.ip_agree += 1;
        tally.ports_agree += usize::from(t.ports.is_some());
    } else {
        tally.disagreements.push(format!(
            "link {link} {bad:?}: ours {ours:?} theirs {t:?} frame {:02x?}",
            &d[..d.len().min(80)]
        ));
    }
}

#[test]
fn agrees_with_etherparse_on_real_traces() {
    let Some(dir) = testkit::traces_dir() else {
        return;
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("traces dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.contains(".pcap"))
        })
        .collect();
    files.sort();
    assert!(
        files.len() >= 8,
        "expected the real captures in {}",
        dir.display()
    );
    let mut total = Tally::default();
    for path in &files {
        let mut tally = Tally::default();
        let mut classes: BTreeMap<&str, usize> = BTreeMap::new();
        let mut links: BTreeMap<u32, usize> = BTreeMap::new();
        let n = for_each_packet(path, |link, d| {
            let ours = parse(link, d);
            *classes.entry(ours.class.name()).or_default() += 1;
            *links.entry(link).or_default() += 1;
            compare(link, d, &ours, &mut tally);
        });
        println!(
            "{}: {n} frames, links {links:?}, classes {classes:?}, ip agree {}, ports agree {}, \
             ports only ours {}, not IP for etherparse {}, disagreements {}",
            path.file_name().and_then(|s| s.to_str()).unwrap_or("?"),
            tally.ip_agree,
            tally.ports_agree,
            tally.ports_only_ours,
            tally.no_ip_theirs,
            tally.disagreements.len()
        );
        assert!(n > 0, "no packets read from {}", path.display());
        for d in tally.disagreements.iter().take(5) {
            println!("  {d}");
        }
        total.frames += tally.frames;
        total.ip_agree += tally.ip_agree;
        total.ports_agree += tally.ports_agree;
        total.ports_only_ours += tally.ports_only_ours;
        total.no_ip_theirs += tally.no_ip_theirs;
        total.disagreements.extend(tally.disagreements);
    }
    println!(
        "total: {total:?}",
        total = (total.frames, total.ip_agree, total.ports_agree)
    );
    assert!(
        total.ip_agree > 10_000,
        "too few IP packets compared: {}",
        total.ip_agree
    );
    assert!(total.ports_agree > 5_000);
    assert!(
        total.disagreements.is_empty(),
        "{} disagreements, first: {:?}",
        total.disagreements.len(),
        total.disagreements.first()
    );
}

#[test]
fn tcpdump_regression_captures_never_panic() {
    let Some(dir) = testkit::trace("tcpdump-tests") else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        panic!("missing {}", dir.display());
    };
    let mut per_class = [0usize; 6];
    let mut frames = 0;
    for e in entries.flatten() {
        for_each_packet(&e.path(), |link, d| {
            let v = parse(link, d);
            per_class[v.class.index()] += 1;
            frames += 1;
            // Non-IP classes carry no tuple.
            assert!(v.class.is_ip() || (v.tuple == key::Tuple::default() && !v.l4_cut));
        });
    }
    println!("tcpdump tests: {frames} frames, per class {per_class:?}");
    assert_eq!(per_class.iter().sum::<usize>(), frames);
    assert!(frames > 1000);
    assert!(per_class[Class::Ipv4.index()] > 0 && per_class[Class::Ipv6.index()] > 0);
}
