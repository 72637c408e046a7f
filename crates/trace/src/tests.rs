//! Unit tests: small traces built in memory for every format and every error path.

use super::*;
use crate::write::{Endian, KeysWriter, PcapWriter, PcapngWriter};

/// All records and the error (if any), read through both the iterator and `for_each`, which
/// must agree exactly.
fn read_all(c: &Capture) -> (Vec<Record<'_>>, Option<TraceError>) {
    let mut recs = Vec::new();
    let mut err = None;
    let mut it = c.records();
    for r in it.by_ref() {
        match r {
            Ok(r) => recs.push(r),
            Err(e) => err = Some(e),
        }
    }
    assert!(it.next().is_none(), "iterator must stay ended");
    let mut seen = Vec::new();
    let fe = c.for_each(|r| seen.push(r));
    assert_eq!(seen, recs, "for_each and records() disagree");
    match (&fe, &err) {
        (Ok(n), None) => assert_eq!(*n, recs.len() as u64),
        (Err(a), Some(b)) => assert_eq!(a.to_string(), b.to_string()),
        _ => panic!("for_each {fe:?} vs records() {err:?}"),
    }
    streams_alike(c, &recs, err.as_ref());
    (recs, err)
}

/// A reader returning at most `cut` bytes per call.
struct Short(std::io::Cursor<Vec<u8>>, usize);

impl Read for Short {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.1);
        self.0.read(&mut buf[..n])
    }
}

/// The same bytes through the stream reader, in reads of 1, 3, 13 and 4096 bytes: the same
/// records and the same error.
fn streams_alike(c: &Capture, recs: &[Record<'_>], err: Option<&TraceError>) {
    for cut in [1, 3, 13, 4096] {
        let reader = Short(std::io::Cursor::new(c.bytes().to_vec()), cut);
        let s = Capture::from_reader(c.name(), reader, Some(c.format())).unwrap();
        let mut seen = Vec::new();
        let res = s.for_each_streamed(|r| seen.push(format!("{r:?}")));
        let want: Vec<String> = recs.iter().map(|r| format!("{r:?}")).collect();
        assert_eq!(seen, want, "stream (reads of {cut}) and slice disagree");
        match (&res, err) {
            (Ok(n), None) => assert_eq!(*n, recs.len() as u64),
            (Err(a), Some(b)) => assert_eq!(a.to_string(), b.to_string()),
            _ => panic!("stream (reads of {cut}) {res:?} vs slice {err:?}"),
        }
    }
}

fn frame<'a>(r: &Record<'a>) -> (u32, &'a [u8]) {
    match r.body {
        Body::Frame { link, data } => (link, data),
        Body::Tuple(_) => panic!("expected a frame"),
    }
}

fn pcap_bytes(e: Endian, nsec: bool, link: u32, pkts: &[(u64, u32, &[u8])]) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new(), link, 65535, e, nsec).unwrap();
    for (ts, wire, data) in pkts {
        w.write_packet(*ts, *wire, data).unwrap();
    }
    w.into_inner()
}

const P1: &[u8] = &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
const P2: &[u8] = &[0xAA; 60];

#[test]
fn pcap_all_magics() {
    for e in [Endian::Little, Endian::Big] {
        for nsec in [false, true] {
            // FCS bits (28-31) set above link type 1: ignored.
            let link = 0x1000_0000 | 1;
            let b = pcap_bytes(
                e,
                nsec,
                link,
                &[(1_500_000_123_456_789, 64, P1), (7, 60, P2)],
            );
            let c = Capture::from_bytes("t.pcap", b, None).unwrap();
            assert_eq!(c.format(), Format::Pcap);
            assert_eq!(c.pcap_link(), Some(1));
            let (recs, err) = read_all(&c);
            assert!(err.is_none(), "{err:?}");
            assert_eq!(recs.len(), 2);
            let want_ts = if nsec {
                1_500_000_123_456_789
            } else {
                1_500_000_123_456_000
            };
            assert_eq!(recs[0].ts_ns, want_ts, "{e:?} nsec={nsec}");
            assert_eq!(recs[0].wire_len, 64);
            assert_eq!(frame(&recs[0]), (1, P1));
            assert_eq!(recs[1].ts_ns, if nsec { 7 } else { 0 });
            assert_eq!(frame(&recs[1]), (1, P2));
        }
    }
}

#[test]
fn pcap_incl_above_orig_reports_orig_as_wire_length() {
    // tshark reports frame.len = orig_len whatever incl_len says; the captured bytes are
    // incl_len's. Both byte orders (two fast paths), and orig_len 0 as some writers leave it.
    for e in [Endian::Little, Endian::Big] {
        let mut w = PcapWriter::new(Vec::new(), 1, 65535, e, false).unwrap();
        w.write_raw(1, 2, 10, 4, P1).unwrap();
        w.write_raw(1, 3, 10, 0, P1).unwrap();
        w.write_raw(1, 4, 60, 60, P2).unwrap();
        let c = Capture::from_bytes("x", w.into_inner(), None).unwrap();
        let (recs, err) = read_all(&c);
        assert!(err.is_none(), "{err:?}");
        let got: Vec<_> = recs.iter().map(|r| (r.wire_len, frame(r).1)).collect();
        assert_eq!(got, [(4, P1), (0, P1), (60, P2)], "{e:?}");
        assert_eq!(recs[0].ts_ns, 1_000_002_000);
    }
}

#[test]
fn pcapng_captured_above_original_reports_the_original_as_wire_length() {
    // As for pcap: tshark's frame.len is the block's original length, whatever was captured.
    for e in [Endian::Little, Endian::Big] {
        let mut w = PcapngWriter::new(Vec::new(), e).unwrap();
        w.interface(1, 65535, None, None).unwrap();
        w.enhanced_packet(0, 1, 4, P1).unwrap();
        w.enhanced_packet(0, 2, 0, P1).unwrap();
        w.enhanced_packet(0, 3, 60, P2).unwrap();
        let c = Capture::from_bytes("x", w.into_inner(), None).unwrap();
        let (recs, err) = read_all(&c);
        assert!(err.is_none(), "{err:?}");
        let got: Vec<_> = recs.iter().map(|r| (r.wire_len, frame(r).1)).collect();
        assert_eq!(got, [(4, P1), (0, P1), (60, P2)], "{e:?}");
    }
}

/// A pcap file whose header says `magic` (written in byte order `e`, so that it reads back as
/// `magic` in that order) and version `major.minor`, followed by `recs`: raw record headers
/// `(sec, frac, first length field, second length field)` and the bytes after each header.
fn pcap_variant(
    e: Endian,
    magic: u32,
    (major, minor): (u16, u16),
    recs: &[(u32, u32, u32, u32, &[u8])],
) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new(), 1, 65535, e, false).unwrap();
    for &(sec, frac, a, b, data) in recs {
        w.write_raw(sec, frac, a, b, data).unwrap();
    }
    let mut v = w.into_inner();
    let (m, ma, mi) = match e {
        Endian::Little => (
            magic.to_le_bytes(),
            major.to_le_bytes(),
            minor.to_le_bytes(),
        ),
        Endian::Big => (
            magic.to_be_bytes(),
            major.to_be_bytes(),
            minor.to_be_bytes(),
        ),
    };
    v[0..4].copy_from_slice(&m);
    v[4..6].copy_from_slice(&ma);
    v[6..8].copy_from_slice(&mi);
    v
}

const USEC_MAGIC: u32 = 0xA1B2_C3D4;

#[test]
fn pcap_before_2_3_stores_len_before_caplen() {
    // libpcap (sf-pcap.c) and Wireshark: versions 2.0-2.2 and DG/UX's 543.0 always swap the two
    // fields back, even where that makes caplen > len (third record).
    for e in [Endian::Little, Endian::Big] {
        for v in [(2, 0), (2, 1), (2, 2), (543, 0)] {
            let b = pcap_variant(
                e,
                USEC_MAGIC,
                v,
                &[(1, 0, 64, 10, P1), (2, 0, 60, 60, P2), (3, 0, 4, 10, P1)],
            );
            let c = Capture::from_bytes("old.pcap", b, None)
                .unwrap_or_else(|err| panic!("{v:?} {e:?}: {err}"));
            let (recs, err) = read_all(&c);
            assert!(err.is_none(), "{v:?} {e:?}: {err:?}");
            let got: Vec<_> = recs
                .iter()
                .map(|r| (r.ts_ns, r.wire_len, frame(r).1))
                .collect();
            assert_eq!(
                got,
                [
                    (1_000_000_000, 64, P1),
                    (2_000_000_000, 60, P2),
                    (3_000_000_000, 4, P1)
                ],
                "{v:?} {e:?}"
            );
        }
    }
}

#[test]
fn pcap_2_3_swaps_only_when_caplen_exceeds_len() {
    // Some 2.3 files were written in the old order: libpcap swaps when caplen > len.
    for e in [Endian::Little, Endian::Big] {
        let b = pcap_variant(
            e,
            USEC_MAGIC,
            (2, 3),
            &[(1, 0, 10, 64, P1), (2, 0, 64, 10, P1), (3, 0, 60, 60, P2)],
        );
        let c = Capture::from_bytes("v23.pcap", b, None).unwrap();
        let (recs, err) = read_all(&c);
        assert!(err.is_none(), "{e:?}: {err:?}");
        let got: Vec<_> = recs.iter().map(|r| (r.wire_len, frame(r).1)).collect();
        assert_eq!(got, [(64, P1), (64, P1), (60, P2)], "{e:?}");
    }
}

#[test]
fn pcap_versions_outside_2_0_to_2_4_are_refused() {
    for e in [Endian::Little, Endian::Big] {
        for (major, minor) in [(1, 0), (0, 0), (2, 5), (3, 0), (543, 1), (65535, 65535)] {
            let b = pcap_variant(e, USEC_MAGIC, (major, minor), &[(0, 0, 10, 10, P1)]);
            for format in [None, Some(Format::Pcap)] {
                let err = Capture::from_bytes("v.pcap", b.clone(), format).unwrap_err();
                assert_eq!(err.offset, 0);
                let msg = err.to_string();
                assert!(
                    msg.starts_with(&format!(
                        "v.pcap: offset 0: unsupported pcap version {major}.{minor} "
                    )),
                    "{msg}"
                );
                // The same through the stream reader.
                let r = std::io::Cursor::new(b.clone());
                let err = Capture::from_reader("v.pcap", r, format).unwrap_err();
                assert_eq!(err.to_string(), msg);
            }
        }
        // 2.4 and the others libpcap reads open.
        for v in [(2, 0), (2, 3), (2, 4), (543, 0)] {
            let b = pcap_variant(e, USEC_MAGIC, v, &[(0, 0, 10, 10, P1)]);
            let c = Capture::from_bytes("v.pcap", b, None).unwrap();
            assert_eq!(read_all(&c).0.len(), 1);
        }
    }
}

#[test]
fn pcap_modified_magic_has_24_byte_record_headers() {
    // Kuznetzov's patched libpcap (magic a1b2cd34, µs): each record header adds ifindex u32,
    // protocol u16, pkt_type u8, pad u8 (libpcap's pcap_sf_patched_pkthdr).
    for e in [Endian::Little, Endian::Big] {
        let extra = |ifindex: u32, proto: u16, ty: u8| {
            let mut x = Vec::new();
            match e {
                Endian::Little => {
                    x.extend_from_slice(&ifindex.to_le_bytes());
                    x.extend_from_slice(&proto.to_le_bytes());
                }
                Endian::Big => {
                    x.extend_from_slice(&ifindex.to_be_bytes());
                    x.extend_from_slice(&proto.to_be_bytes());
                }
            }
            x.extend_from_slice(&[ty, 0]);
            x
        };
        let r1 = [extra(2, 0x0800, 0), P1.to_vec()].concat();
        let r2 = [extra(3, 0x86DD, 4), P2.to_vec()].concat();
        let mut b = pcap_variant(
            e,
            0xA1B2_CD34,
            (2, 4),
            &[(7, 5, 10, 64, &r1), (8, 6, 60, 60, &r2)],
        );
        let c = Capture::from_bytes("kuz.pcap", b.clone(), None).unwrap();
        assert_eq!(c.format(), Format::Pcap);
        assert_eq!(c.pcap_link(), Some(1));
        let (recs, err) = read_all(&c);
        assert!(err.is_none(), "{e:?}: {err:?}");
        let got: Vec<_> = recs
            .iter()
            .map(|r| (r.ts_ns, r.wire_len, frame(r).1))
            .collect();
        assert_eq!(
            got,
            [(7_000_005_000, 64, P1), (8_000_006_000, 60, P2)],
            "{e:?}"
        );
        // A record header cut inside its 8 extra bytes.
        let off = b.len() as u64;
        b.extend_from_slice(&[0; 20]);
        let c = Capture::from_bytes("kuz.pcap", b, None).unwrap();
        let (recs, err) = read_all(&c);
        assert_eq!(recs.len(), 2);
        assert_eq!(
            err.unwrap().to_string(),
            format!("kuz.pcap: offset {off}: record header truncated: 24 bytes needed, 20 present")
        );
    }
}

#[test]
fn pcap_header_only_and_snaplen_ignored() {
    let c0 = Capture::from_bytes("h.pcap", pcap_bytes(Endian::Big, false, 101, &[]), None).unwrap();
    assert!(read_all(&c0).0.is_empty());
    // snaplen 4 but a 10-byte record: tolerated.
    let mut w = PcapWriter::new(Vec::new(), 101, 4, Endian::Big, false).unwrap();
    w.write_packet(0, 10, P1).unwrap();
    let c = Capture::from_bytes("h.pcap", w.into_inner(), None).unwrap();
    let (recs, err) = read_all(&c);
    assert!(err.is_none());
    assert_eq!(frame(&recs[0]), (101, P1));
}

#[test]
fn pcap_truncated_record_keeps_earlier_ones() {
    let mut b = pcap_bytes(Endian::Little, false, 1, &[(0, 10, P1), (0, 60, P2)]);
    let second = 24 + 16 + P1.len();
    b.truncate(b.len() - 5);
    let c = Capture::from_bytes("cut.pcap", b, None).unwrap();
    let (recs, err) = read_all(&c);
    assert_eq!(recs.len(), 1);
    let e = err.unwrap();
    assert_eq!(e.offset, second as u64);
    assert!(matches!(
        e.kind,
        TraceErrorKind::TruncatedRecord { need: 60, have: 55 }
    ));
    assert_eq!(
        e.to_string(),
        format!(
            "cut.pcap: offset {second}: record truncated: 60 captured bytes announced, 55 present"
        )
    );
}

#[test]
fn pcap_truncated_record_header() {
    let mut b = pcap_bytes(Endian::Big, true, 1, &[(0, 10, P1)]);
    b.extend_from_slice(&[0; 7]);
    let c = Capture::from_bytes("x.pcap", b, None).unwrap();
    let (recs, err) = read_all(&c);
    assert_eq!(recs.len(), 1);
    let e = err.unwrap();
    assert_eq!(e.offset, (24 + 16 + 10) as u64);
    assert!(matches!(
        e.kind,
        TraceErrorKind::TruncatedRecordHeader { need: 16, have: 7 }
    ));
}

#[test]
fn pcap_absurd_length() {
    let mut w = PcapWriter::new(Vec::new(), 1, 65535, Endian::Little, false).unwrap();
    w.write_raw(0, 0, 10, 10, P1).unwrap();
    w.write_raw(0, 0, MAX_RECORD_LEN + 1, 0, &[]).unwrap();
    let c = Capture::from_bytes("big.pcap", w.into_inner(), None).unwrap();
    let (recs, err) = read_all(&c);
    assert_eq!(recs.len(), 1);
    let e = err.unwrap();
    assert_eq!(e.offset, 50);
    assert!(matches!(e.kind, TraceErrorKind::RecordTooLarge { .. }));
    assert!(e
        .to_string()
        .starts_with("big.pcap: offset 50: record length 268435457"));
}

#[test]
fn pcap_header_errors() {
    let e = Capture::from_bytes("a.pcap", vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0], None).unwrap_err();
    assert_eq!(e.offset, 0);
    assert!(matches!(
        e.kind,
        TraceErrorKind::TruncatedHeader { need: 24, have: 6 }
    ));
    let e = Capture::from_bytes("a.pcap", vec![1; 30], Some(Format::Pcap)).unwrap_err();
    assert!(matches!(
        e.kind,
        TraceErrorKind::BadMagic {
            format: Format::Pcap,
            found: 0x0101_0101
        }
    ));
    assert_eq!(
        e.to_string(),
        "a.pcap: offset 0: not a pcap file: magic number 0x01010101"
    );
    let e = Capture::from_bytes("a.pcap", vec![1; 3], Some(Format::Pcap)).unwrap_err();
    assert!(matches!(e.kind, TraceErrorKind::TruncatedHeader { .. }));
}

// ---------------------------------------------------------------- pcapng

fn ng_two_sections() -> Vec<u8> {
    let mut w = PcapngWriter::new(Vec::new(), Endian::Little).unwrap();
    // if0: Ethernet, default µs. if1: raw IP, ns, offset +10 s.
    w.interface(1, 0, None, None).unwrap();
    w.interface(101, 0, Some(9), Some(10)).unwrap();
    w.enhanced_packet(0, 1_000_001, 64, P1).unwrap();
    w.block(0x0BAD_0001, &[1, 2, 3, 4, 5]).unwrap(); // unknown: skipped
    w.enhanced_packet(1, 5, 60, P2).unwrap();
    // Second section, big-endian: if0 is Linux SLL with 2^-10 s units and snaplen 4.
    w.section(Endian::Big).unwrap();
    w.interface(113, 4, Some(0x80 | 10), None).unwrap();
    w.enhanced_packet(0, 2048, 10, P1).unwrap();
    w.simple_packet(10, P1).unwrap(); // clipped to snaplen 4
    w.simple_packet(2, P1).unwrap(); // orig 2 < room: 2 bytes
    w.into_inner()
}

#[test]
fn pcapng_sections_interfaces_spb_unknown() {
    let c = Capture::from_bytes("two.pcapng", ng_two_sections(), None).unwrap();
    assert_eq!(c.format(), Format::Pcapng);
    assert_eq!(c.pcap_link(), None);
    let (recs, err) = read_all(&c);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(recs.len(), 5);
    assert_eq!((recs[0].ts_ns, recs[0].wire_len), (1_000_001_000, 64));
    assert_eq!(frame(&recs[0]), (1, P1));
    assert_eq!((recs[1].ts_ns, recs[1].wire_len), (10_000_000_005, 60));
    assert_eq!(frame(&recs[1]), (101, P2));
    assert_eq!((recs[2].ts_ns, recs[2].wire_len), (2_000_000_000, 10));
    assert_eq!(frame(&recs[2]), (113, P1));
    assert_eq!((recs[3].ts_ns, recs[3].wire_len), (0, 10));
    assert_eq!(frame(&recs[3]), (113, &P1[..4]));
    assert_eq!(frame(&recs[4]), (113, &P1[..2]));
    assert_eq!(recs[4].wire_len, 2);
}

#[test]
fn pcapng_big_endian_first_and_opb() {
    let mut w = PcapngWriter::new(Vec::new(), Endian::Big).unwrap();
    w.interface(1, 0, Some(3), Some(-1)).unwrap(); // ms units, offset -1 s
                                                   // OPB: if_id u16, drops u16, ts hi, ts lo, cap, orig, data.
    let mut body = Vec::new();
    body.extend_from_slice(&0u16.to_be_bytes());
    body.extend_from_slice(&0u16.to_be_bytes());
    body.extend_from_slice(&0u32.to_be_bytes());
    body.extend_from_slice(&1500u32.to_be_bytes());
    body.extend_from_slice(&(P1.len() as u32).to_be_bytes());
    body.extend_from_slice(&99u32.to_be_bytes());
    body.extend_from_slice(P1);
    w.block(2, &body).unwrap();
    w.enhanced_packet(0, 500, 10, P1).unwrap();
    let c = Capture::from_bytes("-", w.into_inner(), None).unwrap();
    let (recs, err) = read_all(&c);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(recs.len(), 2);
    assert_eq!((recs[0].ts_ns, recs[0].wire_len), (500_000_000, 99));
    assert_eq!(frame(&recs[0]), (1, P1));
    // 0.5 s - 1 s saturates at 0.
    assert_eq!(recs[1].ts_ns, 0);
}

/// A pcapng file: SHB + IDB, then `tail` appended; returns (bytes, offset of tail).
fn ng_with(tail: &[u8]) -> (Vec<u8>, u64) {
    let mut w = PcapngWriter::new(Vec::new(), Endian::Little).unwrap();
    w.interface(1, 0, None, None).unwrap();
    w.enhanced_packet(0, 0, 10, P1).unwrap();
    let mut b = w.into_inner();
    let off = b.len() as u64;
    b.extend_from_slice(tail);
    (b, off)
}

fn raw_block(t: u32, len: u32, body: &[u8], trailer: u32) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&t.to_le_bytes());
    v.extend_from_slice(&len.to_le_bytes());
    v.extend_from_slice(body);
    v.extend_from_slice(&trailer.to_le_bytes());
    v
}

fn ng_err(tail: &[u8]) -> (TraceError, u64) {
    let (b, off) = ng_with(tail);
    let c = Capture::from_bytes("bad.pcapng", b, None).unwrap();
    let (recs, err) = read_all(&c);
    assert_eq!(
        recs.len(),
        1,
        "the packet before the bad block is delivered"
    );
    let e = err.expect("an error");
    assert_eq!(e.offset, off, "{e}");
    assert!(e
        .to_string()
        .starts_with(&format!("bad.pcapng: offset {off}: ")));
    (e, off)
}

#[test]
fn pcapng_block_length_errors() {
    let (e, _) = ng_err(&raw_block(99, 18, &[0; 8], 18));
    assert!(
        matches!(e.kind, TraceErrorKind::BlockLenUnaligned { len: 18 }),
        "{e}"
    );
    let (e, _) = ng_err(&raw_block(99, 8, &[0; 4], 8));
    assert!(
        matches!(e.kind, TraceErrorKind::BlockTooShort { len: 8 }),
        "{e}"
    );
    let (e, _) = ng_err(&raw_block(99, 64, &[0; 4], 64));
    assert!(
        matches!(e.kind, TraceErrorKind::BlockPastEnd { len: 64, have: 16 }),
        "{e}"
    );
    let (e, _) = ng_err(&raw_block(99, 16, &[0; 4], 20));
    assert!(
        matches!(
            e.kind,
            TraceErrorKind::BlockLenMismatch {
                len: 16,
                trailer: 20
            }
        ),
        "{e}"
    );
    let (e, _) = ng_err(&[6, 0, 0, 0, 32]);
    assert!(
        matches!(e.kind, TraceErrorKind::TruncatedBlockHeader { have: 5 }),
        "{e}"
    );
}

#[test]
fn pcapng_packet_errors() {
    // EPB naming interface 3 of 1.
    let mut body = Vec::new();
    for v in [3u32, 0, 0, 4, 4] {
        body.extend_from_slice(&v.to_le_bytes());
    }
    body.extend_from_slice(&[1, 2, 3, 4]);
    let (e, _) = ng_err(&raw_block(6, 36, &body, 36));
    assert!(
        matches!(e.kind, TraceErrorKind::NoSuchInterface { id: 3, count: 1 }),
        "{e}"
    );
    assert!(e
        .to_string()
        .ends_with("packet names interface 3, but the section defines only interface 0"));
    // EPB whose captured length exceeds the block.
    let mut body = Vec::new();
    for v in [0u32, 0, 0, 9, 9] {
        body.extend_from_slice(&v.to_le_bytes());
    }
    body.extend_from_slice(&[1, 2, 3, 4]);
    let (e, _) = ng_err(&raw_block(6, 36, &body, 36));
    assert!(
        matches!(e.kind, TraceErrorKind::CapLenPastBlock { cap: 9, room: 4 }),
        "{e}"
    );
    // EPB too short for its fixed part.
    let (e, _) = ng_err(&raw_block(6, 20, &[0; 8], 20));
    assert!(
        matches!(
            e.kind,
            TraceErrorKind::BlockBodyTooShort {
                block_type: 6,
                need: 20,
                have: 8
            }
        ),
        "{e}"
    );
    // IDB too short; IDB whose option runs past the block.
    let (e, _) = ng_err(&raw_block(1, 16, &[0; 4], 16));
    assert!(
        matches!(
            e.kind,
            TraceErrorKind::BlockBodyTooShort { block_type: 1, .. }
        ),
        "{e}"
    );
    let (e, _) = ng_err(&raw_block(
        1,
        24,
        &[1, 0, 0, 0, 0, 0, 0, 0, 9, 0, 40, 0],
        24,
    ));
    assert!(
        matches!(e.kind, TraceErrorKind::OptionPastBlock { code: 9, len: 40 }),
        "{e}"
    );
    // SHB with a bad byte-order magic.
    let (e, _) = ng_err(&raw_block(pcapng::SHB, 28, &[9; 16], 28));
    assert!(
        matches!(e.kind, TraceErrorKind::BadByteOrder { found: 0x0909_0909 }),
        "{e}"
    );
    // SHB with a too-short body.
    let (e, _) = ng_err(&raw_block(pcapng::SHB, 16, &[0x4d, 0x3c, 0x2b, 0x1a], 16));
    assert!(
        matches!(
            e.kind,
            TraceErrorKind::BlockBodyTooShort {
                block_type: 0x0A0D_0D0A,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn pcapng_new_section_resets_interfaces() {
    let mut w = PcapngWriter::new(Vec::new(), Endian::Little).unwrap();
    w.interface(1, 0, None, None).unwrap();
    w.section(Endian::Little).unwrap();
    let off = w.get_ref().len() as u64;
    w.simple_packet(4, &[1, 2, 3, 4]).unwrap();
    let c = Capture::from_bytes("r.pcapng", w.into_inner(), None).unwrap();
    let (recs, err) = read_all(&c);
    assert!(recs.is_empty());
    let e = err.unwrap();
    assert_eq!(e.offset, off);
    assert!(matches!(
        e.kind,
        TraceErrorKind::NoSuchInterface { id: 0, count: 0 }
    ));
    assert!(
        e.to_string()
            .ends_with("packet names interface 0, but the section defines no interface"),
        "{e}"
    );
}

#[test]
fn pcapng_unknown_interface_names_the_defined_range() {
    let mut w = PcapngWriter::new(Vec::new(), Endian::Big).unwrap();
    for _ in 0..3 {
        w.interface(1, 0, None, None).unwrap();
    }
    w.enhanced_packet(2, 0, 10, P1).unwrap();
    let off = w.get_ref().len();
    w.enhanced_packet(5, 0, 10, P1).unwrap();
    let c = Capture::from_bytes("i.pcapng", w.into_inner(), None).unwrap();
    let (recs, err) = read_all(&c);
    assert_eq!(recs.len(), 1);
    assert_eq!(
        err.unwrap().to_string(),
        format!(
            "i.pcapng: offset {off}: packet names interface 5, but the section defines \
             interfaces 0..=2"
        )
    );
}

#[test]
fn pcapng_magic_checks() {
    let e = Capture::from_bytes("x", vec![1, 2, 3, 4, 5], Some(Format::Pcapng)).unwrap_err();
    assert!(matches!(
        e.kind,
        TraceErrorKind::BadMagic {
            format: Format::Pcapng,
            found: 0x0102_0304
        }
    ));
    let e = Capture::from_bytes("x", vec![], Some(Format::Pcapng)).unwrap_err();
    assert!(matches!(e.kind, TraceErrorKind::EmptyFile));
    let e = Capture::from_bytes("x", vec![0x0a, 0x0d], Some(Format::Pcapng)).unwrap_err();
    assert!(matches!(e.kind, TraceErrorKind::TruncatedHeader { .. }));
}

// ---------------------------------------------------------------- key traces

fn tuples() -> Vec<Tuple> {
    vec![
        Tuple::v4([10, 0, 0, 1], [192, 168, 1, 2], 1234, 80, 6),
        Tuple::v4([1, 2, 3, 4], [5, 6, 7, 8], 65535, 0, 17),
        Tuple::v4([255; 4], [0; 4], 1, 2, 255),
    ]
}

fn keys_bytes(f: Format) -> Vec<u8> {
    let mut w = KeysWriter::new(Vec::new(), f).unwrap();
    for (i, t) in tuples().iter().enumerate() {
        w.write(t, 1_000 + (u64::MAX / 4) * i as u64).unwrap();
    }
    w.into_inner()
}

#[test]
fn keys_formats() {
    for f in [Format::Keys4, Format::Keys13, Format::Keys21] {
        let b = keys_bytes(f);
        assert_eq!(b.len(), 3 * f.key_record_len().unwrap());
        let c = Capture::from_bytes("k", b, Some(f)).unwrap();
        let (recs, err) = read_all(&c);
        assert!(err.is_none());
        assert_eq!(recs.len(), 3);
        for (i, (r, t)) in recs.iter().zip(tuples()).enumerate() {
            assert_eq!(r.wire_len, 0);
            let want_ts = if f == Format::Keys21 {
                1_000 + (u64::MAX / 4) * i as u64
            } else {
                0
            };
            assert_eq!(r.ts_ns, want_ts);
            let want = if f == Format::Keys4 {
                Tuple::v4(t.src[..4].try_into().unwrap(), [0; 4], 0, 0, 0)
            } else {
                t
            };
            assert_eq!(r.body, Body::Tuple(want), "{f}");
        }
    }
    // Byte layout of keys13 is the IPv4 five-tuple key layout, network order.
    let b = keys_bytes(Format::Keys13);
    assert_eq!(
        &b[..13],
        tuples()[0].key(key::KeyKind::FiveTuple).as_bytes()
    );
    assert_eq!(&b[8..10], &1234u16.to_be_bytes());
}

#[test]
fn keys_partial_record() {
    for f in [Format::Keys4, Format::Keys13, Format::Keys21] {
        let mut b = keys_bytes(f);
        b.extend_from_slice(&[7, 7, 7]);
        let size = f.key_record_len().unwrap();
        let c = Capture::from_bytes("p", b, Some(f)).unwrap();
        let (recs, err) = read_all(&c);
        assert_eq!(recs.len(), 3);
        let e = err.unwrap();
        assert_eq!(e.offset, 3 * size as u64);
        assert_eq!(
            e.to_string(),
            format!(
                "p: offset {}: partial {size}-byte key record: 3 trailing bytes",
                3 * size
            )
        );
    }
}

#[test]
fn keys_writer_refuses() {
    assert!(KeysWriter::new(Vec::new(), Format::Pcap).is_err());
    let mut w = KeysWriter::new(Vec::new(), Format::Keys13).unwrap();
    let t = Tuple {
        v6: true,
        ..Tuple::default()
    };
    assert!(w.write(&t, 0).is_err());
}

// ---------------------------------------------------------------- detection and open

#[test]
fn detection() {
    let pcap = pcap_bytes(Endian::Big, false, 1, &[(0, 10, P1)]);
    assert_eq!(
        Capture::from_bytes("noext", pcap.clone(), None)
            .unwrap()
            .format(),
        Format::Pcap
    );
    // A key-trace extension wins over a magic: key traces have no magic of their own.
    let k = Capture::from_bytes("a.keys4", pcap.clone(), None).unwrap();
    assert_eq!(k.format(), Format::Keys4);
    assert_eq!(k.records().filter(|r| r.is_ok()).count(), pcap.len() / 4);
    assert_eq!(
        Capture::from_bytes("dir.x/t.DAT", vec![0; 26], None)
            .unwrap()
            .format(),
        Format::Keys13
    );
    assert_eq!(
        Capture::from_bytes("t.keys21", vec![], None)
            .unwrap()
            .format(),
        Format::Keys21
    );
    assert_eq!(
        Capture::from_bytes("t.keys13", vec![], None)
            .unwrap()
            .format(),
        Format::Keys13
    );
    assert_eq!(
        Capture::from_bytes("t", ng_two_sections(), None)
            .unwrap()
            .format(),
        Format::Pcapng
    );
    // Forced format overrides everything.
    assert_eq!(
        Capture::from_bytes("t.pcap", pcap, Some(Format::Keys4))
            .unwrap()
            .format(),
        Format::Keys4
    );
    let e = Capture::from_bytes("mystery.bin", vec![0; 100], None).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.starts_with("mystery.bin: offset 0: unknown trace format"),
        "{msg}"
    );
    for f in Format::ALL {
        assert!(msg.contains(f.name()), "{msg}");
    }
    assert!(Capture::from_bytes("empty", vec![], None).is_err());
}

#[test]
fn empty_inputs_say_they_are_empty() {
    for format in [None, Some(Format::Pcap), Some(Format::Pcapng)] {
        let e = Capture::from_bytes("e.pcap", vec![], format).unwrap_err();
        assert_eq!(e.to_string(), "e.pcap: offset 0: empty file (0 bytes)");
        let e = Capture::from_reader("-", std::io::empty(), format).unwrap_err();
        assert_eq!(
            e.to_string(),
            "-: offset 0: empty input: stdin ended before its first byte"
        );
    }
    // A key trace may hold no record.
    assert!(Capture::from_bytes("e.keys13", vec![], None).is_ok());
}

#[test]
fn compressed_inputs_say_how_to_decompress() {
    let kinds: [(&[u8], &str, &str); 5] = [
        (&[0x1f, 0x8b, 8, 0], "gzip", "zcat"),
        (&[0x28, 0xb5, 0x2f, 0xfd], "zstd", "zstdcat"),
        (&[0xfd, b'7', b'z', b'X', b'Z', 0], "xz", "xzcat"),
        (b"BZh9", "bzip2", "bzcat"),
        (&[0x04, 0x22, 0x4d, 0x18], "lz4", "lz4cat"),
    ];
    for (magic, method, tool) in kinds {
        let mut b = magic.to_vec();
        b.resize(100, 0);
        for format in [None, Some(Format::Pcap), Some(Format::Pcapng)] {
            let e = Capture::from_bytes("dir/t.pcap.gz", b.clone(), format).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "dir/t.pcap.gz: offset 0: {method}-compressed; netsift reads uncompressed \
                     captures: decompress it first, e.g. `{tool} dir/t.pcap.gz | netsift run -`"
                )
            );
            let r = std::io::Cursor::new(b.clone());
            let e = Capture::from_reader("-", r, format).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "-: offset 0: {method}-compressed; netsift reads uncompressed captures: \
                     decompress it first, e.g. `{tool} FILE | netsift run -`"
                )
            );
        }
        // A name the shell would split is quoted in the hint.
        let e = Capture::from_bytes("my trace's.gz", b.clone(), None).unwrap_err();
        assert!(
            e.to_string()
                .ends_with(&format!("`{tool} 'my trace'\\''s.gz' | netsift run -`")),
            "{e}"
        );
    }
    // "BZh" alone is not bzip2 (a block size digit follows); such bytes stay unknown.
    let e = Capture::from_bytes("b", b"BZhx and more".to_vec(), None).unwrap_err();
    assert!(e.to_string().contains("unknown trace format"), "{e}");
}

#[test]
fn format_names() {
    for f in Format::ALL {
        assert_eq!(f.name().parse::<Format>(), Ok(f));
        assert_eq!(f.to_string(), f.name());
    }
    let e = "pcap2".parse::<Format>().unwrap_err();
    assert_eq!(
        e.to_string(),
        "unknown trace format `pcap2` (expected one of: pcap, pcapng, keys4, keys13, keys21)"
    );
}

#[test]
fn open_files() {
    let dir = testkit::scratch("trace-unit");
    let p = dir.join("a.pcap");
    std::fs::write(
        &p,
        pcap_bytes(Endian::Little, true, 1, &[(5, 10, P1), (6, 60, P2)]),
    )
    .unwrap();
    let c = Capture::open(p.to_str().unwrap(), None).unwrap();
    assert_eq!(c.name(), p.to_str().unwrap());
    assert_eq!(c.records().count(), 2);
    assert_eq!(c.for_each(|_| {}).unwrap(), 2);
    // Empty file: cannot be mapped, read instead; a key trace with no records.
    let q = dir.join("e.keys13");
    std::fs::write(&q, []).unwrap();
    let c = Capture::open(q.to_str().unwrap(), None).unwrap();
    assert_eq!(c.records().count(), 0);
    let missing = dir.join("missing.pcap");
    let e = Capture::open(missing.to_str().unwrap(), None).unwrap_err();
    assert!(matches!(e.kind, TraceErrorKind::Io(_)));
    assert!(e
        .to_string()
        .starts_with(&format!("{}: offset 0: cannot read", missing.display())));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn stream_grows_for_a_record_larger_than_its_buffer() {
    // A record of 2.5 buffers between small ones, in both byte orders, and cut inside it.
    let big = vec![0x5Au8; stream::CHUNK * 5 / 2];
    for e in [Endian::Little, Endian::Big] {
        let bytes = pcap_bytes(e, false, 1, &[(1, 10, P1), (2, 0, &big), (3, 60, P2)]);
        let c = Capture::from_bytes("big.pcap", bytes.clone(), None).unwrap();
        let (recs, err) = read_all(&c);
        assert_eq!((recs.len(), err.is_none()), (3, true));
        assert_eq!(frame(&recs[1]).1.len(), big.len());
        let cut = Capture::from_bytes("big.pcap", bytes[..bytes.len() / 2].to_vec(), None).unwrap();
        let (recs, err) = read_all(&cut);
        assert_eq!(recs.len(), 1);
        assert!(matches!(
            err.map(|e| e.kind),
            Some(TraceErrorKind::TruncatedRecord { .. })
        ));
    }
}

/// The keys4 block path gives the records of the per-record path, as u32 in network order, in
/// blocks of at most KEYS4_BLOCK, and the same error at the same offset for a partial record.
#[test]
fn keys4_blocks_equal_records() {
    for (n, tail) in [
        (0usize, 0usize),
        (1, 0),
        (4096, 0),
        (10_000, 0),
        (5_000, 3),
        (0, 2),
    ] {
        let mut b: Vec<u8> = (0..n as u32)
            .flat_map(|i| i.wrapping_mul(0x9e37_79b9).to_be_bytes())
            .collect();
        b.extend(std::iter::repeat_n(9u8, tail));
        let c = Capture::from_bytes("k", b, Some(Format::Keys4)).unwrap();
        let mut per_record = Vec::new();
        let want_err = c
            .for_each(|r| match r.body {
                Body::Tuple(t) => per_record.push(t.key(key::KeyKind::Src).prefix_u32()),
                Body::Frame { .. } => unreachable!(),
            })
            .err()
            .map(|e| e.to_string());
        let mut blocks = Vec::new();
        let res = c
            .for_each_keys4(|blk| {
                assert!(!blk.is_empty() && blk.len() <= KEYS4_BLOCK);
                blocks.extend_from_slice(blk);
            })
            .unwrap();
        assert_eq!(blocks, per_record, "{n} records");
        match res {
            Ok(count) => {
                assert_eq!(count, n as u64);
                assert!(want_err.is_none());
            }
            Err(e) => assert_eq!(Some(e.to_string()), want_err),
        }
        assert_eq!(blocks.len(), n);
    }
    let c = Capture::from_bytes("k", keys_bytes(Format::Keys13), Some(Format::Keys13)).unwrap();
    assert!(c.for_each_keys4(|_| {}).is_none());
}
