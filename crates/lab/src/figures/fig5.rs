//! Figure 5 (section 4.2): the nine algorithms with and without Agg-Evict.

use super::{algo_seed, point, series, Lab, NINE};
use crate::accel::AggSpec;
use crate::output::{Panel, Series, XAxis};
use crate::run::{measure_e2e, RunCfg};
use crate::{Figure, LabError, Point, EPOCH};

impl Lab<'_> {
    /// Section 4.2, Figure 5: the nine algorithms with and without Agg-Evict (k = 2000, GRR,
    /// batch 32), with the memory limit of each algorithm's size.
    pub(super) fn fig5(&mut self) -> Result<(Vec<Point>, String, Vec<Panel>), LabError> {
        let e2e = self.args.trace.clone();
        let per = if e2e.is_some() { 4 } else { 2 };
        let mut points = Vec::new();
        // An algorithm with a flow-size-only build (Count-Min: counters only, no candidate set)
        // runs twice: with its defaults (the candidate set, which the other figures use too)
        // and lean, as the paper's artifact runs it (insert and point query): the baseline a
        // bare loop of the same memory accesses bounds (issue 3). The charts show the defaults;
        // CSV and JSON have both.
        let runs = NINE.iter().flat_map(|&(a, key, _)| {
            let lean = catalog::get(a).map_or("", |e| e.flow_size_only);
            let variants = if lean.is_empty() {
                vec![""]
            } else {
                vec!["", lean]
            };
            variants.into_iter().map(move |params| (a, params, key))
        });
        let lean = NINE
            .iter()
            .filter(|(a, ..)| catalog::get(a).is_some_and(|e| !e.flow_size_only.is_empty()))
            .count();
        self.start(Figure::Fig5, (NINE.len() + lean) * per);
        for (a, params, key) in runs {
            if !self.supported(a, key)? {
                continue;
            }
            let limit = self.limit_of(a, key)?.mpps;
            let auto = AggSpec {
                mode: self.args.agg_mode,
                ..AggSpec::default()
            };
            for agg in [None, Some(auto)] {
                let mut p =
                    self.run_with(Figure::Fig5, &self.base, a, params, key, agg.clone(), 32)?;
                p.limit_mpps = Some(limit);
                points.push(p);
                if let Some(path) = &e2e {
                    let cfg = RunCfg {
                        algorithm: a,
                        params,
                        agg: agg.clone(),
                        key,
                        batch: 32,
                        epoch: EPOCH,
                    };
                    self.tick(&format!("fig 5 end-to-end: {a}"));
                    let m = measure_e2e(
                        &path.to_string_lossy(),
                        self.base.key_len(key),
                        &cfg,
                        &self.clock,
                        algo_seed(),
                    )?;
                    let mut p = point(Figure::Fig5, &cfg, &self.base, &m);
                    p.order = "capture_e2e".into();
                    p.limit_mpps = Some(limit);
                    points.push(p);
                }
            }
        }
        let cats: Vec<String> = NINE.iter().map(|n| n.2.to_string()).collect();
        let idx = |p: &Point| NINE.iter().position(|n| n.0 == p.algorithm);
        let pre = |accel: &'static str| {
            move |p: &Point| p.accel == accel && p.order != "capture_e2e" && p.params.is_empty()
        };
        let thr = Panel {
            title: "(a) Throughput".into(),
            x_label: "algorithm".into(),
            y_label: "Mpps".into(),
            cats: cats.clone(),
            x: XAxis::Categories,
            series: vec![
                series("without", &points, 9, pre("none"), |p| p.mpps, idx),
                series("Agg-Evict", &points, 9, pre("agg_evict"), |p| p.mpps, idx),
                Series {
                    spread: NINE
                        .iter()
                        .map(|n| self.limits.get(n.0).map(|l| l.spread))
                        .collect(),
                    ..series(
                        "memory limit",
                        &points,
                        9,
                        pre("none"),
                        |p| p.limit_mpps.unwrap_or(0.0),
                        idx,
                    )
                },
            ],
        };
        let lat = Panel {
            title: "(b) Latency per packet".into(),
            x_label: "algorithm".into(),
            y_label: "ns".into(),
            cats,
            x: XAxis::Categories,
            series: vec![
                series("without avg", &points, 9, pre("none"), |p| p.ns_avg, idx),
                series("without p99", &points, 9, pre("none"), |p| p.ns_p99, idx),
                series(
                    "Agg-Evict avg",
                    &points,
                    9,
                    pre("agg_evict"),
                    |p| p.ns_avg,
                    idx,
                ),
                series(
                    "Agg-Evict p99",
                    &points,
                    9,
                    pre("agg_evict"),
                    |p| p.ns_p99,
                    idx,
                ),
            ],
        };
        Ok((
            points,
            "Figure 5: benefits of Agg-Evict on nine algorithms".into(),
            vec![thr, lat],
        ))
    }
}
