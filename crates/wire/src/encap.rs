//! Encapsulations: MPLS label stacks (with Ethernet pseudowires), PPPoE sessions and NSH below IP;
//! GRE (with RFC 1701 source routing, PPTP and ERSPAN), VXLAN, VXLAN-GPE, GENEVE, GTP-U, MPLS over
//! UDP, IP-in-IP, 6in4, 4in6 and 6in6 above it.
//!
//! Hand-written like the rest of the crate rather than built on a packet library (etherparse,
//! pnet): this code runs on the parser's hot path, and what it must do is narrow and precise:
//! never allocate, never read past a length any enclosing header declared, tell a cut capture
//! (`Truncated`) from a header that lies (`Malformed`), and cost nothing on a frame that carries
//! no encapsulation. Every entry point here is `#[cold]` and out of line, so the common
//! Ethernet/IP path keeps its size and its inlining; the crate docs give the semantics.
//!
//! Each decoder takes the bytes its container holds (already cut to any declared length) and a
//! [`Ctx`]; it enters its layer (bounded by `MAX_LAYERS`, recording the layer), checks its header
//! against those bytes, and hands the payload on.

use crate::ip::{self, proto};
use crate::link::{self, ethertype};
use crate::{Class, Ctx, Layer, Tunnel, View, MAX_GRE_SRES, MAX_MPLS_LABELS};

/// UDP destination ports of the UDP tunnels.
pub(crate) mod port {
    pub const VXLAN: u16 = 4789;
    /// Linux's VXLAN port before IANA's (still its default when `dstport` is not given).
    pub const VXLAN_LINUX: u16 = 8472;
    pub const VXLAN_GPE: u16 = 4790;
    pub const GENEVE: u16 = 6081;
    pub const GTP_U: u16 = 2152;
    /// RFC 7510.
    pub const MPLS_UDP: u16 = 6635;
}

/// Whether an IP payload of protocol `p` (UDP: to destination port `dport`) is a tunnel. The only
/// test the common path pays: a TCP segment fails it at the first compare.
#[inline(always)]
pub(crate) fn is_tunnel(p: u8, dport: u16) -> bool {
    match p {
        proto::TCP => false,
        proto::UDP => matches!(
            dport,
            port::VXLAN
                | port::VXLAN_LINUX
                | port::VXLAN_GPE
                | port::GENEVE
                | port::GTP_U
                | port::MPLS_UDP
        ),
        proto::IPIP | proto::IPV6 | proto::GRE => true,
        _ => false,
    }
}

/// Unwrap a `Result<Ctx | bytes, View>` or return its view.
macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(x) => x,
            Err(v) => return v,
        }
    };
}

#[inline]
fn be16(b: &[u8], at: usize) -> Option<u16> {
    match b.get(at..at + 2) {
        Some(&[x, y]) => Some(u16::from_be_bytes([x, y])),
        _ => None,
    }
}

/// The IP packet `outer` (addresses, protocol and ports read) carries a tunnel in
/// `d[off..end]`; `cut`: that payload ends where the capture (or a first fragment) ended.
/// `Outer` mode keeps `outer` and records the layers inside; `Inner` mode takes the innermost
/// IP header, or `outer` when the tunnel carries no IP, or the tunnel's `Truncated`/`Malformed`.
#[cold]
#[inline(never)]
pub(crate) fn ip_payload(
    outer: View,
    d: &[u8],
    off: usize,
    end: usize,
    cut: bool,
    ctx: Ctx,
) -> View {
    // `off > end` (an AH longer than the datagram) leaves nothing: the tunnel header is short.
    let p = d.get(off..end).unwrap_or(&[]);
    let inner = tunnel(outer.tuple.proto, outer.tuple.v6, p, Ctx { cut, ..ctx });
    match (ctx.mode, inner.class) {
        (Tunnel::Inner, Class::Ipv4 | Class::Ipv6 | Class::Truncated | Class::Malformed) => inner,
        _ => View {
            encap: inner.encap,
            ..outer
        },
    }
}

fn tunnel(p_proto: u8, outer_v6: bool, p: &[u8], ctx: Ctx) -> View {
    match p_proto {
        proto::IPIP => {
            let l = if outer_v6 {
                Layer::FourInSix
            } else {
                Layer::IpIp
            };
            ip::ipv4(p, tri!(ctx.enter(l)))
        }
        proto::IPV6 => {
            let l = if outer_v6 {
                Layer::SixInSix
            } else {
                Layer::SixInFour
            };
            ip::ipv6(p, tri!(ctx.enter(l)))
        }
        proto::GRE => gre(p, ctx),
        proto::UDP => udp(p, ctx),
        _ => ctx.view(Class::NonIp),
    }
}

/// An Ethernet frame, or a payload named by an ethertype, inside a layer (GRE, GENEVE, Cisco
/// HDLC).
pub(crate) fn by_ethertype(et: u16, p: &[u8], ctx: Ctx) -> View {
    if et == ethertype::TEB {
        link::ethernet(p, ctx)
    } else {
        link::by_ethertype(et, p, ctx)
    }
}

// ---------------------------------------------------------------------------------------------
// Below IP.

/// MPLS label stack entries (RFC 3032): label 20 bits, TC 3, bottom of stack 1, TTL 8.
mod mpls_hdr {
    pub const ENTRY_LEN: usize = 4;
    pub const BOS_BYTE: usize = 2;
    /// RFC 4385 pseudowire control word; then an Ethernet header, its ethertype at 12.
    pub const CONTROL_WORD_LEN: usize = 4;
}

#[cold]
#[inline(never)]
pub(crate) fn mpls(d: &[u8], ctx: Ctx) -> View {
    let ctx = tri!(ctx.enter(Layer::Mpls));
    let mut rest = d;
    let mut labels = 0;
    loop {
        let Some((e, r)) = rest.split_first_chunk::<{ mpls_hdr::ENTRY_LEN }>() else {
            return ctx.short();
        };
        rest = r;
        labels += 1;
        if e[mpls_hdr::BOS_BYTE] & 1 == 1 {
            break;
        }
        if labels == MAX_MPLS_LABELS {
            return ctx.malformed();
        }
    }
    match rest.first().map(|b| b >> 4) {
        None => ctx.short(),
        Some(4) => ip::ipv4(rest, ctx),
        Some(6) => ip::ipv6(rest, ctx),
        // Pseudowire associated channel (RFC 4385 5): OAM, not a packet.
        Some(1) => ctx.view(Class::NonIp),
        Some(0) => pseudowire_zero_nibble(rest, ctx),
        // An Ethernet pseudowire without control word: the destination MAC.
        Some(_) => link::ethernet(rest, tri!(ctx.enter(Layer::Pseudowire))),
    }
}

/// Ethertypes that make "an Ethernet header starts here" plausible.
fn known_ethertype(et: u16) -> bool {
    matches!(
        et,
        ethertype::IPV4
            | ethertype::IPV6
            | ethertype::VLAN
            | ethertype::QINQ
            | ethertype::QINQ_OLD
            | ethertype::ARP
            | ethertype::MPLS
            | ethertype::MPLS_MULTICAST
            | ethertype::PPPOE_SESSION
    )
}

/// An MPLS payload starting with a 0 nibble: a control word then Ethernet (the RFC 4448
/// recommendation and what the first nibble 0 exists for), unless only the reading without it
/// (a destination MAC starting with a 0 nibble) gives a known ethertype. Both ethertypes must
/// be captured before choosing, so a longer capture never changes the reading.
fn pseudowire_zero_nibble(p: &[u8], ctx: Ctx) -> View {
    let ctx = tri!(ctx.enter(Layer::Pseudowire));
    const CW: usize = mpls_hdr::CONTROL_WORD_LEN;
    let (Some(with_cw), Some(without)) =
        (link::ethertype_at(p, CW + 12), link::ethertype_at(p, 12))
    else {
        return ctx.short();
    };
    if !known_ethertype(with_cw) && known_ethertype(without) {
        link::ethernet(p, ctx)
    } else {
        link::ethernet(&p[CW..], ctx)
    }
}

/// PPPoE session stage (RFC 2516): version/type 0x11, code 0, session id, length of the payload.
mod pppoe_hdr {
    pub const HEADER_LEN: usize = 6;
    pub const VER_TYPE: u8 = 0x11;
    pub const LENGTH: usize = 4;
}

#[cold]
#[inline(never)]
pub(crate) fn pppoe(d: &[u8], ctx: Ctx) -> View {
    let ctx = tri!(ctx.enter(Layer::Pppoe));
    let Some(h) = d.first_chunk::<{ pppoe_hdr::HEADER_LEN }>() else {
        return ctx.short();
    };
    if h[0] != pppoe_hdr::VER_TYPE || h[1] != 0 {
        return ctx.malformed();
    }
    let len = usize::from(u16::from_be_bytes([
        h[pppoe_hdr::LENGTH],
        h[pppoe_hdr::LENGTH + 1],
    ]));
    let (body, ctx) = tri!(ctx.declared(d, pppoe_hdr::HEADER_LEN + len, pppoe_hdr::HEADER_LEN));
    link::ppp(&body[pppoe_hdr::HEADER_LEN..], ctx)
}

// ---------------------------------------------------------------------------------------------
// Above IP.

/// GRE (RFC 2784, 2890; RFC 1701 for the routing field; version 1: RFC 2637).
mod gre_hdr {
    pub const BASE_LEN: usize = 4;
    /// An RFC 1701 Source Route Entry: address family (2 bytes), SRE offset, SRE length, then
    /// that many bytes of routing information. A null entry (family 0, length 0) ends the list.
    pub const SRE_LEN: usize = 4;
    pub const CHECKSUM: u16 = 0x8000;
    pub const ROUTING: u16 = 0x4000;
    pub const KEY: u16 = 0x2000;
    pub const SEQUENCE: u16 = 0x1000;
    /// Version 1 only: an acknowledgment number follows.
    pub const ACK: u16 = 0x0080;
    pub const VERSION: u16 = 0x0007;
    /// Version 1 (PPTP): the key field holds the payload length (then the call id).
    pub const PPTP_PAYLOAD_LEN: usize = 4;
    pub const PPTP_PPP: u16 = 0x880b;
    pub const ERSPAN_I_II: u16 = 0x88be;
    pub const ERSPAN_III: u16 = 0x22eb;
}

fn gre(p: &[u8], ctx: Ctx) -> View {
    use gre_hdr::*;
    let ctx = tri!(ctx.enter(Layer::Gre));
    let (Some(flags), Some(ptype)) = (be16(p, 0), be16(p, 2)) else {
        return ctx.short();
    };
    let word = |bit: u16| if flags & bit != 0 { 4 } else { 0 };
    match flags & VERSION {
        0 => {
            // RFC 1701: checksum and offset are both there when either the checksum or the
            // routing bit is set; the routing field comes after key and sequence number.
            let mut len = BASE_LEN + word(CHECKSUM | ROUTING) + word(KEY) + word(SEQUENCE);
            if flags & ROUTING != 0 {
                len = tri!(gre_routing(p, len, ctx));
            }
            let Some(rest) = p.get(len..) else {
                return ctx.short();
            };
            match ptype {
                ERSPAN_I_II => erspan(rest, flags & SEQUENCE != 0, ctx),
                ERSPAN_III => erspan(rest, true, ctx),
                _ => by_ethertype(ptype, rest, ctx),
            }
        }
        1 => {
            if ptype != PPTP_PPP || flags & KEY == 0 {
                return ctx.malformed();
            }
            let len = BASE_LEN + 4 + word(SEQUENCE) + word(ACK);
            let Some(payload) = be16(p, PPTP_PAYLOAD_LEN) else {
                return ctx.short();
            };
            let (body, ctx) = tri!(ctx.declared(p, len + usize::from(payload), len));
            link::ppp(&body[len..], ctx)
        }
        // Versions 2-7 do not exist.
        _ => ctx.malformed(),
    }
}

/// The RFC 1701 routing field of a GRE header at `p[off..]`: Source Route Entries up to the
/// null one, at most [`MAX_GRE_SRES`] (then `Malformed`). The offset just past it. (RFC 2784
/// receivers discard such packets; Wireshark and tcpdump walk the entries, as here.)
fn gre_routing(p: &[u8], mut off: usize, ctx: Ctx) -> Result<usize, View> {
    use gre_hdr::SRE_LEN;
    for _ in 0..MAX_GRE_SRES {
        let Some(&[af0, af1, _sre_offset, len]) = p.get(off..off + SRE_LEN) else {
            return Err(ctx.short());
        };
        off += SRE_LEN + usize::from(len);
        if [af0, af1, len] == [0, 0, 0] {
            return Ok(off);
        }
    }
    Err(ctx.malformed())
}

/// ERSPAN inside GRE: type I has no header (GRE without a sequence number), type II an 8-byte
/// header of version 1, type III a 12-byte header of version 2 plus 8 bytes when its O flag
/// (the low bit of byte 11) is set. Then the mirrored frame: Ethernet, or for type III with
/// frame type 2 (bits 2-6 of byte 10) an IP packet.
fn erspan(p: &[u8], has_header: bool, ctx: Ctx) -> View {
    let ctx = tri!(ctx.enter(Layer::Erspan));
    if !has_header {
        return link::ethernet(p, ctx);
    }
    let Some(&first) = p.first() else {
        return ctx.short();
    };
    let (len, frame_type) = match first >> 4 {
        1 => (8, 0),
        2 => match (p.get(10), p.get(11)) {
            (Some(ft), Some(o)) => (if o & 1 == 1 { 20 } else { 12 }, (ft >> 2) & 0x1f),
            _ => return ctx.short(),
        },
        _ => return ctx.malformed(),
    };
    let Some(rest) = p.get(len..) else {
        return ctx.short();
    };
    match frame_type {
        0 => link::ethernet(rest, ctx),
        2 => ip::raw(rest, ctx),
        _ => ctx.view(Class::NonIp),
    }
}

mod udp_hdr {
    pub const HEADER_LEN: usize = 8;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
}

/// A UDP datagram to a tunnel port: its length field bounds the tunnel (0: as long as the IP
/// payload, as for IPv6 jumbograms).
fn udp(p: &[u8], ctx: Ctx) -> View {
    use udp_hdr::*;
    // The port names the layer; it is recorded once the tunnel's header is seen (or the
    // datagram's length lies), so a longer capture never records fewer layers.
    let layer = match be16(p, DST_PORT) {
        Some(port::VXLAN | port::VXLAN_LINUX) => Layer::Vxlan,
        Some(port::VXLAN_GPE) => Layer::VxlanGpe,
        Some(port::GENEVE) => Layer::Geneve,
        Some(port::GTP_U) => Layer::GtpU,
        Some(port::MPLS_UDP) => Layer::MplsUdp,
        Some(_) => return ctx.view(Class::NonIp),
        None => return ctx.short(),
    };
    // The context outside the tunnel: a datagram whose header is not the port's tunnel's is
    // plain UDP, keyed by the outer header with no layer recorded (`ip_payload` keeps `outer`
    // for `NonIp` in both modes).
    let plain = ctx;
    let ctx = tri!(ctx.enter(layer));
    // A UDP header cut by the capture records no tunnel: its payload is not there to tell (see
    // below); a length that lies is `Malformed` in the port's layer.
    let Some(len) = be16(p, LENGTH) else {
        return plain.short();
    };
    let (body, ctx) = if len == 0 {
        (p, ctx)
    } else {
        match ctx.declared(p, usize::from(len), HEADER_LEN) {
            Ok(x) => x,
            Err(v) if v.class == Class::Truncated => return plain.short(),
            Err(v) => return v,
        }
    };
    let body = &body[HEADER_LEN.min(body.len())..];
    match tunnel_header_fits(layer, body) {
        Some(true) => {}
        Some(false) => return plain.view(Class::NonIp),
        // Cut by the capture before the bytes that tell: whether it is a tunnel is unknown, so
        // none is recorded (a longer capture may show plain UDP, and must not record fewer
        // layers). A complete datagram too short for the header is plain UDP.
        None if ctx.cut => return plain.short(),
        None => return plain.view(Class::NonIp),
    }
    match layer {
        Layer::Vxlan => vxlan(body, ctx),
        Layer::VxlanGpe => vxlan_gpe(body, ctx),
        Layer::Geneve => geneve(body, ctx),
        // RFC 7510: the datagram's payload is a label stack.
        Layer::MplsUdp => mpls(body, ctx),
        _ => gtp_u(body, ctx),
    }
}

/// Whether `h`, the payload of a datagram to `layer`'s port, starts with that tunnel's header;
/// `None` when it is cut before the bytes that tell. Decided by the header's own fields, never
/// by the port alone: a DNS-like or other application datagram that happens to use the port
/// stays plain UDP (keyed by the outer header, no layer recorded) instead of a `Malformed`
/// tunnel. An Ethernet payload (VXLAN, GENEVE's transparent bridging) must carry an ethertype
/// netsift reads ([`framed`]): anything else is not taken for a tunnel's frame.
fn tunnel_header_fits(layer: Layer, h: &[u8]) -> Option<bool> {
    match layer {
        // RFC 7348 section 5: flags (I, 0x08, set for a valid VNI; the other 7 bits reserved),
        // 24 reserved bits, VNI, 8 reserved bits. Of the reserved flag bits, VXLAN-GBP
        // (draft-smith-vxlan-group-policy) uses G (0x80) and bytes 1-3 and Linux's remote
        // checksum offload a bit of byte 1; none uses the rest of byte 0 or byte 7, which are
        // zero in every VXLAN packet.
        Layer::Vxlan => {
            let f = h.first_chunk::<8>()?;
            if f[0] & 0x08 == 0 || f[0] & 0x77 != 0 || f[7] != 0 {
                return Some(false);
            }
            Some(framed(be16(h, vxlan_hdr::LEN + ETHERTYPE_AT)?))
        }
        // draft-ietf-nvo3-vxlan-gpe section 3.3: R R Ver(2) I P B O; version 0, and the I flag
        // set for a valid VNI.
        Layer::VxlanGpe => {
            let f = *h.first()?;
            Some(f & 0x30 == 0 && f & 0x08 != 0)
        }
        // RFC 7510: a label stack, then what its bottom label carries. Plausible when the
        // payload after the bottom of the stack reads as `mpls` reads it: IP (first nibble 4
        // or 6), a pseudowire associated channel (1), or an Ethernet pseudowire whose
        // ethertype is a known one (with or without the RFC 4385 control word, both read
        // before choosing, as `pseudowire_zero_nibble` does). A stack longer than the bound is
        // left to `mpls` (malformed).
        Layer::MplsUdp => {
            let mut at = 0;
            for _ in 0..MAX_MPLS_LABELS {
                let e = h.get(at..at + mpls_hdr::ENTRY_LEN)?;
                at += mpls_hdr::ENTRY_LEN;
                if e[mpls_hdr::BOS_BYTE] & 1 == 1 {
                    let eth_at = |cw: usize| be16(h, at + cw + ETHERTYPE_AT);
                    return Some(match h.get(at)? >> 4 {
                        4 | 6 | 1 => true,
                        0 => {
                            let (plain, cw) = (eth_at(0)?, eth_at(mpls_hdr::CONTROL_WORD_LEN)?);
                            known_ethertype(plain) || known_ethertype(cw)
                        }
                        _ => known_ethertype(eth_at(0)?),
                    });
                }
            }
            Some(true)
        }
        // RFC 8926 section 3.4: version 0; the options (6-bit length in 4-byte units) end
        // within the datagram; the protocol type an ethertype that is decoded (transparent
        // bridging then an Ethernet frame of a known ethertype).
        Layer::Geneve => {
            let f = h.first_chunk::<{ geneve_hdr::LEN }>()?;
            if f[0] >> 6 != 0 {
                return Some(false);
            }
            let end = geneve_hdr::LEN + usize::from(f[0] & 0x3f) * 4;
            let ptype = be16(f, geneve_hdr::PROTOCOL)?;
            if ptype == ethertype::TEB {
                return Some(framed(be16(h, end + ETHERTYPE_AT)?));
            }
            h.get(..end)?;
            Some(framed(ptype))
        }
        // 3GPP TS 29.281 section 5.1: version 1, PT 1 (GTP, not GTP'), the spare bit 0, and a
        // GTP-U message type (section 7.1). Its length and extension headers are read by
        // `gtp_u`, which finds one that lies `Malformed` (the fields said GTP-U).
        Layer::GtpU => {
            let f = h.first_chunk::<2>()?;
            Some(f[0] >> 5 == 1 && f[0] & 0x18 == 0x10 && gtp_hdr::MESSAGE_TYPES.contains(&f[1]))
        }
        _ => Some(true),
    }
}

/// An Ethernet header's ethertype offset (after the two MAC addresses).
const ETHERTYPE_AT: usize = 12;

/// An ethertype a tunnel's frame or payload may carry: one [`link::by_ethertype`] reads
/// ([`known_ethertype`], and NSH, which it reaches from Ethernet too).
fn framed(et: u16) -> bool {
    known_ethertype(et) || et == ethertype::NSH
}

mod vxlan_hdr {
    pub const LEN: usize = 8;
}

mod geneve_hdr {
    /// The fixed header: version and options length, flags, protocol type, VNI, reserved.
    pub const LEN: usize = 8;
    pub const PROTOCOL: usize = 2;
}

mod gtp_hdr {
    pub const LEN: usize = 8;
    pub const LENGTH: usize = 2;
    /// With any of the E, S, PN flags: sequence number (2), N-PDU number, next extension type.
    pub const OPTIONAL_LEN: usize = 4;
    /// G-PDU (T-PDU): a user packet follows.
    pub const G_PDU: u8 = 255;
    /// TS 29.281 table 7.1-1: echo request and response, error indication, supported
    /// extension headers notification, tunnel status, end marker, G-PDU.
    pub const MESSAGE_TYPES: [u8; 7] = [1, 2, 26, 31, 253, 254, G_PDU];
}

/// VXLAN (RFC 7348): 8 bytes (flags, VNI), then Ethernet (the header checked by
/// [`tunnel_header_fits`]).
fn vxlan(p: &[u8], ctx: Ctx) -> View {
    match p.get(vxlan_hdr::LEN..) {
        Some(rest) => link::ethernet(rest, ctx),
        None => ctx.short(),
    }
}

/// VXLAN-GPE (draft-ietf-nvo3-vxlan-gpe): flags (2 reserved bits, version 2 bits = 0, I, P, B,
/// O), 2 reserved bytes, the next protocol, VNI, a reserved byte; then the payload the next
/// protocol names ([`next_protocol`]). The version and I flag are checked by
/// [`tunnel_header_fits`]; the P bit (next protocol present) is not: Wireshark and tcpdump read
/// the field whatever it says.
fn vxlan_gpe(p: &[u8], ctx: Ctx) -> View {
    let Some((h, rest)) = p.split_first_chunk::<8>() else {
        return ctx.short();
    };
    next_protocol(h[3], rest, ctx)
}

/// The payload a VXLAN-GPE or NSH next-protocol number names (the two registries share their
/// values): 1 IPv4, 2 IPv6, 3 Ethernet, 4 NSH, 5 MPLS; any other (unassigned, experimental) is
/// not a packet netsift knows: `NonIp`, like an unknown GRE or GENEVE payload.
fn next_protocol(np: u8, p: &[u8], ctx: Ctx) -> View {
    match np {
        1 => ip::ipv4(p, ctx),
        2 => ip::ipv6(p, ctx),
        3 => link::ethernet(p, ctx),
        4 => nsh(p, ctx),
        5 => mpls(p, ctx),
        _ => ctx.view(Class::NonIp),
    }
}

/// Network Service Header (RFC 8300): version (2 bits, 0), O, U, TTL (6 bits), length (6 bits:
/// the whole header in 4-byte words, at least the 2 of the base and service path headers; 6 for
/// MD type 1), MD type (low 4 bits of byte 2), next protocol; service path; context headers;
/// then the payload. Below IP like MPLS: reached from Ethernet (ethertype 0x894f), GRE, GENEVE
/// or VXLAN-GPE.
#[cold]
#[inline(never)]
pub(crate) fn nsh(p: &[u8], ctx: Ctx) -> View {
    const MIN_WORDS: usize = 2;
    const MD_TYPE_1_WORDS: usize = 6;
    let ctx = tri!(ctx.enter(Layer::Nsh));
    let Some(h) = p.first_chunk::<4>() else {
        return ctx.short();
    };
    let words = usize::from(h[1] & 0x3f);
    let md_type = h[2] & 0x0f;
    if h[0] >> 6 != 0 || words < MIN_WORDS || (md_type == 1 && words != MD_TYPE_1_WORDS) {
        return ctx.malformed();
    }
    match p.get(words * 4..) {
        Some(rest) => next_protocol(h[3], rest, ctx),
        None => ctx.short(),
    }
}

/// GENEVE (RFC 8926): version (2 bits, 0), options length (6 bits, 4-byte units), flags,
/// protocol type (an ethertype), VNI; options; then the payload. The version, the options'
/// end and the protocol type are checked by [`tunnel_header_fits`].
fn geneve(p: &[u8], ctx: Ctx) -> View {
    let (Some(&first), Some(ptype)) = (p.first(), be16(p, geneve_hdr::PROTOCOL)) else {
        return ctx.short();
    };
    let len = geneve_hdr::LEN + usize::from(first & 0x3f) * 4;
    match p.get(len..) {
        Some(rest) => by_ethertype(ptype, rest, ctx),
        None => ctx.short(),
    }
}

/// GTP-U (3GPP TS 29.281 section 5): flags (version 3 bits = 1, PT = 1, spare, E, S, PN),
/// message type, length of what follows the first 8 bytes, TEID; with any of E/S/PN a 4-byte
/// field (sequence, N-PDU, next extension type); with E a chain of extension headers (length in
/// 4-byte units, last byte the next type, 0 ends), walked within the declared length. A G-PDU
/// (type 255) carries the user's IP packet; the other types are GTP signalling (echo, error
/// indication, end marker), keyed by the outer header. Version, PT and type are checked by
/// [`tunnel_header_fits`].
fn gtp_u(p: &[u8], ctx: Ctx) -> View {
    use gtp_hdr::*;
    let Some(h) = p.first_chunk::<LEN>() else {
        return ctx.short();
    };
    let flags = h[0];
    let len = usize::from(u16::from_be_bytes([h[LENGTH], h[LENGTH + 1]]));
    let (p, ctx) = tri!(ctx.declared(p, LEN + len, LEN));
    let mut off = LEN;
    if flags & 0x07 != 0 {
        off = LEN + OPTIONAL_LEN;
        let Some(&next) = p.get(off - 1) else {
            return ctx.short();
        };
        let mut next = if flags & 0x04 != 0 { next } else { 0 };
        // Each extension header is at least 4 bytes (length 0 is refused), so the walk ends
        // within the datagram.
        while next != 0 {
            let Some(&units) = p.get(off) else {
                return ctx.short();
            };
            if units == 0 {
                return ctx.malformed();
            }
            off += usize::from(units) * 4;
            let Some(&n) = p.get(off - 1) else {
                return ctx.short();
            };
            next = n;
        }
    }
    if h[1] != G_PDU {
        // Echo, error indication, end marker: signalling, keyed by the outer header.
        return ctx.view(Class::NonIp);
    }
    let rest = p.get(off..).unwrap_or(&[]);
    match rest.first().map(|b| b >> 4) {
        None => ctx.short(),
        Some(4) => ip::ipv4(rest, ctx),
        Some(6) => ip::ipv6(rest, ctx),
        Some(_) => ctx.view(Class::NonIp),
    }
}
