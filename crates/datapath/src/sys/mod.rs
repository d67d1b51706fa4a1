//! Everything that touches the operating system, and nothing else: namespaces and
//! the `ip`/`tc`/`ethtool` commands ([`netns`]), AF_PACKET sockets and waiting on
//! them ([`packet`]), the tap a host's egress is redirected to ([`tap`]), child
//! processes ([`process`]), who owns a run's names ([`owner`]), signals
//! ([`signal`]), the monotonic clock and absolute sleeps ([`clock`]), waking a
//! waiting thread ([`event`]), the benchmark's UDP senders
//! ([`udp`]). The rest of the crate sees plain Rust values and `io::Result`s.

pub mod clock;
pub mod event;
pub mod netns;
pub mod owner;
pub mod packet;
pub mod process;
pub mod signal;
pub mod tap;
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

/// SCHED_FIFO priority of the lab's own threads and of the programs whose latency
/// it measures: above every normal thread, far below the kernel's own (50+).
pub const REALTIME_PRIORITY: libc::c_int = 10;

/// Moves the calling thread to SCHED_FIFO at [`REALTIME_PRIORITY`], so that on a
/// small machine it does not wait behind the tenants' senders for a core. The
/// kernel's RT throttling still leaves others 5% of each core. Fails without
/// CAP_SYS_NICE; callers go on at normal priority then.
pub fn set_realtime() -> std::io::Result<()> {
    let param = libc::sched_param {
        sched_priority: REALTIME_PRIORITY,
    };
    // SAFETY: pid 0 is the calling thread; param lives across the call.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether a failed datagram send only means the host had no room for it just then
/// (the datagram is lost, as a congested host would lose it).
pub fn is_transient_send_error(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOBUFS | libc::EAGAIN))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realtime_moves_only_the_calling_thread_to_sched_fifo() {
        if !is_root() {
            // CI runs as root (`.ci/run`): there, not being root is a failure.
            let in_ci =
                std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
            assert!(
                !in_ci,
                "SCHED_FIFO needs root (CAP_SYS_NICE), and CI runs every test"
            );
            eprintln!("skipping: SCHED_FIFO needs root (CAP_SYS_NICE)");
            return;
        }
        // SAFETY: sched_getscheduler(0) reads the calling thread's policy.
        let policy = || unsafe { libc::sched_getscheduler(0) };
        let before = policy();
        let inside = std::thread::spawn(move || {
            set_realtime().expect("root may use SCHED_FIFO");
            policy()
        })
        .join()
        .unwrap();
        assert_eq!(inside, libc::SCHED_FIFO);
        assert_eq!(policy(), before, "other threads keep their policy");
    }
}
