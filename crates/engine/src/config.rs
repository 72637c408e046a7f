//! What a run's configuration needs beyond `RunConfig::validate` before it meets its source:
//! a config file read within bounds, what it takes from the machine when it does not say
//! (workers, memory budget), and what a key trace can answer.

use anyhow::{bail, Context, Result};
use key::KeyKind;
use measure::RunConfig;
use trace::Format;

/// Largest config file read (a run's config is a few KB; `--config /dev/zero` must not grow
/// until memory runs out).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The config file's text, refused past [`MAX_CONFIG_BYTES`] or when it is not UTF-8.
pub fn read_config(path: &str) -> Result<String> {
    use std::io::Read;
    let f = std::fs::File::open(path).with_context(|| format!("cannot read config {path}"))?;
    let mut bytes = Vec::new();
    f.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read config {path}"))?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        bail!("config {path} is larger than {MAX_CONFIG_BYTES} bytes; is it a config file?");
    }
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "config {path}: not UTF-8 text (byte {})",
            e.utf8_error().valid_up_to()
        )
    })
}

/// The configuration of `netsift run` with no flag: every task by its default algorithm, the
/// defaults of `RunConfig`, and what this machine gives ([`default_workers`],
/// [`default_memory_budget`]). Front doors start from it so that their answers are the CLI's.
pub fn standard() -> Result<RunConfig> {
    Ok(RunConfig {
        measures: RunConfig::measures_from_lists(&[], &[])?,
        workers: default_workers(),
        max_memory: default_memory_budget(),
        ..RunConfig::default()
    })
}

/// Workers of a run that does not say: the cores this process may use (its affinity and
/// cgroup quota), at most 256.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(256))
}

/// The default memory budget of a run: three quarters of the machine's physical memory
/// (`MemTotal` of /proc/meminfo), or none where that cannot be read.
pub fn default_memory_budget() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = s
        .lines()
        .find(|l| l.starts_with("MemTotal:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kib.saturating_mul(1024) / 4 * 3)
}

/// A key trace's format (`--format` or the config's, else the file's extension, as
/// `trace::Capture::open` tells them); `None` for packet captures, streams of them, and the
/// built-in trace.
fn key_trace_format(cfg: &RunConfig) -> Option<Format> {
    let given = cfg.format.as_deref().and_then(|f| f.parse::<Format>().ok());
    let by_ext = || {
        let path = std::path::Path::new(cfg.trace.as_deref()?);
        Format::from_extension(path.extension()?.to_str()?)
    };
    given
        .or_else(by_ext)
        .filter(|f| f.key_record_len().is_some())
}

/// The trace is a key trace whose records carry no time (keys4, keys13): no time epochs, so
/// no `--preset sketchvisor` one-second epochs either.
pub fn timeless_key_trace(cfg: &RunConfig) -> bool {
    matches!(key_trace_format(cfg), Some(Format::Keys4 | Format::Keys13))
}

/// What a key trace can answer (issue 34): keys4 and keys13 records carry no time, so time
/// epochs are refused; keys4 records are IPv4 source addresses alone (every other field 0), so
/// the run keys by source (refused when another key is asked for) and leaves out the tasks of
/// address pairs it was not asked for by name (refused when it was). `cfg.key_given`: `--key`
/// or the config's `key`. The choices made are the report's notes.
pub(crate) fn key_trace(cfg: &mut RunConfig) -> Result<()> {
    let key_given = cfg.key_given;
    let Some(f) = key_trace_format(cfg) else {
        return Ok(());
    };
    let trace = cfg.trace.clone().unwrap_or_default();
    let fmt = f.name();
    if matches!(f, Format::Keys4 | Format::Keys13) && cfg.nic_gbps.is_some() {
        bail!(
            "--nic-gbps (nic_gbps): {trace} is a {fmt} key trace, whose records carry no \
             timestamps: no epoch length in time to take the NIC's capacity over; give an \
             absolute --threshold-bytes (with --weight bytes)"
        );
    }
    if matches!(f, Format::Keys4 | Format::Keys13) && cfg.epoch_ms.is_some() {
        bail!(
            "--epoch-ms (epoch_ms): {trace} is a {fmt} key trace, whose records carry no \
             timestamps; give --epoch-packets (keys21 and packet captures have time)"
        );
    }
    if f != Format::Keys4 {
        return Ok(());
    }
    if key_given && cfg.key != KeyKind::Src {
        bail!(
            "--key {} (key): {trace} is a keys4 trace, IPv4 source addresses alone (every other \
             field of its keys would be 0): give --key src",
            cfg.key
        );
    }
    if let Some(m) = cfg
        .measures
        .iter()
        .find(|m| m.key.is_some_and(|k| k != KeyKind::Src))
    {
        bail!(
            "[[measure]] {} by {}: key {}: {trace} is a keys4 trace, IPv4 source addresses alone",
            m.task.name(),
            m.algorithm,
            m.key.map_or("", |k| k.name())
        );
    }
    let pairs = |t: algo::Task| matches!(t, algo::Task::Superspreaders | algo::Task::Ddos);
    if let Some(m) = cfg
        .measures
        .iter()
        .find(|m| pairs(m.task) && !m.task_by_default)
    {
        bail!(
            "--task {}: {trace} is a keys4 trace of source addresses alone, without the \
             destinations the task counts",
            m.task.name()
        );
    }
    let before = cfg.measures.len();
    cfg.measures.retain(|m| !pairs(m.task));
    let mut said = vec![];
    if !key_given && cfg.key != KeyKind::Src {
        cfg.key = KeyKind::Src;
        said.push("keyed by source address");
    }
    if cfg.measures.len() < before {
        said.push("superspreaders and ddos left out (they count destinations)");
    }
    if !said.is_empty() {
        cfg.notes.push(format!(
            "{trace}: a keys4 trace holds IPv4 source addresses alone: {}",
            said.join("; ")
        ));
    }
    Ok(())
}
