//! `wf2q` against the ideal on the scenarios of issue 25 that showed it wrong: a
//! capped tenant's weight ignored (defect 4), the link idle beside a backlogged
//! tenant (defect 5), and a priority tenant bending the weights below it (defect 6).
//! Each holds every tenant to the bound `check` states for `wf2q`.

mod common;

use common::checked_run;
use report::{Summary, TenantSummary, summarize};
use std::path::Path;

fn run(text: &str) -> Summary {
    summarize(&checked_run(text, "wf2q"))
}

fn tenant<'a>(summary: &'a Summary, name: &str) -> &'a TenantSummary {
    summary
        .tenants
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no tenant {name}"))
}

/// The share error `check` states for `wf2q` with every tenant backlogged.
fn promised() -> f64 {
    let policy =
        policy::parse_policy("link: { rate: 1Gbit }\ntenants: [{ name: a }]\n", "p.yaml").unwrap();
    sched::approximation("wf2q", &policy)
        .unwrap()
        .share_error_max
        .unwrap()
}

fn assert_near_ideal(t: &TenantSummary, error: f64) {
    let off = (t.throughput_bps / t.ideal_bps - 1.0).abs();
    assert!(
        off <= error,
        "{}: {:.1} Mbit/s against an ideal of {:.1} ({:+.1}%)",
        t.name,
        t.throughput_bps / 1e6,
        t.ideal_bps / 1e6,
        (t.throughput_bps / t.ideal_bps - 1.0) * 100.0
    );
}

/// Defect 4: the capped tenant got 385 of 1000 Mbit/s against 200, the others 154:
/// its cap, not its weight, was its share of the link.
#[test]
fn a_capped_tenant_gets_its_weighted_share_below_its_cap() {
    let s = run("policy:
  link: { rate: 1Gbit }
  tenants:
    - { name: capped, max_rate: 500Mbit }
    - { name: a }
    - { name: b }
    - { name: c }
    - { name: d }
duration: 2s
interval: 500ms
traffic:
  - { tenant: capped, kind: bulk }
  - { tenant: a, kind: bulk }
  - { tenant: b, kind: bulk }
  - { tenant: c, kind: bulk }
  - { tenant: d, kind: bulk }
");
    for t in &s.tenants {
        assert!(
            (t.ideal_bps - 200e6).abs() < 1e3,
            "{}: ideal {}",
            t.name,
            t.ideal_bps
        );
        assert_near_ideal(t, promised());
    }
    assert!(s.utilization >= 0.98, "utilization {}", s.utilization);
}

/// A tenant's tags run at its weight whatever its cap: `b`'s first packets were
/// tagged while only `a` (weight 1) was backlogged beside it, when the fill put
/// `b` at its cap of 328 Mbit/s and λ at 672. Tagged at its cap over λ, 0.58
/// Mbit/s, it waited 0.44 s once `c` came and got 97.5 of its 108.3 Mbit/s (the
/// claims oracle, seed 21; 95.4 with these flows).
#[test]
fn a_capped_tenant_tagged_beside_a_light_one_is_not_held_once_a_heavy_one_comes() {
    let s = run("policy:
  link: { rate: 1Gbit }
  tenants:
    - { name: a, weight: 1 }
    - { name: b, weight: 91, max_rate: 328Mbit }
    - { name: c, weight: 748 }
duration: 4s
interval: 500ms
traffic:
  - { tenant: a, kind: bulk }
  - { tenant: b, kind: bulk }
  - { tenant: c, kind: bulk }
");
    let b = tenant(&s, "b");
    assert!((b.ideal_bps / 1e6 - 108.33).abs() < 0.01, "{}", b.ideal_bps);
    assert_near_ideal(b, promised());
}

/// Defect 4 at scale: weight-1 tenants capped at 150 Mbit/s among 200 on 1 Gbit/s
/// got 14.6x their 5 Mbit/s.
#[test]
fn two_hundred_tenants_capped_far_above_their_share_get_their_share() {
    let mut text = String::from("policy:\n  link: { rate: 1Gbit }\n  tenants:\n");
    for i in 0..200 {
        let cap = if i % 20 == 0 {
            ", max_rate: 150Mbit"
        } else {
            ""
        };
        text += &format!("    - {{ name: t{i}{cap} }}\n");
    }
    text += "duration: 2s\ninterval: 500ms\ntraffic:\n";
    for i in 0..200 {
        text += &format!("  - {{ tenant: t{i}, kind: bulk }}\n");
    }
    let s = run(&text);
    let capped: f64 = (0..200)
        .step_by(20)
        .map(|i| tenant(&s, &format!("t{i}")).throughput_bps)
        .sum::<f64>()
        / 10.0;
    assert!(
        (capped / 5e6 - 1.0).abs() <= 0.05,
        "capped tenants average {capped} against 5 Mbit/s"
    );
    for t in &s.tenants {
        assert!(
            (t.ideal_bps - 5e6).abs() < 1e3,
            "{}: ideal {}",
            t.name,
            t.ideal_bps
        );
        assert!(
            t.throughput_bps <= 5e6 * 1.25,
            "{}: {} against 5 Mbit/s",
            t.name,
            t.throughput_bps
        );
    }
    assert!(s.utilization >= 0.98, "utilization {}", s.utilization);
}

/// Defect 5: tenant x (capped at 8 Gbit/s) holds packets of its UDP app now and
/// then, and the link idled 23% of the time while y was backlogged.
#[test]
fn the_link_stays_busy_while_an_uncapped_tenant_is_backlogged() {
    let s = run("policy:
  link: { rate: 10Gbit }
  tenants:
    - name: x
      max_rate: 8Gbit
      apps:
        - { name: capped, max_rate: 1Gbit, match: { proto: tcp } }
        - { name: rest }
    - { name: y }
duration: 2s
interval: 500ms
traffic:
  - { tenant: x, app: capped, kind: bulk }
  - { tenant: x, app: rest, kind: udp, rate: 500Mbit }
  - { tenant: y, kind: bulk, flows: 2 }
");
    assert!(s.utilization >= 0.98, "utilization {}", s.utilization);
    for t in &s.tenants {
        assert_near_ideal(t, promised());
        for a in &t.apps {
            assert!(
                (a.throughput_bps / a.ideal_bps - 1.0).abs() <= promised(),
                "{}/{}: {} against {}",
                t.name,
                a.name,
                a.throughput_bps,
                a.ideal_bps
            );
        }
    }
}

fn priority_beside_weights(size: &str) -> String {
    format!(
        "policy:
  link: {{ rate: 1Gbit }}
  tenants:
    - {{ name: prio, priority: 0 }}
    - {{ name: udp, weight: 3 }}
    - {{ name: bulk, weight: 5 }}
duration: 2s
interval: 500ms
traffic:
  - {{ tenant: prio, kind: poisson, rate: 50Mbit, size: 200B }}
  - {{ tenant: udp, kind: udp, rate: 500Mbit, size: {size} }}
  - {{ tenant: bulk, kind: bulk }}
"
    )
}

/// Defect 6: beside a priority-0 Poisson tenant the weight-3 UDP tenant fell to 118
/// (53 with 1470 B datagrams) against 354 Mbit/s: priority was a weight factor of
/// 16, and the UDP tenant's tags were costed at the rate it had while a Poisson
/// packet waited.
#[test]
fn a_priority_tenant_leaves_the_weights_below_it_intact() {
    for size in ["64B", "1470B"] {
        let s = run(&priority_beside_weights(size));
        let udp = tenant(&s, "udp");
        assert!(
            (udp.ideal_bps / 353.6e6 - 1.0).abs() < 0.01,
            "{size}: ideal {}",
            udp.ideal_bps
        );
        for t in &s.tenants {
            assert_near_ideal(t, promised());
        }
    }
}

/// What a UDP app leaves of its tenant's share goes to its bulk sibling, although
/// it holds a packet now and then: tagged at the rate of the moment when it became
/// eligible (a dequeue, which often follows a datagram's arrival), the bulk app got
/// 3.2 of its 4.5 Gbit/s.
#[test]
fn an_app_sending_below_its_share_leaves_the_rest_to_its_sibling() {
    let s = run("policy:
  link: { rate: 10Gbit }
  tenants:
    - name: t
      apps:
        - { name: a, match: { proto: udp } }
        - { name: b }
    - { name: u }
duration: 2s
interval: 500ms
traffic:
  - { tenant: t, app: a, kind: udp, rate: 500Mbit }
  - { tenant: t, app: b, kind: bulk }
  - { tenant: u, kind: bulk }
");
    for t in &s.tenants {
        assert_near_ideal(t, promised());
        for a in &t.apps {
            assert!(
                (a.throughput_bps / a.ideal_bps - 1.0).abs() <= promised(),
                "{}/{}: {} against {}",
                t.name,
                a.name,
                a.throughput_bps,
                a.ideal_bps
            );
        }
    }
}

/// A tenant of weight `heavy` beside `light` tenants of weight 1, each with one
/// bulk flow.
fn heavy_beside_light(heavy: u32, light: usize) -> String {
    let mut text = format!(
        "policy:\n  link: {{ rate: 1Gbit }}\n  tenants:\n    - {{ name: heavy, weight: {heavy} }}\n"
    );
    for i in 0..light {
        text += &format!("    - {{ name: l{i} }}\n");
    }
    text += "duration: 3s\ninterval: 500ms\ntraffic:\n  - { tenant: heavy, kind: bulk }\n";
    for i in 0..light {
        text += &format!("  - {{ tenant: l{i}, kind: bulk }}\n");
    }
    text
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(12))]

    /// Found by a scenario written from the docs: the weight-10 tenant beside ten of
    /// weight 1 got 411.6 of its 500 Mbit/s (-17.7%), weight 5 -14.3%. The light
    /// tenants' equal F's shared a tick of the eligible queue; one of them taken
    /// moved the queue there, and the heavy tenant, eligible next with a smaller F,
    /// was filed behind all the others of that tick.
    #[test]
    fn a_heavy_tenant_beside_many_light_ones_gets_its_weight(heavy in 2u32..13, light in 2usize..11) {
        let s = run(&heavy_beside_light(heavy, light));
        for t in &s.tenants {
            assert_near_ideal(t, promised());
        }
    }
}

/// An app capped at 126.8 Mbit/s with split classes of 386 Mbit/s, 13 udp flows
/// of 22 Mbit/s each beside a backlogged tenant (found by the claims oracle): each
/// flow's class emptied between its packets and came back with a cap credit of
/// its own, 142 Mbit/s over the run (295 in an interval of the generated case).
/// `check` says the cap is a real-time ceiling, over the run never above it.
#[test]
fn an_app_cap_holds_over_its_split_classes() {
    let summary = run("policy:
  link: { rate: 1Gbit }
  tenants:
    - name: t2
      apps:
        - { name: a0, max_rate: 126803kbit, match: { proto: udp, ports: [5000] }, split: { by: flow, max_rate: 386281kbit } }
    - { name: b }
duration: 4s
interval: 500ms
traffic:
  - { tenant: t2, app: a0, kind: udp, rate: 289796kbit, flows: 13 }
  - { tenant: b, kind: bulk }
");
    let capped = tenant(&summary, "t2");
    assert!(
        capped.throughput_bps <= 126_803_000.0 * 1.001,
        "{:.2} Mbit/s under a cap of 126.8",
        capped.throughput_bps / 1e6
    );
    assert_near_ideal(capped, 0.01);
}

/// A guarantee `wf2q` ignores moves a share by more where a tenant's other apps
/// are idle: `g`'s guarantee covers its app capped at 112 Mbit/s, and with its
/// implicit default app idle too its demand is that cap. `check` stated 35.1%
/// from every app backlogged (found by the claims oracle, 37.7% measured); the
/// ideal gives `a` 92.5 Mbit/s and `wf2q`, sharing as if there were no
/// guarantees, 129 (39.5%). `check` now weighs every backlog: 1% and 39.5%.
#[test]
fn the_share_error_stated_covers_guarantees_with_some_apps_idle() {
    let text = "policy:
  link: { rate: 1Gbit }
  tenants:
    - { name: a }
    - { name: big, weight: 250, max_rate: 630Mbit }
    - name: g
      min_rate: 21Mbit
      apps:
        - { name: a0, max_rate: 112Mbit, match: { proto: tcp, ports: [5000] } }
    - { name: h, min_rate: 73Mbit }
duration: 4s
interval: 500ms
traffic:
  - { tenant: a, kind: bulk, flows: 2 }
  - { tenant: big, kind: bulk, flows: 2 }
  - { tenant: g, app: a0, kind: bulk, flows: 2 }
  - { tenant: h, kind: bulk, flows: 2 }
";
    let scenario =
        policy::parse_scenario(text, "s.yaml", Path::new("."), &sched::registry::names()).unwrap();
    let said = sched::approximation("wf2q", &scenario.policy).unwrap();
    let stated = said.share_error_max.expect("a share bound");
    assert!((stated - 0.4046).abs() < 0.0005, "{stated}");
    assert!(
        said.ignored.iter().any(|l| l.starts_with("g: min_rate")
            && l.contains("with some apps of a tenant idle by up to 39.5%")),
        "{said:?}"
    );
    let summary = run(text);
    let a = tenant(&summary, "a");
    assert!(
        (a.ideal_bps / 1e6 - 92.5).abs() < 0.01,
        "ideal {}",
        a.ideal_bps
    );
    assert!(
        (a.throughput_bps / 1e6 - 129.0).abs() < 1.5,
        "{}",
        a.throughput_bps
    );
    for t in &summary.tenants {
        assert_near_ideal(t, stated);
    }
}
