//! SIGINT, SIGTERM, SIGHUP (a closed terminal) and SIGQUIT set a flag that the run
//! loop polls; the previous handlers come back when the outermost guard goes.
//! Unhandled, SIGHUP killed the run outright and left its namespaces and a UDP
//! iperf3 spinning.
//!
//! Guards nest: a command that makes several runs holds one for all of them, so a
//! signal that arrives while one run tears down, or between two, is still set when
//! the next would start, instead of being cleared by that run's own guard.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static GUARDS: AtomicUsize = AtomicUsize::new(0);

const STOP_SIGNALS: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

extern "C" fn on_signal(_signal: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Whether a stop signal arrived since the outermost guard was installed.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Installed handlers; dropping the outermost restores the previous ones.
pub struct SignalGuard {
    /// The handlers replaced, held by the outermost guard only.
    previous: Vec<(libc::c_int, libc::sigaction)>,
}

impl SignalGuard {
    pub fn install() -> SignalGuard {
        let mut previous = Vec::new();
        if GUARDS.fetch_add(1, Ordering::SeqCst) > 0 {
            return SignalGuard { previous };
        }
        INTERRUPTED.store(false, Ordering::SeqCst);
        for signal in STOP_SIGNALS {
            // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; the
            // handler is async-signal-safe (one atomic store).
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                libc::sigemptyset(&mut action.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(signal, &action, &mut old) == 0 {
                    previous.push((signal, old));
                }
            }
        }
        SignalGuard { previous }
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        for (signal, old) in &self.previous {
            // SAFETY: restores a sigaction the kernel handed us.
            unsafe {
                libc::sigaction(*signal, old, std::ptr::null_mut());
            }
        }
        GUARDS.fetch_sub(1, Ordering::SeqCst);
    }
}
