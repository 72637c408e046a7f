//! Forged states (issue 33): the systematic forger that the hostile-input test
//! (`tests/forged.rs`), the structure-aware fuzz target (`fuzz/fuzz_targets/snapshot_state.rs`)
//! and the corpus writer (`examples/forge_corpus.rs`) share, so that the three forge alike.
//!
//! A state is postcard bytes: every integer wider than a byte, every sequence length and every
//! enum tag is a LEB128 varint. The forger does not know the type behind the bytes: it takes
//! every offset that follows a byte with its high bit clear (the end of a varint or a raw byte)
//! and at which a varint decodes as a varint position, and substitutes boundary values there,
//! re-encoded as varints (the bytes after it shift, as a real writer would have written them).
//! A forged state keeps a valid checksum once framed: the file checksum guards against bit rot,
//! not an adversary.
//!
//! [`samples`] gives a real state per catalog entry (small parameters, a few thousand keys), and
//! [`exercise`] does with a (forged) state what a controller and `netsift merge` do: restore,
//! merge with a good state both ways, query every task. It must return (an error or answers),
//! never panic, abort or run long.

use algo::{Algorithm, BuildCtx, Entry, Task};
use key::FlowKey;

use crate::{restore_instance, save_instance, InstanceState};

/// The values substituted at every varint position (beside the original value plus and minus
/// one): small sizes, the edges of u32 and i32, sizes that pass a u32 check but not an
/// allocation, and the top of u64.
pub const BOUNDARY: [u64; 11] = [
    0,
    1,
    2,
    1 << 16,
    (1 << 31) - 1,
    (1 << 32) - 1,
    1 << 32,
    1 << 36,
    (1 << 62) + 1,
    1 << 63,
    u64::MAX,
];

/// The varint at `at`: its value and its length in bytes (`None` past 10 bytes, at the end, or
/// above u64).
pub fn read_varint(bytes: &[u8], at: usize) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    for i in 0..10 {
        let b = *bytes.get(at + i)?;
        let part = u64::from(b & 0x7f);
        if i == 9 && part > 1 {
            return None;
        }
        v |= part << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// `v` as a LEB128 varint.
pub fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(10);
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

/// Every varint position of `bytes` (see the module docs).
pub fn varint_positions(bytes: &[u8]) -> Vec<usize> {
    (0..bytes.len())
        .filter(|&i| i == 0 || bytes[i - 1] & 0x80 == 0)
        .filter(|&i| read_varint(bytes, i).is_some())
        .collect()
}

/// The positions worth forging when there are too many to try them all: runs of equal varints
/// (an array of zero counters) are represented by their first and last element, the first
/// `head` and last `tail` positions are always kept (configuration, seeds and the first lengths
/// lead a state; counts and flags end it), and at most `max` are returned, the middle ones
/// spread evenly. Deterministic.
pub fn positions_to_forge(bytes: &[u8], head: usize, tail: usize, max: usize) -> Vec<usize> {
    let all = varint_positions(bytes);
    let value = |i: usize| read_varint(bytes, i).map(|(v, _)| v);
    let n = all.len();
    let keep: Vec<usize> = all
        .iter()
        .enumerate()
        .filter(|&(j, &p)| {
            j < head
                || j + tail >= n
                || j == 0
                || j + 1 == n
                || value(all[j - 1]) != value(p)
                || value(all[j + 1]) != value(p)
        })
        .map(|(_, &p)| p)
        .collect();
    if keep.len() <= max {
        return keep;
    }
    let (first, rest) = keep.split_at(head.min(max));
    let room = max - first.len();
    let tail_n = tail.min(room).min(rest.len());
    let (middle, last) = rest.split_at(rest.len() - tail_n);
    let room = room - tail_n;
    let mut out = first.to_vec();
    if room > 0 && !middle.is_empty() {
        let step = middle.len() as f64 / room as f64;
        out.extend((0..room).map(|i| middle[((i as f64 * step) as usize).min(middle.len() - 1)]));
        out.dedup();
    }
    out.extend_from_slice(last);
    out
}

/// `bytes` with the varint at `at` replaced by `v` (`None` if no varint is there).
pub fn substitute(bytes: &[u8], at: usize, v: u64) -> Option<Vec<u8>> {
    let (_, len) = read_varint(bytes, at)?;
    let mut out = Vec::with_capacity(bytes.len() + 10);
    out.extend_from_slice(&bytes[..at]);
    out.extend_from_slice(&varint(v));
    out.extend_from_slice(&bytes[at + len..]);
    Some(out)
}

/// The values tried at `at`: [`BOUNDARY`] and the original value plus and minus one (a length
/// one off), without repeats and without the original.
pub fn values_at(bytes: &[u8], at: usize) -> Vec<u64> {
    let Some((orig, _)) = read_varint(bytes, at) else {
        return vec![];
    };
    let mut vs: Vec<u64> = BOUNDARY.to_vec();
    vs.push(orig.wrapping_add(1));
    vs.push(orig.wrapping_sub(1));
    vs.retain(|&v| v != orig);
    vs.sort_unstable();
    vs.dedup();
    vs
}

/// One catalog entry's real state, the way a host saves it.
pub struct Sample {
    pub entry: &'static Entry,
    /// A name for messages and corpus files (the entry's, with a suffix for a second shape).
    pub label: String,
    pub params: toml::Table,
    pub ctx: BuildCtx,
    /// The saved state (`save_instance` of an instance fed a few thousand keys).
    pub state: Vec<u8>,
    /// Another instance of the same configuration with other keys: what a forged state is
    /// merged with.
    pub good: Box<dyn Algorithm>,
    /// Keys to ask `flow_size` about.
    pub probes: Vec<FlowKey>,
}

impl Sample {
    /// `state` as a snapshot's instance (kind `src`, or `pair` for the spreader structures).
    pub fn instance(&self, state: Vec<u8>) -> InstanceState {
        InstanceState {
            algorithm: self.entry.name.to_string(),
            kind: if self.ctx.key_len == 8 { "pair" } else { "src" }.into(),
            side: "src".into(),
            params: toml::to_string(&self.params).unwrap_or_default(),
            state,
        }
    }
}

/// Small parameters for every catalog entry (a state of a few hundred bytes to a few KB), and a
/// second shape where the entry has two structures (Space-Saving's Stream-Summary past 1024
/// counters).
pub fn small_params() -> Vec<(&'static str, &'static str)> {
    vec![
        ("count_min", "rows = 3\nwidth = 64\ncandidates = 16"),
        ("count_sketch", "rows = 3\nwidth = 64\ncandidates = 16"),
        ("count_array", "width = 128\ncandidates = 16"),
        ("linear_hash", "capacity = 128"),
        ("cuckoo1", "capacity = 128"),
        ("cuckoo4", "capacity = 128"),
        ("heap", "k = 16"),
        ("space_saving", "k = 16"),
        ("space_saving", "k = 1100"),
        ("misra_gries", "k = 16"),
        ("flow_radar", "cells = 64\nbf_bits = 256"),
        (
            "rev_sketch",
            "rows = 4\nwidth = 64\nverify_rows = 2\nverify_width = 32\nmax_candidates = 4096",
        ),
        ("deltoid", "rows = 2\ngroups = 32"),
        ("univmon", "widths = [64, 32, 16]\nrows = 3\nheap = 16"),
        (
            "two_level",
            "cm_rows = 2\ncm_width = 32\nbitmaps = 2\nbitmap_bits = 64\nrev_rows = 4\nrev_width = 64\nmax_candidates = 4096",
        ),
        ("mrac", "arrays = 2\nwidth = 128"),
        ("fm", "bitmaps = 4"),
        ("kmin", "k = 16"),
        ("linear_counting", "rows = 2\nbits = 256"),
        ("hyperloglog", "precision = 4"),
        ("bloom_spreader", "bits = 128\nmax_hosts = 64"),
        ("ewma_change", "alpha = 0.25"),
        ("instameasure", "words = 64\nwsaf_entries = 64\nprobe_limit = 3"),
        ("rcc", "words = 64\nwsaf_entries = 16"),
    ]
}

/// A deterministic skewed key stream (a few thousand keys over a few hundred flows; pairs of a
/// few hosts with many peers for the spreader structures).
pub fn keys(key_len: usize, n: usize, seed: u64) -> Vec<FlowKey> {
    let mut x = seed ^ 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            // splitmix64
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            let u = (z >> 11) as f64 / (1u64 << 53) as f64;
            let rank = (u * u * u * 600.0) as u32;
            let addr = 0x0a00_0000 | rank.wrapping_mul(2_654_435_761) >> 8;
            if key_len == 8 {
                FlowKey::from_u32_pair(0x0a00_0000 | (rank % 7), addr ^ (z as u32 & 0xff))
            } else {
                FlowKey::from_u32(addr)
            }
        })
        .collect()
}

/// Every entry's sample state (every entry of `catalog::ALL` at least once).
pub fn samples() -> Result<Vec<Sample>, String> {
    let mut out = vec![];
    let params = small_params();
    for e in catalog::ALL {
        if !params.iter().any(|(n, _)| *n == e.name) {
            return Err(format!(
                "{}: no small parameters in forge::small_params",
                e.name
            ));
        }
    }
    for (i, (name, p)) in params.iter().enumerate() {
        let entry = catalog::lookup(name).map_err(|e| e.to_string())?;
        let params: toml::Table = p.parse().map_err(|e| format!("{name}: {e}"))?;
        let ctx = BuildCtx {
            key_len: if entry.answers(Task::Superspreaders) {
                8
            } else {
                4
            },
            seed: 7,
            ..BuildCtx::default()
        };
        let build = || {
            entry
                .build(&params, &ctx)
                .map_err(|e| format!("{name}: {e}"))
        };
        let (mut a, mut good) = (build()?, build()?);
        let ks = keys(ctx.key_len, 3000, i as u64);
        let ws: Vec<u64> = ks
            .iter()
            .map(|k| 1 + u64::from(k.as_bytes()[3] % 3))
            .collect();
        a.update_batch(&ks, &ws);
        let other = keys(ctx.key_len, 2000, 1000 + i as u64);
        good.update_batch(&other, &vec![1; other.len()]);
        let state = save_instance(a.as_ref())?;
        let label = if out.iter().any(|s: &Sample| s.entry.name == entry.name) {
            format!("{name}_{}", p.split_whitespace().last().unwrap_or("2"))
        } else {
            name.to_string()
        };
        out.push(Sample {
            entry,
            label,
            params,
            ctx,
            state,
            good,
            probes: ks.into_iter().step_by(97).take(24).collect(),
        });
    }
    Ok(out)
}

/// Ask `a` every question a report asks (every task, with `prev` as the previous epoch both
/// ways, and the caveats), discarding the answers.
pub fn query_all(a: &dyn Algorithm, prev: &dyn Algorithm, probes: &[FlowKey]) {
    let _ = a.flow_size_distribution();
    query_most(a, prev, probes);
}

/// [`query_all`] but the flow-size distribution: what the two direct merges of [`exercise`] are
/// asked (a distribution is dense up to the largest size, `algo::MAX_FSD_SIZE`: a forged
/// counter near 2^32 makes each answer 128 MB, which the forged state and the merged epoch
/// are asked for already).
pub fn query_most(a: &dyn Algorithm, prev: &dyn Algorithm, probes: &[FlowKey]) {
    for t in [1, 20, u64::MAX] {
        let _ = a.heavy_hitters(t);
        let _ = a.heavy_changers(prev, t);
        let _ = prev.heavy_changers(a, t);
        let _ = a.spreaders(t.min(3));
        let _ = a.change_caveats(prev, t);
    }
    let _ = a.cardinality();
    let _ = a.entropy();
    let _ = a.top_k(10);
    for k in probes {
        let _ = a.flow_size(k);
    }
    for t in Task::ALL {
        let _ = a.caveats(t, Some(20), 10_000);
        let _ = a.caveats(t, None, 0);
    }
    let _ = a.memory_bytes();
}

/// What became of a forged state.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `load` refused it.
    Refused(String),
    /// It loaded, merged (or not) and answered.
    Answered,
}

/// Restore `state` as `sample`'s entry, merge it with the good state both ways and query every
/// task, then do the same through [`crate::merge_epoch`] (the control plane's path).
pub fn exercise(sample: &Sample, state: &[u8]) -> Outcome {
    let forged = match restore_instance(&sample.instance(state.to_vec())) {
        Ok(a) => a,
        Err(e) => return Outcome::Refused(e),
    };
    let good = sample.good.as_ref();
    // Copied before it is queried: a query fills caches (MRAC's estimate) that a copy copies.
    let mut into_forged = forged.clone_box();
    query_all(forged.as_ref(), good, &sample.probes);
    let mut into_good = good.clone_box();
    if into_good.merge(forged.as_ref()).is_ok() {
        query_most(into_good.as_ref(), forged.as_ref(), &sample.probes);
    }
    if into_forged.merge(good).is_ok() {
        query_most(into_forged.as_ref(), good, &sample.probes);
    }
    drop((into_good, into_forged));
    // The control plane: a good host's snapshot and the forged one, merged by epoch.
    let good_state = match save_instance(good) {
        Ok(s) => s,
        Err(e) => return Outcome::Refused(e),
    };
    let snap = |host: &str, state: Vec<u8>| crate::Snapshot {
        host: host.into(),
        epoch: crate::EpochSpan {
            index: 0,
            packets: 1,
            ..Default::default()
        },
        seed: 7,
        kinds: vec![sample.instance(vec![]).kind],
        truth: false,
        params_hash: crate::params_hash(""),
        params: String::new(),
        config: String::new(),
        instances: vec![sample.instance(state)],
        fast: vec![],
    };
    let (a, b) = (snap("good", good_state), snap("forged", state.to_vec()));
    let files = [
        std::path::PathBuf::from("good"),
        std::path::PathBuf::from("forged"),
    ];
    if let Ok(m) = crate::merge_epoch(&[&files[0], &files[1]], &[&a, &b], visor::Method::None) {
        for s in &m.states {
            query_all(s.as_ref(), good, &sample.probes);
        }
    }
    Outcome::Answered
}

/// A whole snapshot whose body is forged (header fields, the instances' framing, the fast path's
/// summary): Count-Min and MRAC states (the two the SketchVisor recovery solves for) with a
/// fast-path summary, and the good snapshot of another host it is merged with.
pub struct BodySample {
    pub body: Vec<u8>,
    pub good: crate::Snapshot,
}

/// The [`BodySample`]: two hosts' snapshots of one epoch.
pub fn body_sample() -> Result<BodySample, String> {
    let all = samples()?;
    let pick = |name: &str| {
        all.iter()
            .find(|s| s.entry.name == name)
            .ok_or_else(|| format!("no {name} sample"))
    };
    let (cm, mrac) = (pick("count_min")?, pick("mrac")?);
    let snap = |host: &str, cm_state: Vec<u8>, mrac_state: Vec<u8>, seed: u64| {
        let flows: Vec<visor::Tracked> = {
            let mut k = keys(4, 40, seed);
            k.sort();
            k.dedup();
            k.into_iter()
                .enumerate()
                .map(|(i, key)| visor::Tracked {
                    key,
                    lo: 10 + i as u64,
                    hi: 20 + 2 * i as u64,
                })
                .collect()
        };
        let v = flows.iter().map(|t| t.hi).sum::<u64>() + 100;
        crate::Snapshot {
            host: host.into(),
            epoch: crate::EpochSpan {
                index: 3,
                first_ns: 1_000,
                last_ns: 2_000,
                packets: 5_000,
                bytes: 300_000,
                ..Default::default()
            },
            seed: 7,
            kinds: vec!["src".into()],
            truth: false,
            params_hash: crate::params_hash(""),
            params: String::new(),
            config: String::new(),
            instances: vec![cm.instance(cm_state), mrac.instance(mrac_state)],
            fast: vec![crate::FastPart {
                kind: "src".into(),
                summary: Some(visor::Summary {
                    flows,
                    v,
                    e: 9,
                    paths: Default::default(),
                }),
                paths: visor::PathCounts {
                    normal_packets: 4_000,
                    normal_bytes: 240_000,
                    fast_packets: 1_000,
                    fast_bytes: 60_000,
                },
            }],
        }
    };
    let forged = snap("forged", cm.state.clone(), mrac.state.clone(), 1);
    let good = snap(
        "good",
        save_instance(cm.good.as_ref())?,
        save_instance(mrac.good.as_ref())?,
        2,
    );
    Ok(BodySample {
        body: postcard::to_stdvec(&forged).map_err(|e| e.to_string())?,
        good,
    })
}

/// Frame a (forged) body with a valid header and checksum, decode it, and merge it with the
/// good host's snapshot by every recovery method, querying the merged states.
pub fn exercise_body(sample: &BodySample, body: &[u8]) -> Outcome {
    let s = match crate::decode(&crate::frame(body)) {
        Ok(s) => s,
        Err(e) => return Outcome::Refused(e.to_string()),
    };
    let files = [
        std::path::PathBuf::from("good"),
        std::path::PathBuf::from("forged"),
    ];
    let probes = keys(4, 64, 1);
    for method in visor::Method::ALL {
        if let Ok(m) = crate::merge_epoch(&[&files[0], &files[1]], &[&sample.good, &s], method) {
            for (a, b) in m.states.iter().zip(m.states.iter().rev()) {
                query_all(a.as_ref(), b.as_ref(), &probes);
            }
        }
    }
    Outcome::Answered
}

/// Bytes per mutation of [`mutate`]: a position (u16), an operation, a value (u64), little
/// endian.
pub const MUTATION_BYTES: usize = 11;

/// The fuzz target's (`fuzz/fuzz_targets/snapshot_state.rs`) reading of its input as varint
/// mutations of `state`: each [`MUTATION_BYTES`] bytes pick a varint position (modulo the
/// positions of the state as mutated so far), and a value: operation 0 takes
/// [`BOUNDARY`]`[value % 11]`, 1 the value itself, 2 the original plus the value's low byte as
/// a signed delta. At most 16 mutations; the rest of the input is ignored.
pub fn mutate(state: &[u8], data: &[u8]) -> Vec<u8> {
    let mut out = state.to_vec();
    for m in data.chunks_exact(MUTATION_BYTES).take(16) {
        let positions = varint_positions(&out);
        if positions.is_empty() {
            break;
        }
        let pos = positions[usize::from(u16::from_le_bytes([m[0], m[1]])) % positions.len()];
        let mut v = [0u8; 8];
        v.copy_from_slice(&m[3..11]);
        let v = u64::from_le_bytes(v);
        let orig = read_varint(&out, pos).map_or(0, |x| x.0);
        let value = match m[2] % 3 {
            0 => BOUNDARY[(v % BOUNDARY.len() as u64) as usize],
            1 => v,
            _ => orig.wrapping_add(i64::from(v as u8 as i8) as u64),
        };
        if let Some(next) = substitute(&out, pos, value) {
            out = next;
        }
    }
    out
}

/// The [`mutate`] input that sets the varint at byte `at` of `state` to `value` (`None` when no
/// varint position is there): how a forged case becomes a fuzz corpus file.
pub fn mutation_for(state: &[u8], at: usize, value: u64) -> Option<Vec<u8>> {
    let i = varint_positions(state).iter().position(|&p| p == at)?;
    let mut m = Vec::with_capacity(MUTATION_BYTES);
    m.extend_from_slice(&u16::try_from(i).ok()?.to_le_bytes());
    m.push(1);
    m.extend_from_slice(&value.to_le_bytes());
    Some(m)
}
