//! The handle a front door holds on a run it started: stop it (a cancel, as a signal or a
//! button does), tell it a configuration is to be re-read (SIGHUP for `live`), and hand it
//! the re-read thresholds. Nothing here is process-global: the CLI registers its signal
//! handlers into a run's handle ([`Control::stop_flag`], [`Control::hangup_flag`]), Python or
//! the web view call [`Control::stop`].

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use measure::MeasureSpec;

/// A run's control handle; clones share it.
#[derive(Clone, Default)]
pub struct Control {
    /// The stop code asked for (0: none). The CLI's codes are the exit statuses its signals ask
    /// for (130, 143); [`Control::STOPPED`] is a stop asked by the program itself.
    stop: Arc<AtomicUsize>,
    hangup: Arc<AtomicBool>,
    retune: Arc<Mutex<Option<Vec<MeasureSpec>>>>,
}

impl Control {
    /// The code [`Control::stop`] sets when no other was given (an agent whose broker denies
    /// its publications, a front door's cancel button).
    pub const STOPPED: i32 = 1;

    pub fn new() -> Control {
        Control::default()
    }

    /// Ask the run to stop at its next packet: the open epoch closes as partial, the report is
    /// finished. A code asked first is kept.
    pub fn stop(&self) {
        self.stop_with(Control::STOPPED);
    }

    /// [`Control::stop`] with a code (the CLI: the exit status its signal asks for).
    pub fn stop_with(&self, code: i32) {
        let code = usize::try_from(code)
            .unwrap_or(Control::STOPPED as usize)
            .max(1);
        let _ = self
            .stop
            .compare_exchange(0, code, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// The stop code asked for, if one was. One relaxed load: checked once per packet.
    #[inline]
    pub fn stopped(&self) -> Option<i32> {
        match self.stop.load(Ordering::Relaxed) {
            0 => None,
            s => Some(i32::try_from(s).unwrap_or(Control::STOPPED)),
        }
    }

    /// The flag a signal handler may store its code into (`signal_hook::flag::register_usize`).
    pub fn stop_flag(&self) -> Arc<AtomicUsize> {
        Arc::clone(&self.stop)
    }

    /// The flag a SIGHUP handler sets (`signal_hook::flag::register`): a live run then emits
    /// [`crate::Event::Hangup`] at its next tick.
    pub fn hangup_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.hangup)
    }

    /// Ask a live run for [`crate::Event::Hangup`] (as a SIGHUP does).
    pub fn hangup(&self) {
        self.hangup.store(true, Ordering::Relaxed);
    }

    pub(crate) fn take_hangup(&self) -> bool {
        self.hangup.swap(false, Ordering::Relaxed)
    }

    /// New thresholds and k for the run's measures (`Runner::retune`), applied by a live run
    /// before its next packet: the answer to [`crate::Event::Hangup`].
    pub fn retune(&self, measures: Vec<MeasureSpec>) {
        if let Ok(mut r) = self.retune.lock() {
            *r = Some(measures);
        }
    }

    pub(crate) fn take_retune(&self) -> Option<Vec<MeasureSpec>> {
        self.retune.lock().ok().and_then(|mut r| r.take())
    }
}
