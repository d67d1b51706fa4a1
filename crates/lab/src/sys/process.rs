//! Child processes (iperf3, sockperf, memcached) started inside a namespace with
//! `ip netns exec`, which execs the program, so the child's pid is the program's.

use std::fs::File;
use std::io;
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
        let mut command = Command::new("ip");
        if realtime {
            // SAFETY: the hook runs in the forked child before exec and only makes
            // one async-signal-safe system call; `ip netns exec` and the program
            // it execs inherit the policy.
            unsafe {
                command.pre_exec(|| {
                    let _ = super::set_realtime();
                    Ok(())
                });
            }
        }
        let child = command
            .args(["netns", "exec", ns, program])
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
