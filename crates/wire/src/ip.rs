//! Network layer: IPv4 (RFC 791), IPv6 (RFC 8200) with its extension-header chain, and the
//! first 4 bytes of the transport header (the ports).

use key::Tuple;

use crate::{encap, Class, Ctx, View, MAX_IPV6_EXT_HEADERS};

/// IP protocol numbers (IANA "Assigned Internet Protocol Numbers").
pub(crate) mod proto {
    pub const HOPOPT: u8 = 0;
    pub const IPIP: u8 = 4;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const DCCP: u8 = 33;
    pub const IPV6: u8 = 41;
    pub const ROUTING: u8 = 43;
    pub const FRAGMENT: u8 = 44;
    pub const GRE: u8 = 47;
    pub const ESP: u8 = 50;
    pub const AH: u8 = 51;
    pub const NO_NEXT: u8 = 59;
    pub const DSTOPTS: u8 = 60;
    pub const SCTP: u8 = 132;
    pub const MOBILITY: u8 = 135;
    pub const UDPLITE: u8 = 136;
    pub const HIP: u8 = 139;
    pub const SHIM6: u8 = 140;
}

mod v4 {
    pub const MIN_HEADER_LEN: usize = 20;
    pub const VER_IHL: usize = 0;
    pub const TOTAL_LEN: usize = 2;
    pub const FLAGS_FRAG: usize = 6;
    /// More fragments: a first fragment's payload ends before the datagram's.
    pub const MORE_FRAGMENTS: u16 = 0x2000;
    pub const PROTO: usize = 9;
    pub const SRC: usize = 12;
    pub const DST: usize = 16;
    /// Fragment offset: the low 13 bits of the flags/fragment field.
    pub const FRAG_OFFSET_MASK: u16 = 0x1fff;
}

mod v6 {
    pub const HEADER_LEN: usize = 40;
    pub const VERSION: usize = 0;
    pub const PAYLOAD_LEN: usize = 4;
    pub const NEXT_HEADER: usize = 6;
    pub const SRC: usize = 8;
    pub const DST: usize = 24;
    /// Fragment header (RFC 8200 4.5): next header, reserved, offset (13 bits) << 3 | flags.
    pub const FRAG_HEADER_LEN: usize = 8;
    pub const FRAG_OFFSET: usize = 2;
}

/// Whether the first 4 bytes of this protocol's header are source and destination ports.
#[inline]
pub(crate) fn has_ports(p: u8) -> bool {
    matches!(
        p,
        proto::TCP | proto::UDP | proto::DCCP | proto::SCTP | proto::UDPLITE
    )
}

/// The first `N` bytes of `d[from..end]`, if all of them are there.
#[inline]
fn chunk<const N: usize>(d: &[u8], from: usize, end: usize) -> Option<&[u8; N]> {
    d.get(from..end)?.first_chunk::<N>()
}

/// Fill the ports of `v` from L4 at `d[off..end]`, or mark them cut.
#[inline]
fn ports(v: &mut View, d: &[u8], off: usize, end: usize) {
    if !has_ports(v.tuple.proto) {
        return;
    }
    match chunk::<4>(d, off, end) {
        Some(p) => {
            v.tuple.sport = u16::from_be_bytes([p[0], p[1]]);
            v.tuple.dport = u16::from_be_bytes([p[2], p[3]]);
        }
        None => v.l4_cut = true,
    }
}

/// Raw IP: the version nibble picks the header.
#[inline]
pub(crate) fn raw(d: &[u8], ctx: Ctx) -> View {
    match d.first().map(|b| b >> 4) {
        None => ctx.short(),
        Some(4) => ipv4(d, ctx),
        Some(6) => ipv6(d, ctx),
        Some(_) => ctx.malformed(),
    }
}

#[inline]
pub(crate) fn ipv4(d: &[u8], ctx: Ctx) -> View {
    let Some(h) = d.first_chunk::<{ v4::MIN_HEADER_LEN }>() else {
        return ctx.short();
    };
    let ver_ihl = h[v4::VER_IHL];
    let ihl = usize::from(ver_ihl & 0x0f) * 4;
    if ver_ihl >> 4 != 4 || ihl < v4::MIN_HEADER_LEN {
        return ctx.malformed();
    }
    let total = usize::from(u16::from_be_bytes([h[v4::TOTAL_LEN], h[v4::TOTAL_LEN + 1]]));
    // 0 is TSO ("not filled in yet"): fall back to the capture. Larger than the capture is a
    // snaplen cut: read what is there (inside a container whose length was declared, a lie).
    // Smaller than the capture is link padding: ignore it. `cut`: the payload ends where the
    // capture did, not where this header says (only a tunnel inside looks at it).
    let (end, cut) = if total == 0 {
        (d.len(), ctx.cut)
    } else if total < ihl {
        return ctx.malformed();
    } else if total > d.len() {
        if !ctx.cut {
            return ctx.malformed();
        }
        (d.len(), true)
    } else {
        (total, false)
    };
    // Each address as one 16-byte value (4 bytes, then zeros) rather than a zeroed array and
    // a 4-byte copy into it: written in one store, so a wider read of it (`Runner::push`
    // building the keys reads the source in 8-byte words) forwards from that store instead of
    // stalling on two (issue 13).
    let addr = |at: usize| {
        u128::from(u32::from_le_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]])).to_le_bytes()
    };
    let (src, dst) = (addr(v4::SRC), addr(v4::DST));
    let mut v = View {
        class: Class::Ipv4,
        tuple: Tuple {
            v6: false,
            src,
            dst,
            sport: 0,
            dport: 0,
            proto: h[v4::PROTO],
        },
        l4_cut: false,
        encap: ctx.encap,
    };
    let frag = u16::from_be_bytes([h[v4::FLAGS_FRAG], h[v4::FLAGS_FRAG + 1]]);
    if frag & v4::FRAG_OFFSET_MASK != 0 {
        // A later fragment: its payload starts mid-datagram, there is no L4 header.
        return v;
    }
    let mut off = ihl;
    if v.tuple.proto == proto::AH {
        // RFC 4302 2.2: payload length in 4-byte units minus 2; next header first.
        match chunk::<2>(d, off, end) {
            Some(a) => {
                v.tuple.proto = a[0];
                off += (usize::from(a[1]) + 2) * 4;
            }
            None => {
                v.l4_cut = true;
                return v;
            }
        }
    }
    ports(&mut v, d, off, end);
    if encap::is_tunnel(v.tuple.proto, v.tuple.dport) {
        let cut = cut || frag & v4::MORE_FRAGMENTS != 0;
        return encap::ip_payload(v, d, off, end, cut, ctx);
    }
    v
}

#[inline]
pub(crate) fn ipv6(d: &[u8], ctx: Ctx) -> View {
    let Some(h) = d.first_chunk::<{ v6::HEADER_LEN }>() else {
        return ctx.short();
    };
    if h[v6::VERSION] >> 4 != 6 {
        return ctx.malformed();
    }
    let plen = usize::from(u16::from_be_bytes([
        h[v6::PAYLOAD_LEN],
        h[v6::PAYLOAD_LEN + 1],
    ]));
    // 0: jumbogram (RFC 2675) or a GSO capture; use the capture. Longer than the capture: a
    // snaplen cut (inside a container whose length was declared, a lie). `cut` as for IPv4.
    let (end, mut cut) = if plen == 0 {
        (d.len(), ctx.cut)
    } else if v6::HEADER_LEN + plen > d.len() {
        if !ctx.cut {
            return ctx.malformed();
        }
        (d.len(), true)
    } else {
        (v6::HEADER_LEN + plen, false)
    };
    let mut src = [0u8; 16];
    let mut dst = [0u8; 16];
    src.copy_from_slice(&h[v6::SRC..v6::SRC + 16]);
    dst.copy_from_slice(&h[v6::DST..v6::DST + 16]);
    let mut v = View {
        class: Class::Ipv6,
        tuple: Tuple {
            v6: true,
            src,
            dst,
            sport: 0,
            dport: 0,
            proto: h[v6::NEXT_HEADER],
        },
        l4_cut: false,
        encap: ctx.encap,
    };
    let mut off = v6::HEADER_LEN;
    let mut walked = 0;
    loop {
        let next = v.tuple.proto;
        match next {
            proto::HOPOPT
            | proto::ROUTING
            | proto::DSTOPTS
            | proto::MOBILITY
            | proto::HIP
            | proto::SHIM6
            | proto::FRAGMENT
            | proto::AH => {}
            // ESP encrypts what follows; 59 says nothing follows. Both end with ports 0.
            proto::ESP | proto::NO_NEXT => return v,
            _ => break,
        }
        if walked == MAX_IPV6_EXT_HEADERS {
            // Bound reached: keep the addresses, give up on the ports (see crate docs).
            return v;
        }
        walked += 1;
        // Every extension header starts with (next header, length).
        let Some(&[nh, hlen]) = chunk::<2>(d, off, end) else {
            v.l4_cut = true;
            return v;
        };
        v.tuple.proto = nh;
        let len = match next {
            proto::FRAGMENT => {
                let Some(f) = chunk::<4>(d, off, end) else {
                    v.l4_cut = true;
                    return v;
                };
                let offset = u16::from_be_bytes([f[v6::FRAG_OFFSET], f[v6::FRAG_OFFSET + 1]]) >> 3;
                if offset != 0 {
                    // Later fragment: no upper-layer header here.
                    return v;
                }
                // A first fragment (M flag): its payload ends before the datagram's.
                cut |= f[v6::FRAG_OFFSET + 1] & 1 != 0;
                v6::FRAG_HEADER_LEN
            }
            // RFC 4302 2.2: in 4-byte units, minus 2.
            proto::AH => (usize::from(hlen) + 2) * 4,
            // RFC 8200 4.3-4.6 and RFC 6275/7401/5533: in 8-byte units, not counting the first 8.
            _ => (usize::from(hlen) + 1) * 8,
        };
        off += len;
    }
    ports(&mut v, d, off, end);
    if encap::is_tunnel(v.tuple.proto, v.tuple.dport) {
        return encap::ip_payload(v, d, off, end, cut, ctx);
    }
    v
}
