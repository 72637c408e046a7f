//! netsift as a library: the glue between the pipeline crates that the `netsift` binary and the
//! integration tests share (the source loop, `run`, `stats`, `bench`, standard output and the
//! process's error rule in `out`, flag value parsers in `flags`).

#![forbid(unsafe_code)]

pub mod bench;
pub mod flags;
pub mod out;
pub mod run;
pub mod source;
pub mod stats;

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

/// `netsift algorithms`: the catalog, one line per algorithm with the tasks it answers, or
/// (`json`) one object per algorithm with its facts.
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
                    "flow_size_only": e.flow_size_only_params(),
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&all)?)?;
    } else {
        for e in catalog::ALL {
            let t: Vec<&str> = e.tasks.iter().map(|t| t.name()).collect();
            writeln!(out, "{:<16} {}", e.name, t.join(", "))?;
        }
    }
    Ok(())
}
