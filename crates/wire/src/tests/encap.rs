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

/// GRE version 0 with the optional fields its flags announce (filled with marker bytes).
fn gre(flags: u16, ptype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&flags.to_be_bytes());
    f.extend_from_slice(&ptype.to_be_bytes());
    for bit in [0x8000u16, 0x2000, 0x1000] {
        if flags & bit != 0 {
            f.extend_from_slice(&[0xc5; 4]);
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
    udp_to(4789, &cat(&[&[0x08, 0, 0, 0, 0, 0x12, 0x34, 0], frame]))
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
    // A payload that is not a packet keeps the outer header in both modes; so does a routing
    // field (RFC 1701), which is not walked.
    let f = eth(0x0800, &outer4(47, &gre(0, 0x88b5, &[0u8; 40])));
    let outer = v4(outer4_tuple(47, 0, 0));
    check(lt::ETHERNET, &f, outer, outer, &[Gre]);
    let f = eth(0x0800, &outer4(47, &gre(0x4000, 0x0800, &inner4())));
    check(lt::ETHERNET, &f, outer, outer, &[Gre]);
    // Versions 2-7 do not exist.
    let f = eth(0x0800, &outer4(47, &gre(0x0002, 0x0800, &inner4())));
    check(lt::ETHERNET, &f, outer, only(Class::Malformed), &[Gre]);
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
    // GENEVE version 1 does not exist; options longer than the datagram lie.
    let outer = v4(outer4_tuple(17, 40000, 6081));
    let mut g = geneve(0x0800, 0, &inner4());
    g[8] |= 0x40;
    check(
        lt::ETHERNET,
        &eth(0x0800, &outer4(17, &g)),
        outer,
        only(Class::Malformed),
        &[Geneve],
    );
    let mut g = geneve(0x0800, 0, &inner4());
    g[8] = 63;
    check(
        lt::ETHERNET,
        &eth(0x0800, &outer4(17, &g)),
        outer,
        only(Class::Malformed),
        &[Geneve],
    );
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
    // GTPv2 on the GTP-U port.
    let mut g = gtpu(255, false, &[], &inner4());
    g[8] = 0x48;
    check(
        lt::ETHERNET,
        &eth(0x0800, &outer4(17, &g)),
        outer,
        only(Class::Malformed),
        &[GtpU],
    );
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
        check(
            link,
            &f,
            v4(outer4_tuple(41, 0, 0)),
            v6(inner6_tuple()),
            &[SixInFour],
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
            "geneve",
            "gtp_u",
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
    assert_eq!(json.as_object().map(|o| o.len()), Some(13));
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
}

/// One wrapping step, applied from the inside out.
#[derive(Clone, Copy, Debug)]
enum Step {
    Mpls(u8),
    Pppoe,
    Gre { v6: bool, flags: u16 },
    Erspan { v6: bool, kind: u8 },
    Vxlan { v6: bool },
    Geneve { v6: bool, words: u8 },
    Gtp { v6: bool, opt: bool },
    IpIp { v6: bool },
}

struct Built {
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
    };
    // Ethernet around an IP packet or an MPLS stack, when a step needs a frame.
    let as_eth = |f: &[u8], c: Carried| match c {
        Carried::Eth => Some(f.to_vec()),
        Carried::Ip { .. } | Carried::Mpls => Some(eth_mac(0x02, et(c), f)),
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
                Carried::Mpls => return None,
            }
        }
        Step::Pppoe => {
            let proto: &[u8] = match c {
                Carried::Ip { v6: false } => &[0x00, 0x21],
                Carried::Ip { v6: true } => &[0x57],
                Carried::Mpls => &[0x02, 0x81],
                Carried::Eth => return None,
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
        Step::Vxlan { v6 } => (
            ip(v6, 17, &vxlan(&as_eth(f, c)?)),
            Carried::Ip { v6 },
            vec![Layer::Vxlan],
        ),
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
        Step::Vxlan { .. } => (17, 4789),
        Step::Geneve { .. } => (17, 6081),
        Step::Gtp { .. } => (17, 2152),
        Step::IpIp { .. } => (0, 0),
        Step::Mpls(_) | Step::Pppoe => unreachable!("not a tunnel"),
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

fn build_stack(inner_v6: bool, steps: &[Step]) -> Built {
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
    let frame = match c {
        Carried::Ip { v6 } => eth(if v6 { 0x86dd } else { 0x0800 }, &f),
        Carried::Mpls => eth(0x8847, &f),
        Carried::Eth => f,
    };
    Built {
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
            prop::sample::select(vec![0u16, 0x8000, 0x2000, 0x3000, 0xb000])
        )
            .prop_map(|(v6, flags)| Step::Gre { v6, flags }),
        (v6, 0u8..4).prop_map(|(v6, kind)| Step::Erspan { v6, kind }),
        v6.prop_map(|v6| Step::Vxlan { v6 }),
        (v6, 0u8..3).prop_map(|(v6, words)| Step::Geneve { v6, words }),
        (v6, any::<bool>()).prop_map(|(v6, opt)| Step::Gtp { v6, opt }),
        v6.prop_map(|v6| Step::IpIp { v6 }),
    ]
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
        cut in any::<prop::sample::Index>(),
    ) {
        let b = build_stack(inner_v6, &steps);
        let n = b.layers.len();
        let seen: Encap = b.layers.iter().take(MAX_LAYERS + 1).copied().collect();
        let class_of = |t: &Tuple| if t.v6 { Class::Ipv6 } else { Class::Ipv4 };
        let o = pw(lt::ETHERNET, &b.frame, Tunnel::Outer);
        let i = pw(lt::ETHERNET, &b.frame, Tunnel::Inner);
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
        check_prefix_consistent(lt::ETHERNET, &b.frame, cut.index(b.frame.len() + 1));
    }

    /// Random bytes written over a valid stack, cut anywhere: no panic, the invariants, and
    /// prefix consistency in both modes.
    #[test]
    fn mutated_stacks_are_prefix_consistent(
        inner_v6 in any::<bool>(),
        steps in prop::collection::vec(step_strategy(), 1..6),
        muts in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut f = build_stack(inner_v6, &steps).frame;
        for (i, b) in muts {
            let i = i.index(f.len());
            f[i] = b;
        }
        check_prefix_consistent(lt::ETHERNET, &f, cut.index(f.len() + 1));
        for kind in KeyKind::ALL {
            for mode in Tunnel::ALL {
                let v = pw(lt::ETHERNET, &f, mode);
                prop_assert_eq!(
                    parse_key_with(lt::ETHERNET, &f, kind, mode),
                    (v.class, v.key(kind).unwrap_or(FlowKey::EMPTY))
                );
            }
        }
    }
}
