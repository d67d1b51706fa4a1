//! Issue 25, defect 12: a priority-0 closed-loop rpc beside a bulk app
//! (scenarios/lab/rpc-closed-prio.yaml) is judged in the lab at the demand its
//! fastest round trips allow, and the run says so (`rpc-round-trip`).
//!
//! One lab run of 6 s under `wf2q` (up to three where the engine falls behind).
//! It needs root, iperf3 and sockperf; without them it fails in CI and,
//! elsewhere, says why and passes.

mod common;

use common::{assert_nothing_left, our_namespaces};
use lab::LabOptions;
use std::path::{Path, PathBuf};

const PROGRAMS: [(&str, &str); 3] = [
    ("iperf3", "--version"),
    ("sockperf", "--version"),
    ("ethtool", "--version"),
];

/// Intervals that start before this hold sockperf's start (about 2 s from its
/// launch to its first request) and TCP's.
const SETTLED_NS: u64 = 2_500_000_000;

/// A class's mean throughput and ideal over the settled intervals, bit/s.
fn settled(record: &report::RunRecord, class: usize) -> (f64, f64) {
    let intervals: Vec<_> = record
        .intervals
        .iter()
        .filter(|i| i.start_ns >= SETTLED_NS)
        .collect();
    let n = intervals.len() as f64;
    (
        intervals
            .iter()
            .map(|i| i.class_throughput_bps(class))
            .sum::<f64>()
            / n,
        intervals
            .iter()
            .map(|i| i.class_ideal_bps(class))
            .sum::<f64>()
            / n,
    )
}

/// The round trips each sockperf client of traffic `rpc` logged in `dir` (its
/// `--full-log`).
fn round_trips_per_client(dir: &Path, clients: u32) -> Vec<usize> {
    (0..clients)
        .map(|c| {
            let log = dir.join(format!("rpc.{c}.sockperf.csv"));
            let text =
                std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
            // A round trip's row starts with its packet number.
            text.lines()
                .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
                .count()
        })
        .collect()
}

#[test]
fn a_closed_loop_rpc_is_judged_at_the_round_trips_it_saw() {
    if !common::runnable(
        "a_closed_loop_rpc_is_judged_at_the_round_trips_it_saw",
        &PROGRAMS,
    ) {
        return;
    }
    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/lab/rpc-closed-prio.yaml");
    let scenario = policy::load_scenario(&file, &lab::enforcer_names()).expect("valid scenario");
    let link_bps = scenario.policy.link.rate_bps as f64;
    let dir: PathBuf =
        std::env::temp_dir().join(format!("nicsched-rpc-round-trip-{}", std::process::id()));
    let record = common::kept_up("wf2q", || {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // At SCHED_FIFO the four sockperf clients and their server take the
        // engine's core on 2 cores: the link lay idle 1.4-2.5% of the run while
        // frames waited, in 7 runs of 7. At normal priority, 0.6%. This test
        // judges throughput against the ideal, not latency.
        let options = LabOptions {
            out: Some(dir.clone()),
            realtime: false,
            ..LabOptions::default()
        };
        let before = our_namespaces();
        let run = lab::run(&scenario, "wf2q", &options, &mut |_| {})
            .unwrap_or_else(|e| panic!("wf2q: {e}"));
        assert_nothing_left(&before);
        run
    })
    .unwrap_or_else(|| panic!("the engine fell behind {} times", common::ATTEMPTS));
    for c in &record.checks {
        assert!(c.ok, "{}: {}", c.name, c.detail);
    }

    // Every connection answered: sockperf's server once served the first only.
    let per_client = round_trips_per_client(&dir, 4);
    let all: usize = per_client.iter().sum();
    eprintln!("round trips per connection: {per_client:?}");
    assert!(
        per_client.iter().all(|&n| n * 10 >= all),
        "a connection was starved by the server: {per_client:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);

    let check = record
        .checks
        .iter()
        .find(|c| c.name == "rpc-round-trip")
        .expect("the rpc-round-trip check");
    eprintln!("{}", check.detail);
    assert!(check.ok);
    assert!(
        check.detail.starts_with("rpc: fastest 1% of ")
            && check.detail.contains("the model's 33.6 µs")
            && check.detail.contains("the ideal uses"),
        "{}",
        check.detail
    );

    let (rpc, rpc_ideal) = settled(&record, 0);
    let (bulk, bulk_ideal) = settled(&record, 1);
    eprintln!(
        "rpc {:.1} of its ideal {:.1} Mbit/s, bulk {:.1} of {:.1}",
        rpc / 1e6,
        rpc_ideal / 1e6,
        bulk / 1e6,
        bulk_ideal / 1e6
    );
    // The ideal now gives the rpc what its fastest round trips carry (a few
    // hundred Mbit/s here, not the model's whole link) and the bulk app the rest.
    assert!(rpc_ideal < 0.6 * link_bps, "rpc's ideal {rpc_ideal}");
    assert!(((rpc_ideal + bulk_ideal) / link_bps - 1.0).abs() < 1e-6);
    // Its round trips under load are slower than its fastest 1% (a 16 KiB bulk
    // frame holds the link 131 µs; the bulk traffic's CPU on two cores), which
    // no fluid ideal counts. Measured (docs/results/lab.md, defect 12): with
    // sockperf at SCHED_FIFO the rpc got 0.60-0.72 of that ideal; at normal
    // priority, as here, 0.42. The bulk app takes what the rpc leaves.
    assert!(
        (0.3..=1.05).contains(&(rpc / rpc_ideal)),
        "rpc {rpc} of {rpc_ideal}"
    );
    assert!(bulk >= 0.95 * bulk_ideal, "bulk {bulk} of {bulk_ideal}");
    assert!(rpc + bulk > 0.95 * link_bps, "{rpc} + {bulk}");
}
