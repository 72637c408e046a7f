//! Count array (Re-evaluating measurement algorithms in software, section 3; ALGORITHMS.md 2):
//! one hash, one array of counters, colliding keys add up. It is Count-Min with a single row,
//! so it shares [`crate::count_min`]'s engine: the estimate `C[h(x)]` never underestimates,
//! heavy hitters come from the same candidate set, heavy changers from the difference of two
//! epochs' arrays (with one row the "median" is that row's difference).
//!
//! Default 1,048,576 u32 counters (4 MiB), as in the Re-evaluating paper's large-table setting.
//! Counters saturate rather than wrap (see `count_min`).

use algo::{Algorithm, ConfigError, Estimate, MergeError, Task};
use key::{FlowKey, HashFn};
use serde::{Deserialize, Serialize};

use crate::count_min::{validate_matrix, CmState, CounterMatrix};

const COUNT_ARRAY_SALT: u64 = 0x636f_756e_745f_6172; // "count_ar"

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CountArrayConfig {
    /// Number of counters.
    pub width: usize,
    /// Candidate-set size for heavy hitters and top-k.
    pub candidates: usize,
}

impl Default for CountArrayConfig {
    fn default() -> Self {
        CountArrayConfig {
            // 2^20 - 2^15: the Re-evaluating paper's 2^20 counters (`--preset reeval`) less
            // what the candidate set takes, so the instance fits 4 MiB (issue 12).
            width: (1 << 20) - (1 << 15),
            candidates: 1024,
        }
    }
}

impl CountArrayConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        validate_matrix("count_array", 1, self.width, self.candidates)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CountArray {
    cfg: CountArrayConfig,
    st: CmState,
}

impl algo::CheckState for CountArray {
    fn check_state(&self) -> Result<(), String> {
        self.cfg.validate().map_err(|e| e.to_string())?;
        self.st.check(1, self.cfg.width, self.cfg.candidates)
    }
}

impl CountArray {
    pub fn new(cfg: CountArrayConfig, seed: u64) -> Result<CountArray, ConfigError> {
        cfg.validate()?;
        let hash = HashFn::new(key::sub_seed(seed, COUNT_ARRAY_SALT));
        Ok(CountArray {
            st: CmState::new(1, cfg.width, cfg.candidates, hash),
            cfg,
        })
    }

    pub fn config(&self) -> &CountArrayConfig {
        &self.cfg
    }

    /// The counters (one row), for bit-exact comparisons.
    pub fn matrix(&self) -> &CounterMatrix {
        &self.st.m
    }

    pub fn candidate_threshold(&self) -> u64 {
        self.st.cand.theta()
    }

    pub fn estimate(&self, key: &FlowKey) -> u64 {
        self.st.flow_size(key)
    }
}

crate::count_min::cm_algorithm!(CountArray, "count_array");

/// The count array: Count-Min's facts (one row), including the lean flow-size-only build.
pub const ENTRY: algo::Entry = algo::Entry {
    name: "count_array",
    tasks: crate::count_min::CM_TASKS,
    fit: algo::KeyFit::Any,
    build: |p, ctx| algo::build_with("count_array", p, |c| CountArray::new(c, ctx.seed)),
    // Exact: the counters and the candidate set's vectors are allocated at construction.
    memory: |p, _| {
        algo::Entry::memory_with("count_array", p, |c: CountArrayConfig| {
            c.validate()?;
            Ok(crate::count_min::cm_bytes(1, c.width, c.candidates))
        })
    },
    defaults: algo::defaults_of::<CountArrayConfig>,
    flow_size_only: "candidates = 0",
    resets_to_empty: true,
    save: algo::save_state::<CountArray>,
    load: |b| algo::load_state::<CountArray>("count_array", b),
    // ns per update, u32 / FlowKey path: `cargo run --release -p catalog --example update_costs`.
    cost: algo::UpdateCost {
        u32_ns: 9.37,
        wide_ns: 16.27,
        behind: 0.94,
    },
};
