//! What the runner's test binaries share.

use algo::Task;
use measure::MeasureSpec;

/// `algo` answering `task` with its default parameters, on the run's key.
pub fn spec(task: Task, algo: &str) -> MeasureSpec {
    MeasureSpec {
        task,
        algorithm: algo.into(),
        key: None,
        threshold: None,
        k: None,
        params: toml::Table::new(),
        by_default: false,
        task_by_default: false,
    }
}
