//! `linux-htb`: the policy compiled to the kernel's HTB, for the lab to run the same
//! scenario with no nicsched code in the path.
//!
//! - `1:` the HTB qdisc; `1:1` the link (rate = ceil = link rate);
//! - `1:1xx` one class per tenant: rate = its share of the ideal allocation with every
//!   app of every tenant backlogged (guarantees included, so weights become rates);
//!   ceil = `max_rate`, else the link; `prio` = its priority (HTB lends spare
//!   bandwidth to lower `prio` first); quantum = weight x (MTU + 14 B), so spare
//!   bandwidth is lent in proportion to the weights;
//! - `1:1xxx` one leaf per app under its tenant, the same way one level down, each
//!   with a `pfifo` of 1000 packets;
//! - u32 filters in the policy's first-match order: per tenant its source prefix and,
//!   per app, `ip protocol` and the app's ports as `sport` or `dport` (two filters
//!   per port, since a port matches either way); then the tenant's prefix alone to its
//!   `default` app. Port matches assume IPv4 headers without options.
//!
//! Rates are at least 8 kbit/s: HTB needs a rate for every class, and a class the
//! ideal gives nothing (a lower priority level) borrows everything it sends.
//! HTB counts Ethernet frames (L2, 14 B more per frame than the L3 bytes nicsched's
//! link counts): at full-sized frames it runs ~0.9% below the L3 rate.

use policy::{Policy, ideal_allocation};

const RATE_FLOOR_BPS: f64 = 8_000.0;
const QUANTUM_BYTES_MAX: u64 = 200_000;
const LEAF_PACKETS: u32 = 1000;
/// An unused minor for `default`: unclassified frames (ARP) go out HTB's direct
/// queue, unshaped.
const UNCLASSIFIED_MINOR: u32 = 0xfffe;

fn tenant_minor(t: usize) -> u32 {
    0x100 + t as u32
}

fn app_minor(a: usize) -> u32 {
    0x1000 + a as u32
}

fn bits(bps: f64) -> String {
    format!("{}bit", bps.max(RATE_FLOOR_BPS).round() as u64)
}

/// The policy as `tc` commands (one per line, runnable with `sh`) on device `dev`.
/// Tenants are matched by their `match.src`; a tenant without one gets no filter
/// and a comment says so (the lab passes the prefixes it assigned instead).
pub fn tc_script(policy: &Policy, dev: &str) -> String {
    let prefixes: Vec<Option<String>> = policy
        .tenants
        .iter()
        .map(|t| t.match_src.map(|c| format!("{}/{}", c.addr, c.prefix_len)))
        .collect();
    tc_script_for(policy, dev, &prefixes)
}

/// As [`tc_script`], with each tenant's source prefix given.
pub(crate) fn tc_script_for(policy: &Policy, dev: &str, prefixes: &[Option<String>]) -> String {
    let link_bps = policy.link.rate_bps as f64;
    let all_backlogged: Vec<Vec<f64>> = vec![vec![f64::INFINITY]; policy.apps.len()];
    let ideal = ideal_allocation(policy, &all_backlogged);
    let frame_bytes = u64::from(policy.link.mtu_bytes) + 14;
    let quantum = |weight: u32| (frame_bytes * u64::from(weight)).min(QUANTUM_BYTES_MAX);
    let mut s = String::new();
    s.push_str(&format!(
        "# nicsched policy as Linux HTB on {dev}: link {}, {} tenants, {} apps\n",
        policy::format_rate(link_bps),
        policy.tenants.len(),
        policy.apps.len()
    ));
    s.push_str(&format!(
        "tc qdisc add dev {dev} root handle 1: htb default {UNCLASSIFIED_MINOR:x}\n"
    ));
    s.push_str(&format!(
        "tc class add dev {dev} parent 1: classid 1:1 htb rate {r} ceil {r} quantum {q}\n",
        r = bits(link_bps),
        q = quantum(1)
    ));
    for (t, tenant) in policy.tenants.iter().enumerate() {
        let rate = ideal.tenant_bps[t].max(tenant.min_rate_bps.unwrap_or(0) as f64);
        let ceil = tenant.max_rate_bps.map_or(link_bps, |m| m as f64).max(rate);
        s.push_str(&format!(
            "# tenant {}: weight {}, priority {}\n",
            tenant.name, tenant.weight, tenant.priority
        ));
        s.push_str(&format!(
            "tc class add dev {dev} parent 1:1 classid 1:{:x} htb rate {} ceil {} prio {} quantum {}\n",
            tenant_minor(t),
            bits(rate),
            bits(ceil),
            tenant.priority.min(7),
            quantum(tenant.weight)
        ));
        for &a in &tenant.apps {
            let app = policy.app(a);
            let rate = ideal.app_bps[a.index()].max(app.min_rate_bps.unwrap_or(0) as f64);
            let ceil = app.max_rate_bps.map_or(ceil, |m| m as f64).max(rate);
            s.push_str(&format!(
                "tc class add dev {dev} parent 1:{:x} classid 1:{:x} htb rate {} ceil {} prio {} quantum {}\n",
                tenant_minor(t),
                app_minor(a.index()),
                bits(rate),
                bits(ceil),
                app.priority.min(7),
                quantum(app.weight)
            ));
            s.push_str(&format!(
                "tc qdisc add dev {dev} parent 1:{m:x} handle {m:x}: pfifo limit {LEAF_PACKETS}\n",
                m = app_minor(a.index())
            ));
        }
    }
    let mut prio = 1u32;
    let mut filter = |s: &mut String, matches: &str, minor: u32| {
        s.push_str(&format!(
            "tc filter add dev {dev} parent 1: protocol ip prio {prio} u32 {matches} flowid 1:{minor:x}\n"
        ));
        prio += 1;
    };
    for (t, tenant) in policy.tenants.iter().enumerate() {
        let Some(prefix) = &prefixes[t] else {
            s.push_str(&format!(
                "# tenant {}: no match.src, no filter (its traffic is unclassified)\n",
                tenant.name
            ));
            continue;
        };
        let src = format!("match ip src {prefix}");
        for &a in &tenant.apps {
            let app = policy.app(a);
            let proto = app.match_proto.map(|p| match p {
                policy::Proto::Tcp => " match ip protocol 6 0xff".to_string(),
                policy::Proto::Udp => " match ip protocol 17 0xff".to_string(),
            });
            if app.match_ports.is_empty() {
                if let Some(proto) = proto {
                    filter(&mut s, &format!("{src}{proto}"), app_minor(a.index()));
                }
                continue;
            }
            let proto = proto.unwrap_or_default();
            for port in &app.match_ports {
                for side in ["sport", "dport"] {
                    filter(
                        &mut s,
                        &format!("{src}{proto} match ip {side} {port} 0xffff"),
                        app_minor(a.index()),
                    );
                }
            }
        }
        let default = policy.catch_all_app(policy::TenantId(t as u16));
        filter(&mut s, &src, app_minor(default.index()));
    }
    s
}

/// Packets HTB dropped per tenant, from `tc -s class show` of the device the
/// [`tc_script`] of `policy` was applied to: the drops of each app's leaf class
/// (its `pfifo` overflowing), added up by tenant. Lines of other classes are skipped.
pub(crate) fn tenant_drops(policy: &Policy, tc_stats: &str) -> Vec<u64> {
    let mut drops = vec![0; policy.tenants.len()];
    let mut app = None;
    for line in tc_stats.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("class htb 1:") {
            app = rest
                .split_whitespace()
                .next()
                .and_then(|minor| u32::from_str_radix(minor, 16).ok())
                .and_then(|minor| minor.checked_sub(app_minor(0)))
                .map(|a| a as usize)
                .filter(|&a| a < policy.apps.len());
        } else if let (Some(a), Some(rest)) = (app, line.strip_prefix("Sent ")) {
            let dropped = rest
                .split_once("(dropped ")
                .and_then(|(_, d)| d.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|d| d.parse::<u64>().ok());
            if let Some(dropped) = dropped {
                drops[policy.apps[a].tenant.index()] += dropped;
            }
            app = None;
        }
    }
    drops
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        policy::parse_policy(
            r#"
link: { rate: 1Gbit }
tenants:
  - name: t1
    weight: 1
    match: { src: 10.0.1.0/24 }
  - name: t2
    weight: 3
    max_rate: 800Mbit
    match: { src: 10.0.2.0/24 }
    apps:
      - name: probe
        priority: 0
        match: { proto: tcp, ports: [11111] }
      - name: bulk
        max_rate: 500Mbit
        match: { proto: tcp, ports: [5201] }
  - name: t3
    min_rate: 100Mbit
"#,
            "p.yaml",
        )
        .unwrap()
    }

    #[test]
    fn drops_are_read_from_the_app_leaves_and_added_up_by_tenant() {
        let policy = policy();
        let app = |tenant: &str, name: &str| {
            let t = policy
                .tenants
                .iter()
                .position(|t| t.name == tenant)
                .unwrap();
            policy
                .apps
                .iter()
                .position(|a| a.tenant.index() == t && a.name == name)
                .unwrap()
        };
        let class = |minor: u32, dropped: u64| {
            format!(
                "class htb 1:{minor:x} parent 1:1 leaf 8001: prio 0 rate 1Mbit ceil 1Mbit burst 1600b cburst 1600b \n \
                 Sent 1000 bytes 10 pkt (dropped {dropped}, overlimits 3 requeues 0) \n \
                 backlog 0b 0p requeues 0\n\n"
            )
        };
        let stats = [
            class(1, 100),
            class(tenant_minor(1), 9),
            class(app_minor(app("t1", "default")), 5),
            class(app_minor(app("t2", "probe")), 7),
            class(app_minor(app("t2", "bulk")), 11),
            class(app_minor(app("t3", "default")), 0),
        ]
        .concat();
        assert_eq!(tenant_drops(&policy, &stats), vec![5, 18, 0]);
        assert_eq!(
            tenant_drops(&policy, "garbage\nSent nothing"),
            vec![0, 0, 0]
        );
    }

    #[test]
    fn compiles_the_tree_rates_and_filters() {
        let script = tc_script(&policy(), "up0");
        let lines: Vec<&str> = script.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            lines[0],
            "tc qdisc add dev up0 root handle 1: htb default fffe"
        );
        assert_eq!(
            lines[1],
            "tc class add dev up0 parent 1: classid 1:1 htb rate 1000000000bit ceil 1000000000bit quantum 1514"
        );
        // All backlogged: t3 gets its 100M guarantee, then 1:3:1 weights of the 900M.
        assert!(script.contains(
            "parent 1:1 classid 1:100 htb rate 180000000bit ceil 1000000000bit prio 1 quantum 1514\n"
        ));
        assert!(script.contains(
            "parent 1:1 classid 1:101 htb rate 540000000bit ceil 800000000bit prio 1 quantum 4542\n"
        ));
        assert!(
            script.contains("parent 1:1 classid 1:102 htb rate 280000000bit ceil 1000000000bit")
        );
        // t2's apps: probe (priority 0) takes the tenant's whole rate when backlogged;
        // bulk and default borrow.
        assert!(script.contains(
            "parent 1:101 classid 1:1001 htb rate 540000000bit ceil 800000000bit prio 0"
        ));
        assert!(
            script
                .contains("parent 1:101 classid 1:1002 htb rate 8000bit ceil 500000000bit prio 1")
        );
        assert!(
            script.contains("tc qdisc add dev up0 parent 1:1001 handle 1001: pfifo limit 1000")
        );
        // Filters in first-match order, both port directions, then the tenant catch-all.
        let filters: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| l.starts_with("tc filter"))
            .collect();
        assert_eq!(
            filters,
            [
                "tc filter add dev up0 parent 1: protocol ip prio 1 u32 match ip src 10.0.1.0/24 flowid 1:1000",
                "tc filter add dev up0 parent 1: protocol ip prio 2 u32 match ip src 10.0.2.0/24 match ip protocol 6 0xff match ip sport 11111 0xffff flowid 1:1001",
                "tc filter add dev up0 parent 1: protocol ip prio 3 u32 match ip src 10.0.2.0/24 match ip protocol 6 0xff match ip dport 11111 0xffff flowid 1:1001",
                "tc filter add dev up0 parent 1: protocol ip prio 4 u32 match ip src 10.0.2.0/24 match ip protocol 6 0xff match ip sport 5201 0xffff flowid 1:1002",
                "tc filter add dev up0 parent 1: protocol ip prio 5 u32 match ip src 10.0.2.0/24 match ip protocol 6 0xff match ip dport 5201 0xffff flowid 1:1002",
                "tc filter add dev up0 parent 1: protocol ip prio 6 u32 match ip src 10.0.2.0/24 flowid 1:1003",
            ]
        );
        assert!(script.contains("# tenant t3: no match.src"));
    }
}
