//! Child processes (iperf3, sockperf, memcached) started inside a namespace: the
//! forked child enters the namespace itself (`setns` before `exec`) instead of going
//! through `ip netns exec`, so the child's pid is the program's and nothing stands
//! between it and the signals meant for it. Each child is bound to the lab's life
//! with `PR_SET_PDEATHSIG`: a lab killed with SIGKILL, which runs no destructor, takes
//! its programs with it.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A program running in a namespace; killed when dropped.
pub struct Process {
    child: Child,
    pub label: String,
    done: Option<ExitStatus>,
}

impl Process {
    /// Starts `program args` in namespace `ns`, stdout and stderr to `log`;
    /// `realtime`: at SCHED_FIFO ([`super::set_realtime`]), if the system allows.
    ///
    /// The kernel sends the death signal when the *thread* that forked the child
    /// ends, not the process: call this from a thread that lives as long as the
    /// program should (the lab calls it from the thread that runs the whole run).
    pub fn spawn(
        ns: &str,
        program: &str,
        args: &[String],
        log: &Path,
        label: &str,
        realtime: bool,
    ) -> io::Result<Process> {
        let out = File::create(log)?;
        let err = out.try_clone()?;
        // Opened here, not in the child: between fork and exec only
        // async-signal-safe calls are allowed, and building a path allocates.
        let namespace = super::netns::open(ns)?;
        let namespace_fd = namespace.as_raw_fd();
        let parent = super::pid() as libc::pid_t;
        let mut command = Command::new(program);
        // SAFETY: the hook runs in the forked child before exec and makes only
        // async-signal-safe system calls (setns, prctl, getppid, sched_setscheduler)
        // on values copied in before the fork; the namespace's fd stays open in the
        // parent until `spawn` returns.
        unsafe {
            command.pre_exec(move || {
                if libc::setns(namespace_fd, libc::CLONE_NEWNET) != 0 {
                    return Err(io::Error::last_os_error());
                }
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                ) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                // The parent may have died before the prctl: then no signal comes.
                if libc::getppid() != parent {
                    return Err(io::Error::other("the lab ended while starting it"));
                }
                if realtime {
                    let _ = super::set_realtime();
                }
                Ok(())
            });
        }
        let child = command
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            // Its own process group: a Ctrl-C at the terminal reaches us, and we
            // stop the children in order.
            .process_group(0)
            .spawn()
            .map_err(|e| {
                io::Error::new(e.kind(), format!("cannot start `{program}` in {ns}: {e}"))
            })?;
        drop(namespace);
        Ok(Process {
            child,
            label: label.to_string(),
            done: None,
        })
    }

    /// The exit status if it has ended.
    pub fn poll(&mut self) -> Option<ExitStatus> {
        if self.done.is_none() {
            self.done = self.child.try_wait().ok().flatten();
        }
        self.done
    }

    /// Sends `signal` (SIGINT lets sockperf write its log), waits up to `grace`,
    /// then kills.
    pub fn stop(&mut self, signal: libc::c_int, grace: Duration) -> Option<ExitStatus> {
        if self.poll().is_some() {
            return self.done;
        }
        // SAFETY: kill on the pid of a child we have not reaped yet.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, signal);
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.poll().is_some() {
                return self.done;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        self.done = self.child.wait().ok();
        self.done
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.poll().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The signal that asks a program to finish and write its results.
pub const SIGINT: libc::c_int = libc::SIGINT;

/// Start time of a live (not zombie) process `pid`, from `/proc/PID/stat`.
pub fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_ticks(&stat)
}

/// The start time in a `/proc/PID/stat` line, `None` for a zombie. The command
/// name (field 2) may hold spaces and parentheses: fields are counted after its
/// last `)`.
fn parse_start_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    // Field 3, the state, is the first after the name; field 22 the 20th.
    if fields.next()? == "Z" {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

/// The command name of process `pid` (`/proc/PID/comm`), or `?` once it is gone.
pub fn name_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|name| name.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

/// Kills process `pid`, which is not our child, with SIGKILL and waits up to
/// `grace` until it has ended (gone, or a zombie its parent has yet to reap).
pub fn kill_and_wait(pid: u32, grace: Duration) -> io::Result<()> {
    // SAFETY: kill takes a pid and a signal by value.
    if unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) } != 0 {
        let e = io::Error::last_os_error();
        // Already gone: what we wanted.
        return if e.raw_os_error() == Some(libc::ESRCH) {
            Ok(())
        } else {
            Err(e)
        };
    }
    let deadline = Instant::now() + grace;
    loop {
        if start_ticks(pid).is_none() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(io::Error::other(format!(
                "still running {} ms after SIGKILL",
                grace.as_millis()
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_is_counted_after_the_last_parenthesis_and_zombies_have_none() {
        let fields = |state: &str| {
            let mut line = format!("4242 (my (odd) prog) {state}");
            for n in 4..=22 {
                line.push_str(&format!(" {}", n * 100));
            }
            line + " 23 24\n"
        };
        assert_eq!(parse_start_ticks(&fields("S")), Some(2200));
        assert_eq!(parse_start_ticks(&fields("Z")), None);
        assert_eq!(parse_start_ticks("4242 (short) S 1 2"), None);
        assert_eq!(parse_start_ticks(""), None);
    }
}
