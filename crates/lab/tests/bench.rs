//! The engine benchmark on real namespaces: short runs (two rounds of 0.5 s per
//! path) of `fifo` through the engine and of plain kernel forwarding, counts checked for
//! consistency, and teardown after a good, a refused and an interrupted run. They
//! need root, ethtool and the `bridge` program (scripts/setup-lab.sh); without them
//! each test fails in CI and, elsewhere, says why and passes. Serialised: they share the cores, one sends SIGINT
//! to the process, and each checks that no namespace is left.

mod common;

use common::{assert_nothing_left, our_namespaces};
use lab::{BenchOptions, KERNEL_FORWARDING, LabError, PathKind};
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

fn runnable(test: &str) -> bool {
    common::runnable(test, &[("ethtool", "--version"), ("bridge", "-V")])
}

fn fifo_and_kernel(seconds: f64, rounds: u32) -> BenchOptions {
    BenchOptions {
        paths: vec!["fifo".into(), KERNEL_FORWARDING.into()],
        seconds,
        rounds,
        search_steps: 0,
        ..BenchOptions::default()
    }
}

/// Runs the benchmark on the built-in policy; with it, each (step, path) its
/// progress reported, in order, once each.
fn bench_with_steps(options: &BenchOptions) -> (lab::BenchReport, Vec<(usize, String)>) {
    let mut steps = Vec::new();
    let report = lab::run_bench(
        &lab::default_policy(),
        "built-in",
        options,
        &mut |step, path, _| {
            if steps.last() != Some(&(step, path.to_string())) {
                steps.push((step, path.to_string()));
            }
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    (report, steps)
}

#[test]
fn the_loss_free_search_paces_the_senders_within_the_saturating_offer() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !runnable("the_loss_free_search_paces_the_senders_within_the_saturating_offer") {
        return;
    }
    let before = our_namespaces();
    let options = BenchOptions {
        search_steps: 2,
        ..fifo_and_kernel(0.5, 1)
    };
    let (report, steps) = bench_with_steps(&options);
    assert_nothing_left(&before);
    eprintln!("{}", report.table());
    for p in &report.paths {
        let rate = p
            .loss_free_frames_per_s()
            .unwrap_or_else(|| panic!("{}: no loss-free rate", p.path));
        assert!(
            rate <= p.offered_frames_per_s() * 1.05,
            "{}: {rate} loss-free of {} offered",
            p.path,
            p.offered_frames_per_s()
        );
        // The first step of each path is its saturating trial (steps 0 and 3);
        // a path that lost frames then was probed at paced rates after it.
        let first = if p.kind() == PathKind::Engine { 0 } else { 3 };
        let probed: Vec<usize> = steps
            .iter()
            .filter(|(step, path)| *path == p.path && *step != first)
            .map(|(step, _)| *step)
            .collect();
        if p.loss() > options.loss_tolerance {
            assert_eq!(probed, [first + 1, first + 2], "{}: {steps:?}", p.path);
        } else {
            assert!(probed.is_empty(), "{}: {steps:?}", p.path);
            assert_eq!(rate, p.frames_per_s());
        }
    }
    let json = report.to_json();
    assert_eq!(json["search_steps"], 2);
    assert!(
        json["paths"][0]["loss_free_frames_per_s"]
            .as_f64()
            .is_some()
    );
}

#[test]
fn fifo_and_kernel_forwarding_deliver_frames_and_account_for_the_rest() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !runnable("fifo_and_kernel_forwarding_deliver_frames_and_account_for_the_rest") {
        return;
    }
    let before = our_namespaces();
    let (report, steps) = bench_with_steps(&fifo_and_kernel(0.5, 2));
    assert_nothing_left(&before);
    eprintln!("{}", report.table());
    // Two rounds: the bridge goes up for `kernel`, away for the second `fifo`.
    let fifo = "fifo".to_string();
    let kernel = KERNEL_FORWARDING.to_string();
    assert_eq!(
        steps,
        [
            (0, fifo.clone()),
            (1, kernel.clone()),
            (2, fifo),
            (3, kernel)
        ]
    );
    assert_eq!(report.paths.len(), 2);
    assert_eq!(report.paths[0].kind(), PathKind::Engine);
    assert_eq!(report.paths[1].kind(), PathKind::Kernel);
    for p in &report.paths {
        // Each round sends until its 0.5 s are up; how much longer a loaded
        // machine takes to notice is not this test's business.
        assert!(p.seconds >= 1.0, "{}: {} s", p.path, p.seconds);
        assert_eq!(p.round_frames_per_s.len(), 2, "{}", p.path);
        assert!(p.round_frames_per_s.iter().all(|&r| r > 0.0), "{}", p.path);
        assert!(p.offered_frames > 0, "{}: nothing offered", p.path);
        assert!(p.delivered_frames > 0, "{}: nothing forwarded", p.path);
        assert!(
            p.delivered_frames <= p.offered_frames,
            "{}: {} delivered of {} offered",
            p.path,
            p.delivered_frames,
            p.offered_frames
        );
        assert_eq!(
            p.lost_frames() + p.delivered_frames,
            p.offered_frames,
            "{}",
            p.path
        );
        // Every frame is one offered datagram: 64 B payload, 106 B on the wire.
        assert_eq!(
            p.delivered_bytes,
            p.delivered_frames * u64::from(report.frame_bytes()),
            "{}",
            p.path
        );
    }
    // The engine sent what reached the sink, and read no more than was offered.
    let fifo = &report.paths[0];
    let engine = fifo.engine.as_ref().expect("the engine's counters");
    assert!(fifo.delivered_frames <= engine.tx_frames);
    assert!(engine.rx_frames <= fifo.offered_frames);
    assert!(engine.tx_frames <= engine.rx_frames);
    assert!(report.paths[1].engine.is_none());
    assert_eq!(report.ratio_to_kernel(&report.paths[1]), Some(1.0));
    let json = report.to_json();
    assert_eq!(json["paths"][0]["path"], "fifo");
    assert!(json["paths"][0]["ratio_to_kernel"].as_f64().unwrap() > 0.0);
    assert_eq!(
        json["engine_realtime"],
        lab::engine_realtime_fits(1),
        "one engine thread runs at SCHED_FIFO wherever it leaves a core"
    );
}

#[test]
fn unknown_enforcers_are_refused_before_anything_is_built() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !runnable("unknown_enforcers_are_refused_before_anything_is_built") {
        return;
    }
    let before = our_namespaces();
    let options = BenchOptions {
        paths: vec!["nope".into(), KERNEL_FORWARDING.into()],
        ..BenchOptions::default()
    };
    let error = lab::run_bench(
        &lab::default_policy(),
        "built-in",
        &options,
        &mut |_, _, _| {},
    )
    .unwrap_err();
    assert!(error.to_string().contains("unknown enforcer"), "{error}");
    assert_nothing_left(&before);
}

#[test]
fn sigint_stops_the_benchmark_and_tears_down() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !runnable("sigint_stops_the_benchmark_and_tears_down") {
        return;
    }
    let before = our_namespaces();
    let pid = std::process::id().to_string();
    let mut sent = false;
    // Interrupted half a second into the first path, while the senders run: a 5 s
    // path that ends `Interrupted` stopped early.
    let result = lab::run_bench(
        &lab::default_policy(),
        "built-in",
        &fifo_and_kernel(5.0, 1),
        &mut |_, _, fraction| {
            if !sent && fraction >= 0.1 {
                sent = true;
                std::process::Command::new("kill")
                    .args(["-INT", &pid])
                    .status()
                    .unwrap();
            }
        },
    );
    assert!(sent, "the first path never got going");
    assert!(
        matches!(result, Err(LabError::Interrupted)),
        "{:?}",
        result.map(|_| ())
    );
    assert_nothing_left(&before);
}
