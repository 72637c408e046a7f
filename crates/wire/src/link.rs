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
    ppp_protocol(p, ctx)
}

/// The PPP protocol field and what it carries.
fn ppp_protocol(p: &[u8], ctx: Ctx) -> View {
    let (num, rest) = match p {
        // The HDLC flag (0x7e) where the protocol should be: the capture kept the frame's
        // octet stuffing (RFC 1662 4.2), as tcpdump's print-ppp.c `handle_ppp` assumes; the
        // frame after the flag is read unstuffed.
        [ppp_hdlc::FLAG, rest @ ..] => return ppp_stuffed(rest, ctx),
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

/// RFC 1662 HDLC-like framing.
mod ppp_hdlc {
    /// The flag sequence between frames (4.1).
    pub const FLAG: u8 = 0x7e;
    /// The control escape (4.2): the next octet is XORed with [`ESCAPED`].
    pub const ESCAPE: u8 = 0x7d;
    pub const ESCAPED: u8 = 0x20;
    /// How many unstuffed bytes of a stuffed frame are decoded: the PPP header and the
    /// longest IPv4 header with its ports (2 + 60 + 4) or an IPv6 header with a few extension
    /// headers. A stack buffer: the parser does not allocate.
    pub const UNSTUFFED: usize = 192;
}

/// A PPP frame that still holds its octet stuffing (0x7d, then the octet XOR 0x20), from just
/// after a flag: the first [`ppp_hdlc::UNSTUFFED`] bytes are unstuffed into a stack buffer and
/// decoded as a frame cut there (a frame that carries IP gets its key; its lengths are not
/// checked against the rest). Like tcpdump's `ppp_hdlc`, an 0xff 0x03 address/control may
/// follow the flag, and the protocol may be an ethertype (0x0800, 0x86dd) as tcpdump reads it.
#[cold]
#[inline(never)]
fn ppp_stuffed(p: &[u8], ctx: Ctx) -> View {
    use ppp_hdlc::*;
    let mut buf = [0u8; UNSTUFFED];
    let mut n = 0;
    let mut i = 0;
    while n < UNSTUFFED && i < p.len() {
        let c = p[i];
        if c == ESCAPE {
            // An escape at the end of what was captured: the octet it escapes is not there.
            let Some(&e) = p.get(i + 1) else { break };
            buf[n] = e ^ ESCAPED;
            i += 2;
        } else {
            buf[n] = c;
            i += 1;
        }
        n += 1;
    }
    let b = &buf[..n];
    // Whatever the frame holds past the buffer is not looked at: as if the capture ended there.
    let ctx = Ctx { cut: true, ..ctx };
    let b = match b {
        [0xff, 0x03, rest @ ..] => rest,
        _ => b,
    };
    match b {
        [0x08, 0x00, rest @ ..] => ip::ipv4(rest, ctx),
        [0x86, 0xdd, rest @ ..] => ip::ipv6(rest, ctx),
        // Another flag or stuffed frame inside: not decoded further (bounded work).
        [FLAG, ..] => ctx.malformed(),
        _ => ppp_protocol(b, ctx),
    }
}

/// LINKTYPE_PPP_PPPD: PPP in HDLC-like framing whose address byte is a direction (0 in, 1
/// out), then control (0x03) and the protocol.
pub(crate) fn ppp_pppd(d: &[u8], ctx: Ctx) -> View {
    match d {
        [0 | 1, 0x03, rest @ ..] => ppp_protocol(rest, ctx),
        [_, _, ..] => ctx.malformed(),
        _ => ctx.short(),
    }
}

/// A one-byte direction pseudo-header (LINKTYPE_PPP_WITH_DIR, LINKTYPE_C_HDLC_WITH_DIR: 0
/// received, anything else sent), then the frame `f` decodes.
pub(crate) fn with_dir(d: &[u8], ctx: Ctx, f: fn(&[u8], Ctx) -> View) -> View {
    match d.split_first() {
        Some((_, rest)) => f(rest, ctx),
        None => ctx.short(),
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
///
/// The control byte after the 0xff address is not checked: RFC 1662 3.1 has only 0x03
/// (unnumbered information), but tcpdump's `ppp_hdlc_if_print` reads past whatever is there,
/// and the protocol field that follows tells what the frame carries.
pub(crate) fn ppp_hdlc(d: &[u8], ctx: Ctx) -> View {
    match d {
        [chdlc::UNICAST | chdlc::BROADCAST, ..] => cisco_hdlc(d, ctx),
        [0xff, _, rest @ ..] => ppp_protocol(rest, ctx),
        [0xff] => ctx.short(),
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
