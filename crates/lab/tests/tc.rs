//! `nicsched tc`'s script applied to a real device, as tc-testing would: a
//! throwaway namespace with a veth pair in it (veth rather than dummy: some kernels
//! lack the dummy module, and the lab needs veth anyway), the script applied twice,
//! the kernel's classes and filters read back. Needs root and iproute2; without them
//! it fails in CI and, elsewhere, says why and passes.

mod common;

use std::process::{Command, Output};

/// A namespace deleted when dropped, also when the test fails.
struct Namespace(String);

impl Namespace {
    fn new() -> Namespace {
        let name = format!("nicsched-tc-test-{}", std::process::id());
        // A namespace of an earlier, killed run of this test would make `add` fail.
        let _ = Command::new("ip").args(["netns", "delete", &name]).output();
        let ns = Namespace(name);
        ns.run(&["ip", "netns", "add", &ns.0], false);
        ns
    }

    /// Runs `command` (inside the namespace when `inside`), failing on error.
    fn run(&self, command: &[&str], inside: bool) -> Output {
        let mut all = Vec::new();
        if inside {
            all.extend(["ip", "netns", "exec", &self.0]);
        }
        all.extend(command);
        let output = Command::new(all[0]).args(&all[1..]).output().unwrap();
        assert!(
            output.status.success(),
            "{all:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.0])
            .output();
    }
}

#[test]
fn the_tc_script_applies_twice_and_creates_every_class_it_names() {
    if !common::runnable(
        "the_tc_script_applies_twice_and_creates_every_class_it_names",
        &[("tc", "-V"), ("ip", "-V")],
    ) {
        return;
    }
    let policy = policy::parse_policy(
        r#"
link: { rate: 1Gbit }
tenants:
  - name: web
    weight: 2
    match: { src: 10.1.0.0/16 }
    apps:
      - { name: api, priority: 0, match: { proto: tcp, ports: [8080] } }
      - { name: batch, max_rate: 300Mbit, match: { proto: tcp, ports: [9000] } }
  - name: backup
    max_rate: 100Mbit
    match: { src: 10.2.0.0/16 }
"#,
        "p.yaml",
    )
    .unwrap();
    let script = lab::tc_script(&policy, "d0").unwrap();
    let ns = Namespace::new();
    ns.run(
        &[
            "ip", "link", "add", "d0", "type", "veth", "peer", "name", "d1",
        ],
        true,
    );
    ns.run(&["ip", "link", "set", "d0", "up"], true);
    for apply in ["first", "second"] {
        let output = Command::new("ip")
            .args(["netns", "exec", &ns.0, "sh", "-e", "-c", &script])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "the {apply} apply failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let named: Vec<&str> = script
        .lines()
        .filter(|l| l.starts_with("class add"))
        .map(|l| {
            l.split_whitespace()
                .skip_while(|w| *w != "classid")
                .nth(1)
                .unwrap()
        })
        .collect();
    // The link, the default, a class per tenant and per app (web's two and its
    // default, backup's default).
    assert_eq!(named.len(), 2 + 2 + 4, "{script}");
    let shown = ns.run(&["tc", "-s", "class", "show", "dev", "d0"], true);
    let shown = String::from_utf8_lossy(&shown.stdout);
    let mut classes: Vec<&str> = shown
        .lines()
        .filter_map(|l| l.strip_prefix("class htb "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    classes.sort();
    let mut expected = named.clone();
    expected.sort();
    assert_eq!(classes, expected, "{shown}");
    // The qdisc's default is one of them.
    let qdisc = ns.run(&["tc", "qdisc", "show", "dev", "d0"], true);
    let qdisc = String::from_utf8_lossy(&qdisc.stdout);
    let default = qdisc
        .split_whitespace()
        .skip_while(|w| *w != "default")
        .nth(1)
        .expect("htb names its default");
    let default = format!("1:{}", default.trim_start_matches("0x"));
    assert!(named.contains(&default.as_str()), "{default}: {qdisc}");
    // Applied twice, the filters are there once.
    let filters = ns.run(&["tc", "filter", "show", "dev", "d0"], true);
    let filters = String::from_utf8_lossy(&filters.stdout);
    assert_eq!(
        filters.matches("flowid").count(),
        script.matches("\nfilter add").count(),
        "{filters}"
    );
}
