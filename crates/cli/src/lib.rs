//! The `netsift` command line: flags -> configuration -> `engine` -> printers. Each command's
//! flags and front end in its file (`run`, `live`, `agent`, `merge`, `controller`, `demo`,
//! `bench`, `pipeline`, `stats`), the consumers of a run's events in `print` and `table`,
//! standard output and the process's error rule in `out`, flag value parsers in `flags`, the
//! process's signals in `signals`. No command assembles a run itself: `engine` does.

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

use anyhow::Result;

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
