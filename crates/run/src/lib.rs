//! nicsched's run layer: a scenario, its enforcers and its seed in, a whole
//! results folder out, in whichever world runs it. The CLI (`crates/nicsched`)
//! parses flags and calls in here; `sweep` and `compare --baseline` use the same
//! pieces, so that every command writes, stamps and judges its runs one way.
//!
//! A tour, top to bottom:
//!
//! - [`driver`]: the one driver. [`driver::World`] is the small interface every
//!   world implements (which scenario it runs, checking an enforcer for it, running
//!   one enforcer to its record, what it sets up once `--out` is claimed), the way
//!   smoltcp's `Interface::poll` drives any `phy::Device`; [`driver::drive`] does
//!   everything else once: checking, claiming `--out`, provenance, progress bars,
//!   the loop, writing, overlays, report.html, the table and `--json`.
//! - [`sim_world`] and [`lab_world`]: the four worlds, the simulator and the
//!   namespace lab, each on one host or across hosts, and the entry points
//!   [`sim_world::simulate`] and [`lab_world::lab`] that pick the world a scenario
//!   file asks for.
//! - [`results`]: what a run gives ([`results::Ran`]) and how the runs of one
//!   command are written and reported, one host or across hosts.
//! - [`enforcers`]: which enforcers a command runs when it names none or `all`,
//!   and which of them only the lab runs; the one place that chooses by name.
//! - [`scenario`]: loading what a command is given (a scenario, or a policy in its
//!   place), and `check` and `explain` of it.
//! - [`provenance`]: what every run records about the build, the command and the
//!   machine.
//! - [`compare`]: `nicsched compare`, side by side or against a baseline.
//! - [`output`]: the terminal text and `--json` documents of these commands.
//! - [`jobs`]: independent runs spread over threads.
//!
//! Errors are [`Failure`]s: a message and the exit status the CLI ends with.
//!
//! It imports both worlds (`sim` and `lab`) with `policy`, `sched` and `report`;
//! of the workspace only the CLI imports it.

pub mod compare;
pub mod driver;
pub mod enforcers;
pub mod jobs;
pub mod lab_world;
pub mod output;
pub mod provenance;
pub mod results;
pub mod scenario;
pub mod sim_world;

pub use provenance::{COMMIT, provenance, provenance_of};
pub use results::unwritten;

/// Exit status for a bad policy, scenario or command line (as clap uses for usage).
pub const EXIT_INPUT: u8 = 2;
pub const EXIT_FAILURE: u8 = 1;
/// Everything was written, but a run's self-checks failed: its figures are flagged.
pub const EXIT_CHECKS_FAILED: u8 = 3;
/// `compare --baseline`: a figure got worse than the baseline's beyond its threshold,
/// or something the baseline had is missing or silent.
pub const EXIT_REGRESSED: u8 = 4;
/// 128 + SIGINT, as a shell reports a command a signal stopped.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Why a command failed, and the status it exits with.
#[derive(Debug)]
pub struct Failure {
    pub message: String,
    pub status: u8,
}

impl Failure {
    pub fn input(message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            status: EXIT_INPUT,
        }
    }

    pub fn runtime(message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            status: EXIT_FAILURE,
        }
    }

    /// A lab run's error; an interrupted run exits as a stopped command does.
    pub fn lab(context: &str, error: lab::LabError) -> Self {
        Failure {
            status: match error {
                lab::LabError::Interrupted => EXIT_INTERRUPTED,
                _ => EXIT_FAILURE,
            },
            message: format!("{context}: {error}"),
        }
    }
}

impl From<policy::PolicyError> for Failure {
    fn from(error: policy::PolicyError) -> Self {
        Failure::input(error.to_string())
    }
}

/// How a command run reports: progress bars and notes on stderr unless `quiet`;
/// on stdout the table, or with `json` one JSON document.
#[derive(Clone, Copy)]
pub struct Printing {
    pub quiet: bool,
    pub json: bool,
}
