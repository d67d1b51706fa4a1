//! Scenarios written to the spec that the shipped files do not cover: random tenant
//! counts, weights, queue counts, flow counts and core layouts. The verdicts must hold
//! for all of them, not only for the paper's settings.

use policy::parse_scenario;
use proptest::prelude::*;
use std::path::Path;

fn scenario(weights: &[u32], flows: &[u32], queues: u16, seed: u64) -> String {
    let mut text = format!("policy:\n  link: {{ rate: 10Gbit, queues: {queues} }}\n  tenants:\n");
    for (i, w) in weights.iter().enumerate() {
        text += &format!("    - name: t{i}\n      weight: {w}\n");
    }
    text += &format!("duration: 1s\ninterval: 250ms\nseed: {seed}\ntraffic:\n");
    for (i, f) in flows.iter().enumerate() {
        text += &format!("  - tenant: t{i}\n    kind: bulk\n    flows: {f}\n");
    }
    text
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn tonic_error_stays_within_what_check_promises(
        tenants in 2usize..5,
        weights in proptest::collection::vec(1u32..5, 4),
        flows in proptest::collection::vec(1u32..48, 4),
        queues in 4u16..33,
        seed in 0u64..1000,
    ) {
        let weights = &weights[..tenants];
        let flows = &flows[..tenants];
        let text = scenario(weights, flows, queues, seed);
        let scenario = parse_scenario(&text, "unseen.yaml", Path::new("."), &sched::registry::names()).unwrap();
        let promised = sched::approximation("tonic", &scenario.policy)
            .unwrap()
            .share_error_max
            .unwrap();
        let record = sim::run(&scenario, "tonic", sim::HostModel::default(), &mut |_| {}).unwrap();
        let summary = report::summarize(&record);
        // Flows start in slow start, so the first interval may stray further.
        prop_assert!(
            summary.fairness.rel_error_mean <= promised + 0.03,
            "{text}\nrel_error_mean {} but check promised {promised}",
            summary.fairness.rel_error_mean
        );
        prop_assert!(summary.fairness.rel_error_max <= promised + 0.1);
        prop_assert!(summary.utilization > 0.98);
    }

    #[test]
    fn hash_lets_the_tenant_with_more_flows_win(
        few in 1u32..9,
        ratio in 8u32..12,
        queues in 2u16..17,
        seed in 0u64..1000,
    ) {
        let text = scenario(&[1, 1], &[few, few * ratio], queues, seed);
        let scenario = parse_scenario(&text, "unseen.yaml", Path::new("."), &sched::registry::names()).unwrap();
        let record = sim::run(&scenario, "hash", sim::HostModel::default(), &mut |_| {}).unwrap();
        let summary = report::summarize(&record);
        prop_assert!(
            summary.tenants[1].throughput_bps > summary.tenants[0].throughput_bps,
            "{text}"
        );
    }
}

#[test]
fn tonic_is_fair_to_a_single_flow_against_many_on_any_queue_count() {
    for (weight, queues) in [(1, 2), (1, 16), (3, 6), (4, 64)] {
        let text = scenario(&[weight, weight], &[1, 64], queues, 3);
        let scenario = parse_scenario(
            &text,
            "unseen.yaml",
            Path::new("."),
            &sched::registry::names(),
        )
        .unwrap();
        let record = sim::run(&scenario, "tonic", sim::HostModel::default(), &mut |_| {}).unwrap();
        let summary = report::summarize(&record);
        assert!(
            summary.fairness.jain_min >= 0.99,
            "{text}\njain_min {}",
            summary.fairness.jain_min
        );
    }
}
