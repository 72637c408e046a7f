//! The stream reader (stdin, pipes) against the slice parser (mapped files): for every real
//! capture in `shared/traces`, the tcpdump regression suite included (many files deliberately
//! malformed), the bytes are fed through a reader that returns short reads (1 byte, 7 bytes,
//! 4096 bytes, random sizes from a fixed seed). The records (every field, frame bytes included)
//! and the final error (file, offset, kind) must be those of the slice parser on the same bytes,
//! and every whole record must have been delivered before the reader saw the end of the stream.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use trace::{Body, Capture, Format, Record, Tuple};

/// How a [`Short`] reader cuts its reads.
#[derive(Clone, Copy, Debug)]
enum Cut {
    Fixed(usize),
    /// Sizes 1..=max from a xorshift generator with this seed.
    Random {
        seed: u64,
        max: usize,
    },
}

/// A reader over `data` whose reads return at most the next size of `cut`. When it first
/// reports the end, it notes how many records had been delivered by then.
struct Short {
    data: Vec<u8>,
    pos: usize,
    cut: Cut,
    rng: u64,
    delivered: Arc<AtomicU64>,
    at_eof: Arc<AtomicU64>,
}

impl Read for Short {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let rest = &self.data[self.pos..];
        if rest.is_empty() {
            let _ = self.at_eof.compare_exchange(
                u64::MAX,
                self.delivered.load(Ordering::SeqCst),
                Ordering::SeqCst,
                Ordering::SeqCst,
            );
            return Ok(0);
        }
        let size = match self.cut {
            Cut::Fixed(n) => n,
            Cut::Random { max, .. } => {
                self.rng ^= self.rng << 13;
                self.rng ^= self.rng >> 7;
                self.rng ^= self.rng << 17;
                1 + (self.rng % max as u64) as usize
            }
        };
        let n = size.min(buf.len()).min(rest.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.pos += n;
        Ok(n)
    }
}

/// A record with its bytes copied out.
#[derive(Debug, PartialEq, Eq)]
enum Owned {
    Frame {
        ts_ns: u64,
        wire_len: u32,
        link: u32,
        data: Vec<u8>,
    },
    Tuple {
        ts_ns: u64,
        wire_len: u32,
        tuple: Tuple,
    },
}

fn own(r: Record<'_>) -> Owned {
    match r.body {
        Body::Frame { link, data } => Owned::Frame {
            ts_ns: r.ts_ns,
            wire_len: r.wire_len,
            link,
            data: data.to_vec(),
        },
        Body::Tuple(tuple) => Owned::Tuple {
            ts_ns: r.ts_ns,
            wire_len: r.wire_len,
            tuple,
        },
    }
}

/// Records and final error (its message: file, offset, kind), or the open error.
type Outcome = Result<(Vec<Owned>, Option<String>), String>;

fn by_slice(name: &str, bytes: &[u8], format: Option<Format>) -> Outcome {
    let cap = Capture::from_bytes(name, bytes.to_vec(), format).map_err(|e| e.to_string())?;
    let mut recs = Vec::new();
    let mut err = None;
    for r in cap.records() {
        match r {
            Ok(r) => recs.push(own(r)),
            Err(e) => err = Some(e.to_string()),
        }
    }
    Ok((recs, err))
}

/// Also returns how many records had been delivered when the reader first reported the end
/// (`None` if it never did).
fn by_stream(name: &str, bytes: &[u8], format: Option<Format>, cut: Cut) -> (Outcome, Option<u64>) {
    let delivered = Arc::new(AtomicU64::new(0));
    let at_eof = Arc::new(AtomicU64::new(u64::MAX));
    let reader = Short {
        data: bytes.to_vec(),
        pos: 0,
        cut,
        rng: match cut {
            Cut::Random { seed, .. } => seed | 1,
            Cut::Fixed(_) => 0,
        },
        delivered: delivered.clone(),
        at_eof: at_eof.clone(),
    };
    let cap = match Capture::from_reader(name, reader, format) {
        Ok(c) => c,
        Err(e) => return (Err(e.to_string()), None),
    };
    let mut recs = Vec::new();
    let res = cap.for_each_streamed(|r| {
        recs.push(own(r));
        delivered.fetch_add(1, Ordering::SeqCst);
    });
    let eof = match at_eof.load(Ordering::SeqCst) {
        u64::MAX => None,
        n => Some(n),
    };
    match res {
        Ok(n) => {
            assert_eq!(n, recs.len() as u64, "{name}: returned count");
            (Ok((recs, None)), eof)
        }
        Err(e) => (Ok((recs, Some(e.to_string()))), eof),
    }
}

const CUTS: [Cut; 5] = [
    Cut::Fixed(1),
    Cut::Fixed(7),
    Cut::Fixed(4096),
    Cut::Random { seed: 42, max: 100 },
    Cut::Random {
        seed: 0x5eed,
        max: 70_000,
    },
];

/// Compare stream and slice on `bytes` for every cut; returns the number of records.
fn check(name: &str, bytes: &[u8], format: Option<Format>) -> usize {
    let want = by_slice(name, bytes, format);
    for cut in CUTS {
        let (got, eof) = by_stream(name, bytes, format, cut);
        // Compare counts and errors first for a readable failure, then every record.
        match (&want, &got) {
            (Ok((w, we)), Ok((g, ge))) => {
                assert_eq!(
                    (w.len(), we),
                    (g.len(), ge),
                    "{name} ({format:?}, {cut:?}): count and error"
                );
                assert!(w == g, "{name} ({format:?}, {cut:?}): records differ");
                if let Some(at) = eof {
                    assert_eq!(
                        at,
                        w.len() as u64,
                        "{name} ({cut:?}): every whole record before the end of the stream"
                    );
                }
            }
            _ => assert_eq!(want, got, "{name} ({format:?}, {cut:?}): open"),
        }
    }
    want.map_or(0, |(r, _)| r.len())
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("traces directory")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_file() && !p.ends_with("README.md"))
        .collect();
    v.sort();
    v
}

#[test]
fn real_captures_stream_like_the_slice_parser() {
    let Some(traces) = testkit::traces_dir() else {
        return;
    };
    let paths = files(&traces);
    assert!(paths.len() >= 8, "{paths:?}");
    let mut records = 0;
    for p in &paths {
        let name = p.to_str().expect("utf-8 path");
        let bytes = std::fs::read(p).expect("read trace");
        records += check(name, &bytes, None);
        // The same bytes as key traces: fixed records and a partial tail.
        for f in [Format::Keys4, Format::Keys13, Format::Keys21] {
            check(name, &bytes, Some(f));
        }
    }
    assert!(records > 10_000, "{records}");
}

#[test]
fn tcpdump_captures_stream_like_the_slice_parser() {
    let Some(dir) = testkit::trace("tcpdump-tests") else {
        return;
    };
    let paths = files(&dir);
    assert_eq!(paths.len(), 830, "the suite holds 830 files");
    let (mut errors, mut records) = (0, 0);
    for (i, p) in paths.iter().enumerate() {
        let name = p.to_str().expect("utf-8 path");
        let bytes = std::fs::read(p).expect("read trace");
        // The suite's malformations are inside packets; its framing is clean (tests/tcpdump.rs).
        // So each file is also fed cut short and with a length field overwritten, to exercise
        // the framing errors: truncated records and blocks, oversized and misaligned lengths.
        let mut bad = bytes.clone();
        let at = 24 + 8 + (i * 4) % 64; // a pcap incl_len, or some pcapng length or field
        if let Some(w) = bad.get_mut(at..at + 4) {
            w.copy_from_slice(&[0x7f, 0xff, 0xff, 0xf1]);
        }
        let variants = [
            &bytes[..],
            &bytes[..bytes.len().saturating_sub(1)],
            &bytes[..bytes.len() / 2],
            &bad[..],
        ];
        for v in variants {
            records += check(name, v, None);
            if !matches!(by_slice(name, v, None), Ok((_, None))) {
                errors += 1;
            }
        }
    }
    println!("tcpdump-tests: {errors} variants end in an error, {records} records");
    // Observed: 10 183 records in the whole files; most cut or overwritten ones fail.
    assert!(errors > 1200 && records > 10_000, "{errors} {records}");
}

#[test]
fn cut_captures_stream_like_the_slice_parser() {
    // Every prefix length of a small pcap and pcapng: truncation inside the file header,
    // record headers, records and blocks, at every byte.
    let Some(traces) = testkit::traces_dir() else {
        return;
    };
    for name in ["ndpi_synscan.pcap", "ndpi_alexa-app.pcapng"] {
        let p = traces.join(name);
        let bytes = std::fs::read(&p).expect("read trace");
        let name = p.to_str().expect("utf-8 path");
        let step = (bytes.len() / 600).max(1);
        for len in (0..bytes.len().min(2048)).chain((2048..bytes.len()).step_by(step)) {
            let want = by_slice(name, &bytes[..len], None);
            let (got, _) = by_stream(name, &bytes[..len], None, Cut::Fixed(5));
            assert!(want == got, "{name} cut at {len}: {want:?} vs {got:?}");
        }
    }
}

#[test]
fn a_stream_is_read_once_and_the_slice_api_still_works() {
    let Some(p) = testkit::trace("ndpi_synscan.pcap") else {
        return;
    };
    let bytes = std::fs::read(&p).expect("read trace");
    let name = p.to_str().expect("utf-8 path");
    let want = by_slice(name, &bytes, None).expect("opens");
    let reader = std::io::Cursor::new(bytes.clone());

    // The slice API reads the stream into memory: same records; then streaming reuses them.
    let cap = Capture::from_reader(name, reader, None).expect("opens");
    assert_eq!(cap.bytes(), &bytes[..]);
    let n = cap.for_each_streamed(|_| {}).expect("reads");
    assert_eq!(n, want.0.len() as u64);

    // Streamed first: a second pass is an I/O error, not a silent empty trace.
    let cap = Capture::from_reader(name, std::io::Cursor::new(bytes), None).expect("opens");
    assert_eq!(cap.for_each_streamed(|_| {}).ok(), Some(n));
    let e = cap.for_each_streamed(|_| {}).expect_err("read once");
    assert!(matches!(e.kind, trace::TraceErrorKind::Io(_)), "{e}");
}
