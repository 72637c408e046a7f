//! The metrics: a `prometheus-client` registry updated after each epoch and served as
//! OpenMetrics text by a small HTTP server (`crate::http`) on a thread of its own. Label
//! cardinality is bounded: per task answer at most `top` keys are labels, and the per-task
//! families are rebuilt every epoch, so keys of past epochs do not accumulate.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};

use key::KeyKind;
use measure::report::{Cost, Paths, TaskResult};
use measure::{EpochReport, Totals};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;
type G = Gauge<f64, AtomicU64>;
type GF = Family<Labels, G>;
type CF = Family<Labels, Counter>;

/// Families registered only once the report has them (a file has no kernel counts, a run
/// without fast path no paths): absent rather than zero.
#[derive(Default)]
struct Lazy {
    capture: Option<(Counter, Counter, Counter)>,
    paths: Option<(CF, CF, G)>,
    costs: Option<[GF; 8]>,
}

/// One instance's costs summed over the epochs seen so far (`EpochReport::costs`).
#[derive(Default)]
struct RunningCost {
    updates: u64,
    update_seconds: f64,
    query_seconds: f64,
    epochs: u64,
}

pub struct Metrics {
    registry: Arc<Mutex<Registry>>,
    lazy: Lazy,
    top: usize,
    info: GF,
    packets: CF,
    epoch_packets: Counter,
    epoch_bytes: Counter,
    epochs: Counter,
    epoch_index: G,
    epoch_flows: G,
    epoch_wall: G,
    monitor_epoch: G,
    task_estimate: GF,
    task_reported: GF,
    task_threshold: GF,
    task_true: GF,
    task_accuracy: GF,
    task_key: GF,
    pub alerts: CF,
    pub suppressed: Counter,
    pub exec_failed: G,
    pub exec_timed_out: G,
    pub keys_tracked: GF,
    pub keys_dropped: G,
    /// Last totals seen, to add only what is new to the counters.
    seen: Totals,
    /// Per (algorithm, key kind): costs so far, so a live run shows them every epoch.
    running: BTreeMap<(String, KeyKind), RunningCost>,
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn task_labels(t: &TaskResult) -> Labels {
    labels(&[
        ("task", t.task.name()),
        ("algorithm", &t.algorithm),
        ("key", t.key.name()),
    ])
}

impl Metrics {
    pub fn new(top: usize) -> Metrics {
        let mut r = Registry::default();
        macro_rules! reg {
            ($name:expr, $help:expr, $m:expr) => {{
                let m = $m;
                r.register($name, $help, m.clone());
                m
            }};
        }
        Metrics {
            top,
            info: reg!("netsift_run_info", "The run: trace, key kind, weight (value 1)", GF::default()),
            packets: reg!("netsift_read_packets", "Packets read, by class (every packet in one)", CF::default()),
            epoch_packets: reg!("netsift_epoch_packets", "Packets of the closed epochs", Counter::default()),
            epoch_bytes: reg!("netsift_epoch_bytes", "Bytes of the closed epochs", Counter::default()),
            epochs: reg!("netsift_epochs", "Epochs closed", Counter::default()),
            epoch_index: reg!("netsift_epoch_index", "Index of the latest closed epoch", G::default()),
            epoch_flows: reg!("netsift_epoch_flows", "Distinct flows of the latest epoch (ground truth)", G::default()),
            epoch_wall: reg!("netsift_epoch_wall_seconds", "Wall time between the last two epoch closes", G::default()),
            monitor_epoch: reg!("netsift_monitor_epoch_seconds", "Time the monitor spent on the latest epoch (metrics and alerts)", G::default()),
            task_estimate: reg!("netsift_task_estimate", "Latest epoch: a task's scalar answer (cardinality, entropy, flows of the distribution)", GF::default()),
            task_reported: reg!("netsift_task_reported", "Latest epoch: keys a task reported (heavy hitters, changers, superspreaders, DDoS victims, top-k)", GF::default()),
            task_threshold: reg!("netsift_task_threshold", "Latest epoch: the absolute threshold a task used (top-k: k)", GF::default()),
            task_true: reg!("netsift_task_true", "Latest epoch: the exact value or count (with ground truth)", GF::default()),
            task_accuracy: reg!("netsift_task_accuracy", "Latest epoch: accuracy against ground truth, by metric", GF::default()),
            task_key: reg!("netsift_task_key_estimate", "Latest epoch: the top reported keys of a task with their estimates", GF::default()),
            alerts: reg!("netsift_alerts", "Alert events emitted, by rule and state", CF::default()),
            suppressed: reg!("netsift_alerts_suppressed", "Alert events suppressed by the per-epoch rate limit", Counter::default()),
            exec_failed: reg!("netsift_alert_exec_failures", "Runs of --alert-exec that failed (start, exit status, timeout, full queue)", G::default()),
            exec_timed_out: reg!("netsift_alert_exec_timeouts", "Runs of --alert-exec killed after the timeout", G::default()),
            keys_tracked: reg!("netsift_alert_keys_tracked", "Keys an alert rule holds state for", GF::default()),
            keys_dropped: reg!("netsift_alert_keys_dropped", "New keys not tracked because their rule was at its cap", G::default()),
            seen: Totals::default(),
            running: BTreeMap::new(),
            lazy: Lazy::default(),
            // Last: every `reg!` above registered into it first.
            registry: Arc::new(Mutex::new(r)),
        }
    }

    /// The registry, to hold (`lock`) while updating several metrics, so that a scrape never
    /// sees half an epoch.
    pub fn shared(&self) -> Arc<Mutex<Registry>> {
        self.registry.clone()
    }

    pub fn set_monitor_epoch(&self, seconds: f64) {
        self.monitor_epoch.set(seconds);
    }

    pub fn text(&self) -> String {
        render(&self.registry)
    }

    pub fn run_info(&self, trace: &str, key: &str, weight: &str) {
        self.info.clear();
        self.info
            .get_or_create(&labels(&[
                ("trace", trace),
                ("key", key),
                ("weight", weight),
            ]))
            .set(1.0);
    }

    pub fn totals(&mut self, t: &Totals) {
        for c in wire::Class::ALL {
            let new = t.classes.get(c).saturating_sub(self.seen.classes.get(c));
            self.packets
                .get_or_create(&labels(&[("class", c.name())]))
                .inc_by(new);
        }
        self.seen = t.clone();
    }

    /// Everything the epoch's report says; `reg` is the held registry (for lazy families).
    pub fn epoch(&mut self, reg: &mut Registry, e: &EpochReport, wall: Option<f64>) {
        self.epochs.inc();
        self.epoch_packets.inc_by(e.packets);
        self.epoch_bytes.inc_by(e.bytes);
        self.epoch_index.set(e.index as f64);
        if let Some(f) = e.flows {
            self.epoch_flows.set(f as f64);
        }
        if let Some(w) = wall {
            self.epoch_wall.set(w);
        }
        if let Some(c) = &e.capture {
            let (recv, drop, ifdrop) = self.lazy.capture.get_or_insert_with(|| {
                let m = (Counter::default(), Counter::default(), Counter::default());
                reg.register(
                    "netsift_capture_received",
                    "Packets the kernel capture received (pcap_stats)",
                    m.0.clone(),
                );
                reg.register(
                    "netsift_capture_dropped",
                    "Packets dropped because the capture buffer was full",
                    m.1.clone(),
                );
                reg.register(
                    "netsift_capture_if_dropped",
                    "Packets dropped by the interface or its driver",
                    m.2.clone(),
                );
                m
            });
            recv.inc_by(c.received);
            drop.inc_by(c.dropped);
            ifdrop.inc_by(c.if_dropped);
        }
        if let Some(p) = &e.paths {
            self.paths(reg, p);
        }
        for f in [
            &self.task_estimate,
            &self.task_reported,
            &self.task_threshold,
            &self.task_true,
            &self.task_accuracy,
            &self.task_key,
        ] {
            f.clear();
        }
        for t in &e.tasks {
            self.task(t);
        }
        if !e.costs.is_empty() {
            self.epoch_costs(reg, e);
        }
    }

    /// The epoch's costs per instance: that epoch's, and the run's so far (what the report
    /// gives at the end, memory aside), so a daemon shows its costs while it runs.
    fn epoch_costs(&mut self, reg: &mut Registry, e: &EpochReport) {
        let keyed = self.seen.classes.keyed();
        let mut rows = Vec::with_capacity(e.costs.len());
        for c in &e.costs {
            let r = self
                .running
                .entry((c.algorithm.clone(), c.key))
                .or_default();
            r.updates += c.updates;
            r.update_seconds += c.update_seconds;
            r.query_seconds += c.query_seconds;
            r.epochs += 1;
            rows.push((
                labels(&[("algorithm", &c.algorithm), ("key", c.key.name())]),
                [
                    Some(r.update_seconds),
                    (keyed > 0).then(|| r.update_seconds * 1e9 / keyed as f64),
                    Some(r.updates as f64),
                    Some(r.query_seconds),
                    Some(r.query_seconds * 1e3 / r.epochs as f64),
                    None,
                    Some(c.update_seconds),
                    Some(c.query_seconds),
                ],
            ));
        }
        self.set_costs(reg, rows);
    }

    fn paths(&mut self, reg: &mut Registry, p: &Paths) {
        let (packets, bytes, share) = self.lazy.paths.get_or_insert_with(|| {
            let m = (CF::default(), CF::default(), G::default());
            reg.register(
                "netsift_path_packets",
                "Packets per SketchVisor path (normal, fast)",
                m.0.clone(),
            );
            reg.register(
                "netsift_path_bytes",
                "Bytes per SketchVisor path (normal, fast)",
                m.1.clone(),
            );
            reg.register(
                "netsift_fast_path_share",
                "Latest epoch: share of packets on the fast path",
                m.2.clone(),
            );
            m
        });
        for (path, n, b) in [
            ("normal", p.normal_packets, p.normal_bytes),
            ("fast", p.fast_packets, p.fast_bytes),
        ] {
            let l = labels(&[("path", path)]);
            packets.get_or_create(&l).inc_by(n);
            bytes.get_or_create(&l).inc_by(b);
        }
        share.set(p.fast_share);
    }

    fn task(&self, t: &TaskResult) {
        let l = task_labels(t);
        let with = |k: &str, v: &str| {
            let mut l = l.clone();
            l.push((k.to_string(), v.to_string()));
            l
        };
        if let Some(v) = t.answer.estimate {
            self.task_estimate.get_or_create(&l).set(v);
        }
        if let Some(n) = t.answer.reported {
            self.task_reported.get_or_create(&l).set(n as f64);
        }
        if let Some(th) = t.threshold {
            self.task_threshold.get_or_create(&l).set(th);
        }
        if let Some(v) = t.truth.value {
            self.task_true.get_or_create(&with("of", "value")).set(v);
        }
        if let Some(n) = t.truth.count {
            self.task_true
                .get_or_create(&with("of", "count"))
                .set(n as f64);
        }
        let a = &t.accuracy;
        for (name, v) in [
            ("precision", a.precision),
            ("recall", a.recall),
            ("f1", a.f1),
            ("relative_error", a.relative_error),
            ("are", a.are),
            ("mrd", a.mrd),
        ] {
            if let Some(v) = v {
                self.task_accuracy
                    .get_or_create(&with("metric", name))
                    .set(v);
            }
        }
        // The answer lists its keys largest first: the first `top` are the labels.
        for k in t.answer.keys.iter().take(self.top) {
            self.task_key
                .get_or_create(&with("flow", &k.key))
                .set(k.estimate as f64);
        }
    }

    /// Each algorithm's cost over the run (the run's report at its end).
    pub fn costs(&mut self, reg: &mut Registry, costs: &[Cost]) {
        let rows = costs
            .iter()
            .map(|c| {
                (
                    labels(&[("algorithm", &c.algorithm), ("key", c.key.name())]),
                    [
                        Some(c.seconds),
                        Some(c.ns_per_packet),
                        Some(c.updates as f64),
                        Some(c.query_seconds),
                        Some(c.query_ms_per_epoch),
                        Some(c.memory_bytes as f64),
                        None,
                        None,
                    ],
                )
            })
            .collect();
        self.set_costs(reg, rows);
    }

    /// Cost families by instance, in the order of their registration below (`None`: left as
    /// it was).
    fn set_costs(&mut self, reg: &mut Registry, rows: Vec<(Labels, [Option<f64>; 8])>) {
        let fams = self.lazy.costs.get_or_insert_with(|| {
            let fams: [GF; 8] = Default::default();
            for (f, (name, help)) in fams.iter().zip([
                (
                    "netsift_update_seconds",
                    "Update time of an algorithm instance over the run so far",
                ),
                (
                    "netsift_update_ns_per_packet",
                    "Update time per keyed packet over the run so far",
                ),
                ("netsift_updates", "Updates an instance received so far"),
                (
                    "netsift_query_seconds",
                    "Query time (answers at epoch ends) over the run so far",
                ),
                ("netsift_query_ms_per_epoch", "Query time per epoch so far"),
                (
                    "netsift_memory_bytes",
                    "Largest memory an instance reached at an epoch's end (at the run's end)",
                ),
                (
                    "netsift_epoch_update_seconds",
                    "Latest epoch: update time of an algorithm instance (all workers)",
                ),
                (
                    "netsift_epoch_query_seconds",
                    "Latest epoch: query time of an algorithm instance",
                ),
            ]) {
                reg.register(name, help, f.clone());
            }
            fams
        });
        for (l, values) in rows {
            for (f, v) in fams.iter().zip(values) {
                if let Some(v) = v {
                    f.get_or_create(&l).set(v);
                }
            }
        }
    }
}

/// Hold the registry (a panic elsewhere while holding it leaves metrics that are still valid).
pub fn lock(registry: &Mutex<Registry>) -> MutexGuard<'_, Registry> {
    registry.lock().unwrap_or_else(|p| p.into_inner())
}

fn render(registry: &Mutex<Registry>) -> String {
    let reg = lock(registry);
    let mut s = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut s, &reg);
    s
}

/// The HTTP endpoint: `GET /metrics` (and `/`) answers the registry's text; stops when dropped.
/// Served by [`crate::http`]: one thread, bounded connections, idle ones timed out.
pub struct Server {
    pub addr: SocketAddr,
    _http: crate::http::Http,
}

impl Server {
    pub fn start(addr: SocketAddr, m: &Metrics) -> Result<Server, String> {
        use crate::http::{Http, Response};
        let registry = m.registry.clone();
        let http = Http::start(
            addr,
            Box::new(move |path| {
                if path == "/metrics" || path == "/" {
                    Response {
                        status: 200,
                        content_type: "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        body: render(&registry),
                    }
                } else {
                    Response {
                        status: 404,
                        content_type: "text/plain; charset=utf-8",
                        body: "not found: try /metrics\n".into(),
                    }
                }
            }),
        )?;
        Ok(Server {
            addr: http.addr,
            _http: http,
        })
    }
}
