//! What every run records about how it came to be: the build, the command, the
//! scenario's bytes, the seed and the machine.

use std::path::Path;

use crate::Failure;

/// The commit nicsched is built from (`-dirty` with uncommitted changes).
pub const COMMIT: &str = env!("NICSCHED_COMMIT");

/// What every run of this command shares in its provenance; each run adds its
/// seed and its world's settings.
pub fn provenance(scenario: &Path, seed: u64) -> Result<report::Provenance, Failure> {
    let bytes = std::fs::read(scenario)
        .map_err(|e| Failure::input(format!("{}: {e}", scenario.display())))?;
    Ok(provenance_of(&bytes, seed))
}

/// Provenance of a command whose scenario or policy is `bytes`.
pub fn provenance_of(bytes: &[u8], seed: u64) -> report::Provenance {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    report::Provenance {
        nicsched: env!("CARGO_PKG_VERSION").to_string(),
        commit: COMMIT.to_string(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        scenario_sha256: digest.iter().map(|b| format!("{b:02x}")).collect(),
        seed,
        kernel: proc_line("/proc/sys/kernel/osrelease"),
        host: proc_line("/proc/sys/kernel/hostname"),
        settings: Default::default(),
    }
}

/// One line the kernel reports about the machine, or `unknown` where it cannot be read.
fn proc_line(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|line| line.trim().to_string())
        .unwrap_or_else(|_| "unknown".to_string())
}

/// The command's provenance on a run, which keeps its own seed and settings.
pub fn stamp(record: &mut report::RunRecord, provenance: &report::Provenance) {
    record.provenance = report::Provenance {
        seed: record.provenance.seed,
        settings: std::mem::take(&mut record.provenance.settings),
        ..provenance.clone()
    };
}
