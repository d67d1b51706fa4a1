//! Everything that touches the operating system, and nothing else: namespaces and
//! the `ip`/`tc`/`ethtool` commands ([`netns`]), AF_PACKET sockets and waiting on
//! them ([`packet`]), child processes ([`process`]), signals ([`signal`]), the
//! benchmark's UDP senders ([`udp`]). The rest
//! of the crate sees plain Rust values and `io::Result`s.

pub mod netns;
pub mod packet;
pub mod process;
pub mod signal;
pub mod udp;

/// Whether the process runs with an effective user id of 0.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Process id, for names unique to a run.
pub fn pid() -> u32 {
    std::process::id()
}

/// Asks the kernel to fire this thread's timers within `slack_ns` of their
/// deadline (default 50 us), so the pacing loop wakes when asked.
pub fn set_timer_slack_ns(slack_ns: u64) {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long by value; no pointers.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, slack_ns as libc::c_ulong, 0, 0, 0);
    }
}

/// CPU time the calling thread has used, user and system (what the kernel charges
/// to it, softirq work done in its system calls included unless the kernel accounts
/// interrupt time apart), in ns.
pub fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill; CLOCK_THREAD_CPUTIME_ID always exists on Linux.
    unsafe {
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t);
    }
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}
