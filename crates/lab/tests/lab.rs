//! The lab on real namespaces: topology up and torn down (after a good and a failing
//! run), and short end-to-end runs of two iperf3 tenants under `tonic` and the
//! kernel's HTB. They need root and the lab's programs (scripts/setup-lab.sh); without
//! them each test says why and passes. The runs are serialised: they share the
//! machine's cores and time matters to them.

mod common;

use common::assert_nothing_left;
use lab::{LabError, LabOptions, Tools};
use policy::Scenario;
use std::path::Path;
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

fn runnable(test: &str) -> bool {
    if let Err(e) = lab::check_root() {
        eprintln!("skipping {test}: {e}");
        return false;
    }
    for program in ["iperf3", "sockperf", "ethtool"] {
        if std::process::Command::new(program)
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!("skipping {test}: `{program}` is missing (scripts/setup-lab.sh installs it)");
            return false;
        }
    }
    true
}

fn scenario(yaml: &str) -> Scenario {
    policy::parse_scenario(yaml, "test.yaml", Path::new(".")).expect("valid scenario")
}

/// Two tenants of weights 1 and 3, 2 and 8 iperf3 flows, 4 s.
fn two_tenants() -> Scenario {
    scenario(
        r#"
name: lab-two-tenants
policy:
  link: { rate: 100Mbit, queues: 4 }
  tenants:
    - { name: t1, weight: 1, cores: [0] }
    - { name: t2, weight: 3, cores: [1, 2, 3] }
duration: 4s
interval: 500ms
traffic:
  - { name: t1-bulk, tenant: t1, kind: bulk, flows: 2 }
  - { name: t2-bulk, tenant: t2, kind: bulk, flows: 8 }
"#,
    )
}

/// Per tenant: mean throughput and mean ideal over the steady intervals after the first second.
fn tenant_means(record: &report::RunRecord) -> Vec<(f64, f64)> {
    (0..record.tenants.len())
        .map(|t| {
            let steady: Vec<_> = record
                .intervals
                .iter()
                .filter(|i| i.steady && i.start_ns >= 1_000_000_000 && i.tenant_active(t))
                .collect();
            let n = steady.len().max(1) as f64;
            let got = steady
                .iter()
                .map(|i| record.tenant_throughput_bps(i, t))
                .sum::<f64>()
                / n;
            let ideal = steady.iter().map(|i| i.tenant_ideal_bps(t)).sum::<f64>() / n;
            (got, ideal)
        })
        .collect()
}

fn run_and_check(enforcer: &str, tolerance: f64) {
    let before = lab::lab_namespaces().unwrap();
    let scenario = two_tenants();
    let record = lab::run(&scenario, enforcer, &LabOptions::default(), &mut |_| {})
        .unwrap_or_else(|e| panic!("{enforcer}: {e}"));
    assert_nothing_left(&before);
    assert!(record.is_well_formed());
    assert_eq!(record.mode, report::Mode::Lab);
    let means = tenant_means(&record);
    eprintln!("{enforcer}: (throughput, ideal) per tenant in bit/s: {means:?}");
    let total: f64 = means.iter().map(|m| m.0).sum();
    assert!(
        total > 0.8 * 100e6,
        "{enforcer}: the link is used ({total:.3e} bit/s)"
    );
    assert!(
        total < 1.05 * 100e6,
        "{enforcer}: never above the link ({total:.3e} bit/s)"
    );
    for (t, (got, ideal)) in means.iter().enumerate() {
        let error = (got - ideal).abs() / ideal;
        assert!(
            error < tolerance,
            "{enforcer}: tenant {t} got {got:.3e} bit/s, ideal {ideal:.3e} (error {error:.2})"
        );
    }
}

#[test]
fn tonic_shares_the_link_by_weight() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if runnable("tonic_shares_the_link_by_weight") {
        run_and_check("tonic", 0.25);
    }
}

#[test]
fn linux_htb_shares_the_link_by_weight() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if runnable("linux_htb_shares_the_link_by_weight") {
        run_and_check("linux-htb", 0.25);
    }
}

#[test]
fn a_failing_tool_leaves_nothing_behind() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !runnable("a_failing_tool_leaves_nothing_behind") {
        return;
    }
    let before = lab::lab_namespaces().unwrap();
    let options = LabOptions {
        tools: Tools {
            iperf3: "false".into(),
            ..Tools::default()
        },
        ..LabOptions::default()
    };
    let error = lab::run(&two_tenants(), "tonic", &options, &mut |_| {}).unwrap_err();
    assert!(matches!(error, LabError::Tool { .. }), "{error}");
    assert!(error.to_string().contains("t1-bulk server"), "{error}");
    assert_nothing_left(&before);
}

#[test]
fn unknown_enforcers_are_refused_before_anything_is_built() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !runnable("unknown_enforcers_are_refused_before_anything_is_built") {
        return;
    }
    let before = lab::lab_namespaces().unwrap();
    let error = lab::run(&two_tenants(), "nope", &LabOptions::default(), &mut |_| {}).unwrap_err();
    assert!(error.to_string().contains("unknown enforcer"), "{error}");
    assert_nothing_left(&before);
}

fn one_second() -> Scenario {
    let mut s = two_tenants();
    s.duration_ns = 1_000_000_000;
    for t in &mut s.traffic {
        t.stop_ns = s.duration_ns;
    }
    s
}

#[test]
fn keep_leaves_the_namespaces_up_until_deleted() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !runnable("keep_leaves_the_namespaces_up_until_deleted") {
        return;
    }
    let before = lab::lab_namespaces().unwrap();
    let options = LabOptions {
        keep: true,
        ..LabOptions::default()
    };
    lab::run(&one_second(), "fifo", &options, &mut |_| {}).unwrap();
    let kept: Vec<String> = lab::lab_namespaces()
        .unwrap()
        .into_iter()
        .filter(|n| !before.contains(n))
        .collect();
    assert_eq!(
        kept.len(),
        4,
        "two tenants, the sink and the engine: {kept:?}"
    );
    // The topology is there to inspect: the engine holds a port per tenant and the uplink.
    let links = std::process::Command::new("ip")
        .args([
            "-n",
            kept.iter().find(|n| n.ends_with("-eng")).unwrap(),
            "-o",
            "link",
        ])
        .output()
        .unwrap();
    let links = String::from_utf8_lossy(&links.stdout);
    assert_eq!(
        links
            .lines()
            .filter(|l| l.contains("veth") || l.contains("@"))
            .count(),
        3,
        "{links}"
    );
    for ns in &kept {
        std::process::Command::new("ip")
            .args(["netns", "delete", ns])
            .status()
            .unwrap();
    }
    assert_nothing_left(&before);
}

#[test]
fn sigint_stops_the_run_and_tears_down() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !runnable("sigint_stops_the_run_and_tears_down") {
        return;
    }
    let before = lab::lab_namespaces().unwrap();
    let watcher_before = before.clone();
    // Once the run's namespaces exist its handler is in place: interrupt it then.
    let watcher = std::thread::spawn(move || {
        for _ in 0..500 {
            let now = lab::lab_namespaces().unwrap_or_default();
            if now.iter().filter(|n| !watcher_before.contains(n)).count() >= 4 {
                std::thread::sleep(std::time::Duration::from_millis(800));
                let pid = std::process::id().to_string();
                std::process::Command::new("kill")
                    .args(["-INT", &pid])
                    .status()
                    .unwrap();
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        false
    });
    let started = std::time::Instant::now();
    let result = lab::run(&two_tenants(), "tonic", &LabOptions::default(), &mut |_| {});
    assert!(
        watcher.join().unwrap(),
        "the run's namespaces never appeared"
    );
    assert!(
        matches!(result, Err(LabError::Interrupted)),
        "{:?}",
        result.map(|_| ())
    );
    assert!(started.elapsed().as_secs_f64() < 3.5, "stopped early");
    assert_nothing_left(&before);
}
