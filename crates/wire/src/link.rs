//! Link-layer headers: Ethernet (+ VLAN tags), Linux SLL/SLL2, BSD null/loop, PPP (also inside
//! PPPoE and PPTP), Cisco HDLC.

use crate::{encap, ip, Class, Ctx, View, MAX_VLAN_TAGS};

/// Ethertypes.
pub(crate) mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const IPV6: u16 = 0x86dd;
    pub const VLAN: u16 = 0x8100;
    pub const QINQ: u16 = 0x88a8;
    pub const QINQ_OLD: u16 = 0x9100;
    pub const ARP: u16 = 0x0806;
    pub const MPLS: u16 = 0x8847;
    pub const MPLS_MULTICAST: u16 = 0x8848;
    pub const PPPOE_SESSION: u16 = 0x8864;
    /// Network Service Header (RFC 8300).
    pub const NSH: u16 = 0x894f;
    /// Transparent Ethernet bridging: the payload is an Ethernet frame (GRE, GENEVE).
    pub const TEB: u16 = 0x6558;
}

mod eth {
    pub const HEADER_LEN: usize = 14;
    pub const ETHERTYPE: usize = 12;
    /// A VLAN tag: 2 bytes TCI, then the inner ethertype.
    pub const TAG_LEN: usize = 4;
    pub const TAG_ETHERTYPE: usize = 2;
}

mod sll {
    pub const HEADER_LEN: usize = 16;
    pub const PROTOCOL: usize = 14;
}

mod sll2 {
    pub const HEADER_LEN: usize = 20;
    pub const PROTOCOL: usize = 0;
}

/// BSD address families that mean IPv4/IPv6 in null/loop headers.
mod af {
    pub const INET: u32 = 2;
    /// NetBSD/OpenBSD, FreeBSD, macOS values of AF_INET6 (all appear in captures).
    pub const INET6: [u32; 3] = [24, 28, 30];
}

#[inline]
fn be16(b: &[u8], at: usize) -> u16 {
    // Callers pass fixed-size header arrays and constant offsets inside them; `get` keeps this
    // total anyway (a missing byte reads as 0, which no caller can reach).
    match b.get(at..at + 2) {
        Some(&[x, y]) => u16::from_be_bytes([x, y]),
        _ => 0,
    }
}

#[inline]
pub(crate) fn ethernet(d: &[u8], ctx: Ctx) -> View {
    let Some((h, rest)) = d.split_first_chunk::<{ eth::HEADER_LEN }>() else {
        return ctx.short();
    };
    let et = u16::from_be_bytes([h[eth::ETHERTYPE], h[eth::ETHERTYPE + 1]]);
    // The common case first: untagged IPv4 goes straight to the IP parser.
    if et == ethertype::IPV4 {
        return ip::ipv4(rest, ctx);
    }
    by_ethertype(et, rest, ctx)
}

/// The ethertype of an Ethernet header at the start of `d`, if captured.
#[inline]
pub(crate) fn ethertype_at(d: &[u8], at: usize) -> Option<u16> {
    match d.get(at..at + 2) {
        Some(&[x, y]) => Some(u16::from_be_bytes([x, y])),
        _ => None,
    }
}

/// Dispatch on an ethertype, walking VLAN tags first.
#[inline]
pub(crate) fn by_ethertype(mut et: u16, mut rest: &[u8], ctx: Ctx) -> View {
    let mut tags = 0;
    while matches!(et, ethertype::VLAN | ethertype::QINQ | ethertype::QINQ_OLD) {
        if tags == MAX_VLAN_TAGS {
            return ctx.malformed();
        }
        let Some((tag, r)) = rest.split_first_chunk::<{ eth::TAG_LEN }>() else {
            return ctx.short();
        };
        et = be16(tag, eth::TAG_ETHERTYPE);
        rest = r;
        tags += 1;
    }
    match et {
        ethertype::IPV4 => ip::ipv4(rest, ctx),
        ethertype::IPV6 => ip::ipv6(rest, ctx),
        ethertype::MPLS | ethertype::MPLS_MULTICAST => encap::mpls(rest, ctx),
        ethertype::PPPOE_SESSION => encap::pppoe(rest, ctx),
        ethertype::NSH => encap::nsh(rest, ctx),
        // 802.3 length fields (< 0x0600), ARP, LLDP, PPPoE discovery, Cisco SLARP, ...
        _ => ctx.view(Class::NonIp),
    }
}

pub(crate) fn sll(d: &[u8], ctx: Ctx) -> View {
    let Some((h, rest)) = d.split_first_chunk::<{ sll::HEADER_LEN }>() else {
        return ctx.short();
    };
    by_ethertype(be16(h, sll::PROTOCOL), rest, ctx)
}

pub(crate) fn sll2(d: &[u8], ctx: Ctx) -> View {
    let Some((h, rest)) = d.split_first_chunk::<{ sll2::HEADER_LEN }>() else {
        return ctx.short();
    };
    by_ethertype(be16(h, sll2::PROTOCOL), rest, ctx)
}

fn by_family(fam: u32, rest: &[u8], ctx: Ctx) -> Option<View> {
    if fam == af::INET {
        Some(ip::ipv4(rest, ctx))
    } else if af::INET6.contains(&fam) {
        Some(ip::ipv6(rest, ctx))
    } else {
        None
    }
}

/// LINKTYPE_NULL: the family is in the capturing host's byte order, which the file does not
/// record, so try both; the valid values are small, so no value means different families in
/// the two orders.
pub(crate) fn null(d: &[u8], ctx: Ctx) -> View {
    let Some((h, rest)) = d.split_first_chunk::<4>() else {
        return ctx.short();
    };
    by_family(u32::from_le_bytes(*h), rest, ctx)
        .or_else(|| by_family(u32::from_be_bytes(*h), rest, ctx))
        .unwrap_or(ctx.view(Class::NonIp))
}

/// LINKTYPE_LOOP: the family is always in network byte order.
pub(crate) fn loopback(d: &[u8], ctx: Ctx) -> View {
    let Some((h, rest)) = d.split_first_chunk::<4>() else {
        return ctx.short();
    };
    by_family(u32::from_be_bytes(*h), rest, ctx).unwrap_or(ctx.view(Class::NonIp))
}

/// PPP protocol numbers (RFC 1661 and IANA).
mod ppp_proto {
    pub const IPV4: u16 = 0x0021;
    pub const IPV6: u16 = 0x0057;
    pub const MPLS: u16 = 0x0281;
    pub const MPLS_MULTICAST: u16 = 0x0283;
}

/// A PPP frame (LINKTYPE_PPP, or inside PPPoE or PPTP): an optional 0xff 0x03 address/control
/// (RFC 1662 HDLC-like framing), then a protocol field of 2 bytes, or 1 when compressed (RFC 1661
/// 6.5: the first byte odd).
pub(crate) fn ppp(p: &[u8], ctx: Ctx) -> View {
    let mut p = p;
    if p.first() == Some(&0xff) {
        // No protocol number starts with 0xff: this is the address field, and control follows.
        match p.get(1) {
            None => return ctx.short(),
            Some(0x03) => p = &p[2..],
            Some(_) => return ctx.malformed(),
        }
    }
    let (num, rest) = match p {
        [] => return ctx.short(),
        [b, rest @ ..] if b & 1 == 1 => (u16::from(*b), rest),
        [_] => return ctx.short(),
        [a, b, rest @ ..] => (u16::from_be_bytes([*a, *b]), rest),
    };
    match num {
        ppp_proto::IPV4 => ip::ipv4(rest, ctx),
        ppp_proto::IPV6 => ip::ipv6(rest, ctx),
        ppp_proto::MPLS | ppp_proto::MPLS_MULTICAST => encap::mpls(rest, ctx),
        // LCP, IPCP, CCP, ...: control traffic.
        _ => ctx.view(Class::NonIp),
    }
}

/// Cisco HDLC addresses (RFC 1547 4.3.1).
mod chdlc {
    pub const UNICAST: u8 = 0x0f;
    pub const BROADCAST: u8 = 0x8f;
    /// Address, control, protocol (an ethertype).
    pub const HEADER_LEN: usize = 4;
    pub const PROTOCOL: usize = 2;
}

/// LINKTYPE_PPP_HDLC (DLT_PPP_SERIAL): PPP in HDLC-like framing, or Cisco HDLC when the first
/// byte is a Cisco address (0x0f, 0x8f), as libpcap documents and tcpdump reads it.
pub(crate) fn ppp_hdlc(d: &[u8], ctx: Ctx) -> View {
    match d.first() {
        Some(&(chdlc::UNICAST | chdlc::BROADCAST)) => cisco_hdlc(d, ctx),
        _ => ppp(d, ctx),
    }
}

/// LINKTYPE_C_HDLC: address, control, then an ethertype (0x0800 IPv4, 0x86dd IPv6, 0x8847 MPLS,
/// 0x6558 bridged Ethernet; SLARP 0x8035, CDP 0x2000 and the rest are not IP). The address and
/// control bytes are not checked (tcpdump and Wireshark do not either).
pub(crate) fn cisco_hdlc(d: &[u8], ctx: Ctx) -> View {
    let Some((h, rest)) = d.split_first_chunk::<{ chdlc::HEADER_LEN }>() else {
        return ctx.short();
    };
    encap::by_ethertype(be16(h, chdlc::PROTOCOL), rest, ctx)
}
