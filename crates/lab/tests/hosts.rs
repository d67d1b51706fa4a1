//! The lab across hosts on real namespaces: PicNIC's Fig. 7b scaled down
//! (scenarios/picnic/lab-fig7b.yaml: three hosts at 250 Mbit/s, a flow starting
//! every 5 s) under `picnic`, each flow against the simulator's rate for the same
//! scenario, every check passing and nothing left behind. It needs root and
//! iperf3 (scripts/setup-lab.sh); without them it fails in CI and, elsewhere, says
//! why and passes.

mod common;

use common::{assert_nothing_left, our_namespaces};
use lab::{LabError, LabOptions};
use policy::{AnyScenario, HostsScenario};
use std::path::{Path, PathBuf};

const PROGRAMS: [(&str, &str); 2] = [("iperf3", "--version"), ("ethtool", "--version")];

fn scenario_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/picnic/lab-fig7b.yaml")
}

fn load(path: &Path) -> HostsScenario {
    match policy::load_any_scenario(path, &lab::enforcer_names()).expect("valid scenario") {
        AnyScenario::Hosts(scenario) => scenario,
        AnyScenario::OneHost(_) => panic!("{} is across hosts", path.display()),
    }
}

/// Per traffic and phase (the spans between two starts, and the last to the end):
/// the mean delivered rate over the intervals in the second half of the phase,
/// for the traffic that runs then.
fn phase_means(scenario: &HostsScenario, record: &report::HostsRecord) -> Vec<Vec<Option<f64>>> {
    let mut starts: Vec<u64> = scenario
        .traffic
        .iter()
        .map(|t| t.traffic.start_ns)
        .collect();
    starts.sort_unstable();
    starts.dedup();
    let interval_s = scenario.interval_ns as f64 / 1e9;
    starts
        .iter()
        .enumerate()
        .map(|(p, &from)| {
            let to = starts.get(p + 1).copied().unwrap_or(scenario.duration_ns);
            let half = from + (to - from) / 2;
            let intervals: Vec<usize> = (0..record.delivered_bytes[0].len())
                .filter(|&k| {
                    let start = k as u64 * scenario.interval_ns;
                    start >= half && start + scenario.interval_ns <= to
                })
                .collect();
            assert!(
                !intervals.is_empty(),
                "phase {p} has no whole interval in its second half"
            );
            scenario
                .traffic
                .iter()
                .enumerate()
                .map(|(f, t)| {
                    (t.traffic.start_ns <= from && t.traffic.stop_ns >= to).then(|| {
                        intervals
                            .iter()
                            .map(|&k| record.delivered_bytes[f][k] as f64 * 8.0 / interval_s)
                            .sum::<f64>()
                            / intervals.len() as f64
                    })
                })
                .collect()
        })
        .collect()
}

#[test]
fn picnic_across_three_hosts_follows_the_simulator_phase_by_phase() {
    if !common::runnable(
        "picnic_across_three_hosts_follows_the_simulator_phase_by_phase",
        &PROGRAMS,
    ) {
        return;
    }
    let scenario = load(&scenario_path());
    let before = our_namespaces();
    let run = lab::hosts::run(&scenario, "picnic", &LabOptions::default(), &mut |_| {})
        .unwrap_or_else(|e| panic!("picnic: {e}"));
    assert_nothing_left(&before);
    assert!(
        lab::lab_namespaces().expect("ip netns list").is_empty(),
        "a lab namespace is left"
    );
    assert_eq!(run.settings["feedback_epoch_ns"], "20000000");
    assert!(run.settings["feedback_datagrams_received"] != "0");
    let (summary, _) =
        report::summarise_hosts(&scenario, &run.record, &report::measure::RpcPath::default());
    assert_eq!(summary.mode, "lab");
    for check in summary.checks.iter().chain(&run.checks) {
        assert!(check.ok, "{check:?}");
    }
    let simulated = sim::run_hosts(&scenario, "picnic", sim::HostModel::default(), &mut |_| {})
        .expect("picnic builds");
    let lab = phase_means(&scenario, &run.record);
    let sim = phase_means(&scenario, &simulated);
    for (p, (lab, sim)) in lab.iter().zip(&sim).enumerate() {
        for (f, (got, want)) in lab.iter().zip(sim).enumerate() {
            let name = &scenario.traffic[f].traffic.name;
            let (Some(got), Some(want)) = (got, want) else {
                assert_eq!(got.is_some(), want.is_some(), "phase {p}, {name}");
                continue;
            };
            eprintln!("phase {p}, {name}: lab {got:.4e} bit/s, sim {want:.4e}");
            assert!(
                (got - want).abs() <= 0.1 * want,
                "phase {p}, {name}: lab {got:.4e} bit/s, sim {want:.4e}"
            );
        }
    }
}

#[test]
fn traffic_the_lab_does_not_run_across_hosts_is_refused_before_anything_runs() {
    let mut scenario = load(&scenario_path());
    scenario.traffic[1].traffic.kind = policy::TrafficKind::Poisson {
        rate_bps: 10_000_000,
        size_bytes: 1_000,
        flows: 1,
    };
    let error = lab::hosts::run(&scenario, "picnic", &LabOptions::default(), &mut |_| {})
        .err()
        .expect("refused");
    let LabError::Unsupported(what) = &error else {
        panic!("{error}");
    };
    assert!(
        what.contains("`b-c`") && what.contains("bulk") && what.contains("nicsched sim"),
        "{what}"
    );
}
