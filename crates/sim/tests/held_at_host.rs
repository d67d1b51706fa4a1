//! A flow held at its own host's link is not held elsewhere (issue 25, defect
//! 9): a bulk flow that starts beside a flood on its host's link gets its cap
//! within an interval, under `picnic` and `picnic-wc` alike. Read as held
//! elsewhere, it was offered only the rate it was measured at in its first
//! epoch, the flood the rest of the link, and it crept up from 141 to 238 of
//! its 275 Mbit/s over 1.5 s.

use policy::{AnyScenario, HostsScenario, parse_any_scenario};
use sim::{HostModel, run_hosts};
use std::path::Path;

const SCENARIO: &str = r#"
name: held-at-host
duration: 2s
interval: 250ms
enforcers: [picnic, picnic-wc]
hosts:
  - name: a
    policy:
      link: { rate: 500Mbit }
      tenants:
        - { name: bulk, min_rate: 91Mbit, max_rate: 275Mbit }
        - { name: flood, min_rate: 29Mbit, max_rate: 375Mbit }
  - name: b
    policy:
      link: { rate: 1000Mbit }
      tenants: [ { name: sink }, { name: sink2 } ]
traffic:
  - { name: flood, tenant: flood, to: sink2, kind: udp, rate: 2610Mbit, size: 1400B }
  - { name: bulk, tenant: bulk, to: sink, kind: bulk, start: 500ms }
"#;

/// Each flow's distance from the ideal once the bulk flow has run an interval.
const TOLERANCE: f64 = 0.02;

fn scenario() -> HostsScenario {
    match parse_any_scenario(
        SCENARIO,
        "held-at-host.yaml",
        Path::new("."),
        &["picnic", "picnic-wc"],
    ) {
        Ok(AnyScenario::Hosts(s)) => s,
        other => panic!("a valid scenario across hosts: {other:?}"),
    }
}

#[test]
fn a_flow_behind_a_flood_on_its_own_link_gets_its_cap_within_an_interval() {
    let s = scenario();
    let model = HostModel::default();
    let interval_s = s.interval_ns as f64 / 1e9;
    for enforcer in ["picnic", "picnic-wc"] {
        let record = run_hosts(&s, enforcer, model, &mut |_| {}).expect("builds");
        let (_, rows) = report::summarise_hosts(&s, &record, &model.path);
        // The bulk flow starts at 0.5 s, the end of interval 1; interval 2 holds
        // its start-up.
        for k in 3..record.delivered_bytes[0].len() {
            let time_s = (k as f64 + 1.0) * interval_s;
            for (f, t) in s.traffic.iter().enumerate() {
                let ideal = rows
                    .iter()
                    .find(|r| r.flow == t.traffic.name && (r.time_s - time_s).abs() < 1e-9)
                    .expect("every flow runs")
                    .ideal_bps;
                let got = record.delivered_bytes[f][k] as f64 * 8.0 / interval_s;
                assert!(
                    (got - ideal).abs() <= TOLERANCE * ideal,
                    "{enforcer}: {} at {time_s} s delivered {got:.4e} bit/s, ideal {ideal:.4e}",
                    t.traffic.name
                );
            }
        }
    }
}
