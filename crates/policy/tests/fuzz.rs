//! Bounded fuzzing of the parsers: whatever the text, they return (never panic),
//! and an error points inside the text.

use policy::{PolicyError, parse_any_scenario, parse_policy, parse_scenario};
use proptest::prelude::*;
use std::path::Path;

/// The enforcers the scenarios below may list (nicsched passes its registry's).
const KNOWN_ENFORCERS: &[&str] = &["xps", "tonic", "picnic"];

const POLICY: &str = "link:
  rate: 10Gbit
  queues: 16
  mtu: 1500B
buffer: 16MB
tenants:
  - name: web
    weight: 3
    priority: 1
    min_rate: 1Gbit
    max_rate: 6Gbit
    cores: [0, 1, 2]
    buffer: 2MB
    match:
      src: 10.0.1.0/24
    apps:
      - name: kvs
        priority: 0
        match: { proto: tcp, ports: [11211] }
      - name: batch
        max_rate: 4Gbit
        split:
          by: destination
          max_rate: 50Mbit
  - name: db
    min_rate: 2Gbit
    match: { port: veth1 }
";

const SCENARIO: &str = "name: fuzz
policy:
  link: { rate: 10Gbit }
  tenants:
    - name: t1
      apps: [{ name: kvs, priority: 0 }]
    - { name: t2, weight: 2 }
duration: 2s
interval: 100ms
seed: 3
enforcers: [xps, tonic]
link: { rate: 1Gbit }
traffic:
  - { tenant: t1, app: kvs, kind: rpc, rate: 100, concurrency: 2 }
  - { name: bulk, tenant: t2, kind: bulk, flows: 4, start: 1s, stop: 2s }
  - { tenant: t2, kind: udp, rate: 10Mbit, size: 100B }
";

const HOSTS: &str = "name: fuzz-hosts
duration: 2s
interval: 100ms
enforcers: [picnic, tonic]
fabric: { rate: 40Gbit }
feedback: { epoch: 1ms, delay: 50us }
hosts:
  - name: h1
    policy:
      link: { rate: 10Gbit }
      tenants:
        - name: a
          min_rate: 1Gbit
          ingress: { min_rate: 2Gbit, max_rate: 8Gbit }
          completions: in-order
          apps: [{ name: kvs, priority: 0, match: { proto: tcp, ports: [11211] } }]
        - { name: b, weight: 2 }
  - name: h2
    policy:
      link: { rate: 10Gbit }
      tenants:
        - { name: c, ingress: { min_rate: 5Gbit } }
traffic:
  - { tenant: a, app: kvs, to: c, kind: rpc, rate: 100, concurrency: 2 }
  - { name: bulk, tenant: c, to: b, kind: bulk, flows: 4, start: 1s, stop: 2s }
  - { tenant: b, to: c, kind: udp, rate: 10Mbit, size: 100B }
";

const TOKENS: &[&str] = &[
    "",
    "0",
    "-1",
    "4096",
    "65536",
    "1.5",
    "1e400",
    "10Gbps",
    "10",
    "Gbit",
    "~",
    "null",
    "true",
    "[]",
    "{}",
    "[",
    "}",
    "'",
    "\"",
    "&a",
    "*a",
    "!!int",
    "- x",
    "a: b: c",
    "99999999999999999999Tbit",
    "NaNGbit",
    "default",
    "destination",
    "tcp",
    ":",
    "#",
    "\t",
    "é",
    "0/0",
    "::1/129",
    "<<: *a",
];

#[track_caller]
fn check(result: Result<impl Sized, PolicyError>, text: &str) {
    if let Err(e) = result {
        let lines = text.lines().count().max(1) as u32;
        assert!(e.line >= 1 && e.line <= lines + 1, "{e} for {text:?}");
        assert!(e.column >= 1, "{e}");
        assert!(!e.to_string().contains('\n'), "{e}");
    }
}

fn both(text: &str) {
    check(parse_policy(text, "f.yaml"), text);
    check(
        parse_scenario(text, "f.yaml", Path::new("/nonexistent"), KNOWN_ENFORCERS),
        text,
    );
    check(
        parse_any_scenario(text, "f.yaml", Path::new("/nonexistent"), KNOWN_ENFORCERS),
        text,
    );
}

#[derive(Clone, Debug)]
enum Mutation {
    Delete(usize),
    Duplicate(usize),
    Replace(usize, usize),
}

fn mutate(base: &str, mutations: &[Mutation]) -> String {
    let mut lines: Vec<String> = base.lines().map(str::to_owned).collect();
    for m in mutations {
        if lines.is_empty() {
            break;
        }
        match *m {
            Mutation::Delete(i) => {
                lines.remove(i % lines.len());
            }
            Mutation::Duplicate(i) => {
                let i = i % lines.len();
                lines.insert(i, lines[i].clone());
            }
            Mutation::Replace(i, token) => {
                // Replace the last scalar of the line (after `:` or `- `) by a token.
                let count = lines.len();
                let line = &mut lines[i % count];
                let cut = line.rfind([':', '-', '[', ',']).map_or(0, |p| p + 1);
                line.truncate(cut);
                line.push(' ');
                line.push_str(TOKENS[token % TOKENS.len()]);
            }
        }
    }
    lines.join("\n")
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Delete),
        any::<usize>().prop_map(Mutation::Duplicate),
        (any::<usize>(), any::<usize>()).prop_map(|(i, t)| Mutation::Replace(i, t)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(700))]

    #[test]
    fn arbitrary_text(text in "\\PC{0,200}") {
        both(&text);
    }

    #[test]
    fn yaml_like_text(text in "([a-z_]{1,6}: ?|  |- |\\[|\\]|\\{|\\}|, |[0-9.]{1,4}(Gbit|B|ms)?|\n){0,40}") {
        both(&text);
    }

    #[test]
    fn mutated_policy(mutations in proptest::collection::vec(mutation(), 1..5)) {
        let text = mutate(POLICY, &mutations);
        both(&text);
    }

    #[test]
    fn mutated_scenario(mutations in proptest::collection::vec(mutation(), 1..5)) {
        let text = mutate(SCENARIO, &mutations);
        both(&text);
    }

    #[test]
    fn mutated_hosts_scenario(mutations in proptest::collection::vec(mutation(), 1..5)) {
        let text = mutate(HOSTS, &mutations);
        both(&text);
    }
}

#[test]
fn the_unmutated_bases_are_valid() {
    parse_policy(POLICY, "p.yaml").unwrap();
    parse_scenario(SCENARIO, "s.yaml", Path::new("."), KNOWN_ENFORCERS).unwrap();
    let hosts = parse_any_scenario(HOSTS, "s.yaml", Path::new("."), KNOWN_ENFORCERS).unwrap();
    assert!(matches!(hosts, policy::AnyScenario::Hosts(_)));
}

#[test]
fn deep_nesting_and_alias_bombs_are_refused() {
    both(&"[".repeat(10_000));
    both(&"- ".repeat(5_000));
    let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 0..12 {
        bomb += &format!(
            "b{i}: &b{i} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n",
            p = if i == 0 {
                "a".to_owned()
            } else {
                format!("b{}", i - 1)
            }
        );
    }
    both(&bomb);
}

/// Spellings of numbers at the edges: zero, signs, the edges of u32 and u64, past
/// f64, not numbers at all.
const EXTREMES: &[&str] = &[
    "0",
    "-1",
    "1",
    "0.5",
    "1e-9",
    "65535",
    "65536",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999",
    "1e300",
    "1e400",
    ".nan",
    ".inf",
    "-.inf",
    "NaN",
];

fn extreme(units: &'static [&'static str]) -> impl Strategy<Value = String> {
    (0..EXTREMES.len(), 0..units.len())
        .prop_map(move |(n, u)| format!("{}{}", EXTREMES[n], units[u]))
}

const RATE: &[&str] = &["", "bit", "Mbit", "Tbit"];
const SIZE: &[&str] = &["", "B", "KiB", "GiB"];
const TIME: &[&str] = &["", "ns", "ms", "s"];
const COUNT: &[&str] = &[""];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Every numeric field of a policy and a scenario at once at an extreme: the
    /// parser returns a located error or a scenario inside every bound.
    #[test]
    fn extreme_numbers_are_refused_or_within_bounds(
        link in (extreme(RATE), extreme(COUNT), extreme(SIZE), extreme(SIZE)),
        tenant in (extreme(COUNT), extreme(COUNT), extreme(RATE), extreme(RATE), extreme(COUNT)),
        app in (extreme(RATE), extreme(RATE)),
        run in (extreme(TIME), extreme(TIME), extreme(COUNT), extreme(TIME), extreme(TIME)),
        datagram in (extreme(RATE), extreme(SIZE), extreme(COUNT)),
        rpc in (extreme(SIZE), extreme(SIZE), extreme(COUNT), extreme(COUNT)),
        bulk_flows in extreme(COUNT),
        // Each field is the extreme only sometimes, so that later checks are reached.
        keep in proptest::collection::vec(any::<bool>(), 25),
    ) {
        let mut k = keep.into_iter();
        let mut pick = |value: &str, fallback: &str| -> String {
            if k.next().unwrap_or(false) { value.to_owned() } else { fallback.to_owned() }
        };
        let text = format!(
            "policy:
  link: {{ rate: {}, queues: {}, mtu: {} }}
  buffer: {}
  tenants:
    - name: t1
      weight: {}
      priority: {}
      min_rate: {}
      max_rate: {}
      cores: [{}]
      apps:
        - {{ name: a, max_rate: {}, split: {{ by: flow, max_rate: {} }} }}
    - {{ name: t2 }}
duration: {}
interval: {}
seed: {}
traffic:
  - {{ tenant: t1, kind: bulk, flows: {}, start: {}, stop: {} }}
  - {{ tenant: t2, kind: udp, rate: {}, size: {}, flows: {} }}
  - {{ tenant: t2, kind: rpc, request: {}, response: {}, concurrency: {}, rate: {} }}
",
            pick(&link.0, "10Gbit"), pick(&link.1, "16"), pick(&link.2, "1500B"), pick(&link.3, "16MB"),
            pick(&tenant.0, "1"), pick(&tenant.1, "1"), pick(&tenant.2, "1Gbit"), pick(&tenant.3, "5Gbit"),
            pick(&tenant.4, "0"), pick(&app.0, "4Gbit"), pick(&app.1, "50Mbit"),
            pick(&run.0, "2s"), pick(&run.1, "100ms"), pick(&run.2, "1"),
            pick(&bulk_flows, "4"), pick(&run.3, "0s"), pick(&run.4, "1s"),
            pick(&datagram.0, "1Gbit"), pick(&datagram.1, "1470B"), pick(&datagram.2, "2"),
            pick(&rpc.0, "64B"), pick(&rpc.1, "1KiB"), pick(&rpc.2, "2"), pick(&rpc.3, "1000"),
        );
        let result = parse_scenario(&text, "f.yaml", Path::new("/nonexistent"), KNOWN_ENFORCERS);
        match &result {
            Ok(s) => {
                use policy::limits::*;
                prop_assert!(s.duration_ns <= DURATION_NS_MAX);
                prop_assert!(s.duration_ns.div_ceil(s.interval_ns) <= INTERVALS_MAX);
                let flows: u64 = s.traffic.iter().map(|t| u64::from(t.kind.flows())).sum();
                prop_assert!(flows <= FLOWS_MAX);
                prop_assert!(s.policy.link.rate_bps <= RATE_BPS_MAX);
                prop_assert!(sim_packets_estimate(s) <= SIM_PACKETS_MAX);
            }
            Err(e) => prop_assert!(e.hint.is_some(), "{e}"),
        }
        check(result, &text);
    }
}
