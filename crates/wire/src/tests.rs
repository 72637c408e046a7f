//! Unit tests with hand-built frames, and property tests.

use super::*;
use crate::ip::has_ports;
use crate::linktype as lt;
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// Frame builders (tests may allocate).

const SRC4: [u8; 4] = [10, 1, 2, 3];
const DST4: [u8; 4] = [192, 168, 7, 9];
const SRC6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const DST6: [u8; 16] = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];

fn tcp(sp: u16, dp: u16) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    t[..2].copy_from_slice(&sp.to_be_bytes());
    t[2..4].copy_from_slice(&dp.to_be_bytes());
    t[12] = 5 << 4;
    t[13] = 0x02; // SYN
    t
}

fn udp(sp: u16, dp: u16) -> Vec<u8> {
    let mut t = vec![0u8; 8];
    t[..2].copy_from_slice(&sp.to_be_bytes());
    t[2..4].copy_from_slice(&dp.to_be_bytes());
    t[4..6].copy_from_slice(&8u16.to_be_bytes());
    t
}

/// An IPv4 packet; `opts` must be a multiple of 4 bytes; `frag` is the raw flags/offset field.
fn ipv4(proto: u8, opts: &[u8], frag: u16, l4: &[u8]) -> Vec<u8> {
    assert_eq!(opts.len() % 4, 0);
    let ihl = 20 + opts.len();
    let total = (ihl + l4.len()) as u16;
    let mut p = vec![0u8; 20];
    p[0] = 0x40 | (ihl / 4) as u8;
    p[2..4].copy_from_slice(&total.to_be_bytes());
    p[6..8].copy_from_slice(&frag.to_be_bytes());
    p[8] = 64;
    p[9] = proto;
    p[12..16].copy_from_slice(&SRC4);
    p[16..20].copy_from_slice(&DST4);
    p.extend_from_slice(opts);
    p.extend_from_slice(l4);
    p
}

fn ipv6(next: u8, rest: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 40];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&(rest.len() as u16).to_be_bytes());
    p[6] = next;
    p[7] = 64;
    p[8..24].copy_from_slice(&SRC6);
    p[24..40].copy_from_slice(&DST6);
    p.extend_from_slice(rest);
    p
}

/// A generic IPv6 extension header (hop-by-hop style) of `(units + 1) * 8` bytes.
fn ext(next: u8, units: u8) -> Vec<u8> {
    let mut e = vec![0u8; (usize::from(units) + 1) * 8];
    e[0] = next;
    e[1] = units;
    e
}

fn frag6(next: u8, offset: u16, more: bool) -> Vec<u8> {
    let mut e = vec![0u8; 8];
    e[0] = next;
    e[2..4].copy_from_slice(&((offset << 3) | u16::from(more)).to_be_bytes());
    e[4..8].copy_from_slice(&0xdead_beef_u32.to_be_bytes());
    e
}

/// An Authentication Header with `len_field` (total (len_field + 2) * 4 bytes).
fn ah(next: u8, len_field: u8) -> Vec<u8> {
    let mut e = vec![0u8; (usize::from(len_field) + 2) * 4];
    e[0] = next;
    e[1] = len_field;
    e
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn eth_tagged(et: u16, tags: &[u16], payload: &[u8]) -> Vec<u8> {
    let mut f = vec![
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb,
    ];
    let mut types: Vec<u16> = tags.to_vec();
    types.push(et);
    for (i, t) in types.iter().enumerate() {
        f.extend_from_slice(&t.to_be_bytes());
        if i + 1 < types.len() {
            f.extend_from_slice(&(100 + i as u16).to_be_bytes()); // TCI: VLAN id
        }
    }
    f.extend_from_slice(payload);
    f
}

fn eth(et: u16, payload: &[u8]) -> Vec<u8> {
    eth_tagged(et, &[], payload)
}

fn ethertype_of(ip: &[u8]) -> u16 {
    if ip.first().map(|b| b >> 4) == Some(6) {
        0x86dd
    } else {
        0x0800
    }
}

/// Wrap an IP packet in link type `link` (native, in the writer's sense, for NULL: little-endian).
fn wrap(link: u32, ip: &[u8]) -> Vec<u8> {
    let v6 = ip.first().map(|b| b >> 4) == Some(6);
    let et = ethertype_of(ip);
    match link {
        lt::ETHERNET => eth(et, ip),
        lt::LINUX_SLL => {
            let mut h = vec![0u8; 16];
            h[1] = 4; // outgoing
            h[2..4].copy_from_slice(&1u16.to_be_bytes()); // ARPHRD_ETHER
            h[4..6].copy_from_slice(&6u16.to_be_bytes());
            h[14..16].copy_from_slice(&et.to_be_bytes());
            cat(&[&h, ip])
        }
        lt::LINUX_SLL2 => {
            let mut h = vec![0u8; 20];
            h[..2].copy_from_slice(&et.to_be_bytes());
            h[8..10].copy_from_slice(&1u16.to_be_bytes());
            cat(&[&h, ip])
        }
        lt::NULL => {
            let fam: u32 = if v6 { 30 } else { 2 };
            cat(&[&fam.to_le_bytes(), ip])
        }
        lt::LOOP => {
            let fam: u32 = if v6 { 24 } else { 2 };
            cat(&[&fam.to_be_bytes(), ip])
        }
        // PPP with the HDLC-like address and control, on both PPP link types.
        lt::PPP | lt::PPP_HDLC => cat(&[&[0xff, 0x03, 0x00, if v6 { 0x57 } else { 0x21 }], ip]),
        lt::C_HDLC => cat(&[&[0x0f, 0x00], &et.to_be_bytes(), ip]),
        // PPPoE session header (its length counts the PPP protocol), then PPP.
        lt::PPP_ETHER => {
            let len = ((2 + ip.len()) as u16).to_be_bytes();
            let ppp = [0x00, if v6 { 0x57 } else { 0x21 }];
            cat(&[&[0x11, 0x00, 0x12, 0x34], &len, &ppp, ip])
        }
        // pppd's direction in place of the address (1: sent).
        lt::PPP_PPPD => cat(&[&[0x01, 0x03, 0x00, if v6 { 0x57 } else { 0x21 }], ip]),
        // A direction byte, then PPP or Cisco HDLC.
        lt::PPP_WITH_DIR => cat(&[&[0x00, 0xff, 0x03, 0x00, if v6 { 0x57 } else { 0x21 }], ip]),
        lt::C_HDLC_WITH_DIR => cat(&[&[0x01, 0x0f, 0x00], &et.to_be_bytes(), ip]),
        _ => ip.to_vec(),
    }
}

fn link_len(link: u32) -> usize {
    match link {
        lt::ETHERNET => 14,
        lt::LINUX_SLL => 16,
        lt::LINUX_SLL2 => 20,
        lt::NULL | lt::LOOP | lt::PPP | lt::PPP_HDLC | lt::C_HDLC | lt::PPP_PPPD => 4,
        lt::PPP_WITH_DIR | lt::C_HDLC_WITH_DIR => 5,
        lt::PPP_ETHER => 8,
        _ => 0,
    }
}

/// Link types able to carry both families.
const BOTH: [u32; 15] = [
    lt::ETHERNET,
    lt::RAW,
    lt::RAW_12,
    lt::RAW_14,
    lt::LINUX_SLL,
    lt::LINUX_SLL2,
    lt::NULL,
    lt::LOOP,
    lt::PPP,
    lt::PPP_HDLC,
    lt::C_HDLC,
    lt::PPP_ETHER,
    lt::PPP_PPPD,
    lt::PPP_WITH_DIR,
    lt::C_HDLC_WITH_DIR,
];

/// Invariants every view satisfies, whatever the input.
fn check_invariants(v: &View) {
    if !v.class.is_ip() {
        assert_eq!(v.tuple, Tuple::default(), "{v:?}");
        assert!(!v.l4_cut);
    }
    if v.class == Class::Ipv4 {
        assert!(!v.tuple.v6);
        assert_eq!(v.tuple.src[4..], [0; 12]);
        assert_eq!(v.tuple.dst[4..], [0; 12]);
    }
    if v.class == Class::Ipv6 {
        assert!(v.tuple.v6);
    }
    if v.l4_cut {
        assert_eq!((v.tuple.sport, v.tuple.dport), (0, 0), "{v:?}");
    }
    if v.tuple.sport != 0 || v.tuple.dport != 0 {
        assert!(has_ports(v.tuple.proto), "{v:?}");
    }
}

fn p(link: u32, f: &[u8]) -> View {
    let v = parse(link, f);
    check_invariants(&v);
    v
}

/// Parse in a tunnel mode, checking the invariants and that the modes agree where they must.
fn pw(link: u32, f: &[u8], mode: Tunnel) -> View {
    let v = parse_with(link, f, mode);
    check_invariants(&v);
    if mode == Tunnel::Outer {
        assert_eq!(v, parse(link, f));
    }
    v
}

fn assert_v4(v: View, proto: u8, sport: u16, dport: u16, cut: bool) {
    assert_eq!(v.class, Class::Ipv4, "{v:?}");
    assert_eq!(v.tuple, Tuple::v4(SRC4, DST4, sport, dport, proto), "{v:?}");
    assert_eq!(v.l4_cut, cut, "{v:?}");
}

fn assert_v6(v: View, proto: u8, sport: u16, dport: u16, cut: bool) {
    assert_eq!(v.class, Class::Ipv6, "{v:?}");
    let want = Tuple {
        v6: true,
        src: SRC6,
        dst: DST6,
        sport,
        dport,
        proto,
    };
    assert_eq!(v.tuple, want, "{v:?}");
    assert_eq!(v.l4_cut, cut, "{v:?}");
}

// ---------------------------------------------------------------------------------------------
// Names and API.

#[test]
fn class_names_match_serde_and_order() {
    for (i, c) in Class::ALL.iter().enumerate() {
        assert_eq!(c.index(), i);
        let json = format!("\"{}\"", c.name());
        let ser = serde_json::to_string(c).expect("serialize");
        assert_eq!(ser, json);
        assert_eq!(c.to_string(), c.name());
    }
    assert!(Class::Ipv4.is_ip() && Class::Ipv6.is_ip() && !Class::Truncated.is_ip());
}

#[test]
fn linktype_names() {
    assert_eq!(lt::name(1), "ethernet");
    assert_eq!(lt::name(101), "raw");
    assert_eq!(lt::name(12), "raw");
    assert_eq!(lt::name(14), "raw");
    assert_eq!(lt::name(0), "null");
    assert_eq!(lt::name(108), "loop");
    assert_eq!(lt::name(113), "linux_sll");
    assert_eq!(lt::name(276), "linux_sll2");
    assert_eq!(lt::name(228), "ipv4");
    assert_eq!(lt::name(229), "ipv6");
    assert_eq!(lt::name(9), "ppp");
    assert_eq!(lt::name(50), "ppp_hdlc");
    assert_eq!(lt::name(104), "c_hdlc");
    assert_eq!(lt::name(105), "unknown");
    for l in lt::SUPPORTED {
        assert!(lt::is_supported(l));
        assert_ne!(lt::name(l), "unknown");
    }
    assert!(!lt::is_supported(105) && !lt::is_supported(u32::MAX));
}

#[test]
fn parse_key_builds_keys() {
    let f = eth(0x0800, &ipv4(6, &[], 0, &tcp(1234, 80)));
    let (c, k) = parse_key(lt::ETHERNET, &f, KeyKind::FiveTuple);
    assert_eq!(c, Class::Ipv4);
    assert_eq!(
        k.as_bytes(),
        &[10, 1, 2, 3, 192, 168, 7, 9, 0x04, 0xd2, 0, 80, 6]
    );
    let (c, k) = parse_key(lt::ETHERNET, &f, KeyKind::Src);
    assert_eq!((c, k), (Class::Ipv4, key::FlowKey::from_u32(0x0a01_0203)));
    let arp = eth(0x0806, &[0u8; 28]);
    assert_eq!(
        parse_key(lt::ETHERNET, &arp, KeyKind::FiveTuple),
        (Class::NonIp, key::FlowKey::EMPTY)
    );
    let f6 = eth(0x86dd, &ipv6(17, &udp(53, 5353)));
    let (c, k) = parse_key(lt::ETHERNET, &f6, KeyKind::FiveTuple);
    assert_eq!((c, k.len()), (Class::Ipv6, 37));
}

// ---------------------------------------------------------------------------------------------
// Link layers.

#[test]
fn every_link_type_carries_both_families() {
    let v4 = ipv4(6, &[], 0, &tcp(1000, 443));
    let v6 = ipv6(17, &udp(5000, 53));
    for link in BOTH {
        assert_v4(p(link, &wrap(link, &v4)), 6, 1000, 443, false);
        assert_v6(p(link, &wrap(link, &v6)), 17, 5000, 53, false);
    }
    assert_v4(p(lt::IPV4, &v4), 6, 1000, 443, false);
    assert_v6(p(lt::IPV6, &v6), 17, 5000, 53, false);
    // The single-family link types reject the other family's header as a bad version.
    assert_eq!(p(lt::IPV4, &v6).class, Class::Malformed);
    assert_eq!(p(lt::IPV6, &v4).class, Class::Malformed);
}

#[test]
fn unsupported_link_types() {
    let f = eth(0x0800, &ipv4(6, &[], 0, &tcp(1, 2)));
    for link in [2, 10, 105, 107, 127, 147, 220, 0xffff_ffff] {
        assert_eq!(p(link, &f).class, Class::Unsupported);
        assert_eq!(p(link, &[]).class, Class::Unsupported);
    }
}

#[test]
fn raw_version_nibble() {
    assert_eq!(p(lt::RAW, &[]).class, Class::Truncated);
    assert_eq!(p(lt::RAW, &[0x45]).class, Class::Truncated);
    assert_eq!(p(lt::RAW, &[0x60]).class, Class::Truncated);
    for nib in [0u8, 1, 5, 7, 15] {
        let mut f = ipv4(6, &[], 0, &tcp(1, 2));
        f[0] = (nib << 4) | 5;
        assert_eq!(p(lt::RAW, &f).class, Class::Malformed, "nibble {nib}");
        assert_eq!(p(lt::RAW, &f[..1]).class, Class::Malformed, "nibble {nib}");
    }
}

#[test]
fn null_and_loop_families() {
    let v4 = ipv4(17, &[], 0, &udp(67, 68));
    let v6 = ipv6(6, &tcp(22, 5555));
    // NULL accepts either byte order.
    for fam in [2u32.to_le_bytes(), 2u32.to_be_bytes()] {
        assert_v4(p(lt::NULL, &cat(&[&fam, &v4])), 17, 67, 68, false);
    }
    for af6 in [24u32, 28, 30] {
        for fam in [af6.to_le_bytes(), af6.to_be_bytes()] {
            assert_v6(p(lt::NULL, &cat(&[&fam, &v6])), 6, 22, 5555, false);
        }
        // LOOP is network order only: a little-endian family is not recognised.
        assert_v6(
            p(lt::LOOP, &cat(&[&af6.to_be_bytes(), &v6])),
            6,
            22,
            5555,
            false,
        );
        assert_eq!(
            p(lt::LOOP, &cat(&[&af6.to_le_bytes(), &v6])).class,
            Class::NonIp
        );
    }
    assert_eq!(
        p(lt::LOOP, &cat(&[&2u32.to_le_bytes(), &v4])).class,
        Class::NonIp
    );
    // Unknown families (AF_UNSPEC, AF_APPLETALK = 16, AF_INET6 of Linux = 10) are not IP.
    for fam in [0u32, 10, 16, 0xffff_ffff] {
        assert_eq!(
            p(lt::NULL, &cat(&[&fam.to_le_bytes(), &v4])).class,
            Class::NonIp
        );
    }
    // Header cut.
    for n in 0..4 {
        assert_eq!(p(lt::NULL, &[2, 0, 0, 0][..n]).class, Class::Truncated);
        assert_eq!(p(lt::LOOP, &[0, 0, 0, 2][..n]).class, Class::Truncated);
    }
    assert_eq!(p(lt::NULL, &[2, 0, 0, 0]).class, Class::Truncated);
}

#[test]
fn sll_and_sll2() {
    let v4 = ipv4(6, &[], 0, &tcp(1, 2));
    let f = wrap(lt::LINUX_SLL, &v4);
    for n in 0..16 {
        assert_eq!(p(lt::LINUX_SLL, &f[..n]).class, Class::Truncated);
    }
    let mut arp = f.clone();
    arp[14..16].copy_from_slice(&0x0806u16.to_be_bytes());
    assert_eq!(p(lt::LINUX_SLL, &arp).class, Class::NonIp);
    // SLL protocol 0x0004 (802.2 LLC frames) is not IP.
    arp[14..16].copy_from_slice(&0x0004u16.to_be_bytes());
    assert_eq!(p(lt::LINUX_SLL, &arp).class, Class::NonIp);
    // A VLAN tag left in place by the kernel is walked.
    let mut tagged = f[..14].to_vec();
    tagged.extend_from_slice(&0x8100u16.to_be_bytes());
    tagged.extend_from_slice(&[0, 42, 0x08, 0x00]);
    tagged.extend_from_slice(&v4);
    assert_v4(p(lt::LINUX_SLL, &tagged), 6, 1, 2, false);

    let f2 = wrap(lt::LINUX_SLL2, &v4);
    for n in 0..20 {
        assert_eq!(p(lt::LINUX_SLL2, &f2[..n]).class, Class::Truncated);
    }
    let mut lldp = f2.clone();
    lldp[..2].copy_from_slice(&0x88ccu16.to_be_bytes());
    assert_eq!(p(lt::LINUX_SLL2, &lldp).class, Class::NonIp);
}

#[test]
fn ppp_and_cisco_hdlc() {
    let v4 = ipv4(6, &[], 0, &tcp(1000, 443));
    let v6 = ipv6(17, &udp(5000, 53));
    for link in [lt::PPP, lt::PPP_HDLC] {
        // Without address and control, and with the protocol compressed to one byte.
        assert_v4(p(link, &cat(&[&[0x00, 0x21], &v4])), 6, 1000, 443, false);
        assert_v6(p(link, &cat(&[&[0x57], &v6])), 17, 5000, 53, false);
        assert_v4(
            p(link, &cat(&[&[0xff, 0x03, 0x21], &v4])),
            6,
            1000,
            443,
            false,
        );
        // MPLS (unicast and multicast) over PPP.
        for proto in [0x81u8, 0x83] {
            let f = cat(&[&[0xff, 0x03, 0x02, proto], &[0, 0, 0x11, 64], &v4]);
            let v = p(link, &f);
            assert_v4(v, 6, 1000, 443, false);
            assert_eq!(v.encap, Encap::NONE.with(Layer::Mpls));
        }
        // LCP, IPCP, CCP: not IP.
        for proto in [[0xc0, 0x21], [0x80, 0x21], [0x80, 0xfd]] {
            let f = cat(&[&[0xff, 0x03], &proto, &[1, 1, 0, 4]]);
            assert_eq!(p(link, &f).class, Class::NonIp);
        }
        // An address with a control byte other than 0x03: malformed on PPP; on PPP in HDLC
        // framing read past, as tcpdump's ppp_hdlc_if_print does. Cut inside the protocol.
        let odd_control = p(link, &cat(&[&[0xff, 0x05, 0x00, 0x21], &v4]));
        if link == lt::PPP {
            assert_eq!(odd_control.class, Class::Malformed);
        } else {
            assert_v4(odd_control, 6, 1000, 443, false);
        }
        for cut in [
            &[][..],
            &[0xff],
            &[0xff, 0x03],
            &[0xff, 0x03, 0x00],
            &[0x00],
        ] {
            assert_eq!(p(link, cut).class, Class::Truncated, "{cut:02x?}");
        }
    }
    // Cisco HDLC, on its own link type and inside PPP_HDLC (first byte 0x0f or 0x8f).
    for link in [lt::C_HDLC, lt::PPP_HDLC] {
        for addr in [0x0f, 0x8f] {
            assert_v4(
                p(link, &cat(&[&[addr, 0, 0x08, 0x00], &v4])),
                6,
                1000,
                443,
                false,
            );
            assert_v6(
                p(link, &cat(&[&[addr, 0, 0x86, 0xdd], &v6])),
                17,
                5000,
                53,
                false,
            );
            // SLARP and CDP keepalives are not IP; MPLS and bridged Ethernet are looked into.
            for et in [0x8035u16, 0x2000] {
                let f = cat(&[&[addr, 0], &et.to_be_bytes(), &[0u8; 20]]);
                assert_eq!(p(link, &f).class, Class::NonIp);
            }
            let f = cat(&[&[addr, 0, 0x88, 0x47], &[0, 0, 0x11, 64], &v4]);
            assert_v4(p(link, &f), 6, 1000, 443, false);
            let f = cat(&[&[addr, 0, 0x65, 0x58], &eth(0x86dd, &v6)]);
            assert_v6(p(link, &f), 17, 5000, 53, false);
            for n in 0..4 {
                assert_eq!(p(link, &[addr, 0, 0x08, 0x00][..n]).class, Class::Truncated);
            }
        }
    }
    // Cisco HDLC's address and control bytes are not checked.
    assert_v4(
        p(lt::C_HDLC, &cat(&[&[0xff, 0x03, 0x08, 0x00], &v4])),
        6,
        1000,
        443,
        false,
    );
}

#[test]
fn ethernet_non_ip() {
    let body = [0u8; 46];
    // ARP, LLDP, PPPoE discovery, 802.3 length fields (incl. 0 and 1500).
    for et in [0x0806u16, 0x88cc, 0x8863, 0x0000, 0x002e, 0x05dc, 0x05ff] {
        assert_eq!(
            p(lt::ETHERNET, &eth(et, &body)).class,
            Class::NonIp,
            "{et:#x}"
        );
        // Even behind a VLAN tag.
        assert_eq!(
            p(lt::ETHERNET, &eth_tagged(et, &[0x8100], &body)).class,
            Class::NonIp
        );
    }
    for n in 0..14 {
        assert_eq!(
            p(lt::ETHERNET, &eth(0x0806, &body)[..n]).class,
            Class::Truncated
        );
    }
}

#[test]
fn vlan_stacks() {
    let v4 = ipv4(17, &[], 0, &udp(111, 222));
    let v6 = ipv6(6, &tcp(333, 444));
    let stacks: [&[u16]; 6] = [
        &[0x8100],
        &[0x88a8, 0x8100],
        &[0x9100, 0x8100],
        &[0x9100, 0x88a8, 0x8100],
        &[0x8100; 7],
        &[0x8100; MAX_VLAN_TAGS],
    ];
    for tags in stacks {
        assert_v4(
            p(lt::ETHERNET, &eth_tagged(0x0800, tags, &v4)),
            17,
            111,
            222,
            false,
        );
        assert_v6(
            p(lt::ETHERNET, &eth_tagged(0x86dd, tags, &v6)),
            6,
            333,
            444,
            false,
        );
        // Cut inside the tags.
        let f = eth_tagged(0x0800, tags, &v4);
        for n in 14..14 + 4 * tags.len() {
            assert_eq!(p(lt::ETHERNET, &f[..n]).class, Class::Truncated, "{n}");
        }
    }
    // One more tag than the bound.
    let f = eth_tagged(0x0800, &[0x8100; MAX_VLAN_TAGS + 1], &v4);
    assert_eq!(p(lt::ETHERNET, &f).class, Class::Malformed);
}

// ---------------------------------------------------------------------------------------------
// IPv4.

#[test]
fn ipv4_tcp_udp_sctp_dccp_udplite_take_ports() {
    for proto in [6u8, 17, 33, 132, 136] {
        let f = eth(0x0800, &ipv4(proto, &[], 0, &tcp(4321, 8080)));
        assert_v4(p(lt::ETHERNET, &f), proto, 4321, 8080, false);
    }
}

#[test]
fn icmp_and_other_protocols_have_no_ports() {
    // ICMP echo, IGMP, GRE, IP-in-IP (not decapsulated), OSPF.
    for proto in [1u8, 2, 47, 4, 41, 89] {
        let f = eth(
            0x0800,
            &ipv4(proto, &[], 0, &[8, 0, 0x12, 0x34, 0, 1, 0, 1]),
        );
        assert_v4(p(lt::ETHERNET, &f), proto, 0, 0, false);
        // Not "cut" even with no L4 captured at all: there were no ports to read.
        assert_v4(p(lt::ETHERNET, &f[..34]), proto, 0, 0, false);
    }
    let f6 = eth(0x86dd, &ipv6(58, &[128, 0, 0, 0, 0, 1, 0, 1]));
    assert_v6(p(lt::ETHERNET, &f6), 58, 0, 0, false);
    assert_v6(p(lt::ETHERNET, &f6[..54]), 58, 0, 0, false);
}

#[test]
fn ipv4_options_are_skipped() {
    for words in 1..=10usize {
        let opts: Vec<u8> = (0..words * 4)
            .map(|i| if i == 0 { 0x94 } else { 1 })
            .collect();
        let f = eth(0x0800, &ipv4(6, &opts, 0, &tcp(7, 9)));
        assert_v4(p(lt::ETHERNET, &f), 6, 7, 9, false);
        // Options cut: addresses complete, ports lost.
        let ports_at = 14 + 20 + words * 4;
        assert_v4(p(lt::ETHERNET, &f[..ports_at]), 6, 0, 0, true);
        assert_v4(p(lt::ETHERNET, &f[..ports_at + 3]), 6, 0, 0, true);
        assert_v4(p(lt::ETHERNET, &f[..ports_at + 4]), 6, 7, 9, false);
    }
}

#[test]
fn ipv4_malformed_headers() {
    let good = ipv4(6, &[], 0, &tcp(1, 2));
    // Bad version behind an IPv4 ethertype.
    for ver in [0u8, 5, 6, 15] {
        let mut b = good.clone();
        b[0] = (ver << 4) | 5;
        assert_eq!(p(lt::ETHERNET, &eth(0x0800, &b)).class, Class::Malformed);
    }
    // IHL < 5.
    for ihl in 0..5u8 {
        let mut b = good.clone();
        b[0] = 0x40 | ihl;
        assert_eq!(p(lt::RAW, &b).class, Class::Malformed, "ihl {ihl}");
    }
    // Total length smaller than the header (but not 0).
    for total in [1u16, 19] {
        let mut b = good.clone();
        b[2..4].copy_from_slice(&total.to_be_bytes());
        assert_eq!(p(lt::RAW, &b).class, Class::Malformed, "total {total}");
    }
    let opts = [1u8; 8];
    let mut b = ipv4(6, &opts, 0, &tcp(1, 2));
    b[2..4].copy_from_slice(&24u16.to_be_bytes()); // < IHL*4 = 28
    assert_eq!(p(lt::RAW, &b).class, Class::Malformed);
    // Malformed needs the fixed header: cut short it is Truncated.
    let mut b = good.clone();
    b[0] = 0x43;
    assert_eq!(p(lt::IPV4, &b[..19]).class, Class::Truncated);
    assert_eq!(p(lt::IPV4, &b[..20]).class, Class::Malformed);
}

#[test]
fn ipv4_total_length_cases() {
    // Larger than captured: a snaplen cut, not an error.
    let mut b = ipv4(17, &[], 0, &udp(10, 20));
    b[2..4].copy_from_slice(&1500u16.to_be_bytes());
    assert_v4(p(lt::RAW, &b), 17, 10, 20, false);
    // 0: TSO, the capture length is used.
    b[2..4].copy_from_slice(&0u16.to_be_bytes());
    assert_v4(p(lt::RAW, &b), 17, 10, 20, false);
    // Exactly the header: no L4 inside the datagram, trailing bytes are padding.
    b[2..4].copy_from_slice(&20u16.to_be_bytes());
    assert_v4(p(lt::RAW, &b), 17, 0, 0, true);
    // Ethernet padding after a short datagram is never read as ports.
    let mut f = eth(0x0800, &ipv4(6, &[], 0, &[0xaa, 0xbb]));
    f.resize(60, 0x55);
    assert_v4(p(lt::ETHERNET, &f), 6, 0, 0, true);
}

#[test]
fn ipv4_fragments() {
    // First fragment (MF set, offset 0) carries the ports.
    let first = ipv4(17, &[], 0x2000, &udp(5004, 5005));
    assert_v4(p(lt::RAW, &first), 17, 5004, 5005, false);
    // DF alone is not a fragment.
    assert_v4(
        p(lt::RAW, &ipv4(6, &[], 0x4000, &tcp(1, 2))),
        6,
        1,
        2,
        false,
    );
    // Later fragments (with and without MF): ports 0, not cut, protocol kept.
    for frag in [0x2000u16 | 185, 185, 1, 0x1fff] {
        let later = ipv4(17, &[], frag, &udp(5004, 5005));
        assert_v4(p(lt::RAW, &later), 17, 0, 0, false);
        assert_v4(p(lt::RAW, &later[..20]), 17, 0, 0, false);
    }
}

#[test]
fn ipv4_authentication_header() {
    let b = ipv4(51, &[], 0, &cat(&[&ah(6, 4), &tcp(80, 1025)]));
    assert_v4(p(lt::RAW, &b), 6, 80, 1025, false);
    // Cut inside the AH: the protocol behind it is unknown.
    assert_v4(p(lt::RAW, &b[..21]), 51, 0, 0, true);
    // AH read but the ports cut.
    assert_v4(p(lt::RAW, &b[..20 + 24 + 2]), 6, 0, 0, true);
}

/// The progression the brief asks for: cut an Ethernet/IPv4/TCP frame at every length.
#[test]
fn truncation_progression_ethernet_ipv4_tcp() {
    let f = eth(0x0800, &ipv4(6, &[], 0, &tcp(51000, 443)));
    assert_eq!(f.len(), 54);
    for n in 0..=f.len() {
        let v = p(lt::ETHERNET, &f[..n]);
        match n {
            0..=33 => assert_eq!(v.class, Class::Truncated, "{n}"),
            34..=37 => assert_v4(v, 6, 0, 0, true),
            _ => assert_v4(v, 6, 51000, 443, false),
        }
    }
}

/// The same progression on every link type and both families.
#[test]
fn truncation_progression_every_link_type() {
    let v4 = ipv4(17, &[], 0, &udp(1111, 2222));
    let v6 = ipv6(6, &tcp(3333, 4444));
    for link in BOTH {
        for (ip, addr_len, proto, sp, dp) in [(&v4, 20, 17, 1111, 2222), (&v6, 40, 6, 3333, 4444)] {
            let f = wrap(link, ip);
            let l = link_len(link);
            for n in 0..=f.len() {
                let v = p(link, &f[..n]);
                if n == l && link_len(link) == 0 {
                    assert_eq!(v.class, Class::Truncated);
                } else if n < l + addr_len {
                    assert_eq!(v.class, Class::Truncated, "link {link} n {n}");
                } else if n < l + addr_len + 4 {
                    assert!(v.class.is_ip() && v.l4_cut, "link {link} n {n} {v:?}");
                    assert_eq!(v.tuple.proto, proto);
                } else {
                    assert!(v.class.is_ip() && !v.l4_cut, "link {link} n {n}");
                    assert_eq!((v.tuple.sport, v.tuple.dport), (sp, dp));
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// IPv6.

#[test]
fn ipv6_extension_chain() {
    // hop-by-hop -> routing -> destination options -> TCP.
    let chain = cat(&[&ext(43, 0), &ext(60, 2), &ext(6, 1), &tcp(8443, 60000)]);
    let f = eth(0x86dd, &ipv6(0, &chain));
    assert_v6(p(lt::ETHERNET, &f), 6, 8443, 60000, false);
    // Mobility, HIP, shim6 are walked like the others.
    for t in [135u8, 139, 140] {
        let b = ipv6(t, &cat(&[&ext(17, 3), &udp(1, 2)]));
        assert_v6(p(lt::IPV6, &b), 17, 1, 2, false);
    }
    // AH: length in 4-byte units + 2.
    let b = ipv6(51, &cat(&[&ah(17, 4), &udp(500, 4500)]));
    assert_v6(p(lt::IPV6, &b), 17, 500, 4500, false);
    // ESP and no-next-header end the chain with ports 0.
    let b = ipv6(0, &cat(&[&ext(50, 0), &[0u8; 16]]));
    assert_v6(p(lt::IPV6, &b), 50, 0, 0, false);
    let b = ipv6(60, &cat(&[&ext(59, 0), &[0u8; 8]]));
    assert_v6(p(lt::IPV6, &b), 59, 0, 0, false);
    let b = ipv6(59, &[]);
    assert_v6(p(lt::IPV6, &b), 59, 0, 0, false);
}

#[test]
fn ipv6_fragments() {
    // First fragment: ports.
    let b = ipv6(44, &cat(&[&frag6(17, 0, true), &udp(7000, 7001)]));
    assert_v6(p(lt::IPV6, &b), 17, 7000, 7001, false);
    // An atomic fragment (offset 0, M = 0) too.
    let b = ipv6(44, &cat(&[&frag6(6, 0, false), &tcp(1, 2)]));
    assert_v6(p(lt::IPV6, &b), 6, 1, 2, false);
    // Later fragment: ports 0, protocol is the fragment's next header, not cut.
    let b = ipv6(
        0,
        &cat(&[&ext(44, 0), &frag6(17, 181, true), &udp(7000, 7001)]),
    );
    assert_v6(p(lt::IPV6, &b), 17, 0, 0, false);
    assert_v6(p(lt::IPV6, &b[..40 + 8 + 4]), 17, 0, 0, false);
    // Cut inside the fragment header's offset: next header known, ports unknown.
    assert_v6(p(lt::IPV6, &b[..40 + 8 + 2]), 17, 0, 0, true);
    assert_v6(p(lt::IPV6, &b[..40 + 8 + 1]), 44, 0, 0, true);
}

#[test]
fn ipv6_chain_bound() {
    // Exactly MAX_IPV6_EXT_HEADERS destination-options headers: still walked.
    let mut chain = Vec::new();
    for _ in 0..MAX_IPV6_EXT_HEADERS - 1 {
        chain.extend(ext(60, 0));
    }
    chain.extend(ext(17, 0));
    chain.extend(udp(9, 10));
    assert_v6(p(lt::IPV6, &ipv6(60, &chain)), 17, 9, 10, false);
    // One more: the walk stops; addresses kept, ports 0, proto = the unwalked header type.
    let mut long = ext(60, 0);
    long.extend(&chain);
    let v = p(lt::IPV6, &ipv6(60, &long));
    assert_v6(v, 60, 0, 0, false);
}

#[test]
fn ipv6_chain_cut_everywhere() {
    let chain = cat(&[&ext(43, 1), &ext(6, 0), &tcp(2000, 3000)]);
    let f = eth(0x86dd, &ipv6(0, &chain));
    for n in 0..=f.len() {
        let v = p(lt::ETHERNET, &f[..n]);
        if n < 54 {
            assert_eq!(v.class, Class::Truncated);
        } else if n < 56 {
            assert_v6(v, 0, 0, 0, true); // next header of hop-by-hop unread
        } else if n < 54 + 16 + 2 {
            assert_v6(v, 43, 0, 0, true); // routing header's fields unread
        } else if n < 54 + 24 + 4 {
            assert_v6(v, 6, 0, 0, true); // TCP known, ports cut
        } else {
            assert_v6(v, 6, 2000, 3000, false);
        }
    }
}

#[test]
fn ipv6_lengths() {
    let mut b = ipv6(17, &udp(1, 2));
    // Payload length shorter than the ports: trailing bytes are not the datagram.
    b[4..6].copy_from_slice(&2u16.to_be_bytes());
    assert_v6(p(lt::IPV6, &b), 17, 0, 0, true);
    // 0 (jumbogram / GSO): use the capture.
    b[4..6].copy_from_slice(&0u16.to_be_bytes());
    assert_v6(p(lt::IPV6, &b), 17, 1, 2, false);
    // Larger than captured: snaplen.
    b[4..6].copy_from_slice(&9000u16.to_be_bytes());
    assert_v6(p(lt::IPV6, &b), 17, 1, 2, false);
    // Version check needs the full 40 bytes; before that the frame is Truncated.
    b[0] = 0x40;
    assert_eq!(p(lt::IPV6, &b[..39]).class, Class::Truncated);
    assert_eq!(p(lt::IPV6, &b).class, Class::Malformed);
    assert_eq!(p(lt::ETHERNET, &eth(0x86dd, &b)).class, Class::Malformed);
}

mod encap;

// ---------------------------------------------------------------------------------------------
// Property tests.

/// A valid frame description for the generators.
#[derive(Clone, Debug)]
struct Spec {
    link: u32,
    tags: Vec<u16>,
    v6: bool,
    /// IPv4 option words, or IPv6 extension headers as (type, length units).
    v4_opt_words: usize,
    exts: Vec<(u8, u8)>,
    proto: u8,
    sport: u16,
    dport: u16,
    later_fragment: bool,
}

/// The bytes and the expectations: (frame, addresses-complete length, length from which the
/// tuple is final (ports read, or known to be absent), expected tuple of the full frame).
fn build(s: &Spec) -> (Vec<u8>, usize, usize, Tuple) {
    let l4 = if s.proto == 6 {
        tcp(s.sport, s.dport)
    } else {
        let mut u = udp(s.sport, s.dport);
        u.extend_from_slice(&[1, 2, 3, 4]);
        u
    };
    let ports = has_ports(s.proto) && !s.later_fragment;
    let (ip, addr_len, known_end) = if s.v6 {
        // Build the chain back to front so each header names the next.
        let mut rest = l4.clone();
        let mut next = s.proto;
        if s.later_fragment {
            rest = cat(&[&frag6(next, 100, true), &rest]);
            next = 44;
        }
        for &(t, units) in s.exts.iter().rev() {
            let e = if t == 51 {
                ah(next, units)
            } else {
                ext(next, units)
            };
            rest = cat(&[&e, &rest]);
            next = t;
        }
        let hdrs = rest.len() - l4.len();
        // Without ports, the walk is complete once the last header's next-header byte (and,
        // for a fragment header, its offset) has been read.
        let last = if s.later_fragment {
            Some((8, 4))
        } else {
            s.exts.last().map(|&(t, u)| {
                let len = if t == 51 {
                    (usize::from(u) + 2) * 4
                } else {
                    (usize::from(u) + 1) * 8
                };
                (len, 2)
            })
        };
        let known = last.map_or(40, |(len, need)| 40 + hdrs - len + need);
        (
            ipv6(next, &rest),
            40,
            if ports { 40 + hdrs + 4 } else { known },
        )
    } else {
        let opts = vec![1u8; s.v4_opt_words * 4];
        let frag = if s.later_fragment { 0x2000 | 77 } else { 0 };
        let at = 20 + opts.len();
        (
            ipv4(s.proto, &opts, frag, &l4),
            20,
            if ports { at + 4 } else { 20 },
        )
    };
    let mut f = wrap(s.link, &ip);
    let mut link = link_len(s.link);
    if !s.tags.is_empty() {
        // Insert tags before the ethertype (Ethernet) or after the SLL/SLL2 header.
        let et = ethertype_of(&ip);
        let (pos, et_at) = match s.link {
            lt::ETHERNET => (12, 12),
            lt::LINUX_SLL => (16, 14),
            _ => (20, 0),
        };
        let mut stack = Vec::new();
        for (i, &t) in s.tags.iter().enumerate() {
            let inner = s.tags.get(i + 1).copied().unwrap_or(et);
            if s.link == lt::ETHERNET {
                stack.extend_from_slice(&t.to_be_bytes());
                stack.extend_from_slice(&[0, 5]);
            } else {
                stack.extend_from_slice(&[0, 5]);
                stack.extend_from_slice(&inner.to_be_bytes());
            }
        }
        if s.link == lt::ETHERNET {
            f.splice(pos..pos, stack);
        } else {
            f[et_at..et_at + 2].copy_from_slice(&s.tags[0].to_be_bytes());
            f.splice(pos..pos, stack);
        }
        link += 4 * s.tags.len();
    }
    let mut t = if s.v6 {
        Tuple {
            v6: true,
            src: SRC6,
            dst: DST6,
            ..Tuple::default()
        }
    } else {
        Tuple::v4(SRC4, DST4, 0, 0, 0)
    };
    t.proto = s.proto;
    if ports {
        t.sport = s.sport;
        t.dport = s.dport;
    }
    (f, link + addr_len, link + known_end, t)
}

fn spec_strategy() -> impl Strategy<Value = Spec> {
    let tag = prop::sample::select(vec![0x8100u16, 0x88a8, 0x9100]);
    let ext_hdr = (
        prop::sample::select(vec![0u8, 43, 60, 135, 139, 140, 51]),
        0u8..4,
    );
    (
        prop::sample::select(lt::SUPPORTED.to_vec()),
        prop::collection::vec(tag, 0..4),
        any::<bool>(),
        0usize..11,
        prop::collection::vec(ext_hdr, 0..MAX_IPV6_EXT_HEADERS),
        prop::sample::select(vec![6u8, 17, 33, 132, 136, 1, 58, 47]),
        any::<u16>(),
        any::<u16>(),
        prop::bool::weighted(0.15),
    )
        .prop_map(|(link, tags, v6, w, exts, proto, sport, dport, later)| {
            let v6 = match link {
                lt::IPV4 => false,
                lt::IPV6 => true,
                _ => v6,
            };
            let tagged = matches!(link, lt::ETHERNET | lt::LINUX_SLL | lt::LINUX_SLL2);
            // The fragment header counts against the bound.
            let mut exts = exts;
            if later && exts.len() == MAX_IPV6_EXT_HEADERS {
                exts.pop();
            }
            Spec {
                link,
                tags: if tagged { tags } else { Vec::new() },
                v6,
                v4_opt_words: w,
                exts,
                proto,
                sport,
                dport,
                later_fragment: later,
            }
        })
}

fn any_link() -> impl Strategy<Value = u32> {
    prop_oneof![
        4 => prop::sample::select(lt::SUPPORTED.to_vec()),
        1 => any::<u32>(),
    ]
}

/// Cutting a frame can only turn a final class into `Truncated`, ports into `l4_cut`, and the
/// encapsulations recorded into fewer. One exception: a frame that carries an encapsulation may
/// be `Malformed` where its prefix is IP (and, in outer mode, record fewer layers than the
/// prefix), when the longer frame shows a length field claiming more than its (now complete)
/// container holds. And in inner mode an IP prefix with `l4_cut` may grow a tunnel.
fn check_prefix_consistent(link: u32, f: &[u8], n: usize) {
    let lie = pw(link, f, Tunnel::Inner).class == Class::Malformed;
    for mode in Tunnel::ALL {
        let n = n.min(f.len());
        let a = pw(link, &f[..n], mode);
        let b = pw(link, f, mode);
        if !lie {
            assert_eq!(
                a.encap.iter().filter(|&l| !b.encap.contains(l)).count(),
                0,
                "{mode}: prefix {n} records layers the frame does not: {a:?} {b:?}"
            );
        }
        let same = |x: View| View {
            encap: Encap::NONE,
            ..x
        };
        match a.class {
            Class::Truncated => {}
            Class::Ipv4 | Class::Ipv6 if b.class == Class::Malformed && !b.encap.is_empty() => {}
            // Inner mode: with its protocol or ports cut, whether the packet carries a tunnel is
            // unknown, and the header read is the key; the longer frame may show a tunnel.
            Class::Ipv4 | Class::Ipv6 if mode == Tunnel::Inner && a.l4_cut => assert!(
                !matches!(b.class, Class::NonIp | Class::Unsupported),
                "{mode}: prefix {n} of {f:02x?}"
            ),
            Class::Ipv4 | Class::Ipv6 => {
                assert_eq!(b.class, a.class, "{mode}: prefix {n} of {f:02x?}");
                assert_eq!((b.tuple.src, b.tuple.dst), (a.tuple.src, a.tuple.dst));
                if !a.l4_cut {
                    assert_eq!(same(b), same(a), "{mode}: prefix {n} of {f:02x?}");
                }
            }
            _ => assert_eq!(b.class, a.class, "{mode}: prefix {n} of {f:02x?}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, rng_seed: proptest::test_runner::RngSeed::Fixed(0x5eed), ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(link in any_link(), f in prop::collection::vec(any::<u8>(), 0..160)) {
        let v = p(link, &f);
        prop_assert_eq!(v.class == Class::Unsupported, !lt::is_supported(link));
        let (c, k) = parse_key(link, &f, KeyKind::FiveTuple);
        prop_assert_eq!(c, v.class);
        prop_assert_eq!(k.is_empty(), !c.is_ip());
        let i = pw(link, &f, Tunnel::Inner);
        prop_assert_eq!(i.class == Class::Unsupported, !lt::is_supported(link));
        let (c, k) = parse_key_with(link, &f, KeyKind::FiveTuple, Tunnel::Inner);
        prop_assert_eq!(c, i.class);
        prop_assert_eq!(k.is_empty(), !c.is_ip());
    }

    #[test]
    fn valid_frames_parse_and_cut_in_order(s in spec_strategy(), cut in any::<prop::sample::Index>()) {
        let (f, addr_end, ports_end, want) = build(&s);
        let v = p(s.link, &f);
        let class = if s.v6 { Class::Ipv6 } else { Class::Ipv4 };
        // GRE, and UDP to a tunnel's port, are recognised (and their payload, here not a
        // packet, looked at) but not looked through: the outer header is the packet. The port
        // names the layer before any length is read (`encap::udp`), except VXLAN's and
        // VXLAN-GPE's, recorded only with their header.
        // PPPoE is a layer below IP: on its link type, every frame records it.
        let none = if s.link == lt::PPP_ETHER {
            Encap::NONE.with(Layer::Pppoe)
        } else {
            Encap::NONE
        };
        let encap = match (s.proto, s.dport) {
            _ if s.later_fragment => none,
            (47, _) => none.with(Layer::Gre),
            // An empty datagram has no VXLAN or VXLAN-GPE header: plain UDP.
            (17, 4789 | 8472 | 4790) => none,
            (17, 6081) => none.with(Layer::Geneve),
            (17, 2152) => none.with(Layer::GtpU),
            (17, 6635) => none.with(Layer::MplsUdp),
            _ => none,
        };
        prop_assert_eq!(v, View { class, tuple: want, l4_cut: false, encap });
        let n = cut.index(f.len() + 1);
        let c = p(s.link, &f[..n]);
        if n < addr_end {
            prop_assert_eq!(c.class, Class::Truncated);
        } else if n < ports_end {
            prop_assert_eq!(c.class, class);
            prop_assert_eq!((c.tuple.src, c.tuple.dst), (want.src, want.dst));
            prop_assert!(c.l4_cut);
        } else {
            prop_assert_eq!(c, v);
        }
    }

    #[test]
    fn mutated_frames_are_prefix_consistent(
        s in spec_strategy(),
        muts in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let (mut f, ..) = build(&s);
        for (i, b) in muts {
            let i = i.index(f.len());
            f[i] = b;
        }
        check_prefix_consistent(s.link, &f, cut.index(f.len() + 1));
    }

    #[test]
    fn random_bytes_are_prefix_consistent(
        link in any_link(),
        f in prop::collection::vec(any::<u8>(), 0..120),
        cut in any::<prop::sample::Index>(),
    ) {
        check_prefix_consistent(link, &f, cut.index(f.len() + 1));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 20_000, rng_seed: proptest::test_runner::RngSeed::Fixed(0x5eed), ..ProptestConfig::default() })]

    /// The fast path of `parse_key` and the general parser agree on every frame: valid
    /// Ethernet/IPv4/TCP-UDP frames with random header bytes (version/IHL, total length, fragment
    /// field, protocol, ethertype) overwritten, cut at random lengths, for every key kind.
    #[test]
    fn fast_path_equals_parse(
        udp_l4 in any::<bool>(),
        sp in any::<u16>(),
        dp in prop_oneof![any::<u16>(), prop::sample::select(vec![4789u16, 8472, 4790, 6081, 2152, 6635])],
        pokes in prop::collection::vec((12usize..40, any::<u8>()), 0..4),
        keep in any::<prop::sample::Index>(),
    ) {
        let l4 = if udp_l4 { udp(sp, dp) } else { tcp(sp, dp) };
        let mut f = eth(0x0800, &ipv4(if udp_l4 { 17 } else { 6 }, &[], 0, &l4));
        for (at, b) in pokes {
            if at < f.len() {
                f[at] = b;
            }
        }
        let n = keep.index(f.len() + 1);
        for kind in KeyKind::ALL {
            prop_assert_eq!(
                parse_key(lt::ETHERNET, &f[..n], kind),
                parse_key_general(lt::ETHERNET, &f[..n], kind)
            );
            for mode in Tunnel::ALL {
                prop_assert_eq!(
                    parse_key_with(lt::ETHERNET, &f[..n], kind, mode),
                    parse_key_general_with(lt::ETHERNET, &f[..n], kind, mode)
                );
            }
        }
    }
}

/// RFC 1662 4.2 octet stuffing of `f`: 0x7e and 0x7d become 0x7d, then the octet XOR 0x20.
fn stuff(f: &[u8]) -> Vec<u8> {
    let mut o = Vec::new();
    for &b in f {
        if b == 0x7e || b == 0x7d {
            o.extend_from_slice(&[0x7d, b ^ 0x20]);
        } else {
            o.push(b);
        }
    }
    o
}

/// PPP frames that kept their HDLC flag and octet stuffing (as in tcpdump's ppp_ip_udp_dns
/// capture: 0xff, a control byte, 0x7e, then the stuffed frame) are unstuffed into a bounded
/// buffer and keyed like tcpdump's `handle_ppp` reads them; the new PPP link types (51, 166,
/// 204, 205) decode their headers.
#[test]
fn ppp_stuffed_and_direction_link_types() {
    // Ports 0x7d7e and 0x7e7d need stuffing; so does nothing else of this header.
    let v4 = ipv4(17, &[], 0, &udp(0x7d7e, 0x7e7d));
    let v6 = ipv6(6, &tcp(0x7e00, 0x7d00));
    for link in [lt::PPP, lt::PPP_HDLC] {
        let pre: &[u8] = if link == lt::PPP { &[] } else { &[0xff, 0x5f] };
        // The ethertype (tcpdump's reading), the PPP protocol, address/control first.
        for head in [&[0x08, 0x00][..], &[0x00, 0x21], &[0xff, 0x03, 0x00, 0x21]] {
            let f = cat(&[pre, &[0x7e], &stuff(&cat(&[head, &v4]))]);
            assert_v4(p(link, &f), 17, 0x7d7e, 0x7e7d, false);
            // Cut inside the stuffed ports (between an escape and its octet): ports cut.
            let cut = f.len() - stuff(&udp(0x7d7e, 0x7e7d)).len() + 1;
            assert_v4(p(link, &f[..cut]), 17, 0, 0, true);
        }
        let f = cat(&[pre, &[0x7e], &stuff(&cat(&[&[0x86, 0xdd], &v6]))]);
        assert_v6(p(link, &f), 6, 0x7e00, 0x7d00, false);
        // IPCP inside (tcpdump's ppp_error_hexdump); a second flag: not decoded further.
        let f = cat(&[pre, &[0x7e, 0x80, 0x21, 1, 0, 0, 4]]);
        assert_eq!(p(link, &f).class, Class::NonIp);
        let f = cat(&[pre, &[0x7e, 0x7e, 0x08, 0x00], &v4]);
        assert_eq!(p(link, &f).class, Class::Malformed);
    }
    // A stuffed frame longer than the buffer: the header is keyed, the rest not read.
    let big = ipv4(6, &[], 0, &cat(&[&tcp(1, 2), &[0x7e; 1000]]));
    let f = cat(&[&[0xff, 0x03, 0x7e, 0x08, 0x00], &stuff(&big)]);
    assert_v4(p(lt::PPP_HDLC, &f), 6, 1, 2, false);

    // PPP_PPPD: direction 0 or 1 in place of the address, then 0x03.
    for dir in [0u8, 1] {
        let f = cat(&[&[dir, 0x03, 0x00, 0x21], &v4]);
        assert_v4(p(lt::PPP_PPPD, &f), 17, 0x7d7e, 0x7e7d, false);
    }
    assert_eq!(
        p(lt::PPP_PPPD, &cat(&[&[0x02, 0x03, 0x00, 0x21], &v4])).class,
        Class::Malformed
    );
    assert_eq!(p(lt::PPP_PPPD, &[0x01]).class, Class::Truncated);
    // PPP_WITH_DIR / C_HDLC_WITH_DIR: any direction byte, then the frame.
    for dir in [0u8, 1, 0x80] {
        let f = cat(&[&[dir, 0xff, 0x03, 0x00, 0x57], &v6]);
        assert_v6(p(lt::PPP_WITH_DIR, &f), 6, 0x7e00, 0x7d00, false);
        let f = cat(&[&[dir, 0x0f, 0x00, 0x08, 0x00], &v4]);
        assert_v4(p(lt::C_HDLC_WITH_DIR, &f), 17, 0x7d7e, 0x7e7d, false);
    }
    for link in [lt::PPP_WITH_DIR, lt::C_HDLC_WITH_DIR] {
        assert_eq!(p(link, &[]).class, Class::Truncated);
        assert_eq!(p(link, &[0x00]).class, Class::Truncated);
    }
    // PPP_ETHER: the PPPoE session header, then PPP; a wrong version/type is malformed.
    let len = (2 + v4.len() as u8, 0x00);
    let f = cat(&[&[0x11, 0x00, 0x00, 0x01, len.1, len.0, 0x00, 0x21], &v4]);
    let v = p(lt::PPP_ETHER, &f);
    assert_v4(v, 17, 0x7d7e, 0x7e7d, false);
    assert_eq!(v.encap, Encap::NONE.with(Layer::Pppoe));
    // Its length shorter than the IP datagram inside: the IP header lies, malformed.
    let mut g = f.clone();
    g[5] -= 1;
    assert_eq!(p(lt::PPP_ETHER, &g).class, Class::Malformed);
    let mut g = f.clone();
    g[0] = 0x21;
    assert_eq!(p(lt::PPP_ETHER, &g).class, Class::Malformed);
    for n in 0..f.len() {
        check_prefix_consistent(lt::PPP_ETHER, &f, n);
    }
    for name in [
        (51, "ppp_ether"),
        (166, "ppp_pppd"),
        (204, "ppp_with_dir"),
        (205, "c_hdlc_with_dir"),
    ] {
        assert_eq!(lt::name(name.0), name.1);
        assert!(lt::is_supported(name.0));
    }
}
