//! Link types (pcap `LINKTYPE_` numbers, <https://www.tcpdump.org/linktypes.html>) that netsift
//! decodes. Any other link type parses to [`Class::Unsupported`](crate::Class::Unsupported).

/// BSD loopback: a 4-byte address family in the byte order of the capturing host.
pub const NULL: u32 = 0;
/// Ethernet II / 802.3, with any stack of up to [`MAX_VLAN_TAGS`](crate::MAX_VLAN_TAGS) tags.
pub const ETHERNET: u32 = 1;
/// PPP (RFC 1661), with or without the HDLC-like 0xff 0x03 address and control (RFC 1662).
pub const PPP: u32 = 9;
/// Raw IP as written by some BSDs (DLT_RAW = 12); the version nibble picks IPv4 or IPv6.
pub const RAW_12: u32 = 12;
/// Raw IP as written by OpenBSD (DLT_RAW = 14); the version nibble picks IPv4 or IPv6.
pub const RAW_14: u32 = 14;
/// PPP in HDLC-like framing (DLT_PPP_SERIAL), or Cisco HDLC when the first byte is a Cisco
/// address (0x0f, 0x8f; RFC 1547 4.3.1).
pub const PPP_HDLC: u32 = 50;
/// PPPoE (DLT_PPP_ETHER): the 6-byte PPPoE session header (RFC 2516 section 4), then PPP, with
/// no Ethernet header before it.
pub const PPP_ETHER: u32 = 51;
/// Raw IP (LINKTYPE_RAW); the version nibble picks IPv4 or IPv6. CAIDA traces use this.
pub const RAW: u32 = 101;
/// Cisco HDLC (DLT_C_HDLC): address, control, then an ethertype.
pub const C_HDLC: u32 = 104;
/// OpenBSD loopback: like [`NULL`] but the family is always in network byte order.
pub const LOOP: u32 = 108;
/// PPP in HDLC-like framing as pppd writes it (DLT_PPP_PPPD): the 0xff address byte replaced
/// by a direction (0 in, 1 out), then control and the protocol.
pub const PPP_PPPD: u32 = 166;
/// A direction byte (0 received, else sent), then a [`PPP`] frame.
pub const PPP_WITH_DIR: u32 = 204;
/// A direction byte (0 received, else sent), then a [`C_HDLC`] frame.
pub const C_HDLC_WITH_DIR: u32 = 205;
/// Linux "cooked" capture v1: 16-byte header, protocol (an ethertype) at offset 14.
pub const LINUX_SLL: u32 = 113;
/// Raw IPv4 only.
pub const IPV4: u32 = 228;
/// Raw IPv6 only.
pub const IPV6: u32 = 229;
/// Linux "cooked" capture v2: 20-byte header, protocol (an ethertype) at offset 0.
pub const LINUX_SLL2: u32 = 276;

/// Every link type [`parse`](crate::parse) decodes.
pub const SUPPORTED: [u32; 17] = [
    NULL,
    ETHERNET,
    PPP,
    RAW_12,
    RAW_14,
    PPP_HDLC,
    PPP_ETHER,
    RAW,
    C_HDLC,
    LOOP,
    LINUX_SLL,
    PPP_PPPD,
    PPP_WITH_DIR,
    C_HDLC_WITH_DIR,
    IPV4,
    IPV6,
    LINUX_SLL2,
];

/// Stable snake_case name for reports; `"unknown"` for unsupported link types.
pub fn name(lt: u32) -> &'static str {
    match lt {
        NULL => "null",
        ETHERNET => "ethernet",
        PPP => "ppp",
        PPP_HDLC => "ppp_hdlc",
        PPP_ETHER => "ppp_ether",
        PPP_PPPD => "ppp_pppd",
        PPP_WITH_DIR => "ppp_with_dir",
        C_HDLC_WITH_DIR => "c_hdlc_with_dir",
        C_HDLC => "c_hdlc",
        RAW | RAW_12 | RAW_14 => "raw",
        LOOP => "loop",
        LINUX_SLL => "linux_sll",
        IPV4 => "ipv4",
        IPV6 => "ipv6",
        LINUX_SLL2 => "linux_sll2",
        _ => "unknown",
    }
}

/// Whether [`parse`](crate::parse) decodes frames of this link type.
pub fn is_supported(lt: u32) -> bool {
    SUPPORTED.contains(&lt)
}
