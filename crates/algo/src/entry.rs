//! An algorithm's facts, declared once next to its code and listed in the `catalog` crate.
//!
//! Every algorithm module declares `pub const ENTRY: algo::Entry` (or one per variant, e.g.
//! `cuckoo::ENTRY_1` and `ENTRY_4`): its name, the tasks it answers, which key lengths it can
//! hold, how to build it from a parameter table, its defaults, and how a run narrows it when it
//! serves flow-size queries alone. The runner, the lab and the CLI read these facts through the
//! catalog; none of them matches on an algorithm's name.

use serde::Serialize;

use crate::{Algorithm, BuildCtx, ConfigError, Task};

/// Which key lengths an algorithm can hold, given the [`BuildCtx::key_len`] it was built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyFit {
    /// Any key (hashing sketches, counters, heaps).
    Any,
    /// Keys of exactly `key_len` bytes: the algorithms that decode keys from fixed bit layouts
    /// (reversible sketches, the spreader structures that split a `pair` key in halves).
    Exact,
    /// Keys of at most `key_len` bytes: tables that store keys packed in `key_len` bytes.
    AtMost,
}

impl KeyFit {
    /// Whether a key of `len` bytes fits a structure built for `key_len`-byte keys.
    #[inline]
    pub fn accepts(self, len: usize, key_len: usize) -> bool {
        match self {
            KeyFit::Any => true,
            KeyFit::Exact => len == key_len,
            KeyFit::AtMost => len <= key_len,
        }
    }
}

/// Builds an algorithm from its parameter table (missing fields take the defaults; unknown
/// fields are an error naming the field).
pub type BuildFn = fn(&toml::Table, &BuildCtx) -> Result<Box<dyn Algorithm>, ConfigError>;

/// An instance's state as bytes (`Entry::save`); `None` when it is not the entry's type.
pub type SaveFn = fn(&dyn Algorithm) -> Option<Result<Vec<u8>, StateError>>;

/// An instance from its saved bytes (`Entry::load`).
pub type LoadFn = fn(&[u8]) -> Result<Box<dyn Algorithm>, StateError>;

/// One algorithm's facts.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// Stable snake_case name; equals the built algorithm's [`Algorithm::name`].
    pub name: &'static str,
    /// Every task the algorithm can answer in some configuration. A configuration may narrow
    /// it ([`Algorithm::tasks`] of the built instance says what that instance answers); the
    /// spreader structures list both `superspreaders` and `ddos` (the side is a build option).
    pub tasks: &'static [Task],
    /// Which key lengths it holds; the runner counts the keys it cannot hold as `skipped`.
    pub fit: KeyFit,
    pub build: BuildFn,
    /// Bytes of state the algorithm would allocate with these parameters and this context (key
    /// length, side), computed from the parsed and validated configuration without allocating,
    /// so that a run can refuse a configuration before building it. Agrees with the built
    /// instance's [`Algorithm::memory_bytes`]; for structures that grow with the keys, the entry's
    /// doc comment says which figure it is (the bytes at the configured capacity, or those
    /// allocated at construction plus a per-key bound). A size whose bytes overflow `u64` is a
    /// [`ConfigError::Invalid`] naming the field.
    pub memory: fn(&toml::Table, &BuildCtx) -> Result<u64, ConfigError>,
    /// `reset` returns the algorithm to its built, empty state (every algorithm but
    /// ewma_change, whose reset carries the epoch into its prediction). Then a run keeping the
    /// previous epoch's state for heavy changers swaps the two instances and resets the older
    /// one, instead of copying the whole state every epoch.
    pub resets_to_empty: bool,
    /// Its default parameters, as the table `build` would read (for `netsift algorithms`).
    pub defaults: fn() -> toml::Table,
    /// Parameters (a TOML table body, "" for none) a run sets when this instance serves
    /// `flow_size` alone and the user did not set them: Count-Min's heavy-hitter candidate set
    /// costs about as much per update as its counters and flow-size queries do not read it, so
    /// `candidates = 0`. The Agg-Evict paper's artifact runs Count-Min this way.
    pub flow_size_only: &'static str,
    /// Its state as bytes (the algorithm's serde form in postcard 1.x, whose wire format is
    /// specified and stable): what a snapshot (`crates/snapshot`) carries. `None` for a
    /// `dyn Algorithm` that is not this entry's type. Always [`save_state`] of the type.
    pub save: SaveFn,
    /// The inverse of `save`: an instance from its bytes, checked as the type's deserializer
    /// checks (a malformed state is an error, never a panic). Always [`load_state`] of the type, named.
    pub load: LoadFn,
    /// What one update of the default configuration costs, measured (see [`UpdateCost`]): the
    /// adaptive front's cost model (`front::AggMode::Auto`) weighs it against the aggregator's.
    pub cost: UpdateCost,
}

/// Nanoseconds one update of an algorithm's default configuration costs, on the u32 path
/// (4-byte keys, `update_batch_u32`) and the `FlowKey` path (wider keys; measured with
/// five-tuple keys), each the mean over a shuffled trace (random keys, so no cache luck).
/// Constants, not timed at run time: a run's decisions must not depend on the machine's load
/// (the adaptive front, `crates/front`, is deterministic given trace, configuration and seed).
/// They matter only relative to the aggregator's own cost (`aggevict::COST`) measured on the
/// same machine the same way.
///
/// Measured on the 2-core Zen 4 VM (release build, 2026-11-25, the machine shared with other
/// builds: thread CPU time keeps the load's time out, not its cache pollution) by
/// `cargo run --release -p catalog --example update_costs`: each algorithm alone with its
/// defaults, 1 M packets of shuffled Zipf(1.1) over 500 k flows in batches of 32, u32 keys and
/// five-tuple `FlowKey`s (pair keys where only those fit), least of 3 rounds, in the same
/// process and rounds as the aggregator's constants; every entry and the aggregator refitted
/// together (means of two runs, branch h-adapt), since figures taken in different sessions had
/// drifted apart by 15-35% against the aggregator's and tipped close decisions. A preset's
/// configurations have their own figures (`catalog::presets::cost`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UpdateCost {
    /// ns per update of a 4-byte key given as u32.
    pub u32_ns: f64,
    /// ns per update of a wider `FlowKey`.
    pub wide_ns: f64,
    /// ns per update of what Agg-Evict hands on (its evictions of a shuffled Zipf(0.8) stream,
    /// where aggregating is close to a tie, fed as they come with the aggregator running beside
    /// the algorithm, the aggregator's own time taken out) over ns per update of the stream
    /// itself: the aggregator keeps the heavy keys' packets, so its evictions are more the
    /// tail's (cold cells, new flows, new distinct values), and its table takes cache from the
    /// algorithm's state; dearer for some algorithms (Count-Min, FlowRadar, the exact tables),
    /// not for others (MRAC, FM). 1 where not measured (algorithms without 4-byte keys).
    pub behind: f64,
}

impl UpdateCost {
    /// The cost on the path a key of `key_len` bytes takes.
    pub fn ns(&self, key_len: usize) -> f64 {
        if key_len == 4 {
            self.u32_ns
        } else {
            self.wide_ns
        }
    }
}

/// A state that cannot be written or read back (`Entry::save`, `Entry::load`).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{algo} state: {reason}")]
pub struct StateError {
    pub algo: &'static str,
    pub reason: String,
}

/// `a`'s state as postcard bytes if it is a `T` (the body of every [`Entry::save`]).
pub fn save_state<T>(a: &dyn Algorithm) -> Option<Result<Vec<u8>, StateError>>
where
    T: Algorithm + Serialize,
{
    let t = crate::downcast::<T>(a)?;
    Some(postcard::to_stdvec(t).map_err(|e| StateError {
        algo: t.name(),
        reason: e.to_string(),
    }))
}

/// A `T` from postcard bytes (the body of every [`Entry::load`]): every byte must be read, the
/// type's own checks (`serde(try_from)`) run, then [`CheckState::check_state`]; a conversion
/// that allocates beyond its bytes does so within the [load limit](with_load_limit).
///
/// A state may be forged (issue 33: the snapshot's checksum guards against bit rot, not an
/// adversary), so nothing decoded is trusted: deserializing allocates only what the bytes hold
/// (serde caps a sequence's preallocation and postcard fails at the end of the input), every
/// allocation a conversion makes beyond that (a table rebuilt at its capacity) is checked first
/// ([`check_load_alloc`]), and `check_state` refuses any size, index or count that the verbs
/// would trust (a loop bound, an allocation in a query) unless it agrees with the configuration
/// and the other fields.
pub fn load_state<T>(algo: &'static str, bytes: &[u8]) -> Result<Box<dyn Algorithm>, StateError>
where
    T: Algorithm + CheckState + serde::de::DeserializeOwned,
{
    let err = |reason: String| StateError { algo, reason };
    let (t, rest) = postcard::take_from_bytes::<T>(bytes).map_err(|e| err(e.to_string()))?;
    if !rest.is_empty() {
        return Err(err(format!("{} bytes after the state", rest.len())));
    }
    t.check_state().map_err(err)?;
    Ok(Box::new(t))
}

/// What every type an [`Entry`] loads checks of itself once deserialized ([`load_state`]).
pub trait CheckState {
    /// `Ok` when the state is one that building and updating could have made, as far as the
    /// verbs rely on it: the configuration valid, every array as long as the configuration
    /// says, every stored index in range, every count that bounds a loop consistent with the
    /// data. The error is one line naming the field.
    fn check_state(&self) -> Result<(), String>;
}

thread_local! {
    /// Bytes a state loaded on this thread may take ([`with_load_limit`]).
    static LOAD_LIMIT: std::cell::Cell<u64> = const { std::cell::Cell::new(u64::MAX) };
}

/// Run `f` with every state loaded on this thread ([`load_state`]) limited to `bytes` bytes of
/// memory beyond what its input holds: a conversion that would allocate more (a table rebuilt at
/// a forged capacity) refuses before allocating ([`check_load_alloc`]). What a state's bytes
/// hold is bounded by their length (a decoded element takes at least one byte; a structure
/// that grows with its keys may legitimately hold more than its parameters' figure). The
/// previous limit is
/// restored afterwards (also on a panic). Limits nest: inside another, the smaller applies.
/// Without a limit a load takes what its state says (a run's own states).
pub fn with_load_limit<R>(bytes: u64, f: impl FnOnce() -> R) -> R {
    struct Restore(u64);
    impl Drop for Restore {
        fn drop(&mut self) {
            LOAD_LIMIT.with(|l| l.set(self.0));
        }
    }
    let _restore = Restore(LOAD_LIMIT.with(|l| l.replace(l.get().min(bytes))));
    f()
}

/// The current [`with_load_limit`] (`u64::MAX` when none is set).
pub fn load_limit() -> u64 {
    LOAD_LIMIT.with(|l| l.get())
}

/// Before a state's conversion allocates `bytes` that its input does not hold (a table rebuilt
/// at its configured capacity from a list of its entries): an error past the load limit, so a
/// forged capacity is refused instead of aborting the process.
pub fn check_load_alloc(what: &str, bytes: u64) -> Result<(), String> {
    let limit = load_limit();
    if bytes > limit {
        return Err(format!(
            "{what} would take {bytes} bytes, more than the {limit} the load allows"
        ));
    }
    Ok(())
}

impl Entry {
    /// Build with `params` (the catalog's one way to construct an algorithm).
    pub fn build(
        &self,
        params: &toml::Table,
        ctx: &BuildCtx,
    ) -> Result<Box<dyn Algorithm>, ConfigError> {
        (self.build)(params, ctx)
    }

    /// Bytes of state [`Entry::build`] would allocate with `params` (see [`Entry::memory`]; the
    /// field), without allocating.
    pub fn memory(&self, params: &toml::Table, ctx: &BuildCtx) -> Result<u64, ConfigError> {
        (self.memory)(params, ctx)
    }

    /// Parse `params` into the configuration `C` and compute its bytes with `bytes`: the body
    /// of every [`Entry::memory`] (`bytes` runs the configuration's own validation first).
    pub fn memory_with<C>(
        name: &'static str,
        params: &toml::Table,
        bytes: impl FnOnce(C) -> Result<u64, ConfigError>,
    ) -> Result<u64, ConfigError>
    where
        C: serde::de::DeserializeOwned,
    {
        bytes(crate::parse_params(name, params)?)
    }

    /// `factors` multiplied with overflow checks: the bytes of `field`'s allocation (e.g.
    /// `[capacity, 24]`). An overflow is a [`ConfigError::Invalid`] of `algo` naming `field`.
    pub fn product(
        algo: &'static str,
        field: &'static str,
        factors: &[u64],
    ) -> Result<u64, ConfigError> {
        factors
            .iter()
            .try_fold(1u64, |acc, &f| acc.checked_mul(f))
            .ok_or_else(|| overflow(algo, field, factors))
    }

    /// `terms` added with overflow checks (the parts of one state); an overflow names `field`.
    pub fn sum(algo: &'static str, field: &'static str, terms: &[u64]) -> Result<u64, ConfigError> {
        terms
            .iter()
            .try_fold(0u64, |acc, &t| acc.checked_add(t))
            .ok_or_else(|| ConfigError::Invalid {
                algo,
                field,
                reason: format!("the state's bytes ({terms:?}) overflow u64"),
            })
    }

    /// The `capacity()` of a std (hashbrown) map made `with_capacity(n)`: its buckets are the
    /// next power of two of `8n/7` (at least 4), of which 7/8 are usable (all but one below 8
    /// buckets). Very small maps (`n < 15`) may get a few more buckets on some hashbrown
    /// versions; the figure is exact from 15 on. Saturates instead of overflowing.
    pub fn map_capacity(n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let buckets = if n < 4 {
            4
        } else if n < 8 {
            8
        } else {
            (n.saturating_mul(8) / 7)
                .checked_next_power_of_two()
                .unwrap_or(u64::MAX)
        };
        if buckets < 8 {
            buckets - 1
        } else {
            buckets / 8 * 7
        }
    }

    pub fn answers(&self, t: Task) -> bool {
        self.tasks.contains(&t)
    }

    /// [`Entry::flow_size_only`] as a table (empty when there is no such rule; a rule that does
    /// not parse is caught by the catalog's tests).
    pub fn flow_size_only_params(&self) -> toml::Table {
        self.flow_size_only.parse().unwrap_or_default()
    }
}

fn overflow(algo: &'static str, field: &'static str, factors: &[u64]) -> ConfigError {
    let product = factors.iter().map(|&f| f as f64).product::<f64>();
    ConfigError::Invalid {
        algo,
        field,
        reason: format!(
            "{} bytes overflow u64 (about {:.3e} bytes, {:.0} GiB)",
            factors
                .iter()
                .map(|f| f.to_string())
                .collect::<Vec<_>>()
                .join(" x "),
            product,
            product / (1u64 << 30) as f64
        ),
    }
}

/// The default parameter table of a configuration type (its `Default`, serialized).
pub fn defaults_of<C: Serialize + Default>() -> toml::Table {
    toml::Table::try_from(C::default()).unwrap_or_default()
}

/// Parse `params` into the configuration `C` and build with `new`: the body of every
/// [`BuildFn`].
pub fn build_with<C, A>(
    name: &'static str,
    params: &toml::Table,
    new: impl FnOnce(C) -> Result<A, ConfigError>,
) -> Result<Box<dyn Algorithm>, ConfigError>
where
    C: serde::de::DeserializeOwned,
    A: Algorithm,
{
    Ok(Box::new(new(crate::parse_params(name, params)?)?))
}
