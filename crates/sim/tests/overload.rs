//! Generated scenarios under long overload, judged by the oracles every run must
//! satisfy: the ideal allocation (policy.md) and byte conservation. Bugs that a
//! hand-picked case of a few seconds never shows live here: a shared descriptor
//! pool once let one overloaded tenant take every descriptor after 2-4 s, and a
//! capped neighbour fell to a third of its cap for the rest of the run.
//!
//! Each case is 30 s of simulated time at 1 Gbit/s, 2 to 8 tenants with random
//! weights, caps, datagram sizes and bulk/UDP mixes, every tenant offered more than
//! its share. A failing case prints its scenario.

use policy::{Scenario, parse_scenario};
use proptest::prelude::*;
use report::{Interval, RunRecord};
use std::path::Path;

const LINK_BPS: f64 = 1e9;
/// Datagram sizes, small ones included: the descriptor count, not the bytes, is
/// what a flood exhausts.
const SIZES: [u32; 5] = [200, 512, 1000, 1200, 1472];

#[derive(Clone, Debug)]
struct TenantSpec {
    weight: u32,
    /// Cap as a share of the link, in percent; `None`: uncapped.
    cap_percent: Option<u32>,
    /// Datagram size index into SIZES, or bulk TCP with this many flows.
    load: Load,
}

#[derive(Clone, Copy, Debug)]
enum Load {
    Udp { size: usize, overload_percent: u32 },
    Bulk { flows: u32 },
}

fn write(tenants: &[TenantSpec], seed: u64) -> String {
    let mut text = String::from("policy:\n  link: { rate: 1Gbit, queues: 8 }\n  tenants:\n");
    for (i, t) in tenants.iter().enumerate() {
        text += &format!("    - {{ name: t{i}, weight: {}", t.weight);
        if let Some(cap) = t.cap_percent {
            text += &format!(", max_rate: {}Mbit", cap * 10);
        }
        text += " }\n";
    }
    text += &format!("duration: 30s\ninterval: 1s\nseed: {seed}\ntraffic:\n");
    for (i, t) in tenants.iter().enumerate() {
        match t.load {
            Load::Udp {
                size,
                overload_percent,
            } => {
                // Offered: the tenant's cap (or the whole link) times the overload.
                let base_mbit = t.cap_percent.map_or(1000, |c| c * 10);
                let rate_mbit = base_mbit * overload_percent / 100;
                text += &format!(
                    "  - {{ tenant: t{i}, kind: udp, rate: {rate_mbit}Mbit, size: {}B, flows: 2 }}\n",
                    SIZES[size]
                );
            }
            Load::Bulk { flows } => {
                text += &format!("  - {{ tenant: t{i}, kind: bulk, flows: {flows} }}\n");
            }
        }
    }
    text
}

fn tenant(capped: bool) -> impl Strategy<Value = TenantSpec> {
    let cap = if capped {
        (3u32..20).prop_map(Some).boxed()
    } else {
        prop_oneof![Just(None), (3u32..40).prop_map(Some)].boxed()
    };
    let load = prop_oneof![
        3 => (0..SIZES.len(), 120u32..300).prop_map(|(size, overload_percent)| Load::Udp { size, overload_percent }),
        1 => (1u32..9).prop_map(|flows| Load::Bulk { flows }),
    ];
    (1u32..5, cap, load).prop_map(|(weight, cap_percent, load)| TenantSpec {
        weight,
        cap_percent,
        load,
    })
}

fn parse(text: &str) -> Scenario {
    parse_scenario(
        text,
        "generated.yaml",
        Path::new("."),
        &sched::registry::names(),
    )
    .unwrap()
}

/// A send is indivisible: an interval holds a whole number of them, so a tenant's
/// throughput in one is its cap give or take one send. A datagram is a few bits of
/// a 1 s interval; a bulk flow's 64 KB TSO send at 30 Mbit/s is 1.7% of it.
fn send_bits(load: Load) -> f64 {
    let bytes = match load {
        Load::Udp { size, .. } => SIZES[size] + policy::wire::UDP_HEADER_BYTES,
        Load::Bulk { .. } => policy::wire::bulk_send_bytes(1500),
    };
    f64::from(bytes) * 8.0
}

/// Steady intervals after the first, where limiters have left their initial burst.
fn judged(record: &RunRecord) -> impl Iterator<Item = &Interval> {
    record
        .intervals
        .iter()
        .filter(|i| i.steady && i.start_ns >= 1_000_000_000)
}

fn run(scenario: &Scenario, enforcer: &str) -> RunRecord {
    let record = sim::run(scenario, enforcer, sim::HostModel::default(), &mut |_| {}).unwrap();
    for check in &record.checks {
        assert!(check.ok, "{enforcer}: {}: {}", check.name, check.detail);
    }
    record
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3))]

    /// Every tenant capped, caps adding up to less than the link, every tenant
    /// offered more than its cap: each holds its cap within 0.5% in every interval,
    /// under every enforcer that enforces caps.
    #[test]
    fn capped_tenants_hold_their_caps_under_long_overload(
        tenants in proptest::collection::vec(tenant(true), 2..9),
        seed in 0u64..1000,
    ) {
        let caps: u32 = tenants.iter().filter_map(|t| t.cap_percent).sum();
        prop_assume!(caps <= 95);
        let text = write(&tenants, seed);
        let scenario = parse(&text);
        for enforcer in ["wf2q", "valve", "htb", "wheel"] {
            let record = run(&scenario, enforcer);
            for interval in judged(&record) {
                for (t, spec) in tenants.iter().enumerate() {
                    let cap_bps = f64::from(spec.cap_percent.unwrap()) * 0.01 * LINK_BPS;
                    let got = record.tenant_throughput_bps(interval, t);
                    prop_assert!(
                        (got - cap_bps).abs() <= 0.005 * cap_bps + send_bits(spec.load) / interval.length_s(),
                        "{enforcer}: t{t} at {got} bit/s against a cap of {cap_bps} in the interval ending {} s\n{text}",
                        interval.end_s()
                    );
                }
            }
        }
    }

    /// Weights, some caps and a mix of bulk and UDP, the link overloaded: every
    /// tenant within 2% of its ideal in every interval under the enforcers that
    /// express the whole policy (`valve`, `htb`), and never above its cap under
    /// those that approximate weights (`wf2q`: capped siblings share in the ratio
    /// of their caps; `wheel`: no weights), as `check` says.
    #[test]
    fn mixed_tenants_get_their_ideal_under_long_overload(
        tenants in proptest::collection::vec(tenant(false), 2..9),
        seed in 0u64..1000,
    ) {
        let text = write(&tenants, seed);
        let scenario = parse(&text);
        for enforcer in ["wf2q", "valve", "htb", "wheel"] {
            let record = run(&scenario, enforcer);
            for interval in judged(&record) {
                for (t, spec) in tenants.iter().enumerate() {
                    let got = record.tenant_throughput_bps(interval, t);
                    let ideal = interval.tenant_ideal_bps(t);
                    if matches!(enforcer, "wf2q" | "wheel") {
                        if let Some(cap) = spec.cap_percent {
                            let cap_bps = f64::from(cap) * 0.01 * LINK_BPS;
                            let slack = 0.005 * cap_bps + send_bits(spec.load) / interval.length_s();
                            prop_assert!(got <= cap_bps + slack, "{enforcer}: t{t} at {got} above its cap {cap_bps}\n{text}");
                        }
                        continue;
                    }
                    prop_assert!(
                        (got - ideal).abs() <= 0.02 * ideal + send_bits(spec.load) / interval.length_s(),
                        "{enforcer}: t{t} at {got} bit/s against an ideal of {ideal} in the interval ending {} s\n{text}",
                        interval.end_s()
                    );
                }
            }
        }
    }
}

/// An enforcer that loses every hundredth packet it hands out: the run's
/// conservation check must say so, however right the rest looks.
struct Lossy {
    inner: Box<dyn sched::Enforcer>,
    handed_out: u64,
}

impl sched::Enforcer for Lossy {
    fn enqueue(
        &mut self,
        now_ns: u64,
        packet: sched::Packet,
    ) -> Result<(), (sched::Packet, sched::Refusal)> {
        self.inner.enqueue(now_ns, packet)
    }

    fn dequeue(&mut self, now_ns: u64) -> Option<sched::Frame> {
        let frame = self.inner.dequeue(now_ns)?;
        self.handed_out += 1;
        if self.handed_out.is_multiple_of(100) {
            return self.inner.dequeue(now_ns);
        }
        Some(frame)
    }

    fn next_ready_ns(&self, now_ns: u64) -> Option<u64> {
        self.inner.next_ready_ns(now_ns)
    }

    fn backlog_packets(&self) -> usize {
        self.inner.backlog_packets()
    }

    fn counters(&self) -> &[sched::TenantCounters] {
        self.inner.counters()
    }
}

#[test]
fn an_enforcer_that_loses_packets_fails_conservation() {
    let text = write(
        &[
            TenantSpec {
                weight: 1,
                cap_percent: Some(30),
                load: Load::Udp {
                    size: 4,
                    overload_percent: 200,
                },
            },
            TenantSpec {
                weight: 1,
                cap_percent: None,
                load: Load::Bulk { flows: 2 },
            },
        ],
        1,
    )
    .replace("duration: 30s", "duration: 2s");
    let scenario = parse(&text);
    let honest = sim::run(&scenario, "wf2q", sim::HostModel::default(), &mut |_| {}).unwrap();
    assert!(honest.checks.iter().all(|c| c.ok), "{:?}", honest.checks);
    let lossy = Lossy {
        inner: sched::build("wf2q", &scenario.policy).unwrap(),
        handed_out: 0,
    };
    let record = sim::run_enforcer(
        &scenario,
        "lossy",
        Box::new(lossy),
        sim::HostModel::default(),
        &mut |_| {},
    );
    let failed: Vec<&report::Check> = record.failed_checks().collect();
    assert_eq!(failed.len(), 1, "{:?}", record.checks);
    assert_eq!(failed[0].name, "conservation");
    assert!(failed[0].detail.contains("lost"), "{}", failed[0].detail);
}

/// One app of a generated tree: its priority, guarantee and cap as shares of the
/// link (percent), and whether its traffic is bulk TCP or a UDP flood.
#[derive(Clone, Debug)]
struct AppSpec {
    priority: u8,
    weight: u32,
    min_percent: Option<u32>,
    max_percent: Option<u32>,
    bulk: bool,
}

/// Two equal apps of a tenant that lives partly on what a neighbour just under
/// its share leaves (found by the tree property test): each gets half the
/// tenant's rate, 191.6 Mbit/s, in every interval. They were 175.6 and 207.6
/// under `valve` (the neighbour, holding a packet at a rate update, was counted
/// hungry and took the tenant's share, which its apps then borrowed) and 173.9 and
/// 209.3 under `htb` (the app whose tokens refilled first handed its turn at
/// borrowing to its sibling each time).
#[test]
fn equal_apps_beside_a_neighbour_under_its_share_split_evenly() {
    let text = "policy:
  link: { rate: 1Gbit, queues: 8 }
  tenants:
    - name: t0
      apps:
        - { name: a0, priority: 1, weight: 3, match: { proto: udp, ports: [5000] } }
        - { name: a1, priority: 1, weight: 3, match: { proto: udp, ports: [5001] } }
    - name: t1
      weight: 2
      apps:
        - { name: a0, priority: 1, weight: 3, match: { proto: udp, ports: [5000] }, min_rate: 70Mbit }
duration: 6s
interval: 1s
seed: 619
traffic:
  - { tenant: t0, app: a0, kind: udp, rate: 600Mbit, size: 1000B, flows: 2 }
  - { tenant: t0, app: a1, kind: udp, rate: 600Mbit, size: 1000B, flows: 2 }
  - { tenant: t1, app: a0, kind: udp, rate: 600Mbit, size: 1000B, flows: 2 }
";
    every_class_within(text, 0);
}

/// Every class of `text` under `valve` and `htb` within 1% of its ideal and
/// `sends` TSO sends in every interval after the first.
fn every_class_within(text: &str, sends: u32) {
    let scenario = parse(text);
    for enforcer in ["valve", "htb"] {
        let record = run(&scenario, enforcer);
        for interval in judged(&record) {
            let slack = f64::from(sends * policy::wire::TSO_BYTES_MAX) * 8.0 / interval.length_s();
            for (c, name) in record.classes.iter().enumerate() {
                let (got, ideal) = (
                    interval.class_throughput_bps(c),
                    interval.class_ideal_bps(c),
                );
                assert!(
                    (got - ideal).abs() <= 0.01 * ideal + slack,
                    "{enforcer}: {}/{} at {got} against {ideal} in the interval ending {} s",
                    name.tenant,
                    name.app,
                    interval.end_s()
                );
            }
        }
    }
}

/// Traffic that no `match` takes goes to the tenant's implicit `default` app:
/// `htb` gave that app no rate, and beside a backlogged TCP sibling it got 1.3
/// kbit/s of an ideal 51.8 Mbit/s (a scenario written from the docs). With its
/// weighted part of its tenant's rate, the tenant of two green apps was forgiven
/// part of their simultaneous sends and took 115.5 Mbit/s of its 76.9 from a
/// neighbour (found by the claims oracle). Every class within 1% of its ideal and
/// a TSO send in every interval after the first.
#[test]
fn the_implicit_default_app_gets_its_share_beside_a_declared_sibling() {
    let udp_beside_tcp = "policy:
  link: { rate: 800Mbit }
  tenants:
    - name: m
      weight: 4
      apps:
        - { name: web, match: { proto: tcp, ports: [443] } }
    - { name: q, weight: 4 }
duration: 5s
interval: 1s
traffic:
  - { tenant: m, app: web, kind: bulk, flows: 3 }
  - { tenant: m, kind: udp, rate: 50Mbit, size: 777B }
  - { tenant: q, kind: bulk }
";
    let two_green_apps = "policy:
  link: { rate: 1Gbit }
  tenants:
    - { name: t0, weight: 3, apps: [{ name: a0, match: { proto: tcp, ports: [5000] } }] }
    - { name: t1, apps: [{ name: a0, match: { proto: tcp, ports: [5000] } }] }
    - { name: t2, apps: [{ name: a0, match: { proto: tcp, ports: [5000] } }] }
    - { name: t3, weight: 8, apps: [{ name: a0, match: { proto: tcp, ports: [5000] } }] }
duration: 5s
interval: 500ms
seed: 181
traffic:
  - { tenant: t0, app: a0, kind: bulk }
  - { tenant: t1, app: a0, kind: bulk }
  - { tenant: t2, app: a0, kind: bulk }
  - { tenant: t2, app: default, kind: bulk }
  - { tenant: t3, app: a0, kind: bulk }
";
    for text in [udp_beside_tcp, two_green_apps] {
        every_class_within(text, 1);
    }
}

fn app() -> impl Strategy<Value = AppSpec> {
    (
        0u8..2,
        1u32..4,
        prop_oneof![Just(None), (1u32..10).prop_map(Some)],
        prop_oneof![2 => Just(None), 1 => (5u32..40).prop_map(Some)],
        any::<bool>(),
    )
        .prop_map(
            |(priority, weight, min_percent, max_percent, bulk)| AppSpec {
                priority,
                weight,
                min_percent,
                max_percent: max_percent.map(|m| m.max(min_percent.unwrap_or(0))),
                bulk,
            },
        )
}

/// Tenants of random priority and weight, each with apps of random priority,
/// weight, guarantee and cap; every app matched by its protocol and a port of its
/// own, so the lab would attribute its traffic as the simulator does.
fn write_tree(tenants: &[(u8, u32, Vec<AppSpec>)], seed: u64) -> String {
    let mut text = String::from("policy:\n  link: { rate: 1Gbit, queues: 8 }\n  tenants:\n");
    for (t, (priority, weight, apps)) in tenants.iter().enumerate() {
        text += &format!(
            "    - name: t{t}\n      priority: {priority}\n      weight: {weight}\n      apps:\n"
        );
        for (a, app) in apps.iter().enumerate() {
            let proto = if app.bulk { "tcp" } else { "udp" };
            text += &format!(
                "        - {{ name: a{a}, priority: {}, weight: {}, match: {{ proto: {proto}, ports: [{}] }}",
                app.priority,
                app.weight,
                5000 + a
            );
            if let Some(min) = app.min_percent {
                text += &format!(", min_rate: {}Mbit", min * 10);
            }
            if let Some(max) = app.max_percent {
                text += &format!(", max_rate: {}Mbit", max * 10);
            }
            text += " }\n";
        }
    }
    text += &format!("duration: 10s\ninterval: 1s\nseed: {seed}\ntraffic:\n");
    for (t, (_, _, apps)) in tenants.iter().enumerate() {
        for (a, app) in apps.iter().enumerate() {
            if app.bulk {
                text += &format!("  - {{ tenant: t{t}, app: a{a}, kind: bulk, flows: 2 }}\n");
            } else {
                text += &format!(
                    "  - {{ tenant: t{t}, app: a{a}, kind: udp, rate: 600Mbit, size: 1000B, flows: 2 }}\n"
                );
            }
        }
    }
    text
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3))]

    /// Trees with guarantees and priorities at both levels, every app overloaded:
    /// `valve` and `htb`, which express the whole policy, keep every tenant within
    /// 2% of the ideal in every interval after the first, and every app within
    /// what their `check` states for apps of a tenant that lives partly on lent
    /// tokens, 12% of its share or 3% of its tenant's (what a parent lends goes to whichever children are borrowing at the
    /// moment, and when that is depends on the phase of their own token refills:
    /// three equal siblings under `htb` at 150.8, 171.5 and 164.1 against 164.2).
    /// Apps given the wrong share by a broken limit, as 300 Mbit/s against 102.5,
    /// still fail.
    #[test]
    fn trees_with_guarantees_and_priorities_get_their_ideal(
        tenants in proptest::collection::vec(
            (0u8..2, 1u32..4, proptest::collection::vec(app(), 1..4)),
            2..5,
        ),
        seed in 0u64..1000,
    ) {
        let guaranteed: u32 = tenants
            .iter()
            .flat_map(|(_, _, apps)| apps.iter().filter_map(|a| a.min_percent))
            .sum();
        prop_assume!(guaranteed <= 60);
        let text = write_tree(&tenants, seed);
        let scenario = parse(&text);
        // `htb`'s rates are the allocation with every app backlogged, where a
        // tenant a higher priority starves has nothing: its apps only borrow, in
        // proportion to their weights, and their guarantees are not re-shared when
        // the starving tenant leaves some over (as its `check` states). Those apps
        // are judged through their tenant alone under `htb`.
        let backlogged = vec![vec![f64::INFINITY]; scenario.policy.apps.len()];
        let starved = policy::ideal_allocation(&scenario.policy, &backlogged).tenant_bps;
        for enforcer in ["valve", "htb"] {
            let record = run(&scenario, enforcer);
            let send = send_bits(Load::Bulk { flows: 1 });
            for interval in judged(&record) {
                for t in 0..record.tenants.len() {
                    let (got, ideal) = (record.tenant_throughput_bps(interval, t), interval.tenant_ideal_bps(t));
                    prop_assert!(
                        (got - ideal).abs() <= 0.02 * ideal + send / interval.length_s(),
                        "{enforcer}: t{t} at {got} against {ideal} in the interval ending {} s\n{text}",
                        interval.end_s()
                    );
                }
                for (c, name) in record.classes.iter().enumerate() {
                    let tenant = scenario.policy.tenants.iter().position(|t| t.name == name.tenant);
                    if enforcer == "htb" && tenant.is_some_and(|t| starved[t] == 0.0) {
                        continue;
                    }
                    let (got, ideal) = (interval.class_throughput_bps(c), interval.class_ideal_bps(c));
                    let tenant_ideal = tenant.map_or(0.0, |t| interval.tenant_ideal_bps(t));
                    prop_assert!(
                        (got - ideal).abs() <= (0.12 * ideal).max(0.03 * tenant_ideal) + send / interval.length_s(),
                        "{enforcer}: {}/{} at {got} against {ideal} in the interval ending {} s\n{text}",
                        name.tenant, name.app, interval.end_s()
                    );
                }
            }
        }
    }
}

/// `tonic` puts a prioritised app's packets first in their qdisc, but they still
/// wait behind what the queue's ring holds and for the NIC's round robin over
/// the pool, so a closed-loop rpc, whose round trip bounds what it sends, gets
/// less than the ideal's strict priority beside a UDP sibling: 1287.6 of 2727.3
/// Mbit/s in a scenario written from the docs, where `check` listed the app's
/// priority as exact. `check` now lists it as approximate with that number;
/// `valve` gives the rpc its ideal.
#[test]
fn a_prioritised_closed_loop_app_waits_behind_the_ring_under_tonic() {
    let scenario = parse(
        "policy:
  link: { rate: 10Gbit, queues: 12 }
  tenants:
    - { name: gold, weight: 5, cores: [0, 1, 2, 3] }
    - { name: silver, weight: 3, cores: [4, 5] }
    - { name: bronze, weight: 1, cores: [6] }
    - name: mixed
      weight: 3
      cores: [7]
      apps:
        - { name: rpc, priority: 0, match: { proto: tcp, ports: [9000] } }
duration: 5s
interval: 500ms
traffic:
  - { tenant: gold, kind: bulk, flows: 8 }
  - { tenant: silver, kind: bulk, flows: 2 }
  - { tenant: mixed, app: rpc, kind: rpc, response: 16KiB, concurrency: 8 }
  - { tenant: mixed, kind: udp, rate: 3Gbit, size: 1400B, flows: 3 }
",
    );
    let said = sched::approximation("tonic", &scenario.policy).unwrap();
    assert!(
        said.approximate
            .iter()
            .any(|l| l.starts_with("mixed: apps rpc prioritised")
                && l.contains("ring holds (64KiB")
                && l.contains("1287.6 of 2727.3")),
        "{said:?}"
    );
    assert!(
        !said.exact.iter().any(|l| l.contains("prioritised")),
        "{said:?}"
    );
    let rpc_share = |enforcer: &str| {
        let record = run(&scenario, enforcer);
        let rpc = record
            .classes
            .iter()
            .position(|c| c.tenant == "mixed" && c.app == "rpc")
            .unwrap();
        let (got, ideal) = judged(&record).fold((0.0, 0.0), |(g, i), interval| {
            (
                g + interval.class_throughput_bps(rpc),
                i + interval.class_ideal_bps(rpc),
            )
        });
        got / ideal
    };
    let tonic = rpc_share("tonic");
    assert!((0.4..0.6).contains(&tonic), "tonic: {tonic}");
    let valve = rpc_share("valve");
    assert!(valve > 0.99, "valve: {valve}");
}
