//! Classic pcap (draft-ietf-opsawg-pcap, "PCAP Capture File Format").
//!
//! File header (24 bytes): magic, version major/minor (u16 each), reserved1, reserved2 (the old
//! thiszone/sigfigs), snaplen, LinkType-and-FCS. Record header (16 bytes): ts seconds, ts
//! fraction (µs or ns by the magic), captured length, original length.

use crate::{At, Body, Record, TraceErrorKind, MAX_RECORD_LEN};

pub(crate) const HEADER_LEN: usize = 24;
pub(crate) const REC_HDR_LEN: usize = 16;

/// Magic as written by a little-endian host (bytes on disk `d4 c3 b2 a1`), read LE.
const USEC: u32 = 0xA1B2_C3D4;
const NSEC: u32 = 0xA1B2_3C4D;

/// Decode the magic: `Some((big_endian, nanosecond))` for the four pcap magics.
#[inline]
pub(crate) fn magic(m: [u8; 4]) -> Option<(bool, bool)> {
    match (u32::from_le_bytes(m), u32::from_be_bytes(m)) {
        (USEC, _) => Some((false, false)),
        (NSEC, _) => Some((false, true)),
        (_, USEC) => Some((true, false)),
        (_, NSEC) => Some((true, true)),
        _ => None,
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
        let Some((be, nsec)) = magic(m) else {
            return Err(bad_magic(m));
        };
        let link = rd32(h, 20, be) & 0xFFFF;
        Ok(Header {
            be,
            frac_ns: if nsec { 1 } else { 1000 },
            link,
        })
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
    /// unit tests compare `records()` and `for_each` on every file they build).
    #[inline(always)]
    pub(crate) fn for_each(&mut self, f: &mut impl FnMut(Record<'a>)) -> Result<u64, At> {
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
                        f(Record {
                            ts_ns: sec as u64 * 1_000_000_000 + frac as u64 * frac_ns,
                            wire_len: orig.max(incl),
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
        let Some(hdr) = rest.first_chunk::<REC_HDR_LEN>() else {
            return Some(Err(At::new(
                self.pos,
                TraceErrorKind::TruncatedRecordHeader {
                    have: rest.len() as u64,
                },
            )));
        };
        let be = self.h.be;
        let sec = rd32(hdr, 0, be);
        let frac = rd32(hdr, 4, be);
        let incl = rd32(hdr, 8, be);
        let orig = rd32(hdr, 12, be);
        if incl > MAX_RECORD_LEN {
            return Some(Err(At::new(
                self.pos,
                TraceErrorKind::RecordTooLarge { len: incl as u64 },
            )));
        }
        let body = &rest[REC_HDR_LEN..];
        let Some(data) = body.get(..incl as usize) else {
            return Some(Err(At::new(
                self.pos,
                TraceErrorKind::TruncatedRecord {
                    need: incl as u64,
                    have: body.len() as u64,
                },
            )));
        };
        self.pos += REC_HDR_LEN + incl as usize;
        // No overflow: sec < 2^32 so sec * 1e9 < 4.3e18, frac * 1000 < 4.3e12, sum < 2^64.
        // An unnormalised fraction (>= 1 s) is added as is, like libpcap does.
        let ts_ns = sec as u64 * 1_000_000_000 + frac as u64 * self.h.frac_ns;
        Some(Ok(Record {
            ts_ns,
            wire_len: orig.max(incl),
            body: Body::Frame {
                link: self.h.link,
                data,
            },
        }))
    }
}
