//! Live capture (libpcap, the `pcap` crate): epochs by capture time that close on time on an
//! idle link, the kernel's received/dropped counts per epoch, and idle epochs reported as such.
//!
//! One capture thread per interface parses its packets ([`crate::packet::packet`], the path of
//! files) and hands them in batches to the run's thread, which measures them (`Runner`,
//! answered inline) and emits each closed epoch. A stop ([`crate::Control`]) flushes the open
//! epoch as partial; a hangup asks the consumer for new thresholds ([`crate::Event::Hangup`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use measure::report::{CaptureStats, PartialReason};
use measure::{EpochReport, RunConfig, Runner};
use trace::{Body, Record};
use wire::Tunnel;

use crate::emit::Emit;
use crate::offline::push;
use crate::packet::{packet, Packet};
use crate::{Control, Event, Outcome, Sink};

/// Where and how packets are captured (`live`'s and `agent --iface`'s options).
#[derive(Clone, Debug)]
pub struct Interfaces {
    /// Interfaces to capture from; `any` captures on all of them (Linux cooked headers).
    pub ifaces: Vec<String>,
    /// Capture filter in pcap-filter(7) syntax, applied in the kernel on every interface.
    pub bpf: Option<String>,
    /// Kernel capture buffer per interface, bytes.
    pub buffer: Option<u64>,
    /// Bytes of each packet captured.
    pub snaplen: u32,
}

/// Default epoch of a live run when neither `--epoch-ms`, `--epoch-packets` nor the config
/// gives one: one second of capture time (a packet count may never be reached on a quiet link).
pub const DEFAULT_EPOCH_MS: u64 = 1000;
/// Live's heavy-hitter and heavy-changer threshold when neither `--threshold` nor the config
/// gives one: 1% of the epoch's weight (of its total change for changers), so at most 100
/// flows qualify, what an operator calls heavy. `run`'s default (0.05%, the papers') is for
/// measuring the algorithms: on a quiet link it resolves to a few packets and flags hundreds
/// of flows (issue 34: 273 at 5 packets).
pub const LIVE_HEAVY: f64 = 0.01;
/// Live's superspreader and DDoS-victim threshold by default: 100 distinct peers in an epoch
/// (a second by default), an absolute count: a fraction of the addresses seen resolves to 2
/// on a link with a few hundred (issue 34: 56 "victims" at 2 sources).
pub const LIVE_SPREAD: f64 = 100.0;
/// Live's defaults over a configuration built from what was asked: epochs of
/// [`DEFAULT_EPOCH_MS`] unless one was given, the operator's thresholds ([`LIVE_HEAVY`],
/// [`LIVE_SPREAD`]) for the tasks given none, and no ground truth unless `truth_given` (it would
/// grow with every flow seen).
pub fn defaults(cfg: &mut RunConfig, truth_given: bool) {
    if cfg.epoch_packets.is_none() && cfg.epoch_ms.is_none() {
        cfg.epoch_ms = Some(DEFAULT_EPOCH_MS);
    }
    for m in cfg.measures.iter_mut().filter(|m| m.threshold.is_none()) {
        m.threshold = match m.task {
            algo::Task::HeavyHitters | algo::Task::HeavyChangers => Some(LIVE_HEAVY),
            algo::Task::Superspreaders | algo::Task::Ddos => Some(LIVE_SPREAD),
            _ => None,
        };
    }
    if !truth_given {
        cfg.truth = false;
    }
}

/// Packets a capture thread hands over at once (one channel message).
const BATCH: usize = 256;
/// Longest a packet waits in a capture thread's batch, in capture time.
const BATCH_NS: u64 = 2_000_000;
/// libpcap's read timeout: a capture thread hands over what it holds and looks at the stop flag
/// at least this often on an idle link.
const READ_TIMEOUT_MS: i32 = 20;
/// Batches waiting between the capture threads and the reader; when full, the capture threads
/// wait, the kernel buffer fills, and its drops are counted.
const QUEUE: usize = 256;
/// An epoch is closed this long after its end by the wall clock, so that the packets the kernel
/// stamped before the end but delivered just after (the read timeout, a batch) are counted in it.
const GRACE_NS: u64 = 2 * (READ_TIMEOUT_MS as u64) * 1_000_000;

/// The longest `--bpf` filter accepted, in bytes, and the most terms (primitives joined by
/// `and`/`or`): libpcap's optimizer is about cubic in a filter's terms (measured, `host A or
/// host B or ...` on Ethernet: 100 terms compile in 0.11 s, 200 in 0.9 s, 400 in 10 s; 5,000
/// gave nothing in 10 s), and a filter past these is refused before any interface is opened. A
/// kernel filter of hundreds of hosts is better written with `net` prefixes or ranges.
pub const MAX_BPF_BYTES: usize = 8192;
pub const MAX_BPF_TERMS: usize = 100;
/// Compiling a filter within the bounds above may still take long (a filter of few terms
/// expanding into many blocks): it is compiled on a thread of its own and refused after this.
pub const BPF_COMPILE_LIMIT: Duration = Duration::from_secs(2);

/// The terms of a pcap-filter(7) expression: its `and`/`or` (`&&`, `||`) joints plus one.
fn bpf_terms(filter: &str) -> usize {
    let words = filter
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .filter(|w| matches!(*w, "and" | "or"))
        .count();
    words + filter.matches("&&").count() + filter.matches("||").count() + 1
}

/// `--bpf`'s size within [`MAX_BPF_BYTES`] and [`MAX_BPF_TERMS`]: one line naming the flag and
/// the limit otherwise.
pub fn check_bpf_size(filter: &str) -> Result<()> {
    let terms = bpf_terms(filter);
    if terms > MAX_BPF_TERMS {
        bail!(
            "--bpf: the filter has {terms} terms, at most {MAX_BPF_TERMS} are accepted \
             (libpcap's compile time grows with the cube of the terms: use net prefixes or \
             port ranges)"
        );
    }
    if filter.len() > MAX_BPF_BYTES {
        bail!(
            "--bpf: the filter is {} bytes, at most {MAX_BPF_BYTES} are accepted",
            filter.len()
        );
    }
    Ok(())
}

/// Compile `filter` for link type `dlt` (a dead capture: no privilege needed) on a thread of its
/// own within `limit`: one line naming `--bpf` when it does not compile or takes longer. A
/// compile past the limit is left to finish on its thread (libpcap cannot be interrupted); the
/// caller gives up on the filter.
pub fn compile_bpf(filter: &str, dlt: pcap::Linktype, limit: Duration) -> Result<()> {
    check_bpf_size(filter)?;
    let (tx, rx) = mpsc::sync_channel(1);
    let f = filter.to_string();
    std::thread::Builder::new()
        .name("bpf compile".into())
        .spawn(move || {
            let res = pcap::Capture::dead(dlt).and_then(|c| c.compile(&f, true).map(|_| ()));
            let _ = tx.send(res.map_err(|e| e.to_string()));
        })
        .context("cannot start the filter's compile thread")?;
    match rx.recv_timeout(limit) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => bail!("--bpf '{filter}': {e}"),
        Err(_) => bail!(
            "--bpf: compiling the filter took more than {} ms; simplify it (fewer terms, net \
             prefixes or port ranges)",
            limit.as_millis()
        ),
    }
}

/// The kernel's cumulative counts of one interface, kept by its capture thread (pcap_stats
/// counters are 32-bit and wrap: the thread unwraps them).
#[derive(Default)]
struct Counters {
    received: AtomicU64,
    dropped: AtomicU64,
    if_dropped: AtomicU64,
}

/// A running capture thread.
struct Source {
    iface: String,
    counters: Arc<Counters>,
    /// `None` once joined.
    thread: Option<JoinHandle<Result<()>>>,
    /// Wakes the thread out of a blocking read (pcap_breakloop): libpcap's read timeout alone
    /// does not end a read on every platform and mode.
    wake: pcap::BreakLoop,
}

/// Open `iface` with the run's capture settings: one line naming the interface (and the
/// available ones), CAP_NET_RAW, or the filter, when it cannot be.
fn open(a: &Interfaces, iface: &str) -> Result<pcap::Capture<pcap::Active>> {
    if iface != "any" {
        let names: Vec<String> = pcap::Device::list()
            .map(|l| l.into_iter().map(|d| d.name).collect())
            .unwrap_or_default();
        if !names.iter().any(|n| n == iface) {
            bail!(
                "--iface {iface}: no such interface (available: {})",
                names.join(", ")
            );
        }
    }
    let mut inactive = pcap::Capture::from_device(iface)
        .with_context(|| format!("--iface {iface}"))?
        .immediate_mode(true)
        .promisc(false)
        .snaplen(a.snaplen as i32)
        .timeout(READ_TIMEOUT_MS)
        .precision(pcap::Precision::Nano);
    if let Some(b) = a.buffer {
        let b = i32::try_from(b).context("--buffer: at most 2047M")?;
        inactive = inactive.buffer_size(b);
    }
    let mut cap = inactive.open().map_err(|e| {
        let m = e.to_string();
        if m.contains("ermission") || m.contains("not permitted") {
            anyhow::anyhow!(
                "--iface {iface}: capturing needs CAP_NET_RAW (run as root, or \
                 `setcap cap_net_raw+ep $(which netsift)`): {m}"
            )
        } else {
            anyhow::anyhow!("--iface {iface}: cannot capture: {m}")
        }
    })?;
    if let Some(f) = &a.bpf {
        // Within its bounds of size and time first, for this interface's link type.
        compile_bpf(f, cap.get_datalink(), BPF_COMPILE_LIMIT)?;
        cap.filter(f, true)
            .map_err(|e| anyhow::anyhow!("--bpf '{f}': {e}"))?;
    }
    Ok(cap)
}

/// pcap's DLT numbers are its LINKTYPE numbers except raw IP, whose DLT differs by platform
/// (12 or 14 for LINKTYPE_RAW, 101; pcap-linktype(7)).
fn linktype(dlt: i32) -> u32 {
    match dlt {
        12 | 14 => 101,
        d => d as u32,
    }
}

/// The capture thread of one interface: read, parse, hand over in batches; stop at `stop`.
fn capture(
    mut cap: pcap::Capture<pcap::Active>,
    tunnel: Tunnel,
    tx: SyncSender<Vec<Packet>>,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
) -> Result<()> {
    let link = linktype(cap.get_datalink().0);
    let mut batch: Vec<Packet> = Vec::with_capacity(BATCH);
    let mut last = pcap::Stat {
        received: 0,
        dropped: 0,
        if_dropped: 0,
    };
    let mut update = |cap: &mut pcap::Capture<pcap::Active>| {
        if let Ok(s) = cap.stats() {
            let add = |c: &AtomicU64, now: u32, was: u32| {
                c.fetch_add(u64::from(now.wrapping_sub(was)), Ordering::Relaxed);
            };
            add(&counters.received, s.received, last.received);
            add(&counters.dropped, s.dropped, last.dropped);
            add(&counters.if_dropped, s.if_dropped, last.if_dropped);
            last = s;
        }
    };
    let send = |batch: &mut Vec<Packet>| -> bool {
        batch.is_empty()
            || tx
                .send(std::mem::replace(batch, Vec::with_capacity(BATCH)))
                .is_ok()
    };
    while !stop.load(Ordering::Relaxed) {
        match cap.next_packet() {
            Ok(p) => {
                // With nanosecond precision the timeval's second field holds nanoseconds.
                let ts_ns = (p.header.ts.tv_sec as u64)
                    .saturating_mul(1_000_000_000)
                    .saturating_add(p.header.ts.tv_usec as u64);
                let rec = Record {
                    ts_ns,
                    wire_len: p.header.len,
                    body: Body::Frame { link, data: p.data },
                };
                batch.push(packet(rec, tunnel));
                if batch.len() == BATCH || ts_ns.saturating_sub(batch[0].ts_ns) >= BATCH_NS {
                    update(&mut cap);
                    if !send(&mut batch) {
                        return Ok(());
                    }
                }
            }
            Err(pcap::Error::TimeoutExpired) => {
                update(&mut cap);
                if !send(&mut batch) {
                    return Ok(());
                }
            }
            // pcap_breakloop (stopping).
            Err(pcap::Error::NoMorePackets) => break,
            Err(e) => bail!("capture failed: {e}"),
        }
    }
    update(&mut cap);
    send(&mut batch);
    Ok(())
}

/// Nanoseconds since the Unix epoch by the wall clock: the clock the kernel stamps packets with.
fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The reader's bookkeeping of reported epochs: the next index to report, and the kernel's
/// counts at the last report.
struct Reporter {
    next: u64,
    /// The first epoch reported, and whether epochs lie on the Unix-time grid (then the first
    /// began before the capture).
    first: u64,
    aligned: bool,
    counted: CaptureStats,
    truth: bool,
}

impl Reporter {
    /// The kernel's counts since the last epoch reported, summed over the interfaces.
    fn capture(&mut self, sources: &[Source]) -> CaptureStats {
        let sum = |f: fn(&Counters) -> &AtomicU64| -> u64 {
            sources
                .iter()
                .map(|s| f(&s.counters).load(Ordering::Relaxed))
                .sum()
        };
        let now = CaptureStats {
            received: sum(|c| &c.received),
            dropped: sum(|c| &c.dropped),
            if_dropped: sum(|c| &c.if_dropped),
        };
        let was = std::mem::replace(&mut self.counted, now);
        CaptureStats {
            received: now.received - was.received,
            dropped: now.dropped - was.dropped,
            if_dropped: now.if_dropped - was.if_dropped,
        }
    }

    /// An epoch in which no packet with a flow key arrived: the runner reports none (an empty
    /// epoch answers nothing), but an operator watching a live link must see it.
    fn idle(&self, index: u64, partial: bool) -> EpochReport {
        // The runner's snapshots say how much of an idle epoch was covered; the report of one
        // it did not answer says why it is partial.
        let mut partial_reasons = vec![];
        if self.aligned && index == self.first {
            partial_reasons.push(PartialReason::StartedMidEpoch);
        }
        if partial {
            partial_reasons.push(PartialReason::Interrupted);
        }
        EpochReport {
            index,
            packets: 0,
            bytes: 0,
            flows: self.truth.then_some(0),
            partial: !partial_reasons.is_empty(),
            partial_reasons,
            coverage: None,
            hosts: vec![],
            paths: None,
            capture: None,
            tasks: vec![],
            costs: vec![],
        }
    }

    /// Report the runner's closed epochs, and an idle one for every index before `upto` that
    /// it did not report: capture stats in, to the consumer.
    fn report(
        &mut self,
        runner: &Runner,
        closed: Vec<EpochReport>,
        upto: u64,
        sources: &[Source],
        emit: &mut Emit<'_>,
    ) -> Result<()> {
        let mut all = Vec::new();
        for e in closed {
            all.extend((self.next..e.index).map(|i| self.idle(i, false)));
            self.next = e.index + 1;
            all.push(e);
        }
        all.extend((self.next..upto).map(|i| self.idle(i, false)));
        self.next = self.next.max(upto);
        if all.is_empty() {
            return Ok(());
        }
        // The kernel's counts since the last report go with the first epoch reported now (the
        // others closed together with it had no time of their own).
        let stats = self.capture(sources);
        for (i, e) in all.iter_mut().enumerate() {
            e.capture = Some(if i == 0 {
                stats
            } else {
                CaptureStats::default()
            });
            tracing::debug!(
                epoch = e.index,
                packets = e.packets,
                received = stats.received,
                dropped = stats.dropped,
                "epoch closed"
            );
            if i == 0 && stats.dropped + stats.if_dropped > 0 {
                tracing::warn!(
                    epoch = e.index,
                    dropped = stats.dropped,
                    if_dropped = stats.if_dropped,
                    "the kernel dropped packets (a larger --buffer, a --bpf filter, more \
                     --workers, or --accel agg-evict may help)"
                );
            }
        }
        emit.epochs(all, runner.totals())
    }
}

/// A live run of `cfg` on `ifs` until `control` stops it or every capture ends.
pub(crate) fn run(
    cfg: RunConfig,
    ifs: &Interfaces,
    control: &Control,
    sink: &mut Sink<'_>,
) -> Result<Outcome> {
    let tunnel = cfg.tunnel;
    let time_epochs = cfg.epoch_ms.is_some();
    // Every interface is opened before anything is measured: a bad one is one error line.
    // The capture starts here (no packet is stamped earlier): the start of the epoch axis, and
    // of the first epoch's coverage on the Unix-time grid.
    let opened = now_ns();
    let mut caps = Vec::new();
    for iface in &ifs.ifaces {
        let cap = open(ifs, iface)?;
        tracing::info!(
            iface = iface.as_str(),
            link = linktype(cap.get_datalink().0),
            "capturing"
        );
        caps.push((iface.clone(), cap));
    }
    let name = format!("live:{}", ifs.ifaces.join(","));
    let mut runner = Runner::new(cfg, &name)?;
    // The reads block: each epoch is answered on this thread as it closes.
    runner.answer_inline();
    let mut emit = Emit::new(sink, None, crate::emit::PROGRESS_EVERY);
    emit.start(&runner)?;
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::sync_channel::<Vec<Packet>>(QUEUE);
    let mut sources = Vec::new();
    for (iface, mut cap) in caps {
        let wake = cap.breakloop_handle();
        let counters = Arc::new(Counters::default());
        let (tx, c, s) = (tx.clone(), counters.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name(format!("capture {iface}"))
            .spawn(move || capture(cap, tunnel, tx, c, s))
            .context("cannot start a capture thread")?;
        sources.push(Source {
            iface,
            counters,
            thread: Some(thread),
            wake,
        });
    }
    drop(tx);
    // Snapshots for a network-wide merge (`agent --iface`, `--snapshots`): time epochs on the
    // grid of Unix time, indexed from 1970, so that epoch i of every host covers the same span
    // (the controller merges by index). Otherwise the axis starts now, index 0.
    let aligned = time_epochs && runner.config().snapshots.is_some();
    if aligned {
        runner.align_epochs(0);
    }
    // The epoch axis starts when the capture did, not at the first packet: an idle link still
    // has epochs.
    let mut open_epoch = runner.advance_to(opened);
    let first = if aligned { open_epoch } else { 0 };
    let mut rep = Reporter {
        next: first,
        first,
        aligned,
        counted: CaptureStats::default(),
        truth: runner.config().truth,
    };
    let looped = read_loop(
        &rx,
        &mut runner,
        &mut open_epoch,
        control,
        |runner, tick| match tick {
            Tick::Epochs(open_epoch) => {
                emit.detections(runner)?;
                let closed = runner.take_completed();
                rep.report(runner, closed, open_epoch, &sources, &mut emit)
            }
            Tick::Hangup => {
                emit.send(Event::Hangup)?;
                if let Some(measures) = control.take_retune() {
                    let n = runner.retune(&measures);
                    tracing::info!(changed = n, "SIGHUP: configuration re-read");
                }
                Ok(())
            }
        },
    );
    stop.store(true, Ordering::Relaxed);
    for s in &sources {
        s.wake.breakloop();
    }
    // What the capture threads still hold is measured; then they end.
    while let Ok(batch) = rx.recv() {
        for p in &batch {
            push(&mut runner, p);
        }
    }
    let mut failed = vec![];
    for s in &mut sources {
        let res = s.thread.take().map(JoinHandle::join);
        let iface = s.iface.as_str();
        match res {
            Some(Ok(Err(e))) => {
                tracing::error!(iface, "{e:#}");
                failed.push(format!("--iface {iface}: {e:#}"));
            }
            Some(Err(_)) => {
                tracing::error!(iface, "the capture thread panicked");
                failed.push(format!("--iface {iface}: the capture thread panicked"));
            }
            _ => {}
        }
    }
    looped?;
    // The open epoch, cut short, is reported as partial, even when idle.
    runner.interrupt();
    runner.close_epoch();
    emit.detections(&mut runner)?;
    let mut closed = runner.take_completed();
    let reported = closed.last().map_or(rep.next, |e| e.index + 1);
    if time_epochs && reported <= open_epoch {
        closed.push(rep.idle(open_epoch, true));
    }
    rep.report(&runner, closed, 0, &sources, &mut emit)?;
    let mut report = runner.try_finish()?;
    // The epochs reported, idle ones included (the runner counts those with packets).
    report.totals.epochs = rep.next - first;
    emit.finish(report)?;
    Ok(Outcome {
        read_error: (!failed.is_empty()).then(|| failed.join("; ")),
        stopped: control.stopped(),
    })
}

/// What the reading loop asks its caller to do.
enum Tick {
    /// Report the closed epochs; the argument is the open epoch's index.
    Epochs(u64),
    /// A hangup came: ask the consumer for new thresholds.
    Hangup,
}

/// Measure what the capture threads hand over until a stop: after every batch and every
/// [`READ_TIMEOUT_MS`] the due epochs close and `on` reports them; a hangup goes to `on` too.
/// Returns when every capture ended, measuring failed, or a stop was asked.
fn read_loop(
    rx: &Receiver<Vec<Packet>>,
    runner: &mut Runner,
    open_epoch: &mut u64,
    control: &Control,
    mut on: impl FnMut(&mut Runner, Tick) -> Result<()>,
) -> Result<()> {
    let tick = Duration::from_millis(READ_TIMEOUT_MS as u64);
    loop {
        match rx.recv_timeout(tick) {
            Ok(batch) => {
                for p in &batch {
                    push(runner, p);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Ok(()),
        }
        if control.take_hangup() {
            on(runner, Tick::Hangup)?;
        }
        *open_epoch = runner.advance_to(now_ns().saturating_sub(GRACE_NS));
        if runner.failed() {
            return Ok(());
        }
        on(runner, Tick::Epochs(*open_epoch))?;
        if control.stopped().is_some() {
            return Ok(());
        }
    }
}
