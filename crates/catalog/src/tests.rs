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
    // Two sizes, read back: FlowRadar's (within 4 MiB with 5-tuple keys) and Space-Saving's,
    // sized for the default heavy-hitter threshold (issue 12).
    assert_eq!(
        (table::flow_radar::ENTRY.defaults)()["cells"].as_integer(),
        Some(90_112)
    );
    assert_eq!(
        (table::space_saving::ENTRY.defaults)()["k"].as_integer(),
        Some(8192)
    );
}

/// The contexts `memory` is checked in: keys of 4, 13 and 37 bytes (8 and 32-byte pairs for the
/// spreader structures), both sides.
fn memory_ctxs(e: &Entry) -> Vec<BuildCtx> {
    let lens: &[usize] = if e.answers(Task::Superspreaders) {
        &[8, 32]
    } else {
        &[4, 13, 37]
    };
    lens.iter()
        .flat_map(|&key_len| {
            [algo::Side::Src, algo::Side::Dst].map(|side| BuildCtx {
                key_len,
                side,
                ..BuildCtx::default()
            })
        })
        .collect()
}

/// `memory` of a configuration equals `memory_bytes` of the instance built with it, and refuses
/// (naming the same field) what `build` refuses.
fn check_memory(e: &Entry, p: &toml::Table, ctx: &BuildCtx) {
    let what = format!("{} {p} key_len {}", e.name, ctx.key_len);
    match (e.build(p, ctx), e.memory(p, ctx)) {
        (Ok(a), Ok(m)) => assert_eq!(m, a.memory_bytes() as u64, "{what}"),
        (Err(b), Err(m)) => assert_eq!(b.to_string(), m.to_string(), "{what}"),
        (Ok(_), Err(m)) => panic!("{what}: builds, but memory says {m}"),
        (Err(b), Ok(m)) => panic!("{what}: memory says {m} bytes, but build says {b}"),
    }
}

/// Every entry's `memory` agrees with its built defaults (exact for every entry: the ones that
/// grow with the keys report their construction-time or at-capacity bytes, which is what a
/// freshly built instance reports) at every key length, and refuses what `build` refuses.
#[test]
fn memory_of_the_defaults_is_the_built_instances() {
    for e in ALL {
        for ctx in memory_ctxs(e) {
            check_memory(e, &toml::Table::new(), &ctx);
            check_memory(e, &(e.defaults)(), &ctx);
            check_memory(e, &e.flow_size_only_params(), &ctx);
        }
    }
}

/// Non-default sizes agree too (odd sizes, rounding: cuckoo4's whole buckets, FlowRadar's filter
/// rounded to 64 bits, hashbrown's index capacity for small and large k).
#[test]
fn memory_of_other_sizes_is_the_built_instances() {
    let cases = [
        ("count_min", "rows = 3\nwidth = 1000\ncandidates = 5"),
        ("count_sketch", "rows = 5\nwidth = 777\ncandidates = 0"),
        ("count_array", "width = 12345\ncandidates = 100"),
        ("univmon", "widths = [1000, 300, 7]\nrows = 3\nheap = 17"),
        ("mrac", "arrays = 3\nwidth = 999"),
        ("linear_hash", "capacity = 1001"),
        ("cuckoo1", "capacity = 1001"),
        ("cuckoo4", "capacity = 1001"),
        ("heap", "k = 1"),
        ("heap", "k = 5"),
        ("space_saving", "k = 1000"),
        ("misra_gries", "k = 100000"),
        ("flow_radar", "cells = 999\ncell_hashes = 3"),
        ("flow_radar", "bf_bits = 1000"),
        ("rev_sketch", "verify_rows = 0"),
        ("deltoid", "rows = 2\ngroups = 300"),
        ("two_level", "bitmaps = 3\nbitmap_bits = 100\ncm_width = 77"),
        ("fm", "bitmaps = 33"),
        ("kmin", "k = 5"),
        ("linear_counting", "rows = 3\nbits = 1000"),
        ("hyperloglog", "precision = 4"),
        ("bloom_spreader", "bits = 100"),
        ("ewma_change", "alpha = 0.25"),
        (
            "instameasure",
            "words = 1000\nwsaf_entries = 1024\nprobe_limit = 3",
        ),
        ("rcc", "words = 77\nwsaf_entries = 16"),
    ];
    for (name, params) in cases {
        let e = get(name).unwrap();
        for ctx in memory_ctxs(e) {
            check_memory(e, &table(params), &ctx);
        }
    }
}

/// Accepted sizes that would abort the process if allocated: `memory` computes their bytes
/// without allocating (only `memory` is called here, never `build`).
#[test]
fn memory_of_huge_sizes_is_computed_without_allocating() {
    const GIB: u64 = 1 << 30;
    let cases = [
        ("linear_hash", "capacity = 4294967296", 4),
        ("linear_hash", "capacity = 4294967296", 37),
        ("cuckoo1", "capacity = 4294967296", 13),
        ("cuckoo4", "capacity = 4294967296", 13),
        ("flow_radar", "bf_bits = 1099511627776", 4),
        (
            "flow_radar",
            "cells = 4294967296\nbf_bits = 1099511627776",
            37,
        ),
    ];
    for (name, params, key_len) in cases {
        let ctx = BuildCtx {
            key_len,
            ..BuildCtx::default()
        };
        let m = get(name).unwrap().memory(&table(params), &ctx).unwrap();
        assert!(m > 50 * GIB, "{name} {params}: {m} bytes");
    }
    // linear_hash: 2^32 slots of 8 + 8 bytes (4-byte keys take one word), plus 4 bytes per
    // flow accepted (max_load 0.9) for the list of filled slots.
    let m = get("linear_hash")
        .unwrap()
        .memory(&table("capacity = 4294967296"), &BuildCtx::default())
        .unwrap();
    assert_eq!(
        m,
        (1 << 32) * 16 + ((0.9 * 4294967296f64).floor() as u64) * 4
    );
    // FlowRadar: a 2^40-bit filter is 2^37 bytes, plus the default 90,112 cells of 3 words,
    // plus their written-block maps (one bit per 64 bytes: 1/512 of each).
    let m = get("flow_radar")
        .unwrap()
        .memory(&table("bf_bits = 1099511627776"), &BuildCtx::default())
        .unwrap();
    assert_eq!(
        m,
        (1 << 37) + 90_112 * 24 + (1 << 37) / 512 + 90_112 * 24 / 512
    );
    // linear_counting's largest: 64 rows of 2^32 bits, 32 GiB.
    let m = get("linear_counting")
        .unwrap()
        .memory(&table("rows = 64\nbits = 4294967296"), &BuildCtx::default())
        .unwrap();
    assert_eq!(m, 32 * GIB);
    // One past the bounds is refused, naming the field.
    for (name, params, field) in [
        ("linear_hash", "capacity = 4294967297", "capacity"),
        ("cuckoo1", "capacity = 4294967297", "capacity"),
        ("flow_radar", "bf_bits = 1099511627777", "bf_bits"),
        ("flow_radar", "cells = 4294967300", "cells"),
    ] {
        match get(name)
            .unwrap()
            .memory(&table(params), &BuildCtx::default())
        {
            Err(ConfigError::Invalid { field: f, .. }) => assert_eq!(f, field, "{name}"),
            other => panic!("{name} {params}: {other:?}"),
        }
    }
    // Unknown fields are refused as `build` refuses them.
    for e in ALL {
        let err = e
            .memory(&table("bogus_field = 1"), &ctx_for(e))
            .unwrap_err();
        assert!(err.to_string().contains("bogus_field"), "{}: {err}", e.name);
    }
    // The overflow checks name the field and the bytes.
    let err = Entry::product("linear_hash", "capacity", &[1 << 40, 1 << 30, 24]).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("capacity") && msg.contains("overflow"),
        "{msg}"
    );
    assert!(matches!(
        err,
        ConfigError::Invalid {
            field: "capacity",
            ..
        }
    ));
    assert!(Entry::sum("flow_radar", "bf_bits", &[u64::MAX, 1]).is_err());
    assert_eq!(Entry::product("x", "y", &[3, 5, 7]).unwrap(), 105);
}

/// The structures whose state grows with the keys: their `memory` is the state at construction
/// or at capacity, and a filled instance stays within what their entry documents.
#[test]
fn memory_of_growing_structures_is_bounded_as_documented() {
    let keys: Vec<key::FlowKey> = (0..5000u32)
        .map(|i| key::FlowKey::from_bytes(&(u64::from(i) * 0x9e37_79b9).to_be_bytes()).unwrap())
        .collect();
    let ones = vec![1u64; keys.len()];
    let ctx = BuildCtx {
        key_len: 8,
        ..BuildCtx::default()
    };
    // At capacity: a filled heap-based summary reports what `memory` said.
    for name in ["heap", "space_saving", "misra_gries", "kmin"] {
        let e = get(name).unwrap();
        let m = e.memory(&toml::Table::new(), &ctx).unwrap();
        let mut a = e.build(&toml::Table::new(), &ctx).unwrap();
        a.update_batch(&keys, &ones);
        assert!(
            a.memory_bytes() as u64 <= 2 * m,
            "{name}: {} > 2 x {m}",
            a.memory_bytes()
        );
    }
    // bloom_spreader with `max_hosts`: the bytes at that many hosts, reached by a full instance.
    let e = get("bloom_spreader").unwrap();
    let p = table("max_hosts = 100");
    let m = e.memory(&p, &ctx).unwrap();
    let mut a = e.build(&p, &ctx).unwrap();
    a.update_batch(&keys, &ones);
    assert!(a.memory_bytes() as u64 <= m, "{} > {m}", a.memory_bytes());
    assert!(
        a.memory_bytes() as u64 * 10 >= m * 9,
        "{} << {m}",
        a.memory_bytes()
    );
    // ewma_change: nothing at construction, at most BYTES_PER_FLOW per flow held.
    let e = get("ewma_change").unwrap();
    assert_eq!(e.memory(&toml::Table::new(), &ctx).unwrap(), 0);
    let mut a = e.build(&toml::Table::new(), &ctx).unwrap();
    a.update_batch(&keys, &ones);
    let per_flow = table::ewma_change::BYTES_PER_FLOW;
    assert!(a.memory_bytes() as u64 <= keys.len() as u64 * per_flow);
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
                // The text before the unit-test module (a `#[cfg(test)]` item elsewhere, such
                // as a fast path's reference twin, stays).
                let s = s
                    .split("#[cfg(test)]\nmod ")
                    .next()
                    .unwrap_or("")
                    .to_string();
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
    for krate in ["sketch", "table", "distinct", "reversible", "insta"] {
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
        "insta",
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

/// Every preset's parameters build for its algorithm (at the key length the algorithm's paper
/// used: source addresses, or pairs for the spreader structures); a measure's own parameters
/// win over the preset's; an unknown preset lists the presets.
#[test]
fn presets_build_and_yield_to_explicit_parameters() {
    for (preset, entries) in crate::presets::PRESETS {
        for (algo, _) in *entries {
            let e = get(algo).unwrap_or_else(|| panic!("{preset}: unknown algorithm {algo}"));
            let p = crate::presets::params(preset, algo).unwrap();
            assert!(!p.is_empty());
            let key_len = if e.answers(Task::Superspreaders) {
                8
            } else {
                4
            };
            let ctx = BuildCtx {
                key_len,
                ..BuildCtx::default()
            };
            let built = e.build(&p, &ctx);
            assert!(built.is_ok(), "{preset} {algo}: {:?}", built.err());
        }
    }
    let mine: toml::Table = "k = 64".parse().unwrap();
    let p = crate::presets::apply("agg-evict", "space_saving", &mine).unwrap();
    assert_eq!(p["k"].as_integer(), Some(64));
    let p = crate::presets::apply("agg-evict", "space_saving", &toml::Table::new()).unwrap();
    assert_eq!(p["k"].as_integer(), Some(128));
    assert!(crate::presets::params("agg-evict", "hyperloglog")
        .unwrap()
        .is_empty());
    let err = crate::presets::params("nope", "fm")
        .unwrap_err()
        .to_string();
    assert!(err.contains("agg-evict, sketchvisor, reeval"), "{err}");
}

/// Every preset selects measurements (issue 34: `--preset instameasure` and `reeval` changed
/// nothing on the default tasks), each of a known algorithm that answers its task, and every
/// preset with measurements has parameters (and the other way round).
#[test]
fn every_preset_selects_its_papers_measurements() {
    for name in crate::presets::names() {
        let ms = crate::presets::measures(name);
        assert!(!ms.is_empty(), "{name}: no measurements");
        for (task, algos) in ms {
            assert!(!algos.is_empty(), "{name} {}", task.name());
            for a in *algos {
                assert!(
                    crate::check(a, *task).is_ok(),
                    "{name}: {a} cannot answer {}",
                    task.name()
                );
            }
        }
    }
    let with_measures: Vec<&str> = crate::presets::MEASURES.iter().map(|p| p.0).collect();
    assert_eq!(with_measures, crate::presets::names());
    assert!(crate::presets::measures("nope").is_empty());
}

/// The `agg-evict` preset sizes the structures whose cells are wider than the artifact's at the
/// artifact's memory (issue 14), so speed is compared at equal memory: FlowRadar 4 MiB (262,144
/// cells of 12 B and a one-third filter), RevSketch 4 x 65536 u32 counters with 4 updates a
/// packet (no verification Count-Min), TwoLevel 4 x 65536 + 4 x 4096 buckets of 12 B (3.3 MB).
/// Built instances, so the figure is what they allocate; within 5% (our inverse tables, memo
/// and written-block maps are not in the artifact's figure).
#[test]
fn agg_evict_preset_is_at_the_artifacts_memory() {
    for (algo, key_len, artifact) in [
        ("flow_radar", 4, 4u64 << 20),
        ("rev_sketch", 4, 1 << 20),
        ("two_level", 8, (4 * 65536 + 4 * 4096) * 12),
    ] {
        let p = crate::presets::params("agg-evict", algo).unwrap();
        let ctx = BuildCtx {
            key_len,
            ..BuildCtx::default()
        };
        let a = get(algo).unwrap().build(&p, &ctx).unwrap();
        let m = a.memory_bytes() as f64;
        let r = m / artifact as f64;
        assert!(
            (0.97..1.05).contains(&r),
            "{algo}: {m} B against {artifact} B"
        );
    }
}

/// Every algorithm a preset configures has its update cost in that preset (`presets::COSTS`),
/// and only those: the adaptive front of a run built with the preset weighs what it runs. An
/// algorithm the preset leaves at its defaults costs its entry's figure.
#[test]
fn preset_costs_cover_the_presets_algorithms() {
    for (preset, costs) in crate::presets::COSTS {
        let mut configured: Vec<&str> = crate::presets::PRESETS
            .iter()
            .find(|p| p.0 == *preset)
            .unwrap_or_else(|| panic!("costs of an unknown preset {preset}"))
            .1
            .iter()
            .map(|e| e.0)
            .collect();
        let mut priced: Vec<&str> = costs.iter().map(|e| e.0).collect();
        configured.sort_unstable();
        priced.sort_unstable();
        assert_eq!(priced, configured, "{preset}");
        for (algo, c) in *costs {
            assert!(
                c.u32_ns > 0.0 && c.wide_ns > 0.0 && c.behind > 0.0,
                "{preset} {algo}"
            );
            assert_eq!(crate::presets::cost(preset, algo), Some(*c));
        }
    }
    let rev = crate::presets::cost("agg-evict", "rev_sketch").unwrap();
    assert!(rev.u32_ns < get("rev_sketch").unwrap().cost.u32_ns);
    assert_eq!(
        crate::presets::cost("agg-evict", "hyperloglog"),
        Some(get("hyperloglog").unwrap().cost)
    );
    assert_eq!(crate::presets::cost("agg-evict", "nope"), None);
}

/// Issue 34.9: a misspelt algorithm or preset gets a "did you mean", a name far from every one
/// gets none, and the lists stay.
#[test]
fn unknown_names_suggest_the_closest() {
    let e = lookup("count_mn").unwrap_err().to_string();
    assert!(e.contains("did you mean `count_min`?"), "{e}");
    assert!(e.contains("known: ") && e.contains("count_sketch"), "{e}");
    let e = lookup("zzzzzz").unwrap_err().to_string();
    assert!(!e.contains("did you mean"), "{e}");
    let e = crate::presets::params("agg_evict", "count_min")
        .unwrap_err()
        .to_string();
    assert!(e.contains("did you mean `agg-evict`?"), "{e}");
    let e = "heavy_hiters"
        .parse::<algo::Task>()
        .unwrap_err()
        .to_string();
    assert!(e.contains("did you mean `heavy_hitters`?"), "{e}");
    assert!(e.contains("tasks: heavy_hitters, "), "{e}");
}
