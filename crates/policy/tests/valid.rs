//! Valid policies and scenarios read into the model as policy.md and scenario.md say.

use policy::*;
use std::path::Path;

/// The enforcers the scenarios below may list (nicsched passes its registry's).
const KNOWN_ENFORCERS: &[&str] = &["tonic"];

/// The example of policy.md, verbatim.
const EXAMPLE: &str = "link:
  rate: 10Gbit        # required: line rate of the egress link
  queues: 16          # hardware Tx queues of the NIC (multiqueue enforcers); default 16
  mtu: 1500B          # default 1500B
buffer: 16MB          # optional: shared cap on bytes buffered for the whole host (all tenants)

tenants:
  - name: web             # required, unique, [a-z0-9_-]+
    weight: 3             # share among tenants of the same priority; integer >= 1; default 1
    priority: 1           # 0 is served first; default 1; lower number wins strictly
    min_rate: 1Gbit       # optional guarantee
    max_rate: 6Gbit       # optional cap, never exceeded even on an idle link
    cores: [0, 1, 2]      # CPUs the tenant's senders run on (used by xps/tonic); default: all
    buffer: 2MB           # optional: cap on bytes buffered for this tenant (packet accounting)
    match:                # how real traffic is recognised as this tenant's (lab mode)
      src: 10.0.1.0/24    # any of: src (CIDR), port (the tenant's interface name)
    apps:
      - name: kvs
        priority: 0       # strictly before priority 1 apps of the same tenant
        match: { proto: tcp, ports: [11211] }   # src OR dst port in the list
      - name: batch
        priority: 1
        weight: 1
        max_rate: 4Gbit
        split:            # optional: one dynamic class per key, each with its own limit
          by: destination # destination | flow (5-tuple)
          max_rate: 50Mbit
";

#[test]
fn the_spec_example() {
    let p = parse_policy(EXAMPLE, "example.yaml").unwrap();
    assert_eq!(
        p.link,
        Link {
            rate_bps: 10_000_000_000,
            queues: 16,
            mtu_bytes: 1500
        }
    );
    assert_eq!(p.buffer_bytes, Some(16_000_000));
    assert_eq!(p.host_cores, 3);
    let web = &p.tenants[0];
    assert_eq!(web.name, "web");
    assert_eq!((web.weight, web.priority), (3, 1));
    assert_eq!(web.min_rate_bps, Some(1_000_000_000));
    assert_eq!(web.max_rate_bps, Some(6_000_000_000));
    assert_eq!(web.cores, vec![0, 1, 2]);
    assert_eq!(web.buffer_bytes, Some(2_000_000));
    assert_eq!(
        web.match_src,
        Some(Cidr {
            addr: "10.0.1.0".parse().unwrap(),
            prefix_len: 24
        })
    );
    // `batch` has no match: it is the catch-all, so there is no implicit default.
    assert_eq!(web.apps, vec![AppId(0), AppId(1)]);
    let kvs = &p.apps[0];
    assert_eq!((kvs.name.as_str(), kvs.priority, kvs.weight), ("kvs", 0, 1));
    assert_eq!(kvs.match_proto, Some(Proto::Tcp));
    assert_eq!(kvs.match_ports, vec![11211]);
    assert!(!kvs.implicit);
    let batch = &p.apps[1];
    assert_eq!(batch.max_rate_bps, Some(4_000_000_000));
    assert_eq!(
        batch.split,
        Some(Split {
            by: SplitBy::Destination,
            max_rate_bps: 50_000_000
        })
    );
    assert_eq!(p.apps.len(), 2);
    assert_eq!(p.catch_all_app(TenantId(0)), AppId(1));
}

#[test]
fn defaults() {
    let p = parse_policy(
        "link: {rate: 1Gbit}\ntenants:\n  - name: a\n  - name: b\n    apps: [{name: x, match: {ports: [80]}}, {name: default, weight: 2}]\n",
        "p.yaml",
    )
    .unwrap();
    assert_eq!((p.link.queues, p.link.mtu_bytes), (16, 1500));
    assert_eq!(p.host_cores, 16);
    assert_eq!(p.tenants[0].cores, (0..16).collect::<Vec<u16>>());
    assert_eq!((p.tenants[0].weight, p.tenants[0].priority), (1, 1));
    // A tenant without apps has only the implicit default app.
    assert_eq!(p.tenants[0].apps, vec![AppId(0)]);
    assert!(p.apps[0].implicit);
    // A declared default app replaces the implicit one.
    assert_eq!(p.tenants[1].apps, vec![AppId(1), AppId(2)]);
    assert!(!p.apps[2].implicit && p.apps[2].weight == 2);
    assert_eq!(p.catch_all_app(TenantId(1)), AppId(2));
    let a = &p.tenants[0];
    assert_eq!((a.completions, a.napi_tx), (Completions::OutOfOrder, false));
}

/// policy.md "tenants": the VM's completions and NAPI-TX, as written.
#[test]
fn completions_and_napi_tx() {
    let p = parse_policy(
        "link: {rate: 1Gbit}\ntenants:\n  - {name: a, completions: in-order, napi_tx: false}\n  - {name: b, completions: out-of-order, napi_tx: true}\n",
        "p.yaml",
    )
    .unwrap();
    let guest = |t: usize| (p.tenants[t].completions, p.tenants[t].napi_tx);
    assert_eq!(guest(0), (Completions::InOrder, false));
    assert_eq!(guest(1), (Completions::OutOfOrder, true));
}

/// policy.md "Shape": apps in order, first match wins; an app without `match`
/// takes the rest; the implicit `default` only where no app does.
#[test]
fn apps_match_in_order_and_the_catch_all_takes_the_rest() {
    let p = parse_policy(
        "link: {rate: 1Gbit}
tenants:
  - name: a
    apps:
      - {name: probe, match: {proto: tcp, ports: [11111]}}
      - {name: dns, match: {proto: udp}}
      - {name: batch}
  - name: b
    apps:
      - {name: web, match: {proto: tcp, ports: [80]}}
  - name: c
    apps:
      - {name: default, match: {proto: udp}}
      - {name: web, match: {proto: tcp, ports: [80]}}
",
        "p.yaml",
    )
    .unwrap();
    let (a, b, c) = (TenantId(0), TenantId(1), TenantId(2));
    let name = |t, proto, src, dst| p.app(p.app_for_packet(t, proto, src, dst)).name.as_str();
    let (tcp, udp) = (Some(Proto::Tcp), Some(Proto::Udp));
    assert_eq!(name(a, tcp, 11111, 5), "probe");
    assert_eq!(name(a, tcp, 5, 11111), "probe");
    assert_eq!(name(a, udp, 5, 11111), "dns");
    assert_eq!(name(a, tcp, 5, 5201), "batch");
    assert_eq!(name(a, None, 0, 0), "batch");
    assert_eq!(p.app(p.catch_all_app(a)).name, "batch");
    assert_eq!(
        p.tenant(a).apps.len(),
        3,
        "no implicit default beside a catch-all"
    );
    // No catch-all: the implicit default, last.
    assert_eq!(name(b, tcp, 5, 80), "web");
    assert_eq!(name(b, tcp, 5, 81), "default");
    assert!(p.app(p.catch_all_app(b)).implicit);
    // A declared `default` with a match still takes what no rule took.
    assert_eq!(name(c, tcp, 5, 81), "default");
    assert_eq!(name(c, tcp, 5, 80), "web");
    assert_eq!(p.tenant(c).apps.len(), 2);
}

#[test]
fn tenants_without_cores_get_every_named_core() {
    let p = parse_policy(
        "link: {rate: 1Gbit, queues: 4}\ntenants:\n  - {name: a, cores: [5]}\n  - {name: b}\n",
        "p.yaml",
    )
    .unwrap();
    assert_eq!(p.host_cores, 6);
    assert_eq!(p.tenants[1].cores, (0..6).collect::<Vec<u16>>());
}

#[test]
fn load_from_a_file() {
    let dir = std::env::temp_dir().join(format!("policy-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("example.yaml");
    std::fs::write(&path, EXAMPLE).unwrap();
    assert_eq!(
        load_policy(&path).unwrap(),
        parse_policy(EXAMPLE, "x").unwrap()
    );
    let missing = load_policy(&dir.join("missing.yaml")).unwrap_err();
    assert!(missing.message.contains("cannot read"), "{missing}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_explanation_of_the_example() {
    let p = parse_policy(EXAMPLE, "example.yaml").unwrap();
    let text = explain(&p, &parse_active(&p, "web").unwrap()).to_string();
    // kvs (priority 0) takes all of web's 6Gbit cap.
    assert!(text.contains("6Gbit"), "{text}");
    assert!(text.contains("60.0%"), "{text}");
}

#[test]
fn a_missing_policy_file_is_reported_at_the_reference() {
    let e = parse_scenario(
        "policy: nowhere.yaml\nduration: 1s\ntraffic: [{tenant: a, kind: bulk}]\n",
        "s.yaml",
        Path::new("/nonexistent"),
        KNOWN_ENFORCERS,
    )
    .unwrap_err();
    assert_eq!((e.file.as_str(), e.line, e.column), ("s.yaml", 1, 9));
    assert!(e.message.contains("cannot read policy file"), "{e}");
}

#[test]
fn scaling_a_scenario_keeps_the_shape_of_its_ideal() {
    let text = "
policy:
  link: { rate: 10Gbit }
  engine: { cores: 2, packet_cost: 300ns }
  tenants:
    - { name: a, min_rate: 2Gbit, max_rate: 6Gbit }
    - name: b
      apps:
        - { name: x, max_rate: 1Gbit, split: { by: flow, max_rate: 100Mbit } }
duration: 1s
traffic:
  - { tenant: a, kind: bulk }
  - { tenant: b, app: x, kind: udp, rate: 3Gbit, flows: 20, cost: 2us }
";
    let scenario =
        policy::parse_scenario(text, "s.yaml", std::path::Path::new("."), KNOWN_ENFORCERS).unwrap();
    let lab = scenario.scaled_to_link_rate(1_000_000_000);
    assert_eq!(lab.policy.link.rate_bps, 1_000_000_000);
    assert_eq!(lab.policy.tenants[0].min_rate_bps, Some(200_000_000));
    assert_eq!(lab.policy.tenants[0].max_rate_bps, Some(600_000_000));
    let x = &lab.policy.apps[1];
    assert_eq!(x.max_rate_bps, Some(100_000_000));
    assert_eq!(x.split.unwrap().max_rate_bps, 10_000_000);
    // A tenth as many packets, each ten times the work: the cores as loaded.
    assert_eq!(lab.policy.engine.packet_cost_ns, 3_000);
    assert_eq!(lab.traffic[1].cost_ns, 20_000);
    assert!(matches!(
        lab.traffic[1].kind,
        policy::TrafficKind::Udp {
            rate_bps: 300_000_000,
            ..
        }
    ));
    let demands: Vec<Vec<f64>> = vec![vec![f64::INFINITY], vec![], vec![f64::INFINITY; 20]];
    let ideal = policy::ideal_allocation(&scenario.policy, &demands);
    let scaled = policy::ideal_allocation(&lab.policy, &demands);
    for (a, b) in ideal.tenant_bps.iter().zip(&scaled.tenant_bps) {
        assert!((a / 10.0 - b).abs() < 1.0, "{a} vs {b}");
    }
}
