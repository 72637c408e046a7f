//! Figure 2 (section 2): the batch-size dilemma.

use key::KeyKind;

use super::{by_batch, numeric, series, Lab, BATCHES, BATCHES_QUICK};
use crate::output::Panel;
use crate::{Figure, LabError, Point};

impl Lab<'_> {
    /// Section 2, Figure 2: the batch-size dilemma. Throughput of an algorithm fed raw batches,
    /// and the share of distinct flows in a batch, against the batch size.
    pub(super) fn fig2(&mut self) -> Result<(Vec<Point>, String, Vec<Panel>), LabError> {
        let batches = self.q(&BATCHES, &BATCHES_QUICK);
        // The brief asks for Count-Min; the paper's Figure 2a plots FlowRadar: run both at full
        // size.
        let algos: &[&'static str] = if self.args.quick {
            &["count_min"]
        } else {
            &["count_min", "flow_radar"]
        };
        self.start(Figure::Fig2, batches.len() * algos.len());
        let mut points = Vec::new();
        for &b in batches {
            // Distinct flows per batch over (at most) the first 4M packets: enough batches for a
            // stable mean even at 8192.
            let share = self.base.unique_share(KeyKind::Src, b, 4_000_000);
            for &a in algos {
                let mut p = self.run(Figure::Fig2, &self.base, a, KeyKind::Src, None, b)?;
                p.unique_share = Some(share);
                points.push(p);
            }
        }
        let cats: Vec<String> = batches.iter().map(|b| b.to_string()).collect();
        let thr = Panel {
            title: "(a) Throughput without Agg-Evict".into(),
            x_label: "batch size (packets)".into(),
            y_label: "Mpps".into(),
            cats: cats.clone(),
            x: numeric(batches.iter().map(|&b| b as f64)),
            series: algos
                .iter()
                .map(|a| {
                    series(
                        a,
                        &points,
                        batches.len(),
                        |p| p.algorithm == *a,
                        |p| p.mpps,
                        by_batch(batches),
                    )
                })
                .collect(),
        };
        let uniq = Panel {
            title: "(b) Avg. unique flow share per batch".into(),
            x_label: "batch size (packets)".into(),
            y_label: "unique flows / batch (%)".into(),
            cats,
            x: numeric(batches.iter().map(|&b| b as f64)),
            series: vec![series(
                "src",
                &points,
                batches.len(),
                |p| p.algorithm == algos[0],
                |p| p.unique_share.unwrap_or(0.0) * 100.0,
                by_batch(batches),
            )],
        };
        Ok((
            points,
            "Figure 2: impact of batch size".into(),
            vec![thr, uniq],
        ))
    }
}
