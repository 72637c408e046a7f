//! Standard output, and what an error means for the process.
//!
//! Every command writes through one [`Out`] (standard output, locked once), with `write!` /
//! `writeln!` and `?`: a failed write becomes a [`StdoutError`] that propagates like any other
//! error, up to `main`, which hands it to [`report`]. There:
//! - a broken pipe anywhere in the error's chain (`netsift ... | head -1`) ends the process
//!   quietly with status 0, as ripgrep does by default (the reader has what it wanted; a shell
//!   pipeline with `pipefail` stays green);
//! - any other error is one line on stderr, `netsift: error: ...`, each cause once, status 1.
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe returns `EPIPE` instead of killing the
//! process; `println!` would panic on it, hence no `println!` on an output path.

use std::fmt;
use std::io::{self, Write};

/// A write to standard output failed. Its source is the I/O error, so [`report`] prints
/// `writing standard output: <reason>` and finds a broken pipe by its kind.
#[derive(Debug)]
pub struct StdoutError(pub io::Error);

impl fmt::Display for StdoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("writing standard output")
    }
}

impl std::error::Error for StdoutError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// Standard output of a command. `write!(out, ...)` / `writeln!(out, ...)` return
/// `Result<(), StdoutError>` (an inherent `write_fmt`, not `io::Write`'s).
pub struct Out {
    inner: io::StdoutLock<'static>,
}

impl Default for Out {
    fn default() -> Self {
        Out::new()
    }
}

impl Out {
    pub fn new() -> Out {
        Out {
            inner: io::stdout().lock(),
        }
    }

    pub fn write_fmt(&mut self, args: fmt::Arguments<'_>) -> Result<(), StdoutError> {
        self.inner.write_fmt(args).map_err(StdoutError)
    }

    /// Hand standard output to a writer of bytes (`gen --out -`).
    pub fn write_with<T>(
        &mut self,
        f: impl FnOnce(&mut dyn Write) -> io::Result<T>,
    ) -> Result<T, StdoutError> {
        f(&mut self.inner).map_err(StdoutError)
    }

    /// Push what is written so far to the reader (a live run shows each epoch as it closes).
    pub fn flush(&mut self) -> Result<(), StdoutError> {
        self.inner.flush().map_err(StdoutError)
    }
}

/// Whether `e` (or any cause in its chain) is a write to a closed pipe.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// The error as one message: its causes joined by `: `, each printed once. A cause whose text
/// the previous one already ends with is left out (a typed error that shows its source in its
/// own message, such as `config: {toml error}` or `writing the trace: {io error}`, and also
/// returns it as `source()`, would otherwise print it twice under `{:#}`).
pub fn render(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    let mut prev = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        let text = text.trim_end();
        if !prev.is_empty() && prev.ends_with(text) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(text);
        prev = text.to_string();
    }
    msg
}

/// `eprintln!` that never panics: a message to stderr, dropped if stderr itself is closed or
/// full (there is nowhere left to say so; `eprintln!` would panic instead).
#[macro_export]
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

/// What the process does with an error that ends a command: nothing printed and status 0 for a
/// broken pipe, else `netsift: error: ...` on stderr and status 1. Returns the status.
pub fn report(e: &anyhow::Error) -> u8 {
    if is_broken_pipe(e) {
        return 0;
    }
    crate::say!("netsift: error: {}", render(e));
    1
}

/// [`report`], then end the process: for an error raised where it cannot propagate (inside a
/// reader's per-packet callback, which has no early exit).
pub fn exit(e: &anyhow::Error) -> ! {
    std::process::exit(report(e).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Echo(io::Error);
    impl fmt::Display for Echo {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "writing the trace: {}", self.0)
        }
    }
    impl std::error::Error for Echo {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn each_cause_once_and_broken_pipes_found_anywhere_in_the_chain() {
        let full = || io::Error::from_raw_os_error(28);
        let e = anyhow::Error::new(Echo(full())).context("writing x.pcap");
        let msg = render(&e);
        assert_eq!(msg.matches("No space left").count(), 1, "{msg}");
        assert!(
            msg.starts_with("writing x.pcap: writing the trace: "),
            "{msg}"
        );
        assert!(!is_broken_pipe(&e));

        let e = anyhow::Error::new(StdoutError(full()));
        assert_eq!(
            render(&e),
            format!("writing standard output: {}", full()),
            "the source is printed after the context"
        );
        let pipe = anyhow::Error::new(StdoutError(io::ErrorKind::BrokenPipe.into()))
            .context("printing epoch 3");
        assert!(is_broken_pipe(&pipe));
        assert_eq!(report(&pipe), 0);
    }
}
