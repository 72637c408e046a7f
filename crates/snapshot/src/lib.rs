//! Versioned binary snapshots of one host's epoch (SketchVisor, `../shared/papers/sketchvisor.txt`
//! section 3.1: every host sends its local result to the control plane at each epoch's end),
//! and the control plane's merge of several hosts' snapshots (section 5: sum the sketches, merge
//! the fast-path tables, sum V and E).
//!
//! A snapshot holds every instance's normal-path state (through its catalog entry's
//! `save`/`load`, the algorithm's serde form), per key kind the fast path's [`visor::Summary`]
//! and the epoch's [`visor::PathCounts`], the key kinds, seed, host id, epoch index and time
//! span, whether the run had exact truth, and `params`: the run's parameters that must match
//! for a merge, as canonical TOML, with their hash `params_hash`.
//!
//! The byte layout is `docs/snapshot-format.md`: a 32-byte header (magic, format version, header
//! length, body length, checksum) and a postcard 1.x body (postcard's wire format is specified
//! and stable across its 1.x releases). Hash and checksum are xxh3-64 with seed 0: the function
//! `key::HashFn` is built on (one hash family), specified (XXH3), the same on every host and
//! already a dependency; a checksum guards against truncation and bit rot, not against an
//! adversary.
//!
//! Invariants: `decode` never panics (a cargo-fuzz target, `fuzz/fuzz_targets/decode_snapshot.rs`);
//! every error is one line; `decode(encode(s)) == s`; a restored instance answers as the saved
//! one (tests for every catalog entry).

#![forbid(unsafe_code)]

use std::fmt;
use std::path::{Path, PathBuf};

use algo::Algorithm;
use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::{xxh3_64, Xxh3};

pub mod forge;
mod merge;
mod validate;
pub use merge::{merge_epoch, Merged};
pub use validate::validate;

/// First 8 bytes of every snapshot file.
pub const MAGIC: [u8; 8] = *b"NSIFTSNP";
/// The format version this build writes and the only one it reads.
/// 2: Space-Saving's state is a Stream-Summary (its counters with their errors), no longer a
/// heap; version 1 files are refused naming their version.
/// 3: instameasure's and rcc's table slots hold capture times (first/last packet, ns) and a
/// 16-bit hash tag; version 2 files are refused naming their version.
/// 4: the epoch span says why it is partial (`started_mid`, `interrupted`) and the part of the
/// epoch this host's capture covered (`covered_from_ns`, `covered_to_ns`); version 3 files are
/// refused naming their version.
pub const VERSION: u16 = 4;
/// Bytes before the body (versions 1 to 4).
pub const HEADER_LEN: usize = 32;
/// File name extension of a snapshot.
pub const EXT: &str = "nss";

/// One host's local result of one epoch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Host id (`--host`): letters, digits, `.`, `_`, `-`.
    pub host: String,
    pub epoch: EpochSpan,
    /// The run's master seed (also in `params`; kept apart to name it when seeds differ).
    pub seed: u64,
    /// The run's key kinds (names, `key::KeyKind::name`), in the runner's order.
    pub kinds: Vec<String>,
    /// The run kept exact ground truth (this host's truth is not carried: `netsift merge
    /// --truth` reads the traces).
    pub truth: bool,
    /// xxh3-64 of `params`.
    pub params_hash: u64,
    /// The parameters that must match for a merge (algorithms and their parameters, seed, key
    /// kind, weight, IPv6 sizing, tunnel, epoch spec, preset), canonical TOML.
    pub params: String,
    /// The whole run configuration (TOML, as `measure::RunConfig` reads it): a merge answers
    /// the same tasks from it.
    pub config: String,
    /// Every instance, in the runner's order.
    pub instances: Vec<InstanceState>,
    /// Per key kind (same order as `kinds`) the fast path's part; empty without a fast path.
    pub fast: Vec<FastPart>,
}

impl Snapshot {
    /// An idle epoch's snapshot: no packet, so no instance state nor fast-path part (a few KB:
    /// the header and configuration). A host writes one for a time epoch that passed without
    /// traffic, so that a controller knows the host is alive and merges nothing for it.
    pub fn is_idle(&self) -> bool {
        self.epoch.packets == 0 && self.instances.is_empty()
    }
}

/// Which epoch, and what it held on this host.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpochSpan {
    pub index: u64,
    /// Capture time of the epoch's first and last packet (ns).
    pub first_ns: u64,
    pub last_ns: u64,
    pub packets: u64,
    pub bytes: u64,
    /// This host's capture did not cover the whole epoch: `started_mid` or `interrupted`.
    pub partial: bool,
    /// The capture started after the epoch's start (epochs on a time grid: a live agent's
    /// Unix-time epochs, a restarted agent's first).
    pub started_mid: bool,
    /// A signal ended the capture before the epoch's end.
    pub interrupted: bool,
    /// The part of the epoch this host's capture covered (capture time, ns): a time epoch's
    /// bounds `[start, end)`, from the capture's start and to its end where they fall within;
    /// a packet epoch's first and last packet.
    pub covered_from_ns: u64,
    pub covered_to_ns: u64,
}

/// One instance's normal-path state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceState {
    /// Catalog name (`count_min`, ...).
    pub algorithm: String,
    /// Key kind name.
    pub kind: String,
    /// `src` or `dst` (the spreader structures' host side).
    pub side: String,
    /// The parameters it was built with (TOML).
    pub params: String,
    /// `algo::Entry::save` of the instance.
    pub state: Vec<u8>,
}

/// One key kind's fast path on this host for the epoch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FastPart {
    pub kind: String,
    /// The fast path's table, `V` and `E`; `None` when the run had no fast path.
    pub summary: Option<visor::Summary>,
    /// Packets and bytes per path.
    pub paths: visor::PathCounts,
}

/// Why bytes are not a snapshot (one line each).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FormatError {
    #[error("{0} bytes, shorter than the {HEADER_LEN}-byte header: truncated or not a snapshot")]
    Short(usize),
    #[error("not a netsift snapshot (magic {0:02x?})")]
    Magic([u8; 8]),
    #[error("snapshot format version {found}, this netsift reads version {VERSION}")]
    Version { found: u16 },
    #[error("header length {0}, version {VERSION} has {HEADER_LEN}")]
    HeaderLen(u16),
    #[error("reserved header bytes 12..16 are {0:#x}, not 0")]
    Reserved(u32),
    #[error("truncated: the header announces {expected} body bytes, {found} follow")]
    Truncated { expected: u64, found: u64 },
    #[error("{0} bytes after the body")]
    Trailing(u64),
    #[error("checksum mismatch (stored {stored:#018x}, computed {computed:#018x}): corrupted")]
    Checksum { stored: u64, computed: u64 },
    #[error("body does not decode: {0}")]
    Body(String),
    #[error("params_hash {stored:#018x} is not the hash of its params ({computed:#018x})")]
    ParamsHash { stored: u64, computed: u64 },
}

/// A snapshot file that cannot be read, named.
#[derive(Debug)]
pub struct FileError {
    pub file: PathBuf,
    pub reason: String,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "snapshot {}: {}", self.file.display(), self.reason)
    }
}

impl std::error::Error for FileError {}

/// The hash of a snapshot's `params` text.
pub fn params_hash(params: &str) -> u64 {
    xxh3_64(params.as_bytes())
}

/// `s` as the snapshot file's bytes (header and body).
pub fn encode(s: &Snapshot) -> Vec<u8> {
    // Postcard into a Vec cannot fail for these types (no maps with non-string keys, no
    // unsized sequences): an error here is a bug, not input.
    frame(&postcard::to_stdvec(s).expect("a snapshot serializes"))
}

/// A body behind a current-version header with its lengths and checksum (what [`encode`] writes
/// around the postcard body; the fuzz target frames arbitrary bodies with it, so the fuzzer
/// reaches the body's decoder past the checksum).
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(HEADER_LEN as u16).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    let sum = checksum(&out, body);
    out.extend_from_slice(&sum.to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// xxh3-64 of the header's first 24 bytes and the body.
fn checksum(head: &[u8], body: &[u8]) -> u64 {
    let mut h = Xxh3::new();
    h.update(&head[..24]);
    h.update(body);
    h.digest()
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// A snapshot from its file's bytes: magic, version, lengths, checksum, then the body.
pub fn decode(bytes: &[u8]) -> Result<Snapshot, FormatError> {
    if bytes.len() < HEADER_LEN {
        // A file cut inside the header still says what it is if the magic survived.
        if bytes.len() >= 8 && bytes[..8] != MAGIC {
            let mut m = [0; 8];
            m.copy_from_slice(&bytes[..8]);
            return Err(FormatError::Magic(m));
        }
        return Err(FormatError::Short(bytes.len()));
    }
    let mut magic = [0; 8];
    magic.copy_from_slice(&bytes[..8]);
    if magic != MAGIC {
        return Err(FormatError::Magic(magic));
    }
    let version = u16_at(bytes, 8);
    if version != VERSION {
        return Err(FormatError::Version { found: version });
    }
    let header = u16_at(bytes, 10);
    if header as usize != HEADER_LEN {
        return Err(FormatError::HeaderLen(header));
    }
    let reserved = u32_at(bytes, 12);
    if reserved != 0 {
        return Err(FormatError::Reserved(reserved));
    }
    let len = u64_at(bytes, 16);
    let found = (bytes.len() - HEADER_LEN) as u64;
    if found < len {
        return Err(FormatError::Truncated {
            expected: len,
            found,
        });
    }
    if found > len {
        return Err(FormatError::Trailing(found - len));
    }
    let body = &bytes[HEADER_LEN..];
    let stored = u64_at(bytes, 24);
    let computed = checksum(bytes, body);
    if stored != computed {
        return Err(FormatError::Checksum { stored, computed });
    }
    let (s, rest) = postcard::take_from_bytes::<Snapshot>(body)
        .map_err(|e| FormatError::Body(e.to_string()))?;
    if !rest.is_empty() {
        return Err(FormatError::Body(format!(
            "{} bytes after the snapshot",
            rest.len()
        )));
    }
    let computed = params_hash(&s.params);
    if s.params_hash != computed {
        return Err(FormatError::ParamsHash {
            stored: s.params_hash,
            computed,
        });
    }
    Ok(s)
}

/// Read and decode the snapshot file `path`. The 32-byte header is read and checked first
/// (magic, version, header length, reserved bytes), and the body length it announces against
/// the file's size and a bound of 1 GiB, before any of the body is read: a file that is not a
/// snapshot, or announces more than it holds, costs 32 bytes of memory, not its size.
pub fn read(path: &Path) -> Result<Snapshot, FileError> {
    use std::io::Read;
    /// The largest body read: a snapshot of the default task set is a few MB.
    const MAX_BODY: u64 = 1 << 30;
    let err = |reason: String| FileError {
        file: path.to_path_buf(),
        reason,
    };
    let file = std::fs::File::open(path).map_err(|e| err(e.to_string()))?;
    let size = file
        .metadata()
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    let mut head = Vec::with_capacity(HEADER_LEN);
    (&file)
        .take(HEADER_LEN as u64)
        .read_to_end(&mut head)
        .map_err(|e| err(e.to_string()))?;
    // The header alone: every check before the body's (a good header with a body announced
    // is "truncated" with nothing after it).
    let len = match decode(&head) {
        Err(FormatError::Truncated { expected, .. }) => expected,
        Err(e) => return Err(err(e.to_string())),
        Ok(s) => return Ok(s),
    };
    if let Some(found) = size.map(|s| s.saturating_sub(HEADER_LEN as u64)) {
        if found < len {
            return Err(err(FormatError::Truncated {
                expected: len,
                found,
            }
            .to_string()));
        }
        if found > len {
            return Err(err(FormatError::Trailing(found - len).to_string()));
        }
    }
    if len > MAX_BODY {
        return Err(err(format!(
            "the header announces {len} body bytes, more than the {MAX_BODY} this netsift reads"
        )));
    }
    let mut bytes = head;
    bytes.reserve_exact(len as usize);
    // One byte more than announced: a file that grew is trailing bytes, not a silent cut.
    (&file)
        .take(len + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| err(e.to_string()))?;
    decode(&bytes).map_err(|e| err(e.to_string()))
}

/// Whether `host` is a usable host id (it goes into file names).
pub fn check_host(host: &str) -> Result<(), String> {
    if host.is_empty() || host.len() > 64 {
        return Err(format!(
            "host id must be 1 to 64 characters, got {}",
            host.len()
        ));
    }
    if let Some(c) = host
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "host id {host:?}: {c:?} is not allowed (letters, digits, '.', '_', '-')"
        ));
    }
    if host.starts_with('.') {
        return Err(format!("host id {host:?} must not start with '.'"));
    }
    Ok(())
}

/// The file name of `host`'s snapshot of epoch `index`.
pub fn file_name(host: &str, index: u64) -> String {
    format!("{host}-epoch{index:06}.{EXT}")
}

/// Write `s` into `dir` (created if missing) as [`file_name`]: a temporary file beside it,
/// flushed to disk (fsync), renamed, and the directory flushed, so a reader never sees half a
/// snapshot and a returned path survives a crash or power loss (an agent's spool). Returns the
/// path; an error keeps its kind (`ErrorKind::StorageFull` for a full disk) and names the file.
pub fn write(dir: &Path, s: &Snapshot) -> std::io::Result<PathBuf> {
    use std::io::{Error, ErrorKind, Write};
    check_host(&s.host).map_err(|e| Error::new(ErrorKind::InvalidInput, e))?;
    std::fs::create_dir_all(dir).map_err(|e| {
        Error::new(
            e.kind(),
            format!("cannot create snapshot directory {}: {e}", dir.display()),
        )
    })?;
    let path = dir.join(file_name(&s.host, s.epoch.index));
    let tmp = dir.join(format!(".{}.tmp", file_name(&s.host, s.epoch.index)));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&encode(s))?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, &path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::new(
            e.kind(),
            format!("cannot write snapshot {}: {e}", path.display()),
        )
    })?;
    Ok(path)
}

/// `a` saved through its catalog entry (`algo::Entry::save`).
pub fn save_instance(a: &dyn Algorithm) -> Result<Vec<u8>, String> {
    let entry = catalog::lookup(a.name()).map_err(|e| e.to_string())?;
    match (entry.save)(a) {
        Some(r) => r.map_err(|e| e.to_string()),
        None => Err(format!(
            "{}: the instance is not the type of its catalog entry",
            a.name()
        )),
    }
}

/// An instance restored through its catalog entry (`algo::Entry::load`), within the memory its
/// `params` give it (`algo::with_load_limit`: the most the entry computes for them, as built or
/// narrowed for flow size alone, at either key length of its kind): a forged state that claims
/// more is refused before it allocates ([`validate`] checks the figure exactly).
pub fn restore_instance(i: &InstanceState) -> Result<Box<dyn Algorithm>, String> {
    let entry = catalog::lookup(&i.algorithm).map_err(|e| e.to_string())?;
    let limit = params_memory(entry, i)?;
    let a = algo::with_load_limit(limit, || (entry.load)(&i.state)).map_err(|e| e.to_string())?;
    if a.name() != i.algorithm {
        return Err(format!(
            "an instance named {} holds a {} state",
            i.algorithm,
            a.name()
        ));
    }
    Ok(a)
}

/// The most memory instance `i`'s `params` let its entry allocate: at both key lengths of its
/// kind (IPv4 and IPv6 sizing), as built and as narrowed for flow size alone.
fn params_memory(entry: &algo::Entry, i: &InstanceState) -> Result<u64, String> {
    use std::str::FromStr;
    let kind = key::KeyKind::from_str(&i.kind).map_err(|e| e.to_string())?;
    let side = if i.side == "dst" {
        algo::Side::Dst
    } else {
        algo::Side::Src
    };
    let params: toml::Table = i
        .params
        .parse()
        .map_err(|e: toml::de::Error| format!("params: {}", e.message().trim_end()))?;
    let mut narrowed = params.clone();
    for (k, v) in entry.flow_size_only_params() {
        narrowed.entry(k).or_insert(v);
    }
    let mut most = None;
    for v6 in [false, true] {
        let ctx = algo::BuildCtx {
            key_len: kind.len(v6),
            side,
            ..algo::BuildCtx::default()
        };
        for p in [&params, &narrowed] {
            if let Ok(m) = entry.memory(p, &ctx) {
                most = Some(most.unwrap_or(0).max(m));
            }
        }
    }
    most.ok_or_else(|| {
        let ctx = algo::BuildCtx {
            key_len: kind.len(false),
            side,
            ..algo::BuildCtx::default()
        };
        match entry.memory(&params, &ctx) {
            Err(e) => format!("params: {e}"),
            Ok(_) => "params: no memory figure".into(),
        }
    })
}

/// The dotted paths where two TOML values differ (`seed`, `measure[1].params.width`).
fn differences(a: &toml::Value, b: &toml::Value, at: &str, out: &mut Vec<String>) {
    use toml::Value;
    match (a, b) {
        (Value::Table(x), Value::Table(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let path = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => differences(u, v, &path, out),
                    _ => out.push(path),
                }
            }
        }
        // Element by element, then the elements only one side has: a `measure` list one entry
        // longer names that entry, not the whole list (whose texts begin alike).
        (Value::Array(x), Value::Array(y)) => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                differences(u, v, &format!("{at}[{i}]"), out);
            }
            for i in x.len().min(y.len())..x.len().max(y.len()) {
                out.push(format!("{at}[{i}]"));
            }
        }
        _ if a == b => {}
        _ => out.push(at.to_string()),
    }
}

/// What differs between two snapshots' merge parameters, for a message: `seed 1 vs 2`,
/// `measure[0].params.width`, ...
pub fn params_diff(a: &Snapshot, b: &Snapshot) -> String {
    let parse = |s: &str| s.parse::<toml::Table>().map(toml::Value::Table);
    let mut out = vec![];
    match (parse(&a.params), parse(&b.params)) {
        (Ok(x), Ok(y)) => differences(&x, &y, "", &mut out),
        _ => out.push("params (unreadable)".into()),
    }
    let shown: Vec<String> = out
        .iter()
        .take(8)
        .map(|p| {
            let get = |s: &Snapshot| lookup(&s.params, p).unwrap_or_else(|| "absent".into());
            let (x, y) = apart(&get(a), &get(b));
            format!("{p} ({x} vs {y})")
        })
        .collect();
    let more = out.len().saturating_sub(shown.len());
    let mut s = shown.join(", ");
    if more > 0 {
        s.push_str(&format!(" and {more} more"));
    }
    if s.is_empty() {
        s = "params text (equal values, other encoding)".into();
    }
    s
}

/// Two values' texts for a message, at most 40 characters each: from a little before where they
/// first differ when they begin alike (two long texts cut at the same place would read the
/// same).
fn apart(x: &str, y: &str) -> (String, String) {
    let same = x.chars().zip(y.chars()).take_while(|(a, b)| a == b).count();
    let from = same.saturating_sub(8);
    let cut = |s: &str| {
        let tail: String = s.chars().skip(from).collect();
        let mut t: String = tail.chars().take(40).collect();
        if tail.chars().count() > 40 {
            t.push_str("...");
        }
        if from > 0 {
            t.insert_str(0, "...");
        }
        t
    };
    (cut(x), cut(y))
}

/// The value at a dotted path of `params`, as TOML text (for messages).
fn lookup(params: &str, path: &str) -> Option<String> {
    let mut v = toml::Value::Table(params.parse::<toml::Table>().ok()?);
    for part in path.split('.') {
        let (name, idx) = match part.split_once('[') {
            Some((n, rest)) => (n, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        v = v.get(name)?.clone();
        if let Some(i) = idx {
            v = v.get(i)?.clone();
        }
    }
    Some(v.to_string())
}

/// Check that snapshot `s` (named `f` in messages) can be merged with `s0` (named `f0`): same
/// seed, parameters (the message names what differs), key kinds and instances. The pairwise
/// part of [`check_agree`], and what a controller checks of each snapshot as it arrives.
pub fn check_compatible(f0: &Path, s0: &Snapshot, f: &Path, s: &Snapshot) -> Result<(), String> {
    let name = |p: &Path| p.display().to_string();
    if s.seed != s0.seed {
        return Err(format!(
            "{} has seed {}, {} has seed {}: snapshots of other seeds do not merge",
            name(f),
            s.seed,
            name(f0),
            s0.seed
        ));
    }
    if s.params_hash != s0.params_hash {
        return Err(format!(
            "{} was measured with other parameters than {}: {}",
            name(f),
            name(f0),
            params_diff(s0, s)
        ));
    }
    if s.kinds != s0.kinds {
        return Err(format!(
            "{} has key kinds {:?}, {} has {:?}",
            name(f),
            s.kinds,
            name(f0),
            s0.kinds
        ));
    }
    // Each instance's own parameters too: they follow from `params` on every honest host, and
    // `validate` sizes a restored state by them, so a forged snapshot that keeps `params` but
    // claims larger instances is refused here.
    let shape = |s: &Snapshot| -> Vec<String> {
        s.instances
            .iter()
            .map(|i| {
                let params = i.params.trim().replace('\n', ", ");
                format!("{} {} {} {{{params}}}", i.algorithm, i.kind, i.side)
            })
            .collect()
    };
    // An idle epoch's snapshot holds no instance: nothing to compare.
    let (a, b) = (shape(s), shape(s0));
    if !s.is_idle() && !s0.is_idle() && a != b {
        let at = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
        let none = String::from("none");
        return Err(format!(
            "{} holds other instances than {} (instance {at}: {} vs {})",
            name(f),
            name(f0),
            a.get(at).unwrap_or(&none),
            b.get(at).unwrap_or(&none)
        ));
    }
    Ok(())
}

/// Check that snapshots can be merged: same parameters (hash; the message names what differs
/// and the two files), same seed, same key kinds and instances, no host twice in an epoch, and
/// every host has the same epochs. `files` and `snaps` are parallel.
pub fn check_agree(files: &[PathBuf], snaps: &[Snapshot]) -> Result<(), String> {
    let (Some(f0), Some(s0)) = (files.first(), snaps.first()) else {
        return Err("no snapshot given".into());
    };
    for (f, s) in files.iter().zip(snaps).skip(1) {
        check_compatible(f0, s0, f, s)?;
    }
    // (host, epoch) once; every host the same epochs.
    let mut by_host: std::collections::BTreeMap<&str, Vec<(u64, &PathBuf)>> = Default::default();
    for (f, s) in files.iter().zip(snaps) {
        by_host
            .entry(s.host.as_str())
            .or_default()
            .push((s.epoch.index, f));
    }
    let mut reference: Option<(&str, Vec<u64>)> = None;
    for (host, list) in &mut by_host {
        list.sort();
        for w in list.windows(2) {
            if w[0].0 == w[1].0 {
                return Err(format!(
                    "host {host} epoch {} twice: {} and {}",
                    w[0].0,
                    w[0].1.display(),
                    w[1].1.display()
                ));
            }
        }
        let epochs: Vec<u64> = list.iter().map(|e| e.0).collect();
        match &reference {
            None => reference = Some((host, epochs)),
            Some((h0, e0)) if *e0 != epochs => {
                return Err(format!(
                    "host {host} has epochs {epochs:?}, host {h0} has {e0:?}: every host must \
                     give the same epochs"
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
