//! One measured configuration: an algorithm, with or without Agg-Evict, over a preloaded trace.
//!
//! What the timed work includes, per epoch of `epoch` packets:
//! * every batch: the aggregator lookups/insertions/evictions and the algorithm's updates for
//!   the evicted pairs (Agg-Evict), or the algorithm's `update_batch` on the raw batch (none);
//! * at the epoch's end: the aggregator's flush into the algorithm, and the algorithm's and the
//!   aggregator's reset. Their cycles are charged to the epoch's last batch (the packets that
//!   would wait behind them in a real receive queue).
//!
//! What it excludes: turning the preloaded tuples into keys (done per epoch before the clock
//! starts), building the structures, and one untimed warm-up epoch that runs the same code over
//! the first epoch (to fault in pages and warm caches and branch predictors), after which every
//! structure is reset.

use std::hint::black_box;

use algo::{Algorithm, BuildCtx, KeyBatch};
use key::{FlowKey, KeyKind};

use front::Front;

use crate::accel::{self, AggSpec};
use crate::clock::{Clock, LatencyHist};
use crate::workload::Workload;
use crate::LabError;

/// What to run.
#[derive(Clone, Debug)]
pub struct RunCfg {
    pub algorithm: &'static str,
    /// The algorithm's parameters as a TOML table body (`""`: its defaults).
    pub params: &'static str,
    pub agg: Option<AggSpec>,
    pub key: KeyKind,
    pub batch: usize,
    pub epoch: usize,
}

/// What a run measured.
#[derive(Clone, Debug)]
pub struct Measured {
    pub packets: u64,
    pub mpps: f64,
    pub ns_avg: f64,
    pub ns_p99: f64,
    /// Share of packets that reached the algorithm as updates (aggregated pairs / packets).
    pub evicted_share: Option<f64>,
    pub memory_bytes: usize,
    /// SIMD backend the aggregator used ("" without Agg-Evict).
    pub simd: String,
    /// Share of packets through the aggregator, and its switches (Agg-Evict only).
    pub through_share: Option<f64>,
    pub switches: Option<u64>,
}

impl Measured {
    /// A run's figures: `packets` in `ns` of timed work, latencies from `hist`.
    fn of(
        packets: u64,
        ns: f64,
        hist: &LatencyHist,
        clock: &Clock,
        front: &Front,
        algo: &dyn Algorithm,
    ) -> Measured {
        Measured {
            packets,
            mpps: if ns > 0.0 {
                packets as f64 / ns * 1e3
            } else {
                0.0
            },
            ns_avg: clock.to_ns(hist.mean_cycles()),
            ns_p99: clock.to_ns(hist.quantile_cycles(0.99)),
            evicted_share: front.stats().map(|s| s.passed_share),
            memory_bytes: algo.memory_bytes(),
            simd: front.stats().map(|s| s.simd).unwrap_or_default(),
            through_share: front
                .stats()
                .map(|s| s.through as f64 / s.packets.max(1) as f64),
            switches: front.stats().map(|s| s.switches),
        }
    }
}

/// The preset every algorithm of the lab is built with: the Agg-Evict paper's configuration.
pub const PRESET: &str = "agg-evict";

pub(crate) fn build_algorithm(
    name: &str,
    params: &str,
    key_len: usize,
    seed: u64,
) -> Result<Box<dyn Algorithm>, LabError> {
    let ctx = BuildCtx {
        seed,
        key_len,
        ..BuildCtx::default()
    };
    let params: toml::Table = params.parse().map_err(|e: toml::de::Error| {
        LabError::Config(format!("parameters `{params}` of {name}: {e}"))
    })?;
    // The paper's parameters (the defaults are sized for accuracy, not the paper's figures).
    let params = catalog::presets::apply(PRESET, name, &params)?;
    Ok(catalog::build(name, &params, &ctx)?)
}

/// Packets `start..end` of `keys` (clamped).
fn sub(keys: KeyBatch<'_>, start: usize, end: usize) -> KeyBatch<'_> {
    let (head, _) = keys.split_at(end);
    head.split_at(start).1
}

/// The one epoch end of every mode: the front hands what it holds to the algorithm, whose
/// state is then observed (or the updates could be optimised away) and reset.
fn end_epoch(front: &mut Front, algo: &mut dyn Algorithm) {
    front.flush(algo);
    black_box(algo.memory_bytes());
    algo.reset();
}

/// Process one epoch of keys in batches; returns nothing, records into `hist` when timing.
fn epoch_pass(
    keys: KeyBatch<'_>,
    ones: &[u64],
    batch: usize,
    algo: &mut dyn Algorithm,
    front: &mut Front,
    clock: &Clock,
    hist: Option<&mut LatencyHist>,
) -> u64 {
    let mut total = 0u64;
    let mut last = (0u64, 0u64); // (cycles, packets) of the batch not yet recorded
    let mut hist = hist;
    for start in (0..keys.len()).step_by(batch.max(1)) {
        let b = sub(keys, start, start + batch);
        let w = &ones[..b.len().min(ones.len())];
        let t0 = clock.now();
        front.update(b, w, algo);
        let t1 = clock.now();
        if let Some(h) = hist.as_deref_mut() {
            if last.1 > 0 {
                h.add_batch(last.0, last.1);
            }
        }
        last = (t1.wrapping_sub(t0), b.len() as u64);
        total += last.0;
    }
    // Epoch end, charged to the last batch.
    let t0 = clock.now();
    end_epoch(front, algo);
    let t1 = clock.now();
    last.0 += t1.wrapping_sub(t0);
    total += t1.wrapping_sub(t0);
    if let Some(h) = hist {
        if last.1 > 0 {
            h.add_batch(last.0, last.1);
        }
    }
    total
}

/// Run `cfg` over `w` (warm-up epoch, then every epoch timed).
pub fn measure(w: &Workload, cfg: &RunCfg, clock: &Clock, seed: u64) -> Result<Measured, LabError> {
    let batch = cfg.batch.max(1);
    let epoch = cfg.epoch.max(batch);
    let key_len = w.key_len(cfg.key);
    let mut algo = build_algorithm(cfg.algorithm, cfg.params, key_len, seed)?;
    let mut front = accel::front(cfg.agg.as_ref(), key_len, cfg.algorithm)?;
    let ones = vec![1u64; batch];
    // 4-byte kinds (IPv4 source or destination) go as u32 keys to both front ends (the
    // algorithm's `update_batch_u32` without Agg-Evict, the aggregator's with it), so neither
    // baseline nor aggregator pays for streaming 38-byte `FlowKey`s; wider kinds as `FlowKey`s.
    let narrow = w.has_u32_keys(cfg.key);
    let mut keys: Vec<FlowKey> = Vec::new();
    let mut u32s: Vec<u32> = Vec::new();
    let load = |start: usize, keys: &mut Vec<FlowKey>, u32s: &mut Vec<u32>| {
        if narrow {
            w.keys_u32_into(start, start + epoch, cfg.key, u32s);
        } else {
            w.keys_into(start, start + epoch, cfg.key, keys);
        }
    };

    // Warm-up: the first epoch, untimed.
    load(0, &mut keys, &mut u32s);
    let kb = if narrow {
        KeyBatch::U32(&u32s)
    } else {
        KeyBatch::Keys(&keys)
    };
    epoch_pass(kb, &ones, batch, algo.as_mut(), &mut front, clock, None);
    front.clear_stats();

    let mut hist = LatencyHist::new();
    let mut cycles = 0u64;
    let mut start = 0usize;
    while start < w.len() {
        load(start, &mut keys, &mut u32s);
        let kb = if narrow {
            KeyBatch::U32(&u32s)
        } else {
            KeyBatch::Keys(&keys)
        };
        cycles += epoch_pass(
            kb,
            &ones,
            batch,
            algo.as_mut(),
            &mut front,
            clock,
            Some(&mut hist),
        );
        start += epoch;
    }
    let packets = w.len() as u64;
    let ns = clock.to_ns(cycles as f64);
    Ok(Measured::of(
        packets,
        ns,
        &hist,
        clock,
        &front,
        algo.as_ref(),
    ))
}

/// Append a parsed key to the batch, and its u32 form while it is 4 bytes long.
fn push_key(buf: &mut Vec<FlowKey>, nb: &mut Vec<u32>, k: FlowKey) {
    if k.len() == 4 {
        nb.push(k.prefix_u32());
    }
    buf.push(k);
}

/// The batch as u32 keys when every key is 4 bytes (IPv4 source or destination: the path the
/// preloaded mode takes too), else as flow keys.
fn batch_of<'a>(buf: &'a [FlowKey], nb: &'a [u32]) -> KeyBatch<'a> {
    if nb.len() == buf.len() {
        KeyBatch::U32(nb)
    } else {
        KeyBatch::Keys(buf)
    }
}

/// Read every key of kind `kind` of `cap` and hand them to `f` in batches of `batch` (the last
/// may be shorter or empty), as `netsift run` reads them: a keys4 trace keyed by source in its
/// u32 blocks (`trace::Capture::for_each_keys4`, no `FlowKey` per record), any other capture
/// record by record, parsed, with batches of 4-byte keys as u32 ([`batch_of`]).
fn each_batch(
    cap: &trace::Capture,
    kind: KeyKind,
    batch: usize,
    mut f: impl FnMut(KeyBatch<'_>),
) -> Result<(), LabError> {
    let mut buf: Vec<FlowKey> = Vec::with_capacity(batch);
    let mut nb: Vec<u32> = Vec::with_capacity(batch);
    if kind == KeyKind::Src {
        let blocks = cap.for_each_keys4(|blk| {
            let mut blk = blk;
            while !blk.is_empty() {
                let take = (batch - nb.len()).min(blk.len());
                nb.extend_from_slice(&blk[..take]);
                blk = &blk[take..];
                if nb.len() == batch {
                    f(KeyBatch::U32(&nb));
                    nb.clear();
                }
            }
        });
        if let Some(r) = blocks {
            r?;
            f(KeyBatch::U32(&nb));
            return Ok(());
        }
    }
    cap.for_each(|rec| {
        let k = match rec.body {
            trace::Body::Frame { link, data } => wire::parse(link, data).key(kind),
            trace::Body::Tuple(t) => Some(t.key(kind)),
        };
        if let Some(k) = k {
            push_key(&mut buf, &mut nb, k);
            if buf.len() == batch {
                f(batch_of(&buf, &nb));
                buf.clear();
                nb.clear();
            }
        }
    })?;
    f(batch_of(&buf, &nb));
    Ok(())
}

/// End-to-end mode: read the capture file (memory-mapped, page-cached by an untimed first pass),
/// parse every frame, build its key, and process it as [`measure()`] does. A batch's time runs from
/// the end of the previous batch to the end of its own processing, so it includes reading and
/// parsing its packets. Non-IP frames are read and parsed (timed) but reach no algorithm; they
/// are not counted in `packets`. Batches of 4-byte keys take the u32 path, as in [`measure()`],
/// and a keys4 trace keyed by source is read as `run` reads it ([`each_batch`]).
pub fn measure_e2e(
    path: &str,
    key_len: usize,
    cfg: &RunCfg,
    clock: &Clock,
    seed: u64,
) -> Result<Measured, LabError> {
    let batch = cfg.batch.max(1);
    let epoch = cfg.epoch.max(batch) as u64;
    let cap = trace::Capture::open(path, None)?;
    let mut algo = build_algorithm(cfg.algorithm, cfg.params, key_len, seed)?;
    let mut front = accel::front(cfg.agg.as_ref(), key_len, cfg.algorithm)?;
    let ones = vec![1u64; batch];

    // Untimed warm-up pass: pages the file in and warms the structures.
    each_batch(&cap, cfg.key, batch, |b| {
        front.update(b, &ones[..b.len()], algo.as_mut());
    })?;
    end_epoch(&mut front, algo.as_mut());
    front.clear_stats();

    let mut hist = LatencyHist::new();
    let (mut packets, mut in_epoch) = (0u64, 0u64);
    let t_start = clock.now();
    let mut t_prev = t_start;
    each_batch(&cap, cfg.key, batch, |b| {
        let n = b.len();
        front.update(b, &ones[..n], algo.as_mut());
        packets += n as u64;
        in_epoch += n as u64;
        if in_epoch >= epoch {
            end_epoch(&mut front, algo.as_mut());
            in_epoch = 0;
        }
        let t = clock.now();
        hist.add_batch(t.wrapping_sub(t_prev), n as u64);
        t_prev = t;
    })?;
    end_epoch(&mut front, algo.as_mut());
    let t_end = clock.now();
    let ns = clock.to_ns(t_end.wrapping_sub(t_start) as f64);
    Ok(Measured::of(
        packets,
        ns,
        &hist,
        clock,
        &front,
        algo.as_ref(),
    ))
}
