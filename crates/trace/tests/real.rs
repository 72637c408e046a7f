//! Cross-check against the `pcap-parser` crate: for the real captures in `shared/traces`, every
//! packet's timestamp, lengths, link type and bytes must agree, and so must the packet count.
//! The tcpdump regression captures are compared too wherever pcap-parser reads them to the end.

use std::path::{Path, PathBuf};

use pcap_parser::{Block, PcapBlockOwned, PcapNGSlice};
use trace::{Body, Capture, Format};

/// One packet as the reference sees it.
#[derive(Debug, PartialEq, Eq)]
struct Pkt<'a> {
    ts_ns: u64,
    wire_len: u32,
    link: u32,
    data: &'a [u8],
}

/// Every packet according to pcap-parser, and whether it read the whole file cleanly.
fn reference(data: &[u8]) -> (Vec<Pkt<'_>>, bool) {
    let mut out = Vec::new();
    if let Ok((mut rem, h)) = pcap_parser::parse_pcap_header(data) {
        let be = h.is_bigendian();
        let frac_ns = if h.is_nanosecond_precision() { 1 } else { 1000 };
        let link = (h.network.0 as u32) & 0xFFFF;
        while !rem.is_empty() {
            let r = if be {
                pcap_parser::parse_pcap_frame_be(rem)
            } else {
                pcap_parser::parse_pcap_frame(rem)
            };
            let Ok((next, b)) = r else {
                return (out, false);
            };
            out.push(Pkt {
                ts_ns: b.ts_sec as u64 * 1_000_000_000 + b.ts_usec as u64 * frac_ns,
                // orig_len as written, even below caplen (tshark's frame.len).
                wire_len: b.origlen,
                link,
                data: b.data,
            });
            rem = next;
        }
        return (out, true);
    }
    let Ok(slice) = PcapNGSlice::from_slice(data) else {
        return (out, false);
    };
    // (link, snaplen, units per second, offset seconds) per interface of the current section.
    let mut ifaces: Vec<(u32, u32, u64, i64)> = Vec::new();
    for b in slice {
        let Ok(PcapBlockOwned::NG(b)) = b else {
            return (out, false);
        };
        match b {
            Block::SectionHeader(_) => ifaces.clear(),
            Block::InterfaceDescription(idb) => {
                let Some(res) = idb.ts_resolution() else {
                    return (out, false);
                };
                ifaces.push((idb.linktype.0 as u32, idb.snaplen, res, idb.ts_offset()));
            }
            Block::EnhancedPacket(epb) => {
                let Some(&(link, _, res, off)) = ifaces.get(epb.if_id as usize) else {
                    return (out, false);
                };
                let ts = ((epb.ts_high as u64) << 32) | epb.ts_low as u64;
                let ns = (ts as u128 * 1_000_000_000 / res as u128) as i128
                    + off as i128 * 1_000_000_000;
                out.push(Pkt {
                    ts_ns: ns.clamp(0, u64::MAX as i128) as u64,
                    wire_len: epb.origlen.max(epb.caplen),
                    link,
                    data: epb.data.get(..epb.caplen as usize).unwrap_or(epb.data),
                });
            }
            Block::SimplePacket(spb) => {
                let Some(&(link, snap, _, _)) = ifaces.first() else {
                    return (out, false);
                };
                let d = spb.data.get(..spb.origlen as usize).unwrap_or(spb.data);
                let d = if snap != 0 && d.len() > snap as usize {
                    &d[..snap as usize]
                } else {
                    d
                };
                out.push(Pkt {
                    ts_ns: 0,
                    wire_len: spb.origlen,
                    link,
                    data: d,
                });
            }
            // pcap-parser does not decode Obsolete Packet Blocks; we do. None of the files
            // compared here holds one (checked by the count comparison).
            _ => {}
        }
    }
    (out, true)
}

fn ours(cap: &Capture) -> (Vec<Pkt<'_>>, bool) {
    let mut out = Vec::new();
    for r in cap.records() {
        let Ok(r) = r else {
            return (out, false);
        };
        let Body::Frame { link, data } = r.body else {
            panic!("a capture yields frames");
        };
        out.push(Pkt {
            ts_ns: r.ts_ns,
            wire_len: r.wire_len,
            link,
            data,
        });
    }
    (out, true)
}

fn open(p: &Path) -> Capture {
    Capture::open(p.to_str().expect("utf-8 path"), None).expect("opens")
}

#[test]
fn real_captures_match_pcap_parser() {
    let Some(shared) = testkit::traces_dir() else {
        return;
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&shared)
        .expect("shared/traces")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.contains(".pcap"))
        })
        .collect();
    files.sort();
    assert_eq!(files.len(), 8, "{files:?}");
    let mut total = 0;
    for p in &files {
        let cap = open(p);
        let (want, clean) = reference(cap.bytes());
        assert!(clean, "pcap-parser fails on {}", p.display());
        let (got, ok) = ours(&cap);
        assert!(
            ok,
            "{}: {:?}",
            p.display(),
            cap.records().find_map(Result::err)
        );
        assert!(!got.is_empty());
        assert_eq!(got.len(), want.len(), "{}", p.display());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "{} packet {i}", p.display());
        }
        println!("{}: {:?}, {} packets", p.display(), cap.format(), got.len());
        total += got.len();
    }
    // Several names say .pcap but hold pcapng (see the traces README): detection is by magic.
    let fmt = |n: &str| open(&shared.join(n)).format();
    assert_eq!(fmt("ndpi_zoom.pcap"), Format::Pcapng);
    assert_eq!(fmt("netshare_caida-small_raw.pcap"), Format::Pcapng);
    assert_eq!(fmt("ndpi_gnutella.pcap"), Format::Pcap);
    assert!(total > 5_000, "{total}");
}

#[test]
fn tcpdump_captures_match_pcap_parser_where_it_reads_them() {
    let Some(dir) = testkit::trace("tcpdump-tests") else {
        return;
    };
    let mut compared = 0;
    let mut packets = 0;
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("tcpdump-tests")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in &entries {
        let cap = open(p);
        let (want, clean) = reference(cap.bytes());
        if !clean {
            continue;
        }
        let (got, ok) = ours(&cap);
        assert!(
            ok,
            "{}: we fail where pcap-parser reads to the end",
            p.display()
        );
        assert_eq!(got, want, "{}", p.display());
        compared += 1;
        packets += got.len();
    }
    println!("tcpdump-tests: {compared} files, {packets} packets identical to pcap-parser");
    assert!(compared >= 800, "{compared}");
}
