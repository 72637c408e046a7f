//! The memory limit loop: one prefetched random counter increment per packet over an array of
//! each algorithm's memory size.

use key::{FlowKey, KeyKind};

use super::{algo_seed, Lab, NINE};
use crate::clock::{Clock, LatencyHist};
use crate::limit::{LimitLoop, LIMIT_BATCH};
use crate::output::{Panel, Series};
use crate::run::build_algorithm;
use crate::workload::Workload;
use crate::{Figure, LabError, Point, EPOCH};

impl Lab<'_> {
    /// The memory limit (Mpps) of `algorithm`'s size, measured once per algorithm (figure 5
    /// shows it next to each algorithm).
    pub(super) fn limit_of(
        &mut self,
        algorithm: &'static str,
        key: KeyKind,
    ) -> Result<f64, LabError> {
        if let Some(&v) = self.limits.get(algorithm) {
            return Ok(v);
        }
        let mem =
            build_algorithm(algorithm, "", self.base.key_len(key), algo_seed())?.memory_bytes();
        let (mpps, _, _) = limit_run(&self.base, key, mem, &self.clock);
        self.limits.insert(algorithm, mpps);
        Ok(mpps)
    }

    /// The memory limit per algorithm size: one prefetched random counter increment per packet.
    pub(super) fn fig_limit(&mut self) -> Result<(Vec<Point>, String, Vec<Panel>), LabError> {
        self.start(Figure::Limit, NINE.len());
        let mut points = Vec::new();
        for (a, key, _) in NINE {
            if !self.supported(a, key)? {
                continue;
            }
            self.tick(&format!("limit: {a}"));
            let mem = build_algorithm(a, "", self.base.key_len(key), algo_seed())?.memory_bytes();
            let (mpps, avg, p99) = limit_run(&self.base, key, mem, &self.clock);
            self.limits.insert(a, mpps);
            points.push(Point {
                figure: Figure::Limit.to_string(),
                algorithm: a.into(),
                accel: "none".into(),
                key: key.name().into(),
                batch: LIMIT_BATCH,
                arrays: 0,
                policy: String::new(),
                simd: String::new(),
                skew: self.base.skew,
                order: self.base.order.clone(),
                mpps,
                ns_avg: avg,
                ns_p99: p99,
                evicted_share: None,
                limit_mpps: Some(mpps),
                unique_share: None,
                params: String::new(),
                packets: self.base.len() as u64,
                agg_mode: String::new(),
                through_share: None,
                switches: None,
            });
        }
        let cats: Vec<String> = NINE.iter().map(|n| n.2.to_string()).collect();
        let panel = Panel {
            title: "Memory limit: one random increment per packet".into(),
            x_label: "array of the algorithm's memory size".into(),
            y_label: "Mpps".into(),
            cats,
            series: vec![Series {
                name: "limit".into(),
                values: points.iter().map(|p| Some(p.mpps)).collect(),
            }],
        };
        Ok((points, "Limit loop".into(), vec![panel]))
    }
}

/// Time the limit loop over the whole trace (keys of `key` kind), batches of 32, each timed.
/// 4-byte kinds go as u32 keys (as the algorithms get them), others as `FlowKey`s.
/// Returns (Mpps, ns_avg, ns_p99). The counters' total is checked against the packet count,
/// which both uses the result (so the loop cannot be optimised away) and validates it.
fn limit_run(w: &Workload, key: KeyKind, memory_bytes: usize, clock: &Clock) -> (f64, f64, f64) {
    let mut l = LimitLoop::new(memory_bytes, algo_seed());
    let narrow = w.has_u32_keys(key);
    let (mut keys, mut u32s) = (Vec::new(), Vec::new());
    let load = |start: usize, keys: &mut Vec<FlowKey>, u32s: &mut Vec<u32>| {
        if narrow {
            w.keys_u32_into(start, start + EPOCH, key, u32s);
        } else {
            w.keys_into(start, start + EPOCH, key, keys);
        }
    };
    // Warm-up: the first epoch.
    load(0, &mut keys, &mut u32s);
    l.increment(&keys);
    l.increment_u32(&u32s);
    l.reset();
    let mut hist = LatencyHist::new();
    let mut cycles = 0u64;
    let mut start = 0;
    while start < w.len() {
        load(start, &mut keys, &mut u32s);
        let n = if narrow { u32s.len() } else { keys.len() };
        for lo in (0..n).step_by(LIMIT_BATCH) {
            let hi = (lo + LIMIT_BATCH).min(n);
            let t0 = clock.now();
            if narrow {
                l.increment_u32(&u32s[lo..hi]);
            } else {
                l.increment(&keys[lo..hi]);
            }
            let c = clock.now().wrapping_sub(t0);
            cycles += c;
            hist.add_batch(c, (hi - lo) as u64);
        }
        start += EPOCH;
    }
    let total = std::hint::black_box(l.total());
    debug_assert_eq!(total, w.len() as u64);
    let ns = clock.to_ns(cycles as f64);
    let mpps = if ns > 0.0 && total > 0 {
        total as f64 / ns * 1e3
    } else {
        0.0
    };
    (
        mpps,
        clock.to_ns(hist.mean_cycles()),
        clock.to_ns(hist.quantile_cycles(0.99)),
    )
}
