//! The epochs a run over a capture gets when none is asked for: time epochs cut from the
//! capture's span and rate (issue 34), one second for a stream.

use measure::RunConfig;
use trace::{Capture, Format};

/// Records read to choose a capture file's epochs ([`default_epoch`]): all of a file that
/// holds fewer, else the first ones, the rest extrapolated by the file's size.
const SPAN_SAMPLE: usize = 1_000_000;
/// About how many epochs a capture file is cut into by default, and the fewest packets an
/// epoch then holds on average (fewer and every fractional threshold is a packet or two).
const DEFAULT_EPOCHS: u64 = 10;
const MIN_EPOCH_PACKETS: u64 = 1_000;
/// A stream's epochs (standard input, a pipe), whose length cannot be known: one second of
/// capture time, as `live`'s.
pub const STREAM_EPOCH_MS: u64 = 1000;

/// A capture file's packets and the capture time they span (first to last timestamp),
/// from the records' headers alone (no frame is parsed).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub packets: u64,
    pub ns: u64,
    /// The capture time of the packets between the 1st and the 99th percentile of time.
    pub dense_ns: u64,
    /// Read to the end; else the first [`SPAN_SAMPLE`] records, extrapolated by size.
    pub exact: bool,
}

pub fn capture_span(cap: &Capture) -> Option<Span> {
    let bytes = cap.bytes();
    let base = bytes.as_ptr() as usize;
    let rec_len = cap.format().key_record_len().unwrap_or(0) as u64;
    let mut ts: Vec<u64> = vec![];
    let mut end = 0u64;
    let mut exact = true;
    for rec in cap.records() {
        // A read error ends the sample; the run reads to it and reports it.
        let Ok(rec) = rec else { break };
        if ts.len() == SPAN_SAMPLE {
            exact = false;
            break;
        }
        ts.push(rec.ts_ns);
        end = match rec.body {
            trace::Body::Frame { data, .. } => {
                (data.as_ptr() as usize).saturating_sub(base) as u64 + data.len() as u64
            }
            trace::Body::Tuple(_) => ts.len() as u64 * rec_len,
        };
    }
    ts.sort_unstable();
    let (&lo, &hi) = (ts.first()?, ts.last()?);
    if hi <= lo {
        return None;
    }
    // The span most packets lie in: a capture's stragglers (a synscan's last packets 20 s after
    // the scan) would stretch every epoch over the idle tail.
    let at = |q: usize| ts[(ts.len() - 1) * q / 100];
    let dense = at(99).saturating_sub(at(1)).max(1);
    let scale = if exact || end == 0 {
        1.0
    } else {
        bytes.len() as f64 / end as f64
    };
    Some(Span {
        packets: (ts.len() as f64 * scale) as u64,
        ns: ((hi - lo) as f64 * scale) as u64,
        dense_ns: (dense as f64 * scale) as u64,
        exact,
    })
}

/// The epoch length chosen for a capture of `span`: about [`DEFAULT_EPOCHS`] epochs of at least
/// [`MIN_EPOCH_PACKETS`] and at most `truth::DEFAULT_EPOCH_PACKETS` packets on average, rounded
/// to the nearest 1, 2 or 5 times a power of ten milliseconds (at least 1 ms); one epoch over the
/// whole capture when it holds fewer than two epochs' worth. With about how many epochs it makes.
pub fn epoch_for(span: Span) -> (u64, u64) {
    let span_ms = span.ns as f64 / 1e6;
    // The length fits the packets' dense part (98% of them), the count is over the whole span.
    let dense_ms = span.dense_ns.min(span.ns) as f64 / 1e6;
    // The 1-2-5 steps from 1 ms on.
    let steps = (0..20).flat_map(|e| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(e)));
    let ms = if span.packets < 2 * MIN_EPOCH_PACKETS {
        // The first step past the capture's span: one epoch.
        steps.into_iter().find(|&m| m > span_ms).unwrap_or(1e19)
    } else {
        let per =
            (span.packets / DEFAULT_EPOCHS).clamp(MIN_EPOCH_PACKETS, truth::DEFAULT_EPOCH_PACKETS);
        let want = (dense_ms * per as f64 / span.packets as f64).max(1.0);
        // No nearer step that would hold more than the largest epoch on average.
        let most = dense_ms * truth::DEFAULT_EPOCH_PACKETS as f64 / span.packets as f64;
        steps
            .into_iter()
            .filter(|&m| m == 1.0 || m <= most)
            .min_by(|a, b| (a / want).ln().abs().total_cmp(&(b / want).ln().abs()))
            .unwrap_or(1.0)
    };
    let ms = ms.min(u64::MAX as f64) as u64;
    (ms, (span.ns / 1_000_000) / ms.max(1) + 1)
}

/// `run` on a capture with timestamps and no epoch given (flag or config): time epochs, their
/// length chosen from the capture's duration and rate ([`epoch_for`]; a stream, whose length is
/// unknown, gets [`STREAM_EPOCH_MS`]); said in the header and the notes. Key traces without
/// time, captures whose records all carry one timestamp, and runs that write snapshots (every
/// host of a network-wide merge must cut the same epochs) keep packet epochs.
pub(crate) fn default_epoch(cap: &Capture, cfg: &mut RunConfig) {
    if cfg.epoch_packets.is_some() || cfg.epoch_ms.is_some() || cfg.snapshots.is_some() {
        return;
    }
    if matches!(cap.format(), Format::Keys4 | Format::Keys13) {
        return;
    }
    let why = if cap.is_stream() {
        cfg.epoch_ms = Some(STREAM_EPOCH_MS);
        format!("a stream, whose length is unknown: epochs of {STREAM_EPOCH_MS} ms of capture time, as live's")
    } else {
        let Some(span) = capture_span(cap) else {
            return;
        };
        let (ms, epochs) = epoch_for(span);
        cfg.epoch_ms = Some(ms);
        format!(
            "chosen from the capture: {}{} packets over {:.3} s{}, about {epochs} {} of {ms} ms",
            if span.exact { "" } else { "about " },
            span.packets,
            span.ns as f64 / 1e9,
            if span.dense_ns < span.ns / 2 {
                format!(" (98% of them within {:.3} s)", span.dense_ns as f64 / 1e9)
            } else {
                String::new()
            },
            if epochs == 1 { "epoch" } else { "epochs" },
        )
    };
    cfg.notes.push(format!(
        "epochs of {} ms ({why}); --epoch-ms or --epoch-packets to choose",
        cfg.epoch_ms.unwrap_or(0)
    ));
    cfg.epoch_choice = Some(why);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(packets: u64, secs: f64) -> Span {
        Span {
            packets,
            ns: (secs * 1e9) as u64,
            dense_ns: (secs * 1e9) as u64,
            exact: true,
        }
    }

    /// About ten epochs of a long enough capture, at least 1,000 packets each on average, at most
    /// 2 M; one epoch for a capture of fewer than 2,000 packets; lengths on the 1-2-5 steps.
    #[test]
    fn epochs_fit_the_capture() {
        // 20,000 packets in 20 ms: 2,000 a 2 ms epoch.
        assert_eq!(epoch_for(span(20_000, 0.02)), (2, 11));
        // 3,074 packets in 60 s: 1,000 packets are 19.5 s, the nearest step 20 s.
        assert_eq!(epoch_for(span(3_074, 60.0)), (20_000, 4));
        // Fewer than two epochs' worth: one epoch past the span.
        assert_eq!(epoch_for(span(1_000, 3.3)), (5_000, 1));
        // 1e9 packets in an hour: 2 M packets are 7.2 s; 10 s is nearer on a log scale but
        // would hold 2.8 M.
        assert_eq!(epoch_for(span(1_000_000_000, 3600.0)).0, 5_000);
        // A dense microsecond capture: at least 1 ms.
        assert_eq!(epoch_for(span(10_000, 0.000_5)).0, 1);
        // 2,000 packets in the first 2 s of a 23 s capture: epochs of the dense part's tenth
        // (1,000 packets there are 1 s), over the whole span.
        let tail = Span {
            dense_ns: 2_000_000_000,
            ..span(2_011, 23.0)
        };
        assert_eq!(epoch_for(tail), (1_000, 24));
        for (p, s) in [(5_000u64, 1.0), (123_456, 77.0), (9_999_999, 12.5)] {
            let (ms, n) = epoch_for(span(p, s));
            let lead = ms / 10u64.pow(ms.ilog10());
            assert!([1, 2, 5].contains(&lead), "{ms}");
            assert!((4..=25).contains(&n), "{p} {s}: {n}");
        }
    }
}
