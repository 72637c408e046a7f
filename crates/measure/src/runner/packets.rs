//! The packet path of a run: packets pushed one by one (`push`, `push_unkeyed`) or as 4-byte
//! keys (`push_keys4`), batched per key kind and dispatched to the plane or the workers, with
//! the ground truth and the epoch boundaries by packet count or capture time.

use algo::KeyBatch;
use key::{FlowKey, KeyKind, Tuple};

use super::{fail, Runner};

impl Runner {
    /// Account one packet that has no flow key (its class is counted, nothing else happens).
    pub fn push_unkeyed(&mut self, class: wire::Class, wire_len: u32) {
        self.totals.add(class, wire_len);
    }

    /// One keyed (IPv4/IPv6) packet.
    #[inline(always)]
    pub fn push(&mut self, ts_ns: u64, tuple: &Tuple, wire_len: u32) {
        // An IPv4 packet into a batch of packed tuples (`packed`): first, with nothing else to
        // ask (no fast path, no watch; workers only if they take whole packets, else no truth).
        // Inlined into the reading loop, the rest not: a call a packet saved and registers
        // spilled only where a packet needs more (issue 13, the reader-bound two workers).
        if self.packed && !tuple.v6 && self.batch_v4.len() == self.batch_weights.len() {
            self.totals.add(wire::Class::Ipv4, wire_len);
            self.tick(ts_ns);
            // Once for every kind, as with whole packets to workers (`end_epoch` copies it).
            self.truth[0].count(ts_ns, wire_len);
            self.batch_v4.push(key::V4::of(tuple));
            if self.cfg.truth {
                self.batch_lens.push(wire_len);
            }
            self.end_packet(ts_ns, self.cfg.weight.of(wire_len));
            return;
        }
        self.push_keyed(ts_ns, tuple, wire_len);
    }

    /// [`Runner::push`] of a packet that is not a packed IPv4 one.
    #[inline(never)]
    pub(super) fn push_keyed(&mut self, ts_ns: u64, tuple: &Tuple, wire_len: u32) {
        let class = if tuple.v6 {
            wire::Class::Ipv6
        } else {
            wire::Class::Ipv4
        };
        self.totals.add(class, wire_len);
        self.tick(ts_ns);
        let w = self.cfg.weight.of(wire_len);
        if let Some(dp) = &mut self.visor {
            self.keys.clear();
            self.keys.extend(self.kinds.iter().map(|&k| tuple.key(k)));
            let ts = (!self.untimed).then_some(ts_ns);
            if dp.route(ts, u64::from(wire_len), &self.keys, w) == visor::Path::Fast {
                // Measured by the fast path alone; the truth and the spreaders' base count it
                // as any other packet (with workers, in the reader's table, added to the
                // workers' flows at the epoch's end: `EpochTruth::settle`).
                for (i, k) in self.keys.iter().enumerate() {
                    if let (KeyKind::Pair, Some(p)) = (self.kinds[i], &mut self.peers) {
                        p.add(k);
                    }
                    if self.cfg.truth {
                        self.truth[i].add(ts_ns, *k, wire_len);
                    } else {
                        self.truth[i].count(ts_ns, wire_len);
                    }
                }
                return;
            }
        }
        if !self.batch_v4.is_empty() {
            self.spill_v4();
        }
        if let Some(pool) = self.pool.as_mut().filter(|p| p.takes_packets()) {
            // The packet whole to its worker, which builds its keys (`Pool::put_packet`);
            // the reader counts the epoch's totals only, once: every kind counts the same
            // packets, and the first kind's totals are copied to the others at the epoch's end
            // (`end_epoch`).
            self.truth[0].count(ts_ns, wire_len);
            if self.failure.is_none() {
                let ts = (!self.untimed).then_some(ts_ns);
                if let Err(f) = pool.put_packet(tuple, w, wire_len, ts) {
                    fail(&mut self.failure, f.in_epoch(self.truth[0].index));
                }
            }
        }
        // Otherwise key by key: to its worker, or to the runner's own batch.
        let by_key = self.pool.as_ref().is_none_or(|p| !p.takes_packets());
        for (i, &kind) in self.kinds.iter().enumerate().filter(|_| by_key) {
            // With a fast path the keys are built already (`self.keys`).
            let k = match self.visor {
                Some(_) => self.keys[i],
                None => tuple.key(kind),
            };
            match &mut self.pool {
                // Each key straight to its worker's part (no batch in between). Each worker
                // keeps the exact counts of the flows it is given (merged at the epoch's end);
                // the reader counts the epoch's totals only.
                Some(pool) => {
                    self.truth[i].count(ts_ns, wire_len);
                    if self.failure.is_none() {
                        // A trace without times gives none (the instances record no times).
                        let ts = (!self.untimed).then_some(ts_ns);
                        if let Err(f) = pool.put(i, k, w, wire_len, ts) {
                            fail(&mut self.failure, f.in_epoch(self.truth[0].index));
                        }
                    }
                }
                None => {
                    let counts = if self.cfg.truth {
                        Some(self.truth[i].add(ts_ns, k, wire_len))
                    } else {
                        self.truth[i].count(ts_ns, wire_len);
                        None
                    };
                    if let Some(watch) = self.plane.watch.as_mut().filter(|x| x.ki == i) {
                        watch.packet(ts_ns, &k, counts.map(|c| (c, w)));
                    }
                    self.batch_keys[i].push(k);
                    // All 4-byte keys: the batch goes the u32 path.
                    if k.len() == 4 {
                        self.batch_u32[i].push(k.prefix_u32());
                    }
                }
            }
        }
        self.end_packet(ts_ns, w);
    }

    /// The clock's tick for a packet at `ts_ns`: the epoch it opens, if any, after the last.
    #[inline(always)]
    pub(super) fn tick(&mut self, ts_ns: u64) {
        let (index, new) = self.clock.tick(ts_ns);
        if new {
            self.next_epoch(index);
        }
        self.idle_from.get_or_insert(index);
    }

    #[cold]
    #[inline(never)]
    pub(super) fn next_epoch(&mut self, index: u64) {
        // Before `end_epoch`, which hands the epoch's truth (and its index) on.
        let closed = self.truth[0].index;
        self.end_epoch();
        self.idle_gap(closed, index);
        for t in &mut self.truth {
            t.index = index;
        }
    }

    /// The packet's weight and time into the batch; a full batch is flushed.
    #[inline(always)]
    pub(super) fn end_packet(&mut self, ts_ns: u64, w: u64) {
        self.batch_weights.push(w);
        if self.times && !self.untimed {
            self.batch_ts.push(ts_ns);
        }
        if self.batch_weights.len() == self.cfg.batch {
            self.flush();
        }
    }

    /// An IPv6 packet in a batch of packed IPv4 tuples: the batch so far becomes each kind's
    /// keys, as `push` would have built them, and the rest of the batch is keyed as usual.
    #[cold]
    pub(super) fn spill_v4(&mut self) {
        if self.pool.is_some() {
            // With workers: the batch so far goes to them, before this packet.
            self.dispatch_v4();
            self.batch_weights.clear();
            self.batch_ts.clear();
            self.batch_lens.clear();
            return;
        }
        for (i, &kind) in self.kinds.iter().enumerate() {
            let v4 = self.batch_v4.iter();
            self.batch_keys[i].extend(v4.clone().map(|v| v.key(kind)));
            if kind.len(false) == 4 {
                self.batch_u32[i].extend(v4.map(|v| v.u32_key(kind)));
            }
        }
        self.batch_v4.clear();
    }

    /// A packed batch (`packed` with workers) to the workers, packet by packet to the worker
    /// each belongs to (`Pool::put_v4s`); the batch of tuples is emptied.
    pub(super) fn dispatch_v4(&mut self) {
        if let Some(pool) = self.pool.as_mut().filter(|_| !self.batch_v4.is_empty()) {
            if self.failure.is_none() {
                let n = self.batch_v4.len();
                let ts = self.batch_ts.get(..n).unwrap_or(&[]);
                let ws = &self.batch_weights[..n];
                if let Err(f) = pool.put_v4s(&self.batch_v4, ws, ts, &self.batch_lens) {
                    fail(&mut self.failure, f.in_epoch(self.truth[0].index));
                }
            }
            self.batch_v4.clear();
        }
    }

    /// Whether [`Runner::push_keys4`] may take this run's packets: one key kind, `src`, and
    /// nothing that wants more of a packet than its key (no fast path, no `--instant` watch).
    pub fn takes_keys4(&self) -> bool {
        self.kinds == [KeyKind::Src] && self.visor.is_none() && self.plane.watch.is_none()
    }

    /// A block of `keys4` records (`trace::Capture::for_each_keys4`: IPv4 source addresses as
    /// big-endian u32, no timestamp, wire length 0), each counted as [`Runner::push`] counts
    /// one such record: same epochs, totals, truth, dispatch and states, with the keys handed
    /// to the u32 batch path (and to workers) as they are, no `Tuple` or `FlowKey` per packet
    /// (issue 14). Only when [`Runner::takes_keys4`], and for every packet of the run (a batch
    /// holds keys of one form).
    pub fn push_keys4(&mut self, keys: &[u32]) {
        debug_assert!(self.takes_keys4());
        let w = self.cfg.weight.of(0);
        let mut rest = keys;
        while !rest.is_empty() {
            // The chunk's first packet may open an epoch; the chunk then runs to the epoch's
            // end, the batch's end or the block's, whichever comes first.
            let (index, new) = self.clock.tick(0);
            if new {
                self.end_epoch();
                for t in &mut self.truth {
                    t.index = index;
                }
            }
            let batch_room = self.cfg.batch - self.batch_weights.len() - 1;
            let room = self.clock.room().min(batch_room as u64);
            let m = 1 + (rest.len() - 1).min(usize::try_from(room).unwrap_or(usize::MAX));
            self.clock.tick_more((m - 1) as u64);
            self.batch_weights.resize(self.batch_weights.len() + m, w);
            let (chunk, later) = rest.split_at(m);
            rest = later;
            self.totals.add_ipv4(m as u64, 0);
            match &mut self.pool {
                Some(pool) => {
                    self.truth[0].count_n(0, m as u64, 0);
                    for &v in chunk {
                        if self.failure.is_some() {
                            break;
                        }
                        if let Err(f) = pool.put_u32(0, v, w, 0) {
                            fail(&mut self.failure, f.in_epoch(self.truth[0].index));
                        }
                    }
                }
                None => {
                    if self.cfg.truth {
                        for &v in chunk {
                            self.truth[0].add(0, FlowKey::from_u32(v), 0);
                        }
                    } else {
                        self.truth[0].count_n(0, m as u64, 0);
                    }
                    self.batch_u32[0].extend_from_slice(chunk);
                }
            }
            if self.batch_weights.len() >= self.cfg.batch {
                self.flush();
            }
        }
    }

    #[inline(never)]
    pub(super) fn flush(&mut self) {
        if self.batch_weights.is_empty() {
            return;
        }
        if self.pool.is_some() {
            // With workers the keys went to their parts as they came (`push`), or go now,
            // packed (`dispatch_v4`): the batch is otherwise only a count of packets.
            self.dispatch_v4();
        }
        let weights = &self.batch_weights;
        if !self.batch_v4.is_empty() {
            // Packed tuples, every packet of the batch (`push`): each kind reads its keys in them.
            for (ki, &kind) in self.kinds.iter().enumerate() {
                let batch = KeyBatch::V4(&self.batch_v4, kind);
                self.plane.feed(ki, batch, weights, &self.batch_ts);
            }
        }
        let keyed = self.batch_v4.is_empty();
        for (ki, (keys, narrow)) in self.batch_keys.iter().zip(&self.batch_u32).enumerate() {
            // All 4-byte keys: the u32 path (from `push`, or `push_keys4`'s u32 keys alone);
            // otherwise (wider kinds, or an IPv6 key in an IPv4 source batch) the FlowKeys.
            let batch = if narrow.len() == weights.len() {
                KeyBatch::U32(narrow)
            } else {
                KeyBatch::Keys(keys)
            };
            // With workers the keys went to their parts as they came (`push`); the batch is
            // then only a count of packets.
            if self.pool.is_none() && keyed {
                self.plane.feed(ki, batch, weights, &self.batch_ts);
            }
        }
        for b in &mut self.batch_keys {
            b.clear();
        }
        for b in &mut self.batch_u32 {
            b.clear();
        }
        self.batch_v4.clear();
        self.batch_weights.clear();
        self.batch_ts.clear();
        self.batch_lens.clear();
        // Once a batch: the epochs answered meanwhile become visible (`completed_epochs`).
        self.collect_answers();
        if let Some(l) = &mut self.instant {
            l.poll(self.truth[0].index);
        }
    }
}
