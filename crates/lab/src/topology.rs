//! The lab's network: one namespace per tenant (its traffic leaves by `eth0`), a sink
//! namespace (the far end of the link: servers, clients, the meter), and an engine
//! namespace holding the other end of every veth: one port per tenant and the
//! uplink to the sink. Between them runs either nicsched's engine or, for
//! `linux-htb`, a Linux bridge with the kernel's HTB on the uplink.
//!
//! ```text
//!  tenant t0 [eth0] ──veth── [P-t0]                       
//!  tenant t1 [eth0] ──veth── [P-t1]  engine ns  [P-up] ──veth── [eth0] sink
//!  ...                                (engine or bridge)
//! ```
//!
//! Traffic of an app split by destination gets one sink address per flow: more
//! addresses on the sink's `eth0` (consecutive after the sink's own, in its /16),
//! with routes and static neighbours for them in every tenant namespace.
//!
//! Every name carries the run's prefix `nsl<pid % 10000>`, so runs never touch
//! what they did not create. Segmentation and checksum offloads are on and GRO off
//! on every veth end, as on a host with a TSO NIC: a TCP send of up to 64 KiB
//! reaches the engine (or the bridge) as one GSO frame, whose IPv4 length counts
//! its bytes, and is segmented nowhere on its way to the sink. Addresses and neighbours are static: no ARP
//! needs to cross the engine (it would: the engine floods what it cannot schedule).
//! [`Topology`] deletes every namespace it created when dropped, which removes
//! their veths and qdiscs with them.
//!
//! A run killed outright (SIGKILL) drops nothing: its programs die with it (see
//! [`crate::sys::process`]), and its namespaces stay until [`remove_leftovers`], which
//! every run calls first, finds that the process recorded as their owner
//! ([`crate::sys::owner`], claimed before the first namespace exists) is gone.

use crate::LabError;
use crate::classify::Prefix;
use crate::sys::{netns, owner, process};
use policy::Policy;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct TenantNet {
    pub ns: String,
    /// The engine's end of the tenant's veth.
    pub port: String,
    pub addr: Ipv4Addr,
    /// The tenant's source prefix (its `match.src`, or one the lab picked).
    pub prefix: Prefix,
    pub mac: [u8; 6],
}

#[derive(Clone, Debug)]
pub struct Plan {
    pub prefix: String,
    pub tenants: Vec<TenantNet>,
    pub sink_ns: String,
    pub sink_addr: Ipv4Addr,
    /// More addresses of the sink, one per flow of traffic split by destination.
    pub sink_extra: Vec<Ipv4Addr>,
    pub sink_mac: [u8; 6],
    pub engine_ns: String,
    pub uplink: String,
    pub bridge: String,
    /// Largest GSO frame a tenant's stack may hand down (`gso_max_size` of its
    /// `eth0`), from [`gso_max_bytes`].
    pub gso_max_bytes: u32,
}

/// The `gso_max_size` for a link of `rate_bps`: 131 µs of link (16 KiB at
/// 1 Gbit/s), at least two MTU frames, at most the kernel's 64 KiB (from 4 Gbit/s
/// up, so a 10 Gbit/s lab link keeps whole 64 KiB sends as the simulator's host).
/// A GSO frame crosses the emulated link whole, so this is the longest a
/// prioritised packet waits behind a frame already on the link. Measured on the
/// 2-core machine, 1 Gbit/s (docs/results/lab.md): 64 KiB frames (524 µs) put a
/// prioritised probe's p99 at 3-4x its idle round trip; 6.5 KiB frames (52 µs, a
/// 64 KiB send's time at 10 Gbit/s) cost so much CPU per byte that 72 TCP flows
/// no longer filled the link evenly (utilization 0.87-0.98, Jain min 0.66-0.90,
/// against 0.99 and 0.92-0.97 with 16 KiB).
pub fn gso_max_bytes(rate_bps: u64) -> u32 {
    const BYTES_PER_GBIT: u128 = 16_384;
    let bytes = BYTES_PER_GBIT * u128::from(rate_bps) / 1_000_000_000;
    bytes.clamp(2 * 1_514, 65_536) as u32
}

/// Sink addresses beyond its own: a flow of traffic split by destination each needs
/// one, and an iperf3 server and client of its own; past this, the scenario is
/// better run in the simulator.
pub const SINK_EXTRA_MAX: usize = 64;

pub fn mac_string(mac: [u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

impl Plan {
    /// Names and addresses for `policy`, unique to run `id` (e.g. the pid).
    pub fn new(policy: &Policy, id: u32) -> Result<Plan, LabError> {
        let prefix = format!("nsl{}", id % 10_000);
        if policy.tenants.len() > 250 {
            return Err(LabError::Unsupported(format!(
                "the lab builds one namespace per tenant and handles up to 250; this policy has {}",
                policy.tenants.len()
            )));
        }
        let mut declared = Vec::new();
        for t in &policy.tenants {
            match t.match_src {
                Some(cidr) => match cidr.addr {
                    IpAddr::V4(addr) => declared.push(Some(Prefix {
                        addr,
                        len: cidr.prefix_len,
                    })),
                    IpAddr::V6(_) => {
                        return Err(LabError::Unsupported(format!(
                            "tenant {}: the lab runs IPv4 only, `match.src` is IPv6",
                            t.name
                        )));
                    }
                },
                None => declared.push(None),
            }
        }
        // A private /16 for the sink and the tenants without a source prefix, clear
        // of every declared one.
        let start = 66 + (id % 100) as u8;
        let lab_net = (0..=255u8)
            .map(|k| start.wrapping_add(k))
            .map(|b| Prefix {
                addr: Ipv4Addr::new(10, b, 0, 0),
                len: 16,
            })
            .find(|net| declared.iter().flatten().all(|p| !p.overlaps(*net)))
            .ok_or_else(|| {
                LabError::Unsupported("the tenants' prefixes cover all of 10.0.0.0/8".into())
            })?;
        let [_, b, _, _] = lab_net.addr.octets();
        let tenants = declared
            .iter()
            .enumerate()
            .map(|(i, declared)| {
                let (addr, prefix) = match declared {
                    Some(p) if p.len >= 31 => (p.addr, *p),
                    Some(p) => (Ipv4Addr::from(u32::from(p.network()) + 2), *p),
                    None => {
                        let addr = Ipv4Addr::new(10, b, i as u8 + 1, 2);
                        (addr, Prefix { addr, len: 24 })
                    }
                };
                TenantNet {
                    ns: format!("{prefix}-t{i}", prefix = format_args!("nsl{}", id % 10_000)),
                    port: format!("nsl{}t{i}", id % 10_000),
                    addr,
                    prefix,
                    mac: [0x02, 0x6c, 0x00, 0x00, i as u8, 0x02],
                }
            })
            .collect();
        Ok(Plan {
            tenants,
            sink_ns: format!("{prefix}-sink"),
            sink_addr: Ipv4Addr::new(10, b, 0, 1),
            sink_extra: Vec::new(),
            sink_mac: [0x02, 0x6c, 0x00, 0x00, 0xff, 0x01],
            engine_ns: format!("{prefix}-eng"),
            uplink: format!("{prefix}up"),
            bridge: format!("{prefix}br"),
            gso_max_bytes: gso_max_bytes(policy.link.rate_bps),
            prefix,
        })
    }

    /// One more sink address, `what` saying for what (for the error past
    /// [`SINK_EXTRA_MAX`]). Tenants' own addresses are in `10.x.1.0` and up, so
    /// `10.x.0.2` and up is free.
    pub fn add_sink_address(&mut self, what: &str) -> Result<Ipv4Addr, LabError> {
        if self.sink_extra.len() >= SINK_EXTRA_MAX {
            return Err(LabError::Unsupported(format!(
                "{what}; the lab gives out at most {SINK_EXTRA_MAX} sink addresses besides its own; use fewer flows or traffics"
            )));
        }
        let addr = Ipv4Addr::from(u32::from(self.sink_addr) + 1 + self.sink_extra.len() as u32);
        self.sink_extra.push(addr);
        Ok(addr)
    }

    /// Every namespace of the plan.
    pub fn namespaces(&self) -> Vec<String> {
        let mut all: Vec<String> = self.tenants.iter().map(|t| t.ns.clone()).collect();
        all.push(self.sink_ns.clone());
        all.push(self.engine_ns.clone());
        all
    }
}

/// Live namespaces; dropping deletes them (unless kept for inspection). `P` is
/// the layout they were built from: one host's [`Plan`], or a run across hosts'
/// ([`crate::hosts::HostsPlan`]).
pub struct Topology<P = Plan> {
    pub plan: P,
    /// The run's prefix, whose owner record goes with the namespaces.
    prefix: String,
    created: Vec<String>,
    keep: bool,
}

fn setup_error(e: std::io::Error) -> LabError {
    LabError::Setup(e.to_string())
}

impl<P> Topology<P> {
    /// Claims run `prefix` and builds `plan` with `build`; what `build` created
    /// before it failed is deleted.
    pub fn create_with(
        plan: P,
        prefix: &str,
        build: impl FnOnce(&mut Topology<P>) -> std::io::Result<()>,
    ) -> Result<Topology<P>, LabError> {
        owner::claim(prefix).map_err(setup_error)?;
        let mut topology = Topology {
            plan,
            prefix: prefix.to_string(),
            created: Vec::new(),
            keep: false,
        };
        build(&mut topology).map_err(setup_error)?;
        Ok(topology)
    }

    /// Leave the namespaces in place when dropped; returns the command that deletes them.
    pub fn keep(&mut self) -> String {
        self.keep = true;
        self.created
            .iter()
            .map(|ns| format!("ip netns delete {ns}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    pub fn add_ns(&mut self, name: &str) -> std::io::Result<()> {
        netns::add(name)?;
        self.created.push(name.to_string());
        // No IPv6: no router solicitations or DAD frames through the engine.
        netns::exec_in(name, "sysctl", &["-qw", "net.ipv6.conf.all.disable_ipv6=1"])?;
        netns::exec_in(
            name,
            "sysctl",
            &["-qw", "net.ipv6.conf.default.disable_ipv6=1"],
        )?;
        netns::ip(&["-n", name, "link", "set", "lo", "up"])?;
        Ok(())
    }

    pub fn offloads(ns: &str, dev: &str) -> std::io::Result<()> {
        netns::exec_in(
            ns,
            "ethtool",
            &[
                "-K", dev, "tx", "on", "sg", "on", "tso", "on", "gso", "on", "gro", "off",
            ],
        )
        .map(drop)
    }
}

impl Topology {
    /// Builds the namespaces, veths, addresses, routes and neighbours of `plan`.
    /// `bridge`: join the engine's ports with a Linux bridge (for `linux-htb`).
    pub fn create(plan: Plan, bridge: bool) -> Result<Topology, LabError> {
        let prefix = plan.prefix.clone();
        Topology::create_with(plan, &prefix, |t| t.build(bridge))
    }

    fn build(&mut self, bridge: bool) -> std::io::Result<()> {
        let plan = self.plan.clone();
        let eng = plan.engine_ns.as_str();
        self.add_ns(eng)?;
        self.add_ns(&plan.sink_ns)?;
        Self::link_sink(&plan)?;
        for t in &plan.tenants {
            self.add_ns(&t.ns)?;
            Self::link_tenant(&plan, t)?;
            Self::route_tenant_and_sink(&plan, t)?;
            netns::ip(&["-n", eng, "link", "set", &t.port, "up"])?;
            Self::route_sink_extra(&plan, &t.ns)?;
        }
        if !plan.sink_extra.is_empty() {
            let addresses: Vec<String> = plan
                .sink_extra
                .iter()
                .map(|a| format!("addr add {a}/32 dev eth0"))
                .collect();
            netns::ip_batch(&plan.sink_ns, &addresses)?;
        }
        if bridge {
            self.build_bridge()?;
        }
        Ok(())
    }

    /// The sink's veth to the engine's uplink, with the sink's address, both ends up.
    fn link_sink(plan: &Plan) -> std::io::Result<()> {
        let (eng, sink) = (plan.engine_ns.as_str(), plan.sink_ns.as_str());
        netns::ip(&[
            "-n",
            eng,
            "link",
            "add",
            &plan.uplink,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "address",
            &mac_string(plan.sink_mac),
            "netns",
            sink,
        ])?;
        netns::ip(&[
            "-n",
            sink,
            "addr",
            "add",
            &format!("{}/16", plan.sink_addr),
            "dev",
            "eth0",
        ])?;
        Self::offloads(eng, &plan.uplink)?;
        Self::offloads(sink, "eth0")?;
        netns::ip(&["-n", sink, "link", "set", "eth0", "up"])?;
        netns::ip(&["-n", eng, "link", "set", &plan.uplink, "up"]).map(drop)
    }

    /// Tenant `t`'s veth to its port on the engine, with its address and GSO size,
    /// its end up.
    fn link_tenant(plan: &Plan, t: &TenantNet) -> std::io::Result<()> {
        let eng = plan.engine_ns.as_str();
        netns::ip(&[
            "-n",
            eng,
            "link",
            "add",
            &t.port,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "address",
            &mac_string(t.mac),
            "netns",
            &t.ns,
        ])?;
        netns::ip(&[
            "-n",
            &t.ns,
            "addr",
            "add",
            &format!("{}/{}", t.addr, t.prefix.len),
            "dev",
            "eth0",
        ])?;
        Self::offloads(eng, &t.port)?;
        Self::offloads(&t.ns, "eth0")?;
        netns::ip(&[
            "-n",
            &t.ns,
            "link",
            "set",
            "eth0",
            "gso_max_size",
            &plan.gso_max_bytes.to_string(),
        ])?;
        netns::ip(&["-n", &t.ns, "link", "set", "eth0", "up"]).map(drop)
    }

    /// Routes and permanent neighbours from tenant `t` to the sink's address and
    /// from the sink back to the tenant's prefix: no ARP crosses the engine.
    fn route_tenant_and_sink(plan: &Plan, t: &TenantNet) -> std::io::Result<()> {
        let sink = plan.sink_ns.as_str();
        let sink_addr = plan.sink_addr.to_string();
        let addr = t.addr.to_string();
        netns::ip(&[
            "-n",
            &t.ns,
            "route",
            "replace",
            &format!("{sink_addr}/32"),
            "dev",
            "eth0",
        ])?;
        netns::ip(&[
            "-n",
            &t.ns,
            "neigh",
            "replace",
            &sink_addr,
            "lladdr",
            &mac_string(plan.sink_mac),
            "dev",
            "eth0",
            "nud",
            "permanent",
        ])?;
        netns::ip(&[
            "-n",
            sink,
            "route",
            "replace",
            &t.prefix.to_string(),
            "dev",
            "eth0",
        ])?;
        netns::ip(&[
            "-n",
            sink,
            "neigh",
            "replace",
            &addr,
            "lladdr",
            &mac_string(t.mac),
            "dev",
            "eth0",
            "nud",
            "permanent",
        ])
        .map(drop)
    }

    /// Routes and neighbours in namespace `ns` to the sink's further addresses.
    fn route_sink_extra(plan: &Plan, ns: &str) -> std::io::Result<()> {
        if plan.sink_extra.is_empty() {
            return Ok(());
        }
        let sink_mac = mac_string(plan.sink_mac);
        let routes: Vec<String> = plan
            .sink_extra
            .iter()
            .flat_map(|a| {
                [
                    format!("route replace {a}/32 dev eth0"),
                    format!("neigh replace {a} lladdr {sink_mac} dev eth0 nud permanent"),
                ]
            })
            .collect();
        netns::ip_batch(ns, &routes)
    }

    /// Joins the engine's ports with a Linux bridge, on a topology created without
    /// one (the benchmark runs the engine first, then the kernel, on one topology).
    pub fn add_bridge(&mut self) -> Result<(), LabError> {
        self.build_bridge().map_err(setup_error)
    }

    /// Deletes the bridge of [`Topology::add_bridge`] (and any qdisc on the uplink):
    /// the ports are bare again, for the engine.
    pub fn remove_bridge(&mut self) -> Result<(), LabError> {
        let eng = self.plan.engine_ns.as_str();
        netns::ip(&["-n", eng, "link", "del", &self.plan.bridge]).map_err(setup_error)?;
        // No root qdisc is fine: the uplink may never have had one.
        let _ = netns::command(
            "tc",
            &["-n", eng, "qdisc", "del", "dev", &self.plan.uplink, "root"],
        );
        Ok(())
    }

    fn build_bridge(&self) -> std::io::Result<()> {
        let plan = &self.plan;
        let eng = plan.engine_ns.as_str();
        let br = plan.bridge.as_str();
        netns::ip(&[
            "-n",
            eng,
            "link",
            "add",
            br,
            "type",
            "bridge",
            "stp_state",
            "0",
            "forward_delay",
            "0",
            // No IGMP snooping: the bridge would join a group and send IGMP
            // reports to the sink, frames no tenant sent.
            "mcast_snooping",
            "0",
        ])?;
        for port in plan.tenants.iter().map(|t| &t.port).chain([&plan.uplink]) {
            netns::ip(&["-n", eng, "link", "set", port, "master", br])?;
        }
        netns::ip(&["-n", eng, "link", "set", br, "up"]).map(drop)
    }
}

impl<P> Drop for Topology<P> {
    fn drop(&mut self) {
        let mut left = false;
        if !self.keep {
            for ns in self.created.iter().rev() {
                if let Err(e) = netns::delete(ns) {
                    eprintln!("nicsched lab: could not delete namespace {ns}: {e}");
                    left = true;
                }
            }
        }
        // What could not be deleted stays owned by this process, so the next run
        // tries again once it is gone. Kept namespaces lose their owner: no later
        // run removes what the operator asked to keep ([`remove_leftovers`] leaves
        // unowned ones alone).
        if left {
            return;
        }
        if let Err(e) = owner::release(&self.prefix) {
            eprintln!(
                "nicsched lab: could not remove the owner record of {}: {e}",
                self.prefix
            );
        }
    }
}

/// How long a killed leftover program may take to end.
const KILL_GRACE: Duration = Duration::from_secs(5);

/// The run prefix (`nsl<id>`) of a lab name, namespace (`nsl<id>-...`) or interface
/// (`nsl<id>t0`, `nsl<id>up`, ...).
fn run_prefix(name: &str) -> Option<&str> {
    let rest = name.strip_prefix("nsl")?;
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    (digits > 0).then(|| &name[..3 + digits])
}

/// What [`remove_leftovers`] did.
#[derive(Debug, Default)]
pub struct Leftovers {
    /// Namespaces, processes and interfaces removed.
    pub removed: usize,
    /// Things it could not remove (each was reported).
    pub failed: usize,
    /// Lab namespaces no run owns (kept with `--keep`, or made by a nicsched that
    /// recorded no owner): left alone.
    pub unowned: Vec<String>,
}

/// Removes what runs whose owner process is gone left behind: for each such run,
/// the processes in its namespaces (killed), the namespaces (with their veths), any
/// interface of its prefix in this namespace, and its owner record. Runs whose owner
/// lives are not touched, nor namespaces no record claims. `say` hears one line
/// per thing removed or not removable.
pub fn remove_leftovers(say: &mut dyn FnMut(String)) -> Result<Leftovers, LabError> {
    let namespaces: Vec<String> = netns::list()
        .map_err(setup_error)?
        .into_iter()
        .filter(|n| run_prefix(n).is_some_and(|p| n[p.len()..].starts_with('-')))
        .collect();
    let records = owner::records().map_err(setup_error)?;
    let mut done = Leftovers::default();
    for ns in &namespaces {
        let prefix = run_prefix(ns).expect("filtered above");
        if !records.iter().any(|(p, _)| p == prefix) {
            done.unowned.push(ns.clone());
        }
    }
    let dead = records
        .iter()
        .filter(|(_, owner)| !owner.is_some_and(|o| o.is_alive()));
    for (prefix, owner) in dead {
        let whose = match owner {
            Some(o) => format!("run {prefix} of pid {}, which is gone", o.pid),
            None => format!("run {prefix}, whose owner record is unreadable"),
        };
        let mut failed = 0;
        let cannot = |what: String| format!("could not remove {what} ({whose})");
        for ns in namespaces.iter().filter(|n| run_prefix(n) == Some(prefix)) {
            match netns::pids(ns) {
                Ok(pids) => {
                    for pid in pids {
                        let name = process::name_of(pid);
                        match process::kill_and_wait(pid, KILL_GRACE) {
                            Ok(()) => {
                                say(format!("killed {name} (pid {pid}) in {ns} ({whose})"));
                                done.removed += 1;
                            }
                            Err(e) => {
                                say(cannot(format!("{name} (pid {pid}) in {ns}: {e}")));
                                failed += 1;
                            }
                        }
                    }
                }
                Err(e) => {
                    say(cannot(format!("the processes in {ns}: {e}")));
                    failed += 1;
                }
            }
            match netns::delete(ns) {
                Ok(()) => {
                    say(format!("removed namespace {ns} ({whose})"));
                    done.removed += 1;
                }
                Err(e) => {
                    say(cannot(format!("namespace {ns}: {e}")));
                    failed += 1;
                }
            }
        }
        let links = netns::links().map_err(setup_error)?;
        for link in links.iter().filter(|l| run_prefix(l) == Some(prefix)) {
            match netns::delete_link(link) {
                Ok(()) => {
                    say(format!("removed interface {link} ({whose})"));
                    done.removed += 1;
                }
                Err(e) => {
                    say(cannot(format!("interface {link}: {e}")));
                    failed += 1;
                }
            }
        }
        // A record outlives its run's names only while they could not be removed:
        // the next cleanup tries again.
        if failed == 0
            && let Err(e) = owner::release(prefix)
        {
            say(cannot(format!("the owner record of {prefix}: {e}")));
            failed += 1;
        }
        done.failed += failed;
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gso_frames_take_131_us_of_link_and_two_mtus_at_least() {
        assert_eq!(gso_max_bytes(1_000_000_000), 16_384);
        assert_eq!(gso_max_bytes(300_000_000), 4_915);
        assert_eq!(gso_max_bytes(100_000_000), 3_028);
        assert_eq!(gso_max_bytes(4_000_000_000), 65_536);
        assert_eq!(gso_max_bytes(10_000_000_000), 65_536);
    }

    #[test]
    fn names_fit_interfaces_and_addresses_avoid_declared_prefixes() {
        let policy = policy::parse_policy(
            r#"
link: { rate: 1Gbit }
tenants:
  - name: a
    match: { src: 10.66.0.0/16 }
  - name: b
"#,
            "p.yaml",
        )
        .unwrap();
        let plan = Plan::new(&policy, 123_456).unwrap();
        assert_eq!(plan.prefix, "nsl3456");
        for name in plan
            .tenants
            .iter()
            .map(|t| &t.port)
            .chain([&plan.uplink, &plan.bridge])
        {
            assert!(name.len() <= 15, "{name}");
        }
        // 3456 % 100 = 56: 10.122/16 is clear of 10.66/16.
        assert_eq!(plan.sink_addr, Ipv4Addr::new(10, 122, 0, 1));
        assert_eq!(plan.tenants[0].addr, Ipv4Addr::new(10, 66, 0, 2));
        assert_eq!(plan.tenants[1].addr, Ipv4Addr::new(10, 122, 2, 2));
        let clash = Plan::new(&policy, 0).unwrap();
        assert_ne!(clash.sink_addr.octets()[1], 66);
        assert!(plan.namespaces().iter().all(|n| n.starts_with("nsl3456-")));
    }

    #[test]
    fn sink_addresses_follow_the_sinks_own_up_to_the_bound() {
        let policy = policy::parse_policy(
            "link: { rate: 1Gbit }\ntenants:\n  - name: a\n  - name: b\n",
            "p.yaml",
        )
        .unwrap();
        let mut plan = Plan::new(&policy, 7).unwrap();
        let first = plan.add_sink_address("t").unwrap();
        assert_eq!(first, Ipv4Addr::new(10, 73, 0, 2));
        for _ in 1..SINK_EXTRA_MAX {
            plan.add_sink_address("t").unwrap();
        }
        let last = *plan.sink_extra.last().unwrap();
        assert_eq!(last, Ipv4Addr::new(10, 73, 0, 65));
        // Clear of every tenant's address.
        assert!(
            plan.tenants
                .iter()
                .all(|t| !plan.sink_extra.contains(&t.addr))
        );
        let error = plan.add_sink_address("traffic x").unwrap_err().to_string();
        assert!(
            error.contains("traffic x") && error.contains("at most 64"),
            "{error}"
        );
    }
}
