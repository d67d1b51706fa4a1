//! Commands the device tests (realhost, tonic, enforce) run and must succeed.

use std::process::{Command, Output};

/// Runs `command` and fails the test, with its stderr, unless it succeeds.
pub fn ok(command: &[&str]) -> Output {
    let output = Command::new(command[0])
        .args(&command[1..])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}
