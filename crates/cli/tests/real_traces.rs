//! netsift's readers, parser and `stats` against an independent implementation (pcap-parser +
//! etherparse, see `common`) on every real capture in ../shared/traces: packet counts, bytes,
//! keyed packets and distinct flows of every key kind must agree exactly.

mod common;

use key::{KeyKind, KeySet};
use netsift::stats::file_stats;
use trace::Capture;

#[test]
fn stats_agree_with_pcap_parser_and_etherparse() {
    let Some(files) = common::real_traces() else {
        return;
    };
    assert!(
        files.len() >= 8,
        "expected the real captures, found {files:?}"
    );
    for path in files {
        let frames = common::peer_frames(&path);
        let mut sets: [KeySet; 5] = Default::default();
        let mut keyed = 0u64;
        let mut bytes = 0u64;
        for f in &frames {
            // Wire length = the record's original length (tshark's frame.len), whatever was
            // captured.
            bytes += u64::from(f.orig_len);
            if let Some(t) = common::peer_tuple(f.link, &f.data) {
                keyed += 1;
                for (s, k) in sets.iter_mut().zip(KeyKind::ALL) {
                    s.insert(t.key(k));
                }
            }
        }
        let cap = Capture::open(path.to_str().unwrap(), None).unwrap();
        let st = file_stats(&cap, 5, KeyKind::FiveTuple);
        let name = path.file_name().unwrap().to_string_lossy();
        assert_eq!(st.error, None, "{name}");
        assert_eq!(st.packets, frames.len() as u64, "{name}: packets");
        assert_eq!(
            st.classified(),
            st.packets,
            "{name}: every packet classified once"
        );
        assert_eq!(st.bytes, bytes, "{name}: bytes (wire lengths)");
        assert_eq!(st.classes.keyed(), keyed, "{name}: keyed packets");
        let ours = [
            st.flows.src,
            st.flows.dst,
            st.flows.pair,
            st.flows.four_tuple,
            st.flows.five_tuple,
        ];
        let peer: Vec<u64> = sets.iter().map(|s| s.len() as u64).collect();
        assert_eq!(
            ours.to_vec(),
            peer,
            "{name}: distinct flows src/dst/pair/4t/5t"
        );
        eprintln!(
            "{name}: {} packets, {} keyed, flows {:?} — agree",
            st.packets, keyed, ours
        );
    }
}

#[test]
fn per_packet_tuples_agree() {
    let Some(files) = common::real_traces() else {
        return;
    };
    for path in files {
        let frames = common::peer_frames(&path);
        let (mut same, mut compared) = (0, 0);
        for f in &frames {
            let ours = wire::parse(f.link, &f.data);
            if let Some(t) = common::peer_tuple(f.link, &f.data) {
                compared += 1;
                assert!(
                    matches!(ours.class, wire::Class::Ipv4 | wire::Class::Ipv6),
                    "{}: etherparse found IP, we say {:?}",
                    path.display(),
                    ours.class
                );
                assert_eq!(ours.tuple, t, "{}", path.display());
                same += 1;
            }
        }
        assert_eq!(same, compared);
    }
}

/// tcpreplay_test.pcap's 16 MPLS packets (6 IPv4 over MPLS, 10 Ethernet pseudowires with control
/// word, 802.1Q and IPv4) are IPv4: 166 IPv4 packets, as tshark counts (150 before MPLS was
/// decoded, the 16 counted as non_ip). The layers are counted per packet, the same in both
/// tunnel modes (MPLS is below IP).
#[test]
fn tcpreplay_mpls_is_ip() {
    let Some(path) = testkit::trace("tcpreplay_test.pcap") else {
        return;
    };
    let cap = Capture::open(path.to_str().unwrap(), None).unwrap();
    for tunnel in wire::Tunnel::ALL {
        let st = netsift::stats::file_stats_with(&cap, 5, KeyKind::FiveTuple, tunnel);
        assert_eq!(st.packets, 179);
        assert_eq!(
            (st.classes.ipv4, st.classes.ipv6, st.classes.non_ip),
            (166, 10, 3)
        );
        assert_eq!(st.classified(), st.packets);
        assert_eq!(st.encapsulations.get(wire::Layer::Mpls), 16);
        assert_eq!(st.encapsulations.get(wire::Layer::Pseudowire), 10);
        assert_eq!(st.encapsulations.plain, 179 - 16);
        let json = serde_json::to_value(&st).unwrap();
        assert_eq!(json["encapsulations"]["mpls"], 16);
        assert_eq!(json["tunnel"], tunnel.name());
    }
}
