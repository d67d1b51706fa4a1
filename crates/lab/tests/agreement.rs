//! Sim and lab agree, or say why (issue 25): generated one-host scenarios within
//! the lab's range, and one across hosts, run in both worlds under the same
//! enforcers, each tenant's (each flow's) mean throughput over the settled
//! intervals held within [`TOLERANCE`] of the other world's, as a share of its
//! ideal. The cases where the worlds cannot agree are named in
//! docs/results/lab.md ("Where sim and lab agree"), with the condition that
//! keeps them out of the generator here. The same generator's cases hold the
//! kernel's HTB, `linux-htb`, to what `nicsched check` states of it.
//!
//! Each lab run costs its duration in wall time (about 140 s in all). It needs
//! root and iperf3; without them it fails in CI and, elsewhere, says why and
//! passes.

mod common;

use common::{assert_nothing_left, our_namespaces};
use lab::LabOptions;
use policy::{AnyScenario, HostsScenario, Scenario};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Mutex;

/// The runs are serialised: they share the machine's cores, and each checks that
/// no namespace of this process is left, which another test's run would be.
static SERIAL: Mutex<()> = Mutex::new(());

const PROGRAMS: [(&str, &str); 2] = [("iperf3", "--version"), ("ethtool", "--version")];

/// How far a tenant's mean in the lab may be from the simulator's, as a
/// fraction of the tenant's ideal: the issue's bar. Of the ideal rather than of
/// the link because the ideal is what both worlds are judged by (`rel_error`):
/// within 5% of the ideal of each other, the worlds give the same verdict at a
/// 5% bar whatever the tenant's size; a share of the link would let a small
/// tenant's figures differ by half and still pass.
const TOLERANCE: f64 = 0.05;
/// The one-host scenarios' link. The lab holds 1 Gbit/s on an idle 2-core
/// machine (docs/results/lab.md); at 200 Mbit/s, beside other sessions' builds,
/// the engine fell behind in one run in four (the `engine` check).
const LINK_MBIT: u64 = 100;
/// Intervals that start before this are TCP's start and the rate limiters'
/// first bursts, in both worlds.
const SETTLED_NS: u64 = 1_500_000_000;
/// The enforcers every generated scenario runs under: the software schedulers
/// and one under the multiqueue NIC model.
const ENFORCERS: [&str; 4] = ["valve", "wf2q", "htb", "tonic"];
/// Generated one-host scenarios, and the seed they are drawn from.
const CASES: u64 = 3;
const SEED: u64 = 20261123;

/// A one-host scenario as a user would write it, within the lab's range: 2-4
/// tenants of weights 1-4, some with a guarantee or a cap, each with bulk TCP
/// (1-4 flows) or one UDP flow below its share. What is kept out, and why, is in
/// docs/results/lab.md: a UDP flow above what its tenant gets beside TCP (the
/// enforcer drops its excess where the simulator's socket holds it back, and
/// the TCP neighbours meet those drops differently), and an rpc (the lab's round
/// trip is not the model's, defect 12).
fn generated(case: u64) -> String {
    generated_with(case, LINK_MBIT, false)
}

/// [`generated`] on a link of `link` Mbit/s, every tenant's traffic bulk where
/// `backlogged`, so that the bounds `check` states with every tenant backlogged
/// apply.
fn generated_with(case: u64, link: u64, backlogged: bool) -> String {
    let mut rng = ChaCha8Rng::seed_from_u64(SEED ^ case);
    let tenants = rng.random_range(2..=4usize);
    let mut yaml = format!(
        "name: agreement-{case}\npolicy:\n  link: {{ rate: {link}Mbit, queues: 4 }}\n  tenants:\n"
    );
    let weights: Vec<u64> = (0..tenants).map(|_| rng.random_range(1..=4u64)).collect();
    let total: u64 = weights.iter().sum();
    let mut traffic = String::new();
    for (t, &weight) in weights.iter().enumerate() {
        let envelope = match rng.random_range(0..3u32) {
            0 => format!(
                ", min_rate: {}Mbit",
                link * rng.random_range(10..=30u64) / 100
            ),
            1 => format!(
                ", max_rate: {}Mbit",
                link * rng.random_range(15..=40u64) / 100
            ),
            _ => String::new(),
        };
        writeln!(
            yaml,
            "    - {{ name: t{t}, weight: {weight}, cores: [{}]{envelope} }}",
            t % 4
        )
        .unwrap();
        // A UDP flow asks for 30-80% of its tenant's share by weight alone,
        // and of its cap, so that it is never what the enforcer drops.
        if rng.random_range(0..2u32) == 0 && !backlogged {
            let share = link * weight / total;
            let share = envelope
                .strip_prefix(", max_rate: ")
                .and_then(|cap| cap.trim_end_matches("Mbit").parse::<u64>().ok())
                .map_or(share, |cap| share.min(cap));
            let rate = (share * rng.random_range(30..=80u64) / 100).max(1);
            writeln!(
                traffic,
                "  - {{ name: t{t}-udp, tenant: t{t}, kind: udp, rate: {rate}Mbit }}"
            )
            .unwrap();
        } else {
            let flows = rng.random_range(1..=4u32);
            writeln!(
                traffic,
                "  - {{ name: t{t}-bulk, tenant: t{t}, kind: bulk, flows: {flows} }}"
            )
            .unwrap();
        }
    }
    yaml + "duration: 4s\ninterval: 500ms\ntraffic:\n" + &traffic
}

/// Generated case `case`, parsed as `nicsched` parses a scenario file.
fn parsed(case: u64, yaml: &str) -> Scenario {
    policy::parse_scenario(
        yaml,
        "agreement.yaml",
        Path::new("."),
        &lab::enforcer_names(),
    )
    .unwrap_or_else(|e| panic!("case {case} is a valid scenario: {e}\n{yaml}"))
}

/// Per tenant: its mean throughput and mean ideal over the intervals settled in
/// `record` in which it is active.
fn settled_means(record: &report::RunRecord) -> Vec<(f64, f64)> {
    (0..record.tenants.len())
        .map(|t| {
            let settled: Vec<_> = record
                .intervals
                .iter()
                .filter(|i| i.steady && i.start_ns >= SETTLED_NS && i.tenant_active(t))
                .collect();
            let n = settled.len().max(1) as f64;
            (
                settled
                    .iter()
                    .map(|i| record.tenant_throughput_bps(i, t))
                    .sum::<f64>()
                    / n,
                settled.iter().map(|i| i.tenant_ideal_bps(t)).sum::<f64>() / n,
            )
        })
        .collect()
}

/// A lab run of `scenario` in which the engine kept up ([`common::kept_up`]).
/// Nothing is left behind.
fn kept_up(scenario: &Scenario, enforcer: &str) -> Option<report::RunRecord> {
    common::kept_up(enforcer, || {
        let before = our_namespaces();
        let record = lab::run(scenario, enforcer, &LabOptions::default(), &mut |_| {})
            .unwrap_or_else(|e| panic!("{enforcer}: {e}"));
        assert_nothing_left(&before);
        record
    })
}

/// Where the lab and the simulator differ by more than [`TOLERANCE`] of a
/// tenant's ideal, one line each; every comparison is printed.
fn disagreements(
    what: &str,
    names: &[String],
    sim: &[(f64, f64)],
    lab: &[(f64, f64)],
) -> Vec<String> {
    let mut lines = Vec::new();
    for (name, (s, l)) in names.iter().zip(sim.iter().zip(lab)) {
        let ideal = s.1;
        let gap = (l.0 - s.0).abs() / ideal;
        let line = format!(
            "{what}, {name}: lab {:.2} Mbit/s, sim {:.2}, ideal {:.2}: {:.1}% of the ideal apart",
            l.0 / 1e6,
            s.0 / 1e6,
            ideal / 1e6,
            100.0 * gap
        );
        eprintln!("{line}");
        if gap.is_nan() || gap > TOLERANCE {
            lines.push(line);
        }
    }
    lines
}

/// Why `enforcer` on `scenario` is a case where the worlds are known not to
/// agree (docs/results/lab.md, "Where sim and lab agree"), if it is one.
///
/// `tonic` sprays a tenant's packets over its pool's Tx queues one by one, so a
/// TCP flow's segments leave its queues out of order. Linux TCP meets that with
/// spurious retransmissions (1.1-3.7 MB in 4 s from the 2-queue tenant of
/// case 2, none of them refused) and now and then a smaller window; the
/// simulator's TCP sees no reordering. In case 2 the 2-queue tenant got 46.3-47.8
/// of the simulator's 50 Mbit/s in 4 of 14 lab runs.
fn worlds_cannot_agree(scenario: &Scenario, enforcer: &str) -> Option<String> {
    if enforcer != "tonic" {
        return None;
    }
    let policy = &scenario.policy;
    let weights: Vec<u32> = policy.tenants.iter().map(|t| t.weight).collect();
    let pools = sched::multiqueue::tonic_pools(&weights, policy.link.queues)?;
    let sprayed: Vec<&str> = (policy.tenants.iter().zip(&pools).enumerate())
        .filter(|(t, (_, pool))| {
            pool.len > 1
                && scenario.traffic.iter().any(|traffic| {
                    traffic.tenant.index() == *t
                        && matches!(traffic.kind, policy::TrafficKind::Bulk { .. })
                })
        })
        .map(|(_, (tenant, _))| tenant.name.as_str())
        .collect();
    (!sprayed.is_empty()).then(|| {
        format!(
            "TCP of {} sprayed over more than one Tx queue is reordered in the lab, not in the simulator",
            sprayed.join(", ")
        )
    })
}

#[test]
fn generated_one_host_scenarios_agree_in_sim_and_lab_within_5_percent_of_the_ideal() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !common::runnable(
        "generated_one_host_scenarios_agree_in_sim_and_lab_within_5_percent_of_the_ideal",
        &PROGRAMS,
    ) {
        return;
    }
    let mut failed = Vec::new();
    for case in 0..CASES {
        let yaml = generated(case);
        eprintln!("case {case}:\n{yaml}");
        let scenario = parsed(case, &yaml);
        let names: Vec<String> = scenario
            .policy
            .tenants
            .iter()
            .map(|t| t.name.clone())
            .collect();
        for enforcer in ENFORCERS {
            if let Some(why) = worlds_cannot_agree(&scenario, enforcer) {
                eprintln!("case {case}, {enforcer}: not compared: {why}");
                continue;
            }
            let simulated = sim::run(&scenario, enforcer, sim::HostModel::default(), &mut |_| {})
                .unwrap_or_else(|e| panic!("{enforcer}: {e}"));
            let measured = kept_up(&scenario, enforcer).unwrap_or_else(|| {
                panic!(
                    "case {case}, {enforcer}: the engine fell behind {} times",
                    common::ATTEMPTS
                )
            });
            // A run whose own checks fail has figures nobody vouches for: that
            // is a failure of the lab, not a disagreement to excuse.
            for check in &measured.checks {
                assert!(check.ok, "case {case}, {enforcer}: {check:?}\n{yaml}");
            }
            failed.extend(disagreements(
                &format!("case {case}, {enforcer}"),
                &names,
                &settled_means(&simulated),
                &settled_means(&measured),
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "sim and lab disagree:\n{}",
        failed.join("\n")
    );
}

/// The link of the cases `linux-htb` is held to `check` on. The kernel's HTB
/// needs no engine to keep up; the grain of the share bound, two TSO sends an
/// interval, is 2.8% of a 75 Mbit/s tenant's ideal here and 8% at the engine's
/// 100 Mbit/s. Measured (2026-11-29, idle machine), worst tenant: 0.9-2.6% of
/// the 5% here; at 1 Gbit/s 3.3-4.0%, nearly all of it HTB counting Ethernet
/// bytes, a margin a busy machine's TCP could take.
const HTB_LINK_MBIT: u64 = 300;

/// What `nicsched check -e linux-htb` states (`lab::htb_bounds`: caps always, the
/// tenants' share error with every tenant backlogged), held by the kernel's HTB
/// on the generated cases above and on as many of their shape with every tenant
/// bulk, measured as a simulator run's `claims` self-check measures its own.
#[test]
fn linux_htb_keeps_what_check_states_on_generated_scenarios() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !common::runnable(
        "linux_htb_keeps_what_check_states_on_generated_scenarios",
        &PROGRAMS,
    ) {
        return;
    }
    let mut failed = Vec::new();
    for (case, backlogged) in (0..CASES).flat_map(|c| [(c, false), (c + CASES, true)]) {
        let yaml = generated_with(case, HTB_LINK_MBIT, backlogged);
        let scenario = parsed(case, &yaml);
        let before = our_namespaces();
        let record = lab::run(&scenario, "linux-htb", &LabOptions::default(), &mut |_| {})
            .unwrap_or_else(|e| panic!("case {case}: {e}"));
        assert_nothing_left(&before);
        for check in &record.checks {
            assert!(check.ok, "case {case}: {check:?}\n{yaml}");
        }
        let held = report::claims::claims(&record, &scenario, &lab::htb_bounds(&scenario.policy));
        eprintln!("case {case}: {}", held.detail);
        if !held.ok {
            failed.push(format!("case {case}: {}\n{yaml}", held.detail));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// Per traffic: its mean delivered rate over the settled intervals of the
/// phase from `from_ns` to `to_ns` (intervals starting from half-way on).
fn phase_means(
    scenario: &HostsScenario,
    record: &report::HostsRecord,
    from_ns: u64,
    to_ns: u64,
) -> Vec<f64> {
    let half = from_ns + (to_ns - from_ns) / 2;
    let intervals: Vec<usize> = (0..record.delivered_bytes[0].len())
        .filter(|&k| {
            let start = k as u64 * scenario.interval_ns;
            start >= half && start + scenario.interval_ns <= to_ns
        })
        .collect();
    assert!(!intervals.is_empty(), "no settled interval");
    let interval_s = scenario.interval_ns as f64 / 1e9;
    record
        .delivered_bytes
        .iter()
        .map(|flow| {
            intervals
                .iter()
                .map(|&k| flow[k] as f64 * 8.0 / interval_s)
                .sum::<f64>()
                / intervals.len() as f64
        })
        .collect()
}

#[test]
fn a_flow_and_a_flood_of_one_vm_across_hosts_agree_in_sim_and_lab_within_5_percent() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !common::runnable(
        "a_flow_and_a_flood_of_one_vm_across_hosts_agree_in_sim_and_lab_within_5_percent",
        &PROGRAMS,
    ) {
        return;
    }
    // scenarios/picnic/held-pair.yaml at the lab's 1/80, its phases shortened:
    // a→c alone (c's envelope), with b→c (c's envelope shared), then with b's
    // UDP flood to d beside b→c (b's envelope split between its receivers).
    // The engine's per-app buffer is the simulator's 1000 packets: at the lab's
    // default 128 the flood fills b's and the TCP flow loses there, which the
    // simulator's never does (defect 13, docs/results/lab.md).
    let yaml = r#"
name: agreement-across-hosts
duration: 12s
interval: 500ms
hosts:
  - name: h1
    policy: { link: { rate: 250Mbit }, tenants: [ { name: a, max_rate: 150Mbit } ] }
  - name: h2
    policy: { link: { rate: 250Mbit }, tenants: [ { name: b, min_rate: 50Mbit, max_rate: 75Mbit } ] }
  - name: h3
    policy:
      link: { rate: 250Mbit }
      tenants:
        - { name: c, ingress: { min_rate: 25Mbit, max_rate: 100Mbit } }
        - { name: d }
traffic:
  - { name: a-c, tenant: a, to: c, kind: bulk, start: 0s }
  - { name: b-c, tenant: b, to: c, kind: bulk, start: 3s }
  - { name: b-d, tenant: b, to: d, kind: udp, rate: 100Mbit, start: 6s }
"#;
    let AnyScenario::Hosts(scenario) = policy::parse_any_scenario(
        yaml,
        "agreement.yaml",
        Path::new("."),
        &lab::enforcer_names(),
    )
    .expect("valid scenario") else {
        panic!("a scenario across hosts");
    };
    let before = our_namespaces();
    let mut options = LabOptions::default();
    options.qdisc.class_packets = sim::HostModel::default().limits.class_packets;
    let run = lab::hosts::run(&scenario, "picnic-wc", &options, &mut |_| {})
        .unwrap_or_else(|e| panic!("picnic-wc: {e}"));
    assert_nothing_left(&before);
    let (summary, _) =
        report::summarise_hosts(&scenario, &run.record, &report::measure::RpcPath::default());
    for check in summary.checks.iter().chain(&run.checks) {
        assert!(check.ok, "{check:?}");
    }
    let simulated = sim::run_hosts(
        &scenario,
        "picnic-wc",
        sim::HostModel::default(),
        &mut |_| {},
    )
    .expect("picnic-wc builds");
    let names: Vec<String> = scenario
        .traffic
        .iter()
        .map(|t| t.traffic.name.clone())
        .collect();
    // Per phase: its span in s and each running flow's ideal in Mbit/s
    // (`nicsched explain scenarios/picnic/held-pair.yaml`, at 1/80).
    let phases: [(u64, u64, &[f64]); 3] = [
        (0, 3, &[100.0]),
        (3, 6, &[50.0, 50.0]),
        (6, 12, &[62.5, 37.5, 37.5]),
    ];
    let mut failed = Vec::new();
    for (from_s, to_s, ideal_mbit) in phases {
        let (from, to) = (from_s * 1_000_000_000, to_s * 1_000_000_000);
        let running = ideal_mbit.len();
        let with_ideal = |rates: Vec<f64>| -> Vec<(f64, f64)> {
            rates
                .into_iter()
                .zip(ideal_mbit)
                .map(|(rate, ideal)| (rate, ideal * 1e6))
                .collect()
        };
        failed.extend(disagreements(
            &format!("phase {from_s}-{to_s} s"),
            &names[..running],
            &with_ideal(phase_means(&scenario, &simulated, from, to)),
            &with_ideal(phase_means(&scenario, &run.record, from, to)),
        ));
    }
    assert!(
        failed.is_empty(),
        "sim and lab disagree:\n{}",
        failed.join("\n")
    );
}
