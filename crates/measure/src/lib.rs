//! Measurement tasks over a trace: run configuration, accuracy metrics against exact ground
//! truth, and the one-pass runner that produces the per-epoch report. Algorithms come from the
//! `catalog`, the front end (Agg-Evict or none) from `front`.

#![forbid(unsafe_code)]

mod answer;
pub mod config;
mod evaluate;
mod instance;
pub mod instant;
pub mod metrics;
mod plane;
pub mod report;
pub mod runner;
pub mod snap;
mod workers;

pub use config::rules;
pub use config::rules::AlertRule;
pub use config::{ConfigError, Given, MeasureSpec, RunConfig};
pub use config::{DEFAULT_HC, DEFAULT_HH, DEFAULT_K, DEFAULT_SPREAD};
pub use front::{Accel, AggMode};
pub use report::{EpochReport, Report, ThresholdRule, Totals, Warning};
pub use runner::Runner;
pub use workers::{WorkerFailure, ANSWERS};
