//! The simulator as a world: a scenario of one host (`policy:`) or across hosts
//! (`hosts:`, docs/hosts.md), every enforcer's run at once over the cores.

use std::path::{Path, PathBuf};

use indicatif::ProgressBar;
use policy::{HostsScenario, Scenario};

use crate::driver::{Runs, World, drive};
use crate::enforcers::{For, chosen};
use crate::results::Ran;
use crate::scenario::load_scenario_to_run;
use crate::{Failure, Printing};

/// `nicsched sim`: the scenario at `path` (its seed replaced by `seed`) under
/// `enforcers` (else the scenario's), written under `out`, `jobs` runs at once.
pub fn simulate(
    path: &Path,
    enforcers: &[String],
    out: Option<PathBuf>,
    seed: Option<u64>,
    jobs: Option<usize>,
    printing: Printing,
) -> Result<(), Failure> {
    match load_scenario_to_run(path)? {
        policy::AnyScenario::OneHost(mut scenario) => {
            if let Some(seed) = seed {
                scenario.seed = seed;
            }
            let quiet = printing.quiet;
            let enforcers = chosen(enforcers, &scenario.enforcers, For::Sim { quiet }, path)?;
            let runs = Runs {
                name: scenario.name.clone(),
                seed: scenario.seed,
                duration_ns: scenario.duration_ns,
                enforcers,
                default_out: PathBuf::from("results").join(&scenario.name),
            };
            let world = SimOneHost { scenario, runs };
            drive(world, path, out, jobs, printing)
        }
        policy::AnyScenario::Hosts(mut scenario) => {
            if let Some(seed) = seed {
                scenario.seed = seed;
            }
            let enforcers = chosen(enforcers, &scenario.enforcers, For::SimHosts, path)?;
            let runs = Runs {
                name: scenario.name.clone(),
                seed: scenario.seed,
                duration_ns: scenario.duration_ns,
                enforcers,
                default_out: PathBuf::from("results").join(&scenario.name),
            };
            let world = SimHosts { scenario, runs };
            drive(world, path, out, jobs, printing)
        }
    }
}

/// One simulated run of `enforcer` on a scenario of one host, with the host
/// model every command simulates; `progress` is told the simulated ns.
pub fn simulate_one(
    scenario: &Scenario,
    enforcer: &str,
    progress: &mut dyn FnMut(u64),
) -> Result<report::RunRecord, sched::BuildError> {
    sim::run(scenario, enforcer, sim::HostModel::default(), progress)
}

/// The simulator on one host.
struct SimOneHost {
    scenario: Scenario,
    runs: Runs,
}

impl World for SimOneHost {
    type Held = ();

    fn runs(&self) -> &Runs {
        &self.runs
    }

    fn across_hosts(&self) -> bool {
        false
    }

    fn at_once(&self) -> bool {
        true
    }

    fn check(&self, enforcer: &str) -> Result<(), Failure> {
        sched::build(enforcer, &self.scenario.policy)
            .map(drop)
            .map_err(|e| Failure::input(e.to_string()))
    }

    fn open(&mut self, _out: &report::OutDir, _quiet: bool) -> Result<(), Failure> {
        Ok(())
    }

    fn run(&self, enforcer: &str, bar: &ProgressBar) -> Result<Ran, Failure> {
        simulate_one(&self.scenario, enforcer, &mut |ns| {
            bar.set_position(ns / 1_000_000)
        })
        .map(|record| Ran::OneHost(Box::new(record)))
        .map_err(|e| Failure::input(e.to_string()))
    }

    fn note(&self, enforcer: &str, ran: &Ran) -> Option<String> {
        let Ran::OneHost(record) = ran else {
            return None;
        };
        Some(format!(
            "{enforcer}: {} frames in {:.2} s wall ({:.2} M frames/s)",
            record.frames_sent,
            record.wall_s,
            record.frames_sent as f64 / record.wall_s.max(1e-9) / 1e6
        ))
    }
}

/// The simulator across hosts: one run per enforcer, each host's egress under
/// it, written as summary.json (`hosts`, `flows`, `checks`) and timeseries.csv
/// (one row per interval and traffic).
struct SimHosts {
    scenario: HostsScenario,
    runs: Runs,
}

impl World for SimHosts {
    type Held = ();

    fn runs(&self) -> &Runs {
        &self.runs
    }

    fn across_hosts(&self) -> bool {
        true
    }

    fn at_once(&self) -> bool {
        true
    }

    fn check(&self, enforcer: &str) -> Result<(), Failure> {
        build_on_every_host(&self.scenario, enforcer)
    }

    fn open(&mut self, _out: &report::OutDir, _quiet: bool) -> Result<(), Failure> {
        Ok(())
    }

    fn run(&self, enforcer: &str, bar: &ProgressBar) -> Result<Ran, Failure> {
        let model = sim::HostModel::default();
        let record = sim::run_hosts(&self.scenario, enforcer, model, &mut |ns| {
            bar.set_position(ns / 1_000_000)
        })
        .map_err(|e| Failure::input(e.to_string()))?;
        let (summary, rows) = report::summarise_hosts(&self.scenario, &record, &model.path);
        Ok(Ran::Hosts {
            summary: Box::new(summary),
            rows,
            settings: Default::default(),
        })
    }
}

/// Refuses `enforcer` unless it builds on the policy of every host, naming the host.
pub(crate) fn build_on_every_host(scenario: &HostsScenario, enforcer: &str) -> Result<(), Failure> {
    for host in &scenario.hosts {
        sched::build(enforcer, &host.policy)
            .map_err(|e| Failure::input(format!("host {}: {e}", host.name)))?;
    }
    Ok(())
}
