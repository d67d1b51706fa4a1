//! The one driver: a scenario × its enforcers → a whole results folder, in any
//! world. A [`World`] says only what differs between the simulator and the lab,
//! on one host or across hosts: its scenario, whether an enforcer can run there,
//! what it sets up around the runs, and how it runs one enforcer. [`drive`] does
//! the rest, the same way for all four.

use std::path::{Path, PathBuf};

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use crate::results::{Ran, Written};
use crate::{Failure, Printing, jobs, provenance};

/// What a world's runs share, whichever world it is.
pub struct Runs {
    /// The scenario's name, which names the results.
    pub name: String,
    /// The seed every run of the command records.
    pub seed: u64,
    /// The scenario's duration, which progress is counted against.
    pub duration_ns: u64,
    /// The enforcers to run, in order.
    pub enforcers: Vec<String>,
    /// `--out` when none is given.
    pub default_out: PathBuf,
}

/// A place a scenario runs: the simulator or the lab, one host or across hosts.
pub trait World: Sync {
    /// What the world holds while its runs go, dropped when they are done (the
    /// lab's signal handlers).
    type Held;

    /// The scenario's name, seed and duration, the enforcers and the default `--out`.
    fn runs(&self) -> &Runs;
    /// Whether the runs are across hosts (their summary has `hosts` and `flows`).
    fn across_hosts(&self) -> bool;
    /// Whether the runs go at once, over `-j` threads (the simulator), or one
    /// after the other (the lab, which owns the machine's cores while it runs).
    fn at_once(&self) -> bool;

    /// Refuses an enforcer this world cannot run on its scenario, before
    /// anything is claimed or run.
    fn check(&self, enforcer: &str) -> Result<(), Failure>;

    /// What must succeed before `--out` is claimed (binding a port).
    fn start(&mut self, _quiet: bool) -> Result<(), Failure> {
        Ok(())
    }

    /// Sets the world up once `--out` is claimed, and says what runs.
    fn open(&mut self, out: &report::OutDir, quiet: bool) -> Result<Self::Held, Failure>;

    /// Runs `enforcer`, its progress on `bar` in ms of the scenario.
    fn run(&self, enforcer: &str, bar: &ProgressBar) -> Result<Ran, Failure>;

    /// A line said about a finished run, unless quiet.
    fn note(&self, _enforcer: &str, _ran: &Ran) -> Option<String> {
        None
    }
}

/// Runs every enforcer of `world` on the scenario read from `path`, writes each
/// run under `--out` (`out`, or the world's default), then the overlays and
/// report.html, and prints the table (or the `--json` document); status 3 when a
/// run's self-check failed. Up to `jobs` runs at once where the world runs them so.
pub fn drive<W: World>(
    mut world: W,
    path: &Path,
    out: Option<PathBuf>,
    jobs: Option<usize>,
    printing: Printing,
) -> Result<(), Failure> {
    for name in &world.runs().enforcers {
        world.check(name)?;
    }
    let out = out.unwrap_or_else(|| world.runs().default_out.clone());
    world.start(printing.quiet)?;
    let out = report::OutDir::claim(&out, &[path]).map_err(Failure::input)?;
    let provenance = provenance(path, world.runs().seed)?;
    let _held = world.open(&out, printing.quiet)?;
    let mut written = Written::new(world.across_hosts());
    let enforcers = world.runs().enforcers.clone();
    let mut write = |name: &str, ran: Ran| {
        if !printing.quiet
            && let Some(note) = world.note(name, &ran)
        {
            eprintln!("{note}");
        }
        written.add(&out, name, ran, &provenance)
    };
    if world.at_once() {
        let (_bars, runs_of) =
            simulation_bars(&enforcers, world.runs().duration_ns, printing.quiet);
        let ran = jobs::map(
            &runs_of,
            jobs::threads(jobs, runs_of.len()),
            |(name, bar)| {
                let ran = world.run(name, bar);
                bar.finish();
                ran
            },
        );
        for (ran, name) in ran.into_iter().zip(&enforcers) {
            write(name, ran?)?;
        }
    } else {
        for name in &enforcers {
            let bar = lab_progress(name, world.runs().duration_ns, printing.quiet);
            let ran = world.run(name, &bar)?;
            bar.finish();
            write(name, ran)?;
        }
    }
    written.finish(out, &world.runs().name, &provenance, printing.json)
}

/// One progress bar per enforcer to simulate, in ms of the scenario, drawn
/// together while they run at once (hidden with `quiet`).
fn simulation_bars(
    enforcers: &[String],
    duration_ns: u64,
    quiet: bool,
) -> (MultiProgress, Vec<(String, ProgressBar)>) {
    let bars = MultiProgress::new();
    if quiet {
        bars.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let style = ProgressStyle::with_template(
        "{prefix:>11} [{bar:30}] {pos:>6}/{len} ms simulated  {elapsed}",
    )
    .expect("constant template")
    .progress_chars("=> ");
    let runs = enforcers
        .iter()
        .map(|name| {
            let bar = bars.add(ProgressBar::new(duration_ns / 1_000_000));
            bar.set_style(style.clone());
            bar.set_prefix(name.clone());
            (name.clone(), bar)
        })
        .collect();
    (bars, runs)
}

/// One lab run's progress bar, in ms of the scenario, named by its enforcer.
fn lab_progress(enforcer: &str, duration_ns: u64, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(duration_ns / 1_000_000);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>11} [{bar:30}] {pos:>6}/{len} ms  {elapsed}")
            .expect("constant template")
            .progress_chars("=> "),
    );
    bar.set_prefix(enforcer.to_string());
    bar
}
