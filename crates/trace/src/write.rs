//! Writers for the formats the readers accept (pcap in both byte orders, pcapng, key traces),
//! so that this crate's benches and tests build their captures from the same layout
//! definitions the readers decode. (The generator, `gen`, writes its own pcap and key traces.)

use std::io::{self, Write};

use crate::{Format, Tuple};

/// Byte order of a written file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endian {
    Little,
    Big,
}

impl Endian {
    fn u32(self, v: u32) -> [u8; 4] {
        match self {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        }
    }
    fn u16(self, v: u16) -> [u8; 2] {
        match self {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        }
    }
}

fn invalid(msg: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

fn len32(data: &[u8]) -> io::Result<u32> {
    u32::try_from(data.len()).map_err(|_| invalid("packet longer than 4 GiB"))
}

/// Classic pcap writer.
pub struct PcapWriter<W: Write> {
    w: W,
    e: Endian,
    nsec: bool,
}

impl<W: Write> PcapWriter<W> {
    /// Write the 24-byte file header (version 2.4). `nsec` selects the nanosecond magic.
    pub fn new(mut w: W, link: u32, snaplen: u32, e: Endian, nsec: bool) -> io::Result<Self> {
        let magic = if nsec { 0xA1B2_3C4D } else { 0xA1B2_C3D4 };
        w.write_all(&e.u32(magic))?;
        w.write_all(&e.u16(2))?;
        w.write_all(&e.u16(4))?;
        w.write_all(&[0; 8])?;
        w.write_all(&e.u32(snaplen))?;
        w.write_all(&e.u32(link))?;
        Ok(PcapWriter { w, e, nsec })
    }

    /// One packet: `data` is what was captured, `wire_len` its length on the wire.
    /// Timestamps past 2106 (u32 seconds) are refused.
    pub fn write_packet(&mut self, ts_ns: u64, wire_len: u32, data: &[u8]) -> io::Result<()> {
        let sec = u32::try_from(ts_ns / 1_000_000_000)
            .map_err(|_| invalid("timestamp beyond the u32 seconds of pcap"))?;
        let sub = (ts_ns % 1_000_000_000) as u32;
        let frac = if self.nsec { sub } else { sub / 1000 };
        self.write_raw(sec, frac, len32(data)?, wire_len, data)
    }

    /// A record with its header fields given verbatim (for building malformed files).
    pub fn write_raw(
        &mut self,
        sec: u32,
        frac: u32,
        incl: u32,
        orig: u32,
        data: &[u8],
    ) -> io::Result<()> {
        let e = self.e;
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&e.u32(sec));
        h[4..8].copy_from_slice(&e.u32(frac));
        h[8..12].copy_from_slice(&e.u32(incl));
        h[12..16].copy_from_slice(&e.u32(orig));
        self.w.write_all(&h)?;
        self.w.write_all(data)
    }

    pub fn get_ref(&self) -> &W {
        &self.w
    }

    pub fn into_inner(self) -> W {
        self.w
    }
}

/// pcapng writer: sections, interfaces, Enhanced and Simple Packet Blocks, raw blocks.
pub struct PcapngWriter<W: Write> {
    w: W,
    e: Endian,
}

impl<W: Write> PcapngWriter<W> {
    /// Start the file with a Section Header Block in byte order `e`.
    pub fn new(w: W, e: Endian) -> io::Result<Self> {
        let mut p = PcapngWriter { w, e };
        p.section(e)?;
        Ok(p)
    }

    /// Start a new section (it has no interfaces until [`PcapngWriter::interface`] is called).
    pub fn section(&mut self, e: Endian) -> io::Result<()> {
        self.e = e;
        let mut body = Vec::with_capacity(16);
        body.extend_from_slice(&e.u32(0x1A2B_3C4D));
        body.extend_from_slice(&e.u16(1));
        body.extend_from_slice(&e.u16(0));
        body.extend_from_slice(&[0xFF; 8]); // section length -1: unknown
        self.block(0x0A0D_0D0A, &body)
    }

    /// An Interface Description Block; interfaces are numbered from 0 in each section.
    /// `tsresol` is the raw `if_tsresol` byte, `tsoffset` the `if_tsoffset` seconds.
    pub fn interface(
        &mut self,
        link: u16,
        snaplen: u32,
        tsresol: Option<u8>,
        tsoffset: Option<i64>,
    ) -> io::Result<()> {
        let e = self.e;
        let mut body = Vec::with_capacity(32);
        body.extend_from_slice(&e.u16(link));
        body.extend_from_slice(&[0, 0]);
        body.extend_from_slice(&e.u32(snaplen));
        if let Some(r) = tsresol {
            body.extend_from_slice(&e.u16(9));
            body.extend_from_slice(&e.u16(1));
            body.extend_from_slice(&[r, 0, 0, 0]);
        }
        if let Some(o) = tsoffset {
            body.extend_from_slice(&e.u16(14));
            body.extend_from_slice(&e.u16(8));
            let b = match e {
                Endian::Little => o.to_le_bytes(),
                Endian::Big => o.to_be_bytes(),
            };
            body.extend_from_slice(&b);
        }
        if tsresol.is_some() || tsoffset.is_some() {
            body.extend_from_slice(&[0; 4]); // opt_endofopt
        }
        self.block(1, &body)
    }

    /// An Enhanced Packet Block; `ts` is in the interface's `if_tsresol` units.
    pub fn enhanced_packet(
        &mut self,
        iface: u32,
        ts: u64,
        orig_len: u32,
        data: &[u8],
    ) -> io::Result<()> {
        let e = self.e;
        let mut body = Vec::with_capacity(20 + data.len());
        body.extend_from_slice(&e.u32(iface));
        body.extend_from_slice(&e.u32((ts >> 32) as u32));
        body.extend_from_slice(&e.u32(ts as u32));
        body.extend_from_slice(&e.u32(len32(data)?));
        body.extend_from_slice(&e.u32(orig_len));
        body.extend_from_slice(data);
        self.block(6, &body)
    }

    /// A Simple Packet Block (interface 0, no timestamp).
    pub fn simple_packet(&mut self, orig_len: u32, data: &[u8]) -> io::Result<()> {
        let mut body = Vec::with_capacity(4 + data.len());
        body.extend_from_slice(&self.e.u32(orig_len));
        body.extend_from_slice(data);
        self.block(3, &body)
    }

    /// Any block: type, length, `body` zero-padded to 4 bytes, length.
    pub fn block(&mut self, block_type: u32, body: &[u8]) -> io::Result<()> {
        let e = self.e;
        let pad = (4 - body.len() % 4) % 4;
        let total = u32::try_from(12 + body.len() + pad).map_err(|_| invalid("block too long"))?;
        self.w.write_all(&e.u32(block_type))?;
        self.w.write_all(&e.u32(total))?;
        self.w.write_all(body)?;
        self.w.write_all(&[0u8; 3][..pad])?;
        self.w.write_all(&e.u32(total))
    }

    pub fn get_ref(&self) -> &W {
        &self.w
    }

    pub fn into_inner(self) -> W {
        self.w
    }
}

/// Key-trace writer (`keys4`, `keys13`, `keys21`; layouts in [`Format`]).
pub struct KeysWriter<W: Write> {
    w: W,
    format: Format,
}

impl<W: Write> KeysWriter<W> {
    /// Fails with `InvalidInput` if `format` is not a key-trace format.
    pub fn new(w: W, format: Format) -> io::Result<Self> {
        match format.key_record_len() {
            Some(_) => Ok(KeysWriter { w, format }),
            None => Err(invalid("not a key-trace format")),
        }
    }

    /// One record. `keys4` writes the first 4 bytes of `t.src`; `keys21` appends `ts_ns` as a
    /// little-endian u64; `keys4`/`keys13` drop the timestamp. IPv6 tuples are refused.
    pub fn write(&mut self, t: &Tuple, ts_ns: u64) -> io::Result<()> {
        if t.v6 {
            return Err(invalid("key traces hold IPv4 tuples only"));
        }
        let mut b = [0u8; 21];
        b[0..4].copy_from_slice(&t.src[..4]);
        b[4..8].copy_from_slice(&t.dst[..4]);
        b[8..10].copy_from_slice(&t.sport.to_be_bytes());
        b[10..12].copy_from_slice(&t.dport.to_be_bytes());
        b[12] = t.proto;
        b[13..21].copy_from_slice(&ts_ns.to_le_bytes());
        let n = self.format.key_record_len().unwrap_or(13);
        self.w.write_all(&b[..n])
    }

    pub fn get_ref(&self) -> &W {
        &self.w
    }

    pub fn into_inner(self) -> W {
        self.w
    }
}
