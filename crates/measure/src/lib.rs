//! Measurement tasks over a trace: the algorithm registry, run configuration, accuracy metrics
//! against exact ground truth, and the one-pass runner that produces the per-epoch report.

pub mod config;
pub mod metrics;
pub mod registry;
pub mod runner;

pub use config::{Accel, ConfigError, MeasureSpec, RunConfig};
pub use runner::{Report, Runner};
