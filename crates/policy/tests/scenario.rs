//! Scenarios: defaults, traffic kinds, a referenced policy file and mistakes.

use policy::*;
use std::path::{Path, PathBuf};

/// What nicsched passes the parser (`lab::enforcer_names()`: sched's registry, then
/// the lab's `linux-htb`), which this crate cannot depend on; the shipped scenarios
/// list every one of them.
const KNOWN_ENFORCERS: &[&str] = &[
    "fifo",
    "hash",
    "xps",
    "tonic",
    "tonic-band",
    "wf2q",
    "valve",
    "htb",
    "wheel",
    "picnic",
    "picnic-wc",
    "picnic-bps",
    "fairnic",
    "linux-htb",
];

const POLICY: &str = "link: {rate: 10Gbit}
tenants:
  - name: t1
    apps:
      - {name: batch, max_rate: 4Gbit}
  - name: t2
    min_rate: 2Gbit
";

fn inline(rest: &str) -> String {
    let indented: String = POLICY.lines().map(|l| format!("  {l}\n")).collect();
    format!("policy:\n{indented}{rest}")
}

#[track_caller]
fn fails(text: &str, line: u32, column: u32, fragment: &str) -> PolicyError {
    let e = parse_scenario(text, "dir/case.yaml", Path::new("dir"), KNOWN_ENFORCERS)
        .expect_err("must be refused");
    assert_eq!(
        (e.file.as_str(), e.line, e.column),
        ("dir/case.yaml", line, column),
        "{e}"
    );
    assert!(e.to_string().contains(fragment), "{e} lacks {fragment:?}");
    e
}

#[test]
fn defaults_and_kinds() {
    let text = inline(
        "duration: 15s
traffic:
  - {tenant: t1, kind: bulk}
  - {name: probe, tenant: t2, kind: rpc, rate: 1000/s, start: 1s, stop: 2s}
  - {tenant: t1, app: batch, kind: udp, rate: 1Gbit, flows: 4}
  - {tenant: t2, kind: poisson, rate: 100Mbit, size: 64B}
  - {tenant: t2, kind: rpc, request: 100B, response: 1KiB, concurrency: 8}
",
    );
    let s = parse_scenario(&text, "dir/case.yaml", Path::new("dir"), KNOWN_ENFORCERS).unwrap();
    assert_eq!(s.name, "case");
    assert_eq!(
        (s.duration_ns, s.interval_ns, s.seed),
        (15_000_000_000, 500_000_000, 1)
    );
    assert!(
        s.enforcers.is_empty(),
        "none named: the registry's defaults run"
    );
    let t = &s.traffic;
    // t1's `batch` has no match: it is the catch-all, and t1 has no `default`.
    assert_eq!(t[0].name, "t1-batch-bulk-1");
    assert_eq!(t[0].app, s.policy.catch_all_app(TenantId(0)));
    assert_eq!(t[0].kind, TrafficKind::Bulk { flows: 1 });
    assert_eq!((t[0].start_ns, t[0].stop_ns), (0, 15_000_000_000));
    assert_eq!(t[1].name, "probe");
    assert_eq!(
        t[1].kind,
        TrafficKind::Rpc {
            request_bytes: 64,
            response_bytes: 64,
            concurrency: 1,
            rate_per_s: Some(1000.0)
        }
    );
    assert_eq!(
        (t[1].start_ns, t[1].stop_ns),
        (1_000_000_000, 2_000_000_000)
    );
    assert_eq!(t[2].name, "t1-batch-udp-3");
    assert_eq!(
        t[2].kind,
        TrafficKind::Udp {
            rate_bps: 1_000_000_000,
            size_bytes: 1470,
            flows: 4
        }
    );
    assert_eq!(
        t[3].kind,
        TrafficKind::Poisson {
            rate_bps: 100_000_000,
            size_bytes: 64,
            flows: 1
        }
    );
    assert_eq!(
        t[4].kind,
        TrafficKind::Rpc {
            request_bytes: 100,
            response_bytes: 1024,
            concurrency: 8,
            rate_per_s: None
        }
    );
}

#[test]
fn header_keys() {
    let text = inline(
        "name: my-case\nduration: 2s\ninterval: 100ms\nseed: 7\nenforcers: [xps, tonic, linux-htb]\nlink: {rate: 5Gbit, queues: 4}\ntraffic: [{tenant: t1, kind: bulk, flows: 8}]\n",
    );
    let s = parse_scenario(&text, "x.yaml", Path::new("."), KNOWN_ENFORCERS).unwrap();
    assert_eq!(s.name, "my-case");
    assert_eq!((s.interval_ns, s.seed), (100_000_000, 7));
    assert_eq!(s.enforcers, vec!["xps", "tonic", "linux-htb"]);
    assert_eq!(
        (s.policy.link.rate_bps, s.policy.link.queues),
        (5_000_000_000, 4)
    );
    // The overridden queue count is the host's core count when no tenant names cores.
    assert_eq!(s.policy.host_cores, 4);
    assert_eq!(s.traffic[0].kind.flows(), 8);
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("policy-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("policies")).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn policy_by_path() {
    let dir = TempDir::new("by-path");
    std::fs::write(dir.0.join("policies/p.yaml"), POLICY).unwrap();
    let path = dir.0.join("case.yaml");
    std::fs::write(
        &path,
        "policy: policies/p.yaml\nduration: 1s\ntraffic: [{tenant: t2, kind: bulk}]\n",
    )
    .unwrap();
    let s = load_scenario(&path, KNOWN_ENFORCERS).unwrap();
    assert_eq!(s.name, "case");
    assert_eq!(s.policy, parse_policy(POLICY, "p.yaml").unwrap());
}

#[test]
fn an_error_inside_a_referenced_policy_names_that_file() {
    let dir = TempDir::new("bad-ref");
    std::fs::write(
        dir.0.join("policies/p.yaml"),
        "link: {rate: 10Gbit}\ntenants:\n  - name: a\n    weight: 0\n",
    )
    .unwrap();
    let path = dir.0.join("case.yaml");
    std::fs::write(
        &path,
        "policy: policies/p.yaml\nduration: 1s\ntraffic: [{tenant: a, kind: bulk}]\n",
    )
    .unwrap();
    let e = load_scenario(&path, KNOWN_ENFORCERS).unwrap_err();
    assert!(e.file.ends_with("policies/p.yaml"), "{e}");
    assert_eq!((e.line, e.column), (4, 13), "{e}");
    assert!(e.message.contains("weight"), "{e}");
}

#[test]
fn mistakes() {
    let bulk = "traffic: [{tenant: t1, kind: bulk}]\n";
    fails(
        &inline(&format!("duration: 1s\ncolor: red\n{bulk}")),
        10,
        1,
        "unknown key `color`",
    );
    fails(&inline(bulk), 1, 1, "missing required key `duration`");
    fails(
        &format!("duration: 1s\n{bulk}"),
        1,
        1,
        "missing required key `policy`",
    );
    fails(
        &inline(&format!("duration: 15\n{bulk}")),
        9,
        11,
        "has no unit",
    );
    fails(
        &inline(&format!("duration: 1s\ninterval: 2s\n{bulk}")),
        10,
        11,
        "interval 2s",
    );
    let e = fails(
        &inline(&format!("duration: 1s\nenforcers: [tonic, cbq]\n{bulk}")),
        10,
        20,
        "unknown enforcer `cbq`",
    );
    assert_eq!(
        e.hint,
        Some(format!("enforcers: {}", KNOWN_ENFORCERS.join(", ")))
    );
    fails(
        &inline("duration: 1s\ntraffic: []\n"),
        10,
        10,
        "at least one traffic",
    );
    fails(
        &inline("duration: 1s\ntraffic: [{tenant: t3, kind: bulk}]\n"),
        10,
        20,
        "unknown tenant `t3`",
    );
    let e = fails(
        &inline("duration: 1s\ntraffic: [{tenant: t1, app: kvs, kind: bulk}]\n"),
        10,
        29,
        "no app `kvs`",
    );
    assert!(e.hint.unwrap().ends_with("apps of `t1`: batch"));
    fails(
        &inline("duration: 1s\ntraffic: [{tenant: t1, kind: tcp}]\n"),
        10,
        30,
        "unknown traffic kind",
    );
    fails(
        &inline("duration: 1s\ntraffic: [{tenant: t1, kind: bulk, size: 1B}]\n"),
        10,
        36,
        "does not apply to bulk",
    );
    fails(
        &inline("duration: 1s\ntraffic: [{tenant: t1, kind: udp}]\n"),
        10,
        11,
        "missing required key `rate`",
    );
    fails(
        &inline("duration: 1s\ntraffic: [{tenant: t1, kind: bulk, flows: 0}]\n"),
        10,
        43,
        "out of range",
    );
    fails(
        &inline("duration: 1s\ntraffic: [{tenant: t1, kind: bulk, stop: 2s}]\n"),
        10,
        42,
        "stop at most the duration",
    );
    fails(
        &inline("duration: 1s\ntraffic: [{tenant: t1, kind: bulk, start: 1s}]\n"),
        10,
        43,
        "start must be before stop",
    );
    fails(
        &inline(
            "duration: 1s\ntraffic:\n  - {name: x, tenant: t1, kind: bulk}\n  - {name: x, tenant: t2, kind: bulk}\n",
        ),
        12,
        12,
        "duplicate traffic name `x`",
    );
    fails(
        &inline(&format!("duration: 1s\nlink: {{rate: 1Gbit}}\n{bulk}")),
        10,
        14,
        "above link.rate 1Gbit",
    );
    fails(
        &inline(&format!("duration: 1s\nlink: {{speed: 1Gbit}}\n{bulk}")),
        10,
        8,
        "unknown key `speed`",
    );
}

fn yaml_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            yaml_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "yaml") {
            found.push(path);
        }
    }
}

/// Every shipped scenario: each traffic's packets, on the port the lab gives them
/// (one of its app's ports, or 5201 and up past every listed port), go to the app
/// the scenario names, by the one classification function the lab uses; across
/// hosts, in the sender's policy.
#[test]
fn shipped_scenarios_classify_their_traffic_to_its_app() {
    let mut files = Vec::new();
    yaml_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios"),
        &mut files,
    );
    let scenarios: Vec<AnyScenario> = files
        .iter()
        .filter(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .any(|l| l.starts_with("traffic:"))
        })
        .map(|f| load_any_scenario(f, KNOWN_ENFORCERS).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    assert!(scenarios.len() >= 20, "found {}", scenarios.len());
    assert!(scenarios.iter().any(|s| matches!(s, AnyScenario::Hosts(_))));
    for s in &scenarios {
        let (name, traffic): (&str, Vec<(&Policy, &Traffic)>) = match s {
            AnyScenario::OneHost(s) => {
                (&s.name, s.traffic.iter().map(|t| (&s.policy, t)).collect())
            }
            AnyScenario::Hosts(s) => (
                &s.name,
                s.traffic
                    .iter()
                    .map(|t| (&s.host(t.host).policy, &t.traffic))
                    .collect(),
            ),
        };
        for &(p, t) in &traffic {
            let free_port = (5201..)
                .find(|port| p.apps.iter().all(|a| !a.match_ports.contains(port)))
                .unwrap();
            let app = p.app(t.app);
            let ports = if app.match_ports.is_empty() {
                vec![free_port]
            } else {
                app.match_ports.clone()
            };
            for port in ports {
                let taker = p.app_for_packet(t.tenant, Some(t.kind.proto(app)), 40000, port);
                assert_eq!(
                    p.app(taker).name,
                    app.name,
                    "{name}: traffic {} on port {port}",
                    t.name
                );
            }
        }
        let packets: f64 = traffic
            .iter()
            .map(|&(p, t)| limits::traffic_packets_estimate(p, t))
            .sum();
        assert!(packets <= limits::SIM_PACKETS_MAX, "{name}");
    }
}

#[test]
fn names_that_are_not_a_folder_of_their_own_are_refused() {
    for name in ["..", ".", "a/b", "\"tab\\there\""] {
        let text = format!(
            "name: {name}\n{}",
            inline("duration: 1s\ntraffic:\n  - {tenant: t1, kind: bulk}\n")
        );
        fails(&text, 1, 7, "invalid scenario name");
    }
}
