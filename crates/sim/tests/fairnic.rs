//! `fairnic` in the simulator: tenants' shares of a saturated link follow their
//! weights and caps through tokens, and its core mask keeps a well-behaved tenant at
//! its ideal beside an antagonist that saturates the engine's cores.

mod common;

use common::{beside, checked_run};
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
