//! Key traces: headerless arrays of fixed-size records, network byte order (see [`Format`]).

use crate::{At, Body, Format, Record, TraceErrorKind, Tuple};

pub(crate) const LEN4: usize = 4;
pub(crate) const LEN13: usize = 13;
pub(crate) const LEN21: usize = 21;

/// Records per block of [`crate::Capture::for_each_keys4`] (16 KiB of u32 values: stays in L1).
pub const KEYS4_BLOCK: usize = 4096;

#[inline(always)]
fn tuple13(b: &[u8; LEN13]) -> Tuple {
    Tuple::v4(
        [b[0], b[1], b[2], b[3]],
        [b[4], b[5], b[6], b[7]],
        u16::from_be_bytes([b[8], b[9]]),
        u16::from_be_bytes([b[10], b[11]]),
        b[12],
    )
}

#[inline(always)]
fn rec4(b: &[u8; LEN4]) -> Record<'static> {
    Record {
        ts_ns: 0,
        wire_len: 0,
        body: Body::Tuple(Tuple::v4(*b, [0; 4], 0, 0, 0)),
    }
}

#[inline(always)]
fn rec13(b: &[u8; LEN13]) -> Record<'static> {
    Record {
        ts_ns: 0,
        wire_len: 0,
        body: Body::Tuple(tuple13(b)),
    }
}

#[inline(always)]
fn rec21(b: &[u8; LEN21]) -> Record<'static> {
    let (k, ts) = b.split_at(LEN13);
    let mut k13 = [0u8; LEN13];
    k13.copy_from_slice(k);
    let mut t = [0u8; 8];
    t.copy_from_slice(ts);
    Record {
        ts_ns: u64::from_le_bytes(t),
        wire_len: 0,
        body: Body::Tuple(tuple13(&k13)),
    }
}

fn record_len(f: Format) -> usize {
    f.key_record_len().unwrap_or(LEN13)
}

fn partial(data: &[u8], size: usize) -> At {
    let whole = data.len() / size * size;
    At::new(
        whole,
        TraceErrorKind::PartialKeyRecord {
            size: size as u64,
            have: (data.len() - whole) as u64,
        },
    )
}

pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    format: Format,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8], format: Format) -> Reader<'a> {
        Reader {
            data,
            pos: 0,
            format,
        }
    }

    #[inline]
    pub(crate) fn next_record(&mut self) -> Option<Result<Record<'a>, At>> {
        let rest = self.data.get(self.pos..)?;
        if rest.is_empty() {
            return None;
        }
        let size = record_len(self.format);
        let rec = match self.format {
            Format::Keys4 => rest.first_chunk::<LEN4>().map(rec4),
            Format::Keys21 => rest.first_chunk::<LEN21>().map(rec21),
            _ => rest.first_chunk::<LEN13>().map(rec13),
        };
        match rec {
            Some(r) => {
                self.pos += size;
                Some(Ok(r))
            }
            None => Some(Err(partial(self.data, size))),
        }
    }
}

/// The loop of [`crate::Capture::for_each`] for key traces: one `chunks_exact` pass per record
/// size, no per-record bounds checks or format dispatch.
pub(crate) fn for_each<'a>(
    data: &'a [u8],
    format: Format,
    f: &mut impl FnMut(Record<'a>),
) -> Result<u64, At> {
    fn run<'a, const N: usize>(
        data: &'a [u8],
        dec: impl Fn(&[u8; N]) -> Record<'static>,
        f: &mut impl FnMut(Record<'a>),
    ) -> Result<u64, At> {
        let chunks = data.chunks_exact(N);
        let tail = chunks.remainder().len();
        let mut n = 0u64;
        for c in chunks {
            if let Some(a) = c.first_chunk::<N>() {
                f(dec(a));
                n += 1;
            }
        }
        if tail != 0 {
            return Err(partial(data, N));
        }
        Ok(n)
    }
    match format {
        Format::Keys4 => run::<LEN4>(data, rec4, f),
        Format::Keys21 => run::<LEN21>(data, rec21, f),
        _ => run::<LEN13>(data, rec13, f),
    }
}

/// The loop of [`crate::Capture::for_each_keys4`]: whole blocks of 4-byte records converted from
/// network byte order into a buffer (a loop the compiler vectorises into byte shuffles), then
/// the remainder, then the partial-record error if the length is not a multiple of 4.
pub(crate) fn for_each_u32(data: &[u8], mut f: impl FnMut(&[u32])) -> Result<u64, At> {
    let mut buf = [0u32; KEYS4_BLOCK];
    let whole = data.len() / LEN4 * LEN4;
    for block in data[..whole].chunks(KEYS4_BLOCK * LEN4) {
        let n = block.len() / LEN4;
        for (v, c) in buf[..n].iter_mut().zip(block.chunks_exact(LEN4)) {
            if let Some(a) = c.first_chunk::<LEN4>() {
                *v = u32::from_be_bytes(*a);
            }
        }
        f(&buf[..n]);
    }
    if whole != data.len() {
        return Err(partial(data, LEN4));
    }
    Ok((whole / LEN4) as u64)
}
