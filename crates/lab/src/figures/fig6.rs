//! Figure 6 (section 4.3): flow ID kinds and batch size.

use key::KeyKind;

use super::{by_batch, numeric, series, Lab, BATCHES, BATCHES_QUICK};
use crate::accel::AggSpec;
use crate::output::{Panel, XAxis};
use crate::{Figure, LabError, Point};

impl Lab<'_> {
    /// Section 4.3, Figure 6: flow ID kinds (a, b) and batch size (c), Count-Min with and
    /// without Agg-Evict.
    pub(super) fn fig6(&mut self) -> Result<(Vec<Point>, String, Vec<Panel>), LabError> {
        let kinds: &[KeyKind] = if self.args.quick {
            &[KeyKind::Src, KeyKind::FiveTuple]
        } else {
            &KeyKind::ALL
        };
        let batches = self.q(&BATCHES, &BATCHES_QUICK);
        self.start(Figure::Fig6, 2 * (kinds.len() + batches.len()));
        let mut points = Vec::new();
        for &k in kinds {
            for agg in [None, Some(AggSpec::default())] {
                points.push(self.run(Figure::Fig6, &self.base, "count_min", k, agg, 32)?);
            }
        }
        let mut bpoints = Vec::new();
        for &b in batches {
            for agg in [None, Some(AggSpec::default())] {
                bpoints.push(self.run(
                    Figure::Fig6,
                    &self.base,
                    "count_min",
                    KeyKind::Src,
                    agg,
                    b,
                )?);
            }
        }
        let kcats: Vec<String> = kinds.iter().map(|k| k.name().to_string()).collect();
        let kidx = move |p: &Point| kinds.iter().position(|k| k.name() == p.key);
        let acc = |a: &'static str| move |p: &Point| p.accel == a;
        let thr = Panel {
            title: "(a) Throughput: flow IDs (Count-Min)".into(),
            x_label: "flow ID".into(),
            y_label: "Mpps".into(),
            cats: kcats.clone(),
            x: XAxis::Categories,
            series: vec![
                series(
                    "without",
                    &points,
                    kinds.len(),
                    acc("none"),
                    |p| p.mpps,
                    kidx,
                ),
                series(
                    "Agg-Evict",
                    &points,
                    kinds.len(),
                    acc("agg_evict"),
                    |p| p.mpps,
                    kidx,
                ),
            ],
        };
        let lat = Panel {
            title: "(b) Latency: flow IDs (Count-Min)".into(),
            x_label: "flow ID".into(),
            y_label: "ns per packet".into(),
            cats: kcats,
            x: XAxis::Categories,
            series: vec![
                series(
                    "without avg",
                    &points,
                    kinds.len(),
                    acc("none"),
                    |p| p.ns_avg,
                    kidx,
                ),
                series(
                    "without p99",
                    &points,
                    kinds.len(),
                    acc("none"),
                    |p| p.ns_p99,
                    kidx,
                ),
                series(
                    "Agg-Evict avg",
                    &points,
                    kinds.len(),
                    acc("agg_evict"),
                    |p| p.ns_avg,
                    kidx,
                ),
                series(
                    "Agg-Evict p99",
                    &points,
                    kinds.len(),
                    acc("agg_evict"),
                    |p| p.ns_p99,
                    kidx,
                ),
            ],
        };
        let nb = batches.len();
        let bat = Panel {
            title: "(c) Latency: batch size (Count-Min)".into(),
            x_label: "batch size (packets)".into(),
            y_label: "ns per packet".into(),
            cats: batches.iter().map(|b| b.to_string()).collect(),
            x: numeric(batches.iter().map(|&b| b as f64)),
            series: vec![
                series(
                    "without avg",
                    &bpoints,
                    nb,
                    acc("none"),
                    |p| p.ns_avg,
                    by_batch(batches),
                ),
                series(
                    "without p99",
                    &bpoints,
                    nb,
                    acc("none"),
                    |p| p.ns_p99,
                    by_batch(batches),
                ),
                series(
                    "Agg-Evict avg",
                    &bpoints,
                    nb,
                    acc("agg_evict"),
                    |p| p.ns_avg,
                    by_batch(batches),
                ),
                series(
                    "Agg-Evict p99",
                    &bpoints,
                    nb,
                    acc("agg_evict"),
                    |p| p.ns_p99,
                    by_batch(batches),
                ),
            ],
        };
        points.extend(bpoints);
        Ok((
            points,
            "Figure 6: impact of flow ID and batch size".into(),
            vec![thr, lat, bat],
        ))
    }
}
