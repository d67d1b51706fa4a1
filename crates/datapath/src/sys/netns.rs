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

/// The file that stands for namespace `name`, for `setns`.
pub fn open(name: &str) -> io::Result<File> {
    let path = format!("{NETNS_DIR}/{name}");
    File::open(&path).map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))
}

/// Pids of the processes in namespace `name` (`ip netns pids`).
pub fn pids(name: &str) -> io::Result<Vec<u32>> {
    Ok(ip(&["netns", "pids", name])?
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect())
}

/// Names of the interfaces of the calling thread's namespace.
pub fn links() -> io::Result<Vec<String>> {
    Ok(ip(&["-o", "link", "show"])?
        .lines()
        .filter_map(|l| l.split(':').nth(1))
        .map(|name| name.trim().split('@').next().unwrap_or("").to_string())
        .collect())
}

/// Deletes interface `name` of the calling thread's namespace (a veth's peer goes with it).
pub fn delete_link(name: &str) -> io::Result<()> {
    ip(&["link", "delete", name]).map(drop)
}

/// Moves the calling thread into namespace `name`, for good: only threads made for
/// one namespace call this.
pub fn enter(name: &str) -> io::Result<()> {
    let file = open(name)?;
    // SAFETY: setns takes a valid open fd and a namespace type; it only changes the
    // calling thread's network namespace.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Receive counters of one interface, as the kernel keeps them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxCounters {
    /// Bytes of the frames received (Ethernet header included, no FCS).
    pub bytes: u64,
    pub packets: u64,
    pub dropped: u64,
}

/// Receive counters of interface `dev` in the calling thread's namespace (from
/// `/proc/thread-self/net/dev`, which follows the thread's namespace; `/sys` does not).
pub fn rx_counters(dev: &str) -> io::Result<RxCounters> {
    let text = std::fs::read_to_string("/proc/thread-self/net/dev")?;
    parse_rx_counters(&text, dev).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface `{dev}` in /proc/thread-self/net/dev"),
        )
    })
}

/// The receive counters of `dev` in the text of `/proc/net/dev`.
pub fn parse_rx_counters(text: &str, dev: &str) -> Option<RxCounters> {
    text.lines().find_map(|line| {
        let (name, numbers) = line.split_once(':')?;
        if name.trim() != dev {
            return None;
        }
        let numbers: Vec<u64> = numbers
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        Some(RxCounters {
            bytes: *numbers.first()?,
            packets: *numbers.get(1)?,
            dropped: *numbers.get(3)?,
        })
    })
}

/// Runs `test` on a thread of its own in a new network namespace whose loopback is
/// up (programs it starts inherit the namespace): false, skipped, where it cannot
/// run, outside CI and without root. In CI (`CI` set), which runs as root, not
/// being root fails.
pub fn in_new_namespace(test: impl FnOnce() + Send + 'static) -> bool {
    if !super::is_root() {
        let in_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        assert!(
            !in_ci,
            "a network namespace needs root, and CI runs every test"
        );
        eprintln!("skipping: a network namespace needs root");
        return false;
    }
    std::thread::spawn(move || {
        // SAFETY: unshare(CLONE_NEWNET) moves only this thread into a new namespace.
        assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0);
        let up = std::process::Command::new("ip")
            .args(["link", "set", "lo", "up"])
            .status()
            .expect("ip runs");
        assert!(up.success());
        test();
    })
    .join()
    .expect("the test thread");
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_receive_columns_of_one_interface() {
        let text = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
  eth0: 10600     100    0    7    0     0          0         0      140       2    0    0    0     0       0          0
";
        assert_eq!(
            parse_rx_counters(text, "eth0"),
            Some(RxCounters {
                bytes: 10_600,
                packets: 100,
                dropped: 7
            })
        );
        assert_eq!(parse_rx_counters(text, "eth1"), None);
        assert_eq!(parse_rx_counters(text, "face |bytes"), None);
    }
}
