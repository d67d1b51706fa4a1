//! What `check`, `explain`, `compare`, `sim` and `lab` print: serde types whose
//! `Display` is the terminal text and whose serialisation is the `--json`
//! document, so the two never disagree. Every document is one JSON object on
//! stdout with `schema_version`; docs/json.md describes each field and
//! docs/schema/ holds a JSON Schema per command. Fields are only ever added:
//! a change that removes or renames one raises `SCHEMA_VERSION`.

use serde::Serialize;
use std::fmt;

/// Raised only by a change that removes, renames or retypes a field.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Serialize)]
struct Document<'a, T: Serialize> {
    schema_version: u32,
    #[serde(flatten)]
    body: &'a T,
}

/// Prints `body` as the command's JSON document, `schema_version` first.
pub fn print_json(body: &impl Serialize) {
    let document = Document {
        schema_version: SCHEMA_VERSION,
        body,
    };
    // Every figure is finite and every key a string, so it serialises.
    println!(
        "{}",
        serde_json::to_string_pretty(&document).expect("output types serialise")
    );
}

/// `nicsched check`: the file and how each enforcer renders its policy.
#[derive(Serialize)]
pub struct Checked {
    pub file: String,
    pub across_hosts: bool,
    #[serde(flatten)]
    pub subject: CheckedSubject,
    pub enforcers: Vec<CheckedEnforcer>,
}

#[derive(Serialize)]
#[serde(untagged)]
pub enum CheckedSubject {
    OneHost {
        tenants: usize,
        apps: usize,
        link_rate_bps: u64,
        queues: u16,
    },
    Hosts {
        hosts: usize,
        vms: usize,
        traffic: usize,
    },
}

#[derive(Serialize)]
pub struct CheckedEnforcer {
    pub name: String,
    /// What it expresses of a one-host policy; across hosts, only that it builds
    /// on every host.
    #[serde(flatten)]
    pub approximation: Option<sched::Approximation>,
    /// What `exact` and `approximate` mean in numbers; one host only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bounds: Option<Vec<sched::Bound>>,
}

impl fmt::Display for Checked {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.subject {
            CheckedSubject::Hosts {
                hosts,
                vms,
                traffic,
            } => {
                let names: Vec<&str> = self.enforcers.iter().map(|e| e.name.as_str()).collect();
                writeln!(
                    out,
                    "{}: {hosts} hosts, {vms} VMs, {traffic} VM-to-VM traffic; enforcers {} build on every host (nicsched explain prints the ideal)",
                    self.file,
                    names.join(", ")
                )
            }
            CheckedSubject::OneHost {
                tenants,
                apps,
                link_rate_bps,
                queues,
            } => {
                writeln!(
                    out,
                    "{}: ok: {tenants} tenant(s), {apps} app(s), link {} with {queues} Tx queues",
                    self.file,
                    policy::format_rate(*link_rate_bps as f64),
                )?;
                for enforcer in &self.enforcers {
                    writeln!(out, "\nenforcer {}:", enforcer.name)?;
                    let Some(approximation) = &enforcer.approximation else {
                        continue;
                    };
                    for line in &approximation.exact {
                        writeln!(out, "  exact:       {line}")?;
                    }
                    for line in &approximation.approximate {
                        writeln!(out, "  approximate: {line}")?;
                    }
                    for line in &approximation.ignored {
                        writeln!(out, "  not enforced: {line}")?;
                    }
                    if let Some(error) = approximation.share_error_max {
                        // Said under the condition of the bound that holds it: TONIC's
                        // also asks for a flow per queue of each pool.
                        let condition = enforcer
                            .bounds
                            .iter()
                            .flatten()
                            .find(|b| b.holds_share_error())
                            .map_or(sched::Condition::EveryTenantBacklogged, |b| b.condition);
                        writeln!(
                            out,
                            "  worst-case tenant share error with {}: {:.2}%",
                            condition.words(),
                            error * 100.0
                        )?;
                    }
                    for bound in enforcer.bounds.iter().flatten() {
                        writeln!(out, "  bound:       {bound}")?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// `nicsched explain`: the file and its explanation, one host or across hosts.
#[derive(Serialize)]
pub struct Explained {
    pub file: String,
    pub across_hosts: bool,
    #[serde(flatten)]
    pub explanation: Explanation,
}

#[derive(Serialize)]
#[serde(untagged)]
pub enum Explanation {
    OneHost(policy::Explanation),
    Hosts(policy::HostsExplanation),
}

impl fmt::Display for Explained {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.explanation {
            Explanation::OneHost(explanation) => explanation.fmt(out),
            Explanation::Hosts(explanation) => explanation.fmt(out),
        }
    }
}

/// `nicsched compare`: the runs read, and with `--baseline`, each against its
/// baseline run.
#[derive(Serialize)]
pub struct Compared<'a> {
    pub runs: &'a [report::Summary],
    pub baseline: Option<&'a report::BaselineComparison>,
}

/// `nicsched sim` and `nicsched lab`: where the results went and every run's
/// summary.json.
#[derive(Serialize)]
pub struct Ran<'a, S: Serialize> {
    pub results: String,
    /// The runs' report.html.
    pub report: String,
    pub across_hosts: bool,
    /// Each enforcer's summary.json, in the order they ran.
    pub runs: &'a [S],
    /// `ENFORCER/CHECK` of every self-check that failed.
    pub failed_checks: &'a [String],
}
