//! SIGINT and SIGTERM (signal-hook): a handler that only records which came, as the exit status
//! it asks for (130 or 143), for the loops that check it: `gen` stops at its next batch of
//! packets (or slice of its bursty tally) and removes its temporary file; `run` stops reading at
//! its next packet, closes the open epoch as partial and writes the report. `live` also catches SIGHUP (re-read the config).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

fn flag() -> &'static Arc<AtomicUsize> {
    static FLAG: OnceLock<Arc<AtomicUsize>> = OnceLock::new();
    FLAG.get_or_init(|| {
        let f = Arc::new(AtomicUsize::new(0));
        // If a handler cannot be installed the signal ends the process as it would anyway.
        let _ = signal_hook::flag::register_usize(signal_hook::consts::SIGINT, f.clone(), 130);
        let _ = signal_hook::flag::register_usize(signal_hook::consts::SIGTERM, f.clone(), 143);
        f
    })
}

/// Install the handlers (once; later calls do nothing).
pub fn install() {
    flag();
}

/// The exit status the last signal asks for (130 for SIGINT, 143 for SIGTERM), if one came.
#[inline]
pub fn caught() -> Option<i32> {
    match flag().load(Ordering::Relaxed) {
        0 => None,
        s => Some(s as i32),
    }
}

/// What asked for exit status `code` (from [`caught`]): `SIGINT`, `SIGTERM`, or a stop request.
pub fn name(code: i32) -> &'static str {
    match code {
        130 => "SIGINT",
        143 => "SIGTERM",
        _ => "a stop request",
    }
}

/// The status [`caught`] gives after [`stop`]: no signal came, the program asked its loops to
/// stop (an agent whose broker denies its publications).
pub const STOPPED: i32 = 1;

/// Ask the loops that check [`caught`] to stop as at a signal (a signal that came first is
/// kept).
pub fn stop() {
    let _ = flag().compare_exchange(0, STOPPED as usize, Ordering::Relaxed, Ordering::Relaxed);
}

fn hangup() -> &'static Arc<AtomicBool> {
    static HUP: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    HUP.get_or_init(|| {
        let f = Arc::new(AtomicBool::new(false));
        let _ = signal_hook::flag::register(signal_hook::consts::SIGHUP, f.clone());
        f
    })
}

/// `live`: catch SIGHUP (re-read the config) instead of ending the process. Only `live` asks;
/// the other commands keep SIGHUP's default.
pub fn install_hangup() {
    hangup();
}

/// Whether a SIGHUP came since the last call.
pub fn take_hangup() -> bool {
    hangup().swap(false, Ordering::Relaxed)
}

/// The unwinding payload that carries `run` out of a reading loop at a signal (through
/// `std::panic::resume_unwind`, which runs no panic hook and prints nothing).
pub struct Interrupted;
