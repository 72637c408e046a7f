//! `netsift stats`: what a capture holds, per file (`engine::stats`), as a table.

use wire::Class;

use crate::out::{Out, StdoutError};

pub use engine::stats::{file_stats, file_stats_with, zipf_fit, FileStats, Flows, TopFlow};

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
