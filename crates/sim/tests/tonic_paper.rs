//! The shipped TONIC scenarios (§V of the paper) and the verdicts they must give.

use policy::load_scenario;
use report::{Summary, summarize};
use std::path::PathBuf;

fn scenario_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/tonic")
        .join(name)
}

fn simulate(file: &str, enforcer: &str) -> Summary {
    let scenario = load_scenario(&scenario_path(file), &sched::registry::names())
        .expect("shipped scenarios are valid");
    let record = sim::run(&scenario, enforcer, sim::HostModel::default(), &mut |_| {})
        .expect("shipped enforcers build");
    summarize(&record)
}

#[test]
fn tonic_shares_equally_at_every_asymmetry_while_hash_does_not() {
    for n in [1, 2, 4, 8] {
        let file = format!("asymmetry-1-{n}.yaml");
        let tonic = simulate(&file, "tonic");
        assert!(
            tonic.fairness.jain_min >= 0.99,
            "tonic at 1:{n}: jain_min {}",
            tonic.fairness.jain_min
        );
        assert!(
            tonic.utilization > 0.98,
            "tonic at 1:{n} is work conserving"
        );
    }
    let hash = simulate("asymmetry-1-8.yaml", "hash");
    assert!(
        hash.fairness.jain_mean < 0.9,
        "hash at 1:8: jain_mean {}",
        hash.fairness.jain_mean
    );
}

#[test]
fn tonic_follows_weights_and_xps_follows_cores() {
    for file in ["weighted-case1.yaml", "weighted-case2.yaml"] {
        let tonic = simulate(file, "tonic");
        assert!(
            tonic.fairness.rel_error_mean <= 0.03,
            "tonic {file}: rel_error_mean {}",
            tonic.fairness.rel_error_mean
        );
    }
    let xps = simulate("weighted-case2.yaml", "xps");
    assert!(
        xps.fairness.rel_error_mean > 0.3,
        "xps case 2 (cores 3:2:1, weights 2:3:5): rel_error_mean {}",
        xps.fairness.rel_error_mean
    );
    // Cores 3:2:1 on a round-robin NIC: t1 gets half the link, not its 20%.
    let t1 = &xps.tenants[0];
    assert!(
        (t1.throughput_bps / 5e9 - 1.0).abs() < 0.02,
        "{}",
        t1.throughput_bps
    );
}

#[test]
fn head_insertion_cuts_the_probe_latency_without_touching_fairness() {
    for file in [
        "prio-sockperf.yaml",
        "prio-memcached-1k.yaml",
        "prio-memcached-16k.yaml",
    ] {
        let xps = simulate(file, "xps");
        let tonic = simulate(file, "tonic");
        let band = simulate(file, "tonic-band");
        let (traffic, xps_latency) = xps.latency.iter().next().expect("one rpc traffic");
        let tonic_latency = &tonic.latency[traffic];
        assert!(
            tonic_latency.count > xps_latency.count,
            "{file}: more requests complete"
        );
        assert!(
            tonic_latency.mean_us * 1.5 < xps_latency.mean_us,
            "{file}: tonic mean {} us vs xps {} us",
            tonic_latency.mean_us,
            xps_latency.mean_us
        );
        assert!(
            tonic.fairness.jain_min >= 0.99,
            "{file}: tenants still share equally"
        );
        assert!(band.latency[traffic].p99_us <= tonic_latency.p99_us * 1.05);
    }
}
