//! Every enforcer of the registry across hosts, on scenarios written as a user
//! would (docs/hosts.md): 2-3 hosts, 1-3 VMs each, caps far below and above
//! their shares, and every kind of traffic (bulk, udp, poisson, open- and
//! closed-loop rpc) between VMs of different hosts, some stopping before the end.
//! The oracles are the run's checks of its own measurement: conservation per flow
//! (what a shaper still holds at the end included), no host link above its rate,
//! and every udp or poisson traffic offered what it asked. A capped sender whose
//! responses were still held at the end once kept `htb`'s drain from finishing.

mod common;

use common::{parse_hosts, vm_name};
use policy::HostsScenario;
use proptest::prelude::*;
use sim::{HostModel, run_hosts};

/// A VM's weight and cap in Mbit/s.
type Vm = (u32, Option<u64>);
/// A VM as (host, vm) indices.
type At = (usize, usize);
/// A traffic's sender and receiver, its kind and when it stops (ms).
type Flow = (At, At, String, Option<u64>);

#[derive(Clone, Debug)]
struct Shape {
    /// Per host: link rate in Mbit/s, and its VMs.
    hosts: Vec<(u64, Vec<Vm>)>,
    traffic: Vec<Flow>,
    duration_ms: u64,
}

fn kind() -> impl Strategy<Value = String> {
    prop_oneof![
        (1u32..=4).prop_map(|flows| format!("bulk, flows: {flows}")),
        (1u64..=3000, 64u32..=9000)
            .prop_map(|(mbit, size)| format!("udp, rate: {mbit}Mbit, size: {size}B")),
        (1u64..=800, 64u32..=1500)
            .prop_map(|(mbit, size)| format!("poisson, rate: {mbit}Mbit, size: {size}B")),
        (100u64..=20000, 64u32..=65536, 1u32..=8).prop_map(|(rate, response, c)| format!(
            "rpc, rate: {rate}, response: {response}B, concurrency: {c}"
        )),
        (64u32..=65536, 1u32..=16)
            .prop_map(|(response, c)| format!("rpc, response: {response}B, concurrency: {c}")),
    ]
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        prop::collection::vec(
            (
                prop::sample::select(vec![100u64, 500, 1000, 10000]),
                prop::collection::vec((1u32..=8, prop::option::weighted(0.5, 1u64..=20000)), 1..=3),
            ),
            2..=3,
        ),
        500u64..=3000,
    )
        .prop_flat_map(|(hosts, duration_ms)| {
            let vms: Vec<At> = hosts
                .iter()
                .enumerate()
                .flat_map(|(h, (_, vms))| (0..vms.len()).map(move |v| (h, v)))
                .collect();
            let pairs: Vec<(At, At)> = vms
                .iter()
                .flat_map(|&a| vms.iter().map(move |&b| (a, b)))
                .filter(|(a, b)| a.0 != b.0)
                .collect();
            let traffic = (
                prop::sample::select(pairs),
                kind(),
                prop::option::weighted(0.3, 100..duration_ms),
            )
                .prop_map(|((from, to), kind, stop)| (from, to, kind, stop));
            (
                Just(hosts),
                prop::collection::vec(traffic, 1..=5),
                Just(duration_ms),
            )
        })
        .prop_map(|(hosts, traffic, duration_ms)| Shape {
            hosts,
            traffic,
            duration_ms,
        })
}

/// The scenario as a user writes it.
fn yaml(shape: &Shape) -> String {
    let mut text = format!(
        "name: generated\nduration: {}ms\ninterval: 100ms\nhosts:\n",
        shape.duration_ms
    );
    for (h, (link, vms)) in shape.hosts.iter().enumerate() {
        text += &format!(
            "  - name: host{h}\n    policy:\n      link: {{ rate: {link}Mbit }}\n      tenants:\n"
        );
        for (v, (weight, cap)) in vms.iter().enumerate() {
            let cap = cap.map_or(String::new(), |c| format!(", max_rate: {c}Mbit"));
            text += &format!(
                "        - {{ name: {}, weight: {weight}{cap} }}\n",
                vm_name(h, v)
            );
        }
    }
    text += "traffic:\n";
    for (i, (from, to, kind, stop)) in shape.traffic.iter().enumerate() {
        let stop = stop.map_or(String::new(), |s| format!(", stop: {s}ms"));
        text += &format!(
            "  - {{ name: f{i}, tenant: {}, to: {}, kind: {kind}{stop} }}\n",
            vm_name(from.0, from.1),
            vm_name(to.0, to.1),
        );
    }
    text
}

fn parse(text: &str) -> HostsScenario {
    parse_hosts(text, &sched::registry::names())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn every_enforcer_keeps_the_runs_own_checks(shape in shape()) {
        let text = yaml(&shape);
        let s = parse(&text);
        let model = HostModel::default();
        for enforcer in sched::registry::names() {
            let record = match run_hosts(&s, enforcer, model, &mut |_| {}) {
                Ok(record) => record,
                // The lab's kernel qdisc, or a policy the enforcer refuses (`tonic`:
                // more VMs than Tx queues).
                Err(_) => {
                    prop_assert!(!["htb", "valve", "wf2q", "wheel", "picnic"].contains(&enforcer));
                    continue;
                }
            };
            let (summary, _) = report::summarise_hosts(&s, &record, &model.path);
            for check in &summary.checks {
                // `envelopes` judges the enforcer, not the measurement.
                prop_assert!(
                    check.ok || check.name == "envelopes",
                    "{text}{enforcer}: {}: {}",
                    check.name,
                    check.detail
                );
            }
        }
    }
}
