//! The human-readable report of `run`, `live`, `merge`, `demo` and the controller: a header
//! (what was measured and the threshold rules), per epoch one row per task with the threshold
//! it resolved to and its accuracy, the flows each task found (`--top N` of them, largest
//! first, each with its exact value and error when ground truth is on), and the cost table.
//! JSON (`--json`, `--json-lines`) carries the same and more; this is for a reader.

use engine::RunInfo;
use key::KeyKind;
use measure::report::{Coverage, Listed, PartialReason, Paths, TaskResult};
use measure::{EpochReport, Report};

use crate::out::{Out, StdoutError};

/// Flows listed per task when `--top` is not given: a handful, the table stays readable.
pub const DEFAULT_TOP: usize = 5;

/// The table's first lines: what was measured (`engine::RunInfo`) and the threshold rules.
pub fn print_header(h: &RunInfo, out: &mut Out) -> Result<(), StdoutError> {
    writeln!(
        out,
        "trace {}  key {}  weight {}  epoch {}  seed {}",
        h.trace,
        h.key,
        h.weight.name(),
        h.epoch,
        h.seed
    )?;
    let mut rules: Vec<String> = vec![];
    for t in &h.thresholds {
        let d = t.describe();
        if !rules.contains(&d) {
            rules.push(d);
        }
    }
    if !rules.is_empty() {
        writeln!(out, "thresholds: {}", rules.join("; "))?;
    }
    if let Some((mpps, workers)) = h.capacity {
        writeln!(
            out,
            "normal path: at most {mpps} Mpps per worker ({workers} {}: {} Mpps in all); \
             the rest takes the fast path",
            plural(workers as u64, "worker", "workers"),
            mpps * workers as f64
        )?;
    }
    Ok(())
}

pub use measure::report::plural;

/// The report: the header unless it was printed already (`header`), the epochs it still
/// holds (those a live run did not take), the detections, the costs.
pub fn print_report(
    r: &Report,
    header: bool,
    top: usize,
    out: &mut Out,
) -> Result<(), StdoutError> {
    if !header {
        print_header(&RunInfo::of_report(r), out)?;
    }
    for e in &r.epochs {
        print_epoch(out, e, r.key, top)?;
    }
    if let Some(i) = &r.instant {
        write!(out, "{}", i.table())?;
    }
    print_costs(out, r)
}

fn fmt_opt(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.4}"),
        Some(_) => "nan".into(),
        None => "-".into(),
    }
}

/// Why an epoch is partial, for the table: `started mid-epoch, interrupted`.
fn reasons(r: &[PartialReason]) -> String {
    let names: Vec<&str> = r.iter().map(|r| r.name()).collect();
    names.join(", ")
}

/// A covered span for the table: capture time in seconds, and its length.
fn covered(c: &Coverage) -> String {
    let s = |ns: u64| format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000);
    format!(
        "{} to {} s ({:.3} s)",
        s(c.start_ns),
        s(c.end_ns),
        c.end_ns.saturating_sub(c.start_ns) as f64 / 1e9
    )
}

/// The threshold a task's answer used this epoch: `>= 1502`, `k 100`, or `-`.
fn threshold(t: &TaskResult) -> String {
    match (t.task, t.threshold) {
        (algo::Task::TopK, Some(k)) => format!("k {k}"),
        (_, Some(v)) => format!(">= {v}"),
        (_, None) => "-".into(),
    }
}

/// The answer column: a scalar with its truth, a count of reported against true, or why there
/// is no answer.
fn answer(t: &TaskResult) -> String {
    if let Some(n) = &t.note {
        n.split(':').next().unwrap_or("").to_string()
    } else if let Some(est) = t.answer.estimate {
        match t.truth.value {
            Some(v) => format!("{est:.1} (true {v:.1})"),
            None => format!("{est:.1}"),
        }
    } else if let Some(rep) = t.answer.reported {
        match t.truth.count {
            Some(tc) => format!("{rep} reported / {tc} true"),
            None => format!("{rep} flows"),
        }
    } else {
        "-".into()
    }
}

pub fn print_epoch(
    out: &mut Out,
    e: &EpochReport,
    key: KeyKind,
    top: usize,
) -> Result<(), StdoutError> {
    writeln!(
        out,
        "\nepoch {}: {} {}, {} {}, {}",
        e.index,
        e.packets,
        plural(e.packets, "packet", "packets"),
        e.bytes,
        plural(e.bytes, "byte", "bytes"),
        match e.flows {
            Some(f) => format!("{f} {} ({key})", plural(f, "flow", "flows")),
            None => "no ground truth".into(),
        } + &if e.partial {
            format!(" (partial: {})", reasons(&e.partial_reasons))
        } else {
            String::new()
        }
    )?;
    if let Some(c) = &e.coverage {
        writeln!(out, "  covered: {}", covered(c))?;
    }
    for h in &e.hosts {
        writeln!(
            out,
            "  host {}: {} {}{}, covered {}",
            h.host,
            h.packets,
            plural(h.packets, "packet", "packets"),
            if h.idle {
                " (idle)".to_string()
            } else if h.partial {
                format!(" (partial: {})", reasons(&h.partial_reasons))
            } else {
                String::new()
            },
            covered(&h.coverage)
        )?;
    }
    if let Some(c) = &e.capture {
        writeln!(
            out,
            "  capture: kernel received {}, dropped {} (buffer full), {} by the interface",
            c.received, c.dropped, c.if_dropped
        )?;
    }
    if let Some(p) = &e.paths {
        print_paths(out, e, p)?;
    }
    // A live capture's idle epoch answers nothing.
    if e.tasks.is_empty() {
        return Ok(());
    }
    // Without ground truth every accuracy column would be `-`: they are left out.
    let scored = e.flows.is_some();
    let head = format!(
        "  {:<22} {:<15} {:<10} {:>12} {:>24}",
        "task", "algorithm", "key", "threshold", "answer"
    );
    if scored {
        writeln!(
            out,
            "{head} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "precision", "recall", "f1", "rel.err", "ARE", "MRD"
        )?;
    } else {
        writeln!(out, "{head}")?;
    }
    for t in &e.tasks {
        let row = format!(
            "  {:<22} {:<15} {:<10} {:>12} {:>24}",
            t.task.name(),
            t.algorithm,
            t.key.name(),
            threshold(t),
            answer(t)
        );
        if scored {
            let a = &t.accuracy;
            writeln!(
                out,
                "{row} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
                fmt_opt(a.precision),
                fmt_opt(a.recall),
                fmt_opt(a.f1),
                fmt_opt(a.relative_error),
                fmt_opt(a.are),
                fmt_opt(a.mrd)
            )?;
        } else {
            writeln!(out, "{row}")?;
        }
    }
    if top > 0 {
        for t in &e.tasks {
            print_found(out, t, top)?;
        }
    }
    Ok(())
}

/// What one task found, largest first: at most `top` flows, each with its exact value and the
/// error when ground truth is on; the flow-size distribution's head.
fn print_found(out: &mut Out, t: &TaskResult, top: usize) -> Result<(), StdoutError> {
    if !t.answer.fsd_head.is_empty() {
        let head: Vec<String> = t
            .answer
            .fsd_head
            .iter()
            .map(|v| format!("{v:.1}"))
            .collect();
        writeln!(
            out,
            "  {} by {}: flows of size 1..{}: {}",
            t.task.name(),
            t.algorithm,
            head.len(),
            head.join(" ")
        )?;
        return Ok(());
    }
    let keys: &[Listed] = &t.answer.keys;
    if keys.is_empty() {
        return Ok(());
    }
    let shown = &keys[..keys.len().min(top)];
    let reported = t.answer.reported.unwrap_or(keys.len() as u64);
    let what = match t.task {
        algo::Task::HeavyChangers => "change",
        algo::Task::Superspreaders => "destinations",
        algo::Task::Ddos => "sources",
        _ => "estimate",
    };
    writeln!(
        out,
        "  {} by {} ({} {}): {} {} of {}",
        t.task.name(),
        t.algorithm,
        t.key.name(),
        threshold(t),
        if shown.len() as u64 == reported {
            "all"
        } else {
            "largest"
        },
        shown.len(),
        reported
    )?;
    let width = shown.iter().map(|l| l.key.len()).max().unwrap_or(3).max(3);
    let scored = shown.iter().any(|l| l.truth.is_some());
    if scored {
        writeln!(
            out,
            "    {:<width$} {:>14} {:>14} {:>12}",
            "key", what, "true", "error"
        )?;
    } else {
        writeln!(out, "    {:<width$} {:>14}", "key", what)?;
    }
    for l in shown {
        match l.truth {
            Some(tv) if scored => {
                let err = l.estimate as i128 - tv as i128;
                writeln!(
                    out,
                    "    {:<width$} {:>14} {:>14} {:>12}",
                    l.key,
                    l.estimate,
                    tv,
                    if err > 0 {
                        format!("+{err}")
                    } else {
                        err.to_string()
                    }
                )?;
            }
            _ if scored => writeln!(
                out,
                "    {:<width$} {:>14} {:>14} {:>12}",
                l.key, l.estimate, "-", "-"
            )?,
            _ => writeln!(out, "    {:<width$} {:>14}", l.key, l.estimate)?,
        }
    }
    Ok(())
}

/// SketchVisor's split of the epoch between the paths, what each kind's fast path held, and how
/// the answers were recovered from both.
fn print_paths(out: &mut Out, e: &EpochReport, p: &Paths) -> Result<(), StdoutError> {
    writeln!(
        out,
        "  paths: normal {} packets ({} bytes), fast ({}) {} packets ({} bytes): {:.1}% on the fast path",
        p.normal_packets,
        p.normal_bytes,
        p.fast_path,
        p.fast_packets,
        p.fast_bytes,
        100.0 * p.fast_share
    )?;
    for k in &p.kinds {
        writeln!(
            out,
            "    fast path {:<10} {} flows tracked, V {}, E {}{}",
            k.key.name(),
            k.tracked,
            k.v,
            k.e,
            k.kickouts
                .map(|n| format!(", {n} kick-outs"))
                .unwrap_or_default()
        )?;
    }
    let mut methods: Vec<String> = vec![];
    for t in &e.tasks {
        if let Some(m) = t.recovery {
            let s = format!("{} {m}", t.algorithm);
            if !methods.contains(&s) {
                methods.push(s);
            }
        }
    }
    if !methods.is_empty() {
        writeln!(out, "    recovery: {}", methods.join(", "))?;
    }
    Ok(())
}

fn print_costs(out: &mut Out, r: &Report) -> Result<(), StdoutError> {
    writeln!(
        out,
        "\ncost (update time measured per batch, query time per epoch's answers, same pass; \
         ms per epoch: mean / largest; each epoch's in --json `costs`):"
    )?;
    let tasks: Vec<String> = r
        .throughput
        .iter()
        .map(|c| {
            let names: Vec<&str> = c.tasks.iter().map(|t| t.name()).collect();
            names.join(",")
        })
        .collect();
    let tw = tasks.iter().map(String::len).max().unwrap_or(0).max(5);
    writeln!(
        out,
        "  {:<15} {:<10} {:<tw$} {:>12} {:>12} {:>10} {:>10} {:>17} {:>17}",
        "algorithm",
        "key",
        "tasks",
        "memory",
        "updates",
        "ns/packet",
        "Mpps",
        "update ms/epoch",
        "query ms/epoch"
    )?;
    for (c, tasks) in r.throughput.iter().zip(&tasks) {
        writeln!(
            out,
            "  {:<15} {:<10} {:<tw$} {:>12} {:>12} {:>10.2} {:>10.1} {:>17} {:>17}{}",
            c.algorithm,
            c.key.name(),
            tasks,
            measure::report::human_bytes(c.memory_bytes as u64),
            c.updates,
            c.ns_per_packet,
            c.mpps,
            format!(
                "{:.2} / {:.2}",
                c.update_ms_per_epoch, c.update_ms_max_epoch
            ),
            format!("{:.2} / {:.2}", c.query_ms_per_epoch, c.query_ms_max_epoch),
            if c.skipped > 0 {
                format!(
                    "  ({} keys of the other address family skipped: see --ipv6)",
                    c.skipped
                )
            } else {
                String::new()
            }
        )?;
    }
    for a in &r.accelerators {
        writeln!(
            out,
            "  {:<15} {:<10} {:<tw$} {:>12} {:>12} {:>10.2} {:>10.1}  ({} kernel; {:.1}% of packets reach the algorithms; \
             mode {}: {:.1}% of packets through the aggregator, {:.1} switches per epoch)",
            a.accel,
            a.key.name(),
            "-",
            measure::report::human_bytes(a.memory_bytes as u64),
            a.packets,
            a.ns_per_packet,
            if a.ns_per_packet > 0.0 { 1e3 / a.ns_per_packet } else { 0.0 },
            a.simd,
            100.0 * a.evicted_share,
            a.mode,
            100.0 * a.through_share,
            a.switches_per_epoch
        )?;
    }
    let t = &r.totals;
    let classes: Vec<String> = wire::Class::ALL
        .iter()
        .map(|&c| format!("{} {}", t.classes.get(c), c.name()))
        .collect();
    writeln!(
        out,
        "\n{} {} ({}), {} {}, {:.2} s end to end ({:.2} Mpps incl. reading, parsing{})",
        t.packets,
        plural(t.packets, "packet", "packets"),
        classes.join(", "),
        t.epochs,
        plural(t.epochs, "epoch", "epochs"),
        r.seconds,
        r.mpps,
        if r.truth {
            " and ground truth"
        } else {
            "; no ground truth"
        }
    )
}
