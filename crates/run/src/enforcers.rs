//! Which enforcers a command runs: those it names (`all` for every one), else the
//! scenario's (or a default), less or refusing those its world cannot run. The one
//! place outside the registries that chooses enforcers by name.

use crate::Failure;

/// The kernel's HTB compiled from the policy: there is no model of it to simulate.
pub const LAB_ONLY_ENFORCER: &str = lab::LINUX_HTB;

/// Whether `name` is the kernel's HTB, which the lab runs from `tc` rather than
/// building it from sched's registry.
pub fn is_lab_only(name: &str) -> bool {
    name == LAB_ONLY_ENFORCER
}

/// The command, and so the world, enforcers are chosen for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum For {
    /// `check` of a one-host policy or scenario: `tonic` when none is named.
    Check,
    /// `check` of a scenario across hosts.
    CheckHosts,
    /// `sim` of one host: a scenario's `linux-htb` is left out, saying so unless quiet.
    Sim { quiet: bool },
    /// `sim` across hosts.
    SimHosts,
    /// `sweep`: as `sim`, silently.
    Sweep,
    /// `lab`, one host or across hosts: the names as given.
    Lab,
}

/// The enforcers `asked` on the command line (`all` expanded where the command
/// takes it), else the scenario's `listed`, for the command `command`; a
/// lab-only enforcer a simulating command was asked for is refused.
pub fn chosen(
    asked: &[String],
    listed: &[String],
    command: For,
    file: &std::path::Path,
) -> Result<Vec<String>, Failure> {
    let simulated = matches!(command, For::Sim { .. } | For::SimHosts | For::Sweep);
    let asked = match command {
        For::Lab => asked.to_vec(),
        For::Check => expand_all(asked, true),
        _ => expand_all(asked, false),
    };
    let chosen: Vec<String> = match (asked.is_empty(), command) {
        (false, _) => asked,
        (true, For::Check) => vec!["tonic".to_string()],
        (true, For::Sim { .. } | For::Sweep) => {
            // A scenario written for the lab may list the kernel's HTB; the others still run.
            let (lab_only, simulated): (Vec<String>, Vec<String>) =
                listed.iter().cloned().partition(|name| is_lab_only(name));
            if !lab_only.is_empty() && command == (For::Sim { quiet: false }) {
                eprintln!(
                    "note: `{LAB_ONLY_ENFORCER}` runs only in the lab (nicsched lab); simulating the others"
                );
            }
            simulated
        }
        (true, _) => listed.to_vec(),
    };
    if matches!(command, For::Sim { .. } | For::Sweep) && chosen.is_empty() {
        let why = match command {
            For::Sweep => String::new(),
            _ => format!(" (`{LAB_ONLY_ENFORCER}` runs only in the lab)"),
        };
        return Err(Failure::input(format!(
            "{}: no enforcer to simulate{why}; name one with --enforcer",
            file.display()
        )));
    }
    if simulated && chosen.iter().any(|name| is_lab_only(name)) {
        return Err(Failure::input(match command {
            For::SimHosts => {
                format!("enforcer `{LAB_ONLY_ENFORCER}` runs only in the lab (nicsched lab)")
            }
            _ => format!(
                "enforcer `{LAB_ONLY_ENFORCER}` is the kernel's own HTB and runs only in the lab (nicsched lab)"
            ),
        }));
    }
    Ok(chosen)
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
