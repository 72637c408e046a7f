use std::path::{Path, PathBuf};

use super::*;

/// A context every entry can build in: the spreader structures split a `pair` key in halves.
fn ctx_for(e: &Entry) -> BuildCtx {
    let pair = e.answers(Task::Superspreaders);
    BuildCtx {
        key_len: if pair { 8 } else { 4 },
        ..BuildCtx::default()
    }
}

fn table(s: &str) -> toml::Table {
    s.parse().unwrap()
}

#[test]
fn names_are_unique_and_entries_build_what_they_say() {
    let mut seen = std::collections::BTreeSet::new();
    for e in ALL {
        assert!(seen.insert(e.name), "{} listed twice", e.name);
        assert!(!e.tasks.is_empty(), "{}", e.name);
        let a = e.build(&toml::Table::new(), &ctx_for(e)).unwrap();
        assert_eq!(a.name(), e.name);
        // A built instance answers a subset of its entry's tasks; the defaults answer all of
        // them, except that a spreader structure answers the one side it was built for.
        let mut said: Vec<Task> = a.tasks().to_vec();
        if said.contains(&Task::Superspreaders) || said.contains(&Task::Ddos) {
            said.retain(|t| !matches!(t, Task::Superspreaders | Task::Ddos));
            said.extend([Task::Superspreaders, Task::Ddos]);
        }
        said.sort();
        let mut listed = e.tasks.to_vec();
        listed.sort();
        assert_eq!(said, listed, "{}", e.name);
    }
}

/// An instance's `tasks()` lists exactly the tasks whose queries answer (`Some`), for every
/// entry with its defaults and with its flow-size-only narrowing.
#[test]
fn tasks_are_exactly_the_queries_that_answer() {
    for e in ALL {
        let mut configs = vec![toml::Table::new()];
        if !e.flow_size_only.is_empty() {
            configs.push(e.flow_size_only_params());
        }
        for p in configs {
            let ctx = ctx_for(e);
            let a = e.build(&p, &ctx).unwrap();
            let k = key::FlowKey::from_bytes(&vec![1u8; ctx.key_len]).unwrap();
            let answered: Vec<Task> = Task::ALL
                .into_iter()
                .filter(|t| match t {
                    Task::HeavyHitters => a.heavy_hitters(1).is_some(),
                    Task::HeavyChangers => a.heavy_changers(a.as_ref(), 1).is_some(),
                    Task::Superspreaders | Task::Ddos => a.spreaders(1).is_some(),
                    Task::Cardinality => a.cardinality().is_some(),
                    Task::FlowSizeDistribution => a.flow_size_distribution().is_some(),
                    Task::Entropy => a.entropy().is_some(),
                    Task::TopK => a.top_k(1).is_some(),
                    Task::FlowSize => a.flow_size(&k).is_some(),
                })
                .filter(|t| {
                    a.tasks().contains(t) || !matches!(t, Task::Superspreaders | Task::Ddos)
                })
                .collect();
            let mut listed = a.tasks().to_vec();
            listed.sort();
            assert_eq!(answered, listed, "{} {p}", e.name);
        }
    }
}

#[test]
fn defaults_are_the_tables_build_reads() {
    for e in ALL {
        let d = (e.defaults)();
        assert!(!d.is_empty(), "{}: no default parameters", e.name);
        let ctx = ctx_for(e);
        let a = e.build(&d, &ctx).unwrap();
        let b = e.build(&toml::Table::new(), &ctx).unwrap();
        assert_eq!(a.memory_bytes(), b.memory_bytes(), "{}", e.name);
    }
    // Two of the papers' sizes, read back (Agg-Evict 4.1).
    assert_eq!(
        (table::flow_radar::ENTRY.defaults)()["cells"].as_integer(),
        Some(262_144)
    );
    assert_eq!(
        (table::space_saving::ENTRY.defaults)()["k"].as_integer(),
        Some(128)
    );
}

#[test]
fn flow_size_only_rules_narrow_to_flow_size() {
    for e in ALL.iter().filter(|e| !e.flow_size_only.is_empty()) {
        assert!(e.answers(Task::FlowSize), "{}", e.name);
        let p: toml::Table = e
            .flow_size_only
            .parse()
            .expect("the rule is a TOML table body");
        assert!(!p.is_empty(), "{}", e.name);
        let a = e.build(&p, &ctx_for(e)).unwrap();
        assert_eq!(a.tasks(), &[Task::FlowSize], "{}", e.name);
    }
}

#[test]
fn unknown_and_invalid_fields_are_errors_naming_the_field() {
    for e in ALL {
        let err = e
            .build(&table("bogus_field = 1"), &ctx_for(e))
            .err()
            .unwrap_or_else(|| panic!("{} accepted an unknown field", e.name));
        assert!(err.to_string().contains("bogus_field"), "{}: {err}", e.name);
    }
    let cases = [
        ("fm", "bitmaps = 0", "bitmaps"),
        ("linear_counting", "rows = 0", "rows"),
        ("linear_counting", "bits = 0", "bits"),
        ("hyperloglog", "precision = 3", "precision"),
        ("hyperloglog", "precision = 19", "precision"),
        ("kmin", "k = 2", "k"),
        ("bloom_spreader", "bits = 0", "bits"),
        ("bloom_spreader", "hashes = 0", "hashes"),
        ("space_saving", "k = 0", "k"),
        ("rev_sketch", "width = 1000", "width"),
    ];
    for (name, params, field) in cases {
        let e = get(name).unwrap();
        match e.build(&table(params), &ctx_for(e)) {
            Err(ConfigError::Invalid { field: f, .. }) => assert_eq!(f, field, "{name}"),
            Err(other) => panic!("{name} {params}: {other}"),
            Ok(_) => panic!("{name} accepted {params}"),
        }
    }
    // The key-decoding sketches name the key length they cannot hold.
    let ctx = BuildCtx {
        key_len: 13,
        ..BuildCtx::default()
    };
    let err = build("rev_sketch", &toml::Table::new(), &ctx)
        .err()
        .unwrap();
    assert!(err.to_string().contains("key_len"), "{err}");
}

#[test]
fn errors_name_algorithm_and_task() {
    let e = check("hyperloglog", Task::HeavyHitters)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("hyperloglog") && e.contains("heavy_hitters") && e.contains("count_min"),
        "{e}"
    );
    let e = check("countmin", Task::HeavyHitters)
        .unwrap_err()
        .to_string();
    assert!(e.contains("countmin") && e.contains("count_min"), "{e}");
    for t in Task::ALL {
        check(default_for(t).name, t).unwrap();
    }
}

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The non-test Rust sources under `dir` (everything before a file's `#[cfg(test)]`).
fn sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for ent in std::fs::read_dir(&d).unwrap() {
            let p = ent.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("tests.rs") {
                let s = std::fs::read_to_string(&p).unwrap();
                let s = s.split("#[cfg(test)]").next().unwrap_or("").to_string();
                out.push((p, s));
            }
        }
    }
    out
}

/// The recipe "one module with its `ENTRY` + one line in `ALL`": every entry declared in the
/// algorithm crates is listed.
#[test]
fn every_declared_entry_is_listed() {
    let mut declared = 0;
    for krate in ["sketch", "table", "distinct", "reversible"] {
        for (_, s) in sources(&crates_dir().join(krate).join("src")) {
            declared += s
                .lines()
                .filter(|l| l.starts_with("pub const ENTRY") && l.contains("algo::Entry"))
                .count();
        }
    }
    assert_eq!(
        declared,
        ALL.len(),
        "an `ENTRY` is declared but not listed in `ALL`"
    );
}

/// Nothing above the catalog decides by an algorithm's name: the runner, the lab and the CLI
/// read the entries' facts instead.
#[test]
fn nothing_matches_on_algorithm_names() {
    let mut found = vec![];
    for krate in [
        "measure",
        "lab",
        "cli",
        "sketch",
        "table",
        "distinct",
        "reversible",
    ] {
        for (path, s) in sources(&crates_dir().join(krate).join("src")) {
            for name in names() {
                let q = format!("\"{name}\"");
                for pat in [
                    format!("{q} =>"),
                    format!("{q} |"),
                    format!("| {q}"),
                    format!("== {q}"),
                    format!("!= {q}"),
                    format!("{q} =="),
                    format!("contains(&{q})"),
                ] {
                    if s.contains(&pat) {
                        found.push(format!("{}: {pat}", path.display()));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "name matches outside the catalog: {found:#?}"
    );
}
