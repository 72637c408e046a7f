//! The table's first and last capture times (issue 16, point 3; `wsaf` module docs): a flow's
//! `first` is the time of the packet whose emission inserted it into its slot, `last` of the
//! packet whose emission last added to it. The packets before a flow's first emission stay in
//! the regulator, which keeps no times, so `first` is not the flow's first packet.

use algo::{Algorithm, BuildCtx, KeyBatch};
use insta::{InstaConfig, InstaMeasure};
use key::{FlowKey, KeyKind, KeyMap};

/// A generated trace (Zipf 1.1 over 5000 5-tuple flows, 1 Mpps from a Unix-time start: times
/// need all 61 bits) with 0-999 ns of seeded jitter added to each packet, so no two packets of
/// a flow share a time: (key, capture time) in order.
fn trace() -> Vec<(FlowKey, u64)> {
    let spec = gen::Spec {
        packets: 200_000,
        flows: 5_000,
        seed: 3,
        ..gen::Spec::default()
    };
    let mut out = vec![];
    gen::generate(&spec, |p| {
        let jitter = (p.ts_ns ^ u64::from(p.flow)).wrapping_mul(0x9e37_79b9) % 1000;
        out.push((p.tuple.key(KeyKind::FiveTuple), p.ts_ns + jitter));
    })
    .unwrap();
    out
}

fn build(two: bool, cfg: InstaConfig) -> InstaMeasure {
    let ctx = BuildCtx {
        key_len: 13,
        ..BuildCtx::default()
    };
    InstaMeasure::new(two, cfg, &ctx).unwrap()
}

/// The times the timed batch path records equal those an untimed twin fed one packet at a time
/// shows (`InstaMeasure::emission_times`: the packet whose update made an emission while the
/// flow was in no slot sets `first` and `last`; one while it was sets `last`). Both layers, the default table and a
/// 64-slot table that replaces flows (a replaced flow inserted again starts a new `first`).
/// The untimed twin's table counts equal the timed one's (times change no count).
#[test]
fn first_and_last_are_the_times_of_the_emitting_packets() {
    let t = trace();
    let keys: Vec<FlowKey> = t.iter().map(|p| p.0).collect();
    let ts: Vec<u64> = t.iter().map(|p| p.1).collect();
    let ws = vec![1u64; t.len()];
    for two in [true, false] {
        for entries in [1 << 16, 64] {
            let cfg = InstaConfig {
                wsaf_entries: entries,
                ..InstaConfig::default()
            };
            let mut timed = build(two, cfg);
            let mut twin = timed.clone();
            for ((k, w), s) in keys.chunks(32).zip(ws.chunks(32)).zip(ts.chunks(32)) {
                timed.update_timed(KeyBatch::Keys(k), w, s);
            }
            let want = twin.emission_times(t.iter().copied());
            let mut first_packet: KeyMap<u64> = KeyMap::default();
            for &(k, at) in &t {
                first_packet.entry(k).or_insert(at);
            }
            assert_eq!(timed.emits(), twin.emits());
            let stored: Vec<FlowKey> = timed.table().iter().map(|(k, _)| k).collect();
            assert!(stored.len() >= 50, "{} flows in the table", stored.len());
            if entries == 64 {
                assert!(timed.table().evictions() > 0, "two {two}: no replacement");
            }
            let mut later = 0;
            for k in &stored {
                assert_eq!(timed.table_packets(k), twin.table_packets(k));
                let got = timed.flow_times(k);
                assert_eq!(got, want.get(k).copied(), "two {two}, {entries}: {k}");
                let (f, l) = got.unwrap();
                assert!(f <= l);
                later += usize::from(f > first_packet[k]);
            }
            // The packets before the first emission stay in the regulator: nearly every
            // flow's `first` is after its first packet (a flow in crowded words can emit on its
            // first packet).
            assert!(
                later * 10 >= stored.len() * 9,
                "two {two}, {entries}: {later} of {}",
                stored.len()
            );
            // A key never seen has no times; an untimed instance records none.
            assert_eq!(timed.flow_times(&FlowKey::from_u32(7)), None);
            assert_eq!(twin.flow_times(&stored[0]), None);
        }
    }
}

/// Two workers (flows split by hash, each its own timed instance) merged: every flow keeps
/// the times its worker recorded.
#[test]
fn merging_keeps_each_flows_times() {
    let t = trace();
    let mut w = [
        build(true, InstaConfig::default()),
        build(true, InstaConfig::default()),
    ];
    let h = key::HashFn::new(77);
    let mut parts: [Vec<(FlowKey, u64)>; 2] = [vec![], vec![]];
    for &p in &t {
        parts[(h.hash(&p.0) & 1) as usize].push(p);
    }
    for (inst, part) in w.iter_mut().zip(&parts) {
        let keys: Vec<FlowKey> = part.iter().map(|p| p.0).collect();
        let ts: Vec<u64> = part.iter().map(|p| p.1).collect();
        inst.update_timed(KeyBatch::Keys(&keys), &vec![1; keys.len()], &ts);
    }
    let mut merged = w[0].clone();
    merged.merge(&w[1]).unwrap();
    let mut n = 0;
    for inst in &w {
        for (k, _) in inst.table().iter() {
            assert!(inst.flow_times(&k).is_some());
            assert_eq!(merged.flow_times(&k), inst.flow_times(&k), "{k}");
            n += 1;
        }
    }
    assert!(n > 100, "{n}");
}
