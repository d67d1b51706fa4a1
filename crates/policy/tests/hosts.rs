//! Scenarios across hosts (docs/hosts.md): the example, PicNIC's Fig. 7b, every
//! kind of traffic between hosts, and each mistake at its line and column.

use policy::limits::{FEEDBACK_EPOCHS_MAX, HOSTS_MAX, VMS_MAX};
use policy::*;
use std::path::{Path, PathBuf};

/// What nicsched would pass, with PicNIC's work-conserving variant, which sched's
/// registry may not have yet.
const KNOWN_ENFORCERS: &[&str] = &["tonic", "wheel", "picnic", "picnic-wc", "picnic-bps"];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn hosts(text: &str) -> HostsScenario {
    match parse_any_scenario(text, "dir/case.yaml", &fixtures(), KNOWN_ENFORCERS) {
        Ok(AnyScenario::Hosts(s)) => s,
        Ok(AnyScenario::OneHost(s)) => panic!("read as one host: {s:?}"),
        Err(e) => panic!("{e}"),
    }
}

#[track_caller]
fn fails(text: &str, line: u32, column: u32, fragment: &str) -> PolicyError {
    let e = parse_any_scenario(text, "dir/case.yaml", &fixtures(), KNOWN_ENFORCERS)
        .expect_err("must be refused");
    assert_eq!(
        (e.file.as_str(), e.line, e.column),
        ("dir/case.yaml", line, column),
        "{e}"
    );
    assert!(e.to_string().contains(fragment), "{e} lacks {fragment:?}");
    assert!(e.hint.is_some(), "{e}");
    e
}

/// The example of hosts.md, verbatim; h3's policy is tests/fixtures/policies/h3.yaml.
const EXAMPLE: &str = "name: envelope-shifting
duration: 20s
interval: 250ms
enforcers: [picnic, wheel]
hosts:
  - name: h1
    policy:
      link: { rate: 20Gbit }
      tenants:
        - { name: a, min_rate: 4Gbit, max_rate: 12Gbit, ingress: { min_rate: 4Gbit, max_rate: 12Gbit } }
  - name: h2
    policy: { link: { rate: 20Gbit }, tenants: [ { name: b, min_rate: 4Gbit, max_rate: 12Gbit, ingress: { min_rate: 4Gbit, max_rate: 12Gbit } } ] }
  - name: h3
    policy: policies/h3.yaml        # a path, as for a one-host scenario
fabric: { rate: 100Gbit }           # optional: the switch between hosts; default non-blocking
traffic:
  - { name: f-ac, tenant: a, to: c, kind: bulk, start: 0s }
  - { name: f-bc, tenant: b, to: c, kind: bulk, start: 5s }
";

const VM: &str =
    "min_rate: 4Gbit, max_rate: 12Gbit, ingress: { min_rate: 4Gbit, max_rate: 12Gbit }";

fn vm(host: u16, tenant: u16) -> Vm {
    Vm {
        host: HostId(host),
        tenant: TenantId(tenant),
    }
}

#[test]
fn the_example_of_hosts_md_parses() {
    let s = hosts(EXAMPLE);
    assert_eq!(s.name, "envelope-shifting");
    assert_eq!(s.enforcers, vec!["picnic", "wheel"]);
    assert_eq!(s.fabric_rate_bps, Some(100_000_000_000));
    assert_eq!(s.feedback, Feedback::default());
    let names: Vec<&str> = s.hosts.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["h1", "h2", "h3"]);
    assert_eq!(
        s.hosts[2].policy,
        load_policy(&fixtures().join("policies/h3.yaml")).unwrap()
    );
    assert_eq!(s.vm_by_name("d"), Some(vm(2, 1)));
    let ends: Vec<(&str, Vm, Vm, u64)> = s
        .traffic
        .iter()
        .map(|t| (t.traffic.name.as_str(), t.from(), t.to, t.traffic.start_ns))
        .collect();
    assert_eq!(
        ends,
        [
            ("f-ac", vm(0, 0), vm(2, 0), 0),
            ("f-bc", vm(1, 0), vm(2, 0), 5_000_000_000)
        ]
    );
}

/// PicNIC's Fig. 7b: three hosts on 20 Gbit links, every VM with the envelope
/// [4, 12] Gbit both ways, and a flow added every 5 s so that the bottleneck moves
/// from a receiver's envelope to a sender's and to a host's link.
fn fig7b(enforcers: &str) -> String {
    format!(
        "name: picnic-fig7b
duration: 20s
interval: 250ms
enforcers: {enforcers}
hosts:
  - name: h1
    policy:
      link: {{ rate: 20Gbit }}
      tenants:
        - {{ name: a, {VM} }}
  - name: h2
    policy:
      link: {{ rate: 20Gbit }}
      tenants:
        - {{ name: b, {VM} }}
  - name: h3
    policy:
      link: {{ rate: 20Gbit }}
      tenants:
        - {{ name: c, {VM} }}
        - {{ name: d, {VM} }}
traffic:
  - {{ name: a-c, tenant: a, to: c, kind: bulk, start: 0s }}
  - {{ name: b-c, tenant: b, to: c, kind: bulk, start: 5s }}
  - {{ name: b-d, tenant: b, to: d, kind: bulk, start: 10s }}
  - {{ name: a-d, tenant: a, to: d, kind: bulk, start: 15s }}
"
    )
}

#[test]
fn picnic_fig7b_parses_to_exactly_its_model() {
    let s = hosts(&fig7b("[picnic, picnic-wc, wheel]"));
    let policy = |vms: &[&str]| {
        let tenants: String = vms
            .iter()
            .map(|name| format!("  - {{ name: {name}, {VM} }}\n"))
            .collect();
        parse_policy(
            &format!("link: {{ rate: 20Gbit }}\ntenants:\n{tenants}"),
            "p.yaml",
        )
        .unwrap()
    };
    let host = |name: &str, vms: &[&str]| Host {
        name: name.to_owned(),
        policy: policy(vms),
    };
    let bulk = |name: &str, from: Vm, to: Vm, start_s: u64| HostsTraffic {
        traffic: Traffic {
            name: name.to_owned(),
            tenant: from.tenant,
            app: AppId(from.tenant.0.into()),
            kind: TrafficKind::Bulk { flows: 1 },
            start_ns: start_s * 1_000_000_000,
            stop_ns: 20_000_000_000,
            cost_ns: 0,
        },
        host: from.host,
        to,
    };
    let (a, b, c, d) = (vm(0, 0), vm(1, 0), vm(2, 0), vm(2, 1));
    let expected = HostsScenario {
        name: "picnic-fig7b".into(),
        hosts: vec![
            host("h1", &["a"]),
            host("h2", &["b"]),
            host("h3", &["c", "d"]),
        ],
        fabric_rate_bps: None,
        feedback: Feedback {
            epoch_ns: 1_000_000,
            delay_ns: 50_000,
        },
        duration_ns: 20_000_000_000,
        interval_ns: 250_000_000,
        seed: 1,
        enforcers: vec!["picnic".into(), "picnic-wc".into(), "wheel".into()],
        traffic: vec![
            bulk("a-c", a, c, 0),
            bulk("b-c", b, c, 5),
            bulk("b-d", b, d, 10),
            bulk("a-d", a, d, 15),
        ],
    };
    assert_eq!(s, expected);
    // The envelope itself, not only as parse_policy reads it.
    for vm in s.vms() {
        let t = s.tenant(vm);
        assert_eq!(
            (t.min_rate_bps, t.max_rate_bps),
            (Some(4_000_000_000), Some(12_000_000_000))
        );
        assert_eq!(
            t.ingress,
            Some(Envelope {
                min_rate_bps: Some(4_000_000_000),
                max_rate_bps: Some(12_000_000_000)
            })
        );
        assert_eq!(t.completions, Completions::OutOfOrder);
        assert_eq!(s.tenant(vm).apps.len(), 1);
    }
}

#[test]
fn the_shipped_fig7b_is_picnic_fig7b() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/picnic/fig7b.yaml");
    let AnyScenario::Hosts(shipped) = load_any_scenario(&path, KNOWN_ENFORCERS).unwrap() else {
        panic!("fig7b.yaml is a scenario across hosts");
    };
    // The paper's phases are 60 s; the shipped run keeps them 10 s apart.
    let mut expected = fig7b("[picnic, picnic-wc, wheel]")
        .replace("duration: 20s", "duration: 40s")
        .replace("start: 15s", "start: 30s")
        .replace("start: 10s", "start: 20s")
        .replace("start: 5s", "start: 10s");
    for pair in ["a-c", "b-c", "b-d", "a-d"] {
        expected = expected.replace(
            &format!("name: {pair}"),
            &format!("name: f-{}", pair.replace('-', "")),
        );
    }
    assert_eq!(shipped, hosts(&expected));
}

/// Two hosts, the second with an app of its own; traffic is appended.
const TWO_HOSTS: &str = "duration: 1s
hosts:
  - name: h1
    policy:
      link: {rate: 10Gbit}
      tenants: [{name: a}, {name: b}]
  - name: h2
    policy:
      link: {rate: 10Gbit}
      tenants: [{name: c, apps: [{name: kvs, match: {proto: tcp, ports: [11211]}}]}]
traffic:
";

fn two_hosts(traffic: &str) -> String {
    format!("{TWO_HOSTS}{traffic}")
}

#[test]
fn every_kind_of_traffic_crosses_hosts() {
    let s = hosts(&two_hosts(
        "  - {tenant: a, to: c, kind: bulk, flows: 2}
  - {tenant: b, to: c, kind: udp, rate: 1Gbit, size: 1000B, flows: 3, start: 100ms}
  - {tenant: c, to: a, kind: poisson, rate: 100Mbit}
  - {tenant: c, app: kvs, to: b, kind: rpc, request: 100B, response: 1KiB, concurrency: 4}
  - {name: probe, tenant: a, to: c, kind: rpc, rate: 1000/s, stop: 500ms, cost: 1us}
",
    ));
    assert!(
        s.enforcers.is_empty(),
        "none named: the registry's defaults run"
    );
    assert_eq!((s.interval_ns, s.seed), (500_000_000, 1));
    let t = &s.traffic;
    let names: Vec<&str> = t.iter().map(|t| t.traffic.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "a-default-bulk-1",
            "b-default-udp-2",
            "c-default-poisson-3",
            "c-kvs-rpc-4",
            "probe"
        ]
    );
    let ends: Vec<(Vm, Vm)> = t.iter().map(|t| (t.from(), t.to)).collect();
    assert_eq!(
        ends,
        [
            (vm(0, 0), vm(1, 0)),
            (vm(0, 1), vm(1, 0)),
            (vm(1, 0), vm(0, 0)),
            (vm(1, 0), vm(0, 1)),
            (vm(0, 0), vm(1, 0))
        ]
    );
    assert_eq!(t[0].traffic.kind, TrafficKind::Bulk { flows: 2 });
    assert_eq!(
        t[1].traffic.kind,
        TrafficKind::Udp {
            rate_bps: 1_000_000_000,
            size_bytes: 1000,
            flows: 3
        }
    );
    assert_eq!(
        (t[1].traffic.start_ns, t[1].traffic.stop_ns),
        (100_000_000, 1_000_000_000)
    );
    assert_eq!(
        t[2].traffic.kind,
        TrafficKind::Poisson {
            rate_bps: 100_000_000,
            size_bytes: 1470,
            flows: 1
        }
    );
    // The app is the sender's, in its own host's policy.
    let h2 = &s.hosts[1].policy;
    assert_eq!(h2.app(t[3].traffic.app).name, "kvs");
    assert_eq!(
        t[3].traffic.kind,
        TrafficKind::Rpc {
            request_bytes: 100,
            response_bytes: 1024,
            concurrency: 4,
            rate_per_s: None
        }
    );
    assert_eq!(
        t[4].traffic.kind,
        TrafficKind::Rpc {
            request_bytes: 64,
            response_bytes: 64,
            concurrency: 1,
            rate_per_s: Some(1000.0)
        }
    );
    assert_eq!(
        (t[4].traffic.stop_ns, t[4].traffic.cost_ns),
        (500_000_000, 1000)
    );
}

#[test]
fn header_keys_across_hosts() {
    let s = hosts(&format!(
        "name: across\ninterval: 100ms\nseed: 9\nenforcers: [picnic, picnic-wc]\nfabric: {{rate: 40Gbit}}\nfeedback: {{epoch: 100us, delay: 20us}}\n{}",
        two_hosts("  - {tenant: a, to: c, kind: bulk}\n")
    ));
    assert_eq!(s.name, "across");
    assert_eq!((s.interval_ns, s.seed), (100_000_000, 9));
    assert_eq!(s.enforcers, vec!["picnic", "picnic-wc"]);
    assert_eq!(s.fabric_rate_bps, Some(40_000_000_000));
    assert_eq!(
        s.feedback,
        Feedback {
            epoch_ns: 100_000,
            delay_ns: 20_000
        }
    );
    // Without `name`, the file's stem, as for one host.
    assert_eq!(
        hosts(&two_hosts("  - {tenant: a, to: c, kind: bulk}\n")).name,
        "case"
    );
}

#[test]
fn one_host_scenarios_are_read_as_before() {
    let text = "policy:
  link: {rate: 10Gbit}
  tenants:
    - {name: a, ingress: {min_rate: 1Gbit, max_rate: 2Gbit}, completions: in-order}
    - {name: b}
duration: 1s
traffic: [{tenant: a, kind: bulk}]
";
    let one = parse_scenario(text, "dir/case.yaml", Path::new("dir"), KNOWN_ENFORCERS).unwrap();
    let any = parse_any_scenario(text, "dir/case.yaml", Path::new("dir"), KNOWN_ENFORCERS);
    assert_eq!(any, Ok(AnyScenario::OneHost(one.clone())));
    let a = &one.policy.tenants[0];
    assert_eq!(
        a.ingress,
        Some(Envelope {
            min_rate_bps: Some(1_000_000_000),
            max_rate_bps: Some(2_000_000_000)
        })
    );
    assert_eq!(a.completions, Completions::InOrder);
    assert!(one.enforcers.is_empty());
}

#[test]
fn a_one_host_traffic_with_to_points_at_hosts() {
    let text = "policy:
  link: {rate: 10Gbit}
  tenants: [{name: a}, {name: b}]
duration: 1s
traffic: [{tenant: a, to: b, kind: bulk}]
";
    let e = fails(text, 5, 23, "`to` names a receiving VM on another host");
    assert!(e.hint.unwrap().contains("`hosts:`"));
    // parse_scenario, which takes one host only, says the same.
    let e = parse_scenario(text, "dir/case.yaml", Path::new("dir"), KNOWN_ENFORCERS).unwrap_err();
    assert_eq!((e.line, e.column), (5, 23), "{e}");
}

#[test]
fn parse_scenario_refuses_a_scenario_across_hosts() {
    let e = parse_scenario(EXAMPLE, "dir/case.yaml", &fixtures(), KNOWN_ENFORCERS).unwrap_err();
    assert_eq!((e.line, e.column), (5, 1), "{e}");
    assert!(e.message.contains("across hosts"), "{e}");
    assert!(e.hint.unwrap().contains("docs/hosts.md"));
}

#[test]
fn policy_and_hosts_together() {
    let text = format!(
        "policy: p.yaml\n{}",
        two_hosts("  - {tenant: a, to: c, kind: bulk}\n")
    );
    let e = fails(
        &text,
        3,
        1,
        "`policy` (one host) or `hosts` (several), not both",
    );
    assert!(e.hint.unwrap().contains("under a host"));
    // Whichever comes first.
    let text = format!(
        "{}policy: p.yaml\n",
        two_hosts("  - {tenant: a, to: c, kind: bulk}\n")
    );
    fails(&text, 2, 1, "not both");
}

#[test]
fn hosts_list_mistakes() {
    let host = |name: &str, vm: &str| {
        format!(
            "  - {{name: {name}, policy: {{link: {{rate: 1Gbit}}, tenants: [{{name: {vm}}}]}}}}\n"
        )
    };
    let bulk = "traffic: [{tenant: a, to: b, kind: bulk}]\n";
    let e = fails(
        &format!("duration: 1s\nhosts:\n{}{bulk}", host("h1", "a")),
        3,
        3,
        "at least 2 hosts, found 1",
    );
    assert!(e.hint.unwrap().contains("`policy:`"));
    fails(
        &format!("duration: 1s\nhosts: []\n{bulk}"),
        2,
        8,
        "at least 2 hosts, found 0",
    );
    fails(
        &format!("duration: 1s\nhosts: {{h1: x}}\n{bulk}"),
        2,
        8,
        "hosts must be a list",
    );
    let many: String = (0..=HOSTS_MAX)
        .map(|i| host(&format!("h{i}"), &format!("v{i}")))
        .collect();
    let e = fails(
        &format!("duration: 1s\nhosts:\n{many}{bulk}"),
        3,
        3,
        &format!("{} hosts, above the bound", HOSTS_MAX + 1),
    );
    assert!(e.hint.unwrap().contains("HOSTS_MAX"));
    fails(
        &format!(
            "duration: 1s\nhosts:\n{}{}{bulk}",
            host("h1", "a"),
            host("h1", "b")
        ),
        4,
        12,
        "duplicate host name `h1`",
    );
    fails(
        &format!(
            "duration: 1s\nhosts:\n{}{}{bulk}",
            host("h1", "a"),
            host("H2", "b")
        ),
        4,
        12,
        "invalid host name `H2`",
    );
    fails(
        &format!(
            "duration: 1s\nhosts:\n{}  - {{name: h2}}\n{bulk}",
            host("h1", "a")
        ),
        4,
        5,
        "missing required key `policy` in host",
    );
    fails(
        &format!(
            "duration: 1s\nhosts:\n{}  - {{name: h2, policy: {{link: {{rate: 1Gbit}}, tenants: [{{name: a}}]}}, link: x}}\n{bulk}",
            host("h1", "a")
        ),
        4,
        69,
        "unknown key `link` in host",
    );
    fails(
        &format!(
            "duration: 1s\nhosts:\n{}  - {{name: h2, policy: 7}}\n{bulk}",
            host("h1", "a")
        ),
        4,
        24,
        "policy must be a path or a mapping",
    );
}

#[test]
fn vm_names_are_unique_across_hosts() {
    let text = "duration: 1s
hosts:
  - name: h1
    policy: {link: {rate: 1Gbit}, tenants: [{name: a}, {name: c}]}
  - name: h2
    policy:
      link: {rate: 1Gbit}
      tenants:
        - name: b
        - name: c
traffic: [{tenant: a, to: b, kind: bulk}]
";
    let e = fails(text, 10, 17, "VM `c` is on host `h1` too");
    assert!(e.hint.unwrap().contains("unique across hosts"));
}

#[test]
fn a_mistake_in_a_host_policy_file_names_that_file() {
    let dir = std::env::temp_dir().join(format!("policy-hosts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("h2.yaml"),
        "link: {rate: 1Gbit}\ntenants:\n  - {name: b}\n  - {name: a}\n",
    )
    .unwrap();
    let path = dir.join("case.yaml");
    std::fs::write(
        &path,
        "duration: 1s\nhosts:\n  - {name: h1, policy: {link: {rate: 1Gbit}, tenants: [{name: a}]}}\n  - {name: h2, policy: h2.yaml}\ntraffic: [{tenant: a, to: b, kind: bulk}]\n",
    )
    .unwrap();
    let e = load_any_scenario(&path, KNOWN_ENFORCERS).unwrap_err();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(e.file.ends_with("h2.yaml"), "{e}");
    assert_eq!((e.line, e.column), (4, 12), "{e}");
    assert!(e.message.contains("VM `a` is on host `h1` too"), "{e}");
}

#[test]
fn ingress_guarantees_fit_in_each_host_link() {
    let text = "duration: 1s
hosts:
  - name: h1
    policy: {link: {rate: 1Gbit}, tenants: [{name: a}]}
  - name: h2
    policy:
      link: {rate: 10Gbit}
      tenants:
        - {name: b, ingress: {min_rate: 6Gbit}}
        - {name: c, ingress: {min_rate: 5Gbit}}
traffic: [{tenant: a, to: b, kind: bulk}]
";
    let e = fails(
        text,
        10,
        41,
        "the tenants' ingress min_rate add up to 11Gbit, above link.rate 10Gbit",
    );
    assert!(e.hint.unwrap().contains("enters the host"));
    // A cap above the link is never binding, as for egress: accepted.
    hosts(&text.replace("min_rate: 5Gbit", "max_rate: 50Gbit"));
    fails(
        &text.replace("{min_rate: 5Gbit}", "{min_rate: 5Gbit, max_rate: 4Gbit}"),
        10,
        41,
        "min_rate 5Gbit is above max_rate 4Gbit",
    );
}

#[test]
fn traffic_ends_are_vms_on_two_hosts() {
    let e = fails(
        &two_hosts("  - {tenant: x, to: c, kind: bulk}\n"),
        12,
        14,
        "unknown tenant `x`",
    );
    assert_eq!(e.hint.as_deref(), Some("VMs of the hosts: a, b, c"));
    fails(
        &two_hosts("  - {tenant: a, kind: bulk}\n"),
        12,
        5,
        "missing required key `to` in traffic",
    );
    let e = fails(
        &two_hosts("  - {tenant: a, to: z, kind: bulk}\n"),
        12,
        21,
        "unknown receiving VM `z`",
    );
    assert_eq!(e.hint.as_deref(), Some("VMs of the hosts: a, b, c"));
    let e = fails(
        &two_hosts("  - {tenant: a, to: b, kind: bulk}\n"),
        12,
        21,
        "`b` is on host `h1`, as the sender `a` is",
    );
    assert!(e.hint.unwrap().contains("does not cross the fabric"));
    // The app is looked up in the sender's host only.
    let e = fails(
        &two_hosts("  - {tenant: a, app: kvs, to: c, kind: bulk}\n"),
        12,
        22,
        "tenant `a` has no app `kvs`",
    );
    assert_eq!(e.hint.as_deref(), Some("apps of `a`: default"));
    fails(
        &two_hosts("  - {tenant: c, app: kvs, to: a, kind: udp, rate: 1Mbit}\n"),
        12,
        22,
        "matches only tcp",
    );
    fails(
        &two_hosts("  - {tenant: a, to: c, kind: bulk, size: 1B}\n"),
        12,
        36,
        "does not apply to bulk",
    );
    fails(
        &two_hosts(
            "  - {name: x, tenant: a, to: c, kind: bulk}\n  - {name: x, tenant: c, to: a, kind: bulk}\n",
        ),
        13,
        12,
        "duplicate traffic name `x`",
    );
    fails(
        &TWO_HOSTS.replace("traffic:\n", "traffic: []\n"),
        11,
        10,
        "at least one traffic",
    );
}

#[test]
fn fabric_and_feedback_mistakes() {
    let run = |header: &str| {
        format!(
            "{header}\n{}",
            two_hosts("  - {tenant: a, to: c, kind: bulk}\n")
        )
    };
    fails(
        &run("fabric: {}"),
        1,
        9,
        "missing required key `rate` in fabric",
    );
    fails(
        &run("fabric: {rate: 0bit}"),
        1,
        16,
        "fabric.rate must be above 0",
    );
    fails(
        &run("fabric: {speed: 1Gbit}"),
        1,
        10,
        "unknown key `speed` in fabric",
    );
    fails(&run("fabric: {rate: 10Gbps}"), 1, 16, "Gbps");
    fails(
        &run("feedback: {epoch: 0s}"),
        1,
        19,
        "feedback.epoch 0ns must be above 0",
    );
    fails(
        &run("interval: 100ms\nfeedback: {epoch: 200ms}"),
        2,
        19,
        "feedback.epoch 200ms must be above 0 and at most the interval 100ms",
    );
    // The default epoch, 1ms, against a shorter interval: blame the interval.
    fails(
        &run("interval: 500us"),
        1,
        11,
        "feedback.epoch 1ms (the default) must be above 0 and at most the interval 500us",
    );
    fails(
        &run("feedback: {delay: 1s}"),
        1,
        19,
        "feedback.delay 1s must be below the duration 1s",
    );
    fails(&run("feedback: {epoch: 1}"), 1, 19, "has no unit");
    fails(
        &run("feedback: {rate: 1Gbit}"),
        1,
        12,
        "unknown key `rate` in feedback",
    );
    let long = format!(
        "duration: 1000s\n{}",
        two_hosts("  - {tenant: a, to: c, kind: udp, rate: 1Mbit}\n").replace("duration: 1s\n", "")
    );
    let e = fails(
        &format!("feedback: {{epoch: 50us}}\n{long}"),
        1,
        19,
        "1000s of duration in feedback epochs of 50us make 20000000 epochs",
    );
    assert!(e.hint.unwrap().contains(&format!("{FEEDBACK_EPOCHS_MAX}")));
}

#[test]
fn run_keys_are_checked_as_for_one_host() {
    let bulk = two_hosts("  - {tenant: a, to: c, kind: bulk}\n");
    fails(
        &format!("link: {{rate: 1Gbit}}\n{bulk}"),
        1,
        1,
        "unknown key `link` in the scenario",
    );
    fails(
        &bulk.replace("duration: 1s\n", ""),
        1,
        1,
        "missing required key `duration`",
    );
    let e = fails(
        &format!("enforcers: []\n{bulk}"),
        1,
        12,
        "enforcers must not be empty",
    );
    assert_eq!(
        e.hint.as_deref(),
        Some("leave `enforcers` out to run the default (docs/scenario.md, `enforcers`)")
    );
    fails(
        &format!("enforcers: [cbq]\n{bulk}"),
        1,
        13,
        "unknown enforcer `cbq`",
    );
    fails(&format!("name: ..\n{bulk}"), 1, 7, "invalid scenario name");
}

#[test]
fn the_bounds_hold_over_all_hosts() {
    // VMs: each host within TENANTS_MAX, together past VMS_MAX.
    let host = |h: usize| {
        let tenants: String = (0..VMS_MAX / 2 + 1)
            .map(|t| format!("{{name: v{h}-{t}}},"))
            .collect();
        format!("  - name: h{h}\n    policy: {{link: {{rate: 1Gbit}}, tenants: [{tenants}]}}\n")
    };
    let e = fails(
        &format!(
            "duration: 1s\nhosts:\n{}{}traffic: [{{tenant: v0-0, to: v1-0, kind: bulk}}]\n",
            host(0),
            host(1)
        ),
        6,
        13,
        &format!("{} VMs", VMS_MAX + 2),
    );
    assert!(e.hint.unwrap().contains("VMS_MAX"));
    // Flows: over the traffic of every host.
    let e = fails(
        &two_hosts(
            "  - {tenant: a, to: c, kind: bulk, flows: 60000}\n  - {tenant: c, to: a, kind: bulk, flows: 60000}\n",
        ),
        13,
        5,
        "opens 120000 flows, above the bound",
    );
    assert!(e.hint.unwrap().contains("FLOWS_MAX"));
    // The simulator's packets: each traffic within the bound, their sum past it.
    let text = two_hosts(
        "  - {tenant: a, to: c, kind: udp, rate: 1Gbit, size: 1B}\n  - {tenant: c, to: b, kind: udp, rate: 1Gbit, size: 1B}\n",
    )
    .replace("duration: 1s", "duration: 10s");
    let e = fails(&text, 12, 5, "packets over the run");
    assert!(e.hint.unwrap().contains("SIM_PACKETS_MAX"));
    // Cells: intervals × the classes of every host and the flows.
    let e = fails(
        &format!(
            "interval: 1ms\n{}",
            two_hosts("  - {tenant: a, to: c, kind: bulk, flows: 200}\n")
                .replace("duration: 1s", "duration: 100s")
        ),
        1,
        11,
        "100000 intervals × 207 classes and flows",
    );
    assert!(e.hint.unwrap().contains("INTERVAL_CELLS_MAX"));
}
