//! `nicsched tc`'s script applied to a real device, as tc-testing would: a
//! throwaway namespace with a veth pair in it (veth rather than dummy: some kernels
//! lack the dummy module, and the lab needs veth anyway), the script applied with
//! `sh -e`, the kernel's classes and filters read back, and for IPv4 and IPv6
//! tenants datagrams sent through the tree to see which class each lands in. Needs
//! root and iproute2; without them it fails in CI and, elsewhere, says why and
//! passes.

mod common;

use policy::Policy;
use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::{Command, Output};

/// The device the scripts go on, one end of the namespace's veth pair.
const DEV: &str = "d0";

/// A namespace deleted when dropped, also when the test fails.
struct Namespace(String);

impl Namespace {
    /// A namespace of its own for `test` (the tests run side by side), with the veth
    /// pair [`DEV`] and `d1` up: a device without carrier bypasses its qdisc.
    fn new(test: &str) -> Namespace {
        let name = format!("nicsched-tc-{}-{test}", std::process::id());
        // A namespace of an earlier, killed run of this test would make `add` fail.
        let _ = Command::new("ip").args(["netns", "delete", &name]).output();
        let ns = Namespace(name);
        ns.run(&["ip", "netns", "add", &ns.0], false);
        ns.run(
            &[
                "ip", "link", "add", DEV, "type", "veth", "peer", "name", "d1",
            ],
            true,
        );
        ns.run(&["ip", "link", "set", DEV, "up"], true);
        ns.run(&["ip", "link", "set", "d1", "up"], true);
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

    /// Runs `command` inside the namespace and returns its standard output.
    fn read(&self, command: &[&str]) -> String {
        String::from_utf8(self.run(command, true).stdout).unwrap()
    }

    /// Applies `script` as a user would, saved to a file and run with `sh -e`,
    /// failing if it fails.
    fn apply(&self, script: &str, what: &str) {
        let file = std::env::temp_dir().join(format!("{}.sh", self.0));
        std::fs::write(&file, script).unwrap();
        let output = Command::new("ip")
            .args(["netns", "exec", &self.0, "sh", "-e"])
            .arg(&file)
            .output();
        let _ = std::fs::remove_file(&file);
        let output = output.unwrap();
        assert!(
            output.status.success(),
            "the {what} apply failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Sends one UDP datagram from each `from` to its `to`, from inside the
    /// namespace.
    fn send_udp(&self, datagrams: &[(SocketAddr, SocketAddr)]) {
        let path = format!("/run/netns/{}", self.0);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let ns = std::fs::File::open(&path).unwrap();
                // SAFETY: a descriptor this thread holds open; setns moves only this
                // thread, which ends with the sends.
                let entered = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(entered, 0, "{}", std::io::Error::last_os_error());
                for (from, to) in datagrams {
                    let socket = UdpSocket::bind(from).unwrap();
                    socket.send_to(b"nicsched", to).unwrap();
                }
            });
        });
    }

    /// The HTB classes on [`DEV`], sorted. Parsed from `tc class show`:
    /// iproute2 6.1 prints HTB classes as text even under `-j`.
    fn classes(&self) -> Vec<String> {
        let mut classes: Vec<String> = self
            .read(&["tc", "class", "show", "dev", DEV])
            .lines()
            .filter_map(|l| l.strip_prefix("class htb "))
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_string)
            .collect();
        classes.sort();
        classes
    }

    /// The u32 filters on [`DEV`] as (protocol, prio, node, flowid), sorted, read from
    /// `tc -j filter show` (its entries for the prios and their hash tables, which
    /// carry no flowid, left out).
    fn filters(&self) -> Vec<Filter> {
        let shown = self.read(&["tc", "-j", "filter", "show", "dev", DEV]);
        let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
        let mut filters: Vec<Filter> = shown
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["options"]["flowid"].is_string())
            .map(|f| {
                let handle = f["options"]["fh"].as_str().unwrap();
                let node = handle.rsplit(':').next().unwrap();
                (
                    f["protocol"].as_str().unwrap().to_string(),
                    f["pref"].as_u64().unwrap(),
                    u32::from_str_radix(node, 16).unwrap(),
                    f["options"]["flowid"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        filters.sort();
        filters
    }

    /// Packets each HTB class on [`DEV`] took: sent, or still queued.
    fn packets(&self) -> BTreeMap<String, u64> {
        let shown = self.read(&["tc", "-s", "class", "show", "dev", DEV]);
        let mut packets = BTreeMap::new();
        let mut class = None;
        for line in shown.lines().map(str::trim) {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words[..] {
                ["class", "htb", id, ..] => class = Some(id.to_string()),
                ["Sent", _, "bytes", sent, "pkt", ..] => {
                    *packets.entry(class.clone().unwrap()).or_default() +=
                        sent.parse::<u64>().unwrap();
                }
                ["backlog", _, queued, ..] => {
                    let queued = queued.strip_suffix('p').unwrap();
                    *packets.entry(class.clone().unwrap()).or_default() +=
                        queued.parse::<u64>().unwrap();
                }
                _ => {}
            }
        }
        packets
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.0])
            .output();
    }
}

/// A u32 filter as (protocol, prio, node, flowid).
type Filter = (String, u64, u32, String);

fn runnable(test: &str) -> bool {
    common::runnable(test, &[("tc", "-V"), ("ip", "-V")])
}

/// The value after `key` in a command of the script.
fn after<'a>(line: &'a str, key: &str) -> &'a str {
    let mut words = line.split_whitespace();
    words.find(|w| *w == key);
    words.next().unwrap_or_else(|| panic!("no {key} in {line}"))
}

/// The classes `script` adds, sorted.
fn named_classes(script: &str) -> Vec<String> {
    let mut classes: Vec<String> = script
        .lines()
        .filter(|l| l.starts_with("class add"))
        .map(|l| after(l, "classid").to_string())
        .collect();
    classes.sort();
    classes
}

/// The filters `script` adds, as [`Namespace::filters`] reads them back.
fn named_filters(script: &str) -> Vec<Filter> {
    let mut filters: Vec<Filter> = script
        .lines()
        .filter(|l| l.starts_with("filter add"))
        .map(|l| {
            let node = after(l, "handle").strip_prefix("::").unwrap();
            (
                after(l, "protocol").to_string(),
                after(l, "prio").parse().unwrap(),
                u32::from_str_radix(node, 16).unwrap(),
                after(l, "flowid").to_string(),
            )
        })
        .collect();
    filters.sort();
    filters
}

/// The class the script gives app `app` of tenant `tenant`: after the tenant's
/// comment come its own class, then its apps' in its order.
fn app_class(policy: &Policy, script: &str, tenant: &str, app: &str) -> String {
    let t = policy.tenants.iter().find(|t| t.name == tenant).unwrap();
    let position = t
        .apps
        .iter()
        .position(|&a| policy.app(a).name == app)
        .unwrap();
    let comment = format!("# tenant {tenant}:");
    let line = script
        .lines()
        .skip_while(|l| !l.starts_with(&comment))
        .filter(|l| l.starts_with("class add"))
        .nth(1 + position)
        .unwrap();
    after(line, "classid").to_string()
}

#[test]
fn the_tc_script_applies_twice_and_creates_every_class_it_names() {
    if !runnable("the_tc_script_applies_twice_and_creates_every_class_it_names") {
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
    let script = lab::tc_script(&policy, DEV).unwrap();
    let ns = Namespace::new("twice");
    ns.apply(&script, "first");
    ns.apply(&script, "second");
    let named = named_classes(&script);
    // The link, the default, a class per tenant and per app (web's two and its
    // default, backup's default).
    assert_eq!(named.len(), 2 + 2 + 4, "{script}");
    assert_eq!(ns.classes(), named);
    // The qdisc's default is one of them.
    let qdisc = ns.read(&["tc", "qdisc", "show", "dev", DEV]);
    let default = qdisc
        .split_whitespace()
        .skip_while(|w| *w != "default")
        .nth(1)
        .expect("htb names its default");
    let default = format!("1:{}", default.trim_start_matches("0x"));
    assert!(named.contains(&default), "{default}: {qdisc}");
    // Applied twice, the filters are there once.
    assert_eq!(ns.filters(), named_filters(&script));
}

#[test]
fn ipv6_and_ipv4_tenants_filters_apply_and_put_each_datagram_in_its_apps_class() {
    if !runnable("ipv6_and_ipv4_tenants_filters_apply_and_put_each_datagram_in_its_apps_class") {
        return;
    }
    let policy = policy::parse_policy(
        r#"
link: { rate: 1Gbit }
tenants:
  - name: web6
    match: { src: 2001:db8:1::/48 }
    apps:
      - { name: dns, match: { proto: udp, ports: [5353] } }
      - { name: https, match: { proto: tcp, ports: [443, 8443] } }
  - name: v4
    match: { src: 10.9.0.0/16 }
    apps:
      - { name: dns, match: { proto: udp, ports: [5353] } }
  - name: bulk6
    match: { src: 2001:db8:2::/64 }
    apps:
      - { name: bulk, match: { ports: [9000] } }
"#,
        "p.yaml",
    )
    .unwrap();
    let script = lab::tc_script(&policy, DEV).unwrap();
    assert!(script.contains(" protocol ipv6 ") && script.contains(" protocol ip "));
    let ns = Namespace::new("ipv6");
    ns.apply(&script, "first");
    ns.apply(&script, "second");
    assert_eq!(ns.classes(), named_classes(&script));
    assert_eq!(ns.filters(), named_filters(&script));

    // Sources in the tenants' prefixes; the destinations' neighbours are written in,
    // so nothing but the datagrams leaves from those sources.
    for address in ["2001:db8:1::1/48", "2001:db8:2::1/64"] {
        ns.run(&["ip", "addr", "add", address, "dev", DEV, "nodad"], true);
    }
    ns.run(&["ip", "addr", "add", "10.9.0.1/16", "dev", DEV], true);
    for (route, neighbour) in [
        ("2001:db8:ff::/64", "2001:db8:ff::1"),
        ("10.99.0.0/16", "10.99.0.1"),
    ] {
        ns.run(&["ip", "route", "add", route, "dev", DEV], true);
        ns.run(
            &[
                "ip",
                "neigh",
                "add",
                neighbour,
                "lladdr",
                "02:00:00:00:00:01",
                "dev",
                DEV,
                "nud",
                "permanent",
            ],
            true,
        );
    }
    let addr = |text: &str| text.parse::<SocketAddr>().unwrap();
    let (web6, bulk6, v4) = ("[2001:db8:1::1]", "[2001:db8:2::1]", "10.9.0.1");
    let (far6, far4) = ("[2001:db8:ff::1]", "10.99.0.1");
    // Each case its number of datagrams, so that a class counting another's shows.
    let cases = [
        // The port as destination, and as source.
        (web6, 0, far6, 5353, ("web6", "dns"), 1),
        (web6, 5353, far6, 7, ("web6", "dns"), 2),
        // https matches TCP only: UDP to its port is the tenant's default.
        (web6, 0, far6, 443, ("web6", "default"), 3),
        // Any protocol, either direction.
        (bulk6, 0, far6, 9000, ("bulk6", "bulk"), 4),
        (bulk6, 9000, far6, 7, ("bulk6", "bulk"), 5),
        (bulk6, 0, far6, 7, ("bulk6", "default"), 6),
        (v4, 0, far4, 5353, ("v4", "dns"), 7),
        (v4, 0, far4, 443, ("v4", "default"), 8),
    ];
    let before = ns.packets();
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for (from, sport, to, dport, (tenant, app), count) in cases {
        let datagram = (
            addr(&format!("{from}:{sport}")),
            addr(&format!("{to}:{dport}")),
        );
        ns.send_udp(&vec![datagram; count as usize]);
        *expected
            .entry(app_class(&policy, &script, tenant, app))
            .or_default() += count;
    }
    let after = ns.packets();
    // Every app's class took its datagrams and no other's.
    for app in &policy.apps {
        let tenant = &policy.tenants[app.tenant.index()].name;
        let class = app_class(&policy, &script, tenant, &app.name);
        assert_eq!(
            after[&class] - before.get(&class).copied().unwrap_or(0),
            expected.get(&class).copied().unwrap_or(0),
            "{tenant}/{} in {class}: {after:?}",
            app.name
        );
    }
}

/// A policy of `tenants` tenants, every third with an IPv6 prefix and every tenth
/// with two apps of two ports each besides its `default`.
fn many(tenants: usize) -> Policy {
    let mut yaml = String::from("link: { rate: 10Gbit }\ntenants:\n");
    for t in 0..tenants {
        let src = if t % 3 == 0 {
            format!("2001:db8:{t:x}::/48")
        } else {
            format!("10.{}.{}.0/24", t / 256, t % 256)
        };
        yaml.push_str(&format!("  - name: t{t}\n    match: {{ src: {src} }}\n"));
        if t % 10 == 0 {
            yaml.push_str(
                "    apps:\n      \
                 - { name: web, match: { proto: tcp, ports: [80, 443] } }\n      \
                 - { name: dns, match: { proto: udp, ports: [53, 5353] } }\n",
            );
        }
    }
    policy::parse_policy(&yaml, "many.yaml").unwrap()
}

#[test]
fn a_script_of_thousands_of_tenants_applies_whole() {
    if !runnable("a_script_of_thousands_of_tenants_applies_whole") {
        return;
    }
    let policy = many(3000);
    let script = lab::tc_script(&policy, DEV).unwrap();
    let ns = Namespace::new("many");
    ns.apply(&script, "one");
    let named = named_classes(&script);
    // The link, the default, 3000 tenants, their 3000 defaults and 300 x 2 apps.
    assert_eq!(named.len(), 2 + 3000 + 3000 + 600);
    assert_eq!(ns.classes(), named);
    let named = named_filters(&script);
    // A catch-all per tenant, and 300 x 2 apps x 2 ports x 2 directions.
    assert_eq!(named.len(), 3000 + 300 * 8);
    assert_eq!(ns.filters(), named);
}

#[test]
fn a_tenant_with_as_many_filters_as_u32_has_prios_applies() {
    if !runnable("a_tenant_with_as_many_filters_as_u32_has_prios_applies") {
        return;
    }
    // 1023 ports both ways and the catch-all: 2047 filters, a prio each.
    let ports: Vec<String> = (1..=1023).map(|p| p.to_string()).collect();
    let policy = policy::parse_policy(
        &format!(
            "link: {{ rate: 1Gbit }}\ntenants:\n  - name: wide\n    match: {{ src: 10.0.0.0/8 }}\n    apps:\n      - {{ name: ports, match: {{ ports: [{}] }} }}\n",
            ports.join(", ")
        ),
        "wide.yaml",
    )
    .unwrap();
    let script = lab::tc_script(&policy, DEV).unwrap();
    let ns = Namespace::new("prios");
    ns.apply(&script, "one");
    let named = named_filters(&script);
    assert_eq!(named.len(), 2047);
    assert_eq!(ns.filters(), named);
    // The kernel has no hash table left for one prio more: the policy one port wider
    // is refused rather than failing here.
    let more = Command::new("ip")
        .args(["netns", "exec", &ns.0, "tc", "filter", "add", "dev", DEV])
        .args(["parent", "1:", "protocol", "ip", "prio", "2048", "u32"])
        .args(["match", "ip", "src", "10.0.0.0/8", "flowid", "1:2"])
        .output()
        .unwrap();
    assert!(!more.status.success(), "a 2048th u32 prio was taken");
}
