//! Capture readers: classic pcap, pcapng and the fixed-size key traces of sketch research.
//!
//! A [`Capture`] owns the bytes of one trace and hands out [`Record`]s that borrow from them: a
//! packet frame (`Body::Frame`, zero-copy slice of the capture) or an already-parsed flow tuple
//! (`Body::Tuple`, from key traces). Nothing is allocated or copied per record, so the reader
//! keeps up with a 50 Mpps pipeline.
//!
//! Files are memory-mapped. Stdin, pipes and character devices (`tcpdump -w - | netsift run -`,
//! `<(cmd)`) cannot be mapped, and reading them fully first would hold a live capture until it
//! ends and grow without bound: [`Capture::for_each_streamed`] reads them in chunks and hands
//! each buffer to the same record parsers, so memory stays at one chunk or one record and records
//! arrive as they are captured (see `stream.rs`). The slice API ([`Capture::records`],
//! [`Capture::for_each`], [`Capture::bytes`]) still works on such a capture, by reading the rest
//! into memory on first use.
//!
//! Errors never panic and never hide: the first malformed structure stops the stream with a
//! [`TraceError`] naming the file, the byte offset of the offending record or block, and why.
//! Every whole record before it has already been delivered.
//!
//! Formats and the choices made where the specifications leave room:
//!
//! * **pcap** (draft-ietf-opsawg-pcap): magics `a1b2c3d4` (µs) and `a1b23c4d` (ns), both byte
//!   orders, any snaplen; versions 2.0 to 2.4 (and DG/UX's 543.0), as libpcap, with the length
//!   fields of versions before 2.3 swapped back; Kuznetzov's modified format (`a1b2cd34`, 8 more
//!   bytes per record header). Other versions are refused, naming the version. The link type is
//!   the low 16 bits of the header's LinkType field (the upper bits carry FCS information,
//!   ignored). `wire_len = orig_len`, even where `incl_len` is larger (a corrupt header; some
//!   writers leave `orig_len` zero): tshark's `frame.len`, so byte counts match it; the frame
//!   holds the `incl_len` captured bytes. A record longer than [`MAX_RECORD_LEN`] is rejected as
//!   corrupt before looking further.
//! * **pcapng** (draft-ietf-opsawg-pcapng): sections in either byte order, each resetting the
//!   interface list; Interface Description Blocks with `if_tsresol` and `if_tsoffset`; Enhanced,
//!   Simple and (obsolete) Packet Blocks. Simple Packet Blocks carry no timestamp: `ts_ns = 0`.
//!   `wire_len` is the block's original length, as for pcap (tshark's `frame.len`).
//!   Other block types are skipped by their length.
//! * **key traces** (`keys4`, `keys13`, `keys21`), network byte order, no header: see
//!   [`Format`]. They carry no packet length, so `wire_len = 0`; consumers that count bytes
//!   must count packets instead for these traces.
//!
//! Timestamps are u64 nanoseconds since the Unix epoch, saturating at both ends.
//!
//! Inputs that are no trace get a reason rather than "unknown format": an empty file; a gzip,
//! zstd, xz, bzip2 or lz4 file (with the command that decompresses it into `netsift run -`; we
//! do not decompress); a second `-` in one process (stdin can be read only once).

#![warn(clippy::undocumented_unsafe_blocks)]

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::iter::FusedIterator;
use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

pub use key::Tuple;

mod keys;
pub use keys::KEYS4_BLOCK;
mod merge;
pub use merge::{merge_by_time, TimeMerged};
mod pcap;
mod pcapng;
mod stream;
pub mod write;

/// Longest single record (pcap `incl_len`) accepted: anything larger is a corrupt header, not a
/// packet (libpcap's own ceiling is 256 KiB by default; we allow jumbo captures generously).
/// Files up to this size are pre-faulted when mapped (see `Capture::open`).
const POPULATE_LIMIT: u64 = 4 << 30;
/// Files from this size up to [`POPULATE_LIMIT`] are pre-faulted by a thread beside the reader
/// rather than by the mapping call on the reader's thread ([`Mapped::prefault`]).
const PREFAULT_AHEAD_FROM: u64 = 64 << 20;

pub const MAX_RECORD_LEN: u32 = 256 << 20;

const FORMAT_NAMES: &str = "pcap, pcapng, keys4, keys13, keys21";

/// Bytes a pre-faulting read maps ([`Mapped::prefault`]): Linux's default `fault_around_bytes`
/// (a fault maps the page-cached pages around it, up to this many bytes, aligned); one page
/// elsewhere.
const FAULT_AROUND: usize = if cfg!(target_os = "linux") {
    64 << 10
} else {
    4 << 10
};

/// Set when `-` is first opened: stdin can back one capture per process.
static STDIN_TAKEN: AtomicBool = AtomicBool::new(false);

/// Trace formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Classic libpcap file.
    Pcap,
    /// pcapng file.
    Pcapng,
    /// 4-byte records: one IPv4 address or any 32-bit key, network byte order. Yielded as a
    /// [`Tuple`] whose `src` holds the 4 bytes; `dst`, ports and protocol are zero, `v6` false.
    Keys4,
    /// 13-byte records: src IP, dst IP, src port, dst port, protocol (network byte order); the
    /// IPv4 five-tuple layout of [`key::KeyKind::FiveTuple`]. `ts_ns = 0`.
    Keys13,
    /// 21-byte records: the 13 bytes of `Keys13`, then the timestamp as a **little-endian** u64
    /// in nanoseconds (our definition; [`write::KeysWriter`] writes the same).
    Keys21,
}

impl Format {
    pub const ALL: [Format; 5] = [
        Format::Pcap,
        Format::Pcapng,
        Format::Keys4,
        Format::Keys13,
        Format::Keys21,
    ];

    /// Name used on the command line (`--format`).
    pub fn name(self) -> &'static str {
        match self {
            Format::Pcap => "pcap",
            Format::Pcapng => "pcapng",
            Format::Keys4 => "keys4",
            Format::Keys13 => "keys13",
            Format::Keys21 => "keys21",
        }
    }

    /// Whether records carry capture times: `keys4` and `keys13` have none (`ts_ns = 0`), so
    /// such traces cannot be merged by time ([`merge_by_time`]).
    pub fn timed(self) -> bool {
        !matches!(self, Format::Keys4 | Format::Keys13)
    }

    /// Record size of a key-trace format; `None` for packet captures.
    pub fn key_record_len(self) -> Option<usize> {
        match self {
            Format::Keys4 => Some(keys::LEN4),
            Format::Keys13 => Some(keys::LEN13),
            Format::Keys21 => Some(keys::LEN21),
            Format::Pcap | Format::Pcapng => None,
        }
    }

    /// Key-trace format implied by a file extension: `.keys4`, `.keys13`, `.keys21`, and `.dat`
    /// (the 13-byte 5-tuple traces of the sketch-research code bases).
    pub fn from_extension(ext: &str) -> Option<Format> {
        match ext {
            "keys4" => Some(Format::Keys4),
            "keys13" | "dat" => Some(Format::Keys13),
            "keys21" => Some(Format::Keys21),
            _ => None,
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown trace format `{0}` (expected one of: {FORMAT_NAMES})")]
pub struct UnknownFormat(pub String);

impl FromStr for Format {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| UnknownFormat(s.to_string()))
    }
}

/// A trace reading error: `"<file>: offset <N>: <reason>"`.
#[derive(Debug, thiserror::Error)]
#[error("{file}: offset {offset}: {kind}")]
pub struct TraceError {
    pub file: String,
    /// Byte offset of the record or block at fault (0 for whole-file problems).
    pub offset: u64,
    pub kind: TraceErrorKind,
}

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceErrorKind {
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
    #[error(
        "unknown trace format: no pcap or pcapng magic number and no key-trace extension \
         (.keys4, .keys13, .keys21, .dat); choose one with --format ({FORMAT_NAMES})"
    )]
    UnknownFormat,
    #[error("not a {format} file: magic number {found:#010x}")]
    BadMagic { format: Format, found: u32 },
    #[error("empty file (0 bytes)")]
    EmptyFile,
    #[error("empty input: stdin ended before its first byte")]
    EmptyStdin,
    #[error(
        "{method}-compressed; netsift reads uncompressed captures: decompress it first, \
         e.g. `{tool} {file} | netsift run -`"
    )]
    Compressed {
        method: &'static str,
        tool: &'static str,
        /// The file, quoted for a POSIX shell; `FILE` for stdin.
        file: String,
    },
    #[error("stdin was already read by an earlier `-`; it can be read only once")]
    StdinTaken,
    #[error(
        "unsupported pcap version {major}.{minor} (2.0 to 2.4 and DG/UX's 543.0 are read, as by \
         libpcap)"
    )]
    UnsupportedVersion { major: u16, minor: u16 },
    #[error("file header truncated: {need} bytes needed, {have} present")]
    TruncatedHeader { need: u64, have: u64 },
    #[error("record header truncated: {need} bytes needed, {have} present")]
    TruncatedRecordHeader { need: u64, have: u64 },
    #[error("record truncated: {need} captured bytes announced, {have} present")]
    TruncatedRecord { need: u64, have: u64 },
    #[error("record length {len} exceeds the {MAX_RECORD_LEN}-byte limit (corrupt header?)")]
    RecordTooLarge { len: u64 },
    #[error("partial {size}-byte key record: {have} trailing bytes")]
    PartialKeyRecord { size: u64, have: u64 },
    #[error("block header truncated: 12 bytes needed, {have} present")]
    TruncatedBlockHeader { have: u64 },
    #[error("block length {len} is not a multiple of 4")]
    BlockLenUnaligned { len: u64 },
    #[error("block length {len} is below the 12-byte minimum")]
    BlockTooShort { len: u64 },
    #[error("block length {len} runs past the end of the file ({have} bytes remain)")]
    BlockPastEnd { len: u64, have: u64 },
    #[error("trailing block length {trailer} differs from leading block length {len}")]
    BlockLenMismatch { len: u64, trailer: u64 },
    #[error("block type {block_type:#x} body of {have} bytes is shorter than its {need}-byte fixed part")]
    BlockBodyTooShort {
        block_type: u32,
        need: u64,
        have: u64,
    },
    #[error("section header has bad byte-order magic {found:#010x}")]
    BadByteOrder { found: u32 },
    #[error("block type {block_type:#x} appears before any section header")]
    NoSection { block_type: u32 },
    #[error("packet names interface {id}, but the section defines {}", defined(.count))]
    NoSuchInterface { id: u32, count: u64 },
    #[error("captured length {cap} does not fit in the block's {room} data bytes")]
    CapLenPastBlock { cap: u64, room: u64 },
    #[error("option {code} of {len} bytes runs past the end of its block")]
    OptionPastBlock { code: u16, len: u16 },
}

/// The interfaces a pcapng section defines, for [`TraceErrorKind::NoSuchInterface`] (ids count
/// from 0, so "defines 1" would read as naming interface 1).
fn defined(count: &u64) -> String {
    match count {
        0 => "no interface".to_string(),
        1 => "only interface 0".to_string(),
        n => format!("interfaces 0..={}", n - 1),
    }
}

/// An error before it is given the file name (the name is attached once, off the hot path).
#[derive(Debug)]
pub(crate) struct At {
    pub offset: u64,
    pub kind: TraceErrorKind,
}

impl At {
    #[inline]
    pub(crate) fn new(offset: usize, kind: TraceErrorKind) -> At {
        At {
            offset: offset as u64,
            kind,
        }
    }
}

/// One record of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Nanoseconds since the Unix epoch (0 where the format has no timestamp).
    pub ts_ns: u64,
    /// Length on the wire; 0 for key traces (they carry no length).
    pub wire_len: u32,
    pub body: Body<'a>,
}

/// What a record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body<'a> {
    /// A captured frame: its link type (pcap LINKTYPE_* value) and the captured bytes.
    Frame { link: u32, data: &'a [u8] },
    /// A flow tuple from a key trace.
    Tuple(Tuple),
}

enum Bytes {
    Mapped(Mapped),
    Owned(Vec<u8>),
    Stream(Stream),
}

/// A mapped file, and (large files) the thread that pre-faults it while it is read.
struct Mapped {
    /// `None` only while the capture is dropped.
    map: Option<std::sync::Arc<memmap2::Mmap>>,
    /// Set when the capture is dropped: the pre-faulting thread stops at its next step.
    stop: std::sync::Arc<AtomicBool>,
    /// Set when a pass over the records begins ([`Mapped::begin`]): the pre-faulting thread
    /// waits for it.
    go: std::sync::Arc<AtomicBool>,
    /// The pre-faulting thread: it holds the mapping until the capture is dropped, then unmaps
    /// it (see [`Mapped::prefault`]).
    thread: Option<std::thread::Thread>,
}

impl Mapped {
    fn new(map: memmap2::Mmap, prefault: bool) -> Mapped {
        let map = std::sync::Arc::new(map);
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let go = std::sync::Arc::new(AtomicBool::new(false));
        // Without a thread (none can be started) the reader faults the pages itself.
        let thread = prefault
            .then(|| {
                let (map, stop, go) = (map.clone(), stop.clone(), go.clone());
                std::thread::Builder::new()
                    .name("netsift-prefault".into())
                    .spawn(move || Mapped::prefault(map, &stop, &go))
                    .ok()
            })
            .flatten()
            .map(|h| h.thread().clone());
        Mapped {
            map: Some(map),
            stop,
            go,
            thread,
        }
    }

    /// A pass over the records begins: the pre-faulting thread starts (once).
    fn begin(&self) {
        if !self.go.swap(true, Ordering::Release) {
            if let Some(t) = &self.thread {
                t.unpark();
            }
        }
    }

    /// Fault the mapping's pages in, front to back, on this thread: the reader's thread would
    /// otherwise take a minor fault per 4 KiB page it reaches (MAP_POPULATE does the same work,
    /// all of it before the first packet on the reader's thread: 0.1 s of a 1.6 GB capture's
    /// 1.2 s one-worker run, issue 13). It runs ahead of any reader (the kernel maps pages far
    /// faster than packets are parsed from them) and, for a file not in the page cache, reads
    /// it in ahead of the reader too.
    ///
    /// It reads one byte every [`FAULT_AROUND`] bytes: each fault maps that many bytes of
    /// page-cached file around it (Linux's fault-around), under the mapping's own lock.
    /// MADV_POPULATE_READ, used before, walks the pages one by one under the process's
    /// memory-map lock: a 1.6 GB capture's `run` took 0.25 s of kernel time instead of 0.2,
    /// and 1.11x the wall time with one worker and with two (issue 13). Where fault-around
    /// maps less, the pages between are faulted by the reader, as without this thread.
    ///
    /// It starts when the first pass over the records does ([`Mapped::begin`]), not when the
    /// file is opened: populating held the memory-map lock, and every `mmap` of a large
    /// allocation (the run's sketches, built between the opening and the first packet) waited
    /// for it. Starting at the opening, a two-worker `run` took 110-150 ms to build its
    /// structures instead of 20 (issue 13).
    ///
    /// Then it waits for the capture to be dropped and unmaps it here: taking down the page
    /// tables of a 1.6 GB mapping costs about 40 ms, which on the dropping thread was a serial
    /// step at the end of every run (`run` drops its capture once the last packet is read, so
    /// the unmapping overlaps the last epoch's answers).
    fn prefault(map: std::sync::Arc<memmap2::Mmap>, stop: &AtomicBool, go: &AtomicBool) {
        // `stop` is looked at every 2 MiB.
        const STEP: usize = 2 << 20;
        // `begin` sets `go` and `Drop` sets `stop`, each then unparks: a spurious wake-up loops.
        while !go.load(Ordering::Acquire) && !stop.load(Ordering::Acquire) {
            std::thread::park();
        }
        let mut at = 0;
        while at < map.len() && !stop.load(Ordering::Relaxed) {
            let n = STEP.min(map.len() - at);
            for p in (at..at + n).step_by(FAULT_AROUND) {
                std::hint::black_box(map.get(p).copied());
            }
            at += n;
        }
        // `Drop` drops its reference, then sets `stop` (Release) and unparks this thread; a
        // spurious wake-up loops. This reference is then the last: the unmapping is here.
        while !stop.load(Ordering::Acquire) {
            std::thread::park();
        }
        drop(map);
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        drop(self.map.take());
        self.stop.store(true, Ordering::Release);
        if let Some(t) = &self.thread {
            t.unpark();
        }
    }
}

impl Bytes {
    #[inline]
    fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m.map.as_deref().map_or(&[], |m| &m[..]),
            Bytes::Owned(v) => v,
            Bytes::Stream(s) => &s.whole().bytes,
        }
    }
}

/// A trace that cannot be mapped: read as it is consumed, once.
struct Stream {
    /// The first bytes (up to a pcap file header), read at open to detect the format.
    head: Vec<u8>,
    /// The rest, until a pass takes it.
    rest: Mutex<Option<Box<dyn Read + Send>>>,
    /// Everything, read into memory the first time the slice API asks for it.
    whole: OnceLock<Whole>,
}

struct Whole {
    bytes: Vec<u8>,
    /// Why reading stopped before the end of the stream, if it did.
    error: Option<io::Error>,
}

impl Stream {
    fn take(&self) -> Option<Box<dyn Read + Send>> {
        // A poisoned lock only means another pass panicked; the Option is still consistent.
        self.rest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    fn whole(&self) -> &Whole {
        self.whole.get_or_init(|| {
            let mut bytes = self.head.clone();
            let error = match self.take() {
                Some(mut r) => r.read_to_end(&mut bytes).err(),
                None => Some(io::Error::other(
                    "already read by an earlier pass (a stream can be read only once)",
                )),
            };
            Whole { bytes, error }
        })
    }
}

/// How the records of a capture are laid out, decided at open.
#[derive(Clone, Copy, Debug)]
enum Layout {
    Pcap(pcap::Header),
    Pcapng,
    Keys(Format),
}

/// An open trace.
pub struct Capture {
    name: String,
    bytes: Bytes,
    format: Format,
    layout: Layout,
}

impl fmt::Debug for Capture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Capture")
            .field("name", &self.name)
            .field("format", &self.format)
            // Not `as_slice`: formatting must not read a stream into memory.
            .field(
                "len",
                &match &self.bytes {
                    Bytes::Stream(s) => s.whole.get().map(|w| w.bytes.len()),
                    b => Some(b.as_slice().len()),
                },
            )
            .finish()
    }
}

impl Capture {
    /// Open a file (memory-mapped) or `-` for stdin. Stdin, pipes and character devices are
    /// streamed by [`Capture::for_each_streamed`] (only their first bytes are read here).
    ///
    /// The format is `format` if given. Otherwise a key-trace extension (`.keys4`, `.keys13`,
    /// `.keys21`, `.dat`) decides first, because key traces have no magic number and their first
    /// address may happen to spell a pcap magic; then the magic number (pcap in both byte orders,
    /// µs or ns; pcapng's Section Header Block). Anything else is an error naming the file and
    /// why: empty, compressed (and how to decompress it), or of unknown format (with the
    /// `--format` values). `-` can be opened once per process: stdin is one stream.
    pub fn open(path: &str, format: Option<Format>) -> Result<Capture, TraceError> {
        let io_err = |e: std::io::Error| TraceError {
            file: path.to_string(),
            offset: 0,
            kind: TraceErrorKind::Io(e),
        };
        if path == "-" {
            // What is left of a stream an earlier capture holds is no trace of its own.
            if STDIN_TAKEN.swap(true, Ordering::Relaxed) {
                return Err(TraceError {
                    file: path.to_string(),
                    offset: 0,
                    kind: TraceErrorKind::StdinTaken,
                });
            }
            return Capture::from_reader(path, io::stdin(), format);
        }
        let file = File::open(path).map_err(io_err)?;
        let meta = file.metadata().map_err(io_err)?;
        if !meta.is_file() || meta.len() == 0 {
            // Empty files cannot be mapped; pipes and character devices (`<(cmd)`, /dev/stdin)
            // cannot either: stream them.
            return Capture::from_reader(path, file, format);
        }
        let mut opts = memmap2::MmapOptions::new();
        if meta.len() <= PREFAULT_AHEAD_FROM {
            // Pre-fault the whole mapping in one call (MAP_POPULATE): one minor fault per 4 KiB
            // page otherwise costs about as much as parsing the packets in it (measured: 80 MB
            // of 64-byte packets, 13 -> 10 ms per pass). Larger files are pre-faulted by a
            // thread of their own while they are read ([`Mapped::prefault`]).
            opts.populate();
        }
        // SAFETY: the map is read-only and lives as long as the Capture. Another process
        // truncating or rewriting the file while we read it is outside Rust's model (as for every
        // mmap-based reader, e.g. ripgrep); capture files are treated as immutable while open.
        // Every access is bounds-checked against the map's length.
        let map = match unsafe { opts.map(&file) } {
            Ok(m) => m,
            // No address space for the mapping (a tight `ulimit -v`, a 32-bit host, a file
            // system without mmap): stream the file instead, in constant memory, with the same
            // records and errors.
            Err(_) => return Capture::from_reader(path, file, format),
        };
        #[cfg(unix)]
        let _ = map.advise(memmap2::Advice::Sequential);
        let map = Mapped::new(
            map,
            (PREFAULT_AHEAD_FROM..=POPULATE_LIMIT).contains(&meta.len()),
        );
        Capture::build(path.to_string(), Bytes::Mapped(map), format)
    }

    /// A capture over a byte stream, read as [`Capture::for_each_streamed`] consumes it; `name`
    /// is used for extension detection and in error messages. Only the first bytes are read
    /// here, enough to detect the format and parse a pcap file header.
    pub fn from_reader(
        name: &str,
        mut reader: impl Read + Send + 'static,
        format: Option<Format>,
    ) -> Result<Capture, TraceError> {
        // Up to the pcap file header's length, fewer only at the end of the stream.
        let mut head = Vec::with_capacity(pcap::HEADER_LEN);
        (&mut reader)
            .take(pcap::HEADER_LEN as u64)
            .read_to_end(&mut head)
            .map_err(|e| TraceError {
                file: name.to_string(),
                offset: 0,
                kind: TraceErrorKind::Io(e),
            })?;
        let stream = Stream {
            head,
            rest: Mutex::new(Some(Box::new(reader))),
            whole: OnceLock::new(),
        };
        Capture::build(name.to_string(), Bytes::Stream(stream), format)
    }

    /// A capture over bytes already in memory; `name` is used for extension detection and in
    /// error messages.
    pub fn from_bytes(
        name: &str,
        bytes: Vec<u8>,
        format: Option<Format>,
    ) -> Result<Capture, TraceError> {
        Capture::build(name.to_string(), Bytes::Owned(bytes), format)
    }

    fn build(name: String, bytes: Bytes, format: Option<Format>) -> Result<Capture, TraceError> {
        // Detection and the pcap header need only the first bytes: a stream's head holds them.
        let data = match &bytes {
            Bytes::Stream(s) => &s.head[..],
            b => b.as_slice(),
        };
        let detected = match format {
            Some(f) => Ok(f),
            None => detect(&name, data),
        };
        let layout = detected.and_then(|f| match f {
            // A forced packet format on an empty or compressed input: say that, not "bad magic".
            Format::Pcap | Format::Pcapng => match not_a_capture(&name, data) {
                Some(at) => Err(at),
                None if f == Format::Pcap => pcap::Header::parse(data).map(Layout::Pcap),
                None => pcapng::check_magic(data).map(|()| Layout::Pcapng),
            },
            Format::Keys4 | Format::Keys13 | Format::Keys21 => Ok(Layout::Keys(f)),
        });
        match layout {
            Ok(layout) => {
                let format = match layout {
                    Layout::Pcap(_) => Format::Pcap,
                    Layout::Pcapng => Format::Pcapng,
                    Layout::Keys(f) => f,
                };
                Ok(Capture {
                    name,
                    bytes,
                    format,
                    layout,
                })
            }
            Err(at) => Err(TraceError {
                file: name,
                offset: at.offset,
                kind: at.kind,
            }),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// The raw bytes of the trace (a stream is read into memory for this).
    pub fn bytes(&self) -> &[u8] {
        self.bytes.as_slice()
    }

    /// Link type of a classic pcap file (low 16 bits of the header field); `None` for other
    /// formats (pcapng has one per interface, carried by each record).
    pub fn pcap_link(&self) -> Option<u32> {
        match self.layout {
            Layout::Pcap(h) => Some(h.link),
            _ => None,
        }
    }

    /// Whether the capture is a stream (stdin, a pipe, a file that could not be mapped): it can
    /// be read once, as it arrives; [`Capture::records`] would first read all of it into memory.
    pub fn is_stream(&self) -> bool {
        matches!(self.bytes, Bytes::Stream(_))
    }

    /// All records in file order. The iterator ends after the first error (it is fused).
    pub fn records(&self) -> Records<'_> {
        let data = self.bytes.as_slice();
        let state = match self.layout {
            Layout::Pcap(h) => State::Pcap(pcap::Reader::new(data, h)),
            Layout::Pcapng => State::Pcapng(pcapng::Reader::new(data)),
            Layout::Keys(f) => State::Keys(keys::Reader::new(data, f)),
        };
        Records { cap: self, state }
    }

    /// Call `f` on every record in file order; returns how many there were. On an error, the
    /// records before it have been passed to `f` and the error is returned. Same records as
    /// [`Capture::records`], with the format dispatch hoisted out of the loop.
    pub fn for_each<'a, F: FnMut(Record<'a>)>(&'a self, mut f: F) -> Result<u64, TraceError> {
        self.begin();
        let data = self.bytes.as_slice();
        let r = match self.layout {
            Layout::Pcap(h) => pcap::Reader::new(data, h).for_each(&mut f),
            Layout::Pcapng => {
                let mut r = pcapng::Reader::new(data);
                drive(|| r.next_record(), &mut f)
            }
            Layout::Keys(fmt) => keys::for_each(data, fmt, &mut f),
        };
        let n = r.map_err(|at| self.error(at))?;
        match self.read_error() {
            Some(e) => Err(e),
            None => Ok(n),
        }
    }

    /// A mapped `keys4` trace's records as big-endian u32 values (the IPv4 address each holds,
    /// as `FlowKey::prefix_u32` reads it), handed to `f` in blocks of at most
    /// [`KEYS4_BLOCK`] in file order: the records are 4 bytes, so the algorithms' u32 batch
    /// path takes them without a `Tuple` or `FlowKey` per record (issue 14: the per-record
    /// path costs ~8 ns, this one a byte swap). `None` for every other format and for streams
    /// (read those with [`Capture::for_each_streamed`]). Same records and the same error at the
    /// same offset (a partial last record) as [`Capture::for_each`]; returns the record count.
    pub fn for_each_keys4(&self, f: impl FnMut(&[u32])) -> Option<Result<u64, TraceError>> {
        if self.is_stream() || !matches!(self.layout, Layout::Keys(Format::Keys4)) {
            return None;
        }
        self.begin();
        Some(keys::for_each_u32(self.bytes.as_slice(), f).map_err(|at| self.error(at)))
    }

    /// A whole pass over a mapped file's records begins: its pages are pre-faulted ahead of it
    /// from now on (large files, [`Mapped::prefault`]). [`Capture::records`] does not start
    /// it: a look at the first records (the address family, before a run is built) should not
    /// fault in the whole file.
    fn begin(&self) {
        if let Bytes::Mapped(m) = &self.bytes {
            m.begin();
        }
    }

    /// Like [`Capture::for_each`], but a stream (stdin, a pipe) is read in chunks as the records
    /// are consumed instead of into memory first: records borrow only for the call to `f`. Same
    /// records and same errors (kind, offset) as the slice API on the same bytes. A stream can be
    /// read once: a second pass reports an I/O error.
    pub fn for_each_streamed(&self, mut f: impl FnMut(Record<'_>)) -> Result<u64, TraceError> {
        if let Bytes::Stream(s) = &self.bytes {
            if s.whole.get().is_none() {
                if let Some(mut r) = s.take() {
                    let (parser, skip) = match self.layout {
                        Layout::Pcap(h) => (stream::Parser::Pcap(h), pcap::HEADER_LEN),
                        Layout::Pcapng => (stream::Parser::Pcapng(Default::default()), 0),
                        Layout::Keys(fmt) => (stream::Parser::Keys(fmt), 0),
                    };
                    return stream::for_each(&mut r, &s.head, skip, parser, &mut f)
                        .map_err(|at| self.error(at));
                }
            }
        }
        self.for_each(f)
    }

    /// The I/O error that cut short reading a stream into memory, as a trace error at the
    /// offset where the bytes ran out (after every record before it).
    fn read_error(&self) -> Option<TraceError> {
        let Bytes::Stream(s) = &self.bytes else {
            return None;
        };
        let w = s.whole.get()?;
        let e = w.error.as_ref()?;
        Some(TraceError {
            file: self.name.clone(),
            offset: w.bytes.len() as u64,
            kind: TraceErrorKind::Io(io::Error::new(e.kind(), e.to_string())),
        })
    }

    fn error(&self, at: At) -> TraceError {
        TraceError {
            file: self.name.clone(),
            offset: at.offset,
            kind: at.kind,
        }
    }
}

#[inline(always)]
fn drive<'a>(
    mut next: impl FnMut() -> Option<Result<Record<'a>, At>>,
    f: &mut impl FnMut(Record<'a>),
) -> Result<u64, At> {
    let mut n = 0u64;
    while let Some(r) = next() {
        f(r?);
        n += 1;
    }
    Ok(n)
}

fn detect(name: &str, data: &[u8]) -> Result<Format, At> {
    let ext = Path::new(name)
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase());
    if let Some(f) = ext.as_deref().and_then(Format::from_extension) {
        return Ok(f);
    }
    if let Some(m) = data.first_chunk::<4>() {
        if pcap::magic(*m).is_some() {
            return Ok(Format::Pcap);
        }
        if u32::from_le_bytes(*m) == pcapng::SHB {
            return Ok(Format::Pcapng);
        }
    }
    Err(not_a_capture(name, data).unwrap_or(At::new(0, TraceErrorKind::UnknownFormat)))
}

/// Why `data` (the first bytes of a trace) is no capture at all, when that can be told: it is
/// empty, or it starts with a compressor's magic number.
fn not_a_capture(name: &str, data: &[u8]) -> Option<At> {
    let stdin = name == "-";
    if data.is_empty() {
        let kind = if stdin {
            TraceErrorKind::EmptyStdin
        } else {
            TraceErrorKind::EmptyFile
        };
        return Some(At::new(0, kind));
    }
    let (method, tool) = match data {
        [0x1f, 0x8b, ..] => ("gzip", "zcat"),
        [0x28, 0xb5, 0x2f, 0xfd, ..] => ("zstd", "zstdcat"),
        [0xfd, b'7', b'z', b'X', b'Z', 0, ..] => ("xz", "xzcat"),
        [b'B', b'Z', b'h', b'1'..=b'9', ..] => ("bzip2", "bzcat"),
        [0x04, 0x22, 0x4d, 0x18, ..] => ("lz4", "lz4cat"),
        _ => return None,
    };
    let file = if stdin {
        "FILE".to_string()
    } else {
        shell_quote(name)
    };
    Some(At::new(
        0,
        TraceErrorKind::Compressed { method, tool, file },
    ))
}

/// `s` as one word of a POSIX shell command line: as is when it holds only characters no shell
/// treats specially, else single-quoted (a `'` inside written `'\''`).
fn shell_quote(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./+,:=@%".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

enum State<'a> {
    Pcap(pcap::Reader<'a>),
    Pcapng(pcapng::Reader<'a>),
    Keys(keys::Reader<'a>),
    Done,
}

/// Iterator over the records of a [`Capture`]; yields at most one error, then ends.
pub struct Records<'a> {
    cap: &'a Capture,
    state: State<'a>,
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, TraceError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let r = match &mut self.state {
            State::Pcap(r) => r.next_record(),
            State::Pcapng(r) => r.next_record(),
            State::Keys(r) => r.next_record(),
            State::Done => return None,
        };
        match r {
            Some(Ok(rec)) => Some(Ok(rec)),
            Some(Err(at)) => {
                self.state = State::Done;
                Some(Err(self.cap.error(at)))
            }
            None => {
                self.state = State::Done;
                self.cap.read_error().map(Err)
            }
        }
    }
}

impl FusedIterator for Records<'_> {}

#[cfg(test)]
mod tests;
