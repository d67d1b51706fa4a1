//! The shipped SENIC, FlowValve and PicNIC scenarios and the verdicts they must give.

use policy::{load_scenario, parse_scenario};
use report::{Summary, summarize};
use std::path::{Path, PathBuf};

fn shipped(file: &str) -> policy::Scenario {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(file);
    load_scenario(&path, &sched::registry::names()).expect("shipped scenarios are valid")
}

fn simulate(scenario: &policy::Scenario, enforcer: &str) -> Summary {
    let record = sim::run(scenario, enforcer, sim::HostModel::default(), &mut |_| {})
        .expect("enforcer builds");
    summarize(&record)
}

fn within(got: f64, want: f64, tolerance: f64) -> bool {
    (got / want - 1.0).abs() <= tolerance
}

#[test]
fn senic_fig4_holds_strict_limits_on_an_idle_link() {
    let scenario = shipped("senic/fig4.yaml");
    for enforcer in ["wf2q", "valve", "htb", "wheel"] {
        let s = simulate(&scenario, enforcer);
        assert!(
            within(s.tenants[0].throughput_bps, 4e9, 0.001),
            "{enforcer}: {:?}",
            s.tenants[0]
        );
        assert!(
            within(s.tenants[1].throughput_bps, 2e9, 0.001),
            "{enforcer}: {:?}",
            s.tenants[1]
        );
        assert!(
            within(s.utilization, 0.6, 0.002),
            "{enforcer}: link idle 40%"
        );
        // Excess is refused against the class that offered it.
        assert!(s.tenants.iter().all(|t| t.drops > 0));
    }
}

#[test]
fn senic_oversubscribed_limits_fall_back_to_proportional_shares() {
    let s = simulate(&shipped("senic/oversubscribed.yaml"), "wf2q");
    for (tenant, want) in s.tenants.iter().zip([5e9, 10e9 / 3.0, 10e9 / 6.0]) {
        assert!(within(tenant.throughput_bps, want, 0.01), "{tenant:?}");
    }
}

#[test]
fn senic_table3_classes_leave_at_their_rate_and_evenly() {
    for (file, gap_us) in [
        ("senic/table3-n1-10Mbit.yaml", 1200.0),
        ("senic/table3-n3-1Gbit.yaml", 12.0),
    ] {
        let s = simulate(&shipped(file), "wf2q");
        // One MTU at 10 Gbit/s.
        let mtu_time_us = 1.2;
        for (traffic, pacing) in &s.pacing {
            assert!(
                within(pacing.mean_gap_us, gap_us, 0.001),
                "{file} {traffic}: {pacing:?}"
            );
            assert!(
                pacing.std_gap_us_max < mtu_time_us,
                "{file} {traffic}: {pacing:?}"
            );
        }
    }
}

#[test]
fn flowvalve_policy_meets_the_ideal_and_the_guarantee() {
    let scenario = shipped("flowvalve/example.yaml");
    for enforcer in ["valve", "htb"] {
        let s = simulate(&scenario, enforcer);
        assert!(
            s.fairness.rel_error_mean <= 0.02,
            "{enforcer}: {:?}",
            s.fairness
        );
        let vm1 = &s.tenants[1];
        let ml = vm1.apps.iter().find(|a| a.name == "ml").unwrap();
        let kvs = vm1.apps.iter().find(|a| a.name == "kvs").unwrap();
        assert!(
            ml.throughput_bps >= 2e9 * 0.99,
            "{enforcer}: ML guaranteed 2 Gbit/s: {ml:?}"
        );
        assert!(
            within(kvs.throughput_bps, kvs.ideal_bps, 0.02),
            "{enforcer}: {kvs:?}"
        );
    }
    let borrowing = shipped("flowvalve/borrowing.yaml");
    for enforcer in ["valve", "htb"] {
        let record =
            sim::run(&borrowing, enforcer, sim::HostModel::default(), &mut |_| {}).unwrap();
        let ml = record.classes.iter().position(|c| c.app == "ml").unwrap();
        // Between 1 s and 2 s KVS is idle and ML takes VM1's whole 3 Gbit/s.
        for interval in record
            .intervals
            .iter()
            .filter(|i| i.steady && i.start_ns >= 1_100_000_000 && i.end_ns <= 2_000_000_000)
        {
            let bps = interval.class_bytes[ml] as f64 * 8e9
                / (interval.end_ns - interval.start_ns) as f64;
            assert!(
                within(bps, 3e9, 0.02),
                "{enforcer}: ML borrows KVS's share: {bps}"
            );
        }
    }
}

#[test]
fn picnic_flood_is_refused_against_itself_only() {
    let scenario = shipped("picnic/accounting.yaml");
    for enforcer in ["tonic", "wf2q", "valve", "htb"] {
        let s = simulate(&scenario, enforcer);
        let (flood, tcp) = (&s.tenants[0], &s.tenants[1]);
        assert!(flood.drops > 0, "{enforcer}");
        assert_eq!(tcp.drops, 0, "{enforcer}: the neighbour is never refused");
        assert!(
            tcp.throughput_bps >= tcp.ideal_bps * 0.99,
            "{enforcer}: {tcp:?}"
        );
    }
}

const ENFORCERS_UNDER_TEST: [&str; 2] = ["valve", "htb"];

/// Policies nobody shipped: random weights, caps, priorities and guarantees, every
/// class backlogged. `valve` and `htb` express the whole policy.
#[test]
fn unseen_policies_stay_within_two_percent_of_the_ideal() {
    let cases = [
        "tenants:\n    - { name: a, weight: 5 }\n    - { name: b, weight: 1, max_rate: 1Gbit }\n    - { name: c, weight: 2, min_rate: 4Gbit }\n",
        "tenants:\n    - { name: a, priority: 0, max_rate: 3Gbit }\n    - { name: b, weight: 3 }\n    - { name: c, weight: 1 }\n",
        "tenants:\n    - name: a\n      weight: 2\n      apps:\n        - { name: x, priority: 0, max_rate: 2Gbit, match: { ports: [5001] } }\n        - { name: y, weight: 3, match: { ports: [5002] } }\n        - { name: z, weight: 1, min_rate: 1Gbit, match: { ports: [5003] } }\n    - { name: b, weight: 1, max_rate: 5Gbit }\n",
    ];
    for (k, tenants) in cases.iter().enumerate() {
        let mut text = format!(
            "policy:\n  link: {{ rate: 10Gbit }}\n  {tenants}duration: 1s\ninterval: 100ms\ntraffic:\n"
        );
        let policy_text = format!(
            "link: {{ rate: 10Gbit }}\n{}",
            tenants.replace("\n  ", "\n").trim_start_matches("  ")
        );
        let policy = policy::parse_policy(&policy_text, "unseen.yaml").unwrap();
        for app in &policy.apps {
            if app.implicit && policy.tenant(app.tenant).apps.len() > 1 {
                continue;
            }
            let tenant = &policy.tenant(app.tenant).name;
            text += &format!(
                "  - {{ tenant: {tenant}, app: {}, kind: bulk, flows: 3 }}\n",
                app.name
            );
        }
        let scenario = parse_scenario(
            &text,
            "unseen.yaml",
            Path::new("."),
            &sched::registry::names(),
        )
        .unwrap();
        for enforcer in ENFORCERS_UNDER_TEST {
            let s = simulate(&scenario, enforcer);
            assert!(
                s.fairness.rel_error_mean <= 0.02,
                "case {k} {enforcer}: {:?}\n{text}",
                s.fairness
            );
            // Guarantees hold whenever the guaranteed class is backlogged.
            for app in scenario
                .policy
                .apps
                .iter()
                .filter(|a| a.min_rate_bps.is_some())
            {
                let tenant = &s.tenants[app.tenant.index()];
                let got = tenant.apps.iter().find(|a| a.name == app.name).unwrap();
                let min = app.min_rate_bps.unwrap() as f64;
                assert!(
                    got.throughput_bps >= 0.99 * min,
                    "case {k} {enforcer}: {}/{} below its guarantee",
                    tenant.name,
                    app.name
                );
            }
        }
    }
}

/// On a 1 Gbit/s link one 64 KiB TSO send takes half a millisecond: token trees
/// must measure and pay in units that large without losing the weights.
#[test]
fn token_trees_keep_weights_on_a_slow_link_with_tso_senders() {
    let text = "
policy:
  link: { rate: 1Gbit, queues: 8 }
  tenants:
    - { name: a, weight: 2 }
    - { name: b, weight: 5 }
    - { name: c, weight: 1 }
duration: 2s
interval: 250ms
traffic:
  - { tenant: a, kind: bulk, flows: 3 }
  - { tenant: b, kind: bulk, flows: 40 }
  - { tenant: c, kind: bulk, flows: 4 }
";
    let scenario =
        parse_scenario(text, "slow.yaml", Path::new("."), &sched::registry::names()).unwrap();
    for enforcer in ["valve", "htb", "wf2q"] {
        let s = simulate(&scenario, enforcer);
        assert!(
            s.fairness.rel_error_mean <= 0.02,
            "{enforcer}: {:?}",
            s.fairness
        );
    }
}
