//! `fairnic` in the simulator: tenants' shares of a saturated link follow their
//! weights and caps through tokens, and its core mask keeps a well-behaved tenant at
//! its ideal beside an antagonist that saturates the engine's cores.

mod common;

use common::{beside, checked_run};
use proptest::prelude::*;
use report::{Summary, summarize};

fn summary(text: &str) -> Summary {
    summarize(&checked_run(text, "fairnic"))
}

fn backlogged(tenants: &str) -> Summary {
    summary(&format!(
        "policy:
  link: {{ rate: 10Gbit }}
  tenants: {tenants}
duration: 1s
interval: 250ms
traffic:
  - {{ tenant: a, kind: bulk, flows: 4 }}
  - {{ tenant: b, kind: bulk, flows: 4 }}
"
    ))
}

fn shares(summary: &Summary) -> Vec<f64> {
    let total: f64 = summary.tenants.iter().map(|t| t.throughput_bps).sum();
    summary
        .tenants
        .iter()
        .map(|t| t.throughput_bps / total)
        .collect()
}

#[test]
fn equal_weights_share_the_link_equally() {
    let s = shares(&backlogged("[{ name: a }, { name: b }]"));
    eprintln!("equal weights: {s:?}");
    assert!((s[0] - 0.5).abs() < 0.5 * 0.05, "{s:?}");
}

#[test]
fn weights_one_to_three_share_the_link_one_to_three() {
    let s = shares(&backlogged("[{ name: a }, { name: b, weight: 3 }]"));
    eprintln!("weights 1:3: {s:?}");
    assert!((s[0] - 0.25).abs() < 0.25 * 0.05, "{s:?}");
    assert!((s[1] - 0.75).abs() < 0.75 * 0.05, "{s:?}");
}

#[test]
fn a_capped_tenant_never_exceeds_its_cap() {
    let s = backlogged("[{ name: a, max_rate: 2Gbit }, { name: b }]");
    let a = s.tenants[0].throughput_bps;
    let b = s.tenants[1].throughput_bps;
    eprintln!("capped at 2 Gbit/s: a {a}, b {b}");
    assert!(a <= 2e9 * 1.001, "{a}");
    assert!(a >= 2e9 * 0.95, "{a}");
    assert!(a + b >= 10e9 * 0.9, "work conserving: {}", a + b);
}

/// FairNIC's bar: a victim beside an antagonist of equal weight whose packets cost
/// the engine 20 times more, or that floods it with small packets, on two cores.
fn victim_share(packet_cost: &str, antagonist: &str) -> f64 {
    let s = summary(&beside("fifo", packet_cost, antagonist));
    let victim = &s.tenants[0];
    victim.throughput_bps / victim.ideal_bps
}

#[test]
fn the_core_mask_keeps_the_victim_at_its_ideal_beside_a_costly_antagonist() {
    let share = victim_share("1us", "kind: udp, rate: 2Gbit, size: 1000B, cost: 20us");
    eprintln!("costly antagonist: victim at {share:.3} of its ideal");
    assert!(share >= 0.95, "{share}");
}

#[test]
fn the_core_mask_keeps_the_victim_at_its_ideal_beside_a_small_packet_flood() {
    let share = victim_share("2us", "kind: udp, rate: 1Gbit, size: 64B");
    eprintln!("64 B flood: victim at {share:.3} of its ideal");
    assert!(share >= 0.95, "{share}");
}

/// The largest relative error of a tenant's throughput against its ideal over the
/// run's steady intervals from `from_s` on, with the interval and tenant it was in.
fn worst_interval_error(record: &report::RunRecord, from_s: f64) -> (f64, String) {
    let mut worst = (0.0, String::new());
    for interval in record.intervals.iter().filter(|i| i.steady) {
        if (interval.start_ns as f64) < from_s * 1e9 {
            continue;
        }
        for (t, name) in record.tenants.iter().enumerate() {
            let ideal = interval.tenant_ideal_bps[t];
            if !interval.tenant_active[t] || ideal <= 0.0 {
                continue;
            }
            let bytes: u64 = (0..record.classes.len())
                .filter(|&c| record.class_tenant[c] == t)
                .map(|c| interval.class_bytes[c])
                .sum();
            let bps = bytes as f64 * 8.0 / interval.length_s();
            let error = (bps - ideal).abs() / ideal;
            if error > worst.0 {
                worst = (
                    error,
                    format!(
                        "{name} at {:.2} s: {bps:.0} against {ideal:.0}",
                        interval.start_ns as f64 / 1e9
                    ),
                );
            }
        }
    }
    worst
}

fn claimed_share_error(text: &str) -> f64 {
    let scenario = policy::parse_scenario(
        text,
        "s.yaml",
        std::path::Path::new("."),
        &sched::registry::names(),
    )
    .unwrap();
    sched::approximation("fairnic", &scenario.policy)
        .unwrap()
        .share_error_max
        .unwrap()
}

/// Issue 25 (1): 16 cores by weights 1, 2, 3, 2, 1 are 2, 4, 5, 3 and 2; with two
/// flows each, the second, third and fourth tenants used only two of their cores,
/// and the others' tokens went to the pool: the weight-1 tenants got +97% and
/// +120%, the weight-3 one -50%.
#[test]
fn a_tenant_with_fewer_flows_than_cores_in_its_mask_gets_its_share() {
    for flows in [1, 2, 16] {
        let text = format!(
            "policy:
  link: {{ rate: 10Gbit }}
  engine: {{ cores: 16 }}
  tenants:
    - {{ name: t1, weight: 1 }}
    - {{ name: t2, weight: 2 }}
    - {{ name: t3, weight: 3 }}
    - {{ name: t4, weight: 2, max_rate: 1Gbit }}
    - {{ name: t5, weight: 1 }}
duration: 1s
interval: 250ms
traffic:
  - {{ tenant: t1, kind: bulk, flows: {flows} }}
  - {{ tenant: t2, kind: bulk, flows: {flows} }}
  - {{ tenant: t3, kind: bulk, flows: {flows} }}
  - {{ tenant: t4, kind: bulk, flows: {flows} }}
  - {{ tenant: t5, kind: bulk, flows: {flows} }}
"
        );
        let (error, at) = worst_interval_error(&checked_run(&text, "fairnic"), 0.0);
        eprintln!("{flows} flows each: worst {:.3}% ({at})", error * 100.0);
        assert!(error <= claimed_share_error(&text), "{flows} flows: {at}");
    }
}

/// Issue 25 (2): 2 cores, weights 1, 2, 3, 2, the second capped at 3 Gbit/s, the
/// fourth idle from 0.5 s to 1.5 s: the weight-1 tenant took all of its 2.5
/// Gbit/s (3.75 against 1.75), the capped one and the weight-3 one none of it.
#[test]
fn stealers_share_what_an_idle_tenant_leaves_by_weight() {
    let text = "policy:
  link: { rate: 10Gbit }
  engine: { cores: 2 }
  tenants:
    - { name: t1, weight: 1 }
    - { name: t2, weight: 2, max_rate: 3Gbit }
    - { name: t3, weight: 3 }
    - { name: t4, weight: 2 }
duration: 2s
interval: 250ms
traffic:
  - { tenant: t1, kind: bulk, flows: 2 }
  - { tenant: t2, kind: bulk, flows: 2 }
  - { tenant: t3, kind: bulk, flows: 2 }
  - { tenant: t4, kind: bulk, flows: 2, stop: 500ms }
  - { tenant: t4, kind: bulk, flows: 2, start: 1500ms }
";
    let record = checked_run(text, "fairnic");
    let (error, at) = worst_interval_error(&record, 0.0);
    eprintln!("worst {:.3}% ({at})", error * 100.0);
    assert!(error <= sched::fairnic::STEAL_SHARE_ERROR_MAX, "{at}");
}

/// The link stays busy while tenants are backlogged: two tenants of weights 1
/// and 2 beside an idle one of weight 8, whose base rate reaches them through the
/// link's pool. A stealer past its allowance waited for a full pool while the one
/// within its allowance held no packet, and the link idled meanwhile: 988-995 of
/// 1000 Mbit/s in every interval.
#[test]
fn the_link_stays_busy_while_stealers_are_past_their_allowances() {
    let record = checked_run(
        "policy:
  link: { rate: 1Gbit }
  tenants:
    - { name: a, weight: 1 }
    - { name: b, weight: 2 }
    - { name: c, weight: 8 }
duration: 6s
interval: 500ms
traffic:
  - { tenant: a, kind: bulk, flows: 2 }
  - { tenant: b, kind: bulk, flows: 2 }
",
        "fairnic",
    );
    for interval in &record.intervals[1..] {
        let sent_bits = interval.class_bytes.iter().sum::<u64>() as f64 * 8.0;
        let mbps = sent_bits / interval.length_s() / 1e6;
        assert!(
            mbps >= 999.0,
            "{mbps:.1} Mbit/s until {} ns",
            interval.end_ns
        );
    }
    let (error, at) = worst_interval_error(&record, 0.5);
    assert!(error <= 0.01, "{at}");
}

/// A capped tenant back from idle comes with its cores' buckets and its pool
/// full, two periods of its base rate each: capped at 35.5 Mbit/s on 3 of 11
/// engine cores, it sent 64.6 in its first whole interval, past the grain of two
/// periods `check` stated (the claims oracle, seed 17). The run's `claims` check
/// holds it to the four `check` states now.
#[test]
fn a_capped_tenant_back_from_idle_stays_within_the_burst_check_states() {
    let record = checked_run(
        "policy:
  link: { rate: 100Mbit, queues: 12 }
  engine: { cores: 11 }
  tenants:
    - { name: t0, weight: 716, max_rate: 10826kbit }
    - { name: t1, weight: 990, min_rate: 4164kbit, max_rate: 35490kbit, cores: [0, 5, 6] }
    - { name: t2, weight: 1 }
    - { name: t3, weight: 2 }
duration: 2800ms
interval: 200ms
traffic:
  - { tenant: t0, kind: bulk, flows: 5 }
  - { tenant: t1, kind: bulk, flows: 5, start: 1066ms }
  - { tenant: t2, kind: udp, rate: 18961kbit, flows: 5 }
  - { tenant: t3, kind: poisson, rate: 9102kbit, size: 200B, flows: 5 }
",
        "fairnic",
    );
    let claims = record.checks.iter().find(|c| c.name == "claims").unwrap();
    assert!(
        claims.detail.contains("tenants above max_rate: t1"),
        "{claims:?}"
    );
}

/// Issue 25 (3): one core, `cpu: weighted`. The antagonist's datagrams cost the
/// core 20 µs each, 1.5 times the core at 600 Mbit/s; the masks share the one core,
/// which served it in arrival order whatever `cpu` said, and the victim's sends
/// found the core's queue full: 29 Mbit/s against 500. By weight, the victim's
/// sends (which cost nothing) get through, and the antagonist keeps what the core
/// can do for it, 50 000 datagrams a second (400 Mbit/s); the victim takes the
/// rest of the link, as from an idle tenant.
#[test]
fn a_core_shared_by_masks_is_shared_by_weight_under_weighted() {
    let text = "policy:
  link: { rate: 1Gbit }
  engine: { cores: 1, cpu: weighted }
  tenants: [{ name: victim }, { name: antagonist }]
duration: 2s
interval: 250ms
traffic:
  - { tenant: victim, kind: bulk }
  - { tenant: antagonist, kind: udp, rate: 600Mbit, size: 1000B, cost: 20us }
";
    let s = summary(text);
    let (victim, antagonist) = (&s.tenants[0], &s.tenants[1]);
    eprintln!(
        "victim {:.1} Mbit/s, antagonist {:.1} (ideal {:.1} each)",
        victim.throughput_bps / 1e6,
        antagonist.throughput_bps / 1e6,
        victim.ideal_bps / 1e6
    );
    assert!(victim.throughput_bps >= victim.ideal_bps, "{victim:?}");
    assert!(antagonist.throughput_bps >= 400e6 * 0.98, "{antagonist:?}");
    assert!(
        victim.throughput_bps + antagonist.throughput_bps >= 1e9 * 0.98,
        "work conserving"
    );
}

/// Every steady interval's tenants within what `check` states for fairnic
/// ([`sched::fairnic::share_error_allowed_bps`]); the first failure's text.
fn beyond_the_claim(text: &str) -> Option<String> {
    let scenario = policy::parse_scenario(
        text,
        "s.yaml",
        std::path::Path::new("."),
        &sched::registry::names(),
    )
    .unwrap();
    let record = checked_run(text, "fairnic");
    // The bounds hold from the second interval after a tenant starts or stops.
    let mut active_before: Option<&Vec<bool>> = None;
    for interval in &record.intervals {
        let changed = active_before.is_some_and(|before| *before != interval.tenant_active);
        active_before = Some(&interval.tenant_active);
        if !interval.steady || changed {
            continue;
        }
        let stealing = interval.tenant_active.iter().any(|active| !active);
        for (t, name) in record.tenants.iter().enumerate() {
            let ideal = interval.tenant_ideal_bps[t];
            if !interval.tenant_active[t] || ideal <= 0.0 {
                continue;
            }
            let bytes: u64 = (0..record.classes.len())
                .filter(|&c| record.class_tenant[c] == t)
                .map(|c| interval.class_bytes[c])
                .sum();
            let bps = bytes as f64 * 8.0 / interval.length_s();
            let allowed = sched::fairnic::share_error_allowed_bps(
                &scenario.policy,
                ideal,
                interval.length_s(),
                stealing,
            );
            if (bps - ideal).abs() > allowed {
                return Some(format!(
                    "{name} at {:.2} s: {bps:.0} against {ideal:.0}, allowed ±{allowed:.0}",
                    interval.start_ns as f64 / 1e9
                ));
            }
        }
    }
    None
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Weights from 1 to 1000, caps and guarantees, flows fewer and more than a
    /// tenant's cores, cores fewer and more than tenants, and a tenant idle for a
    /// third of the run. 12 cases in CI; before a release, raise the count (96
    /// passed when the bounds were set).
    #[test]
    fn generated_policies_stay_within_what_check_states(
        weights in proptest::collection::vec(1u32..1000, 2..7),
        caps_percent in proptest::collection::vec(proptest::option::of(2u64..60), 7),
        mins_percent in proptest::collection::vec(proptest::option::of(1u64..10), 7),
        flows in proptest::collection::vec(1u32..6, 7),
        cores in 1u16..13,
        idle in proptest::option::of(0usize..7),
        seed in 0u64..1000,
    ) {
        let mut text = format!(
            "policy:\n  link: {{ rate: 10Gbit }}\n  engine: {{ cores: {cores} }}\n  tenants:\n"
        );
        for (i, w) in weights.iter().enumerate() {
            text += &format!("    - {{ name: t{i}, weight: {w}");
            if let Some(min) = mins_percent[i] {
                text += &format!(", min_rate: {}Mbit", min * 100);
            }
            if let Some(cap) = caps_percent[i] {
                let cap = cap.max(mins_percent[i].unwrap_or(0));
                text += &format!(", max_rate: {}Mbit", cap * 100);
            }
            text += " }\n";
        }
        text += &format!("duration: 1500ms\ninterval: 250ms\nseed: {seed}\ntraffic:\n");
        let idle = idle.map(|i| i % weights.len());
        for (i, f) in flows.iter().take(weights.len()).enumerate() {
            if Some(i) == idle {
                text += &format!("  - {{ tenant: t{i}, kind: bulk, flows: {f}, stop: 500ms }}\n");
                text += &format!("  - {{ tenant: t{i}, kind: bulk, flows: {f}, start: 1s }}\n");
            } else {
                text += &format!("  - {{ tenant: t{i}, kind: bulk, flows: {f} }}\n");
            }
        }
        let beyond = beyond_the_claim(&text);
        prop_assert!(beyond.is_none(), "{text}\n{}", beyond.unwrap_or_default());
    }
}
