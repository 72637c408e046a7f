//! What a capture holds (`netsift stats`): packets and bytes by class, encapsulations, flows
//! per key kind, time span, link types, the largest flows and a Zipf fit, read through the
//! same packet loop as a run ([`crate::packet::each_packet`]).

use std::collections::BTreeSet;

use key::{KeyKind, KeyMap, KeySet};
use serde::Serialize;
use trace::Capture;
use truth::Counts;
use wire::Tunnel;

use crate::packet::{each_packet, keyed};

/// `stats`'s built-in trace: 1 M packets of the generator's default model, as an in-memory
/// pcap, so the default run exercises the same reader and parser as a real file.
pub fn builtin() -> anyhow::Result<Capture> {
    let spec = gen::Spec {
        packets: 1_000_000,
        snaplen: 64,
        ..gen::Spec::default()
    };
    let mut buf = Vec::new();
    gen::write(&spec, gen::OutFormat::Pcap, &mut buf)
        .map_err(|e| anyhow::anyhow!("generating the default trace: {e}"))?;
    let name = format!(
        "<built-in: gen --packets {} --flows {} --skew {} --seed {}>",
        spec.packets, spec.flows, spec.skew, spec.seed
    );
    Ok(Capture::from_bytes(&name, buf, Some(trace::Format::Pcap))?)
}

#[derive(Debug, Default, Serialize)]
pub struct Flows {
    pub src: u64,
    pub dst: u64,
    pub pair: u64,
    pub four_tuple: u64,
    pub five_tuple: u64,
}

#[derive(Debug, Serialize)]
pub struct TopFlow {
    pub key: String,
    pub packets: u64,
    pub bytes: u64,
}

/// One file's statistics. Class counts always add up to `packets`.
#[derive(Debug, Serialize)]
pub struct FileStats {
    pub file: String,
    pub format: String,
    pub packets: u64,
    /// Sum of wire lengths (0 for key traces, which carry no length).
    pub bytes: u64,
    #[serde(flatten)]
    pub classes: wire::Classes,
    /// Packets per encapsulation layer (MPLS, PPPoE, tunnels; `plain`: none), each packet once
    /// under every kind of layer it carried. Tunnels are recognised in both tunnel modes.
    pub encapsulations: wire::EncapCounts,
    /// Which IP header of a tunnelled packet made the tuples (`outer` unless asked).
    pub tunnel: wire::Tunnel,
    /// IPv4/IPv6 packets whose capture ends before the 4 port bytes (ports taken as 0).
    pub l4_cut: u64,
    pub flows: Flows,
    pub first_ts_ns: Option<u64>,
    pub last_ts_ns: Option<u64>,
    pub duration_s: f64,
    pub link_types: Vec<String>,
    /// Kind of key `top` and `zipf_skew` are computed over.
    pub top_key: KeyKind,
    pub top: Vec<TopFlow>,
    /// Least-squares slope of log(size) against log(rank) over the largest flows (see `zipf_fit`).
    pub zipf_skew: Option<f64>,
    /// The read error that stopped this file early, if any ("FILE: offset N: reason").
    pub error: Option<String>,
}

/// Estimate a Zipf skew from flow sizes: the negated least-squares slope of ln(size) on ln(rank)
/// over ranks 1..=min(n, 1000), stopping at the first flow of size 1 (the tail of size-1 flows is
/// flat and would bias the slope towards 0). `None` with fewer than 10 ranks to fit.
pub fn zipf_fit(sizes_desc: &[u64]) -> Option<f64> {
    let pts: Vec<(f64, f64)> = sizes_desc
        .iter()
        .take(1000)
        .take_while(|&&s| s > 1)
        .enumerate()
        .map(|(i, &s)| (((i + 1) as f64).ln(), (s as f64).ln()))
        .collect();
    if pts.len() < 10 {
        return None;
    }
    let n = pts.len() as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    Some(-sxy / sxx)
}

impl FileStats {
    /// The entry of a file that could not be opened at all.
    pub fn failed(file: &str, error: String) -> FileStats {
        let file = file.to_string();
        let mut st = FileStats::empty(file, String::new(), KeyKind::FiveTuple);
        st.error = Some(error);
        st
    }

    fn empty(file: String, format: String, top_key: KeyKind) -> FileStats {
        FileStats {
            file,
            format,
            packets: 0,
            bytes: 0,
            classes: wire::Classes::default(),
            encapsulations: wire::EncapCounts::default(),
            tunnel: wire::Tunnel::Outer,
            l4_cut: 0,
            flows: Flows::default(),
            first_ts_ns: None,
            last_ts_ns: None,
            duration_s: 0.0,
            link_types: vec![],
            top_key,
            top: vec![],
            zipf_skew: None,
            error: None,
        }
    }

    /// Sum of the six classes; always equals `packets`.
    pub fn classified(&self) -> u64 {
        self.classes.total()
    }
}

/// Compute the statistics of one capture, keying tunnelled packets by their outer IP header. A
/// read error ends the file early: the counts read so far are kept and the error is recorded.
pub fn file_stats(cap: &Capture, top_n: usize, top_key: KeyKind) -> FileStats {
    file_stats_with(cap, top_n, top_key, Tunnel::Outer)
}

/// [`file_stats`], with `tunnel` picking which IP header of a tunnelled packet makes its tuple.
pub fn file_stats_with(cap: &Capture, top_n: usize, top_key: KeyKind, tunnel: Tunnel) -> FileStats {
    let mut st = FileStats::empty(cap.name().to_string(), cap.format().to_string(), top_key);
    st.tunnel = tunnel;
    let mut sets: [KeySet; 5] = Default::default();
    let mut sizes: KeyMap<Counts> = KeyMap::default();
    let mut links = BTreeSet::new();
    let (mut first, mut last) = (u64::MAX, 0u64);
    let res = each_packet(cap, tunnel, |p| {
        st.packets += 1;
        st.bytes += p.wire_len as u64;
        st.encapsulations.add(p.encap);
        first = first.min(p.ts_ns);
        last = last.max(p.ts_ns);
        if let Some(l) = p.link {
            links.insert(l);
        }
        st.classes.add(p.class);
        if keyed(p.class) {
            st.l4_cut += p.l4_cut as u64;
            for (set, kind) in sets.iter_mut().zip(KeyKind::ALL) {
                set.insert(p.tuple.key(kind));
            }
            let c = sizes.entry(p.tuple.key(top_key)).or_default();
            c.packets += 1;
            c.bytes += p.wire_len as u64;
        }
    });
    if let Err(e) = res {
        st.error = Some(e.to_string());
    }
    st.flows = Flows {
        src: sets[0].len() as u64,
        dst: sets[1].len() as u64,
        pair: sets[2].len() as u64,
        four_tuple: sets[3].len() as u64,
        five_tuple: sets[4].len() as u64,
    };
    if st.packets > 0 {
        st.first_ts_ns = Some(first);
        st.last_ts_ns = Some(last);
        st.duration_s = (last - first) as f64 / 1e9;
    }
    st.link_types = links
        .into_iter()
        .map(|l| format!("{} ({l})", wire::linktype::name(l)))
        .collect();
    let mut ranked: Vec<_> = sizes.into_iter().collect();
    ranked.sort_unstable_by(|a, b| b.1.packets.cmp(&a.1.packets).then(a.0.cmp(&b.0)));
    let desc: Vec<u64> = ranked.iter().map(|(_, c)| c.packets).collect();
    st.zipf_skew = zipf_fit(&desc);
    st.top = ranked
        .iter()
        .take(top_n)
        .map(|(k, c)| TopFlow {
            key: k.to_string(),
            packets: c.packets,
            bytes: c.bytes,
        })
        .collect();
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_fit_recovers_exact_power_law() {
        let sizes: Vec<u64> = (1..=500)
            .map(|r| (1e7 / (r as f64).powf(1.1)).round() as u64)
            .collect();
        let s = zipf_fit(&sizes).unwrap();
        assert!((s - 1.1).abs() < 0.01, "{s}");
        assert_eq!(zipf_fit(&[5, 4, 3]), None);
    }
}
