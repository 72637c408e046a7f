//! Every algorithm by its stable name, what it answers, and how to build it.
//!
//! The capability table below is the union of SketchVisor Table 1, Agg-Evict Table 1 and
//! Re-evaluating Table 1, extended where a structure can answer more (an exact table answers
//! everything a flow set can). A test checks it against each built algorithm's own
//! `Algorithm::tasks`, so the table and the code cannot drift apart.

use algo::{Algorithm, BuildCtx, ConfigError, Task};

use Task::*;

const HH_HC_TOPK_SIZE: &[Task] = &[HeavyHitters, HeavyChangers, TopK, FlowSize];
const EXACT: &[Task] = &[
    FlowSize,
    HeavyHitters,
    HeavyChangers,
    TopK,
    Cardinality,
    FlowSizeDistribution,
    Entropy,
];
const TOPK: &[Task] = &[HeavyHitters, TopK, FlowSize];
const SPREAD: &[Task] = &[Superspreaders, Ddos];

/// (name, tasks it answers), in the order `--help` lists them.
pub const ALGORITHMS: &[(&str, &[Task])] = &[
    ("count_min", HH_HC_TOPK_SIZE),
    ("count_sketch", HH_HC_TOPK_SIZE),
    ("count_array", HH_HC_TOPK_SIZE),
    ("linear_hash", EXACT),
    ("cuckoo1", EXACT),
    ("cuckoo4", EXACT),
    ("heap", TOPK),
    ("space_saving", TOPK),
    ("misra_gries", TOPK),
    (
        "flow_radar",
        &[
            FlowSize,
            HeavyHitters,
            HeavyChangers,
            TopK,
            Cardinality,
            FlowSizeDistribution,
            Entropy,
        ],
    ),
    ("rev_sketch", &[HeavyHitters, HeavyChangers]),
    ("deltoid", &[HeavyHitters, HeavyChangers]),
    (
        "univmon",
        &[
            HeavyHitters,
            HeavyChangers,
            Cardinality,
            Entropy,
            TopK,
            FlowSize,
        ],
    ),
    ("two_level", SPREAD),
    ("mrac", &[FlowSizeDistribution, Cardinality]),
    ("fm", &[Cardinality]),
    ("kmin", &[Cardinality]),
    ("linear_counting", &[Cardinality]),
    ("hyperloglog", &[Cardinality]),
    ("bloom_spreader", SPREAD),
    ("ewma_change", &[HeavyChangers, FlowSize]),
];

/// The algorithm a task uses when the user names none.
pub fn default_algorithm(t: Task) -> &'static str {
    match t {
        HeavyHitters => "count_min",
        HeavyChangers => "deltoid",
        Superspreaders | Ddos => "two_level",
        Cardinality => "hyperloglog",
        FlowSizeDistribution => "mrac",
        Entropy => "univmon",
        // Space-Saving with the Agg-Evict default of 128 counters cannot rank the top 100 of
        // ~10^5 flows; the Count-Min candidate set can. Space-Saving stays one flag away.
        TopK => "count_min",
        FlowSize => "count_min",
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("unknown algorithm `{0}` (known: {known})", known = names().join(", "))]
    Unknown(String),
    #[error("algorithm `{algo}` cannot answer task `{task}` (it answers: {}; `{task}` is answered by: {})",
        tasks_of(algo).unwrap_or(&[]).iter().map(|t| t.name()).collect::<Vec<_>>().join(", "),
        answering(*task).join(", "))]
    CannotAnswer { algo: String, task: Task },
    #[error(transparent)]
    Config(#[from] ConfigError),
}

pub fn names() -> Vec<&'static str> {
    ALGORITHMS.iter().map(|a| a.0).collect()
}

pub fn tasks_of(name: &str) -> Option<&'static [Task]> {
    ALGORITHMS.iter().find(|a| a.0 == name).map(|a| a.1)
}

/// The algorithms that answer `t`.
pub fn answering(t: Task) -> Vec<&'static str> {
    ALGORITHMS
        .iter()
        .filter(|a| a.1.contains(&t))
        .map(|a| a.0)
        .collect()
}

/// Check that `algo` exists and answers `task`.
pub fn check(algo: &str, task: Task) -> Result<(), RegistryError> {
    match tasks_of(algo) {
        None => Err(RegistryError::Unknown(algo.to_string())),
        Some(ts) if ts.contains(&task) => Ok(()),
        Some(_) => Err(RegistryError::CannotAnswer {
            algo: algo.to_string(),
            task,
        }),
    }
}

/// Build an algorithm by name with its parameter table (missing fields take the papers'
/// defaults; unknown fields are an error naming the field).
pub fn build(
    name: &str,
    params: &toml::Table,
    ctx: &BuildCtx,
) -> Result<Box<dyn Algorithm>, RegistryError> {
    if let Some(a) = sketch::build(name, params, ctx)? {
        return Ok(a);
    }
    if let Some(a) = reversible::build(name, params, ctx)? {
        return Ok(a);
    }
    if let Some(a) = distinct::build(name, params, ctx)? {
        return Ok(a);
    }
    if let Some(a) = table::build(name, params, ctx)? {
        return Ok(a);
    }
    Err(RegistryError::Unknown(name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_matches_what_each_algorithm_says_it_answers() {
        let ctx = BuildCtx::default();
        for (name, tasks) in ALGORITHMS {
            let mut ctx = ctx;
            if tasks.contains(&Superspreaders) {
                ctx.key_len = 8;
            }
            let a = build(name, &toml::Table::new(), &ctx).unwrap();
            assert_eq!(a.name(), *name);
            let mut said: Vec<Task> = a.tasks().to_vec();
            // Spreader algorithms answer superspreaders or DDoS depending on the side they are
            // built for; the table lists both.
            if said.contains(&Superspreaders) || said.contains(&Ddos) {
                said.retain(|t| !matches!(t, Superspreaders | Ddos));
                said.extend([Superspreaders, Ddos]);
            }
            said.sort();
            let mut listed = tasks.to_vec();
            listed.sort();
            assert_eq!(said, listed, "{name}");
        }
    }

    #[test]
    fn every_crate_name_is_registered() {
        let all: Vec<&str> = sketch::NAMES
            .iter()
            .chain(reversible::NAMES)
            .chain(distinct::NAMES)
            .chain(table::NAMES)
            .copied()
            .collect();
        let mut a = all.clone();
        a.sort();
        let mut b = names();
        b.sort();
        assert_eq!(a, b);
    }

    #[test]
    fn errors_name_algorithm_and_task() {
        let e = check("hyperloglog", Task::HeavyHitters)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("hyperloglog") && e.contains("heavy_hitters") && e.contains("count_min"),
            "{e}"
        );
        let e = check("countmin", Task::HeavyHitters)
            .unwrap_err()
            .to_string();
        assert!(e.contains("countmin"), "{e}");
        for t in Task::ALL {
            check(default_algorithm(t), t).unwrap();
        }
    }
}
