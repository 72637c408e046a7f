//! Capture record → packet view: the one loop that turns capture records into classified
//! packets. Runs, `stats`, `bench parse` and `live`'s capture threads all read packets through
//! [`each_packet`] / [`packet`], so every front door classifies and counts packets the same way.

use trace::{Body, Capture, TraceError};
use wire::{Class, Encap, Tunnel, View};

/// One packet after parsing: its class and, for IPv4/IPv6, its 5-tuple (the parser's
/// [`View`], read through `Deref`: `p.tuple`, `p.class`).
///
/// The view is a field the parser returns into, not a copy of its fields: copying the 38-byte
/// tuple out of the view the parser had just written (narrow stores) loaded it in 16-byte
/// pieces spanning several of them, a store-forwarding stall on every packet (about 7 ns of
/// `run`'s 75 a packet, issue 13).
#[derive(Clone, Copy, Debug)]
pub struct Packet {
    pub ts_ns: u64,
    /// Length on the wire (bytes are counted with it, not with the captured length).
    pub wire_len: u32,
    /// Link type of the frame; `None` for key-trace records.
    pub link: Option<u32>,
    /// Class, tuple, `l4_cut` and the encapsulation layers the frame carried (MPLS, PPPoE,
    /// tunnels).
    pub view: View,
}

impl std::ops::Deref for Packet {
    type Target = View;
    #[inline]
    fn deref(&self) -> &View {
        &self.view
    }
}

/// Read every record of `cap`, classify it (`tunnel`: which IP header of a tunnelled packet
/// makes its tuple) and call `f`. Stops at the first read error and returns it; every record
/// before it has been delivered.
#[inline]
pub fn each_packet(
    cap: &Capture,
    tunnel: Tunnel,
    mut f: impl FnMut(&Packet),
) -> Result<(), TraceError> {
    // `for_each_streamed` rather than the `records()` iterator: it keeps the decoder state in
    // registers and is measurably faster per record (trace crate's `read` bench), and it reads
    // stdin and pipes as they arrive instead of into memory first (a live `tcpdump -w -` feed).
    cap.for_each_streamed(|rec| f(&packet(rec, tunnel)))?;
    Ok(())
}

/// [`each_packet`] over several captures as one, merged by capture time
/// ([`trace::merge_by_time`]: the order `mergecap` writes; ties by capture, then record order):
/// the hosts' captures of one network as a capture of all of it. Stops at the first read
/// error and returns it (it names its file); the packets merged ahead of it have been delivered.
pub fn each_packet_by_time(
    caps: &[Capture],
    tunnel: Tunnel,
    mut f: impl FnMut(&Packet),
) -> Result<(), TraceError> {
    for r in trace::merge_by_time(caps) {
        f(&packet(r?.1, tunnel));
    }
    Ok(())
}

/// One capture record, classified: a frame parsed by `wire`, a key-trace tuple as IPv4 or IPv6.
#[inline]
pub fn packet(rec: trace::Record<'_>, tunnel: Tunnel) -> Packet {
    match rec.body {
        Body::Frame { link, data } => Packet {
            ts_ns: rec.ts_ns,
            wire_len: rec.wire_len,
            link: Some(link),
            view: wire::parse_with(link, data, tunnel),
        },
        Body::Tuple(t) => Packet {
            ts_ns: rec.ts_ns,
            wire_len: rec.wire_len,
            link: None,
            view: View {
                class: if t.v6 { Class::Ipv6 } else { Class::Ipv4 },
                tuple: t,
                l4_cut: false,
                encap: Encap::NONE,
            },
        },
    }
}

/// Whether a class carries a usable flow key.
#[inline]
pub fn keyed(c: Class) -> bool {
    matches!(c, Class::Ipv4 | Class::Ipv6)
}
