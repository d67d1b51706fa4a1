//! The lab on real namespaces: topology up and torn down (after a good and a failing
//! run), and short end-to-end runs of two iperf3 tenants under `tonic` and the
//! kernel's HTB. They need root and the lab's programs (scripts/setup-lab.sh); without
//! them each test says why and passes. The runs are serialised: they share the
//! machine's cores and time matters to them.

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

/// Whether a lab name (`nslID…`) is this process's: the lab derives run ids from
/// the pid (`(pid % 1000) * 10 + k`), so lab runs of other processes on the same
/// machine (another test binary, an operator) are not mistaken for leftovers.
fn ours(name: &str) -> bool {
    let digits: String = name
        .strip_prefix("nsl")
        .unwrap_or("")
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse::<u32>()
        .is_ok_and(|id| id / 10 == std::process::id() % 1000)
}

/// This process's lab namespaces.
fn our_namespaces() -> Vec<String> {
    lab::lab_namespaces()
        .expect("ip netns list")
        .into_iter()
        .filter(|n| ours(n))
        .collect()
}

fn names_left() -> (Vec<String>, String) {
    let namespaces = our_namespaces();
    let links = std::process::Command::new("ip")
        .args(["-o", "link"])
        .output()
        .expect("ip link");
    let links = String::from_utf8_lossy(&links.stdout).into_owned();
    (namespaces, links)
}

fn assert_nothing_left(before: &[String]) {
    let (now, links) = names_left();
    let new: Vec<&String> = now.iter().filter(|n| !before.contains(n)).collect();
    assert!(new.is_empty(), "namespaces left behind: {new:?}");
    for line in links.lines() {
        let name = line.split(':').nth(1).unwrap_or("").trim();
        assert!(
            !(ours(name) && (name.contains('t') || name.ends_with("up") || name.ends_with("br"))),
            "interface left behind: {line}"
        );
    }
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

/// Runs `scenario` under `enforcer`, checks the record and that nothing is left
/// behind, and returns it with the per-tenant means of [`tenant_means`].
fn run_lab(scenario: &Scenario, enforcer: &str) -> (report::RunRecord, Vec<(f64, f64)>) {
    let before = our_namespaces();
    let record = lab::run(scenario, enforcer, &LabOptions::default(), &mut |_| {})
        .unwrap_or_else(|e| panic!("{enforcer}: {e}"));
    assert_nothing_left(&before);
    assert!(record.is_well_formed());
    assert_eq!(record.mode, report::Mode::Lab);
    let means = tenant_means(&record);
    eprintln!("{enforcer}: (throughput, ideal) per tenant in bit/s: {means:?}");
    (record, means)
}

fn run_and_check(enforcer: &str, tolerance: f64) {
    let (_, means) = run_lab(&two_tenants(), enforcer);
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
    let before = our_namespaces();
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
    let before = our_namespaces();
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
    let before = our_namespaces();
    let options = LabOptions {
        keep: true,
        ..LabOptions::default()
    };
    lab::run(&one_second(), "fifo", &options, &mut |_| {}).unwrap();
    let kept: Vec<String> = our_namespaces()
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
    let before = our_namespaces();
    let watcher_before = before.clone();
    // Once the run's namespaces exist its handler is in place: interrupt it then.
    let watcher = std::thread::spawn(move || {
        for _ in 0..500 {
            let now = our_namespaces();
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

#[test]
fn rate_limiters_hold_a_tenant_to_its_cap() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !runnable("rate_limiters_hold_a_tenant_to_its_cap") {
        return;
    }
    let capped = scenario(
        r#"
name: lab-capped
policy:
  link: { rate: 100Mbit, queues: 4 }
  tenants:
    - { name: capped, max_rate: 20Mbit }
    - { name: open }
duration: 4s
traffic:
  - { name: capped-bulk, tenant: capped, kind: bulk, flows: 4 }
  - { name: open-bulk, tenant: open, kind: bulk, flows: 4 }
"#,
    );
    for enforcer in ["valve", "wheel"] {
        let (_, means) = run_lab(&capped, enforcer);
        let (got, ideal) = means[0];
        assert_eq!(ideal, 20e6);
        assert!(
            (got - ideal).abs() < 0.03 * ideal,
            "{enforcer}: the capped tenant got {got:.4e} bit/s of its 20 Mbit/s cap"
        );
        assert!(
            means[1].0 > 0.8 * means[1].1,
            "{enforcer}: the open tenant takes the rest: {means:?}"
        );
    }
}

#[test]
fn a_udp_flood_leaves_its_neighbour_its_share_and_pays_the_drops() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !runnable("a_udp_flood_leaves_its_neighbour_its_share_and_pays_the_drops") {
        return;
    }
    let flood = scenario(
        r#"
name: lab-flood
policy:
  link: { rate: 100Mbit, queues: 4 }
  tenants:
    - { name: tcp, cores: [0, 1] }
    - { name: flood, cores: [2, 3] }
duration: 4s
traffic:
  - { name: tcp-bulk, tenant: tcp, kind: bulk, flows: 4 }
  - { name: flood-udp, tenant: flood, kind: udp, rate: 300Mbit, flows: 2 }
"#,
    );
    for enforcer in ["tonic", "valve", "linux-htb"] {
        let (record, means) = run_lab(&flood, enforcer);
        let (got, ideal) = means[0];
        assert_eq!(ideal, 50e6);
        assert!(
            got > 0.9 * ideal,
            "{enforcer}: the TCP tenant got {got:.4e} bit/s of its 50 Mbit/s"
        );
        // 300 Mbit/s offered for 4 s, 50 Mbit/s of it sent: most of the rest is dropped.
        assert!(
            record.tenant_drops[1] > 10_000,
            "{enforcer}: the flood's excess is counted against it: {:?}",
            record.tenant_drops
        );
    }
}
