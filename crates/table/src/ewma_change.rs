//! Change detection with an EWMA prediction per flow (Re-evaluating paper, section 3 "Change
//! detection"; ALGORITHMS.md section 11): exact per-flow counts of the current epoch `V` plus a
//! per-flow prediction `P`; a flow is a heavy changer when `|V - P| >= T`.
//!
//! Epochs: [`Algorithm::reset`] ends the epoch. It folds the epoch's counts into the
//! predictions, `P = alpha·V + (1 - alpha)·P`, except at the end of the first epoch, where
//! `P = V` (the first observed value initialises the model), then clears the counts. A flow
//! first seen after the first epoch has the prediction 0 (its earlier values were 0). A flow
//! whose prediction decays below `forget_below` with no traffic in the epoch is forgotten, which
//! bounds the memory; it comes back with prediction 0, so the change reported for it can differ
//! by less than `forget_below` from an unpruned model. [`EwmaChange::clear`] forgets everything.
//!
//! The paper gives neither alpha nor the threshold (UNVERIFIED); alpha defaults to 0.5 and the
//! threshold is the caller's. During the first epoch there is no prediction and
//! `heavy_changers` reports nothing. The `prev` argument of `heavy_changers` is ignored: the
//! model carries its own history. Counts are exact, so `update(k, w)` equals `w` unit updates in
//! any order.

use algo::{Algorithm, ConfigError, Estimate, MergeError, Task};
use key::{FlowKey, KeyMap};
use serde::{Deserialize, Serialize};

const NAME: &str = "ewma_change";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EwmaChangeConfig {
    /// Weight of the newest epoch in the prediction, in (0, 1] (default 0.5; the artifact's
    /// count-array module uses 1, i.e. "same as last epoch").
    pub alpha: f64,
    /// Forget a flow with no traffic whose prediction fell below this (default 0.5, in packets
    /// or bytes; 0 keeps every flow forever).
    pub forget_below: f64,
}

impl Default for EwmaChangeConfig {
    fn default() -> Self {
        EwmaChangeConfig {
            alpha: 0.5,
            forget_below: 0.5,
        }
    }
}

impl EwmaChangeConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(self.alpha > 0.0 && self.alpha <= 1.0) {
            return Err(crate::invalid(NAME, "alpha", "must be in (0, 1]"));
        }
        if !(self.forget_below >= 0.0 && self.forget_below.is_finite()) {
            return Err(crate::invalid(
                NAME,
                "forget_below",
                "must be finite and >= 0",
            ));
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Flow {
    /// V: this epoch's count.
    current: u64,
    /// P: the prediction for this epoch.
    predicted: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EwmaChange {
    alpha: f64,
    forget_below: f64,
    flows: KeyMap<Flow>,
    /// Completed epochs.
    epochs: u64,
}

impl algo::CheckState for EwmaChange {
    /// Its parameters valid, and every prediction a finite non-negative number (an EWMA of
    /// counts).
    fn check_state(&self) -> Result<(), String> {
        EwmaChangeConfig {
            alpha: self.alpha,
            forget_below: self.forget_below,
        }
        .validate()
        .map_err(|e| e.to_string())?;
        if let Some((k, f)) = self
            .flows
            .iter()
            .find(|(_, f)| !(f.predicted >= 0.0 && f.predicted.is_finite()))
        {
            return Err(format!("prediction {} of {k}", f.predicted));
        }
        Ok(())
    }
}

impl EwmaChange {
    pub fn new(cfg: EwmaChangeConfig) -> Result<EwmaChange, ConfigError> {
        cfg.validate()?;
        Ok(EwmaChange {
            alpha: cfg.alpha,
            forget_below: cfg.forget_below,
            flows: KeyMap::default(),
            epochs: 0,
        })
    }

    /// Number of completed epochs.
    pub fn epochs(&self) -> u64 {
        self.epochs
    }

    /// The prediction for `key` in the current epoch (`None` during the first epoch).
    pub fn prediction(&self, key: &FlowKey) -> Option<f64> {
        if self.epochs == 0 {
            return None;
        }
        Some(self.flows.get(key).map_or(0.0, |f| f.predicted))
    }

    /// End the epoch (what `reset` does): fold the counts into the predictions, clear them.
    pub fn end_epoch(&mut self) {
        let (a, first) = (self.alpha, self.epochs == 0);
        for f in self.flows.values_mut() {
            let v = f.current as f64;
            f.predicted = if first {
                v
            } else {
                a * v + (1.0 - a) * f.predicted
            };
            f.current = 0;
        }
        let lim = self.forget_below;
        self.flows
            .retain(|_, f| f.predicted >= lim && f.predicted > 0.0);
        self.epochs += 1;
    }

    /// Forget every flow and the epoch count (a fresh model).
    pub fn clear(&mut self) {
        self.flows.clear();
        self.epochs = 0;
    }
}

const TASKS: &[Task] = &[Task::HeavyChangers, Task::FlowSize];

/// Upper bound of `memory_bytes` per flow, counted at the largest number of flows held at once
/// (the map keeps its buckets when flows are forgotten): one map entry and its control byte,
/// times 3 (hashbrown fills at most 7/8 of its buckets and doubles them when full, so about 2x
/// once the map holds a few flows; a map of one flow has 3 slots).
pub const BYTES_PER_FLOW: u64 = (std::mem::size_of::<(FlowKey, Flow)>() as u64 + 1) * 3;

impl Algorithm for EwmaChange {
    fn name(&self) -> &'static str {
        NAME
    }

    fn tasks(&self) -> &'static [Task] {
        TASKS
    }

    fn update(&mut self, key: &FlowKey, weight: u64) {
        if weight == 0 {
            return;
        }
        let f = self.flows.entry(*key).or_default();
        f.current = f.current.saturating_add(weight);
    }

    /// Ends the epoch; see the module doc.
    fn reset(&mut self) {
        self.end_epoch();
    }

    fn memory_bytes(&self) -> usize {
        self.flows.capacity() * (std::mem::size_of::<(FlowKey, Flow)>() + 1)
    }

    /// Flows with `|V - P| >= threshold` in the current epoch, the estimate being
    /// `|V - P|` rounded to the nearest integer. Empty during the first epoch.
    fn heavy_changers(&self, _prev: &dyn Algorithm, threshold: u64) -> Option<Vec<Estimate>> {
        if self.epochs == 0 {
            return Some(Vec::new());
        }
        let t = threshold as f64;
        let mut v: Vec<Estimate> = self
            .flows
            .iter()
            .filter_map(|(k, f)| {
                let d = (f.current as f64 - f.predicted).abs();
                (d >= t).then(|| (*k, d.round() as u64))
            })
            .collect();
        v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        Some(v)
    }

    /// `|V - P|` against the EWMA prediction with this model's alpha: the runner scores the
    /// answer against the exact EWMA-defined change, not against the previous epoch's size.
    fn change_basis(&self) -> algo::Change {
        algo::Change::Ewma { alpha: self.alpha }
    }

    /// This epoch's exact count.
    fn flow_size(&self, key: &FlowKey) -> Option<u64> {
        Some(self.flows.get(key).map_or(0, |f| f.current))
    }

    /// Adds counts and predictions: the EWMA is linear in the count sequence, so the merge of
    /// two hosts' models equals the model of their summed traffic, provided both have the same
    /// alpha and number of completed epochs (forgotten flows aside).
    fn merge(&mut self, other: &dyn Algorithm) -> Result<(), MergeError> {
        let o = algo::merge_peer(self, other, |o| {
            o.alpha == self.alpha && o.epochs == self.epochs
        })?;
        for (k, f) in &o.flows {
            let e = self.flows.entry(*k).or_default();
            e.current = e.current.saturating_add(f.current);
            e.predicted += f.predicted;
        }
        Ok(())
    }
}

/// This algorithm's facts, listed in the `catalog` crate.
///
/// `memory`: the bytes at construction, 0 (the flow map starts empty), plus at most
/// [`BYTES_PER_FLOW`] per flow at the most flows held at once; `forget_below` prunes flows at
/// each epoch's end and no parameter caps their number.
pub const ENTRY: algo::Entry = algo::Entry {
    name: NAME,
    tasks: TASKS,
    fit: algo::KeyFit::Any,
    build: |p, _ctx| algo::build_with(NAME, p, EwmaChange::new),
    memory: |p, _ctx| {
        algo::Entry::memory_with(NAME, p, |c: EwmaChangeConfig| {
            c.validate()?;
            Ok(0)
        })
    },
    defaults: algo::defaults_of::<EwmaChangeConfig>,
    flow_size_only: "",
    resets_to_empty: false,
    save: algo::save_state::<EwmaChange>,
    load: |b| algo::load_state::<EwmaChange>(NAME, b),
    // ns per update, u32 / FlowKey path: `cargo run --release -p catalog --example update_costs`.
    cost: algo::UpdateCost {
        u32_ns: 20.18,
        wide_ns: 44.31,
        behind: 1.29,
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::{rank_key, zipf_keys};

    fn feed(e: &mut EwmaChange, keys: &[FlowKey]) {
        for k in keys {
            e.update(k, 1);
        }
    }

    #[test]
    fn flags_a_planted_jump() {
        let mut e = EwmaChange::new(EwmaChangeConfig::default()).unwrap();
        let planted = rank_key(999_999);
        let dummy = EwmaChange::new(EwmaChangeConfig::default()).unwrap();
        // Three steady epochs of the same Zipf traffic (different draws), planted flow at 100.
        for epoch in 0..3u64 {
            feed(&mut e, &zipf_keys(50_000, 1_000, 1.1, 50 + epoch));
            e.update(&planted, 100);
            if epoch == 0 {
                assert_eq!(e.heavy_changers(&dummy, 1).unwrap(), vec![]);
                assert_eq!(e.prediction(&planted), None);
            }
            e.reset();
        }
        assert_eq!(e.epochs(), 3);
        assert_eq!(e.prediction(&planted), Some(100.0));
        // The planted flow jumps to 5000 packets; the steady flows move by sampling noise only.
        feed(&mut e, &zipf_keys(50_000, 1_000, 1.1, 60));
        e.update(&planted, 5_000);
        let hc = e.heavy_changers(&dummy, 1_000).unwrap();
        assert_eq!(hc, vec![(planted, 4_900)]);
        assert_eq!(e.flow_size(&planted), Some(5_000));
        // Next epoch it is back at 100: a change again (P = 0.5·5000 + 0.5·100 = 2550).
        e.reset();
        assert_eq!(e.prediction(&planted), Some(2_550.0));
        feed(&mut e, &zipf_keys(50_000, 1_000, 1.1, 61));
        e.update(&planted, 100);
        let hc = e.heavy_changers(&dummy, 1_000).unwrap();
        assert_eq!(hc, vec![(planted, 2_450)]);
        // A flow that disappears is a change too.
        e.reset();
        let hc = e.heavy_changers(&dummy, 1_000).unwrap();
        assert!(hc.iter().any(|x| x.0 == planted && x.1 == 1_325));
    }

    #[test]
    fn aggregated_updates_merge_and_forgetting() {
        let keys = zipf_keys(10_000, 500, 1.1, 62);
        let cfg = EwmaChangeConfig::default();
        let (mut unit, mut agg) = (
            EwmaChange::new(cfg.clone()).unwrap(),
            EwmaChange::new(cfg.clone()).unwrap(),
        );
        feed(&mut unit, &keys);
        let mut m: std::collections::BTreeMap<FlowKey, u64> = Default::default();
        for k in &keys {
            *m.entry(*k).or_default() += 1;
        }
        for (k, c) in &m {
            agg.update(k, *c);
        }
        assert_eq!(unit, agg);
        unit.reset();
        agg.reset();
        assert_eq!(unit, agg);
        // Two hosts' halves merged = one model of the whole.
        let (mut h1, mut h2, mut whole) = (
            EwmaChange::new(cfg.clone()).unwrap(),
            EwmaChange::new(cfg.clone()).unwrap(),
            EwmaChange::new(cfg.clone()).unwrap(),
        );
        let (x, y) = keys.split_at(4_000);
        for epoch in 0..2 {
            feed(&mut h1, x);
            feed(&mut h2, y);
            feed(&mut whole, &keys);
            if epoch == 0 {
                for h in [&mut h1, &mut h2, &mut whole] {
                    h.reset();
                }
            }
        }
        h1.merge(&h2).unwrap();
        for k in m.keys() {
            assert_eq!(h1.flow_size(k), whole.flow_size(k));
            let (p, q) = (h1.prediction(k).unwrap(), whole.prediction(k).unwrap());
            assert!((p - q).abs() < 1e-9);
        }
        let fresh = EwmaChange::new(cfg).unwrap();
        assert!(h1.merge(&fresh).is_err());
        // Silent flows decay and are eventually forgotten.
        let mut e = EwmaChange::new(EwmaChangeConfig::default()).unwrap();
        e.update(&rank_key(1), 8);
        for _ in 0..6 {
            e.reset();
        }
        assert_eq!(e.flows.len(), 0);
        assert_eq!(e.prediction(&rank_key(1)), Some(0.0));
        e.clear();
        assert_eq!(e.epochs(), 0);
    }

    #[test]
    fn says_it_answers_the_ewma_change_with_its_alpha() {
        let cfg = EwmaChangeConfig {
            alpha: 0.25,
            ..Default::default()
        };
        let e = EwmaChange::new(cfg).unwrap();
        assert_eq!(e.change_basis(), algo::Change::Ewma { alpha: 0.25 });
    }
}
