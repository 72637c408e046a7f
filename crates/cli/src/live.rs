//! `netsift live`: the tasks of `run` over packets captured from network interfaces
//! (`engine::live`: libpcap, epochs by capture time that close on time on an idle link, the
//! kernel's received/dropped counts per epoch), and a daemon's signals: SIGTERM/SIGINT flush
//! the open epoch and stop, SIGHUP re-reads `--config` (its thresholds, k and alert rules).
//! Each event goes to the [`Printer`] of `run` (which prints it and feeds the monitor:
//! metrics, alerts).

use anyhow::{bail, Result};
use clap::Args;
use engine::live::Interfaces;
pub use engine::live::DEFAULT_EPOCH_MS;
use engine::Event;
use measure::RunConfig;

use crate::flags;
use crate::out::Out;
use crate::print::{Notes, Printer};
use crate::run::RunArgs;

pub use engine::live::{
    check_bpf_size, compile_bpf, BPF_COMPILE_LIMIT, MAX_BPF_BYTES, MAX_BPF_TERMS,
};

#[derive(Args, Clone)]
pub struct CaptureArgs {
    /// Interface to capture from; `any` captures on all of them (Linux cooked headers). Give
    /// it several times for several interfaces (one capture thread each).
    #[arg(long = "iface", value_name = "IF")]
    pub ifaces: Vec<String>,
    /// Capture filter in pcap-filter(7) syntax (`udp and net 198.18.0.0/15`), applied in the
    /// kernel on every interface. At most 100 terms and 8 KiB, compiled within 2 s: libpcap's
    /// compile time grows with the cube of the terms.
    #[arg(long, value_name = "FILTER", requires = "ifaces")]
    bpf: Option<String>,
    /// Kernel capture buffer per interface (`64M`; at least 1M). Packets arriving while it is
    /// full are dropped by the kernel and counted in each epoch's `capture.dropped`.
    #[arg(long, value_name = "SIZE", value_parser = flags::bytes, requires = "ifaces")]
    buffer: Option<u64>,
    /// Bytes of each packet captured (64..=262144): the headers are what is measured, so the
    /// default holds deep tunnel stacks and copies little.
    #[arg(long, default_value_t = 256, allow_negative_numbers = true,
          value_parser = flags::whole::<u32>(64..=262_144))]
    snaplen: u32,
}

#[derive(Args)]
#[command(group(clap::ArgGroup::new("interfaces").args(["ifaces"]).required(true)))]
pub struct LiveArgs {
    #[command(flatten)]
    pub capture: CaptureArgs,
    /// Log level of the structured logs on stderr (error, warn, info, debug, trace, or a
    /// tracing filter such as `netsift=debug`); default `RUST_LOG`, else info.
    #[arg(long, value_name = "LEVEL")]
    pub log: Option<String>,
    #[command(flatten)]
    pub run: RunArgs,
}

/// The run's configuration for live capture: `run`'s (flags over `--config`), with live's
/// defaults (`engine::live::defaults`: epochs of [`DEFAULT_EPOCH_MS`], an operator's
/// thresholds, no ground truth unless `--truth on`).
fn live_config(a: &LiveArgs) -> Result<RunConfig> {
    let mut cfg = crate::run::config(&a.run, None, None)?;
    engine::live::defaults(&mut cfg, a.run.truth_given());
    Ok(cfg)
}

/// SIGHUP: re-read `--config`. Thresholds and k may change (from the open epoch on, which is
/// not lost: `engine::Control::retune`) and the alert rules (`Printer::reload`); anything else
/// needs a restart, so such a config is refused, as is one that does not parse: the old one
/// stays.
fn reload(a: &LiveArgs, asked: &RunConfig, printer: &mut Printer) -> Result<RunConfig> {
    let Some(path) = a.run.config_path() else {
        bail!("no --config to re-read");
    };
    let fresh = live_config(a)?;
    // Everything but the thresholds and k must stay as it runs.
    let fixed = |c: &RunConfig| -> Result<serde_json::Value> {
        let mut v = serde_json::to_value(c)?;
        // `[[measure]]` in the file.
        if let Some(ms) = v.get_mut("measure").and_then(|m| m.as_array_mut()) {
            for m in ms.iter_mut().filter_map(|m| m.as_object_mut()) {
                m.remove("threshold");
                m.remove("k");
            }
        }
        // `[[alert]]` rules: the monitor's (`Printer::reload`).
        if let Some(o) = v.as_object_mut() {
            o.remove("alert");
        }
        Ok(v)
    };
    let (old, new) = (fixed(asked)?, fixed(&fresh)?);
    if old != new {
        let changed: Vec<&str> = match (old.as_object(), new.as_object()) {
            (Some(o), Some(n)) => o
                .iter()
                .filter(|(k, v)| n.get(k.as_str()) != Some(v))
                .map(|(k, _)| k.as_str())
                .collect(),
            _ => vec![],
        };
        bail!(
            "{path}: only thresholds and k change live; restart to change {}",
            changed.join(", ")
        );
    }
    printer.reload(&fresh)?;
    Ok(fresh)
}

/// Logs on stderr (`tracing`): `--log`, else `RUST_LOG`, else info.
pub(crate) fn init_logs(level: Option<&str>) -> Result<()> {
    use tracing_subscriber::EnvFilter;
    let filter = match level {
        Some(l) => EnvFilter::try_new(l).map_err(|e| anyhow::anyhow!("--log {l}: {e}"))?,
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
    };
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
    Ok(())
}

/// `netsift live`. Stopped by SIGTERM or SIGINT it reports the open epoch (partial) and the
/// summary and exits 0: a daemon asked to stop has done its job. Returns Ok(false) when a
/// capture failed (the report covers what was read).
pub fn cmd_live(a: LiveArgs, out: &mut Out) -> Result<bool> {
    init_logs(a.log.as_deref())?;
    let cfg = live_config(&a)?;
    let asked = cfg.clone();
    let ifs = Interfaces {
        ifaces: a.capture.ifaces.clone(),
        bpf: a.capture.bpf.clone(),
        buffer: a.capture.buffer,
        snaplen: a.capture.snaplen,
    };
    let run = engine::Run::new(cfg, engine::Source::Live(ifs))?;
    // Before any capture: a metrics port in use or a bad alert rule is one error line.
    let mut printer = a.run.printer(run.config(), Notes::Logs)?;
    let control = crate::signals::control();
    crate::signals::install();
    crate::signals::install_hangup();
    let outcome = run.with_control(control.clone()).run(&mut |e| match e {
        Event::Hangup => {
            match reload(&a, &asked, &mut printer) {
                Ok(fresh) => control.retune(fresh.measures),
                Err(e) => {
                    tracing::error!("SIGHUP: reload refused, the old configuration stays: {e:#}")
                }
            }
            Ok(())
        }
        e => printer.event(e, out),
    })?;
    match outcome.stopped {
        Some(code) => tracing::info!(signal = crate::signals::name(code), "stopped"),
        None if outcome.read_error.is_none() => tracing::error!("every capture ended"),
        None => {}
    }
    Ok(outcome.read_error.is_none())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Live {
        #[command(flatten)]
        live: LiveArgs,
    }

    fn cfg(args: &[&str]) -> RunConfig {
        let a = Live::try_parse_from([&["live", "--iface", "lo"][..], args].concat())
            .unwrap_or_else(|e| panic!("{e}"));
        live_config(&a.live).unwrap()
    }

    /// Live's defaults flag what an operator calls heavy (issue 34: 273 heavy hitters at a
    /// 5-packet threshold, 56 DDoS victims at 2 sources): 1% of the epoch, 100 peers; a
    /// threshold given is kept for every task.
    #[test]
    fn live_thresholds_default_to_an_operators() {
        let c = cfg(&[]);
        assert_eq!(c.epoch_ms, Some(DEFAULT_EPOCH_MS));
        use engine::live::{LIVE_HEAVY, LIVE_SPREAD};
        let mut seen = 0;
        for m in &c.measures {
            let want = match m.task {
                algo::Task::HeavyHitters | algo::Task::HeavyChangers => Some(LIVE_HEAVY),
                algo::Task::Superspreaders | algo::Task::Ddos => Some(LIVE_SPREAD),
                _ => None,
            };
            seen += usize::from(want.is_some());
            assert_eq!(m.threshold, want, "{}", m.task.name());
        }
        assert_eq!(seen, 4);
        for m in &cfg(&["--threshold", "0.002"]).measures {
            if m.threshold.is_some() {
                assert_eq!(m.threshold, Some(0.002), "{}", m.task.name());
            }
        }
    }
}
