//! Which process owns a lab run's names: one file per run prefix under
//! [`RECORD_DIR`], holding the owner's pid and the time it started (so a reused pid
//! is not mistaken for the owner). A run that dies without its destructors (SIGKILL,
//! a crash) leaves its file behind, and the next run can tell that its owner is gone.
//! `/run` is a tmpfs, like the `/run/netns` the namespaces are mounted on: both are
//! empty after a reboot.

use super::process;
use std::fs;
use std::io::{self, Write};
use std::path::PathBuf;

pub const RECORD_DIR: &str = "/run/nicsched";

/// A process, told apart from a later one with the same pid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    pub pid: u32,
    /// When it started, in clock ticks after boot (`/proc/PID/stat`, field 22).
    pub start_ticks: u64,
}

impl Owner {
    fn parse(text: &str) -> Option<Owner> {
        let mut words = text.split_whitespace();
        let pid = words.next()?.parse().ok()?;
        let start_ticks = words.next()?.parse().ok()?;
        Some(Owner { pid, start_ticks })
    }

    /// Whether the process still runs (a zombie does not).
    pub fn is_alive(&self) -> bool {
        process::start_ticks(self.pid) == Some(self.start_ticks)
    }
}

fn path(prefix: &str) -> PathBuf {
    PathBuf::from(RECORD_DIR).join(prefix)
}

/// Records this process as the owner of `prefix`. Fails if another record holds
/// it: the file appears whole (written aside, then linked into place), so a reader
/// never finds it half written, and the link fails when the name is taken.
pub fn claim(prefix: &str) -> io::Result<()> {
    let me = super::pid();
    let owner = Owner {
        pid: me,
        start_ticks: process::start_ticks(me)
            .ok_or_else(|| io::Error::other("no /proc/self/stat"))?,
    };
    fs::create_dir_all(RECORD_DIR)
        .map_err(|e| io::Error::new(e.kind(), format!("{RECORD_DIR}: {e}")))?;
    let aside = PathBuf::from(RECORD_DIR).join(format!(".{prefix}.{me}"));
    let mut file = fs::File::create(&aside)?;
    writeln!(file, "{} {}", owner.pid, owner.start_ticks)?;
    drop(file);
    let linked = fs::hard_link(&aside, path(prefix));
    let _ = fs::remove_file(&aside);
    linked.map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "{}: {e} (another run owns this prefix)",
                path(prefix).display()
            ),
        )
    })
}

/// Removes the record of `prefix` (none is fine).
pub fn release(prefix: &str) -> io::Result<()> {
    match fs::remove_file(path(prefix)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Every recorded prefix with its owner (`None`: the file does not say).
pub fn records() -> io::Result<Vec<(String, Option<Owner>)>> {
    let entries = match fs::read_dir(RECORD_DIR) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut records = Vec::new();
    for entry in entries {
        let entry = entry?;
        let Some(prefix) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if prefix.starts_with('.') {
            continue;
        }
        let text = fs::read_to_string(entry.path()).unwrap_or_default();
        records.push((prefix, Owner::parse(&text)));
    }
    records.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_changed_start_time_is_another_process() {
        let me = Owner {
            pid: std::process::id(),
            start_ticks: process::start_ticks(std::process::id()).expect("we run"),
        };
        assert!(me.is_alive());
        assert!(
            !Owner {
                start_ticks: me.start_ticks + 1,
                ..me
            }
            .is_alive()
        );
        assert_eq!(
            Owner::parse("12 345\n"),
            Some(Owner {
                pid: 12,
                start_ticks: 345
            })
        );
        assert_eq!(Owner::parse(""), None);
    }
}
