//! The engine on two threads under the enforcers that run per core (issue 28):
//! each thread reads, classifies and schedules its own tenants and the link's
//! pacing is shared, and the run keeps the one-thread run's fairness and every
//! self-check. A scenario none of the enforcers was tuned on: three tenants of
//! weights 3:2:1 on 300 Mbit/s, the middle one capped below its share, TCP and a
//! UDP flood beside each other. And one where `fairnic`'s threads once raced each
//! other off their shares: more tenants than threads, all TCP. Needs root and
//! the lab's programs, as the other lab tests (fails in CI without them, skips
//! elsewhere saying why).

mod common;

use common::{assert_nothing_left, our_namespaces, tenant_means};
use lab::LabOptions;
use std::path::Path;
use std::sync::Mutex;

/// The runs share the machine's cores, and time matters to them.
static SERIAL: Mutex<()> = Mutex::new(());

const PROGRAMS: [(&str, &str); 2] = [("iperf3", "--version"), ("ethtool", "--version")];

const LINK_BPS: f64 = 300e6;
const CAP_BPS: f64 = 40e6;

fn parse(yaml: &str) -> policy::Scenario {
    policy::parse_scenario(yaml, "test.yaml", Path::new("."), &lab::enforcer_names())
        .expect("valid scenario")
}

fn scenario() -> policy::Scenario {
    parse(&format!(
        r#"
name: lab-engine-threads
policy:
  link: {{ rate: {link}Mbit }}
  tenants:
    - {{ name: gold, weight: 3 }}
    - {{ name: silver, weight: 2, max_rate: {cap}Mbit }}
    - {{ name: bronze, weight: 1 }}
duration: 4s
interval: 500ms
traffic:
  - {{ name: gold-tcp, tenant: gold, kind: bulk, flows: 4 }}
  - {{ name: silver-tcp, tenant: silver, kind: bulk, flows: 2 }}
  - {{ name: bronze-udp, tenant: bronze, kind: udp, rate: 250Mbit, size: 1400B, flows: 2 }}
"#,
        link = LINK_BPS / 1e6,
        cap = CAP_BPS / 1e6,
    ))
}

/// Runs `scenario` on `threads` engine threads; every self-check must pass in
/// the first run whose engine kept up ([`common::kept_up`]).
/// Returns each tenant's (mean throughput, mean ideal) after the first second.
fn run_checked(scenario: &policy::Scenario, enforcer: &str, threads: usize) -> Vec<(f64, f64)> {
    let before = our_namespaces();
    let options = LabOptions {
        engine_threads: threads,
        ..LabOptions::default()
    };
    let what = format!("{enforcer} on {threads} thread(s)");
    let record = common::kept_up(&what, || {
        let record = lab::run(scenario, enforcer, &options, &mut |_| {})
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_nothing_left(&before);
        record
    })
    .unwrap_or_else(|| panic!("{what}: the engine fell behind {} times", common::ATTEMPTS));
    assert!(record.is_well_formed());
    assert_eq!(
        record.provenance.settings["engine_threads"],
        threads.to_string()
    );
    for c in &record.checks {
        assert!(c.ok, "{enforcer} on {threads} thread(s): {c:?}");
    }
    tenant_means(&record)
}

/// Runs the first scenario on `threads` engine threads. Returns each tenant's mean
/// throughput and the Jain index of the tenants' throughputs against their ideals.
fn run(enforcer: &str, threads: usize) -> (Vec<f64>, f64) {
    let means: Vec<f64> = run_checked(&scenario(), enforcer, threads)
        .iter()
        .map(|&(got, _)| got)
        .collect();
    // Silver is capped at 40 Mbit/s; gold and bronze share the rest 3:1.
    let ideal = [
        (LINK_BPS - CAP_BPS) * 0.75,
        CAP_BPS,
        (LINK_BPS - CAP_BPS) * 0.25,
    ];
    let normalised: Vec<f64> = means.iter().zip(ideal).map(|(m, i)| m / i).collect();
    let jain = report::jain_index(&normalised);
    eprintln!(
        "{enforcer} on {threads} thread(s): per tenant {:?} Mbit/s, Jain {jain:.3}",
        means
            .iter()
            .map(|m| (m / 1e5).round() / 10.0)
            .collect::<Vec<_>>()
    );
    let total: f64 = means.iter().sum();
    assert!(
        total < 1.03 * LINK_BPS,
        "{enforcer} on {threads} thread(s): the threads together never pass the link ({total:.3e} bit/s)"
    );
    assert!(
        means[1] < 1.05 * CAP_BPS,
        "{enforcer} on {threads} thread(s): silver's cap holds ({:.3e} bit/s)",
        means[1]
    );
    (means, jain)
}

fn two_threads_keep_one_threads_fairness(enforcer: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (one, jain_one) = run(enforcer, 1);
    let (two, jain_two) = run(enforcer, 2);
    assert!(
        (jain_two - jain_one).abs() <= 0.05 * jain_one,
        "{enforcer}: Jain {jain_two:.3} on two threads against {jain_one:.3} on one"
    );
    // Each tenant's share of what the link carried moves by under 5 points.
    let (sum_one, sum_two): (f64, f64) = (one.iter().sum(), two.iter().sum());
    for (t, (a, b)) in one.iter().zip(&two).enumerate() {
        let (share_one, share_two) = (a / sum_one, b / sum_two);
        assert!(
            (share_two - share_one).abs() <= 0.05,
            "{enforcer}: tenant {t}'s share {share_two:.3} on two threads against {share_one:.3} on one"
        );
    }
}

#[test]
fn valve_on_two_engine_threads_keeps_its_fairness_and_every_check() {
    let test = "valve_on_two_engine_threads_keeps_its_fairness_and_every_check";
    if common::runnable(test, &PROGRAMS) {
        two_threads_keep_one_threads_fairness("valve");
    }
}

#[test]
fn fairnic_on_two_engine_threads_keeps_its_fairness_and_every_check() {
    let test = "fairnic_on_two_engine_threads_keeps_its_fairness_and_every_check";
    if common::runnable(test, &PROGRAMS) {
        two_threads_keep_one_threads_fairness("fairnic");
    }
}

/// Two scenarios with more tenants than engine threads, where `fairnic`'s two
/// threads once raced each other off their tenants' rates while one thread held
/// every tenant within 1.4% of its ideal:
///
/// - Four tenants of weights 1, 2 (capped above its share), 3 and 1, all TCP:
///   thread 0 runs `one` and `three` (4/7 of the link), thread 1 `two` and
///   `four`. The threads split the link in turns, so thread 0's lanes waited
///   with full buckets and their spills reached the link's pool, where thread
///   1's tenants stole them: `four` 18.6% above its share, `three` 8.9% below.
/// - Five tenants, one of them idle for the first 2 s, TCP beside a UDP flood:
///   the flood's thread turns around faster and took the whole idle share from
///   the link's pool, `flood` 21.7% above its ideal and `web` 9.7% below in the
///   second second, where the pool goes by weight.
#[test]
fn fairnic_with_more_tenants_than_engine_threads_keeps_each_tenants_rate() {
    let test = "fairnic_with_more_tenants_than_engine_threads_keeps_each_tenants_rate";
    if !common::runnable(test, &PROGRAMS) {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let turns = parse(
        r#"
name: lab-engine-threads-turns
policy:
  link: { rate: 500Mbit }
  tenants:
    - { name: one, weight: 1 }
    - { name: two, weight: 2, max_rate: 150Mbit }
    - { name: three, weight: 3 }
    - { name: four, weight: 1 }
duration: 5s
interval: 500ms
traffic:
  - { name: a1, tenant: one, kind: bulk }
  - { name: a2, tenant: two, kind: bulk }
  - { name: a3, tenant: three, kind: bulk }
  - { name: a4, tenant: four, kind: bulk }
  - { name: a5, tenant: four, kind: bulk }
"#,
    );
    let idle_share = parse(
        r#"
name: lab-engine-threads-idle-share
policy:
  link: { rate: 400Mbit }
  tenants:
    - name: web
      weight: 5
      apps:
        - { name: front, weight: 3, match: { proto: tcp, ports: [8080] } }
        - { name: rest, weight: 1 }
    - { name: lo, weight: 1, max_rate: 20Mbit }
    - { name: mid, weight: 2, min_rate: 100Mbit }
    - { name: flood, weight: 3 }
    - { name: tail, weight: 1 }
duration: 3s
interval: 500ms
traffic:
  - { name: w1, tenant: web, app: front, kind: bulk, flows: 2 }
  - { name: w2, tenant: web, app: rest, kind: udp, rate: 80Mbit, size: 1200B }
  - { name: l1, tenant: lo, kind: bulk, flows: 3 }
  - { name: m1, tenant: mid, kind: bulk }
  - { name: f1, tenant: flood, kind: udp, rate: 500Mbit, size: 700B, flows: 4 }
  - { name: t1, tenant: tail, kind: bulk, start: 2s }
"#,
    );
    for scenario in [&turns, &idle_share] {
        let one = run_checked(scenario, "fairnic", 1);
        let two = run_checked(scenario, "fairnic", 2);
        let name = &scenario.name;
        eprintln!("{name}, (throughput, ideal) per tenant: one thread {one:?}, two {two:?}");
        // A second thread adds at most 5% of its ideal to any tenant's error.
        // Errors, not figures, are compared: a one-thread run on the 2-core
        // machine, its senders and sink on the same cores, once gave the
        // idle-share flood 74.6 Mbit/s of 80.18 where the two-thread run of the
        // same CI job gave it 80.14, the better of the two.
        for (t, ((one, ideal), (two, _))) in one.iter().zip(&two).enumerate() {
            assert!(
                (two - ideal).abs() <= (one - ideal).abs() + 0.05 * ideal,
                "{name}, tenant {t}: {two:.4e} bit/s on two threads against {one:.4e} on one (ideal {ideal:.4e})"
            );
        }
    }
}
