//! Zero-copy packet views: classify a captured frame and extract its 5-tuple.
//!
//! [`parse`] takes a pcap link type and the captured bytes of one frame and returns a [`View`]:
//! exactly one [`Class`] for the frame and, for IP packets, the [`key::Tuple`] flow keys are built
//! from. It never panics, never allocates and reads each header through one checked slice
//! (smoltcp `wire` style: field offsets are constants, the length is checked once per header).
//!
//! # Semantics
//!
//! **Link layers** (see [`linktype`]):
//! - Ethernet (1): a 14-byte header, then up to [`MAX_VLAN_TAGS`] 4-byte tags of type 802.1Q
//!   (0x8100), 802.1ad (0x88a8) or 0x9100, in any order. More tags than that is `Malformed`.
//!   MPLS (0x8847, 0x8848), PPPoE sessions (0x8864) and NSH (0x894f) are looked through (see
//!   **Encapsulations**). Any other ethertype that is not IPv4 (0x0800) or IPv6 (0x86dd),
//!   including an 802.3 length field (< 0x0600), ARP, LLDP and PPPoE discovery, is `NonIp`.
//! - Raw IP (101, 12, 14): the version nibble of the first byte picks IPv4 (4) or IPv6 (6); any
//!   other nibble is `Malformed`, an empty frame is `Truncated`.
//! - IPv4 (228) and IPv6 (229): the frame is that IP header; a wrong version is `Malformed`.
//! - Linux SLL (113): 16-byte header, ethertype at offset 14. Linux SLL2 (276): 20-byte header,
//!   ethertype at offset 0. The ethertype is then handled as for Ethernet (VLAN tags included).
//! - PPP (9): an optional 0xff 0x03 address/control (RFC 1662), then the PPP protocol, 1 byte
//!   when compressed (odd) or 2: 0x21 IPv4, 0x57 IPv6, 0x281/0x283 MPLS, anything else (LCP,
//!   IPCP, ...) `NonIp`; 0xff followed by anything but 0x03 is `Malformed`. PPP in HDLC-like
//!   framing (50, DLT_PPP_SERIAL): the same, or Cisco HDLC when the first byte is 0x0f or 0x8f;
//!   the control byte after 0xff is not checked (tcpdump reads past it). A protocol starting
//!   with the HDLC flag 0x7e is a frame that kept its octet stuffing (RFC 1662 4.2): its first
//!   192 bytes are unstuffed into a stack buffer and decoded as a cut frame, as tcpdump does.
//!   PPPoE (51, DLT_PPP_ETHER): the PPPoE session header, then PPP (layer `pppoe`). pppd's PPP
//!   (166): a direction byte (0, 1) in place of the address, then 0x03 and PPP. PPP and Cisco
//!   HDLC with a direction byte first (204, 205): the byte skipped.
//!   Cisco HDLC (104): address, control (neither checked), then an ethertype, handled as for
//!   Ethernet (0x6558 is a bridged Ethernet frame; SLARP, CDP and ISO are `NonIp`).
//! - BSD null (0): a 4-byte address family in the byte order of the capturing host, so both
//!   byte orders are accepted; loop (108): the same family in network byte order. AF_INET = 2 is
//!   IPv4; AF_INET6 = 24, 28 or 30 (NetBSD/OpenBSD, FreeBSD, macOS) is IPv6; anything else is
//!   `NonIp`.
//! - Any other link type is `Unsupported`. A frame shorter than its link header (or cut inside
//!   a VLAN tag) is `Truncated`.
//!
//! **IPv4**: fewer than 20 bytes captured is `Truncated`. Otherwise version != 4, IHL < 5, or a
//! total length smaller than IHL*4 is `Malformed`, with one exception: a total length of **0** is
//! read as "unknown" (TCP segmentation offload: hosts capture their own outgoing super-segments
//! before the NIC fills the field; Wireshark and etherparse do the same) and the captured length
//! is used. A total length *larger* than what was captured is normal (snaplen) and not an error:
//! the packet is read up to min(total length, captured length); bytes past the total length
//! (Ethernet padding) are never read as L4. Options are skipped. Only first fragments
//! (fragment offset 0) carry ports; later fragments have ports 0 and `l4_cut = false`. An
//! Authentication Header (51) is walked (RFC 4302: length in 4-byte units + 2) so `proto` is the
//! protocol it protects, as for IPv6. Tunnels: see **Encapsulations**.
//!
//! **IPv6**: fewer than 40 bytes captured is `Truncated`; version != 6 is `Malformed`. A payload
//! length of 0 (jumbogram, or a GSO capture) is read as "up to the captured length". The
//! extension-header chain is walked: hop-by-hop (0), routing (43), destination options (60),
//! mobility (135), HIP (139) and shim6 (140) with length (n + 1) * 8, fragment (44, 8 bytes;
//! a non-zero fragment offset stops the walk with ports 0), AH (51, length (n + 2) * 4). ESP (50)
//! and no-next-header (59) end the chain with ports 0 and that number as `proto`. At most
//! [`MAX_IPV6_EXT_HEADERS`] extension headers are walked; if the chain is longer the packet stays
//! `Ipv6` (its addresses are valid) with ports 0, `l4_cut = false` and `proto` = the type of the
//! first extension header not walked. Otherwise `proto` is the final upper-layer protocol.
//!
//! **Ports**: TCP (6), UDP (17), DCCP (33), SCTP (132) and UDP-Lite (136) take source and
//! destination ports from the first 4 bytes of L4, when those 4 bytes were captured and lie
//! within the IP length. ICMP, ICMPv6 and every other protocol have ports 0.
//!
//! **Truncation**: a packet whose network-layer addresses are complete is `Ipv4`/`Ipv6` even if
//! the rest is cut. `l4_cut` is true when the capture (or the IP length) ended before the bytes
//! needed for the ports: inside IPv4 options or an AH, inside the IPv6 extension chain (then
//! `proto` is the last next-header value that could be read), or inside the first 4 bytes of a
//! port-carrying L4 header. Then the ports are 0. Checks run in this order per header: length of
//! the fixed header first (`Truncated`), then field validity (`Malformed`); so a longer capture of
//! the same bytes can only turn `Truncated` into another class, and `l4_cut` into ports; every
//! other result is final.
//!
//! **Encapsulations** (`encap.rs`). Below IP, always looked through (the packet's IP header is the
//! one inside them):
//! - MPLS: label stack entries up to the bottom-of-stack bit (at most [`MAX_MPLS_LABELS`]), then
//!   the first nibble of the payload: 4 IPv4, 6 IPv6, 1 a pseudowire associated channel
//!   (`NonIp`), 0 an Ethernet pseudowire with a control word (RFC 4385/4448) unless the
//!   ethertype after the control word is unknown and the one read without it is known (a
//!   destination MAC starting with a 0 nibble), anything else an Ethernet pseudowire without a
//!   control word (Wireshark's reading; RFC 4385 is why control words exist).
//! - PPPoE session: the 6-byte header (version/type 0x11, code 0, its length), then PPP as on
//!   the PPP link type.
//! - NSH (RFC 8300; ethertype 0x894f, or VXLAN-GPE's next protocol 4): version 0, a length (in
//!   4-byte words, the whole header: at least 2, exactly 6 for MD type 1; else `Malformed`), then
//!   the next protocol: 1 IPv4, 2 IPv6, 3 Ethernet, 4 NSH, 5 MPLS, anything else `NonIp`.
//!
//! Above IP, tunnels found by protocol number or UDP destination port: GRE (47; version 0 with
//! checksum, key and sequence fields and RFC 1701's routing field, whose Source Route Entries are
//! walked to the null one, at most [`MAX_GRE_SRES`]; version 1 = PPTP carrying PPP; payload by
//! ethertype, 0x6558 Ethernet, 0x88be ERSPAN I/II, 0x22eb ERSPAN III, MPLS, NSH), VXLAN (UDP
//! 4789, and 8472, Linux's older default; Ethernet), VXLAN-GPE (UDP 4790; its next protocol as
//! NSH's), GENEVE (UDP 6081, options skipped, payload by ethertype), GTP-U (UDP 2152, version 1
//! G-PDU, optional fields and extension headers walked; other messages carry no packet), MPLS
//! over UDP (RFC 7510, UDP 6635, a label stack), IP-in-IP (4 in IPv4), 6in4 (41 in IPv4), 4in6
//! (4 in IPv6), 6in6 (41 in IPv6). Only a first fragment is looked into.
//! [`Tunnel`] picks the header that makes the tuple: `Outer` (the default, [`parse`]) keeps the
//! outer IP header's class and tuple whatever the tunnel holds, and walks the tunnel only to
//! record its layers; `Inner` ([`parse_with`]) takes the innermost IP header: a tunnel whose
//! payload is not IP (ARP in VXLAN, GTP-U echo, an unknown GRE or VXLAN-GPE payload) keeps the
//! outer header, a tunnel or inner header that is cut or lies makes the packet `Truncated` or
//! `Malformed`.
//!
//! Every header length is checked against what its container holds, never read past the frame:
//! a header that needs more bytes than were captured is `Truncated`; one that needs more than an
//! enclosing header declared (an inner IPv4 total length, a UDP length, a PPPoE or GTP-U length
//! running past the outer datagram, an MPLS stack without a bottom, a GRE routing entry or an NSH
//! header longer than the datagram) is `Malformed`. At most [`MAX_LAYERS`] layers (a label
//! stack, a pseudowire, PPPoE, NSH, each tunnel header) are walked; one more is `Malformed` (in
//! `Outer` mode, above the outer IP header, it just ends the record). `View::encap` is the set of
//! layers seen, on every class.
//!
//! **Every frame gets exactly one class**; for non-IP classes the tuple is all zeros.

#![forbid(unsafe_code)]

use key::{FlowKey, KeyKind, Tuple};

mod encap;
mod ip;
mod layer;
mod link;
pub mod linktype;

pub(crate) use layer::Ctx;
pub use layer::{Encap, EncapCounts, Layer, Tunnel, MAX_GRE_SRES, MAX_LAYERS, MAX_MPLS_LABELS};

/// The most VLAN tags (802.1Q, 802.1ad, 0x9100) walked on one frame before it is `Malformed`.
pub const MAX_VLAN_TAGS: usize = 8;

/// The most IPv6 extension headers walked before giving up on the ports (see the crate docs).
pub const MAX_IPV6_EXT_HEADERS: usize = 8;

/// What a frame is. Each frame gets exactly one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// IPv4 with complete addresses; the tuple is valid (ports possibly 0, see `l4_cut`).
    Ipv4,
    /// IPv6 with complete addresses; the tuple is valid (ports possibly 0, see `l4_cut`).
    Ipv6,
    /// A frame of a supported link type that does not carry IP (ARP, LLDP, 802.3, MPLS or PPPoE
    /// not carrying IP, ...).
    NonIp,
    /// Cut before the IP addresses were complete (or inside the link header).
    Truncated,
    /// An IP header with invalid fields (version, IHL, total length), too many VLAN tags or
    /// layers, or an encapsulation header that lies about its length.
    Malformed,
    /// A link type netsift does not decode.
    Unsupported,
}

impl Class {
    pub const ALL: [Class; 6] = [
        Class::Ipv4,
        Class::Ipv6,
        Class::NonIp,
        Class::Truncated,
        Class::Malformed,
        Class::Unsupported,
    ];

    /// Stable snake_case name used in reports and JSON (same as the serde name).
    pub fn name(self) -> &'static str {
        match self {
            Class::Ipv4 => "ipv4",
            Class::Ipv6 => "ipv6",
            Class::NonIp => "non_ip",
            Class::Truncated => "truncated",
            Class::Malformed => "malformed",
            Class::Unsupported => "unsupported",
        }
    }

    /// Position in [`Class::ALL`], for per-class counter arrays.
    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether the frame yields a flow key (`Ipv4` or `Ipv6`).
    #[inline]
    pub fn is_ip(self) -> bool {
        matches!(self, Class::Ipv4 | Class::Ipv6)
    }
}

/// Packets counted per [`Class`]: the one accounting `stats` and `run` report (serialized as six
/// fields, flattened into their reports). Every packet read is in exactly one class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Classes {
    pub ipv4: u64,
    pub ipv6: u64,
    pub non_ip: u64,
    pub truncated: u64,
    pub malformed: u64,
    /// Frames of link types netsift does not decode (counted, never dropped).
    pub unsupported: u64,
}

impl Classes {
    /// Count one packet of class `c`.
    #[inline]
    pub fn add(&mut self, c: Class) {
        *match c {
            Class::Ipv4 => &mut self.ipv4,
            Class::Ipv6 => &mut self.ipv6,
            Class::NonIp => &mut self.non_ip,
            Class::Truncated => &mut self.truncated,
            Class::Malformed => &mut self.malformed,
            Class::Unsupported => &mut self.unsupported,
        } += 1;
    }

    /// The count of class `c`.
    pub fn get(&self, c: Class) -> u64 {
        match c {
            Class::Ipv4 => self.ipv4,
            Class::Ipv6 => self.ipv6,
            Class::NonIp => self.non_ip,
            Class::Truncated => self.truncated,
            Class::Malformed => self.malformed,
            Class::Unsupported => self.unsupported,
        }
    }

    /// Packets with a flow key (IPv4 and IPv6).
    pub fn keyed(&self) -> u64 {
        self.ipv4 + self.ipv6
    }

    /// All six classes: every packet counted.
    pub fn total(&self) -> u64 {
        Class::ALL.iter().map(|&c| self.get(c)).sum()
    }
}

impl std::fmt::Display for Class {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What one packet yields. `tuple` is meaningful only for `Ipv4`/`Ipv6` (all zeros otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    pub class: Class,
    pub tuple: Tuple,
    /// The ports could not be read because the capture (or the IP length) ended first; the ports
    /// are then 0. When the cut fell inside an IPv4 AH or the IPv6 extension chain, `proto` is
    /// the last next-header value read. Always false for non-IP classes and when the final
    /// protocol is known to carry no ports (ICMP, later fragments, ESP, ...).
    pub l4_cut: bool,
    /// The encapsulation layers the frame carried (on every class, `Outer` mode included).
    pub encap: Encap,
}

const ZERO_TUPLE: Tuple = Tuple {
    v6: false,
    src: [0; 16],
    dst: [0; 16],
    sport: 0,
    dport: 0,
    proto: 0,
};

impl View {
    /// A view of class `class` with an all-zero tuple.
    #[inline]
    pub const fn of(class: Class) -> View {
        View {
            class,
            tuple: ZERO_TUPLE,
            l4_cut: false,
            encap: Encap::NONE,
        }
    }

    pub(crate) const UNSUPPORTED: View = View::of(Class::Unsupported);

    /// The flow key of kind `kind`, or `None` for non-IP classes.
    #[inline]
    pub fn key(&self, kind: KeyKind) -> Option<FlowKey> {
        if self.class.is_ip() {
            Some(self.tuple.key(kind))
        } else {
            None
        }
    }
}

/// Classify a captured frame of link type `link` and extract its 5-tuple; a tunnel's outer IP
/// header makes the tuple ([`Tunnel::Outer`]).
#[inline]
pub fn parse(link: u32, data: &[u8]) -> View {
    parse_with(link, data, Tunnel::Outer)
}

/// [`parse`], with `tunnel` picking which IP header of a tunnelled packet makes the tuple.
#[inline]
pub fn parse_with(link: u32, data: &[u8], tunnel: Tunnel) -> View {
    // Everything but the mode is a constant at the top, so the common path compiles as it did
    // before encapsulations: a tunnel costs one protocol/port test after the ports are read.
    let ctx = Ctx::top(tunnel);
    // Ethernet first with one compare: the switch below compiles to a range check plus a jump
    // table, a few branches more than the common case deserves.
    if link == linktype::ETHERNET {
        return link::ethernet(data, ctx);
    }
    match link {
        linktype::RAW | linktype::RAW_12 | linktype::RAW_14 => ip::raw(data, ctx),
        linktype::IPV4 => ip::ipv4(data, ctx),
        linktype::IPV6 => ip::ipv6(data, ctx),
        linktype::LINUX_SLL => link::sll(data, ctx),
        linktype::LINUX_SLL2 => link::sll2(data, ctx),
        linktype::NULL => link::null(data, ctx),
        linktype::LOOP => link::loopback(data, ctx),
        linktype::PPP => link::ppp(data, ctx),
        linktype::PPP_HDLC => link::ppp_hdlc(data, ctx),
        linktype::C_HDLC => link::cisco_hdlc(data, ctx),
        linktype::PPP_ETHER => encap::pppoe(data, ctx),
        linktype::PPP_PPPD => link::ppp_pppd(data, ctx),
        linktype::PPP_WITH_DIR => link::with_dir(data, ctx, link::ppp),
        linktype::C_HDLC_WITH_DIR => link::with_dir(data, ctx, link::cisco_hdlc),
        _ => View::UNSUPPORTED,
    }
}

/// [`parse`] and build the key of kind `kind`; non-IP classes get [`FlowKey::EMPTY`].
///
/// The common frame (Ethernet, IPv4 without options, not a later fragment, TCP or UDP, the
/// ports captured) takes [`fast_ethernet_ipv4`], which reads the fixed offsets once and builds
/// the key directly; everything else, and every frame the fast path declines, goes through
/// [`parse`]. The two agree on every frame (tests: `fast_path_equals_parse`).
#[inline]
pub fn parse_key(link: u32, data: &[u8], kind: KeyKind) -> (Class, FlowKey) {
    // Written out rather than `parse_key_with(.., Tunnel::Outer)`: the shared tail that form
    // compiles to hands the fast path's key back through the stack, a store-forwarding stall
    // that cost the bench parse loop half its speed.
    if link == linktype::ETHERNET {
        if let Some(k) = fast_ethernet_ipv4(data, kind) {
            return (Class::Ipv4, k);
        }
    }
    parse_key_general(link, data, kind)
}

/// [`parse_key`] with a [`Tunnel`] mode. In `Inner` mode the fast path declines UDP to a tunnel
/// port (the general parser looks inside).
#[inline]
pub fn parse_key_with(link: u32, data: &[u8], kind: KeyKind, tunnel: Tunnel) -> (Class, FlowKey) {
    if link == linktype::ETHERNET {
        if let Some(k) = fast_ethernet_ipv4(data, kind) {
            if tunnel == Tunnel::Outer || !fast_udp_tunnel(data) {
                return (Class::Ipv4, k);
            }
        }
    }
    parse_key_general_with(link, data, kind, tunnel)
}

/// The general path of [`parse_key`]: [`parse`], then the key.
#[inline]
pub fn parse_key_general(link: u32, data: &[u8], kind: KeyKind) -> (Class, FlowKey) {
    let v = parse(link, data);
    (v.class, v.key(kind).unwrap_or(FlowKey::EMPTY))
}

/// The general path of [`parse_key_with`]: [`parse_with`], then the key.
#[inline]
pub fn parse_key_general_with(
    link: u32,
    data: &[u8],
    kind: KeyKind,
    tunnel: Tunnel,
) -> (Class, FlowKey) {
    let v = parse_with(link, data, tunnel);
    (v.class, v.key(kind).unwrap_or(FlowKey::EMPTY))
}

/// A frame the fast path accepted is UDP to a tunnel port (VXLAN, VXLAN-GPE, GENEVE, GTP-U, MPLS
/// over UDP).
#[inline]
fn fast_udp_tunnel(d: &[u8]) -> bool {
    match (d.get(23), d.get(36..38)) {
        (Some(&proto), Some(&[a, b])) => encap::is_tunnel(proto, u16::from_be_bytes([a, b])),
        _ => false,
    }
}

/// Untagged Ethernet / IPv4 with IHL 5 / TCP or UDP / fragment offset 0 / total length covering
/// the ports and the ports captured: the key, read from fixed offsets. `None` for any other frame
/// (the general parser then decides), so this never changes a result, only its cost.
#[inline(always)]
pub fn fast_ethernet_ipv4(d: &[u8], kind: KeyKind) -> Option<FlowKey> {
    // 14 (Ethernet) + 20 (IPv4) + 4 (ports).
    let h: &[u8; 38] = d.first_chunk()?;
    let total = u16::from_be_bytes([h[16], h[17]]);
    let frag = u16::from_be_bytes([h[20], h[21]]) & 0x1fff;
    let proto = h[23];
    // Ethertype 0x0800, version 4 with IHL 5, ports inside the total length (0 = TSO, general).
    if h[12] != 0x08 || h[13] != 0x00 || h[14] != 0x45 || total < 24 || frag != 0 {
        return None;
    }
    if proto != 6 && proto != 17 {
        return None;
    }
    Some(FlowKey::v4(
        kind,
        [h[26], h[27], h[28], h[29]],
        [h[30], h[31], h[32], h[33]],
        u16::from_be_bytes([h[34], h[35]]),
        u16::from_be_bytes([h[36], h[37]]),
        proto,
    ))
}

#[cfg(test)]
mod tests;
