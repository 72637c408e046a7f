//! The configuration surface under random input: TOML configs built from the real field and
//! parameter names (and some that are not), with values of every shape and size, parsed, built
//! into a runner under a memory budget and, when accepted, run over a few packets. Nothing may
//! panic or abort; a refused configuration is an error whose message is one line (TOML syntax
//! errors excepted: the parser's message quotes the offending line).

use proptest::prelude::*;
use toml::Value;

const TASKS: &[&str] = &[
    "heavy_hitters",
    "heavy_changers",
    "superspreaders",
    "ddos",
    "cardinality",
    "flow_size_distribution",
    "entropy",
    "top_k",
    "flow_size",
    "nonsense",
];
const KEYS: &[&str] = &["src", "dst", "pair", "four_tuple", "five_tuple", "ports"];

/// Every parameter name some algorithm has, and one no algorithm has.
fn param_names() -> Vec<String> {
    let mut v: Vec<String> = catalog::ALL
        .iter()
        .flat_map(|e| (e.defaults)().keys().cloned().collect::<Vec<_>>())
        .collect();
    v.sort();
    v.dedup();
    v.push("bogus".into());
    v
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => prop_oneof![
            Just(0i64),
            Just(1),
            Just(2),
            Just(-1),
            Just(3),
            Just(1 << 16),
            Just(1 << 20),
            Just(1 << 32),
            Just(1 << 40),
            Just(i64::MAX),
            0i64..100_000,
        ]
        .prop_map(Value::Integer),
        1 => prop_oneof![Just(0.0f64), Just(-1.0), Just(0.5), Just(1e300), Just(f64::NAN)]
            .prop_map(Value::Float),
        1 => Just(Value::String("x".into())),
        1 => Just(Value::Boolean(true)),
        1 => prop::collection::vec(0i64..70_000, 0..20)
            .prop_map(|v| Value::Array(v.into_iter().map(Value::Integer).collect())),
    ]
}

/// A whole number, mostly in `ok`, sometimes anything.
fn size(ok: std::ops::Range<i64>) -> impl Strategy<Value = Value> {
    prop_oneof![4 => ok.prop_map(Value::Integer), 1 => value()]
}

/// One `[[measure]]`: mostly an algorithm with a task it answers and some of its own
/// parameters, sometimes anything.
fn measure(names: Vec<String>) -> impl Strategy<Value = toml::Table> {
    let entries: Vec<usize> = (0..catalog::ALL.len()).collect();
    (
        prop::sample::select(entries),
        any::<prop::sample::Index>(),
        prop::option::weighted(0.05, prop::sample::select(TASKS)),
        prop::option::weighted(0.05, Just("countmin")),
        prop::option::weighted(0.1, prop::sample::select(KEYS)),
        prop::option::weighted(
            0.3,
            prop_oneof![4 => (0.0001f64..2.0).prop_map(Value::Float), 1 => value()],
        ),
        prop::collection::vec(
            (
                any::<prop::sample::Index>(),
                prop::option::weighted(0.1, prop::sample::select(names)),
                value(),
            ),
            0..3,
        ),
    )
        .prop_map(move |(e, ti, task, bad_algo, key, threshold, params)| {
            let entry = catalog::ALL[e];
            let own: Vec<String> = (entry.defaults)().keys().cloned().collect();
            let mut m = toml::Table::new();
            let task = task.unwrap_or(ti.get(entry.tasks).name());
            m.insert("task".into(), Value::String(task.into()));
            m.insert(
                "algo".into(),
                Value::String(bad_algo.unwrap_or(entry.name).into()),
            );
            if let Some(k) = key {
                m.insert("key".into(), Value::String(k.into()));
            }
            if let Some(t) = threshold {
                m.insert("threshold".into(), t);
            }
            let mut p = toml::Table::new();
            for (pi, other, v) in params {
                let name = other.unwrap_or_else(|| {
                    if own.is_empty() {
                        "bogus".into()
                    } else {
                        pi.get(&own).clone()
                    }
                });
                p.insert(name, v);
            }
            m.insert("params".into(), Value::Table(p));
            m
        })
}

fn config() -> impl Strategy<Value = toml::Table> {
    (
        prop::collection::vec(measure(param_names()), 1..4),
        prop::option::of(size(1..5_000)),
        prop::option::of(size(1..300)),
        any::<bool>(),
        prop::option::of(prop::sample::select(
            &["none", "agg_evict", "agg_evict", "agg_evict", "fast"][..],
        )),
        prop::option::of((size(1..5_000), size(1..100))),
    )
        .prop_map(|(measures, epoch, batch, ipv6, accel, agg)| {
            let mut c = toml::Table::new();
            c.insert(
                "measure".into(),
                Value::Array(measures.into_iter().map(Value::Table).collect()),
            );
            if let Some(e) = epoch {
                c.insert("epoch_packets".into(), e);
            }
            if let Some(b) = batch {
                c.insert("batch".into(), b);
            }
            c.insert("ipv6".into(), Value::Boolean(ipv6));
            if let Some(a) = accel {
                c.insert("accel".into(), Value::String(a.into()));
            }
            if let Some((arrays, evict)) = agg {
                let mut t = toml::Table::new();
                t.insert("arrays".into(), arrays);
                t.insert("evict_batch".into(), evict);
                c.insert("agg_evict".into(), Value::Table(t));
            }
            c
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, rng_seed: proptest::test_runner::RngSeed::Fixed(0x5eed), ..ProptestConfig::default() })]

    #[test]
    fn random_configs_run_or_fail_with_one_line(c in config()) {
        let text = toml::to_string(&c).unwrap_or_default();
        let cfg = match measure::RunConfig::from_toml(&text) {
            Ok(cfg) => cfg,
            // toml's own message quotes the line; it is the parser's format, not ours.
            Err(_) => return Ok(()),
        };
        let cfg = measure::RunConfig { max_memory: Some(1 << 30), ..cfg };
        match measure::Runner::new(cfg, "fuzz") {
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(!msg.trim().is_empty());
                prop_assert!(!msg.contains('\n') || msg.contains("TOML parse error"), "{msg}");
            }
            Ok(mut r) => {
                let g = gen::Spec { packets: 3_000, flows: 300, seed: 1, ..gen::Spec::default() };
                gen::generate(&g, |p| r.push(p.ts_ns, &p.tuple, p.wire_len)).unwrap();
                let rep = r.finish();
                prop_assert_eq!(rep.totals.packets, 3_000);
            }
        }
    }
}
