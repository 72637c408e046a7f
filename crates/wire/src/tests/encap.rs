//! Encapsulations: golden tests on hand-built frames for every layer, in both tunnel modes, the
//! length lies, the bounds, and property tests over random stacks of layers.

use super::*;

// ---------------------------------------------------------------------------------------------
// Builders (tests may allocate).

const IN4_SRC: [u8; 4] = [172, 16, 0, 1];
const IN4_DST: [u8; 4] = [172, 16, 0, 2];
const IN6_SRC: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xa, 1];
const IN6_DST: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xa, 2];

fn ip4(src: [u8; 4], dst: [u8; 4], proto: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 20];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&((20 + payload.len()) as u16).to_be_bytes());
    p[8] = 64;
    p[9] = proto;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    p.extend_from_slice(payload);
    p
}

fn ip6(src: [u8; 16], dst: [u8; 16], next: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 40];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&(payload.len() as u16).to_be_bytes());
    p[6] = next;
    p[7] = 64;
    p[8..24].copy_from_slice(&src);
    p[24..40].copy_from_slice(&dst);
    p.extend_from_slice(payload);
    p
}

/// The inner packets: IPv4/TCP 1111 -> 80 and IPv6/UDP 2222 -> 53.
fn inner4() -> Vec<u8> {
    ip4(IN4_SRC, IN4_DST, 6, &tcp(1111, 80))
}
fn inner6() -> Vec<u8> {
    ip6(IN6_SRC, IN6_DST, 17, &udp(2222, 53))
}
fn inner4_tuple() -> Tuple {
    Tuple::v4(IN4_SRC, IN4_DST, 1111, 80, 6)
}
fn inner6_tuple() -> Tuple {
    Tuple {
        v6: true,
        src: IN6_SRC,
        dst: IN6_DST,
        sport: 2222,
        dport: 53,
        proto: 17,
    }
}

/// The outer packets: IPv4 SRC4 -> DST4 or IPv6 SRC6 -> DST6 carrying `payload` as `proto`.
fn outer4(proto: u8, payload: &[u8]) -> Vec<u8> {
    ip4(SRC4, DST4, proto, payload)
}
fn outer6(proto: u8, payload: &[u8]) -> Vec<u8> {
    ip6(SRC6, DST6, proto, payload)
}
fn outer4_tuple(proto: u8, sport: u16, dport: u16) -> Tuple {
    Tuple::v4(SRC4, DST4, sport, dport, proto)
}
fn outer6_tuple(proto: u8, sport: u16, dport: u16) -> Tuple {
    Tuple {
        v6: true,
        src: SRC6,
        dst: DST6,
        sport,
        dport,
        proto,
    }
}

/// An MPLS label stack (bottom-of-stack on the last entry) and its payload.
fn mpls(labels: &[u32], payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    for (i, l) in labels.iter().enumerate() {
        let bos = u32::from(i + 1 == labels.len());
        f.extend_from_slice(&((l << 12) | (bos << 8) | 64).to_be_bytes());
    }
    f.extend_from_slice(payload);
    f
}

/// An Ethernet pseudowire payload with the RFC 4385 control word (sequence number 7).
fn cw(frame: &[u8]) -> Vec<u8> {
    cat(&[&[0, 0, 0, 7], frame])
}

/// An Ethernet frame whose destination MAC starts with `first` (the pseudowire heuristics
/// look at it).
fn eth_mac(first: u8, et: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = eth(et, payload);
    f[0] = first;
    f
}

fn pppoe(proto: &[u8], payload: &[u8]) -> Vec<u8> {
    let len = (proto.len() + payload.len()) as u16;
    let mut f = vec![0x11, 0x00, 0x12, 0x34];
    f.extend_from_slice(&len.to_be_bytes());
    f.extend_from_slice(proto);
    f.extend_from_slice(payload);
    f
}

/// GRE version 0 with the optional fields its flags announce (filled with marker bytes); with
/// the routing bit, an IPv4 and an AS source route entry and the null one (RFC 1701).
fn gre(flags: u16, ptype: u16, payload: &[u8]) -> Vec<u8> {
    let sres = [(0x0800u16, 8u8), (0xfffe, 6)];
    gre_routed(
        flags,
        ptype,
        if flags & 0x4000 != 0 { &sres } else { &[] },
        payload,
    )
}

/// GRE version 0 with the routing entries `sres` (address family, length) before the null one
/// when the routing bit (0x4000) is set.
fn gre_routed(flags: u16, ptype: u16, sres: &[(u16, u8)], payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&flags.to_be_bytes());
    f.extend_from_slice(&ptype.to_be_bytes());
    // Checksum and offset are there when either the checksum or the routing bit is set.
    for bits in [0xc000u16, 0x2000, 0x1000] {
        if flags & bits != 0 {
            f.extend_from_slice(&[0xc5; 4]);
        }
    }
    if flags & 0x4000 != 0 {
        for &(af, len) in sres.iter().chain([&(0, 0)]) {
            f.extend_from_slice(&af.to_be_bytes());
            f.extend_from_slice(&[0, len]);
            f.extend(std::iter::repeat_n(0xa7u8, usize::from(len)));
        }
    }
    f.extend_from_slice(payload);
    f
}

/// PPTP's enhanced GRE (version 1) carrying PPP with address/control and a 2-byte protocol.
fn pptp(seq: bool, ack: bool, ppp_proto: u16, payload: &[u8]) -> Vec<u8> {
    let ppp = cat(&[&[0xff, 0x03], &ppp_proto.to_be_bytes(), payload]);
    let flags = 0x2001u16 | if seq { 0x1000 } else { 0 } | if ack { 0x0080 } else { 0 };
    let mut f = Vec::new();
    f.extend_from_slice(&flags.to_be_bytes());
    f.extend_from_slice(&0x880bu16.to_be_bytes());
    f.extend_from_slice(&(ppp.len() as u16).to_be_bytes());
    f.extend_from_slice(&0x4242u16.to_be_bytes());
    if seq {
        f.extend_from_slice(&[0, 0, 0, 9]);
    }
    if ack {
        f.extend_from_slice(&[0, 0, 0, 8]);
    }
    f.extend_from_slice(&ppp);
    f
}

fn erspan2(frame: &[u8]) -> Vec<u8> {
    cat(&[&[0x10, 0x64, 0x00, 0x01, 0, 0, 0, 0], frame])
}

fn erspan3(frame: &[u8], optional: bool, frame_type: u8) -> Vec<u8> {
    let mut h = vec![0x20, 0x64, 0x00, 0x01, 0, 0, 0, 0, 0, 0, frame_type << 2, 0];
    if optional {
        h[11] |= 1;
        h.extend_from_slice(&[0xee; 8]);
    }
    cat(&[&h, frame])
}

fn udp_to(dport: u16, body: &[u8]) -> Vec<u8> {
    let mut u = vec![0u8; 8];
    u[..2].copy_from_slice(&40000u16.to_be_bytes());
    u[2..4].copy_from_slice(&dport.to_be_bytes());
    u[4..6].copy_from_slice(&((8 + body.len()) as u16).to_be_bytes());
    u.extend_from_slice(body);
    u
}

fn vxlan(frame: &[u8]) -> Vec<u8> {
    vxlan_on(4789, frame)
}

fn vxlan_on(port: u16, frame: &[u8]) -> Vec<u8> {
    udp_to(port, &cat(&[&[0x08, 0, 0, 0, 0, 0x12, 0x34, 0], frame]))
}

/// VXLAN-GPE with the I and P flags and next protocol `np`.
fn gpe(np: u8, payload: &[u8]) -> Vec<u8> {
    udp_to(4790, &cat(&[&[0x0c, 0, 0, np, 0, 0x12, 0x34, 0], payload]))
}

/// NSH (RFC 8300) of MD type 2 with `ctx_words` words of context headers (MD type 1 when
/// `ctx_words` is 4), next protocol `np`.
fn nsh(np: u8, ctx_words: u8, payload: &[u8]) -> Vec<u8> {
    let md_type = if ctx_words == 4 { 1 } else { 2 };
    let mut h = vec![0x0f, 0xc0 | (2 + ctx_words), md_type, np, 0, 0, 0x2a, 0xff];
    h.extend(std::iter::repeat_n(0x5au8, usize::from(ctx_words) * 4));
    cat(&[&h, payload])
}

fn mpls_udp(stack: &[u8]) -> Vec<u8> {
    udp_to(6635, stack)
}

fn geneve(ptype: u16, opt_words: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![opt_words, 0];
    h.extend_from_slice(&ptype.to_be_bytes());
    h.extend_from_slice(&[0, 0x12, 0x34, 0]);
    h.extend(std::iter::repeat_n(0x77u8, usize::from(opt_words) * 4));
    udp_to(6081, &cat(&[&h, payload]))
}

/// A GTP-U message: `opt` adds the 4-byte optional field (S flag), `exts` extension headers
/// (each `n` 4-byte units, E flag).
fn gtpu(msg: u8, opt: bool, exts: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut flags = 0x30u8;
    let mut rest = Vec::new();
    if opt || !exts.is_empty() {
        flags |= if exts.is_empty() { 0x02 } else { 0x04 };
        rest.extend_from_slice(&[0, 5, 0, if exts.is_empty() { 0 } else { 0x85 }]);
        for (i, &n) in exts.iter().enumerate() {
            let mut e = vec![0x99u8; usize::from(n) * 4];
            e[0] = n;
            let last = e.len() - 1;
            e[last] = if i + 1 == exts.len() { 0 } else { 0x85 };
            rest.extend_from_slice(&e);
        }
    }
    rest.extend_from_slice(payload);
    let mut h = vec![flags, msg];
    h.extend_from_slice(&(rest.len() as u16).to_be_bytes());
    h.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    udp_to(2152, &cat(&[&h, &rest]))
}

fn set(layers: &[Layer]) -> Encap {
    layers.iter().copied().collect()
}

/// The frame parses to `outer` in `Outer` mode and `inner` in `Inner` mode (class and tuple),
/// both recording `layers`; and every prefix is consistent with it.
fn check(link: u32, f: &[u8], outer: (Class, Tuple), inner: (Class, Tuple), layers: &[Layer]) {
    for (mode, (class, tuple)) in [(Tunnel::Outer, outer), (Tunnel::Inner, inner)] {
        let v = pw(link, f, mode);
        let tuple = if class.is_ip() {
            tuple
        } else {
            Tuple::default()
        };
        assert_eq!(
            (v.class, v.tuple, v.encap),
            (class, tuple, set(layers)),
            "{mode}: {f:02x?}"
        );
        let (c, k) = parse_key_with(link, f, KeyKind::FiveTuple, mode);
        assert_eq!(
            (c, k),
            (v.class, v.key(KeyKind::FiveTuple).unwrap_or(FlowKey::EMPTY))
        );
    }
    for n in 0..=f.len() {
        check_prefix_consistent(link, f, n);
    }
}

fn v4(t: Tuple) -> (Class, Tuple) {
    (Class::Ipv4, t)
}
fn v6(t: Tuple) -> (Class, Tuple) {
    (Class::Ipv6, t)
}
fn only(c: Class) -> (Class, Tuple) {
    (c, Tuple::default())
}

// ---------------------------------------------------------------------------------------------
// Below IP: MPLS and PPPoE are looked through in both modes.

#[test]
fn mpls_carries_ipv4_and_ipv6() {
    use Layer::*;
    let f = eth(0x8847, &mpls(&[18], &inner4()));
    check(
        lt::ETHERNET,
        &f,
        v4(inner4_tuple()),
        v4(inner4_tuple()),
        &[Mpls],
    );
    let f = eth(0x8848, &mpls(&[100, 200, 300], &inner6()));
    check(
        lt::ETHERNET,
        &f,
        v6(inner6_tuple()),
        v6(inner6_tuple()),
        &[Mpls],
    );
    // Behind VLAN tags, and on Linux cooked captures.
    let f = eth_tagged(0x8847, &[0x8100], &mpls(&[18], &inner4()));
    check(
        lt::ETHERNET,
        &f,
        v4(inner4_tuple()),
        v4(inner4_tuple()),
        &[Mpls],
    );
    let mut sll = wrap(lt::LINUX_SLL, &inner4());
    sll.truncate(16);
    sll[14..16].copy_from_slice(&0x8847u16.to_be_bytes());
    sll.extend_from_slice(&mpls(&[5], &inner4()));
    check(
        lt::LINUX_SLL,
        &sll,
        v4(inner4_tuple()),
        v4(inner4_tuple()),
        &[Mpls],
    );
}

#[test]
fn mpls_stack_bounds() {
    let labels: Vec<u32> = (1..=MAX_MPLS_LABELS as u32).collect();
    let f = eth(0x8847, &mpls(&labels, &inner4()));
    assert_eq!(p(lt::ETHERNET, &f).class, Class::Ipv4);
    let labels: Vec<u32> = (1..=MAX_MPLS_LABELS as u32 + 1).collect();
    let f = eth(0x8847, &mpls(&labels, &inner4()));
    assert_eq!(p(lt::ETHERNET, &f).class, Class::Malformed);
    // No bottom of stack before the frame ends: cut.
    let mut stack = mpls(&[1, 2, 3], &[]);
    stack[10] &= !1;
    assert_eq!(
        p(lt::ETHERNET, &eth(0x8847, &stack)).class,
        Class::Truncated
    );
    // Nothing after the bottom of the stack.
    assert_eq!(
        p(lt::ETHERNET, &eth(0x8847, &mpls(&[1], &[]))).class,
        Class::Truncated
    );
}

#[test]
fn mpls_ethernet_pseudowire_with_and_without_control_word() {
    use Layer::*;
    // tcpreplay_test.pcap's shape: two labels, control word, Ethernet, 802.1Q, IPv4.
    let pw_frame = eth_tagged(0x0800, &[0x8100], &inner4());
    let f = eth(0x8847, &mpls(&[0x13, 0x10], &cw(&pw_frame)));
    let want = v4(inner4_tuple());
    check(lt::ETHERNET, &f, want, want, &[Mpls, Pseudowire]);
    // Without a control word, destination MACs starting with any nibble but 0, 1, 4, 6.
    for first in [0x20u8, 0x52, 0xaa, 0xcc, 0xfe] {
        let f = eth(0x8847, &mpls(&[7], &eth_mac(first, 0x86dd, &inner6())));
        let want = v6(inner6_tuple());
        check(lt::ETHERNET, &f, want, want, &[Mpls, Pseudowire]);
    }
    // A destination MAC starting with nibble 0 and no control word: the ethertype tells.
    let f = eth(0x8847, &mpls(&[7], &eth_mac(0x00, 0x0800, &inner4())));
    let want = v4(inner4_tuple());
    check(lt::ETHERNET, &f, want, want, &[Mpls, Pseudowire]);
    // A pseudowire carrying ARP: not IP, but the layers are recorded.
    let f = eth(0x8847, &mpls(&[7], &cw(&eth(0x0806, &[0u8; 28]))));
    check(
        lt::ETHERNET,
        &f,
        only(Class::NonIp),
        only(Class::NonIp),
        &[Mpls, Pseudowire],
    );
    // The associated channel (first nibble 1) is OAM.
    let f = eth(0x8847, &mpls(&[13], &[0x10, 0, 0, 0x21, 0, 0, 0, 0]));
    check(
        lt::ETHERNET,
        &f,
        only(Class::NonIp),
        only(Class::NonIp),
        &[Mpls],
    );
}

#[test]
fn pppoe_sessions() {
    use Layer::*;
    let f = eth(0x8864, &pppoe(&[0x00, 0x21], &inner4()));
    check(
        lt::ETHERNET,
        &f,
        v4(inner4_tuple()),
        v4(inner4_tuple()),
        &[Pppoe],
    );
    let f = eth(0x8864, &pppoe(&[0x00, 0x57], &inner6()));
    check(
        lt::ETHERNET,
        &f,
        v6(inner6_tuple()),
        v6(inner6_tuple()),
        &[Pppoe],
    );
    // Protocol field compression, and MPLS over PPP.
    let f = eth(0x8864, &pppoe(&[0x21], &inner4()));
    check(
        lt::ETHERNET,
        &f,
        v4(inner4_tuple()),
        v4(inner4_tuple()),
        &[Pppoe],
    );
    let f = eth(0x8864, &pppoe(&[0x02, 0x81], &mpls(&[3], &inner4())));
    check(
        lt::ETHERNET,
        &f,
        v4(inner4_tuple()),
        v4(inner4_tuple()),
        &[Pppoe, Mpls],
    );
    // LCP is not IP.
    let f = eth(0x8864, &pppoe(&[0xc0, 0x21], &[1, 1, 0, 4]));
    check(
        lt::ETHERNET,
        &f,
        only(Class::NonIp),
        only(Class::NonIp),
        &[Pppoe],
    );
    // A wrong version/type or code.
    let mut f = eth(0x8864, &pppoe(&[0x00, 0x21], &inner4()));
    f[14] = 0x12;
    check(
        lt::ETHERNET,
        &f,
        only(Class::Malformed),
        only(Class::Malformed),
        &[Pppoe],
    );
    // Discovery (0x8863) is not a session.
    assert_eq!(
        p(lt::ETHERNET, &eth(0x8863, &[0x11, 0x09, 0, 0, 0, 0])).class,
        Class::NonIp
    );
}

#[test]
fn pppoe_length_lies() {
    use Layer::*;
    // Longer than the frame: a snaplen cut as far as the frame tells; read what is there.
    let mut body = pppoe(&[0x00, 0x21], &inner4());
    body[4..6].copy_from_slice(&1400u16.to_be_bytes());
    let f = eth(0x8864, &body);
    check(
        lt::ETHERNET,
        &f,
        v4(inner4_tuple()),
        v4(inner4_tuple()),
        &[Pppoe],
    );
    // Shorter than its IP header, the rest being padding: the IP header does not fit in what
    // PPPoE declared.
    let mut body = pppoe(&[0x00, 0x21], &inner4());
    body[4..6].copy_from_slice(&12u16.to_be_bytes());
    let f = eth(0x8864, &body);
    check(
        lt::ETHERNET,
        &f,
        only(Class::Malformed),
        only(Class::Malformed),
        &[Pppoe],
    );
    // Declares only the IP header: the IPv4 total length runs past it.
    let mut body = pppoe(&[0x00, 0x21], &inner4());
    body[4..6].copy_from_slice(&22u16.to_be_bytes());
    let f = eth(0x8864, &body);
    check(
        lt::ETHERNET,
        &f,
        only(Class::Malformed),
        only(Class::Malformed),
        &[Pppoe],
    );
    // Shorter than the PPP protocol field.
    let mut body = pppoe(&[0x00, 0x21], &inner4());
    body[4..6].copy_from_slice(&1u16.to_be_bytes());
    let f = eth(0x8864, &body);
    check(
        lt::ETHERNET,
        &f,
        only(Class::Malformed),
        only(Class::Malformed),
        &[Pppoe],
    );
}

// ---------------------------------------------------------------------------------------------
// Above IP: the mode picks the header.

#[test]
fn gre_version_0_with_optional_fields() {
    use Layer::*;
    for flags in [0u16, 0x8000, 0x2000, 0x1000, 0xb000] {
        let f = eth(0x0800, &outer4(47, &gre(flags, 0x0800, &inner4())));
        check(
            lt::ETHERNET,
            &f,
            v4(outer4_tuple(47, 0, 0)),
            v4(inner4_tuple()),
            &[Gre],
        );
        let f = eth(0x86dd, &outer6(47, &gre(flags, 0x86dd, &inner6())));
        check(
            lt::ETHERNET,
            &f,
            v6(outer6_tuple(47, 0, 0)),
            v6(inner6_tuple()),
            &[Gre],
        );
    }
    // Transparent Ethernet bridging (NVGRE), and MPLS over GRE.
    let f = eth(
        0x0800,
        &outer4(47, &gre(0x2000, 0x6558, &eth(0x86dd, &inner6()))),
    );
    check(
        lt::ETHERNET,
        &f,
        v4(outer4_tuple(47, 0, 0)),
        v6(inner6_tuple()),
        &[Gre],
    );
    let f = eth(
        0x0800,
        &outer4(47, &gre(0, 0x8847, &mpls(&[16], &inner4()))),
    );
    check(
        lt::ETHERNET,
        &f,
        v4(outer4_tuple(47, 0, 0)),
        v4(inner4_tuple()),
        &[Gre, Mpls],
    );
    // A payload that is not a packet keeps the outer header in both modes.
    let f = eth(0x0800, &outer4(47, &gre(0, 0x88b5, &[0u8; 40])));
    let outer = v4(outer4_tuple(47, 0, 0));
    check(lt::ETHERNET, &f, outer, outer, &[Gre]);
    // Versions 2-7 do not exist.
    let f = eth(0x0800, &outer4(47, &gre(0x0002, 0x0800, &inner4())));
    check(lt::ETHERNET, &f, outer, only(Class::Malformed), &[Gre]);
}

#[test]
fn gre_rfc_1701_routing() {
    use Layer::*;
    let outer = v4(outer4_tuple(47, 0, 0));
    // The routing bit with and without checksum, key and sequence number: the entries are
    // walked to the null one and the payload read after it.
    for flags in [0x4000u16, 0xc000, 0x6000, 0x5000, 0xf000] {
        let f = eth(0x0800, &outer4(47, &gre(flags, 0x0800, &inner4())));
        check(lt::ETHERNET, &f, outer, v4(inner4_tuple()), &[Gre]);
    }
    // Only the null entry; entries of length 0 with a family; the most entries walked.
    let f = eth(
        0x0800,
        &outer4(47, &gre_routed(0x4000, 0x86dd, &[], &inner6())),
    );
    check(lt::ETHERNET, &f, outer, v6(inner6_tuple()), &[Gre]);
    let sres = vec![(0x0800u16, 0u8); MAX_GRE_SRES - 1];
    let f = eth(
        0x0800,
        &outer4(47, &gre_routed(0x4000, 0x0800, &sres, &inner4())),
    );
    check(lt::ETHERNET, &f, outer, v4(inner4_tuple()), &[Gre]);
    // One entry more than the bound: malformed, however long the frame.
    let sres = vec![(0x0800u16, 4u8); MAX_GRE_SRES];
    let f = eth(
        0x0800,
        &outer4(47, &gre_routed(0x4000, 0x0800, &sres, &inner4())),
    );
    check(lt::ETHERNET, &f, outer, only(Class::Malformed), &[Gre]);
    // An entry whose length runs past the datagram (complete: malformed) or the capture
    // (truncated); no null entry before the datagram ends.
    let mut g = gre_routed(0x4000, 0x0800, &[(0x0800, 8)], &[]);
    g[8 + 3] = 200;
    let f = eth(0x0800, &outer4(47, &g));
    check(lt::ETHERNET, &f, outer, only(Class::Malformed), &[Gre]);
    let mut cut = f.clone();
    cut[16..18].copy_from_slice(&1500u16.to_be_bytes());
    check(lt::ETHERNET, &cut, outer, only(Class::Truncated), &[Gre]);
    let g = gre_routed(0x4000, 0x0800, &[(0x0800, 8)], &[]);
    let f = eth(0x0800, &outer4(47, &g[..g.len() - 4]));
    check(lt::ETHERNET, &f, outer, only(Class::Malformed), &[Gre]);
    // A zero family with a length is not the end.
    let f = eth(
        0x0800,
        &outer4(47, &gre_routed(0x4000, 0x0800, &[(0, 4)], &inner4())),
    );
    check(lt::ETHERNET, &f, outer, v4(inner4_tuple()), &[Gre]);
}

#[test]
fn gre_version_1_pptp() {
    use Layer::*;
    for (seq, ack) in [(false, false), (true, false), (false, true), (true, true)] {
        let f = eth(0x0800, &outer4(47, &pptp(seq, ack, 0x0021, &inner4())));
        check(
            lt::ETHERNET,
            &f,
            v4(outer4_tuple(47, 0, 0)),
            v4(inner4_tuple()),
            &[Gre],
        );
    }
    // LCP over PPTP: the outer header.
    let f = eth(
        0x0800,
        &outer4(47, &pptp(true, false, 0xc021, &[1, 1, 0, 4])),
    );
    let outer = v4(outer4_tuple(47, 0, 0));
    check(lt::ETHERNET, &f, outer, outer, &[Gre]);
    // PPTP without its key field, or another protocol: malformed.
    let mut g = pptp(false, false, 0x0021, &inner4());
    g[0] &= !0x20;
    let f = eth(0x0800, &outer4(47, &g));
    check(lt::ETHERNET, &f, outer, only(Class::Malformed), &[Gre]);
    // A payload length past the datagram lies.
    let mut g = pptp(false, false, 0x0021, &inner4());
    g[4..6].copy_from_slice(&999u16.to_be_bytes());
    let f = eth(0x0800, &outer4(47, &g));
    check(lt::ETHERNET, &f, outer, only(Class::Malformed), &[Gre]);
}

#[test]
fn erspan_types_i_ii_iii() {
    use Layer::*;
    let mirrored = eth_tagged(0x0800, &[0x8100], &inner4());
    let outer = v4(outer4_tuple(47, 0, 0));
    let inner = v4(inner4_tuple());
    // Type I: no sequence number, no ERSPAN header.
    let f = eth(0x0800, &outer4(47, &gre(0, 0x88be, &mirrored)));
    check(lt::ETHERNET, &f, outer, inner, &[Gre, Erspan]);
    // Type II.
    let f = eth(
        0x0800,
        &outer4(47, &gre(0x1000, 0x88be, &erspan2(&mirrored))),
    );
    check(lt::ETHERNET, &f, outer, inner, &[Gre, Erspan]);
    // Type III, with and without the platform-specific sub-header; frame type 2 is IP.
    for o in [false, true] {
        let f = eth(
            0x0800,
            &outer4(47, &gre(0x1000, 0x22eb, &erspan3(&mirrored, o, 0))),
        );
        check(lt::ETHERNET, &f, outer, inner, &[Gre, Erspan]);
        let f = eth(
            0x0800,
            &outer4(47, &gre(0x1000, 0x22eb, &erspan3(&inner6(), o, 2))),
        );
        check(lt::ETHERNET, &f, outer, v6(inner6_tuple()), &[Gre, Erspan]);
    }
    // A version that does not match.
    let mut e = erspan2(&mirrored);
    e[0] = 0x30;
    let f = eth(0x0800, &outer4(47, &gre(0x1000, 0x88be, &e)));
    check(
        lt::ETHERNET,
        &f,
        outer,
        only(Class::Malformed),
        &[Gre, Erspan],
    );
}

#[test]
fn vxlan_and_geneve() {
    use Layer::*;
    let f = eth(0x0800, &outer4(17, &vxlan(&eth(0x86dd, &inner6()))));
    check(
        lt::ETHERNET,
        &f,
        v4(outer4_tuple(17, 40000, 4789)),
        v6(inner6_tuple()),
        &[Vxlan],
    );
    let f = eth(
        0x86dd,
        &outer6(17, &vxlan(&eth_tagged(0x0800, &[0x8100], &inner4()))),
    );
    check(
        lt::ETHERNET,
        &f,
        v6(outer6_tuple(17, 40000, 4789)),
        v4(inner4_tuple()),
        &[Vxlan],
    );
    // ARP in VXLAN: no inner IP header, the outer one makes the key in both modes.
    let f = eth(0x0800, &outer4(17, &vxlan(&eth(0x0806, &[0u8; 28]))));
    let outer = v4(outer4_tuple(17, 40000, 4789));
    check(lt::ETHERNET, &f, outer, outer, &[Vxlan]);
    for words in [0u8, 1, 5] {
        let f = eth(
            0x0800,
            &outer4(17, &geneve(0x6558, words, &eth(0x0800, &inner4()))),
        );
        let outer = v4(outer4_tuple(17, 40000, 6081));
        check(lt::ETHERNET, &f, outer, v4(inner4_tuple()), &[Geneve]);
        let f = eth(0x0800, &outer4(17, &geneve(0x86dd, words, &inner6())));
        check(lt::ETHERNET, &f, outer, v6(inner6_tuple()), &[Geneve]);
    }
    // GENEVE is decided by its header (RFC 8926 3.4): version 1 does not exist, options
    // longer than the datagram, a protocol type netsift does not decode, or transparent
    // bridging of a frame whose ethertype it does not know: plain UDP, keyed by the outer
    // header with no layer. MPLS and an ARP frame are GENEVE (the ARP keyed by the outer).
    let outer = v4(outer4_tuple(17, 40000, 6081));
    let mut g = geneve(0x0800, 0, &inner4());
    g[8] |= 0x40;
    check(
        lt::ETHERNET,
        &eth(0x0800, &outer4(17, &g)),
        outer,
        outer,
        &[],
    );
    let mut g = geneve(0x0800, 0, &inner4());
    g[8] = 63;
    check(
        lt::ETHERNET,
        &eth(0x0800, &outer4(17, &g)),
        outer,
        outer,
        &[],
    );
    let g = geneve(0x1234, 1, &inner4());
    check(
        lt::ETHERNET,
        &eth(0x0800, &outer4(17, &g)),
        outer,
        outer,
        &[],
    );
    let g = geneve(0x6558, 0, &eth(0x88cc, &[0u8; 40]));
    check(
        lt::ETHERNET,
        &eth(0x0800, &outer4(17, &g)),
        outer,
        outer,
        &[],
    );
    let g = geneve(0x6558, 0, &eth(0x0806, &[0u8; 28]));
    check(
        lt::ETHERNET,
        &eth(0x0800, &outer4(17, &g)),
        outer,
        outer,
        &[Geneve],
    );
    let g = geneve(0x8847, 0, &cat(&[&[0, 0, 0x11, 64], &inner4()]));
    let f = eth(0x0800, &outer4(17, &g));
    check(lt::ETHERNET, &f, outer, v4(inner4_tuple()), &[Geneve, Mpls]);
    // Cut inside the options: which it is cannot be told, no layer.
    let f = eth(0x0800, &outer4(17, &geneve(0x86dd, 5, &inner6())));
    check(
        lt::ETHERNET,
        &f[..14 + 20 + 8 + 12],
        outer,
        only(Class::Truncated),
        &[],
    );
    // A VXLAN frame whose ethertype netsift does not read (LLDP, an 802.3 length) is not
    // taken for VXLAN: plain UDP, keyed by the outer header, never `Malformed`.
    let outer = v4(outer4_tuple(17, 40000, 4789));
    for et in [0x88ccu16, 0x0040] {
        let f = eth(0x0800, &outer4(17, &vxlan(&eth(et, &[0u8; 40]))));
        check(lt::ETHERNET, &f, outer, outer, &[]);
    }
    let f = eth(
        0x0800,
        &outer4(
            17,
            &vxlan(&eth(0x8847, &cat(&[&[0, 0, 0x11, 64], &inner6()]))),
        ),
    );
    check(lt::ETHERNET, &f, outer, v6(inner6_tuple()), &[Vxlan, Mpls]);
    // Raw IP link type, VXLAN from port 4789 is not VXLAN (destination port only).
    let mut u = vxlan(&eth(0x0800, &inner4()));
    u[..4].copy_from_slice(&[0x12, 0xb5, 0x9c, 0x40]);
    let f = outer4(17, &u);
    let plain = v4(outer4_tuple(17, 4789, 40000));
    check(lt::RAW, &f, plain, plain, &[]);
}

#[test]
fn gtp_u() {
    use Layer::*;
    let outer = v4(outer4_tuple(17, 40000, 2152));
    let f = eth(0x0800, &outer4(17, &gtpu(255, false, &[], &inner4())));
    check(lt::ETHERNET, &f, outer, v4(inner4_tuple()), &[GtpU]);
    let f = eth(0x0800, &outer4(17, &gtpu(255, true, &[], &inner6())));
    check(lt::ETHERNET, &f, outer, v6(inner6_tuple()), &[GtpU]);
    let f = eth(0x0800, &outer4(17, &gtpu(255, false, &[1, 2], &inner4())));
    check(lt::ETHERNET, &f, outer, v4(inner4_tuple()), &[GtpU]);
    // Echo request: signalling, keyed by the outer header.
    let f = eth(0x0800, &outer4(17, &gtpu(1, true, &[], &[])));
    check(lt::ETHERNET, &f, outer, outer, &[GtpU]);
    // Its length field lies (longer than the datagram), an extension header of length 0.
    let mut g = gtpu(255, false, &[], &inner4());
    g[10..12].copy_from_slice(&500u16.to_be_bytes());
    check(
        lt::ETHERNET,
        &eth(0x0800, &outer4(17, &g)),
        outer,
        only(Class::Malformed),
        &[GtpU],
    );
    let mut g = gtpu(255, false, &[1], &inner4());
    g[20] = 0;
    check(
        lt::ETHERNET,
        &eth(0x0800, &outer4(17, &g)),
        outer,
        only(Class::Malformed),
        &[GtpU],
    );
    // An extension header running past the declared length.
    let mut g = gtpu(255, false, &[1], &inner4());
    g[20] = 200;
    check(
        lt::ETHERNET,
        &eth(0x0800, &outer4(17, &g)),
        outer,
        only(Class::Malformed),
        &[GtpU],
    );
    // Every GTP-U signalling type (TS 29.281 7.1) is GTP-U, keyed by the outer header.
    for msg in [1u8, 2, 26, 31, 253, 254] {
        let f = eth(0x0800, &outer4(17, &gtpu(msg, true, &[], &[0u8; 4])));
        check(lt::ETHERNET, &f, outer, outer, &[GtpU]);
    }
    // Not GTP-U by its header: GTPv2 (version 2), GTP' (PT 0), the spare bit set, a message
    // type GTP-U does not have (GTPv1-C's create PDP context request, 16): plain UDP.
    for (at, byte) in [(8usize, 0x48u8), (8, 0x20), (8, 0x38), (9, 16)] {
        let mut g = gtpu(255, false, &[], &inner4());
        g[at] = byte;
        check(
            lt::ETHERNET,
            &eth(0x0800, &outer4(17, &g)),
            outer,
            outer,
            &[],
        );
    }
}

#[test]
fn vxlan_on_linux_port_8472() {
    use Layer::*;
    let f = eth(
        0x0800,
        &outer4(17, &vxlan_on(8472, &eth(0x0800, &inner4()))),
    );
    let outer = v4(outer4_tuple(17, 40000, 8472));
    check(lt::ETHERNET, &f, outer, v4(inner4_tuple()), &[Vxlan]);
    let f = eth(
        0x86dd,
        &outer6(17, &vxlan_on(8472, &eth(0x86dd, &inner6()))),
    );
    let outer = v6(outer6_tuple(17, 40000, 8472));
    check(lt::ETHERNET, &f, outer, v6(inner6_tuple()), &[Vxlan]);
}

/// Application datagrams on the VXLAN and MPLS-in-UDP ports (a DNS query to 4789 or 6635, a VXLAN header with a
/// reserved flag bit or its last byte set, a datagram shorter than the header) are plain UDP,
/// keyed by the outer header with no layer, never `Malformed`; VXLAN-GBP's G bit still is
/// VXLAN. A capture cut inside the header records no layer either (it cannot tell).
#[test]
fn not_vxlan_is_plain_udp() {
    use Layer::*;
    // A DNS query (RFC 1035 section 4.1.1): id 0x1234, RD, one question "a." A, IN.
    let dns = [
        0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 1, b'a', 0, 0, 1, 0, 1,
    ];
    for port in [4789u16, 8472, 4790, 6635] {
        let outer = v4(outer4_tuple(17, 40000, port));
        let f = eth(0x0800, &outer4(17, &udp_to(port, &dns)));
        check(lt::ETHERNET, &f, outer, outer, &[]);
        let f = eth(0x0800, &outer4(17, &udp_to(port, &dns[..5])));
        check(lt::ETHERNET, &f, outer, outer, &[]);
    }
    let outer = v4(outer4_tuple(17, 40000, 4789));
    // The same query with id 0x08xx and no answers passes the flags byte; byte 7 (ancount's
    // low byte, here 1) is VXLAN's reserved byte.
    let mut q = dns;
    q[0] = 0x08;
    q[7] = 1;
    let f = eth(0x0800, &outer4(17, &udp_to(4789, &q)));
    check(lt::ETHERNET, &f, outer, outer, &[]);
    for (at, set) in [(0usize, 0x01u8), (0, 0x40), (7, 0x01)] {
        let mut u = vxlan(&eth(0x0800, &inner4()));
        u[8 + at] |= set;
        let f = eth(0x0800, &outer4(17, &u));
        check(lt::ETHERNET, &f, outer, outer, &[]);
    }
    let mut u = vxlan(&eth(0x0800, &inner4()));
    u[8] = 0x80 | 0x08;
    let f = eth(0x0800, &outer4(17, &u));
    check(lt::ETHERNET, &f, outer, v4(inner4_tuple()), &[Vxlan]);
    // Cut inside the VXLAN header: truncated in inner mode, no layer recorded.
    let f = eth(0x0800, &outer4(17, &vxlan(&eth(0x0800, &inner4()))));
    check(
        lt::ETHERNET,
        &f[..14 + 20 + 8 + 4],
        outer,
        only(Class::Truncated),
        &[],
    );
}

#[test]
fn vxlan_gpe_and_nsh() {
    use Layer::*;
    let outer = v4(outer4_tuple(17, 40000, 4790));
    let in4 = v4(inner4_tuple());
    let in6 = v6(inner6_tuple());
    // Next protocol 1 IPv4, 2 IPv6, 3 Ethernet, 5 MPLS.
    let f = eth(0x0800, &outer4(17, &gpe(1, &inner4())));
    check(lt::ETHERNET, &f, outer, in4, &[VxlanGpe]);
    let f = eth(0x0800, &outer4(17, &gpe(2, &inner6())));
    check(lt::ETHERNET, &f, outer, in6, &[VxlanGpe]);
    let f = eth(0x0800, &outer4(17, &gpe(3, &eth(0x0800, &inner4()))));
    check(lt::ETHERNET, &f, outer, in4, &[VxlanGpe]);
    let f = eth(0x0800, &outer4(17, &gpe(5, &mpls(&[20, 21], &inner6()))));
    check(lt::ETHERNET, &f, outer, in6, &[VxlanGpe, Mpls]);
    // 4: NSH, of MD type 1 (4 context words) or 2 (0 to 3 words), carrying each protocol.
    for words in [0u8, 1, 3, 4] {
        let f = eth(0x0800, &outer4(17, &gpe(4, &nsh(1, words, &inner4()))));
        check(lt::ETHERNET, &f, outer, in4, &[VxlanGpe, Nsh]);
        let f = eth(0x0800, &outer4(17, &gpe(4, &nsh(2, words, &inner6()))));
        check(lt::ETHERNET, &f, outer, in6, &[VxlanGpe, Nsh]);
        let f = eth(
            0x0800,
            &outer4(17, &gpe(4, &nsh(3, words, &eth(0x86dd, &inner6())))),
        );
        check(lt::ETHERNET, &f, outer, in6, &[VxlanGpe, Nsh]);
        let f = eth(
            0x0800,
            &outer4(17, &gpe(4, &nsh(5, words, &mpls(&[3], &inner4())))),
        );
        check(lt::ETHERNET, &f, outer, in4, &[VxlanGpe, Nsh, Mpls]);
    }
    // NSH in NSH; NSH straight on Ethernet (ethertype 0x894f: below IP) and in GRE.
    let f = eth(
        0x0800,
        &outer4(17, &gpe(4, &nsh(4, 0, &nsh(1, 1, &inner4())))),
    );
    check(lt::ETHERNET, &f, outer, in4, &[VxlanGpe, Nsh]);
    let f = eth(0x894f, &nsh(2, 2, &inner6()));
    check(lt::ETHERNET, &f, in6, in6, &[Nsh]);
    let f = eth(
        0x0800,
        &outer4(47, &gre(0x2000, 0x894f, &nsh(1, 0, &inner4()))),
    );
    check(
        lt::ETHERNET,
        &f,
        v4(outer4_tuple(47, 0, 0)),
        in4,
        &[Gre, Nsh],
    );
    // Unknown next protocols (0, unassigned, experimental): not a packet; the outer header.
    for np in [0u8, 6, 0x7f, 0xfe, 0xff] {
        let f = eth(0x0800, &outer4(17, &gpe(np, &inner4())));
        check(lt::ETHERNET, &f, outer, outer, &[VxlanGpe]);
        let f = eth(0x0800, &outer4(17, &gpe(4, &nsh(np, 0, &inner4()))));
        check(lt::ETHERNET, &f, outer, outer, &[VxlanGpe, Nsh]);
        let f = eth(0x894f, &nsh(np, 0, &inner4()));
        let non_ip = only(Class::NonIp);
        check(lt::ETHERNET, &f, non_ip, non_ip, &[Nsh]);
    }
    let bad = only(Class::Malformed);
    // A GPE version other than 0, or the I flag clear: not VXLAN-GPE, plain UDP keyed by the
    // outer header in both modes; the P bit is not checked.
    for (set, clear) in [(0x10, 0), (0x20, 0), (0, 0x08)] {
        let mut g = gpe(1, &inner4());
        g[8] = (g[8] | set) & !clear;
        check(
            lt::ETHERNET,
            &eth(0x0800, &outer4(17, &g)),
            outer,
            outer,
            &[],
        );
    }
    let mut g = gpe(1, &inner4());
    g[8] &= !0x04;
    check(
        lt::ETHERNET,
        &eth(0x0800, &outer4(17, &g)),
        outer,
        in4,
        &[VxlanGpe],
    );
    // NSH: version 1; a length below 2 words; MD type 1 with other than 6 words; a length past
    // the datagram (malformed) or past the capture (truncated).
    let nsh_bad = |at: usize, set: u8| {
        let mut n = nsh(1, 0, &inner4());
        n[at] = set;
        eth(0x0800, &outer4(17, &gpe(4, &n)))
    };
    for (at, set) in [(0, 0x4f), (1, 0xc1), (1, 0xc0), (2, 0x01), (1, 0xff)] {
        check(
            lt::ETHERNET,
            &nsh_bad(at, set),
            outer,
            bad,
            &[VxlanGpe, Nsh],
        );
    }
    let mut f = nsh_bad(1, 0xff);
    f[16..18].copy_from_slice(&1500u16.to_be_bytes());
    f[14 + 20 + 4..14 + 20 + 6].copy_from_slice(&0u16.to_be_bytes());
    check(
        lt::ETHERNET,
        &f,
        outer,
        only(Class::Truncated),
        &[VxlanGpe, Nsh],
    );
    // On Ethernet, below IP: the same lies in both modes.
    let mut f = eth(0x894f, &nsh(1, 0, &inner4()));
    f[14] = 0x4f;
    check(lt::ETHERNET, &f, bad, bad, &[Nsh]);
    let f = eth(0x894f, &nsh(1, 0, &inner4()));
    check(
        lt::ETHERNET,
        &f[..14 + 7],
        only(Class::Truncated),
        only(Class::Truncated),
        &[Nsh],
    );
}

#[test]
fn mpls_over_udp() {
    use Layer::*;
    let outer = v4(outer4_tuple(17, 40000, 6635));
    let f = eth(0x0800, &outer4(17, &mpls_udp(&mpls(&[16], &inner4()))));
    check(
        lt::ETHERNET,
        &f,
        outer,
        v4(inner4_tuple()),
        &[MplsUdp, Mpls],
    );
    let f = eth(
        0x0800,
        &outer4(17, &mpls_udp(&mpls(&[16, 17, 18], &inner6()))),
    );
    check(
        lt::ETHERNET,
        &f,
        outer,
        v6(inner6_tuple()),
        &[MplsUdp, Mpls],
    );
    // An Ethernet pseudowire with a control word.
    let pw_frame = eth(0x0800, &inner4());
    let f = eth(0x86dd, &outer6(17, &mpls_udp(&mpls(&[30], &cw(&pw_frame)))));
    check(
        lt::ETHERNET,
        &f,
        v6(outer6_tuple(17, 40000, 6635)),
        v4(inner4_tuple()),
        &[MplsUdp, Mpls, Pseudowire],
    );
    // A stack without its bottom inside a complete datagram is no MPLS-in-UDP payload: plain
    // UDP; cut by the capture it is truncated (in inner mode), and no layer is recorded: the
    // bytes that tell are not there.
    let mut stack = mpls(&[1, 2], &[]);
    stack[6] &= !1;
    let f = eth(0x0800, &outer4(17, &mpls_udp(&stack)));
    check(lt::ETHERNET, &f, outer, outer, &[]);
    let mut cut = f.clone();
    cut[16..18].copy_from_slice(&1500u16.to_be_bytes());
    cut[14 + 20 + 4..14 + 20 + 6].copy_from_slice(&0u16.to_be_bytes());
    check(lt::ETHERNET, &cut, outer, only(Class::Truncated), &[]);
    // A stack longer than the bound is left to the decoder: malformed.
    let labels: Vec<u32> = (16..16 + MAX_MPLS_LABELS as u32 + 1).collect();
    let f = eth(0x0800, &outer4(17, &mpls_udp(&mpls(&labels, &inner4()))));
    check(
        lt::ETHERNET,
        &f,
        outer,
        only(Class::Malformed),
        &[MplsUdp, Mpls],
    );
    // After the bottom of the stack, neither IP nor an Ethernet header with a known ethertype
    // (with or without a control word): plain UDP.
    let f = eth(0x0800, &outer4(17, &mpls_udp(&mpls(&[16], &[0x23; 40]))));
    check(lt::ETHERNET, &f, outer, outer, &[]);
    // The associated channel (first nibble 1) is not a packet: the outer header.
    let f = eth(
        0x0800,
        &outer4(17, &mpls_udp(&mpls(&[13], &[0x10, 0, 0, 0x21]))),
    );
    check(lt::ETHERNET, &f, outer, outer, &[MplsUdp, Mpls]);
}

#[test]
fn ip_in_ip_6in4_4in6_6in6() {
    use Layer::*;
    let f = eth(0x0800, &outer4(4, &inner4()));
    check(
        lt::ETHERNET,
        &f,
        v4(outer4_tuple(4, 0, 0)),
        v4(inner4_tuple()),
        &[IpIp],
    );
    let f = eth(0x0800, &outer4(41, &inner6()));
    check(
        lt::ETHERNET,
        &f,
        v4(outer4_tuple(41, 0, 0)),
        v6(inner6_tuple()),
        &[SixInFour],
    );
    let f = eth(0x86dd, &outer6(4, &inner4()));
    check(
        lt::ETHERNET,
        &f,
        v6(outer6_tuple(4, 0, 0)),
        v4(inner4_tuple()),
        &[FourInSix],
    );
    let f = eth(0x86dd, &outer6(41, &inner6()));
    check(
        lt::ETHERNET,
        &f,
        v6(outer6_tuple(41, 0, 0)),
        v6(inner6_tuple()),
        &[SixInSix],
    );
    // Behind IPv6 extension headers, and on every link type.
    let f = outer6(60, &cat(&[&ext(4, 0), &inner4()]));
    let outer = v6(outer6_tuple(4, 0, 0));
    check(lt::RAW, &f, outer, v4(inner4_tuple()), &[FourInSix]);
    for link in BOTH {
        let f = wrap(link, &outer4(41, &inner6()));
        // The PPPoE link type's frames are inside a PPPoE session.
        let layers: &[Layer] = if link == lt::PPP_ETHER {
            &[Pppoe, SixInFour]
        } else {
            &[SixInFour]
        };
        check(
            link,
            &f,
            v4(outer4_tuple(41, 0, 0)),
            v6(inner6_tuple()),
            layers,
        );
    }
    // The wrong version inside.
    let f = eth(0x0800, &outer4(4, &inner6()));
    check(
        lt::ETHERNET,
        &f,
        v4(outer4_tuple(4, 0, 0)),
        only(Class::Malformed),
        &[IpIp],
    );
}

#[test]
fn tunnel_length_lies_and_cuts() {
    use Layer::*;
    let outer = v4(outer4_tuple(47, 0, 0));
    // The inner IPv4 total length runs past the outer datagram (which is complete): a lie.
    let mut g = gre(0, 0x0800, &inner4());
    g[4 + 2..4 + 4].copy_from_slice(&900u16.to_be_bytes());
    let f = eth(0x0800, &outer4(47, &g));
    check(lt::ETHERNET, &f, outer, only(Class::Malformed), &[Gre]);
    // The same bytes with the outer total length past the capture (a snaplen cut): the inner
    // header is read up to what was captured.
    let mut f = f;
    f[16..18].copy_from_slice(&1500u16.to_be_bytes());
    check(lt::ETHERNET, &f, outer, v4(inner4_tuple()), &[Gre]);
    // A first fragment (MF set) carries only the start of its payload: not a lie.
    let mut f = eth(0x0800, &outer4(47, &g));
    f[20] = 0x20;
    check(lt::ETHERNET, &f, outer, v4(inner4_tuple()), &[Gre]);
    // A later fragment has no tunnel header to look at.
    f[21] = 10;
    check(lt::ETHERNET, &f, outer, outer, &[]);
    // The outer datagram ends inside the inner IPv4 header: malformed; cut there by the
    // capture: truncated.
    let f = eth(0x0800, &outer4(47, &gre(0, 0x0800, &inner4())));
    let mut short = f.clone();
    short[16..18].copy_from_slice(&(20u16 + 4 + 10).to_be_bytes());
    check(lt::ETHERNET, &short, outer, only(Class::Malformed), &[Gre]);
    check(
        lt::ETHERNET,
        &f[..14 + 20 + 4 + 10],
        outer,
        only(Class::Truncated),
        &[Gre],
    );
    // UDP lengths: shorter than its header, longer than the datagram.
    let u_outer = v4(outer4_tuple(17, 40000, 4789));
    for ulen in [0u16, 7] {
        let mut u = vxlan(&eth(0x0800, &inner4()));
        u[4..6].copy_from_slice(&ulen.to_be_bytes());
        let f = eth(0x0800, &outer4(17, &u));
        let inner = if ulen == 0 {
            v4(inner4_tuple())
        } else {
            only(Class::Malformed)
        };
        check(lt::ETHERNET, &f, u_outer, inner, &[Vxlan]);
    }
    let mut u = vxlan(&eth(0x0800, &inner4()));
    u[4..6].copy_from_slice(&3000u16.to_be_bytes());
    let f = eth(0x0800, &outer4(17, &u));
    check(lt::ETHERNET, &f, u_outer, only(Class::Malformed), &[Vxlan]);
    // A GRE header cut by the capture; inside a complete datagram too short for it.
    let f = eth(0x0800, &outer4(47, &gre(0xb000, 0x0800, &inner4())));
    check(
        lt::ETHERNET,
        &f[..14 + 20 + 9],
        outer,
        only(Class::Truncated),
        &[Gre],
    );
    let mut f = f[..14 + 20 + 9].to_vec();
    f[16..18].copy_from_slice(&29u16.to_be_bytes());
    check(lt::ETHERNET, &f, outer, only(Class::Malformed), &[Gre]);
}

#[test]
fn layer_bound() {
    use Layer::*;
    // IP-in-IP nested n deep: up to MAX_LAYERS the innermost header is the key.
    let nest = |n: usize| {
        let mut f = inner4();
        for _ in 0..n {
            f = outer4(4, &f);
        }
        eth(0x0800, &f)
    };
    for n in 1..=MAX_LAYERS {
        check(
            lt::ETHERNET,
            &nest(n),
            v4(outer4_tuple(4, 0, 0)),
            v4(inner4_tuple()),
            &[IpIp],
        );
    }
    // One more: malformed in inner mode; the outer header is still the outer mode's key.
    let f = nest(MAX_LAYERS + 1);
    check(
        lt::ETHERNET,
        &f,
        v4(outer4_tuple(4, 0, 0)),
        only(Class::Malformed),
        &[IpIp],
    );
    // NSH in NSH on Ethernet (below IP): MAX_LAYERS headers are walked, one more is malformed
    // in both modes; behind VXLAN-GPE, GPE counts as one of them.
    let nsh_nest = |n: usize| {
        let mut f = nsh(1, 0, &inner4());
        for _ in 1..n {
            f = nsh(4, 1, &f);
        }
        f
    };
    let want = v4(inner4_tuple());
    check(
        lt::ETHERNET,
        &eth(0x894f, &nsh_nest(MAX_LAYERS)),
        want,
        want,
        &[Nsh],
    );
    let bad = only(Class::Malformed);
    check(
        lt::ETHERNET,
        &eth(0x894f, &nsh_nest(MAX_LAYERS + 1)),
        bad,
        bad,
        &[Nsh],
    );
    let outer = v4(outer4_tuple(17, 40000, 4790));
    let f = eth(0x0800, &outer4(17, &gpe(4, &nsh_nest(MAX_LAYERS - 1))));
    check(lt::ETHERNET, &f, outer, want, &[VxlanGpe, Nsh]);
    let f = eth(0x0800, &outer4(17, &gpe(4, &nsh_nest(MAX_LAYERS))));
    check(lt::ETHERNET, &f, outer, bad, &[VxlanGpe, Nsh]);
    // Below IP the bound holds in both modes: MPLS + pseudowire four times is 8 layers.
    let below = |pairs: usize, last: &[u8]| {
        let mut f = eth(0x8847, &mpls(&[1], last));
        for _ in 1..pairs {
            f = eth(0x8847, &mpls(&[1], &cw(&f)));
        }
        f
    };
    let f = below(4, &cw(&eth(0x0800, &inner4())));
    let want = v4(inner4_tuple());
    check(lt::ETHERNET, &f, want, want, &[Mpls, Pseudowire]);
    let f = below(5, &inner4());
    let bad = only(Class::Malformed);
    check(lt::ETHERNET, &f, bad, bad, &[Mpls, Pseudowire]);
}

#[test]
fn nested_tunnels_take_the_innermost_header() {
    use Layer::*;
    // GRE in IPv6 carrying VXLAN in IPv4 carrying IPv6 over MPLS over a pseudowire.
    let deep = eth(0x8847, &mpls(&[9], &inner6()));
    let mid = ip4([10, 9, 9, 1], [10, 9, 9, 2], 17, &vxlan(&deep));
    let f = eth(0x86dd, &outer6(47, &gre(0x2000, 0x0800, &mid)));
    check(
        lt::ETHERNET,
        &f,
        v6(outer6_tuple(47, 0, 0)),
        v6(inner6_tuple()),
        &[Gre, Vxlan, Mpls],
    );
}

#[test]
fn fast_path_declines_tunnels_only_in_inner_mode() {
    let f = eth(0x0800, &outer4(17, &vxlan(&eth(0x0800, &inner4()))));
    let outer = FlowKey::v4(KeyKind::FiveTuple, SRC4, DST4, 40000, 4789, 17);
    assert_eq!(
        parse_key(lt::ETHERNET, &f, KeyKind::FiveTuple),
        (Class::Ipv4, outer)
    );
    let inner = inner4_tuple().key(KeyKind::FiveTuple);
    assert_eq!(
        parse_key_with(lt::ETHERNET, &f, KeyKind::FiveTuple, Tunnel::Inner),
        (Class::Ipv4, inner)
    );
}

#[test]
fn names_and_counts() {
    let names: Vec<&str> = Layer::ALL.iter().map(|l| l.name()).collect();
    assert_eq!(
        names,
        [
            "mpls",
            "pseudowire",
            "pppoe",
            "gre",
            "erspan",
            "vxlan",
            "vxlan_gpe",
            "nsh",
            "geneve",
            "gtp_u",
            "mpls_udp",
            "ipip",
            "6in4",
            "4in6",
            "6in6"
        ]
    );
    for (i, l) in Layer::ALL.iter().enumerate() {
        assert_eq!(l.index(), i);
    }
    assert_eq!("inner".parse::<Tunnel>(), Ok(Tunnel::Inner));
    assert_eq!("outer".parse::<Tunnel>(), Ok(Tunnel::Outer));
    assert!("middle".parse::<Tunnel>().is_err());
    assert_eq!(Tunnel::default(), Tunnel::Outer);
    let mut c = EncapCounts::default();
    c.add(Encap::NONE);
    c.add(set(&[Layer::Mpls, Layer::Pseudowire]));
    c.add(set(&[Layer::Mpls]));
    assert_eq!(
        (c.plain, c.get(Layer::Mpls), c.get(Layer::Pseudowire)),
        (1, 2, 1)
    );
    let json = serde_json::to_value(c).expect("json");
    assert_eq!(json["plain"], 1);
    assert_eq!(json["mpls"], 2);
    assert_eq!(json["6in4"], 0);
    assert_eq!(json.as_object().map(|o| o.len()), Some(16));
    assert_eq!(
        format!("{:?}", set(&[Layer::Gre, Layer::Vxlan])),
        r#"{"gre", "vxlan"}"#
    );
}

// ---------------------------------------------------------------------------------------------
// Property tests: random stacks of layers around a random inner packet.

/// What the packet is at some point of the build, from the inside out.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Carried {
    Ip { v6: bool },
    Eth,
    Mpls,
    Nsh,
}

/// One wrapping step, applied from the inside out.
#[derive(Clone, Copy, Debug)]
enum Step {
    Mpls(u8),
    Pppoe,
    Gre {
        v6: bool,
        flags: u16,
    },
    Erspan {
        v6: bool,
        kind: u8,
    },
    /// VXLAN on 4789, or on Linux's 8472.
    Vxlan {
        v6: bool,
        linux: bool,
    },
    Gpe {
        v6: bool,
    },
    /// NSH with this many context words (4: MD type 1).
    Nsh(u8),
    Geneve {
        v6: bool,
        words: u8,
    },
    Gtp {
        v6: bool,
        opt: bool,
    },
    MplsUdp {
        v6: bool,
    },
    IpIp {
        v6: bool,
    },
}

struct Built {
    link: u32,
    frame: Vec<u8>,
    outer: Tuple,
    inner: Tuple,
    /// Layers from the outside in.
    layers: Vec<Layer>,
    /// Layers below the outermost IP header.
    below: usize,
}

/// Wrap `f` (a `c`) in `step`, if the step can carry a `c`. Addresses of tunnel headers are
/// told apart by depth.
fn apply(step: Step, f: &[u8], c: Carried, depth: u8) -> Option<(Vec<u8>, Carried, Vec<Layer>)> {
    let ip = |v6: bool, proto: u8, payload: &[u8]| {
        if v6 {
            let mut s = SRC6;
            s[0] = depth;
            ip6(s, DST6, proto, payload)
        } else {
            ip4([10, depth, 0, 1], DST4, proto, payload)
        }
    };
    let et = |c: Carried| match c {
        Carried::Ip { v6: true } => 0x86dd,
        Carried::Ip { v6: false } => 0x0800,
        Carried::Mpls => 0x8847,
        Carried::Eth => 0x6558,
        Carried::Nsh => 0x894f,
    };
    // VXLAN-GPE's and NSH's next protocol.
    let np = |c: Carried| match c {
        Carried::Ip { v6: false } => 1,
        Carried::Ip { v6: true } => 2,
        Carried::Eth => 3,
        Carried::Nsh => 4,
        Carried::Mpls => 5,
    };
    // Ethernet around an IP packet or an MPLS stack, when a step needs a frame.
    let as_eth = |f: &[u8], c: Carried| match c {
        Carried::Eth => Some(f.to_vec()),
        Carried::Ip { .. } | Carried::Mpls | Carried::Nsh => Some(eth_mac(0x02, et(c), f)),
    };
    Some(match step {
        Step::Mpls(n) => {
            let labels: Vec<u32> = (1..=u32::from(n)).collect();
            match c {
                Carried::Ip { .. } => (mpls(&labels, f), Carried::Mpls, vec![Layer::Mpls]),
                Carried::Eth => (
                    mpls(&labels, &cw(f)),
                    Carried::Mpls,
                    vec![Layer::Mpls, Layer::Pseudowire],
                ),
                Carried::Mpls | Carried::Nsh => return None,
            }
        }
        Step::Pppoe => {
            let proto: &[u8] = match c {
                Carried::Ip { v6: false } => &[0x00, 0x21],
                Carried::Ip { v6: true } => &[0x57],
                Carried::Mpls => &[0x02, 0x81],
                Carried::Eth | Carried::Nsh => return None,
            };
            (
                eth(0x8864, &pppoe(proto, f)),
                Carried::Eth,
                vec![Layer::Pppoe],
            )
        }
        Step::Gre { v6, flags } => (
            ip(v6, 47, &gre(flags, et(c), f)),
            Carried::Ip { v6 },
            vec![Layer::Gre],
        ),
        Step::Erspan { v6, kind } => {
            let frame = as_eth(f, c)?;
            let g = match kind {
                0 => gre(0, 0x88be, &frame),
                1 => gre(0x1000, 0x88be, &erspan2(&frame)),
                _ => gre(0x1000, 0x22eb, &erspan3(&frame, kind == 3, 0)),
            };
            (
                ip(v6, 47, &g),
                Carried::Ip { v6 },
                vec![Layer::Gre, Layer::Erspan],
            )
        }
        Step::Vxlan { v6, linux } => (
            ip(
                v6,
                17,
                &vxlan_on(if linux { 8472 } else { 4789 }, &as_eth(f, c)?),
            ),
            Carried::Ip { v6 },
            vec![Layer::Vxlan],
        ),
        Step::Gpe { v6 } => (
            ip(v6, 17, &gpe(np(c), f)),
            Carried::Ip { v6 },
            vec![Layer::VxlanGpe],
        ),
        Step::Nsh(words) => (nsh(np(c), words, f), Carried::Nsh, vec![Layer::Nsh]),
        Step::MplsUdp { v6 } => {
            let (stack, mut ls) = match c {
                Carried::Mpls => (f.to_vec(), vec![]),
                Carried::Ip { .. } => (mpls(&[99], f), vec![Layer::Mpls]),
                Carried::Eth => (mpls(&[99], &cw(f)), vec![Layer::Mpls, Layer::Pseudowire]),
                Carried::Nsh => return None,
            };
            ls.insert(0, Layer::MplsUdp);
            (ip(v6, 17, &mpls_udp(&stack)), Carried::Ip { v6 }, ls)
        }
        Step::Geneve { v6, words } => (
            ip(v6, 17, &geneve(et(c), words, f)),
            Carried::Ip { v6 },
            vec![Layer::Geneve],
        ),
        Step::Gtp { v6, opt } => match c {
            Carried::Ip { .. } => (
                ip(v6, 17, &gtpu(255, opt, &[], f)),
                Carried::Ip { v6 },
                vec![Layer::GtpU],
            ),
            _ => return None,
        },
        Step::IpIp { v6 } => match c {
            Carried::Ip { v6: inner_v6 } => {
                let l = match (v6, inner_v6) {
                    (false, false) => Layer::IpIp,
                    (false, true) => Layer::SixInFour,
                    (true, false) => Layer::FourInSix,
                    (true, true) => Layer::SixInSix,
                };
                (
                    ip(v6, if inner_v6 { 41 } else { 4 }, f),
                    Carried::Ip { v6 },
                    vec![l],
                )
            }
            _ => return None,
        },
    })
}

/// The tuple of the IP header a tunnel step wrapped around its payload (as `apply` builds it).
fn tunnel_tuple(s: Step, v6: bool, depth: u8) -> Tuple {
    let (proto, dport) = match s {
        Step::Gre { .. } | Step::Erspan { .. } => (47, 0),
        Step::Vxlan { linux, .. } => (17, if linux { 8472 } else { 4789 }),
        Step::Gpe { .. } => (17, 4790),
        Step::Geneve { .. } => (17, 6081),
        Step::Gtp { .. } => (17, 2152),
        Step::MplsUdp { .. } => (17, 6635),
        Step::IpIp { .. } => (0, 0),
        Step::Mpls(_) | Step::Pppoe | Step::Nsh(_) => unreachable!("not a tunnel"),
    };
    let sport = if proto == 17 { 40000 } else { 0 };
    let mut t = if v6 {
        let mut src = SRC6;
        src[0] = depth;
        Tuple {
            v6: true,
            src,
            dst: DST6,
            ..Tuple::default()
        }
    } else {
        Tuple::v4([10, depth, 0, 1], DST4, 0, 0, 0)
    };
    (t.sport, t.dport, t.proto) = (sport, dport, proto);
    t
}

/// The stack of `steps` around an inner packet, on Ethernet, or on `link` (PPP, Cisco HDLC) when
/// that link type can carry what the outermost step made.
fn build_stack(inner_v6: bool, steps: &[Step], link: u32) -> Built {
    let (mut f, inner) = if inner_v6 {
        (inner6(), inner6_tuple())
    } else {
        (inner4(), inner4_tuple())
    };
    let mut c = Carried::Ip { v6: inner_v6 };
    let mut outer = inner;
    let mut layers: Vec<Layer> = Vec::new();
    // Layers added since the last IP header was wrapped around (those below the outermost).
    let mut below = 0;
    for (i, &s) in steps.iter().enumerate() {
        let depth = (i + 1) as u8;
        let Some((g, c2, ls)) = apply(s, &f, c, depth) else {
            continue;
        };
        f = g;
        c = c2;
        layers.splice(0..0, ls.iter().copied());
        if let Carried::Ip { v6 } = c {
            below = 0;
            outer = tunnel_tuple(s, v6, depth);
            if let Step::IpIp { .. } = s {
                // The protocol names what the header carries: the previous step's family.
                outer.proto = if layers[0] == Layer::SixInFour || layers[0] == Layer::SixInSix {
                    41
                } else {
                    4
                };
            }
        } else {
            below += ls.len();
        }
    }
    let et = match c {
        Carried::Ip { v6 } => Some(if v6 { 0x86dd } else { 0x0800 }),
        Carried::Mpls => Some(0x8847u16),
        Carried::Nsh => Some(0x894f),
        Carried::Eth => None,
    };
    let ppp = match c {
        Carried::Ip { v6 } => Some(if v6 { 0x0057 } else { 0x0021 }),
        Carried::Mpls => Some(0x0281u16),
        _ => None,
    };
    let (link, frame) = match (link, et, ppp) {
        (lt::PPP | lt::PPP_HDLC, _, Some(proto)) => {
            (link, cat(&[&[0xff, 0x03], &proto.to_be_bytes(), &f]))
        }
        (lt::C_HDLC, Some(et), _) => (link, cat(&[&[0x0f, 0x00], &et.to_be_bytes(), &f])),
        (lt::C_HDLC, None, _) => (link, cat(&[&[0x8f, 0x00, 0x65, 0x58], &f])),
        (_, Some(et), _) => (lt::ETHERNET, eth(et, &f)),
        (_, None, _) => (lt::ETHERNET, f),
    };
    Built {
        link,
        frame,
        outer,
        inner,
        layers,
        below,
    }
}

fn step_strategy() -> impl Strategy<Value = Step> {
    let v6 = any::<bool>();
    prop_oneof![
        (1u8..4).prop_map(Step::Mpls),
        Just(Step::Pppoe),
        (
            v6,
            prop::sample::select(vec![
                0u16, 0x8000, 0x2000, 0x3000, 0xb000, 0x4000, 0xc000, 0x7000
            ])
        )
            .prop_map(|(v6, flags)| Step::Gre { v6, flags }),
        (v6, 0u8..4).prop_map(|(v6, kind)| Step::Erspan { v6, kind }),
        (v6, any::<bool>()).prop_map(|(v6, linux)| Step::Vxlan { v6, linux }),
        v6.prop_map(|v6| Step::Gpe { v6 }),
        (0u8..5).prop_map(Step::Nsh),
        (v6, 0u8..3).prop_map(|(v6, words)| Step::Geneve { v6, words }),
        (v6, any::<bool>()).prop_map(|(v6, opt)| Step::Gtp { v6, opt }),
        v6.prop_map(|v6| Step::MplsUdp { v6 }),
        v6.prop_map(|v6| Step::IpIp { v6 }),
    ]
}

fn link_strategy() -> impl Strategy<Value = u32> {
    prop::sample::select(vec![
        lt::ETHERNET,
        lt::ETHERNET,
        lt::PPP,
        lt::PPP_HDLC,
        lt::C_HDLC,
    ])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3_000, rng_seed: proptest::test_runner::RngSeed::Fixed(0x5eed), ..ProptestConfig::default() })]

    /// A valid stack parses to its outermost IP header in `Outer` mode and its innermost in
    /// `Inner` mode, recording its layers; past `MAX_LAYERS` it is `Malformed` (in `Outer` mode
    /// only when the layers below the outer IP header alone pass it).
    #[test]
    fn stacks_parse_to_their_outer_and_inner_headers(
        inner_v6 in any::<bool>(),
        steps in prop::collection::vec(step_strategy(), 0..7),
        link in link_strategy(),
        cut in any::<prop::sample::Index>(),
    ) {
        let b = build_stack(inner_v6, &steps, link);
        let n = b.layers.len();
        let seen: Encap = b.layers.iter().take(MAX_LAYERS + 1).copied().collect();
        let class_of = |t: &Tuple| if t.v6 { Class::Ipv6 } else { Class::Ipv4 };
        let o = pw(b.link, &b.frame, Tunnel::Outer);
        let i = pw(b.link, &b.frame, Tunnel::Inner);
        if b.below > MAX_LAYERS {
            prop_assert_eq!(o.class, Class::Malformed);
        } else {
            prop_assert_eq!((o.class, o.tuple), (class_of(&b.outer), b.outer));
        }
        if n > MAX_LAYERS {
            prop_assert_eq!(i.class, Class::Malformed);
        } else {
            prop_assert_eq!((i.class, i.tuple), (class_of(&b.inner), b.inner));
        }
        prop_assert_eq!(o.encap, seen);
        prop_assert_eq!(i.encap, seen);
        check_prefix_consistent(b.link, &b.frame, cut.index(b.frame.len() + 1));
    }

    /// Random bytes written over a valid stack, cut anywhere: no panic, the invariants, and
    /// prefix consistency in both modes.
    #[test]
    fn mutated_stacks_are_prefix_consistent(
        inner_v6 in any::<bool>(),
        steps in prop::collection::vec(step_strategy(), 1..6),
        link in link_strategy(),
        muts in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let Built { link, frame: mut f, .. } = build_stack(inner_v6, &steps, link);
        for (i, b) in muts {
            let i = i.index(f.len());
            f[i] = b;
        }
        check_prefix_consistent(link, &f, cut.index(f.len() + 1));
        for kind in KeyKind::ALL {
            for mode in Tunnel::ALL {
                let v = pw(link, &f, mode);
                prop_assert_eq!(
                    parse_key_with(link, &f, kind, mode),
                    (v.class, v.key(kind).unwrap_or(FlowKey::EMPTY))
                );
            }
        }
    }
}
