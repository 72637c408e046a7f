//! One worker's SketchVisor data plane (section 3.1), as the runner drives it: the FIFO model
//! decides per packet; a packet on the fast path updates one fast path per key kind the run
//! measures (the paper's single fast path serves every task, section 3.1 "Challenges"; here each
//! key kind the algorithms use has its own table, because a table holds keys of one kind); a
//! packet on the normal path goes, as without SketchVisor, to the run's front and algorithms.
//!
//! [`VisorConfig`] is the serde side (`deny_unknown_fields`, the flags `--fast-path`,
//! `--fast-path-bytes`, `--normal-capacity`, `--recover`), [`DataPlane`] the running object.

use algo::ConfigError;
use key::FlowKey;
use serde::{Deserialize, Serialize};

use crate::fast::{build, FastKind, FastStats, FastTable, Summary, DEFAULT_BYTES};
use crate::fifo::{Fifo, FifoError, Path, PathCounts, DEFAULT_DEPTH, DEFAULT_KEY_TRACE_MPPS};
use crate::recover::Method;

/// SketchVisor's settings for a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VisorConfig {
    /// `none` (every packet to the normal path), `sketchvisor` or `misra_gries`.
    pub fast_path: FastKind,
    /// Bytes of each fast path (default 8192, the paper's section 7.1).
    pub fast_path_bytes: usize,
    /// The normal path's capacity per worker, in Mpps of simulated time; `None`: unbounded
    /// (no packet is ever sent to the fast path by the model).
    pub normal_capacity: Option<f64>,
    /// FIFO depth in packets.
    pub fifo_depth: u32,
    /// Arrival rate assumed for key traces (no timestamps), in Mpps.
    pub key_trace_mpps: f64,
    /// How the run answers from both paths.
    pub recover: Method,
}

impl Default for VisorConfig {
    fn default() -> Self {
        VisorConfig {
            fast_path: FastKind::Sketchvisor,
            fast_path_bytes: DEFAULT_BYTES,
            normal_capacity: None,
            fifo_depth: DEFAULT_DEPTH,
            key_trace_mpps: DEFAULT_KEY_TRACE_MPPS,
            recover: Method::Sketchvisor,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PlaneError {
    #[error(transparent)]
    Fifo(#[from] FifoError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("normal_capacity is set but fast_path is none: the overflow would have nowhere to go")]
    NoFastPath,
}

/// What an epoch of one worker's data plane hands on: the packets and bytes per path, and per
/// key kind (in the order given to [`DataPlane::new`]) the fast path's summary and statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct EpochPart {
    pub paths: PathCounts,
    pub fast: Vec<(Summary, FastStats)>,
}

/// The FIFO model and one fast path per key kind.
pub struct DataPlane {
    fifo: Option<Fifo>,
    fast: Vec<Box<dyn FastTable>>,
    /// Counts when there is no FIFO (every packet normal).
    plain: PathCounts,
}

impl DataPlane {
    /// The data plane of `cfg` for key kinds of the given lengths (one fast path each), index
    /// hashes seeded from `seed`.
    pub fn new(cfg: &VisorConfig, key_lens: &[usize], seed: u64) -> Result<DataPlane, PlaneError> {
        let fifo = match cfg.normal_capacity {
            None => None,
            Some(_) if cfg.fast_path == FastKind::None => return Err(PlaneError::NoFastPath),
            Some(c) => Some(Fifo::new(c, cfg.fifo_depth, cfg.key_trace_mpps)?),
        };
        let mut fast = Vec::new();
        for (i, &len) in key_lens.iter().enumerate() {
            if let Some(t) = build(
                cfg.fast_path,
                cfg.fast_path_bytes,
                len,
                key::sub_seed(seed, i as u64),
            )? {
                fast.push(t);
            }
        }
        Ok(DataPlane {
            fifo,
            fast,
            plain: PathCounts::default(),
        })
    }

    /// Route one packet of `bytes` on the wire captured at `ts_ns` (`None` for key traces).
    /// On [`Path::Fast`] every kind's fast path is updated with its key (`keys[i]` for kind `i`)
    /// and `weight` (1 or the bytes, the run's weight); on [`Path::Normal`] the caller feeds its
    /// normal path as usual.
    #[inline]
    pub fn route(&mut self, ts_ns: Option<u64>, bytes: u64, keys: &[FlowKey], weight: u64) -> Path {
        let Some(f) = &mut self.fifo else {
            self.plain.normal_packets += 1;
            self.plain.normal_bytes += bytes;
            return Path::Normal;
        };
        let p = match ts_ns {
            Some(t) => f.offer_at(t, bytes),
            None => f.offer_next(bytes),
        };
        if p == Path::Fast {
            for (t, k) in self.fast.iter_mut().zip(keys) {
                t.update(k, weight);
            }
        }
        p
    }

    /// Epoch end: the epoch's counts and summaries; the fast paths are emptied, the FIFO's
    /// backlog carries over.
    pub fn end_epoch(&mut self) -> EpochPart {
        let paths = match &mut self.fifo {
            Some(f) => f.take_counts(),
            None => std::mem::take(&mut self.plain),
        };
        let fast = self
            .fast
            .iter_mut()
            .map(|t| {
                // The counts ride with each summary: the bitmap sketches' restoring reads the
                // fast share from them (`crate::bitmap`).
                let mut summary = t.summary();
                summary.paths = paths;
                let s = (summary, t.stats());
                t.reset();
                s
            })
            .collect();
        EpochPart { paths, fast }
    }

    /// Bytes allocated by the fast paths.
    pub fn memory_bytes(&self) -> usize {
        self.fast.iter().map(|t| t.memory_bytes()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_rejects_unknown_fields_and_names_defaults() {
        let c: VisorConfig =
            toml::from_str("fast_path = \"misra_gries\"\nnormal_capacity = 2.5").expect("valid");
        assert_eq!(c.fast_path, FastKind::MisraGries);
        assert_eq!(c.normal_capacity, Some(2.5));
        assert_eq!(c.fast_path_bytes, 8192);
        assert!(toml::from_str::<VisorConfig>("fast_pth = \"none\"").is_err());
        let none = VisorConfig {
            fast_path: FastKind::None,
            normal_capacity: Some(1.0),
            ..VisorConfig::default()
        };
        assert!(matches!(
            DataPlane::new(&none, &[4], 0),
            Err(PlaneError::NoFastPath)
        ));
    }

    #[test]
    fn overflow_reaches_every_kinds_fast_path() {
        let cfg = VisorConfig {
            normal_capacity: Some(1.0),
            fifo_depth: 1,
            ..VisorConfig::default()
        };
        let mut d = DataPlane::new(&cfg, &[4, 13], 0).unwrap();
        let keys = [
            FlowKey::from_u32(7),
            FlowKey::v4(key::KeyKind::FiveTuple, [1, 2, 3, 4], [5, 6, 7, 8], 1, 2, 6),
        ];
        // Two packets at the same instant with room for one: the second overflows.
        assert_eq!(d.route(Some(0), 100, &keys, 100), Path::Normal);
        assert_eq!(d.route(Some(0), 60, &keys, 60), Path::Fast);
        let e = d.end_epoch();
        assert_eq!(e.paths.normal_packets + e.paths.fast_packets, 2);
        assert_eq!(e.paths.fast_bytes, 60);
        for ((s, st), k) in e.fast.iter().zip(&keys) {
            assert_eq!(s.v, 60);
            assert_eq!(st.packets, 1);
            assert_eq!(s.get(k).map(|t| (t.lo, t.hi)), Some((60, 60)));
            // The counts ride with the summary (the bitmap sketches' fast share).
            assert_eq!(s.paths, e.paths);
        }
        let e2 = d.end_epoch();
        assert_eq!(e2.paths.packets(), 0);
        assert!(e2.fast.iter().all(|(s, _)| s.v == 0 && s.flows.is_empty()));
    }
}
