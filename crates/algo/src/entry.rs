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
    /// Its default parameters, as the table `build` would read (for `netsift algorithms`).
    pub defaults: fn() -> toml::Table,
    /// Parameters (a TOML table body, "" for none) a run sets when this instance serves
    /// `flow_size` alone and the user did not set them: Count-Min's heavy-hitter candidate set
    /// costs about as much per update as its counters and flow-size queries do not read it, so
    /// `candidates = 0`. The Agg-Evict paper's artifact runs Count-Min this way.
    pub flow_size_only: &'static str,
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

    pub fn answers(&self, t: Task) -> bool {
        self.tasks.contains(&t)
    }

    /// [`Entry::flow_size_only`] as a table (empty when there is no such rule; a rule that does
    /// not parse is caught by the catalog's tests).
    pub fn flow_size_only_params(&self) -> toml::Table {
        self.flow_size_only.parse().unwrap_or_default()
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
