//! The monotonic clock as plain nanoseconds, and sleeping until an absolute time on
//! it: a sender that sleeps until each planned send time, rather than for each gap,
//! never accumulates the lateness of its wake-ups.

use std::io;

/// `CLOCK_MONOTONIC` in nanoseconds.
pub fn now_ns() -> u64 {
    read_ns(libc::CLOCK_MONOTONIC)
}

/// `CLOCK_REALTIME` in nanoseconds: the clock of the kernel's packet stamps.
pub fn realtime_ns() -> u64 {
    read_ns(libc::CLOCK_REALTIME)
}

/// CPU time the calling thread has used, user and system (what the kernel charges
/// to it, softirq work done in its system calls included unless the kernel accounts
/// interrupt time apart), in ns.
pub fn thread_cpu_ns() -> u64 {
    read_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn read_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own; both clocks always exist on Linux.
    unsafe {
        libc::clock_gettime(clock, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps until `CLOCK_MONOTONIC` reads `at_ns` (returns at once if it has passed).
pub fn sleep_until_ns(at_ns: u64) -> io::Result<()> {
    let ts = libc::timespec {
        tv_sec: (at_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (at_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: an absolute sleep on a valid timespec; no remainder is written
        // with TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        match rc {
            0 => return Ok(()),
            libc::EINTR => continue,
            e => return Err(io::Error::from_raw_os_error(e)),
        }
    }
}
