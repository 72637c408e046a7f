//! Alert rules (`[[alert]]` tables of a run's TOML config): what to watch in each epoch's
//! report and when to raise an alert. Parsed and checked here with the rest of the
//! configuration; the state machine that fires and resolves them is `crates/monitor`.

use algo::Task;
use serde::{Deserialize, Serialize};

use super::{ConfigError, MeasureSpec};

/// One alert rule. A rule watches one task's answer of one algorithm: per key for the tasks
/// that report keys (heavy hitters, heavy changers, superspreaders, DDoS victims, top-k, flow
/// size: each listed key with its estimate), or the scalar estimate (cardinality, entropy).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertRule {
    /// Names the rule in every event, metric and error (unique in a config).
    pub name: String,
    pub task: Task,
    /// The algorithm whose answer is watched; none: the first `[[measure]]` of `task`.
    #[serde(default, alias = "algorithm")]
    pub algo: Option<String>,
    /// Absolute threshold: in the run's weight (packets or bytes) for heavy hitters, changers,
    /// top-k and flow size; distinct peers for superspreaders and DDoS; the value itself for
    /// cardinality and entropy.
    #[serde(default)]
    pub threshold: Option<f64>,
    /// Threshold as a fraction (0, 1) of the epoch's packets or bytes (the run's weight), for the
    /// tasks measured in it (heavy hitters, changers, top-k, flow size). Give this or `threshold`.
    #[serde(default)]
    pub fraction: Option<f64>,
    /// Hysteresis: a firing alert resolves only when the value falls to `clear` or below (above
    /// with `below`), in the unit of `threshold` / `fraction`. Default: the threshold itself.
    #[serde(default)]
    pub clear: Option<f64>,
    /// Consecutive epochs over the threshold before the alert fires (at least 1).
    #[serde(default = "one", rename = "for")]
    pub for_epochs: u32,
    /// Epochs after a resolution during which the same key cannot fire again; its state is
    /// forgotten once they have passed.
    #[serde(default)]
    pub cooldown: u32,
    /// Fire when the value drops below the threshold instead (an entropy that collapses).
    #[serde(default)]
    pub below: bool,
}

fn one() -> u32 {
    1
}

/// What a rule's value is: one per listed key, or the task's one estimate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    PerKey,
    Scalar,
}

fn bad(rule: &str, field: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Alert {
        rule: rule.to_string(),
        field,
        reason: reason.into(),
    }
}

impl AlertRule {
    pub fn scope(&self) -> Option<Scope> {
        match self.task {
            Task::HeavyHitters
            | Task::HeavyChangers
            | Task::Superspreaders
            | Task::Ddos
            | Task::TopK
            | Task::FlowSize => Some(Scope::PerKey),
            Task::Cardinality | Task::Entropy => Some(Scope::Scalar),
            Task::FlowSizeDistribution => None,
        }
    }

    /// Whether the task's answers are in the run's weight (a `fraction` makes sense).
    fn weighted(&self) -> bool {
        matches!(
            self.task,
            Task::HeavyHitters | Task::HeavyChangers | Task::TopK | Task::FlowSize
        )
    }

    /// The checks a rule passes on its own (without the run's measures): a threshold given
    /// once, finite, a clear level on the right side of it, `for` at least 1.
    pub fn check(&self) -> Result<(), ConfigError> {
        let n = &self.name;
        if n.is_empty() {
            return Err(bad(n, "name", "must not be empty"));
        }
        if self.scope().is_none() {
            return Err(bad(
                n,
                "task",
                format!(
                    "{} has no value to alert on (alert on heavy_hitters, heavy_changers, \
                     superspreaders, ddos, top_k, flow_size, cardinality or entropy)",
                    self.task
                ),
            ));
        }
        let (field, t) =
            match (self.threshold, self.fraction) {
                (Some(_), Some(_)) => {
                    return Err(bad(
                        n,
                        "fraction",
                        "give `threshold` or `fraction`, not both",
                    ))
                }
                (None, None) => return Err(bad(
                    n,
                    "threshold",
                    "missing: give `threshold` (absolute) or `fraction` (of the epoch's weight)",
                )),
                (Some(t), None) => ("threshold", t),
                (None, Some(f)) => {
                    if !self.weighted() {
                        return Err(bad(
                            n,
                            "fraction",
                            format!(
                            "{} is not measured in the run's weight: give an absolute `threshold`",
                            self.task
                        ),
                        ));
                    }
                    if !(f > 0.0 && f < 1.0) {
                        return Err(bad(n, "fraction", format!("{f} is not in (0, 1)")));
                    }
                    ("fraction", f)
                }
            };
        if !t.is_finite() || (self.threshold.is_some() && t < 0.0) {
            return Err(bad(n, field, format!("{t} must be a finite number >= 0")));
        }
        if let Some(c) = self.clear {
            let wrong_side = if self.below { c < t } else { c > t };
            if !c.is_finite() || wrong_side {
                return Err(bad(
                    n,
                    "clear",
                    format!(
                        "{c} must be a number {} the {field} {t} (hysteresis)",
                        if self.below {
                            "at or above"
                        } else {
                            "at or below"
                        }
                    ),
                ));
            }
        }
        if self.below && self.scope() != Some(Scope::Scalar) {
            return Err(bad(
                n,
                "below",
                format!(
                    "{} reports keys: `below` is for cardinality and entropy",
                    self.task
                ),
            ));
        }
        if self.for_epochs == 0 {
            return Err(bad(n, "for", "must be at least 1 epoch"));
        }
        Ok(())
    }

    /// The rule against the run's measures: its task is measured, by its algorithm if named.
    pub fn check_in(&self, measures: &[MeasureSpec]) -> Result<(), ConfigError> {
        self.check()?;
        let of_task: Vec<&str> = measures
            .iter()
            .filter(|m| m.task == self.task)
            .map(|m| m.algorithm.as_str())
            .collect();
        if of_task.is_empty() {
            return Err(bad(
                &self.name,
                "task",
                format!("the run does not measure {}", self.task),
            ));
        }
        if let Some(a) = &self.algo {
            if !of_task.contains(&a.as_str()) {
                return Err(bad(
                    &self.name,
                    "algo",
                    format!(
                        "the run measures {} with {}, not {a}",
                        self.task,
                        of_task.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Check a set of rules on their own: each rule, and no name twice.
pub fn check_rules(rules: &[AlertRule]) -> Result<(), ConfigError> {
    for (i, r) in rules.iter().enumerate() {
        r.check()?;
        if rules[..i].iter().any(|o| o.name == r.name) {
            return Err(bad(&r.name, "name", "two rules have this name"));
        }
    }
    Ok(())
}
