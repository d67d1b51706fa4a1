//! Bounded fuzzing of the parsers: whatever the text, they return (never panic),
//! and an error points inside the text.

use policy::{PolicyError, parse_policy, parse_scenario};
use proptest::prelude::*;
use std::path::Path;

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
        parse_scenario(text, "f.yaml", Path::new("/nonexistent")),
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
}

#[test]
fn the_unmutated_bases_are_valid() {
    parse_policy(POLICY, "p.yaml").unwrap();
    parse_scenario(SCENARIO, "s.yaml", Path::new(".")).unwrap();
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
