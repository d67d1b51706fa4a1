//! `valve`'s apps held to the bound `check` states for them (issue 25, defect 8):
//! each app within 12% of its ideal share, or 3% of its tenant's where that is
//! more. A tenant mixes a priority-0 app, a guaranteed one, a capped one, a
//! weight-1 UDP app and a weight-3 bulk app beside a backlogged tenant, for 30 s of
//! overload with apps starting and stopping, as a user writes from the docs.
//! Judged per 500 ms interval once the ideal has been steady for a second.

// Only `checked_run` of the shared helpers is used here.
mod common;

use report::{Interval, RunRecord};

/// `check -e valve`'s bound on an app's error: a part of its ideal, or of its
/// tenant's ideal where that is more.
const APP_SHARE: f64 = 0.12;
const TENANT_SHARE: f64 = 0.03;

/// The time the token rates and their lending need after the ideal changes:
/// traffic that stops leaves its queue to drain, and a new sender ramps up.
const SETTLE_NS: u64 = 1_000_000_000;

struct Case {
    tenant_a: &'static str,
    video: &'static str,
    ctl: &'static str,
    b: &'static str,
}

fn scenario(case: &Case) -> String {
    let Case {
        tenant_a,
        video,
        ctl,
        b,
    } = case;
    format!(
        "policy:
  link: {{ rate: 1Gbit }}
  tenants:
    - name: a
      {tenant_a}
      apps:
        - {{ name: ctl, priority: 0, match: {{ proto: udp, ports: [7000] }} }}
        - {{ name: db, min_rate: 150Mbit, match: {{ proto: tcp, ports: [5432] }} }}
        - {{ name: web, max_rate: 100Mbit, match: {{ proto: tcp, ports: [80] }} }}
        - {{ name: video, weight: 1, match: {{ proto: udp, ports: [9000] }} }}
        - {{ name: bulk, weight: 3 }}
    - name: b
duration: 30s
interval: 500ms
traffic:
  - {{ tenant: a, app: ctl, {ctl}, start: 2s, stop: 26s }}
  - {{ tenant: a, app: db, kind: bulk, flows: 2, start: 4s, stop: 22s }}
  - {{ tenant: a, app: web, kind: bulk, stop: 18s }}
  - {{ tenant: a, app: video, {video}, start: 1s }}
  - {{ tenant: a, app: bulk, kind: bulk, flows: 2, start: 6s, stop: 28s }}
  - {{ tenant: b, {b} }}
"
    )
}

/// Intervals whose ideal has not changed for [`SETTLE_NS`].
fn settled(record: &RunRecord) -> Vec<&Interval> {
    let mut changed_ns = 0;
    let mut out = Vec::new();
    for pair in record.intervals.windows(2) {
        let (before, now) = (&pair[0], &pair[1]);
        let moved = before
            .class_ideal_bps
            .iter()
            .zip(&now.class_ideal_bps)
            .any(|(b, n)| (b - n).abs() > 1e3);
        if moved || !now.steady {
            changed_ns = now.start_ns;
        }
        if now.start_ns >= changed_ns + SETTLE_NS {
            out.push(now);
        }
    }
    out
}

fn assert_apps_within_bound(case: &Case) {
    assert_apps_within_bound_in(&scenario(case));
}

fn assert_apps_within_bound_in(text: &str) {
    let record = common::checked_run(text, "valve");
    let judged = settled(&record);
    assert!(
        judged.len() >= 20,
        "only {} settled intervals: the scenario no longer tests what it is for\n{text}",
        judged.len()
    );
    for interval in judged {
        for (class, name) in record.classes.iter().enumerate() {
            let tenant = record.class_tenant[class];
            let ideal = interval.class_ideal_bps(class);
            let got = interval.class_throughput_bps(class);
            let bound = (APP_SHARE * ideal).max(TENANT_SHARE * interval.tenant_ideal_bps(tenant));
            assert!(
                (got - ideal).abs() <= bound,
                "{}/{} at {:.1} Mbit/s against an ideal of {:.1} (bound {:.1}) in the interval ending {} s\n{text}",
                name.tenant,
                name.app,
                got / 1e6,
                ideal / 1e6,
                bound / 1e6,
                interval.end_s()
            );
        }
    }
}

/// The weight-1 UDP app offered more than its share whatever else runs.
#[test]
fn a_flooding_udp_app_gets_its_share_beside_mixed_apps() {
    assert_apps_within_bound(&Case {
        tenant_a: "weight: 1",
        video: "kind: udp, rate: 400Mbit, flows: 2",
        ctl: "kind: poisson, rate: 40Mbit, size: 200B",
        b: "kind: bulk, flows: 2",
    });
}

/// The UDP app near its share (218 Mbit/s of payload, 222 at L3): below it while
/// the tenant's other apps are idle, above it while they send, so its queue
/// sometimes empties and valve sees its demand only as what it measured.
#[test]
fn a_udp_app_near_its_share_gets_it_beside_mixed_apps() {
    assert_apps_within_bound(&Case {
        tenant_a: "weight: 3",
        video: "kind: udp, rate: 218Mbit, size: 1470B, flows: 4",
        ctl: "kind: poisson, rate: 60Mbit, size: 200B",
        b: "kind: bulk, flows: 4",
    });
}

/// Small datagrams in the UDP app and a flooding neighbour tenant.
#[test]
fn small_datagrams_beside_a_flooding_tenant() {
    assert_apps_within_bound(&Case {
        tenant_a: "weight: 2",
        video: "kind: udp, rate: 250Mbit, size: 200B",
        ctl: "kind: udp, rate: 30Mbit, size: 64B",
        b: "kind: udp, rate: 2Gbit, flows: 4",
    });
}

/// An app capped at 21.8 Mbit/s, whose TCP sends are two segments (a capped
/// flow's), beside a sibling of 64 KiB sends and tenants of three bulk apps
/// (found by the claims oracle): with one packet per turn on own tokens it got
/// 17.5 Mbit/s over 5.5 s (15.6 in an interval), the sibling the rest.
#[test]
fn a_capped_app_of_small_sends_reaches_its_cap_beside_a_sibling_of_large_ones() {
    assert_apps_within_bound_in(
        "policy:
  link: { rate: 1Gbit }
  tenants:
    - name: t1
      weight: 2
      apps:
        - { name: a0, weight: 2, match: { proto: tcp, ports: [5000] } }
        - { name: a1, weight: 2, max_rate: 21848kbit, match: { proto: tcp, ports: [5001] } }
    - name: t3
      weight: 6
      apps:
        - { name: a0, match: { proto: tcp, ports: [5000] } }
        - { name: a1, match: { proto: tcp, ports: [5001] } }
    - name: t4
      weight: 4
      apps:
        - { name: a0, weight: 2, match: { proto: tcp, ports: [5000] } }
duration: 12s
interval: 500ms
seed: 243686
traffic:
  - { tenant: t1, app: a0, kind: bulk }
  - { tenant: t1, app: a1, kind: bulk, flows: 2 }
  - { tenant: t3, app: a0, kind: bulk }
  - { tenant: t3, app: a1, kind: bulk, flows: 3 }
  - { tenant: t3, app: default, kind: bulk, flows: 3 }
  - { tenant: t4, app: a0, kind: bulk, flows: 3 }
",
    );
}
