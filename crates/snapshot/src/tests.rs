use std::path::PathBuf;

use algo::{Algorithm, BuildCtx, Entry, Task};
use key::FlowKey;
use testkit::{rank_u32, zipf_ranks};

use super::*;

/// A context every entry builds in (the spreader structures split a `pair` key in halves).
fn ctx_for(e: &Entry) -> BuildCtx {
    BuildCtx {
        key_len: if e.answers(Task::Superspreaders) {
            8
        } else {
            4
        },
        seed: 7,
        ..BuildCtx::default()
    }
}

/// A fixed Zipf stream of keys of the length `ctx` asks for.
fn stream(ctx: &BuildCtx, n: usize, seed: u64) -> Vec<FlowKey> {
    zipf_ranks(n, 2000, 1.0, seed)
        .into_iter()
        .map(|r| {
            if ctx.key_len == 8 {
                // A host talking to a few peers, so spreaders exist.
                FlowKey::from_u32_pair(rank_u32(r % 97), rank_u32(r))
            } else {
                FlowKey::from_u32(rank_u32(r))
            }
        })
        .collect()
}

/// The first line where two answer texts differ (short, for a failure message).
fn first_diff(a: &str, b: &str) -> Option<String> {
    a.lines()
        .zip(b.lines())
        .find(|(x, y)| x != y)
        .map(|(x, y)| format!("{:.300}\n  vs\n{:.300}", x, y))
}

/// Every answer of `a` (not its memory: a restored map may have another capacity) (sorted where the order is a map's), as text.
fn answers(a: &dyn Algorithm, prev: &dyn Algorithm, keys: &[FlowKey]) -> String {
    let sorted = |v: Option<Vec<algo::Estimate>>| {
        v.map(|mut v| {
            v.sort();
            v
        })
    };
    let sizes: Vec<Option<u64>> = keys.iter().take(200).map(|k| a.flow_size(k)).collect();
    format!(
        "hh {:?}\nhc {:?}\nsp {:?}\ncard {:?}\nfsd {:?}\nent {:?}\ntop {:?}\nsize {:?}",
        sorted(a.heavy_hitters(20)),
        sorted(a.heavy_changers(prev, 20)),
        sorted(a.spreaders(3)),
        a.cardinality(),
        a.flow_size_distribution(),
        a.entropy(),
        sorted(a.top_k(10)),
        sizes,
    )
}

#[test]
fn every_catalog_entry_round_trips() {
    for e in catalog::ALL {
        let ctx = ctx_for(e);
        let keys = stream(&ctx, 20_000, 3);
        let weights: Vec<u64> = keys
            .iter()
            .map(|k| 1 + (k.as_bytes()[0] as u64 % 3))
            .collect();
        let mut a = e.build(&toml::Table::new(), &ctx).unwrap();
        let prev = e.build(&toml::Table::new(), &ctx).unwrap();
        a.update_batch(&keys, &weights);
        let bytes = save_instance(a.as_ref()).unwrap_or_else(|m| panic!("{}: {m}", e.name));
        let mut b = (e.load)(&bytes).unwrap_or_else(|m| panic!("{}: {m}", e.name));
        assert_eq!(b.name(), e.name);
        let (x, y) = (
            answers(a.as_ref(), prev.as_ref(), &keys),
            answers(b.as_ref(), prev.as_ref(), &keys),
        );
        assert!(
            x == y,
            "{}: restored answers differ: {:?}",
            e.name,
            first_diff(&x, &y)
        );
        // The whole state came back (hash seeds, generators, candidate sets): the same further
        // updates give the same answers again.
        let more = stream(&ctx, 5_000, 4);
        let ones = vec![1; more.len()];
        a.update_batch(&more, &ones);
        b.update_batch(&more, &ones);
        let (x, y) = (
            answers(a.as_ref(), prev.as_ref(), &keys),
            answers(b.as_ref(), prev.as_ref(), &keys),
        );
        assert!(
            x == y,
            "{}: answers differ after updates: {:?}",
            e.name,
            first_diff(&x, &y)
        );
        // Another type's bytes, or a cut state, are an error, never a panic.
        assert!((e.load)(&bytes[..bytes.len() / 2]).is_err(), "{}", e.name);
    }
}

/// A small Count-Min snapshot (the golden file's content).
fn small(host: &str, seed: u64, width: usize) -> Snapshot {
    let entry = catalog::lookup("count_min").unwrap();
    let params: toml::Table = format!("rows = 2\nwidth = {width}\ncandidates = 4")
        .parse()
        .unwrap();
    let ctx = BuildCtx {
        seed,
        key_len: 4,
        ..BuildCtx::default()
    };
    let mut a = entry.build(&params, &ctx).unwrap();
    let keys = stream(&ctx, 1000, 5);
    let ones = vec![1; keys.len()];
    a.update_batch(&keys, &ones);
    let merge_params = format!(
        "key = \"src\"\nseed = {seed}\nweight = \"packets\"\n\n[[measure]]\ntask = \
         \"heavy_hitters\"\nalgo = \"count_min\"\n\n[measure.params]\n{params}"
    );
    Snapshot {
        host: host.into(),
        epoch: EpochSpan {
            index: 0,
            first_ns: 1_000,
            last_ns: 2_000,
            packets: 1000,
            bytes: 64_000,
            ..EpochSpan::default()
        },
        seed,
        kinds: vec!["src".into()],
        truth: true,
        params_hash: params_hash(&merge_params),
        config: merge_params.clone(),
        params: merge_params,
        instances: vec![InstanceState {
            algorithm: "count_min".into(),
            kind: "src".into(),
            side: "src".into(),
            params: params.to_string(),
            state: save_instance(a.as_ref()).unwrap(),
        }],
        fast: vec![FastPart {
            kind: "src".into(),
            summary: None,
            paths: visor::PathCounts {
                normal_packets: 1000,
                normal_bytes: 64_000,
                ..Default::default()
            },
        }],
    }
}

#[test]
fn encode_decode_round_trip() {
    let s = small("h1", 1, 64);
    let bytes = encode(&s);
    assert_eq!(&bytes[..8], &MAGIC);
    assert_eq!(decode(&bytes).unwrap(), s);
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = encode(&small("h1", 1, 64));
    for cut in 0..bytes.len() {
        let e = decode(&bytes[..cut]).unwrap_err();
        let msg = e.to_string();
        assert!(!msg.contains('\n'), "{msg}");
        assert!(
            matches!(e, FormatError::Short(_) | FormatError::Truncated { .. }),
            "cut at {cut}: {e}"
        );
    }
}

#[test]
fn every_flipped_byte_is_an_error() {
    let bytes = encode(&small("h1", 1, 64));
    for at in 0..bytes.len() {
        for bit in [0x01u8, 0x80] {
            let mut b = bytes.clone();
            b[at] ^= bit;
            let e = decode(&b).expect_err("a flipped bit decodes");
            assert!(!e.to_string().contains('\n'));
            if at >= 24 {
                assert!(matches!(e, FormatError::Checksum { .. }), "byte {at}: {e}");
            }
        }
    }
}

#[test]
fn another_version_is_refused_naming_it() {
    let mut bytes = encode(&small("h1", 1, 64));
    bytes[8..10].copy_from_slice(&1u16.to_le_bytes());
    let e = decode(&bytes).unwrap_err();
    assert_eq!(e, FormatError::Version { found: 1 });
    assert_eq!(
        e.to_string(),
        format!("snapshot format version 1, this netsift reads version {VERSION}")
    );
}

#[test]
fn other_parameters_or_seeds_are_refused_naming_what_differs() {
    let files = [PathBuf::from("a.nss"), PathBuf::from("b.nss")];
    let ok = check_agree(&files, &[small("h1", 1, 64), small("h2", 1, 64)]);
    assert_eq!(ok, Ok(()));
    let e = check_agree(&files, &[small("h1", 1, 64), small("h2", 1, 128)]).unwrap_err();
    assert!(e.contains("b.nss") && e.contains("a.nss"), "{e}");
    assert!(e.contains("measure[0].params.width (64 vs 128)"), "{e}");
    let e = check_agree(&files, &[small("h1", 1, 64), small("h2", 2, 64)]).unwrap_err();
    assert!(e.contains("seed 2") && e.contains("seed 1"), "{e}");
    // One more measurement on one side: that entry is named, not the whole list; long texts
    // that begin alike are shown from where they differ.
    let mut longer = small("h2", 1, 64);
    let mut t: toml::Table = longer.params.parse().unwrap();
    let list = t["measure"].as_array().unwrap().clone();
    let mut extra = list.clone();
    extra.push(list[0].clone());
    t.insert("measure".into(), toml::Value::Array(extra));
    t.insert(
        "note".into(),
        toml::Value::String(format!("{}x", "a".repeat(60))),
    );
    longer.params = toml::to_string(&t).unwrap();
    longer.params_hash = params_hash(&longer.params);
    let e = check_agree(&files, &[small("h1", 1, 64), longer]).unwrap_err();
    assert!(e.contains("measure[1] (absent vs {"), "{e}");
    assert!(!e.contains("measure (["), "{e}");
    assert!(e.contains("note (absent vs"), "{e}");
    let (x, y) = apart(
        &format!("\"{}b\"", "a".repeat(60)),
        &format!("\"{}c\"", "a".repeat(60)),
    );
    assert_ne!(x, y);
    assert!(x.starts_with("...") && x.ends_with("ab\""), "{x}");
    // Same `params`, but an instance claiming other parameters of its own (a forgery that
    // would size its restored state by them): refused, the instance named.
    let mut forged = small("h2", 1, 64);
    forged.instances[0].params = forged.instances[0].params.replace("64", "1048576");
    assert_ne!(
        forged.instances[0].params,
        small("h1", 1, 64).instances[0].params
    );
    let e = check_agree(&files, &[small("h1", 1, 64), forged]).unwrap_err();
    assert!(
        e.contains("other instances") && e.contains("instance 0"),
        "{e}"
    );
    // The same host twice in one epoch.
    let e = check_agree(&files, &[small("h1", 1, 64), small("h1", 1, 64)]).unwrap_err();
    assert!(e.contains("host h1 epoch 0 twice"), "{e}");
}

#[test]
fn merged_count_min_is_the_sum() {
    let (a, b) = (small("h1", 1, 64), small("h2", 1, 64));
    let files = [PathBuf::from("a"), PathBuf::from("b")];
    let m = merge_epoch(
        &[&files[0], &files[1]],
        &[&a, &b],
        visor::Method::Sketchvisor,
    )
    .unwrap();
    assert_eq!(m.span.packets, 2000);
    let one = restore_instance(&a.instances[0]).unwrap();
    let k = stream(&BuildCtx::default(), 1, 5)[0];
    assert_eq!(m.states[0].flow_size(&k), one.flow_size(&k).map(|v| 2 * v));
    assert!(m.fast[0].summary.is_none());
}

#[test]
fn an_idle_host_is_merged_as_present_adding_nothing() {
    let (a, b) = (small("h1", 1, 64), small("h2", 1, 64));
    let mut idle = small("h3", 1, 64);
    (idle.epoch.packets, idle.epoch.bytes) = (0, 0);
    (idle.epoch.first_ns, idle.epoch.last_ns) = (0, 0);
    idle.instances.clear();
    idle.fast.clear();
    assert!(idle.is_idle() && !a.is_idle());
    // Compatible both ways (no instance to compare), but not with another seed.
    let f = PathBuf::from("x");
    check_compatible(&f, &a, &f, &idle).unwrap();
    check_compatible(&f, &idle, &f, &a).unwrap();
    assert!(check_compatible(&f, &small("h4", 2, 64), &f, &idle).is_err());
    let files = [PathBuf::from("a"), PathBuf::from("i"), PathBuf::from("b")];
    // The idle part first: the states still come from the others.
    let m = merge_epoch(
        &[&files[1], &files[0], &files[2]],
        &[&idle, &a, &b],
        visor::Method::Sketchvisor,
    )
    .unwrap();
    let two = merge_epoch(
        &[&files[0], &files[2]],
        &[&a, &b],
        visor::Method::Sketchvisor,
    )
    .unwrap();
    assert_eq!(m.hosts, ["h3", "h1", "h2"]);
    assert_eq!(m.span, two.span);
    let k = stream(&BuildCtx::default(), 1, 5)[0];
    assert_eq!(m.states[0].flow_size(&k), two.states[0].flow_size(&k));
    assert!(merge_epoch(&[&files[1]], &[&idle], visor::Method::None).is_err());
}

#[test]
fn recoveries_put_the_fast_path_back() {
    let mut a = small("h1", 1, 64);
    let k = stream(&BuildCtx::default(), 1, 5)[0];
    let before = restore_instance(&a.instances[0])
        .unwrap()
        .flow_size(&k)
        .unwrap();
    a.fast[0].summary = Some(visor::Summary {
        flows: vec![visor::Tracked {
            key: k,
            lo: 10,
            hi: 15,
        }],
        v: 20,
        e: 5,
        paths: Default::default(),
    });
    a.fast[0].paths = visor::PathCounts {
        normal_packets: 70,
        normal_bytes: 7000,
        fast_packets: 20,
        fast_bytes: 2000,
    };
    let f = PathBuf::from("a");
    let lo = merge_epoch(&[&f], &[&a], visor::Method::Lower).unwrap();
    assert_eq!(lo.states[0].flow_size(&k), Some(before + 10));
    let hi = merge_epoch(&[&f], &[&a], visor::Method::Upper).unwrap();
    assert_eq!(hi.states[0].flow_size(&k), Some(before + 15));
    let none = merge_epoch(&[&f], &[&a], visor::Method::None).unwrap();
    assert_eq!(none.states[0].flow_size(&k), Some(before));
    // The merged summary carries the merged path counts (the bitmap sketches' fast share;
    // not part of the summary's stored form).
    let merged = &none.fast[0];
    assert_eq!(merged.paths.fast_packets, 20);
    assert_eq!(merged.summary.as_ref().map(|s| s.paths), Some(merged.paths));
    // SketchVisor's recovery: x within its bounds, at most V of the fast path's weight added.
    let sv = merge_epoch(&[&f], &[&a], visor::Method::Sketchvisor).unwrap();
    let got = sv.states[0].flow_size(&k).unwrap();
    assert!(
        (before + 10..=before + 20).contains(&got),
        "{got} from {before}"
    );
    // The proportional prior (or the paper's method, if the epoch's test rejects it): the same
    // bounds hold, the tracked flow at least its lower bound and at most V added.
    let p = merge_epoch(&[&f], &[&a], visor::Method::Proportional).unwrap();
    let got = p.states[0].flow_size(&k).unwrap();
    assert!(
        (before + 10..=before + 20).contains(&got),
        "{got} from {before}"
    );
}

#[test]
fn host_ids_are_checked() {
    assert!(check_host("agent-1.dc_2").is_ok());
    for bad in ["", "a/b", "..", ".x", "a b", &"x".repeat(65)] {
        assert!(check_host(bad).is_err(), "{bad:?}");
    }
    assert_eq!(file_name("h1", 3), "h1-epoch000003.nss");
}

/// The committed version-4 file: a 2 x 64 Count-Min (4 candidates) over 1000 Zipf keys, seed 1.
/// Its bytes pin the format (header, postcard body) and Count-Min's serde form: a change that
/// breaks it needs a new format version (docs/snapshot-format.md). `NETSIFT_BLESS=1` rewrites
/// it (only with a version bump).
#[test]
fn golden_file_decodes_and_is_what_this_build_writes() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/count_min_v4.nss");
    let want = encode(&small("golden-1", 1, 64));
    if std::env::var_os("NETSIFT_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let bytes = std::fs::read(&path).unwrap();
    let s = read(&path).unwrap();
    assert_eq!(&bytes[..8], b"NSIFTSNP");
    assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), VERSION);
    assert_eq!(s.host, "golden-1");
    assert_eq!(s.epoch.packets, 1000);
    assert_eq!(s.seed, 1);
    assert_eq!(s.kinds, ["src"]);
    assert_eq!(s.instances.len(), 1);
    assert_eq!(s.instances[0].algorithm, "count_min");
    // The restored sketch counts every packet once per row.
    let a = restore_instance(&s.instances[0]).unwrap();
    let cm = algo::downcast::<sketch::count_min::CountMin>(a.as_ref()).unwrap();
    assert_eq!(cm.config().rows, 2);
    let keys = stream(&BuildCtx::default(), 1000, 5);
    let truth = testkit::truth(&keys);
    for (k, &n) in &truth {
        assert!(a.flow_size(k).unwrap() >= n);
    }
    assert_eq!(
        bytes, want,
        "the format or Count-Min's serde form changed: bump VERSION"
    );
}

/// The fuzz target's property, seeded, in every test run: a valid body with random bytes
/// changed, cut or inserted, framed with a valid header and checksum (so the body's decoder and
/// each algorithm's deserializer see it), gives a snapshot or an error, never a panic; so does
/// every entry's `load` of a changed state.
#[test]
fn mutated_bodies_never_panic() {
    use rand::{Rng, SeedableRng};
    // Several algorithm families in one snapshot.
    let mut s = small("m", 1, 64);
    for name in [
        "hyperloglog",
        "flow_radar",
        "rev_sketch",
        "space_saving",
        "univmon",
    ] {
        let e = catalog::lookup(name).unwrap();
        let ctx = ctx_for(e);
        let params: toml::Table = match name {
            "flow_radar" => "cells = 64\nbf_bits = 256".parse().unwrap(),
            _ => toml::Table::new(),
        };
        let mut a = e.build(&params, &ctx).unwrap();
        let keys = stream(&ctx, 300, 9);
        a.update_batch(&keys, &vec![1; keys.len()]);
        s.instances.push(InstanceState {
            algorithm: name.into(),
            kind: "src".into(),
            side: "src".into(),
            params: String::new(),
            state: save_instance(a.as_ref()).unwrap(),
        });
    }
    let body = postcard::to_stdvec(&s).unwrap();
    let mut rng = rand_pcg::Pcg64::seed_from_u64(15);
    let mut decoded = 0;
    for _ in 0..1500 {
        let mut b = body.clone();
        for _ in 0..rng.gen_range(1..4) {
            let at = rng.gen_range(0..b.len());
            match rng.gen_range(0..4) {
                0 => b[at] ^= 1 << rng.gen_range(0..8),
                1 => b[at] = rng.gen(),
                2 => b.truncate(at),
                _ => b.insert(at, rng.gen()),
            }
            if b.is_empty() {
                break;
            }
        }
        if let Ok(d) = decode(&frame(&b)) {
            decoded += 1;
            for i in &d.instances {
                let _ = restore_instance(i);
            }
        }
        for i in &s.instances {
            let mut st = i.state.clone();
            let at = rng.gen_range(0..st.len());
            st[at] = rng.gen();
            let _ = (catalog::lookup(&i.algorithm).unwrap().load)(&st);
        }
    }
    // Some mutations land in counters and decode: the restore path was reached.
    assert!(decoded > 0);
}

/// A stored key is checked: its length at most 37, nothing past it (the mutation test found a
/// length of 157 that made `as_bytes` panic).
#[test]
fn stored_keys_are_checked() {
    let k = FlowKey::from_u32(0x0a00_0001);
    let b = postcard::to_stdvec(&k).unwrap();
    assert_eq!(postcard::from_bytes::<FlowKey>(&b).unwrap(), k);
    let mut long = b.clone();
    long[0] = 38;
    assert!(postcard::from_bytes::<FlowKey>(&long).is_err());
    let mut dirty = b;
    let last = dirty.len() - 1;
    dirty[last] = 1;
    assert!(postcard::from_bytes::<FlowKey>(&dirty).is_err());
}

/// A snapshot of `forge::Sample` `s`'s state (one instance, no fast path).
fn one_instance(s: &forge::Sample, state: Vec<u8>) -> Snapshot {
    let mut snap = small("v", 7, 64);
    snap.instances = vec![s.instance(state)];
    snap.kinds = vec![snap.instances[0].kind.clone()];
    snap.fast.clear();
    snap
}

/// `validate` accepts every entry's real state (built with the parameters it names, its
/// memory their figure), at default and other sizes, and the golden snapshot.
#[test]
fn validate_accepts_real_states() {
    for s in forge::samples().unwrap() {
        let snap = one_instance(&s, s.state.clone());
        validate(&snap, None).unwrap_or_else(|e| panic!("{}: {e}", s.label));
        validate(&snap, Some(1 << 40)).unwrap_or_else(|e| panic!("{}: {e}", s.label));
        // The same state under the entry's defaults (another size) is not built with them.
        let mut other = snap.clone();
        other.instances[0].params = String::new();
        if (s.entry.defaults)() != s.params {
            let e = validate(&other, None).unwrap_err();
            assert!(
                e.starts_with(&format!("instance 0 ({}, ", s.entry.name)),
                "{}: {e}",
                s.label
            );
        }
    }
    for e in catalog::ALL {
        let ctx = ctx_for(e);
        let mut a = e.build(&toml::Table::new(), &ctx).unwrap();
        let keys = stream(&ctx, 2000, 3);
        a.update_batch(&keys, &vec![1; keys.len()]);
        let mut snap = small("d", 7, 64);
        snap.seed = 7;
        snap.instances = vec![InstanceState {
            algorithm: e.name.into(),
            kind: if ctx.key_len == 8 { "pair" } else { "src" }.into(),
            side: "src".into(),
            params: String::new(),
            state: save_instance(a.as_ref()).unwrap(),
        }];
        snap.kinds = vec![snap.instances[0].kind.clone()];
        snap.fast.clear();
        validate(&snap, None).unwrap_or_else(|m| panic!("{} defaults: {m}", e.name));
    }
    let golden = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/count_min_v3.nss"),
    );
    if let Ok(g) = golden {
        validate(&decode(&g).unwrap(), None).unwrap();
    }
}

/// The reported cases: a RevSketch state claiming 2^34 rows (64 GiB) and an MRAC state asking
/// for 2^62 EM iterations are refused naming instance and field; a snapshot past the memory
/// limit is refused before its states are restored, naming the instance.
#[test]
fn validate_refuses_forged_sizes_and_budgets() {
    let samples = forge::samples().unwrap();
    let pick = |n: &str| samples.iter().find(|s| s.label == n).unwrap();
    let nth = |state: &[u8], n: usize| forge::varint_positions(state)[n];
    let rev = pick("rev_sketch");
    let forged = forge::substitute(&rev.state, nth(&rev.state, 0), 1 << 34).unwrap();
    let e = validate(&one_instance(rev, forged), None).unwrap_err();
    assert!(
        e.starts_with("instance 0 (rev_sketch, src) state:") && e.contains("rows"),
        "{e}"
    );
    let mrac = pick("mrac");
    let forged = forge::substitute(&mrac.state, nth(&mrac.state, 2), 1 << 62).unwrap();
    let e = validate(&one_instance(mrac, forged), None).unwrap_err();
    assert!(
        e.starts_with("instance 0 (mrac, src) state:") && e.contains("em_iterations"),
        "{e}"
    );
    // The memory limit: rev_sketch's parameters need more than 1 KB.
    let e = validate(&one_instance(rev, rev.state.clone()), Some(1024)).unwrap_err();
    assert!(
        e.starts_with("instance 0 (rev_sketch, src) params:") && e.contains("memory limit"),
        "{e}"
    );
    // A summary whose bounds are crossed.
    let mut s = small("f", 1, 64);
    s.fast[0].summary = Some(visor::Summary {
        flows: vec![visor::Tracked {
            key: FlowKey::from_u32(1),
            lo: 5,
            hi: 4,
        }],
        v: 10,
        e: 0,
        paths: Default::default(),
    });
    let e = validate(&s, None).unwrap_err();
    assert!(e.starts_with("fast[0] (src) summary: flows:"), "{e}");
}

/// A state claiming more than its parameters allocate is refused by `restore_instance` itself
/// (the load limit), before a conversion allocates it: Space-Saving's summary rebuilt at a
/// forged capacity of 2^24 slots.
#[test]
fn restore_refuses_a_capacity_past_its_params() {
    let samples = forge::samples().unwrap();
    let ss = samples.iter().find(|s| s.label == "space_saving").unwrap();
    // The saved form is (cap, entries): the capacity is the state's first varint.
    let at = forge::varint_positions(&ss.state)[0];
    assert_eq!(forge::read_varint(&ss.state, at).unwrap().0, 16);
    let forged = forge::substitute(&ss.state, at, 1 << 24).unwrap();
    // (postcard reports a conversion's error as a generic deserialization error.)
    assert!(restore_instance(&ss.instance(forged.clone())).is_err());
    // Without a limit (a run's own state) the same bytes load.
    assert!((ss.entry.load)(&forged).is_ok());
}
