//! A run over what can be read to its end: a capture or key trace file, standard input or a
//! pipe (read as it arrives), or the generator. One packet at a time into the runner (a mapped
//! keys4 trace keyed by source: blocks of keys), the run's events after each.

use anyhow::Result;
use measure::{RunConfig, Runner};
use trace::{Capture, Format};
use wire::Class;

use crate::emit::Emit;
use crate::family::{auto_ipv6, StreamHead};
use crate::packet::{each_packet, Packet};
use crate::{builtin_spec, epochs, stop_if_asked, until_stop, Control, Outcome, Sink, Source};

/// One packet into the runner: keyed (IPv4, IPv6) packets are measured, the others counted by
/// class.
#[inline]
pub fn push(runner: &mut Runner, p: &Packet) {
    match p.class {
        Class::Ipv4 | Class::Ipv6 => runner.push(p.ts_ns, &p.tuple, p.wire_len),
        c => runner.push_unkeyed(c, p.wire_len),
    }
}

pub(crate) fn run(
    cfg: RunConfig,
    source: Source,
    control: &Control,
    every: u64,
    sink: &mut Sink<'_>,
) -> Result<Outcome> {
    match source {
        Source::Builtin | Source::Gen(_) => {
            let (spec, label) = match source {
                Source::Gen(spec) => (spec, "gen"),
                _ => (builtin_spec(), "built-in: gen"),
            };
            let name = format!(
                "<{label} --packets {} --flows {} --skew {} --seed {}>",
                spec.packets, spec.flows, spec.skew, spec.seed
            );
            let emit = Emit::new(sink, Some(spec.packets), every);
            generated(cfg, &spec, &name, control, emit)
        }
        Source::File { path, format } => {
            let cap = Capture::open(&path, format)?;
            file(cfg, cap, control, Emit::new(sink, None, every))
        }
        Source::Capture(cap) => file(cfg, cap, control, Emit::new(sink, None, every)),
        Source::Live(_) => anyhow::bail!("a live source is not read to its end"),
        Source::Snapshots(_) => anyhow::bail!("snapshots are merged, not read packet by packet"),
    }
}

/// The generator's packets, never written to a file.
fn generated(
    cfg: RunConfig,
    spec: &gen::Spec,
    name: &str,
    control: &Control,
    mut emit: Emit<'_>,
) -> Result<Outcome> {
    let mut runner = Runner::new(cfg, name)?;
    emit.start(&runner)?;
    let res = until_stop(|| {
        gen::generate(spec, |p| {
            stop_if_asked(control);
            runner.push(p.ts_ns, &p.tuple, p.wire_len);
            emit.after(&mut runner);
        })
    })?;
    if res.is_none() {
        runner.interrupt();
    }
    res.transpose()?;
    emit.finish(runner.try_finish()?)?;
    Ok(Outcome {
        read_error: None,
        stopped: control.stopped(),
    })
}

/// A capture or key trace, mapped or streamed.
fn file(
    mut cfg: RunConfig,
    cap: Capture,
    control: &Control,
    mut emit: Emit<'_>,
) -> Result<Outcome> {
    epochs::default_epoch(&cap, &mut cfg);
    let auto = auto_ipv6(&cap, &cfg);
    let tunnel = cfg.tunnel;
    if auto.is_some() {
        cfg.ipv6 = true;
    }
    // A stream cannot be read twice: its address family is told from its first packets, held
    // and replayed (at most `family::STREAM_SAMPLE` IP packets or one second of capture time).
    let mut head = (cap.is_stream() && !cfg.ipv6).then(StreamHead::default);
    let ipv6_cfg = RunConfig {
        ipv6: true,
        ..cfg.clone()
    };
    // 4- and 13-byte key traces carry no timestamps (the fast path's FIFO model).
    let untimed = matches!(cap.format(), Format::Keys4 | Format::Keys13);
    let mut runner = Runner::new(cfg, cap.name())?;
    if untimed {
        runner.untimed();
    }
    // A stream's reads may block (a live pipe): its epochs are answered as they close, on this
    // thread, so each is emitted then, not when the next packet arrives.
    if cap.is_stream() {
        runner.answer_inline();
    }
    if let Some(n) = auto {
        runner.add_note(n);
    }
    if head.is_none() {
        emit.start(&runner)?;
    }
    // A mapped keys4 trace into a run of source keys: blocks of u32 keys, no per-record tuple
    // (`Runner::push_keys4`); `None` when that path does not apply.
    let bulk = if head.is_none() && runner.takes_keys4() {
        Some(until_stop(|| {
            cap.for_each_keys4(|blk| {
                stop_if_asked(control);
                runner.push_keys4(blk);
                emit.after_n(&mut runner, blk.len() as u64);
            })
        })?)
    } else {
        None
    };
    let res = match bulk {
        // Read as keys4 blocks: to the end, to an error, or to a stop (`None`).
        Some(Some(Some(r))) => Some(r.map(drop)),
        Some(None) => None,
        // Any other capture or run: record by record.
        Some(Some(None)) | None => {
            let name = cap.name().to_string();
            // The head complete (or the stream ended first): the run sized for its family,
            // started, and the held packets measured.
            let decide = |head: StreamHead, runner: &mut Runner, emit: &mut Emit<'_>| {
                if let Some(note) = head.ipv6_note() {
                    match Runner::new(ipv6_cfg.clone(), &name) {
                        Ok(r) => {
                            *runner = r;
                            runner.answer_inline();
                            if untimed {
                                runner.untimed();
                            }
                            runner.add_note(note);
                        }
                        Err(e) => runner.add_note(format!(
                            "{note}, but the IPv6 sizing cannot be built ({e}): sized for IPv4"
                        )),
                    }
                }
                if let Err(e) = emit.start(runner) {
                    std::panic::resume_unwind(Box::new(crate::Stop::Sink(e)));
                }
                for p in &head.packets {
                    push(runner, p);
                    emit.after(runner);
                }
            };
            let res = until_stop(|| {
                each_packet(&cap, tunnel, |p| {
                    stop_if_asked(control);
                    match head.as_mut() {
                        Some(h) => {
                            if h.hold(p) {
                                let h = head.take().unwrap_or_default();
                                decide(h, &mut runner, &mut emit);
                            }
                        }
                        None => {
                            push(&mut runner, p);
                            emit.after(&mut runner);
                        }
                    }
                })
            })?;
            // Packets held to tell the address family are measured, stopped or not.
            if let Some(h) = head.take() {
                until_stop(|| decide(h, &mut runner, &mut emit))?;
            }
            res
        }
    };
    let mut read_error = None;
    match res {
        None => runner.interrupt(),
        Some(Err(e)) => read_error = Some(e.to_string()),
        Some(Ok(_)) => {}
    }
    // Every packet is read: the capture goes now, not after the last epoch's answers (a large
    // file's unmapping then overlaps them, `trace::Mapped::prefault`).
    drop(cap);
    emit.finish(runner.try_finish()?)?;
    Ok(Outcome {
        read_error,
        stopped: control.stopped(),
    })
}
