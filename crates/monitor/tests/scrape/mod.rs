//! Scraping the metrics endpoint as Prometheus would, shared by this crate's tests and the CLI's
//! (`crates/cli/tests/monitor.rs` includes this file by path).
#![allow(dead_code)]

use std::time::Duration;

use prometheus_parse::{Scrape, Value};

/// An HTTP client with a timeout; `errors`: whether a 4xx/5xx status is an error.
pub fn agent(errors: bool) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(10)))
        .http_status_as_error(errors)
        .build()
        .into()
}

/// Scrape `url` and parse it.
pub fn scrape(url: &str) -> Scrape {
    let mut resp = agent(true).get(url).call().expect("the endpoint answers");
    let ct = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    assert!(ct.starts_with("application/openmetrics-text"), "{ct}");
    let text = resp.body_mut().read_to_string().unwrap();
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap()
}

/// The samples of `metric` whose labels include `labels`.
pub fn values(s: &Scrape, metric: &str, labels: &[(&str, &str)]) -> Vec<f64> {
    s.samples
        .iter()
        .filter(|x| x.metric == metric)
        .filter(|x| labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .map(|x| match x.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v,
            _ => f64::NAN,
        })
        .collect()
}

pub fn one(s: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    let v = values(s, metric, labels);
    assert_eq!(v.len(), 1, "{metric} {labels:?}: {v:?}");
    v[0]
}
