//! netsift as a library: the README's main job (`netsift run`, or `netsift run TRACE`) through
//! the engine, its report printed as `netsift run --json` prints it. `tests/embed.rs` checks
//! that the answers are the command's.
//!
//!     cargo run --release -p netsift --example embed [TRACE]

use engine::{Event, Run, Source};

fn main() -> anyhow::Result<()> {
    // Every task by its default algorithm, this machine's workers and memory: the CLI's defaults.
    let cfg = engine::config::standard()?;
    let source = match std::env::args().nth(1) {
        Some(path) => Source::File { path, format: None },
        None => Source::Builtin,
    };
    let mut epochs = vec![];
    let outcome = Run::new(cfg, source)?.run(&mut |event| {
        match event {
            Event::Note(n) => eprintln!("note: {n}"),
            Event::Warning(w) => eprintln!("warning: epoch {}: {}", w.epoch, w.message),
            Event::Epoch { report, .. } => epochs.push(*report),
            Event::Finished(mut report) => {
                report.epochs = std::mem::take(&mut epochs);
                println!("{}", serde_json::to_string_pretty(&report)?);
            }
            _ => {}
        }
        Ok(())
    })?;
    if let Some(e) = outcome.read_error {
        anyhow::bail!("{e}");
    }
    Ok(())
}
