//! A flow held at its own host's link is not held elsewhere (issue 25, defect
//! 9): a bulk flow that starts beside a flood on its host's link gets its cap
//! within an interval, under `picnic` and `picnic-wc` alike. Read as held
//! elsewhere, it was offered only the rate it was measured at in its first
//! epoch, the flood the rest of the link, and it crept up from 141 to 238 of
//! its 275 Mbit/s over 1.5 s.
//!
//! And a flow held by its own demand is not held at its host: a UDP flow below
//! its part of its sender's envelope, waiting behind its neighbour's frames,
//! leaves the rest of the envelope to that neighbour under `picnic-wc`.

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

fn parse(text: &str) -> HostsScenario {
    match parse_any_scenario(text, "held.yaml", Path::new("."), &["picnic", "picnic-wc"]) {
        Ok(AnyScenario::Hosts(s)) => s,
        other => panic!("a valid scenario across hosts: {other:?}"),
    }
}

/// Every flow of `s` under each of `enforcers`, from interval `from` on, within
/// `tolerance` of its ideal.
fn every_flow_near_its_ideal(s: &HostsScenario, enforcers: &[&str], from: usize, tolerance: f64) {
    let model = HostModel::default();
    let interval_s = s.interval_ns as f64 / 1e9;
    for enforcer in enforcers {
        let record = run_hosts(s, enforcer, model, &mut |_| {}).expect("builds");
        let (_, rows) = report::summarise_hosts(s, &record, &model.path);
        for k in from..record.delivered_bytes[0].len() {
            let time_s = (k as f64 + 1.0) * interval_s;
            for (f, t) in s.traffic.iter().enumerate() {
                let ideal = rows
                    .iter()
                    .find(|r| r.flow == t.traffic.name && (r.time_s - time_s).abs() < 1e-9)
                    .expect("every flow runs")
                    .ideal_bps;
                let got = record.delivered_bytes[f][k] as f64 * 8.0 / interval_s;
                assert!(
                    (got - ideal).abs() <= tolerance * ideal,
                    "{enforcer}: {} at {time_s} s delivered {got:.4e} bit/s, ideal {ideal:.4e}",
                    t.traffic.name
                );
            }
        }
    }
}

#[test]
fn a_flow_behind_a_flood_on_its_own_link_gets_its_cap_within_an_interval() {
    // The bulk flow starts at 0.5 s, the end of interval 1; interval 2 holds
    // its start-up.
    every_flow_near_its_ideal(&parse(SCENARIO), &["picnic", "picnic-wc"], 3, TOLERANCE);
}

/// A generated case (`hosts_generated`, not CI's seed): the bulk flow kept half
/// of h1v0's 440 Mbit/s, 220 against 363.5, as the UDP flow always had a
/// datagram waiting behind its 64 KiB frames and read as held by its host.
const BESIDE_ITS_OWN_UDP: &str = r#"
name: beside-its-own-udp
duration: 4s
interval: 250ms
hosts:
  - name: host0
    policy:
      link: { rate: 500Mbit }
      tenants:
        - { name: h0v0, min_rate: 48Mbit, max_rate: 390Mbit, ingress: { min_rate: 59Mbit, max_rate: 255Mbit } }
        - { name: h0v1, min_rate: 52Mbit, max_rate: 335Mbit, ingress: { min_rate: 80Mbit, max_rate: 435Mbit } }
  - name: host1
    policy:
      link: { rate: 500Mbit }
      tenants:
        - { name: h1v0, min_rate: 177Mbit, max_rate: 440Mbit, ingress: { min_rate: 119Mbit, max_rate: 270Mbit } }
traffic:
  - { name: bulk, tenant: h1v0, to: h0v1, kind: bulk }
  - { name: udp, tenant: h1v0, to: h0v0, kind: udp, rate: 75Mbit, size: 1400B, start: 2s }
"#;

#[test]
fn a_udp_flow_below_its_part_leaves_the_rest_of_its_senders_envelope() {
    // The UDP flow starts at 2 s, the end of interval 7; interval 8 holds the
    // feedback's convergence. The generated scenarios' tolerance.
    every_flow_near_its_ideal(&parse(BESIDE_ITS_OWN_UDP), &["picnic-wc"], 9, 0.05);
}
