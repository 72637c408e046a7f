//! netsift as a library: the glue between the pipeline crates that the `netsift` binary and the
//! integration tests share (the source loop, `run`, `stats`, `bench`, standard output and the
//! process's error rule in `out`, flag value parsers in `flags`).

#![forbid(unsafe_code)]

pub mod agent;
pub mod bench;
pub mod controller;
pub mod demo;
pub mod flags;
pub mod live;
pub mod merge;
pub mod out;
pub mod pipeline;
pub mod print;
pub mod run;
pub mod signals;
pub mod stats;
pub mod table;

use anyhow::{Context, Result};
use trace::{Capture, Format};

/// The built-in default trace: 1 M packets of the generator's default model, as an in-memory
/// pcap, so the default run exercises the same reader and parser as a real file.
pub fn default_capture() -> Result<Capture> {
    let spec = gen::Spec {
        packets: 1_000_000,
        snaplen: 64,
        ..gen::Spec::default()
    };
    let mut buf = Vec::new();
    gen::write(&spec, gen::OutFormat::Pcap, &mut buf).context("generating the default trace")?;
    let name = format!(
        "<built-in: gen --packets {} --flows {} --skew {} --seed {}>",
        spec.packets, spec.flows, spec.skew, spec.seed
    );
    Ok(Capture::from_bytes(&name, buf, Some(Format::Pcap))?)
}

/// What an entry's defaults cost: (key length, bytes) at the first key length it holds among a
/// 5-tuple (13), a source address (4) and an address pair (8).
fn default_memory(e: &algo::Entry) -> Option<(usize, u64)> {
    [13usize, 4, 8].into_iter().find_map(|key_len| {
        let ctx = algo::BuildCtx {
            key_len,
            ..algo::BuildCtx::default()
        };
        e.memory(&toml::Table::new(), &ctx)
            .ok()
            .map(|b| (key_len, b))
    })
}

/// `netsift algorithms`: the catalog, one line per algorithm with the tasks it answers and what
/// its defaults cost, or (`json`) one object per algorithm with its facts.
pub fn algorithms(json: bool, out: &mut out::Out) -> Result<()> {
    if json {
        let all: Vec<serde_json::Value> = catalog::ALL
            .iter()
            .map(|e| {
                serde_json::json!({
                    "name": e.name,
                    "tasks": e.tasks,
                    "keys": match e.fit {
                        algo::KeyFit::Any => "any length",
                        algo::KeyFit::Exact => "exactly the configured length",
                        algo::KeyFit::AtMost => "up to the configured length",
                    },
                    "defaults": (e.defaults)(),
                    "default_memory": default_memory(e).map(|(key_len, bytes)| {
                        serde_json::json!({ "key_len": key_len, "bytes": bytes })
                    }),
                    "flow_size_only": e.flow_size_only_params(),
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&all)?)?;
    } else {
        writeln!(out, "{:<16} {:>22}  tasks", "algorithm", "default memory")?;
        for e in catalog::ALL {
            let t: Vec<&str> = e.tasks.iter().map(|t| t.name()).collect();
            // 0 B: a structure that grows with the hosts or flows it holds.
            let mem = default_memory(e).map_or("-".to_string(), |(k, b)| match b {
                0 => "grows with the keys".to_string(),
                b => format!("{} ({k} B keys)", measure::report::human_bytes(b)),
            });
            writeln!(out, "{:<16} {mem:>22}  {}", e.name, t.join(", "))?;
        }
    }
    Ok(())
}
