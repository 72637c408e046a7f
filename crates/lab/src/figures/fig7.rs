//! Figure 7 (section 4.3): traffic skew and packet order, aggregator size.

use key::KeyKind;

use super::{gen_spec, numeric, series, Lab};
use crate::accel::AggSpec;
use crate::output::{Panel, Series};
use crate::workload::Workload;
use crate::{Figure, LabError, Point};

const SKEWS: [f64; 6] = [0.6, 0.8, 1.0, 1.1, 1.3, 1.5];
const SKEWS_QUICK: [f64; 2] = [0.8, 1.5];
const ARRAYS: [usize; 7] = [250, 500, 1000, 2000, 4000, 8000, 16000];
const ARRAYS_QUICK: [usize; 3] = [250, 2000, 16000];

impl Lab<'_> {
    /// Section 4.3, Figure 7: traffic skew and packet order (a, b), aggregator size k (c).
    /// Count-Min, synthetic traces.
    pub(super) fn fig7(&mut self) -> Result<(Vec<Point>, String, Vec<Panel>), LabError> {
        let skews = self.q(&SKEWS, &SKEWS_QUICK);
        let arrays = self.q(&ARRAYS, &ARRAYS_QUICK);
        let orders = [gen::Order::Bursty, gen::Order::Shuffled];
        self.start(
            Figure::Fig7,
            skews.len() * orders.len() * 2 + arrays.len() + 1,
        );
        let mut points = Vec::new();
        for &s in skews {
            for o in orders {
                self.bar
                    .set_message(format!("fig 7: generating skew {s} {o}"));
                let w = Workload::synthetic(&gen_spec(self.packets, self.flows, s, o))?;
                for agg in [None, Some(AggSpec::default())] {
                    points.push(self.run(Figure::Fig7, &w, "count_min", KeyKind::Src, agg, 32)?);
                }
            }
        }
        // Aggregator size on the default trace, with the no-aggregator run as the reference.
        let mut kpoints = vec![self.run(
            Figure::Fig7,
            &self.base,
            "count_min",
            KeyKind::Src,
            None,
            32,
        )?];
        for &k in arrays {
            let spec = AggSpec {
                arrays: k,
                ..AggSpec::default()
            };
            kpoints.push(self.run(
                Figure::Fig7,
                &self.base,
                "count_min",
                KeyKind::Src,
                Some(spec),
                32,
            )?);
        }
        let scats: Vec<String> = skews.iter().map(|s| s.to_string()).collect();
        let sidx = move |p: &Point| skews.iter().position(|&s| Some(s) == p.skew);
        let ns = skews.len();
        let mut thr = Vec::new();
        let mut lat = Vec::new();
        for o in ["bursty", "shuffled"] {
            for (a, label) in [("none", "without"), ("agg_evict", "Agg-Evict")] {
                let sel = move |p: &Point| p.order == o && p.accel == a;
                thr.push(series(
                    &format!("{label} {o}"),
                    &points,
                    ns,
                    sel,
                    |p| p.mpps,
                    sidx,
                ));
                lat.push(series(
                    &format!("{label} {o}"),
                    &points,
                    ns,
                    sel,
                    |p| p.ns_avg,
                    sidx,
                ));
            }
        }
        let none = kpoints.first().cloned();
        let kidx = move |p: &Point| arrays.iter().position(|&k| k == p.arrays);
        let na = arrays.len();
        let agg_only = |p: &Point| p.accel == "agg_evict";
        let flat = |v: Option<f64>| Series::new("", vec![v; na]);
        let mut ks = vec![
            series("Agg-Evict avg", &kpoints, na, agg_only, |p| p.ns_avg, kidx),
            series("Agg-Evict p99", &kpoints, na, agg_only, |p| p.ns_p99, kidx),
        ];
        if let Some(n) = &none {
            let mut a = flat(Some(n.ns_avg));
            a.name = "without avg".into();
            let mut b = flat(Some(n.ns_p99));
            b.name = "without p99".into();
            ks.extend([a, b]);
        }
        let panels = vec![
            Panel {
                title: "(a) Throughput: skew (Count-Min)".into(),
                x_label: "Zipf skew".into(),
                y_label: "Mpps".into(),
                cats: scats.clone(),
                x: numeric(skews.iter().copied()),
                series: thr,
            },
            Panel {
                title: "(b) Avg. latency: skew (Count-Min)".into(),
                x_label: "Zipf skew".into(),
                y_label: "ns per packet".into(),
                cats: scats,
                x: numeric(skews.iter().copied()),
                series: lat,
            },
            Panel {
                title: "(c) Latency: aggregator size (Count-Min)".into(),
                x_label: "arrays k".into(),
                y_label: "ns per packet".into(),
                cats: arrays.iter().map(|k| k.to_string()).collect(),
                x: numeric(arrays.iter().map(|&k| k as f64)),
                series: ks,
            },
        ];
        points.extend(kpoints);
        Ok((
            points,
            "Figure 7: impact of traffic skew and aggregator size".into(),
            panels,
        ))
    }
}
