//! Network namespaces and the iproute2/ethtool commands that configure them. Creating
//! and deleting go through `ip netns` (it keeps `/var/run/netns/NAME` mounted); a
//! thread enters a namespace with `setns` on that file.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};

const NETNS_DIR: &str = "/var/run/netns";

/// Runs `program args`, waiting for it; an error carries the command and its stderr.
pub fn command(program: &str, args: &[&str]) -> io::Result<String> {
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run `{program}`: {e}")))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(io::Error::other(format!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )))
    }
}

/// `ip ARGS`.
pub fn ip(args: &[&str]) -> io::Result<String> {
    command("ip", args)
}

/// Runs `commands` (lines of `ip` arguments) in namespace `ns` with one `ip -batch`,
/// instead of one process per line.
pub fn ip_batch(ns: &str, commands: &[String]) -> io::Result<()> {
    let mut child = Command::new("ip")
        .args(["-n", ns, "-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run `ip`: {e}")))?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let written = stdin.write_all(commands.join("\n").as_bytes());
    drop(stdin);
    let output = child.wait_with_output()?;
    written?;
    if output.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "`ip -n {ns} -batch` failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )))
    }
}

/// Runs `program args` inside namespace `ns` (`ip netns exec`).
pub fn exec_in(ns: &str, program: &str, args: &[&str]) -> io::Result<String> {
    let mut all = vec!["netns", "exec", ns, program];
    all.extend_from_slice(args);
    command("ip", &all)
}

pub fn add(name: &str) -> io::Result<()> {
    ip(&["netns", "add", name]).map(drop)
}

/// Deletes a namespace; its interfaces (veth ends, bridges) and qdiscs go with it.
pub fn delete(name: &str) -> io::Result<()> {
    ip(&["netns", "delete", name]).map(drop)
}

/// Names of the namespaces `ip netns list` shows.
pub fn list() -> io::Result<Vec<String>> {
    Ok(ip(&["netns", "list"])?
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// Moves the calling thread into namespace `name`, for good: only threads made for
/// one namespace call this.
pub fn enter(name: &str) -> io::Result<()> {
    let file = File::open(format!("{NETNS_DIR}/{name}"))?;
    // SAFETY: setns takes a valid open fd and a namespace type; it only changes the
    // calling thread's network namespace.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
