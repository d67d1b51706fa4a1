//! Same scenario, same seed: the same bytes in summary.json.

use policy::parse_scenario;
use std::path::Path;

const SCENARIO: &str = "
policy:
  link: { rate: 10Gbit, queues: 4 }
  tenants:
    - name: a
      cores: [0, 1]
    - name: b
      cores: [2, 3]
      apps:
        - name: rpc
          priority: 0
          match: { proto: tcp, ports: [5001] }
duration: 300ms
interval: 50ms
traffic:
  - tenant: a
    kind: bulk
    flows: 5
  - tenant: b
    kind: poisson
    rate: 2Gbit
    flows: 3
  - tenant: b
    app: rpc
    kind: rpc
    response: 4KiB
    concurrency: 2
    start: 100ms
";

fn summary_json(seed: u64, enforcer: &str) -> String {
    let mut scenario = parse_scenario(
        SCENARIO,
        "s.yaml",
        Path::new("."),
        &sched::registry::names(),
    )
    .unwrap();
    scenario.seed = seed;
    let record = sim::run(&scenario, enforcer, sim::HostModel::default(), &mut |_| {}).unwrap();
    report::summarize(&record).to_json()
}

#[test]
fn same_seed_gives_byte_identical_summaries() {
    for enforcer in sched::registry::built().map(|e| e.name) {
        assert_eq!(
            summary_json(7, enforcer),
            summary_json(7, enforcer),
            "{enforcer}"
        );
    }
}

#[test]
fn the_seed_changes_random_arrivals() {
    assert_ne!(summary_json(1, "fifo"), summary_json(2, "fifo"));
}
