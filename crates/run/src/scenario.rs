//! What a command is given, loaded: a scenario to run (one host or across hosts),
//! or a policy in its place; and `check` and `explain` of it.

use std::path::Path;

use policy::{Policy, Scenario};

use crate::enforcers::{For, chosen, is_lab_only};
use crate::{Failure, output};

/// A file with a top-level `traffic` key is a scenario; anything else a policy.
pub fn looks_like_scenario(path: &Path) -> bool {
    std::fs::read_to_string(path)
        .map(|text| text.lines().any(|l| l.starts_with("traffic:")))
        .unwrap_or(false)
}

/// A scenario for `sim` or `lab`; a policy given in its place is named as such,
/// not reported as a scenario with unknown keys.
pub fn load_scenario_to_run(path: &Path) -> Result<policy::AnyScenario, Failure> {
    policy::load_any_scenario(path, &lab::enforcer_names()).map_err(|error| {
        if !looks_like_scenario(path) && policy::load_policy(path).is_ok() {
            Failure::input(format!(
                "{}: this is a policy, not a scenario: a scenario gives a policy (`policy:` or `hosts:`), a `duration` and the `traffic` offered to it (docs/scenario.md); `nicsched explain {}` shows this policy's ideal",
                path.display(),
                path.display()
            ))
        } else {
            error.into()
        }
    })
}

pub fn load_policy_or_scenario(path: &Path) -> Result<Policy, Failure> {
    if looks_like_scenario(path) {
        Ok(policy::load_scenario(path, &lab::enforcer_names())?.policy)
    } else {
        Ok(policy::load_policy(path)?)
    }
}

/// A policy `nicsched tc` or the lab's `linux-htb` cannot compile, as `source: error: ...`.
pub fn htb_refusal(source: &dyn std::fmt::Display, error: lab::TcScriptError) -> Failure {
    Failure::input(format!("{source}: error: {error}"))
}

pub fn check(path: &Path, enforcers: &[String], json: bool) -> Result<(), Failure> {
    let checked = checked(path, enforcers)?;
    if json {
        output::print_json(&checked);
    } else {
        print!("{checked}");
    }
    Ok(())
}

pub fn checked(path: &Path, enforcers: &[String]) -> Result<output::Checked, Failure> {
    let file = path.display().to_string();
    if let Ok(policy::AnyScenario::Hosts(scenario)) =
        policy::load_any_scenario(path, &lab::enforcer_names())
    {
        // linux-htb runs on one host's link only.
        let names = chosen(enforcers, &scenario.enforcers, For::CheckHosts, path)?;
        for name in &names {
            for host in &scenario.hosts {
                sched::build(name, &host.policy)
                    .map_err(|e| Failure::input(format!("host {}: {e}", host.name)))?;
            }
        }
        return Ok(output::Checked {
            file,
            across_hosts: true,
            subject: output::CheckedSubject::Hosts {
                hosts: scenario.hosts.len(),
                vms: scenario.vms().len(),
                traffic: scenario.traffic.len(),
            },
            enforcers: names
                .iter()
                .map(|name| output::CheckedEnforcer {
                    name: name.clone(),
                    approximation: None,
                    bounds: None,
                })
                .collect(),
        });
    }
    let enforcers = chosen(enforcers, &[], For::Check, path)?;
    let policy = load_policy_or_scenario(path)?;
    if enforcers.iter().any(|name| is_lab_only(name)) {
        lab::htb_limits(&policy).map_err(|e| htb_refusal(&path.display(), e))?;
    }
    let mut checked = Vec::new();
    for name in &enforcers {
        let (approximation, bounds) = if is_lab_only(name) {
            (lab::htb_approximation(&policy), lab::htb_bounds(&policy))
        } else {
            let refused = |e: sched::BuildError| Failure::input(e.to_string());
            (
                sched::approximation(name, &policy).map_err(refused)?,
                sched::bounds(name, &policy).map_err(refused)?,
            )
        };
        checked.push(output::CheckedEnforcer {
            name: name.clone(),
            approximation: Some(approximation),
            bounds: Some(bounds),
        });
    }
    Ok(output::Checked {
        file,
        across_hosts: false,
        subject: output::CheckedSubject::OneHost {
            tenants: policy.tenants.len(),
            apps: policy.apps.len(),
            link_rate_bps: policy.link.rate_bps,
            queues: policy.link.queues,
        },
        enforcers: checked,
    })
}

pub fn explain(path: &Path, active: Option<&str>, json: bool) -> Result<(), Failure> {
    let explained = match policy::load_any_scenario(path, &lab::enforcer_names()) {
        Ok(policy::AnyScenario::Hosts(scenario)) => {
            // The rpc path of the simulator's host model bounds a closed-loop rpc's
            // demand, as in the figures of `nicsched sim`.
            let asked = report::hosts_asked_bps(&scenario, &sim::HostModel::default().path);
            output::Explained {
                file: path.display().to_string(),
                across_hosts: true,
                explanation: output::Explanation::Hosts(policy::explain_hosts(&scenario, &asked)),
            }
        }
        _ => output::Explained {
            file: path.display().to_string(),
            across_hosts: false,
            explanation: output::Explanation::OneHost(explanation(path, active)?),
        },
    };
    if json {
        output::print_json(&explained);
    } else {
        print!("{explained}");
    }
    Ok(())
}

/// The explanation of a one-host policy or scenario.
pub fn explanation(path: &Path, active: Option<&str>) -> Result<policy::Explanation, Failure> {
    if active.is_none() && looks_like_scenario(path) {
        let scenario = policy::load_scenario(path, &lab::enforcer_names())?;
        return Ok(explain_scenario(&scenario));
    }
    let policy = load_policy_or_scenario(path)?;
    let demands = match active {
        Some(list) => policy::parse_active(&policy, list)?,
        None => policy.apps.iter().map(|_| vec![f64::INFINITY]).collect(),
    };
    Ok(policy::explain(&policy, &demands))
}

/// The ideal of each phase of a one-host scenario: from each time a traffic
/// starts or stops, every running traffic's flows at what they ask, as the
/// figures of `nicsched sim` count it.
pub fn explain_scenario(scenario: &Scenario) -> policy::Explanation {
    let asked = report::measure::asked_demands_bps(scenario, &sim::HostModel::default().path);
    let mut times: Vec<u64> = scenario
        .traffic
        .iter()
        .flat_map(|t| [t.start_ns, t.stop_ns])
        .filter(|&t| t < scenario.duration_ns)
        .collect();
    times.sort_unstable();
    times.dedup();
    let phases: Vec<(u64, Vec<Vec<f64>>)> = times
        .into_iter()
        .map(|at| {
            let mut demands = vec![Vec::new(); scenario.policy.apps.len()];
            for (t, &bps) in scenario.traffic.iter().zip(&asked) {
                if t.start_ns <= at && at < t.stop_ns {
                    let flows = t.kind.flows() as usize;
                    demands[t.app.index()].extend(std::iter::repeat_n(bps, flows));
                }
            }
            (at, demands)
        })
        .filter(|(_, demands)| demands.iter().any(|d| !d.is_empty()))
        .collect();
    policy::explain_phases(&scenario.policy, &phases)
}
