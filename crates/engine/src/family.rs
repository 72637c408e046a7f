//! Which address family a run's fixed-width structures are sized for when `--ipv6` is not
//! given: a file's first packets are looked at; a stream's are held ([`StreamHead`]) and
//! replayed, since it can be read only once.

use measure::RunConfig;
use trace::Capture;
use wire::Class;

use crate::packet::Packet;

/// Packets a file's first look reads to tell its address family.
const FAMILY_SAMPLE: usize = 100_000;
/// IP packets a stream's head holds to tell its address family.
const STREAM_SAMPLE: usize = 1_000;

/// The first packets of a stream, held until its address family is known: [`STREAM_SAMPLE`] IP
/// packets, one second of capture time, or the end of the stream, whichever comes first (so a
/// slow live feed is not held for long).
#[derive(Default)]
pub(crate) struct StreamHead {
    pub(crate) packets: Vec<Packet>,
    v4: usize,
    v6: usize,
    first_ts: Option<u64>,
}

impl StreamHead {
    /// Hold `p`; true when the head is complete.
    pub(crate) fn hold(&mut self, p: &Packet) -> bool {
        self.packets.push(*p);
        match p.class {
            Class::Ipv4 => self.v4 += 1,
            Class::Ipv6 => self.v6 += 1,
            _ => {}
        }
        let first = *self.first_ts.get_or_insert(p.ts_ns);
        self.v4 + self.v6 >= STREAM_SAMPLE || p.ts_ns.saturating_sub(first) >= 1_000_000_000
    }

    /// The note of a mostly-IPv6 head, which sizes the run for IPv6 keys.
    pub(crate) fn ipv6_note(&self) -> Option<String> {
        (self.v6 > self.v4).then(|| {
            format!(
                "{} of the stream's first {} IP packets are IPv6: fixed-width structures are \
                 sized for IPv6 keys, as with --ipv6",
                self.v6,
                self.v4 + self.v6
            )
        })
    }
}

/// Size the fixed-width structures for IPv6 keys when a capture file's first packets are mostly
/// IPv6 and `--ipv6` was not given: without it, the structures that decode keys of one exact
/// length (deltoid, rev_sketch, two_level, bloom_spreader) would skip every IPv6 key. Returns the
/// note saying so. Streams (stdin, pipes) are looked at by their first packets instead
/// ([`StreamHead`]): they can be read only once.
pub(crate) fn auto_ipv6(cap: &Capture, cfg: &RunConfig) -> Option<String> {
    if cfg.ipv6 || cap.is_stream() {
        return None;
    }
    let (mut v4, mut v6) = (0usize, 0usize);
    for rec in cap.records().take(FAMILY_SAMPLE) {
        let Ok(rec) = rec else { break };
        match crate::packet::packet(rec, cfg.tunnel).class {
            Class::Ipv4 => v4 += 1,
            Class::Ipv6 => v6 += 1,
            _ => {}
        }
    }
    (v6 > v4).then(|| {
        format!(
            "{v6} of the first {} IP packets are IPv6: fixed-width structures are sized for IPv6 \
             keys, as with --ipv6",
            v4 + v6
        )
    })
}
