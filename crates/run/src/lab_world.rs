//! The namespace lab as a world: real frames through the engine (or the kernel's
//! HTB) on one host's emulated link, or across hosts (docs/hosts.md, "Lab"), one
//! enforcer's run after the other.

use std::path::{Path, PathBuf};

use indicatif::ProgressBar;
use policy::{HostsScenario, Scenario};

use crate::driver::{Runs, World, drive};
use crate::enforcers::{For, chosen, is_lab_only};
use crate::results::Ran;
use crate::scenario::{htb_refusal, load_scenario_to_run};
use crate::sim_world::build_on_every_host;
use crate::{Failure, Printing};

/// The lab's emulated link when the scenario's is faster: what one engine thread
/// forwards on a small machine.
pub const LAB_LINK_RATE_BPS_DEFAULT: u64 = 1_000_000_000;

/// The fastest host link of a lab run across hosts unless `--link-rate` says
/// otherwise: every host's engine, its VMs' senders and receivers share the
/// machine's cores, and on 2 cores three engines forwarded a few hundred Mbit/s
/// each (docs/hosts.md, "Lab across hosts").
const LAB_HOSTS_LINK_RATE_BPS_DEFAULT: u64 = 250_000_000;

/// What `nicsched lab` was asked on its command line that depends on the world:
/// the link rate, and the per-app buffer (`--class-limit`; its default differs
/// across hosts).
pub struct LabAsked {
    pub link_rate: Option<u64>,
    pub class_limit: Option<u32>,
}

/// The live view of one-host lab runs: lines on stderr and metrics served while
/// each run goes. The CLI's; the lab world only says when.
pub trait Live: Sync {
    /// What must hold before anything runs (binding `--metrics-listen`).
    fn start(&mut self, quiet: bool) -> Result<(), Failure>;
    /// The line before the first run's lines, for a scenario measured every
    /// `interval_ns`; `None` where no lines are shown.
    fn header(&self, interval_ns: u64) -> Option<String>;
    /// Runs `run` under the view of `enforcer`'s run of `scenario`.
    fn watch(
        &self,
        enforcer: &str,
        bar: &ProgressBar,
        scenario: &Scenario,
        run: &mut dyn FnMut(&mut dyn lab::Watch) -> Result<report::RunRecord, lab::LabError>,
    ) -> Result<report::RunRecord, lab::LabError>;
    /// The flag given for a live view, which runs across hosts have not.
    fn across_hosts(&self) -> Option<&'static str>;
}

/// `nicsched lab`: the scenario at `path` under `enforcers` (else the
/// scenario's), one host or across hosts as the file says, written under `out`.
pub fn lab(
    path: &Path,
    enforcers: &[String],
    out: Option<PathBuf>,
    asked: LabAsked,
    mut options: lab::LabOptions,
    printing: Printing,
    live: &mut dyn Live,
) -> Result<(), Failure> {
    lab::check_root().map_err(|e| Failure::input(e.to_string()))?;
    match load_scenario_to_run(path)? {
        policy::AnyScenario::OneHost(scenario) => {
            let link_rate_bps = asked
                .link_rate
                .unwrap_or_else(|| scenario.policy.link.rate_bps.min(LAB_LINK_RATE_BPS_DEFAULT));
            let scenario = scenario.scaled_to_link_rate(link_rate_bps);
            lab::transmit_ring_supported(&scenario)
                .map_err(|e| Failure::input(format!("{}: {e}", path.display())))?;
            let enforcers = chosen(enforcers, &scenario.enforcers, For::Lab, path)?;
            let runs = Runs {
                name: scenario.name.clone(),
                seed: scenario.seed,
                duration_ns: scenario.duration_ns,
                enforcers,
                default_out: lab_out(&scenario.name),
            };
            let world = LabOneHost {
                path,
                scenario,
                runs,
                link_rate_bps,
                options,
                live,
            };
            drive(world, path, out, None, printing)
        }
        policy::AnyScenario::Hosts(scenario) => {
            if let Some(flag) = live.across_hosts() {
                return Err(Failure::input(format!(
                    "{}: {flag} watches one-host runs only; this scenario runs across hosts (`hosts:`): leave {flag} out",
                    path.display()
                )));
            }
            if asked.class_limit.is_none() {
                options.qdisc.class_packets = sched::HostLimits::LINUX.class_packets;
            }
            let fastest = scenario.fastest_link_bps();
            let link_rate_bps = asked
                .link_rate
                .unwrap_or_else(|| fastest.min(LAB_HOSTS_LINK_RATE_BPS_DEFAULT));
            let scenario = lab::hosts::scaled_to_link_rate(&scenario, link_rate_bps);
            let enforcers = chosen(enforcers, &scenario.enforcers, For::LabHosts, path)?;
            let runs = Runs {
                name: scenario.name.clone(),
                seed: scenario.seed,
                duration_ns: scenario.duration_ns,
                enforcers,
                default_out: lab_out(&scenario.name),
            };
            let world = LabHosts {
                path,
                scenario,
                runs,
                link_rate_bps,
                options,
            };
            drive(world, path, out, None, printing)
        }
    }
}

/// `results/NAME-lab`.
fn lab_out(name: &str) -> PathBuf {
    PathBuf::from("results").join(format!("{name}-lab"))
}

/// Refuses to start another run once a signal asked the lab to stop.
fn not_interrupted(enforcer: &str) -> Result<(), Failure> {
    if lab::interrupted() {
        return Err(Failure::lab(enforcer, lab::LabError::Interrupted));
    }
    Ok(())
}

/// The lab on one host's link, scaled to `link_rate_bps`.
struct LabOneHost<'a> {
    path: &'a Path,
    scenario: Scenario,
    runs: Runs,
    link_rate_bps: u64,
    options: lab::LabOptions,
    live: &'a mut dyn Live,
}

impl World for LabOneHost<'_> {
    // Held across every enforcer's run: a signal during one run's teardown, or
    // between two runs, stops the next instead of being cleared by its own guard.
    type Held = lab::StopSignals;

    fn runs(&self) -> &Runs {
        &self.runs
    }

    fn across_hosts(&self) -> bool {
        false
    }

    fn at_once(&self) -> bool {
        false
    }

    fn check(&self, enforcer: &str) -> Result<(), Failure> {
        lab::engine_cpu_supported(&self.scenario, enforcer)
            .map_err(|e| Failure::input(format!("{}: {e}", self.path.display())))?;
        if is_lab_only(enforcer) {
            lab::htb_limits(&self.scenario.policy)
                .map_err(|e| htb_refusal(&self.path.display(), e))?;
        } else {
            sched::build(enforcer, &self.scenario.policy)
                .map_err(|e| Failure::input(e.to_string()))?;
        }
        Ok(())
    }

    fn start(&mut self, quiet: bool) -> Result<(), Failure> {
        self.live.start(quiet)
    }

    fn open(&mut self, out: &report::OutDir, quiet: bool) -> Result<lab::StopSignals, Failure> {
        if !quiet {
            eprintln!(
                "lab: {} on a {} link, enforcers {}",
                self.scenario.name,
                policy::format_rate(self.link_rate_bps as f64),
                self.runs.enforcers.join(", ")
            );
        }
        if let Some(header) = self.live.header(self.scenario.interval_ns) {
            eprintln!("{header}");
        }
        self.options.out = Some(out.staging().join("logs"));
        Ok(lab::StopSignals::install())
    }

    fn run(&self, enforcer: &str, bar: &ProgressBar) -> Result<Ran, Failure> {
        not_interrupted(enforcer)?;
        self.live
            .watch(enforcer, bar, &self.scenario, &mut |watch| {
                lab::run(&self.scenario, enforcer, &self.options, watch)
            })
            .map(|record| Ran::OneHost(Box::new(record)))
            .map_err(|e| Failure::lab(enforcer, e))
    }
}

/// The lab across hosts: the scenario scaled so that its fastest link runs at
/// `link_rate_bps`, written as the simulator writes it.
struct LabHosts<'a> {
    path: &'a Path,
    scenario: HostsScenario,
    runs: Runs,
    link_rate_bps: u64,
    options: lab::LabOptions,
}

impl World for LabHosts<'_> {
    type Held = lab::StopSignals;

    fn runs(&self) -> &Runs {
        &self.runs
    }

    fn across_hosts(&self) -> bool {
        true
    }

    fn at_once(&self) -> bool {
        false
    }

    fn check(&self, enforcer: &str) -> Result<(), Failure> {
        lab::hosts::supported(&self.scenario, enforcer)
            .map_err(|e| Failure::input(format!("{}: {e}", self.path.display())))?;
        build_on_every_host(&self.scenario, enforcer)
    }

    fn open(&mut self, out: &report::OutDir, quiet: bool) -> Result<lab::StopSignals, Failure> {
        if !quiet {
            eprintln!(
                "lab: {} on {} host links at most, feedback every {}, enforcers {}",
                self.scenario.name,
                policy::format_rate(self.link_rate_bps as f64),
                policy::format_time(self.scenario.feedback.epoch_ns),
                self.runs.enforcers.join(", ")
            );
        }
        self.options.out = Some(out.staging().join("logs"));
        // Already scaled.
        self.options.link_rate_bps = None;
        Ok(lab::StopSignals::install())
    }

    fn run(&self, enforcer: &str, bar: &ProgressBar) -> Result<Ran, Failure> {
        not_interrupted(enforcer)?;
        let run = lab::hosts::run(&self.scenario, enforcer, &self.options, &mut |ns| {
            bar.set_position(ns / 1_000_000)
        })
        .map_err(|e| Failure::lab(enforcer, e))?;
        let (mut summary, rows) = report::summarise_hosts(
            &self.scenario,
            &run.record,
            &report::measure::RpcPath::default(),
        );
        summary.checks.extend(run.checks);
        Ok(Ran::Hosts {
            summary: Box::new(summary),
            rows,
            settings: run.settings,
        })
    }
}
