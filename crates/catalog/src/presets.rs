//! The papers' own configurations, one flag away (`--preset`, `preset = "..."` in a run's TOML):
//! the defaults are sized to answer well (issue 12), the presets reproduce what each paper ran.
//! A preset sets the parameters of the algorithms its paper used; parameters a measure gives
//! itself are applied after it, so they win.

use algo::{Task, UpdateCost};

use crate::CatalogError;

/// (preset, [(algorithm, parameters as TOML)]).
pub static PRESETS: &[(&str, &[(&str, &str)])] = &[
    (
        // Agg-Evict section 4.1 (DESIGN.md digest), source IPs as keys, at the memory of the
        // paper's artifact (issue 14): where a cell or bucket here is wider than the artifact's,
        // fewer of them, so the comparison of speed is at equal memory.
        "agg-evict",
        &[
            ("count_min", "rows = 4\nwidth = 65536"),
            // The artifact's 4 x 65536 u32 counters (1 MiB, 4 counter updates a packet), without
            // the verification Count-Min the defaults add (another 1 MiB and 4 updates).
            (
                "rev_sketch",
                "rows = 4\nwidth = 65536\nrow_misses = 1\nverify_rows = 0",
            ),
            ("mrac", "arrays = 4\nwidth = 65536"),
            // The artifact: 262,144 cells of three 32-bit words (3 MiB) and a filter of a third of
            // it, 4 MiB. Our cells are 64-bit words (24 B for a 4-byte key: byte counts and the
            // packed key's length need them), so 131,072 cells and the same one-third filter make
            // the same 4 MiB (decoding up to about 101 k flows instead of 202 k).
            (
                "flow_radar",
                "cells = 131072\ncell_hashes = 4\nbf_hashes = 4",
            ),
            ("space_saving", "k = 128"),
            ("heap", "k = 128"),
            ("misra_gries", "k = 128"),
            // The artifact: 4 x 65536 CM and 4 x 4096 reversible buckets of one 96-bit bitmap in
            // 12 bytes, 3.3 MB. Ours are whole 64-bit words (96 bits would take 16 bytes), so
            // 128-bit bitmaps in 4 x 49152 CM buckets: 3.4 MB.
            (
                "two_level",
                "cm_rows = 4\ncm_width = 49152\nbitmaps = 1\nbitmap_bits = 128\nrev_rows = 4\n\
                 rev_width = 4096",
            ),
            (
                "univmon",
                "widths = [65536, 32768, 16384, 8192]\nrows = 4\nheap = 128",
            ),
            ("fm", "bitmaps = 4"),
            ("linear_counting", "rows = 4\nbits = 2097152"),
        ],
    ),
    (
        // SketchVisor section 7.1: Deltoid 4 x 4000 groups, TwoLevel 2 x 4000 CM buckets of two
        // 250-bit bitmaps with a 2 x 4096 reversible part, MRAC 1 x 4000.
        "sketchvisor",
        &[
            ("deltoid", "rows = 4\ngroups = 4000"),
            (
                "two_level",
                "cm_rows = 2\ncm_width = 4000\nbitmaps = 2\nbitmap_bits = 250\nrev_rows = 2\n\
                 rev_width = 4096\nrow_misses = 0",
            ),
            ("mrac", "arrays = 1\nwidth = 4000"),
        ],
    ),
    (
        // Re-evaluating section 5: the large count array and exact tables (2^20 entries) and the
        // per-source 1024-bit Bloom filters with 3 hashes reporting past 128 destinations.
        "reeval",
        &[
            ("count_array", "width = 1048576"),
            ("linear_hash", "capacity = 1048576"),
            ("cuckoo1", "capacity = 1048576"),
            ("cuckoo4", "capacity = 1048576"),
            ("bloom_spreader", "bits = 1024\nhashes = 3\nthreshold = 128"),
        ],
    ),
    (
        // InstaMeasure section IV-D: a 32 KB L1 (8192 words; 128 KB with the three L2 arrays)
        // and a table of 2^20 entries. The one-layer RCC baseline gets the same 128 KB as one
        // array (our choice: the paper compares them at equal memory in Fig. 7 without saying
        // how RCC's was laid out).
        "instameasure",
        &[
            ("instameasure", "words = 8192\nwsaf_entries = 1048576"),
            ("rcc", "words = 32768\nwsaf_entries = 1048576"),
        ],
    ),
];

/// A task and the algorithms a paper gave it.
pub type Measured = (Task, &'static [&'static str]);

/// The measurements each paper ran, per task the algorithms it gave it: a run with a preset
/// and no `--algo` (nor `[[measure]]` tables) measures these, limited to the tasks named by
/// `--task` when given (a named task the paper did not measure keeps its default algorithm).
pub static MEASURES: &[(&str, &[Measured])] = &[
    (
        // Agg-Evict section 5: the nine algorithms it accelerates, each on the task it answers
        // in the paper's evaluation (source IPs, section 4.1).
        "agg-evict",
        &[
            (Task::HeavyHitters, &["count_min", "space_saving"]),
            (Task::HeavyChangers, &["rev_sketch"]),
            (Task::Superspreaders, &["two_level"]),
            (Task::Cardinality, &["fm", "linear_counting"]),
            (Task::FlowSizeDistribution, &["mrac"]),
            (Task::Entropy, &["univmon"]),
            (Task::TopK, &["space_saving"]),
            (Task::FlowSize, &["flow_radar"]),
        ],
    ),
    (
        // SketchVisor Table 1: the tasks and the sketches that answer each.
        "sketchvisor",
        &[
            (
                Task::HeavyHitters,
                &["flow_radar", "rev_sketch", "univmon", "deltoid"],
            ),
            (
                Task::HeavyChangers,
                &["flow_radar", "rev_sketch", "univmon", "deltoid"],
            ),
            (Task::Ddos, &["two_level"]),
            (Task::Superspreaders, &["two_level"]),
            (Task::Cardinality, &["fm", "kmin", "linear_counting"]),
            (Task::FlowSizeDistribution, &["flow_radar", "mrac"]),
            (Task::Entropy, &["flow_radar", "univmon"]),
        ],
    ),
    (
        // Re-evaluating sections 3-5: heavy hitters with the count array against Count-Min,
        // per-flow counts in the exact tables, top-k with the heap, superspreaders with the
        // per-source Bloom filters, changes against an EWMA prediction.
        "reeval",
        &[
            (Task::HeavyHitters, &["count_array", "count_min"]),
            (Task::FlowSize, &["linear_hash", "cuckoo1", "cuckoo4"]),
            (Task::TopK, &["heap"]),
            (Task::Superspreaders, &["bloom_spreader"]),
            (Task::HeavyChangers, &["ewma_change"]),
        ],
    ),
    (
        // InstaMeasure sections IV-V: heavy hitters and per-flow packet counts from the
        // regulator and its table, against one-layer RCC.
        "instameasure",
        &[
            (Task::HeavyHitters, &["instameasure", "rcc"]),
            (Task::FlowSize, &["instameasure", "rcc"]),
            (Task::TopK, &["instameasure"]),
        ],
    ),
];

/// The measurements preset `name` selects (`MEASURES`; empty for an unknown name).
pub fn measures(name: &str) -> &'static [Measured] {
    MEASURES.iter().find(|p| p.0 == name).map_or(&[], |p| p.1)
}

/// What one update costs in a preset's configuration (`algo::UpdateCost`: ns on the u32 and the
/// `FlowKey` path), for every algorithm the preset configures (their entries' `cost` is measured
/// at the defaults): the adaptive front (`front::AggMode::Auto`) weighs it
/// against the aggregator's own cost, so a run built with the preset (the lab always builds with
/// `agg-evict`) must weigh what it runs. With the defaults' figures the front aggregated for
/// RevSketch at the preset's 4 counter updates as if it did 8 (47 against 21 ns) and lost 13%
/// on shuffled Zipf 0.8 (issue 14).
///
/// Measured as the entries' own (`algo::UpdateCost`) by `cargo run --release -p catalog
/// --example update_costs PRESET`, in the same process and rounds as the aggregator's
/// constants (`aggevict::COST_U32`), 2026-11-25 09:19-09:30 UTC, means of two runs at a load
/// average of 4-6, refitted with the entries' and the aggregator's (branch h-adapt,
/// docs/agg-evict-results.md "Issue 14 point 1 (2026-11-25, h-adapt)"); a parameter a measure
/// sets itself on top of the preset is not reflected (the figure stays the preset's).
pub static COSTS: &[(&str, &[(&str, UpdateCost)])] = &[(
    "agg-evict",
    &[
        ("count_min", ns(5.59, 9.93, 1.13)),
        ("rev_sketch", ns(17.22, 36.99, 1.07)),
        ("mrac", ns(3.49, 10.66, 0.99)),
        ("flow_radar", ns(26.45, 36.05, 1.25)),
        // Flat table (k = 128, issue 14 point 3).
        ("space_saving", ns(18.91, 24.05, 1.04)),
        ("heap", ns(59.81, 82.76, 1.06)),
        ("misra_gries", ns(64.95, 88.67, 1.43)),
        ("two_level", ns(38.11, 38.11, 1.00)),
        ("univmon", ns(76.62, 81.10, 1.04)),
        ("fm", ns(2.41, 6.89, 0.92)),
        ("linear_counting", ns(7.72, 12.59, 1.10)),
    ],
)];

const fn ns(u32_ns: f64, wide_ns: f64, behind: f64) -> UpdateCost {
    UpdateCost {
        u32_ns,
        wide_ns,
        behind,
    }
}

/// The update cost of `algo` built with preset `name` (its entry's when the preset does not
/// change it); `None` for an unknown algorithm.
pub fn cost(name: &str, algo: &str) -> Option<UpdateCost> {
    COSTS
        .iter()
        .filter(|p| p.0 == name)
        .flat_map(|p| p.1.iter())
        .find(|e| e.0 == algo)
        .map(|e| e.1)
        .or_else(|| crate::get(algo).map(|e| e.cost))
}

/// The preset names.
pub fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.0).collect()
}

/// The parameters preset `name` gives `algo` (empty when the preset leaves it at its defaults);
/// an unknown preset is an error listing the presets.
pub fn params(name: &str, algo: &str) -> Result<toml::Table, CatalogError> {
    let (_, entries) = PRESETS
        .iter()
        .find(|p| p.0 == name)
        .ok_or_else(|| CatalogError::UnknownPreset(name.to_string(), names().join(", ")))?;
    Ok(entries
        .iter()
        .find(|e| e.0 == algo)
        .map(|e| {
            e.1.parse()
                .expect("preset parameters are valid TOML (tested)")
        })
        .unwrap_or_default())
}

/// `params` with the preset's parameters added under those it does not set itself.
pub fn apply(name: &str, algo: &str, params: &toml::Table) -> Result<toml::Table, CatalogError> {
    let mut out = self::params(name, algo)?;
    for (k, v) in params {
        out.insert(k.clone(), v.clone());
    }
    Ok(out)
}
