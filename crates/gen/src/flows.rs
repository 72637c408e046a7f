//! The flow table: one 5-tuple and one frame size per flow, indexed by Zipf rank (index 0 is the
//! largest expected flow).
//!
//! Model (client → server traffic, as seen on an access or peering link):
//! - S source hosts (`Spec::sources`, default F/4) and D = F/8 servers. Flow r < S gets host r and
//!   flow r < D gets server r, so every host and server of the pools appears (exactly min(S, F)
//!   distinct sources); the remaining flows draw their host and server with a Zipf(1)-like
//!   popularity ([`LogUniform`]), so a few hosts open many flows and a few servers receive many,
//!   as in real traffic. Pairs then repeat (a host opening several connections to one server), so
//!   distinct(src) < distinct(pair) < distinct(5-tuple) = F.
//! - Each server runs one service, chosen by a hash of its index from [`SERVICES`] (by weight:
//!   80% TCP, 20% UDP); the source port is ephemeral, uniform in 1024..=65535.
//! - No two flows share a 5-tuple: a colliding draw redraws the source port (and after a few
//!   tries the server, uniformly), so the table holds exactly F distinct 5-tuples.
//! - Addresses: a host index is put through a seeded bijection of 28 bits (servers: 27 bits) whose
//!   top bits pick one of 16 (8) public unicast /8 blocks, so distinct indices give distinct,
//!   public-looking, well-spread addresses, and client and server blocks never overlap.
//! - Frame size per flow: fixed, or for [`Size::Mix`] one class per flow (a flow's packets look
//!   alike, as a bulk transfer's or an ACK stream's do) drawn from [`MIX`].

use key::KeyHasherBuilder;
use rand::RngCore;
use std::collections::HashSet;

use crate::sample::{rng, LogUniform};
use crate::spec::{Size, Spec};

pub(crate) const TCP: u8 = 6;
pub(crate) const UDP: u8 = 17;

/// (destination port, protocol, weight in %). Weights follow the usual shape of backbone port
/// mixes: web (TCP 443/80) dominates, DNS and QUIC are most of UDP; 80% TCP and 20% UDP by servers.
pub(crate) const SERVICES: [(u16, u8, u32); 12] = [
    (443, TCP, 46),
    (80, TCP, 22),
    (8080, TCP, 3),
    (22, TCP, 3),
    (25, TCP, 2),
    (993, TCP, 2),
    (3389, TCP, 1),
    (5228, TCP, 1),
    (53, UDP, 10),
    (443, UDP, 6),
    (123, UDP, 2),
    (3478, UDP, 2),
];

/// Per-flow frame-size classes of [`Size::Mix`]: (frame length, weight in %). The trimodal shape
/// of Internet packet sizes (40-byte-ish ACKs, the 576-byte default datagram, 1500-byte MTU
/// packets) reported for CAIDA backbone traces, e.g. Sinha, Papadopoulos and Heidemann,
/// "Internet Packet Size Distributions: Some Observations" (USC/ISI 2007): IP lengths 50, 576 and
/// 1500 plus the 14-byte Ethernet header. Mean 841 bytes, near SketchVisor's 769 (section 7.1).
pub(crate) const MIX: [(u16, u32); 3] = [(64, 40), (590, 10), (1514, 50)];

/// Public unicast /8 blocks used for clients (16 blocks: 2^28 addresses) and servers (8 blocks:
/// 2^27). None is private, loopback, CGN, link-local, multicast or reserved.
const CLIENT_BLOCKS: [u8; 16] = [
    24, 49, 58, 61, 67, 71, 73, 76, 81, 86, 95, 98, 112, 175, 189, 201,
];
const SERVER_BLOCKS: [u8; 8] = [13, 23, 31, 34, 52, 54, 104, 151];

/// One flow of the table. 16 bytes, so the table stays cache-friendly at millions of flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FlowRec {
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub dport: u16,
    pub wire_len: u16,
    pub proto: u8,
}

impl FlowRec {
    pub(crate) fn tuple(&self) -> key::Tuple {
        key::Tuple::v4(
            self.src.to_be_bytes(),
            self.dst.to_be_bytes(),
            self.sport,
            self.dport,
            self.proto,
        )
    }

    /// The 13-byte key-trace record (= the `five_tuple` key layout).
    #[inline]
    pub(crate) fn key13(&self) -> [u8; 13] {
        let mut k = [0u8; 13];
        k[0..4].copy_from_slice(&self.src.to_be_bytes());
        k[4..8].copy_from_slice(&self.dst.to_be_bytes());
        k[8..10].copy_from_slice(&self.sport.to_be_bytes());
        k[10..12].copy_from_slice(&self.dport.to_be_bytes());
        k[12] = self.proto;
        k
    }

    fn packed(&self) -> u128 {
        ((self.src as u128) << 96)
            | ((self.dst as u128) << 64)
            | ((self.sport as u128) << 48)
            | ((self.dport as u128) << 32)
            | self.proto as u128
    }
}

/// Seeded bijection on `bits`-bit integers: multiply by odd / add / xorshift rounds, each of which
/// is invertible mod 2^bits.
fn scramble(x: u64, bits: u32, key: u64) -> u64 {
    let mask = (1u64 << bits) - 1;
    let half = bits / 2;
    let mut v = x & mask;
    v = (v.wrapping_mul(0x9E37_79B9_7F4A_7C15 | 1).wrapping_add(key)) & mask;
    v ^= v >> half;
    v = (v.wrapping_mul((key >> 7) | 1).wrapping_add(key >> 29)) & mask;
    v ^= v >> (half + 1);
    v = v.wrapping_mul(0xBF58_476D_1CE4_E5B9) & mask;
    v ^ (v >> half)
}

/// IPv4 address (as a big-endian u32) of client host `i` (< 2^28).
pub(crate) fn client_addr(i: u64, seed: u64) -> u32 {
    let v = scramble(i, 28, key::sub_seed(seed, 0xC11E));
    let block = CLIENT_BLOCKS[(v >> 24) as usize & 15];
    ((block as u32) << 24) | (v as u32 & 0x00FF_FFFF)
}

/// IPv4 address of server `j` (< 2^27).
pub(crate) fn server_addr(j: u64, seed: u64) -> u32 {
    let v = scramble(j, 27, key::sub_seed(seed, 0x5E7E));
    let block = SERVER_BLOCKS[(v >> 24) as usize & 7];
    ((block as u32) << 24) | (v as u32 & 0x00FF_FFFF)
}

/// The (port, proto) service of server `j`.
fn service(j: u64, seed: u64) -> (u16, u8) {
    let mut x = key::reduce(key::mix64(j ^ key::sub_seed(seed, 0x5E21)), 100) as u32;
    for (port, proto, w) in SERVICES {
        if x < w {
            return (port, proto);
        }
        x -= w;
    }
    (443, TCP)
}

/// Builds the F flows of `spec` (which must be valid).
pub(crate) fn build(spec: &Spec) -> Vec<FlowRec> {
    let f = spec.flows;
    let s = spec.source_pool();
    let d = spec.server_pool();
    let host_pop = LogUniform::new(s);
    let server_pop = LogUniform::new(d);
    let mut r = rng(spec.seed, 1);
    let mut seen: HashSet<u128, KeyHasherBuilder> =
        HashSet::with_capacity_and_hasher(f as usize, KeyHasherBuilder);
    let mut out = Vec::with_capacity(f as usize);
    for rank in 0..f {
        let host = if rank < s {
            rank
        } else {
            host_pop.sample(r.next_u64())
        };
        let mut server = if rank < d {
            rank
        } else {
            server_pop.sample(r.next_u64())
        };
        let wire_len = match spec.size {
            Size::Fixed(n) => n,
            Size::Mix => {
                let mut x = key::reduce(r.next_u64(), 100) as u32;
                let mut len = MIX[2].0;
                for (l, w) in MIX {
                    if x < w {
                        len = l;
                        break;
                    }
                    x -= w;
                }
                len
            }
        };
        let src = client_addr(host, spec.seed);
        let mut attempt = 0u32;
        loop {
            // After 8 port collisions this (host, server, service) is crowded: move to a uniform
            // server. 64512 ports a pair and >= F/8 servers make the table's capacity far above F,
            // so this ends after a handful of draws.
            if attempt >= 8 {
                server = key::reduce(r.next_u64(), d as usize) as u64;
            }
            let (dport, proto) = service(server, spec.seed);
            let rec = FlowRec {
                src,
                dst: server_addr(server, spec.seed),
                sport: 1024 + key::reduce(r.next_u64(), 64512) as u16,
                dport,
                wire_len,
                proto,
            };
            if seen.insert(rec.packed()) {
                out.push(rec);
                break;
            }
            attempt += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scramble_is_a_bijection() {
        for bits in [8u32, 10, 27] {
            let n = 1u64 << bits.min(12);
            let mut seen = HashSet::new();
            for x in 0..n {
                let v = scramble(x, bits, 12345);
                assert!(v < 1 << bits);
                assert!(seen.insert(v));
            }
        }
        // Full 10-bit domain maps onto itself.
        let mut all: Vec<u64> = (0..1024).map(|x| scramble(x, 10, 99)).collect();
        all.sort_unstable();
        assert!(all.iter().copied().eq(0..1024));
    }

    #[test]
    fn addresses_are_public_and_pools_disjoint() {
        for i in 0..5000 {
            let c = client_addr(i, 1).to_be_bytes();
            let s = server_addr(i, 1).to_be_bytes();
            assert!(CLIENT_BLOCKS.contains(&c[0]));
            assert!(SERVER_BLOCKS.contains(&s[0]));
        }
        assert_ne!(
            client_addr(0, 1),
            client_addr(0, 2),
            "addresses depend on the seed"
        );
    }

    #[test]
    fn weights_sum_to_100_and_udp_is_a_fifth() {
        assert_eq!(SERVICES.iter().map(|s| s.2).sum::<u32>(), 100);
        let udp: u32 = SERVICES.iter().filter(|s| s.1 == UDP).map(|s| s.2).sum();
        assert_eq!(udp, 20);
        assert_eq!(MIX.iter().map(|m| m.1).sum::<u32>(), 100);
    }
}
