//! Property tests: what the writers write, the readers read back exactly; random bytes and
//! random truncations and bit flips of valid files never panic, always terminate, and read the
//! same through `records()` and `for_each`.

use proptest::prelude::*;
use trace::write::{Endian, KeysWriter, PcapWriter, PcapngWriter};
use trace::{Body, Capture, Format, Record, Tuple};

const FORMATS: [Option<Format>; 6] = [
    None,
    Some(Format::Pcap),
    Some(Format::Pcapng),
    Some(Format::Keys4),
    Some(Format::Keys13),
    Some(Format::Keys21),
];

/// Read everything both ways; they must agree. Returns the records delivered (as owned data)
/// and whether an error ended the stream.
fn check(name: &str, bytes: Vec<u8>, format: Option<Format>) -> Option<(Vec<Pkt>, bool)> {
    let len = bytes.len() as u64;
    let cap = Capture::from_bytes(name, bytes, format).ok()?;
    let mut recs: Vec<Record<'_>> = Vec::new();
    let mut err = None;
    for r in cap.records() {
        match r {
            Ok(r) => recs.push(r),
            Err(e) => err = Some(e),
        }
        // Every record consumes at least 4 bytes (keys4) and pcap/pcapng at least 12.
        assert!(recs.len() as u64 <= len / 4 + 1, "runaway loop");
    }
    let mut seen = Vec::new();
    let fe = cap.for_each(|r| seen.push(r));
    assert_eq!(seen, recs);
    match (&fe, &err) {
        (Ok(n), None) => assert_eq!(*n, recs.len() as u64),
        (Err(a), Some(b)) => {
            assert_eq!(a.to_string(), b.to_string());
            assert!(a.offset <= len);
            assert!(a
                .to_string()
                .starts_with(&format!("{name}: offset {}: ", a.offset)));
        }
        _ => panic!("for_each {fe:?} vs records() {err:?}"),
    }
    let owned = recs
        .iter()
        .map(|r| match r.body {
            Body::Frame { data, .. } => (r.ts_ns, r.wire_len, data.to_vec()),
            Body::Tuple(t) => (r.ts_ns, r.wire_len, t.src[..4].to_vec()),
        })
        .collect();
    Some((owned, err.is_some()))
}

type Pkt = (u64, u32, Vec<u8>);

fn pkts() -> impl Strategy<Value = Vec<Pkt>> {
    prop::collection::vec(
        (
            0u64..u32::MAX as u64 * 1_000_000_000,
            any::<u32>(),
            prop::collection::vec(any::<u8>(), 0..80),
        ),
        0..12,
    )
}

fn endian() -> impl Strategy<Value = Endian> {
    prop_oneof![Just(Endian::Little), Just(Endian::Big)]
}

fn pcap(e: Endian, nsec: bool, p: &[Pkt]) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new(), 1, 65535, e, nsec).unwrap();
    for (ts, wire, d) in p {
        w.write_packet(*ts, *wire, d).unwrap();
    }
    w.into_inner()
}

/// Packets spread over two sections (the second in byte order `e2`) and two interfaces.
fn pcapng(e: Endian, e2: Endian, p: &[Pkt]) -> Vec<u8> {
    let mut w = PcapngWriter::new(Vec::new(), e).unwrap();
    w.interface(1, 0, None, None).unwrap();
    w.interface(101, 0, Some(9), None).unwrap();
    let half = p.len() / 2;
    for (i, (ts, wire, d)) in p.iter().enumerate() {
        if i == half {
            w.section(e2).unwrap();
            w.interface(1, 0, Some(9), None).unwrap();
        }
        w.enhanced_packet((i < half && i % 2 == 1) as u32, *ts, *wire, d)
            .unwrap();
    }
    w.into_inner()
}

fn keys(f: Format, p: &[Pkt]) -> Vec<u8> {
    let mut w = KeysWriter::new(Vec::new(), f).unwrap();
    for (ts, wire, _) in p {
        let t = Tuple::v4(wire.to_be_bytes(), [1, 2, 3, 4], 5, 6, 7);
        w.write(&t, *ts).unwrap();
    }
    w.into_inner()
}

/// All valid files for one packet list, with the packets each must read back as.
fn valid_files(e: Endian, e2: Endian, p: &[Pkt]) -> Vec<(&'static str, Vec<u8>, Vec<Pkt>)> {
    let us = |ts: u64| ts / 1000 * 1000;
    // pcap reports orig_len as written (as tshark); pcapng never less than what was captured.
    let wire = |w: u32, d: &[u8]| w.max(d.len() as u32);
    vec![
        (
            "a.pcap",
            pcap(e, false, p),
            p.iter().map(|(t, w, d)| (us(*t), *w, d.clone())).collect(),
        ),
        (
            "b.pcap",
            pcap(e, true, p),
            p.iter().map(|(t, w, d)| (*t, *w, d.clone())).collect(),
        ),
        ("c.pcapng", pcapng(e, e2, p), {
            let half = p.len() / 2;
            p.iter()
                .enumerate()
                // Interface 0 of the first section has µs units: ts counts µs there.
                .map(|(i, (t, w, d))| {
                    let ns = if i < half && i % 2 == 0 {
                        t.saturating_mul(1000)
                    } else {
                        *t
                    };
                    (ns, wire(*w, d), d.clone())
                })
                .collect()
        }),
        (
            "d.keys4",
            keys(Format::Keys4, p),
            p.iter()
                .map(|(_, w, _)| (0, 0, w.to_be_bytes().to_vec()))
                .collect(),
        ),
        (
            "e.keys13",
            keys(Format::Keys13, p),
            p.iter()
                .map(|(_, w, _)| (0, 0, w.to_be_bytes().to_vec()))
                .collect(),
        ),
        (
            "f.keys21",
            keys(Format::Keys21, p),
            p.iter()
                .map(|(t, w, _)| (*t, 0, w.to_be_bytes().to_vec()))
                .collect(),
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, rng_seed: proptest::test_runner::RngSeed::Fixed(0x5eed), ..ProptestConfig::default() })]

    #[test]
    fn written_files_read_back(p in pkts(), e in endian(), e2 in endian()) {
        for (name, bytes, want) in valid_files(e, e2, &p) {
            let (got, failed) = check(name, bytes, None).expect("valid file opens");
            prop_assert!(!failed, "{}", name);
            prop_assert_eq!(got, want, "{}", name);
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600), magic in 0usize..6) {
        // Give random bytes a real magic (and a pcap version that is read: 2.4, 2.2, 2.3)
        // sometimes so the parsers get past the header.
        let mut b = bytes;
        let m: &[u8] = [
            &[0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0][..],
            &[0x0a, 0x0d, 0x0d, 0x0a],
            &[],
            &[0xa1, 0xb2, 0xc3, 0xd4, 0, 2, 0, 2],
            &[0x34, 0xcd, 0xb2, 0xa1, 2, 0, 3, 0],
            &[0xa1, 0xb2, 0xcd, 0x34, 0, 2, 0, 4],
        ][magic];
        if b.len() >= m.len() {
            b[..m.len()].copy_from_slice(m);
        }
        for f in FORMATS {
            check("r", b.clone(), f);
        }
    }

    #[test]
    fn mutated_files_never_panic(
        p in pkts(),
        e in endian(),
        e2 in endian(),
        cut in any::<prop::sample::Index>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 0..6),
    ) {
        for (name, bytes, want) in valid_files(e, e2, &p) {
            // Truncation alone: a prefix of the packets, then at most one error.
            let n = cut.index(bytes.len() + 1);
            if let Some((got, _)) = check(name, bytes[..n].to_vec(), None) {
                prop_assert!(got.len() <= want.len());
                prop_assert_eq!(&got[..], &want[..got.len()]);
            }
            // Bit flips: anything may happen except a panic or a hang.
            let mut m = bytes.clone();
            if !m.is_empty() {
                for (i, bit) in &flips {
                    let k = i.index(m.len());
                    m[k] ^= 1 << bit;
                }
            }
            for f in FORMATS {
                check(name, m.clone(), f);
            }
        }
    }
}
