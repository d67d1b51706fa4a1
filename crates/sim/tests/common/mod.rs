//! What several of the simulator's test files run: a scenario's text under an
//! enforcer with every self-check required to pass, and FairNIC's Fig. 10 shape.

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
