//! The lab on real namespaces: topology up and torn down (after a good and a failing
//! run), short end-to-end runs of two iperf3 tenants under `tonic` and the
//! kernel's HTB, of 8 flows against 64 under `hash` and `tonic`, and of each kind
//! of traffic the lab makes itself or with memcached (latency per GET, Poisson
//! rate, a class per destination). They need root and the lab's programs
//! (scripts/setup-lab.sh); without them each test fails in CI and, elsewhere, says
//! why and passes. The runs are serialised: they share the machine's cores and time
//! matters to them.

mod common;

use common::{assert_nothing_left, our_namespaces, tenant_means};
use lab::{LabError, LabOptions, Tools};
use policy::Scenario;
use std::path::Path;
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

/// The programs every lab run here needs.
const PROGRAMS: [(&str, &str); 3] = [
    ("iperf3", "--version"),
    ("sockperf", "--version"),
    ("ethtool", "--version"),
];

fn runnable(test: &str) -> bool {
    common::runnable(test, &PROGRAMS)
}

fn scenario(yaml: &str) -> Scenario {
    policy::parse_scenario(yaml, "test.yaml", Path::new("."), &lab::enforcer_names())
        .expect("valid scenario")
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

/// Runs `scenario` under `enforcer`, checks the record and that nothing is left
/// behind, and returns it with the per-tenant means of [`common::tenant_means`].
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

/// [`run_lab`] until the engine kept up with the link ([`common::kept_up`]): a
/// run whose engine fell behind vouches for none of its figures. Judging every
/// interval of the first run, a test failed once in CI on a run in which `web`
/// got 35.3 of its 53.0 Mbit/s and its capped app 32.4 in one interval against
/// the 31.5 allowed.
fn run_lab_kept_up(scenario: &Scenario, enforcer: &str) -> (report::RunRecord, Vec<(f64, f64)>) {
    let record = common::kept_up(enforcer, || run_lab(scenario, enforcer).0).unwrap_or_else(|| {
        panic!(
            "{enforcer}: the engine fell behind {} times",
            common::ATTEMPTS
        )
    });
    let means = tenant_means(&record);
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
fn an_engine_with_transmit_threads_shares_by_weight_and_keeps_every_check() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !runnable("an_engine_with_transmit_threads_shares_by_weight_and_keeps_every_check") {
        return;
    }
    let before = our_namespaces();
    // Three threads: the engine's own and two that send, 10 flows spread over them.
    let options = LabOptions {
        engine_threads: 3,
        ..LabOptions::default()
    };
    let record = lab::run(&two_tenants(), "wf2q", &options, &mut |_| {})
        .unwrap_or_else(|e| panic!("wf2q with transmit threads: {e}"));
    assert_nothing_left(&before);
    assert_eq!(record.provenance.settings["engine_threads"], "3");
    for c in &record.checks {
        assert!(c.ok, "{c:?}");
    }
    let means = tenant_means(&record);
    let total: f64 = means.iter().map(|m| m.0).sum();
    assert!(total > 0.8 * 100e6 && total < 1.05 * 100e6, "{means:?}");
    for (got, ideal) in &means {
        assert!((got - ideal).abs() / ideal < 0.15, "{means:?}");
    }
}

/// FairNIC's Fig. 10 shape at 100 Mbit/s: tenants of equal weight on an engine of
/// 2 cores; each of `costly`'s frames costs 800 us of engine CPU, so its 10 000
/// frames/s ask 8 cores. `calm` offers 5 000 frames/s that cost nothing.
fn costly_neighbour(cpu: &str) -> Scenario {
    scenario(&format!(
        r#"
name: lab-costly-neighbour-{cpu}
policy:
  link: {{ rate: 100Mbit }}
  engine: {{ cores: 2, cpu: {cpu} }}
  tenants: [{{ name: calm }}, {{ name: costly }}]
duration: 4s
interval: 500ms
traffic:
  - {{ name: calm-udp, tenant: calm, kind: udp, rate: 40Mbit, size: 1000B, flows: 2 }}
  - {{ name: costly-udp, tenant: costly, kind: udp, rate: 80Mbit, size: 1000B, flows: 2, cost: 800us }}
"#
    ))
}

/// Runs [`costly_neighbour`]: every check passes, and the calm tenant's share of
/// its ideal (after the first second) is returned with the engine's counters.
fn calm_share(cpu: &str, enforcer: &str) -> (f64, report::RunRecord, lab::EngineStats) {
    let before = our_namespaces();
    let (record, stats) = lab::run_with_engine_stats(
        &costly_neighbour(cpu),
        enforcer,
        &LabOptions::default(),
        &mut |_| {},
    )
    .unwrap_or_else(|e| panic!("{enforcer} with engine.cpu {cpu}: {e}"));
    assert_nothing_left(&before);
    for c in &record.checks {
        assert!(c.ok, "{enforcer}, {cpu}: {c:?}");
    }
    let means = tenant_means(&record);
    eprintln!("{enforcer}, {cpu}: (throughput, ideal) per tenant in bit/s: {means:?}");
    let (got, ideal) = means[0];
    (
        got / ideal,
        record,
        stats.expect("nicsched's engine keeps counters"),
    )
}

#[test]
fn engine_cores_spend_costs_and_only_cpu_isolation_keeps_the_calm_tenant_at_its_ideal() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !runnable(
        "engine_cores_spend_costs_and_only_cpu_isolation_keeps_the_calm_tenant_at_its_ideal",
    ) {
        return;
    }
    // One queue for both: the costly tenant's frames fill it and the cores.
    let (fifo, _, _) = calm_share("fifo", "wf2q");
    assert!(fifo < 0.7, "fifo: calm got {fifo:.3} of its ideal");

    let (weighted, record, stats) = calm_share("weighted", "wf2q");
    assert!(
        weighted >= 0.9,
        "weighted: calm got {weighted:.3} of its ideal"
    );
    let cores = stats.cores.expect("a run with engine cost has cores");
    assert_eq!(cores.tenant_busy_ns.len(), 2, "one thread per engine core");
    // The costly tenant's frames took the cores' time, measured, not asked.
    assert!(record.engine_cpu[1].busy_ns > 10 * record.engine_cpu[0].busy_ns);
    assert!(record.engine_cpu[1].refused_packets > 0);
    let calm_frames = stats.frames[0].total();
    assert!(
        record.engine_cpu[0].refused_packets * 100 <= calm_frames,
        "calm refused {} of {calm_frames}",
        record.engine_cpu[0].refused_packets
    );
    assert!(
        record
            .checks
            .iter()
            .any(|c| c.name == "engine-conservation")
    );

    // FairNIC: each tenant on its own core, so the costly frames never touch the
    // calm tenant's core, exactly.
    let (fairnic, _, stats) = calm_share("weighted", "fairnic");
    assert!(
        fairnic >= 0.9,
        "fairnic: calm got {fairnic:.3} of its ideal"
    );
    let per_core = stats
        .cores
        .expect("a run with engine cost has cores")
        .tenant_busy_ns;
    assert_eq!(
        per_core[0][1], 0,
        "costly frames on calm's core: {per_core:?}"
    );
    assert_eq!(
        per_core[1][0], 0,
        "calm frames on costly's core: {per_core:?}"
    );
    assert!(per_core[1][1] > 0, "{per_core:?}");
}

/// TONIC's Fig. 9 case, shorter: equal tenants, 8 iperf3 flows against 64, 1 Gbit/s.
fn few_against_many() -> Scenario {
    scenario(
        r#"
name: lab-few-against-many
policy:
  link: { rate: 1Gbit, queues: 8 }
  tenants:
    - { name: few, cores: [0, 1, 2, 3] }
    - { name: many, cores: [4, 5, 6, 7] }
duration: 10s
interval: 500ms
traffic:
  - { name: few-bulk, tenant: few, kind: bulk, flows: 8 }
  - { name: many-bulk, tenant: many, kind: bulk, flows: 64 }
"#,
    )
}

#[test]
fn hash_favours_the_tenant_with_more_flows_and_tonic_does_not() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !runnable("hash_favours_the_tenant_with_more_flows_and_tonic_does_not") {
        return;
    }
    // The share of the 8 flows over the second half: iperf3 -P 64 sometimes takes
    // 1.5 s to open its streams, and CUBIC flows sharing a queue converge over
    // seconds (in 4 s runs `hash` gave the 8 flows 0.28-0.47).
    let share_of_few = |enforcer: &str| {
        let (record, _) = run_lab(&few_against_many(), enforcer);
        let late: Vec<_> = record
            .intervals
            .iter()
            .filter(|i| i.start_ns >= 5_000_000_000)
            .collect();
        let bytes = |t: usize| -> f64 {
            late.iter()
                .map(|i| record.tenant_throughput_bps(i, t))
                .sum()
        };
        bytes(0) / (bytes(0) + bytes(1))
    };
    // Measured 0.28-0.33 over the second half (10 s runs, CUBIC, 64 packets per
    // Tx queue), once 0.444 on a busy CI machine; the tenants' ideal is 0.5, and
    // an even split lands within 0.45-0.55 (as tonic's below).
    let hash = share_of_few("hash");
    assert!(hash < 0.45, "hash gave the 8 flows {hash:.3} of the link");
    let tonic = share_of_few("tonic");
    assert!(
        (tonic - 0.5).abs() < 0.05,
        "tonic gave the 8 flows {tonic:.3} of the link"
    );
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
    assert!(error.to_string().contains("t1-bulk server"), "{error}");
    // The log the error names is there to read, in the run's own directory, which
    // is all the run leaves.
    let LabError::Tool { log, .. } = &error else {
        panic!("{error}")
    };
    assert!(log.is_file(), "{error}");
    std::fs::remove_dir_all(log.parent().expect("the run's directory")).unwrap();
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

#[test]
fn engine_cpu_costs_linux_htb_does_not_spend_are_refused_before_anything_is_built() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !runnable("engine_cpu_costs_linux_htb_does_not_spend_are_refused_before_anything_is_built") {
        return;
    }
    let before = our_namespaces();
    let costly = scenario(
        r#"
name: lab-costly
policy:
  link: { rate: 100Mbit }
  tenants: [{ name: a }, { name: b }]
duration: 2s
traffic:
  - { name: heavy, tenant: a, kind: udp, rate: 10Mbit, cost: 2us }
  - { name: light, tenant: b, kind: bulk }
"#,
    );
    let error = lab::run(&costly, "linux-htb", &LabOptions::default(), &mut |_| {}).unwrap_err();
    assert!(
        error.to_string().contains("traffic `heavy` has a `cost`"),
        "{error}"
    );
    let mut cores = two_tenants();
    cores.policy.engine.cores = 2;
    let error = lab::run(&cores, "linux-htb", &LabOptions::default(), &mut |_| {}).unwrap_err();
    assert!(error.to_string().contains("`engine.cores: 2`"), "{error}");
    assert_nothing_left(&before);
}

#[test]
fn a_policy_past_htbs_limits_is_refused_under_linux_htb_before_anything_is_built() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !runnable("a_policy_past_htbs_limits_is_refused_under_linux_htb_before_anything_is_built") {
        return;
    }
    // 1024 ports both ways and the catch-all: 2049 u32 prios, the kernel has 2047.
    let ports: Vec<String> = (1..=1024).map(|p| p.to_string()).collect();
    let wide = scenario(&format!(
        "name: lab-wide\npolicy:\n  link: {{ rate: 100Mbit }}\n  tenants:\n    - name: t1\n      apps:\n        - {{ name: wide, match: {{ ports: [{}] }} }}\nduration: 1s\ntraffic:\n  - {{ name: t1-bulk, tenant: t1, kind: bulk }}\n",
        ports.join(", ")
    ));
    let before = our_namespaces();
    // A run that got as far as building makes its folder first.
    let out = std::env::temp_dir().join(format!("nicsched-lab-wide-{}", std::process::id()));
    let options = LabOptions {
        out: Some(out.clone()),
        ..LabOptions::default()
    };
    let error = lab::run(&wide, "linux-htb", &options, &mut |_| {}).unwrap_err();
    let built = out.exists();
    let _ = std::fs::remove_dir_all(&out);
    assert!(!built, "{} was made", out.display());
    assert!(matches!(error, LabError::Unsupported(_)), "{error:?}");
    assert!(
        error
            .to_string()
            .contains(&lab::htb_limits(&wide.policy).unwrap_err().to_string()),
        "{error}"
    );
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
    // Interrupted once its traffic runs (an iperf3 client in each tenant's
    // namespace), polled for with a deadline: the run is 4 s long, so an
    // `Interrupted` result is what says it stopped early.
    let watcher = std::thread::spawn(move || {
        for _ in 0..1000 {
            let new: Vec<String> = our_namespaces()
                .into_iter()
                .filter(|n| !watcher_before.contains(n))
                .collect();
            let tenants: Vec<&String> = new.iter().filter(|n| n.contains("-t")).collect();
            let sending = tenants.len() == 2
                && tenants.iter().all(|ns| {
                    std::process::Command::new("ip")
                        .args(["netns", "pids", ns])
                        .output()
                        .is_ok_and(|o| !o.stdout.is_empty())
                });
            if sending {
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
    let result = lab::run(&two_tenants(), "tonic", &LabOptions::default(), &mut |_| {});
    assert!(watcher.join().unwrap(), "the run's traffic never started");
    assert!(
        matches!(result, Err(LabError::Interrupted)),
        "{:?}",
        result.map(|_| ())
    );
    assert_nothing_left(&before);
}

/// A command that makes several runs holds the stop signals across them: a signal
/// that arrives between two runs (or during one's teardown) stops the next before
/// it builds anything, for each of INT, TERM, HUP and QUIT.
#[test]
fn a_stop_signal_between_runs_stops_the_next() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !runnable("a_stop_signal_between_runs_stops_the_next") {
        return;
    }
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        let before = our_namespaces();
        let session = lab::StopSignals::install();
        // SAFETY: raise delivers the signal to this thread before it returns; the
        // handler the guard installed only sets a flag.
        assert_eq!(unsafe { libc::raise(signal) }, 0);
        assert!(lab::interrupted(), "signal {signal} was caught");
        let result = lab::run(&two_tenants(), "tonic", &LabOptions::default(), &mut |_| {});
        assert!(
            matches!(result, Err(LabError::Interrupted)),
            "signal {signal}: {:?}",
            result.map(|_| ())
        );
        assert!(
            lab::interrupted(),
            "signal {signal}: still set for the run after"
        );
        drop(session);
        assert_nothing_left(&before);
    }
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

/// T2's GETs of 1 KiB items beside T1's bulk: closed loop on two connections and
/// open loop at 400 requests/s, 3 s.
fn memcached_scenario() -> Scenario {
    scenario(
        r#"
name: lab-memcached
policy:
  link: { rate: 100Mbit, queues: 4 }
  tenants:
    - { name: t1, weight: 1, cores: [0, 1] }
    - name: t2
      weight: 1
      cores: [2, 3]
      apps:
        - { name: kvs, priority: 0, match: { proto: tcp, ports: [11211, 11212] } }
duration: 3s
interval: 500ms
traffic:
  - { name: t1-bulk, tenant: t1, kind: bulk, flows: 2 }
  - { name: t2-kvs, tenant: t2, app: kvs, kind: rpc, request: 64B, response: 1KiB, concurrency: 2 }
  - { name: t2-kvs-open, tenant: t2, app: kvs, kind: rpc, response: 1KiB, concurrency: 2, rate: 400 }
"#,
    )
}

#[test]
fn memcached_gets_have_their_latency_recorded() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !common::runnable(
        "memcached_gets_have_their_latency_recorded",
        &[PROGRAMS.as_slice(), &[("memcached", "--version")]].concat(),
    ) {
        return;
    }
    let before = our_namespaces();
    let record = lab::run(
        &memcached_scenario(),
        "tonic",
        &LabOptions::default(),
        &mut |_| {},
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_nothing_left(&before);
    let latency = |traffic: &str| {
        &record
            .latency
            .iter()
            .find(|l| l.traffic == traffic)
            .unwrap_or_else(|| panic!("no latency record for {traffic}"))
            .histogram_ns
    };
    let closed = latency("t2-kvs");
    let open = latency("t2-kvs-open");
    eprintln!(
        "closed loop: {} GETs, p50 {} us, p99 {} us; open loop: {} GETs, p50 {} us, p99 {} us",
        closed.len(),
        closed.value_at_quantile(0.5) / 1000,
        closed.value_at_quantile(0.99) / 1000,
        open.len(),
        open.value_at_quantile(0.5) / 1000,
        open.value_at_quantile(0.99) / 1000
    );
    // A 1 KiB reply takes ~90 us on a 100 Mbit/s link: thousands of round trips
    // in 3 s, the median above that and far below a second. A single one may beat
    // it (the engine sends up to 100 us ahead of the emulated link), not a real
    // round trip through the engine.
    assert!(closed.len() > 300, "{} GETs", closed.len());
    for h in [closed, open] {
        assert!(
            h.min() >= 10_000,
            "faster than any round trip: {} ns",
            h.min()
        );
        let p50 = h.value_at_quantile(0.5);
        assert!((87_000..50_000_000).contains(&p50), "p50 {p50} ns");
    }
    // Open loop: 400/s for 3 s, whatever the replies do.
    let expected = 400.0 * 3.0;
    let got = open.len() as f64;
    assert!(
        (got / expected - 1.0).abs() < 0.1,
        "{got} GETs, {expected} planned"
    );
}

#[test]
fn a_failing_memcached_names_its_log_and_leaves_nothing_behind() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !common::runnable(
        "a_failing_memcached_names_its_log_and_leaves_nothing_behind",
        &[PROGRAMS.as_slice(), &[("memcached", "--version")]].concat(),
    ) {
        return;
    }
    let before = our_namespaces();
    let dir = std::env::temp_dir().join(format!("nicsched-lab-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // One that cannot start, and one that ends in the middle of the run.
    let dies = dir.join("memcached-dies");
    std::fs::write(&dies, "#!/bin/sh\nexec timeout 1 memcached \"$@\"\n").unwrap();
    std::fs::set_permissions(&dies, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    for (memcached, says) in [
        ("false", "t2-kvs server"),
        (dies.to_str().unwrap(), "memcached load generator"),
    ] {
        let options = LabOptions {
            out: Some(dir.join("logs")),
            tools: Tools {
                memcached: memcached.into(),
                ..Tools::default()
            },
            ..LabOptions::default()
        };
        let error = lab::run(&memcached_scenario(), "fifo", &options, &mut |_| {}).unwrap_err();
        let text = error.to_string();
        eprintln!("{memcached}: {text}");
        assert!(matches!(error, LabError::Tool { .. }), "{text}");
        assert!(text.contains(says), "{text}");
        assert!(text.contains(".memcached.log"), "{text}");
        assert_nothing_left(&before);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn poisson_datagrams_arrive_at_the_asked_rate() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !runnable("poisson_datagrams_arrive_at_the_asked_rate") {
        return;
    }
    let before = our_namespaces();
    let scenario = scenario(
        r#"
name: lab-poisson
policy:
  link: { rate: 1Gbit }
  tenants: [{ name: t1 }]
duration: 3s
interval: 500ms
seed: 3
traffic:
  - { name: t1-poisson, tenant: t1, kind: poisson, rate: 40Mbit, size: 1000B, flows: 4 }
"#,
    );
    let record = lab::run(&scenario, "fifo", &LabOptions::default(), &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    assert_nothing_left(&before);
    let (got, ideal) = tenant_means(&record)[0];
    // 40 Mbit/s of payload is 41.1 Mbit/s of IPv4 datagrams of 1028 B.
    let asked = 40e6 * 1028.0 / 1000.0;
    eprintln!("poisson: {got:.4e} bit/s at the sink, {asked:.4e} asked");
    assert!((ideal / asked - 1.0).abs() < 1e-9, "ideal {ideal}");
    assert!(
        (got / asked - 1.0).abs() < 0.05,
        "got {got:.4e} bit/s, asked {asked:.4e}"
    );
}

#[test]
fn split_by_destination_gives_a_class_per_flow() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !runnable("split_by_destination_gives_a_class_per_flow") {
        return;
    }
    let before = our_namespaces();
    let scenario = scenario(
        r#"
name: lab-split
policy:
  link: { rate: 100Mbit }
  tenants:
    - name: t1
      apps:
        - { name: spread, match: { proto: tcp, ports: [6000] }, split: { by: destination, max_rate: 1Gbit } }
    - name: t2
duration: 3s
interval: 500ms
traffic:
  - { name: t1-spread, tenant: t1, app: spread, kind: bulk, flows: 4 }
  - { name: t2-bulk, tenant: t2, kind: bulk, flows: 2 }
"#,
    );
    let (record, stats) =
        lab::run_with_engine_stats(&scenario, "wf2q", &LabOptions::default(), &mut |_| {})
            .unwrap_or_else(|e| panic!("{e}"));
    assert_nothing_left(&before);
    let stats = stats.expect("the engine ran");
    // Four destinations of t1's split app; t2's app is not split and adds none.
    assert_eq!(stats.split_classes, Some(4), "{stats:?}");
    // The sink still counts each tenant's bytes as its app's.
    let means = tenant_means(&record);
    eprintln!("split: (throughput, ideal) per tenant in bit/s: {means:?}");
    let spread = record
        .classes
        .iter()
        .position(|c| c.tenant == "t1" && c.app == "spread")
        .expect("t1/spread is reported");
    let spread_bytes: u64 = record.intervals.iter().map(|i| i.class_bytes[spread]).sum();
    assert!(spread_bytes > 0);
    for (t, (got, ideal)) in means.iter().enumerate() {
        assert!(
            (got - ideal).abs() / ideal < 0.25,
            "tenant {t}: got {got:.3e} bit/s, ideal {ideal:.3e}"
        );
    }
}

/// Udp flows above their split class's cap, beside a TCP tenant: the classes
/// held at their cap once filled the app's queue and locked the other flows out
/// (`cdn` got 114.7 under `htb`, 126.3 under `valve` and 210.2 under `wf2q` of
/// an ideal of 300 on 400 Mbit/s, `batch` the rest). The app's queue now shares
/// its room among its split classes by dynamic thresholds (sched's accounting):
/// 299.9, 299.1 and 299.7 in 8 s, `batch` 99.7-100.0.
#[test]
fn udp_flows_above_their_split_cap_are_not_locked_out() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !runnable("udp_flows_above_their_split_cap_are_not_locked_out") {
        return;
    }
    let scenario = scenario(
        r#"
name: lab-split-udp
policy:
  link: { rate: 400Mbit }
  tenants:
    - name: cdn
      weight: 3
      apps:
        - name: edge
          match: { proto: udp, ports: [6000] }
          split: { by: destination, max_rate: 50Mbit }
    - { name: batch, weight: 1 }
duration: 5s
interval: 500ms
traffic:
  - { name: cdn-edge, tenant: cdn, app: edge, kind: udp, rate: 420Mbit, size: 1200B, flows: 7 }
  - { name: batch-bulk, tenant: batch, kind: bulk, flows: 2 }
"#,
    );
    for enforcer in ["htb", "valve", "wf2q"] {
        let (_, means) = run_lab_kept_up(&scenario, enforcer);
        for (tenant, (got, ideal)) in ["cdn", "batch"].iter().zip(means) {
            assert!(
                (got - ideal).abs() < 0.05 * ideal,
                "{enforcer}: {tenant} got {got:.3e} of {ideal:.3e} bit/s"
            );
        }
    }
}

/// A scenario written to scenario.md that no code here was tuned for: a tenant
/// with a declared source prefix, apps matched by protocol and port with a
/// priority and a cap, and every kind of traffic, started and stopped mid-run.
fn unseen() -> Scenario {
    scenario(
        r#"
name: lab-unseen
policy:
  link: { rate: 100Mbit, queues: 4 }
  tenants:
    - name: web
      weight: 2
      cores: [0, 1]
      match: { src: 172.31.7.0/24 }
      apps:
        - { name: api, priority: 0, match: { proto: tcp, ports: [8080] } }
        - { name: batch, max_rate: 30Mbit, match: { proto: tcp, ports: [9000] } }
    - name: stream
      cores: [2]
      apps:
        - { name: video, match: { proto: udp, ports: [5004] } }
    - { name: other, cores: [3] }
duration: 4s
interval: 250ms
traffic:
  - { name: web-api, tenant: web, app: api, kind: rpc, request: 64B, response: 512B }
  - { name: web-batch, tenant: web, app: batch, kind: bulk, flows: 3 }
  - { name: stream-video, tenant: stream, app: video, kind: poisson, rate: 20Mbit, size: 1200B, flows: 2 }
  - { name: other-bulk, tenant: other, kind: bulk, flows: 2, start: 1s }
  - { name: other-udp, tenant: other, kind: udp, rate: 5Mbit, flows: 1, stop: 3s }
"#,
    )
}

#[test]
fn an_unseen_scenario_runs_unchanged_in_sim_and_lab_with_the_same_shape() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !runnable("an_unseen_scenario_runs_unchanged_in_sim_and_lab_with_the_same_shape") {
        return;
    }
    let scenario = unseen();
    // The simulator's frame: the lab does not depend on the simulator, both fill
    // the measurement frame of `report::measure`.
    let mut asked = report::measure::asked_demands_bps(&scenario, &Default::default());
    let (lab, means) = run_lab_kept_up(&scenario, "valve");
    // The closed-loop rpc is judged at what its fastest 1% of round trips carry
    // where that is below the model's demand (the `rpc-round-trip` check).
    let fastest_ns = lab.latency[0].histogram_ns.value_at_quantile(0.01);
    asked[0] = asked[0].min(report::measure::closed_loop_demand_bps(
        512,
        &scenario.policy.link,
        fastest_ns,
    ));
    let simulated = report::measure::empty_record(&scenario, "valve", report::Mode::Sim, &asked);
    assert_eq!(simulated.mode, report::Mode::Sim);
    assert_eq!(lab.tenants, simulated.tenants);
    assert_eq!(lab.classes, simulated.classes);
    assert_eq!(lab.intervals.len(), simulated.intervals.len());
    for (l, s) in lab.intervals.iter().zip(&simulated.intervals) {
        assert_eq!(l.steady, s.steady, "the same intervals are steady");
        assert_eq!(
            l.class_ideal_bps, s.class_ideal_bps,
            "the same ideal in both worlds, at the rpc's demand"
        );
    }
    assert_eq!(
        lab.latency.iter().map(|l| &l.traffic).collect::<Vec<_>>(),
        ["web-api"]
    );
    assert!(lab.latency[0].histogram_ns.len() > 100, "the rpc ran");
    // After the first half second (TCP's start, the token bucket's initial burst)
    // the capped app never exceeds its cap, and every tenant sent.
    let batch = lab
        .classes
        .iter()
        .position(|c| c.tenant == "web" && c.app == "batch")
        .expect("web/batch is reported");
    for interval in lab
        .intervals
        .iter()
        .filter(|i| i.steady && i.start_ns >= 500_000_000)
    {
        assert!(
            interval.class_throughput_bps(batch) < 30e6 * 1.05,
            "web/batch above its 30 Mbit/s cap: {}",
            interval.class_throughput_bps(batch)
        );
    }
    assert!(means.iter().all(|(got, _)| *got > 0.0), "{means:?}");
}

/// The check of `record` named `name`; fails the test if the run made none.
fn check<'a>(record: &'a report::RunRecord, name: &str) -> &'a report::Check {
    record
        .checks
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no {name} check among {:?}", record.checks))
}

const LAB_CHECKS: [&str; 8] = [
    "meter-vs-programs",
    "app-attribution",
    "offered-demand",
    "rpc-round-trip",
    "undeclared",
    "conservation",
    "meter",
    "engine",
];

#[test]
fn an_app_without_a_match_gets_its_traffic_in_the_lab_as_in_the_simulator() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !runnable("an_app_without_a_match_gets_its_traffic_in_the_lab_as_in_the_simulator") {
        return;
    }
    // Issue 10's case: an app without a match beside a matched, prioritised one.
    let scenario = scenario(
        r#"
name: lab-attribution
policy:
  link: { rate: 1Gbit, queues: 4 }
  tenants:
    - name: svc
      cores: [0, 1]
      apps:
        - { name: probe, priority: 0, match: { proto: tcp, ports: [11111] } }
        - { name: batch, priority: 1 }
duration: 3s
interval: 500ms
traffic:
  - { name: svc-batch, tenant: svc, app: batch, kind: bulk, flows: 4 }
"#,
    );
    let (record, _) = run_lab(&scenario, "wf2q");
    let names: Vec<&str> = record.checks.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, LAB_CHECKS);
    for c in &record.checks {
        eprintln!("{}: {} {}", c.name, c.ok, c.detail);
    }
    // The engine and the meter agree whatever the classifier does.
    for name in ["conservation", "meter"] {
        assert!(check(&record, name).ok, "{:?}", check(&record, name));
    }
    // Issue 10 found the lab's classifier putting `batch`'s traffic in the
    // tenant's implicit default (0 Mbit/s for batch, 561 Mbit/s at iperf3's
    // server) while the simulator put it in `batch`; an app without a match is
    // now its tenant's catch-all in both worlds, and the checks vouch for it.
    for name in ["app-attribution", "meter-vs-programs"] {
        assert!(check(&record, name).ok, "{:?}", check(&record, name));
    }
    let batch = record
        .classes
        .iter()
        .position(|c| c.tenant == "svc" && c.app == "batch")
        .expect("svc/batch is reported");
    for interval in &record.intervals {
        let (batch_bps, tenant_bps) = (
            interval.class_throughput_bps(batch),
            record.tenant_throughput_bps(interval, 0),
        );
        assert!(
            batch_bps == tenant_bps,
            "svc/batch at {batch_bps} bit/s of its tenant's {tenant_bps}"
        );
    }
    assert!(
        tenant_means(&record)[0].0 > 0.5e9,
        "{:?}",
        tenant_means(&record)
    );
}

#[test]
fn a_flood_that_offers_less_than_asked_is_judged_by_what_it_offered() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !runnable("a_flood_that_offers_less_than_asked_is_judged_by_what_it_offered") {
        return;
    }
    // 64 B datagrams at 2 Gbit/s: iperf3 offers a fraction of that on any host.
    let scenario = scenario(
        r#"
name: lab-short-flood
policy:
  link: { rate: 1Gbit, queues: 4 }
  tenants:
    - { name: bulk, cores: [0, 1] }
    - { name: flood, cores: [2, 3] }
duration: 4s
interval: 500ms
traffic:
  - { name: bulk-tcp, tenant: bulk, kind: bulk, flows: 4 }
  - { name: flood-udp, tenant: flood, kind: udp, rate: 2Gbit, size: 64B, flows: 2 }
"#,
    );
    let (record, means) = run_lab(&scenario, "wf2q");
    for c in &record.checks {
        eprintln!("{}: {} {}", c.name, c.ok, c.detail);
    }
    let names: Vec<&str> = record.checks.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, LAB_CHECKS);
    let demand = check(&record, "offered-demand");
    assert!(!demand.ok, "{demand:?}");
    assert!(
        demand
            .detail
            .starts_with("flood-udp asked 2.875 Gbit/s, offered ")
            && demand.detail.ends_with("the ideal uses the offered load"),
        "{demand:?}"
    );
    // With the demand it asked, each tenant's ideal was half the link; with what
    // it offered, the flood's is that and the bulk tenant's the rest.
    let (bulk, flood) = (means[0], means[1]);
    assert!(flood.1 < 0.5e9, "the flood's ideal {:.4e}", flood.1);
    assert!(
        (bulk.1 + flood.1 - 1e9).abs() < 1.0,
        "the link is shared out: {means:?}"
    );
    // Right, or flagged: on a machine too busy for 1 Gbit/s of small datagrams
    // and TCP beside them the engine leaves the link idle, every tenant gets
    // less than the enforcer gives it, and the `engine` check says so.
    let engine = check(&record, "engine");
    assert!(
        bulk.0 >= 0.95 * bulk.1 || !engine.ok,
        "the bulk tenant got {:.4e} bit/s of its ideal {:.4e}, and {engine:?}",
        bulk.0,
        bulk.1
    );
    for name in [
        "meter-vs-programs",
        "app-attribution",
        "conservation",
        "meter",
    ] {
        assert!(check(&record, name).ok, "{:?}", check(&record, name));
    }
}

#[test]
fn an_open_loop_rpc_is_judged_by_what_its_clients_sent() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !runnable("an_open_loop_rpc_is_judged_by_what_its_clients_sent") {
        return;
    }
    // Issue 25's defect 11: sockperf takes about 2 s from its launch to its first
    // request, and nothing said so.
    let scenario = scenario(
        r#"
name: lab-open-loop-rpc
policy:
  link: { rate: 1Gbit, queues: 4 }
  tenants:
    - name: svc
      cores: [0, 1]
      apps:
        - { name: kv, priority: 0, match: { proto: tcp, ports: [11111] } }
        - { name: batch, priority: 1 }
duration: 5s
interval: 500ms
traffic:
  - { name: batch-tcp, tenant: svc, app: batch, kind: bulk, flows: 2 }
  - { name: get, tenant: svc, app: kv, kind: rpc, response: 4KiB, rate: 5000, concurrency: 2 }
"#,
    );
    let (record, _) = run_lab(&scenario, "wf2q");
    for c in &record.checks {
        eprintln!("{}: {} {}", c.name, c.ok, c.detail);
    }
    let names: Vec<&str> = record.checks.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, LAB_CHECKS);
    let kv = record
        .classes
        .iter()
        .position(|c| c.app == "kv")
        .expect("svc/kv is reported");
    // The intervals before the meter saw the first response: the rpc offered
    // nothing there, whatever the enforcer did.
    let silent = record
        .intervals
        .iter()
        .position(|i| i.class_bytes[kv] > 0)
        .expect("the rpc's responses reached the sink");
    let demand = check(&record, "offered-demand");
    // A client the lab had to kill (busy machine) leaves no count: named, not judged.
    if demand
        .detail
        .starts_with("get: not compared: a sockperf client wrote no summary to ")
    {
        eprintln!("not judged: {}", demand.detail);
        return;
    }
    assert!(
        demand
            .detail
            .starts_with("get asked 170.1 Mbit/s (5000 requests/s of 4096 B), offered "),
        "{demand:?}"
    );
    if silent == 0 {
        eprintln!("sockperf sent from the run's first interval on");
        return;
    }
    // At least one of 10 intervals missing is 10% of the run: the check fails,
    // names the seconds, and the ideal has the rpc idle until it started: never
    // while the meter saw its responses, and in at least the first interval.
    // (The start is the clients' run time back from when the lab stopped them,
    // so it may be a little early, never late.)
    assert!(!demand.ok, "{demand:?}");
    assert!(demand.detail.contains(", none in its first "), "{demand:?}");
    assert!(
        demand.detail.contains("the ideal uses the offered load"),
        "{demand:?}"
    );
    let active = record
        .intervals
        .iter()
        .position(|i| i.class_active[kv])
        .expect("the rpc is active in the ideal");
    assert!(
        (1..=silent).contains(&active),
        "idle in the ideal until interval {active}, first seen at the sink in {silent}"
    );
}
