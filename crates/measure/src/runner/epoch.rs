//! Closing epochs: the finished epoch's states handed to the answer thread and its report taken
//! back, idle epochs and snapshots, the time grid (`advance_to`, `align_epochs`), states
//! replayed from snapshots (`netsift merge`), thresholds retuned between epochs, and the run's
//! end (`finish`, `try_finish`).

use super::build::kind_of;
use super::{fail, Replay, Runner, MAX_IDLE_GAP};
use crate::answer::{Answers, Job, Spent, States};
use crate::config::MeasureSpec;
use crate::instance::UpdateSpent;
use crate::plane::Plane;
use crate::report::{
    AccelCost, Cost, Coverage, EpochCover, EpochReport, PartialReason, Report, Warning,
};
use crate::workers::{Pool, WorkerFailure, ANSWERS};

impl Runner {
    /// Epoch end: the finished epoch goes to the answer thread (`crate::answer`) and the packet
    /// path goes on with empty states. With workers, each flushes and hands its state over to
    /// the answer thread, which merges them; the reader does not wait for them.
    pub(super) fn end_epoch(&mut self) {
        self.flush();
        let epoch = self.truth[0].index;
        if self.truth[0].packets == 0 && self.idle_due().is_some_and(|f| epoch >= f) {
            // A time epoch without traffic (an idle link) this run was in: its idle snapshot.
            self.write_idle(epoch);
        }
        if self.truth[0].packets == 0 || self.failure.is_some() {
            return;
        }
        // Before the epoch's truth is handed on.
        let cover = self.cover(epoch);
        let states = match &mut self.pool {
            Some(pool) => match pool.end_epoch({
                // The answer thread's reset states, one per worker and instance, for the
                // workers' swap; a worker given none copies its own (counted in `made`). With
                // every state of the rotation made, wait for the answer thread instead.
                let (stash, w) = (&mut self.stash, pool.len());
                let insts = &mut self.plane.instances;
                let answers = self.answers.as_ref();
                for (i, s) in answers.iter().flat_map(|a| a.spares()) {
                    stash[i].push(s);
                }
                for i in 0..insts.len() {
                    if !insts[i].reusable {
                        continue;
                    }
                    while stash[i].len() < w && insts[i].made >= insts[i].budget {
                        let Some((j, s)) = answers.and_then(Answers::next_spare) else {
                            break;
                        };
                        stash[j].push(s);
                    }
                    let copies = w.saturating_sub(stash[i].len()) as u16;
                    insts[i].made = insts[i].made.saturating_add(copies);
                }
                stash
            }) {
                Ok(rx) => {
                    if let Some(l) = &mut self.instant {
                        l.end_epoch(epoch);
                    }
                    States::Workers(rx)
                }
                Err(f) => {
                    fail(&mut self.failure, f.in_epoch(epoch));
                    return;
                }
            },
            None => {
                self.plane.flush_fronts();
                if let (Some(w), Some(l)) = (&mut self.plane.watch, &mut self.instant) {
                    w.end_epoch();
                    l.end_epoch(epoch);
                }
                let answers = self.answers.as_ref();
                let insts = &mut self.plane.instances;
                for (i, s) in answers.iter().flat_map(|a| a.spares()) {
                    insts[i].spare = Some(s);
                }
                for i in 0..insts.len() {
                    let inst = &insts[i];
                    if !inst.reusable || inst.spare.is_some() || inst.made < inst.budget {
                        continue;
                    }
                    // Every state of this instance is in use: wait for the answer thread.
                    while let Some((j, s)) = answers.and_then(Answers::next_spare) {
                        insts[j].spare = Some(s);
                        if j == i {
                            break;
                        }
                    }
                }
                States::Ready(
                    self.plane
                        .instances
                        .iter_mut()
                        .map(|i| (i.swap_out(), i.epoch_spent()))
                        .collect(),
                )
            }
        };
        // `netsift merge`: the snapshots' merged states are answered, not the packet path's.
        let mut replayed_fast = None;
        let seen = crate::snap::span_of(self.truth.first());
        let states = match self.replay.as_mut().map(|f| f(&seen)) {
            None => states,
            Some(Ok((s, fast))) => {
                replayed_fast = Some(fast);
                // Merged snapshots answered; the costs stay those of the packet path's
                // epoch (its plane measured the same packets), as the run's cost table counts.
                let spent: Vec<UpdateSpent> = match &states {
                    States::Ready(v) => v.iter().map(|(_, u)| *u).collect(),
                    States::Workers(_) => vec![],
                };
                let spent = spent
                    .into_iter()
                    .chain(std::iter::repeat(UpdateSpent::default()));
                States::Ready(s.into_iter().zip(spent).collect())
            }
            Some(Err(message)) => {
                fail(
                    &mut self.failure,
                    WorkerFailure {
                        worker: crate::ANSWERS,
                        epoch,
                        message,
                    },
                );
                return;
            }
        };
        // The reader's part (fast path) and, with one plane, the plane's; the workers' parts
        // come with their hand-overs.
        let peers = self.peers.as_mut().map(|p| {
            let mut part = p.take();
            if let Some((_, mine)) = self.plane.peers.as_mut().filter(|_| self.pool.is_none()) {
                part.merge(&mine.take());
            }
            part
        });
        if self.packed || self.pool.as_ref().is_some_and(Pool::takes_packets) {
            // Counted once in `push` (every kind counts every packet: an IPv6 packet keyed
            // kind by kind in a packed run is counted in the first kind too).
            if let Some((first, rest)) = self.truth.split_first_mut() {
                for t in rest {
                    (t.packets, t.bytes) = (first.packets, first.bytes);
                    (t.first_ns, t.last_ns) = (first.first_ns, first.last_ns);
                }
            }
        }
        let mut fresh = self
            .answers
            .as_ref()
            .and_then(Answers::truth_tables)
            .unwrap_or_default()
            .into_iter();
        let truth = self
            .truth
            .iter_mut()
            .map(|t| {
                let next = fresh.next().unwrap_or_default();
                std::mem::replace(t, next)
            })
            .collect();
        let job = Job {
            states,
            truth,
            cover,
            peers,
            retune: self.retuned.take(),
            fast: match replayed_fast {
                Some(f) => f,
                None => self.visor.as_mut().map(visor::DataPlane::end_epoch),
            },
        };
        self.totals.epochs += 1;
        if self.answers.as_mut().is_none_or(|a| a.send(job).is_err()) {
            // The answer thread stopped: its failure is among its reports.
            self.stop_answers();
        }
    }

    /// Move the reports the answer thread has finished into `epochs` (a failure into `failure`).
    pub(super) fn collect_answers(&mut self) {
        while let Some(r) = self.answers.as_ref().and_then(Answers::next_ready) {
            match r {
                Ok(e) => self.took(e),
                Err(f) => {
                    fail(&mut self.failure, f);
                }
            }
        }
    }

    /// Wait for every epoch handed over to be answered; what the answer thread spent.
    /// An answered epoch: kept for the report, its costs into the per-instance maxima (the
    /// epochs may be taken before the report is made).
    pub(super) fn took(&mut self, e: EpochReport) {
        // `--instant`: the epoch's events have all come; summarize it.
        if let Some(l) = &mut self.instant {
            l.settle(e.index, self.truth[0].index);
        }
        self.epoch_most.resize(e.costs.len(), (0.0, 0.0));
        for (m, c) in self.epoch_most.iter_mut().zip(&e.costs) {
            m.0 = m.0.max(c.update_seconds);
            m.1 = m.1.max(c.query_seconds);
        }
        self.epochs.push(e);
    }

    pub(super) fn stop_answers(&mut self) -> Option<Spent> {
        let (reports, spent) = self.answers.take()?.finish();
        for r in reports {
            match r {
                Ok(e) => self.took(e),
                Err(f) => {
                    fail(&mut self.failure, f);
                }
            }
        }
        match spent {
            Ok(s) => Some(s),
            Err(f) => {
                fail(&mut self.failure, f.in_epoch(self.truth[0].index));
                None
            }
        }
    }

    /// Answer every epoch from `replay`'s states instead of the packet path's (`netsift merge`):
    /// packets pushed then only give the epochs, their truth and totals, through the same
    /// reader, keying, answers and scoring as `run`. Needs one worker; call before the first
    /// packet.
    pub fn replay_from(&mut self, replay: Replay) {
        self.replay = Some(replay);
    }

    /// `netsift merge` without traces: close epoch `index` of `packets` packets and `bytes`
    /// bytes, spanning `first_ns..=last_ns`, with no flows (answers without scores), answered
    /// from [`Runner::replay_from`]'s states.
    pub fn close_replayed(&mut self, index: u64, packets: u64, bytes: u64, span: (u64, u64)) {
        for t in &mut self.truth {
            (t.index, t.packets, t.bytes) = (index, packets, bytes);
            (t.first_ns, t.last_ns) = span;
        }
        self.totals.packets += packets;
        self.totals.bytes += bytes;
        self.end_epoch();
    }

    /// Time epochs without a packet to close them (`netsift live` on an idle link): close the
    /// open epoch if `now_ns` (capture time, the clock packets are stamped with) is past its
    /// end, and collect the epochs answered meanwhile (with [`Runner::answer_inline`], every
    /// epoch before the returned index is then in [`Runner::completed_epochs`], if it held a
    /// packet: an empty epoch is not reported, the rule of `push`). The first call, before any
    /// packet, starts the epoch axis at `now_ns`. Returns the open epoch's index; packet epochs
    /// are left as they are.
    pub fn advance_to(&mut self, now_ns: u64) -> u64 {
        self.started_ns.get_or_insert(now_ns);
        self.seen_ns = self.seen_ns.max(now_ns);
        if let Some(index) = self.clock.advance(now_ns) {
            let closed = self.truth[0].index;
            self.end_epoch();
            self.idle_gap(closed, index);
            for t in &mut self.truth {
                t.index = index;
            }
        }
        self.idle_from.get_or_insert(self.clock.index());
        self.collect_answers();
        self.clock.index()
    }

    /// Time epochs on a grid from `origin_ns` (`netsift live` for snapshots: Unix time, 0):
    /// the first [`Runner::advance_to`] or packet then moves to its epoch on that grid. The
    /// epochs before it are not this run's (no idle snapshot for them). Call before any packet.
    pub fn align_epochs(&mut self, origin_ns: u64) {
        self.clock.advance(origin_ns);
    }

    /// Idle snapshots for the time epochs skipped between the one just closed (`closed`) and
    /// `next` (no packet, so no epoch end of their own), at most [`MAX_IDLE_GAP`] of the latest.
    pub(super) fn idle_gap(&mut self, closed: u64, next: u64) {
        let Some(from) = self.idle_due() else {
            return;
        };
        let first = (closed + 1)
            .max(from)
            .max(next.saturating_sub(MAX_IDLE_GAP));
        for index in first..next {
            self.write_idle(index);
        }
    }

    /// [`Runner::idle_from`] when idle snapshots are due: time epochs, snapshots asked, no
    /// failure.
    pub(super) fn idle_due(&self) -> Option<u64> {
        (self.cfg.epoch_ms.is_some() && self.cfg.snapshots.is_some() && self.failure.is_none())
            .then_some(self.idle_from)
            .flatten()
    }

    /// How much of epoch `index` (the open one, or an idle one before it) the capture saw: a
    /// time epoch's bounds, from the capture's start when this run's first epoch began before
    /// it (a time grid: [`Runner::align_epochs`]), to the capture's end when a signal cut it
    /// short ([`Runner::interrupt`]); a packet epoch's first and last packet.
    pub(super) fn cover(&self, index: u64) -> EpochCover {
        let t = &self.truth[0];
        let open = t.index == index && t.packets > 0;
        let (first, last) = if open {
            (t.first_ns, t.last_ns)
        } else {
            (0, 0)
        };
        let mut reasons = vec![];
        let mut span = match self.clock.bounds(index) {
            Some((start, end)) => {
                let mut span = Coverage {
                    start_ns: start,
                    end_ns: end,
                };
                // This run's first epoch: it started at its first advance or packet.
                let packet = open.then_some(first);
                let began = match (self.started_ns, packet) {
                    (Some(a), Some(p)) => Some(a.min(p)),
                    (a, p) => a.or(p),
                };
                if let Some(began) = began.filter(|&b| self.idle_from == Some(index) && b > start) {
                    reasons.push(PartialReason::StartedMidEpoch);
                    span.start_ns = began.min(end);
                }
                span
            }
            None => Coverage {
                start_ns: first,
                end_ns: last,
            },
        };
        if self.interrupted {
            reasons.push(PartialReason::Interrupted);
            let ended = self.seen_ns.max(last).max(span.start_ns);
            span.end_ns = span.end_ns.min(ended);
        }
        EpochCover { reasons, span }
    }

    pub(super) fn write_idle(&mut self, index: u64) {
        let cover = self.cover(index);
        if let Err(message) = crate::snap::write_idle(&self.cfg, &self.kinds, index, &cover) {
            fail(
                &mut self.failure,
                WorkerFailure {
                    worker: ANSWERS,
                    epoch: index,
                    message,
                },
            );
        }
    }

    /// Close the open epoch now (marked partial after [`Runner::interrupt`]) and collect it:
    /// `netsift live` stopping reports it before the summary. An epoch without packets is not
    /// reported, as in `push`.
    pub fn close_epoch(&mut self) {
        self.end_epoch();
        self.collect_answers();
    }

    /// Change the thresholds and k of the measures from the open epoch on (its answer uses
    /// them): `netsift live`'s reload (SIGHUP). `specs` is a run's measures as asked (before the
    /// runner's own changes: tasks it cannot measure dropped, defaults swapped); the n-th of
    /// them on a task and key kind gives its threshold and k to the n-th measure of this runner
    /// on the same. Returns how many measures changed.
    pub fn retune(&mut self, specs: &[MeasureSpec]) -> usize {
        let key = self.cfg.key;
        let mut changed = 0;
        let mut tuned = Vec::with_capacity(self.cfg.measures.len());
        for (i, m) in self.cfg.measures.iter_mut().enumerate() {
            let kind = kind_of(m, key);
            let nth = tuned
                .iter()
                .filter(|&&(t, k, _)| (t, k) == (m.task, kind))
                .count();
            let new = specs
                .iter()
                .filter(|s| (s.task, kind_of(s, key)) == (m.task, kind))
                .nth(nth);
            tuned.push((m.task, kind, i));
            if let Some(s) = new {
                if (s.threshold, s.k) != (m.threshold, m.k) {
                    (m.threshold, m.k) = (s.threshold, s.k);
                    changed += 1;
                }
            }
        }
        if changed > 0 {
            self.retuned = Some(
                self.cfg
                    .measures
                    .iter()
                    .map(|m| (m.threshold, m.k))
                    .collect(),
            );
        }
        changed
    }

    /// The report; panics if a worker failed (`try_finish` returns the failure instead).
    pub fn finish(self) -> Report {
        self.try_finish().unwrap_or_else(|f| panic!("netsift: {f}"))
    }

    /// The report, or the first worker failure (which worker, in which epoch, what it said).
    pub fn try_finish(mut self) -> Result<Report, WorkerFailure> {
        self.end_epoch();
        let workers = self.pool.as_ref().map_or(1, |p| p.len());
        // The workers' planes: their costs and aggregator counters, summed into the report.
        let (planes, panicked) = match self.pool.take().map(Pool::finish) {
            None => (vec![], None),
            Some(Ok(p)) => (p, None),
            Some(Err(f)) => (vec![], Some(f)),
        };
        // Every epoch handed over answered; what the answers cost.
        let spent = self.stop_answers();
        if let Some(f) = panicked {
            match &mut self.failure {
                // The worker's failure was seen before (the reader could not send to it, or
                // its hand-over never came): in that epoch, with what the worker said.
                Some(seen) if seen.worker == f.worker => seen.message = f.message,
                _ => fail(&mut self.failure, f.in_epoch(self.truth[0].index)),
            }
        }
        if let Some(f) = self.failure.take() {
            return Err(f);
        }
        let spent = spent.unwrap_or(Spent {
            query_nanos: vec![],
            peak_memory: vec![],
        });
        for p in &planes {
            for (mine, theirs) in self.plane.instances.iter_mut().zip(&p.instances) {
                mine.nanos += theirs.nanos;
                mine.timed += theirs.timed;
                mine.updates += theirs.updates;
                mine.skipped += theirs.skipped;
            }
        }
        let seconds = self.started.elapsed().as_secs_f64();
        let keyed = self.totals.classes.keyed();
        let throughput = self
            .plane
            .instances
            .iter()
            .enumerate()
            .map(|(n, i)| {
                let query_nanos = spent.query_nanos.get(n).copied().unwrap_or(0);
                let (most_update, most_query) = self.epoch_most.get(n).copied().unwrap_or_default();
                let epochs = self.totals.epochs.max(1) as f64;
                let peak = spent.peak_memory.get(n).copied().unwrap_or(0);
                // The clock's cost, once per timed batch, is not the algorithm's.
                let clock = i.timed as f64 * self.clock_ns;
                let nanos = (i.nanos as f64 - clock).max(0.0);
                // Per keyed packet, not per update: behind Agg-Evict an algorithm gets fewer
                // updates than packets, and the per-packet figure is the one to compare.
                let ns = nanos / keyed.max(1) as f64;
                Cost {
                    algorithm: i.name.clone(),
                    key: i.kind,
                    tasks: self.instance_tasks.get(n).cloned().unwrap_or_default(),
                    // Each worker holds its own instance.
                    memory_bytes: peak.max(i.algo.memory_bytes()) * workers,
                    updates: i.updates,
                    seconds: nanos / 1e9,
                    ns_per_packet: ns,
                    ns_per_update: nanos / i.updates.max(1) as f64,
                    timed_batches: i.timed,
                    timed_seconds: i.nanos as f64 / 1e9,
                    clock_seconds: clock / 1e9,
                    query_seconds: query_nanos as f64 / 1e9,
                    query_ms_per_epoch: query_nanos as f64 / 1e6 / epochs,
                    update_ms_per_epoch: nanos / 1e6 / epochs,
                    update_ms_max_epoch: most_update * 1e3,
                    query_ms_max_epoch: most_query * 1e3,
                    mpps: if ns > 0.0 { 1e3 / ns } else { 0.0 },
                    skipped: i.skipped,
                }
            })
            .collect();
        // One aggregator per kind and worker: their counters summed per kind.
        let fronts: Vec<&Plane> = if planes.is_empty() {
            vec![&self.plane]
        } else {
            planes.iter().collect()
        };
        let accelerators = self
            .kinds
            .iter()
            .enumerate()
            .filter_map(|(ki, &kind)| {
                let all: Vec<_> = fronts.iter().filter_map(|p| p.fronts[ki].stats()).collect();
                let first = all.first()?;
                let sum = |f: fn(&front::FrontStats) -> u64| all.iter().map(f).sum::<u64>();
                let (packets, passed) = (sum(|s| s.packets), sum(|s| s.passed));
                let (through, switches) = (sum(|s| s.through), sum(|s| s.switches));
                let nanos = all.iter().map(|s| s.nanos).sum::<u128>();
                Some(AccelCost {
                    accel: first.accel.name(),
                    key: kind,
                    simd: first.simd.clone(),
                    memory_bytes: all.iter().map(|s| s.memory_bytes).sum(),
                    packets,
                    evicted: passed,
                    evicted_share: passed as f64 / packets.max(1) as f64,
                    seconds: nanos as f64 / 1e9,
                    ns_per_packet: nanos as f64 / packets.max(1) as f64,
                    mode: first.mode.name(),
                    through,
                    through_share: through as f64 / packets.max(1) as f64,
                    switches,
                    switches_per_epoch: switches as f64 / self.totals.epochs.max(1) as f64,
                })
            })
            .collect();
        let epoch = self.epoch_label();
        let warnings = self.epochs.iter().flat_map(Warning::of).collect();
        let instant = self.instant.as_mut().map(|l| l.report(self.truth[0].index));
        Ok(Report {
            trace: self.trace,
            key: self.cfg.key,
            weight: self.cfg.weight,
            epoch,
            seed: self.cfg.seed,
            batch: self.cfg.batch,
            truth: self.cfg.truth,
            epochs: self.epochs,
            mpps: self.totals.packets as f64 / seconds / 1e6,
            clock_ns: self.clock_ns,
            totals: self.totals,
            seconds,
            throughput,
            accel: self.cfg.accel.name(),
            accelerators,
            notes: self.notes,
            warnings,
            instant,
            thresholds: crate::report::ThresholdRule::of_config(&self.cfg),
            workers: self.cfg.workers,
            normal_capacity: self.cfg.sketchvisor.normal_capacity,
            epoch_choice: self.cfg.epoch_choice.clone(),
        })
    }
}
