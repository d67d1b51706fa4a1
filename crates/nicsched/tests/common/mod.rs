//! Helpers the command-line tests share.

use std::path::PathBuf;
use std::process::Command;

/// A scratch directory removed when dropped, even when the test fails.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("nicsched-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub fn file(&self, name: &str, text: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether `test` can run: as root, with each program. In CI (`CI` set) a missing
/// one fails the test; elsewhere the test says why and passes.
pub fn runnable(test: &str, programs: &[&str]) -> bool {
    let uid = Command::new("id").arg("-u").output().unwrap();
    let why = if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        Some("needs root".to_string())
    } else {
        programs
            .iter()
            .find(|p| Command::new(p).arg("--version").output().is_err())
            .map(|p| format!("`{p}` is missing (scripts/setup-lab.sh installs it)"))
    };
    let in_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    match why {
        None => true,
        Some(why) if in_ci => panic!("{test}: {why}; CI must run every lab test"),
        Some(why) => {
            eprintln!("skipping {test}: {why}");
            false
        }
    }
}
