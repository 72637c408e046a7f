//! Classic pcap (draft-ietf-opsawg-pcap, "PCAP Capture File Format").
//!
//! File header (24 bytes): magic, version major/minor (u16 each), reserved1, reserved2 (the old
//! thiszone/sigfigs), snaplen, LinkType-and-FCS. Record header (16 bytes): ts seconds, ts
//! fraction (µs or ns by the magic), captured length, original length.
//!
//! Variants read as libpcap reads them (`sf-pcap.c`, `pcap_check_header` and
//! `pcap_next_packet`): versions 2.0 to 2.4 and DG/UX's 543.0, anything else refused; before 2.3
//! (and in 543.0) the two length fields are stored the other way round (original length first)
//! and are always swapped back; in 2.3 they are swapped back only where the captured length
//! exceeds the original one (some 2.3 writers kept the old order). The modified format of
//! Alexey Kuznetzov's patched libpcap (magic `a1b2cd34`, µs) appends 8 bytes to each record
//! header (ifindex u32, protocol u16, pkt_type u8, pad u8), which we skip.

use crate::{At, Body, Record, TraceErrorKind, MAX_RECORD_LEN};

pub(crate) const HEADER_LEN: usize = 24;
pub(crate) const REC_HDR_LEN: usize = 16;
/// Record header of the modified (Kuznetzov) format: 8 bytes more.
const MODIFIED_REC_HDR_LEN: usize = 24;

/// Magic as written by a little-endian host (bytes on disk `d4 c3 b2 a1`), read LE.
const USEC: u32 = 0xA1B2_C3D4;
const NSEC: u32 = 0xA1B2_3C4D;
/// Kuznetzov's modified format (libpcap's `KUZNETZOV_TCPDUMP_MAGIC`), µs timestamps.
const MODIFIED: u32 = 0xA1B2_CD34;

/// What the magic number says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Magic {
    pub be: bool,
    pub nsec: bool,
    /// Kuznetzov's modified format: 24-byte record headers.
    pub modified: bool,
}

/// Decode the magic: `Some` for the six pcap magics (three values, both byte orders).
#[inline]
pub(crate) fn magic(m: [u8; 4]) -> Option<Magic> {
    let kind = |v: u32| match v {
        USEC => Some((false, false)),
        NSEC => Some((true, false)),
        MODIFIED => Some((false, true)),
        _ => None,
    };
    let (be, (nsec, modified)) = match kind(u32::from_le_bytes(m)) {
        Some(k) => (false, k),
        None => (true, kind(u32::from_be_bytes(m))?),
    };
    Some(Magic { be, nsec, modified })
}

/// Order of the two length fields of a record header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lengths {
    /// Captured, then original (2.4; 2.3 where captured <= original).
    CapFirst,
    /// Original, then captured (before 2.3, and DG/UX's 543.0).
    LenFirst,
    /// 2.3: either; swapped where the first exceeds the second (libpcap's `MAYBE_SWAPPED`).
    Either,
}

impl Lengths {
    /// `(captured, original)` from the fields in file order.
    #[inline]
    fn order(self, first: u32, second: u32) -> (u32, u32) {
        match self {
            Lengths::CapFirst => (first, second),
            Lengths::LenFirst => (second, first),
            Lengths::Either if first > second => (second, first),
            Lengths::Either => (first, second),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub be: bool,
    /// Nanoseconds per unit of the timestamp fraction: 1000 (µs magic) or 1 (ns magic).
    pub frac_ns: u64,
    /// LinkType: the low 16 bits of the last header field. Bits 16-27 are reserved and bits
    /// 28-31 carry the FCS length (spec section 4), which we do not need.
    pub link: u32,
    /// Record header length: [`REC_HDR_LEN`], or 24 in the modified format.
    pub rec_hdr: usize,
    pub lengths: Lengths,
}

impl Header {
    pub(crate) fn parse(data: &[u8]) -> Result<Header, At> {
        let Some(h) = data.first_chunk::<HEADER_LEN>() else {
            if let Some(m) = data.first_chunk::<4>() {
                if magic(*m).is_none() {
                    return Err(bad_magic(*m));
                }
            }
            return Err(At::new(
                0,
                TraceErrorKind::TruncatedHeader {
                    need: HEADER_LEN as u64,
                    have: data.len() as u64,
                },
            ));
        };
        let m = [h[0], h[1], h[2], h[3]];
        let Some(Magic { be, nsec, modified }) = magic(m) else {
            return Err(bad_magic(m));
        };
        let (major, minor) = (rd16(h, 4, be), rd16(h, 6, be));
        // libpcap's versions (sf-pcap.c): 2.0-2.4, and 543.0 (DG/UX tcpdump); "archaic" below 2.
        let lengths = match (major, minor) {
            (2, 0..=2) | (543, 0) => Lengths::LenFirst,
            (2, 3) => Lengths::Either,
            (2, 4) => Lengths::CapFirst,
            _ => {
                return Err(At::new(
                    0,
                    TraceErrorKind::UnsupportedVersion { major, minor },
                ))
            }
        };
        let link = rd32(h, 20, be) & 0xFFFF;
        Ok(Header {
            be,
            frac_ns: if nsec { 1 } else { 1000 },
            link,
            rec_hdr: if modified {
                MODIFIED_REC_HDR_LEN
            } else {
                REC_HDR_LEN
            },
            lengths,
        })
    }

    /// The common layout, read by the fast loop: 16-byte record headers, captured length first.
    #[inline]
    fn plain(&self) -> bool {
        self.rec_hdr == REC_HDR_LEN && self.lengths == Lengths::CapFirst
    }
}

fn bad_magic(m: [u8; 4]) -> At {
    At::new(
        0,
        TraceErrorKind::BadMagic {
            format: crate::Format::Pcap,
            found: u32::from_be_bytes(m),
        },
    )
}

#[inline(always)]
fn rd16<const N: usize>(b: &[u8; N], at: usize, be: bool) -> u16 {
    // Constant offsets inside the fixed-size array, as for `rd32`.
    let v = [b[at], b[at + 1]];
    if be {
        u16::from_be_bytes(v)
    } else {
        u16::from_le_bytes(v)
    }
}

#[inline(always)]
fn rd32<const N: usize>(b: &[u8; N], at: usize, be: bool) -> u32 {
    // Callers pass constant offsets inside the fixed-size array: the indexing is checked at
    // compile time after inlining and never fails.
    let v = u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    if be {
        v.swap_bytes()
    } else {
        v
    }
}

/// How far ahead of the record being read [`Reader::for_each`] hints the next bytes into the
/// cache: the next page, about 50 records of a 64-byte capture (1024 measured the same, 0 about
/// 6 ns a record slower in `run`), more than a DRAM read and a page walk take.
const PREFETCH_AHEAD: usize = 4096;

pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    h: Header,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8], h: Header) -> Reader<'a> {
        Reader::at(data, HEADER_LEN, h)
    }

    /// A reader whose first record starts at `pos` of `data` (the stream reader hands it each
    /// buffer after the file header, which it has consumed already).
    pub(crate) fn at(data: &'a [u8], pos: usize, h: Header) -> Reader<'a> {
        Reader { data, pos, h }
    }

    /// Every record to `f`. The happy path is one tight loop, monomorphised on the byte order;
    /// anything unusual (end of data, a bad record) goes through [`Reader::next_record`], which
    /// delivers or reports it at the same position, so the two give identical results (the
    /// unit tests compare `records()` and `for_each` on every file they build). The rare
    /// layouts (old versions, the modified format) take `next_record` throughout.
    #[inline(always)]
    pub(crate) fn for_each(&mut self, f: &mut impl FnMut(Record<'a>)) -> Result<u64, At> {
        if !self.h.plain() {
            return crate::drive(|| self.next_record(), f);
        }
        if self.h.be {
            self.for_each_order::<true>(f)
        } else {
            self.for_each_order::<false>(f)
        }
    }

    #[inline(always)]
    fn for_each_order<const BE: bool>(
        &mut self,
        f: &mut impl FnMut(Record<'a>),
    ) -> Result<u64, At> {
        let (link, frac_ns) = (self.h.link, self.h.frac_ns);
        let mut n = 0u64;
        loop {
            let data = self.data;
            if let Some((hdr, body)) = data
                .get(self.pos..)
                .and_then(|r| r.split_first_chunk::<REC_HDR_LEN>())
            {
                let incl = rd32(hdr, 8, BE);
                if incl <= MAX_RECORD_LEN {
                    if let Some(frame) = body.get(..incl as usize) {
                        let sec = rd32(hdr, 0, BE);
                        let frac = rd32(hdr, 4, BE);
                        let orig = rd32(hdr, 12, BE);
                        self.pos += REC_HDR_LEN + incl as usize;
                        // The hardware prefetchers follow the records inside a 4 KiB page but
                        // stop at its end: without this hint the first record of every page
                        // (one in 51 of 64-byte captures) waited on a TLB walk and a DRAM
                        // read, about 6 ns a record of a file larger than the caches (issue 13).
                        key::prefetch_at(data, self.pos + PREFETCH_AHEAD);
                        f(Record {
                            ts_ns: sec as u64 * 1_000_000_000 + frac as u64 * frac_ns,
                            wire_len: orig,
                            body: Body::Frame { link, data: frame },
                        });
                        n += 1;
                        continue;
                    }
                }
            }
            match self.next_record() {
                None => return Ok(n),
                Some(Err(e)) => return Err(e),
                Some(Ok(r)) => {
                    f(r);
                    n += 1;
                }
            }
        }
    }

    /// The next record; `None` at a clean end of file. Each `Some(Ok)` advances by at least the
    /// 16-byte record header, so a loop over this always terminates.
    #[inline]
    pub(crate) fn next_record(&mut self) -> Option<Result<Record<'a>, At>> {
        let rest = self.data.get(self.pos..)?;
        if rest.is_empty() {
            return None;
        }
        let hdr_len = self.h.rec_hdr;
        let (Some(hdr), true) = (rest.first_chunk::<REC_HDR_LEN>(), rest.len() >= hdr_len) else {
            return Some(Err(At::new(
                self.pos,
                TraceErrorKind::TruncatedRecordHeader {
                    need: hdr_len as u64,
                    have: rest.len() as u64,
                },
            )));
        };
        let be = self.h.be;
        let sec = rd32(hdr, 0, be);
        let frac = rd32(hdr, 4, be);
        let (incl, orig) = self.h.lengths.order(rd32(hdr, 8, be), rd32(hdr, 12, be));
        if incl > MAX_RECORD_LEN {
            return Some(Err(At::new(
                self.pos,
                TraceErrorKind::RecordTooLarge { len: incl as u64 },
            )));
        }
        let body = &rest[hdr_len..];
        let Some(data) = body.get(..incl as usize) else {
            return Some(Err(At::new(
                self.pos,
                TraceErrorKind::TruncatedRecord {
                    need: incl as u64,
                    have: body.len() as u64,
                },
            )));
        };
        self.pos += hdr_len + incl as usize;
        // No overflow: sec < 2^32 so sec * 1e9 < 4.3e18, frac * 1000 < 4.3e12, sum < 2^64.
        // An unnormalised fraction (>= 1 s) is added as is, like libpcap does.
        let ts_ns = sec as u64 * 1_000_000_000 + frac as u64 * self.h.frac_ns;
        Some(Ok(Record {
            ts_ns,
            // The original length, even below the captured one (a corrupt header): as tshark's
            // frame.len, so byte counts agree with it.
            wire_len: orig,
            body: Body::Frame {
                link: self.h.link,
                data,
            },
        }))
    }
}
