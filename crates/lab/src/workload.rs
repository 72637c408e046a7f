//! The packets a measurement runs over, preloaded in memory (Re-evaluating 3.1: no I/O in the
//! timed loop).
//!
//! A trace is held as compact 5-tuples (13 bytes a packet for IPv4, the full `Tuple` once an
//! IPv6 packet appears) and turned into keys of the figure's kind one epoch at a time, outside
//! the timed region. Holding 20M `FlowKey`s (38 bytes each) for every key kind would cost
//! gigabytes on a machine shared by several engineers; one epoch of keys is 76 MB.

use key::{FlowKey, KeyKind, KeySet, Tuple};
use trace::{Body, Capture};

use crate::LabError;

enum Store {
    V4(Vec<[u8; 13]>),
    Any(Vec<Tuple>),
}

/// A preloaded trace.
pub struct Workload {
    store: Store,
    /// How the trace was made ("bursty", "shuffled", or "capture").
    pub order: String,
    /// Zipf skew of a synthetic trace.
    pub skew: Option<f64>,
    /// Records of a capture that carried no IP flow (not in the trace; reported for accounting).
    pub skipped: u64,
}

fn pack(t: &Tuple) -> [u8; 13] {
    let mut r = [0u8; 13];
    r[..4].copy_from_slice(&t.src[..4]);
    r[4..8].copy_from_slice(&t.dst[..4]);
    r[8..10].copy_from_slice(&t.sport.to_be_bytes());
    r[10..12].copy_from_slice(&t.dport.to_be_bytes());
    r[12] = t.proto;
    r
}

fn unpack(r: &[u8; 13]) -> Tuple {
    Tuple::v4(
        [r[0], r[1], r[2], r[3]],
        [r[4], r[5], r[6], r[7]],
        u16::from_be_bytes([r[8], r[9]]),
        u16::from_be_bytes([r[10], r[11]]),
        r[12],
    )
}

impl Workload {
    fn empty(order: &str, skew: Option<f64>) -> Workload {
        Workload {
            store: Store::V4(Vec::new()),
            order: order.to_string(),
            skew,
            skipped: 0,
        }
    }

    fn push(&mut self, t: &Tuple) {
        match &mut self.store {
            Store::V4(v) if !t.v6 => v.push(pack(t)),
            Store::V4(v) => {
                // First IPv6 packet: widen everything seen so far.
                let mut all: Vec<Tuple> = v.iter().map(unpack).collect();
                all.push(*t);
                self.store = Store::Any(all);
            }
            Store::Any(v) => v.push(*t),
        }
    }

    /// A synthetic trace from `gen` (Zipf flow sizes; see the `gen` crate for the model).
    pub fn synthetic(spec: &gen::Spec) -> Result<Workload, LabError> {
        let mut w = Workload::empty(&spec.order.to_string(), Some(spec.skew));
        if let Store::V4(v) = &mut w.store {
            v.reserve(usize::try_from(spec.packets).unwrap_or(0));
        }
        gen::generate(spec, |p| w.push(&p.tuple))?;
        Ok(w)
    }

    /// The paired-timing examples' trace (`adapt_pairs`, `bypass_cpu`): Zipf over 500 k flows
    /// with one source each, seed 1.
    pub fn zipf_500k(packets: u64, skew: f64, order: gen::Order) -> Result<Workload, LabError> {
        Workload::synthetic(&gen::Spec {
            packets,
            flows: 500_000,
            sources: Some(500_000),
            skew,
            order,
            seed: 1,
            ..gen::Spec::default()
        })
    }

    /// Every IP packet of a capture file (pcap, pcapng or a key trace), in file order.
    /// Non-IP, truncated and malformed frames are counted in `skipped`.
    pub fn capture(path: &str) -> Result<Workload, LabError> {
        let cap = Capture::open(path, None)?;
        let mut w = Workload::empty("capture", None);
        let mut skipped = 0u64;
        cap.for_each(|rec| match rec.body {
            Body::Frame { link, data } => {
                let v = wire::parse(link, data);
                if v.class.is_ip() {
                    w.push(&v.tuple);
                } else {
                    skipped += 1;
                }
            }
            Body::Tuple(t) => w.push(&t),
        })?;
        w.skipped = skipped;
        Ok(w)
    }

    /// From explicit tuples (tests).
    pub fn from_tuples(tuples: &[Tuple], order: &str) -> Workload {
        let mut w = Workload::empty(order, None);
        for t in tuples {
            w.push(t);
        }
        w
    }

    pub fn len(&self) -> usize {
        match &self.store {
            Store::V4(v) => v.len(),
            Store::Any(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn has_v6(&self) -> bool {
        matches!(&self.store, Store::Any(v) if v.iter().any(|t| t.v6))
    }

    /// Key length an algorithm must be built for (the widest key of the trace).
    pub fn key_len(&self, kind: KeyKind) -> usize {
        kind.len(self.has_v6())
    }

    /// Replace `out` with the keys of kind `kind` of packets `start..end` (clamped to the trace).
    pub fn keys_into(&self, start: usize, end: usize, kind: KeyKind, out: &mut Vec<FlowKey>) {
        out.clear();
        let end = end.min(self.len());
        let start = start.min(end);
        match &self.store {
            Store::V4(v) => {
                if let Some(s) = v.get(start..end) {
                    out.extend(s.iter().map(|r| unpack(r).key(kind)));
                }
            }
            Store::Any(v) => {
                if let Some(s) = v.get(start..end) {
                    out.extend(s.iter().map(|t| t.key(kind)));
                }
            }
        }
    }

    /// Whether keys of `kind` can be handed on as big-endian u32 (`keys_u32_into`): 4-byte
    /// kinds (IPv4 source or destination) of a trace with no IPv6 packet.
    pub fn has_u32_keys(&self, kind: KeyKind) -> bool {
        matches!(self.store, Store::V4(_)) && matches!(kind, KeyKind::Src | KeyKind::Dst)
    }

    /// Replace `out` with the keys of kind `kind` (source or destination) of packets
    /// `start..end` as big-endian u32 (`FlowKey::prefix_u32`): 4 bytes a packet instead of a
    /// 38-byte `FlowKey`. Leaves `out` empty when `has_u32_keys(kind)` is false.
    pub fn keys_u32_into(&self, start: usize, end: usize, kind: KeyKind, out: &mut Vec<u32>) {
        out.clear();
        let end = end.min(self.len());
        let start = start.min(end);
        let off = match kind {
            KeyKind::Src => 0,
            KeyKind::Dst => 4,
            _ => return,
        };
        if let Store::V4(v) = &self.store {
            if let Some(s) = v.get(start..end) {
                out.extend(
                    s.iter()
                        .map(|r| u32::from_be_bytes([r[off], r[off + 1], r[off + 2], r[off + 3]])),
                );
            }
        }
    }

    /// Average share of distinct keys in consecutive batches of `batch` packets (Agg-Evict
    /// Figure 2b: "avg. unique flow percentage per batch"), over at most `limit` packets.
    /// The last partial batch is ignored unless it is the only one.
    pub fn unique_share(&self, kind: KeyKind, batch: usize, limit: usize) -> f64 {
        let batch = batch.max(1);
        let n = self.len().min(limit);
        let mut keys = Vec::new();
        let mut set = KeySet::default();
        let (mut sum, mut batches) = (0f64, 0u64);
        let chunk = (1 << 20) / batch * batch; // whole batches per materialised chunk
        let chunk = chunk.max(batch);
        let mut start = 0;
        while start < n {
            self.keys_into(start, (start + chunk).min(n), kind, &mut keys);
            for b in keys.chunks(batch) {
                if b.len() < batch && batches > 0 {
                    continue;
                }
                set.clear();
                set.extend(b.iter().copied());
                sum += set.len() as f64 / b.len() as f64;
                batches += 1;
            }
            start += chunk;
        }
        if batches == 0 {
            0.0
        } else {
            sum / batches as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(src: u8, dst: u8) -> Tuple {
        Tuple::v4([10, 0, 0, src], [192, 168, 0, dst], 1000, 80, 6)
    }

    #[test]
    fn keys_match_tuples_and_v6_widens() {
        let tuples = [t(1, 2), t(3, 4)];
        let mut w = Workload::from_tuples(&tuples, "test");
        let mut out = Vec::new();
        w.keys_into(0, 99, KeyKind::FiveTuple, &mut out);
        assert_eq!(
            out,
            vec![
                tuples[0].key(KeyKind::FiveTuple),
                tuples[1].key(KeyKind::FiveTuple)
            ]
        );
        assert_eq!(w.key_len(KeyKind::Pair), 8);
        let mut v6 = Tuple {
            v6: true,
            ..Tuple::default()
        };
        v6.src[15] = 1;
        w.push(&v6);
        assert!(w.has_v6());
        assert_eq!(w.len(), 3);
        w.keys_into(1, 3, KeyKind::Src, &mut out);
        assert_eq!(out, vec![tuples[1].key(KeyKind::Src), v6.key(KeyKind::Src)]);
        w.keys_into(5, 2, KeyKind::Src, &mut out);
        assert!(out.is_empty());
        // With an IPv6 packet the 4-byte kinds are no longer u32 keys.
        assert!(!w.has_u32_keys(KeyKind::Src));
        let mut u = vec![7];
        w.keys_u32_into(0, 3, KeyKind::Src, &mut u);
        assert!(u.is_empty());
    }

    #[test]
    fn u32_keys_match_the_flow_keys() {
        let tuples = [t(1, 2), t(3, 4), t(1, 9)];
        let w = Workload::from_tuples(&tuples, "test");
        let (mut keys, mut u) = (Vec::new(), Vec::new());
        for kind in [KeyKind::Src, KeyKind::Dst] {
            assert!(w.has_u32_keys(kind));
            w.keys_into(1, 3, kind, &mut keys);
            w.keys_u32_into(1, 3, kind, &mut u);
            let want: Vec<u32> = keys.iter().map(|k| k.prefix_u32()).collect();
            assert_eq!(u, want);
            assert_eq!(u.len(), 2);
        }
        assert!(!w.has_u32_keys(KeyKind::Pair));
        w.keys_u32_into(0, 3, KeyKind::Pair, &mut u);
        assert!(u.is_empty());
    }

    #[test]
    fn unique_share_counts_distinct_keys_per_batch() {
        // Batches of 4: [1,1,1,1] -> 1/4, [1,2,3,4] -> 4/4; average 0.625.
        let src = [1u8, 1, 1, 1, 1, 2, 3, 4];
        let tuples: Vec<Tuple> = src.iter().map(|&s| t(s, 9)).collect();
        let w = Workload::from_tuples(&tuples, "test");
        assert!((w.unique_share(KeyKind::Src, 4, usize::MAX) - 0.625).abs() < 1e-12);
        // Destination is constant: one distinct key per batch.
        assert!((w.unique_share(KeyKind::Dst, 4, usize::MAX) - 0.25).abs() < 1e-12);
        assert!((w.unique_share(KeyKind::Src, 8, usize::MAX) - 0.5).abs() < 1e-12);
    }
}
