//! `netsift stats`: what a capture holds, per file.

use std::collections::BTreeSet;

use key::{KeyKind, KeyMap, KeySet};
use serde::Serialize;
use trace::Capture;
use truth::Counts;
use wire::{Class, Tunnel};

use crate::out::{Out, StdoutError};
use engine::packet::{each_packet, keyed};

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

/// The readable table of one file.
pub fn print_table(st: &FileStats, out: &mut Out) -> Result<(), StdoutError> {
    writeln!(out, "{}  ({})", st.file, st.format)?;
    let pct = |n: u64| {
        if st.packets == 0 {
            0.0
        } else {
            100.0 * n as f64 / st.packets as f64
        }
    };
    writeln!(out, "  packets      {:>14}", st.packets)?;
    writeln!(out, "  bytes        {:>14}", st.bytes)?;
    for c in Class::ALL {
        let n = st.classes.get(c);
        writeln!(out, "  {:<12} {n:>14}  {:>6.2}%", c.name(), pct(n))?;
    }
    if st.l4_cut > 0 {
        writeln!(out, "  (l4 cut      {:>14}  ports taken as 0)", st.l4_cut)?;
    }
    // Only the layers present: most captures carry none.
    let layers: Vec<String> = st
        .encapsulations
        .layers()
        .filter(|&(_, n)| n > 0)
        .map(|(l, n)| format!("{l} {n}"))
        .collect();
    if !layers.is_empty() {
        writeln!(
            out,
            "  encapsulated {:>14}  {:>6.2}%  ({}; key from the {} IP header)",
            st.packets - st.encapsulations.plain,
            pct(st.packets - st.encapsulations.plain),
            layers.join(", "),
            st.tunnel
        )?;
    }
    writeln!(
        out,
        "  flows        src {}  dst {}  pair {}  four_tuple {}  five_tuple {}",
        st.flows.src, st.flows.dst, st.flows.pair, st.flows.four_tuple, st.flows.five_tuple
    )?;
    writeln!(out, "  duration     {:.6} s", st.duration_s)?;
    writeln!(out, "  link types   {}", st.link_types.join(", "))?;
    match st.zipf_skew {
        Some(s) => writeln!(out, "  zipf skew    {s:.3}  (by {}, packets)", st.top_key)?,
        None => writeln!(
            out,
            "  zipf skew    n/a (fewer than 10 flows larger than 1 packet)"
        )?,
    }
    if !st.top.is_empty() {
        writeln!(
            out,
            "  top {} flows by packets ({}):",
            st.top.len(),
            st.top_key
        )?;
        for (i, t) in st.top.iter().enumerate() {
            writeln!(
                out,
                "    {:>3}. {:<48} {:>12} pkts {:>14} bytes",
                i + 1,
                t.key,
                t.packets,
                t.bytes
            )?;
        }
    }
    if let Some(e) = &st.error {
        writeln!(out, "  stopped early: {e}")?;
    }
    Ok(())
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
