//! An open-loop rpc far beyond its cap, in the simulator of one host and across
//! hosts: its connections' refused responses wait in order behind the first, so
//! the simulator's work (the refusals it counts as drops) grows with the run's
//! length, not its square. Each response retrying on its own, 10 s of 2000
//! requests/s beside a 12 Mbit/s cap were refused 731,561,465 times and took 73 s
//! of CPU; 5 s, 14 s.

mod common;

use common::checked_run;
use policy::limits::{SENDER_RETRIES_PER_S, sim_packets_estimate};
use report::summarize;

const CONNECTIONS: u32 = 4;

fn over_cap(seconds: u32) -> String {
    format!(
        "policy:
  link: {{ rate: 1Gbit }}
  tenants:
    - name: s
      apps:
        - {{ name: kv, max_rate: 12Mbit, match: {{ proto: tcp, ports: [7000] }} }}
        - {{ name: rest }}
    - {{ name: b }}
duration: {seconds}s
interval: 500ms
traffic:
  - {{ tenant: s, app: kv, kind: rpc, rate: 2000, response: 4KB, concurrency: {CONNECTIONS} }}
  - {{ tenant: b, kind: bulk }}
"
    )
}

#[test]
fn refused_responses_wait_behind_their_connections_first() {
    for enforcer in ["htb", "wf2q"] {
        let seconds = 6;
        let s = summarize(&checked_run(&over_cap(seconds), enforcer));
        let server = s.tenants.iter().find(|t| t.name == "s").unwrap();
        // One retry per connection per retry period at most, and each response
        // refused once more when it first comes.
        let bound = f64::from(CONNECTIONS) * SENDER_RETRIES_PER_S * f64::from(seconds)
            + 2000.0 * f64::from(seconds);
        assert!(
            (server.drops as f64) <= bound,
            "{enforcer}: {} refusals, bound {bound}",
            server.drops
        );
        assert!(
            server.throughput_bps <= 12e6 * 1.02,
            "{enforcer}: {} bit/s beyond its 12 Mbit/s cap",
            server.throughput_bps
        );
        assert!(
            server.drops > 0,
            "{enforcer}: the cap refuses responses here"
        );
    }
}

#[test]
fn across_hosts_refused_responses_wait_behind_their_connections_first() {
    let seconds = 6;
    let text = format!(
        "name: across
duration: {seconds}s
interval: 500ms
hosts:
  - name: h1
    policy:
      link: {{ rate: 1Gbit }}
      tenants:
        - {{ name: s, max_rate: 12Mbit }}
  - name: h2
    policy: {{ link: {{ rate: 1Gbit }}, tenants: [ {{ name: c }} ] }}
traffic:
  - {{ tenant: s, to: c, kind: rpc, rate: 2000, response: 4KB, concurrency: {CONNECTIONS} }}
"
    );
    let policy::AnyScenario::Hosts(scenario) = policy::parse_any_scenario(
        &text,
        "s.yaml",
        std::path::Path::new("."),
        &sched::registry::names(),
    )
    .unwrap() else {
        panic!("a scenario across hosts")
    };
    // The shapers hold the capped tenant's responses at the run's end: they are
    // drained in virtual time past it. Drained at a time past every clock, `htb`
    // took its next event's time beyond `u64` and never finished.
    for enforcer in ["wheel", "htb", "valve", "wf2q"] {
        let model = sim::HostModel::default();
        let record = sim::run_hosts(&scenario, enforcer, model, &mut |_| {}).unwrap();
        let refusals = record.refused_bytes[0] / 4096;
        let bound = u64::from(CONNECTIONS) * SENDER_RETRIES_PER_S as u64 * seconds + 2000 * seconds;
        assert!(refusals > 0, "{enforcer}: the cap refuses responses here");
        assert!(
            refusals <= bound,
            "{enforcer}: {refusals} refusals, bound {bound}"
        );
        assert!(
            record.queued_bytes[0] > 0,
            "{enforcer}: the cap holds responses at the end"
        );
        let (summary, _) = report::summarise_hosts(&scenario, &record, &model.path);
        let conservation = summary
            .checks
            .iter()
            .find(|c| c.name == "conservation")
            .expect("a conservation check");
        assert!(conservation.ok, "{enforcer}: {}", conservation.detail);
    }
}

#[test]
fn the_work_bound_counts_an_rpc_beyond_its_cap_linearly_in_time() {
    let estimate = |seconds| {
        let scenario = policy::parse_scenario(
            &over_cap(seconds),
            "s.yaml",
            std::path::Path::new("."),
            &sched::registry::names(),
        )
        .unwrap();
        sim_packets_estimate(&scenario)
    };
    let (short, long) = (estimate(10), estimate(100));
    assert!(
        (long / short - 10.0).abs() < 1e-9,
        "10 s: {short}, 100 s: {long}"
    );
}
