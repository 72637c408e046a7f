//! `docs/parameters.md` is true: every table in it is read and checked against the code.
//!
//! - The algorithm table: every parameter of every entry's defaults has a row (and no row names a
//!   parameter that does not exist), with the real default; each documented bound is accepted by
//!   `Entry::memory` and the value just beyond it is refused (also by `build`, and the built
//!   instance takes no more than `memory` says, where the accepted value is small); "at max" is
//!   the memory at the maximum.
//! - The default-memory table: `Entry::memory` of the defaults at the row's key length (and the
//!   aggregator's `memory_for` for the `agg_evict` rows).
//! - The Agg-Evict table: `AggConfig`'s defaults, bounds and enum values.
//!
//! `Entry::memory` must validate without allocating (a run refuses a configuration before
//! building it): every call here goes through `planned`, which fails if the call allocated more
//! than [`PLAN_ALLOC_LIMIT`], so a huge accepted value costs nothing. Nothing is built above
//! [`BUILD_LIMIT`].

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};

use algo::{BuildCtx, ConfigError, Entry};
use toml::{Table, Value};

const DOC: &str = include_str!("../../../docs/parameters.md");
const DOC_NAME: &str = "docs/parameters.md";

/// Largest state this test builds (larger accepted values are checked with `memory` only).
const BUILD_LIMIT: u64 = 32 << 20;
/// Most bytes one `Entry::memory` call may allocate: parsing the parameter table, and the
/// reversible sketches' validation, which builds their modular hash (its tables are
/// `rows x key_len x 1280` bytes: at most 160 KiB, whatever the other parameters).
const PLAN_ALLOC_LIMIT: u64 = 256 << 10;

// ---------------------------------------------------------------------------------------------
// Allocation counting, per thread (tests run in parallel).

struct Counting;

thread_local! {
    static ALLOCATED: Cell<u64> = const { Cell::new(0) };
}

fn count(n: usize) {
    let _ = ALLOCATED.try_with(|a| a.set(a.get().saturating_add(n as u64)));
}

// SAFETY: every call is forwarded to `System` unchanged; the counter only reads the size.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count(l.size());
        // SAFETY: the caller's contract for `alloc` is passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        count(l.size());
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        count(new);
        // SAFETY: as above.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocated() -> u64 {
    ALLOCATED.with(|a| a.get())
}

/// `entry.memory(params, key_len)`, checked to allocate (almost) nothing.
fn planned(e: &Entry, params: &Table, key_len: usize) -> Result<u64, ConfigError> {
    let ctx = ctx(key_len);
    let before = allocated();
    let r = e.memory(params, &ctx);
    let used = allocated() - before;
    assert!(
        used <= PLAN_ALLOC_LIMIT,
        "{}: memory({params}) at key {key_len} allocated {used} bytes; it must validate and \
         compute without allocating",
        e.name
    );
    r
}

fn ctx(key_len: usize) -> BuildCtx {
    BuildCtx {
        key_len,
        ..BuildCtx::default()
    }
}

// ---------------------------------------------------------------------------------------------
// The document's tables.

/// One table row: its line number and its cells by column name, as written (`raw`) and without
/// their code quotes.
struct Row {
    line: usize,
    raw: BTreeMap<String, String>,
    cells: BTreeMap<String, String>,
}

impl Row {
    fn raw(&self, col: &str) -> &str {
        self.raw
            .get(col)
            .unwrap_or_else(|| panic!("{DOC_NAME}:{}: no column `{col}`", self.line))
    }
    fn get(&self, col: &str) -> &str {
        self.cells
            .get(col)
            .unwrap_or_else(|| panic!("{DOC_NAME}:{}: no column `{col}`", self.line))
    }
    fn at(&self) -> String {
        format!("{DOC_NAME}:{}", self.line)
    }
    fn key(&self) -> usize {
        self.get("key")
            .parse()
            .unwrap_or_else(|_| panic!("{}: key `{}` is not a length", self.at(), self.get("key")))
    }
}

const ALGO_COLS: &[&str] = &[
    "algorithm",
    "parameter",
    "default",
    "min",
    "max",
    "key",
    "memory",
    "at max",
    "notes",
];
const MEMORY_COLS: &[&str] = &["algorithm", "key", "bytes", "about", "formula"];
const AGG_COLS: &[&str] = &[
    "agg_evict parameter",
    "default",
    "min",
    "max",
    "memory",
    "notes",
];

/// The document's tables, told apart by their columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Algorithms,
    Memory,
    AggEvict,
}

const KINDS: [(Kind, &[&str]); 3] = [
    (Kind::Algorithms, ALGO_COLS),
    (Kind::Memory, MEMORY_COLS),
    (Kind::AggEvict, AGG_COLS),
];

/// The rows of every table by kind; a table whose header is none of the known ones is an error
/// (every table of the document is checked).
fn tables(doc: &str) -> BTreeMap<Kind, Vec<Row>> {
    let mut out: BTreeMap<Kind, Vec<Row>> = BTreeMap::new();
    let mut header: Option<(Kind, &'static [&'static str], usize)> = None;
    for (i, line) in doc.lines().enumerate() {
        let line_no = i + 1;
        let t = line.trim();
        if !t.starts_with('|') {
            header = None;
            continue;
        }
        let cells: Vec<String> = t
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect();
        match header {
            None => {
                let &(kind, h) = KINDS
                    .iter()
                    .find(|(_, h)| h.iter().copied().eq(cells.iter().map(|c| c.as_str())))
                    .unwrap_or_else(|| {
                        panic!(
                            "{DOC_NAME}:{line_no}: a table with unknown columns {cells:?}; \
                             expected one of {:?}",
                            KINDS.map(|k| k.1)
                        )
                    });
                header = Some((kind, h, line_no));
                out.entry(kind).or_default();
            }
            Some((_, _, start)) if line_no == start + 1 => {
                assert!(
                    cells
                        .iter()
                        .all(|c| !c.is_empty() && c.chars().all(|ch| ch == '-' || ch == ':')),
                    "{DOC_NAME}:{line_no}: expected the separator row under the header"
                );
            }
            Some((kind, h, _)) => {
                assert_eq!(
                    cells.len(),
                    h.len(),
                    "{DOC_NAME}:{line_no}: {} cells, the header has {}",
                    cells.len(),
                    h.len()
                );
                let named = |f: fn(&String) -> String| {
                    h.iter()
                        .map(|c| c.to_string())
                        .zip(cells.iter().map(f))
                        .collect()
                };
                out.entry(kind).or_default().push(Row {
                    line: line_no,
                    raw: named(|c| c.clone()),
                    cells: named(|c| c.replace('`', "")),
                });
            }
        }
    }
    out
}

fn rows(kind: Kind) -> Vec<Row> {
    let r = tables(DOC).remove(&kind).unwrap_or_default();
    assert!(!r.is_empty(), "{DOC_NAME}: no {kind:?} table");
    r
}

/// A documented bound.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Bound {
    None,
    Int(i64),
    Real { v: f64, exclusive: bool },
}

/// `-`, an integer, `2^N`, `2^N - 1`, a real, or `>x` / `<x` (exclusive real bounds).
fn bound(s: &str, at: &str) -> Bound {
    let s = s.trim();
    if s == "-" {
        return Bound::None;
    }
    let (exclusive, s) = match s.strip_prefix('>').or_else(|| s.strip_prefix('<')) {
        Some(rest) => (true, rest.trim()),
        None => (false, s),
    };
    let int = if let Some(p) = s.strip_prefix("2^") {
        let (p, minus_one) = match p.split_once('-') {
            Some((p, one)) if one.trim() == "1" => (p.trim(), true),
            Some(_) => panic!("{at}: bound `{s}`: only `2^N - 1` is understood"),
            None => (p.trim(), false),
        };
        let p: u32 = p
            .parse()
            .unwrap_or_else(|_| panic!("{at}: bound `{s}`: bad exponent"));
        assert!(p < 63, "{at}: bound `{s}` is out of TOML's integers");
        Some((1i64 << p) - i64::from(minus_one))
    } else {
        s.parse::<i64>().ok()
    };
    match int {
        Some(v) if !exclusive => Bound::Int(v),
        Some(v) => Bound::Real {
            v: v as f64,
            exclusive,
        },
        None => Bound::Real {
            v: s.parse()
                .unwrap_or_else(|_| panic!("{at}: bound `{s}` is not a number")),
            exclusive,
        },
    }
}

/// A `default` cell as a TOML value (`none`: unset).
fn default_value(s: &str, at: &str) -> Option<Value> {
    if s == "none" {
        return None;
    }
    let t: Table = format!("v = {s}")
        .parse()
        .unwrap_or_else(|e| panic!("{at}: default `{s}` is not a TOML value: {e}"));
    t.get("v").cloned()
}

/// The bytes as `netsift run` prints them.
use measure::report::human_bytes;

fn entry(name: &str, at: &str) -> &'static Entry {
    catalog::ALL
        .iter()
        .copied()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("{at}: no algorithm `{name}` in catalog::ALL"))
}

// ---------------------------------------------------------------------------------------------
// (a) every parameter documented, with its real default.

#[test]
fn every_parameter_is_documented_with_its_default() {
    let rows = rows(Kind::Algorithms);
    let mut documented: BTreeSet<(String, String)> = BTreeSet::new();
    let mut seen_keys: BTreeSet<(String, String, usize)> = BTreeSet::new();
    for r in &rows {
        let at = r.at();
        let (algo, param) = (r.get("algorithm"), r.get("parameter"));
        let e = entry(algo, &at);
        assert!(
            seen_keys.insert((algo.into(), param.into(), r.key())),
            "{at}: {algo}.{param} at key {} has two rows",
            r.key()
        );
        documented.insert((algo.into(), param.into()));
        let defaults = (e.defaults)();
        match (default_value(r.get("default"), &at), defaults.get(param)) {
            (Some(doc), Some(real)) => assert_eq!(
                &doc, real,
                "{at}: {algo}.{param}: documented default {doc}, the code's is {real}"
            ),
            (None, Some(real)) => {
                panic!("{at}: {algo}.{param}: documented as unset, the code's default is {real}")
            }
            (Some(doc), None) => panic!(
                "{at}: {algo}.{param}: documented default {doc}, but it is not among the \
                 defaults {defaults}"
            ),
            // An optional parameter: it must exist, i.e. setting it to its minimum is accepted
            // (unknown fields are refused).
            (None, None) => {
                let min = bound(r.get("min"), &at);
                let v = match min {
                    Bound::Int(v) => Value::Integer(v),
                    _ => panic!("{at}: an unset parameter needs an integer min to be checked"),
                };
                let mut p = defaults.clone();
                p.insert(param.into(), v);
                if let Err(err) = planned(e, &p, r.key()) {
                    panic!("{at}: {algo}.{param} = its min is refused: {err}");
                }
            }
        }
    }
    for e in catalog::ALL {
        for p in (e.defaults)().keys() {
            assert!(
                documented.contains(&(e.name.to_string(), p.clone())),
                "{DOC_NAME}: {}.{p} (default {}) has no row",
                e.name,
                (e.defaults)()[p]
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// (b) each documented bound is the validator's.

/// `defaults` with `param` set to `v` (for a list parameter: every element).
fn with(defaults: &Table, param: &str, v: Value) -> Table {
    let mut p = defaults.clone();
    let v = match defaults.get(param) {
        Some(Value::Array(a)) => Value::Array(vec![v; a.len()]),
        _ => v,
    };
    p.insert(param.into(), v);
    p
}

/// Check `accepted` is accepted and every value of `refused` refused, by `memory` and, when the
/// accepted state is small, by `build` too. Returns the accepted value's memory.
fn check_bound(r: &Row, e: &Entry, accepted: Value, refused: &[Value]) -> u64 {
    let (at, param, key) = (r.at(), r.get("parameter"), r.key());
    let defaults = (e.defaults)();
    let ok = with(&defaults, param, accepted.clone());
    let bytes = planned(e, &ok, key).unwrap_or_else(|err| {
        panic!(
            "{at}: {}.{param} = {accepted} (documented bound) at key {key} is refused: {err}",
            e.name
        )
    });
    let small = bytes <= BUILD_LIMIT;
    if small {
        let built = e.build(&ok, &ctx(key)).unwrap_or_else(|err| {
            panic!(
                "{at}: {}.{param} = {accepted}: memory accepts it, build refuses: {err}",
                e.name
            )
        });
        assert!(
            built.memory_bytes() as u64 <= bytes,
            "{at}: {}.{param} = {accepted}: built {} bytes, memory said {bytes}",
            e.name,
            built.memory_bytes()
        );
    }
    for v in refused {
        let bad = with(&defaults, param, v.clone());
        assert!(
            planned(e, &bad, key).is_err(),
            "{at}: {}.{param} = {v} at key {key} is accepted, beyond the documented bound {accepted}",
            e.name
        );
        if small {
            assert!(
                e.build(&bad, &ctx(key)).is_err(),
                "{at}: {}.{param} = {v}: memory refuses it, build accepts it",
                e.name
            );
        }
    }
    bytes
}

#[derive(Clone, Copy, PartialEq)]
enum Side {
    Min,
    Max,
}

/// The values to check for one bound: the accepted one and those refused beyond it.
fn probes(b: Bound, side: Side, pow2: bool, at: &str) -> Option<(Value, Vec<Value>)> {
    let out = |x: i64| if side == Side::Min { x - 1 } else { x + 1 };
    match b {
        Bound::None => None,
        Bound::Int(v) => {
            let mut refused = vec![Value::Integer(out(v))];
            if pow2 {
                assert!(
                    v > 0 && (v as u64).is_power_of_two(),
                    "{at}: bound {v} of a power-of-two parameter is not one"
                );
                let next = if side == Side::Min { v / 2 } else { v * 2 };
                if next != out(v) && next > 0 {
                    refused.push(Value::Integer(next));
                }
            }
            Some((Value::Integer(v), refused))
        }
        Bound::Real { v, exclusive } => {
            let (inward, outward, far) = if side == Side::Min {
                (v.next_up(), v.next_down(), v - 1.0)
            } else {
                (v.next_down(), v.next_up(), v + 1.0)
            };
            Some(if exclusive {
                (
                    Value::Float(inward),
                    vec![Value::Float(v), Value::Float(far)],
                )
            } else {
                (
                    Value::Float(v),
                    vec![Value::Float(outward), Value::Float(far)],
                )
            })
        }
    }
}

#[test]
fn every_documented_bound_is_the_validators() {
    // Wrong memory figures are listed together (the bounds themselves fail at once).
    let mut wrong = vec![];
    for r in rows(Kind::Algorithms) {
        let at = r.at();
        let e = entry(r.get("algorithm"), &at);
        let pow2 = r.get("notes").contains("power of two");
        // A real parameter's bounds are real, even written as integers (`0`, `1`).
        let real = matches!(
            (e.defaults)().get(r.get("parameter")),
            Some(Value::Float(_))
        );
        let as_real = |b: Bound| match b {
            Bound::Int(v) if real => Bound::Real {
                v: v as f64,
                exclusive: false,
            },
            b => b,
        };
        let (min, max) = (
            as_real(bound(r.get("min"), &at)),
            as_real(bound(r.get("max"), &at)),
        );
        if let Some((ok, bad)) = probes(min, Side::Min, pow2, &at) {
            check_bound(&r, e, ok, &bad);
        }
        let at_max =
            probes(max, Side::Max, pow2, &at).map(|(ok, bad)| check_bound(&r, e, ok, &bad));
        let real = at_max.map_or("-".to_string(), human_bytes);
        if r.get("at max") != real {
            wrong.push(format!(
                "{at}: {}.{} at its max: `{}` documented, {real} ({at_max:?} bytes) real",
                e.name,
                r.get("parameter"),
                r.get("at max"),
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// (c) the default memory.

#[test]
fn default_memory_is_the_entrys() {
    let mut covered: BTreeSet<(String, usize)> = BTreeSet::new();
    let mut wrong = vec![];
    for r in rows(Kind::Memory) {
        let at = r.at();
        let (name, key) = (r.get("algorithm"), r.key());
        let bytes: u64 = r
            .get("bytes")
            .parse()
            .unwrap_or_else(|_| panic!("{at}: bytes `{}` is not a number", r.get("bytes")));
        let real = if name == "agg_evict" {
            aggevict::Aggregator::memory_for(&aggevict::AggConfig::default(), key) as u64
        } else {
            let e = entry(name, &at);
            planned(e, &(e.defaults)(), key)
                .unwrap_or_else(|err| panic!("{at}: {name}'s defaults refuse key {key}: {err}"))
        };
        if bytes != real || r.get("about") != human_bytes(real) {
            wrong.push(format!(
                "{at}: {name} at key {key}: `{bytes}`, `{}` documented, {real} ({}) real",
                r.get("about"),
                human_bytes(real)
            ));
        }
        assert!(covered.insert((name.into(), key)), "{at}: two rows");
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    for e in catalog::ALL {
        assert!(
            covered.iter().any(|(n, _)| n == e.name),
            "{DOC_NAME}: no default-memory row for {}",
            e.name
        );
    }
    for k in [4, 13] {
        assert!(
            covered.contains(&("agg_evict".into(), k)),
            "agg_evict at key {k}"
        );
    }
}

/// The per-host and per-flow growth of the two structures whose memory is counted at
/// construction (0 B with their defaults) is the code's.
#[test]
fn growth_figures_are_the_codes() {
    let notes = |algo: &str, param: &str| -> String {
        rows(Kind::Algorithms)
            .into_iter()
            .find(|r| r.get("algorithm") == algo && r.get("parameter") == param)
            .unwrap_or_else(|| panic!("{DOC_NAME}: no row {algo}.{param}"))
            .get("notes")
            .to_string()
    };
    let per_host = distinct::bloom_spreader::BloomSpreaderConfig::default().bytes_per_host();
    let want = format!("each host seen takes {per_host} B at the default bits");
    assert!(
        notes("bloom_spreader", "bits").contains(&want),
        "bloom_spreader: {want}"
    );
    let per_flow = table::ewma_change::BYTES_PER_FLOW;
    let want = format!("about {per_flow} B per flow");
    assert!(
        notes("ewma_change", "forget_below").contains(&want),
        "ewma_change: {want}"
    );
}

// ---------------------------------------------------------------------------------------------
// The Agg-Evict table.

/// `AggConfig`'s defaults with `param` set to `v`, parsed as a run config's `[agg_evict]`.
fn agg_config(param: &str, v: Value) -> Result<aggevict::AggConfig, toml::de::Error> {
    let mut t = Table::try_from(aggevict::AggConfig::default()).unwrap();
    t.insert(param.into(), v);
    Value::Table(t).try_into()
}

/// Build an aggregator for 13-byte keys, if it is small; `None` when it is too large to build.
fn agg_build(cfg: &aggevict::AggConfig) -> Option<Result<(), aggevict::AggError>> {
    let small = aggevict::Aggregator::memory_for(cfg, 13) as u64 <= BUILD_LIMIT;
    small.then(|| aggevict::Aggregator::new(cfg, 13).map(|_| ()))
}

#[test]
fn agg_evict_table_is_the_aggregators() {
    let defaults = Table::try_from(aggevict::AggConfig::default()).unwrap();
    let mut documented = BTreeSet::new();
    for r in rows(Kind::AggEvict) {
        let at = r.at();
        let param = r.get("agg_evict parameter").to_string();
        assert!(documented.insert(param.clone()), "{at}: `{param}` twice");
        let real = defaults
            .get(&param)
            .unwrap_or_else(|| panic!("{at}: AggConfig has no `{param}`"));
        let doc = default_value(r.get("default"), &at)
            .unwrap_or_else(|| panic!("{at}: every agg_evict parameter has a default"));
        assert_eq!(&doc, real, "{at}: default of `{param}`");
        if let Value::String(_) = real {
            // An enum: the values named in the notes parse, the default among them, and
            // nothing else does.
            let values: Vec<&str> = r.raw("notes").split('`').skip(1).step_by(2).collect();
            assert!(
                values.iter().any(|v| Value::String(v.to_string()) == *real),
                "{at}: the notes name the values of `{param}`, its default among them"
            );
            for v in values {
                if let Err(err) = agg_config(&param, Value::String(v.into())) {
                    panic!("{at}: {param} = \"{v}\" is refused: {err}");
                }
            }
            assert!(agg_config(&param, Value::String("nonsense".into())).is_err());
            continue;
        }
        for (side, b) in [
            (Side::Min, bound(r.get("min"), &at)),
            (Side::Max, bound(r.get("max"), &at)),
        ] {
            let Some((Value::Integer(v), refused)) = probes(b, side, false, &at) else {
                panic!("{at}: `{param}` needs integer bounds");
            };
            let ok = agg_config(&param, Value::Integer(v))
                .unwrap_or_else(|e| panic!("{at}: {param} = {v} does not parse: {e}"));
            match agg_build(&ok) {
                Some(built) => assert!(built.is_ok(), "{at}: {param} = {v} is refused: {built:?}"),
                // Too large to build: the bound must be the constant the validator checks.
                None => {
                    let limit = match param.as_str() {
                        "arrays" => aggevict::MAX_ARRAYS,
                        "evict_batch" => aggevict::MAX_EVICT_BATCH,
                        _ => panic!("{at}: no known limit for `{param}`"),
                    };
                    assert_eq!(v, limit as i64, "{at}: the validator's limit of `{param}`");
                }
            }
            for bad in refused {
                let Ok(cfg) = agg_config(&param, bad.clone()) else {
                    continue; // refused by parsing (a negative count)
                };
                // Past a limit too large to build, the constant check above stands for it.
                if let Some(built) = agg_build(&cfg) {
                    assert!(built.is_err(), "{at}: {param} = {bad} is accepted");
                }
            }
        }
    }
    let fields: BTreeSet<String> = defaults.keys().cloned().collect();
    assert_eq!(documented, fields, "{DOC_NAME}: the agg_evict parameters");
}
