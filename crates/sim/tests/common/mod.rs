//! What several of the simulator's test files run: a scenario's text under an
//! enforcer with every self-check required to pass, FairNIC's Fig. 10 shape, and
//! the names and parsing of generated scenarios across hosts.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

use report::RunRecord;
use std::path::Path;

/// Runs `text` under `enforcer`; every self-check must pass.
pub fn checked_run(text: &str, enforcer: &str) -> RunRecord {
    let scenario =
        policy::parse_scenario(text, "s.yaml", Path::new("."), &sched::registry::names()).unwrap();
    let record = sim::run(&scenario, enforcer, sim::HostModel::default(), &mut |_| {}).unwrap();
    let failed: Vec<_> = record.failed_checks().collect();
    assert!(failed.is_empty(), "{failed:?}");
    record
}

/// A well-behaved tenant `victim` beside `antagonist` of equal weight on two
/// engine cores, under `cpu`; the link has room for both, the cores do not.
pub fn beside(cpu: &str, packet_cost: &str, antagonist: &str) -> String {
    format!(
        "policy:
  link: {{ rate: 10Gbit }}
  engine: {{ cores: 2, cpu: {cpu}, packet_cost: {packet_cost} }}
  tenants: [{{ name: victim }}, {{ name: antagonist }}]
duration: 2s
interval: 250ms
traffic:
  - {{ tenant: victim, kind: udp, rate: 400Mbit, size: 1000B }}
  - {{ tenant: antagonist, {antagonist} }}
"
    )
}

/// VM `v` of host `h` in a generated scenario across hosts.
pub fn vm_name(h: usize, v: usize) -> String {
    format!("h{h}v{v}")
}

/// A generated scenario across hosts, `text`, for `enforcers`.
pub fn parse_hosts(text: &str, enforcers: &[&str]) -> policy::HostsScenario {
    match policy::parse_any_scenario(text, "generated.yaml", Path::new("."), enforcers) {
        Ok(policy::AnyScenario::Hosts(s)) => s,
        other => panic!("a valid scenario across hosts:\n{text}\n{other:?}"),
    }
}
