//! The one list of measurement algorithms.
//!
//! Each algorithm declares its facts once, next to its code (`pub const ENTRY: algo::Entry` in
//! its module: name, tasks, key widths, build, defaults, narrowing rules); [`ALL`] lists those
//! entries, one line each. The runner (`measure`), the lab and the CLI look algorithms up here
//! and match no algorithm name themselves (a test below scans their sources).
//!
//! Adding an algorithm: write its module with its `ENTRY` (see `algo::Entry`), add one line to
//! [`ALL`]. The tests below check that every `ENTRY` in the algorithm crates is listed, builds
//! with its defaults and answers what it says.
//!
//! Which tasks each algorithm answers is the union of SketchVisor Table 1, Agg-Evict Table 1 and
//! Re-evaluating Table 1, extended where a structure can answer more (an exact table answers
//! everything a flow set can).

#![forbid(unsafe_code)]

pub mod presets;

use algo::{Algorithm, BuildCtx, ConfigError, Entry, Task};

/// Every algorithm, in the order `netsift algorithms` lists them.
pub static ALL: &[&Entry] = &[
    &sketch::count_min::ENTRY,
    &sketch::count_sketch::ENTRY,
    &sketch::count_array::ENTRY,
    &table::linear_hash::ENTRY,
    &table::cuckoo::ENTRY_1,
    &table::cuckoo::ENTRY_4,
    &table::heap::ENTRY,
    &table::space_saving::ENTRY,
    &table::misra_gries::ENTRY,
    &table::flow_radar::ENTRY,
    &reversible::rev_sketch::ENTRY,
    &reversible::deltoid::ENTRY,
    &sketch::univmon::ENTRY,
    &reversible::two_level::ENTRY,
    &sketch::mrac::ENTRY,
    &distinct::fm::ENTRY,
    &distinct::kmin::ENTRY,
    &distinct::linear_counting::ENTRY,
    &distinct::hyperloglog::ENTRY,
    &distinct::bloom_spreader::ENTRY,
    &table::ewma_change::ENTRY,
    &insta::ENTRY,
    &insta::ENTRY_RCC,
];

/// The algorithm a task uses when the user names none.
pub fn default_for(t: Task) -> &'static Entry {
    match t {
        Task::HeavyHitters => &sketch::count_min::ENTRY,
        Task::HeavyChangers => &reversible::deltoid::ENTRY,
        Task::Superspreaders | Task::Ddos => &reversible::two_level::ENTRY,
        Task::Cardinality => &distinct::hyperloglog::ENTRY,
        Task::FlowSizeDistribution => &sketch::mrac::ENTRY,
        Task::Entropy => &sketch::univmon::ENTRY,
        // Space-Saving with the Agg-Evict default of 128 counters cannot rank the top 100 of
        // ~10^5 flows; the Count-Min candidate set can. Space-Saving stays one flag away.
        Task::TopK | Task::FlowSize => &sketch::count_min::ENTRY,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("unknown algorithm `{0}`{hint} (known: {known})",
        hint = algo::did_you_mean(.0, names()), known = names().join(", "))]
    Unknown(String),
    #[error("algorithm `{algo}` cannot answer task `{task}` (it answers: {}; `{task}` is answered by: {})",
        get(algo).map(|e| e.tasks).unwrap_or(&[]).iter().map(|t| t.name()).collect::<Vec<_>>().join(", "),
        answering(*task).join(", "))]
    CannotAnswer { algo: String, task: Task },
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("unknown preset `{0}`{hint} (presets: {1})",
        hint = algo::did_you_mean(.0, presets::names()))]
    UnknownPreset(String, String),
}

pub fn names() -> Vec<&'static str> {
    ALL.iter().map(|e| e.name).collect()
}

/// The entry named `name`.
pub fn get(name: &str) -> Option<&'static Entry> {
    ALL.iter().copied().find(|e| e.name == name)
}

/// The entry named `name`, or an error listing the known names.
pub fn lookup(name: &str) -> Result<&'static Entry, CatalogError> {
    get(name).ok_or_else(|| CatalogError::Unknown(name.to_string()))
}

/// The names of the algorithms that answer `t`.
pub fn answering(t: Task) -> Vec<&'static str> {
    ALL.iter()
        .filter(|e| e.answers(t))
        .map(|e| e.name)
        .collect()
}

/// Check that `algo` exists and answers `task`.
pub fn check(algo: &str, task: Task) -> Result<&'static Entry, CatalogError> {
    let e = lookup(algo)?;
    if e.answers(task) {
        Ok(e)
    } else {
        Err(CatalogError::CannotAnswer {
            algo: algo.to_string(),
            task,
        })
    }
}

/// Build an algorithm by name with its parameter table (missing fields take the papers'
/// defaults; unknown fields are an error naming the field).
pub fn build(
    name: &str,
    params: &toml::Table,
    ctx: &BuildCtx,
) -> Result<Box<dyn Algorithm>, CatalogError> {
    Ok(lookup(name)?.build(params, ctx)?)
}

#[cfg(test)]
mod tests;
