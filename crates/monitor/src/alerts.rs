//! The alert rules' state machine: per (rule, key) a streak of epochs over the threshold, firing
//! after `for` of them, resolving below the clear level (hysteresis), then a cool-down during
//! which the key cannot fire again, after which it is forgotten. Bounded: a rule tracks at most
//! `max_keys` keys; keys that are neither pending, firing nor cooling are dropped at once.

use std::collections::HashMap;

use measure::report::TaskResult;
use measure::rules::{AlertRule, Scope};
use measure::EpochReport;
use serde::Serialize;
use truth::Weight;

/// One firing or resolution: what a sink writes as one JSON line.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Event {
    pub rule: String,
    pub state: State,
    pub task: algo::Task,
    pub algorithm: String,
    /// The key (per-key rules), `null` for a scalar rule.
    pub key: Option<String>,
    /// The value that fired or resolved the alert (for a resolution of a key no longer
    /// listed: the largest value it can have, 0 when the task reports nothing above it).
    pub estimate: f64,
    pub epoch: u64,
    /// The absolute threshold and clear level this epoch (a `fraction` times the epoch's
    /// weight).
    pub threshold: f64,
    pub clear: f64,
    /// The exact value when the run keeps ground truth: the scalar, or the key's (its size,
    /// change or peers, as the report lists it).
    pub truth: Option<f64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Firing,
    Resolved,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Firing => "firing",
            State::Resolved => "resolved",
        }
    }
}

/// One key's state under one rule. A key with none of these set is not kept.
#[derive(Clone, Copy, Debug, Default)]
struct KeyState {
    /// Consecutive epochs over the threshold while not firing.
    streak: u32,
    firing: bool,
    /// Epochs of cool-down left after a resolution.
    cooling: u32,
}

/// A rule with its keys' states.
struct Watch {
    rule: AlertRule,
    keys: HashMap<Option<String>, KeyState>,
}

/// Every rule's state, and what was dropped to keep it bounded.
pub struct Alerts {
    watches: Vec<Watch>,
    max_keys: usize,
    /// New keys not tracked because their rule already tracked `max_keys`.
    pub keys_dropped: u64,
}

impl Alerts {
    pub fn new(rules: Vec<AlertRule>, max_keys: usize) -> Alerts {
        Alerts {
            watches: rules
                .into_iter()
                .map(|rule| Watch {
                    rule,
                    keys: HashMap::new(),
                })
                .collect(),
            max_keys: max_keys.max(1),
            keys_dropped: 0,
        }
    }

    /// Swap in new rules; a rule whose name and definition are unchanged keeps its keys' state,
    /// a changed or new rule starts empty (its old alerts are not resolved: the rule is gone).
    pub fn reload(&mut self, rules: Vec<AlertRule>) {
        let mut old: Vec<Watch> = std::mem::take(&mut self.watches);
        self.watches = rules
            .into_iter()
            .map(|rule| {
                let keys = old
                    .iter_mut()
                    .find(|w| w.rule == rule)
                    .map(|w| std::mem::take(&mut w.keys))
                    .unwrap_or_default();
                Watch { rule, keys }
            })
            .collect();
    }

    pub fn rules(&self) -> impl Iterator<Item = (&AlertRule, usize)> {
        self.watches.iter().map(|w| (&w.rule, w.keys.len()))
    }

    /// Step every rule by one epoch; returns the events in rule order, then key order.
    pub fn epoch(&mut self, e: &EpochReport, weight: Weight) -> Vec<Event> {
        let total = match weight {
            Weight::Packets => e.packets,
            Weight::Bytes => e.bytes,
        } as f64;
        let mut events = vec![];
        for w in &mut self.watches {
            let Some(t) = find(&e.tasks, &w.rule) else {
                continue;
            };
            if t.note.is_some() {
                // No answer this epoch (heavy changers' first): nothing to compare.
                continue;
            }
            let scale = if w.rule.fraction.is_some() {
                total
            } else {
                1.0
            };
            let threshold = w.rule.threshold.or(w.rule.fraction).unwrap_or(0.0) * scale;
            let clear = w.rule.clear.map_or(threshold, |c| c * scale);
            let cx = Step {
                rule: &w.rule,
                task: t,
                epoch: e.index,
                threshold,
                clear,
            };
            self.keys_dropped += cx.run(&mut w.keys, self.max_keys, &mut events);
        }
        events
    }
}

/// The task result a rule watches: its task, its algorithm or the first measuring the task.
fn find<'a>(tasks: &'a [TaskResult], rule: &AlertRule) -> Option<&'a TaskResult> {
    tasks
        .iter()
        .find(|t| t.task == rule.task && rule.algo.as_ref().is_none_or(|a| *a == t.algorithm))
}

/// One rule's step over one epoch's answer.
struct Step<'a> {
    rule: &'a AlertRule,
    task: &'a TaskResult,
    epoch: u64,
    threshold: f64,
    clear: f64,
}

impl Step<'_> {
    fn over(&self, v: f64) -> bool {
        if self.rule.below {
            v <= self.threshold
        } else {
            v >= self.threshold
        }
    }

    fn cleared(&self, v: f64) -> bool {
        if self.rule.below {
            v > self.clear
        } else {
            v < self.clear
        }
    }

    fn event(&self, state: State, key: &Option<String>, estimate: f64) -> Event {
        Event {
            rule: self.rule.name.clone(),
            state,
            task: self.task.task,
            algorithm: self.task.algorithm.clone(),
            key: key.clone(),
            estimate,
            epoch: self.epoch,
            threshold: self.threshold,
            clear: self.clear,
            truth: match key {
                None => self.task.truth.value,
                // The key's exact value when the report lists it with ground truth.
                Some(k) => self
                    .task
                    .answer
                    .keys
                    .iter()
                    .find(|l| l.key == *k)
                    .and_then(|l| l.truth)
                    .map(|t| t as f64),
            },
        }
    }

    /// Update `keys` and push the events; returns how many new keys the cap turned away.
    fn run(
        &self,
        keys: &mut HashMap<Option<String>, KeyState>,
        max_keys: usize,
        events: &mut Vec<Event>,
    ) -> u64 {
        let a = &self.task.answer;
        // This epoch's values: per listed key, or the one estimate.
        let values: Vec<(Option<String>, f64)> = match self.rule.scope() {
            Some(Scope::Scalar) => match a.estimate {
                Some(v) => vec![(None, v)],
                None => return 0,
            },
            _ => a
                .keys
                .iter()
                .map(|l| (Some(l.key.clone()), l.estimate as f64))
                .collect(),
        };
        // A key not listed is below every listed key when the list was cut to `listed`
        // (reported > listed), else the task did not report it at all: 0.
        let cut = a.reported.is_some_and(|r| r > a.keys.len() as u64);
        let unlisted = if cut {
            a.keys
                .iter()
                .map(|l| l.estimate as f64)
                .fold(f64::MAX, f64::min)
        } else {
            0.0
        };
        let mut dropped = 0;
        for (k, v) in &values {
            if !keys.contains_key(k) {
                if !self.over(*v) {
                    continue;
                }
                if keys.len() >= max_keys {
                    dropped += 1;
                    continue;
                }
            }
            let s = keys.entry(k.clone()).or_default();
            self.step(s, k, *v, events);
        }
        // Tracked keys this epoch did not list: pending streaks end, firing ones resolve when
        // even their largest possible value is clear, cool-downs run.
        let listed: Vec<&Option<String>> = values.iter().map(|(k, _)| k).collect();
        for (k, s) in keys.iter_mut() {
            if listed.contains(&k) {
                continue;
            }
            if s.firing {
                if self.cleared(unlisted) {
                    self.resolve(s, k, unlisted, events);
                }
            } else {
                s.streak = 0;
                s.cooling = s.cooling.saturating_sub(1);
            }
        }
        keys.retain(|_, s| s.firing || s.streak > 0 || s.cooling > 0);
        dropped
    }

    fn step(&self, s: &mut KeyState, k: &Option<String>, v: f64, events: &mut Vec<Event>) {
        if s.firing {
            if self.cleared(v) {
                self.resolve(s, k, v, events);
            }
        } else if s.cooling > 0 {
            s.cooling -= 1;
        } else if self.over(v) {
            s.streak += 1;
            if s.streak >= self.rule.for_epochs {
                s.streak = 0;
                s.firing = true;
                events.push(self.event(State::Firing, k, v));
            }
        } else {
            s.streak = 0;
        }
    }

    fn resolve(&self, s: &mut KeyState, k: &Option<String>, v: f64, events: &mut Vec<Event>) {
        s.firing = false;
        s.cooling = self.rule.cooldown;
        events.push(self.event(State::Resolved, k, v));
    }
}
