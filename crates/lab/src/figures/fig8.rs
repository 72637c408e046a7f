//! Figure 8 (section 4.4): eviction policy and lookup kernel.

use aggevict::{Policy, Simd};
use key::KeyKind;

use super::{series, Lab};
use crate::accel::AggSpec;
use crate::output::{Panel, XAxis};
use crate::{Figure, LabError, Point};

impl Lab<'_> {
    /// Section 4.4, Figure 8: GRR vs LRU (a) and the SIMD lookup kernels vs linear search (b, c).
    pub(super) fn fig8(&mut self) -> Result<(Vec<Point>, String, Vec<Panel>), LabError> {
        let pol_algos: [(&'static str, KeyKind); 2] =
            [("count_min", KeyKind::Src), ("space_saving", KeyKind::Src)];
        let simds: Vec<Simd> = [Simd::Off, Simd::Sse2, Simd::Avx2, Simd::Avx512]
            .into_iter()
            .filter(|&s| aggevict::simd::available(s))
            .collect();
        self.start(Figure::Fig8, pol_algos.len() * 2 + simds.len());
        let mut points = Vec::new();
        for (a, k) in pol_algos {
            for policy in [Policy::Grr, Policy::Lru] {
                let spec = AggSpec {
                    policy,
                    ..AggSpec::default()
                };
                points.push(self.run(Figure::Fig8, &self.base, a, k, Some(spec), 32)?);
            }
        }
        let mut spoints = Vec::new();
        for &s in &simds {
            let spec = AggSpec {
                simd: s,
                ..AggSpec::default()
            };
            spoints.push(self.run(
                Figure::Fig8,
                &self.base,
                "count_min",
                KeyKind::Src,
                Some(spec),
                32,
            )?);
        }
        // The chart's categories: the algorithms this panel ran, with their labels.
        let cats = [("count_min", "Count-Min"), ("space_saving", "Space-Saving")];
        let pcats = cats.iter().map(|c| c.1.to_string()).collect::<Vec<_>>();
        let pidx = |p: &Point| cats.iter().position(|c| c.0 == p.algorithm);
        let mut pser = Vec::new();
        for pol in ["grr", "lru"] {
            let sel = move |p: &Point| p.policy == pol;
            pser.push(series(
                &format!("{} avg", pol.to_uppercase()),
                &points,
                2,
                sel,
                |p| p.ns_avg,
                pidx,
            ));
            pser.push(series(
                &format!("{} p99", pol.to_uppercase()),
                &points,
                2,
                sel,
                |p| p.ns_p99,
                pidx,
            ));
        }
        let snames: Vec<String> = simds.iter().map(|s| s.name().to_string()).collect();
        let sn = snames.clone();
        let sidx = move |p: &Point| sn.iter().position(|s| *s == p.simd);
        let all = |_: &Point| true;
        let n = simds.len();
        let panels = vec![
            Panel {
                title: "(a) Latency: eviction policy".into(),
                x_label: "algorithm".into(),
                y_label: "ns per packet".into(),
                cats: pcats,
                x: XAxis::Categories,
                series: pser,
            },
            Panel {
                title: "(b) Throughput: lookup kernel (Count-Min)".into(),
                x_label: "kernel (off = linear search)".into(),
                y_label: "Mpps".into(),
                cats: snames.clone(),
                x: XAxis::Categories,
                series: vec![series(
                    "Agg-Evict",
                    &spoints,
                    n,
                    all,
                    |p| p.mpps,
                    sidx.clone(),
                )],
            },
            Panel {
                title: "(c) Latency: lookup kernel (Count-Min)".into(),
                x_label: "kernel (off = linear search)".into(),
                y_label: "ns per packet".into(),
                cats: snames,
                x: XAxis::Categories,
                series: vec![
                    series("avg", &spoints, n, all, |p| p.ns_avg, sidx.clone()),
                    series("p99", &spoints, n, all, |p| p.ns_p99, sidx),
                ],
            },
        ];
        points.extend(spoints);
        Ok((points, "Figure 8: design choices".into(), panels))
    }
}
