//! SIGINT and SIGTERM (signal-hook) as a stop of the process's runs: the handlers store the
//! exit status they ask for (130 or 143) into one `engine::Control`, which every run of the
//! process is given ([`control`]): a run stops at its next packet, closes the open epoch as
//! partial and finishes its report; `gen` stops at its next batch of packets and removes its
//! temporary file. `live` also catches SIGHUP (re-read the config), as the control's hangup.

use std::sync::OnceLock;

use engine::Control;

/// The process's control, the one its signal handlers set.
pub fn control() -> Control {
    static CONTROL: OnceLock<Control> = OnceLock::new();
    CONTROL.get_or_init(Control::new).clone()
}

/// Install the SIGINT and SIGTERM handlers (once; later calls do nothing). If a handler cannot
/// be installed the signal ends the process as it would anyway.
pub fn install() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let flag = control().stop_flag();
        let _ = signal_hook::flag::register_usize(signal_hook::consts::SIGINT, flag.clone(), 130);
        let _ = signal_hook::flag::register_usize(signal_hook::consts::SIGTERM, flag, 143);
    });
}

/// The exit status the last signal asks for (130 for SIGINT, 143 for SIGTERM; 1 for a stop
/// the program asked, [`stop`]), if one came.
#[inline]
pub fn caught() -> Option<i32> {
    control().stopped()
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
pub const STOPPED: i32 = Control::STOPPED;

/// Ask the loops that check [`caught`] to stop as at a signal (a signal that came first is
/// kept).
pub fn stop() {
    control().stop();
}

/// `live`: catch SIGHUP (a re-read of the config, `engine::Event::Hangup`) instead of ending
/// the process. Only `live` asks; the other commands keep SIGHUP's default.
pub fn install_hangup() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let _ = signal_hook::flag::register(signal_hook::consts::SIGHUP, control().hangup_flag());
    });
}
