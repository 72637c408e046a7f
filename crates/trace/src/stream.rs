//! Reading a trace that cannot be mapped (a pipe, a character device, stdin) as it arrives.
//!
//! The bytes go through one buffer. Each round hands the buffered bytes to the same slice
//! parsers that read mapped files; they deliver every whole record and stop at the first one
//! they cannot finish. Before the end of the stream, a stop that more bytes would cure (a record
//! or block running past the buffer) is not an error: the partial record is kept, the buffer is
//! refilled until it holds that record, and parsing resumes there with the parser's state (the
//! pcapng section). At the end of the stream the same stop is the error the slice parser reports
//! on the whole file, at the same offset, because the buffer then holds the whole remainder.
//!
//! The buffer starts at [`CHUNK`] bytes and grows, as bytes arrive, only while a single record
//! does not fit; records are bounded by [`crate::MAX_RECORD_LEN`] (pcapng blocks by their u32
//! length). A round parses whatever one `read` returned, so a live capture is delivered as it
//! comes instead of when the buffer is full.

use std::io::{self, Read};

use crate::{drive, keys, pcap, pcapng, At, Format, Record, TraceErrorKind};

/// Initial buffer size and the most a buffer of small records holds.
pub(crate) const CHUNK: usize = 1 << 20;

/// What the parser keeps between buffers.
pub(crate) enum Parser {
    /// Classic pcap after its file header.
    Pcap(pcap::Header),
    Pcapng(pcapng::Section),
    Keys(Format),
}

impl Parser {
    /// Every whole record of `data` to `f`: `Ok` if they filled it exactly, else the stop
    /// (offset relative to `data`; the pcapng state is kept either way).
    fn run<'a>(&mut self, data: &'a [u8], f: &mut impl FnMut(Record<'a>)) -> Result<(), At> {
        match self {
            Parser::Pcap(h) => pcap::Reader::at(data, 0, *h).for_each(f).map(drop),
            Parser::Pcapng(sec) => {
                let mut r = pcapng::Reader::resume(data, std::mem::take(sec));
                let res = drive(|| r.next_record(), f);
                *sec = r.into_section();
                res.map(drop)
            }
            Parser::Keys(fmt) => keys::for_each(data, *fmt, f).map(drop),
        }
    }

    /// Length of a pcap record header (16, or 24 in the modified format); unused otherwise.
    fn rec_hdr(&self) -> u64 {
        match self {
            Parser::Pcap(h) => h.rec_hdr as u64,
            _ => pcap::REC_HDR_LEN as u64,
        }
    }
}

/// Bytes, counted from the record or block the error names, that would have let the parser
/// finish it; `None` for errors that no further bytes can cure. The slice parsers report these
/// errors at the start of the record, before changing any state, so resuming there is exact.
/// `rec_hdr` is the pcap record header length.
fn wants(kind: &TraceErrorKind, rec_hdr: u64) -> Option<u64> {
    match *kind {
        TraceErrorKind::TruncatedRecordHeader { need, .. } => Some(need),
        TraceErrorKind::TruncatedRecord { need, .. } => Some(rec_hdr + need),
        TraceErrorKind::PartialKeyRecord { size, .. } => Some(size),
        TraceErrorKind::TruncatedBlockHeader { .. } => Some(pcapng::MIN_BLOCK_LEN as u64),
        TraceErrorKind::BlockPastEnd { len, .. } => Some(len),
        _ => None,
    }
}

/// The bytes `data[start..end]` are read and not yet parsed; `data[0]` is byte `base` of the
/// stream. `data` is kept initialised to its full length so refills never zero it again.
struct Buf {
    data: Vec<u8>,
    start: usize,
    end: usize,
    base: u64,
}

impl Buf {
    /// Read until `end >= target` (an index into `data`, adjusted if the buffer is compacted);
    /// `Ok(true)` if the stream ended first.
    fn fill(&mut self, r: &mut (impl Read + ?Sized), mut target: usize) -> io::Result<bool> {
        while self.end < target {
            if self.end == self.data.len() {
                if self.start > 0 {
                    // Move the partial record to the front: less than one record is copied.
                    self.data.copy_within(self.start..self.end, 0);
                    self.base += self.start as u64;
                    self.end -= self.start;
                    target -= self.start;
                    self.start = 0;
                } else {
                    // One record larger than the buffer: grow towards it as its bytes arrive.
                    let len = CHUNK.max(self.data.len().saturating_mul(2).min(target));
                    self.data.resize(len, 0);
                }
                continue;
            }
            let room = &mut self.data[self.end..];
            match r.read(room) {
                Ok(0) => return Ok(true),
                // `min`: a reader claiming more than it was given must not move us out of bounds.
                Ok(n) => self.end += n.min(room.len()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }
}

/// Every record of the stream to `f`, in order; returns how many. `head` holds the first bytes
/// (read at open to detect the format), of which the first `skip` (the pcap file header) are
/// already parsed; `r` yields the rest. Errors carry offsets in the stream.
pub(crate) fn for_each(
    r: &mut (impl Read + ?Sized),
    head: &[u8],
    skip: usize,
    mut parser: Parser,
    f: &mut impl FnMut(Record<'_>),
) -> Result<u64, At> {
    let mut data = head.to_vec();
    data.resize(CHUNK.max(head.len()), 0);
    let mut buf = Buf {
        data,
        start: skip.min(head.len()),
        end: head.len(),
        base: 0,
    };
    let mut n = 0u64;
    let mut count = |rec: Record<'_>| {
        n += 1;
        f(rec);
    };
    let mut eof = false;
    let res = loop {
        let target = match parser.run(&buf.data[buf.start..buf.end], &mut count) {
            Ok(()) if eof => break Ok(()),
            Ok(()) => {
                buf.start = buf.end;
                buf.end + 1
            }
            Err(at) => {
                let avail = (buf.end - buf.start) as u64;
                match wants(&at.kind, parser.rec_hdr()) {
                    // The record needs more than was buffered: read on, then resume at it.
                    Some(w) if !eof && at.offset.saturating_add(w) > avail => {
                        buf.start += at.offset as usize;
                        buf.start
                            .saturating_add(usize::try_from(w).unwrap_or(usize::MAX))
                    }
                    _ => {
                        break Err(At {
                            offset: buf.base + buf.start as u64 + at.offset,
                            kind: at.kind,
                        })
                    }
                }
            }
        };
        match buf.fill(r, target) {
            Ok(end) => eof = end,
            Err(e) => {
                break Err(At {
                    offset: buf.base + buf.end as u64,
                    kind: TraceErrorKind::Io(e),
                })
            }
        }
    };
    res.map(|()| n)
}
