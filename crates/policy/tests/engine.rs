//! The engine's cores: `engine` in a policy and a traffic's `cost`, their defaults
//! and their mistakes, each located.

use policy::*;
use std::path::Path;

/// The enforcers these scenarios may name (the registry is in `sched`, which
/// `policy` cannot depend on).
const KNOWN_ENFORCERS: &[&str] = &["tonic"];

#[track_caller]
fn fails_policy(text: &str, line: u32, column: u32, fragment: &str) -> PolicyError {
    let e = parse_policy(text, "p.yaml").expect_err("must be refused");
    assert_eq!((e.line, e.column), (line, column), "{e}");
    assert!(e.to_string().contains(fragment), "{e} lacks {fragment:?}");
    e
}

#[track_caller]
fn fails_scenario(text: &str, line: u32, column: u32, fragment: &str) -> PolicyError {
    let e = parse_scenario(text, "s.yaml", Path::new("."), KNOWN_ENFORCERS)
        .expect_err("must be refused");
    assert_eq!((e.line, e.column), (line, column), "{e}");
    assert!(e.to_string().contains(fragment), "{e} lacks {fragment:?}");
    e
}

const TENANTS: &str = "tenants: [{name: a}, {name: b}]\n";

#[test]
fn defaults_leave_the_cpu_unlimited() {
    let p = parse_policy(&format!("link: {{rate: 10Gbit}}\n{TENANTS}"), "p.yaml").unwrap();
    assert_eq!(
        p.engine,
        EngineCpu {
            cores: 1,
            cpu: CpuSharing::Weighted,
            packet_cost_ns: 0
        }
    );
    let p = parse_policy(
        &format!("link: {{rate: 10Gbit}}\nengine: {{cores: 2}}\n{TENANTS}"),
        "p.yaml",
    )
    .unwrap();
    assert_eq!(p.engine.cores, 2);
    assert_eq!(p.engine.cpu, CpuSharing::Weighted);
    assert_eq!(p.engine.packet_cost_ns, 0);
}

#[test]
fn every_key() {
    let p = parse_policy(
        &format!(
            "link: {{rate: 10Gbit}}\nengine: {{cores: 4, cpu: fifo, packet_cost: 300ns}}\n{TENANTS}"
        ),
        "p.yaml",
    )
    .unwrap();
    assert_eq!(
        p.engine,
        EngineCpu {
            cores: 4,
            cpu: CpuSharing::Fifo,
            packet_cost_ns: 300
        }
    );
}

#[test]
fn engine_mistakes() {
    let e = fails_policy(
        "link: {rate: 10Gbit}\nengine: {cores: 2, cpus: fifo}\ntenants: [{name: a}]\n",
        2,
        20,
        "unknown key `cpus`",
    );
    assert!(e.hint.unwrap().contains("packet_cost"));
    fails_policy(
        "link: {rate: 10Gbit}\nengine: {cores: 0}\ntenants: [{name: a}]\n",
        2,
        17,
        "engine.cores 0 is out of range 1..=4096",
    );
    let e = fails_policy(
        "link: {rate: 10Gbit}\nengine:\n  cpu: fair\ntenants: [{name: a}]\n",
        3,
        8,
        "unknown engine.cpu `fair`",
    );
    assert!(e.hint.unwrap().contains("`fifo` or `weighted`"));
    fails_policy(
        "link: {rate: 10Gbit}\nengine: {packet_cost: 3 bananas}\ntenants: [{name: a}]\n",
        2,
        23,
        "engine.packet_cost",
    );
    let e = fails_policy(
        "link: {rate: 10Gbit}\nengine: {packet_cost: 2ms}\ntenants: [{name: a}]\n",
        2,
        23,
        "above the bound",
    );
    assert!(e.hint.unwrap().contains("ENGINE_COST_NS_MAX"));
    fails_policy(
        "link: {rate: 10Gbit}\nengine: 2\ntenants: [{name: a}]\n",
        2,
        9,
        "engine",
    );
}

fn scenario(traffic: &str) -> String {
    format!("policy:\n  link: {{rate: 10Gbit}}\n  {TENANTS}duration: 1s\ntraffic:\n{traffic}")
}

#[test]
fn traffic_cost() {
    let s = parse_scenario(
        &scenario(
            "  - {tenant: a, kind: udp, rate: 1Gbit, cost: 2us}\n  - {tenant: b, kind: bulk}\n  - {tenant: b, kind: rpc, cost: 1.5us}\n",
        ),
        "s.yaml",
        Path::new("."),
        KNOWN_ENFORCERS,
    )
    .unwrap();
    let costs: Vec<u64> = s.traffic.iter().map(|t| t.cost_ns).collect();
    assert_eq!(costs, vec![2000, 0, 1500]);
    fails_scenario(
        &scenario("  - {tenant: a, kind: bulk, cost: fast}\n"),
        6,
        35,
        "cost",
    );
    fails_scenario(
        &scenario("  - {tenant: a, kind: bulk, cost: 5s}\n"),
        6,
        35,
        "cost 5s is above the bound",
    );
}
