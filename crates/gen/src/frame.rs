//! Frame templates and checksums for pcap output.
//!
//! Every frame is Ethernet II / IPv4 (20-byte header, DF, TTL 64, valid checksum) / TCP (20-byte
//! header, ACK) or UDP (8-byte header), then zero payload up to the wire length. The header is
//! patched per packet into a stack array; checksums are 16-bit one's-complement sums of the
//! patched words only, because the zero payload adds nothing to an Internet checksum (RFC 1071),
//! so even the L4 checksums cost O(header), not O(frame).

use crate::flows::{FlowRec, TCP};

pub(crate) const ETH_LEN: usize = 14;
pub(crate) const IP_LEN: usize = 20;
pub(crate) const TCP_LEN: usize = 20;
pub(crate) const UDP_LEN: usize = 8;
/// Longest generated header (Ethernet + IPv4 + TCP).
pub(crate) const MAX_HDR: usize = ETH_LEN + IP_LEN + TCP_LEN;
/// pcap record header.
pub(crate) const REC_HDR: usize = 16;
/// A pcap record header followed by the longest frame header: what one packet patches.
pub(crate) const MAX_REC: usize = REC_HDR + MAX_HDR;

const TTL: u16 = 64;
const TCP_WINDOW: u16 = 64240;

/// Fold a 32-bit one's-complement accumulator to 16 bits.
#[inline]
fn fold(mut s: u32) -> u16 {
    s = (s & 0xFFFF) + (s >> 16);
    s = (s & 0xFFFF) + (s >> 16);
    s as u16
}

/// Reference RFC 1071 checksum over bytes (the scalar twin the fast sums are tested against).
#[cfg(test)]
pub(crate) fn checksum_bytes(initial: u32, b: &[u8]) -> u16 {
    let mut s = initial as u64;
    let mut it = b.chunks_exact(2);
    for w in &mut it {
        s += u16::from_be_bytes([w[0], w[1]]) as u64;
    }
    if let [last] = it.remainder() {
        s += (*last as u64) << 8;
    }
    while s >> 16 != 0 {
        s = (s & 0xFFFF) + (s >> 16);
    }
    !(s as u16)
}

/// Sum of the four 16-bit words of two IPv4 addresses.
#[inline]
fn addr_sum(src: u32, dst: u32) -> u32 {
    (src >> 16) + (src & 0xFFFF) + (dst >> 16) + (dst & 0xFFFF)
}

/// Per-packet variable fields of a frame.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PacketFields {
    pub ts_ns: u64,
    pub caplen: u32,
    pub ip_id: u16,
    pub seq: u32,
    pub ack: u32,
}

/// Writes the pcap record header and the frame headers of one packet of `flow` into `out`;
/// returns the frame-header length (54 for TCP, 42 for UDP). The caller appends
/// `caplen - header` zero bytes. `flow.wire_len` must be at least the header length (>= 60 by
/// spec validation).
#[inline]
pub(crate) fn write_record(flow: &FlowRec, p: &PacketFields, out: &mut [u8; MAX_REC]) -> usize {
    let secs = (p.ts_ns / 1_000_000_000) as u32;
    let nanos = (p.ts_ns % 1_000_000_000) as u32;
    out[0..4].copy_from_slice(&secs.to_le_bytes());
    out[4..8].copy_from_slice(&nanos.to_le_bytes());
    out[8..12].copy_from_slice(&p.caplen.to_le_bytes());
    out[12..16].copy_from_slice(&(flow.wire_len as u32).to_le_bytes());
    let (wire_len, ip_id, seq, ack) = (flow.wire_len, p.ip_id, p.seq, p.ack);
    let out = &mut out[REC_HDR..];
    let tcp = flow.proto == TCP;
    let l4_len = if tcp { TCP_LEN } else { UDP_LEN };
    let hdr = ETH_LEN + IP_LEN + l4_len;
    let ip_total = wire_len.saturating_sub(ETH_LEN as u16);
    let seg_len = ip_total.saturating_sub(IP_LEN as u16);
    let (src, dst) = (flow.src.to_be_bytes(), flow.dst.to_be_bytes());

    // Ethernet: locally administered unicast MACs 02:01:<dst ip> and 02:00:<src ip>, type IPv4.
    out[0] = 0x02;
    out[1] = 0x01;
    out[2..6].copy_from_slice(&dst);
    out[6] = 0x02;
    out[7] = 0x00;
    out[8..12].copy_from_slice(&src);
    out[12] = 0x08;
    out[13] = 0x00;

    // IPv4.
    let a_sum = addr_sum(flow.src, flow.dst);
    let ttl_proto = (TTL << 8) | flow.proto as u16;
    let ip_sum = 0x4500 + ip_total as u32 + ip_id as u32 + 0x4000 + ttl_proto as u32 + a_sum;
    let ip = &mut out[ETH_LEN..ETH_LEN + IP_LEN];
    ip[0] = 0x45;
    ip[1] = 0;
    ip[2..4].copy_from_slice(&ip_total.to_be_bytes());
    ip[4..6].copy_from_slice(&ip_id.to_be_bytes());
    ip[6] = 0x40; // DF
    ip[7] = 0;
    ip[8] = TTL as u8;
    ip[9] = flow.proto;
    ip[10..12].copy_from_slice(&(!fold(ip_sum)).to_be_bytes());
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);

    // L4, with the pseudo-header (addresses, protocol, segment length) in its checksum.
    let pseudo = a_sum + flow.proto as u32 + seg_len as u32;
    let l4 = &mut out[ETH_LEN + IP_LEN..];
    l4[0..2].copy_from_slice(&flow.sport.to_be_bytes());
    l4[2..4].copy_from_slice(&flow.dport.to_be_bytes());
    let ports = flow.sport as u32 + flow.dport as u32;
    if tcp {
        const OFF_FLAGS: u16 = (5 << 12) | 0x10; // data offset 5 words, ACK
        l4[4..8].copy_from_slice(&seq.to_be_bytes());
        l4[8..12].copy_from_slice(&ack.to_be_bytes());
        l4[12..14].copy_from_slice(&OFF_FLAGS.to_be_bytes());
        l4[14..16].copy_from_slice(&TCP_WINDOW.to_be_bytes());
        let s = pseudo
            + ports
            + (seq >> 16)
            + (seq & 0xFFFF)
            + (ack >> 16)
            + (ack & 0xFFFF)
            + OFF_FLAGS as u32
            + TCP_WINDOW as u32;
        l4[16..18].copy_from_slice(&(!fold(s)).to_be_bytes());
        l4[18..20].copy_from_slice(&[0, 0]); // urgent pointer
    } else {
        l4[4..6].copy_from_slice(&seg_len.to_be_bytes());
        let s = pseudo + ports + seg_len as u32;
        // A computed 0 is sent as 0xFFFF: 0 means "no checksum" in UDP over IPv4 (RFC 768).
        let c = match !fold(s) {
            0 => 0xFFFF,
            c => c,
        };
        l4[6..8].copy_from_slice(&c.to_be_bytes());
    }
    hdr
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flows::UDP;

    fn full_frame(flow: &FlowRec, wire: u16, id: u16, seq: u32, ack: u32) -> Vec<u8> {
        let mut h = [0u8; MAX_REC];
        let flow = FlowRec {
            wire_len: wire,
            ..*flow
        };
        let p = PacketFields {
            ts_ns: 1_234_567_890_123,
            caplen: wire as u32,
            ip_id: id,
            seq,
            ack,
        };
        let n = write_record(&flow, &p, &mut h);
        assert_eq!(&h[..4], &1234u32.to_le_bytes());
        assert_eq!(&h[4..8], &567_890_123u32.to_le_bytes());
        assert_eq!(&h[12..16], &(wire as u32).to_le_bytes());
        let mut f = h[REC_HDR..REC_HDR + n].to_vec();
        f.resize(wire as usize, 0);
        f
    }

    /// The word-sum checksums equal the byte-wise RFC 1071 reference over the whole frame.
    #[test]
    fn fast_checksums_equal_reference() {
        let mut x = 0x1234_5678_9abc_def0u64;
        for i in 0..2000u32 {
            x = key::mix64(x);
            let flow = FlowRec {
                src: x as u32,
                dst: (x >> 32) as u32,
                sport: (x >> 7) as u16,
                dport: (x >> 23) as u16,
                wire_len: 0,
                proto: if i % 3 == 0 { UDP } else { TCP },
            };
            let wire = 60 + (key::mix64(x) % 1500) as u16;
            let f = full_frame(&flow, wire, i as u16, x as u32 ^ 0xdead, (x >> 13) as u32);
            let ip = &f[ETH_LEN..ETH_LEN + IP_LEN];
            assert_eq!(checksum_bytes(0, ip), 0, "IP header sums to 0xFFFF");
            let seg = &f[ETH_LEN + IP_LEN..];
            let pseudo = addr_sum(flow.src, flow.dst) + flow.proto as u32 + seg.len() as u32;
            let c = checksum_bytes(pseudo, seg);
            // A valid segment sums to 0xFFFF (checksum 0), or to 0 when UDP sent 0xFFFF for 0.
            assert!(
                c == 0 || (flow.proto == UDP && c == 0xFFFF),
                "frame {i}: {c:#x}"
            );
        }
    }

    #[test]
    fn fold_handles_carries() {
        assert_eq!(fold(0xFFFF_FFFF), 0xFFFF);
        assert_eq!(fold(0x0001_FFFF), 0x0001);
        assert_eq!(checksum_bytes(0, &[0x45, 0x00, 0x00, 0x1c]), !0x451c);
    }
}
