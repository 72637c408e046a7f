//! What the runner's test binaries share.

use algo::Task;
use measure::MeasureSpec;

/// `algo` answering `task` with its default parameters, on the run's key.
pub fn spec(task: Task, algo: &str) -> MeasureSpec {
    MeasureSpec::new(task, algo)
}
