//! Count array (Re-evaluating measurement algorithms in software, section 3; ALGORITHMS.md 2):
//! one hash, one array of counters, colliding keys add up. It is Count-Min with a single row,
//! so it shares [`crate::count_min`]'s engine: the estimate `C[h(x)]` never underestimates,
//! heavy hitters come from the same candidate set, heavy changers from the difference of two
//! epochs' arrays (with one row the "median" is that row's difference).
//!
//! Default 1,048,576 u32 counters (4 MiB), as in the Re-evaluating paper's large-table setting.
//! Counters saturate rather than wrap (see `count_min`).

use std::any::Any;

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
            width: 1 << 20,
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

const TASKS: &[Task] = &[
    Task::FlowSize,
    Task::HeavyHitters,
    Task::HeavyChangers,
    Task::TopK,
];

impl Algorithm for CountArray {
    fn name(&self) -> &'static str {
        "count_array"
    }
    fn tasks(&self) -> &'static [Task] {
        TASKS
    }
    #[inline]
    fn update(&mut self, key: &FlowKey, weight: u64) {
        self.st.update(key, weight);
    }
    fn update_batch(&mut self, keys: &[FlowKey], weights: &[u64]) {
        self.st.update_batch(keys, weights);
    }
    fn reset(&mut self) {
        self.st.reset();
    }
    fn memory_bytes(&self) -> usize {
        self.st.memory_bytes()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn heavy_hitters(&self, threshold: u64) -> Option<Vec<Estimate>> {
        Some(self.st.heavy_hitters(threshold))
    }
    fn heavy_changers(&self, prev: &dyn Algorithm, threshold: u64) -> Option<Vec<Estimate>> {
        let p = prev.as_any().downcast_ref::<CountArray>()?;
        self.st.heavy_changers(&p.st, threshold)
    }
    fn top_k(&self, k: usize) -> Option<Vec<Estimate>> {
        Some(self.st.top_k(k))
    }
    fn flow_size(&self, key: &FlowKey) -> Option<u64> {
        Some(self.st.flow_size(key))
    }
    fn merge(&mut self, other: &dyn Algorithm) -> Result<(), MergeError> {
        let o = other
            .as_any()
            .downcast_ref::<CountArray>()
            .ok_or(MergeError::Mismatch("count_array"))?;
        if self.st.merge(&o.st) {
            Ok(())
        } else {
            Err(MergeError::Mismatch("count_array"))
        }
    }
}
