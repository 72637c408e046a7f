//! The share of packets evicted to the algorithm (the aggregator alone, untimed).

use aggevict::Policy;

use super::{gen_spec, series, Lab, NINE};
use crate::accel::{share_only, AggSpec};
use crate::output::{Panel, XAxis};
use crate::workload::Workload;
use crate::{Figure, LabError, Point, EPOCH};

impl Lab<'_> {
    /// Share of packets reaching the algorithm (updates per packet) for the nine, by policy and
    /// packet order. The aggregator alone, untimed.
    pub(super) fn fig_share(&mut self) -> Result<(Vec<Point>, String, Vec<Panel>), LabError> {
        let shuffled = if self.args.trace.is_none() {
            Some(Workload::synthetic(&gen_spec(
                self.packets,
                self.flows,
                1.1,
                gen::Order::Shuffled,
            ))?)
        } else {
            None
        };
        let traces: Vec<&Workload> = std::iter::once(&self.base)
            .chain(shuffled.as_ref())
            .collect();
        self.start(Figure::Share, NINE.len() * 2 * traces.len());
        let mut points = Vec::new();
        for w in &traces {
            for policy in [Policy::Grr, Policy::Lru] {
                for (a, key, _) in NINE {
                    self.tick(&format!("share: {a} {policy} {}", w.order));
                    let spec = AggSpec {
                        policy,
                        ..AggSpec::default()
                    };
                    let share = share_only(w, &spec, key, EPOCH)?;
                    points.push(Point {
                        figure: Figure::Share.to_string(),
                        algorithm: a.into(),
                        accel: "agg_evict".into(),
                        key: key.name().into(),
                        batch: 32,
                        arrays: spec.arrays,
                        policy: policy.name().into(),
                        simd: String::new(),
                        skew: w.skew,
                        order: w.order.clone(),
                        mpps: 0.0,
                        ns_avg: 0.0,
                        ns_p99: 0.0,
                        evicted_share: Some(share),
                        limit_mpps: None,
                        unique_share: None,
                        params: String::new(),
                        packets: w.len() as u64,
                        agg_mode: spec.mode.name().into(),
                        through_share: Some(1.0),
                        switches: Some(0),
                    });
                }
            }
        }
        let cats: Vec<String> = NINE.iter().map(|n| n.2.to_string()).collect();
        let idx = |p: &Point| NINE.iter().position(|n| n.0 == p.algorithm);
        let mut ser = Vec::new();
        for w in &traces {
            for pol in ["grr", "lru"] {
                let order = w.order.clone();
                ser.push(series(
                    &format!("{pol} {order}"),
                    &points,
                    9,
                    move |p: &Point| p.policy == pol && p.order == order,
                    |p| p.evicted_share.unwrap_or(0.0) * 100.0,
                    idx,
                ));
            }
        }
        let panel = Panel {
            title: "Packets reaching the algorithm (k = 2000)".into(),
            x_label: "algorithm (its flow ID)".into(),
            y_label: "updates / packets (%)".into(),
            cats,
            x: XAxis::Categories,
            series: ser,
        };
        Ok((
            points,
            "Share of packets evicted to the algorithm".into(),
            vec![panel],
        ))
    }
}
