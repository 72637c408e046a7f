//! Test support shared by netsift's tests, benches and examples. A dev-dependency only (never a
//! normal dependency, never published).
//!
//! # Zipf key streams
//!
//! One sampler, [`Zipf`]: `flows` ranks, rank `r` (0-based) drawn with probability proportional
//! to `(r + 1)^-skew`, by inversion of the cumulative weights (one uniform double from the caller's
//! RNG, a binary search). On top of it, seeded with `Pcg64::seed_from_u64(seed)`:
//!
//! - [`zipf_ranks`]: the ranks themselves, for tests and benches with their own key layout
//!   (wide keys, pairs, a key of rank 0 that is all zeros, ...);
//! - [`zipf_keys_with`]: ranks turned into keys by a caller's function;
//! - [`zipf_u32`] and [`zipf_keys`]: the scattered 4-byte keys of [`rank_u32`], the product's
//!   bench stream: `zipf_u32` is `gen::zipf_u32` (and [`zipf_ranks`] mapped by [`rank_u32`] equals
//!   it draw for draw, which a test pins).
//!
//! Same arguments, same stream, on every host (`libm`'s pow and a portable PCG).
//!
//! Exact counts: [`truth`] (unit updates) and [`weighted_truth`].
//!
//! Files: [`scratch`], a test's temporary directory, swept once its process has ended.
//!
//! Layering: [`modules`], the circles among a crate's top-level modules and its oversized files.
//!
//! # Captures
//!
//! [`traces_dir`] and [`trace`] locate the shared real captures (`../shared/traces` beside the
//! repository, with tcpdump's regression suite in `tcpdump-tests/`). When the directory is absent
//! they print one `skip:` line on stderr and return `None`, and the test returns (passes) without
//! checking anything:
//!
//! ```no_run
//! #[test]
//! fn reads_every_capture() {
//!     let Some(dir) = testkit::traces_dir() else {
//!         return;
//!     };
//!     for e in std::fs::read_dir(dir).expect("readable") { /* ... */ }
//! }
//! ```
//!
//! # Environment
//!
//! - `NETSIFT_TRACES`: the directory of the captures, instead of `../shared/traces`. Set to a
//!   directory that does not exist to run the skip path, e.g.
//!   `NETSIFT_TRACES=/nonexistent cargo test -p wire --test traces`. An empty value counts as
//!   unset.

#![forbid(unsafe_code)]

pub mod modules;

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use key::{FlowKey, KeyMap};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

/// Zipf(`skew`) over `flows` ranks: rank `r` (0-based) has weight `(r + 1)^-skew`.
#[derive(Clone, Debug)]
pub struct Zipf {
    /// Cumulative weights: `cdf[r]` is the sum of the weights of ranks `0..=r`.
    cdf: Vec<f64>,
}

impl Zipf {
    /// The law over `flows` ranks (`1 <= flows <= u32::MAX`; panics otherwise).
    pub fn new(flows: usize, skew: f64) -> Zipf {
        assert!(
            flows >= 1 && u32::try_from(flows).is_ok(),
            "Zipf over {flows} ranks"
        );
        let mut cdf = Vec::with_capacity(flows);
        let mut acc = 0.0;
        for r in 1..=flows {
            acc += 1.0 / libm::pow(r as f64, skew);
            cdf.push(acc);
        }
        Zipf { cdf }
    }

    /// The number of ranks.
    pub fn flows(&self) -> usize {
        self.cdf.len()
    }

    /// One rank (0-based), from one `f64` of `rng`.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        let total = self.cdf.last().copied().unwrap_or(0.0);
        let u = rng.gen::<f64>() * total;
        // u < total, so the point is below len; min() only guards rounding.
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1) as u32
    }
}

/// `n` ranks (0-based) of Zipf(`skew`) over `flows` ranks, from `Pcg64::seed_from_u64(seed)`.
pub fn zipf_ranks(n: usize, flows: usize, skew: f64, seed: u64) -> Vec<u32> {
    let z = Zipf::new(flows, skew);
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..n).map(|_| z.sample(&mut rng)).collect()
}

/// [`zipf_ranks`], each rank turned into a key by `key`.
pub fn zipf_keys_with(
    n: usize,
    flows: usize,
    skew: f64,
    seed: u64,
    key: impl Fn(u32) -> FlowKey,
) -> Vec<FlowKey> {
    zipf_ranks(n, flows, skew, seed)
        .into_iter()
        .map(key)
        .collect()
}

/// The 4-byte key value of rank `r`: an odd-multiplier bijection on u32 (as `gen::zipf_u32`), so
/// ranks map to distinct, scattered values and popular keys are not numerically adjacent (rank 0
/// is not key 0).
#[inline]
pub fn rank_u32(r: u32) -> u32 {
    r.wrapping_mul(0x9E37_79B1) ^ 0x5bd1_e995
}

/// [`rank_u32`] as a `FlowKey`.
#[inline]
pub fn rank_key(r: u32) -> FlowKey {
    FlowKey::from_u32(rank_u32(r))
}

/// `n` 4-byte key values of Zipf(`skew`) over `flows` ranks: `gen::zipf_u32`, the product's bench
/// stream, equal to [`zipf_ranks`] mapped by [`rank_u32`].
pub fn zipf_u32(n: usize, flows: usize, skew: f64, seed: u64) -> Vec<u32> {
    gen::zipf_u32(n, flows, skew, seed)
}

/// The source addresses of `netsift bench agg-evict`'s bursty trace (the `gen` crate: Zipf
/// 1.1 over 500 k flows, each its own source, bursty order, seed 1), `packets` of them as u32:
/// the stream the aggregator's benchmarks and cost constants are measured on.
pub fn bursty_src_u32(packets: u64) -> Vec<u32> {
    let spec = gen::Spec {
        packets,
        flows: 500_000,
        sources: Some(500_000),
        skew: 1.1,
        order: gen::Order::Bursty,
        seed: 1,
        ..gen::Spec::default()
    };
    let mut v = Vec::with_capacity(packets as usize);
    gen::generate(&spec, |p| {
        v.push(p.tuple.key(key::KeyKind::Src).prefix_u32())
    })
    .expect("spec");
    v
}

/// [`zipf_u32`] as `FlowKey`s: `n` keys of Zipf(`skew`) over `flows` ranks, rank `r` being
/// [`rank_key`]`(r)`.
pub fn zipf_keys(n: usize, flows: usize, skew: f64, seed: u64) -> Vec<FlowKey> {
    zipf_keys_with(n, flows, skew, seed, rank_key)
}

/// Exact count of every key of a stream of unit updates.
/// `0..n` cut into consecutive ranges of the given sizes, repeated (the last one shorter): the
/// uneven batches the batch-path equality tests feed.
pub fn uneven(n: usize, sizes: &[usize]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut i = 0;
    for &s in sizes.iter().cycle() {
        if i >= n || s == 0 {
            break;
        }
        let e = (i + s).min(n);
        out.push(i..e);
        i = e;
    }
    out
}

pub fn truth(keys: &[FlowKey]) -> KeyMap<u64> {
    let mut m = KeyMap::default();
    for k in keys {
        *m.entry(*k).or_insert(0) += 1;
    }
    m
}

/// Exact total weight of every key of a stream of `(key, weight)` updates.
pub fn weighted_truth(stream: &[(FlowKey, u64)]) -> KeyMap<u64> {
    let mut m = KeyMap::default();
    for &(k, w) in stream {
        *m.entry(k).or_insert(0) += w;
    }
    m
}

/// The variable that overrides the capture directory.
pub const TRACES_VAR: &str = "NETSIFT_TRACES";

/// A scratch directory for a test's files, `netsift-test-NAME-PID` in the system's temporary
/// directory (created). Tests of one binary run in parallel and share the process, so none can
/// remove it when it ends; instead the first call in a process removes the scratch directories
/// of processes that have ended (Linux: no `/proc/PID`), so test runs do not pile up files.
pub fn scratch(name: &str) -> PathBuf {
    static SWEEP: std::sync::Once = std::sync::Once::new();
    let tmp = std::env::temp_dir();
    SWEEP.call_once(|| sweep(&tmp));
    let d = tmp.join(format!("netsift-test-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("creating a scratch directory");
    d
}

/// Remove `netsift-test-*-PID` directories in `tmp` whose process has ended.
fn sweep(tmp: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("netsift-test-") else {
            continue;
        };
        let Some(pid) = rest.rsplit('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            // Another user's, or gone meanwhile: left alone.
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Where the captures are looked for: `$NETSIFT_TRACES` when set and not empty, else
/// `../shared/traces` beside the repository.
pub fn traces_path() -> PathBuf {
    match std::env::var_os(TRACES_VAR) {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => default_traces_path(),
    }
}

fn default_traces_path() -> PathBuf {
    // <beside>/<repository>/crates/testkit -> <beside>/shared/traces.
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .nth(3)
        .unwrap_or(here)
        .join("shared/traces")
}

/// The directory of the shared captures, or `None` when it does not exist, after one line on
/// stderr: `skip: ../shared/traces not found ...`. The caller then returns without checking
/// anything. The line goes to the process's stderr directly (not through the test harness's
/// capture), so a skipped test shows in a plain `cargo test`.
pub fn traces_dir() -> Option<PathBuf> {
    let dir = traces_path();
    if dir.is_dir() {
        return Some(dir);
    }
    let test = std::thread::current()
        .name()
        .filter(|n| *n != "main")
        .map(|n| format!(" ({n})"))
        .unwrap_or_default();
    let via: OsString = std::env::var_os(TRACES_VAR).unwrap_or_default();
    let how = if via.is_empty() {
        format!("set {TRACES_VAR} to the captures' directory")
    } else {
        format!("from {TRACES_VAR}")
    };
    // One write of the whole line, so lines of tests running in parallel do not interleave.
    let line = format!(
        "skip: ../shared/traces not found at {} ({how}){test}\n",
        dir.display()
    );
    let _ = std::io::stderr().write_all(line.as_bytes());
    None
}

/// The path of capture `name` (relative to [`traces_dir`], e.g. `"ndpi_synscan.pcap"` or
/// `"tcpdump-tests"`), or `None` (after the skip line) when the directory is absent. The path is
/// not checked: a missing file under a present directory is the test's failure to report.
pub fn trace(name: &str) -> Option<PathBuf> {
    traces_dir().map(|d| d.join(name))
}

/// Wait for `child` at most `limit`: its exit status, or `None` after killing (and reaping) it
/// when it ran past the limit. Polls every 5 ms.
pub fn wait_or_kill(
    child: &mut std::process::Child,
    limit: std::time::Duration,
) -> Option<std::process::ExitStatus> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_mapped_are_gen_zipf_u32() {
        for (n, flows, skew, seed) in [
            (50_000, 1000, 1.1, 7),
            (20_000, 3, 0.5, 1),
            (10_000, 1, 1.1, 2),
            (100_000, 500_000, 1.1, 11),
        ] {
            let mine: Vec<u32> = zipf_ranks(n, flows, skew, seed)
                .into_iter()
                .map(rank_u32)
                .collect();
            assert_eq!(
                mine,
                zipf_u32(n, flows, skew, seed),
                "{flows} {skew} {seed}"
            );
        }
        let keys = zipf_keys(1000, 100, 1.1, 3);
        let u = zipf_u32(1000, 100, 1.1, 3);
        assert!(keys.iter().zip(&u).all(|(k, &x)| k.prefix_u32() == x));
    }

    #[test]
    fn sampler_follows_its_law() {
        let z = Zipf::new(1000, 1.1);
        assert_eq!(z.flows(), 1000);
        let r = zipf_ranks(200_000, 1000, 1.1, 5);
        assert!(r.iter().all(|&x| x < 1000));
        let h: f64 = (1..=1000).map(|r| (r as f64).powf(-1.1)).sum();
        // Binomial sd of rank 0's share at n = 200k is about 0.001; checked at 5 sd.
        let share = r.iter().filter(|&&x| x == 0).count() as f64 / r.len() as f64;
        assert!((share - 1.0 / h).abs() < 0.005, "{share}");
        assert_eq!(zipf_ranks(10, 1, 2.0, 9), vec![0; 10]);
    }

    #[test]
    fn truths_count() {
        let k = [rank_key(1), rank_key(2), rank_key(1)];
        let t = truth(&k);
        assert_eq!((t[&rank_key(1)], t[&rank_key(2)], t.len()), (2, 1, 2));
        let w = weighted_truth(&[(k[0], 5), (k[1], 1), (k[2], 7)]);
        assert_eq!((w[&rank_key(1)], w[&rank_key(2)]), (12, 1));
    }

    #[test]
    fn rank_keys_are_distinct() {
        let s: std::collections::HashSet<u32> = (0..100_000).map(rank_u32).collect();
        assert_eq!(s.len(), 100_000);
        assert_ne!(rank_u32(0), 0);
    }
}
