//! Which enforcers a command runs: those it names (`all` for every one), else the
//! scenario's (or a default), less or refusing those its world cannot run. The one
//! place outside the registries that chooses enforcers by name.

use sched::registry::World;

use crate::Failure;

/// Whether `name` runs in the kernel (the policy compiled to `tc`), so that the
/// lab runs it and nothing of nicsched's can simulate it.
pub fn is_lab_only(name: &str) -> bool {
    sched::registry::in_kernel(name)
}

/// The command, and so the world, enforcers are chosen for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum For {
    /// `check` of a one-host policy or scenario: the one-host default when none is named.
    Check,
    /// `check` of a scenario across hosts.
    CheckHosts,
    /// `sim` of one host: a scenario's kernel enforcers are left out, saying so unless quiet.
    Sim { quiet: bool },
    /// `sim` across hosts.
    SimHosts,
    /// `sweep`: as `sim`, silently.
    Sweep,
    /// `lab` of one host: the names as given.
    Lab,
    /// `lab` across hosts: the names as given.
    LabHosts,
}

impl For {
    /// The world whose default enforcers run when neither the command line nor
    /// the scenario names one.
    fn world(self) -> World {
        match self {
            For::Check | For::Sim { .. } | For::Sweep | For::Lab => World::OneHost,
            For::CheckHosts | For::SimHosts | For::LabHosts => World::Hosts,
        }
    }
}

/// The enforcers `asked` on the command line (`all` expanded where the command
/// takes it), else the scenario's `listed` (the registry's defaults for the
/// command's world where it lists none), for the command `command`; a kernel
/// enforcer a simulating command was asked for is refused.
pub fn chosen(
    asked: &[String],
    listed: &[String],
    command: For,
    file: &std::path::Path,
) -> Result<Vec<String>, Failure> {
    let simulated = matches!(command, For::Sim { .. } | For::SimHosts | For::Sweep);
    let asked = match command {
        For::Lab | For::LabHosts => asked.to_vec(),
        For::Check => expand_all(asked, true),
        _ => expand_all(asked, false),
    };
    let listed: Vec<String> = match (listed.is_empty(), command) {
        (_, For::Check) | (true, _) => sched::registry::defaults(command.world())
            .into_iter()
            .map(str::to_string)
            .collect(),
        (false, _) => listed.to_vec(),
    };
    let chosen: Vec<String> = match (asked.is_empty(), command) {
        (false, _) => asked,
        (true, For::Sim { .. } | For::Sweep) => {
            // A scenario written for the lab may list the kernel's HTB; the others still run.
            let (lab_only, simulated): (Vec<String>, Vec<String>) =
                listed.into_iter().partition(|name| is_lab_only(name));
            if !lab_only.is_empty() && command == (For::Sim { quiet: false }) {
                eprintln!(
                    "note: {} runs only in the lab (nicsched lab); simulating the others",
                    quoted(&lab_only)
                );
            }
            if simulated.is_empty() {
                let why = match command {
                    For::Sweep => String::new(),
                    _ => format!(" ({} runs only in the lab)", quoted(&lab_only)),
                };
                return Err(Failure::input(format!(
                    "{}: no enforcer to simulate{why}; name one with --enforcer",
                    file.display()
                )));
            }
            simulated
        }
        (true, _) => listed,
    };
    if let Some(name) = chosen.iter().find(|name| simulated && is_lab_only(name)) {
        return Err(Failure::input(match command {
            For::SimHosts => format!("enforcer `{name}` runs only in the lab (nicsched lab)"),
            _ => format!(
                "enforcer `{name}` is the kernel's own HTB and runs only in the lab (nicsched lab)"
            ),
        }));
    }
    Ok(chosen)
}

/// `a`, or `a`, `b`: names as messages quote them.
fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `-e all` names every enforcer of the registry, less the kernel's where the
/// command cannot run it (`with_kernel`).
fn expand_all(enforcers: &[String], with_kernel: bool) -> Vec<String> {
    if !enforcers.iter().any(|name| name == "all") {
        return enforcers.to_vec();
    }
    sched::ENFORCERS
        .iter()
        .filter(|e| with_kernel || e.is_built())
        .map(|e| e.name.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| name.to_string()).collect()
    }

    fn defaults(world: World) -> Vec<String> {
        names(&sched::registry::defaults(world))
    }

    #[test]
    fn a_scenario_naming_none_runs_the_registrys_defaults_for_its_world() {
        let file = Path::new("s.yaml");
        for command in [For::Sim { quiet: true }, For::Sweep, For::Lab, For::Check] {
            let chosen = chosen(&[], &[], command, file).unwrap();
            assert_eq!(chosen, defaults(World::OneHost));
        }
        for command in [For::SimHosts, For::LabHosts, For::CheckHosts] {
            let chosen = chosen(&[], &[], command, file).unwrap();
            assert_eq!(chosen, defaults(World::Hosts));
        }
    }

    #[test]
    fn the_command_line_then_the_scenario_choose_before_the_defaults() {
        let file = Path::new("s.yaml");
        let listed = names(&["wf2q", "valve"]);
        let sim = For::Sim { quiet: true };
        assert_eq!(chosen(&[], &listed, sim, file).unwrap(), listed);
        let asked = names(&["htb"]);
        assert_eq!(chosen(&asked, &listed, sim, file).unwrap(), asked);
        // `check` judges what it is asked, not what a scenario lists.
        let check = chosen(&[], &listed, For::Check, file).unwrap();
        assert_eq!(check, defaults(World::OneHost));
    }

    #[test]
    fn the_kernels_enforcers_are_left_out_or_refused_where_nothing_simulates_them() {
        let file = Path::new("s.yaml");
        let kernel: Vec<String> = sched::ENFORCERS
            .iter()
            .filter(|e| !e.is_built())
            .map(|e| e.name.to_string())
            .collect();
        assert!(!kernel.is_empty());
        let mut listed = kernel.clone();
        listed.push("wf2q".into());
        let sim = For::Sim { quiet: true };
        assert_eq!(chosen(&[], &listed, sim, file).unwrap(), names(&["wf2q"]));
        assert!(chosen(&[], &kernel, sim, file).is_err());
        assert!(chosen(&kernel, &[], sim, file).is_err());
        assert_eq!(chosen(&kernel, &[], For::Lab, file).unwrap(), kernel);
        let all = chosen(&names(&["all"]), &[], sim, file).unwrap();
        assert!(all.iter().all(|name| !is_lab_only(name)));
        let checked = chosen(&names(&["all"]), &[], For::Check, file).unwrap();
        assert_eq!(checked.len(), sched::ENFORCERS.len());
    }
}
