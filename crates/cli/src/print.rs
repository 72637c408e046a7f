//! The consumers of a run's events (`engine::Event`) on the command line: the table, one JSON
//! document (`--json`), JSON lines (`--json-lines`), notes and warnings on stderr, detections
//! (`--instant`), the progress bar, and the monitor (metrics, alerts). `run`, `live` and `agent`
//! print through [`Printer`], so all write the same documents.

use std::io::IsTerminal;

use anyhow::Result;
use engine::{Event, RunInfo};
use indicatif::{ProgressBar, ProgressStyle};
use measure::{EpochReport, Report, RunConfig};

use crate::out::Out;

/// What standard output gets: the table, one JSON document, or JSON lines.
#[derive(Clone, Copy, PartialEq)]
pub enum Format {
    Table,
    Json,
    JsonLines,
}

/// Where the run's notes go: `run`'s stderr lines, or `live`'s structured logs.
#[derive(Clone, Copy, PartialEq)]
pub enum Notes {
    Stderr,
    Logs,
}

/// How the epochs reach standard output as they close: the table, one JSON line each
/// (`--json-lines`), or kept for `--json`'s one document at the end.
pub struct Printer {
    json: bool,
    lines: bool,
    notes: Notes,
    /// What the run measures (`Event::Started`): the table's header, the monitor's context.
    info: Option<RunInfo>,
    /// The table's header is printed.
    header: bool,
    /// `--json`: the epochs printed at the end.
    kept: Vec<EpochReport>,
    /// Flows listed per task in the table (`--top`).
    top: usize,
    /// Metrics and alerts (`--metrics`, `[[alert]]` rules, `--alerts`, `--alert-exec`): each
    /// epoch goes to it as it closes, before it is printed.
    mon: Option<monitor::Monitor>,
    /// On a terminal, packets read so far (`Event::Progress`).
    bar: Option<ProgressBar>,
}

impl Printer {
    /// A printer writing `format`, listing `top` flows per task in the table, with its
    /// monitor (started by the caller, so that a port in use or a bad alert rule is refused
    /// before anything is read).
    pub fn new(format: Format, top: usize, notes: Notes, mon: Option<monitor::Monitor>) -> Printer {
        Printer {
            json: format == Format::Json,
            lines: format == Format::JsonLines,
            notes,
            info: None,
            header: false,
            kept: vec![],
            top,
            mon,
            bar: None,
        }
    }

    /// The run's monitor, if it has one.
    pub fn monitor(&self) -> Option<&monitor::Monitor> {
        self.mon.as_ref()
    }

    /// SIGHUP (`live`): the re-read configuration's alert rules replace the monitor's (checked
    /// first: an error keeps the old ones).
    pub fn reload(&mut self, cfg: &RunConfig) -> Result<()> {
        if let Some(m) = &mut self.mon {
            m.reload(cfg.alerts.clone())?;
        }
        Ok(())
    }

    /// One event of the run. Whatever reaches standard output is flushed (a pipe sees each
    /// epoch as it closes); the progress bar steps aside while it is written.
    pub fn event(&mut self, e: Event, out: &mut Out) -> Result<()> {
        match self.bar.take() {
            Some(bar) => {
                let r = bar.suspend(|| self.print(e, out));
                if r.as_ref().is_ok_and(|done| !done) {
                    self.bar = Some(bar);
                } else {
                    bar.finish_and_clear();
                }
                r.map(drop)
            }
            None => self.print(e, out).map(drop),
        }
    }

    /// [`Printer::event`]; true when the run finished.
    fn print(&mut self, e: Event, out: &mut Out) -> Result<bool> {
        match e {
            Event::Note(n) => match self.notes {
                Notes::Stderr => crate::say!("netsift: note: {n}"),
                Notes::Logs => tracing::info!("note: {n}"),
            },
            Event::Started(info) => {
                if self.notes == Notes::Stderr && std::io::stderr().is_terminal() {
                    self.bar = Some(progress());
                }
                self.info = Some(info);
            }
            Event::Progress { packets, total } => {
                if let Some(bar) = &self.bar {
                    if let Some(n) = total {
                        bar.set_length(n);
                    }
                    bar.set_position(packets);
                }
            }
            Event::Detection(d) => {
                if !self.json {
                    if self.lines {
                        let mut v = serde_json::to_value(&d)?;
                        if let Some(o) = v.as_object_mut() {
                            o.insert("type".into(), "detection".into());
                        }
                        writeln!(out, "{}", serde_json::to_string(&v)?)?;
                    } else {
                        writeln!(out, "{}", d.line())?;
                    }
                    out.flush()?;
                }
            }
            Event::Warning(w) => crate::say!(
                "netsift: warning: epoch {}, {} by {}: {} ({}: {})",
                w.epoch,
                w.task.name(),
                w.algorithm,
                w.message,
                w.parameter,
                w.suggestion
            ),
            Event::Epoch { report, totals } => {
                if let (Some(m), Some(info)) = (&mut self.mon, &self.info) {
                    let ctx = monitor::Ctx {
                        trace: &info.trace,
                        key: info.key,
                        weight: info.weight,
                        totals: Some(&totals),
                    };
                    m.epoch(&report, &ctx);
                }
                self.epoch(*report, out)?;
            }
            // `live` answers it before it reaches the printer.
            Event::Hangup => {}
            Event::Finished(report) => {
                self.finish(*report, out)?;
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// An epoch that closed: printed and flushed, or kept for `--json`.
    pub fn epoch(&mut self, e: EpochReport, out: &mut Out) -> Result<()> {
        if self.json {
            self.kept.push(e);
            return Ok(());
        }
        if self.lines {
            print_epoch_line(out, &e)?;
        } else {
            if !self.header {
                if let Some(info) = &self.info {
                    crate::table::print_header(info, out)?;
                    self.header = true;
                }
            }
            let key = self
                .info
                .as_ref()
                .map_or(measure::RunConfig::default().key, |i| i.key);
            crate::table::print_epoch(out, &e, key, self.top)?;
        }
        out.flush()?;
        Ok(())
    }

    /// The end of the run: the summary (`--json-lines`: a `"type": "summary"` line), the costs
    /// (table) or the whole report with every epoch (`--json`).
    fn finish(&mut self, mut report: Report, out: &mut Out) -> Result<()> {
        if let Some(m) = &mut self.mon {
            m.finish(Some(&report));
        }
        if self.json {
            let mut all = std::mem::take(&mut self.kept);
            all.append(&mut report.epochs);
            report.epochs = all;
            writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
        } else if self.lines {
            let mut v = serde_json::to_value(&report)?;
            if let Some(o) = v.as_object_mut() {
                o.remove("epochs");
                o.insert("type".into(), "summary".into());
            }
            writeln!(out, "{}", serde_json::to_string(&v)?)?;
        } else {
            crate::table::print_report(&report, self.header, self.top, out)?;
        }
        out.flush()?;
        Ok(())
    }
}

/// `--json-lines`: one line per epoch.
fn print_epoch_line(out: &mut Out, e: &EpochReport) -> Result<()> {
    let mut v = serde_json::to_value(e)?;
    if let Some(o) = v.as_object_mut() {
        o.insert("type".into(), "epoch".into());
    }
    writeln!(out, "{}", serde_json::to_string(&v)?)?;
    Ok(())
}

fn progress() -> ProgressBar {
    let pb = ProgressBar::new_spinner();
    pb.set_style(
        ProgressStyle::with_template(
            "{spinner} {pos:>11} packets {per_sec:>14} {elapsed} {wide_bar}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    pb
}
