//! Several captures' records as one stream in capture-time order, as `mergecap` (Wireshark)
//! merges files: at each step the record with the earliest timestamp among the captures' next
//! records; among equal timestamps the capture given first; within a capture, file order. A
//! capture whose records are not sorted in time keeps its own order (only the captures' heads
//! are compared), as `mergecap` does, so the merge is a pure function of the inputs.
//!
//! It lives here, beside [`Capture::records`], because it is about records and their
//! timestamps, not about what the packets hold: any consumer (the CLI's truth of several
//! hosts' captures, a tool writing a merged file) gets the same order.
//!
//! Memory: one pending record per capture (a borrowed slice of its mapping) and a heap of one
//! entry per capture; nothing is copied. A stream (stdin, a pipe) is read into memory by
//! [`Capture::records`], so callers that must stay in constant memory give files.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::iter::FusedIterator;

use crate::{Capture, Record, Records, TraceError};

/// The records of several captures in capture-time order ([`merge_by_time`]).
pub struct TimeMerged<'a> {
    iters: Vec<Records<'a>>,
    /// Each capture's next record, taken from its iterator but not yet delivered.
    heads: Vec<Option<Record<'a>>>,
    /// (timestamp, capture) of every pending head: the smallest first, ties by capture order.
    order: BinaryHeap<Reverse<(u64, usize)>>,
    /// Captures whose next record must be read before the next one is chosen (all of them at
    /// the start, then the one just delivered): reading lazily delivers every record ahead of
    /// a read error before the error.
    refill: Vec<usize>,
    done: bool,
}

/// The records of `caps` merged by capture time, each with the index of its capture in `caps`.
/// Ends after every capture's last record, or after the first read error (yielded once; the
/// iterator is fused): every record merged ahead of the unreadable one has been delivered.
pub fn merge_by_time(caps: &[Capture]) -> TimeMerged<'_> {
    for c in caps {
        // A whole pass over each: pre-fault large mappings ahead of the reader.
        c.begin();
    }
    TimeMerged {
        iters: caps.iter().map(Capture::records).collect(),
        heads: vec![None; caps.len()],
        order: BinaryHeap::with_capacity(caps.len()),
        refill: (0..caps.len()).rev().collect(),
        done: false,
    }
}

impl<'a> Iterator for TimeMerged<'a> {
    type Item = Result<(usize, Record<'a>), TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        while let Some(i) = self.refill.pop() {
            match self.iters[i].next() {
                Some(Ok(r)) => {
                    self.order.push(Reverse((r.ts_ns, i)));
                    self.heads[i] = Some(r);
                }
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
                None => {}
            }
        }
        let Some(Reverse((_, i))) = self.order.pop() else {
            self.done = true;
            return None;
        };
        self.refill.push(i);
        // Every entry in `order` has its head (pushed together above).
        self.heads[i].take().map(|r| Ok((i, r)))
    }
}

impl FusedIterator for TimeMerged<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::write::{Endian, PcapWriter};

    /// A pcap capture of one-byte frames, frame `k` holding `tag + k`, at `times` (ns).
    fn cap(name: &str, tag: u8, times: &[u64]) -> Capture {
        let mut w = PcapWriter::new(vec![], 1, 65535, Endian::Little, true).unwrap();
        for (k, &t) in times.iter().enumerate() {
            w.write_packet(t, 1, &[tag + k as u8]).unwrap();
        }
        Capture::from_bytes(name, w.into_inner(), None).unwrap()
    }

    /// (capture, frame byte, timestamp) of every merged record.
    fn merged(caps: &[Capture]) -> Vec<(usize, u8, u64)> {
        merge_by_time(caps)
            .map(|r| {
                let (i, rec) = r.unwrap();
                let crate::Body::Frame { data, .. } = rec.body else {
                    panic!("a frame");
                };
                (i, data[0], rec.ts_ns)
            })
            .collect()
    }

    #[test]
    fn interleaves_by_time_ties_by_capture_then_record_order() {
        let a = cap("a.pcap", 10, &[1, 5, 5, 9]);
        let b = cap("b.pcap", 20, &[0, 5, 7]);
        let c = cap("c.pcap", 30, &[5]);
        assert_eq!(
            merged(&[a, b, c]),
            vec![
                (1, 20, 0),
                (0, 10, 1),
                // Equal times: capture a (given first), both of its records in their order,
                // then b, then c.
                (0, 11, 5),
                (0, 12, 5),
                (1, 21, 5),
                (2, 30, 5),
                (1, 22, 7),
                (0, 13, 9),
            ]
        );
    }

    #[test]
    fn one_capture_is_its_own_order_even_unsorted() {
        let a = cap("a.pcap", 0, &[3, 1, 2]);
        assert_eq!(merged(&[a]), vec![(0, 0, 3), (0, 1, 1), (0, 2, 2)]);
    }

    #[test]
    fn empty_captures_and_no_capture() {
        assert_eq!(merged(&[]), vec![]);
        let a = cap("a.pcap", 0, &[]);
        let b = cap("b.pcap", 10, &[4]);
        let c = cap("c.pcap", 20, &[]);
        assert_eq!(merged(&[a, b, c]), vec![(1, 10, 4)]);
    }

    #[test]
    fn an_unsorted_capture_keeps_its_order_against_the_others() {
        // `a` goes back in time: only heads are compared, so a's 1 follows its 3 at once,
        // ahead of b's 4, and a's records stay in file order, as mergecap merges.
        let a = cap("a.pcap", 0, &[3, 1]);
        let b = cap("b.pcap", 10, &[2, 4]);
        assert_eq!(
            merged(&[a, b]),
            vec![(1, 10, 2), (0, 0, 3), (0, 1, 1), (1, 11, 4)]
        );
    }

    #[test]
    fn a_read_error_comes_after_the_records_merged_ahead_of_it_then_ends() {
        let a = cap("a.pcap", 0, &[1, 4]);
        // b: a record at 2, then a record header cut short.
        let mut w = PcapWriter::new(vec![], 1, 65535, Endian::Little, true).unwrap();
        w.write_packet(2, 1, &[10]).unwrap();
        let mut bytes = w.into_inner();
        bytes.extend_from_slice(&[0; 7]);
        let b = Capture::from_bytes("b.pcap", bytes, None).unwrap();
        let caps = [a, b];
        let mut it = merge_by_time(&caps);
        assert_eq!(it.next().unwrap().unwrap().0, 0);
        assert_eq!(it.next().unwrap().unwrap().0, 1);
        let e = it.next().unwrap().unwrap_err();
        assert_eq!(e.file, "b.pcap");
        assert_eq!(e.offset, 24 + 16 + 1);
        assert!(it.next().is_none());
    }
}
