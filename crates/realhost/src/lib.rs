//! # nicsched on a real host
//!
//! The kernel holds a policy on a device; nicsched configures it, reads it back and
//! leaves (`nicsched apply`), and reads the kernel's counters against the ideal
//! (`nicsched watch`). Or nicsched's engine holds it, in the device's egress path,
//! for as long as the process runs (`nicsched enforce`). The contract is `realhost.md` of the shared spec; the
//! operator's page is `docs/realhost.md`.
//!
//! - [`device`]: a device's type, Tx queues and XPS masks in sysfs, and the BPF
//!   filesystem;
//! - [`record`]: what a device held before nicsched touched it, kept in
//!   `/run/nicsched/DEV.json` so that `--remove` puts it back;
//! - [`tc`]: every `tc` the crate runs, and the reading of its output;
//! - [`apply`]: a mechanism's configuration in one transaction, verified, rolled
//!   back on any failure, and its removal;
//! - [`watch`]: per tenant and interval, throughput against the ideal;
//! - [`bpf`]: programs assembled from the policy, loaded and attached without
//!   clang;
//! - [`enforce`]: the engine on a device's egress, fail-open, with its live
//!   figures and self-checks.
//!
//! Mechanisms: [`Mechanism::Htb`], the tree `nicsched tc` prints, and
//! [`Mechanism::Tonic`], TONIC without a kernel module (`mq`, a `pfifo_fast` per
//! Tx queue and [`bpf::tonic`]'s program pinned at the device's egress).

pub mod apply;
pub mod bpf;
pub mod device;
pub mod enforce;
pub mod record;
pub mod tc;
pub mod watch;

pub use apply::{Applied, Plan, Removed, TonicPlan, apply, remove, tonic_commands};
pub use watch::{Sample, TenantLine, Watch};

/// How the kernel is to hold the policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mechanism {
    /// HTB classes and u32 filters at the device's root (`nicsched tc`).
    Htb,
    /// Tx queue pools and a priority band, set per frame by a BPF program at the
    /// device's egress, under `mq` and `pfifo_fast`.
    Tonic,
}

impl Mechanism {
    /// The names `--mechanism` takes: the mechanisms built.
    pub const NAMES: &[&str] = &["htb", "tonic"];

    pub fn from_name(name: &str) -> Option<Mechanism> {
        match name {
            "htb" => Some(Mechanism::Htb),
            "tonic" => Some(Mechanism::Tonic),
            _ => None,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            Mechanism::Htb => "htb",
            Mechanism::Tonic => "tonic",
        }
    }
}

/// Why a command did not do what it was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The request cannot be met as given (no such device, a device nicsched did
    /// not configure, one configured by someone else): exit status 2.
    Input(String),
    /// The kernel or `tc` refused or disagreed: exit status 1.
    Failed(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Input(m) | Error::Failed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}
