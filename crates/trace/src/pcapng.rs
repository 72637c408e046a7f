//! pcapng (draft-ietf-opsawg-pcapng, "PCAP Next Generation Dump File Format").
//!
//! Every block is `type u32, total length u32, body, total length u32` in the byte order of its
//! section (section 3.1). The Section Header Block's type is a palindrome so it reads the same in
//! both orders; its byte-order magic decides the order of the section (4.1). Interface IDs are
//! indexes into the IDBs of the current section (4.2), so a new section clears the list.

use crate::{At, Body, Format, Record, TraceErrorKind};

pub(crate) const SHB: u32 = 0x0A0D_0D0A;
const IDB: u32 = 1;
const OPB: u32 = 2;
const SPB: u32 = 3;
const EPB: u32 = 6;
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
/// Type, length and trailing length: the smallest block, and the bytes needed to judge one.
pub(crate) const MIN_BLOCK_LEN: usize = 12;

/// Fixed parts of block bodies (after type and length, before options).
const SHB_FIXED: usize = 16;
const IDB_FIXED: usize = 8;
const EPB_FIXED: usize = 20;
const OPB_FIXED: usize = 20;
const SPB_FIXED: usize = 4;

const OPT_ENDOFOPT: u16 = 0;
const OPT_IF_TSRESOL: u16 = 9;
const OPT_IF_TSOFFSET: u16 = 14;

pub(crate) fn check_magic(data: &[u8]) -> Result<(), At> {
    match data.first_chunk::<4>() {
        Some(m) if u32::from_le_bytes(*m) == SHB => Ok(()),
        Some(m) => Err(At::new(
            0,
            TraceErrorKind::BadMagic {
                format: Format::Pcapng,
                found: u32::from_be_bytes(*m),
            },
        )),
        None => Err(At::new(
            0,
            TraceErrorKind::TruncatedHeader {
                need: MIN_BLOCK_LEN as u64,
                have: data.len() as u64,
            },
        )),
    }
}

#[inline(always)]
fn rd32(b: &[u8], at: usize, be: bool) -> Option<u32> {
    let w = b.get(at..at + 4)?;
    let v = [w[0], w[1], w[2], w[3]];
    Some(if be {
        u32::from_be_bytes(v)
    } else {
        u32::from_le_bytes(v)
    })
}

#[inline(always)]
fn rd16(b: &[u8], at: usize, be: bool) -> Option<u16> {
    let w = b.get(at..at + 2)?;
    let v = [w[0], w[1]];
    Some(if be {
        u16::from_be_bytes(v)
    } else {
        u16::from_le_bytes(v)
    })
}

/// Conversion of raw timestamp units to nanoseconds, from `if_tsresol` (section 4.2): the low
/// 7 bits are an exponent, of 10 if the high bit is clear (10^-e seconds per unit), of 2 if set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scale {
    /// units of 1 ns or coarser: ns = ts * m.
    Mul(u64),
    /// units finer than 1 ns: ns = ts / d.
    Div(u64),
    /// 2^-e seconds per unit: ns = ts * 1e9 / 2^e, computed in u128.
    Pow2(u32),
    /// units so fine that every u64 timestamp is below 1 ns.
    Zero,
}

impl Scale {
    const MICRO: Scale = Scale::Mul(1000);

    fn from_tsresol(v: u8) -> Scale {
        let e = u32::from(v & 0x7F);
        if v & 0x80 != 0 {
            return Scale::Pow2(e);
        }
        if e <= 9 {
            Scale::Mul(10u64.pow(9 - e))
        } else {
            match 10u64.checked_pow(e - 9) {
                Some(d) => Scale::Div(d),
                None => Scale::Zero,
            }
        }
    }

    #[inline]
    fn to_ns(self, ts: u64) -> u64 {
        match self {
            Scale::Mul(m) => ts.saturating_mul(m),
            Scale::Div(d) => ts / d,
            // e <= 127 so the shift is in range; ts * 1e9 < 2^94 fits in u128.
            Scale::Pow2(e) => {
                u64::try_from((u128::from(ts) * 1_000_000_000) >> e).unwrap_or(u64::MAX)
            }
            Scale::Zero => 0,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Iface {
    link: u32,
    /// 0 = no limit.
    snaplen: u32,
    scale: Scale,
    /// `if_tsoffset` in nanoseconds, saturated to i64.
    offset_ns: i64,
}

impl Iface {
    #[inline]
    fn ts_ns(&self, ts: u64) -> u64 {
        let ns = self.scale.to_ns(ts);
        if self.offset_ns >= 0 {
            ns.saturating_add(self.offset_ns as u64)
        } else {
            ns.saturating_sub(self.offset_ns.unsigned_abs())
        }
    }
}

/// What a reader knows from the blocks before its position: the current section's byte order
/// and interfaces. Kept apart from the bytes so the stream reader can carry it from one buffer
/// to the next.
#[derive(Debug, Default)]
pub(crate) struct Section {
    be: bool,
    in_section: bool,
    ifaces: Vec<Iface>,
}

pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    sec: Section,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Reader<'a> {
        Reader::resume(data, Section::default())
    }

    /// A reader whose next block starts at offset 0 of `data`, after the blocks that left `sec`.
    pub(crate) fn resume(data: &'a [u8], sec: Section) -> Reader<'a> {
        Reader { data, pos: 0, sec }
    }

    /// The section state after the blocks read so far.
    pub(crate) fn into_section(self) -> Section {
        self.sec
    }

    /// The next packet; `None` at a clean end of file. Every block consumed advances `pos` by
    /// its length, which is checked to be at least 12, so the loop always terminates.
    #[inline]
    pub(crate) fn next_record(&mut self) -> Option<Result<Record<'a>, At>> {
        loop {
            let rest = self.data.get(self.pos..)?;
            if rest.is_empty() {
                return None;
            }
            let off = self.pos;
            let err = |kind| Some(Err(At::new(off, kind)));
            if rest.len() < MIN_BLOCK_LEN {
                return err(TraceErrorKind::TruncatedBlockHeader {
                    have: rest.len() as u64,
                });
            }
            // The SHB type reads the same in both orders; its byte-order magic sets the order
            // for everything that follows, its own length included.
            let mut be = self.sec.be;
            let block_type_le = rd32(rest, 0, false).unwrap_or(0);
            if block_type_le == SHB {
                be = match rd32(rest, 8, false) {
                    Some(BYTE_ORDER_MAGIC) => false,
                    Some(m) if m.swap_bytes() == BYTE_ORDER_MAGIC => true,
                    m => {
                        return err(TraceErrorKind::BadByteOrder {
                            found: m.unwrap_or(0).swap_bytes(),
                        })
                    }
                };
            }
            let block_type = if be {
                block_type_le.swap_bytes()
            } else {
                block_type_le
            };
            if block_type != SHB && !self.sec.in_section {
                return err(TraceErrorKind::NoSection { block_type });
            }
            let len32 = rd32(rest, 4, be).unwrap_or(0);
            let len = len32 as usize;
            if len & 3 != 0 {
                return err(TraceErrorKind::BlockLenUnaligned { len: len32.into() });
            }
            if len < MIN_BLOCK_LEN {
                return err(TraceErrorKind::BlockTooShort { len: len32.into() });
            }
            let Some(block) = rest.get(..len) else {
                return err(TraceErrorKind::BlockPastEnd {
                    len: len32.into(),
                    have: rest.len() as u64,
                });
            };
            let trailer = rd32(block, len - 4, be).unwrap_or(0);
            if trailer != len32 {
                return err(TraceErrorKind::BlockLenMismatch {
                    len: len32.into(),
                    trailer: trailer.into(),
                });
            }
            let body = &block[8..len - 4];
            self.pos += len;
            let short = |need: usize| {
                Some(Err(At::new(
                    off,
                    TraceErrorKind::BlockBodyTooShort {
                        block_type,
                        need: need as u64,
                        have: body.len() as u64,
                    },
                )))
            };
            match block_type {
                EPB | OPB => {
                    // EPB (4.3): if_id u32, ts_high, ts_low, cap_len, orig_len, data.
                    // OPB (appendix): if_id u16, drops u16, then the same fields.
                    let Some(fixed) = body.first_chunk::<EPB_FIXED>() else {
                        return short(if block_type == EPB {
                            EPB_FIXED
                        } else {
                            OPB_FIXED
                        });
                    };
                    let id = if block_type == EPB {
                        rd32(fixed, 0, be)
                    } else {
                        rd16(fixed, 0, be).map(u32::from)
                    }
                    .unwrap_or(0);
                    let hi = rd32(fixed, 4, be).unwrap_or(0);
                    let lo = rd32(fixed, 8, be).unwrap_or(0);
                    let cap = rd32(fixed, 12, be).unwrap_or(0);
                    let orig = rd32(fixed, 16, be).unwrap_or(0);
                    let room = &body[EPB_FIXED..];
                    let Some(data) = room.get(..cap as usize) else {
                        return err(TraceErrorKind::CapLenPastBlock {
                            cap: cap.into(),
                            room: room.len() as u64,
                        });
                    };
                    let Some(iface) = self.sec.ifaces.get(id as usize) else {
                        return err(self.no_iface(id));
                    };
                    let ts = (u64::from(hi) << 32) | u64::from(lo);
                    return Some(Ok(Record {
                        ts_ns: iface.ts_ns(ts),
                        wire_len: orig,
                        body: Body::Frame {
                            link: iface.link,
                            data,
                        },
                    }));
                }
                SPB => {
                    // SPB (4.4): orig_len, data; always interface 0; captured length is
                    // min(orig_len, room in the block, snaplen); no timestamp.
                    let Some(orig) = rd32(body, 0, be) else {
                        return short(SPB_FIXED);
                    };
                    let Some(iface) = self.sec.ifaces.first() else {
                        return err(self.no_iface(0));
                    };
                    let room = &body[SPB_FIXED..];
                    let mut cap = (orig as usize).min(room.len());
                    if iface.snaplen != 0 {
                        cap = cap.min(iface.snaplen as usize);
                    }
                    return Some(Ok(Record {
                        ts_ns: 0,
                        wire_len: orig,
                        body: Body::Frame {
                            link: iface.link,
                            data: &room[..cap],
                        },
                    }));
                }
                SHB => {
                    if body.len() < SHB_FIXED {
                        return short(SHB_FIXED);
                    }
                    self.sec.be = be;
                    self.sec.in_section = true;
                    self.sec.ifaces.clear();
                }
                IDB => {
                    // IDB (4.2): link type u16, reserved u16, snaplen u32, options.
                    let Some(fixed) = body.first_chunk::<IDB_FIXED>() else {
                        return short(IDB_FIXED);
                    };
                    let link = rd16(fixed, 0, be).map_or(0, u32::from);
                    let snaplen = rd32(fixed, 4, be).unwrap_or(0);
                    let (scale, offset_ns) = match if_options(&body[IDB_FIXED..], be) {
                        Ok(o) => o,
                        Err(kind) => return err(kind),
                    };
                    self.sec.ifaces.push(Iface {
                        link,
                        snaplen,
                        scale,
                        offset_ns,
                    });
                }
                // Statistics, name resolution, decryption secrets, custom blocks...: skipped.
                _ => {}
            }
        }
    }

    fn no_iface(&self, id: u32) -> TraceErrorKind {
        TraceErrorKind::NoSuchInterface {
            id,
            count: self.sec.ifaces.len() as u64,
        }
    }
}

/// The timestamp options of an IDB (section 3.5 option layout: code u16, length u16, value
/// padded to 4 bytes). Defaults: 10^-6 s units, no offset.
fn if_options(opts: &[u8], be: bool) -> Result<(Scale, i64), TraceErrorKind> {
    let mut scale = Scale::MICRO;
    let mut offset_ns = 0i64;
    let mut p = 0usize;
    // Each iteration advances p by at least 4: terminates.
    while let (Some(code), Some(len)) = (rd16(opts, p, be), rd16(opts, p + 2, be)) {
        p += 4;
        if code == OPT_ENDOFOPT {
            break;
        }
        let Some(val) = opts.get(p..p + len as usize) else {
            return Err(TraceErrorKind::OptionPastBlock { code, len });
        };
        match (code, val) {
            (OPT_IF_TSRESOL, [r, ..]) => scale = Scale::from_tsresol(*r),
            (OPT_IF_TSOFFSET, v) => {
                if let Some(b) = v.first_chunk::<8>() {
                    let secs = if be {
                        i64::from_be_bytes(*b)
                    } else {
                        i64::from_le_bytes(*b)
                    };
                    offset_ns = secs.saturating_mul(1_000_000_000);
                }
            }
            _ => {}
        }
        p += (len as usize + 3) & !3;
    }
    Ok((scale, offset_ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsresol_scales() {
        assert_eq!(Scale::from_tsresol(6), Scale::Mul(1000));
        assert_eq!(Scale::from_tsresol(9), Scale::Mul(1));
        assert_eq!(Scale::from_tsresol(0), Scale::Mul(1_000_000_000));
        assert_eq!(Scale::from_tsresol(12), Scale::Div(1000));
        assert_eq!(Scale::from_tsresol(127), Scale::Zero);
        assert_eq!(Scale::from_tsresol(0x80 | 10), Scale::Pow2(10));
        // 2^-10 s units: 1024 units = 1 s.
        assert_eq!(Scale::Pow2(10).to_ns(1024), 1_000_000_000);
        assert_eq!(Scale::Pow2(0).to_ns(u64::MAX), u64::MAX);
        assert_eq!(Scale::Pow2(127).to_ns(u64::MAX), 0);
        assert_eq!(Scale::Mul(1_000_000_000).to_ns(u64::MAX), u64::MAX);
        assert_eq!(Scale::Div(1000).to_ns(1_500_000), 1500);
        assert_eq!(Scale::Zero.to_ns(u64::MAX), 0);
    }

    #[test]
    fn offsets_saturate() {
        let i = Iface {
            link: 1,
            snaplen: 0,
            scale: Scale::Mul(1),
            offset_ns: -5,
        };
        assert_eq!(i.ts_ns(3), 0);
        assert_eq!(i.ts_ns(10), 5);
        let j = Iface {
            offset_ns: i64::MAX,
            ..i
        };
        assert_eq!(j.ts_ns(u64::MAX), u64::MAX);
    }

    #[test]
    fn options_parse_and_bound() {
        // tsresol 9, then tsoffset 2 s, then end.
        let mut o = Vec::new();
        o.extend_from_slice(&9u16.to_le_bytes());
        o.extend_from_slice(&1u16.to_le_bytes());
        o.extend_from_slice(&[9, 0, 0, 0]);
        o.extend_from_slice(&14u16.to_le_bytes());
        o.extend_from_slice(&8u16.to_le_bytes());
        o.extend_from_slice(&2i64.to_le_bytes());
        o.extend_from_slice(&[0, 0, 0, 0]);
        assert_eq!(
            if_options(&o, false).ok(),
            Some((Scale::Mul(1), 2_000_000_000))
        );
        // Option length running past the block.
        let bad = [9u8, 0, 200, 0, 1, 2];
        assert!(matches!(
            if_options(&bad, false),
            Err(TraceErrorKind::OptionPastBlock { code: 9, len: 200 })
        ));
        // Dangling 1-3 bytes after the last option are ignored (no room for a header).
        assert_eq!(if_options(&[1, 2], false).ok(), Some((Scale::MICRO, 0)));
    }
}
